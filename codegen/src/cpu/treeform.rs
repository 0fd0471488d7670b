//! Analysis: which float min/max run in compare form inside pure min (or max) trees (see
//! [`tree_form`]).
//!
//! Exactness: compare form and order keys give the same bits (the compare form keeps a bits
//! accumulator for the sign of zero, see `values::Tree`); this only picks the cheaper one.
//! Limits: a fixed point over the stage; a comparator pair stays on keys.

use kiln_ir::BinaryOp;

use crate::kernel::{Op, Stage};

/// Which float min/max instructions run in compare form (`a < b ? a : b`, one `minps`, plus
/// a bits accumulator for the sign of zero) rather than on order keys: those in pure min
/// (or pure max) trees. An instruction qualifies when none of its operands also feeds the
/// opposite op (a comparator pair shares its key conversions, which keys do best), every
/// min/max operand is a tree of the same kind, and every min/max user is one too (so no
/// key-form consumer has to decode it). Either form gives the same bits; this only picks
/// the cheaper one.
pub(crate) fn tree_form(stage: &Stage) -> Vec<bool> {
    let n = stage.insts.len();
    let minmax = |i: usize| -> Option<(bool, u32, u32)> {
        let inst = &stage.insts[i];
        if !inst.dtype.is_float() {
            return None;
        }
        match inst.op {
            Op::Binary(BinaryOp::Min, a, b) => Some((false, a.0, b.0)),
            Op::Binary(BinaryOp::Max, a, b) => Some((true, a.0, b.0)),
            _ => None,
        }
    };
    // Values used as an operand of a min (`[0]`) or of a max (`[1]`).
    let mut feeds = vec![[false; 2]; n];
    for i in 0..n {
        if let Some((max, a, b)) = minmax(i) {
            feeds[a as usize][max as usize] = true;
            feeds[b as usize][max as usize] = true;
        }
    }
    let mut tree: Vec<bool> = (0..n)
        .map(|i| match minmax(i) {
            Some((max, a, b)) => {
                !feeds[a as usize][!max as usize] && !feeds[b as usize][!max as usize]
            }
            None => false,
        })
        .collect();
    // Remove instructions with a min/max operand or user outside the trees of their kind,
    // until nothing changes.
    loop {
        let mut changed = false;
        for i in 0..n {
            let Some((max, a, b)) = minmax(i) else {
                continue;
            };
            for o in [a as usize, b as usize] {
                if let Some((omax, ..)) = minmax(o) {
                    let ok = tree[o] && omax == max;
                    if tree[i] && !ok {
                        tree[i] = false;
                        changed = true;
                    }
                    if tree[o] && !(tree[i] && omax == max) {
                        tree[o] = false;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return tree;
        }
    }
}
