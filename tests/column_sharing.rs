//! The CPU backend's work sharing between neighbouring columns (lane shuffles of
//! shift-equivalent values and values carried from one loop step to the next,
//! `codegen/src/cpu/shift.rs`) changes no bit: the fused engine with sharing, the fused
//! engine without it, the one sharing without carried values, and the eager oracle agree on
//! every row width from 1 to 80 (so every mix of shared steps, a row's first step, the redone
//! last step, single vectors, the overlapped tail, edge vectors and scalar border columns),
//! on nasty data, for the operators whose kernels share work.

mod common;

use common::{f32_tensor, Data};
use kiln::codegen::CompileOptions;
use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

/// Operators (with parameters) whose kernels have shift-equivalent instructions.
fn cases() -> Vec<(&'static str, Vec<(String, String)>)> {
    let p = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    vec![
        ("median_blur", p(&[("k", "3")])),
        ("median_blur", p(&[("k", "5")])),
        ("median_filter", p(&[("size", "3"), ("mode", "reflect")])),
        (
            "median_filter",
            p(&[("size", "5"), ("mode", "constant"), ("cval", "0.5")]),
        ),
        ("grey_erosion", p(&[("size", "15"), ("mode", "nearest")])),
        (
            "grey_dilation",
            p(&[("size", "7"), ("mode", "constant"), ("cval", "-2")]),
        ),
        ("grey_opening", p(&[("size", "5"), ("mode", "wrap")])),
    ]
}

#[test]
fn sharing_changes_no_bit_at_any_width() {
    let shared = Engine::new();
    let plain = Engine::with_options(CompileOptions {
        no_column_sharing: true,
        ..Default::default()
    });
    // The background compile's budget: bigger steps, two edge vectors per end for stages
    // reaching 5 to 8 columns.
    let big = Engine::with_options(CompileOptions {
        step_code_budget: Some(3000),
        ..Default::default()
    });
    let recomputed = Engine::with_options(CompileOptions {
        no_carried_values: true,
        ..Default::default()
    });
    let mut shared_kernels = 0;
    let mut carrying_kernels = 0;
    let mut shared_with_edges = 0;
    let mut shared_with_wide_edges = 0;
    for (op, params) in cases() {
        for w in 1..=80usize {
            let shape = [1, 1, 6, w];
            let ty = TensorType {
                dtype: DType::F32,
                shape: shape.to_vec(),
            };
            let graph = kiln::ops::build_op(op, &params, &ty)
                .unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
            if w == 80 {
                let c = shared.compile(&graph).unwrap();
                shared_kernels += c
                    .kernels
                    .iter()
                    .filter(|k| k.describe().contains("shared across columns"))
                    .count();
                carrying_kernels += c
                    .kernels
                    .iter()
                    .filter(|k| k.describe().contains("values carried to the next step"))
                    .count();
                assert!(
                    recomputed
                        .compile(&graph)
                        .unwrap()
                        .kernels
                        .iter()
                        .all(|k| !k.describe().contains("carried")),
                    "{op}: carried values not turned off"
                );
                shared_with_edges += c
                    .kernels
                    .iter()
                    .filter(|k| {
                        let d = k.describe();
                        d.contains("shared across columns") && d.contains("edge vectors")
                    })
                    .count();
                let big_kernels = big.compile(&graph).unwrap().kernels;
                shared_with_wide_edges += big_kernels
                    .iter()
                    .filter(|k| {
                        let d = k.describe();
                        d.contains("shared across columns")
                            && d.contains("first and last 8 columns")
                    })
                    .count();
                // The 5x5 medians' big stages (over 96 instructions) take edge vectors under
                // the background budget, not the split-off scalar border function.
                if params.iter().any(|(_, v)| v == "5") && op.starts_with("median") {
                    let d = big_kernels[0].describe();
                    assert!(
                        d.contains("shared across columns") && d.contains("edge vectors"),
                        "{op} {params:?}: {d}"
                    );
                }
            }
            for (di, data) in [Data::Uniform, Data::Ties, Data::Special]
                .into_iter()
                .enumerate()
            {
                let x = f32_tensor(&shape, data, (w * 3 + di) as u64);
                let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
                for (name, engine) in [
                    ("shared", &shared),
                    ("unshared", &plain),
                    ("big", &big),
                    ("recomputed", &recomputed),
                ] {
                    let got = engine.run(&graph, std::slice::from_ref(&x)).unwrap();
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!("{op} {params:?} width {w} {data:?} {name}: {d}");
                    }
                }
            }
        }
    }
    // The comparison above only means something if sharing was used.
    assert!(
        shared_kernels >= 4,
        "only {shared_kernels} kernels used column sharing"
    );
    // ... and carried values with it.
    assert!(
        carrying_kernels >= 4,
        "only {carrying_kernels} kernels carried values between steps"
    );
    // ... and edge vectors with it (rows of 12 columns and more).
    assert!(
        shared_with_edges >= 2,
        "only {shared_with_edges} sharing kernels used edge vectors"
    );
    assert!(
        shared_with_wide_edges >= 1,
        "only {shared_with_wide_edges} sharing kernels used two edge vectors per end"
    );
}

