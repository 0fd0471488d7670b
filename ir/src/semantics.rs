//! The reference scalar semantics of every operation.
//!
//! These functions *define* what kiln computes; SEMANTICS.md states the same rules in prose.
//! The eager executor calls them element by element; the code generators must reproduce them
//! bit for bit (they implement them independently, in CLIF or PTX).

use crate::types::{DType, Scalar};

/// The one NaN every f32 computation produces: quiet, positive, zero payload.
pub const CANONICAL_NAN_F32: u32 = 0x7fc0_0000;
/// The one NaN every f64 computation produces: quiet, positive, zero payload.
pub const CANONICAL_NAN_F64: u64 = 0x7ff8_0000_0000_0000;

/// Replaces any NaN by the canonical f32 NaN.
///
/// The test is done on the integer bits on purpose: Rust (and LLVM) treat the NaN bits of a
/// float operation's result as unspecified, so a float-level `if v.is_nan() { NAN } else { v }`
/// may legally be folded to `v`, leaving whatever payload the hardware produced.
#[inline]
pub fn canon_f32(v: f32) -> f32 {
    let b = v.to_bits();
    if b & 0x7fff_ffff > 0x7f80_0000 {
        f32::from_bits(CANONICAL_NAN_F32)
    } else {
        f32::from_bits(b)
    }
}

/// Replaces any NaN by the canonical f64 NaN (tested on the bits, see [`canon_f32`]).
#[inline]
pub fn canon_f64(v: f64) -> f64 {
    let b = v.to_bits();
    if b & 0x7fff_ffff_ffff_ffff > 0x7ff0_0000_0000_0000 {
        f64::from_bits(CANONICAL_NAN_F64)
    } else {
        f64::from_bits(b)
    }
}

/// Total-order key of an f32: a signed integer whose order is the IEEE total order
/// (so −0 < +0). It is an involution on the bits: `key(key(x)) == x`.
#[inline]
pub fn order_key_f32(bits: u32) -> i32 {
    let b = bits as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

/// Total-order key of an f64 (see [`order_key_f32`]).
#[inline]
pub fn order_key_f64(bits: u64) -> i64 {
    let b = bits as i64;
    b ^ (((b >> 63) as u64) >> 1) as i64
}

/// kiln's f32 minimum: NaN if either operand is NaN (canonical), otherwise the smaller in the
/// order where −0 < +0. Commutative, associative and idempotent, so any evaluation order of a
/// min-reduction gives the same bits.
#[inline]
pub fn min_f32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::from_bits(CANONICAL_NAN_F32);
    }
    if order_key_f32(a.to_bits()) <= order_key_f32(b.to_bits()) {
        a
    } else {
        b
    }
}

/// kiln's f32 maximum (see [`min_f32`]).
#[inline]
pub fn max_f32(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        return f32::from_bits(CANONICAL_NAN_F32);
    }
    if order_key_f32(a.to_bits()) >= order_key_f32(b.to_bits()) {
        a
    } else {
        b
    }
}

/// kiln's f64 minimum (see [`min_f32`]).
#[inline]
pub fn min_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::from_bits(CANONICAL_NAN_F64);
    }
    if order_key_f64(a.to_bits()) <= order_key_f64(b.to_bits()) {
        a
    } else {
        b
    }
}

/// kiln's f64 maximum (see [`min_f32`]).
#[inline]
pub fn max_f64(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        return f64::from_bits(CANONICAL_NAN_F64);
    }
    if order_key_f64(a.to_bits()) >= order_key_f64(b.to_bits()) {
        a
    } else {
        b
    }
}

/// Maps a possibly out-of-range index `j` along an axis of length `n >= 1` to an in-range
/// index under a border mode, or `None` when the read yields the mode's constant.
/// Valid for any distance from the range (the extension is periodic for reflect, mirror
/// and wrap), as scipy.ndimage's filters do.
#[inline]
pub fn remap_index(j: i64, n: usize, border: &crate::types::Border) -> Option<usize> {
    use crate::types::Border;
    let n = n as i64;
    if (0..n).contains(&j) {
        return Some(j as usize);
    }
    let m = match border {
        Border::Constant(_) => return None,
        Border::Nearest => j.clamp(0, n - 1),
        Border::Wrap => j.rem_euclid(n),
        Border::Reflect => {
            let m = j.rem_euclid(2 * n);
            if m < n {
                m
            } else {
                2 * n - 1 - m
            }
        }
        Border::Mirror => {
            if n == 1 {
                0
            } else {
                let p = 2 * n - 2;
                let m = j.rem_euclid(p);
                if m < n {
                    m
                } else {
                    p - m
                }
            }
        }
    };
    Some(m as usize)
}

