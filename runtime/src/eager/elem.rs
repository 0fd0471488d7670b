//! Per-dtype element operations, as marker types so that every inner loop is monomorphised
//! (no per-element dtype dispatch). Bool values are bytes holding 0 or 1.
//!
//! Casts: an integer or bool source converts through an exact i64 ([`Kind::to_i64`], then
//! [`Kind::from_i64`]: wrapping into integers, one rounding into floats); a float source
//! through an exact f64 ([`Kind::from_f64`]: truncating, saturating, NaN → 0 into integers).

use kiln_ir::semantics::{canon_f32, canon_f64, max_f32, max_f64, min_f32, min_f64};
use kiln_ir::{DType, Scalar};

use crate::Storage;

/// Operations every dtype has: storage access, the lattice order, sums and casts.
pub(crate) trait Kind: Send + Sync + 'static {
    /// The element as stored.
    type T: Copy + Default + Send + Sync + 'static;
    /// The dtype.
    const DTYPE: DType;
    /// The storage's elements, when it has this dtype.
    fn slice(s: &Storage) -> Option<&[Self::T]>;
    /// Wraps elements as storage.
    fn wrap(v: Vec<Self::T>) -> Storage;
    /// The scalar's value, when it has this dtype.
    fn from_scalar(s: Scalar) -> Option<Self::T>;
    /// The top of the order (+Inf, 255, true): a network's padding wires.
    fn top() -> Self::T;
    /// kiln's minimum (bool: and).
    fn min(a: Self::T, b: Self::T) -> Self::T;
    /// kiln's maximum (bool: or).
    fn max(a: Self::T, b: Self::T) -> Self::T;
    /// The sum step of a reduction (floats: canonical NaN; u8: wrapping; bool: unused).
    fn sum(a: Self::T, b: Self::T) -> Self::T;
    /// `a < b` (IEEE for floats; false < true).
    fn lt(a: Self::T, b: Self::T) -> bool;
    /// `a <= b`.
    fn le(a: Self::T, b: Self::T) -> bool;
    /// `a == b` (IEEE for floats).
    fn eq(a: Self::T, b: Self::T) -> bool;
    /// The exact value as f64 (f32 NaN payloads widen, canonicalised by any float cast).
    fn to_f64(v: Self::T) -> f64;
    /// The cast of an f64 to this dtype ([`kiln_ir::semantics::cast_f64`]'s rule).
    fn from_f64(v: f64) -> Self::T;
    /// True for integer and bool dtypes (whose values are exact as i64).
    const INT: bool;
    /// The exact value as i64 (integers and bool; floats: unused, truncated).
    fn to_i64(v: Self::T) -> i64;
    /// The cast of an integer value to this dtype: wrapping (integers), `v != 0` (bool),
    /// rounded to nearest-even (floats).
    fn from_i64(v: i64) -> Self::T;
}

/// Integer dtypes other than u8 and bool: the unary ops.
pub(crate) trait Int: Arith {
    /// Absolute value, wrapping (`abs(MIN) == MIN`); unsigned: identity.
    fn abs(a: Self::T) -> Self::T;
}

/// Arithmetic dtypes (f32, f64, u8).
pub(crate) trait Arith: Kind {
    /// Addition.
    fn add(a: Self::T, b: Self::T) -> Self::T;
    /// Subtraction.
    fn sub(a: Self::T, b: Self::T) -> Self::T;
    /// Multiplication.
    fn mul(a: Self::T, b: Self::T) -> Self::T;
    /// Division (u8: truncating, x / 0 = 0).
    fn div(a: Self::T, b: Self::T) -> Self::T;
    /// Negation (u8: wrapping).
    fn neg(a: Self::T) -> Self::T;
}

/// Float dtypes.
pub(crate) trait Float: Arith {
    /// Absolute value, canonical NaN.
    fn abs(a: Self::T) -> Self::T;
    /// Square root, canonical NaN.
    fn sqrt(a: Self::T) -> Self::T;
    /// `x != x`.
    fn is_nan(a: Self::T) -> bool;
    /// Neither NaN nor infinite.
    fn is_finite(a: Self::T) -> bool;
    /// kiln's exp (`kiln_ir::math`), canonical NaN.
    fn exp(a: Self::T) -> Self::T;
    /// kiln's log (`kiln_ir::math`), canonical NaN.
    fn log(a: Self::T) -> Self::T;
}

/// f32 marker.
pub(crate) struct KF32;
/// f64 marker.
pub(crate) struct KF64;
/// u8 marker.
pub(crate) struct KU8;
/// bool marker (0/1 bytes).
pub(crate) struct KBool;

