//! Structure of lowered kernels, from hand-built fused groups: sharing (hash-consing),
//! inlining under borders, window and network expansion, and errors.

use kiln_codegen::kernel::{Inst, KernelBody, Line, Op, Source, Stage, ValueId};
use kiln_codegen::lower::lower;
use kiln_ir::passes::{FusedGroup, GroupKind};
use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, NodeId, ReduceOp, Scalar, UnaryOp,
};

fn stencil(
    root: NodeId,
    inputs: Vec<NodeId>,
    stages: Vec<NodeId>,
    members: Vec<NodeId>,
) -> FusedGroup {
    FusedGroup {
        kind: GroupKind::Stencil,
        root,
        inputs,
        stages,
        members,
    }
}

fn stages_of(body: &KernelBody) -> &[Stage] {
    match body {
        KernelBody::Stencil { stages } => stages,
        other => panic!("not a stencil: {other:?}"),
    }
}

fn count(stage: &Stage, f: impl Fn(&Op) -> bool) -> usize {
    stage.insts.iter().filter(|i| f(&i.op)).count()
}

fn inst(stage: &Stage, v: ValueId) -> &Inst {
    &stage.insts[v.0 as usize]
}

/// Every operand precedes its user, and no instruction is duplicated or dead.
fn check_well_formed(stage: &Stage) {
    let mut seen = std::collections::HashSet::new();
    let mut used = vec![false; stage.insts.len()];
    used[stage.result.0 as usize] = true;
    for (i, inst) in stage.insts.iter().enumerate() {
        assert!(seen.insert(inst.clone()), "duplicate instruction {inst:?}");
        let ops: Vec<ValueId> = match inst.op {
            Op::Unary(_, a) | Op::Cast(a) => vec![a],
            Op::Binary(_, a, b) => vec![a, b],
            Op::Select(c, a, b) => vec![c, a, b],
            _ => vec![],
        };
        for v in ops {
            assert!((v.0 as usize) < i, "operand {v:?} of v{i} is not earlier");
            used[v.0 as usize] = true;
        }
    }
    assert!(used.iter().all(|&u| u), "dead instructions in {stage:?}");
}

fn all_members(g: &Graph, from: usize) -> Vec<NodeId> {
    (from..g.len()).map(|i| NodeId(i as u32)).collect()
}

#[test]
fn median_network_shares_loads_and_comparators() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 8, 8]).unwrap();
    let cval = Border::Constant(Scalar::f32(0.0));
    let mut taps = Vec::new();
    for dy in -1..=1 {
        for dx in -1..=1 {
            taps.push(b.gather(x, &[dy, dx], cval).unwrap());
        }
    }
    // A tiny 3-wire network on the first taps, two kept wires (min and max of three).
    let pairs = [(0, 1), (1, 2), (0, 1)];
    let lo = b.network(&taps[..3], 3, &pairs, 0).unwrap();
    let hi = b.network(&taps[..3], 3, &pairs, 2).unwrap();
    let s = b.binary(BinaryOp::Add, lo, hi).unwrap();
    // NaN mask over all nine taps (any), same loads.
    let nans: Vec<NodeId> = taps
        .iter()
        .map(|&t| b.unary(UnaryOp::IsNan, t).unwrap())
        .collect();
    let mut any = nans[0];
    for &n in &nans[1..] {
        any = b.binary(BinaryOp::Or, any, n).unwrap();
    }
    let nan = b.constant_like(Scalar::f32(f32::NAN), x).unwrap();
    let out = b.select(any, nan, s).unwrap();
    let g = b.finish(&[out]).unwrap();
    let k = lower(&g, &stencil(out, vec![x], vec![out], all_members(&g, 1))).unwrap();
    assert_eq!(k.inputs, vec![DType::F32]);
    assert_eq!(k.output, DType::F32);
    assert_eq!(k.rank, 4);
    let st = &stages_of(&k.body)[0];
    check_well_formed(st);
    assert_eq!(count(st, |o| matches!(o, Op::Load { .. })), 9, "{st:?}");
    for i in &st.insts {
        if let Op::Load {
            source,
            border,
            offset,
        } = &i.op
        {
            assert_eq!(*source, Source::Input(0));
            // The centre tap is a plain read: canonical border.
            let want = if offset == &vec![0, 0] {
                Border::Nearest
            } else {
                cval
            };
            assert_eq!(*border, want);
        }
    }
    // Three comparators give at most 3 mins and 3 maxes, shared by both kept wires; the
    // last comparator's max is dead for wire 0 but wire 2 is set by comparator 2.
    let mins = count(st, |o| matches!(o, Op::Binary(BinaryOp::Min, ..)));
    let maxs = count(st, |o| matches!(o, Op::Binary(BinaryOp::Max, ..)));
    assert!(
        mins <= 3 && maxs <= 3 && mins + maxs >= 4,
        "{mins} mins {maxs} maxes"
    );
    assert_eq!(count(st, |o| matches!(o, Op::Unary(UnaryOp::IsNan, _))), 9);
    assert!(matches!(inst(st, st.result).op, Op::Select(..)));
    println!("{k}");
}

