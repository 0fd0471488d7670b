//! The kernel form: the target-neutral description of one fused kernel.
//!
//! It is what every renderer consumes (Cranelift for CPU, PTX text for CUDA). It says *what*
//! each output point is (a small SSA program per stage), never *how* points are visited:
//! the visiting order (rows and row pointers on CPU, a 2-D thread grid and shared-memory
//! tiles on GPU) belongs to each backend's schedule.
//!
//! A kernel contains no tensor sizes or strides: those are run-time arguments, so one
//! compiled kernel serves every shape of the same rank and dtypes. All tensors of a stencil
//! kernel (inputs, stages, output) share one shape.

use kiln_ir::{BinaryOp, Border, DType, ReduceOp, Scalar, UnaryOp};

/// Index of an instruction's value within its stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// Where a load reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The kernel's `n`-th input tensor (materialised in memory).
    Input(u32),
    /// An earlier stage of the same kernel (held in a tile with a halo).
    Stage(u32),
}

/// One SSA instruction of a stage program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `source[b, c, remap(i + offset)]`; `offset` has one entry per spatial dim.
    Load {
        /// Tensor read.
        source: Source,
        /// Spatial offset relative to the point being computed.
        offset: Vec<i64>,
        /// Border mode on the source's shape.
        border: Border,
    },
    /// True when the point plus `offset` lies inside the tensor shape along every spatial
    /// axis. Used to inline a pointwise producer read through a constant border exactly:
    /// `select(in_range(o), f(x at o), cval)`.
    InRange(Vec<i64>),
    /// A constant.
    Const(Scalar),
    /// Elementwise unary op (semantics of `kiln_ir::semantics`).
    Unary(UnaryOp, ValueId),
    /// Elementwise binary op.
    Binary(BinaryOp, ValueId, ValueId),
    /// `c ? a : b`.
    Select(ValueId, ValueId, ValueId),
    /// Dtype conversion to the instruction's dtype.
    Cast(ValueId),
}

/// An instruction and the dtype of its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Inst {
    /// What it computes.
    pub op: Op,
    /// The dtype of the result.
    pub dtype: DType,
}

/// A stage: an SSA program computing the stage's value at one point. Operands always refer
/// to earlier instructions of the same stage.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stage {
    /// Instructions in dependency order, without duplicates (hash-consed).
    pub insts: Vec<Inst>,
    /// The instruction whose value is the stage's value.
    pub result: ValueId,
}

impl Stage {
    /// The dtype of the stage's value.
    pub fn dtype(&self) -> DType {
        self.insts[self.result.0 as usize].dtype
    }
}

/// The body of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KernelBody {
    /// Stages in order; stage `j` may load from inputs and from stages `< j`; the last stage
    /// is the kernel's output.
    Stencil {
        /// The stages.
        stages: Vec<Stage>,
    },
    /// A recurrence along one axis of input 0 (scans and axis reductions among others).
    Line(Line),
    /// A registered extern line function along one axis of input 0 (see
    /// `kiln_ir::extern_call`): the kernel form holds only the call; the CPU runtime looks
    /// the function up by name when it runs, and the PTX renderer refuses it
    /// ([`crate::CodegenError::ExternUnsupported`]). The output has the input's shape and
    /// dtype `call.out` (the kernel's output dtype).
    Extern(kiln_ir::ExternCall),
}

/// Which way a [`Line`] walks its axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From index 0 up.
    Forward,
    /// From the last index down.
    Backward,
}

/// How the carried values of a [`Line`] start.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LineInit {
    /// Each carry starts at its constant (one per carry, of the carry's dtype); the step
    /// runs at every position.
    Consts(Vec<Scalar>),
    /// The line's first element (in walking order) seeds the only carry, which has the
    /// input's dtype; where each `y` is kept, the first output is that element, bit for bit.
    /// The step runs from the second position on. The axis must not be empty.
    First,
}

