//! Central-difference gradient magnitude.

use kiln_ir::{BinaryOp, Border, GraphBuilder, NodeId, UnaryOp};

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
    let shifted = |axis: usize, d: i64| {
        let mut off = vec![0i64; rank];
        off[axis] = d;
        off
    };
    let right = b.gather(x, &shifted(rank - 1, 1), border)?;
    let left = b.gather(x, &shifted(rank - 1, -1), border)?;
    let dx = b.binary(BinaryOp::Sub, right, left)?;
    let down = b.gather(x, &shifted(rank - 2, 1), border)?;
    let up = b.gather(x, &shifted(rank - 2, -1), border)?;
    let dy = b.binary(BinaryOp::Sub, down, up)?;
    let dx2 = b.binary(BinaryOp::Mul, dx, dx)?;
    let dy2 = b.binary(BinaryOp::Mul, dy, dy)?;
    let sum = b.binary(BinaryOp::Add, dx2, dy2)?;
    Ok(b.unary(UnaryOp::Sqrt, sum)?)
}
