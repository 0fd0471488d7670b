//! Block plans: which rows of each earlier stage a block of output rows needs, the chunk
//! of output rows that first needs each, and the scratch ring that holds them
//! ([`BlockPlan`], made by `Job::plan_block`, kept per shape by `Job::cached_plan`).
//!
//! Exactness: a plan only decides where and when earlier-stage rows are computed, never how;
//! every row a later stage reads is computed (by the same row function) before it is read
//! and stays in its ring slot while live, so a plan changes the order of the work only.
//!
//! Limits: row indices of a dense table must fit a `u32` (otherwise a binary search is
//! used); chunks hold [`MIN_CHUNK_ROWS`] to [`MAX_CHUNK_ROWS`] output rows.

use std::sync::Arc;

use kiln_codegen::cpu::SlotKind;
use kiln_codegen::kernel::Source;

use super::super::lock;
use super::cache::{CachedPlans, CACHED_KERNELS};
use super::exec::Target;
use super::{run_axis, Job};

/// Fewest output rows per chunk (fewer would make per-row calls dominate).
pub(super) const MIN_CHUNK_ROWS: usize = 4;
/// Most output rows per chunk (as many as a block holds).
pub(super) const MAX_CHUNK_ROWS: usize = 1024;

/// Which rows of each earlier stage a block computes, and where they live in scratch.
pub(super) struct BlockPlan {
    /// Per earlier stage: the rows the block needs, sorted and deduplicated.
    pub(super) rows: Vec<Vec<usize>>,
    /// Per earlier stage, per needed row: the chunk of output rows that first needs it.
    pub(super) first: Vec<Vec<usize>>,
    /// Per earlier stage: ring slots (rows) of scratch; needed row `i` lives in slot
    /// `i % ring`, and at most `ring` consecutive needed rows are ever live at once.
    pub(super) ring: Vec<usize>,
    /// Per earlier stage: ring slots `0..mirror` are also kept after the ring's end (in
    /// slots `ring..ring + mirror`), so a reader's window of rows that runs past the end
    /// is still one run of consecutive slots (see [`Job::try_rows`]): at most the ring
    /// size, and the span of the run-axis offsets of the slots that read the stage.
    pub(super) mirror: Vec<usize>,
    /// Per earlier stage: needed-row indices in the order they are computed (by first
    /// chunk, then row).
    pub(super) order: Vec<Vec<usize>>,
    /// Per earlier stage: for each row from the first needed one on, its index in `rows`
    /// and its ring slot (`u32::MAX` for rows not needed), when the needed rows are dense
    /// enough; empty otherwise (see [`BlockPlan::position`]).
    pub(super) index: Vec<Vec<(u32, u32)>>,
}

impl BlockPlan {
    /// The index in `rows[k]` of stage `k`'s row `row` and the ring slot it lives in
    /// (`index % ring[k]`), if the block needs it. A table lookup where `index[k]`
    /// exists: a binary search and a division per slot and row took most of a 15x15
    /// erosion's run time on 64² planes (its border rows resolve 15 slots each).
    #[inline]
    pub(super) fn position(&self, k: usize, row: usize) -> Option<(usize, usize)> {
        let rows = self.rows.get(k)?;
        match self.index.get(k).filter(|t| !t.is_empty()) {
            Some(table) => {
                let (i, slot) = *table.get(row.checked_sub(*rows.first()?)?)?;
                (i != u32::MAX).then_some((i as usize, slot as usize))
            }
            None => {
                let i = rows.binary_search(&row).ok()?;
                Some((i, i % self.ring.get(k).copied().filter(|&r| r > 0)?))
            }
        }
    }

