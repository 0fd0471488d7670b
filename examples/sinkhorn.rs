//! Batched Sinkhorn through the typed API: two batches of histograms on an 8×8 grid with the
//! shared squared Euclidean cost, solved in the log domain on the fused path (tiles of 8
//! samples in parallel) and checked bit for bit against the reference loop.
//!
//! Run: `cargo run --example sinkhorn`.
use kiln::embed::{cost_matrix, sinkhorn};
use kiln::ops::SinkhornOptions;
use ndarray::Array2;

fn main() -> Result<(), kiln::embed::Error> {
    let grid = [8, 8];
    // Normalised so the largest cost is 1.
    let cost = cost_matrix(&grid, 2.0)? / 98.0;
    let n = cost.nrows();
    let batch = 12;
    // Deterministic bumps at different places.
    let hist = |shift: usize| {
        Array2::from_shape_fn((batch, n), |(s, i)| {
            let c = ((s * 7 + shift) % n) as f64;
            1.0 / (1.0 + (i as f64 - c).abs())
        })
    };
    let norm = |mut h: Array2<f64>| {
        for mut row in h.rows_mut() {
            let t = row.sum();
            row /= t;
        }
        h
    };
    let a = norm(hist(3));
    let b = norm(hist(29));
    let opts = SinkhornOptions {
        eps: 0.02,
        max_iter: 2000,
        tol: 1e-9,
        log_domain: true,
        plan: false,
        grad: false,
        grid_axes: 0,
    };
    let fast = sinkhorn(a.view(), b.view(), cost.view().into_dyn(), opts, true)?;
    let reference = sinkhorn(a.view(), b.view(), cost.view().into_dyn(), opts, false)?;
    let same = fast
        .cost
        .iter()
        .zip(&reference.cost)
        .all(|(x, y)| x.to_bits() == y.to_bits());
    println!("transport costs: {:.6}", fast.cost);
    println!("iterations (POT's niter): {}", fast.niter);
    println!("fused == reference bit for bit: {same}");
    Ok(())
}
