//! The exact Euclidean feature transform (scipy's `distance_transform_edt`) of one image.
//!
//! Scope: Maurer, Qi and Raghavan (2003), run as scipy 1.17 runs it: a feature (the
//! coordinates of the nearest background pixel) per pixel, initialised on the first pass and
//! refined by one lower-envelope pass per axis, axes `0..rank` in that order. Each pass is the
//! same function of one line ([`voronoi_line`]) applied to every line along the axis;
//! [`features_reference`] runs the lines one by one, [`features_parallel`] splits them across
//! threads (the last axis in place on contiguous lines, the other axes through column tiles).
//! [`distances`] recomputes the distances from the features as scipy's Python code does.
//!
//! Exactness: every floating-point expression is scipy's, operand for operand: coordinate
//! differences are taken in integers and converted to f64 (exact below 2^53), multiplied by
//! the axis' sampling, squared, summed over the axes left to right from 0.0; the envelope drops
//! a parabola while `c*vR - b*uR - a*wR - a*b*c > 0.0` (the test evaluated left to right, no
//! FMA: Rust never contracts), the query advances while `delta1 > delta2`, so among equidistant
//! background pixels the lowest coordinate along the pass' axis wins. scipy multiplies by the
//! sampling only when one is given; kiln always multiplies, by 1.0 when none is given, which is
//! exact for these finite integers. Both drivers call the same line function on the same
//! snapshot of each line, so they agree bit for bit.
//!
//! Limits: no background at all leaves every feature at scipy's virtual point `(-1, 0, ...)`
//! (scipy initialises foreground features to `-1` on axis 0 and zero elsewhere); coordinates
//! must fit in `i32` (checked by the caller).

use rayon::prelude::*;

/// Features of one image: `rank` `i32` coordinates per pixel, pixel-major (`[S1..Sd, rank]`).
pub type Features = Vec<i32>;

/// Scipy's initial features: a background pixel holds its own coordinates; a foreground pixel
/// holds `-1` on axis 0 and `0` on the other axes (scipy's zero-filled array).
pub fn initial_features(mask: &[bool], shape: &[usize]) -> Features {
    let rank = shape.len();
    let mut f = vec![0i32; mask.len() * rank];
    let mut coord = vec![0usize; rank];
    for (p, &fg) in mask.iter().enumerate() {
        let dst = &mut f[p * rank..(p + 1) * rank];
        if fg {
            dst[0] = -1;
        } else {
            for (d, c) in dst.iter_mut().zip(&coord) {
                *d = *c as i32;
            }
        }
        increment(&mut coord, shape);
    }
    f
}

/// One line pass along axis `d`: `src` holds the line's features before the pass (`len`
/// pixels of `rank` coordinates), `out` receives them after. `coor` are the line's coordinates
/// on the other axes (`coor[d]` is ignored), `s` the sampling per axis, `g` scratch.
pub fn voronoi_line(
    src: &[i32],
    out: &mut [i32],
    rank: usize,
    d: usize,
    coor: &[i64],
    s: &[f64],
    g: &mut Vec<usize>,
) {
    let len = src.len() / rank;
    let f = |i: usize, j: usize| src[i * rank + j] as i64;
    g.clear();
    // The lower envelope of the sites' parabolas.
    for ii in 0..len {
        if f(ii, 0) < 0 {
            continue;
        }
        let fd = f(ii, d) as f64;
        let mut w_r = 0.0f64;
        for jj in 0..rank {
            if jj != d {
                let tw = (f(ii, jj) - coor[jj]) as f64 * s[jj];
                w_r += tw * tw;
            }
        }
        while g.len() >= 2 {
            let idx1 = g[g.len() - 1];
            let idx2 = g[g.len() - 2];
            let f1 = f(idx1, d) as f64;
            let mut a = f1 - f(idx2, d) as f64;
            let mut b = fd - f1;
            a *= s[d];
            b *= s[d];
            let c = a + b;
            let mut u_r = 0.0f64;
            let mut v_r = 0.0f64;
            for jj in 0..rank {
                if jj != d {
                    let cc = coor[jj] as f64;
                    let tu = (f(idx2, jj) as f64 - cc) * s[jj];
                    let tv = (f(idx1, jj) as f64 - cc) * s[jj];
                    u_r += tu * tu;
                    v_r += tv * tv;
                }
            }
            if c * v_r - b * u_r - a * w_r - a * b * c <= 0.0 {
                break;
            }
            g.pop();
        }
        g.push(ii);
    }
    if g.is_empty() {
        out.copy_from_slice(src);
        return;
    }
    // The queries: every pixel takes the envelope's site at its position.
    let delta = |site: usize, ii: usize| {
        let mut acc = 0.0f64;
        for jj in 0..rank {
            let other = if jj == d { ii as i64 } else { coor[jj] };
            let t = (f(site, jj) - other) as f64 * s[jj];
            acc += t * t;
        }
        acc
    };
    let maxl = g.len() - 1;
    let mut l = 0usize;
    for ii in 0..len {
        let mut delta1 = delta(g[l], ii);
        while l < maxl {
            let delta2 = delta(g[l + 1], ii);
            if delta1 <= delta2 {
                break;
            }
            delta1 = delta2;
            l += 1;
        }
        let site = g[l];
        out[ii * rank..(ii + 1) * rank].copy_from_slice(&src[site * rank..(site + 1) * rank]);
    }
}

