//! Planning one stencil stage: its row slots, column offsets, vector path, per-instruction
//! facts (see `facts`) and scheduling choices (shared steps, row blocks, edge vectors,
//! split-off border function), as a [`StagePlan`].
//!
//! Exactness: a plan only picks among code shapes that compute the same bits (each choice's
//! argument is in the file that emits it: `shift`, `rowblock`, `edge`, `nanguard`, ...); no
//! planted fault enables an optimisation whose argument the fault would break.
//! Limits: thresholds live in `schedule`; the plan is per stage, with no view of the kernel's
//! other stages except through `raw_result`.

use std::collections::HashMap;

use kiln_ir::{BinaryOp, DType, UnaryOp};

use super::edge::{self, Side};
use super::facts::{analyse, InstFacts};
use super::rawresult::raw_result;
use super::rowfn::bad;
use super::schedule::{
    BorderColumns, Interior, RowSchedule, Tail, CARRY_FIRST_MAX_INSTS, EDGE_SHARED_MAX_INSTS,
    ONE_VECTOR_LOOP_MIN_BLOCKS, SPLIT_BORDER_INSTS, SPLIT_BORDER_NARROW_INSTS,
    SPLIT_BORDER_NARROW_SPAN, UNROLL_MAX_INSTS,
};
use super::{RowSlot, SlotKind};
use crate::kernel::{Kernel, KernelBody, Op, Stage};
use crate::CodegenError;

/// What code generation needs to know about one stage.
pub(crate) struct StagePlan {
    /// The row pointers, in argument order.
    pub(crate) slots: Vec<RowSlot>,
    /// Dtype of each `Row` slot's elements (`Bool` for `OuterInRange`).
    pub(super) slot_dtype: Vec<DType>,
    /// Per instruction: what the analyses found (see `facts`).
    pub(crate) facts: Vec<InstFacts>,
    /// Smallest and largest column offset (both include 0).
    pub(super) min_dx: i64,
    pub(super) max_dx: i64,
    /// Whether the interior can run on `F32X4`.
    pub(super) vectorisable: bool,
    /// Whether the interior can run on `I8X16` (every value u8 or bool, see `bytevec`).
    pub(super) bytes: bool,
    /// Emission order of the instructions (see [`emit_order`]).
    pub(super) order: Vec<usize>,
    /// Work shared between neighbouring columns on the `F32X4` interior (see `shift`).
    pub(super) shift: Option<super::shift::ShiftPlan>,
    /// Plain picks of f32 vectors are integer picks (the specialisation for clean inputs
    /// with clear sign bits, see `Em::int_picks`).
    pub(super) int_picks: bool,
    /// The stage's result may be stored with a NaN as the hardware gives it (see
    /// [`raw_result`]).
    pub(crate) raw_result: bool,
    /// A min/max window along the run axis, computed in blocks of rows by the multi-row
    /// function (see `rowblock`).
    pub(super) row_window: Option<super::rowblock::RowWindow>,
    /// Edge vectors per end of a wide enough row (see `edge`; 0: none): the first and last
    /// `4 * edge_vectors` columns run as vectors instead of scalar border columns.
    pub(super) edge_vectors: i64,
    /// The step code budget held this stage's code back: smaller shared steps, no values
    /// carried between steps, or no edge vectors where two per end would reach, so a
    /// compile under a bigger budget gives different (faster) code.
    pub(super) budget_limited: bool,
}

impl StagePlan {
    /// Columns per vector step of the interior, when it is vectorised.
    pub(crate) fn lanes(&self) -> Option<i64> {
        vector_lanes(self.vectorisable, self.bytes)
    }

