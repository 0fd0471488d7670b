//! The eager executor against hand-computed values, one test per SEMANTICS.md rule.
//! Expected values are written out by hand or computed by a simple independent formula in
//! the test, never by the code under test.

use std::slice::from_ref;
use std::sync::Arc;

use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, Node, NodeId, NodeKind, ReduceOp,
    Scalar, TensorType, UnaryOp,
};
use kiln_runtime::eager::{check_inputs, run};
use kiln_runtime::{RuntimeError, Storage, Tensor};

const CNAN32: u32 = 0x7fc0_0000;
const CNAN64: u64 = 0x7ff8_0000_0000_0000;

fn run1(g: &Graph, inputs: &[Tensor]) -> Tensor {
    let mut out = run(g, inputs).expect("run");
    assert_eq!(out.len(), 1);
    out.remove(0)
}

fn bits32(t: &Tensor) -> Vec<u32> {
    t.to_scalars()
        .into_iter()
        .map(|s| match s {
            Scalar::F32(b) => b,
            other => panic!("expected f32, got {other}"),
        })
        .collect()
}

fn bits64(t: &Tensor) -> Vec<u64> {
    t.to_scalars()
        .into_iter()
        .map(|s| match s {
            Scalar::F64(b) => b,
            other => panic!("expected f64, got {other}"),
        })
        .collect()
}

fn u8s(t: &Tensor) -> Vec<u8> {
    t.to_scalars()
        .into_iter()
        .map(|s| match s {
            Scalar::U8(v) => v,
            other => panic!("expected u8, got {other}"),
        })
        .collect()
}

fn bools(t: &Tensor) -> Vec<bool> {
    t.to_scalars()
        .into_iter()
        .map(|s| match s {
            Scalar::Bool(v) => v,
            other => panic!("expected bool, got {other}"),
        })
        .collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    bits32(t).into_iter().map(f32::from_bits).collect()
}

fn row_f32(bits: &[u32]) -> Tensor {
    let v = bits.iter().map(|&b| f32::from_bits(b)).collect::<Vec<_>>();
    Tensor::from_f32(v, &[1, 1, bits.len()]).unwrap()
}

/// A graph `op(x, y)` over two f32 rows.
fn binary_graph(op: BinaryOp, dtype: DType, n: usize) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, &[1, 1, n]).unwrap();
    let y = b.input(dtype, &[1, 1, n]).unwrap();
    let z = b.binary(op, x, y).unwrap();
    b.finish(&[z]).unwrap()
}

fn unary_graph(op: UnaryOp, dtype: DType, n: usize) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, &[1, 1, n]).unwrap();
    let z = b.unary(op, x).unwrap();
    b.finish(&[z]).unwrap()
}

// ---------------------------------------------------------------- floating point

const PAYLOADS32: [u32; 4] = [0xffc0_1234, 0x7f80_0001, 0x7fc0_0001, 0xff80_0042];

#[test]
fn computed_f32_nans_are_canonical() {
    let n = PAYLOADS32.len();
    let nans = row_f32(&PAYLOADS32);
    let ones = Tensor::from_f32(vec![1.0; n], &[1, 1, n]).unwrap();
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Min,
        BinaryOp::Max,
    ] {
        let g = binary_graph(op, DType::F32, n);
        for (a, b) in [(&nans, &ones), (&ones, &nans), (&nans, &nans)] {
            let out = run1(&g, &[a.clone(), b.clone()]);
            assert_eq!(bits32(&out), vec![CNAN32; n], "{op:?}");
        }
    }
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt] {
        let out = run1(&unary_graph(op, DType::F32, n), from_ref(&nans));
        assert_eq!(bits32(&out), vec![CNAN32; n], "{op:?}");
    }
    // NaNs made from numbers (x86 makes the negative default NaN 0xffc00000 here).
    let a = Tensor::from_f32(vec![0.0, f32::INFINITY, -1.0, f32::INFINITY], &[1, 1, 4]).unwrap();
    let b = Tensor::from_f32(vec![0.0, f32::INFINITY, 1.0, 0.0], &[1, 1, 4]).unwrap();
    let div = run1(
        &binary_graph(BinaryOp::Div, DType::F32, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bits32(&div)[0], CNAN32);
    let sub = run1(
        &binary_graph(BinaryOp::Sub, DType::F32, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bits32(&sub)[1], CNAN32);
    let mul = run1(&binary_graph(BinaryOp::Mul, DType::F32, 4), &[a.clone(), b]);
    assert_eq!(bits32(&mul)[3], CNAN32);
    let sqrt = run1(&unary_graph(UnaryOp::Sqrt, DType::F32, 4), &[a]);
    assert_eq!(bits32(&sqrt)[2], CNAN32);
}

#[test]
fn computed_f64_nans_are_canonical() {
    let payloads = [0xfff8_0000_0000_1234u64, 0x7ff0_0000_0000_0001];
    let nans = Tensor::from_f64(
        payloads.iter().map(|&b| f64::from_bits(b)).collect(),
        &[1, 1, 2],
    )
    .unwrap();
    let twos = Tensor::from_f64(vec![2.0, -2.0], &[1, 1, 2]).unwrap();
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Min,
        BinaryOp::Max,
    ] {
        let out = run1(
            &binary_graph(op, DType::F64, 2),
            &[twos.clone(), nans.clone()],
        );
        assert_eq!(bits64(&out), vec![CNAN64; 2], "{op:?}");
    }
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sqrt] {
        let out = run1(&unary_graph(op, DType::F64, 2), from_ref(&nans));
        assert_eq!(bits64(&out), vec![CNAN64; 2], "{op:?}");
    }
    let sqrt = run1(&unary_graph(UnaryOp::Sqrt, DType::F64, 2), &[twos]);
    assert_eq!(bits64(&sqrt)[1], CNAN64);
    assert_eq!(bits64(&sqrt)[0], std::f64::consts::SQRT_2.to_bits());
}

