//! The fast EDT (the `Exec::Fused` path): scipy's Maurer passes carrying one f64 per pixel
//! (the partial squared distance) instead of recomputing it from the features.
//!
//! Scope: the same passes, axes `0..rank` in order, lines split across threads (the last
//! axis in place on contiguous lines; the other axes through tiles of [`TILE`] adjacent
//! lines gathered into contiguous buffers and scattered back); features are carried only when
//! indices are asked for. Used when every sampling value is finite and the image has a
//! background pixel; otherwise the caller runs `edt::features_parallel` (scipy's literal
//! per-line code in parallel).
//!
//! Exactness (why the bits equal `edt.rs`'s, which are scipy's): let `w[p]` be, before pass
//! `d`, the sum over axes `j < d` of `((F_j(p) - x_j(p)) * s_j)^2`, accumulated left to right
//! from 0.0, where `F(p)` is `p`'s feature. Before pass `d` every feature has `F_j = x_j` for
//! `j >= d` (passes `< d` move features only along their own axes), so in scipy's line code
//! (1) each `jj > d` term is `((0) * s_jj)^2 = +0.0` (finite `s`), and adding `+0.0` to a sum
//! of squares leaves it unchanged; (2) the envelope's `wR`, `uR`, `vR` are exactly the sites'
//! `w`; (3) `f[.][d]` is the site's position on the line; (4) the query's `delta` is
//! `w[site] + ((site - ii) * s_d)^2`, which is `w` of the pixel after the pass (the same sum
//! extended by the axis-`d` term). So the envelope tests, the query comparisons and the
//! chosen sites are scipy's, operand for operand, and after the last pass `sqrt(w)` is numpy's
//! `sqrt(sum((F - x) * s)^2)` (summed left to right; `0.0 + t0^2 = t0^2`). A pixel is a site
//! iff it has a feature (`w >= 0`, `-1.0` marks none: sums of squares are never negative or
//! NaN). tests/distance_*.rs compare this path with the reference bit for bit.
//!
//! Limits: no background (scipy's virtual point) and non-finite sampling go to the reference.

use rayon::prelude::*;

/// Adjacent lines per tile in the passes over axes other than the last.
pub const TILE: usize = 32;

/// True when the fast path reproduces the reference for this sampling (every value finite).
pub fn applies(mask: &[bool], s: &[f64]) -> bool {
    s.iter().all(|x| x.is_finite()) && mask.contains(&false)
}

/// Per-thread scratch of one line: the envelope's sites, their `w` and their features.
#[derive(Default)]
struct Scratch {
    g: Vec<usize>,
    gw: Vec<f64>,
    gf: Vec<i32>,
}

/// One pass over one contiguous line: `w` (and `f`, `rank` values per pixel, if carried) in
/// place. `sd` is the pass axis' sampling.
fn line(w: &mut [f64], f: Option<&mut [i32]>, rank: usize, sd: f64, sc: &mut Scratch) {
    let Scratch { g, gw, gf } = sc;
    g.clear();
    gw.clear();
    gf.clear();
    for (ii, &wr) in w.iter().enumerate() {
        if wr < 0.0 {
            continue;
        }
        let fd = ii as f64;
        while g.len() >= 2 {
            let k = g.len();
            let (idx1, idx2) = (g[k - 1], g[k - 2]);
            let f1 = idx1 as f64;
            let a = (f1 - idx2 as f64) * sd;
            let b = (fd - f1) * sd;
            let c = a + b;
            let (u_r, v_r) = (gw[k - 2], gw[k - 1]);
            if c * v_r - b * u_r - a * wr - a * b * c <= 0.0 {
                break;
            }
            g.pop();
            gw.pop();
        }
        g.push(ii);
        gw.push(wr);
    }
    if g.is_empty() {
        return;
    }
    let carried = f.is_some();
    if let Some(f) = f.as_deref() {
        for &site in g.iter() {
            gf.extend_from_slice(&f[site * rank..(site + 1) * rank]);
        }
    }
    let maxl = g.len() - 1;
    let mut l = 0usize;
    let delta = |k: usize, ii: usize, g: &[usize], gw: &[f64]| {
        let t = (g[k] as i64 - ii as i64) as f64 * sd;
        gw[k] + t * t
    };
    let mut f = f;
    for ii in 0..w.len() {
        let mut delta1 = delta(l, ii, g, gw);
        while l < maxl {
            let delta2 = delta(l + 1, ii, g, gw);
            if delta1 <= delta2 {
                break;
            }
            delta1 = delta2;
            l += 1;
        }
        w[ii] = delta1;
        if carried {
            if let Some(f) = f.as_deref_mut() {
                f[ii * rank..(ii + 1) * rank].copy_from_slice(&gf[l * rank..(l + 1) * rank]);
            }
        }
    }
}

