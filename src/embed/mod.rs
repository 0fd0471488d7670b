//! The embedding facade: typed operators run on `ndarray` arrays, with one error type.
//!
//! Scope: [`Op`] (an operator with scipy's or kornia's parameters as Rust values),
//! [`Pipeline`] (a chain of ops compiled into fused kernels once per dtype, rank and shape
//! class, the kernels once per rank), run on `ndarray` views, returning an `ArrayD` or writing into a
//! caller's view, and [`Error`]. Arrays are read as scipy reads them: every axis is spatial
//! unless [`Pipeline::axes`] names the spatial ones (kornia's `median_blur` reads the last
//! two). Exactness: results are the fused kernels' bits, which equal the eager oracle's.
//! Inputs are read in place when their strides allow ([`input`]); the graph is built once
//! per dtype, rank and shape class ([`Pipeline`]). Limits: negative strides are copied once;
//! `run_into` writes a row-major output directly, other layouts through one copy.
//!
//! ```
//! use kiln::{Mode, Op, Pipeline};
//! let x = ndarray::ArrayD::<f32>::from_shape_fn(vec![5, 6, 7], |i| (i[0] + 2 * i[1] + 3 * i[2]) as f32);
//! let y = Op::median_filter(3).mode(Mode::Nearest).run(x.view())?;
//! let z = Pipeline::new().then(Op::grey_erosion([1, 3, 3])).axes(&[0, 1, 2]).run(x.view())?;
//! assert_eq!((y.shape(), z.shape()), (x.shape(), x.shape()));
//! # Ok::<(), kiln::Error>(())
//! ```

pub mod distance;
pub mod element;
pub mod error;
pub mod input;
pub mod layout;
pub mod morphology;
pub mod op;
pub mod pipeline;
// Rank filters of any window size (helper rank).
pub mod rank;
pub mod sinkhorn;

pub use distance::{distance_transform_bf, distance_transform_cdt, distance_transform_edt};
pub use element::Element;
pub use error::{Error, Result};
pub use kiln_ops::Window;
pub use layout::Layout;
pub use morphology::{
    binary_fill_holes, binary_morphology, binary_propagation, BinaryMorphology, BinaryOptions,
};
pub use op::{IntoWindow, Mode, Op, OpKind};
pub use pipeline::{shared_engine, Pipeline};
pub use rank::{BlurPadding, RankOptions};
pub use sinkhorn::{cost_matrix, sinkhorn, SinkhornResult};
