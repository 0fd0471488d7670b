//! Box medians and rank selections through the fused engine (whose `optimize` runs
//! `share_columns`: column sorts + a merge network) against the eager oracle on the
//! un-optimised graph (one Batcher selection network), bit for bit: every border, awkward
//! shapes, NaN payloads, infinities, signed zeros, subnormals and ties.

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_ir::network::selection_network;
use kiln_ir::passes::optimize;
use kiln_ir::semantics::CANONICAL_NAN_F32;
use kiln_ir::{
    Border, DType, Footprint, Graph, GraphBuilder, NodeId, NodeKind, ReduceOp, Scalar, UnaryOp,
};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

/// Deterministic data: `specials` in 8 (0 = none) special values, small integers (ties),
/// random values.
fn data(dtype: DType, shape: &[usize], seed: u64, specials: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(seed);
    let mut next = move || rng.next();
    let storage = match dtype {
        DType::F32 => Storage::F32(
            (0..n)
                .map(|_| {
                    let k = next();
                    match k % 8 {
                        x if x < specials => f32::from_bits(SPECIAL_F32[(k / 8) as usize % 12]),
                        5 | 6 => ((k / 8) % 5) as f32 - 2.0,
                        _ => (k % 20011) as f32 * 0.013 - 100.0,
                    }
                })
                .collect(),
        ),
        DType::U8 => Storage::U8((0..n).map(|_| (next() % 7 * 37) as u8).collect()),
        other => panic!("no data for {other}"),
    };
    Tensor::from_storage(storage, shape).unwrap()
}

/// Centred `ky x kx` box offsets, row-major (scipy's and kornia's order).
fn centred_box(ky: usize, kx: usize) -> Vec<Vec<i64>> {
    let mut v = Vec::new();
    for dy in 0..ky as i64 {
        for dx in 0..kx as i64 {
            v.push(vec![dy - (ky / 2) as i64, dx - (kx / 2) as i64]);
        }
    }
    v
}

/// `rank`-th smallest of `x` over the box: gathers + the canonical selector.
fn selection(
    b: &mut GraphBuilder,
    x: NodeId,
    offsets: &[Vec<i64>],
    border: Border,
    rank: usize,
) -> NodeId {
    let gathers: Vec<NodeId> = offsets
        .iter()
        .map(|o| b.gather(x, o, border).unwrap())
        .collect();
    let net = selection_network(offsets.len(), rank).unwrap();
    b.network(&gathers, net.width, &net.pairs, net.output)
        .unwrap()
}

/// scipy-style selection graph.
fn selection_graph(
    dtype: DType,
    shape: &[usize],
    ky: usize,
    kx: usize,
    border: Border,
    rank: usize,
) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let s = selection(&mut b, x, &centred_box(ky, kx), border, rank);
    b.finish(&[s]).unwrap()
}

/// kornia-style median: zero padding, lower median, any non-finite value in the window
/// gives the canonical NaN.
fn kornia_graph(shape: &[usize], ky: usize, kx: usize) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let offsets = centred_box(ky, kx);
    let zero = Border::Constant(Scalar::F32(0));
    let median = selection(&mut b, x, &offsets, zero, (ky * kx - 1) / 2);
    let finite = b.unary(UnaryOp::IsFinite, x).unwrap();
    let bad = b.unary(UnaryOp::Not, finite).unwrap();
    let any_bad = b
        .window_reduce(
            bad,
            ReduceOp::Any,
            &Footprint { offsets },
            Border::Constant(Scalar::Bool(false)),
        )
        .unwrap();
    let nan = b.constant_like(Scalar::F32(CANONICAL_NAN_F32), x).unwrap();
    let out = b.select(any_bad, nan, median).unwrap();
    b.finish(&[out]).unwrap()
}

fn networks(g: &Graph) -> usize {
    g.nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Network { .. }))
        .count()
}

/// Eager on the un-optimised graph vs fused, on a few data mixes; asserts equal bits.
fn check(engine: &Engine, g: &Graph, what: &str) {
    let ty = &g.inputs[0];
    for (seed, specials) in [(1u64, 0u64), (2, 1), (3, 3)] {
        let input = data(ty.dtype, &ty.shape, seed, specials);
        let want = eager::run(g, std::slice::from_ref(&input)).unwrap();
        let got = engine
            .run(g, &[input])
            .unwrap_or_else(|e| panic!("{what}: fused run failed: {e}"));
        if let Some(d) = first_difference(&want[0], &got[0]) {
            panic!("{what}, seed {seed}: eager vs fused differ at {d}");
        }
    }
}

const SHAPES: [[usize; 4]; 6] = [
    [1, 1, 1, 1],
    [1, 1, 1, 9],
    [1, 1, 9, 1],
    [1, 1, 2, 3],
    [2, 1, 7, 5],
    [1, 2, 17, 34],
];

fn borders() -> Vec<Border> {
    vec![
        Border::Constant(Scalar::F32(0)),
        Border::Constant(Scalar::F32(0xffc0_0001)),
        Border::Nearest,
        Border::Reflect,
        Border::Mirror,
        Border::Wrap,
    ]
}

#[test]
fn box_medians_fused_match_eager_under_every_border() {
    let engine = Engine::new();
    for (ky, kx) in [(3, 3), (5, 5), (3, 5), (5, 3), (4, 4), (3, 7)] {
        for shape in SHAPES {
            for border in borders() {
                let g = selection_graph(DType::F32, &shape, ky, kx, border, (ky * kx - 1) / 2);
                assert!(networks(&optimize(&g)) > 1, "{ky}x{kx} not rewritten");
                check(&engine, &g, &format!("{ky}x{kx} median {shape:?} {border}"));
            }
        }
    }
}

#[test]
fn kornia_medians_fused_match_eager() {
    let engine = Engine::new();
    for k in [3, 5] {
        for shape in SHAPES {
            let g = kornia_graph(&shape, k, k);
            assert!(networks(&optimize(&g)) > 1);
            check(&engine, &g, &format!("kornia {k}x{k} {shape:?}"));
        }
    }
}

#[test]
fn other_ranks_and_u8_fused_match_eager() {
    let engine = Engine::new();
    for rank in [0, 2, 7, 8] {
        let g = selection_graph(DType::F32, &[1, 1, 11, 13], 3, 3, Border::Reflect, rank);
        check(&engine, &g, &format!("3x3 rank {rank}"));
    }
    for rank in [0, 5, 19, 24] {
        let g = selection_graph(DType::F32, &[1, 1, 12, 9], 5, 5, Border::Mirror, rank);
        check(&engine, &g, &format!("5x5 rank {rank}"));
    }
    for border in [Border::Constant(Scalar::U8(9)), Border::Wrap] {
        let g = selection_graph(DType::U8, &[1, 1, 10, 19], 3, 3, border, 4);
        assert!(networks(&optimize(&g)) > 1);
        check(&engine, &g, &format!("u8 3x3 {border}"));
    }
}
