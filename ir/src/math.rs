//! `exp` and `log`: the executable semantics of kiln's two transcendental unary ops.
//!
//! Scope: `exp_f32`, `exp_f64`, `log_f32`, `log_f64` on IEEE bits, pure Rust, no libm. Each
//! is ONE fixed, branch-free sequence of IEEE basic operations (add, sub, mul, div, each
//! correctly rounded to nearest even; never fused), compares, selects, bit casts and integer
//! add/sub/shift/and. The Cranelift renderer (`codegen/src/cpu/math.rs`, scalar and 4-lane)
//! and the PTX renderer (`.rn` ops, no `.approx`, no `.ftz`) emit the very same dataflow, so
//! the three agree bit for bit: every step is a correctly rounded basic op, whose result is
//! a function of its operands only.
//!
//! **exp(x)**: clamp x into `[XMIN, XMAX]` (a NaN passes through the clamp's compares
//! unchanged); `t = x * (1/ln2) + S` with the shifter `S = 1.5 * 2^p` (p = 23 or 52) rounds
//! `x/ln2` to the nearest integer `k` (read back as `bits(t) - bits(S)`, `kf = t - S`
//! exact); Cody–Waite reduction `hi = x - kf*LN2_HI` (exact: LN2_HI has enough trailing
//! zero bits that `kf*LN2_HI` is exact, and the difference is representable), `lo =
//! kf*LN2_LO`, `r = hi - lo`, `|r| <= ln2/2`. Then the rational form `c = r - r²·P(r²)`
//! (P: f64 degree 4 in r², f32 degree 1), `y = 1 - ((lo - r*c/(2 - c)) - hi)`, and the
//! reconstruction `y * 2^k1 * 2^k2` with `k1 = k >> 1`, `k2 = k - k1`, both powers built
//! from exponent bits. The first product is exact (it stays normal), so the only rounding
//! after `y` is the last product's: overflow gives +inf, gradual underflow rounds once more
//! (documented double rounding in the subnormal range), below the underflow threshold 0.
//! `exp(±0) = 1`, `exp(+inf) = +inf`, `exp(-inf) = +0`, NaN → canonical NaN.
//!
//! **log(x)**: a subnormal x is first scaled by `2^SUB` (exact; SUB = 25 or 54) and k
//! lowered by SUB; `x = 2^k * m` with `m` in `[sqrt(2)/2, sqrt(2))` by integer operations
//! on the bits; `f = m - 1` (exact), `s = f/(2+f)`, `R(s²)` the polynomial in `z = s²`
//! split on odd/even powers of `w = z²` (f64 seven terms, f32 four), and
//! `log = (((s*(f²/2 + R) + k*LN2_LO) - f²/2) + f) + k*LN2_HI`.
//! `log(±0) = -inf`, `log(x<0) = NaN`, `log(+inf) = +inf`, NaN → canonical NaN (all by a
//! final select chain: NaN or negative, then zero, then +inf).
//!
//! Accuracy (measured by `examples/math_ulp.rs`, reported in SEMANTICS.md): below 1 ulp.
//! Limits: not correctly rounded; the polynomials are the classic minimax coefficients of
//! this reduction (Remez fits of `r(e^r+1)/(e^r-1)` and of `(log(1+s)-log(1-s))/s`).

use crate::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};

const fn f64_bits(v: f64) -> u64 {
    v.to_bits()
}

// ---- exp constants ----

/// f32 exp: clamp bounds (beyond them the result is already +inf / +0).
const EXP_XMAX_F32: f32 = 89.0;
const EXP_XMIN_F32: f32 = -104.0;
/// 1/ln2 rounded to f32.
const INV_LN2_F32: u32 = 0x3fb8_aa3b;
/// The rounding shifter 1.5 * 2^23.
const SHIFT_F32: u32 = 0x4b40_0000;
/// ln2 split: hi with 15 significant bits (k*hi exact for |k| < 2^8), lo = ln2 - hi.
const LN2_HI_EXP_F32: u32 = 0x3f31_7200;
const LN2_LO_EXP_F32: u32 = 0x35bf_be8e;
/// f32 polynomial P(r²) = P1 + r²·P2.
const EXP_P_F32: [u64; 2] = [0x3e2a_aa8f, 0xbb35_5215];

