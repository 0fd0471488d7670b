//! The fused executor: compiles a graph into fused kernels (with a kernel cache) and runs
//! them on rayon threads.
//!
//! Pipeline of [`Engine::compile`]: the executor's (`crate::executor::lower_graph`:
//! `optimize → fuse → lower`), then `cpu::compile` through the executor's cache keyed by the
//! kernel form and the compile options (no shapes or strides in the key: one compiled
//! kernel serves every shape of the same rank and dtypes). Groups run through the
//! executor's group walk (`crate::executor::walk_groups`).
//!
//! Execution (see ARCHITECTURE.md, "CPU schedule"): groups run in partition order; each
//! group writes a fresh contiguous tensor. Stencil kernels run row functions over blocks of
//! output rows (`stencil`); scans and axis reductions run fold/combine functions over
//! independent lines (`line`).

mod bind;
mod dest;
mod extern_line;
mod line;
mod out_ptr;
mod placement;
mod stencil;
mod tiers;
pub use bind::Binding;
#[doc(hidden)]
pub use stencil::hooks as stencil_hooks;
pub use stencil::SCRATCH_BUDGET;
pub(crate) use stencil::{CleanBlocks, RunCache};
pub use tiers::{upgrade_options, Upgrade, UPGRADE_STEP_BUDGET};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_codegen::cpu::{self, CpuBody, CpuKernel};
use kiln_codegen::{CompileOptions, Kernel};
use kiln_ir::passes::Partition;
use kiln_ir::{Graph, NodeId, NodeKind};

use crate::backend::cpu::{CpuArtifact, CpuBackend};
use crate::backend::{Backend, CodeImage};
use crate::eager::check_inputs;
use crate::executor::{fresh_copy, lock, lower_graph_with, walk_groups, Executor, Lowered};
use crate::tensor::{Storage, Tensor};
use crate::tuning::Tuning;
use crate::RuntimeError;
use placement::{Place, Placement};

/// Counters of an [`Engine`]: the one stats struct of the fused executor.
pub type EngineStats = crate::tuning::Stats;

/// The inline work of an engine that does not time runs: runs of less
/// [`CompiledGraph::estimated_work`] go to the calling thread (see `inline`), about 20 µs
/// of work. Engines time runs instead (see `placement`) unless built with
/// [`Engine::with_inline_work`]; this fixed threshold is what they used before, kept for
/// A/B runs (`with_inline_work(INLINE_WORK)`). Measured at 2 threads (median 3x3, 8x3
/// planes): 16² planes (0.4 M) 16 µs inline against 36 µs on the threads, 32² (1.7 M) 40
/// against 36, 64² (6.8 M) 109 against 72.
pub const INLINE_WORK: u64 = 1 << 20;

/// Compiles and runs graphs with fused kernels. Cheap to share between threads; compiled
/// kernels are cached for the engine's lifetime. A thin user of the one executor
/// ([`crate::executor`]) over the CPU backend ([`CpuBackend`]), adding a thread pool, run
/// placement, kept row plans and output-buffer reuse.
pub struct Engine {
    exec: Executor<CpuBackend>,
    pool: Option<rayon::ThreadPool>,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

impl Engine {
    /// An engine with default options, running on rayon's global thread pool.
    pub fn new() -> Engine {
        Engine::with_tuning(Tuning::default())
    }

    /// An engine with the given compile options (and the default tuning otherwise).
    pub fn with_options(options: CompileOptions) -> Engine {
        Engine::with_tuning(Tuning {
            compile: options,
            ..Tuning::default()
        })
    }

    /// An engine tuned by `tuning`. If `tuning.threads` asks for a pool of its own and it
    /// cannot be created, the engine uses rayon's global pool.
    pub fn with_tuning(tuning: Tuning) -> Engine {
        let pool = tuning
            .threads
            .and_then(|n| rayon::ThreadPoolBuilder::new().num_threads(n).build().ok());
        Engine {
            exec: Executor::new(CpuBackend::new(tuning)),
            pool,
        }
    }

    /// The tuning.
    pub fn tuning(&self) -> &Tuning {
        self.exec.backend().tuning()
    }

    fn tune(mut self, f: impl FnOnce(&mut Tuning)) -> Engine {
        f(self.exec.backend_mut().tuning_mut());
        self
    }

