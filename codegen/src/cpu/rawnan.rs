//! Analysis: which float arithmetic may leave its NaN as the hardware gives it (see
//! [`raw_nan`]).
//!
//! Exactness: a raw NaN only reaches users that give the same bits for any NaN operand, so
//! the stage's output bits are unchanged. Limits: one stage at a time; a select's operands
//! and the stage's result stay canonical.

use kiln_ir::{BinaryOp, UnaryOp};

use crate::kernel::{Op, Stage};

/// Which float arithmetic instructions may leave a NaN result as the hardware gives it
/// instead of the canonical NaN: those that are not the stage's result and whose every user
/// gives the same bits for any NaN operand: float arithmetic, neg, abs and sqrt (a NaN
/// operand makes their result NaN, which they canonicalise or, being raw themselves, pass
/// on to users of the same kind), min/max (their NaN test is an unordered compare, their NaN
/// result canonical), comparisons and NaN/finiteness tests (no payload in a bool), and casts
/// (canonical after a float conversion, payload-free to u8 and bool). A select passes its
/// operand's bits on, so a value it selects is always canonical. The stage's bits are
/// unchanged: only NaNs that no output can show skip the canonicalisation.
pub(crate) fn raw_nan(stage: &Stage) -> Vec<bool> {
    let arith = |op: &Op| {
        matches!(
            op,
            Op::Unary(UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt, _)
                | Op::Binary(
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div,
                    _,
                    _
                )
                | Op::Cast(_)
        )
    };
    let mut ok: Vec<bool> = stage
        .insts
        .iter()
        .map(|inst| inst.dtype.is_float() && arith(&inst.op))
        .collect();
    if let Some(r) = ok.get_mut(stage.result.0 as usize) {
        *r = false;
    }
    for inst in &stage.insts {
        // Users that pass an operand's bits on: a select's value operands.
        if let Op::Select(_, a, b) = inst.op {
            ok[a.0 as usize] = false;
            ok[b.0 as usize] = false;
        }
    }
    // Every other user kind is payload-free or NaN-propagating (see above).
    ok
}
