//! The stencil row scheduler.
//!
//! A stencil kernel's output is a set of *rows*: every index tuple of the output except the
//! innermost axis (`b, c, s1..s_{d-1}`), flattened row-major. Rows are split into blocks
//! that run on rayon threads. For each row, each [`RowSlot`] of the stage becomes one
//! pointer: the source row at the output row's outer coordinates plus the slot's outer
//! offset, remapped under the slot's border (or a row of the border constant, or a stride-0
//! pointer at a 0/1 byte for [`SlotKind::OuterInRange`]).
//!
//! For multi-stage kernels a block first works backwards from its output rows to the rows of
//! each earlier stage its slots reference (deduplicated, sorted; they may lie in other
//! planes, or far away under `wrap`), noting the first and last chunk of output rows that
//! needs each. It then runs chunk by chunk: the earlier stages compute, in stage order, the
//! rows the chunk is first to need into rings of scratch rows, then the chunk's output rows
//! are computed from there (see [`Job::block`]). The first rows of each ring are also kept
//! after its end, so that a later stage's window of rows is one run of slots even where it
//! wraps around (and its multi-row call goes on). Earlier stages are never written to memory
//! outside that scratch. Scratch buffers are never zeroed and are reused by the blocks of one
//! rayon work item; the output is not zeroed either (every element is written).
//!
//! Inputs with strided rows (transposed, channels-last) are first copied to contiguous rows,
//! so that the row functions run their vector interiors on them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::sync::atomic::AtomicU8;

use kiln_codegen::cpu::{clean_f64, f32_purity, CpuStage, Purity, RowSlot, SlotKind};
use kiln_codegen::kernel::Source;
use kiln_ir::semantics::remap_index;
use kiln_ir::{Border, DType, Scalar};
use rayon::prelude::*;

use super::lock;
use super::out_ptr::OutPtr;
use crate::memory::fresh_vec;
use crate::tensor::{Storage, Tensor};
use crate::RuntimeError;

/// One stage's scratch rows: uninitialised words, written and read only through raw
/// pointers (never zeroed: every row is computed before it is read).
type Scratch = Vec<std::mem::MaybeUninit<u64>>;

/// Bytes an [`SlotKind::OuterInRange`] slot points at: `[0]` is out of range, `[1]` in range.
static IN_RANGE: [u8; 2] = [0, 1];

/// Where a slot's pointer goes for one row.
enum Target {
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
struct RunBufs {
    ptrs: Vec<*const u8>,
    steps: Vec<i64>,
    strides: Vec<i64>,
}

/// Scratch bytes (one row of every earlier stage, times the chunk's rows) a multi-stage
/// block keeps live per chunk of output rows. Measured on the 2-core EPYC VM (1 MiB L2 per
/// core, 32 MiB L3), 2 threads: budgets of 2-4 MiB ran the 15x15 opening (9 stages) in
/// 8.2-8.4 ms against 11.2 ms unchunked; budgets small enough to stay in L2 (256 KiB) made
/// the two-stage 3x3 opening 12% slower than unchunked, while 4 MiB leaves it unchunked.
/// Part of that was windows wrapping around the scratch rings, which fell back to one row
/// per call until the rings kept a copy of their first rows after their end (the ring
/// `mirror`): since, 1-4 MiB time the 15x15 erosion alike, 4 MiB is still the best for the
/// 15x15 opening at 2048², and at 4096² (chunked there) the mirror made it 11-13% faster.
pub const SCRATCH_BUDGET: usize = 4 << 20;
/// Fewest output rows per chunk (fewer would make per-row calls dominate).
const MIN_CHUNK_ROWS: usize = 4;
/// Most output rows per chunk (as many as a block holds).
const MAX_CHUNK_ROWS: usize = 1024;

/// What runs of one fused group keep for the next: block plans and scratch.
///
/// A block plan (see [`Job::block`]) depends only on the kernel's slots, the output shape,
/// the block's rows and the chunk size, never on the data or the inputs' addresses, so
/// repeated runs at one shape reuse them: working them out took about 8% of a 15x15
/// opening's run at 2048².
///
/// Scratch pools (one per worker of a run, see [`PoolLease`]) are kept so that a run does
/// not allocate its scratch again. Freshly allocated, the scratch rows fault their pages in
/// on every run whenever the allocator hands back new memory (what it does depends on the
/// process's allocation history): a 15x15 erosion at 2048² on one thread took 5.3–6.9 ms
/// that way in a small program, 26% of it in page faults, against 3.3 ms in `kiln bench`.
///
/// The contiguous copies of strided inputs (see [`run`]) are kept for the same reason (at
/// most [`CACHED_COPIES`]): a 48 MiB buffer allocated afresh took 19 ms to fault in on the
/// 2-core EPYC VM, longer than copying a channels-last view into it.
#[derive(Default)]
pub(crate) struct RunCache {
    plans: Mutex<Vec<CachedPlans>>,
    pools: Mutex<Vec<Vec<Scratch>>>,
    copies: Mutex<Vec<Storage>>,
}

impl RunCache {
    /// Frees the kept scratch pools and input copies (the block plans stay: they are small);
    /// returns the bytes freed.
    pub(crate) fn release_buffers(&self) -> usize {
        let scratch: usize = std::mem::take(&mut *lock(&self.pools))
            .iter()
            .flatten()
            .map(|b| b.capacity() * std::mem::size_of::<u64>())
            .sum();
        let copies: usize = std::mem::take(&mut *lock(&self.copies))
            .iter()
            .map(|b| b.len() * b.dtype().size_bytes())
            .sum();
        scratch + copies
    }
}

/// Input copies a [`RunCache`] keeps at most (a kernel rarely has more strided inputs).
const CACHED_COPIES: usize = 4;

/// Contiguous copies of a run's strided inputs, made into buffers of earlier runs when
/// their dtype and size match; given back to the cache when dropped.
struct CopyLease<'a> {
    /// One tensor per input: the input itself, or its copy.
    inputs: Vec<Tensor>,
    /// Which of `inputs` are copies.
    copied: Vec<bool>,
    home: &'a RunCache,
}

impl<'a> CopyLease<'a> {
    /// Copies every input whose last axis is strided.
    fn make(home: &'a RunCache, inputs: &[Tensor], axis: usize) -> Result<Self, RuntimeError> {
        let mut lease = CopyLease {
            inputs: Vec::with_capacity(inputs.len()),
            copied: Vec::with_capacity(inputs.len()),
            home,
        };
        for t in inputs {
            if t.strides()[axis] == 1 {
                lease.inputs.push(t.clone());
                lease.copied.push(false);
                continue;
            }
            let reuse = {
                let mut kept = lock(&home.copies);
                let fits = |b: &Storage| b.dtype() == t.dtype() && b.len() == t.numel();
                kept.iter().position(fits).map(|i| kept.swap_remove(i))
            };
            let copy = Tensor::from_storage(t.contiguous_storage_in(reuse), t.shape())?;
            lease.inputs.push(copy);
            lease.copied.push(true);
        }
        Ok(lease)
    }
}

impl Drop for CopyLease<'_> {
    fn drop(&mut self) {
        let mut kept = lock(&self.home.copies);
        for (t, &copied) in std::mem::take(&mut self.inputs)
            .into_iter()
            .zip(&self.copied)
        {
            if copied && kept.len() < CACHED_COPIES {
                if let Ok(storage) = t.into_unique_storage() {
                    kept.push(storage);
                }
            }
        }
    }
}

/// Scratch pools a [`RunCache`] keeps at most (more are freed when given back): about the
/// number of workers a run has at once.
const CACHED_POOLS: usize = 8;

/// One worker's scratch pool for a run, taken from a [`RunCache`] (or new) and given back
/// when dropped.
struct PoolLease<'a> {
    pool: Vec<Scratch>,
    home: &'a RunCache,
}

impl<'a> PoolLease<'a> {
    fn take(home: &'a RunCache) -> PoolLease<'a> {
        let pool = lock(&home.pools).pop().unwrap_or_default();
        PoolLease { pool, home }
    }
}

impl Drop for PoolLease<'_> {
    fn drop(&mut self) {
        let mut pools = lock(&self.home.pools);
        if pools.len() < CACHED_POOLS {
            pools.push(std::mem::take(&mut self.pool));
        }
    }
}

