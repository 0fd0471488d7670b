//! Renders hand-built kernels (every op, dtype, border, multi-stage, scan, reduce) as PTX and
//! assembles them with ptxas for sm_80 and sm_90: exit 0 and no output on stderr.
//! Without ptxas the test fails when `CI` or `KILN_PTXAS` is set and prints a visible
//! `SKIP: ...` line (past the harness's output capture) elsewhere.
//! Text-level rules (`.rn`, no `.ftz`, schedules, parameter block) are checked without ptxas.

use std::path::PathBuf;

use kiln_codegen::kernel::{
    Direction, Inst, Kernel, KernelBody, Line, LineInit, LineKeep, Op, Source, Stage, ValueId,
};
use kiln_codegen::ptx::{self, ptxas, PtxModule, PtxTarget, Schedule};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{BinaryOp, Border, DType, ReduceOp, Scalar, UnaryOp};

#[derive(Default)]
struct Sb {
    insts: Vec<Inst>,
}

impl Sb {
    fn push(&mut self, op: Op, dtype: DType) -> ValueId {
        self.insts.push(Inst { op, dtype });
        ValueId(self.insts.len() as u32 - 1)
    }
    fn load(&mut self, source: Source, offset: &[i64], border: Border, d: DType) -> ValueId {
        self.push(
            Op::Load {
                source,
                offset: offset.to_vec(),
                border,
            },
            d,
        )
    }
    fn bin(&mut self, op: BinaryOp, a: ValueId, b: ValueId) -> ValueId {
        let d = if op.is_comparison() {
            DType::Bool
        } else {
            self.insts[a.0 as usize].dtype
        };
        self.push(Op::Binary(op, a, b), d)
    }
    fn stage(self, result: ValueId) -> Stage {
        Stage {
            insts: self.insts,
            result,
        }
    }
}

fn one(d: DType) -> Scalar {
    match d {
        DType::F32 => Scalar::f32(1.5),
        DType::F64 => Scalar::f64(-2.25),
        DType::U8 => Scalar::U8(7),
        DType::Bool => Scalar::Bool(true),
        d => Scalar::wrap_int(d, -7).unwrap(),
    }
}

fn stencil(rank: usize, inputs: Vec<DType>, stages: Vec<Stage>) -> Kernel {
    let output = stages.last().unwrap().dtype();
    Kernel {
        rank,
        inputs,
        output,
        body: KernelBody::Stencil { stages },
    }
}

fn window(rank: usize, radius: i64) -> Vec<Vec<i64>> {
    let d = rank - 2;
    let mut offs = vec![vec![]];
    for _ in 0..d {
        let mut next = Vec::new();
        for o in &offs {
            for k in -radius..=radius {
                let mut o = o.clone();
                o.push(k);
                next.push(o);
            }
        }
        offs = next;
    }
    offs
}

/// A window reduction of `source` under `border` (the gather + reduce a fused op lowers to).
fn window_reduce(
    sb: &mut Sb,
    source: Source,
    d: DType,
    rank: usize,
    radius: i64,
    border: Border,
    op: BinaryOp,
) -> ValueId {
    let mut acc: Option<ValueId> = None;
    for o in window(rank, radius) {
        let v = sb.load(source, &o, border, d);
        acc = Some(match acc {
            None => v,
            Some(a) => sb.bin(op, a, v),
        });
    }
    acc.unwrap()
}

