//! The operator matrix of the conformance suite: every registered operator × window size ×
//! border mode × layout × data kind × awkward shape, eager against each runner.
//!
//! Graphs come from the operator registry (`kiln_ops::build_op`). Beyond the suite's usual
//! inputs ([`super::check`]: ties, special values, three layouts), float operators also
//! get heavy ties (three distinct values) and boolean ones dense masks with holes (so an
//! erosion has work to do), in every layout.

use kiln_ir::{DType, Graph, TensorType};
use kiln_runtime::Tensor;

use super::{check, check_sets, layouts, Runner};
use crate::common::Rng;

const MODES: [&str; 5] = ["constant", "reflect", "mirror", "nearest", "wrap"];
const SHAPES: [[usize; 4]; 7] = [
    [1, 1, 1, 1],
    [1, 1, 1, 9],
    [1, 1, 9, 1],
    [1, 1, 2, 3],
    [2, 3, 7, 5],
    [1, 2, 13, 11],
    [1, 1, 17, 34],
];

/// An input of `dtype` and `shape` with heavy ties (floats: three values) or, for bool,
/// mostly true with holes.
fn tied(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => Tensor::from_f32(
            (0..n)
                .map(|_| [0.25f32, -1.5, 3.0][(r.next() % 3) as usize])
                .collect(),
            shape,
        ),
        DType::F64 => Tensor::from_f64(
            (0..n)
                .map(|_| [0.25f64, -1.5, 3.0][(r.next() % 3) as usize])
                .collect(),
            shape,
        ),
        DType::Bool => {
            Tensor::from_bool((0..n).map(|_| !r.next().is_multiple_of(8)).collect(), shape)
        }
        DType::U8 => Tensor::from_u8((0..n).map(|_| (r.next() % 3) as u8).collect(), shape),
        // The other integers: the minimum, zero and the maximum (three tied values).
        d => {
            let (lo, hi) = d.int_range().unwrap();
            let mut st = kiln_runtime::Storage::zeros(d, n);
            for i in 0..n {
                let v = [lo, 0, hi][(r.next() % 3) as usize];
                st.set(i, kiln_ir::Scalar::wrap_int(d, v).unwrap());
            }
            Tensor::from_storage(st, shape)
        }
    }
    .unwrap()
}

/// Checks operator `op` with `params` on `dtype` inputs of every shape.
fn check_op(runners: &[&dyn Runner], op: &str, params: &[(&str, String)], dtype: DType) {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    for (si, shape) in SHAPES.iter().enumerate() {
        let ty = TensorType {
            dtype,
            shape: shape.to_vec(),
        };
        let graph: Graph =
            kiln_ops::build_op(op, &params, &ty).unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
        let what = format!("{op} {params:?} {dtype} {shape:?}");
        check(runners, &graph, &what);
        let x = tied(dtype, shape, si as u64 * 7 + 3);
        let sets: Vec<(String, Vec<Tensor>)> = layouts(shape.len())
            .iter()
            .map(|l| {
                (
                    format!("ties, layout {l:?}"),
                    vec![x.with_memory_order(l).unwrap()],
                )
            })
            .collect();
        check_sets(runners, &graph, &what, &sets);
    }
}

/// Median blur (kornia), every kernel size.
pub fn median_blur_all_k(runners: &[&dyn Runner]) {
    for k in [3, 5, 7] {
        check_op(runners, "median_blur", &[("k", k.to_string())], DType::F32);
    }
}

/// Median filter (scipy), every size and border mode.
pub fn median_filter_all_k_all_modes(runners: &[&dyn Runner]) {
    for k in [3, 5, 7] {
        for mode in MODES {
            let params = [
                ("size", k.to_string()),
                ("mode", mode.to_string()),
                ("cval", "0.5".into()),
            ];
            check_op(runners, "median_filter", &params, DType::F32);
        }
    }
}

