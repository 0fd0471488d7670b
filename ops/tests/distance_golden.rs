//! The distance transforms against scipy 1.17's goldens (tests/golden/distance, written by
//! scripts/gold_distance.py): distances and indices bit for bit, for `Exec::Eager` and
//! `Exec::Fused`, on contiguous and strided inputs.

mod common;

use common::gold::{self, Case};
use kiln_ir::TensorType;
use kiln_ops::distance::{
    bf_run, cdt_run, edt_run,
    program::{parse_bf_metric, parse_cdt_metric, parse_sampling, BF_INFO, CDT_INFO, EDT_INFO},
    BfDistances, Masks,
};
use kiln_ops::{build_plan, Exec, Params};
use kiln_runtime::npy::read_npy;
use kiln_runtime::{fused::Engine, Storage, Tensor};

/// What one run returned, as comparable bits.
#[derive(Debug, PartialEq)]
enum Dist {
    F64(Vec<u64>),
    I32(Vec<i32>),
    U32(Vec<u32>),
}

fn run_case(case: &Case, exec: Exec<'_>, input: &Tensor) -> (Dist, Vec<i32>) {
    let name = match case.op.as_str() {
        "edt" => "distance_transform_edt",
        "cdt" => "distance_transform_cdt",
        "bf" => "distance_transform_bf",
        "signed" => "signed_distance",
        other => panic!("unknown op {other}"),
    };
    let mut params = case.params.clone();
    if case.op != "signed" {
        params.push(("return_indices".into(), "1".into()));
    }
    let ty = TensorType {
        dtype: input.dtype(),
        shape: input.shape().to_vec(),
    };
    let plan = build_plan(name, &params, &[ty]).unwrap();
    let out = plan.run(exec, std::slice::from_ref(input)).unwrap();
    assert_eq!(out.len(), plan.outputs().len(), "{}", case.name);
    assert_eq!(
        out[0].shape(),
        input.shape(),
        "{}: distances' shape",
        case.name
    );
    let dist = match out[0].storage().as_ref() {
        Storage::F64(v) => Dist::F64(v.iter().map(|d| d.to_bits()).collect()),
        Storage::I32(v) => Dist::I32(v.clone()),
        Storage::U32(v) => Dist::U32(v.clone()),
        other => panic!("{}: distances of dtype {}", case.name, other.dtype()),
    };
    let idx = match out.get(1) {
        None => Vec::new(),
        Some(t) => {
            let s = input.shape();
            let mut want = s[..2].to_vec();
            want.push(s.len() - 2);
            want.extend_from_slice(&s[2..]);
            assert_eq!(t.shape(), want.as_slice(), "{}: indices' shape", case.name);
            match t.storage().as_ref() {
                Storage::I32(v) => v.clone(),
                other => panic!("{}: indices of dtype {}", case.name, other.dtype()),
            }
        }
    };
    (dist, idx)
}

/// The core transforms directly (no program), as the fast-path tests use them.
fn run_core(case: &Case, exec: Exec<'_>, input: &Tensor) -> (Dist, Vec<i32>) {
    let m = Masks::from_tensor("test", input).unwrap();
    let rank = m.shape.len();
    match case.op.as_str() {
        "edt" => {
            let p = Params::new(&EDT_INFO, &case.params).unwrap();
            let s = parse_sampling(&p, rank).unwrap();
            let r = edt_run(exec, &m, &s, true, true);
            (
                Dist::F64(r.distances.unwrap().iter().map(|d| d.to_bits()).collect()),
                r.indices.unwrap(),
            )
        }
        "cdt" => {
            let p = Params::new(&CDT_INFO, &case.params).unwrap();
            let st = parse_cdt_metric(&p, rank).unwrap();
            let r = cdt_run(exec, &m, &st, true, true);
            (Dist::I32(r.distances.unwrap()), r.indices.unwrap())
        }
        "bf" => {
            let p = Params::new(&BF_INFO, &case.params).unwrap();
            let s = parse_sampling(&p, rank).unwrap();
            let metric = parse_bf_metric(&p).unwrap();
            let r = bf_run(exec, &m, metric, &s, true, true);
            let d = match r.distances.unwrap() {
                BfDistances::F64(v) => Dist::F64(v.iter().map(|d| d.to_bits()).collect()),
                BfDistances::U32(v) => Dist::U32(v),
            };
            (d, r.indices.unwrap())
        }
        _ => run_case(case, exec, input),
    }
}

