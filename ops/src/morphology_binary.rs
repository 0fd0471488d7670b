//! scipy.ndimage's binary morphology as graphs: erosion, dilation, opening, closing and
//! hit-or-miss with a fixed number of iterations (the fixpoint forms, `mask` and
//! `iterations < 1`, are programs in [`crate::morphology_program`]).
//!
//! Exactness: scipy computes every binary operation with one erosion kernel
//! (`NI_BinaryErosion`): `out[i] = AND over the structure's offsets o of x[i + o]` (reads
//! outside give `border_value`), or with `invert` (dilation, hit-or-miss's miss part)
//! `out[i] = OR over o of x[i + o]`. Each kernel here is one `window_reduce(All | Any)` of the
//! truth-tested input with a constant border, so results are booleans computed without any
//! arithmetic: bit-exact by construction. Dilation reflects the structure and negates the
//! origin (minus one on even axes), which together negate every offset
//! ([`crate::ResolvedWindow::reflected_footprint`]). Iterations unroll into a chain of
//! window stages that the fusion engine runs as one kernel.
//!
//! Limits: at most [`MAX_GRAPH_ITERATIONS`] iterations per graph; a structure with no true
//! entry is refused (scipy returns a constant image) except as hit-or-miss's `structure2`.

use kiln_ir::{BinaryOp, Border, DType, Footprint, GraphBuilder, NodeId, ReduceOp, Scalar};

use crate::error::OpError;
use crate::median::checked_type;
use crate::window::{spatial_rank, ResolvedWindow, Window};

/// The most iterations a graph form unrolls (more, or until convergence: the programs).
pub const MAX_GRAPH_ITERATIONS: usize = 64;

/// scipy's binary-morphology arguments shared by erosion, dilation, opening and closing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BinaryArgs {
    /// scipy's `structure` (`None`: `generate_binary_structure(rank, 1)`, the cross).
    pub structure: Option<Window>,
    /// scipy's `iterations` (graph forms: `1..=MAX_GRAPH_ITERATIONS`; 0 is taken as 1).
    pub iterations: usize,
    /// scipy's `border_value`: the value outside the image.
    pub border_value: bool,
    /// scipy's `origin` (replaces any origin on `structure`; empty means 0).
    pub origin: Vec<i64>,
}

impl BinaryArgs {
    /// One iteration, default structure, border 0, origin 0.
    pub fn new() -> BinaryArgs {
        BinaryArgs {
            iterations: 1,
            ..BinaryArgs::default()
        }
    }
}

/// scipy's truth test of an input: bool as is, any other dtype `x != 0` (NaN true, -0.0
/// false), as numpy's `astype(bool)`.
pub fn truth(b: &mut GraphBuilder, x: NodeId) -> Result<NodeId, OpError> {
    let ty = checked_type(b, x)?;
    if ty.dtype == DType::Bool {
        return Ok(x);
    }
    let zero = b.constant_like(Scalar::from_f64(ty.dtype, 0.0), x)?;
    Ok(b.binary(BinaryOp::Ne, x, zero)?)
}

/// Resolves a binary structure (default: the cross) with `origin` against spatial rank
/// `rank`. `allow_empty` accepts a structure with no true entry (hit-or-miss's structure2).
pub(crate) fn resolve_structure(
    op: &'static str,
    structure: Option<&Window>,
    origin: &[i64],
    rank: usize,
    allow_empty: bool,
) -> Result<ResolvedWindow, OpError> {
    let window = match structure {
        Some(s) => s.clone(),
        None => Window::cross(rank),
    }
    .with_origin(origin);
    let empty = matches!(&window.mask, Some(m) if !m.is_empty() && !m.iter().any(|&v| v));
    if allow_empty && empty {
        let full = Window {
            mask: window.mask.as_ref().map(|m| vec![true; m.len()]),
            ..window.clone()
        };
        let mut r = full.resolve(op, rank)?;
        r.mask = vec![false; r.mask.len()];
        return Ok(r);
    }
    window.resolve(op, rank)
}

/// True when offset 0 is in `fp` (scipy's `_center_is_true(structure, origin)`).
pub(crate) fn centre_is_true(fp: &Footprint) -> bool {
    fp.offsets.iter().any(|o| o.iter().all(|&v| v == 0))
}

/// One pass of scipy's erosion kernel on bool `x`: `All` over `fp` (or `Any` with
/// `invert`), reads outside giving `border_value`. An empty `fp` gives the empty fold
/// (true for `All`, false for `Any`).
pub(crate) fn kernel(
    b: &mut GraphBuilder,
    x: NodeId,
    fp: &Footprint,
    invert: bool,
    border_value: bool,
) -> Result<NodeId, OpError> {
    if fp.offsets.is_empty() {
        return Ok(b.constant_like(Scalar::Bool(!invert), x)?);
    }
    let op = if invert { ReduceOp::Any } else { ReduceOp::All };
    Ok(b.window_reduce(x, op, fp, Border::Constant(Scalar::Bool(border_value)))?)
}

