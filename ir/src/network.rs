//! Comparator networks: Batcher's odd-even merge sort for any `n`, selection networks pruned
//! to one output wire, and selection networks for inputs whose columns are already sorted
//! ([`sorted_columns_selection`], used by [`crate::passes::columns`]).
//!
//! A comparator `(i, j)` with `i < j` puts the minimum on wire `i` and the maximum on wire `j`
//! (the convention of [`crate::NodeKind::Network`]).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

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
/// for tools; the IR's own semantics live in [`crate::semantics`]).
pub fn apply<T: Ord + Copy>(pairs: &[(u32, u32)], wires: &mut [T]) {
    for &(i, j) in pairs {
        let (a, b) = (wires[i as usize], wires[j as usize]);
        wires[i as usize] = a.min(b);
        wires[j as usize] = a.max(b);
    }
}

/// Batcher's odd-even merge of two sorted lists, for any lengths: wires `0..p` carry the
/// first list ascending, wires `p..p + q` the second. Returns the comparators (`(i, j)`,
/// `i < j`, min on `i`) and, per rank `r < p + q`, the wire that holds the `r`-th smallest
/// value afterwards (a comparator on two wires puts its minimum on the lower-numbered one,
/// so ranks end up on a permutation of the wires rather than in wire order).
///
/// Recursion (Knuth, TAOCP 5.3.4): merge the even-indexed elements of both lists and the
/// odd-indexed ones; the result is the first even merge value, then each odd value
/// compared with the next even value. Every output wire is written by a comparator when
/// `p == q >= 1`. [`merge_network`]'s tests check every sorted 0-1 input for `p, q <= 12`.
pub fn merge_network(p: usize, q: usize) -> (Vec<(u32, u32)>, Vec<u32>) {
    /// A comparator on wires `x` and `y`: the minimum lands on the lower-numbered wire.
    fn compare(pairs: &mut Vec<(u32, u32)>, x: u32, y: u32) -> [u32; 2] {
        let (lo, hi) = (x.min(y), x.max(y));
        pairs.push((lo, hi));
        [lo, hi]
    }
    /// Merges the lists on wires `a` and `b` (each ascending by rank); returns the wires by
    /// rank.
    fn merge(a: &[u32], b: &[u32], pairs: &mut Vec<(u32, u32)>) -> Vec<u32> {
        match (a, b) {
            ([], _) => return b.to_vec(),
            (_, []) => return a.to_vec(),
            ([x], [y]) => return compare(pairs, *x, *y).to_vec(),
            _ => {}
        }
        let evens = |l: &[u32]| l.iter().step_by(2).copied().collect::<Vec<_>>();
        let odds = |l: &[u32]| l.iter().skip(1).step_by(2).copied().collect::<Vec<_>>();
        let v = merge(&evens(a), &evens(b), pairs);
        let w = merge(&odds(a), &odds(b), pairs);
        let n = a.len() + b.len();
        let mut out = vec![v[0]];
        let mut i = 0;
        while out.len() < n {
            match (w.get(i), v.get(i + 1)) {
                (Some(&x), Some(&y)) => out.extend(compare(pairs, x, y)),
                (Some(&x), None) => out.push(x),
                (None, Some(&y)) => out.push(y),
                (None, None) => break,
            }
            i += 1;
        }
        out
    }
    let a: Vec<u32> = (0..p as u32).collect();
    let b: Vec<u32> = (p as u32..(p + q) as u32).collect();
    let mut pairs = Vec::new();
    let ranks = merge(&a, &b, &mut pairs);
    (pairs, ranks)
}

/// Largest number of precondition 0-1 vectors, `(ky + 1)^kx`, for which
/// [`sorted_columns_selection`] derives a network (each wire's state is a bitset over them).
pub const MAX_PRECONDITION_VECTORS: usize = 1 << 20;

/// Most wires (`ky · kx`) [`sorted_columns_selection`] handles (its relation rows are `u64`
/// bit masks; the work budget below keeps real cases far smaller).
pub const MAX_SORTED_COLUMNS_WIRES: usize = 64;

