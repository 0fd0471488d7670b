//! The fused engine against the eager oracle, bit for bit, where the engine has more than
//! the conformance suite checks (`conformance/`, instantiated for the CPU in
//! `conformance_cpu.rs`): dedicated thread pools, the kernel cache, bad inputs, offset
//! views, planted faults, NaN-mask elision; over data full of NaN payloads, infinities,
//! signed zeros, subnormals and ties.

mod common;
mod conformance;

use conformance::{cval_of, data, layouts, median3, sort_pairs, window, SHAPES_2D};
use kiln_codegen::kernel::KernelBody;
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, NodeId, ReduceOp, Scalar, UnaryOp,
};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::Tensor;

/// An engine whose multi-stage kernels run in chunks of the fewest output rows.
static CHUNKED: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();

/// Runs `graph` eagerly and fused on inputs made for it (every layout), asserts equal bits;
/// fused both with the default scratch budget and in the smallest chunks.
fn check(engine: &Engine, graph: &Graph, what: &str) {
    let rank = graph.inputs[0].shape.len();
    for (li, layout) in layouts(rank).iter().enumerate() {
        let inputs: Vec<Tensor> = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                data(ty.dtype, &ty.shape, 7 + i as u64 * 31 + li as u64, true)
                    .with_memory_order(layout)
                    .unwrap()
            })
            .collect();
        let want = eager::run(graph, &inputs).unwrap();
        let got = engine
            .run(graph, &inputs)
            .unwrap_or_else(|e| panic!("{what}: fused run failed: {e}"));
        assert_eq!(want.len(), got.len());
        // Multi-stage kernels once more in chunks of the fewest rows (rings of scratch rows
        // that wrap, rows reused across chunks, planes crossed by 3-D slots and `wrap`).
        let chunked = CHUNKED
            .get_or_init(|| Engine::new().with_scratch_budget(1))
            .run(graph, &inputs)
            .unwrap_or_else(|e| panic!("{what}: chunked fused run failed: {e}"));
        for (k, (w, g)) in want.iter().zip(&chunked).enumerate() {
            if let Some(d) = first_difference(w, g) {
                panic!(
                    "{what}: output {k}, layout {layout:?}: eager vs chunked fused differ at {d}"
                );
            }
        }
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(g.is_contiguous(), "{what}: output {k} not contiguous");
            if let Some(d) = first_difference(w, g) {
                panic!(
                    "{what}: output {k}, layout {layout:?}, shape {:?}: eager vs fused differ at {d}",
                    graph.inputs[0].shape
                );
            }
        }
    }
    // The tiered compiles (bigger steps, the clean-input specialisation) once they landed,
    // on data with specials (the checked fallback) and without (the clean kernel).
    let compiled = engine.compile(graph).unwrap();
    assert!(compiled.wait_for_upgrades(std::time::Duration::from_secs(120)));
    for specials in [true, false] {
        let inputs: Vec<Tensor> = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| data(ty.dtype, &ty.shape, 5 + i as u64 * 17, specials))
            .collect();
        let want = eager::run(graph, &inputs).unwrap();
        let got = compiled
            .run(engine, &inputs)
            .unwrap_or_else(|e| panic!("{what}: upgraded fused run failed: {e}"));
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            if let Some(d) = first_difference(w, g) {
                panic!("{what}: output {k}, specials {specials}: eager vs upgraded fused differ at {d}");
            }
        }
    }
}

/// The value checks of the opening are in the conformance suite
/// (`grey_opening_and_a_gather_of_it`); this checks that it is one two-stage kernel.
#[test]
fn grey_opening_is_two_stages() {
    let engine = Engine::new();
    let fp = Footprint::scipy_box(&[3, 5], &[0, 0]);
    for shape in SHAPES_2D {
        for dtype in [DType::F32, DType::U8] {
            for border in Border::all(cval_of(dtype)) {
                let mut b = GraphBuilder::new();
                let x = b.input(dtype, &shape).unwrap();
                let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
                let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
                let g = b.finish(&[d]).unwrap();
                let compiled = engine.compile(&g).unwrap();
                assert_eq!(compiled.kernel_count(), 1, "opening is one kernel");
                match &compiled.kernels[0].kernel.body {
                    KernelBody::Stencil { stages } => assert_eq!(stages.len(), 2),
                    other => panic!("{other:?}"),
                }
            }
        }
    }
}

#[test]
fn dedicated_thread_pools_give_the_same_bits() {
    let g = median3(DType::F32, &[1, 3, 61, 37], Border::Reflect);
    for threads in [1, 3] {
        let engine = Engine::new().with_threads(threads);
        check(&engine, &g, &format!("{threads} threads"));
    }
}

