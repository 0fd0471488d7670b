//! Guarded variants: a kernel compiled again under an assumption about its inputs (a
//! [`Guard`]), attached to the general kernel as a [`GuardedVariant`]. The runtime's
//! stencil scheduler runs a block with a variant only after checking that the input rows
//! the block read satisfy its guard (one hook, the runtime's `stencil::guards`), and with
//! the general kernel otherwise.
//!
//! Exactness: each guard's variant equals the general kernel bit for bit on the inputs its
//! guard admits. [`Guard::CleanInputs`]: no NaN, infinity or -0 (see [`clean_kernel`]: NaN
//! guards fold and float min/max become one plain pick, whose result has the same bits on
//! such values). [`Guard::NonNegative`]: clean with a clear sign bit (see
//! `clean::nonneg_kernel`: the plain picks become integer picks of the bits, which order
//! such floats as the floats). On inputs outside the guard a variant computes other values,
//! which the runtime never keeps.
//!
//! Limits: guards apply to stencil kernels only (scans and axis reductions have no
//! variants); a variant is compiled only where it pays (`None` from [`compile_variant`]).
//!
//! [`clean_kernel`]: super::clean_kernel

use super::{compile_clean, compile_nonneg, CpuKernel, Purity};
use crate::kernel::Kernel;
use crate::{CodegenError, CompileOptions};

/// An assumption about a kernel's inputs under which a variant of the kernel is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Guard {
    /// Every float input is finite with a clear sign bit (`+0` up to the largest finite
    /// float): the integer-pick variant ([`compile_nonneg`]).
    NonNegative,
    /// Every float input is clean: no NaN, infinity or -0 ([`compile_clean`]).
    CleanInputs,
}

impl Guard {
    /// Every guard, the most demanding (purest) first: the order the runtime tries them in.
    pub const ALL: [Guard; 2] = [Guard::NonNegative, Guard::CleanInputs];

    /// The least [`Purity`] of input rows under which the guard holds.
    pub fn purity(self) -> Purity {
        match self {
            Guard::NonNegative => Purity::NonNeg,
            Guard::CleanInputs => Purity::Clean,
        }
    }

    /// The guard's position in [`Guard::ALL`] (for per-guard counters).
    pub fn index(self) -> usize {
        match self {
            Guard::NonNegative => 0,
            Guard::CleanInputs => 1,
        }
    }

    /// Whether `options` let this guard's variant be compiled (`no_integer_picks` turns
    /// off [`Guard::NonNegative`]).
    pub fn enabled(self, options: &CompileOptions) -> bool {
        match self {
            Guard::NonNegative => !options.no_integer_picks,
            Guard::CleanInputs => true,
        }
    }

    /// The guard a variant may only be attached beside: the integer-pick variant runs
    /// after its clean variant's check, so it goes with a [`Guard::CleanInputs`] variant.
    pub fn needs(self) -> Option<Guard> {
        match self {
            Guard::NonNegative => Some(Guard::CleanInputs),
            Guard::CleanInputs => None,
        }
    }
}

/// A kernel's variant compiled under a [`Guard`]: its results equal the general kernel's on
/// inputs the guard admits.
pub struct GuardedVariant {
    /// The assumption the variant was compiled under.
    pub guard: Guard,
    /// The variant's code.
    pub kernel: CpuKernel,
}

/// Compiles `kernel`'s variant under `guard`; `None` when it would not pay or does not
/// apply (see [`compile_clean`], [`compile_nonneg`]).
pub fn compile_variant(
    kernel: &Kernel,
    guard: Guard,
    options: &CompileOptions,
) -> Result<Option<CpuKernel>, CodegenError> {
    match guard {
        Guard::CleanInputs => compile_clean(kernel, options),
        Guard::NonNegative => compile_nonneg(kernel, options),
    }
}

/// The variants of `compiled` (one per guard at most, any order) that may be attached
/// together: those whose [`Guard::needs`] is among them, in [`Guard::ALL`] order.
pub fn attachable(compiled: Vec<GuardedVariant>) -> Vec<GuardedVariant> {
    let present: Vec<Guard> = compiled.iter().map(|v| v.guard).collect();
    let mut kept: Vec<GuardedVariant> = compiled
        .into_iter()
        .filter(|v| v.guard.needs().is_none_or(|g| present.contains(&g)))
        .collect();
    kept.sort_by_key(|v| v.guard.index());
    kept.dedup_by_key(|v| v.guard);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_are_ordered_purest_first_and_indexed_by_position() {
        for (i, g) in Guard::ALL.iter().enumerate() {
            assert_eq!(g.index(), i);
        }
        assert!(Guard::ALL.windows(2).all(|w| w[0].purity() > w[1].purity()));
        assert_eq!(Guard::CleanInputs.purity(), Purity::Clean);
        assert_eq!(Guard::NonNegative.purity(), Purity::NonNeg);
    }

    #[test]
    fn no_integer_picks_turns_off_the_non_negative_guard_only() {
        let off = CompileOptions {
            no_integer_picks: true,
            ..Default::default()
        };
        assert!(!Guard::NonNegative.enabled(&off));
        assert!(Guard::CleanInputs.enabled(&off));
        assert!(Guard::ALL
            .iter()
            .all(|g| g.enabled(&CompileOptions::default())));
    }
}
