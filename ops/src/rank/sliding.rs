//! The fast path of the rank programs: a sliding histogram over order codes.
//!
//! Scope: any dtype, footprint, border, origin and `[B, C, S1..Sd]` layout. Per plane:
//! 1. every element gets a *code*, a small integer in the order of its key: the key itself
//!    for bool, 8- and 16-bit data (2, 256 or 65536 codes), its rank among the plane's
//!    distinct keys for i32, u32, f32 and f64 (one sort per plane); the poison values (NaN,
//!    and ±Inf for kornia's `median_blur`) get a sentinel code counted apart;
//! 2. the codes are padded once per plane through the border rule (`remap_index` per axis,
//!    the constant's code outside a constant border), so every window read is an index;
//! 3. lines along the last axis are split over rayon workers, each with its own histogram:
//!    a line starts with its first window added, then moves one point at a time removing the
//!    footprint's leading entries and adding its trailing ones (per footprint row, Huang's
//!    update; a box is one add and one remove per row, any footprint its own lists), and
//!    ends by removing its last window, leaving the histogram empty for the next line.
//!
//! The histogram is hierarchical with fan-out 16 (65536 codes: levels of 65536, 4096, 256
//! and 16 counters): an update is one increment per level, a selection scans at most 16
//! counters per level. The cost per point is `O(r · log₁₆ K)` for `r` footprint rows and
//! `K` codes: independent of the window's width, and `O(log)` in the number of codes.
//!
//! Exactness: the selected code is the one with `rank` codes below it counted with
//! multiplicity, i.e. the `rank`-th smallest key of the window, mapped back to its value;
//! keys are a bijection on non-NaN values monotone in the networks' order
//! ([`super::keys`]), so the value is the network's selection bit for bit. The NaN rules
//! are `super::decide`'s, applied through the poison count. A one-entry window is a plain
//! move (it keeps NaN payloads) and is served by the reference, which is exact and `O(1)`
//! per point there.
//!
//! Limits: scratch is the padded plane's codes (4 bytes a point), the plane's key table
//! for the wide dtypes (8 bytes a point) and a histogram per worker (`≈ 4.3 K` bytes); the
//! total is checked against available memory before anything is allocated.

use rayon::prelude::*;

use kiln_ir::semantics::remap_index;
use kiln_ir::{Border, DType};
use kiln_runtime::memory::ensure_fits;
use kiln_runtime::Tensor;

use super::keys::{
    canonical_nan, direct_bins, is_nan, is_non_finite, key_raw, order_key, raw_elements,
    scalar_raw, storage_from_raw,
};
use super::{Geometry, Poison, RankSpec};
use crate::program::RunError;

/// The code of a poison value (NaN, or non-finite for kornia): never in the histogram.
const SENTINEL: u32 = u32::MAX;

/// Level starts and total length of a histogram of `bins` codes (finest level first).
fn levels_for(bins: usize) -> (Vec<usize>, usize) {
    let mut starts = vec![0];
    let mut size = bins.max(1);
    let mut total = size;
    while size > 16 {
        size = size.div_ceil(16);
        starts.push(total);
        total += size;
    }
    (starts, total)
}

/// A histogram of codes `0..K` with `L` fan-out-16 levels (see the module header); `L` is a
/// constant so that updates and selections unroll.
struct Hist<const L: usize> {
    counts: Vec<u32>,
    /// Start of each level in `counts`, finest first.
    starts: [usize; L],
    /// Number of sentinel codes in the window.
    poison: u32,
}

impl<const L: usize> Hist<L> {
    fn new(bins: usize) -> Hist<L> {
        let (v, total) = levels_for(bins);
        let mut starts = [0; L];
        starts.copy_from_slice(&v);
        Hist {
            counts: vec![0; total],
            starts,
            poison: 0,
        }
    }

    #[inline(always)]
    fn add(&mut self, code: u32) {
        if code == SENTINEL {
            self.poison += 1;
            return;
        }
        let mut c = code as usize;
        for s in self.starts {
            self.counts[s + c] += 1;
            c >>= 4;
        }
    }

