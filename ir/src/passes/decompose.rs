//! Window decomposition: a min/max window over a full box footprint becomes a chain of
//! one-axis windows (k₁·k₂·… reads per point become k₁+k₂+…). any/all windows would be
//! exact too, but are left whole: they are mostly NaN masks that share their loads with a
//! median network in the same stage.
//!
//! Exact, not approximate: these reductions are order-free (min/max form a semilattice under
//! kiln's rule, NaN included), and every border mode remaps each axis independently, so the
//! chain reads exactly the same set of (remapped or constant) values as the box. Under a
//! constant border a point outside the image along any axis contributes the constant in both
//! forms. Sums are never decomposed: their order is fixed.

use std::collections::BTreeSet;

use crate::graph::{Footprint, Graph, NodeKind, ReduceOp};

/// Smallest footprint (number of offsets) worth decomposing. Below it, the one-stage kernel
/// that shares its loads with the rest of the group is faster than a two-stage kernel with
/// a scratch tile (measured with `kiln demo`: a decomposed 3x3 NaN mask made the fused
/// kornia median 6x slower).
pub const MIN_DECOMPOSE_SIZE: usize = 25;

/// If `fp` is a full Cartesian product of per-axis offset sets, returns those sets.
pub fn box_axes(fp: &Footprint) -> Option<Vec<Vec<i64>>> {
    let rank = fp.rank();
    let mut axes: Vec<BTreeSet<i64>> = vec![BTreeSet::new(); rank];
    let mut unique = BTreeSet::new();
    for off in &fp.offsets {
        for (ax, &o) in off.iter().enumerate() {
            axes[ax].insert(o);
        }
        unique.insert(off.clone());
    }
    let product: usize = axes.iter().map(BTreeSet::len).product();
    (product == unique.len()).then(|| axes.into_iter().map(|s| s.into_iter().collect()).collect())
}

/// Rewrites every decomposable window reduction of `graph` into a chain of one-axis windows,
/// innermost axis first.
pub fn decompose(graph: &Graph) -> Graph {
    super::rebuild(graph, |b, node, map| {
        let NodeKind::WindowReduce {
            x,
            op,
            footprint,
            border,
        } = &node.kind
        else {
            return None;
        };
        if !matches!(op, ReduceOp::Min | ReduceOp::Max)
            || footprint.offsets.len() < MIN_DECOMPOSE_SIZE
        {
            return None;
        }
        let axes = box_axes(footprint).filter(|a| a.iter().filter(|s| s.len() > 1).count() >= 2)?;
        let rank = axes.len();
        let mut cur = map[x.index()];
        for ax in (0..rank).rev() {
            if axes[ax].len() == 1 && axes[ax][0] == 0 {
                continue;
            }
            let fp = Footprint::along_axis(rank, ax, &axes[ax]);
            cur = match b.window_reduce(cur, *op, &fp, *border) {
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
    use crate::builder::GraphBuilder;
    use crate::types::{Border, DType};

    #[test]
    fn box_is_detected_and_masks_are_not() {
        let fp = Footprint::scipy_box(&[3, 5], &[0, 0]);
        assert_eq!(
            box_axes(&fp).unwrap(),
            vec![vec![-1, 0, 1], vec![-2, -1, 0, 1, 2]]
        );
        let cross = Footprint::scipy_masked(
            &[3, 3],
            &[false, true, false, true, true, true, false, true, false],
            &[0, 0],
        );
        assert!(box_axes(&cross).is_none());
    }

    #[test]
    fn box_min_becomes_two_one_axis_windows_and_sums_stay() {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 1, 8, 8]).unwrap();
        let fp = Footprint::scipy_box(&[5, 5], &[0, 0]);
        let m = b
            .window_reduce(x, ReduceOp::Min, &fp, Border::Reflect)
            .unwrap();
        let s = b
            .window_reduce(x, ReduceOp::Sum, &fp, Border::Reflect)
            .unwrap();
        let nan = b.unary(crate::graph::UnaryOp::IsNan, x).unwrap();
        let any = b
            .window_reduce(nan, ReduceOp::Any, &fp, Border::Reflect)
            .unwrap();
        let small = Footprint::scipy_box(&[3, 3], &[0, 0]);
        let m3 = b
            .window_reduce(x, ReduceOp::Max, &small, Border::Reflect)
            .unwrap();
        let g = b.finish(&[m, s, any, m3]).unwrap();
        let d = decompose(&g);
        let windows: Vec<usize> = d
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                NodeKind::WindowReduce { footprint, .. } => Some(footprint.offsets.len()),
                _ => None,
            })
            .collect();
        assert_eq!(windows, vec![5, 5, 25, 25, 9]);
    }
}