#[test]
fn network_extra_wires_start_at_top_and_dead_comparators_vanish() {
    for (dtype, top) in [
        (DType::F32, Scalar::f32(f32::INFINITY)),
        (DType::F64, Scalar::f64(f64::INFINITY)),
        (DType::U8, Scalar::U8(255)),
        (DType::Bool, Scalar::Bool(true)),
    ] {
        let mut b = GraphBuilder::new();
        let x = b.input(dtype, &[1, 1, 4]).unwrap();
        let y = b.gather(x, &[1], Border::Nearest).unwrap();
        // wires: 0 = x, 1 = y, 2 = top. (0,2) min is x-vs-top; (1,2) is dead for output 0.
        let net = b.network(&[x, y], 3, &[(0, 2), (1, 2)], 0).unwrap();
        let g = b.finish(&[net]).unwrap();
        let k = lower(&g, &stencil(net, vec![x], vec![net], all_members(&g, 1))).unwrap();
        let st = &stages_of(&k.body)[0];
        check_well_formed(st);
        assert!(
            st.insts.iter().any(|i| i.op == Op::Const(top)),
            "{dtype}: {st:?}"
        );
        assert_eq!(count(st, |o| matches!(o, Op::Binary(BinaryOp::Min, ..))), 1);
        assert_eq!(count(st, |o| matches!(o, Op::Binary(BinaryOp::Max, ..))), 0);
        // y is only used by the dead comparator, so its load is gone too.
        assert_eq!(count(st, |o| matches!(o, Op::Load { .. })), 1);
    }
}

#[test]
fn plain_reads_are_canonical_and_commutative_operands_sorted() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 5, 5]).unwrap();
    let g0 = b.gather(x, &[0, 0], Border::Wrap).unwrap();
    let a = b.binary(BinaryOp::Mul, x, g0).unwrap(); // x * x
    let y = b.gather(x, &[1, 0], Border::Reflect).unwrap();
    let p = b.binary(BinaryOp::Add, a, y).unwrap();
    let q = b.binary(BinaryOp::Add, y, a).unwrap();
    let r = b.binary(BinaryOp::Sub, p, q).unwrap();
    let gr = b.finish(&[r]).unwrap();
    let k = lower(&gr, &stencil(r, vec![x], vec![r], all_members(&gr, 1))).unwrap();
    let st = &stages_of(&k.body)[0];
    check_well_formed(st);
    // loads: x at 0 (shared by x and the zero-offset wrap gather) and x at [1,0] reflect.
    assert_eq!(count(st, |o| matches!(o, Op::Load { .. })), 2, "{st:?}");
    assert!(st.insts.iter().any(|i| i.op
        == Op::Load {
            source: Source::Input(0),
            offset: vec![0, 0],
            border: Border::Nearest
        }));
    // p and q are one instruction, so sub has equal operands.
    assert_eq!(count(st, |o| matches!(o, Op::Binary(BinaryOp::Add, ..))), 1);
    match inst(st, st.result).op {
        Op::Binary(BinaryOp::Sub, a, b) => assert_eq!(a, b),
        ref o => panic!("{o:?}"),
    }
}