/// Work budget of [`sorted_columns_selection`]: `n³ · ⌈(ky + 1)^kx / 64⌉` must not exceed
/// it (`n = ky · kx`; the greedy search tries O(n²) comparators per step, each costing O(n)
/// bitset comparisons). 5x5 (≈ 1.9 M) and 3x7 (≈ 2.4 M) are inside; 7x5 and 7x7 are not.
pub const MAX_DERIVATION_WORK: usize = 1 << 22;

/// A comparator network that selects the `rank`-th smallest (0-based) of `ky · kx` values
/// whose columns are already sorted: wire `c * ky + r` carries the `r`-th smallest value of
/// column `c` (`c < kx`, `r < ky`). Returns `None` when `ky < 2`, `kx < 2`,
/// `rank >= ky · kx`, `(ky + 1)^kx >` [`MAX_PRECONDITION_VECTORS`], the search would cost
/// more than [`MAX_DERIVATION_WORK`], or (never expected) the derived network fails its
/// exhaustive check. `width` is `ky · kx`, `pairs` is pruned to `output` with
/// [`prune_to_output`], and every pair is `(i, j)` with `i < j` (min on `i`).
///
/// Derivation (greedy poset elimination). The state is the set of input 0-1 vectors that
/// satisfy the precondition, `(ky + 1)^kx` of them (each column is `0..0 1..1`), kept as one
/// bitset per wire (bit `v` = the wire's value on vector `v`); a set `L` of live wires; and a
/// target rank `m` among the live wires (initially all wires and `rank`). `a <= b` is *known*
/// iff `bits(a) ⊆ bits(b)`: then `a <= b` holds for every real input with sorted columns,
/// because thresholding such an input at any `t` gives a precondition 0-1 vector and
/// comparators commute with thresholding. Invariant: the `m`-th smallest live wire equals the
/// `rank`-th smallest input. A live wire `w` is eliminated (repeatedly, lowest index first)
/// when
/// - at least `|L| - m` other live wires are known `>= w`: some sorted order of the live
///   values puts `w` before all of them, at position `<= m - 1`; removing an element before
///   position `m` moves the element at `m` to `m - 1`, so `w` is dropped and `m` decremented;
/// - at least `m + 1` other live wires are known `<= w`: `w` can be placed after them, at a
///   position `> m`, and removing it leaves position `m` unchanged, so `w` is dropped.
///
/// Ties do not matter: equal values are interchangeable, so the value at position `m` is the
/// same for every sorted order. Each step applies, among the pairs `a < b` of live wires
/// known incomparable, the comparator (min on `a`, max on `b`) maximising (wires eliminated
/// afterwards, then comparable live pairs afterwards); the first maximum in index order wins,
/// so the result is deterministic. When one live wire remains it holds the target value.
///
/// Check: the pruned network is simulated on every precondition vector and its output must be
/// the `rank`-th smallest bit (a vector with `z` ones has 1 there iff `z >= n - rank`). By the
/// 0-1 principle restricted to the precondition (valid because thresholding preserves sorted
/// columns) this proves the network for every real input with sorted columns.
///
/// Results are memoised process-wide: the search takes about 3 ms for 5x5 (0.2 ms for 3x5,
/// 30 µs for 3x3, measured on the 2-core dev VM), which a kernel compile should pay once.
pub fn sorted_columns_selection(ky: usize, kx: usize, rank: usize) -> Option<Network> {
    if ky < 2 || kx < 2 {
        return None;
    }
    let n = ky.checked_mul(kx)?;
    if rank >= n || n > MAX_SORTED_COLUMNS_WIRES {
        return None;
    }
    let vectors = (ky + 1).checked_pow(u32::try_from(kx).ok()?)?;
    if vectors > MAX_PRECONDITION_VECTORS {
        return None;
    }
    let words = vectors.div_ceil(64);
    if n.checked_pow(3)?.checked_mul(words)? > MAX_DERIVATION_WORK {
        return None;
    }
    type Memo = Mutex<HashMap<(usize, usize, usize), Option<Network>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (ky, kx, rank);
    if let Some(hit) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    // Derived outside the lock: two threads may both derive the same (deterministic) result.
    // Two searches: from the sorted columns alone, and after sorting every row and every
    // anti-diagonal first (Paeth's structure; far fewer greedy steps, so far cheaper to
    // search). The first is tried only when small; the network with fewer live min/max wins.
    let structured = derive_sorted_columns(ky, kx, rank, vectors, &rows_and_diagonals(ky, kx));
    let net = if vectors <= GREEDY_ONLY_MAX_VECTORS {
        let plain = derive_sorted_columns(ky, kx, rank, vectors, &[]);
        match (plain, structured) {
            (Some(p), Some(s)) => Some(if live_ops(&s) < live_ops(&p) { s } else { p }),
            (p, s) => p.or(s),
        }
    } else {
        structured
    };
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, net.clone());
    net
}

