//! Batched entropic optimal transport: `sinkhorn` (a [`Program`]) and `build_cost_matrix`.
//!
//! Scope: `sinkhorn(a[B, n], b[B, m], cost[n, m] (shared) or [B, n, m])` with parameters
//! `eps`, `max_iter`, `tol`, `log_domain`, `plan`; f32 or f64 (all three inputs one dtype).
//! Outputs, in order: `cost[B]` (transport cost `Σ_ij M_ij P_ij` of the returned plan), `f[B, n]`
//! and `g[B, m]` (dual potentials: `eps·log u`, `eps·log v`, or `eps·u`, `eps·v` in the log
//! domain), `niter[B]` (POT's `log["niter"]`: the index of the last iteration run, stored as
//! f64 whatever the input dtype), `plan[B, n, m]` when `plan=true` or `grad=true`, then
//! `grad_a[B, n]`, `grad_b[B, m]` when `grad=true`.
//!
//! Gradients: the ones POT's `ot.solve(..., grad="envelope")` sets, d/dM = P,
//! d/da = eps·(l_u - mean(l_u)), d/db = eps·(l_v - mean(l_v)) with `l_u`, `l_v` the log
//! potentials (`log u`, `log v`, or `u`, `v` in the log domain). By the envelope theorem they
//! are the gradient of the entropic value `<P, M> + eps·Σ P log P` at the fixed point (on the
//! simplex: defined up to a constant shift, hence centred; POT's default KL objective
//! differs by `eps·log a_i`). Exact only at convergence (tested against finite differences).
//! Empty bins (log form: `-inf` potentials) are left out of the means and get `-inf`.
//!
//! Algorithms (one sample; `K_ij = exp(M_ij / (-eps))`, `Mr_ij = (-M_ij) / eps`):
//! - standard form, POT's `sinkhorn_knopp` update order: `u = 1/n`, `v = 1/m`; per iteration
//!   `ii`: `KtU_j = Σ_i K_ij u_i`, `v_j = b_j / KtU_j`, `u_i = 1 / Σ_j ((1/a_i) K_ij) v_j`;
//!   if any `KtU_j == 0` or any u/v NaN or ±inf: restore the previous u, v and stop; every
//!   10th iteration (`ii % 10 == 0`) `err = sqrt(Σ_j (Σ_i (u_i K_ij) v_j - b_j)²)` and stop
//!   when `err < tol` (strict). Plan `P_ij = (u_i K_ij) v_j`.
//! - log form, POT's `sinkhorn_log`: `u = v = 0`; `v_j = log b_j - LSE_i(Mr_ij + u_i)`,
//!   `u_i = log a_i - LSE_j(Mr_ij + v_j)`; every 10th iteration the same error on
//!   `Σ_i exp((Mr_ij + u_i) + v_j)`. Plan `P_ij = exp((Mr_ij + u_i) + v_j)`.
//!   LSE is one pass with a running maximum: `x > m` ⇒ `s = s·exp(m - x) + 1, m = x`, else
//!   (unless `m = -inf`) `s += exp(x - m)`; result `m + log s`, and `-inf` when every term is
//!   `-inf`. So a zero-mass bin (`log 0 = -inf`) gets a `-inf` potential and zero plan
//!   entries, never NaN.
//!
//! Exactness: every exp/log is kiln's (`kiln_ir::math`), every sum runs in ascending index
//! order (`Σ_i` over rows 0..n, `Σ_j` over columns 0..m), no FMA; the transport cost sums
//! each row of `M ∘ P` (columns ascending), then the row sums (rows ascending). The
//! reference path ([`Exec::Eager`]) is the plain loop `step_one` per sample; the fast path
//! ([`Exec::Fused`], `tiled.rs` + `lanes.rs`) runs tiles of [`TILE`] samples in parallel,
//! each iteration as lane passes in which every output lane is one accumulator taking the
//! reference's terms in the reference's order: the two paths agree bit for bit (tested on
//! the goldens and on shapes off every lane/tile boundary). Outputs that are NaN are the
//! canonical NaN. Against POT the results differ by rounding only (POT sums with BLAS and
//! numpy's pairwise order): see SEMANTICS.md for the tolerances.
//!
//! Limits: a dense cost, or a separable grid cost given per axis (`grid_axes`, `grid.rs`);
//! the plan output holds `B·n·m` values; eps must be finite and > 0.

