//! The CPU backend: renders the kernel form to native code with Cranelift.
//!
//! Schedule: a stencil stage becomes a *row function* that computes one output row (all
//! columns along the innermost axis) from one row pointer per [`RowSlot`]. The runtime
//! resolves the outer spatial axes (remapping borders, or pointing at a constant) when it
//! builds the row pointers; the row function handles the innermost axis itself, with an
//! interior fast path (fixed offsets, no bounds checks, F32X4 vectors) and a scalar border
//! path that remaps column indices.

mod bytevec;
mod clean;
mod colbody;
mod cross;
mod dual;
mod edge;
mod facts;
mod guard;
mod int_math;
mod jit;
mod lanes;
mod line;
mod nanguard;
pub mod object;
mod plan;
mod rawnan;
mod rawresult;
mod rowblock;
mod rowfn;
mod rowwalk;
mod schedule;
mod shift;
mod signclear;
mod target;
mod treeform;
mod values;

pub use clean::{clean_f32, clean_f64, clean_kernel, f32_purity, Purity};
pub use cross::{compile_for, TargetCode};
pub use guard::{attachable, compile_variant, Guard, GuardedVariant};
pub use jit::{CodeReloc, FunctionCode};
pub use schedule::row_schedules;
pub use shift::STEP_CODE_BUDGET;
pub use target::{CpuTarget, FEATURES, LEVELS};

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use kiln_ir::{Border, DType};

use crate::kernel::{Kernel, KernelBody, Source};
use crate::{CodegenError, CompileOptions};

/// What a row slot points at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// The row of `source` at the output row's outer coordinates plus the slot's
    /// `outer_offset`, remapped under `border`; under a constant border and out of range, a
    /// single element holding the constant (stride 0).
    Row {
        /// Tensor the row belongs to.
        source: Source,
        /// Border mode along the outer axes (and along the innermost axis, inside the kernel).
        border: Border,
    },
    /// A single byte (stride 0): 1 if the output row's outer coordinates plus `outer_offset`
    /// are inside the shape, else 0. Feeds [`crate::kernel::Op::InRange`].
    OuterInRange,
}

/// One pointer a stage's row function needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowSlot {
    /// What the pointer refers to.
    pub kind: SlotKind,
    /// Offsets along the spatial axes except the innermost (`spatial_rank - 1` entries).
    pub outer_offset: Vec<i64>,
}

/// Computes one output row of a stencil stage.
///
/// * `rows[s]` points at column 0 of slot `s`'s source row (or, for a row outside the tensor
///   under a constant border, at a row of copies of the constant, or at one element holding
///   it with `strides[s] == 0`);
/// * `strides[s]` is that row's column stride in elements (any value, 0 included);
/// * `out` points at column 0 of the output row, `out_stride` is its column stride in elements;
/// * `width` is the number of columns (`>= 1`), the same for every source;
/// * the output row overlaps no source row (the interior may write a column twice).
pub type RowFn = unsafe extern "C" fn(
    rows: *const *const u8,
    strides: *const i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
);

/// Computes `nrows` consecutive output rows of a stencil stage: row `r` is what [`RowFn`]
/// computes with `rows[s] + r * row_steps[s]` (bytes) as slot `s`'s pointer, `strides` as
/// the column strides and `out + r * out_row_step` (bytes) as the output row. The caller
/// guarantees that every advanced pointer is what the per-row resolution would give (rows
/// in range with a uniform step, or a stride-0 constant with step 0).
pub type RowsFn = unsafe extern "C" fn(
    rows: *const *const u8,
    row_steps: *const i64,
    strides: *const i64,
    out: *mut u8,
    out_row_step: i64,
    out_stride: i64,
    width: i64,
    nrows: i64,
);

