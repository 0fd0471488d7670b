//! Footprints as runs: a min/max/any/all window over any footprint (a disc, a sparse
//! structure, a box with an origin reaching past its centre) read as the runs of each of its
//! rows over a few shared chain nodes, so its code grows with its number of runs (at most
//! four reads each), never with its area or its length (issue 27: a 250x250 disc on a 4096²
//! image was refused by the JIT limit; reflect/mirror windows with an origin of 32 or more
//! were left whole).
//!
//! The footprint is cut along one axis `A` (the one giving the fewest runs): a *row* is the
//! offset with its `A` component zeroed, a *run* a maximal contiguous range `[a, b]` of `A`
//! offsets sharing a row. Every run is covered by at most four blocks, each read as one value
//! of a chain node at the block's offset (the row's offset on the other axes), and the window
//! is the op over those reads. Chain nodes (the only stages besides the final one) depend on
//! the border mode only, so every run shares them:
//!
//! * **`wrap`, `reflect`, `mirror`: centred blocks.** `W₀ = x`,
//!   `Wⱼ₊₁ = window(Wⱼ, {−3ʰ, 0, 3ʰ}, mode)` along `A` (`3ʰ = 3ʲ`), so `Wⱼ` is the op over the
//!   centred block `[−hⱼ, hⱼ]`, `hⱼ = (3ʲ−1)/2`. Exact under these modes for every position:
//!   each remap `R` is `R(z) = R(z + kP)` (period `P`) and, for `reflect`/`mirror`, also
//!   `R(z) = R(c − z)` for its fixed `c` (`−1`, resp. `0`); so `R(z)` is `z + kP` or
//!   `c − z + kP`, and `{R(R(z) + d) : |d| ≤ h} = {R(z ± d)} = {R(z + d) : |d| ≤ h}` because
//!   the block is symmetric. Reading `Wⱼ` at `z` under the mode therefore reads exactly the
//!   block `[z − hⱼ, z + hⱼ]` remapped; a link is three such blocks side by side. A run of
//!   `k` offsets uses the largest `3ʲ ≤ k`: at most three blocks (starts `a, a+3ʲ, …, b−3ʲ+1`).
//! * **`nearest`, `constant`: one-sided blocks.** Forward links `F₂ₛ = window(Fₛ, {0, s})`
//!   and backward links `B₂ₛ = window(Bₛ, {−s, 0})`, under the mode itself, so
//!   `Fₛ[z] = op of x̃[z ..= z+s−1]` and `Bₛ[z] = op of x̃[z−s+1 ..= z]` where `x̃` is `x`
//!   extended by the mode (`nearest`: the end element; `constant`: the constant), for every
//!   `z` in the image (induction: a link's second read either lies in the image or, past the
//!   end, is the end element resp. the constant, which the extension has there too). Read at
//!   `z ≥ 0` past the far end, `Fₛ` gives the end element (resp. the constant), which `x̃`
//!   has on the whole block; `Bₛ` read at `z < 0` likewise. So the part `[max(a,0), b]` of a
//!   run is covered by forward blocks starting at offsets `≥ 0` and the part
//!   `[a, min(b,−1)]` by backward blocks ending at offsets `≤ −1`: at most two reads each.
//! * **Other axes.** Every mode remaps each axis on its own (SEMANTICS.md), and chain nodes
//!   are computed at every position of the image, so reading one at a row's offset reads the
//!   row's remapped (or constant) elements: a read outside the image under `constant` is the
//!   constant, which every element of that row is too.
//!
//! Min, max (kiln's lattice: NaN absorbing and canonical, −0 < +0), and and or are
//! idempotent, commutative and associative, so reading an element twice or in another order
//! changes no bit; the result combines at least two reads (a footprint here has two runs or a
//! run of two or more offsets), so a NaN comes out canonical as in the window. Sums and rank
//! selections are never rewritten.
//!
//! **Chunks.** Up to [`CHUNK_READS`] reads are one final stage. More (a 250x250 disc has
//! 625 under `reflect`, a 101x101 checkerboard 5101) are cut into chunks of that many, each
//! combined in a kernel of its own and materialised through an identity line (a move of
//! every element), then combined pointwise; so no stage grows with the footprint and the JIT
//! limit is never reached. The op is the same over any grouping (associative, commutative).
//!
//! Limits: code (kernels) grows with the footprint's runs, at most four reads each, and a
//! footprint of many runs costs one memory pass per chunk.

