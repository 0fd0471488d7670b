//! kornia `median_blur` semantics checked element by element against a direct model (zero
//! padding, lower median by sorting, NaN wherever the window holds NaN or ±Inf), run through
//! the eager executor. Also the documented NaN rule of `median_filter`.

use kiln_ir::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};
use kiln_ir::{DType, TensorType};
use kiln_ops::build_op;
use kiln_runtime::{eager, Storage, Tensor};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Half-integers with many ties, some NaN (with payloads and sign) and ±Inf; never -0.
    fn value(&mut self) -> f64 {
        match self.next() % 20 {
            0 => f64::INFINITY,
            1 => f64::NEG_INFINITY,
            2 => f64::from_bits(0xfff8_0000_0000_0123),
            _ => ((self.next() % 9) as f64 - 4.0) * 0.5 + 0.0,
        }
    }
}

/// The model: `x` is `[H, W]` row-major.
fn model(x: &[f64], h: usize, w: usize, ky: usize, kx: usize) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(h * w);
    for i in 0..h as i64 {
        for j in 0..w as i64 {
            let mut win = Vec::new();
            let mut bad = false;
            for dy in -((ky as i64 - 1) / 2)..=(ky as i64 / 2) {
                for dx in -((kx as i64 - 1) / 2)..=(kx as i64 / 2) {
                    let (y, xx) = (i + dy, j + dx);
                    let v = if y < 0 || xx < 0 || y >= h as i64 || xx >= w as i64 {
                        0.0
                    } else {
                        x[(y * w as i64 + xx) as usize]
                    };
                    bad |= !v.is_finite();
                    win.push(v);
                }
            }
            win.sort_by(f64::total_cmp);
            out.push(if bad {
                None
            } else {
                Some(win[(win.len() - 1) / 2])
            });
        }
    }
    out
}

fn check(dtype: DType, [b, c, h, w]: [usize; 4], (ky, kx): (usize, usize), seed: u64) {
    let mut rng = Rng(seed);
    let n = b * c * h * w;
    let vals: Vec<f64> = (0..n).map(|_| rng.value()).collect();
    let storage = match dtype {
        DType::F32 => Storage::F32(vals.iter().map(|&v| v as f32).collect()),
        _ => Storage::F64(vals.clone()),
    };
    let x = Tensor::from_storage(storage, &[b, c, h, w]).unwrap();
    let ty = TensorType {
        dtype,
        shape: vec![b, c, h, w],
    };
    let k = format!("{ky},{kx}");
    let g = build_op("median_blur", &[("k".into(), k)], &ty).unwrap();
    let out = eager::run(&g, &[x]).unwrap().remove(0).to_scalars();
    for plane in 0..b * c {
        let want = model(&vals[plane * h * w..(plane + 1) * h * w], h, w, ky, kx);
        for (i, wv) in want.iter().enumerate() {
            let got = out[plane * h * w + i];
            let want_s = match (dtype, wv) {
                (DType::F32, None) => kiln_ir::Scalar::F32(CANONICAL_NAN_F32),
                (DType::F32, Some(v)) => kiln_ir::Scalar::f32(*v as f32),
                (_, None) => kiln_ir::Scalar::F64(CANONICAL_NAN_F64),
                (_, Some(v)) => kiln_ir::Scalar::f64(*v),
            };
            assert_eq!(
                got, want_s,
                "{dtype} {h}x{w} k={ky}x{kx} plane {plane} element {i}"
            );
        }
    }
}

#[test]
fn median_blur_matches_model() {
    let mut seed = 1;
    for dtype in [DType::F32, DType::F64] {
        for (h, w) in [(1, 1), (1, 7), (6, 1), (7, 9), (12, 5)] {
            for (ky, kx) in [(1, 1), (3, 3), (5, 5), (2, 2), (4, 4), (3, 5), (7, 7)] {
                seed += 1;
                check(dtype, [2, 1, h, w], (ky, kx), seed);
            }
        }
    }
}

#[test]
fn median_filter_nan_gives_canonical_nan() {
    let mut v = vec![1.0f32; 25];
    v[12] = f32::from_bits(0xffc0_1234);
    let x = Tensor::from_f32(v, &[1, 1, 5, 5]).unwrap();
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 5, 5],
    };
    let g = build_op("median_filter", &[("size".into(), "3".into())], &ty).unwrap();
    let out = eager::run(&g, &[x]).unwrap().remove(0).to_scalars();
    for i in 0..5 {
        for j in 0..5 {
            let near = (i as i64 - 2).abs() <= 1 && (j as i64 - 2).abs() <= 1;
            let want = if near {
                kiln_ir::Scalar::F32(CANONICAL_NAN_F32)
            } else {
                kiln_ir::Scalar::f32(1.0)
            };
            assert_eq!(out[i * 5 + j], want, "({i}, {j})");
        }
    }
}
