//! The eager executor: the oracle every fused kernel is checked against.
//!
//! [`run`] evaluates a graph node by node in id order and materialises every node's value as
//! a fresh contiguous buffer, following SEMANTICS.md through the reference functions of
//! [`kiln_ir::semantics`]. Inner loops are typed (one monomorphised loop per dtype and
//! operation) and large nodes are split over rayon threads; the order of every
//! floating-point fold is the documented one whatever the split.

mod elem;
mod extern_line;
mod kernels;
mod line;

use std::sync::Arc;

use kiln_ir::{BinaryOp, Border, DType, Graph, NodeId, NodeKind, ReduceOp, TensorType, UnaryOp};

use crate::{RuntimeError, Storage, Tensor};
use elem::{Arith, Float, Int, KBool, Kind, KF32, KF64, KI16, KI32, KI8, KU16, KU32, KU8};

/// Runs `$body` with `$K` bound to the marker type of dtype `$d`.
macro_rules! by_dtype {
    ($d:expr, $K:ident => $body:expr) => {
        match $d {
            DType::F32 => {
                type $K = KF32;
                $body
            }
            DType::F64 => {
                type $K = KF64;
                $body
            }
            DType::U8 => {
                type $K = KU8;
                $body
            }
            DType::Bool => {
                type $K = KBool;
                $body
            }
            DType::I8 => {
                type $K = KI8;
                $body
            }
            DType::U16 => {
                type $K = KU16;
                $body
            }
            DType::I16 => {
                type $K = KI16;
                $body
            }
            DType::I32 => {
                type $K = KI32;
                $body
            }
            DType::U32 => {
                type $K = KU32;
                $body
            }
        }
    };
}

/// Runs `$body` with `$K` bound to the marker type of `$d` when it is one of the integer
/// dtypes other than u8 (`Int` kinds); evaluates to `$other` otherwise.
macro_rules! by_int_dtype {
    ($d:expr, $K:ident => $body:expr, $other:expr) => {
        match $d {
            DType::I8 => {
                type $K = KI8;
                $body
            }
            DType::U16 => {
                type $K = KU16;
                $body
            }
            DType::I16 => {
                type $K = KI16;
                $body
            }
            DType::I32 => {
                type $K = KI32;
                $body
            }
            DType::U32 => {
                type $K = KU32;
                $body
            }
            _ => $other,
        }
    };
}

/// Runs `$body` with `$f` bound to the combining function of a (validated) reduce op.
macro_rules! with_combiner {
    ($op:expr, $K:ty, $f:ident => $body:expr) => {
        match $op {
            ReduceOp::Min | ReduceOp::All => {
                let $f = <$K>::min;
                $body
            }
            ReduceOp::Max | ReduceOp::Any => {
                let $f = <$K>::max;
                $body
            }
            ReduceOp::Sum => {
                let $f = <$K>::sum;
                $body
            }
        }
    };
}

/// Checks that `inputs` match the graph's declared inputs in number, dtype and shape.
/// Any strides are accepted.
pub fn check_inputs(graph: &Graph, inputs: &[Tensor]) -> Result<(), RuntimeError> {
    if inputs.len() != graph.inputs.len() {
        return Err(RuntimeError::InputCount {
            expected: graph.inputs.len(),
            got: inputs.len(),
        });
    }
    for (index, (t, ty)) in inputs.iter().zip(&graph.inputs).enumerate() {
        if t.dtype() != ty.dtype || t.shape() != ty.shape.as_slice() {
            return Err(RuntimeError::InputMismatch {
                index,
                expected: ty.to_string(),
                got: TensorType {
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                }
                .to_string(),
            });
        }
    }
    Ok(())
}