#[test]
fn sharing_is_used_by_the_median_and_off_when_asked() {
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 64, 64],
    };
    let graph = kiln::ops::build_op("median_blur", &[("k".into(), "3".into())], &ty).unwrap();
    let on = Engine::new().compile(&graph).unwrap();
    assert!(on.kernels[0].describe().contains("shared across columns"));
    let off = Engine::with_options(CompileOptions {
        no_column_sharing: true,
        ..Default::default()
    })
    .compile(&graph)
    .unwrap();
    assert!(!off.kernels[0].describe().contains("shared across columns"));
}

/// A u8 tensor of `shape`: the full range, or three values (heavy ties).
fn u8_tensor(shape: &[usize], ties: bool, seed: u64) -> kiln::Tensor {
    let mut rng = common::Rng(seed);
    let n: usize = shape.iter().product();
    let v: Vec<u8> = (0..n)
        .map(|_| {
            if ties {
                [0u8, 7, 255][rng.below(3)]
            } else {
                rng.below(256) as u8
            }
        })
        .collect();
    kiln::Tensor::from_u8(v, shape).unwrap()
}

/// The same on the 16-lane byte path (u8 and bool stages, `bytevec`): with sharing, without
/// it, with the background compile's budget, without carried values and without edge
/// vectors, every width from 1 to 160 (shared steps of up to 8 vectors of 16 columns, the
/// one-vector loop, 16-column edge vectors from 48 columns on, scalar border columns) and
/// the strided layouts agree with eager.
#[test]
fn byte_path_sharing_changes_no_bit_at_any_width() {
    let p = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    type Case = (&'static str, DType, Vec<(String, String)>);
    let cases: Vec<Case> = vec![
        ("median_filter", DType::U8, p(&[("size", "3")])),
        (
            "median_filter",
            DType::U8,
            p(&[("size", "5"), ("mode", "constant"), ("cval", "9")]),
        ),
        (
            "grey_erosion",
            DType::U8,
            p(&[("size", "15"), ("mode", "nearest")]),
        ),
        (
            "grey_dilation",
            DType::U8,
            p(&[("size", "7"), ("mode", "constant"), ("cval", "200")]),
        ),
        (
            "grey_opening",
            DType::U8,
            p(&[("size", "5"), ("mode", "wrap")]),
        ),
        ("binary_erosion", DType::Bool, p(&[])),
        (
            "binary_erosion",
            DType::Bool,
            p(&[("structure", "1,1,1,1,1;1,1,1,1,1"), ("border_value", "1")]),
        ),
    ];
    let engines = [
        ("shared", Engine::new()),
        (
            "unshared",
            Engine::with_options(CompileOptions {
                no_column_sharing: true,
                ..Default::default()
            }),
        ),
        (
            "big",
            Engine::with_options(CompileOptions {
                step_code_budget: Some(3000),
                ..Default::default()
            }),
        ),
        (
            "recomputed",
            Engine::with_options(CompileOptions {
                no_carried_values: true,
                ..Default::default()
            }),
        ),
        (
            "scalar edges",
            Engine::with_options(CompileOptions {
                no_edge_vectors: true,
                ..Default::default()
            }),
        ),
    ];
    let mut shared_kernels = 0;
    let mut edge_kernels = 0;
    for (op, dtype, params) in &cases {
        for w in (1..=80usize).chain([95, 127, 128, 129, 143, 160]) {
            let shape = [1, 1, 5, w];
            let ty = TensorType {
                dtype: *dtype,
                shape: shape.to_vec(),
            };
            let graph = kiln::ops::build_op(op, params, &ty)
                .unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
            if w == 160 {
                let c = engines[0].1.compile(&graph).unwrap();
                shared_kernels += c
                    .kernels
                    .iter()
                    .filter(|k| k.describe().contains("I8X16 (when strides are 1), "))
                    .filter(|k| k.describe().contains("shared across columns"))
                    .count();
                edge_kernels += c
                    .kernels
                    .iter()
                    .filter(|k| k.describe().contains("first and last 16 columns"))
                    .count();
            }
            for variant in 0..2u64 {
                let seed = (w as u64) * 7 + variant;
                let x = match dtype {
                    DType::Bool => common::bool_tensor(&shape, variant == 0, seed),
                    _ => u8_tensor(&shape, variant == 1, seed),
                };
                let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
                for (name, engine) in &engines {
                    let got = engine.run(&graph, std::slice::from_ref(&x)).unwrap();
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!("{op} {params:?} width {w} variant {variant} {name}: {d}");
                    }
                }
                if w % 16 == 5 || w == 160 {
                    for (layout, view) in common::layouts(&x) {
                        let got = engines[0]
                            .1
                            .run(&graph, std::slice::from_ref(&view))
                            .unwrap();
                        if let Some(d) = first_difference(&want[0], &got[0]) {
                            panic!("{op} {params:?} width {w} {layout}: {d}");
                        }
                    }
                }
            }
        }
    }
    // The comparison above only means something if the byte path shared work.
    assert!(
        shared_kernels >= 5,
        "only {shared_kernels} byte-path kernels shared work between columns"
    );
    // ... and took edge vectors.
    assert!(
        edge_kernels >= 4,
        "only {edge_kernels} byte-path kernels used edge vectors"
    );
}