#[test]
fn kernel_cache_hits_on_a_second_shape() {
    let engine = Engine::new();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let opening = |shape: &[usize]| {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, shape).unwrap();
        let e = b
            .window_reduce(x, ReduceOp::Min, &fp, Border::Nearest)
            .unwrap();
        let d = b
            .window_reduce(e, ReduceOp::Max, &fp, Border::Nearest)
            .unwrap();
        let s = b.scan(d, 2, ReduceOp::Sum).unwrap();
        b.finish(&[s]).unwrap()
    };
    let first = engine.compile(&opening(&[1, 1, 10, 12])).unwrap();
    let after_first = engine.stats();
    assert_eq!(after_first.kernels_compiled, first.kernel_count());
    assert_eq!(after_first.cache_hits, 0);
    assert!(first.kernel_count() >= 2);
    let second = engine.compile(&opening(&[2, 1, 31, 7])).unwrap();
    let after_second = engine.stats();
    assert_eq!(after_second.kernels_compiled, after_first.kernels_compiled);
    assert_eq!(after_second.cache_hits, second.kernel_count());
    for (a, b) in first.kernels.iter().zip(&second.kernels) {
        assert!(std::sync::Arc::ptr_eq(a, b));
    }
    // And the shared kernels compute the right thing at both shapes.
    check(&engine, &opening(&[2, 1, 31, 7]), "cached opening");
    // Different options are a different cache entry.
    let other = Engine::with_options(CompileOptions {
        fault: Some(Fault::DropNanMask),
        ..Default::default()
    });
    other.compile(&opening(&[1, 1, 4, 4])).unwrap();
    assert_eq!(other.stats().cache_hits, 0);
}

#[test]
fn bad_inputs_are_errors() {
    let engine = Engine::new();
    let g = median3(DType::F32, &[1, 1, 4, 4], Border::Nearest);
    assert!(engine.run(&g, &[]).is_err());
    let wrong = data(DType::F32, &[1, 1, 4, 5], 1, false);
    assert!(engine.run(&g, &[wrong]).is_err());
    let wrong = data(DType::U8, &[1, 1, 4, 4], 1, false);
    assert!(engine.run(&g, &[wrong]).is_err());
    let compiled = engine.compile(&g).unwrap();
    assert!(compiled.run(&engine, &[]).is_err());
}

#[test]
fn offset_views_and_broadcast_strides() {
    let engine = Engine::new();
    let g = median3(DType::F32, &[1, 1, 5, 6], Border::Mirror);
    // A view into the middle of a larger storage.
    let big = data(DType::F32, &[1, 1, 9, 10], 3, true);
    let view =
        Tensor::from_parts(big.storage().clone(), &[1, 1, 5, 6], &[90, 90, 10, 1], 22).unwrap();
    let want = eager::run(&g, std::slice::from_ref(&view)).unwrap();
    let got = engine.run(&g, std::slice::from_ref(&view)).unwrap();
    assert_eq!(first_difference(&want[0], &got[0]), None);
    // Stride-0 rows (a broadcast view).
    let bc = Tensor::from_parts(big.storage().clone(), &[1, 1, 5, 6], &[0, 0, 0, 1], 4).unwrap();
    let want = eager::run(&g, std::slice::from_ref(&bc)).unwrap();
    let got = engine.run(&g, std::slice::from_ref(&bc)).unwrap();
    assert_eq!(first_difference(&want[0], &got[0]), None);
}

/// True when some output of the fused run differs from eager on one contiguous input set.
fn differs(engine: &Engine, graph: &Graph) -> bool {
    let inputs: Vec<Tensor> = graph
        .inputs
        .iter()
        .map(|ty| data(ty.dtype, &ty.shape, 5, true))
        .collect();
    let want = eager::run(graph, &inputs).unwrap();
    let got = engine.run(graph, &inputs).unwrap();
    want.iter()
        .zip(&got)
        .any(|(w, g)| first_difference(w, g).is_some())
}

#[test]
fn the_comparison_catches_planted_faults() {
    let g = median3(DType::F32, &[1, 1, 17, 33], Border::Reflect);
    let w = window(
        DType::F32,
        &[1, 1, 17, 33],
        ReduceOp::Max,
        &Footprint::scipy_box(&[3, 3], &[0, 0]),
        Border::Wrap,
    );
    // Both outputs of one comparator, told apart (a sorting network's middle wire would
    // hide a swapped first comparator: it sorts any permutation of its inputs).
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 17, 33]).unwrap();
    let y = b.gather(x, &[0, 1], Border::Nearest).unwrap();
    let lo = b.network(&[x, y], 2, &[(0, 1)], 0).unwrap();
    let hi = b.network(&[x, y], 2, &[(0, 1)], 1).unwrap();
    let d = b.binary(BinaryOp::Sub, hi, lo).unwrap();
    let n = b.finish(&[d]).unwrap();
    assert!(!differs(&Engine::new(), &g));
    assert!(!differs(&Engine::new(), &w));
    assert!(!differs(&Engine::new(), &n));
    for (fault, graph) in [
        (Fault::WrongBorderRightEdge, &w),
        (Fault::DropNanMask, &w),
        (Fault::SwapComparator, &n),
    ] {
        let engine = Engine::with_options(CompileOptions {
            fault: Some(fault),
            ..Default::default()
        });
        assert!(differs(&engine, graph), "{fault:?} went unnoticed");
    }
}

