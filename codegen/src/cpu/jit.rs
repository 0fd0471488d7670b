//! The Cranelift JIT set-up shared by every CPU kernel: ISA flags, function definition and
//! ownership of the finalized code.

use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use cranelift_codegen::ir::{types, AbiParam, InstBuilder, Type, UserFuncName, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

use crate::CodegenError;

fn cl_err(what: &str, e: impl std::fmt::Debug) -> CodegenError {
    CodegenError::Cranelift(format!("{what}: {e:?}"))
}

/// A JIT module being filled with functions.
pub(crate) struct Jit {
    module: JITModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
}

impl Jit {
    /// A module for the host ISA, optimising for speed. No fast-math-like flag exists in
    /// Cranelift and none is set; the verifier runs in debug builds.
    pub(crate) fn new() -> Result<Jit, CodegenError> {
        Jit::with_speed(true)
    }

    /// A module for cold code (border columns): no mid-end optimisation and the
    /// single-pass register allocator, for a fraction of the compile time. Semantics are
    /// the same (Cranelift's settings never change results).
    pub(crate) fn cold() -> Result<Jit, CodegenError> {
        Jit::with_speed(false)
    }

    fn with_speed(speed: bool) -> Result<Jit, CodegenError> {
        let mut fb = settings::builder();
        fb.set("opt_level", if speed { "speed" } else { "none" })
            .map_err(|e| cl_err("opt_level", e))?;
        if !speed {
            fb.set("regalloc_algorithm", "single_pass")
                .map_err(|e| cl_err("regalloc_algorithm", e))?;
        }
        fb.set(
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )
        .map_err(|e| cl_err("enable_verifier", e))?;
        fb.set("is_pic", "false").map_err(|e| cl_err("is_pic", e))?;
        let isa_builder =
            cranelift_native::builder().map_err(|e| CodegenError::Cranelift(e.to_string()))?;
        let isa = isa_builder
            .finish(settings::Flags::new(fb))
            .map_err(|e| cl_err("isa", e))?;
        if isa.pointer_type() != types::I64 {
            return Err(CodegenError::Cranelift(
                "the CPU backend needs a 64-bit host".into(),
            ));
        }
        let module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let ctx = module.make_context();
        Ok(Jit {
            module,
            ctx,
            fctx: FunctionBuilderContext::new(),
        })
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
        self.module.clear_context(&mut self.ctx);
        r.map(|()| id)
    }

    /// Finalizes every defined function and hands over the module.
    pub(crate) fn finish(mut self) -> Result<JITModule, CodegenError> {
        self.module
            .finalize_definitions()
            .map_err(|e| cl_err("finalize", e))?;
        Ok(self.module)
    }
}

/// Owns finalized JIT modules and frees their code memory on drop, and the cells the code
/// reads function addresses from (`rowfn::BorderCall`), which must live as long as it.
pub(crate) struct CodeOwner {
    modules: Mutex<Vec<JITModule>>,
    _cells: Box<[AtomicUsize]>,
}

impl CodeOwner {
    pub(crate) fn new(modules: Vec<JITModule>, cells: Box<[AtomicUsize]>) -> CodeOwner {
        CodeOwner {
            modules: Mutex::new(modules),
            _cells: cells,
        }
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
