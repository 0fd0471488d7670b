//! Operator programs: operators that are not one graph.
//!
//! Scope: most operators are one graph with one input and one output ([`crate::build_op`]).
//! Some are not: an iterated or until-convergence operation runs a fused graph to a fixpoint,
//! a distance transform returns distances and indices, Sinkhorn takes several inputs and
//! iterates. Such an operator is a [`Program`]: named inputs and outputs and a `run` over
//! tensors that calls graphs through an [`Exec`] (eager or fused) and may run native code.
//! [`build_plan`] returns either kind by name, so `kiln run` and the bindings treat both alike.
//!
//! Exactness: a program's result must not depend on the [`Exec`] it is given: with
//! `Exec::Eager` it runs every graph through the eager oracle (and its native parts through
//! their reference code), with `Exec::Fused` through the engine, and the two agree bit for bit.
//! Each program's tests check that.
//!
//! Limits: programs are not appended to other graphs, so they fuse internally only.

use std::fmt;

use kiln_ir::{Graph, TensorType};
use kiln_runtime::{eager, fused::Engine, RuntimeError, Tensor};
use thiserror::Error;

use crate::error::OpError;

/// How a program runs its graphs and native parts.
#[derive(Clone, Copy)]
pub enum Exec<'e> {
    /// Node by node through the eager oracle; native parts run their reference code.
    Eager,
    /// Fused JIT kernels on this engine; native parts run their fast code.
    Fused(&'e Engine),
}

impl fmt::Debug for Exec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exec::Eager => "Exec::Eager",
            Exec::Fused(_) => "Exec::Fused",
        })
    }
}

impl Exec<'_> {
    /// Runs `graph` on `inputs` with this executor.
    pub fn run_graph(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        Ok(match self {
            Exec::Eager => eager::run(graph, inputs)?,
            Exec::Fused(engine) => engine.run(graph, inputs)?,
        })
    }

    /// True for the eager oracle.
    pub fn is_eager(&self) -> bool {
        matches!(self, Exec::Eager)
    }
}

/// Why a program failed at run time. Every message is one line.
#[derive(Debug, Error)]
pub enum RunError {
    /// Building one of its graphs failed (a parameter the input's type makes invalid).
    #[error(transparent)]
    Op(#[from] OpError),
    /// The runtime rejected a graph run (shapes, memory, a compile failure).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// An input the program cannot use (wrong count, dtype, rank or shape).
    #[error("{op}: {problem}")]
    BadInput {
        /// Operator name.
        op: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// How `kiln run` lays out a program's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Images `[B, C, S1..Sd]`; a 2-D file `[H, W]` is read as `[1, 1, H, W]` and outputs whose
    /// two leading axes are then `1, 1` are written without them.
    Image,
    /// Arrays passed as they are (histograms, cost matrices).
    Raw,
}

/// An operator that is not one graph (see the module header).
pub trait Program: Send + Sync {
    /// Registry name.
    fn name(&self) -> &'static str;
    /// Output names, in the order `run` returns them (for `kiln run --output`).
    fn outputs(&self) -> Vec<&'static str>;
    /// Runs the program. The result does not depend on `exec` (bit for bit).
    fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError>;
}

impl fmt::Debug for dyn Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Program({})", self.name())
    }
}

/// A built operator: one graph or a program.
#[derive(Debug)]
pub enum OpPlan {
    /// One graph, one output per graph output.
    Graph(Graph),
    /// A program.
    Program(Box<dyn Program>),
}

impl OpPlan {
    /// Runs the operator on `inputs` with `exec`.
    pub fn run(&self, exec: Exec<'_>, inputs: &[Tensor]) -> Result<Vec<Tensor>, RunError> {
        match self {
            OpPlan::Graph(g) => exec.run_graph(g, inputs),
            OpPlan::Program(p) => p.run(exec, inputs),
        }
    }