use std::collections::BTreeMap;

use crate::builder::GraphBuilder;
use crate::error::BuildError;
use crate::graph::{BinaryOp, Footprint, NodeId, ReduceOp};
use crate::line::{LineKeep, LineProgram};
use crate::types::Border;

/// One run: the row (the offset with its run-axis component zeroed) and `[a, b]` along it.
pub type Run = (Vec<i64>, i64, i64);

/// The runs of `fp` cut along `axis`, row by row in order.
pub fn runs_along(fp: &Footprint, axis: usize) -> Vec<Run> {
    let mut rows: BTreeMap<Vec<i64>, Vec<i64>> = BTreeMap::new();
    for off in &fp.offsets {
        let mut row = off.clone();
        row[axis] = 0;
        rows.entry(row).or_default().push(off[axis]);
    }
    let mut runs = Vec::new();
    for (row, mut along) in rows {
        along.sort_unstable();
        along.dedup();
        let mut start = along[0];
        for w in along.windows(2) {
            if w[1] != w[0] + 1 {
                runs.push((row.clone(), start, w[0]));
                start = w[1];
            }
        }
        runs.push((row, start, along[along.len() - 1]));
    }
    runs
}

/// The axis along which `fp` has the fewest runs (the last one among equals), and its runs.
pub fn best_cut(fp: &Footprint) -> (usize, Vec<Run>) {
    (0..fp.rank())
        .map(|ax| (ax, runs_along(fp, ax)))
        .min_by_key(|(ax, runs)| (runs.len(), usize::MAX - ax))
        .expect("a footprint has at least one axis")
}

/// The largest power of two `≤ m` (`m ≥ 1`).
fn pow2_at_most(m: i64) -> i64 {
    let mut p = 1;
    while 2 * p <= m {
        p *= 2;
    }
    p
}

/// The largest power of three `≤ m` and its exponent (`m ≥ 1`).
fn pow3_at_most(m: i64) -> (i64, usize) {
    let (mut p, mut j) = (1, 0);
    while 3 * p <= m {
        p *= 3;
        j += 1;
    }
    (p, j)
}

/// Block starts `a, a+p, …` and a last block ending exactly at `b` (`p ≤ b − a + 1`).
pub(crate) fn block_starts(a: i64, b: i64, p: i64) -> Vec<i64> {
    let mut v = Vec::new();
    let mut o = a;
    while o + p - 1 < b {
        v.push(o);
        o += p;
    }
    v.push(b - p + 1);
    v.dedup();
    v
}

/// Chain nodes built so far, keyed by kind and level, and the reads wanted of each.
struct Runs<'a> {
    b: &'a mut GraphBuilder,
    op: ReduceOp,
    rank: usize,
    axis: usize,
    border: Border,
    x: NodeId,
    /// `Wⱼ` (centred), `Fₛ` and `Bₛ` (one-sided) by `(kind, level)`; kind 0/1/2.
    chains: BTreeMap<(u8, i64), NodeId>,
    /// Offsets to read of each chain node, in first-use order.
    reads: BTreeMap<(u8, i64), Vec<Vec<i64>>>,
}

