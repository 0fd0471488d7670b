//! Long windows: a min/max/any/all window of [`LONG_WINDOW`] or more offsets becomes chains
//! of windows of at most four reads whose count grows with `log₄ k`, so no kernel stage grows with the
//! window (issue 27: a 9999-row erosion compiled for a minute, an 8205-column one was
//! refused). A box over several axes is first split into one-axis windows (as `decompose`
//! does for min/max; here also for any/all). Every axis qualifies, the innermost and the run
//! axis included, and every target (the chain's stages are short).
//!
//! For a contiguous one-axis window `[a, b]` (`k = b − a + 1` offsets):
//! * **Forward chain** `F₁ = x`, `F₄ₛ = op(Fₛ[z], Fₛ[z+s], Fₛ[z+2s], Fₛ[z+3s])` (and one
//!   last `F₂ₛ = op(Fₛ[z], Fₛ[z+s])` for odd powers of two) under `nearest`, so
//!   `Fₛ[z] = op over [z, min(z+s−1, n−1)]` (induction: a read at `z+is > n−1` is row
//!   `n−1`, already in the first range). **Backward chain** `Bₛ` alike with offsets
//!   `[−3s, −2s, −s, 0]` (`[−s, 0]`): `Bₛ[z] = op over [max(z−s+1, 0), z]`.
//! * **Clamped set.** For `a ≤ 0 ≤ b` the rows a window reads under `nearest` are
//!   `C(y) = [max(0, y+a), min(n−1, y+b)]`. It is the op of `F_P` read at the block starts
//!   `0, P, …, b−P+1` (`P` the largest power of two `≤ b+1`) and of `B_Q` read at the block
//!   ends `−1, …, a+Q−1` (`Q ≤ −a`), all under `nearest`: a forward block starting at
//!   `o ≥ 0` clamps to `[y+o, …]` inside `C(y)` or to row `n−1`, which is in `C(y)` when
//!   `y+o > n−1`; a backward block ending at `e ≤ −1` clamps to `[…, y+e]` inside `C(y)` or
//!   to row 0, in `C(y)` when `y+e < 0`; and every row `y+d` of `C(y)` lies in the unclamped
//!   block holding `d`. When `P' ≤ min(−a, b)+1` (near-symmetric windows) the forward chain
//!   alone does it with blocks of `P'` starting at `a, a+P', …, b−P'+1`, as in `doubling`.
//! * **Borders.** `nearest`: the window's set is `C(y)`. `constant(c)`: `C(y)` plus `c`
//!   exactly when the window crosses an end, which `x` read at offsets `a` and `b` under
//!   `constant(c)` adds (otherwise those reads are rows of `C(y)`). `reflect` and `mirror`:
//!   a symmetric window `[−m, m]` with `m ≤ n` (`reflect`) or `m ≤ n−1` (`mirror`) reads
//!   exactly `C(y)`: the `j` rows past one end reflect once onto rows `[0, j−1]` (`[1, j]`),
//!   inside `C(y)` since `j ≤ m − y ≤ m + y` (a window crossing both ends holds every row).
//!   A window `[a, b]` is its core `[−m, m]` (`m = min(−a, b)`) plus the fewer than
//!   [`LONG_WINDOW`] offsets left, read as one window under the mode itself; the window's
//!   set is the union of the two. `wrap`, any `a ≤ b`: both chains are
//!   translation invariant on the cycle, so `F` links under `wrap` give cyclic blocks and
//!   blocks of `P ≤ k` starting at `a, a+P, …, b−P+1` cover the window exactly.
//!
//! Min, max (kiln's lattice: NaN absorbing and canonical, −0 < +0), and and or are
//! idempotent, commutative and associative, so reading a row twice or in another order
//! changes no bit. Sums and rank selections are never rewritten.
//!
//! Footprints that are not boxes, reflect/mirror windows with [`LONG_WINDOW`] or more
//! offsets beyond their symmetric core (origins of ±32 or more), and windows not holding
//! offset 0 under a non-wrap mode go to `footprint::runs_window` instead: their runs over
//! shared chain nodes (centred blocks under `wrap`/`reflect`/`mirror`, one-sided blocks
//! under the mode itself for `nearest`/`constant`; exactness in that file).

