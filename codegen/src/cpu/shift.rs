//! Work sharing between neighbouring columns: common subexpressions modulo a column shift.
//!
//! Two instructions of a stage are *shift-equivalent* when one is the other's program with
//! every column offset moved by the same `d`: then `value_j(x) == value_i(x + d)` at every
//! column `x` where both read inside the row. A median over sorted columns has this shape
//! (the sort of column `dx = +1` at `x` is the sort of column `dx = 0` at `x + 1`), and so
//! has a window reduction built from shifted partial reductions.
//!
//! On the vector interior (stride 1, four columns per `F32X4` vector or sixteen per `I8X16`
//! vector on the byte path, every read in range) the row function then computes each class
//! once per vector and gets the other members by lane shuffles (`palignr`) of two
//! neighbouring vectors of the class's first member. A loop
//! step covers `blocks` output vectors (2, 4 or 8: the least work per vector within a code
//! budget); the first member is computed at the few extra vectors the shuffles need, so a
//! class of `m` members costs about `1 + 1/blocks` programs per vector instead of `m`. The values are the same bits: a lane shuffle moves values,
//! it computes nothing, and every member computes the same operations on the same inputs.
//!
//! The border columns and the scalar paths compute every instruction directly.

use std::collections::{BTreeSet, HashMap, HashSet};

use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use crate::kernel::{Op, Source, Stage};

pub use super::schedule::STEP_CODE_BUDGET;
use super::schedule::{ONE_VECTOR_LOOP_MIN_BLOCKS, STEP_CHOICES, STEP_CONTROL};

