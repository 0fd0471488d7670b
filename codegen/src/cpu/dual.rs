//! Dual stages share code: a float max window is a negated min window of the negated
//! values, bit for bit (for bytes, complemented: `255 - x`), so a kernel whose stages are
//! min and max windows (an opening, a closing) can store some stage results negated and
//! compute its max stages with the same programs as its min stages. The compile then builds each distinct program once
//! (`compile_with`), which halves the row functions of an opening or a closing.
//!
//! Exact: for kiln's float `min`/`max` (a lattice with `-0 < +0`, NaN absorbing and
//! canonical, see `SEMANTICS.md`), `max(a, b) == -min(-a, -b)` and `min(a, b) ==
//! -max(-a, -b)` for all bits, since negation maps the order onto its reverse; `neg` gives
//! the canonical NaN for a NaN, as min and max do. For u8, `255 - x` reverses the order of
//! the bytes, and unsigned min and max have no special values. A stage whose stored result is negated
//! is read only by stages that undo it (their program is rewritten for negated loads).
//!
//! Only for the general form: negated clean data holds `-0`, which the clean
//! specialisations exclude, so they keep the kernel's own stages. A kernel qualifies when
//! every stage is an f32 (or every one a u8) program of loads from one source (the kernel's input or one
//! earlier stage) and `min`/`max` instructions only; the last stage is never negated, nor
//! is a stage read under a constant border (the border would have to hold the negated
//! constant, and the clean forms share the slots). Of
//! the `2^(n-1)` choices of negated stages, the one with the fewest distinct programs is
//! taken (then the fewest negations at the root of a stage whose loads are all at column
//! offset 0, which would lose the row block of `rowblock`; then the fewest negations),
//! and only when it has fewer distinct programs than the kernel.

use std::collections::{HashMap, HashSet};

use kiln_ir::{BinaryOp, DType, Scalar, UnaryOp};

use crate::kernel::{Inst, Kernel, KernelBody, Op, Source, Stage, ValueId};
use crate::lower::Program;

/// Most stages for which the choices are enumerated.
const MAX_STAGES: usize = 12;

/// The kernel with some stage results stored negated so that dual stages have equal
/// programs (see the module docs); `None` when the kernel does not qualify or nothing would
/// be shared.
pub(crate) fn share_duals(kernel: &Kernel) -> Option<Kernel> {
    let KernelBody::Stencil { stages } = &kernel.body else {
        return None;
    };
    let n = stages.len();
    if !(2..=MAX_STAGES).contains(&n) {
        return None;
    }
    let sources: Vec<Source> = stages.iter().map(single_source).collect::<Option<_>>()?;
    // Each stage's four forms (its loads negated or not, its result stored negated or not),
    // and an id per distinct program among them all (up to sources).
    let mut ids: HashMap<Stage, usize> = HashMap::new();
    let mut forms: Vec<[(Stage, usize); 4]> = Vec::with_capacity(n);
    for st in stages {
        let mut four = Vec::with_capacity(4);
        for k in 0..4 {
            let form = rewrite(st, k & 2 != 0, k & 1 != 0)?;
            let next = ids.len();
            let id = *ids.entry(normalised(&form)).or_insert(next);
            four.push((form, id));
        }
        forms.push(four.try_into().ok()?);
    }
    let distinct = |choice: &[usize]| {
        let set: HashSet<usize> = (0..n).map(|i| forms[i][choice[i]].1).collect();
        set.len()
    };
    let before = distinct(&vec![0; n]);
    let mut best: Option<((usize, usize, usize), Vec<usize>)> = None;
    // Bit `i` of `mask`: stage `i`'s stored result is negated (never the last stage).
    for mask in 0u32..(1 << (n - 1)) {
        let negated = |s: Source| match s {
            Source::Input(_) => false,
            Source::Stage(k) => mask >> k & 1 == 1,
        };
        // A constant border would have to hold the negated constant, which the clean
        // forms' slots (read with the same scratch) do not: such sources stay as they are.
        if (0..n).any(|i| negated(sources[i]) && reads_constant_border(&stages[i])) {
            continue;
        }
        let choice: Vec<usize> = (0..n)
            .map(|i| 2 * usize::from(negated(sources[i])) + (mask as usize >> i & 1))
            .collect();
        let chosen = || (0..n).map(|i| &forms[i][choice[i]].0);
        let column_negs = chosen()
            .filter(|st| root_negated(st) && all_loads_at_column_zero(st))
            .count();
        let negs = chosen().filter(|st| root_negated(st)).count();
        let score = (distinct(&choice), column_negs, negs);
        if best.as_ref().is_none_or(|(b, _)| score < *b) {
            best = Some((score, choice));
        }
    }
    let (score, choice) = best?;
    let stages = (0..n).map(|i| forms[i][choice[i]].0.clone()).collect();
    (score.0 < before).then(|| Kernel {
        body: KernelBody::Stencil { stages },
        ..kernel.clone()
    })
}

