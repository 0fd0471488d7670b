//! The 16-lane byte path: a stage whose values are all u8 or bool runs its interior sixteen
//! columns at a time on `I8X16`. This file holds the byte lanes' op semantics
//! ([`ByteLanes`], the 16 x u8/bool `lanes::VectorLanes`); the vector emitter that drives
//! them (one vector, edge vectors, shared steps) is `lanes`, shared with the f32 lanes.
//!
//! Register form: u8 lanes as they are; bool lanes as the bytes 0 or 1, exactly as bools are
//! stored, so loads, stores, `and`/`or` (and bool min/max) need no conversion. A comparison
//! yields an all-ones/all-zeros lane mask; the 0/1 form (`mask & 1`) and the mask form
//! (`0 - b`) are each computed once, when first needed (`select` wants the mask).
//!
//! Every op here is exact lane-wise integer arithmetic with the scalar path's meaning
//! (wrapping u8 add/sub/neg, unsigned compares), so the two paths agree bit for bit.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, ConstantData, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use super::edge::{Anchor, LaneSource, Shape, Side};
use super::lanes::{self, VectorLanes};
use super::rowfn::Path;
use crate::kernel::{Op, Stage};
use crate::CodegenError;

/// Lanes per vector.
pub(crate) const LANES: i64 = 16;

fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(msg.into())
}

/// Whether every value of `stage` is u8 or bool and every op has an `I8X16` form (u8
/// multiply and divide do not: x86 has no byte multiply).
pub(crate) fn supported(stage: &Stage) -> bool {
    stage.insts.iter().all(|inst| {
        matches!(inst.dtype, DType::U8 | DType::Bool)
            && match &inst.op {
                Op::Load { .. } | Op::InRange(_) | Op::Select(..) | Op::Cast(_) => true,
                Op::Const(c) => matches!(c, Scalar::U8(_) | Scalar::Bool(_)),
                Op::Unary(op, _) => matches!(op, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not),
                Op::Binary(op, _, _) => !matches!(op, BinaryOp::Mul | BinaryOp::Div),
            }
    })
}

/// A value on the byte path: its 0/1-or-u8 lanes, its lane mask (bools), and whether it is
/// a bool known at code-generation time.
#[derive(Clone, Copy)]
pub(crate) struct BVal {
    lanes: Option<Value>,
    mask: Option<Value>,
    known: Option<bool>,
}

impl BVal {
    fn lanes(v: Value) -> BVal {
        BVal {
            lanes: Some(v),
            mask: None,
            known: None,
        }
    }
}

struct Em<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    one: Option<Value>,
}

impl Em<'_, '_> {
    fn splat(&mut self, v: i64) -> Value {
        let s = self.b.ins().iconst(types::I8, v);
        self.b.ins().splat(types::I8X16, s)
    }

    fn one(&mut self) -> Value {
        if let Some(o) = self.one {
            return o;
        }
        let o = self.splat(1);
        self.one = Some(o);
        o
    }

    /// The u8 lanes, or the 0/1 bytes of a bool.
    fn lanes(&mut self, v: &mut BVal) -> Value {
        if let Some(l) = v.lanes {
            return l;
        }
        let m = v.mask.expect("a byte value has lanes or a mask");
        let one = self.one();
        let l = self.b.ins().band(m, one);
        v.lanes = Some(l);
        l
    }

    /// The all-ones/all-zeros mask of a bool.
    fn mask(&mut self, v: &mut BVal) -> Value {
        if let Some(m) = v.mask {
            return m;
        }
        let l = self.lanes(v);
        let m = self.b.ins().ineg(l);
        v.mask = Some(m);
        m
    }

    fn konst(&mut self, b: bool) -> BVal {
        BVal {
            lanes: Some(self.splat(b as i64)),
            mask: None,
            known: Some(b),
        }
    }
}

/// What the byte path reads: per-slot row pointers and in-range bytes, and the stage's
/// per-instruction facts (the slot of each load and outer in-range test, the planted
/// comparator fault's swaps).
pub(crate) struct Rows<'a> {
    /// Facts per instruction (see `facts`).
    pub(crate) facts: &'a [super::facts::InstFacts],
    /// Row pointer per slot.
    pub(crate) ptr: &'a [Value],
    /// In-range byte per slot (`OuterInRange` slots).
    pub(crate) flag: &'a [Value],
    /// The row's width in columns (edge vectors load from its right end).
    pub(crate) width: Value,
}

/// An operand already emitted.
fn get(vals: &[Option<BVal>], i: usize) -> Result<BVal, CodegenError> {
    vals.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| bad(format!("value {i} used before it is emitted")))
}

