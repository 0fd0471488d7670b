//! Typed binary morphology that is not one graph: masks, any `iterations` (including
//! `< 1`: until nothing changes), `binary_propagation` and `binary_fill_holes`, on `ndarray`
//! views with every axis spatial (scipy's default).
//!
//! Scope: thin wrappers that build a `kiln_ops` program ([`kiln_ops::BinaryFixpoint`],
//! [`kiln_ops::BinaryChain`]) for the array's shape and run it on the shared engine's fast
//! path. Exactness: the programs' own (their fused path equals their eager path bit for bit,
//! and both equal scipy 1.17 on the committed goldens). Limits: inputs are copied once into
//! kiln storage; the graph forms (no mask, 1..=64 iterations) are [`crate::embed::Op`]s.

use kiln_ir::{DType, TensorType};
use kiln_ops::{BinaryChain, BinaryFixpoint, BinaryKind, Exec, Program, RunError, Window};
use kiln_runtime::Tensor;
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::element::Element;
use super::error::{Error, Result};
use super::pipeline::shared_engine;

/// Which of scipy's binary operations [`binary_morphology`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryMorphology {
    /// `binary_erosion`.
    Erosion,
    /// `binary_dilation`.
    Dilation,
    /// `binary_opening`: erosion then dilation, same arguments.
    Opening,
    /// `binary_closing`: dilation then erosion, same arguments.
    Closing,
}

/// scipy's arguments of the binary operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryOptions {
    /// `structure` (`None`: `generate_binary_structure(ndim, 1)`).
    pub structure: Option<Window>,
    /// `iterations` (`< 1`: until nothing changes; needs a true structure centre).
    pub iterations: i64,
    /// `border_value`: the value outside the array.
    pub border_value: bool,
    /// `origin` (one value or one per axis; empty: 0).
    pub origin: Vec<i64>,
}

impl Default for BinaryOptions {
    fn default() -> Self {
        BinaryOptions {
            structure: None,
            iterations: 1,
            border_value: false,
            origin: Vec::new(),
        }
    }
}

fn run_error(e: RunError) -> Error {
    match e {
        RunError::Op(e) => Error::Op(e),
        RunError::Runtime(e) => Error::Runtime(e),
        other => Error::Input(other.to_string()),
    }
}

/// `[S..]` as a kiln `[1, 1, S..]` tensor.
fn tensor<T: Element>(x: &ArrayViewD<'_, T>) -> Result<Tensor> {
    if x.ndim() == 0 || x.is_empty() {
        return Err(Error::Input(format!(
            "array of shape {:?}: needs at least one axis and one element",
            x.shape()
        )));
    }
    let mut shape = vec![1, 1];
    shape.extend_from_slice(x.shape());
    let data: Vec<T> = x.iter().copied().collect();
    Ok(Tensor::from_storage(T::into_storage(data), &shape)?)
}

fn run(program: &dyn Program, inputs: &[Tensor], shape: &[usize]) -> Result<ArrayD<bool>> {
    let engine = shared_engine();
    let out = program
        .run(Exec::Fused(&engine), inputs)
        .map_err(run_error)?
        .pop()
        .ok_or_else(|| Error::Internal("program returned no output".into()))?;
    let a = out.to_ndarray::<bool>()?;
    a.into_shape_with_order(IxDyn(shape))
        .map_err(|e| Error::Internal(format!("output of the wrong length: {e}")))
}

/// scipy.ndimage's `binary_erosion` / `binary_dilation` / `binary_opening` /
/// `binary_closing(input, structure, iterations, mask, border_value, origin)`: non-bool
/// input is truth-tested (NaN true, -0.0 false); where `mask` is false the output keeps the
/// (truth-tested) input. Errors: an origin out of range, `iterations < 1` with a false
/// structure centre, a mask of another shape.
pub fn binary_morphology<T: Element>(
    op: BinaryMorphology,
    input: ArrayViewD<'_, T>,
    mask: Option<ArrayViewD<'_, bool>>,
    options: &BinaryOptions,
) -> Result<ArrayD<bool>> {
    let x = tensor(&input)?;
    let mut inputs = vec![x];
    if let Some(m) = &mask {
        if m.shape() != input.shape() {
            return Err(Error::Input(format!(
                "mask shape {:?} differs from input shape {:?}",
                m.shape(),
                input.shape()
            )));
        }
        inputs.push(tensor(m)?);
    }
    let ty = |dtype| TensorType {
        dtype,
        shape: inputs[0].shape().to_vec(),
    };
    let stage = |kind, dtype| {
        BinaryFixpoint::new(
            match kind {
                BinaryKind::Erosion => "binary_erosion",
                _ => "binary_dilation",
            },
            kind,
            &ty(dtype),
            options.structure.as_ref(),
            options.iterations,
            mask.is_some(),
            options.border_value,
            &options.origin,
        )
    };
    let stages = match op {
        BinaryMorphology::Erosion => vec![stage(BinaryKind::Erosion, T::DTYPE)?],
        BinaryMorphology::Dilation => vec![stage(BinaryKind::Dilation, T::DTYPE)?],
        BinaryMorphology::Opening => vec![
            stage(BinaryKind::Erosion, T::DTYPE)?,
            stage(BinaryKind::Dilation, DType::Bool)?,
        ],
        BinaryMorphology::Closing => vec![
            stage(BinaryKind::Dilation, T::DTYPE)?,
            stage(BinaryKind::Erosion, DType::Bool)?,
        ],
    };
    let chain = BinaryChain::new(stages).ok_or_else(|| Error::Internal("no stage".into()))?;
    run(&chain, &inputs, input.shape())
}

/// scipy.ndimage's `binary_propagation(input, structure, mask, border_value, origin)`:
/// `binary_dilation` with `iterations = -1` (until nothing changes).
pub fn binary_propagation<T: Element>(
    input: ArrayViewD<'_, T>,
    mask: Option<ArrayViewD<'_, bool>>,
    structure: Option<Window>,
    border_value: bool,
    origin: &[i64],
) -> Result<ArrayD<bool>> {
    let options = BinaryOptions {
        structure,
        iterations: -1,
        border_value,
        origin: origin.to_vec(),
    };
    binary_morphology(BinaryMorphology::Dilation, input, mask, &options)
}

/// scipy.ndimage's `binary_fill_holes(input, structure, origin)`: true where the input is
/// true or the background is not connected (through `structure`) to outside the array.
pub fn binary_fill_holes<T: Element>(
    input: ArrayViewD<'_, T>,
    structure: Option<Window>,
    origin: &[i64],
) -> Result<ArrayD<bool>> {
    let x = tensor(&input)?;
    let program = BinaryFixpoint::new(
        "binary_fill_holes",
        BinaryKind::FillHoles,
        &TensorType {
            dtype: T::DTYPE,
            shape: x.shape().to_vec(),
        },
        structure.as_ref(),
        0,
        true,
        true,
        origin,
    )?;
    run(&program, &[x], input.shape())
}

/// scipy.ndimage's `generate_binary_structure(rank, connectivity)`.
pub fn generate_binary_structure(rank: usize, connectivity: i64) -> Result<Window> {
    Ok(kiln_ops::generate_binary_structure(rank, connectivity)?)
}

/// scipy.ndimage's `iterate_structure(structure, iterations, origin)` (the returned window
/// carries `iterations * origin` when `origin` is given and `iterations >= 2`).
pub fn iterate_structure(
    structure: &Window,
    iterations: i64,
    origin: Option<&[i64]>,
) -> Result<Window> {
    Ok(kiln_ops::iterate_structure(structure, iterations, origin)?)
}