    /// Runs on a dedicated pool of `n` threads (`n == 0`: rayon's default count). If the
    /// pool cannot be created the engine keeps using rayon's global pool.
    pub fn with_threads(mut self, n: usize) -> Engine {
        self.pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().ok();
        self.tune(|t| t.threads = Some(n))
    }

    /// Runs of less estimated work than `work` run on the calling thread, the others on the
    /// engine's threads (0: only with one thread), always. Without this call, an engine
    /// decides per graph from timed runs on the calling thread (see `placement`). Results do
    /// not depend on it, only speed.
    pub fn with_inline_work(self, work: u64) -> Engine {
        self.tune(|t| t.inline_work = Some(work))
    }

    /// Bytes of scratch rows a multi-stage stencil kernel keeps live per chunk of output rows
    /// (default [`SCRATCH_BUDGET`]); smaller budgets mean shorter chunks. Results
    /// do not depend on it, only speed (tests use tiny budgets to exercise the chunking).
    pub fn with_scratch_budget(self, bytes: usize) -> Engine {
        self.tune(|t| t.scratch_budget = bytes)
    }

    /// With `false`, graphs are optimised without the `double_windows` pass (the pipeline
    /// of [`kiln_ir::passes::StageStorage::DevicePasses`]); for same-process A/B runs. Results do not depend
    /// on it, only speed.
    pub fn with_window_doubling(self, on: bool) -> Engine {
        self.tune(|t| t.window_doubling = on)
    }

    /// Switches the window-bounding passes (`kiln_ir::passes::clip_windows` and
    /// `long_windows`, both on by default); for A/B runs and tests. Results do not depend
    /// on it, only compile time and speed (and whether an extreme window fits the JIT limit).
    pub fn with_window_bounds(self, bounds: kiln_ir::passes::WindowBounds) -> Engine {
        self.tune(|t| t.window_bounds = bounds)
    }

    /// With `false`, no kernel is recompiled in the background (bigger steps, the
    /// clean-input specialisation; see [`Upgrade`]). Results do not depend on it, only
    /// speed.
    pub fn with_tiering(self, on: bool) -> Engine {
        self.tune(|t| t.tiering = on)
    }

    /// With an on-disk kernel cache in `dir` (created if needed): a kernel missing from
    /// the engine's cache is loaded from a verified entry there, else compiled and written
    /// (its final code: the tiered background compile's when one runs). A directory that
    /// cannot be used gives one warning and no cache. Results do not depend on it.
    pub fn with_cache_dir(mut self, dir: impl AsRef<std::path::Path>) -> Engine {
        let disk = match crate::aot::DiskCache::open(dir.as_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("kiln cache: disabled: {e}");
                None
            }
        };
        self.exec.backend_mut().set_disk_cache(disk);
        self
    }

    /// Runs kernels from a bundle written by `kiln aot build` (a cache directory with a
    /// manifest); kernels it lacks are compiled and added to it. The same as
    /// [`Engine::with_cache_dir`].
    pub fn with_cache_bundle(self, dir: impl AsRef<std::path::Path>) -> Engine {
        self.with_cache_dir(dir)
    }

