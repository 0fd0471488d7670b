//! Errors for invalid graph construction.

use thiserror::Error;

use crate::types::DType;

/// Why a node could not be added to a graph. Each error names the node (the id it would have
/// had, and its kind) and the problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BuildError {
    /// An operand id does not exist in this graph.
    #[error("node %{node} ({kind}): operand %{operand} does not exist")]
    UnknownOperand {
        /// The node being built.
        node: u32,
        /// Its kind.
        kind: &'static str,
        /// The missing operand id.
        operand: u32,
    },
    /// Operands have different shapes where equal shapes are required.
    #[error("node %{node} ({kind}): shape mismatch {left:?} vs {right:?}")]
    ShapeMismatch {
        /// The node being built.
        node: u32,
        /// Its kind.
        kind: &'static str,
        /// First shape.
        left: Vec<usize>,
        /// Second shape.
        right: Vec<usize>,
    },
    /// An operand has a dtype the operation does not accept.
    #[error("node %{node} ({kind}): {problem}")]
    DType {
        /// The node being built.
        node: u32,
        /// Its kind.
        kind: &'static str,
        /// What is wrong, in words.
        problem: String,
    },
    /// A shape is not `[B, C, S1..Sd]` with `1 <= d <= 8`, has a zero dimension, or is too big.
    #[error("node %{node} ({kind}): bad shape {shape:?}: {problem}")]
    BadShape {
        /// The node being built.
        node: u32,
        /// Its kind.
        kind: &'static str,
        /// The offending shape.
        shape: Vec<usize>,
        /// What is wrong.
        problem: String,
    },
    /// Any other invalid argument: offsets, axes, network wiring, footprints.
    #[error("node %{node} ({kind}): {problem}")]
    Invalid {
        /// The node being built.
        node: u32,
        /// Its kind.
        kind: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The graph has no outputs, or an output id does not exist.
    #[error("graph: {0}")]
    Graph(String),
}

impl BuildError {
    /// Shorthand for an [`BuildError::Invalid`].
    pub(crate) fn invalid(node: u32, kind: &'static str, problem: impl Into<String>) -> Self {
        BuildError::Invalid {
            node,
            kind,
            problem: problem.into(),
        }
    }

    /// Shorthand for a [`BuildError::DType`] error.
    pub(crate) fn dtype(node: u32, kind: &'static str, problem: impl Into<String>) -> Self {
        BuildError::DType {
            node,
            kind,
            problem: problem.into(),
        }
    }
}

/// Names a dtype list for error messages.
pub(crate) fn dtypes(ds: &[DType]) -> String {
    ds.iter().map(|d| d.name()).collect::<Vec<_>>().join("/")
}