/// Grey erosion, dilation, opening and closing, every size and border mode.
pub fn grey_morphology_all_k_all_modes(runners: &[&dyn Runner]) {
    for op in [
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
    ] {
        for k in [3, 5, 7] {
            for mode in MODES {
                let params = [
                    ("size", k.to_string()),
                    ("mode", mode.to_string()),
                    ("cval", "-2".into()),
                ];
                check_op(runners, op, &params, DType::F32);
            }
        }
    }
}

/// Rectangular windows with an origin.
pub fn grey_morphology_rectangular_and_origin(runners: &[&dyn Runner]) {
    for op in [
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
        "median_filter",
    ] {
        for mode in MODES {
            let params = [
                ("size", "2,5".into()),
                ("mode", mode.to_string()),
                ("origin", "0,-1".into()),
            ];
            check_op(runners, op, &params, DType::F32);
        }
    }
}

/// Gradient magnitude under every border mode.
pub fn gradient_magnitude_all_modes(runners: &[&dyn Runner]) {
    for mode in MODES {
        check_op(
            runners,
            "gradient_magnitude",
            &[("mode", mode.to_string())],
            DType::F32,
        );
    }
}

/// Binary erosion with several structures and both border values.
pub fn binary_erosion_structures_and_border_values(runners: &[&dyn Runner]) {
    for structure in ["0,1,0;1,1,1;0,1,0", "1,1,1;1,1,1;1,1,1", "1,0,1,1;0,1,1,0"] {
        for border_value in ["0", "1"] {
            let params = [
                ("structure", structure.into()),
                ("border_value", border_value.into()),
            ];
            check_op(runners, "binary_erosion", &params, DType::Bool);
        }
    }
}

/// The f64 forms of the float operators.
pub fn f64_operators(runners: &[&dyn Runner]) {
    check_op(runners, "median_blur", &[("k", "3".into())], DType::F64);
    for op in ["median_filter", "grey_opening", "grey_closing"] {
        for mode in MODES {
            let params = [("size", "3".into()), ("mode", mode.into())];
            check_op(runners, op, &params, DType::F64);
        }
    }
    check_op(
        runners,
        "gradient_magnitude",
        &[("mode", "mirror".into())],
        DType::F64,
    );
}

/// 15x15 erosion and opening are rewritten into one-axis windows (`passes::decompose`);
/// the rewrite must be invisible in the bits, under every border.
pub fn large_windows_take_the_decomposed_path(runners: &[&dyn Runner]) {
    for op in ["grey_erosion", "grey_opening"] {
        for mode in MODES {
            let params = [
                ("size", "15".into()),
                ("mode", mode.into()),
                ("cval", "1.5".into()),
            ];
            check_op(runners, op, &params, DType::F32);
        }
    }
}

// Morphology family (helper morph).
/// The derived morphology operators (tophats, gradient, laplace, binary dilation/opening/
/// closing/hit-or-miss): each a multi-stage fused kernel over the same input.
pub fn morphology_tophats_and_binary_family(runners: &[&dyn Runner]) {
    for op in ["white_tophat", "black_tophat"] {
        for mode in ["reflect", "constant"] {
            let params = [("size", "3".into()), ("mode", mode.into())];
            for dtype in [DType::F32, DType::U8, DType::Bool] {
                check_op(runners, op, &params, dtype);
            }
        }
        let params = [("structure", "0,1,0;1,2.5,1;0,1,0".into())];
        check_op(runners, op, &params, DType::F64);
    }
    for op in ["morphological_gradient", "morphological_laplace"] {
        check_op(runners, op, &[("size", "3".into())], DType::U8);
        check_op(runners, op, &[("size", "2,3".into())], DType::F32);
    }
    for op in ["binary_dilation", "binary_opening", "binary_closing"] {
        for bv in ["0", "1"] {
            let params = [("iterations", "2".into()), ("border_value", bv.into())];
            check_op(runners, op, &params, DType::Bool);
        }
    }
    check_op(runners, "binary_hit_or_miss", &[], DType::Bool);
}