use kiln_ir::math::{exp_f32, exp_f64, log_f32, log_f64};
use kiln_ir::semantics::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};
use kiln_ir::{DType, TensorType};
use kiln_runtime::{Storage, Tensor};

use crate::error::OpError;
use crate::program::{Exec, Program, RunError};
use crate::registry::Params;
use rayon::prelude::*;

mod grid;
mod lanes;
mod tiled;

pub use kiln_codegen::ptx::SinkhornPass;
pub use lanes::{lane_pass, Isa};

/// Samples per tile on the fast path (they share each read of a cost row).
pub const TILE: usize = 8;

const OP: &str = "sinkhorn";

/// The float operations the solver needs, with kiln's exp and log.
pub trait Real:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// -inf.
    const NEG_INF: Self;
    /// kiln's exp.
    fn kexp(self) -> Self;
    /// kiln's log.
    fn klog(self) -> Self;
    /// IEEE square root.
    fn sqrt_(self) -> Self;
    /// Neither NaN nor infinite.
    fn finite(self) -> bool;
    /// Rounded from f64.
    fn from_f64(v: f64) -> Self;
    /// Widened to f64.
    fn to_f64(self) -> f64;
    /// The IEEE bits, zero-extended.
    fn bits(self) -> u64;
    /// The canonical quiet NaN if NaN, else itself (SEMANTICS.md: a computed NaN is
    /// canonical; which operand's payload an IEEE add or mul propagates is up to the
    /// compiler's operand order, so outputs are canonicalised once, at the end).
    fn canon(self) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    const NEG_INF: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn kexp(self) -> f32 {
        exp_f32(self)
    }
    #[inline(always)]
    fn klog(self) -> f32 {
        log_f32(self)
    }
    fn sqrt_(self) -> f32 {
        self.sqrt()
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
    fn canon(self) -> f32 {
        if self.is_nan() {
            f32::from_bits(CANONICAL_NAN_F32)
        } else {
            self
        }
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    const NEG_INF: f64 = f64::NEG_INFINITY;
    #[inline(always)]
    fn kexp(self) -> f64 {
        exp_f64(self)
    }
    #[inline(always)]
    fn klog(self) -> f64 {
        log_f64(self)
    }
    fn sqrt_(self) -> f64 {
        self.sqrt()
    }
    fn finite(self) -> bool {
        self.is_finite()
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn canon(self) -> f64 {
        if self.is_nan() {
            f64::from_bits(CANONICAL_NAN_F64)
        } else {
            self
        }
    }
}

/// Solver settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SinkhornOptions {
    /// Entropic regularisation (> 0, finite).
    pub eps: f64,
    /// Iteration limit (>= 1).
    pub max_iter: usize,
    /// Stop when the marginal error is below this (strict).
    pub tol: f64,
    /// Log-domain updates (POT's `sinkhorn_log`) instead of scaling (`sinkhorn_knopp`).
    pub log_domain: bool,
    /// Also return the plan.
    pub plan: bool,
    /// Also return the envelope gradients (and the plan, the gradient w.r.t. the cost).
    pub grad: bool,
    /// 0: a dense cost `[n, m]` or `[B, n, m]`. `k ≥ 1`: the histograms live on a
    /// k-dimensional grid of `g` points per axis (`n = m = g^k`) and the cost input is the
    /// per-axis table `[g, g]`, `M_pq = Σ_axis C[p_axis, q_axis]` (`grid.rs`).
    pub grid_axes: usize,
}

impl Default for SinkhornOptions {
    fn default() -> Self {
        SinkhornOptions {
            eps: 0.1,
            max_iter: 1000,
            tol: 1e-9,
            log_domain: false,
            plan: false,
            grad: false,
            grid_axes: 0,
        }
    }
}

/// One solved sample.
struct Solved<T> {
    f: Vec<T>,
    g: Vec<T>,
    grad_a: Vec<T>,
    grad_b: Vec<T>,
    cost: T,
    niter: usize,
    plan: Vec<T>,
}

/// The problem of a batch, borrowed: `cost` is `[n, m]` (shared) or `[B, n, m]`.
struct Problem<'a, T> {
    a: &'a [T],
    b: &'a [T],
    m_cost: &'a [T],
    shared: bool,
    n: usize,
    m: usize,
    eps: T,
    tol: T,
    opts: SinkhornOptions,
}

