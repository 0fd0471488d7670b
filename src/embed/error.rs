//! `kiln::Error`: the one error type of the embedding facade.
//!
//! Scope: every failure of [`crate::embed`] (building an operator, checking an array, running
//! kernels, writing an output) is one variant here, each with a one-line message that the
//! Python binding passes on unchanged. Limits: the variants wrap the lower crates' errors
//! transparently, so their messages are those crates' messages.

use thiserror::Error;

/// Why an embedded call failed. Bad input from the caller is [`Error::Input`],
/// [`Error::Output`] or [`Error::Op`]; an internal invariant that broke is [`Error::Internal`],
/// never reported as a shape error.
#[derive(Debug, Error)]
pub enum Error {
    /// An operator rejected its parameters or the input's dtype or rank.
    #[error(transparent)]
    Op(#[from] kiln_ops::OpError),
    /// The graph builder rejected a node (bad parameters caught late).
    #[error(transparent)]
    Build(#[from] kiln_ir::BuildError),
    /// Running the kernels failed (out of memory, code generation).
    #[error(transparent)]
    Runtime(#[from] kiln_runtime::RuntimeError),
    /// The input array or the call's arguments are unusable (zero-size, bad axes, empty
    /// pipeline, unknown mode...).
    #[error("{0}")]
    Input(String),
    /// A caller-provided output does not fit the result (shape).
    #[error("output: {0}")]
    Output(String),
    /// A broken internal invariant (a bug in kiln, not in the call).
    #[error("internal error: {0}")]
    Internal(String),
}

/// `Result` with [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
