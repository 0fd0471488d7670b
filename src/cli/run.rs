//! `kiln run OP --input a.npy [--input b.npy]... --output c.npy [--output d.npy]...
//! [--param k=v]... [--exec eager|fused]`: graph operators and programs (several inputs or
//! outputs) alike, through `kiln_ops::build_plan`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kiln::ir::TensorType;
use kiln::ops::{Exec as ProgramExec, Layout};
use kiln::runtime::npy::{read_npy, write_npy};
use kiln::{Engine, Tensor};

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
    /// Input .npy file: `[B, C, S1..Sd]`, or `[H, W]` (treated as `[1, 1, H, W]`). Repeat it,
    /// in the operator's input order, for operators with several inputs.
    #[arg(long, required = true)]
    input: Vec<PathBuf>,
    /// Output .npy file. Repeat it, in the operator's output order, for operators with several
    /// outputs (e.g. distances then indices); outputs beyond the last path are not written.
    #[arg(long, required = true)]
    output: Vec<PathBuf>,
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
    let image = kiln::ops::program::layout_of(&a.op) == Layout::Image;
    let mut inputs = Vec::with_capacity(a.input.len());
    let mut promoted = false;
    for path in &a.input {
        let t = read_npy(path)?;
        let t = if image {
            let (t, p) = promote_2d(t)?;
            promoted |= p;
            t
        } else {
            t
        };
        inputs.push(t);
    }
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|t| TensorType {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
        })
        .collect();
    let plan = kiln::ops::build_plan(&a.op, &params, &types)?;
    let names = plan.outputs();
    if a.output.len() > names.len() {
        return Err(CliError::Usage(format!(
            "{}: {} --output paths given, the operator has {} output(s) ({})",
            a.op,
            a.output.len(),
            names.len(),
            names.join(", ")
        )));
    }
    let engine;
    let exec = match a.exec {
        Exec::Eager => ProgramExec::Eager,
        Exec::Fused => {
            engine = Engine::new();
            ProgramExec::Fused(&engine)
        }
    };
    let outputs = plan.run(exec, &inputs)?;
    if outputs.len() < a.output.len() {
        return Err(CliError::Usage(format!(
            "{}: operator produced {} output(s), {} --output paths given",
            a.op,
            outputs.len(),
            a.output.len()
        )));
    }
    for (out, path) in outputs.into_iter().zip(&a.output) {
        let out = if promoted { demote_2d(out)? } else { out };
        write_npy(path, &out)?;
    }
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

/// The inverse of [`promote_2d`] for an output: drops two leading axes of extent 1.
fn demote_2d(t: Tensor) -> Result<Tensor, CliError> {
    let s = t.shape();
    if s.len() < 3 || s[0] != 1 || s[1] != 1 {
        return Ok(t);
    }
    let shape = s[2..].to_vec();
    Ok(Tensor::from_parts(
        t.storage().clone(),
        &shape,
        &t.strides()[2..],
        t.offset(),
    )?)
}
