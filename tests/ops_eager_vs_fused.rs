//! Eager == fused, bit for bit, for every operator × window size × border mode × layout ×
//! data kind × awkward shape.

mod common;

use common::{bool_tensor, f32_tensor, layouts, to_f64, Data};
use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::Tensor;
use kiln::{eager, Engine};

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

/// Runs `op` with `params` on every shape × layout × data kind and compares the bits.
fn check(engine: &Engine, op: &str, params: &[(&str, String)]) -> usize {
    check_typed(engine, op, params, DType::F32)
}

/// Input data of `dtype` for shape index `si` and data kind index `di`.
fn input(dtype: DType, shape: &[usize], data: Data, seed: u64) -> Tensor {
    match dtype {
        DType::F32 => f32_tensor(shape, data, seed),
        DType::F64 => to_f64(&f32_tensor(shape, data, seed)),
        DType::Bool => bool_tensor(shape, !matches!(data, Data::Uniform), seed),
        DType::U8 => unreachable!("no u8 operator in the matrix"),
    }
}

/// [`check`] for a given input dtype.
fn check_typed(engine: &Engine, op: &str, params: &[(&str, String)], dtype: DType) -> usize {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut checked = 0;
    for (si, shape) in SHAPES.iter().enumerate() {
        let ty = TensorType {
            dtype,
            shape: shape.to_vec(),
        };
        let graph = kiln::ops::build_op(op, &params, &ty)
            .unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
        // The tiered compiles (bigger steps, the clean-input specialisation), once landed.
        let compiled = engine.compile(&graph).unwrap();
        assert!(compiled.wait_for_upgrades(std::time::Duration::from_secs(120)));
        for (di, data) in [Data::Uniform, Data::Ties, Data::Special]
            .into_iter()
            .enumerate()
        {
            let x = input(dtype, shape, data, (si * 7 + di) as u64);
            let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
            let got = compiled.run(engine, std::slice::from_ref(&x)).unwrap();
            for (w, g) in want.iter().zip(&got) {
                if let Some(d) = first_difference(w, g) {
                    panic!("{op} {params:?} shape {shape:?} {data:?} upgraded: {d}");
                }
            }
            for (layout, view) in layouts(&x) {
                let got = engine.run(&graph, std::slice::from_ref(&view)).unwrap();
                assert_eq!(want.len(), got.len());
                for (w, g) in want.iter().zip(&got) {
                    if let Some(d) = first_difference(w, g) {
                        panic!("{op} {params:?} shape {shape:?} {data:?} {layout}: {d}");
                    }
                }
                checked += 1;
            }
        }
    }
    checked
}

#[test]
fn median_blur_all_k() {
    let engine = Engine::new();
    for k in [3, 5, 7] {
        check(&engine, "median_blur", &[("k", k.to_string())]);
    }
}

#[test]
fn median_filter_all_k_all_modes() {
    let engine = Engine::new();
    for k in [3, 5, 7] {
        for mode in MODES {
            check(
                &engine,
                "median_filter",
                &[
                    ("size", k.to_string()),
                    ("mode", mode.to_string()),
                    ("cval", "0.5".into()),
                ],
            );
        }
    }
}

#[test]
fn grey_morphology_all_k_all_modes() {
    let engine = Engine::new();
    for op in [
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
    ] {
        for k in [3, 5, 7] {
            for mode in MODES {
                check(
                    &engine,
                    op,
                    &[
                        ("size", k.to_string()),
                        ("mode", mode.to_string()),
                        ("cval", "-2".into()),
                    ],
                );
            }
        }
    }
}

#[test]
fn grey_morphology_rectangular_and_origin() {
    let engine = Engine::new();
    for op in [
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
        "median_filter",
    ] {
        for mode in MODES {
            check(
                &engine,
                op,
                &[
                    ("size", "2,5".into()),
                    ("mode", mode.to_string()),
                    ("origin", "0,-1".into()),
                ],
            );
        }
    }
}

#[test]
fn gradient_magnitude_all_modes() {
    let engine = Engine::new();
    for mode in MODES {
        check(&engine, "gradient_magnitude", &[("mode", mode.to_string())]);
    }
}

#[test]
fn binary_erosion_structures_and_border_values() {
    let engine = Engine::new();
    for structure in ["0,1,0;1,1,1;0,1,0", "1,1,1;1,1,1;1,1,1", "1,0,1,1;0,1,1,0"] {
        for border_value in ["0", "1"] {
            check_typed(
                &engine,
                "binary_erosion",
                &[
                    ("structure", structure.into()),
                    ("border_value", border_value.into()),
                ],
                DType::Bool,
            );
        }
    }
}

#[test]
fn f64_operators() {
    let engine = Engine::new();
    check_typed(&engine, "median_blur", &[("k", "3".into())], DType::F64);
    for op in ["median_filter", "grey_opening", "grey_closing"] {
        for mode in MODES {
            check_typed(
                &engine,
                op,
                &[("size", "3".into()), ("mode", mode.into())],
                DType::F64,
            );
        }
    }
    check_typed(
        &engine,
        "gradient_magnitude",
        &[("mode", "mirror".into())],
        DType::F64,
    );
}

#[test]
fn large_windows_take_the_decomposed_path() {
    // 15x15 erosion and opening are rewritten into one-axis windows (passes::decompose);
    // the rewrite must be invisible in the bits, under every border.
    let engine = Engine::new();
    for op in ["grey_erosion", "grey_opening"] {
        for mode in MODES {
            check(
                &engine,
                op,
                &[
                    ("size", "15".into()),
                    ("mode", mode.into()),
                    ("cval", "1.5".into()),
                ],
            );
        }
    }
}
