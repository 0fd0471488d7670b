//! The typed graph builder: every method validates its arguments, infers the result type and
//! appends one node, or returns a [`BuildError`] naming the node and the problem.

use crate::error::{dtypes, BuildError};
use crate::graph::{BinaryOp, Footprint, Graph, Node, NodeId, NodeKind, ReduceOp, UnaryOp};
use crate::types::{Border, DType, Scalar, TensorType, MAX_ELEMENTS, MAX_SPATIAL_DIMS};

/// Largest absolute spatial offset a gather or footprint may use.
pub const MAX_OFFSET: i64 = 1 << 20;
/// Largest number of wires in a comparator network.
pub const MAX_NETWORK_WIDTH: u32 = 4096;
/// Largest number of offsets in a footprint.
pub const MAX_FOOTPRINT: usize = 1 << 16;

/// Builds a [`Graph`] node by node with validation and type inference.
#[derive(Clone, Debug, Default)]
pub struct GraphBuilder {
    graph: Graph,
}

/// Checks that `shape` is a valid kiln tensor shape.
pub fn check_shape(shape: &[usize]) -> Result<(), String> {
    if shape.len() < 3 {
        return Err(format!(
            "need [B, C, S1..Sd] with at least one spatial dim, got rank {}",
            shape.len()
        ));
    }
    if shape.len() - 2 > MAX_SPATIAL_DIMS {
        return Err(format!(
            "{} spatial dims, at most {MAX_SPATIAL_DIMS} are supported",
            shape.len() - 2
        ));
    }
    if shape.contains(&0) {
        return Err("empty tensors (a zero dimension) are not supported".into());
    }
    let mut n: usize = 1;
    for &d in shape {
        n = n
            .checked_mul(d)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| format!("more than {MAX_ELEMENTS} elements"))?;
    }
    Ok(())
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id the next node will get.
    fn next_id(&self) -> u32 {
        self.graph.nodes.len() as u32
    }

    /// The type of an existing node.
    pub fn ty(&self, id: NodeId) -> Option<&TensorType> {
        self.graph.nodes.get(id.index()).map(|n| &n.ty)
    }

    fn operand(&self, id: NodeId, kind: &'static str) -> Result<&TensorType, BuildError> {
        self.ty(id).ok_or(BuildError::UnknownOperand {
            node: self.next_id(),
            kind,
            operand: id.0,
        })
    }

    fn same_shape(
        &self,
        a: &TensorType,
        b: &TensorType,
        kind: &'static str,
    ) -> Result<(), BuildError> {
        if a.shape != b.shape {
            return Err(BuildError::ShapeMismatch {
                node: self.next_id(),
                kind,
                left: a.shape.clone(),
                right: b.shape.clone(),
            });
        }
        Ok(())
    }

    fn push(&mut self, kind: NodeKind, ty: TensorType) -> NodeId {
        let id = NodeId(self.next_id());
        self.graph.nodes.push(Node { kind, ty });
        id
    }

    fn check_border(
        &self,
        border: &Border,
        dtype: DType,
        kind: &'static str,
    ) -> Result<(), BuildError> {
        if let Border::Constant(c) = border {
            if c.dtype() != dtype {
                return Err(BuildError::dtype(
                    self.next_id(),
                    kind,
                    format!("border constant is {}, source is {dtype}", c.dtype()),
                ));
            }
        }
        Ok(())
    }

    fn check_offset(
        &self,
        off: &[i64],
        ty: &TensorType,
        kind: &'static str,
    ) -> Result<(), BuildError> {
        if off.len() != ty.spatial_rank() {
            return Err(BuildError::invalid(
                self.next_id(),
                kind,
                format!(
                    "offset {off:?} has {} entries, source has {} spatial dims",
                    off.len(),
                    ty.spatial_rank()
                ),
            ));
        }
        if off.iter().any(|o| o.unsigned_abs() > MAX_OFFSET as u64) {
            return Err(BuildError::invalid(
                self.next_id(),
                kind,
                format!("offset {off:?} exceeds ±{MAX_OFFSET}"),
            ));
        }
        Ok(())
    }

    /// Adds a graph input of the given type; inputs are numbered in the order they are added.
    pub fn input(&mut self, dtype: DType, shape: &[usize]) -> Result<NodeId, BuildError> {
        check_shape(shape).map_err(|problem| BuildError::BadShape {
            node: self.next_id(),
            kind: "input",
            shape: shape.to_vec(),
            problem,
        })?;
        let ty = TensorType {
            dtype,
            shape: shape.to_vec(),
        };
        let index = self.graph.inputs.len();
        self.graph.inputs.push(ty.clone());
        Ok(self.push(NodeKind::Input { index }, ty))
    }

    /// A tensor of `shape` filled with `value`.
    pub fn constant(&mut self, value: Scalar, shape: &[usize]) -> Result<NodeId, BuildError> {
        check_shape(shape).map_err(|problem| BuildError::BadShape {
            node: self.next_id(),
            kind: "const",
            shape: shape.to_vec(),
            problem,
        })?;
        let ty = TensorType {
            dtype: value.dtype(),
            shape: shape.to_vec(),
        };
        Ok(self.push(NodeKind::Constant { value }, ty))
    }

    /// A constant with the shape of `like`.
    pub fn constant_like(&mut self, value: Scalar, like: NodeId) -> Result<NodeId, BuildError> {
        let shape = self.operand(like, "const")?.shape.clone();
        self.constant(value, &shape)
    }

    /// Elementwise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> Result<NodeId, BuildError> {
        const K: &str = "unary";
        let tx = self.operand(x, K)?.clone();
        let d = tx.dtype;
        let Some(out) = op.result_dtype(d) else {
            return Err(self.op_dtype_error(K, &op, d, |t| op.result_dtype(t).is_some()));
        };
        Ok(self.push(
            NodeKind::Unary { op, x },
            TensorType {
                dtype: out,
                shape: tx.shape,
            },
        ))
    }

    /// Elementwise binary op; operands must have equal shapes and dtypes.
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> Result<NodeId, BuildError> {
        const K: &str = "binary";
        let ta = self.operand(a, K)?.clone();
        let tb = self.operand(b, K)?.clone();
        self.same_shape(&ta, &tb, K)?;
        if ta.dtype != tb.dtype {
            return Err(BuildError::dtype(
                self.next_id(),
                K,
                format!("{op:?} operands differ: {} vs {}", ta.dtype, tb.dtype),
            ));
        }
        let d = ta.dtype;
        let Some(out) = op.result_dtype(d, d) else {
            return Err(self.op_dtype_error(K, &op, d, |t| op.result_dtype(t, t).is_some()));
        };
        Ok(self.push(
            NodeKind::Binary { op, a, b },
            TensorType {
                dtype: out,
                shape: ta.shape,
            },
        ))
    }

    /// `cond ? a : b` elementwise.
    pub fn select(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> Result<NodeId, BuildError> {
        const K: &str = "select";
        let tc = self.operand(cond, K)?.clone();
        let ta = self.operand(a, K)?.clone();
        let tb = self.operand(b, K)?.clone();
        if tc.dtype != DType::Bool {
            return Err(BuildError::dtype(
                self.next_id(),
                K,
                format!("condition must be bool, got {}", tc.dtype),
            ));
        }
        self.same_shape(&tc, &ta, K)?;
        self.same_shape(&ta, &tb, K)?;
        if ta.dtype != tb.dtype {
            return Err(BuildError::dtype(
                self.next_id(),
                K,
                format!("branches differ: {} vs {}", ta.dtype, tb.dtype),
            ));
        }
        Ok(self.push(NodeKind::Select { cond, a, b }, ta))
    }

    /// Elementwise cast to `to`.
    pub fn cast(&mut self, x: NodeId, to: DType) -> Result<NodeId, BuildError> {
        let tx = self.operand(x, "cast")?.clone();
        Ok(self.push(
            NodeKind::Cast { x, to },
            TensorType {
                dtype: to,
                shape: tx.shape,
            },
        ))
    }

    /// `x` shifted by `offset` (one entry per spatial dim) under `border`.
    pub fn gather(
        &mut self,
        x: NodeId,
        offset: &[i64],
        border: Border,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "gather";
        let tx = self.operand(x, K)?.clone();
        self.check_offset(offset, &tx, K)?;
        self.check_border(&border, tx.dtype, K)?;
        Ok(self.push(
            NodeKind::Gather {
                x,
                offset: offset.to_vec(),
                border,
            },
            tx,
        ))
    }

    /// A comparator network over `inputs` (see [`NodeKind::Network`]).
    pub fn network(
        &mut self,
        inputs: &[NodeId],
        width: u32,
        pairs: &[(u32, u32)],
        output: u32,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "network";
        let id = self.next_id();
        let first = *inputs
            .first()
            .ok_or_else(|| BuildError::invalid(id, K, "a network needs at least one input"))?;
        let t0 = self.operand(first, K)?.clone();
        for &x in inputs {
            let t = self.operand(x, K)?.clone();
            self.same_shape(&t0, &t, K)?;
            if t.dtype != t0.dtype {
                return Err(BuildError::dtype(
                    id,
                    K,
                    format!("inputs differ: {} vs {}", t0.dtype, t.dtype),
                ));
            }
        }
        if width < inputs.len() as u32 || width > MAX_NETWORK_WIDTH {
            return Err(BuildError::invalid(
                id,
                K,
                format!(
                    "width {width} must be in {}..={MAX_NETWORK_WIDTH}",
                    inputs.len()
                ),
            ));
        }
        for &(i, j) in pairs {
            if i >= j || j >= width {
                return Err(BuildError::invalid(
                    id,
                    K,
                    format!("pair ({i}, {j}) must satisfy i < j < width {width}"),
                ));
            }
        }
        if output >= width {
            return Err(BuildError::invalid(
                id,
                K,
                format!("output wire {output} >= width {width}"),
            ));
        }
        Ok(self.push(
            NodeKind::Network {
                inputs: inputs.to_vec(),
                width,
                pairs: pairs.to_vec(),
                output,
            },
            t0,
        ))
    }

    /// A window reduction of `x` over `footprint` under `border`.
    pub fn window_reduce(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        footprint: &Footprint,
        border: Border,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "window";
        let tx = self.operand(x, K)?.clone();
        let id = self.next_id();
        if footprint.offsets.is_empty() {
            return Err(BuildError::invalid(id, K, "empty footprint"));
        }
        if footprint.offsets.len() > MAX_FOOTPRINT {
            return Err(BuildError::invalid(
                id,
                K,
                format!(
                    "footprint of {} offsets, at most {MAX_FOOTPRINT}",
                    footprint.offsets.len()
                ),
            ));
        }
        for off in &footprint.offsets {
            self.check_offset(off, &tx, K)?;
        }
        self.check_reduce_dtype(op, tx.dtype, K)?;
        self.check_border(&border, tx.dtype, K)?;
        Ok(self.push(
            NodeKind::WindowReduce {
                x,
                op,
                footprint: footprint.clone(),
                border,
            },
            tx,
        ))
    }

    /// The error for `op` on operands of `d`, naming the dtypes it `takes`.
    fn op_dtype_error(
        &self,
        kind: &'static str,
        op: &dyn std::fmt::Debug,
        d: DType,
        takes: impl Fn(DType) -> bool,
    ) -> BuildError {
        let takes: Vec<DType> = DType::ALL.into_iter().filter(|&t| takes(t)).collect();
        BuildError::dtype(
            self.next_id(),
            kind,
            format!("{op:?} needs {}, got {d}", dtypes(&takes)),
        )
    }

    fn check_reduce_dtype(
        &self,
        op: ReduceOp,
        d: DType,
        kind: &'static str,
    ) -> Result<(), BuildError> {
        if op.accepts(d) {
            Ok(())
        } else {
            Err(BuildError::dtype(
                self.next_id(),
                kind,
                format!("{op:?} does not accept {d}"),
            ))
        }
    }

    fn check_axis(
        &self,
        axis: usize,
        ty: &TensorType,
        kind: &'static str,
    ) -> Result<(), BuildError> {
        if axis >= ty.shape.len() {
            return Err(BuildError::invalid(
                self.next_id(),
                kind,
                format!("axis {axis} out of range for rank {}", ty.shape.len()),
            ));
        }
        Ok(())
    }

    /// Inclusive scan of `x` along `axis`.
    pub fn scan(&mut self, x: NodeId, axis: usize, op: ReduceOp) -> Result<NodeId, BuildError> {
        const K: &str = "scan";
        let tx = self.operand(x, K)?.clone();
        self.check_axis(axis, &tx, K)?;
        self.check_reduce_dtype(op, tx.dtype, K)?;
        Ok(self.push(NodeKind::Scan { x, axis, op }, tx))
    }

    /// Reduction of `x` along `axis`, which is kept with length 1.
    pub fn axis_reduce(
        &mut self,
        x: NodeId,
        axis: usize,
        op: ReduceOp,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "reduce";
        let tx = self.operand(x, K)?.clone();
        self.check_axis(axis, &tx, K)?;
        self.check_reduce_dtype(op, tx.dtype, K)?;
        let mut shape = tx.shape.clone();
        shape[axis] = 1;
        Ok(self.push(
            NodeKind::AxisReduce { x, axis, op },
            TensorType {
                dtype: tx.dtype,
                shape,
            },
        ))
    }

    /// A line recurrence of `x` along `program.axis` (see [`crate::line`]): the output has
    /// `x`'s shape when each step value is kept, the axis of length 1 when a final carry is.
    pub fn line(
        &mut self,
        x: NodeId,
        program: crate::line::LineProgram,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "line";
        let tx = self.operand(x, K)?.clone();
        self.check_axis(program.axis, &tx, K)?;
        let dtype = program
            .output_dtype(tx.dtype)
            .map_err(|m| BuildError::invalid(self.next_id(), K, m))?;
        let mut shape = tx.shape.clone();
        if let crate::line::LineKeep::Final(_) = program.keep {
            shape[program.axis] = 1;
        }
        Ok(self.push(NodeKind::Line { x, program }, TensorType { dtype, shape }))
    }

    /// A call of the registered line function `call.name` along `call.axis` of `x` (see
    /// [`crate::extern_call`]); the output has `x`'s shape and dtype `call.out`. Only the
    /// name's spelling and the axis are checked here: registration, dtypes and parameters
    /// are checked by the runtime when the node runs.
    pub fn line_extern(
        &mut self,
        x: NodeId,
        call: crate::extern_call::ExternCall,
    ) -> Result<NodeId, BuildError> {
        const K: &str = "extern";
        let tx = self.operand(x, K)?.clone();
        self.check_axis(call.axis, &tx, K)?;
        crate::extern_call::check_extern_name(&call.name)
            .map_err(|m| BuildError::invalid(self.next_id(), K, m))?;
        // Extern line functions see f32, f64, u8 or bool lines (runtime/src/line_extern.rs).
        for d in [tx.dtype, call.out] {
            if !matches!(d, DType::F32 | DType::F64 | DType::U8 | DType::Bool) {
                return Err(BuildError::invalid(
                    self.next_id(),
                    K,
                    format!("extern line functions take f32, f64, u8 or bool lines, not {d}"),
                ));
            }
        }
        let ty = TensorType {
            dtype: call.out,
            shape: tx.shape,
        };
        Ok(self.push(NodeKind::Extern { x, call }, ty))
    }

    /// Appends a node of any kind, validating it like the typed methods do. Used by the
    /// parser, the passes and the fuzzer's shrinker.
    pub fn add(&mut self, kind: NodeKind) -> Result<NodeId, BuildError> {
        match kind {
            NodeKind::Input { .. } => Err(BuildError::invalid(
                self.next_id(),
                "input",
                "use GraphBuilder::input to add inputs",
            )),
            NodeKind::Constant { .. } => Err(BuildError::invalid(
                self.next_id(),
                "const",
                "use GraphBuilder::constant to add constants",
            )),
            NodeKind::Unary { op, x } => self.unary(op, x),
            NodeKind::Binary { op, a, b } => self.binary(op, a, b),
            NodeKind::Select { cond, a, b } => self.select(cond, a, b),
            NodeKind::Cast { x, to } => self.cast(x, to),
            NodeKind::Gather { x, offset, border } => self.gather(x, &offset, border),
            NodeKind::Network {
                inputs,
                width,
                pairs,
                output,
            } => self.network(&inputs, width, &pairs, output),
            NodeKind::WindowReduce {
                x,
                op,
                footprint,
                border,
            } => self.window_reduce(x, op, &footprint, border),
            NodeKind::Scan { x, axis, op } => self.scan(x, axis, op),
            NodeKind::AxisReduce { x, axis, op } => self.axis_reduce(x, axis, op),
            NodeKind::Line { x, program } => self.line(x, program),
            NodeKind::Extern { x, call } => self.line_extern(x, call),
        }
    }

    /// Finishes the graph with the given outputs.
    pub fn finish(mut self, outputs: &[NodeId]) -> Result<Graph, BuildError> {
        if outputs.is_empty() {
            return Err(BuildError::Graph(
                "a graph needs at least one output".into(),
            ));
        }
        for o in outputs {
            if o.index() >= self.graph.nodes.len() {
                return Err(BuildError::Graph(format!("output {o} does not exist")));
            }
        }
        self.graph.outputs = outputs.to_vec();
        Ok(self.graph)
    }
}
