//! Rank filters for any window size: scipy.ndimage's `rank_filter`, `percentile_filter`,
//! `median_filter` and kornia's `median_blur`.
//!
//! Scope: up to [`crate::median::MAX_SELECTION_WINDOW`] values a window is a graph (gathers
//! feeding a pruned selection network, [`crate::median::select_rank`]), which fuses with
//! its neighbours and is fastest there. Above it the operator is a [`Program`](crate::Program)
//! ([`RankProgram`]) returned by [`crate::build_plan`]: a network of n·log²n comparators
//! per point no longer compiles in reasonable time, while a sliding histogram costs
//! `O(rows · log K)` per point whatever the width. A program rather than an IR node: the
//! histogram is a native pass with its own scratch and threads, it never shares a kernel
//! with other nodes (a selection over ≥ 442 values dominates any neighbour), and programs
//! already reach `kiln run`, the bindings and the typed API; an IR node would need a kernel
//! form, two renderers and an eager interpreter for a stage nothing fuses with.
//!
//! Exactness: both paths of the program compute the network's selection bit for bit.
//! `Exec::Eager` sorts each window ([`mod@reference`]), `Exec::Fused` slides histograms
//! ([`sliding`]); both order values by the same order keys ([`keys`], the networks'
//! comparator order: `-0 < +0`, integers by value) and apply the networks' NaN rules
//! (`decide`): the networks' min/max absorb NaN and every input reaches the selected wire,
//! so a NaN anywhere in a window of ≥ 2 values gives the canonical NaN, and a one-value
//! window is a move that keeps the bits. The tests force the program onto small windows and
//! compare it with the network graph over dtypes, borders, footprints, origins and shapes.
//!
//! Limits: windows up to `kiln_ir::builder::MAX_FOOTPRINT` entries (the limit of every
//! window); the program is not appended to other graphs.

pub mod keys;
pub mod program;
pub mod reference;
pub mod sliding;

use kiln_ir::{
    Border, DType, Footprint, GraphBuilder, NodeId, ReduceOp, Scalar, TensorType, UnaryOp,
};
use kiln_runtime::Tensor;

use crate::error::OpError;
use crate::median::{checked_type, select_rank, MAX_SELECTION_WINDOW};
use crate::program::{OpPlan, RunError};
use crate::registry::Params;
use crate::window::{spatial_rank, Window};

pub use program::RankProgram;
pub use reference::rank_reference;
pub use sliding::rank_sliding;

/// Which values make a window's result the canonical NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poison {
    /// NaN, in windows of two or more values (scipy's filters: the networks' rule).
    Nan,
    /// NaN and ±Inf, in any window (kornia's `median_blur` mask).
    NonFinite,
}

/// One rank selection: the `rank`-th smallest (0-based) of the values read at each offset
/// of `footprint` (spatial axes) under `border`, with the NaN rule `poison`.
#[derive(Clone, Debug, PartialEq)]
pub struct RankSpec {
    /// Offsets, one per window entry, each with one value per spatial axis; no duplicates.
    pub footprint: Footprint,
    /// Border rule of every read.
    pub border: Border,
    /// 0-based rank, below the number of offsets.
    pub rank: usize,
    /// The NaN rule.
    pub poison: Poison,
}

/// The `[B, C, S..]` layout of an input: planes (`B·C`) and spatial extents.
#[derive(Clone, Debug)]
pub(crate) struct Geometry {
    pub(crate) planes: usize,
    pub(crate) spatial: Vec<usize>,
}

impl RankSpec {
    /// Checks the spec itself: at least one offset, all of one length `>= 1`, no duplicate,
    /// `rank` below the count, the border constant (if any) of no particular dtype.
    pub fn check(&self, op: &'static str) -> Result<(), OpError> {
        let offs = &self.footprint.offsets;
        let nd = offs.first().map_or(0, |o| o.len());
        let bad = |problem: String| Err(OpError::BadFootprint { op, problem });
        if offs.is_empty() || nd == 0 {
            return bad("a rank selection needs at least one offset of at least one axis".into());
        }
        if offs.len() > kiln_ir::builder::MAX_FOOTPRINT {
            return bad(format!(
                "{} offsets, at most {}",
                offs.len(),
                kiln_ir::builder::MAX_FOOTPRINT
            ));
        }
        if offs.iter().any(|o| o.len() != nd) {
            return bad("offsets of different lengths".into());
        }
        let mut sorted = offs.clone();
        sorted.sort();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return bad("an offset is repeated".into());
        }
        if self.rank >= offs.len() {
            return bad(format!(
                "rank {} out of range for {} offsets",
                self.rank,
                offs.len()
            ));
        }
        Ok(())
    }

    /// Checks `x` against the spec: `[B, C, S..]` with as many spatial axes as the offsets,
    /// no zero extent, a constant border of `x`'s dtype.
    pub(crate) fn check_input(&self, x: &Tensor) -> Result<Geometry, RunError> {
        const OP: &str = "rank selection";
        self.check(OP)?;
        let nd = self.footprint.offsets[0].len();
        let shape = x.shape();
        let bad = |problem: String| Err(RunError::BadInput { op: OP, problem });
        if shape.len() != nd + 2 {
            return bad(format!(
                "input of shape {shape:?}: needs [B, C] and {nd} spatial axes"
            ));
        }
        if shape.contains(&0) {
            return bad(format!("input of shape {shape:?} has a zero extent"));
        }
        if let Border::Constant(c) = self.border {
            if c.dtype() != x.dtype() {
                return bad(format!(
                    "constant border of dtype {}, input of dtype {}",
                    c.dtype(),
                    x.dtype()
                ));
            }
        }
        Ok(Geometry {
            planes: shape[0] * shape[1],
            spatial: shape[2..].to_vec(),
        })
    }
}

