//! The distance transforms as registry programs: names, outputs, parameters and their errors,
//! and a run through `build_plan` equal to the core transform, eager and fused.

use kiln_ir::{DType, TensorType};
use kiln_ops::distance::{edt_run, Masks};
use kiln_ops::{all_names, build_plan, Exec, OpError};
use kiln_runtime::{fused::Engine, Storage, Tensor};

fn ty(shape: &[usize]) -> TensorType {
    TensorType {
        dtype: DType::F32,
        shape: shape.to_vec(),
    }
}

fn p(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn err(name: &str, params: &[(&str, &str)], shape: &[usize]) -> String {
    match build_plan(name, &p(params), &[ty(shape)]) {
        Ok(_) => panic!("{name} {params:?} on {shape:?} should fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_programs_are_registered_with_their_outputs() {
    for name in [
        "distance_transform_edt",
        "distance_transform_cdt",
        "distance_transform_bf",
        "signed_distance",
    ] {
        assert!(all_names().contains(&name), "{name} not registered");
        let plan = build_plan(name, &[], &[ty(&[1, 1, 4, 5])]).unwrap();
        assert_eq!(plan.outputs(), vec!["distances".to_string()], "{name}");
    }
    let plan = build_plan(
        "distance_transform_edt",
        &p(&[("return_indices", "1")]),
        &[ty(&[2, 1, 4, 5])],
    )
    .unwrap();
    assert_eq!(plan.outputs(), vec!["distances", "indices"]);
    let plan = build_plan(
        "distance_transform_cdt",
        &p(&[("return_indices", "1"), ("return_distances", "0")]),
        &[ty(&[1, 1, 4])],
    )
    .unwrap();
    assert_eq!(plan.outputs(), vec!["indices"]);
}

#[test]
fn bad_parameters_and_inputs_are_one_line_errors() {
    let img = [1, 1, 6, 7];
    let e = err("distance_transform_edt", &[("sampling", "1,2,3")], &img);
    assert!(e.contains("3 values for 2 spatial axes"), "{e}");
    let e = err("distance_transform_edt", &[("sampling", "a")], &img);
    assert!(e.contains("sampling"), "{e}");
    let e = err(
        "distance_transform_edt",
        &[("return_distances", "0"), ("return_indices", "0")],
        &img,
    );
    assert!(e.contains("at least one"), "{e}");
    let e = err("distance_transform_edt", &[("return_indices", "yes")], &img);
    assert!(e.contains("not 0 or 1"), "{e}");
    let e = err("distance_transform_cdt", &[("metric", "euclidean")], &img);
    assert!(e.contains("neither a metric name"), "{e}");
    let e = err("distance_transform_cdt", &[("metric", "1,1;1,1")], &img);
    assert!(e.contains("extent 3"), "{e}");
    let e = err("distance_transform_bf", &[("metric", "octagon")], &img);
    assert!(e.contains("octagon"), "{e}");
    let e = err("signed_distance", &[("threshold", "high")], &img);
    assert!(e.contains("not a number"), "{e}");
    let e = err("distance_transform_edt", &[], &[4, 5]);
    assert!(e.contains("[B, C, S1..Sd]"), "{e}");
    let e = err("distance_transform_edt", &[], &[1; 11]);
    assert!(e.contains("1 to 8 spatial axes"), "{e}");
    let e = err("distance_transform_edt", &[("size", "3")], &img);
    assert!(e.contains("unknown parameter"), "{e}");
    // Two inputs.
    let two = build_plan("distance_transform_edt", &[], &[ty(&img), ty(&img)]).unwrap_err();
    assert!(matches!(two, OpError::BadInput { .. }), "{two}");
    // A run on a tensor of another shape than the plan's.
    let plan = build_plan("distance_transform_edt", &[], &[ty(&img)]).unwrap();
    let other = Tensor::zeros(DType::F32, &[1, 1, 6, 8]);
    let e = plan.run(Exec::Eager, &[other]).unwrap_err().to_string();
    assert!(e.contains("built for shape"), "{e}");
}

#[test]
fn edt_distances_through_the_plan_equal_the_core_eager_and_fused() {
    let shape = [2, 3, 9, 11];
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| match (i * 7919) % 13 {
            0 => 0.0,
            1 => -0.0,
            2 => f32::NAN,
            _ => 1.0,
        })
        .collect();
    let x = Tensor::from_f32(data, &shape).unwrap();
    let plan = build_plan(
        "distance_transform_edt",
        &p(&[("sampling", "1.5,0.25")]),
        &[ty(&shape)],
    )
    .unwrap();
    let m = Masks::from_tensor("t", &x).unwrap();
    let want = edt_run(Exec::Eager, &m, &[1.5, 0.25], true, false)
        .distances
        .unwrap();
    let engine = Engine::new().with_threads(2);
    for exec in [Exec::Eager, Exec::Fused(&engine)] {
        let out = plan.run(exec, std::slice::from_ref(&x)).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].shape(), &shape);
        let Storage::F64(got) = out[0].storage().as_ref() else {
            panic!("distances are f64")
        };
        let bits = |v: &[f64]| v.iter().map(|d| d.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(got), bits(&want), "{exec:?}");
    }
}
