//! How an N-D array is read as kiln's `[B, C, S1..Sd]`: scipy's rule, every axis spatial
//! unless `axes=` names the spatial ones.
//!
//! Scope: from an array's shape and the call's `axes`, the permutation that puts the
//! non-spatial axes first (in their order) and the spatial axes after them (in `axes`'s
//! order, so `size[i]` applies to `axes[i]` as in scipy), and the kiln shape `[1, N, S..]`
//! where `N` is the product of the non-spatial extents. Exactness: the operators never mix
//! batch or channel elements, so folding every non-spatial axis into one channel axis changes
//! no value. Limits: at most as many spatial axes as the array has; no repeated axes.

use super::error::{Error, Result};

/// An array's axes read as kiln's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `perm[k]` is the array axis that becomes axis `k` of the permuted array.
    pub perm: Vec<usize>,
    /// The permuted array's shape (non-spatial axes, then spatial axes).
    pub permuted_shape: Vec<usize>,
    /// The kiln tensor shape `[1, N, S1..Sd]`.
    pub kiln_shape: Vec<usize>,
}

impl Layout {
    /// The layout of an array of `shape` filtered along `axes` (`None`: every axis; negative
    /// entries count from the end, as in numpy). Errors: a zero-size or 0-d array, an axis
    /// out of range or repeated, fewer than `min_spatial` spatial axes.
    pub fn new(shape: &[usize], axes: Option<&[isize]>, min_spatial: usize) -> Result<Layout> {
        let n = shape.len();
        if n == 0 {
            return Err(Error::Input("0-d array: nothing to filter".into()));
        }
        if shape.contains(&0) {
            return Err(Error::Input(format!("zero-size array of shape {shape:?}")));
        }
        let spatial: Vec<usize> = match axes {
            None => (0..n).collect(),
            Some(axes) => {
                let mut out = Vec::with_capacity(axes.len());
                for &a in axes {
                    let k = if a < 0 { a + n as isize } else { a };
                    if k < 0 || k >= n as isize {
                        return Err(Error::Input(format!(
                            "axis {a} is out of range for an array of {n} dimensions"
                        )));
                    }
                    let k = k as usize;
                    if out.contains(&k) {
                        return Err(Error::Input(format!("axes {axes:?} repeat axis {k}")));
                    }
                    out.push(k);
                }
                out
            }
        };
        if spatial.len() < min_spatial {
            return Err(Error::Input(format!(
                "{} spatial axes, the operators need at least {min_spatial} (array of shape {shape:?})",
                spatial.len()
            )));
        }
        let mut perm: Vec<usize> = (0..n).filter(|a| !spatial.contains(a)).collect();
        let channels: usize = perm.iter().map(|&a| shape[a]).product();
        perm.extend(&spatial);
        let permuted_shape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
        let mut kiln_shape = vec![1, channels];
        kiln_shape.extend(spatial.iter().map(|&a| shape[a]));
        Ok(Layout {
            perm,
            permuted_shape,
            kiln_shape,
        })
    }

    /// Whether the permutation is the identity (the common case: no `axes`, or trailing
    /// axes in order).
    pub fn is_identity(&self) -> bool {
        self.perm.iter().enumerate().all(|(k, &a)| k == a)
    }

    /// The inverse permutation: axis `a` of the array is axis `inverse()[a]` of the permuted
    /// array.
    pub fn inverse(&self) -> Vec<usize> {
        let mut inv = vec![0; self.perm.len()];
        for (k, &a) in self.perm.iter().enumerate() {
            inv[a] = k;
        }
        inv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_is_spatial_by_default() {
        let l = Layout::new(&[4, 5, 6], None, 1).unwrap();
        assert_eq!(l.kiln_shape, vec![1, 1, 4, 5, 6]);
        assert!(l.is_identity());
    }

    #[test]
    fn axes_fold_the_others_into_channels() {
        let l = Layout::new(&[2, 5, 3, 7], Some(&[-1, 1]), 1).unwrap();
        assert_eq!(l.perm, vec![0, 2, 3, 1]);
        assert_eq!(l.kiln_shape, vec![1, 6, 7, 5]);
        assert_eq!(l.inverse(), vec![0, 3, 1, 2]);
        assert!(!l.is_identity());
    }

    #[test]
    fn bad_axes_and_sizes_are_errors() {
        assert!(Layout::new(&[3, 0], None, 1).is_err());
        assert!(Layout::new(&[], None, 1).is_err());
        assert!(Layout::new(&[3, 4], Some(&[2]), 1).is_err());
        assert!(Layout::new(&[3, 4], Some(&[1, -1]), 1).is_err());
        assert!(Layout::new(&[3, 4], Some(&[1]), 2).is_err());
    }
}