/// The class of an instruction's program, up to a column shift.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A load at column offset 0 (its shift is its column offset). Along the row the border
    /// mode plays no part (on the vector interior every read is in range), but it picks the
    /// row for a non-zero outer offset (its own row pointer), so it is part of the key
    /// there; at outer offset zero every mode reads the output's own row.
    Load {
        source: Source,
        outer: Vec<i64>,
        border: Option<Border>,
        dtype: DType,
    },
    /// A column-independent value on the vector path: a constant, or an in-range test
    /// (true along the row in the interior; the outer part is one flag per row).
    Const(Scalar),
    InRange(Vec<i64>),
    /// An operation on operand classes, each with its shift relative to the instruction's
    /// (`None`: a column-independent operand).
    Op {
        op: OpKey,
        dtype: DType,
        /// `unmasked`, `tree`, `swapped` and `raw_nan` of the stage plan: members must be
        /// emitted by the same code.
        flags: [bool; 5],
        operands: Vec<(u32, Option<i64>)>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OpKey {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Select,
    Cast,
}

/// How the shared vector loop computes a stage.
#[derive(Clone, Debug)]
pub(crate) struct ShiftPlan {
    /// Per instruction: `Some((r, d))` when it is taken from instruction `r` at column
    /// shift `d > 0` (`value_i(x) == value_r(x + d)`) instead of being computed.
    pub(crate) derive: Vec<Option<(usize, i64)>>,
    /// Per output vector `u` of a step, per instruction: the vectors (relative to the step's
    /// first one) at which the instruction is needed, ascending.
    pub(crate) needs: Vec<Vec<Vec<i64>>>,
    /// Smallest and largest column read by a step at `x`, relative to `x`.
    pub(crate) read_lo: i64,
    pub(crate) read_hi: i64,
    /// Number of derived instructions (for `describe`).
    pub(crate) derived: usize,
    /// Output vectors per step (one of [`STEP_CHOICES`]).
    pub(crate) blocks: usize,
    /// A bigger step was left out only because of the code budget.
    pub(crate) capped: bool,
    /// Values carried from one step to the next (see [`carry`]): `(i, v)` is taken from
    /// the previous step's instruction `i` at vector `v + blocks` (the same columns)
    /// instead of being computed. Empty when carrying is off.
    pub(crate) carry: Vec<(usize, i64)>,
    /// Columns per vector: 4 (`F32X4`) or 16 (`I8X16`, see `bytevec`).
    pub(crate) lanes: i64,
}

impl ShiftPlan {
    /// What output vector `u` of a step needs, in emission order: the vectors ahead first
    /// (what later outputs take by lane shifts), then the output's own; instructions in
    /// `order` within a vector.
    pub(crate) fn needed(&self, u: usize, order: &[usize]) -> Vec<(usize, i64)> {
        let need = &self.needs[u];
        let vs: BTreeSet<i64> = need.iter().flatten().copied().collect();
        let mut out = Vec::new();
        for &v in vs.iter().rev() {
            for &i in order {
                if need[i].binary_search(&v).is_ok() {
                    out.push((i, v));
                }
            }
        }
        out
    }

    /// The values to compute for the value at `at`, each after the values it is computed
    /// from (its operands at its vector, or the class representative's vectors it shifts
    /// lanes from), leaving out those `done` says are computed: an explicit stack, no
    /// recursion on deep programs.
    pub(crate) fn schedule(
        &self,
        stage: &Stage,
        at: (usize, i64),
        done: impl Fn((usize, i64)) -> bool,
    ) -> Vec<(usize, i64)> {
        let mut order = Vec::new();
        let mut queued: HashSet<(usize, i64)> = HashSet::new();
        let mut stack = vec![at];
        while let Some(&top) = stack.last() {
            if queued.contains(&top) || done(top) {
                stack.pop();
                continue;
            }
            let missing: Vec<(usize, i64)> = deps(stage, &self.derive, self.lanes, top)
                .into_iter()
                .filter(|&d| !queued.contains(&d) && !done(d))
                .collect();
            if missing.is_empty() {
                stack.pop();
                queued.insert(top);
                order.push(top);
            } else {
                stack.extend(missing.into_iter().rev());
            }
        }
        order
    }
}

/// The folding of the vector body's `fold_known` on bools known at code-generation time:
/// `Some((Some(a), k))` when the instruction passes operand `a` through, `Some((None, k))`
/// when it is the known bool `k`.
fn fold(op: &Op, known: &[Option<bool>]) -> Option<(Option<usize>, Option<bool>)> {
    let k = |v: &crate::kernel::ValueId| known[v.0 as usize];
    let pass = |v: &crate::kernel::ValueId| Some((Some(v.0 as usize), k(v)));
    match op {
        Op::Select(c, a, e) => match k(c)? {
            true => pass(a),
            false => pass(e),
        },
        Op::Binary(op @ (BinaryOp::And | BinaryOp::Or), a, b) => {
            let is_and = *op == BinaryOp::And;
            match (k(a), k(b)) {
                (Some(x), _) | (_, Some(x)) if x != is_and => Some((None, Some(x))),
                (Some(_), _) => pass(b),
                (_, Some(_)) => pass(a),
                _ => None,
            }
        }
        Op::Unary(UnaryOp::Not, a) => Some((None, Some(!k(a)?))),
        _ => None,
    }
}

/// Finds the shift classes of a vectorised stage with `lanes` columns per vector.
/// `flags[i]` are the per-instruction code-generation choices that must agree within a
/// class. `None` when nothing would be shared.
pub(crate) fn plan(
    stage: &Stage,
    flags: &[[bool; 5]],
    budget: usize,
    carry_values: bool,
    lanes: i64,
) -> Option<ShiftPlan> {
    let n = stage.insts.len();
    let mut classes: HashMap<Key, u32> = HashMap::new();
    // Per instruction: class and shift (`None`: column-independent).
    let mut cls: Vec<(u32, Option<i64>)> = Vec::with_capacity(n);
    let mut first: Vec<(usize, Option<i64>)> = Vec::new();
    let mut known: Vec<Option<bool>> = vec![None; n];
    let mut aliased = vec![false; n];
    for (i, inst) in stage.insts.iter().enumerate() {
        let rel = |v: &crate::kernel::ValueId, base: Option<i64>| -> (u32, Option<i64>) {
            let (c, s) = cls[v.0 as usize];
            (c, s.map(|s| s - base.unwrap_or(0)))
        };
        let op_key = |op: OpKey, ops: &[crate::kernel::ValueId]| -> (Key, Option<i64>) {
            let base = ops.iter().filter_map(|v| cls[v.0 as usize].1).min();
            let mut operands: Vec<(u32, Option<i64>)> = ops.iter().map(|v| rel(v, base)).collect();
            if let OpKey::Binary(b) = op {
                if b.is_commutative() {
                    operands.sort();
                }
            }
            (
                Key::Op {
                    op,
                    dtype: inst.dtype,
                    flags: flags[i],
                    operands,
                },
                base,
            )
        };
        let (key, shift) = match &inst.op {
            Op::Load {
                source,
                offset,
                border,
            } => {
                let (dx, outer) = offset.split_last()?;
                (
                    Key::Load {
                        source: *source,
                        outer: outer.to_vec(),
                        border: outer.iter().any(|&o| o != 0).then_some(*border),
                        dtype: inst.dtype,
                    },
                    Some(*dx),
                )
            }
            Op::Const(c) => {
                if let Scalar::Bool(b) = c {
                    known[i] = Some(*b);
                }
                (Key::Const(*c), None)
            }
            Op::InRange(offset) => {
                let (_, outer) = offset.split_last()?;
                if outer.iter().all(|&o| o == 0) {
                    known[i] = Some(true);
                }
                (Key::InRange(outer.to_vec()), None)
            }
            // What the vector body folds (see `fold_known` in rowfn) is the value it passes
            // through, or a known bool: same class, emitted as no code.
            op if let Some((alias, k)) = fold(op, &known) => {
                known[i] = k;
                aliased[i] = true;
                match alias {
                    Some(a) => {
                        cls.push(cls[a]);
                        continue;
                    }
                    None => (Key::Const(Scalar::Bool(k?)), None),
                }
            }
            Op::Unary(op, a) => op_key(OpKey::Unary(*op), std::slice::from_ref(a)),
            Op::Cast(a) => op_key(OpKey::Cast, std::slice::from_ref(a)),
            Op::Binary(op, a, b) => op_key(OpKey::Binary(*op), &[*a, *b]),
            Op::Select(c, a, b) => op_key(OpKey::Select, &[*c, *a, *b]),
        };
        let next = classes.len() as u32;
        let c = *classes.entry(key).or_insert(next);
        if c == next {
            first.push((i, shift));
        } else if let (Some(s), Some(fs)) = (shift, first[c as usize].1) {
            // The member with the smallest shift represents the class, so every other
            // member reads it at a shift `d > 0` (vectors at and after its own).
            if s < fs {
                first[c as usize] = (i, shift);
            }
        }
        cls.push((c, shift));
    }
    let mut derive: Vec<Option<(usize, i64)>> = vec![None; n];
    let mut derived = 0;
    for (i, inst) in stage.insts.iter().enumerate() {
        if aliased[i] || matches!(inst.op, Op::Load { .. } | Op::Const(_) | Op::InRange(_)) {
            continue;
        }
        let (c, s) = cls[i];
        let (r, rs) = first[c as usize];
        if r == i {
            continue;
        }
        if let (Some(s), Some(rs)) = (s, rs) {
            derive[i] = Some((r, s - rs));
            derived += 1;
        }
    }
    if derived == 0 {
        return None;
    }
    // The step size with the least emitted work per output vector, within a code budget
    // (a bigger step amortises the extra vectors its shuffles need and its loop control, but
    // multiplies the code Cranelift compiles); a bigger step must save at least 5% to be
    // taken. With carried values (see [`carry`]) no vector is computed twice, so every size
    // emits about the same work per vector and the loop control decides; steps start at
    // [`ONE_VECTOR_LOOP_MIN_BLOCKS`] when the budget allows and the stage is small enough
    // for edge vectors (leftover columns then run as vectors, and the row's ends as edge
    // vectors). For the 5x5 median (too big for edge vectors) at 2048², one thread, with
    // integer picks, 2 vectors per step took 9.8–9.9 ms against 10.5–10.7 ms for 4 and
    // 11.0–11.6 ms for 8 (with float picks 13.1, 13.0–13.4 and 13.9–14.0 ms).
    let min_blocks = if carry_values
        && ONE_VECTOR_LOOP_MIN_BLOCKS * n <= budget
        && n <= super::schedule::EDGE_SHARED_MAX_INSTS
    {
        ONE_VECTOR_LOOP_MIN_BLOCKS
    } else {
        STEP_CHOICES[0]
    };
    let mut best: Option<(f64, Steps)> = None;
    let mut capped = false;
    for blocks in STEP_CHOICES.into_iter().filter(|&b| b >= min_blocks) {
        if blocks * n > budget && blocks > min_blocks {
            capped = true;
            continue;
        }
        let Some(mut steps) = steps(stage, &derive, blocks, lanes) else {
            continue;
        };
        if carry_values {
            carry(stage, &derive, &aliased, lanes, &mut steps);
        }
        let per_vector = (steps.emitted + STEP_CONTROL) as f64 / blocks as f64;
        if best.as_ref().is_none_or(|(w, _)| per_vector < 0.95 * w) {
            best = Some((per_vector, steps));
        }
    }
    let (_, chosen) = best?;
    let Steps {
        needs,
        read_lo,
        read_hi,
        carry,
        ..
    } = chosen;
    let blocks = needs.len();
    Some(ShiftPlan {
        derive,
        needs,
        read_lo,
        read_hi,
        derived,
        blocks,
        capped,
        carry,
        lanes,
    })
}

/// What a step of `blocks` output vectors needs (see [`ShiftPlan`]).
struct Steps {
    needs: Vec<Vec<Vec<i64>>>,
    read_lo: i64,
    read_hi: i64,
    /// Distinct (instruction, vector) values the step emits (derived ones are shuffles).
    emitted: usize,
    /// Values taken from the previous step (see [`carry`]).
    carry: Vec<(usize, i64)>,
}

/// The needs of a step of `blocks` output vectors of `lanes` columns under `derive`.
fn steps(
    stage: &Stage,
    derive: &[Option<(usize, i64)>],
    blocks: usize,
    lanes: i64,
) -> Option<Steps> {
    let n = stage.insts.len();
    let mut needs: Vec<Vec<Vec<i64>>> = Vec::with_capacity(blocks);
    let (mut read_lo, mut read_hi) = (i64::MAX, i64::MIN);
    for u in 0..blocks as i64 {
        let mut need: Vec<BTreeSet<i64>> = vec![BTreeSet::new(); n];
        need[stage.result.0 as usize].insert(u);
        // Each instruction's needs come from later instructions or, through `derive`, from
        // any member of its class: propagate over a work list until nothing is added.
        let mut done: Vec<BTreeSet<i64>> = vec![BTreeSet::new(); n];
        let mut work: Vec<usize> = vec![stage.result.0 as usize];
        while let Some(i) = work.pop() {
            let vs: Vec<i64> = need[i].difference(&done[i]).copied().collect();
            if vs.is_empty() {
                continue;
            }
            done[i].extend(vs.iter().copied());
            if let (None, Op::Load { offset, .. }) = (derive[i], &stage.insts[i].op) {
                let dx = *offset.last()?;
                for &v in &vs {
                    read_lo = read_lo.min(lanes * v + dx);
                    read_hi = read_hi.max(lanes * v + dx + lanes - 1);
                }
            }
            for &v in &vs {
                for (o, w) in deps(stage, derive, lanes, (i, v)) {
                    need[o].insert(w);
                    work.push(o);
                }
            }
        }
        needs.push(need.into_iter().map(|s| s.into_iter().collect()).collect());
    }
    if read_lo > read_hi {
        return None;
    }
    // Distinct (instruction, vector) pairs over the whole step, not per output.
    let mut seen: BTreeSet<(usize, i64)> = BTreeSet::new();
    for need in &needs {
        for (i, vs) in need.iter().enumerate() {
            if !matches!(stage.insts[i].op, Op::Const(_) | Op::InRange(_)) {
                seen.extend(vs.iter().map(|&v| (i, v)));
            }
        }
    }
    Some(Steps {
        needs,
        read_lo,
        read_hi,
        emitted: seen.len(),
        carry: Vec::new(),
    })
}

/// The (instruction, vector) pairs a value at `(i, v)` is computed from in a step of
/// vectors of `lanes` columns: through `derive`, the two vectors of the class
/// representative it shifts lanes from; else its operands at `v`.
fn deps(
    stage: &Stage,
    derive: &[Option<(usize, i64)>],
    lanes: i64,
    (i, v): (usize, i64),
) -> Vec<(usize, i64)> {
    match derive[i] {
        Some((r, d)) => {
            let (fl, k) = (d.div_euclid(lanes), d.rem_euclid(lanes));
            let mut deps = vec![(r, v + fl)];
            if k != 0 {
                deps.push((r, v + fl + 1));
            }
            deps
        }
        None => match &stage.insts[i].op {
            Op::Unary(_, a) | Op::Cast(a) => vec![(a.0 as usize, v)],
            Op::Binary(_, a, b) => vec![(a.0 as usize, v), (b.0 as usize, v)],
            Op::Select(c, a, b) => vec![(c.0 as usize, v), (a.0 as usize, v), (b.0 as usize, v)],
            Op::Load { .. } | Op::Const(_) | Op::InRange(_) => vec![],
        },
    }
}

/// Values carried between consecutive steps. Step `x + 4 * blocks` needs at vector `v` the
/// columns step `x` had at vector `v + blocks`: where a computed value (an operation, not
/// a load, a constant or a folded alias) is needed at both, the next step takes it from
/// this one (a block parameter of the loop) instead of computing it again. With steps of
/// two vectors a 5x5 median needs its column sorts at four vectors and its column-pair
/// merges at three; carried, it computes two of each.
///
/// Which values are carried is decided by demand, from the step's outputs: a carried value
/// is not computed, so neither are its operands unless something else needs them, and each
/// carried value obliges the step to compute (or carry on) its value at `v + blocks` for
/// the next. `steps.needs` keeps only what is then emitted; `steps.emitted` counts it.
/// The first step of a row (and a redone last step) computes the carried values first.
fn carry(
    stage: &Stage,
    derive: &[Option<(usize, i64)>],
    aliased: &[bool],
    lanes: i64,
    steps: &mut Steps,
) {
    let blocks = steps.needs.len() as i64;
    let needed: BTreeSet<(usize, i64)> = steps
        .needs
        .iter()
        .flat_map(|need| {
            need.iter()
                .enumerate()
                .flat_map(|(i, vs)| vs.iter().map(move |&v| (i, v)))
        })
        .collect();
    let carryable = |(i, v): (usize, i64)| {
        derive[i].is_none()
            && !aliased[i]
            && matches!(
                stage.insts[i].op,
                Op::Unary(..) | Op::Binary(..) | Op::Select(..) | Op::Cast(_)
            )
            && needed.contains(&(i, v + blocks))
    };
    let mut demanded: BTreeSet<(usize, i64)> = BTreeSet::new();
    let mut carried: BTreeSet<(usize, i64)> = BTreeSet::new();
    let mut work: Vec<(usize, i64)> = (0..blocks).map(|u| (stage.result.0 as usize, u)).collect();
    while let Some(at) = work.pop() {
        if !demanded.insert(at) {
            continue;
        }
        if carryable(at) {
            carried.insert(at);
            work.push((at.0, at.1 + blocks));
        } else {
            work.extend(deps(stage, derive, lanes, at));
        }
    }
    for need in &mut steps.needs {
        for (i, vs) in need.iter_mut().enumerate() {
            vs.retain(|&v| demanded.contains(&(i, v)) && !carried.contains(&(i, v)));
        }
    }
    steps.emitted = demanded
        .iter()
        .filter(|&at| {
            !carried.contains(at) && !matches!(stage.insts[at.0].op, Op::Const(_) | Op::InRange(_))
        })
        .count();
    steps.carry = carried.into_iter().collect();
}
