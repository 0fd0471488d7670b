//! Test hooks: the scheduler's internals that `runtime/tests/stencil_scheduler.rs` drives
//! with hand-written row functions (independent of Cranelift). Not part of the public API
//! (`#[doc(hidden)]`); every hook forwards to the scheduler's own code, so the tests check
//! what runs.
//!
//! Exactness: the hooks compute nothing themselves; [`run`] is the scheduler's `run`.
//!
//! Limits: inspection of a [`RunCache`] covers f32 input copies only (what the tests keep).

use kiln_codegen::cpu::CpuStage;
use kiln_ir::DType;

pub use super::{CleanBlocks, RunCache, Variants, SCRATCH_BUDGET};

use super::super::lock;
use super::plan::{settle as settle_rows, BlockPlan};
use crate::tensor::{Storage, Tensor};
use crate::RuntimeError;

/// The scheduler's `run`: `stages` (and their guarded `variants`) over `shape`, with a
/// scratch `budget` and `cache`; a fresh output.
pub fn run(
    stages: &[CpuStage],
    variants: Variants,
    dtypes: &[DType],
    inputs: &[Tensor],
    shape: &[usize],
    budget: usize,
    cache: &RunCache,
) -> Result<(Tensor, CleanBlocks), RuntimeError> {
    super::run(stages, variants, dtypes, inputs, shape, budget, None, cache)
}

/// Runs `f` with the scheduler's work on the calling thread (blocks in order, one scratch
/// pool), as an engine's inline runs do.
pub fn on_calling_thread<R>(f: impl FnOnce() -> R) -> R {
    crate::inline::run(f)
}

/// The scheduler's settling of `(row, chunk)` reads: per needed row (ascending, once),
/// `(row, first chunk, last chunk)`.
pub fn settle(reads: Vec<(usize, usize)>) -> Vec<(usize, usize, usize)> {
    let (mut rows, mut first, mut until) = (Vec::new(), Vec::new(), Vec::new());
    settle_rows(reads, &mut rows, &mut first, &mut until);
    rows.into_iter()
        .zip(first)
        .zip(until)
        .map(|((r, f), u)| (r, f, u))
        .collect()
}

/// A block plan of one earlier stage with the given needed `rows` (sorted, deduplicated)
/// and ring size, its row index built as a run builds it.
pub struct PlanProbe(BlockPlan);

impl PlanProbe {
    /// The plan of one stage needing `rows`, in a ring of `ring` slots.
    pub fn new(rows: Vec<usize>, ring: usize) -> PlanProbe {
        let mut plan = BlockPlan {
            rows: vec![rows],
            first: vec![Vec::new()],
            ring: vec![ring],
            mirror: vec![0],
            order: vec![Vec::new()],
            index: Vec::new(),
        };
        plan.build_index();
        PlanProbe(plan)
    }

    /// Whether the stage's rows are found by a table (else by a binary search).
    pub fn has_table(&self) -> bool {
        self.0.index.first().is_some_and(|t| !t.is_empty())
    }

    /// `BlockPlan::position`: index among the needed rows and ring slot of stage `k`'s
    /// row `row`, if needed.
    pub fn position(&self, k: usize, row: usize) -> Option<(usize, usize)> {
        self.0.position(k, row)
    }
}

/// The addresses of the scratch buffers `cache` keeps, sorted.
pub fn scratch_buffers(cache: &RunCache) -> Vec<usize> {
    let mut v: Vec<usize> = lock(&cache.pools)
        .iter()
        .flatten()
        .map(|b| b.as_ptr() as usize)
        .collect();
    v.sort_unstable();
    v
}

/// The input copies `cache` keeps: address and capacity of each f32 buffer (`(0, 0)` for
/// other dtypes).
pub fn kept_copies(cache: &RunCache) -> Vec<(usize, usize)> {
    lock(&cache.copies)
        .iter()
        .map(|b| match b {
            Storage::F32(v) => (v.as_ptr() as usize, v.capacity()),
            _ => (0, 0),
        })
        .collect()
}

/// Replaces kept input copy `i` of `cache` by `storage`; `false` when there is none.
pub fn replace_kept_copy(cache: &RunCache, i: usize, storage: Storage) -> bool {
    match lock(&cache.copies).get_mut(i) {
        Some(slot) => {
            *slot = storage;
            true
        }
        None => false,
    }
}
