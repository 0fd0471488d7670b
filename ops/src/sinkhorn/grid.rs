//! Sinkhorn on a regular grid with a separable cost (`grid_axes = k ≥ 1`): histograms over
//! the `g^k` points of a k-dimensional grid (row-major), the cost given by its per-axis
//! table `C[g, g]`: `M_pq = C[p_0, q_0] + C[p_1, q_1] + ...` (axis 0 first). The squared
//! Euclidean grid cost is of this form (`C[i, j] = (i - j)²`, times any scale).
//!
//! The kernel factors the same way, `K_pq = K1[p_0, q_0] · K1[p_1, q_1] · ...` with
//! `K1 = exp(C / (-eps))` (log domain: `Mr_pq = Mr1[p_0, q_0] + ...`, `Mr1 = (-C) / eps`), so
//! `Kᵀu` is k passes of `g`-term sums along one axis each (the last axis first) instead of
//! one `g^k`-term sum per entry: `k·g^(k+1)` products instead of `g^(2k)` (32 x 32 grid:
//! 65 536 instead of 1 048 576). Log-sum-exps factor the same way (an LSE along each axis).
//!
//! Updates, in POT's order: `v = b / (Kᵀu)`, `u = a / (K v)` (POT's `1 / ((K / a) v)`
//! without the row scaling), the same revert rule and stopping test as the dense form
//! (`tmp = (Kᵀu) ⊙ v` with the new u; log form `exp(LSE + v)`). Plan, cost (`M ∘ P` summed
//! by rows, then over the rows) and potentials as in `mod.rs`, with `K_pq`, `Mr_pq` and
//! `M_pq` formed axis 0 first.
//!
//! Exactness: one implementation serves [`Exec::Eager`](crate::program::Exec) (samples in
//! turn) and `Exec::Fused` (samples in parallel, compiled for the host's widest ISA as in
//! `lanes.rs`): every sum ascends its index along its axis, so the two agree bit for bit.
//! Against the dense form on the same `M`, results differ by rounding (the kernel's entries
//! are products of rounded factors, the sums are nested): within SEMANTICS.md's
//! tolerances of POT on the dense matrix (tested).
//!
//! Limits: one cost table shared by every axis and every sample (`[g, g]`), `n = m = g^k`.

use rayon::prelude::*;

use super::lanes::Isa;
use super::{finish_with, lse_end, lse_push, Problem, Real, Solved, State};

/// The grid and its per-axis tables.
struct Grid<T> {
    /// Points per axis.
    g: usize,
    /// Axes.
    k: usize,
    /// `K1[i][j]` (or `Mr1` in the log domain), row-major `g × g`.
    k1: Vec<T>,
    /// Its transpose.
    k1t: Vec<T>,
}

impl<T: Real> Grid<T> {
    /// Index of point `p` along `axis`.
    fn coord(&self, p: usize, axis: usize) -> usize {
        (p / self.g.pow((self.k - 1 - axis) as u32)) % self.g
    }
}

/// `y[.., j, ..] = Σ_i mat[i][j] · x[.., i, ..]` along `axis` (i ascending, [`along_sum`]),
/// or with `LSE` the running log-sum-exp of `mat[i][j] + x[.., i, ..]`; `mx` is scratch.
#[inline(always)]
fn along<T: Real, const LSE: bool>(
    mat: &[T],
    (g, k, axis): (usize, usize, usize),
    x: &[T],
    y: &mut [T],
    mx: &mut [T],
) {
    let s = g.pow((k - 1 - axis) as u32);
    if !LSE {
        return along_sum(mat, g, s, x, y);
    }
    y.fill(T::ZERO);
    mx.fill(T::NEG_INF);
    let block = g * s;
    for ((xb, yb), mb) in x
        .chunks_exact(block)
        .zip(y.chunks_exact_mut(block))
        .zip(mx.chunks_exact_mut(block))
    {
        if s == 1 {
            // The last axis: handled below, every block at once.
            break;
        }
        for (i, row) in mat.chunks_exact(g).enumerate() {
            let xr = &xb[i * s..(i + 1) * s];
            {
                // Lanes are the `s` points after the axis.
                for ((yr, mr), &mij) in yb.chunks_exact_mut(s).zip(mb.chunks_exact_mut(s)).zip(row)
                {
                    for ((yv, mv), &xv) in yr.iter_mut().zip(mr.iter_mut()).zip(xr) {
                        if LSE {
                            lse_push(mv, yv, mij + xv);
                        } else {
                            *yv = *yv + mij * xv;
                        }
                    }
                }
            }
        }
    }
    if s == 1 {
        // The last axis: lanes are the outputs j of a block; the blocks run side by side
        // for each i (independent accumulators, no chain through memory), i ascending.
        for (i, row) in mat.chunks_exact(g).enumerate() {
            for ((xb, yb), mb) in x
                .chunks_exact(g)
                .zip(y.chunks_exact_mut(g))
                .zip(mx.chunks_exact_mut(g))
            {
                let xi = xb[i];
                for ((yj, mj), &mij) in yb.iter_mut().zip(mb.iter_mut()).zip(row) {
                    if LSE {
                        lse_push(mj, yj, mij + xi);
                    } else {
                        *yj = *yj + mij * xi;
                    }
                }
            }
        }
    }
    if LSE {
        for (yv, &mv) in y.iter_mut().zip(mx.iter()) {
            *yv = lse_end(mv, *yv);
        }
    }
}

