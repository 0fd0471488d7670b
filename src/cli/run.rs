//! `kiln run OP --input a.npy --output b.npy [--param k=v]... [--exec eager|fused]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kiln::ir::TensorType;
use kiln::runtime::npy::{read_npy, write_npy};
use kiln::{eager, Engine, Tensor};

use super::{parse_params, CliError};

/// Which executor runs the operator.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Exec {
    /// Op by op, every intermediate materialised (the oracle).
    Eager,
    /// Fused JIT kernels.
    Fused,
}

/// Arguments of `kiln run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Operator name (see `kiln run --help` for the list, or the README).
    op: String,
    /// Input .npy file: `[B, C, S1..Sd]`, or `[H, W]` (treated as `[1, 1, H, W]`).
    #[arg(long)]
    input: PathBuf,
    /// Output .npy file.
    #[arg(long)]
    output: PathBuf,
    /// Operator parameter `name=value` (repeatable), e.g. `k=3`, `size=3,5`, `mode=reflect`.
    #[arg(long = "param")]
    params: Vec<String>,
    /// Executor.
    #[arg(long, value_enum, default_value = "fused")]
    exec: Exec,
}

/// Runs `kiln run`.
pub fn run(a: RunArgs) -> Result<ExitCode, CliError> {
    let params = parse_params(&a.params)?;
    let input = read_npy(&a.input)?;
    let (input, promoted) = promote_2d(input)?;
    let ty = TensorType {
        dtype: input.dtype(),
        shape: input.shape().to_vec(),
    };
    let graph = kiln::ops::build_op(&a.op, &params, &ty)?;
    let outputs = match a.exec {
        Exec::Eager => eager::run(&graph, &[input])?,
        Exec::Fused => Engine::new().run(&graph, &[input])?,
    };
    let mut out = outputs
        .into_iter()
        .next()
        .ok_or_else(|| CliError::Usage("operator produced no output".into()))?;
    if promoted {
        let s = out.shape().to_vec();
        out = Tensor::from_parts(
            out.storage().clone(),
            &s[2..],
            &out.strides()[2..],
            out.offset(),
        )?;
    }
    write_npy(&a.output, &out)?;
    Ok(ExitCode::SUCCESS)
}

/// A 2-D array `[H, W]` becomes a `[1, 1, H, W]` view; returns whether it was promoted.
fn promote_2d(t: Tensor) -> Result<(Tensor, bool), CliError> {
    if t.shape().len() != 2 {
        return Ok((t, false));
    }
    let shape = [1, 1, t.shape()[0], t.shape()[1]];
    let strides = [0, 0, t.strides()[0], t.strides()[1]];
    Ok((
        Tensor::from_parts(t.storage().clone(), &shape, &strides, t.offset())?,
        true,
    ))
}
