//! Line kernels of the CPU backend, called directly: scans and reductions (one lane with
//! carries in registers, several lanes with carries in scratch, forward and backward
//! through signed steps) against a left fold of the reference ops, and general lines (a
//! running maximum reset by NaN, two carries that swap) against a reference interpreter.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::{compile, CpuBody, LineFn, LINE_CARRY_SLOT};
use kiln_codegen::kernel::{Inst, Kernel, KernelBody, Line, LineInit, LineKeep, Op, ValueId};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{BinaryOp, DType, ReduceOp, Scalar, UnaryOp};

fn ops_for(d: DType) -> Vec<ReduceOp> {
    match d {
        DType::Bool => vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Any, ReduceOp::All],
        _ => vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum],
    }
}

fn line_fn(k: &Kernel, fault: Option<Fault>) -> (kiln_codegen::cpu::CpuKernel, LineFn) {
    let ck = compile(
        k,
        &CompileOptions {
            fault,
            ..Default::default()
        },
    )
    .unwrap();
    let CpuBody::Line(f) = ck.body else {
        panic!("not a line body")
    };
    (ck, f)
}

/// `lanes` lines of `vals[l]` each, element `k` of lane `l` at `k * step + l * lane`
/// (elements), in a buffer with room on both sides; returns (buffer, index of lane 0's
/// first element in walking order).
fn layout(vals: &[Vec<Scalar>], d: DType, step: i64, lane: i64) -> (Vec<u8>, i64) {
    let es = d.size_bytes() as i64;
    let n = vals[0].len() as i64;
    let span = (n * step.abs() + vals.len() as i64 * lane + 2) * es;
    let base = if step < 0 { (n - 1) * -step } else { 0 };
    let mut b = vec![0xa5u8; span as usize + 16];
    for (l, v) in vals.iter().enumerate() {
        for (k, s) in v.iter().enumerate() {
            let at = ((base + k as i64 * step + l as i64 * lane) * es) as usize;
            b[at..][..es as usize].copy_from_slice(&s.to_le_bytes());
        }
    }
    (b, base)
}

fn read_at(d: DType, b: &[u8], elem: i64) -> Scalar {
    let p = &b[(elem * d.size_bytes() as i64) as usize..];
    match d {
        DType::F32 => Scalar::F32(u32::from_le_bytes(p[..4].try_into().unwrap())),
        DType::F64 => Scalar::F64(u64::from_le_bytes(p[..8].try_into().unwrap())),
        DType::U8 => Scalar::U8(p[0]),
        DType::Bool => Scalar::Bool(p[0] != 0),
        d => Scalar::from_le_bytes(d, p).unwrap(),
    }
}

/// Reference: runs `line`'s step over `xs` in the given order; returns the kept values.
fn reference(line: &Line, xs: &[Scalar]) -> Vec<Scalar> {
    let (mut carry, rest, mut out) = match &line.init {
        LineInit::First => (vec![xs[0]], &xs[1..], vec![xs[0]]),
        LineInit::Consts(c) => (c.clone(), xs, vec![]),
    };
    for &x in rest {
        let mut v: Vec<Scalar> = carry.clone();
        v.push(x);
        for inst in &line.step {
            let g = |id: &ValueId| v[id.0 as usize];
            let r = match &inst.op {
                Op::Const(c) => *c,
                Op::Unary(op, a) => ref_unary(*op, g(a)),
                Op::Binary(op, a, b) => ref_binary(*op, g(a), g(b)),
                Op::Select(c, a, b) => {
                    if g(c) == Scalar::Bool(true) {
                        g(a)
                    } else {
                        g(b)
                    }
                }
                Op::Cast(a) => ref_cast(g(a), inst.dtype),
                _ => unreachable!(),
            };
            v.push(r);
        }
        carry = line.next.iter().map(|id| v[id.0 as usize]).collect();
        if let LineKeep::Each(y) = line.keep {
            out.push(v[y.0 as usize]);
        }
    }
    match line.keep {
        LineKeep::Each(_) => out,
        LineKeep::Final(k) => vec![carry[k as usize]],
    }
}