    #[inline(always)]
    fn remove(&mut self, code: u32) {
        if code == SENTINEL {
            self.poison -= 1;
            return;
        }
        let mut c = code as usize;
        for s in self.starts {
            self.counts[s + c] -= 1;
            c >>= 4;
        }
    }

    /// The code with exactly `rank` entries below it (the window holds more than `rank`
    /// non-poison entries).
    #[inline(always)]
    fn select(&self, mut rank: u32) -> u32 {
        let mut idx = 0usize;
        for l in (0..L).rev() {
            let s = self.starts[l];
            let mut j = idx << 4;
            loop {
                let c = self.counts[s + j];
                if rank < c {
                    break;
                }
                rank -= c;
                j += 1;
            }
            idx = j;
        }
        idx as u32
    }
}

/// What every line of one plane shares.
struct Lines<'a> {
    dtype: DType,
    padded: &'a [u32],
    moves: &'a Moves,
    /// Output extents (spatial) and padded extents.
    spatial: &'a [usize],
    pshape: &'a [usize],
    rank: u32,
    /// Key of each code for the ranked dtypes (`None`: the code is the key).
    table: Option<&'a [u64]>,
    bins: usize,
}

impl Lines<'_> {
    /// Fills `dst`, the output lines `first..`, with one histogram of `L` levels.
    fn run<const L: usize>(&self, first: usize, dst: &mut [u64]) {
        let nd = self.spatial.len();
        let width = self.spatial[nd - 1];
        let pwidth = self.pshape[nd - 1];
        let nan = canonical_nan(self.dtype);
        let padded = self.padded;
        let mv = self.moves;
        let mut h = Hist::<L>::new(self.bins);
        for (li, line) in dst.chunks_mut(width).enumerate() {
            // Padded position of the line's first output point.
            let mut rest = first + li;
            let mut base = 0usize;
            let mut mul = pwidth;
            for k in (0..nd - 1).rev() {
                base += (rest % self.spatial[k]) * mul;
                rest /= self.spatial[k];
                mul *= self.pshape[k];
            }
            for &o in &mv.all {
                h.add(padded[base + o]);
            }
            for (xi, o) in line.iter_mut().enumerate() {
                if xi > 0 {
                    let at = base + xi - 1;
                    for &r in &mv.remove {
                        h.remove(padded[at + r]);
                    }
                    for &a in &mv.add {
                        h.add(padded[at + a]);
                    }
                }
                *o = if h.poison > 0 {
                    nan
                } else {
                    let c = h.select(self.rank);
                    match self.table {
                        None => key_raw(self.dtype, c as u64),
                        Some(t) => key_raw(self.dtype, t[c as usize]),
                    }
                };
            }
            let last = base + width - 1;
            for &o in &mv.all {
                h.remove(padded[last + o]);
            }
        }
    }

    /// [`Lines::run`] with the level count of `bins` codes (at most 8: codes are `u32`).
    fn run_any(&self, first: usize, dst: &mut [u64]) {
        match levels_for(self.bins).0.len() {
            1 => self.run::<1>(first, dst),
            2 => self.run::<2>(first, dst),
            3 => self.run::<3>(first, dst),
            4 => self.run::<4>(first, dst),
            5 => self.run::<5>(first, dst),
            6 => self.run::<6>(first, dst),
            7 => self.run::<7>(first, dst),
            _ => self.run::<8>(first, dst),
        }
    }
}

/// Footprint offsets as linear offsets in the padded plane.
struct Moves {
    /// Every entry, relative to the padded position of the output point.
    all: Vec<usize>,
    /// Entries leaving when the window moves one point along the last axis.
    remove: Vec<usize>,
    /// Entries arriving (relative to the old position).
    add: Vec<usize>,
}

