//! scipy.ndimage golden references for rank filters over large windows
//! (tests/golden/rank_large, made by scripts/gold_rank_large.py): median_filter,
//! rank_filter and percentile_filter with windows over the network limit (23x23 u16 in every
//! mode, 31x31 f32 percentiles, a 25x25 disc on i16, 1-D size 1001 f64, 9x9x9 u8, even
//! sizes, i32/u32/i8, images smaller than the window), and rank_filter/percentile_filter
//! within the network limit (`net_*` cases, graphs).
//!
//! Exactness: every element must equal scipy's bits, through `build_plan` (a program for
//! these windows) with `Exec::Eager` (the sorting reference) and `Exec::Fused` (the sliding
//! histograms). Limits: the data is what the script generated (no NaN, no -0); it runs no
//! Python.

mod common;

use common::manifest::{compare, promote, Case};
use std::path::{Path, PathBuf};

use kiln_ir::{Scalar, TensorType};
use kiln_ops::{build_plan, Exec, OpPlan};
use kiln_runtime::fused::Engine;
use kiln_runtime::npy::read_npy;
use kiln_runtime::Tensor;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/rank_large")
}

fn manifest() -> Vec<Case> {
    common::manifest::read(&golden_dir(), "scripts/gold_rank_large.py")
}

/// The first element whose bits differ, as a message.

#[test]
fn every_large_window_golden_matches_scipy_eager_and_fused() {
    let cases = manifest();
    assert!(cases.len() >= 60, "only {} golden cases", cases.len());
    let engine = Engine::new();
    let dir = golden_dir();
    let mut failures = Vec::new();
    for c in &cases {
        let x = promote(read_npy(dir.join(c.input())).expect("input"));
        let want = promote(read_npy(dir.join(format!("{}.out.npy", c.name))).expect("output"));
        let ty = TensorType {
            dtype: x.dtype(),
            shape: x.shape().to_vec(),
        };
        let plan = match build_plan(&c.op, &c.params, &[ty]) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: build failed: {e}", c.name));
                continue;
            }
        };
        // net_* cases are within the network limit (graphs), the others programs.
        if matches!(plan, OpPlan::Program(_)) == c.name.starts_with("net_") {
            failures.push(format!("{}: wrong plan kind {plan:?}", c.name));
        }
        for (what, exec) in [("eager", Exec::Eager), ("fused", Exec::Fused(&engine))] {
            match plan.run(exec, std::slice::from_ref(&x)) {
                Ok(mut out) => {
                    if let Some(why) = compare(&out.remove(0), &want) {
                        failures.push(format!(
                            "{} ({} {:?}) {what}: {why}",
                            c.name, c.op, c.params
                        ));
                    }
                }
                Err(e) => failures.push(format!("{} {what}: {e}", c.name)),
            }
        }
    }
    for f in failures.iter().take(20) {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} failures over {} cases",
        failures.len(),
        cases.len()
    );
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
