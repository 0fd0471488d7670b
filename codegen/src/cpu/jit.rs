//! The Cranelift JIT set-up shared by every CPU kernel: ISA flags, function definition,
//! ownership of the finalized code, and a copy of each function's machine code.
//!
//! The copy ([`FunctionCode`]: the bytes Cranelift emitted, before the JIT linked them, with
//! their relocations) is what `CpuKernel::machine_code` hands out for serialised code images
//! (the runtime's `CodeImage`). Taking it reads the compiled buffer after
//! `define_function`; it changes nothing that is emitted, so the code that runs is the same
//! bytes as without it. Every call between a kernel's functions is a direct, PC-relative call
//! to a function of the same module (a split-off border function is compiled by the cold
//! ISA into bytes, [`ColdCode`], and defined in the module of the row function that calls
//! it), so the only relocations are PC-relative ones between functions of one kernel: an
//! image that lays the functions out in one blob resolves them once, and the blob runs at
//! any address. Limits: a library call (none on hosts with SSE4.1) stays a relocation, and
//! such code is not position-independent.

use std::collections::HashMap;
use std::sync::Mutex;

use cranelift_codegen::ir::{
    types, AbiParam, ExternalName, InstBuilder, Type, UserFuncName, Value,
};
use cranelift_codegen::Context;
use cranelift_codegen::FinalizedRelocTarget;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

use super::target::CpuTarget;
use crate::CodegenError;

fn cl_err(what: &str, e: impl std::fmt::Debug) -> CodegenError {
    CodegenError::Cranelift(format!("{what}: {e:?}"))
}

/// The machine code of one compiled function, as Cranelift emitted it (unlinked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionCode {
    /// The function's name in its module (`stage0_rows`, `fold`, ...).
    pub name: String,
    /// The code bytes, constants included, before relocation.
    pub bytes: Vec<u8>,
    /// The places the linker patches.
    pub relocs: Vec<CodeReloc>,
}

/// A relocation of a [`FunctionCode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeReloc {
    /// Byte offset in the function's code.
    pub offset: u32,
    /// Cranelift's relocation kind (`Abs8`, `X86CallPCRel4`, ...).
    pub kind: String,
    /// The symbol referred to: a function name of the same kernel, a library call, or
    /// `+N` for an offset inside the function itself.
    pub target: String,
    /// The addend.
    pub addend: i64,
}

/// A function compiled for cold code (border columns) outside any module
/// ([`compile_cold`]): no mid-end optimisation and the single-pass register allocator, for a
/// fraction of the compile time (Cranelift's settings never change results), to be defined
/// in the module of the function that calls it ([`Jit::define_cold`]).
pub(crate) struct ColdCode {
    name: String,
    ctx: Context,
    align: u64,
}

/// Compiles `name` (parameters `params`, no result) with the cold ISA (see [`ColdCode`])
/// into bytes, without a module: `build` fills it starting in the entry block.
pub(crate) fn compile_cold(
    target: &CpuTarget,
    name: &str,
    params: &[Type],
    build: impl FnOnce(&mut FunctionBuilder, &[Value]) -> Result<(), CodegenError>,
) -> Result<ColdCode, CodegenError> {
    let isa = target.isa(false)?;
    let mut ctx = Context::new();
    ctx.func.signature = cranelift_codegen::ir::Signature::new(isa.default_call_conv());
    ctx.func
        .signature
        .params
        .extend(params.iter().map(|&t| AbiParam::new(t)));
    ctx.func.name = UserFuncName::testcase(name);
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ps = b.block_params(entry).to_vec();
        build(&mut b, &ps)?;
        b.seal_all_blocks();
        b.finalize(isa.frontend_config());
    }
    let align = ctx
        .compile(&*isa, &mut Default::default())
        .map_err(|e| cl_err(name, e.inner))?
        .buffer
        .alignment as u64;
    let align = align
        .max(isa.function_alignment().minimum as u64)
        .max(isa.symbol_alignment());
    Ok(ColdCode {
        name: name.to_string(),
        ctx,
        align,
    })
}

/// A JIT module being filled with functions.
pub(crate) struct Jit {
    module: JITModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    /// Declared function names by their `FuncId` index (relocation targets).
    names: HashMap<u32, String>,
    /// Copies of the functions defined so far.
    code: Vec<FunctionCode>,
    /// Whether the code can run in this process (else it is compiled, copied and never
    /// finalized: code for another CPU).
    runs_here: bool,
}

/// A finalized JIT module with the copies of its functions' machine code.
pub(crate) struct Finished {
    module: JITModule,
    code: Vec<FunctionCode>,
    runs_here: bool,
}

