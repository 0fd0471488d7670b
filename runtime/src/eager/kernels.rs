//! Typed loops of the eager executor. Every function is generic over the element type and
//! the combining function, so each use compiles to its own monomorphised loop. Work is split
//! over rayon threads by output position only; every fold keeps its documented order.

use kiln_ir::semantics::remap_index;
use kiln_ir::Border;
use rayon::prelude::*;

use super::elem::Kind;
use crate::tensor::{contiguous_strides, increment};

/// Work (element steps) below which a node runs on the calling thread.
const PAR_MIN: usize = 1 << 15;
/// Target number of element steps per parallel chunk.
const CHUNK_WORK: usize = 1 << 14;

/// Fills `out` chunk by chunk (`chunk` elements each, the last one shorter), calling
/// `f(start, chunk)`; on rayon threads when `parallel`.
fn fill<O: Send>(out: &mut [O], chunk: usize, parallel: bool, f: impl Fn(usize, &mut [O]) + Sync) {
    let chunk = chunk.max(1);
    if parallel && out.len() > chunk {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i * chunk, c));
    } else {
        out.chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, c)| f(i * chunk, c));
    }
}

/// `out[i] = f(a[i])`.
pub(crate) fn map1<A, O, F>(a: &[A], f: F) -> Vec<O>
where
    A: Copy + Sync,
    O: Copy + Default + Send,
    F: Fn(A) -> O + Sync,
{
    let mut out = vec![O::default(); a.len()];
    fill(&mut out, CHUNK_WORK, a.len() >= PAR_MIN, |s, c| {
        let n = c.len();
        for (o, &x) in c.iter_mut().zip(&a[s..s + n]) {
            *o = f(x);
        }
    });
    out
}

/// `out[i] = f(a[i], b[i])`.
pub(crate) fn map2<A, B, O, F>(a: &[A], b: &[B], f: F) -> Vec<O>
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Copy + Default + Send,
    F: Fn(A, B) -> O + Sync,
{
    let mut out = vec![O::default(); a.len()];
    fill(&mut out, CHUNK_WORK, a.len() >= PAR_MIN, |s, c| {
        let n = c.len();
        for ((o, &x), &y) in c.iter_mut().zip(&a[s..s + n]).zip(&b[s..s + n]) {
            *o = f(x, y);
        }
    });
    out
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub(crate) fn map3<A, B, C, O, F>(a: &[A], b: &[B], c: &[C], f: F) -> Vec<O>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    O: Copy + Default + Send,
    F: Fn(A, B, C) -> O + Sync,
{
    let mut out = vec![O::default(); a.len()];
    fill(&mut out, CHUNK_WORK, a.len() >= PAR_MIN, |s, ch| {
        let n = ch.len();
        let it = ch
            .iter_mut()
            .zip(&a[s..s + n])
            .zip(&b[s..s + n])
            .zip(&c[s..s + n]);
        for (((o, &x), &y), &z) in it {
            *o = f(x, y, z);
        }
    });
    out
}

/// Row-major coordinates of flat position `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for ax in (0..shape.len()).rev() {
        c[ax] = flat % shape[ax];
        flat /= shape[ax];
    }
    c
}

/// Reads one row of a contiguous source of shape `shape` at spatial offset `off` under
/// `border`: calls `g(x, v)` for every column `x` of the output row whose outer coordinates
/// are `coords` (all axes but the last), with `v = src[.., remap(x + off_last)]`, or `cval`
/// where a constant border applies on any axis.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn read_row<T: Copy>(
    src: &[T],
    shape: &[usize],
    strides: &[usize],
    coords: &[usize],
    off: &[i64],
    border: &Border,
    cval: T,
    mut g: impl FnMut(usize, T),
) {
    let rank = shape.len();
    let w = shape[rank - 1];
    let mut base = 0usize;
    for a in 0..rank - 1 {
        let c = if a < 2 {
            coords[a]
        } else {
            match remap_index(
                (coords[a] as i64).saturating_add(off[a - 2]),
                shape[a],
                border,
            ) {
                Some(j) => j,
                None => {
                    for x in 0..w {
                        g(x, cval);
                    }
                    return;
                }
            }
        };
        base += c * strides[a];
    }
    let row = &src[base..base + w];
    let o = off[rank - 3];
    let wi = w as i64;
    // Columns whose source `x + o` lies inside the row: `lo..hi` (lo <= hi always).
    let lo = o.saturating_neg().clamp(0, wi) as usize;
    let hi = wi.saturating_sub(o).clamp(0, wi) as usize;
    let edge = |x: usize| match remap_index((x as i64).saturating_add(o), w, border) {
        Some(j) => row[j],
        None => cval,
    };
    for x in 0..lo {
        g(x, edge(x));
    }
    if lo < hi {
        let s = (lo as i64 + o) as usize;
        for (x, &v) in (lo..hi).zip(&row[s..s + (hi - lo)]) {
            g(x, v);
        }
    }
    for x in hi.max(lo)..w {
        g(x, edge(x));
    }
}