/// Walks `lanes` independent lines of a [`crate::kernel::Line`] body, each `n` elements long,
/// running the step at every element in walking order. Lane `l`'s element `k` (in walking
/// order) is at `src + (k * src_step + l * src_lane)` elements; where each `y` is kept it is
/// written at `out + (k * out_step + l * out_lane)`, where the final carry is kept at
/// `out + l * out_lane`. With `lanes > 1`, `scratch` holds `lanes * max(carries, 1) * 8`
/// writable bytes (unused with one lane). A seeded line (`LineInit::First`) with `n < 1`
/// writes nothing.
pub type LineFn = unsafe extern "C" fn(
    src: *const u8,
    src_step: i64,
    src_lane: i64,
    out: *mut u8,
    out_step: i64,
    out_lane: i64,
    n: i64,
    lanes: i64,
    scratch: *mut u8,
);

/// Bytes of [`LineFn`] scratch per lane and carry.
pub const LINE_CARRY_SLOT: usize = line::CARRY_SLOT as usize;

/// A compiled stencil stage.
#[derive(Clone)]
pub struct CpuStage {
    /// The row pointers the function expects, in argument order.
    pub slots: Vec<RowSlot>,
    /// The compiled row function.
    pub func: RowFn,
    /// The same stage over several rows in one call (optional: hand-written stages may
    /// leave it out, and the runtime then calls `func` per row).
    pub rows: Option<RowsFn>,
}

/// What a compiled kernel exposes to the runtime.
#[derive(Clone)]
pub enum CpuBody {
    /// One row function per stage.
    Stencil(Vec<CpuStage>),
    /// A line kernel: its walk as a [`LineFn`] (the line itself is in the kernel form,
    /// [`CpuKernel::kernel`]).
    Line(LineFn),
    /// An extern line function: nothing is compiled; the runtime looks the function up by
    /// the name in [`CpuKernel::kernel`]'s call when it runs.
    Extern,
}

/// A kernel compiled for the host CPU. Owns the JIT memory its functions live in; the
/// function pointers are valid as long as this value is alive.
pub struct CpuKernel {
    /// The kernel form it was compiled from.
    pub kernel: Kernel,
    /// Entry points.
    pub body: CpuBody,
    /// Milliseconds spent in Cranelift.
    pub compile_ms: f64,
    /// Stages whose vector interior shares work between neighbouring columns (see
    /// `shift`).
    pub shared_column_stages: usize,
    /// Of those, stages whose shared loop carries values from one step to the next (see
    /// `shift`).
    pub carrying_stages: usize,
    /// Stages whose wide enough rows run their first and last 4 or 8 columns as vectors
    /// (see `edge`).
    pub edge_vector_stages: usize,
    /// Some stage's code was held back by the step code budget (smaller vector-loop steps,
    /// no values carried between steps, or fewer edge vectors than its reach allows), so a
    /// compile under a bigger [`crate::CompileOptions::step_code_budget`] differs.
    pub budget_limited: bool,
    /// Some max stages run the code of min stages on negated values (see
    /// [`CompileOptions::no_dual_stages`]): fewer functions were compiled, and the kernel
    /// runs slower than one compiled without.
    pub dual_stages: bool,
    /// The same kernel compiled under assumptions about its inputs (see [`Guard`]), at most
    /// one per guard, in [`Guard::ALL`] order: the runtime runs one after checking that
    /// the inputs satisfy its guard.
    pub variants: Vec<GuardedVariant>,
    /// What each stage's row function does (for [`CpuKernel::describe`]).
    notes: Vec<String>,
    /// The JIT modules that own the code (freed when the last kernel sharing them drops).
    _code: Arc<jit::CodeOwner>,
}

impl CpuKernel {
    /// A kernel running `self`'s code (shared, not compiled again) with no guarded variants
    /// attached yet, for attaching ones compiled later. Its `compile_ms` is 0: it cost no
    /// compile.
    pub fn share_code(&self) -> CpuKernel {
        CpuKernel {
            kernel: self.kernel.clone(),
            body: self.body.clone(),
            compile_ms: 0.0,
            shared_column_stages: self.shared_column_stages,
            carrying_stages: self.carrying_stages,
            edge_vector_stages: self.edge_vector_stages,
            budget_limited: self.budget_limited,
            dual_stages: self.dual_stages,
            variants: Vec::new(),
            notes: self.notes.clone(),
            _code: self._code.clone(),
        }
    }