const EXP_XMAX_F64: f64 = 710.0;
const EXP_XMIN_F64: f64 = -746.0;
const INV_LN2_F64: u64 = 0x3ff7_1547_652b_82fe;
/// The rounding shifter 1.5 * 2^52.
const SHIFT_F64: u64 = 0x4338_0000_0000_0000;
/// ln2 split: hi with 21 trailing zero bits (k*hi exact for |k| < 2^11), lo = ln2 - hi.
const LN2_HI_F64: u64 = 0x3fe6_2e42_fee0_0000;
const LN2_LO_F64: u64 = 0x3dea_39ef_3579_3c76;
/// f64 polynomial P(r²) = P1 + r²(P2 + r²(P3 + r²(P4 + r²·P5))).
const EXP_P_F64: [u64; 5] = [
    f64_bits(1.666_666_666_666_660_2e-1),
    f64_bits(-2.777_777_777_701_559_3e-3),
    f64_bits(6.613_756_321_437_934e-5),
    f64_bits(-1.653_390_220_546_525_2e-6),
    f64_bits(4.138_136_797_057_238_5e-8),
];

// ---- log constants ----

/// f32 log: sqrt(2)/2's bits (the reduction's lower bound).
const LOG_MID_F32: u32 = 0x3f35_04f3;
const LN2_HI_LOG_F32: u32 = 0x3f31_7180;
const LN2_LO_LOG_F32: u32 = 0x3717_f7d1;
/// f32 R(z) coefficients Lg1..Lg4.
const LOG_LG_F32: [u64; 4] = [0x3f2a_aaaa, 0x3ecc_ce13, 0x3e91_e9ee, 0x3e78_9e26];
const LOG_MID_F64: u64 = 0x3fe6_a09e_0000_0000;
/// f64 R(z) coefficients Lg1..Lg7.
const LOG_LG_F64: [u64; 7] = [
    f64_bits(6.666_666_666_666_735e-1),
    f64_bits(3.999_999_999_940_942e-1),
    f64_bits(2.857_142_874_366_239e-1),
    f64_bits(2.222_219_843_214_978_4e-1),
    f64_bits(1.818_357_216_161_805e-1),
    f64_bits(1.531_383_769_920_937_3e-1),
    f64_bits(1.479_819_860_511_658_6e-1),
];

/// The constants of one precision, shared by the renderers so that they emit exactly the
/// sequence written here.
#[derive(Clone, Copy, Debug)]
pub struct MathConsts {
    /// Mantissa bits (23 or 52).
    pub mant: u32,
    /// Exponent bias (127 or 1023).
    pub bias: i64,
    /// exp clamp bounds, as bits.
    pub exp_xmax: u64,
    /// exp clamp lower bound, as bits.
    pub exp_xmin: u64,
    /// 1/ln2.
    pub inv_ln2: u64,
    /// The rounding shifter 1.5 * 2^mant.
    pub shift: u64,
    /// exp's ln2 split.
    pub exp_ln2_hi: u64,
    /// exp's ln2 split, low part.
    pub exp_ln2_lo: u64,
    /// exp's P coefficients, P1 first.
    pub exp_p: &'static [u64],
    /// log's reduction midpoint bits (sqrt(2)/2, truncated).
    pub log_mid: u64,
    /// log's ln2 split.
    pub log_ln2_hi: u64,
    /// log's ln2 split, low part.
    pub log_ln2_lo: u64,
    /// log's Lg coefficients, Lg1 first (4 or 7).
    pub log_lg: &'static [u64],
    /// Subnormal pre-scale exponent (25 or 54).
    pub sub: i64,
    /// Smallest normal, as bits.
    pub min_normal: u64,
    /// The canonical NaN's bits.
    pub nan: u64,
    /// +inf's bits.
    pub inf: u64,
    /// -inf's bits.
    pub neg_inf: u64,
}

impl MathConsts {
    /// The f32 constants.
    pub const F32: MathConsts = MathConsts {
        mant: 23,
        bias: 127,
        exp_xmax: EXP_XMAX_F32.to_bits() as u64,
        exp_xmin: EXP_XMIN_F32.to_bits() as u64,
        inv_ln2: INV_LN2_F32 as u64,
        shift: SHIFT_F32 as u64,
        exp_ln2_hi: LN2_HI_EXP_F32 as u64,
        exp_ln2_lo: LN2_LO_EXP_F32 as u64,
        exp_p: &EXP_P_F32,
        log_mid: LOG_MID_F32 as u64,
        log_ln2_hi: LN2_HI_LOG_F32 as u64,
        log_ln2_lo: LN2_LO_LOG_F32 as u64,
        log_lg: &LOG_LG_F32,
        sub: 25,
        min_normal: f32::MIN_POSITIVE.to_bits() as u64,
        nan: CANONICAL_NAN_F32 as u64,
        inf: f32::INFINITY.to_bits() as u64,
        neg_inf: f32::NEG_INFINITY.to_bits() as u64,
    };

