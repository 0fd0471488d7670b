//! Binding a compiled graph to another input shape: compile once per rank and dtype, run on
//! any shape of the same *shape class*.
//!
//! Scope: [`Binding`], worked out once per [`super::CompiledGraph`], says which input shapes
//! the compiled graph may run on besides the one it was built for, and
//! [`super::CompiledGraph::run_bound`] / [`super::CompiledGraph::run_bound_into`] run it on
//! them. Kernels are shape-free (a kernel takes the output shape and the inputs' strides at
//! run time; block plans and scratch are worked out per run and cached by shape), so what a
//! compiled graph depends on is its optimised graph and partition. Of the passes that make
//! them (`kiln_ir::passes::optimize_with`, `fuse`, `lower`), exactly two read node shapes:
//! `clip_windows` and `long_windows`, both through the spatial extents of a window's node.
//!
//! Exactness: a graph binds when it has one input and every node (of the graph given to
//! `compile` and of its optimised form) has the input's shape, so that binding an input
//! shape binds every node's. Let `M[a]` be the largest `|offset|` along spatial axis `a` of
//! any window or gather of either graph. A spatial extent `n ≥ 2·M[a] + 2` is *large*: every
//! offset is inside every mode's safe range (`|o| ≤ n − 1`), and no offset set (at most
//! `2·M[a] + 1` offsets) hits every residue of a remap period (`n`, `2n`, `2n − 2`, each
//! `> 2·M[a] + 1`), so `clip_windows` leaves the axis as it is; and `long_windows`'s
//! `chain_eligible` (`m ≤ n`, `m < n` with `m ≤ M[a]`) holds. Both passes treat axes one by
//! one, so a shape `s` gives the same optimised graph, partition and kernels as the
//! compiled shape `s₀` when along every spatial axis `s[a] = s₀[a]`, or both are large.
//! Batch and channel extents never matter (no window reads across them). Such a shape is
//! *admitted*; the run then gives every node the bound shape (test
//! `bound_runs_equal_eager_on_many_shapes` in `tests/bind.rs`, and the boundary test there).
//!
//! Limits: graphs with several inputs, or nodes of other shapes (an axis reduction keeps a
//! length-1 axis), do not bind (their runs need the exact shape); a shape with a small
//! extent along an axis where the compiled shape's differs needs its own compile.

use kiln_ir::{Graph, NodeKind};

/// Which input shapes a compiled graph runs on (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The input shape the graph was compiled for.
    pub shape: Vec<usize>,
    /// Per spatial axis: the least extent that is *large* (`2·M[a] + 2`).
    pub large_from: Vec<usize>,
}

impl Binding {
    /// The binding of a graph compiled from `graph` into `optimized`, or `None` when it does
    /// not bind (several inputs, or a node whose shape is not the input's).
    pub fn of(graph: &Graph, optimized: &Graph) -> Option<Binding> {
        let [input] = graph.inputs.as_slice() else {
            return None;
        };
        let shape = &input.shape;
        if shape.len() < 2 || optimized.inputs.len() != 1 || optimized.inputs[0] != *input {
            return None;
        }
        let spatial = shape.len() - 2;
        let mut reach = vec![0u64; spatial];
        for g in [graph, optimized] {
            for node in &g.nodes {
                if node.ty.shape != *shape {
                    return None;
                }
                let offsets: &[Vec<i64>] = match &node.kind {
                    NodeKind::WindowReduce { footprint, .. } => &footprint.offsets,
                    NodeKind::Gather { offset, .. } => std::slice::from_ref(offset),
                    _ => &[],
                };
                for off in offsets {
                    for (r, &o) in reach.iter_mut().zip(off) {
                        *r = (*r).max(o.unsigned_abs());
                    }
                }
            }
        }
        let large_from = reach
            .iter()
            .map(|&m| {
                usize::try_from(m)
                    .ok()
                    .and_then(|m| m.checked_mul(2)?.checked_add(2))
                    .unwrap_or(usize::MAX)
            })
            .collect();
        Some(Binding {
            shape: shape.clone(),
            large_from,
        })
    }

    /// Whether every spatial extent of `shape` is large (see the module docs).
    pub fn is_large(&self, shape: &[usize]) -> bool {
        shape.len() == self.shape.len()
            && shape[2..]
                .iter()
                .zip(&self.large_from)
                .all(|(&n, &t)| n >= t)
    }

    /// Whether the compiled graph runs on an input of `shape`: the same rank, no zero
    /// extent, and along each spatial axis the compiled extent or, when that one is large,
    /// any large extent.
    pub fn admits(&self, shape: &[usize]) -> bool {
        shape.len() == self.shape.len()
            && !shape.contains(&0)
            && shape[2..]
                .iter()
                .zip(&self.shape[2..])
                .zip(&self.large_from)
                .all(|((&n, &n0), &t)| n == n0 || (n >= t && n0 >= t))
    }
}

