//! Line kernels on the CPU: the schedule that hands independent lines to a compiled
//! [`LineFn`] across threads.
//!
//! * Along the innermost axis, each row (an index tuple of the other axes) is one line and one
//!   call with one lane (its carries stay in registers); rows run in parallel.
//! * Along an outer axis, the lines of one row of the other axes (an index tuple of the axes
//!   other than `axis` and the innermost one, and a chunk of columns) are the lanes of one
//!   call, which walks the axis row by row; these calls run in parallel.
//!
//! A backward line is passed as its last element with negated steps, so the compiled walk
//! is direction-free. Exactness is the compiled step's (see `kiln_codegen::cpu`): every line
//! is walked element by element in its order by one call, whatever the split.
//! Limits: a seeded line (`LineInit::First`) along an empty axis is a shape error.

use kiln_codegen::cpu::{LineFn, LINE_CARRY_SLOT};
use kiln_codegen::kernel::{Direction, Line, LineInit};
use kiln_ir::DType;

use super::out_ptr::OutPtr;
use crate::tensor::{contiguous_strides, Storage, Tensor};
use crate::RuntimeError;

/// Runs `line` over `x` with its compiled walk `func`; returns a contiguous tensor of
/// `out_shape` and dtype `out_dtype` (`x`'s shape, with `axis` of length 1 when the final
/// carry is kept), fresh or in `reuse` (storage of the output's dtype and length, overwritten).
pub(crate) fn run(
    x: &Tensor,
    line: &Line,
    func: LineFn,
    out_dtype: DType,
    out_shape: &[usize],
    reuse: Option<Storage>,
) -> Result<Tensor, RuntimeError> {
    let shape = x.shape();
    let rank = shape.len();
    let axis = line.axis;
    let each = line.keeps_each();
    if axis >= rank || rank < 2 {
        return Err(RuntimeError::Shape(format!(
            "axis {axis} out of range for shape {shape:?}"
        )));
    }
    let mut expected = shape.to_vec();
    if !each {
        expected[axis] = 1;
    }
    if out_shape != expected.as_slice() {
        return Err(RuntimeError::Shape(format!(
            "{} of {shape:?} along {axis} gives {expected:?}, not {out_shape:?}",
            if each { "scan" } else { "reduction" }
        )));
    }
    let n = shape[axis];
    if n == 0 && matches!(line.init, LineInit::First) && !each {
        return Err(RuntimeError::Shape(format!(
            "a reduction seeded by its first element along the empty axis {axis} of {shape:?}"
        )));
    }
    let (xs_b, os_b) = (x.dtype().size_bytes(), out_dtype.size_bytes());
    let len: usize = out_shape.iter().product();
    let mut storage = match reuse {
        Some(s) if s.dtype() == out_dtype && s.len() == len => s,
        Some(s) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {} {} elements for a {} output of {len}",
                s.len(),
                s.dtype(),
                out_dtype
            )))
        }
        None => Storage::zeros(out_dtype, len),
    };
    if len == 0 {
        return Tensor::from_storage(storage, out_shape);
    }
    let out = OutPtr(storage.as_mut_ptr());
    let xs = x.strides();
    let os = contiguous_strides(out_shape);
    let back = line.direction == Direction::Backward;
    // Element offsets of a line's first element in walking order, and signed steps.
    let last = n.saturating_sub(1);
    let (src_first, src_step) = if back {
        (last * xs[axis], -(xs[axis] as i64))
    } else {
        (0, xs[axis] as i64)
    };
    let (out_first, out_step) = match (each, back) {
        (true, true) => (last * os[axis], -(os[axis] as i64)),
        (true, false) => (0, os[axis] as i64),
        (false, _) => (0, 0),
    };
    let threads = rayon::current_num_threads().max(1);
    let inner = rank - 1;
    if axis == inner {
        let lines: usize = shape[..inner].iter().product();
        let per = lines.div_ceil(threads * 4).max(1);
        let task = |chunk: usize| {
            let base = x.data_ptr();
            let mut idx = vec![0usize; inner];
            for l in chunk * per..((chunk + 1) * per).min(lines) {
                decode(l, &shape[..inner], &mut idx);
                let src_elem = x.offset() + dot(&idx, &xs[..inner]) + src_first;
                let out_elem = dot(&idx, &os[..inner]) + out_first;
                // SAFETY: `idx` is in range, so `src_elem` is the storage index of the line's
                // first element in walking order and the `n` elements at step `src_step`
                // stay inside the storage (checked when the view was made); `out_elem` and
                // its `n` (or 1) elements at `out_step` are this line's output, written by
                // this task only. One lane: no scratch is read.
                unsafe {
                    func(
                        base.add(src_elem * xs_b),
                        src_step,
                        0,
                        out.get().add(out_elem * os_b),
                        out_step,
                        0,
                        n as i64,
                        1,
                        std::ptr::null_mut(),
                    );
                }
            }
        };
        crate::inline::for_each_index(lines.div_ceil(per), task);
    } else {
        let width = shape[inner];
        // Line axes: every axis but `axis` and the innermost.
        let line_axes: Vec<usize> = (0..inner).filter(|&a| a != axis).collect();
        let line_shape: Vec<usize> = line_axes.iter().map(|&a| shape[a]).collect();
        let lines: usize = line_shape.iter().product();
        let want_tasks = threads * 4;
        let chunks_per_line = if lines >= want_tasks {
            1
        } else {
            want_tasks.div_ceil(lines).min(width.div_ceil(256)).max(1)
        };
        let chunk_w = width.div_ceil(chunks_per_line);
        let chunks_per_line = width.div_ceil(chunk_w);
        let slots = line.carries.len().max(1) * LINE_CARRY_SLOT;
        let task = |t: usize| {
            let base = x.data_ptr();
            let (l, chunk) = (t / chunks_per_line, t % chunks_per_line);
            let c0 = chunk * chunk_w;
            let w = chunk_w.min(width - c0);
            let mut idx = vec![0usize; line_shape.len()];
            decode(l, &line_shape, &mut idx);
            let mut src0 = x.offset() + c0 * xs[inner] + src_first;
            let mut out0 = c0 + out_first;
            for (&a, &i) in line_axes.iter().zip(&idx) {
                src0 += i * xs[a];
                out0 += i * os[a];
            }
            let mut scratch = vec![0u8; w * slots];
            // SAFETY: the `w` lanes (columns `c0..c0 + w` at stride `xs[inner]`) of this
            // line and chunk, each `n` elements from `src0` at `src_step`, are inside the
            // view; their outputs (`n` or 1 rows of `w` contiguous columns from `out0` at
            // `out_step`) are written by this task only; `scratch` holds `w` lanes of
            // `slots` bytes, as `LineFn` asks.
            unsafe {
                func(
                    base.add(src0 * xs_b),
                    src_step,
                    xs[inner] as i64,
                    out.get().add(out0 * os_b),
                    out_step,
                    1,
                    n as i64,
                    w as i64,
                    scratch.as_mut_ptr(),
                );
            }
        };
        crate::inline::for_each_index(lines * chunks_per_line, task);
    }
    Tensor::from_storage(storage, out_shape)
}

