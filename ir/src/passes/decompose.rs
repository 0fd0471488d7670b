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

use crate::builder::GraphBuilder;
use crate::graph::{Footprint, Graph, NodeId, NodeKind, ReduceOp};

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
    let mut b = GraphBuilder::new();
    let mut map: Vec<NodeId> = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let id = match &node.kind {
            NodeKind::WindowReduce {
                x,
                op,
                footprint,
                border,
            } if matches!(op, ReduceOp::Min | ReduceOp::Max)
                && footprint.offsets.len() >= MIN_DECOMPOSE_SIZE =>
            {
                match box_axes(footprint).filter(|a| a.iter().filter(|s| s.len() > 1).count() >= 2)
                {
                    Some(axes) => {
                        let mut cur = map[x.index()];
                        let rank = axes.len();
                        let mut result = Ok(cur);
                        for ax in (0..rank).rev() {
                            if axes[ax].len() == 1 && axes[ax][0] == 0 {
                                continue;
                            }
                            let offsets = axes[ax]
                                .iter()
                                .map(|&o| {
                                    let mut v = vec![0; rank];
                                    v[ax] = o;
                                    v
                                })
                                .collect();
                            result = b.window_reduce(cur, *op, &Footprint { offsets }, *border);
                            match result {
                                Ok(id) => cur = id,
                                Err(_) => break,
                            }
                        }
                        result
                    }
                    None => super::copy_node(&mut b, node, &map),
                }
            }
            _ => super::copy_node(&mut b, node, &map),
        };
        map.push(id.expect("a node of a valid graph stays valid when rebuilt"));
    }
    let outputs: Vec<NodeId> = graph.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(&outputs).expect("outputs exist")
}

#[cfg(test)]
mod tests {
    use super::*;
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