    /// Runs kernels from a bundle signed by `public_key` (`kiln aot build --sign`): the
    /// signature over the bundle's manifest and every entry is checked first, and each
    /// entry loaded must still have its signed digest; the bundle is never written to.
    /// A missing, foreign or bad signature gives one warning and no on-disk cache (every
    /// kernel is compiled), like any other unusable cache.
    pub fn with_signed_bundle(
        mut self,
        dir: impl AsRef<std::path::Path>,
        public_key: &[u8; 32],
    ) -> Engine {
        let disk = match crate::aot::DiskCache::open_signed(dir.as_ref(), public_key) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("kiln cache: disabled: {}: {e}", dir.as_ref().display());
                None
            }
        };
        self.exec.backend_mut().set_disk_cache(disk);
        self
    }

    /// With the on-disk cache the environment asks for: none under `KILN_CACHE=off`, else
    /// `KILN_CACHE_DIR`, else `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln` (what the `kiln`
    /// command line uses). [`Engine::new`] has no on-disk cache.
    pub fn with_cache_from_env(mut self) -> Engine {
        self.exec
            .backend_mut()
            .set_disk_cache(crate::aot::DiskCache::from_env());
        self
    }

    /// The on-disk cache, if any.
    pub fn disk_cache(&self) -> Option<&crate::aot::DiskCache> {
        self.exec.backend().disk_cache()
    }

    /// The compile options.
    pub fn options(&self) -> &CompileOptions {
        &self.tuning().compile
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> EngineStats {
        self.exec.backend().stats()
    }

    /// Number of threads kernels run on.
    pub fn threads(&self) -> usize {
        match &self.pool {
            Some(p) => p.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }

    /// Runs `f` on this engine's thread pool (rayon's global pool when it has none of its
    /// own), so that native passes (`kiln_ops::program`) use the same threads as kernels.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => f(),
        }
    }

    /// Optimises, fuses, lowers and compiles `graph` (kernels through the cache).
    pub fn compile(&self, graph: &Graph) -> Result<CompiledGraph, RuntimeError> {
        let t0 = Instant::now();
        let Lowered {
            optimized,
            partition,
            kernels: forms,
        } = lower_graph_with(
            graph,
            self.exec.backend().stage_storage(),
            self.exec.backend().window_bounds(),
        )?;
        let mut kernels = Vec::with_capacity(forms.len());
        let mut upgrades = Vec::with_capacity(forms.len());
        for kernel in forms {
            let a = self.artifact(kernel)?;
            kernels.push(a.first);
            upgrades.push(a.upgrade);
        }
        let plans = partition_plans(&partition);
        let binding = Binding::of(graph, &optimized);
        Ok(CompiledGraph {
            binding,
            optimized,
            partition,
            kernels,
            upgrades,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
            plans,
            placement: Placement::default(),
        })
    }

    /// Compiles and runs `graph` on `inputs`; returns the outputs as fresh contiguous tensors.
    pub fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, RuntimeError> {
        check_inputs(graph, inputs)?;
        self.compile(graph)?.run(self, inputs)
    }

    /// The compiled form of `kernel` (its first compile), from the cache or freshly
    /// compiled.
    pub fn kernel(&self, kernel: Kernel) -> Result<Arc<CpuKernel>, RuntimeError> {
        Ok(self.artifact(kernel)?.first)
    }

    /// The first compile of `kernel` and, when tiering applies, its background compile
    /// (started on a cache miss), through the executor's cache.
    fn artifact(&self, kernel: Kernel) -> Result<CpuArtifact, RuntimeError> {
        let (a, compiled) = self.exec.artifact(kernel)?;
        if !compiled {
            self.exec.backend().count(|st| st.cache_hits += 1);
        }
        Ok(a)
    }

    /// Runs `f` (a run of estimated `work`, see [`CompiledGraph::estimated_work`]) on the
    /// engine's threads, or on the calling thread with every parallel loop sequential (see
    /// `inline`): there when the engine has one thread; else, below
    /// `placement::MEASURED_MAX_WORK`, where `placement`'s timings put it; else on the
    /// threads. An engine given a fixed inline work (`with_inline_work`) does not time runs:
    /// below that work the caller, else the threads.
    fn dispatch<R: Send>(
        &self,
        work: u64,
        placement: &Placement,
        f: impl FnOnce() -> R + Send,
    ) -> R {
        let adaptive = self.tuning().inline_work.is_none();
        let inline_work = self.tuning().fixed_inline_work();
        let measured = self.threads() > 1 && adaptive && work < placement::MEASURED_MAX_WORK;
        let (place, timed) = if measured {
            placement.choose()
        } else if self.threads() <= 1 || (!adaptive && work < inline_work) {
            (Place::Caller, false)
        } else {
            (Place::Threads, false)
        };
        let start = Instant::now();
        let result = match place {
            Place::Caller => {
                self.exec.backend().count(|st| st.inline_runs += 1);
                crate::inline::run(f)
            }
            Place::Threads => match &self.pool {
                Some(p) => p.install(f),
                None => f(),
            },
        };
        if measured {
            placement.record(timed.then(|| start.elapsed().as_secs_f64()));
        }
        result
    }
}