#[test]
fn moves_keep_nan_payloads() {
    let n = PAYLOADS32.len();
    let x = row_f32(&PAYLOADS32);
    // input straight to output
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, n]).unwrap();
    let g = b.finish(&[i]).unwrap();
    assert_eq!(bits32(&run1(&g, from_ref(&x))), PAYLOADS32.to_vec());
    // gather (shift by one under wrap), select, same-dtype cast
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, n]).unwrap();
    let sh = b.gather(i, &[1], Border::Wrap).unwrap();
    let c = b.constant(Scalar::Bool(true), &[1, 1, n]).unwrap();
    let f = b.constant(Scalar::Bool(false), &[1, 1, n]).unwrap();
    let one = b.constant(Scalar::f32(1.0), &[1, 1, n]).unwrap();
    let s1 = b.select(c, i, one).unwrap();
    let s2 = b.select(f, one, i).unwrap();
    let same = b.cast(i, DType::F32).unwrap();
    let g = b.finish(&[sh, s1, s2, same]).unwrap();
    let out = run(&g, &[x]).unwrap();
    let shifted = vec![PAYLOADS32[1], PAYLOADS32[2], PAYLOADS32[3], PAYLOADS32[0]];
    assert_eq!(bits32(&out[0]), shifted);
    for t in &out[1..] {
        assert_eq!(bits32(t), PAYLOADS32.to_vec());
    }
    // a constant border's NaN payload is moved, not computed
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 2]).unwrap();
    let sh = b
        .gather(i, &[5], Border::Constant(Scalar::F32(0xffc0_0bad)))
        .unwrap();
    let g = b.finish(&[sh]).unwrap();
    let out = run1(&g, &[Tensor::from_f32(vec![1.0, 2.0], &[1, 1, 2]).unwrap()]);
    assert_eq!(bits32(&out), vec![0xffc0_0bad; 2]);
}

