//! Extern kernels on the CPU: the registered function called once per line, lines split
//! across threads.
//!
//! Each task takes a run of lines (index tuples of the axes other than `axis`, row-major);
//! for each it makes a strided [`LineView`](crate::line_extern::LineView) straight into the
//! input tensor's storage (first element in walking order, signed step), calls the function
//! into a task-local contiguous buffer, and copies element `k` of the buffer to the output
//! position of input element `k`. Exactness: every line is one call on exactly the elements
//! the eager executor copies for it, in the same order, with the same parameters; the split
//! into tasks only changes which thread makes the call.
//!
//! A bool line holding bytes other than 0 and 1 is passed as a normalised copy (those bytes
//! read as true, as in eager). Limits: one buffer copy per line (the function never writes
//! the output tensor directly).

use std::sync::Mutex;

use kiln_ir::ExternCall;

use super::out_ptr::OutPtr;
use crate::executor::lock;
use crate::line_extern::{call_line, line_in, resolve, LineIn};
use crate::tensor::{contiguous_strides, Storage, Tensor};
use crate::RuntimeError;

/// Runs `call` over `x`; returns a contiguous tensor of `x`'s shape and dtype `call.out`,
/// fresh or in `reuse` (storage of the output's dtype and length, overwritten).
pub(crate) fn run(
    x: &Tensor,
    call: &ExternCall,
    out_shape: &[usize],
    reuse: Option<Storage>,
) -> Result<Tensor, RuntimeError> {
    let shape = x.shape();
    let axis = call.axis;
    if axis >= shape.len() || out_shape != shape {
        return Err(RuntimeError::Shape(format!(
            "extern `{}` along axis {axis} of {shape:?} cannot give {out_shape:?}",
            call.name
        )));
    }
    let ext = resolve(call, x.dtype())?;
    let len: usize = shape.iter().product();
    let mut storage = match reuse {
        Some(s) if s.dtype() == call.out && s.len() == len => s,
        Some(s) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {} {} elements for a {} output of {len}",
                s.len(),
                s.dtype(),
                call.out
            )))
        }
        None => Storage::zeros(call.out, len),
    };
    let n = shape[axis];
    if len == 0 {
        return Tensor::from_storage(storage, out_shape);
    }
    let out = OutPtr(storage.as_mut_ptr());
    let size = call.out.size_bytes();
    let xs = x.strides();
    let os = contiguous_strides(shape);
    let line_axes: Vec<usize> = (0..shape.len()).filter(|&a| a != axis).collect();
    let line_shape: Vec<usize> = line_axes.iter().map(|&a| shape[a]).collect();
    let lines = len / n;
    let back = call.backward;
    let (src_step, out_step) = if back {
        (-(xs[axis] as isize), -(os[axis] as isize))
    } else {
        (xs[axis] as isize, os[axis] as isize)
    };
    let last = n - 1;
    let threads = rayon::current_num_threads().max(1);
    let per = lines.div_ceil(threads * 4).max(1);
    let failure: Mutex<Option<RuntimeError>> = Mutex::new(None);
    let task = |t: usize| {
        let mut buf = Storage::zeros(call.out, n);
        let mut idx = vec![0usize; line_shape.len()];
        for l in t * per..((t + 1) * per).min(lines) {
            if lock(&failure).is_some() {
                return;
            }
            decode(l, &line_shape, &mut idx);
            let mut src0 = x.offset();
            let mut out0 = 0usize;
            for (&a, &i) in line_axes.iter().zip(&idx) {
                src0 += i * xs[a];
                out0 += i * os[a];
            }
            if back {
                src0 += last * xs[axis];
                out0 += last * os[axis];
            }
            let r = line_in(x.storage(), src0, src_step, n)
                .map_err(RuntimeError::Shape)
                .and_then(|view| match bool_copy(view) {
                    // Bool bytes other than 0 and 1 read as true, as in eager.
                    Some(fixed) => call_line(
                        &call.name,
                        &ext.func,
                        line_in(&fixed, 0, 1, n).map_err(RuntimeError::Shape)?,
                        &mut buf,
                        &call.params,
                    ),
                    None => call_line(&call.name, &ext.func, view, &mut buf, &call.params),
                });
            if let Err(e) = r {
                lock(&failure).get_or_insert(e);
                return;
            }
            // The line's outputs are `out0 + k * out_step` for `k < n`: both ends must be
            // inside the output (checked here, before any write).
            let far = out0 as isize + last as isize * out_step;
            if out0 >= len || far < 0 || far as usize >= len {
                lock(&failure).get_or_insert(RuntimeError::Shape(format!(
                    "extern line {l} would write outside an output of {len} elements"
                )));
                return;
            }
            let src = buf.as_ptr();
            for k in 0..n {
                let o = (out0 as isize + k as isize * out_step) as usize;
                // SAFETY: `o` lies between `out0` and `far`, both checked to be `< len`
                // above, and the output storage holds `len` elements of `size` bytes; the
                // lines of different tasks are distinct index tuples of the other axes,
                // so no two tasks write the same element (see `OutPtr`). `buf` holds `n`
                // elements of the output's dtype (`call_line` checked its length), so
                // element `k < n` is inside it, and the two buffers do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.add(k * size), out.get().add(o * size), size);
                }
            }
        }
    };
    crate::inline::for_each_index(lines.div_ceil(per), task);
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Tensor::from_storage(storage, out_shape)
}

/// A contiguous copy of a bool line with every non-zero byte made 1, when it has a byte
/// other than 0 and 1 (`None`: the view is already clean).
fn bool_copy(view: LineIn<'_>) -> Option<Storage> {
    let LineIn::Bool(v) = view else {
        return None;
    };
    if v.iter().all(|b| b <= 1) {
        return None;
    }
    Some(Storage::Bool(v.iter().map(|b| u8::from(b != 0)).collect()))
}

/// Row-major multi-index of `flat` in `shape`.
fn decode(mut flat: usize, shape: &[usize], idx: &mut [usize]) {
    for k in (0..shape.len()).rev() {
        idx[k] = flat % shape[k];
        flat /= shape[k];
    }
}