/// A comparator network that selects the `rank`-th smallest (0-based) of values that come
/// in sorted groups: wires `start..start + sizes[g]` (`start` the sum of the earlier sizes)
/// carry group `g` ascending. The derivation and its exhaustive check are those of
/// [`sorted_columns_selection`] (which is the case of `kx` groups of `ky`), over the
/// `∏ (sizes[g] + 1)` precondition 0-1 vectors, from the sorted groups alone. Returns `None`
/// under the same limits: fewer than two groups, an empty group, `rank >= n`, more than
/// [`MAX_SORTED_COLUMNS_WIRES`] wires, more than [`MAX_PRECONDITION_VECTORS`] vectors, or
/// more than [`MAX_DERIVATION_WORK`]. Memoised process-wide.
pub fn sorted_groups_selection(sizes: &[usize], rank: usize) -> Option<Network> {
    if sizes.len() < 2 || sizes.contains(&0) {
        return None;
    }
    let n = sizes
        .iter()
        .try_fold(0usize, |acc, &s| acc.checked_add(s))?;
    if rank >= n || n > MAX_SORTED_COLUMNS_WIRES {
        return None;
    }
    let vectors = sizes.iter().try_fold(1usize, |acc, &s| {
        acc.checked_mul(s + 1)
            .filter(|&v| v <= MAX_PRECONDITION_VECTORS)
    })?;
    if n.checked_pow(3)?.checked_mul(vectors.div_ceil(64))? > MAX_DERIVATION_WORK {
        return None;
    }
    type Memo = Mutex<HashMap<(Vec<usize>, usize), Option<Network>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (sizes.to_vec(), rank);
    if let Some(hit) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let net = derive_sorted_groups(sizes, rank, vectors, &[]);
    memo.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, net.clone());
    net
}

/// Largest precondition size for which [`sorted_columns_selection`] also runs the greedy
/// search from the sorted columns alone (3x3: 64 vectors, 3x5: 1024; 5x5's 7776 would take
/// ~3 ms, and the structured search finds a cheaper network there anyway: 94 vs 102 ops).
const GREEDY_ONLY_MAX_VECTORS: usize = 4096;

/// Comparators sorting each row (rank `r` of every column, wires `c * ky + r`) and then each
/// anti-diagonal (`c + r` constant, ascending `r`), Batcher networks: after them the matrix
/// is sorted along rows, columns and anti-diagonals.
fn rows_and_diagonals(ky: usize, kx: usize) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    let mut sort = |wires: &[usize]| {
        for (i, j) in batcher_sort(wires.len()) {
            let (a, b) = (wires[i as usize], wires[j as usize]);
            pairs.push((a.min(b) as u32, a.max(b) as u32));
        }
    };
    for r in 0..ky {
        sort(&(0..kx).map(|c| c * ky + r).collect::<Vec<_>>());
    }
    for d in 0..ky + kx - 1 {
        // Ascending row means descending column along an anti-diagonal.
        let wires: Vec<usize> = (0..ky)
            .filter(|&r| d >= r && d - r < kx)
            .map(|r| (d - r) * ky + r)
            .collect();
        sort(&wires);
    }
    pairs
}

