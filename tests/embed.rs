//! The embedding facade (`kiln::embed`): typed ops give the registry's graphs run by the
//! eager oracle, bit for bit; scipy's axis rule; caller outputs; kernel reuse across shapes;
//! typed errors for bad input.

use kiln::embed::{Error, Mode, Op, Pipeline, Window};
use kiln::ir::{DType, TensorType};
use kiln::{eager, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};

fn image(shape: &[usize], seed: u32) -> ArrayD<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s % 1000) as f32 / 8.0 - 40.0
    })
}

/// The eager oracle on the registry's graph for `name` with `params`, on `[1, 1, ..shape]`.
fn oracle(name: &str, params: &[(&str, &str)], x: &ArrayD<f32>) -> ArrayD<f32> {
    let mut shape = vec![1, 1];
    shape.extend(x.shape());
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape.clone(),
    };
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let g = kiln::ops::build_op(name, &params, &ty).unwrap();
    let t = Tensor::from_f32(x.iter().copied().collect(), &shape).unwrap();
    let out = eager::run(&g, &[t]).unwrap().remove(0);
    out.to_ndarray::<f32>()
        .unwrap()
        .into_shape_with_order(IxDyn(x.shape()))
        .unwrap()
}

/// A typed op, the registry name and the registry parameters that should give the same graph.
type Case = (Op, &'static str, Vec<(&'static str, &'static str)>);

fn bits(a: &ArrayD<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn typed_ops_match_the_registry_under_the_oracle() {
    let x = image(&[9, 11], 1);
    let cases: Vec<Case> = vec![
        (Op::median_filter(3), "median_filter", vec![("size", "3")]),
        (
            Op::grey_erosion([3, 5]).mode(Mode::Constant).cval(2.5),
            "grey_erosion",
            vec![("size", "3,5"), ("mode", "constant"), ("cval", "2.5")],
        ),
        (
            Op::grey_dilation(Window::footprint(
                &[2, 3],
                &[true, false, true, false, true, true],
            ))
            .mode(Mode::Wrap),
            "grey_dilation",
            vec![("footprint", "1,0,1;0,1,1"), ("mode", "wrap")],
        ),
        (
            Op::grey_opening(4).origin([1, -1]).mode(Mode::Mirror),
            "grey_opening",
            vec![("size", "4"), ("origin", "1,-1"), ("mode", "mirror")],
        ),
        (
            Op::grey_closing(3).mode(Mode::Nearest),
            "grey_closing",
            vec![("size", "3"), ("mode", "nearest")],
        ),
        (Op::gradient_magnitude(), "gradient_magnitude", vec![]),
        (Op::median_blur(3, 5), "median_blur", vec![("k", "3,5")]),
    ];
    for (op, name, params) in cases {
        let got = op.run(x.view()).unwrap();
        assert_eq!(bits(&got), bits(&oracle(name, &params, &x)), "{name}");
    }
}

#[test]
fn binary_erosion_matches_the_registry() {
    let x = image(&[7, 8], 3).mapv(|v| v > -30.0);
    let got = Op::binary_erosion(None)
        .border_value(true)
        .run(x.view())
        .unwrap();
    let g = kiln::ops::build_op(
        "binary_erosion",
        &[("border_value".into(), "1".into())],
        &TensorType {
            dtype: DType::Bool,
            shape: vec![1, 1, 7, 8],
        },
    )
    .unwrap();
    let t = Tensor::from_bool(x.iter().copied().collect(), &[1, 1, 7, 8]).unwrap();
    let want = eager::run(&g, &[t])
        .unwrap()
        .remove(0)
        .to_ndarray::<bool>()
        .unwrap();
    assert_eq!(
        got.iter().collect::<Vec<_>>(),
        want.iter().collect::<Vec<_>>()
    );
    assert!(got.iter().any(|&b| b) && got.iter().any(|&b| !b));
}

#[test]
fn a_3d_array_is_filtered_along_every_axis() {
    let x = image(&[4, 5, 6], 2);
    let got = Op::grey_erosion(3).run(x.view()).unwrap();
    // Along every axis: the erosion of the volume equals the 3-D oracle, and differs from a
    // plane-by-plane 2-D erosion (the old `[B, C, S]` reading).
    assert_eq!(
        bits(&got),
        bits(&oracle("grey_erosion", &[("size", "3")], &x))
    );
    let planes = Pipeline::from(Op::grey_erosion(3))
        .axes(&[1, 2])
        .run(x.view())
        .unwrap();
    assert_ne!(bits(&got), bits(&planes));
    for (k, plane) in x.axis_iter(Axis(0)).enumerate() {
        let want = oracle("grey_erosion", &[("size", "3")], &plane.to_owned());
        assert_eq!(bits(&planes.index_axis(Axis(0), k).to_owned()), bits(&want));
    }
}

#[test]
fn axes_follow_scipy_order_and_leave_other_axes_alone() {
    let x = image(&[5, 3, 7], 4);
    // Spatial axes (2, 0): size[0]=3 applies to axis 2, size[1]=1 to axis 0; axis 1 is batch.
    let got = Pipeline::from(Op::median_filter([3, 1]))
        .axes(&[2, 0])
        .run(x.view())
        .unwrap();
    for c in 0..3 {
        let slice = x.index_axis(Axis(1), c).to_owned(); // [5, 7]
        let want = oracle("median_filter", &[("size", "1,3")], &slice);
        assert_eq!(bits(&got.index_axis(Axis(1), c).to_owned()), bits(&want));
    }
}

#[test]
fn strided_inputs_and_caller_outputs() {
    let base = image(&[10, 12], 5);
    let x =
        base.slice_each_axis(|a| ndarray::Slice::new(1, None, if a.axis.0 == 1 { 2 } else { 1 }));
    let t = x.t();
    let op = Pipeline::from(Op::median_filter(3).mode(Mode::Reflect));
    let want = oracle("median_filter", &[("size", "3")], &t.to_owned());
    // A column-major output.
    let mut out = ArrayD::<f32>::zeros(IxDyn(&[9, 6])).reversed_axes();
    op.run_into(t.view(), out.view_mut()).unwrap();
    assert_eq!(bits(&out), bits(&want));
    let wrong = ArrayD::<f32>::zeros(IxDyn(&[3, 3]));
    let mut wrong = wrong;
    assert!(matches!(
        op.run_into(t.view(), wrong.view_mut()),
        Err(Error::Output(_))
    ));
}

#[test]
fn a_new_shape_reuses_the_compiled_kernels() {
    let engine = std::sync::Arc::new(kiln::Engine::new());
    let p = Pipeline::with_engine(engine.clone())
        .then(Op::grey_opening(3))
        .then(Op::median_filter(3));
    p.run(image(&[16, 20], 6).view()).unwrap();
    let first = engine.stats().kernels_compiled;
    assert!(first > 0);
    for shape in [[17, 23], [40, 9], [16, 20]] {
        let x = image(&shape, 7);
        let y = p.run(x.view()).unwrap();
        let one_by_one = Op::median_filter(3)
            .run(Op::grey_opening(3).run(x.view()).unwrap().view())
            .unwrap();
        assert_eq!(bits(&y), bits(&one_by_one));
    }
    assert_eq!(
        engine.stats().kernels_compiled,
        first,
        "no Cranelift compile for new shapes"
    );
    // Every shape here is large for a 3x3 chain: one graph for all (issue 26).
    assert_eq!((p.cached_graphs(), p.graph_builds()), (1, 1));
}

#[test]
fn bad_input_is_a_typed_error() {
    let x = image(&[6, 6], 8);
    let e = |r: Result<ArrayD<f32>, Error>| r.unwrap_err().to_string();
    assert!(e(Op::median_filter(0).run(x.view())).contains("at least 1"));
    assert!(e(Op::median_filter([3, 3, 3]).run(x.view())).contains("spatial axes"));
    assert!(e(Op::median_blur(3, 3).mode(Mode::Wrap).run(x.view())).contains("takes no mode"));
    assert!(e(Op::median_filter(3).origin([5]).run(x.view())).contains("origin"));
    let empty = ArrayD::<f32>::zeros(IxDyn(&[0, 4]));
    assert!(e(Op::median_filter(3).run(empty.view())).contains("zero-size"));
    assert!(e(Pipeline::new().run(x.view())).contains("empty pipeline"));
    assert!(e(Pipeline::from(Op::median_filter(3))
        .axes(&[2])
        .run(x.view()))
    .contains("out of range"));
    let ints = ArrayD::<u8>::zeros(IxDyn(&[4, 4]));
    assert!(Op::gradient_magnitude()
        .run(ints.view())
        .unwrap_err()
        .to_string()
        .contains("f32 or f64"));
    assert!(matches!(Mode::from_name("edge"), Err(Error::Input(_))));
}

#[test]
fn halo_sums_over_the_chain() {
    let p = Pipeline::new()
        .then(Op::grey_opening(5))
        .then(Op::median_filter([3, 4]));
    assert_eq!(p.halo(2).unwrap(), vec![(5, 5), (6, 5)]);
    let q = Pipeline::from(Op::grey_erosion(3).origin([1]));
    assert_eq!(q.halo(1).unwrap(), vec![(2, 0)]);
    assert_eq!(
        Pipeline::from(Op::gradient_magnitude()).halo(3).unwrap(),
        vec![(0, 0), (1, 1), (1, 1)]
    );
}

#[test]
fn pipelines_are_shared_between_threads() {
    let p = Pipeline::from(Op::median_filter(3));
    let x = image(&[20, 20], 9);
    let want = bits(&p.run(x.view()).unwrap());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    assert_eq!(bits(&p.run(x.view()).unwrap()), want);
                }
            });
        }
    });
}