/// Window reduction: `out[p] = f(..f(f(v0, v1), v2).., vk)` where `vi` is the source read at
/// `p + offsets[i]` under `border` (a left fold in footprint order). A gather is the
/// one-offset case.
pub(crate) fn window<T, F>(
    src: &[T],
    shape: &[usize],
    offsets: &[Vec<i64>],
    border: &Border,
    cval: T,
    f: F,
) -> Vec<T>
where
    T: Copy + Default + Send + Sync,
    F: Fn(T, T) -> T + Sync,
{
    let n = src.len();
    let w = shape[shape.len() - 1];
    let outer = &shape[..shape.len() - 1];
    let strides = contiguous_strides(shape);
    let k = offsets.len().max(1);
    let rows_per_chunk = (CHUNK_WORK / (w * k)).max(1);
    let mut out = vec![T::default(); n];
    fill(
        &mut out,
        rows_per_chunk * w,
        n * k >= PAR_MIN,
        |start, chunk| {
            let mut coords = unravel(start / w, outer);
            for orow in chunk.chunks_mut(w) {
                let (first, rest) = offsets.split_first().expect("footprint is not empty");
                read_row(
                    src,
                    shape,
                    &strides,
                    &coords,
                    first,
                    border,
                    cval,
                    |x, v| orow[x] = v,
                );
                for off in rest {
                    read_row(src, shape, &strides, &coords, off, border, cval, |x, v| {
                        orow[x] = f(orow[x], v)
                    });
                }
                increment(&mut coords, outer);
            }
        },
    );
    out
}

/// A gather: `out[p] = src[remap(p + offset)]`, or `cval` under a constant border.
pub(crate) fn gather<T>(
    src: &[T],
    shape: &[usize],
    offset: &[i64],
    border: &Border,
    cval: T,
) -> Vec<T>
where
    T: Copy + Default + Send + Sync,
{
    window(src, shape, &[offset.to_vec()], border, cval, |a, _| a)
}

/// A comparator network over pointwise inputs (see `NodeKind::Network`). Pairs that cannot
/// reach the output wire are skipped (they do not change it).
pub(crate) fn network<K: Kind>(
    srcs: &[&[K::T]],
    width: usize,
    pairs: &[(u32, u32)],
    output: usize,
) -> Vec<K::T>
where
    K::T: Default,
{
    // Backward walk: a pair matters if it writes a wire that later matters.
    let mut live = vec![false; width];
    live[output] = true;
    let mut kept = Vec::new();
    for &(i, j) in pairs.iter().rev() {
        let (i, j) = (i as usize, j as usize);
        if live[i] || live[j] {
            live[i] = true;
            live[j] = true;
            kept.push((i, j));
        }
    }
    kept.reverse();
    let n = srcs[0].len();
    let chunk = (CHUNK_WORK / width).clamp(64, 4096);
    let mut out = vec![K::T::default(); n];
    let work = n.saturating_mul(kept.len() + 1);
    fill(&mut out, chunk, work >= PAR_MIN, |start, ch| {
        let len = ch.len();
        let mut wires = vec![K::top(); width * len];
        for (wi, s) in srcs.iter().enumerate() {
            if live[wi] {
                wires[wi * len..(wi + 1) * len].copy_from_slice(&s[start..start + len]);
            }
        }
        for &(i, j) in &kept {
            let (lo, hi) = wires.split_at_mut(j * len);
            let a = &mut lo[i * len..(i + 1) * len];
            let b = &mut hi[..len];
            for (p, q) in a.iter_mut().zip(b.iter_mut()) {
                let (x, y) = (*p, *q);
                *p = K::min(x, y);
                *q = K::max(x, y);
            }
        }
        ch.copy_from_slice(&wires[output * len..(output + 1) * len]);
    });
    out
}

/// `(outer, n, inner)`: the sizes before, at and after `axis`.
fn split_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// Inclusive scan along `axis`: `out[0] = x[0]`, `out[i] = f(out[i-1], x[i])`.
pub(crate) fn scan<T, F>(src: &[T], shape: &[usize], axis: usize, f: F) -> Vec<T>
where
    T: Copy + Send + Sync,
    F: Fn(T, T) -> T + Sync,
{
    let (_, n, inner) = split_axis(shape, axis);
    let mut out = src.to_vec();
    let block = n * inner;
    let one = |b: &mut [T]| {
        for i in 1..n {
            let (prev, cur) = b.split_at_mut(i * inner);
            let prev = &prev[(i - 1) * inner..];
            for (c, &p) in cur[..inner].iter_mut().zip(prev) {
                *c = f(p, *c);
            }
        }
    };
    let blocks_per_chunk = (CHUNK_WORK / block).max(1);
    fill(
        &mut out,
        blocks_per_chunk * block,
        src.len() >= PAR_MIN,
        |_, ch| ch.chunks_mut(block).for_each(one),
    );
    out
}

/// Reduction along `axis` (kept with length 1): a left fold in increasing index.
pub(crate) fn axis_reduce<T, F>(src: &[T], shape: &[usize], axis: usize, f: F) -> Vec<T>
where
    T: Copy + Default + Send + Sync,
    F: Fn(T, T) -> T + Sync,
{
    let (outer, n, inner) = split_axis(shape, axis);
    let mut out = vec![T::default(); outer * inner];
    let block = n * inner;
    let per_chunk = (CHUNK_WORK / block).max(1);
    fill(
        &mut out,
        per_chunk * inner,
        src.len() >= PAR_MIN,
        |start, ch| {
            for (bi, orow) in ch.chunks_mut(inner).enumerate() {
                let o = start / inner + bi;
                let b = &src[o * block..(o + 1) * block];
                orow.copy_from_slice(&b[..inner]);
                for i in 1..n {
                    for (acc, &v) in orow.iter_mut().zip(&b[i * inner..(i + 1) * inner]) {
                        *acc = f(*acc, v);
                    }
                }
            }
        },
    );
    out
}
