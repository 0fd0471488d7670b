//! Emitting a stage program at one column (border path), one vector (interior) or one edge
//! vector: per-instruction code ([`emit_at`]) with its column remaps and edge loads, known
//! bools folded ([`fold_known`]), the 4 x f32 lane form of the vector emitter
//! ([`F32Lanes`], see `lanes`), and the whole program ([`body`]).
//!
//! Exactness: each instruction's semantics come from `values` (the executable SEMANTICS.md in
//! CLIF); a remap is `kiln_ir::semantics::remap_index`; folds only skip code whose value is
//! known. Limits: the `F32X4` path and the scalar path; the byte lanes are `bytevec`.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use super::edge::{self, Anchor, LaneSource};
use super::lanes::{self, VectorLanes};
use super::rowfn::{bad, Path, RowCtx, StageCode};
use super::values::{arg, mem, Em, Val};
use crate::kernel::Op;
use crate::{CodegenError, Fault};

pub(super) fn clamp_col(b: &mut FunctionBuilder, j: Value, ctx: &RowCtx) -> Value {
    let zero = b.ins().iconst(types::I64, 0);
    let t = b.ins().smin(j, ctx.width_m1);
    b.ins().smax(t, zero)
}

/// `j.rem_euclid(n)` for `n >= 1`.
pub(super) fn rem_euclid(b: &mut FunctionBuilder, j: Value, n: Value) -> Value {
    let r = b.ins().srem(j, n);
    let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
    let zero = b.ins().iconst(types::I64, 0);
    let add = b.ins().select(neg, n, zero);
    b.ins().iadd(r, add)
}

/// `kiln_ir::semantics::remap_index` for a non-constant mode (identity inside the range).
pub(super) fn remap(
    b: &mut FunctionBuilder,
    j: Value,
    border: &Border,
    ctx: &RowCtx,
    fault: Option<Fault>,
) -> Value {
    let w = ctx.width;
    let m = match border {
        Border::Constant(_) | Border::Nearest => clamp_col(b, j, ctx),
        Border::Wrap => rem_euclid(b, j, w),
        Border::Reflect => {
            let n2 = b.ins().ishl_imm_u(w, 1);
            let m = rem_euclid(b, j, n2);
            let hi = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, m, w);
            let back = b.ins().isub(n2, m);
            let back = b.ins().iadd_imm_s(back, -1);
            b.ins().select(hi, back, m)
        }
        Border::Mirror => {
            let n2 = b.ins().ishl_imm_u(w, 1);
            let p = b.ins().iadd_imm_s(n2, -2);
            let one = b.ins().iconst(types::I64, 1);
            let p = b.ins().smax(p, one);
            let m = rem_euclid(b, j, p);
            let hi = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, m, w);
            let back = b.ins().isub(p, m);
            b.ins().select(hi, back, m)
        }
    };
    if fault == Some(Fault::WrongBorderRightEdge) && !matches!(border, Border::Constant(_)) {
        let right = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, j, w);
        b.ins().select(right, ctx.width_m1, m)
    } else {
        m
    }
}

/// An edge-vector load (see `edge`): the anchor vectors and constant its lanes read, then
/// one lane pick. `p` points at column 0 of the row, `width` is its length.
pub(super) fn edge_load(
    em: &mut Em,
    width: Value,
    p: Value,
    ty: Type,
    border: &Border,
    lanes: &[LaneSource; 4],
) -> Result<Value, CodegenError> {
    let (anchors, picks) = edge::Shape::F32.anchors(lanes);
    let mut vals: Vec<Value> = Vec::with_capacity(anchors.len());
    for &anchor in &anchors {
        vals.push(
            match lanes::anchor_load::<F32Lanes>(em.b, ty, p, width, anchor) {
                Some(v) => v,
                None => {
                    let Border::Constant(c) = border else {
                        return Err(bad("constant lanes without a constant border"));
                    };
                    let mut c = em.constant(*c)?;
                    em.plain(&mut c)
                }
            },
        );
    }
    let picks: [(usize, u8); 4] = picks
        .try_into()
        .map_err(|_| bad("an F32X4 edge load has four lanes"))?;
    let identity = [(0, 0), (0, 1), (0, 2), (0, 3)];
    Ok(
        if vals.len() == 1 && (picks == identity || anchors[0] == Anchor::Constant) {
            vals[0]
        } else {
            em.pick_lanes(&vals, picks)
        },
    )
}

