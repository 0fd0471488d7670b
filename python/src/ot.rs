//! Batched Sinkhorn and the grid cost matrix for `kiln.ot`.
//!
//! Scope: bindings over `kiln::embed::sinkhorn` (`a[B, n]`, `b[B, m]`, cost `[n, m]` or
//! `[B, n, m]`, all float32 or all float64) and `kiln::embed::cost_matrix`; the GIL is
//! released while the solver runs. Exactness: the solver's own (fixed summation order, kiln's
//! exp/log, eager == fused bit for bit); values pass through unchanged. Limits: dense costs;
//! the Python layer adds POT's argument names and the batch axis.

use kiln::embed::{cost_matrix, sinkhorn, Element};
use kiln::ops::SinkhornOptions;
use numpy::{
    PyArray, PyArrayDescrMethods, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::to_py;

fn solve<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    m: &Bound<'py, PyAny>,
    opts: SinkhornOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let dtype_error = |_| {
        PyTypeError::new_err(format!(
            "sinkhorn: a, b and M must all be {} (one float dtype)",
            T::DTYPE.name()
        ))
    };
    let a: PyReadonlyArray2<'py, T> = a.extract().map_err(dtype_error)?;
    let b: PyReadonlyArray2<'py, T> = b.extract().map_err(dtype_error)?;
    let m: PyReadonlyArrayDyn<'py, T> = m.extract().map_err(dtype_error)?;
    let (av, bv, mv) = (a.as_array(), b.as_array(), m.as_array());
    let r = py
        .allow_threads(|| sinkhorn(av, bv, mv, opts, true))
        .map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("cost", PyArray::from_owned_array(py, r.cost))?;
    d.set_item("f", PyArray::from_owned_array(py, r.f))?;
    d.set_item("g", PyArray::from_owned_array(py, r.g))?;
    d.set_item("niter", PyArray::from_owned_array(py, r.niter))?;
    if let Some(p) = r.plan {
        d.set_item("plan", PyArray::from_owned_array(py, p))?;
    }
    if let Some((ga, gb)) = r.grad {
        d.set_item("grad_a", PyArray::from_owned_array(py, ga))?;
        d.set_item("grad_b", PyArray::from_owned_array(py, gb))?;
    }
    Ok(d)
}

/// Solves a batch: returns a dict with `cost`, `f`, `g`, `niter`, and `plan`, `grad_a`,
/// `grad_b` when asked.
#[pyfunction]
#[pyo3(signature = (a, b, m, eps, max_iter, tol, log_domain, plan, grad, grid_axes=0))]
#[allow(clippy::too_many_arguments)]
pub fn sinkhorn_batch<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    m: &Bound<'py, PyAny>,
    eps: f64,
    max_iter: usize,
    tol: f64,
    log_domain: bool,
    plan: bool,
    grad: bool,
    grid_axes: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = SinkhornOptions {
        eps,
        max_iter,
        tol,
        log_domain,
        plan,
        grad,
        grid_axes,
    };
    let arr = a
        .downcast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err("sinkhorn: a must be a numpy array"))?;
    let dt = arr.dtype();
    if dt.is_equiv_to(&numpy::dtype::<f32>(py)) {
        solve::<f32>(py, a, b, m, opts)
    } else if dt.is_equiv_to(&numpy::dtype::<f64>(py)) {
        solve::<f64>(py, a, b, m, opts)
    } else {
        Err(PyTypeError::new_err(format!(
            "sinkhorn: dtype {dt} is not supported (float32, float64)"
        )))
    }
}

/// The `[N, N]` float64 cost between the points of a grid of `shape` (`power = 2`: squared
/// Euclidean).
#[pyfunction]
pub fn grid_cost<'py>(
    py: Python<'py>,
    shape: Vec<usize>,
    power: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let c = py
        .allow_threads(|| cost_matrix(&shape, power))
        .map_err(to_py)?;
    Ok(PyArray::from_owned_array(py, c).into_any())
}
