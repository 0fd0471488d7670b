//! The error type of every operator builder and of the registry.

use kiln_ir::BuildError;
use thiserror::Error;

/// Why an operator could not be built. Every message is one line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OpError {
    /// The underlying graph builder rejected a node.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The input has the wrong dtype or number of spatial dims for the operator.
    #[error("{op}: {problem}")]
    BadInput {
        /// Operator name.
        op: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A window size is zero, even where only odd sizes are allowed, or has the wrong rank.
    #[error("{op}: bad size {size:?}: {problem}")]
    BadSize {
        /// Operator name.
        op: &'static str,
        /// The size as given.
        size: Vec<usize>,
        /// What is wrong.
        problem: String,
    },
    /// An origin outside scipy's range `-(size/2) <= origin <= (size-1)/2`, or of wrong rank.
    #[error("{op}: bad origin {origin:?}: {problem}")]
    BadOrigin {
        /// Operator name.
        op: &'static str,
        /// The origin as given.
        origin: Vec<i64>,
        /// What is wrong.
        problem: String,
    },
    /// A footprint whose shape does not match its mask, the input's rank, or is empty.
    #[error("{op}: bad footprint: {problem}")]
    BadFootprint {
        /// Operator name.
        op: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// A border mode name that is not one of scipy's.
    #[error("{op}: unknown mode `{mode}` (expected constant, reflect, mirror, nearest, wrap, grid-constant, grid-mirror or grid-wrap)")]
    UnknownMode {
        /// Operator name.
        op: &'static str,
        /// The name given.
        mode: String,
    },
    /// The registry does not know the operator.
    #[error("unknown operator `{name}` (known: {known})")]
    UnknownOp {
        /// The name given.
        name: String,
        /// The known names, comma separated.
        known: String,
    },
    /// The operator does not take a parameter of this name.
    #[error("{op}: unknown parameter `{name}` (accepted: {accepted})")]
    UnknownParam {
        /// Operator name.
        op: &'static str,
        /// The parameter name given.
        name: String,
        /// The accepted names, comma separated.
        accepted: String,
    },
    /// A parameter value that does not parse or is out of range, or a missing/duplicate one.
    #[error("{op}: parameter `{name}`: {problem}")]
    BadParam {
        /// Operator name.
        op: &'static str,
        /// The parameter name.
        name: String,
        /// What is wrong.
        problem: String,
    },
}