impl<T: Real> Problem<'_, T> {
    fn cost_of(&self, s: usize) -> &[T] {
        let nm = self.n * self.m;
        if self.shared {
            self.m_cost
        } else {
            &self.m_cost[s * nm..(s + 1) * nm]
        }
    }

    /// The kernel matrix (`exp(M / (-eps))`) or the log kernel (`(-M) / eps`) of a cost.
    fn kernel(&self, cost: &[T]) -> Vec<T> {
        let neg_eps = -self.eps;
        if self.opts.log_domain {
            cost.iter().map(|&c| (-c) / self.eps).collect()
        } else {
            cost.iter().map(|&c| (c / neg_eps).kexp()).collect()
        }
    }
}

/// Running log-sum-exp state: one term `x` more. Branch-free (both sides computed, then
/// selected) so that lanes of it vectorise; the same operations as `if x > mx { s =
/// s·exp(mx - x) + 1; mx = x } else if mx != -inf { s += exp(x - mx) }`: one exp per term.
#[inline(always)]
fn lse_push<T: Real>(mx: &mut T, s: &mut T, x: T) {
    let gt = x > *mx;
    let e = if gt { *mx - x } else { x - *mx }.kexp();
    let above = *s * e + T::ONE;
    let below = if *mx != T::NEG_INF { *s + e } else { *s };
    *s = if gt { above } else { below };
    *mx = if gt { x } else { *mx };
}

#[inline(always)]
fn lse_end<T: Real>(mx: T, s: T) -> T {
    if mx == T::NEG_INF {
        T::NEG_INF
    } else {
        mx + s.klog()
    }
}

/// Per-sample iteration state.
struct State<T> {
    u: Vec<T>,
    v: Vec<T>,
    /// Still iterating.
    active: bool,
    niter: usize,
    /// `1 / a_i` (standard form) or `log a_i` (log form).
    ra: Vec<T>,
    /// `log b_j` (log form).
    lb: Vec<T>,
}

impl<T: Real> State<T> {
    /// Standard form: on any `KtU_j == 0` or non-finite u or v, restore `prev` and stop.
    fn revert_if_bad(&mut self, ktu: &[T], prev: (Vec<T>, Vec<T>), ii: usize) {
        let bad = ktu.contains(&T::ZERO)
            || self.u.iter().any(|&x| !x.finite())
            || self.v.iter().any(|&x| !x.finite());
        if bad {
            (self.u, self.v) = prev;
            self.active = false;
            self.niter = ii;
        }
    }

    /// Stops when `sqrt(Σ_j (tmp_j - b_j)²) < tol` (strict), squares summed ascending.
    fn stop_if_converged(&mut self, p: &Problem<'_, T>, tmp: &[T], s: usize, ii: usize) {
        let b = &p.b[s * p.m..(s + 1) * p.m];
        let mut sq = T::ZERO;
        for (&t, &bj) in tmp.iter().zip(b) {
            let d = t - bj;
            sq = sq + d * d;
        }
        if sq.sqrt_() < p.tol {
            self.active = false;
            self.niter = ii;
        }
    }

    /// A sample still active after the last iteration ran them all.
    fn finish_iterations(&mut self, p: &Problem<'_, T>) {
        if self.active {
            self.niter = p.opts.max_iter - 1;
        }
    }