    /// Output names (`out` for a graph with one output, `out0`, `out1`, ... otherwise).
    pub fn outputs(&self) -> Vec<String> {
        match self {
            OpPlan::Graph(g) if g.outputs.len() == 1 => vec!["out".to_string()],
            OpPlan::Graph(g) => (0..g.outputs.len()).map(|i| format!("out{i}")).collect(),
            OpPlan::Program(p) => p.outputs().iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Builds a program for inputs of the given types from checked parameters.
pub type BuildProgram =
    fn(&crate::registry::Params<'_>, &[TensorType]) -> Result<Box<dyn Program>, OpError>;

/// A program's registry entry.
#[derive(Clone, Copy)]
pub struct ProgramInfo {
    /// Name, summary and parameters, as for graph operators.
    pub info: crate::OpInfo,
    /// How `kiln run` lays out its inputs.
    pub layout: Layout,
    /// Input names, in order (`kiln run --input` is repeated in this order).
    pub inputs: &'static [&'static str],
    /// Builds the program for inputs of these types with these parameters.
    pub build: BuildProgram,
}

impl fmt::Debug for ProgramInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProgramInfo({})", self.info.name)
    }
}

/// Every registered program. Each family adds its entries as one contiguous block.
pub const PROGRAMS: &[ProgramInfo] = &[
    // Families add their programs here.
    // Distance transforms (ops/src/distance).
    crate::distance::entries::ENTRIES[0],
    crate::distance::entries::ENTRIES[1],
    crate::distance::entries::ENTRIES[2],
    crate::distance::entries::ENTRIES[3],
    // Morphology family (helper morph): fixpoints of fused binary kernels / flood fills.
    ProgramInfo {
        info: crate::OpInfo {
            name: "binary_propagation",
            summary:
                "scipy.ndimage.binary_propagation: dilation until nothing changes, within mask",
            params: crate::morphology_registry::PROPAGATION_PARAMS,
        },
        layout: Layout::Image,
        inputs: &["input", "mask"],
        build: crate::morphology_registry::build_propagation,
    },
    ProgramInfo {
        info: crate::OpInfo {
            name: "binary_fill_holes",
            summary:
                "scipy.ndimage.binary_fill_holes: NOT of the background reachable from outside",
            params: crate::morphology_registry::FILL_HOLES_PARAMS,
        },
        layout: Layout::Image,
        inputs: &["input"],
        build: crate::morphology_registry::build_fill_holes,
    },
    // sinkhorn (issue 30)
    ProgramInfo {
        info: crate::OpInfo {
            name: "sinkhorn",
            summary:
                "batched entropic optimal transport (POT's sinkhorn_knopp / sinkhorn_log order)",
            params: crate::sinkhorn::SINKHORN_PARAMS,
        },
        layout: Layout::Raw,
        inputs: &["a", "b", "cost"],
        build: crate::sinkhorn::build_sinkhorn,
    },
];

/// The registry entry of program `name`, if registered.
pub fn program_info(name: &str) -> Option<&'static ProgramInfo> {
    PROGRAMS.iter().find(|p| p.info.name == name)
}

/// Builds operator `name` (a graph operator or a program) for inputs of types `inputs`.
/// Graph operators take exactly one input.
pub fn build_plan(
    name: &str,
    params: &[(String, String)],
    inputs: &[TensorType],
) -> Result<OpPlan, OpError> {
    // Rank filters (helper rank): windows over the network limit are programs.
    if let Some(plan) = crate::rank::large_plan(name, params, inputs)? {
        return Ok(plan);
    }
    if let Some(p) = program_info(name) {
        if inputs.len() != p.inputs.len() {
            return Err(OpError::BadInput {
                op: p.info.name,
                problem: format!(
                    "takes {} input(s) ({}), got {}",
                    p.inputs.len(),
                    p.inputs.join(", "),
                    inputs.len()
                ),
            });
        }
        let params = crate::registry::Params::new(&p.info, params)?;
        return Ok(OpPlan::Program((p.build)(&params, inputs)?));
    }
    match inputs {
        [one] => Ok(OpPlan::Graph(crate::build_op(name, params, one)?)),
        _ => {
            // An unknown name is the more useful error whatever the count.
            let info = crate::op_info(name).ok_or_else(|| OpError::UnknownOp {
                name: name.to_string(),
                known: crate::registry::all_names().join(", "),
            })?;
            Err(OpError::BadInput {
                op: info.name,
                problem: format!("takes 1 input, got {}", inputs.len()),
            })
        }
    }
}

/// How `kiln run` lays out operator `name`'s inputs ([`Layout::Image`] for graph operators).
pub fn layout_of(name: &str) -> Layout {
    program_info(name).map_or(Layout::Image, |p| p.layout)
}
