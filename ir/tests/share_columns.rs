//! Tests of `passes::share_columns` and `network::sorted_columns_selection`: exhaustive 0-1
//! checks of "sort each column, then merge", a reference evaluation of the rewritten graphs
//! on nasty f32 data under every border, and the shapes the pass must leave alone.

mod common;

use common::{Rng, F32_SPECIAL};
use kiln_ir::network::{
    apply, batcher_sort, merge_network, prune_to_output, selection_network,
    sorted_columns_selection, sorted_groups_selection,
};
use kiln_ir::passes::{eval_network, optimize, share_columns};
use kiln_ir::semantics::{max_f32, min_f32, remap_index};
use kiln_ir::{Border, DType, Graph, GraphBuilder, NodeId, NodeKind, Scalar};

// ------------------------------------------------------------ exhaustive 0-1 checks

/// `LANE[b]`: the word whose lane `l` holds bit `b` of `l`.
const LANE: [u64; 6] = [
    0xAAAA_AAAA_AAAA_AAAA,
    0xCCCC_CCCC_CCCC_CCCC,
    0xF0F0_F0F0_F0F0_F0F0,
    0xFF00_FF00_FF00_FF00,
    0xFFFF_0000_FFFF_0000,
    0xFFFF_FFFF_0000_0000,
];

/// Batcher sorts of each column of a `ky x kx` box, on wires `c * ky + r`.
fn column_sorts(ky: usize, kx: usize) -> Vec<(u32, u32)> {
    (0..kx)
        .flat_map(|c| {
            let base = (c * ky) as u32;
            batcher_sort(ky)
                .into_iter()
                .map(move |(i, j)| (base + i, base + j))
        })
        .collect()
}

/// The whole rewritten computation as one network on `ky * kx` wires (wire `c * ky + r` =
/// row `r` of column `c`): Batcher sorts of each column, then the merge.
fn column_sort_then_merge(ky: usize, kx: usize, rank: usize) -> (Vec<(u32, u32)>, u32) {
    let merge = sorted_columns_selection(ky, kx, rank).expect("derivable");
    assert_eq!(merge.width as usize, ky * kx);
    let mut pairs = column_sorts(ky, kx);
    pairs.extend_from_slice(&merge.pairs);
    (pairs, merge.output)
}

/// Runs `pairs` on every one of the `2^n` 0-1 inputs (`n >= 6`, bit-sliced 64 at a time)
/// and returns the first input whose `output` wire is not the `rank`-th smallest bit (1
/// iff the input has at least `n - rank` ones).
fn first_failure(n: usize, pairs: &[(u32, u32)], output: u32, rank: usize) -> Option<u64> {
    assert!(n >= 6);
    // expect[pw]: lanes whose 6 low bits plus `pw` high ones reach n - rank ones.
    let expect: Vec<u64> = (0..=n - 6)
        .map(|pw| {
            (0..64u32)
                .filter(|l| (l.count_ones() as usize) + pw >= n - rank)
                .fold(0u64, |m, l| m | 1 << l)
        })
        .collect();
    let mut wires = vec![0u64; n];
    for w in 0..1u64 << (n - 6) {
        for (b, wire) in wires.iter_mut().enumerate() {
            *wire = if b < 6 {
                LANE[b]
            } else if (w >> (b - 6)) & 1 == 1 {
                u64::MAX
            } else {
                0
            };
        }
        for &(i, j) in pairs {
            let (x, y) = (wires[i as usize], wires[j as usize]);
            wires[i as usize] = x & y;
            wires[j as usize] = x | y;
        }
        let got = wires[output as usize];
        let want = expect[w.count_ones() as usize];
        if got != want {
            let lane = (got ^ want).trailing_zeros() as u64;
            return Some(w << 6 | lane);
        }
    }
    None
}

