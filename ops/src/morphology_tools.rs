//! scipy.ndimage's structuring-element tools: `generate_binary_structure` and
//! `iterate_structure`, as pure functions returning a [`Window`].
//!
//! Exactness: boolean arithmetic only (distances in the 3^rank cube, and binary dilation of
//! a small mask), computed directly in Rust; the results equal scipy's arrays entry for entry.
//!
//! Limits: rank >= 1 (kiln windows have at least one spatial axis; scipy's rank 0 gives a
//! 0-d `True`), and the result must fit [`kiln_ir::builder::MAX_FOOTPRINT`] to be usable
//! as an operator's window (the tools themselves do not check it).

use crate::error::OpError;
use crate::window::Window;

/// scipy.ndimage's `generate_binary_structure(rank, connectivity)`: the `3^rank` cube whose
/// entries at city-block distance `<= connectivity` from the centre are true
/// (`connectivity < 1` counts as 1, as in scipy).
pub fn generate_binary_structure(rank: usize, connectivity: i64) -> Result<Window, OpError> {
    if !(1..=8).contains(&rank) {
        return Err(OpError::BadParam {
            op: "generate_binary_structure",
            name: "rank".into(),
            problem: format!("rank {rank}: kiln structures have 1 to 8 axes"),
        });
    }
    let conn = connectivity.max(1) as usize;
    let total = 3usize.pow(rank as u32);
    let mask = (0..total)
        .map(|flat| {
            let mut rem = flat;
            let mut dist = 0;
            for _ in 0..rank {
                dist += (rem % 3).abs_diff(1);
                rem /= 3;
            }
            dist <= conn
        })
        .collect::<Vec<_>>();
    Ok(Window::footprint(&vec![3; rank], &mask))
}

/// scipy.ndimage's `iterate_structure(structure, iterations, origin)`: the structure dilated
/// by itself `iterations - 1` times, on a grid of extent `s + (iterations-1)*(s-1)` per axis
/// (`iterations < 2` returns the structure unchanged, without origin, as scipy does). With
/// `origin` (one entry per axis or one for all), the result carries `iterations * origin`.
pub fn iterate_structure(
    structure: &Window,
    iterations: i64,
    origin: Option<&[i64]>,
) -> Result<Window, OpError> {
    const OP: &str = "iterate_structure";
    let shape = structure.shape.clone();
    let total: usize = shape.iter().product();
    let mask = structure.mask.clone().unwrap_or_else(|| vec![true; total]);
    if shape.is_empty() || shape.contains(&0) || mask.len() != total {
        return Err(OpError::BadFootprint {
            op: OP,
            problem: format!("shape {shape:?} with {} mask entries", mask.len()),
        });
    }
    let scaled_origin = |n: i64| -> Result<Vec<i64>, OpError> {
        let o = origin.unwrap_or(&[]);
        let o = match o.len() {
            0 => vec![0; shape.len()],
            1 => vec![o[0]; shape.len()],
            k if k == shape.len() => o.to_vec(),
            k => {
                return Err(OpError::BadOrigin {
                    op: OP,
                    origin: o.to_vec(),
                    problem: format!("{k} entries for {} axes", shape.len()),
                })
            }
        };
        Ok(o.iter().map(|v| v * n).collect())
    };
    if iterations < 2 {
        // scipy returns a copy of the structure and no origin here.
        return Ok(Window::footprint(&shape, &mask));
    }
    let ni = (iterations - 1) as usize;
    let out_shape: Vec<usize> = shape.iter().map(|&s| s + ni * (s - 1)).collect();
    let out_total = out_shape
        .iter()
        .try_fold(1usize, |a, &s| a.checked_mul(s))
        .filter(|&t| t <= 1 << 24)
        .ok_or_else(|| OpError::BadParam {
            op: OP,
            name: "iterations".into(),
            problem: format!("{iterations} iterations give a structure larger than 2^24 entries"),
        })?;
    let coords = |mut flat: usize, shp: &[usize]| -> Vec<i64> {
        let mut c = vec![0i64; shp.len()];
        for ax in (0..shp.len()).rev() {
            c[ax] = (flat % shp[ax]) as i64;
            flat /= shp[ax];
        }
        c
    };
    let index = |c: &[i64], shp: &[usize]| -> Option<usize> {
        let mut flat = 0usize;
        for (ax, &v) in c.iter().enumerate() {
            if v < 0 || v >= shp[ax] as i64 {
                return None;
            }
            flat = flat * shp[ax] + v as usize;
        }
        Some(flat)
    };
    // The structure placed at ni * (s // 2) on every axis.
    let mut out = vec![false; out_total];
    for (flat, &on) in mask.iter().enumerate() {
        if on {
            let c: Vec<i64> = coords(flat, &shape)
                .iter()
                .zip(&shape)
                .map(|(&v, &s)| v + (ni * (s / 2)) as i64)
                .collect();
            out[index(&c, &out_shape).expect("inside")] = true;
        }
    }
    // Dilation offsets (scipy's reflected structure, origin 0): out'[i] = any x[i - o].
    let offsets: Vec<Vec<i64>> = mask
        .iter()
        .enumerate()
        .filter(|(_, &on)| on)
        .map(|(flat, _)| {
            coords(flat, &shape)
                .iter()
                .zip(&shape)
                .map(|(&v, &s)| v - (s / 2) as i64)
                .collect()
        })
        .collect();
    for _ in 0..ni {
        let prev = out.clone();
        for (i, o) in out.iter_mut().enumerate() {
            let c = coords(i, &out_shape);
            *o = offsets.iter().any(|off| {
                let src: Vec<i64> = c.iter().zip(off).map(|(a, b)| a - b).collect();
                index(&src, &out_shape).is_some_and(|k| prev[k])
            });
        }
    }
    let mut w = Window::footprint(&out_shape, &out);
    if origin.is_some() {
        w.origin = scaled_origin(iterations)?;
    }
    Ok(w)
}
