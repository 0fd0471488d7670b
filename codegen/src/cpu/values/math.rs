//! `exp` and `log` in CLIF, one lane or four: the sequence of `kiln_ir::math`, op for op.
//!
//! Exactness: every float step is one correctly rounded Cranelift `fadd`/`fsub`/`fmul`/
//! `fdiv` (Cranelift never contracts them into an FMA), every integer step one `iadd`/
//! `isub`/`band`/shift on the same bits, every branch of the semantics a `select`; the
//! dataflow is the one `kiln_ir::math` writes, so the bits are the same (checked by the
//! eager == fused tests in `tests/math_ops.rs`). Limits: f32 scalar, f32 × 4 and f64 scalar
//! (no f64 vectors, like the rest of the renderer).

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use kiln_ir::math::MathConsts;
use kiln_ir::DType;

use super::Em;

impl Em<'_, '_> {
    fn math_consts(d: DType) -> MathConsts {
        if d == DType::F64 {
            MathConsts::F64
        } else {
            MathConsts::F32
        }
    }

    /// An integer constant of the bits type `kt` (lane-masked so the immediate fits).
    fn bits_const(&mut self, kt: Type, v: i64) -> Value {
        let v = if kt.lane_bits() == 32 {
            v as i32 as u32 as i64
        } else {
            v
        };
        self.int_splat(kt, v)
    }

    fn fop(&mut self, op: char, a: Value, b: Value) -> Value {
        match op {
            '+' => self.b.ins().fadd(a, b),
            '-' => self.b.ins().fsub(a, b),
            '*' => self.b.ins().fmul(a, b),
            _ => self.b.ins().fdiv(a, b),
        }
    }

    fn bits_of(&mut self, d: DType, v: Value) -> Value {
        let kt = self.key_ty(d);
        self.b.ins().bitcast(kt, MemFlagsData::new(), v)
    }

    fn float_of(&mut self, d: DType, v: Value) -> Value {
        let t = self.ty(d);
        self.b.ins().bitcast(t, MemFlagsData::new(), v)
    }

