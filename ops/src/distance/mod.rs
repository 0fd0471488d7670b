//! Distance transforms, bit for bit as scipy 1.17: `distance_transform_edt` (exact Euclidean,
//! Maurer et al.), `distance_transform_cdt` (chamfer, two raster passes) and
//! `distance_transform_bf` (brute force, the reference).
//!
//! Scope: this module reads a `[B, C, S1..Sd]` tensor of any dtype as scipy truth-tests it
//! (non-zero is foreground: NaN is foreground, -0.0 background) into one mask per `(b, c)`
//! image and runs the per-image algorithms of [`edt`], [`cdt`] and [`bf`] on every image,
//! through an [`Exec`]: `Exec::Eager` runs each image's reference code in order,
//! `Exec::Fused` runs the images in parallel on the engine's threads and, for the EDT, the
//! lines of each pass in parallel too. Outputs: distances `[B, C, S..]`, indices
//! `[B, C, d, S..]` (scipy's `(d,) + shape` per image). The `Program`s and registry entries
//! are in [`program`].
//!
//! Exactness: see each algorithm's header; the parallel drivers call the same per-line or
//! per-image function on the same data as the reference drivers, so Eager and Fused agree bit
//! for bit (tests/distance_*.rs check it).
//!
//! Limits: 1 to 8 spatial axes; every spatial extent and each image's element count must fit
//! in `i32` (scipy's index type); the virtual point of an image without background is
//! scipy's (see [`edt`]).

pub mod bf;
pub mod cdt;
pub mod edt;
pub mod edt_fast;
pub mod entries;
pub mod program;
pub mod signed;

use rayon::prelude::*;

pub(crate) use kiln_runtime::tensor::contiguous_strides;
use kiln_runtime::{Storage, Tensor};

use crate::program::{Exec, RunError};

pub use bf::{BfDistances, BfMetric};

/// The most spatial axes a transform takes.
pub const MAX_RANK: usize = 8;

/// The foreground masks of a `[B, C, S1..Sd]` input: one row-major mask per `(b, c)` image.
#[derive(Clone, Debug, PartialEq)]
pub struct Masks {
    /// Number of images (`B * C`).
    pub images: usize,
    /// The spatial shape `S1..Sd`.
    pub shape: Vec<usize>,
    /// `images` masks of `shape`'s element count, concatenated.
    pub mask: Vec<bool>,
}

impl Masks {
    /// Elements per image.
    pub fn per_image(&self) -> usize {
        self.shape.iter().product()
    }

    /// Image `i`'s mask.
    pub fn image(&self, i: usize) -> &[bool] {
        let n = self.per_image();
        &self.mask[i * n..(i + 1) * n]
    }

    /// Masks from row-major truth values (`images` images of `shape`), checked as
    /// [`Masks::from_tensor`] checks a tensor.
    pub fn new(
        op: &'static str,
        images: usize,
        shape: &[usize],
        mask: Vec<bool>,
    ) -> Result<Masks, RunError> {
        check_shape(op, shape)?;
        if images * shape.iter().product::<usize>() != mask.len() {
            return Err(bad(
                op,
                format!(
                    "{} truth values for {images} image(s) of {shape:?}",
                    mask.len()
                ),
            ));
        }
        Ok(Masks {
            images,
            shape: shape.to_vec(),
            mask,
        })
    }

    /// Reads `[B, C, S1..Sd]` (any strides) truth-tested as scipy does: non-zero is true, NaN
    /// is true, -0.0 is false.
    pub fn from_tensor(op: &'static str, t: &Tensor) -> Result<Masks, RunError> {
        Masks::from_tensor_with(op, t, |v| v != 0.0)
    }

