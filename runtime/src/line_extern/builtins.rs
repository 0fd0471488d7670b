//! The built-in extern line functions, registered in every process (tests and the fuzzer use
//! them; their names start with `kiln.`).
//!
//! | name | input → output | params | per line, in walking order |
//! |---|---|---|---|
//! | `kiln.copy` | any → same | none | `y[i] = x[i]` |
//! | `kiln.median3` | f32/f64 → same | none | median of `x[i-1], x[i], x[i+1]` (ends clamped) |
//! | `kiln.since_true` | bool/u8 → f32 | `[f32:unit]` | `unit * (i - j)` for the last `j <= i` with `x[j] != 0`, `+inf` before any |
//! | `kiln.nearest_true` | bool/u8 → f32 | none | `min |i - j|` over `x[j] != 0`, `+inf` when none |
//!
//! Each non-trivial function has two implementations: a one- or two-pass one that the fused
//! path calls and a naive one (sorting, or a search over every `j`) as the eager twin.
//! Exactness: `median3` picks an input element (canonical NaN when any of the three is NaN;
//! otherwise the middle one in the total order where −0 < +0, and elements equal in that
//! order have equal bits), so the network of kiln min/max and the sort agree bit for bit.
//! The distances are integers below 2^24 converted once to f32 (exact), then multiplied
//! once by `unit` (one rounding, NaN made canonical), the same operations in both.
//! Limits: lines longer than 2^24 give inexact distances (the same ones in both).

use kiln_ir::semantics::{
    canon_f32, max_f32, max_f64, min_f32, min_f64, order_key_f32, order_key_f64,
};
use kiln_ir::{DType, Scalar};

use super::{LineExtern, LineIn, LineOut, LineView};

/// The names of the built-in externs.
pub const BUILTIN_NAMES: [&str; 4] = [
    "kiln.copy",
    "kiln.median3",
    "kiln.since_true",
    "kiln.nearest_true",
];

/// Every built-in extern.
pub(super) fn all() -> Vec<LineExtern> {
    vec![
        LineExtern::new("kiln.copy", copy, copy, |d, p| {
            no_params(p)?;
            Ok(d)
        }),
        LineExtern::new("kiln.median3", median3_network, median3_sorted, |d, p| {
            no_params(p)?;
            if d.is_float() {
                Ok(d)
            } else {
                Err(format!("takes f32 or f64, not {d}"))
            }
        }),
        LineExtern::new(
            "kiln.since_true",
            since_true_running,
            since_true_search,
            |d, p| {
                features(d)?;
                unit(p)?;
                Ok(DType::F32)
            },
        ),
        LineExtern::new(
            "kiln.nearest_true",
            nearest_two_pass,
            nearest_search,
            |d, p| {
                features(d)?;
                no_params(p)?;
                Ok(DType::F32)
            },
        ),
    ]
}

fn no_params(p: &[Scalar]) -> Result<(), String> {
    if p.is_empty() {
        Ok(())
    } else {
        Err(format!("takes no parameters, got {}", p.len()))
    }
}

fn features(d: DType) -> Result<(), String> {
    if matches!(d, DType::Bool | DType::U8) {
        Ok(())
    } else {
        Err(format!("takes bool or u8, not {d}"))
    }
}

fn unit(p: &[Scalar]) -> Result<f32, String> {
    match p {
        [Scalar::F32(b)] => Ok(f32::from_bits(*b)),
        _ => Err("takes one f32 parameter (the unit distance)".into()),
    }
}

fn mismatch(x: &LineIn<'_>) -> String {
    format!("unexpected {} input or output dtype", x.dtype())
}

fn copy(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    fn fill<T: Copy>(v: LineView<'_, T>, out: &mut [T]) {
        for (o, e) in out.iter_mut().zip(v.iter()) {
            *o = e;
        }
    }
    match (x, y) {
        (LineIn::F32(v), LineOut::F32(o)) => fill(v, o),
        (LineIn::F64(v), LineOut::F64(o)) => fill(v, o),
        (LineIn::U8(v), LineOut::U8(o)) | (LineIn::Bool(v), LineOut::Bool(o)) => fill(v, o),
        (x, _) => return Err(mismatch(&x)),
    }
    Ok(())
}

/// `x[i-1], x[i], x[i+1]` with the ends clamped.
fn triple<T: Copy>(v: &LineView<'_, T>, i: usize) -> [T; 3] {
    let n = v.len();
    [
        v.get(i.saturating_sub(1)),
        v.get(i),
        v.get((i + 1).min(n - 1)),
    ]
}

