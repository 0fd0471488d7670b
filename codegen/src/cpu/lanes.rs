//! One vector emitter over a lane trait: the stage program at one vector (interior or edge
//! vector, [`body`]) and the shared steps of several vectors whose shift-equivalent values
//! come from lane shuffles of neighbouring vectors and are carried from step to step
//! ([`body_shared`], [`carried_first`], planned by `shift::ShiftPlan`), the vector and
//! edge-anchor loads ([`load`], [`anchor_load`]) and an edge vector's lane flags
//! ([`lane_flags`]). [`VectorLanes`] is what a lane form
//! supplies: its lane count and width, its frames of values, the lane shift, and the op
//! semantics of one instruction. Implemented for 4 x f32 (`colbody::F32Lanes`, whose
//! semantics are `values`) and 16 x u8/bool (`bytevec::ByteLanes`).
//!
//! Exactness: this file only decides which instruction is emitted at which vector and where
//! a value comes from; every bit is computed by the lane form's own op semantics. A derived
//! value is the same program at a shifted column, so the lane shift of the representative
//! at two neighbouring vectors gives the bits the program would compute there (see
//! `shift`). Limits: unit strides; in a shared step every read is in the row; the scalar
//! border path stays in `colbody`.

use std::collections::BTreeMap;

use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::edge::{Anchor, Shape};
use super::rowfn::{bad, Path};
use super::shift::ShiftPlan;
use super::values::mem;
use crate::kernel::Stage;
use crate::CodegenError;

/// A lane form driven by the vector emitter: `LANES` columns per vector, values of type
/// `Val` kept per instruction in a `Frame`, and the op semantics of one instruction.
pub(super) trait VectorLanes<'b> {
    /// A value in register form, with whatever forms the op semantics cache beside it.
    type Val: Copy;
    /// The values of one vector of a stage program, filled instruction by instruction.
    type Frame;
    /// Columns per vector.
    const LANES: i64;
    /// Bytes per lane as a shift: column `x` is at byte `x << LANE_SHIFT` of its row.
    const LANE_SHIFT: i64;
    /// The edge vectors' shape (see `edge`).
    const SHAPE: Shape;

    /// The function being built.
    fn builder(&mut self) -> &mut FunctionBuilder<'b>;
    /// An empty frame for a program of `n` instructions.
    fn frame(&self, n: usize) -> Self::Frame;
    /// The value of instruction `i` in `frame`, once emitted.
    fn get(frame: &Self::Frame, i: usize) -> Option<Self::Val>;
    /// Sets the value of instruction `i` in `frame`.
    fn set(frame: &mut Self::Frame, i: usize, v: Self::Val);
    /// The op semantics: emits instruction `i` at column `x` on `path` into `frame`, whose
    /// operands are already there.
    fn emit(
        &mut self,
        frame: &mut Self::Frame,
        i: usize,
        x: Value,
        path: Path,
    ) -> Result<(), CodegenError>;
    /// Lanes `k..k + LANES` of `lo` then `hi` (`1 <= k < LANES`): the value `k` columns to
    /// the right of `lo`'s vector.
    fn shift(&mut self, lo: Self::Val, hi: Self::Val, k: u8) -> Self::Val;
    /// The value of instruction `i` given as the plain lanes `v` (a carried value).
    fn carried(&self, i: usize, v: Value) -> Self::Val;
    /// The plain lanes of `v` (what a step carries), computed once.
    fn plain(&mut self, v: &mut Self::Val) -> Value;
    /// The lanes of the stage's result `v` as they are stored.
    fn result(&mut self, v: &mut Self::Val) -> Value;
}

/// Emits one vector of `stage` (its instructions in `order`) at column `x` on `path`
/// (`Vector` or `Edge`); returns the result's lanes.
pub(super) fn body<'b, L: VectorLanes<'b>>(
    l: &mut L,
    stage: &Stage,
    order: impl IntoIterator<Item = usize>,
    x: Value,
    path: Path,
) -> Result<Value, CodegenError> {
    let mut frame = l.frame(stage.insts.len());
    for i in order {
        l.emit(&mut frame, i, x, path)?;
    }
    let mut r = L::get(&frame, stage.result.0 as usize)
        .ok_or_else(|| bad("operand used before it is computed"))?;
    Ok(l.result(&mut r))
}