#[test]
fn pointwise_member_read_at_offset_is_inlined_and_wrapped_under_constant() {
    let c = Scalar::f32(-7.0);
    for border in Border::all(c) {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 1, 6, 6]).unwrap();
        let two = b.constant_like(Scalar::f32(2.0), x).unwrap();
        let m = b.binary(BinaryOp::Mul, x, two).unwrap();
        let s = b.unary(UnaryOp::Sqrt, m).unwrap();
        let gth = b.gather(s, &[2, -1], border).unwrap();
        let out = b.binary(BinaryOp::Add, gth, s).unwrap();
        let g = b.finish(&[out]).unwrap();
        let k = lower(&g, &stencil(out, vec![x], vec![out], all_members(&g, 1))).unwrap();
        let st = &stages_of(&k.body)[0];
        check_well_formed(st);
        let shifted = Op::Load {
            source: Source::Input(0),
            offset: vec![2, -1],
            border,
        };
        assert!(st.insts.iter().any(|i| i.op == shifted), "{border}: {st:?}");
        assert_eq!(count(st, |o| matches!(o, Op::Unary(UnaryOp::Sqrt, _))), 2);
        let wrapped = count(st, |o| matches!(o, Op::InRange(off) if off == &vec![2, -1]));
        match border {
            Border::Constant(_) => {
                assert_eq!(wrapped, 1);
                assert!(st.insts.iter().any(|i| i.op == Op::Const(c)));
                assert_eq!(count(st, |o| matches!(o, Op::Select(..))), 1);
            }
            _ => {
                assert_eq!(wrapped, 0);
                assert_eq!(count(st, |o| matches!(o, Op::Select(..))), 0);
            }
        }
    }
}

#[test]
fn window_sum_folds_left_in_footprint_order_and_max_is_a_tree() {
    let fp = Footprint {
        offsets: vec![vec![0, 1], vec![-1, 0], vec![2, 2], vec![0, 0]],
    };
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F64, &[1, 2, 3, 3]).unwrap();
    let s = b
        .window_reduce(x, ReduceOp::Sum, &fp, Border::Mirror)
        .unwrap();
    let m = b
        .window_reduce(x, ReduceOp::Max, &fp, Border::Mirror)
        .unwrap();
    let g = b.finish(&[s, m]).unwrap();
    let ks = lower(&g, &stencil(s, vec![x], vec![s], vec![s])).unwrap();
    let st = &stages_of(&ks.body)[0];
    check_well_formed(st);
    // Walk the left spine: add(add(add(l0, l1), l2), l3), each right operand a load in
    // footprint order (operands of commutative ops are sorted by id, so look at both).
    let load_off = |v: ValueId| match &inst(st, v).op {
        Op::Load { offset, .. } => Some(offset.clone()),
        _ => None,
    };
    let mut v = st.result;
    let mut seen = Vec::new();
    loop {
        match inst(st, v).op {
            Op::Binary(BinaryOp::Add, a, b) => {
                let (acc, leaf) = if load_off(b).is_some() && load_off(a).is_none() {
                    (a, b)
                } else if load_off(a).is_some() && load_off(b).is_none() {
                    (b, a)
                } else {
                    // bottom: add(l0, l1): the first two offsets, either order
                    let mut two = vec![load_off(a).unwrap(), load_off(b).unwrap()];
                    two.sort();
                    let mut want = vec![fp.offsets[0].clone(), fp.offsets[1].clone()];
                    want.sort();
                    assert_eq!(two, want);
                    break;
                };
                seen.push(load_off(leaf).unwrap());
                v = acc;
            }
            ref o => panic!("{o:?}"),
        }
    }
    seen.reverse();
    assert_eq!(seen, fp.offsets[2..].to_vec());

    let km = lower(&g, &stencil(m, vec![x], vec![m], vec![m])).unwrap();
    let st = &stages_of(&km.body)[0];
    check_well_formed(st);
    match inst(st, st.result).op {
        Op::Binary(BinaryOp::Max, a, b) => {
            assert!(matches!(inst(st, a).op, Op::Binary(BinaryOp::Max, ..)));
            assert!(matches!(inst(st, b).op, Op::Binary(BinaryOp::Max, ..)));
        }
        ref o => panic!("{o:?}"),
    }
}

