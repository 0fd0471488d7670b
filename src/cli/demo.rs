//! `kiln demo`: the README's main job on built-in generated data.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

use super::CliError;

/// Arguments of `kiln demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Image side length (the image is `1 x 1 x size x size`).
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Fraction of pixels set to NaN, and separately to ±Inf.
    #[arg(long, default_value_t = 0.001)]
    special_fraction: f64,
    /// Seed of the generated image.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// A small deterministic generator (splitmix64), so the demo needs no data files.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A `1 x 1 x n x n` f32 image: uniform noise with NaN and ±Inf sprinkled in.
pub fn demo_image(n: usize, special: f64, seed: u64) -> Tensor {
    let mut rng = SplitMix(seed);
    let data = (0..n * n)
        .map(|_| {
            let u = rng.next_f64();
            if u < special {
                f32::NAN
            } else if u < 2.0 * special {
                if rng.next_u64() & 1 == 0 {
                    f32::INFINITY
                } else {
                    f32::NEG_INFINITY
                }
            } else {
                rng.next_f64() as f32
            }
        })
        .collect();
    Tensor::from_f32(data, &[1, 1, n, n]).expect("shape matches data")
}

/// Median of a list of timings in milliseconds.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `kiln demo`.
pub fn run(a: DemoArgs) -> Result<ExitCode, CliError> {
    if a.size == 0 {
        return Err(CliError::Usage("--size must be at least 1".into()));
    }
    let image = demo_image(a.size, a.special_fraction, a.seed);
    let ty = TensorType {
        dtype: DType::F32,
        shape: image.shape().to_vec(),
    };
    // (label, operator, parameter name, parameter value)
    let cases = [
        ("median 3x3", "median_blur", "k", "3"),
        ("median 5x5", "median_blur", "k", "5"),
        ("grey_opening 3x3", "grey_opening", "size", "3"),
    ];
    println!(
        "kiln demo: 1x1x{0}x{0} f32, {1:.2}% NaN, {1:.2}% ±Inf, {2} threads",
        a.size,
        a.special_fraction * 100.0,
        rayon::current_num_threads()
    );
    println!(
        "{:<18} {:>9} {:>9} {:>11} {:>10} {:>10} {:>8}  bit-exact",
        "op", "kernels", "fused", "compile ms", "eager ms", "fused ms", "speedup"
    );
    let mut all_exact = true;
    for (label, op, name, value) in cases {
        let graph = kiln::ops::build_op(op, &[(name.to_string(), value.to_string())], &ty)?;
        let engine = Engine::new();
        let compiled = engine.compile(&graph)?;

        let t = Instant::now();
        let eager_out = eager::run(&graph, std::slice::from_ref(&image))?;
        let eager_ms = t.elapsed().as_secs_f64() * 1e3;

        let mut fused_out = compiled.run(&engine, std::slice::from_ref(&image))?;
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < 5 || (start.elapsed().as_secs_f64() < 0.5 && times.len() < 200) {
            let t = Instant::now();
            fused_out = compiled.run(&engine, std::slice::from_ref(&image))?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let fused_ms = median(times);
        let diff = first_difference(&eager_out[0], &fused_out[0]);
        let verdict = match &diff {
            None => "yes".to_string(),
            Some(d) => {
                all_exact = false;
                format!("NO: first difference at {d}")
            }
        };
        println!(
            "{:<18} {:>9} {:>9} {:>11.2} {:>10.1} {:>10.2} {:>7.1}x  {}",
            label,
            graph.nodes.len() - graph.inputs.len(),
            compiled.kernel_count(),
            compiled.compile_ms,
            eager_ms,
            fused_ms,
            eager_ms / fused_ms,
            verdict
        );
    }
    println!("kernels: eager ops before fusion; fused: kernels after fusion. fused ms: median of repeated warm runs.");
    if all_exact {
        println!("bit-exact: yes");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("bit-exact: NO");
        Ok(ExitCode::from(1))
    }
}
