//! Per-instruction facts of one stencil stage: the results of every per-instruction
//! analysis, as one struct of named fields per instruction ([`InstFacts`]), gathered by
//! [`analyse`].
//!
//! The analyses, one per file, each with its exactness argument: `nanguard` (min/max
//! without NaN masks under a dominating NaN guard), `treeform` (min/max in compare form),
//! `rawnan` (arithmetic whose NaN need not be canonical), `signclear` (values that are a
//! NaN or have a clear sign bit), and the clean kernel's plain picks (`clean`). Each fact
//! only selects among code shapes that give the same bits; under a planted fault the
//! optimising facts are off (`swapped` is the fault itself), so the fault is what the
//! fuzzer sees. Limits: facts are per stage; `rawresult` (a fact of the stage's result) is
//! in the plan.

use std::collections::HashMap;

use kiln_ir::BinaryOp;

use super::rawnan::raw_nan;
use super::signclear::sign_clear;
use super::treeform::tree_form;
use crate::kernel::{Op, Stage};
use crate::Fault;

/// What code generation knows about one instruction of a stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InstFacts {
    /// Its row slot (loads; in-range tests with an outer offset), set by the plan.
    pub(crate) slot: Option<usize>,
    /// Min and max exchanged (the planted comparator fault, see [`swapped_pair`]).
    pub(crate) swapped: bool,
    /// A float min/max under a dominating NaN guard, computed without its NaN mask (see
    /// `nanguard`).
    pub(crate) unmasked: bool,
    /// A float min/max computed in compare form (see `treeform`).
    pub(crate) tree: bool,
    /// A float min/max of clean values, one plain pick (only in the clean kernel, see
    /// `clean`).
    pub(crate) plain_pick: bool,
    /// Float arithmetic whose NaN result need not be canonical (see `rawnan`).
    pub(crate) raw_nan: bool,
    /// A float value that is a NaN or has a clear sign bit (see `signclear`).
    pub(crate) sign_clear: bool,
}

impl InstFacts {
    /// The facts that change an instruction's code (`unmasked`, `tree`, `swapped`,
    /// `raw_nan`, `plain_pick`): instructions that share code between columns (see
    /// `shift`) must agree on them.
    pub(crate) fn codegen_flags(&self) -> [bool; 5] {
        [
            self.unmasked,
            self.tree,
            self.swapped,
            self.raw_nan,
            self.plain_pick,
        ]
    }
}

/// Runs every per-instruction analysis on `stage` (slots are left `None`). `plain_pick` is
/// the clean kernel's plain picks (ignored unless it has one entry per instruction).
pub(crate) fn analyse(
    stage: &Stage,
    fault: Option<Fault>,
    plain_pick: Option<&[bool]>,
) -> Vec<InstFacts> {
    let n = stage.insts.len();
    let mut facts = vec![InstFacts::default(); n];
    if fault == Some(Fault::SwapComparator) {
        if let Some((i, j)) = swapped_pair(stage) {
            facts[i].swapped = true;
            facts[j].swapped = true;
        }
    }
    if fault.is_none() {
        for (f, u) in facts.iter_mut().zip(super::nanguard::unmasked(stage)) {
            f.unmasked = u;
        }
        for (f, r) in facts.iter_mut().zip(raw_nan(stage)) {
            f.raw_nan = r;
        }
    }
    for (f, t) in facts.iter_mut().zip(tree_form(stage)) {
        f.tree = t;
    }
    if let Some(p) = plain_pick.filter(|p| p.len() == n) {
        for (f, &p) in facts.iter_mut().zip(p) {
            f.plain_pick = p;
        }
    }
    for (f, s) in facts.iter_mut().zip(sign_clear(stage)) {
        f.sign_clear = s;
    }
    facts
}

/// The planted comparator fault's target: the first min/max (in instruction order of the
/// later one) whose operands another instruction takes with the opposite op.
fn swapped_pair(stage: &Stage) -> Option<(usize, usize)> {
    let mut seen: HashMap<(bool, u32, u32), usize> = HashMap::new();
    for (i, inst) in stage.insts.iter().enumerate() {
        let (is_max, a, b) = match inst.op {
            Op::Binary(BinaryOp::Min, a, b) => (false, a.0, b.0),
            Op::Binary(BinaryOp::Max, a, b) => (true, a.0, b.0),
            _ => continue,
        };
        let key = (a.min(b), a.max(b));
        if let Some(&j) = seen.get(&(!is_max, key.0, key.1)) {
            return Some((i, j));
        }
        seen.entry((is_max, key.0, key.1)).or_insert(i);
    }
    None
}