    /// Milliseconds spent in Cranelift for this kernel and the guarded variants attached to
    /// it ([`CpuKernel::variants`]).
    pub fn compile_ms_with_forms(&self) -> f64 {
        self.compile_ms
            + self
                .variants
                .iter()
                .map(|v| v.kernel.compile_ms_with_forms())
                .sum::<f64>()
    }

    /// The variant compiled under `guard`, when attached.
    pub fn variant(&self, guard: Guard) -> Option<&CpuKernel> {
        self.variants
            .iter()
            .find(|v| v.guard == guard)
            .map(|v| &v.kernel)
    }

    /// A short human-readable summary: slots per stage and whether its interior is
    /// vectorised.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let kind = match &self.body {
            CpuBody::Stencil(st) => format!("stencil, {} stage(s)", st.len()),
            CpuBody::Line(_) => match &self.kernel.body {
                KernelBody::Line(line) => describe_line(line),
                _ => "line".into(),
            },
            CpuBody::Extern => match &self.kernel.body {
                KernelBody::Extern(c) => format!("extern `{}` along axis {}", c.name, c.axis),
                _ => "extern".into(),
            },
        };
        let _ = writeln!(
            s,
            "cpu kernel: {kind}, output {}, compiled in {:.2} ms",
            self.kernel.output, self.compile_ms
        );
        for n in &self.notes {
            let _ = writeln!(s, "  {n}");
        }
        s
    }
}

/// Compiles `kernel` for the host CPU. `options.fault` plants a deliberate miscompilation
/// (tests of the fuzzer only).
///
/// The stages of a stencil kernel are independent functions (a big stage's border function,
/// compiled for compile speed on a thread of its own, is defined in its stage's module and
/// called directly), so they are compiled on up to
/// `available_parallelism()` threads, each into a JIT module of its own, biggest stages
/// first, each to the least loaded thread.
pub fn compile(kernel: &Kernel, options: &CompileOptions) -> Result<CpuKernel, CodegenError> {
    build(kernel, options, None, &CpuTarget::native())
}

/// [`compile`], or with `loaded` the same kernel over code loaded from elsewhere.
fn build(
    kernel: &Kernel,
    options: &CompileOptions,
    loaded: Option<LoadedCode>,
    target: &CpuTarget,
) -> Result<CpuKernel, CodegenError> {
    let dual = (!options.no_dual_stages)
        .then(|| dual::share_duals(kernel))
        .flatten();
    match dual {
        Some(code) => compile_with(kernel, &code, options, None, false, loaded, target),
        None => compile_with(kernel, kernel, options, None, false, loaded, target),
    }
}

/// Machine code compiled earlier for a kernel, loaded into executable memory (the
/// runtime's verified cache entries, see [`load`]).
pub struct LoadedCode {
    /// Owns the executable memory; kept as long as a kernel runs the code.
    pub memory: Box<dyn std::any::Any + Send + Sync + std::panic::RefUnwindSafe>,
    /// Every function: its machine code (what [`CpuKernel::machine_code`] reports) and the
    /// address of its first instruction in `memory`.
    pub functions: Vec<(FunctionCode, *const u8)>,
}

impl LoadedCode {
    fn addr(&self, name: &str) -> Result<*const u8, CodegenError> {
        self.functions
            .iter()
            .find(|(f, _)| f.name == name)
            .map(|(_, a)| *a)
            .ok_or_else(|| CodegenError::Loaded(format!("no function {name}")))
    }
}

