//! Compile once per rank, run on any shape of the class (`kiln_runtime::fused::Binding`).
//!
//! * A graph compiled at one shape and run bound on many others (batch, channel and large
//!   spatial extents changed) gives eager's bits on the graph built at each exact shape.
//! * For every shape the binding admits, the plan (optimised node kinds, partition and kernel
//!   forms) is the one an exact compile at that shape makes; some small shape the binding
//!   refuses does get another plan, so the threshold is needed (the test can fail).
//! * Shapes the binding refuses are a typed error, and graphs that cannot bind (two inputs,
//!   an axis reduction) have no binding.

mod common;

use common::window_data;
use kiln_ir::passes::{StageStorage, WindowBounds};
use kiln_ir::{Border, DType, Footprint, Graph, GraphBuilder, NodeKind, ReduceOp, Scalar};
use kiln_runtime::eager;
use kiln_runtime::executor::{lower_graph_with, Lowered};
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::RuntimeError;

const BORDERS: [Border; 5] = [
    Border::Nearest,
    Border::Reflect,
    Border::Mirror,
    Border::Wrap,
    Border::Constant(Scalar::F32(0)),
];

/// A max of a 5x3 box (origin shifted along the rows), then a min over a 3x2 box, then a
/// gather: `M = [3, 1]` (the shifted box reaches 3 rows), so extents from `[8, 4]` are large.
fn chain(shape: &[usize], border: Border) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let y = b
        .window_reduce(
            x,
            ReduceOp::Max,
            &Footprint::scipy_box(&[5, 3], &[1, 0]),
            border,
        )
        .unwrap();
    let z = b
        .window_reduce(
            y,
            ReduceOp::Min,
            &Footprint::scipy_box(&[3, 2], &[0, 0]),
            border,
        )
        .unwrap();
    let w = b.gather(z, &[1, -1], border).unwrap();
    b.finish(&[w]).unwrap()
}

fn lowered(g: &Graph) -> Lowered {
    lower_graph_with(g, StageStorage::ScratchRows, WindowBounds::default()).unwrap()
}

/// The shape-free part of a plan: optimised node kinds and dtypes, groups, kernel forms.
fn plan(g: &Graph) -> String {
    let l = lowered(g);
    let kinds: Vec<_> = l
        .optimized
        .nodes
        .iter()
        .map(|n| (n.kind.clone(), n.ty.dtype))
        .collect();
    let groups: Vec<_> = l
        .partition
        .groups
        .iter()
        .map(|gr| (gr.root, gr.inputs.clone()))
        .collect();
    format!("{kinds:?}\n{groups:?}\n{:?}", l.kernels)
}

#[test]
fn bound_runs_equal_eager_on_many_shapes() {
    let engine = Engine::new().with_threads(2);
    for (bi, border) in BORDERS.into_iter().enumerate() {
        let compiled = engine.compile(&chain(&[1, 2, 12, 9], border)).unwrap();
        let binding = compiled.binding().expect("a one-input uniform graph binds");
        assert_eq!(binding.large_from, vec![8, 4]);
        let shapes: [&[usize]; 7] = [
            &[1, 2, 12, 9],
            &[1, 1, 8, 4],
            &[2, 3, 9, 5],
            &[1, 1, 40, 4],
            &[1, 2, 8, 67],
            &[3, 1, 33, 17],
            &[1, 1, 100, 130],
        ];
        for (si, shape) in shapes.into_iter().enumerate() {
            assert!(binding.admits(shape), "{shape:?}");
            let x = window_data(shape, 100 * bi as u64 + si as u64, true);
            let fused = compiled
                .run_bound(&engine, std::slice::from_ref(&x))
                .unwrap();
            let want = eager::run(&chain(shape, border), std::slice::from_ref(&x)).unwrap();
            assert_eq!(
                first_difference(&fused[0], &want[0]),
                None,
                "{border} {shape:?}"
            );
            // Into a caller's buffer as well.
            let out = kiln_runtime::Tensor::zeros(DType::F32, shape);
            let into = compiled.run_bound_into(&engine, &[x], vec![out]).unwrap();
            assert_eq!(
                first_difference(&into[0], &want[0]),
                None,
                "{border} {shape:?}"
            );
        }
    }
}

#[test]
fn admitted_shapes_get_the_compiled_plan_and_the_threshold_is_needed() {
    let mut refused_differs = false;
    for border in BORDERS {
        let s0 = [1, 1, 20, 9];
        let p0 = plan(&chain(&s0, border));
        let binding = Engine::new()
            .compile(&chain(&s0, border))
            .unwrap()
            .binding()
            .cloned()
            .unwrap();
        for h in 1..=12 {
            for w in 1..=6 {
                let s = [2, 3, h, w];
                let p = plan(&chain(&s, border));
                if binding.admits(&s) {
                    assert_eq!(p, p0, "{border} {s:?}: an admitted shape plans otherwise");
                } else if p != p0 {
                    refused_differs = true;
                }
            }
        }
        // The boundary itself: the least large extents are admitted, one less is not.
        assert!(binding.admits(&[1, 1, 8, 4]) && binding.admits(&[5, 7, 8, 4]));
        assert!(!binding.admits(&[1, 1, 7, 4]) && !binding.admits(&[1, 1, 8, 3]));
    }
    assert!(
        refused_differs,
        "no refused shape plans otherwise: the threshold is untested"
    );
}

