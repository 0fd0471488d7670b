//! The scheduling policy of the CPU backend's stencil row functions: the value that says
//! how a row is computed ([`RowSchedule`]: left edge, interior, tail, border columns), and
//! every threshold behind it, in one table (the constants below).
//!
//! `plan` fills a stage's `RowSchedule` in from these numbers; `rowwalk` emits the row by
//! walking it; `kiln dump` prints it per stage. Exactness: none of them changes a
//! result bit, only which (equivalent) code runs; each path is checked against eager by the
//! runtime's tests. Limits: the numbers were calibrated on one x86-64 machine (see
//! `benches/RESULTS.md`).

/// Output vectors per loop step (see `shift`) of the shared vector loop, to choose from.
pub(super) const STEP_CHOICES: [usize; 3] = [2, 4, 8];

/// Most instructions (stage size times output vectors per step) a step's code may have,
/// beyond the smallest step (Cranelift's compile time grows with function size). The
/// default of [`crate::CompileOptions::step_code_budget`].
pub const STEP_CODE_BUDGET: usize = 700;

/// Steps of this many vectors keep the one-vector loop for leftover columns (smaller steps
/// are taken by big stages, whose leftover columns run scalar, for compile time).
pub(crate) const ONE_VECTOR_LOOP_MIN_BLOCKS: usize = 4;

/// Instructions of loop control and output addressing per step, in the step choice.
pub(super) const STEP_CONTROL: usize = 8;

/// Output rows per block of a row window (see `rowblock`) (at most the window's length).
pub(crate) const BLOCK_ROWS: usize = 8;

/// Stages of at most this many instructions get their vector loop unrolled by two.
pub(super) const UNROLL_MAX_INSTS: usize = 16;

/// Stages of more instructions compile their border columns separately (see
/// `plan::split_border`).
pub(super) const SPLIT_BORDER_INSTS: usize = 96;

/// ... or more than this many, when the stage's column offsets span at most
/// [`SPLIT_BORDER_NARROW_SPAN`] (few border columns per row).
pub(super) const SPLIT_BORDER_NARROW_INSTS: usize = 24;

/// See [`SPLIT_BORDER_NARROW_INSTS`].
pub(super) const SPLIT_BORDER_NARROW_SPAN: i64 = 4;

/// Stages sharing work between columns take edge vectors (see `edge`) up to this many
/// instructions (two more vector bodies in the row function: compile time).
pub(crate) const EDGE_SHARED_MAX_INSTS: usize = 96;

/// Under the default step budget (a kernel's first compile), stages carry values between
/// steps of their shared loop (see `shift`) only up to this many instructions: the
/// carried values' first computation and their live ranges cost compile time (5x5 median,
/// 290 instructions: 2.64 -> 3.28 ms). The background compile carries them in every stage.
pub(super) const CARRY_FIRST_MAX_INSTS: usize = 96;

/// How one output row of a stage is computed, left to right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowSchedule {
    /// Columns per vector (4 on `F32X4`, 16 on the byte path); `None`: a scalar stage.
    pub(crate) lanes: Option<i64>,
    /// Edge vectors per end on wide enough rows with unit strides (0: none, see `edge`):
    /// the left edge before the interior, the right edge after the tail.
    pub(crate) edge_vectors: i64,
    /// The vector interior (unit strides).
    pub(crate) interior: Interior,
    /// How the interior's last columns are done.
    pub(crate) tail: Tail,
    /// How the border columns (and every column of a strided row) are done.
    pub(crate) border: BorderColumns,
}

/// The vector interior of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Interior {
    /// No vector interior: every column on the scalar border path.
    Scalar,
    /// One vector per step.
    Plain,
    /// Two vectors per step, then one (small stages, [`UNROLL_MAX_INSTS`]).
    Unrolled,
    /// Steps of `blocks` vectors sharing work by lane shifts (see `shift`), `carried`
    /// values handed from step to step.
    Shared { blocks: usize, carried: usize },
    /// Vectors, with a min/max window along the rows computed in blocks of `rows` rows
    /// by the multi-row function (see `rowblock`).
    RowBlock { rows: usize },
}

/// The interior's last columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tail {
    /// None: no vector interior.
    None,
    /// The one-vector loop, its last vector moved left to end at the interior's end.
    OneVectorLoop,
    /// The last shared step moved left to end at the last column it can reach; the
    /// scalar border path does the rest.
    RedoneStep,
}

/// The border columns of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BorderColumns {
    /// A scalar loop in the row function.
    Inline,
    /// A separate function compiled for compile speed, called once per row (see
    /// `plan::split_border`).
    SplitFunction,
}

impl std::fmt::Display for RowSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lanes = self.lanes.unwrap_or(1);
        if self.edge_vectors > 0 {
            write!(f, "left edge: {} vector(s); ", self.edge_vectors)?;
        } else {
            write!(f, "left edge: scalar; ")?;
        }
        match self.interior {
            Interior::Scalar => write!(f, "interior: scalar")?,
            Interior::Plain => write!(f, "interior: 1 x {lanes} lanes per step")?,
            Interior::Unrolled => write!(f, "interior: 2 x {lanes} lanes per step, then 1")?,
            Interior::Shared { blocks, carried } => write!(
                f,
                "interior: {blocks} x {lanes} lanes per step, shared by lane shifts, \
                 {carried} value(s) carried"
            )?,
            Interior::RowBlock { rows } => write!(
                f,
                "interior: 1 x {lanes} lanes per step, {rows} rows per block"
            )?,
        }
        match self.tail {
            Tail::None => write!(f, "; tail: none")?,
            Tail::OneVectorLoop => write!(f, "; tail: one-vector loop, overlapped last vector")?,
            Tail::RedoneStep => write!(f, "; tail: last step redone overlapped, then scalar")?,
        }
        if self.edge_vectors > 0 {
            write!(f, "; right edge: {} vector(s)", self.edge_vectors)?;
        }
        match self.border {
            BorderColumns::Inline => write!(f, "; border: scalar loop"),
            BorderColumns::SplitFunction => write!(f, "; border: split-off function"),
        }
    }
}

/// The row schedule of every stage of a stencil kernel as [`super::compile`] plans it
/// (with dual stages unless `options` turns them off), one line per stage (empty for other
/// kernels), for `kiln dump`.
pub fn row_schedules(
    kernel: &crate::kernel::Kernel,
    options: &crate::CompileOptions,
) -> Result<Vec<String>, crate::CodegenError> {
    let dual = (!options.no_dual_stages)
        .then(|| super::dual::share_duals(kernel))
        .flatten();
    let code = dual.as_ref().unwrap_or(kernel);
    let crate::kernel::KernelBody::Stencil { stages } = &code.body else {
        return Ok(Vec::new());
    };
    super::rowfn::validate(code)?;
    (0..stages.len())
        .map(|i| {
            let plan = super::plan::plan_stage(code, i, options, None, false)?;
            Ok(format!("stage {i}: {}", plan.row_schedule(&stages[i])))
        })
        .collect()
}
