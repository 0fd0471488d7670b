//! Row blocks: a min or max window along the run axis, computed for several output rows at
//! once.
//!
//! A stage whose value is an f32 or u8 min (or max; for bools, and or or) over the rows
//! `first .. first + k` of one source, at the output's own column, is a vertical window
//! reduction. Computed row by row it reads `k` rows per output row. The multi-row function
//! instead computes [`BLOCK_ROWS`] (`R`, at most `k`) output rows per step from the
//! `R + k - 1` source rows they cover, in registers, four f32 or sixteen byte columns at a
//! time (van Herk/Gil-Werman within the block):
//!
//! * every window of the block contains rows `R-1 ..= k-1` (relative to the block's first
//!   source row): their reduction `C` is computed once;
//! * suffix reductions `S[j]` of rows `j ..= R-2` and prefix reductions `P[j]` of rows
//!   `k ..= k+j-1` complete each window: output `j` is `S[j] ∘ C ∘ P[j]` (the parts that
//!   exist).
//!
//! For `k = 15` and `R = 8` that is 22 loads and 33 picks per 8 output vectors, against 15
//! loads and 14 picks per output vector, or a chain of scratch stages.
//!
//! Exact: kiln's float min and max form a semilattice (NaN absorbs and becomes canonical,
//! -0 < +0, see `SEMANTICS.md`), and so do unsigned byte minima and maxima, so any grouping
//! of the same rows gives the same bits. Float picks are `values::Em`'s own: compare-form
//! tree steps, or plain picks in the clean-input specialisation, and the result is made
//! plain (canonical NaN) once per output; byte picks are one `pminub`/`pmaxub` each.
//!
//! The block path runs only when the caller's rows are laid out as one source: every slot
//! of the window reads row `first + j` of the output row at `ptr + j * row_step` of one
//! base pointer and step, all column strides are 1 and at least `R` rows and one vector of
//! columns are asked for; otherwise (row-by-row calls, border rows, scratch rings that wrap) the
//! ordinary row loop runs.

use cranelift_codegen::ir::{condcodes::IntCC, BlockArg};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{BinaryOp, DType};

use super::facts::InstFacts;
use super::values::{arg, mem, Em, Val};
use super::{RowSlot, SlotKind};
use crate::kernel::{Op, Stage};
use crate::Fault;

use super::schedule::BLOCK_ROWS;

/// A stage that is a min or max window along the run axis (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct RowWindow {
    /// A max window (`false`: min).
    pub(crate) max: bool,
    /// Window length `k` (source rows per output row).
    pub(crate) len: usize,
    /// Output rows per block, `R = min(BLOCK_ROWS, k)`.
    pub(crate) rows: usize,
    /// Every slot a window load reads, with its row offset relative to the first row.
    pub(crate) slots: Vec<(usize, i64)>,
    /// The slot of the window's first row (offset 0): the block's base pointer.
    pub(crate) base: usize,
    /// Every pick is a plain pick (the clean-input specialisation).
    pub(crate) plain: bool,
    /// Plain picks of f32 vectors are integer picks (see `Em::int_picks`).
    pub(crate) int_picks: bool,
    /// A u8 or bool window on the 16-lane byte path (unsigned byte minima and maxima;
    /// bools are the bytes 0 and 1, so `and` is the minimum and `or` the maximum).
    pub(crate) bytes: bool,
}

