//! The 16-lane byte path: a stage whose values are all u8 or bool runs its interior sixteen
//! columns at a time on `I8X16`.
//!
//! Register form: u8 lanes as they are; bool lanes as the bytes 0 or 1, exactly as bools are
//! stored, so loads, stores, `and`/`or` (and bool min/max) need no conversion. A comparison
//! yields an all-ones/all-zeros lane mask; the 0/1 form (`mask & 1`) and the mask form
//! (`0 - b`) are each computed once, when first needed (`select` wants the mask).
//!
//! Every op here is exact lane-wise integer arithmetic with the scalar path's meaning
//! (wrapping u8 add/sub/neg, unsigned compares), so the two paths agree bit for bit.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{BinaryOp, DType, Scalar, UnaryOp};

use super::values::mem;
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
struct BVal {
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

/// Emits sixteen columns of `stage` at column `x` (every column and every `x + dx` of the
/// interior, unit strides). `ptr` and `flag` are the per-slot row pointers and in-range
/// bytes, `slot_of` maps loads and outer in-range tests to slots; `swapped` marks the
/// planted comparator fault. Returns the 16 result bytes (bools as 0/1).
pub(crate) fn body(
    b: &mut FunctionBuilder,
    stage: &Stage,
    slot_of: &[Option<usize>],
    ptr: &[Value],
    flag: &[Value],
    swapped: &[bool],
    x: Value,
) -> Result<Value, CodegenError> {
    let mut em = Em { b, one: None };
    let mut vals: Vec<BVal> = Vec::with_capacity(stage.insts.len());
    for (i, inst) in stage.insts.iter().enumerate() {
        let v = match &inst.op {
            Op::Load { offset, .. } => {
                let s = slot_of[i].ok_or_else(|| bad("load without slot"))?;
                let dx = *offset.last().expect("validated offset");
                let addr = em.b.ins().iadd(ptr[s], x);
                let v = match i32::try_from(dx) {
                    Ok(o) => em.b.ins().load(types::I8X16, mem(), addr, o),
                    Err(_) => {
                        let addr = em.b.ins().iadd_imm_s(addr, dx);
                        em.b.ins().load(types::I8X16, mem(), addr, 0)
                    }
                };
                BVal::lanes(v)
            }
            Op::InRange(_) => match slot_of[i] {
                Some(s) => {
                    let v = em.b.ins().splat(types::I8X16, flag[s]);
                    BVal::lanes(v)
                }
                None => em.konst(true),
            },
            Op::Const(Scalar::U8(c)) => BVal::lanes(em.splat(*c as i64)),
            Op::Const(Scalar::Bool(c)) => em.konst(*c),
            Op::Const(c) => return Err(bad(format!("constant {c} on the byte path"))),
            Op::Unary(op, a) => {
                let mut va = vals[a.0 as usize];
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
                vals[a.0 as usize] = va;
                r
            }
            Op::Binary(op, a, c) => {
                let (ai, ci) = (a.0 as usize, c.0 as usize);
                let (mut va, mut vc) = (vals[ai], vals[ci]);
                let d = stage.insts[ai].dtype;
                let op = match (swapped[i], *op) {
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
                vals[ai] = va;
                vals[ci] = vc;
                r
            }
            Op::Select(c, a, e) => {
                let (ci, ai, ei) = (c.0 as usize, a.0 as usize, e.0 as usize);
                let (mut vc, mut va, mut ve) = (vals[ci], vals[ai], vals[ei]);
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
                vals[ci] = vc;
                vals[ai] = va;
                vals[ei] = ve;
                r
            }
            Op::Cast(a) => {
                let from = stage.insts[a.0 as usize].dtype;
                let mut va = vals[a.0 as usize];
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
                vals[a.0 as usize] = va;
                r
            }
        };
        vals.push(v);
    }
    let mut r = vals[stage.result.0 as usize];
    Ok(em.lanes(&mut r))
}
