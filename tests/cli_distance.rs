//! `kiln run distance_transform_edt|cdt|bf|signed_distance` on 2-D and 3-D `.npy` files (read
//! as scipy reads them: every axis spatial), distances and indices written as scipy returns
//! them (`shape` and `(ndim,) + shape`), bit for bit the scipy goldens, eager and fused.

#[path = "../ops/tests/common/gold.rs"]
mod gold;

use std::path::PathBuf;
use std::process::Command;

use kiln::runtime::npy::{read_npy, write_npy};
use kiln::runtime::Storage;
use kiln::Tensor;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-distance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A golden case's input with its `[1, 1]` batch/channel axes dropped, written to a file.
fn input_file(case: &str) -> PathBuf {
    let t = read_npy(gold::dir().join(format!("{case}.in.npy"))).unwrap();
    assert_eq!(&t.shape()[..2], &[1, 1]);
    let plain = Tensor::from_storage(t.storage().as_ref().clone(), &t.shape()[2..]).unwrap();
    let path = tmp(&format!("{case}.in.npy"));
    write_npy(&path, &plain).unwrap();
    path
}

fn kiln(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn edt_writes_scipys_distances_and_indices() {
    for case in ["edt_2d_nonint", "edt_3d_random"] {
        let sampling = gold::cases()
            .into_iter()
            .find(|c| c.name == case)
            .unwrap()
            .params
            .into_iter()
            .find(|(k, _)| k == "sampling")
            .map(|(_, v)| v)
            .unwrap();
        let input = input_file(case);
        for exec in ["eager", "fused"] {
            let (d, i) = (
                tmp(&format!("{case}-{exec}-d.npy")),
                tmp(&format!("{case}-{exec}-i.npy")),
            );
            let out = kiln(&[
                "run",
                "distance_transform_edt",
                "--input",
                input.to_str().unwrap(),
                "--output",
                d.to_str().unwrap(),
                "--output",
                i.to_str().unwrap(),
                "--param",
                "return_indices=1",
                "--param",
                &format!("sampling={sampling}"),
                "--exec",
                exec,
            ]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let (dt, it) = (read_npy(&d).unwrap(), read_npy(&i).unwrap());
            let want_d = gold::read(&format!("{case}.dist.npy"));
            let want_i = gold::read(&format!("{case}.idx.npy"));
            assert_eq!(
                dt.shape(),
                &want_d.shape[2..],
                "{case} {exec}: distances' shape"
            );
            assert_eq!(
                it.shape(),
                &want_i.shape[2..],
                "{case} {exec}: (ndim,) + shape"
            );
            let Storage::F64(dv) = dt.storage().as_ref() else {
                panic!("f64 distances")
            };
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(dv), bits(&want_d.f64s()), "{case} {exec}: distances");
            let Storage::I32(iv) = it.storage().as_ref() else {
                panic!("int32 indices")
            };
            assert_eq!(iv, &want_i.i32s(), "{case} {exec}: indices");
        }
    }
}

#[test]
fn cdt_bf_and_signed_distance_run_from_the_cli() {
    for (case, op, params) in [
        (
            "cdt_2d_taxicab",
            "distance_transform_cdt",
            vec!["metric=taxicab"],
        ),
        (
            "bf_2d_chessboard",
            "distance_transform_bf",
            vec!["metric=chessboard"],
        ),
        ("signed_2d_truth", "signed_distance", vec![]),
    ] {
        let input = input_file(case);
        let d = tmp(&format!("{case}-d.npy"));
        let mut args = vec![
            "run",
            op,
            "--input",
            input.to_str().unwrap(),
            "--output",
            d.to_str().unwrap(),
        ];
        for p in &params {
            args.extend(["--param", p]);
        }
        let out = kiln(&args);
        assert!(
            out.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = read_npy(&d).unwrap();
        let want = gold::read(&format!("{case}.dist.npy"));
        assert_eq!(got.shape(), &want.shape[2..], "{case}");
        match (got.storage().as_ref(), want.descr.as_str()) {
            (Storage::I32(v), "<i4") => assert_eq!(v, &want.i32s(), "{case}"),
            (Storage::U32(v), "<u4") => assert_eq!(v, &want.u32s(), "{case}"),
            (Storage::F64(v), "<f8") => {
                let b: Vec<u64> = v.iter().map(|x| x.to_bits()).collect();
                let w: Vec<u64> = want.f64s().iter().map(|x| x.to_bits()).collect();
                assert_eq!(b, w, "{case}");
            }
            (s, d) => panic!("{case}: got dtype {}, scipy {d}", s.dtype()),
        }
    }
}

#[test]
fn bad_parameters_fail_with_one_line() {
    let input = input_file("edt_2d_random");
    let d = tmp("bad-d.npy");
    let out = kiln(&[
        "run",
        "distance_transform_edt",
        "--input",
        input.to_str().unwrap(),
        "--output",
        d.to_str().unwrap(),
        "--param",
        "sampling=1,2,3",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sampling") && err.trim().lines().count() == 1,
        "{err}"
    );
}