/// The rewrite of a box with `kx >= 4` columns as one network on `ky * kx` wires: Batcher
/// sorts of each column, Batcher merges of the column pairs `(2g, 2g + 1)`, then the merge
/// over the groups (`sorted_groups_selection`). A merge leaves its ranks on a permutation of
/// its wires; the group merge's comparators are relabelled onto those wires (a comparator
/// whose min would land on the higher wire is flipped, and the two values swap wires).
fn column_sort_pair_merge_then_merge(ky: usize, kx: usize, rank: usize) -> (Vec<(u32, u32)>, u32) {
    let paired = kx / 2;
    let mut sizes = vec![2 * ky; paired];
    sizes.resize(kx - paired, ky);
    let merge = sorted_groups_selection(&sizes, rank).expect("derivable");
    let (pair_net, pair_rank) = merge_network(ky, ky);
    let mut pairs = column_sorts(ky, kx);
    // phys[w]: the physical wire holding group wire w.
    let mut phys: Vec<u32> = Vec::new();
    for g in 0..paired {
        let base = (2 * g * ky) as u32;
        pairs.extend(pair_net.iter().map(|&(i, j)| (base + i, base + j)));
        phys.extend(pair_rank.iter().map(|&w| base + w));
    }
    phys.extend((2 * paired * ky) as u32..(kx * ky) as u32);
    for &(i, j) in &merge.pairs {
        let (pi, pj) = (phys[i as usize], phys[j as usize]);
        if pi < pj {
            pairs.push((pi, pj));
        } else {
            pairs.push((pj, pi));
            phys.swap(i as usize, j as usize);
        }
    }
    (pairs, phys[merge.output as usize])
}

#[test]
fn paired_columns_select_every_rank_on_all_01_inputs() {
    for (ky, kx) in [(2, 4), (3, 4), (4, 4), (3, 5), (2, 7)] {
        for rank in 0..ky * kx {
            let (pairs, out) = column_sort_pair_merge_then_merge(ky, kx, rank);
            assert_eq!(
                first_failure(ky * kx, &pairs, out, rank),
                None,
                "{ky}x{kx} rank {rank}"
            );
        }
    }
}

#[test]
fn paired_columns_5x5_all_01_inputs() {
    for rank in [0, 1, 6, 11, 12, 13, 18, 23, 24] {
        let (pairs, out) = column_sort_pair_merge_then_merge(5, 5, rank);
        assert_eq!(
            first_failure(25, &pairs, out, rank),
            None,
            "5x5 rank {rank}"
        );
    }
}

/// The relabelled paired pipeline check can fail: dropping a pair-merge or group-merge
/// comparator of the 4x4 median is caught.
#[test]
fn paired_check_can_fail() {
    let (pairs, out) = column_sort_pair_merge_then_merge(4, 4, 7);
    let sorts = 4 * batcher_sort(4).len();
    let mut caught = 0;
    for skip in sorts..pairs.len() {
        let mut p = pairs.clone();
        p.remove(skip);
        caught += usize::from(first_failure(16, &p, out, 7).is_some());
    }
    // Some pair-merge comparators only feed ranks the group merge never reads; most do.
    assert!(
        caught * 4 >= (pairs.len() - sorts) * 3,
        "{caught} of {}",
        pairs.len() - sorts
    );
    assert!(first_failure(16, &pairs, out, 6).is_some());
}

#[test]
fn column_sort_then_merge_selects_every_rank_on_all_01_inputs() {
    for (ky, kx) in [(3, 3), (3, 5), (5, 3)] {
        for rank in 0..ky * kx {
            let (pairs, out) = column_sort_then_merge(ky, kx, rank);
            assert_eq!(
                first_failure(ky * kx, &pairs, out, rank),
                None,
                "{ky}x{kx} rank {rank}"
            );
        }
    }
}

#[test]
fn column_sort_then_merge_5x5_all_01_inputs() {
    // 2^25 inputs per rank; the median and the ranks next to it and at the ends.
    for rank in [0, 1, 6, 11, 12, 13, 18, 23, 24] {
        let (pairs, out) = column_sort_then_merge(5, 5, rank);
        assert_eq!(
            first_failure(25, &pairs, out, rank),
            None,
            "5x5 rank {rank}"
        );
    }
}

