//! Embed kiln: a kornia-style 5x5 median on a small image, eager and fused, bit-compared.
//!
//! Run with `cargo run --release --example median`.

use kiln::ir::{DType, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A 1x1x6x8 image with a NaN and an infinity in it.
    let mut data: Vec<f32> = (0..48).map(|i| ((i * 37) % 11) as f32).collect();
    data[9] = f32::NAN;
    data[30] = f32::INFINITY;
    let x = Tensor::from_f32(data, &[1, 1, 6, 8])?;

    // The operator is a graph: 25 gathers, a pruned Batcher selection network, a NaN mask.
    let ty = TensorType {
        dtype: DType::F32,
        shape: x.shape().to_vec(),
    };
    let graph = kiln::ops::build_op("median_blur", &[("k".into(), "5".into())], &ty)?;

    let engine = Engine::new();
    let compiled = engine.compile(&graph)?;
    println!(
        "{} graph nodes fused into {} kernel(s), compiled in {:.2} ms",
        graph.len(),
        compiled.kernel_count(),
        compiled.compile_ms
    );
    let fused = compiled.run(&engine, std::slice::from_ref(&x))?;
    let oracle = eager::run(&graph, std::slice::from_ref(&x))?;
    match first_difference(&oracle[0], &fused[0]) {
        None => println!("eager and fused agree bit for bit"),
        Some(d) => return Err(format!("mismatch: {d}").into()),
    }
    // Tiered compile: a faster compile of the same kernel (bigger vector steps, and a
    // specialisation for inputs without NaN, infinities and -0) lands in the background;
    // runs switch to it by themselves. Wait for it to time the steady state.
    let landed = compiled.wait_for_upgrades(std::time::Duration::from_secs(10));
    let clean: Vec<f32> = (0..48).map(|i| ((i * 37) % 11) as f32).collect();
    let clean = Tensor::from_f32(clean, &[1, 1, 6, 8])?;
    let fast = compiled.run(&engine, std::slice::from_ref(&clean))?;
    let oracle_clean = eager::run(&graph, std::slice::from_ref(&clean))?;
    match first_difference(&oracle_clean[0], &fast[0]) {
        None => println!(
            "background compile landed: {landed}; clean input (specialised kernel) agrees too"
        ),
        Some(d) => return Err(format!("mismatch on clean input: {d}").into()),
    }
    for row in 0..6 {
        let cells: Vec<String> = (0..8)
            .map(|col| format!("{:>4}", fused[0].get(&[0, 0, row, col]).to_f64()))
            .collect();
        println!("{}", cells.join(" "));
    }
    Ok(())
}