/// One vector of a shared step: its first column and its frame.
type Frames<F> = BTreeMap<i64, (Value, F)>;

/// Emits `sp.blocks` vectors of `stage` (emission order `order`) at columns `x, x + LANES, ...` (unit strides, every read in the row),
/// taking shift-equivalent values from lane shuffles of neighbouring vectors (see `shift`)
/// and the values of `sp.carry` from `carried` (their plain lanes, in that order);
/// `store(b, u, lanes)` writes output vector `u` as soon as it is computed. Returns the
/// plain lanes the next step carries (`sp.carry` moved by `sp.blocks` vectors).
#[allow(clippy::too_many_arguments)]
pub(super) fn body_shared<'b, L: VectorLanes<'b>>(
    l: &mut L,
    stage: &Stage,
    sp: &ShiftPlan,
    order: &[usize],
    x: Value,
    carried: &[Value],
    mut store: impl FnMut(&mut FunctionBuilder, usize, Value),
) -> Result<Vec<Value>, CodegenError> {
    let n = stage.insts.len();
    let mut frames: Frames<L::Frame> = BTreeMap::new();
    for (&(i, v), &val) in sp.carry.iter().zip(carried) {
        let c = l.carried(i, val);
        L::set(&mut frame_at(l, &mut frames, x, v, n).1, i, c);
    }
    for u in 0..sp.needs.len() {
        for at in sp.needed(u, order) {
            ensure(l, stage, sp, &mut frames, x, at)?;
        }
        let mut r = frames
            .get(&(u as i64))
            .and_then(|f| L::get(&f.1, stage.result.0 as usize))
            .ok_or_else(|| bad("shared result not computed"))?;
        let p = l.result(&mut r);
        // Stored at once: Cranelift places pure instructions just before their first
        // side-effecting user, so a store per vector keeps each vector's work together.
        store(l.builder(), u, p);
    }
    carried_values(l, stage, sp, &mut frames, x, sp.blocks as i64)
}

/// The plain lanes of `sp.carry` for a row's first shared step at `x` (and a redone last
/// one), computed from scratch.
pub(super) fn carried_first<'b, L: VectorLanes<'b>>(
    l: &mut L,
    stage: &Stage,
    sp: &ShiftPlan,
    x: Value,
) -> Result<Vec<Value>, CodegenError> {
    let mut frames: Frames<L::Frame> = BTreeMap::new();
    carried_values(l, stage, sp, &mut frames, x, 0)
}

/// The plain lanes of `sp.carry` at vectors moved by `ahead` from the step at `x`,
/// computing what `frames` does not have yet.
fn carried_values<'b, L: VectorLanes<'b>>(
    l: &mut L,
    stage: &Stage,
    sp: &ShiftPlan,
    frames: &mut Frames<L::Frame>,
    x: Value,
    ahead: i64,
) -> Result<Vec<Value>, CodegenError> {
    let mut out = Vec::with_capacity(sp.carry.len());
    for &(i, v) in &sp.carry {
        ensure(l, stage, sp, frames, x, (i, v + ahead))?;
        let f = frames
            .get_mut(&(v + ahead))
            .ok_or_else(|| bad("carried value not computed"))?;
        let mut val = L::get(&f.1, i).ok_or_else(|| bad("carried value not computed"))?;
        out.push(l.plain(&mut val));
        L::set(&mut f.1, i, val);
    }
    Ok(out)
}

/// The frame of vector `v` of the step at `x`, created (with its column `x + LANES * v`)
/// on first use.
fn frame_at<'f, 'b, L: VectorLanes<'b>>(
    l: &mut L,
    frames: &'f mut Frames<L::Frame>,
    x: Value,
    v: i64,
    n: usize,
) -> &'f mut (Value, L::Frame) {
    frames.entry(v).or_insert_with(|| {
        let xv = l.builder().ins().iadd_imm_s(x, L::LANES * v);
        (xv, l.frame(n))
    })
}