#[test]
fn two_stage_opening_reads_the_first_stage() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 9, 9]).unwrap();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let e = b
        .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
        .unwrap();
    let d = b
        .window_reduce(e, ReduceOp::Max, &fp, Border::Reflect)
        .unwrap();
    let g = b.finish(&[d]).unwrap();
    let k = lower(&g, &stencil(d, vec![x], vec![e, d], vec![e, d])).unwrap();
    let st = stages_of(&k.body);
    assert_eq!(st.len(), 2);
    for s in st {
        check_well_formed(s);
        assert_eq!(s.dtype(), DType::U8);
        assert_eq!(count(s, |o| matches!(o, Op::Load { .. })), 9);
    }
    assert!(st[0].insts.iter().all(|i| !matches!(
        i.op,
        Op::Load {
            source: Source::Stage(_),
            ..
        }
    )));
    assert!(st[1].insts.iter().all(|i| !matches!(
        i.op,
        Op::Load {
            source: Source::Input(_),
            ..
        }
    )));
    let text = k.to_string();
    assert!(
        text.contains("stage 1") && text.contains("load stage0"),
        "{text}"
    );
}

#[test]
fn scans_and_reductions_lower_to_their_bodies() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[2, 3, 4]).unwrap();
    let s = b.scan(x, 1, ReduceOp::Sum).unwrap();
    let r = b.axis_reduce(s, 2, ReduceOp::Max).unwrap();
    let g = b.finish(&[r]).unwrap();
    let group = |kind, root, input| FusedGroup {
        kind,
        root,
        inputs: vec![input],
        stages: vec![],
        members: vec![root],
    };
    let k = lower(&g, &group(GroupKind::Scan, s, x)).unwrap();
    assert_eq!(
        k.body,
        KernelBody::Line(Line::scan(1, ReduceOp::Sum, DType::F32))
    );
    let k = lower(&g, &group(GroupKind::AxisReduce, r, s)).unwrap();
    assert_eq!(
        k.body,
        KernelBody::Line(Line::reduce(2, ReduceOp::Max, DType::F32))
    );
    assert_eq!(k.rank, 3);
    assert!(k.to_string().contains("reduce axis 2 max"));
    // Mismatched kinds and inputs are errors.
    assert!(lower(&g, &group(GroupKind::AxisReduce, s, x)).is_err());
    assert!(lower(&g, &group(GroupKind::Scan, s, r)).is_err());
    assert!(lower(&g, &group(GroupKind::Stencil, s, x)).is_err());
}

