//! Every op and dtype of the CPU backend against the scalar reference, on the vector path,
//! the scalar path (strided) and the border path.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::compile;
use kiln_codegen::kernel::{Op, Source};
use kiln_codegen::CompileOptions;
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

const IN0: Source = Source::Input(0);
const IN1: Source = Source::Input(1);

fn check(k: &kiln_codegen::Kernel, inputs: &[Img], h: usize, w: usize, what: &str) {
    let ck = compile(k, &CompileOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let want = ref_all(k, inputs, h, w);
    for lay in LAYOUTS {
        let got = run_all(&ck, inputs, h, w, lay);
        if let Some(m) = diff(&got, &want) {
            panic!("{what} {lay:?}: {m}\n{}", ck.describe());
        }
    }
}

fn bin_ok(op: BinaryOp, d: DType) -> bool {
    match op {
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => d != DType::Bool,
        BinaryOp::And | BinaryOp::Or => d == DType::Bool,
        _ => true,
    }
}

fn un_ok(op: UnaryOp, d: DType) -> bool {
    match op {
        UnaryOp::Neg | UnaryOp::Abs => d != DType::Bool,
        UnaryOp::Sqrt | UnaryOp::IsNan | UnaryOp::IsFinite => d.is_float(),
        UnaryOp::Not => d == DType::Bool,
        UnaryOp::Exp | UnaryOp::Log => d.is_float(),
    }
}

/// Inputs whose pairs cover the special values against each other.
fn pair_inputs(d: DType, seed: u64, w: usize, h: usize) -> Vec<Img> {
    let mut r = Rng(seed);
    let mut a = rand_img(&mut r, d, h, w, false);
    let mut b = rand_img(&mut r, d, h, w, false);
    // Every special against every special, once.
    if d == DType::F32 {
        let n = SPECIAL_F32.len();
        for i in 0..(n * n).min(h * w) {
            a.data[i] = Scalar::F32(SPECIAL_F32[i / n]);
            b.data[i] = Scalar::F32(SPECIAL_F32[i % n]);
        }
    }
    if d == DType::F64 {
        let n = SPECIAL_F64.len();
        for i in 0..(n * n).min(h * w) {
            a.data[i] = Scalar::F64(SPECIAL_F64[i / n]);
            b.data[i] = Scalar::F64(SPECIAL_F64[i % n]);
        }
    }
    if d == DType::U8 {
        for i in 0..(h * w).min(256) {
            a.data[i] = Scalar::U8(i as u8);
            b.data[i] = Scalar::U8((i * 7 % 5) as u8); // zeros included
        }
    }
    vec![a, b]
}

#[test]
fn every_binary_op_and_dtype() {
    let (h, w) = (16, 19);
    for d in DType::ALL {
        let inputs = pair_inputs(d, 11, w, h);
        for op in BinaryOp::ALL {
            if !bin_ok(op, d) {
                continue;
            }
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, 0], Border::Nearest);
            let b = s.load(IN1, d, &[0, 0], Border::Nearest);
            let r = s.bin(op, a, b);
            let k = stencil(4, &[d, d], s.finish(r));
            check(&k, &inputs, h, w, &format!("{op:?} {d}"));
        }
    }
}

#[test]
fn comparisons_and_bools_inside_vectorised_f32_stages() {
    // f32 result with bool intermediates: the stage runs on F32X4 lanes with lane masks.
    let (h, w) = (16, 23);
    let inputs = pair_inputs(DType::F32, 5, w, h);
    for op in BinaryOp::ALL {
        let mut s = StageB::default();
        let a = s.load(IN0, DType::F32, &[0, 0], Border::Nearest);
        let b = s.load(IN1, DType::F32, &[0, 0], Border::Nearest);
        let r = if op.is_comparison() {
            let c = s.bin(op, a, b);
            let n = s.un(UnaryOp::Not, c);
            let f = s.un(UnaryOp::IsFinite, a);
            let c2 = s.bin(BinaryOp::And, n, f);
            let c3 = s.bin(BinaryOp::Or, c2, c);
            let c4 = s.bin(BinaryOp::Max, c3, n);
            let c5 = s.bin(BinaryOp::Eq, c4, c);
            let x = s.push(Op::Select(c5, a, b), DType::F32);
            let fc = s.push(Op::Cast(c2), DType::F32);
            s.bin(BinaryOp::Add, x, fc)
        } else if bin_ok(op, DType::F32) {
            let r = s.bin(op, a, b);
            let nn = s.un(UnaryOp::IsNan, r);
            let z = s.push(Op::Const(Scalar::F32(0x7fc0_1234)), DType::F32);
            s.push(Op::Select(nn, z, r), DType::F32)
        } else {
            continue;
        };
        let k = stencil(4, &[DType::F32, DType::F32], s.finish(r));
        check(&k, &inputs, h, w, &format!("vector {op:?}"));
    }
}

#[test]
fn every_unary_op_and_dtype() {
    let (h, w) = (16, 18);
    for d in DType::ALL {
        let inputs = pair_inputs(d, 3, w, h);
        for op in UnaryOp::ALL {
            if !un_ok(op, d) {
                continue;
            }
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, 0], Border::Nearest);
            let r = s.un(op, a);
            let k = stencil(4, &[d], s.finish(r));
            check(&k, &inputs[..1], h, w, &format!("{op:?} {d}"));
            if d == DType::F32 {
                // Also through the vectorised path, with a bool result turned back into f32.
                let mut s = StageB::default();
                let a = s.load(IN0, d, &[0, 0], Border::Nearest);
                let r = s.un(op, a);
                let r = if s.dtype(r) == DType::Bool {
                    s.push(Op::Cast(r), DType::F32)
                } else {
                    r
                };
                let k = stencil(4, &[d], s.finish(r));
                check(&k, &inputs[..1], h, w, &format!("vector {op:?} {d}"));
            }
        }
    }
}

