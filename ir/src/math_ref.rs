//! A double-double reference for `exp` and `log`, used only to MEASURE `math.rs` (the ulp
//! tests in `ir/tests/math_ulp.rs` and `examples/math_ulp.rs`); never part of the semantics.
//!
//! Scope: `exp_dd(x)` for results above 2^-969 (below it the trailing part `lo` underflows
//! and the reference degrades to f64 accuracy), `log_dd(x)` for positive normal
//! and subnormal x, each as an unevaluated sum `hi + lo` with a relative error below about 2^-90 (the ten
//! squarings amplify the series error 2^10-fold).
//! Exactness argument: error-free transformations (Knuth's two-sum, Dekker's split product,
//! no FMA), so every step keeps ~106 bits; exp: Cody–Waite reduction by a double-double ln2,
//! Taylor series of `r / 2^10`, ten squarings; log: near 1 the series of
//! `2 atanh(f / (2 + f))`, elsewhere `x = m 2^e` and one Newton step on `exp_dd` for `ln m`
//! from the host's `ln`.
//! Limits: slow (hundreds of flops per call); exp's subnormal results are not covered
//! (the f32 sweep measures those against f64, which is exact enough there).

/// A double-double `hi + lo` with `|lo| <= ulp(hi)/2`.
#[derive(Clone, Copy, Debug)]
pub struct Dd {
    /// Leading part.
    pub hi: f64,
    /// Trailing part.
    pub lo: f64,
}

fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    Dd { hi: s, lo: e }
}

fn split(a: f64) -> (f64, f64) {
    let t = 134_217_729.0 * a;
    let hi = t - (t - a);
    (hi, a - hi)
}

fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    Dd { hi: p, lo: e }
}

impl Dd {
    /// A double as a double-double.
    pub fn from(v: f64) -> Dd {
        Dd { hi: v, lo: 0.0 }
    }

    /// Sum.
    pub fn plus(self, o: Dd) -> Dd {
        let s = two_sum(self.hi, o.hi);
        let t = two_sum(self.lo, o.lo);
        let s = two_sum(s.hi, s.lo + t.hi);
        two_sum(s.hi, s.lo + t.lo)
    }

    /// Negation.
    pub fn negated(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }

    /// Product.
    pub fn times(self, o: Dd) -> Dd {
        let p = two_prod(self.hi, o.hi);
        let l = p.lo + (self.hi * o.lo + self.lo * o.hi);
        two_sum(p.hi, l)
    }

    /// Quotient by a double.
    pub fn over_f(self, d: f64) -> Dd {
        let q1 = self.hi / d;
        let p = two_prod(q1, d);
        let r = ((self.hi - p.hi) - p.lo + self.lo) / d;
        two_sum(q1, r)
    }

    /// Quotient.
    pub fn over(self, o: Dd) -> Dd {
        let q1 = self.hi / o.hi;
        let r = self.plus(o.times(Dd::from(q1)).negated());
        let q2 = r.hi / o.hi;
        let r = r.plus(o.times(Dd::from(q2)).negated());
        let q3 = r.hi / o.hi;
        two_sum(q1, q2).plus(Dd::from(q3))
    }

    /// Times 2^k (exact while the result stays normal).
    pub fn ldexp(self, k: i32) -> Dd {
        let mut s = self;
        let mut k = k;
        while k != 0 {
            let step = k.clamp(-1000, 1000);
            let f = 2f64.powi(step);
            s = Dd {
                hi: s.hi * f,
                lo: s.lo * f,
            };
            k -= step;
        }
        s
    }
}

/// ln 2 as a double-double.
const LN2: Dd = Dd {
    hi: std::f64::consts::LN_2,
    lo: 2.319_046_813_846_299_6e-17,
};

/// e^x to ~2^-100 relative, for results in the normal f64 range.
pub fn exp_dd(x: f64) -> Dd {
    let k = (x / std::f64::consts::LN_2).round();
    let r = Dd::from(x).plus(LN2.times(Dd::from(k)).negated());
    let r = r.ldexp(-10);
    let mut term = Dd::from(1.0);
    let mut sum = Dd::from(1.0);
    for i in 1..=14 {
        term = term.times(r).over_f(i as f64);
        sum = sum.plus(term);
    }
    for _ in 0..10 {
        sum = sum.times(sum);
    }
    sum.ldexp(k as i32)
}

/// ln x to ~2^-100 relative, for positive finite x.
pub fn log_dd(x: f64) -> Dd {
    if (x - 1.0).abs() < 0.0625 {
        // 2 atanh(s), s = f / (2 + f), f = x - 1 exact.
        let f = Dd::from(x - 1.0);
        let s = f.over(Dd::from(2.0).plus(f));
        let s2 = s.times(s);
        let mut p = s;
        let mut sum = s;
        for i in 1..40 {
            p = p.times(s2);
            let t = p.over_f((2 * i + 1) as f64);
            sum = sum.plus(t);
            if t.hi.abs() < sum.hi.abs() * 1e-36 {
                break;
            }
        }
        return sum.plus(sum);
    }
    // x = m 2^e with m in [1, 2) (a subnormal scaled up first), then Newton on m:
    // y1 = y0 + log(m e^-y0) with m e^-y0 = 1 + t, log(1 + t) = t - t²/2 (t ~ 2^-52, so the
    // next term is below 2^-150).
    let (x, adj) = if x < f64::MIN_POSITIVE {
        (x * 2f64.powi(64), -64)
    } else {
        (x, 0)
    };
    let e = ((x.to_bits() >> 52) as i64 - 1023) as i32;
    let m = f64::from_bits((x.to_bits() & ((1u64 << 52) - 1)) | (1023u64 << 52));
    let y0 = m.ln();
    let t = exp_dd(-y0).times(Dd::from(m)).plus(Dd::from(-1.0));
    let l1p = t.plus(t.times(t).over_f(-2.0));
    Dd::from(y0)
        .plus(l1p)
        .plus(LN2.times(Dd::from((e + adj) as f64)))
}

/// The distance from `v` to `r` in units of the last place of `r`'s binade in the format
/// with `mant` mantissa bits and minimum normal exponent `emin` (subnormal ulps below it).
pub fn ulp_error(v: f64, r: Dd, mant: i32, emin: i32) -> f64 {
    let e = if r.hi == 0.0 {
        emin
    } else {
        (r.hi.abs().log2().floor() as i32).max(emin)
    };
    let diff = Dd::from(v).plus(r.negated());
    (diff.hi.abs() * 2f64.powi(-e)) * 2f64.powi(mant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matches_known_values() {
        // e = 2.718281828459045 + 1.4456468917292502e-16
        let e = exp_dd(1.0);
        assert_eq!(e.hi, std::f64::consts::E);
        assert!((e.lo - 1.445_646_891_729_250_2e-16).abs() < 1e-27);
        let l = log_dd(std::f64::consts::E);
        assert!((l.hi - 1.0).abs() < 1e-15);
        let l2 = log_dd(2.0);
        assert_eq!(l2.hi, LN2.hi);
        assert!((l2.lo - LN2.lo).abs() < 1e-31);
        let l3 = log_dd(1.0 + 2f64.powi(-40));
        assert!((l3.hi - 2f64.powi(-40)).abs() < 2f64.powi(-79));
    }
}
