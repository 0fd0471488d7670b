//! Row functions: one stencil stage, one output row per call.
//!
//! Layout of the generated function (`W` = width, `dx` = the column offsets of the stage's
//! loads and in-range tests):
//!
//! * the interior `[xlo, xhi)` is where every `x + dx` lies inside `[0, W)`;
//! * when every stride is 1 (checked at run time) the interior runs four columns at a time
//!   with `F32X4` if the stage is vectorisable (sixteen with `I8X16` when every value is u8
//!   or bool, see `bytevec`; two vectors per step for small stages), ending with one vector
//!   overlapping the previous one;
//! * on wide enough rows with unit strides, a vector stage whose column offsets are within
//!   ±4k (k = 1 or 2) computes columns `[0, 4k)` and `[W-4k, W)` as *edge vectors* (lane
//!   shuffles of vectors at the row's ends, see `edge`) and the interior loop covers the rest;
//! * every other column (`[0, xlo)`, the rest of the row, or all of it with strided rows)
//!   runs one scalar body that remaps column indices under each load's border mode (a
//!   compare and a branch per load inside the row, the remap only outside it). For big
//!   stages that loop is a separate function compiled for compile speed (see
//!   `plan::split_border`), called once per row.
//!
//! Float min/max run on order keys, or in compare form inside pure min or max trees (see
//! `treeform` and `values::Tree`).
//!
//! The backend is analyse -> plan -> emit: per-instruction analyses (`facts` and the files
//! it names), a stage's plan (`plan`, thresholds in `schedule`), then this file's function
//! frame (row loop, slot pointers and strides, the border function's entry) around the row
//! walk (`rowwalk`), whose bodies are `colbody`, `lanes` (one vector emitter over the f32
//! and byte lanes of `colbody` and `bytevec`) and `rowblock`.
//! Exactness: this file only moves pointers and chooses paths at run time; what each path
//! computes is argued in its own file. Limits: the innermost axis only (outer axes are
//! resolved by the runtime into row pointers).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::edge::Side;
pub(crate) use super::plan::StagePlan;
use super::rowwalk::{emit_border_loop, emit_row, interior, RowChoices};
use super::values::{arg, mem};
use super::{esize, SlotKind};
use crate::kernel::{Kernel, Stage};
use crate::{CodegenError, Fault};

pub(crate) use super::plan::{plan_stage, split_border};

pub(super) fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(msg.into())
}

/// Checks that every stage of a stencil kernel is well typed, so that code generation
/// never meets an inconsistent program (see [`crate::validate::check_stencil`]).
pub(crate) fn validate(kernel: &Kernel) -> Result<(), CodegenError> {
    crate::validate::check_stencil(kernel).map_err(bad)
}

/// Run-time values available everywhere in the function (defined in the entry block).
pub(super) struct RowCtx {
    /// Pointer per slot.
    pub(super) ptr: Vec<Value>,
    /// Column stride in bytes per `Row` slot.
    pub(super) step: Vec<Value>,
    /// The in-range byte per `OuterInRange` slot.
    pub(super) flag: Vec<Value>,
    pub(super) width: Value,
    pub(super) width_m1: Value,
}

/// One stage's program and what emitting it needs anywhere in a row function: its plan,
/// the function's run-time row values, and the planted fault (tests of the fuzzer only).
#[derive(Clone, Copy)]
pub(super) struct StageCode<'a> {
    pub(super) stage: &'a Stage,
    pub(super) plan: &'a StagePlan,
    pub(super) ctx: &'a RowCtx,
    pub(super) fault: Option<Fault>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// One column, any stride; out-of-range columns possible: remap under the border
    /// mode (a compare and a branch per load for columns inside the row).
    Border,
    /// Every column in range, four columns, stride 1.
    Vector,
    /// Edge vector `v` from one end of a row of at least `edge::Shape::min_width`, stride 1 (see
    /// `edge`).
    Edge(Side, i64),
}

/// Parameter types of a [`super::RowsFn`].
pub(crate) fn rows_params() -> [Type; 8] {
    [types::I64; 8]
}

/// Column strides of a stage's slots, loaded once per call.
pub(super) struct SlotStrides {
    /// Column stride in bytes per `Row` slot (`None` for `OuterInRange` slots).
    pub(super) step: Vec<Option<Value>>,
    /// Whether every `Row` slot has stride 1 (`None` when there is no `Row` slot).
    pub(super) unit: Option<Value>,
}

