//! Tests of the cse, dce and prune passes.

mod common;

use kiln_ir::parser::parse;
use kiln_ir::passes::{cse, dce, eval_network, prune, prune_network};
use kiln_ir::printer::print;
use kiln_ir::semantics::{max_f32, min_f32};
use kiln_ir::{BinaryOp, Border, DType, Graph, GraphBuilder, NodeId, NodeKind, Scalar};
use proptest::prelude::*;

/// Every pass result must be a valid graph: it re-parses (through the builder) to itself.
fn assert_valid(g: &Graph) {
    let text = print(g);
    let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(&back, g);
}

// ---------------------------------------------------------------- cse

#[test]
fn cse_merges_commutative_operands_and_equal_nodes() {
    let g = parse(
        "%0 = input 0 : f32[1,1,4]
%1 = input 1 : f32[1,1,4]
%2 = add %0, %1
%3 = add %1, %0
%4 = sub %0, %1
%5 = sub %1, %0
%6 = min %1, %0
%7 = min %0, %1
%8 = gather %0 offset=[1] border=reflect
%9 = gather %0 offset=[1] border=reflect
%10 = gather %0 offset=[1] border=wrap
%11 = const f32:1.0 : f32[1,1,4]
%12 = const f32:1.0 : f32[1,1,4]
%13 = lt %0, %1
%14 = lt %1, %0
return %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14",
    )
    .unwrap();
    let c = cse(&g);
    assert_valid(&c);
    let o = &c.outputs;
    assert_eq!(o[0], o[1], "add is commutative");
    assert_ne!(o[2], o[3], "sub is not");
    assert_eq!(o[4], o[5], "min is commutative");
    assert_eq!(o[6], o[7], "equal gathers merge");
    assert_ne!(o[6], o[8], "different borders do not");
    assert_eq!(o[9], o[10], "equal constants merge");
    assert_ne!(o[11], o[12], "lt is not commutative");
    // 2 inputs + add, sub, sub, min, gather, gather, const, lt, lt.
    assert_eq!(c.len(), 11);
    assert_eq!(c.inputs, g.inputs);
}

#[test]
fn cse_never_merges_inputs_and_merges_transitively() {
    let g = parse(
        "%0 = input 0 : f32[1,1,4]
%1 = input 1 : f32[1,1,4]
%2 = neg %0
%3 = neg %0
%4 = mul %2, %1
%5 = mul %1, %3
return %4, %5, %1",
    )
    .unwrap();
    let c = cse(&g);
    assert_valid(&c);
    assert_eq!(c.len(), 4);
    assert_eq!(c.outputs, vec![NodeId(3), NodeId(3), NodeId(1)]);
    assert!(matches!(c.nodes[1].kind, NodeKind::Input { index: 1 }));
}

// ---------------------------------------------------------------- dce