fn median3_network(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    fn med<T: Copy>(v: LineView<'_, T>, out: &mut [T], min: fn(T, T) -> T, max: fn(T, T) -> T) {
        for (i, o) in out.iter_mut().enumerate() {
            let [a, b, c] = triple(&v, i);
            *o = max(min(a, b), min(max(a, b), c));
        }
    }
    match (x, y) {
        (LineIn::F32(v), LineOut::F32(o)) => med(v, o, min_f32, max_f32),
        (LineIn::F64(v), LineOut::F64(o)) => med(v, o, min_f64, max_f64),
        (x, _) => return Err(mismatch(&x)),
    }
    Ok(())
}

fn median3_sorted(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    fn med<T: Copy, K: Ord>(
        v: LineView<'_, T>,
        out: &mut [T],
        nan: fn(T) -> Option<T>,
        key: fn(T) -> K,
    ) {
        for (i, o) in out.iter_mut().enumerate() {
            let mut t = triple(&v, i);
            *o = match t.iter().find_map(|&e| nan(e)) {
                Some(canonical) => canonical,
                None => {
                    t.sort_by_key(|&e| key(e));
                    t[1]
                }
            };
        }
    }
    match (x, y) {
        (LineIn::F32(v), LineOut::F32(o)) => med(
            v,
            o,
            |e| e.is_nan().then(|| canon_f32(e)),
            |e| order_key_f32(e.to_bits()),
        ),
        (LineIn::F64(v), LineOut::F64(o)) => med(
            v,
            o,
            |e| e.is_nan().then(|| kiln_ir::semantics::canon_f64(e)),
            |e| order_key_f64(e.to_bits()),
        ),
        (x, _) => return Err(mismatch(&x)),
    }
    Ok(())
}

/// The feature bytes of a bool or u8 line.
fn feature_view<'a>(x: &LineIn<'a>) -> Result<LineView<'a, u8>, String> {
    match *x {
        LineIn::U8(v) | LineIn::Bool(v) => Ok(v),
        ref x => Err(mismatch(x)),
    }
}

/// `d` positions times `unit` as f32 (`None`: no feature, `+inf`), NaN canonical.
fn distance(d: Option<usize>, unit: f32) -> f32 {
    match d {
        Some(d) => canon_f32(d as f32 * unit),
        None => f32::INFINITY,
    }
}

fn since_true_running(x: LineIn<'_>, y: LineOut<'_>, p: &[Scalar]) -> Result<(), String> {
    let u = unit(p)?;
    let v = feature_view(&x)?;
    let LineOut::F32(out) = y else {
        return Err(mismatch(&x));
    };
    let mut since: Option<usize> = None;
    for (i, o) in out.iter_mut().enumerate() {
        since = if v.get(i) != 0 {
            Some(0)
        } else {
            since.map(|s| s + 1)
        };
        *o = distance(since, u);
    }
    Ok(())
}

fn since_true_search(x: LineIn<'_>, y: LineOut<'_>, p: &[Scalar]) -> Result<(), String> {
    let u = unit(p)?;
    let v = feature_view(&x)?;
    let LineOut::F32(out) = y else {
        return Err(mismatch(&x));
    };
    for (i, o) in out.iter_mut().enumerate() {
        let last = (0..=i).rev().find(|&j| v.get(j) != 0);
        *o = distance(last.map(|j| i - j), u);
    }
    Ok(())
}

fn nearest_two_pass(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let v = feature_view(&x)?;
    let LineOut::F32(out) = y else {
        return Err(mismatch(&x));
    };
    let n = v.len();
    // Forward: distance to the last feature at or before i; backward: the min with the
    // next feature at or after i.
    let mut best: Vec<Option<usize>> = vec![None; n];
    let mut since: Option<usize> = None;
    for (i, b) in best.iter_mut().enumerate() {
        since = if v.get(i) != 0 {
            Some(0)
        } else {
            since.map(|s| s + 1)
        };
        *b = since;
    }
    let mut until: Option<usize> = None;
    for i in (0..n).rev() {
        until = if v.get(i) != 0 {
            Some(0)
        } else {
            until.map(|s| s + 1)
        };
        best[i] = match (best[i], until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    for (o, b) in out.iter_mut().zip(best) {
        *o = distance(b, 1.0);
    }
    Ok(())
}

fn nearest_search(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let v = feature_view(&x)?;
    let LineOut::F32(out) = y else {
        return Err(mismatch(&x));
    };
    for (i, o) in out.iter_mut().enumerate() {
        let d = (0..v.len())
            .filter(|&j| v.get(j) != 0)
            .map(|j| i.abs_diff(j))
            .min();
        *o = distance(d, 1.0);
    }
    Ok(())
}