/// The checked bool view of `x` and the resolved structure for `args`.
fn prepare(
    op: &'static str,
    b: &mut GraphBuilder,
    x: NodeId,
    args: &BinaryArgs,
) -> Result<(NodeId, ResolvedWindow, usize), OpError> {
    let ty = checked_type(b, x)?;
    let rank = spatial_rank(op, &ty, 1)?;
    let w = resolve_structure(op, args.structure.as_ref(), &args.origin, rank, false)?;
    let n = args.iterations.max(1);
    if n > MAX_GRAPH_ITERATIONS {
        return Err(OpError::BadParam {
            op,
            name: "iterations".into(),
            problem: format!(
                "{n} iterations: a graph unrolls at most {MAX_GRAPH_ITERATIONS} (use the program form)"
            ),
        });
    }
    Ok((truth(b, x)?, w, n))
}

/// `n` erosion passes (`reflect`: dilation passes) of bool `x`.
fn passes(
    b: &mut GraphBuilder,
    mut x: NodeId,
    w: &ResolvedWindow,
    dilate: bool,
    n: usize,
    border_value: bool,
) -> Result<NodeId, OpError> {
    let fp = if dilate {
        w.reflected_footprint()
    } else {
        w.footprint()
    };
    for _ in 0..n {
        x = kernel(b, x, &fp, dilate, border_value)?;
    }
    Ok(x)
}

/// scipy.ndimage's `binary_erosion(x, structure, iterations, border_value=bv, origin)`,
/// without `mask`: `out[i]` is true iff `x[i + o]` is true for every offset `o = j -
/// size/2 - origin` of a true structure entry `j` (reads outside give `bv`), repeated
/// `iterations` times. Non-bool inputs are truth-tested ([`truth`]). scipy's `brute_force`
/// does not change the result and has no counterpart.
pub fn binary_erosion_with(
    b: &mut GraphBuilder,
    x: NodeId,
    args: &BinaryArgs,
) -> Result<NodeId, OpError> {
    let (x, w, n) = prepare("binary_erosion", b, x, args)?;
    passes(b, x, &w, false, n, args.border_value)
}

/// scipy.ndimage's `binary_dilation(x, structure, iterations, border_value=bv, origin)`,
/// without `mask`: `out[i]` is true iff `x[i - o]` is true for some offset `o` of the
/// structure (scipy reflects the structure and negates the origin, shifting even axes by one;
/// together: every offset negated), reads outside giving `bv`, repeated `iterations` times.
pub fn binary_dilation(
    b: &mut GraphBuilder,
    x: NodeId,
    args: &BinaryArgs,
) -> Result<NodeId, OpError> {
    let (x, w, n) = prepare("binary_dilation", b, x, args)?;
    passes(b, x, &w, true, n, args.border_value)
}

/// scipy.ndimage's `binary_opening`: `binary_dilation(binary_erosion(x))`, both with the
/// same structure, iterations, border_value and origin. One fused kernel.
pub fn binary_opening(
    b: &mut GraphBuilder,
    x: NodeId,
    args: &BinaryArgs,
) -> Result<NodeId, OpError> {
    let (x, w, n) = prepare("binary_opening", b, x, args)?;
    let e = passes(b, x, &w, false, n, args.border_value)?;
    passes(b, e, &w, true, n, args.border_value)
}

/// scipy.ndimage's `binary_closing`: `binary_erosion(binary_dilation(x))`, both with the
/// same structure, iterations, border_value and origin. One fused kernel.
pub fn binary_closing(
    b: &mut GraphBuilder,
    x: NodeId,
    args: &BinaryArgs,
) -> Result<NodeId, OpError> {
    let (x, w, n) = prepare("binary_closing", b, x, args)?;
    let d = passes(b, x, &w, true, n, args.border_value)?;
    passes(b, d, &w, false, n, args.border_value)
}

/// scipy.ndimage's `binary_hit_or_miss(x, structure1, structure2, origin1, origin2)`:
/// `erosion(x, structure1, origin1, border 0) AND NOT any(x[i + o] for the offsets o of
/// structure2 at origin2)`. structure1 defaults to the cross, structure2 to `NOT structure1`
/// (which may have no true entry: the miss part is then false everywhere), origin2 to
/// origin1. structure2 is NOT reflected, and outside the image counts as background (false)
/// for the miss part, as in scipy (its inverted kernel with border 0).
pub fn binary_hit_or_miss(
    b: &mut GraphBuilder,
    x: NodeId,
    structure1: Option<&Window>,
    structure2: Option<&Window>,
    origin1: &[i64],
    origin2: Option<&[i64]>,
) -> Result<NodeId, OpError> {
    const OP: &str = "binary_hit_or_miss";
    let ty = checked_type(b, x)?;
    let rank = spatial_rank(OP, &ty, 1)?;
    let w1 = resolve_structure(OP, structure1, origin1, rank, false)?;
    let s2 = match structure2 {
        Some(s) => s.clone(),
        None => Window::footprint(&w1.shape, &w1.mask.iter().map(|&v| !v).collect::<Vec<_>>()),
    };
    let w2 = resolve_structure(OP, Some(&s2), origin2.unwrap_or(origin1), rank, true)?;
    let x = truth(b, x)?;
    let hit = kernel(b, x, &w1.footprint(), false, false)?;
    let miss = kernel(b, x, &w2.footprint(), true, false)?;
    let not_miss = b.unary(kiln_ir::UnaryOp::Not, miss)?;
    Ok(b.binary(BinaryOp::And, hit, not_miss)?)
}
