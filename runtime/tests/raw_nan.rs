//! Float arithmetic that only feeds NaN-safe users skips its NaN canonicalisation in the CPU
//! backend (`rowfn::raw_nan`); the outputs must still be eager's bits: canonical NaN wherever
//! a NaN reaches an output, through arithmetic chains, casts, min/max and selects, with NaN
//! payloads of both signs in the data.

use kiln_ir::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};
use kiln_ir::{BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, NodeId, ReduceOp, UnaryOp};
use kiln_runtime::eager;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

/// f32 data where a third of the elements are NaNs with payloads (both signs), the rest
/// ordinary values, zeros and infinities.
fn nasty(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            match s % 9 {
                0 => f32::from_bits(0x7fc0_0000 | (s >> 9)),
                1 => f32::from_bits(0xff80_0001 | (s >> 10)),
                2 => f32::from_bits(0x7f80_0001),
                3 => 0.0,
                4 => f32::INFINITY,
                5 => -f32::INFINITY,
                _ => (s % 1000) as f32 * 0.37 - 150.0,
            }
        })
        .collect()
}

fn graph(build: impl Fn(&mut GraphBuilder, NodeId, NodeId) -> NodeId) -> Graph {
    let mut b = GraphBuilder::new();
    let shape = [1, 1, 5, 37];
    let x = b.input(DType::F32, &shape).unwrap();
    let y = b.input(DType::F32, &shape).unwrap();
    let out = build(&mut b, x, y);
    b.finish(&[out]).unwrap()
}

/// Runs eager and fused; asserts equal bits, returns the fused kernel's description.
fn check(g: &Graph, what: &str) -> String {
    let engine = Engine::new();
    let n = 5 * 37;
    let x = Tensor::from_storage(Storage::F32(nasty(n, 1)), &[1, 1, 5, 37]).unwrap();
    let y = Tensor::from_storage(Storage::F32(nasty(n, 2)), &[1, 1, 5, 37]).unwrap();
    let want = eager::run(g, &[x.clone(), y.clone()]).unwrap();
    let got = engine.run(g, &[x, y]).unwrap();
    if let Some(d) = first_difference(&want[0], &got[0]) {
        panic!("{what}: eager vs fused differ at {d}");
    }
    // Every NaN in the output is the canonical one.
    match &**want[0].storage() {
        Storage::F32(v) => assert!(v
            .iter()
            .all(|f| !f.is_nan() || f.to_bits() == CANONICAL_NAN_F32)),
        Storage::F64(v) => assert!(v
            .iter()
            .all(|f| !f.is_nan() || f.to_bits() == CANONICAL_NAN_F64)),
        _ => {}
    }
    let c = engine.compile(g).unwrap();
    c.kernels.iter().map(|k| k.describe()).collect()
}

const RAW: &str = "without canonical NaN";

#[test]
fn arithmetic_chains_end_canonical() {
    // sqrt((x + y) * x - y / x): four intermediates skip canonicalisation, the sqrt does not.
    let g = graph(|b, x, y| {
        let s = b.binary(BinaryOp::Add, x, y).unwrap();
        let m = b.binary(BinaryOp::Mul, s, x).unwrap();
        let d = b.binary(BinaryOp::Div, y, x).unwrap();
        let r = b.binary(BinaryOp::Sub, m, d).unwrap();
        let n = b.unary(UnaryOp::Neg, r).unwrap();
        b.unary(UnaryOp::Sqrt, n).unwrap()
    });
    assert!(check(&g, "chain").contains(RAW));
}

#[test]
fn selected_values_stay_canonical() {
    // A select passes its operand's bits on: the sum it selects must be canonical.
    let g = graph(|b, x, y| {
        let s = b.binary(BinaryOp::Add, x, y).unwrap();
        let c = b.binary(BinaryOp::Lt, x, y).unwrap();
        let z = b
            .constant_like(kiln_ir::Scalar::F32(2.5f32.to_bits()), x)
            .unwrap();
        b.select(c, s, z).unwrap()
    });
    check(&g, "select");
}