/// Recognises a row window: the stage's value is an f32 or u8 min (or max), or a bool
/// min, max, `and` or `or`, whose operands, through instructions of the same op only, are
/// loads at column offset 0 of `Row` slots of one source, at the same outer offsets except
/// along the run axis (the last one), covering a contiguous range of at least two rows.
/// `facts` gives each load's slot and marks the clean kernel's plain picks. `None` under a planted comparator swap (which the row-by-row path applies).
pub(crate) fn detect(
    stage: &Stage,
    slots: &[RowSlot],
    facts: &[InstFacts],
    int_picks: bool,
    fault: Option<Fault>,
) -> Option<RowWindow> {
    let dtype = stage.dtype();
    if fault == Some(Fault::SwapComparator)
        || !matches!(dtype, DType::F32 | DType::U8 | DType::Bool)
    {
        return None;
    }
    let bytes = dtype != DType::F32;
    let root = stage.result.0 as usize;
    let op = match stage.insts[root].op {
        Op::Binary(op @ (BinaryOp::Min | BinaryOp::Max), _, _) => op,
        Op::Binary(op @ (BinaryOp::And | BinaryOp::Or), _, _) if dtype == DType::Bool => op,
        _ => return None,
    };
    let mut seen = vec![false; stage.insts.len()];
    let mut stack = vec![root];
    let mut leaves: Vec<usize> = Vec::new();
    let mut plain = true;
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        let inst = &stage.insts[i];
        if inst.dtype != dtype {
            return None;
        }
        match &inst.op {
            Op::Binary(o, a, b) if *o == op => {
                plain &= bytes || facts.get(i).is_some_and(|f| f.plain_pick);
                stack.push(a.0 as usize);
                stack.push(b.0 as usize);
            }
            Op::Load { offset, .. } if offset.last() == Some(&0) => {
                leaves.push(facts.get(i).and_then(|f| f.slot)?);
            }
            _ => return None,
        }
    }
    leaves.sort_unstable();
    leaves.dedup();
    let first = &slots[*leaves.first()?];
    let SlotKind::Row { source, .. } = first.kind else {
        return None;
    };
    let (_, first_rest) = first.outer_offset.split_last()?;
    let mut dys = Vec::new();
    for &s in &leaves {
        let slot = &slots[s];
        let (&dy, rest) = slot.outer_offset.split_last()?;
        match slot.kind {
            SlotKind::Row { source: src, .. } if src == source && rest == first_rest => {}
            _ => return None,
        }
        dys.push((s, dy));
    }
    let lo = dys.iter().map(|&(_, dy)| dy).min()?;
    let hi = dys.iter().map(|&(_, dy)| dy).max()?;
    let len = usize::try_from(hi - lo + 1).ok()?;
    let mut covered = vec![false; len];
    for &(_, dy) in &dys {
        covered[(dy - lo) as usize] = true;
    }
    if len < 2 || covered.contains(&false) {
        return None;
    }
    let base = dys.iter().find(|&&(_, dy)| dy == lo)?.0;
    Some(RowWindow {
        max: matches!(op, BinaryOp::Max | BinaryOp::Or),
        len,
        rows: BLOCK_ROWS.min(len),
        slots: dys.into_iter().map(|(s, dy)| (s, dy - lo)).collect(),
        base,
        plain,
        int_picks: int_picks && plain && !bytes,
        bytes,
    })
}

/// The row-loop values the block path needs, all defined before the loops.
pub(crate) struct BlockArgs<'a> {
    /// Slot pointers for output row 0.
    pub(crate) ptrs: &'a [Value],
    /// Slot row steps (bytes per output row).
    pub(crate) row_steps: &'a [Value],
    /// Whether every `Row` slot has column stride 1.
    pub(crate) unit_strides: Option<Value>,
    pub(crate) out: Value,
    pub(crate) out_row_step: Value,
    pub(crate) out_stride: Value,
    pub(crate) width: Value,
    pub(crate) nrows: Value,
}

