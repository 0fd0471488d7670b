//! Comparator networks: Batcher's odd-even merge sort for any `n`, and selection networks
//! pruned to one output wire.
//!
//! A comparator `(i, j)` with `i < j` puts the minimum on wire `i` and the maximum on wire `j`
//! (the convention of [`kiln_ir::NodeKind::Network`]).

/// A comparator network that computes one output wire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Network {
    /// Number of wires (equal to the number of inputs: no padding wires are needed).
    pub width: u32,
    /// Compare-exchange pairs `(i, j)`, `i < j`, applied in order.
    pub pairs: Vec<(u32, u32)>,
    /// The wire holding the result after the last pair.
    pub output: u32,
}

/// Batcher's odd-even merge sorting network on `n` wires (Batcher 1968).
///
/// Built for the next power of two `p >= n` and then restricted to the first `n` wires: the
/// padding wires `n..p` would hold +∞ (the top of the order), so any comparator `(i, j)` with
/// `j >= n` leaves both wires unchanged and is dropped (and `i < j` means no kept comparator
/// touches a padding wire). The result sorts ascending: wire `r` ends with the `r`-th smallest
/// input. `n == 0` and `n == 1` give no comparators.
pub fn batcher_sort(n: usize) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    if n < 2 {
        return pairs;
    }
    let pow = n.next_power_of_two();
    // Iterative odd-even merge sort on `pow` wires: merge sorted runs of length `p` into runs
    // of length `2p`; within a merge, compare at distance `k = p, p/2, .., 1`.
    let mut p = 1;
    while p < pow {
        let mut k = p;
        while k >= 1 {
            let mut j = k % p;
            while j + k < pow {
                for i in 0..k.min(pow - j - k) {
                    let a = i + j;
                    let b = i + j + k;
                    // Both wires must lie in the same run of length 2p being merged.
                    if a / (2 * p) == b / (2 * p) && b < n {
                        pairs.push((a as u32, b as u32));
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        p *= 2;
    }
    pairs
}

/// Keeps only the comparators of `pairs` that can influence wire `output` (backward liveness:
/// walking the pairs from last to first, a pair is kept when it touches a live wire, and then
/// both its wires become live). Order is preserved.
pub fn prune_to_output(pairs: &[(u32, u32)], output: u32, width: u32) -> Vec<(u32, u32)> {
    let mut live = vec![false; width as usize];
    if (output as usize) < live.len() {
        live[output as usize] = true;
    }
    let mut kept = Vec::new();
    for &(i, j) in pairs.iter().rev() {
        if live[i as usize] || live[j as usize] {
            live[i as usize] = true;
            live[j as usize] = true;
            kept.push((i, j));
        }
    }
    kept.reverse();
    kept
}

/// The Batcher sorting network on `n` wires pruned to the comparators that reach wire `rank`:
/// its `output` wire holds the `rank`-th smallest input (0-based; `rank = (n - 1) / 2` is the
/// lower median). Returns `None` when `n == 0` or `rank >= n`.
pub fn selection_network(n: usize, rank: usize) -> Option<Network> {
    if n == 0 || rank >= n || n > u32::MAX as usize {
        return None;
    }
    let sort = batcher_sort(n);
    let pairs = prune_to_output(&sort, rank as u32, n as u32);
    Some(Network {
        width: n as u32,
        pairs,
        output: rank as u32,
    })
}

/// Applies `pairs` to a slice of values ordered by `Ord` (a reference evaluator for tests and
/// for tools; the IR's own semantics live in `kiln_ir::semantics`).
pub fn apply<T: Ord + Copy>(pairs: &[(u32, u32)], wires: &mut [T]) {
    for &(i, j) in pairs {
        let (a, b) = (wires[i as usize], wires[j as usize]);
        wires[i as usize] = a.min(b);
        wires[j as usize] = a.max(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_counts() {
        assert!(batcher_sort(0).is_empty());
        assert!(batcher_sort(1).is_empty());
        assert_eq!(batcher_sort(2), vec![(0, 1)]);
        // Batcher's network for 4 wires has 5 comparators, for 8 wires 19, for 16 wires 63.
        assert_eq!(batcher_sort(4).len(), 5);
        assert_eq!(batcher_sort(8).len(), 19);
        assert_eq!(batcher_sort(16).len(), 63);
    }

    #[test]
    fn pairs_are_ordered_and_in_range() {
        for n in 1..70 {
            for &(i, j) in &batcher_sort(n) {
                assert!(i < j && (j as usize) < n, "n={n} pair ({i},{j})");
            }
        }
    }

    #[test]
    fn bad_selection_arguments() {
        assert!(selection_network(0, 0).is_none());
        assert!(selection_network(3, 3).is_none());
        let one = selection_network(1, 0).unwrap();
        assert!(one.pairs.is_empty());
    }
}