/// Emits instruction `i` at column `x` (an edge vector at `edge`, see [`ByteLanes`]) from its
/// operands in `vals` (which keep the lane and mask forms computed for them on the way).
fn emit_inst(
    em: &mut Em,
    stage: &Stage,
    rows: &Rows,
    i: usize,
    x: Value,
    edge: Option<Side>,
    vals: &mut [Option<BVal>],
) -> Result<BVal, CodegenError> {
    let inst = &stage.insts[i];
    let v = match &inst.op {
        Op::Load { offset, border, .. } => {
            let s = rows.facts[i].slot.ok_or_else(|| bad("load without slot"))?;
            let dx = *offset.last().expect("validated offset");
            let sources = match edge {
                Some(side) => {
                    let lanes = Shape::BYTES
                        .load_lanes(side, 0, dx, border)
                        .ok_or_else(|| bad(format!("edge vector load at column offset {dx}")))?;
                    (!Shape::BYTES.is_direct(side, 0, dx, &lanes)).then_some(lanes)
                }
                None => None,
            };
            if let Some(lanes) = sources {
                return Ok(BVal::lanes(em.edge_load(
                    rows.ptr[s],
                    rows.width,
                    border,
                    &lanes,
                )?));
            }
            let v = lanes::load::<ByteLanes>(em.b, types::I8X16, rows.ptr[s], x, dx);
            BVal::lanes(v)
        }
        Op::InRange(offset) => {
            let dx = *offset.last().expect("validated offset");
            let outer = rows.facts[i]
                .slot
                .map(|s| em.b.ins().splat(types::I8X16, rows.flag[s]));
            // In an edge vector, the lanes whose column is outside the row.
            let lanes = edge
                .map(|side| Shape::BYTES.in_range_lanes(side, 0, dx))
                .filter(|l| l.contains(&false));
            match (outer, lanes) {
                (None, None) => em.konst(true),
                (Some(o), None) => BVal::lanes(o),
                (outer, Some(lanes)) => {
                    let c = lanes::lane_flags::<ByteLanes>(em.b, types::I8X16, &lanes, 1);
                    match outer {
                        Some(o) => BVal::lanes(em.b.ins().band(o, c)),
                        None if !lanes.contains(&true) => em.konst(false),
                        None => BVal::lanes(c),
                    }
                }
            }
        }
        Op::Const(Scalar::U8(c)) => BVal::lanes(em.splat(*c as i64)),
        Op::Const(Scalar::Bool(c)) => em.konst(*c),
        Op::Const(c) => return Err(bad(format!("constant {c} on the byte path"))),
        Op::Unary(op, a) => {
            let mut va = get(vals, a.0 as usize)?;
            let r = match op {
                UnaryOp::Not => match va.known {
                    Some(k) => em.konst(!k),
                    None => {
                        let one = em.one();
                        let l = em.lanes(&mut va);
                        BVal::lanes(em.b.ins().bxor(l, one))
                    }
                },
                UnaryOp::Neg => {
                    let l = em.lanes(&mut va);
                    BVal::lanes(em.b.ins().ineg(l))
                }
                UnaryOp::Abs => va,
                _ => return Err(bad(format!("{op:?} on the byte path"))),
            };
            vals[a.0 as usize] = Some(va);
            r
        }
        Op::Binary(op, a, c) => {
            let (ai, ci) = (a.0 as usize, c.0 as usize);
            let (mut va, mut vc) = (get(vals, ai)?, get(vals, ci)?);
            let d = stage.insts[ai].dtype;
            let op = match (rows.facts[i].swapped, *op) {
                (true, BinaryOp::Min) => BinaryOp::Max,
                (true, BinaryOp::Max) => BinaryOp::Min,
                (_, op) => op,
            };
            let logic = match (op, d) {
                (BinaryOp::And, _) | (BinaryOp::Min, DType::Bool) => Some(true),
                (BinaryOp::Or, _) | (BinaryOp::Max, DType::Bool) => Some(false),
                _ => None,
            };
            let r = if let Some(is_and) = logic {
                // Fold a known side: `x & 1 = x`, `x & 0 = 0`, `x | 0 = x`, `x | 1 = 1`.
                match (va.known, vc.known) {
                    (Some(k), _) if k != is_and => em.konst(k),
                    (_, Some(k)) if k != is_and => em.konst(k),
                    (Some(_), _) => vc,
                    (_, Some(_)) => va,
                    _ => {
                        let (la, lc) = (em.lanes(&mut va), em.lanes(&mut vc));
                        let r = if is_and {
                            em.b.ins().band(la, lc)
                        } else {
                            em.b.ins().bor(la, lc)
                        };
                        BVal::lanes(r)
                    }
                }
            } else {
                let (la, lc) = (em.lanes(&mut va), em.lanes(&mut vc));
                let cc = match op {
                    BinaryOp::Lt => Some(IntCC::UnsignedLessThan),
                    BinaryOp::Le => Some(IntCC::UnsignedLessThanOrEqual),
                    BinaryOp::Gt => Some(IntCC::UnsignedGreaterThan),
                    BinaryOp::Ge => Some(IntCC::UnsignedGreaterThanOrEqual),
                    BinaryOp::Eq => Some(IntCC::Equal),
                    BinaryOp::Ne => Some(IntCC::NotEqual),
                    _ => None,
                };
                match (cc, op) {
                    (Some(cc), _) => BVal {
                        lanes: None,
                        mask: Some(em.b.ins().icmp(cc, la, lc)),
                        known: None,
                    },
                    (None, BinaryOp::Add) => BVal::lanes(em.b.ins().iadd(la, lc)),
                    (None, BinaryOp::Sub) => BVal::lanes(em.b.ins().isub(la, lc)),
                    (None, BinaryOp::Min) => BVal::lanes(em.b.ins().umin(la, lc)),
                    (None, BinaryOp::Max) => BVal::lanes(em.b.ins().umax(la, lc)),
                    _ => return Err(bad(format!("{op:?} on {d} on the byte path"))),
                }
            };
            vals[ai] = Some(va);
            vals[ci] = Some(vc);
            r
        }
        Op::Select(c, a, e) => {
            let (ci, ai, ei) = (c.0 as usize, a.0 as usize, e.0 as usize);
            let (mut vc, mut va, mut ve) = (get(vals, ci)?, get(vals, ai)?, get(vals, ei)?);
            let r = match vc.known {
                Some(true) => va,
                Some(false) => ve,
                None => {
                    let m = em.mask(&mut vc);
                    let la = em.lanes(&mut va);
                    let le = em.lanes(&mut ve);
                    BVal::lanes(em.b.ins().bitselect(m, la, le))
                }
            };
            vals[ci] = Some(vc);
            vals[ai] = Some(va);
            vals[ei] = Some(ve);
            r
        }
        Op::Cast(a) => {
            let from = stage.insts[a.0 as usize].dtype;
            let mut va = get(vals, a.0 as usize)?;
            let r = match (from, inst.dtype) {
                (DType::U8, DType::Bool) => {
                    // `x != 0` as 0/1: `min(x, 1)`.
                    let one = em.one();
                    let l = em.lanes(&mut va);
                    BVal::lanes(em.b.ins().umin(l, one))
                }
                // bool -> u8 keeps the 0/1 bytes; same-dtype casts are identities.
                _ => BVal { known: None, ..va },
            };
            vals[a.0 as usize] = Some(va);
            r
        }
    };
    Ok(v)
}

