//! NaN-mask elision under a dominating guard.
//!
//! kornia's median (and any "NaN in, constant out" network) ends in
//! `select(g, C, m)` where `m` is a min/max DAG and `g` is an OR of `is_nan(l)` /
//! `not(is_finite(l))` over the network's inputs `l`. Whenever any input of `m` is NaN the
//! guard is true and the select returns `C`; so `m` only matters when none of its inputs is
//! NaN, and then no min/max in it can produce a NaN. Its comparators can therefore run on
//! order keys alone, without the NaN masks, and give the same bits.
//!
//! This module finds such cones. The rule, checked per `select(g, a, m)` with `m` a float
//! min/max:
//! * the *cone* of `m` is every float min/max reachable from `m` through min/max operands;
//!   its *leaves* are the other operands;
//! * every leaf is a non-NaN constant, or a value `l` with "`l` is NaN implies `g`"
//!   (see [`covered`]);
//! * the cone's values are used only inside the cone, and `m` itself only as the select's
//!   third operand (so no masked consumer ever sees an unmasked value), and no cone value is
//!   the stage's result.

use std::collections::{BTreeSet, HashMap};

use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use crate::kernel::{Op, Source, Stage};

/// Stages larger than this are left alone (the analysis is quadratic in the worst case).
const MAX_INSTS: usize = 50_000;

/// Largest OR-tree cover tracked per value (bigger guards are not analysed).
const MAX_COVER: usize = 4096;

fn is_nan_scalar(s: Scalar) -> bool {
    match s {
        Scalar::F32(b) => f32::from_bits(b).is_nan(),
        Scalar::F64(b) => f64::from_bits(b).is_nan(),
        _ => false,
    }
}

/// Per bool instruction: the set of values `l` such that "`l` is NaN" implies the bool is
/// true (a sound under-approximation).
fn covered(stage: &Stage) -> Vec<Option<BTreeSet<u32>>> {
    let insts = &stage.insts;
    let mut cov: Vec<Option<BTreeSet<u32>>> = vec![None; insts.len()];
    let get = |cov: &[Option<BTreeSet<u32>>], v: u32| -> BTreeSet<u32> {
        cov.get(v as usize).cloned().flatten().unwrap_or_default()
    };
    // The loads under a non-NaN constant border, by source and offset: a NaN test of any
    // load at that place covers them all (see `same_element`).
    let mut at: HashMap<(Source, &[i64]), Vec<u32>> = HashMap::new();
    for (i, inst) in insts.iter().enumerate() {
        if let Op::Load {
            source,
            offset,
            border: Border::Constant(c),
        } = &inst.op
        {
            if !is_nan_scalar(*c) {
                at.entry((*source, offset.as_slice()))
                    .or_default()
                    .push(i as u32);
            }
        }
    }
    let in_range_implied = |x: &BTreeSet<u32>, o: &[i64]| -> Vec<u32> {
        let mut v = Vec::new();
        for &l in x {
            if let Some(Op::Load { source, offset, .. }) = insts.get(l as usize).map(|i| &i.op) {
                if offset.as_slice() == o {
                    if let Some(ls) = at.get(&(*source, o)) {
                        v.extend_from_slice(ls);
                    }
                }
            }
        }
        v
    };
    // A NaN test of a load `l` covers `l` and, even without `in_range`, every load of the
    // same source at the same offset under a non-NaN constant border: such a load is NaN
    // only in range, where it reads the very element `l` reads (every border reads the
    // element itself in range).
    let same_element = |l: u32| -> BTreeSet<u32> {
        let mut s: BTreeSet<u32> = [l].into();
        if let Some(Op::Load { offset, .. }) = insts.get(l as usize).map(|i| &i.op) {
            s.extend(in_range_implied(&s.clone(), offset));
        }
        s
    };
    for (i, inst) in insts.iter().enumerate() {
        if inst.dtype != DType::Bool {
            continue;
        }
        let set: BTreeSet<u32> = match &inst.op {
            Op::Unary(UnaryOp::IsNan, l) => same_element(l.0),
            Op::Unary(UnaryOp::Not, f) => match insts.get(f.0 as usize).map(|x| &x.op) {
                Some(Op::Unary(UnaryOp::IsFinite, l)) => same_element(l.0),
                _ => continue,
            },
            Op::Binary(BinaryOp::Or | BinaryOp::Max, a, b) => {
                let mut s = get(&cov, a.0);
                s.extend(get(&cov, b.0));
                s
            }
            // `c and x` / `c ? x : y`: a NaN `l` covered by `x` (and by `y`, or implying `c`).
            Op::Binary(BinaryOp::And | BinaryOp::Min, a, b) => {
                let (sa, sb) = (get(&cov, a.0), get(&cov, b.0));
                let mut s: BTreeSet<u32> = sa.intersection(&sb).copied().collect();
                for (c, x) in [(a, &sb), (b, &sa)] {
                    if let Some(Op::InRange(o)) = insts.get(c.0 as usize).map(|x| &x.op) {
                        s.extend(in_range_implied(x, o));
                    }
                }
                s
            }
            Op::Select(c, a, b) => {
                let (sa, sb) = (get(&cov, a.0), get(&cov, b.0));
                let mut s: BTreeSet<u32> = sa.intersection(&sb).copied().collect();
                if let Some(Op::InRange(o)) = insts.get(c.0 as usize).map(|x| &x.op) {
                    s.extend(in_range_implied(&sa, o));
                }
                s
            }
            _ => continue,
        };
        if !set.is_empty() && set.len() <= MAX_COVER {
            cov[i] = Some(set);
        }
    }
    cov
}