/// The plans of one kernel at one shape.
struct CachedPlans {
    /// Every stage's slots: all of a kernel that a plan depends on (kernels with equal
    /// slots, such as a kernel and its clean-input form, share plans).
    slots: Vec<Vec<RowSlot>>,
    shape: Vec<usize>,
    /// Output rows per block.
    block: usize,
    /// Output rows per chunk.
    chunk: usize,
    /// Per block: its plan, once a run has made it.
    plans: Vec<Option<Arc<BlockPlan>>>,
}

/// Kernels (first compile, background compile, their clean-input forms) whose plans one
/// cache keeps at once; the oldest is dropped beyond.
const CACHED_KERNELS: usize = 4;

/// Which rows of each earlier stage a block computes, and where they live in scratch.
struct BlockPlan {
    /// Per earlier stage: the rows the block needs, sorted and deduplicated.
    rows: Vec<Vec<usize>>,
    /// Per earlier stage, per needed row: the chunk of output rows that first needs it.
    first: Vec<Vec<usize>>,
    /// Per earlier stage: ring slots (rows) of scratch; needed row `i` lives in slot
    /// `i % ring`, and at most `ring` consecutive needed rows are ever live at once.
    ring: Vec<usize>,
    /// Per earlier stage: ring slots `0..mirror` are also kept after the ring's end (in
    /// slots `ring..ring + mirror`), so a reader's window of rows that runs past the end
    /// is still one run of consecutive slots (see [`Job::try_rows`]): at most the ring
    /// size, and the span of the run-axis offsets of the slots that read the stage.
    mirror: Vec<usize>,
    /// Per earlier stage: needed-row indices in the order they are computed (by first
    /// chunk, then row).
    order: Vec<Vec<usize>>,
    /// Per earlier stage: for each row from the first needed one on, its index in `rows`
    /// and its ring slot (`u32::MAX` for rows not needed), when the needed rows are dense
    /// enough; empty otherwise (see [`BlockPlan::position`]).
    index: Vec<Vec<(u32, u32)>>,
}

