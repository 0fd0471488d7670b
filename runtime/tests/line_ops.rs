//! Line nodes added through the IR, eager and lowering only (no renderer change): the toy
//! running maximum reset by NaN, and a 1-D chamfer distance as a forward and a backward
//! line pass. The fused CPU engine must match eager bit for bit along every axis and both
//! directions; the lowered kernels must render to PTX and assemble with ptxas (found via
//! KILN_PTXAS like the other PTX tests; SKIP printed when absent).

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_codegen::{lower::lower, ptx, CompileOptions};
use kiln_ir::passes::fuse::fuse;
use kiln_ir::{
    BinaryOp, DType, Graph, GraphBuilder, LineKeep, LineOp, LineProgram, Scalar, UnaryOp,
};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::{Storage, Tensor};

/// `c' = isnan(x) ? -inf : max(c, x)`; keeps `max(c, x)` at each position (so a NaN shows
/// as the canonical NaN where it occurs) or the final carry.
fn running_max_reset(axis: usize, backward: bool, each: bool) -> LineProgram {
    LineProgram {
        axis,
        backward,
        init: vec![Scalar::f32(f32::NEG_INFINITY)],
        step: vec![
            LineOp::Unary(UnaryOp::IsNan, 1),              // 2
            LineOp::Binary(BinaryOp::Max, 0, 1),           // 3
            LineOp::Const(Scalar::f32(f32::NEG_INFINITY)), // 4
            LineOp::Select(2, 4, 3),                       // 5
        ],
        next: vec![5],
        keep: if each {
            LineKeep::Each(3)
        } else {
            LineKeep::Final(0)
        },
    }
}

/// One chamfer pass: `c' = y = min(c + 1, x)`, from `+inf`.
fn chamfer_pass(axis: usize, backward: bool) -> LineProgram {
    LineProgram {
        axis,
        backward,
        init: vec![Scalar::f32(f32::INFINITY)],
        step: vec![
            LineOp::Const(Scalar::f32(1.0)),     // 2
            LineOp::Binary(BinaryOp::Add, 0, 2), // 3
            LineOp::Binary(BinaryOp::Min, 3, 1), // 4
        ],
        next: vec![4],
        keep: LineKeep::Each(4),
    }
}

fn data(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut r = Rng::new(seed);
    let v: Vec<f32> = (0..n)
        .map(|_| {
            let k = r.next();
            match k % 7 {
                0 => f32::from_bits(SPECIAL_F32[(k / 7) as usize % 12]),
                1 => -0.0,
                _ => (k % 2003) as f32 * 0.25 - 200.0,
            }
        })
        .collect();
    Tensor::from_storage(Storage::F32(v), shape).unwrap()
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_scalars()
        .iter()
        .map(|s| match *s {
            Scalar::F32(b) => b as u64,
            Scalar::F64(b) => b,
            Scalar::U8(v) => v as u64,
            Scalar::Bool(v) => v as u64,
            other => other.to_i64().unwrap() as u64,
        })
        .collect()
}

fn check(g: &Graph, x: &Tensor, what: &str) {
    let want = eager::run(g, std::slice::from_ref(x)).unwrap();
    let got = Engine::new()
        .run(g, std::slice::from_ref(x))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(want.len(), got.len());
    for (w, f) in want.iter().zip(&got) {
        assert_eq!(w.shape(), f.shape(), "{what}");
        assert_eq!(bits(w), bits(f), "{what}");
    }
}

const SHAPES: [[usize; 4]; 4] = [[1, 1, 1, 1], [2, 3, 5, 7], [1, 1, 3, 300], [1, 2, 40, 9]];

