//! The CPU [`Backend`]: kernels compiled with Cranelift (`kiln_codegen::cpu`), run on the
//! host's threads through the fused runtime's `run_kernel`.
//!
//! Scope: compiling (the first compile, and when tiering applies the background one, see
//! [`Upgrade`]), counting what was compiled and run ([`Stats`]), launching one group, and
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

/// The CPU backend: its tuning and its counters.
#[derive(Default)]
pub struct CpuBackend {
    tuning: Tuning,
    stats: Mutex<Stats>,
}

impl CpuBackend {
    /// A backend with `tuning`.
    pub fn new(tuning: Tuning) -> CpuBackend {
        CpuBackend {
            tuning,
            stats: Mutex::new(Stats::default()),
        }
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
        lock(&self.stats).clone()
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
        let first = Arc::new(cpu::compile(kernel, options)?);
        let upgrade = if self.tuning.tiering && Upgrade::worthwhile(&first, options) {
            Upgrade::start(first.clone(), options)
        } else {
            None
        };
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