/// Byte-path edge vectors with in-range tests: a window over a pointwise producer under a
/// constant border is inlined as `select(in_range(o), f(x at o), c)`, whose column tests
/// become constant lane masks in an edge vector. u8 and bool, every width from 40 to 100
/// (edge vectors from 48 columns on), against eager and against the kernel without edge
/// vectors.
#[test]
fn byte_edge_vectors_with_in_range_tests_match_eager() {
    use kiln::ir::{BinaryOp, Border, Footprint, GraphBuilder, ReduceOp, Scalar, UnaryOp};
    let with_edges = Engine::new();
    let without = Engine::with_options(CompileOptions {
        no_edge_vectors: true,
        ..Default::default()
    });
    let mut edge_kernels = 0;
    for dtype in [DType::U8, DType::Bool] {
        for w in 40..=100usize {
            let shape = [1, 1, 4, w];
            let mut b = GraphBuilder::new();
            let x = b.input(dtype, &shape).unwrap();
            let (y, op, c) = match dtype {
                DType::U8 => {
                    let three = b.constant_like(Scalar::U8(3), x).unwrap();
                    let y = b.binary(BinaryOp::Add, x, three).unwrap();
                    (y, ReduceOp::Max, Scalar::U8(7))
                }
                _ => {
                    let y = b.unary(UnaryOp::Not, x).unwrap();
                    (y, ReduceOp::All, Scalar::Bool(true))
                }
            };
            // Bool: one row (a 3x9 box's 140 instructions are past the edge-vector limit).
            let rows = if dtype == DType::U8 { 3 } else { 1 };
            let fp = Footprint::scipy_box(&[rows, 9], &[0, 0]);
            let r = b.window_reduce(y, op, &fp, Border::Constant(c)).unwrap();
            let graph = b.finish(&[r]).unwrap();
            let compiled = with_edges.compile(&graph).unwrap();
            if w == 100 {
                edge_kernels += compiled
                    .kernels
                    .iter()
                    .filter(|k| k.describe().contains("first and last 16 columns"))
                    .count();
            }
            for seed in 0..2u64 {
                let x = match dtype {
                    DType::Bool => common::bool_tensor(&shape, seed == 0, w as u64 + seed),
                    _ => u8_tensor(&shape, seed == 1, w as u64 + seed),
                };
                let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
                for (name, got) in [
                    ("edges", compiled.run(&with_edges, std::slice::from_ref(&x))),
                    ("scalar", without.run(&graph, std::slice::from_ref(&x))),
                ] {
                    if let Some(d) = first_difference(&want[0], &got.unwrap()[0]) {
                        panic!("{dtype} width {w} seed {seed} {name}: {d}");
                    }
                }
            }
        }
    }
    assert!(
        edge_kernels >= 2,
        "only {edge_kernels} kernels used edge vectors"
    );
}
