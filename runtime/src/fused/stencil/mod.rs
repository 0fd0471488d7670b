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
//! are computed from there (see [`Job::block_with`]). The first rows of each ring are also kept
//! after its end, so that a later stage's window of rows is one run of slots even where it
//! wraps around (and its multi-row call goes on). Earlier stages are never written to memory
//! outside that scratch. Scratch buffers are never zeroed and are reused by the blocks of one
//! rayon work item; the output is not zeroed either (every element is written).
//!
//! Inputs with strided rows (transposed, channels-last) are first copied to contiguous rows,
//! so that the row functions run their vector interiors on them.

//!
//! Files: `cache` (what runs keep for the next), `plan` (block plans), `guards` (the
//! choice of a guarded variant and its input checks), `exec` (slot resolution, the chunk
//! loop, row calls), `replay` (plane replay of single-stage kernels); `hooks` exposes
//! internals to the scheduler's tests in `runtime/tests/stencil_scheduler.rs`.
//!
//! Exactness: the scheduler decides which rows are computed where and by which form of the
//! kernel, never how a row is computed: every element is written once per form by the
//! compiled row function from the pointers its row resolves to, and a guarded variant's
//! rows are kept only where its guard held (see `guards`).
//!
//! Limits: shapes of rank 3 and up (`[B, C, S1..Sd]`), no empty axes.

mod cache;
mod exec;
mod guards;
#[doc(hidden)]
pub mod hooks;
mod plan;
mod replay;

use std::sync::atomic::AtomicU8;

use kiln_codegen::cpu::{CpuStage, Purity, SlotKind};
use kiln_codegen::kernel::Source;
use kiln_ir::{Border, DType, Scalar};
use rayon::prelude::*;

pub use cache::RunCache;
pub use guards::{CleanBlocks, Variants};

use super::out_ptr::OutPtr;
use crate::memory::fresh_vec;
use crate::tensor::{Storage, Tensor};
use crate::RuntimeError;
use cache::{CopyLease, PoolLease, Scratch};

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
    /// The kernel's guarded variants (same slots as `stages`), which a block may use after
    /// checking the inputs it reads (see [`Job::block`]).
    variants: Variants<'a>,
    /// The purest specialisation later blocks try (a [`Purity`] as `u8`): lowered to what a
    /// block's check found, so later blocks skip the forms it ruled out.
    best: AtomicU8,
    /// Blocks computed by each guarded variant, and blocks whose check failed midway.
    counts: guards::Counts,
}

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
        Scalar::I8(v) => v.to_ne_bytes().to_vec(),
        Scalar::U16(v) => v.to_ne_bytes().to_vec(),
        Scalar::I16(v) => v.to_ne_bytes().to_vec(),
        Scalar::I32(v) => v.to_ne_bytes().to_vec(),
        Scalar::U32(v) => v.to_ne_bytes().to_vec(),
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
    variants: Variants,
    dtypes: &[DType],
    inputs: &[Tensor],
    shape: &[usize],
    scratch_budget: usize,
    reuse: Option<super::dest::Dest>,
    plans: &RunCache,
) -> Result<(Tensor, CleanBlocks), RuntimeError> {
    validate(stages, dtypes, inputs, shape)?;
    let variants = variants.usable_with(stages);
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
        variants,
        best: AtomicU8::new(Purity::NonNeg as u8),
        counts: Default::default(),
    };
    let out_dtype = dtypes[dtypes.len() - 1];
    let len = rows * width;
    use super::dest::Dest;
    let mut buf = match reuse {
        None => OutBuf::with_capacity(out_dtype, len),
        Some(Dest::Storage(s)) if s.dtype() == out_dtype && s.len() == len => {
            OutBuf::from_storage(s)
        }
        Some(Dest::Raw { ptr, dtype, len: n }) if dtype == out_dtype && n == len => {
            OutBuf::Raw(ptr)
        }
        Some(Dest::Storage(s)) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {} {} elements for a {out_dtype} output of {len}",
                s.len(),
                s.dtype()
            )))
        }
        Some(Dest::Raw { dtype, len: n, .. }) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {n} {dtype} elements for a {out_dtype} output of {len}"
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
    let counts = CleanBlocks::from_counts(&job.counts);
    let out = match buf {
        // SAFETY: as below, every element was written; the caller's memory stays valid
        // and unwritten while the run (which keeps no output past its return) lives.
        OutBuf::Raw(p) => unsafe { Dest::raw_tensor(p, out_dtype, shape)? },
        // SAFETY: the blocks partition the rows `0..rows`, and every block wrote each of its
        // rows in full (a row function writes all `width` columns), so all `len` elements
        // are initialised; bools are written as 0/1 bytes.
        buf => Tensor::from_storage(unsafe { buf.assume_init(len) }, shape)?,
    };
    Ok((out, counts))
}

/// Output storage allocated without zeroing (every element is written by the kernel).
enum OutBuf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    U8(Vec<u8>),
    Bool(Vec<u8>),
    /// The other integer dtypes: zero-filled storage of the full length (overwritten).
    Other(Storage),
    /// A caller's memory of the full length (see `Dest::Raw`).
    Raw(OutPtr),
}

impl OutBuf {
    /// Room for `len` elements of `dtype`, uninitialised.
    fn with_capacity(dtype: DType, len: usize) -> OutBuf {
        match dtype {
            DType::F32 => OutBuf::F32(fresh_vec(len)),
            DType::F64 => OutBuf::F64(fresh_vec(len)),
            DType::U8 => OutBuf::U8(fresh_vec(len)),
            DType::Bool => OutBuf::Bool(fresh_vec(len)),
            d => OutBuf::Other(Storage::zeros(d, len)),
        }
    }

    /// An existing storage's vector, to be overwritten (its length stays).
    fn from_storage(s: Storage) -> OutBuf {
        match s {
            Storage::F32(v) => OutBuf::F32(v),
            Storage::F64(v) => OutBuf::F64(v),
            Storage::U8(v) => OutBuf::U8(v),
            Storage::Bool(v) => OutBuf::Bool(v),
            other => OutBuf::Other(other),
        }
    }

    /// The start of the buffer (valid for writes of the whole capacity).
    fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            OutBuf::F32(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::F64(v) => v.as_mut_ptr() as *mut u8,
            OutBuf::U8(v) | OutBuf::Bool(v) => v.as_mut_ptr(),
            OutBuf::Other(s) => s.as_mut_ptr(),
            OutBuf::Raw(p) => p.get(),
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
                // Initialised already (zeroed or an existing storage); `len` is its length.
                OutBuf::Other(s) => s,
                // Never asked for (`run` makes a borrowed tensor of it instead).
                OutBuf::Raw(_) => Storage::zeros(DType::U8, 0),
            }
        }
    }
}
