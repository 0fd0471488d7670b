//! One test per kind of build the builder rejects: the error variant, and the message names
//! the node id the rejected node would have had.

use kiln_ir::builder::{MAX_FOOTPRINT, MAX_NETWORK_WIDTH, MAX_OFFSET};
use kiln_ir::types::MAX_ELEMENTS;
use kiln_ir::{
    BinaryOp, Border, BuildError, DType, Footprint, GraphBuilder, NodeId, NodeKind, ReduceOp,
    Scalar, UnaryOp,
};

/// A builder with `%0 = f32[1,1,4,4]`, `%1 = f64[1,1,4,4]`, `%2 = u8[1,1,4,4]`,
/// `%3 = bool[1,1,4,4]`, `%4 = f32[1,1,2,2]`; the next node is `%5`.
fn setup() -> GraphBuilder {
    let mut b = GraphBuilder::new();
    for d in [DType::F32, DType::F64, DType::U8, DType::Bool] {
        b.input(d, &[1, 1, 4, 4]).unwrap();
    }
    b.input(DType::F32, &[1, 1, 2, 2]).unwrap();
    b
}
const F32: NodeId = NodeId(0);
const F64: NodeId = NodeId(1);
const U8: NodeId = NodeId(2);
const BOOL: NodeId = NodeId(3);
const SMALL: NodeId = NodeId(4);

fn names_node(e: &BuildError, id: u32) {
    let msg = e.to_string();
    assert!(msg.contains(&format!("node %{id} ")), "{msg}");
}

fn fp(offsets: &[&[i64]]) -> Footprint {
    Footprint {
        offsets: offsets.iter().map(|o| o.to_vec()).collect(),
    }
}

#[test]
fn unknown_operand() {
    let mut b = setup();
    let e = b.unary(UnaryOp::Neg, NodeId(9)).unwrap_err();
    assert!(
        matches!(
            e,
            BuildError::UnknownOperand {
                node: 5,
                operand: 9,
                ..
            }
        ),
        "{e:?}"
    );
    names_node(&e, 5);
    let e = b.network(&[F32, NodeId(77)], 2, &[], 0).unwrap_err();
    assert!(
        matches!(e, BuildError::UnknownOperand { operand: 77, .. }),
        "{e:?}"
    );
}

#[test]
fn shape_mismatch() {
    let mut b = setup();
    let e = b.binary(BinaryOp::Add, F32, SMALL).unwrap_err();
    assert!(
        matches!(e, BuildError::ShapeMismatch { node: 5, .. }),
        "{e:?}"
    );
    names_node(&e, 5);
    let e = b.select(BOOL, F32, SMALL).unwrap_err();
    assert!(matches!(e, BuildError::ShapeMismatch { .. }), "{e:?}");
    let e = b.network(&[F32, SMALL], 2, &[], 0).unwrap_err();
    assert!(matches!(e, BuildError::ShapeMismatch { .. }), "{e:?}");
}

#[test]
fn dtype_mismatch_unary() {
    let mut b = setup();
    for (op, x) in [
        (UnaryOp::Neg, BOOL),
        (UnaryOp::Abs, BOOL),
        (UnaryOp::Sqrt, U8),
        (UnaryOp::IsNan, U8),
        (UnaryOp::IsFinite, BOOL),
        (UnaryOp::Not, F32),
    ] {
        let e = b.unary(op, x).unwrap_err();
        assert!(
            matches!(e, BuildError::DType { node: 5, .. }),
            "{op:?}: {e:?}"
        );
        names_node(&e, 5);
    }
}

#[test]
fn dtype_mismatch_binary() {
    let mut b = setup();
    let e = b.binary(BinaryOp::Add, F32, F64).unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    for (op, x) in [
        (BinaryOp::Add, BOOL),
        (BinaryOp::Div, BOOL),
        (BinaryOp::And, F32),
        (BinaryOp::Or, U8),
    ] {
        let e = b.binary(op, x, x).unwrap_err();
        assert!(matches!(e, BuildError::DType { .. }), "{op:?}: {e:?}");
    }
}

#[test]
fn dtype_mismatch_select() {
    let mut b = setup();
    let e = b.select(F32, F32, F32).unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b.select(BOOL, F32, F64).unwrap_err();
    assert!(matches!(e, BuildError::DType { .. }), "{e:?}");
}

#[test]
fn dtype_mismatch_network() {
    let mut b = setup();
    let e = b.network(&[F32, F64], 2, &[(0, 1)], 0).unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
}

#[test]
fn bad_shapes() {
    let mut b = setup();
    let too_many = MAX_ELEMENTS.isqrt() * 2;
    for shape in [
        vec![1, 1],
        vec![4],
        vec![1; 11],
        vec![1, 1, 0],
        vec![1, too_many, too_many],
    ] {
        let e = b.input(DType::F32, &shape).unwrap_err();
        assert!(
            matches!(e, BuildError::BadShape { node: 5, .. }),
            "{shape:?}: {e:?}"
        );
        names_node(&e, 5);
        let e = b.constant(Scalar::U8(1), &shape).unwrap_err();
        assert!(
            matches!(e, BuildError::BadShape { node: 5, .. }),
            "{shape:?}: {e:?}"
        );
    }
    // Eight spatial dims are fine.
    assert!(b.input(DType::F32, &[1; 10]).is_ok());
}

#[test]
fn gather_offset_length() {
    let mut b = setup();
    let e = b.gather(F32, &[1], Border::Reflect).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b.gather(F32, &[0, 0, 0], Border::Reflect).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { .. }), "{e:?}");
}