    /// A rough measure of how long the stage takes to compile, for balancing compile
    /// threads: instructions times the vectors per shared step, plus a row block's rows.
    /// A float max counts one and a half (a float max tree is a negated min tree: its loads
    /// and result flip signs), in the block too; byte maxima are one instruction like minima. Calibrated on the morphology kernels' compile
    /// times per function: a 15-row block compiles for as long as the 1x15 stage before it,
    /// or longer (15x15 erosion: 1.5x), and the max stages of a 15x15 opening take 15-25%
    /// longer than its min stages.
    pub(crate) fn compile_weight(&self, stage: &Stage) -> usize {
        let n = stage.insts.len().max(1);
        let maxes = stage
            .insts
            .iter()
            .filter(|i| {
                matches!(i.op, Op::Binary(BinaryOp::Max, ..))
                    && matches!(i.dtype, DType::F32 | DType::F64)
            })
            .count();
        let steps = self.shift.as_ref().map_or(2, |sp| sp.blocks + 1);
        let block = self
            .row_window
            .as_ref()
            .map_or(0, |w| 12 * (w.rows + w.len) * (2 * n + maxes) / (2 * n));
        (n + maxes / 2) * steps + block
    }

    /// How the stage's rows are computed (see [`RowSchedule`]), as `rowwalk` emits them.
    pub(crate) fn row_schedule(&self, stage: &Stage) -> RowSchedule {
        let lanes = self.lanes();
        // The one-vector loop: for every vectorised stage but big shared `F32X4` ones
        // without edge vectors (whose leftover columns, fewer than a step's reach past the
        // row's end, run scalar instead, for compile time). On the byte path a shared step
        // reads up to 16 columns past its last vector: left to the scalar loop, a 5x5
        // median's rows ended in about 14 scalar columns, which took half the kernel's
        // time.
        let one_vector = self.bytes
            || self.edge_vectors > 0
            || self
                .shift
                .as_ref()
                .is_none_or(|sp| sp.blocks >= ONE_VECTOR_LOOP_MIN_BLOCKS);
        let interior = match (&self.shift, &self.row_window) {
            _ if lanes.is_none() => Interior::Scalar,
            (Some(sp), _) => Interior::Shared {
                blocks: sp.blocks,
                carried: sp.carry.len(),
            },
            (None, Some(w)) => Interior::RowBlock { rows: w.rows },
            (None, None) if stage.insts.len() <= UNROLL_MAX_INSTS => Interior::Unrolled,
            (None, None) => Interior::Plain,
        };
        RowSchedule {
            lanes,
            edge_vectors: self.edge_vectors,
            interior,
            tail: match lanes {
                None => Tail::None,
                Some(_) if one_vector => Tail::OneVectorLoop,
                Some(_) => Tail::RedoneStep,
            },
            border: if split_border(self, stage) {
                BorderColumns::SplitFunction
            } else {
                BorderColumns::Inline
            },
        }
    }

    /// Whether wide enough rows run edge vectors instead of scalar border columns.
    pub(crate) fn uses_edge_vectors(&self) -> bool {
        self.edge_vectors > 0
    }

    /// The geometry of the stage's edge vectors (16 lanes on the byte path).
    pub(super) fn edge_shape(&self) -> edge::Shape {
        edge::Shape::of_path(self.bytes)
    }

    /// Whether the vector interior shares work between neighbouring columns.
    pub(crate) fn shares_columns(&self) -> bool {
        self.shift.is_some()
    }

    /// Whether the shared vector loop carries values from one step to the next.
    pub(crate) fn carries_values(&self) -> bool {
        self.shift.as_ref().is_some_and(|s| !s.carry.is_empty())
    }

    /// Whether a bigger code budget would have given this stage different (faster) code.
    pub(crate) fn budget_limited(&self) -> bool {
        self.budget_limited
    }