use crate::builder::GraphBuilder;
use crate::error::BuildError;
use crate::graph::{BinaryOp, Footprint, Graph, NodeId, NodeKind, ReduceOp};
use crate::types::Border;

use super::decompose::box_axes;
use super::footprint::{best_cut, block_starts, runs_window};

/// Fewest offsets a window needs to be rewritten into chains. Shorter windows are cheap to
/// compile whole (at most 63 reads and 62 ops in a stage) and share their reads with the
/// rest of their stage.
pub const LONG_WINDOW: usize = 64;

/// Most final reads per chain before the forward-only form gives way to two chains.
const MAX_FINALS: i64 = 4;

/// If `fp` moves along at most one axis over the contiguous, repeat-free range `[a, b]`,
/// returns `(axis, a, b)`.
pub fn contiguous_line(fp: &Footprint) -> Option<(usize, i64, i64)> {
    let rank = fp.rank();
    let moving: Vec<usize> = (0..rank)
        .filter(|&ax| fp.offsets.iter().any(|o| o[ax] != 0))
        .collect();
    let axis = match moving.as_slice() {
        [] => return None,
        [ax] => *ax,
        _ => return None,
    };
    let mut along: Vec<i64> = fp.offsets.iter().map(|o| o[axis]).collect();
    along.sort_unstable();
    along.dedup();
    let (a, b) = (along[0], along[along.len() - 1]);
    (along.len() == fp.offsets.len() && (b - a + 1) as usize == along.len()).then_some((axis, a, b))
}

/// Whether `chain` is exact for `[a, b]` on an axis of length `n` under `border` (see the
/// module docs).
pub fn chain_eligible(border: &Border, a: i64, b: i64, n: usize) -> bool {
    let n = n as i64;
    let holds_zero = a <= 0 && 0 <= b;
    let m = (-a).min(b);
    let extra = (-a - b).abs();
    match border {
        Border::Wrap => a <= b,
        Border::Nearest | Border::Constant(_) => holds_zero,
        Border::Reflect => holds_zero && extra < LONG_WINDOW as i64 && m <= n,
        Border::Mirror => holds_zero && extra < LONG_WINDOW as i64 && m < n,
    }
}

/// The largest power of two `≤ m` (`m ≥ 1`).
fn pow2_at_most(m: i64) -> i64 {
    let mut p = 1;
    while 2 * p <= m {
        p *= 2;
    }
    p
}

/// One rewriting context: the builder, the op, the rank and the axis of the window.
struct Ctx<'a> {
    b: &'a mut GraphBuilder,
    op: ReduceOp,
    rank: usize,
    axis: usize,
}

