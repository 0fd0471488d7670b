//! Deterministic benchmark inputs and checksums that numpy reproduces exactly.
//!
//! The element at flat (row-major) index `i` of a workload with seed `s` is derived from
//! `h = hash32(i mod 2^32, s)`:
//! - f32 / f64: `(h >> 8) * 2^-24`, in `[0, 1)`, exact (24 significant bits), never NaN;
//! - u8: `h >> 24`;
//! - bool: `(h >> 8) < BOOL_THRESHOLD` (about 90% true, so erosions keep structure).
//!
//! `benches/peers/compare.py` has the same formulas in numpy `uint32` arithmetic.

use kiln_ir::DType;
use rayon::prelude::*;

use crate::{RuntimeError, Tensor};

/// `(h >> 8) < BOOL_THRESHOLD` gives `true` (0.9 · 2^24, rounded down).
pub const BOOL_THRESHOLD: u32 = 15_099_494;

/// A 32-bit integer hash of an element index and a seed (all arithmetic modulo 2^32).
pub fn hash32(i: u32, seed: u32) -> u32 {
    let mut h = i.wrapping_mul(0x9E37_79B1) ^ seed.wrapping_mul(0x85EB_CA77);
    h ^= h >> 16;
    h = h.wrapping_mul(0x7FEB_352D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846C_A68B);
    h ^= h >> 16;
    h
}

/// The 24 high bits of the hash scaled to `[0, 1)`.
fn unit(h: u32) -> u32 {
    h >> 8
}

/// The generated input of a workload: a contiguous tensor of `shape`.
pub fn generate(dtype: DType, shape: &[usize], seed: u32) -> Result<Tensor, RuntimeError> {
    let n: usize = shape.iter().product();
    let h = |i: usize| hash32(i as u32, seed);
    match dtype {
        DType::F32 => {
            let v = (0..n)
                .into_par_iter()
                .map(|i| unit(h(i)) as f32 * (1.0 / 16_777_216.0))
                .collect();
            Tensor::from_f32(v, shape)
        }
        DType::F64 => {
            let v = (0..n)
                .into_par_iter()
                .map(|i| unit(h(i)) as f64 * (1.0 / 16_777_216.0))
                .collect();
            Tensor::from_f64(v, shape)
        }
        DType::U8 => {
            let v = (0..n).into_par_iter().map(|i| (h(i) >> 24) as u8).collect();
            Tensor::from_u8(v, shape)
        }
        DType::Bool => {
            let v = (0..n)
                .into_par_iter()
                .map(|i| unit(h(i)) < BOOL_THRESHOLD)
                .collect();
            Tensor::from_bool(v, shape)
        }
        // The other integer dtypes: the hash's high bits reduced to the dtype (wrapping),
        // so every bit pattern of the width occurs.
        d => {
            let ints: Vec<i64> = (0..n).into_par_iter().map(|i| h(i) as i64).collect();
            let mut st = kiln_runtime::Storage::zeros(d, n);
            for (i, v) in ints.into_iter().enumerate() {
                let sh = 32 - 8 * d.size_bytes().min(4) as u32;
                let s = kiln_ir::Scalar::wrap_int(d, v >> sh).expect("integer dtype");
                st.set(i, s);
            }
            Tensor::from_storage(st, shape)
        }
    }
}

/// A position-weighted checksum of a tensor's elements in row-major order:
/// `sum_i bits(x_i) * ((i & 0xFFFF) + 1)` modulo 2^64, where `bits` is the element's bit
/// pattern as an unsigned integer (u32 for f32, u64 for f64, the byte for u8 and bool).
/// numpy: `(x.view(uintN).astype(uint64) * ((arange(n) & 0xFFFF) + 1)).sum()`.
pub fn checksum(t: &Tensor) -> u64 {
    use kiln_runtime::Storage;
    let st = t.contiguous_storage();
    fn fold(bits: impl IndexedParallelIterator<Item = u64>) -> u64 {
        bits.enumerate()
            .map(|(i, b)| b.wrapping_mul((i as u64 & 0xFFFF) + 1))
            .reduce(|| 0, u64::wrapping_add)
    }
    match &st {
        Storage::F32(v) => fold(v.par_iter().map(|x| x.to_bits() as u64)),
        Storage::F64(v) => fold(v.par_iter().map(|x| x.to_bits())),
        Storage::U8(v) | Storage::Bool(v) => fold(v.par_iter().map(|&x| x as u64)),
        Storage::I8(v) => fold(v.par_iter().map(|&x| x as u8 as u64)),
        Storage::U16(v) => fold(v.par_iter().map(|&x| x as u64)),
        Storage::I16(v) => fold(v.par_iter().map(|&x| x as u16 as u64)),
        Storage::I32(v) => fold(v.par_iter().map(|&x| x as u32 as u64)),
        Storage::U32(v) => fold(v.par_iter().map(|&x| x as u64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_reference_values() {
        // Computed with Python integers (masking to 32 bits), independently of this code.
        assert_eq!(hash32(1, 0), 0x6d52_3710);
        assert_eq!(hash32(0, 1), 0xc4a0_e45c);
        assert_eq!(hash32(12345, 8), 0x2090_1200);
        assert_eq!(hash32(4_000_000_000, 3), 0xa518_3944);
        assert_ne!(hash32(1, 0), hash32(0, 1));
        assert_ne!(hash32(1, 0), hash32(2, 0));
    }

    #[test]
    fn generated_f32_is_exact_fraction_in_unit_interval() {
        let t = generate(DType::F32, &[1, 1, 17, 33], 9).unwrap();
        let v = t.to_ndarray::<f32>().unwrap();
        for (i, &x) in v.iter().enumerate() {
            let want = (hash32(i as u32, 9) >> 8) as f64 / 16_777_216.0;
            assert_eq!(x as f64, want, "element {i}");
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn generated_bool_is_mostly_true_but_not_all() {
        let t = generate(DType::Bool, &[1, 1, 64, 64], 7).unwrap();
        let v = t.to_ndarray::<bool>().unwrap();
        let ones = v.iter().filter(|&&b| b).count();
        assert!(ones > 3400 && ones < 4000, "{ones} of 4096");
    }

    #[test]
    fn generator_and_checksum_match_numpy() {
        // Values printed by benches/peers/compare.py's `checksum(generate(...))` (numpy).
        let c = |d, shape: &[usize], seed| checksum(&generate(d, shape, seed).unwrap());
        assert_eq!(c(DType::F32, &[1, 1, 8, 8], 3), 2_190_111_134_697);
        assert_eq!(c(DType::Bool, &[1, 1, 8, 8], 7), 1892);
        // 180000 elements: the weights wrap at 2^16 and the sum wraps modulo 2^64.
        assert_eq!(
            c(DType::F32, &[2, 1, 300, 300], 1),
            5_782_120_334_893_553_970
        );
    }

    #[test]
    fn checksum_is_position_weighted() {
        let a = Tensor::from_f32(vec![1.0, 2.0], &[1, 1, 1, 2]).unwrap();
        let b = Tensor::from_f32(vec![2.0, 1.0], &[1, 1, 1, 2]).unwrap();
        assert_ne!(checksum(&a), checksum(&b));
        let want = (1.0f32.to_bits() as u64) + 2 * (2.0f32.to_bits() as u64);
        assert_eq!(checksum(&a), want);
    }
}
