//! The fusion scheduler: decides, in one place, which nodes are computed together in one
//! kernel and which are materialised.

use crate::graph::{Graph, NodeId, NodeKind};

/// What kind of kernel a fused group becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// Pointwise ops, gathers, networks and window reductions, in one or more stages.
    Stencil,
    /// A scan (the group's only member).
    Scan,
    /// An axis reduction (the group's only member).
    AxisReduce,
    /// A line recurrence (the group's only member).
    Line,
    /// A registered extern line function (the group's only member).
    Extern,
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

/// Largest number of nodes in a pointwise tree that is inlined (recomputed at every offset it
/// is read at) instead of being made a stage.
pub const MAX_INLINE_TREE: usize = 16;

/// Groups the nodes of `graph` into kernels by the rules in ARCHITECTURE.md ("Fusion rules").
///
/// - Groups come in increasing order of their root ids (a topological order, so every group's
///   inputs are produced before it runs).
/// - A node is materialised (a group root) when it is a graph output, a scan or axis
///   reduction, an operand of one, or used by more than one group. Other nodes join the group
///   of their users. Graph `Input` nodes belong to no group; a graph output that is an
///   `Input` node gets no group either (the executor copies the input).
/// - Constants are inlined: a constant is a member of every stencil group that reads it. A
///   constant gets its own group only when it is a graph output or the operand of a scan or
///   axis reduction.
/// - `inputs` are the materialised tensors the group reads (graph inputs and other groups'
///   roots), in first-use order over the members.
/// - `stages` are the members read at a non-zero offset (by a gather, or a window whose
///   footprint has a non-zero offset) plus the root, in topological order, except for a member
///   that is a cheap pointwise tree: it and the members it depends on (stopping at group
///   inputs and stages) are all pointwise kinds and number at most [`MAX_INLINE_TREE`]. Such
///   a tree is inlined with its loads shifted. A gather read at zero offset is a plain load.
/// - Scan, axis-reduction, line and extern groups have exactly one member, the root, which is
///   also the only stage; their operand is always materialised.
/// - Nodes no output depends on are not scheduled (run [`crate::passes::dce::dce`] first).
///
/// `graph` must be valid (as built by [`crate::GraphBuilder`]).
pub fn fuse(graph: &Graph) -> Partition {
    let n = graph.nodes.len();
    let users = graph.users();
    let mut live = vec![false; n];
    let mut is_output = vec![false; n];
    for o in &graph.outputs {
        live[o.index()] = true;
        is_output[o.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for op in graph.nodes[i].kind.operands() {
                live[op.index()] = true;
            }
        }
    }
    let is_reduction = |i: usize| {
        matches!(
            graph.nodes[i].kind,
            NodeKind::Scan { .. }
                | NodeKind::AxisReduce { .. }
                | NodeKind::Line { .. }
                | NodeKind::Extern { .. }
        )
    };

    // group_of[i] = root of the group computing node i (constants: only when materialised).
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    for i in (0..n).rev() {
        if !live[i] {
            continue;
        }
        let live_users: Vec<usize> = users[i]
            .iter()
            .map(|u| u.index())
            .filter(|&u| live[u])
            .collect();
        let read_by_reduction = live_users.iter().any(|&u| is_reduction(u));
        match graph.nodes[i].kind {
            NodeKind::Input { .. } => continue,
            NodeKind::Constant { .. } => {
                if is_output[i] || read_by_reduction {
                    group_of[i] = Some(i);
                }
                continue;
            }
            _ => {}
        }
        let mut user_groups: Vec<usize> = live_users.iter().filter_map(|&u| group_of[u]).collect();
        user_groups.sort_unstable();
        user_groups.dedup();
        let materialised =
            is_output[i] || is_reduction(i) || read_by_reduction || user_groups.len() != 1;
        group_of[i] = Some(if materialised { i } else { user_groups[0] });
    }

    let mut groups = Vec::new();
    for root in 0..n {
        if group_of[root] != Some(root) {
            continue;
        }
        let node = &graph.nodes[root];
        let kind = match node.kind {
            NodeKind::Scan { .. } => GroupKind::Scan,
            NodeKind::AxisReduce { .. } => GroupKind::AxisReduce,
            NodeKind::Line { .. } => GroupKind::Line,
            NodeKind::Extern { .. } => GroupKind::Extern,
            _ => GroupKind::Stencil,
        };
        if kind != GroupKind::Stencil {
            groups.push(FusedGroup {
                kind,
                root: NodeId(root as u32),
                inputs: node.kind.operands(),
                stages: vec![NodeId(root as u32)],
                members: vec![NodeId(root as u32)],
            });
            continue;
        }
        // Members: the nodes assigned to this group, plus the constants they read.
        let mut member = vec![false; root + 1];
        for i in 0..=root {
            if group_of[i] == Some(root) {
                member[i] = true;
                for op in graph.nodes[i].kind.operands() {
                    if matches!(graph.nodes[op.index()].kind, NodeKind::Constant { .. }) {
                        member[op.index()] = true;
                    }
                }
            }
        }
        let members: Vec<usize> = (0..=root).filter(|&i| member[i]).collect();
        let mut inputs: Vec<NodeId> = Vec::new();
        for &m in &members {
            for op in graph.nodes[m].kind.operands() {
                if !member[op.index()] && !inputs.contains(&op) {
                    inputs.push(op);
                }
            }
        }
        // Members read at a non-zero offset.
        let mut offset_read = vec![false; root + 1];
        for &m in &members {
            match &graph.nodes[m].kind {
                NodeKind::Gather { x, offset, .. } if offset.iter().any(|&o| o != 0) => {
                    offset_read[x.index()] = true;
                }
                NodeKind::WindowReduce { x, footprint, .. }
                    if footprint.offsets.iter().flatten().any(|&o| o != 0) =>
                {
                    offset_read[x.index()] = true;
                }
                _ => {}
            }
        }
        let mut stage = vec![false; root + 1];
        for &m in &members {
            stage[m] = m == root || (offset_read[m] && !cheap_tree(graph, m, &member, &stage));
        }
        groups.push(FusedGroup {
            kind,
            root: NodeId(root as u32),
            inputs,
            stages: members
                .iter()
                .filter(|&&m| stage[m])
                .map(|&m| NodeId(m as u32))
                .collect(),
            members: members.iter().map(|&m| NodeId(m as u32)).collect(),
        });
    }
    Partition { groups }
}