#[test]
fn malformed_groups_are_errors_not_panics() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 4, 4]).unwrap();
    let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
    let w = b
        .window_reduce(x, ReduceOp::Min, &fp, Border::Nearest)
        .unwrap();
    let gth = b.gather(w, &[1, 0], Border::Nearest).unwrap();
    let red = b.axis_reduce(x, 2, ReduceOp::Sum).unwrap();
    let g = b.finish(&[gth, red]).unwrap();
    // The window is read at an offset but is not a stage.
    assert!(lower(&g, &stencil(gth, vec![x], vec![gth], vec![w, gth])).is_err());
    // Root is not the last stage.
    assert!(lower(&g, &stencil(gth, vec![x], vec![w], vec![w, gth])).is_err());
    // A node neither member nor input.
    assert!(lower(&g, &stencil(gth, vec![x], vec![gth], vec![gth])).is_err());
    // Unknown node.
    assert!(lower(&g, &stencil(NodeId(99), vec![x], vec![NodeId(99)], vec![])).is_err());
    // Input of another shape.
    assert!(lower(&g, &stencil(gth, vec![red], vec![w, gth], vec![w, gth])).is_err());
    // The correct grouping works.
    let k = lower(&g, &stencil(gth, vec![x], vec![w, gth], vec![w, gth])).unwrap();
    assert_eq!(stages_of(&k.body).len(), 2);
}

#[test]
fn same_dtype_cast_is_elided_and_constants_fold_into_the_border_value() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 4]).unwrap();
    let c = b.cast(x, DType::U8).unwrap();
    let f = b.cast(c, DType::F32).unwrap();
    let k5 = b.constant_like(Scalar::U8(5), x).unwrap();
    let g5 = b.gather(k5, &[3], Border::Constant(Scalar::U8(5))).unwrap();
    let g0 = b.gather(k5, &[3], Border::Constant(Scalar::U8(0))).unwrap();
    let s = b.binary(BinaryOp::Add, g5, g0).unwrap();
    let sf = b.cast(s, DType::F32).unwrap();
    let out = b.binary(BinaryOp::Add, f, sf).unwrap();
    let g = b.finish(&[out]).unwrap();
    let k = lower(&g, &stencil(out, vec![x], vec![out], all_members(&g, 1))).unwrap();
    let st = &stages_of(&k.body)[0];
    check_well_formed(st);
    assert_eq!(count(st, |o| matches!(o, Op::Cast(_))), 2, "{st:?}");
    // g5 is just the constant 5; g0 is select(in_range([3]), 5, 0).
    assert_eq!(count(st, |o| matches!(o, Op::InRange(_))), 1);
    assert_eq!(count(st, |o| matches!(o, Op::Select(..))), 1);
}

#[test]
fn printer_names_every_instruction() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 4, 4]).unwrap();
    let y = b
        .gather(x, &[1, 0], Border::Constant(Scalar::f32(1.5)))
        .unwrap();
    let s = b.unary(UnaryOp::Sqrt, x).unwrap();
    let t = b
        .gather(s, &[0, 2], Border::Constant(Scalar::f32(0.0)))
        .unwrap();
    let m = b.binary(BinaryOp::Min, y, t).unwrap();
    let c = b.cast(m, DType::U8).unwrap();
    let g = b.finish(&[c]).unwrap();
    let k = lower(&g, &stencil(c, vec![x], vec![c], all_members(&g, 1))).unwrap();
    let text = k.to_string();
    for needle in [
        "kernel rank 4 (f32) -> u8",
        "stage 0 -> u8",
        "f32 = load in0 [1, 0] constant(f32:1.5)",
        "f32 = load in0 [0, 2] constant(f32:0.0)",
        "bool = in_range [0, 2]",
        "f32 = sqrt v",
        "f32 = min v",
        "u8 = cast v",
        "f32 = select v",
        "return v",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn deep_chains_and_wide_dags_lower_without_recursion_blowup() {
    // 50k-deep chain: an explicit work stack, no native recursion.
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 3]).unwrap();
    let mut v = x;
    for _ in 0..50_000 {
        v = b.binary(BinaryOp::Add, v, x).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    // It is walked completely (no stack overflow), then refused by the size limit.
    let e = lower(&g, &stencil(v, vec![x], vec![v], all_members(&g, 1))).unwrap_err();
    assert!(e.to_string().contains("50001 instructions"), "{e}");
    // Under the limit the same chain lowers to one instruction per node.
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 3]).unwrap();
    let mut v = x;
    for _ in 0..19_000 {
        v = b.binary(BinaryOp::Add, v, x).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    let k = lower(&g, &stencil(v, vec![x], vec![v], all_members(&g, 1))).unwrap();
    assert_eq!(stages_of(&k.body)[0].insts.len(), 19_001);
    // A DAG whose tree expansion is 2^60 nodes: memoisation keeps it linear.
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 3]).unwrap();
    let mut v = x;
    for _ in 0..60 {
        v = b.binary(BinaryOp::Mul, v, v).unwrap();
    }
    let s = b
        .gather(v, &[1], Border::Constant(Scalar::f32(2.0)))
        .unwrap();
    let g = b.finish(&[s]).unwrap();
    let k = lower(&g, &stencil(s, vec![x], vec![s], all_members(&g, 1))).unwrap();
    // one load, 60 muls, in_range, const, select
    assert_eq!(stages_of(&k.body)[0].insts.len(), 64);
}

