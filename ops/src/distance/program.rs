//! The distance transforms as registry programs: parameters, `Program`s, `PROGRAMS` entries.
//!
//! Scope: `distance_transform_edt` (`sampling`, `return_distances`, `return_indices`),
//! `distance_transform_cdt` (`metric` = chessboard | taxicab | cityblock | manhattan | a 3^d
//! array), `distance_transform_bf` (`metric` = euclidean | taxicab | chessboard, `sampling`),
//! each with one `[B, C, S1..Sd]` input and the outputs `distances` then `indices` (those asked
//! for, in that order). Parameter syntax is the registry's: `sampling=1,2.5` (one value or one
//! per spatial axis), `metric=0,1,0;1,1,1;0,1,0` (rows by `;`, planes by `|`, any numbers:
//! non-zero is true), `return_indices=1`.
//!
//! Exactness: the programs only move data; the algorithms' arguments are in their modules.
//!
//! Limits: a metric array is converted to bool; scipy reads a non-bool metric array's bytes as
//! bool (scipy issue #18878), so an integer array with values other than 0/1 gives different
//! results there (SEMANTICS.md).

use kiln_ir::TensorType;

use super::BfMetric;

use crate::error::OpError;
use crate::registry::Params;

/// Which outputs a transform returns (scipy's `return_distances`, `return_indices`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Returns {
    /// Return the distances (default true).
    pub distances: bool,
    /// Return the indices (default false).
    pub indices: bool,
}

impl Returns {
    /// Parses `return_distances` and `return_indices` (0/1, false/true); at least one.
    pub fn parse(p: &Params<'_>) -> Result<Returns, OpError> {
        let distances = flag(p, "return_distances", true)?;
        let indices = flag(p, "return_indices", false)?;
        if !distances && !indices {
            return Err(p.bad(
                "return_distances",
                "at least one of return_distances/return_indices must be 1",
            ));
        }
        Ok(Returns { distances, indices })
    }

    /// Output names in order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.distances {
            v.push("distances");
        }
        if self.indices {
            v.push("indices");
        }
        v
    }
}

/// A 0/1 flag parameter.
fn flag(p: &Params<'_>, name: &str, default: bool) -> Result<bool, OpError> {
    match p.get(name) {
        None => Ok(default),
        Some("1" | "true" | "True") => Ok(true),
        Some("0" | "false" | "False") => Ok(false),
        Some(v) => Err(p.bad(name, format!("`{v}` is not 0 or 1"))),
    }
}

/// `sampling=`: none, one value, or one per spatial axis (checked against `rank`).
pub fn parse_sampling(p: &Params<'_>, rank: usize) -> Result<Vec<f64>, OpError> {
    let s = p.list::<f64>("sampling", "numbers")?;
    match s {
        None => Ok(vec![1.0; rank]),
        Some(v) if v.len() == 1 => Ok(vec![v[0]; rank]),
        Some(v) if v.len() == rank => Ok(v),
        Some(v) => Err(p.bad(
            "sampling",
            format!(
                "{} values for {rank} spatial axes (give one, or one per axis)",
                v.len()
            ),
        )),
    }
}

/// `metric=` of the CDT as its 3^rank structure (row-major 0/1): chessboard (the default),
/// taxicab/cityblock/manhattan, or an array `a,b,c;d,e,f;g,h,i` (planes by `|`) of extent 3 on
/// every axis with `rank` axes (leading axes of extent 1 in the text are dropped).
pub fn parse_cdt_metric(p: &Params<'_>, rank: usize) -> Result<Vec<bool>, OpError> {
    match p.get("metric").unwrap_or("chessboard") {
        "chessboard" => Ok(super::cdt::metric_structure(rank, true)),
        "taxicab" | "cityblock" | "manhattan" => Ok(super::cdt::metric_structure(rank, false)),
        text => {
            let (shape, values) = parse_array(p, text)?;
            let mut shape = shape;
            while shape.len() > rank && shape[0] == 1 {
                shape.remove(0);
            }
            if shape.len() != rank || shape.iter().any(|&n| n != 3) {
                return Err(p.bad(
                    "metric",
                    format!(
                        "a metric array must have extent 3 on each of the input's {rank} spatial axes, got shape {shape:?}"
                    ),
                ));
            }
            Ok(values.iter().map(|&v| v != 0.0).collect())
        }
    }
}

