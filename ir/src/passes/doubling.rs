//! Window doubling along outer axes: a min/max window of `k = 2r+1` rows becomes a chain of
//! two-read windows (`m₂ = min(x[y], x[y+1])`, `m₄ = min(m₂[y], m₂[y+2])`, … up to `m_P`,
//! `P` the largest power of two `≤ r+1`) and one final window of `⌈k/P⌉` reads of `m_P`.
//! Reads per point drop from `k` to `2·log₂P + ⌈k/P⌉` (15 → 8 for `k = 15`); each link is a
//! stage the CPU row scheduler keeps in scratch rows.
//!
//! Only outer axes (not the innermost one) are rewritten: along the innermost axis the CPU
//! backend already shares the reduction between neighbouring columns in registers, and
//! stages there would cost a scratch round trip instead of a lane shuffle. Nor are f32, u8
//! and bool windows along the run axis (the last outer axis, the rows of a 2-D image): the
//! CPU backend computes them for blocks of rows in registers (`kiln_codegen`'s row blocks),
//! which measured faster than the chain (erosion 15x15 of a 2048² f32 image, 1 / 2
//! threads: 3.2 / 1.6 ms whole, 4.4 / 2.4 ms doubled; u8 in `benches/RESULTS.md`). Deeper
//! outer axes (the depth of a volume) and f64 are still doubled.
//!
//! # Why it is exact
//! Let `C(y) = [max(0, y−r), min(n−1, y+r)]`, the window clamped to the axis (`n` rows).
//! 1. Under `nearest`, `reflect` and `mirror`, a symmetric window `[y−r, y+r]` remaps onto
//!    exactly the rows of `C(y)`, for every `n ≥ 1`. `nearest` clamps. For the reflections,
//!    the rows beyond one end land inside `C(y)`: a window that crosses only the top end has
//!    `y + r < n−1`, so its `m = r−y` rows above row 0 reflect once onto rows `0..m` (reflect)
//!    or `1..=m` (mirror), all `≤ y + r`; a window that crosses both ends already holds every
//!    row. (The bottom end is the same by symmetry.)
//! 2. With all links reading under `nearest`, `m_a[y]` is the min over
//!    `[y, min(y+a−1, n−1)]` for every row `y`, by induction: `m_2a[y] = min(m_a[y],
//!    m_a[clamp(y+a)])`, and when `y + a > n−1` the second read is row `n−1`, already inside
//!    the first range.
//! 3. The final reads at offsets `o ∈ {−r, −r+P, …, r−P+1}` cover `[y−r, y+r]` with blocks of
//!    `P` rows. After clamping, a block that starts above row 0 becomes `[0, P−1]`, inside
//!    `C(y)` because `P−1 ≤ r ≤ y+r`; a block that starts past row `n−1` becomes row `n−1`,
//!    also inside `C(y)`. Every row of `C(y)` stays covered.
//!
//! So both forms take the min (max) of the same set of values. kiln's min and max form a
//! semilattice (NaN absorbs and is canonical, −0 < +0; see `SEMANTICS.md`), so repeats and
//! order do not change a bit.
//!
//! Under `constant(c)` the window's values are those of `C(y)` plus `c` when the window
//! crosses an end. The chain (under `nearest`) gives the first part; two more reads, `x` at
//! offsets `−r` and `+r` under `constant(c)`, give `c` exactly when the window crosses the
//! top or the bottom end, and otherwise a value already inside the window. Windows under
//! `wrap`, asymmetric windows (even sizes, non-zero origins) and sums are left alone.

use crate::builder::GraphBuilder;
use crate::graph::{BinaryOp, Footprint, Graph, NodeId, NodeKind, ReduceOp};
use crate::types::{Border, DType};

/// Shortest window (rows) worth a doubling chain. Measured with `kiln bench
/// --ab-window-doubling` on vertical erosions of a 2048² f32 image (whole / doubled time, 1
/// and 2 threads): 7 rows 1.00x / 0.94x, 9 rows 0.99x / 0.91x, 11 rows 1.35x / 1.42x, 13 rows
/// 1.12x / 1.02x, 15 rows 1.27x / 1.22x. Shorter windows read so few rows that the chain's
/// scratch stages cost what they save.
pub const MIN_DOUBLING_LEN: usize = 11;

/// If `fp` is a contiguous symmetric window `[-r, r]` (`r ≥ 1`) along one axis that is not
/// the innermost, returns `(axis, r)`.
pub fn outer_symmetric_window(fp: &Footprint) -> Option<(usize, i64)> {
    let rank = fp.rank();
    let moving: Vec<usize> = (0..rank)
        .filter(|&ax| fp.offsets.iter().any(|o| o[ax] != 0))
        .collect();
    let &[axis] = moving.as_slice() else {
        return None;
    };
    if axis + 1 == rank {
        return None;
    }
    let mut along: Vec<i64> = fp.offsets.iter().map(|o| o[axis]).collect();
    along.sort_unstable();
    along.dedup();
    let r = along[along.len() - 1];
    let contiguous = along.len() == fp.offsets.len()
        && along.len() as i64 == 2 * r + 1
        && along[0] == -r
        && along.windows(2).all(|w| w[1] == w[0] + 1);
    (contiguous && r >= 1).then_some((axis, r))
}