/// The 16 x u8/bool lane form of the vector emitter (`lanes`): sixteen columns at column
/// `x` (unit strides); on `Path::Edge(side, _)`, the first (`x == 0`) or last
/// (`x == W - 16`) sixteen columns of a row of at least `Shape::BYTES.min_width(1)`
/// columns, whose loads read outside the row per the border mode (see `edge`). The result
/// is the 16 bytes (bools as 0/1). There is no scalar path (`Path::Border`).
pub(crate) struct ByteLanes<'a, 'b, 'r> {
    em: Em<'a, 'b>,
    stage: &'r Stage,
    rows: &'r Rows<'r>,
}

impl<'a, 'b, 'r> ByteLanes<'a, 'b, 'r> {
    /// The byte lanes of `stage` reading `rows`, emitting into `b`.
    pub(crate) fn new(
        b: &'a mut FunctionBuilder<'b>,
        stage: &'r Stage,
        rows: &'r Rows<'r>,
    ) -> ByteLanes<'a, 'b, 'r> {
        ByteLanes {
            em: Em { b, one: None },
            stage,
            rows,
        }
    }
}

impl<'b> VectorLanes<'b> for ByteLanes<'_, 'b, '_> {
    type Val = BVal;
    type Frame = Vec<Option<BVal>>;
    const LANES: i64 = LANES;
    const LANE_SHIFT: i64 = 0;
    const SHAPE: Shape = Shape::BYTES;

    fn builder(&mut self) -> &mut FunctionBuilder<'b> {
        self.em.b
    }

    fn frame(&self, n: usize) -> Vec<Option<BVal>> {
        vec![None; n]
    }

    fn get(frame: &Vec<Option<BVal>>, i: usize) -> Option<BVal> {
        frame.get(i).copied().flatten()
    }

    fn set(frame: &mut Vec<Option<BVal>>, i: usize, v: BVal) {
        frame[i] = Some(v);
    }

    fn emit(
        &mut self,
        frame: &mut Vec<Option<BVal>>,
        i: usize,
        x: Value,
        path: Path,
    ) -> Result<(), CodegenError> {
        let edge = match path {
            Path::Vector => None,
            Path::Edge(side, _) => Some(side),
            Path::Border => return Err(bad("a scalar column on the byte path")),
        };
        frame[i] = Some(emit_inst(
            &mut self.em,
            self.stage,
            self.rows,
            i,
            x,
            edge,
            frame,
        )?);
        Ok(())
    }

    /// One `palignr` (see [`Em::shift_bytes`]).
    fn shift(&mut self, lo: BVal, hi: BVal, k: u8) -> BVal {
        self.em.shift_bytes(lo, hi, k)
    }

    fn carried(&self, _: usize, v: Value) -> BVal {
        BVal::lanes(v)
    }

    fn plain(&mut self, v: &mut BVal) -> Value {
        self.em.lanes(v)
    }

    fn result(&mut self, v: &mut BVal) -> Value {
        self.em.lanes(v)
    }
}

