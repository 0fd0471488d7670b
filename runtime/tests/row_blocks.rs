//! Row blocks (`kiln_codegen`'s `cpu::rowblock`): an f32 min/max window along the rows is
//! computed for blocks of up to 8 output rows at once. Checked bit for bit against the eager
//! oracle for windows of 2 to 17 rows (blocks of 2 to 8 rows), heights that leave a partial
//! last block or fewer rows than a block, widths below one vector and with a partial last
//! vector, borders of every kind (constants of both zero signs and a NaN with a payload),
//! data with NaN payloads, infinities, signed zeros and subnormals and clean data (which
//! runs the clean-input specialisation's plain picks), unchunked and in chunks of one row
//! (scratch rings that wrap, where the row loop takes over).

mod common;

use std::time::Duration;

use common::window_data as data;
use kiln_codegen::cpu::Guard;
use kiln_ir::{Border, DType, Footprint, Graph, GraphBuilder, ReduceOp, Scalar};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

/// One window reduction of an f32 `x` over a `ky x kx` scipy box.
fn window_graph(shape: &[usize], op: ReduceOp, ky: usize, kx: usize, border: Border) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let fp = Footprint::scipy_box(&[ky, kx], &[0, 0]);
    let w = b.window_reduce(x, op, &fp, border).unwrap();
    b.finish(&[w]).unwrap()
}

/// The plan line that marks a row-blocked stage.
const BLOCKED: &str = "output rows per step in the multi-row function";

#[test]
fn row_windows_are_blocked_and_others_are_not() {
    let engine = Engine::new().with_tiering(false);
    let plan = |g: &Graph| -> String {
        let c = engine.compile(g).unwrap();
        c.kernels.iter().map(|k| k.describe()).collect()
    };
    for (op, ky, kx) in [
        (ReduceOp::Min, 15, 15),
        (ReduceOp::Max, 15, 1),
        (ReduceOp::Min, 2, 1),
    ] {
        let g = window_graph(&[1, 1, 64, 64], op, ky, kx, Border::Reflect);
        let p = plan(&g);
        assert!(p.contains(BLOCKED), "{op:?} {ky}x{kx}:\n{p}");
    }
    // A sum is not a lattice reduction; a row of 15 columns has no window along the rows.
    for (op, ky, kx) in [(ReduceOp::Sum, 5, 1), (ReduceOp::Min, 1, 15)] {
        let g = window_graph(&[1, 1, 64, 64], op, ky, kx, Border::Reflect);
        let p = plan(&g);
        assert!(!p.contains(BLOCKED), "{op:?} {ky}x{kx}:\n{p}");
    }
    // The clean-input specialisation blocks the rows too.
    let engine = Engine::new();
    let g = window_graph(&[1, 1, 64, 64], ReduceOp::Min, 15, 15, Border::Reflect);
    let c = engine.compile(&g).unwrap();
    assert!(c.wait_for_upgrades(Duration::from_secs(120)));
    let clean = c
        .current_kernel(0)
        .unwrap()
        .variant(Guard::CleanInputs)
        .unwrap();
    assert!(clean.describe().contains(BLOCKED), "{}", clean.describe());
}