/// Every kernel the test assembles, with a name for messages.
fn kernels() -> Vec<(String, Kernel)> {
    let mut ks = Vec::new();
    // gathers with every border mode, every dtype, 1-D to 3-D spatial
    for d in DType::ALL {
        for rank in [3, 4, 5] {
            for border in Border::all(one(d)) {
                let mut sb = Sb::default();
                let op = if d == DType::Bool {
                    BinaryOp::Or
                } else {
                    BinaryOp::Max
                };
                let r = window_reduce(&mut sb, Source::Input(0), d, rank, 1, border, op);
                // a far offset (periodic remapping for any distance)
                let far = sb.load(Source::Input(0), &vec![-37; rank - 2], border, d);
                let r = sb.bin(op, r, far);
                ks.push((
                    format!("gather {d} rank{rank} {border}"),
                    stencil(rank, vec![d], vec![sb.stage(r)]),
                ));
            }
        }
    }
    // every unary / binary / select / cast / const / in_range, per dtype
    for d in DType::ALL {
        let mut sb = Sb::default();
        let a = sb.load(Source::Input(0), &[0, 0], Border::Nearest, d);
        let b = sb.load(Source::Input(1), &[1, -1], Border::Constant(one(d)), d);
        let c = sb.push(Op::Const(one(d)), d);
        let mut vals = vec![a, b, c];
        let mut bools = Vec::new();
        let unary: &[UnaryOp] = match d {
            DType::F32 | DType::F64 => &[
                UnaryOp::Neg,
                UnaryOp::Abs,
                UnaryOp::Sqrt,
                UnaryOp::Exp,
                UnaryOp::Log,
            ],
            DType::U8 => &[UnaryOp::Neg, UnaryOp::Abs],
            DType::Bool => &[UnaryOp::Not],
            DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U32 => {
                &[UnaryOp::Neg, UnaryOp::Abs]
            }
        };
        for &u in unary {
            vals.push(sb.push(Op::Unary(u, a), d));
        }
        if d.is_float() {
            bools.push(sb.push(Op::Unary(UnaryOp::IsNan, a), DType::Bool));
            bools.push(sb.push(Op::Unary(UnaryOp::IsFinite, b), DType::Bool));
        }
        let arith: &[BinaryOp] = match d {
            DType::Bool => &[BinaryOp::And, BinaryOp::Or, BinaryOp::Min, BinaryOp::Max],
            _ => &[
                BinaryOp::Add,
                BinaryOp::Sub,
                BinaryOp::Mul,
                BinaryOp::Div,
                BinaryOp::Min,
                BinaryOp::Max,
            ],
        };
        let mut acc = a;
        for (i, &op) in arith.iter().enumerate() {
            let other = vals[(i + 1) % vals.len()];
            acc = sb.bin(op, acc, other);
            vals.push(acc);
        }
        for op in [
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Eq,
            BinaryOp::Ne,
        ] {
            bools.push(sb.bin(op, acc, b));
        }
        bools.push(sb.push(Op::InRange(vec![-1, 2]), DType::Bool));
        let mut cond = bools[0];
        for &p in &bools[1..] {
            cond = sb.bin(BinaryOp::Or, cond, p);
        }
        let sel = sb.push(Op::Select(cond, acc, b), d);
        // casts to every dtype and back
        let mut back = Vec::new();
        for to in DType::ALL {
            let t = sb.push(Op::Cast(sel), to);
            back.push(sb.push(Op::Cast(t), d));
        }
        let mut r = sel;
        for v in back {
            let op = if d == DType::Bool {
                BinaryOp::Or
            } else {
                BinaryOp::Max
            };
            r = sb.bin(op, r, v);
        }
        ks.push((
            format!("pointwise {d}"),
            stencil(4, vec![d, d], vec![sb.stage(r)]),
        ));
    }
    // multi-stage: opening (min then max) per dtype and border: tiled in shared memory
    for d in DType::ALL {
        for border in Border::all(one(d)) {
            for rank in [3, 4] {
                let (lo, hi) = if d == DType::Bool {
                    (BinaryOp::And, BinaryOp::Or)
                } else {
                    (BinaryOp::Min, BinaryOp::Max)
                };
                let mut s0 = Sb::default();
                let r0 = window_reduce(&mut s0, Source::Input(0), d, rank, 1, border, lo);
                let mut s1 = Sb::default();
                let r1 = window_reduce(&mut s1, Source::Stage(0), d, rank, 2, border, hi);
                let x = s1.load(Source::Input(0), &vec![0; rank - 2], border, d);
                let r1 = s1.bin(hi, r1, x);
                ks.push((
                    format!("opening {d} rank{rank} {border}"),
                    stencil(rank, vec![d], vec![s0.stage(r0), s1.stage(r1)]),
                ));
            }
        }
    }
    ks.extend(staged_kernels());
    ks.extend(general_lines());
    // scans and axis reductions
    for d in DType::ALL {
        for op in [
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::Sum,
            ReduceOp::Any,
            ReduceOp::All,
        ] {
            if !op.accepts(d) {
                continue;
            }
            for axis in [0, 2, 3] {
                for scan in [true, false] {
                    let body = KernelBody::Line(if scan {
                        Line::scan(axis, op, d)
                    } else {
                        Line::reduce(axis, op, d)
                    });
                    ks.push((
                        format!(
                            "{} {op:?} {d} axis{axis}",
                            if scan { "scan" } else { "reduce" }
                        ),
                        Kernel {
                            rank: 4,
                            inputs: vec![d],
                            output: d,
                            body,
                        },
                    ));
                }
            }
        }
    }
    ks
}