/// Evaluates `graph` on `inputs`, node by node in id order, every node materialised as a
/// fresh contiguous buffer; returns the graph's outputs as fresh contiguous tensors.
///
/// Nodes no output depends on are skipped, and a value is freed after its last use; neither
/// changes any result. A graph whose nodes are inconsistent (possible only when it was not
/// made by the builder) gives [`RuntimeError::Shape`] naming the node.
pub fn run(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, RuntimeError> {
    // Borrowed tensors (`Tensor::from_raw_parts`, read in place by the fused engine) are
    // copied first: the interpreter reads owned storage.
    if inputs.iter().any(Tensor::is_borrowed) {
        let owned: Vec<Tensor> = inputs.iter().map(Tensor::to_contiguous).collect();
        return run(graph, &owned);
    }
    check_inputs(graph, inputs)?;
    let n = graph.nodes.len();
    for &o in &graph.outputs {
        if o.index() >= n {
            return Err(RuntimeError::Shape(format!(
                "graph output {o} does not exist"
            )));
        }
    }
    // Operands must precede their users; then a backward walk finds the live nodes and
    // each value's last use.
    for (i, node) in graph.nodes.iter().enumerate() {
        for op in node.kind.operands() {
            if op.index() >= i {
                return Err(bad_node(
                    i,
                    node.kind.name(),
                    format!("operand {op} does not precede it"),
                ));
            }
        }
    }
    let mut live = vec![false; n];
    let mut keep = vec![false; n];
    for &o in &graph.outputs {
        live[o.index()] = true;
        keep[o.index()] = true;
    }
    let mut last_use = vec![0usize; n];
    for i in (0..n).rev() {
        if !live[i] {
            continue;
        }
        for op in graph.nodes[i].kind.operands() {
            live[op.index()] = true;
            last_use[op.index()] = last_use[op.index()].max(i);
        }
    }

    // Peak of the live set (every live node holds a fresh buffer until its last use).
    let bytes = |j: usize| {
        let t = &graph.nodes[j].ty;
        (t.numel() as u64).saturating_mul(t.dtype.size_bytes() as u64)
    };
    let (mut live_bytes, mut peak) = (0u64, 0u64);
    let mut freed = vec![false; n];
    for i in (0..n).filter(|&i| live[i]) {
        live_bytes = live_bytes.saturating_add(bytes(i));
        peak = peak.max(live_bytes);
        for op in graph.nodes[i].kind.operands() {
            let j = op.index();
            if !keep[j] && last_use[j] == i && !std::mem::replace(&mut freed[j], true) {
                live_bytes = live_bytes.saturating_sub(bytes(j));
            }
        }
    }
    crate::memory::ensure_fits(peak, "eager execution")?;

    let mut values: Vec<Option<Arc<Storage>>> = vec![None; n];
    for i in 0..n {
        if !live[i] {
            continue;
        }
        let value = eval_node(graph, i, inputs, &values)?;
        let node = &graph.nodes[i];
        if value.dtype() != node.ty.dtype || value.len() != node.ty.numel() {
            return Err(bad_node(
                i,
                node.kind.name(),
                format!(
                    "computes {}[{} elements], the node declares {}",
                    value.dtype(),
                    value.len(),
                    node.ty
                ),
            ));
        }
        values[i] = Some(Arc::new(value));
        for op in node.kind.operands() {
            let j = op.index();
            if !keep[j] && last_use[j] == i {
                values[j] = None;
            }
        }
    }
    graph
        .outputs
        .iter()
        .map(|&o| {
            let storage = values[o.index()].clone().expect("outputs are kept");
            Tensor::from_parts(
                storage,
                &graph.node(o).ty.shape,
                &crate::tensor::contiguous_strides(&graph.node(o).ty.shape),
                0,
            )
        })
        .collect()
}

/// An error naming an inconsistent node.
fn bad_node(i: usize, kind: &str, problem: String) -> RuntimeError {
    RuntimeError::Shape(format!("invalid graph: node %{i} ({kind}): {problem}"))
}

/// The value of operand `id` with its declared type.
fn operand<'a>(
    graph: &'a Graph,
    values: &'a [Option<Arc<Storage>>],
    id: NodeId,
) -> (&'a Storage, &'a TensorType) {
    let v = values[id.index()]
        .as_deref()
        .expect("live operands are evaluated before their users");
    (v, &graph.node(id).ty)
}

/// Typed slice of an operand, or an error if its dtype is not `K`'s.
fn typed<'a, K: Kind>(s: &'a Storage, i: usize, kind: &str) -> Result<&'a [K::T], RuntimeError> {
    K::slice(s).ok_or_else(|| {
        bad_node(
            i,
            kind,
            format!("operand is {}, expected {}", s.dtype(), K::DTYPE),
        )
    })
}

