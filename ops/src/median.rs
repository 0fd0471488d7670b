//! Median filters: kornia's `median_blur` and scipy.ndimage's `median_filter`, both as a
//! set of gathers feeding a pruned Batcher selection network.

use kiln_ir::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};
use kiln_ir::{
    Border, DType, Footprint, GraphBuilder, NodeId, ReduceOp, Scalar, TensorType, UnaryOp,
};

use crate::error::OpError;
use crate::network::selection_network;
use crate::window::{spatial_rank, Window};

/// The type of `x`; an id not in the builder gives the builder's own unknown-operand error.
pub(crate) fn checked_type(b: &GraphBuilder, x: NodeId) -> Result<TensorType, OpError> {
    if let Some(t) = b.ty(x) {
        return Ok(t.clone());
    }
    // Let the builder name the problem (only on this error path is the builder cloned).
    let mut probe = b.clone();
    match probe.cast(x, DType::Bool) {
        Err(e) => Err(e.into()),
        Ok(_) => Err(OpError::BadInput {
            op: "input",
            problem: format!("node {x} does not exist"),
        }),
    }
}

/// Largest window (number of values) a median or rank selection accepts. A selection network
/// grows as n·log²n comparators per point and its JIT compile time faster still (measured:
/// 21x21 ≈ 6 s, 25x25 ≈ 21 s, 31x31 ≈ 66 s to compile); beyond this size kiln refuses with a
/// clear error instead of stalling, until a histogram/selection-algorithm median exists.
pub const MAX_SELECTION_WINDOW: usize = 441;

/// The `rank`-th smallest (0-based) of `x` read at each offset of `footprint` under
/// `border`: one gather per offset (in footprint order) feeding a Batcher selection network
/// pruned to wire `rank`. Windows of more than [`MAX_SELECTION_WINDOW`] values are refused.
pub fn select_rank(
    b: &mut GraphBuilder,
    x: NodeId,
    footprint: &Footprint,
    border: Border,
    rank: usize,
) -> Result<NodeId, OpError> {
    const OP: &str = "select_rank";
    let n = footprint.offsets.len();
    if n > MAX_SELECTION_WINDOW {
        return Err(OpError::BadFootprint {
            op: OP,
            problem: format!(
                "a window of {n} values is too large for a selection network (at most \
                 {MAX_SELECTION_WINDOW}, e.g. 21x21 or 7x7x7)"
            ),
        });
    }
    let net = selection_network(n, rank).ok_or_else(|| OpError::BadFootprint {
        op: OP,
        problem: format!("rank {rank} out of range for {n} offsets"),
    })?;
    let mut wires = Vec::with_capacity(n);
    for off in &footprint.offsets {
        wires.push(b.gather(x, off, border)?);
    }
    Ok(b.network(&wires, net.width, &net.pairs, net.output)?)
}

