//! The Sinkhorn fast path ([`Exec::Fused`](crate::program::Exec)): tiles of [`TILE`]
//! samples sharing one kernel iterate in parallel (rayon), each iteration three lane passes
//! (`lanes.rs`) over the padded kernel `K[i][j]` and its transpose `K[j][i]`.
//!
//! Exactness: this file only schedules. Every sum is a lane of `lanes.rs` taking the same
//! terms in the same order as `step_one` in `mod.rs` (`Σ_i` over the rows of `K`, `Σ_j`
//! over the rows of the transpose, which are `K`'s columns), and the element-wise updates,
//! the revert rule and the stopping test are the reference's own functions; so each sample
//! gets the reference's bits whatever the tile, thread count or ISA (tested in
//! `ops/tests/sinkhorn.rs` and `lanes.rs`).
//!
//! Parallelism: tiles run in parallel; with fewer tiles than threads every pass also cuts
//! its lanes into ranges run in parallel (lanes are independent accumulators).
//!
//! Limits: a per-sample cost makes tiles of one (no row is shared).

use rayon::prelude::*;

use super::lanes::{self, Isa, Mat};
use super::{finish, Problem, Real, Solved, State, TILE};

/// The kernel of one problem, padded for the lane passes.
struct Kernels<T> {
    /// `K[i][j]`: `n` rows of `padded(m)` lanes.
    k: Vec<T>,
    /// `K[j][i]`: `m` rows of `padded(n)` lanes.
    kt: Vec<T>,
    mp: usize,
    np: usize,
}

impl<T: Real> Kernels<T> {
    fn new(p: &Problem<'_, T>, k: &[T]) -> Kernels<T> {
        Kernels {
            k: lanes::pad(k, p.n, p.m),
            kt: lanes::pad_transposed(k, p.n, p.m),
            mp: lanes::padded(p.m),
            np: lanes::padded(p.n),
        }
    }

