//! Exhaustive 0-1 principle checks of the Batcher sorting and selection networks.
//!
//! By the 0-1 principle a comparator network sorts (selects the rank-th smallest of) every
//! input iff it does so for every input of zeros and ones. The inputs are bit-sliced: lane
//! `l` of word `w` is the input vector whose bits are `w * 64 + l`, so one pass of `u64`
//! and/or operations evaluates 64 vectors at once.

use kiln_ops::network::{apply, batcher_sort, prune_to_output, selection_network};

/// `LANE[b]`: the word whose lane `l` holds bit `b` of `l` (for the 6 low input wires).
const LANE: [u64; 6] = [
    0xAAAA_AAAA_AAAA_AAAA,
    0xCCCC_CCCC_CCCC_CCCC,
    0xF0F0_F0F0_F0F0_F0F0,
    0xFF00_FF00_FF00_FF00,
    0xFFFF_0000_FFFF_0000,
    0xFFFF_FFFF_0000_0000,
];

/// Lanes `l` (of the low `lane_bits` bits) with at least `t` ones, as a mask.
fn lanes_with_at_least(t: i64, lane_bits: u32) -> u64 {
    let mut m = 0u64;
    for l in 0..(1u64 << lane_bits) {
        if i64::from(l.count_ones()) >= t {
            m |= 1 << l;
        }
    }
    m
}

/// Runs `pairs` on all 2^n 0-1 inputs and checks each wire in `wires_to_check` holds the
/// value a sorter would put there (wire r is 1 iff the input has at least n - r ones).
/// Returns the number of input vectors checked; panics on the first wrong wire.
fn check_exhaustive(n: usize, pairs: &[(u32, u32)], wires_to_check: &[usize]) -> u64 {
    try_exhaustive(n, pairs, wires_to_check).unwrap_or_else(|e| panic!("{e}"))
}

/// [`check_exhaustive`] returning the first failure as an error.
fn try_exhaustive(n: usize, pairs: &[(u32, u32)], wires_to_check: &[usize]) -> Result<u64, String> {
    let lane_bits = n.min(6) as u32;
    let valid = if lane_bits == 6 {
        u64::MAX
    } else {
        (1u64 << (1u32 << lane_bits)) - 1
    };
    let words = 1u64 << (n as u32 - lane_bits);
    // Per wire r and per popcount of the word bits: the expected lane mask.
    let hi_bits = n as u32 - lane_bits;
    let expect: Vec<Vec<u64>> = wires_to_check
        .iter()
        .map(|&r| {
            (0..=hi_bits)
                .map(|pw| lanes_with_at_least((n - r) as i64 - i64::from(pw), lane_bits) & valid)
                .collect()
        })
        .collect();
    let mut wires = vec![0u64; n];
    let mut checked = 0u64;
    for w in 0..words {
        for (b, wire) in wires.iter_mut().enumerate() {
            *wire = if b < lane_bits as usize {
                LANE[b]
            } else if (w >> (b - lane_bits as usize)) & 1 == 1 {
                u64::MAX
            } else {
                0
            };
        }
        for &(i, j) in pairs {
            let (a, c) = (wires[i as usize], wires[j as usize]);
            wires[i as usize] = a & c;
            wires[j as usize] = a | c;
        }
        let pw = w.count_ones() as usize;
        for (k, &r) in wires_to_check.iter().enumerate() {
            let got = wires[r] & valid;
            if got != expect[k][pw] {
                return Err(format!(
                    "n={n} wire {r} wrong for word {w}: got {got:#x}, want {:#x}",
                    expect[k][pw]
                ));
            }
        }
        checked += u64::from(valid.count_ones());
    }
    Ok(checked)
}

#[test]
fn sorting_network_sorts_every_01_input_up_to_16() {
    for n in 1..=16 {
        let pairs = batcher_sort(n);
        let all: Vec<usize> = (0..n).collect();
        let checked = check_exhaustive(n, &pairs, &all);
        assert_eq!(checked, 1u64 << n);
    }
}