#[test]
fn every_cast_and_constants() {
    let (h, w) = (12, 21);
    for from in DType::ALL {
        let mut r = Rng(77);
        let mut img = rand_img(&mut r, from, h, w, false);
        if from.is_float() {
            // Casts to u8 at the edges: negative, fractional, saturating, huge.
            let edge = [
                -1.0, -0.5, 0.5, 254.9, 255.0, 255.5, 256.0, 1e10, -1e10, 3.999,
            ];
            for (i, v) in edge.iter().enumerate() {
                img.data[i] = Scalar::from_f64(from, *v);
            }
        }
        for to in DType::ALL {
            let mut s = StageB::default();
            let a = s.load(IN0, from, &[0, 0], Border::Nearest);
            let c = s.push(Op::Cast(a), to);
            let k = stencil(4, &[from], s.finish(c));
            check(&k, &[img.clone()], h, w, &format!("cast {from}->{to}"));
            // A constant of each dtype, cast.
            let mut s = StageB::default();
            let c0 = s.push(Op::Const(rand_scalar(&mut r, from, false)), from);
            let c = s.push(Op::Cast(c0), to);
            let k = stencil(4, &[], s.finish(c));
            check(&k, &[], 2, 9, &format!("const cast {from}->{to}"));
        }
    }
}

#[test]
fn min_max_key_domain_chains_and_signed_zero() {
    // Long min/max chains over loads stay in key domain; mixed with arithmetic afterwards.
    let (h, w) = (9, 29);
    for d in [DType::F32, DType::F64] {
        let mut r = Rng(99);
        let inputs = vec![rand_img(&mut r, d, h, w, false)];
        let mut s = StageB::default();
        let mut loads = Vec::new();
        for dx in -2..=2 {
            loads.push(s.load(IN0, d, &[0, dx], Border::Reflect));
        }
        let mut lo = loads[0];
        let mut hi = loads[0];
        for &l in &loads[1..] {
            lo = s.bin(BinaryOp::Min, lo, l);
            hi = s.bin(BinaryOp::Max, hi, l);
        }
        let same = s.bin(BinaryOp::Min, lo, lo);
        let diff_ = s.bin(BinaryOp::Sub, hi, same);
        let m = s.bin(BinaryOp::Max, diff_, lo);
        let k = stencil(4, &[d], s.finish(m));
        check(&k, &inputs, h, w, &format!("minmax chain {d}"));
    }
}

#[test]
fn u8_division_by_zero_and_wrapping() {
    let (h, w) = (1, 256);
    let a = Img {
        dtype: DType::U8,
        h,
        w,
        data: (0..256).map(|i| Scalar::U8(i as u8)).collect(),
    };
    let b = Img {
        dtype: DType::U8,
        h,
        w,
        data: (0..256).map(|i| Scalar::U8((i % 4) as u8)).collect(),
    };
    for op in [BinaryOp::Div, BinaryOp::Mul, BinaryOp::Add, BinaryOp::Sub] {
        let mut s = StageB::default();
        let x = s.load(IN0, DType::U8, &[0], Border::Wrap);
        let y = s.load(IN1, DType::U8, &[0], Border::Wrap);
        let r = s.bin(op, x, y);
        let k = stencil(3, &[DType::U8, DType::U8], s.finish(r));
        check(&k, &[a.clone(), b.clone()], h, w, &format!("u8 {op:?}"));
    }
}

#[test]
fn ill_typed_kernels_are_errors_not_panics() {
    // Add of bools.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::Bool, &[0, 0], Border::Nearest);
    let r = s.push(Op::Binary(BinaryOp::Add, a, a), DType::Bool);
    assert!(compile(
        &stencil(4, &[DType::Bool], s.finish(r)),
        &CompileOptions::default()
    )
    .is_err());
    // Load dtype differs from the input's dtype.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::F64, &[0, 0], Border::Nearest);
    assert!(compile(
        &stencil(4, &[DType::F32], s.finish(a)),
        &CompileOptions::default()
    )
    .is_err());
    // Offset of the wrong length.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::F32, &[0], Border::Nearest);
    assert!(compile(
        &stencil(4, &[DType::F32], s.finish(a)),
        &CompileOptions::default()
    )
    .is_err());
    // Operand that is not an earlier value.
    let mut s = StageB::default();
    let a = s.load(IN0, DType::F32, &[0, 0], Border::Nearest);
    let r = s.push(
        Op::Binary(BinaryOp::Add, a, kiln_codegen::kernel::ValueId(5)),
        DType::F32,
    );
    assert!(compile(
        &stencil(4, &[DType::F32], s.finish(r)),
        &CompileOptions::default()
    )
    .is_err());
    // Input that does not exist; constant border of the wrong dtype.
    let mut s = StageB::default();
    let a = s.load(IN1, DType::F32, &[0, 0], Border::Nearest);
    assert!(compile(
        &stencil(4, &[DType::F32], s.finish(a)),
        &CompileOptions::default()
    )
    .is_err());
    let mut s = StageB::default();
    let a = s.load(IN0, DType::F32, &[0, 0], Border::Constant(Scalar::U8(1)));
    assert!(compile(
        &stencil(4, &[DType::F32], s.finish(a)),
        &CompileOptions::default()
    )
    .is_err());
}