#[test]
fn min_max_order_negative_zero_below_positive_zero() {
    let a = Tensor::from_f32(vec![-0.0, 0.0, -0.0, 0.0], &[1, 1, 4]).unwrap();
    let b = Tensor::from_f32(vec![0.0, -0.0, -0.0, 0.0], &[1, 1, 4]).unwrap();
    let (neg, pos) = ((-0.0f32).to_bits(), 0.0f32.to_bits());
    let min = run1(
        &binary_graph(BinaryOp::Min, DType::F32, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bits32(&min), vec![neg, neg, neg, pos]);
    let max = run1(&binary_graph(BinaryOp::Max, DType::F32, 4), &[a, b]);
    assert_eq!(bits32(&max), vec![pos, pos, neg, pos]);
    // f64 as well, and a window min/max over {+0, -0}
    let a = Tensor::from_f64(vec![0.0, -0.0], &[1, 1, 2]).unwrap();
    let b = Tensor::from_f64(vec![-0.0, 0.0], &[1, 1, 2]).unwrap();
    let min = run1(
        &binary_graph(BinaryOp::Min, DType::F64, 2),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bits64(&min), vec![(-0.0f64).to_bits(); 2]);
    let max = run1(&binary_graph(BinaryOp::Max, DType::F64, 2), &[a, b]);
    assert_eq!(bits64(&max), vec![0.0f64.to_bits(); 2]);
    let mut g = GraphBuilder::new();
    let x = g.input(DType::F32, &[1, 1, 2]).unwrap();
    let fp = Footprint {
        offsets: vec![vec![0], vec![1]],
    };
    let wmin = g
        .window_reduce(x, ReduceOp::Min, &fp, Border::Wrap)
        .unwrap();
    let wmax = g
        .window_reduce(x, ReduceOp::Max, &fp, Border::Wrap)
        .unwrap();
    let g = g.finish(&[wmin, wmax]).unwrap();
    let out = run(
        &g,
        &[Tensor::from_f32(vec![0.0, -0.0], &[1, 1, 2]).unwrap()],
    )
    .unwrap();
    assert_eq!(bits32(&out[0]), vec![neg, neg]);
    assert_eq!(bits32(&out[1]), vec![pos, pos]);
}

#[test]
fn comparisons_are_ieee() {
    let nan = f32::from_bits(0x7fc0_0001);
    let a = Tensor::from_f32(vec![nan, -0.0, 1.0, 2.0, nan], &[1, 1, 5]).unwrap();
    let b = Tensor::from_f32(vec![1.0, 0.0, 2.0, 1.0, nan], &[1, 1, 5]).unwrap();
    let table = [
        (BinaryOp::Lt, [false, false, true, false, false]),
        (BinaryOp::Le, [false, true, true, false, false]),
        (BinaryOp::Gt, [false, false, false, true, false]),
        (BinaryOp::Ge, [false, true, false, true, false]),
        (BinaryOp::Eq, [false, true, false, false, false]),
        (BinaryOp::Ne, [true, false, true, true, true]),
    ];
    for (op, want) in table {
        let out = run1(&binary_graph(op, DType::F32, 5), &[a.clone(), b.clone()]);
        assert_eq!(bools(&out), want.to_vec(), "{op:?}");
    }
    // bool: false < true
    let a = Tensor::from_bool(vec![false, true, false, true], &[1, 1, 4]).unwrap();
    let b = Tensor::from_bool(vec![true, false, false, true], &[1, 1, 4]).unwrap();
    let lt = run1(
        &binary_graph(BinaryOp::Lt, DType::Bool, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bools(&lt), vec![true, false, false, false]);
    let min = run1(
        &binary_graph(BinaryOp::Min, DType::Bool, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bools(&min), vec![false, false, false, true]);
    let max = run1(
        &binary_graph(BinaryOp::Max, DType::Bool, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bools(&max), vec![true, true, false, true]);
    let and = run1(
        &binary_graph(BinaryOp::And, DType::Bool, 4),
        &[a.clone(), b.clone()],
    );
    assert_eq!(bools(&and), vec![false, false, false, true]);
    let or = run1(&binary_graph(BinaryOp::Or, DType::Bool, 4), &[a.clone(), b]);
    assert_eq!(bools(&or), vec![true, true, false, true]);
    let not = run1(&unary_graph(UnaryOp::Not, DType::Bool, 4), &[a]);
    assert_eq!(bools(&not), vec![true, false, true, false]);
}

#[test]
fn is_nan_and_is_finite() {
    let x = Tensor::from_f32(
        vec![
            f32::from_bits(0xff80_0001),
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            1e-45,
        ],
        &[1, 1, 5],
    )
    .unwrap();
    let nan = run1(&unary_graph(UnaryOp::IsNan, DType::F32, 5), from_ref(&x));
    assert_eq!(bools(&nan), vec![true, false, false, false, false]);
    let fin = run1(&unary_graph(UnaryOp::IsFinite, DType::F32, 5), &[x]);
    assert_eq!(bools(&fin), vec![false, false, false, true, true]);
}

#[test]
fn subnormals_are_kept() {
    // 2^-149 * 2 = 2^-148, both subnormal; no flush to zero.
    let a = Tensor::from_f32(vec![f32::from_bits(1), f32::from_bits(3)], &[1, 1, 2]).unwrap();
    let out = run1(&binary_graph(BinaryOp::Add, DType::F32, 2), &[a.clone(), a]);
    assert_eq!(bits32(&out), vec![2, 6]);
}

// ---------------------------------------------------------------- integers

#[test]
fn u8_arithmetic_wraps_and_divides_by_zero_to_zero() {
    let a = Tensor::from_u8(vec![200, 3, 16, 7, 7, 0, 255], &[1, 1, 7]).unwrap();
    let b = Tensor::from_u8(vec![100, 5, 17, 0, 2, 0, 255], &[1, 1, 7]).unwrap();
    let cases = [
        (BinaryOp::Add, vec![44, 8, 33, 7, 9, 0, 254]),
        (BinaryOp::Sub, vec![100, 254, 255, 7, 5, 0, 0]),
        (BinaryOp::Mul, vec![32, 15, 16, 0, 14, 0, 1]),
        (BinaryOp::Div, vec![2, 0, 0, 0, 3, 0, 1]),
        (BinaryOp::Min, vec![100, 3, 16, 0, 2, 0, 255]),
        (BinaryOp::Max, vec![200, 5, 17, 7, 7, 0, 255]),
    ];
    for (op, want) in cases {
        let out = run1(&binary_graph(op, DType::U8, 7), &[a.clone(), b.clone()]);
        assert_eq!(u8s(&out), want, "{op:?}");
    }
    let neg = run1(&unary_graph(UnaryOp::Neg, DType::U8, 7), from_ref(&a));
    assert_eq!(u8s(&neg), vec![56, 253, 240, 249, 249, 0, 1]);
    let abs = run1(&unary_graph(UnaryOp::Abs, DType::U8, 7), &[a]);
    assert_eq!(u8s(&abs), vec![200, 3, 16, 7, 7, 0, 255]);
}

// ---------------------------------------------------------------- casts

fn cast_graph(from: DType, to: DType, n: usize) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(from, &[1, 1, n]).unwrap();
    let y = b.cast(x, to).unwrap();
    b.finish(&[y]).unwrap()
}

#[test]
fn casts_follow_the_table() {
    let xs = vec![
        -1.5f32,
        -0.5,
        0.7,
        2.9,
        255.9,
        256.0,
        1e30,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0xffc0_1234),
        -0.0,
    ];
    let n = xs.len();
    let x = Tensor::from_f32(xs.clone(), &[1, 1, n]).unwrap();
    let to_u8 = run1(&cast_graph(DType::F32, DType::U8, n), from_ref(&x));
    assert_eq!(u8s(&to_u8), vec![0, 0, 0, 2, 255, 255, 255, 255, 0, 0, 0]);
    let to_bool = run1(&cast_graph(DType::F32, DType::Bool, n), from_ref(&x));
    assert_eq!(
        bools(&to_bool),
        vec![true, true, true, true, true, true, true, true, true, true, false]
    );
    let to_f64 = run1(&cast_graph(DType::F32, DType::F64, n), &[x]);
    let want: Vec<u64> = xs
        .iter()
        .map(|&v| {
            if v.is_nan() {
                CNAN64
            } else {
                (v as f64).to_bits()
            }
        })
        .collect();
    assert_eq!(bits64(&to_f64), want);

    // f64 -> f32 rounds to nearest even; NaN becomes canonical; tiny values round to 0.
    let one = 1.0f64;
    let ys = vec![
        one + 2f64.powi(-24),                  // halfway, ties to even: 1.0
        one + 3.0 * 2f64.powi(-24),            // halfway, ties to even: 1 + 2^-22
        one + 2f64.powi(-24) + 2f64.powi(-40), // above halfway: 1 + 2^-23
        f64::from_bits(0xfff8_0000_0000_0042),
        1e-320,
        -1e300,
        300.0,
        -3.7,
    ];
    let m = ys.len();
    let y = Tensor::from_f64(ys, &[1, 1, m]).unwrap();
    let to_f32 = run1(&cast_graph(DType::F64, DType::F32, m), from_ref(&y));
    assert_eq!(
        bits32(&to_f32),
        vec![
            1.0f32.to_bits(),
            (1.0f32 + 2f32.powi(-22)).to_bits(),
            (1.0f32 + 2f32.powi(-23)).to_bits(),
            CNAN32,
            0,
            f32::NEG_INFINITY.to_bits(),
            300.0f32.to_bits(),
            (-3.7f32).to_bits(),
        ]
    );
    let to_u8 = run1(&cast_graph(DType::F64, DType::U8, m), from_ref(&y));
    assert_eq!(u8s(&to_u8), vec![1, 1, 1, 0, 0, 0, 255, 0]);
    let to_bool = run1(&cast_graph(DType::F64, DType::Bool, m), &[y]);
    assert_eq!(bools(&to_bool), vec![true; m]);

    let u = Tensor::from_u8(vec![0, 1, 2, 255], &[1, 1, 4]).unwrap();
    assert_eq!(
        f32s(&run1(&cast_graph(DType::U8, DType::F32, 4), from_ref(&u))),
        vec![0.0, 1.0, 2.0, 255.0]
    );
    assert_eq!(
        bits64(&run1(&cast_graph(DType::U8, DType::F64, 4), from_ref(&u))),
        vec![
            0.0f64.to_bits(),
            1.0f64.to_bits(),
            2.0f64.to_bits(),
            255.0f64.to_bits()
        ]
    );
    assert_eq!(
        bools(&run1(&cast_graph(DType::U8, DType::Bool, 4), &[u])),
        vec![false, true, true, true]
    );
    let b = Tensor::from_bool(vec![false, true], &[1, 1, 2]).unwrap();
    assert_eq!(
        bits32(&run1(&cast_graph(DType::Bool, DType::F32, 2), from_ref(&b))),
        vec![0.0f32.to_bits(), 1.0f32.to_bits()]
    );
    assert_eq!(
        bits64(&run1(&cast_graph(DType::Bool, DType::F64, 2), from_ref(&b))),
        vec![0.0f64.to_bits(), 1.0f64.to_bits()]
    );
    assert_eq!(
        u8s(&run1(&cast_graph(DType::Bool, DType::U8, 2), &[b])),
        vec![0, 1]
    );
}

// ---------------------------------------------------------------- borders

/// The row `a b c d` = 1 2 3 4 (u8) extended over indices -12..=15 by hand, per mode
/// (`k` is the constant 99).
fn extended(border: &Border) -> &'static str {
    match border {
        Border::Reflect => "dcbaabcddcbaabcddcbaabcddcba",
        Border::Mirror => "abcdcbabcdcbabcdcbabcdcbabcd",
        Border::Nearest => "aaaaaaaaaaaaabcddddddddddddd",
        Border::Wrap => "abcdabcdabcdabcdabcdabcdabcd",
        Border::Constant(_) => "kkkkkkkkkkkkabcdkkkkkkkkkkkk",
    }
}

fn letter_value(c: u8) -> u8 {
    match c {
        b'a' => 1,
        b'b' => 2,
        b'c' => 3,
        b'd' => 4,
        b'k' => 99,
        _ => unreachable!(),
    }
}

#[test]
fn gather_remaps_each_border_beyond_one_period() {
    let x = Tensor::from_u8(vec![1, 2, 3, 4], &[1, 1, 4]).unwrap();
    for border in Border::all(Scalar::U8(99)) {
        let table = extended(&border).as_bytes();
        assert_eq!(table.len(), 28);
        for off in -12i64..=12 {
            let mut b = GraphBuilder::new();
            let i = b.input(DType::U8, &[1, 1, 4]).unwrap();
            let gth = b.gather(i, &[off], border).unwrap();
            let g = b.finish(&[gth]).unwrap();
            let got = u8s(&run1(&g, from_ref(&x)));
            let want: Vec<u8> = (0..4i64)
                .filter(|&p| (-12..=15).contains(&(p + off)))
                .map(|p| letter_value(table[(p + off + 12) as usize]))
                .collect();
            // Only positions whose source lies in the hand-written range are checked.
            let checked: Vec<u8> = (0..4i64)
                .filter(|&p| (-12..=15).contains(&(p + off)))
                .map(|p| got[p as usize])
                .collect();
            assert_eq!(checked, want, "{border} offset {off}");
        }
    }
}

#[test]
fn length_one_axis_reads_element_zero() {
    let x = Tensor::from_f32(vec![7.5], &[1, 1, 1]).unwrap();
    for border in Border::all(Scalar::f32(-2.0)) {
        for off in [-9i64, -2, -1, 0, 1, 2, 9] {
            let mut b = GraphBuilder::new();
            let i = b.input(DType::F32, &[1, 1, 1]).unwrap();
            let gth = b.gather(i, &[off], border).unwrap();
            let g = b.finish(&[gth]).unwrap();
            let got = f32s(&run1(&g, from_ref(&x)));
            let want = if matches!(border, Border::Constant(_)) && off != 0 {
                -2.0
            } else {
                7.5
            };
            assert_eq!(got, vec![want], "{border} offset {off}");
        }
    }
}

#[test]
fn constant_border_applies_when_any_axis_is_out_of_range() {
    // 3x3 image 1..9; gather at offset (dy, dx) under constant 0 and under nearest.
    let x = Tensor::from_u8((1..=9).collect(), &[1, 1, 3, 3]).unwrap();
    for (dy, dx) in [(1i64, 0i64), (0, -1), (-1, 1), (2, 2), (-4, 0)] {
        let mut b = GraphBuilder::new();
        let i = b.input(DType::U8, &[1, 1, 3, 3]).unwrap();
        let c = b
            .gather(i, &[dy, dx], Border::Constant(Scalar::U8(0)))
            .unwrap();
        let n = b.gather(i, &[dy, dx], Border::Nearest).unwrap();
        let g = b.finish(&[c, n]).unwrap();
        let out = run(&g, from_ref(&x)).unwrap();
        let (gc, gn) = (u8s(&out[0]), u8s(&out[1]));
        for y in 0..3i64 {
            for xx in 0..3i64 {
                let (sy, sx) = (y + dy, xx + dx);
                let inside = (0..3).contains(&sy) && (0..3).contains(&sx);
                let wc = if inside { (sy * 3 + sx + 1) as u8 } else { 0 };
                let (cy, cx) = (sy.clamp(0, 2), sx.clamp(0, 2));
                let wn = (cy * 3 + cx + 1) as u8;
                let k = (y * 3 + xx) as usize;
                assert_eq!(gc[k], wc, "constant ({dy},{dx}) at ({y},{xx})");
                assert_eq!(gn[k], wn, "nearest ({dy},{dx}) at ({y},{xx})");
            }
        }
    }
}

// ---------------------------------------------------------------- windows

#[test]
fn window_sum_is_a_left_fold_in_footprint_order() {
    // Centre element of [1e8, 1, -1e8]: (1e8 + 1) - 1e8 = 0 in f32 (1e8 + 1 rounds to 1e8),
    // while (-1e8 + 1e8) + 1 = 1.
    let x = Tensor::from_f32(vec![1e8, 1.0, -1e8], &[1, 1, 3]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 3]).unwrap();
    let fp1 = Footprint {
        offsets: vec![vec![-1], vec![0], vec![1]],
    };
    let fp2 = Footprint {
        offsets: vec![vec![1], vec![-1], vec![0]],
    };
    let k = Border::Constant(Scalar::f32(0.0));
    let w1 = b.window_reduce(i, ReduceOp::Sum, &fp1, k).unwrap();
    let w2 = b.window_reduce(i, ReduceOp::Sum, &fp2, k).unwrap();
    let g = b.finish(&[w1, w2]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(f32s(&out[0])[1], 0.0);
    assert_eq!(f32s(&out[1])[1], 1.0);
    // Left ends: fp1 at 0 is ((0 + 1e8) + 1) = 1e8; fp2 at 0 is ((1 + 0) + 1e8) = 1e8.
    assert_eq!(f32s(&out[0])[0], 1e8);
    // Right end: fp1 at 2 is ((1 + -1e8) + 0) = -1e8.
    assert_eq!(f32s(&out[0])[2], -1e8);
}

#[test]
fn window_sum_starts_from_the_first_element_not_zero() {
    // A one-offset sum of -0 is -0 (0 + -0 would be +0).
    let x = Tensor::from_f32(vec![-0.0, -0.0], &[1, 1, 2]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 2]).unwrap();
    let fp = Footprint {
        offsets: vec![vec![0]],
    };
    let w = b
        .window_reduce(i, ReduceOp::Sum, &fp, Border::Reflect)
        .unwrap();
    let fp2 = Footprint {
        offsets: vec![vec![0], vec![1]],
    };
    let w2 = b
        .window_reduce(i, ReduceOp::Sum, &fp2, Border::Reflect)
        .unwrap();
    let g = b.finish(&[w, w2]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(bits32(&out[0]), vec![0x8000_0000; 2]);
    assert_eq!(bits32(&out[1]), vec![0x8000_0000; 2]);
}

#[test]
fn window_bool_and_u8() {
    let x = Tensor::from_bool(vec![true, false, true, true], &[1, 1, 4]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::Bool, &[1, 1, 4]).unwrap();
    let fp = Footprint {
        offsets: vec![vec![0], vec![1]],
    };
    let any = b
        .window_reduce(i, ReduceOp::Any, &fp, Border::Constant(Scalar::Bool(false)))
        .unwrap();
    let all = b
        .window_reduce(i, ReduceOp::All, &fp, Border::Constant(Scalar::Bool(false)))
        .unwrap();
    let mn = b
        .window_reduce(i, ReduceOp::Min, &fp, Border::Nearest)
        .unwrap();
    let g = b.finish(&[any, all, mn]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(bools(&out[0]), vec![true, true, true, true]);
    assert_eq!(bools(&out[1]), vec![false, false, true, false]);
    assert_eq!(bools(&out[2]), vec![false, false, true, true]);

    let x = Tensor::from_u8(vec![200, 100, 50, 7], &[1, 1, 4]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::U8, &[1, 1, 4]).unwrap();
    let fp = Footprint {
        offsets: vec![vec![-1], vec![0], vec![1]],
    };
    let s = b
        .window_reduce(i, ReduceOp::Sum, &fp, Border::Wrap)
        .unwrap();
    let g = b.finish(&[s]).unwrap();
    // wrap: [7+200+100, 200+100+50, 100+50+7, 50+7+200] mod 256
    assert_eq!(u8s(&run1(&g, &[x])), vec![51, 94, 157, 1]);
}

/// Independent reference: scipy-style remap written from the mode definitions.
fn naive_remap(j: i64, n: i64, mode: &str) -> Option<i64> {
    if (0..n).contains(&j) {
        return Some(j);
    }
    match mode {
        "constant" => None,
        "nearest" => Some(j.clamp(0, n - 1)),
        "wrap" => Some(((j % n) + n) % n),
        "reflect" => {
            // Unfold the symmetric extension step by step.
            let mut j = j;
            while !(0..n).contains(&j) {
                j = if j < 0 { -1 - j } else { 2 * n - 1 - j };
            }
            Some(j)
        }
        "mirror" => {
            if n == 1 {
                return Some(0);
            }
            let mut j = j;
            while !(0..n).contains(&j) {
                j = if j < 0 { -j } else { 2 * n - 2 - j };
            }
            Some(j)
        }
        _ => unreachable!(),
    }
}

#[test]
fn large_2d_windows_match_a_naive_loop() {
    // Big enough to take the parallel path and several chunks.
    let (h, w) = (157usize, 203usize);
    let data: Vec<f32> = (0..h * w)
        .map(|k| ((k * 7919 % 1013) as f32) * 0.37 - 100.0)
        .collect();
    let x = Tensor::from_f32(data.clone(), &[1, 1, h, w]).unwrap();
    let fp = Footprint::scipy_box(&[3, 5], &[0, 0]);
    for (mode, border) in [
        ("constant", Border::Constant(Scalar::f32(1.5))),
        ("reflect", Border::Reflect),
        ("mirror", Border::Mirror),
        ("nearest", Border::Nearest),
        ("wrap", Border::Wrap),
    ] {
        let mut b = GraphBuilder::new();
        let i = b.input(DType::F32, &[1, 1, h, w]).unwrap();
        let s = b.window_reduce(i, ReduceOp::Sum, &fp, border).unwrap();
        let m = b.window_reduce(i, ReduceOp::Max, &fp, border).unwrap();
        let g = b.finish(&[s, m]).unwrap();
        let out = run(&g, from_ref(&x)).unwrap();
        let (gs, gm) = (bits32(&out[0]), bits32(&out[1]));
        for y in 0..h as i64 {
            for xx in 0..w as i64 {
                let mut acc: Option<f32> = None;
                let mut mx = f32::NEG_INFINITY;
                for dy in -1..=1i64 {
                    for dx in -2..=2i64 {
                        let v = match (
                            naive_remap(y + dy, h as i64, mode),
                            naive_remap(xx + dx, w as i64, mode),
                        ) {
                            (Some(sy), Some(sx)) => data[(sy * w as i64 + sx) as usize],
                            _ => 1.5,
                        };
                        acc = Some(acc.map_or(v, |a| a + v));
                        mx = mx.max(v);
                    }
                }
                let k = (y * w as i64 + xx) as usize;
                assert_eq!(gs[k], acc.unwrap().to_bits(), "{mode} sum at ({y},{xx})");
                assert_eq!(gm[k], mx.to_bits(), "{mode} max at ({y},{xx})");
            }
        }
    }
}

// ---------------------------------------------------------------- networks

#[test]
fn network_pads_with_top_and_applies_pairs_in_order() {
    // Two inputs on four wires; wires 2 and 3 hold +inf. Pairs sort the four wires.
    let pairs = [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)];
    let a = Tensor::from_f32(vec![3.0, -1.0], &[1, 1, 2]).unwrap();
    let c = Tensor::from_f32(vec![1.0, f32::NEG_INFINITY], &[1, 1, 2]).unwrap();
    let mut outs = Vec::new();
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 2]).unwrap();
    let y = b.input(DType::F32, &[1, 1, 2]).unwrap();
    for o in 0..4 {
        outs.push(b.network(&[x, y], 4, &pairs, o).unwrap());
    }
    let g = b.finish(&outs).unwrap();
    let out = run(&g, &[a, c]).unwrap();
    // sorted wires: column 0 = [1, 3, inf, inf]; column 1 = [-inf, -1, inf, inf]
    assert_eq!(f32s(&out[0]), vec![1.0, f32::NEG_INFINITY]);
    assert_eq!(f32s(&out[1]), vec![3.0, -1.0]);
    assert_eq!(f32s(&out[2]), vec![f32::INFINITY; 2]);
    assert_eq!(f32s(&out[3]), vec![f32::INFINITY; 2]);

    // Order matters: pairs (0,1) then (1,2) on [3, 1, 2] put 3 on wire 2; the other order
    // gives wire 2 = 3 as well but wire 1 differs: (1,2) first: [3,1,2] -> [3,1,2] -> (0,1)
    // -> [1,3,2].
    let v = |k: f32| Tensor::from_f32(vec![k], &[1, 1, 1]).unwrap();
    for (pairs, want) in [
        (vec![(0u32, 1u32), (1, 2)], [1.0f32, 2.0, 3.0]),
        (vec![(1, 2), (0, 1)], [1.0, 3.0, 2.0]),
    ] {
        let mut b = GraphBuilder::new();
        let ins: Vec<NodeId> = (0..3)
            .map(|_| b.input(DType::F32, &[1, 1, 1]).unwrap())
            .collect();
        let outs: Vec<NodeId> = (0..3)
            .map(|o| b.network(&ins, 3, &pairs, o).unwrap())
            .collect();
        let g = b.finish(&outs).unwrap();
        let out = run(&g, &[v(3.0), v(1.0), v(2.0)]).unwrap();
        let got: Vec<f32> = out.iter().map(|t| f32s(t)[0]).collect();
        assert_eq!(got, want.to_vec(), "{pairs:?}");
    }
}