/// Line kernels beyond scans and reductions: the toy running maximum reset by NaN (kept at
/// each position or as the final carry, both directions, every axis kind) and two u8
/// carries that swap every step, keeping a bool.
fn general_lines() -> Vec<(String, Kernel)> {
    let (f, b, u) = (DType::F32, DType::Bool, DType::U8);
    let i = |op, dtype| Inst { op, dtype };
    let mut ks = Vec::new();
    for axis in [0, 2, 3] {
        for each in [true, false] {
            for dir in [Direction::Forward, Direction::Backward] {
                let line = Line {
                    axis,
                    direction: dir,
                    carries: vec![f],
                    init: LineInit::Consts(vec![Scalar::f32(f32::NEG_INFINITY)]),
                    step: vec![
                        i(Op::Unary(UnaryOp::IsNan, ValueId(1)), b),
                        i(Op::Binary(BinaryOp::Max, ValueId(0), ValueId(1)), f),
                        i(Op::Const(Scalar::f32(f32::NEG_INFINITY)), f),
                        i(Op::Select(ValueId(2), ValueId(4), ValueId(3)), f),
                    ],
                    next: vec![ValueId(5)],
                    keep: if each {
                        LineKeep::Each(ValueId(3))
                    } else {
                        LineKeep::Final(0)
                    },
                };
                ks.push((
                    format!("running-max-reset axis{axis} each{each} {dir:?}"),
                    Kernel {
                        rank: 4,
                        inputs: vec![f],
                        output: f,
                        body: KernelBody::Line(line),
                    },
                ));
            }
        }
    }
    let pair = Line {
        axis: 2,
        direction: Direction::Backward,
        carries: vec![u, u],
        init: LineInit::Consts(vec![Scalar::U8(1), Scalar::U8(2)]),
        step: vec![
            i(Op::Binary(BinaryOp::Add, ValueId(0), ValueId(1)), u),
            i(Op::Binary(BinaryOp::Add, ValueId(3), ValueId(2)), u),
            i(Op::Binary(BinaryOp::Lt, ValueId(0), ValueId(2)), b),
        ],
        next: vec![ValueId(1), ValueId(4)],
        keep: LineKeep::Each(ValueId(5)),
    };
    ks.push((
        "swapping-pair".into(),
        Kernel {
            rank: 4,
            inputs: vec![u],
            output: b,
            body: KernelBody::Line(pair),
        },
    ));
    ks
}

#[test]
fn general_lines_render_as_one_thread_per_line() {
    for (name, k) in general_lines() {
        let KernelBody::Line(line) = &k.body else {
            unreachable!()
        };
        let m = render(&k, PtxTarget::default(), &CompileOptions::default());
        assert_eq!(m.entries, vec!["kiln_lines"], "{name}");
        assert_eq!(
            m.schedule,
            Schedule::Lines {
                axis: line.axis,
                scan: line.keeps_each()
            },
            "{name}"
        );
        // A backward walk negates its steps; a forward one never does.
        assert_eq!(
            m.text.contains("neg.s64"),
            line.direction == Direction::Backward,
            "{name}"
        );
    }
}

