//! The dataflow graph: a flat vector of nodes addressed by typed ids.
//!
//! Nodes are appended in topological order by the builder (an operand always has a smaller
//! id than its user), so passes can walk `0..len` forwards or backwards without sorting.

use std::fmt;

use crate::types::{Border, DType, Scalar, TensorType};

/// Index of a node in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index into [`Graph::nodes`].
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Elementwise operations with one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Negation (floats: NaN results canonical; integers: wrapping).
    Neg,
    /// Absolute value (floats: NaN results canonical; unsigned: identity; signed: wrapping,
    /// so `abs(MIN) == MIN` as numpy).
    Abs,
    /// IEEE square root, correctly rounded (floats only).
    Sqrt,
    /// `x != x` (floats only), gives bool.
    IsNan,
    /// Neither NaN nor ±Inf (floats only), gives bool.
    IsFinite,
    /// Logical not (bool only).
    Not,
    /// `e^x` (floats only): the fixed sequence of `math::exp_f32` / `math::exp_f64`.
    Exp,
    /// Natural logarithm (floats only): the fixed sequence of `math::log_f32` / `log_f64`.
    Log,
}

/// Elementwise operations with two operands of the same type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// Addition (floats: IEEE round-to-nearest; integers: wrapping).
    Add,
    /// Subtraction (floats: IEEE; integers: wrapping).
    Sub,
    /// Multiplication (floats: IEEE; integers: wrapping).
    Mul,
    /// Division (floats: IEEE; integers: truncating toward zero, x/0 = 0, MIN/-1 = MIN).
    Div,
    /// kiln's lattice minimum (see SEMANTICS.md).
    Min,
    /// kiln's lattice maximum (see SEMANTICS.md).
    Max,
    /// Logical and (bool only).
    And,
    /// Logical or (bool only).
    Or,
    /// `a < b`, gives bool.
    Lt,
    /// `a <= b`, gives bool.
    Le,
    /// `a > b`, gives bool.
    Gt,
    /// `a >= b`, gives bool.
    Ge,
    /// `a == b` (IEEE: NaN != NaN, −0 == +0), gives bool.
    Eq,
    /// `a != b`, gives bool.
    Ne,
}

impl BinaryOp {
    /// The dtype of `op(a, b)` for operands of dtypes `a` and `b`, or `None` when the op does
    /// not take them: both operands of one dtype; add, sub, mul and div on every dtype but
    /// bool, and and or on bool only, min, max and the comparisons on every dtype. A
    /// comparison gives bool, every other op its operands' dtype.
    pub fn result_dtype(self, a: DType, b: DType) -> Option<DType> {
        let takes = a == b
            && match self {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => a != DType::Bool,
                BinaryOp::And | BinaryOp::Or => a == DType::Bool,
                _ => true,
            };
        takes.then_some(if self.is_comparison() { DType::Bool } else { a })
    }

    /// True for the six comparisons.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }

    /// True when `op(a, b) == op(b, a)` bit for bit.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinaryOp::Add
                | BinaryOp::Mul
                | BinaryOp::Min
                | BinaryOp::Max
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Eq
                | BinaryOp::Ne
        )
    }
}

/// Reductions over a window or an axis, and the combining step of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Lattice minimum, any order.
    Min,
    /// Lattice maximum, any order.
    Max,
    /// Sum as a left fold in the documented order (floats, u8 wrapping).
    Sum,
    /// Logical or (bool only).
    Any,
    /// Logical and (bool only).
    All,
}

impl ReduceOp {
    /// Whether the reduction accepts elements of `d`: min and max every dtype, sum every
    /// dtype but bool, any and all bool only.
    pub fn accepts(self, d: DType) -> bool {
        match self {
            ReduceOp::Min | ReduceOp::Max => true,
            ReduceOp::Sum => d != DType::Bool,
            ReduceOp::Any | ReduceOp::All => d == DType::Bool,
        }
    }

