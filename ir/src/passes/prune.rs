//! Comparator-network pruning.
//!
//! Wires past the inputs start at +∞ (the top of kiln's order). A comparator whose upper wire
//! holds a known +∞ changes nothing (in the NaN-free case), and one whose lower wire holds a
//! known +∞ just exchanges the two wires, which is recorded as a relabelling instead of a
//! comparator. The comparators left are then cut to those the `output` wire depends on, and
//! the wires are renumbered compactly (dead inputs are dropped from the node).
//!
//! NaN exactness: every comparator turns both its wires into the canonical NaN when either
//! holds a NaN, so a float network's output is NaN exactly when one of the inputs in its
//! dependency cone is NaN, and that NaN is canonical exactly when some comparator wrote the
//! output wire. Dropping comparators against +∞ can shrink that cone or skip that
//! canonicalisation; when it does, the pruned network gets one extra +∞ wire `T` that
//! collects the dropped inputs (`(m, T)` first) and is folded into the output at the end
//! (`(out, T)`), which restores both properties and changes no NaN-free value (`min(x, +∞) =
//! x`). Hence the pruned node computes the same bits for every input.

use crate::graph::{Graph, Node, NodeId, NodeKind};

/// A pruned comparator network, in the terms of [`NodeKind::Network`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrunedNetwork {
    /// Which of the original inputs are kept, by original position, in order: the pruned
    /// network's wire `k` carries original input `inputs[k]`.
    pub inputs: Vec<usize>,
    /// Total number of wires.
    pub width: u32,
    /// Compare-exchange pairs, `i < j`, applied in order.
    pub pairs: Vec<(u32, u32)>,
    /// The wire holding the value.
    pub output: u32,
}

/// Dependency cone of each wire as a bitset over inputs, and whether a comparator wrote it.
fn cone(k: usize, width: usize, pairs: &[(usize, usize)], output: usize) -> (Vec<u64>, bool) {
    let words = k.div_ceil(64).max(1);
    let mut sets = vec![vec![0u64; words]; width];
    for (i, set) in sets.iter_mut().enumerate().take(k) {
        set[i / 64] |= 1 << (i % 64);
    }
    let mut written = vec![false; width];
    for &(i, j) in pairs {
        let mut u = sets[i].clone();
        for (x, y) in u.iter_mut().zip(&sets[j]) {
            *x |= *y;
        }
        sets[i] = u.clone();
        sets[j] = u;
        written[i] = true;
        written[j] = true;
    }
    (std::mem::take(&mut sets[output]), written[output])
}

