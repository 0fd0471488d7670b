//! The distance transforms' `Program`s and their `PROGRAMS` entries (see [`super::program`]
//! for the parameters).
//!
//! Scope: each program checks its one `[B, C, S..]` input against the type it was built for,
//! reads the masks, runs the transform through the given `Exec` and returns `distances`
//! (`[B, C, S..]`: f64, int32 for the CDT, uint32 for the BF's taxicab/chessboard) then
//! `indices` (`[B, C, d, S..]`, int32), those asked for.
//!
//! Exactness: data movement only. Limits: one input.

use kiln_ir::TensorType;
use kiln_runtime::{Storage, Tensor};

use super::program::{
    parse_bf_metric, parse_cdt_metric, parse_sampling, parse_threshold, spatial_rank, Returns,
    BF_INFO, CDT_INFO, EDT_INFO, SIGNED_INFO,
};
use super::{BfDistances, BfMetric, Masks};
use crate::error::OpError;
use crate::program::{Exec, Layout, Program, ProgramInfo, RunError};
use crate::registry::Params;

/// Output tensors of a transform over a `[B, C, S..]` input of shape `shape`.
struct Outputs {
    list: Vec<Tensor>,
}

impl Outputs {
    fn new() -> Outputs {
        Outputs { list: Vec::new() }
    }

    /// Distances `[B, C, S..]`.
    fn distances(&mut self, storage: Storage, shape: &[usize]) -> Result<(), RunError> {
        self.list.push(Tensor::from_storage(storage, shape)?);
        Ok(())
    }

    /// Indices `[B, C, d, S..]` (scipy's `(d,) + shape` per image).
    fn indices(&mut self, v: Vec<i32>, shape: &[usize]) -> Result<(), RunError> {
        let mut s = shape[..2].to_vec();
        s.push(shape.len() - 2);
        s.extend_from_slice(&shape[2..]);
        self.list.push(Tensor::from_storage(Storage::I32(v), &s)?);
        Ok(())
    }
}

/// Checks the single input against the type the program was built for.
fn one_input<'t>(
    op: &'static str,
    shape: &[usize],
    inputs: &'t [Tensor],
) -> Result<&'t Tensor, RunError> {
    match inputs {
        [x] if x.shape() == shape => Ok(x),
        [x] => Err(super::bad(
            op,
            format!("built for shape {shape:?}, got {:?}", x.shape()),
        )),
        _ => Err(super::bad(
            op,
            format!("takes 1 input, got {}", inputs.len()),
        )),
    }
}

/// `distance_transform_edt` as a program.
#[derive(Debug)]
pub struct EdtProgram {
    shape: Vec<usize>,
    sampling: Vec<f64>,
    returns: Returns,
}

impl Program for EdtProgram {
    fn name(&self) -> &'static str {
        EDT_INFO.name
    }
    fn outputs(&self) -> Vec<&'static str> {
        self.returns.names()
    }
    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let x = one_input(EDT_INFO.name, &self.shape, inputs)?;
        let m = Masks::from_tensor(EDT_INFO.name, x)?;
        let r = super::edt_run(
            exec,
            &m,
            &self.sampling,
            self.returns.distances,
            self.returns.indices,
        );
        let mut out = Outputs::new();
        if let Some(d) = r.distances {
            out.distances(Storage::F64(d), &self.shape)?;
        }
        if let Some(i) = r.indices {
            out.indices(i, &self.shape)?;
        }
        Ok(out.list)
    }
}

/// `distance_transform_cdt` as a program.
#[derive(Debug)]
pub struct CdtProgram {
    shape: Vec<usize>,
    structure: Vec<bool>,
    returns: Returns,
}

impl Program for CdtProgram {
    fn name(&self) -> &'static str {
        CDT_INFO.name
    }
    fn outputs(&self) -> Vec<&'static str> {
        self.returns.names()
    }
    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let x = one_input(CDT_INFO.name, &self.shape, inputs)?;
        let m = Masks::from_tensor(CDT_INFO.name, x)?;
        let r = super::cdt_run(
            exec,
            &m,
            &self.structure,
            self.returns.distances,
            self.returns.indices,
        );
        let mut out = Outputs::new();
        if let Some(d) = r.distances {
            out.distances(Storage::I32(d), &self.shape)?;
        }
        if let Some(i) = r.indices {
            out.indices(i, &self.shape)?;
        }
        Ok(out.list)
    }
}

/// `distance_transform_bf` as a program.
#[derive(Debug)]
pub struct BfProgram {
    shape: Vec<usize>,
    metric: BfMetric,
    sampling: Vec<f64>,
    returns: Returns,
}

