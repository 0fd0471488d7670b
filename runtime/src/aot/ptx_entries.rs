//! PTX text as cache entries (`kiln aot build --target sm_80`): rendering needs no GPU, so a
//! bundle can carry the PTX of every kernel for the GPUs it ships to.
//!
//! Scope: the key and the entry of one kernel form's PTX module for one [`PtxTarget`]. The
//! key has the `nvptx64-nvidia-cuda` triple, no CPU features, and the sm and PTX ISA version
//! in its `ptx` field, so an sm_80 entry never answers an sm_90 lookup. The entry's payload
//! is the module text; its symbols are the entry points in launch order, each spanning from
//! its `.entry` line to the end of the text; its one feature is `sm_XX`.
//!
//! Exactness: the text is `kiln_codegen::ptx::render`'s output unchanged, so a launch from
//! the entry runs what a launch that renders it would. Limits: the CUDA engine does not yet
//! read entries at run time (it renders, which is fast); the bundle keeps them for `kiln aot
//! ls/verify` and for that later use.

use kiln_codegen::ptx::{self, PtxTarget};
use kiln_codegen::{CodegenError, CompileOptions, Kernel};

use super::entry::{Entry, Symbol};
use super::kernels::options_bytes;
use super::{CacheKey, HostSpec, KeyInputs};

/// The target triple of PTX entries.
pub const PTX_TRIPLE: &str = "nvptx64-nvidia-cuda";

/// The key of `kernel`'s PTX for `target` under `options`.
pub fn ptx_key(kernel: &Kernel, target: &PtxTarget, options: &CompileOptions) -> CacheKey {
    let host = HostSpec::new(PTX_TRIPLE, &[]);
    let mut inputs = KeyInputs::for_host(kernel, &options_bytes(options, false), &host);
    inputs.ptx = Some(super::PtxTarget {
        sm: target.sm,
        isa: target.ptx_version,
    });
    inputs.key()
}

/// The entry of `kernel`'s PTX module for `target` under `options`.
pub fn ptx_entry(
    kernel: &Kernel,
    target: &PtxTarget,
    options: &CompileOptions,
) -> Result<Entry, CodegenError> {
    let m = ptx::render(kernel, target, options)?;
    let symbols = m
        .entries
        .iter()
        .map(|name| {
            let at = m.text.find(&format!(".entry {name}")).unwrap_or(0);
            Symbol {
                name: name.clone(),
                offset: at as u64,
                len: (m.text.len() - at) as u64,
            }
        })
        .collect();
    Ok(Entry {
        key: ptx_key(kernel, target, options),
        target: PTX_TRIPLE.to_string(),
        features: vec![format!("sm_{}", target.sm)],
        symbols,
        payload: m.text.into_bytes(),
    })
}
