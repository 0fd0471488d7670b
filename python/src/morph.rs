//! Binary morphology that is not one graph (masks, `iterations < 1` or above 64,
//! `binary_propagation`, `binary_fill_holes`) and scipy's structure helpers, for
//! `kiln.ndimage`.
//!
//! Scope: thin bindings over `kiln::embed::morphology` on bool numpy arrays (the Python layer
//! truth-tests other dtypes first, as scipy does); the GIL is released while the program runs.
//! Exactness: the programs' own (bit for bit scipy 1.17 on kiln's goldens); values pass
//! through unchanged. Limits: every axis is spatial (the Python layer widens a structure for
//! scipy's `axes=`); inputs are copied once into kiln storage.

use kiln::embed::morphology::{
    binary_fill_holes, binary_morphology, generate_binary_structure, iterate_structure,
    BinaryMorphology, BinaryOptions,
};
use kiln::embed::Window;
use numpy::{PyArray, PyArrayDyn, PyReadonlyArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::to_py;

/// A structure as `(shape, row-major mask)`.
pub type Structure = (Vec<usize>, Vec<bool>);

fn window(s: Option<Structure>) -> Option<Window> {
    s.map(|(shape, mask)| Window::footprint(&shape, &mask))
}

/// `binary_erosion`/`dilation`/`opening`/`closing` with scipy's `mask` and any `iterations`
/// (`< 1`: until nothing changes) on a bool array; returns a new bool array.
#[pyfunction]
#[pyo3(signature = (kind, x, mask, structure, iterations, border_value, origin))]
#[allow(clippy::too_many_arguments)]
pub fn binary_program<'py>(
    py: Python<'py>,
    kind: &str,
    x: PyReadonlyArrayDyn<'py, bool>,
    mask: Option<PyReadonlyArrayDyn<'py, bool>>,
    structure: Option<Structure>,
    iterations: i64,
    border_value: bool,
    origin: Vec<i64>,
) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
    let op = match kind {
        "binary_erosion" => BinaryMorphology::Erosion,
        "binary_dilation" => BinaryMorphology::Dilation,
        "binary_opening" => BinaryMorphology::Opening,
        "binary_closing" => BinaryMorphology::Closing,
        other => {
            return Err(PyValueError::new_err(format!(
                "kiln: unknown binary operation `{other}`"
            )))
        }
    };
    let options = BinaryOptions {
        structure: window(structure),
        iterations,
        border_value,
        origin,
    };
    let xv = x.as_array();
    let mv = mask.as_ref().map(|m| m.as_array());
    let y = py
        .allow_threads(|| binary_morphology(op, xv, mv, &options))
        .map_err(to_py)?;
    Ok(PyArray::from_owned_array(py, y))
}

/// scipy's `binary_fill_holes(input, structure, origin)` on a bool array.
#[pyfunction]
#[pyo3(signature = (x, structure, origin))]
pub fn fill_holes<'py>(
    py: Python<'py>,
    x: PyReadonlyArrayDyn<'py, bool>,
    structure: Option<Structure>,
    origin: Vec<i64>,
) -> PyResult<Bound<'py, PyArrayDyn<bool>>> {
    let xv = x.as_array();
    let w = window(structure);
    let y = py
        .allow_threads(|| binary_fill_holes(xv, w, &origin))
        .map_err(to_py)?;
    Ok(PyArray::from_owned_array(py, y))
}

/// scipy's `generate_binary_structure(rank, connectivity)` as `(shape, mask)`.
#[pyfunction]
pub fn binary_structure(rank: usize, connectivity: i64) -> PyResult<Structure> {
    let w = generate_binary_structure(rank, connectivity).map_err(to_py)?;
    let n = w.shape.iter().product();
    Ok((w.shape, w.mask.unwrap_or_else(|| vec![true; n])))
}

/// scipy's `iterate_structure(structure, iterations, origin)` for `iterations >= 2` as
/// `(shape, mask, origin)` (the origin scaled by `iterations` when given).
#[pyfunction]
#[pyo3(signature = (structure, iterations, origin=None))]
pub fn iterated_structure(
    structure: Structure,
    iterations: i64,
    origin: Option<Vec<i64>>,
) -> PyResult<(Vec<usize>, Vec<bool>, Vec<i64>)> {
    let w = Window::footprint(&structure.0, &structure.1);
    let r = iterate_structure(&w, iterations, origin.as_deref()).map_err(to_py)?;
    let n = r.shape.iter().product();
    Ok((r.shape, r.mask.unwrap_or_else(|| vec![true; n]), r.origin))
}
