//! scipy.ndimage golden references for the integer dtypes (tests/golden/int_dtypes, made by
//! scripts/gold_int_dtypes.py): grey_erosion, grey_dilation, grey_opening, grey_closing and
//! median_filter on int16, uint16, int32, int8 and uint32 images, every border mode, box,
//! even and masked windows, origins, 1-D to 3-D and degenerate shapes.
//!
//! Exactness: every output element must equal scipy's exactly (integers have no NaN or
//! signed zero), eager and fused, and eager and fused must agree with each other. Limits:
//! the data is what the script generated; it runs no Python.

mod common;

use common::manifest::{compare, promote, Case};
use std::path::{Path, PathBuf};

use kiln_ir::{DType, Scalar, TensorType};
use kiln_ops::build_op;
use kiln_runtime::fused::Engine;
use kiln_runtime::npy::read_npy;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{eager, Tensor};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/int_dtypes")
}

fn manifest() -> Vec<Case> {
    common::manifest::read(&golden_dir(), "scripts/gold_int_dtypes.py")
}

/// Runs one case eagerly and fused; the failures found.
fn run_case(case: &Case, engine: &Engine) -> Vec<String> {
    let dir = golden_dir();
    let input = promote(read_npy(dir.join(case.input())).expect("reading input"));
    let want = promote(read_npy(dir.join(format!("{}.out.npy", case.name))).expect("output"));
    let ty = TensorType {
        dtype: input.dtype(),
        shape: input.shape().to_vec(),
    };
    let graph = match build_op(&case.op, &case.params, &ty) {
        Ok(g) => g,
        Err(e) => return vec![format!("build failed: {e}")],
    };
    let mut out = Vec::new();
    let eager_out = eager::run(&graph, std::slice::from_ref(&input)).map(|mut v| v.remove(0));
    let fused_out = engine
        .run(&graph, std::slice::from_ref(&input))
        .map(|mut v| v.remove(0));
    match (&eager_out, &fused_out) {
        (Ok(e), Ok(f)) => {
            if let Some(d) = first_difference(e, f) {
                out.push(format!("eager vs fused differ at {d}"));
            }
        }
        (Err(e), _) => out.push(format!("eager failed: {e}")),
        (_, Err(e)) => out.push(format!("fused failed: {e}")),
    }
    for (what, got) in [("eager", &eager_out), ("fused", &fused_out)] {
        if let Ok(got) = got {
            if let Some(why) = compare(got, &want) {
                out.push(format!("{what}: {why}"));
            }
        }
    }
    out
}

#[test]
fn every_int_golden_case_matches_scipy_bit_for_bit_eager_and_fused() {
    let cases = manifest();
    assert!(cases.len() > 500, "only {} golden cases", cases.len());
    let engine = Engine::new();
    let mut failures = Vec::new();
    for case in &cases {
        for why in run_case(case, &engine) {
            failures.push(format!(
                "{} ({} {:?}): {why}",
                case.name, case.op, case.params
            ));
        }
    }
    for f in failures.iter().take(25) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} golden cases",
        failures.len(),
        cases.len()
    );
}

/// Every operator and every integer dtype has golden coverage.
#[test]
fn goldens_cover_every_operator_and_int_dtype() {
    let cases = manifest();
    let dir = golden_dir();
    for op in [
        "grey_erosion",
        "grey_dilation",
        "grey_opening",
        "grey_closing",
        "median_filter",
    ] {
        for d in [DType::I16, DType::U16, DType::I32, DType::I8, DType::U32] {
            let n = cases
                .iter()
                .filter(|c| c.op == op && c.name.contains(&format!("_{d}_")))
                .count();
            assert!(n >= 10, "only {n} golden cases for {op} on {d}");
        }
    }
    // The inputs really have the dtype their names say.
    for c in cases.iter().filter(|c| c.name.contains("_u16_")).take(3) {
        let t = read_npy(dir.join(c.input())).unwrap();
        assert_eq!(t.dtype(), DType::U16, "{}", c.name);
    }
}

/// The comparison can fail: a changed element of a golden output is reported.
#[test]
fn a_wrong_value_is_detected() {
    let cases = manifest();
    let c = &cases[0];
    let want = read_npy(golden_dir().join(format!("{}.out.npy", c.name))).unwrap();
    let mut s = want.contiguous_storage();
    let v = s.get(0).to_i64().unwrap();
    s.set(0, Scalar::wrap_int(want.dtype(), v + 1).unwrap());
    let changed = Tensor::from_storage(s, want.shape()).unwrap();
    assert!(compare(&changed, &want).is_some());
    assert!(compare(&want, &want).is_none());
}

/// `gradient_magnitude` refuses integer input with a clear error (SEMANTICS.md, "Integer
/// dtypes"), naming the dtype; floats still build.
#[test]
fn gradient_magnitude_refuses_integer_input() {
    for d in [
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::U32,
    ] {
        let ty = TensorType {
            dtype: d,
            shape: vec![1, 1, 5, 6],
        };
        let e = build_op("gradient_magnitude", &[], &ty).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("f32 or f64") && msg.contains(&d.to_string()),
            "{msg}"
        );
    }
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 5, 6],
    };
    assert!(build_op("gradient_magnitude", &[], &ty).is_ok());
}
