//! Comparator networks: Batcher's odd-even merge sort for any `n`, and selection networks
//! pruned to one output wire. They live in [`kiln_ir::network`] (the graph passes use them
//! too) and are re-exported here for the operators and their users.
//!
//! A comparator `(i, j)` with `i < j` puts the minimum on wire `i` and the maximum on wire `j`
//! (the convention of [`kiln_ir::NodeKind::Network`]).

pub use kiln_ir::network::{
    apply, batcher_sort, prune_to_output, selection_network, sorted_columns_selection, Network,
};
