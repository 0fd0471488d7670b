//! Border columns of big stages are compiled as separate functions, in a module of their own
//! and on a thread of their own, at the same time as the row functions, which call them
//! through a cell filled in once both modules are compiled (`codegen/src/cpu/mod.rs`,
//! `rowfn::BorderCall`). A kernel whose stages call such functions must give the eager bits:
//! on rows of every width from 1 to 40 (all border columns to a few per row), in contiguous
//! and strided layouts (where every column takes the border path), for a one-stage kernel
//! (its row function on the calling thread, the border functions on another) and for a
//! two-stage one (a second group of row functions on a third thread).

mod common;

use common::{f32_tensor, layouts, Data};
use kiln::ir::{DType, GraphBuilder};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

const SPLIT_NOTE: &str = "border columns in a separate fast-compiling function";

/// Median 5x5, then (with `twice`) a median 3x3 of its result.
fn medians(shape: &[usize], twice: bool) -> kiln::ir::Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let mut y = kiln::ops::median::median_blur(&mut b, x, 5).unwrap();
    if twice {
        y = kiln::ops::median::median_blur(&mut b, y, 3).unwrap();
    }
    b.finish(&[y]).unwrap()
}

#[test]
fn split_border_functions_give_the_eager_bits() {
    // No tiering: the first compile, with its border functions, is the one that runs.
    let engine = Engine::new().with_tiering(false);
    for twice in [false, true] {
        let graph = medians(&[1, 2, 9, 40], twice);
        let compiled = engine.compile(&graph).unwrap();
        let split: usize = compiled
            .kernels
            .iter()
            .map(|k| k.describe().matches(SPLIT_NOTE).count())
            .sum();
        // The comparison below means something only if border functions were split off:
        // one per median stage.
        let stages = if twice { 2 } else { 1 };
        assert_eq!(
            split, stages,
            "twice={twice}: {split} split border functions"
        );
        // Both medians in one kernel: two row functions, compiled in parallel.
        assert_eq!(compiled.kernels.len(), 1, "twice={twice}: not fused");
        for w in 1..=40usize {
            let shape = [1, 2, 9, w];
            let graph = medians(&shape, twice);
            for data in [Data::Uniform, Data::Special] {
                let x = f32_tensor(&shape, data, w as u64);
                let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
                for (layout, xl) in layouts(&x) {
                    let got = engine.run(&graph, std::slice::from_ref(&xl)).unwrap();
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!("twice={twice} width {w} {data:?} {layout}: {d}");
                    }
                }
            }
        }
    }
}
