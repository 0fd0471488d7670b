//! Structured benchmark inputs beyond the plain hash of [`super::data`]: blobs with holes
//! (fill_holes, propagation's mask, the distance transforms), sparse seeds (propagation's
//! marker), normalised histograms and cost matrices (Sinkhorn). Every formula is integer or
//! one correctly rounded IEEE operation per element, so `benches/peers/compare.py`
//! reproduces each input bit for bit (it checks kiln's input checksums).
//!
//! Exactness: blobs and seeds are integer arithmetic on [`hash32`] values; a histogram entry
//! is `w_i / S` with integer weights `w_i` and their exact integer sum `S` (both exactly
//! representable), one division in the dtype; a grid cost entry is an exact integer divided
//! in f64, then rounded to the dtype (numpy: `(c / m).astype(dtype)`).
//!
//! Limits: histograms need `S < 2^24` (d ≤ 4096 bins) to stay exact in f32; blobs use the
//! last `rank - 2` axes as spatial axes (1 to 6 of them).

use kiln_ir::DType;
use kiln_runtime::Tensor;

use super::data::{generate, hash32};
use crate::RuntimeError;

/// How an input's elements are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gen {
    /// [`super::data::generate`]: the plain hash (noise).
    Hash,
    /// Bool disks/balls and rings/shells (disks with a hole), see [`blobs`].
    Blobs,
    /// Sparse bool seeds: `(h >> 8) < 4096`, about one element in 4096.
    Seeds,
    /// Float histograms along the last axis, each row summing to 1 up to rounding.
    Histogram,
    /// The squared Euclidean cost of a `g x g` grid (`d = g²` = the last axis), over its max.
    GridCost,
    /// The per-axis table `[g, g]` of that cost (`grid_axes = 2`): `(i - j)² / (2 (g - 1)²)`,
    /// so that `C[y, y'] + C[x, x']` is the [`Gen::GridCost`] entry up to rounding.
    AxisCost,
}

impl Gen {
    /// The name used in the JSON report and by `compare.py`.
    pub fn name(self) -> &'static str {
        match self {
            Gen::Hash => "hash",
            Gen::Blobs => "blobs",
            Gen::Seeds => "seeds",
            Gen::Histogram => "histogram",
            Gen::GridCost => "grid_cost",
            Gen::AxisCost => "axis_cost",
        }
    }
}

/// One generated input of a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Seed of the hash.
    pub seed: u32,
    /// Generator.
    pub gen: Gen,
}

/// Makes `input`'s tensor.
pub fn make(input: &Input) -> Result<Tensor, RuntimeError> {
    let (d, shape, seed) = (input.dtype, &input.shape[..], input.seed);
    match input.gen {
        Gen::Hash => generate(d, shape, seed),
        Gen::Blobs => Tensor::from_bool(blobs(shape, seed), shape),
        Gen::Seeds => {
            let n: usize = shape.iter().product();
            let v = (0..n)
                .map(|i| (hash32(i as u32, seed) >> 8) < SEED_THRESHOLD)
                .collect();
            Tensor::from_bool(v, shape)
        }
        Gen::Histogram => histogram(d, shape, seed),
        Gen::GridCost => floats(d, shape, grid_cost(shape)?),
        Gen::AxisCost => floats(d, shape, axis_cost(shape)?),
    }
}

/// `(h >> 8) < SEED_THRESHOLD` marks a seed (probability 2^-12).
pub const SEED_THRESHOLD: u32 = 4096;

/// `v` (f64 values) rounded to `d` (f32 or f64) as a tensor of `shape`.
fn floats(d: DType, shape: &[usize], v: Vec<f64>) -> Result<Tensor, RuntimeError> {
    match d {
        DType::F32 => Tensor::from_f32(v.into_iter().map(|x| x as f32).collect(), shape),
        DType::F64 => Tensor::from_f64(v, shape),
        other => Err(RuntimeError::Shape(format!(
            "generated float input: dtype {other:?} is not f32 or f64"
        ))),
    }
}