impl Ctx<'_> {
    fn window(&mut self, x: NodeId, offs: &[i64], border: Border) -> Result<NodeId, BuildError> {
        let fp = Footprint::along_axis(self.rank, self.axis, offs);
        self.b.window_reduce(x, self.op, &fp, border)
    }

    fn combine(&mut self, l: NodeId, r: NodeId) -> Result<NodeId, BuildError> {
        let op: BinaryOp = self.op.combiner();
        self.b.binary(op, l, r)
    }

    /// `x` op-reduced over links up to blocks of `p` (a power of two): links of four reads
    /// `[0, s, 2s, 3s]` (forward) or `[−3s, −2s, −s, 0]` (backward) while `4s ≤ p`, then one
    /// of two reads `[0, s]` (`[−s, 0]`) if needed, under `border`. A radix-4 link is
    /// exact as a radix-2 one (see the module docs: a read past the end is the end row,
    /// already in the block); it halves the number of stages (issue 27: kernels of many
    /// small stages compiled slowest).
    fn links(
        &mut self,
        x: NodeId,
        p: i64,
        backward: bool,
        border: Border,
    ) -> Result<NodeId, BuildError> {
        let mut cur = x;
        let mut s = 1;
        while s < p {
            let r = if 4 * s <= p { 4 } else { 2 };
            let offs: Vec<i64> = if backward {
                (0..r).rev().map(|i| -i * s).collect()
            } else {
                (0..r).map(|i| i * s).collect()
            };
            cur = self.window(cur, &offs, border)?;
            s *= r;
        }
        Ok(cur)
    }

    /// The clamped set `C(y)` of `[a, b]` (`a ≤ 0 ≤ b`) under `nearest`.
    fn clamped(&mut self, x: NodeId, a: i64, b: i64) -> Result<NodeId, BuildError> {
        let k = b - a + 1;
        let p = pow2_at_most((-a).min(b) + 1);
        if (k + p - 1) / p <= MAX_FINALS {
            let f = self.links(x, p, false, Border::Nearest)?;
            return self.window(f, &block_starts(a, b, p), Border::Nearest);
        }
        let p = pow2_at_most(b + 1);
        let f = self.links(x, p, false, Border::Nearest)?;
        let mut out = self.window(f, &block_starts(0, b, p), Border::Nearest)?;
        if a < 0 {
            let q = pow2_at_most(-a);
            let bw = self.links(x, q, true, Border::Nearest)?;
            // Block ends: the blocks [e−q+1, e] cover [a, −1].
            let ends: Vec<i64> = block_starts(a, -1, q).iter().map(|s| s + q - 1).collect();
            let left = self.window(bw, &ends, Border::Nearest)?;
            out = self.combine(out, left)?;
        }
        Ok(out)
    }

    /// The window `[a, b]` of `x` under `border` as chains; `chain_eligible` must hold.
    fn chain(&mut self, x: NodeId, a: i64, b: i64, border: Border) -> Result<NodeId, BuildError> {
        if border == Border::Wrap {
            let p = pow2_at_most(b - a + 1);
            let f = self.links(x, p, false, Border::Wrap)?;
            return self.window(f, &block_starts(a, b, p), Border::Wrap);
        }
        if matches!(border, Border::Reflect | Border::Mirror) {
            // The symmetric core as a chain, the rest (fewer than LONG_WINDOW offsets) as it is.
            let m = (-a).min(b);
            let core = self.clamped(x, -m, m)?;
            let rest: Vec<i64> = (a..-m).chain(m + 1..=b).collect();
            if rest.is_empty() {
                return Ok(core);
            }
            let rest = self.window(x, &rest, border)?;
            return self.combine(core, rest);
        }
        let mut out = self.clamped(x, a, b)?;
        if matches!(border, Border::Constant(_)) {
            for end in [a, b] {
                if end != 0 {
                    let at = Footprint::along_axis(self.rank, self.axis, &[end]).offsets;
                    let g = self.b.gather(x, &at[0], border)?;
                    out = self.combine(out, g)?;
                }
            }
        }
        Ok(out)
    }
}

/// `x` reduced by `op` over the one-axis window `offs` along `axis` under `border`: as
/// chains when it is long and contiguous and eligible, as runs over shared chain nodes
/// (`footprint::runs_window`) when it is long otherwise, else as it is.
fn one_axis(
    b: &mut GraphBuilder,
    x: NodeId,
    op: ReduceOp,
    fp: &Footprint,
    border: Border,
    extent: &[usize],
) -> Result<NodeId, BuildError> {
    if fp.offsets.len() >= LONG_WINDOW {
        let rank = fp.rank();
        if let Some((axis, lo, hi)) = contiguous_line(fp) {
            if chain_eligible(&border, lo, hi, extent[axis]) {
                return Ctx { b, op, rank, axis }.chain(x, lo, hi, border);
            }
        }
        let (axis, runs) = best_cut(fp);
        return runs_window(b, x, op, rank, axis, &runs, border);
    }
    b.window_reduce(x, op, fp, border)
}