    /// Builds `index` from `rows` and `ring` (a table only where it spans at most four
    /// entries per needed row, plus 64, and every index fits in a `u32`).
    pub(super) fn build_index(&mut self) {
        self.index = self
            .rows
            .iter()
            .zip(&self.ring)
            .map(|(rows, &ring)| match (rows.first(), rows.last()) {
                (Some(&lo), Some(&hi))
                    if hi - lo < 4 * rows.len() + 64
                        && rows.len() < u32::MAX as usize
                        && ring > 0 =>
                {
                    let mut table = vec![(u32::MAX, u32::MAX); hi - lo + 1];
                    for (i, &r) in rows.iter().enumerate() {
                        table[r - lo] = (i as u32, (i % ring) as u32);
                    }
                    table
                }
                _ => Vec::new(),
            })
            .collect();
    }
}

/// Turns the `(row, chunk of a reader)` pairs recorded for one earlier stage into its needed
/// rows (sorted, deduplicated), each row's first chunk of use and its last.
pub(super) fn settle(
    mut reads: Vec<(usize, usize)>,
    rows: &mut Vec<usize>,
    first: &mut Vec<usize>,
    until: &mut Vec<usize>,
) {
    let (Some(lo), Some(hi)) = (
        reads.iter().map(|r| r.0).min(),
        reads.iter().map(|r| r.0).max(),
    ) else {
        return;
    };
    // Dense reads (the common case: a window of neighbouring rows per reader) are settled by
    // row index in one pass; sorting them was a measurable part of a run (a 15x15 erosion
    // records 15 reads per output row).
    if hi - lo < 4 * reads.len() + 64 {
        let mut span = vec![(usize::MAX, 0usize); hi - lo + 1];
        for (row, c) in reads {
            let s = &mut span[row - lo];
            s.0 = s.0.min(c);
            s.1 = s.1.max(c);
        }
        for (i, (f, u)) in span.into_iter().enumerate() {
            if f != usize::MAX {
                rows.push(lo + i);
                first.push(f);
                until.push(u);
            }
        }
        return;
    }
    reads.sort_unstable();
    for (row, c) in reads {
        if rows.last() == Some(&row) {
            // Sorted by (row, chunk): the first entry had the earliest chunk.
            *until.last_mut().expect("pushed with the row") = c;
        } else {
            rows.push(row);
            first.push(c);
            until.push(c);
        }
    }
}

