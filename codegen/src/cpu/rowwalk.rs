//! Emitting one output row of a stencil stage: the walk over its left edge, vector interior
//! (plain, unrolled or shared steps), tail and border columns, as the plan chose them.
//!
//! Exactness: every column is computed once by a body that computes the same bits
//! (overlapping vector tails rewrite columns with the same values: every column is a pure
//! function of the sources, and `out` overlaps no source row). Limits: one row per call; the
//! row loop around it is `rowfn::build_rows`.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::bytevec::{self, ByteLanes};
use super::colbody::{body, F32Lanes};
use super::edge::Side;
use super::esize;
use super::lanes;
use super::plan::StagePlan;
use super::rowfn::{bad, BorderCall, Path, RowCtx, StageCode};
use super::schedule::{Interior, RowSchedule, Tail};
use super::shift::ShiftPlan;
use super::values::{arg, mem};
use crate::CodegenError;

/// The row's slot pointers in a stack array (for a border call).
pub(super) fn rows_r(b: &mut FunctionBuilder, plan: &StagePlan, ctx: &RowCtx) -> Value {
    use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
    let n = plan.slots.len().max(1) as u32;
    let ss = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8 * n, 3));
    for (s, &p) in ctx.ptr.iter().enumerate() {
        b.ins().stack_store(types::I64, p, ss, (8 * s) as i32);
    }
    b.ins().stack_addr(types::I64, ss, 0)
}

/// The interior `[xlo, xhi)` of a row of `width` columns: where every `x + dx` is inside.
pub(super) fn interior(b: &mut FunctionBuilder, plan: &StagePlan, width: Value) -> (Value, Value) {
    let lo_c = b.ins().iconst(types::I64, (-plan.min_dx).max(0));
    let xlo = b.ins().smin(lo_c, width);
    let xhi = b.ins().iadd_imm_s(width, -plan.max_dx.max(0));
    let xhi = b.ins().smax(xhi, xlo);
    (xlo, xhi)
}

/// Emits the scalar loop over columns `[0, xlo)` then `[xs, W)` (remapping column indices),
/// from the current block; jumps to `done`.
pub(super) fn emit_border_loop(
    b: &mut FunctionBuilder,
    code: &StageCode,
    out: Value,
    out_stride: Value,
    xlo: Value,
    xs: Value,
    done: cranelift_codegen::ir::Block,
) -> Result<(), CodegenError> {
    let StageCode { stage, ctx, .. } = *code;
    let i64t = types::I64;
    let width = ctx.width;
    let out_step = b.ins().imul_imm_s(out_stride, esize(stage.dtype()));
    let border_blk = b.create_block();
    b.append_block_param(border_blk, i64t);
    let zero = b.ins().iconst(i64t, 0);
    let lo_empty = b.ins().icmp_imm_s(IntCC::Equal, xlo, 0);
    let x0 = b.ins().select(lo_empty, xs, zero);
    let go = b.ins().icmp(IntCC::SignedLessThan, x0, width);
    b.ins().brif(go, border_blk, &[arg(x0)], done, &[]);

    b.switch_to_block(border_blk);
    let x = b.block_params(border_blk)[0];
    let v = body(b, code, x, Path::Border)?;
    let off = b.ins().imul(x, out_step);
    let addr = b.ins().iadd(out, off);
    b.ins().store(mem(), v, addr, 0);
    let x1 = b.ins().iadd_imm_s(x, 1);
    let at_lo = b.ins().icmp(IntCC::Equal, x1, xlo);
    let x2 = b.ins().select(at_lo, xs, x1);
    let go = b.ins().icmp(IntCC::SignedLessThan, x2, width);
    b.ins().brif(go, border_blk, &[arg(x2)], done, &[]);
    Ok(())
}

/// The row's path choices, made once per call (see [`build_rows`]).
#[derive(Clone, Copy)]
pub(super) struct RowChoices {
    /// Every stride is 1: the vector interior runs (present when the stage has one).
    pub(super) vec_ok: Option<Value>,
    /// ... and the row is wide enough for edge vectors (present when the stage uses them).
    pub(super) edge_ok: Option<Value>,
}

