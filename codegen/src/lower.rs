//! Lowering: a fused group of the graph becomes a [`Kernel`].
//!
//! A stencil group becomes one [`Stage`] per stage root. Each stage is an SSA program built
//! by hash-consing ([`Inst`] → [`ValueId`], commutative binary operands sorted), so equal
//! loads and equal operations are emitted once: the nine gathers of a 3x3 median share
//! their loads with a NaN mask over the same window, and several kept wires of one network
//! share their comparators.
//!
//! Rules (see ARCHITECTURE.md, "Fusion rules"):
//! * a group input or an earlier stage read at offset `o` under border `B` is a
//!   [`Op::Load`]; a plain read is `offset 0` with the canonical border `nearest` (any border
//!   means the same at offset 0), so plain reads hash equal everywhere;
//! * a constant node is an [`Op::Const`];
//! * a non-stage member read at a non-zero offset (a pure pointwise tree) is inlined with
//!   its leaf loads shifted by `o` under `B`; under `constant(c)` the inlined value is
//!   wrapped as `select(in_range(o), value, c)`, which is exact;
//! * a window reduction is one value per footprint offset, folded left in footprint order
//!   for `sum`; the order-free `min`/`max`/`any`/`all` are a balanced tree, or, over a box
//!   with contiguous columns, per-column trees combined by doubling across columns (the
//!   same program at every column offset, which the CPU backend shares between
//!   neighbouring points, see `cpu::shift`);
//! * a comparator network becomes `min`/`max` instructions on wire values; wires past the
//!   inputs start at the top element; instructions that do not reach the output wire are
//!   removed.
//!
//! The evaluation is iterative (an explicit work stack), so deep graphs cannot overflow the
//! native stack.

use std::collections::{HashMap, HashSet};

use kiln_ir::passes::{FusedGroup, GroupKind};
use kiln_ir::{BinaryOp, Border, DType, Graph, NodeId, NodeKind, ReduceOp, Scalar, UnaryOp};

use crate::kernel::{Inst, Kernel, KernelBody, Line, Op, Source, Stage, ValueId};
use crate::CodegenError;

/// Most instructions one stage may have. Cranelift's compile time grows faster than linearly
/// with function size (a 21x21 median, ~10k instructions, compiles in seconds); past this
/// limit lowering refuses with a clear error instead of stalling for minutes.
pub const MAX_STAGE_INSTS: usize = 20_000;

