//! Line kernels on the CPU: one Cranelift function walks `lanes` independent lines of a
//! [`Line`] body, running its step program once per element.
//!
//! Exactness: the step is emitted with the same scalar value emitter as stencil stages
//! (`values::Em`, one lane, NaN masks on, plain results), so each step value has kiln's
//! documented bits; the order along a line is the walking order, element by element, and no
//! two elements of a line are ever combined in another order (no reassociation, no vectors).
//! Lanes are independent, so interleaving them (below) changes nothing.
//!
//! Schedule: with one lane the carries live in registers (loop block parameters); with more
//! lanes (an outer axis, where the lanes are neighbouring columns of one row) the loop walks
//! the axis position by position and the lanes inside it, each lane's carries in an 8-byte
//! slot per carry of a caller-provided scratch buffer, so memory is read row by row.
//! Direction is the caller's: it passes the first element in walking order and signed steps.
//!
//! Limits: scalar code only (one element per step); the runtime decides the split into lanes.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::DType;

use super::esize;
use super::values::{arg, mem, Em, Val};
use crate::kernel::{Kernel, Line, LineInit, LineKeep, Op, ValueId};
use crate::{CodegenError, Fault};

/// Parameter types of a [`super::LineFn`].
pub(crate) fn params() -> [Type; 9] {
    [types::I64; 9]
}

/// Checks a line kernel (see [`crate::validate::check_line`]).
pub(crate) fn validate(kernel: &Kernel) -> Result<&Line, CodegenError> {
    crate::validate::check_line(kernel).map_err(CodegenError::Lower)
}

/// Bytes of scratch per lane and carry.
pub const CARRY_SLOT: i64 = 8;

/// Emits the step at one element: returns the next carries and the kept `y` (if each is kept).
fn step(
    b: &mut FunctionBuilder,
    line: &Line,
    carries: &[Value],
    x: Value,
    xd: DType,
    fault: Option<Fault>,
) -> Result<(Vec<Value>, Option<Value>), CodegenError> {
    let mut em = Em::new(b, false, fault, false);
    let mut vals: Vec<Val> = line
        .carries
        .iter()
        .zip(carries)
        .map(|(&d, &v)| Val::plain(d, v))
        .collect();
    vals.push(Val::plain(xd, x));
    for inst in &line.step {
        let get = |v: &ValueId| vals[v.0 as usize];
        let r = match &inst.op {
            Op::Const(c) => em.constant(*c)?,
            Op::Unary(op, a) => em.unary(*op, &mut get(a))?,
            Op::Binary(op, a, c) => em.binary(*op, &mut get(a), &mut get(c), false, true, false)?,
            Op::Select(c, a, d) => em.select(&mut get(c), &mut get(a), &mut get(d))?,
            Op::Cast(a) => em.cast(&mut get(a), inst.dtype)?,
            Op::Load { .. } | Op::InRange(_) => {
                return Err(CodegenError::Lower("a load in a line step".into()))
            }
        };
        vals.push(r);
    }
    let next = line
        .next
        .iter()
        .map(|v| em.plain(&mut vals[v.0 as usize]))
        .collect();
    let y = match line.keep {
        LineKeep::Each(v) => Some(em.plain(&mut vals[v.0 as usize])),
        LineKeep::Final(_) => None,
    };
    Ok((next, y))
}

/// The initial carries (constants), emitted in the current block.
fn consts(b: &mut FunctionBuilder, c: &[kiln_ir::Scalar]) -> Result<Vec<Value>, CodegenError> {
    let mut em = Em::new(b, false, None, false);
    c.iter()
        .map(|&s| em.constant(s).map(|mut v| em.plain(&mut v)))
        .collect()
}

