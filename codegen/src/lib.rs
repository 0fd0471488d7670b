//! kiln-codegen: from fused groups to machine code.
//!
//! * [`lower`] turns a fused group of the graph into the target-neutral [`kernel::Kernel`].
//! * [`cpu`] renders a kernel with Cranelift for the host CPU.
//! * [`ptx`] renders a kernel as PTX text for CUDA.

pub mod cpu;
pub mod kernel;
pub mod lower;

use thiserror::Error;

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
}