fn expected(case: &Case) -> (Dist, Vec<i32>) {
    let d = gold::read(&format!("{}.dist.npy", case.name));
    let dist = match d.descr.as_str() {
        "<f8" => Dist::F64(d.f64s().iter().map(|x| x.to_bits()).collect()),
        "<i4" => Dist::I32(d.i32s()),
        "<u4" => Dist::U32(d.u32s()),
        other => panic!("{}: dtype {other}", case.name),
    };
    let idx = if case.op == "signed" {
        Vec::new()
    } else {
        gold::read(&format!("{}.idx.npy", case.name)).i32s()
    };
    (dist, idx)
}

/// The same values as `t` in a storage twice as long: element `i` at `2i + 1`, every other
/// element true, so a stride mistake changes the mask.
fn strided(t: &Tensor) -> Tensor {
    let n = t.numel();
    let mut st = Storage::zeros(t.dtype(), 2 * n + 1);
    let truthy = kiln_ir::Scalar::from_f64(t.dtype(), 1.0);
    for (i, s) in t.to_scalars().into_iter().enumerate() {
        st.set(2 * i, truthy);
        st.set(2 * i + 1, s);
    }
    st.set(2 * n, truthy);
    let strides: Vec<usize> = kiln_runtime::tensor::contiguous_strides(t.shape())
        .iter()
        .map(|s| 2 * s)
        .collect();
    Tensor::from_parts(std::sync::Arc::new(st), t.shape(), &strides, 1).unwrap()
}

#[test]
fn every_golden_case_matches_scipy_bit_for_bit_eager_and_fused() {
    let engine = Engine::new().with_threads(3);
    let cases = gold::cases();
    assert!(cases.len() >= 60, "only {} golden cases", cases.len());
    let mut checked = 0;
    for case in &cases {
        let input = read_npy(gold::dir().join(format!("{}.in.npy", case.name))).unwrap();
        let want = expected(case);
        for (label, exec) in [("eager", Exec::Eager), ("fused", Exec::Fused(&engine))] {
            let got = run_case(case, exec, &input);
            assert!(
                got.0 == want.0,
                "{} ({label}): distances differ from scipy",
                case.name
            );
            assert!(
                got.1 == want.1,
                "{} ({label}): indices differ from scipy",
                case.name
            );
            checked += 1;
        }
        let got = run_case(case, Exec::Fused(&engine), &strided(&input));
        assert!(
            got == want,
            "{} (strided input): differs from scipy",
            case.name
        );
        let got = run_core(case, Exec::Eager, &input);
        assert!(
            got == want,
            "{} (core, eager): differs from scipy",
            case.name
        );
    }
    eprintln!(
        "{} golden cases, {checked} eager/fused runs, bit for bit",
        cases.len()
    );
}

#[test]
fn the_golden_cases_cover_what_the_issue_lists() {
    let cases = gold::cases();
    let has = |f: &dyn Fn(&Case) -> bool| cases.iter().any(f);
    for op in ["edt", "cdt", "bf", "signed"] {
        assert!(has(&|c| c.op == op), "no {op} case");
    }
    for rank in 1..=4 {
        assert!(
            has(&|c| {
                let t = read_npy(gold::dir().join(format!("{}.in.npy", c.name))).unwrap();
                c.op == "edt" && t.shape().len() == rank + 2
            }),
            "no {rank}-D EDT case"
        );
    }
    assert!(has(&|c| c
        .params
        .iter()
        .any(|(k, v)| k == "sampling" && v.contains(".3"))));
    for word in [
        "nobg", "nofg", "single", "checker", "blob", "batch", "row", "col",
    ] {
        assert!(has(&|c| c.name.contains(word)), "no `{word}` case");
    }
}