/// Histograms along the last axis: weight `w_i = (hash32(i, seed) >> 20) + 1` (1..=4096),
/// entry `w_i / S` with `S` the row's integer sum, one division in the dtype (both operands
/// exact: `S < 2^24`).
fn histogram(d: DType, shape: &[usize], seed: u32) -> Result<Tensor, RuntimeError> {
    let last = shape.last().copied().unwrap_or(1).max(1);
    let n: usize = shape.iter().product();
    let w: Vec<u64> = (0..n)
        .map(|i| (hash32(i as u32, seed) >> 20) as u64 + 1)
        .collect();
    let sums: Vec<u64> = w.chunks(last).map(|r| r.iter().sum()).collect();
    let each = |i: usize| (w[i], sums[i / last]);
    match d {
        DType::F32 => Tensor::from_f32(
            (0..n)
                .map(|i| {
                    let (x, s) = each(i);
                    x as f32 / s as f32
                })
                .collect(),
            shape,
        ),
        DType::F64 => Tensor::from_f64(
            (0..n)
                .map(|i| {
                    let (x, s) = each(i);
                    x as f64 / s as f64
                })
                .collect(),
            shape,
        ),
        other => Err(RuntimeError::Shape(format!(
            "histogram input: dtype {other:?} is not f32 or f64"
        ))),
    }
}

/// The per-axis table `[g, g]` of [`grid_cost`]'s `g x g` grid: `(i - j)² / (2 (g - 1)²)`
/// (1 when `g = 1`), in f64.
fn axis_cost(shape: &[usize]) -> Result<Vec<f64>, RuntimeError> {
    let &[g, g2] = shape else {
        return Err(RuntimeError::Shape(format!(
            "an axis cost needs shape [g, g], got {shape:?}"
        )));
    };
    if g != g2 {
        return Err(RuntimeError::Shape(format!(
            "an axis cost needs shape [g, g], got {shape:?}"
        )));
    }
    let max = if g > 1 { 2 * (g - 1) * (g - 1) } else { 1 } as f64;
    Ok((0..g * g)
        .map(|e| {
            let d = (e / g) as i64 - (e % g) as i64;
            (d * d) as f64 / max
        })
        .collect())
}

/// The squared Euclidean cost of the `g x g` grid with `g² = d` (the last axis), divided by
/// its largest entry `2 (g - 1)²` (1 when `g = 1`), in f64.
fn grid_cost(shape: &[usize]) -> Result<Vec<f64>, RuntimeError> {
    let d = *shape.last().unwrap_or(&1);
    let g = (d as f64).sqrt().round() as usize;
    if g * g != d || shape.len() != 2 || shape[0] != d {
        return Err(RuntimeError::Shape(format!(
            "a grid cost needs shape [g², g²], got {shape:?}"
        )));
    }
    let max = if g > 1 { 2 * (g - 1) * (g - 1) } else { 1 } as f64;
    let mut v = Vec::with_capacity(d * d);
    for p in 0..d {
        for q in 0..d {
            let (dy, dx) = (
                (p / g) as i64 - (q / g) as i64,
                (p % g) as i64 - (q % g) as i64,
            );
            v.push((dy * dy + dx * dx) as f64 / max);
        }
    }
    Ok(v)
}