/// The kernel that [`compile`] (`guard` `None`) or [`compile_variant`] (`Some(guard)`)
/// would give for `kernel` under `options`, running `code` instead of compiling: the plans,
/// slots and notes are computed as a compile computes them, the function addresses come
/// from `code`'s symbols. `Ok(None)` when the variant does not apply. Its `compile_ms` is 0.
///
/// # Safety
///
/// `code` must hold, at each address, the machine code that this same build of kiln emitted
/// for the function of that name when compiling `kernel` (or its variant under `guard`)
/// under `options`, laid out so that calls between them reach each other, in memory that is
/// executable and stays valid as long as `code.memory` lives. The runtime's cache checks this
/// through its key (kernel text, options, build id, target, features) and checksum.
pub unsafe fn load(
    kernel: &Kernel,
    options: &CompileOptions,
    guard: Option<Guard>,
    code: LoadedCode,
) -> Result<Option<CpuKernel>, CodegenError> {
    let native = CpuTarget::native();
    match guard {
        None => build(kernel, options, Some(code), &CpuTarget::native()).map(Some),
        Some(Guard::CleanInputs) => {
            let Some((ck, picks)) = clean::specialise(kernel) else {
                return Ok(None);
            };
            compile_with(&ck, &ck, options, Some(&picks), false, Some(code), &native).map(Some)
        }
        Some(Guard::NonNegative) => {
            let Some((ck, picks)) = clean::nonneg_kernel(kernel) else {
                return Ok(None);
            };
            compile_with(&ck, &ck, options, Some(&picks), true, Some(code), &native).map(Some)
        }
    }
}

/// Compiles the specialisation of `kernel` for clean inputs ([`clean_kernel`]), in which
/// every float min/max of clean values is one plain pick. `None` when it would not pay.
/// Its results equal `kernel`'s only on inputs without NaN, infinities and -0.
pub fn compile_clean(
    kernel: &Kernel,
    options: &CompileOptions,
) -> Result<Option<CpuKernel>, CodegenError> {
    let Some((ck, picks)) = clean::specialise(kernel) else {
        return Ok(None);
    };
    compile_with(
        &ck,
        &ck,
        options,
        Some(&picks),
        false,
        None,
        &CpuTarget::native(),
    )
    .map(Some)
}

/// Compiles the specialisation of `kernel` for clean inputs whose every float is finite with
/// a clear sign bit (`+0` up to the largest finite float; see `clean::nonneg_kernel`):
/// the clean specialisation with its plain picks of f32 vectors as integer minima and
/// maxima of the bits. `None` when it does not apply (no plain pick, a float input that is
/// not f32, or a negative clean constant). Its results equal `kernel`'s only on such inputs.
pub fn compile_nonneg(
    kernel: &Kernel,
    options: &CompileOptions,
) -> Result<Option<CpuKernel>, CodegenError> {
    let Some((ck, picks)) = clean::nonneg_kernel(kernel) else {
        return Ok(None);
    };
    compile_with(
        &ck,
        &ck,
        options,
        Some(&picks),
        true,
        None,
        &CpuTarget::native(),
    )
    .map(Some)
}

