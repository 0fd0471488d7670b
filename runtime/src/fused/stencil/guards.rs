//! Guarded variants at run time: the one place where the scheduler chooses between a
//! kernel and its variants for clean inputs (see `kiln_codegen::cpu::Guard`), and checks
//! the input rows a block read against the variant's guard.
//!
//! The hook is [`Job::block`]: it tries the variants purest first, each through
//! `Job::block_with` with the guard's [`Purity`] to check, and falls back to the general
//! kernel, which always completes the block.
//!
//! Exactness: a variant's results equal the general kernel's on inputs its guard admits
//! (the codegen's argument for each guard). A block keeps a variant's rows only when every
//! input row the block read checked at least that pure; otherwise it is computed again,
//! in full, by a less specialised form, over whatever the variant wrote. On unclean inputs
//! a variant computes other values but cannot fault: its code is the general kernel's with
//! NaN tests folded and min/max plain, and addresses no memory by value.
//!
//! Limits: only f32 and f64 input rows are checked (others are pure); strided input rows
//! count as unclean.

use std::sync::atomic::{AtomicUsize, Ordering};

use kiln_codegen::cpu::{
    clean_f64, f32_purity, CpuBody, CpuKernel, CpuStage, Guard, Purity, SlotKind,
};
use kiln_codegen::kernel::Source;

use super::cache::Scratch;
use super::exec::Target;
use super::{Job, OutPtr};
use crate::RuntimeError;
use kiln_ir::DType;

/// A stencil kernel's guarded variants (see `kiln_codegen::cpu::Guard`): per guard, the
/// stages of the variant compiled under it, if any.
#[derive(Clone, Copy, Default)]
pub struct Variants<'a> {
    /// Indexed by `Guard::index`.
    stages: [Option<&'a [CpuStage]>; Guard::ALL.len()],
}

impl<'a> Variants<'a> {
    /// The stencil variants attached to `kernel` (none for scans and axis reductions).
    pub fn of(kernel: &'a CpuKernel) -> Variants<'a> {
        let mut v = Variants::default();
        for g in &kernel.variants {
            if let CpuBody::Stencil(st) = &g.kernel.body {
                v = v.with(g.guard, st);
            }
        }
        v
    }

    /// These variants with `stages` as the one under `guard`.
    pub fn with(mut self, guard: Guard, stages: &'a [CpuStage]) -> Variants<'a> {
        self.stages[guard.index()] = Some(stages);
        self
    }

    /// The variants that can stand in for `general`: a variant is only interchangeable with
    /// the general stages if it reads the same rows.
    pub(super) fn usable_with(self, general: &[CpuStage]) -> Variants<'a> {
        let same = |c: &&[CpuStage]| {
            c.len() == general.len() && c.iter().zip(general).all(|(a, b)| a.slots == b.slots)
        };
        Variants {
            stages: self.stages.map(|s| s.filter(same)),
        }
    }
}

/// Per-guard block counters of a run, and blocks aborted: `Guard::index` for blocks a
/// variant computed, [`ABORTED`] for blocks whose check failed midway.
pub(super) type Counts = [AtomicUsize; Guard::ALL.len() + 1];

/// The counter of blocks whose check failed midway.
const ABORTED: usize = Guard::ALL.len();

pub(super) fn purity_of(p: u8) -> Purity {
    match p {
        0 => Purity::Unclean,
        1 => Purity::Clean,
        _ => Purity::NonNeg,
    }
}

/// How a run's blocks used a kernel's clean-input specialisation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanBlocks {
    /// Blocks whose input rows all checked clean, computed by the clean specialisation.
    pub clean: usize,
    /// Blocks whose input rows all checked clean with clear sign bits, computed by that
    /// specialisation.
    pub nonneg: usize,
    /// Blocks that found a less clean input row partway than their specialisation needs,
    /// and were computed again by a less specialised kernel.
    pub aborted: usize,
}

impl CleanBlocks {
    /// What the counters of a finished run say.
    pub(super) fn from_counts(counts: &Counts) -> CleanBlocks {
        let n = |i: usize| counts[i].load(Ordering::Relaxed);
        CleanBlocks {
            clean: n(Guard::CleanInputs.index()),
            nonneg: n(Guard::NonNegative.index()),
            aborted: n(ABORTED),
        }
    }
}

/// Input bytes (at 4 per element) a block computes at a time while using a clean-input form,
/// before checking them clean: so the check reads them from cache, right after the kernel
/// brought them in. Measured on the 2-core EPYC VM (1 MiB L2 per core) at 2048²: 256 KiB
/// saved 3-5% of a median 3x3 and 5-8% of an erosion 15x15 against checking the whole
/// input first, and 64 KiB or 1 MiB about half that.
pub(super) const CHECK_BYTES: usize = 256 << 10;

