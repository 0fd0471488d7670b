//! Large-window rank filters reach `kiln run` and the typed API (`kiln::embed::rank`).
//!
//! Each case compares, bit for bit, the CLI's written array and the typed call's result with
//! the rank program's eager reference (`Exec::Eager`, a sort per window) on the same input.

use std::path::PathBuf;
use std::process::Command;

use kiln::embed::rank::{median_blur, median_filter, percentile_filter, rank_filter};
use kiln::embed::{BlurPadding, Mode, RankOptions, Window};
use kiln::ir::{DType, TensorType};
use kiln::ops::{build_plan, Exec, OpPlan};
use kiln::runtime::npy::{read_npy, write_npy};
use kiln::runtime::tensor::first_difference;
use kiln::Tensor;
use ndarray::{ArrayD, IxDyn};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-rank-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn params(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The program's eager reference for operator `op` on `x` (`[B, C, S..]`).
fn reference(op: &str, p: &[(&str, &str)], x: &Tensor) -> Tensor {
    let ty = TensorType {
        dtype: x.dtype(),
        shape: x.shape().to_vec(),
    };
    let plan = build_plan(op, &params(p), &[ty]).unwrap();
    assert!(matches!(plan, OpPlan::Program(_)), "{op}: not a program");
    plan.run(Exec::Eager, std::slice::from_ref(x))
        .unwrap()
        .remove(0)
}

fn u16_image(h: usize, w: usize) -> ArrayD<u16> {
    ArrayD::from_shape_fn(IxDyn(&[h, w]), |i| {
        ((i[0] * 7919 + i[1] * 104_729) % 65_521) as u16 ^ ((i[0] * i[1]) as u16)
    })
}

fn as_bcs<T: kiln::embed::Element>(a: &ArrayD<T>) -> Tensor {
    let mut shape = vec![1, 1];
    shape.extend_from_slice(a.shape());
    Tensor::from_ndarray(a).reshape_for_test(&shape)
}

trait Reshape {
    fn reshape_for_test(self, shape: &[usize]) -> Tensor;
}

impl Reshape for Tensor {
    fn reshape_for_test(self, shape: &[usize]) -> Tensor {
        Tensor::from_storage(self.contiguous_storage(), shape).unwrap()
    }
}

#[test]
fn kiln_run_reaches_the_large_window_program() {
    let img = u16_image(40, 37);
    let (i, o) = (tmp("in.npy"), tmp("out.npy"));
    write_npy(&i, &Tensor::from_ndarray(&img)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "run",
            "rank_filter",
            "--input",
            i.to_str().unwrap(),
            "--output",
            o.to_str().unwrap(),
            "--param",
            "rank=-30",
            "--param",
            "size=25",
            "--param",
            "mode=wrap",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = read_npy(&o).unwrap().reshape_for_test(&[1, 1, 40, 37]);
    let want = reference(
        "rank_filter",
        &[("rank", "-30"), ("size", "25"), ("mode", "wrap")],
        &as_bcs(&img),
    );
    assert_eq!(first_difference(&got, &want), None);
}

#[test]
fn typed_api_reaches_the_large_window_program() {
    let img = u16_image(33, 30);
    let x = as_bcs(&img);
    let opts = RankOptions {
        mode: Mode::Constant,
        cval: 77.0,
        origin: vec![3, -2],
    };
    let check = |got: ArrayD<u16>, op: &str, p: &[(&str, &str)]| {
        let got = Tensor::from_ndarray(&got).reshape_for_test(x.shape());
        assert_eq!(
            first_difference(&got, &reference(op, p, &x)),
            None,
            "{op} {p:?}"
        );
    };
    let base = [("mode", "constant"), ("cval", "77"), ("origin", "3,-2")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        extra.iter().chain(base.iter()).copied().collect()
    };
    check(
        median_filter(img.view(), 23, &opts).unwrap(),
        "median_filter",
        &with(&[("size", "23")]),
    );
    check(
        rank_filter(img.view(), 17, [21, 24], &opts).unwrap(),
        "rank_filter",
        &with(&[("rank", "17"), ("size", "21,24")]),
    );
    check(
        percentile_filter(img.view(), 90.0, vec![22, 22], &opts).unwrap(),
        "percentile_filter",
        &with(&[("percentile", "90"), ("size", "22,22")]),
    );
    // A footprint window (disc-like: a 23x23 box without its corners).
    let mut mask = vec![true; 23 * 23];
    for i in [0, 22, 22 * 23, 23 * 23 - 1] {
        mask[i] = false;
    }
    let fp = Window::footprint(&[23, 23], &mask);
    let fp_text = (0..23)
        .map(|r| {
            (0..23)
                .map(|c| if mask[r * 23 + c] { "1" } else { "0" })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";");
    let got = median_filter(img.view(), fp, &RankOptions::default()).unwrap();
    let got = Tensor::from_ndarray(&got).reshape_for_test(x.shape());
    let want = reference("median_filter", &[("footprint", fp_text.as_str())], &x);
    assert_eq!(first_difference(&got, &want), None, "footprint");
    // Errors are typed, never panics.
    assert!(rank_filter(img.view(), 23 * 23, 23, &RankOptions::default()).is_err());
    assert!(percentile_filter(img.view(), 101.0, 23, &RankOptions::default()).is_err());
}

#[test]
fn typed_median_blur_both_paddings_any_size() {
    let x = ArrayD::from_shape_fn(IxDyn(&[1, 2, 26, 31]), |i| {
        let v = ((i[1] * 31 + i[2] * 17 + i[3] * 5) % 41) as f32 - 20.0;
        if i[2] == 3 && i[3] == 4 {
            f32::INFINITY
        } else {
            v
        }
    });
    let t = Tensor::from_ndarray(&x);
    assert_eq!(t.dtype(), DType::F32);
    for (padding, name) in [
        (BlurPadding::Zeros, "zeros"),
        (BlurPadding::Reflect, "reflect"),
    ] {
        let got = median_blur(x.view(), 23, 22, padding).unwrap();
        let got = Tensor::from_ndarray(&got);
        let want = reference("median_blur", &[("k", "23,22"), ("padding", name)], &t);
        assert_eq!(first_difference(&got, &want), None, "{name}");
        // Small kernels take the network graph; the same call works.
        let small = median_blur(x.view(), 3, 3, padding).unwrap();
        assert_eq!(small.shape(), x.shape());
    }
}