impl Finished {
    /// The address of finalized function `id` (see `JITModule::get_finalized_function`);
    /// `None` for code of another CPU, which was never finalized.
    pub(crate) fn get_finalized_function(&self, id: FuncId) -> Option<*const u8> {
        self.runs_here
            .then(|| self.module.get_finalized_function(id))
    }
}

/// The machine code and relocations of the function compiled in `ctx`, named `name`
/// (`names`: function names by `FuncId` index, for relocation targets).
fn function_code(ctx: &Context, names: &HashMap<u32, String>, name: &str) -> Option<FunctionCode> {
    let compiled = ctx.compiled_code()?;
    let funcs = ctx.func.params.user_named_funcs();
    let relocs = compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| {
            let target = match &r.target {
                FinalizedRelocTarget::Func(off) => format!("+{off}"),
                FinalizedRelocTarget::ExternalName(ExternalName::User(u)) => {
                    let index = funcs.get(*u).map(|n| n.index);
                    index
                        .and_then(|i| names.get(&i).cloned())
                        .unwrap_or_else(|| format!("{u:?}"))
                }
                FinalizedRelocTarget::ExternalName(other) => format!("{other:?}"),
            };
            CodeReloc {
                offset: r.offset,
                kind: format!("{:?}", r.kind),
                target,
                addend: r.addend,
            }
        })
        .collect();
    Some(FunctionCode {
        name: name.to_string(),
        bytes: compiled.code_buffer().to_vec(),
        relocs,
    })
}

impl Jit {
    /// A module for `target`'s ISA, optimising for speed.
    pub(crate) fn new(target: &CpuTarget) -> Result<Jit, CodegenError> {
        let isa = target.isa(true)?;
        let module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let ctx = module.make_context();
        Ok(Jit {
            module,
            ctx,
            fctx: FunctionBuilderContext::new(),
            names: HashMap::new(),
            code: Vec::new(),
            runs_here: target.runs_here(),
        })
    }

    /// Copies the machine code of the function just defined in `self.ctx` (call after a
    /// successful `define_function`, before the context is cleared).
    fn capture(&mut self, name: &str) {
        if let Some(f) = function_code(&self.ctx, &self.names, name) {
            self.code.push(f);
        }
    }

    /// Declares a function `name` with parameters `params` and no result, to be defined
    /// later (by [`Jit::define_cold`]); calls to it from this module are direct.
    pub(crate) fn declare(&mut self, name: &str, params: &[Type]) -> Result<FuncId, CodegenError> {
        let sig = self.signature(params);
        let id = self
            .module
            .declare_function(name, Linkage::Local, &sig)
            .map_err(|e| cl_err(name, e))?;
        self.names.insert(id.as_u32(), name.to_string());
        Ok(id)
    }