/// Rewrites every long min/max/any/all window of `graph` (see the module docs).
pub fn long_windows(graph: &Graph) -> Graph {
    super::rebuild(graph, |b, node, map| {
        let NodeKind::WindowReduce {
            x,
            op: op @ (ReduceOp::Min | ReduceOp::Max | ReduceOp::Any | ReduceOp::All),
            footprint,
            border,
        } = &node.kind
        else {
            return None;
        };
        if footprint.offsets.len() < LONG_WINDOW {
            return None;
        }
        let extent = &node.ty.shape[2..];
        let x = map[x.index()];
        let rank = footprint.rank();
        if let Some((axis, lo, hi)) = contiguous_line(footprint) {
            if chain_eligible(border, lo, hi, extent[axis]) {
                return Some(
                    Ctx {
                        b,
                        op: *op,
                        rank,
                        axis,
                    }
                    .chain(x, lo, hi, *border),
                );
            }
        }
        let Some(axes) =
            box_axes(footprint).filter(|a| a.iter().filter(|s| s.len() > 1).count() >= 2)
        else {
            // Not a box over two or more axes: its runs over shared chain nodes.
            let (axis, runs) = best_cut(footprint);
            return Some(runs_window(b, x, *op, rank, axis, &runs, *border));
        };
        let mut cur = x;
        for ax in (0..rank).rev() {
            if axes[ax].len() == 1 && axes[ax][0] == 0 {
                continue;
            }
            let fp = Footprint::along_axis(rank, ax, &axes[ax]);
            cur = match one_axis(b, cur, *op, &fp, *border, extent) {
                Ok(id) => id,
                Err(e) => return Some(Err(e)),
            };
        }
        Some(Ok(cur))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block plans cover exactly `[lo, hi]` and never reach outside it; a block as long
    /// as the largest power of two within the range needs at most two.
    #[test]
    fn blocks_cover_the_window() {
        for lo in -40..=0i64 {
            for hi in lo..=40i64 {
                let k = hi - lo + 1;
                for p in [pow2_at_most(k), pow2_at_most((-lo).min(hi).max(0) + 1)] {
                    let starts = block_starts(lo, hi, p);
                    if p == pow2_at_most(k) {
                        assert!(starts.len() <= 2, "{lo}..{hi} p={p}: {starts:?}");
                    }
                    let mut covered = vec![false; k as usize];
                    for &s in &starts {
                        assert!(s >= lo && s + p - 1 <= hi, "{lo}..{hi} p={p}: {s}");
                        for d in s..s + p {
                            covered[(d - lo) as usize] = true;
                        }
                    }
                    assert!(covered.iter().all(|&c| c), "{lo}..{hi} p={p}");
                }
            }
        }
    }

    #[test]
    fn eligibility_follows_the_border() {
        let c = Border::Constant(crate::types::Scalar::F32(0));
        assert!(chain_eligible(&Border::Wrap, 3, 90, 5));
        assert!(chain_eligible(&Border::Nearest, -90, 0, 5));
        assert!(chain_eligible(&c, 0, 90, 5));
        assert!(!chain_eligible(&Border::Nearest, 1, 90, 5));
        assert!(chain_eligible(&Border::Reflect, -50, 49, 50));
        assert!(chain_eligible(&Border::Reflect, -50, 10, 50));
        assert!(!chain_eligible(&Border::Reflect, -100, 10, 50));
        assert!(!chain_eligible(&Border::Reflect, -51, 51, 50));
        assert!(chain_eligible(&Border::Mirror, -49, 49, 50));
        assert!(chain_eligible(&Border::Mirror, -49, 48, 50));
        assert!(!chain_eligible(&Border::Mirror, -50, 50, 50));
    }
}
