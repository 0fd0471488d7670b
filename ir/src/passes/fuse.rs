//! The fusion scheduler: decides, in one place, which nodes are computed together in one
//! kernel and which are materialised.

use crate::graph::{Graph, NodeId};

/// What kind of kernel a fused group becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// Pointwise ops, gathers, networks and window reductions, in one or more stages.
    Stencil,
    /// A scan (the group's only member).
    Scan,
    /// An axis reduction (the group's only member).
    AxisReduce,
}

/// One kernel's worth of nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FusedGroup {
    /// The kind of kernel.
    pub kind: GroupKind,
    /// The node whose value the kernel writes to memory.
    pub root: NodeId,
    /// Materialised tensors the kernel reads: graph inputs or roots of earlier groups,
    /// in the order the kernel numbers its inputs.
    pub inputs: Vec<NodeId>,
    /// Stage roots in topological order; the last is `root`. A stage is a node that is read
    /// at non-zero offsets inside the group (through a gather or a window), so it is
    /// computed once per point into a tile with a halo instead of being recomputed.
    pub stages: Vec<NodeId>,
    /// Every node computed inside the group (stages and inlined nodes), topological.
    pub members: Vec<NodeId>,
}

/// The result of fusion: groups in execution order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Kernels in an order where every group's inputs are produced before it runs.
    pub groups: Vec<FusedGroup>,
}

/// Groups the nodes of `graph` into kernels. See ARCHITECTURE.md for the rules.
pub fn fuse(graph: &Graph) -> Partition {
    let _ = graph;
    todo!("fusion scheduler")
}