/// Multi-stage kernels that must take the staged (global scratch) schedule.
fn staged_kernels() -> Vec<(String, Kernel)> {
    let d = DType::F32;
    let mut ks = Vec::new();
    // a three-stage chain (stage 1 reads stage 0 at offsets)
    let mut s0 = Sb::default();
    let r0 = window_reduce(
        &mut s0,
        Source::Input(0),
        d,
        4,
        1,
        Border::Reflect,
        BinaryOp::Min,
    );
    let mut s1 = Sb::default();
    let r1 = window_reduce(
        &mut s1,
        Source::Stage(0),
        d,
        4,
        1,
        Border::Wrap,
        BinaryOp::Max,
    );
    let mut s2 = Sb::default();
    let r2 = window_reduce(
        &mut s2,
        Source::Stage(1),
        d,
        4,
        1,
        Border::Constant(Scalar::f32(0.0)),
        BinaryOp::Add,
    );
    ks.push((
        "chain3".to_string(),
        stencil(4, vec![d], vec![s0.stage(r0), s1.stage(r1), s2.stage(r2)]),
    ));
    // a halo too large for shared memory
    let mut s0 = Sb::default();
    let x = s0.load(Source::Input(0), &[0, 0], Border::Mirror, d);
    let r0 = s0.push(Op::Unary(UnaryOp::Sqrt, x), d);
    let mut s1 = Sb::default();
    let a = s1.load(Source::Stage(0), &[-200, 0], Border::Mirror, d);
    let b = s1.load(Source::Stage(0), &[0, 300], Border::Mirror, d);
    let r1 = s1.bin(BinaryOp::Sub, a, b);
    ks.push((
        "bighalo".to_string(),
        stencil(4, vec![d], vec![s0.stage(r0), s1.stage(r1)]),
    ));
    // a stage read at an offset along an outer spatial axis (3-D)
    let mut s0 = Sb::default();
    let x = s0.load(Source::Input(0), &[1, 0, 0], Border::Nearest, d);
    let r0 = s0.push(Op::Cast(x), DType::F64);
    let mut s1 = Sb::default();
    let a = s1.load(Source::Stage(0), &[-1, 0, 0], Border::Nearest, DType::F64);
    let b = s1.load(Source::Stage(0), &[1, 1, 1], Border::Nearest, DType::F64);
    let r1 = s1.bin(BinaryOp::Div, a, b);
    ks.push((
        "outer-offset".to_string(),
        stencil(5, vec![d], vec![s0.stage(r0), s1.stage(r1)]),
    ));
    ks
}

fn render(k: &Kernel, target: PtxTarget, options: &CompileOptions) -> PtxModule {
    ptx::render(k, &target, options).unwrap_or_else(|e| panic!("render failed: {e}\n{k:?}"))
}

#[test]
fn every_kernel_assembles_for_sm80_and_sm90() {
    if let Some(dir) = std::env::var_os("KILN_PTX_DUMP") {
        for (name, k) in kernels() {
            let m = render(&k, PtxTarget::sm80(), &CompileOptions::default());
            let file: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            std::fs::write(PathBuf::from(&dir).join(format!("{file}.ptx")), &m.text).unwrap();
        }
    }
    let Some(ptxas_bin) = ptxas::ptxas_or_skip() else {
        return;
    };
    let mut failures = Vec::new();
    let ks = kernels();
    for (name, k) in &ks {
        for target in [PtxTarget::sm80(), PtxTarget::sm90()] {
            let m = render(k, target, &CompileOptions::default());
            if let Err(e) = ptxas::assemble_with(&ptxas_bin, &m.text, target.sm) {
                failures.push(format!("{name} sm_{}: {e}", target.sm));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} kernels failed:\n{}",
        failures.len(),
        2 * ks.len(),
        failures.join("\n")
    );
}

#[test]
fn faulted_kernels_assemble() {
    let Some(ptxas_bin) = ptxas::ptxas_or_skip() else {
        return;
    };
    let ks = kernels();
    for fault in Fault::ALL {
        let options = CompileOptions {
            fault: Some(fault),
            ..Default::default()
        };
        for (name, k) in ks
            .iter()
            .filter(|(n, _)| n.starts_with("opening f") || n.starts_with("pointwise"))
        {
            let m = render(k, PtxTarget::sm80(), &options);
            if let Err(e) = ptxas::assemble_with(&ptxas_bin, &m.text, 80) {
                panic!("{name} with {fault:?}: {e}");
            }
        }
    }
}

#[test]
fn assemble_check_rejects_bad_ptx() {
    if ptxas::ptxas_or_skip().is_none() {
        return;
    }
    let bad = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus.instr; ret; }\n";
    assert!(ptxas::assemble_check(bad, 80).is_err());
    let good = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n";
    assert_eq!(ptxas::assemble_check(good, 80), Ok(()));
}