/// Compiles `code`, a kernel that computes what `kernel` computes (`kernel` itself, or
/// its form with dual stages sharing programs, see `dual`), as `kernel`'s code. Stages
/// with equal programs (up to their sources) and equal plans are compiled once. With
/// `loaded`, nothing is compiled: the functions are taken from it by name (see [`load`]).
fn compile_with(
    kernel: &Kernel,
    code: &Kernel,
    options: &CompileOptions,
    plain_picks: Option<&[Vec<bool>]>,
    int_picks: bool,
    loaded: Option<LoadedCode>,
    target: &CpuTarget,
) -> Result<CpuKernel, CodegenError> {
    let t0 = Instant::now();
    let fault = options.fault;
    let mut notes = Vec::new();
    let mut shared = 0;
    let mut carrying = 0;
    let mut edge_stages = 0;
    let mut budget_limited = false;
    let mut modules = Vec::new();
    // `code` is `kernel` with dual stages sharing programs (see `dual`) when it is not
    // `kernel` itself.
    let dual_stages = !std::ptr::eq(code, kernel);
    let body = match &code.body {
        KernelBody::Stencil { stages } => {
            rowfn::validate(code)?;
            let picks_of = |i: usize| plain_picks.and_then(|p| p.get(i)).map(|p| p.as_slice());
            let mut plans = (0..stages.len())
                .map(|i| rowfn::plan_stage(code, i, options, picks_of(i), int_picks))
                .collect::<Result<Vec<_>, _>>()?;
            // Stages with the same program up to their sources are compiled once (their row
            // functions read every slot through a pointer), as the first of them: a result
            // stored raw in one and canonical in another is stored canonical in both.
            let programs: Vec<_> = stages.iter().map(dual::normalised).collect();
            let same_as: Vec<usize> = (0..stages.len())
                .map(|i| {
                    (0..i)
                        .find(|&j| programs[j] == programs[i] && picks_of(j) == picks_of(i))
                        .unwrap_or(i)
                })
                .collect();
            for i in 0..stages.len() {
                let first = same_as[i];
                if first != i && plans[first].raw_result != plans[i].raw_result {
                    for k in (0..stages.len()).filter(|&k| same_as[k] == first) {
                        plans[k].raw_result = false;
                    }
                }
            }
            let reps: Vec<usize> = (0..stages.len()).filter(|&i| same_as[i] == i).collect();
            if dual_stages {
                notes.push(
                    "dual stages: some results stored negated, so that max windows run the \
                     programs of min windows (a max is a negated min of negated values)"
                        .into(),
                );
            }
            // Border columns of big stages compiled by the cold ISA for compile speed, at the
            // same time as the row functions, and defined in the module of the row function
            // that calls them (a direct call: see `rowfn::BorderCall`).
            let split: Vec<bool> = stages
                .iter()
                .zip(&plans)
                .map(|(st, p)| rowfn::split_border(p, st))
                .collect();
            let mut fns: Vec<Option<(RowFn, RowsFn)>> = vec![None; stages.len()];
            match &loaded {
                Some(l) => {
                    for &i in &reps {
                        let f = l.addr(&format!("stage{i}"))?;
                        let r = l.addr(&format!("stage{i}_rows"))?;
                        // SAFETY: by `load`'s contract, `f` and `r` are the code this build
                        // emitted for `stage{i}` (five I64 parameters, `RowFn`'s) and
                        // `stage{i}_rows` (`rowfn::rows_params()`, `RowsFn`'s) of this
                        // kernel under these options, executable while `l.memory` lives,
                        // which the returned kernel owns.
                        fns[i] = Some(unsafe {
                            (
                                std::mem::transmute::<*const u8, RowFn>(f),
                                std::mem::transmute::<*const u8, RowsFn>(r),
                            )
                        });
                    }
                }
                None => {
                    modules = compile_stages(
                        stages, &plans, &split, &same_as, &reps, fault, &mut notes, &mut fns,
                        target,
                    )?;
                }
            }
            for i in 0..stages.len() {
                fns[i] = fns[same_as[i]];
            }
            let mut out = Vec::with_capacity(stages.len());
            for ((i, stage), plan) in stages.iter().enumerate().zip(plans) {
                shared += usize::from(plan.shares_columns());
                carrying += usize::from(plan.carries_values());
                edge_stages += usize::from(plan.uses_edge_vectors());
                budget_limited |= plan.budget_limited();
                let mut note = plan.describe(i, stage);
                if split[i] {
                    note.push_str("; border columns in a separate fast-compiling function");
                }
                if same_as[i] != i {
                    let _ = write!(note, "; the code of stage {}", same_as[i]);
                }
                notes.push(note);
                let (func, rows) =
                    fns[i].ok_or_else(|| CodegenError::Cranelift(format!("stage {i} lost")))?;
                out.push(CpuStage {
                    slots: plan.slots,
                    func,
                    rows: Some(rows),
                });
            }
            CpuBody::Stencil(out)
        }
        KernelBody::Line(_) => {
            let line = line::validate(kernel)?;
            let (xd, yd) = (kernel.inputs[0], kernel.output);
            notes.push(format!(
                "{}: scalar walk, carries in registers (one lane) or scratch (lanes)",
                describe_line(line)
            ));
            let fp = match &loaded {
                Some(l) => l.addr("line")?,
                None => {
                    let mut j = jit::Jit::new(target)?;
                    let f = j.define("line", &line::params(), |b, params| {
                        line::build(b, line, xd, yd, params, fault)
                    })?;
                    let module = j.finish()?;
                    let fp = module.get_finalized_function(f);
                    modules.push(module);
                    match fp {
                        Some(fp) => fp,
                        None => cross::foreign::line as LineFn as *const u8,
                    }
                }
            };
            // SAFETY: the function was defined with the parameter list of `LineFn` (nine
            // i64s for pointers and integers, no result, C calling convention), or loaded
            // as that function's code (`load`'s contract); its code is owned by `module` or
            // `loaded.memory`, which the returned `CpuKernel` keeps alive.
            CpuBody::Line(unsafe { std::mem::transmute::<*const u8, LineFn>(fp) })
        }
        KernelBody::Extern(_) => {
            let call = crate::validate::check_extern(kernel).map_err(CodegenError::Lower)?;
            notes.push(format!(
                "extern `{}`: the registered host function, called per line",
                call.name
            ));
            CpuBody::Extern
        }
    };
    let compile_ms = if loaded.is_some() {
        0.0
    } else {
        t0.elapsed().as_secs_f64() * 1e3
    };
    let owner = match loaded {
        Some(l) => {
            jit::CodeOwner::loaded(l.memory, l.functions.into_iter().map(|(f, _)| f).collect())
        }
        None => jit::CodeOwner::new(modules),
    };
    Ok(CpuKernel {
        kernel: kernel.clone(),
        body,
        compile_ms,
        shared_column_stages: shared,
        carrying_stages: carrying,
        edge_vector_stages: edge_stages,
        budget_limited,
        dual_stages,
        variants: Vec::new(),
        notes,
        _code: Arc::new(owner),
    })
}