/// Runs `k`'s line function over `lanes` random lines of length `n` with the given signed
/// step and lane stride, and compares each lane with the reference.
fn check(k: &Kernel, data: &[Vec<Scalar>], step: i64, lane: i64, what: &str) {
    let KernelBody::Line(line) = &k.body else {
        panic!()
    };
    let (_ck, f) = line_fn(k, None);
    let (xd, yd) = (k.inputs[0], k.output);
    let (sb, s0) = layout(data, xd, step, lane);
    let n = data[0].len() as i64;
    let lanes = data.len() as i64;
    let keep_n = if line.keeps_each() { n } else { 1 };
    // Output in the transposed layout: step `lane`-ish, lane stride 1, same direction.
    let (ostep, olane) = (if step < 0 { -lanes } else { lanes }, 1);
    let obase = if step < 0 { (keep_n - 1) * lanes } else { 0 };
    let mut ob = vec![0x5au8; ((keep_n * lanes + 2) * yd.size_bytes() as i64) as usize];
    let mut scratch = vec![0u8; data.len() * line.carries.len().max(1) * LINE_CARRY_SLOT];
    let es = |d: DType| d.size_bytes();
    // SAFETY: `sb` holds every lane's `n` elements at `s0 + k * step + l * lane`; `ob` holds
    // `keep_n` rows of `lanes` elements from `obase` at `ostep`; `scratch` is sized as
    // `LineFn` asks.
    unsafe {
        f(
            sb.as_ptr().add(s0 as usize * es(xd)),
            step,
            lane,
            ob.as_mut_ptr().add(obase as usize * es(yd)),
            if line.keeps_each() { ostep } else { 0 },
            olane,
            n,
            lanes,
            scratch.as_mut_ptr(),
        )
    };
    for (l, xs) in data.iter().enumerate() {
        let want = reference(line, xs);
        let got: Vec<Scalar> = (0..keep_n)
            .map(|k| read_at(yd, &ob, obase + k * ostep + l as i64 * olane))
            .collect();
        assert_eq!(got, want, "{what}: lane {l} of {lanes}, n {n}, step {step}");
    }
}

fn lines_of(r: &mut Rng, d: DType, lanes: usize, n: usize) -> Vec<Vec<Scalar>> {
    (0..lanes)
        .map(|_| (0..n).map(|_| rand_scalar(r, d, false)).collect())
        .collect()
}

#[test]
fn scans_and_reductions_match_left_folds() {
    for d in DType::ALL {
        for op in ops_for(d) {
            for scan in [true, false] {
                let line = if scan {
                    Line::scan(3, op, d)
                } else {
                    Line::reduce(3, op, d)
                };
                let k = Kernel {
                    rank: 4,
                    inputs: vec![d],
                    output: d,
                    body: KernelBody::Line(line),
                };
                for n in [1usize, 2, 3, 7, 33] {
                    let mut r = Rng(n as u64 * 13 + 1);
                    for (lanes, step, lane) in
                        [(1, 1, 1), (1, 3, 1), (1, -2, 1), (5, 7, 1), (4, -4, 1)]
                    {
                        let data = lines_of(&mut r, d, lanes, n);
                        check(&k, &data, step, lane, &format!("{d} {op:?} scan {scan}"));
                    }
                }
            }
        }
    }
}

#[test]
fn scan_keeps_first_element_bits_and_faults_apply() {
    // out[0] = x[0] bit for bit (a NaN payload stays), later NaNs are canonical.
    let k = Kernel {
        rank: 4,
        inputs: vec![DType::F32],
        output: DType::F32,
        body: KernelBody::Line(Line::scan(3, ReduceOp::Min, DType::F32)),
    };
    let src = [
        Scalar::F32(0xffc0_0001),
        Scalar::f32(1.0),
        Scalar::F32(0x7f80_0001),
        Scalar::f32(-0.0),
    ];
    let run = |fault: Option<Fault>| {
        let (_ck, f) = line_fn(&k, fault);
        let (sb, _) = layout(&[src.to_vec()], DType::F32, 1, 1);
        let mut ob = vec![0u8; 16];
        // SAFETY: four f32 in and out, stride 1, one lane.
        unsafe {
            f(
                sb.as_ptr(),
                1,
                0,
                ob.as_mut_ptr(),
                1,
                0,
                4,
                1,
                std::ptr::null_mut(),
            )
        };
        (0..4)
            .map(|i| read_at(DType::F32, &ob, i))
            .collect::<Vec<_>>()
    };
    let nan = Scalar::F32(0x7fc0_0000);
    assert_eq!(run(None), vec![src[0], nan, nan, nan]);
    assert_ne!(run(Some(Fault::DropNanMask)), run(None));
}

/// The toy line op: a running maximum of f32 that restarts at -inf after a NaN (whose
/// output is the NaN, canonical).
fn running_max_reset(keep_each: bool) -> Line {
    let f = DType::F32;
    let b = DType::Bool;
    let i = |op, dtype| Inst { op, dtype };
    // v0 carry, v1 x
    let step = vec![
        i(Op::Unary(UnaryOp::IsNan, ValueId(1)), b), // v2
        i(Op::Binary(BinaryOp::Max, ValueId(0), ValueId(1)), f), // v3
        i(Op::Const(Scalar::f32(f32::NEG_INFINITY)), f), // v4
        i(Op::Select(ValueId(2), ValueId(4), ValueId(3)), f), // v5
    ];
    Line {
        axis: 3,
        direction: kiln_codegen::kernel::Direction::Forward,
        carries: vec![f],
        init: LineInit::Consts(vec![Scalar::f32(f32::NEG_INFINITY)]),
        step,
        next: vec![ValueId(5)],
        keep: if keep_each {
            LineKeep::Each(ValueId(3))
        } else {
            LineKeep::Final(0)
        },
    }
}