macro_rules! float_kind {
    ($K:ident, $t:ty, $D:ident, $canon:ident, $min:ident, $max:ident, $exp:ident, $log:ident) => {
        impl Kind for $K {
            type T = $t;
            const DTYPE: DType = DType::$D;
            fn slice(s: &Storage) -> Option<&[$t]> {
                match s {
                    Storage::$D(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<$t>) -> Storage {
                Storage::$D(v)
            }
            fn from_scalar(s: Scalar) -> Option<$t> {
                match s {
                    Scalar::$D(b) => Some(<$t>::from_bits(b)),
                    _ => None,
                }
            }
            fn top() -> $t {
                <$t>::INFINITY
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                $min(a, b)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                $max(a, b)
            }
            #[inline(always)]
            fn sum(a: $t, b: $t) -> $t {
                $canon(a + b)
            }
            #[inline(always)]
            fn lt(a: $t, b: $t) -> bool {
                a < b
            }
            #[inline(always)]
            fn le(a: $t, b: $t) -> bool {
                a <= b
            }
            #[inline(always)]
            fn eq(a: $t, b: $t) -> bool {
                a == b
            }
            #[inline(always)]
            fn to_f64(v: $t) -> f64 {
                v as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                $canon(v as $t)
            }
            const INT: bool = false;
            #[inline(always)]
            fn to_i64(v: $t) -> i64 {
                v as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> $t {
                v as $t
            }
        }
        impl Arith for $K {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                $canon(a + b)
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                $canon(a - b)
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                $canon(a * b)
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                $canon(a / b)
            }
            #[inline(always)]
            fn neg(a: $t) -> $t {
                $canon(-a)
            }
        }
        impl Float for $K {
            #[inline(always)]
            fn abs(a: $t) -> $t {
                $canon(a.abs())
            }
            #[inline(always)]
            fn sqrt(a: $t) -> $t {
                $canon(a.sqrt())
            }
            #[inline(always)]
            fn is_nan(a: $t) -> bool {
                a.is_nan()
            }
            #[inline(always)]
            fn is_finite(a: $t) -> bool {
                a.is_finite()
            }
            #[inline(always)]
            fn exp(a: $t) -> $t {
                kiln_ir::math::$exp(a)
            }
            #[inline(always)]
            fn log(a: $t) -> $t {
                kiln_ir::math::$log(a)
            }
        }
    };
}

float_kind!(KF32, f32, F32, canon_f32, min_f32, max_f32, exp_f32, log_f32);
float_kind!(KF64, f64, F64, canon_f64, min_f64, max_f64, exp_f64, log_f64);

impl Kind for KU8 {
    type T = u8;
    const DTYPE: DType = DType::U8;
    fn slice(s: &Storage) -> Option<&[u8]> {
        match s {
            Storage::U8(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<u8>) -> Storage {
        Storage::U8(v)
    }
    fn from_scalar(s: Scalar) -> Option<u8> {
        match s {
            Scalar::U8(v) => Some(v),
            _ => None,
        }
    }
    fn top() -> u8 {
        u8::MAX
    }
    #[inline(always)]
    fn min(a: u8, b: u8) -> u8 {
        a.min(b)
    }
    #[inline(always)]
    fn max(a: u8, b: u8) -> u8 {
        a.max(b)
    }
    #[inline(always)]
    fn sum(a: u8, b: u8) -> u8 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn lt(a: u8, b: u8) -> bool {
        a < b
    }
    #[inline(always)]
    fn le(a: u8, b: u8) -> bool {
        a <= b
    }
    #[inline(always)]
    fn eq(a: u8, b: u8) -> bool {
        a == b
    }
    #[inline(always)]
    fn to_f64(v: u8) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> u8 {
        // Rust's float-to-int `as` truncates toward zero, saturates and maps NaN to 0.
        v as u8
    }
    const INT: bool = true;
    #[inline(always)]
    fn to_i64(v: u8) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> u8 {
        v as u8
    }
}

impl Arith for KU8 {
    #[inline(always)]
    fn add(a: u8, b: u8) -> u8 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn sub(a: u8, b: u8) -> u8 {
        a.wrapping_sub(b)
    }
    #[inline(always)]
    fn mul(a: u8, b: u8) -> u8 {
        a.wrapping_mul(b)
    }
    #[inline(always)]
    fn div(a: u8, b: u8) -> u8 {
        a.checked_div(b).unwrap_or(0)
    }
    #[inline(always)]
    fn neg(a: u8) -> u8 {
        a.wrapping_neg()
    }
}

impl Kind for KBool {
    type T = u8;
    const DTYPE: DType = DType::Bool;
    fn slice(s: &Storage) -> Option<&[u8]> {
        match s {
            Storage::Bool(v) => Some(v),
            _ => None,
        }
    }
    fn wrap(v: Vec<u8>) -> Storage {
        Storage::Bool(v)
    }
    fn from_scalar(s: Scalar) -> Option<u8> {
        match s {
            Scalar::Bool(v) => Some(u8::from(v)),
            _ => None,
        }
    }
    fn top() -> u8 {
        1
    }
    #[inline(always)]
    fn min(a: u8, b: u8) -> u8 {
        a & b
    }
    #[inline(always)]
    fn max(a: u8, b: u8) -> u8 {
        a | b
    }
    #[inline(always)]
    fn sum(a: u8, b: u8) -> u8 {
        a | b
    }
    #[inline(always)]
    fn lt(a: u8, b: u8) -> bool {
        a < b
    }
    #[inline(always)]
    fn le(a: u8, b: u8) -> bool {
        a <= b
    }
    #[inline(always)]
    fn eq(a: u8, b: u8) -> bool {
        a == b
    }
    #[inline(always)]
    fn to_f64(v: u8) -> f64 {
        v as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> u8 {
        u8::from(v != 0.0)
    }
    const INT: bool = true;
    #[inline(always)]
    fn to_i64(v: u8) -> i64 {
        v as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> u8 {
        u8::from(v != 0)
    }
}

/// i8 marker.
pub(crate) struct KI8;
/// u16 marker.
pub(crate) struct KU16;
/// i16 marker.
pub(crate) struct KI16;
/// i32 marker.
pub(crate) struct KI32;
/// u32 marker.
pub(crate) struct KU32;

macro_rules! int_kind {
    ($K:ident, $t:ty, $D:ident, $abs:expr) => {
        impl Kind for $K {
            type T = $t;
            const DTYPE: DType = DType::$D;
            fn slice(s: &Storage) -> Option<&[$t]> {
                match s {
                    Storage::$D(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(v: Vec<$t>) -> Storage {
                Storage::$D(v)
            }
            fn from_scalar(s: Scalar) -> Option<$t> {
                match s {
                    Scalar::$D(v) => Some(v),
                    _ => None,
                }
            }
            fn top() -> $t {
                <$t>::MAX
            }
            #[inline(always)]
            fn min(a: $t, b: $t) -> $t {
                Ord::min(a, b)
            }
            #[inline(always)]
            fn max(a: $t, b: $t) -> $t {
                Ord::max(a, b)
            }
            #[inline(always)]
            fn sum(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn lt(a: $t, b: $t) -> bool {
                a < b
            }
            #[inline(always)]
            fn le(a: $t, b: $t) -> bool {
                a <= b
            }
            #[inline(always)]
            fn eq(a: $t, b: $t) -> bool {
                a == b
            }
            #[inline(always)]
            fn to_f64(v: $t) -> f64 {
                v as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                // Truncates toward zero, saturates, NaN → 0 (kiln's documented rule).
                v as $t
            }
            const INT: bool = true;
            #[inline(always)]
            fn to_i64(v: $t) -> i64 {
                v as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> $t {
                // Two's complement truncation: numpy's integer `astype`.
                v as $t
            }
        }
        impl Arith for $K {
            #[inline(always)]
            fn add(a: $t, b: $t) -> $t {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn sub(a: $t, b: $t) -> $t {
                a.wrapping_sub(b)
            }
            #[inline(always)]
            fn mul(a: $t, b: $t) -> $t {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn div(a: $t, b: $t) -> $t {
                // Truncating; x / 0 = 0; MIN / -1 = MIN (the wrap).
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            #[inline(always)]
            fn neg(a: $t) -> $t {
                a.wrapping_neg()
            }
        }
        impl Int for $K {
            #[inline(always)]
            fn abs(a: $t) -> $t {
                let f: fn($t) -> $t = $abs;
                f(a)
            }
        }
    };
}

int_kind!(KI8, i8, I8, |a| a.wrapping_abs());
int_kind!(KU16, u16, U16, |a| a);
int_kind!(KI16, i16, I16, |a| a.wrapping_abs());
int_kind!(KI32, i32, I32, |a| a.wrapping_abs());
int_kind!(KU32, u32, U32, |a| a);

/// One element cast from `A` to `B` by kiln's rules (see the module docs).
#[inline(always)]
pub(crate) fn cast_one<A: Kind, B: Kind>(v: A::T) -> B::T {
    if A::INT {
        B::from_i64(A::to_i64(v))
    } else {
        B::from_f64(A::to_f64(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::semantics::cast;

    /// Every typed cast agrees with the reference scalar cast on awkward values.
    #[test]
    fn typed_casts_match_reference() {
        let f32s = [
            0.0f32,
            -0.0,
            1.5,
            -1.5,
            255.9,
            256.0,
            300.0,
            -1.0,
            -0.9,
            1e-45,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(0xffc0_1234),
            f32::from_bits(0x7f80_0001),
            16777217.0,
            3.4e38,
        ];
        let f64s = [
            0.0f64,
            -0.0,
            0.1,
            255.5,
            -3.7,
            1e300,
            -1e300,
            1e-320,
            1.0000000000000002,
            f64::from_bits(0xfff8_0000_0000_0042),
            f64::INFINITY,
            16777217.0,
            3.4028235677973366e38,
        ];
        fn check<A: Kind, B: Kind>(xs: &[A::T], to_scalar: impl Fn(A::T) -> Scalar) {
            for &x in xs {
                let want = cast(to_scalar(x), B::DTYPE);
                // Storage::get compares by bits, NaN payloads included.
                let got = B::wrap(vec![cast_one::<A, B>(x)]).get(0);
                assert_eq!(got, want, "{} -> {}", to_scalar(x), B::DTYPE);
            }
        }
        let s32 = |x: f32| Scalar::f32(x);
        let s64 = |x: f64| Scalar::f64(x);
        check::<KF32, KF64>(&f32s, s32);
        check::<KF32, KU8>(&f32s, s32);
        check::<KF32, KBool>(&f32s, s32);
        check::<KF64, KF32>(&f64s, s64);
        check::<KF64, KU8>(&f64s, s64);
        check::<KF64, KBool>(&f64s, s64);
        let u8s: Vec<u8> = (0..=255).collect();
        check::<KU8, KF32>(&u8s, Scalar::U8);
        check::<KU8, KF64>(&u8s, Scalar::U8);
        check::<KU8, KBool>(&u8s, Scalar::U8);
        check::<KBool, KF32>(&[0, 1], |b| Scalar::Bool(b != 0));
        check::<KBool, KF64>(&[0, 1], |b| Scalar::Bool(b != 0));
        check::<KBool, KU8>(&[0, 1], |b| Scalar::Bool(b != 0));
        // The new integer dtypes, from and to every dtype.
        check::<KF32, KI8>(&f32s, s32);
        check::<KF32, KU16>(&f32s, s32);
        check::<KF64, KI16>(&f64s, s64);
        check::<KF64, KI32>(&f64s, s64);
        check::<KF32, KU32>(&f32s, s32);
        let i32s = [
            0i32,
            1,
            -1,
            127,
            -128,
            255,
            256,
            32767,
            -32768,
            65535,
            65536,
            i32::MAX,
            i32::MIN,
            16_777_217,
        ];
        check::<KI32, KI8>(&i32s, Scalar::I32);
        check::<KI32, KU8>(&i32s, Scalar::I32);
        check::<KI32, KU16>(&i32s, Scalar::I32);
        check::<KI32, KI16>(&i32s, Scalar::I32);
        check::<KI32, KU32>(&i32s, Scalar::I32);
        check::<KI32, KF32>(&i32s, Scalar::I32);
        check::<KI32, KF64>(&i32s, Scalar::I32);
        check::<KI32, KBool>(&i32s, Scalar::I32);
        let u32s = [0u32, 1, 255, 65535, u32::MAX, 1 << 31, 16_777_217];
        check::<KU32, KI32>(&u32s, Scalar::U32);
        check::<KU32, KF32>(&u32s, Scalar::U32);
        check::<KU32, KI8>(&u32s, Scalar::U32);
        let i16s = [0i16, -1, i16::MIN, i16::MAX, 200, -200];
        check::<KI16, KU8>(&i16s, Scalar::I16);
        check::<KI16, KU16>(&i16s, Scalar::I16);
        check::<KI16, KU32>(&i16s, Scalar::I16);
        check::<KI16, KF32>(&i16s, Scalar::I16);
        let i8s = [0i8, -1, i8::MIN, i8::MAX];
        check::<KI8, KU16>(&i8s, Scalar::I8);
        check::<KI8, KI32>(&i8s, Scalar::I8);
        check::<KU8, KI8>(&u8s, Scalar::U8);
        check::<KBool, KI16>(&[0, 1], |b| Scalar::Bool(b != 0));
    }
}