#[test]
fn casts_min_max_and_tests_are_nan_safe_users() {
    let g = graph(|b, x, y| {
        let s = b.binary(BinaryOp::Sub, x, y).unwrap();
        let m = b.binary(BinaryOp::Min, s, y).unwrap();
        let p = b.binary(BinaryOp::Mul, x, x).unwrap();
        let q = b.binary(BinaryOp::Max, p, m).unwrap();
        b.cast(q, DType::F64).unwrap()
    });
    assert!(check(&g, "min/max").contains(RAW));
    let g = graph(|b, x, y| {
        let s = b.binary(BinaryOp::Add, x, y).unwrap();
        let w = b.cast(s, DType::F64).unwrap();
        let t = b.unary(UnaryOp::IsNan, s).unwrap();
        let z = b
            .constant_like(kiln_ir::Scalar::F64(0.5f64.to_bits()), w)
            .unwrap();
        b.select(t, z, w).unwrap()
    });
    check(&g, "cast + is_nan");
}

/// A stage whose every later reader is NaN-safe is stored with its NaN as the hardware
/// gives it (`rowfn::raw_result`); a stage that a later stage passes on (a gather is a move)
/// or feeds to arithmetic must be stored canonical.
#[test]
fn stage_results_are_raw_only_for_nan_safe_readers() {
    const STORED_RAW: &str = "result stored for NaN-safe later stages";
    let col = Footprint::scipy_box(&[3, 1], &[0, 0]);
    let row = Footprint::scipy_box(&[1, 3], &[0, 0]);
    // min over rows of a min over columns: the first stage feeds only a min.
    let g = graph(|b, x, _| {
        let m = b
            .window_reduce(x, ReduceOp::Min, &row, Border::Reflect)
            .unwrap();
        b.window_reduce(m, ReduceOp::Min, &col, Border::Nearest)
            .unwrap()
    });
    assert!(check(&g, "min of min").contains(STORED_RAW));
    // A max of the min stage is NaN-safe too.
    let g = graph(|b, x, _| {
        let m = b
            .window_reduce(x, ReduceOp::Min, &row, Border::Reflect)
            .unwrap();
        b.window_reduce(m, ReduceOp::Max, &col, Border::Mirror)
            .unwrap()
    });
    assert!(check(&g, "max of min").contains(STORED_RAW));
    // The later stage is a gather of it: the stored bits are the output's.
    let g = graph(|b, x, _| {
        let m = b
            .window_reduce(x, ReduceOp::Min, &row, Border::Reflect)
            .unwrap();
        b.gather(m, &[1, 0], Border::Reflect).unwrap()
    });
    assert!(!check(&g, "gather of min").contains(STORED_RAW));
    // The later stage selects it (a select passes its operand's bits on).
    let g = graph(|b, x, y| {
        let m = b
            .window_reduce(x, ReduceOp::Min, &row, Border::Reflect)
            .unwrap();
        let up = b.gather(m, &[-1, 0], Border::Nearest).unwrap();
        let c = b.binary(BinaryOp::Lt, up, y).unwrap();
        let z = b
            .constant_like(kiln_ir::Scalar::F32(2.5f32.to_bits()), x)
            .unwrap();
        b.select(c, z, up).unwrap()
    });
    assert!(!check(&g, "select of min").contains(STORED_RAW));
}

/// NaN masks read through a constant border (`window any(not(is_finite(x)))`, kornia's
/// median guard): the lowering drops `select(in_range, ..)` where the shifted tree already
/// equals the border constant out of range, and keeps it where it does not. Both must give
/// eager's bits along every edge, and the median guarded by the mask too.
#[test]
fn nan_masks_through_constant_borders_match_eager() {
    let boxed = Footprint::scipy_box(&[3, 3], &[0, 0]);
    for border_value in [false, true] {
        for test in [UnaryOp::IsFinite, UnaryOp::IsNan] {
            for negate in [false, true] {
                let g = graph(|b, x, y| {
                    let t = b.unary(test, x).unwrap();
                    let t = if negate {
                        b.unary(UnaryOp::Not, t).unwrap()
                    } else {
                        t
                    };
                    let border = Border::Constant(kiln_ir::Scalar::Bool(border_value));
                    let any = b.window_reduce(t, ReduceOp::Any, &boxed, border).unwrap();
                    let all = b.window_reduce(t, ReduceOp::All, &boxed, border).unwrap();
                    let both = b.binary(BinaryOp::Ne, any, all).unwrap();
                    // A guarded min window, as in the median: the select reads the mask.
                    let zero = Border::Constant(kiln_ir::Scalar::F32(0));
                    let m = b.window_reduce(y, ReduceOp::Min, &boxed, zero).unwrap();
                    let nan = b
                        .constant_like(kiln_ir::Scalar::F32(CANONICAL_NAN_F32), m)
                        .unwrap();
                    b.select(both, nan, m).unwrap()
                });
                check(&g, &format!("{test:?} not={negate} border={border_value}"));
            }
        }
    }
}