    fn new(p: &Problem<'_, T>, s: usize) -> State<T> {
        let (n, m) = (p.n, p.m);
        let a = &p.a[s * n..(s + 1) * n];
        let b = &p.b[s * m..(s + 1) * m];
        if p.opts.log_domain {
            State {
                u: vec![T::ZERO; n],
                v: vec![T::ZERO; m],
                active: true,
                niter: 0,
                ra: a.iter().map(|&x| x.klog()).collect(),
                lb: b.iter().map(|&x| x.klog()).collect(),
            }
        } else {
            let nf = T::from_f64(n as f64);
            let mf = T::from_f64(m as f64);
            State {
                u: vec![T::ONE / nf; n],
                v: vec![T::ONE / mf; m],
                active: true,
                niter: 0,
                ra: a.iter().map(|&x| T::ONE / x).collect(),
                lb: Vec::new(),
            }
        }
    }
}

/// One iteration `ii` of sample `s` against the kernel `k`: the reference loop
/// ([`Exec::Eager`]) that defines the bits. (Index loops spell out the summation order.)
#[allow(clippy::needless_range_loop)]
fn step_one<T: Real>(p: &Problem<'_, T>, k: &[T], s: usize, st: &mut State<T>, ii: usize) {
    let (n, m) = (p.n, p.m);
    if p.opts.log_domain {
        // v_j = log b_j - LSE_i(Mr_ij + u_i), rows ascending.
        let mut mx = vec![T::NEG_INF; m];
        let mut sm = vec![T::ZERO; m];
        for i in 0..n {
            let row = &k[i * m..(i + 1) * m];
            for j in 0..m {
                lse_push(&mut mx[j], &mut sm[j], row[j] + st.u[i]);
            }
        }
        for j in 0..m {
            st.v[j] = st.lb[j] - lse_end(mx[j], sm[j]);
        }
        // u_i = log a_i - LSE_j(Mr_ij + v_j), columns ascending.
        for i in 0..n {
            let row = &k[i * m..(i + 1) * m];
            let (mut mq, mut sq) = (T::NEG_INF, T::ZERO);
            for j in 0..m {
                lse_push(&mut mq, &mut sq, row[j] + st.v[j]);
            }
            st.u[i] = st.ra[i] - lse_end(mq, sq);
        }
    } else {
        // KtU_j = Σ_i K_ij u_i, rows ascending.
        let mut ktu = vec![T::ZERO; m];
        for i in 0..n {
            let row = &k[i * m..(i + 1) * m];
            for j in 0..m {
                ktu[j] = ktu[j] + row[j] * st.u[i];
            }
        }
        let prev = (st.u.clone(), st.v.clone());
        let b = &p.b[s * m..(s + 1) * m];
        for j in 0..m {
            st.v[j] = b[j] / ktu[j];
        }
        // u_i = 1 / Σ_j ((1/a_i) K_ij) v_j, columns ascending.
        for i in 0..n {
            let row = &k[i * m..(i + 1) * m];
            let mut acc = T::ZERO;
            for j in 0..m {
                acc = acc + (st.ra[i] * row[j]) * st.v[j];
            }
            st.u[i] = T::ONE / acc;
        }
        st.revert_if_bad(&ktu[..m], prev, ii);
    }
    if st.active && ii.is_multiple_of(10) {
        // Marginal error: tmp_j = Σ_i (u_i K_ij) v_j (or exp((Mr_ij + u_i) + v_j)).
        let mut tmp = vec![T::ZERO; m];
        for i in 0..n {
            let row = &k[i * m..(i + 1) * m];
            for j in 0..m {
                tmp[j] = tmp[j]
                    + if p.opts.log_domain {
                        ((row[j] + st.u[i]) + st.v[j]).kexp()
                    } else {
                        (st.u[i] * row[j]) * st.v[j]
                    };
            }
        }
        st.stop_if_converged(p, &tmp[..m], s, ii);
    }
}

/// Potentials, plan and cost of a finished sample.
fn finish<T: Real>(p: &Problem<'_, T>, k: &[T], s: usize, st: State<T>) -> Solved<T> {
    let m = p.m;
    let cost = p.cost_of(s);
    finish_with(p, st, |i, krow, crow| {
        krow.copy_from_slice(&k[i * m..(i + 1) * m]);
        crow.copy_from_slice(&cost[i * m..(i + 1) * m]);
    })
}