/// Row-major multi-index of `flat` in `shape`.
fn decode(mut flat: usize, shape: &[usize], idx: &mut [usize]) {
    for k in (0..shape.len()).rev() {
        idx[k] = flat % shape[k];
        flat /= shape[k];
    }
}

fn dot(a: &[usize], b: &[usize]) -> usize {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    //! Scheduling tested with a hand-written line function (an f32 sum seeded by the first
    //! element), forward and backward, against a direct reference.

    use super::*;
    use kiln_codegen::kernel::Direction;
    use kiln_ir::{ReduceOp, Scalar};

    /// Follows the `LineFn` contract for `Line::scan/reduce(_, Sum, F32)`; `KEEP_EACH`
    /// chooses which.
    unsafe fn sum_lines<const KEEP_EACH: bool>(
        (src, ss, sl): (*const u8, i64, i64),
        (out, os, ol): (*mut u8, i64, i64),
        n: i64,
        lanes: i64,
    ) {
        // SAFETY: test function; arguments follow the LineFn contract.
        unsafe {
            let (src, out) = (src as *const f32, out as *mut f32);
            for l in 0..lanes as isize {
                let s = src.offset(l * sl as isize);
                let o = out.offset(l * ol as isize);
                let mut acc = *s;
                if KEEP_EACH {
                    *o = acc;
                }
                for k in 1..n as isize {
                    acc += *s.offset(k * ss as isize);
                    if KEEP_EACH {
                        *o.offset(k * os as isize) = acc;
                    }
                }
                if !KEEP_EACH {
                    *o = acc;
                }
            }
        }
    }

    /// The test line function: a sum scan (`KEEP_EACH`) or a sum reduction.
    unsafe extern "C" fn sum_fn<const KEEP_EACH: bool>(
        src: *const u8,
        ss: i64,
        sl: i64,
        out: *mut u8,
        os: i64,
        ol: i64,
        n: i64,
        lanes: i64,
        _scratch: *mut u8,
    ) {
        // SAFETY: forwards the caller's LineFn arguments.
        unsafe { sum_lines::<KEEP_EACH>((src, ss, sl), (out, os, ol), n, lanes) }
    }

    fn reference(x: &Tensor, axis: usize, scan: bool, back: bool) -> Vec<u32> {
        let shape = x.shape().to_vec();
        let mut oshape = shape.clone();
        if !scan {
            oshape[axis] = 1;
        }
        let n: usize = oshape.iter().product();
        let len = shape[axis];
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..n {
            // Positions in walking order up to this output's.
            let order: Vec<usize> = if back {
                let from = if scan { idx[axis] } else { 0 };
                (from..len).rev().collect()
            } else {
                let upto = if scan { idx[axis] + 1 } else { len };
                (0..upto).collect()
            };
            let mut j = idx.clone();
            let get = |j: &[usize]| match x.get(j) {
                Scalar::F32(b) => f32::from_bits(b),
                _ => unreachable!(),
            };
            j[axis] = order[0];
            let mut acc = get(&j);
            for &k in &order[1..] {
                j[axis] = k;
                acc += get(&j);
            }
            out.push(acc.to_bits());
            crate::tensor::increment(&mut idx, &oshape);
        }
        out
    }

    #[test]
    fn lines_along_every_axis_both_ways() {
        for shape in [
            [1usize, 1, 1, 1],
            [2, 3, 4, 5],
            [1, 1, 1, 600],
            [1, 1, 7, 1],
            [3, 1, 1, 513],
        ] {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = (0..n).map(|i| ((i * 7919) % 97) as f32 * 0.1).collect();
            let x = Tensor::from_f32(data, &shape).unwrap();
            let xt = x.with_memory_order(&[0, 2, 3, 1]).unwrap();
            for axis in 0..4 {
                for scan in [true, false] {
                    for back in [false, true] {
                        let mut line = if scan {
                            Line::scan(axis, ReduceOp::Sum, DType::F32)
                        } else {
                            Line::reduce(axis, ReduceOp::Sum, DType::F32)
                        };
                        if back {
                            line.direction = Direction::Backward;
                        }
                        let f: LineFn = if scan {
                            sum_fn::<true>
                        } else {
                            sum_fn::<false>
                        };
                        let mut oshape = shape.to_vec();
                        if !scan {
                            oshape[axis] = 1;
                        }
                        for input in [&x, &xt] {
                            let got = run(input, &line, f, DType::F32, &oshape, None).unwrap();
                            let got: Vec<u32> = got
                                .to_scalars()
                                .iter()
                                .map(|s| match s {
                                    Scalar::F32(b) => *b,
                                    _ => unreachable!(),
                                })
                                .collect();
                            assert_eq!(
                                got,
                                reference(&x, axis, scan, back),
                                "{shape:?} axis {axis} scan {scan} backward {back}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_output_shape_is_an_error() {
        let x = Tensor::from_f32(vec![1.0; 6], &[1, 1, 2, 3]).unwrap();
        let reduce = Line::reduce(2, ReduceOp::Sum, DType::F32);
        let bad = Line::scan(4, ReduceOp::Sum, DType::F32);
        assert!(run(
            &x,
            &reduce,
            sum_fn::<false>,
            DType::F32,
            &[1, 1, 2, 3],
            None
        )
        .is_err());
        assert!(run(&x, &bad, sum_fn::<true>, DType::F32, &[1, 1, 2, 3], None).is_err());
    }
}
