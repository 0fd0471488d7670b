//! Distance transforms on `ndarray` views, as scipy.ndimage calls them: the whole array is one
//! image (every axis spatial, 1 to 8 axes), indices come back as `(ndim,) + shape`.
//!
//! Scope: [`distance_transform_edt`], [`distance_transform_cdt`], [`distance_transform_bf`]
//! over any [`Truth`] element type (floats, integers, bool; truth-tested as numpy does: NaN is
//! true, -0.0 false), strided views included. They run the fused (parallel) drivers of
//! `kiln_ops::distance` on the [`shared_engine`]'s threads.
//!
//! Exactness: the results are `kiln_ops::distance`'s, bit for bit scipy 1.17's (golden tests
//! in ops/tests/distance_golden.rs); the parallel drivers equal the reference ones.
//!
//! Limits: the input's truth values are copied once into a mask; every axis must be
//! non-empty and the element count must fit in `i32` (scipy's index type).
//!
//! ```
//! use kiln::embed::distance::{distance_transform_edt, distance_transform_cdt, CdtMetric};
//! let x = ndarray::arr2(&[[0u8, 1, 1], [1, 1, 1], [1, 1, 0]]).into_dyn();
//! let (d, i) = distance_transform_edt(x.view(), Some(&[1.0, 2.0]), true)?;
//! assert_eq!(d[[1, 1]], 5f64.sqrt()); // (1, 1) to (0, 0): 1 * 1 down, 1 * 2 across
//! assert_eq!(i.unwrap().shape(), &[2, 3, 3]);
//! let (c, _) = distance_transform_cdt(x.view(), &CdtMetric::Taxicab, false)?;
//! assert_eq!(c[[0, 2]], 2);
//! # Ok::<(), kiln::Error>(())
//! ```

use ndarray::{ArrayD, ArrayViewD, IxDyn};

pub use kiln_ops::distance::BfMetric;
use kiln_ops::distance::{self as dist, BfDistances, Masks};
use kiln_ops::{Exec, RunError};

use super::error::{Error, Result};
use super::shared_engine;

/// An element type the transforms truth-test as numpy does (`x != 0`).
pub trait Truth: Copy {
    /// True for foreground (non-zero; NaN is non-zero, -0.0 is zero).
    fn truth(self) -> bool;
}

macro_rules! truth_int {
    ($($t:ty),*) => {$(
        impl Truth for $t {
            fn truth(self) -> bool {
                self != 0
            }
        }
    )*};
}
truth_int!(u8, u16, u32, u64, i8, i16, i32, i64, usize, isize);

impl Truth for f32 {
    fn truth(self) -> bool {
        self != 0.0
    }
}

impl Truth for f64 {
    fn truth(self) -> bool {
        self != 0.0
    }
}

impl Truth for bool {
    fn truth(self) -> bool {
        self
    }
}

/// The CDT's metric (scipy's `metric=`).
#[derive(Clone, Debug, PartialEq)]
pub enum CdtMetric {
    /// The full 3^d box (scipy's default).
    Chessboard,
    /// The cross (scipy's taxicab, cityblock, manhattan).
    Taxicab,
    /// A 3^d structure; scipy reads a non-bool array's bytes as bool (scipy issue #18878),
    /// kiln takes it as bool.
    Structure(ArrayD<bool>),
}

/// One image from the view (every axis spatial).
fn masks<T: Truth>(op: &'static str, input: &ArrayViewD<'_, T>) -> Result<Masks> {
    let mask: Vec<bool> = input.iter().map(|&x| x.truth()).collect();
    Masks::new(op, 1, input.shape(), mask).map_err(run_error)
}

/// A program error as the facade's error.
fn run_error(e: RunError) -> Error {
    match e {
        RunError::Op(e) => Error::Op(e),
        RunError::Runtime(e) => Error::Runtime(e),
        RunError::BadInput { op, problem } => Error::Input(format!("{op}: {problem}")),
    }
}

/// Row-major values as an array of `shape`.
fn array<T>(shape: Vec<usize>, v: Vec<T>) -> Result<ArrayD<T>> {
    ArrayD::from_shape_vec(IxDyn(&shape), v).map_err(|e| Error::Internal(e.to_string()))
}

