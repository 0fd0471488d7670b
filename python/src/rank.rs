//! `rank_filter` and `percentile_filter` (and `median_filter` beyond the network's window
//! limit) for `kiln.ndimage`.
//!
//! Scope: one binding over `kiln::embed::rank` for the nine numpy dtypes kiln computes on;
//! every axis is spatial (the Python layer widens the window for scipy's `axes=`); the GIL
//! is released while the filter runs. Exactness: kiln's rank selection (the fused network up
//! to 441 values, the sliding-histogram program above), bit for bit scipy 1.17 on kiln's
//! goldens; values pass through unchanged. Limits: not a pipeline stage (no `kiln.fuse`).

use kiln::embed::rank::{median_filter, percentile_filter, rank_filter};
use kiln::embed::{Element, Mode, RankOptions, Window};
use numpy::{
    PyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::to_py;

/// Which selection: `("rank", r)`, `("percentile", p)` or `("median", _)`.
fn select<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyUntypedArray>,
    which: &str,
    value: f64,
    window: Window,
    options: RankOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let x = x.downcast::<PyArrayDyn<T>>()?.readonly();
    let view = x.as_array();
    let y = py
        .allow_threads(|| match which {
            "rank" => rank_filter(view, value as i64, window, &options),
            "percentile" => percentile_filter(view, value, window, &options),
            _ => median_filter(view, window, &options),
        })
        .map_err(to_py)?;
    Ok(PyArray::from_owned_array(py, y).into_any())
}

/// scipy's rank filters on any of kiln's dtypes: `which` is `"rank"` (`value` the rank),
/// `"percentile"` (`value` the percentile) or `"median"`; the window is `size` or a
/// footprint `(shape, mask)`.
#[pyfunction]
#[pyo3(signature = (which, x, value, size, footprint, mode, cval, origin))]
#[allow(clippy::too_many_arguments)]
pub fn rank_select<'py>(
    py: Python<'py>,
    which: &str,
    x: &Bound<'py, PyAny>,
    value: f64,
    size: Option<Vec<usize>>,
    footprint: Option<(Vec<usize>, Vec<bool>)>,
    mode: &str,
    cval: f64,
    origin: Vec<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    let window = match (size, footprint) {
        (_, Some((shape, mask))) => Window::footprint(&shape, &mask),
        (Some(s), None) => Window::size(&s),
        (None, None) => {
            return Err(PyValueError::new_err(format!(
                "{which}_filter: give size or footprint"
            )))
        }
    };
    let options = RankOptions {
        mode: Mode::from_name(mode).map_err(to_py)?,
        cval,
        origin,
    };
    let arr = x
        .downcast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err("input: must be a numpy array"))?;
    let dt = arr.dtype();
    macro_rules! dispatch {
        ($($t:ty),*) => {
            $(if dt.is_equiv_to(&numpy::dtype::<$t>(py)) {
                return select::<$t>(py, arr, which, value, window, options);
            })*
        };
    }
    dispatch!(f32, f64, u8, bool, i8, u16, i16, i32, u32);
    Err(PyTypeError::new_err(format!(
        "input: dtype {dt} is not supported ({})",
        crate::SUPPORTED
    )))
}