/// The exhaustive check can fail: dropping any merge comparator of the 3x3 median, or
/// asking for the wrong rank, is caught.
#[test]
fn exhaustive_check_can_fail() {
    let (pairs, out) = column_sort_then_merge(3, 3, 4);
    let merge_len = sorted_columns_selection(3, 3, 4).unwrap().pairs.len();
    for skip in pairs.len() - merge_len..pairs.len() {
        let mut p = pairs.clone();
        p.remove(skip);
        assert!(
            first_failure(9, &p, out, 4).is_some(),
            "dropping merge pair {skip} went unnoticed"
        );
    }
    assert!(first_failure(9, &pairs, out, 3).is_some());
    // Without the column sorts the merge alone does not select.
    let merge = sorted_columns_selection(3, 3, 4).unwrap();
    assert!(first_failure(9, &merge.pairs, merge.output, 4).is_some());
}

// ------------------------------------------------------------ a reference evaluator

/// Evaluates a graph made of inputs, gathers and f32 networks (the only node kinds these
/// tests build) element by element, from `ir::semantics`: returns the outputs' bits.
fn eval(g: &Graph, inputs: &[Vec<u32>]) -> Vec<Vec<u32>> {
    let mut vals: Vec<Vec<u32>> = Vec::with_capacity(g.len());
    for node in &g.nodes {
        let shape = &node.ty.shape;
        let numel: usize = shape.iter().product();
        let v = match &node.kind {
            NodeKind::Input { index } => inputs[*index].clone(),
            NodeKind::Gather { x, offset, border } => {
                let src = &vals[x.index()];
                (0..numel)
                    .map(|flat| {
                        // Multi-index, innermost axis last.
                        let mut rem = flat;
                        let mut idx = vec![0usize; shape.len()];
                        for ax in (0..shape.len()).rev() {
                            idx[ax] = rem % shape[ax];
                            rem /= shape[ax];
                        }
                        for (s, &o) in offset.iter().enumerate() {
                            let ax = 2 + s;
                            match remap_index(idx[ax] as i64 + o, shape[ax], border) {
                                Some(j) => idx[ax] = j,
                                None => match border {
                                    Border::Constant(Scalar::F32(bits)) => return *bits,
                                    other => panic!("unexpected constant border {other}"),
                                },
                            }
                        }
                        let src_flat = idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i);
                        src[src_flat]
                    })
                    .collect()
            }
            NodeKind::Network {
                inputs,
                width,
                pairs,
                output,
            } => (0..numel)
                .map(|e| {
                    let wires: Vec<f32> = inputs
                        .iter()
                        .map(|i| f32::from_bits(vals[i.index()][e]))
                        .collect();
                    eval_network(
                        &wires,
                        f32::INFINITY,
                        *width,
                        pairs,
                        *output,
                        min_f32,
                        max_f32,
                    )
                    .expect("valid network")
                    .to_bits()
                })
                .collect(),
            other => panic!("the evaluator does not handle {}", other.name()),
        };
        vals.push(v);
    }
    g.outputs.iter().map(|o| vals[o.index()].clone()).collect()
}

/// Random f32 bits: specials (NaNs with payloads and signs, ±0, ±Inf, subnormals), a few
/// small values (ties), and random bit patterns.
fn nasty(r: &mut Rng, n: usize, nan_rate: usize) -> Vec<u32> {
    (0..n)
        .map(|_| match r.below(8) {
            0 if r.chance(nan_rate, 4) => {
                r.pick(&[0x7fc0_0000, 0x7fc0_0001, 0xffc0_0000, 0x7f80_0001])
            }
            0 | 1 => r.pick(&F32_SPECIAL[4..]),
            2..=4 => r.pick(&[1.0f32, 2.0, -1.0, 0.5, 3.0]).to_bits(),
            _ => {
                let b = r.next() as u32;
                if f32::from_bits(b).is_nan() {
                    b & 0x3fff_ffff
                } else {
                    b
                }
            }
        })
        .collect()
}

