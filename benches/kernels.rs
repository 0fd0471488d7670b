//! Criterion benches of the fused kernels, for regression tracking (small sizes so that
//! `cargo bench` is quick). The side-by-side comparison with peers is `kiln bench` and
//! `benches/peers/compare.py`; see docs/BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kiln::bench::{generate, Workload};
use kiln::ir::DType;
use kiln::Engine;

/// A benched kernel: label, operator, parameters, dtype, input shape.
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    DType,
    &'static [usize],
);

const IMAGE: &[usize] = &[1, 1, 512, 512];
/// Sixteen 64x64 planes: border columns and rows are a large part of the work.
const SMALL: &[usize] = &[16, 1, 64, 64];

/// The benched kernels: f32 medians and openings on a 512² image, the 16-lane byte path
/// (u8), and small planes (edge vectors of big stages, border rows of multi-stage kernels).
const CASES: &[Case] = &[
    (
        "median_blur_3x3",
        "median_blur",
        &[("k", "3")],
        DType::F32,
        IMAGE,
    ),
    (
        "median_blur_5x5",
        "median_blur",
        &[("k", "5")],
        DType::F32,
        IMAGE,
    ),
    (
        "grey_opening_3x3",
        "grey_opening",
        &[("size", "3")],
        DType::F32,
        IMAGE,
    ),
    (
        "grey_opening_15x15",
        "grey_opening",
        &[("size", "15")],
        DType::F32,
        IMAGE,
    ),
    (
        "u8_median_filter_3x3",
        "median_filter",
        &[("size", "3"), ("mode", "nearest")],
        DType::U8,
        IMAGE,
    ),
    (
        "u8_grey_opening_3x3",
        "grey_opening",
        &[("size", "3")],
        DType::U8,
        IMAGE,
    ),
    (
        "small_median_blur_5x5",
        "median_blur",
        &[("k", "5")],
        DType::F32,
        SMALL,
    ),
    (
        "small_grey_erosion_15x15",
        "grey_erosion",
        &[("size", "15")],
        DType::F32,
        SMALL,
    ),
];

fn run_kernels(c: &mut Criterion) {
    let mut group = c.benchmark_group("fused");
    group.sample_size(20);
    for &(label, op, p, dtype, shape) in CASES {
        let w = Workload::new(label, op, p, dtype, shape, 1);
        let graph = kiln::ops::build_op(op, &w.params, &w.tensor_type()).expect("op builds");
        let input = generate(w.dtype, &w.shape, w.seed).expect("input");
        for threads in [1, 2] {
            let engine = Engine::new().with_threads(threads);
            let compiled = engine.compile(&graph).expect("compiles");
            // The steady state: the tiered kernels' background compile has landed.
            compiled.wait_for_upgrades(std::time::Duration::from_secs(60));
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
    for &(label, op, p, dtype, shape) in CASES {
        let w = Workload::new(label, op, p, dtype, shape, 1);
        let graph = kiln::ops::build_op(op, &w.params, &w.tensor_type()).expect("op builds");
        // A fresh engine per iteration: no kernel-cache hits, the full passes + Cranelift.
        // Untiered: the first compile alone (a tiered engine would leave a background
        // compile running into the next iterations' time).
        group.bench_function(label, |b| {
            b.iter(|| {
                Engine::new()
                    .with_tiering(false)
                    .compile(&graph)
                    .expect("compiles")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, run_kernels, compile_time);
criterion_main!(benches);