#[test]
fn float_arithmetic_is_rn_and_never_ftz_or_fma() {
    for (name, k) in kernels() {
        let m = render(&k, PtxTarget::sm80(), &CompileOptions::default());
        for line in m.text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let l = line.trim();
            assert!(!l.contains(".ftz"), "{name}: {l}");
            assert!(
                !l.starts_with("fma") && !l.starts_with("mad.f") && !l.contains("mad.rn"),
                "{name}: {l}"
            );
            for op in ["add", "sub", "mul", "div", "sqrt"] {
                for t in ["f32", "f64"] {
                    if l.starts_with(&format!("{op}.")) && l.contains(&format!(".{t} ")) {
                        assert!(l.starts_with(&format!("{op}.rn.{t}")), "{name}: {l}");
                    }
                }
            }
            // kiln's min/max rule: never the hardware float min/max unless faulted
            assert!(
                !l.starts_with("min.f") && !l.starts_with("max.f"),
                "{name}: {l}"
            );
        }
    }
}

#[test]
fn fmin_fault_uses_hardware_min_and_drop_nan_mask_drops_it() {
    let (_, k) = kernels()
        .into_iter()
        .find(|(n, _)| n == "opening f32 rank4 reflect")
        .unwrap();
    let plain = render(&k, PtxTarget::sm80(), &CompileOptions::default()).text;
    let fmin = render(
        &k,
        PtxTarget::sm80(),
        &CompileOptions {
            fault: Some(Fault::FminSemantics),
            ..Default::default()
        },
    )
    .text;
    let nomask = render(
        &k,
        PtxTarget::sm80(),
        &CompileOptions {
            fault: Some(Fault::DropNanMask),
            ..Default::default()
        },
    )
    .text;
    let swap = render(
        &k,
        PtxTarget::sm80(),
        &CompileOptions {
            fault: Some(Fault::SwapComparator),
            ..Default::default()
        },
    )
    .text;
    let edge = render(
        &k,
        PtxTarget::sm80(),
        &CompileOptions {
            fault: Some(Fault::WrongBorderRightEdge),
            ..Default::default()
        },
    )
    .text;
    assert!(fmin.contains("min.f32") && fmin.contains("max.f32"));
    assert!(!plain.contains("min.f32"));
    assert!(plain.matches("testp.notanumber").count() > nomask.matches("testp.notanumber").count());
    // no min/max pair on the same operands in an opening: the swap fault changes nothing
    assert_eq!(plain, swap);
    assert_ne!(plain, edge);
}

#[test]
fn swap_fault_swaps_a_comparator() {
    let mut sb = Sb::default();
    let a = sb.load(Source::Input(0), &[0, 0], Border::Reflect, DType::U8);
    let b = sb.load(Source::Input(0), &[0, 1], Border::Reflect, DType::U8);
    let lo = sb.bin(BinaryOp::Min, a, b);
    let hi = sb.bin(BinaryOp::Max, b, a);
    let r = sb.bin(BinaryOp::Sub, hi, lo);
    let k = stencil(4, vec![DType::U8], vec![sb.stage(r)]);
    let plain = render(&k, PtxTarget::sm80(), &CompileOptions::default()).text;
    let swap = render(
        &k,
        PtxTarget::sm80(),
        &CompileOptions {
            fault: Some(Fault::SwapComparator),
            ..Default::default()
        },
    )
    .text;
    let order = |t: &str| {
        let mn = t.find("min.u32").unwrap();
        let mx = t.find("max.u32").unwrap();
        mn < mx
    };
    assert!(order(&plain));
    assert!(!order(&swap));
}

