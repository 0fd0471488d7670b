//! The signed distance `edt(m) - edt(~m)` of a mask `m` (`x > threshold`, or scipy's truth
//! test without a threshold): positive inside, negative outside, zero nowhere but where both
//! transforms are zero (never: every pixel is in `m` or in `~m`, so one term is 0.0).
//!
//! Scope: the mask is read from the input once; both transforms run on it (the second on its
//! negation) through the same EDT drivers as `distance_transform_edt`.
//!
//! Exactness: each term is the EDT's f64 bit for bit; the difference is one f64 subtraction
//! per pixel, numpy's `edt(m) - edt(~m)` (`x - 0.0 = x`, `0.0 - y = -y`, `0.0 - 0.0 = +0.0`).
//!
//! Limits: the two transforms are separate passes (not one fused kernel); a mask without
//! background (or without foreground) measures to scipy's virtual point, as the EDT does.

use super::{edt_run, Masks};
use crate::program::Exec;

/// `edt(m) - edt(~m)` for every image of `m`, concatenated.
pub fn signed_run(exec: Exec<'_>, m: &Masks, s: &[f64]) -> Vec<f64> {
    let inside = edt_run(exec, m, s, true, false)
        .distances
        .unwrap_or_default();
    let inverse = Masks {
        images: m.images,
        shape: m.shape.clone(),
        mask: m.mask.iter().map(|&b| !b).collect(),
    };
    let outside = edt_run(exec, &inverse, s, true, false)
        .distances
        .unwrap_or_default();
    inside.iter().zip(&outside).map(|(&a, &b)| a - b).collect()
}