    /// kiln's `exp` of the float register `x` (dtype `d`).
    pub(crate) fn exp(&mut self, d: DType, x: Value) -> Value {
        let c = Self::math_consts(d);
        let kt = self.key_ty(d);
        let xmax = self.float_const(d, c.exp_xmax);
        let xmin = self.float_const(d, c.exp_xmin);
        let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, xmax);
        let x1 = self.sel(gt, xmax, x);
        let lt = self.b.ins().fcmp(FloatCC::LessThan, x1, xmin);
        let xc = self.sel(lt, xmin, x1);
        let shift = self.float_const(d, c.shift);
        let inv = self.float_const(d, c.inv_ln2);
        let q = self.fop('*', xc, inv);
        let t = self.fop('+', q, shift);
        let kf = self.fop('-', t, shift);
        let tb = self.bits_of(d, t);
        let sb = self.bits_const(kt, c.shift as i64);
        let k = self.b.ins().isub(tb, sb);
        let ln2hi = self.float_const(d, c.exp_ln2_hi);
        let ln2lo = self.float_const(d, c.exp_ln2_lo);
        let khi = self.fop('*', kf, ln2hi);
        let hi = self.fop('-', xc, khi);
        let lo = self.fop('*', kf, ln2lo);
        let r = self.fop('-', hi, lo);
        let rr = self.fop('*', r, r);
        let n = c.exp_p.len();
        let mut p = self.float_const(d, c.exp_p[n - 1]);
        for j in (0..n - 1).rev() {
            let cj = self.float_const(d, c.exp_p[j]);
            let m = self.fop('*', rr, p);
            p = self.fop('+', cj, m);
        }
        let rp = self.fop('*', rr, p);
        let cc = self.fop('-', r, rp);
        let two = self.float_const(
            d,
            if d == DType::F64 {
                2f64.to_bits()
            } else {
                2f32.to_bits() as u64
            },
        );
        let one = self.float_const(
            d,
            if d == DType::F64 {
                1f64.to_bits()
            } else {
                1f32.to_bits() as u64
            },
        );
        let num = self.fop('*', r, cc);
        let den = self.fop('-', two, cc);
        let qd = self.fop('/', num, den);
        let a = self.fop('-', lo, qd);
        let b2 = self.fop('-', a, hi);
        let y = self.fop('-', one, b2);
        let k1 = self.b.ins().sshr_imm_u(k, 1);
        let k2 = self.b.ins().isub(k, k1);
        let bias = self.bits_const(kt, c.bias);
        let e1 = self.b.ins().iadd(k1, bias);
        let e1 = self.b.ins().ishl_imm_u(e1, c.mant as i64);
        let e2 = self.b.ins().iadd(k2, bias);
        let e2 = self.b.ins().ishl_imm_u(e2, c.mant as i64);
        let s1 = self.float_of(d, e1);
        let s2 = self.float_of(d, e2);
        let ys = self.fop('*', y, s1);
        let res = self.fop('*', ys, s2);
        let isnan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let nan = self.float_const(d, c.nan);
        self.sel(isnan, nan, res)
    }

    /// kiln's `log` of the float register `x` (dtype `d`).
    pub(crate) fn log(&mut self, d: DType, x: Value) -> Value {
        let c = Self::math_consts(d);
        let kt = self.key_ty(d);
        let minn = self.float_const(d, c.min_normal);
        let sub = self.b.ins().fcmp(FloatCC::LessThan, x, minn);
        let scale = self.float_const(d, ((c.bias + c.sub) as u64) << c.mant);
        let xsc = self.fop('*', x, scale);
        let xs = self.sel(sub, xsc, x);
        let neg_sub = self.bits_const(kt, -c.sub);
        let zero_i = self.bits_const(kt, 0);
        let kadj = self.sel(sub, neg_sub, zero_i);
        let one_bits = (c.bias as u64) << c.mant;
        let off = self.bits_const(kt, one_bits.wrapping_sub(c.log_mid) as i64);
        let xb = self.bits_of(d, xs);
        let ix = self.b.ins().iadd(xb, off);
        let e = self.b.ins().ushr_imm_u(ix, c.mant as i64);
        let bias = self.bits_const(kt, c.bias);
        let k0 = self.b.ins().isub(e, bias);
        let k = self.b.ins().iadd(k0, kadj);
        let mask = self.bits_const(kt, ((1u64 << c.mant) - 1) as i64);
        let mid = self.bits_const(kt, c.log_mid as i64);
        let mb = self.b.ins().band(ix, mask);
        let mb = self.b.ins().iadd(mb, mid);
        let m = self.float_of(d, mb);
        let fbits = |v: f64| {
            if d == DType::F64 {
                v.to_bits()
            } else {
                (v as f32).to_bits() as u64
            }
        };
        let one = self.float_const(d, fbits(1.0));
        let two = self.float_const(d, fbits(2.0));
        let half = self.float_const(d, fbits(0.5));
        let f = self.fop('-', m, one);
        let hf = self.fop('*', half, f);
        let hfsq = self.fop('*', hf, f);
        let den = self.fop('+', two, f);
        let s = self.fop('/', f, den);
        let z = self.fop('*', s, s);
        let w = self.fop('*', z, z);
        let lg = c.log_lg;
        let top_odd = (lg.len() - 1) & !1;
        let mut t2 = self.float_const(d, lg[top_odd]);
        let mut j = top_odd;
        while j >= 2 {
            j -= 2;
            let cj = self.float_const(d, lg[j]);
            let m = self.fop('*', w, t2);
            t2 = self.fop('+', cj, m);
        }
        let t2 = self.fop('*', z, t2);
        let top_even = ((lg.len() - 2) & !1) + 1;
        let mut t1 = self.float_const(d, lg[top_even]);
        let mut j = top_even;
        while j >= 3 {
            j -= 2;
            let cj = self.float_const(d, lg[j]);
            let m = self.fop('*', w, t1);
            t1 = self.fop('+', cj, m);
        }
        let t1 = self.fop('*', w, t1);
        let rr = self.fop('+', t2, t1);
        let ty = self.ty(d);
        let dk = self.b.ins().fcvt_from_sint(ty, k);
        let ln2lo = self.float_const(d, c.log_ln2_lo);
        let ln2hi = self.float_const(d, c.log_ln2_hi);
        let hr = self.fop('+', hfsq, rr);
        let a = self.fop('*', s, hr);
        let klo = self.fop('*', dk, ln2lo);
        let a = self.fop('+', a, klo);
        let a = self.fop('-', a, hfsq);
        let a = self.fop('+', a, f);
        let khi = self.fop('*', dk, ln2hi);
        let res = self.fop('+', a, khi);
        let inf = self.float_const(d, c.inf);
        let is_inf = self.b.ins().fcmp(FloatCC::Equal, x, inf);
        let r1 = self.sel(is_inf, x, res);
        let zero = self.float_const(d, 0);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let ninf = self.float_const(d, c.neg_inf);
        let r2 = self.sel(is_zero, ninf, r1);
        // `x >= 0` is false exactly for NaN and negative x (the NaN result's inputs). An
        // ordered compare with the arms swapped, not `UnorderedOrLessThan`: Cranelift's
        // aarch64 backend has no vector lowering for the unordered float conditions.
        let ok = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        let nan = self.float_const(d, c.nan);
        self.sel(ok, r2, nan)
    }
}