#[test]
fn network_top_for_u8_and_bool_and_nan_is_canonical() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 2]).unwrap();
    let hi = b.network(&[x], 2, &[(0, 1)], 1).unwrap();
    let lo = b.network(&[x], 2, &[(0, 1)], 0).unwrap();
    let untouched = b.network(&[x], 3, &[(0, 1)], 2).unwrap();
    let g = b.finish(&[hi, lo, untouched]).unwrap();
    let out = run(&g, &[Tensor::from_u8(vec![5, 255], &[1, 1, 2]).unwrap()]).unwrap();
    assert_eq!(u8s(&out[0]), vec![255, 255]);
    assert_eq!(u8s(&out[1]), vec![5, 255]);
    assert_eq!(u8s(&out[2]), vec![255, 255]);

    let mut b = GraphBuilder::new();
    let x = b.input(DType::Bool, &[1, 1, 2]).unwrap();
    let hi = b.network(&[x], 2, &[(0, 1)], 1).unwrap();
    let lo = b.network(&[x], 2, &[(0, 1)], 0).unwrap();
    let g = b.finish(&[hi, lo]).unwrap();
    let out = run(
        &g,
        &[Tensor::from_bool(vec![false, true], &[1, 1, 2]).unwrap()],
    )
    .unwrap();
    assert_eq!(bools(&out[0]), vec![true, true]);
    assert_eq!(bools(&out[1]), vec![false, true]);

    // Median of three with a payload NaN: min/max make it canonical on touched wires.
    let mut b = GraphBuilder::new();
    let ins: Vec<NodeId> = (0..3)
        .map(|_| b.input(DType::F32, &[1, 1, 1]).unwrap())
        .collect();
    let med = b.network(&ins, 3, &[(0, 1), (1, 2), (0, 1)], 1).unwrap();
    let g = b.finish(&[med]).unwrap();
    let v = |bits: u32| Tensor::from_f32(vec![f32::from_bits(bits)], &[1, 1, 1]).unwrap();
    let out = run1(
        &g,
        &[v(1.0f32.to_bits()), v(0xffc0_0abc), v(2.0f32.to_bits())],
    );
    assert_eq!(bits32(&out), vec![CNAN32]);
}