/// Outputs per register tile of [`along_sum`].
const TQ: usize = 4;
/// Lanes per register tile of [`along_sum`].
const TL: usize = 16;

/// `along` without LSE, `s` the stride of the axis: register tiles of `TQ x TL`
/// accumulators (4 outputs sharing each load of 16 lanes) where they fit, the plain loop
/// for the remaining entries; every accumulator adds `mat[i][j] * x` for i ascending.
#[inline(always)]
fn along_sum<T: Real>(mat: &[T], g: usize, s: usize, x: &[T], y: &mut [T]) {
    let block = g * s;
    if s > 1 {
        // y[j, r] = Σ_i mat[i][j] x[i, r] in each block: lanes r, tiles of outputs j.
        let (jq, lq) = (g / TQ * TQ, s / TL * TL);
        for (xb, yb) in x.chunks_exact(block).zip(y.chunks_exact_mut(block)) {
            for j0 in (0..jq).step_by(TQ) {
                for l0 in (0..lq).step_by(TL) {
                    let mut acc = [[T::ZERO; TL]; TQ];
                    for i in 0..g {
                        let xv = &xb[i * s + l0..i * s + l0 + TL];
                        let mq: [T; TQ] = std::array::from_fn(|q| mat[i * g + j0 + q]);
                        for l in 0..TL {
                            for q in 0..TQ {
                                acc[q][l] = acc[q][l] + mq[q] * xv[l];
                            }
                        }
                    }
                    for (q, a) in acc.iter().enumerate() {
                        yb[(j0 + q) * s + l0..(j0 + q) * s + l0 + TL].copy_from_slice(a);
                    }
                }
            }
            for j in 0..g {
                for r in (if j < jq { lq } else { 0 })..s {
                    let mut acc = T::ZERO;
                    for i in 0..g {
                        acc = acc + mat[i * g + j] * xb[i * s + r];
                    }
                    yb[j * s + r] = acc;
                }
            }
        }
    } else {
        // The last axis: y[b, j] = Σ_i mat[i][j] x[b, i]: lanes j, tiles of blocks b.
        let outer = x.len() / g;
        let (bq, jl) = (outer / TQ * TQ, g / TL * TL);
        for b0 in (0..bq).step_by(TQ) {
            for j0 in (0..jl).step_by(TL) {
                let mut acc = [[T::ZERO; TL]; TQ];
                for i in 0..g {
                    let mv = &mat[i * g + j0..i * g + j0 + TL];
                    let xq: [T; TQ] = std::array::from_fn(|q| x[(b0 + q) * g + i]);
                    for l in 0..TL {
                        for q in 0..TQ {
                            acc[q][l] = acc[q][l] + mv[l] * xq[q];
                        }
                    }
                }
                for (q, a) in acc.iter().enumerate() {
                    y[(b0 + q) * g + j0..(b0 + q) * g + j0 + TL].copy_from_slice(a);
                }
            }
        }
        for b in 0..outer {
            for j in (if b < bq { jl } else { 0 })..g {
                let mut acc = T::ZERO;
                for i in 0..g {
                    acc = acc + mat[i * g + j] * x[b * g + i];
                }
                y[b * g + j] = acc;
            }
        }
    }
}

/// The separable operator: `along` every axis, the last first.
#[inline(always)]
fn apply<T: Real, const LSE: bool>(grid: &Grid<T>, mat: &[T], x: &[T], bufs: &mut Bufs<T>) {
    bufs.cur.copy_from_slice(x);
    for axis in (0..grid.k).rev() {
        along::<T, LSE>(
            mat,
            (grid.g, grid.k, axis),
            &bufs.cur,
            &mut bufs.out,
            &mut bufs.mx,
        );
        std::mem::swap(&mut bufs.cur, &mut bufs.out);
    }
}

/// Scratch of one sample (`cur` holds an `apply`'s result).
struct Bufs<T> {
    cur: Vec<T>,
    out: Vec<T>,
    mx: Vec<T>,
}