    /// The binary operation that combines two partial results.
    pub fn combiner(self) -> BinaryOp {
        match self {
            ReduceOp::Min => BinaryOp::Min,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Any => BinaryOp::Or,
            ReduceOp::All => BinaryOp::And,
        }
    }
}

/// A footprint: the ordered list of spatial offsets a window reduction visits.
/// The order is the reduction order for `Sum`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Footprint {
    /// Each entry has one offset per spatial dimension.
    pub offsets: Vec<Vec<i64>>,
}

impl Footprint {
    /// Offsets `offsets` along `axis` of a `rank`-axis footprint (0 along the others), in
    /// the given order.
    pub fn along_axis(rank: usize, axis: usize, offsets: &[i64]) -> Footprint {
        let offsets = offsets
            .iter()
            .map(|&o| {
                let mut v = vec![0; rank];
                v[axis] = o;
                v
            })
            .collect();
        Footprint { offsets }
    }

    /// A full box of `size` per axis, centred like scipy: offsets `j - size/2 - origin`
    /// for `j in 0..size`, in row-major order.
    pub fn scipy_box(size: &[usize], origin: &[i64]) -> Footprint {
        let mask: Vec<bool> = vec![true; size.iter().product()];
        Footprint::scipy_masked(size, &mask, origin)
    }

    /// The `true` entries of a row-major boolean mask of shape `size`, centred like scipy.
    pub fn scipy_masked(size: &[usize], mask: &[bool], origin: &[i64]) -> Footprint {
        let total: usize = size.iter().product();
        let mut offsets = Vec::new();
        for (flat, &on) in mask.iter().enumerate().take(total) {
            if !on {
                continue;
            }
            let mut rem = flat;
            let mut off = vec![0i64; size.len()];
            for ax in (0..size.len()).rev() {
                let j = rem % size[ax];
                rem /= size[ax];
                off[ax] = j as i64 - (size[ax] / 2) as i64 - origin[ax];
            }
            offsets.push(off);
        }
        Footprint { offsets }
    }

    /// Number of spatial dims of the offsets (0 for an empty footprint).
    pub fn rank(&self) -> usize {
        self.offsets.first().map_or(0, Vec::len)
    }
}

/// What a node computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// The `index`-th graph input.
    Input {
        /// Position among the graph's inputs.
        index: usize,
    },
    /// A tensor filled with one scalar.
    Constant {
        /// The fill value (its dtype is the node's dtype).
        value: Scalar,
    },
    /// Elementwise unary op.
    Unary {
        /// The operation.
        op: UnaryOp,
        /// Operand.
        x: NodeId,
    },
    /// Elementwise binary op on same-typed operands.
    Binary {
        /// The operation.
        op: BinaryOp,
        /// Left operand.
        a: NodeId,
        /// Right operand.
        b: NodeId,
    },
    /// `cond ? a : b` elementwise; `cond` is bool.
    Select {
        /// Condition.
        cond: NodeId,
        /// Value where `cond` holds.
        a: NodeId,
        /// Value elsewhere.
        b: NodeId,
    },
    /// Elementwise dtype conversion.
    Cast {
        /// Operand.
        x: NodeId,
        /// Target dtype.
        to: DType,
    },
    /// `out[b, c, i] = x[b, c, remap(i + offset)]` under a border mode.
    Gather {
        /// Source.
        x: NodeId,
        /// One offset per spatial dimension.
        offset: Vec<i64>,
        /// Border mode for out-of-range reads.
        border: Border,
    },
    /// A comparator network: wires `0..inputs.len()` carry the inputs, wires
    /// `inputs.len()..width` carry +∞ (the top of the order); each pair `(i, j)` with `i < j`
    /// puts the minimum on wire `i` and the maximum on wire `j`; the node's value is wire
    /// `output` after the last pair. Several kept wires are several nodes with equal pairs;
    /// the code generator shares their common comparators.
    Network {
        /// Values on the first wires (all the same type).
        inputs: Vec<NodeId>,
        /// Total number of wires (`>= inputs.len()`).
        width: u32,
        /// Compare-exchange pairs, applied in order.
        pairs: Vec<(u32, u32)>,
        /// The wire whose final value is the node's value.
        output: u32,
    },
    /// `out[i] = op over o in footprint of x[remap(i + o)]`.
    WindowReduce {
        /// Source.
        x: NodeId,
        /// Reduction.
        op: ReduceOp,
        /// Offsets visited, in reduction order.
        footprint: Footprint,
        /// Border mode for out-of-range reads.
        border: Border,
    },
    /// Inclusive scan along `axis` (any axis, batch and channel included).
    Scan {
        /// Source.
        x: NodeId,
        /// Axis index into the full shape.
        axis: usize,
        /// Combining operation.
        op: ReduceOp,
    },
    /// Reduction along `axis`, keeping it with length 1.
    AxisReduce {
        /// Source.
        x: NodeId,
        /// Axis index into the full shape.
        axis: usize,
        /// Reduction.
        op: ReduceOp,
    },
    /// A sequential recurrence along an axis (see [`crate::line`]).
    Line {
        /// Source.
        x: NodeId,
        /// The recurrence.
        program: crate::line::LineProgram,
    },
    /// A registered line function applied along an axis (see [`crate::extern_call`]).
    Extern {
        /// Source.
        x: NodeId,
        /// The call: name, axis, direction, output dtype, parameters.
        call: crate::extern_call::ExternCall,
    },
}

