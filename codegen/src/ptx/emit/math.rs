//! `exp` and `log` in PTX: the sequence of `kiln_ir::math`, op for op.
//!
//! Exactness: every float step is one `add.rn`/`sub.rn`/`mul.rn`/`div.rn` (IEEE, round to
//! nearest even; never `.approx`, never `.ftz`, and `.rn` forbids ptxas from contracting
//! a mul and an add into an FMA), integer steps are `add`/`sub`/`and`/shifts on the same
//! bits, every branch of the semantics a `selp`; so the bits are those of
//! `kiln_ir::math` (the PTX text is ptxas-checked in `codegen/tests/ptx_math.rs`). Limits:
//! f32 and f64 only.

use kiln_ir::math::MathConsts;
use kiln_ir::DType;

use super::Em;

/// A float immediate in PTX's hex form.
/// A float immediate of `d` from its bits (f32: the low 32).
pub(super) fn imm(d: DType, bits: u64) -> String {
    if d == DType::F64 {
        format!("0d{bits:016X}")
    } else {
        format!("0f{:08X}", bits as u32)
    }
}

impl Em<'_> {
    fn consts(d: DType) -> MathConsts {
        if d == DType::F64 {
            MathConsts::F64
        } else {
            MathConsts::F32
        }
    }

    /// One rounded float op: `add`, `sub`, `mul` or `div`.
    pub(super) fn frn(&mut self, op: &str, d: DType, a: &str, b: &str) -> String {
        let o = self.reg(d);
        e!(self, "{op}.rn.{} {o}, {a}, {b}", super::ft(d));
        o
    }

    fn ireg(&mut self, d: DType) -> String {
        if d == DType::F64 {
            self.rd()
        } else {
            self.r()
        }
    }

    /// An integer op on the bits type (`b`/`s`/`u` prefix given by the caller).
    fn iop(&mut self, op: &str, d: DType, a: &str, b: &str) -> String {
        let w = if d == DType::F64 { 64 } else { 32 };
        let o = self.ireg(d);
        e!(self, "{op}{w} {o}, {a}, {b}");
        o
    }

    fn bits_of(&mut self, d: DType, x: &str) -> String {
        let w = if d == DType::F64 { 64 } else { 32 };
        let o = self.ireg(d);
        e!(self, "mov.b{w} {o}, {x}");
        o
    }

    fn float_of(&mut self, d: DType, x: &str) -> String {
        let w = if d == DType::F64 { 64 } else { 32 };
        let o = self.reg(d);
        e!(self, "mov.b{w} {o}, {x}");
        o
    }

    fn ibits(d: DType, v: i64) -> String {
        if d == DType::F64 {
            format!("{v}")
        } else {
            format!("{}", v as i32)
        }
    }

    pub(super) fn fsetp(&mut self, cmp: &str, d: DType, a: &str, b: &str) -> String {
        let p = self.p();
        e!(self, "setp.{cmp}.{} {p}, {a}, {b}", super::ft(d));
        p
    }

    fn fconst(&mut self, d: DType, bits: u64) -> String {
        let o = self.reg(d);
        e!(self, "mov.{} {o}, {}", super::ft(d), imm(d, bits));
        o
    }

    /// kiln's `exp` of float register `x`.
    pub(super) fn exp(&mut self, d: DType, x: &str) -> String {
        let c = Self::consts(d);
        let xmax = self.fconst(d, c.exp_xmax);
        let xmin = self.fconst(d, c.exp_xmin);
        let gt = self.fsetp("gt", d, x, &xmax);
        let x1 = self.select(d, &gt, &xmax, x);
        let lt = self.fsetp("lt", d, &x1, &xmin);
        let xc = self.select(d, &lt, &xmin, &x1);
        let shift = imm(d, c.shift);
        let q = self.frn("mul", d, &xc, &imm(d, c.inv_ln2));
        let t = self.frn("add", d, &q, &shift);
        let kf = self.frn("sub", d, &t, &shift);
        let tb = self.bits_of(d, &t);
        let k = self.iop("sub.s", d, &tb, &Self::ibits(d, c.shift as i64));
        let khi = self.frn("mul", d, &kf, &imm(d, c.exp_ln2_hi));
        let hi = self.frn("sub", d, &xc, &khi);
        let lo = self.frn("mul", d, &kf, &imm(d, c.exp_ln2_lo));
        let r = self.frn("sub", d, &hi, &lo);
        let rr = self.frn("mul", d, &r, &r);
        let n = c.exp_p.len();
        let mut p = self.fconst(d, c.exp_p[n - 1]);
        for j in (0..n - 1).rev() {
            let m = self.frn("mul", d, &rr, &p);
            p = self.frn("add", d, &imm(d, c.exp_p[j]), &m);
        }
        let rp = self.frn("mul", d, &rr, &p);
        let cc = self.frn("sub", d, &r, &rp);
        let (one, two) = if d == DType::F64 {
            (imm(d, 1f64.to_bits()), imm(d, 2f64.to_bits()))
        } else {
            (imm(d, 1f32.to_bits() as u64), imm(d, 2f32.to_bits() as u64))
        };
        let num = self.frn("mul", d, &r, &cc);
        let den = self.frn("sub", d, &two, &cc);
        let qd = self.frn("div", d, &num, &den);
        let a = self.frn("sub", d, &lo, &qd);
        let b = self.frn("sub", d, &a, &hi);
        let y = self.frn("sub", d, &one, &b);
        let k1 = self.iop("shr.s", d, &k, "1");
        let k2 = self.iop("sub.s", d, &k, &k1);
        let bias = Self::ibits(d, c.bias);
        let mant = c.mant.to_string();
        let e1 = self.iop("add.s", d, &k1, &bias);
        let e1 = self.iop("shl.b", d, &e1, &mant);
        let e2 = self.iop("add.s", d, &k2, &bias);
        let e2 = self.iop("shl.b", d, &e2, &mant);
        let s1 = self.float_of(d, &e1);
        let s2 = self.float_of(d, &e2);
        let ys = self.frn("mul", d, &y, &s1);
        let res = self.frn("mul", d, &ys, &s2);
        let isnan = self.p();
        e!(self, "testp.notanumber.{} {isnan}, {x}", super::ft(d));
        let nan = self.fconst(d, c.nan);
        self.select(d, &isnan, &nan, &res)
    }

    /// kiln's `log` of float register `x`.
    pub(super) fn log(&mut self, d: DType, x: &str) -> String {
        let c = Self::consts(d);
        let w = if d == DType::F64 { 64 } else { 32 };
        let sub = self.fsetp("lt", d, x, &imm(d, c.min_normal));
        let scale = imm(d, ((c.bias + c.sub) as u64) << c.mant);
        let xsc = self.frn("mul", d, x, &scale);
        let xs = self.select(d, &sub, &xsc, x);
        let kadj = self.ireg(d);
        e!(
            self,
            "selp.b{w} {kadj}, {}, 0, {sub}",
            Self::ibits(d, -c.sub)
        );
        let one_bits = (c.bias as u64) << c.mant;
        let xb = self.bits_of(d, &xs);
        let ix = self.iop(
            "add.s",
            d,
            &xb,
            &Self::ibits(d, one_bits.wrapping_sub(c.log_mid) as i64),
        );
        let e = self.iop("shr.u", d, &ix, &c.mant.to_string());
        let k0 = self.iop("sub.s", d, &e, &Self::ibits(d, c.bias));
        let k = self.iop("add.s", d, &k0, &kadj);
        let mb = self.iop(
            "and.b",
            d,
            &ix,
            &Self::ibits(d, ((1u64 << c.mant) - 1) as i64),
        );
        let mb = self.iop("add.s", d, &mb, &Self::ibits(d, c.log_mid as i64));
        let m = self.float_of(d, &mb);
        let fb = |v: f64| {
            if d == DType::F64 {
                imm(d, v.to_bits())
            } else {
                imm(d, (v as f32).to_bits() as u64)
            }
        };
        let (one, two, half) = (fb(1.0), fb(2.0), fb(0.5));
        let f = self.frn("sub", d, &m, &one);
        let hf = self.frn("mul", d, &half, &f);
        let hfsq = self.frn("mul", d, &hf, &f);
        let den = self.frn("add", d, &two, &f);
        let s = self.frn("div", d, &f, &den);
        let z = self.frn("mul", d, &s, &s);
        let wv = self.frn("mul", d, &z, &z);
        let lg = c.log_lg;
        let top_odd = (lg.len() - 1) & !1;
        let mut t2 = self.fconst(d, lg[top_odd]);
        let mut j = top_odd;
        while j >= 2 {
            j -= 2;
            let m = self.frn("mul", d, &wv, &t2);
            t2 = self.frn("add", d, &imm(d, lg[j]), &m);
        }
        let t2 = self.frn("mul", d, &z, &t2);
        let top_even = ((lg.len() - 2) & !1) + 1;
        let mut t1 = self.fconst(d, lg[top_even]);
        let mut j = top_even;
        while j >= 3 {
            j -= 2;
            let m = self.frn("mul", d, &wv, &t1);
            t1 = self.frn("add", d, &imm(d, lg[j]), &m);
        }
        let t1 = self.frn("mul", d, &wv, &t1);
        let rr = self.frn("add", d, &t2, &t1);
        let dk = self.reg(d);
        e!(self, "cvt.rn.{}.s{w} {dk}, {k}", super::ft(d));
        let hr = self.frn("add", d, &hfsq, &rr);
        let a = self.frn("mul", d, &s, &hr);
        let klo = self.frn("mul", d, &dk, &imm(d, c.log_ln2_lo));
        let a = self.frn("add", d, &a, &klo);
        let a = self.frn("sub", d, &a, &hfsq);
        let a = self.frn("add", d, &a, &f);
        let khi = self.frn("mul", d, &dk, &imm(d, c.log_ln2_hi));
        let res = self.frn("add", d, &a, &khi);
        let is_inf = self.fsetp("eq", d, x, &imm(d, c.inf));
        let r1 = self.select(d, &is_inf, x, &res);
        let zero = imm(d, 0);
        let is_zero = self.fsetp("eq", d, x, &zero);
        let ninf = self.fconst(d, c.neg_inf);
        let r2 = self.select(d, &is_zero, &ninf, &r1);
        let bad = self.fsetp("ltu", d, x, &zero);
        let nan = self.fconst(d, c.nan);
        self.select(d, &bad, &nan, &r2)
    }
}
