//! Relocatable object files of compiled CPU kernels (`kiln aot build --emit obj`), written
//! with `cranelift-object`.
//!
//! Scope: the functions of one or more compiled kernels ([`crate::cpu::CpuKernel::machine_code`])
//! become functions of one object file for the host's triple and binary format (ELF on
//! Linux). Entry points (`stageN`, `stageN_rows`, `line`) are global symbols named
//! `<prefix>stageN`...; the split-off border functions (`stageN_border`) are local symbols of
//! the same object, and the direct calls to them (and from `stageN` to `stageN_rows`) stay
//! relocations against those symbols, which the linker resolves inside the object.
//!
//! Exactness: each function's bytes are exactly the bytes the JIT emitted (and the runtime
//! runs, and the cache stores); only the call displacements are left to the linker, which
//! patches them as `CodeImage::from_functions` does. Nothing is recompiled here.
//!
//! Limits: the host triple only (the codegen compiles for the host); a relocation other than
//! a direct call between the kernel's own functions (a library call, which Cranelift emits
//! only for float rounding without SSE4.1) is refused with [`CodegenError::Cranelift`].

use std::collections::HashMap;

use cranelift_codegen::binemit::Reloc;
use cranelift_module::{
    default_libcall_names, FuncId, Linkage, Module, ModuleReloc, ModuleRelocTarget,
};
use cranelift_object::{ObjectBuilder, ObjectModule};

use super::jit::FunctionCode;
use super::target::CpuTarget;
use crate::CodegenError;

/// Alignment of every function in an object (as in the runtime's code images).
const OBJECT_FUNCTION_ALIGN: u64 = 64;

/// The functions of one kernel to put in an object, their symbols prefixed by `prefix`.
pub struct ObjectKernel<'a> {
    /// Prefix of every symbol of the kernel (a C identifier prefix, e.g. `kiln_median_f32_k0_`).
    pub prefix: String,
    /// The kernel's functions as compiled.
    pub functions: &'a [FunctionCode],
}

/// Whether function `name` is an entry point (a global symbol) rather than a helper
/// called only from inside the kernel (a split-off border function).
pub fn is_entry_point(name: &str) -> bool {
    !name.ends_with("_border")
}

fn reloc_kind(kind: &str) -> Option<Reloc> {
    Some(match kind {
        "X86CallPCRel4" => Reloc::X86CallPCRel4,
        "X86PCRel4" => Reloc::X86PCRel4,
        "Arm64Call" => Reloc::Arm64Call,
        _ => return None,
    })
}

fn err(msg: String) -> CodegenError {
    CodegenError::Cranelift(msg)
}

/// The bytes of a relocatable object file holding every function of `kernels` (see the
/// module docs), named `name` inside the object.
pub fn object_file(name: &str, kernels: &[ObjectKernel]) -> Result<Vec<u8>, CodegenError> {
    let builder = ObjectBuilder::new(
        CpuTarget::native().isa(true)?,
        name,
        default_libcall_names(),
    )
    .map_err(|e| err(format!("object builder: {e}")))?;
    let mut module = ObjectModule::new(builder);
    let sig = module.make_signature();
    // Every function is declared first (calls may go forward), then defined.
    let mut ids: Vec<HashMap<&str, FuncId>> = Vec::with_capacity(kernels.len());
    for k in kernels {
        let mut map = HashMap::new();
        for f in k.functions {
            let linkage = if is_entry_point(&f.name) {
                Linkage::Export
            } else {
                Linkage::Local
            };
            let symbol = format!("{}{}", k.prefix, f.name);
            // The signature only matters for calls Cranelift would emit; these functions
            // are defined from bytes, so any signature serves.
            let id = module
                .declare_function(&symbol, linkage, &sig)
                .map_err(|e| err(format!("{symbol}: {e}")))?;
            if map.insert(f.name.as_str(), id).is_some() {
                return Err(err(format!("{symbol}: defined twice")));
            }
        }
        ids.push(map);
    }
    for (k, map) in kernels.iter().zip(&ids) {
        for f in k.functions {
            let id = map[f.name.as_str()];
            let mut relocs = Vec::with_capacity(f.relocs.len());
            for r in &f.relocs {
                let kind = reloc_kind(&r.kind);
                let target = match r.target.strip_prefix('+') {
                    Some(off) => off
                        .parse::<u32>()
                        .ok()
                        .map(|o| ModuleRelocTarget::FunctionOffset(id, o)),
                    None => map.get(r.target.as_str()).map(|t| ModuleRelocTarget::User {
                        namespace: 0,
                        index: t.as_u32(),
                    }),
                };
                let (Some(kind), Some(name)) = (kind, target) else {
                    return Err(err(format!(
                        "{}{}: relocation {} to {} is not a call inside the kernel (a library \
                         call?); such code cannot go in an object",
                        k.prefix, f.name, r.kind, r.target
                    )));
                };
                relocs.push(ModuleReloc {
                    offset: r.offset,
                    kind,
                    name,
                    addend: r.addend,
                });
            }
            module
                .define_function_bytes(id, OBJECT_FUNCTION_ALIGN, &f.bytes, &relocs)
                .map_err(|e| err(format!("{}{}: {e}", k.prefix, f.name)))?;
        }
    }
    module
        .finish()
        .emit()
        .map_err(|e| err(format!("writing the object: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::CodeReloc;

    fn f(name: &str, relocs: Vec<CodeReloc>) -> FunctionCode {
        FunctionCode {
            name: name.into(),
            bytes: vec![0xc3; 16],
            relocs,
        }
    }

    #[test]
    fn foreign_relocations_are_refused() {
        let bad = [f(
            "stage0_rows",
            vec![CodeReloc {
                offset: 1,
                kind: "X86CallPCRel4".into(),
                target: "CeilF32".into(),
                addend: -4,
            }],
        )];
        let e = object_file(
            "t",
            &[ObjectKernel {
                prefix: "p_".into(),
                functions: &bad,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("library"), "{e}");
    }

    #[test]
    fn an_object_holds_its_functions() {
        let fs = [f("stage0_rows", vec![]), f("stage0_border", vec![])];
        let bytes = object_file(
            "t",
            &[ObjectKernel {
                prefix: "kiln_test_".into(),
                functions: &fs,
            }],
        )
        .unwrap();
        let find = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
        assert!(find(b"kiln_test_stage0_rows"));
        assert!(find(b"kiln_test_stage0_border"));
        if cfg!(target_os = "linux") {
            assert_eq!(&bytes[..4], b"\x7fELF");
        }
    }
}