impl Em<'_, '_> {
    /// An edge-vector load (see `edge`): lane `j` from the column `lanes[j]` names, out of
    /// at most two 16-byte anchors per end (columns `0..16`, `16..32`, `W-32..W-16`,
    /// `W-16..W`) and the border's constant, combined by one shuffle per extra source.
    fn edge_load(
        &mut self,
        p: Value,
        width: Value,
        border: &Border,
        lanes: &[LaneSource],
    ) -> Result<Value, CodegenError> {
        let (anchors, picks) = Shape::BYTES.anchors(lanes);
        let mut vals: Vec<Value> = Vec::with_capacity(anchors.len());
        for &anchor in &anchors {
            let ty = types::I8X16;
            vals.push(
                match lanes::anchor_load::<ByteLanes>(self.b, ty, p, width, anchor) {
                    Some(v) => v,
                    None => match border {
                        Border::Constant(Scalar::U8(c)) => self.splat(i64::from(*c)),
                        Border::Constant(Scalar::Bool(c)) => self.splat(i64::from(*c)),
                        _ => return Err(bad("constant lanes without a byte constant border")),
                    },
                },
            );
        }
        // Source 0 (and 1) by one shuffle, each further source by one more; lanes of sources
        // not merged yet are placeholders.
        let mut acc = vals[0];
        let identity = picks.iter().enumerate().all(|(j, &p)| p == (0, j as u8));
        if vals.len() == 1 && (identity || anchors[0] == Anchor::Constant) {
            return Ok(acc);
        }
        let shuffle = |em: &mut Self, a: Value, b: Value, mask: Vec<u8>| {
            let imm = em.b.func.dfg.immediates.push(ConstantData::from(mask));
            em.b.ins().shuffle(a, b, imm)
        };
        let first: Vec<u8> = picks
            .iter()
            .enumerate()
            .map(|(j, &(k, l))| match k {
                0 => l,
                1 => 16 + l,
                _ => j as u8,
            })
            .collect();
        let second = vals.get(1).copied().unwrap_or(acc);
        acc = shuffle(self, acc, second, first);
        for (src, &v) in vals.iter().enumerate().skip(2) {
            let mask: Vec<u8> = picks
                .iter()
                .enumerate()
                .map(|(j, &(k, l))| if k == src { 16 + l } else { j as u8 })
                .collect();
            acc = shuffle(self, acc, v, mask);
        }
        Ok(acc)
    }

    /// Bytes `k..k + 16` of `lo` then `hi` (the value `k` columns to the right of `lo`'s
    /// vector): one `palignr`. A known bool is the same in every lane and stays known.
    fn shift_bytes(&mut self, mut lo: BVal, mut hi: BVal, k: u8) -> BVal {
        if lo.known.is_some() && lo.known == hi.known {
            return lo;
        }
        match (lo.lanes, hi.lanes, lo.mask, hi.mask) {
            (Some(a), Some(b), _, _) => BVal::lanes(self.byte_shift(a, b, k)),
            (_, _, Some(a), Some(b)) => BVal {
                lanes: None,
                mask: Some(self.byte_shift(a, b, k)),
                known: None,
            },
            _ => {
                let (a, b) = (self.lanes(&mut lo), self.lanes(&mut hi));
                BVal::lanes(self.byte_shift(a, b, k))
            }
        }
    }

    /// Bytes `k..k + 16` of `a` then `b`.
    fn byte_shift(&mut self, a: Value, b: Value, k: u8) -> Value {
        let mask: Vec<u8> = (0..16).map(|j| k + j).collect();
        let imm = self.b.func.dfg.immediates.push(ConstantData::from(mask));
        self.b.ins().shuffle(a, b, imm)
    }
}
