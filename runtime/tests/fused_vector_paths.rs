//! The CPU fast paths through the whole engine, eager against fused bit for bit: 16-lane
//! byte stages (bool erosion, u8 morphology), compare-form min/max trees over NaN payloads,
//! infinities, signed zeros, subnormals and ties, multi-stage kernels whose blocks reuse
//! scratch, and border columns compiled apart; on widths around multiples of 16, 1x1, 1xN,
//! Nx1 and tall images (many blocks, two threads), with contiguous, transposed and
//! channels-last inputs.

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_ir::{Border, DType, Footprint, Graph, GraphBuilder, ReduceOp, Scalar};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

fn data(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let mut next = move || rng.next();
    let storage = match dtype {
        DType::F32 => Storage::F32(
            (0..n)
                .map(|_| {
                    let k = next();
                    match k % 6 {
                        0 => f32::from_bits(SPECIAL_F32[(k / 8) as usize % 12]),
                        // Zeros of both signs: ties the sign fix of min/max trees decides.
                        1 => {
                            if k & 64 == 0 {
                                0.0
                            } else {
                                -0.0
                            }
                        }
                        2 => ((k / 8) % 5) as f32 - 2.0,
                        _ => (k % 20011) as f32 * 0.013 - 100.0,
                    }
                })
                .collect(),
        ),
        DType::U8 => Storage::U8(
            (0..n)
                .map(|_| {
                    let k = next();
                    [0u8, 1, 127, 128, 255][(k % 5) as usize].wrapping_add((k / 5 % 3) as u8)
                })
                .collect(),
        ),
        // Mostly true, so that erosion leaves something.
        DType::Bool => Storage::Bool((0..n).map(|_| (next() % 7 != 0) as u8).collect()),
        DType::F64 => Storage::F64((0..n).map(|_| next() as f64 * 0.5 - 7.0).collect()),
        d => {
            let mut st = Storage::zeros(d, n);
            for i in 0..n {
                st.set(i, kiln_ir::Scalar::wrap_int(d, next() as i64).unwrap());
            }
            st
        }
    };
    Tensor::from_storage(storage, shape).unwrap()
}

fn layouts(rank: usize) -> Vec<Vec<usize>> {
    let id: Vec<usize> = (0..rank).collect();
    let mut t = id.clone();
    t.swap(rank - 1, rank - 2);
    let mut cl = vec![0];
    cl.extend(2..rank);
    cl.push(1);
    vec![id, t, cl]
}

fn check(engine: &Engine, graph: &Graph, what: &str) {
    let ty = &graph.inputs[0];
    for (li, layout) in layouts(ty.shape.len()).iter().enumerate() {
        let x = data(ty.dtype, &ty.shape, 11 + li as u64)
            .with_memory_order(layout)
            .unwrap();
        let want = eager::run(graph, std::slice::from_ref(&x)).unwrap();
        let got = engine
            .run(graph, std::slice::from_ref(&x))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(d) = first_difference(&want[0], &got[0]) {
            panic!("{what}, layout {layout:?}, shape {:?}: {d}", ty.shape);
        }
    }
}

const SHAPES: [[usize; 4]; 10] = [
    [1, 1, 1, 1],
    [1, 1, 1, 15],
    [1, 1, 1, 33],
    [1, 1, 17, 1],
    [1, 1, 5, 16],
    [1, 1, 6, 17],
    [2, 3, 9, 31],
    [1, 2, 11, 47],
    [1, 1, 300, 33],
    [1, 1, 70, 130],
];

fn cross() -> Footprint {
    Footprint::scipy_masked(
        &[3, 3],
        &[false, true, false, true, true, true, false, true, false],
        &[0, 0],
    )
}

#[test]
fn bool_erosion_and_dilation_on_byte_vectors() {
    let engine = Engine::new().with_threads(2);
    for shape in SHAPES {
        for (op, c) in [
            (ReduceOp::All, false),
            (ReduceOp::Any, true),
            (ReduceOp::All, true),
        ] {
            for fp in [cross(), Footprint::scipy_box(&[1, 5], &[0, 0])] {
                let mut b = GraphBuilder::new();
                let x = b.input(DType::Bool, &shape).unwrap();
                let border = Border::Constant(Scalar::Bool(c));
                let e = b.window_reduce(x, op, &fp, border).unwrap();
                let g = b.finish(&[e]).unwrap();
                check(&engine, &g, &format!("bool {op:?} {border} {fp:?}"));
                // Two bool stages: erosion then dilation (a binary opening), with scratch.
                let mut b = GraphBuilder::new();
                let x = b.input(DType::Bool, &shape).unwrap();
                let e = b.window_reduce(x, ReduceOp::All, &fp, border).unwrap();
                let d = b
                    .window_reduce(e, ReduceOp::Any, &fp, Border::Reflect)
                    .unwrap();
                let g = b.finish(&[d]).unwrap();
                check(&engine, &g, &format!("bool opening {border} {fp:?}"));
            }
        }
    }
}

#[test]
fn u8_morphology_on_byte_vectors() {
    let engine = Engine::new().with_threads(2);
    for shape in SHAPES {
        for border in Border::all(Scalar::U8(200)) {
            let fp = Footprint::scipy_box(&[3, 5], &[0, 1]);
            let mut b = GraphBuilder::new();
            let x = b.input(DType::U8, &shape).unwrap();
            let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
            let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
            let g = b.finish(&[d]).unwrap();
            check(&engine, &g, &format!("u8 opening {border}"));
        }
    }
}

#[test]
fn f32_min_max_trees_wide_windows_and_scratch_reuse() {
    // 15x15 (decomposed into 1-D passes: trees, vertical stages compiled with split borders)
    // and 3x3 openings and closings; tall shapes give many blocks on two threads.
    let engine = Engine::new().with_threads(2);
    for shape in SHAPES {
        for size in [3usize, 15] {
            for border in [Border::Reflect, Border::Constant(Scalar::F32(0x8000_0000))] {
                let fp = Footprint::scipy_box(&[size, size], &[0, 0]);
                for (first, second) in [
                    (ReduceOp::Min, ReduceOp::Max),
                    (ReduceOp::Max, ReduceOp::Min),
                ] {
                    let mut b = GraphBuilder::new();
                    let x = b.input(DType::F32, &shape).unwrap();
                    let e = b.window_reduce(x, first, &fp, border).unwrap();
                    let d = b.window_reduce(e, second, &fp, border).unwrap();
                    let g = b.finish(&[d]).unwrap();
                    check(
                        &engine,
                        &g,
                        &format!("f32 {size} {first:?}/{second:?} {border}"),
                    );
                }
            }
        }
    }
}
