//! Rough timings of the fused engine (ignored by default: `cargo test -p kiln-runtime
//! --test fused_perf -- --ignored --nocapture`). Also checks the results against eager once.

use std::time::Instant;

use kiln_ir::{Border, DType, Footprint, GraphBuilder, ReduceOp, Scalar};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::Tensor;

#[test]
#[ignore]
fn opening_and_box_sum_timings() {
    let shape = [1, 1, 1024, 1024];
    let n: usize = shape.iter().product();
    let x = Tensor::from_f32((0..n).map(|i| ((i * 7919) % 1013) as f32).collect(), &shape).unwrap();
    let fp = Footprint::scipy_box(&[5, 5], &[0, 0]);
    for border in [Border::Reflect, Border::Constant(Scalar::f32(0.0))] {
        let mut b = GraphBuilder::new();
        let i = b.input(DType::F32, &shape).unwrap();
        let e = b.window_reduce(i, ReduceOp::Min, &fp, border).unwrap();
        let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
        let s = b.window_reduce(i, ReduceOp::Sum, &fp, border).unwrap();
        let g = b.finish(&[d, s]).unwrap();
        for threads in [1, 2] {
            let engine = Engine::new().with_threads(threads);
            let compiled = engine.compile(&g).unwrap();
            let t0 = Instant::now();
            let eager_out = eager::run(&g, std::slice::from_ref(&x)).unwrap();
            let eager_ms = t0.elapsed().as_secs_f64() * 1e3;
            let mut fused_ms = f64::INFINITY;
            let mut out = Vec::new();
            for _ in 0..5 {
                let t0 = Instant::now();
                out = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
                fused_ms = fused_ms.min(t0.elapsed().as_secs_f64() * 1e3);
            }
            for (a, b) in eager_out.iter().zip(&out) {
                assert_eq!(first_difference(a, b), None);
            }
            println!(
            "{border} {threads} thr: {} kernels, compile {:.1} ms, eager {eager_ms:.1} ms, fused {fused_ms:.2} ms",
            compiled.kernel_count(),
            compiled.compile_ms
        );
        }
    }
}
