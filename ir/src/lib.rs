//! kiln-ir: the tensor-level dataflow IR of kiln.
//!
//! A [`Graph`] is built with a [`GraphBuilder`], which validates every node and infers its
//! [`TensorType`]. [`semantics`] defines the scalar meaning of every operation, the reference
//! both executors follow. [`passes`] holds the graph passes: CSE, DCE, network pruning, column
//! sharing, window decomposition and the fusion scheduler. [`network`] builds comparator
//! networks (Batcher sorters and selectors). [`printer`] writes the readable text form.

pub mod builder;
pub mod error;
pub mod extern_call;
pub mod graph;
pub mod line;
pub mod math;
pub mod math_ref;
pub mod network;
pub mod parser;
pub mod passes;
pub mod printer;
pub mod semantics;
pub mod types;

pub use builder::GraphBuilder;
pub use error::BuildError;
pub use extern_call::ExternCall;
pub use graph::{BinaryOp, Footprint, Graph, Node, NodeId, NodeKind, ReduceOp, UnaryOp};
pub use line::{LineKeep, LineOp, LineProgram};
pub use types::{Border, DType, Scalar, TensorType};