#[test]
fn dce_drops_dead_nodes_keeps_inputs_and_output_order() {
    let g = parse(
        "%0 = input 0 : f32[1,1,4]
%1 = input 1 : u8[1,1,4]
%2 = neg %0
%3 = abs %0
%4 = sqrt %3
%5 = add %2, %2
return %5, %2",
    )
    .unwrap();
    let d = dce(&g);
    assert_valid(&d);
    assert_eq!(d.len(), 4, "{}", print(&d));
    assert!(
        matches!(d.nodes[1].kind, NodeKind::Input { index: 1 }),
        "unused inputs stay"
    );
    assert_eq!(d.outputs, vec![NodeId(3), NodeId(2)]);
    assert!(matches!(
        d.nodes[3].kind,
        NodeKind::Binary {
            op: BinaryOp::Add,
            a: NodeId(2),
            b: NodeId(2)
        }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn passes_give_valid_graphs_and_are_idempotent(g in common::graphs()) {
        let c = cse(&g);
        assert_valid(&c);
        prop_assert!(c.len() <= g.len());
        prop_assert_eq!(cse(&c), c.clone());
        prop_assert_eq!(&c.inputs, &g.inputs);
        for (a, b) in c.outputs.iter().zip(&g.outputs) {
            prop_assert_eq!(&c.node(*a).ty, &g.node(*b).ty);
        }

        let d = dce(&g);
        assert_valid(&d);
        prop_assert_eq!(dce(&d), d.clone());
        prop_assert_eq!(&d.inputs, &g.inputs);
        // Every node of the result is an input or used.
        let users = d.users();
        for (i, n) in d.nodes.iter().enumerate() {
            let used = !users[i].is_empty() || d.outputs.contains(&NodeId(i as u32));
            let is_input = matches!(n.kind, NodeKind::Input { .. });
            prop_assert!(used || is_input, "dead node {} in\n{}", i, print(&d));
        }
        for (a, b) in d.outputs.iter().zip(&g.outputs) {
            prop_assert_eq!(&d.node(*a).ty, &g.node(*b).ty);
        }

        let p = prune(&g);
        assert_valid(&p);
        prop_assert_eq!(p.len(), g.len());
        let pd = dce(&p);
        assert_valid(&pd);
    }
}

// ---------------------------------------------------------------- prune

/// Bubble-sort network on `w` wires (sorts ascending).
fn bubble(w: u32) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    for pass in 0..w {
        for i in 0..w.saturating_sub(1 + pass) {
            pairs.push((i, i + 1));
        }
    }
    pairs
}

fn eval_f32(inputs: &[f32], width: u32, pairs: &[(u32, u32)], output: u32) -> f32 {
    eval_network(
        inputs,
        f32::INFINITY,
        width,
        pairs,
        output,
        min_f32,
        max_f32,
    )
    .unwrap()
}

/// Checks the pruned network against the original on `inputs`, bit for bit.
fn check_f32(inputs: &[f32], width: u32, pairs: &[(u32, u32)], output: u32) {
    let p = prune_network(inputs.len(), width, pairs, output, true);
    let kept: Vec<f32> = p.inputs.iter().map(|&i| inputs[i]).collect();
    let want = eval_f32(inputs, width, pairs, output);
    let got = eval_f32(&kept, p.width, &p.pairs, p.output);
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "inputs {inputs:?} width {width} pairs {pairs:?} output {output} -> {p:?}"
    );
}

#[test]
fn padded_sorting_network_median_is_pruned_and_correct() {
    // 5 values on an 8-wire sorter: the median is wire 2.
    let pairs = bubble(8);
    let p = prune_network(5, 8, &pairs, 2, true);
    assert_eq!(p.inputs, vec![0, 1, 2, 3, 4]);
    assert_eq!(p.width, 5, "{p:?}");
    assert!(
        p.pairs.len() < pairs.len(),
        "{} vs {}",
        p.pairs.len(),
        pairs.len()
    );
    let mut r = common::Rng::new(7);
    for _ in 0..2000 {
        let v: Vec<f32> = (0..5).map(|_| (r.below(7) as f32) - 3.0).collect();
        let mut s = v.clone();
        s.sort_by(f32::total_cmp);
        let kept: Vec<f32> = p.inputs.iter().map(|&i| v[i]).collect();
        assert_eq!(eval_f32(&kept, p.width, &p.pairs, p.output), s[2]);
        check_f32(&v, 8, &pairs, 2);
    }
}

#[test]
fn comparators_against_infinity_are_dropped_or_relabelled() {
    // (0,2): wire 2 is +inf, no-op. (2,1)... pairs must have i<j: (1,2) no-op; then a swap
    // (2,3) of two +inf wires, then (0,1) real.
    let p = prune_network(2, 4, &[(0, 2), (1, 2), (2, 3), (0, 1)], 1, false);
    assert_eq!(p.pairs, vec![(0, 1)]);
    assert_eq!(p.width, 2);
    // Lower wire +inf, upper a value: the value moves down (relabelling).
    let p = prune_network(1, 3, &[(0, 2), (1, 2)], 1, false);
    // wire0 = x, then (1,2) with wire1=+inf and wire2=+inf: nothing; output wire1 is +inf.
    assert_eq!(p.pairs, vec![]);
    assert_eq!((p.width, p.output), (2, 1));
    let p = prune_network(2, 3, &[(1, 2), (0, 1)], 0, false);
    assert_eq!(p.pairs, vec![(0, 1)]);
    // A value moved onto a high wire by relabelling: wires 0 = a, 1 = +inf; (0,1) is a
    // no-op so the output wire 0 is a itself.
    let p = prune_network(1, 2, &[(0, 1)], 0, false);
    assert_eq!((p.pairs.clone(), p.output, p.width), (vec![], 0, 1));
    // Dead input dropped.
    let p = prune_network(3, 3, &[(0, 1), (1, 2)], 0, false);
    assert_eq!(p.inputs, vec![0, 1]);
    assert_eq!(p.pairs, vec![(0, 1)]);
}

