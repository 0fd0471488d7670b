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
    /// Inclusive scan of input 0 along `axis`.
    Scan {
        /// Axis into the full shape.
        axis: usize,
        /// Combining op.
        op: ReduceOp,
    },
    /// Reduction of input 0 along `axis` (kept with length 1), left to right.
    AxisReduce {
        /// Axis into the full shape.
        axis: usize,
        /// Reduction.
        op: ReduceOp,
    },
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
