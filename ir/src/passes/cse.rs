//! Common-subexpression elimination by structural value numbering.

use std::collections::HashMap;

use crate::graph::{Graph, Node, NodeId, NodeKind};

/// Returns a copy of `graph` where structurally equal nodes (same kind and parameters, same
/// operands after numbering, same type) are one node. Operands of commutative binary ops
/// (see [`crate::BinaryOp::is_commutative`]; kiln's min and max are commutative bit for bit)
/// are put in a canonical order first. Inputs are never merged and all are kept in order;
/// ids are renumbered densely; outputs keep their order (two outputs may become the same
/// id). `graph` must be valid (as built by [`crate::GraphBuilder`]).
pub fn cse(graph: &Graph) -> Graph {
    let mut map: Vec<NodeId> = Vec::with_capacity(graph.nodes.len());
    let mut table: HashMap<Node, NodeId> = HashMap::new();
    let mut nodes: Vec<Node> = Vec::new();
    for node in &graph.nodes {
        let mut kind = node.kind.clone();
        kind.map_operands(|x| map[x.index()]);
        if let NodeKind::Binary { op, a, b } = &mut kind {
            if op.is_commutative() && *b < *a {
                std::mem::swap(a, b);
            }
        }
        let key = Node {
            kind,
            ty: node.ty.clone(),
        };
        let id = match table.get(&key) {
            Some(&id) => id,
            None => {
                let id = NodeId(nodes.len() as u32);
                nodes.push(key.clone());
                table.insert(key, id);
                id
            }
        };
        map.push(id);
    }
    Graph {
        nodes,
        inputs: graph.inputs.clone(),
        outputs: graph.outputs.iter().map(|o| map[o.index()]).collect(),
    }
}