impl NodeKind {
    /// The operand node ids, in order.
    pub fn operands(&self) -> Vec<NodeId> {
        match self {
            NodeKind::Input { .. } | NodeKind::Constant { .. } => vec![],
            NodeKind::Unary { x, .. }
            | NodeKind::Cast { x, .. }
            | NodeKind::Gather { x, .. }
            | NodeKind::WindowReduce { x, .. }
            | NodeKind::Scan { x, .. }
            | NodeKind::AxisReduce { x, .. }
            | NodeKind::Line { x, .. }
            | NodeKind::Extern { x, .. } => vec![*x],
            NodeKind::Binary { a, b, .. } => vec![*a, *b],
            NodeKind::Select { cond, a, b } => vec![*cond, *a, *b],
            NodeKind::Network { inputs, .. } => inputs.clone(),
        }
    }

    /// Rewrites every operand id through `f`.
    pub fn map_operands(&mut self, mut f: impl FnMut(NodeId) -> NodeId) {
        match self {
            NodeKind::Input { .. } | NodeKind::Constant { .. } => {}
            NodeKind::Unary { x, .. }
            | NodeKind::Cast { x, .. }
            | NodeKind::Gather { x, .. }
            | NodeKind::WindowReduce { x, .. }
            | NodeKind::Scan { x, .. }
            | NodeKind::AxisReduce { x, .. }
            | NodeKind::Line { x, .. }
            | NodeKind::Extern { x, .. } => *x = f(*x),
            NodeKind::Binary { a, b, .. } => {
                *a = f(*a);
                *b = f(*b);
            }
            NodeKind::Select { cond, a, b } => {
                *cond = f(*cond);
                *a = f(*a);
                *b = f(*b);
            }
            NodeKind::Network { inputs, .. } => {
                for x in inputs {
                    *x = f(*x);
                }
            }
        }
    }

