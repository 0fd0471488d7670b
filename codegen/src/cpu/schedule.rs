//! The scheduling thresholds of the CPU backend's stencil row functions, in one table.
//!
//! Every number that decides *how* a stage's row is computed (unrolling, split-off border
//! functions, edge vectors, carried values) is here; [`super::plan`] reads them to build a
//! stage's plan and [`super::schedule`]'s `RowSchedule`. Exactness: none of them changes a
//! result bit, only which (equivalent) code runs; each path is checked against eager by the
//! runtime's tests. Limits: the numbers were calibrated on one x86-64 machine (see
//! `benches/RESULTS.md`).

/// Stages of at most this many instructions get their vector loop unrolled by two.
pub(super) const UNROLL_MAX_INSTS: usize = 16;

/// Stages of more instructions compile their border columns separately (see
/// [`split_border`]).
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