/// Padded extents (`pad_lo`, padded shape) of `geo` under `spec`'s footprint.
fn padding(spec: &RankSpec, geo: &Geometry) -> (Vec<usize>, Vec<usize>) {
    let nd = geo.spatial.len();
    let mut lo = vec![0usize; nd];
    let mut shape = geo.spatial.clone();
    for k in 0..nd {
        let min = spec
            .footprint
            .offsets
            .iter()
            .map(|o| o[k])
            .min()
            .unwrap_or(0);
        let max = spec
            .footprint
            .offsets
            .iter()
            .map(|o| o[k])
            .max()
            .unwrap_or(0);
        lo[k] = (-min).max(0) as usize;
        shape[k] += lo[k] + max.max(0) as usize;
    }
    (lo, shape)
}

fn moves(spec: &RankSpec, lo: &[usize], pshape: &[usize]) -> Moves {
    let nd = pshape.len();
    let mut strides = vec![1usize; nd];
    for k in (0..nd.saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * pshape[k + 1];
    }
    let lin = |o: &[i64]| -> usize {
        (0..nd)
            .map(|k| (o[k] + lo[k] as i64) as usize * strides[k])
            .sum()
    };
    let offs = &spec.footprint.offsets;
    let set: std::collections::HashSet<&[i64]> = offs.iter().map(|o| o.as_slice()).collect();
    let mut probe = vec![0i64; nd];
    let mut has = |o: &[i64], d: i64| -> bool {
        probe.copy_from_slice(o);
        probe[nd - 1] += d;
        set.contains(probe.as_slice())
    };
    let mut m = Moves {
        all: Vec::with_capacity(offs.len()),
        remove: Vec::new(),
        add: Vec::new(),
    };
    for o in offs {
        let l = lin(o);
        m.all.push(l);
        if !has(o, -1) {
            m.remove.push(l);
        }
        if !has(o, 1) {
            m.add.push(l + 1);
        }
    }
    m
}

/// Scratch bytes of one run (the figure checked against available memory).
fn scratch_bytes(spec: &RankSpec, geo: &Geometry, dtype: DType, threads: usize) -> u64 {
    let (_, pshape) = padding(spec, geo);
    let plane: u64 = geo.spatial.iter().map(|&s| s as u64).product();
    let padded: u64 = pshape.iter().map(|&s| s as u64).product();
    let total = plane * geo.planes as u64;
    let bins = direct_bins(dtype).map_or(plane + 1, |b| b as u64);
    let per_plane = padded * 4
        + plane * 4
        + if direct_bins(dtype).is_some() {
            0
        } else {
            plane * 8 * 2
        };
    let hist = (levels_for(bins as usize).1 as u64) * 4;
    // Raw input and output bits, the output storage, one plane's scratch, the histograms.
    total * 8 * 2 + total * dtype.size_bytes() as u64 + per_plane + hist * threads as u64 * 4
}

