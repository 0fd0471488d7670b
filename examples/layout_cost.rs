//! How much a non-contiguous input costs the fused path: median 3x3 on a 2048² image given
//! contiguous, transposed (last two axes swapped in memory) and channels-last.
//!
//! Run with `cargo run --release --example layout_cost`. Same process, warm-up, median of
//! repeated runs.

use std::time::Instant;

use kiln::ir::{DType, TensorType};
use kiln::{Engine, Tensor};

fn main() {
    let n = 2048;
    let shape = [1, 3, n, n];
    let data: Vec<f32> = (0..3 * n * n)
        .map(|i| ((i as u64).wrapping_mul(2654435761) % 1000) as f32)
        .collect();
    let x = Tensor::from_f32(data, &shape).expect("shape");
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape.to_vec(),
    };
    let g = kiln::ops::build_op("median_blur", &[("k".into(), "3".into())], &ty).expect("op");
    let engine = Engine::new();
    let compiled = engine.compile(&g).expect("compiles");
    for (name, order) in [
        ("contiguous", [0, 1, 2, 3]),
        ("transposed", [0, 1, 3, 2]),
        ("channels-last", [0, 2, 3, 1]),
    ] {
        let view = x.with_memory_order(&order).expect("permutation");
        let run = || {
            compiled
                .run(&engine, std::slice::from_ref(&view))
                .expect("runs")
        };
        run();
        let mut t: Vec<f64> = (0..15)
            .map(|_| {
                let s = Instant::now();
                run();
                s.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        t.sort_by(f64::total_cmp);
        println!("{name:<14} {:>8.2} ms", t[t.len() / 2]);
    }
}
