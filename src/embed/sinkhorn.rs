//! Typed API for batched Sinkhorn (`kiln_ops::sinkhorn`) on ndarray views.
//!
//! Scope: [`sinkhorn`] takes `a[B, n]`, `b[B, m]` and a cost `[n, m]` (shared) or
//! `[B, n, m]` of one float dtype and returns a [`SinkhornResult`]; [`cost_matrix`] builds a
//! grid cost; `opts.grid_axes = k` takes the per-axis cost table `[g, g]` of a k-dimensional
//! grid instead (the separable kernel, `kiln_ops::sinkhorn` grid.rs). Exactness: the values are the program's (eager and fused agree bit for bit;
//! `fused` only picks the path). Limits: f32 and f64; views are copied into row-major tensors.
use kiln_ops::program::{Exec, Program, RunError};
use kiln_ops::{Sinkhorn, SinkhornOptions};
use kiln_runtime::Tensor;
use ndarray::{Array1, Array2, Array3, ArrayD, ArrayView2, ArrayViewD, Ix1, Ix2, Ix3};

use super::element::Element;
use super::error::{Error, Result};
use super::pipeline::shared_engine;

/// The outputs of [`sinkhorn`].
#[derive(Clone, Debug)]
pub struct SinkhornResult<T> {
    /// Transport cost `Σ M·P` per sample.
    pub cost: Array1<T>,
    /// Source potentials `[B, n]`.
    pub f: Array2<T>,
    /// Target potentials `[B, m]`.
    pub g: Array2<T>,
    /// POT's `niter` per sample (index of the last iteration run).
    pub niter: Array1<f64>,
    /// The plans `[B, n, m]` when `opts.plan` or `opts.grad` (the gradient w.r.t. the cost).
    pub plan: Option<Array3<T>>,
    /// Envelope gradients w.r.t. a and b when `opts.grad`.
    pub grad: Option<(Array2<T>, Array2<T>)>,
}

fn run_error(e: RunError) -> Error {
    match e {
        RunError::Op(e) => Error::Op(e),
        RunError::Runtime(e) => Error::Runtime(e),
        other => Error::Input(other.to_string()),
    }
}

fn take<T: Element, D: ndarray::Dimension>(t: &Tensor) -> Result<ndarray::Array<T, D>> {
    let v = T::take(t.contiguous_storage())
        .ok_or_else(|| Error::Internal("sinkhorn output dtype".into()))?;
    ArrayD::from_shape_vec(t.shape().to_vec(), v)
        .map_err(|e| Error::Internal(e.to_string()))?
        .into_dimensionality::<D>()
        .map_err(|e| Error::Internal(e.to_string()))
}

/// Solves every sample of the batch (`fused`: tiles of 8 in parallel; otherwise the
/// reference loop; the bits are the same).
pub fn sinkhorn<T: Element>(
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    cost: ArrayViewD<'_, T>,
    opts: SinkhornOptions,
    fused: bool,
) -> Result<SinkhornResult<T>> {
    if !(opts.eps.is_finite() && opts.eps > 0.0)
        || opts.max_iter == 0
        || opts.tol.is_nan()
        || opts.tol < 0.0
    {
        return Err(Error::Input(format!(
            "sinkhorn: eps must be finite and > 0, max_iter >= 1, tol >= 0 (got {opts:?})"
        )));
    }
    let inputs = [
        Tensor::from_ndarray(&a.to_owned().into_dyn()),
        Tensor::from_ndarray(&b.to_owned().into_dyn()),
        Tensor::from_ndarray(&cost.to_owned()),
    ];
    let engine = shared_engine();
    let exec = if fused {
        Exec::Fused(&engine)
    } else {
        Exec::Eager
    };
    let out = Sinkhorn { opts }.run(exec, &inputs).map_err(run_error)?;
    Ok(SinkhornResult {
        cost: take::<T, Ix1>(&out[0])?,
        f: take::<T, Ix2>(&out[1])?,
        g: take::<T, Ix2>(&out[2])?,
        niter: take::<f64, Ix1>(&out[3])?,
        plan: if opts.plan || opts.grad {
            Some(take::<T, Ix3>(&out[4])?)
        } else {
            None
        },
        grad: if opts.grad {
            Some((take::<T, Ix2>(&out[5])?, take::<T, Ix2>(&out[6])?))
        } else {
            None
        },
    })
}

/// The `[N, N]` cost between the points of a grid (`power = 2`: squared Euclidean), f64.
pub fn cost_matrix(grid_shape: &[usize], power: f64) -> Result<Array2<f64>> {
    let t = kiln_ops::build_cost_matrix(grid_shape, power)?;
    take::<f64, Ix2>(&t)
}