/// Emits the block path from the current block: when the call qualifies (see the module
/// docs) it computes all `nrows` rows in blocks and jumps to `done`; otherwise it jumps to
/// `fallback` (the row loop), having computed nothing.
pub(crate) fn emit(
    b: &mut FunctionBuilder,
    w: &RowWindow,
    a: &BlockArgs,
    fault: Option<Fault>,
    fallback: cranelift_codegen::ir::Block,
    fallback_args: &[BlockArg],
    done: cranelift_codegen::ir::Block,
) {
    let i64t = types::I64;
    let rows = w.rows as i64;
    // Columns per vector and bytes per element.
    let (lanes, esize) = if w.bytes { (16i64, 1i64) } else { (4, 4) };
    // Does the call qualify?
    let mut ok = b.ins().icmp_imm_s(IntCC::Equal, a.out_stride, 1);
    if let Some(u) = a.unit_strides {
        ok = b.ins().band(ok, u);
    }
    let enough_rows = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, a.nrows, rows);
    let enough_cols = b
        .ins()
        .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, a.width, lanes);
    ok = b.ins().band(ok, enough_rows);
    ok = b.ins().band(ok, enough_cols);
    let (p0, rs) = (a.ptrs[w.base], a.row_steps[w.base]);
    for &(s, dy) in &w.slots {
        // Slot `s` reads row `first + dy`: `p0 + dy * rs`, advancing by the same step.
        let off = b.ins().imul_imm_s(rs, dy);
        let want = b.ins().iadd(p0, off);
        let same_ptr = b.ins().icmp(IntCC::Equal, a.ptrs[s], want);
        let same_step = b.ins().icmp(IntCC::Equal, a.row_steps[s], rs);
        ok = b.ins().band(ok, same_ptr);
        ok = b.ins().band(ok, same_step);
    }
    let block_hdr = b.create_block();
    b.append_block_param(block_hdr, i64t);
    let zero = b.ins().iconst(i64t, 0);
    b.ins()
        .brif(ok, block_hdr, &[arg(zero)], fallback, fallback_args);

    // One block of rows: the last one moved up to end at `nrows` (rows already written are
    // written again with the same bits; the output overlaps no source row).
    b.switch_to_block(block_hdr);
    let r0 = b.block_params(block_hdr)[0];
    let more = b.ins().icmp(IntCC::SignedLessThan, r0, a.nrows);
    let block = b.create_block();
    b.ins().brif(more, block, &[], done, &[]);
    b.switch_to_block(block);
    let last = b.ins().iadd_imm_s(a.nrows, -rows);
    let rb = b.ins().smin(r0, last);
    let src_off = b.ins().imul(rb, rs);
    let src = b.ins().iadd(p0, src_off);
    let dst_off = b.ins().imul(rb, a.out_row_step);
    let dst = b.ins().iadd(a.out, dst_off);
    // The column loop carries its source and output pointers (block parameters: Cranelift
    // cannot move them into the loop, see `rowfn::build_rows`).
    let col_hdr = b.create_block();
    let col_body = b.create_block();
    for blk in [col_hdr, col_body] {
        for _ in 0..3 {
            b.append_block_param(blk, i64t);
        }
    }
    let col_tail = b.create_block();
    let next_block = b.create_block();
    b.ins().jump(col_hdr, &[arg(zero), arg(src), arg(dst)]);

    b.switch_to_block(col_hdr);
    let [x, sp, dp] = <[Value; 3]>::try_from(b.block_params(col_hdr)).expect("three params");
    let xn = b.ins().iadd_imm_s(x, lanes);
    let fits = b.ins().icmp(IntCC::SignedLessThanOrEqual, xn, a.width);
    b.ins()
        .brif(fits, col_body, &[arg(x), arg(sp), arg(dp)], col_tail, &[]);

    // Columns left over: one vector ending at the last column, unless none is left.
    b.switch_to_block(col_tail);
    let left = b.ins().icmp(IntCC::SignedLessThan, x, a.width);
    let xl = b.ins().iadd_imm_s(a.width, -lanes);
    let xl_bytes = b.ins().imul_imm_s(xl, esize);
    let sl = b.ins().iadd(src, xl_bytes);
    let dl = b.ins().iadd(dst, xl_bytes);
    b.ins().brif(
        left,
        col_body,
        &[arg(xl), arg(sl), arg(dl)],
        next_block,
        &[],
    );

    b.switch_to_block(next_block);
    let r1 = b.ins().iadd_imm_s(r0, rows);
    b.ins().jump(block_hdr, &[arg(r1)]);

    b.switch_to_block(col_body);
    let [x, sp, dp] = <[Value; 3]>::try_from(b.block_params(col_body)).expect("three params");
    let b = if w.bytes {
        let mut picks = BytePicks { b, max: w.max };
        block_step(&mut picks, w, sp, rs, dp, a.out_row_step);
        picks.b
    } else {
        let em = Em::new(b, true, fault, w.int_picks);
        let mut picks = FloatPicks {
            em,
            max: w.max,
            plain: w.plain,
        };
        block_step(&mut picks, w, sp, rs, dp, a.out_row_step);
        picks.em.b
    };
    let x4 = b.ins().iadd_imm_s(x, lanes);
    let sp4 = b.ins().iadd_imm_s(sp, esize * lanes);
    let dp4 = b.ins().iadd_imm_s(dp, esize * lanes);
    b.ins().jump(col_hdr, &[arg(x4), arg(sp4), arg(dp4)]);
}