/// kornia's `median_blur(x, (ky, kx))` over the last two axes of `x`, which must be
/// `[B, C, H, W]` (exactly two spatial dims), f32 or f64.
///
/// Semantics, exactly:
/// - zero padding: reads outside the image are `+0.0` (constant border);
/// - window: offsets `dy in -(ky-1)/2 ..= ky/2`, `dx in -(kx-1)/2 ..= kx/2`, so for odd sizes
///   the window is centred. For even sizes kornia itself fails (its padding changes the
///   output size); kiln keeps the image size, with `(k-1)/2` zeros before and `k/2` after;
/// - the value is the LOWER median, the element at sorted index `(ky*kx - 1) / 2` (as
///   `torch.median`), computed by a pruned Batcher selection network (ties are values, so
///   which tied element is chosen does not matter);
/// - any non-finite value (NaN or ±Inf) in the window, padding excluded, gives the canonical
///   NaN: `mask = window_reduce(Any, not(is_finite(x)), box, constant(false))`,
///   `result = select(mask, NaN, median)` (kornia's conv-based path propagates NaN/Inf into
///   every feature through `0 * Inf`, and its network path reproduces that with this mask).
pub fn median_blur_hw(
    b: &mut GraphBuilder,
    x: NodeId,
    ky: usize,
    kx: usize,
) -> Result<NodeId, OpError> {
    const OP: &str = "median_blur";
    let ty = checked_type(b, x)?;
    if ty.shape.len() != 4 {
        return Err(OpError::BadInput {
            op: OP,
            problem: format!(
                "input must be [B, C, H, W] (two spatial dims), got shape {:?}",
                ty.shape
            ),
        });
    }
    if !ty.dtype.is_float() {
        return Err(OpError::BadInput {
            op: OP,
            problem: format!("input must be f32 or f64, got {}", ty.dtype),
        });
    }
    if ky == 0 || kx == 0 {
        return Err(OpError::BadSize {
            op: OP,
            size: vec![ky, kx],
            problem: "kernel size must be at least 1".into(),
        });
    }
    let k = ky
        .checked_mul(kx)
        .filter(|&k| k <= kiln_ir::builder::MAX_NETWORK_WIDTH as usize);
    let Some(count) = k else {
        return Err(OpError::BadSize {
            op: OP,
            size: vec![ky, kx],
            problem: format!(
                "window of more than {} values",
                kiln_ir::builder::MAX_NETWORK_WIDTH
            ),
        });
    };
    let mut offsets = Vec::with_capacity(count);
    let (y0, x0) = ((ky as i64 - 1) / 2, (kx as i64 - 1) / 2);
    for dy in -y0..=(ky as i64 / 2) {
        for dx in -x0..=(kx as i64 / 2) {
            offsets.push(vec![dy, dx]);
        }
    }
    let footprint = Footprint { offsets };
    let zero = Border::Constant(Scalar::zero(ty.dtype));
    let median = select_rank(b, x, &footprint, zero, (count - 1) / 2)?;
    let finite = b.unary(UnaryOp::IsFinite, x)?;
    let bad = b.unary(UnaryOp::Not, finite)?;
    let any_bad = b.window_reduce(
        bad,
        ReduceOp::Any,
        &footprint,
        Border::Constant(Scalar::Bool(false)),
    )?;
    let nan = match ty.dtype {
        DType::F32 => Scalar::F32(CANONICAL_NAN_F32),
        _ => Scalar::F64(CANONICAL_NAN_F64),
    };
    let nan = b.constant_like(nan, x)?;
    Ok(b.select(any_bad, nan, median)?)
}

/// kornia's `median_blur(x, k)` with a square `k x k` window; see [`median_blur_hw`].
pub fn median_blur(b: &mut GraphBuilder, x: NodeId, k: usize) -> Result<NodeId, OpError> {
    median_blur_hw(b, x, k, k)
}

/// scipy.ndimage's `median_filter(x, size | footprint, mode, cval, origin)` over the spatial
/// axes of `x` (`[B, C, S1..Sd]`; batch and channel are untouched, `size`/`footprint`/
/// `origin` refer to the spatial axes only). Any dtype.
///
/// Semantics, exactly:
/// - window: the footprint's true entries `j` at offsets `j - size/2 - origin` per axis
///   (scipy's centring), each read under `border` (scipy's `mode`, with `cval`);
/// - the value is the element at sorted index `n / 2` where `n` is the number of true
///   entries (scipy's `filter_size // 2`: the UPPER median for even `n`, unlike kornia);
/// - NaN: the network's min/max absorb NaN, so a NaN anywhere in the window gives NaN (the
///   canonical NaN when the window has more than one entry; a one-entry window is a plain
///   move and keeps the NaN's bits). scipy's own result with NaN is implementation-defined.
/// - ±Inf are ordinary values. Zeros are ordered `-0 < +0` (scipy treats them as equal, so
///   with mixed signed zeros the sign of a zero result may differ from scipy's).
pub fn median_filter(
    b: &mut GraphBuilder,
    x: NodeId,
    window: &Window,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "median_filter";
    let ty = checked_type(b, x)?;
    let rank = spatial_rank(OP, &ty, 1)?;
    let w = window.resolve(OP, rank)?;
    let n = w.count();
    if n > kiln_ir::builder::MAX_NETWORK_WIDTH as usize {
        return Err(OpError::BadSize {
            op: OP,
            size: window.shape.clone(),
            problem: format!(
                "{n} window entries, a network takes at most {}",
                kiln_ir::builder::MAX_NETWORK_WIDTH
            ),
        });
    }
    select_rank(b, x, &w.footprint(), border, n / 2)
}
