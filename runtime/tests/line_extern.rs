//! Extern line functions (`NodeKind::Extern`, `kiln_runtime::line_extern`): the fused CPU
//! path (engine and executor) against eager, bit for bit, for every built-in extern over
//! every axis, both directions, strided layouts and odd shapes; hand-computed lines for the
//! built-ins' meaning; producers and consumers around an extern still fusing; and the
//! typed errors (unknown name, duplicate registration, a call the extern does not accept,
//! a failing, panicking or bool-corrupting extern, the PTX refusal).

mod common;

use common::{Rng, SPECIAL_F32};
use kiln_codegen::{lower::lower, ptx, CodegenError, CompileOptions};
use kiln_ir::passes::fuse::fuse;
use kiln_ir::passes::GroupKind;
use kiln_ir::{BinaryOp, DType, ExternCall, Graph, GraphBuilder, Scalar, UnaryOp};
use kiln_runtime::backend::cpu::CpuBackend;
use kiln_runtime::eager;
use kiln_runtime::executor::Executor;
use kiln_runtime::fused::Engine;
use kiln_runtime::line_extern::{
    line_extern, register_line_extern, registered_line_externs, LineExtern, LineIn, LineOut,
    BUILTIN_NAMES,
};
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{RuntimeError, Storage, Tensor};

fn call(name: &str, axis: usize, backward: bool, out: DType, params: Vec<Scalar>) -> ExternCall {
    ExternCall {
        name: name.into(),
        axis,
        backward,
        out,
        params,
    }
}

/// Test data: floats with NaN payloads, infinities, signed zeros and ties; u8 mostly zero
/// (sparse features, lines without any); bool one in five true.
fn data(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut r = Rng::new(seed);
    let s = match dtype {
        DType::F32 => Storage::F32(
            (0..n)
                .map(|_| {
                    let k = r.next();
                    match k % 6 {
                        0 => f32::from_bits(SPECIAL_F32[(k / 6) as usize % 12]),
                        1 | 2 => ((k / 6) % 3) as f32 - 1.0,
                        _ => (k % 1999) as f32 * 0.37 - 300.0,
                    }
                })
                .collect(),
        ),
        DType::F64 => Storage::F64(
            (0..n)
                .map(|_| {
                    let k = r.next();
                    match k % 6 {
                        0 => f64::from_bits(0x7ff8_0000_0000_0000 | (k & 0xfff)),
                        1 => -0.0,
                        2 => ((k / 6) % 3) as f64,
                        _ => (k % 1999) as f64 * 0.37 - 300.0,
                    }
                })
                .collect(),
        ),
        DType::U8 => Storage::U8(
            (0..n)
                .map(|_| {
                    let k = r.next();
                    if k.is_multiple_of(7) {
                        (k % 251) as u8 | 1
                    } else {
                        0
                    }
                })
                .collect(),
        ),
        DType::Bool => Storage::Bool((0..n).map(|_| r.next().is_multiple_of(5) as u8).collect()),
        other => panic!("the extern tests use f32, f64, u8 and bool lines, not {other}"),
    };
    Tensor::from_storage(s, shape).unwrap()
}

/// Memory layouts: contiguous, reversed axes, last two swapped, channels last.
fn layouts(rank: usize) -> Vec<Vec<usize>> {
    let id: Vec<usize> = (0..rank).collect();
    let rev: Vec<usize> = (0..rank).rev().collect();
    let mut sw = id.clone();
    sw.swap(rank - 1, rank - 2);
    let mut cl = vec![0];
    cl.extend(2..rank);
    cl.push(1);
    vec![id, rev, sw, cl]
}

/// Eager against the engine, the engine in one-thread runs and the CPU executor; equal bits.
fn check(g: &Graph, inputs: &[Tensor], what: &str) {
    let want = eager::run(g, inputs).unwrap_or_else(|e| panic!("{what}: eager: {e}"));
    let engine = Engine::new();
    let exec = Executor::new(CpuBackend::default());
    let runs: [(&str, Vec<Tensor>); 2] = [
        (
            "engine",
            engine
                .run(g, inputs)
                .unwrap_or_else(|e| panic!("{what}: engine: {e}")),
        ),
        (
            "executor",
            exec.run(g, inputs)
                .unwrap_or_else(|e| panic!("{what}: executor: {e}")),
        ),
    ];
    for (who, got) in runs {
        assert_eq!(want.len(), got.len(), "{what}: {who}");
        for (w, f) in want.iter().zip(&got) {
            if let Some(d) = first_difference(w, f) {
                panic!("{what}: eager vs {who} differ at {d}");
            }
        }
    }
}