impl Job<'_> {
    /// Computes rows `r0..r1` of the last stage (and what it needs of earlier stages; see
    /// [`Job::block_with`]) with the purest form of the kernel the block's input rows allow.
    ///
    /// This is the scheduler's one hook for guarded variants. The variants are tried in
    /// `Guard::ALL` order (purest first), skipping those a previous block's check ruled
    /// out. A variant runs the block checking, right after each row computation (of at
    /// most [`CHECK_BYTES`] of input), the input rows it read that the block has not
    /// checked yet (see [`Job::read_clean`]): they are still in cache then. If one is less
    /// pure than the guard needs, the block is computed again by the next form down (in the
    /// end the general kernel, unchecked), over whatever the variant wrote; every form
    /// gives the same bits on inputs its guard admits, so which one computed a block changes
    /// its speed only. (On other inputs a variant computes other values, but no worse: its
    /// code is the general kernel's with NaN tests folded and min/max plain, and neither
    /// can fault or address memory by value.) Later blocks start at the purest form the
    /// last failed check allows.
    pub(super) fn block(
        &self,
        r0: usize,
        r1: usize,
        out: OutPtr,
        pool: &mut Vec<Scratch>,
    ) -> Result<(), RuntimeError> {
        for guard in Guard::ALL {
            let Some(code) = self.variants.stages[guard.index()] else {
                continue;
            };
            let need = guard.purity();
            if purity_of(self.best.load(Ordering::Relaxed)) < need {
                continue;
            }
            match self.block_with(code, Some(need), r0, r1, out, pool)? {
                Ok(()) => {
                    self.counts[guard.index()].fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(found) => {
                    self.best.fetch_min(found as u8, Ordering::Relaxed);
                    self.counts[ABORTED].fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        // Unchecked, the general kernel always completes the block.
        self.block_with(self.stages, None, r0, r1, out, pool)
            .map(|_complete| ())
    }

    /// Whether the rows of every input that stage `k`'s computation of `done` rows from
    /// outer coordinates `oc` read through its slots are at least `need` pure, checking only
    /// those outside `checked` (per input, the flat rows `[lo, hi)` this block has checked
    /// so far): `Err` with the purity found if not. A computation of several rows reads
    /// consecutive rows through every slot (see [`Job::try_rows`]); one of a single row, one
    /// row per slot.
    pub(super) fn read_clean(
        &self,
        k: usize,
        oc: &[usize],
        done: usize,
        checked: &mut [(usize, usize)],
        need: Purity,
    ) -> Result<(), Purity> {
        for slot in &self.stages[k].slots {
            // Only input slots read inputs (resolving the others, earlier stages' rows, cost
            // as much as the row's own resolution).
            let SlotKind::Row {
                source: Source::Input(n),
                ..
            } = slot.kind
            else {
                continue;
            };
            if let Target::Input { row, .. } = self.resolve(oc, slot) {
                let n = n as usize;
                self.rows_clean(n, row, row + done, &mut checked[n], need)?;
            }
        }
        Ok(())
    }

    /// Whether rows `a..b` of input `n` are at least `need` pure (`Err` with the purity
    /// found if not), checking the part outside `checked`. The interval grows while the rows
    /// read are next to it (a block's reads move forward); rows away from it (a `wrap`
    /// border's, say) are checked on their own, and replace it when they are at least as
    /// many.
    pub(super) fn rows_clean(
        &self,
        n: usize,
        a: usize,
        b: usize,
        checked: &mut (usize, usize),
        need: Purity,
    ) -> Result<(), Purity> {
        let pure = |r0: usize, r1: usize| {
            let p = self.input_rows_purity(n, r0, r1);
            if p >= need {
                Ok(())
            } else {
                Err(p)
            }
        };
        let (lo, hi) = *checked;
        if lo < hi && a <= hi && b >= lo {
            if a < lo {
                pure(a, lo)?;
            }
            if b > hi {
                pure(hi, b)?;
            }
            *checked = (lo.min(a), hi.max(b));
            return Ok(());
        }
        pure(a, b)?;
        if b - a >= hi - lo {
            *checked = (a, b);
        }
        Ok(())
    }

    /// The purity of rows `r0..r1` (flat, in the kernel's shape) of input `n`: the least of
    /// their floats' (see `kiln_codegen::cpu::Purity`; f64 rows are at most clean, rows
    /// without floats are pure).
    pub(super) fn input_rows_purity(&self, n: usize, r0: usize, r1: usize) -> Purity {
        let t = &self.inputs[n];
        let w = self.width;
        let purity = |at: usize, len: usize| match t.dtype() {
            DType::F32 => t.f32_run(at, len).map_or(Purity::Unclean, f32_purity),
            DType::F64 => match t.f64_run(at, len).is_some_and(clean_f64) {
                true => Purity::Clean,
                false => Purity::Unclean,
            },
            _ => Purity::NonNeg,
        };
        if t.is_contiguous() {
            return purity(t.offset() + r0 * w, (r1 - r0) * w);
        }
        let outer = self.shape.len() - 1;
        if w > 1 && t.strides()[outer] != 1 {
            return Purity::Unclean;
        }
        let mut oc = vec![0usize; outer];
        let mut least = Purity::NonNeg;
        for r in r0..r1 {
            self.decode(r, &mut oc);
            let at = oc
                .iter()
                .zip(t.strides())
                .map(|(c, s)| c * s)
                .sum::<usize>();
            least = least.min(purity(t.offset() + at, w));
            if least == Purity::Unclean {
                break;
            }
        }
        least
    }
}
