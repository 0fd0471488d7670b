//! Compiling a kernel for a chosen [`CpuTarget`], the host's or another CPU's (an aarch64
//! bundle built on x86_64): the same lowering, plans and CLIF as [`super::compile`], only
//! the Cranelift ISA differs.
//!
//! Scope: [`compile_for`] gives the machine code of the general kernel or of one guarded
//! variant as [`TargetCode`]: its functions' bytes (what a cache entry stores) and, when the
//! target runs here ([`CpuTarget::runs_here`]), a runnable [`CpuKernel`]. Code for another
//! CPU is compiled and copied but never finalized, linked or made executable in this
//! process; the kernel value that carries it internally has stub entry points
//! ([`foreign`]) and is never handed out.
//!
//! Exactness: nothing but the ISA changes, and Cranelift's ISA choice changes instructions,
//! not results (see `target`); a level's code run here is compared with the native code
//! bit for bit (`codegen/tests/cpu_targets.rs`), aarch64 code under qemu
//! (`scripts/ci-aarch64.sh`). Limits: extern kernels compile nothing (their code is a host
//! function), so they have no machine code for any target.

use super::target::CpuTarget;
use super::{build, clean, compile_with, CpuKernel, FunctionCode, Guard};
use crate::{CodegenError, CompileOptions, Kernel};

/// A kernel's code compiled for a [`CpuTarget`].
pub struct TargetCode {
    target: CpuTarget,
    /// Never run unless `target.runs_here()`: otherwise its entry points are stubs.
    kernel: CpuKernel,
}

impl TargetCode {
    /// The target the code was compiled for.
    pub fn target(&self) -> &CpuTarget {
        &self.target
    }

    /// Every function's machine code, as Cranelift emitted it (unlinked).
    pub fn machine_code(&self) -> &[FunctionCode] {
        self.kernel.machine_code()
    }

    /// The runnable kernel, when the target runs on this machine; `None` for another CPU.
    pub fn into_runnable(self) -> Option<CpuKernel> {
        self.target.runs_here().then_some(self.kernel)
    }
}

/// Compiles `kernel` (with `guard`, its variant under that guard: `Ok(None)` when the
/// variant does not apply) under `options` for `target`.
pub fn compile_for(
    kernel: &Kernel,
    options: &CompileOptions,
    guard: Option<Guard>,
    target: &CpuTarget,
) -> Result<Option<TargetCode>, CodegenError> {
    let compiled = match guard {
        None => build(kernel, options, None, target)?,
        Some(Guard::CleanInputs) => {
            let Some((ck, picks)) = clean::specialise(kernel) else {
                return Ok(None);
            };
            compile_with(&ck, &ck, options, Some(&picks), false, None, target)?
        }
        Some(Guard::NonNegative) => {
            let Some((ck, picks)) = clean::nonneg_kernel(kernel) else {
                return Ok(None);
            };
            compile_with(&ck, &ck, options, Some(&picks), true, None, target)?
        }
    };
    Ok(Some(TargetCode {
        target: target.clone(),
        kernel: compiled,
    }))
}

/// Entry points of kernels compiled for another CPU: their code exists only as bytes, so
/// the kernel value that carries them points here, and a call (a bug) aborts instead of
/// running foreign machine code.
pub(super) mod foreign {
    /// Stands in for a [`super::super::RowFn`].
    pub(in crate::cpu) unsafe extern "C" fn row(
        _rows: *const *const u8,
        _strides: *const i64,
        _out: *mut u8,
        _out_stride: i64,
        _width: i64,
    ) {
        std::process::abort()
    }

    /// Stands in for a [`super::super::RowsFn`].
    #[allow(clippy::too_many_arguments)]
    pub(in crate::cpu) unsafe extern "C" fn rows(
        _rows: *const *const u8,
        _row_steps: *const i64,
        _strides: *const i64,
        _out: *mut u8,
        _out_row_step: i64,
        _out_stride: i64,
        _width: i64,
        _nrows: i64,
    ) {
        std::process::abort()
    }

    /// Stands in for a [`super::super::LineFn`].
    #[allow(clippy::too_many_arguments)]
    pub(in crate::cpu) unsafe extern "C" fn line(
        _src: *const u8,
        _src_step: i64,
        _src_lane: i64,
        _out: *mut u8,
        _out_step: i64,
        _out_lane: i64,
        _n: i64,
        _lanes: i64,
        _scratch: *mut u8,
    ) {
        std::process::abort()
    }
}