#[test]
fn refused_shapes_and_unbindable_graphs_are_typed_errors() {
    let engine = Engine::new();
    let small = engine.compile(&chain(&[1, 1, 5, 9], Border::Wrap)).unwrap();
    let b = small.binding().unwrap();
    // A small extent binds only to itself; large extents along the other axis still bind.
    assert!(b.admits(&[2, 2, 5, 40]) && !b.admits(&[1, 1, 6, 9]));
    let x = window_data(&[1, 1, 6, 9], 3, false);
    let e = small
        .run_bound(&engine, std::slice::from_ref(&x))
        .unwrap_err();
    assert!(matches!(e, RuntimeError::InputMismatch { .. }), "{e}");
    let e = small.run_bound(&engine, &[]).unwrap_err();
    assert!(matches!(e, RuntimeError::InputCount { .. }), "{e}");
    let wrong_dtype = kiln_runtime::Tensor::zeros(DType::F64, &[1, 1, 5, 9]);
    assert!(small.run_bound(&engine, &[wrong_dtype]).is_err());

    // Two inputs: no binding.
    let mut gb = GraphBuilder::new();
    let p = gb.input(DType::F32, &[1, 1, 6, 6]).unwrap();
    let q = gb.input(DType::F32, &[1, 1, 6, 6]).unwrap();
    let s = gb.binary(kiln_ir::BinaryOp::Add, p, q).unwrap();
    let two = engine.compile(&gb.finish(&[s]).unwrap()).unwrap();
    assert!(two.binding().is_none());
    assert!(matches!(
        two.run_bound(&engine, std::slice::from_ref(&x))
            .unwrap_err(),
        RuntimeError::Shape(_)
    ));
    // An axis reduction changes the shape: no binding, and a bound run says why.
    let mut gb = GraphBuilder::new();
    let p = gb.input(DType::F32, &[1, 1, 6, 9]).unwrap();
    let r = gb.axis_reduce(p, 3, ReduceOp::Sum).unwrap();
    let red = engine.compile(&gb.finish(&[r]).unwrap()).unwrap();
    assert!(red.binding().is_none());
    let e = red.run_bound(&engine, &[x]).unwrap_err();
    assert!(matches!(e, RuntimeError::Shape(_)), "{e}");
    assert!(matches!(
        red.optimized.nodes.last().unwrap().kind,
        NodeKind::AxisReduce { .. }
    ));
}

/// `run_bound_into_raw` writes the caller's memory: directly for stencil kernels, through a
/// copy for a scan (line kernel) and for a graph whose output is its input; the bits are
/// eager's. Bad destinations are typed errors.
#[test]
fn raw_outputs_are_written_in_place() {
    let engine = Engine::new().with_threads(2);
    let scan = |shape: &[usize]| {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, shape).unwrap();
        let y = b.scan(x, 3, ReduceOp::Max).unwrap();
        b.finish(&[y]).unwrap()
    };
    let identity = |shape: &[usize]| {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, shape).unwrap();
        b.finish(&[x]).unwrap()
    };
    type Build = Box<dyn Fn(&[usize]) -> Graph>;
    let graphs: [(&str, Build); 3] = [
        ("stencil", Box::new(|s: &[usize]| chain(s, Border::Reflect))),
        ("scan", Box::new(scan)),
        ("identity", Box::new(identity)),
    ];
    for (name, build) in &graphs {
        let compiled = engine.compile(&build(&[1, 2, 12, 9])).unwrap();
        for (si, shape) in [[1usize, 2, 12, 9], [2, 1, 30, 11]].into_iter().enumerate() {
            let x = window_data(&shape, 40 + si as u64, true);
            let want = eager::run(&build(&shape), std::slice::from_ref(&x)).unwrap();
            let mut out = vec![f32::from_bits(0x7fc0_1234); shape.iter().product()];
            // SAFETY: `out` holds the input's element count of f32, is not read or written
            // during the call and is distinct from `x`'s storage.
            unsafe {
                compiled
                    .run_bound_into_raw(&engine, std::slice::from_ref(&x), out.as_mut_ptr().cast())
                    .unwrap();
            }
            let got = kiln_runtime::Tensor::from_f32(out, &shape).unwrap();
            assert_eq!(first_difference(&got, &want[0]), None, "{name} {shape:?}");
        }
    }
    let compiled = engine.compile(&chain(&[1, 1, 9, 9], Border::Wrap)).unwrap();
    let x = window_data(&[1, 1, 9, 9], 2, false);
    let mut out = vec![0f32; 82];
    // SAFETY: every call is rejected before anything is written.
    unsafe {
        let p: *mut u8 = out.as_mut_ptr().cast();
        let one = std::slice::from_ref(&x);
        assert!(compiled
            .run_bound_into_raw(&engine, one, std::ptr::null_mut())
            .is_err());
        assert!(compiled.run_bound_into_raw(&engine, one, p.add(2)).is_err());
        let other = window_data(&[1, 1, 5, 9], 2, false);
        assert!(compiled
            .run_bound_into_raw(&engine, std::slice::from_ref(&other), p)
            .is_err());
    }
}