/// Lowers `group` of `graph` to the kernel form.
///
/// Fails (never panics) when the group does not have the shape the fusion rules promise:
/// unknown node ids, a root that is not the last stage, inputs of another shape, a member
/// read at an offset that is not a pointwise tree, and so on.
pub fn lower(graph: &Graph, group: &FusedGroup) -> Result<Kernel, CodegenError> {
    let root_node = node(graph, group.root)?;
    let rank = root_node.ty.shape.len();
    let mut inputs = Vec::with_capacity(group.inputs.len());
    for &i in &group.inputs {
        inputs.push(node(graph, i)?.ty.dtype);
    }
    let output = root_node.ty.dtype;
    let body = match group.kind {
        GroupKind::Scan | GroupKind::AxisReduce => {
            let (x, axis, op, is_scan) = match root_node.kind {
                NodeKind::Scan { x, axis, op } => (x, axis, op, true),
                NodeKind::AxisReduce { x, axis, op } => (x, axis, op, false),
                ref other => {
                    return Err(err(format!(
                        "group root {} is a {}, expected a scan or axis reduction",
                        group.root,
                        other.name()
                    )))
                }
            };
            if is_scan != (group.kind == GroupKind::Scan) {
                return Err(err(format!(
                    "group kind {:?} does not match root {}",
                    group.kind, group.root
                )));
            }
            if group.inputs != [x] {
                return Err(err(format!(
                    "{:?} group rooted at {} must have exactly its operand {x} as input, has {:?}",
                    group.kind, group.root, group.inputs
                )));
            }
            if axis >= rank {
                return Err(err(format!("axis {axis} out of range for rank {rank}")));
            }
            let d = node(graph, x)?.ty.dtype;
            if is_scan {
                KernelBody::Line(Line::scan(axis, op, d))
            } else {
                KernelBody::Line(Line::reduce(axis, op, d))
            }
        }
        GroupKind::Line => {
            let NodeKind::Line { x, ref program } = root_node.kind else {
                return Err(err(format!(
                    "group root {} is a {}, expected a line",
                    group.root,
                    root_node.kind.name()
                )));
            };
            if group.inputs != [x] {
                return Err(err(format!(
                    "line group rooted at {} must have exactly its operand {x} as input, has {:?}",
                    group.root, group.inputs
                )));
            }
            KernelBody::Line(lower_line(program, node(graph, x)?.ty.dtype, rank)?)
        }
        GroupKind::Extern => {
            let NodeKind::Extern { x, ref call } = root_node.kind else {
                return Err(err(format!(
                    "group root {} is a {}, expected an extern",
                    group.root,
                    root_node.kind.name()
                )));
            };
            if group.inputs != [x] {
                return Err(err(format!(
                    "extern group rooted at {} must have exactly its operand {x} as input, has {:?}",
                    group.root, group.inputs
                )));
            }
            if call.axis >= rank || call.out != output {
                return Err(err(format!(
                    "extern `{}` rooted at {}: axis {} of rank {rank}, output {} for a {output} node",
                    call.name, group.root, call.axis, call.out
                )));
            }
            KernelBody::Extern(call.clone())
        }
        GroupKind::Stencil => lower_stencil(graph, group)?,
    };
    Ok(Kernel {
        rank,
        inputs,
        output,
        body,
    })
}

/// An IR line program over `x` elements as the kernel form's line body (same numbering).
fn lower_line(p: &kiln_ir::LineProgram, x: DType, rank: usize) -> Result<Line, CodegenError> {
    use crate::kernel::{Direction, LineInit, LineKeep};
    use kiln_ir::{LineKeep as K, LineOp as L};
    if p.axis >= rank {
        return Err(err(format!("axis {} out of range for rank {rank}", p.axis)));
    }
    let dtypes = p.value_dtypes(x).map_err(err)?;
    let base = p.init.len() + 1;
    let step = p
        .step
        .iter()
        .enumerate()
        .map(|(j, op)| Inst {
            op: match *op {
                L::Const(c) => Op::Const(c),
                L::Unary(o, a) => Op::Unary(o, ValueId(a)),
                L::Binary(o, a, b) => Op::Binary(o, ValueId(a), ValueId(b)),
                L::Select(c, a, b) => Op::Select(ValueId(c), ValueId(a), ValueId(b)),
                L::Cast(a, _) => Op::Cast(ValueId(a)),
            },
            dtype: dtypes[base + j],
        })
        .collect();
    Ok(Line {
        axis: p.axis,
        direction: if p.backward {
            Direction::Backward
        } else {
            Direction::Forward
        },
        carries: p.init.iter().map(|s| s.dtype()).collect(),
        init: LineInit::Consts(p.init.clone()),
        step,
        next: p.next.iter().map(|&v| ValueId(v)).collect(),
        keep: match p.keep {
            K::Each(v) => LineKeep::Each(ValueId(v)),
            K::Final(k) => LineKeep::Final(k),
        },
    })
}

fn err(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(msg.into())
}

fn node(graph: &Graph, id: NodeId) -> Result<&kiln_ir::Node, CodegenError> {
    graph.nodes.get(id.index()).ok_or_else(|| {
        err(format!(
            "node {id} does not exist (graph has {} nodes)",
            graph.len()
        ))
    })
}