/// Every iteration of sample `s`.
#[inline(always)]
fn iterate<T: Real>(p: &Problem<'_, T>, grid: &Grid<T>, s: usize, st: &mut State<T>) {
    let n = p.n;
    let a = &p.a[s * n..(s + 1) * n];
    let b = &p.b[s * n..(s + 1) * n];
    let mut bufs = Bufs {
        cur: vec![T::ZERO; n],
        out: vec![T::ZERO; n],
        mx: vec![T::ZERO; n],
    };
    for ii in 0..p.opts.max_iter {
        if !st.active {
            break;
        }
        if p.opts.log_domain {
            apply::<T, true>(grid, &grid.k1, &st.u, &mut bufs);
            for ((v, &lb), &l) in st.v.iter_mut().zip(&st.lb).zip(&bufs.cur) {
                *v = lb - l;
            }
            apply::<T, true>(grid, &grid.k1t, &st.v, &mut bufs);
            for ((u, &la), &l) in st.u.iter_mut().zip(&st.ra).zip(&bufs.cur) {
                *u = la - l;
            }
        } else {
            apply::<T, false>(grid, &grid.k1, &st.u, &mut bufs);
            let ktu = bufs.cur.clone();
            let prev = (st.u.clone(), st.v.clone());
            for ((v, &bj), &x) in st.v.iter_mut().zip(b).zip(&ktu) {
                *v = bj / x;
            }
            apply::<T, false>(grid, &grid.k1t, &st.v, &mut bufs);
            for ((u, &ai), &x) in st.u.iter_mut().zip(a).zip(&bufs.cur) {
                *u = ai / x;
            }
            st.revert_if_bad(&ktu, prev, ii);
        }
        if st.active && ii.is_multiple_of(10) {
            let tmp: Vec<T> = if p.opts.log_domain {
                apply::<T, true>(grid, &grid.k1, &st.u, &mut bufs);
                bufs.cur
                    .iter()
                    .zip(&st.v)
                    .map(|(&l, &v)| (l + v).kexp())
                    .collect()
            } else {
                apply::<T, false>(grid, &grid.k1, &st.u, &mut bufs);
                bufs.cur.iter().zip(&st.v).map(|(&x, &v)| x * v).collect()
            };
            st.stop_if_converged(p, &tmp, s, ii);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn iterate_avx512<T: Real>(p: &Problem<'_, T>, grid: &Grid<T>, s: usize, st: &mut State<T>) {
    iterate(p, grid, s, st)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn iterate_avx2<T: Real>(p: &Problem<'_, T>, grid: &Grid<T>, s: usize, st: &mut State<T>) {
    iterate(p, grid, s, st)
}

/// Sample `s` from start to finish, its loops compiled for `isa` when the CPU has it.
fn solve_sample<T: Real>(p: &Problem<'_, T>, grid: &Grid<T>, s: usize, isa: Isa) -> Solved<T> {
    let mut st = State::new(p, s);
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if std::arch::is_x86_feature_detected!("avx512f") => {
            // SAFETY: the CPU has AVX-512F (checked in the guard), the only requirement of
            // calling a `target_feature(enable = "avx512f")` function.
            unsafe { iterate_avx512(p, grid, s, &mut st) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
            // SAFETY: the CPU has AVX2 (checked in the guard).
            unsafe { iterate_avx2(p, grid, s, &mut st) }
        }
        _ => iterate(p, grid, s, &mut st),
    }
    st.finish_iterations(p);
    let (g, k) = (grid.g, grid.k);
    let (k1, c1) = (&grid.k1, p.m_cost);
    // Every point's coordinates, axis 0 first (no divisions in the n² loop below).
    let coords: Vec<usize> = (0..p.n)
        .flat_map(|q| (0..k).map(move |axis| grid.coord(q, axis)))
        .collect();
    // Row p of K (K_pq = K1[p0, q0] · K1[p1, q1] · ...; Mr_pq: sums) and of M (sums),
    // axis 0 first.
    let fold = |tab: &[T], i: usize, out: &mut [T], mul: bool| {
        let ci = &coords[i * k..(i + 1) * k];
        for (o, cj) in out.iter_mut().zip(coords.chunks_exact(k)) {
            let mut acc = tab[ci[0] * g + cj[0]];
            for axis in 1..k {
                let t = tab[ci[axis] * g + cj[axis]];
                acc = if mul { acc * t } else { acc + t };
            }
            *o = acc;
        }
    };
    let log = p.opts.log_domain;
    finish_with(p, st, |i, krow, crow| {
        fold(k1, i, krow, !log);
        fold(c1, i, crow, false);
    })
}

/// Every sample of a grid problem (`p.m_cost` is the `[g, g]` axis table); in parallel
/// when `parallel`, on `isa` (the baseline when the CPU lacks it).
pub(super) fn solve<T: Real>(
    p: &Problem<'_, T>,
    (g, k): (usize, usize),
    batch: usize,
    parallel: bool,
    isa: Isa,
) -> Vec<Solved<T>> {
    let k1 = p.kernel(p.m_cost);
    let mut k1t = vec![T::ZERO; g * g];
    for i in 0..g {
        for j in 0..g {
            k1t[j * g + i] = k1[i * g + j];
        }
    }
    let grid = Grid { g, k, k1, k1t };
    if parallel {
        (0..batch)
            .into_par_iter()
            .map(|s| solve_sample(p, &grid, s, isa))
            .collect()
    } else {
        (0..batch).map(|s| solve_sample(p, &grid, s, isa)).collect()
    }
}
