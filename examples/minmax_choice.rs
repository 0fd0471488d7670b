//! The experiment behind SEMANTICS.md's min/max rule: kiln's exact rule (integer total-order
//! keys, with a NaN mask unless a guard makes it dead) against Cranelift's `fmin`/`fmax`
//! (what the `FminSemantics` planted fault compiles; not exact: ±0 order and NaN bits differ).
//!
//! Run with `cargo run --release --example minmax_choice`. Same process, same inputs, warm-up,
//! median of repeated runs; the two variants alternate so drift hits both.

use std::time::Instant;

use kiln::codegen::{CompileOptions, Fault};
use kiln::ir::{DType, TensorType};
use kiln::{Engine, Tensor};

fn median_ms(engine: &Engine, graph: &kiln::ir::Graph, x: &Tensor, runs: usize) -> f64 {
    let compiled = engine.compile(graph).expect("compiles");
    for _ in 0..3 {
        compiled.run(engine, std::slice::from_ref(x)).expect("runs");
    }
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            compiled.run(engine, std::slice::from_ref(x)).expect("runs");
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let n = 1024;
    let data: Vec<f32> = (0..n * n)
        .map(|i| ((i as u64).wrapping_mul(2654435761) % 1000) as f32 / 997.0)
        .collect();
    let x = Tensor::from_f32(data, &[1, 1, n, n]).expect("shape");
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, n, n],
    };
    let exact = Engine::new();
    let fmin = Engine::with_options(CompileOptions {
        fault: Some(Fault::FminSemantics),
        ..Default::default()
    });
    println!(
        "{n}x{n} f32, {} threads; median ms of 31 runs",
        rayon::current_num_threads()
    );
    println!(
        "{:<34} {:>10} {:>10} {:>7}",
        "graph", "kiln rule", "fmin/fmax", "ratio"
    );
    let cases = [
        ("median_blur k=3 (NaN-guarded)", "median_blur", "k", "3"),
        ("median_blur k=5 (NaN-guarded)", "median_blur", "k", "5"),
        (
            "median_filter size=3 (NaN mask)",
            "median_filter",
            "size",
            "3",
        ),
        (
            "grey_erosion size=3 (NaN mask)",
            "grey_erosion",
            "size",
            "3",
        ),
    ];
    for (label, op, p, v) in cases {
        let g = kiln::ops::build_op(op, &[(p.into(), v.into())], &ty).expect("builds");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            a.push(median_ms(&exact, &g, &x, 31));
            b.push(median_ms(&fmin, &g, &x, 31));
        }
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        println!(
            "{label:<34} {:>10.3} {:>10.3} {:>7.2}",
            a[1],
            b[1],
            a[1] / b[1]
        );
    }
}
