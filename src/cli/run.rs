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
    /// How the input's axes are read. `scipy` (the default, except for kornia's
    /// `median_blur`): every axis is spatial, as scipy.ndimage reads an array, unless `--axes`
    /// names the spatial ones (the others are filtered independently, like batch and channel).
    /// `bcs`: the array is `[B, C, S1..Sd]` (a 2-D `[H, W]` is `[1, 1, H, W]`), kornia's
    /// layout and the default for `median_blur`.
    #[arg(long, value_enum)]
    layout: Option<AxisLayout>,
    /// scipy's `axes=`: the spatial axes, comma-separated, negative from the end (e.g. `0,1`
    /// filters an `[H, W, C]` image per channel). Only with the scipy layout.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    axes: Option<Vec<isize>>,
}

/// How `kiln run` reads an input's axes (see `--layout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AxisLayout {
    /// Every axis spatial unless `--axes` says otherwise (scipy.ndimage's rule).
    Scipy,
    /// `[B, C, S1..Sd]`; `[H, W]` as `[1, 1, H, W]` (kornia's rule).
    Bcs,
}

/// Operators whose inputs are `[B, C, H, W]` by definition (kornia's).
const BCS_OPERATORS: &[&str] = &["median_blur"];

/// Runs `kiln run`.
pub fn run(a: RunArgs) -> Result<ExitCode, CliError> {
    let params = parse_params(&a.params)?;
    let image = kiln::ops::program::layout_of(&a.op) == Layout::Image;
    let layout = a
        .layout
        .unwrap_or(if BCS_OPERATORS.contains(&a.op.as_str()) {
            AxisLayout::Bcs
        } else {
            AxisLayout::Scipy
        });
    if a.axes.is_some() && (layout != AxisLayout::Scipy || !image) {
        return Err(CliError::Usage(format!(
            "{}: --axes needs the scipy layout of an image operator",
            a.op
        )));
    }
    let mut inputs = Vec::with_capacity(a.input.len());
    // The first image input's reading; outputs are written back through it.
    let mut reading: Option<Reading> = None;
    for path in &a.input {
        let t = read_npy(path)?;
        if !image {
            inputs.push(t);
            continue;
        }
        let (t, r) = match layout {
            AxisLayout::Bcs => promote_2d(t)?,
            AxisLayout::Scipy => scipy_axes(t, a.axes.as_deref())?,
        };
        reading.get_or_insert(r);
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
        let out = match &reading {
            Some(r) => r.write_back(out)?,
            None => out,
        };
        write_npy(path, &out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How an input file's array became a `[B, C, S..]` tensor, to write outputs back the same way.
enum Reading {
    /// Taken as it is.
    AsIs,
    /// `[H, W]` read as `[1, 1, H, W]`.
    Promoted2d,
    /// scipy's rule: permuted by `layout.perm` and reshaped to `layout.kiln_shape`.
    Scipy(kiln::embed::Layout),
}

impl Reading {
    /// An output in kiln's layout as the array the user expects: the input's own axes for an
    /// output of the input's kiln shape; `(k,) + shape` for an output `[1, 1, k, S..]` with
    /// one extra axis before the spatial ones (e.g. a distance transform's indices) when no
    /// axis was folded into the channels; anything else as kiln laid it out.
    fn write_back(&self, t: Tensor) -> Result<Tensor, CliError> {
        match self {
            Reading::AsIs => Ok(t),
            Reading::Promoted2d => demote_2d(t),
            Reading::Scipy(l) => {
                let s = t.shape().to_vec();
                if s == l.kiln_shape {
                    let flat = Tensor::from_storage(t.contiguous_storage(), &l.permuted_shape)?;
                    let inv = l.inverse();
                    let shape: Vec<usize> = inv.iter().map(|&k| l.permuted_shape[k]).collect();
                    let strides: Vec<usize> = inv.iter().map(|&k| flat.strides()[k]).collect();
                    return Ok(Tensor::from_parts(
                        flat.storage().clone(),
                        &shape,
                        &strides,
                        flat.offset(),
                    )?);
                }
                let spatial = &l.kiln_shape[2..];
                if l.is_identity()
                    && s.len() == l.kiln_shape.len() + 1
                    && s[..2] == [1, 1]
                    && &s[3..] == spatial
                {
                    return Ok(Tensor::from_parts(
                        t.storage().clone(),
                        &s[2..],
                        &t.strides()[2..],
                        t.offset(),
                    )?);
                }
                Ok(t)
            }
        }
    }
}

/// scipy's reading of an array: every axis spatial unless `axes` names the spatial ones; the
/// others fold into the channel axis (a copy when that needs a permutation).
fn scipy_axes(t: Tensor, axes: Option<&[isize]>) -> Result<(Tensor, Reading), CliError> {
    let l =
        kiln::embed::Layout::new(t.shape(), axes, 1).map_err(|e| CliError::Usage(e.to_string()))?;
    let t = if l.is_identity() {
        let mut strides = vec![0, 0];
        let inner = l.kiln_shape.len() - 2;
        let own = t.strides();
        if l.kiln_shape[1] == 1 {
            strides.extend_from_slice(&own[own.len() - inner..]);
            Tensor::from_parts(t.storage().clone(), &l.kiln_shape, &strides, t.offset())?
        } else {
            Tensor::from_storage(t.contiguous_storage(), &l.kiln_shape)?
        }
    } else {
        let shape: Vec<usize> = l.perm.iter().map(|&a| t.shape()[a]).collect();
        let strides: Vec<usize> = l.perm.iter().map(|&a| t.strides()[a]).collect();
        let permuted = Tensor::from_parts(t.storage().clone(), &shape, &strides, t.offset())?;
        Tensor::from_storage(permuted.contiguous_storage(), &l.kiln_shape)?
    };
    Ok((t, Reading::Scipy(l)))
}

/// A 2-D array `[H, W]` becomes a `[1, 1, H, W]` view; others are taken as `[B, C, S..]`.
fn promote_2d(t: Tensor) -> Result<(Tensor, Reading), CliError> {
    if t.shape().len() != 2 {
        return Ok((t, Reading::AsIs));
    }
    let shape = [1, 1, t.shape()[0], t.shape()[1]];
    let strides = [0, 0, t.strides()[0], t.strides()[1]];
    Ok((
        Tensor::from_parts(t.storage().clone(), &shape, &strides, t.offset())?,
        Reading::Promoted2d,
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
