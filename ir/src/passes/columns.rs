//! Column sharing for box rank selections: a comparator network that selects the `rank`-th
//! smallest of `x` read over a full `ky x kx` box (the median's form, see
//! [`crate::network::selection_network`]) becomes "sort each column, then merge":
//!
//! - for each column `dx` (ascending) and each rank `r` the merge uses, a network over the
//!   column's gathers `gather(x, (.., dy, dx), border)` (`dy` ascending) with the pairs of
//!   [`batcher_sort`]`(ky)` and output `r` (several kept wires of one column are several
//!   nodes with equal pairs; the code generator shares their comparators). The column
//!   networks read the gathers of `x` directly, so a fused kernel stays one stage;
//! - one merge network over those column values (wire `c * ky + r`, compacted to the wires
//!   the merge reads, in that order) with the pairs of
//!   [`sorted_columns_selection`]`(ky, kx, rank)`.
//!
//! Column `dx`'s sorted values are then the same program at every `dx`, shifted, which a
//! backend can share between horizontally neighbouring output points; and the merge is much
//! smaller than a full selection network (3x3 median: 12 min/max operations instead of 40).
//!
//! Exact, bit for bit:
//! - NaN-free inputs: both forms compute the `rank`-th smallest of the same multiset of values
//!   in kiln's total order (`-0 < +0`; equal values have equal bits), so the bits agree;
//! - with a NaN: a network's value is the canonical NaN iff some input in its dependency cone
//!   is NaN and a comparator wrote its output wire, else the moved input (see
//!   [`mod@crate::passes::prune`]). The original selector's cone is every input and its output
//!   is written. Every column network's cone is its whole column (an output of a sorting network
//!   depends on every input) and its output wire is written (`ky >= 2`); the merge network is
//!   only used when its cone reaches a wire of every column and a comparator writes its output
//!   wire. So the rewritten node is the canonical NaN exactly when the original is.
//!
//! Only recognised by construction: the network must be exactly the canonical selector
//! (`pairs == selection_network(n, output).pairs`, `width == n`), every input a gather of
//! one source under one border, and the offsets a full box over the last two spatial axes
//! (all other offsets equal) with at least two rows and two columns. Anything else is copied.

use std::collections::{BTreeSet, HashMap};

use crate::builder::GraphBuilder;
use crate::graph::{Graph, NodeId, NodeKind};
use crate::network::{batcher_sort, selection_network, sorted_columns_selection, Network};
use crate::types::Border;

/// Smallest window (values) rewritten: a 2x2 box is the smallest with two rows and columns.
pub const MIN_SHARE_SIZE: usize = 4;

/// A recognised box rank selection.
struct Plan {
    /// `cells[c][r]`: the (old) gather node at column `c`, row `r` (both ascending offsets).
    cells: Vec<Vec<NodeId>>,
    /// The merge network on `ky * kx` wires.
    merge: Network,
    /// Rows of the box.
    ky: usize,
}

/// Recognises a canonical selector over a full box of gathers (see the module docs).
fn plan(
    graph: &Graph,
    inputs: &[NodeId],
    width: u32,
    pairs: &[(u32, u32)],
    output: u32,
) -> Option<Plan> {
    let n = inputs.len();
    if n < MIN_SHARE_SIZE || width as usize != n || output as usize >= n {
        return None;
    }
    let mut source: Option<(NodeId, &Border)> = None;
    let mut prefix: Option<&[i64]> = None;
    let mut cells: HashMap<(i64, i64), NodeId> = HashMap::with_capacity(n);
    let (mut dys, mut dxs) = (BTreeSet::new(), BTreeSet::new());
    for &id in inputs {
        let NodeKind::Gather { x, offset, border } = &graph.node(id).kind else {
            return None;
        };
        let rank = offset.len();
        if rank < 2 {
            return None;
        }
        match source {
            None => source = Some((*x, border)),
            Some((sx, sb)) if sx == *x && sb == border => {}
            Some(_) => return None,
        }
        let (outer, last) = offset.split_at(rank - 2);
        match prefix {
            None => prefix = Some(outer),
            Some(p) if p == outer => {}
            Some(_) => return None,
        }
        let (dy, dx) = (last[0], last[1]);
        if cells.insert((dy, dx), id).is_some() {
            return None;
        }
        dys.insert(dy);
        dxs.insert(dx);
    }
    let (ky, kx) = (dys.len(), dxs.len());
    // n distinct offsets inside a ky x kx product: the full box.
    if ky < 2 || kx < 2 || ky * kx != n {
        return None;
    }
    if selection_network(n, output as usize)?.pairs != pairs {
        return None;
    }
    let merge = sorted_columns_selection(ky, kx, output as usize)?;
    let used = merge_wires(&merge);
    let written = merge
        .pairs
        .iter()
        .any(|&(i, j)| i == merge.output || j == merge.output);
    if !written || (0..kx).any(|c| !(0..ky).any(|r| used[c * ky + r])) {
        return None;
    }
    let cells = dxs
        .iter()
        .map(|&dx| dys.iter().map(|&dy| cells[&(dy, dx)]).collect())
        .collect();
    Some(Plan { cells, merge, ky })
}

/// The wires a (pruned) merge network reads: those touched by a pair, and the output.
fn merge_wires(merge: &Network) -> Vec<bool> {
    let mut used = vec![false; merge.width as usize];
    used[merge.output as usize] = true;
    for &(i, j) in &merge.pairs {
        used[i as usize] = true;
        used[j as usize] = true;
    }
    used
}

/// Emits the column networks and the merge network of `plan`; `map` gives the new ids of
/// the old gathers. Returns the merge node.
fn emit(
    b: &mut GraphBuilder,
    plan: &Plan,
    map: &[NodeId],
) -> Result<NodeId, crate::error::BuildError> {
    let ky = plan.ky;
    let sort = batcher_sort(ky);
    let used = merge_wires(&plan.merge);
    let mut new_wire = vec![u32::MAX; used.len()];
    let mut merge_inputs = Vec::new();
    for (c, column) in plan.cells.iter().enumerate() {
        let gathers: Vec<NodeId> = column.iter().map(|g| map[g.index()]).collect();
        for r in 0..ky {
            if used[c * ky + r] {
                new_wire[c * ky + r] = merge_inputs.len() as u32;
                merge_inputs.push(b.network(&gathers, ky as u32, &sort, r as u32)?);
            }
        }
    }
    let pairs: Vec<(u32, u32)> = plan
        .merge
        .pairs
        .iter()
        .map(|&(i, j)| (new_wire[i as usize], new_wire[j as usize]))
        .collect();
    b.network(
        &merge_inputs,
        merge_inputs.len() as u32,
        &pairs,
        new_wire[plan.merge.output as usize],
    )
}

/// Rewrites every canonical box rank selection of `graph` into column sorts and a merge (see
/// the module docs); every other node is copied. Node ids change (the column networks are new
/// nodes); outputs keep their order. `graph` must be valid.
pub fn share_columns(graph: &Graph) -> Graph {
    super::rebuild(graph, |b, node, map| match &node.kind {
        NodeKind::Network {
            inputs,
            width,
            pairs,
            output,
        } => plan(graph, inputs, *width, pairs, *output).map(|p| emit(b, &p, map)),
        _ => None,
    })
}
