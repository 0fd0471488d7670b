//! Criterion benches of the fused kernels, for regression tracking (small sizes so that
//! `cargo bench` is quick). The side-by-side comparison with peers is `kiln bench` and
//! `benches/peers/compare.py`; see docs/BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kiln::bench::{generate, Workload};
use kiln::ir::DType;
use kiln::Engine;

/// A benched kernel: label, operator, parameters.
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// The benched kernels, all on a 1x1x512x512 f32 image.
const CASES: &[Case] = &[
    ("median_blur_3x3", "median_blur", &[("k", "3")]),
    ("median_blur_5x5", "median_blur", &[("k", "5")]),
    ("grey_opening_3x3", "grey_opening", &[("size", "3")]),
    ("grey_opening_15x15", "grey_opening", &[("size", "15")]),
];

fn params(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn workload(op: &str, p: &[(&str, &str)]) -> Workload {
    Workload {
        name: op.into(),
        op: op.into(),
        params: params(p),
        dtype: DType::F32,
        shape: vec![1, 1, 512, 512],
        seed: 1,
    }
}

fn run_kernels(c: &mut Criterion) {
    let mut group = c.benchmark_group("fused_512");
    group.sample_size(20);
    for &(label, op, p) in CASES {
        let w = workload(op, p);
        let graph = kiln::ops::build_op(op, &w.params, &w.tensor_type()).expect("op builds");
        let input = generate(w.dtype, &w.shape, w.seed).expect("input");
        for threads in [1, 2] {
            let engine = Engine::new().with_threads(threads);
            let compiled = engine.compile(&graph).expect("compiles");
            group.bench_with_input(BenchmarkId::new(label, threads), &input, |b, x| {
                b.iter(|| {
                    compiled
                        .run(&engine, std::slice::from_ref(x))
                        .expect("runs")
                })
            });
        }
    }
    group.finish();
}

fn compile_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group.sample_size(10);
    for &(label, op, p) in CASES {
        let w = workload(op, p);
        let graph = kiln::ops::build_op(op, &w.params, &w.tensor_type()).expect("op builds");
        // A fresh engine per iteration: no kernel-cache hits, the full passes + Cranelift.
        group.bench_function(label, |b| {
            b.iter(|| Engine::new().compile(&graph).expect("compiles"))
        });
    }
    group.finish();
}

criterion_group!(benches, run_kernels, compile_time);
criterion_main!(benches);
