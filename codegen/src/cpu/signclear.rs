//! Analysis: which float values are a NaN or have a clear sign bit whatever the inputs (see
//! [`sign_clear`]).
//!
//! Exactness: for such values one unsigned minimum against the canonical NaN's bits gives
//! the same result as the usual NaN test and select. Limits: a forward pass over obvious
//! cases (squares, abs, sums and products of such values, casts from u8/bool).

use kiln_ir::{BinaryOp, DType, Scalar, UnaryOp};

use crate::kernel::{Op, Stage};

/// Which float instructions give a NaN or a value with a clear sign bit (`+0` up to
/// `+inf`), whatever the inputs: a square `x * x`; a sum, product or quotient of two such
/// values (`+0 + +0 = +0`, and any NaN they make is allowed); the square root, absolute
/// value, min, max or select of such values; a cast from such a float or from u8/bool;
/// constants with a clear sign. The code generator canonicalises their arithmetic's NaN
/// with one unsigned minimum (see `Em::canon`); the bits are those of the usual test.
pub(crate) fn sign_clear(stage: &Stage) -> Vec<bool> {
    let mut clear = vec![false; stage.insts.len()];
    for (i, inst) in stage.insts.iter().enumerate() {
        if !inst.dtype.is_float() {
            continue;
        }
        let c = |v: &crate::kernel::ValueId| clear[v.0 as usize];
        clear[i] = match &inst.op {
            Op::Binary(BinaryOp::Mul, a, b) if a == b => true,
            Op::Binary(
                BinaryOp::Add | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Min | BinaryOp::Max,
                a,
                b,
            ) => c(a) && c(b),
            Op::Unary(UnaryOp::Sqrt, a) => c(a),
            Op::Unary(UnaryOp::Abs, _) => true,
            Op::Select(_, a, b) => c(a) && c(b),
            Op::Cast(a) => match stage.insts[a.0 as usize].dtype {
                DType::U8 | DType::Bool => true,
                d if d.is_float() => c(a),
                _ => false,
            },
            Op::Const(Scalar::F32(bits)) => bits >> 31 == 0,
            Op::Const(Scalar::F64(bits)) => bits >> 63 == 0,
            _ => false,
        };
    }
    clear
}