/// Potentials, plan and cost of a finished sample; `rows(i, krow, crow)` fills row `i` of
/// the kernel (`K_ij`, or the log kernel `Mr_ij` in the log domain) and of the cost.
fn finish_with<T: Real>(
    p: &Problem<'_, T>,
    st: State<T>,
    rows: impl Fn(usize, &mut [T], &mut [T]) + Sync,
) -> Solved<T> {
    let m = p.m;
    let mut plan = vec![T::ZERO; p.n * m];
    // Row sums first (columns ascending), then the rows ascending: a two-level fixed order
    // whose rounding grows with n + m. One running sum over the n·m products drifts
    // systematically once the terms are far below the sum (9e-4 relative in f32 at
    // 1024 x 1024, where the plan itself is within 2e-6). Rows are independent: they run
    // in parallel, the total is summed after.
    let sums: Vec<T> = plan
        .par_chunks_mut(m)
        .enumerate()
        .map(|(i, prow)| {
            let (mut krow, mut crow) = (vec![T::ZERO; m], vec![T::ZERO; m]);
            rows(i, &mut krow, &mut crow);
            let ui = st.u[i];
            let mut r = T::ZERO;
            for (((q, &kij), &cij), &vj) in prow.iter_mut().zip(&krow).zip(&crow).zip(&st.v) {
                *q = if p.opts.log_domain {
                    ((kij + ui) + vj).kexp()
                } else {
                    (ui * kij) * vj
                };
                r = r + cij * *q;
            }
            r
        })
        .collect();
    let mut total = T::ZERO;
    for r in sums {
        total = total + r;
    }
    let logs = |x: &[T]| -> Vec<T> {
        if p.opts.log_domain {
            x.to_vec()
        } else {
            x.iter().map(|&v| v.klog()).collect()
        }
    };
    let (lu, lv) = (logs(&st.u), logs(&st.v));
    // Envelope gradients: eps * (log potential - its mean), the mean summed in index order.
    // Empty bins (`-inf` potentials, log form) are left out of the mean and keep a `-inf`
    // gradient: the entropic value's one-sided derivative there (`d(P log P)/dP = log P + 1`
    // is -inf at 0). Averaging them in made every entry NaN (`-inf - -inf`).
    let centred = |l: &[T]| -> Vec<T> {
        if !p.opts.grad {
            return Vec::new();
        }
        let (mut sum, mut count) = (T::ZERO, 0usize);
        for &x in l.iter().filter(|&&x| x != T::NEG_INF) {
            sum = sum + x;
            count += 1;
        }
        let mean = if count == 0 {
            T::ZERO
        } else {
            sum / T::from_f64(count as f64)
        };
        l.iter().map(|&x| p.eps * (x - mean)).collect()
    };
    Solved {
        f: lu.iter().map(|&x| p.eps * x).collect(),
        g: lv.iter().map(|&x| p.eps * x).collect(),
        grad_a: centred(&lu),
        grad_b: centred(&lv),
        cost: total,
        niter: st.niter,
        plan: if p.opts.plan || p.opts.grad {
            plan
        } else {
            Vec::new()
        },
    }
}

/// Solves sample `s` with the reference loop.
fn solve_one<T: Real>(p: &Problem<'_, T>, k: &[T], s: usize) -> Solved<T> {
    let mut st = State::new(p, s);
    for ii in 0..p.opts.max_iter {
        if !st.active {
            break;
        }
        step_one(p, k, s, &mut st, ii);
    }
    st.finish_iterations(p);
    finish(p, k, s, st)
}

/// Every sample: the reference loop, or the lane kernels on `fast` (same bits).
fn solve<T: Real>(p: &Problem<'_, T>, batch: usize, fast: Option<Isa>) -> Vec<Solved<T>> {
    let shared_k = p.shared.then(|| p.kernel(p.m_cost));
    if let Some(isa) = fast {
        return tiled::solve(p, shared_k.as_deref(), batch, isa);
    }
    (0..batch)
        .map(|s| match &shared_k {
            Some(k) => solve_one(p, k, s),
            None => solve_one(p, &p.kernel(p.cost_of(s)), s),
        })
        .collect()
}