/// Emits one output row from the current block, walking the stage's [`RowSchedule`]: the
/// left edge and the vector interior (when every stride is 1), its tail, the right edge,
/// then the border columns; jumps to `done` at the end.
pub(super) fn emit_row(
    b: &mut FunctionBuilder,
    code: &StageCode,
    choices: RowChoices,
    out: Value,
    out_stride: Value,
    done: Block,
    border: Option<(BorderCall, Value)>,
) -> Result<(), CodegenError> {
    let StageCode {
        stage, plan, ctx, ..
    } = *code;
    let i64t = types::I64;
    let sched = plan.row_schedule(stage);
    let (xlo, xhi) = interior(b, plan, ctx.width);
    let lanes_or_1 = sched.lanes.unwrap_or(1);
    let narrow = {
        let span = b.ins().isub(xhi, xlo);
        b.ins().icmp_imm_s(IntCC::SignedLessThan, span, lanes_or_1)
    };
    let read_lo = plan.shift.as_ref().map_or(0, |sp| (-sp.read_lo).max(0));
    let wlo = {
        let c = b.ins().iconst(i64t, read_lo);
        b.ins().smax(c, xlo)
    };
    // Columns the vector loop does not cover, `[0, xlo)` then `[xs, W)`, run one scalar
    // body that remaps column indices (identity inside the row): `border_entry(xs)`.
    let border_entry = b.create_block();
    b.append_block_param(border_entry, i64t);
    let mut walk = Walk {
        code: *code,
        sched,
        out,
        xlo,
        xhi,
        wlo,
        narrow,
        border_entry,
        // Edge vectors replace the scalar border columns of the plain vector loop (see
        // `edge`) when `edge_ok` holds.
        edge_ok: choices.edge_ok,
        byte_rows: bytevec::Rows {
            facts: &plan.facts,
            ptr: &ctx.ptr,
            flag: &ctx.flag,
            width: ctx.width,
        },
    };
    match sched.lanes {
        Some(lanes) => {
            let ok = choices
                .vec_ok
                .ok_or_else(|| bad("vector row without its stride test"))?;
            walk.vector_interior(b, ok, lanes)?;
        }
        None => {
            b.ins().jump(border_entry, &[arg(xlo)]);
        }
    }
    b.switch_to_block(border_entry);
    let xs = b.block_params(border_entry)[0];
    if let Some(e) = walk.edge_ok {
        walk.right_edge(b, e, done)?;
    }
    match border {
        Some((bc, strides)) => {
            walk.border_call(b, &bc, strides, out_stride, xs, done);
            Ok(())
        }
        None => emit_border_loop(b, code, out, out_stride, xlo, xs, done),
    }
}

/// One row being emitted: the stage, its schedule, the row's output and the interior's
/// bounds.
struct Walk<'a> {
    code: StageCode<'a>,
    sched: RowSchedule,
    out: Value,
    xlo: Value,
    /// The interior's end; with edge vectors, where the right ones begin (on rows that
    /// take them).
    xhi: Value,
    /// The first column a shared step may start at (its reads in the row).
    wlo: Value,
    /// The interior is narrower than one vector.
    narrow: Value,
    border_entry: Block,
    edge_ok: Option<Value>,
    byte_rows: bytevec::Rows<'a>,
}

