//! Target-neutral checks of a kernel's form, run by every backend before it emits code, so
//! that no renderer meets an inconsistent program: operands in order, sources that exist,
//! offsets of the kernel's spatial rank, and every value typed by the IR's own rules
//! ([`UnaryOp::result_dtype`](kiln_ir::UnaryOp::result_dtype),
//! [`BinaryOp::result_dtype`](kiln_ir::BinaryOp::result_dtype),
//! [`ReduceOp::accepts`](kiln_ir::ReduceOp::accepts)). Each check returns a message; a backend wraps it in its error.

use kiln_ir::{Border, DType};

use crate::kernel::{Kernel, KernelBody, Line, LineInit, LineKeep, Op, Source, Stage, ValueId};

/// Largest absolute column or row offset a load or an in-range test may use (a tensor never
/// has more elements than this).
pub const MAX_OFFSET: u64 = 1 << 40;

/// Checks a stencil kernel: at least one stage and one spatial axis; in every stage, each
/// value well typed from earlier values of its stage, inputs and earlier stages, and the
/// result a value of the stage; the last stage's dtype the kernel's output dtype.
pub fn check_stencil(kernel: &Kernel) -> Result<(), String> {
    let KernelBody::Stencil { stages } = &kernel.body else {
        return Err("not a stencil kernel".into());
    };
    if kernel.rank < 3 {
        return Err(format!("rank {} has no spatial axis", kernel.rank));
    }
    let Some(last) = stages.last() else {
        return Err("stencil kernel without stages".into());
    };
    for (si, st) in stages.iter().enumerate() {
        if st.result.0 as usize >= st.insts.len() {
            return Err(format!("stage {si}: result out of range"));
        }
        for i in 0..st.insts.len() {
            check_value(kernel, &stages[..si], st, i)
                .map_err(|m| format!("stage {si}, value {i}: {m}"))?;
        }
    }
    if last.dtype() != kernel.output {
        return Err(format!(
            "output {} but the last stage gives {}",
            kernel.output,
            last.dtype()
        ));
    }
    Ok(())
}

/// Checks value `i` of stage `st`, whose earlier stages are `earlier`.
fn check_value(kernel: &Kernel, earlier: &[Stage], st: &Stage, i: usize) -> Result<(), String> {
    let spatial = kernel.rank - 2;
    let inst = &st.insts[i];
    let d = inst.dtype;
    let operand = |v: &ValueId| match st.insts.get(v.0 as usize) {
        Some(x) if (v.0 as usize) < i => Ok(x.dtype),
        _ => Err(format!("operand {} is not an earlier value", v.0)),
    };
    let check_offset = |offset: &[i64]| {
        if offset.len() == spatial && offset.iter().all(|o| o.unsigned_abs() <= MAX_OFFSET) {
            Ok(())
        } else {
            Err(format!("bad offset {offset:?} for {spatial} spatial dims"))
        }
    };
    let typed = match &inst.op {
        Op::Load {
            source,
            offset,
            border,
        } => {
            let sd = match *source {
                Source::Input(n) => kernel.inputs.get(n as usize).copied(),
                Source::Stage(j) => earlier.get(j as usize).map(Stage::dtype),
            }
            .ok_or_else(|| format!("bad source {source:?}"))?;
            check_offset(offset)?;
            if let Border::Constant(c) = border {
                if c.dtype() != sd {
                    return Err(format!("border constant {c} on {sd} data"));
                }
            }
            sd == d
        }
        Op::InRange(offset) => {
            check_offset(offset)?;
            d == DType::Bool
        }
        Op::Const(c) => c.dtype() == d,
        Op::Unary(op, x) => op.result_dtype(operand(x)?) == Some(d),
        Op::Binary(op, a, b) => op.result_dtype(operand(a)?, operand(b)?) == Some(d),
        Op::Select(c, a, b) => operand(c)? == DType::Bool && operand(a)? == d && operand(b)? == d,
        Op::Cast(x) => {
            operand(x)?;
            true
        }
    };
    if typed {
        Ok(())
    } else {
        Err(format!("ill-typed {:?} as {d}", inst.op))
    }
}