impl Job<'_> {
    /// Output rows per chunk of a multi-stage block: about `scratch_budget` bytes of
    /// scratch rows of all earlier stages per chunk.
    pub(super) fn chunk_rows(&self) -> usize {
        let last = self.stages.len() - 1;
        let bytes: usize = (0..last).map(|k| self.pitch(k)).sum();
        (self.scratch_budget / bytes.max(1)).clamp(MIN_CHUNK_ROWS, MAX_CHUNK_ROWS)
    }

    /// The plan of the block of rows `r0..r1` (see [`RunCache`]): from an earlier run at
    /// this shape, else made now and kept.
    pub(super) fn cached_plan(&self, r0: usize, r1: usize, chunk: usize) -> Arc<BlockPlan> {
        let b = r0 / self.block;
        let same = |e: &CachedPlans| {
            e.shape == self.shape
                && e.block == self.block
                && e.chunk == chunk
                && e.slots.len() == self.stages.len()
                && e.slots
                    .iter()
                    .zip(self.stages)
                    .all(|(a, st)| *a == st.slots)
        };
        let plans = || lock(&self.plans.plans);
        if let Some(p) = plans()
            .iter()
            .find(|e| same(e))
            .and_then(|e| e.plans.get(b).cloned().flatten())
        {
            return p;
        }
        let plan = Arc::new(self.plan_block(r0, r1, chunk));
        let mut cache = plans();
        let at = match cache.iter().position(&same) {
            Some(at) => at,
            None => {
                if cache.len() >= CACHED_KERNELS {
                    cache.remove(0);
                }
                cache.push(CachedPlans {
                    slots: self.stages.iter().map(|st| st.slots.clone()).collect(),
                    shape: self.shape.to_vec(),
                    block: self.block,
                    chunk,
                    plans: vec![None; self.nblocks],
                });
                cache.len() - 1
            }
        };
        if let Some(slot) = cache[at].plans.get_mut(b) {
            *slot = Some(plan.clone());
        }
        plan
    }

    /// Works backwards from output rows `r0..r1` (in chunks of `chunk` rows) to the rows of
    /// each earlier stage they need, when each is first and last used, and the ring size
    /// that holds every live row of a stage at once.
    pub(super) fn plan_block(&self, r0: usize, r1: usize, chunk: usize) -> BlockPlan {
        let last = self.stages.len() - 1;
        let mut oc = vec![0usize; self.shape.len() - 1];
        // Per earlier stage: (row, chunk of a stage row that reads it).
        let mut refs: Vec<Vec<(usize, usize)>> = vec![Vec::new(); last];
        let mut plan = BlockPlan {
            rows: vec![Vec::new(); last],
            first: vec![Vec::new(); last],
            ring: vec![0; last],
            mirror: vec![0; last],
            order: vec![Vec::new(); last],
            index: Vec::new(),
        };
        let mut used_until: Vec<Vec<usize>> = vec![Vec::new(); last];
        // Backwards from the output rows: once every later stage has recorded the rows of
        // stage `j` it reads, they are settled, and stage `j`'s own reads are recorded.
        for j in (1..=last).rev() {
            if j < last {
                let reads = std::mem::take(&mut refs[j]);
                settle(
                    reads,
                    &mut plan.rows[j],
                    &mut plan.first[j],
                    &mut used_until[j],
                );
            }
            let n = if j == last {
                r1 - r0
            } else {
                plan.rows[j].len()
            };
            for i in 0..n {
                let (row, c) = if j == last {
                    (r0 + i, i / chunk)
                } else {
                    (plan.rows[j][i], plan.first[j][i])
                };
                self.decode(row, &mut oc);
                for slot in &self.stages[j].slots {
                    if let Target::Stage { stage, row } = self.resolve(&oc, slot) {
                        refs[stage].push((row, c));
                    }
                }
            }
        }
        if last > 0 {
            let reads = std::mem::take(&mut refs[0]);
            settle(
                reads,
                &mut plan.rows[0],
                &mut plan.first[0],
                &mut used_until[0],
            );
        }
        let nchunks = (r1 - r0).div_ceil(chunk);
        for (k, until) in used_until.iter().enumerate() {
            // Live rows of stage k at each chunk: from their first use to their last.
            let mut lo = vec![usize::MAX; nchunks];
            let mut hi = vec![0usize; nchunks];
            for (i, (&f, &u)) in plan.first[k].iter().zip(until).enumerate() {
                for c in f..=u {
                    lo[c] = lo[c].min(i);
                    hi[c] = hi[c].max(i);
                }
            }
            plan.ring[k] = (0..nchunks)
                .filter(|&c| lo[c] <= hi[c])
                .map(|c| hi[c] - lo[c] + 1)
                .max()
                .unwrap_or(0);
            let mut order: Vec<usize> = (0..plan.rows[k].len()).collect();
            order.sort_by_key(|&i| plan.first[k][i]);
            plan.order[k] = order;
        }
        let a = run_axis(self.shape);
        for (k, mirror) in plan.mirror.iter_mut().enumerate() {
            let offsets = self
                .stages
                .iter()
                .flat_map(|st| &st.slots)
                .filter_map(|slot| match slot.kind {
                    SlotKind::Row {
                        source: Source::Stage(s),
                        ..
                    } if s as usize == k => Some(
                        slot.outer_offset
                            .get(a.wrapping_sub(2))
                            .copied()
                            .unwrap_or(0),
                    ),
                    _ => None,
                });
            let (lo, hi) = offsets.fold((0i64, 0i64), |(lo, hi), d| (lo.min(d), hi.max(d)));
            *mirror = ((hi - lo) as usize).min(plan.ring[k]);
        }
        plan.build_index();
        plan
    }
}