#[test]
fn median_network_matches_sorting() {
    // 3x3 median by odd-even transposition sort (9 rounds) over gathers.
    let (h, w) = (61usize, 67usize);
    let data: Vec<f32> = (0..h * w)
        .map(|k| ((k * 2654435761usize) % 1000) as f32)
        .collect();
    let x = Tensor::from_f32(data.clone(), &[1, 1, h, w]).unwrap();
    let mut pairs = Vec::new();
    for r in 0..9u32 {
        for i in ((r % 2)..8).step_by(2) {
            pairs.push((i, i + 1));
        }
    }
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, h, w]).unwrap();
    let mut taps = Vec::new();
    for dy in -1..=1 {
        for dx in -1..=1 {
            taps.push(b.gather(i, &[dy, dx], Border::Reflect).unwrap());
        }
    }
    let med = b.network(&taps, 9, &pairs, 4).unwrap();
    let g = b.finish(&[med]).unwrap();
    let got = f32s(&run1(&g, &[x]));
    for y in 0..h as i64 {
        for xx in 0..w as i64 {
            let mut v = Vec::new();
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let sy = naive_remap(y + dy, h as i64, "reflect").unwrap();
                    let sx = naive_remap(xx + dx, w as i64, "reflect").unwrap();
                    v.push(data[(sy * w as i64 + sx) as usize]);
                }
            }
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(got[(y * w as i64 + xx) as usize], v[4], "at ({y},{xx})");
        }
    }
}

