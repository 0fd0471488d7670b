//! kiln-runtime: tensors, the eager executor (the oracle) and the fused executor.

pub mod aot;
pub mod atomic_file;
pub mod backend;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_graph;
pub mod eager;
pub mod executor;
pub mod fused;
mod inline;
pub mod line_extern;
pub mod memory;
pub mod npy;
pub mod tensor;
pub mod tuning;

pub use tensor::{Storage, Tensor};
pub use tuning::{Stats, Tuning};

use thiserror::Error;

/// Errors from running a graph.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// A tensor's shape, strides or element count is unusable.
    #[error("shape: {0}")]
    Shape(String),
    /// The inputs do not match the graph's declared inputs.
    #[error("input {index}: expected {expected}, got {got}")]
    InputMismatch {
        /// Input position.
        index: usize,
        /// What the graph declares.
        expected: String,
        /// What was passed.
        got: String,
    },
    /// Wrong number of inputs.
    #[error("graph has {expected} inputs, {got} were given")]
    InputCount {
        /// What the graph declares.
        expected: usize,
        /// What was passed.
        got: usize,
    },
    /// The graph needs more memory than the machine has available.
    #[error("{what} needs {needed} bytes at its peak, only {available} are available")]
    OutOfMemory {
        /// What was about to run.
        what: String,
        /// Estimated peak bytes.
        needed: u64,
        /// Bytes the OS reported as available.
        available: u64,
    },
    /// Code generation failed.
    #[error(transparent)]
    Codegen(#[from] kiln_codegen::CodegenError),
    /// An extern line function is not registered, does not accept the call, or failed.
    #[error("extern line function `{name}`: {message}")]
    Extern {
        /// The extern's name.
        name: String,
        /// What went wrong.
        message: String,
    },
}
