//! Window clipping: the offsets of a min/max/any/all window reduced to those the border mode
//! can tell apart on the graph's actual shape (issue 27: a window longer than the image).
//!
//! Kernels are shape-free, graphs are not: every node has its full shape, so this is a
//! graph rewrite in the pipeline (`optimize_with`), run when a graph of known shape is
//! compiled. Each offset `o` along a spatial axis of length `n` is replaced by a canonical
//! offset `c` that reads the same value at every position `y ∈ [0, n)`, then repeated
//! offsets are dropped:
//! * `nearest`: `c = clamp(o, −(n−1), n−1)`; past those, `y + o` clamps to the same end.
//! * `constant`: `c = clamp(o, −n, n)`; `|o| ≥ n` is outside the image for every `y`.
//! * `wrap`: `o mod n` (period `n` of the remap).
//! * `reflect`: `o mod 2n` into `[−n, n)` (period `2n`); `mirror`: `o mod (2n−2)` into
//!   `[−(n−2), n)` (period `2n−2`), every offset `0` when `n = 1`; for every non-constant
//!   mode an axis of length 1 reads only element 0, so every offset becomes `0`.
//!
//! A box is clipped axis by axis: an axis whose offsets hit every residue of the remap's
//! period reads every element at every position, and becomes one contiguous range that
//! does too (so a long window stays one contiguous window for `long_windows`).
//!
//! Offsets already inside the mode's safe range (`[−n, n]`, `[−(n−1), n−1]` for `nearest`
//! and `mirror`) are kept as they are, so a window that fits the image is not touched and a
//! contiguous symmetric window stays contiguous (a full period keeps `[−n, n]`, resp.
//! `[−(n−1), n−1]`).
//!
//! # Why it is exact
//! Every border mode remaps each axis on its own (SEMANTICS.md, `semantics::remap_index`),
//! so a footprint entry with each axis's offset replaced as above reads the same element (or
//! the constant) at every output position. Min, max (kiln's lattice, NaN absorbing and
//! canonical, −0 < +0), and and or are idempotent, commutative and associative, so dropping
//! a repeated read or changing the read order leaves every bit. Sums and rank selections
//! count repeats and are never clipped.
//!
//! Limits: a window shorter than its axis is left alone (nothing to drop); making a long
//! window cheap is `long_windows`'s job.

use std::collections::BTreeSet;

use crate::graph::{Footprint, Graph, NodeKind, ReduceOp};
use crate::types::Border;

use super::decompose::box_axes;

/// The offset that reads the same element as `o` at every position of an axis of length
/// `n` under `border` (see the module docs); `o` itself when it is inside the safe range.
pub fn canonical_offset(o: i64, n: usize, border: &Border) -> i64 {
    let n = n as i64;
    if n <= 1 && !matches!(border, Border::Constant(_)) {
        return 0;
    }
    match border {
        Border::Nearest => o.clamp(-(n - 1), n - 1),
        Border::Constant(_) => o.clamp(-n, n),
        Border::Wrap if (-n..=n).contains(&o) => o,
        Border::Wrap => o.rem_euclid(n),
        Border::Reflect if (-n..=n).contains(&o) => o,
        Border::Reflect => {
            let r = o.rem_euclid(2 * n);
            if r >= n {
                r - 2 * n
            } else {
                r
            }
        }
        Border::Mirror if (-(n - 1)..=n - 1).contains(&o) => o,
        Border::Mirror => {
            let p = 2 * n - 2;
            let r = o.rem_euclid(p);
            if r >= n {
                r - p
            } else {
                r
            }
        }
    }
}

/// The period of the remap along an axis of length `n ≥ 2` under `border`, if it has one.
fn period(n: i64, border: &Border) -> Option<i64> {
    match border {
        Border::Wrap => Some(n),
        Border::Reflect => Some(2 * n),
        Border::Mirror => Some(2 * n - 2),
        Border::Nearest | Border::Constant(_) => None,
    }
}

/// One axis of a box: the canonical offsets of `set`, or, when `set` holds every residue
/// of the remap's period (so every element of the axis is read at every position), the
/// contiguous range `[−n, n]` (reflect), `[−(n−1), n−1]` (mirror) or the `n` offsets around
/// 0 (wrap), which read every element too and keep a long window contiguous.
fn clip_axis(set: &[i64], n: usize, border: &Border) -> Vec<i64> {
    let ni = n as i64;
    if ni >= 2 {
        if let Some(p) = period(ni, border) {
            let residues: BTreeSet<i64> = set.iter().map(|o| o.rem_euclid(p)).collect();
            if residues.len() as i64 == p {
                let lo = match border {
                    Border::Wrap => -((ni - 1) / 2),
                    Border::Reflect => -ni,
                    _ => -(ni - 1),
                };
                let hi = match border {
                    Border::Wrap => lo + ni - 1,
                    _ => -lo,
                };
                return (lo..=hi).collect();
            }
        }
    }
    let c: BTreeSet<i64> = set
        .iter()
        .map(|&o| canonical_offset(o, n, border))
        .collect();
    c.into_iter().collect()
}

