//! scipy.ndimage window arguments (`size` or `footprint`, and `origin`) and their resolution
//! into kiln footprints.

use kiln_ir::{Footprint, TensorType};

use crate::error::OpError;

/// A scipy-style window over the spatial axes: a full box of `size`, or a boolean footprint,
/// plus an `origin` shift. A single-entry `size` or `origin` applies to every spatial axis
/// (as scipy broadcasts a scalar); a footprint must have exactly one axis per spatial axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Extent per spatial axis (or one entry for all axes).
    pub shape: Vec<usize>,
    /// Row-major mask of `shape` (`None`: every entry is on, i.e. scipy's `size=`).
    pub mask: Option<Vec<bool>>,
    /// scipy's `origin`: per spatial axis, or one entry for all axes (empty means 0).
    pub origin: Vec<i64>,
}

impl Window {
    /// scipy's `size=`: a full box (one entry per spatial axis, or one entry for all).
    pub fn size(size: &[usize]) -> Window {
        Window {
            shape: size.to_vec(),
            mask: None,
            origin: Vec::new(),
        }
    }

    /// scipy's `footprint=`: a boolean mask of `shape` in row-major order.
    pub fn footprint(shape: &[usize], mask: &[bool]) -> Window {
        Window {
            shape: shape.to_vec(),
            mask: Some(mask.to_vec()),
            origin: Vec::new(),
        }
    }

    /// scipy's `generate_binary_structure(rank, 1)`: the cross of radius 1 (the default
    /// structure of `binary_erosion`).
    pub fn cross(rank: usize) -> Window {
        let shape = vec![3; rank];
        let total = 3usize.pow(rank as u32);
        let mask = (0..total)
            .map(|flat| {
                let mut rem = flat;
                let mut dist = 0;
                for _ in 0..rank {
                    dist += (rem % 3).abs_diff(1);
                    rem /= 3;
                }
                dist <= 1
            })
            .collect::<Vec<_>>();
        Window::footprint(&shape, &mask)
    }

    /// The same window with scipy's `origin` (one entry per spatial axis, or one for all).
    pub fn with_origin(mut self, origin: &[i64]) -> Window {
        self.origin = origin.to_vec();
        self
    }

    /// Checks the window against an input of spatial rank `rank` and returns the per-axis
    /// shape, the mask and the per-axis origin. Rules (scipy's): every extent `>= 1`; a
    /// footprint has exactly `rank` axes, a mask of `prod(shape)` entries and at least one
    /// `true`; each origin satisfies `-(size/2) <= origin <= (size-1)/2`.
    pub fn resolve(&self, op: &'static str, rank: usize) -> Result<ResolvedWindow, OpError> {
        let shape = match (&self.mask, self.shape.len()) {
            (None, 1) => vec![self.shape[0]; rank],
            (_, n) if n == rank => self.shape.clone(),
            (Some(_), n) => {
                return Err(OpError::BadFootprint {
                    op,
                    problem: format!("footprint has {n} axes, the input has {rank} spatial axes"),
                })
            }
            (None, n) => {
                return Err(OpError::BadSize {
                    op,
                    size: self.shape.clone(),
                    problem: format!("{n} entries for {rank} spatial axes (give 1 or {rank})"),
                })
            }
        };
        if shape.contains(&0) {
            return match self.mask {
                None => Err(OpError::BadSize {
                    op,
                    size: self.shape.clone(),
                    problem: "every size must be at least 1".into(),
                }),
                Some(_) => Err(OpError::BadFootprint {
                    op,
                    problem: format!("shape {shape:?} has a zero extent"),
                }),
            };
        }
        let total = shape
            .iter()
            .try_fold(1usize, |acc, &s| acc.checked_mul(s))
            .filter(|&t| t <= kiln_ir::builder::MAX_FOOTPRINT)
            .ok_or_else(|| OpError::BadSize {
                op,
                size: self.shape.clone(),
                problem: format!(
                    "window larger than {} entries",
                    kiln_ir::builder::MAX_FOOTPRINT
                ),
            })?;
        let mask = match &self.mask {
            None => vec![true; total],
            Some(m) => {
                if m.len() != total {
                    return Err(OpError::BadFootprint {
                        op,
                        problem: format!(
                            "mask has {} entries, shape {shape:?} needs {total}",
                            m.len()
                        ),
                    });
                }
                if !m.iter().any(|&b| b) {
                    return Err(OpError::BadFootprint {
                        op,
                        problem: "footprint has no true entry".into(),
                    });
                }
                m.clone()
            }
        };
        let origin = match self.origin.len() {
            0 => vec![0; rank],
            1 => vec![self.origin[0]; rank],
            n if n == rank => self.origin.clone(),
            n => {
                return Err(OpError::BadOrigin {
                    op,
                    origin: self.origin.clone(),
                    problem: format!("{n} entries for {rank} spatial axes (give 1 or {rank})"),
                })
            }
        };
        for (axis, (&s, &o)) in shape.iter().zip(&origin).enumerate() {
            let lo = -((s / 2) as i64);
            let hi = ((s - 1) / 2) as i64;
            if o < lo || o > hi {
                return Err(OpError::BadOrigin {
                    op,
                    origin: self.origin.clone(),
                    problem: format!("axis {axis}: size {s} needs {lo} <= origin <= {hi}, got {o}"),
                });
            }
        }
        Ok(ResolvedWindow {
            shape,
            mask,
            origin,
        })
    }
}

/// A window checked against an input rank (see [`Window::resolve`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedWindow {
    /// Extent per spatial axis.
    pub shape: Vec<usize>,
    /// Row-major mask of `shape`, at least one entry on.
    pub mask: Vec<bool>,
    /// Origin per spatial axis, in scipy's valid range.
    pub origin: Vec<i64>,
}

impl ResolvedWindow {
    /// Number of `true` entries (scipy's `filter_size` for rank filters).
    pub fn count(&self) -> usize {
        self.mask.iter().filter(|&&b| b).count()
    }

    /// scipy's correlation footprint: the on entries `j` at offsets `j - size/2 - origin`,
    /// row-major. `out[i] = op over o of x[i + o]` is scipy's `minimum_filter`,
    /// `median_filter`, `grey_erosion` etc.
    pub fn footprint(&self) -> Footprint {
        Footprint::scipy_masked(&self.shape, &self.mask, &self.origin)
    }

    /// The reflected footprint (every offset negated): what scipy's `grey_dilation` uses once
    /// it has reversed the footprint and turned `origin` into `-origin` (minus one on even
    /// axes). Both adjustments together are exactly offset negation.
    pub fn reflected_footprint(&self) -> Footprint {
        let mut f = self.footprint();
        for off in &mut f.offsets {
            for o in off.iter_mut() {
                *o = -*o;
            }
        }
        f
    }
}

/// Checks that `ty` has at least `min_rank` spatial dims and returns its spatial rank.
pub(crate) fn spatial_rank(
    op: &'static str,
    ty: &TensorType,
    min_rank: usize,
) -> Result<usize, OpError> {
    if ty.shape.len() < 2 + min_rank {
        return Err(OpError::BadInput {
            op,
            problem: format!(
                "input shape {:?} needs [B, C, S1..Sd] with at least {min_rank} spatial dims",
                ty.shape
            ),
        });
    }
    Ok(ty.shape.len() - 2)
}