    /// One line for [`super::CpuKernel::describe`].
    pub(crate) fn describe(&self, i: usize, stage: &Stage) -> String {
        let slots: Vec<String> = self
            .slots
            .iter()
            .map(|s| match &s.kind {
                SlotKind::Row { source, border } => {
                    format!("{source:?}@{:?} {border}", s.outer_offset)
                }
                SlotKind::OuterInRange => format!("in_range@{:?}", s.outer_offset),
            })
            .collect();
        let count = |f: fn(&InstFacts) -> bool| self.facts.iter().filter(|&x| f(x)).count();
        let unmasked = count(|f| f.unmasked);
        let tree = count(|f| f.tree);
        let raw = count(|f| f.raw_nan);
        // Arithmetic whose NaN is canonicalised by one unsigned minimum (see `sign_clear`).
        let by_min = stage
            .insts
            .iter()
            .enumerate()
            .filter(|&(i, inst)| {
                self.facts[i].sign_clear
                    && !self.facts[i].raw_nan
                    && inst.dtype == DType::F32
                    && matches!(
                        inst.op,
                        Op::Binary(BinaryOp::Add | BinaryOp::Mul | BinaryOp::Div, ..)
                            | Op::Unary(UnaryOp::Sqrt, _)
                            | Op::Cast(_)
                    )
            })
            .count();
        format!(
            "stage {i}: {} ({} insts{}{}), columns dx in [{}, {}], {} slot(s) [{}], interior {}",
            stage.dtype(),
            stage.insts.len(),
            if unmasked > 0 {
                format!(", {unmasked} min/max without NaN masks under a NaN guard")
            } else {
                String::new()
            },
            if tree > 0 {
                format!(", {tree} min/max in compare form")
            } else {
                String::new()
            } + &if raw > 0 {
                format!(", {raw} arithmetic results feeding NaN-safe users without canonical NaN")
            } else {
                String::new()
            } + &if by_min > 0 && self.vectorisable {
                format!(", {by_min} NaN results canonicalised by an unsigned minimum")
            } else {
                String::new()
            } + if self.raw_result {
                ", result stored for NaN-safe later stages without canonical NaN"
            } else {
                ""
            },
            self.min_dx,
            self.max_dx,
            self.slots.len(),
            slots.join(", "),
            if let Some(sp) = &self.shift {
                format!(
                    "vectorised {} (when strides are 1), {} vectors per step with {} \
                     instructions shared across columns by lane shifts{}, + overlapped vector tail",
                    if self.bytes { "I8X16" } else { "F32X4" },
                    sp.blocks,
                    sp.derived,
                    if sp.carry.is_empty() {
                        String::new()
                    } else {
                        format!(" and {} values carried to the next step", sp.carry.len())
                    }
                )
            } else if let Some(w) = &self.row_window {
                format!(
                    "vectorised {} (when strides are 1) + overlapped vector tail; a {} \
                     window of {} rows: {} output rows per step in the multi-row function",
                    if self.bytes { "I8X16" } else { "F32X4" },
                    if w.max { "max" } else { "min" },
                    w.len,
                    w.rows
                )
            } else if self.vectorisable {
                "vectorised F32X4 (when strides are 1) + overlapped vector tail".into()
            } else if self.bytes {
                "vectorised I8X16 (when strides are 1) + overlapped vector tail".into()
            } else {
                "scalar".into()
            }
        ) + &if self.edge_vectors > 0 {
            format!(
                ", edge vectors for the first and last {} columns of rows of {} or more",
                self.edge_shape().lanes * self.edge_vectors,
                self.edge_shape().min_width(self.edge_vectors)
            )
        } else {
            String::new()
        }
    }
}