#[test]
fn row_blocks_match_eager() {
    let engines = [Engine::new(), Engine::new().with_scratch_budget(1)];
    let nan_payload = Border::Constant(Scalar::F32(0xffc0_0001));
    for op in [ReduceOp::Min, ReduceOp::Max] {
        for (ky, kx) in [(2, 1), (5, 3), (8, 1), (9, 2), (15, 1), (17, 3)] {
            for border in [
                Border::Nearest,
                Border::Reflect,
                Border::Mirror,
                Border::Wrap,
                Border::Constant(Scalar::F32(0)),
                Border::Constant(Scalar::F32(0x8000_0000)),
                nan_payload,
            ] {
                for (h, w) in [(1, 5), (7, 13), (9, 1), (17, 3), (40, 9)] {
                    let shape = [1, 2, h, w];
                    let g = window_graph(&shape, op, ky, kx, border);
                    let what = format!("{op:?} {ky}x{kx} {border} {h}x{w}");
                    for (e, engine) in engines.iter().enumerate() {
                        let compiled = engine.compile(&g).unwrap();
                        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
                        for specials in [true, false] {
                            let x = data(&shape, (h * 31 + w) as u64, specials);
                            let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                            let got = compiled.run(engine, std::slice::from_ref(&x)).unwrap();
                            if let Some(d) = first_difference(&want[0], &got[0]) {
                                panic!("{what} engine {e} specials {specials}: differ at {d}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One NaN, -0 or infinity at every row of a column reaches exactly the outputs whose
/// window covers it, in every position of a block (a wrong suffix, prefix or common part
/// would drop it or spread it).
#[test]
fn a_single_special_reaches_exactly_its_windows() {
    let engine = Engine::new();
    let (h, w) = (29, 6);
    for op in [ReduceOp::Min, ReduceOp::Max] {
        for ky in [3, 8, 15] {
            let g = window_graph(&[1, 1, h, w], op, ky, 1, Border::Nearest);
            let compiled = engine.compile(&g).unwrap();
            assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
            for special in [f32::NAN, -0.0, f32::INFINITY, f32::NEG_INFINITY, 0.0] {
                for row in 0..h {
                    let mut v: Vec<f32> = (0..h * w).map(|i| (i % 7) as f32 + 1.0).collect();
                    v[row * w + 4] = special;
                    let x = Tensor::from_storage(Storage::F32(v), &[1, 1, h, w]).unwrap();
                    let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                    let got = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!("{op:?} {ky}x1 {special} at row {row}: differ at {d}");
                    }
                }
            }
        }
    }
}

/// One window reduction of `x` (of `dtype`) over a `ky x kx` scipy box.
fn window_graph_of(
    dtype: DType,
    shape: &[usize],
    op: ReduceOp,
    ky: usize,
    kx: usize,
    border: Border,
) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let fp = Footprint::scipy_box(&[ky, kx], &[0, 0]);
    let w = b.window_reduce(x, op, &fp, border).unwrap();
    b.finish(&[w]).unwrap()
}

/// Bytes of `shape`: u8 over the full range or three values, or random bools.
fn byte_data(dtype: DType, shape: &[usize], seed: u64, ties: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let bytes: Vec<u8> = (0..n)
        .map(|_| match (dtype, ties) {
            (DType::Bool, _) => (next() % 2) as u8,
            (_, true) => [0u8, 9, 255][(next() % 3) as usize],
            _ => next() as u8,
        })
        .collect();
    let st = match dtype {
        DType::Bool => Storage::Bool(bytes),
        _ => Storage::U8(bytes),
    };
    Tensor::from_storage(st, shape).unwrap()
}

/// The same on the 16-lane byte path: u8 minima and maxima and bool `all`/`any` windows
/// along the rows are blocked too (bools as the bytes 0 and 1), and match the eager oracle
/// for windows of 2 to 17 rows, heights that leave a partial last block or fewer rows than
/// a block, widths below one 16-column vector and with a partial last vector, every border,
/// unchunked and in chunks of one row.
#[test]
fn byte_row_blocks_match_eager() {
    let engines = [Engine::new(), Engine::new().with_scratch_budget(1)];
    let cases = [
        (DType::U8, ReduceOp::Min),
        (DType::U8, ReduceOp::Max),
        (DType::Bool, ReduceOp::All),
        (DType::Bool, ReduceOp::Any),
    ];
    for (dtype, op) in cases {
        let g = window_graph_of(dtype, &[1, 1, 64, 64], op, 15, 1, Border::Reflect);
        let c = engines[0].compile(&g).unwrap();
        let plan: String = c.kernels.iter().map(|k| k.describe()).collect();
        assert!(plan.contains(BLOCKED), "{dtype} {op:?}:\n{plan}");
        let (lo, hi) = match dtype {
            DType::Bool => (Scalar::Bool(false), Scalar::Bool(true)),
            _ => (Scalar::U8(0), Scalar::U8(255)),
        };
        for (ky, kx) in [(2, 1), (5, 3), (8, 1), (15, 1), (17, 3)] {
            for border in [
                Border::Nearest,
                Border::Reflect,
                Border::Mirror,
                Border::Wrap,
                Border::Constant(lo),
                Border::Constant(hi),
            ] {
                for (h, w) in [(1, 17), (7, 16), (9, 33), (17, 5), (40, 37)] {
                    let shape = [1, 2, h, w];
                    let g = window_graph_of(dtype, &shape, op, ky, kx, border);
                    let what = format!("{dtype} {op:?} {ky}x{kx} {border} {h}x{w}");
                    for (e, engine) in engines.iter().enumerate() {
                        let compiled = engine.compile(&g).unwrap();
                        for ties in [false, true] {
                            let x = byte_data(dtype, &shape, (h * 31 + w) as u64, ties);
                            let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                            let got = compiled.run(engine, std::slice::from_ref(&x)).unwrap();
                            if let Some(d) = first_difference(&want[0], &got[0]) {
                                panic!("{what} engine {e} ties {ties}: differ at {d}");
                            }
                        }
                    }
                }
            }
        }
    }
}