/// Evaluates node `i`, whose live operands are in `values`.
fn eval_node(
    graph: &Graph,
    i: usize,
    inputs: &[Tensor],
    values: &[Option<Arc<Storage>>],
) -> Result<Storage, RuntimeError> {
    let node = &graph.nodes[i];
    let name = node.kind.name();
    let bad = |p: String| bad_node(i, name, p);
    let shape = &node.ty.shape;
    let numel = node.ty.numel();
    // Pointwise operands must have the node's shape.
    let same_shape = |ids: &[NodeId]| -> Result<(), RuntimeError> {
        for &id in ids {
            if &graph.node(id).ty.shape != shape {
                return Err(bad(format!(
                    "operand {id} has shape {:?}, the node {:?}",
                    graph.node(id).ty.shape,
                    shape
                )));
            }
        }
        Ok(())
    };
    Ok(match &node.kind {
        NodeKind::Input { index } => {
            let t = inputs
                .get(*index)
                .ok_or_else(|| bad(format!("input index {index} out of range")))?;
            if graph.inputs[*index] != node.ty {
                return Err(bad(format!(
                    "declares {}, graph input {index} is {}",
                    node.ty, graph.inputs[*index]
                )));
            }
            match t.contiguous_storage() {
                // Bool bytes other than 0 and 1 read as true (as `Storage::get` does).
                Storage::Bool(v) => {
                    Storage::Bool(v.into_iter().map(|b| u8::from(b != 0)).collect())
                }
                s => s,
            }
        }
        NodeKind::Constant { value } => by_dtype!(value.dtype(), K => {
            K::wrap(vec![K::from_scalar(*value).expect("dtype matches"); numel])
        }),
        NodeKind::Unary { op, x } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            eval_unary(*op, xs, tx.dtype).ok_or_else(|| bad(format!("{op:?} on {}", tx.dtype)))?
        }
        NodeKind::Binary { op, a, b } => {
            same_shape(&[*a, *b])?;
            let (sa, ta) = operand(graph, values, *a);
            let (sb, tb) = operand(graph, values, *b);
            if ta.dtype != tb.dtype {
                return Err(bad(format!(
                    "operands differ: {} vs {}",
                    ta.dtype, tb.dtype
                )));
            }
            eval_binary(*op, sa, sb, ta.dtype)
                .ok_or_else(|| bad(format!("{op:?} on {}", ta.dtype)))?
        }
        NodeKind::Select { cond, a, b } => {
            same_shape(&[*cond, *a, *b])?;
            let (sc, _) = operand(graph, values, *cond);
            let (sa, ta) = operand(graph, values, *a);
            let sb = operand(graph, values, *b).0;
            eval_select(sc, sa, sb, ta.dtype, i, name)?
        }
        NodeKind::Cast { x, to } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            eval_cast(xs, tx.dtype, *to, i, name)?
        }
        NodeKind::Gather { x, offset, border } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            check_offset(offset, shape).map_err(&bad)?;
            by_dtype!(tx.dtype, K => {
                let src = typed::<K>(xs, i, name)?;
                let cval = border_value::<K>(border).map_err(&bad)?;
                K::wrap(kernels::gather(src, shape, offset, border, cval))
            })
        }
        NodeKind::Network {
            inputs: ins,
            width,
            pairs,
            output,
        } => {
            same_shape(ins)?;
            if ins.is_empty() || (*width as usize) < ins.len() || output >= width {
                return Err(bad(format!(
                    "{} inputs, width {width}, output {output}",
                    ins.len()
                )));
            }
            if let Some(p) = pairs.iter().find(|&&(a, b)| a >= b || b >= *width) {
                return Err(bad(format!(
                    "pair {p:?} must satisfy i < j < width {width}"
                )));
            }
            let dtype = graph.node(ins[0]).ty.dtype;
            by_dtype!(dtype, K => {
                let srcs = ins
                    .iter()
                    .map(|&id| typed::<K>(operand(graph, values, id).0, i, name))
                    .collect::<Result<Vec<_>, _>>()?;
                K::wrap(kernels::network::<K>(&srcs, *width as usize, pairs, *output as usize))
            })
        }
        NodeKind::WindowReduce {
            x,
            op,
            footprint,
            border,
        } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            if footprint.offsets.is_empty() {
                return Err(bad("empty footprint".into()));
            }
            for off in &footprint.offsets {
                check_offset(off, shape).map_err(&bad)?;
            }
            check_reduce(*op, tx.dtype).map_err(&bad)?;
            by_dtype!(tx.dtype, K => {
                let src = typed::<K>(xs, i, name)?;
                let cval = border_value::<K>(border).map_err(&bad)?;
                with_combiner!(op, K, f => K::wrap(kernels::window(
                    src, shape, &footprint.offsets, border, cval, f
                )))
            })
        }
        NodeKind::Scan { x, axis, op } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            if *axis >= shape.len() {
                return Err(bad(format!("axis {axis} out of range")));
            }
            check_reduce(*op, tx.dtype).map_err(&bad)?;
            by_dtype!(tx.dtype, K => {
                let src = typed::<K>(xs, i, name)?;
                with_combiner!(op, K, f => K::wrap(kernels::scan(src, shape, *axis, f)))
            })
        }
        NodeKind::Line { x, program } => {
            let (xs, tx) = operand(graph, values, *x);
            line::run(program, xs, tx, i, name)?
        }
        NodeKind::Extern { x, call } => {
            same_shape(&[*x])?;
            let (xs, tx) = operand(graph, values, *x);
            extern_line::run(call, xs, tx, i)?
        }
        NodeKind::AxisReduce { x, axis, op } => {
            let (xs, tx) = operand(graph, values, *x);
            let in_shape = &tx.shape;
            let mut expect = in_shape.clone();
            if *axis >= expect.len() {
                return Err(bad(format!("axis {axis} out of range")));
            }
            expect[*axis] = 1;
            if &expect != shape {
                return Err(bad(format!(
                    "reducing {in_shape:?} along {axis} gives {expect:?}, the node declares {shape:?}"
                )));
            }
            check_reduce(*op, tx.dtype).map_err(&bad)?;
            by_dtype!(tx.dtype, K => {
                let src = typed::<K>(xs, i, name)?;
                with_combiner!(op, K, f => K::wrap(kernels::axis_reduce(src, in_shape, *axis, f)))
            })
        }
    })
}