/// The values of one vector (or one column) of a stage program, filled instruction by
/// instruction.
pub(super) struct Frame {
    /// Per instruction: its value, once emitted.
    pub(super) vals: Vec<Option<Val>>,
    /// Bools known at code-generation time on this path (constants, in-range tests in the
    /// interior); selects and logic on them are folded.
    pub(super) known: Vec<Option<bool>>,
}

impl Frame {
    pub(super) fn new(n: usize) -> Frame {
        Frame {
            vals: vec![None; n],
            known: vec![None; n],
        }
    }

    /// The value of an operand (emitted before its users, by construction of every order).
    pub(super) fn get(&self, v: &crate::kernel::ValueId) -> Result<Val, CodegenError> {
        self.vals
            .get(v.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| bad("operand used before it is computed"))
    }

    /// Writes back an operand whose cached forms (key, NaN mask) grew while in use.
    pub(super) fn put(&mut self, v: &crate::kernel::ValueId, val: Val) {
        self.vals[v.0 as usize] = Some(val);
    }
}

/// Emits instruction `i` of the stage at column `x` (four columns on the vector path) into
/// `frame`, whose operands are already there.
pub(super) fn emit_at(
    em: &mut Em,
    code: &StageCode,
    frame: &mut Frame,
    i: usize,
    x: Value,
    path: Path,
) -> Result<(), CodegenError> {
    let StageCode {
        stage,
        plan,
        ctx,
        fault,
    } = *code;
    let inst = &stage.insts[i];
    let mut kn: Option<bool> = None;
    let facts = plan.facts[i];
    em.raw_nan = facts.raw_nan;
    em.sign_clear = facts.sign_clear;
    if let Some((v, k)) = fold_known(em, &inst.op, &frame.vals, &frame.known)? {
        frame.vals[i] = Some(v);
        frame.known[i] = k;
        return Ok(());
    }
    let v = match &inst.op {
        Op::Load { offset, border, .. } => {
            let s = facts.slot.ok_or_else(|| bad("load without slot"))?;
            let dx = *offset.last().expect("validated offset");
            let d = inst.dtype;
            let ty = em.ty(d);
            let p = ctx.ptr[s];
            let lanes = match path {
                Path::Edge(side, v) => {
                    let lanes = edge::load_lanes(side, v, dx, border)
                        .ok_or_else(|| bad("edge vector for a load it cannot compute"))?;
                    (!edge::is_direct(side, v, dx, &lanes)).then_some(lanes)
                }
                _ => None,
            };
            let v = match path {
                Path::Edge(..) if lanes.is_some() => {
                    let lanes = lanes.expect("checked");
                    edge_load(em, ctx.width, p, ty, border, &lanes)?
                }
                Path::Vector | Path::Edge(..) => lanes::load::<F32Lanes>(em.b, ty, p, x, dx),
                Path::Border => {
                    let j = em.b.ins().iadd_imm_s(x, dx);
                    let m = if dx == 0 {
                        // `x` itself is always a column of the row.
                        j
                    } else if matches!(border, Border::Constant(_) | Border::Nearest) {
                        remap(em.b, j, border, ctx, fault)
                    } else {
                        // In range (the interior columns, strided or narrow rows): no
                        // division; out of range: the border's remap.
                        let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                        let slow = em.b.create_block();
                        let join = em.b.create_block();
                        em.b.append_block_param(join, types::I64);
                        em.b.ins().brif(inr, join, &[arg(j)], slow, &[]);
                        em.b.switch_to_block(slow);
                        let r = remap(em.b, j, border, ctx, fault);
                        em.b.ins().jump(join, &[arg(r)]);
                        em.b.switch_to_block(join);
                        em.b.block_params(join)[0]
                    };
                    let off = em.b.ins().imul(m, ctx.step[s]);
                    let addr = em.b.ins().iadd(p, off);
                    let v = em.b.ins().load(ty, mem(), addr, 0);
                    if let Border::Constant(c) = border {
                        let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                        let mut c = em.constant(*c)?;
                        let cv = em.plain(&mut c);
                        em.b.ins().select(inr, v, cv)
                    } else {
                        v
                    }
                }
            };
            Val::plain(d, v)
        }
        Op::InRange(offset) => {
            let dx = *offset.last().expect("validated offset");
            let outer = facts.slot.map(|s| ctx.flag[s]);
            let r = match path {
                Path::Border => {
                    let j = em.b.ins().iadd_imm_s(x, dx);
                    let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                    match outer {
                        Some(f) => em.b.ins().band(inr, f),
                        None => inr,
                    }
                }
                Path::Edge(side, v) if edge::in_range_lanes(side, v, dx) != [true; 4] => {
                    let lanes = edge::in_range_lanes(side, v, dx);
                    let mask = lanes::lane_flags::<F32Lanes>(em.b, types::I32X4, &lanes, 0xff);
                    match outer {
                        Some(f) => {
                            let f = em.bool_from_i8(f);
                            em.b.ins().band(mask, f)
                        }
                        None => {
                            if lanes == [false; 4] {
                                kn = Some(false);
                            }
                            mask
                        }
                    }
                }
                _ => match outer {
                    Some(f) => em.bool_from_i8(f),
                    None => {
                        kn = Some(true);
                        let mut c = em.constant(Scalar::Bool(true))?;
                        em.plain(&mut c)
                    }
                },
            };
            Val::plain(DType::Bool, r)
        }
        Op::Const(c) => {
            if let Scalar::Bool(b) = c {
                kn = Some(*b);
            }
            em.constant(*c)?
        }
        Op::Unary(op, a) => {
            let mut va = frame.get(a)?;
            let r = em.unary(*op, &mut va)?;
            frame.put(a, va);
            r
        }
        Op::Binary(op @ (BinaryOp::Min | BinaryOp::Max), a, c) if facts.plain_pick => {
            let (mut va, mut vc) = (frame.get(a)?, frame.get(c)?);
            let r = em.plain_pick(*op == BinaryOp::Max, &mut va, &mut vc);
            frame.put(a, va);
            frame.put(c, vc);
            r
        }
        Op::Binary(op, a, c) => {
            let (mut va, mut vc) = (frame.get(a)?, frame.get(c)?);
            let r = em.binary(
                *op,
                &mut va,
                &mut vc,
                facts.swapped,
                !facts.unmasked,
                facts.tree,
            )?;
            frame.put(a, va);
            frame.put(c, vc);
            r
        }
        Op::Select(c, a, e) => {
            let (mut vc, mut va, mut ve) = (frame.get(c)?, frame.get(a)?, frame.get(e)?);
            let r = em.select(&mut vc, &mut va, &mut ve)?;
            frame.put(c, vc);
            frame.put(a, va);
            frame.put(e, ve);
            r
        }
        Op::Cast(a) => {
            let mut va = frame.get(a)?;
            let r = em.cast(&mut va, inst.dtype)?;
            frame.put(a, va);
            r
        }
    };
    em.raw_nan = false;
    em.sign_clear = false;
    frame.vals[i] = Some(v);
    frame.known[i] = kn;
    Ok(())
}