#[test]
fn huge_offset() {
    let mut b = setup();
    let e = b
        .gather(F32, &[MAX_OFFSET + 1, 0], Border::Wrap)
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b
        .window_reduce(F32, ReduceOp::Max, &fp(&[&[0, i64::MIN + 1]]), Border::Wrap)
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { .. }), "{e:?}");
    assert!(b
        .gather(F32, &[MAX_OFFSET, -MAX_OFFSET], Border::Wrap)
        .is_ok());
}

#[test]
fn border_constant_dtype() {
    let mut b = setup();
    let e = b
        .gather(F32, &[0, 1], Border::Constant(Scalar::f64(0.0)))
        .unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b
        .window_reduce(
            U8,
            ReduceOp::Max,
            &fp(&[&[0, 0]]),
            Border::Constant(Scalar::Bool(true)),
        )
        .unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
}

#[test]
fn network_without_inputs() {
    let mut b = setup();
    let e = b.network(&[], 2, &[], 0).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
}

#[test]
fn network_width() {
    let mut b = setup();
    let e = b.network(&[F32, F32, F32], 2, &[], 0).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b
        .network(&[F32], MAX_NETWORK_WIDTH + 1, &[], 0)
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { .. }), "{e:?}");
}

#[test]
fn network_bad_pair() {
    let mut b = setup();
    for pair in [(1, 1), (2, 1), (0, 3)] {
        let e = b.network(&[F32, F32], 3, &[(0, 1), pair], 0).unwrap_err();
        assert!(
            matches!(e, BuildError::Invalid { node: 5, .. }),
            "{pair:?}: {e:?}"
        );
        names_node(&e, 5);
    }
}

#[test]
fn network_bad_output() {
    let mut b = setup();
    let e = b.network(&[F32, F32], 3, &[(0, 1)], 3).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
}

#[test]
fn empty_and_oversized_footprint() {
    let mut b = setup();
    let e = b
        .window_reduce(
            F32,
            ReduceOp::Min,
            &Footprint { offsets: vec![] },
            Border::Nearest,
        )
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let big = Footprint {
        offsets: vec![vec![0, 0]; MAX_FOOTPRINT + 1],
    };
    let e = b
        .window_reduce(F32, ReduceOp::Min, &big, Border::Nearest)
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { .. }), "{e:?}");
    // Offsets of the wrong length.
    let e = b
        .window_reduce(F32, ReduceOp::Min, &fp(&[&[0, 0], &[1]]), Border::Nearest)
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { .. }), "{e:?}");
}

#[test]
fn bad_axis() {
    let mut b = setup();
    let e = b.scan(F32, 4, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b.axis_reduce(F32, 17, ReduceOp::Max).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
}

#[test]
fn reduce_op_dtype() {
    let mut b = setup();
    let e = b.scan(BOOL, 2, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, BuildError::DType { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
    let e = b.axis_reduce(F32, 2, ReduceOp::Any).unwrap_err();
    assert!(matches!(e, BuildError::DType { .. }), "{e:?}");
    let e = b
        .window_reduce(U8, ReduceOp::All, &fp(&[&[0, 0]]), Border::Reflect)
        .unwrap_err();
    assert!(matches!(e, BuildError::DType { .. }), "{e:?}");
}

#[test]
fn add_rejects_inputs_and_constants() {
    let mut b = setup();
    let e = b.add(NodeKind::Input { index: 0 }).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    let e = b
        .add(NodeKind::Constant {
            value: Scalar::U8(0),
        })
        .unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
    names_node(&e, 5);
}

#[test]
fn finish_errors() {
    let b = setup();
    let e = b.clone().finish(&[]).unwrap_err();
    assert!(matches!(e, BuildError::Graph(_)), "{e:?}");
    let e = b.finish(&[NodeId(5)]).unwrap_err();
    assert!(matches!(e, BuildError::Graph(_)), "{e:?}");
    assert!(e.to_string().contains("%5"), "{e}");
}

#[test]
fn failed_builds_add_nothing() {
    let mut b = setup();
    assert!(b.unary(UnaryOp::Not, F32).is_err());
    let id = b.unary(UnaryOp::Not, BOOL).unwrap();
    assert_eq!(id, NodeId(5));
}

#[test]
fn most_negative_offset_is_an_error_not_a_panic() {
    let mut b = setup();
    let e = b.gather(F32, &[i64::MIN, 0], Border::Wrap).unwrap_err();
    assert!(matches!(e, BuildError::Invalid { node: 5, .. }), "{e:?}");
}

/// The dtype rule of reductions as SEMANTICS.md states it (min and max take every dtype, sum
/// every dtype but bool, any and all bool only), for every op and dtype: `ReduceOp::accepts`
/// says so, and the builder takes exactly those scans and axis reductions.
#[test]
fn reductions_take_the_documented_dtypes() {
    let ops = [
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Sum,
        ReduceOp::Any,
        ReduceOp::All,
    ];
    for op in ops {
        for d in DType::ALL {
            let documented = match op {
                ReduceOp::Min | ReduceOp::Max => true,
                ReduceOp::Sum => d != DType::Bool,
                ReduceOp::Any | ReduceOp::All => d == DType::Bool,
            };
            assert_eq!(op.accepts(d), documented, "{op:?} on {d}");
            let mut b = GraphBuilder::new();
            let x = b.input(d, &[1, 1, 4, 4]).unwrap();
            assert_eq!(b.scan(x, 2, op).is_ok(), documented, "scan {op:?} on {d}");
            assert_eq!(
                b.axis_reduce(x, 3, op).is_ok(),
                documented,
                "axis reduce {op:?} on {d}"
            );
        }
    }
}
