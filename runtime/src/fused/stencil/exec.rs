//! Execution of a block: slot resolution (border remaps, constants, in-range answers), the
//! chunk loop over the scratch rings (`Job::block_with`), and the single- and multi-row
//! calls of the compiled row functions.
//!
//! Exactness: every row is computed by the stage's own row function from the pointers the
//! slot resolution gives for that row; a multi-row call passes the first row's pointers with
//! per-slot steps that reproduce each later row's resolution exactly (checked inside the run
//! interior), so the choice between one call and several changes speed only.
//!
//! Limits: rows must be contiguous in the output and in scratch; earlier-stage rows are
//! read only from the block's scratch rings.

use std::sync::Arc;

use kiln_codegen::cpu::{CpuStage, Purity, RowSlot, SlotKind};
use kiln_codegen::kernel::Source;
use kiln_ir::semantics::remap_index;

use super::cache::Scratch;
use super::guards::CHECK_BYTES;
use super::plan::BlockPlan;
use super::{run_axis, Job, OutPtr};
use crate::RuntimeError;

/// Bytes an [`SlotKind::OuterInRange`] slot points at: `[0]` is out of range, `[1]` in range.
pub(super) static IN_RANGE: [u8; 2] = [0, 1];

/// Where a slot's pointer goes for one row.
pub(super) enum Target {
    /// A row of an input tensor: element pointer of column 0, column stride (elements),
    /// and the row's flat index in the kernel's shape.
    Input {
        ptr: *const u8,
        stride: i64,
        row: usize,
    },
    /// A row of an earlier stage, by its flat row index.
    Stage { stage: usize, row: usize },
    /// The border constant of the slot (a row of it, see `Job::const_rows`).
    Constant,
    /// An `OuterInRange` answer.
    InRange(bool),
}

/// Argument arrays of a multi-row call, reused across calls.
#[derive(Default)]
pub(super) struct RunBufs {
    pub(super) ptrs: Vec<*const u8>,
    pub(super) steps: Vec<i64>,
    pub(super) strides: Vec<i64>,
}