/// Emits one column (or four) of the stage program at column `x`; returns the plain result.
pub(super) fn body(
    b: &mut FunctionBuilder,
    code: &StageCode,
    x: Value,
    path: Path,
) -> Result<Value, CodegenError> {
    let mut l = F32Lanes::new(b, code, path != Path::Border);
    lanes::body(&mut l, code.stage, code.plan.order.iter().copied(), x, path)
}

/// The 4 x f32 lane form of the vector emitter (`lanes`), bools as 32-bit lane masks, op
/// semantics from `values`; with `vec == false`, one lane (the scalar border path).
pub(super) struct F32Lanes<'a, 'b, 'c> {
    em: Em<'a, 'b>,
    code: StageCode<'c>,
}

impl<'a, 'b, 'c> F32Lanes<'a, 'b, 'c> {
    /// Four lanes (`vec`) or one of `code`'s stage, emitting into `b`.
    pub(super) fn new(
        b: &'a mut FunctionBuilder<'b>,
        code: &StageCode<'c>,
        vec: bool,
    ) -> F32Lanes<'a, 'b, 'c> {
        F32Lanes {
            em: Em::new(b, vec, code.fault, code.plan.int_picks),
            code: *code,
        }
    }
}

impl<'b> VectorLanes<'b> for F32Lanes<'_, 'b, '_> {
    /// A value and whether it is a bool known at code-generation time.
    type Val = (Val, Option<bool>);
    type Frame = Frame;
    const LANES: i64 = 4;
    const LANE_SHIFT: i64 = 2;
    const SHAPE: edge::Shape = edge::Shape::F32;

    fn builder(&mut self) -> &mut FunctionBuilder<'b> {
        self.em.b
    }

    fn frame(&self, n: usize) -> Frame {
        Frame::new(n)
    }

    fn get(frame: &Frame, i: usize) -> Option<(Val, Option<bool>)> {
        Some((frame.vals.get(i).copied().flatten()?, frame.known[i]))
    }

    fn set(frame: &mut Frame, i: usize, v: (Val, Option<bool>)) {
        frame.vals[i] = Some(v.0);
        frame.known[i] = v.1;
    }

    fn emit(
        &mut self,
        frame: &mut Frame,
        i: usize,
        x: Value,
        path: Path,
    ) -> Result<(), CodegenError> {
        emit_at(&mut self.em, &self.code, frame, i, x, path)
    }

    /// One `palignr` per register form (see `Em::shift_lanes`); a known bool stays known.
    fn shift(
        &mut self,
        (mut lo, known): (Val, Option<bool>),
        (mut hi, _): (Val, Option<bool>),
        k: u8,
    ) -> (Val, Option<bool>) {
        (self.em.shift_lanes(&mut lo, &mut hi, k), known)
    }

    fn carried(&self, i: usize, v: Value) -> (Val, Option<bool>) {
        (Val::plain(self.code.stage.insts[i].dtype, v), None)
    }

    fn plain(&mut self, v: &mut (Val, Option<bool>)) -> Value {
        self.em.plain(&mut v.0)
    }

    fn result(&mut self, v: &mut (Val, Option<bool>)) -> Value {
        self.em.result_value(&mut v.0, self.code.plan.raw_result)
    }
}