#[test]
fn schedules_are_chosen_as_documented() {
    let ks = kernels();
    let get = |n: &str| ks.iter().find(|(name, _)| name == n).unwrap().1.clone();
    let t = PtxTarget::default();
    let o = CompileOptions::default();
    let m = render(&get("opening f32 rank4 wrap"), t, &o);
    match m.schedule {
        Schedule::Fused { shared_bytes } => {
            // stage 0 read at offsets -2..=2 along x and y: (32+4) x (8+4) f32
            assert_eq!(shared_bytes, 36 * 12 * 4);
        }
        other => panic!("expected a fused schedule, got {other:?}"),
    }
    assert_eq!(m.entries, vec!["kiln_main"]);
    assert!(m.text.contains("bar.sync 0"));
    for name in ["chain3", "bighalo", "outer-offset"] {
        let m = render(&get(name), t, &o);
        assert_eq!(m.schedule, Schedule::Staged, "{name}");
        assert_eq!(m.entries.len(), m.stages.len(), "{name}");
        assert!(!m.text.contains("bar.sync"), "{name}");
    }
    let m = render(&get("scan Sum f32 axis2"), t, &o);
    assert_eq!(
        m.schedule,
        Schedule::Lines {
            axis: 2,
            scan: true
        }
    );
}

#[test]
fn param_block_grid_and_scratch_follow_the_abi() {
    let ks = kernels();
    let get = |n: &str| ks.iter().find(|(name, _)| name == n).unwrap().1.clone();
    let t = PtxTarget::default();
    let o = CompileOptions::default();
    // staged, three stages, one input, rank 4
    let m = render(&get("chain3"), t, &o);
    let dims = [2, 3, 17, 70];
    let w = m
        .param_block(&dims, &[vec![1, 2, 3, 4]], &[5, 6, 7, 8])
        .unwrap();
    let n = 2 * 3 * 17 * 70;
    let expect: Vec<i64> = vec![
        2,
        3,
        17,
        70, // dims
        1,
        2,
        3,
        4, // input 0 strides
        5,
        6,
        7,
        8, // output strides
        3 * 17 * 70,
        17 * 70,
        70,
        1, // scratch strides (contiguous)
        0,
        (n * 4) as i64, // scratch offsets of stages 0 and 1 (f32)
    ];
    assert_eq!(w, expect);
    assert_eq!(m.param_words(), expect.len());
    assert_eq!(m.scratch_bytes(&dims), 2 * n * 4);
    assert_eq!(m.grid(&dims), [3, 3, 6]);
    assert!(m
        .param_block(&dims[..3], &[vec![1, 2, 3]], &[1, 2, 3])
        .is_err());
    assert!(m
        .param_block(&[2, 3, 0, 4], &[vec![1, 2, 3, 4]], &[1, 2, 3, 4])
        .is_err());
    // lines: grid over lines, output shape keeps the axis with length 1
    let m = render(&get("reduce Max u8 axis3"), t, &o);
    assert_eq!(m.output_shape(&dims), vec![2, 3, 17, 1]);
    assert_eq!(m.grid(&dims), [1, 1, 1]);
    assert_eq!(m.scratch_bytes(&dims), 0);
    assert_eq!(
        m.param_block(&dims, &[vec![1, 1, 1, 1]], &[1, 1, 1, 1])
            .unwrap()
            .len(),
        12
    );
    // 1-D spatial: x only, batch x channel in z
    let m = render(&get("gather f32 rank3 wrap"), t, &o);
    assert_eq!(m.block, [256, 1, 1]);
    assert_eq!(m.grid(&[4, 5, 1000]), [4, 1, 20]);
    // huge z is clamped (the kernel loops over z)
    let m = render(&get("gather f32 rank5 wrap"), t, &o);
    assert_eq!(m.grid(&[1000, 1000, 1, 1, 1]), [1, 1, 65535]);
}

