//! `kiln._kiln`: the Python extension behind `kiln.ndimage`, `kiln.kornia`, `kiln.fuse` and
//! `kiln.dask`.
//!
//! Scope: one class, `Chain`, wrapping a `kiln::Pipeline` built from operator specs that the
//! Python layer assembles from scipy's (or kornia's) arguments, and running it on numpy
//! arrays with the GIL released. Exactness: values pass through bit for bit (numpy's buffer
//! is read in place; results are handed to numpy without a copy; `out=` is written by one
//! copy), so results are the fused kernels', equal to kiln's eager oracle. Limits: f32, f64,
//! u8, bool, i8, u16, i16, i32 and u32 arrays; `out=` must be C-contiguous, writeable and of
//! the input's dtype. The programs that are not one graph (masked or fixpoint binary
//! morphology, distance transforms, Sinkhorn) live in `morph.rs`, `distance.rs` and `ot.rs`.

mod distance;
mod morph;
mod ot;
mod rank;

use kiln::embed::{Element, Error, Mode, Op, OpKind, Pipeline, Window};
use kiln::ir::DType;
use kiln::ops::OpError;
use numpy::{
    PyArray, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// One operator as the Python layer describes it: `(kind, size, footprint_shape,
/// footprint_mask, origin, mode, cval, border_value, iterations, structure_values,
/// structure2)`.
#[derive(FromPyObject)]
struct Spec(
    String,
    Option<Vec<usize>>,
    Option<Vec<usize>>,
    Option<Vec<bool>>,
    Vec<i64>,
    Option<String>,
    f64,
    bool,
    usize,
    Option<Vec<f64>>,
    Option<(Vec<usize>, Vec<bool>)>,
);

/// kiln's error as the Python exception a numpy user expects: `TypeError` for a dtype the
/// operator does not take, `ValueError` for everything else; the message is kiln's.
pub(crate) fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match &e {
        Error::Op(OpError::BadInput { problem, .. })
            if problem.starts_with("input must be f")
                || problem.starts_with("input must be bool")
                || problem.starts_with("a non-flat structure needs")
                || problem.starts_with("bool input") =>
        {
            PyTypeError::new_err(msg)
        }
        _ => PyValueError::new_err(msg),
    }
}

fn op_from_spec(spec: Spec) -> PyResult<Op> {
    let Spec(
        kind,
        size,
        fp_shape,
        fp_mask,
        origin,
        mode,
        cval,
        border_value,
        iterations,
        values,
        structure2,
    ) = spec;
    let window = match (size, fp_shape, fp_mask) {
        (_, Some(shape), Some(mask)) => Some(Window::footprint(&shape, &mask)),
        (Some(size), None, None) => Some(Window::size(&size)),
        (None, None, None) => None,
        _ => {
            return Err(PyValueError::new_err(
                "kiln: footprint needs a shape and a mask",
            ))
        }
    };
    let need = |w: Option<Window>| {
        w.ok_or_else(|| PyValueError::new_err(format!("{kind}: give size or footprint")))
    };
    let mut op = match kind.as_str() {
        "median_filter" => Op::median_filter(need(window)?),
        "grey_erosion" => Op::grey_erosion(need(window)?),
        "grey_dilation" => Op::grey_dilation(need(window)?),
        "grey_opening" => Op::grey_opening(need(window)?),
        "grey_closing" => Op::grey_closing(need(window)?),
        "binary_erosion" => Op::binary_erosion(window).border_value(border_value),
        "gradient_magnitude" => Op::gradient_magnitude(),
        "binary_dilation" => Op::binary_dilation(window).border_value(border_value),
        "binary_opening" => Op::binary_opening(window).border_value(border_value),
        "binary_closing" => Op::binary_closing(window).border_value(border_value),
        "binary_hit_or_miss" => Op::binary_hit_or_miss(
            window,
            structure2.map(|(shape, mask)| Window::footprint(&shape, &mask)),
        ),
        "white_tophat" => Op::white_tophat(need(window)?),
        "black_tophat" => Op::black_tophat(need(window)?),
        "morphological_gradient" => Op::morphological_gradient(need(window)?),
        "morphological_laplace" => Op::morphological_laplace(need(window)?),
        "median_blur" => match need(window)?.shape.as_slice() {
            [ky, kx] => Op::median_blur(*ky, *kx),
            s => {
                return Err(PyValueError::new_err(format!(
                    "median_blur: kernel size {s:?} must be ky, kx"
                )))
            }
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "kiln: unknown operator `{other}`"
            )))
        }
    };
    if !origin.is_empty() {
        op = op.origin(origin);
    }
    if iterations != 1 {
        op = op.iterations(iterations);
    }
    if let Some(v) = values {
        op = op.structure(&v);
    }
    if let Some(m) = mode {
        op = op.mode(Mode::from_name(&m).map_err(to_py)?);
    }
    Ok(op.cval(cval))
}

/// The numpy dtypes a chain runs on.
pub(crate) const SUPPORTED: &str =
    "float32, float64, uint8, bool, int8, uint16, int16, int32, uint32";

/// A chain of kiln operators compiled into fused kernels (per dtype and shape; kernels per
/// rank), run on numpy arrays.
#[pyclass(frozen, module = "kiln._kiln")]
struct Chain {
    pipeline: Pipeline,
}

