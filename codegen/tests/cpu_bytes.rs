//! The 16-lane byte path (stages of u8 and bool values on `I8X16`) against the scalar
//! reference: every op it takes, at widths around multiples of 16 (full vectors, the
//! overlapped last vector, interiors narrower than one vector), dense and strided rows.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::compile;
use kiln_codegen::kernel::{Op, Source, ValueId};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

const IN0: Source = Source::Input(0);
const IN1: Source = Source::Input(1);

const WIDTHS: [usize; 10] = [1, 2, 15, 16, 17, 18, 31, 33, 47, 70];

/// Compiles `k`, checks that its stage runs on I8X16, and compares every layout and width
/// with the reference.
fn check(k: &kiln_codegen::Kernel, dtypes: &[DType], seed: u64, what: &str) {
    let ck = compile(k, &CompileOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        ck.describe().contains("I8X16"),
        "{what}: not on the byte path\n{}",
        ck.describe()
    );
    let mut r = Rng(seed);
    for w in WIDTHS {
        for h in [1, 5] {
            let mut inputs: Vec<Img> = dtypes
                .iter()
                .map(|&d| rand_img(&mut r, d, h, w, false))
                .collect();
            // Edge bytes: 0, 1, 127, 128, 255 (signed/unsigned confusions show here).
            for img in &mut inputs {
                if img.dtype == DType::U8 {
                    let n = img.data.len();
                    for (i, v) in [0u8, 255, 128, 127, 1, 0, 255].iter().enumerate() {
                        img.data[(i * 7) % n] = Scalar::U8(*v);
                    }
                }
            }
            let want = ref_all(k, &inputs, h, w);
            for lay in LAYOUTS {
                let got = run_all(&ck, &inputs, h, w, lay);
                if let Some(m) = diff(&got, &want) {
                    panic!("{what} {h}x{w} {lay:?}: {m}\n{}", ck.describe());
                }
            }
        }
    }
}

#[test]
fn binary_erosion_cross_on_bools() {
    // The scipy binary_erosion 3x3 cross: and of five loads, border constant false.
    let f = Border::Constant(Scalar::Bool(false));
    let mut s = StageB::default();
    let n = s.load(IN0, DType::Bool, &[-1, 0], f);
    let wv = s.load(IN0, DType::Bool, &[0, -1], f);
    let c = s.load(IN0, DType::Bool, &[0, 0], Border::Nearest);
    let e = s.load(IN0, DType::Bool, &[0, 1], f);
    let so = s.load(IN0, DType::Bool, &[1, 0], f);
    let a = s.bin(BinaryOp::And, n, wv);
    let b = s.bin(BinaryOp::And, c, e);
    let ab = s.bin(BinaryOp::And, a, b);
    let r = s.bin(BinaryOp::And, so, ab);
    check(
        &stencil(4, &[DType::Bool], s.finish(r)),
        &[DType::Bool],
        1,
        "erosion",
    );
}

#[test]
fn every_binary_op_on_u8_and_bool() {
    for d in [DType::U8, DType::Bool] {
        for op in [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Min,
            BinaryOp::Max,
            BinaryOp::And,
            BinaryOp::Or,
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Eq,
            BinaryOp::Ne,
        ] {
            let arith = matches!(op, BinaryOp::Add | BinaryOp::Sub);
            let logic = matches!(op, BinaryOp::And | BinaryOp::Or);
            if (arith && d == DType::Bool) || (logic && d == DType::U8) {
                continue;
            }
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, -1], Border::Reflect);
            let b = s.load(IN1, d, &[0, 2], Border::Wrap);
            let r = s.bin(op, a, b);
            let k = stencil(4, &[d, d], s.finish(r));
            check(&k, &[d, d], 7, &format!("{op:?} {d}"));
        }
    }
}

#[test]
fn selects_casts_negation_and_comparison_masks() {
    // u8: compare -> select (mask reused), neg, abs, cast to bool and back, not.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::U8, &[0, 0], Border::Nearest);
    let b = s.load(IN1, DType::U8, &[1, 1], Border::Constant(Scalar::U8(200)));
    let gt = s.bin(BinaryOp::Gt, a, b);
    let na = s.un(UnaryOp::Neg, a);
    let ab = s.un(UnaryOp::Abs, b);
    let sel = s.push(Op::Select(gt, na, ab), DType::U8);
    let cb = s.push(Op::Cast(sel), DType::Bool);
    let ncb = s.un(UnaryOp::Not, cb);
    let both = s.bin(BinaryOp::Or, ncb, gt);
    let back = s.push(Op::Cast(both), DType::U8);
    let r = s.bin(BinaryOp::Add, back, sel);
    check(
        &stencil(4, &[DType::U8, DType::U8], s.finish(r)),
        &[DType::U8, DType::U8],
        3,
        "select/cast u8",
    );

    // bool select over bools, constants folded and not, bool min/max, eq of bools.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::Bool, &[0, -2], Border::Mirror);
    let b = s.load(
        IN1,
        DType::Bool,
        &[-1, 3],
        Border::Constant(Scalar::Bool(true)),
    );
    let t = s.push(Op::Const(Scalar::Bool(true)), DType::Bool);
    let f = s.push(Op::Const(Scalar::Bool(false)), DType::Bool);
    let at = s.bin(BinaryOp::And, a, t);
    let bf = s.bin(BinaryOp::Or, b, f);
    let nt = s.un(UnaryOp::Not, t);
    let x = s.bin(BinaryOp::Or, at, nt);
    let mn = s.bin(BinaryOp::Min, x, bf);
    let mx = s.bin(BinaryOp::Max, x, bf);
    let eq = s.bin(BinaryOp::Eq, mn, mx);
    let lt = s.bin(BinaryOp::Lt, a, b);
    let sel = s.push(Op::Select(eq, lt, bf), DType::Bool);
    let r = s.push(Op::Select(nt, a, sel), DType::Bool);
    check(
        &stencil(4, &[DType::Bool, DType::Bool], s.finish(r)),
        &[DType::Bool, DType::Bool],
        4,
        "bool logic",
    );
}

