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
    /// Where the fused kernels run: the CPU engine, or CUDA (needs a build with
    /// `--features cuda` and a GPU); both are compared bit for bit with eager on the CPU.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    backend: String,
    /// Batch size of the image (`batch x channels x size x size`).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Channels of the image.
    #[arg(long, default_value_t = 1)]
    channels: usize,
    /// Skip the eager run and the bit-exactness check (timing only, for large images).
    #[arg(long)]
    skip_eager: bool,
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
    demo_batch(1, 1, n, special, seed)
}

/// A `b x c x n x n` f32 image like [`demo_image`] (the same values for `b = c = 1`).
pub fn demo_batch(b: usize, c: usize, n: usize, special: f64, seed: u64) -> Tensor {
    let mut rng = SplitMix(seed);
    let data = (0..b * c * n * n)
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
    Tensor::from_f32(data, &[b, c, n, n]).expect("shape matches data")
}

/// Median of a list of timings in milliseconds.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// (label, operator, parameter name, parameter value) of the three demo operators.
const CASES: [(&str, &str, &str, &str); 3] = [
    ("median 3x3", "median_blur", "k", "3"),
    ("median 5x5", "median_blur", "k", "5"),
    ("grey_opening 3x3", "grey_opening", "size", "3"),
];

/// Runs `kiln demo`.
pub fn run(a: DemoArgs) -> Result<ExitCode, CliError> {
    if a.size == 0 || a.batch == 0 || a.channels == 0 {
        return Err(CliError::Usage(
            "--size, --batch and --channels must be at least 1".into(),
        ));
    }
    if a.backend == "cuda" {
        #[cfg(feature = "cuda")]
        return run_cuda(&a);
        #[cfg(not(feature = "cuda"))]
        return Err(CliError::Usage(
            "--backend cuda: built without the cuda feature".into(),
        ));
    }
    if a.backend != "cpu" {
        return Err(CliError::Usage(format!("unknown backend '{}'", a.backend)));
    }
    if a.batch != 1 || a.channels != 1 || a.skip_eager {
        return Err(CliError::Usage(
            "--batch, --channels and --skip-eager are for --backend cuda".into(),
        ));
    }
    let image = demo_image(a.size, a.special_fraction, a.seed);
    let ty = TensorType {
        dtype: DType::F32,
        shape: image.shape().to_vec(),
    };
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
    let (mut compiled_kernels, mut loaded_kernels, mut cache_dir) = (0, 0, None);
    for (label, op, name, value) in CASES {
        let graph = kiln::ops::build_op(op, &[(name.to_string(), value.to_string())], &ty)?;
        let engine = Engine::new().with_cache_from_env();
        cache_dir = engine.disk_cache().map(|d| d.dir().root().to_path_buf());
        let compiled = engine.compile(&graph)?;
        let st = engine.stats();
        compiled_kernels += st.kernels_compiled;
        loaded_kernels += st.disk_hits;

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
    match &cache_dir {
        Some(d) => println!(
            "kernel cache {}: {compiled_kernels} kernels compiled, {loaded_kernels} loaded from the cache",
            d.display()
        ),
        None => println!("kernel cache off: {compiled_kernels} kernels compiled"),
    }
    if all_exact {
        println!("bit-exact: yes");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("bit-exact: NO");
        Ok(ExitCode::from(1))
    }
}

/// `kiln demo --backend cuda`: the same three operators run as PTX kernels on GPU 0 and
/// compared bit for bit with eager on the CPU (unless `--skip-eager`). Times: the whole
/// host-to-host run, and the kernels alone with CUDA events (inputs already on the device).
#[cfg(feature = "cuda")]
fn run_cuda(a: &DemoArgs) -> Result<ExitCode, CliError> {
    use kiln::codegen::CompileOptions;
    use kiln::runtime::cuda::CudaEngine;
    use kiln::runtime::cuda_graph::CudaGraph;

    let cuda = |e: kiln::runtime::cuda::CudaError| CliError::Usage(format!("--backend cuda: {e}"));
    let engine = CudaEngine::new(0).map_err(cuda)?;
    let image = demo_batch(a.batch, a.channels, a.size, a.special_fraction, a.seed);
    let ty = TensorType {
        dtype: DType::F32,
        shape: image.shape().to_vec(),
    };
    println!(
        "kiln demo (cuda, sm_{}): {}x{}x{}x{} f32, {:.2}% NaN, {:.2}% ±Inf",
        engine.target().sm,
        a.batch,
        a.channels,
        a.size,
        a.size,
        a.special_fraction * 100.0,
        a.special_fraction * 100.0
    );
    println!(
        "{:<18} {:>7} {:>10} {:>12} {:>11}  bit-exact",
        "op", "kernels", "eager ms", "host->host", "kernel ms"
    );
    let mut all_exact = true;
    for (label, op, name, value) in CASES {
        let graph = kiln::ops::build_op(op, &[(name.to_string(), value.to_string())], &ty)?;
        let compiled = CudaGraph::compile(&graph, CompileOptions::default()).map_err(cuda)?;
        let inputs = std::slice::from_ref(&image);
        let gpu_out = compiled.run(&engine, inputs).map_err(cuda)?;
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < 3 || (start.elapsed().as_secs_f64() < 0.5 && times.len() < 50) {
            let t = Instant::now();
            compiled.run(&engine, inputs).map_err(cuda)?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let host_ms = median(times);
        let kernel_ms = median(
            compiled
                .time_kernels(&engine, inputs, 3, 20)
                .map_err(cuda)?,
        );
        let (eager_ms, verdict) = if a.skip_eager {
            ("-".to_string(), "not checked".to_string())
        } else {
            let t = Instant::now();
            let eager_out = eager::run(&graph, inputs)?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let v = match first_difference(&eager_out[0], &gpu_out[0]) {
                None => "yes".to_string(),
                Some(d) => {
                    all_exact = false;
                    format!("NO: first difference at {d}")
                }
            };
            (format!("{ms:.1}"), v)
        };
        println!(
            "{:<18} {:>7} {:>10} {:>12.3} {:>11.3}  {}",
            label,
            compiled.kernel_count(),
            eager_ms,
            host_ms,
            kernel_ms,
            verdict
        );
    }
    println!("host->host: median wall time of a whole run (upload, kernels, download); kernel ms: median of CUDA-event timings of the kernels alone.");
    if a.skip_eager {
        println!("bit-exact: not checked (--skip-eager)");
        Ok(ExitCode::SUCCESS)
    } else if all_exact {
        println!("bit-exact: yes");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("bit-exact: NO");
        Ok(ExitCode::from(1))
    }
}
