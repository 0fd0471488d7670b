//! Element bits and order keys for the rank programs.
//!
//! Scope: every dtype's elements as raw little-endian bits in a `u64`, the order key of
//! those bits (an unsigned integer whose order is the order kiln's selection networks use),
//! and back. Exactness: the key is a bijection on the non-NaN values of a dtype, monotone in
//! kiln's order: integers by value, floats by the IEEE total order restricted to non-NaN
//! values (so `-0 < +0`, `-Inf` lowest, `+Inf` highest) — exactly the order of
//! `kiln_ir::semantics::{min_f32, max_f32, ..}`, the comparators of every network. NaN is
//! never ordered: the networks' min/max absorb it, so the callers treat it apart
//! (`is_nan`). Limits: none; bool is 0/1.

use kiln_ir::semantics::{order_key_f32, order_key_f64};
use kiln_ir::{DType, Scalar};
use kiln_runtime::{Storage, Tensor};

/// Raw bits of a scalar (zero-extended to 64 bits).
pub(crate) fn scalar_raw(s: Scalar) -> u64 {
    let b = s.to_le_bytes();
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(&b);
    u64::from_le_bytes(w)
}

/// The elements of `t` in row-major order as raw bits.
pub(crate) fn raw_elements(t: &Tensor) -> Vec<u64> {
    let s = t.contiguous_storage();
    match &s {
        Storage::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Storage::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        Storage::U8(v) | Storage::Bool(v) => v.iter().map(|&x| x as u64).collect(),
        Storage::I8(v) => v.iter().map(|&x| x as u8 as u64).collect(),
        Storage::U16(v) => v.iter().map(|&x| x as u64).collect(),
        Storage::I16(v) => v.iter().map(|&x| x as u16 as u64).collect(),
        Storage::I32(v) => v.iter().map(|&x| x as u32 as u64).collect(),
        Storage::U32(v) => v.iter().map(|&x| x as u64).collect(),
    }
}

/// Storage of `dtype` holding raw bits `raw` (each truncated to the dtype's width).
pub(crate) fn storage_from_raw(dtype: DType, raw: &[u64]) -> Storage {
    match dtype {
        DType::F32 => Storage::F32(raw.iter().map(|&r| f32::from_bits(r as u32)).collect()),
        DType::F64 => Storage::F64(raw.iter().map(|&r| f64::from_bits(r)).collect()),
        DType::U8 => Storage::U8(raw.iter().map(|&r| r as u8).collect()),
        DType::Bool => Storage::Bool(raw.iter().map(|&r| (r != 0) as u8).collect()),
        DType::I8 => Storage::I8(raw.iter().map(|&r| r as u8 as i8).collect()),
        DType::U16 => Storage::U16(raw.iter().map(|&r| r as u16).collect()),
        DType::I16 => Storage::I16(raw.iter().map(|&r| r as u16 as i16).collect()),
        DType::I32 => Storage::I32(raw.iter().map(|&r| r as u32 as i32).collect()),
        DType::U32 => Storage::U32(raw.iter().map(|&r| r as u32).collect()),
    }
}

/// True when `raw` is a NaN of `dtype` (never for integers).
#[inline]
pub(crate) fn is_nan(dtype: DType, raw: u64) -> bool {
    match dtype {
        DType::F32 => (raw as u32) & 0x7fff_ffff > 0x7f80_0000,
        DType::F64 => raw & 0x7fff_ffff_ffff_ffff > 0x7ff0_0000_0000_0000,
        _ => false,
    }
}

/// True when `raw` is NaN or ±Inf of a float dtype (never for integers).
#[inline]
pub(crate) fn is_non_finite(dtype: DType, raw: u64) -> bool {
    match dtype {
        DType::F32 => (raw as u32) & 0x7fff_ffff >= 0x7f80_0000,
        DType::F64 => raw & 0x7fff_ffff_ffff_ffff >= 0x7ff0_0000_0000_0000,
        _ => false,
    }
}

/// The order key of non-NaN `raw`: unsigned, monotone in kiln's order (see the header).
#[inline]
pub(crate) fn order_key(dtype: DType, raw: u64) -> u64 {
    match dtype {
        DType::Bool | DType::U8 | DType::U16 | DType::U32 => raw,
        DType::I8 => raw ^ 0x80,
        DType::I16 => raw ^ 0x8000,
        DType::I32 => raw ^ 0x8000_0000,
        DType::F32 => (order_key_f32(raw as u32) as u32 ^ 0x8000_0000) as u64,
        DType::F64 => order_key_f64(raw) as u64 ^ (1 << 63),
    }
}

/// The raw bits whose order key is `key` (the inverse of [`order_key`]).
#[inline]
pub(crate) fn key_raw(dtype: DType, key: u64) -> u64 {
    match dtype {
        DType::Bool | DType::U8 | DType::U16 | DType::U32 => key,
        DType::I8 => key ^ 0x80,
        DType::I16 => key ^ 0x8000,
        DType::I32 => key ^ 0x8000_0000,
        // order_key_f32 is an involution on the bits.
        DType::F32 => order_key_f32(key as u32 ^ 0x8000_0000) as u32 as u64,
        DType::F64 => order_key_f64(key ^ (1 << 63)) as u64,
    }
}

/// The number of distinct keys of a dtype whose keys index a histogram directly (8- and
/// 16-bit data and bool), `None` for the wider dtypes (their keys are ranked per plane).
pub(crate) fn direct_bins(dtype: DType) -> Option<usize> {
    match dtype {
        DType::Bool => Some(2),
        DType::U8 | DType::I8 => Some(256),
        DType::U16 | DType::I16 => Some(65536),
        _ => None,
    }
}

/// The canonical NaN of a float dtype as raw bits (0 for integers, which have no NaN).
pub(crate) fn canonical_nan(dtype: DType) -> u64 {
    match dtype {
        DType::F32 => kiln_ir::semantics::CANONICAL_NAN_F32 as u64,
        DType::F64 => kiln_ir::semantics::CANONICAL_NAN_F64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_order_floats() {
        let vals = [
            f32::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-45,
            3.0,
            f32::INFINITY,
        ];
        let keys: Vec<u64> = vals
            .iter()
            .map(|v| order_key(DType::F32, v.to_bits() as u64))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        for (v, k) in vals.iter().zip(&keys) {
            assert_eq!(key_raw(DType::F32, *k), v.to_bits() as u64);
        }
        let k0 = order_key(DType::F64, (-0.0f64).to_bits());
        let k1 = order_key(DType::F64, 0.0f64.to_bits());
        assert!(k0 < k1);
        assert_eq!(key_raw(DType::F64, k0), (-0.0f64).to_bits());
    }

    #[test]
    fn keys_order_signed_ints() {
        let v: Vec<u64> = [-128i8, -1, 0, 127]
            .iter()
            .map(|&x| order_key(DType::I8, x as u8 as u64))
            .collect();
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
        let v: Vec<u64> = [i32::MIN, -1, 0, i32::MAX]
            .iter()
            .map(|&x| order_key(DType::I32, x as u32 as u64))
            .collect();
        assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
        assert_eq!(key_raw(DType::I16, order_key(DType::I16, 0x8001)), 0x8001);
    }
}