// ---------------------------------------------------------------- scans and reductions

#[test]
fn scan_is_inclusive_in_increasing_index() {
    let x = Tensor::from_f32(vec![1e8, 1.0, -1e8, 4.0, -0.0, -0.0], &[1, 1, 6]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 6]).unwrap();
    let s = b.scan(i, 2, ReduceOp::Sum).unwrap();
    let mn = b.scan(i, 2, ReduceOp::Min).unwrap();
    let g = b.finish(&[s, mn]).unwrap();
    let out = run(&g, &[x]).unwrap();
    // 1e8, 1e8 + 1 = 1e8, 1e8 - 1e8 = 0, 4, 4 + -0 = 4, 4
    assert_eq!(f32s(&out[0]), vec![1e8, 1e8, 0.0, 4.0, 4.0, 4.0]);
    assert_eq!(f32s(&out[1]), vec![1e8, 1.0, -1e8, -1e8, -1e8, -1e8]);

    // A scan of a lone -0 is -0 (starts from the first element).
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 1]).unwrap();
    let s = b.scan(i, 2, ReduceOp::Sum).unwrap();
    let g = b.finish(&[s]).unwrap();
    let out = run1(&g, &[Tensor::from_f32(vec![-0.0], &[1, 1, 1]).unwrap()]);
    assert_eq!(bits32(&out), vec![0x8000_0000]);

    // Along other axes: [B=2, C=1, 2, 3] u8, scan sum over batch and over rows.
    let x = Tensor::from_u8(
        vec![1, 2, 3, 4, 5, 6, 250, 10, 20, 30, 40, 50],
        &[2, 1, 2, 3],
    )
    .unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::U8, &[2, 1, 2, 3]).unwrap();
    let sb = b.scan(i, 0, ReduceOp::Sum).unwrap();
    let sr = b.scan(i, 2, ReduceOp::Sum).unwrap();
    let sc = b.scan(i, 3, ReduceOp::Max).unwrap();
    let g = b.finish(&[sb, sr, sc]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(
        u8s(&out[0]),
        vec![1, 2, 3, 4, 5, 6, 251, 12, 23, 34, 45, 56]
    );
    assert_eq!(
        u8s(&out[1]),
        vec![1, 2, 3, 5, 7, 9, 250, 10, 20, 24, 50, 70]
    );
    assert_eq!(
        u8s(&out[2]),
        vec![1, 2, 3, 4, 5, 6, 250, 250, 250, 30, 40, 50]
    );

    // Bool any/all scans.
    let x = Tensor::from_bool(vec![false, true, false, true], &[1, 1, 4]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::Bool, &[1, 1, 4]).unwrap();
    let any = b.scan(i, 2, ReduceOp::Any).unwrap();
    let all = b.scan(i, 2, ReduceOp::All).unwrap();
    let g = b.finish(&[any, all]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(bools(&out[0]), vec![false, true, true, true]);
    assert_eq!(bools(&out[1]), vec![false, false, false, false]);
}

#[test]
fn axis_reduce_folds_left_and_keeps_the_axis() {
    // [1, 3, 1, 2]: channels (1e8, 1, -1e8) and (-0, -0, -0).
    let x = Tensor::from_f32(vec![1e8, -0.0, 1.0, -0.0, -1e8, -0.0], &[1, 3, 1, 2]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 3, 1, 2]).unwrap();
    let s = b.axis_reduce(i, 1, ReduceOp::Sum).unwrap();
    let mx = b.axis_reduce(i, 1, ReduceOp::Max).unwrap();
    let sl = b.axis_reduce(i, 3, ReduceOp::Sum).unwrap();
    let g = b.finish(&[s, mx, sl]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(out[0].shape(), &[1, 1, 1, 2]);
    assert_eq!(bits32(&out[0]), vec![0.0f32.to_bits(), 0x8000_0000]);
    assert_eq!(f32s(&out[1]), vec![1e8, -0.0]);
    assert_eq!(bits32(&out[1])[1], 0x8000_0000);
    assert_eq!(out[2].shape(), &[1, 3, 1, 1]);
    // 1e8 + -0 = 1e8; 1 + -0 = 1; -1e8 + -0 = -1e8
    assert_eq!(f32s(&out[2]), vec![1e8, 1.0, -1e8]);

    let x = Tensor::from_bool(vec![true, false, true, true], &[1, 1, 2, 2]).unwrap();
    let mut b = GraphBuilder::new();
    let i = b.input(DType::Bool, &[1, 1, 2, 2]).unwrap();
    let any = b.axis_reduce(i, 2, ReduceOp::Any).unwrap();
    let all = b.axis_reduce(i, 2, ReduceOp::All).unwrap();
    let g = b.finish(&[any, all]).unwrap();
    let out = run(&g, &[x]).unwrap();
    assert_eq!(bools(&out[0]), vec![true, true]);
    assert_eq!(bools(&out[1]), vec![true, false]);
}

// ---------------------------------------------------------------- strided inputs

/// A graph mixing pointwise, a window and a gather over a `[1, 3, 4, 5]` f32 input.
fn mixed_graph() -> Graph {
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 3, 4, 5]).unwrap();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let w = b
        .window_reduce(i, ReduceOp::Sum, &fp, Border::Mirror)
        .unwrap();
    let gth = b
        .gather(i, &[1, -2], Border::Constant(Scalar::f32(0.5)))
        .unwrap();
    let m = b.binary(BinaryOp::Mul, w, gth).unwrap();
    let s = b.scan(m, 1, ReduceOp::Sum).unwrap();
    b.finish(&[s, i]).unwrap()
}

