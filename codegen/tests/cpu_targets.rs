//! CPU targets other than the native one (`cpu::CpuTarget`, `cpu::compile_for`): every op
//! and dtype, on the vector, scalar and border paths, with its guarded variants and line
//! kernels, compiles for aarch64 and for each x86_64 feature level on any host (compile
//! only: a missing Cranelift lowering on one architecture fails `cargo test` on the other,
//! not just under qemu); and the levels this machine can run give the reference model's
//! bits, like the native code.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::{compile_for, CpuTarget, Guard};
use kiln_codegen::kernel::{Kernel, KernelBody, Line, Op, Source};
use kiln_codegen::CompileOptions;
use kiln_ir::{BinaryOp, Border, DType, ReduceOp, Scalar, UnaryOp};

const IN0: Source = Source::Input(0);
const IN1: Source = Source::Input(1);

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

/// A 5-wide window of `op` over input 0 under `border`, then `un` (if given) of it: the
/// vector interior, edge vectors and border columns all take part.
fn window(d: DType, op: BinaryOp, border: Border, un: Option<UnaryOp>) -> Kernel {
    let mut s = StageB::default();
    let mut acc = s.load(IN0, d, &[0, -2], border);
    for dx in -1..=2 {
        let v = s.load(IN0, d, &[0, dx], border);
        acc = s.bin(op, acc, v);
    }
    if let Some(u) = un {
        acc = s.un(u, acc);
    }
    stencil(4, &[d], s.finish(acc))
}

/// Every kernel of the op × dtype matrix (the shapes `cpu_ops.rs` runs), named.
fn matrix() -> Vec<(String, Kernel)> {
    let mut v = Vec::new();
    for d in DType::ALL {
        for op in BinaryOp::ALL {
            if !bin_ok(op, d) {
                continue;
            }
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, 0], Border::Nearest);
            let b = s.load(IN1, d, &[0, 0], Border::Nearest);
            let r = s.bin(op, a, b);
            v.push((format!("{op:?} {d}"), stencil(4, &[d, d], s.finish(r))));
            if !op.is_comparison() {
                v.push((
                    format!("window {op:?} {d}"),
                    window(d, op, Border::Reflect, None),
                ));
            }
        }
        for op in UnaryOp::ALL {
            if !un_ok(op, d) {
                continue;
            }
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, 0], Border::Nearest);
            let r = s.un(op, a);
            let r = if s.dtype(r) == DType::Bool && d != DType::Bool {
                // A lane mask turned back into the input's dtype (the vector path).
                s.push(Op::Cast(r), d)
            } else {
                r
            };
            v.push((format!("{op:?} {d}"), stencil(4, &[d], s.finish(r))));
        }
        for to in DType::ALL {
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[0, 0], Border::Nearest);
            let c = s.push(Op::Cast(a), to);
            v.push((format!("cast {d}->{to}"), stencil(4, &[d], s.finish(c))));
        }
        let ops = if d == DType::Bool {
            vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Any, ReduceOp::All]
        } else {
            vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum]
        };
        for op in ops {
            for (what, line) in [
                ("scan", Line::scan(3, op, d)),
                ("reduce", Line::reduce(3, op, d)),
            ] {
                v.push((
                    format!("{what} {op:?} {d}"),
                    Kernel {
                        rank: 4,
                        inputs: vec![d],
                        output: d,
                        body: KernelBody::Line(line),
                    },
                ));
            }
        }
    }
    for border in [
        Border::Nearest,
        Border::Reflect,
        Border::Mirror,
        Border::Wrap,
        Border::Constant(Scalar::f32(-0.0)),
    ] {
        for op in [BinaryOp::Min, BinaryOp::Max, BinaryOp::Add] {
            v.push((
                format!("window {op:?} f32 {border:?} exp"),
                window(DType::F32, op, border, Some(UnaryOp::Exp)),
            ));
            v.push((
                format!("window {op:?} f32 {border:?} log"),
                window(DType::F32, op, border, Some(UnaryOp::Log)),
            ));
        }
    }
    v
}

fn other_targets() -> Vec<CpuTarget> {
    let mut t = CpuTarget::levels("aarch64");
    t.extend(CpuTarget::levels("x86_64"));
    t
}

#[test]
fn every_op_and_dtype_compiles_for_every_target() {
    let o = CompileOptions::default();
    let kernels = matrix();
    let targets = other_targets();
    assert_eq!(targets.len(), 5, "aarch64 and four x86_64 levels");
    for t in &targets {
        let mut functions = 0;
        for (what, k) in &kernels {
            for guard in [None, Some(Guard::CleanInputs), Some(Guard::NonNegative)] {
                let code = compile_for(k, &o, guard, t)
                    .unwrap_or_else(|e| panic!("{what} {guard:?} for {}: {e}", t.triple()));
                let Some(code) = code else {
                    assert!(
                        guard.is_some(),
                        "{what}: the general kernel always compiles"
                    );
                    continue;
                };
                assert_eq!(code.target(), t);
                assert!(!code.machine_code().is_empty(), "{what}: no code");
                functions += code.machine_code().len();
            }
        }
        println!(
            "{} {:?}: {} kernels, {functions} functions",
            t.triple(),
            t.features(),
            kernels.len()
        );
    }
}

#[test]
fn aarch64_code_is_aarch64_code() {
    // Every aarch64 instruction is 4 bytes and `ret` is 0xd65f03c0: a function compiled
    // for aarch64 on any host ends in it; never in x86's `ret` (0xc3).
    let t = CpuTarget::parse("aarch64-unknown-linux-gnu").unwrap();
    let k = window(
        DType::F32,
        BinaryOp::Min,
        Border::Reflect,
        Some(UnaryOp::Log),
    );
    let code = compile_for(&k, &CompileOptions::default(), None, &t)
        .unwrap()
        .unwrap();
    let ret = 0xd65f_03c0u32.to_le_bytes();
    for f in code.machine_code() {
        assert_eq!(f.bytes.len() % 4, 0, "{}", f.name);
        let has_ret = f.bytes.chunks(4).any(|w| w == ret);
        assert!(has_ret, "{}: no aarch64 ret", f.name);
    }
    let runs = CpuTarget::native().arch() == "aarch64";
    assert_eq!(code.into_runnable().is_some(), runs);
}

#[test]
fn levels_this_machine_runs_give_the_reference_bits() {
    let native = CpuTarget::native();
    let (h, w) = (9, 23);
    let mut ran = 0;
    for t in CpuTarget::levels(native.arch()) {
        if !t.runs_here() {
            println!(
                "SKIP {} {:?}: this CPU lacks a feature",
                t.triple(),
                t.features()
            );
            continue;
        }
        for (what, k) in matrix() {
            let KernelBody::Stencil { .. } = k.body else {
                continue; // line kernels: called directly in cpu_line.rs
            };
            let d = k.inputs.first().copied().unwrap_or(DType::F32);
            let mut r = Rng(17);
            let inputs: Vec<Img> = k
                .inputs
                .iter()
                .map(|&d| rand_img(&mut r, d, h, w, false))
                .collect();
            let code = compile_for(&k, &CompileOptions::default(), None, &t)
                .unwrap()
                .unwrap();
            let ck = code.into_runnable().expect("runs here");
            let want = ref_all(&k, &inputs, h, w);
            for lay in LAYOUTS {
                let got = run_all(&ck, &inputs, h, w, lay);
                if let Some(m) = diff(&got, &want) {
                    panic!("{what} ({d}) for {:?} {lay:?}: {m}", t.features());
                }
            }
            ran += 1;
        }
    }
    assert!(ran > 0, "the baseline level runs on every supported host");
}