/// Loads each slot's column stride from `strides`.
pub(super) fn load_strides(
    b: &mut FunctionBuilder,
    plan: &StagePlan,
    strides: Value,
) -> SlotStrides {
    let mut out = SlotStrides {
        step: Vec::new(),
        unit: None,
    };
    for (s, slot) in plan.slots.iter().enumerate() {
        match slot.kind {
            SlotKind::Row { .. } => {
                let st = b.ins().load(types::I64, mem(), strides, (8 * s) as i32);
                out.step
                    .push(Some(b.ins().imul_imm_s(st, esize(plan.slot_dtype[s]))));
                let one = b.ins().icmp_imm_s(IntCC::Equal, st, 1);
                out.unit = Some(match out.unit {
                    Some(u) => b.ins().band(u, one),
                    None => one,
                });
            }
            SlotKind::OuterInRange => out.step.push(None),
        }
    }
    out
}

/// Loads one word per slot from the argument array `words` (the slot pointers, or their
/// row steps).
pub(super) fn load_per_slot(b: &mut FunctionBuilder, plan: &StagePlan, words: Value) -> Vec<Value> {
    (0..plan.slots.len())
        .map(|s| b.ins().load(types::I64, mem(), words, (8 * s) as i32))
        .collect()
}

/// The context of one row from its slot pointers: reads each `OuterInRange` slot's byte.
pub(super) fn row_ctx(
    b: &mut FunctionBuilder,
    ptrs: Vec<Value>,
    strides: &SlotStrides,
    width: Value,
    width_m1: Value,
) -> RowCtx {
    let mut ctx = RowCtx {
        step: Vec::new(),
        flag: Vec::new(),
        ptr: ptrs,
        width,
        width_m1,
    };
    for (&p, step) in ctx.ptr.iter().zip(&strides.step) {
        match step {
            Some(st) => {
                ctx.step.push(*st);
                ctx.flag.push(p);
            }
            None => {
                ctx.step.push(p);
                ctx.flag.push(b.ins().load(types::I8, mem(), p, 0));
            }
        }
    }
    ctx
}

/// Builds the multi-row function of `stage` (a [`super::RowsFn`]): a loop over `nrows` rows
/// around the row body, every slot pointer advanced by its row step per row.
///
/// With `border`, the columns outside the vector interior are computed by that function
/// (see [`build_border`], called once per row by a direct call) instead of inline.
pub(crate) fn build_rows(
    b: &mut FunctionBuilder,
    stage: &Stage,
    plan: &StagePlan,
    params: &[Value],
    fault: Option<Fault>,
    border: Option<BorderCall>,
) -> Result<(), CodegenError> {
    let (rows, row_steps, strides, out, out_row_step, out_stride, width, nrows) = (
        params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
    );
    let i64t = types::I64;
    // Everything that does not change from row to row is computed here, once. The slot
    // pointers and the output pointer are parameters of the row loop, advanced by their
    // row steps (no multiplication per row). Measured: computed in the row as
    // `rows[s] + r * row_steps[s]`, Cranelift's mid-end placed them, and the row's other
    // invariants, in the header of a column loop, at every step, and spilled them.
    let base = load_per_slot(b, plan, rows);
    let slot_strides = load_strides(b, plan, strides);
    let width_m1 = b.ins().iadd_imm_s(width, -1);
    // The run-time choices of the row's paths, made once per call and kept in a stack slot
    // that each row reads: computed in the row, or carried as parameters of the row loop
    // (which Cranelift folds back to the entry's values), the stride tests were redone at
    // every row (about 20 instructions, measured on gradient magnitude's 28-column rows).
    let vec_ok = plan.lanes().map(|_| {
        let out_one = b.ins().icmp_imm_s(IntCC::Equal, out_stride, 1);
        match slot_strides.unit {
            Some(u) => b.ins().band(u, out_one),
            None => out_one,
        }
    });
    let edge_ok = match vec_ok {
        Some(ok) if plan.edge_vectors > 0 => {
            let min = plan.edge_shape().min_width(plan.edge_vectors);
            let wide = b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, width, min);
            Some(b.ins().band(ok, wide))
        }
        _ => None,
    };
    let choices: Vec<Value> = vec_ok.iter().chain(&edge_ok).copied().collect();
    let choice_slot = b.create_sized_stack_slot(cranelift_codegen::ir::StackSlotData::new(
        cranelift_codegen::ir::StackSlotKind::ExplicitSlot,
        2,
        0,
    ));
    for (k, &c) in choices.iter().enumerate() {
        b.ins().stack_store(types::I64, c, choice_slot, k as i32);
    }
    let hdr = b.create_block();
    for _ in 0..plan.slots.len() + 2 {
        b.append_block_param(hdr, i64t);
    }
    let row_blk = b.create_block();
    let next = b.create_block();
    let exit = b.create_block();
    let zero = b.ins().iconst(i64t, 0);
    let mut first: Vec<BlockArg> = vec![arg(zero), arg(out)];
    first.extend(base.iter().map(|&p| arg(p)));
    match &plan.row_window {
        Some(w) => {
            // The row block's own copy of the row steps (the row loop loads them per row).
            let row_step = load_per_slot(b, plan, row_steps);
            let args = super::rowblock::BlockArgs {
                ptrs: &base,
                row_steps: &row_step,
                unit_strides: slot_strides.unit,
                out,
                out_row_step,
                out_stride,
                width,
                nrows,
            };
            super::rowblock::emit(b, w, &args, fault, hdr, &first, exit);
        }
        None => {
            b.ins().jump(hdr, &first);
        }
    }

    b.switch_to_block(hdr);
    let params = b.block_params(hdr).to_vec();
    let (r, out_r, ptrs) = (params[0], params[1], params[2..].to_vec());
    let more = b.ins().icmp(IntCC::SignedLessThan, r, nrows);
    b.ins().brif(more, row_blk, &[], exit, &[]);

    b.switch_to_block(row_blk);
    let vec_ok = vec_ok.map(|_| b.ins().stack_load(types::I64, types::I8, choice_slot, 0));
    let edge_ok = edge_ok.map(|_| b.ins().stack_load(types::I64, types::I8, choice_slot, 1));
    let ctx = row_ctx(b, ptrs.clone(), &slot_strides, width, width_m1);
    let border = border.map(|bc| (bc, strides));
    let code = StageCode {
        stage,
        plan,
        ctx: &ctx,
        fault,
    };
    emit_row(
        b,
        &code,
        RowChoices { vec_ok, edge_ok },
        out_r,
        out_stride,
        next,
        border,
    )?;

    b.switch_to_block(next);
    let r1 = b.ins().iadd_imm_s(r, 1);
    let out1 = b.ins().iadd(out_r, out_row_step);
    let mut again: Vec<BlockArg> = vec![arg(r1), arg(out1)];
    // The row steps are loaded again here, once per row, rather than kept from the entry:
    // kept, they were live across the column loops without a use there, and the register
    // allocator stored and reloaded values at every vector step of a narrow stage (gradient
    // magnitude's 28-column rows: 8 stores and 8 loads per vector, now 4 and 4).
    let latch_steps = load_per_slot(b, plan, row_steps);
    for (&p, &rs) in ptrs.iter().zip(&latch_steps) {
        let p1 = b.ins().iadd(p, rs);
        again.push(arg(p1));
    }
    b.ins().jump(hdr, &again);

    b.switch_to_block(exit);
    b.ins().return_(&[]);
    Ok(())
}