impl Chain {
    fn run_typed<'py, T: Element + numpy::Element>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyUntypedArray>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let x = x.downcast::<PyArrayDyn<T>>()?.readonly();
        let view = x.as_array();
        let p = &self.pipeline;
        let Some(out) = out else {
            let y = py.allow_threads(|| p.run(view)).map_err(to_py)?;
            return Ok(PyArray::from_owned_array(py, y).into_any());
        };
        let o = out.downcast::<PyArrayDyn<T>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "output: must be a numpy array of the input's dtype {}",
                T::DTYPE.name()
            ))
        })?;
        if !o.is_c_contiguous() {
            return Err(PyValueError::new_err("output: must be C-contiguous"));
        }
        if o.shape() != view.shape() {
            return Err(PyValueError::new_err(format!(
                "output: shape {:?} differs from the input's {:?}",
                o.shape(),
                view.shape()
            )));
        }
        let mut w = o.try_readwrite().map_err(|e| {
            PyValueError::new_err(format!(
                "output: not writable ({e}): read-only or sharing memory with the input"
            ))
        })?;
        let wv = w.as_array_mut();
        py.allow_threads(|| p.run_into(view, wv)).map_err(to_py)?;
        Ok(o.clone().into_any())
    }
}

#[pymethods]
impl Chain {
    /// A chain of operator specs; `axes` as scipy's (`None`: every axis spatial).
    #[new]
    #[pyo3(signature = (specs, axes=None))]
    fn new(specs: Vec<Spec>, axes: Option<Vec<isize>>) -> PyResult<Chain> {
        let mut pipeline = Pipeline::new();
        for s in specs {
            pipeline = pipeline.then(op_from_spec(s)?);
        }
        if let Some(a) = axes {
            pipeline = pipeline.axes(&a);
        }
        Ok(Chain { pipeline })
    }

    /// Runs the chain on `x`; writes into `out` when given (and returns it).
    #[pyo3(signature = (x, out=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let arr = x
            .downcast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("input: must be a numpy array"))?;
        let dt = arr.dtype();
        if dt.is_equiv_to(&numpy::dtype::<f32>(py)) {
            self.run_typed::<f32>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<f64>(py)) {
            self.run_typed::<f64>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<u8>(py)) {
            self.run_typed::<u8>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<bool>(py)) {
            self.run_typed::<bool>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<i8>(py)) {
            self.run_typed::<i8>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<u16>(py)) {
            self.run_typed::<u16>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<i16>(py)) {
            self.run_typed::<i16>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<i32>(py)) {
            self.run_typed::<i32>(py, arr, out)
        } else if dt.is_equiv_to(&numpy::dtype::<u32>(py)) {
            self.run_typed::<u32>(py, arr, out)
        } else {
            Err(PyTypeError::new_err(format!(
                "input: dtype {dt} is not supported ({SUPPORTED})"
            )))
        }
    }

    /// Per array axis of an `ndim`-d input: how far the chain reads `(before, after)`.
    fn halo(&self, ndim: usize) -> PyResult<Vec<(usize, usize)>> {
        let layout = self.pipeline.layout(&vec![1; ndim]).map_err(to_py)?;
        let spatial = &layout.perm[layout.perm.len() - (layout.kiln_shape.len() - 2)..];
        let h = self.pipeline.halo(spatial.len()).map_err(to_py)?;
        let mut out = vec![(0, 0); ndim];
        for (&axis, &d) in spatial.iter().zip(&h) {
            out[axis] = d;
        }
        Ok(out)
    }

    /// The border modes the chain reads under, one scipy name per operator.
    fn modes(&self) -> Vec<&'static str> {
        self.pipeline.modes().into_iter().map(Mode::name).collect()
    }

    /// The operator names, in order.
    fn names(&self) -> Vec<&'static str> {
        self.pipeline
            .ops()
            .iter()
            .map(|o| OpKind::name(o.kind()))
            .collect()
    }

    /// The compiled chain for an array of `dtype` (numpy name) and `shape`: graph, fused
    /// groups and kernels as text.
    fn dump(&self, dtype: &str, shape: Vec<usize>) -> PyResult<String> {
        let dt = match dtype {
            "float32" => DType::F32,
            "float64" => DType::F64,
            "uint8" => DType::U8,
            "bool" => DType::Bool,
            "int8" => DType::I8,
            "uint16" => DType::U16,
            "int16" => DType::I16,
            "int32" => DType::I32,
            "uint32" => DType::U32,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "dtype {other} is not supported ({SUPPORTED})"
                )))
            }
        };
        self.pipeline.dump(dt, &shape).map_err(to_py)
    }
}

/// The native part of the `kiln` package.
#[pymodule]
fn _kiln(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Chain>()?;
    m.add_function(wrap_pyfunction!(morph::binary_program, m)?)?;
    m.add_function(wrap_pyfunction!(morph::fill_holes, m)?)?;
    m.add_function(wrap_pyfunction!(morph::binary_structure, m)?)?;
    m.add_function(wrap_pyfunction!(morph::iterated_structure, m)?)?;
    m.add_function(wrap_pyfunction!(distance::edt, m)?)?;
    m.add_function(wrap_pyfunction!(distance::cdt, m)?)?;
    m.add_function(wrap_pyfunction!(distance::bf, m)?)?;
    m.add_function(wrap_pyfunction!(ot::sinkhorn_batch, m)?)?;
    m.add_function(wrap_pyfunction!(ot::grid_cost, m)?)?;
    m.add_function(wrap_pyfunction!(rank::rank_select, m)?)?;
    Ok(())
}