/// A rank selection over a box: one gather per `(prefix.., dy, dx)` offset in the given
/// order feeding the canonical selector.
fn box_selection(
    b: &mut GraphBuilder,
    x: NodeId,
    prefix: &[i64],
    offsets: &[(i64, i64)],
    border: Border,
    rank: usize,
) -> NodeId {
    let gathers: Vec<NodeId> = offsets
        .iter()
        .map(|&(dy, dx)| {
            let mut off = prefix.to_vec();
            off.extend([dy, dx]);
            b.gather(x, &off, border).unwrap()
        })
        .collect();
    let net = selection_network(offsets.len(), rank).unwrap();
    b.network(&gathers, net.width, &net.pairs, net.output)
        .unwrap()
}

/// Centred `ky x kx` box offsets, row-major.
fn centred_box(ky: usize, kx: usize) -> Vec<(i64, i64)> {
    let (y0, x0) = ((ky / 2) as i64, (kx / 2) as i64);
    let mut v = Vec::new();
    for dy in 0..ky as i64 {
        for dx in 0..kx as i64 {
            v.push((dy - y0, dx - x0));
        }
    }
    v
}

fn count_networks(g: &Graph) -> usize {
    g.nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Network { .. }))
        .count()
}

fn borders() -> Vec<Border> {
    vec![
        Border::Constant(Scalar::F32(0)),
        Border::Constant(Scalar::F32(0x8000_0000)),
        Border::Constant(Scalar::F32(0x7fc0_0001)),
        Border::Constant(Scalar::F32(f32::INFINITY.to_bits())),
        Border::Nearest,
        Border::Reflect,
        Border::Mirror,
        Border::Wrap,
    ]
}

/// Builds the selection, rewrites it (directly and through `optimize`), and compares the
/// three graphs' bits on nasty data. Returns the rewritten graph.
fn check_same_bits(
    shape: &[usize],
    prefix: &[i64],
    offsets: &[(i64, i64)],
    border: Border,
    rank: usize,
    r: &mut Rng,
) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let s = box_selection(&mut b, x, prefix, offsets, border, rank);
    let g = b.finish(&[s]).unwrap();
    let rewritten = share_columns(&g);
    let optimised = optimize(&g);
    let numel: usize = shape.iter().product();
    for nan_rate in [0, 1, 4] {
        let data = vec![nasty(r, numel, nan_rate)];
        let want = eval(&g, &data);
        let got = eval(&rewritten, &data);
        let opt = eval(&optimised, &data);
        for (k, (w, (gv, ov))) in want[0].iter().zip(got[0].iter().zip(&opt[0])).enumerate() {
            assert_eq!(
                (w, w),
                (gv, ov),
                "shape {shape:?} {border} rank {rank} element {k}: {w:#x} vs {gv:#x} / {ov:#x}"
            );
        }
    }
    rewritten
}

#[test]
fn rewritten_medians_match_bit_for_bit_under_every_border() {
    let mut r = Rng::new(7);
    let shapes: [&[usize]; 6] = [
        &[1, 1, 1, 1],
        &[1, 1, 1, 9],
        &[1, 1, 9, 1],
        &[1, 1, 2, 3],
        &[1, 1, 7, 5],
        &[2, 1, 17, 34],
    ];
    for (ky, kx) in [(3, 3), (5, 5), (3, 5), (5, 3), (4, 4), (2, 4), (3, 7)] {
        let offsets = centred_box(ky, kx);
        let n = ky * kx;
        for shape in shapes {
            for border in borders() {
                let g = check_same_bits(shape, &[], &offsets, border, (n - 1) / 2, &mut r);
                assert!(count_networks(&g) > 1, "{ky}x{kx} was not rewritten");
            }
        }
    }
}