/// Emits instruction `i` at vector `v` of a shared step and, first, whatever it needs that
/// is not emitted yet (see `ShiftPlan::schedule`).
fn ensure<'b, L: VectorLanes<'b>>(
    l: &mut L,
    stage: &Stage,
    sp: &ShiftPlan,
    frames: &mut Frames<L::Frame>,
    x: Value,
    at: (usize, i64),
) -> Result<(), CodegenError> {
    let n = stage.insts.len();
    let todo = sp.schedule(stage, at, |(i, v)| {
        frames.get(&v).is_some_and(|f| L::get(&f.1, i).is_some())
    });
    for (i, v) in todo {
        let xv = frame_at(l, frames, x, v, n).0;
        match sp.derive[i] {
            Some((r, d)) => {
                let (fl, k) = (d.div_euclid(sp.lanes), d.rem_euclid(sp.lanes));
                let get = |frames: &Frames<L::Frame>, w: i64| {
                    frames
                        .get(&w)
                        .and_then(|f| L::get(&f.1, r))
                        .ok_or_else(|| bad("shared value used before it is computed"))
                };
                let lo = get(frames, v + fl)?;
                let val = if k == 0 {
                    lo
                } else {
                    let hi = get(frames, v + fl + 1)?;
                    l.shift(lo, hi, k as u8)
                };
                if let Some((_, f)) = frames.get_mut(&v) {
                    L::set(f, i, val);
                }
            }
            None => {
                if let Some((_, f)) = frames.get_mut(&v) {
                    l.emit(f, i, xv, Path::Vector)?;
                }
            }
        }
    }
    Ok(())
}

/// Byte offset of column `x` in a row of `L` lanes (no shift for one-byte lanes).
fn col_offset<'b, L: VectorLanes<'b>>(b: &mut FunctionBuilder, x: Value) -> Value {
    if L::LANE_SHIFT == 0 {
        x
    } else {
        b.ins().ishl_imm_u(x, L::LANE_SHIFT)
    }
}

/// The vector of type `ty` at columns `x + dx ..` of the row at `p` (every column in the
/// row; unit stride).
pub(super) fn load<'b, L: VectorLanes<'b>>(
    b: &mut FunctionBuilder,
    ty: Type,
    p: Value,
    x: Value,
    dx: i64,
) -> Value {
    let base = col_offset::<L>(b, x);
    let addr = b.ins().iadd(p, base);
    let off = dx.saturating_mul(1 << L::LANE_SHIFT);
    match i32::try_from(off) {
        Ok(o) => b.ins().load(ty, mem(), addr, o),
        Err(_) => {
            let addr = b.ins().iadd_imm_s(addr, off);
            b.ins().load(ty, mem(), addr, 0)
        }
    }
}

/// An anchor vector of an edge-vector load (see `edge`) from the row at `p` of `width`
/// columns: `LANES` columns from column `LANES * a` (`Left(a)`) or `W - SHAPE.span +
/// LANES * a` (`Right(a)`). `None` for the border's constant, which the lane form builds.
pub(super) fn anchor_load<'b, L: VectorLanes<'b>>(
    b: &mut FunctionBuilder,
    ty: Type,
    p: Value,
    width: Value,
    anchor: Anchor,
) -> Option<Value> {
    let bytes = |cols: i64| (cols * (1 << L::LANE_SHIFT)) as i32;
    match anchor {
        Anchor::Left(a) => Some(b.ins().load(ty, mem(), p, bytes(L::LANES * a))),
        Anchor::Right(a) => {
            let end = col_offset::<L>(b, width);
            let end = b.ins().iadd(p, end);
            let off = bytes(L::LANES * a - L::SHAPE.span);
            Some(b.ins().load(ty, mem(), end, off))
        }
        Anchor::Constant => None,
    }
}

/// A constant of type `ty` whose lane `j` has every byte `on` where `lanes[j]` holds and 0
/// elsewhere (an edge vector's in-range lanes: `0xff` masks on f32 lanes, 0/1 bytes).
pub(super) fn lane_flags<'b, L: VectorLanes<'b>>(
    b: &mut FunctionBuilder,
    ty: Type,
    lanes: &[bool],
    on: u8,
) -> Value {
    let bytes: Vec<u8> = lanes
        .iter()
        .flat_map(|&t| std::iter::repeat_n(if t { on } else { 0 }, 1 << L::LANE_SHIFT))
        .collect();
    let handle = b.func.dfg.constants.insert(bytes.into());
    b.ins().vconst(ty, handle)
}
