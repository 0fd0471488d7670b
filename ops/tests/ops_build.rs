//! Argument errors of every operator and the registry, and the structure of built graphs.

use std::collections::BTreeSet;

use kiln_ir::{
    BinaryOp, Border, BuildError, DType, Graph, GraphBuilder, NodeId, NodeKind, ReduceOp, Scalar,
    TensorType, UnaryOp,
};
use kiln_ops::*;

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType {
        dtype,
        shape: shape.to_vec(),
    }
}

fn params(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn build(name: &str, list: &[(&str, &str)], t: &TensorType) -> Result<Graph, OpError> {
    build_op(name, &params(list), t)
}

fn with_input(dtype: DType, shape: &[usize]) -> (GraphBuilder, NodeId) {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    (b, x)
}

fn count(g: &Graph, f: impl Fn(&NodeKind) -> bool) -> usize {
    g.nodes.iter().filter(|n| f(&n.kind)).count()
}

fn gather_offsets(g: &Graph) -> BTreeSet<Vec<i64>> {
    g.nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Gather { offset, .. } => Some(offset.clone()),
            _ => None,
        })
        .collect()
}

fn the_network(g: &Graph) -> (usize, u32, usize, u32) {
    let nets: Vec<_> = g
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::Network {
                inputs,
                width,
                pairs,
                output,
            } => Some((inputs.len(), *width, pairs.len(), *output)),
            _ => None,
        })
        .collect();
    assert_eq!(nets.len(), 1, "expected one network node");
    nets[0]
}

fn box_offsets(lo: i64, hi: i64) -> BTreeSet<Vec<i64>> {
    let mut s = BTreeSet::new();
    for a in lo..=hi {
        for b in lo..=hi {
            s.insert(vec![a, b]);
        }
    }
    s
}

// ---------------------------------------------------------------- structure

