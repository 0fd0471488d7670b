//! Window doubling (`kiln_ir::passes::doubling`): a min/max window of `k` planes (along the
//! depth of a volume: f32 and u8 windows along the rows of an image are left to the CPU
//! backend's row blocks, see `row_blocks.rs`) becomes a chain of two-read windows under `nearest`.
//! Checked bit for bit against the eager oracle
//! on the un-optimised graph, for every depth from 1 to 24 (so windows that cross one end,
//! both ends, or neither), every eligible border (constants of both zero signs, both
//! infinities and a NaN with a payload among them), NaN payloads, infinities, signed zeros and
//! subnormals; through the eager executor on the optimised graph (the rewrite alone) and the
//! fused engine, unchunked and in chunks of four rows (rings of scratch rows that wrap).

mod common;

use common::window_data;
use kiln_ir::passes::{optimize, optimize_for, optimize_with, StageStorage, WindowBounds};
use kiln_ir::{Border, DType, Footprint, Graph, GraphBuilder, NodeKind, ReduceOp, Scalar};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::Tensor;

/// One window reduction of an f32 `x` over a scipy box of `size`.
fn window_graph(shape: &[usize], op: ReduceOp, size: &[usize], border: Border) -> Graph {
    window_graph_of(DType::F32, shape, op, size, border)
}

/// One window reduction of `x` (of `dtype`) over a scipy box of `size`.
fn window_graph_of(
    dtype: DType,
    shape: &[usize],
    op: ReduceOp,
    size: &[usize],
    border: Border,
) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let fp = Footprint::scipy_box(size, &vec![0; size.len()]);
    let w = b.window_reduce(x, op, &fp, border).unwrap();
    b.finish(&[w]).unwrap()
}

/// Windows of the graph that read exactly two rows under `nearest`: the chain's links.
fn links(g: &Graph) -> usize {
    g.nodes
        .iter()
        .filter(|n| {
            matches!(&n.kind, NodeKind::WindowReduce { footprint, border: Border::Nearest, .. }
                if footprint.offsets.len() == 2)
        })
        .count()
}

fn same(want: &Tensor, got: &Tensor, what: &str) {
    if let Some(d) = first_difference(want, got) {
        panic!("{what}: differ at {d}");
    }
}

#[test]
fn doubled_windows_match_eager_for_every_height() {
    let engines = [Engine::new(), Engine::new().with_scratch_budget(1)];
    for op in [ReduceOp::Min, ReduceOp::Max] {
        for (ky, kx) in [(11, 1), (11, 3), (15, 1), (13, 2), (17, 1)] {
            for border in [
                Border::Nearest,
                Border::Reflect,
                Border::Mirror,
                Border::Constant(Scalar::F32(0)),
                Border::Constant(Scalar::F32(f32::INFINITY.to_bits())),
                Border::Constant(Scalar::F32(f32::NEG_INFINITY.to_bits())),
                Border::Constant(Scalar::F32(0x8000_0000)),
                Border::Constant(Scalar::F32(0xffc0_0001)),
            ] {
                for h in 1..=24 {
                    let shape = [1, 2, h, 3, 5];
                    let g = window_graph(&shape, op, &[ky, 1, kx], border);
                    // Without clipping (which shrinks windows taller than the volume), so
                    // that every height exercises the chain; the engines run the default
                    // pipeline.
                    let no_clip = WindowBounds {
                        clip: false,
                        chains: true,
                    };
                    let opt = optimize_with(&g, StageStorage::ScratchRows, no_clip);
                    // Each k-row window became a chain: log2(P) links (P = 4, 8 here).
                    assert!(links(&opt) >= 2, "{op:?} {ky}x{kx} {border}: not doubled");
                    let what = format!("{op:?} {ky}x{kx} {border} h={h}");
                    for seed in [1, 2] {
                        let x = window_data(&shape, seed + h as u64, true);
                        let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                        let rewritten = eager::run(&opt, std::slice::from_ref(&x)).unwrap();
                        same(&want[0], &rewritten[0], &format!("{what} (rewrite, eager)"));
                        for (e, engine) in engines.iter().enumerate() {
                            let got = engine.run(&g, std::slice::from_ref(&x)).unwrap();
                            same(&want[0], &got[0], &format!("{what} (fused, engine {e})"));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn ineligible_windows_are_left_alone() {
    let shape = [1, 1, 20, 20, 20];
    let cases = [
        // A border whose windows do not remap onto the clamped range.
        window_graph(&shape, ReduceOp::Min, &[15, 1, 1], Border::Wrap),
        // Even sizes are asymmetric; short windows are not worth a chain; sums keep order.
        window_graph(&shape, ReduceOp::Min, &[8, 1, 1], Border::Reflect),
        window_graph(&shape, ReduceOp::Max, &[9, 1, 1], Border::Reflect),
        window_graph(&shape, ReduceOp::Sum, &[15, 1, 1], Border::Reflect),
        // Along the innermost axis the CPU backend shares in registers instead.
        window_graph(&shape, ReduceOp::Min, &[1, 1, 15], Border::Reflect),
        // Along the run axis (rows) f32 and u8 windows are computed in row blocks instead.
        window_graph(&shape, ReduceOp::Min, &[1, 15, 1], Border::Reflect),
        window_graph(&[1, 1, 20, 20], ReduceOp::Max, &[15, 1], Border::Reflect),
        window_graph_of(
            DType::U8,
            &[1, 1, 20, 20],
            ReduceOp::Min,
            &[15, 1],
            Border::Reflect,
        ),
    ];
    for g in &cases {
        assert_eq!(links(&optimize(g)), 0, "{g:?}");
    }
    // f64 along the rows is still doubled (the row blocks are f32, u8 and bool only).
    let g = window_graph_of(
        DType::F64,
        &[1, 1, 20, 20],
        ReduceOp::Min,
        &[15, 1],
        Border::Reflect,
    );
    assert!(links(&optimize(&g)) >= 3);
    // The PTX pipeline never doubles: each link would be a pass through device memory.
    let g = window_graph(&shape, ReduceOp::Min, &[15, 15, 15], Border::Reflect);
    assert!(links(&optimize(&g)) >= 3);
    assert_eq!(links(&optimize_for(&g, StageStorage::DevicePasses)), 0);
}