/// The `sinkhorn` program (see the module header).
#[derive(Clone, Debug)]
pub struct Sinkhorn {
    /// Solver settings.
    pub opts: SinkhornOptions,
}

fn bad(problem: impl Into<String>) -> RunError {
    RunError::BadInput {
        op: OP,
        problem: problem.into(),
    }
}

fn floats<T: Real>(t: &Tensor, get: fn(&Storage) -> Option<&Vec<T>>) -> Result<Vec<T>, RunError> {
    let s = t.contiguous_storage();
    get(&s)
        .cloned()
        .ok_or_else(|| bad("inputs must all have one float dtype"))
}

fn run_typed<T: Real>(
    opts: SinkhornOptions,
    exec: Exec<'_>,
    inputs: &[Tensor],
    get: fn(&Storage) -> Option<&Vec<T>>,
    wrap: fn(Vec<T>) -> Storage,
) -> Result<Vec<Tensor>, RunError> {
    let (batch, n, m, shared) = check_shapes(
        inputs[0].shape(),
        inputs[1].shape(),
        inputs[2].shape(),
        opts.grid_axes,
    )
    .map_err(bad)?;
    let a = floats(&inputs[0], get)?;
    let b = floats(&inputs[1], get)?;
    let c = floats(&inputs[2], get)?;
    let p = Problem {
        a: &a,
        b: &b,
        m_cost: &c,
        shared,
        n,
        m,
        eps: T::from_f64(opts.eps),
        tol: T::from_f64(opts.tol),
        opts,
    };
    let fast = (!exec.is_eager()).then(Isa::host);
    let solved = if opts.grid_axes > 0 {
        let g = inputs[2].shape()[0];
        let isa = fast.unwrap_or(Isa::Baseline);
        grid::solve(&p, (g, opts.grid_axes), batch, fast.is_some(), isa)
    } else {
        solve(&p, batch, fast)
    };
    let mut cost = Vec::with_capacity(batch);
    let mut f = Vec::with_capacity(batch * n);
    let mut g = Vec::with_capacity(batch * m);
    let mut it = Vec::with_capacity(batch);
    let mut plan = Vec::new();
    let (mut ga, mut gb) = (Vec::new(), Vec::new());
    let c = |v: Vec<T>| v.into_iter().map(T::canon);
    for s in solved {
        cost.push(s.cost.canon());
        f.extend(c(s.f));
        g.extend(c(s.g));
        it.push(s.niter as f64);
        plan.extend(c(s.plan));
        ga.extend(c(s.grad_a));
        gb.extend(c(s.grad_b));
    }
    let mut out = vec![
        Tensor::from_storage(wrap(cost), &[batch])?,
        Tensor::from_storage(wrap(f), &[batch, n])?,
        Tensor::from_storage(wrap(g), &[batch, m])?,
        Tensor::from_storage(Storage::F64(it), &[batch])?,
    ];
    if opts.plan || opts.grad {
        out.push(Tensor::from_storage(wrap(plan), &[batch, n, m])?);
    }
    if opts.grad {
        out.push(Tensor::from_storage(wrap(ga), &[batch, n])?);
        out.push(Tensor::from_storage(wrap(gb), &[batch, m])?);
    }
    Ok(out)
}

