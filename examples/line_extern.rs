//! An extern line function: a Rust function registered by name, applied along one axis of
//! a graph like any node (the escape hatch for line algorithms the IR cannot express).
//! Registers a running mean along a line (the fused path's version keeps a running sum; the
//! eager twin re-sums each prefix), calls it backward along the rows, fuses it between
//! pointwise nodes and checks eager against fused bit for bit.
//!
//! Run with `cargo run --example line_extern`.

use kiln::ir::{BinaryOp, DType, ExternCall, GraphBuilder, Scalar, UnaryOp};
use kiln::runtime::line_extern::{register_line_extern, LineExtern, LineIn, LineOut};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

/// `y[i] = (x[0] + ... + x[i]) / (i + 1)`, the sum a left fold, with a running sum.
fn running_mean(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let (LineIn::F64(v), LineOut::F64(out)) = (x, y) else {
        return Err("f64 lines only".into());
    };
    let mut sum = 0.0;
    for (i, o) in out.iter_mut().enumerate() {
        sum += v.get(i);
        *o = sum / (i + 1) as f64;
    }
    Ok(())
}

/// The eager twin: the same left fold, recomputed for every prefix.
fn running_mean_naive(x: LineIn<'_>, y: LineOut<'_>, _: &[Scalar]) -> Result<(), String> {
    let (LineIn::F64(v), LineOut::F64(out)) = (x, y) else {
        return Err("f64 lines only".into());
    };
    for (i, o) in out.iter_mut().enumerate() {
        let sum = v.iter().take(i + 1).fold(0.0, |a, e| a + e);
        *o = sum / (i + 1) as f64;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    register_line_extern(LineExtern::new(
        "example.running_mean",
        running_mean,
        running_mean_naive,
        |d, params| match (d, params.len()) {
            (DType::F64, 0) => Ok(DType::F64),
            _ => Err(format!("takes f64 and no parameters, got {d}")),
        },
    ))?;

    let shape = [1, 2, 16, 40];
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F64, &shape)?;
    let a = b.unary(UnaryOp::Abs, x)?;
    let call = ExternCall {
        name: "example.running_mean".into(),
        axis: 3,
        backward: true,
        out: DType::F64,
        params: vec![],
    };
    let m = b.line_extern(a, call)?;
    let d = b.binary(BinaryOp::Sub, m, a)?;
    let graph = b.finish(&[d])?;
    println!("{}", kiln::ir::printer::print(&graph));

    let n: usize = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|i| ((i * 7919) % 101) as f64 / 7.0 - 5.0)
        .collect();
    let x = Tensor::from_f64(data, &shape)?;
    let engine = Engine::new();
    let compiled = engine.compile(&graph)?;
    println!(
        "fused groups:\n{}",
        compiled.partition.describe(&compiled.optimized)
    );
    let fused = compiled.run(&engine, std::slice::from_ref(&x))?;
    let oracle = eager::run(&graph, std::slice::from_ref(&x))?;
    if let Some(diff) = first_difference(&oracle[0], &fused[0]) {
        return Err(format!("mismatch: {diff}").into());
    }
    println!("eager and fused agree bit for bit on {n} elements");
    Ok(())
}
