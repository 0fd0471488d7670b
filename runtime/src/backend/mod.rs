//! The [`Backend`] trait: what a target implements so that the one executor
//! ([`crate::executor`]) can run fused graphs on it, and [`CodeImage`], the serialisable form
//! of a compiled kernel.
//!
//! Scope: a backend compiles one kernel form into an artifact, says which stage storage its
//! pass pipeline assumes, moves buffers between the host and itself, and launches one
//! group. Everything else (optimising, fusing, lowering, the kernel cache, the order of the
//! groups and the freeing of intermediates) is the executor's, written once. Exactness: a
//! backend renders the kernel form it is given and nothing else; both implementations are
//! checked against the eager oracle by the conformance suite (`runtime/tests/conformance`).
//! Limits: the CPU backend's production path with its row-plan cache, placement and
//! output-buffer reuse is [`crate::fused::Engine`], which uses the same pipeline, cache and
//! group walk; this trait's [`Backend::launch`] is the plain path.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod image;

pub use image::{CodeImage, ImageError, Relocation, Symbol, FUNCTION_ALIGN};

use kiln_codegen::{CodegenError, CompileOptions, Kernel};
use kiln_ir::passes::{FusedGroup, StageStorage};
use kiln_ir::TensorType;

use crate::executor::WalkError;
use crate::tensor::Tensor;
use crate::RuntimeError;

/// A target that runs kernel forms.
pub trait Backend {
    /// A compiled kernel, cheap to clone (the executor's cache hands out clones).
    type Artifact: Clone;
    /// A tensor in the backend's memory.
    type Buffer: Clone;
    /// The backend's error type.
    type Error: std::error::Error + From<WalkError> + From<CodegenError> + From<RuntimeError>;

    /// A short name (`cpu`, `cuda`).
    fn name(&self) -> &'static str;

    /// How the target stores stages, which picks the pass pipeline
    /// (`kiln_ir::passes::optimize_for`).
    fn stage_storage(&self) -> StageStorage;

    /// Which window-bounding passes the pipeline runs (`kiln_ir::passes::optimize_with`);
    /// both unless a backend's tuning turns one off.
    fn window_bounds(&self) -> kiln_ir::passes::WindowBounds {
        kiln_ir::passes::WindowBounds::default()
    }

    /// The options kernels are compiled with (part of the cache key).
    fn compile_options(&self) -> &CompileOptions;

    /// Compiles `kernel`.
    fn compile(&self, kernel: &Kernel) -> Result<Self::Artifact, Self::Error>;

    /// The artifact as data.
    fn code_image(&self, artifact: &Self::Artifact) -> Result<CodeImage, Self::Error>;

    /// Copies a host tensor into the backend's memory.
    fn upload(&self, tensor: &Tensor) -> Result<Self::Buffer, Self::Error>;

    /// Copies a buffer back to a host tensor.
    fn download(&self, buffer: &Self::Buffer) -> Result<Tensor, Self::Error>;

    /// Runs `artifact`, compiled from `group`'s kernel, on `args` (the group's inputs in
    /// order); returns the group root's value, of type `out`.
    fn launch(
        &self,
        artifact: &Self::Artifact,
        group: &FusedGroup,
        args: &[Self::Buffer],
        out: &TensorType,
    ) -> Result<Self::Buffer, Self::Error>;
}