/// `c ? a : b` elementwise (`a` and `b` of dtype `d`), for node `i` of kind `name`.
fn eval_select(
    sc: &Storage,
    sa: &Storage,
    sb: &Storage,
    d: DType,
    i: usize,
    name: &str,
) -> Result<Storage, RuntimeError> {
    let c = typed::<KBool>(sc, i, name)?;
    Ok(by_dtype!(d, K => {
        let av = typed::<K>(sa, i, name)?;
        let bv = typed::<K>(sb, i, name)?;
        K::wrap(kernels::map3(c, av, bv, |c, a, b| if c != 0 { a } else { b }))
    }))
}

/// Elementwise conversion of `xs` (of `from`) to `to`, for node `i` of kind `name`.
fn eval_cast(
    xs: &Storage,
    from: DType,
    to: DType,
    i: usize,
    name: &str,
) -> Result<Storage, RuntimeError> {
    if from == to {
        return Ok(xs.clone());
    }
    Ok(by_dtype!(from, A => by_dtype!(to, B => {
        let src = typed::<A>(xs, i, name)?;
        B::wrap(kernels::map1(src, elem::cast_one::<A, B>))
    })))
}

/// Checks an offset has one entry per spatial dim of `shape`.
fn check_offset(off: &[i64], shape: &[usize]) -> Result<(), String> {
    if shape.len() < 3 || off.len() != shape.len() - 2 {
        return Err(format!(
            "offset {off:?} does not match the spatial dims of {shape:?}"
        ));
    }
    Ok(())
}

/// Checks a reduction accepts a dtype (sum: not bool; any/all: bool only).
fn check_reduce(op: ReduceOp, d: DType) -> Result<(), String> {
    if op.accepts(d) {
        Ok(())
    } else {
        Err(format!("{op:?} does not accept {d}"))
    }
}

/// The constant a border reads outside the range (unused for other modes).
fn border_value<K: Kind>(border: &Border) -> Result<K::T, String> {
    match border {
        Border::Constant(c) => K::from_scalar(*c)
            .ok_or_else(|| format!("border constant is {}, source is {}", c.dtype(), K::DTYPE)),
        _ => Ok(K::top()),
    }
}