#[test]
fn in_range_tests_and_outer_flags() {
    // select(in_range(o), x at o, cval): the pointwise-producer-through-constant-border form,
    // with outer offsets (flag bytes) and column offsets (interior: known true).
    let c = Scalar::U8(9);
    let mut s = StageB::default();
    let mut acc: Option<ValueId> = None;
    for (dy, dx) in [(-1, 0), (0, -1), (0, 1), (1, 0), (2, 3)] {
        let x = s.load(IN0, DType::U8, &[dy, dx], Border::Constant(c));
        let r = s.push(Op::InRange(vec![dy, dx]), DType::Bool);
        let k = s.push(Op::Const(c), DType::U8);
        let v = s.push(Op::Select(r, x, k), DType::U8);
        acc = Some(match acc {
            None => v,
            Some(a) => s.bin(BinaryOp::Max, a, v),
        });
    }
    let k = stencil(4, &[DType::U8], s.finish(acc.unwrap()));
    check(&k, &[DType::U8], 5, "in_range u8");
}

#[test]
fn rank3_single_spatial_axis() {
    let mut s = StageB::default();
    let a = s.load(IN0, DType::U8, &[-3], Border::Reflect);
    let b = s.load(IN0, DType::U8, &[4], Border::Nearest);
    let r = s.bin(BinaryOp::Min, a, b);
    let k = stencil(3, &[DType::U8], s.finish(r));
    check(&k, &[DType::U8], 6, "rank 3");
}

#[test]
fn planted_comparator_fault_is_visible_on_the_byte_path() {
    // The fuzzer's SwapComparator fault must still change u8 min/max results when the stage
    // runs on I8X16 (otherwise the fuzzer's self-test would lose its teeth here).
    let mut s = StageB::default();
    let a = s.load(IN0, DType::U8, &[0, 0], Border::Nearest);
    let b = s.load(IN1, DType::U8, &[0, 0], Border::Nearest);
    let lo = s.bin(BinaryOp::Min, a, b);
    let hi = s.bin(BinaryOp::Max, a, b);
    let r = s.bin(BinaryOp::Sub, hi, lo);
    let k = stencil(4, &[DType::U8, DType::U8], s.finish(r));
    let opts = CompileOptions {
        fault: Some(Fault::SwapComparator),
        ..Default::default()
    };
    let ck = compile(&k, &opts).unwrap();
    assert!(ck.describe().contains("I8X16"));
    let (h, w) = (2, 40);
    let mut r = Rng(8);
    let inputs = vec![
        rand_img(&mut r, DType::U8, h, w, false),
        rand_img(&mut r, DType::U8, h, w, false),
    ];
    let want = ref_all(&k, &inputs, h, w);
    let got = run_all(&ck, &inputs, h, w, DENSE);
    assert!(diff(&got, &want).is_some(), "fault had no effect");
}

#[test]
fn stages_with_multiply_or_divide_stay_scalar_and_exact() {
    // x86 has no byte multiply: such stages keep the scalar interior.
    for op in [BinaryOp::Mul, BinaryOp::Div] {
        let mut s = StageB::default();
        let a = s.load(IN0, DType::U8, &[0, 1], Border::Reflect);
        let b = s.load(IN1, DType::U8, &[0, 0], Border::Nearest);
        let r = s.bin(op, a, b);
        let k = stencil(4, &[DType::U8, DType::U8], s.finish(r));
        let ck = compile(&k, &CompileOptions::default()).unwrap();
        assert!(!ck.describe().contains("I8X16"), "{op:?}");
        let mut r = Rng(9);
        let inputs = vec![
            rand_img(&mut r, DType::U8, 3, 33, false),
            rand_img(&mut r, DType::U8, 3, 33, false),
        ];
        let want = ref_all(&k, &inputs, 3, 33);
        assert_eq!(diff(&run_all(&ck, &inputs, 3, 33, DENSE), &want), None);
    }
}