/// `(ndim,) + shape`.
fn index_shape(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![shape.len()];
    s.extend_from_slice(shape);
    s
}

/// scipy's `distance_transform_edt(input, sampling, return_indices=...)`: f64 distances and,
/// when asked, int32 indices `(ndim,) + shape` of the nearest background pixel.
pub fn distance_transform_edt<T: Truth>(
    input: ArrayViewD<'_, T>,
    sampling: Option<&[f64]>,
    return_indices: bool,
) -> Result<(ArrayD<f64>, Option<ArrayD<i32>>)> {
    let op = "distance_transform_edt";
    let m = masks(op, &input)?;
    let s = dist::resolve_sampling(op, sampling, m.shape.len()).map_err(run_error)?;
    let engine = shared_engine();
    let r = dist::edt_run(Exec::Fused(&engine), &m, &s, true, return_indices);
    let d = array(m.shape.clone(), r.distances.unwrap_or_default())?;
    let i = match r.indices {
        Some(v) => Some(array(index_shape(&m.shape), v)?),
        None => None,
    };
    Ok((d, i))
}

/// scipy's `distance_transform_cdt(input, metric, return_indices=...)`: int32 distances (-1
/// everywhere when there is no background) and, when asked, int32 indices.
pub fn distance_transform_cdt<T: Truth>(
    input: ArrayViewD<'_, T>,
    metric: &CdtMetric,
    return_indices: bool,
) -> Result<(ArrayD<i32>, Option<ArrayD<i32>>)> {
    let op = "distance_transform_cdt";
    let m = masks(op, &input)?;
    let rank = m.shape.len();
    let structure = match metric {
        CdtMetric::Chessboard => dist::cdt::metric_structure(rank, true),
        CdtMetric::Taxicab => dist::cdt::metric_structure(rank, false),
        CdtMetric::Structure(a) => {
            if a.ndim() != rank || a.shape().iter().any(|&n| n != 3) {
                return Err(Error::Input(format!(
                    "{op}: the metric array must have extent 3 on each of the input's {rank} axes, got shape {:?}",
                    a.shape()
                )));
            }
            a.iter().copied().collect()
        }
    };
    let engine = shared_engine();
    let r = dist::cdt_run(Exec::Fused(&engine), &m, &structure, true, return_indices);
    let d = array(m.shape.clone(), r.distances.unwrap_or_default())?;
    let i = match r.indices {
        Some(v) => Some(array(index_shape(&m.shape), v)?),
        None => None,
    };
    Ok((d, i))
}

/// The brute-force distances: f64 (Euclidean) or u32 (taxicab, chessboard).
#[derive(Clone, Debug, PartialEq)]
pub enum BfArray {
    /// Euclidean distances.
    F64(ArrayD<f64>),
    /// Taxicab or chessboard distances (`u32::MAX` where there is no background).
    U32(ArrayD<u32>),
}

/// scipy's `distance_transform_bf(input, metric, sampling, return_indices=...)`; taxicab and
/// chessboard ignore the sampling.
pub fn distance_transform_bf<T: Truth>(
    input: ArrayViewD<'_, T>,
    metric: BfMetric,
    sampling: Option<&[f64]>,
    return_indices: bool,
) -> Result<(BfArray, Option<ArrayD<i32>>)> {
    let op = "distance_transform_bf";
    let m = masks(op, &input)?;
    let s = dist::resolve_sampling(op, sampling, m.shape.len()).map_err(run_error)?;
    let engine = shared_engine();
    let r = dist::bf_run(Exec::Fused(&engine), &m, metric, &s, true, return_indices);
    let d = match r.distances {
        Some(BfDistances::F64(v)) => BfArray::F64(array(m.shape.clone(), v)?),
        Some(BfDistances::U32(v)) => BfArray::U32(array(m.shape.clone(), v)?),
        None => return Err(Error::Internal("brute force returned no distances".into())),
    };
    let i = match r.indices {
        Some(v) => Some(array(index_shape(&m.shape), v)?),
        None => None,
    };
    Ok((d, i))
}
