//! Distance transforms for `kiln.ndimage`: `distance_transform_edt`, `_cdt` and `_bf`.
//!
//! Scope: bindings over `kiln::embed::distance` on bool numpy arrays (the Python layer
//! truth-tests other dtypes, as scipy does, and fills scipy's `distances=`/`indices=`
//! outputs); the GIL is released while the transform runs. Exactness: kiln's transforms are
//! bit for bit scipy 1.17's (ops/tests/distance_golden.rs); values pass through unchanged.
//! Limits: every axis is spatial (scipy has no `axes=` here); 1 to 8 axes.

use kiln::embed::distance::{
    distance_transform_bf, distance_transform_cdt, distance_transform_edt, BfArray, BfMetric,
    CdtMetric,
};
use numpy::{PyArray, PyArrayDyn, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::to_py;

type Indices<'py> = Option<Bound<'py, PyArrayDyn<i32>>>;

/// Euclidean distances (f64) and, when asked, int32 indices `(ndim,) + shape`.
#[pyfunction]
#[pyo3(signature = (x, sampling, return_indices))]
pub fn edt<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, bool>,
    sampling: Option<Vec<f64>>,
    return_indices: bool,
) -> PyResult<(Bound<'py, PyArrayDyn<f64>>, Indices<'py>)> {
    let xv = x.as_array();
    let (d, i) = py
        .allow_threads(|| distance_transform_edt(xv, sampling.as_deref(), return_indices))
        .map_err(to_py)?;
    Ok((
        PyArray::from_owned_array(py, d),
        i.map(|i| PyArray::from_owned_array(py, i)),
    ))
}

/// Chamfer distances (int32) under `metric` ("chessboard", "taxicab" or a 3^d bool
/// structure) and, when asked, int32 indices.
#[pyfunction]
#[pyo3(signature = (x, metric, structure, return_indices))]
pub fn cdt<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, bool>,
    metric: &str,
    structure: Option<PyReadonlyArrayDyn<'py, bool>>,
    return_indices: bool,
) -> PyResult<(Bound<'py, PyArrayDyn<i32>>, Indices<'py>)> {
    let metric = match (metric, structure) {
        (_, Some(s)) => CdtMetric::Structure(s.as_array().to_owned()),
        ("chessboard", None) => CdtMetric::Chessboard,
        ("taxicab" | "cityblock" | "manhattan", None) => CdtMetric::Taxicab,
        (other, None) => {
            return Err(PyValueError::new_err(format!(
                "distance_transform_cdt: invalid metric `{other}` (chessboard, taxicab, cityblock, manhattan or a structure)"
            )))
        }
    };
    let xv = x.as_array();
    let (d, i) = py
        .allow_threads(|| distance_transform_cdt(xv, &metric, return_indices))
        .map_err(to_py)?;
    Ok((
        PyArray::from_owned_array(py, d),
        i.map(|i| PyArray::from_owned_array(py, i)),
    ))
}

/// Brute-force distances (f64 for "euclidean", uint32 for "taxicab"/"chessboard") and, when
/// asked, int32 indices.
#[pyfunction]
#[pyo3(signature = (x, metric, sampling, return_indices))]
pub fn bf<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, bool>,
    metric: &str,
    sampling: Option<Vec<f64>>,
    return_indices: bool,
) -> PyResult<(Bound<'py, PyAny>, Indices<'py>)> {
    let metric = match metric {
        "euclidean" => BfMetric::Euclidean,
        "taxicab" | "cityblock" | "manhattan" => BfMetric::Taxicab,
        "chessboard" => BfMetric::Chessboard,
        other => {
            return Err(PyValueError::new_err(format!(
                "distance_transform_bf: distance metric `{other}` not supported (euclidean, taxicab, cityblock, manhattan, chessboard)"
            )))
        }
    };
    let xv = x.as_array();
    let (d, i) = py
        .allow_threads(|| distance_transform_bf(xv, metric, sampling.as_deref(), return_indices))
        .map_err(to_py)?;
    let d = match d {
        BfArray::F64(a) => PyArray::from_owned_array(py, a).into_any(),
        BfArray::U32(a) => PyArray::from_owned_array(py, a).into_any(),
    };
    Ok((d, i.map(|i| PyArray::from_owned_array(py, i))))
}