/// A graph compiled into fused kernels, ready to run on inputs of the declared shapes.
pub struct CompiledGraph {
    /// The graph after `kiln_ir::passes::optimize`: the graph the partition refers to.
    pub optimized: Graph,
    /// The fused groups, in execution order.
    pub partition: Partition,
    /// One compiled kernel per group, in the same order (the first compile of each).
    pub kernels: Vec<Arc<CpuKernel>>,
    /// Per group: the background compile (bigger steps, the clean-input specialisation),
    /// when tiered (see [`Upgrade`]); runs use it once it is ready.
    pub upgrades: Vec<Option<Arc<Upgrade>>>,
    /// Wall-clock milliseconds of the whole compile (passes, lowering, Cranelift).
    pub compile_ms: f64,
    /// Per group: what runs keep for the next (block plans, scratch, input copies).
    plans: Vec<stencil::RunCache>,
    /// Timed runs on the calling thread: where small runs go (see `placement`).
    placement: Placement,
    /// Which other input shapes the graph runs on ([`CompiledGraph::run_bound`]).
    binding: Option<Binding>,
}

/// One empty plan cache per group of `partition`.
fn partition_plans(partition: &Partition) -> Vec<stencil::RunCache> {
    partition
        .groups
        .iter()
        .map(|_| stencil::RunCache::default())
        .collect()
}

impl CompiledGraph {
    /// A rough measure of a run's work: per group, its output elements times one more than
    /// its kernel's instructions per element (stencil stages summed; 4 for a scan or
    /// reduction along an axis). About 20 ps per unit on the benchmark machine.
    pub fn estimated_work(&self) -> u64 {
        self.work_at(None)
    }

    /// [`CompiledGraph::estimated_work`] with every group's output of shape `bound` when
    /// given (a bound run, see [`CompiledGraph::run_bound`]).
    fn work_at(&self, bound: Option<&[usize]>) -> u64 {
        let g = &self.optimized;
        self.partition
            .groups
            .iter()
            .zip(&self.kernels)
            .map(|(group, k)| {
                let elems = match bound {
                    Some(shape) => shape.iter().product::<usize>() as u64,
                    None => g
                        .nodes
                        .get(group.root.index())
                        .map_or(0, |n| n.ty.numel() as u64),
                };
                let insts = match &k.kernel.body {
                    kiln_codegen::kernel::KernelBody::Stencil { stages } => {
                        stages.iter().map(|s| s.insts.len()).sum::<usize>()
                    }
                    _ => 4,
                };
                elems.saturating_mul(insts as u64 + 1)
            })
            .fold(0, u64::saturating_add)
    }

    /// Number of kernels (fused groups).
    pub fn kernel_count(&self) -> usize {
        self.kernels.len()
    }

    /// The machine code of group `i`'s first compile as a serialisable [`CodeImage`].
    pub fn code_image(&self, i: usize) -> Option<CodeImage> {
        let k = self.kernels.get(i)?;
        Some(CodeImage::from_functions(k.machine_code()))
    }

    /// [`CompiledGraph::code_image`] of every group, in order.
    pub fn code_images(&self) -> Vec<CodeImage> {
        self.kernels
            .iter()
            .map(|k| CodeImage::from_functions(k.machine_code()))
            .collect()
    }

    /// The kernel a run uses for group `i` now: the background compile once it is ready,
    /// else the first one.
    pub fn current_kernel(&self, i: usize) -> Option<&Arc<CpuKernel>> {
        let upgraded = self.upgrades.get(i).and_then(|u| u.as_ref()?.get());
        upgraded.or_else(|| self.kernels.get(i))
    }

    /// Frees the buffers runs keep for the next run: each kernel's scratch rows and the
    /// contiguous copies of strided inputs. Returns the bytes freed. The next run allocates
    /// them again (and faults their pages in); call it when the graph will sit idle.
    pub fn release_buffers(&self) -> usize {
        self.plans.iter().map(|p| p.release_buffers()).sum()
    }

    /// Bytes of the contiguous input copies runs keep: runs copy an input whose last axis is
    /// strided (row functions read rows with unit stride); 0 when every run so far read its
    /// inputs in place (a borrowed input too, see [`Tensor::from_raw_parts`]).
    pub fn kept_input_copy_bytes(&self) -> usize {
        self.plans.iter().map(|p| p.copy_bytes()).sum()
    }

    /// Waits up to `timeout` for every background compile; returns whether all finished.
    /// Benchmarks call it so that they time the steady state.
    pub fn wait_for_upgrades(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.upgrades
            .iter()
            .flatten()
            .all(|u| u.wait(deadline.saturating_duration_since(Instant::now())))
    }

