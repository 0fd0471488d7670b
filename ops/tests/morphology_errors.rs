//! The morphology family's error cases (each a typed `OpError`/`RunError`, never a panic or
//! a hang), its structuring-element tools against scipy 1.17's arrays, the one-kernel
//! fusion of the derived operators, and the flood fill against the eager fixpoint loop.
#![allow(clippy::cloned_ref_to_slice_refs)] // `&[t.clone()]` reads as "one input of type t".

use kiln_ir::{DType, GraphBuilder, TensorType};
use kiln_ops::{
    binary_program, build_op, build_plan, generate_binary_structure, iterate_structure, Exec,
    OpError, OpPlan, RunError, Window,
};
use kiln_runtime::fused::Engine;
use kiln_runtime::Tensor;

fn ty(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType {
        dtype,
        shape: shape.to_vec(),
    }
}

fn p(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn err(name: &str, list: &[(&str, &str)], t: &TensorType) -> OpError {
    build_op(name, &p(list), t).expect_err("must be refused")
}

fn bits(list: &[i32]) -> Vec<bool> {
    list.iter().map(|&v| v != 0).collect()
}

#[test]
fn origin_out_of_range_is_an_error_where_scipy_segfaults() {
    let tb = ty(DType::Bool, &[1, 1, 6, 6]);
    for op in [
        "binary_erosion",
        "binary_dilation",
        "binary_opening",
        "binary_closing",
    ] {
        for o in ["2", "-2", "0,2"] {
            assert!(
                matches!(err(op, &[("origin", o)], &tb), OpError::BadOrigin { .. }),
                "{op} {o}"
            );
        }
        // Even axes: -(s/2) <= origin <= (s-1)/2, so 1x2 takes -1 and 0 but not 1.
        assert!(matches!(
            err(op, &[("structure", "1,1"), ("origin", "0,1")], &tb),
            OpError::BadOrigin { .. }
        ));
        assert!(build_op(op, &p(&[("structure", "1,1"), ("origin", "0,-1")]), &tb).is_ok());
    }
    assert!(matches!(
        err("binary_hit_or_miss", &[("origin1", "2")], &tb),
        OpError::BadOrigin { .. }
    ));
    assert!(matches!(
        err("binary_hit_or_miss", &[("origin2", "-2")], &tb),
        OpError::BadOrigin { .. }
    ));
    for prog in ["binary_propagation", "binary_fill_holes"] {
        let inputs: Vec<TensorType> = if prog == "binary_propagation" {
            vec![tb.clone(), tb.clone()]
        } else {
            vec![tb.clone()]
        };
        assert!(matches!(
            build_plan(prog, &p(&[("origin", "2")]), &inputs),
            Err(OpError::BadOrigin { .. })
        ));
    }
    assert!(matches!(
        binary_program(
            "binary_erosion",
            &p(&[("origin", "-2"), ("iterations", "0")]),
            &[tb]
        ),
        Err(OpError::BadOrigin { .. })
    ));
}

#[test]
fn fixpoint_with_a_false_centre_is_an_error_where_scipy_loops_forever() {
    let tb = ty(DType::Bool, &[1, 1, 6, 6]);
    let ring = ("structure", "1,1,1;1,0,1;1,1,1");
    for op in [
        "binary_erosion",
        "binary_dilation",
        "binary_opening",
        "binary_closing",
    ] {
        for it in ["0", "-1"] {
            assert!(matches!(
                binary_program(op, &p(&[ring, ("iterations", it)]), &[tb.clone()]),
                Err(OpError::BadFootprint { .. })
            ));
        }
        // A fixed count with a false centre is fine (scipy too).
        assert!(binary_program(op, &p(&[ring, ("iterations", "3")]), &[tb.clone()]).is_ok());
        // The centre moves with the origin: origin 1 puts the true (1, 2) entry at offset 0.
        assert!(binary_program(
            op,
            &p(&[
                ("structure", "0,0,0;0,0,1;0,0,0"),
                ("origin", "0,1"),
                ("iterations", "0")
            ]),
            &[tb.clone()]
        )
        .is_ok());
    }
    for prog in ["binary_propagation", "binary_fill_holes"] {
        let inputs: Vec<TensorType> = if prog == "binary_propagation" {
            vec![tb.clone(), tb.clone()]
        } else {
            vec![tb.clone()]
        };
        assert!(matches!(
            build_plan(prog, &p(&[ring]), &inputs),
            Err(OpError::BadFootprint { .. })
        ));
    }
}

#[test]
fn parameter_and_input_errors() {
    let tb = ty(DType::Bool, &[1, 1, 6, 6]);
    let tu = ty(DType::U8, &[1, 1, 6, 6]);
    // Graph forms: 1..=64 iterations.
    for it in ["0", "-1", "65", "x"] {
        assert!(matches!(
            err("binary_dilation", &[("iterations", it)], &tb),
            OpError::BadParam { .. }
        ));
    }
    assert!(matches!(
        err("binary_erosion", &[("brute_force", "2")], &tb),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err(
            "binary_erosion",
            &[("structure", "1,1"), ("connectivity", "2")],
            &tb
        ),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("binary_erosion", &[("structure_iterations", "0")], &tb),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("binary_dilation", &[("structure", "0,0;0,0")], &tb),
        OpError::BadFootprint { .. }
    ));
    // Gradient and laplace: numpy refuses bool subtraction.
    for op in ["morphological_gradient", "morphological_laplace"] {
        assert!(matches!(
            err(op, &[("size", "3")], &tb),
            OpError::BadInput { .. }
        ));
    }
    // Non-flat structures: f32/f64 only; not with size; footprint of the same shape.
    assert!(matches!(
        err("white_tophat", &[("structure", "0,1;1,0")], &tu),
        OpError::BadInput { .. }
    ));
    let tf = ty(DType::F32, &[1, 1, 6, 6]);
    assert!(matches!(
        err(
            "grey_erosion",
            &[("structure", "0,1;1,0"), ("size", "3")],
            &tf
        ),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err(
            "grey_erosion",
            &[("structure", "0,1;1,0"), ("footprint", "1,1,1")],
            &tf
        ),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("grey_dilation", &[("structure", "0,a;1,0")], &tf),
        OpError::BadParam { .. }
    ));
    assert!(matches!(
        err("black_tophat", &[("size", "3"), ("origin", "2")], &tf),
        OpError::BadOrigin { .. }
    ));
    // Masks: same shape as the input, at run time too.
    let small = ty(DType::Bool, &[1, 1, 5, 6]);
    assert!(matches!(
        binary_program("binary_erosion", &[], &[tb.clone(), small]),
        Err(OpError::BadInput { .. })
    ));
    let plan = build_plan("binary_propagation", &[], &[tb.clone(), tb.clone()]).unwrap();
    let x = Tensor::zeros(DType::Bool, &[1, 1, 6, 6]);
    let m = Tensor::zeros(DType::Bool, &[1, 1, 3, 6]);
    assert!(matches!(
        plan.run(Exec::Eager, &[x.clone(), m]),
        Err(RunError::BadInput { .. })
    ));
    assert!(matches!(
        plan.run(Exec::Eager, &[x]),
        Err(RunError::BadInput { .. })
    ));
    assert!(matches!(
        binary_program("grey_erosion", &[], &[tb]),
        Err(OpError::BadInput { .. })
    ));
    // Tools.
    assert!(generate_binary_structure(0, 1).is_err());
    assert!(iterate_structure(&Window::footprint(&[2], &[true]), 2, None).is_err());
}

/// The tools equal scipy 1.17's arrays (printed by scipy and pasted here).
#[test]
fn structure_tools_match_scipy() {
    let g = generate_binary_structure(3, 2).unwrap();
    assert_eq!(g.shape, vec![3, 3, 3]);
    assert_eq!(
        g.mask.unwrap(),
        bits(&[0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0])
    );
    // connectivity < 1 counts as 1.
    assert_eq!(generate_binary_structure(2, 0).unwrap(), Window::cross(2));
    let it = iterate_structure(&Window::cross(2), 3, None).unwrap();
    assert_eq!(it.shape, vec![7, 7]);
    assert_eq!(
        it.mask.unwrap(),
        bits(&[
            0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0,
            1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0
        ])
    );
    let even = Window::footprint(&[2, 2], &bits(&[1, 1, 0, 1]));
    let it = iterate_structure(&even, 3, Some(&[1, -1])).unwrap();
    assert_eq!(it.shape, vec![4, 4]);
    assert_eq!(
        it.mask.unwrap(),
        bits(&[1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1])
    );
    assert_eq!(it.origin, vec![3, -3]);
    let it = iterate_structure(&Window::footprint(&[3], &bits(&[1, 0, 1])), 2, None).unwrap();
    assert_eq!(it.mask.unwrap(), bits(&[1, 0, 1, 0, 1]));
    // iterations < 2: the structure itself.
    assert_eq!(iterate_structure(&even, 1, Some(&[1, 1])).unwrap(), even);
}

/// A tophat, a gradient and a binary opening each compile to one fused kernel.
#[test]
fn derived_operators_are_one_kernel() {
    let engine = Engine::new();
    for (op, params, dtype) in [
        ("white_tophat", vec![("size", "15")], DType::F32),
        ("black_tophat", vec![("size", "3")], DType::U8),
        ("morphological_gradient", vec![("size", "3")], DType::U8),
        ("binary_opening", vec![("iterations", "2")], DType::Bool),
    ] {
        let g = build_op(op, &p(&params), &ty(dtype, &[1, 1, 64, 64])).unwrap();
        let c = engine.compile(&g).unwrap();
        assert_eq!(c.kernel_count(), 1, "{op}");
    }
}

/// Deterministic pseudo-random booleans.
fn noise(n: usize, seed: u64, density: u64) -> Vec<bool> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % 100 < density
        })
        .collect()
}

