//! The CPU [`Backend`]: kernels compiled with Cranelift (`kiln_codegen::cpu`), run on the
//! host's threads through the fused runtime's `run_kernel`.
//!
//! Scope: compiling (the first compile, and when tiering applies the background one, see
//! [`Upgrade`]; with an on-disk cache, loading a kernel's final code from it instead, or
//! writing it there once compiled, see `crate::aot::kernels`), counting what was compiled and run ([`Stats`]), launching one group, and
//! the code image of a compiled kernel. Buffers are host tensors, so moving them is a
//! handle copy. Exactness: launches run the kernel `run_kernel` runs for the engine, on
//! the same arguments; the code image is a copy of the emitted bytes, taken without
//! changing them (see `kiln_codegen::cpu::FunctionCode`). Limits: [`Backend::launch`]
//! keeps no row plans or scratch between runs and never writes into caller buffers (the
//! engine's [`crate::fused::CompiledGraph`] does both).

use std::sync::{Arc, Mutex};

use kiln_codegen::cpu::{self, CpuKernel};
use kiln_codegen::{CompileOptions, Kernel};
use kiln_ir::passes::{FusedGroup, StageStorage};
use kiln_ir::TensorType;

use super::{Backend, CodeImage};
use crate::aot::DiskCache;
use crate::executor::lock;
use crate::fused::{run_kernel, CleanBlocks, RunCache, Upgrade};
use crate::tensor::Tensor;
use crate::tuning::{Stats, Tuning};
use crate::RuntimeError;

/// A kernel compiled for the CPU: the first compile and, when tiered, the background one.
#[derive(Clone)]
pub struct CpuArtifact {
    /// The first compile.
    pub first: Arc<CpuKernel>,
    /// The background compile (bigger steps, clean-input specialisations), when started.
    pub upgrade: Option<Arc<Upgrade>>,
}

impl CpuArtifact {
    /// The kernel a run uses now: the background compile once it is ready, else the first.
    pub fn current(&self) -> &Arc<CpuKernel> {
        self.upgrade
            .as_ref()
            .and_then(|u| u.get())
            .unwrap_or(&self.first)
    }
}

/// The CPU backend: its tuning, its counters and its on-disk cache (if any).
#[derive(Default)]
pub struct CpuBackend {
    tuning: Tuning,
    stats: Mutex<Stats>,
    disk: Option<Arc<DiskCache>>,
}

impl CpuBackend {
    /// A backend with `tuning`.
    pub fn new(tuning: Tuning) -> CpuBackend {
        CpuBackend {
            tuning,
            stats: Mutex::new(Stats::default()),
            disk: None,
        }
    }

    /// Uses `disk` (or no on-disk cache): on a miss of the in-memory cache a kernel's final
    /// code is loaded from it, else compiled and written to it.
    pub fn set_disk_cache(&mut self, disk: Option<DiskCache>) {
        self.disk = disk.map(Arc::new);
    }

    /// The on-disk cache, if any.
    pub fn disk_cache(&self) -> Option<&DiskCache> {
        self.disk.as_deref()
    }

    /// The tuning.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The tuning, to change it.
    pub fn tuning_mut(&mut self) -> &mut Tuning {
        &mut self.tuning
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let mut st = lock(&self.stats).clone();
        if let Some(d) = &self.disk {
            let c = d.counts();
            st.disk_hits = c.hits;
            st.disk_misses = c.misses;
            st.disk_writes = c.writes;
            st.disk_rejected = c.rejected;
        }
        st
    }

    /// Updates the counters with `f`.
    pub fn count(&self, f: impl FnOnce(&mut Stats)) {
        f(&mut lock(&self.stats));
    }

    /// Adds a run's use of clean-input specialisations to the counters.
    pub(crate) fn count_blocks(&self, blocks: CleanBlocks) {
        if blocks != CleanBlocks::default() {
            self.count(|st| {
                st.clean_blocks += blocks.clean;
                st.nonneg_blocks += blocks.nonneg;
                st.clean_blocks_aborted += blocks.aborted;
            });
        }
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        // The final code of kernels still compiling in the background is what the on-disk
        // cache should hold for the next process: wait (bounded) for it to be written.
        if let Some(d) = &self.disk {
            d.wait_for_writes(crate::aot::kernels::PENDING_WAIT);
        }
    }
}

impl Backend for CpuBackend {
    type Artifact = CpuArtifact;
    type Buffer = Tensor;
    type Error = RuntimeError;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn stage_storage(&self) -> StageStorage {
        if self.tuning.window_doubling {
            StageStorage::ScratchRows
        } else {
            StageStorage::DevicePasses
        }
    }

    fn window_bounds(&self) -> kiln_ir::passes::WindowBounds {
        self.tuning.window_bounds
    }

    fn compile_options(&self) -> &CompileOptions {
        &self.tuning.compile
    }

    fn compile(&self, kernel: &Kernel) -> Result<CpuArtifact, RuntimeError> {
        let options = &self.tuning.compile;
        let tiering = self.tuning.tiering;
        // A planted fault is for the fuzzer's self-tests: never cached.
        let disk = self.disk.as_ref().filter(|_| options.fault.is_none());
        if let Some(d) = disk {
            if let Some(k) = d.load(kernel, options, tiering) {
                return Ok(CpuArtifact {
                    first: Arc::new(k),
                    upgrade: None,
                });
            }
        }
        let first = Arc::new(cpu::compile(kernel, options)?);
        let upgrade = if tiering && Upgrade::worthwhile(&first, options) {
            let on_done = disk.map(|d| {
                let (d, options) = (d.clone(), options.clone());
                Box::new(move |k: &CpuKernel, recompiled: bool| {
                    d.store(k, &options, tiering, recompiled);
                }) as _
            });
            Upgrade::start(first.clone(), options, on_done)
        } else {
            None
        };
        if let Some(d) = disk {
            match &upgrade {
                Some(up) => d.track(up.clone()),
                None => d.store_in_background(first.clone(), options, tiering),
            }
        }
        self.count(|st| {
            st.kernels_compiled += 1;
            st.compile_ms += first.compile_ms;
            st.kernels_sharing_columns += usize::from(first.shared_column_stages > 0);
            st.kernels_carrying_values += usize::from(first.carrying_stages > 0);
            st.kernels_with_edge_vectors += usize::from(first.edge_vector_stages > 0);
            st.kernels_with_dual_stages += usize::from(first.dual_stages);
            st.upgrades_started += usize::from(upgrade.is_some());
        });
        Ok(CpuArtifact { first, upgrade })
    }

    fn code_image(&self, artifact: &CpuArtifact) -> Result<CodeImage, RuntimeError> {
        Ok(CodeImage::from_functions(artifact.first.machine_code()))
    }

    fn upload(&self, tensor: &Tensor) -> Result<Tensor, RuntimeError> {
        Ok(tensor.clone())
    }

    fn download(&self, buffer: &Tensor) -> Result<Tensor, RuntimeError> {
        Ok(buffer.clone())
    }

    fn launch(
        &self,
        artifact: &CpuArtifact,
        _group: &FusedGroup,
        args: &[Tensor],
        out: &TensorType,
    ) -> Result<Tensor, RuntimeError> {
        let (t, blocks) = run_kernel(
            artifact.current(),
            args,
            &out.shape,
            self.tuning.scratch_budget,
            None,
            &RunCache::default(),
        )?;
        self.count_blocks(blocks);
        Ok(t)
    }
}