    /// Reads `[B, C, S1..Sd]` (any strides) through `pred` on each value converted to f64
    /// (exact for every kiln dtype, 32-bit integers included; NaN stays NaN, -0.0 stays -0.0).
    pub fn from_tensor_with(
        op: &'static str,
        t: &Tensor,
        pred: impl Fn(f64) -> bool,
    ) -> Result<Masks, RunError> {
        let s = t.shape();
        if s.len() < 3 {
            return Err(bad(op, format!("input must be [B, C, S1..Sd] with 1 to {MAX_RANK} spatial axes, got shape {s:?}")));
        }
        check_shape(op, &s[2..])?;
        let mask = match t.storage().as_ref() {
            Storage::F32(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::F64(v) => read(v, t, &pred),
            Storage::U8(v) | Storage::Bool(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::I8(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::U16(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::I16(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::I32(v) => read(v, t, |x| pred(f64::from(x))),
            Storage::U32(v) => read(v, t, |x| pred(f64::from(x))),
        };
        Ok(Masks {
            images: s[0] * s[1],
            shape: s[2..].to_vec(),
            mask,
        })
    }
}

/// `f` of every element of `t` (whose storage is `v`) in row-major logical order: one slice
/// walk when contiguous, rows along the last axis with its stride otherwise.
fn read<T: Copy>(v: &[T], t: &Tensor, f: impl Fn(T) -> bool) -> Vec<bool> {
    let n = t.numel();
    if t.is_contiguous() {
        return v[t.offset()..t.offset() + n]
            .iter()
            .map(|&x| f(x))
            .collect();
    }
    let shape = t.shape();
    let last = shape.len() - 1;
    let (len, stride) = (shape[last], t.strides()[last]);
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..n / len {
        let base = t.storage_index(&index);
        out.extend((0..len).map(|k| f(v[base + k * stride])));
        index[last] = len - 1;
        edt::increment(&mut index, shape);
    }
    out
}

/// Checks a spatial shape: 1 to [`MAX_RANK`] non-empty axes, indices that fit in `i32`.
fn check_shape(op: &'static str, shape: &[usize]) -> Result<(), RunError> {
    if shape.is_empty() || shape.len() > MAX_RANK {
        return Err(bad(
            op,
            format!("needs 1 to {MAX_RANK} spatial axes, got {}", shape.len()),
        ));
    }
    if shape.contains(&0) {
        return Err(bad(op, format!("empty spatial shape {shape:?}")));
    }
    let n = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    if n.is_none_or(|n| n > i32::MAX as usize) {
        return Err(bad(
            op,
            format!(
                "spatial shape {shape:?} has more than 2^31-1 elements (scipy's int32 indices)"
            ),
        ));
    }
    Ok(())
}

/// A `BadInput` run error.
pub(crate) fn bad(op: &'static str, problem: impl Into<String>) -> RunError {
    RunError::BadInput {
        op,
        problem: problem.into(),
    }
}

/// The sampling per spatial axis: none is 1.0 everywhere, one value is every axis' value.
pub fn resolve_sampling(
    op: &'static str,
    sampling: Option<&[f64]>,
    rank: usize,
) -> Result<Vec<f64>, RunError> {
    match sampling {
        None => Ok(vec![1.0; rank]),
        Some([one]) => Ok(vec![*one; rank]),
        Some(s) if s.len() == rank => Ok(s.to_vec()),
        Some(s) => Err(bad(
            op,
            format!(
                "sampling has {} values, the input has {rank} spatial axes",
                s.len()
            ),
        )),
    }
}

/// Runs `per_image` on every image: in order for `Exec::Eager`, in parallel on the engine's
/// threads for `Exec::Fused` (`fused == true` is passed on so the image can parallelise too).
fn each_image<T: Send>(
    exec: Exec<'_>,
    images: usize,
    per_image: impl Fn(usize, bool) -> T + Send + Sync,
) -> Vec<T> {
    match exec {
        Exec::Eager => (0..images).map(|i| per_image(i, false)).collect(),
        Exec::Fused(engine) => engine.install(|| {
            (0..images)
                .into_par_iter()
                .map(|i| per_image(i, true))
                .collect()
        }),
    }
}

/// The EDT's results for every image, concatenated: distances `[images, S..]`, indices
/// `[images, d, S..]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdtResult {
    /// Distances, when asked for.
    pub distances: Option<Vec<f64>>,
    /// Indices, when asked for.
    pub indices: Option<Vec<i32>>,
}

/// scipy's `distance_transform_edt` of every image (`s`: the resolved sampling).
pub fn edt_run(
    exec: Exec<'_>,
    m: &Masks,
    s: &[f64],
    want_distances: bool,
    want_indices: bool,
) -> EdtResult {
    let shape = &m.shape;
    let per = each_image(exec, m.images, |i, fused| {
        let mask = m.image(i);
        if fused && edt_fast::applies(mask, s) {
            let (w, feats) = edt_fast::transform(mask, shape, s, want_indices);
            let dist = want_distances.then(|| edt_fast::distances(&w));
            return (dist, feats.map(|f| axis_major(&f, shape.len())));
        }
        let feats = if fused {
            edt::features_parallel(m.image(i), shape, s)
        } else {
            edt::features_reference(m.image(i), shape, s)
        };
        let dist = want_distances.then(|| {
            if fused {
                edt::distances_parallel(&feats, shape, s)
            } else {
                edt::distances(&feats, shape, s)
            }
        });
        let idx = want_indices.then(|| axis_major(&feats, shape.len()));
        (dist, idx)
    });
    let mut r = EdtResult::default();
    if want_distances {
        r.distances = Some(
            per.iter()
                .flat_map(|(d, _)| d.as_deref().unwrap_or_default().iter().copied())
                .collect(),
        );
    }
    if want_indices {
        r.indices = Some(
            per.iter()
                .flat_map(|(_, x)| x.as_deref().unwrap_or_default().iter().copied())
                .collect(),
        );
    }
    r
}

/// Pixel-major features `[S.., rank]` as scipy's axis-major indices `[rank, S..]`.
fn axis_major(feats: &[i32], rank: usize) -> Vec<i32> {
    let n = feats.len() / rank;
    let mut out = vec![0i32; feats.len()];
    for (p, f) in feats.chunks_exact(rank).enumerate() {
        for (k, &v) in f.iter().enumerate() {
            out[k * n + p] = v;
        }
    }
    out
}

/// Flat indices of one image as scipy's axis-major coordinates `[rank, S..]`.
fn flat_to_coords(flat: &[i32], shape: &[usize]) -> Vec<i32> {
    let n = flat.len();
    let rank = shape.len();
    let strides = contiguous_strides(shape);
    let mut out = vec![0i32; n * rank];
    for (p, &f) in flat.iter().enumerate() {
        let f = f as usize;
        for k in 0..rank {
            out[k * n + p] = ((f / strides[k]) % shape[k]) as i32;
        }
    }
    out
}

/// The CDT's results for every image, concatenated (`[images, S..]`, `[images, d, S..]`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CdtResult {
    /// Distances, when asked for.
    pub distances: Option<Vec<i32>>,
    /// Indices, when asked for.
    pub indices: Option<Vec<i32>>,
}

/// scipy's `distance_transform_cdt` of every image with the 3^d 0/1 `structure`.
pub fn cdt_run(
    exec: Exec<'_>,
    m: &Masks,
    structure: &[bool],
    want_distances: bool,
    want_indices: bool,
) -> CdtResult {
    let shape = &m.shape;
    let offsets = cdt::half_offsets(structure, shape.len());
    let per = each_image(exec, m.images, |i, _| {
        let (dt, ft) = cdt::transform(m.image(i), shape, &offsets, want_indices);
        (dt, ft.map(|f| flat_to_coords(&f, shape)))
    });
    let mut r = CdtResult::default();
    if want_distances {
        r.distances = Some(per.iter().flat_map(|(d, _)| d.iter().copied()).collect());
    }
    if want_indices {
        r.indices = Some(
            per.iter()
                .flat_map(|(_, x)| x.as_deref().unwrap_or_default().iter().copied())
                .collect(),
        );
    }
    r
}

/// The BF's results for every image, concatenated.
#[derive(Clone, Debug, PartialEq)]
pub struct BfResult {
    /// Distances (f64 for Euclidean, `u32` otherwise), when asked for.
    pub distances: Option<BfDistances>,
    /// Indices, when asked for.
    pub indices: Option<Vec<i32>>,
}

/// scipy's `distance_transform_bf` of every image (`s`: the resolved sampling; ignored by
/// taxicab and chessboard).
pub fn bf_run(
    exec: Exec<'_>,
    m: &Masks,
    metric: BfMetric,
    s: &[f64],
    want_distances: bool,
    want_indices: bool,
) -> BfResult {
    let shape = &m.shape;
    let per = each_image(exec, m.images, |i, _| {
        let (dt, ft) = bf::transform(m.image(i), shape, metric, s);
        (dt, want_indices.then(|| flat_to_coords(&ft, shape)))
    });
    let indices = want_indices.then(|| {
        per.iter()
            .flat_map(|(_, x)| x.as_deref().unwrap_or_default().iter().copied())
            .collect()
    });
    let distances = want_distances.then(|| match metric {
        BfMetric::Euclidean => BfDistances::F64(
            per.iter()
                .flat_map(|(d, _)| match d {
                    BfDistances::F64(v) => v.as_slice(),
                    BfDistances::U32(_) => &[],
                })
                .copied()
                .collect(),
        ),
        _ => BfDistances::U32(
            per.iter()
                .flat_map(|(d, _)| match d {
                    BfDistances::U32(v) => v.as_slice(),
                    BfDistances::F64(_) => &[],
                })
                .copied()
                .collect(),
        ),
    });
    BfResult { distances, indices }
}