/// The fused path's flood fill equals the eager fixpoint loop on larger, batched inputs
/// (the goldens cover small ones against scipy).
#[test]
fn flood_fill_equals_the_eager_fixpoint_loop() {
    let engine = Engine::new();
    let shape = [2, 2, 40, 37];
    let n: usize = shape.iter().product();
    let x = Tensor::from_bool(noise(n, 1, 8), &shape).unwrap();
    let m = Tensor::from_bool(noise(n, 2, 65), &shape).unwrap();
    let tb = ty(DType::Bool, &shape);
    let cases: Vec<(OpPlan, Vec<Tensor>)> = vec![
        (
            build_plan(
                "binary_propagation",
                &p(&[("connectivity", "2")]),
                &[tb.clone(), tb.clone()],
            )
            .unwrap(),
            vec![x.clone(), m.clone()],
        ),
        (
            build_plan(
                "binary_propagation",
                &p(&[("border_value", "1")]),
                &[tb.clone(), tb.clone()],
            )
            .unwrap(),
            vec![x.clone(), m.clone()],
        ),
        (
            build_plan("binary_fill_holes", &[], &[tb.clone()]).unwrap(),
            vec![Tensor::from_bool(noise(n, 3, 55), &shape).unwrap()],
        ),
        (
            OpPlan::Program(
                binary_program(
                    "binary_erosion",
                    &p(&[("iterations", "0"), ("border_value", "1")]),
                    &[tb.clone(), tb.clone()],
                )
                .unwrap(),
            ),
            vec![m.clone(), x.clone()],
        ),
        (
            OpPlan::Program(
                binary_program("binary_closing", &p(&[("iterations", "-1")]), &[tb.clone()])
                    .unwrap(),
            ),
            vec![x.clone()],
        ),
    ];
    for (i, (plan, inputs)) in cases.iter().enumerate() {
        let e = plan.run(Exec::Eager, inputs).unwrap().remove(0);
        let f = plan.run(Exec::Fused(&engine), inputs).unwrap().remove(0);
        assert_eq!(e.to_scalars(), f.to_scalars(), "case {i}");
        // The result is not trivially the input (the case does work).
        assert_ne!(
            e.to_scalars(),
            inputs[0].to_scalars(),
            "case {i} changed nothing"
        );
    }
}

