//! PTX rendering of a [`Line`] body: one thread per line, walking the axis sequentially.
//!
//! Declared inside `emit` (it uses that module's register allocator and scalar emitters,
//! the same ones that render stencil stages). Exactness: the step is rendered instruction
//! by instruction with those emitters (canonical NaN, kiln min/max, no contraction), and
//! each line is walked in its order by a single thread, so a line's values have the same
//! bits as the CPU's walk and eager's. Carries live in registers; the next carries are
//! copied through temporaries so that a step which permutes its carries stays correct.
//!
//! Limits: no parallelism inside a line; a seeded line (`LineInit::First`) along an empty
//! axis writes nothing (the launcher's shape checks keep that case out).

use super::Em;
use crate::kernel::{Direction, Kernel, Line, LineInit, LineKeep, Op};
use crate::{CodegenError, CompileOptions};

use super::super::BLOCK_1D;

/// Renders the entry `kiln_lines` for `line` (the body of `kernel`, already validated).
pub(super) fn render(
    kernel: &Kernel,
    line: &Line,
    options: &CompileOptions,
) -> Result<String, CodegenError> {
    let mut em = Em::new(kernel, options);
    let r = kernel.rank;
    let axis = line.axis;
    let (xd, yd) = (kernel.inputs[0], kernel.output);
    let (t32, c32, n32) = (em.r(), em.r(), em.r());
    let (li, step, total) = (em.rd(), em.rd(), em.rd());
    e!(em, "mov.u32 {t32}, %tid.x");
    e!(em, "mov.u32 {c32}, %ctaid.x");
    e!(em, "mov.u32 {n32}, %nctaid.x");
    let t64 = em.rd();
    e!(em, "mul.wide.u32 {li}, {c32}, {}", BLOCK_1D[0]);
    e!(em, "cvt.u64.u32 {t64}, {t32}");
    e!(em, "add.s64 {li}, {li}, {t64}");
    e!(em, "mul.wide.u32 {step}, {n32}, {}", BLOCK_1D[0]);
    e!(em, "mov.u64 {total}, 1");
    for k in 0..r {
        if k != axis {
            let n = em.dim(k);
            e!(em, "mul.lo.s64 {total}, {total}, {n}");
        }
    }
    let n_axis = em.dim(axis);
    let in_sa = em.in_stride(0, axis);
    let out_sa = em.out_stride(axis);
    let (lp, next_line, end) = (em.label("line"), em.label("nextline"), em.label("end"));
    em.put_label(&lp);
    let p = em.p();
    e!(em, "setp.ge.s64 {p}, {li}, {total}");
    e!(em, "@{p} bra {end}");
    let mut rest = li.clone();
    let (in_off, out_off) = (em.rd(), em.rd());
    e!(em, "mov.u64 {in_off}, 0");
    e!(em, "mov.u64 {out_off}, 0");
    for k in (0..r).rev() {
        if k == axis {
            continue;
        }
        let n = em.dim(k);
        let (q, c) = (em.rd(), em.rd());
        e!(em, "div.u64 {q}, {rest}, {n}");
        e!(em, "mul.lo.s64 {c}, {q}, {n}");
        e!(em, "sub.s64 {c}, {rest}, {c}");
        let (si, so) = (em.in_stride(0, k), em.out_stride(k));
        e!(em, "mad.lo.s64 {in_off}, {c}, {si}, {in_off}");
        e!(em, "mad.lo.s64 {out_off}, {c}, {so}, {out_off}");
        rest = q;
    }
    // First element in walking order, and signed byte steps.
    let each = line.keeps_each();
    let (istep, ostep) = (em.rd(), em.rd());
    e!(em, "mul.lo.s64 {istep}, {in_sa}, {}", xd.size_bytes());
    e!(em, "mul.lo.s64 {ostep}, {out_sa}, {}", yd.size_bytes());
    if !each {
        e!(em, "mov.u64 {ostep}, 0");
    }
    if line.direction == Direction::Backward {
        let last = em.rd();
        e!(em, "sub.s64 {last}, {n_axis}, 1");
        e!(em, "max.s64 {last}, {last}, 0");
        e!(em, "mad.lo.s64 {in_off}, {last}, {in_sa}, {in_off}");
        if each {
            e!(em, "mad.lo.s64 {out_off}, {last}, {out_sa}, {out_off}");
        }
        e!(em, "neg.s64 {istep}, {istep}");
        e!(em, "neg.s64 {ostep}, {ostep}");
    }
    let (ia, oa) = (em.rd(), em.rd());
    let in0 = em.ins[0].clone();
    let out = em.out.clone();
    e!(em, "mad.lo.s64 {ia}, {in_off}, {}, {in0}", xd.size_bytes());
    e!(em, "mad.lo.s64 {oa}, {out_off}, {}, {out}", yd.size_bytes());
    let carries: Vec<String> = line.carries.iter().map(|&d| em.reg(d)).collect();
    let i = em.rd();
    match &line.init {
        LineInit::First => {
            let q = em.p();
            e!(em, "setp.lt.s64 {q}, {n_axis}, 1");
            e!(em, "@{q} bra {next_line}");
            let x0 = em.load("global", xd, &ia, None);
            em.mov(xd, &carries[0], &x0);
            if each {
                em.store("global", yd, &oa, &x0);
            }
            e!(em, "mov.u64 {i}, 1");
            e!(em, "add.s64 {ia}, {ia}, {istep}");
            e!(em, "add.s64 {oa}, {oa}, {ostep}");
        }
        LineInit::Consts(cs) => {
            for ((c, reg), &d) in cs.iter().zip(&carries).zip(&line.carries) {
                let v = em.constant(*c);
                em.mov(d, reg, &v);
            }
            e!(em, "mov.u64 {i}, 0");
        }
    }
    let final_out = em.rd();
    e!(
        em,
        "mad.lo.s64 {final_out}, {out_off}, {}, {out}",
        yd.size_bytes()
    );
    let (la, ld) = (em.label("along"), em.label("alongdone"));
    em.put_label(&la);
    let q = em.p();
    e!(em, "setp.ge.s64 {q}, {i}, {n_axis}");
    e!(em, "@{q} bra {ld}");
    let x = em.load("global", xd, &ia, None);
    let mut vals: Vec<String> = carries.clone();
    vals.push(x);
    let mut dtypes = line.carries.clone();
    dtypes.push(xd);
    for inst in &line.step {
        let v = |id: crate::kernel::ValueId| vals[id.0 as usize].clone();
        let t = |id: crate::kernel::ValueId| dtypes[id.0 as usize];
        let d = inst.dtype;
        let r = match &inst.op {
            Op::Const(c) => em.constant(*c),
            Op::Unary(op, a) => em.unary(*op, t(*a), &v(*a)),
            Op::Binary(op, a, b) => em.binary(*op, t(*a), &v(*a), &v(*b)),
            Op::Select(c, a, b) => em.select(d, &v(*c), &v(*a), &v(*b)),
            Op::Cast(a) => em.cast(t(*a), d, &v(*a)),
            Op::Load { .. } | Op::InRange(_) => {
                return Err(super::super::err("a load in a line step"))
            }
        };
        vals.push(r);
        dtypes.push(d);
    }
    if let LineKeep::Each(y) = line.keep {
        em.store("global", yd, &oa, &vals[y.0 as usize]);
    }
    // Through temporaries: a step may permute its carries.
    let temps: Vec<String> = line
        .next
        .iter()
        .zip(&line.carries)
        .map(|(v, &d)| {
            let tmp = em.reg(d);
            em.mov(d, &tmp, &vals[v.0 as usize]);
            tmp
        })
        .collect();
    for ((reg, tmp), &d) in carries.iter().zip(&temps).zip(&line.carries) {
        em.mov(d, reg, tmp);
    }
    e!(em, "add.s64 {ia}, {ia}, {istep}");
    e!(em, "add.s64 {oa}, {oa}, {ostep}");
    e!(em, "add.s64 {i}, {i}, 1");
    e!(em, "bra {la}");
    em.put_label(&ld);
    if let LineKeep::Final(k) = line.keep {
        em.store("global", yd, &final_out, &carries[k as usize]);
    }
    em.put_label(&next_line);
    e!(em, "add.s64 {li}, {li}, {step}");
    e!(em, "bra {lp}");
    em.put_label(&end);
    Ok(em.finish("kiln_lines", ""))
}