/// What a window gives before any selection.
pub(crate) enum Decision {
    /// This raw value, without selecting.
    Value(u64),
    /// The `rank`-th smallest key.
    Select,
}

/// The networks' NaN rules on one window's raw values (see the module header).
pub(crate) fn decide(dtype: DType, spec: &RankSpec, window: &[u64]) -> Decision {
    let nan = keys::canonical_nan(dtype);
    if spec.poison == Poison::NonFinite && window.iter().any(|&v| keys::is_non_finite(dtype, v)) {
        return Decision::Value(nan);
    }
    if window.len() == 1 {
        return Decision::Value(window[0]);
    }
    if window.iter().any(|&v| keys::is_nan(dtype, v)) {
        return Decision::Value(nan);
    }
    Decision::Select
}

/// The operators of this family (registry names).
pub const NAMES: &[&str] = &[
    "median_filter",
    "rank_filter",
    "percentile_filter",
    "median_blur",
];

/// kornia's `median_blur` padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlurPadding {
    /// Zeros outside the image (kiln's default, kornia's conv-based `median_blur`).
    Zeros,
    /// torch's `reflect` padding (kornia 0.9's default): the edge is not repeated, kiln's
    /// [`Border::Mirror`] (scipy's `mirror`).
    Reflect,
}

impl BlurPadding {
    /// `zeros` or `reflect`.
    pub fn from_name(name: &str) -> Option<BlurPadding> {
        match name {
            "zeros" | "zero" | "constant" => Some(BlurPadding::Zeros),
            "reflect" => Some(BlurPadding::Reflect),
            _ => None,
        }
    }

    fn border(self, dtype: DType) -> Border {
        match self {
            BlurPadding::Zeros => Border::Constant(Scalar::zero(dtype)),
            BlurPadding::Reflect => Border::Mirror,
        }
    }
}

/// scipy's rank of a `rank_filter`: negative counts from the end; in `0..n`.
pub fn scipy_rank(op: &'static str, rank: i64, n: usize) -> Result<usize, OpError> {
    let r = if rank < 0 { rank + n as i64 } else { rank };
    if r < 0 || r >= n as i64 {
        return Err(OpError::BadParam {
            op,
            name: "rank".into(),
            problem: format!("rank {rank} not within the footprint's {n} entries"),
        });
    }
    Ok(r as usize)
}

/// scipy's rank of a `percentile_filter`: negative percentiles count from 100; `100` is the
/// last entry, otherwise `int(n * p / 100)` in f64 arithmetic (as scipy).
pub fn scipy_percentile_rank(op: &'static str, p: f64, n: usize) -> Result<usize, OpError> {
    let q = if p < 0.0 { p + 100.0 } else { p };
    if !(0.0..=100.0).contains(&q) {
        return Err(OpError::BadParam {
            op,
            name: "percentile".into(),
            problem: format!("percentile {p} outside -100..=100"),
        });
    }
    if q == 100.0 {
        return Ok(n - 1);
    }
    Ok((n as f64 * q / 100.0) as usize)
}

/// The footprint of kornia's `median_blur` with a `ky x kx` kernel (see
/// [`crate::median_blur_hw`]).
pub fn blur_footprint(ky: usize, kx: usize) -> Footprint {
    let mut offsets = Vec::with_capacity(ky * kx);
    let (y0, x0) = ((ky as i64 - 1) / 2, (kx as i64 - 1) / 2);
    for dy in -y0..=(ky as i64 / 2) {
        for dx in -x0..=(kx as i64 / 2) {
            offsets.push(vec![dy, dx]);
        }
    }
    Footprint { offsets }
}