fn lower_stencil(graph: &Graph, group: &FusedGroup) -> Result<KernelBody, CodegenError> {
    if group.stages.last() != Some(&group.root) {
        return Err(err(format!(
            "stencil group rooted at {}: the last stage must be the root, stages are {:?}",
            group.root, group.stages
        )));
    }
    let shape = &node(graph, group.root)?.ty.shape;
    for &id in group.inputs.iter().chain(&group.stages) {
        let n = node(graph, id)?;
        if &n.ty.shape != shape {
            return Err(err(format!(
                "stencil group rooted at {}: {id} has shape {:?}, the kernel's shape is {:?}",
                group.root, n.ty.shape, shape
            )));
        }
        if matches!(
            n.kind,
            NodeKind::Scan { .. }
                | NodeKind::AxisReduce { .. }
                | NodeKind::Line { .. }
                | NodeKind::Extern { .. }
        ) && group.stages.contains(&id)
        {
            return Err(err(format!(
                "stage {id} is a {}, not a stencil node",
                n.kind.name()
            )));
        }
    }
    let members: HashSet<NodeId> = group.members.iter().copied().collect();
    for s in &group.stages {
        if !members.contains(s) {
            return Err(err(format!("stage {s} is not a member of its group")));
        }
    }
    let mut stages = Vec::with_capacity(group.stages.len());
    for j in 0..group.stages.len() {
        let mut leaves: HashMap<NodeId, Source> = HashMap::new();
        for (i, &id) in group.inputs.iter().enumerate() {
            leaves.insert(id, Source::Input(i as u32));
        }
        for (k, &id) in group.stages[..j].iter().enumerate() {
            if leaves.insert(id, Source::Stage(k as u32)).is_some() {
                return Err(err(format!("{id} is both a group input and a stage")));
            }
        }
        let later: HashSet<NodeId> = group.stages[j + 1..].iter().copied().collect();
        let mut b = StageBuilder {
            graph,
            members: &members,
            leaves,
            later,
            prog: Program::default(),
            memo: HashMap::new(),
        };
        let result = b.eval(Req::V(group.stages[j], Vec::new(), Border::Nearest))?;
        let stage = b.prog.finish(result);
        if stage.insts.len() > MAX_STAGE_INSTS {
            return Err(err(format!(
                "stage {j} of the group rooted at {} has {} instructions, more than the JIT \
                 limit of {MAX_STAGE_INSTS} (compile time grows faster than linearly); use \
                 a smaller window, or run it eagerly",
                group.root,
                stage.insts.len()
            )));
        }
        stages.push(stage);
    }
    Ok(KernelBody::Stencil { stages })
}

/// A hash-consed instruction list.
#[derive(Default)]
pub(crate) struct Program {
    insts: Vec<Inst>,
    consed: HashMap<Inst, ValueId>,
}

impl Program {
    /// The value of `op` (commutative operands sorted): an earlier equal instruction's, or
    /// a new one.
    pub(crate) fn emit(&mut self, op: Op, dtype: DType) -> ValueId {
        let op = match op {
            Op::Binary(bop, a, b) if bop.is_commutative() && b < a => Op::Binary(bop, b, a),
            other => other,
        };
        let inst = Inst { op, dtype };
        if let Some(&v) = self.consed.get(&inst) {
            return v;
        }
        let v = ValueId(self.insts.len() as u32);
        self.insts.push(inst.clone());
        self.consed.insert(inst, v);
        v
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.insts[v.0 as usize].dtype
    }

    /// The value `v` takes at a point where `offset` leaves the shape, when that follows from
    /// its instructions alone: every load it reads is at `offset` under a constant border
    /// (so it reads that constant) and every op is one of the few evaluated here (NaN and
    /// finiteness tests and bool logic, the form of a NaN mask). `None` when unknown.
    fn value_out_of_range(&self, v: ValueId, offset: &[i64]) -> Option<Scalar> {
        let mut memo = HashMap::new();
        self.out_of_range_memo(v, offset, &mut memo)
    }

