//! Scans and axis reductions: a fold along the innermost axis of one row, and an
//! elementwise combine step for outer axes.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;
use kiln_ir::{DType, ReduceOp};

use super::esize;
use super::values::{arg, mem, Em, Val};
use crate::kernel::Kernel;
use crate::{CodegenError, Fault};

/// Parameter types of a [`super::FoldFn`].
pub(crate) fn fold_params() -> [Type; 6] {
    [types::I64; 6]
}

/// Parameter types of a [`super::CombineFn`].
pub(crate) fn combine_params() -> [Type; 7] {
    [types::I64; 7]
}

/// Checks a scan or reduction kernel; returns the element dtype (see
/// [`crate::validate::check_along`]).
pub(crate) fn validate(kernel: &Kernel, axis: usize, op: ReduceOp) -> Result<DType, CodegenError> {
    crate::validate::check_along(kernel, axis, op).map_err(CodegenError::Lower)
}

fn step(
    b: &mut FunctionBuilder,
    d: DType,
    op: ReduceOp,
    acc: Value,
    x: Value,
    fault: Option<Fault>,
) -> Result<Value, CodegenError> {
    let mut em = Em::new(b, false, fault, false);
    let mut a = Val::plain(d, acc);
    let mut v = Val::plain(d, x);
    let mut r = em.binary(op.combiner(), &mut a, &mut v, false, true, false)?;
    Ok(em.plain(&mut r))
}

/// Builds a [`super::FoldFn`].
pub(crate) fn build_fold(
    b: &mut FunctionBuilder,
    d: DType,
    op: ReduceOp,
    params: &[Value],
    fault: Option<Fault>,
) -> Result<(), CodegenError> {
    let (src, src_stride, out, out_stride, width, scan) = (
        params[0], params[1], params[2], params[3], params[4], params[5],
    );
    let ty = Em::new(&mut *b, false, fault, false).ty(d);
    let i64t = types::I64;
    let sstep = b.ins().imul_imm_s(src_stride, esize(d));
    let ostep = b.ins().imul_imm_s(out_stride, esize(d));
    let v0 = b.ins().load(ty, mem(), src, 0);
    let one = b.ins().iconst(i64t, 1);

    let scan_hdr = b.create_block();
    b.append_block_param(scan_hdr, i64t);
    b.append_block_param(scan_hdr, ty);
    let scan_body = b.create_block();
    let red_hdr = b.create_block();
    b.append_block_param(red_hdr, i64t);
    b.append_block_param(red_hdr, ty);
    let red_body = b.create_block();
    let red_done = b.create_block();
    let exit = b.create_block();

    let scan_blk = b.create_block();
    b.ins()
        .brif(scan, scan_blk, &[], red_hdr, &[arg(one), arg(v0)]);

    b.switch_to_block(scan_blk);
    b.ins().store(mem(), v0, out, 0);
    b.ins().jump(scan_hdr, &[arg(one), arg(v0)]);

    b.switch_to_block(scan_hdr);
    let (x, acc) = (b.block_params(scan_hdr)[0], b.block_params(scan_hdr)[1]);
    let more = b.ins().icmp(IntCC::SignedLessThan, x, width);
    b.ins().brif(more, scan_body, &[], exit, &[]);

    b.switch_to_block(scan_body);
    let off = b.ins().imul(x, sstep);
    let addr = b.ins().iadd(src, off);
    let v = b.ins().load(ty, mem(), addr, 0);
    let r = step(b, d, op, acc, v, fault)?;
    let off = b.ins().imul(x, ostep);
    let addr = b.ins().iadd(out, off);
    b.ins().store(mem(), r, addr, 0);
    let x1 = b.ins().iadd_imm_s(x, 1);
    b.ins().jump(scan_hdr, &[arg(x1), arg(r)]);

    b.switch_to_block(red_hdr);
    let (x, acc) = (b.block_params(red_hdr)[0], b.block_params(red_hdr)[1]);
    let more = b.ins().icmp(IntCC::SignedLessThan, x, width);
    b.ins().brif(more, red_body, &[], red_done, &[]);

    b.switch_to_block(red_body);
    let off = b.ins().imul(x, sstep);
    let addr = b.ins().iadd(src, off);
    let v = b.ins().load(ty, mem(), addr, 0);
    let r = step(b, d, op, acc, v, fault)?;
    let x1 = b.ins().iadd_imm_s(x, 1);
    b.ins().jump(red_hdr, &[arg(x1), arg(r)]);

    b.switch_to_block(red_done);
    b.ins().store(mem(), acc, out, 0);
    b.ins().jump(exit, &[]);

    b.switch_to_block(exit);
    b.ins().return_(&[]);
    Ok(())
}

/// Builds a [`super::CombineFn`].
pub(crate) fn build_combine(
    b: &mut FunctionBuilder,
    d: DType,
    op: ReduceOp,
    params: &[Value],
    fault: Option<Fault>,
) -> Result<(), CodegenError> {
    let (acc, acc_stride, src, src_stride, out, out_stride, width) = (
        params[0], params[1], params[2], params[3], params[4], params[5], params[6],
    );
    let ty = Em::new(&mut *b, false, fault, false).ty(d);
    let i64t = types::I64;
    let astep = b.ins().imul_imm_s(acc_stride, esize(d));
    let sstep = b.ins().imul_imm_s(src_stride, esize(d));
    let ostep = b.ins().imul_imm_s(out_stride, esize(d));
    let zero = b.ins().iconst(i64t, 0);
    let hdr = b.create_block();
    b.append_block_param(hdr, i64t);
    let body = b.create_block();
    let exit = b.create_block();
    b.ins().jump(hdr, &[arg(zero)]);

    b.switch_to_block(hdr);
    let x = b.block_params(hdr)[0];
    let more = b.ins().icmp(IntCC::SignedLessThan, x, width);
    b.ins().brif(more, body, &[], exit, &[]);

    b.switch_to_block(body);
    let load = |b: &mut FunctionBuilder, p: Value, st: Value| {
        let off = b.ins().imul(x, st);
        let addr = b.ins().iadd(p, off);
        b.ins().load(ty, mem(), addr, 0)
    };
    let a = load(b, acc, astep);
    let v = load(b, src, sstep);
    let r = step(b, d, op, a, v, fault)?;
    let off = b.ins().imul(x, ostep);
    let addr = b.ins().iadd(out, off);
    b.ins().store(mem(), r, addr, 0);
    let x1 = b.ins().iadd_imm_s(x, 1);
    b.ins().jump(hdr, &[arg(x1)]);

    b.switch_to_block(exit);
    b.ins().return_(&[]);
    Ok(())
}