use super::{CompiledGraph, Engine};
use crate::tensor::Tensor;
use crate::RuntimeError;

impl CompiledGraph {
    /// Which input shapes this graph runs on with [`CompiledGraph::run_bound`]; `None` when
    /// it runs only on the shape it was compiled for.
    pub fn binding(&self) -> Option<&Binding> {
        self.binding.as_ref()
    }

    /// Like [`CompiledGraph::run`], on an input of any shape the graph's [`Binding`] admits
    /// (the compiled shape included): every node takes the input's shape. Errors: the graph
    /// does not bind, or the input's count, dtype or shape is not admitted.
    pub fn run_bound(
        &self,
        engine: &Engine,
        inputs: &[Tensor],
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let shape = self.bound_shape(inputs)?;
        self.check_memory(Some(&shape))?;
        let none = (0..self.optimized.outputs.len()).map(|_| None).collect();
        engine.dispatch(self.work_at(Some(&shape)), &self.placement, || {
            self.run_inner(engine, inputs, none, Some(&shape))
        })
    }

    /// Like [`CompiledGraph::run_into`] on an input of any admitted shape (see
    /// [`CompiledGraph::run_bound`]); each output buffer has the input's shape.
    pub fn run_bound_into(
        &self,
        engine: &Engine,
        inputs: &[Tensor],
        outputs: Vec<Tensor>,
    ) -> Result<Vec<Tensor>, RuntimeError> {
        let shape = self.bound_shape(inputs)?;
        self.check_memory(Some(&shape))?;
        let dest = self.output_storages(outputs, Some(&shape))?;
        engine.dispatch(self.work_at(Some(&shape)), &self.placement, || {
            self.run_inner(engine, inputs, dest, Some(&shape))
        })
    }

    /// Like [`CompiledGraph::run_bound`] for a graph of one output, written into a
    /// caller's memory: stencil kernels write it directly (no intermediate buffer), line
    /// and extern kernels through one copy. Errors: as `run_bound`, a graph of several
    /// outputs, a null or misaligned `out`.
    ///
    /// # Safety
    /// `out` must point to as many writable elements of the output's dtype as the input
    /// has, row-major, that nothing else reads or writes during the call and that overlap
    /// no input's elements. Nothing of them is kept after the call.
    pub unsafe fn run_bound_into_raw(
        &self,
        engine: &Engine,
        inputs: &[Tensor],
        out: *mut u8,
    ) -> Result<(), RuntimeError> {
        let shape = self.bound_shape(inputs)?;
        let [o] = self.optimized.outputs.as_slice() else {
            return Err(RuntimeError::Shape(format!(
                "a raw output for a graph of {} outputs",
                self.optimized.outputs.len()
            )));
        };
        let dtype = self.optimized.node(*o).ty.dtype;
        if out.is_null() || !(out as usize).is_multiple_of(dtype.size_bytes()) {
            return Err(RuntimeError::Shape(format!(
                "raw {dtype} output at a null or misaligned address"
            )));
        }
        self.check_memory(Some(&shape))?;
        let dest = vec![Some(super::dest::Dest::Raw {
            ptr: super::out_ptr::OutPtr(out),
            dtype,
            len: shape.iter().product(),
        })];
        // The outputs (borrowed views of `out`) are dropped here, before the call returns.
        engine
            .dispatch(self.work_at(Some(&shape)), &self.placement, || {
                self.run_inner(engine, inputs, dest, Some(&shape))
            })
            .map(drop)
    }

    /// The shape a bound run gives every node: the one input's, when admitted.
    fn bound_shape(&self, inputs: &[Tensor]) -> Result<Vec<usize>, RuntimeError> {
        let [t] = inputs else {
            return Err(RuntimeError::InputCount {
                expected: 1,
                got: inputs.len(),
            });
        };
        let binding = self.binding.as_ref().ok_or_else(|| {
            RuntimeError::Shape(
                "this graph runs only on the shape it was compiled for (several inputs, or \
                 nodes of other shapes)"
                    .into(),
            )
        })?;
        let dtype = self.optimized.inputs[0].dtype;
        if t.dtype() != dtype || !binding.admits(t.shape()) {
            return Err(RuntimeError::InputMismatch {
                index: 0,
                expected: format!(
                    "{dtype} of rank {} with spatial extents {:?}, or each at least {:?}",
                    binding.shape.len(),
                    &binding.shape[2..],
                    binding.large_from
                ),
                got: format!("{}{:?}", t.dtype(), t.shape()),
            });
        }
        Ok(t.shape().to_vec())
    }
}