    fn rows(&self, p: &Problem<'_, T>) -> Mat<'_, T> {
        Mat {
            data: &self.k,
            rows: p.n,
            width: self.mp,
        }
    }

    fn cols(&self, p: &Problem<'_, T>) -> Mat<'_, T> {
        Mat {
            data: &self.kt,
            rows: p.m,
            width: self.np,
        }
    }
}

/// `x` zero-padded to `len`.
fn padded_copy<T: Real>(x: &[T], len: usize) -> Vec<T> {
    let mut v = x.to_vec();
    v.resize(len, T::ZERO);
    v
}

/// A tile's samples: (sample index, state, `ra` padded to the transpose's width).
type Tile<T> = Vec<(usize, State<T>, Vec<T>)>;

/// One iteration `ii` of the tile's active samples.
fn step<T: Real>(
    p: &Problem<'_, T>,
    kern: &Kernels<T>,
    tile: &mut Tile<T>,
    ii: usize,
    (isa, parts): (Isa, usize),
) {
    let m = p.m;
    let live: Vec<usize> = (0..tile.len()).filter(|&t| tile[t].1.active).collect();
    if live.is_empty() {
        return;
    }
    let q = live.len();
    let mut outm = vec![vec![T::ZERO; kern.mp]; q];
    let mut outn = vec![vec![T::ZERO; kern.np]; q];
    if p.opts.log_domain {
        // v_j = log b_j - LSE_i(Mr_ij + u_i).
        let us: Vec<&[T]> = live.iter().map(|&t| tile[t].1.u.as_slice()).collect();
        lanes::pass::<T, { lanes::LSE_ADD_W }>(isa, kern.rows(p), &us, &[], &mut outm, parts);
        for (o, &t) in outm.iter().zip(&live) {
            let st = &mut tile[t].1;
            for ((v, &lb), &x) in st.v.iter_mut().zip(&st.lb).zip(o) {
                *v = lb - x;
            }
        }
        // u_i = log a_i - LSE_j(Mr_ij + v_j).
        let vs: Vec<&[T]> = live.iter().map(|&t| tile[t].1.v.as_slice()).collect();
        lanes::pass::<T, { lanes::LSE_ADD_W }>(isa, kern.cols(p), &vs, &[], &mut outn, parts);
        for (o, &t) in outn.iter().zip(&live) {
            let st = &mut tile[t].1;
            for ((u, &ra), &x) in st.u.iter_mut().zip(&st.ra).zip(o) {
                *u = ra - x;
            }
        }
    } else {
        // KtU_j = Σ_i K_ij u_i; v_j = b_j / KtU_j.
        let us: Vec<&[T]> = live.iter().map(|&t| tile[t].1.u.as_slice()).collect();
        lanes::pass::<T, { lanes::MUL_W }>(isa, kern.rows(p), &us, &[], &mut outm, parts);
        let mut prev = Vec::with_capacity(q);
        for (o, &t) in outm.iter().zip(&live) {
            let (s, st, _) = &mut tile[t];
            prev.push((st.u.clone(), st.v.clone()));
            let b = &p.b[*s * m..(*s + 1) * m];
            for ((v, &bj), &x) in st.v.iter_mut().zip(b).zip(o) {
                *v = bj / x;
            }
        }
        // u_i = 1 / Σ_j ((1/a_i) K_ij) v_j over the transpose's rows.
        let vs: Vec<&[T]> = live.iter().map(|&t| tile[t].1.v.as_slice()).collect();
        let ras: Vec<&[T]> = live.iter().map(|&t| tile[t].2.as_slice()).collect();
        lanes::pass::<T, { lanes::S_MUL_W }>(isa, kern.cols(p), &vs, &ras, &mut outn, parts);
        for (((o, ktu), &t), pr) in outn.iter().zip(&outm).zip(&live).zip(prev) {
            let st = &mut tile[t].1;
            for (u, &x) in st.u.iter_mut().zip(o) {
                *u = T::ONE / x;
            }
            st.revert_if_bad(&ktu[..m], pr, ii);
        }
    }
    if ii.is_multiple_of(10) {
        // Marginal error: tmp_j = Σ_i (u_i K_ij) v_j (or exp((Mr_ij + u_i) + v_j)).
        let live: Vec<usize> = live.into_iter().filter(|&t| tile[t].1.active).collect();
        if live.is_empty() {
            return;
        }
        let us: Vec<&[T]> = live.iter().map(|&t| tile[t].1.u.as_slice()).collect();
        let vps: Vec<Vec<T>> = live
            .iter()
            .map(|&t| padded_copy(&tile[t].1.v, kern.mp))
            .collect();
        let vs: Vec<&[T]> = vps.iter().map(|v| v.as_slice()).collect();
        let mut tmp = vec![vec![T::ZERO; kern.mp]; live.len()];
        if p.opts.log_domain {
            lanes::pass::<T, { lanes::EXP_ADD_W_S }>(isa, kern.rows(p), &us, &vs, &mut tmp, parts);
        } else {
            lanes::pass::<T, { lanes::W_MUL_S }>(isa, kern.rows(p), &us, &vs, &mut tmp, parts);
        }
        for (o, &t) in tmp.iter().zip(&live) {
            let (s, st, _) = &mut tile[t];
            st.stop_if_converged(p, &o[..m], *s, ii);
        }
    }
}

/// Solves the samples `samples` as one tile against `k` (unpadded) and `kern`.
fn solve_tile<T: Real>(
    p: &Problem<'_, T>,
    k: &[T],
    kern: &Kernels<T>,
    samples: &[usize],
    how: (Isa, usize),
) -> Vec<Solved<T>> {
    let mut tile: Tile<T> = samples
        .iter()
        .map(|&s| {
            let st = State::new(p, s);
            let ra = padded_copy(&st.ra, kern.np);
            (s, st, ra)
        })
        .collect();
    for ii in 0..p.opts.max_iter {
        if tile.iter().all(|(_, st, _)| !st.active) {
            break;
        }
        step(p, kern, &mut tile, ii, how);
    }
    tile.into_iter()
        .map(|(s, mut st, _)| {
            st.finish_iterations(p);
            finish(p, k, s, st)
        })
        .collect()
}

/// Every sample of the batch: tiles of [`TILE`] against a shared kernel `shared_k`, or
/// tiles of one with each sample's own kernel.
pub(super) fn solve<T: Real>(
    p: &Problem<'_, T>,
    shared_k: Option<&[T]>,
    batch: usize,
    isa: Isa,
) -> Vec<Solved<T>> {
    let shared = shared_k.map(|k| Kernels::new(p, k));
    let width = if shared.is_some() { TILE } else { 1 };
    let tiles: Vec<Vec<usize>> = (0..batch)
        .collect::<Vec<_>>()
        .chunks(width)
        .map(|c| c.to_vec())
        .collect();
    // Fewer tiles than threads: each pass splits its lanes over the idle threads too.
    let parts = rayon::current_num_threads().div_ceil(tiles.len().max(1));
    let how = (isa, parts);
    tiles
        .par_iter()
        .map(|t| match (shared_k, &shared) {
            (Some(k), Some(kern)) => solve_tile(p, k, kern, t, how),
            _ => {
                let k = p.kernel(p.cost_of(t[0]));
                let kern = Kernels::new(p, &k);
                solve_tile(p, &k, &kern, t, how)
            }
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flatten()
        .collect()
}
