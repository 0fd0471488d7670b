//! Measures kiln's `exp` and `log` (`kiln::ir::math`): every f32 input (all 2^32 bit
//! patterns) against a correctly rounded reference, and a large f64 sample against the
//! double-double reference `kiln::ir::math_ref`. Prints the largest error in ulps and where,
//! and how many f32 results are not correctly rounded (error > 0.5 ulp).
//!
//! Usage: `cargo run --release --example math_ulp -- [f32_stride] [f64_samples] [threads]`
//! (defaults: stride 1 = every f32, 10_000_000 f64 samples, all cores).
//!
//! Exactness: the error of a result is `|y - ref|` in units of the last place of the
//! reference's binade (subnormal ulps below the normal range). The f32 reference is the host's
//! f64 `exp`/`ln` (within 1 f64 ulp: 2^-29 of an f32 ulp). That decides "within 0.5 ulp"
//! except when the f64 error is within 2^-27 ulp of 0.5 (a near-tie): those inputs are
//! re-measured against the double-double reference (`exp_dd`/`log_dd`, ~2^-100 relative), so
//! the count of results above 0.5 ulp is exact, i.e. the number of inputs whose result is not
//! the correctly rounded one.
//!
//! Limits: f64 exp is sampled in [-670, 709.7] (results above 2^-969, where the
//! double-double reference keeps its ~2^-90 accuracy).
use kiln::ir::math::{exp_f32, exp_f64, log_f32, log_f64};
use kiln::ir::math_ref::{exp_dd, log_dd, ulp_error, Dd};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One chunk's findings.
#[derive(Clone, Copy, Default)]
struct Worst {
    /// Largest error in ulps.
    max: f64,
    /// Input bits of the largest error.
    at: u32,
    /// Wrong overflow/underflow/special results.
    bad_specials: u64,
    /// Results more than 0.5 ulp from the exact value (not correctly rounded).
    over_half: u64,
    /// Near-ties re-measured against the double-double reference.
    near_ties: u64,
}

/// Distance from 0.5 ulp below which the f64 reference cannot decide correct rounding.
const NEAR_TIE: f64 = 1.0 / (1u64 << 27) as f64;

fn f32_chunk(lo: u64, hi: u64, stride: u64, exp: bool) -> Worst {
    let mut w = Worst::default();
    let mut b = lo;
    while b < hi {
        let x = f32::from_bits(b as u32);
        b += stride;
        let xd = x as f64;
        let (y, r) = if exp {
            (exp_f32(x), xd.exp())
        } else {
            (log_f32(x), xd.ln())
        };
        if r.is_nan() || r.is_infinite() || r > f32::MAX as f64 * (1.0 + 2f64.powi(-25)) {
            // NaN in or out, ±inf, 0 for log, overflow: exact answers required.
            let want = if r.is_nan() {
                f32::from_bits(0x7fc0_0000)
            } else if r > 0.0 {
                f32::INFINITY
            } else {
                f32::NEG_INFINITY
            };
            if y.to_bits() != want.to_bits() {
                w.bad_specials += 1;
            }
            continue;
        }
        let mut e = ulp_error(y as f64, Dd::from(r), 23, -126);
        if (e - 0.5).abs() <= NEAR_TIE {
            w.near_ties += 1;
            let dd = if exp { exp_dd(xd) } else { log_dd(xd) };
            e = ulp_error(y as f64, dd, 23, -126);
        }
        if e > 0.5 {
            w.over_half += 1;
        }
        if e > w.max {
            w.max = e;
            w.at = x.to_bits();
        }
    }
    w
}

fn main() {
    let stride = arg(1, 1).max(1);
    let samples = arg(2, 10_000_000);
    let threads = arg(
        3,
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
    )
    .max(1);
    let t0 = std::time::Instant::now();
    for (name, exp) in [("exp", true), ("log", false)] {
        let per = (1u64 << 32) / threads;
        let parts: Vec<Worst> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let lo = t * per;
                    let hi = if t + 1 == threads { 1 << 32 } else { lo + per };
                    // Start each chunk on the global stride grid.
                    let lo = lo.div_ceil(stride) * stride;
                    s.spawn(move || f32_chunk(lo, hi, stride, exp))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let bad: u64 = parts.iter().map(|p| p.bad_specials).sum();
        let over: u64 = parts.iter().map(|p| p.over_half).sum();
        let ties: u64 = parts.iter().map(|p| p.near_ties).sum();
        let w = parts
            .iter()
            .fold(Worst::default(), |a, p| if p.max > a.max { *p } else { a });
        println!(
            "{name} f32: {} inputs (stride {stride}): max error {:.4} ulp at {:e} (bits {:#010x}); \
             {over} results > 0.5 ulp (not correctly rounded; {ties} near-ties resolved in double-double); \
             wrong specials {bad}",
            (1u64 << 32) / stride,
            w.max,
            f32::from_bits(w.at),
            w.at
        );
    }
    // f64 samples.
    let per = samples / threads;
    for (name, exp) in [("exp", true), ("log", false)] {
        let parts: Vec<(f64, f64)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut st = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1).wrapping_mul(0x2545_f491);
                        let mut next = move || {
                            st = st
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            st
                        };
                        let mut w = (0.0f64, 0.0f64);
                        for i in 0..per {
                            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
                            let (y, r, x) = if exp {
                                let x = if i % 2 == 0 {
                                    -670.0 + 1379.7 * u
                                } else {
                                    (u * 2.0 - 1.0) * 2f64.powi(-((next() % 60) as i32))
                                };
                                (exp_f64(x), exp_dd(x), x)
                            } else {
                                let x = if i % 2 == 0 {
                                    f64::from_bits(next() & 0x7fef_ffff_ffff_ffff)
                                } else {
                                    1.0 + (u - 0.5) * 2f64.powi(-((next() % 50) as i32))
                                };
                                if x == 0.0 {
                                    continue;
                                }
                                (log_f64(x), log_dd(x), x)
                            };
                            let e = ulp_error(y, r, 52, -1022);
                            if e > w.0 {
                                w = (e, x);
                            }
                        }
                        w
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let w = parts
            .iter()
            .fold((0.0, 0.0), |a, p| if p.0 > a.0 { *p } else { a });
        println!(
            "{name} f64: {} samples: max error {:.4} ulp at {:e}",
            per * threads,
            w.0,
            w.1
        );
    }
    println!("{threads} threads, {:.1} s", t0.elapsed().as_secs_f64());
}
