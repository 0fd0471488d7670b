//! A readable text form of the kernel form, for `kiln dump` and test failure messages.
//!
//! ```text
//! kernel rank 4 (f32, u8) -> f32
//! stage 0 -> f32
//!   v0: f32 = load in0 [-1, 0] constant(f32:0.0)
//!   v1: bool = in_range [1, 0]
//!   v2: f32 = min v0 v3
//!   return v2
//! ```

use std::fmt;

use crate::kernel::{
    Direction, Inst, Kernel, KernelBody, Line, LineInit, LineKeep, Op, Source, Stage, ValueId,
};

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Input(i) => write!(f, "in{i}"),
            Source::Stage(s) => write!(f, "stage{s}"),
        }
    }
}

fn offsets(o: &[i64]) -> String {
    let parts: Vec<String> = o.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn lower_name(s: impl fmt::Debug) -> String {
    format!("{s:?}").to_lowercase()
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Load {
                source,
                offset,
                border,
            } => write!(f, "load {source} {} {border}", offsets(offset)),
            Op::InRange(o) => write!(f, "in_range {}", offsets(o)),
            Op::Const(s) => write!(f, "const {s}"),
            Op::Unary(op, a) => write!(f, "{} {a}", lower_name(op)),
            Op::Binary(op, a, b) => write!(f, "{} {a} {b}", lower_name(op)),
            Op::Select(c, a, b) => write!(f, "select {c} {a} {b}"),
            Op::Cast(a) => write!(f, "cast {a}"),
        }
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.dtype, self.op)
    }
}

impl fmt::Display for Stage {
    /// The instructions, one per line and indented, then `return vN`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, inst) in self.insts.iter().enumerate() {
            writeln!(f, "  v{i}: {inst}")?;
        }
        writeln!(f, "  return {}", self.result)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins: Vec<&str> = self.inputs.iter().map(|d| d.name()).collect();
        writeln!(
            f,
            "kernel rank {} ({}) -> {}",
            self.rank,
            ins.join(", "),
            self.output
        )?;
        match &self.body {
            KernelBody::Stencil { stages } => {
                for (k, stage) in stages.iter().enumerate() {
                    if stage.insts.get(stage.result.0 as usize).is_some() {
                        writeln!(f, "stage {k} -> {}", stage.dtype())?;
                    } else {
                        writeln!(f, "stage {k} -> ?")?;
                    }
                    write!(f, "{stage}")?;
                }
                Ok(())
            }
            KernelBody::Line(line) => write!(f, "{line}"),
            KernelBody::Extern(call) => {
                let dir = if call.backward { "backward" } else { "forward" };
                let params: Vec<String> = call.params.iter().map(|p| p.to_string()).collect();
                writeln!(
                    f,
                    "extern {} axis {} {dir} -> {} params [{}]",
                    call.name,
                    call.axis,
                    call.out,
                    params.join(", ")
                )
            }
        }
    }
}

impl fmt::Display for Line {
    /// `scan axis A op` / `reduce axis A op` for the plain folds; otherwise the header, the
    /// step (`c0..`, `x`, then `vN`), the next carries and what is kept.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((scan, op)) = self.as_fold() {
            let kind = if scan { "scan" } else { "reduce" };
            return writeln!(f, "{kind} axis {} {}", self.axis, lower_name(op));
        }
        let dir = match self.direction {
            Direction::Forward => "forward",
            Direction::Backward => "backward",
        };
        let carries: Vec<&str> = self.carries.iter().map(|d| d.name()).collect();
        let init = match &self.init {
            LineInit::First => "first".to_string(),
            LineInit::Consts(c) => {
                let c: Vec<String> = c.iter().map(ToString::to_string).collect();
                format!("[{}]", c.join(", "))
            }
        };
        writeln!(
            f,
            "line axis {} {dir} carries ({}) init {init}",
            self.axis,
            carries.join(", ")
        )?;
        let p = self.carries.len() + 1;
        for (j, inst) in self.step.iter().enumerate() {
            writeln!(f, "  v{}: {inst}", p + j)?;
        }
        let next: Vec<String> = self.next.iter().map(ToString::to_string).collect();
        writeln!(
            f,
            "  next ({}); v0..v{} carries, v{} x",
            next.join(", "),
            p - 2,
            p - 1
        )?;
        match self.keep {
            LineKeep::Each(v) => writeln!(f, "  keep each {v}"),
            LineKeep::Final(k) => writeln!(f, "  keep final carry {k}"),
        }
    }
}