/// Checks an extern kernel: one input, an axis of the kernel's rank, and the call's output
/// dtype equal to the kernel's.
pub fn check_extern(kernel: &Kernel) -> Result<&kiln_ir::ExternCall, String> {
    let KernelBody::Extern(call) = &kernel.body else {
        return Err("not an extern kernel".into());
    };
    if kernel.inputs.len() != 1 {
        return Err(format!(
            "an extern takes one input, got {}",
            kernel.inputs.len()
        ));
    }
    if call.axis >= kernel.rank {
        return Err(format!(
            "axis {} out of range for rank {}",
            call.axis, kernel.rank
        ));
    }
    if call.out != kernel.output {
        return Err(format!(
            "extern `{}` outputs {}, the kernel {}",
            call.name, call.out, kernel.output
        ));
    }
    Ok(call)
}

/// Checks a line kernel: one input, an axis of the kernel's rank, one initial value of each
/// carry's dtype (or a `First` seed: one carry of the input's dtype), a well-typed step of
/// `Const`/`Unary`/`Binary`/`Select`/`Cast` over the carries, `x` and earlier step values,
/// next carries of the carries' dtypes, and a kept value of the output's dtype (under
/// `First` with each `y` kept, the input's dtype too: the first output is the element).
pub fn check_line(kernel: &Kernel) -> Result<&Line, String> {
    let KernelBody::Line(line) = &kernel.body else {
        return Err("not a line kernel".into());
    };
    let [xd] = kernel.inputs[..] else {
        return Err(format!(
            "a line takes one input, got {}",
            kernel.inputs.len()
        ));
    };
    if line.axis >= kernel.rank {
        return Err(format!(
            "axis {} out of range for rank {}",
            line.axis, kernel.rank
        ));
    }
    match &line.init {
        LineInit::First => {
            if line.carries[..] != [xd] {
                return Err(format!("a first-element seed needs one {xd} carry"));
            }
            if line.keeps_each() && kernel.output != xd {
                return Err(format!(
                    "a seeded line of {xd} keeping each value cannot output {}",
                    kernel.output
                ));
            }
        }
        LineInit::Consts(c) => {
            if c.len() != line.carries.len()
                || c.iter().zip(&line.carries).any(|(c, d)| c.dtype() != *d)
            {
                return Err("initial values do not match the carries' dtypes".into());
            }
        }
    }
    let p = line.carries.len() + 1;
    let mut dtypes: Vec<DType> = line.carries.clone();
    dtypes.push(xd);
    for (j, inst) in line.step.iter().enumerate() {
        let i = p + j;
        let operand = |v: &ValueId| match dtypes.get(v.0 as usize) {
            Some(&d) if (v.0 as usize) < i => Ok(d),
            _ => Err(format!(
                "step value {i}: operand {} is not an earlier value",
                v.0
            )),
        };
        let d = inst.dtype;
        let typed = match &inst.op {
            Op::Const(c) => c.dtype() == d,
            Op::Unary(op, x) => op.result_dtype(operand(x)?) == Some(d),
            Op::Binary(op, a, b) => op.result_dtype(operand(a)?, operand(b)?) == Some(d),
            Op::Select(c, a, b) => {
                operand(c)? == DType::Bool && operand(a)? == d && operand(b)? == d
            }
            Op::Cast(x) => {
                operand(x)?;
                true
            }
            Op::Load { .. } | Op::InRange(_) => {
                return Err(format!("step value {i}: {:?} in a line step", inst.op))
            }
        };
        if !typed {
            return Err(format!("step value {i}: ill-typed {:?} as {d}", inst.op));
        }
        dtypes.push(d);
    }
    let ty = |v: ValueId| {
        dtypes
            .get(v.0 as usize)
            .copied()
            .ok_or_else(|| format!("value {} out of range", v.0))
    };
    if line.next.len() != line.carries.len() {
        return Err(format!(
            "{} next values for {} carries",
            line.next.len(),
            line.carries.len()
        ));
    }
    for (k, (&v, &d)) in line.next.iter().zip(&line.carries).enumerate() {
        if ty(v)? != d {
            return Err(format!("next carry {k} is {}, not {d}", ty(v)?));
        }
    }
    let kept = match line.keep {
        LineKeep::Each(v) => ty(v)?,
        LineKeep::Final(k) => *line
            .carries
            .get(k as usize)
            .ok_or_else(|| format!("kept carry {k} out of range"))?,
    };
    if kept != kernel.output {
        return Err(format!("keeps {kept} but outputs {}", kernel.output));
    }
    Ok(line)
}