    /// Runs the kernels on `inputs` with `engine`'s threads; returns the graph's outputs as
    /// fresh contiguous tensors.
    pub fn run(&self, engine: &Engine, inputs: &[Tensor]) -> Result<Vec<Tensor>, RuntimeError> {
        check_inputs(&self.optimized, inputs)?;
        self.check_memory(None)?;
        let none = (0..self.optimized.outputs.len()).map(|_| None).collect();
        engine.dispatch(self.estimated_work(), &self.placement, || {
            self.run_inner(engine, inputs, none, None)
        })
    }

    /// Like [`CompiledGraph::run`], but writes output `k` into `outputs[k]` and returns those
    /// same tensors: a loop that hands back last call's outputs allocates nothing, and its
    /// pages are not faulted in again. Each tensor must have the output's dtype and shape,
    /// view its whole storage row-major (offset 0, contiguous), and be the storage's only
    /// owner (no clone of it alive), else the call fails before running anything. The old
    /// contents are overwritten; on an error the buffers are dropped.
    pub fn run_into(
        &self,
        engine: &Engine,
        inputs: &[Tensor],
        outputs: Vec<Tensor>,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        check_inputs(&self.optimized, inputs)?;
        self.check_memory(None)?;
        let dest = self.output_storages(outputs, None)?;
        engine.dispatch(self.estimated_work(), &self.placement, || {
            self.run_inner(engine, inputs, dest, None)
        })
    }

    /// The storages `outputs` hand over for a run whose outputs have the graph's shapes, or
    /// `bound` (see [`CompiledGraph::run_into`] for what each must be).
    fn output_storages(
        &self,
        outputs: Vec<Tensor>,
        bound: Option<&[usize]>,
    ) -> Result<Vec<Option<dest::Dest>>, RuntimeError> {
        let g = &self.optimized;
        if outputs.len() != g.outputs.len() {
            return Err(RuntimeError::Shape(format!(
                "{} output buffers for a graph with {} outputs",
                outputs.len(),
                g.outputs.len()
            )));
        }
        let mut dest = Vec::with_capacity(outputs.len());
        for (k, (t, &o)) in outputs.into_iter().zip(&g.outputs).enumerate() {
            let ty = &g.node(o).ty;
            let shape = bound.unwrap_or(&ty.shape);
            if t.dtype() != ty.dtype || t.shape() != shape {
                return Err(RuntimeError::Shape(format!(
                    "output buffer {k} is {} {:?}, the output is {} {:?}",
                    t.dtype(),
                    t.shape(),
                    ty.dtype,
                    shape
                )));
            }
            let storage = t.into_unique_storage().map_err(|_| {
                RuntimeError::Shape(format!(
                    "output buffer {k} is a strided view, part of a larger storage, or shared \
                     with another tensor (a clone of it is alive)"
                ))
            })?;
            dest.push(Some(dest::Dest::Storage(storage)));
        }
        Ok(dest)
    }

    /// Checks that the run fits in memory: every materialised group output alive at once,
    /// plus a contiguous copy of each input (strided inputs are copied before the kernels
    /// run), as an upper bound of the peak; every node of shape `bound` when given.
    fn check_memory(&self, bound: Option<&[usize]>) -> Result<(), RuntimeError> {
        let g = &self.optimized;
        let bytes = |ty: &kiln_ir::TensorType| {
            let numel = bound.map_or(ty.numel(), |s| s.iter().product());
            (numel as u64).saturating_mul(ty.dtype.size_bytes() as u64)
        };
        let outputs: u64 = self
            .partition
            .groups
            .iter()
            .map(|grp| bytes(&g.node(grp.root).ty))
            .fold(0, u64::saturating_add);
        let copies: u64 = g.inputs.iter().map(bytes).fold(0, u64::saturating_add);
        crate::memory::ensure_fits(outputs.saturating_add(copies), "fused execution")
    }

