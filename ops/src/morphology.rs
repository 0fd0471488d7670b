//! Grey and binary morphology with scipy.ndimage semantics, N-D over the spatial axes.
//!
//! Flat structuring elements (scipy's `size=` or `footprint=`); scipy's non-flat
//! `structure=` and the derived operators are in [`crate::morphology_grey`], the rest of the
//! binary family in [`crate::morphology_binary`].

use kiln_ir::{Border, GraphBuilder, NodeId, ReduceOp};

use crate::error::OpError;
use crate::median::checked_type;
use crate::window::{spatial_rank, Window};

/// scipy.ndimage's `grey_erosion(x, size | footprint, mode, cval, origin)` (the same as
/// `minimum_filter`): `out[i] = min over the footprint's true entries j of
/// x[i + j - size/2 - origin]`, each read under `border`. Any dtype; the minimum is kiln's
/// lattice min (NaN absorbing, `-0 < +0`), so with no NaN and no mixed signed zeros it
/// equals scipy's. The window applies to the spatial axes only.
pub fn grey_erosion(
    b: &mut GraphBuilder,
    x: NodeId,
    window: &Window,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "grey_erosion";
    let ty = checked_type(b, x)?;
    let w = window.resolve(OP, spatial_rank(OP, &ty, 1)?)?;
    Ok(b.window_reduce(x, ReduceOp::Min, &w.footprint(), border)?)
}

/// scipy.ndimage's `grey_dilation(x, size | footprint, mode, cval, origin)`: a maximum
/// filter over the REFLECTED footprint. scipy reverses the footprint on every axis and
/// passes `-origin` (and `-origin - 1` on axes of even extent) to `maximum_filter`; the two
/// adjustments together negate every offset, so `out[i] = max over true entries j of
/// x[i - (j - size/2 - origin)]` under `border`. `origin` is validated with the same range
/// as erosion (for even sizes scipy's adjusted origin has exactly the same valid range).
pub fn grey_dilation(
    b: &mut GraphBuilder,
    x: NodeId,
    window: &Window,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "grey_dilation";
    let ty = checked_type(b, x)?;
    let w = window.resolve(OP, spatial_rank(OP, &ty, 1)?)?;
    Ok(b.window_reduce(x, ReduceOp::Max, &w.reflected_footprint(), border)?)
}

/// scipy.ndimage's `grey_opening`: `grey_dilation(grey_erosion(x))` with the same window,
/// mode, cval and origin for both steps.
pub fn grey_opening(
    b: &mut GraphBuilder,
    x: NodeId,
    window: &Window,
    border: Border,
) -> Result<NodeId, OpError> {
    let e = grey_erosion(b, x, window, border)?;
    grey_dilation(b, e, window, border)
}

/// scipy.ndimage's `grey_closing`: `grey_erosion(grey_dilation(x))` with the same window,
/// mode, cval and origin for both steps.
pub fn grey_closing(
    b: &mut GraphBuilder,
    x: NodeId,
    window: &Window,
    border: Border,
) -> Result<NodeId, OpError> {
    let d = grey_dilation(b, x, window, border)?;
    grey_erosion(b, d, window, border)
}

/// scipy.ndimage's `binary_erosion(x, structure, iterations=1, border_value, origin)`:
/// `out[i]` is true iff every true entry `j` of the structure has `x[i + j - size/2 -
/// origin]` true, reads outside the image giving `border_value`. Non-bool inputs are
/// truth-tested as scipy does (NaN true, -0.0 false). `structure = None` is scipy's default,
/// the cross `generate_binary_structure(rank, 1)`; `origin` replaces any origin set on
/// `structure` (empty means 0). The structure must have at least one true entry. Iterations:
/// [`crate::binary_erosion_with`]; masks and fixpoints: [`crate::BinaryFixpoint`].
pub fn binary_erosion(
    b: &mut GraphBuilder,
    x: NodeId,
    structure: Option<&Window>,
    border_value: bool,
    origin: &[i64],
) -> Result<NodeId, OpError> {
    crate::morphology_binary::binary_erosion_with(
        b,
        x,
        &crate::morphology_binary::BinaryArgs {
            structure: structure.cloned(),
            iterations: 1,
            border_value,
            origin: origin.to_vec(),
        },
    )
}
