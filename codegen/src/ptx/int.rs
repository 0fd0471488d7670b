//! PTX rendering of the integer dtypes i8, u16, i16, i32 and u32 (u8 keeps its own
//! emitters in `emit`).
//!
//! Declared inside `emit` (it uses that module's register allocator). Representation: every
//! integer value lives in a 32-bit `%r` register holding its value *normalised*: zero-
//! extended for unsigned dtypes, sign-extended for signed ones (`ld.s8`/`ld.s16` load so,
//! and [`Em::int_norm`] restores it after every operation that can leave the range).
//! Exactness: add, sub, mul and neg are computed modulo 2^32 and then reduced to the dtype's
//! width, which is the same as wrapping in that width; division divides normalised values
//! with the divisor replaced by 1 where it is 0 (result then selected to 0) or where it is
//! -1 against the dtype's minimum (result the minimum, the wrap), so `div` never meets an
//! undefined case; min, max and comparisons use `.s32`/`.u32`, the dtype's order on
//! normalised values; float → integer truncates (`cvt.rzi`, clamped by PTX to the 32-bit
//! range), is clamped to the dtype's range, and NaN is selected to 0 explicitly.
//!
//! Limits: scalar registers only (no packed 16-bit math).

use kiln_ir::{BinaryOp, DType, UnaryOp};

use super::{ft, Em};

/// The `.s32`/`.u32` suffix of a dtype's order.
fn sfx(d: DType) -> &'static str {
    if d.is_signed_int() {
        "s32"
    } else {
        "u32"
    }
}

/// The memory type of a load or store of `d` (`s8`, `u16`, ...).
pub(super) fn mem_ty(d: DType) -> &'static str {
    match d {
        DType::I8 => "s8",
        DType::U16 => "u16",
        DType::I16 => "s16",
        DType::I32 => "s32",
        DType::U32 => "u32",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::U8 | DType::Bool => "u8",
    }
}

impl Em<'_> {
    /// Reduces a 32-bit register to `d`'s normalised form (see the module docs).
    pub(super) fn int_norm(&mut self, d: DType, t: &str) -> String {
        let o = self.r();
        match d {
            DType::U8 => e!(self, "and.b32 {o}, {t}, 255"),
            DType::U16 => e!(self, "and.b32 {o}, {t}, 65535"),
            DType::I8 => e!(self, "bfe.s32 {o}, {t}, 0, 8"),
            DType::I16 => e!(self, "bfe.s32 {o}, {t}, 0, 16"),
            _ => return t.to_string(),
        }
        o
    }

    /// Neg or abs of an integer.
    pub(super) fn int_unary(&mut self, op: UnaryOp, d: DType, x: &str) -> String {
        if op == UnaryOp::Abs && !d.is_signed_int() {
            return x.to_string();
        }
        let t = self.r();
        e!(self, "neg.s32 {t}, {x}");
        let t = if op == UnaryOp::Abs {
            let (p, s) = (self.p(), self.r());
            e!(self, "setp.lt.s32 {p}, {x}, 0");
            e!(self, "selp.b32 {s}, {t}, {x}, {p}");
            s
        } else {
            t
        };
        self.int_norm(d, &t)
    }

    /// A comparison of two integers, as a predicate.
    pub(super) fn int_compare(&mut self, op: BinaryOp, d: DType, a: &str, b: &str) -> String {
        let p = self.p();
        let c = match op {
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::Eq => "eq",
            _ => "ne",
        };
        e!(self, "setp.{c}.{} {p}, {a}, {b}", sfx(d));
        p
    }

    /// Add, sub, mul, div, min or max of two integers.
    pub(super) fn int_binary(&mut self, op: BinaryOp, d: DType, a: &str, b: &str) -> String {
        let s = sfx(d);
        match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => {
                let t = self.r();
                let m = match op {
                    BinaryOp::Add => "add.u32",
                    BinaryOp::Sub => "sub.u32",
                    _ => "mul.lo.u32",
                };
                e!(self, "{m} {t}, {a}, {b}");
                self.int_norm(d, &t)
            }
            BinaryOp::Min | BinaryOp::Max => {
                let o = self.r();
                let m = if op == BinaryOp::Min { "min" } else { "max" };
                e!(self, "{m}.{s} {o}, {a}, {b}");
                o
            }
            _ => {
                let (pz, dv, q, o) = (self.p(), self.r(), self.r(), self.r());
                e!(self, "setp.eq.u32 {pz}, {b}, 0");
                let bad = if d.is_signed_int() {
                    let (lo, _) = d.int_range().expect("integer dtype");
                    let (pm, pa, po, pb) = (self.p(), self.p(), self.p(), self.p());
                    e!(self, "setp.eq.s32 {pm}, {b}, -1");
                    e!(self, "setp.eq.s32 {pa}, {a}, {lo}");
                    e!(self, "and.pred {po}, {pm}, {pa}");
                    e!(self, "or.pred {pb}, {pz}, {po}");
                    pb
                } else {
                    pz.clone()
                };
                e!(self, "selp.b32 {dv}, 1, {b}, {bad}");
                e!(self, "div.{s} {q}, {a}, {dv}");
                e!(self, "selp.b32 {o}, 0, {q}, {pz}");
                o
            }
        }
    }

    /// A cast with at least one side an integer other than u8 (bool and u8 allowed on the
    /// other side).
    pub(super) fn int_cast(&mut self, from: DType, to: DType, x: &str) -> String {
        match (from, to) {
            (DType::F32 | DType::F64, _) => {
                let (lo, hi) = to.int_range().expect("integer dtype");
                let (t, p, o) = (self.r(), self.p(), self.r());
                let signed = to.is_signed_int();
                let cv = if signed { "s32" } else { "u32" };
                e!(self, "cvt.rzi.{cv}.{} {t}, {x}", ft(from));
                let m = if to.size_bytes() < 4 {
                    let (a, b) = (self.r(), self.r());
                    e!(self, "min.{cv} {a}, {t}, {hi}");
                    if signed {
                        e!(self, "max.s32 {b}, {a}, {lo}");
                        b
                    } else {
                        a
                    }
                } else {
                    t
                };
                e!(self, "testp.notanumber.{} {p}, {x}", ft(from));
                e!(self, "selp.b32 {o}, 0, {m}, {p}");
                o
            }
            (_, DType::F32 | DType::F64) => {
                let o = self.reg(to);
                let s = if from.is_signed_int() { "s32" } else { "u32" };
                e!(self, "cvt.rn.{}.{s} {o}, {x}", ft(to));
                o
            }
            (DType::Bool, _) => {
                let o = self.r();
                e!(self, "selp.u32 {o}, 1, 0, {x}");
                o
            }
            (_, DType::Bool) => {
                let p = self.p();
                e!(self, "setp.ne.u32 {p}, {x}, 0");
                p
            }
            _ => self.int_norm(to, x),
        }
    }
}
