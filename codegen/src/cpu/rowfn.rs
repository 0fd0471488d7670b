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
//!   [`split_border`]), called once per row.
//!
//! Float min/max run on order keys, or in compare form inside pure min or max trees (see
//! [`tree_form`] and `values::Tree`).

use std::collections::{BTreeMap, HashMap};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, BlockArg, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use super::bytevec;
use super::edge::{self, Anchor, LaneSource, Side};
use super::values::{arg, mem, Em, Val};
use super::{esize, RowSlot, SlotKind};
use crate::kernel::{Kernel, KernelBody, Op, Source, Stage};
use crate::{CodegenError, Fault};

fn bad(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(msg.into())
}

/// Stages of at most this many instructions get their vector loop unrolled by two.
const UNROLL_MAX_INSTS: usize = 16;

/// Stages of more instructions compile their border columns separately (see
/// [`split_border`]).
const SPLIT_BORDER_INSTS: usize = 96;

/// ... or more than this many, when the stage's column offsets span at most
/// [`SPLIT_BORDER_NARROW_SPAN`] (few border columns per row).
const SPLIT_BORDER_NARROW_INSTS: usize = 24;

/// See [`SPLIT_BORDER_NARROW_INSTS`].
const SPLIT_BORDER_NARROW_SPAN: i64 = 4;

/// Stages sharing work between columns take edge vectors (see `edge`) up to this many
/// instructions (two more vector bodies in the row function: compile time).
pub(crate) const EDGE_SHARED_MAX_INSTS: usize = 96;

/// Under the default step budget (a kernel's first compile), stages carry values between
/// steps of their shared loop (see `shift`) only up to this many instructions: the
/// carried values' first computation and their live ranges cost compile time (5x5 median,
/// 290 instructions: 2.64 -> 3.28 ms). The background compile carries them in every stage.
const CARRY_FIRST_MAX_INSTS: usize = 96;

/// Checks that every stage of a stencil kernel is well typed, so that code generation
/// never meets an inconsistent program (see [`crate::validate::check_stencil`]).
pub(crate) fn validate(kernel: &Kernel) -> Result<(), CodegenError> {
    crate::validate::check_stencil(kernel).map_err(bad)
}

/// What code generation needs to know about one stage.
pub(crate) struct StagePlan {
    /// The row pointers, in argument order.
    pub(crate) slots: Vec<RowSlot>,
    /// Dtype of each `Row` slot's elements (`Bool` for `OuterInRange`).
    slot_dtype: Vec<DType>,
    /// Per instruction: its slot (loads; in-range tests with an outer offset).
    slot_of: Vec<Option<usize>>,
    /// Smallest and largest column offset (both include 0).
    min_dx: i64,
    max_dx: i64,
    /// Whether the interior can run on `F32X4`.
    vectorisable: bool,
    /// Whether the interior can run on `I8X16` (every value u8 or bool, see `bytevec`).
    bytes: bool,
    /// Per instruction: min/max exchanged (the planted comparator fault).
    swapped: Vec<bool>,
    /// Per instruction: a float min/max under a dominating NaN guard, computed without its
    /// NaN mask (see `nanguard`).
    unmasked: Vec<bool>,
    /// Per instruction: a float min/max computed in compare form (see [`tree_form`]).
    tree: Vec<bool>,
    /// Per instruction: a float min/max of clean values, one plain pick (only in the clean
    /// kernel, see `clean`).
    plain_pick: Vec<bool>,
    /// Emission order of the instructions (see [`emit_order`]).
    order: Vec<usize>,
    /// Work shared between neighbouring columns on the `F32X4` interior (see `shift`).
    shift: Option<super::shift::ShiftPlan>,
    /// Per instruction: float arithmetic whose NaN results need not be canonical (see
    /// [`raw_nan`]).
    raw_nan: Vec<bool>,
    /// Plain picks of f32 vectors are integer picks (the specialisation for clean inputs
    /// with clear sign bits, see `Em::int_picks`).
    int_picks: bool,
    /// Per instruction: a float value that is a NaN or has a clear sign bit (see
    /// [`sign_clear`]).
    sign_clear: Vec<bool>,
    /// The stage's result may be stored with a NaN as the hardware gives it (see
    /// [`raw_result`]).
    pub(crate) raw_result: bool,
    /// A min/max window along the run axis, computed in blocks of rows by the multi-row
    /// function (see `rowblock`).
    row_window: Option<super::rowblock::RowWindow>,
    /// Edge vectors per end of a wide enough row (see `edge`; 0: none): the first and last
    /// `4 * edge_vectors` columns run as vectors instead of scalar border columns.
    edge_vectors: i64,
    /// The step code budget held this stage's code back: smaller shared steps, no values
    /// carried between steps, or no edge vectors where two per end would reach, so a
    /// compile under a bigger budget gives different (faster) code.
    budget_limited: bool,
}