    /// The f64 constants.
    pub const F64: MathConsts = MathConsts {
        mant: 52,
        bias: 1023,
        exp_xmax: EXP_XMAX_F64.to_bits(),
        exp_xmin: EXP_XMIN_F64.to_bits(),
        inv_ln2: INV_LN2_F64,
        shift: SHIFT_F64,
        exp_ln2_hi: LN2_HI_F64,
        exp_ln2_lo: LN2_LO_F64,
        exp_p: &EXP_P_F64,
        log_mid: LOG_MID_F64,
        log_ln2_hi: LN2_HI_F64,
        log_ln2_lo: LN2_LO_F64,
        log_lg: &LOG_LG_F64,
        sub: 54,
        min_normal: f64::MIN_POSITIVE.to_bits(),
        nan: CANONICAL_NAN_F64,
        inf: f64::INFINITY.to_bits(),
        neg_inf: f64::NEG_INFINITY.to_bits(),
    };
}

/// Generates `exp`/`log` for one precision: `$f` the float, `$u` its bits, `$i` the signed
/// integer of the same width.
macro_rules! transcendental {
    ($exp:ident, $log:ident, $f:ty, $u:ty, $i:ty, $consts:expr) => {
        /// kiln's `exp` (see the module header for the exact sequence).
        #[inline]
        pub fn $exp(x: $f) -> $f {
            let c = $consts;
            let fc = |b: u64| <$f>::from_bits(b as $u);
            // Clamp: compares are false on NaN, so a NaN passes through.
            let xmax = fc(c.exp_xmax);
            let xmin = fc(c.exp_xmin);
            let x1 = if x > xmax { xmax } else { x };
            let xc = if x1 < xmin { xmin } else { x1 };
            let shift = fc(c.shift);
            let t = xc * fc(c.inv_ln2) + shift;
            let kf = t - shift;
            let k = (t.to_bits() as $i).wrapping_sub(shift.to_bits() as $i);
            let hi = xc - kf * fc(c.exp_ln2_hi);
            let lo = kf * fc(c.exp_ln2_lo);
            let r = hi - lo;
            let rr = r * r;
            // Horner from the highest coefficient: p = P_n; p = P_i + rr*p.
            let n = c.exp_p.len();
            let mut p = fc(c.exp_p[n - 1]);
            for j in (0..n - 1).rev() {
                p = fc(c.exp_p[j]) + rr * p;
            }
            let cc = r - rr * p;
            let two: $f = 2.0;
            let one: $f = 1.0;
            let y = one - ((lo - (r * cc) / (two - cc)) - hi);
            let k1 = k >> 1;
            let k2 = k.wrapping_sub(k1);
            let s1 = <$f>::from_bits((k1.wrapping_add(c.bias as $i) as $u) << c.mant);
            let s2 = <$f>::from_bits((k2.wrapping_add(c.bias as $i) as $u) << c.mant);
            let res = (y * s1) * s2;
            if x.is_nan() {
                fc(c.nan)
            } else {
                res
            }
        }

        /// kiln's `log` (see the module header for the exact sequence).
        #[inline]
        pub fn $log(x: $f) -> $f {
            let c = $consts;
            let fc = |b: u64| <$f>::from_bits(b as $u);
            let sub = x < fc(c.min_normal);
            let scale = <$f>::from_bits(((c.bias + c.sub) as $u) << c.mant);
            let xs = if sub { x * scale } else { x };
            let kadj: $i = if sub { -(c.sub as $i) } else { 0 };
            let one_bits = (c.bias as $u) << c.mant;
            let mid = c.log_mid as $u;
            let ix = xs.to_bits().wrapping_add(one_bits.wrapping_sub(mid));
            let e = (ix >> c.mant) as $i;
            let k = e.wrapping_sub(c.bias as $i).wrapping_add(kadj);
            let mask: $u = ((1 as $u) << c.mant) - 1;
            let m = <$f>::from_bits((ix & mask).wrapping_add(mid));
            let one: $f = 1.0;
            let two: $f = 2.0;
            let half: $f = 0.5;
            let f = m - one;
            let hfsq = (half * f) * f;
            let s = f / (two + f);
            let z = s * s;
            let w = z * z;
            // Odd-numbered Lg1, Lg3, ... (even indices) on z, Lg2, Lg4, ... on w; each a
            // Horner chain in w from its highest coefficient.
            let lg = c.log_lg;
            let top_odd = (lg.len() - 1) & !1;
            let mut t2 = fc(lg[top_odd]);
            let mut j = top_odd;
            while j >= 2 {
                j -= 2;
                t2 = fc(lg[j]) + w * t2;
            }
            let t2 = z * t2;
            let top_even = ((lg.len() - 2) & !1) + 1;
            let mut t1 = fc(lg[top_even]);
            let mut j = top_even;
            while j >= 3 {
                j -= 2;
                t1 = fc(lg[j]) + w * t1;
            }
            let t1 = w * t1;
            let rr = t2 + t1;
            let dk = k as $f;
            let res =
                (((s * (hfsq + rr) + dk * fc(c.log_ln2_lo)) - hfsq) + f) + dk * fc(c.log_ln2_hi);
            let zero: $f = 0.0;
            // Final selects, outermost last: NaN or negative → NaN, ±0 → -inf, +inf → +inf.
            let r1 = if x == fc(c.inf) { x } else { res };
            let r2 = if x == zero { fc(c.neg_inf) } else { r1 };
            if x.is_nan() || x < zero {
                fc(c.nan)
            } else {
                r2
            }
        }
    };
}