#[test]
fn rewritten_other_ranks_orders_and_boxes_match() {
    let mut r = Rng::new(11);
    // Every rank of 3x3, shuffled gather order, and a dilated, off-centre box.
    let mut offsets = centred_box(3, 3);
    for rank in 0..9 {
        for i in (1..offsets.len()).rev() {
            offsets.swap(i, r.below(i + 1));
        }
        for border in [Border::Reflect, Border::Constant(Scalar::F32(0))] {
            let g = check_same_bits(&[1, 2, 6, 7], &[], &offsets, border, rank, &mut r);
            assert!(count_networks(&g) > 1);
        }
    }
    let dilated: Vec<(i64, i64)> = [-2i64, 0, 2]
        .iter()
        .flat_map(|&dy| [-1i64, 1, 4].map(|dx| (dy, dx)))
        .collect();
    for border in borders() {
        let g = check_same_bits(&[1, 1, 8, 9], &[], &dilated, border, 4, &mut r);
        assert!(count_networks(&g) > 1);
    }
    // A box over the last two of three spatial axes, with an outer offset.
    for border in borders() {
        let g = check_same_bits(
            &[1, 1, 3, 6, 5],
            &[1],
            &centred_box(3, 3),
            border,
            4,
            &mut r,
        );
        assert!(count_networks(&g) > 1);
    }
    // 5x5 ranks away from the median.
    for rank in [0, 3, 20, 24] {
        check_same_bits(
            &[1, 1, 9, 8],
            &[],
            &centred_box(5, 5),
            Border::Mirror,
            rank,
            &mut r,
        );
    }
}

/// The evaluator comparison can fail: a wrong merge output is noticed.
#[test]
fn evaluator_comparison_can_fail() {
    let mut r = Rng::new(3);
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 6, 6]).unwrap();
    let s = box_selection(&mut b, x, &[], &centred_box(3, 3), Border::Reflect, 4);
    let g = b.finish(&[s]).unwrap();
    let mut bad = share_columns(&g);
    let last = bad.outputs[0].index();
    let NodeKind::Network { output, pairs, .. } = &mut bad.nodes[last].kind else {
        panic!("the output is the merge network");
    };
    // The other wire of the last comparator (which writes the output).
    let (i, j) = pairs[pairs.len() - 1];
    *output = if *output == i { j } else { i };
    // Distinct values: at the 16 interior points (no reflected duplicates) the last
    // comparator's two outputs differ.
    let mut data: Vec<u32> = (1..=36).map(|v| (v as f32).to_bits()).collect();
    for i in (1..data.len()).rev() {
        data.swap(i, r.below(i + 1));
    }
    let (want, got) = (eval(&g, &[data.clone()]), eval(&bad, &[data]));
    let interior_differ = (1..5)
        .flat_map(|y| (1..5).map(move |x| y * 6 + x))
        .filter(|&i| want[0][i] != got[0][i])
        .count();
    assert_eq!(interior_differ, 16);
}

// ------------------------------------------------------------ structure

/// Live min/max operations of a pruned network: each comparator counts its outputs that
/// reach one of `outputs`.
fn live_ops(pairs: &[(u32, u32)], width: usize, outputs: &[u32]) -> usize {
    let mut live = vec![false; width];
    for &o in outputs {
        live[o as usize] = true;
    }
    let mut ops = 0;
    for &(i, j) in pairs.iter().rev() {
        let (li, lj) = (live[i as usize], live[j as usize]);
        ops += usize::from(li) + usize::from(lj);
        if li || lj {
            live[i as usize] = true;
            live[j as usize] = true;
        }
    }
    ops
}

/// The column offset of a column network over gathers of `x` (all its gathers share it).
fn column_of(g: &Graph, id: NodeId, k: usize) -> i64 {
    let NodeKind::Network {
        inputs,
        width,
        pairs,
        ..
    } = &g.node(id).kind
    else {
        panic!("{id} is not a column network");
    };
    assert_eq!(*width as usize, k);
    assert_eq!(pairs, &batcher_sort(k));
    let dxs: Vec<i64> = inputs
        .iter()
        .map(|&gid| match &g.node(gid).kind {
            NodeKind::Gather { x: src, offset, .. } => {
                assert_eq!(*src, NodeId(0), "column gathers read x directly");
                offset[1]
            }
            other => panic!("column input is a {}", other.name()),
        })
        .collect();
    assert!(dxs.iter().all(|&d| d == dxs[0]), "one column per network");
    dxs[0]
}

