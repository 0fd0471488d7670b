//! Analysis: whether a stage's result may be stored with a raw NaN (see [`raw_result`]).
//!
//! Exactness: only NaN payloads change, and only where every later reader is payload-blind
//! (min/max, comparisons, NaN and finiteness tests). Limits: a stage read by a later stage's
//! result, or by any other kind of user, keeps canonical NaN.

use kiln_ir::{BinaryOp, UnaryOp};

use crate::kernel::{Op, Source, Stage};

/// Whether stage `si`'s result may be stored with a NaN as the hardware gives it: it is not
/// the kernel's output, and in every later stage each load of it is not that stage's result
/// and feeds only float min/max, comparisons and NaN/finiteness tests, which give the same
/// bits for any NaN operand. (Only a min tree has a raw form that saves work: see
/// `Em::result_value`.)
pub(crate) fn raw_result(stages: &[Stage], si: usize) -> bool {
    if si + 1 >= stages.len()
        || !stages[si].insts[stages[si].result.0 as usize]
            .dtype
            .is_float()
    {
        return false;
    }
    stages[si + 1..].iter().all(|st| {
        let loads: Vec<usize> = st
            .insts
            .iter()
            .enumerate()
            .filter(|(_, inst)| {
                matches!(inst.op, Op::Load { source: Source::Stage(k), .. } if k as usize == si)
            })
            .map(|(i, _)| i)
            .collect();
        if loads.contains(&(st.result.0 as usize)) {
            return false;
        }
        st.insts.iter().all(|inst| {
            let operands: Vec<u32> = match inst.op {
                Op::Unary(_, a) | Op::Cast(a) => vec![a.0],
                Op::Binary(_, a, b) => vec![a.0, b.0],
                Op::Select(c, a, b) => vec![c.0, a.0, b.0],
                _ => Vec::new(),
            };
            let safe = matches!(
                inst.op,
                Op::Binary(
                    BinaryOp::Min
                        | BinaryOp::Max
                        | BinaryOp::Lt
                        | BinaryOp::Le
                        | BinaryOp::Gt
                        | BinaryOp::Ge
                        | BinaryOp::Eq
                        | BinaryOp::Ne,
                    _,
                    _
                ) | Op::Unary(UnaryOp::IsNan | UnaryOp::IsFinite, _)
            );
            safe || !operands.iter().any(|&o| loads.contains(&(o as usize)))
        })
    })
}