    fn out_of_range_memo(
        &self,
        v: ValueId,
        offset: &[i64],
        memo: &mut HashMap<ValueId, Option<Scalar>>,
    ) -> Option<Scalar> {
        if let Some(&known) = memo.get(&v) {
            return known;
        }
        let mut at = |x: ValueId| self.out_of_range_memo(x, offset, memo);
        let value = match &self.insts[v.0 as usize].op {
            Op::Const(s) => Some(*s),
            Op::InRange(o) if o.as_slice() == offset => Some(Scalar::Bool(false)),
            Op::Load {
                offset: o,
                border: Border::Constant(c),
                ..
            } if o.as_slice() == offset => Some(*c),
            Op::Unary(op @ (UnaryOp::IsNan | UnaryOp::IsFinite), x) => match at(*x) {
                Some(Scalar::F32(b)) => {
                    Some((f32::from_bits(b).is_nan(), f32::from_bits(b).is_finite()))
                }
                Some(Scalar::F64(b)) => {
                    Some((f64::from_bits(b).is_nan(), f64::from_bits(b).is_finite()))
                }
                _ => None,
            }
            .map(|(nan, finite)| Scalar::Bool(if *op == UnaryOp::IsNan { nan } else { finite })),
            Op::Unary(UnaryOp::Not, x) => match at(*x) {
                Some(Scalar::Bool(b)) => Some(Scalar::Bool(!b)),
                _ => None,
            },
            Op::Binary(op @ (BinaryOp::And | BinaryOp::Or), a, b) => match (at(*a), at(*b)) {
                (Some(Scalar::Bool(a)), Some(Scalar::Bool(b))) => {
                    Some(Scalar::Bool(if *op == BinaryOp::And {
                        a && b
                    } else {
                        a || b
                    }))
                }
                _ => None,
            },
            Op::Select(c, a, e) => match at(*c) {
                Some(Scalar::Bool(true)) => at(*a),
                Some(Scalar::Bool(false)) => at(*e),
                _ => None,
            },
            _ => None,
        };
        memo.insert(v, value);
        value
    }

    fn konst(&mut self, s: Scalar) -> ValueId {
        self.emit(Op::Const(s), s.dtype())
    }

    /// Drops instructions the result does not depend on and renumbers the rest.
    pub(crate) fn finish(self, result: ValueId) -> Stage {
        let n = self.insts.len();
        let mut live = vec![false; n];
        live[result.0 as usize] = true;
        for i in (0..n).rev() {
            if !live[i] {
                continue;
            }
            for v in operands(&self.insts[i].op) {
                live[v.0 as usize] = true;
            }
        }
        let mut new_id = vec![ValueId(u32::MAX); n];
        let mut insts = Vec::new();
        for (i, inst) in self.insts.into_iter().enumerate() {
            if !live[i] {
                continue;
            }
            let m = |v: ValueId| new_id[v.0 as usize];
            let op = match inst.op {
                Op::Unary(u, a) => Op::Unary(u, m(a)),
                Op::Binary(bop, a, b) => Op::Binary(bop, m(a), m(b)),
                Op::Select(c, a, b) => Op::Select(m(c), m(a), m(b)),
                Op::Cast(a) => Op::Cast(m(a)),
                other => other,
            };
            new_id[i] = ValueId(insts.len() as u32);
            insts.push(Inst {
                op,
                dtype: inst.dtype,
            });
        }
        Stage {
            insts,
            result: new_id[result.0 as usize],
        }
    }
}

/// The operands of an instruction.
pub(crate) fn operands(op: &Op) -> Vec<ValueId> {
    match *op {
        Op::Load { .. } | Op::InRange(_) | Op::Const(_) => vec![],
        Op::Unary(_, a) | Op::Cast(a) => vec![a],
        Op::Binary(_, a, b) => vec![a, b],
        Op::Select(c, a, b) => vec![c, a, b],
    }
}

/// A value request.
///
/// * `V(n, o, B)`: the exact value of node `n` at the point plus `o`, remapped under `B`
///   (under a constant border and out of range: the constant).
/// * `T(n, o, B)`: the pointwise tree of `n` with its leaves loaded at `o` under `B`; equal
///   to `V` inside the range, unspecified outside under a constant border.
///
/// Offsets are normalised: a zero offset is the empty vector with border `Nearest`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Req {
    V(NodeId, Vec<i64>, Border),
    T(NodeId, Vec<i64>, Border),
}

