//! What one fused group's runs keep for the next: block plans, scratch pools and the
//! contiguous copies of strided inputs ([`RunCache`]), handed out as leases that go back to
//! the cache when dropped.
//!
//! Exactness: the cache holds buffers and plans only, never values that a run reads before
//! writing them (scratch rows are computed before they are read; a kept input copy is
//! overwritten in full), and a plan is looked up by everything it depends on (the stages'
//! slots, the shape, the block and chunk sizes), so a run computes the same bits with a
//! warm or an empty cache (`block_plans_are_kept_per_shape_chunk_and_kernel`).
//!
//! Limits: at most [`CACHED_POOLS`] scratch pools, [`CACHED_COPIES`] input copies and the
//! plans of [`CACHED_KERNELS`] kernels; beyond, the oldest plans are dropped and extra
//! buffers freed.

use std::sync::{Arc, Mutex};

use kiln_codegen::cpu::RowSlot;

use super::super::lock;
use super::plan::BlockPlan;
use crate::tensor::{Storage, Tensor};
use crate::RuntimeError;

/// One stage's scratch rows: uninitialised words, written and read only through raw
/// pointers (never zeroed: every row is computed before it is read).
pub(super) type Scratch = Vec<std::mem::MaybeUninit<u64>>;

/// What runs of one fused group keep for the next: block plans and scratch.
///
/// A block plan (see `Job::block`) depends only on the kernel's slots, the output shape,
/// the block's rows and the chunk size, never on the data or the inputs' addresses, so
/// repeated runs at one shape reuse them: working them out took about 8% of a 15x15
/// opening's run at 2048².
///
/// Scratch pools (one per worker of a run, see `PoolLease`) are kept so that a run does
/// not allocate its scratch again. Freshly allocated, the scratch rows fault their pages in
/// on every run whenever the allocator hands back new memory (what it does depends on the
/// process's allocation history): a 15x15 erosion at 2048² on one thread took 5.3–6.9 ms
/// that way in a small program, 26% of it in page faults, against 3.3 ms in `kiln bench`.
///
/// The contiguous copies of strided inputs (see `run`) are kept for the same reason (at
/// most `CACHED_COPIES`): a 48 MiB buffer allocated afresh took 19 ms to fault in on the
/// 2-core EPYC VM, longer than copying a channels-last view into it.
#[derive(Default)]
pub struct RunCache {
    pub(super) plans: Mutex<Vec<CachedPlans>>,
    pub(super) pools: Mutex<Vec<Vec<Scratch>>>,
    pub(super) copies: Mutex<Vec<Storage>>,
}

impl RunCache {
    /// Bytes of the input copies kept (each made for an input whose last axis is strided).
    pub(crate) fn copy_bytes(&self) -> usize {
        lock(&self.copies)
            .iter()
            .map(|b| b.len() * b.dtype().size_bytes())
            .sum()
    }

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
pub(super) const CACHED_COPIES: usize = 4;

/// Contiguous copies of a run's strided inputs, made into buffers of earlier runs when
/// their dtype and size match; given back to the cache when dropped.
pub(super) struct CopyLease<'a> {
    /// One tensor per input: the input itself, or its copy.
    pub(super) inputs: Vec<Tensor>,
    /// Which of `inputs` are copies.
    pub(super) copied: Vec<bool>,
    pub(super) home: &'a RunCache,
}

impl<'a> CopyLease<'a> {
    /// Copies every input whose last axis is strided.
    pub(super) fn make(
        home: &'a RunCache,
        inputs: &[Tensor],
        axis: usize,
    ) -> Result<Self, RuntimeError> {
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
pub(super) const CACHED_POOLS: usize = 8;

/// One worker's scratch pool for a run, taken from a [`RunCache`] (or new) and given back
/// when dropped.
pub(super) struct PoolLease<'a> {
    pub(super) pool: Vec<Scratch>,
    pub(super) home: &'a RunCache,
}

impl<'a> PoolLease<'a> {
    pub(super) fn take(home: &'a RunCache) -> PoolLease<'a> {
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
pub(super) struct CachedPlans {
    /// Every stage's slots: all of a kernel that a plan depends on (kernels with equal
    /// slots, such as a kernel and its clean-input form, share plans).
    pub(super) slots: Vec<Vec<RowSlot>>,
    pub(super) shape: Vec<usize>,
    /// Output rows per block.
    pub(super) block: usize,
    /// Output rows per chunk.
    pub(super) chunk: usize,
    /// Per block: its plan, once a run has made it.
    pub(super) plans: Vec<Option<Arc<BlockPlan>>>,
}

/// Kernels (first compile, background compile, their clean-input forms) whose plans one
/// cache keeps at once; the oldest is dropped beyond.
pub(super) const CACHED_KERNELS: usize = 4;