fn blur_params(p: &Params<'_>) -> Result<(usize, usize, BlurPadding), OpError> {
    let k = p
        .usizes("k")?
        .ok_or_else(|| p.missing("k", "a kernel size is required"))?;
    let (ky, kx) = match k.as_slice() {
        [k] => (*k, *k),
        [ky, kx] => (*ky, *kx),
        _ => return Err(p.bad("k", "give k or ky,kx")),
    };
    let padding = match p.get("padding") {
        None => BlurPadding::Zeros,
        Some(s) => BlurPadding::from_name(s)
            .ok_or_else(|| p.bad("padding", format!("`{s}` is not zeros or reflect")))?,
    };
    Ok((ky, kx, padding))
}

/// Which element of the sorted window a scipy rank filter takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RankOf {
    /// `median_filter`: element `n / 2`.
    Median,
    /// `rank_filter(rank)`: negative counts from the end.
    Rank(i64),
    /// `percentile_filter(percentile)`: see [`scipy_percentile_rank`].
    Percentile(f64),
}

/// The selection scipy's rank filter `of` computes on input `ty` with `window` and
/// `border` (`op` names the operator in errors).
pub fn scipy_spec(
    op: &'static str,
    ty: &TensorType,
    window: &Window,
    border: Border,
    of: RankOf,
) -> Result<RankSpec, OpError> {
    let rank = spatial_rank(op, ty, 1)?;
    let w = window.resolve(op, rank)?;
    let n = w.count();
    let r = match of {
        RankOf::Median => n / 2,
        RankOf::Rank(r) => scipy_rank(op, r, n)?,
        RankOf::Percentile(q) => scipy_percentile_rank(op, q, n)?,
    };
    Ok(RankSpec {
        footprint: w.footprint(),
        border,
        rank: r,
        poison: Poison::Nan,
    })
}

/// The selection kornia's `median_blur` with a `ky x kx` kernel and `padding` computes on
/// input `ty` (`[B, C, H, W]`, f32 or f64).
pub fn blur_spec(
    ty: &TensorType,
    ky: usize,
    kx: usize,
    padding: BlurPadding,
) -> Result<RankSpec, OpError> {
    check_blur_input(ty)?;
    check_blur_size(ky, kx)?;
    let footprint = blur_footprint(ky, kx);
    let n = footprint.offsets.len();
    Ok(RankSpec {
        footprint,
        border: padding.border(ty.dtype),
        rank: (n - 1) / 2,
        poison: Poison::NonFinite,
    })
}

/// The rank selection registry operator `p.op()` computes on input `ty` with parameters
/// `p` (every check of the graph form, none of the network's size limit).
pub fn spec_for(p: &Params<'_>, ty: &TensorType) -> Result<RankSpec, OpError> {
    let op = p.op();
    if op == "median_blur" {
        let (ky, kx, padding) = blur_params(p)?;
        return blur_spec(ty, ky, kx, padding);
    }
    let rank = spatial_rank(op, ty, 1)?;
    let window: Window = p.window(rank)?;
    let border = p.border(ty.dtype)?;
    let of = match op {
        "median_filter" => RankOf::Median,
        "rank_filter" => {
            let r = p
                .list::<i64>("rank", "integers")?
                .ok_or_else(|| p.missing("rank", "the rank is required"))?;
            match r.as_slice() {
                [r] => RankOf::Rank(*r),
                _ => return Err(p.bad("rank", "give one integer")),
            }
        }
        "percentile_filter" => {
            let q = p
                .list::<f64>("percentile", "numbers")?
                .ok_or_else(|| p.missing("percentile", "the percentile is required"))?;
            match q.as_slice() {
                [q] => RankOf::Percentile(*q),
                _ => return Err(p.bad("percentile", "give one number")),
            }
        }
        other => {
            return Err(OpError::BadInput {
                op,
                problem: format!("`{other}` is not a rank filter"),
            })
        }
    };
    scipy_spec(op, ty, &window, border, of)
}

/// The plan of `spec` on inputs of type `ty`: the network graph up to
/// [`MAX_SELECTION_WINDOW`] values (with kornia's non-finite mask for [`Poison::NonFinite`],
/// read through the same border), a [`RankProgram`] above.
pub fn plan_for_spec(
    name: &'static str,
    spec: RankSpec,
    ty: &TensorType,
) -> Result<OpPlan, OpError> {
    spec.check(name)?;
    if spec.footprint.offsets.len() > MAX_SELECTION_WINDOW {
        return Ok(OpPlan::Program(Box::new(RankProgram::new(name, spec)?)));
    }
    let mut b = GraphBuilder::new();
    let x = b.input(ty.dtype, &ty.shape)?;
    let out = spec_graph(&mut b, x, &spec)?;
    Ok(OpPlan::Graph(b.finish(&[out])?))
}