/// Compiles the row functions of stages `reps` (and the split-off border functions of those
/// `split`) on up to `available_parallelism()` threads, into `fns`; returns the modules
/// that own the code.
#[allow(clippy::too_many_arguments)]
fn compile_stages(
    stages: &[crate::kernel::Stage],
    plans: &[rowfn::StagePlan],
    split: &[bool],
    same_as: &[usize],
    reps: &[usize],
    fault: Option<crate::fault::Fault>,
    notes: &mut Vec<String>,
    fns: &mut [Option<(RowFn, RowsFn)>],
    target: &CpuTarget,
) -> Result<Vec<jit::Finished>, CodegenError> {
    let compile_borders = || {
        let mut out = Vec::new();
        for (i, stage) in stages.iter().enumerate() {
            if split[i] && same_as[i] == i {
                let plan = &plans[i];
                let code = jit::compile_cold(
                    target,
                    &format!("stage{i}_border"),
                    &rowfn::border_params(),
                    |b, params| rowfn::build_border(b, stage, plan, params, fault),
                )?;
                out.push((i, code));
            }
        }
        Ok::<_, CodegenError>(out)
    };
    let compile_group = |group: &[usize]| {
        let mut j = jit::Jit::new(target)?;
        let border_sig = j.signature(&rowfn::border_params());
        let mut ids = Vec::new();
        let mut border_ids = Vec::new();
        for &i in group {
            let border = if split[i] {
                let id = j.declare(&format!("stage{i}_border"), &rowfn::border_params())?;
                border_ids.push((i, id));
                Some(rowfn::BorderCall {
                    func: id.as_u32(),
                    sig: border_sig.clone(),
                })
            } else {
                None
            };
            let (stage, plan) = (&stages[i], &plans[i]);
            let rows_id = j.define(
                &format!("stage{i}_rows"),
                &rowfn::rows_params(),
                |b, params| rowfn::build_rows(b, stage, plan, params, fault, border),
            )?;
            let id = j.define_row_forwarder(&format!("stage{i}"), rows_id)?;
            ids.push((i, id, rows_id));
        }
        Ok::<_, CodegenError>((j, ids, border_ids))
    };
    let groups = stage_groups(plans, stages, reps);
    if groups.len() > 1 {
        let list: Vec<String> = groups.iter().map(|g| format!("{g:?}")).collect();
        notes.push(format!(
            "stages compiled in {} groups on threads of their own: {}",
            groups.len(),
            list.join(" ")
        ));
    }
    let panicked = || CodegenError::Cranelift("a compile thread panicked".into());
    let border_job_needed = reps.iter().any(|&i| split[i]);
    // The first group compiles on this thread, the others and the border functions
    // on threads of their own (with every group on a new thread, single-group
    // kernels looked slower in separate-process runs, within this VM's noise).
    let (borders, built) = std::thread::scope(|s| {
        let border_job = border_job_needed.then(|| s.spawn(compile_borders));
        let others: Vec<_> = groups
            .iter()
            .skip(1)
            .map(|g| s.spawn(|| compile_group(g)))
            .collect();
        let mut built: Vec<_> = groups.iter().take(1).map(|g| compile_group(g)).collect();
        built.extend(
            others
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(panicked()))),
        );
        let borders = border_job.map(|h| h.join().unwrap_or_else(|_| Err(panicked())));
        (borders, built)
    });
    let cold = borders.transpose()?.unwrap_or_default();
    let mut modules = Vec::with_capacity(built.len());
    for r in built {
        let (mut j, ids, border_ids) = r?;
        for (i, id) in border_ids {
            let code = cold
                .iter()
                .find(|(k, _)| *k == i)
                .map(|(_, c)| c)
                .ok_or_else(|| CodegenError::Cranelift(format!("border of stage {i} lost")))?;
            j.define_cold(id, code)?;
        }
        let module = j.finish()?;
        for (i, id, rows_id) in ids {
            let (Some(ptr), Some(rptr)) = (
                module.get_finalized_function(id),
                module.get_finalized_function(rows_id),
            ) else {
                // Code for another CPU: never run here (see `foreign`).
                fns[i] = Some((cross::foreign::row as RowFn, cross::foreign::rows as RowsFn));
                continue;
            };
            // SAFETY: `ptr` is the finalized code of a function defined with five
            // I64 parameters (`define_row_forwarder`), exactly `RowFn`'s (three
            // pointers and two i64, no result, the platform's C calling convention);
            // `rptr` likewise with `rowfn::rows_params()`, eight I64, `RowsFn`'s.
            // The code (with the border function it calls, defined in the same module)
            // lives as long as `module`, which the returned `CpuKernel` owns.
            fns[i] = Some(unsafe {
                (
                    std::mem::transmute::<*const u8, RowFn>(ptr),
                    std::mem::transmute::<*const u8, RowsFn>(rptr),
                )
            });
        }
        modules.push(module);
    }
    Ok(modules)
}