/// The row-major product of per-axis offset sets.
fn product(axes: &[Vec<i64>]) -> Vec<Vec<i64>> {
    let mut out = vec![Vec::new()];
    for set in axes {
        out = out
            .into_iter()
            .flat_map(|p: Vec<i64>| {
                set.iter().map(move |&o| {
                    let mut q = p.clone();
                    q.push(o);
                    q
                })
            })
            .collect();
    }
    out
}

/// `fp` with every offset made canonical for the spatial extents `extent` under `border`
/// and repeats dropped (a box axis by axis, see `clip_axis`; other footprints offset by
/// offset), in row-major order, or `None` when nothing changes.
///
/// A footprint of several offsets never clips to one: kiln's min of one read is the value
/// as it is, of two or more a canonical NaN (SEMANTICS.md), so a second original offset,
/// which reads the same element, is kept.
pub fn clip_footprint(fp: &Footprint, extent: &[usize], border: &Border) -> Option<Footprint> {
    let mut offsets: Vec<Vec<i64>> = match box_axes(fp) {
        Some(axes) => {
            let per: Vec<Vec<i64>> = axes
                .iter()
                .zip(extent)
                .map(|(set, &n)| clip_axis(set, n, border))
                .collect();
            product(&per)
        }
        None => {
            let set: BTreeSet<Vec<i64>> = fp
                .offsets
                .iter()
                .map(|off| {
                    off.iter()
                        .zip(extent)
                        .map(|(&o, &n)| canonical_offset(o, n, border))
                        .collect()
                })
                .collect();
            set.into_iter().collect()
        }
    };
    // A window of two or more reads combines (a NaN comes out canonical); clipped to one
    // read it would move the NaN instead, so it keeps a second read. A one-offset window is
    // a move already (SEMANTICS.md) and stays one read.
    if offsets.len() == 1 && fp.offsets.len() >= 2 {
        if let Some(other) = fp.offsets.iter().find(|o| **o != offsets[0]) {
            offsets.push(other.clone());
        }
    }
    (offsets != fp.offsets).then_some(Footprint { offsets })
}

/// Rewrites every min/max/any/all window of `graph` whose footprint clips (see the module
/// docs) into the same window over the clipped footprint.
pub fn clip_windows(graph: &Graph) -> Graph {
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
        let extent = &node.ty.shape[2..];
        let clipped = clip_footprint(footprint, extent, border)?;
        Some(b.window_reduce(map[x.index()], *op, &clipped, *border))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantics::remap_index;
    use crate::types::Scalar;

    /// The canonical offset reads the same element as the original at every position, for
    /// every mode and every axis length up to 9, over offsets far past the axis.
    #[test]
    fn canonical_offsets_read_the_same_elements() {
        let borders = [
            Border::Nearest,
            Border::Reflect,
            Border::Mirror,
            Border::Wrap,
            Border::Constant(Scalar::F32(0)),
        ];
        for border in &borders {
            for n in 1..=9usize {
                for o in -40..=40i64 {
                    let c = canonical_offset(o, n, border);
                    assert!(c.abs() <= n as i64, "{border} n={n} o={o} -> {c}");
                    for y in 0..n as i64 {
                        assert_eq!(
                            remap_index(y + o, n, border),
                            remap_index(y + c, n, border),
                            "{border} n={n} o={o} c={c} y={y}"
                        );
                    }
                    if (-(n as i64 - 1)..n as i64).contains(&o) && n > 1 {
                        assert_eq!(c, o, "{border} n={n}: in-range offset moved");
                    }
                }
            }
        }
    }

    #[test]
    fn long_windows_clip_to_the_axis_and_short_ones_stay() {
        let fp = Footprint::scipy_box(&[9999, 1], &[0, 0]);
        let c = clip_footprint(&fp, &[1, 1], &Border::Reflect).unwrap();
        // One offset reads element 0; a second one keeps the NaN canonicalisation.
        assert_eq!(c.offsets, vec![vec![0, 0], vec![-4999, 0]]);
        let c = clip_footprint(&fp, &[5, 3], &Border::Reflect).unwrap();
        let rows: Vec<i64> = c.offsets.iter().map(|o| o[0]).collect();
        assert_eq!(rows, (-5..=5).collect::<Vec<_>>());
        let c = clip_footprint(&fp, &[5, 3], &Border::Mirror).unwrap();
        assert_eq!(c.offsets.len(), 9);
        // A full period under wrap becomes n contiguous offsets, whatever the origin.
        let shifted = Footprint::scipy_box(&[1, 200], &[0, -100]);
        let c = clip_footprint(&shifted, &[4, 150], &Border::Wrap).unwrap();
        let cols: Vec<i64> = c.offsets.iter().map(|o| o[1]).collect();
        assert_eq!(cols, (-74..=75).collect::<Vec<_>>());
        let small = Footprint::scipy_box(&[5, 5], &[0, 0]);
        assert!(clip_footprint(&small, &[5, 5], &Border::Wrap).is_none());
    }
}