impl Runs<'_> {
    fn link(&mut self, src: NodeId, offs: &[i64]) -> Result<NodeId, BuildError> {
        let fp = Footprint::along_axis(self.rank, self.axis, offs);
        self.b.window_reduce(src, self.op, &fp, self.border)
    }

    /// The centred chain node `Wⱼ` (block of `3ʲ`).
    fn centred(&mut self, j: i64) -> Result<NodeId, BuildError> {
        if let Some(&id) = self.chains.get(&(0, j)) {
            return Ok(id);
        }
        let id = if j == 0 {
            self.x
        } else {
            let src = self.centred(j - 1)?;
            let s = 3i64.pow(j as u32 - 1);
            self.link(src, &[-s, 0, s])?
        };
        self.chains.insert((0, j), id);
        Ok(id)
    }

    /// The one-sided chain node `Fₛ` (`backward`: `Bₛ`), `s` a power of two.
    fn sided(&mut self, s: i64, backward: bool) -> Result<NodeId, BuildError> {
        let kind = if backward { 2 } else { 1 };
        if let Some(&id) = self.chains.get(&(kind, s)) {
            return Ok(id);
        }
        let id = if s == 1 {
            self.x
        } else {
            let src = self.sided(s / 2, backward)?;
            let h = s / 2;
            let offs = if backward { [-h, 0] } else { [0, h] };
            self.link(src, &offs)?
        };
        self.chains.insert((kind, s), id);
        Ok(id)
    }

    fn read(&mut self, key: (u8, i64), row: &[i64], along: i64) {
        let mut off = row.to_vec();
        off[self.axis] = along;
        let v = self.reads.entry(key).or_default();
        if !v.contains(&off) {
            v.push(off);
        }
    }

    /// Plans the reads covering run `[a, b]` of `row`.
    fn run(&mut self, row: &[i64], a: i64, b: i64) -> Result<(), BuildError> {
        match self.border {
            Border::Wrap | Border::Reflect | Border::Mirror => {
                let (p, j) = pow3_at_most(b - a + 1);
                self.centred(j as i64)?;
                let h = (p - 1) / 2;
                for s in block_starts(a, b, p) {
                    self.read((0, j as i64), row, s + h);
                }
            }
            Border::Nearest | Border::Constant(_) => {
                if b >= 0 {
                    let lo = a.max(0);
                    let p = pow2_at_most(b - lo + 1);
                    self.sided(p, false)?;
                    for s in block_starts(lo, b, p) {
                        self.read((1, p), row, s);
                    }
                }
                if a < 0 {
                    let hi = b.min(-1);
                    let q = pow2_at_most(hi - a + 1);
                    self.sided(q, true)?;
                    for s in block_starts(a, hi, q) {
                        self.read((2, q), row, s + q - 1);
                    }
                }
            }
        }
        Ok(())
    }

    /// The op over `reads` (chain key, offset), one window per chain node, combined in key
    /// order.
    fn combine(&mut self, reads: &[((u8, i64), Vec<i64>)]) -> Result<NodeId, BuildError> {
        let mut by_key: BTreeMap<(u8, i64), Vec<Vec<i64>>> = BTreeMap::new();
        for (key, off) in reads {
            by_key.entry(*key).or_default().push(off.clone());
        }
        let mut out: Option<NodeId> = None;
        for (key, offsets) in by_key {
            let src = self.chains[&key];
            let w = self
                .b
                .window_reduce(src, self.op, &Footprint { offsets }, self.border)?;
            out = Some(match out {
                None => w,
                Some(prev) => self.b.binary(self.op.combiner(), prev, w)?,
            });
        }
        Ok(out.expect("a chunk has a read"))
    }

    /// The op over every planned read. Up to [`CHUNK_READS`] reads form one stage; more are
    /// cut into chunks of that many, each materialised through an identity line (so each is
    /// a kernel of its own and no stage grows with the footprint), then combined pointwise.
    fn finish(mut self) -> Result<NodeId, BuildError> {
        let reads: Vec<((u8, i64), Vec<i64>)> = std::mem::take(&mut self.reads)
            .into_iter()
            .flat_map(|(k, offs)| offs.into_iter().map(move |o| (k, o)))
            .collect();
        if reads.len() <= CHUNK_READS {
            return self.combine(&reads);
        }
        let mut parts = Vec::new();
        for chunk in reads.chunks(CHUNK_READS) {
            let part = self.combine(chunk)?;
            parts.push(self.b.line(part, identity_line())?);
        }
        combine_parts(self.b, parts, self.op.combiner())
    }
}