/// Collects a stage's slots, column offsets and vectorisability.
pub(crate) fn plan_stage(
    kernel: &Kernel,
    si: usize,
    options: &crate::CompileOptions,
    plain_pick: Option<&[bool]>,
    int_picks: bool,
) -> Result<StagePlan, CodegenError> {
    let KernelBody::Stencil { stages } = &kernel.body else {
        return Err(bad("not a stencil kernel"));
    };
    let fault = options.fault;
    let share_columns = !options.no_column_sharing;
    let step_budget = options
        .step_code_budget
        .unwrap_or(super::schedule::STEP_CODE_BUDGET);
    let stage = &stages[si];
    let sr = kernel.rank - 2;
    let mut slots = Vec::new();
    let mut slot_dtype = Vec::new();
    let mut index: HashMap<RowSlot, usize> = HashMap::new();
    let mut slot_of = vec![None; stage.insts.len()];
    let (mut min_dx, mut max_dx) = (0i64, 0i64);
    let mut vectorisable = matches!(stage.dtype(), DType::F32);
    let mut get = |slot: RowSlot, d: DType| -> usize {
        *index.entry(slot.clone()).or_insert_with(|| {
            slots.push(slot);
            slot_dtype.push(d);
            slots.len() - 1
        })
    };
    for (i, inst) in stage.insts.iter().enumerate() {
        if !matches!(inst.dtype, DType::F32 | DType::Bool) {
            vectorisable = false;
        }
        match &inst.op {
            Op::Load {
                source,
                offset,
                border,
            } => {
                let dx = offset[sr - 1];
                min_dx = min_dx.min(dx);
                max_dx = max_dx.max(dx);
                if inst.dtype != DType::F32 {
                    vectorisable = false;
                }
                let slot = RowSlot {
                    kind: SlotKind::Row {
                        source: *source,
                        border: *border,
                    },
                    outer_offset: offset[..sr - 1].to_vec(),
                };
                slot_of[i] = Some(get(slot, inst.dtype));
            }
            Op::InRange(offset) => {
                let dx = offset[sr - 1];
                min_dx = min_dx.min(dx);
                max_dx = max_dx.max(dx);
                let outer = &offset[..sr - 1];
                // At outer offset zero the output row itself is inside the shape.
                if outer.iter().any(|&o| o != 0) {
                    let slot = RowSlot {
                        kind: SlotKind::OuterInRange,
                        outer_offset: outer.to_vec(),
                    };
                    slot_of[i] = Some(get(slot, DType::Bool));
                }
            }
            _ => {}
        }
    }
    let mut facts = analyse(stage, fault, plain_pick);
    for (f, slot) in facts.iter_mut().zip(slot_of) {
        f.slot = slot;
    }
    let bytes = !vectorisable && super::bytevec::supported(stage);
    // Integer picks only replace plain picks, and not under a planted fault.
    let int_picks = int_picks && fault.is_none();
    let small_budget = step_budget <= super::schedule::STEP_CODE_BUDGET;
    let carry =
        !options.no_carried_values && (!small_budget || stage.insts.len() <= CARRY_FIRST_MAX_INSTS);
    // Shared steps on either vector path (the byte path's codegen choices are per
    // instruction too: only the planted fault's swaps, which the flags carry).
    let lanes = vector_lanes(vectorisable, bytes);
    // A big byte stage's shared steps come with a one-vector loop for its leftover
    // columns (see `emit_row`): under the first compile's budget it is left unshared, and
    // the background compile shares it (u8 median 5x5: 2.6 ms first compile instead of 4.8).
    let big_bytes_first = bytes && small_budget && stage.insts.len() > CARRY_FIRST_MAX_INSTS;
    let shift = match lanes {
        Some(_) if big_bytes_first => None,
        Some(lanes) if share_columns => {
            let flags: Vec<[bool; 5]> = facts.iter().map(InstFacts::codegen_flags).collect();
            super::shift::plan(stage, &flags, step_budget, carry, lanes)
        }
        _ => None,
    };
    let raw_result = fault.is_none() && raw_result(stages, si);
    let row_window = if vectorisable || bytes {
        super::rowblock::detect(stage, &slots, &facts, int_picks, fault)
    } else {
        None
    };
    // Edge vectors: for the vector loop of a stage with border columns, every column
    // offset within reach, when the loop is plain or shares work in steps of 4 or more
    // vectors with at most 96 instructions (or is compiled in the background, below). Not
    // under a planted fault, which targets the scalar border path.
    // Two vectors per end only above the default step budget (the background compile of a
    // tiered kernel): for opening 15x15 they took the first compile from 4.4–4.8 to
    // 5.1–5.5 ms, past the 5 ms a first compile should take.
    // The byte path takes one 16-column vector per end (reach up to 16 columns).
    let shape = edge::Shape::of_path(bytes);
    let reach = shape.vectors_for(min_dx, max_dx);
    let k = reach.filter(|&k| k == 1 || !small_budget).unwrap_or(0);
    let edge = !options.no_edge_vectors
        && (vectorisable || bytes)
        && k > 0
        && (min_dx < 0 || max_dx > 0)
        && shift.as_ref().is_none_or(|sp| {
            (sp.blocks >= super::schedule::ONE_VECTOR_LOOP_MIN_BLOCKS
                && stage.insts.len() <= EDGE_SHARED_MAX_INSTS)
                // Shared stages in the background compile, big ones included (the first
                // compile runs their border columns in the split-off scalar function):
                // u8 5x5 median 1.45-1.5x at 2048²; f32 5x5 median 2x on 32² planes,
                // 1.15-1.25x on 8x3x256², within noise at 2048².
                || !small_budget
        })
        && fault.is_none()
        && stage.insts.iter().all(|inst| match &inst.op {
            Op::Load { offset, border, .. } => [Side::Left, Side::Right].iter().all(|&side| {
                (0..k).all(|v| shape.load_lanes(side, v, offset[sr - 1], border).is_some())
            }),
            _ => true,
        });
    let edge_vectors = if edge { k } else { 0 };
    // Held back by the budget: capped steps, no carried values, or edge vectors of a stage
    // reaching past 4 columns (a bigger budget runs two per end; under this one it runs
    // none). Over-reporting costs a background compile; under-reporting, a faster kernel.
    let budget_limited = (big_bytes_first && share_columns)
        || shift
            .as_ref()
            .is_some_and(|sp| sp.capped || (!carry && !options.no_carried_values))
        || (small_budget
            && reach.is_some_and(|r| r > 1)
            && vectorisable
            && !options.no_edge_vectors
            && fault.is_none());
    let mut plan = StagePlan {
        edge_vectors,
        budget_limited,
        row_window,
        shift,
        int_picks,
        raw_result,
        slots,
        slot_dtype,
        facts,
        min_dx,
        max_dx,
        vectorisable,
        bytes,
        order: emit_order(stage),
    };
    // Not for big unshared stages, whose border columns are in a function of their own
    // (inline edge vectors would cost compile time).
    if plan.shift.is_none() && split_border(&plan, stage) {
        plan.edge_vectors = 0;
    }
    Ok(plan)
}