#[test]
fn median_blur_3x3_structure() {
    let g = build("median_blur", &[("k", "3")], &ty(DType::F32, &[2, 3, 8, 9])).unwrap();
    assert_eq!(count(&g, |k| matches!(k, NodeKind::Gather { .. })), 9);
    assert_eq!(gather_offsets(&g), box_offsets(-1, 1));
    for n in &g.nodes {
        if let NodeKind::Gather { border, .. } = &n.kind {
            assert_eq!(*border, Border::Constant(Scalar::F32(0)));
        }
    }
    assert_eq!(the_network(&g), (9, 9, 24, 4));
    // The NaN/Inf mask: is_finite, not, window any over the same box, select.
    assert_eq!(
        count(&g, |k| matches!(
            k,
            NodeKind::Unary {
                op: UnaryOp::IsFinite,
                ..
            }
        )),
        1
    );
    let any: Vec<_> = g
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::WindowReduce {
                op: ReduceOp::Any,
                footprint,
                border,
                ..
            } => Some((
                footprint.offsets.iter().cloned().collect::<BTreeSet<_>>(),
                *border,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        any,
        vec![(box_offsets(-1, 1), Border::Constant(Scalar::Bool(false)))]
    );
    let out = g.node(g.outputs[0]);
    assert!(matches!(out.kind, NodeKind::Select { .. }));
    assert_eq!(out.ty, ty(DType::F32, &[2, 3, 8, 9]));
    let nan = g.nodes.iter().any(|n| {
        matches!(
            n.kind,
            NodeKind::Constant {
                value: Scalar::F32(0x7fc0_0000)
            }
        )
    });
    assert!(nan, "the canonical NaN constant");
}

#[test]
fn median_blur_5x5_and_even_sizes() {
    let g = build("median_blur", &[("k", "5")], &ty(DType::F64, &[1, 1, 6, 6])).unwrap();
    assert_eq!(the_network(&g), (25, 25, 113, 12));
    assert_eq!(gather_offsets(&g), box_offsets(-2, 2));
    // Even k: (k-1)/2 before, k/2 after; lower median of 16 is index 7.
    let g = build("median_blur", &[("k", "4")], &ty(DType::F32, &[1, 1, 6, 6])).unwrap();
    assert_eq!(gather_offsets(&g), box_offsets(-1, 2));
    assert_eq!(the_network(&g).3, 7);
    // ky, kx.
    let g = build(
        "median_blur",
        &[("k", "1,3")],
        &ty(DType::F32, &[1, 1, 6, 6]),
    )
    .unwrap();
    let want: BTreeSet<Vec<i64>> = [vec![0, -1], vec![0, 0], vec![0, 1]].into_iter().collect();
    assert_eq!(gather_offsets(&g), want);
    assert_eq!(the_network(&g).3, 1);
}

#[test]
fn median_filter_uses_upper_median_and_scipy_centring() {
    // size 4 → 16 entries → rank 8 (scipy's filter_size // 2), offsets j - 2 in -2..=1.
    let g = build(
        "median_filter",
        &[("size", "4")],
        &ty(DType::F32, &[1, 1, 7, 7]),
    )
    .unwrap();
    assert_eq!(the_network(&g).3, 8);
    assert_eq!(gather_offsets(&g), box_offsets(-2, 1));
    // origin 1 shifts offsets by -1.
    let g = build(
        "median_filter",
        &[("size", "3"), ("origin", "1")],
        &ty(DType::F32, &[1, 1, 7, 7]),
    )
    .unwrap();
    assert_eq!(gather_offsets(&g), box_offsets(-2, 0));
    // Masked footprint: 5 entries → rank 2.
    let g = build(
        "median_filter",
        &[("footprint", "0,1,0;1,1,1;0,1,0"), ("mode", "wrap")],
        &ty(DType::F64, &[1, 2, 7, 7]),
    )
    .unwrap();
    assert_eq!(the_network(&g).0, 5);
    assert_eq!(the_network(&g).3, 2);
    for n in &g.nodes {
        if let NodeKind::Gather { border, .. } = &n.kind {
            assert_eq!(*border, Border::Wrap);
        }
    }
}

#[test]
fn median_filter_is_n_d_over_spatial_axes() {
    let g = build(
        "median_filter",
        &[("size", "3,1,2")],
        &ty(DType::U8, &[2, 1, 4, 5, 6]),
    )
    .unwrap();
    let offs = gather_offsets(&g);
    assert_eq!(offs.len(), 6);
    assert!(offs.iter().all(|o| o.len() == 3 && o[1] == 0));
    assert_eq!(the_network(&g).3, 3);
}

fn window_nodes(g: &Graph) -> Vec<(ReduceOp, BTreeSet<Vec<i64>>)> {
    g.nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::WindowReduce { op, footprint, .. } => {
                Some((*op, footprint.offsets.iter().cloned().collect()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn grey_morphology_structure() {
    let t = ty(DType::F32, &[1, 1, 9, 9]);
    let ero = build("grey_erosion", &[("size", "2,3")], &t).unwrap();
    let e: BTreeSet<Vec<i64>> = [-1, 0]
        .iter()
        .flat_map(|&a| [-1, 0, 1].map(|b| vec![a, b]))
        .collect();
    assert_eq!(window_nodes(&ero), vec![(ReduceOp::Min, e.clone())]);
    let dil = build("grey_dilation", &[("size", "2,3")], &t).unwrap();
    let d: BTreeSet<Vec<i64>> = e.iter().map(|o| o.iter().map(|v| -v).collect()).collect();
    assert_eq!(window_nodes(&dil), vec![(ReduceOp::Max, d.clone())]);
    let open = build("grey_opening", &[("size", "2,3")], &t).unwrap();
    assert_eq!(
        window_nodes(&open),
        vec![(ReduceOp::Min, e.clone()), (ReduceOp::Max, d.clone())]
    );
    let close = build("grey_closing", &[("size", "2,3")], &t).unwrap();
    assert_eq!(
        window_nodes(&close),
        vec![(ReduceOp::Max, d), (ReduceOp::Min, e)]
    );
    // The default mode is scipy's reflect; constant takes cval in the input dtype.
    let g = build(
        "grey_erosion",
        &[("size", "3"), ("mode", "constant"), ("cval", "0.1")],
        &ty(DType::F32, &[1, 1, 4, 4]),
    )
    .unwrap();
    let border = g.nodes.iter().find_map(|n| match &n.kind {
        NodeKind::WindowReduce { border, .. } => Some(*border),
        _ => None,
    });
    assert_eq!(border, Some(Border::Constant(Scalar::f32(0.1))));
    let border = window_border(&ero);
    assert_eq!(border, Border::Reflect);
}

fn window_border(g: &Graph) -> Border {
    g.nodes
        .iter()
        .find_map(|n| match &n.kind {
            NodeKind::WindowReduce { border, .. } => Some(*border),
            _ => None,
        })
        .unwrap()
}

#[test]
fn gradient_structure() {
    let g = build(
        "gradient_magnitude",
        &[("mode", "nearest")],
        &ty(DType::F32, &[1, 1, 5, 6]),
    )
    .unwrap();
    let want: BTreeSet<Vec<i64>> = [vec![0, 1], vec![0, -1], vec![1, 0], vec![-1, 0]]
        .into_iter()
        .collect();
    assert_eq!(gather_offsets(&g), want);
    assert_eq!(
        count(&g, |k| matches!(
            k,
            NodeKind::Binary {
                op: BinaryOp::Sub,
                ..
            }
        )),
        2
    );
    assert_eq!(
        count(&g, |k| matches!(
            k,
            NodeKind::Binary {
                op: BinaryOp::Mul,
                ..
            }
        )),
        2
    );
    let out = g.node(g.outputs[0]);
    assert!(matches!(
        out.kind,
        NodeKind::Unary {
            op: UnaryOp::Sqrt,
            ..
        }
    ));
    // 3-D: only the last two spatial axes.
    let g = build("gradient_magnitude", &[], &ty(DType::F64, &[1, 1, 3, 5, 6])).unwrap();
    assert!(gather_offsets(&g).iter().all(|o| o[0] == 0));
}

#[test]
fn binary_erosion_structure() {
    let g = build("binary_erosion", &[], &ty(DType::Bool, &[1, 1, 5, 5])).unwrap();
    let w = window_nodes(&g);
    let cross: BTreeSet<Vec<i64>> = [vec![-1, 0], vec![0, -1], vec![0, 0], vec![0, 1], vec![1, 0]]
        .into_iter()
        .collect();
    assert_eq!(w, vec![(ReduceOp::All, cross)]);
    assert_eq!(window_border(&g), Border::Constant(Scalar::Bool(false)));
    let g = build(
        "binary_erosion",
        &[
            ("structure", "1,1"),
            ("border_value", "1"),
            ("origin", "0,-1"),
        ],
        &ty(DType::Bool, &[1, 1, 5, 5]),
    )
    .unwrap();
    let w = window_nodes(&g);
    let want: BTreeSet<Vec<i64>> = [vec![0, 0], vec![0, 1]].into_iter().collect();
    assert_eq!(w, vec![(ReduceOp::All, want)]);
    assert_eq!(window_border(&g), Border::Constant(Scalar::Bool(true)));
}

#[test]
fn footprint_syntax_planes_and_rank_adjustment() {
    // Two planes of 2x2 on a 3-D input.
    let g = build(
        "grey_erosion",
        &[("footprint", "1,0;0,0|0,0;0,1")],
        &ty(DType::F32, &[1, 1, 4, 4, 4]),
    )
    .unwrap();
    let want: BTreeSet<Vec<i64>> = [vec![-1, -1, -1], vec![0, 0, 0]].into_iter().collect();
    assert_eq!(window_nodes(&g)[0].1, want);
    // A single row on a 1-D input.
    let g = build(
        "grey_erosion",
        &[("footprint", "1,1,1")],
        &ty(DType::F32, &[1, 1, 7]),
    );
    assert!(g.is_ok());
}

#[test]
fn registry_lists_every_operator() {
    let names = op_names();
    assert_eq!(names.len(), OPS.len());
    for n in names {
        let info = op_info(n).unwrap();
        assert_eq!(info.name, *n);
        assert!(!info.summary.is_empty() && !info.params.is_empty());
    }
    assert!(op_info("nope").is_none());
}

// ---------------------------------------------------------------- errors

fn err(name: &str, list: &[(&str, &str)], t: &TensorType) -> OpError {
    let e = build(name, list, t).expect_err("must fail");
    let msg = e.to_string();
    assert!(
        !msg.contains('\n') && !msg.is_empty(),
        "one-line message: {msg:?}"
    );
    e
}

#[test]
fn registry_errors() {
    let t = ty(DType::F32, &[1, 1, 5, 5]);
    assert!(matches!(err("blur", &[], &t), OpError::UnknownOp { .. }));
    assert!(matches!(
        err("median_blur", &[("k", "3"), ("size", "3")], &t),
        OpError::UnknownParam { .. }
    ));
    assert!(matches!(
        err("median_blur", &[("k", "3"), ("k", "5")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_blur", &[], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_blur", &[("k", "x")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_blur", &[("k", "-3")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_blur", &[("k", "1,2,3")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_filter", &[], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("median_filter", &[("size", "3"), ("footprint", "1")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("size", "3"), ("mode", "reflect101")], &t),
        OpError::UnknownMode { .. }
    ));
    assert!(matches!(
        err(
            "grey_erosion",
            &[("size", "3"), ("mode", "constant"), ("cval", "abc")],
            &t
        ),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("size", "3"), ("origin", "1.5")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("footprint", "1,0;1")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("footprint", "1,2;1,1")], &t),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("footprint", "1,0|1,0;1,1")], &t),
        OpError::BadParam { .. }
    ));
    let tb = ty(DType::Bool, &[1, 1, 5, 5]);
    assert!(matches!(
        err("binary_erosion", &[("border_value", "2")], &tb),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err(
            "binary_erosion",
            &[("structure", "1"), ("footprint", "1")],
            &tb
        ),
        OpError::BadParam { .. }
    ));
    // A bad input type reaches the graph builder.
    assert!(matches!(
        err(
            "median_filter",
            &[("size", "3")],
            &ty(DType::F32, &[1, 1, 0])
        ),
        OpError::Build(BuildError::BadShape { .. })
    ));
}

#[test]
fn size_errors() {
    let t = ty(DType::F32, &[1, 1, 5, 5]);
    for op in [
        "median_filter",
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
    ] {
        assert!(
            matches!(err(op, &[("size", "0")], &t), OpError::BadSize { .. }),
            "{op}"
        );
        assert!(
            matches!(err(op, &[("size", "3,0")], &t), OpError::BadSize { .. }),
            "{op}"
        );
        assert!(
            matches!(err(op, &[("size", "3,3,3")], &t), OpError::BadSize { .. }),
            "{op}"
        );
    }
    assert!(matches!(
        err("median_blur", &[("k", "0")], &t),
        OpError::BadSize { .. }
    ));
    assert!(matches!(
        err("median_blur", &[("k", "100")], &t),
        OpError::BadSize { .. }
    ));
    assert!(matches!(
        err("median_filter", &[("size", "65")], &t),
        OpError::BadSize { .. }
    ));
    assert!(matches!(
        err("grey_erosion", &[("size", "1000")], &t),
        OpError::BadSize { .. }
    ));
}

#[test]
fn origin_errors() {
    let t = ty(DType::F32, &[1, 1, 5, 5]);
    for op in [
        "median_filter",
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
    ] {
        // size 3: -1..=1; size 4: -2..=1; size 1: 0..=0.
        for (size, origin) in [("3", "2"), ("3", "-2"), ("4", "2"), ("4", "-3"), ("1", "1")] {
            assert!(
                matches!(
                    err(op, &[("size", size), ("origin", origin)], &t),
                    OpError::BadOrigin { .. }
                ),
                "{op} size {size} origin {origin}"
            );
        }
        for (size, origin) in [
            ("3", "1"),
            ("3", "-1"),
            ("4", "1"),
            ("4", "-2"),
            ("2", "-1"),
        ] {
            assert!(build(op, &[("size", size), ("origin", origin)], &t).is_ok());
        }
        assert!(matches!(
            err(op, &[("size", "3"), ("origin", "0,0,0")], &t),
            OpError::BadOrigin { .. }
        ));
    }
    let tb = ty(DType::Bool, &[1, 1, 5, 5]);
    assert!(matches!(
        err("binary_erosion", &[("origin", "2")], &tb),
        OpError::BadOrigin { .. }
    ));
}

#[test]
fn footprint_errors() {
    let (mut b, x) = with_input(DType::F32, &[1, 1, 5, 5]);
    let bad_mask = Window::footprint(&[3, 3], &[true; 8]);
    assert!(matches!(
        grey_erosion(&mut b, x, &bad_mask, Border::Reflect),
        Err(OpError::BadFootprint { .. })
    ));
    let empty = Window::footprint(&[2, 2], &[false; 4]);
    assert!(matches!(
        median_filter(&mut b, x, &empty, Border::Reflect),
        Err(OpError::BadFootprint { .. })
    ));
    let wrong_rank = Window::footprint(&[3], &[true; 3]);
    assert!(matches!(
        grey_dilation(&mut b, x, &wrong_rank, Border::Reflect),
        Err(OpError::BadFootprint { .. })
    ));
    let zero = Window::footprint(&[0, 3], &[]);
    assert!(matches!(
        grey_dilation(&mut b, x, &zero, Border::Reflect),
        Err(OpError::BadFootprint { .. })
    ));
    let (mut b, x) = with_input(DType::Bool, &[1, 1, 5, 5]);
    assert!(matches!(
        binary_erosion(&mut b, x, Some(&empty), false, &[]),
        Err(OpError::BadFootprint { .. })
    ));
    assert!(matches!(
        err(
            "binary_erosion",
            &[("structure", "0,0;0,0")],
            &ty(DType::Bool, &[1, 1, 5, 5])
        ),
        OpError::BadFootprint { .. }
    ));
}

#[test]
fn input_errors() {
    // median_blur: exactly two spatial dims, float only.
    for shape in [&[1usize, 1, 5][..], &[1, 1, 2, 5, 5]] {
        assert!(matches!(
            err("median_blur", &[("k", "3")], &ty(DType::F32, shape)),
            OpError::BadInput { .. }
        ));
    }
    for d in [DType::U8, DType::Bool] {
        assert!(matches!(
            err("median_blur", &[("k", "3")], &ty(d, &[1, 1, 5, 5])),
            OpError::BadInput { .. }
        ));
        assert!(matches!(
            err("gradient_magnitude", &[], &ty(d, &[1, 1, 5, 5])),
            OpError::BadInput { .. }
        ));
    }
    assert!(matches!(
        err("gradient_magnitude", &[], &ty(DType::F32, &[1, 1, 5])),
        OpError::BadInput { .. }
    ));
    // binary_erosion truth-tests non-bool input (scipy's `astype(bool)`) instead of refusing
    // it: the graph compares with zero and gives bool.
    for d in [DType::F32, DType::F64, DType::U8] {
        let g = build("binary_erosion", &[], &ty(d, &[1, 1, 5, 5])).unwrap();
        assert_eq!(g.node(g.outputs[0]).ty.dtype, DType::Bool);
    }
    // A node id that does not exist.
    let (mut b, _) = with_input(DType::F32, &[1, 1, 5, 5]);
    let ghost = NodeId(99);
    assert!(matches!(
        median_blur(&mut b, ghost, 3),
        Err(OpError::Build(BuildError::UnknownOperand { .. }))
    ));
    assert!(matches!(
        grey_erosion(&mut b, ghost, &Window::size(&[3]), Border::Reflect),
        Err(OpError::Build(BuildError::UnknownOperand { .. }))
    ));
    // A constant border of the wrong dtype is the builder's error.
    let (mut b, x) = with_input(DType::F32, &[1, 1, 5, 5]);
    assert!(matches!(
        grey_erosion(
            &mut b,
            x,
            &Window::size(&[3]),
            Border::Constant(Scalar::f64(1.0))
        ),
        Err(OpError::Build(BuildError::DType { .. }))
    ));
}

#[test]
fn every_dtype_for_rank_and_morphology_filters() {
    for d in DType::ALL {
        let t = ty(d, &[1, 2, 4, 5]);
        for op in [
            "median_filter",
            "grey_erosion",
            "grey_dilation",
            "grey_opening",
            "grey_closing",
        ] {
            let g = build(
                op,
                &[("size", "3"), ("mode", "constant"), ("cval", "1")],
                &t,
            );
            let g = g.unwrap_or_else(|e| panic!("{op} {d}: {e}"));
            assert_eq!(g.node(g.outputs[0]).ty, t);
        }
    }
}

/// Windows past the selection-network limit are refused with a clear error, not a stall.
#[test]
fn oversized_median_windows_are_refused() {
    let ty = kiln_ir::TensorType {
        dtype: kiln_ir::DType::F32,
        shape: vec![1, 1, 64, 64],
    };
    let ok = kiln_ops::build_op("median_blur", &[("k".into(), "21".into())], &ty);
    assert!(ok.is_ok(), "{ok:?}");
    for (op, p, v) in [("median_blur", "k", "23"), ("median_filter", "size", "22")] {
        let err = kiln_ops::build_op(op, &[(p.into(), v.into())], &ty).unwrap_err();
        assert!(err.to_string().contains("too large"), "{op}: {err}");
    }
}