/// Runs `spec` on `x` (`[B, C, S..]`) with sliding histograms on the current rayon pool.
pub fn rank_sliding(x: &Tensor, spec: &RankSpec) -> Result<Tensor, RunError> {
    let geo = spec.check_input(x)?;
    if spec.footprint.offsets.len() == 1 {
        return super::reference::rank_reference(x, spec);
    }
    let dtype = x.dtype();
    let threads = rayon::current_num_threads().max(1);
    ensure_fits(
        scratch_bytes(spec, &geo, dtype, threads),
        &format!("rank selection over {:?}", x.shape()),
    )?;
    let raw = raw_elements(x);
    let nd = geo.spatial.len();
    let plane: usize = geo.spatial.iter().product();
    let (lo, pshape) = padding(spec, &geo);
    let mv = moves(spec, &lo, &pshape);
    let width = geo.spatial[nd - 1];
    let pwidth = pshape[nd - 1];
    let lines = plane / width;
    let poison = |v: u64| match spec.poison {
        Poison::Nan => is_nan(dtype, v),
        Poison::NonFinite => is_non_finite(dtype, v),
    };
    let cval = match spec.border {
        Border::Constant(c) => Some(scalar_raw(c)),
        _ => None,
    };
    let rank = spec.rank as u32;
    let mut out = vec![0u64; raw.len()];
    for p in 0..geo.planes {
        let src = &raw[p * plane..(p + 1) * plane];
        // 1. Codes.
        let direct = direct_bins(dtype);
        let table: Vec<u64> = match direct {
            Some(_) => Vec::new(),
            None => {
                let mut t: Vec<u64> = src
                    .iter()
                    .chain(cval.iter())
                    .filter(|&&v| !poison(v))
                    .map(|&v| order_key(dtype, v))
                    .collect();
                t.par_sort_unstable();
                t.dedup();
                t
            }
        };
        if table.len() >= SENTINEL as usize {
            return Err(RunError::BadInput {
                op: "rank selection",
                problem: format!(
                    "{} distinct values in one plane, at most 2^32 - 2",
                    table.len()
                ),
            });
        }
        let code = |v: u64| -> u32 {
            if poison(v) {
                SENTINEL
            } else {
                let k = order_key(dtype, v);
                match direct {
                    Some(_) => k as u32,
                    // The key is in the table: it was built from these values.
                    None => table.binary_search(&k).unwrap_or(0) as u32,
                }
            }
        };
        let codes: Vec<u32> = src.par_iter().map(|&v| code(v)).collect();
        let cval_code = cval.map_or(SENTINEL, code);
        // 2. Padded codes, one padded line (all axes but the last fixed) at a time.
        let maps: Vec<Vec<Option<usize>>> = (0..nd)
            .map(|k| {
                (0..pshape[k])
                    .map(|q| remap_index(q as i64 - lo[k] as i64, geo.spatial[k], &spec.border))
                    .collect()
            })
            .collect();
        let mut padded = vec![0u32; pshape.iter().product()];
        padded
            .par_chunks_mut(pwidth)
            .enumerate()
            .for_each(|(pl, row)| {
                // Source line of padded line `pl`, or None outside under a constant border.
                let mut rest = pl;
                let mut base = Some(0usize);
                let mut mul = 1usize;
                for k in (0..nd - 1).rev() {
                    let q = rest % pshape[k];
                    rest /= pshape[k];
                    base = match (base, maps[k][q]) {
                        (Some(b), Some(m)) => Some(b + m * mul),
                        _ => None,
                    };
                    mul *= geo.spatial[k];
                }
                match base {
                    None => row.iter_mut().for_each(|c| *c = cval_code),
                    Some(b) => {
                        for (c, m) in row.iter_mut().zip(&maps[nd - 1]) {
                            *c = m.map_or(cval_code, |m| codes[b * width + m]);
                        }
                    }
                }
            });
        drop(codes);
        // 3. Lines over the workers, a histogram each.
        let bins = direct.unwrap_or(table.len().max(1));
        let chunks = (threads * 4).min(lines).max(1);
        let per_chunk = lines.div_ceil(chunks);
        let ctx = Lines {
            dtype,
            padded: &padded,
            moves: &mv,
            spatial: &geo.spatial,
            pshape: &pshape,
            rank,
            table: direct.is_none().then_some(table.as_slice()),
            bins,
        };
        out[p * plane..(p + 1) * plane]
            .par_chunks_mut(per_chunk * width)
            .enumerate()
            .for_each(|(ci, dst)| ctx.run_any(ci * per_chunk, dst));
    }
    Ok(Tensor::from_storage(
        storage_from_raw(dtype, &out),
        x.shape(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hist_selects_with_multiplicity() {
        let mut h = Hist::<4>::new(65536);
        for c in [5u32, 70000 % 65536, 5, 300, 65535, 0] {
            h.add(c);
        }
        let sorted = [0u32, 5, 5, 300, 4464, 65535];
        for (r, want) in sorted.iter().enumerate() {
            assert_eq!(h.select(r as u32), *want, "rank {r}");
        }
        h.remove(5);
        assert_eq!(h.select(1), 5);
        assert_eq!(h.select(2), 300);
    }

    #[test]
    fn hist_levels() {
        assert_eq!(
            levels_for(65536).0,
            vec![0, 65536, 65536 + 4096, 65536 + 4096 + 256]
        );
        assert_eq!(levels_for(2).0, vec![0]);
        assert_eq!(levels_for(17).0, vec![0, 17]);
    }
}
