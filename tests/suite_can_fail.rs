//! The differential suite must be able to fail: every planted miscompilation is caught by
//! the same eager-vs-fused comparison the suite relies on, and the clean engine is not.

mod common;

use common::{f32_tensor, Data};
use kiln::codegen::{CompileOptions, Fault};
use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

/// Operators and inputs where each fault must show: NaN and signed zeros for the min/max
/// faults, non-constant borders for the border fault, a median for the comparator fault.
fn caught(fault: Option<Fault>) -> bool {
    let engine = Engine::with_options(CompileOptions {
        fault,
        ..Default::default()
    });
    let cases: [(&str, Vec<(String, String)>); 4] = [
        (
            "median_filter",
            vec![
                ("size".into(), "3".into()),
                ("mode".into(), "reflect".into()),
            ],
        ),
        (
            "grey_erosion",
            vec![("size".into(), "3".into()), ("mode".into(), "wrap".into())],
        ),
        (
            "grey_dilation",
            vec![
                ("size".into(), "5".into()),
                ("mode".into(), "mirror".into()),
            ],
        ),
        ("median_blur", vec![("k".into(), "3".into())]),
    ];
    for (op, params) in cases {
        for shape in [[1usize, 1, 9, 13], [1, 2, 16, 16]] {
            let ty = TensorType {
                dtype: DType::F32,
                shape: shape.to_vec(),
            };
            let graph = kiln::ops::build_op(op, &params, &ty).unwrap();
            for (seed, data) in [Data::Uniform, Data::Special, Data::Ties]
                .into_iter()
                .enumerate()
            {
                let x = f32_tensor(&shape, data, seed as u64 + 100);
                let want = eager::run(&graph, std::slice::from_ref(&x)).unwrap();
                let got = engine.run(&graph, std::slice::from_ref(&x)).unwrap();
                if first_difference(&want[0], &got[0]).is_some() {
                    return true;
                }
            }
        }
    }
    false
}

#[test]
fn clean_engine_passes() {
    assert!(!caught(None));
}

#[test]
fn every_planted_fault_is_caught() {
    for fault in Fault::ALL {
        assert!(
            caught(Some(fault)),
            "planted fault {fault:?} was not caught"
        );
    }
}
