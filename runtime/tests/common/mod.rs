//! Test data shared by the runtime's integration tests: the special f32 values every
//! nasty input mixes in, and the deterministic generator the inputs are drawn from.

/// Special f32 values every input mixes in.
pub const SPECIAL_F32: [u32; 12] = [
    0x7fc0_0000, // canonical NaN
    0x7fc0_1234, // quiet NaN with payload
    0xffc0_0001, // negative NaN with payload
    0x7f80_0001, // signalling NaN
    0x7f80_0000, // +Inf
    0xff80_0000, // -Inf
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x0000_0001, // smallest subnormal
    0x8040_0000, // negative subnormal
    0x3f80_0000, // 1.0 (ties)
    0x3f80_0000,
];

/// A 64-bit LCG giving 31-bit draws; the same seed gives the same data in every test.
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed` (spread and made odd, so nearby seeds differ).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next draw, in `0..2^31`.
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// f32 data for window tests; with `specials`, NaN payloads, infinities, signed zeros and
/// subnormals in about 1 of 4 elements; ties either way. (Not every test binary uses it.)
#[allow(dead_code)]
pub fn window_data(shape: &[usize], seed: u64, specials: bool) -> kiln_runtime::Tensor {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let v = (0..n)
        .map(|_| {
            let k = rng.next();
            match k % 8 {
                0 | 1 if specials => f32::from_bits(SPECIAL_F32[(k / 8) as usize % 12]),
                2 | 3 => ((k / 8) % 5) as f32 - 2.0,
                _ => (k % 20011) as f32 * 0.013 - 100.0,
            }
        })
        .collect();
    kiln_runtime::Tensor::from_storage(kiln_runtime::Storage::F32(v), shape).unwrap()
}
