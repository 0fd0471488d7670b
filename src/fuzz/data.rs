//! Input data for fuzz cases: a mix of distributions per input (uniform, heavy ties, special
//! values; for u8/bool all-zeros, all-ones and random), and the conversion to strided tensors.

use kiln_ir::{DType, Scalar};
use kiln_runtime::{Storage, Tensor};

use super::rng::Rng;
use super::FuzzError;

/// One graph input: its type, memory layout and values.
#[derive(Clone, Debug, PartialEq)]
pub struct InputData {
    /// Element type.
    pub dtype: DType,
    /// Logical shape `[B, C, S1..Sd]`.
    pub shape: Vec<usize>,
    /// Memory order: `order[0]` is the outermost axis in memory, the last entry the
    /// innermost (identity = contiguous; see [`Tensor::with_memory_order`]).
    pub order: Vec<usize>,
    /// Values in logical row-major order.
    pub data: Vec<Scalar>,
}

impl InputData {
    /// The tensor this input describes: values laid out in `order`.
    pub fn to_tensor(&self) -> Result<Tensor, FuzzError> {
        let n: usize = self.shape.iter().product();
        if n != self.data.len() {
            return Err(FuzzError::Format(format!(
                "input of shape {:?} needs {n} values, has {}",
                self.shape,
                self.data.len()
            )));
        }
        let mut st = Storage::zeros(self.dtype, n);
        for (i, &s) in self.data.iter().enumerate() {
            if s.dtype() != self.dtype {
                return Err(FuzzError::Format(format!(
                    "value {s} in a {} input",
                    self.dtype
                )));
            }
            st.set(i, s);
        }
        let t = Tensor::from_storage(st, &self.shape)?;
        if self.order.iter().enumerate().all(|(i, &o)| i == o)
            && self.order.len() == self.shape.len()
        {
            Ok(t)
        } else {
            Ok(t.with_memory_order(&self.order)?)
        }
    }

    /// Human name of the layout (`contiguous`, `channels-last`, `transposed` or the order).
    pub fn layout_name(&self) -> String {
        let r = self.shape.len();
        let ident: Vec<usize> = (0..r).collect();
        if self.order == ident {
            return "contiguous".into();
        }
        let mut cl: Vec<usize> = vec![0];
        cl.extend(2..r);
        cl.push(1);
        if self.order == cl {
            return "channels-last".into();
        }
        format!("{:?}", self.order)
    }
}

/// A random memory order for a tensor of rank `rank`: contiguous (most often), channels-last,
/// or two spatial axes swapped (a transposed view).
pub fn random_order(rng: &mut Rng, rank: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rank).collect();
    match rng.weighted(&[6, 2, 2]) {
        0 => {}
        1 => {
            order.remove(1);
            order.push(1);
        }
        _ => {
            if rank >= 4 {
                let a = rng.range(2, rank - 1);
                let mut b = rng.range(2, rank - 1);
                if a == b {
                    b = if a == rank - 1 { a - 1 } else { a + 1 };
                }
                order.swap(a, b);
            } else {
                // One spatial dim: swap it with the channel axis instead.
                order.swap(1, 2);
            }
        }
    }
    order
}

/// A random "special" f64: NaN with a random payload and sign, ±Inf, ±0, a subnormal, ±MAX,
/// ±MIN_POSITIVE, or ±1.
fn special_f64(rng: &mut Rng) -> f64 {
    let sign = if rng.chance(0.5) { -1.0 } else { 1.0 };
    match rng.below(8) {
        0 | 1 => {
            let payload = rng.next_u64() & ((1u64 << 51) - 1);
            let quiet = if rng.chance(0.8) { 1u64 << 51 } else { 0 };
            let payload = if quiet == 0 && payload == 0 {
                1
            } else {
                payload
            };
            let s = if sign < 0.0 { 1u64 << 63 } else { 0 };
            f64::from_bits(s | 0x7ff0_0000_0000_0000 | quiet | payload)
        }
        2 => sign * f64::INFINITY,
        3 => sign * 0.0,
        4 => sign * f64::from_bits(rng.range(1, 1 << 20) as u64),
        5 => sign * f64::MAX,
        6 => sign * f64::MIN_POSITIVE,
        _ => sign,
    }
}