/// Materialised `parts` (at least one) combined pointwise with `op`, [`CHUNK_READS`] at a
/// time, as a tree of kernels (each level's results materialised through identity lines).
/// Exact for the lattice min/max and and/or: associative and commutative. Also used by the
/// non-flat grey structures (kiln-ops).
pub fn combine_parts(
    b: &mut GraphBuilder,
    mut parts: Vec<NodeId>,
    op: BinaryOp,
) -> Result<NodeId, BuildError> {
    loop {
        let mut next = Vec::new();
        for chunk in parts.chunks(CHUNK_READS) {
            let mut acc = chunk[0];
            for &p in &chunk[1..] {
                acc = b.binary(op, acc, p)?;
            }
            next.push(acc);
        }
        if next.len() == 1 {
            return Ok(next[0]);
        }
        parts = next
            .into_iter()
            .map(|p| b.line(p, identity_line()))
            .collect::<Result<_, _>>()?;
    }
}

/// Most reads of one stage of a footprint (about 2 instructions each): past it, chunks.
pub const CHUNK_READS: usize = 128;

/// A line that outputs its input unchanged (no carries, `y = x`), along the first spatial
/// axis: a materialisation point, so the chunk it reads is the
/// root of a kernel of its own (fusion rule 2) instead of growing the final stage. Exact:
/// a move of every element. Also used by the non-flat grey structures (kiln-ops).
pub fn identity_line() -> LineProgram {
    LineProgram {
        axis: 2,
        backward: false,
        init: Vec::new(),
        step: Vec::new(),
        next: Vec::new(),
        keep: LineKeep::Each(0),
    }
}

/// `x` reduced by `op` (min/max/any/all) over `runs` (cut along `axis` of a `rank`-axis
/// footprint) under `border`, over shared chain nodes (see the module docs). The runs must
/// hold at least two offsets in all.
pub fn runs_window(
    b: &mut GraphBuilder,
    x: NodeId,
    op: ReduceOp,
    rank: usize,
    axis: usize,
    runs: &[Run],
    border: Border,
) -> Result<NodeId, BuildError> {
    debug_assert!(matches!(
        op,
        ReduceOp::Min | ReduceOp::Max | ReduceOp::Any | ReduceOp::All
    ));
    let mut ctx = Runs {
        b,
        op,
        rank,
        axis,
        border,
        x,
        chains: BTreeMap::new(),
        reads: BTreeMap::new(),
    };
    for (row, a, hi) in runs {
        ctx.run(row, *a, *hi)?;
    }
    // A single read would move a NaN instead of combining it: a run of two or more offsets
    // always has two blocks or a chain node of two or more, so only a one-offset footprint
    // could get here with one read, and callers never pass one.
    ctx.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_footprint() {
        let fp = Footprint {
            offsets: vec![
                vec![0, -3],
                vec![0, -2],
                vec![0, 0],
                vec![0, 1],
                vec![0, 2],
                vec![1, 5],
                vec![-1, 0],
            ],
        };
        assert_eq!(
            runs_along(&fp, 1),
            vec![
                (vec![-1, 0], 0, 0),
                (vec![0, 0], -3, -2),
                (vec![0, 0], 0, 2),
                (vec![1, 0], 5, 5),
            ]
        );
        assert_eq!(best_cut(&fp).1.len(), 4);
    }

    #[test]
    fn powers_and_blocks() {
        assert_eq!(pow3_at_most(1), (1, 0));
        assert_eq!(pow3_at_most(8), (3, 1));
        assert_eq!(pow3_at_most(9), (9, 2));
        for k in 1..200i64 {
            let (p, _) = pow3_at_most(k);
            assert!(block_starts(0, k - 1, p).len() <= 3, "{k}");
            assert!(block_starts(0, k - 1, pow2_at_most(k)).len() <= 2, "{k}");
        }
    }
}
