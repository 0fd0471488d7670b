//! One value for every knob of the fused CPU executor ([`Tuning`]) and one for every
//! counter it keeps ([`Stats`]).
//!
//! Scope: these replace `CompileOptions` as a separate argument, the `Engine::with_*` knobs
//! and `EngineStats` (`EngineStats` is now an alias of [`Stats`]; the `with_*` methods set
//! fields of the engine's [`Tuning`]).
//!
//! Exactness: no field of [`Tuning`] changes a result bit, only speed (threads, placement,
//! scratch chunking, which passes and compile tiers run), except
//! [`CompileOptions::fault`], which plants a deliberate miscompilation for the fuzzer's
//! self-tests. Limits: the CUDA executor reads only [`Tuning::compile`].

use kiln_codegen::CompileOptions;
use kiln_ir::passes::WindowBounds;

use crate::fused::{INLINE_WORK, SCRATCH_BUDGET};

/// How the fused executor compiles and schedules kernels. Results do not depend on it
/// (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// Threads kernels run on: `None` rayon's global pool, `Some(n)` a pool of its own of
    /// `n` threads (`0`: rayon's default count).
    pub threads: Option<usize>,
    /// `None`: graphs of small work run where timed runs put them (the calling thread or
    /// the pool). `Some(w)`: runs of less estimated work than `w` run on the calling
    /// thread, the others on the pool, always.
    pub inline_work: Option<u64>,
    /// Bytes of scratch rows a multi-stage stencil kernel keeps live per chunk of rows.
    pub scratch_budget: usize,
    /// Whether graphs are optimised with the `double_windows` pass.
    pub window_doubling: bool,
    /// Which window-bounding passes run (`clip_windows`, `long_windows`; both by default).
    pub window_bounds: WindowBounds,
    /// Whether kernels are recompiled in the background (bigger steps, clean-input
    /// specialisations).
    pub tiering: bool,
    /// What the code generator is asked for (planted faults, A/B switches).
    pub compile: CompileOptions,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            threads: None,
            inline_work: None,
            scratch_budget: SCRATCH_BUDGET,
            window_doubling: true,
            window_bounds: WindowBounds::default(),
            tiering: true,
            compile: CompileOptions::default(),
        }
    }
}

impl Tuning {
    /// The inline-work threshold in force when runs are not placed by timing
    /// ([`INLINE_WORK`] unless [`Tuning::inline_work`] says otherwise).
    pub fn fixed_inline_work(&self) -> u64 {
        self.inline_work.unwrap_or(INLINE_WORK)
    }
}

/// Counters of a fused executor: its kernel cache, its compiles and its runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Kernels compiled with Cranelift (cache misses).
    pub kernels_compiled: usize,
    /// Kernel requests served from the cache.
    pub cache_hits: usize,
    /// Total milliseconds spent in Cranelift.
    pub compile_ms: f64,
    /// Compiled kernels with at least one stage sharing work between neighbouring columns.
    pub kernels_sharing_columns: usize,
    /// Of those, kernels whose shared vector loop carries values from one step to the next.
    pub kernels_carrying_values: usize,
    /// Compiled kernels with at least one stage running edge vectors (the first and last
    /// columns of rows as vectors).
    pub kernels_with_edge_vectors: usize,
    /// Compiled kernels whose max stages run the code of min stages on negated values
    /// (first compiles; see `kiln_codegen::cpu::CpuKernel::dual_stages`).
    pub kernels_with_dual_stages: usize,
    /// Background compiles started (bigger steps, clean-input specialisation; see
    /// [`crate::fused::Upgrade`]).
    pub upgrades_started: usize,
    /// Runs made on the calling thread (small, or a one-thread engine; see
    /// [`INLINE_WORK`]).
    pub inline_runs: usize,
    /// Stencil row blocks computed by a kernel's clean-input specialisation after their
    /// input rows checked clean.
    pub clean_blocks: usize,
    /// Stencil row blocks computed by a kernel's specialisation for clean inputs with clear
    /// sign bits (integer picks; `cpu::compile_nonneg`) after their input rows checked so.
    pub nonneg_blocks: usize,
    /// Stencil row blocks that met a less clean input row partway through a specialisation
    /// than it needs, and were computed again by a less specialised kernel.
    pub clean_blocks_aborted: usize,
    /// Kernels loaded from the on-disk cache (verified entries; no compile).
    pub disk_hits: usize,
    /// On-disk cache lookups that found no usable entry (then the kernel is compiled).
    pub disk_misses: usize,
    /// Entries written to the on-disk cache.
    pub disk_writes: usize,
    /// On-disk entries that failed a check (quarantined; a miss).
    pub disk_rejected: usize,
}