/// Columns per vector of a stage's interior: 4 on `F32X4`, 16 on the byte path, `None`
/// when it runs scalar.
pub(super) fn vector_lanes(vectorisable: bool, bytes: bool) -> Option<i64> {
    if vectorisable {
        Some(4)
    } else if bytes {
        Some(super::bytevec::LANES)
    } else {
        None
    }
}

/// Whether a stage is big enough to compile its border columns as a separate function
/// with cheaper code generation (the border body is about as large as the vector body, and
/// register allocation dominates compile time; a call per row costs little next to a big
/// body, but would show on small stages over narrow rows).
pub(crate) fn split_border(plan: &StagePlan, stage: &Stage) -> bool {
    let n = stage.insts.len();
    // Few border columns per row (a narrow window along the row): worth it from fewer
    // instructions on. Not for a purely vertical stage: it has no border columns on unit
    // strides, and splitting it measured 20% slower on a 15x1 min (erosion 15x15, 1 thread:
    // 13.5 ms split, 11.1 ms not; the cause was not pinned down: moving the call out of
    // the row loop did not help the stages that are split).
    let span = plan.max_dx - plan.min_dx;
    let narrow = span > 0 && span <= SPLIT_BORDER_NARROW_SPAN;
    n > SPLIT_BORDER_INSTS || (narrow && n > SPLIT_BORDER_NARROW_INSTS)
}

/// The order in which `body` emits a stage's instructions: program order, except that each
/// load is emitted just before its first user (Cranelift keeps the emission order, so
/// loading all taps up front would keep them all live at once and spill).
pub(super) fn emit_order(stage: &Stage) -> Vec<usize> {
    let n = stage.insts.len();
    let mut order = Vec::with_capacity(n);
    let mut done = vec![false; n];
    let is_load = |j: usize| matches!(stage.insts[j].op, Op::Load { .. });
    for (i, inst) in stage.insts.iter().enumerate() {
        if is_load(i) {
            continue;
        }
        let ops: &[crate::kernel::ValueId] = match &inst.op {
            Op::Unary(_, a) | Op::Cast(a) => std::slice::from_ref(a),
            Op::Binary(_, a, b) => &[*a, *b][..],
            Op::Select(c, a, b) => &[*c, *a, *b][..],
            _ => &[],
        };
        for o in ops {
            let j = o.0 as usize;
            if j < n && is_load(j) && !done[j] {
                done[j] = true;
                order.push(j);
            }
        }
        done[i] = true;
        order.push(i);
    }
    // Loads nothing uses (or that are the result), in program order.
    let mut rest: Vec<usize> = (0..n).filter(|&j| !done[j]).collect();
    order.append(&mut rest);
    order
}
