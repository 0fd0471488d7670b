//! kiln: a JIT kernel compiler and operator-fusion engine for image-processing operators.
//!
//! Build a graph with [`ir::GraphBuilder`] (or an operator from [`ops`]), then run it op by op
//! with [`eager`] (the oracle) or compiled and fused with an [`Engine`]. Both give the same
//! bits.
//!
//! To embed kiln, start at [`embed`]: typed operators ([`Op`]) chained in a [`Pipeline`] and
//! run on `ndarray` arrays, with one [`Error`].

pub mod bench;
pub mod embed;
pub mod fuzz;

pub use embed::{Error, Mode, Op, Pipeline, Window};
pub use kiln_codegen as codegen;
pub use kiln_ir as ir;
pub use kiln_ops as ops;
pub use kiln_runtime as runtime;
pub use kiln_runtime::eager;
pub use kiln_runtime::fused::{CompiledGraph, Engine};
pub use kiln_runtime::{RuntimeError, Tensor};
