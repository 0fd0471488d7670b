//! Operator builders (`kiln_op`): an operator of kiln's registry by name, parameters set with
//! typed setters, built into a one-input graph for a given input dtype and shape.
//!
//! Exactness: typed values are rendered into the registry's parameter syntax losslessly
//! (integers in decimal, doubles in shortest round-trip exponent form, masks as `0`/`1`), so
//! a C-built operator is the graph `kiln_ops::build_op` builds for the CLI.
//! Limits: masks have 1 to 3 axes (the registry's footprint syntax); a parameter set twice
//! keeps the last value.

use std::ffi::{c_char, c_int};

use kiln_ir::TensorType;
use kiln_ops::{build_op, op_info, op_names, OpError, OpInfo};

use crate::buffer::{dtype_from_code, read_dims, read_str};
use crate::graph::{hand_out_graph, KilnGraph, KILN_MAX_RANK};
use crate::status::{free_boxed, guard, Failure, KilnStatus};

/// An operator with its parameters so far (`kiln_op` in kiln.h).
pub struct KilnOp {
    info: &'static OpInfo,
    params: Vec<(String, String)>,
}

/// How a parameter is given from C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ints,
    Double,
    Bool,
    Mask,
    /// A string: `mode`, and any parameter this layer does not know (in registry syntax).
    Str,
}

impl Kind {
    fn of(param: &str) -> Kind {
        match param {
            "k" | "size" | "origin" => Kind::Ints,
            "cval" => Kind::Double,
            "border_value" => Kind::Bool,
            "footprint" | "structure" => Kind::Mask,
            // Morphology family (helper morph).
            "iterations" | "connectivity" | "structure_iterations" | "origin1" | "origin2" => {
                Kind::Ints
            }
            "brute_force" => Kind::Bool,
            "structure1" | "structure2" => Kind::Mask,
            // Rank filters (helper rank); median_blur's `padding` is a string.
            "rank" => Kind::Ints,
            "percentile" => Kind::Double,
            _ => Kind::Str,
        }
    }

    fn setter(self) -> &'static str {
        match self {
            Kind::Ints => "kiln_op_set_int or kiln_op_set_ints",
            Kind::Double => "kiln_op_set_double",
            Kind::Bool => "kiln_op_set_bool",
            Kind::Mask => "kiln_op_set_mask",
            Kind::Str => "kiln_op_set_string",
        }
    }
}

impl KilnOp {
    /// Stores `value` for `name`, checking that the operator takes `name` and that it is set
    /// with the setter of its kind.
    fn set(&mut self, name: &str, kind: Kind, value: String) -> Result<(), Failure> {
        if !self.info.params.iter().any(|(n, _)| *n == name) {
            return Err(OpError::UnknownParam {
                op: self.info.name,
                name: name.to_string(),
                accepted: self
                    .info
                    .params
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            }
            .into());
        }
        let expected = Kind::of(name);
        if expected != kind {
            return Err(Failure::new(
                KilnStatus::InvalidArgument,
                format!(
                    "{}: parameter `{name}` is set with {}",
                    self.info.name,
                    expected.setter()
                ),
            ));
        }
        match self.params.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.params.push((name.to_string(), value)),
        }
        Ok(())
    }
}

/// Borrows an operator handle mutably.
///
/// # Safety
/// `op`, when not NULL, must be a live handle not used by another thread at the same time.
unsafe fn op_mut<'a>(op: *mut KilnOp) -> Result<&'a mut KilnOp, Failure> {
    // SAFETY: caller contract.
    unsafe { op.as_mut() }.ok_or_else(|| Failure::null("op"))
}

/// Creates a builder for operator `name` (`*out`, freed with `kiln_op_free`).
#[no_mangle]
pub unsafe extern "C" fn kiln_op_new(name: *const c_char, out: *mut *mut KilnOp) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: NULL or NUL-terminated.
        let name = unsafe { read_str(name, "name") }?;
        let info = op_info(name).ok_or_else(|| OpError::UnknownOp {
            name: name.to_string(),
            known: op_names().join(", "),
        })?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        let h = Box::into_raw(Box::new(KilnOp {
            info,
            params: Vec::new(),
        }));
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(h) };
        Ok(())
    })
}

/// Frees an operator builder; NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_free(op: *mut KilnOp) {
    // SAFETY: the handle contract of `free_boxed` is this function's own.
    unsafe { free_boxed(op) }
}

/// Sets an integer-list parameter (`k`, `size`, `origin`) to `count` values.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_ints(
    op: *mut KilnOp,
    name: *const c_char,
    values: *const i64,
    count: usize,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contracts on each pointer.
        let (op, name) = unsafe { (op_mut(op)?, read_str(name, "name")?) };
        if count == 0 {
            return Err(Failure::new(
                KilnStatus::InvalidArgument,
                format!("parameter `{name}`: no values"),
            ));
        }
        // SAFETY: `values` holds `count` integers (caller contract); the count is bounded.
        let v = unsafe { read_dims(values, count, "values") }.map_err(|f| match f.status {
            KilnStatus::Shape => Failure::new(KilnStatus::InvalidArgument, f.message),
            _ => f,
        })?;
        let text = v
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",");
        op.set(name, Kind::Ints, text)
    })
}