/// `(B, n, m, shared)` from the shapes of a, b and cost (`grid_axes` as in
/// [`SinkhornOptions`]), or why they do not fit.
fn check_shapes(
    a: &[usize],
    b: &[usize],
    c: &[usize],
    grid_axes: usize,
) -> Result<(usize, usize, usize, bool), String> {
    let (&[ba, n], &[bb, m]) = (a, b) else {
        return Err(format!(
            "a must be [B, n] and b [B, m], got {a:?} and {b:?}"
        ));
    };
    if ba != bb {
        return Err(format!(
            "a and b have different batch sizes ({ba} and {bb})"
        ));
    }
    if n == 0 || m == 0 || ba == 0 {
        return Err(format!("empty histograms: a {a:?}, b {b:?}"));
    }
    if grid_axes > 0 {
        let &[g, g2] = c else {
            return Err(format!(
                "grid_axes={grid_axes}: cost must be the per-axis table [g, g], got {c:?}"
            ));
        };
        let pts = u32::try_from(grid_axes).ok().and_then(|k| g.checked_pow(k));
        if g != g2 || pts != Some(n) || n != m {
            return Err(format!(
                "grid_axes={grid_axes}: a [B, g^{grid_axes}], b [B, g^{grid_axes}] and cost [g, g] \
                 needed, got {a:?}, {b:?}, {c:?}"
            ));
        }
        return Ok((ba, n, m, true));
    }
    let shared = match c {
        [cn, cm] if (*cn, *cm) == (n, m) => true,
        [cb, cn, cm] if (*cb, *cn, *cm) == (ba, n, m) => false,
        _ => {
            return Err(format!(
                "cost must be [{n}, {m}] or [{ba}, {n}, {m}], got {c:?}"
            ))
        }
    };
    Ok((ba, n, m, shared))
}

impl Program for Sinkhorn {
    fn name(&self) -> &'static str {
        OP
    }

    fn outputs(&self) -> Vec<&'static str> {
        let mut o = vec!["cost", "f", "g", "niter"];
        if self.opts.plan || self.opts.grad {
            o.push("plan");
        }
        if self.opts.grad {
            o.push("grad_a");
            o.push("grad_b");
        }
        o
    }

    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        if inputs.len() != 3 {
            return Err(bad(format!(
                "takes 3 inputs (a, b, cost), got {}",
                inputs.len()
            )));
        }
        let d = inputs[0].dtype();
        if inputs.iter().any(|t| t.dtype() != d) {
            return Err(bad("a, b and cost must have one dtype"));
        }
        match d {
            DType::F32 => run_typed::<f32>(
                self.opts,
                exec,
                inputs,
                |s| match s {
                    Storage::F32(v) => Some(v),
                    _ => None,
                },
                Storage::F32,
            ),
            DType::F64 => run_typed::<f64>(
                self.opts,
                exec,
                inputs,
                |s| match s {
                    Storage::F64(v) => Some(v),
                    _ => None,
                },
                Storage::F64,
            ),
            other => Err(bad(format!("takes f32 or f64, got {other}"))),
        }
    }
}

/// Registry parameters of `sinkhorn`.
pub const SINKHORN_PARAMS: &[(&str, &str)] = &[
    ("eps", "entropic regularisation, > 0 (default 0.1)"),
    ("max_iter", "iteration limit, >= 1 (default 1000)"),
    (
        "tol",
        "stop when the L2 marginal error on b is below this (default 1e-9)",
    ),
    (
        "log_domain",
        "true: POT's sinkhorn_log updates; false (default): sinkhorn_knopp",
    ),
    (
        "plan",
        "true: also output the plan [B, n, m] (default false)",
    ),
    (
        "grad",
        "true: also output the plan (d/dcost) and grad_a, grad_b (envelope gradients)",
    ),
    (
        "grid_axes",
        "k >= 1: histograms on a k-dimensional grid of g points per axis (n = m = g^k), cost = \
         the per-axis table [g, g], M_pq = sum over axes (separable kernel); 0 (default): dense",
    ),
];

fn parse<T: std::str::FromStr>(
    p: &Params<'_>,
    name: &str,
    what: &str,
) -> Result<Option<T>, OpError> {
    p.get(name)
        .map(|v| {
            v.parse::<T>()
                .map_err(|_| p.bad(name, format!("`{v}` is not {what}")))
        })
        .transpose()
}

