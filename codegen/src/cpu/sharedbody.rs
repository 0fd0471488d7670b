//! Emitting a shared step of the `F32X4` interior: several vectors at once, with values
//! taken from lane shuffles of neighbouring vectors and carried from step to step (the plan
//! is `shift::ShiftPlan`).
//!
//! Exactness: a derived value is the same program at a shifted column, so its lanes are the
//! bits the program would compute there (see `shift`). Limits: unit strides, every read in
//! range; the byte path has its own (`bytevec`).

use std::collections::BTreeMap;

use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::colbody::{emit_at, Frame};
use super::rowfn::{bad, Path, StageCode};
use super::values::{Em, Val};
use crate::CodegenError;

/// Emits `sp.blocks` vectors of the stage at columns `x, x + 4, ...` (stride 1,
/// every read in range), taking shift-equivalent values from lane shuffles of neighbouring
/// vectors (see `shift`) and the values of `sp.carry` from `carried` (their plain forms, in
/// that order); `store(b, u, value)` writes output vector `u` as soon as it is computed.
/// Returns the plain values the next step carries (`sp.carry` moved by `sp.blocks`
/// vectors).
pub(super) fn body_shared(
    b: &mut FunctionBuilder,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    x: Value,
    carried: &[Value],
    mut store: impl FnMut(&mut FunctionBuilder, usize, Value),
) -> Result<Vec<Value>, CodegenError> {
    let StageCode {
        stage, plan, fault, ..
    } = *code;
    let mut em = Em::new(b, true, fault, plan.int_picks);
    let mut frames: BTreeMap<i64, (Value, Frame)> = BTreeMap::new();
    for (&(i, v), &val) in sp.carry.iter().zip(carried) {
        let (_, f) = frame_at(&mut em, &mut frames, x, v, stage.insts.len());
        f.vals[i] = Some(Val::plain(stage.insts[i].dtype, val));
    }
    for u in 0..sp.needs.len() {
        for at in sp.needed(u, &plan.order) {
            ensure(&mut em, code, sp, &mut frames, x, at)?;
        }
        let mut r = frames
            .get(&(u as i64))
            .and_then(|f| f.1.vals[stage.result.0 as usize])
            .ok_or_else(|| bad("shared result not computed"))?;
        let p = em.result_value(&mut r, plan.raw_result);
        // Stored at once: Cranelift places pure instructions just before their first
        // side-effecting user, so a store per vector keeps each vector's work together.
        store(em.b, u, p);
    }
    let ahead = sp.blocks as i64;
    carried_values(&mut em, code, sp, &mut frames, x, ahead)
}

/// The plain values of `sp.carry` at vectors moved by `ahead` from step `x`, computing what
/// `frames` does not have yet: `ahead = 0` for the values a row's first step is given,
/// `sp.blocks` for those a step hands to the next.
pub(super) fn carried_values(
    em: &mut Em,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    frames: &mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    ahead: i64,
) -> Result<Vec<Value>, CodegenError> {
    let mut out = Vec::with_capacity(sp.carry.len());
    for &(i, v) in &sp.carry {
        ensure(em, code, sp, frames, x, (i, v + ahead))?;
        let f = frames
            .get_mut(&(v + ahead))
            .ok_or_else(|| bad("carried value not computed"))?;
        let mut val = f.1.vals[i].ok_or_else(|| bad("carried value not computed"))?;
        let p = em.plain(&mut val);
        f.1.vals[i] = Some(val);
        out.push(p);
    }
    Ok(out)
}

/// The frame of vector `v` of the step at `x`, created (with its column `x + 4v`) on first use.
pub(super) fn frame_at<'f>(
    em: &mut Em,
    frames: &'f mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    v: i64,
    n: usize,
) -> &'f mut (Value, Frame) {
    frames.entry(v).or_insert_with(|| {
        let xv = em.b.ins().iadd_imm_s(x, 4 * v);
        (xv, Frame::new(n))
    })
}

/// Emits instruction `i` at vector `v` of a shared step and, first, whatever it needs that
/// is not emitted yet (see `ShiftPlan::schedule`).
pub(super) fn ensure(
    em: &mut Em,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    frames: &mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    at: (usize, i64),
) -> Result<(), CodegenError> {
    let StageCode { stage, .. } = *code;
    let n = stage.insts.len();
    let todo = sp.schedule(stage, at, |(i, v)| {
        frames.get(&v).is_some_and(|f| f.1.vals[i].is_some())
    });
    for (i, v) in todo {
        frame_at(em, frames, x, v, n);
        match sp.derive[i] {
            Some((r, d)) => {
                let (fl, k) = (d.div_euclid(sp.lanes), d.rem_euclid(sp.lanes));
                let get = |frames: &BTreeMap<i64, (Value, Frame)>, w: i64| {
                    frames
                        .get(&w)
                        .and_then(|f| Some((f.1.vals[r]?, f.1.known[r])))
                        .ok_or_else(|| bad("shared value used before it is computed"))
                };
                let (mut lo, known) = get(frames, v + fl)?;
                let val = if k == 0 {
                    lo
                } else {
                    let (mut hi, _) = get(frames, v + fl + 1)?;
                    em.shift_lanes(&mut lo, &mut hi, k as u8)
                };
                if let Some((_, f)) = frames.get_mut(&v) {
                    f.vals[i] = Some(val);
                    f.known[i] = known;
                }
            }
            None => {
                if let Some((xv, f)) = frames.get_mut(&v) {
                    emit_at(em, code, f, i, *xv, Path::Vector)?;
                }
            }
        }
    }
    Ok(())
}
