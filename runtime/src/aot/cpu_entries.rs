//! CPU cache entries compiled for a chosen target (`kiln aot build --target
//! aarch64-unknown-linux-gnu`, `x86_64+avx2`, ...), on any host: what an engine on a
//! machine of that target looks up.
//!
//! Scope: [`cpu_entry`] compiles a kernel's final code for a `CpuTarget` with
//! `kiln_codegen::cpu::compile_for` (the general kernel with the tiered background compile's
//! options, or the engine's own options without tiering, and every guarded variant that
//! applies and may be attached) and frames it as an entry under the key an engine of that
//! target computes (`kernels::kernel_key` with the target's triple and features). Nothing
//! here runs the code.
//!
//! Exactness: the key covers the kernel text, the options, tiering, the target triple and
//! its features, so the entry is found only by an engine that would run exactly this kernel
//! under these options on such a CPU (`DiskCache` looks up its native target, then each
//! feature level it has); the code is what the engine's compile emits for that ISA (the
//! same CLIF: see `cpu::cross`), and `kernel_from_entry` rebuilds the kernel around it as for
//! an entry the engine wrote itself. Limits: extern kernels have no code and get no entry.

use kiln_codegen::cpu::{compile_for, CpuTarget, Guard};
use kiln_codegen::{CodegenError, CompileOptions, Kernel};

use super::kernels::{
    entry_of, guard_part, image_of_code, kernel_key, upgrade_options, PART_BASE, PART_UPGRADED,
};
use super::{CacheError, Entry, HostSpec};

/// Why a CPU entry could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CpuEntryError {
    /// The kernel did not compile for the target.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The code cannot be an entry (it needs relocations).
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// The entry of `kernel`'s final code for `target`, under the key an engine with `options`
/// and `tiering` computes on such a CPU; `None` for a kernel without machine code (an
/// extern call).
pub fn cpu_entry(
    kernel: &Kernel,
    options: &CompileOptions,
    tiering: bool,
    target: &CpuTarget,
) -> Result<Option<Entry>, CpuEntryError> {
    let up = upgrade_options(options);
    let (general_part, general_options) = if tiering {
        (PART_UPGRADED, &up)
    } else {
        (PART_BASE, options)
    };
    let general = compile_for(kernel, general_options, None, target)?
        .ok_or_else(|| CodegenError::Cranelift("the general kernel did not compile".into()))?;
    if general.machine_code().is_empty() {
        return Ok(None);
    }
    let mut variants = Vec::new();
    for g in Guard::ALL {
        if !g.enabled(&up) {
            continue;
        }
        if let Some(code) = compile_for(kernel, &up, Some(g), target)? {
            variants.push((g, code));
        }
    }
    // Only variants that may be attached together (a variant beside the one it needs).
    let present: Vec<Guard> = variants.iter().map(|(g, _)| *g).collect();
    let keep: Vec<Guard> = attachable_guards(&present);
    let mut parts: Vec<(&str, &[kiln_codegen::cpu::FunctionCode])> =
        vec![(general_part, general.machine_code())];
    for (g, code) in &variants {
        if keep.contains(g) {
            parts.push((guard_part(*g), code.machine_code()));
        }
    }
    let spec = HostSpec::for_target(target);
    let key = kernel_key(kernel, options, tiering, &spec);
    let image = image_of_code(&parts);
    Ok(Some(entry_of(key, &image, &spec)?))
}

/// The guards of `present` that may be attached together (as `cpu::attachable` keeps
/// compiled variants): each beside the guard it needs.
fn attachable_guards(present: &[Guard]) -> Vec<Guard> {
    Guard::ALL
        .into_iter()
        .filter(|g| present.contains(g) && g.needs().is_none_or(|n| present.contains(&n)))
        .collect()
}