/// The 3x3 median becomes column sorts and Paeth's 12-operation merge; the 5x5 median
/// becomes column sorts, merges of the column pairs (-2, -1) and (0, 1), and a merge over
/// the two sorted pairs and column 2. Counted as work per output point when each column's
/// sort and each pair's merge is shared between neighbouring points (every sort is the same
/// program shifted, and so is every pair merge), the 5x5 form is cheaper than column sorts
/// and a merge over the five columns.
#[test]
fn medians_are_rewritten_into_column_sorts_and_a_smaller_merge() {
    for k in [3usize, 5] {
        let n = k * k;
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 1, 10, 10]).unwrap();
        let s = box_selection(
            &mut b,
            x,
            &[],
            &centred_box(k, k),
            Border::Reflect,
            (n - 1) / 2,
        );
        let g = b.finish(&[s]).unwrap();
        let old = selection_network(n, (n - 1) / 2).unwrap();
        let new = optimize(&g);
        let NodeKind::Network {
            inputs: merge_inputs,
            width,
            pairs,
            output,
        } = &new.node(new.outputs[0]).kind
        else {
            panic!("the output is the merge network");
        };
        let merge_ops = live_ops(pairs, *width as usize, &[*output]);
        let old_ops = live_ops(&old.pairs, n, &[old.output]);
        // Per column (or pair of columns): the ranks the next level reads.
        let mut per_column: std::collections::BTreeMap<i64, Vec<u32>> = Default::default();
        let mut per_pair: std::collections::BTreeMap<i64, Vec<u32>> = Default::default();
        for &c in merge_inputs {
            let NodeKind::Network {
                inputs,
                width,
                pairs,
                output,
            } = &new.node(c).kind
            else {
                panic!("merge input {c} is not a network");
            };
            if *width as usize == k {
                per_column
                    .entry(column_of(&new, c, k))
                    .or_default()
                    .push(*output);
                continue;
            }
            // A pair merge: Batcher's merge over every rank of two neighbouring columns.
            assert_eq!(*width as usize, 2 * k);
            assert_eq!(pairs, &merge_network(k, k).0);
            let cols: Vec<i64> = inputs.iter().map(|&i| column_of(&new, i, k)).collect();
            assert!(cols[..k].iter().all(|&d| d == cols[0]));
            assert!(cols[k..].iter().all(|&d| d == cols[0] + 1));
            for (r, &i) in inputs.iter().enumerate() {
                let NodeKind::Network { output, .. } = &new.node(i).kind else {
                    unreachable!()
                };
                assert_eq!(*output as usize, r % k, "pair input {r} is rank {}", r % k);
            }
            per_pair.entry(cols[0]).or_default().push(*output);
        }
        let column_sort_ops = live_ops(&batcher_sort(k), k, &(0..k as u32).collect::<Vec<_>>());
        let shared_ops = if k == 3 {
            assert!(per_pair.is_empty());
            assert_eq!(per_column.len(), 3, "every column reaches the merge");
            assert_eq!(merge_ops, 12, "Paeth's merge");
            assert_eq!(old_ops, 40);
            column_sort_ops + merge_ops
        } else {
            assert_eq!(per_pair.keys().copied().collect::<Vec<_>>(), vec![-2, 0]);
            assert_eq!(per_column.keys().copied().collect::<Vec<_>>(), vec![2]);
            assert_eq!(old_ops, 202);
            let (pair_net, _) = merge_network(k, k);
            let pair_ops = per_pair
                .values()
                .map(|outs| live_ops(&pair_net, 2 * k, outs))
                .max()
                .unwrap();
            let unpaired = sorted_columns_selection(k, k, (n - 1) / 2).unwrap();
            let unpaired_ops = live_ops(&unpaired.pairs, n, &[unpaired.output]);
            let shared = column_sort_ops + pair_ops + merge_ops;
            eprintln!(
                "5x5 median, shared work per point: column sort {column_sort_ops} + pair \
                 merge {pair_ops} + merge {merge_ops} = {shared}, against \
                 {column_sort_ops} + {unpaired_ops} unpaired"
            );
            assert!(merge_ops <= 50, "5x5 group merge: {merge_ops} ops");
            assert!(shared < column_sort_ops + unpaired_ops);
            shared
        };
        assert!(
            shared_ops * 2 < old_ops,
            "{k}x{k}: {shared_ops} vs {old_ops}"
        );
    }
}