/// How a median's NaN guard is written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Guard {
    /// kornia: `window Any(not(is_finite(x)))` under `constant(false)`.
    KorniaNonFinite,
    /// `or` of `is_nan` of every tap.
    IsNanTaps,
    /// `or` of `is_nan` of every tap but the last: the network's masks must stay.
    MissingTap,
    /// `and` of the taps' tests: no cover, masks must stay.
    AndOfTaps,
}

/// A `k`x`k` median (an odd-even sorting network's middle wire) selected away by `guard`.
fn guarded_median(dtype: DType, shape: &[usize], k: i64, border: Border, guard: Guard) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let h = k / 2;
    let mut taps = Vec::new();
    for dy in -h..=h {
        for dx in -h..=h {
            taps.push(b.gather(x, &[dy, dx], border).unwrap());
        }
    }
    let n = taps.len() as u32;
    let med = b.network(&taps, n, &sort_pairs(n), (n - 1) / 2).unwrap();
    let g = match guard {
        Guard::KorniaNonFinite => {
            let f = b.unary(UnaryOp::IsFinite, x).unwrap();
            let nf = b.unary(UnaryOp::Not, f).unwrap();
            let size = [k as usize, k as usize];
            let fp = Footprint::scipy_box(&size, &[0, 0]);
            b.window_reduce(
                nf,
                ReduceOp::Any,
                &fp,
                Border::Constant(Scalar::Bool(false)),
            )
            .unwrap()
        }
        Guard::IsNanTaps | Guard::MissingTap | Guard::AndOfTaps => {
            let used = if guard == Guard::MissingTap {
                taps.len() - 1
            } else {
                taps.len()
            };
            let tests: Vec<NodeId> = taps[..used]
                .iter()
                .map(|&t| b.unary(UnaryOp::IsNan, t).unwrap())
                .collect();
            let op = if guard == Guard::AndOfTaps {
                BinaryOp::And
            } else {
                BinaryOp::Or
            };
            let mut any = tests[0];
            for &t in &tests[1..] {
                any = b.binary(op, any, t).unwrap();
            }
            any
        }
    };
    // A non-NaN replacement, so a wrongly unmasked NaN cannot hide behind the constant.
    let c = b.constant_like(Scalar::from_f64(dtype, -7.5), x).unwrap();
    let out = b.select(g, c, med).unwrap();
    b.finish(&[out]).unwrap()
}

/// Whether the fused compile of `g` elided any NaN masks.
fn elides_masks(engine: &Engine, g: &Graph) -> bool {
    let c = engine.compile(g).unwrap();
    c.kernels
        .iter()
        .any(|k| k.describe().contains("without NaN masks"))
}

#[test]
fn nan_masks_elided_only_under_a_dominating_guard() {
    let engine = Engine::new();
    let nan_cval = Scalar::F32(0x7fc0_0077);
    let shapes: [[usize; 4]; 6] = [
        [1, 1, 1, 1],
        [1, 1, 1, 13],
        [1, 1, 11, 1],
        [1, 2, 9, 37],
        [2, 1, 6, 19],
        [1, 1, 23, 8],
    ];
    for guard in [
        Guard::KorniaNonFinite,
        Guard::IsNanTaps,
        Guard::MissingTap,
        Guard::AndOfTaps,
    ] {
        for k in [3, 5] {
            for border in [
                Border::Constant(Scalar::f32(0.0)),
                Border::Constant(Scalar::f32(-0.0)),
                Border::Constant(nan_cval),
                Border::Nearest,
                Border::Reflect,
                Border::Mirror,
                Border::Wrap,
            ] {
                let g = guarded_median(DType::F32, &[1, 1, 8, 8], k, border, guard);
                let expect = match guard {
                    // Its guard sees only in-range taps: exact for non-NaN zero padding,
                    // not for taps that read remapped (possibly NaN) elements.
                    Guard::KorniaNonFinite => {
                        matches!(border, Border::Constant(c) if c != nan_cval)
                    }
                    Guard::IsNanTaps => true,
                    Guard::MissingTap | Guard::AndOfTaps => false,
                };
                assert_eq!(
                    elides_masks(&engine, &g),
                    expect,
                    "{guard:?} k={k} {border}"
                );
                for shape in shapes {
                    let g = guarded_median(DType::F32, &shape, k, border, guard);
                    check(
                        &engine,
                        &g,
                        &format!("guarded median {guard:?} k={k} {border}"),
                    );
                }
            }
        }
    }
    // f64 keeps the scalar path; the rule is the same.
    for guard in [Guard::KorniaNonFinite, Guard::MissingTap] {
        let border = Border::Constant(Scalar::f64(0.0));
        let g = guarded_median(DType::F64, &[1, 2, 9, 13], 3, border, guard);
        assert_eq!(elides_masks(&engine, &g), guard == Guard::KorniaNonFinite);
        check(&engine, &g, &format!("guarded median f64 {guard:?}"));
    }
}