fn float_minmax(stage: &Stage, v: u32) -> Option<(u32, u32)> {
    let inst = stage.insts.get(v as usize)?;
    match inst.op {
        Op::Binary(BinaryOp::Min | BinaryOp::Max, a, b) if inst.dtype.is_float() => {
            Some((a.0, b.0))
        }
        _ => None,
    }
}

/// Per instruction: true for a float min/max that may be computed without its NaN mask.
pub(crate) fn unmasked(stage: &Stage) -> Vec<bool> {
    let n = stage.insts.len();
    let mut out = vec![false; n];
    if n > MAX_INSTS {
        return out;
    }
    // Users of each value: (user, operand position).
    let mut users: Vec<Vec<(u32, u8)>> = vec![Vec::new(); n];
    for (i, inst) in stage.insts.iter().enumerate() {
        let ops: Vec<u32> = match &inst.op {
            Op::Unary(_, a) | Op::Cast(a) => vec![a.0],
            Op::Binary(_, a, b) => vec![a.0, b.0],
            Op::Select(c, a, b) => vec![c.0, a.0, b.0],
            _ => vec![],
        };
        for (pos, v) in ops.into_iter().enumerate() {
            if let Some(u) = users.get_mut(v as usize) {
                u.push((i as u32, pos as u8));
            }
        }
    }
    let mut cov: Option<Vec<Option<BTreeSet<u32>>>> = None;
    for (i, inst) in stage.insts.iter().enumerate() {
        let Op::Select(g, _, m) = inst.op else {
            continue;
        };
        if float_minmax(stage, m.0).is_none() {
            continue;
        }
        let cov = cov.get_or_insert_with(|| covered(stage));
        let Some(guard) = cov.get(g.0 as usize).and_then(|c| c.as_ref()) else {
            continue;
        };
        // The cone of `m`.
        let mut cone = BTreeSet::new();
        let mut stack = vec![m.0];
        let mut ok = true;
        while let Some(v) = stack.pop() {
            if !cone.insert(v) {
                continue;
            }
            let Some((a, b)) = float_minmax(stage, v) else {
                continue;
            };
            for x in [a, b] {
                if float_minmax(stage, x).is_some() {
                    stack.push(x);
                    continue;
                }
                let leaf_ok = match stage.insts.get(x as usize).map(|l| &l.op) {
                    Some(Op::Const(c)) => !is_nan_scalar(*c),
                    Some(_) => guard.contains(&x),
                    None => false,
                };
                ok &= leaf_ok;
            }
        }
        if !ok || cone.contains(&stage.result.0) {
            continue;
        }
        let private = cone.iter().all(|&v| {
            users[v as usize]
                .iter()
                .all(|&(u, pos)| cone.contains(&u) || (v == m.0 && u == i as u32 && pos == 2))
        });
        if private {
            for v in cone {
                out[v as usize] = true;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Inst, ValueId};

    fn load(o: i64, border: Border) -> Inst {
        Inst {
            op: Op::Load {
                source: Source::Input(0),
                offset: vec![0, o],
                border,
            },
            dtype: DType::F32,
        }
    }
    fn op(op: Op, dtype: DType) -> Inst {
        Inst { op, dtype }
    }
    fn v(i: u32) -> ValueId {
        ValueId(i)
    }

    /// `select(or(isnan(l0), not(isfinite(l1))), C, max(min(l0, l1), l1))`.
    fn guarded(extra_use: bool, cover_both: bool, cval: u32) -> Stage {
        let mut insts = vec![
            load(0, Border::Nearest),                               // 0
            load(1, Border::Constant(Scalar::F32(cval))),           // 1
            op(Op::Unary(UnaryOp::IsNan, v(0)), DType::Bool),       // 2
            op(Op::Unary(UnaryOp::IsFinite, v(1)), DType::Bool),    // 3
            op(Op::Unary(UnaryOp::Not, v(3)), DType::Bool),         // 4
            op(Op::InRange(vec![0, 1]), DType::Bool),               // 5
            op(Op::Const(Scalar::Bool(false)), DType::Bool),        // 6
            op(Op::Select(v(5), v(4), v(6)), DType::Bool),          // 7
            op(Op::Binary(BinaryOp::Or, v(2), v(7)), DType::Bool),  // 8
            op(Op::Const(Scalar::F32(0x7fc0_0000)), DType::F32),    // 9
            op(Op::Binary(BinaryOp::Min, v(0), v(1)), DType::F32),  // 10
            op(Op::Binary(BinaryOp::Max, v(10), v(1)), DType::F32), // 11
        ];
        let g = if cover_both { 8 } else { 2 };
        insts.push(op(Op::Select(v(g), v(9), v(11)), DType::F32)); // 12
        let mut result = 12;
        if extra_use {
            insts.push(op(Op::Binary(BinaryOp::Add, v(10), v(12)), DType::F32)); // 13
            result = 13;
        }
        Stage {
            insts,
            result: v(result),
        }
    }

    #[test]
    fn a_fully_guarded_cone_is_unmasked() {
        let u = unmasked(&guarded(false, true, 0));
        assert!(u[10] && u[11]);
        assert_eq!(u.iter().filter(|&&x| x).count(), 2);
    }

    #[test]
    fn an_uncovered_leaf_keeps_the_masks() {
        assert!(!unmasked(&guarded(false, false, 0)).iter().any(|&x| x));
    }

    #[test]
    fn a_nan_border_constant_is_not_covered_by_in_range() {
        let u = unmasked(&guarded(false, true, 0x7fc0_0001));
        assert!(!u.iter().any(|&x| x));
    }

    #[test]
    fn a_cone_value_used_outside_keeps_the_masks() {
        assert!(!unmasked(&guarded(true, true, 0)).iter().any(|&x| x));
    }
}
