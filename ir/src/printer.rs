//! The IR text form: one line per node, then a `return` line. [`crate::parser::parse`] reads it
//! back exactly (`parse(&print(g)) == Ok(g)`); the grammar is in docs/IR_TEXT.md.
//!
//! ```text
//! %0 = input 0 : f32[1,1,8,8]
//! %1 = gather %0 offset=[-1,0] border=constant(f32:0.0) : f32[1,1,8,8]
//! %2 = max %0, %1 : f32[1,1,8,8]
//! return %2
//! ```

use std::fmt::{self, Write as _};

use crate::graph::{Graph, Node, NodeKind};
use crate::line::{LineKeep, LineOp, LineProgram};

/// Writes `graph` in the text form, one line per node and a final `return` line.
pub fn print(graph: &Graph) -> String {
    let mut out = String::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        write_node(&mut out, i, node);
        out.push('\n');
    }
    out.push_str("return ");
    write_list(&mut out, graph.outputs.iter());
    out.push('\n');
    out
}

/// Writes `items` separated by `", "`.
fn write_list<T: fmt::Display>(out: &mut String, items: impl Iterator<Item = T>) {
    for (k, item) in items.enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{item}");
    }
}

/// Writes `[a,b,c]` for a list of integers.
fn write_ints(out: &mut String, v: &[i64]) {
    out.push('[');
    for (k, x) in v.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

/// Writes one node line (without the newline).
fn write_node(out: &mut String, id: usize, node: &Node) {
    let _ = write!(out, "%{id} = ");
    match &node.kind {
        NodeKind::Input { index } => {
            let _ = write!(out, "input {index}");
        }
        NodeKind::Constant { value } => {
            let _ = write!(out, "const {value}");
        }
        NodeKind::Unary { op, x } => {
            let _ = write!(out, "{} {x}", op.name());
        }
        NodeKind::Binary { op, a, b } => {
            let _ = write!(out, "{} {a}, {b}", op.name());
        }
        NodeKind::Select { cond, a, b } => {
            let _ = write!(out, "select {cond}, {a}, {b}");
        }
        NodeKind::Cast { x, to } => {
            let _ = write!(out, "cast {x} to {to}");
        }
        NodeKind::Gather { x, offset, border } => {
            let _ = write!(out, "gather {x} offset=");
            write_ints(out, offset);
            let _ = write!(out, " border={border}");
        }
        NodeKind::Network {
            inputs,
            width,
            pairs,
            output,
        } => {
            out.push_str("network ");
            write_list(out, inputs.iter());
            let _ = write!(out, " width={width} pairs=[");
            for (k, (i, j)) in pairs.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                let _ = write!(out, "({i},{j})");
            }
            let _ = write!(out, "] output={output}");
        }
        NodeKind::WindowReduce {
            x,
            op,
            footprint,
            border,
        } => {
            let _ = write!(out, "window {} {x} footprint=[", op.name());
            for (k, off) in footprint.offsets.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                write_ints(out, off);
            }
            let _ = write!(out, "] border={border}");
        }
        NodeKind::Scan { x, axis, op } => {
            let _ = write!(out, "scan {} {x} axis={axis}", op.name());
        }
        NodeKind::AxisReduce { x, axis, op } => {
            let _ = write!(out, "reduce {} {x} axis={axis}", op.name());
        }
        NodeKind::Line { x, program } => write_line(out, *x, program),
        NodeKind::Extern { x, call } => {
            let dir = if call.backward { "backward" } else { "forward" };
            let _ = write!(
                out,
                "extern {} {x} axis={} dir={dir} out={} params=[",
                call.name, call.axis, call.out
            );
            write_list(out, call.params.iter());
            out.push(']');
        }
    }
    let _ = write!(out, " : {}", node.ty);
}

/// Writes a line node's right-hand side:
/// `line %x axis=A dir=forward init=[..] step=[..] next=[..] keep=each(v)`.
fn write_line(out: &mut String, x: crate::NodeId, p: &LineProgram) {
    let dir = if p.backward { "backward" } else { "forward" };
    let _ = write!(out, "line {x} axis={} dir={dir} init=[", p.axis);
    write_list(out, p.init.iter());
    out.push_str("] step=[");
    for (k, op) in p.step.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let _ = match op {
            LineOp::Const(c) => write!(out, "const({c})"),
            LineOp::Unary(op, a) => write!(out, "{}({a})", op.name()),
            LineOp::Binary(op, a, b) => write!(out, "{}({a},{b})", op.name()),
            LineOp::Select(c, a, b) => write!(out, "select({c},{a},{b})"),
            LineOp::Cast(a, to) => write!(out, "cast({a},{to})"),
        };
    }
    out.push_str("] next=[");
    write_list(out, p.next.iter());
    let _ = match p.keep {
        LineKeep::Each(v) => write!(out, "] keep=each({v})"),
        LineKeep::Final(k) => write!(out, "] keep=final({k})"),
    };
}

impl fmt::Display for Graph {
    /// The text form of [`print()`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}