/// The reference feature transform: every pass, every line in order, one at a time.
pub fn features_reference(mask: &[bool], shape: &[usize], s: &[f64]) -> Features {
    let rank = shape.len();
    let mut feats = initial_features(mask, shape);
    let mut g = Vec::new();
    for d in 0..rank {
        let len = shape[d];
        let inner: usize = shape[d + 1..].iter().product();
        let outer: usize = shape[..d].iter().product();
        let mut src = vec![0i32; len * rank];
        let mut out = vec![0i32; len * rank];
        for o in 0..outer {
            for i in 0..inner {
                let start = o * len * inner + i;
                for ii in 0..len {
                    let p = (start + ii * inner) * rank;
                    src[ii * rank..(ii + 1) * rank].copy_from_slice(&feats[p..p + rank]);
                }
                let coor = line_coords(start, shape);
                voronoi_line(&src, &mut out, rank, d, &coor, s, &mut g);
                for ii in 0..len {
                    let p = (start + ii * inner) * rank;
                    feats[p..p + rank].copy_from_slice(&out[ii * rank..(ii + 1) * rank]);
                }
            }
        }
    }
    feats
}

/// Columns per tile in the parallel passes over axes other than the last.
const TILE: usize = 16;

/// The parallel feature transform: the same line function on the same line snapshots as
/// [`features_reference`], lines split across the current rayon pool.
pub fn features_parallel(mask: &[bool], shape: &[usize], s: &[f64]) -> Features {
    let rank = shape.len();
    let mut feats = initial_features(mask, shape);
    for d in 0..rank {
        let len = shape[d];
        let inner: usize = shape[d + 1..].iter().product();
        if inner == 1 {
            // Lines along the last axis are contiguous: in place, a snapshot per line.
            feats.par_chunks_mut(len * rank).enumerate().for_each_init(
                || (Vec::new(), Vec::new()),
                |(src, g), (line, out)| {
                    src.clear();
                    src.extend_from_slice(out);
                    let coor = line_coords(line * len, shape);
                    voronoi_line(src, out, rank, d, &coor, s, g);
                },
            );
        } else {
            feats = pass_tiled(&feats, shape, d, s);
        }
    }
    feats
}

