//! kiln: a JIT kernel compiler and operator-fusion engine for image-processing operators.
pub use kiln_ir as ir;
pub use kiln_ops as ops;
pub use kiln_runtime as runtime;