/// The squared distances `w` and, when `with_features`, the features (pixel-major) of one
/// image with a background pixel, on the current rayon pool.
pub fn transform(
    mask: &[bool],
    shape: &[usize],
    s: &[f64],
    with_features: bool,
) -> (Vec<f64>, Option<Vec<i32>>) {
    let rank = shape.len();
    let mut w: Vec<f64> = mask.iter().map(|&m| if m { -1.0 } else { 0.0 }).collect();
    let mut feats = with_features.then(|| super::edt::initial_features(mask, shape));
    for d in 0..rank {
        let len = shape[d];
        let inner: usize = shape[d + 1..].iter().product();
        if inner == 1 {
            match feats.as_mut() {
                Some(f) => w
                    .par_chunks_mut(len)
                    .zip(f.par_chunks_mut(len * rank))
                    .for_each_init(Scratch::default, |sc, (wl, fl)| {
                        line(wl, Some(fl), rank, s[d], sc)
                    }),
                None => w
                    .par_chunks_mut(len)
                    .for_each_init(Scratch::default, |sc, wl| line(wl, None, rank, s[d], sc)),
            }
        } else {
            pass_tiled(&mut w, feats.as_deref_mut(), shape, d, s[d]);
        }
    }
    (w, feats)
}

/// One pass along axis `d` with `inner > 1`: every tile of [`TILE`] adjacent lines owns its
/// row segments (disjoint `&mut` slices), gathers them into contiguous lines, runs [`line`]
/// and scatters the results back.
fn pass_tiled(w: &mut [f64], feats: Option<&mut [i32]>, shape: &[usize], d: usize, sd: f64) {
    let rank = shape.len();
    let len = shape[d];
    let inner: usize = shape[d + 1..].iter().product();
    let outer: usize = shape[..d].iter().product();
    let per_block = inner.div_ceil(TILE);
    let tiles = outer * per_block;
    let mut wt: Vec<Vec<&mut [f64]>> = (0..tiles).map(|_| Vec::with_capacity(len)).collect();
    for (r, row) in w.chunks_mut(inner).enumerate() {
        for (k, seg) in row.chunks_mut(TILE).enumerate() {
            wt[(r / len) * per_block + k].push(seg);
        }
    }
    let mut ft: Vec<Vec<&mut [i32]>> = (0..tiles).map(|_| Vec::new()).collect();
    if let Some(f) = feats {
        for (r, row) in f.chunks_mut(inner * rank).enumerate() {
            for (k, seg) in row.chunks_mut(TILE * rank).enumerate() {
                ft[(r / len) * per_block + k].push(seg);
            }
        }
    }
    wt.into_par_iter().zip(ft).for_each_init(
        || (Scratch::default(), Vec::new(), Vec::new()),
        |(sc, lw, lf), (mut rows, mut frows)| {
            let cols = rows[0].len();
            let carried = !frows.is_empty();
            // Gathered lines sit `ls` (`lfs`) elements apart, one cache line more than their
            // length: with lines of a power-of-two length (2048 f64 = 16 KiB) the 32 lines'
            // elements `ii` would otherwise map to one L1 set and evict each other on every
            // gather and scatter. Data movement only.
            let ls = len + LINE_PAD;
            let lfs = len * rank + 2 * LINE_PAD;
            lw.resize(cols * ls, 0.0);
            for (ii, seg) in rows.iter().enumerate() {
                for (c, &v) in seg.iter().enumerate() {
                    lw[c * ls + ii] = v;
                }
            }
            if carried {
                lf.resize(cols * lfs, 0);
                for (ii, seg) in frows.iter().enumerate() {
                    for c in 0..cols {
                        let dst = c * lfs + ii * rank;
                        lf[dst..dst + rank].copy_from_slice(&seg[c * rank..(c + 1) * rank]);
                    }
                }
            }
            for c in 0..cols {
                let wl = &mut lw[c * ls..c * ls + len];
                let fl = carried.then(|| &mut lf[c * lfs..c * lfs + len * rank]);
                line(wl, fl, rank, sd, sc);
            }
            for (ii, seg) in rows.iter_mut().enumerate() {
                for (c, v) in seg.iter_mut().enumerate() {
                    *v = lw[c * ls + ii];
                }
            }
            for (ii, seg) in frows.iter_mut().enumerate() {
                for c in 0..cols {
                    let src = c * lfs + ii * rank;
                    seg[c * rank..(c + 1) * rank].copy_from_slice(&lf[src..src + rank]);
                }
            }
        },
    );
}

/// Padding (elements) between gathered lines: one 64-byte cache line of f64.
const LINE_PAD: usize = 8;

/// Distances from the squared distances, in parallel (`sqrt`, correctly rounded).
pub fn distances(w: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0f64; w.len()];
    out.par_chunks_mut(4096)
        .zip(w.par_chunks(4096))
        .for_each(|(o, i)| {
            for (o, &x) in o.iter_mut().zip(i) {
                *o = x.sqrt();
            }
        });
    out
}
