//! Graph passes. Each pass is a function `Graph -> Graph` (or `Graph -> Partition` for the
//! fusion scheduler) in a file of its own.

pub mod columns;
pub mod cse;
pub mod dce;
pub mod decompose;
pub mod fuse;
pub mod prune;

pub use columns::share_columns;
pub use cse::cse;
pub use dce::dce;
pub use decompose::decompose;
pub use fuse::{fuse, FusedGroup, GroupKind, Partition};
pub use prune::{eval_network, prune, prune_network, PrunedNetwork};

use crate::graph::Graph;

/// The optimisation pipeline every executor of fused kernels runs before [`fuse()`]:
/// `cse → dce → prune → share_columns → decompose → cse → dce`. Each pass preserves the
/// graph's bits exactly (see each pass's documentation).
pub fn optimize(graph: &Graph) -> Graph {
    optimize_traced(graph, |_, _| {})
}

/// Re-adds `kind` to `b` with its operands renumbered through `map` (old id → new id): the
/// default case of the passes that rebuild a graph node by node.
pub(crate) fn copy_node(
    b: &mut crate::builder::GraphBuilder,
    kind: &crate::graph::NodeKind,
    map: &[crate::graph::NodeId],
) -> Result<crate::graph::NodeId, crate::error::BuildError> {
    let mut k = kind.clone();
    k.map_operands(|o| map[o.index()]);
    b.add(k)
}

/// A graph pass: a new graph from an old one.
type Pass = fn(&Graph) -> Graph;

/// [`optimize`], calling `after(pass_name, graph)` with the graph after each pass (what
/// `kiln dump` prints), so the pipeline is written down once.
pub fn optimize_traced(graph: &Graph, mut after: impl FnMut(&str, &Graph)) -> Graph {
    let steps: [(&str, Pass); 7] = [
        ("cse", cse),
        ("dce", dce),
        ("prune", prune),
        ("share_columns", share_columns),
        ("decompose", decompose),
        ("cse", cse),
        ("dce", dce),
    ];
    let mut g = graph.clone();
    for (name, pass) in steps {
        g = pass(&g);
        after(name, &g);
    }
    g
}