    /// Defines `id` (declared by [`Jit::declare`]) as the bytes of `cold`.
    pub(crate) fn define_cold(&mut self, id: FuncId, cold: &ColdCode) -> Result<(), CodegenError> {
        let compiled = cold
            .ctx
            .compiled_code()
            .ok_or_else(|| CodegenError::Cranelift(format!("{}: not compiled", cold.name)))?;
        let relocs: Vec<_> = compiled
            .buffer
            .relocs()
            .iter()
            .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &cold.ctx.func, id))
            .collect();
        self.module
            .define_function_bytes(id, cold.align, compiled.code_buffer(), &relocs)
            .map_err(|e| cl_err(&cold.name, e))?;
        if let Some(f) = function_code(&cold.ctx, &self.names, &cold.name) {
            self.code.push(f);
        }
        Ok(())
    }

    /// The signature of a function with parameters `params` and no result, in this
    /// module's calling convention.
    pub(crate) fn signature(&self, params: &[Type]) -> cranelift_codegen::ir::Signature {
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig
    }

    /// Declares and defines a function `name` with parameters `params` and no result;
    /// `build` fills it starting in the entry block, given the parameter values.
    pub(crate) fn define(
        &mut self,
        name: &str,
        params: &[Type],
        build: impl FnOnce(&mut FunctionBuilder, &[Value]) -> Result<(), CodegenError>,
    ) -> Result<FuncId, CodegenError> {
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        let id = self
            .module
            .declare_function(name, Linkage::Local, &sig)
            .map_err(|e| cl_err(name, e))?;
        self.names.insert(id.as_u32(), name.to_string());
        self.module.clear_context(&mut self.ctx);
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let cfg = self.module.target_config();
        let built = {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let ps = b.block_params(entry).to_vec();
            let r = build(&mut b, &ps);
            if r.is_ok() {
                b.seal_all_blocks();
                b.finalize(cfg);
            }
            r
        };
        if let Err(e) = built {
            self.module.clear_context(&mut self.ctx);
            return Err(e);
        }
        let disasm = std::env::var_os("KILN_DISASM").is_some();
        self.ctx.set_disasm(disasm);
        let r = self
            .module
            .define_function(id, &mut self.ctx)
            .map_err(|e| cl_err(name, e));
        if disasm {
            if let Some(text) = self.ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
                eprintln!("; {name}\n{text}");
            }
        }
        if r.is_ok() {
            self.capture(name);
        }
        self.module.clear_context(&mut self.ctx);
        r.map(|()| id)
    }

    /// Defines `name`, a [`super::RowFn`] that computes one row by calling `rows_fn` (a
    /// [`super::RowsFn`]) with `nrows == 1`, so each stage's body is compiled once.
    pub(crate) fn define_row_forwarder(
        &mut self,
        name: &str,
        rows_fn: FuncId,
    ) -> Result<FuncId, CodegenError> {
        let mut sig = self.module.make_signature();
        sig.params
            .extend([types::I64; 5].iter().map(|&t| AbiParam::new(t)));
        let id = self
            .module
            .declare_function(name, Linkage::Local, &sig)
            .map_err(|e| cl_err(name, e))?;
        self.names.insert(id.as_u32(), name.to_string());
        self.module.clear_context(&mut self.ctx);
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        let callee = self
            .module
            .declare_func_in_func(rows_fn, &mut self.ctx.func);
        let cfg = self.module.target_config();
        {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let p = b.block_params(entry).to_vec();
            let zero = b.ins().iconst(types::I64, 0);
            let one = b.ins().iconst(types::I64, 1);
            // rows, row_steps (never read at row 0 beyond being a valid array: `strides`),
            // strides, out, out_row_step, out_stride, width, nrows.
            b.ins()
                .call(callee, &[p[0], p[1], p[1], p[2], zero, p[3], p[4], one]);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(cfg);
        }
        let r = self
            .module
            .define_function(id, &mut self.ctx)
            .map_err(|e| cl_err(name, e));
        if r.is_ok() {
            self.capture(name);
        }
        self.module.clear_context(&mut self.ctx);
        r.map(|()| id)
    }

    /// Finalizes every defined function and hands over the module with the copies of its
    /// functions' machine code.
    ///
    /// Code for a CPU other than this one is never finalized (nothing of it is linked or
    /// made executable here): [`Finished::runs_here`] is false and only its copies count.
    pub(crate) fn finish(mut self) -> Result<Finished, CodegenError> {
        if self.runs_here {
            self.module
                .finalize_definitions()
                .map_err(|e| cl_err("finalize", e))?;
        }
        Ok(Finished {
            module: self.module,
            code: self.code,
            runs_here: self.runs_here,
        })
    }
}

/// Owns finalized JIT modules and frees their code memory on drop, or the memory of code
/// loaded from elsewhere (a verified cache entry's `ExecMem`), kept as long as it.
pub(crate) struct CodeOwner {
    modules: Mutex<Vec<JITModule>>,
    _loaded: Option<Box<dyn std::any::Any + Send + Sync + std::panic::RefUnwindSafe>>,
    /// The machine code of every function of the modules, in module order.
    code: Vec<FunctionCode>,
}

impl CodeOwner {
    pub(crate) fn new(modules: Vec<Finished>) -> CodeOwner {
        let mut code = Vec::new();
        let mut jit = Vec::with_capacity(modules.len());
        for m in modules {
            code.extend(m.code);
            jit.push(m.module);
        }
        CodeOwner {
            modules: Mutex::new(jit),
            _loaded: None,
            code,
        }
    }

    /// The owner of loaded code: `memory` holds it, `code` is its functions' bytes.
    pub(crate) fn loaded(
        memory: Box<dyn std::any::Any + Send + Sync + std::panic::RefUnwindSafe>,
        code: Vec<FunctionCode>,
    ) -> CodeOwner {
        CodeOwner {
            modules: Mutex::new(Vec::new()),
            _loaded: Some(memory),
            code,
        }
    }
}

impl super::CpuKernel {
    /// The machine code of this kernel's functions (its first compile; specialisations
    /// attached to it have their own), as Cranelift emitted them before linking: what a
    /// serialised code image is made of.
    pub fn machine_code(&self) -> &[FunctionCode] {
        &self._code.code
    }
}

impl Drop for CodeOwner {
    fn drop(&mut self) {
        let slot = self.modules.get_mut().unwrap_or_else(|e| e.into_inner());
        for module in slot.drain(..) {
            // SAFETY: the module's function pointers are only reachable through the
            // `CpuKernel`s that own this value (one, or several sharing it through an `Arc`,
            // see `CpuKernel::share_code`), and this runs when the last of them drops; the
            // runtime keeps a kernel (an `Arc<CpuKernel>`) alive while any of its functions
            // runs, so no function from this module is executing or will be called again.
            unsafe { module.free_memory() };
        }
    }
}
