//! The chamfer distance transform (scipy's `distance_transform_cdt`) of one image.
//!
//! Scope: scipy 1.17's two raster passes. Distances start at `-1` (foreground, not yet
//! reached) and `0` (background); a forward pass in raster order looks at the first half of
//! the 3^rank structure (the offsets before its centre, in raster order) and takes the
//! smallest `neighbour + 1`; the same pass then runs over the array reversed on every axis
//! (for a row-major array, the flat buffer reversed), and the result is reversed back.
//! Features are flat indices (scipy's `arange`), copied from the neighbour that gave the
//! minimum, converted to coordinates by the caller.
//!
//! Exactness: integer arithmetic only. Ties go to the first offset in the structure's raster
//! order (scipy replaces the minimum only when `neighbour + 1 < min`); neighbours outside the
//! image are skipped (scipy's constant border flag).
//!
//! Limits: a pass is sequential in raster order by definition, so the fast path runs images
//! (the batch and channel axes) in parallel, each with this code. No background leaves every
//! foreground distance at `-1` and every feature at the pixel itself, as scipy does.

/// The first half of a 3^rank structure as offsets (one `i64` per axis), in raster order;
/// `structure` is the row-major 0/1 structure (its centre and second half are ignored).
pub fn half_offsets(structure: &[bool], rank: usize) -> Vec<Vec<i64>> {
    let size = structure.len();
    let mut offs = Vec::new();
    for (k, &on) in structure.iter().enumerate().take(size / 2) {
        if on {
            let mut o = vec![0i64; rank];
            let mut r = k;
            for oi in o.iter_mut().rev() {
                *oi = (r % 3) as i64 - 1;
                r /= 3;
            }
            offs.push(o);
        }
    }
    offs
}

/// scipy's structures: taxicab (connectivity 1, the cross) or chessboard (full 3^rank box).
pub fn metric_structure(rank: usize, chessboard: bool) -> Vec<bool> {
    let size = 3usize.pow(rank as u32);
    (0..size)
        .map(|k| {
            let mut r = k;
            let mut away = 0;
            for _ in 0..rank {
                away += usize::from(r % 3 != 1);
                r /= 3;
            }
            chessboard || away <= 1
        })
        .collect()
}

/// The chamfer transform of one image: distances and, when `with_features`, flat indices.
pub fn transform(
    mask: &[bool],
    shape: &[usize],
    offsets: &[Vec<i64>],
    with_features: bool,
) -> (Vec<i32>, Option<Vec<i32>>) {
    let mut dt: Vec<i32> = mask.iter().map(|&m| if m { -1 } else { 0 }).collect();
    let mut ft: Option<Vec<i32>> = with_features.then(|| (0..mask.len() as i32).collect());
    one_pass(&mut dt, ft.as_deref_mut(), shape, offsets);
    dt.reverse();
    if let Some(f) = ft.as_mut() {
        f.reverse();
    }
    one_pass(&mut dt, ft.as_deref_mut(), shape, offsets);
    dt.reverse();
    if let Some(f) = ft.as_mut() {
        f.reverse();
    }
    (dt, ft)
}

/// One raster pass over `dt` (and `ft`) with the half structure `offsets`.
fn one_pass(dt: &mut [i32], mut ft: Option<&mut [i32]>, shape: &[usize], offsets: &[Vec<i64>]) {
    let rank = shape.len();
    let strides = crate::distance::contiguous_strides(shape);
    let flat: Vec<i64> = offsets
        .iter()
        .map(|o| o.iter().zip(&strides).map(|(&a, &s)| a * s as i64).sum())
        .collect();
    let mut coord = vec![0i64; rank];
    for p in 0..dt.len() {
        let value = dt[p];
        if value != 0 {
            let mut min = value;
            let mut from: Option<usize> = None;
            for (o, &delta) in offsets.iter().zip(&flat) {
                let inside = o
                    .iter()
                    .zip(&coord)
                    .zip(shape)
                    .all(|((&oi, &c), &n)| (0..n as i64).contains(&(c + oi)));
                if !inside {
                    continue;
                }
                let q = (p as i64 + delta) as usize;
                let tt = dt[q];
                if tt >= 0 && (min < 0 || tt + 1 < min) {
                    min = tt + 1;
                    from = Some(q);
                }
            }
            dt[p] = min;
            if let (Some(f), Some(q)) = (ft.as_deref_mut(), from) {
                f[p] = f[q];
            }
        }
        for (c, &n) in coord.iter_mut().zip(shape).rev() {
            *c += 1;
            if *c < n as i64 {
                break;
            }
            *c = 0;
        }
    }
}