    /// Short name of the node kind, as the printer writes it.
    pub fn name(&self) -> &'static str {
        match self {
            NodeKind::Input { .. } => "input",
            NodeKind::Constant { .. } => "const",
            NodeKind::Unary { .. } => "unary",
            NodeKind::Binary { .. } => "binary",
            NodeKind::Select { .. } => "select",
            NodeKind::Cast { .. } => "cast",
            NodeKind::Gather { .. } => "gather",
            NodeKind::Network { .. } => "network",
            NodeKind::WindowReduce { .. } => "window",
            NodeKind::Scan { .. } => "scan",
            NodeKind::AxisReduce { .. } => "reduce",
            NodeKind::Line { .. } => "line",
            NodeKind::Extern { .. } => "extern",
        }
    }

    /// True for nodes that compute each output element from operand elements at the same
    /// index only (unary, binary, select, cast, network, constant).
    pub fn is_pointwise(&self) -> bool {
        matches!(
            self,
            NodeKind::Constant { .. }
                | NodeKind::Unary { .. }
                | NodeKind::Binary { .. }
                | NodeKind::Select { .. }
                | NodeKind::Cast { .. }
                | NodeKind::Network { .. }
        )
    }
}

/// A node: what it computes and the type of its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The operation.
    pub kind: NodeKind,
    /// The inferred type of the result.
    pub ty: TensorType,
}

/// A validated dataflow graph. Build one with [`crate::GraphBuilder`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Graph {
    /// Nodes in topological order.
    pub nodes: Vec<Node>,
    /// Types of the graph inputs, by input index.
    pub inputs: Vec<TensorType>,
    /// The nodes whose values the graph returns, in order.
    pub outputs: Vec<NodeId>,
}

impl Graph {
    /// The node with id `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// For each node, the ids of the nodes that use it (with repetition for repeated use).
    pub fn users(&self) -> Vec<Vec<NodeId>> {
        let mut users = vec![Vec::new(); self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for op in n.kind.operands() {
                users[op.index()].push(NodeId(i as u32));
            }
        }
        users
    }
}

impl UnaryOp {
    /// The dtype of `op(x)` for an operand of dtype `x`, or `None` when the op does not take
    /// it: neg and abs every dtype but bool, sqrt f32 and f64 (each the operand's dtype);
    /// is_nan and is_finite f32 and f64, not bool only (each giving bool).
    pub fn result_dtype(self, x: DType) -> Option<DType> {
        match self {
            UnaryOp::Neg | UnaryOp::Abs => (x != DType::Bool).then_some(x),
            UnaryOp::Sqrt => x.is_float().then_some(x),
            UnaryOp::IsNan | UnaryOp::IsFinite => x.is_float().then_some(DType::Bool),
            UnaryOp::Not => (x == DType::Bool).then_some(DType::Bool),
            UnaryOp::Exp | UnaryOp::Log => x.is_float().then_some(x),
        }
    }

    /// All unary ops, in a fixed order.
    pub const ALL: [UnaryOp; 8] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sqrt,
        UnaryOp::IsNan,
        UnaryOp::IsFinite,
        UnaryOp::Not,
        UnaryOp::Exp,
        UnaryOp::Log,
    ];

    /// Lower-case mnemonic used by the text form (`neg`, `is_nan`, ...).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::IsNan => "is_nan",
            UnaryOp::IsFinite => "is_finite",
            UnaryOp::Not => "not",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
        }
    }

    /// Parses a mnemonic produced by [`UnaryOp::name`].
    pub fn from_name(s: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|op| op.name() == s)
    }
}

impl BinaryOp {
    /// All binary ops, in a fixed order.
    pub const ALL: [BinaryOp; 14] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Min,
        BinaryOp::Max,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::Eq,
        BinaryOp::Ne,
    ];

    /// Lower-case mnemonic used by the text form (`add`, `lt`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Min => "min",
            BinaryOp::Max => "max",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
        }
    }

    /// Parses a mnemonic produced by [`BinaryOp::name`].
    pub fn from_name(s: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|op| op.name() == s)
    }
}

impl ReduceOp {
    /// All reduction ops, in a fixed order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Sum,
        ReduceOp::Any,
        ReduceOp::All,
    ];

    /// Lower-case mnemonic used by the text form (`min`, `sum`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Sum => "sum",
            ReduceOp::Any => "any",
            ReduceOp::All => "all",
        }
    }

    /// Parses a mnemonic produced by [`ReduceOp::name`].
    pub fn from_name(s: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|op| op.name() == s)
    }
}
