//! Column sharing for box rank selections: a comparator network that selects the `rank`-th
//! smallest of `x` read over a full `ky x kx` box (the median's form, see
//! [`crate::network::selection_network`]) becomes "sort each column, then merge":
//!
//! - for each column `dx` (ascending) and each rank `r` a later level uses, a network over
//!   the column's gathers `gather(x, (.., dy, dx), border)` (`dy` ascending) with the pairs
//!   of [`batcher_sort`]`(ky)` and output `r` (several kept wires of one column are several
//!   nodes with equal pairs; the code generator shares their comparators). The column
//!   networks read the gathers of `x` directly, so a fused kernel stays one stage;
//! - with [`MIN_PAIRED_COLUMNS`] or more columns, the columns `(2g, 2g + 1)` are first
//!   merged in pairs: per rank the final merge uses, a network over the `2 ky` sorted values
//!   of the two columns with the pairs of [`merge_network`]`(ky, ky)` (Batcher's merge);
//!   an odd last column stays alone. The groups are then the sorted pairs and that column;
//! - one merge network over the groups' values (group by group, ascending, compacted to the
//!   wires the merge reads, in that order) with the pairs of
//!   [`sorted_groups_selection`] over the group sizes, or, without pairs,
//!   [`sorted_columns_selection`]`(ky, kx, rank)`. When the paired derivation is refused
//!   (its limits), the unpaired form is used.
//!
//! Column `dx`'s sorted values are then the same program at every `dx`, shifted, and so is
//! the merge of pair `(dx, dx + 1)` at every `dx`: a backend computes each once per point
//! and shares it between horizontally neighbouring output points. The final merge is much
//! smaller than a full selection network (3x3 median: 12 min/max operations instead of 40;
//! 5x5: 44 over two sorted pairs and a column, after a 26-operation pair merge, against 94
//! over five columns and 202 for the pruned Batcher selector).
//!
//! Exact, bit for bit:
//! - NaN-free inputs: both forms compute the `rank`-th smallest of the same multiset of values
//!   in kiln's total order (`-0 < +0`; equal values have equal bits), so the bits agree;
//! - with a NaN: a network's value is the canonical NaN iff some input in its dependency cone
//!   is NaN and a comparator wrote its output wire, else the moved input (see
//!   [`mod@crate::passes::prune`]). The original selector's cone is every input and its output
//!   is written. Every column network's cone is its whole column (an output of a sorting network
//!   depends on every input) and its output wire is written (`ky >= 2`). A pair merge value
//!   is only used when its pruned cone reaches both of its columns and a comparator writes its
//!   output wire, so it is the canonical NaN iff a gather of the two columns is; the final
//!   merge is only used when its cone reaches a wire of every group and a comparator writes
//!   its output wire. So the rewritten node is the canonical NaN exactly when the original
//!   is.
//!
//! Only recognised by construction: the network must be exactly the canonical selector
//! (`pairs == selection_network(n, output).pairs`, `width == n`), every input a gather of
//! one source under one border, and the offsets a full box over the last two spatial axes
//! (all other offsets equal) with at least two rows and two columns. Anything else is copied.

use std::collections::{BTreeSet, HashMap};

use crate::builder::GraphBuilder;
use crate::graph::{Graph, NodeId, NodeKind};
use crate::network::{
    batcher_sort, merge_network, prune_to_output, selection_network, sorted_columns_selection,
    sorted_groups_selection, Network,
};
use crate::types::Border;

/// Smallest window (values) rewritten: a 2x2 box is the smallest with two rows and columns.
pub const MIN_SHARE_SIZE: usize = 4;

/// Fewest columns for which neighbouring columns are merged in pairs first (see the module
/// docs): with four or more, the merge of columns `(c, c + 1)` is the same program at every
/// even `c`, shifted, so a backend computes it once per point and shares it.
pub const MIN_PAIRED_COLUMNS: usize = 4;

/// A recognised box rank selection.
struct Plan {
    /// `cells[c][r]`: the (old) gather node at column `c`, row `r` (both ascending offsets).
    cells: Vec<Vec<NodeId>>,
    /// Rows of the box.
    ky: usize,
    /// Columns `0..2 * paired` are merged in pairs `(2g, 2g + 1)` (groups `0..paired`);
    /// every later column is a group of its own.
    paired: usize,
    /// The merge network over the groups' wires (group `g`'s sorted values on consecutive
    /// wires, groups in column order).
    merge: Network,
}

