//! Scans and axis reductions: compiled fold/combine functions over independent lines.
//!
//! * Along the innermost axis, each row (every index tuple of the other axes) is one call of
//!   the [`FoldFn`]; rows run in parallel.
//! * Along an outer axis, each *line* (an index tuple of the axes other than `axis` and the
//!   innermost one) walks the axis row by row: the first row is a copy, every next row is one
//!   [`CombineFn`] call of the previous result with the source row. Lines, and column chunks
//!   of long rows, run in parallel.

use kiln_codegen::cpu::{CombineFn, FoldFn};

use super::out_ptr::OutPtr;
use crate::tensor::{contiguous_strides, Storage, Tensor};
use crate::RuntimeError;

/// Runs a scan (`scan`) or reduction of `x` along `axis`; returns a contiguous tensor of
/// `out_shape` (`x`'s shape, with `axis` of length 1 for a reduction), fresh or in `reuse`
/// (storage of `x`'s dtype and the output's length, overwritten).
pub(crate) fn run(
    x: &Tensor,
    axis: usize,
    scan: bool,
    fold: FoldFn,
    combine: CombineFn,
    out_shape: &[usize],
    reuse: Option<Storage>,
) -> Result<Tensor, RuntimeError> {
    let shape = x.shape();
    let rank = shape.len();
    let mut expected = shape.to_vec();
    if axis >= rank || rank < 2 {
        return Err(RuntimeError::Shape(format!(
            "axis {axis} out of range for shape {shape:?}"
        )));
    }
    if !scan {
        expected[axis] = 1;
    }
    if out_shape != expected.as_slice() {
        return Err(RuntimeError::Shape(format!(
            "{} of {shape:?} along {axis} gives {expected:?}, not {out_shape:?}",
            if scan { "scan" } else { "reduction" }
        )));
    }
    let es = x.dtype().size_bytes();
    let len: usize = out_shape.iter().product();
    let mut storage = match reuse {
        Some(s) if s.dtype() == x.dtype() && s.len() == len => s,
        Some(s) => {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {} {} elements for a {} output of {len}",
                s.len(),
                s.dtype(),
                x.dtype()
            )))
        }
        None => Storage::zeros(x.dtype(), len),
    };
    let out = OutPtr(storage.as_mut_ptr());
    let xs = x.strides();
    let os = contiguous_strides(out_shape);
    let threads = rayon::current_num_threads().max(1);
    let inner = rank - 1;
    if axis == inner {
        let width = shape[inner];
        let lines: usize = shape[..inner].iter().product();
        let per = lines.div_ceil(threads * 4).max(1);
        let task = |chunk: usize| {
            let base = x.storage().as_ptr();
            let mut idx = vec![0usize; inner];
            for line in chunk * per..((chunk + 1) * per).min(lines) {
                decode(line, &shape[..inner], &mut idx);
                let src_elem = x.offset() + dot(&idx, &xs[..inner]);
                let out_elem = dot(&idx, &os[..inner]);
                // SAFETY: `idx` is in range, so `src_elem` is the storage index of the row's
                // column 0 and the `width` columns at stride `xs[inner]` stay inside the
                // storage (checked when the view was made); `out_elem` is column 0 of this
                // line's output row (`width` or 1 elements, contiguous), written by this task
                // only. The fold writes `width` elements for a scan, one for a reduction.
                unsafe {
                    fold(
                        base.add(src_elem * es),
                        xs[inner] as i64,
                        out.get().add(out_elem * es),
                        1,
                        width as i64,
                        scan as i64,
                    );
                }
            }
        };
        crate::inline::for_each_index(lines.div_ceil(per), task);
    } else {
        let width = shape[inner];
        let n = shape[axis];
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
        let task = |t: usize| {
            let base = x.storage().as_ptr();
            let (line, chunk) = (t / chunks_per_line, t % chunks_per_line);
            let c0 = chunk * chunk_w;
            let w = chunk_w.min(width - c0);
            let mut idx = vec![0usize; line_shape.len()];
            decode(line, &line_shape, &mut idx);
            let mut src0 = x.offset() + c0 * xs[inner];
            let mut out0 = c0;
            for (&a, &i) in line_axes.iter().zip(&idx) {
                src0 += i * xs[a];
                out0 += i * os[a];
            }
            let sstride = xs[inner] as i64;
            // The first row: a copy (moves keep every bit).
            for c in 0..w {
                // SAFETY: element `c` of row 0 of this line and chunk: in range in both the
                // source view and the contiguous output; only this task writes it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        base.add((src0 + c * xs[inner]) * es),
                        out.get().add((out0 + c) * es),
                        es,
                    );
                }
            }
            for k in 1..n {
                let src = src0 + k * xs[axis];
                let (acc, dst) = if scan {
                    (out0 + (k - 1) * os[axis], out0 + k * os[axis])
                } else {
                    (out0, out0)
                };
                // SAFETY: `k < n`, so source row `k` of this line/chunk (`w` columns at
                // stride `xs[inner]`) is inside the view; `acc` and `dst` are `w`-column
                // contiguous pieces of output rows of this line/chunk, written only by this
                // task; for a reduction `acc == dst`, which the combine function allows
                // (each column reads before it writes).
                unsafe {
                    combine(
                        out.get().add(acc * es),
                        1,
                        base.add(src * es),
                        sstride,
                        out.get().add(dst * es),
                        1,
                        w as i64,
                    );
                }
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
    //! Scheduling tested with hand-written fold/combine functions (f32 sums).

    use super::*;
    use kiln_ir::Scalar;

    unsafe extern "C" fn fold_sum(
        src: *const u8,
        ss: i64,
        out: *mut u8,
        os: i64,
        w: i64,
        scan: i64,
    ) {
        // SAFETY: test function; arguments follow the FoldFn contract.
        unsafe {
            let (src, out) = (src as *const f32, out as *mut f32);
            let mut acc = *src;
            if scan != 0 {
                *out = acc;
            }
            for x in 1..w as isize {
                acc += *src.offset(x * ss as isize);
                if scan != 0 {
                    *out.offset(x * os as isize) = acc;
                }
            }
            if scan == 0 {
                *out = acc;
            }
        }
    }

    unsafe extern "C" fn combine_sum(
        acc: *const u8,
        as_: i64,
        src: *const u8,
        ss: i64,
        out: *mut u8,
        os: i64,
        w: i64,
    ) {
        // SAFETY: test function; arguments follow the CombineFn contract.
        unsafe {
            for x in 0..w as isize {
                let a = *(acc as *const f32).offset(x * as_ as isize);
                let b = *(src as *const f32).offset(x * ss as isize);
                *(out as *mut f32).offset(x * os as isize) = a + b;
            }
        }
    }

    fn reference(x: &Tensor, axis: usize, scan: bool) -> Vec<u32> {
        let shape = x.shape().to_vec();
        let mut oshape = shape.clone();
        if !scan {
            oshape[axis] = 1;
        }
        let n: usize = oshape.iter().product();
        let mut out = Vec::with_capacity(n);
        let mut idx = vec![0usize; shape.len()];
        for _ in 0..n {
            let upto = if scan { idx[axis] + 1 } else { shape[axis] };
            let mut j = idx.clone();
            j[axis] = 0;
            let get = |j: &[usize]| match x.get(j) {
                Scalar::F32(b) => f32::from_bits(b),
                _ => unreachable!(),
            };
            let mut acc = get(&j);
            for k in 1..upto {
                j[axis] = k;
                acc += get(&j);
            }
            out.push(acc.to_bits());
            crate::tensor::increment(&mut idx, &oshape);
        }
        out
    }

    #[test]
    fn scans_and_reductions_along_every_axis() {
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
                    let mut oshape = shape.to_vec();
                    if !scan {
                        oshape[axis] = 1;
                    }
                    for input in [&x, &xt] {
                        let got =
                            run(input, axis, scan, fold_sum, combine_sum, &oshape, None).unwrap();
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
                            reference(&x, axis, scan),
                            "{shape:?} axis {axis} scan {scan}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_output_shape_is_an_error() {
        let x = Tensor::from_f32(vec![1.0; 6], &[1, 1, 2, 3]).unwrap();
        assert!(run(&x, 2, false, fold_sum, combine_sum, &[1, 1, 2, 3], None).is_err());
        assert!(run(&x, 4, true, fold_sum, combine_sum, &[1, 1, 2, 3], None).is_err());
    }
}
