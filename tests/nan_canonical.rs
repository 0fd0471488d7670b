//! Arithmetic whose non-NaN results have a clear sign bit (squares, their sums, products and
//! quotients, square roots, absolute values; `codegen/src/cpu/rowfn.rs::sign_clear`) has its
//! NaN canonicalised by one unsigned minimum of the bits instead of a NaN test and a blend.
//! Every pairing of special values (NaNs of both signs, with payloads and signalling,
//! infinities, zeros of both signs, subnormals, the extremes) through such graphs gives
//! eager's bits, the canonical NaN included, on the vector interior and at the borders.

mod common;

use common::SPECIAL_F32;
use kiln::ir::{BinaryOp, DType, Graph, GraphBuilder, NodeId, UnaryOp};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

/// Values paired with each other: the shared specials and a few more NaN kinds and signs.
fn values() -> Vec<f32> {
    let mut v: Vec<u32> = SPECIAL_F32.to_vec();
    v.extend([
        0xff80_0001, // negative signalling NaN
        0x7fc1_2345, // quiet NaN with a payload
        0xbf80_0000, // -1.0
        0x4080_0000, // 4.0
    ]);
    v.into_iter().map(f32::from_bits).collect()
}

/// Builds a graph from two inputs.
type Build = fn(&mut GraphBuilder, NodeId, NodeId) -> NodeId;

/// Graphs, and whether their result is canonicalised by the unsigned minimum (an absolute
/// value is a bit operation that keeps a signalling NaN, and a difference can be negative:
/// both keep the NaN test).
fn cases() -> Vec<(&'static str, Build, bool)> {
    fn sq(b: &mut GraphBuilder, x: NodeId) -> NodeId {
        b.binary(BinaryOp::Mul, x, x).unwrap()
    }
    vec![
        (
            "sqrt(x*x + y*y)",
            |b, x, y| {
                let (xx, yy) = (sq(b, x), sq(b, y));
                let s = b.binary(BinaryOp::Add, xx, yy).unwrap();
                b.unary(UnaryOp::Sqrt, s).unwrap()
            },
            true,
        ),
        (
            "abs(x) + y*y",
            |b, x, y| {
                let a = b.unary(UnaryOp::Abs, x).unwrap();
                let yy = sq(b, y);
                b.binary(BinaryOp::Add, a, yy).unwrap()
            },
            true,
        ),
        (
            "sqrt(abs(x))",
            |b, x, _| {
                let a = b.unary(UnaryOp::Abs, x).unwrap();
                b.unary(UnaryOp::Sqrt, a).unwrap()
            },
            true,
        ),
        (
            "(x*x) / (y*y)",
            |b, x, y| {
                let (xx, yy) = (sq(b, x), sq(b, y));
                b.binary(BinaryOp::Div, xx, yy).unwrap()
            },
            true,
        ),
        (
            "abs(x) * abs(y)",
            |b, x, y| {
                let (ax, ay) = (
                    b.unary(UnaryOp::Abs, x).unwrap(),
                    b.unary(UnaryOp::Abs, y).unwrap(),
                );
                b.binary(BinaryOp::Mul, ax, ay).unwrap()
            },
            true,
        ),
        ("abs(x)", |b, x, _| b.unary(UnaryOp::Abs, x).unwrap(), false),
        (
            "sqrt(x - y)",
            |b, x, y| {
                let d = b.binary(BinaryOp::Sub, x, y).unwrap();
                b.unary(UnaryOp::Sqrt, d).unwrap()
            },
            false,
        ),
    ]
}

/// `x[i][j] = v[j % n]`, `y[i][j] = v[i % n]`: every pairing, on rows wider than a vector.
fn inputs(h: usize, w: usize) -> (Tensor, Tensor) {
    let v = values();
    let n = v.len();
    let x: Vec<f32> = (0..h * w).map(|k| v[(k % w) % n]).collect();
    let y: Vec<f32> = (0..h * w).map(|k| v[(k / w) % n]).collect();
    let shape = [1, 1, h, w];
    (
        Tensor::from_f32(x, &shape).unwrap(),
        Tensor::from_f32(y, &shape).unwrap(),
    )
}

fn graph(build: Build, shape: &[usize]) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let y = b.input(DType::F32, shape).unwrap();
    let out = build(&mut b, x, y);
    b.finish(&[out]).unwrap()
}

#[test]
fn sign_clear_arithmetic_gives_eagers_canonical_nan() {
    let engine = Engine::new();
    let n = values().len();
    for (name, build, by_min) in cases() {
        for (h, w) in [(n, n), (n, 3 * n + 1), (n, 1)] {
            let shape = [1, 1, h, w];
            let g = graph(build, &shape);
            let (x, y) = inputs(h, w);
            let want = eager::run(&g, &[x.clone(), y.clone()]).unwrap();
            let compiled = engine.compile(&g).unwrap();
            let got = compiled.run(&engine, &[x, y]).unwrap();
            if let Some(d) = first_difference(&want[0], &got[0]) {
                panic!("{name} at {h}x{w}: {d}");
            }
            if w >= 4 {
                let d = compiled.kernels[0].describe();
                assert_eq!(
                    d.contains("canonicalised by an unsigned minimum"),
                    by_min,
                    "{name}: {d}"
                );
            }
        }
    }
}
