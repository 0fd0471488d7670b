//! kiln-codegen: from fused groups to machine code.
//!
//! * [`lower`] turns a fused group of the graph into the target-neutral [`kernel::Kernel`].
//! * [`cpu`] renders a kernel with Cranelift for the host CPU.
//! * [`ptx`] renders a kernel as PTX text for CUDA.

pub mod cpu;
pub mod fault;
pub mod kernel;
pub mod kernel_print;
pub mod lower;
pub mod ptx;
pub mod validate;

use thiserror::Error;

pub use fault::Fault;
pub use kernel::Kernel;

/// Options that change generated code. Part of the kernel cache key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// A planted miscompilation (fuzzer tests only); `None` in normal use.
    pub fault: Option<Fault>,
    /// Turns off the CPU backend's work sharing between neighbouring columns (lane
    /// shuffles of shift-equivalent values, see `cpu::shift`); for A/B measurements and
    /// tests. The output is the same bits either way.
    pub no_column_sharing: bool,
    /// Most CLIF instructions one step of a shared vector loop may have (stage size times
    /// output vectors per step); `None`: [`cpu::STEP_CODE_BUDGET`]. Bigger budgets allow
    /// bigger steps, which run faster and compile slower (the runtime's tiered compile
    /// uses a bigger one in the background). The output is the same bits either way.
    pub step_code_budget: Option<usize>,
    /// Turns off the CPU backend's edge vectors (the first and last columns of a row
    /// as vectors, see `cpu::edge`); for A/B measurements and tests. The output is
    /// the same bits either way.
    pub no_edge_vectors: bool,
    /// Turns off the carrying of shared values from one step of the CPU backend's shared
    /// vector loop to the next (see `cpu::shift`); for A/B measurements and tests. The
    /// output is the same bits either way.
    pub no_carried_values: bool,
    /// Turns off the runtime's specialisation for clean inputs with clear sign bits
    /// (integer picks, see [`cpu::compile_nonneg`]); for A/B measurements and tests. The
    /// output is the same bits either way.
    pub no_integer_picks: bool,
    /// Compiles every stage as it is instead of letting max stages run the code of min
    /// stages on negated values (`cpu::dual`: fewer functions to compile, a slower kernel).
    /// The runtime's tiered compile sets it for its background compile. The output is the
    /// same bits either way.
    pub no_dual_stages: bool,
}

/// Errors from lowering or code generation.
#[derive(Debug, Error)]
pub enum CodegenError {
    /// The group cannot be expressed in the kernel form (a scheduler bug or an unsupported
    /// construct); the message says which node and why.
    #[error("lowering: {0}")]
    Lower(String),
    /// Cranelift rejected the generated function or the JIT failed.
    #[error("cranelift: {0}")]
    Cranelift(String),
    /// The target cannot run extern line functions (they are host Rust functions); the PTX
    /// renderer refuses every `KernelBody::Extern`.
    #[error("extern line function `{name}` cannot run on this target (CPU only)")]
    ExternUnsupported {
        /// The extern's registered name.
        name: String,
    },
    /// Code loaded from elsewhere (a cache entry) lacks a function the kernel needs.
    #[error("loaded code: {0}")]
    Loaded(String),
    /// A CPU target that cannot be compiled for (unknown triple, architecture or feature
    /// level; see `cpu::CpuTarget::parse`).
    #[error("CPU target: {0}")]
    Target(String),
}