impl Program for BfProgram {
    fn name(&self) -> &'static str {
        BF_INFO.name
    }
    fn outputs(&self) -> Vec<&'static str> {
        self.returns.names()
    }
    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let x = one_input(BF_INFO.name, &self.shape, inputs)?;
        let m = Masks::from_tensor(BF_INFO.name, x)?;
        let r = super::bf_run(
            exec,
            &m,
            self.metric,
            &self.sampling,
            self.returns.distances,
            self.returns.indices,
        );
        let mut out = Outputs::new();
        match r.distances {
            Some(BfDistances::F64(d)) => out.distances(Storage::F64(d), &self.shape)?,
            Some(BfDistances::U32(d)) => out.distances(Storage::U32(d), &self.shape)?,
            None => {}
        }
        if let Some(i) = r.indices {
            out.indices(i, &self.shape)?;
        }
        Ok(out.list)
    }
}

/// `signed_distance` as a program.
#[derive(Debug)]
pub struct SignedProgram {
    shape: Vec<usize>,
    threshold: Option<f64>,
    sampling: Vec<f64>,
}

impl Program for SignedProgram {
    fn name(&self) -> &'static str {
        SIGNED_INFO.name
    }
    fn outputs(&self) -> Vec<&'static str> {
        vec!["distances"]
    }
    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        let x = one_input(SIGNED_INFO.name, &self.shape, inputs)?;
        let m = match self.threshold {
            Some(t) => Masks::from_tensor_with(SIGNED_INFO.name, x, |v| v > t)?,
            None => Masks::from_tensor(SIGNED_INFO.name, x)?,
        };
        let d = super::signed::signed_run(exec, &m, &self.sampling);
        Ok(vec![Tensor::from_storage(Storage::F64(d), &self.shape)?])
    }
}

fn build_signed(p: &Params<'_>, inputs: &[TensorType]) -> Result<Box<dyn Program>, OpError> {
    let (t, rank) = the_input(SIGNED_INFO.name, inputs)?;
    Ok(Box::new(SignedProgram {
        shape: t.shape.clone(),
        threshold: parse_threshold(p)?,
        sampling: parse_sampling(p, rank)?,
    }))
}

/// The single `[B, C, S..]` input type of a transform and its spatial rank.
fn the_input<'t>(
    op: &'static str,
    inputs: &'t [TensorType],
) -> Result<(&'t TensorType, usize), OpError> {
    let [t] = inputs else {
        return Err(OpError::BadInput {
            op,
            problem: format!("takes 1 input, got {}", inputs.len()),
        });
    };
    Ok((t, spatial_rank(op, t)?))
}

fn build_edt(p: &Params<'_>, inputs: &[TensorType]) -> Result<Box<dyn Program>, OpError> {
    let (t, rank) = the_input(EDT_INFO.name, inputs)?;
    Ok(Box::new(EdtProgram {
        shape: t.shape.clone(),
        sampling: parse_sampling(p, rank)?,
        returns: Returns::parse(p)?,
    }))
}

fn build_cdt(p: &Params<'_>, inputs: &[TensorType]) -> Result<Box<dyn Program>, OpError> {
    let (t, rank) = the_input(CDT_INFO.name, inputs)?;
    Ok(Box::new(CdtProgram {
        shape: t.shape.clone(),
        structure: parse_cdt_metric(p, rank)?,
        returns: Returns::parse(p)?,
    }))
}

fn build_bf(p: &Params<'_>, inputs: &[TensorType]) -> Result<Box<dyn Program>, OpError> {
    let (t, rank) = the_input(BF_INFO.name, inputs)?;
    Ok(Box::new(BfProgram {
        shape: t.shape.clone(),
        metric: parse_bf_metric(p)?,
        sampling: parse_sampling(p, rank)?,
        returns: Returns::parse(p)?,
    }))
}

/// The three transforms' and `signed_distance`'s `PROGRAMS` entries.
pub const ENTRIES: [ProgramInfo; 4] = [
    ProgramInfo {
        info: EDT_INFO,
        layout: Layout::Image,
        inputs: &["input"],
        build: build_edt,
    },
    ProgramInfo {
        info: CDT_INFO,
        layout: Layout::Image,
        inputs: &["input"],
        build: build_cdt,
    },
    ProgramInfo {
        info: BF_INFO,
        layout: Layout::Image,
        inputs: &["input"],
        build: build_bf,
    },
    ProgramInfo {
        info: SIGNED_INFO,
        layout: Layout::Image,
        inputs: &["input"],
        build: build_signed,
    },
];