/// The same kind of special value for f32 (payloads of f32 NaNs are drawn in 22 bits).
fn special_f32(rng: &mut Rng) -> f32 {
    let neg = rng.chance(0.5);
    let sign = if neg { -1.0f32 } else { 1.0 };
    match rng.below(8) {
        0 | 1 => {
            let payload = (rng.next_u64() as u32) & ((1 << 22) - 1);
            let quiet = if rng.chance(0.8) { 1u32 << 22 } else { 0 };
            let payload = if quiet == 0 && payload == 0 {
                1
            } else {
                payload
            };
            f32::from_bits(((neg as u32) << 31) | 0x7f80_0000 | quiet | payload)
        }
        2 => sign * f32::INFINITY,
        3 => sign * 0.0,
        4 => sign * f32::from_bits(rng.range(1, 1 << 20) as u32),
        5 => sign * f32::MAX,
        6 => sign * f32::MIN_POSITIVE,
        _ => sign,
    }
}

/// A plain finite value: small integers or halves often (to make ties and exact sums), else a
/// uniform value in [-8, 8).
fn uniform_f64(rng: &mut Rng) -> f64 {
    if rng.chance(0.3) {
        rng.range_i64(-8, 8) as f64 * if rng.chance(0.5) { 0.5 } else { 1.0 }
    } else {
        rng.unit() * 16.0 - 8.0
    }
}

/// One random value of `dtype` drawn from a generic mix (used for constants and border values).
pub fn random_scalar(rng: &mut Rng, dtype: DType) -> Scalar {
    match dtype {
        DType::F32 => Scalar::f32(if rng.chance(0.25) {
            special_f32(rng)
        } else {
            uniform_f64(rng) as f32
        }),
        DType::F64 => Scalar::f64(if rng.chance(0.25) {
            special_f64(rng)
        } else {
            uniform_f64(rng)
        }),
        DType::U8 => {
            let r = rng.next_u64() as u8;
            Scalar::U8(*rng.pick(&[0u8, 1, 2, 127, 128, 254, 255, r]))
        }
        DType::Bool => Scalar::Bool(rng.chance(0.5)),
        d => {
            let (lo, hi) = d.int_range().expect("integer dtype");
            let r = rng.next_u64() as i64;
            let v = *rng.pick(&[lo, lo + 1, -1, 0, 1, 2, hi - 1, hi, r]);
            Scalar::wrap_int(d, v).expect("integer dtype")
        }
    }
}