#[test]
fn nan_propagation_is_kept_exactly() {
    let nan_payload = f32::from_bits(0x7fc0_0001);
    // (0,2) touches +inf wire 2 with input 0; (1,2) then mixes it into wire 1.
    let pairs = [(0, 2), (1, 2)];
    for a in [1.0, nan_payload, f32::from_bits(0xffc0_0000)] {
        for b in [2.0, nan_payload, -0.0] {
            check_f32(&[a, b], 3, &pairs, 1);
            check_f32(&[a, b], 3, &pairs, 0);
            check_f32(&[a, b], 3, &pairs, 2);
        }
    }
    // The NaN-free case needs no fix-up wire.
    assert_eq!(prune_network(2, 3, &pairs, 1, false).pairs, vec![]);
    assert!(prune_network(2, 3, &pairs, 1, true).pairs.len() == 2);
}

/// A random network: `k` inputs, `width`, random pairs, random output.
fn random_network(r: &mut common::Rng) -> (usize, u32, Vec<(u32, u32)>, u32) {
    let k = 1 + r.below(5);
    let width = k as u32 + r.below(4) as u32;
    let mut pairs = Vec::new();
    if width >= 2 {
        for _ in 0..r.below(16) {
            let i = r.below(width as usize - 1) as u32;
            let j = i + 1 + r.below((width - i - 1) as usize) as u32;
            pairs.push((i, j));
        }
    }
    (k, width, pairs, r.below(width as usize) as u32)
}

#[test]
fn random_networks_exhaustive_zero_one() {
    let mut r = common::Rng::new(1);
    for _ in 0..3000 {
        let (k, width, pairs, output) = random_network(&mut r);
        for nan_exact in [false, true] {
            let p = prune_network(k, width, &pairs, output, nan_exact);
            for bits in 0..1u32 << k {
                let v: Vec<bool> = (0..k).map(|i| bits >> i & 1 == 1).collect();
                let kept: Vec<bool> = p.inputs.iter().map(|&i| v[i]).collect();
                let want =
                    eval_network(&v, true, width, &pairs, output, |a, b| a & b, |a, b| a | b);
                let got = eval_network(
                    &kept,
                    true,
                    p.width,
                    &p.pairs,
                    p.output,
                    |a, b| a & b,
                    |a, b| a | b,
                );
                assert_eq!(
                    got, want,
                    "{k} {width} {pairs:?} {output} -> {p:?} on {v:?}"
                );
            }
        }
    }
}

#[test]
fn random_networks_random_f32_values() {
    let mut r = common::Rng::new(2);
    for _ in 0..20000 {
        let (k, width, pairs, output) = random_network(&mut r);
        let v: Vec<f32> = (0..k)
            .map(|_| match r.below(3) {
                0 => f32::from_bits(r.pick(&common::F32_SPECIAL)),
                1 => r.range(-2, 2) as f32,
                _ => f32::from_bits(r.next() as u32),
            })
            .collect();
        check_f32(&v, width, &pairs, output);
    }
}

#[test]
fn prune_on_a_graph_drops_dead_network_inputs() {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::U8, &[1, 1, 4]).unwrap();
    let g1 = b.gather(x, &[1], Border::Constant(Scalar::U8(0))).unwrap();
    let g2 = b.gather(x, &[-1], Border::Nearest).unwrap();
    // Wire 2 (g2) is never compared with the output's wires.
    let n = b
        .network(&[x, g1, g2], 4, &[(0, 1), (2, 3), (1, 3)], 0)
        .unwrap();
    let g = b.finish(&[n]).unwrap();
    let p = prune(&g);
    match &p.nodes[n.index()].kind {
        NodeKind::Network { inputs, pairs, .. } => {
            assert_eq!(inputs, &vec![x, g1]);
            assert_eq!(pairs, &vec![(0, 1)]);
        }
        other => panic!("{other:?}"),
    }
    let d = dce(&p);
    assert_eq!(d.len(), 3, "{}", print(&d));
    assert_valid(&d);
}