impl Plan {
    /// Group sizes, in wire order.
    fn sizes(ky: usize, kx: usize, paired: usize) -> Vec<usize> {
        let mut sizes = vec![2 * ky; paired];
        sizes.resize(kx - paired, ky);
        sizes
    }
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
    let cells: Vec<Vec<NodeId>> = dxs
        .iter()
        .map(|&dx| dys.iter().map(|&dy| cells[&(dy, dx)]).collect())
        .collect();
    // Column pairs when there are enough columns and their merge is derivable; else none.
    let paired_merge = (kx >= MIN_PAIRED_COLUMNS)
        .then(|| sorted_groups_selection(&Plan::sizes(ky, kx, kx / 2), output as usize))
        .flatten();
    let (paired, merge) = match paired_merge {
        Some(merge) => (kx / 2, merge),
        None => (0, sorted_columns_selection(ky, kx, output as usize)?),
    };
    let plan = Plan {
        cells,
        ky,
        paired,
        merge,
    };
    plan.nan_exact().then_some(plan)
}

impl Plan {
    /// Whether the rewritten node is the canonical NaN exactly when the selector is (see the
    /// module docs): the merge writes its output wire and reaches every group, and every
    /// pair merge value it reads writes its output wire and reaches both columns.
    fn nan_exact(&self) -> bool {
        let used = merge_wires(&self.merge);
        let sizes = Plan::sizes(self.ky, self.cells.len(), self.paired);
        let written = |net: &[(u32, u32)], out: u32| net.iter().any(|&(i, j)| i == out || j == out);
        if !written(&self.merge.pairs, self.merge.output) {
            return false;
        }
        let (pair_net, rank_wire) = merge_network(self.ky, self.ky);
        let mut start = 0;
        for (g, &size) in sizes.iter().enumerate() {
            let ranks: Vec<usize> = (0..size).filter(|&r| used[start + r]).collect();
            start += size;
            if ranks.is_empty() {
                return false;
            }
            if g < self.paired {
                for r in ranks {
                    let out = rank_wire[r];
                    let cone = merge_wires(&Network {
                        width: 2 * self.ky as u32,
                        pairs: prune_to_output(&pair_net, out, 2 * self.ky as u32),
                        output: out,
                    });
                    let reaches = |c: usize| (c * self.ky..(c + 1) * self.ky).any(|w| cone[w]);
                    if !written(&pair_net, out) || !reaches(0) || !reaches(1) {
                        return false;
                    }
                }
            }
        }
        true
    }
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

/// Emits the column networks, the pair merges and the merge network of `plan`; `map` gives
/// the new ids of the old gathers. Returns the merge node.
fn emit(
    b: &mut GraphBuilder,
    plan: &Plan,
    map: &[NodeId],
) -> Result<NodeId, crate::error::BuildError> {
    let ky = plan.ky;
    let sort = batcher_sort(ky);
    let (pair_net, rank_wire) = merge_network(ky, ky);
    let used = merge_wires(&plan.merge);
    let mut new_wire = vec![u32::MAX; used.len()];
    let mut merge_inputs = Vec::new();
    let column_sort = |b: &mut GraphBuilder, c: usize, r: usize| {
        let gathers: Vec<NodeId> = plan.cells[c].iter().map(|g| map[g.index()]).collect();
        b.network(&gathers, ky as u32, &sort, r as u32)
    };
    let mut start = 0;
    for (g, size) in Plan::sizes(ky, plan.cells.len(), plan.paired)
        .into_iter()
        .enumerate()
    {
        // The pair merge reads every rank of both columns (its pruned comparators decide
        // which it uses; the others are dead and dropped).
        let pair_inputs = if g < plan.paired {
            let mut v = Vec::with_capacity(2 * ky);
            for c in [2 * g, 2 * g + 1] {
                for r in 0..ky {
                    v.push(column_sort(b, c, r)?);
                }
            }
            v
        } else {
            Vec::new()
        };
        for r in 0..size {
            if !used[start + r] {
                continue;
            }
            new_wire[start + r] = merge_inputs.len() as u32;
            merge_inputs.push(if g < plan.paired {
                b.network(&pair_inputs, 2 * ky as u32, &pair_net, rank_wire[r])?
            } else {
                column_sort(b, plan.paired + g, r)?
            });
        }
        start += size;
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
