//! Tests of the fusion scheduler.

mod common;

use kiln_ir::parser::parse;
use kiln_ir::passes::{dce, fuse, GroupKind, Partition};
use kiln_ir::{Graph, NodeId, NodeKind};
use proptest::prelude::*;

fn ids(v: &[u32]) -> Vec<NodeId> {
    v.iter().map(|&i| NodeId(i)).collect()
}

/// Structural invariants every partition must satisfy.
fn check_partition(g: &Graph, p: &Partition) -> Result<(), String> {
    let n = g.len();
    let mut root_group = vec![None; n];
    for (k, grp) in p.groups.iter().enumerate() {
        if root_group[grp.root.index()].is_some() {
            return Err(format!("{} is the root of two groups", grp.root));
        }
        root_group[grp.root.index()] = Some(k);
        if grp.stages.last() != Some(&grp.root) {
            return Err(format!("group {k}: root is not the last stage"));
        }
        if grp.members.last() != Some(&grp.root) {
            return Err(format!("group {k}: root is not the last member"));
        }
        if !grp.members.windows(2).all(|w| w[0] < w[1])
            || !grp.stages.windows(2).all(|w| w[0] < w[1])
        {
            return Err(format!("group {k}: members or stages not topological"));
        }
        for s in &grp.stages {
            if !grp.members.contains(s) {
                return Err(format!("group {k}: stage {s} is not a member"));
            }
        }
        for m in &grp.members {
            if matches!(g.node(*m).kind, NodeKind::Input { .. }) {
                return Err(format!("group {k}: input node {m} is a member"));
            }
            for op in g.node(*m).kind.operands() {
                if !grp.members.contains(&op) && !grp.inputs.contains(&op) {
                    return Err(format!(
                        "group {k}: operand {op} of {m} is neither member nor input"
                    ));
                }
            }
        }
        for i in &grp.inputs {
            let is_input = matches!(g.node(*i).kind, NodeKind::Input { .. });
            let earlier_root = root_group[i.index()].is_some_and(|j| j < k);
            if !is_input && !earlier_root {
                return Err(format!(
                    "group {k}: input {i} is not materialised before it"
                ));
            }
            if grp.members.contains(i) {
                return Err(format!("group {k}: {i} is both input and member"));
            }
        }
        match grp.kind {
            GroupKind::Stencil => {}
            GroupKind::Scan | GroupKind::AxisReduce | GroupKind::Line | GroupKind::Extern => {
                if grp.members.len() != 1 || grp.inputs != g.node(grp.root).kind.operands() {
                    return Err(format!("group {k}: bad reduction group"));
                }
            }
        }
    }
    for o in &g.outputs {
        if root_group[o.index()].is_none() && !matches!(g.node(*o).kind, NodeKind::Input { .. }) {
            return Err(format!("output {o} is not materialised"));
        }
    }
    // A non-constant node computed in one group must not be recomputed in another.
    let mut owner = vec![None; n];
    for (k, grp) in p.groups.iter().enumerate() {
        for m in &grp.members {
            if matches!(g.node(*m).kind, NodeKind::Constant { .. }) {
                continue;
            }
            if let Some(j) = owner[m.index()] {
                return Err(format!("{m} is computed in groups {j} and {k}"));
            }
            owner[m.index()] = Some(k);
        }
    }
    Ok(())
}

fn fuse_checked(text: &str) -> (Graph, Partition) {
    let g = parse(text).unwrap();
    let p = fuse(&g);
    check_partition(&g, &p).unwrap_or_else(|e| panic!("{e}\n{}", p.describe(&g)));
    (g, p)
}

#[test]
fn median_is_one_group_with_one_stage() {
    let mut text = String::from("%x = input 0 : f32[1,1,8,8]\n");
    let mut names = Vec::new();
    let mut k = 0;
    for dy in -1..=1 {
        for dx in -1..=1 {
            text += &format!("%g{k} = gather %x offset=[{dy},{dx}] border=reflect\n");
            names.push(format!("%g{k}"));
            k += 1;
        }
    }
    text += &format!(
        "%med = network {} width=16 pairs=[(0,1),(1,2),(3,4),(0,3),(4,8),(2,5)] output=4\n",
        names.join(", ")
    );
    text += "%fin = is_finite %x
%bad = not %fin
%any = window any %bad footprint=[[-1,-1],[-1,0],[-1,1],[0,-1],[0,0],[0,1],[1,-1],[1,0],[1,1]] border=reflect
%nan = const f32:0x7fc00000 : f32[1,1,8,8]
%out = select %any, %nan, %med
return %out
";
    let (g, p) = fuse_checked(&text);
    assert_eq!(p.groups.len(), 1, "{}", p.describe(&g));
    let grp = &p.groups[0];
    assert_eq!(grp.kind, GroupKind::Stencil);
    assert_eq!(grp.stages, vec![grp.root]);
    assert_eq!(grp.root, NodeId(g.len() as u32 - 1));
    assert_eq!(grp.inputs, ids(&[0]));
    assert_eq!(
        grp.members.len(),
        g.len() - 1,
        "everything but the input, constant included"
    );
}

#[test]
fn opening_is_one_group_with_two_stages() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8,8]
%e = window min %x footprint=[[0,-1],[0,0],[0,1]] border=reflect
%d = window max %e footprint=[[0,-1],[0,0],[0,1]] border=reflect
return %d",
    );
    assert_eq!(p.groups.len(), 1, "{}", p.describe(&g));
    assert_eq!(p.groups[0].stages, ids(&[1, 2]));
    assert_eq!(p.groups[0].members, ids(&[1, 2]));
    assert_eq!(p.groups[0].inputs, ids(&[0]));
}