/// Splits the `compiled` stages into at most `available_parallelism()` groups of about equal
/// estimated compile work (see `StagePlan::compile_weight`), biggest stages first, each to
/// the least loaded group.
fn stage_groups(
    plans: &[rowfn::StagePlan],
    stages: &[crate::kernel::Stage],
    compiled: &[usize],
) -> Vec<Vec<usize>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, compiled.len().max(1));
    let weight: Vec<usize> = plans
        .iter()
        .zip(stages)
        .map(|(p, st)| p.compile_weight(st))
        .collect();
    let mut order: Vec<usize> = compiled.to_vec();
    order.sort_by_key(|&i| std::cmp::Reverse(weight[i]));
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); threads];
    let mut load = vec![0usize; threads];
    for i in order {
        let t = (0..threads).min_by_key(|&t| load[t]).unwrap_or(0);
        groups[t].push(i);
        load[t] += weight[i];
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// Size in bytes of one element, as used for address arithmetic.
fn esize(d: DType) -> i64 {
    d.size_bytes() as i64
}

/// `scan Sum along axis 3` for the plain folds, else a summary.
fn describe_line(line: &crate::kernel::Line) -> String {
    match line.as_fold() {
        Some((scan, op)) => format!(
            "{} {op:?} along axis {}",
            if scan { "scan" } else { "reduce" },
            line.axis
        ),
        None => format!(
            "line {:?} along axis {}, {} carries, {} step values",
            line.direction,
            line.axis,
            line.carries.len(),
            line.step.len()
        ),
    }
}