#[test]
fn strided_inputs_give_the_contiguous_result() {
    let shape = [1usize, 3, 4, 5];
    let data: Vec<f32> = (0..60).map(|k| (k as f32 * 1.7).sin() * 10.0).collect();
    let base = Tensor::from_f32(data.clone(), &shape).unwrap();
    let g = mixed_graph();
    let want = run(&g, from_ref(&base)).unwrap();
    // The input output is the input's values, contiguous, in a fresh buffer.
    assert_eq!(f32s(&want[1]), data);
    assert!(want[1].is_contiguous());
    assert!(!Arc::ptr_eq(want[1].storage(), base.storage()));

    // Transposed: storage holds [1, 3, 5, 4], viewed with the last two axes swapped.
    let mut tdata = vec![0f32; 60];
    for c in 0..3 {
        for y in 0..4 {
            for x in 0..5 {
                tdata[c * 20 + x * 4 + y] = data[c * 20 + y * 5 + x];
            }
        }
    }
    let transposed = Tensor::from_f32(tdata, &[1, 3, 5, 4])
        .unwrap()
        .permuted(&[0, 1, 3, 2])
        .unwrap();
    let channels_last = base.with_memory_order(&[0, 2, 3, 1]).unwrap();
    // Offset view: the values placed after 7 junk elements with padded rows (stride 6).
    let mut padded = vec![f32::NAN; 7 + 3 * 4 * 6];
    for c in 0..3 {
        for y in 0..4 {
            for x in 0..5 {
                padded[7 + c * 24 + y * 6 + x] = data[c * 20 + y * 5 + x];
            }
        }
    }
    let offset =
        Tensor::from_parts(Arc::new(Storage::F32(padded)), &shape, &[72, 24, 6, 1], 7).unwrap();
    for (name, t) in [
        ("transposed", transposed),
        ("channels-last", channels_last),
        ("offset", offset),
    ] {
        assert!(
            !t.is_contiguous() || t.offset() != 0,
            "{name} should be strided"
        );
        assert_eq!(f32s(&t), data, "{name} view holds the same values");
        let got = run(&g, &[t]).unwrap();
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(bits32(a), bits32(b), "{name}");
            assert!(a.is_contiguous() && a.offset() == 0);
        }
    }
}

#[test]
fn bool_input_bytes_other_than_one_read_as_true() {
    let t = Tensor::from_parts(
        Arc::new(Storage::Bool(vec![0, 1, 7])),
        &[1, 1, 3],
        &[1, 1, 1],
        0,
    )
    .unwrap();
    let g = cast_graph(DType::Bool, DType::U8, 3);
    assert_eq!(u8s(&run1(&g, &[t])), vec![0, 1, 1]);
}

// ---------------------------------------------------------------- errors

#[test]
fn input_checks_name_the_problem() {
    let g = binary_graph(BinaryOp::Add, DType::F32, 3);
    let a = Tensor::from_f32(vec![1.0; 3], &[1, 1, 3]).unwrap();
    match check_inputs(&g, from_ref(&a)) {
        Err(RuntimeError::InputCount {
            expected: 2,
            got: 1,
        }) => {}
        other => panic!("{other:?}"),
    }
    let wrong_dtype = Tensor::from_f64(vec![1.0; 3], &[1, 1, 3]).unwrap();
    match run(&g, &[a.clone(), wrong_dtype]) {
        Err(RuntimeError::InputMismatch {
            index: 1,
            expected,
            got,
        }) => {
            assert_eq!(expected, "f32[1,1,3]");
            assert_eq!(got, "f64[1,1,3]");
        }
        other => panic!("{other:?}"),
    }
    let wrong_shape = Tensor::from_f32(vec![1.0; 3], &[1, 3, 1]).unwrap();
    match check_inputs(&g, &[wrong_shape, a.clone()]) {
        Err(RuntimeError::InputMismatch { index: 0, .. }) => {}
        other => panic!("{other:?}"),
    }
    // A transposed view of the right logical shape is fine.
    let t = Tensor::from_f32(vec![1.0; 3], &[3, 1, 1])
        .unwrap()
        .permuted(&[1, 2, 0])
        .unwrap();
    assert!(check_inputs(&g, &[t, a]).is_ok());
}