/// `n` values of `dtype` from a distribution chosen at random.
pub fn random_data(rng: &mut Rng, dtype: DType, n: usize) -> Vec<Scalar> {
    match dtype {
        DType::F32 | DType::F64 => {
            let one = |rng: &mut Rng, special: f64| -> Scalar {
                if rng.chance(special) {
                    match dtype {
                        DType::F32 => Scalar::f32(special_f32(rng)),
                        _ => Scalar::f64(special_f64(rng)),
                    }
                } else {
                    Scalar::from_f64(dtype, uniform_f64(rng))
                }
            };
            match rng.weighted(&[3, 3, 3, 2]) {
                // Uniform, with a few specials sprinkled in.
                0 => {
                    let p = if rng.chance(0.5) { 0.0 } else { 0.02 };
                    (0..n).map(|_| one(rng, p)).collect()
                }
                // Non-negative like images (the integer-pick specialisation's inputs), with
                // a few specials sometimes.
                3 => {
                    let p = if rng.chance(0.5) { 0.0 } else { 0.01 };
                    (0..n)
                        .map(|_| match one(rng, p) {
                            Scalar::F32(b) if rng.chance(1.0 - p) => Scalar::F32(b & 0x7fff_ffff),
                            Scalar::F64(b) if rng.chance(1.0 - p) => {
                                Scalar::F64(b & 0x7fff_ffff_ffff_ffff)
                            }
                            s => s,
                        })
                        .collect()
                }
                // Heavy ties: three distinct values, specials included sometimes.
                1 => {
                    let pool: Vec<Scalar> = (0..3).map(|_| one(rng, 0.3)).collect();
                    (0..n).map(|_| *rng.pick(&pool)).collect()
                }
                // Specials-heavy.
                _ => {
                    let p = 0.1 + rng.unit() * 0.5;
                    (0..n).map(|_| one(rng, p)).collect()
                }
            }
        }
        DType::U8 => match rng.weighted(&[1, 1, 4, 2]) {
            0 => vec![Scalar::U8(0); n],
            1 => vec![Scalar::U8(255); n],
            2 => (0..n).map(|_| Scalar::U8(rng.next_u64() as u8)).collect(),
            _ => {
                let pool = [rng.next_u64() as u8, 0, 255];
                (0..n).map(|_| Scalar::U8(*rng.pick(&pool))).collect()
            }
        },
        DType::Bool => match rng.weighted(&[1, 1, 4]) {
            0 => vec![Scalar::Bool(false); n],
            1 => vec![Scalar::Bool(true); n],
            _ => {
                let p = rng.unit();
                (0..n).map(|_| Scalar::Bool(rng.chance(p))).collect()
            }
        },
        // The other integers: constant extremes, uniform bit patterns, small values around
        // zero (where signed and unsigned orders differ most visibly), or extremes mixed
        // with zero and one random value (ties and wrap-around in arithmetic).
        d => {
            let (lo, hi) = d.int_range().expect("integer dtype");
            let w = |v: i64| Scalar::wrap_int(d, v).expect("integer dtype");
            match rng.weighted(&[1, 1, 4, 2, 2]) {
                0 => vec![w(lo); n],
                1 => vec![w(hi); n],
                2 => (0..n).map(|_| w(rng.next_u64() as i64)).collect(),
                3 => (0..n).map(|_| w(rng.range_i64(-4, 4))).collect(),
                _ => {
                    let pool = [lo, hi, 0, -1, rng.next_u64() as i64];
                    (0..n).map(|_| w(*rng.pick(&pool))).collect()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_mixes_contain_specials_and_ties() {
        let mut rng = Rng::new(3);
        let (mut nan_payloads, mut neg_zero, mut inf, mut subnormal) = (0, 0, 0, 0);
        for _ in 0..200 {
            for s in random_data(&mut rng, DType::F32, 64) {
                let Scalar::F32(b) = s else { panic!("dtype") };
                let v = f32::from_bits(b);
                if v.is_nan() && b != 0x7fc0_0000 {
                    nan_payloads += 1;
                }
                if b == 0x8000_0000 {
                    neg_zero += 1;
                }
                if v.is_infinite() {
                    inf += 1;
                }
                if v.is_subnormal() {
                    subnormal += 1;
                }
            }
        }
        assert!(nan_payloads > 0 && neg_zero > 0 && inf > 0 && subnormal > 0);
        let mut all_zero = false;
        let mut all_one = false;
        for _ in 0..100 {
            let d = random_data(&mut rng, DType::Bool, 16);
            all_zero |= d.iter().all(|&s| s == Scalar::Bool(false));
            all_one |= d.iter().all(|&s| s == Scalar::Bool(true));
        }
        assert!(all_zero && all_one);
    }

    #[test]
    fn layouts_keep_logical_values() {
        let mut rng = Rng::new(5);
        for rank in 3..=6 {
            for _ in 0..10 {
                let shape: Vec<usize> = (0..rank).map(|_| rng.range(1, 4)).collect();
                let n = shape.iter().product();
                let input = InputData {
                    dtype: DType::F64,
                    order: random_order(&mut rng, rank),
                    data: random_data(&mut rng, DType::F64, n),
                    shape,
                };
                let t = input.to_tensor().unwrap();
                assert_eq!(t.shape(), &input.shape[..]);
                assert_eq!(t.to_scalars(), input.data);
            }
        }
    }
}