/// Casts an f64 value to `dtype`: f32 rounds to nearest-even (NaN becomes canonical); an
/// integer dtype truncates toward zero and saturates to its range, with NaN → 0 (numpy
/// leaves these cases undefined; kiln defines them as Rust's `as` does); bool is `v != 0`
/// (NaN → true).
pub fn cast_f64(v: f64, dtype: DType) -> Scalar {
    match dtype {
        DType::F64 => Scalar::F64(canon_f64(v).to_bits()),
        DType::F32 => Scalar::F32(canon_f32(v as f32).to_bits()),
        DType::U8 => Scalar::U8(v as u8),
        DType::Bool => Scalar::Bool(v != 0.0),
        DType::I8 => Scalar::I8(v as i8),
        DType::U16 => Scalar::U16(v as u16),
        DType::I16 => Scalar::I16(v as i16),
        DType::I32 => Scalar::I32(v as i32),
        DType::U32 => Scalar::U32(v as u32),
    }
}

/// Casts a scalar to `dtype` by kiln's rules (see SEMANTICS.md, "cast"). A cast to the same
/// dtype returns the value unchanged, bits included.
///
/// - float → float: round to nearest-even, NaN canonical.
/// - float → integer: truncate toward zero, saturate, NaN → 0 (see [`cast_f64`]); an f32
///   is widened to f64 first, which is exact, so the result is the same.
/// - integer or bool → float: round to nearest-even (exact except i32/u32 → f32).
/// - integer or bool → integer: the value modulo 2^bits (two's complement), numpy's
///   `astype`; → bool is `v != 0`.
pub fn cast(s: Scalar, dtype: DType) -> Scalar {
    if s.dtype() == dtype {
        return s;
    }
    match s {
        Scalar::F32(b) => {
            let v = f32::from_bits(b);
            match dtype {
                DType::F64 => Scalar::F64(canon_f64(v as f64).to_bits()),
                _ => cast_f64(v as f64, dtype),
            }
        }
        Scalar::F64(b) => cast_f64(f64::from_bits(b), dtype),
        int => {
            let v = int.to_i64().expect("integer or bool scalar");
            match dtype {
                // i64 → f32 rounds once (to nearest-even), as a direct integer conversion.
                DType::F32 => Scalar::F32((v as f32).to_bits()),
                DType::F64 => Scalar::F64((v as f64).to_bits()),
                d => Scalar::wrap_int(d, v).expect("integer dtype"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Border;

    #[test]
    fn order_key_is_total_order_and_involution() {
        let vals = [
            f32::NEG_INFINITY,
            -1.0,
            -f32::MIN_POSITIVE,
            -1e-45,
            -0.0,
            0.0,
            1e-45,
            1.0,
            f32::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(order_key_f32(w[0].to_bits()) < order_key_f32(w[1].to_bits()));
        }
        for v in vals {
            let k = order_key_f32(v.to_bits()) as u32;
            assert_eq!(order_key_f32(k) as u32, v.to_bits());
        }
    }

    #[test]
    fn min_max_order_signed_zero_and_canonical_nan() {
        assert_eq!(min_f32(0.0, -0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(min_f32(-0.0, 0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(max_f32(-0.0, 0.0).to_bits(), 0.0f32.to_bits());
        let payload = f32::from_bits(0xffc0_1234);
        assert_eq!(min_f32(payload, 1.0).to_bits(), CANONICAL_NAN_F32);
        assert_eq!(max_f32(1.0, payload).to_bits(), CANONICAL_NAN_F32);
        assert_eq!(min_f64(-0.0, 0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(max_f64(f64::NAN, 0.0).to_bits(), CANONICAL_NAN_F64);
    }

    #[test]
    fn remap_matches_scipy_tables() {
        // scipy docs: input `a b c d` extended to the left by 3 and right by 3.
        let n = 4;
        let left =
            |b: &Border| -> Vec<Option<usize>> { (-3..0).map(|j| remap_index(j, n, b)).collect() };
        let right =
            |b: &Border| -> Vec<Option<usize>> { (4..7).map(|j| remap_index(j, n, b)).collect() };
        // reflect: d c b | a b c d | d c b ... left side is "c b a" reversed = c b a
        assert_eq!(left(&Border::Reflect), vec![Some(2), Some(1), Some(0)]);
        assert_eq!(right(&Border::Reflect), vec![Some(3), Some(2), Some(1)]);
        assert_eq!(left(&Border::Mirror), vec![Some(3), Some(2), Some(1)]);
        assert_eq!(right(&Border::Mirror), vec![Some(2), Some(1), Some(0)]);
        assert_eq!(left(&Border::Nearest), vec![Some(0), Some(0), Some(0)]);
        assert_eq!(left(&Border::Wrap), vec![Some(1), Some(2), Some(3)]);
        assert_eq!(right(&Border::Wrap), vec![Some(0), Some(1), Some(2)]);
        assert_eq!(
            left(&Border::Constant(Scalar::U8(0))),
            vec![None, None, None]
        );
        // length one: every non-constant mode maps to 0
        for b in [
            Border::Reflect,
            Border::Mirror,
            Border::Nearest,
            Border::Wrap,
        ] {
            for j in -5..5 {
                assert_eq!(remap_index(j, 1, &b), Some(0));
            }
        }
    }

    #[test]
    fn canonicalisation_survives_the_optimiser() {
        // Operations whose NaN bits the hardware and LLVM leave unspecified.
        let inputs = [
            -1.0f32,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0xffc0_0001),
        ];
        for x in inputs {
            let x = std::hint::black_box(x);
            assert_eq!(
                canon_f32(x.sqrt()).to_bits(),
                CANONICAL_NAN_F32,
                "sqrt({x})"
            );
            assert_eq!(
                canon_f32(x * f32::INFINITY * 0.0).to_bits(),
                CANONICAL_NAN_F32
            );
            let d = std::hint::black_box(x as f64);
            assert_eq!(
                canon_f64(d.sqrt()).to_bits(),
                CANONICAL_NAN_F64,
                "sqrt({d})"
            );
        }
        assert_eq!(canon_f32(-0.0).to_bits(), 0x8000_0000);
        assert_eq!(canon_f32(f32::NEG_INFINITY).to_bits(), 0xff80_0000);
        assert_eq!(canon_f64(f64::INFINITY).to_bits(), 0x7ff0_0000_0000_0000);
    }

    #[test]
    fn casts_follow_documented_rules() {
        assert_eq!(cast(Scalar::f32(f32::NAN), DType::U8), Scalar::U8(0));
        assert_eq!(cast(Scalar::f32(300.7), DType::U8), Scalar::U8(255));
        assert_eq!(cast(Scalar::f32(-3.0), DType::U8), Scalar::U8(0));
        assert_eq!(cast(Scalar::f32(2.9), DType::U8), Scalar::U8(2));
        assert_eq!(cast(Scalar::f32(f32::NAN), DType::Bool), Scalar::Bool(true));
        assert_eq!(cast(Scalar::f32(-0.0), DType::Bool), Scalar::Bool(false));
        assert_eq!(
            cast(Scalar::F32(0xffc0_0001), DType::F64),
            Scalar::F64(CANONICAL_NAN_F64)
        );
        assert_eq!(
            cast(Scalar::F64(0xfff8_0000_0000_0001), DType::F32),
            Scalar::F32(CANONICAL_NAN_F32)
        );
        // new integer dtypes: saturating float casts, wrapping integer casts
        assert_eq!(cast(Scalar::f32(f32::NAN), DType::I16), Scalar::I16(0));
        assert_eq!(cast(Scalar::f64(-1e10), DType::I32), Scalar::I32(i32::MIN));
        assert_eq!(cast(Scalar::f64(1e10), DType::U32), Scalar::U32(u32::MAX));
        assert_eq!(cast(Scalar::f32(-2.7), DType::I8), Scalar::I8(-2));
        assert_eq!(
            cast(Scalar::f32(70000.0), DType::U16),
            Scalar::U16(u16::MAX)
        );
        assert_eq!(cast(Scalar::I16(-1), DType::U8), Scalar::U8(255));
        assert_eq!(cast(Scalar::I32(70000), DType::I16), Scalar::I16(4464));
        assert_eq!(cast(Scalar::U32(u32::MAX), DType::I32), Scalar::I32(-1));
        assert_eq!(cast(Scalar::U8(200), DType::I8), Scalar::I8(-56));
        assert_eq!(cast(Scalar::I8(-1), DType::U32), Scalar::U32(u32::MAX));
        assert_eq!(cast(Scalar::I16(0), DType::Bool), Scalar::Bool(false));
        assert_eq!(cast(Scalar::Bool(true), DType::I32), Scalar::I32(1));
        assert_eq!(
            cast(Scalar::I32(16_777_217), DType::F32),
            Scalar::f32(16_777_216.0)
        );
        assert_eq!(
            cast(Scalar::U32(u32::MAX), DType::F32),
            Scalar::f32(4_294_967_296.0)
        );
        // same-dtype cast keeps bits, payload included
        assert_eq!(
            cast(Scalar::F32(0xffc0_0001), DType::F32),
            Scalar::F32(0xffc0_0001)
        );
    }
}