/// Number of min/max values a network computes for its output (a comparator both of whose
/// wires are used later costs two, one whose one wire is used costs one).
pub fn live_ops(net: &Network) -> usize {
    let mut live = vec![false; net.width as usize];
    if let Some(l) = live.get_mut(net.output as usize) {
        *l = true;
    }
    let mut ops = 0;
    for &(i, j) in net.pairs.iter().rev() {
        let (li, lj) = (live[i as usize], live[j as usize]);
        ops += usize::from(li) + usize::from(lj);
        if li || lj {
            live[i as usize] = true;
            live[j as usize] = true;
        }
    }
    ops
}

/// `a ⊆ b` for two bitsets of equal length.
fn subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// The elimination rules of [`sorted_columns_selection`] on the `live` wire set and target
/// `m`; `rel` is the known-`<=` relation. Lowest index first, restarting after each removal.
fn eliminate(rel: &Relation, live: &mut u64, m: &mut usize) {
    loop {
        let l = live.count_ones() as usize;
        if l <= 1 {
            return;
        }
        let mut hit = None;
        let mut rest = *live;
        while rest != 0 {
            let w = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if (rel.up[w] & *live).count_ones() as usize >= l - *m {
                hit = Some((w, true));
                break;
            }
            if (rel.down[w] & *live).count_ones() as usize > *m {
                hit = Some((w, false));
                break;
            }
        }
        let Some((w, up)) = hit else { return };
        *live &= !(1u64 << w);
        if up {
            // At most l - 1 wires are above w, so the rule only fires with m >= 1.
            *m -= 1;
        }
    }
}

/// The known-`<=` relation between wires as bit rows (`n <= 64`): bit `b` of `up[a]` and bit
/// `a` of `down[b]` are set iff `a <= b` is known (`a != b`). Only entries between live wires
/// are kept up to date.
#[derive(Clone)]
struct Relation {
    up: Vec<u64>,
    down: Vec<u64>,
}

impl Relation {
    /// Number of pairs of `live` wires known comparable.
    fn comparable_pairs(&self, live: u64) -> usize {
        let mut count = 0;
        let mut rest = live;
        while rest != 0 {
            let x = rest.trailing_zeros();
            rest &= rest - 1;
            let higher = !((1u64 << x) << 1).wrapping_sub(1);
            count += ((self.up[x as usize] | self.down[x as usize]) & live & higher).count_ones();
        }
        count as usize
    }

    /// Sets `trial` to this relation after the comparator `(a, b)` (min on `a`, max on `b`,
    /// `a` and `b` live and incomparable), and `na`/`nb` to the new bitsets of `a` and `b`.
    #[allow(clippy::too_many_arguments)]
    fn after(
        &self,
        bits: &[u64],
        words: usize,
        live: u64,
        a: usize,
        b: usize,
        na: &mut [u64],
        nb: &mut [u64],
        trial: &mut Relation,
    ) {
        let (wa, wb) = (
            &bits[a * words..(a + 1) * words],
            &bits[b * words..(b + 1) * words],
        );
        for k in 0..words {
            na[k] = wa[k] & wb[k];
            nb[k] = wa[k] | wb[k];
        }
        trial.up.copy_from_slice(&self.up);
        trial.down.copy_from_slice(&self.down);
        let others = live & !(1u64 << a) & !(1u64 << b);
        // u <= min(a, b) iff u <= a and u <= b; max(a, b) <= u iff a <= u and b <= u.
        let down_a = self.down[a] & self.down[b] & others;
        let up_b = self.up[a] & self.up[b] & others;
        // min(a, b) <= u and u <= max(a, b) follow from one known relation; else compare.
        let mut up_a = (self.up[a] | self.up[b]) & others;
        let mut down_b = (self.down[a] | self.down[b]) & others;
        let mut rest = others;
        while rest != 0 {
            let u = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let wu = &bits[u * words..(u + 1) * words];
            if up_a >> u & 1 == 0 && subset(na, wu) {
                up_a |= 1 << u;
            }
            if down_b >> u & 1 == 0 && subset(wu, nb) {
                down_b |= 1 << u;
            }
        }
        // min <= max; max <= min would need equal wires, and they are incomparable.
        trial.up[a] = up_a | 1 << b;
        trial.down[a] = down_a;
        trial.up[b] = up_b;
        trial.down[b] = down_b | 1 << a;
        let mut rest = others;
        while rest != 0 {
            let u = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let set =
                |row: u64, bit: usize, on: bool| (row & !(1u64 << bit)) | u64::from(on) << bit;
            trial.up[u] = set(trial.up[u], a, down_a >> u & 1 == 1);
            trial.up[u] = set(trial.up[u], b, down_b >> u & 1 == 1);
            trial.down[u] = set(trial.down[u], a, up_a >> u & 1 == 1);
            trial.down[u] = set(trial.down[u], b, up_b >> u & 1 == 1);
        }
    }
}

