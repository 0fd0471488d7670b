//! `kiln run` reads arrays as scipy.ndimage does: every axis spatial unless `--axes` names the
//! spatial ones; `--layout bcs` (and kornia's `median_blur`) take `[B, C, S..]`.
//!
//! Each case runs the CLI on a file and compares the written array, bit for bit, with the same
//! operator run through the library on the layout the case expects.

use std::path::PathBuf;
use std::process::Command;

use kiln::ir::TensorType;
use kiln::runtime::npy::{read_npy, write_npy};
use kiln::{eager, Tensor};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 53 % 97) as f32) - 40.0).collect()
}

/// Runs `kiln run grey_erosion size=3` (plus `extra`) on `input` and returns the output.
fn cli(tag: &str, input: &Tensor, extra: &[&str]) -> Tensor {
    let (i, o) = (
        tmp(&format!("{tag}-in.npy")),
        tmp(&format!("{tag}-out.npy")),
    );
    write_npy(&i, input).unwrap();
    let mut args = vec![
        "run",
        "grey_erosion",
        "--input",
        i.to_str().unwrap(),
        "--output",
        o.to_str().unwrap(),
        "--param",
        "size=3",
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_npy(&o).unwrap()
}

/// grey_erosion size=3 through the library on a `[B, C, S..]` tensor.
fn library(t: &Tensor) -> Tensor {
    let ty = TensorType {
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
    };
    let params = vec![("size".to_string(), "3".to_string())];
    let g = kiln::ops::build_op("grey_erosion", &params, &ty).unwrap();
    eager::run(&g, std::slice::from_ref(t)).unwrap().remove(0)
}

#[test]
fn a_3d_array_is_filtered_along_all_three_axes() {
    let x = Tensor::from_f32(data(4 * 5 * 6), &[4, 5, 6]).unwrap();
    let got = cli("3d", &x, &[]);
    assert_eq!(got.shape(), &[4, 5, 6]);
    let want = library(&Tensor::from_f32(data(4 * 5 * 6), &[1, 1, 4, 5, 6]).unwrap());
    assert_eq!(got.to_scalars(), want.to_scalars());
    // And that differs from reading it as [B, C, S1] (filtering the last axis only).
    let old = cli("3d-bcs", &x, &["--layout", "bcs"]);
    assert_eq!(old.shape(), &[4, 5, 6]);
    assert_ne!(old.to_scalars(), want.to_scalars());
    assert_eq!(old.to_scalars(), library(&x).to_scalars());
}

#[test]
fn axes_filter_an_hwc_image_per_channel() {
    let (h, w, c) = (7, 9, 3);
    let v = data(h * w * c);
    let x = Tensor::from_f32(v.clone(), &[h, w, c]).unwrap();
    let got = cli("hwc", &x, &["--axes", "0,1"]);
    assert_eq!(got.shape(), &[h, w, c]);
    let got = got.to_scalars();
    for ch in 0..c {
        let plane: Vec<f32> = (0..h * w).map(|p| v[p * c + ch]).collect();
        let want = library(&Tensor::from_f32(plane, &[1, 1, h, w]).unwrap()).to_scalars();
        for p in 0..h * w {
            assert_eq!(got[p * c + ch], want[p], "channel {ch} point {p}");
        }
    }
}

#[test]
fn negative_axes_and_bad_axes() {
    let x = Tensor::from_f32(data(5 * 6 * 2), &[5, 6, 2]).unwrap();
    let a = cli("neg", &x, &["--axes", "-3,-2"]);
    let b = cli("pos", &x, &["--axes", "0,1"]);
    assert_eq!(a.to_scalars(), b.to_scalars());
    let i = tmp("bad-in.npy");
    write_npy(&i, &x).unwrap();
    for (axes, what) in [("3", "out of range"), ("0,0", "repeat")] {
        let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["run", "grey_erosion", "--input", i.to_str().unwrap()])
            .args(["--output", "/dev/null", "--param", "size=3", "--axes", axes])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(what), "{axes}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

#[test]
fn median_blur_keeps_kornias_bchw_layout() {
    let x = Tensor::from_f32(data(2 * 3 * 6 * 7), &[2, 3, 6, 7]).unwrap();
    let (i, o) = (tmp("mb-in.npy"), tmp("mb-out.npy"));
    write_npy(&i, &x).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["run", "median_blur", "--input", i.to_str().unwrap()])
        .args(["--output", o.to_str().unwrap(), "--param", "k=3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ty = TensorType {
        dtype: x.dtype(),
        shape: x.shape().to_vec(),
    };
    let g = kiln::ops::build_op("median_blur", &[("k".into(), "3".into())], &ty).unwrap();
    let want = eager::run(&g, std::slice::from_ref(&x)).unwrap().remove(0);
    assert_eq!(read_npy(&o).unwrap().to_scalars(), want.to_scalars());
}