/// Evaluates a unary op; `None` when the op does not accept the dtype.
fn eval_unary(op: UnaryOp, xs: &Storage, d: DType) -> Option<Storage> {
    fn float<K: Float>(op: UnaryOp, x: &[K::T]) -> Option<Storage> {
        Some(match op {
            UnaryOp::Neg => K::wrap(kernels::map1(x, K::neg)),
            UnaryOp::Abs => K::wrap(kernels::map1(x, K::abs)),
            UnaryOp::Sqrt => K::wrap(kernels::map1(x, K::sqrt)),
            UnaryOp::IsNan => KBool::wrap(kernels::map1(x, |v| u8::from(K::is_nan(v)))),
            UnaryOp::IsFinite => KBool::wrap(kernels::map1(x, |v| u8::from(K::is_finite(v)))),
            UnaryOp::Not => return None,
            UnaryOp::Exp => K::wrap(kernels::map1(x, K::exp)),
            UnaryOp::Log => K::wrap(kernels::map1(x, K::log)),
        })
    }
    match (d, xs) {
        (DType::F32, Storage::F32(x)) => float::<KF32>(op, x),
        (DType::F64, Storage::F64(x)) => float::<KF64>(op, x),
        (DType::U8, Storage::U8(x)) => match op {
            UnaryOp::Neg => Some(KU8::wrap(kernels::map1(x, KU8::neg))),
            UnaryOp::Abs => Some(KU8::wrap(x.clone())),
            _ => None,
        },
        (DType::Bool, Storage::Bool(x)) => match op {
            UnaryOp::Not => Some(KBool::wrap(kernels::map1(x, |v| v ^ 1))),
            _ => None,
        },
        _ => by_int_dtype!(d, K => {
            let x = K::slice(xs)?;
            match op {
                UnaryOp::Neg => Some(K::wrap(kernels::map1(x, K::neg))),
                UnaryOp::Abs => Some(K::wrap(kernels::map1(x, <K as Int>::abs))),
                _ => None,
            }
        }, None),
    }
}

/// Evaluates a binary op on operands of dtype `d`; `None` when the op does not accept it.
fn eval_binary(op: BinaryOp, sa: &Storage, sb: &Storage, d: DType) -> Option<Storage> {
    fn arith<K: Arith>(op: BinaryOp, a: &[K::T], b: &[K::T]) -> Option<Storage> {
        Some(match op {
            BinaryOp::Add => K::wrap(kernels::map2(a, b, K::add)),
            BinaryOp::Sub => K::wrap(kernels::map2(a, b, K::sub)),
            BinaryOp::Mul => K::wrap(kernels::map2(a, b, K::mul)),
            BinaryOp::Div => K::wrap(kernels::map2(a, b, K::div)),
            _ => return None,
        })
    }
    fn common<K: Kind>(op: BinaryOp, a: &[K::T], b: &[K::T]) -> Option<Storage> {
        Some(match op {
            BinaryOp::Min => K::wrap(kernels::map2(a, b, K::min)),
            BinaryOp::Max => K::wrap(kernels::map2(a, b, K::max)),
            BinaryOp::Lt => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(K::lt(x, y)))),
            BinaryOp::Le => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(K::le(x, y)))),
            BinaryOp::Gt => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(K::lt(y, x)))),
            BinaryOp::Ge => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(K::le(y, x)))),
            BinaryOp::Eq => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(K::eq(x, y)))),
            BinaryOp::Ne => KBool::wrap(kernels::map2(a, b, |x, y| u8::from(!K::eq(x, y)))),
            _ => return None,
        })
    }
    if !matches!(
        op,
        BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::And
            | BinaryOp::Or
    ) {
        return by_dtype!(d, K => common::<K>(op, K::slice(sa)?, K::slice(sb)?));
    }
    match (d, sa, sb) {
        (DType::F32, Storage::F32(a), Storage::F32(b)) => arith::<KF32>(op, a, b),
        (DType::F64, Storage::F64(a), Storage::F64(b)) => arith::<KF64>(op, a, b),
        (DType::U8, Storage::U8(a), Storage::U8(b)) => arith::<KU8>(op, a, b),
        (DType::Bool, Storage::Bool(a), Storage::Bool(b)) => match op {
            BinaryOp::And => Some(KBool::wrap(kernels::map2(a, b, |x, y| x & y))),
            BinaryOp::Or => Some(KBool::wrap(kernels::map2(a, b, |x, y| x | y))),
            _ => None,
        },
        _ => by_int_dtype!(d, K => arith::<K>(op, K::slice(sa)?, K::slice(sb)?), None),
    }
}