/// `spec` as graph nodes reading `x`: a selection network, and for [`Poison::NonFinite`]
/// the non-finite mask (a window `Any` of `!is_finite(x)` through the same border; a
/// constant border reads its constant's own finiteness) selecting the canonical NaN.
pub fn spec_graph(b: &mut GraphBuilder, x: NodeId, spec: &RankSpec) -> Result<NodeId, OpError> {
    let median = select_rank(b, x, &spec.footprint, spec.border, spec.rank)?;
    if spec.poison == Poison::Nan {
        return Ok(median);
    }
    let ty = checked_type(b, x)?;
    let finite = b.unary(UnaryOp::IsFinite, x)?;
    let bad = b.unary(UnaryOp::Not, finite)?;
    let mask_border = match spec.border {
        Border::Constant(c) => Border::Constant(Scalar::Bool(keys::is_non_finite(
            c.dtype(),
            keys::scalar_raw(c),
        ))),
        other => other,
    };
    let any_bad = b.window_reduce(bad, ReduceOp::Any, &spec.footprint, mask_border)?;
    let nan = b.constant_like(Scalar::from_f64(ty.dtype, f64::NAN), x)?;
    Ok(b.select(any_bad, nan, median)?)
}

fn check_blur_input(ty: &TensorType) -> Result<(), OpError> {
    const OP: &str = "median_blur";
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
    Ok(())
}

fn check_blur_size(ky: usize, kx: usize) -> Result<(), OpError> {
    if ky == 0 || kx == 0 {
        return Err(OpError::BadSize {
            op: "median_blur",
            size: vec![ky, kx],
            problem: "kernel size must be at least 1".into(),
        });
    }
    if ky
        .checked_mul(kx)
        .is_none_or(|n| n > kiln_ir::builder::MAX_FOOTPRINT)
    {
        return Err(OpError::BadSize {
            op: "median_blur",
            size: vec![ky, kx],
            problem: format!(
                "window of more than {} values",
                kiln_ir::builder::MAX_FOOTPRINT
            ),
        });
    }
    Ok(())
}

/// The plan of a rank operator whose window is over the network limit: a [`RankProgram`];
/// `None` for other operators and smaller windows (they are graphs, [`crate::build_op`]).
pub fn large_plan(
    name: &str,
    params: &[(String, String)],
    inputs: &[TensorType],
) -> Result<Option<OpPlan>, OpError> {
    let (Some(info), [ty]) = (crate::op_info(name), inputs) else {
        return Ok(None);
    };
    if !NAMES.contains(&info.name) {
        return Ok(None);
    }
    let p = Params::new(info, params)?;
    let spec = spec_for(&p, ty)?;
    if spec.footprint.offsets.len() <= MAX_SELECTION_WINDOW {
        return Ok(None);
    }
    Ok(Some(OpPlan::Program(Box::new(RankProgram::new(
        info.name, spec,
    )?))))
}

/// Graph form of `rank_filter`, `percentile_filter` and `median_blur` (with its `padding`)
/// for the registry: the selection network ([`select_rank`]), refused above
/// [`MAX_SELECTION_WINDOW`] values (those windows are programs, [`large_plan`]).
pub(crate) fn build_graph(
    p: &Params<'_>,
    b: &mut GraphBuilder,
    x: NodeId,
) -> Result<NodeId, OpError> {
    let ty = checked_type(b, x)?;
    let spec = spec_for(p, &ty)?;
    match p.op() {
        "median_blur" => {
            let (ky, kx, padding) = blur_params(p)?;
            median_blur_padded(b, x, ky, kx, padding)
        }
        _ => select_rank(b, x, &spec.footprint, spec.border, spec.rank),
    }
}

/// kornia's `median_blur` with a choice of padding: [`crate::median_blur_hw`] for
/// [`BlurPadding::Zeros`]; for [`BlurPadding::Reflect`] the same graph with every read
/// (the median's and the non-finite mask's) through torch's reflect padding.
pub fn median_blur_padded(
    b: &mut GraphBuilder,
    x: NodeId,
    ky: usize,
    kx: usize,
    padding: BlurPadding,
) -> Result<NodeId, OpError> {
    if padding == BlurPadding::Zeros {
        return crate::median::median_blur_hw(b, x, ky, kx);
    }
    let ty = checked_type(b, x)?;
    let spec = blur_spec(&ty, ky, kx, padding)?;
    spec_graph(b, x, &spec)
}

/// Runs rank operator `name` with `params` on `x`, through the network graph or the
/// program as [`crate::build_plan`] chooses, with `exec`.
pub fn run_rank(
    exec: crate::Exec<'_>,
    name: &str,
    params: &[(String, String)],
    x: &Tensor,
) -> Result<Tensor, RunError> {
    let ty = TensorType {
        dtype: x.dtype(),
        shape: x.shape().to_vec(),
    };
    let plan = crate::build_plan(name, params, &[ty])?;
    let mut out = plan.run(exec, std::slice::from_ref(x))?;
    Ok(out.remove(0))
}