/// Checked options from registry parameters.
pub fn options_from_params(p: &Params<'_>) -> Result<SinkhornOptions, OpError> {
    let d = SinkhornOptions::default();
    let eps = parse::<f64>(p, "eps", "a number")?.unwrap_or(d.eps);
    if !(eps.is_finite() && eps > 0.0) {
        return Err(p.bad("eps", format!("{eps} is not finite and > 0")));
    }
    let max_iter = parse::<usize>(p, "max_iter", "a non-negative integer")?.unwrap_or(d.max_iter);
    if max_iter == 0 {
        return Err(p.bad("max_iter", "must be at least 1"));
    }
    let tol = parse::<f64>(p, "tol", "a number")?.unwrap_or(d.tol);
    if tol.is_nan() || tol < 0.0 {
        return Err(p.bad("tol", format!("{tol} is not >= 0")));
    }
    let log_domain = parse::<bool>(p, "log_domain", "true or false")?.unwrap_or(false);
    let plan = parse::<bool>(p, "plan", "true or false")?.unwrap_or(false);
    let grad = parse::<bool>(p, "grad", "true or false")?.unwrap_or(false);
    let grid_axes = parse::<usize>(p, "grid_axes", "a non-negative integer")?.unwrap_or(0);
    if grid_axes > 8 {
        return Err(p.bad("grid_axes", format!("{grid_axes} axes (at most 8)")));
    }
    Ok(SinkhornOptions {
        eps,
        max_iter,
        tol,
        log_domain,
        plan,
        grad,
        grid_axes,
    })
}

/// `PROGRAMS` builder: checks the input types, parses the options.
pub fn build_sinkhorn(p: &Params<'_>, inputs: &[TensorType]) -> Result<Box<dyn Program>, OpError> {
    let opts = options_from_params(p)?;
    let bad_input = |problem: String| OpError::BadInput { op: OP, problem };
    if inputs.len() != 3 {
        return Err(bad_input(format!("takes 3 inputs, got {}", inputs.len())));
    }
    let d = inputs[0].dtype;
    if !d.is_float() || inputs.iter().any(|t| t.dtype != d) {
        return Err(bad_input("a, b and cost must all be f32 or all f64".into()));
    }
    check_shapes(
        &inputs[0].shape,
        &inputs[1].shape,
        &inputs[2].shape,
        opts.grid_axes,
    )
    .map_err(bad_input)?;
    Ok(Box::new(Sinkhorn { opts }))
}

/// The cost matrix between the points of a grid: `C[p, q] = ‖x_p - x_q‖₂^power` with grid
/// points `x` in row-major order (`power = 2`: the squared Euclidean cost, exact integers;
/// `power = 1`: IEEE square roots; otherwise `exp((power/2)·log d²)` with kiln's exp/log).
/// Returns `[N, N]` with `N = Π grid_shape`, f64.
pub fn build_cost_matrix(grid_shape: &[usize], power: f64) -> Result<Tensor, OpError> {
    let bad = |problem: String| OpError::BadInput {
        op: "build_cost_matrix",
        problem,
    };
    if grid_shape.is_empty() || grid_shape.contains(&0) {
        return Err(bad(format!("grid shape {grid_shape:?} is empty")));
    }
    if !(power.is_finite() && power > 0.0) {
        return Err(bad(format!("power {power} is not finite and > 0")));
    }
    let n: usize = grid_shape.iter().product();
    if n > 1 << 14 {
        return Err(bad(format!(
            "{n} grid points: the cost matrix would hold {} values",
            n * n
        )));
    }
    let coords = |mut k: usize| {
        let mut c = vec![0i64; grid_shape.len()];
        for ax in (0..grid_shape.len()).rev() {
            c[ax] = (k % grid_shape[ax]) as i64;
            k /= grid_shape[ax];
        }
        c
    };
    let pts: Vec<Vec<i64>> = (0..n).map(coords).collect();
    let mut out = Vec::with_capacity(n * n);
    for p in &pts {
        for q in &pts {
            let d2: i64 = p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum();
            let d2 = d2 as f64;
            out.push(if power == 2.0 {
                d2
            } else if d2 == 0.0 {
                0.0
            } else if power == 1.0 {
                d2.sqrt()
            } else {
                exp_f64((power / 2.0) * log_f64(d2))
            });
        }
    }
    Tensor::from_storage(Storage::F64(out), &[n, n]).map_err(|e| bad(e.to_string()))
}