/// One pass along axis `d < rank - 1`: tiles of [`TILE`] adjacent lines are gathered row by
/// row, transformed, and written back row by row (two parallel phases, no shared writes).
fn pass_tiled(feats: &[i32], shape: &[usize], d: usize, s: &[f64]) -> Features {
    let rank = shape.len();
    let len = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    let outer: usize = shape[..d].iter().product();
    let tiles_per_block = inner.div_ceil(TILE);
    let row = inner * rank;
    // Phase 1: each tile's result, laid out [ii][column][rank].
    let tiles: Vec<Vec<i32>> = (0..outer * tiles_per_block)
        .into_par_iter()
        .map_init(
            || (Vec::new(), Vec::new(), Vec::new()),
            |(src, out, g), t| {
                let (o, k) = (t / tiles_per_block, t % tiles_per_block);
                let i0 = k * TILE;
                let w = TILE.min(inner - i0);
                let block = &feats[o * len * row..(o + 1) * len * row];
                let mut result = vec![0i32; len * w * rank];
                src.resize(len * rank, 0);
                out.resize(len * rank, 0);
                for c in 0..w {
                    for ii in 0..len {
                        let p = ii * row + (i0 + c) * rank;
                        src[ii * rank..(ii + 1) * rank].copy_from_slice(&block[p..p + rank]);
                    }
                    let coor = line_coords(o * len * inner + i0 + c, shape);
                    voronoi_line(src, out, rank, d, &coor, s, g);
                    for ii in 0..len {
                        let q = (ii * w + c) * rank;
                        result[q..q + rank].copy_from_slice(&out[ii * rank..(ii + 1) * rank]);
                    }
                }
                result
            },
        )
        .collect();
    // Phase 2: every output row copies its segment from each tile of its block.
    let mut next = vec![0i32; feats.len()];
    next.par_chunks_mut(row).enumerate().for_each(|(r, dst)| {
        let (o, ii) = (r / len, r % len);
        for k in 0..tiles_per_block {
            let i0 = k * TILE;
            let w = TILE.min(inner - i0);
            let tile = &tiles[o * tiles_per_block + k];
            dst[i0 * rank..(i0 + w) * rank]
                .copy_from_slice(&tile[ii * w * rank..(ii + 1) * w * rank]);
        }
    });
    next
}

/// scipy's distances from features: `(feature - coordinate) * sampling`, squared, summed over
/// the axes left to right, square root.
pub fn distances(feats: &[i32], shape: &[usize], s: &[f64]) -> Vec<f64> {
    let rank = shape.len();
    let n = feats.len() / rank.max(1);
    let mut out = vec![0.0f64; n];
    let mut coord = vec![0usize; rank];
    for (p, o) in out.iter_mut().enumerate() {
        *o = distance_at(&feats[p * rank..(p + 1) * rank], &coord, s);
        increment(&mut coord, shape);
    }
    out
}

/// [`distances`] on the current rayon pool, rows in parallel (the same expression per pixel).
pub fn distances_parallel(feats: &[i32], shape: &[usize], s: &[f64]) -> Vec<f64> {
    let rank = shape.len();
    let last = shape[rank - 1];
    let n = feats.len() / rank;
    let mut out = vec![0.0f64; n];
    out.par_chunks_mut(last).enumerate().for_each(|(r, row)| {
        let mut coord = unravel(r * last, shape);
        for (i, o) in row.iter_mut().enumerate() {
            let p = r * last + i;
            coord[rank - 1] = i;
            *o = distance_at(&feats[p * rank..(p + 1) * rank], &coord, s);
        }
    });
    out
}

/// One pixel's distance (numpy's int32 subtraction, f64 conversion, product, square, sum).
#[inline]
fn distance_at(feat: &[i32], coord: &[usize], s: &[f64]) -> f64 {
    let mut acc = 0.0f64;
    for ((&f, &c), &sj) in feat.iter().zip(coord).zip(s) {
        let t = (f as i64 - c as i64) as f64 * sj;
        acc += t * t;
    }
    acc.sqrt()
}

/// Coordinates of flat pixel index `p` (row-major over `shape`), as `i64`.
fn line_coords(p: usize, shape: &[usize]) -> Vec<i64> {
    unravel(p, shape).into_iter().map(|c| c as i64).collect()
}

/// Row-major coordinates of flat index `p`.
pub(crate) fn unravel(mut p: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0usize; shape.len()];
    for (ci, &n) in c.iter_mut().zip(shape).rev() {
        *ci = p % n;
        p /= n;
    }
    c
}

/// Advances row-major coordinates by one element (wrapping to zero after the last).
pub(crate) fn increment(coord: &mut [usize], shape: &[usize]) {
    for (c, &n) in coord.iter_mut().zip(shape).rev() {
        *c += 1;
        if *c < n {
            return;
        }
        *c = 0;
    }
}
