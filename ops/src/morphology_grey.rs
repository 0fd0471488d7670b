//! scipy.ndimage's derived grey morphology (white/black tophat, morphological gradient and
//! laplace) and the grey operators' non-flat `structure`, as graphs.
//!
//! Exactness: the flat forms reuse [`crate::grey_erosion`] / [`crate::grey_dilation`]
//! (selections, exact). A non-flat structure follows scipy's C kernel: every value is read
//! in the input dtype (cval converted to it), widened to f64, `-s` (erosion) or `+s`
//! (dilation) added in f64, the min/max taken in f64 and the result converted back to the
//! input dtype. Here each structure entry is one `gather` + f64 add, folded with the lattice
//! min/max, then one cast: the same roundings in the same order. Past
//! `footprint::CHUNK_READS` (128) entries the fold is cut into chunks, each materialised
//! through an identity line and so a kernel of its own, then combined pointwise: the
//! lattice min/max is associative and commutative, so the bits do not change and no stage
//! grows with the structure (a 71x71 structure is 40 kernels, not one refused stage). The derived operators
//! then compute in the input dtype as numpy does: `x - opening`, `closing - x`, `dil - ero`,
//! `((dil + ero) - x) - x`, wrapping for integers; the tophats use XOR on bool.
//!
//! Limits: as the flat operators, NaN is absorbing in the min/max (scipy's result with NaN
//! depends on the scan order) and `-0 < +0`. A non-flat structure takes f32 and f64 only:
//! scipy's integer results with a non-flat structure (mixed truncation and wrapping that
//! depends on the entry) are not reproduced yet, so u8 and bool are refused. The gradient and laplace refuse bool
//! input (numpy refuses bool subtraction).

use kiln_ir::passes::footprint::{combine_parts, identity_line, CHUNK_READS};
use kiln_ir::{BinaryOp, Border, DType, GraphBuilder, NodeId, Scalar};

use crate::error::OpError;
use crate::median::checked_type;
use crate::morphology::{grey_dilation, grey_erosion};
use crate::window::{spatial_rank, Window};

/// A grey structuring element: the window (its shape, optional footprint mask and origin)
/// and, for scipy's `structure=`, one f64 value per window entry (row-major, over the full
/// shape; entries off the footprint are ignored). `values: None` is a flat element.
#[derive(Clone, Debug, PartialEq)]
pub struct GreyElement {
    /// Shape, footprint and origin.
    pub window: Window,
    /// scipy's `structure` values, row-major over `window.shape` (`None`: flat).
    pub values: Option<Vec<f64>>,
}

impl GreyElement {
    /// A flat element (scipy's `size=` or `footprint=`).
    pub fn flat(window: Window) -> GreyElement {
        GreyElement {
            window,
            values: None,
        }
    }

    /// scipy's `structure=` alone: a full window of `shape` with these values.
    pub fn structure(shape: &[usize], values: &[f64]) -> GreyElement {
        GreyElement {
            window: Window::footprint(shape, &vec![true; values.len()]),
            values: Some(values.to_vec()),
        }
    }
}

/// Erosion (`dilate = false`) or dilation of `x` by `el` under `border`.
fn grey_stage(
    op: &'static str,
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
    dilate: bool,
) -> Result<NodeId, OpError> {
    let Some(values) = &el.values else {
        return if dilate {
            grey_dilation(b, x, &el.window, border)
        } else {
            grey_erosion(b, x, &el.window, border)
        };
    };
    let ty = checked_type(b, x)?;
    let w = el.window.resolve(op, spatial_rank(op, &ty, 1)?)?;
    if values.len() != w.mask.len() {
        return Err(OpError::BadFootprint {
            op,
            problem: format!(
                "structure has {} values, shape {:?} needs {}",
                values.len(),
                w.shape,
                w.mask.len()
            ),
        });
    }
    let fp = if dilate {
        w.reflected_footprint()
    } else {
        w.footprint()
    };
    // Footprint offsets are the mask's true entries in row-major order.
    let active = values.iter().zip(&w.mask).filter(|(_, &on)| on);
    if !matches!(ty.dtype, DType::F32 | DType::F64) {
        return Err(OpError::BadInput {
            op,
            problem: format!(
                "a non-flat structure needs f32 or f64 input, got {} (scipy's integer path is not reproduced)",
                ty.dtype
            ),
        });
    }
    // Past CHUNK_READS entries the fold is cut into chunks, each materialised through an
    // identity line (a kernel of its own), so no stage grows with the structure; the lattice
    // min/max is associative and commutative (NaN absorbing, -0 < +0), so the chunked fold
    // has the unchunked one's bits.
    let chunked = fp.offsets.len() > CHUNK_READS;
    let combiner = if dilate { BinaryOp::Max } else { BinaryOp::Min };
    let mut acc: Option<NodeId> = None;
    let mut parts: Vec<NodeId> = Vec::new();
    for (i, (off, (&s, _))) in fp.offsets.iter().zip(active).enumerate() {
        if chunked && i > 0 && i % CHUNK_READS == 0 {
            let part = acc.take().expect("a chunk has an entry");
            parts.push(b.line(part, identity_line())?);
        }
        let g = b.gather(x, off, border)?;
        // scipy: the value widened to f64, the structure value added in f64.
        let g = if ty.dtype == DType::F64 {
            g
        } else {
            b.cast(g, DType::F64)?
        };
        let c = b.constant_like(Scalar::f64(if dilate { s } else { -s }), g)?;
        let t = b.binary(BinaryOp::Add, g, c)?;
        acc = Some(match acc {
            None => t,
            Some(a) => b.binary(combiner, a, t)?,
        });
    }
    let mut acc = acc.expect("a resolved window has at least one entry");
    if chunked {
        parts.push(b.line(acc, identity_line())?);
        acc = combine_parts(b, parts, combiner)?;
    }
    Ok(if ty.dtype == DType::F32 {
        b.cast(acc, ty.dtype)?
    } else {
        acc
    })
}

