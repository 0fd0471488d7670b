//! Graph passes. Each pass is a function `Graph -> Graph` (or `Graph -> Partition` for the
//! fusion scheduler) in a file of its own.

pub mod cse;
pub mod dce;
pub mod decompose;
pub mod fuse;
pub mod prune;

pub use cse::cse;
pub use dce::dce;
pub use decompose::decompose;
pub use fuse::{fuse, FusedGroup, GroupKind, Partition};
pub use prune::{eval_network, prune, prune_network, PrunedNetwork};

use crate::graph::Graph;

/// The optimisation pipeline every executor of fused kernels runs before [`fuse()`]:
/// `cse → dce → prune → decompose → cse → dce`. Each pass preserves the graph's bits
/// exactly (see each pass's documentation).
pub fn optimize(graph: &Graph) -> Graph {
    let g = prune(&dce(&cse(graph)));
    dce(&cse(&decompose(&g)))
}
