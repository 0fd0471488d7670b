//! The brute-force distance transform (scipy's `distance_transform_bf`) of one image: the
//! reference the other transforms are checked against.
//!
//! Scope: as scipy 1.17: the candidates are the background pixels next to the foreground
//! under full connectivity (a 3^rank box; outside the image counts as background); every
//! foreground pixel scans them from the highest linear index down and keeps the first
//! strictly smaller distance, so ties go to the highest linear index. Background pixels get
//! distance 0 and themselves as feature. Euclidean distances are f64 (differences converted
//! to f64, times the sampling, squared, summed from 0.0 left to right, square root, starting
//! from `f64::MAX`); taxicab and chessboard ignore the sampling and count in `u32` from
//! `u32::MAX`.
//!
//! Exactness: scipy's expressions and comparison order. The feature index of the last
//! improvement persists from pixel to pixel in raster order, as in scipy (it matters only when
//! no candidate beats the start value: no background gives `sqrt(f64::MAX)` or `u32::MAX` and
//! feature 0).
//!
//! Limits: O(pixels × candidates), sequential per image (the fast path runs images in
//! parallel).

use super::edt::increment;

/// A brute-force metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfMetric {
    /// Euclidean, with sampling, f64 distances.
    Euclidean,
    /// Sum of absolute differences, `u32` distances.
    Taxicab,
    /// Maximum absolute difference, `u32` distances.
    Chessboard,
}

/// Distances of one image (f64 for Euclidean, `u32` otherwise).
#[derive(Clone, Debug, PartialEq)]
pub enum BfDistances {
    /// Euclidean distances.
    F64(Vec<f64>),
    /// Taxicab or chessboard distances.
    U32(Vec<u32>),
}

/// The candidates: background pixels with a foreground pixel in their 3^rank neighbourhood,
/// as (flat index, coordinates), highest index first.
fn border(mask: &[bool], shape: &[usize]) -> Vec<(usize, Vec<i64>)> {
    let rank = shape.len();
    let strides = super::contiguous_strides(shape);
    let mut out = Vec::new();
    let mut coord = vec![0usize; rank];
    for (p, &fg) in mask.iter().enumerate() {
        if !fg && has_fg_neighbour(mask, shape, &strides, &coord) {
            out.push((p, coord.iter().map(|&c| c as i64).collect()));
        }
        increment(&mut coord, shape);
    }
    out.reverse();
    out
}

/// True when a pixel of the 3^rank box around `coord` (inside the image) is foreground.
fn has_fg_neighbour(mask: &[bool], shape: &[usize], strides: &[usize], coord: &[usize]) -> bool {
    let rank = shape.len();
    let mut off = vec![-1i64; rank];
    loop {
        let mut idx = 0i64;
        let mut inside = true;
        for k in 0..rank {
            let c = coord[k] as i64 + off[k];
            if c < 0 || c >= shape[k] as i64 {
                inside = false;
                break;
            }
            idx += c * strides[k] as i64;
        }
        if inside && mask[idx as usize] {
            return true;
        }
        // Next offset in {-1, 0, 1}^rank.
        let mut k = rank;
        loop {
            if k == 0 {
                return false;
            }
            k -= 1;
            off[k] += 1;
            if off[k] <= 1 {
                break;
            }
            off[k] = -1;
        }
    }
}

/// The brute-force transform of one image: distances and flat feature indices.
pub fn transform(
    mask: &[bool],
    shape: &[usize],
    metric: BfMetric,
    s: &[f64],
) -> (BfDistances, Vec<i32>) {
    let rank = shape.len();
    let cands = border(mask, shape);
    let mut ft = vec![0i32; mask.len()];
    let mut coord = vec![0i64; rank];
    let mut min_index = 0usize;
    let step = |coord: &mut [i64]| {
        for (c, &n) in coord.iter_mut().zip(shape).rev() {
            *c += 1;
            if *c < n as i64 {
                return;
            }
            *c = 0;
        }
    };
    let dist = match metric {
        BfMetric::Euclidean => {
            let mut dt = vec![0.0f64; mask.len()];
            for p in 0..mask.len() {
                if mask[p] {
                    let mut best = f64::MAX;
                    for (idx, bc) in &cands {
                        let mut d = 0.0f64;
                        for k in 0..rank {
                            let t = (coord[k] - bc[k]) as f64 * s[k];
                            d += t * t;
                        }
                        if d < best {
                            best = d;
                            min_index = *idx;
                        }
                    }
                    dt[p] = best.sqrt();
                    ft[p] = min_index as i32;
                } else {
                    ft[p] = p as i32;
                }
                step(&mut coord);
            }
            BfDistances::F64(dt)
        }
        BfMetric::Taxicab | BfMetric::Chessboard => {
            let mut dt = vec![0u32; mask.len()];
            for p in 0..mask.len() {
                if mask[p] {
                    let mut best = u32::MAX;
                    for (idx, bc) in &cands {
                        let mut d = 0u32;
                        for k in 0..rank {
                            let t = (coord[k] - bc[k]).unsigned_abs() as u32;
                            if metric == BfMetric::Taxicab {
                                d = d.wrapping_add(t);
                            } else if t > d {
                                d = t;
                            }
                        }
                        if d < best {
                            best = d;
                            min_index = *idx;
                        }
                    }
                    dt[p] = best;
                    ft[p] = min_index as i32;
                } else {
                    ft[p] = p as i32;
                }
                step(&mut coord);
            }
            BfDistances::U32(dt)
        }
    };
    (dist, ft)
}
