//! Measured accuracy of kiln's `exp` and `log` (`kiln_ir::math`) on a sample: about a
//! million f32 inputs spread evenly over all 2^32 bit patterns, and f64 samples (random in
//! exp's normal range, random positive bit patterns for log, and inputs next to 1), against
//! the double-double reference `kiln_ir::math_ref`. Each must stay below 1 ulp; the full
//! f32 sweep is `examples/math_ulp.rs` (numbers in SEMANTICS.md).
use kiln_ir::math::{exp_f32, exp_f64, log_f32, log_f64};
use kiln_ir::math_ref::{exp_dd, log_dd, ulp_error};

/// Largest f32 error in ulps over inputs `start, start + step, ...`, for `f` against
/// `reference`; results beyond f32's range must be +inf.
fn f32_max_error(f: fn(f32) -> f32, exp: bool) -> (f64, u32) {
    let mut worst = (0.0f64, 0u32);
    let step = 4099u64;
    let mut b = 0u64;
    while b < 1 << 32 {
        let x = f32::from_bits(b as u32);
        let y = f(x);
        b += step;
        if x.is_nan() {
            assert_eq!(y.to_bits(), 0x7fc0_0000, "NaN in, canonical NaN out");
            continue;
        }
        let xd = x as f64;
        let e = if exp {
            if xd > 89.0 {
                assert_eq!(y, f32::INFINITY, "exp({x})");
                continue;
            }
            if xd < -104.0 {
                assert_eq!(y.to_bits(), 0, "exp({x})");
                continue;
            }
            let r = exp_dd(xd);
            if r.hi > f32::MAX as f64 * (1.0 + f32::EPSILON as f64 / 4.0) {
                assert_eq!(y, f32::INFINITY, "exp({x})");
                continue;
            }
            ulp_error(y as f64, r, 23, -126)
        } else {
            if xd < 0.0 || xd.is_infinite() || xd == 0.0 {
                continue; // specials: tests in math.rs
            }
            ulp_error(y as f64, log_dd(xd), 23, -126)
        };
        if e > worst.0 {
            worst = (e, x.to_bits());
        }
    }
    worst
}

#[test]
fn f32_exp_and_log_below_one_ulp_on_a_million_inputs() {
    let (e, at) = f32_max_error(exp_f32, true);
    eprintln!("exp f32: max {e:.4} ulp at {:e}", f32::from_bits(at));
    assert!(e < 1.0, "exp f32: {e} ulp at bits {at:#x}");
    let (e, at) = f32_max_error(log_f32, false);
    eprintln!("log f32: max {e:.4} ulp at {:e}", f32::from_bits(at));
    assert!(e < 1.0, "log f32: {e} ulp at bits {at:#x}");
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn f64_exp_and_log_below_one_ulp_on_samples() {
    let mut r = Lcg(0x5eed);
    let mut worst = 0.0f64;
    for i in 0..100_000 {
        let x = if i % 2 == 0 {
            -670.0 + 1379.7 * r.unit()
        } else {
            // small magnitudes, every exponent down to 2^-60
            let m = r.unit() * 2.0 - 1.0;
            m * 2f64.powi(-((r.next() % 60) as i32))
        };
        let e = ulp_error(exp_f64(x), exp_dd(x), 52, -1022);
        assert!(e < 1.0, "exp f64({x:e}): {e} ulp");
        worst = worst.max(e);
    }
    eprintln!("exp f64: max {worst:.4} ulp");
    let mut worst = 0.0f64;
    for i in 0..100_000 {
        let x = if i % 2 == 0 {
            f64::from_bits(r.next() & 0x7fef_ffff_ffff_ffff)
        } else {
            1.0 + (r.unit() - 0.5) * 2f64.powi(-((r.next() % 50) as i32))
        };
        if x == 0.0 {
            continue;
        }
        let e = ulp_error(log_f64(x), log_dd(x), 52, -1022);
        assert!(e < 1.0, "log f64({x:e}): {e} ulp");
        worst = worst.max(e);
    }
    eprintln!("log f64: max {worst:.4} ulp");
}