#[test]
fn selection_9_every_rank_exhaustive() {
    for rank in 0..9 {
        let net = selection_network(9, rank).unwrap();
        assert_eq!(net.output as usize, rank);
        assert_eq!(net.width, 9);
        let checked = check_exhaustive(9, &net.pairs, &[rank]);
        assert_eq!(checked, 1 << 9);
    }
}

#[test]
fn selection_25_median_exhaustive() {
    let net = selection_network(25, 12).unwrap();
    let checked = check_exhaustive(25, &net.pairs, &[12]);
    assert_eq!(checked, 1 << 25);
}

#[test]
fn selection_25_extreme_ranks_exhaustive() {
    for rank in [0, 1, 11, 13, 24] {
        let net = selection_network(25, rank).unwrap();
        check_exhaustive(25, &net.pairs, &[rank]);
    }
}

#[test]
fn selection_every_size_and_rank_up_to_14() {
    for n in 1..=14 {
        for rank in 0..n {
            let net = selection_network(n, rank).unwrap();
            check_exhaustive(n, &net.pairs, &[rank]);
        }
    }
}

/// The checker must be able to fail: Batcher's 8-wire sorter has 19 comparators, the
/// optimal size for 8 inputs, so dropping any one of them breaks sorting of some 0-1 input.
#[test]
fn dropping_a_comparator_is_detected() {
    let full = batcher_sort(8);
    assert_eq!(full.len(), 19);
    let all: Vec<usize> = (0..8).collect();
    for skip in 0..full.len() {
        let mut pairs = full.clone();
        pairs.remove(skip);
        assert!(
            try_exhaustive(8, &pairs, &all).is_err(),
            "removing pair {skip} went unnoticed"
        );
    }
}

#[test]
fn pruned_is_subsequence_and_report_counts() {
    for n in [9usize, 25] {
        let full = batcher_sort(n);
        let med = selection_network(n, (n - 1) / 2).unwrap();
        // Order-preserving subsequence of the full network.
        let mut it = full.iter();
        for p in &med.pairs {
            assert!(
                it.any(|q| q == p),
                "pair {p:?} not in order in the full network"
            );
        }
        eprintln!(
            "n={n}: Batcher sort {} comparators, median selection {} comparators",
            full.len(),
            med.pairs.len()
        );
    }
    // Pinned counts of the pruned Batcher median networks. (Paeth's optimal median-of-9
    // network has 19 comparators; pruning Batcher's network by liveness keeps 24, of which
    // one never swaps on any input.)
    assert_eq!(
        selection_network(9, 4).unwrap().pairs.len(),
        MEDIAN_9_COMPARATORS
    );
    assert_eq!(
        selection_network(25, 12).unwrap().pairs.len(),
        MEDIAN_25_COMPARATORS
    );
}

const MEDIAN_9_COMPARATORS: usize = 24;
const MEDIAN_25_COMPARATORS: usize = 113;

/// Non-0-1 data with many ties: compare against a sort.
#[test]
fn selection_matches_sort_on_random_ties() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for n in [2usize, 3, 5, 9, 16, 25, 49, 81] {
        for rank in [0, (n - 1) / 2, n / 2, n - 1] {
            let net = selection_network(n, rank).unwrap();
            for _ in 0..200 {
                let v: Vec<i32> = (0..n).map(|_| (next() % 5) as i32 - 2).collect();
                let mut sorted = v.clone();
                sorted.sort();
                let mut wires = v.clone();
                apply(&net.pairs, &mut wires);
                assert_eq!(wires[rank], sorted[rank], "n={n} rank={rank} v={v:?}");
            }
        }
    }
}

#[test]
fn prune_keeps_everything_reaching_output() {
    // On a hand-made network: (0,1) (2,3) (1,2); output 0 needs only (0,1).
    let pairs = [(0, 1), (2, 3), (1, 2)];
    assert_eq!(prune_to_output(&pairs, 0, 4), vec![(0, 1)]);
    assert_eq!(prune_to_output(&pairs, 1, 4), vec![(0, 1), (2, 3), (1, 2)]);
    assert_eq!(prune_to_output(&pairs, 3, 4), vec![(2, 3)]);
}