/// Sets an integer parameter to one value (the same value on every axis).
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_int(
    op: *mut KilnOp,
    name: *const c_char,
    value: i64,
) -> KilnStatus {
    // SAFETY: forwarded caller contract; `&value` is one readable integer.
    unsafe { kiln_op_set_ints(op, name, &value, 1) }
}

/// Sets a floating-point parameter (`cval`); NaN and infinities are allowed.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_double(
    op: *mut KilnOp,
    name: *const c_char,
    value: f64,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contracts on each pointer.
        let (op, name) = unsafe { (op_mut(op)?, read_str(name, "name")?) };
        op.set(name, Kind::Double, format!("{value:e}"))
    })
}

/// Sets a boolean parameter (`border_value`): zero is false, anything else true.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_bool(
    op: *mut KilnOp,
    name: *const c_char,
    value: c_int,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contracts on each pointer.
        let (op, name) = unsafe { (op_mut(op)?, read_str(name, "name")?) };
        op.set(name, Kind::Bool, if value != 0 { "1" } else { "0" }.into())
    })
}

/// Sets a string parameter (`mode`: "reflect", "constant", "nearest", "mirror", "wrap", ...).
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_string(
    op: *mut KilnOp,
    name: *const c_char,
    value: *const c_char,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contracts on each pointer.
        let (op, name, value) = unsafe {
            (
                op_mut(op)?,
                read_str(name, "name")?,
                read_str(value, "value")?,
            )
        };
        op.set(name, Kind::Str, value.to_string())
    })
}

/// Sets a boolean mask parameter (`footprint`, `structure`): `rank` (1 to 3) extents in
/// `shape` and their product of bytes in `mask`, row-major, nonzero meaning inside.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_set_mask(
    op: *mut KilnOp,
    name: *const c_char,
    mask: *const u8,
    shape: *const usize,
    rank: usize,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contracts on each pointer.
        let (op, name) = unsafe { (op_mut(op)?, read_str(name, "name")?) };
        if !(1..=3).contains(&rank) {
            return Err(Failure::new(
                KilnStatus::InvalidArgument,
                format!("parameter `{name}`: a mask has 1 to 3 axes, not {rank}"),
            ));
        }
        // SAFETY: `shape` holds `rank` (<= 3) extents by the caller's contract.
        let shape = unsafe { read_dims(shape, rank, "shape") }?;
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n > 0 && n <= 1 << 20)
            .ok_or_else(|| {
                Failure::new(
                    KilnStatus::InvalidArgument,
                    format!("parameter `{name}`: mask shape {shape:?} is empty or too large"),
                )
            })?;
        if mask.is_null() {
            return Err(Failure::null("mask"));
        }
        // SAFETY: non-NULL; `mask` holds the product of the extents (checked above, at most
        // 2^20) bytes by the caller's contract.
        let m = unsafe { std::slice::from_raw_parts(mask, n) };
        let (planes, rows, cols) = match shape.as_slice() {
            [c] => (1, 1, *c),
            [r, c] => (1, *r, *c),
            [p, r, c] => (*p, *r, *c),
            _ => unreachable!("rank checked to be 1..=3"),
        };
        let bit = |i: usize| if m[i] != 0 { "1" } else { "0" };
        let text = (0..planes)
            .map(|p| {
                (0..rows)
                    .map(|r| {
                        (0..cols)
                            .map(|c| bit((p * rows + r) * cols + c))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .collect::<Vec<_>>()
            .join("|");
        op.set(name, Kind::Mask, text)
    })
}

/// Builds the operator for one input of `dtype` and `shape` (`rank` axes, batch and channel
/// first) into a new graph (`*out`, freed with `kiln_graph_free`). The builder stays usable.
#[no_mangle]
pub unsafe extern "C" fn kiln_op_build(
    op: *const KilnOp,
    dtype: c_int,
    shape: *const usize,
    rank: usize,
    out: *mut *mut KilnGraph,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: NULL or a live handle.
        let op = unsafe { op.as_ref() }.ok_or_else(|| Failure::null("op"))?;
        let dtype = dtype_from_code(dtype)?;
        if rank > KILN_MAX_RANK {
            return Err(Failure::new(
                KilnStatus::Shape,
                format!("shape: rank {rank} exceeds KILN_MAX_RANK ({KILN_MAX_RANK})"),
            ));
        }
        // SAFETY: `shape` holds `rank` (bounded) extents by the caller's contract.
        let shape = unsafe { read_dims(shape, rank, "shape") }?;
        let graph = build_op(op.info.name, &op.params, &TensorType { dtype, shape })?;
        // SAFETY: caller contract on `out`.
        unsafe { hand_out_graph(graph, out) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_kinds_cover_every_registered_parameter() {
        // A registry parameter this layer does not know would only be settable as a string.
        for info in kiln_ops::OPS {
            for (p, _) in info.params {
                assert!(
                    Kind::of(p) != Kind::Str || *p == "mode" || *p == "padding",
                    "{}: parameter {p} has no typed setter",
                    info.name
                );
            }
        }
    }

    #[test]
    fn doubles_render_losslessly() {
        for v in [0.1f64, -0.0, 1e-300, f64::MAX, f64::MIN_POSITIVE / 3.0, 2.5] {
            let s = format!("{v:e}");
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{s}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let s = format!("{v:e}");
            let back = s.parse::<f64>().unwrap();
            assert!(
                back.is_nan() == v.is_nan() && (v.is_nan() || back == v),
                "{s}"
            );
        }
    }
}