#[test]
fn pointwise_chain_is_one_group() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8]
%y = input 1 : f32[1,1,8]
%a = mul %x, %y
%b = neg %a
%c = sqrt %b
%d = add %c, %x
return %d",
    );
    assert_eq!(p.groups.len(), 1, "{}", p.describe(&g));
    assert_eq!(p.groups[0].stages, ids(&[5]));
    assert_eq!(p.groups[0].members, ids(&[2, 3, 4, 5]));
    assert_eq!(p.groups[0].inputs, ids(&[0, 1]), "first-use order");
}

#[test]
fn node_used_by_two_outputs_is_materialised() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8]
%two = const f32:2.0 : f32[1,1,8]
%y = mul %x, %two
%one = const f32:1.0 : f32[1,1,8]
%a = add %y, %one
%b = sub %y, %one
return %a, %b",
    );
    assert_eq!(p.groups.len(), 3, "{}", p.describe(&g));
    assert_eq!(p.groups[0].root, NodeId(2));
    assert_eq!(p.groups[0].members, ids(&[1, 2]), "constants are inlined");
    assert_eq!(p.groups[1].inputs, ids(&[2]));
    assert_eq!(p.groups[1].members, ids(&[3, 4]));
    assert_eq!(p.groups[2].inputs, ids(&[2]));
    assert_eq!(
        p.groups[2].members,
        ids(&[3, 5]),
        "a constant is inlined in each reader"
    );
}

#[test]
fn scan_in_the_middle_makes_three_groups() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8]
%a = abs %x
%s = scan sum %a axis=2
%b = sqrt %s
return %b",
    );
    assert_eq!(p.groups.len(), 3, "{}", p.describe(&g));
    let kinds: Vec<GroupKind> = p.groups.iter().map(|g| g.kind).collect();
    assert_eq!(
        kinds,
        vec![GroupKind::Stencil, GroupKind::Scan, GroupKind::Stencil]
    );
    assert_eq!(p.groups[1].inputs, ids(&[1]));
    assert_eq!(p.groups[1].members, ids(&[2]));
    assert_eq!(p.groups[2].inputs, ids(&[2]));
}

#[test]
fn reductions_of_inputs_and_constants() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,2,8]
%r = reduce max %x axis=1
%c = const f32:1.0 : f32[1,1,8]
%s = scan sum %c axis=2
%t = add %r, %s
return %t, %x",
    );
    // reduce (input operand needs no group), const (scan operand), scan, add. %x is an
    // output but an input node: no group.
    assert_eq!(p.groups.len(), 4, "{}", p.describe(&g));
    assert_eq!(p.groups[0].kind, GroupKind::AxisReduce);
    assert_eq!(p.groups[0].inputs, ids(&[0]));
    assert_eq!(p.groups[1].root, NodeId(2));
    assert_eq!(p.groups[2].kind, GroupKind::Scan);
    assert_eq!(p.groups[3].inputs, ids(&[1, 3]));
}

#[test]
fn window_of_pointwise_is_inlined() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8,8]
%two = const f32:2.0 : f32[1,1,8,8]
%y = mul %x, %two
%w = window sum %y footprint=[[0,0],[1,1]] border=constant(f32:0.0)
return %w",
    );
    assert_eq!(p.groups.len(), 1, "{}", p.describe(&g));
    assert_eq!(p.groups[0].stages, ids(&[3]));
}

#[test]
fn gather_of_gather_and_zero_offsets() {
    // A gather read at an offset is a stage; a window with only the zero offset is not an
    // offset read.
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8]
%a = gather %x offset=[1] border=wrap
%b = gather %a offset=[-1] border=wrap
%c = gather %b offset=[0] border=wrap
%d = window max %c footprint=[[0]] border=wrap
return %d",
    );
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].stages, ids(&[1, 4]), "{}", p.describe(&g));
}

#[test]
fn big_pointwise_tree_read_at_offsets_is_a_stage() {
    let mut text = String::from("%v0 = input 0 : f32[1,1,8]\n");
    for i in 1..=20 {
        text += &format!("%v{i} = add %v{}, %v0\n", i - 1);
    }
    text += "%w = window sum %v20 footprint=[[-1],[0],[1]] border=nearest\nreturn %w\n";
    let (g, p) = fuse_checked(&text);
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].stages, ids(&[20, 21]), "{}", p.describe(&g));
    // The same with a short chain is inlined.
    let (_, p) = fuse_checked(
        "%v0 = input 0 : f32[1,1,8]
%v1 = add %v0, %v0
%v2 = add %v1, %v0
%w = window sum %v2 footprint=[[-1],[0],[1]] border=nearest
return %w",
    );
    assert_eq!(p.groups[0].stages, ids(&[3]));
}

#[test]
fn describe_names_every_group() {
    let (g, p) = fuse_checked(
        "%x = input 0 : f32[1,1,8]
%a = abs %x
%s = scan sum %a axis=2
return %s",
    );
    let d = p.describe(&g);
    assert_eq!(
        d,
        "group 0: stencil root=%1 (unary) stages=[%1] members=1 inputs=[%0]\n\
         group 1: scan root=%2 (scan) stages=[%2] members=1 inputs=[%1]\n"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_graphs_partition_soundly(g in common::graphs()) {
        let p = fuse(&g);
        if let Err(e) = check_partition(&g, &p) {
            return Err(TestCaseError::fail(format!("{e}\n{}\n{}", g, p.describe(&g))));
        }
        let d = dce(&g);
        let pd = fuse(&d);
        if let Err(e) = check_partition(&d, &pd) {
            return Err(TestCaseError::fail(format!("{e}\n{}\n{}", d, pd.describe(&d))));
        }
    }
}