impl Job<'_> {
    /// Bytes between consecutive scratch rows of stage `k`: its row rounded up to an odd
    /// number of 64-byte lines, so that the rows a later stage reads together (and the
    /// output rows it writes) do not all share their address bits below 4 KiB. With a pitch
    /// of a multiple of 4 KiB (2048 f32 columns) loads and stores alias in the CPU's
    /// store-forwarding check, which measured as a run-to-run swing of 25% on a 15x15
    /// erosion, depending on where the buffers happened to be placed.
    pub(super) fn pitch(&self, k: usize) -> usize {
        let lines = (self.width * self.dtypes[k].size_bytes()).div_ceil(64);
        64 * (lines | 1)
    }

    /// Writes the outer coordinates (`b, c, s1..s_{d-1}`) of flat row `row` into `oc`.
    pub(super) fn decode(&self, mut row: usize, oc: &mut [usize]) {
        for k in (0..oc.len()).rev() {
            oc[k] = row % self.shape[k];
            row /= self.shape[k];
        }
    }

    /// Resolves `slot` for the output row with outer coordinates `oc`.
    pub(super) fn resolve(&self, oc: &[usize], slot: &RowSlot) -> Target {
        let outer = oc.len();
        let shifted = |k: usize| oc[k] as i64 + slot.outer_offset[k - 2];
        match &slot.kind {
            SlotKind::OuterInRange => {
                Target::InRange((2..outer).all(|k| (0..self.shape[k] as i64).contains(&shifted(k))))
            }
            SlotKind::Row { source, border } => {
                // The flat row and (for an input) the element offset: batch and channel as
                // they are, spatial axes moved by the slot's offset and remapped under its
                // border (no remap at offset 0: the output row's own coordinate is in range).
                let t = match source {
                    Source::Input(n) => Some(&self.inputs[*n as usize]),
                    Source::Stage(_) => None,
                };
                let strides = t.map_or(&[][..], |t| t.strides());
                let mut flat = oc[0] * self.shape[1] + oc[1];
                let mut elem = match strides {
                    [s0, s1, ..] => oc[0] * s0 + oc[1] * s1,
                    _ => 0,
                };
                for (k, &d) in slot.outer_offset.iter().enumerate() {
                    let a = k + 2;
                    let c = if d == 0 {
                        oc[a]
                    } else {
                        match remap_index(shifted(a), self.shape[a], border) {
                            Some(c) => c,
                            None => return Target::Constant,
                        }
                    };
                    flat = flat * self.shape[a] + c;
                    if let Some(s) = strides.get(a) {
                        elem += c * s;
                    }
                }
                match (t, source) {
                    (Some(t), _) => {
                        let es = t.dtype().size_bytes();
                        // SAFETY: `elem + t.offset()` is the storage index of element
                        // (coords, column 0) of `t`, all coords in range (remapped), so it is
                        // inside the storage (checked when the view was created).
                        let ptr = unsafe { t.data_ptr().add((t.offset() + elem) * es) };
                        Target::Input {
                            ptr,
                            stride: strides[outer] as i64,
                            row: flat,
                        }
                    }
                    (None, Source::Stage(k)) => Target::Stage {
                        stage: *k as usize,
                        row: flat,
                    },
                    // `t` is `Some` exactly for input sources.
                    (None, Source::Input(_)) => Target::Constant,
                }
            }
        }
    }

    /// Computes rows `r0..r1` of the last stage (and what it needs of earlier stages) with
    /// the row functions of `code` (the kernel's stages or a guarded variant's). `pool`
    /// holds scratch buffers from earlier blocks, reused without clearing (every scratch
    /// row is written before it is read).
    ///
    /// Output rows go in chunks of [`Job::chunk_rows`]. Before a chunk, each earlier stage
    /// computes the rows that this chunk is the first to need, in stage order, into a ring
    /// of scratch rows that holds every row still to be read: row `i` of a stage's needed
    /// rows lives in ring slot `i % ring`. So the rows a stage reads were written moments
    /// before, and stay in cache, however many stages the kernel chains.
    ///
    /// With `check` (see [`Job::block`]), checks that the input rows each computation read
    /// are at least that pure, and returns `Err` with the purity found at the first that is
    /// not, leaving the block partly written (with values a less specialised kernel must
    /// replace).
    pub(super) fn block_with(
        &self,
        code: &[CpuStage],
        check: Option<Purity>,
        r0: usize,
        r1: usize,
        out: OutPtr,
        pool: &mut Vec<Scratch>,
    ) -> Result<Result<(), Purity>, RuntimeError> {
        let last = self.stages.len() - 1;
        let chunk = if last == 0 {
            r1 - r0
        } else {
            self.chunk_rows()
        };
        let plan = if last == 0 {
            Arc::new(self.plan_block(r0, r1, chunk))
        } else {
            self.cached_plan(r0, r1, chunk)
        };
        // Rows per computation while checking: a few dozen KiB of inputs, checked right
        // after the computation read them (so from cache).
        let check_rows = (CHECK_BYTES / (self.width * 4)).max(1);
        let reads_inputs: Vec<bool> = code
            .iter()
            .map(|st| {
                st.slots.iter().any(|s| {
                    matches!(
                        s.kind,
                        SlotKind::Row {
                            source: Source::Input(_),
                            ..
                        }
                    )
                })
            })
            .collect();
        let cap = |k: usize, n: usize| -> usize {
            if check.is_some() && reads_inputs[k] {
                n.min(check_rows)
            } else {
                n
            }
        };
        // Per input: the flat rows this block has checked clean (see `rows_clean`).
        let mut checked = vec![(0usize, 0usize); self.inputs.len()];
        if pool.len() < last {
            pool.resize_with(last, Vec::new);
        }
        for (k, buf) in pool.iter_mut().enumerate().take(last) {
            let words = ((plan.ring[k] + plan.mirror[k]) * self.pitch(k)).div_ceil(8);
            if buf.capacity() < words {
                // A fresh buffer rather than growing: the old contents need not be kept.
                *buf = Vec::with_capacity(words);
            }
            // SAFETY: the capacity is at least `words`, and `MaybeUninit` elements need no
            // initialisation; the bytes are only accessed through raw pointers, each scratch
            // row written by its row function before any later stage reads it.
            unsafe { buf.set_len(words) };
        }
        let mut oc = vec![0usize; self.shape.len() - 1];
        let mut bufs = RunBufs::default();
        let mut next = vec![0usize; last];
        let row_bytes = self.width * self.dtypes[last].size_bytes();
        for (c, o0) in (r0..r1).step_by(chunk).enumerate() {
            for k in 0..last {
                let (head, tail) = pool.split_at_mut(k);
                let base = tail[0].as_mut_ptr() as *mut u8;
                let scratch = &head[..];
                let order = &plan.order[k];
                let end = next[k]
                    + order[next[k]..]
                        .iter()
                        .take_while(|&&i| plan.first[k][i] == c)
                        .count();
                let mut q = next[k];
                next[k] = end;
                let (ring, pitch) = (plan.ring[k], self.pitch(k));
                while q < end {
                    let i = order[q];
                    let row = plan.rows[k][i];
                    self.decode(row, &mut oc);
                    // SAFETY: `i % ring < ring`, and the buffer holds `ring * pitch` bytes
                    // (pitch >= row bytes), so the row's bytes are inside it.
                    let dst = unsafe { base.add((i % ring) * pitch) };
                    // Consecutive needed rows, consecutive in the ring, in one run interior.
                    let max = self.run_len(k, &oc, end - q).min(ring - i % ring);
                    let mut n = 1;
                    while n < max && order[q + n] == i + n && plan.rows[k][i + n] == row + n {
                        n += 1;
                    }
                    let done =
                        self.compute_rows(code, k, &oc, cap(k, n), dst, &plan, scratch, &mut bufs)?;
                    // Rows in the first `mirror` slots are copied after the ring's end.
                    let (slot, mirror) = (i % ring, plan.mirror[k]);
                    if slot < mirror {
                        let rows = done.min(mirror - slot);
                        // SAFETY: the buffer holds `(ring + mirror) * pitch` bytes; the rows
                        // just written are slots `slot .. slot + rows` (below `mirror <=
                        // ring`), copied to slots `ring + slot ..`, which end at or before
                        // `ring + mirror`: both ranges are inside the buffer, and they do not
                        // overlap (the first ends before slot `ring`).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                dst,
                                base.add((ring + slot) * pitch),
                                rows * pitch,
                            );
                        }
                    }
                    if let Some(need) = check {
                        if let Err(found) = self.read_clean(k, &oc, done, &mut checked, need) {
                            return Ok(Err(found));
                        }
                    }
                    q += done;
                }
            }
            let scratch = &pool[..last];
            let o1 = (o0 + chunk).min(r1);
            // A single stage computes the block's whole planes by replaying one plane's
            // calls (see `replay_planes`), and the rows before and after them row by row
            // here.
            let (ra, rb) = if last == 0 {
                let checked = check.map(|need| (&mut checked[..], need));
                match self.replay_planes(code, o0, o1, out, &mut bufs, checked) {
                    Ok(range) => range,
                    Err(found) => return Ok(Err(found)),
                }
            } else {
                (o1, o1)
            };
            for (from, to) in [(o0, ra), (rb, o1)] {
                let mut row = from;
                while row < to {
                    self.decode(row, &mut oc);
                    // SAFETY: `row < rows` (the output's row count), and the output holds `rows * width` elements of the
                    // last stage's dtype, so this row's bytes are inside it; blocks own disjoint rows.
                    let dst = unsafe { out.get().add(row * row_bytes) };
                    let n = cap(last, self.run_len(last, &oc, to - row));
                    let done =
                        self.compute_rows(code, last, &oc, n, dst, &plan, scratch, &mut bufs)?;
                    if let Some(need) = check {
                        if let Err(found) = self.read_clean(last, &oc, done, &mut checked, need) {
                            return Ok(Err(found));
                        }
                    }
                    row += done;
                }
            }
        }
        Ok(Ok(()))
    }

    /// Computes stage `j`'s rows from the row at outer coordinates `oc` into `dst`: up to `n`
    /// (consecutive, in one run interior) with one multi-row call when possible, else one
    /// row. Returns how many rows it computed (at least 1).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn compute_rows(
        &self,
        code: &[CpuStage],
        j: usize,
        oc: &[usize],
        n: usize,
        dst: *mut u8,
        plan: &BlockPlan,
        scratch: &[Scratch],
        bufs: &mut RunBufs,
    ) -> Result<usize, RuntimeError> {
        if n > 1 {
            let done = self.try_rows(code, j, oc, n, dst, plan, scratch, bufs)?;
            if done > 0 {
                return Ok(done);
            }
        }
        self.row(code, j, oc, dst, plan, scratch, bufs)?;
        Ok(1)
    }

    /// How many rows from the row at outer coordinates `oc` (at most `max`) stay in one
    /// plane and inside stage `j`'s run interior: 0 when the row itself is outside it.
    pub(super) fn run_len(&self, j: usize, oc: &[usize], max: usize) -> usize {
        let a = run_axis(self.shape);
        let (lo, hi) = self.interior[j];
        let y = oc[a];
        if y < lo || y >= hi {
            return 0;
        }
        (hi - y).min(max)
    }

    /// The row of border constants that slot `s` of stage `j` reads outside the tensor.
    pub(super) fn const_row(&self, j: usize, s: usize) -> *const u8 {
        self.const_rows[self.consts[j][s]].as_ptr() as *const u8
    }

    /// What a row call passes for slot `s` of stage `j` resolved to `target`: its pointer,
    /// row step (bytes, to the same slot's row for the next output row along the run
    /// axis), column stride, and the input it reads (`None` for a constant or an in-range
    /// answer, which stay put). `None` for an earlier stage's row, whose place in the
    /// scratch ring the caller works out.
    pub(super) fn slot_args(
        &self,
        j: usize,
        s: usize,
        slot: &RowSlot,
        target: &Target,
    ) -> Option<(*const u8, i64, i64, Option<usize>)> {
        match *target {
            Target::Input { ptr, stride, .. } => {
                let SlotKind::Row {
                    source: Source::Input(i),
                    ..
                } = slot.kind
                else {
                    return None;
                };
                let t = &self.inputs[i as usize];
                let step = t.strides()[run_axis(self.shape)] * t.dtype().size_bytes();
                Some((ptr, step as i64, stride, Some(i as usize)))
            }
            Target::Constant => Some((self.const_row(j, s), 0, 1, None)),
            Target::InRange(b) => Some((&IN_RANGE[b as usize] as *const u8, 0, 0, None)),
            Target::Stage { .. } => None,
        }
    }

    /// Computes up to `n` consecutive rows of stage `j` (the first at outer coordinates
    /// `oc`, all inside the run interior of one plane) with one call of the stage's
    /// multi-row function, into `dst` (rows contiguous), and returns how many it computed:
    /// fewer than `n` where an earlier stage's rows wrap around the end of their scratch
    /// ring, and 0, having written nothing, when the stage has no multi-row function or a
    /// slot's rows are not uniformly spaced (earlier-stage rows that are not consecutive).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn try_rows(
        &self,
        code: &[CpuStage],
        j: usize,
        oc: &[usize],
        n: usize,
        dst: *mut u8,
        plan: &BlockPlan,
        scratch: &[Scratch],
        bufs: &mut RunBufs,
    ) -> Result<usize, RuntimeError> {
        let stage = &code[j];
        let Some(rows_fn) = stage.rows else {
            return Ok(0);
        };
        let mut n = n;
        bufs.ptrs.clear();
        bufs.steps.clear();
        bufs.strides.clear();
        for (s, slot) in stage.slots.iter().enumerate() {
            let (p, step, st) = match self.resolve(oc, slot) {
                Target::Stage { stage: k, row: r } => {
                    let Some(rows) = plan.rows.get(k).filter(|_| k < scratch.len()) else {
                        return Ok(0);
                    };
                    let Some((p, slot)) = plan.position(k, r) else {
                        return Ok(0);
                    };
                    // Sorted and deduplicated: consecutive iff the last one is `n - 1` on.
                    // (`n` only shrinks below, which keeps earlier slots' checks true.)
                    if rows.get(p + n - 1) != Some(&(r + n - 1)) {
                        return Ok(0);
                    }
                    // Stop where the rows leave the ring's mirrored end.
                    let (ring, mirror) = (plan.ring[k], plan.mirror[k]);
                    n = n.min(ring + mirror - slot);
                    if n < 2 {
                        return Ok(0);
                    }
                    let pitch = self.pitch(k);
                    // SAFETY: `slot == p % ring` (`position`), `slot + n <= ring + mirror`
                    // (for the final, smaller or equal `n`) and scratch[k] holds
                    // `(ring + mirror) * pitch` bytes, so slots `slot ..` for `n` rows are
                    // inside it. Slots past the ring's end hold copies of the first `mirror`
                    // slots, written with them, so slot `ring + s` holds the same row as slot
                    // `s`: row `p + t` there.
                    let ptr = unsafe { (scratch[k].as_ptr() as *const u8).add(slot * pitch) };
                    (ptr, pitch as i64, 1)
                }
                target => match self.slot_args(j, s, slot, &target) {
                    Some((p, step, st, _)) => (p, step, st),
                    None => return Ok(0),
                },
            };
            bufs.ptrs.push(p);
            bufs.steps.push(step);
            bufs.strides.push(st);
        }
        // Earlier stages write scratch rows `pitch` apart; the last one the output's rows.
        let out_row_step = if j + 1 < self.dtypes.len() {
            self.pitch(j)
        } else {
            self.width * self.dtypes[j].size_bytes()
        } as i64;
        // SAFETY: as for the per-row call in `row`, for each of the `n` rows: the rows lie
        // in one plane and inside the run interior of stage `j`
        // (`run_len`), so along the run axis every slot's row is in range and advances by
        // exactly one source row per output row (its stride along that axis for inputs,
        // one scratch row for earlier stages, checked consecutive above), while every other
        // coordinate, and so every constant or in-range answer, stays the same (step 0).
        // So `ptrs[s] + r * steps[s]` is the pointer the per-row resolution gives for row
        // `r` of the run. `dst` has room for `n` contiguous rows of `width` elements of the
        // stage's dtype (the caller's output or scratch range).
        unsafe {
            rows_fn(
                bufs.ptrs.as_ptr(),
                bufs.steps.as_ptr(),
                bufs.strides.as_ptr(),
                dst,
                out_row_step,
                1,
                self.width as i64,
                n as i64,
            );
        }
        Ok(n)
    }

    /// Computes one row of stage `j` at outer coordinates `oc` into `dst` (contiguous).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn row(
        &self,
        code: &[CpuStage],
        j: usize,
        oc: &[usize],
        dst: *mut u8,
        plan: &BlockPlan,
        scratch: &[Scratch],
        bufs: &mut RunBufs,
    ) -> Result<(), RuntimeError> {
        let stage = &code[j];
        let RunBufs { ptrs, strides, .. } = bufs;
        ptrs.clear();
        strides.clear();
        for (s, slot) in stage.slots.iter().enumerate() {
            let (p, st) = match self.resolve(oc, slot) {
                Target::Input { ptr, stride, .. } => (ptr, stride),
                Target::Constant => (self.const_row(j, s), 1),
                Target::InRange(b) => (&IN_RANGE[b as usize] as *const u8, 0),
                Target::Stage { stage: k, row } => {
                    let (_, slot) = plan
                        .position(k, row)
                        .filter(|_| k < scratch.len())
                        .ok_or_else(|| {
                            RuntimeError::Shape(format!(
                                "internal: row {row} of stage {k} was not computed for stage {j}"
                            ))
                        })?;
                    // SAFETY: `slot == p % ring < ring` (`position`, for the row's index
                    // `p`) and scratch[k] holds at least `ring * pitch` bytes, so the row's
                    // ring slot is inside it. The slot still holds row `p`: the plan sized
                    // the ring so no row is overwritten while it is live.
                    let ptr =
                        unsafe { (scratch[k].as_ptr() as *const u8).add(slot * self.pitch(k)) };
                    (ptr, 1)
                }
            };
            ptrs.push(p);
            strides.push(st);
        }
        // SAFETY: `ptrs`/`strides` hold one entry per slot of `stage`, in slot order, as the
        // row function expects; each pointer is column 0 of a row of `width` elements with
        // the given stride inside its tensor, scratch buffer or border-constant row (or a
        // stride-0 in-range byte), all of the dtypes the kernel was compiled for (checked by
        // `validate` and the engine); `dst` has room for `width` contiguous elements of the
        // stage's dtype; `width >= 1`. The function's code is alive: the caller holds the
        // kernel.
        unsafe {
            (stage.func)(ptrs.as_ptr(), strides.as_ptr(), dst, 1, self.width as i64);
        }
        Ok(())
    }
}
