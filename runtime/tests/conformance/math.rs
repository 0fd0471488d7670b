//! Conformance cases for `exp` and `log`: eager (`kiln_ir::math`) against every runner, bit
//! for bit, pointwise, inside stencils (a gather of an exp under a reflecting border), inside
//! axis reductions and scans (a log-sum-exp along an axis), f32 and f64, on the suite's data
//! (specials, ties, values across the overflow and underflow thresholds) and on random bit
//! patterns (every exponent, NaN payloads, subnormals). Exactness: `first_difference`.
use kiln_ir::{BinaryOp, Border, DType, GraphBuilder, ReduceOp, Scalar, UnaryOp};
use kiln_runtime::{Storage, Tensor};

use super::{check, check_sets, Runner, SHAPES_2D};
use crate::common::Rng;

/// Tensors of random bit patterns.
fn random_bits(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut r = Rng::new(seed);
    let storage = match dtype {
        DType::F64 => Storage::F64(
            (0..n)
                .map(|_| f64::from_bits((r.next() << 33) ^ (r.next() << 2) ^ r.next()))
                .collect(),
        ),
        _ => Storage::F32(
            (0..n)
                .map(|_| f32::from_bits(((r.next() << 1) ^ r.next()) as u32))
                .collect(),
        ),
    };
    Tensor::from_storage(storage, shape).unwrap()
}

pub fn exp_and_log_pointwise_stencils_and_reductions(runners: &[&dyn Runner]) {
    for dtype in [DType::F32, DType::F64] {
        for shape in SHAPES_2D {
            let mut b = GraphBuilder::new();
            let x = b.input(dtype, &shape).unwrap();
            let e = b.unary(UnaryOp::Exp, x).unwrap();
            let l = b.unary(UnaryOp::Log, x).unwrap();
            let le = b.unary(UnaryOp::Log, e).unwrap();
            let a = b.unary(UnaryOp::Abs, x).unwrap();
            let el = b.unary(UnaryOp::Exp, l).unwrap();
            let g = b.gather(e, &[1, -1], Border::Reflect).unwrap();
            let mix = b.binary(BinaryOp::Add, g, el).unwrap();
            let la = b.unary(UnaryOp::Log, a).unwrap();
            // log of a sum of exps along the last axis.
            let s = b.axis_reduce(e, 3, ReduceOp::Sum).unwrap();
            let lse = b.unary(UnaryOp::Log, s).unwrap();
            let sc = b.scan(e, 2, ReduceOp::Sum).unwrap();
            let lsc = b.unary(UnaryOp::Log, sc).unwrap();
            let one = b.constant_like(Scalar::from_f64(dtype, 1.0), x).unwrap();
            let xp = b.binary(BinaryOp::Add, x, one).unwrap();
            let lxp = b.unary(UnaryOp::Log, xp).unwrap();
            let graph = b.finish(&[e, l, le, mix, la, lse, lsc, lxp]).unwrap();
            let what = format!("exp/log {dtype} {shape:?}");
            check(runners, &graph, &what);
            let sets: Vec<(String, Vec<Tensor>)> = (0..2)
                .map(|k| {
                    (
                        format!("random bits {k}"),
                        vec![random_bits(dtype, &shape, 101 + k)],
                    )
                })
                .collect();
            check_sets(runners, &graph, &what, &sets);
        }
    }
}
