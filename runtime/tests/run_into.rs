//! `CompiledGraph::run_into`: outputs written into caller-provided buffers. Same bits as
//! `run`, the same allocations handed back (so a loop allocates nothing), and clear errors
//! for buffers that cannot be written in place.

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_ir::{BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, ReduceOp};
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{RuntimeError, Storage, Tensor};

const SHAPE: [usize; 4] = [2, 1, 23, 19];

fn data(seed: u64) -> Tensor {
    let n: usize = SHAPE.iter().product();
    let mut rng = Rng::new(seed);
    let v = (0..n)
        .map(|_| {
            let k = rng.next();
            if k.is_multiple_of(5) {
                f32::from_bits(SPECIAL_F32[(k / 5) as usize % 12])
            } else {
                (k % 1000) as f32 * 0.25 - 120.0
            }
        })
        .collect();
    Tensor::from_storage(Storage::F32(v), &SHAPE).unwrap()
}

/// Outputs: a two-stage opening, a scan of it, the input itself, the opening again
/// (a repeated output), and a pointwise result in another dtype.
fn graph() -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &SHAPE).unwrap();
    let fp = Footprint::scipy_box(&[9, 3], &[0, 0]);
    let e = b
        .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
        .unwrap();
    let o = b
        .window_reduce(e, ReduceOp::Max, &fp, Border::Reflect)
        .unwrap();
    let s = b.scan(o, 3, ReduceOp::Max).unwrap();
    let lt = b.binary(BinaryOp::Lt, o, x).unwrap();
    b.finish(&[o, s, x, o, lt]).unwrap()
}

fn buffers(g: &Graph) -> Vec<Tensor> {
    g.outputs
        .iter()
        .map(|&o| {
            let ty = &g.node(o).ty;
            Tensor::zeros(ty.dtype, &ty.shape)
        })
        .collect()
}

#[test]
fn run_into_gives_runs_bits_in_the_callers_buffers() {
    let g = graph();
    let engine = Engine::new();
    let compiled = engine.compile(&g).unwrap();
    let mut bufs = buffers(&g);
    for seed in 1..4 {
        let x = data(seed);
        let want = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
        let ptrs: Vec<*const u8> = bufs.iter().map(|t| t.storage().as_ptr()).collect();
        bufs = compiled
            .run_into(&engine, std::slice::from_ref(&x), bufs)
            .unwrap();
        for (k, (w, got)) in want.iter().zip(&bufs).enumerate() {
            if let Some(d) = first_difference(w, got) {
                panic!("seed {seed}, output {k}: run vs run_into differ at {d}");
            }
            assert_eq!(
                got.storage().as_ptr(),
                ptrs[k],
                "output {k} was reallocated"
            );
        }
    }
}

fn err(r: Result<Vec<Tensor>, RuntimeError>) -> String {
    match r {
        Err(RuntimeError::Shape(m)) => m,
        Err(e) => panic!("unexpected error kind: {e}"),
        Ok(_) => panic!("accepted a bad output buffer"),
    }
}

#[test]
fn unusable_buffers_are_errors() {
    let g = graph();
    let engine = Engine::new();
    let compiled = engine.compile(&g).unwrap();
    let x = [data(7)];
    let run = |bufs| err(compiled.run_into(&engine, &x, bufs));
    // Too few.
    let mut bufs = buffers(&g);
    bufs.pop();
    assert!(run(bufs).contains("4 output buffers"));
    // Wrong dtype and wrong shape.
    let mut bufs = buffers(&g);
    bufs[4] = Tensor::zeros(DType::F32, &SHAPE);
    assert!(run(bufs).contains("output buffer 4"));
    let mut bufs = buffers(&g);
    bufs[0] = Tensor::zeros(DType::F32, &[2, 1, 19, 23]);
    assert!(run(bufs).contains("output buffer 0"));
    // A transposed view of the right shape.
    let mut bufs = buffers(&g);
    bufs[0] = Tensor::zeros(DType::F32, &[2, 1, 19, 23])
        .permuted(&[0, 1, 3, 2])
        .unwrap();
    assert!(run(bufs).contains("strided view"));
    // Shared with a clone that is still alive (writing would change the clone).
    let bufs = buffers(&g);
    let clone = bufs[1].clone();
    assert!(run(bufs).contains("shared"));
    assert!(clone
        .to_scalars()
        .iter()
        .all(|s| *s == kiln_ir::Scalar::F32(0)));
}

#[test]
fn release_buffers_frees_kept_buffers_and_runs_still_agree() {
    // A transposed input is copied into a buffer that the compiled graph keeps, next to
    // the multi-stage kernel's scratch rows. Releasing frees at least the copy, a second
    // release finds nothing, and runs after it allocate again and give the same bits.
    let g = graph();
    let engine = Engine::new().with_threads(2);
    let compiled = engine.compile(&g).unwrap();
    let dense = data(11);
    // The same values with columns outermost in memory.
    let view = dense.with_memory_order(&[0, 1, 3, 2]).unwrap();
    assert_ne!(view.strides()[3], 1, "the input must be strided");
    let want = compiled.run(&engine, std::slice::from_ref(&dense)).unwrap();
    let first = compiled.run(&engine, std::slice::from_ref(&view)).unwrap();
    let copy_bytes = dense.numel() * 4;
    let freed = compiled.release_buffers();
    assert!(
        freed >= copy_bytes,
        "freed {freed} bytes, the copy alone is {copy_bytes}"
    );
    assert_eq!(
        compiled.release_buffers(),
        0,
        "a second release found buffers"
    );
    let second = compiled.run(&engine, std::slice::from_ref(&view)).unwrap();
    assert!(
        compiled.release_buffers() >= copy_bytes,
        "the run after a release kept nothing"
    );
    for (k, w) in want.iter().enumerate() {
        assert_eq!(
            first_difference(w, &first[k]),
            None,
            "output {k}, first run"
        );
        assert_eq!(
            first_difference(w, &second[k]),
            None,
            "output {k}, after release"
        );
    }
}
