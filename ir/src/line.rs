//! Line programs: the IR form of a sequential recurrence along one axis
//! ([`NodeKind::Line`](crate::NodeKind::Line)).
//!
//! Every line (an index tuple of the other axes) walks `axis` forward or backward; at each
//! position the step runs from `(carries, x)` to `(carries', y)`, as ordinary scalar ops with
//! kiln's semantics (SEMANTICS.md). Step operands are numbered like the kernel form's line
//! body: `0..carries.len()` are the carries, `carries.len()` is `x`, and then one number per
//! step op in order. Exactness is the executors' business: they run each line in its order,
//! op by op, so the program itself fixes every result bit.
//!
//! Limits: the carries start at constants (a scan seeded by its first element is the
//! [`Scan`](crate::NodeKind::Scan) node); no loads, so a step sees only the current element.

use crate::graph::{BinaryOp, UnaryOp};
use crate::types::{DType, Scalar};

/// One step op; operands are step value numbers (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LineOp {
    /// A constant.
    Const(Scalar),
    /// Elementwise unary op.
    Unary(UnaryOp, u32),
    /// Elementwise binary op.
    Binary(BinaryOp, u32, u32),
    /// `c ? a : b`.
    Select(u32, u32, u32),
    /// Conversion to `to`.
    Cast(u32, DType),
}

/// What a line node outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineKeep {
    /// Step value `y` at every position (the input's shape).
    Each(u32),
    /// Carry `k` after the last position (the axis kept with length 1).
    Final(u32),
}

/// A recurrence along `axis`; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LineProgram {
    /// Axis into the full shape.
    pub axis: usize,
    /// Walk from the last index down.
    pub backward: bool,
    /// Initial carries; their dtypes are the carries' dtypes.
    pub init: Vec<Scalar>,
    /// The step ops.
    pub step: Vec<LineOp>,
    /// The next carries (step value numbers), one per carry.
    pub next: Vec<u32>,
    /// What is output.
    pub keep: LineKeep,
}

impl LineProgram {
    /// Dtypes of every step value (carries, `x`, then each op) for input elements of `x`,
    /// or why the program is ill-formed: operands that are not earlier values, ops that do
    /// not take their operands' dtypes, next carries of the wrong dtype, a kept value out of
    /// range.
    pub fn value_dtypes(&self, x: DType) -> Result<Vec<DType>, String> {
        let mut d: Vec<DType> = self.init.iter().map(|s| s.dtype()).collect();
        d.push(x);
        for (j, op) in self.step.iter().enumerate() {
            let i = d.len();
            let o = |v: u32| {
                d.get(v as usize)
                    .copied()
                    .ok_or_else(|| format!("step op {j}: operand {v} is not an earlier value"))
            };
            let r = match op {
                LineOp::Const(c) => Some(c.dtype()),
                LineOp::Unary(op, a) => op.result_dtype(o(*a)?),
                LineOp::Binary(op, a, b) => op.result_dtype(o(*a)?, o(*b)?),
                LineOp::Select(c, a, b) => {
                    let (c, a, b) = (o(*c)?, o(*a)?, o(*b)?);
                    (c == DType::Bool && a == b).then_some(a)
                }
                LineOp::Cast(a, to) => {
                    o(*a)?;
                    Some(*to)
                }
            };
            let r = r.ok_or_else(|| format!("step op {j} ({op:?}) is ill-typed"))?;
            debug_assert_eq!(i, d.len());
            d.push(r);
        }
        if self.next.len() != self.init.len() {
            return Err(format!(
                "{} next values for {} carries",
                self.next.len(),
                self.init.len()
            ));
        }
        for (k, (&v, c)) in self.next.iter().zip(&self.init).enumerate() {
            match d.get(v as usize) {
                Some(&t) if t == c.dtype() => {}
                _ => return Err(format!("next carry {k} is not a {} value", c.dtype())),
            }
        }
        Ok(d)
    }

    /// The output dtype for input elements of `x` (checks the program, see
    /// [`LineProgram::value_dtypes`]).
    pub fn output_dtype(&self, x: DType) -> Result<DType, String> {
        let d = self.value_dtypes(x)?;
        match self.keep {
            LineKeep::Each(v) => d.get(v as usize).copied(),
            LineKeep::Final(k) => self.init.get(k as usize).map(|s| s.dtype()),
        }
        .ok_or_else(|| format!("kept value {:?} out of range", self.keep))
    }
}