/// Prunes one network with `n_inputs` inputs (see the module docs). With `nan_exact` (float
/// networks) the result also reproduces NaN propagation bit for bit; without it (u8, bool,
/// which have no NaN) the NaN fix-up wire is never added. The arguments must satisfy the
/// builder's rules (`1 <= n_inputs <= width`, pairs `i < j < width`, `output < width`).
pub fn prune_network(
    n_inputs: usize,
    width: u32,
    pairs: &[(u32, u32)],
    output: u32,
    nan_exact: bool,
) -> PrunedNetwork {
    let k = n_inputs;
    let w = width as usize;
    // loc[logical wire] = physical wire holding its (NaN-free) value; physical wires < k hold
    // values, physical wires >= k hold +∞ and are never compared.
    let mut loc: Vec<usize> = (0..w).collect();
    let mut top: Vec<bool> = (0..w).map(|i| i >= k).collect();
    let mut emitted: Vec<(usize, usize)> = Vec::new();
    for &(i, j) in pairs {
        let (i, j) = (i as usize, j as usize);
        if top[j] {
            continue;
        }
        if top[i] {
            loc.swap(i, j);
            top[i] = false;
            top[j] = true;
            continue;
        }
        let (p, q) = (loc[i].min(loc[j]), loc[i].max(loc[j]));
        emitted.push((p, q));
        loc[i] = p;
        loc[j] = q;
    }
    let out_phys = loc[output as usize];
    let out_top = top[output as usize];

    // Backward liveness from the output wire.
    let mut live = vec![false; w];
    if !out_top {
        live[out_phys] = true;
    }
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for &(p, q) in emitted.iter().rev() {
        if live[p] || live[q] {
            live[p] = true;
            live[q] = true;
            kept.push((p, q));
        }
    }
    kept.reverse();

    // NaN fix-up: inputs in the original cone but not the pruned one, and canonicalisation.
    let mut missing: Vec<usize> = Vec::new();
    let mut fix = false;
    if nan_exact {
        let orig: Vec<(usize, usize)> = pairs
            .iter()
            .map(|&(i, j)| (i as usize, j as usize))
            .collect();
        let (c, written) = cone(k, w, &orig, output as usize);
        let (c2, written2) = cone(k, w, &kept, out_phys);
        missing = (0..k)
            .filter(|&m| (c[m / 64] >> (m % 64)) & 1 == 1 && (c2[m / 64] >> (m % 64)) & 1 == 0)
            .collect();
        fix = !missing.is_empty() || (written && !written2);
    }

    // Compact: kept inputs in original order, then the +∞ output wire, then the fix-up wire.
    let mut keep_input = vec![false; k];
    for (p, keep) in keep_input.iter_mut().enumerate() {
        *keep = live[p];
    }
    for &m in &missing {
        keep_input[m] = true;
    }
    if !keep_input.iter().any(|&b| b) {
        keep_input[0] = true;
    }
    let mut new_index = vec![u32::MAX; k];
    let mut inputs = Vec::new();
    for p in 0..k {
        if keep_input[p] {
            new_index[p] = inputs.len() as u32;
            inputs.push(p);
        }
    }
    let mut n_wires = inputs.len() as u32;
    let out = if out_top {
        n_wires += 1;
        n_wires - 1
    } else {
        new_index[out_phys]
    };
    let mut new_pairs: Vec<(u32, u32)> = Vec::new();
    let fix_wire = n_wires;
    if fix {
        n_wires += 1;
        new_pairs.extend(missing.iter().map(|&m| (new_index[m], fix_wire)));
    }
    new_pairs.extend(kept.iter().map(|&(p, q)| (new_index[p], new_index[q])));
    if fix {
        new_pairs.push((out, fix_wire));
    }
    PrunedNetwork {
        inputs,
        width: n_wires,
        pairs: new_pairs,
        output: out,
    }
}

/// Prunes every comparator network of `graph` (see the module docs). The node count and ids
/// are unchanged (inputs a network no longer reads may become dead: run
/// [`crate::passes::dce::dce`] after). `graph` must be valid.
pub fn prune(graph: &Graph) -> Graph {
    let nodes = graph
        .nodes
        .iter()
        .map(|node| match &node.kind {
            NodeKind::Network {
                inputs,
                width,
                pairs,
                output,
            } => {
                let p = prune_network(
                    inputs.len(),
                    *width,
                    pairs,
                    *output,
                    node.ty.dtype.is_float(),
                );
                Node {
                    kind: NodeKind::Network {
                        inputs: p.inputs.iter().map(|&i| inputs[i]).collect::<Vec<NodeId>>(),
                        width: p.width,
                        pairs: p.pairs,
                        output: p.output,
                    },
                    ty: node.ty.clone(),
                }
            }
            _ => node.clone(),
        })
        .collect();
    Graph {
        nodes,
        inputs: graph.inputs.clone(),
        outputs: graph.outputs.clone(),
    }
}

/// Evaluates a comparator network on scalar `inputs` (wires past them hold `top`) with the
/// given `min` and `max`, as [`NodeKind::Network`] defines it. For f32 use
/// [`crate::semantics::min_f32`] / [`crate::semantics::max_f32`] and `f32::INFINITY`.
/// Returns `None` when the wiring is invalid (fewer wires than inputs, a pair out of range or
/// not `i < j`, output out of range).
pub fn eval_network<T: Copy>(
    inputs: &[T],
    top: T,
    width: u32,
    pairs: &[(u32, u32)],
    output: u32,
    min: impl Fn(T, T) -> T,
    max: impl Fn(T, T) -> T,
) -> Option<T> {
    let w = width as usize;
    if w < inputs.len() || output as usize >= w {
        return None;
    }
    let mut wires: Vec<T> = inputs.to_vec();
    wires.resize(w, top);
    for &(i, j) in pairs {
        let (i, j) = (i as usize, j as usize);
        if i >= j || j >= w {
            return None;
        }
        let (a, b) = (wires[i], wires[j]);
        wires[i] = min(a, b);
        wires[j] = max(a, b);
    }
    Some(wires[output as usize])
}
