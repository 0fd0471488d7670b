//! Deliberate miscompilations, planted only by tests that prove the fuzzer and the
//! differential suite catch real bugs. Never set in normal use.

/// A planted bug the code generators apply when asked through [`crate::CompileOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The first min/max pair that forms a comparator (a `min(a, b)` and `max(a, b)` of the
    /// same operands) has its outputs swapped.
    SwapComparator,
    /// At the right edge (the last columns of the border path), non-constant border modes
    /// use `nearest` instead of the stated mode.
    WrongBorderRightEdge,
    /// Float min/max drop the NaN mask: a NaN operand no longer forces a NaN result.
    DropNanMask,
    /// Float min/max use Cranelift `fmin`/`fmax` (or the PTX `min`/`max` instructions)
    /// instead of kiln's documented rule.
    FminSemantics,
}

impl Fault {
    /// Every fault, for tests.
    pub const ALL: [Fault; 4] = [
        Fault::SwapComparator,
        Fault::WrongBorderRightEdge,
        Fault::DropNanMask,
        Fault::FminSemantics,
    ];
}