/// Graphs the pass must copy unchanged.
#[test]
fn non_box_selections_are_left_alone() {
    let f = DType::F32;
    let reflect = Border::Reflect;
    let mut cases: Vec<(&str, Graph)> = Vec::new();

    // A cross (5 offsets inside a 3x3 product).
    let mut b = GraphBuilder::new();
    let x = b.input(f, &[1, 1, 8, 8]).unwrap();
    let cross = [(-1, 0), (0, -1), (0, 0), (0, 1), (1, 0)];
    let s = box_selection(&mut b, x, &[], &cross, reflect, 2);
    cases.push(("cross", b.finish(&[s]).unwrap()));

    // Mixed sources and mixed borders.
    for mixed_source in [true, false] {
        let mut b = GraphBuilder::new();
        let x = b.input(f, &[1, 1, 8, 8]).unwrap();
        let y = b.input(f, &[1, 1, 8, 8]).unwrap();
        let gathers: Vec<NodeId> = centred_box(3, 3)
            .iter()
            .enumerate()
            .map(|(i, &(dy, dx))| {
                let (src, border) = match (i == 4, mixed_source) {
                    (true, true) => (y, reflect),
                    (true, false) => (x, Border::Wrap),
                    _ => (x, reflect),
                };
                b.gather(src, &[dy, dx], border).unwrap()
            })
            .collect();
        let net = selection_network(9, 4).unwrap();
        let s = b.network(&gathers, 9, &net.pairs, 4).unwrap();
        cases.push(("mixed", b.finish(&[s]).unwrap()));
    }

    // Not the canonical selector: one pair changed, a pair dropped, another output wire, a
    // padded width.
    for variant in 0..4 {
        let mut b = GraphBuilder::new();
        let x = b.input(f, &[1, 1, 8, 8]).unwrap();
        let gathers: Vec<NodeId> = centred_box(3, 3)
            .iter()
            .map(|&(dy, dx)| b.gather(x, &[dy, dx], reflect).unwrap())
            .collect();
        let mut net = selection_network(9, 4).unwrap();
        let mut width = 9;
        match variant {
            0 => net.pairs[3] = (0, 8),
            1 => {
                net.pairs.pop();
            }
            // (Wire 3 would be canonical too: Batcher pruned to wire 3 or 4 keeps the same
            // comparators, the last one being (3, 4).)
            2 => net.output = 0,
            _ => width = 10,
        }
        let s = b.network(&gathers, width, &net.pairs, net.output).unwrap();
        cases.push(("not canonical", b.finish(&[s]).unwrap()));
    }

    // A 1-D window, and boxes with one row or one column.
    let mut b = GraphBuilder::new();
    let x = b.input(f, &[1, 1, 8]).unwrap();
    let gathers: Vec<NodeId> = (-2..=2)
        .map(|d| b.gather(x, &[d], reflect).unwrap())
        .collect();
    let net = selection_network(5, 2).unwrap();
    let s = b.network(&gathers, 5, &net.pairs, 2).unwrap();
    cases.push(("1-D", b.finish(&[s]).unwrap()));
    for (ky, kx) in [(1, 5), (5, 1), (1, 9)] {
        let mut b = GraphBuilder::new();
        let x = b.input(f, &[1, 1, 8, 8]).unwrap();
        let s = box_selection(&mut b, x, &[], &centred_box(ky, kx), reflect, ky * kx / 2);
        cases.push(("one row or column", b.finish(&[s]).unwrap()));
    }
    // A box over the two FIRST of three spatial axes (the last axis varies... not at all,
    // but the first does): offsets (dz, dy, 0).
    let mut b = GraphBuilder::new();
    let x = b.input(f, &[1, 1, 4, 4, 4]).unwrap();
    let gathers: Vec<NodeId> = centred_box(3, 3)
        .iter()
        .map(|&(dz, dy)| b.gather(x, &[dz, dy, 0], reflect).unwrap())
        .collect();
    let net = selection_network(9, 4).unwrap();
    let s = b.network(&gathers, 9, &net.pairs, 4).unwrap();
    cases.push(("box over outer axes", b.finish(&[s]).unwrap()));

    for (name, g) in cases {
        assert_eq!(share_columns(&g), g, "{name} was rewritten");
    }
}

