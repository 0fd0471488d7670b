//! The CUDA [`Backend`] (feature `cuda`): kernels rendered to PTX and launched through the
//! dynamically loaded driver ([`CudaEngine`]), one launch per fused group.
//!
//! Scope: launching one group ([`launch_group`], also what
//! [`crate::cuda_graph::CudaGraph`] launches), moving tensors to and from the device, and
//! the code image of a kernel (its PTX text). Rendering and module loading are cached by
//! the engine. Exactness: the PTX renderer renders the same kernel form the CPU backend
//! compiles; the conformance suite compares both against eager. Limits: not yet run on a
//! GPU here (no device on the build machine); without a driver [`CudaEngine::new`] returns
//! [`CudaError::NoDevice`].

use std::sync::Arc;

use kiln_codegen::ptx;
use kiln_codegen::{CompileOptions, Kernel};
use kiln_ir::passes::{FusedGroup, GroupKind, StageStorage};
use kiln_ir::TensorType;

use super::{Backend, CodeImage};
use crate::cuda::{CudaEngine, CudaError, DeviceTensor};
use crate::executor::WalkError;
use crate::tensor::Tensor;

impl From<WalkError> for CudaError {
    fn from(e: WalkError) -> Self {
        CudaError::Inputs(e.to_string())
    }
}

/// The CUDA backend: an engine on one device and the options kernels are rendered with.
pub struct CudaBackend {
    engine: CudaEngine,
    options: CompileOptions,
}

impl CudaBackend {
    /// A backend over `engine`, rendering with `options` (planted faults only).
    pub fn new(engine: CudaEngine, options: CompileOptions) -> CudaBackend {
        CudaBackend { engine, options }
    }

    /// Opens device `ordinal` (a clear [`CudaError::NoDevice`] without a driver or GPU).
    pub fn open(ordinal: usize, options: CompileOptions) -> Result<CudaBackend, CudaError> {
        Ok(CudaBackend::new(CudaEngine::new(ordinal)?, options))
    }

    /// The engine.
    pub fn engine(&self) -> &CudaEngine {
        &self.engine
    }
}

/// Launches `kernel`, lowered from `group`, on device `args`; checks that the result has
/// the root's type `out`. Stencils run over the output's shape, scans and reductions over
/// their input's.
pub fn launch_group(
    engine: &CudaEngine,
    options: &CompileOptions,
    kernel: &Kernel,
    group: &FusedGroup,
    args: &[Arc<DeviceTensor>],
    out: &TensorType,
) -> Result<Arc<DeviceTensor>, CudaError> {
    let dims: Vec<usize> = match (group.kind, args.first()) {
        (GroupKind::Stencil, _) => out.shape.clone(),
        (_, Some(x)) => x.shape().to_vec(),
        (_, None) => {
            return Err(CudaError::Inputs(format!(
                "{} group {} without an input",
                group.kind.name(),
                group.root
            )))
        }
    };
    let refs: Vec<&DeviceTensor> = args.iter().map(|a| a.as_ref()).collect();
    let t = engine.launch(kernel, options, &refs, &dims)?;
    if t.shape() != out.shape.as_slice() || t.dtype() != out.dtype {
        return Err(CudaError::Inputs(format!(
            "group {} produced {} {:?}, the graph says {}",
            group.root,
            t.dtype(),
            t.shape(),
            out
        )));
    }
    Ok(Arc::new(t))
}

impl Backend for CudaBackend {
    type Artifact = Arc<Kernel>;
    type Buffer = Arc<DeviceTensor>;
    type Error = CudaError;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn stage_storage(&self) -> StageStorage {
        StageStorage::DevicePasses
    }

    fn compile_options(&self) -> &CompileOptions {
        &self.options
    }

    /// The kernel form itself: the engine renders and loads it on first launch.
    fn compile(&self, kernel: &Kernel) -> Result<Arc<Kernel>, CudaError> {
        Ok(Arc::new(kernel.clone()))
    }

    fn code_image(&self, artifact: &Arc<Kernel>) -> Result<CodeImage, CudaError> {
        let m = ptx::render(artifact, &self.engine.target(), &self.options)?;
        Ok(CodeImage::from_ptx(m.text, &m.entries))
    }

    fn upload(&self, tensor: &Tensor) -> Result<Arc<DeviceTensor>, CudaError> {
        self.engine.upload(tensor).map(Arc::new)
    }

    fn download(&self, buffer: &Arc<DeviceTensor>) -> Result<Tensor, CudaError> {
        self.engine.download(buffer)
    }

    fn launch(
        &self,
        artifact: &Arc<Kernel>,
        group: &FusedGroup,
        args: &[Arc<DeviceTensor>],
        out: &TensorType,
    ) -> Result<Arc<DeviceTensor>, CudaError> {
        launch_group(&self.engine, &self.options, artifact, group, args, out)
    }
}