/// scipy.ndimage's `grey_erosion` with an element that may be non-flat: `out[i] = min over
/// footprint entries j of x[i + o_j] - s_j` in f64, converted to the input dtype (f32 or
/// f64; flat elements: [`crate::grey_erosion`], any dtype).
pub fn grey_erosion_el(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    grey_stage("grey_erosion", b, x, el, border, false)
}

/// scipy.ndimage's `grey_dilation` with an element that may be non-flat: `out[i] = max over
/// footprint entries j of x[i - o_j] + s_j` (arithmetic as for erosion) (scipy
/// reflects the structure and adjusts the origin; together every offset is negated).
pub fn grey_dilation_el(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    grey_stage("grey_dilation", b, x, el, border, true)
}

/// `a - b` in the input dtype (wrapping for integers), or `a XOR b` on bool when `xor_bool`.
fn difference(
    op: &'static str,
    b: &mut GraphBuilder,
    l: NodeId,
    r: NodeId,
    xor_bool: bool,
) -> Result<NodeId, OpError> {
    let dtype = checked_type(b, l)?.dtype;
    if dtype == DType::Bool {
        if !xor_bool {
            return Err(OpError::BadInput {
                op,
                problem: "bool input: numpy refuses boolean subtraction".into(),
            });
        }
        return Ok(b.binary(BinaryOp::Ne, l, r)?);
    }
    Ok(b.binary(BinaryOp::Sub, l, r)?)
}

/// scipy.ndimage's `white_tophat`: `x - grey_dilation(grey_erosion(x))` in the input dtype
/// (XOR on bool), same element, mode, cval and origin for both stages. One fused kernel.
pub fn white_tophat(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "white_tophat";
    checked_type(b, x)?;
    let e = grey_stage(OP, b, x, el, border, false)?;
    let o = grey_stage(OP, b, e, el, border, true)?;
    difference(OP, b, x, o, true)
}

/// scipy.ndimage's `black_tophat`: `grey_erosion(grey_dilation(x)) - x` in the input dtype
/// (XOR on bool). One fused kernel.
pub fn black_tophat(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "black_tophat";
    checked_type(b, x)?;
    let d = grey_stage(OP, b, x, el, border, true)?;
    let c = grey_stage(OP, b, d, el, border, false)?;
    difference(OP, b, c, x, true)
}

/// scipy.ndimage's `morphological_gradient`: `grey_dilation(x) - grey_erosion(x)` in the
/// input dtype (wrapping); both window stages read `x` in one kernel. Bool is refused.
pub fn morphological_gradient(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "morphological_gradient";
    refuse_bool(OP, b, x)?;
    let d = grey_stage(OP, b, x, el, border, true)?;
    let e = grey_stage(OP, b, x, el, border, false)?;
    difference(OP, b, d, e, false)
}

/// scipy.ndimage's `morphological_laplace`: `((grey_dilation(x) + grey_erosion(x)) - x) - x`
/// in the input dtype (wrapping), in that order. Bool is refused.
pub fn morphological_laplace(
    b: &mut GraphBuilder,
    x: NodeId,
    el: &GreyElement,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "morphological_laplace";
    refuse_bool(OP, b, x)?;
    let d = grey_stage(OP, b, x, el, border, true)?;
    let e = grey_stage(OP, b, x, el, border, false)?;
    let s = b.binary(BinaryOp::Add, d, e)?;
    let s = b.binary(BinaryOp::Sub, s, x)?;
    Ok(b.binary(BinaryOp::Sub, s, x)?)
}

fn refuse_bool(op: &'static str, b: &GraphBuilder, x: NodeId) -> Result<(), OpError> {
    if checked_type(b, x)?.dtype == DType::Bool {
        return Err(OpError::BadInput {
            op,
            problem: "bool input: numpy refuses boolean subtraction".into(),
        });
    }
    Ok(())
}