#[test]
fn running_max_with_nan_reset_matches_eager() {
    for shape in SHAPES {
        let x0 = data(&shape, shape.iter().sum::<usize>() as u64);
        let xt = x0.with_memory_order(&[0, 2, 3, 1]).unwrap();
        for axis in 0..4 {
            for backward in [false, true] {
                for each in [true, false] {
                    let mut b = GraphBuilder::new();
                    let x = b.input(DType::F32, &shape).unwrap();
                    let y = b.line(x, running_max_reset(axis, backward, each)).unwrap();
                    let g = b.finish(&[y]).unwrap();
                    for input in [&x0, &xt] {
                        check(
                            &g,
                            input,
                            &format!("{shape:?} axis {axis} backward {backward} each {each}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn running_max_resets_after_nan() {
    // Hand-computed: a NaN restarts the maximum.
    let x = Tensor::from_f32(vec![1.0, 3.0, 2.0, f32::NAN, 0.5, -1.0], &[1, 1, 1, 6]).unwrap();
    let mut b = GraphBuilder::new();
    let xi = b.input(DType::F32, &[1, 1, 1, 6]).unwrap();
    let y = b.line(xi, running_max_reset(3, false, true)).unwrap();
    let g = b.finish(&[y]).unwrap();
    let got = Engine::new().run(&g, std::slice::from_ref(&x)).unwrap();
    let want = [1.0f32, 3.0, 3.0, f32::from_bits(0x7fc0_0000), 0.5, 0.5];
    let want: Vec<u64> = want.iter().map(|v| v.to_bits() as u64).collect();
    assert_eq!(bits(&got[0]), want);
    check(&g, &x, "hand-computed");
}

#[test]
fn chamfer_1d_forward_backward_matches_eager_and_the_distance() {
    for shape in SHAPES {
        for axis in [2, 3] {
            // Features (0) at every 11th element, +inf elsewhere.
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|i| if i % 11 == 3 { 0.0 } else { f32::INFINITY })
                .collect();
            let x0 = Tensor::from_f32(v, &shape).unwrap();
            let mut b = GraphBuilder::new();
            let x = b.input(DType::F32, &shape).unwrap();
            let f = b.line(x, chamfer_pass(axis, false)).unwrap();
            let d = b.line(f, chamfer_pass(axis, true)).unwrap();
            let g = b.finish(&[d]).unwrap();
            check(&g, &x0, &format!("chamfer {shape:?} axis {axis}"));
            // The two passes give the distance to the nearest feature along the axis.
            let got = Engine::new().run(&g, std::slice::from_ref(&x0)).unwrap();
            let xs = x0.to_scalars();
            let gs = got[0].to_scalars();
            let strides = kiln_runtime::tensor::contiguous_strides(&shape);
            for (i, g) in gs.iter().enumerate() {
                let pos = (i / strides[axis]) % shape[axis];
                let start = i - pos * strides[axis];
                let mut best = f32::INFINITY;
                for k in 0..shape[axis] {
                    if xs[start + k * strides[axis]] == Scalar::f32(0.0) {
                        best = best.min((k as f32 - pos as f32).abs());
                    }
                }
                assert_eq!(*g, Scalar::f32(best), "{shape:?} axis {axis} at {i}");
            }
        }
    }
}

#[test]
fn lowered_line_kernels_assemble_in_ptx() {
    let mut kernels = Vec::new();
    for (axis, backward, each) in [(3, false, true), (2, true, false), (0, true, true)] {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[2, 3, 5, 7]).unwrap();
        let y = b.line(x, running_max_reset(axis, backward, each)).unwrap();
        let y = b.line(y, chamfer_pass(axis, !backward)).unwrap();
        let g = b.finish(&[y]).unwrap();
        for grp in fuse(&g).groups {
            kernels.push(lower(&g, &grp).unwrap());
        }
    }
    let target = ptx::PtxTarget::sm80();
    let modules: Vec<_> = kernels
        .iter()
        .map(|k| ptx::render(k, &target, &CompileOptions::default()).unwrap())
        .collect();
    let Some(ptxas) = ptx::ptxas::find_ptxas() else {
        println!(
            "SKIP: ptxas not found (set KILN_PTXAS); rendered {} line kernels only",
            modules.len()
        );
        return;
    };
    for m in &modules {
        ptx::ptxas::assemble_with(&ptxas, &m.text, target.sm)
            .unwrap_or_else(|e| panic!("ptxas: {e}\n{}", m.text));
    }
}
