//! Strided inputs: a median 3x3 on a contiguous image, on a transposed view of it and on
//! the channels of an interleaved (HWC, channels-last) image, checked bit for bit against
//! the contiguous run, and timed (median of alternating `run_into` calls after a warm-up).
//!
//! Run with `cargo run --release --example strided_inputs [SIDE]` (default 2048).

use std::time::{Duration, Instant};

use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{CompiledGraph, Engine, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let side: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 2048,
    };
    let n = side;
    let value = |i: usize| ((i as u64).wrapping_mul(2654435761) % 1000) as f32;

    // One plane, and the same values stored column by column.
    let plane = Tensor::from_f32((0..n * n).map(value).collect(), &[1, 1, n, n])?;
    let transposed = plane.with_memory_order(&[0, 1, 3, 2])?;
    // Three channels interleaved per pixel (as OpenCV and PIL store colour images), viewed
    // as [1, 3, H, W] without copying, and the same values as three contiguous planes.
    let hwc = Tensor::from_f32((0..3 * n * n).map(value).collect(), &[1, n, n, 3])?;
    let channels_last = hwc.permuted(&[0, 3, 1, 2])?;
    let planes = channels_last.to_contiguous();

    for threads in [1, 2] {
        let engine = Engine::new().with_threads(threads);
        for (what, dense, view) in [
            ("transposed", &plane, &transposed),
            ("channels-last", &planes, &channels_last),
        ] {
            let ty = TensorType {
                dtype: DType::F32,
                shape: dense.shape().to_vec(),
            };
            let graph = kiln::ops::build_op("median_blur", &[("k".into(), "3".into())], &ty)?;
            let compiled = engine.compile(&graph)?;
            compiled.wait_for_upgrades(Duration::from_secs(10));
            let want = compiled.run(&engine, std::slice::from_ref(dense))?;
            let got = compiled.run(&engine, std::slice::from_ref(view))?;
            if let Some(d) = first_difference(&want[0], &got[0]) {
                return Err(format!("{what} view differs from the contiguous run: {d}").into());
            }
            let (t_dense, t_view) = time_pair(&engine, &compiled, dense, view, want)?;
            println!(
                "median 3x3 {:?}, {threads} thread(s): contiguous {t_dense:.3} ms, \
                 {what} {t_view:.3} ms (same bits)",
                dense.shape()
            );
        }
    }
    Ok(())
}

/// Median milliseconds of `compiled` on `a` and on `b`, alternating, after a warm-up.
fn time_pair(
    engine: &Engine,
    compiled: &CompiledGraph,
    a: &Tensor,
    b: &Tensor,
    mut outs: Vec<Tensor>,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..35 {
        for (k, input) in [a, b].into_iter().enumerate() {
            let start = Instant::now();
            outs = compiled.run_into(engine, std::slice::from_ref(input), outs)?;
            if round >= 5 {
                times[k].push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok((median(&mut times[0]), median(&mut times[1])))
}