/// Folds an instruction whose bool operands make it known without code: a select with a
/// known condition, `and`/`or` with a known side, `not` of a known bool. Returns the value
/// and whether it is itself a known bool.
#[allow(clippy::type_complexity)]
pub(super) fn fold_known(
    em: &mut Em,
    op: &Op,
    vals: &[Option<Val>],
    known: &[Option<bool>],
) -> Result<Option<(Val, Option<bool>)>, CodegenError> {
    let k = |v: &crate::kernel::ValueId| known.get(v.0 as usize).copied().flatten();
    let val = |v: &crate::kernel::ValueId| -> Result<Val, CodegenError> {
        vals.get(v.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| bad("operand used before it is computed"))
    };
    let konst = |em: &mut Em, b: bool| -> Result<Option<(Val, Option<bool>)>, CodegenError> {
        Ok(Some((em.constant(Scalar::Bool(b))?, Some(b))))
    };
    let pass = |v: &crate::kernel::ValueId| Ok(Some((val(v)?, k(v))));
    match op {
        Op::Select(c, a, e) => match (k(c), k(e)) {
            (Some(true), _) => pass(a),
            (Some(false), _) => pass(e),
            (None, Some(false)) => {
                let mut vc = val(c)?;
                Ok(em.fin_gate(&mut vc, &val(a)?).map(|v| (v, None)))
            }
            _ => Ok(None),
        },
        Op::Binary(BinaryOp::And | BinaryOp::Or, a, b) if val(a)?.dtype == DType::Bool => {
            let is_and = matches!(op, Op::Binary(BinaryOp::And, ..));
            match (k(a), k(b)) {
                (Some(x), _) if x != is_and => konst(em, x),
                (_, Some(x)) if x != is_and => konst(em, x),
                (Some(_), _) => pass(b),
                (_, Some(_)) => pass(a),
                _ => Ok(None),
            }
        }
        Op::Unary(UnaryOp::Not, a) => match k(a) {
            Some(x) => konst(em, !x),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}