impl Walk<'_> {
    /// Stores vector (or column) `v` of the output at column `x`.
    fn store(&self, b: &mut FunctionBuilder, x: Value, v: Value) {
        let off = b.ins().imul_imm_s(x, esize(self.code.stage.dtype()));
        let addr = b.ins().iadd(self.out, off);
        b.ins().store(mem(), v, addr, 0);
    }

    /// Emits and stores one vector at column `x` on `path`.
    fn emit_path(&self, b: &mut FunctionBuilder, x: Value, path: Path) -> Result<(), CodegenError> {
        let stage = self.code.stage;
        let v = if self.code.plan.bytes {
            let mut l = ByteLanes::new(b, stage, &self.byte_rows);
            lanes::body(&mut l, stage, 0..stage.insts.len(), x, path)?
        } else {
            body(b, &self.code, x, path)?
        };
        self.store(b, x, v);
        Ok(())
    }

    /// Interior `[xlo, xhi)`, `lanes` columns per step when every stride is 1 (`ok`); a
    /// last partial step is redone as one full vector that ends at `xhi` (overlapping
    /// columns already written with the same values: every column is a pure function of
    /// the sources, and `out` overlaps no source row), unless the interior is narrower
    /// than one vector.
    fn vector_interior(
        &mut self,
        b: &mut FunctionBuilder,
        ok: Value,
        lanes: i64,
    ) -> Result<(), CodegenError> {
        let plan = self.code.plan;
        // Edge vectors (see `edge`): on a wide enough row with unit strides, columns
        // `[0, 4k)` before the vector loop and `[W-4k, W)` after it, which then covers
        // `[4k, W-4k)` (inside the interior: every `|dx| <= 4k`).
        if let Some(e) = self.edge_ok {
            let w4 = b.ins().iadd_imm_s(
                self.code.ctx.width,
                -plan.edge_shape().lanes * plan.edge_vectors,
            );
            self.xhi = b.ins().select(e, w4, self.xhi);
        }
        let vec_hdr = (self.sched.tail == Tail::OneVectorLoop).then(|| {
            let blk = b.create_block();
            b.append_block_param(blk, types::I64);
            blk
        });
        match (&plan.shift, vec_hdr) {
            (Some(sp), _) => self.shared_steps(b, ok, sp, lanes, vec_hdr)?,
            (None, Some(vec_hdr)) if self.sched.interior == Interior::Unrolled => {
                self.unrolled_steps(b, ok, lanes, vec_hdr)?
            }
            (None, Some(vec_hdr)) => self.enter_loop(b, ok, vec_hdr)?,
            (None, None) => {}
        }
        if let Some(vec_hdr) = vec_hdr {
            self.one_vector_loop(b, lanes, vec_hdr)?;
        }
        Ok(())
    }

    /// Enters the vector loop at `entry` from column `xlo` (unit strides, `ok`), or, with
    /// edge vectors on a wide enough row, after the left ones.
    fn enter_loop(
        &self,
        b: &mut FunctionBuilder,
        ok: Value,
        entry: Block,
    ) -> Result<(), CodegenError> {
        let plan = self.code.plan;
        let (xlo, border_entry) = (self.xlo, self.border_entry);
        match self.edge_ok {
            None => {
                b.ins()
                    .brif(ok, entry, &[arg(xlo)], border_entry, &[arg(xlo)]);
            }
            Some(e) => {
                let start = b.create_block();
                let left = b.create_block();
                b.ins().brif(ok, start, &[], border_entry, &[arg(xlo)]);
                b.switch_to_block(start);
                b.ins().brif(e, left, &[], entry, &[arg(xlo)]);
                b.switch_to_block(left);
                for v in 0..plan.edge_vectors {
                    let first = plan.edge_shape().first_column(Side::Left, v, 0);
                    let x = b.ins().iconst(types::I64, first);
                    self.emit_path(b, x, Path::Edge(Side::Left, v))?;
                }
                // Plain steps resume after the edge vectors (fewest vectors per row:
                // gradient magnitude's 28-column rows take 7 instead of 8). Shared steps
                // keep their own start, where the one load per vector of each row reads
                // from the row's 16-byte alignment (A/B against no edge vectors, opening
                // 3x3 at 2048², one thread: started at column 4, 2–5% slower; from
                // `xlo`, 6–7% faster).
                let start = if plan.shift.is_some() {
                    xlo
                } else {
                    b.ins()
                        .iconst(types::I64, plan.edge_shape().lanes * plan.edge_vectors)
                };
                b.ins().jump(entry, &[arg(start)]);
            }
        }
        Ok(())
    }

    /// Small stages: two vectors per step first (more independent work per loop
    /// iteration), then the one-vector loop at `vec_hdr` for the rest.
    fn unrolled_steps(
        &self,
        b: &mut FunctionBuilder,
        ok: Value,
        lanes: i64,
        vec_hdr: Block,
    ) -> Result<(), CodegenError> {
        let hdr2 = b.create_block();
        b.append_block_param(hdr2, types::I64);
        let body2 = b.create_block();
        self.enter_loop(b, ok, hdr2)?;
        b.switch_to_block(hdr2);
        let x = b.block_params(hdr2)[0];
        let x2 = b.ins().iadd_imm_s(x, 2 * lanes);
        let fits = b.ins().icmp(IntCC::SignedLessThanOrEqual, x2, self.xhi);
        // Leave through a block of its own: it is the one-vector loop's immediate
        // dominator, where Cranelift hoists that loop's invariants. Were it this
        // loop's header, they would run at every step of this loop.
        let exit2 = b.create_block();
        b.append_block_param(exit2, types::I64);
        b.ins().brif(fits, body2, &[], exit2, &[arg(x)]);
        b.switch_to_block(exit2);
        let xe = b.block_params(exit2)[0];
        b.ins().jump(vec_hdr, &[arg(xe)]);
        b.switch_to_block(body2);
        self.emit_path(b, x, Path::Vector)?;
        let x1 = b.ins().iadd_imm_s(x, lanes);
        self.emit_path(b, x1, Path::Vector)?;
        b.ins().jump(hdr2, &[arg(x2)]);
        Ok(())
    }

    /// The one-vector loop at `vec_hdr`, its last partial step redone as one vector that
    /// ends at `xhi`.
    fn one_vector_loop(
        &self,
        b: &mut FunctionBuilder,
        lanes: i64,
        vec_hdr: Block,
    ) -> Result<(), CodegenError> {
        let xhi = self.xhi;
        let vec_body = b.create_block();
        b.append_block_param(vec_body, types::I64);
        let vec_tail = b.create_block();
        b.append_block_param(vec_tail, types::I64);
        b.switch_to_block(vec_hdr);
        let x = b.block_params(vec_hdr)[0];
        let xn = b.ins().iadd_imm_s(x, lanes);
        let fits = b.ins().icmp(IntCC::SignedLessThanOrEqual, xn, xhi);
        b.ins().brif(fits, vec_body, &[arg(x)], vec_tail, &[arg(x)]);

        // Here `x == xhi`, or `x == xlo` with an interior narrower than a vector (left to
        // the scalar loop).
        b.switch_to_block(vec_tail);
        let x = b.block_params(vec_tail)[0];
        let left = b.ins().icmp(IntCC::SignedLessThan, x, xhi);
        let redo = b.ins().band_not(left, self.narrow);
        let xl = b.ins().iadd_imm_s(xhi, -lanes);
        b.ins()
            .brif(redo, vec_body, &[arg(xl)], self.border_entry, &[arg(x)]);

        b.switch_to_block(vec_body);
        let x = b.block_params(vec_body)[0];
        self.emit_path(b, x, Path::Vector)?;
        let xn = b.ins().iadd_imm_s(x, lanes);
        b.ins().jump(vec_hdr, &[arg(xn)]);
        Ok(())
    }

    /// After the vector loop, on a row that takes edge vectors (`e`): the right ones, then
    /// `done`; otherwise on to the scalar border columns.
    fn right_edge(
        &self,
        b: &mut FunctionBuilder,
        e: Value,
        done: Block,
    ) -> Result<(), CodegenError> {
        let plan = self.code.plan;
        let right = b.create_block();
        let scalar = b.create_block();
        b.ins().brif(e, right, &[], scalar, &[]);
        b.switch_to_block(right);
        for v in 0..plan.edge_vectors {
            let x = b
                .ins()
                .iadd_imm_s(self.code.ctx.width, -plan.edge_shape().lanes * (v + 1));
            self.emit_path(b, x, Path::Edge(Side::Right, v))?;
        }
        b.ins().jump(done, &[]);
        b.switch_to_block(scalar);
        Ok(())
    }

    /// The border columns `[0, xlo)` and `[xs, W)` by a call of the stage's split-off
    /// border function, skipped when no column is left (`xlo == 0` and `xs == W`).
    fn border_call(
        &self,
        b: &mut FunctionBuilder,
        bc: &BorderCall,
        strides: Value,
        out_stride: Value,
        xs: Value,
        done: Block,
    ) {
        let width = self.code.ctx.width;
        let call = b.create_block();
        let lo_empty = b.ins().icmp_imm_s(IntCC::Equal, self.xlo, 0);
        let hi_empty = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, xs, width);
        let none = b.ins().band(lo_empty, hi_empty);
        b.ins().brif(none, done, &[], call, &[]);
        b.switch_to_block(call);
        // The row pointers go to the stack here, only on rows that make the call.
        let rows_arr = rows_r(b, self.code.plan, self.code.ctx);
        let f = bc.import(b);
        b.ins()
            .call(f, &[rows_arr, strides, self.out, out_stride, width, xs]);
        b.ins().jump(done, &[]);
    }

    /// Shared steps of `sp.blocks` vectors (see `shift`) while every output is in the
    /// interior and every read in the row; then the one-vector loop at `vec_hdr`, where
    /// there is one; otherwise, when columns are left and the row is wide enough, one last
    /// step moved left to end at the last column it can reach (overlapping columns already
    /// written with the same values: every column is a pure function of the sources, and
    /// `out` overlaps no source row), and the scalar border loop does the rest.
    ///
    /// Values carried from step to step (`sp.carry`) are parameters of the loop blocks:
    /// `wide_first` computes them for a row's first step (and a redone last step), each
    /// step computes those of the next.
    fn shared_steps(
        &self,
        b: &mut FunctionBuilder,
        ok: Value,
        sp: &ShiftPlan,
        lanes: i64,
        vec_hdr: Option<Block>,
    ) -> Result<(), CodegenError> {
        let StageCode {
            stage, plan, ctx, ..
        } = self.code;
        let (xhi, wlo, width) = (self.xhi, self.wlo, ctx.width);
        let block = sp.blocks as i64 * lanes;
        let wide_entry = b.create_block();
        b.append_block_param(wide_entry, types::I64);
        let wide_first = b.create_block();
        b.append_block_param(wide_first, types::I64);
        let wide_hdr = b.create_block();
        b.append_block_param(wide_hdr, types::I64);
        let wide_body = b.create_block();
        b.append_block_param(wide_body, types::I64);
        let wide_tail = b.create_block();
        b.append_block_param(wide_tail, types::I64);
        // Whether a step at `x` runs: started, reads in the row, outputs in the interior.
        let go = |b: &mut FunctionBuilder, x: Value| {
            let started = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, x, wlo);
            let last_read = b.ins().iadd_imm_s(x, sp.read_hi);
            let reads_in = b.ins().icmp(IntCC::SignedLessThan, last_read, width);
            let xw = b.ins().iadd_imm_s(x, block);
            let outs_in = b.ins().icmp(IntCC::SignedLessThanOrEqual, xw, xhi);
            let go = b.ins().band(started, reads_in);
            b.ins().band(go, outs_in)
        };
        self.enter_loop(b, ok, wide_entry)?;
        b.switch_to_block(wide_entry);
        let x = b.block_params(wide_entry)[0];
        let g = go(b, x);
        b.ins().brif(g, wide_first, &[arg(x)], wide_tail, &[arg(x)]);

        b.switch_to_block(wide_first);
        let x = b.block_params(wide_first)[0];
        let first = if plan.bytes {
            let mut l = ByteLanes::new(b, stage, &self.byte_rows);
            lanes::carried_first(&mut l, stage, sp, x)?
        } else {
            lanes::carried_first(&mut F32Lanes::new(b, &self.code, true), stage, sp, x)?
        };
        for &v in &first {
            let ty = b.func.dfg.value_type(v);
            b.append_block_param(wide_body, ty);
            b.append_block_param(wide_hdr, ty);
        }
        let args: Vec<_> = std::iter::once(x).chain(first).map(arg).collect();
        b.ins().jump(wide_body, &args);

        b.switch_to_block(wide_hdr);
        let params = b.block_params(wide_hdr).to_vec();
        let g = go(b, params[0]);
        let args: Vec<_> = params.iter().copied().map(arg).collect();
        b.ins()
            .brif(g, wide_body, &args, wide_tail, &[arg(params[0])]);

        b.switch_to_block(wide_tail);
        let x = b.block_params(wide_tail)[0];
        if let Some(vec_hdr) = vec_hdr {
            b.ins().jump(vec_hdr, &[arg(x)]);
        } else {
            // The last start: reads in the row and outputs in the interior.
            let by_reads = b.ins().iadd_imm_s(ctx.width_m1, -sp.read_hi);
            let by_outs = b.ins().iadd_imm_s(xhi, -block);
            let xl = b.ins().smin(by_reads, by_outs);
            // Here `x > xl` unless the loop never started (`x < wlo`): the redone step then
            // covers `[x, xl + block)`.
            let left = b.ins().icmp(IntCC::SignedLessThan, x, xhi);
            let began = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, x, wlo);
            let valid = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, xl, wlo);
            // Beyond the previous step's start (so the redone step ends past it, and a
            // redone step is never redone again).
            let prev = b.ins().iadd_imm_s(x, -block);
            let new = b.ins().icmp(IntCC::SignedGreaterThan, xl, prev);
            let redo = b.ins().band(left, valid);
            let redo = b.ins().band(redo, new);
            let redo = b.ins().band(redo, began);
            b.ins()
                .brif(redo, wide_first, &[arg(xl)], self.border_entry, &[arg(x)]);
        }

        b.switch_to_block(wide_body);
        let params = b.block_params(wide_body).to_vec();
        let x = params[0];
        let store = |b: &mut FunctionBuilder, u: usize, v: Value| {
            let xu = b.ins().iadd_imm_s(x, u as i64 * lanes);
            self.store(b, xu, v);
        };
        let carried = &params[1..];
        let next = if plan.bytes {
            let mut l = ByteLanes::new(b, stage, &self.byte_rows);
            lanes::body_shared(&mut l, stage, sp, &plan.order, x, carried, store)?
        } else {
            let mut l = F32Lanes::new(b, &self.code, true);
            lanes::body_shared(&mut l, stage, sp, &plan.order, x, carried, store)?
        };
        let xn = b.ins().iadd_imm_s(x, block);
        let args: Vec<_> = std::iter::once(xn).chain(next).map(arg).collect();
        b.ins().jump(wide_hdr, &args);
        Ok(())
    }
}