/// A stage past the instruction limit is refused with a clear error instead of compiling for
/// minutes.
#[test]
fn oversized_stages_are_refused() {
    use kiln_ir::{Border, DType, Footprint, GraphBuilder, ReduceOp};
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 8, 8]).unwrap();
    // 151x151 offsets: 22801 loads plus a sum chain, far past the limit.
    let fp = Footprint::scipy_box(&[151, 151], &[0, 0]);
    let s = b
        .window_reduce(x, ReduceOp::Sum, &fp, Border::Reflect)
        .unwrap();
    let g = b.finish(&[s]).unwrap();
    let p = kiln_ir::passes::fuse(&g);
    let e = kiln_codegen::lower::lower(&g, &p.groups[0]).unwrap_err();
    assert!(e.to_string().contains("JIT limit"), "{e}");
    // Just under a tenth of it lowers fine.
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 8, 8]).unwrap();
    let fp = Footprint::scipy_box(&[31, 31], &[0, 0]);
    let s = b
        .window_reduce(x, ReduceOp::Sum, &fp, Border::Reflect)
        .unwrap();
    let g = b.finish(&[s]).unwrap();
    let p = kiln_ir::passes::fuse(&g);
    assert!(kiln_codegen::lower::lower(&g, &p.groups[0]).is_ok());
}

/// `window any(not(is_finite(x)))` under `constant(false)`: out of range the leaf load
/// reads its constant `0.0`, which is finite, so the shifted tree is already `false` there and
/// needs no `select(in_range, ..)`. Under `constant(true)` (or for `is_finite` itself) the
/// tree's value out of range differs from the border constant and every shifted read keeps
/// its select.
#[test]
fn shifted_nan_mask_needs_no_range_select_when_its_border_value_agrees() {
    let cases: [(bool, bool, usize); 3] = [
        // (negate is_finite, border constant, expected in_range tests)
        (true, false, 0),
        (true, true, 8),
        (false, false, 8),
    ];
    for (negate, border_value, want) in cases {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 1, 6, 6]).unwrap();
        let fin = b.unary(UnaryOp::IsFinite, x).unwrap();
        let leaf = if negate {
            b.unary(UnaryOp::Not, fin).unwrap()
        } else {
            fin
        };
        let fp = Footprint {
            offsets: (-1..=1)
                .flat_map(|dy| (-1..=1).map(move |dx| vec![dy, dx]))
                .collect(),
        };
        let w = b
            .window_reduce(
                leaf,
                ReduceOp::Any,
                &fp,
                Border::Constant(Scalar::Bool(border_value)),
            )
            .unwrap();
        let g = b.finish(&[w]).unwrap();
        let k = lower(&g, &stencil(w, vec![x], vec![w], all_members(&g, 1))).unwrap();
        let st = &stages_of(&k.body)[0];
        check_well_formed(st);
        let tests = count(st, |o| matches!(o, Op::InRange(_)));
        assert_eq!(tests, want, "negate={negate} border={border_value}: {st:?}");
    }
}