#[test]
fn derivation_times_and_pruned_merge_is_a_fixed_point() {
    for (ky, kx) in [(3usize, 3usize), (3, 5), (5, 3), (5, 5)] {
        let n = ky * kx;
        let t = std::time::Instant::now();
        let merge = sorted_columns_selection(ky, kx, (n - 1) / 2).unwrap();
        let first = t.elapsed();
        let t = std::time::Instant::now();
        let again = sorted_columns_selection(ky, kx, (n - 1) / 2).unwrap();
        let memo = t.elapsed();
        assert_eq!(merge, again);
        assert_eq!(
            prune_to_output(&merge.pairs, merge.output, merge.width),
            merge.pairs
        );
        // A sanity check by plain application on sorted-column data with ties.
        let mut r = Rng::new(n as u64);
        for _ in 0..200 {
            let mut vals: Vec<u8> = (0..n).map(|_| r.below(4) as u8).collect();
            let mut sorted = vals.clone();
            sorted.sort_unstable();
            for c in 0..kx {
                vals[c * ky..(c + 1) * ky].sort_unstable();
            }
            apply(&merge.pairs, &mut vals);
            assert_eq!(vals[merge.output as usize], sorted[(n - 1) / 2]);
        }
        eprintln!(
            "{ky}x{kx}: merge of {} comparators derived in {first:?} (memoised: {memo:?})",
            merge.pairs.len()
        );
    }
}

/// The kornia median (selection + NaN mask + select) stays one group with one stage after
/// the rewrite: the column networks read the gathers of `x` directly.
#[test]
fn rewritten_kornia_median_is_one_single_stage_kernel() {
    use kiln_ir::passes::fuse;
    use kiln_ir::{Footprint, ReduceOp, UnaryOp};
    for k in [3, 5] {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 3, 32, 32]).unwrap();
        let offsets = centred_box(k, k);
        let zero = Border::Constant(Scalar::F32(0));
        let median = box_selection(&mut b, x, &[], &offsets, zero, (k * k - 1) / 2);
        let finite = b.unary(UnaryOp::IsFinite, x).unwrap();
        let bad = b.unary(UnaryOp::Not, finite).unwrap();
        let fp = Footprint {
            offsets: offsets.iter().map(|&(dy, dx)| vec![dy, dx]).collect(),
        };
        let any_bad = b
            .window_reduce(
                bad,
                ReduceOp::Any,
                &fp,
                Border::Constant(Scalar::Bool(false)),
            )
            .unwrap();
        let nan = b.constant_like(Scalar::F32(0x7fc0_0000), x).unwrap();
        let out = b.select(any_bad, nan, median).unwrap();
        let g = b.finish(&[out]).unwrap();
        let opt = optimize(&g);
        assert!(count_networks(&opt) > 1);
        let p = fuse(&opt);
        assert_eq!(p.groups.len(), 1, "{}", p.describe(&opt));
        assert_eq!(p.groups[0].stages, vec![p.groups[0].root]);
    }
}
