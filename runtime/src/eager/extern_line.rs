//! Eager extern nodes: calls the extern's eager twin on a contiguous copy of every line.
//!
//! Lines run one after another in row-major order of the other axes; each is copied element
//! by element in its walking order (from the last index down for a backward call) into a
//! fresh buffer, the twin writes a fresh output buffer, and element `k` of it is stored at
//! the position of input element `k`. It shares nothing with the fused runner
//! (`fused/extern_line.rs`) but the registry and the checked call.
//!
//! Limits: the oracle's speed is not a goal (two copies per line, element by element).

use kiln_ir::{ExternCall, TensorType};

use super::bad_node;
use crate::line_extern::{call_line, line_in, resolve};
use crate::{RuntimeError, Storage};

/// Runs `call` over `xs` (contiguous, of type `tx`) for node `i`.
pub(super) fn run(
    call: &ExternCall,
    xs: &Storage,
    tx: &TensorType,
    i: usize,
) -> Result<Storage, RuntimeError> {
    let shape = &tx.shape;
    let axis = call.axis;
    if axis >= shape.len() {
        return Err(bad_node(
            i,
            "extern",
            format!("axis {axis} out of range for {shape:?}"),
        ));
    }
    let ext = resolve(call, tx.dtype)?;
    let outer: usize = shape[..axis].iter().product();
    let n = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Storage::zeros(call.out, outer * n * inner);
    // Storage index of element `k` (walking order) of line `l`.
    let at = |l: usize, k: usize| {
        let k = if call.backward { n - 1 - k } else { k };
        (l / inner * n + k) * inner + l % inner
    };
    for l in 0..outer * inner {
        let mut line = Storage::zeros(tx.dtype, n);
        for k in 0..n {
            line.set(k, xs.get(at(l, k)));
        }
        let mut y = Storage::zeros(call.out, n);
        let view = line_in(&line, 0, 1, n).map_err(|m| bad_node(i, "extern", m))?;
        call_line(&call.name, &ext.eager, view, &mut y, &call.params)?;
        for k in 0..n {
            out.set(at(l, k), y.get(k));
        }
    }
    Ok(out)
}