/// Two carries that swap every step (a Fibonacci-like u8 pair: `(a, b) -> (b, a + b)`),
/// keeping `a < x` as a bool: catches carries overwritten before they are read.
fn swapping_pair() -> Line {
    let u = DType::U8;
    let i = |op, dtype| Inst { op, dtype };
    let step = vec![
        i(Op::Binary(BinaryOp::Add, ValueId(0), ValueId(1)), u), // v3 = a + b
        i(Op::Binary(BinaryOp::Add, ValueId(3), ValueId(2)), u), // v4 = a + b + x
        i(
            Op::Binary(BinaryOp::Lt, ValueId(0), ValueId(2)),
            DType::Bool,
        ), // v5
    ];
    Line {
        axis: 2,
        direction: kiln_codegen::kernel::Direction::Forward,
        carries: vec![u, u],
        init: LineInit::Consts(vec![Scalar::U8(1), Scalar::U8(2)]),
        step,
        next: vec![ValueId(1), ValueId(4)],
        keep: LineKeep::Each(ValueId(5)),
    }
}

#[test]
fn general_lines_match_the_reference() {
    let mut r = Rng(99);
    for keep_each in [true, false] {
        let k = Kernel {
            rank: 4,
            inputs: vec![DType::F32],
            output: DType::F32,
            body: KernelBody::Line(running_max_reset(keep_each)),
        };
        for (lanes, step, lane) in [(1, 1, 1), (1, -1, 1), (6, 6, 1), (3, -5, 2)] {
            for n in [0usize, 1, 2, 9, 40] {
                let data = lines_of(&mut r, DType::F32, lanes, n.max(1));
                let data: Vec<Vec<Scalar>> = data.into_iter().map(|v| v[..n].to_vec()).collect();
                if n == 0 {
                    continue;
                }
                check(
                    &k,
                    &data,
                    step,
                    lane,
                    &format!("running max, each {keep_each}"),
                );
            }
        }
    }
    let k = Kernel {
        rank: 4,
        inputs: vec![DType::U8],
        output: DType::Bool,
        body: KernelBody::Line(swapping_pair()),
    };
    for (lanes, step, lane) in [(1, 1, 1), (4, 4, 1), (2, -3, 1)] {
        let data = lines_of(&mut r, DType::U8, lanes, 30);
        check(&k, &data, step, lane, "swapping pair");
    }
}

#[test]
fn bad_line_kernels_are_errors() {
    let k = |d: DType, out: DType, line: Line| Kernel {
        rank: 4,
        inputs: vec![d],
        output: out,
        body: KernelBody::Line(line),
    };
    let mut load_in_step = running_max_reset(true);
    load_in_step.step.push(Inst {
        op: Op::InRange(vec![0, 0]),
        dtype: DType::Bool,
    });
    let mut forward_ref = running_max_reset(true);
    forward_ref.step[1].op = Op::Binary(BinaryOp::Max, ValueId(0), ValueId(5));
    let mut wrong_init = running_max_reset(true);
    wrong_init.init = LineInit::Consts(vec![Scalar::U8(0)]);
    let mut wrong_next = running_max_reset(true);
    wrong_next.next = vec![ValueId(2)];
    let bad = [
        k(
            DType::Bool,
            DType::Bool,
            Line::scan(3, ReduceOp::Sum, DType::Bool),
        ),
        k(
            DType::F32,
            DType::F32,
            Line::reduce(3, ReduceOp::Any, DType::F32),
        ),
        k(
            DType::F32,
            DType::F32,
            Line::scan(4, ReduceOp::Sum, DType::F32),
        ),
        k(
            DType::F32,
            DType::U8,
            Line::scan(2, ReduceOp::Sum, DType::F32),
        ),
        k(DType::F32, DType::F32, load_in_step),
        k(DType::F32, DType::F32, forward_ref),
        k(DType::F32, DType::F32, wrong_init),
        k(DType::F32, DType::F32, wrong_next),
        k(DType::F32, DType::Bool, running_max_reset(true)),
    ];
    for k in bad {
        assert!(compile(&k, &CompileOptions::default()).is_err(), "{k:?}");
    }
}
