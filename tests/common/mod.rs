//! Shared helpers for the integration tests: deterministic data with the nasty values kiln
//! must survive, and layout variants of a tensor.
#![allow(dead_code)]

use kiln::ir::{DType, Graph, TensorType};
use kiln::Tensor;

/// splitmix64: small, deterministic, good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform index below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Values that break careless kernels: NaNs with payloads and both signs, ±Inf, ±0,
/// subnormals, extremes.
pub const SPECIAL_F32: [u32; 12] = [
    0x7fc0_0000, // canonical NaN
    0xffc0_0001, // negative NaN with payload
    0x7f80_0001, // signalling NaN
    0x7f80_0000, // +Inf
    0xff80_0000, // -Inf
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x0000_0001, // smallest subnormal
    0x8000_0003, // negative subnormal
    0x7f7f_ffff, // MAX
    0xff7f_ffff, // -MAX
    0x3f80_0000, // 1.0
];

/// Kinds of generated data.
#[derive(Clone, Copy, Debug)]
pub enum Data {
    /// Uniform in [-1, 1).
    Uniform,
    /// Three distinct values: heavy ties.
    Ties,
    /// Mostly uniform with a quarter special values.
    Special,
}

/// An f32 tensor of `shape` filled per `data`.
pub fn f32_tensor(shape: &[usize], data: Data, seed: u64) -> Tensor {
    let mut rng = Rng(seed);
    let n: usize = shape.iter().product();
    let v = (0..n)
        .map(|_| match data {
            Data::Uniform => (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0,
            Data::Ties => [0.25f32, -1.5, 3.0][rng.below(3)],
            Data::Special => {
                if rng.below(4) == 0 {
                    f32::from_bits(SPECIAL_F32[rng.below(SPECIAL_F32.len())])
                } else {
                    (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
                }
            }
        })
        .collect();
    Tensor::from_f32(v, shape).unwrap()
}

/// The same tensor values as contiguous, transposed (last two axes swapped in memory) and
/// channels-last views.
pub fn layouts(t: &Tensor) -> Vec<(&'static str, Tensor)> {
    let r = t.shape().len();
    let mut out = vec![("contiguous", t.clone())];
    let mut transposed: Vec<usize> = (0..r).collect();
    transposed.swap(r - 1, r - 2);
    out.push(("transposed", t.with_memory_order(&transposed).unwrap()));
    let mut channels_last: Vec<usize> = vec![0];
    channels_last.extend(2..r);
    channels_last.push(1);
    out.push((
        "channels-last",
        t.with_memory_order(&channels_last).unwrap(),
    ));
    out
}

/// Converts a tensor of f32 to another float dtype for dtype coverage (values are exact).
pub fn dtype_name(d: DType) -> &'static str {
    d.name()
}

/// A bool tensor of `shape`: mostly true with holes (so erosion has work to do), or random.
pub fn bool_tensor(shape: &[usize], dense: bool, seed: u64) -> Tensor {
    let mut rng = Rng(seed);
    let n: usize = shape.iter().product();
    let v: Vec<bool> = (0..n)
        .map(|_| {
            if dense {
                rng.below(8) != 0
            } else {
                rng.below(2) == 0
            }
        })
        .collect();
    Tensor::from_bool(v, shape).unwrap()
}

/// The same values as an f64 tensor (exact widening; NaN payloads widened by the cast).
pub fn to_f64(t: &Tensor) -> Tensor {
    let v: Vec<f64> = t.to_scalars().iter().map(|s| s.to_f64()).collect();
    Tensor::from_f64(v, t.shape()).unwrap()
}

/// The graph of registered operator `name` with `params` on one `dtype` input of `shape`.
pub fn op_graph(name: &str, params: &[(&str, &str)], dtype: DType, shape: &[usize]) -> Graph {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ty = TensorType {
        dtype,
        shape: shape.to_vec(),
    };
    kiln::ops::build_op(name, &params, &ty).unwrap_or_else(|e| panic!("{name} {params:?}: {e}"))
}