/// Builds a [`super::LineFn`] for `line` over inputs of dtype `xd` and outputs of `yd`.
pub(crate) fn build(
    b: &mut FunctionBuilder,
    line: &Line,
    xd: DType,
    yd: DType,
    params: &[Value],
    fault: Option<Fault>,
) -> Result<(), CodegenError> {
    let (src, src_step, src_lane, out, out_step, out_lane, n, lanes, scratch) = (
        params[0], params[1], params[2], params[3], params[4], params[5], params[6], params[7],
        params[8],
    );
    let i64t = types::I64;
    let (xt, cts): (Type, Vec<Type>) = {
        let em = Em::new(&mut *b, false, fault, false);
        (em.ty(xd), line.carries.iter().map(|&d| em.ty(d)).collect())
    };
    let sstep = b.ins().imul_imm_s(src_step, esize(xd));
    let slane = b.ins().imul_imm_s(src_lane, esize(xd));
    let ostep = b.ins().imul_imm_s(out_step, esize(yd));
    let olane = b.ins().imul_imm_s(out_lane, esize(yd));
    let first = matches!(line.init, LineInit::First);
    let each = line.keeps_each();
    let nc = line.carries.len();
    let exit = b.create_block();
    // A seeded line needs an element; the runtime never passes an empty one.
    if first {
        let ok = b.create_block();
        let empty = b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 1);
        b.ins().brif(empty, exit, &[], ok, &[]);
        b.switch_to_block(ok);
    }
    let one_lane = b.create_block();
    let many = b.create_block();
    let single = b.ins().icmp_imm_s(IntCC::Equal, lanes, 1);
    b.ins().brif(single, one_lane, &[], many, &[]);

    // One lane: carries in registers.
    b.switch_to_block(one_lane);
    let (init, start, s0, o0) = match &line.init {
        LineInit::First => {
            let x0 = b.ins().load(xt, mem(), src, 0);
            if each {
                b.ins().store(mem(), x0, out, 0);
            }
            let s1 = b.ins().iadd(src, sstep);
            let o1 = b.ins().iadd(out, ostep);
            (vec![x0], 1i64, s1, o1)
        }
        LineInit::Consts(c) => (consts(b, c)?, 0, src, out),
    };
    let hdr = b.create_block();
    let body = b.create_block();
    let done = b.create_block();
    for _ in 0..3 {
        b.append_block_param(hdr, i64t);
    }
    for &t in &cts {
        b.append_block_param(hdr, t);
        b.append_block_param(done, t);
    }
    let k0 = b.ins().iconst(i64t, start);
    let mut args = vec![arg(k0), arg(s0), arg(o0)];
    args.extend(init.iter().map(|&v| arg(v)));
    b.ins().jump(hdr, &args);
    b.switch_to_block(hdr);
    let hp = b.block_params(hdr).to_vec();
    let (k, sp, op) = (hp[0], hp[1], hp[2]);
    let cur: Vec<Value> = hp[3..].to_vec();
    let more = b.ins().icmp(IntCC::SignedLessThan, k, n);
    let cargs: Vec<_> = cur.iter().map(|&v| arg(v)).collect();
    b.ins().brif(more, body, &[], done, &cargs);
    b.switch_to_block(body);
    let x = b.ins().load(xt, mem(), sp, 0);
    let (next, y) = step(b, line, &cur, x, xd, fault)?;
    if let Some(y) = y {
        b.ins().store(mem(), y, op, 0);
    }
    let k1 = b.ins().iadd_imm_s(k, 1);
    let sp1 = b.ins().iadd(sp, sstep);
    let op1 = b.ins().iadd(op, ostep);
    let mut args = vec![arg(k1), arg(sp1), arg(op1)];
    args.extend(next.iter().map(|&v| arg(v)));
    b.ins().jump(hdr, &args);
    b.switch_to_block(done);
    if let LineKeep::Final(kc) = line.keep {
        let v = b.block_params(done)[kc as usize];
        b.ins().store(mem(), v, out, 0);
    }
    b.ins().jump(exit, &[]);

    // Many lanes: position by position, lanes inside, carries in `scratch`.
    b.switch_to_block(many);
    let lane_bytes = (nc as i64).max(1) * CARRY_SLOT;
    let slot = |b: &mut FunctionBuilder, l: Value| {
        let off = b.ins().imul_imm_s(l, lane_bytes);
        b.ins().iadd(scratch, off)
    };
    // Seed each lane.
    let zero = b.ins().iconst(i64t, 0);
    let seed_hdr = b.create_block();
    b.append_block_param(seed_hdr, i64t);
    let seed_body = b.create_block();
    let walk = b.create_block();
    b.ins().jump(seed_hdr, &[arg(zero)]);
    b.switch_to_block(seed_hdr);
    let l = b.block_params(seed_hdr)[0];
    let more = b.ins().icmp(IntCC::SignedLessThan, l, lanes);
    b.ins().brif(more, seed_body, &[], walk, &[]);
    b.switch_to_block(seed_body);
    let sl = slot(b, l);
    match &line.init {
        LineInit::First => {
            let off = b.ins().imul(l, slane);
            let a = b.ins().iadd(src, off);
            let x0 = b.ins().load(xt, mem(), a, 0);
            b.ins().store(mem(), x0, sl, 0);
            if each {
                let off = b.ins().imul(l, olane);
                let a = b.ins().iadd(out, off);
                b.ins().store(mem(), x0, a, 0);
            }
        }
        LineInit::Consts(c) => {
            let vs = consts(b, c)?;
            for (ci, v) in vs.into_iter().enumerate() {
                b.ins().store(mem(), v, sl, ci as i32 * CARRY_SLOT as i32);
            }
        }
    }
    let l1 = b.ins().iadd_imm_s(l, 1);
    b.ins().jump(seed_hdr, &[arg(l1)]);

    // The walk: positions `k` from `start`, lanes `l` inside.
    b.switch_to_block(walk);
    let k0 = b.ins().iconst(i64t, start);
    let pos_hdr = b.create_block();
    b.append_block_param(pos_hdr, i64t);
    let pos_body = b.create_block();
    let lane_hdr = b.create_block();
    b.append_block_param(lane_hdr, i64t);
    b.append_block_param(lane_hdr, i64t);
    let lane_body = b.create_block();
    let pos_next = b.create_block();
    b.append_block_param(pos_next, i64t);
    let fin = b.create_block();
    b.ins().jump(pos_hdr, &[arg(k0)]);
    b.switch_to_block(pos_hdr);
    let k = b.block_params(pos_hdr)[0];
    let more = b.ins().icmp(IntCC::SignedLessThan, k, n);
    b.ins().brif(more, pos_body, &[], fin, &[]);
    b.switch_to_block(pos_body);
    b.ins().jump(lane_hdr, &[arg(k), arg(zero)]);
    b.switch_to_block(lane_hdr);
    let (k, l) = (b.block_params(lane_hdr)[0], b.block_params(lane_hdr)[1]);
    let more = b.ins().icmp(IntCC::SignedLessThan, l, lanes);
    b.ins().brif(more, lane_body, &[], pos_next, &[arg(k)]);
    b.switch_to_block(lane_body);
    let sl = slot(b, l);
    let cur: Vec<Value> = cts
        .iter()
        .enumerate()
        .map(|(ci, &t)| b.ins().load(t, mem(), sl, ci as i32 * CARRY_SLOT as i32))
        .collect();
    let ks = b.ins().imul(k, sstep);
    let ls = b.ins().imul(l, slane);
    let a = b.ins().iadd(src, ks);
    let a = b.ins().iadd(a, ls);
    let x = b.ins().load(xt, mem(), a, 0);
    let (next, y) = step(b, line, &cur, x, xd, fault)?;
    for (ci, v) in next.into_iter().enumerate() {
        b.ins().store(mem(), v, sl, ci as i32 * CARRY_SLOT as i32);
    }
    if let Some(y) = y {
        let ko = b.ins().imul(k, ostep);
        let lo = b.ins().imul(l, olane);
        let a = b.ins().iadd(out, ko);
        let a = b.ins().iadd(a, lo);
        b.ins().store(mem(), y, a, 0);
    }
    let l1 = b.ins().iadd_imm_s(l, 1);
    b.ins().jump(lane_hdr, &[arg(k), arg(l1)]);
    b.switch_to_block(pos_next);
    let k = b.block_params(pos_next)[0];
    let k1 = b.ins().iadd_imm_s(k, 1);
    b.ins().jump(pos_hdr, &[arg(k1)]);

    // The kept final carry of each lane.
    b.switch_to_block(fin);
    if let LineKeep::Final(kc) = line.keep {
        let t = cts[kc as usize];
        let fh = b.create_block();
        b.append_block_param(fh, i64t);
        let fb = b.create_block();
        b.ins().jump(fh, &[arg(zero)]);
        b.switch_to_block(fh);
        let l = b.block_params(fh)[0];
        let more = b.ins().icmp(IntCC::SignedLessThan, l, lanes);
        b.ins().brif(more, fb, &[], exit, &[]);
        b.switch_to_block(fb);
        let sl = slot(b, l);
        let v = b.ins().load(t, mem(), sl, kc as i32 * CARRY_SLOT as i32);
        let off = b.ins().imul(l, olane);
        let a = b.ins().iadd(out, off);
        b.ins().store(mem(), v, a, 0);
        let l1 = b.ins().iadd_imm_s(l, 1);
        b.ins().jump(fh, &[arg(l1)]);
    } else {
        b.ins().jump(exit, &[]);
    }

    b.switch_to_block(exit);
    b.ins().return_(&[]);
    Ok(())
}