impl StagePlan {
    /// Columns per vector step of the interior, when it is vectorised.
    fn lanes(&self) -> Option<i64> {
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

    /// Whether wide enough rows run edge vectors instead of scalar border columns.
    pub(crate) fn uses_edge_vectors(&self) -> bool {
        self.edge_vectors > 0
    }

    /// The geometry of the stage's edge vectors (16 lanes on the byte path).
    fn edge_shape(&self) -> edge::Shape {
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
        let unmasked = self.unmasked.iter().filter(|&&u| u).count();
        let tree = self.tree.iter().filter(|&&u| u).count();
        let raw = self.raw_nan.iter().filter(|&&u| u).count();
        // Arithmetic whose NaN is canonicalised by one unsigned minimum (see `sign_clear`).
        let by_min = stage
            .insts
            .iter()
            .enumerate()
            .filter(|&(i, inst)| {
                self.sign_clear[i]
                    && !self.raw_nan[i]
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
        .unwrap_or(super::shift::STEP_CODE_BUDGET);
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
    let mut swapped = vec![false; stage.insts.len()];
    if fault == Some(Fault::SwapComparator) {
        // First (in instruction order of the later half) min/max pair over the same operands.
        let mut seen: HashMap<(bool, u32, u32), usize> = HashMap::new();
        for (i, inst) in stage.insts.iter().enumerate() {
            let (is_max, a, b) = match inst.op {
                Op::Binary(BinaryOp::Min, a, b) => (false, a.0, b.0),
                Op::Binary(BinaryOp::Max, a, b) => (true, a.0, b.0),
                _ => continue,
            };
            let key = (a.min(b), a.max(b));
            if let Some(&j) = seen.get(&(!is_max, key.0, key.1)) {
                swapped[i] = true;
                swapped[j] = true;
                break;
            }
            seen.entry((is_max, key.0, key.1)).or_insert(i);
        }
    }
    let unmasked = if fault.is_some() {
        vec![false; stage.insts.len()]
    } else {
        super::nanguard::unmasked(stage)
    };
    let bytes = !vectorisable && super::bytevec::supported(stage);
    let tree = tree_form(stage);
    let plain_pick: Vec<bool> = match plain_pick {
        Some(p) if p.len() == stage.insts.len() => p.to_vec(),
        _ => vec![false; stage.insts.len()],
    };
    // Integer picks only replace plain picks, and not under a planted fault.
    let int_picks = int_picks && fault.is_none();
    let raw_nan = if fault.is_some() {
        vec![false; stage.insts.len()]
    } else {
        raw_nan(stage)
    };
    let small_budget = step_budget <= super::shift::STEP_CODE_BUDGET;
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
            let flags: Vec<[bool; 5]> = (0..stage.insts.len())
                .map(|i| [unmasked[i], tree[i], swapped[i], raw_nan[i], plain_pick[i]])
                .collect();
            super::shift::plan(stage, &flags, step_budget, carry, lanes)
        }
        _ => None,
    };
    let raw_result = fault.is_none() && raw_result(stages, si);
    let row_window = if vectorisable || bytes {
        super::rowblock::detect(stage, &slots, &slot_of, &plain_pick, int_picks, fault)
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
            (sp.blocks >= super::shift::ONE_VECTOR_LOOP_MIN_BLOCKS
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
        raw_nan,
        sign_clear: sign_clear(stage),
        int_picks,
        raw_result,
        slots,
        slot_dtype,
        slot_of,
        min_dx,
        max_dx,
        vectorisable,
        bytes,
        swapped,
        unmasked,
        tree,
        plain_pick,
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
fn vector_lanes(vectorisable: bool, bytes: bool) -> Option<i64> {
    if vectorisable {
        Some(4)
    } else if bytes {
        Some(super::bytevec::LANES)
    } else {
        None
    }
}

/// Whether stage `si`'s result may be stored with a NaN as the hardware gives it: it is not
/// the kernel's output, and in every later stage each load of it is not that stage's result
/// and feeds only float min/max, comparisons and NaN/finiteness tests, which give the same
/// bits for any NaN operand. (Only a min tree has a raw form that saves work: see
/// `Em::result_value`.)
pub(crate) fn raw_result(stages: &[Stage], si: usize) -> bool {
    if si + 1 >= stages.len()
        || !stages[si].insts[stages[si].result.0 as usize]
            .dtype
            .is_float()
    {
        return false;
    }
    stages[si + 1..].iter().all(|st| {
        let loads: Vec<usize> = st
            .insts
            .iter()
            .enumerate()
            .filter(|(_, inst)| {
                matches!(inst.op, Op::Load { source: Source::Stage(k), .. } if k as usize == si)
            })
            .map(|(i, _)| i)
            .collect();
        if loads.contains(&(st.result.0 as usize)) {
            return false;
        }
        st.insts.iter().all(|inst| {
            let operands: Vec<u32> = match inst.op {
                Op::Unary(_, a) | Op::Cast(a) => vec![a.0],
                Op::Binary(_, a, b) => vec![a.0, b.0],
                Op::Select(c, a, b) => vec![c.0, a.0, b.0],
                _ => Vec::new(),
            };
            let safe = matches!(
                inst.op,
                Op::Binary(
                    BinaryOp::Min
                        | BinaryOp::Max
                        | BinaryOp::Lt
                        | BinaryOp::Le
                        | BinaryOp::Gt
                        | BinaryOp::Ge
                        | BinaryOp::Eq
                        | BinaryOp::Ne,
                    _,
                    _
                ) | Op::Unary(UnaryOp::IsNan | UnaryOp::IsFinite, _)
            );
            safe || !operands.iter().any(|&o| loads.contains(&(o as usize)))
        })
    })
}

/// Which float arithmetic instructions may leave a NaN result as the hardware gives it
/// instead of the canonical NaN: those that are not the stage's result and whose every user
/// gives the same bits for any NaN operand: float arithmetic, neg, abs and sqrt (a NaN
/// operand makes their result NaN, which they canonicalise or, being raw themselves, pass
/// on to users of the same kind), min/max (their NaN test is an unordered compare, their NaN
/// result canonical), comparisons and NaN/finiteness tests (no payload in a bool), and casts
/// (canonical after a float conversion, payload-free to u8 and bool). A select passes its
/// operand's bits on, so a value it selects is always canonical. The stage's bits are
/// unchanged: only NaNs that no output can show skip the canonicalisation.
pub(crate) fn raw_nan(stage: &Stage) -> Vec<bool> {
    let arith = |op: &Op| {
        matches!(
            op,
            Op::Unary(UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt, _)
                | Op::Binary(
                    BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div,
                    _,
                    _
                )
                | Op::Cast(_)
        )
    };
    let mut ok: Vec<bool> = stage
        .insts
        .iter()
        .map(|inst| inst.dtype.is_float() && arith(&inst.op))
        .collect();
    if let Some(r) = ok.get_mut(stage.result.0 as usize) {
        *r = false;
    }
    for inst in &stage.insts {
        // Users that pass an operand's bits on: a select's value operands.
        if let Op::Select(_, a, b) = inst.op {
            ok[a.0 as usize] = false;
            ok[b.0 as usize] = false;
        }
    }
    // Every other user kind is payload-free or NaN-propagating (see above).
    ok
}

/// Which float instructions give a NaN or a value with a clear sign bit (`+0` up to
/// `+inf`), whatever the inputs: a square `x * x`; a sum, product or quotient of two such
/// values (`+0 + +0 = +0`, and any NaN they make is allowed); the square root, absolute
/// value, min, max or select of such values; a cast from such a float or from u8/bool;
/// constants with a clear sign. The code generator canonicalises their arithmetic's NaN
/// with one unsigned minimum (see `Em::canon`); the bits are those of the usual test.
pub(crate) fn sign_clear(stage: &Stage) -> Vec<bool> {
    let mut clear = vec![false; stage.insts.len()];
    for (i, inst) in stage.insts.iter().enumerate() {
        if !inst.dtype.is_float() {
            continue;
        }
        let c = |v: &crate::kernel::ValueId| clear[v.0 as usize];
        clear[i] = match &inst.op {
            Op::Binary(BinaryOp::Mul, a, b) if a == b => true,
            Op::Binary(
                BinaryOp::Add | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Min | BinaryOp::Max,
                a,
                b,
            ) => c(a) && c(b),
            Op::Unary(UnaryOp::Sqrt, a) => c(a),
            Op::Unary(UnaryOp::Abs, _) => true,
            Op::Select(_, a, b) => c(a) && c(b),
            Op::Cast(a) => match stage.insts[a.0 as usize].dtype {
                DType::U8 | DType::Bool => true,
                d if d.is_float() => c(a),
                _ => false,
            },
            Op::Const(Scalar::F32(bits)) => bits >> 31 == 0,
            Op::Const(Scalar::F64(bits)) => bits >> 63 == 0,
            _ => false,
        };
    }
    clear
}

/// Which float min/max instructions run in compare form (`a < b ? a : b`, one `minps`, plus
/// a bits accumulator for the sign of zero) rather than on order keys: those in pure min
/// (or pure max) trees. An instruction qualifies when none of its operands also feeds the
/// opposite op (a comparator pair shares its key conversions, which keys do best), every
/// min/max operand is a tree of the same kind, and every min/max user is one too (so no
/// key-form consumer has to decode it). Either form gives the same bits; this only picks
/// the cheaper one.
pub(crate) fn tree_form(stage: &Stage) -> Vec<bool> {
    let n = stage.insts.len();
    let minmax = |i: usize| -> Option<(bool, u32, u32)> {
        let inst = &stage.insts[i];
        if !inst.dtype.is_float() {
            return None;
        }
        match inst.op {
            Op::Binary(BinaryOp::Min, a, b) => Some((false, a.0, b.0)),
            Op::Binary(BinaryOp::Max, a, b) => Some((true, a.0, b.0)),
            _ => None,
        }
    };
    // Values used as an operand of a min (`[0]`) or of a max (`[1]`).
    let mut feeds = vec![[false; 2]; n];
    for i in 0..n {
        if let Some((max, a, b)) = minmax(i) {
            feeds[a as usize][max as usize] = true;
            feeds[b as usize][max as usize] = true;
        }
    }
    let mut tree: Vec<bool> = (0..n)
        .map(|i| match minmax(i) {
            Some((max, a, b)) => {
                !feeds[a as usize][!max as usize] && !feeds[b as usize][!max as usize]
            }
            None => false,
        })
        .collect();
    // Remove instructions with a min/max operand or user outside the trees of their kind,
    // until nothing changes.
    loop {
        let mut changed = false;
        for i in 0..n {
            let Some((max, a, b)) = minmax(i) else {
                continue;
            };
            for o in [a as usize, b as usize] {
                if let Some((omax, ..)) = minmax(o) {
                    let ok = tree[o] && omax == max;
                    if tree[i] && !ok {
                        tree[i] = false;
                        changed = true;
                    }
                    if tree[o] && !(tree[i] && omax == max) {
                        tree[o] = false;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return tree;
        }
    }
}

/// Run-time values available everywhere in the function (defined in the entry block).
struct RowCtx {
    /// Pointer per slot.
    ptr: Vec<Value>,
    /// Column stride in bytes per `Row` slot.
    step: Vec<Value>,
    /// The in-range byte per `OuterInRange` slot.
    flag: Vec<Value>,
    width: Value,
    width_m1: Value,
}

/// One stage's program and what emitting it needs anywhere in a row function: its plan,
/// the function's run-time row values, and the planted fault (tests of the fuzzer only).
#[derive(Clone, Copy)]
struct StageCode<'a> {
    stage: &'a Stage,
    plan: &'a StagePlan,
    ctx: &'a RowCtx,
    fault: Option<Fault>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// One column, any stride; out-of-range columns possible: remap under the border
    /// mode (a compare and a branch per load for columns inside the row).
    Border,
    /// Every column in range, four columns, stride 1.
    Vector,
    /// Edge vector `v` from one end of a row of at least `edge::Shape::min_width`, stride 1 (see
    /// `edge`).
    Edge(Side, i64),
}

fn clamp_col(b: &mut FunctionBuilder, j: Value, ctx: &RowCtx) -> Value {
    let zero = b.ins().iconst(types::I64, 0);
    let t = b.ins().smin(j, ctx.width_m1);
    b.ins().smax(t, zero)
}

/// `j.rem_euclid(n)` for `n >= 1`.
fn rem_euclid(b: &mut FunctionBuilder, j: Value, n: Value) -> Value {
    let r = b.ins().srem(j, n);
    let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
    let zero = b.ins().iconst(types::I64, 0);
    let add = b.ins().select(neg, n, zero);
    b.ins().iadd(r, add)
}

/// `kiln_ir::semantics::remap_index` for a non-constant mode (identity inside the range).
fn remap(
    b: &mut FunctionBuilder,
    j: Value,
    border: &Border,
    ctx: &RowCtx,
    fault: Option<Fault>,
) -> Value {
    let w = ctx.width;
    let m = match border {
        Border::Constant(_) | Border::Nearest => clamp_col(b, j, ctx),
        Border::Wrap => rem_euclid(b, j, w),
        Border::Reflect => {
            let n2 = b.ins().ishl_imm_u(w, 1);
            let m = rem_euclid(b, j, n2);
            let hi = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, m, w);
            let back = b.ins().isub(n2, m);
            let back = b.ins().iadd_imm_s(back, -1);
            b.ins().select(hi, back, m)
        }
        Border::Mirror => {
            let n2 = b.ins().ishl_imm_u(w, 1);
            let p = b.ins().iadd_imm_s(n2, -2);
            let one = b.ins().iconst(types::I64, 1);
            let p = b.ins().smax(p, one);
            let m = rem_euclid(b, j, p);
            let hi = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, m, w);
            let back = b.ins().isub(p, m);
            b.ins().select(hi, back, m)
        }
    };
    if fault == Some(Fault::WrongBorderRightEdge) && !matches!(border, Border::Constant(_)) {
        let right = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, j, w);
        b.ins().select(right, ctx.width_m1, m)
    } else {
        m
    }
}

/// An edge-vector load (see `edge`): the anchor vectors and constant its lanes read, then
/// one lane pick. `p` points at column 0 of the row, `width` is its length.
fn edge_load(
    em: &mut Em,
    width: Value,
    p: Value,
    ty: Type,
    border: &Border,
    lanes: &[LaneSource; 4],
) -> Result<Value, CodegenError> {
    let (anchors, picks) = edge::Shape::F32.anchors(lanes);
    let mut vals: Vec<Value> = Vec::with_capacity(anchors.len());
    for &anchor in &anchors {
        vals.push(match anchor {
            Anchor::Left(k) => em.b.ins().load(ty, mem(), p, (16 * k) as i32),
            Anchor::Right(k) => {
                let end = em.b.ins().ishl_imm_u(width, 2);
                let end = em.b.ins().iadd(p, end);
                em.b.ins().load(ty, mem(), end, (16 * k - 64) as i32)
            }
            Anchor::Constant => {
                let Border::Constant(c) = border else {
                    return Err(bad("constant lanes without a constant border"));
                };
                let mut c = em.constant(*c)?;
                em.plain(&mut c)
            }
        });
    }
    let picks: [(usize, u8); 4] = picks
        .try_into()
        .map_err(|_| bad("an F32X4 edge load has four lanes"))?;
    let identity = [(0, 0), (0, 1), (0, 2), (0, 3)];
    Ok(
        if vals.len() == 1 && (picks == identity || anchors[0] == Anchor::Constant) {
            vals[0]
        } else {
            em.pick_lanes(&vals, picks)
        },
    )
}

/// The values of one vector (or one column) of a stage program, filled instruction by
/// instruction.
struct Frame {
    /// Per instruction: its value, once emitted.
    vals: Vec<Option<Val>>,
    /// Bools known at code-generation time on this path (constants, in-range tests in the
    /// interior); selects and logic on them are folded.
    known: Vec<Option<bool>>,
}

impl Frame {
    fn new(n: usize) -> Frame {
        Frame {
            vals: vec![None; n],
            known: vec![None; n],
        }
    }

    /// The value of an operand (emitted before its users, by construction of every order).
    fn get(&self, v: &crate::kernel::ValueId) -> Result<Val, CodegenError> {
        self.vals
            .get(v.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| bad("operand used before it is computed"))
    }

    /// Writes back an operand whose cached forms (key, NaN mask) grew while in use.
    fn put(&mut self, v: &crate::kernel::ValueId, val: Val) {
        self.vals[v.0 as usize] = Some(val);
    }
}

/// Emits instruction `i` of the stage at column `x` (four columns on the vector path) into
/// `frame`, whose operands are already there.
fn emit_at(
    em: &mut Em,
    code: &StageCode,
    frame: &mut Frame,
    i: usize,
    x: Value,
    path: Path,
) -> Result<(), CodegenError> {
    let StageCode {
        stage,
        plan,
        ctx,
        fault,
    } = *code;
    let inst = &stage.insts[i];
    let mut kn: Option<bool> = None;
    em.raw_nan = plan.raw_nan[i];
    em.sign_clear = plan.sign_clear[i];
    if let Some((v, k)) = fold_known(em, &inst.op, &frame.vals, &frame.known)? {
        frame.vals[i] = Some(v);
        frame.known[i] = k;
        return Ok(());
    }
    let v = match &inst.op {
        Op::Load { offset, border, .. } => {
            let s = plan.slot_of[i].ok_or_else(|| bad("load without slot"))?;
            let dx = *offset.last().expect("validated offset");
            let d = inst.dtype;
            let ty = em.ty(d);
            let p = ctx.ptr[s];
            let lanes = match path {
                Path::Edge(side, v) => {
                    let lanes = edge::load_lanes(side, v, dx, border)
                        .ok_or_else(|| bad("edge vector for a load it cannot compute"))?;
                    (!edge::is_direct(side, v, dx, &lanes)).then_some(lanes)
                }
                _ => None,
            };
            let v = match path {
                Path::Edge(..) if lanes.is_some() => {
                    let lanes = lanes.expect("checked");
                    edge_load(em, ctx.width, p, ty, border, &lanes)?
                }
                Path::Vector | Path::Edge(..) => {
                    let base = em.b.ins().ishl_imm_u(x, 2);
                    let addr = em.b.ins().iadd(p, base);
                    match i32::try_from(dx * 4) {
                        Ok(o) => em.b.ins().load(ty, mem(), addr, o),
                        Err(_) => {
                            let addr = em.b.ins().iadd_imm_s(addr, dx * 4);
                            em.b.ins().load(ty, mem(), addr, 0)
                        }
                    }
                }
                Path::Border => {
                    let j = em.b.ins().iadd_imm_s(x, dx);
                    let m = if dx == 0 {
                        // `x` itself is always a column of the row.
                        j
                    } else if matches!(border, Border::Constant(_) | Border::Nearest) {
                        remap(em.b, j, border, ctx, fault)
                    } else {
                        // In range (the interior columns, strided or narrow rows): no
                        // division; out of range: the border's remap.
                        let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                        let slow = em.b.create_block();
                        let join = em.b.create_block();
                        em.b.append_block_param(join, types::I64);
                        em.b.ins().brif(inr, join, &[arg(j)], slow, &[]);
                        em.b.switch_to_block(slow);
                        let r = remap(em.b, j, border, ctx, fault);
                        em.b.ins().jump(join, &[arg(r)]);
                        em.b.switch_to_block(join);
                        em.b.block_params(join)[0]
                    };
                    let off = em.b.ins().imul(m, ctx.step[s]);
                    let addr = em.b.ins().iadd(p, off);
                    let v = em.b.ins().load(ty, mem(), addr, 0);
                    if let Border::Constant(c) = border {
                        let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                        let mut c = em.constant(*c)?;
                        let cv = em.plain(&mut c);
                        em.b.ins().select(inr, v, cv)
                    } else {
                        v
                    }
                }
            };
            Val::plain(d, v)
        }
        Op::InRange(offset) => {
            let dx = *offset.last().expect("validated offset");
            let outer = plan.slot_of[i].map(|s| ctx.flag[s]);
            let r = match path {
                Path::Border => {
                    let j = em.b.ins().iadd_imm_s(x, dx);
                    let inr = em.b.ins().icmp(IntCC::UnsignedLessThan, j, ctx.width);
                    match outer {
                        Some(f) => em.b.ins().band(inr, f),
                        None => inr,
                    }
                }
                Path::Edge(side, v) if edge::in_range_lanes(side, v, dx) != [true; 4] => {
                    let lanes = edge::in_range_lanes(side, v, dx);
                    let bytes: Vec<u8> = lanes
                        .iter()
                        .flat_map(|&t| [if t { 0xff } else { 0 }; 4])
                        .collect();
                    let handle = em.b.func.dfg.constants.insert(bytes.into());
                    let mask = em.b.ins().vconst(types::I32X4, handle);
                    match outer {
                        Some(f) => {
                            let f = em.bool_from_i8(f);
                            em.b.ins().band(mask, f)
                        }
                        None => {
                            if lanes == [false; 4] {
                                kn = Some(false);
                            }
                            mask
                        }
                    }
                }
                _ => match outer {
                    Some(f) => em.bool_from_i8(f),
                    None => {
                        kn = Some(true);
                        let mut c = em.constant(Scalar::Bool(true))?;
                        em.plain(&mut c)
                    }
                },
            };
            Val::plain(DType::Bool, r)
        }
        Op::Const(c) => {
            if let Scalar::Bool(b) = c {
                kn = Some(*b);
            }
            em.constant(*c)?
        }
        Op::Unary(op, a) => {
            let mut va = frame.get(a)?;
            let r = em.unary(*op, &mut va)?;
            frame.put(a, va);
            r
        }
        Op::Binary(op @ (BinaryOp::Min | BinaryOp::Max), a, c) if plan.plain_pick[i] => {
            let (mut va, mut vc) = (frame.get(a)?, frame.get(c)?);
            let r = em.plain_pick(*op == BinaryOp::Max, &mut va, &mut vc);
            frame.put(a, va);
            frame.put(c, vc);
            r
        }
        Op::Binary(op, a, c) => {
            let (mut va, mut vc) = (frame.get(a)?, frame.get(c)?);
            let r = em.binary(
                *op,
                &mut va,
                &mut vc,
                plan.swapped[i],
                !plan.unmasked[i],
                plan.tree[i],
            )?;
            frame.put(a, va);
            frame.put(c, vc);
            r
        }
        Op::Select(c, a, e) => {
            let (mut vc, mut va, mut ve) = (frame.get(c)?, frame.get(a)?, frame.get(e)?);
            let r = em.select(&mut vc, &mut va, &mut ve)?;
            frame.put(c, vc);
            frame.put(a, va);
            frame.put(e, ve);
            r
        }
        Op::Cast(a) => {
            let mut va = frame.get(a)?;
            let r = em.cast(&mut va, inst.dtype)?;
            frame.put(a, va);
            r
        }
    };
    em.raw_nan = false;
    em.sign_clear = false;
    frame.vals[i] = Some(v);
    frame.known[i] = kn;
    Ok(())
}

/// Emits one column (or four) of the stage program at column `x`; returns the plain result.
fn body(
    b: &mut FunctionBuilder,
    code: &StageCode,
    x: Value,
    path: Path,
) -> Result<Value, CodegenError> {
    let StageCode {
        stage, plan, fault, ..
    } = *code;
    let mut em = Em::new(b, path != Path::Border, fault, plan.int_picks);
    let mut frame = Frame::new(stage.insts.len());
    for &i in &plan.order {
        emit_at(&mut em, code, &mut frame, i, x, path)?;
    }
    let mut r = frame.get(&stage.result)?;
    Ok(em.result_value(&mut r, plan.raw_result))
}

/// Emits `sp.blocks` vectors of the stage at columns `x, x + 4, ...` (stride 1,
/// every read in range), taking shift-equivalent values from lane shuffles of neighbouring
/// vectors (see `shift`) and the values of `sp.carry` from `carried` (their plain forms, in
/// that order); `store(b, u, value)` writes output vector `u` as soon as it is computed.
/// Returns the plain values the next step carries (`sp.carry` moved by `sp.blocks`
/// vectors).
fn body_shared(
    b: &mut FunctionBuilder,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    x: Value,
    carried: &[Value],
    mut store: impl FnMut(&mut FunctionBuilder, usize, Value),
) -> Result<Vec<Value>, CodegenError> {
    let StageCode {
        stage, plan, fault, ..
    } = *code;
    let mut em = Em::new(b, true, fault, plan.int_picks);
    let mut frames: BTreeMap<i64, (Value, Frame)> = BTreeMap::new();
    for (&(i, v), &val) in sp.carry.iter().zip(carried) {
        let (_, f) = frame_at(&mut em, &mut frames, x, v, stage.insts.len());
        f.vals[i] = Some(Val::plain(stage.insts[i].dtype, val));
    }
    for u in 0..sp.needs.len() {
        for at in sp.needed(u, &plan.order) {
            ensure(&mut em, code, sp, &mut frames, x, at)?;
        }
        let mut r = frames
            .get(&(u as i64))
            .and_then(|f| f.1.vals[stage.result.0 as usize])
            .ok_or_else(|| bad("shared result not computed"))?;
        let p = em.result_value(&mut r, plan.raw_result);
        // Stored at once: Cranelift places pure instructions just before their first
        // side-effecting user, so a store per vector keeps each vector's work together.
        store(em.b, u, p);
    }
    let ahead = sp.blocks as i64;
    carried_values(&mut em, code, sp, &mut frames, x, ahead)
}

/// The plain values of `sp.carry` at vectors moved by `ahead` from step `x`, computing what
/// `frames` does not have yet: `ahead = 0` for the values a row's first step is given,
/// `sp.blocks` for those a step hands to the next.
fn carried_values(
    em: &mut Em,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    frames: &mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    ahead: i64,
) -> Result<Vec<Value>, CodegenError> {
    let mut out = Vec::with_capacity(sp.carry.len());
    for &(i, v) in &sp.carry {
        ensure(em, code, sp, frames, x, (i, v + ahead))?;
        let f = frames
            .get_mut(&(v + ahead))
            .ok_or_else(|| bad("carried value not computed"))?;
        let mut val = f.1.vals[i].ok_or_else(|| bad("carried value not computed"))?;
        let p = em.plain(&mut val);
        f.1.vals[i] = Some(val);
        out.push(p);
    }
    Ok(out)
}

/// The frame of vector `v` of the step at `x`, created (with its column `x + 4v`) on first use.
fn frame_at<'f>(
    em: &mut Em,
    frames: &'f mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    v: i64,
    n: usize,
) -> &'f mut (Value, Frame) {
    frames.entry(v).or_insert_with(|| {
        let xv = em.b.ins().iadd_imm_s(x, 4 * v);
        (xv, Frame::new(n))
    })
}

/// Emits instruction `i` at vector `v` of a shared step and, first, whatever it needs that
/// is not emitted yet (see `ShiftPlan::schedule`).
fn ensure(
    em: &mut Em,
    code: &StageCode,
    sp: &super::shift::ShiftPlan,
    frames: &mut BTreeMap<i64, (Value, Frame)>,
    x: Value,
    at: (usize, i64),
) -> Result<(), CodegenError> {
    let StageCode { stage, .. } = *code;
    let n = stage.insts.len();
    let todo = sp.schedule(stage, at, |(i, v)| {
        frames.get(&v).is_some_and(|f| f.1.vals[i].is_some())
    });
    for (i, v) in todo {
        frame_at(em, frames, x, v, n);
        match sp.derive[i] {
            Some((r, d)) => {
                let (fl, k) = (d.div_euclid(sp.lanes), d.rem_euclid(sp.lanes));
                let get = |frames: &BTreeMap<i64, (Value, Frame)>, w: i64| {
                    frames
                        .get(&w)
                        .and_then(|f| Some((f.1.vals[r]?, f.1.known[r])))
                        .ok_or_else(|| bad("shared value used before it is computed"))
                };
                let (mut lo, known) = get(frames, v + fl)?;
                let val = if k == 0 {
                    lo
                } else {
                    let (mut hi, _) = get(frames, v + fl + 1)?;
                    em.shift_lanes(&mut lo, &mut hi, k as u8)
                };
                if let Some((_, f)) = frames.get_mut(&v) {
                    f.vals[i] = Some(val);
                    f.known[i] = known;
                }
            }
            None => {
                if let Some((xv, f)) = frames.get_mut(&v) {
                    emit_at(em, code, f, i, *xv, Path::Vector)?;
                }
            }
        }
    }
    Ok(())
}

/// The order in which `body` emits a stage's instructions: program order, except that each
/// load is emitted just before its first user (Cranelift keeps the emission order, so
/// loading all taps up front would keep them all live at once and spill).
fn emit_order(stage: &Stage) -> Vec<usize> {
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

/// Folds an instruction whose bool operands make it known without code: a select with a
/// known condition, `and`/`or` with a known side, `not` of a known bool. Returns the value
/// and whether it is itself a known bool.
#[allow(clippy::type_complexity)]
fn fold_known(
    em: &mut Em,
    op: &Op,
    vals: &[Option<Val>],
    known: &[Option<bool>],
) -> Result<Option<(Val, Option<bool>)>, CodegenError> {
    let k = |v: &crate::kernel::ValueId| known.get(v.0 as usize).copied().flatten();
    let val = |v: &crate::kernel::ValueId| -> Result<Val, CodegenError> {
        vals.get(v.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| bad("operand used before it is computed"))
    };
    let konst = |em: &mut Em, b: bool| -> Result<Option<(Val, Option<bool>)>, CodegenError> {
        Ok(Some((em.constant(Scalar::Bool(b))?, Some(b))))
    };
    let pass = |v: &crate::kernel::ValueId| Ok(Some((val(v)?, k(v))));
    match op {
        Op::Select(c, a, e) => match (k(c), k(e)) {
            (Some(true), _) => pass(a),
            (Some(false), _) => pass(e),
            (None, Some(false)) => {
                let mut vc = val(c)?;
                Ok(em.fin_gate(&mut vc, &val(a)?).map(|v| (v, None)))
            }
            _ => Ok(None),
        },
        Op::Binary(BinaryOp::And | BinaryOp::Or, a, b) if val(a)?.dtype == DType::Bool => {
            let is_and = matches!(op, Op::Binary(BinaryOp::And, ..));
            match (k(a), k(b)) {
                (Some(x), _) if x != is_and => konst(em, x),
                (_, Some(x)) if x != is_and => konst(em, x),
                (Some(_), _) => pass(b),
                (_, Some(_)) => pass(a),
                _ => Ok(None),
            }
        }
        Op::Unary(UnaryOp::Not, a) => match k(a) {
            Some(x) => konst(em, !x),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// Parameter types of a [`super::RowsFn`].
pub(crate) fn rows_params() -> [Type; 8] {
    [types::I64; 8]
}

/// Column strides of a stage's slots, loaded once per call.
struct SlotStrides {
    /// Column stride in bytes per `Row` slot (`None` for `OuterInRange` slots).
    step: Vec<Option<Value>>,
    /// Whether every `Row` slot has stride 1 (`None` when there is no `Row` slot).
    unit: Option<Value>,
}

/// Loads each slot's column stride from `strides`.
fn load_strides(b: &mut FunctionBuilder, plan: &StagePlan, strides: Value) -> SlotStrides {
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
fn load_per_slot(b: &mut FunctionBuilder, plan: &StagePlan, words: Value) -> Vec<Value> {
    (0..plan.slots.len())
        .map(|s| b.ins().load(types::I64, mem(), words, (8 * s) as i32))
        .collect()
}

/// The context of one row from its slot pointers: reads each `OuterInRange` slot's byte.
fn row_ctx(
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
/// (see [`build_border`], called once per row through its address) instead of inline.
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

/// A stage's border function, as the row function calls it: through a cell that holds the
/// address of its finalized code, so that the border function and the row function can
/// be compiled at the same time (the compile fills the cell in before it returns the
/// kernel; see `jit::CodeOwner`).
#[derive(Clone)]
pub(crate) struct BorderCall {
    /// The address of the cell (a `usize`) holding the border function's address.
    pub(crate) cell: usize,
    /// Its signature ([`border_params`], no result, the host's C convention).
    pub(crate) sig: cranelift_codegen::ir::Signature,
}

impl BorderCall {
    fn import(&self, b: &mut FunctionBuilder) -> cranelift_codegen::ir::SigRef {
        b.import_signature(self.sig.clone())
    }
}

/// Parameter types of a border function: `rows`, `strides` (as a [`super::RowFn`]), `out`,
/// `out_stride`, `width`, and `xs`: it computes columns `[0, xlo)` and `[xs, W)`.
pub(crate) fn border_params() -> [Type; 6] {
    [types::I64; 6]
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

/// The row's slot pointers in a stack array (for a border call).
fn rows_r(b: &mut FunctionBuilder, plan: &StagePlan, ctx: &RowCtx) -> Value {
    use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
    let n = plan.slots.len().max(1) as u32;
    let ss = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8 * n, 3));
    for (s, &p) in ctx.ptr.iter().enumerate() {
        b.ins().stack_store(types::I64, p, ss, (8 * s) as i32);
    }
    b.ins().stack_addr(types::I64, ss, 0)
}

/// The interior `[xlo, xhi)` of a row of `width` columns: where every `x + dx` is inside.
fn interior(b: &mut FunctionBuilder, plan: &StagePlan, width: Value) -> (Value, Value) {
    let lo_c = b.ins().iconst(types::I64, (-plan.min_dx).max(0));
    let xlo = b.ins().smin(lo_c, width);
    let xhi = b.ins().iadd_imm_s(width, -plan.max_dx.max(0));
    let xhi = b.ins().smax(xhi, xlo);
    (xlo, xhi)
}

/// Emits the scalar loop over columns `[0, xlo)` then `[xs, W)` (remapping column indices),
/// from the current block; jumps to `done`.
fn emit_border_loop(
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
struct RowChoices {
    /// Every stride is 1: the vector interior runs (present when the stage has one).
    vec_ok: Option<Value>,
    /// ... and the row is wide enough for edge vectors (present when the stage uses them).
    edge_ok: Option<Value>,
}

/// Emits one output row (border columns, vector interior, scalar tail) from the current
/// block; jumps to `done` at the end.
fn emit_row(
    b: &mut FunctionBuilder,
    code: &StageCode,
    choices: RowChoices,
    out: Value,
    out_stride: Value,
    done: cranelift_codegen::ir::Block,
    border: Option<(BorderCall, Value)>,
) -> Result<(), CodegenError> {
    let StageCode {
        stage,
        plan,
        ctx,
        fault,
    } = *code;
    let i64t = types::I64;
    let out_d = stage.dtype();
    let (xlo, xhi) = interior(b, plan, ctx.width);
    let lanes_or_1 = plan.lanes().unwrap_or(1);
    let narrow = {
        let span = b.ins().isub(xhi, xlo);
        b.ins().icmp_imm_s(IntCC::SignedLessThan, span, lanes_or_1)
    };
    let read_lo = plan.shift.as_ref().map_or(0, |sp| (-sp.read_lo).max(0));
    let wlo = {
        let c = b.ins().iconst(i64t, read_lo);
        b.ins().smax(c, xlo)
    };
    let width = ctx.width;

    // Columns the vector loop does not cover, `[0, xlo)` then `[xs, W)`, run one scalar
    // body that remaps column indices (identity inside the row): `border_entry(xs)`.
    let border_entry = b.create_block();
    b.append_block_param(border_entry, i64t);
    // Edge vectors replace the scalar border columns of the plain vector loop (see `edge`)
    // when `edge_ok` holds.
    let edge_ok = choices.edge_ok;
    let byte_rows = bytevec::Rows {
        slot_of: &plan.slot_of,
        ptr: &ctx.ptr,
        flag: &ctx.flag,
        swapped: &plan.swapped,
        width: ctx.width,
    };

    if let Some(lanes) = plan.lanes() {
        // Interior `[xlo, xhi)`, `lanes` columns per step when every stride is 1; a last
        // partial step is redone as one full vector that ends at `xhi` (overlapping columns
        // already written with the same values: every column is a pure function of the
        // sources, and `out` overlaps no source row), unless the interior is narrower than
        // one vector.
        let ok = choices
            .vec_ok
            .ok_or_else(|| bad("vector row without its stride test"))?;
        let emit_path =
            |b: &mut FunctionBuilder, x: Value, path: Path| -> Result<(), CodegenError> {
                let v = if plan.bytes {
                    let edge = match path {
                        Path::Edge(side, _) => Some(side),
                        _ => None,
                    };
                    bytevec::body(b, stage, &byte_rows, x, edge)?
                } else {
                    body(b, code, x, path)?
                };
                let off = b.ins().imul_imm_s(x, esize(out_d));
                let addr = b.ins().iadd(out, off);
                b.ins().store(mem(), v, addr, 0);
                Ok(())
            };
        let emit_vec = |b: &mut FunctionBuilder, x: Value| emit_path(b, x, Path::Vector);
        // Edge vectors (see `edge`): on a wide enough row with unit strides, columns
        // `[0, 4k)` before the vector loop and `[W-4k, W)` after it, which then covers
        // `[4k, W-4k)` (inside the interior: every `|dx| <= 4k`).
        let xhi = match edge_ok {
            Some(e) => {
                let w4 = b
                    .ins()
                    .iadd_imm_s(width, -plan.edge_shape().lanes * plan.edge_vectors);
                b.ins().select(e, w4, xhi)
            }
            None => xhi,
        };
        // Enters the vector loop at `entry` from column `xlo`, or, with edge vectors, after
        // the left ones (see below for the column).
        let enter_loop = |b: &mut FunctionBuilder,
                          entry: cranelift_codegen::ir::Block|
         -> Result<(), CodegenError> {
            match edge_ok {
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
                        let x = b.ins().iconst(i64t, first);
                        emit_path(b, x, Path::Edge(Side::Left, v))?;
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
                            .iconst(i64t, plan.edge_shape().lanes * plan.edge_vectors)
                    };
                    b.ins().jump(entry, &[arg(start)]);
                }
            }
            Ok(())
        };
        // The one-vector loop: for every vectorised stage but big shared `F32X4` ones
        // without edge vectors (whose leftover columns, fewer than a step's reach past the
        // row's end, run scalar instead, for compile time). On the byte path a shared step
        // reads up to 16 columns past its last vector: left to the scalar loop, a 5x5
        // median's rows ended in about 14 scalar columns, which took half the kernel's
        // time.
        let one_vector = plan.bytes
            || plan.edge_vectors > 0
            || plan
                .shift
                .as_ref()
                .is_none_or(|sp| sp.blocks >= super::shift::ONE_VECTOR_LOOP_MIN_BLOCKS);
        let vec_hdr = one_vector.then(|| {
            let blk = b.create_block();
            b.append_block_param(blk, i64t);
            blk
        });
        if let Some(sp) = &plan.shift {
            // Shared steps of `blocks` vectors (see `shift`) while every output is in the
            // interior and every read in the row; then the one-vector loop, where there is
            // one; otherwise, when columns are left and the row is wide enough, one last
            // step moved left to end at the last column it can reach (overlapping columns
            // already written with the same values: every column is a pure function of the
            // sources, and `out` overlaps no source row), and the scalar border loop does
            // the rest.
            //
            // Values carried from step to step (`sp.carry`) are parameters of the loop
            // blocks: `wide_first` computes them for a row's first step (and a redone last
            // step), each step computes those of the next.
            let block = sp.blocks as i64 * lanes;
            let wide_entry = b.create_block();
            b.append_block_param(wide_entry, i64t);
            let wide_first = b.create_block();
            b.append_block_param(wide_first, i64t);
            let wide_hdr = b.create_block();
            b.append_block_param(wide_hdr, i64t);
            let wide_body = b.create_block();
            b.append_block_param(wide_body, i64t);
            let wide_tail = b.create_block();
            b.append_block_param(wide_tail, i64t);
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
            enter_loop(b, wide_entry)?;
            b.switch_to_block(wide_entry);
            let x = b.block_params(wide_entry)[0];
            let g = go(b, x);
            b.ins().brif(g, wide_first, &[arg(x)], wide_tail, &[arg(x)]);

            b.switch_to_block(wide_first);
            let x = b.block_params(wide_first)[0];
            let first = if plan.bytes {
                bytevec::carried_first(b, stage, &byte_rows, sp, x)?
            } else {
                let mut em = Em::new(b, true, fault, plan.int_picks);
                let mut frames = BTreeMap::new();
                carried_values(&mut em, code, sp, &mut frames, x, 0)?
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
                    .brif(redo, wide_first, &[arg(xl)], border_entry, &[arg(x)]);
            }

            b.switch_to_block(wide_body);
            let params = b.block_params(wide_body).to_vec();
            let x = params[0];
            let store = |b: &mut FunctionBuilder, u: usize, v: Value| {
                let xu = b.ins().iadd_imm_s(x, u as i64 * lanes);
                let off = b.ins().imul_imm_s(xu, esize(out_d));
                let addr = b.ins().iadd(out, off);
                b.ins().store(mem(), v, addr, 0);
            };
            let next = if plan.bytes {
                bytevec::body_shared(
                    b,
                    stage,
                    &byte_rows,
                    sp,
                    &plan.order,
                    x,
                    &params[1..],
                    store,
                )?
            } else {
                body_shared(b, code, sp, x, &params[1..], store)?
            };
            let xn = b.ins().iadd_imm_s(x, block);
            let args: Vec<_> = std::iter::once(xn).chain(next).map(arg).collect();
            b.ins().jump(wide_hdr, &args);
        } else if let Some(vec_hdr) = vec_hdr {
            if stage.insts.len() <= UNROLL_MAX_INSTS && plan.row_window.is_none() {
                // Small stages: two vectors per step first (more independent work per loop
                // iteration), then the one-vector loop for the rest.
                let hdr2 = b.create_block();
                b.append_block_param(hdr2, i64t);
                let body2 = b.create_block();
                enter_loop(b, hdr2)?;
                b.switch_to_block(hdr2);
                let x = b.block_params(hdr2)[0];
                let x2 = b.ins().iadd_imm_s(x, 2 * lanes);
                let fits = b.ins().icmp(IntCC::SignedLessThanOrEqual, x2, xhi);
                // Leave through a block of its own: it is the one-vector loop's immediate
                // dominator, where Cranelift hoists that loop's invariants. Were it this
                // loop's header, they would run at every step of this loop.
                let exit2 = b.create_block();
                b.append_block_param(exit2, i64t);
                b.ins().brif(fits, body2, &[], exit2, &[arg(x)]);
                b.switch_to_block(exit2);
                let xe = b.block_params(exit2)[0];
                b.ins().jump(vec_hdr, &[arg(xe)]);
                b.switch_to_block(body2);
                emit_vec(b, x)?;
                let x1 = b.ins().iadd_imm_s(x, lanes);
                emit_vec(b, x1)?;
                b.ins().jump(hdr2, &[arg(x2)]);
            } else {
                enter_loop(b, vec_hdr)?;
            }
        }
        if let Some(vec_hdr) = vec_hdr {
            let vec_body = b.create_block();
            b.append_block_param(vec_body, i64t);
            let vec_tail = b.create_block();
            b.append_block_param(vec_tail, i64t);
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
            let redo = b.ins().band_not(left, narrow);
            let xl = b.ins().iadd_imm_s(xhi, -lanes);
            b.ins()
                .brif(redo, vec_body, &[arg(xl)], border_entry, &[arg(x)]);

            b.switch_to_block(vec_body);
            let x = b.block_params(vec_body)[0];
            emit_vec(b, x)?;
            let xn = b.ins().iadd_imm_s(x, lanes);
            b.ins().jump(vec_hdr, &[arg(xn)]);
        }
    } else {
        b.ins().jump(border_entry, &[arg(xlo)]);
    }

    b.switch_to_block(border_entry);
    let xs = b.block_params(border_entry)[0];
    if let Some(e) = edge_ok {
        // After the vector loop with edge vectors: the right edge vector; otherwise the
        // scalar border columns.
        let right = b.create_block();
        let scalar = b.create_block();
        b.ins().brif(e, right, &[], scalar, &[]);
        b.switch_to_block(right);
        for v in 0..plan.edge_vectors {
            let x = b
                .ins()
                .iadd_imm_s(width, -plan.edge_shape().lanes * (v + 1));
            let val = if plan.bytes {
                bytevec::body(b, stage, &byte_rows, x, Some(Side::Right))?
            } else {
                body(b, code, x, Path::Edge(Side::Right, v))?
            };
            let off = b.ins().imul_imm_s(x, esize(out_d));
            let addr = b.ins().iadd(out, off);
            b.ins().store(mem(), val, addr, 0);
        }
        b.ins().jump(done, &[]);
        b.switch_to_block(scalar);
    }
    match border {
        Some((bc, strides)) => {
            // Skip the call when no column is left (`xlo == 0` and `xs == W`).
            let call = b.create_block();
            let lo_empty = b.ins().icmp_imm_s(IntCC::Equal, xlo, 0);
            let hi_empty = b.ins().icmp(IntCC::SignedGreaterThanOrEqual, xs, width);
            let none = b.ins().band(lo_empty, hi_empty);
            b.ins().brif(none, done, &[], call, &[]);
            b.switch_to_block(call);
            // The row pointers go to the stack here, only on rows that make the call.
            let rows_arr = rows_r(b, plan, ctx);
            let sig = bc.import(b);
            let cell = b.ins().iconst(i64t, bc.cell as i64);
            // Filled in before any row function can run, never written again.
            let f = b.ins().load(i64t, mem().with_readonly(), cell, 0);
            b.ins()
                .call_indirect(sig, f, &[rows_arr, strides, out, out_stride, width, xs]);
            b.ins().jump(done, &[]);
            Ok(())
        }
        None => emit_border_loop(b, code, out, out_stride, xlo, xs, done),
    }
}
