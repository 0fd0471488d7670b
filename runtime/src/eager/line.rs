//! Eager line nodes: interprets a [`LineProgram`] position by position, all lines at once.
//!
//! At each position (in walking order) the elements of every line form one vector, and each
//! step op runs over the vectors with the eager executor's own elementwise code
//! (`eval_unary`, `eval_binary`, `eval_select`, `eval_cast`), so a line node means exactly
//! what the same ops as nodes mean. Each line sees its elements in order, one at a time;
//! nothing is reassociated. It shares nothing with the compiled line renderers.
//!
//! Limits: one vector per step value per position (memory ~ values × lines); the oracle's
//! speed is not a goal.

use kiln_ir::{DType, LineKeep, LineOp, LineProgram, Scalar, TensorType};

use super::{bad_node, eval_binary, eval_cast, eval_select, eval_unary};
use crate::{RuntimeError, Storage};

fn splat(c: Scalar, len: usize) -> Storage {
    let mut s = Storage::zeros(c.dtype(), len);
    for l in 0..len {
        s.set(l, c);
    }
    s
}

/// Runs `p` over `xs` (contiguous, of type `tx`) for node `i` of kind `name`.
pub(super) fn run(
    p: &LineProgram,
    xs: &Storage,
    tx: &TensorType,
    i: usize,
    name: &str,
) -> Result<Storage, RuntimeError> {
    let bad = |m: String| bad_node(i, name, m);
    let dtypes = p.value_dtypes(tx.dtype).map_err(bad)?;
    let shape = &tx.shape;
    let axis = p.axis;
    if axis >= shape.len() {
        return Err(bad(format!("axis {axis} out of range for {shape:?}")));
    }
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let lines = outer * inner;
    let base = p.init.len() + 1;
    let out_d: DType = match p.keep {
        LineKeep::Each(v) => dtypes.get(v as usize).copied(),
        LineKeep::Final(k) => p.init.get(k as usize).map(|c| c.dtype()),
    }
    .ok_or_else(|| bad(format!("kept value {:?} out of range", p.keep)))?;
    let each = matches!(p.keep, LineKeep::Each(_));
    let mut out = Storage::zeros(out_d, if each { outer * n * inner } else { lines });
    let at = |l: usize, k: usize| (l / inner * n + k) * inner + l % inner;
    let mut carries: Vec<Storage> = p.init.iter().map(|&c| splat(c, lines)).collect();
    for t in 0..n {
        let k = if p.backward { n - 1 - t } else { t };
        let mut x = Storage::zeros(tx.dtype, lines);
        for l in 0..lines {
            x.set(l, xs.get(at(l, k)));
        }
        let mut vals: Vec<Storage> = carries.clone();
        vals.push(x);
        for (j, op) in p.step.iter().enumerate() {
            let d = dtypes[base + j];
            let ill = || bad(format!("step op {j} ({op:?}) is ill-typed"));
            let v = match *op {
                LineOp::Const(c) => splat(c, lines),
                LineOp::Unary(o, a) => {
                    eval_unary(o, &vals[a as usize], dtypes[a as usize]).ok_or_else(ill)?
                }
                LineOp::Binary(o, a, b) => {
                    eval_binary(o, &vals[a as usize], &vals[b as usize], dtypes[a as usize])
                        .ok_or_else(ill)?
                }
                LineOp::Select(c, a, b) => eval_select(
                    &vals[c as usize],
                    &vals[a as usize],
                    &vals[b as usize],
                    d,
                    i,
                    name,
                )?,
                LineOp::Cast(a, to) => {
                    eval_cast(&vals[a as usize], dtypes[a as usize], to, i, name)?
                }
            };
            vals.push(v);
        }
        carries = p.next.iter().map(|&v| vals[v as usize].clone()).collect();
        if let LineKeep::Each(y) = p.keep {
            for l in 0..lines {
                out.set(at(l, k), vals[y as usize].get(l));
            }
        }
    }
    if let LineKeep::Final(kc) = p.keep {
        for l in 0..lines {
            out.set(l, carries[kc as usize].get(l));
        }
    }
    Ok(out)
}
