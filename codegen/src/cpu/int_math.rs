//! Integer dtypes (i8, u8, u16, i16, i32, u32) in CLIF, scalar lanes only.
//!
//! Exactness: every operation is the reference of `kiln_ir::semantics` / the eager
//! executor's `elem` kinds, instruction for instruction: add, sub, mul and neg wrap in the
//! register's width (Cranelift integer arithmetic is modular); division truncates toward
//! zero with `x / 0 = 0` and `MIN / -1 = MIN` (the divisor is replaced by 1 in both cases,
//! so the trapping `sdiv`/`udiv` never sees them, and the zero case is selected to 0); abs of
//! a signed value is `x < 0 ? -x : x`, wrapping (`abs(MIN) = MIN`); min, max and the
//! comparisons use the dtype's signed or unsigned order. Casts: integer → integer keeps the
//! value modulo 2^bits (`ireduce`, or `sextend`/`uextend` by the *source's* signedness);
//! float → integer truncates, saturates and maps NaN to 0 (Cranelift's `fcvt_to_*_sat`
//! does exactly that at 32 bits, narrower targets are then clamped); integer → float is one
//! correctly rounded conversion (u32 goes through a non-negative i64).
//!
//! Limits: no vector lanes (callers reject vectorised integer values other than u8 byte
//! paths elsewhere).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use kiln_ir::{BinaryOp, DType, UnaryOp};

use super::values::Em;

/// The register type of an integer or bool dtype (scalar).
fn int_ty(d: DType) -> Type {
    match d.size_bytes() {
        1 => types::I8,
        2 => types::I16,
        _ => types::I32,
    }
}

/// `neg` or `abs` of an integer value `p` of dtype `d`.
pub(crate) fn unary(em: &mut Em, op: UnaryOp, d: DType, p: Value) -> Value {
    match op {
        UnaryOp::Neg => em.b.ins().ineg(p),
        _ if !d.is_signed_int() => p,
        _ => {
            let n = em.b.ins().ineg(p);
            let neg = em.b.ins().icmp_imm_s(IntCC::SignedLessThan, p, 0);
            em.b.ins().select(neg, n, p)
        }
    }
}

/// Add, sub, mul, div, min or max of two integer values of dtype `d`.
pub(crate) fn binary(em: &mut Em, op: BinaryOp, d: DType, a: Value, b: Value) -> Value {
    let signed = d.is_signed_int();
    let ins = em.b.ins();
    match op {
        BinaryOp::Add => ins.iadd(a, b),
        BinaryOp::Sub => ins.isub(a, b),
        BinaryOp::Mul => ins.imul(a, b),
        BinaryOp::Min if signed => ins.smin(a, b),
        BinaryOp::Min => ins.umin(a, b),
        BinaryOp::Max if signed => ins.smax(a, b),
        BinaryOp::Max => ins.umax(a, b),
        _ => {
            let t = int_ty(d);
            let z = em.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
            let one = em.b.ins().iconst(t, 1);
            let zero = em.b.ins().iconst(t, 0);
            if signed {
                // MIN / -1 overflows (and traps): dividing MIN by 1 gives MIN, the wrap.
                let m1 = em.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                let (lo, _) = d.int_range().expect("integer dtype");
                let amin = em.b.ins().icmp_imm_s(IntCC::Equal, a, lo);
                let ovf = em.b.ins().band(m1, amin);
                let bad = em.b.ins().bor(z, ovf);
                let dv = em.b.ins().select(bad, one, b);
                let q = em.b.ins().sdiv(a, dv);
                em.b.ins().select(z, zero, q)
            } else {
                let dv = em.b.ins().select(z, one, b);
                let q = em.b.ins().udiv(a, dv);
                em.b.ins().select(z, zero, q)
            }
        }
    }
}

/// A cast between dtypes at least one of which is an integer or bool, not both float;
/// `None` when no rule applies.
pub(crate) fn cast(em: &mut Em, from: DType, to: DType, p: Value) -> Option<Value> {
    if from.is_float() {
        return Some(float_to_int(em, from, to, p));
    }
    // From an integer or bool: widen to i64 by the source's signedness first.
    let wide = |em: &mut Em, p: Value| -> Value {
        let t = int_ty(from);
        if t == types::I64 {
            p
        } else if from.is_signed_int() {
            em.b.ins().sextend(types::I64, p)
        } else {
            em.b.ins().uextend(types::I64, p)
        }
    };
    Some(match to {
        DType::F32 | DType::F64 => {
            let w = wide(em, p);
            let t = em.ty(to);
            em.b.ins().fcvt_from_sint(t, w)
        }
        DType::Bool => em.b.ins().icmp_imm_s(IntCC::NotEqual, p, 0),
        _ => {
            let (ft, tt) = (int_ty(from), int_ty(to));
            if ft == tt {
                p
            } else if ft.bits() > tt.bits() {
                em.b.ins().ireduce(tt, p)
            } else if from.is_signed_int() {
                em.b.ins().sextend(tt, p)
            } else {
                em.b.ins().uextend(tt, p)
            }
        }
    })
}

/// Float → integer or bool: truncate, saturate, NaN → 0 (bool: `v != 0`, handled by the
/// caller for bool).
fn float_to_int(em: &mut Em, from: DType, to: DType, p: Value) -> Value {
    let _ = from;
    let tt = int_ty(to);
    let (lo, hi) = to.int_range().expect("integer dtype");
    match to {
        DType::I32 => em.b.ins().fcvt_to_sint_sat(types::I32, p),
        DType::U32 => em.b.ins().fcvt_to_uint_sat(types::I32, p),
        DType::U8 | DType::U16 => {
            let i = em.b.ins().fcvt_to_uint_sat(types::I32, p);
            let m = em.b.ins().iconst(types::I32, hi);
            let i = em.b.ins().umin(i, m);
            em.b.ins().ireduce(tt, i)
        }
        _ => {
            let i = em.b.ins().fcvt_to_sint_sat(types::I32, p);
            let m = em.b.ins().iconst(types::I32, hi);
            let i = em.b.ins().smin(i, m);
            let m = em.b.ins().iconst(types::I32, lo & 0xffff_ffff);
            let i = em.b.ins().smax(i, m);
            em.b.ins().ireduce(tt, i)
        }
    }
}