/// A stage's border function, as the row function calls it: a direct call of a function
/// declared in the same module (its bytes compiled by the cold ISA and defined there, see
/// `jit::compile_cold`), so the call is PC-relative and the code position-independent.
#[derive(Clone)]
pub(crate) struct BorderCall {
    /// The border function's `FuncId` index in the row function's module.
    pub(crate) func: u32,
    /// Its signature ([`border_params`], no result, the host's C convention).
    pub(crate) sig: cranelift_codegen::ir::Signature,
}

impl BorderCall {
    /// The border function as a callee of the function being built.
    pub(super) fn import(&self, b: &mut FunctionBuilder) -> cranelift_codegen::ir::FuncRef {
        let signature = b.import_signature(self.sig.clone());
        let name =
            b.func
                .declare_imported_user_function(cranelift_codegen::ir::UserExternalName::new(
                    0, self.func,
                ));
        b.import_function(cranelift_codegen::ir::ExtFuncData {
            name: cranelift_codegen::ir::ExternalName::user(name),
            signature,
            colocated: true,
            patchable: false,
        })
    }
}

/// Parameter types of a border function: `rows`, `strides` (as a [`super::RowFn`]), `out`,
/// `out_stride`, `width`, and `xs`: it computes columns `[0, xlo)` and `[xs, W)`.
pub(crate) fn border_params() -> [Type; 6] {
    [types::I64; 6]
}

/// Builds a stage's border function: the border loop of [`emit_row`] for one row.
pub(crate) fn build_border(
    b: &mut FunctionBuilder,
    stage: &Stage,
    plan: &StagePlan,
    params: &[Value],
    fault: Option<Fault>,
) -> Result<(), CodegenError> {
    let (rows, strides, out, out_stride, width, xs) = (
        params[0], params[1], params[2], params[3], params[4], params[5],
    );
    let ptrs = load_per_slot(b, plan, rows);
    let slot_strides = load_strides(b, plan, strides);
    let width_m1 = b.ins().iadd_imm_s(width, -1);
    let ctx = row_ctx(b, ptrs, &slot_strides, width, width_m1);
    let (xlo, _) = interior(b, plan, width);
    let exit = b.create_block();
    let code = StageCode {
        stage,
        plan,
        ctx: &ctx,
        fault,
    };
    emit_border_loop(b, &code, out, out_stride, xlo, xs, exit)?;
    b.switch_to_block(exit);
    b.ins().return_(&[]);
    Ok(())
}
