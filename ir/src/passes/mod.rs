//! Graph passes. Each pass is a function `Graph -> Graph` (or `Graph -> Partition` for the
//! fusion scheduler) in a file of its own.

pub mod clip;
pub mod columns;
pub mod cse;
pub mod dce;
pub mod decompose;
pub mod doubling;
pub mod footprint;
pub mod fuse;
pub mod long;
pub mod prune;

pub use clip::clip_windows;
pub use columns::share_columns;
pub use cse::cse;
pub use dce::dce;
pub use decompose::decompose;
pub use doubling::double_windows;
pub use fuse::{fuse, FusedGroup, GroupKind, Partition};
pub use long::long_windows;
pub use prune::{eval_network, prune, prune_network, PrunedNetwork};

use crate::graph::Graph;

/// How an executor keeps the stages of a fused kernel, which decides whether a pass that
/// adds stages pays for itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageStorage {
    /// Stage rows are computed once into a cache-resident ring of scratch rows and read from
    /// there (the CPU backend): an extra cheap stage costs little.
    ScratchRows,
    /// A stage read at an outer-axis offset becomes a launch of its own through global
    /// scratch (the PTX backend's `Staged` schedule): every extra stage is a memory pass.
    DevicePasses,
}

/// Switches of the passes that bound a window's code by the image and by `log₂` of its
/// length (issue 27); both on by default, off only for A/B runs and the tests that check
/// they change no bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowBounds {
    /// Run [`clip_windows`]: offsets the border cannot tell apart on the image dropped.
    pub clip: bool,
    /// Run [`long_windows`]: windows of [`long::LONG_WINDOW`] offsets or more as chains.
    pub chains: bool,
}

impl Default for WindowBounds {
    fn default() -> Self {
        WindowBounds {
            clip: true,
            chains: true,
        }
    }
}

/// The optimisation pipeline of the CPU engine: [`optimize_for`] with
/// [`StageStorage::ScratchRows`].
pub fn optimize(graph: &Graph) -> Graph {
    optimize_for(graph, StageStorage::ScratchRows)
}

/// The optimisation pipeline every executor of fused kernels runs before [`fuse()`]:
/// `cse → dce → prune → share_columns → clip_windows → decompose → long_windows →
/// [double_windows] → cse → dce`, where
/// `double_windows` runs only for [`StageStorage::ScratchRows`] (on a GPU its chain of stages
/// would cost a memory pass per link). Each pass preserves the graph's bits exactly (see each
/// pass's documentation).
pub fn optimize_for(graph: &Graph, storage: StageStorage) -> Graph {
    optimize_traced(graph, storage, |_, _| {})
}

/// [`optimize_for`] with the window-bounding passes switched by `bounds`: `clip_windows`
/// runs before `decompose`, `long_windows` after it (both on by default).
pub fn optimize_with(graph: &Graph, storage: StageStorage, bounds: WindowBounds) -> Graph {
    optimize_traced_with(graph, storage, bounds, |_, _| {})
}

/// Re-adds `node` to `b` with its operands renumbered through `map` (old id → new id): the
/// default case of the passes that rebuild a graph node by node. Inputs and constants are
/// re-added through their own builder calls.
pub(crate) fn copy_node(
    b: &mut crate::builder::GraphBuilder,
    node: &crate::graph::Node,
    map: &[crate::graph::NodeId],
) -> Result<crate::graph::NodeId, crate::error::BuildError> {
    use crate::graph::NodeKind;
    match &node.kind {
        NodeKind::Input { .. } => b.input(node.ty.dtype, &node.ty.shape),
        NodeKind::Constant { value } => b.constant(*value, &node.ty.shape),
        kind => {
            let mut k = kind.clone();
            k.map_operands(|o| map[o.index()]);
            b.add(k)
        }
    }
}

/// Rebuilds `graph` node by node: `rewrite(builder, node, map)` adds a replacement for
/// `node` (operands renumbered through `map`, old id → new id) and returns its id, or
/// returns `None` to have the node copied as it is. Outputs keep their order. `graph` must
/// be valid, and every replacement valid for it.
pub(crate) fn rebuild(
    graph: &Graph,
    mut rewrite: impl FnMut(
        &mut crate::builder::GraphBuilder,
        &crate::graph::Node,
        &[crate::graph::NodeId],
    ) -> Option<Result<crate::graph::NodeId, crate::error::BuildError>>,
) -> Graph {
    let mut b = crate::builder::GraphBuilder::new();
    let mut map = Vec::with_capacity(graph.nodes.len());
    for node in &graph.nodes {
        let id = rewrite(&mut b, node, &map).unwrap_or_else(|| copy_node(&mut b, node, &map));
        map.push(id.expect("a node of a valid graph stays valid when rebuilt"));
    }
    let outputs: Vec<_> = graph.outputs.iter().map(|o| map[o.index()]).collect();
    b.finish(&outputs).expect("outputs exist")
}

/// A graph pass: a new graph from an old one.
type Pass = fn(&Graph) -> Graph;

/// [`optimize_for`], calling `after(pass_name, graph)` with the graph after each pass (what
/// `kiln dump` prints), so the pipeline is written down once.
pub fn optimize_traced(
    graph: &Graph,
    storage: StageStorage,
    after: impl FnMut(&str, &Graph),
) -> Graph {
    optimize_traced_with(graph, storage, WindowBounds::default(), after)
}

/// [`optimize_traced`] with the window-bounding passes switched by `bounds`.
pub fn optimize_traced_with(
    graph: &Graph,
    storage: StageStorage,
    bounds: WindowBounds,
    mut after: impl FnMut(&str, &Graph),
) -> Graph {
    let mut steps: Vec<(&str, Pass)> = vec![
        ("cse", cse),
        ("dce", dce),
        ("prune", prune),
        ("share_columns", share_columns),
    ];
    if bounds.clip {
        steps.push(("clip_windows", clip_windows));
    }
    steps.push(("decompose", decompose));
    if bounds.chains {
        steps.push(("long_windows", long_windows));
    }
    if storage == StageStorage::ScratchRows {
        steps.push(("double_windows", double_windows));
    }
    steps.extend([("cse", cse as Pass), ("dce", dce)]);
    let mut g = graph.clone();
    for (name, pass) in steps {
        g = pass(&g);
        after(name, &g);
    }
    g
}