#[test]
fn inconsistent_hand_made_graphs_are_errors_not_panics() {
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 2],
    };
    let input = Node {
        kind: NodeKind::Input { index: 0 },
        ty: ty.clone(),
    };
    let x = Tensor::from_f32(vec![1.0, 2.0], &[1, 1, 2]).unwrap();
    let graphs = [
        // operand after its user
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Unary {
                        op: UnaryOp::Neg,
                        x: NodeId(2),
                    },
                    ty: ty.clone(),
                },
                Node {
                    kind: NodeKind::Unary {
                        op: UnaryOp::Neg,
                        x: NodeId(0),
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        // Not on f32
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Unary {
                        op: UnaryOp::Not,
                        x: NodeId(0),
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        // declared type disagrees with the computed one (a comparison declared f32)
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Binary {
                        op: BinaryOp::Lt,
                        a: NodeId(0),
                        b: NodeId(0),
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        // network pair out of range
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Network {
                        inputs: vec![NodeId(0)],
                        width: 2,
                        pairs: vec![(0, 5)],
                        output: 0,
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        // gather offset of the wrong rank, and a border constant of the wrong dtype
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Gather {
                        x: NodeId(0),
                        offset: vec![1, 1],
                        border: Border::Wrap,
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        Graph {
            nodes: vec![
                input.clone(),
                Node {
                    kind: NodeKind::Gather {
                        x: NodeId(0),
                        offset: vec![1],
                        border: Border::Constant(Scalar::U8(1)),
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(1)],
        },
        // output id out of range
        Graph {
            nodes: vec![input.clone()],
            inputs: vec![ty.clone()],
            outputs: vec![NodeId(4)],
        },
        // sum over bool / any over f32
        Graph {
            nodes: vec![
                input,
                Node {
                    kind: NodeKind::Scan {
                        x: NodeId(0),
                        axis: 2,
                        op: ReduceOp::Any,
                    },
                    ty: ty.clone(),
                },
            ],
            inputs: vec![ty],
            outputs: vec![NodeId(1)],
        },
    ];
    for (k, g) in graphs.iter().enumerate() {
        match run(g, from_ref(&x)) {
            Err(RuntimeError::Shape(msg)) => assert!(!msg.is_empty()),
            other => panic!("graph {k}: {other:?}"),
        }
    }
}

#[test]
fn huge_offsets_do_not_overflow() {
    // Offsets far beyond the builder's limit, in a hand-made graph: still the periodic rule.
    let ty = TensorType {
        dtype: DType::U8,
        shape: vec![1, 1, 4],
    };
    let x = Tensor::from_u8(vec![1, 2, 3, 4], &[1, 1, 4]).unwrap();
    for border in [
        Border::Wrap,
        Border::Nearest,
        Border::Reflect,
        Border::Mirror,
        Border::Constant(Scalar::U8(9)),
    ] {
        for off in [i64::MAX, i64::MIN, i64::MAX - 2, i64::MIN + 3] {
            let g = Graph {
                nodes: vec![
                    Node {
                        kind: NodeKind::Input { index: 0 },
                        ty: ty.clone(),
                    },
                    Node {
                        kind: NodeKind::Gather {
                            x: NodeId(0),
                            offset: vec![off],
                            border,
                        },
                        ty: ty.clone(),
                    },
                ],
                inputs: vec![ty.clone()],
                outputs: vec![NodeId(1)],
            };
            let out = u8s(&run1(&g, from_ref(&x)));
            if let Border::Nearest = border {
                let edge = if off > 0 { 4 } else { 1 };
                assert_eq!(out, vec![edge; 4], "{border} {off}");
            }
            if let Border::Constant(_) = border {
                assert_eq!(out, vec![9; 4]);
            }
            assert!(out.iter().all(|v| (1..=4).contains(v) || *v == 9));
        }
    }
}

#[test]
fn folds_of_nans_are_canonical_but_a_lone_first_element_is_moved() {
    // Row [payload NaN, 1.0]: every fold step that computes gives the canonical NaN.
    let p = 0xffc0_0abcu32;
    let x = row_f32(&[p, 1.0f32.to_bits()]);
    let mut b = GraphBuilder::new();
    let i = b.input(DType::F32, &[1, 1, 2]).unwrap();
    let two = Footprint {
        offsets: vec![vec![0], vec![-1]],
    };
    let one = Footprint {
        offsets: vec![vec![0]],
    };
    let wsum = b
        .window_reduce(i, ReduceOp::Sum, &two, Border::Nearest)
        .unwrap();
    let wmax = b
        .window_reduce(i, ReduceOp::Max, &two, Border::Nearest)
        .unwrap();
    let wone = b
        .window_reduce(i, ReduceOp::Sum, &one, Border::Nearest)
        .unwrap();
    let scan = b.scan(i, 2, ReduceOp::Sum).unwrap();
    let red = b.axis_reduce(i, 2, ReduceOp::Sum).unwrap();
    let red1 = b.axis_reduce(i, 1, ReduceOp::Max).unwrap();
    let net = b.network(&[i], 2, &[], 0).unwrap();
    let g = b.finish(&[wsum, wmax, wone, scan, red, red1, net]).unwrap();
    let out = run(&g, &[x]).unwrap();
    // wsum at 0: x0 + x0 (nearest) = NaN; at 1: x1 + x0 = NaN.
    assert_eq!(bits32(&out[0]), vec![CNAN32, CNAN32]);
    assert_eq!(bits32(&out[1]), vec![CNAN32, CNAN32]);
    // A one-offset fold is its first element, moved.
    assert_eq!(bits32(&out[2]), vec![p, 1.0f32.to_bits()]);
    // Scan: out[0] = x[0] (moved), out[1] = x0 + x1 (computed).
    assert_eq!(bits32(&out[3]), vec![p, CNAN32]);
    assert_eq!(bits32(&out[4]), vec![CNAN32]);
    // Reducing an axis of length 1 moves the element.
    assert_eq!(bits32(&out[5]), vec![p, 1.0f32.to_bits()]);
    // A network wire no comparator touches is the input, moved.
    assert_eq!(bits32(&out[6]), vec![p, 1.0f32.to_bits()]);
}

/// A graph whose buffers cannot fit in this machine's memory fails up front with a clear
/// error (no abort on a failed allocation). The input is a stride-0 view, so it costs one
/// element; its 1x1x300000x300000 f32 result would need 360 GB.
#[test]
fn graphs_too_big_for_memory_are_refused_up_front() {
    use kiln_runtime::{fused::Engine, RuntimeError, Storage, Tensor};
    use std::sync::Arc;
    if kiln_runtime::memory::available_bytes().is_none() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIP: available memory is unknown on this OS\n",
        );
        return;
    }
    let shape = [1usize, 1, 300_000, 300_000];
    let mut b = kiln_ir::GraphBuilder::new();
    let x = b.input(kiln_ir::DType::F32, &shape).unwrap();
    let y = b.unary(kiln_ir::UnaryOp::Neg, x).unwrap();
    let g = b.finish(&[y]).unwrap();
    let storage = Arc::new(Storage::F32(vec![1.0]));
    let view = Tensor::from_parts(storage, &shape, &[0, 0, 0, 0], 0).unwrap();
    for result in [
        kiln_runtime::eager::run(&g, std::slice::from_ref(&view)),
        Engine::new().run(&g, std::slice::from_ref(&view)),
    ] {
        match result {
            Err(RuntimeError::OutOfMemory {
                needed, available, ..
            }) => {
                assert!(
                    needed > available && needed >= 360_000_000_000,
                    "{needed} {available}"
                )
            }
            other => panic!("expected OutOfMemory, got {:?}", other.map(|v| v.len())),
        }
    }
}