/// The one source a qualifying stage loads from: loads, `min` and `max` only, all f32 or
/// all u8.
fn single_source(stage: &Stage) -> Option<Source> {
    let mut source = None;
    let dtype = stage.dtype();
    for inst in &stage.insts {
        if inst.dtype != dtype || !matches!(dtype, DType::F32 | DType::U8) {
            return None;
        }
        match &inst.op {
            Op::Load { source: s, .. } => match source {
                None => source = Some(*s),
                Some(t) if t == *s => {}
                Some(_) => return None,
            },
            Op::Binary(BinaryOp::Min | BinaryOp::Max, ..) => {}
            _ => return None,
        }
    }
    source
}

/// `stage` rewritten for loads whose stored values are negated (`loads_negated`) and a
/// stored result that is to be negated (`store_negated`): min and max swap under an odd
/// number of negations, and one `neg` at the root makes up a difference between the two.
fn rewrite(stage: &Stage, loads_negated: bool, store_negated: bool) -> Option<Stage> {
    let dtype = stage.dtype();
    let mut prog = Program::default();
    let mut emit = |op: Op| prog.emit(op, dtype);
    // Every value of a qualifying stage is negated exactly when its loads are.
    let mut map: Vec<ValueId> = Vec::with_capacity(stage.insts.len());
    for inst in &stage.insts {
        let v = match &inst.op {
            Op::Load { .. } => emit(inst.op.clone()),
            &Op::Binary(b, x, y) => {
                let b = match (b, loads_negated) {
                    (BinaryOp::Min, true) => BinaryOp::Max,
                    (BinaryOp::Max, true) => BinaryOp::Min,
                    (b, _) => b,
                };
                emit(Op::Binary(b, map[x.0 as usize], map[y.0 as usize]))
            }
            _ => return None,
        };
        map.push(v);
    }
    let mut result = map[stage.result.0 as usize];
    if loads_negated != store_negated {
        result = match dtype {
            DType::U8 => {
                let top = emit(Op::Const(Scalar::U8(u8::MAX)));
                emit(Op::Binary(BinaryOp::Sub, top, result))
            }
            _ => emit(Op::Unary(UnaryOp::Neg, result)),
        };
    }
    Some(prog.finish(result))
}

/// Whether some load of the stage reads under a constant border.
fn reads_constant_border(stage: &Stage) -> bool {
    stage.insts.iter().any(|i| {
        matches!(
            i.op,
            Op::Load {
                border: kiln_ir::Border::Constant(_),
                ..
            }
        )
    })
}

/// Whether the stage's result is a negation (`neg`, or `255 - x` for bytes).
fn root_negated(stage: &Stage) -> bool {
    matches!(
        stage.insts[stage.result.0 as usize].op,
        Op::Unary(UnaryOp::Neg, _) | Op::Binary(BinaryOp::Sub, ..)
    )
}

/// Whether every load of the stage is at column offset 0 (a window along the rows).
fn all_loads_at_column_zero(stage: &Stage) -> bool {
    stage.insts.iter().all(|i| match &i.op {
        Op::Load { offset, .. } => offset.last() == Some(&0),
        _ => true,
    })
}

/// The stage with its sources renamed in order of first appearance: equal for stages whose
/// code is the same (the row functions read their slots through pointers).
pub(crate) fn normalised(stage: &Stage) -> Stage {
    let mut seen: Vec<Source> = Vec::new();
    let insts = stage
        .insts
        .iter()
        .map(|inst| match &inst.op {
            Op::Load {
                source,
                offset,
                border,
            } => {
                let k = seen.iter().position(|s| s == source).unwrap_or_else(|| {
                    seen.push(*source);
                    seen.len() - 1
                });
                Inst {
                    op: Op::Load {
                        source: Source::Input(k as u32),
                        offset: offset.clone(),
                        border: *border,
                    },
                    dtype: inst.dtype,
                }
            }
            _ => inst.clone(),
        })
        .collect();
    Stage {
        insts,
        result: stage.result,
    }
}