#[test]
fn ill_formed_kernels_are_errors() {
    let d = DType::F32;
    let t = PtxTarget::default();
    let o = CompileOptions::default();
    let mut bad = Vec::new();
    // operand not earlier
    let st = Stage {
        insts: vec![Inst {
            op: Op::Unary(UnaryOp::Neg, ValueId(0)),
            dtype: d,
        }],
        result: ValueId(0),
    };
    bad.push(stencil(4, vec![d], vec![st]));
    // wrong offset length
    let mut sb = Sb::default();
    let x = sb.load(Source::Input(0), &[0], Border::Nearest, d);
    bad.push(stencil(4, vec![d], vec![sb.stage(x)]));
    // offsets beyond the largest a tensor can need (i64::MIN has no absolute value in i64)
    for far in [i64::MIN, 1 << 41] {
        let mut sb = Sb::default();
        let x = sb.load(Source::Input(0), &[0, far], Border::Nearest, d);
        bad.push(stencil(4, vec![d], vec![sb.stage(x)]));
    }
    // load of a missing input, and a later stage
    let mut sb = Sb::default();
    let x = sb.load(Source::Input(3), &[0, 0], Border::Nearest, d);
    bad.push(stencil(4, vec![d], vec![sb.stage(x)]));
    let mut sb = Sb::default();
    let x = sb.load(Source::Stage(0), &[0, 0], Border::Nearest, d);
    bad.push(stencil(4, vec![d], vec![sb.stage(x)]));
    // sqrt of u8, add of bools, constant border of the wrong dtype
    let mut sb = Sb::default();
    let x = sb.load(Source::Input(0), &[0, 0], Border::Nearest, DType::U8);
    let y = sb.push(Op::Unary(UnaryOp::Sqrt, x), DType::U8);
    bad.push(stencil(4, vec![DType::U8], vec![sb.stage(y)]));
    let mut sb = Sb::default();
    let x = sb.load(Source::Input(0), &[0, 0], Border::Nearest, DType::Bool);
    let y = sb.bin(BinaryOp::Add, x, x);
    bad.push(stencil(4, vec![DType::Bool], vec![sb.stage(y)]));
    let mut sb = Sb::default();
    let x = sb.load(
        Source::Input(0),
        &[0, 0],
        Border::Constant(Scalar::U8(0)),
        d,
    );
    bad.push(stencil(4, vec![d], vec![sb.stage(x)]));
    // rank too small, axis out of range, sum of bools
    bad.push(Kernel {
        rank: 2,
        inputs: vec![d],
        output: d,
        body: KernelBody::Line(Line::scan(0, ReduceOp::Sum, d)),
    });
    bad.push(Kernel {
        rank: 4,
        inputs: vec![d],
        output: d,
        body: KernelBody::Line(Line::scan(4, ReduceOp::Sum, d)),
    });
    bad.push(Kernel {
        rank: 4,
        inputs: vec![DType::Bool],
        output: DType::Bool,
        body: KernelBody::Line(Line::reduce(1, ReduceOp::Sum, DType::Bool)),
    });
    bad.push(Kernel {
        rank: 4,
        inputs: vec![d],
        output: d,
        body: KernelBody::Stencil { stages: vec![] },
    });
    for k in bad {
        let ptx_err = ptx::render(&k, &t, &o).expect_err("accepted by ptx");
        // The CPU backend runs the same target-neutral checks (`kiln_codegen::validate`) and
        // says the same thing, but for a kernel without a spatial axis, which only PTX's
        // launch geometry rules out before them.
        let ptx_msg = ptx_err
            .to_string()
            .replacen("lowering: ptx: ", "lowering: ", 1);
        if k.rank >= 3 {
            match kiln_codegen::cpu::compile(&k, &o) {
                Ok(_) => panic!("accepted by the CPU: {k:?}"),
                Err(cpu_err) => assert_eq!(cpu_err.to_string(), ptx_msg, "{k:?}"),
            }
        }
    }
}