/// What a [`Line`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineKeep {
    /// The step value `y` at every position (the output has the input's shape).
    Each(ValueId),
    /// Carry `k` after the last position (the output has length 1 along the axis).
    Final(u32),
}

/// A sequential recurrence along `axis`: every line (an index tuple of the other axes) walks
/// the axis in `direction`, and at each position `x` (the input element) runs `step` from
/// `(carry, x)` to `(carry', y)`.
///
/// The step is ordinary kernel-form SSA with shifted numbering: `ValueId(k)` for
/// `k < carries.len()` is carry `k`, `ValueId(carries.len())` is `x`, and
/// `ValueId(carries.len() + 1 + j)` is `step[j]`. Only `Const`, `Unary`, `Binary`, `Select`
/// and `Cast` appear in a step (checked by [`crate::validate`]). Lines are independent, so a
/// backend may run them in any order or in parallel; along a line the order is fixed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Line {
    /// Axis into the full shape.
    pub axis: usize,
    /// Walking direction.
    pub direction: Direction,
    /// Dtypes of the carried values.
    pub carries: Vec<DType>,
    /// Initial carries.
    pub init: LineInit,
    /// The step program.
    pub step: Vec<Inst>,
    /// The next carries, one per carry.
    pub next: Vec<ValueId>,
    /// What is written.
    pub keep: LineKeep,
}

impl Line {
    /// Value id of step instruction `j`.
    pub fn step_value(&self, j: usize) -> ValueId {
        ValueId((self.carries.len() + 1 + j) as u32)
    }

    /// Value id of the input element `x`.
    pub fn x_value(&self) -> ValueId {
        ValueId(self.carries.len() as u32)
    }

    /// True when the output has the input's length along the axis (each `y` kept).
    pub fn keeps_each(&self) -> bool {
        matches!(self.keep, LineKeep::Each(_))
    }

    /// The inclusive scan of `dtype` values by `op` along `axis`, left to right: seeded by
    /// the first element, `carry' = y = op(carry, x)`.
    pub fn scan(axis: usize, op: ReduceOp, dtype: DType) -> Line {
        Line::fold(axis, op, dtype, true)
    }

    /// The left-to-right reduction of `dtype` values by `op` along `axis` (the output keeps
    /// the axis with length 1).
    pub fn reduce(axis: usize, op: ReduceOp, dtype: DType) -> Line {
        Line::fold(axis, op, dtype, false)
    }

    /// `Some((true, op))` when `self` is [`Line::scan`] of `op`, `Some((false, op))` when
    /// it is [`Line::reduce`] of `op`.
    pub fn as_fold(&self) -> Option<(bool, ReduceOp)> {
        let d = *self.carries.first()?;
        let ops = [
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::Sum,
            ReduceOp::Any,
            ReduceOp::All,
        ];
        ops.into_iter().find_map(|op| {
            if *self == Line::scan(self.axis, op, d) {
                Some((true, op))
            } else if *self == Line::reduce(self.axis, op, d) {
                Some((false, op))
            } else {
                None
            }
        })
    }

    fn fold(axis: usize, op: ReduceOp, dtype: DType, scan: bool) -> Line {
        let step = vec![Inst {
            op: Op::Binary(op.combiner(), ValueId(0), ValueId(1)),
            dtype,
        }];
        Line {
            axis,
            direction: Direction::Forward,
            carries: vec![dtype],
            init: LineInit::First,
            step,
            next: vec![ValueId(2)],
            keep: if scan {
                LineKeep::Each(ValueId(2))
            } else {
                LineKeep::Final(0)
            },
        }
    }
}

/// One fused kernel in target-neutral form. Its structure (`Hash`/`Eq`) is the kernel cache
/// key together with the target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    /// Full tensor rank (2 + spatial dims).
    pub rank: usize,
    /// Dtypes of the input tensors.
    pub inputs: Vec<DType>,
    /// Dtype of the output tensor.
    pub output: DType,
    /// What the kernel computes.
    pub body: KernelBody,
}
