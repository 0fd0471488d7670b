//! `build_plan` and `OpPlan`: graph operators through the program layer, and its errors.

use kiln_ir::{DType, TensorType};
use kiln_ops::{build_plan, Exec, OpError, OpPlan};
use kiln_runtime::{fused::Engine, Tensor};

fn image(h: usize, w: usize) -> Tensor {
    let data: Vec<f32> = (0..h * w)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    Tensor::from_f32(data, &[1, 1, h, w]).unwrap()
}

fn ty(t: &Tensor) -> TensorType {
    TensorType {
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
    }
}

#[test]
fn a_graph_operator_runs_eager_and_fused_alike_through_its_plan() {
    let x = image(13, 17);
    let params = vec![("size".to_string(), "3,5".to_string())];
    let plan = build_plan("grey_opening", &params, &[ty(&x)]).unwrap();
    assert!(matches!(plan, OpPlan::Graph(_)));
    assert_eq!(plan.outputs(), vec!["out".to_string()]);
    let engine = Engine::new();
    let e = plan.run(Exec::Eager, std::slice::from_ref(&x)).unwrap();
    let f = plan
        .run(Exec::Fused(&engine), std::slice::from_ref(&x))
        .unwrap();
    assert_eq!(e.len(), 1);
    let (e, f) = (e[0].to_scalars(), f[0].to_scalars());
    assert_eq!(e.len(), 13 * 17);
    // Scalars compare by their bits.
    assert_eq!(e, f);
}

#[test]
fn a_graph_operator_given_two_inputs_is_a_typed_error() {
    let t = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 4, 4],
    };
    let err = build_plan("grey_erosion", &[], &[t.clone(), t]).unwrap_err();
    match err {
        OpError::BadInput { op, problem } => {
            assert_eq!(op, "grey_erosion");
            assert!(problem.contains("takes 1 input, got 2"), "{problem}");
        }
        other => panic!("expected BadInput, got {other:?}"),
    }
}

#[test]
fn an_unknown_operator_lists_every_known_name() {
    let err = build_plan("no_such_op", &[], &[]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("unknown operator `no_such_op`"), "{msg}");
    for name in kiln_ops::all_names() {
        assert!(msg.contains(name), "{name} missing from: {msg}");
    }
}