/// True when `m` and the members it depends on (stopping at non-members and stages) are all
/// pointwise and number at most [`MAX_INLINE_TREE`].
fn cheap_tree(graph: &Graph, m: usize, member: &[bool], stage: &[bool]) -> bool {
    let mut seen: Vec<usize> = vec![m];
    let mut stack = vec![m];
    while let Some(i) = stack.pop() {
        if !graph.nodes[i].kind.is_pointwise() {
            return false;
        }
        for op in graph.nodes[i].kind.operands() {
            let j = op.index();
            if member[j] && !stage[j] && !seen.contains(&j) {
                if seen.len() == MAX_INLINE_TREE {
                    return false;
                }
                seen.push(j);
                stack.push(j);
            }
        }
    }
    true
}

impl GroupKind {
    /// Lower-case name (`stencil`, `scan`, `axis_reduce`).
    pub fn name(self) -> &'static str {
        match self {
            GroupKind::Stencil => "stencil",
            GroupKind::Scan => "scan",
            GroupKind::AxisReduce => "axis_reduce",
            GroupKind::Line => "line",
            GroupKind::Extern => "extern",
        }
    }
}

impl Partition {
    /// How many times each materialised value is read: once per group that takes it as an
    /// input, plus once per appearance among `graph`'s outputs. Executors count these down
    /// to free intermediates right after their last reader.
    pub fn reads(&self, graph: &Graph) -> std::collections::HashMap<NodeId, usize> {
        let mut uses = std::collections::HashMap::new();
        for group in &self.groups {
            for &i in &group.inputs {
                *uses.entry(i).or_default() += 1;
            }
        }
        for &o in &graph.outputs {
            *uses.entry(o).or_default() += 1;
        }
        uses
    }

    /// A readable summary for `kiln dump`: one line per group with its kind, root (and the
    /// root's operation), stages, member count and inputs.
    pub fn describe(&self, graph: &Graph) -> String {
        let ids = |v: &[NodeId]| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::new();
        for (k, g) in self.groups.iter().enumerate() {
            let op = graph
                .nodes
                .get(g.root.index())
                .map_or("?", |node| node.kind.name());
            out.push_str(&format!(
                "group {k}: {} root={} ({op}) stages=[{}] members={} inputs=[{}]\n",
                g.kind.name(),
                g.root,
                ids(&g.stages),
                g.members.len(),
                ids(&g.inputs),
            ));
        }
        out
    }
}