/// `a,b;c,d|e,f;g,h`: numbers, entries by `,`, rows by `;`, planes by `|`; returns
/// `([planes, rows, cols], values)`.
fn parse_array(p: &Params<'_>, text: &str) -> Result<(Vec<usize>, Vec<f64>), OpError> {
    let mut values = Vec::new();
    let mut plane_shape: Option<(usize, usize)> = None;
    let planes: Vec<&str> = text.split('|').collect();
    for plane in &planes {
        let rows: Vec<&str> = plane.split(';').collect();
        let mut width = None;
        for row in &rows {
            let entries: Vec<&str> = row.split(',').collect();
            if *width.get_or_insert(entries.len()) != entries.len() {
                return Err(p.bad("metric", "rows have different lengths"));
            }
            for e in entries {
                let v = e.trim().parse::<f64>().map_err(|_| {
                    p.bad(
                        "metric",
                        format!(
                            "`{}` is neither a metric name (chessboard, taxicab, cityblock, manhattan) nor a number",
                            e.trim()
                        ),
                    )
                })?;
                values.push(v);
            }
        }
        let this = (rows.len(), width.unwrap_or(0));
        if *plane_shape.get_or_insert(this) != this {
            return Err(p.bad("metric", "planes have different shapes"));
        }
    }
    let (r, c) = plane_shape.unwrap_or((0, 0));
    Ok((vec![planes.len(), r, c], values))
}

/// `metric=` of the brute-force transform (default euclidean).
pub fn parse_bf_metric(p: &Params<'_>) -> Result<BfMetric, OpError> {
    match p.get("metric").unwrap_or("euclidean") {
        "euclidean" => Ok(BfMetric::Euclidean),
        "taxicab" | "cityblock" | "manhattan" => Ok(BfMetric::Taxicab),
        "chessboard" => Ok(BfMetric::Chessboard),
        other => Err(p.bad(
            "metric",
            format!("`{other}` is not euclidean, taxicab, cityblock, manhattan or chessboard"),
        )),
    }
}

/// The spatial rank of a `[B, C, S1..Sd]` input type (an error below 3 axes or above 10).
pub fn spatial_rank(op: &'static str, input: &TensorType) -> Result<usize, OpError> {
    let n = input.shape.len();
    if !(3..=2 + super::MAX_RANK).contains(&n) {
        return Err(OpError::BadInput {
            op,
            problem: format!(
                "input must be [B, C, S1..Sd] with 1 to {} spatial axes, got shape {:?}",
                super::MAX_RANK,
                input.shape
            ),
        });
    }
    Ok(n - 2)
}

const P_SAMPLING: (&str, &str) = (
    "sampling",
    "spacing per spatial axis: one value or one per axis, e.g. 1,2.5 (default 1)",
);
const P_RETURN_DISTANCES: (&str, &str) = (
    "return_distances",
    "1 (default) or 0: return the distances (first output)",
);
const P_RETURN_INDICES: (&str, &str) = (
    "return_indices",
    "0 (default) or 1: return the indices [B, C, d, S..] of the nearest background pixel (int32)",
);

/// `distance_transform_edt`'s name and parameters.
pub const EDT_INFO: crate::OpInfo = crate::OpInfo {
    name: "distance_transform_edt",
    summary: "scipy.ndimage.distance_transform_edt: exact Euclidean distances (f64) and indices (int32), bit for bit",
    params: &[P_SAMPLING, P_RETURN_DISTANCES, P_RETURN_INDICES],
};

/// `distance_transform_cdt`'s name and parameters.
pub const CDT_INFO: crate::OpInfo = crate::OpInfo {
    name: "distance_transform_cdt",
    summary: "scipy.ndimage.distance_transform_cdt: chamfer distances (int32) and indices, bit for bit",
    params: &[
        (
            "metric",
            "chessboard (default), taxicab, cityblock, manhattan, or a 3^d array e.g. 0,1,0;1,1,1;0,1,0 (non-zero is true)",
        ),
        P_RETURN_DISTANCES,
        P_RETURN_INDICES,
    ],
};

/// `distance_transform_bf`'s name and parameters.
pub const BF_INFO: crate::OpInfo = crate::OpInfo {
    name: "distance_transform_bf",
    summary: "scipy.ndimage.distance_transform_bf: brute-force distances (f64 euclidean, uint32 taxicab/chessboard) and indices",
    params: &[
        (
            "metric",
            "euclidean (default), taxicab, cityblock, manhattan or chessboard",
        ),
        P_SAMPLING,
        P_RETURN_DISTANCES,
        P_RETURN_INDICES,
    ],
};

/// `signed_distance`'s name and parameters.
pub const SIGNED_INFO: crate::OpInfo = crate::OpInfo {
    name: "signed_distance",
    summary: "edt(m) - edt(~m) for the mask m = x > threshold (default: x != 0): f64, positive inside, the mask read once",
    params: &[
        (
            "threshold",
            "foreground where x > threshold (default: scipy's truth test, x != 0)",
        ),
        P_SAMPLING,
    ],
};

/// `threshold=`: an f64 (also `nan`, `inf`), if given.
pub fn parse_threshold(p: &Params<'_>) -> Result<Option<f64>, OpError> {
    match p.get("threshold") {
        None => Ok(None),
        Some(v) => v
            .parse::<f64>()
            .map(Some)
            .map_err(|_| p.bad("threshold", format!("`{v}` is not a number"))),
    }
}