/// The builder API: truth testing of a node and a hit-or-miss with an empty structure2.
#[test]
fn builder_api_truth_and_empty_miss() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 4, 4]).unwrap();
    let t = kiln_ops::truth(&mut b, x).unwrap();
    let g = b.finish(&[t]).unwrap();
    let v = [
        0.0f32,
        -0.0,
        f32::NAN,
        1.0,
        -2.0,
        0.5,
        0.0,
        0.0,
        1e-45,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ];
    let out = kiln_runtime::eager::run(&g, &[Tensor::from_f32(v.to_vec(), &[1, 1, 4, 4]).unwrap()])
        .unwrap()
        .remove(0);
    let want: Vec<bool> = v.iter().map(|&f| f != 0.0).collect();
    assert_eq!(
        out.to_scalars(),
        Tensor::from_bool(want, &[1, 1, 4, 4]).unwrap().to_scalars()
    );
    // structure1 full: structure2 = NOT structure1 has no true entry, the miss part is false.
    let g = build_op(
        "binary_hit_or_miss",
        &p(&[("structure1", "1,1,1;1,1,1;1,1,1")]),
        &ty(DType::Bool, &[1, 1, 4, 4]),
    )
    .unwrap();
    let ones = Tensor::from_bool(vec![true; 16], &[1, 1, 4, 4]).unwrap();
    let out = kiln_runtime::eager::run(&g, &[ones]).unwrap().remove(0);
    let inner: Vec<bool> = (0..16)
        .map(|i| (1..3).contains(&(i / 4)) && (1..3).contains(&(i % 4)))
        .collect();
    assert_eq!(
        out.to_scalars(),
        Tensor::from_bool(inner, &[1, 1, 4, 4])
            .unwrap()
            .to_scalars()
    );
}