/// How a block step loads, picks and stores one vector (f32 or bytes).
trait Picks {
    type V: Copy;
    /// `a + b` (pointer arithmetic).
    fn iadd(&mut self, a: Value, b: Value) -> Value;
    fn load(&mut self, p: Value) -> Self::V;
    fn pick(&mut self, x: Self::V, y: Self::V) -> Self::V;
    fn store(&mut self, v: Self::V, q: Value);
}

/// f32 vectors through `Em`: compare-form tree picks, or plain picks in the clean-input
/// specialisation; stored plain (canonical NaN).
struct FloatPicks<'a, 'b> {
    em: Em<'a, 'b>,
    max: bool,
    plain: bool,
}

impl<'a, 'b> Picks for FloatPicks<'a, 'b> {
    type V = Val;
    fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.em.b.ins().iadd(a, b)
    }
    fn load(&mut self, p: Value) -> Val {
        let v = self.em.b.ins().load(types::F32X4, mem(), p, 0);
        if self.plain {
            Val::plain(DType::F32, v)
        } else {
            self.em.tree_leaf(self.max, DType::F32, v)
        }
    }
    fn pick(&mut self, mut x: Val, mut y: Val) -> Val {
        if self.plain {
            self.em.plain_pick(self.max, &mut x, &mut y)
        } else {
            self.em.float_minmax(self.max, &mut x, &mut y, true, true)
        }
    }
    fn store(&mut self, mut v: Val, q: Value) {
        let v = self.em.plain(&mut v);
        self.em.b.ins().store(mem(), v, q, 0);
    }
}

/// u8 or bool lanes (bools as the bytes 0 and 1): one unsigned byte minimum or maximum
/// per pick, exact.
struct BytePicks<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    max: bool,
}

impl<'a, 'b> Picks for BytePicks<'a, 'b> {
    type V = Value;
    fn iadd(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().iadd(a, b)
    }
    fn load(&mut self, p: Value) -> Value {
        self.b.ins().load(types::I8X16, mem(), p, 0)
    }
    fn pick(&mut self, x: Value, y: Value) -> Value {
        if self.max {
            self.b.ins().umax(x, y)
        } else {
            self.b.ins().umin(x, y)
        }
    }
    fn store(&mut self, v: Value, q: Value) {
        self.b.ins().store(mem(), v, q, 0);
    }
}

/// One step of a block: the `R` output vectors at `dst`, `dst + ors`, ... from source rows
/// `0 .. R + k - 1` at `src`, `src + rs`, ... (see the module docs). Rows are loaded in
/// order, each just before its first use, and each output is stored as soon as it is
/// complete, so that few vectors are live at once: rows `0 ..= R-2` give the suffixes `S`,
/// rows `R-1 ..= k-1` the common part `C`, and each row `k + j - 1` the prefix `P[j]` and
/// with it output `j`.
fn block_step<P: Picks>(pk: &mut P, w: &RowWindow, src: Value, rs: Value, dst: Value, ors: Value) {
    let (k, r) = (w.len, w.rows);
    let mut p = src;
    let mut row = 0usize;
    let mut load = |pk: &mut P| -> P::V {
        if row > 0 {
            p = pk.iadd(p, rs);
        }
        row += 1;
        pk.load(p)
    };
    // Rows 0 ..= R-2, then S[j] = rows j ..= R-2.
    let head: Vec<P::V> = (0..r - 1).map(|_| load(pk)).collect();
    let mut suffix: Vec<P::V> = head.clone();
    for j in (0..r.saturating_sub(2)).rev() {
        suffix[j] = pk.pick(head[j], suffix[j + 1]);
    }
    // C = rows R-1 ..= k-1.
    let mut c = load(pk);
    for _ in r..k {
        let l = load(pk);
        c = pk.pick(c, l);
    }
    let mut q = dst;
    let mut prefix: Option<P::V> = None;
    for j in 0..r {
        if j > 0 {
            let l = load(pk);
            prefix = Some(match prefix {
                Some(pj) => pk.pick(pj, l),
                None => l,
            });
            q = pk.iadd(q, ors);
        }
        let mut o = c;
        if let Some(s) = suffix.get(j) {
            o = pk.pick(*s, o);
        }
        if let Some(pj) = prefix {
            o = pk.pick(o, pj);
        }
        pk.store(o, q);
    }
}
