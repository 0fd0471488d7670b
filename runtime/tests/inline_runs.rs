//! Small runs on the calling thread (`Engine::with_inline_work`, `INLINE_WORK`, and the
//! timed choice of engines without a fixed inline work): the same bits as runs on the
//! engine's threads and as eager, through every parallel loop of the fused runtime
//! (multi-block stencils, both scan layouts, a strided input's copy, the clean-input
//! check), and where the runs go.

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_ir::{BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, ReduceOp};
use kiln_runtime::eager;
use kiln_runtime::fused::{Engine, INLINE_WORK};
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

/// The graph's input shape; the data is a transposed view of a `[2, 1, 19, 23]` tensor.
const SHAPE: [usize; 4] = [2, 1, 23, 19];

fn data(seed: u64, specials: bool) -> Tensor {
    let n: usize = SHAPE.iter().product();
    let mut rng = Rng::new(seed);
    let v = (0..n)
        .map(|_| {
            let k = rng.next();
            if specials && k.is_multiple_of(5) {
                f32::from_bits(SPECIAL_F32[(k / 5) as usize % 12])
            } else {
                (k % 1000) as f32 * 0.25 - 120.0
            }
        })
        .collect();
    let full = Tensor::from_storage(Storage::F32(v), &[2, 1, 19, 23]).unwrap();
    full.permuted(&[0, 1, 3, 2]).unwrap()
}

/// A two-stage opening, scans along the rows and down the columns, and a comparison.
fn graph() -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &SHAPE).unwrap();
    let fp = Footprint::scipy_box(&[5, 3], &[0, 0]);
    let e = b
        .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
        .unwrap();
    let o = b
        .window_reduce(e, ReduceOp::Max, &fp, Border::Mirror)
        .unwrap();
    let along_rows = b.scan(o, 3, ReduceOp::Max).unwrap();
    let down_columns = b.scan(x, 2, ReduceOp::Min).unwrap();
    let lt = b.binary(BinaryOp::Lt, o, x).unwrap();
    b.finish(&[o, along_rows, down_columns, lt]).unwrap()
}

#[test]
fn inline_and_threaded_runs_agree_with_eager() {
    let g = graph();
    let threaded = Engine::new().with_threads(2).with_inline_work(0);
    let inline = Engine::new().with_threads(2).with_inline_work(u64::MAX);
    let (ct, ci) = (threaded.compile(&g).unwrap(), inline.compile(&g).unwrap());
    for seed in 1..5 {
        // Clean data too, so the clean-input kernels and their check run.
        let x = data(seed, seed % 2 == 0);
        assert!(!x.is_contiguous());
        let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
        for (name, engine, c) in [("threaded", &threaded, &ct), ("inline", &inline, &ci)] {
            let got = c.run(engine, std::slice::from_ref(&x)).unwrap();
            for (k, (w, t)) in want.iter().zip(&got).enumerate() {
                if let Some(d) = first_difference(w, t) {
                    panic!("seed {seed}, {name}, output {k}: {d}");
                }
            }
        }
    }
    assert_eq!(threaded.stats().inline_runs, 0);
    assert_eq!(inline.stats().inline_runs, 4);
}

#[test]
fn the_choice_follows_the_estimated_work_and_one_thread_is_always_inline() {
    let g = graph();
    let engine = Engine::new().with_threads(2);
    let c = engine.compile(&g).unwrap();
    // A graph this small is far below the threshold.
    assert!(c.estimated_work() < INLINE_WORK, "{}", c.estimated_work());
    c.run(&engine, &[data(1, true)]).unwrap();
    assert_eq!(engine.stats().inline_runs, 1);
    // Just above the graph's work: on the threads.
    let above = Engine::new()
        .with_threads(2)
        .with_inline_work(c.estimated_work());
    let c2 = above.compile(&g).unwrap();
    c2.run(&above, &[data(1, true)]).unwrap();
    assert_eq!(above.stats().inline_runs, 0);
    // One thread: always on the caller, whatever the work.
    let one = Engine::new().with_threads(1).with_inline_work(0);
    let c1 = one.compile(&g).unwrap();
    c1.run(&one, &[data(1, true)]).unwrap();
    assert_eq!(one.stats().inline_runs, 1);
}

#[test]
fn estimated_work_counts_elements_times_instructions() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 512, 512]).unwrap();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let e = b
        .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
        .unwrap();
    let g = b.finish(&[e]).unwrap();
    let engine = Engine::new();
    let c = engine.compile(&g).unwrap();
    let elems = 512 * 512;
    // At least one instruction per element, and a 3x3 min needs more than that.
    assert!(c.estimated_work() > 2 * elems, "{}", c.estimated_work());
    assert!(c.estimated_work() >= INLINE_WORK);
}

#[test]
fn small_graphs_stay_on_the_caller_and_slow_ones_move_to_the_threads() {
    // Without a fixed inline work, an engine times each small graph's first runs on the
    // calling thread: a tiny graph (a 3x3 minimum on 8x8, a microsecond or two) stays
    // there, a graph whose runs take well over the 40 µs limit (a 15x15 minimum on 24
    // planes of 32², 100–300 µs on the benchmark VM) goes to the threads after its three
    // timed runs.
    let erosion = |shape: [usize; 4], k: usize| {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &shape).unwrap();
        let fp = Footprint::scipy_box(&[k, k], &[0, 0]);
        let e = b
            .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
            .unwrap();
        let g = b.finish(&[e]).unwrap();
        let n: usize = shape.iter().product();
        let data = (0..n).map(|i| (i % 97) as f32).collect();
        (g, Tensor::from_storage(Storage::F32(data), &shape).unwrap())
    };
    for (shape, k, want_inline) in [([1, 1, 8, 8], 3, 10), ([8, 3, 32, 32], 15, 3)] {
        let (g, input) = erosion(shape, k);
        let engine = Engine::new().with_threads(2);
        let c = engine.compile(&g).unwrap();
        for _ in 0..10 {
            c.run(&engine, std::slice::from_ref(&input)).unwrap();
        }
        assert_eq!(
            engine.stats().inline_runs,
            want_inline,
            "{shape:?}, {k}x{k}"
        );
    }
}