impl BlockPlan {
    /// The index in `rows[k]` of stage `k`'s row `row` and the ring slot it lives in
    /// (`index % ring[k]`), if the block needs it. A table lookup where `index[k]`
    /// exists: a binary search and a division per slot and row took most of a 15x15
    /// erosion's run time on 64² planes (its border rows resolve 15 slots each).
    #[inline]
    fn position(&self, k: usize, row: usize) -> Option<(usize, usize)> {
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
    fn build_index(&mut self) {
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
fn settle(
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

/// Everything a block needs, shared read-only between threads.
struct Job<'a> {
    stages: &'a [CpuStage],
    dtypes: &'a [DType],
    inputs: &'a [Tensor],
    /// Full shape of every tensor of the kernel.
    shape: &'a [usize],
    /// Columns per row (the innermost axis).
    width: usize,
    /// Per stage, per slot: which of `const_rows` a `Constant` target reads.
    consts: Vec<Vec<usize>>,
    /// One row of `width` elements per distinct border constant: rows outside the tensor
    /// under a constant border read one of these with unit stride, so that the row
    /// functions run their vector interiors there too (with a stride-0 single element they
    /// took the scalar path at every column: about 12% of a median 3x3 on 256² planes,
    /// whose first and last rows are such rows).
    const_rows: Vec<Vec<u64>>,
    /// Per stage: the range `[lo, hi)` of the run axis (the last outer axis) where every
    /// slot's row offset along that axis stays inside the shape, so consecutive output rows
    /// read consecutive source rows (see [`Job::try_rows`]).
    interior: Vec<(usize, usize)>,
    /// Scratch bytes per chunk of output rows (see [`SCRATCH_BUDGET`]).
    scratch_budget: usize,
    /// Output rows per block (the last block may have fewer).
    block: usize,
    /// Blocks of the output.
    nblocks: usize,
    /// Plans of earlier runs.
    plans: &'a RunCache,
    /// The stages specialised for clean inputs (same slots as `stages`), which a block may
    /// use after checking the inputs it reads (see [`Job::block`]).
    specials: Specials<'a>,
    /// The purest specialisation later blocks try (a [`Purity`] as `u8`): lowered to what a
    /// block's check found, so later blocks skip the forms it ruled out.
    best: AtomicU8,
    /// Blocks computed by the clean specialisation, by the non-negative one, and blocks
    /// whose check failed midway.
    counts: [AtomicUsize; 3],
}

/// A stencil kernel's specialisations for clean inputs (see `kiln_codegen::cpu::Purity`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Specials<'a> {
    /// For clean inputs: no NaN, infinity or -0 (`cpu::compile_clean`).
    pub clean: Option<&'a [CpuStage]>,
    /// For clean inputs with clear sign bits (`cpu::compile_nonneg`).
    pub nonneg: Option<&'a [CpuStage]>,
}

fn purity_of(p: u8) -> Purity {
    match p {
        0 => Purity::Unclean,
        1 => Purity::Clean,
        _ => Purity::NonNeg,
    }
}

/// How a run's blocks used a kernel's clean-input specialisation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CleanBlocks {
    /// Blocks whose input rows all checked clean, computed by the clean specialisation.
    pub clean: usize,
    /// Blocks whose input rows all checked clean with clear sign bits, computed by that
    /// specialisation.
    pub nonneg: usize,
    /// Blocks that found a less clean input row partway than their specialisation needs,
    /// and were computed again by a less specialised kernel.
    pub aborted: usize,
}

/// Input bytes (at 4 per element) a block computes at a time while using a clean-input form,
/// before checking them clean: so the check reads them from cache, right after the kernel
/// brought them in. Measured on the 2-core EPYC VM (1 MiB L2 per core) at 2048²: 256 KiB
/// saved 3-5% of a median 3x3 and 5-8% of an erosion 15x15 against checking the whole
/// input first, and 64 KiB or 1 MiB about half that.
const CHECK_BYTES: usize = 256 << 10;

/// The run axis: the last outer axis (the innermost spatial axis but one, or the channel
/// axis when there is one spatial axis).
fn run_axis(shape: &[usize]) -> usize {
    shape.len() - 2
}

/// Checks the stages' slots against the inputs and each other before any pointer is formed.
fn validate(
    stages: &[CpuStage],
    dtypes: &[DType],
    inputs: &[Tensor],
    shape: &[usize],
) -> Result<(), RuntimeError> {
    let bad = |m: String| Err(RuntimeError::Shape(m));
    if stages.is_empty() || stages.len() != dtypes.len() {
        return bad(format!(
            "stencil kernel with {} stages and {} stage dtypes",
            stages.len(),
            dtypes.len()
        ));
    }
    if shape.len() < 3 || shape.contains(&0) {
        return bad(format!(
            "stencil output shape {shape:?} is not [B, C, S1..Sd]"
        ));
    }
    for (i, t) in inputs.iter().enumerate() {
        if t.shape() != shape {
            return bad(format!(
                "stencil input {i} has shape {:?}, the kernel's shape is {shape:?}",
                t.shape()
            ));
        }
    }
    let outer_rank = shape.len() - 3;
    for (j, st) in stages.iter().enumerate() {
        for (s, slot) in st.slots.iter().enumerate() {
            if slot.outer_offset.len() != outer_rank {
                return bad(format!(
                    "stage {j} slot {s}: outer offset {:?} needs {outer_rank} entries",
                    slot.outer_offset
                ));
            }
            if let SlotKind::Row { source, border } = &slot.kind {
                let dtype = match *source {
                    Source::Input(n) => match inputs.get(n as usize) {
                        Some(t) => t.dtype(),
                        None => return bad(format!("stage {j} slot {s} reads missing input {n}")),
                    },
                    Source::Stage(k) if (k as usize) < j => dtypes[k as usize],
                    Source::Stage(k) => {
                        return bad(format!("stage {j} slot {s} reads stage {k}, not earlier"))
                    }
                };
                if let Border::Constant(c) = border {
                    if c.dtype() != dtype {
                        return bad(format!(
                            "stage {j} slot {s}: border constant {c} for a {dtype} source"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The scalar's bytes in native order, repeated to fill a u64: a run of these words is a
/// row of the scalar (every element size divides 8).
fn repeated_word(s: Scalar) -> u64 {
    let one: &[u8] = &match s {
        Scalar::F32(v) => v.to_ne_bytes().to_vec(),
        Scalar::F64(v) => v.to_ne_bytes().to_vec(),
        Scalar::U8(v) => vec![v],
        Scalar::Bool(v) => vec![v as u8],
    };
    let mut b = [0u8; 8];
    for (i, x) in b.iter_mut().enumerate() {
        *x = one[i % one.len()];
    }
    u64::from_ne_bytes(b)
}

/// Runs a stencil kernel's stages over the whole output; returns the last stage as a fresh
/// contiguous tensor of `shape`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    stages: &[CpuStage],
    specials: Specials,
    dtypes: &[DType],
    inputs: &[Tensor],
    shape: &[usize],
    scratch_budget: usize,
    reuse: Option<Storage>,
    plans: &RunCache,
) -> Result<(Tensor, CleanBlocks), RuntimeError> {
    validate(stages, dtypes, inputs, shape)?;
    // A specialisation is only interchangeable with the general stages if it reads the
    // same rows.
    let same = |c: &&[CpuStage]| {
        c.len() == stages.len() && c.iter().zip(stages).all(|(a, b)| a.slots == b.slots)
    };
    let specials = Specials {
        clean: specials.clean.filter(same),
        nonneg: specials.nonneg.filter(same),
    };
    let width = shape[shape.len() - 1];
    // Inputs whose rows are strided (transposed, channels-last) are copied to contiguous
    // rows first: the row functions then take their vector interior everywhere instead of
    // the scalar border path for every column, which costs far more than one copy.
    // Their copies go into buffers kept from earlier runs (see [`RunCache`]).
    let copies: CopyLease;
    let inputs = if width > 1 && inputs.iter().any(|t| t.strides()[shape.len() - 1] != 1) {
        copies = CopyLease::make(plans, inputs, shape.len() - 1)?;
        &copies.inputs[..]
    } else {
        inputs
    };
    let rows: usize = shape[..shape.len() - 1].iter().product();
    let mut const_rows: Vec<Vec<u64>> = Vec::new();
    let mut const_keys: Vec<(u64, usize)> = Vec::new();
    let consts = stages
        .iter()
        .map(|st| {
            st.slots
                .iter()
                .map(|slot| match &slot.kind {
                    SlotKind::Row {
                        border: Border::Constant(c),
                        ..
                    } => {
                        let key = (repeated_word(*c), c.dtype().size_bytes());
                        match const_keys.iter().position(|k| *k == key) {
                            Some(i) => i,
                            None => {
                                const_keys.push(key);
                                const_rows.push(vec![key.0; (width * key.1).div_ceil(8)]);
                                const_rows.len() - 1
                            }
                        }
                    }
                    _ => usize::MAX,
                })
                .collect()
        })
        .collect();
    let a = run_axis(shape);
    let interior = stages
        .iter()
        .map(|st| {
            let (mut dmin, mut dmax) = (0i64, 0i64);
            if a >= 2 {
                for slot in &st.slots {
                    let d = slot.outer_offset.get(a - 2).copied().unwrap_or(0);
                    dmin = dmin.min(d);
                    dmax = dmax.max(d);
                }
            }
            let n = shape[a] as i64;
            let lo = (-dmin).clamp(0, n);
            let hi = (n - dmax).clamp(lo, n);
            (lo as usize, hi as usize)
        })
        .collect();
    let threads = rayon::current_num_threads().max(1);
    let block = rows.div_ceil(threads * 4).clamp(16, 1024);
    let nblocks = rows.div_ceil(block);
    let job = Job {
        stages,
        dtypes,
        inputs,
        shape,
        width,
        consts,
        const_rows,
        interior,
        scratch_budget,
        block,
        nblocks,
        plans,
        specials,
        best: AtomicU8::new(Purity::NonNeg as u8),
        counts: Default::default(),
    };
    let out_dtype = dtypes[dtypes.len() - 1];
    let len = rows * width;
    let mut buf = match reuse {
        None => OutBuf::with_capacity(out_dtype, len),
        Some(s) if s.dtype() == out_dtype && s.len() == len => OutBuf::from_storage(s),
        Some(s) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {} {} elements for a {out_dtype} output of {len}",
                s.len(),
                s.dtype()
            )))
        }
    };
    let out = OutPtr(buf.as_mut_ptr());
    let do_block = |pool: &mut Vec<Scratch>, b: usize| {
        let r0 = b * block;
        let r1 = (r0 + block).min(rows);
        job.block(r0, r1, out, pool)
    };
    if nblocks <= 1 || crate::inline::active() {
        let mut lease = PoolLease::take(plans);
        for b in 0..nblocks {
            do_block(&mut lease.pool, b)?;
        }
    } else {
        // One scratch pool per rayon work item (a few per thread), reused by its blocks.
        (0..nblocks).into_par_iter().try_for_each_init(
            || PoolLease::take(plans),
            |lease, b| do_block(&mut lease.pool, b),
        )?;
    }
    // SAFETY: the blocks partition the rows `0..rows`, and every block wrote each of its
    // rows in full (a row function writes all `width` columns), so all `len` elements are
    // initialised; bools are written as 0/1 bytes.
    let storage = unsafe { buf.assume_init(len) };
    let counts = CleanBlocks {
        clean: job.counts[0].load(Ordering::Relaxed),
        nonneg: job.counts[1].load(Ordering::Relaxed),
        aborted: job.counts[2].load(Ordering::Relaxed),
    };
    Ok((Tensor::from_storage(storage, shape)?, counts))
}

/// Output storage allocated without zeroing (every element is written by the kernel).
enum OutBuf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    U8(Vec<u8>),
    Bool(Vec<u8>),
}

impl OutBuf {
    /// Room for `len` elements of `dtype`, uninitialised.
    fn with_capacity(dtype: DType, len: usize) -> OutBuf {
        match dtype {
            DType::F32 => OutBuf::F32(fresh_vec(len)),
            DType::F64 => OutBuf::F64(fresh_vec(len)),
            DType::U8 => OutBuf::U8(fresh_vec(len)),
            DType::Bool => OutBuf::Bool(fresh_vec(len)),
        }
    }

    /// An existing storage's vector, to be overwritten (its length stays).
    fn from_storage(s: Storage) -> OutBuf {
        match s {
            Storage::F32(v) => OutBuf::F32(v),
            Storage::F64(v) => OutBuf::F64(v),
            Storage::U8(v) => OutBuf::U8(v),
            Storage::Bool(v) => OutBuf::Bool(v),
        }
    }

    /// The start of the buffer (valid for writes of the whole capacity).
    fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            OutBuf::F32(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::F64(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::U8(v) | OutBuf::Bool(v) => v.as_mut_ptr(),
        }
    }

    /// The storage of the first `len` elements.
    ///
    /// # Safety
    /// `len` is at most the capacity and the first `len` elements have been written
    /// (bools as 0 or 1).
    unsafe fn assume_init(self, len: usize) -> Storage {
        // SAFETY: the caller guarantees `len <= capacity` and that the elements are written.
        unsafe {
            match self {
                OutBuf::F32(mut v) => {
                    v.set_len(len);
                    Storage::F32(v)
                }
                OutBuf::F64(mut v) => {
                    v.set_len(len);
                    Storage::F64(v)
                }
                OutBuf::U8(mut v) => {
                    v.set_len(len);
                    Storage::U8(v)
                }
                OutBuf::Bool(mut v) => {
                    v.set_len(len);
                    Storage::Bool(v)
                }
            }
        }
    }
}

impl Job<'_> {
    /// Writes the outer coordinates (`b, c, s1..s_{d-1}`) of flat row `row` into `oc`.
    /// Bytes between consecutive scratch rows of stage `k`: its row rounded up to an odd
    /// number of 64-byte lines, so that the rows a later stage reads together (and the
    /// output rows it writes) do not all share their address bits below 4 KiB. With a pitch
    /// of a multiple of 4 KiB (2048 f32 columns) loads and stores alias in the CPU's
    /// store-forwarding check, which measured as a run-to-run swing of 25% on a 15x15
    /// erosion, depending on where the buffers happened to be placed.
    fn pitch(&self, k: usize) -> usize {
        let lines = (self.width * self.dtypes[k].size_bytes()).div_ceil(64);
        64 * (lines | 1)
    }

    fn decode(&self, mut row: usize, oc: &mut [usize]) {
        for k in (0..oc.len()).rev() {
            oc[k] = row % self.shape[k];
            row /= self.shape[k];
        }
    }

    /// Resolves `slot` for the output row with outer coordinates `oc`.
    fn resolve(&self, oc: &[usize], slot: &RowSlot) -> Target {
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
                        let ptr = unsafe { t.storage().as_ptr().add((t.offset() + elem) * es) };
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

    /// Output rows per chunk of a multi-stage block: about `scratch_budget` bytes of
    /// scratch rows of all earlier stages per chunk.
    fn chunk_rows(&self) -> usize {
        let last = self.stages.len() - 1;
        let bytes: usize = (0..last).map(|k| self.pitch(k)).sum();
        (self.scratch_budget / bytes.max(1)).clamp(MIN_CHUNK_ROWS, MAX_CHUNK_ROWS)
    }

    /// The plan of the block of rows `r0..r1` (see [`RunCache`]): from an earlier run at
    /// this shape, else made now and kept.
    fn cached_plan(&self, r0: usize, r1: usize, chunk: usize) -> Arc<BlockPlan> {
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
    fn plan_block(&self, r0: usize, r1: usize, chunk: usize) -> BlockPlan {
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

    /// Whether the rows of every input that stage `k`'s computation of `done` rows from
    /// outer coordinates `oc` read through its slots are at least `need` pure, checking only
    /// those outside `checked` (per input, the flat rows `[lo, hi)` this block has checked
    /// so far): `Err` with the purity found if not. A computation of several rows reads
    /// consecutive rows through every slot (see [`Job::try_rows`]); one of a single row, one
    /// row per slot.
    fn read_clean(
        &self,
        k: usize,
        oc: &[usize],
        done: usize,
        checked: &mut [(usize, usize)],
        need: Purity,
    ) -> Result<(), Purity> {
        for slot in &self.stages[k].slots {
            // Only input slots read inputs (resolving the others, earlier stages' rows, cost
            // as much as the row's own resolution).
            let SlotKind::Row {
                source: Source::Input(n),
                ..
            } = slot.kind
            else {
                continue;
            };
            if let Target::Input { row, .. } = self.resolve(oc, slot) {
                let n = n as usize;
                self.rows_clean(n, row, row + done, &mut checked[n], need)?;
            }
        }
        Ok(())
    }

    /// Whether rows `a..b` of input `n` are at least `need` pure (`Err` with the purity
    /// found if not), checking the part outside `checked`. The interval grows while the rows
    /// read are next to it (a block's reads move forward); rows away from it (a `wrap`
    /// border's, say) are checked on their own, and replace it when they are at least as
    /// many.
    fn rows_clean(
        &self,
        n: usize,
        a: usize,
        b: usize,
        checked: &mut (usize, usize),
        need: Purity,
    ) -> Result<(), Purity> {
        let pure = |r0: usize, r1: usize| {
            let p = self.input_rows_purity(n, r0, r1);
            if p >= need {
                Ok(())
            } else {
                Err(p)
            }
        };
        let (lo, hi) = *checked;
        if lo < hi && a <= hi && b >= lo {
            if a < lo {
                pure(a, lo)?;
            }
            if b > hi {
                pure(hi, b)?;
            }
            *checked = (lo.min(a), hi.max(b));
            return Ok(());
        }
        pure(a, b)?;
        if b - a >= hi - lo {
            *checked = (a, b);
        }
        Ok(())
    }

    /// The purity of rows `r0..r1` (flat, in the kernel's shape) of input `n`: the least of
    /// their floats' (see `kiln_codegen::cpu::Purity`; f64 rows are at most clean, rows
    /// without floats are pure).
    fn input_rows_purity(&self, n: usize, r0: usize, r1: usize) -> Purity {
        let t = &self.inputs[n];
        let w = self.width;
        let purity = |at: usize, len: usize| match &**t.storage() {
            Storage::F32(v) => v.get(at..at + len).map_or(Purity::Unclean, f32_purity),
            Storage::F64(v) => match v.get(at..at + len).is_some_and(clean_f64) {
                true => Purity::Clean,
                false => Purity::Unclean,
            },
            _ => Purity::NonNeg,
        };
        if t.is_contiguous() {
            return purity(t.offset() + r0 * w, (r1 - r0) * w);
        }
        let outer = self.shape.len() - 1;
        if w > 1 && t.strides()[outer] != 1 {
            return Purity::Unclean;
        }
        let mut oc = vec![0usize; outer];
        let mut least = Purity::NonNeg;
        for r in r0..r1 {
            self.decode(r, &mut oc);
            let at = oc
                .iter()
                .zip(t.strides())
                .map(|(c, s)| c * s)
                .sum::<usize>();
            least = least.min(purity(t.offset() + at, w));
            if least == Purity::Unclean {
                break;
            }
        }
        least
    }

    /// Computes rows `r0..r1` of the last stage (and what it needs of earlier stages).
    /// `pool` holds scratch buffers from earlier blocks, reused without clearing (every
    /// scratch row is written before it is read).
    ///
    /// Output rows go in chunks of [`Job::chunk_rows`]. Before a chunk, each earlier stage
    /// computes the rows that this chunk is the first to need, in stage order, into a ring
    /// of scratch rows that holds every row still to be read: row `i` of a stage's needed
    /// rows lives in ring slot `i % ring`. So the rows a stage reads were written moments
    /// before, and stay in cache, however many stages the kernel chains.
    ///
    /// A kernel with a clean-input form runs the block with it, checking, right after each
    /// row computation (of at most [`CHECK_BYTES`] of input), the input rows it read that
    /// the block has not checked yet (see [`Job::read_clean`]): they are still in cache
    /// then. If one is unclean, the block is
    /// computed again by the general kernel, over whatever the specialisation wrote; both
    /// give the same bits on clean inputs, so which one computed a block changes its speed
    /// only. (On unclean inputs the specialisation computes other values, but no worse:
    /// its code is the general kernel's with NaN tests folded and min/max plain, and
    /// neither can fault or address memory by value.) A kernel with a form for clean inputs
    /// with clear sign bits tries that first, the same way; a block that finds its input
    /// less pure falls back to the purest form its check allows, and later blocks start
    /// there.
    fn block(
        &self,
        r0: usize,
        r1: usize,
        out: OutPtr,
        pool: &mut Vec<Scratch>,
    ) -> Result<(), RuntimeError> {
        let forms = [
            (Purity::NonNeg, self.specials.nonneg, 1),
            (Purity::Clean, self.specials.clean, 0),
        ];
        for (need, code, count) in forms {
            let Some(code) = code else { continue };
            if purity_of(self.best.load(Ordering::Relaxed)) < need {
                continue;
            }
            match self.block_with(code, Some(need), r0, r1, out, pool)? {
                Ok(()) => {
                    self.counts[count].fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(found) => {
                    self.best.fetch_min(found as u8, Ordering::Relaxed);
                    self.counts[2].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // Unchecked, the general kernel always completes the block.
        self.block_with(self.stages, None, r0, r1, out, pool)
            .map(|_complete| ())
    }

    /// [`Job::block`] with the row functions of `code` (the kernel's stages or a
    /// specialisation); with `check`, checks that the input rows each computation read are
    /// at least that pure, and returns `Err` with the purity found at the first that is
    /// not, leaving the block partly written (with values a less specialised kernel must
    /// replace).
    fn block_with(
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

    /// Computes the whole planes among rows `r0..r1` of a single-stage kernel over
    /// `[B, C, H, W]` and returns the rows it computed (`a..b`, empty when it does not
    /// apply). With `checked` (see [`Job::rows_clean`]), checks each plane's input rows
    /// after computing it, and returns `None` at an unclean one; planes of more than
    /// [`CHECK_BYTES`] are then left to the row loop. The calls one plane needs (the border rows one by one, the interior in one
    /// multi-row call) are worked out once, for the first whole plane, and replayed for
    /// the others with every input pointer moved by whole planes. That applies when the
    /// stage reads no earlier stage and every input's planes are evenly spaced (its batch
    /// stride is `C` times its channel stride, or there is one batch). Resolving the slots
    /// of every call instead took about 18% of gradient magnitude's time on 28² planes.
    fn replay_planes(
        &self,
        code: &[CpuStage],
        r0: usize,
        r1: usize,
        out: OutPtr,
        bufs: &mut RunBufs,
        mut checked: Option<(&mut [(usize, usize)], Purity)>,
    ) -> Result<(usize, usize), Purity> {
        let stage = &code[0];
        let none = Ok((r1, r1));
        let reads_stage = stage.slots.iter().any(|slot| {
            matches!(
                slot.kind,
                SlotKind::Row {
                    source: Source::Stage(_),
                    ..
                }
            )
        });
        if self.shape.len() != 4 || code.len() != 1 || reads_stage {
            return none;
        }
        let (c, h) = (self.shape[1], self.shape[2]);
        let even = |t: &Tensor| self.shape[0] == 1 || t.strides()[0] == c * t.strides()[1];
        let (p0, p1) = (r0.div_ceil(h), r1 / h);
        let row_bytes = self.width * self.dtypes[0].size_bytes();
        let too_big = checked.is_some() && h * self.width * 4 > CHECK_BYTES;
        if p0 + 1 >= p1 || too_big || !self.inputs.iter().all(even) {
            return none;
        }
        let plane_bytes: Vec<usize> = self
            .inputs
            .iter()
            .map(|t| t.strides()[1] * t.dtype().size_bytes())
            .collect();
        // The first whole plane's calls: first row in the plane, rows (one for a call of the
        // single-row function), and per slot its pointer, the input whose planes it moves
        // by (none for a constant or an in-range answer), row step and column stride.
        type Call = (
            usize,
            usize,
            Vec<(*const u8, Option<usize>)>,
            Vec<i64>,
            Vec<i64>,
        );
        let mut calls: Vec<Call> = Vec::new();
        let mut oc = [0usize; 3];
        let mut y = 0;
        while y < h {
            self.decode(p0 * h + y, &mut oc);
            let n = match stage.rows {
                Some(_) => self.run_len(0, &oc, h - y).max(1),
                None => 1,
            };
            let (mut ptrs, mut steps, mut strides) = (Vec::new(), Vec::new(), Vec::new());
            for (s, slot) in stage.slots.iter().enumerate() {
                let Some((p, step, st, moves)) =
                    self.slot_args(0, s, slot, &self.resolve(&oc, slot))
                else {
                    return none;
                };
                let p = (p, moves);
                ptrs.push(p);
                steps.push(step);
                strides.push(st);
            }
            calls.push((y, n, ptrs, steps, strides));
            y += n;
        }
        for p in p0..p1 {
            for (y, n, ptrs, steps, strides) in &calls {
                bufs.ptrs.clear();
                for &(q, moves) in ptrs {
                    bufs.ptrs.push(match moves {
                        // SAFETY: see the call below: this is the pointer that resolving
                        // the slot for row `y` of plane `p` gives, inside the input.
                        Some(i) => unsafe { q.add((p - p0) * plane_bytes[i]) },
                        None => q,
                    });
                }
                // SAFETY: rows `p * h + y ..` for `n` rows are the block's own rows (plane
                // `p` lies in `r0..r1`), inside the output, so `dst` has room for them. The
                // batch and channel coordinates are never remapped and every input's planes
                // are evenly spaced (`even`: one channel stride apart, also across batches),
                // so moving plane `p0`'s resolved pointers by `p - p0` planes gives exactly
                // the pointers resolving plane `p`'s rows gives; constants and in-range
                // answers depend on the row within the plane only. The calls are those the
                // row loop makes for one plane (`run_len` interior runs to the multi-row
                // function, each other row to the single-row one), with its arguments.
                unsafe {
                    let dst = out.get().add((p * h + y) * row_bytes);
                    match stage.rows {
                        Some(rows_fn) if *n > 1 => rows_fn(
                            bufs.ptrs.as_ptr(),
                            steps.as_ptr(),
                            strides.as_ptr(),
                            dst,
                            row_bytes as i64,
                            1,
                            self.width as i64,
                            *n as i64,
                        ),
                        _ => (stage.func)(
                            bufs.ptrs.as_ptr(),
                            strides.as_ptr(),
                            dst,
                            1,
                            self.width as i64,
                        ),
                    }
                }
            }
            // A plane's calls read that plane's rows only (the batch and channel are never
            // remapped): check them all.
            if let Some((checked, need)) = checked.as_mut() {
                for (n, iv) in checked.iter_mut().enumerate() {
                    self.rows_clean(n, p * h, (p + 1) * h, iv, *need)?;
                }
            }
        }
        Ok((p0 * h, p1 * h))
    }

    /// Computes stage `j`'s rows from the row at outer coordinates `oc` into `dst`: up to `n`
    /// (consecutive, in one run interior) with one multi-row call when possible, else one
    /// row. Returns how many rows it computed (at least 1).
    #[allow(clippy::too_many_arguments)]
    fn compute_rows(
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
    fn run_len(&self, j: usize, oc: &[usize], max: usize) -> usize {
        let a = run_axis(self.shape);
        let (lo, hi) = self.interior[j];
        let y = oc[a];
        if y < lo || y >= hi {
            return 0;
        }
        (hi - y).min(max)
    }

    /// The row of border constants that slot `s` of stage `j` reads outside the tensor.
    fn const_row(&self, j: usize, s: usize) -> *const u8 {
        self.const_rows[self.consts[j][s]].as_ptr() as *const u8
    }

    /// What a row call passes for slot `s` of stage `j` resolved to `target`: its pointer,
    /// row step (bytes, to the same slot's row for the next output row along the run
    /// axis), column stride, and the input it reads (`None` for a constant or an in-range
    /// answer, which stay put). `None` for an earlier stage's row, whose place in the
    /// scratch ring the caller works out.
    fn slot_args(
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
    fn try_rows(
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
    fn row(
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

#[cfg(test)]
mod tests {
    //! The scheduler tested with hand-written row functions, independent of Cranelift.

    use super::*;
    use kiln_codegen::cpu::RowsFn;
    use kiln_ir::semantics::remap_index;

    /// `settle` by definition: each distinct row once, ascending, with the least and the
    /// greatest chunk that reads it.
    fn settle_reference(reads: &[(usize, usize)]) -> Vec<(usize, usize, usize)> {
        let mut out: Vec<(usize, usize, usize)> = Vec::new();
        let mut sorted = reads.to_vec();
        sorted.sort_unstable();
        for (row, c) in sorted {
            match out.last_mut() {
                Some(last) if last.0 == row => last.2 = c,
                _ => out.push((row, c, c)),
            }
        }
        out
    }

    /// `BlockPlan::position` (a table for dense rows, a binary search otherwise) finds
    /// exactly the needed rows, at their index and ring slot, and nothing else.
    #[test]
    fn block_plan_positions_match_a_search_of_the_needed_rows() {
        let cases: Vec<Vec<usize>> = vec![
            Vec::new(),
            vec![0],
            vec![7],
            (5..40).collect(),
            (0..30).chain(33..50).chain(90..95).collect(),
            vec![3, 1_000, 5_000_000],
            (0..200).map(|i| i * 3 + 11).collect(),
        ];
        let mut tables = 0;
        for rows in cases {
            let mut plan = BlockPlan {
                rows: vec![rows.clone()],
                first: vec![Vec::new()],
                ring: vec![7],
                mirror: vec![0],
                order: vec![Vec::new()],
                index: Vec::new(),
            };
            plan.build_index();
            tables += usize::from(!plan.index[0].is_empty());
            let probe = rows.iter().flat_map(|&r| [r.saturating_sub(1), r, r + 1]);
            for row in probe.chain([0, 1, 2, 6, 8, 100, 5_000_001]) {
                assert_eq!(
                    plan.position(0, row),
                    rows.binary_search(&row).ok().map(|i| (i, i % 7)),
                    "{rows:?} row {row}"
                );
            }
            assert_eq!(plan.position(1, 0), None);
        }
        // Both ways were taken: tables for the five non-empty dense lists, a search for
        // the sparse one.
        assert_eq!(tables, 5);
    }

    #[test]
    fn settle_dense_and_sparse_reads_match_the_definition() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        let mut cases: Vec<Vec<(usize, usize)>> = vec![
            Vec::new(),
            vec![(5, 0)],
            // Far apart rows (the sorting path), e.g. `wrap` reading another plane's end.
            vec![(1_000_000, 2), (3, 1), (1_000_000, 0), (3, 4)],
        ];
        // Windows of neighbouring rows per reader, in reader order (the dense path), with
        // reflected rows at both ends and readers in chunks of 4.
        for k in [1usize, 3, 15] {
            let mut reads = Vec::new();
            for r in 0..40usize {
                for d in 0..k {
                    let row = (r + d).abs_diff(k / 2).min(200);
                    reads.push((row + 100, r / 4));
                }
            }
            cases.push(reads);
        }
        for _ in 0..50 {
            let n = 1 + next(300);
            let span = 1 + next(2000);
            cases.push((0..n).map(|_| (next(span), next(9))).collect());
        }
        for reads in cases {
            let (mut rows, mut first, mut until) = (Vec::new(), Vec::new(), Vec::new());
            settle(reads.clone(), &mut rows, &mut first, &mut until);
            let got: Vec<(usize, usize, usize)> = rows
                .iter()
                .zip(&first)
                .zip(&until)
                .map(|((&r, &f), &u)| (r, f, u))
                .collect();
            assert_eq!(got, settle_reference(&reads), "reads {reads:?}");
        }
    }

    /// Row function: `out[x] = rows[0][x] + rows[1][x] + rows[2][x]` (f32, left to right),
    /// plus `rows[3][0]` as a 0/1 byte when a fourth slot is present (in-range flag).
    unsafe extern "C" fn sum3(
        rows: *const *const u8,
        strides: *const i64,
        out: *mut u8,
        out_stride: i64,
        width: i64,
    ) {
        for x in 0..width as isize {
            let mut acc = 0.0f32;
            for s in 0..3 {
                // SAFETY: test row function; the scheduler passes 3 valid row pointers.
                unsafe {
                    let p = *rows.add(s) as *const f32;
                    let st = *strides.add(s) as isize;
                    acc += *p.offset(x * st);
                }
            }
            // SAFETY: `out` has `width` elements with stride `out_stride`.
            unsafe { *(out as *mut f32).offset(x * out_stride as isize) = acc };
        }
    }

    /// `sum3` over `nrows` rows, per the [`RowsFn`] contract: slot pointers advanced by
    /// their row steps, the output by `out_row_step`. Counts its calls in `RUNS`.
    #[allow(clippy::too_many_arguments)]
    unsafe extern "C" fn sum3_rows(
        rows: *const *const u8,
        row_steps: *const i64,
        strides: *const i64,
        out: *mut u8,
        out_row_step: i64,
        out_stride: i64,
        width: i64,
        nrows: i64,
    ) {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for r in 0..nrows as isize {
            let mut p = [std::ptr::null::<u8>(); 3];
            for (s, q) in p.iter_mut().enumerate() {
                // SAFETY: test row function; the scheduler passes 3 row pointers and steps
                // such that each advanced pointer is a valid row.
                unsafe { *q = (*rows.add(s)).offset(r * *row_steps.add(s) as isize) };
            }
            // SAFETY: as above; `out` has `nrows` rows `out_row_step` bytes apart.
            unsafe {
                sum3(
                    p.as_ptr(),
                    strides,
                    out.offset(r * out_row_step as isize),
                    out_stride,
                    width,
                )
            };
        }
    }

    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn vertical(source: Source, border: Border, rank: usize) -> Vec<RowSlot> {
        (-1..=1)
            .map(|o| {
                let mut off = vec![0i64; rank - 3];
                off[0] = o * 3;
                RowSlot {
                    kind: SlotKind::Row { source, border },
                    outer_offset: off,
                }
            })
            .collect()
    }

    /// Reference of `vertical` + `sum3` on a contiguous f32 image `[1, 1, h, w]`.
    fn reference(x: &[f32], h: usize, w: usize, border: Border) -> Vec<f32> {
        let mut out = vec![0.0; h * w];
        for i in 0..h {
            for j in 0..w {
                let mut acc = 0.0f32;
                for o in -1..=1i64 {
                    acc += match remap_index(i as i64 + 3 * o, h, &border) {
                        Some(r) => x[r * w + j],
                        None => match border {
                            Border::Constant(Scalar::F32(b)) => f32::from_bits(b),
                            _ => unreachable!(),
                        },
                    };
                }
                out[i * w + j] = acc;
            }
        }
        out
    }

    fn data(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 37) % 101) as f32 * 0.25).collect()
    }

    #[test]
    fn one_and_two_stages_match_reference_under_every_border() {
        let plans = RunCache::default();
        for (h, w) in [(1, 1), (1, 7), (9, 1), (40, 13), (5, 3), (300, 3)] {
            let x = data(h * w);
            let t = Tensor::from_f32(x.clone(), &[1, 1, h, w]).unwrap();
            for border in Border::all(Scalar::f32(-2.5)) {
                for multi in [None, Some(sum3_rows as RowsFn)] {
                    let one = [CpuStage {
                        slots: vertical(Source::Input(0), border, 4),
                        func: sum3,
                        rows: multi,
                    }];
                    let runs0 = RUNS.load(std::sync::atomic::Ordering::Relaxed);
                    let got = run(
                        &one,
                        Specials::default(),
                        &[DType::F32],
                        std::slice::from_ref(&t),
                        &[1, 1, h, w],
                        SCRATCH_BUDGET,
                        None,
                        &RunCache::default(),
                    )
                    .unwrap()
                    .0;
                    if multi.is_some() && h >= 9 {
                        // Rows 3..h-3 are interior (offsets ±3): at least one multi-row call.
                        assert!(
                            RUNS.load(std::sync::atomic::Ordering::Relaxed) > runs0,
                            "no multi-row call for {h}x{w} {border}"
                        );
                    }
                    let want = reference(&x, h, w, border);
                    let got_v: Vec<u32> = got
                        .to_scalars()
                        .iter()
                        .map(|s| match s {
                            Scalar::F32(b) => *b,
                            _ => panic!(),
                        })
                        .collect();
                    let want_v: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got_v, want_v, "one stage {h}x{w} {border}");

                    // Chains of 2 and 3 stages, unchunked and in chunks of the fewest rows
                    // (a 1-byte budget), so rings wrap and rows are reused across chunks.
                    let stage = |source| CpuStage {
                        slots: vertical(source, border, 4),
                        func: sum3,
                        rows: multi,
                    };
                    for budget in [SCRATCH_BUDGET, 1] {
                        let mut want = want.clone();
                        for n in 2..=3 {
                            let chain: Vec<CpuStage> = (0..n)
                                .map(|k| {
                                    stage(if k == 0 {
                                        Source::Input(0)
                                    } else {
                                        Source::Stage(k as u32 - 1)
                                    })
                                })
                                .collect();
                            // Twice through one cache shared by every case: the second
                            // run takes its block plans from the first.
                            let mut outs = (0..2).map(|_| {
                                run(
                                    &chain,
                                    Specials::default(),
                                    &vec![DType::F32; n],
                                    std::slice::from_ref(&t),
                                    &[1, 1, h, w],
                                    budget,
                                    None,
                                    &plans,
                                )
                                .unwrap()
                                .0
                            });
                            let (first, got) = (outs.next().unwrap(), outs.next().unwrap());
                            assert_eq!(crate::tensor::first_difference(&first, &got), None);
                            want = reference(&want, h, w, border);
                            let got_v: Vec<u32> = got
                                .to_scalars()
                                .iter()
                                .map(|s| match s {
                                    Scalar::F32(b) => *b,
                                    _ => panic!(),
                                })
                                .collect();
                            let want_v: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                            assert_eq!(
                                got_v,
                                want_v,
                                "{n} stages {h}x{w} {border} multi={} budget={budget}",
                                multi.is_some()
                            );
                        }
                    }
                }
            }
        }
    }

    /// A chain of `n` stages of 3-row vertical sums under `border`: the first reads the
    /// input, each later one the stage before it.
    fn sum3_chain(n: usize, border: Border) -> Vec<CpuStage> {
        (0..n)
            .map(|k| CpuStage {
                slots: vertical(
                    if k == 0 {
                        Source::Input(0)
                    } else {
                        Source::Stage(k as u32 - 1)
                    },
                    border,
                    4,
                ),
                func: sum3,
                rows: Some(sum3_rows),
            })
            .collect()
    }

    /// Runs f32 `stages` on `t` (`[1, 1, H, W]`) with a scratch `budget` and `cache`.
    fn run_chain(stages: &[CpuStage], t: &Tensor, budget: usize, cache: &RunCache) -> Tensor {
        let dtypes = vec![DType::F32; stages.len()];
        let out = run(
            stages,
            Specials::default(),
            &dtypes,
            std::slice::from_ref(t),
            t.shape(),
            budget,
            None,
            cache,
        );
        out.unwrap().0
    }

    #[test]
    fn scratch_is_kept_between_runs_and_reused() {
        // A 3-stage chain (two stages in scratch). On the calling thread (one pool, blocks
        // in order) the second run must find the first run's scratch buffers in the cache
        // and use them: the same allocations afterwards. On rayon's threads which pool
        // serves which blocks depends on how the work was split (a pool that meets a block
        // with bigger rings than before grows, and a run may take more pools than the last),
        // so there only the bits are checked. Both give the same bits as a run with an empty
        // cache.
        let (h, w) = (64, 37);
        let t = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
        let stages = sum3_chain(3, Border::Reflect);
        let go = |cache: &RunCache| run_chain(&stages, &t, SCRATCH_BUDGET, cache);
        let buffers = |cache: &RunCache| -> Vec<usize> {
            let mut v: Vec<usize> = lock(&cache.pools)
                .iter()
                .flatten()
                .map(|b| b.as_ptr() as usize)
                .collect();
            v.sort_unstable();
            v
        };
        let want = go(&RunCache::default());
        for on_caller in [true, false] {
            let cache = RunCache::default();
            let run = |cache: &RunCache| match on_caller {
                true => crate::inline::run(|| go(cache)),
                false => go(cache),
            };
            let first = run(&cache);
            let kept = buffers(&cache);
            assert!(kept.len() >= 2, "no scratch kept: {} buffers", kept.len());
            let second = run(&cache);
            if on_caller {
                assert_eq!(
                    buffers(&cache),
                    kept,
                    "the second run allocated its scratch again"
                );
            }
            for got in [&first, &second] {
                assert_eq!(crate::tensor::first_difference(&want, got), None);
            }
        }
    }

    #[test]
    fn strided_input_copies_are_kept_between_runs_and_reused() {
        // A transposed input is copied to contiguous rows before the stages run, and the
        // copy is kept. The next run must copy into the kept buffer (marked here by its
        // capacity and NaN contents: a fresh allocation could land at the same address),
        // and every run must equal the run on a contiguous copy.
        let cache = RunCache::default();
        let (h, w) = (45, 38);
        let dense = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
        let transposed = dense.with_memory_order(&[0, 1, 3, 2]).unwrap();
        assert_ne!(transposed.strides()[3], 1, "the view must be strided");
        let stages = sum3_chain(2, Border::Nearest);
        let want = run_chain(&stages, &dense, SCRATCH_BUDGET, &RunCache::default());
        let first = run_chain(&stages, &transposed, SCRATCH_BUDGET, &cache);
        assert_eq!(crate::tensor::first_difference(&want, &first), None);
        assert_eq!(lock(&cache.copies).len(), 1, "the copy was not kept");
        let marked_capacity = h * w + 1000;
        let mut marked = Vec::with_capacity(marked_capacity);
        marked.resize(h * w, f32::NAN);
        lock(&cache.copies)[0] = Storage::F32(marked);
        let kept = |cache: &RunCache| -> Vec<(usize, usize)> {
            lock(&cache.copies)
                .iter()
                .map(|b| match b {
                    Storage::F32(v) => (v.as_ptr() as usize, v.capacity()),
                    _ => (0, 0),
                })
                .collect()
        };
        let marked = kept(&cache);
        assert_eq!(marked[0].1, marked_capacity);
        let second = run_chain(&stages, &transposed, SCRATCH_BUDGET, &cache);
        assert_eq!(crate::tensor::first_difference(&want, &second), None);
        assert_eq!(
            kept(&cache),
            marked,
            "the second run copied into a new buffer"
        );
        // A contiguous input is not copied, and leaves the kept copy alone.
        run_chain(&stages, &dense, SCRATCH_BUDGET, &cache);
        assert_eq!(kept(&cache), marked);
    }

    #[test]
    fn block_plans_are_kept_per_shape_chunk_and_kernel() {
        // One cache across kernels, shapes and chunk sizes, revisiting each: every run must
        // equal a run with an empty cache (a plan of another key would compute other rows).
        let plans = RunCache::default();
        let cases = [
            (40, 13, 2, Border::Wrap, 1),
            (40, 13, 3, Border::Reflect, 1),
            (40, 13, 3, Border::Wrap, 1),
            (33, 5, 3, Border::Wrap, 1),
            (40, 13, 3, Border::Wrap, SCRATCH_BUDGET),
            (40, 13, 3, Border::Reflect, 1),
            (40, 13, 2, Border::Wrap, 1),
            (33, 5, 3, Border::Wrap, 1),
            (40, 13, 3, Border::Wrap, 1),
        ];
        for round in 0..2 {
            for &(h, w, n, border, budget) in &cases {
                let t = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
                let stages = sum3_chain(n, border);
                let go = |cache: &RunCache| run_chain(&stages, &t, budget, cache);
                let (got, want) = (go(&plans), go(&RunCache::default()));
                assert_eq!(
                    crate::tensor::first_difference(&got, &want),
                    None,
                    "round {round}: {h}x{w}, {n} stages, {border}, budget {budget}"
                );
            }
        }
    }

    /// A stand-in for a clean-input form: `sum3` plus 1000, so that the rows it computed
    /// can be told apart.
    unsafe extern "C" fn sum3_marked(
        rows: *const *const u8,
        strides: *const i64,
        out: *mut u8,
        out_stride: i64,
        width: i64,
    ) {
        // SAFETY: the caller's contract is `sum3`'s.
        unsafe { sum3(rows, strides, out, out_stride, width) };
        // SAFETY: `sum3` wrote the row.
        unsafe { add_1000(out, out_stride, width) };
    }

    /// A second stand-in: `sum3` plus 2000.
    unsafe extern "C" fn sum3_marked_more(
        rows: *const *const u8,
        strides: *const i64,
        out: *mut u8,
        out_stride: i64,
        width: i64,
    ) {
        // SAFETY: the caller's contract is `sum3`'s.
        unsafe { sum3_marked(rows, strides, out, out_stride, width) };
        // SAFETY: `sum3_marked` wrote the row.
        unsafe { add_1000(out, out_stride, width) };
    }

    /// Adds 1000 to each of the `width` f32 elements at `out`, `out_stride` apart.
    ///
    /// # Safety
    /// `out` must point at `width` initialised f32 elements `out_stride` apart.
    unsafe fn add_1000(out: *mut u8, out_stride: i64, width: i64) {
        for x in 0..width as isize {
            // SAFETY: inside the row, by the function's contract.
            unsafe { *(out as *mut f32).offset(x * out_stride as isize) += 1000.0 };
        }
    }

    /// Blocks run a kernel's purest form their input rows allow. With only a clean form:
    /// the clean form until a block reads an unclean row (a NaN, an infinity, -0), then
    /// the general kernel for it and every later block; a negative row is clean. With a
    /// form for clean inputs with clear sign bits too: that form until a block reads a
    /// negative row (then the clean form) or an unclean one (then the general kernel). One
    /// aborted block either way, and every block's rows come from the form its count says
    /// (each stand-in adds its own mark). Both the row loop (one plane of 128 rows) and
    /// replayed planes (16 planes of 8, see `replay_planes`).
    #[test]
    fn blocks_use_the_purest_form_their_rows_allow() {
        let w = 7usize;
        let general = [CpuStage {
            slots: vertical(Source::Input(0), Border::Wrap, 4),
            func: sum3,
            rows: Some(sum3_rows),
        }];
        let form = |func| {
            [CpuStage {
                slots: general[0].slots.clone(),
                func,
                rows: None,
            }]
        };
        let (clean, nonneg) = (form(sum3_marked), form(sum3_marked_more));
        for with_nonneg in [false, true] {
            for (b, c, h) in [(1usize, 1usize, 128usize), (4, 4, 8)] {
                let rows = b * c * h;
                // The blocks `run` makes; on one thread they go in order.
                let block = rows
                    .div_ceil(rayon::current_num_threads().max(1) * 4)
                    .clamp(16, 1024);
                let nblocks = rows.div_ceil(block);
                // Output row `y` reads rows `y - 3`, `y` and `y + 3` of its plane, wrapped.
                let source = |y: usize, d: usize| (y / h) * h + (y % h + d) % h;
                let reads = |y: usize, r: usize| [h - 3, 0, 3].iter().any(|&d| source(y, d) == r);
                for bad_row in [None, Some(0), Some(rows - 1), Some(70), Some(rows - 2)] {
                    // (value, whether it is clean)
                    let bads = [
                        (-1.5f32, true),
                        (f32::NAN, false),
                        (f32::NEG_INFINITY, false),
                        (-0.0, false),
                    ];
                    for (bad, clean_ok) in bads {
                        let mut x = data(rows * w);
                        if let Some(r) = bad_row {
                            x[r * w + 2] = bad;
                        }
                        let t = Tensor::from_f32(x.clone(), &[b, c, h, w]).unwrap();
                        let (got, counts) = crate::inline::run(|| {
                            run(
                                &general,
                                Specials {
                                    clean: Some(&clean),
                                    nonneg: with_nonneg.then_some(&nonneg[..]),
                                },
                                &[DType::F32],
                                std::slice::from_ref(&t),
                                &[b, c, h, w],
                                SCRATCH_BUDGET,
                                None,
                                &RunCache::default(),
                            )
                        })
                        .unwrap();
                        // The first block that reads the row; the blocks from there on run the
                        // next form down, if the row is less pure than the first form needs.
                        let first = bad_row.map_or(nblocks, |r| {
                            (0..rows).find(|&y| reads(y, r)).unwrap() / block
                        });
                        let first = if with_nonneg || !clean_ok {
                            first
                        } else {
                            nblocks
                        };
                        let rest = nblocks - first;
                        let (top, next) = match (with_nonneg, clean_ok) {
                            (true, true) => (2000.0, 1000.0),
                            (true, false) => (2000.0, 0.0),
                            (false, _) => (1000.0, 0.0),
                        };
                        let want_counts = CleanBlocks {
                            clean: if with_nonneg {
                                rest * usize::from(clean_ok)
                            } else {
                                first
                            },
                            nonneg: if with_nonneg { first } else { 0 },
                            aborted: usize::from(rest > 0),
                        };
                        let case = format!("{with_nonneg} {b}x{c}x{h}: {bad_row:?} {bad}");
                        assert_eq!(counts, want_counts, "{case}");
                        let got = got.to_scalars();
                        for y in 0..rows {
                            for col in 0..w {
                                let sum = [h - 3, 0, 3]
                                    .iter()
                                    .map(|&d| x[source(y, d) * w + col])
                                    .fold(0.0f32, |a, v| a + v);
                                let mark = if y / block < first { top } else { next };
                                let Scalar::F32(g) = got[y * w + col] else {
                                    panic!("not f32")
                                };
                                assert_eq!(
                                    g,
                                    (sum + mark).to_bits(),
                                    "{case}: row {y} column {col}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Single-stage kernels over many planes replay one plane's calls for the others
    /// (`replay_planes`): the same bits as the per-plane reference under every border, with
    /// and without a multi-row function, for blocks that start and end inside planes, and
    /// for inputs whose planes are not evenly spaced (which take the row loop).
    #[test]
    fn replayed_planes_match_the_reference() {
        let (b, c, w) = (3usize, 5usize, 7usize);
        let borders = [
            Border::Reflect,
            Border::Mirror,
            Border::Nearest,
            Border::Wrap,
            Border::Constant(Scalar::F32(2.5f32.to_bits())),
        ];
        for h in [1usize, 2, 6, 8, 13] {
            let x = data(b * c * h * w);
            let t = Tensor::from_f32(x.clone(), &[b, c, h, w]).unwrap();
            // The same values with the channel axis outermost in memory: planes are not
            // evenly spaced across batches.
            let tc = t.with_memory_order(&[1, 0, 2, 3]).unwrap();
            assert_ne!(tc.strides()[0], c * tc.strides()[1]);
            for border in borders {
                for multi in [Some(sum3_rows as RowsFn), None] {
                    let one = [CpuStage {
                        slots: vertical(Source::Input(0), border, 4),
                        func: sum3,
                        rows: multi,
                    }];
                    for input in [&t, &tc] {
                        let got = run(
                            &one,
                            Specials::default(),
                            &[DType::F32],
                            std::slice::from_ref(input),
                            &[b, c, h, w],
                            SCRATCH_BUDGET,
                            None,
                            &RunCache::default(),
                        )
                        .unwrap()
                        .0
                        .to_scalars();
                        for plane in 0..b * c {
                            let at = plane * h * w;
                            let want = reference(&x[at..at + h * w], h, w, border);
                            for (k, v) in want.iter().enumerate() {
                                let Scalar::F32(g) = got[at + k] else {
                                    panic!("not f32")
                                };
                                assert_eq!(
                                    g,
                                    v.to_bits(),
                                    "h {h} {border} multi {} strides {:?}: plane {plane} element {k}",
                                    multi.is_some(),
                                    input.strides()
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn transposed_inputs_give_the_same_bits() {
        let (h, w) = (6, 5);
        let x = data(h * w);
        let t = Tensor::from_f32(x.clone(), &[1, 1, h, w]).unwrap();
        let tt = t.with_memory_order(&[0, 1, 3, 2]).unwrap();
        assert_ne!(tt.strides()[3], 1);
        let one = [CpuStage {
            slots: vertical(Source::Input(0), Border::Wrap, 4),
            func: sum3,
            rows: Some(sum3_rows),
        }];
        let a = run(
            &one,
            Specials::default(),
            &[DType::F32],
            &[t],
            &[1, 1, h, w],
            SCRATCH_BUDGET,
            None,
            &RunCache::default(),
        )
        .unwrap()
        .0;
        let b = run(
            &one,
            Specials::default(),
            &[DType::F32],
            &[tt],
            &[1, 1, h, w],
            SCRATCH_BUDGET,
            None,
            &RunCache::default(),
        )
        .unwrap()
        .0;
        assert_eq!(crate::tensor::first_difference(&a, &b), None);
    }

    #[test]
    fn bad_slots_are_errors() {
        let t = Tensor::from_f32(data(4), &[1, 1, 2, 2]).unwrap();
        let wrong_stage = [CpuStage {
            slots: vertical(Source::Stage(0), Border::Wrap, 4),
            func: sum3,
            rows: Some(sum3_rows),
        }];
        assert!(run(
            &wrong_stage,
            Specials::default(),
            &[DType::F32],
            std::slice::from_ref(&t),
            &[1, 1, 2, 2],
            SCRATCH_BUDGET,
            None,
            &RunCache::default(),
        )
        .is_err());
        let wrong_input = [CpuStage {
            slots: vertical(Source::Input(3), Border::Wrap, 4),
            func: sum3,
            rows: Some(sum3_rows),
        }];
        assert!(run(
            &wrong_input,
            Specials::default(),
            &[DType::F32],
            std::slice::from_ref(&t),
            &[1, 1, 2, 2],
            SCRATCH_BUDGET,
            None,
            &RunCache::default(),
        )
        .is_err());
        let wrong_shape = [CpuStage {
            slots: vertical(Source::Input(0), Border::Wrap, 4),
            func: sum3,
            rows: Some(sum3_rows),
        }];
        assert!(run(
            &wrong_shape,
            Specials::default(),
            &[DType::F32],
            &[t],
            &[1, 1, 2, 3],
            SCRATCH_BUDGET,
            None,
            &RunCache::default(),
        )
        .is_err());
    }
}