/// Blobs over the spatial axes (all but the first two) of each image: `count` disks (balls
/// in 3-D) and rings (a disk with a centred hole of half the radius), unioned. With `S` the
/// smallest spatial extent and `nd` the spatial rank: `rmax = max(2, S/16)`,
/// `rmin = max(1, S/64)`, `count = max(1, (∏ extents) / rmax^nd / 2)`. Blob `k` of image `b`
/// (seed `s = seed + b`): centre axis `j` = `hash32(8k + j, s) % extent_j`, radius
/// `R = rmin + hash32(8k + 6, s) % (rmax - rmin + 1)`, a ring when `hash32(8k + 7, s)` is
/// odd (hole `d² <= (R/2)²`); a point is in the blob when `d² <= R²` and outside the hole.
pub fn blobs(shape: &[usize], seed: u32) -> Vec<bool> {
    let n: usize = shape.iter().product();
    let mut out = vec![false; n];
    if shape.len() < 3 || n == 0 {
        return out;
    }
    let sp = &shape[2..];
    let nd = sp.len().min(6);
    let sp = &sp[sp.len() - nd..];
    let plane: usize = shape[2..].iter().product();
    let side = *sp.iter().min().unwrap_or(&1);
    let rmax = (side / 16).max(2);
    let rmin = (side / 64).max(1);
    let count = (sp.iter().product::<usize>() / rmax.pow(nd as u32) / 2).max(1);
    for (img, o) in out.chunks_mut(plane).enumerate() {
        let s = seed.wrapping_add(img as u32);
        for k in 0..count as u32 {
            let c: Vec<i64> = (0..nd)
                .map(|j| (hash32(8 * k + j as u32, s) as usize % sp[j]) as i64)
                .collect();
            let r = (rmin + hash32(8 * k + 6, s) as usize % (rmax - rmin + 1)) as i64;
            let hole = if hash32(8 * k + 7, s) & 1 == 1 {
                (r / 2) * (r / 2)
            } else {
                -1
            };
            let lo: Vec<i64> = c.iter().map(|&c| (c - r).max(0)).collect();
            let hi: Vec<i64> = (0..nd).map(|j| (c[j] + r).min(sp[j] as i64 - 1)).collect();
            let mut p = lo.clone();
            'points: loop {
                let d2: i64 = (0..nd).map(|j| (p[j] - c[j]) * (p[j] - c[j])).sum();
                if d2 <= r * r && d2 > hole {
                    let idx = p
                        .iter()
                        .zip(sp)
                        .fold(0usize, |a, (&x, &e)| a * e + x as usize);
                    o[idx] = true;
                }
                // Next point of the box, last axis fastest.
                let mut j = nd;
                loop {
                    if j == 0 {
                        break 'points;
                    }
                    j -= 1;
                    if p[j] < hi[j] {
                        p[j] += 1;
                        break;
                    }
                    p[j] = lo[j];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_have_rings_with_holes_and_disks() {
        let v = blobs(&[1, 1, 256, 256], 3);
        let ones = v.iter().filter(|&&b| b).count();
        // Neither empty nor full: between 10% and 90% of the image.
        assert!(ones > 6553 && ones < 58982, "{ones}");
        // A ring exists whose centre is background while a point at its radius is set.
        let found = (0..16u32).any(|k| {
            let s = 3;
            let c: Vec<usize> = (0..2)
                .map(|j| hash32(8 * k + j, s) as usize % 256)
                .collect();
            let r = 4 + hash32(8 * k + 6, s) as usize % (16 - 4 + 1);
            hash32(8 * k + 7, s) & 1 == 1
                && c[1] + r < 256
                && !v[c[0] * 256 + c[1]]
                && v[c[0] * 256 + c[1] + r]
        });
        assert!(found, "no ring with a visible hole among the first blobs");
    }

    #[test]
    fn blobs_in_3d_and_per_image_seeds() {
        let v = blobs(&[2, 1, 16, 16, 16], 1);
        let (a, b) = v.split_at(4096);
        assert!(a.iter().any(|&x| x) && b.iter().any(|&x| x));
        assert_ne!(a, b, "each image has its own seed");
    }

    #[test]
    fn histograms_sum_to_one_and_grid_cost_is_normalised() {
        let h = make(&Input {
            dtype: DType::F64,
            shape: vec![3, 100],
            seed: 5,
            gen: Gen::Histogram,
        })
        .unwrap();
        let v = h.to_ndarray::<f64>().unwrap();
        for row in v.as_slice().unwrap().chunks(100) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(row.iter().all(|&x| x > 0.0));
        }
        let c = grid_cost(&[9, 9]).unwrap();
        // 3x3 grid: points 0 (0,0) and 8 (2,2) are the farthest apart (8 / 8 = 1).
        assert_eq!(c[8], 1.0);
        assert_eq!(c[1], 1.0 / 8.0);
        assert_eq!(c[0], 0.0);
        assert!(grid_cost(&[8, 8]).is_err());
    }
}