transcendental!(exp_f32, log_f32, f32, u32, i32, MathConsts::F32);
transcendental!(exp_f64, log_f64, f64, u64, i64, MathConsts::F64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values() {
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp_f32(f32::NAN).to_bits(), CANONICAL_NAN_F32);
        assert_eq!(exp_f64(1000.0), f64::INFINITY);
        assert_eq!(exp_f64(-1000.0).to_bits(), 0);
        assert_eq!(exp_f64(f64::NAN).to_bits(), CANONICAL_NAN_F64);
        assert_eq!(log_f32(1.0).to_bits(), 0);
        assert_eq!(log_f64(1.0).to_bits(), 0);
        assert_eq!(log_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(log_f32(-0.0), f32::NEG_INFINITY);
        assert_eq!(log_f64(-1.0).to_bits(), CANONICAL_NAN_F64);
        assert_eq!(log_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(log_f64(f64::NEG_INFINITY).to_bits(), CANONICAL_NAN_F64);
        // Subnormal inputs: log of the smallest subnormal is -1074 ln2.
        let l = log_f64(f64::from_bits(1));
        assert!((l - (-1074.0 * std::f64::consts::LN_2)).abs() < 1e-12);
        let l = log_f32(f32::from_bits(1));
        assert!((l - (-149.0 * std::f32::consts::LN_2)).abs() < 1e-4);
        // Largest finite results and gradual underflow.
        assert!(exp_f64(709.78).is_finite());
        assert!(exp_f64(-745.0) > 0.0);
        assert!(exp_f32(88.72).is_finite());
        assert!(exp_f32(-103.0) > 0.0);
    }

    /// The ulp of the f32 (or f64, `mant = 52`) binade holding `v`, subnormals included.
    fn ulp(v: f64, mant: i32, emin: i32) -> f64 {
        let e = if v == 0.0 {
            emin
        } else {
            v.abs().log2().floor() as i32
        };
        2f64.powi(e.max(emin) - mant)
    }

    /// Within 2 ulp of the host libm (itself within 1 ulp) over a grid: a coarse check; the
    /// real measurement is `examples/math_ulp.rs`.
    #[test]
    fn close_to_host_libm() {
        let mut x = -110.0f64;
        while x < 90.0 {
            let b = (x as f32 as f64).exp();
            let a = exp_f32(x as f32) as f64;
            if b < f32::MAX as f64 {
                assert!((a - b).abs() <= 2.0 * ulp(b, 23, -126), "exp {x}: {a} {b}");
            }
            let a = exp_f64(x);
            let b = x.exp();
            assert!((a - b).abs() <= 2.0 * ulp(b, 52, -1022), "exp {x}: {a} {b}");
            x += 0.0137;
        }
        let mut x = 1e-30f64;
        while x < 1e30 {
            let a = log_f32(x as f32) as f64;
            let b = (x as f32 as f64).ln();
            assert!((a - b).abs() <= 2.0 * ulp(b, 23, -126), "log {x}");
            let a = log_f64(x);
            let b = x.ln();
            assert!((a - b).abs() <= 2.0 * ulp(b, 52, -1022), "log {x}");
            x *= 1.0371;
        }
    }
}