fn normalise(offset: &[i64], border: Border) -> (Vec<i64>, Border) {
    if offset.iter().all(|&o| o == 0) {
        (Vec::new(), Border::Nearest)
    } else {
        (offset.to_vec(), border)
    }
}

fn req_v(n: NodeId, offset: &[i64], border: Border) -> Req {
    let (o, b) = normalise(offset, border);
    Req::V(n, o, b)
}

struct StageBuilder<'g> {
    graph: &'g Graph,
    members: &'g HashSet<NodeId>,
    leaves: HashMap<NodeId, Source>,
    later: HashSet<NodeId>,
    prog: Program,
    memo: HashMap<Req, ValueId>,
}

/// What a request needs before it can be emitted.
enum Plan {
    /// Emit directly.
    Leaf,
    /// Needs these requests first.
    Deps(Vec<Req>),
}

impl StageBuilder<'_> {
    /// Evaluates `req` and everything it depends on, iteratively.
    fn eval(&mut self, req: Req) -> Result<ValueId, CodegenError> {
        let mut stack: Vec<(Req, bool)> = vec![(req.clone(), false)];
        while let Some((r, ready)) = stack.pop() {
            if self.memo.contains_key(&r) {
                continue;
            }
            let plan = self.plan(&r)?;
            match plan {
                Plan::Leaf => {
                    let v = self.emit_req(&r, &[])?;
                    self.memo.insert(r, v);
                }
                Plan::Deps(deps) => {
                    if ready {
                        let vals = deps
                            .iter()
                            .map(|d| {
                                self.memo.get(d).copied().ok_or_else(|| {
                                    err(format!("internal: dependency {d:?} of {r:?} not evaluated (cycle?)"))
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        let v = self.emit_req(&r, &vals)?;
                        self.memo.insert(r, v);
                    } else {
                        stack.push((r, true));
                        for d in deps.into_iter().rev() {
                            if !self.memo.contains_key(&d) {
                                stack.push((d, false));
                            }
                        }
                    }
                }
            }
        }
        self.memo
            .get(&req)
            .copied()
            .ok_or_else(|| err("internal: result not evaluated"))
    }

    fn check_node(&self, n: NodeId) -> Result<&kiln_ir::Node, CodegenError> {
        let nd = node(self.graph, n)?;
        if self.leaves.contains_key(&n) || matches!(nd.kind, NodeKind::Constant { .. }) {
            return Ok(nd);
        }
        if self.later.contains(&n) {
            return Err(err(format!("a stage reads the later stage {n}")));
        }
        if !self.members.contains(&n) {
            return Err(err(format!(
                "{n} ({}) is read by the group but is neither a member, an input nor a constant",
                nd.kind.name()
            )));
        }
        Ok(nd)
    }

    fn plan(&self, r: &Req) -> Result<Plan, CodegenError> {
        let (n, offset, border, exact) = match r {
            Req::V(n, o, b) => (*n, o, b, true),
            Req::T(n, o, b) => (*n, o, b, false),
        };
        let nd = self.check_node(n)?;
        if self.leaves.contains_key(&n) {
            return Ok(Plan::Leaf);
        }
        if let NodeKind::Constant { .. } = nd.kind {
            return Ok(Plan::Leaf);
        }
        let zero = offset.is_empty();
        if exact && !zero {
            // A shifted read of a computed member: its pointwise tree, wrapped if needed.
            return Ok(Plan::Deps(vec![Req::T(n, offset.clone(), *border)]));
        }
        let sub = |x: NodeId| -> Req {
            if zero {
                Req::V(x, Vec::new(), Border::Nearest)
            } else {
                Req::T(x, offset.clone(), *border)
            }
        };
        let deps = match &nd.kind {
            NodeKind::Unary { x, .. } | NodeKind::Cast { x, .. } => vec![sub(*x)],
            NodeKind::Binary { a, b, .. } => vec![sub(*a), sub(*b)],
            NodeKind::Select { cond, a, b } => vec![sub(*cond), sub(*a), sub(*b)],
            NodeKind::Network { inputs, .. } => inputs.iter().map(|&x| sub(x)).collect(),
            NodeKind::Gather {
                x,
                offset: go,
                border: gb,
            } if zero => {
                check_rank(self.graph, *x, go)?;
                vec![req_v(*x, go, *gb)]
            }
            NodeKind::WindowReduce {
                x,
                footprint,
                border: wb,
                ..
            } if zero => {
                if footprint.offsets.is_empty() {
                    return Err(err(format!("window {n} has an empty footprint")));
                }
                let mut deps = Vec::with_capacity(footprint.offsets.len());
                for f in &footprint.offsets {
                    check_rank(self.graph, *x, f)?;
                    deps.push(req_v(*x, f, *wb));
                }
                deps
            }
            other => {
                return Err(err(if zero {
                    format!(
                        "{n} ({}) cannot be computed inside a stencil kernel",
                        other.name()
                    )
                } else {
                    format!(
                        "{n} ({}) is read at offset {offset:?} but is neither a stage nor a pointwise tree",
                        other.name()
                    )
                }))
            }
        };
        Ok(Plan::Deps(deps))
    }

    fn emit_req(&mut self, r: &Req, vals: &[ValueId]) -> Result<ValueId, CodegenError> {
        let (n, offset, border, exact) = match r {
            Req::V(n, o, b) => (*n, o.clone(), *b, true),
            Req::T(n, o, b) => (*n, o.clone(), *b, false),
        };
        let nd = node(self.graph, n)?;
        let dtype = nd.ty.dtype;
        if let Some(&source) = self.leaves.get(&n) {
            let rank = nd.ty.spatial_rank();
            let offset = if offset.is_empty() {
                vec![0; rank]
            } else {
                offset
            };
            if offset.len() != rank {
                return Err(err(format!(
                    "offset {offset:?} of a read of {n} does not match its {rank} spatial dims"
                )));
            }
            // A leaf of a shifted pointwise tree (`T`) is unspecified outside the range under
            // a constant border (the tree is wrapped in a select), so any constant of the
            // leaf's own dtype will do: take zero, which also shares loads with zero-padded
            // gathers of the same source (the kornia median's network and its NaN mask).
            let border = match border {
                Border::Constant(c) if !exact && c.dtype() != dtype => {
                    Border::Constant(Scalar::zero(dtype))
                }
                b => b,
            };
            return Ok(self.prog.emit(
                Op::Load {
                    source,
                    offset,
                    border,
                },
                dtype,
            ));
        }
        if let NodeKind::Constant { value } = nd.kind {
            let v = self.prog.konst(value);
            return Ok(if exact && !offset.is_empty() {
                self.wrap(v, &offset, border)
            } else {
                v
            });
        }
        if exact && !offset.is_empty() {
            return Ok(self.wrap(vals[0], &offset, border));
        }
        let v = match &nd.kind {
            NodeKind::Unary { op, .. } => self.prog.emit(Op::Unary(*op, vals[0]), dtype),
            NodeKind::Cast { to, .. } => {
                if self.prog.dtype(vals[0]) == *to {
                    vals[0]
                } else {
                    self.prog.emit(Op::Cast(vals[0]), *to)
                }
            }
            NodeKind::Binary { op, .. } => self.prog.emit(Op::Binary(*op, vals[0], vals[1]), dtype),
            NodeKind::Select { .. } => self.prog.emit(Op::Select(vals[0], vals[1], vals[2]), dtype),
            NodeKind::Gather { .. } => vals[0],
            NodeKind::WindowReduce { op, footprint, .. } => {
                self.reduce(*op, vals, &footprint.offsets, dtype)
            }
            NodeKind::Network {
                width,
                pairs,
                output,
                ..
            } => self.network(vals, *width, pairs, *output, dtype)?,
            other => {
                return Err(err(format!(
                    "{n} ({}) cannot be computed inside a stencil kernel",
                    other.name()
                )))
            }
        };
        Ok(v)
    }

    /// `select(in_range(offset), v, c)` under `constant(c)`; `v` for the other borders.
    fn wrap(&mut self, v: ValueId, offset: &[i64], border: Border) -> ValueId {
        match border {
            Border::Constant(c) => {
                if let Op::Const(s) = self.prog.insts[v.0 as usize].op {
                    if s == c {
                        return v;
                    }
                }
                // Out of range every load of `v` at `offset` reads its border constant; when
                // `v` then evaluates to `c` the select would change nothing.
                if self.prog.value_out_of_range(v, offset) == Some(c) {
                    return v;
                }
                let cond = self.prog.emit(Op::InRange(offset.to_vec()), DType::Bool);
                let cv = self.prog.konst(c);
                let dtype = self.prog.dtype(v);
                self.prog.emit(Op::Select(cond, v, cv), dtype)
            }
            _ => v,
        }
    }

    /// One value from the values of a window reduction (`vals[k]` read at `offsets[k]`).
    fn reduce(
        &mut self,
        op: ReduceOp,
        vals: &[ValueId],
        offsets: &[Vec<i64>],
        dtype: DType,
    ) -> ValueId {
        let bop = op.combiner();
        if op == ReduceOp::Sum {
            let mut acc = vals[0];
            for &v in &vals[1..] {
                acc = self.prog.emit(Op::Binary(bop, acc, v), dtype);
            }
            return acc;
        }
        if let Some(columns) = box_columns(offsets) {
            return self.reduce_box(bop, vals, &columns, dtype);
        }
        self.balanced(bop, vals, dtype)
    }

    /// An order-free reduction over a box whose columns (last-axis offsets) are contiguous,
    /// shaped so that a backend can share work between neighbouring points: each column
    /// reduced alone (the same tree at every column), then the columns by doubling,
    /// `T₂ₚ(s) = op(Tₚ(s), Tₚ(s + p))`, and `op(T_P(a), T_P(b - P + 1))` for the largest
    /// power of two `P` not above the width: every `Tₚ` is one program at shifted columns.
    /// The two last blocks may overlap, which is exact because min, max, any and all are
    /// idempotent (kiln's min/max form a lattice, NaN included).
    fn reduce_box(
        &mut self,
        bop: BinaryOp,
        vals: &[ValueId],
        columns: &[Vec<usize>],
        dtype: DType,
    ) -> ValueId {
        let mut level: Vec<ValueId> = columns
            .iter()
            .map(|members| {
                let col: Vec<ValueId> = members.iter().map(|&k| vals[k]).collect();
                self.balanced(bop, &col, dtype)
            })
            .collect();
        let width = level.len();
        let mut p = 1;
        while 2 * p <= width {
            level = (0..=width - 2 * p)
                .map(|s| {
                    self.prog
                        .emit(Op::Binary(bop, level[s], level[s + p]), dtype)
                })
                .collect();
            p *= 2;
        }
        if p == width {
            level[0]
        } else {
            let last = level[width - p];
            self.prog.emit(Op::Binary(bop, level[0], last), dtype)
        }
    }

    /// A balanced tree of `bop` over `vals`, pairing neighbours.
    fn balanced(&mut self, bop: BinaryOp, vals: &[ValueId], dtype: DType) -> ValueId {
        let mut level = vals.to_vec();
        while level.len() > 1 {
            let mut next = Vec::with_capacity(level.len().div_ceil(2));
            for pair in level.chunks(2) {
                next.push(if pair.len() == 2 {
                    self.prog.emit(Op::Binary(bop, pair[0], pair[1]), dtype)
                } else {
                    pair[0]
                });
            }
            level = next;
        }
        level[0]
    }

    fn network(
        &mut self,
        inputs: &[ValueId],
        width: u32,
        pairs: &[(u32, u32)],
        output: u32,
        dtype: DType,
    ) -> Result<ValueId, CodegenError> {
        let width = width as usize;
        if width < inputs.len() || output as usize >= width {
            return Err(err(format!(
                "network of width {width} with {} inputs and output wire {output}",
                inputs.len()
            )));
        }
        // Only comparators that can reach the output wire are expanded: walk the pairs
        // backwards tracking which wires matter.
        let mut needed = vec![false; width];
        needed[output as usize] = true;
        let mut used = vec![false; pairs.len()];
        for (p, &(i, j)) in pairs.iter().enumerate().rev() {
            let (i, j) = (i as usize, j as usize);
            if i >= j || j >= width {
                return Err(err(format!(
                    "network pair ({i}, {j}) invalid for width {width}"
                )));
            }
            if needed[i] || needed[j] {
                used[p] = true;
                needed[i] = true;
                needed[j] = true;
            }
        }
        let top = top_of(dtype);
        let mut wires: Vec<Option<ValueId>> = inputs.iter().map(|&v| Some(v)).collect();
        wires.resize(width, None);
        let wire = |prog: &mut Program, w: &mut Vec<Option<ValueId>>, k: usize| -> ValueId {
            *w[k].get_or_insert_with(|| prog.konst(top))
        };
        for (p, &(i, j)) in pairs.iter().enumerate() {
            if !used[p] {
                continue;
            }
            let (i, j) = (i as usize, j as usize);
            let a = wire(&mut self.prog, &mut wires, i);
            let b = wire(&mut self.prog, &mut wires, j);
            let lo = self.prog.emit(Op::Binary(BinaryOp::Min, a, b), dtype);
            let hi = self.prog.emit(Op::Binary(BinaryOp::Max, a, b), dtype);
            wires[i] = Some(lo);
            wires[j] = Some(hi);
        }
        Ok(wire(&mut self.prog, &mut wires, output as usize))
    }
}

/// The top element of `dtype`'s order: +Inf, the integer maximum or true.
fn top_of(dtype: DType) -> Scalar {
    match dtype {
        DType::F32 => Scalar::f32(f32::INFINITY),
        DType::F64 => Scalar::f64(f64::INFINITY),
        DType::U8 => Scalar::U8(u8::MAX),
        DType::Bool => Scalar::Bool(true),
        DType::I8 => Scalar::I8(i8::MAX),
        DType::U16 => Scalar::U16(u16::MAX),
        DType::I16 => Scalar::I16(i16::MAX),
        DType::I32 => Scalar::I32(i32::MAX),
        DType::U32 => Scalar::U32(u32::MAX),
    }
}

fn check_rank(graph: &Graph, x: NodeId, offset: &[i64]) -> Result<(), CodegenError> {
    let rank = node(graph, x)?.ty.spatial_rank();
    if offset.len() != rank {
        return Err(err(format!(
            "offset {offset:?} for {x} does not match its {rank} spatial dims"
        )));
    }
    Ok(())
}

/// When `offsets` form a full box (every outer offset combined with every last-axis offset)
/// whose last-axis offsets are contiguous, the indices into `offsets` per column, columns
/// by ascending last-axis offset, each column's members by ascending outer offset.
fn box_columns(offsets: &[Vec<i64>]) -> Option<Vec<Vec<usize>>> {
    use std::collections::BTreeMap;
    let mut cols: BTreeMap<i64, BTreeMap<&[i64], usize>> = BTreeMap::new();
    for (k, off) in offsets.iter().enumerate() {
        let (dx, outer) = off.split_last()?;
        if cols.entry(*dx).or_default().insert(outer, k).is_some() {
            return None;
        }
    }
    let first: Vec<&[i64]> = cols.values().next()?.keys().copied().collect();
    let (lo, hi) = (*cols.keys().next()?, *cols.keys().next_back()?);
    let contiguous = (hi - lo + 1) as usize == cols.len();
    let same_rows = cols
        .values()
        .all(|c| c.keys().copied().eq(first.iter().copied()));
    (contiguous && same_rows).then(|| {
        cols.values()
            .map(|c| c.values().copied().collect())
            .collect()
    })
}