/// The known-`<=` relation of `n` wires from their bitsets.
fn relation(bits: &[u64], words: usize, n: usize) -> Relation {
    let wire = |w: usize| w * words..(w + 1) * words;
    let mut rel = Relation {
        up: vec![0; n],
        down: vec![0; n],
    };
    for a in 0..n {
        for b in 0..n {
            if a != b && subset(&bits[wire(a)], &bits[wire(b)]) {
                rel.up[a] |= 1 << b;
                rel.down[b] |= 1 << a;
            }
        }
    }
    rel
}

/// The search of [`sorted_columns_selection`] (arguments already checked, `n <= 64`).
fn derive_sorted_columns(
    ky: usize,
    kx: usize,
    rank: usize,
    vectors: usize,
    prefix: &[(u32, u32)],
) -> Option<Network> {
    derive_sorted_groups(&vec![ky; kx], rank, vectors, prefix)
}

/// The search of [`sorted_groups_selection`]: wires `start(g)..start(g) + sizes[g]` carry
/// group `g` ascending (arguments already checked: `vectors` is the product of
/// `sizes[g] + 1`, at most 64 wires).
fn derive_sorted_groups(
    sizes: &[usize],
    rank: usize,
    vectors: usize,
    prefix: &[(u32, u32)],
) -> Option<Network> {
    let n: usize = sizes.iter().sum();
    let words = vectors.div_ceil(64);
    // Initial wire bitsets and the expected output bitset.
    let mut bits = vec![0u64; n * words];
    let mut expect = vec![0u64; words];
    for v in 0..vectors {
        let (word, bit) = (v / 64, 1u64 << (v % 64));
        let mut rest = v;
        let mut ones = 0;
        let mut start = 0;
        for &size in sizes {
            let z = rest % (size + 1);
            rest /= size + 1;
            ones += z;
            for w in start + size - z..start + size {
                bits[w * words + word] |= bit;
            }
            start += size;
        }
        if ones >= n - rank {
            expect[word] |= bit;
        }
    }
    let initial = bits.clone();
    let wire = |w: usize| w * words..(w + 1) * words;
    let mut rel = relation(&bits, words, n);
    let mut live: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut m = rank;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let (mut na, mut nb) = (vec![0u64; words], vec![0u64; words]);
    let mut trial = rel.clone();
    // Applies the comparator `(a, b)` (incomparable live wires): relation and bitsets.
    let apply = |rel: &mut Relation,
                 trial: &mut Relation,
                 bits: &mut Vec<u64>,
                 live: u64,
                 a: usize,
                 b: usize| {
        let (mut na, mut nb) = (vec![0u64; words], vec![0u64; words]);
        rel.after(bits, words, live, a, b, &mut na, &mut nb, trial);
        std::mem::swap(rel, trial);
        bits[a * words..(a + 1) * words].copy_from_slice(&na);
        bits[b * words..(b + 1) * words].copy_from_slice(&nb);
    };
    // The fixed prefix first (comparators that can never exchange are skipped).
    for &(a, b) in prefix {
        let (a, b) = (a as usize, b as usize);
        if a >= b || b >= n || rel.up[a] >> b & 1 == 1 {
            continue;
        }
        if rel.down[a] >> b & 1 == 1 {
            // Always exchanges: not an incomparable pair; apply it as a plain comparator.
            let (wa, wb) = (bits[wire(a)].to_vec(), bits[wire(b)].to_vec());
            bits[wire(a)].copy_from_slice(&wb);
            bits[wire(b)].copy_from_slice(&wa);
            rel = relation(&bits, words, n);
            trial = rel.clone();
            pairs.push((a as u32, b as u32));
            continue;
        }
        apply(&mut rel, &mut trial, &mut bits, live, a, b);
        pairs.push((a as u32, b as u32));
    }
    eliminate(&rel, &mut live, &mut m);

    let max_steps = 4 * n * n;
    while live.count_ones() > 1 {
        if pairs.len() >= max_steps {
            return None;
        }
        // (score, a, b): the best comparator so far.
        let mut best: Option<((u32, usize), usize, usize)> = None;
        let mut rest_a = live;
        while rest_a != 0 {
            let a = rest_a.trailing_zeros() as usize;
            rest_a &= rest_a - 1;
            // Live wires above a that are incomparable with a.
            let mut rest_b = rest_a & !rel.up[a] & !rel.down[a];
            while rest_b != 0 {
                let b = rest_b.trailing_zeros() as usize;
                rest_b &= rest_b - 1;
                rel.after(&bits, words, live, a, b, &mut na, &mut nb, &mut trial);
                let (mut trial_live, mut tm) = (live, m);
                eliminate(&trial, &mut trial_live, &mut tm);
                let score = (
                    live.count_ones() - trial_live.count_ones(),
                    trial.comparable_pairs(trial_live),
                );
                if best.is_none_or(|(s, _, _)| score > s) {
                    best = Some((score, a, b));
                }
            }
        }
        // Live wires are never all comparable (the rules would have left one), but do not
        // loop if they were.
        let (_, a, b) = best?;
        apply(&mut rel, &mut trial, &mut bits, live, a, b);
        pairs.push((a as u32, b as u32));
        eliminate(&rel, &mut live, &mut m);
    }
    let output = live.trailing_zeros() as usize;
    let pruned = prune_to_output(&pairs, output as u32, n as u32);

    // Exhaustive check on every precondition vector.
    let mut sim = initial;
    for &(i, j) in &pruned {
        let (i, j) = (i as usize, j as usize);
        for k in 0..words {
            let (x, y) = (sim[i * words + k], sim[j * words + k]);
            sim[i * words + k] = x & y;
            sim[j * words + k] = x | y;
        }
    }
    if sim[wire(output)] != expect[..] {
        return None;
    }
    Some(Network {
        width: n as u32,
        pairs: pruned,
        output: output as u32,
    })
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

    /// Runs `pairs` on every precondition vector of a `ky x kx` sorted-columns input and
    /// checks wire `output` against the `rank`-th smallest bit (independent of the search's
    /// own check: plain per-vector simulation).
    fn check_sorted_columns(ky: usize, kx: usize, rank: usize, net: &Network) -> bool {
        check_sorted_groups(&vec![ky; kx], rank, net)
    }

    /// Whether `merge_network(p, q)` merges every pair of sorted 0-1 lists: wire `rank[r]`
    /// must then hold the `r`-th smallest bit.
    fn merges_all_sorted_01_inputs(p: usize, q: usize, pairs: &[(u32, u32)], rank: &[u32]) -> bool {
        (0..=p).all(|za| {
            (0..=q).all(|zb| {
                // `za` ones at the top of the first list, `zb` at the top of the second.
                let mut wires: Vec<u8> = (0..p + q)
                    .map(|w| u8::from(if w < p { w >= p - za } else { w - p >= q - zb }))
                    .collect();
                apply(pairs, &mut wires);
                (0..p + q).all(|r| wires[rank[r] as usize] == u8::from(r >= p + q - za - zb))
            })
        })
    }

    #[test]
    fn merge_network_merges_every_sorted_01_input() {
        for p in 0..=12 {
            for q in 0..=12 {
                let (pairs, rank) = merge_network(p, q);
                assert!(pairs.iter().all(|&(i, j)| i < j && (j as usize) < p + q));
                let mut seen = rank.clone();
                seen.sort_unstable();
                assert_eq!(seen, (0..(p + q) as u32).collect::<Vec<_>>(), "{p}+{q}");
                assert!(merges_all_sorted_01_inputs(p, q, &pairs, &rank), "{p}+{q}");
            }
        }
        // Batcher's merge of two sorted lists of 4 has 9 comparators, of 8 has 25.
        assert_eq!(merge_network(4, 4).0.len(), 9);
        assert_eq!(merge_network(8, 8).0.len(), 25);
    }

    #[test]
    fn merge_network_equal_halves_write_every_output() {
        for p in 1..=12 {
            let (pairs, rank) = merge_network(p, p);
            for &w in &rank {
                assert!(
                    pairs.iter().any(|&(i, j)| i == w || j == w),
                    "{p}+{p} wire {w}"
                );
            }
        }
    }

    #[test]
    fn merge_check_can_fail() {
        let (pairs, rank) = merge_network(5, 5);
        for skip in 0..pairs.len() {
            let mut p = pairs.clone();
            p.remove(skip);
            assert!(
                !merges_all_sorted_01_inputs(5, 5, &p, &rank),
                "dropped {skip}"
            );
        }
        let mut swapped = rank.clone();
        swapped.swap(4, 5);
        assert!(!merges_all_sorted_01_inputs(5, 5, &pairs, &swapped));
    }

    /// Runs `net` on every precondition vector of sorted groups of `sizes` and checks its
    /// output against the `rank`-th smallest bit (plain per-vector simulation).
    fn check_sorted_groups(sizes: &[usize], rank: usize, net: &Network) -> bool {
        let n: usize = sizes.iter().sum();
        let mut z = vec![0usize; sizes.len()];
        loop {
            let mut wires = Vec::with_capacity(n);
            for (g, &size) in sizes.iter().enumerate() {
                wires.extend((0..size).map(|r| u8::from(r >= size - z[g])));
            }
            let mut sorted = wires.clone();
            sorted.sort_unstable();
            apply(&net.pairs, &mut wires);
            if wires[net.output as usize] != sorted[rank] {
                return false;
            }
            let mut g = 0;
            while g < sizes.len() && z[g] == sizes[g] {
                z[g] = 0;
                g += 1;
            }
            if g == sizes.len() {
                return true;
            }
            z[g] += 1;
        }
    }

    #[test]
    fn sorted_groups_every_rank() {
        for sizes in [
            vec![1usize, 1],
            vec![6, 3],
            vec![8, 8],
            vec![6, 6, 3],
            vec![10, 10, 5],
            vec![2, 7, 4],
        ] {
            let n: usize = sizes.iter().sum();
            for rank in 0..n {
                let net = sorted_groups_selection(&sizes, rank)
                    .unwrap_or_else(|| panic!("{sizes:?} rank {rank}"));
                assert_eq!(net.width as usize, n);
                assert!(net.pairs.iter().all(|&(i, j)| i < j && (j as usize) < n));
                assert!(
                    check_sorted_groups(&sizes, rank, &net),
                    "{sizes:?} rank {rank}"
                );
            }
        }
        // Equal groups are the sorted-columns case, searched from the columns alone.
        let groups = sorted_groups_selection(&[3, 3, 3], 4).unwrap();
        assert_eq!(groups, derive_sorted_columns(3, 3, 4, 64, &[]).unwrap());
        let mut broken = sorted_groups_selection(&[10, 10, 5], 12).unwrap();
        assert!(!check_sorted_groups(&[10, 10, 5], 11, &broken));
        broken.pairs.pop();
        assert!(!check_sorted_groups(&[10, 10, 5], 12, &broken));
    }

    #[test]
    fn sorted_groups_refusals() {
        assert!(sorted_groups_selection(&[5], 2).is_none());
        assert!(sorted_groups_selection(&[], 0).is_none());
        assert!(sorted_groups_selection(&[3, 0, 3], 2).is_none());
        assert!(sorted_groups_selection(&[3, 3], 6).is_none());
        assert!(sorted_groups_selection(&[40, 30], 10).is_none());
        assert!(sorted_groups_selection(&[usize::MAX, 2], 0).is_none());
        // 8^7 precondition vectors, and 15^3 * 8 over the work budget.
        assert!(sorted_groups_selection(&[7; 7], 24).is_none());
        assert!(sorted_groups_selection(&[14, 14, 14, 7], 24).is_none());
    }

    #[test]
    fn sorted_columns_3x3_median_is_paeths_size() {
        let net = sorted_columns_selection(3, 3, 4).unwrap();
        assert_eq!(net.width, 9);
        assert!(net.pairs.iter().all(|&(i, j)| i < j && j < 9));
        assert!(check_sorted_columns(3, 3, 4, &net));
        // Live min/max operations: each comparator counts its outputs that reach the result.
        let mut live = [false; 9];
        live[net.output as usize] = true;
        let mut ops = 0;
        for &(i, j) in net.pairs.iter().rev() {
            ops += usize::from(live[i as usize]) + usize::from(live[j as usize]);
            live[i as usize] = true;
            live[j as usize] = true;
        }
        assert_eq!(ops, 12, "Paeth's 3x3 merge: 12 min/max operations");
    }

    #[test]
    fn sorted_columns_every_rank_small_boxes() {
        for (ky, kx) in [
            (2, 2),
            (2, 3),
            (3, 2),
            (3, 3),
            (3, 5),
            (5, 3),
            (4, 4),
            (5, 5),
        ] {
            for rank in 0..ky * kx {
                let net = sorted_columns_selection(ky, kx, rank)
                    .unwrap_or_else(|| panic!("{ky}x{kx} rank {rank}"));
                assert_eq!(net.width as usize, ky * kx);
                assert!(
                    check_sorted_columns(ky, kx, rank, &net),
                    "{ky}x{kx} rank {rank} wrong"
                );
            }
        }
    }

    #[test]
    fn sorted_columns_checker_can_fail() {
        let mut net = sorted_columns_selection(3, 3, 4).unwrap();
        net.pairs.pop();
        assert!(!check_sorted_columns(3, 3, 4, &net));
        let net = sorted_columns_selection(3, 3, 4).unwrap();
        assert!(!check_sorted_columns(3, 3, 3, &net));
    }

    #[test]
    fn sorted_columns_refusals() {
        assert!(sorted_columns_selection(1, 5, 2).is_none());
        assert!(sorted_columns_selection(5, 1, 2).is_none());
        assert!(sorted_columns_selection(3, 3, 9).is_none());
        // 8^7 = 2^21 precondition vectors.
        assert!(sorted_columns_selection(7, 7, 24).is_none());
        assert!(sorted_columns_selection(usize::MAX, 2, 0).is_none());
        // Over the work budget (8^5 vectors, 35 wires), and more than 64 wires.
        assert!(sorted_columns_selection(7, 5, 17).is_none());
        assert!(sorted_columns_selection(33, 2, 32).is_none());
        // 3x7 is inside both limits.
        assert!(sorted_columns_selection(3, 7, 10).is_some());
    }

    #[test]
    fn sorted_columns_is_deterministic_and_memoised() {
        let a = sorted_columns_selection(3, 5, 7).unwrap();
        let plain = derive_sorted_columns(3, 5, 7, 4usize.pow(5), &[]).unwrap();
        let structured =
            derive_sorted_columns(3, 5, 7, 4usize.pow(5), &rows_and_diagonals(3, 5)).unwrap();
        let b = if live_ops(&structured) < live_ops(&plain) {
            structured
        } else {
            plain
        };
        assert_eq!(a, b);
        assert_eq!(sorted_columns_selection(3, 5, 7).unwrap(), a);
    }

    #[test]
    fn the_structured_search_is_cheaper_for_5x5() {
        // The row/anti-diagonal prefix gives 94 live min/max for the 5x5 median against 102
        // from the sorted columns alone (and 202 for the pruned Batcher selector).
        let structured =
            derive_sorted_columns(5, 5, 12, 6usize.pow(5), &rows_and_diagonals(5, 5)).unwrap();
        let plain = derive_sorted_columns(5, 5, 12, 6usize.pow(5), &[]).unwrap();
        assert!(live_ops(&structured) < live_ops(&plain));
        assert_eq!(sorted_columns_selection(5, 5, 12).unwrap(), structured);
        assert!(live_ops(&structured) < live_ops(&selection_network(25, 12).unwrap()) / 2);
    }
}