    /// Runs the groups in order (the executor's group walk). `dest[k]`, when present, is
    /// the storage output `k` is written into: by the kernel of its group when the output is
    /// a group root (its first occurrence among the outputs), else by a copy.
    fn run_inner(
        &self,
        engine: &Engine,
        inputs: &[Tensor],
        mut dest: Vec<Option<dest::Dest>>,
        bound: Option<&[usize]>,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let scratch_budget = engine.tuning().scratch_budget;
        let mut clean_blocks = stencil::CleanBlocks::default();
        let g = &self.optimized;
        // The output position whose buffer a group root's kernel writes into.
        let mut writer: HashMap<NodeId, usize> = HashMap::new();
        for (k, &o) in g.outputs.iter().enumerate().rev() {
            if dest[k].is_some() {
                writer.insert(o, k);
            }
        }
        let values = walk_groups(
            g,
            &self.partition,
            self.kernels.len(),
            inputs,
            |gi, group, args, root| {
                let kernel = self
                    .current_kernel(gi)
                    .ok_or_else(|| RuntimeError::Shape(format!("no kernel for group {gi}")))?
                    .clone();
                let reuse = writer.get(&group.root).and_then(|&k| dest[k].take());
                let plans = self
                    .plans
                    .get(gi)
                    .ok_or_else(|| RuntimeError::Shape(format!("no plan cache for group {gi}")))?;
                let shape = bound.unwrap_or(&root.ty.shape);
                let (out, blocks) =
                    run_kernel_to(&kernel, args, shape, scratch_budget, reuse, plans)?;
                clean_blocks.clean += blocks.clean;
                clean_blocks.nonneg += blocks.nonneg;
                clean_blocks.aborted += blocks.aborted;
                Ok::<_, RuntimeError>(out)
            },
        )?;
        let mut outs = Vec::with_capacity(g.outputs.len());
        for (k, (t, &o)) in values.into_iter().zip(&g.outputs).enumerate() {
            let fresh = match dest[k].take().map(|d| d.fill_raw(&t)).transpose()? {
                // A caller's memory no kernel wrote into: the copy is made.
                Some(Ok(raw)) => raw,
                // A buffer no kernel wrote into (an input, or a repeated output): a copy.
                Some(Err(mut storage)) => {
                    let c = t.to_contiguous();
                    // SAFETY: `c` is contiguous from its offset with the output's dtype and
                    // shape, and `storage` was checked to hold exactly that many elements of
                    // that dtype; the two are distinct allocations (`storage` is uniquely
                    // owned here).
                    unsafe {
                        let es = c.dtype().size_bytes();
                        std::ptr::copy_nonoverlapping(
                            c.storage().as_ptr().add(c.offset() * es),
                            storage.as_mut_ptr(),
                            c.numel() * es,
                        );
                    }
                    Tensor::from_storage(storage, c.shape())?
                }
                None if matches!(g.node(o).kind, NodeKind::Input { .. }) => fresh_copy(&t)?,
                None => t,
            };
            outs.push(fresh);
        }
        engine.exec.backend().count_blocks(clean_blocks);
        Ok(outs)
    }
}

/// Whether every float tensor of `args` is clean (no NaN, infinity or -0; see
/// `kiln_codegen::cpu::clean_kernel`), checked on the elements it views; `false` for
/// non-contiguous views, which the check does not walk. Parallel on the current pool. The
/// engine checks per row block instead, only the rows each block reads (see
/// `stencil::Job::block`); this is the same test over whole tensors.
pub fn inputs_clean(args: &[Tensor]) -> bool {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    args.iter().all(|t| {
        if !t.is_contiguous() {
            return false;
        }
        let (start, n) = (t.offset(), t.numel());
        let inline = crate::inline::active();
        match t.dtype() {
            kiln_ir::DType::F32 if inline => t
                .f32_run(start, n)
                .is_some_and(|s| s.chunks(CHUNK).all(cpu::clean_f32)),
            kiln_ir::DType::F64 if inline => t
                .f64_run(start, n)
                .is_some_and(|s| s.chunks(CHUNK).all(cpu::clean_f64)),
            kiln_ir::DType::F32 => t
                .f32_run(start, n)
                .is_some_and(|s| s.par_chunks(CHUNK).all(cpu::clean_f32)),
            kiln_ir::DType::F64 => t
                .f64_run(start, n)
                .is_some_and(|s| s.par_chunks(CHUNK).all(cpu::clean_f64)),
            _ => true,
        }
    })
}

