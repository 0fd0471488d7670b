//! Dead-code elimination: drops every node the outputs do not depend on.

use crate::graph::{Graph, Node, NodeId, NodeKind};

/// Returns a copy of `graph` without the nodes that no output reaches. Every `Input` node is
/// kept (so the graph keeps its signature), ids are renumbered densely in the original order,
/// and outputs keep their order. `graph` must be valid (as built by [`crate::GraphBuilder`]).
pub fn dce(graph: &Graph) -> Graph {
    let n = graph.nodes.len();
    let mut live = vec![false; n];
    for o in &graph.outputs {
        live[o.index()] = true;
    }
    for i in (0..n).rev() {
        let node = &graph.nodes[i];
        if matches!(node.kind, NodeKind::Input { .. }) {
            live[i] = true;
        }
        if live[i] {
            for op in node.kind.operands() {
                live[op.index()] = true;
            }
        }
    }
    let mut map = vec![NodeId(u32::MAX); n];
    let mut nodes = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let mut kind = node.kind.clone();
        kind.map_operands(|x| map[x.index()]);
        map[i] = NodeId(nodes.len() as u32);
        nodes.push(Node {
            kind,
            ty: node.ty.clone(),
        });
    }
    Graph {
        nodes,
        inputs: graph.inputs.clone(),
        outputs: graph.outputs.iter().map(|o| map[o.index()]).collect(),
    }
}