/// The block length `P` and the final window's offsets for a window of radius `r`.
pub fn doubling_plan(r: i64) -> (i64, Vec<i64>) {
    let mut p = 1;
    while 2 * p <= r + 1 {
        p *= 2;
    }
    let mut offsets = Vec::new();
    let mut o = -r;
    while o + p - 1 < r {
        offsets.push(o);
        o += p;
    }
    offsets.push(r - p + 1);
    offsets.dedup();
    (p, offsets)
}

/// Rewrites every eligible min/max window (see the module docs) into a doubling chain.
pub fn double_windows(graph: &Graph) -> Graph {
    super::rebuild(graph, |b, node, map| match &node.kind {
        NodeKind::WindowReduce {
            x,
            op: op @ (ReduceOp::Min | ReduceOp::Max),
            footprint,
            border:
                border @ (Border::Nearest | Border::Reflect | Border::Mirror | Border::Constant(_)),
        } if footprint.offsets.len() >= MIN_DOUBLING_LEN => {
            let (axis, r) = outer_symmetric_window(footprint)?;
            if axis + 2 == footprint.rank()
                && matches!(node.ty.dtype, DType::F32 | DType::U8 | DType::Bool)
            {
                // The run axis: left whole for the CPU backend's row blocks.
                return None;
            }
            let x = map[x.index()];
            Some(chain(b, x, *op, *border, footprint.rank(), axis, r))
        }
        _ => None,
    })
}

/// Emits the doubling chain for a window of radius `r` along `axis` of `x` (plus, under a
/// constant border, the two reads that bring in the constant).
fn chain(
    b: &mut GraphBuilder,
    x: NodeId,
    op: ReduceOp,
    border: Border,
    rank: usize,
    axis: usize,
    r: i64,
) -> Result<NodeId, crate::error::BuildError> {
    let along = |offs: &[i64]| Footprint::along_axis(rank, axis, offs);
    let (p, finals) = doubling_plan(r);
    let mut cur = x;
    let mut a = 1;
    while a < p {
        cur = b.window_reduce(cur, op, &along(&[0, a]), Border::Nearest)?;
        a *= 2;
    }
    let clipped = b.window_reduce(cur, op, &along(&finals), Border::Nearest)?;
    if !matches!(border, Border::Constant(_)) {
        return Ok(clipped);
    }
    let combine = if op == ReduceOp::Min {
        BinaryOp::Min
    } else {
        BinaryOp::Max
    };
    let mut out = clipped;
    for end in [-r, r] {
        let at = along(&[end]).offsets.remove(0);
        let g = b.gather(x, &at, border)?;
        out = b.binary(combine, out, g)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The final blocks cover `[-r, r]` exactly, never reach outside it, and `P ≤ r+1`.
    #[test]
    fn plans_cover_the_window() {
        for r in 1..40 {
            let (p, offs) = doubling_plan(r);
            assert!(p <= r + 1 && 2 * p > r + 1, "r={r} p={p}");
            let mut covered = vec![false; (2 * r + 1) as usize];
            for &o in &offs {
                assert!(o >= -r && o + p - 1 <= r, "r={r} block at {o}");
                for d in o..o + p {
                    covered[(d + r) as usize] = true;
                }
            }
            assert!(covered.iter().all(|&c| c), "r={r} offsets {offs:?}");
        }
        assert_eq!(doubling_plan(7), (8, vec![-7, 0]));
        assert_eq!(doubling_plan(4), (4, vec![-4, 0, 1]));
    }

    #[test]
    fn only_symmetric_outer_windows_qualify() {
        let col = Footprint::scipy_box(&[15, 1], &[0, 0]);
        assert_eq!(outer_symmetric_window(&col), Some((0, 7)));
        let row = Footprint::scipy_box(&[1, 15], &[0, 0]);
        assert_eq!(outer_symmetric_window(&row), None);
        let even = Footprint::scipy_box(&[8, 1], &[0, 0]);
        assert_eq!(outer_symmetric_window(&even), None);
        let shifted = Footprint::scipy_box(&[15, 1], &[1, 0]);
        assert_eq!(outer_symmetric_window(&shifted), None);
        let square = Footprint::scipy_box(&[15, 15], &[0, 0]);
        assert_eq!(outer_symmetric_window(&square), None);
    }
}