/// Runs one compiled kernel on `args`, producing a contiguous tensor of `shape`: fresh, or in
/// `reuse` (storage of the output's dtype and length, overwritten). Where a stencil kernel
/// has a clean-input form, its blocks whose input rows check clean run with it; the counts
/// say how that went.
pub(crate) fn run_kernel(
    kernel: &CpuKernel,
    args: &[Tensor],
    shape: &[usize],
    scratch_budget: usize,
    reuse: Option<Storage>,
    plans: &stencil::RunCache,
) -> Result<(Tensor, stencil::CleanBlocks), RuntimeError> {
    let reuse = reuse.map(dest::Dest::Storage);
    run_kernel_to(kernel, args, shape, scratch_budget, reuse, plans)
}

/// [`run_kernel`] into `dest`: a stencil writes a caller's memory ([`dest::Dest::Raw`])
/// directly, a line or extern kernel through a copy (then the result borrows it).
fn run_kernel_to(
    kernel: &CpuKernel,
    args: &[Tensor],
    shape: &[usize],
    scratch_budget: usize,
    dest: Option<dest::Dest>,
    plans: &stencil::RunCache,
) -> Result<(Tensor, stencil::CleanBlocks), RuntimeError> {
    let (reuse, raw) = match dest {
        Some(dest::Dest::Storage(s)) => (Some(s), None),
        Some(raw) if matches!(kernel.body, CpuBody::Stencil(_)) => (None, Some(raw)),
        Some(raw) => {
            let (t, blocks) = run_kernel_to(kernel, args, shape, scratch_budget, None, plans)?;
            let t = raw.fill_raw(&t)?.map_err(|_| {
                RuntimeError::Shape("a raw destination turned into a storage".into())
            })?;
            return Ok((t, blocks));
        }
        None => (None, None),
    };
    let k = &kernel.kernel;
    if args.len() != k.inputs.len() {
        return Err(RuntimeError::InputCount {
            expected: k.inputs.len(),
            got: args.len(),
        });
    }
    for (index, (t, &d)) in args.iter().zip(&k.inputs).enumerate() {
        if t.dtype() != d {
            return Err(RuntimeError::InputMismatch {
                index,
                expected: d.to_string(),
                got: t.dtype().to_string(),
            });
        }
    }
    if shape.len() != k.rank {
        return Err(RuntimeError::Shape(format!(
            "kernel of rank {} asked for an output of shape {shape:?}",
            k.rank
        )));
    }
    match &kernel.body {
        CpuBody::Stencil(stages) => {
            let dtypes = match &k.body {
                kiln_codegen::kernel::KernelBody::Stencil { stages } => {
                    stages.iter().map(|s| s.dtype()).collect::<Vec<_>>()
                }
                _ => {
                    return Err(RuntimeError::Shape(
                        "compiled stencil from a non-stencil kernel".into(),
                    ))
                }
            };
            stencil::run(
                stages,
                stencil::Variants::of(kernel),
                &dtypes,
                args,
                shape,
                scratch_budget,
                raw.or(reuse.map(dest::Dest::Storage)),
                plans,
            )
        }
        CpuBody::Line(func) => {
            let kiln_codegen::kernel::KernelBody::Line(line) = &k.body else {
                return Err(RuntimeError::Shape(
                    "compiled line from a non-line kernel".into(),
                ));
            };
            let x = args.first().ok_or(RuntimeError::InputCount {
                expected: 1,
                got: 0,
            })?;
            // Line kernels have no clean-input form (`cpu::clean_kernel` specialises
            // stencils only).
            let out = line::run(x, line, *func, k.output, shape, reuse)?;
            Ok((out, stencil::CleanBlocks::default()))
        }
        CpuBody::Extern => {
            let kiln_codegen::kernel::KernelBody::Extern(call) = &k.body else {
                return Err(RuntimeError::Shape(
                    "compiled extern from a non-extern kernel".into(),
                ));
            };
            let x = args.first().ok_or(RuntimeError::InputCount {
                expected: 1,
                got: 0,
            })?;
            // Extern functions read lines as slices of owned storage: a borrowed input is
            // copied for them.
            let owned;
            let x = if x.is_borrowed() {
                owned = x.to_contiguous();
                &owned
            } else {
                x
            };
            let out = extern_line::run(x, call, shape, reuse)?;
            Ok((out, stencil::CleanBlocks::default()))
        }
    }
}
