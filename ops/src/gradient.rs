//! Central-difference gradient magnitude, matching scipy's convolve-based formula bit for
//! bit, including a `cval` that the input dtype cannot represent (scipy's convolve reads the
//! border constant in f64; the differences are then taken in f64 and rounded once, exactly
//! as scipy does). Limits: two trailing spatial axes, f32 or f64 input.

use kiln_ir::{BinaryOp, Border, DType, GraphBuilder, NodeId, Scalar, UnaryOp};

use crate::error::OpError;
use crate::median::checked_type;
use crate::window::spatial_rank;

/// Gradient magnitude over the last two spatial axes of `x` (f32 or f64, at least two
/// spatial dims; other axes untouched):
/// `dx = x[.., i, j+1] - x[.., i, j-1]`, `dy = x[.., i+1, j] - x[.., i-1, j]`, each read under
/// `border`, and `out = sqrt(dx*dx + dy*dy)`, every step rounded in the input dtype, in
/// exactly that order (`dx*dx` first).
///
/// This equals scipy's `sqrt(convolve(x, [[0,0,0],[1,0,-1],[0,0,0]])**2 +
/// convolve(x, [[0,1,0],[0,0,0],[0,-1,0]])**2)` with the same `mode`/`cval`: convolve flips
/// the kernel, so the `+1` weight reads `x[j+1]` and the `-1` weight reads `x[j-1]`. scipy
/// accumulates `0 + x[j+1] - x[j-1]` in f64 and rounds to f32 once; for a single f32
/// subtraction that double rounding is innocuous (53 >= 2*24 + 2), so the value is the same
/// (up to the sign of a zero difference, which squaring removes). A NaN result (e.g. from
/// `Inf - Inf`) is kiln's canonical NaN.
///
/// `border` may carry an f64 constant for f32 input (as the registry passes `cval`). When
/// that constant is not exactly an f32 (`cval=0.1`), each difference is computed as scipy
/// computes it: both reads widened to f64 (the border constant unrounded), subtracted in f64
/// and rounded to f32 once. This is the same value as the f32 path whenever the constant is
/// an f32, so that path is kept for them.
pub fn gradient_magnitude(
    b: &mut GraphBuilder,
    x: NodeId,
    border: Border,
) -> Result<NodeId, OpError> {
    const OP: &str = "gradient_magnitude";
    let ty = checked_type(b, x)?;
    let rank = spatial_rank(OP, &ty, 2)?;
    if !ty.dtype.is_float() {
        return Err(OpError::BadInput {
            op: OP,
            problem: format!("input must be f32 or f64, got {}", ty.dtype),
        });
    }
    let (src, border, wide) = match border {
        Border::Constant(c @ Scalar::F64(bits)) if ty.dtype == DType::F32 => {
            let v = f64::from_bits(bits);
            if v.is_nan() || (v as f32) as f64 == v {
                (x, Border::Constant(Scalar::from_f64(DType::F32, v)), false)
            } else {
                (b.cast(x, DType::F64)?, Border::Constant(c), true)
            }
        }
        other => (x, other, false),
    };
    let shifted = |axis: usize, d: i64| {
        let mut off = vec![0i64; rank];
        off[axis] = d;
        off
    };
    let diff = |b: &mut GraphBuilder, axis: usize| -> Result<NodeId, OpError> {
        let plus = b.gather(src, &shifted(axis, 1), border)?;
        let minus = b.gather(src, &shifted(axis, -1), border)?;
        let d = b.binary(BinaryOp::Sub, plus, minus)?;
        Ok(if wide { b.cast(d, DType::F32)? } else { d })
    };
    let dx = diff(b, rank - 1)?;
    let dy = diff(b, rank - 2)?;
    let dx2 = b.binary(BinaryOp::Mul, dx, dx)?;
    let dy2 = b.binary(BinaryOp::Mul, dy, dy)?;
    let sum = b.binary(BinaryOp::Add, dx2, dy2)?;
    Ok(b.unary(UnaryOp::Sqrt, sum)?)
}
