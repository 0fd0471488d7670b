//! Typed rank filters of any window size on `ndarray` views: scipy.ndimage's
//! `rank_filter`, `percentile_filter`, `median_filter` and kornia's `median_blur` (with its
//! padding choice).
//!
//! Scope: every axis of the array is spatial (scipy's default); `median_blur` takes
//! `[B, C, H, W]`. Windows up to 441 values run the selection-network graph fused (as
//! [`crate::embed::Op`] does), larger ones the sliding-histogram program
//! (`kiln_ops::RankProgram`) on the shared engine's threads. Exactness: both are the same
//! selection bit for bit (ops/src/rank), equal to scipy 1.17 on the committed goldens.
//! Limits: inputs are copied once into kiln storage; these calls are not pipeline stages.

use kiln_ir::TensorType;
use kiln_ops::rank::{blur_spec, plan_for_spec, scipy_spec, RankOf, RankSpec};
use kiln_ops::{Exec, RunError};
use kiln_runtime::Tensor;
use ndarray::{ArrayD, ArrayViewD, IxDyn};

pub use kiln_ops::rank::BlurPadding;

use super::element::Element;
use super::error::{Error, Result};
use super::op::{IntoWindow, Mode};
use super::pipeline::shared_engine;

/// scipy's border arguments of the rank filters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankOptions {
    /// `mode` (default reflect).
    pub mode: Mode,
    /// `cval` for [`Mode::Constant`], converted to the array's dtype like a cast from f64.
    pub cval: f64,
    /// `origin` (one value or one per axis; empty: 0).
    pub origin: Vec<i64>,
}

fn run_error(e: RunError) -> Error {
    match e {
        RunError::Op(e) => Error::Op(e),
        RunError::Runtime(e) => Error::Runtime(e),
        other => Error::Input(other.to_string()),
    }
}

/// Runs `spec` (built for `[1, 1, S..]` or `[B, C, H, W]` as `lead` says) on `x`.
fn run<T: Element>(
    name: &'static str,
    x: &ArrayViewD<'_, T>,
    lead: bool,
    spec: impl FnOnce(&TensorType) -> std::result::Result<RankSpec, kiln_ops::OpError>,
) -> Result<ArrayD<T>> {
    if x.ndim() == 0 || x.is_empty() {
        return Err(Error::Input(format!(
            "{name}: array of shape {:?}: needs at least one axis and one element",
            x.shape()
        )));
    }
    let mut shape = if lead { vec![1, 1] } else { Vec::new() };
    shape.extend_from_slice(x.shape());
    let data: Vec<T> = x.iter().copied().collect();
    let t = Tensor::from_storage(T::into_storage(data), &shape)?;
    let ty = TensorType {
        dtype: T::DTYPE,
        shape: shape.clone(),
    };
    let plan = plan_for_spec(name, spec(&ty)?, &ty)?;
    let engine = shared_engine();
    let out = plan
        .run(Exec::Fused(&engine), &[t])
        .map_err(run_error)?
        .pop()
        .ok_or_else(|| Error::Internal(format!("{name} returned no output")))?;
    out.to_ndarray::<T>()?
        .into_shape_with_order(IxDyn(x.shape()))
        .map_err(|e| Error::Internal(format!("output of the wrong length: {e}")))
}

fn scipy<T: Element>(
    name: &'static str,
    x: ArrayViewD<'_, T>,
    of: RankOf,
    window: impl IntoWindow,
    options: &RankOptions,
) -> Result<ArrayD<T>> {
    let mut window = window.into_window();
    if !options.origin.is_empty() {
        window = window.with_origin(&options.origin);
    }
    let border = options.mode.border(T::DTYPE, options.cval);
    run(name, &x, true, |ty| {
        scipy_spec(name, ty, &window, border, of)
    })
}

/// scipy.ndimage's `rank_filter(input, rank, size | footprint, mode, cval, origin)`: the
/// element `rank` (negative: from the end) of each sorted window. Any window size.
pub fn rank_filter<T: Element>(
    x: ArrayViewD<'_, T>,
    rank: i64,
    window: impl IntoWindow,
    options: &RankOptions,
) -> Result<ArrayD<T>> {
    scipy("rank_filter", x, RankOf::Rank(rank), window, options)
}

/// scipy.ndimage's `percentile_filter(input, percentile, ...)`: element
/// `int(n * percentile / 100)` (the last for 100; negative percentiles count from 100).
pub fn percentile_filter<T: Element>(
    x: ArrayViewD<'_, T>,
    percentile: f64,
    window: impl IntoWindow,
    options: &RankOptions,
) -> Result<ArrayD<T>> {
    scipy(
        "percentile_filter",
        x,
        RankOf::Percentile(percentile),
        window,
        options,
    )
}

/// scipy.ndimage's `median_filter(input, ...)`: element `n / 2`. Any window size (the
/// [`crate::embed::Op`] form is limited to the network's 441 values).
pub fn median_filter<T: Element>(
    x: ArrayViewD<'_, T>,
    window: impl IntoWindow,
    options: &RankOptions,
) -> Result<ArrayD<T>> {
    scipy("median_filter", x, RankOf::Median, window, options)
}

/// kornia's `median_blur(x, (ky, kx))` on `[B, C, H, W]` f32/f64 with `padding` (zeros, or
/// torch's reflect as kornia 0.9's default): the lower median, NaN where the window holds a
/// non-finite value. Any kernel size.
pub fn median_blur<T: Element>(
    x: ArrayViewD<'_, T>,
    ky: usize,
    kx: usize,
    padding: BlurPadding,
) -> Result<ArrayD<T>> {
    run("median_blur", &x, false, |ty| {
        blur_spec(ty, ky, kx, padding)
    })
}