/// The built-ins with the input dtypes and parameters they take, and their output dtype.
fn builtin_cases() -> Vec<(&'static str, DType, Vec<Scalar>, DType)> {
    vec![
        ("kiln.copy", DType::F32, vec![], DType::F32),
        ("kiln.copy", DType::U8, vec![], DType::U8),
        ("kiln.copy", DType::Bool, vec![], DType::Bool),
        ("kiln.median3", DType::F32, vec![], DType::F32),
        ("kiln.median3", DType::F64, vec![], DType::F64),
        (
            "kiln.since_true",
            DType::Bool,
            vec![Scalar::f32(0.5)],
            DType::F32,
        ),
        (
            "kiln.since_true",
            DType::U8,
            vec![Scalar::f32(-3.0)],
            DType::F32,
        ),
        ("kiln.nearest_true", DType::Bool, vec![], DType::F32),
        ("kiln.nearest_true", DType::U8, vec![], DType::F32),
    ]
}

#[test]
fn builtins_match_eager_on_every_axis_direction_layout_and_odd_shape() {
    let shapes: [&[usize]; 7] = [
        &[1, 1, 1, 1],
        &[1, 1, 1, 300],
        &[1, 1, 300, 1],
        &[2, 3, 5, 7],
        &[3, 1, 64, 2],
        &[2, 1, 9],
        &[1, 2, 3, 4, 5],
    ];
    for shape in shapes {
        let rank = shape.len();
        for (name, xd, params, out) in builtin_cases() {
            let x0 = data(
                xd,
                shape,
                shape.iter().sum::<usize>() as u64 * 13 + xd.size_bytes() as u64,
            );
            let inputs: Vec<Tensor> = layouts(rank)
                .iter()
                .map(|l| x0.with_memory_order(l).unwrap())
                .collect();
            for axis in 0..rank {
                for backward in [false, true] {
                    let mut b = GraphBuilder::new();
                    let x = b.input(xd, shape).unwrap();
                    let c = call(name, axis, backward, out, params.clone());
                    let y = b.line_extern(x, c).unwrap();
                    let g = b.finish(&[y]).unwrap();
                    for (li, input) in inputs.iter().enumerate() {
                        check(
                            &g,
                            std::slice::from_ref(input),
                            &format!(
                                "{name} {xd} {shape:?} axis {axis} backward {backward} layout {li}"
                            ),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_permuted_view_with_an_offset_is_read_through_its_strides() {
    // A transposed view of a bigger tensor's storage, starting past element 0.
    let base = data(DType::F32, &[1, 2, 6, 5], 99);
    let t = base.permuted(&[0, 1, 3, 2]).unwrap();
    for axis in 0..4 {
        for backward in [false, true] {
            let mut b = GraphBuilder::new();
            let x = b.input(DType::F32, t.shape()).unwrap();
            let y = b
                .line_extern(x, call("kiln.median3", axis, backward, DType::F32, vec![]))
                .unwrap();
            let g = b.finish(&[y]).unwrap();
            check(
                &g,
                std::slice::from_ref(&t),
                &format!("permuted axis {axis} {backward}"),
            );
        }
    }
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_scalars()
        .iter()
        .map(|s| match *s {
            Scalar::F32(b) => f32::from_bits(b),
            ref o => panic!("not f32: {o:?}"),
        })
        .collect()
}

/// Runs a one-extern graph over a `[1, 1, 1, n]` line with the engine and eager; both must
/// give `want` exactly.
fn line_result(x: Tensor, c: ExternCall, want: &[f32]) {
    let mut b = GraphBuilder::new();
    let xi = b.input(x.dtype(), x.shape()).unwrap();
    let y = b.line_extern(xi, c).unwrap();
    let g = b.finish(&[y]).unwrap();
    let e = eager::run(&g, std::slice::from_ref(&x)).unwrap();
    let f = Engine::new().run(&g, std::slice::from_ref(&x)).unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&f32s(&e[0])), bits(want), "eager");
    assert_eq!(bits(&f32s(&f[0])), bits(want), "fused");
}

#[test]
fn builtins_compute_what_their_docs_say() {
    let inf = f32::INFINITY;
    let feats = Tensor::from_bool(
        vec![false, true, false, false, false, true, false],
        &[1, 1, 1, 7],
    )
    .unwrap();
    line_result(
        feats.clone(),
        call("kiln.nearest_true", 3, false, DType::F32, vec![]),
        &[1.0, 0.0, 1.0, 2.0, 1.0, 0.0, 1.0],
    );
    line_result(
        feats.clone(),
        call(
            "kiln.since_true",
            3,
            false,
            DType::F32,
            vec![Scalar::f32(0.5)],
        ),
        &[inf, 0.0, 0.5, 1.0, 1.5, 0.0, 0.5],
    );
    // Backward: distances since the last feature walking from the end.
    line_result(
        feats,
        call(
            "kiln.since_true",
            3,
            true,
            DType::F32,
            vec![Scalar::f32(0.5)],
        ),
        &[0.5, 0.0, 1.5, 1.0, 0.5, 0.0, inf],
    );
    let none = Tensor::from_u8(vec![0; 4], &[1, 1, 1, 4]).unwrap();
    line_result(
        none,
        call("kiln.nearest_true", 3, true, DType::F32, vec![]),
        &[inf; 4],
    );
    let nan = f32::from_bits(0x7fc0_0001); // a NaN with a payload: the result is canonical
    let v = Tensor::from_f32(vec![3.0, -0.0, 0.0, 5.0, nan, 1.0], &[1, 1, 1, 6]).unwrap();
    let qnan = f32::from_bits(0x7fc0_0000);
    line_result(
        v,
        call("kiln.median3", 3, false, DType::F32, vec![]),
        &[3.0, 0.0, 0.0, qnan, qnan, qnan],
    );
}

#[test]
fn bool_bytes_other_than_one_read_as_true_in_both_executors() {
    let bytes: Vec<u8> = (0..60u32)
        .map(|i| [0u8, 2, 0, 255, 1, 0, 7][i as usize % 7])
        .collect();
    let x = Tensor::from_storage(Storage::Bool(bytes), &[1, 3, 4, 5]).unwrap();
    let strided = x.with_memory_order(&[3, 2, 1, 0]).unwrap();
    for axis in 0..4 {
        for (name, out, params) in [
            ("kiln.copy", DType::Bool, vec![]),
            ("kiln.since_true", DType::F32, vec![Scalar::f32(1.0)]),
        ] {
            let mut b = GraphBuilder::new();
            let xi = b.input(DType::Bool, x.shape()).unwrap();
            let y = b
                .line_extern(xi, call(name, axis, true, out, params))
                .unwrap();
            let g = b.finish(&[y]).unwrap();
            for t in [&x, &strided] {
                check(&g, std::slice::from_ref(t), &format!("{name} axis {axis}"));
            }
        }
    }
}

#[test]
fn producers_and_consumers_around_an_extern_still_fuse() {
    let shape = [2, 3, 17, 11];
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &shape).unwrap();
    let a = b.unary(UnaryOp::Abs, x).unwrap();
    let n = b.unary(UnaryOp::Neg, a).unwrap();
    let m = b
        .line_extern(n, call("kiln.median3", 2, true, DType::F32, vec![]))
        .unwrap();
    let s = b.binary(BinaryOp::Add, m, x).unwrap();
    let q = b.binary(BinaryOp::Mul, s, s).unwrap();
    let g = b.finish(&[q]).unwrap();
    let p = fuse(&g);
    let kinds: Vec<GroupKind> = p.groups.iter().map(|gr| gr.kind).collect();
    assert_eq!(
        kinds,
        [GroupKind::Stencil, GroupKind::Extern, GroupKind::Stencil]
    );
    assert_eq!(p.groups[0].members.len(), 2, "abs and neg in one kernel");
    assert_eq!(p.groups[2].members.len(), 2, "add and mul in one kernel");
    for layout in layouts(4) {
        let x0 = data(DType::F32, &shape, 5)
            .with_memory_order(&layout)
            .unwrap();
        check(&g, &[x0], &format!("fused chain, layout {layout:?}"));
    }
}

#[test]
fn parameters_are_part_of_the_kernel_identity() {
    let engine = Engine::new();
    let x = data(DType::Bool, &[1, 2, 5, 9], 3);
    let mut outs = Vec::new();
    for unit in [1.0f32, 2.0] {
        let mut b = GraphBuilder::new();
        let xi = b.input(DType::Bool, x.shape()).unwrap();
        let y = b
            .line_extern(
                xi,
                call(
                    "kiln.since_true",
                    3,
                    false,
                    DType::F32,
                    vec![Scalar::f32(unit)],
                ),
            )
            .unwrap();
        let g = b.finish(&[y]).unwrap();
        let f = engine.run(&g, std::slice::from_ref(&x)).unwrap().remove(0);
        let e = eager::run(&g, std::slice::from_ref(&x)).unwrap().remove(0);
        assert!(first_difference(&e, &f).is_none(), "unit {unit}");
        outs.push(f);
    }
    assert!(
        first_difference(&outs[0], &outs[1]).is_some(),
        "the second run reused the first kernel"
    );
}

fn expect_extern_err(r: Result<Vec<Tensor>, RuntimeError>, name: &str, needle: &str, who: &str) {
    match r {
        Err(RuntimeError::Extern { name: n, message }) => {
            assert_eq!(n, name, "{who}");
            assert!(
                message.contains(needle),
                "{who}: {message:?} lacks {needle:?}"
            );
        }
        Err(e) => panic!("{who}: expected an extern error, got {e}"),
        Ok(_) => panic!("{who}: expected an extern error, the run succeeded"),
    }
}

fn one_extern(xd: DType, c: ExternCall) -> (Graph, Tensor) {
    let shape = [1, 2, 4, 6];
    let mut b = GraphBuilder::new();
    let x = b.input(xd, &shape).unwrap();
    let y = b.line_extern(x, c).unwrap();
    (b.finish(&[y]).unwrap(), data(xd, &shape, 1))
}

fn expect_both(xd: DType, c: ExternCall, needle: &str) {
    let name = c.name.clone();
    let (g, x) = one_extern(xd, c);
    let inputs = std::slice::from_ref(&x);
    expect_extern_err(eager::run(&g, inputs), &name, needle, "eager");
    expect_extern_err(Engine::new().run(&g, inputs), &name, needle, "engine");
    expect_extern_err(
        Executor::new(CpuBackend::default()).run(&g, inputs),
        &name,
        needle,
        "executor",
    );
}

#[test]
fn an_unknown_name_is_a_typed_error_in_every_executor() {
    expect_both(
        DType::F32,
        call("test.never_registered", 2, false, DType::F32, vec![]),
        "not registered",
    );
}

#[test]
fn a_call_the_extern_does_not_take_is_a_typed_error() {
    // Wrong output dtype, wrong input dtype, missing parameter, unexpected parameter.
    expect_both(
        DType::F32,
        call("kiln.copy", 1, false, DType::U8, vec![]),
        "the node declares u8",
    );
    expect_both(
        DType::U8,
        call("kiln.median3", 1, false, DType::U8, vec![]),
        "takes f32 or f64",
    );
    expect_both(
        DType::Bool,
        call("kiln.since_true", 1, false, DType::F32, vec![]),
        "one f32 parameter",
    );
    expect_both(
        DType::F32,
        call("kiln.copy", 1, false, DType::F32, vec![Scalar::U8(1)]),
        "no parameters",
    );
}

#[test]
fn registration_rejects_duplicates_and_bad_names() {
    let mk = |name: &str| LineExtern::new(name, |_, _, _| Ok(()), |_, _, _| Ok(()), |d, _| Ok(d));
    register_line_extern(mk("test.dup")).unwrap();
    let e = register_line_extern(mk("test.dup")).unwrap_err();
    assert!(
        matches!(&e, RuntimeError::Extern { name, message } if name == "test.dup" && message.contains("already registered")),
        "{e}"
    );
    let e = register_line_extern(mk("kiln.copy")).unwrap_err();
    assert!(e.to_string().contains("already registered"), "{e}");
    let e = register_line_extern(mk("bad name")).unwrap_err();
    assert!(e.to_string().contains("bad extern name"), "{e}");
    let names = registered_line_externs();
    for b in BUILTIN_NAMES {
        assert!(names.iter().any(|n| n == b), "{b} not registered");
        assert!(line_extern(b).is_ok());
    }
    assert!(names.iter().any(|n| n == "test.dup"));
}

/// f32 → f32: each output is the input times the line's length (the fused path and the twin
/// written differently: indexing and an iterator).
fn scale_by_len(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let (LineIn::F32(v), LineOut::F32(o)) = (x, y) else {
        return Err("f32 only".into());
    };
    for (i, o) in o.iter_mut().enumerate() {
        *o = v.get(i) * v.len() as f32;
    }
    Ok(())
}

fn scale_by_len_twin(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let (LineIn::F32(v), LineOut::F32(o)) = (x, y) else {
        return Err("f32 only".into());
    };
    let n = v.len() as f32;
    for (o, e) in o.iter_mut().zip(v.iter()) {
        *o = e * n;
    }
    Ok(())
}

#[test]
fn a_user_registered_extern_runs_in_every_executor() {
    register_line_extern(LineExtern::new(
        "test.scale_by_len",
        scale_by_len,
        scale_by_len_twin,
        |d, _| {
            if d == DType::F32 {
                Ok(d)
            } else {
                Err("f32 only".into())
            }
        },
    ))
    .unwrap();
    for axis in 0..4 {
        let (g, x) = one_extern(
            DType::F32,
            call("test.scale_by_len", axis, axis % 2 == 1, DType::F32, vec![]),
        );
        check(
            &g,
            &[x.with_memory_order(&[3, 2, 1, 0]).unwrap()],
            &format!("axis {axis}"),
        );
    }
}

#[test]
fn the_comparison_catches_a_twin_that_differs() {
    // A twin that writes zeros: eager and fused must then differ (the check can fail).
    register_line_extern(LineExtern::new(
        "test.bad_twin",
        scale_by_len,
        |_, y, _| {
            if let LineOut::F32(o) = y {
                o.fill(0.0);
            }
            Ok(())
        },
        |d, _| Ok(d),
    ))
    .unwrap();
    let (g, x) = one_extern(
        DType::F32,
        call("test.bad_twin", 3, false, DType::F32, vec![]),
    );
    let e = eager::run(&g, std::slice::from_ref(&x)).unwrap();
    let f = Engine::new().run(&g, std::slice::from_ref(&x)).unwrap();
    assert!(first_difference(&e[0], &f[0]).is_some());
}

#[test]
fn failing_panicking_and_bool_corrupting_externs_are_typed_errors() {
    register_line_extern(LineExtern::new(
        "test.fails",
        |x, _, _| {
            if x.len() > 3 {
                Err("line too long".into())
            } else {
                Ok(())
            }
        },
        |x, _, _| {
            if x.len() > 3 {
                Err("line too long".into())
            } else {
                Ok(())
            }
        },
        |d, _| Ok(d),
    ))
    .unwrap();
    expect_both(
        DType::F32,
        call("test.fails", 3, false, DType::F32, vec![]),
        "line too long",
    );
    let boom =
        |_: LineIn<'_>, _: LineOut<'_>, _: &[Scalar]| -> Result<(), String> { panic!("boom") };
    register_line_extern(LineExtern::new("test.panics", boom, boom, |d, _| Ok(d))).unwrap();
    expect_both(
        DType::F32,
        call("test.panics", 2, true, DType::F32, vec![]),
        "panicked: boom",
    );
    let twos = |_: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]| -> Result<(), String> {
        if let LineOut::Bool(o) = y {
            o.fill(2);
        }
        Ok(())
    };
    register_line_extern(LineExtern::new("test.twos", twos, twos, |_, _| {
        Ok(DType::Bool)
    }))
    .unwrap();
    expect_both(
        DType::U8,
        call("test.twos", 0, false, DType::Bool, vec![]),
        "bool byte 2",
    );
}

#[test]
fn ptx_refuses_externs_with_a_typed_error() {
    let (g, _) = one_extern(
        DType::F32,
        call("kiln.median3", 2, false, DType::F32, vec![]),
    );
    let p = fuse(&g);
    let group = p
        .groups
        .iter()
        .find(|gr| gr.kind == GroupKind::Extern)
        .unwrap();
    let k = lower(&g, group).unwrap();
    match ptx::render(&k, &ptx::PtxTarget::default(), &CompileOptions::default()) {
        Err(CodegenError::ExternUnsupported { name }) => assert_eq!(name, "kiln.median3"),
        Err(e) => panic!("expected ExternUnsupported, got {e}"),
        Ok(_) => panic!("PTX rendered an extern"),
    }
    // The kernel form names the call, and the CPU compile takes it without code.
    assert!(
        k.to_string()
            .contains("extern kiln.median3 axis 2 forward -> f32"),
        "{k}"
    );
    let ck = kiln_codegen::cpu::compile(&k, &CompileOptions::default()).unwrap();
    assert!(ck.machine_code().is_empty());
    assert!(
        ck.describe().contains("extern `kiln.median3`"),
        "{}",
        ck.describe()
    );
}
