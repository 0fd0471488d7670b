//! The one executor of fused graphs: the pipeline (optimise for the target → fuse → lower),
//! the in-memory kernel cache, and the group walk, each written once for every backend.
//!
//! Scope: [`lower_graph`] is the pipeline, [`KernelCache`] the cache (keyed by the kernel
//! form and the compile options, never by shapes), [`walk_groups`] the walk (groups in
//! partition order, each group's inputs looked up among the graph inputs and earlier
//! roots, every intermediate dropped after its last reader). [`Executor`] and [`Program`]
//! put them together over a [`Backend`]; [`crate::fused::Engine`] and
//! `crate::cuda_graph::CudaGraph` use the same three pieces with their own extras.
//!
//! Exactness: nothing here computes values; each group's value is what its backend's
//! launch returns, and a value is only dropped after its last reader ran, so every group
//! reads exactly the tensors the graph says. Limits: one group at a time, in partition
//! order (no concurrency between groups).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kiln_codegen::lower::lower;
use kiln_codegen::{CodegenError, CompileOptions, Kernel};
use kiln_ir::passes::{fuse, optimize_with, FusedGroup, Partition, StageStorage, WindowBounds};
use kiln_ir::{Graph, Node, NodeId, NodeKind};
use thiserror::Error;

use crate::backend::{Backend, CodeImage};
use crate::eager::check_inputs;
use crate::tensor::{Storage, Tensor};
use crate::RuntimeError;

/// A graph after the pipeline: optimised, fused, and one kernel form per group.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The graph after `kiln_ir::passes::optimize_for` (the partition refers to it).
    pub optimized: Graph,
    /// The fused groups, in execution order.
    pub partition: Partition,
    /// One kernel per group, in the same order.
    pub kernels: Vec<Kernel>,
}

/// Optimises `graph` for `storage`, fuses it and lowers every group.
pub fn lower_graph(graph: &Graph, storage: StageStorage) -> Result<Lowered, CodegenError> {
    lower_graph_with(graph, storage, WindowBounds::default())
}

/// [`lower_graph`] with the window-bounding passes switched by `bounds`.
pub fn lower_graph_with(
    graph: &Graph,
    storage: StageStorage,
    bounds: WindowBounds,
) -> Result<Lowered, CodegenError> {
    let optimized = optimize_with(graph, storage, bounds);
    let partition = fuse(&optimized);
    let kernels = partition
        .groups
        .iter()
        .map(|g| lower(&optimized, g))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Lowered {
        optimized,
        partition,
        kernels,
    })
}

/// Locks `m`, also when another thread panicked while holding it: every mutex of the
/// executors guards state that each update writes whole (a cache entry, a counter), so a
/// poisoned lock is still usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiled artifacts by kernel form and compile options.
pub struct KernelCache<A> {
    map: Mutex<HashMap<(Kernel, CompileOptions), A>>,
}

impl<A> Default for KernelCache<A> {
    fn default() -> Self {
        KernelCache {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<A: Clone> KernelCache<A> {
    /// The artifact of `kernel` under `options`, from the cache or from `compile`, and
    /// whether `compile` ran. It runs outside the lock, so other threads are not held up;
    /// if another thread stored the same kernel meanwhile, its artifact is kept and this
    /// one dropped.
    pub fn get_or_compile<E>(
        &self,
        kernel: Kernel,
        options: &CompileOptions,
        compile: impl FnOnce(&Kernel) -> Result<A, E>,
    ) -> Result<(A, bool), E> {
        let key = (kernel, options.clone());
        if let Some(a) = lock(&self.map).get(&key) {
            return Ok((a.clone(), false));
        }
        let a = compile(&key.0)?;
        Ok((lock(&self.map).entry(key).or_insert(a).clone(), true))
    }

    /// Number of cached kernels.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A graph that the walk cannot run as given (a scheduler bug, or inputs missing); each
/// backend turns it into its own error with its own message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum WalkError {
    /// The number of compiled kernels is not the number of groups.
    #[error("{kernels} kernels for {groups} groups")]
    KernelCount {
        /// Kernels given.
        kernels: usize,
        /// Groups in the partition.
        groups: usize,
    },
    /// A node id is out of range.
    #[error("node {0} does not exist")]
    NoNode(NodeId),
    /// A group root id is out of range.
    #[error("group root {0} does not exist")]
    NoRoot(NodeId),
    /// Graph input `index` was not given (`got` inputs were).
    #[error("graph input {index} missing")]
    NoInput {
        /// The input position.
        index: usize,
        /// Inputs given.
        got: usize,
    },
    /// A value was read before any group computed it.
    #[error("{id} ({kind}) is used before any kernel computed it")]
    NotComputed {
        /// The node.
        id: NodeId,
        /// Its kind's name.
        kind: &'static str,
    },
}

impl From<WalkError> for RuntimeError {
    fn from(e: WalkError) -> Self {
        match e {
            WalkError::NoInput { index, got } => RuntimeError::InputCount {
                expected: index + 1,
                got,
            },
            other => RuntimeError::Shape(other.to_string()),
        }
    }
}

/// Runs the groups of `partition` (over `g`) in order: for group `i`, `run(i, group, args,
/// root)` with `args` the values of the group's inputs; the value it returns becomes the
/// root's. Values are dropped after their last reader. Returns the values of `g`'s outputs
/// (with every other handle the walk held already dropped). `kernels` is the number of
/// compiled kernels, checked against the number of groups first.
pub fn walk_groups<T: Clone, E: From<WalkError>>(
    g: &Graph,
    partition: &Partition,
    kernels: usize,
    inputs: &[T],
    mut run: impl FnMut(usize, &FusedGroup, &[T], &Node) -> Result<T, E>,
) -> Result<Vec<T>, E> {
    if kernels != partition.groups.len() {
        return Err(WalkError::KernelCount {
            kernels,
            groups: partition.groups.len(),
        }
        .into());
    }
    // Remaining readers of each materialised value, so intermediates are freed early.
    let mut uses = partition.reads(g);
    let mut values: HashMap<NodeId, T> = HashMap::new();
    for (gi, group) in partition.groups.iter().enumerate() {
        let args = group
            .inputs
            .iter()
            .map(|&i| value_of(g, &values, inputs, i))
            .collect::<Result<Vec<_>, _>>()?;
        let root = g
            .nodes
            .get(group.root.index())
            .ok_or(WalkError::NoRoot(group.root))?;
        let out = run(gi, group, &args, root)?;
        drop(args);
        values.insert(group.root, out);
        for &i in &group.inputs {
            if let Some(u) = uses.get_mut(&i) {
                *u -= 1;
                if *u == 0 {
                    values.remove(&i);
                }
            }
        }
    }
    let outs = g
        .outputs
        .iter()
        .map(|&o| value_of(g, &values, inputs, o))
        .collect::<Result<Vec<_>, _>>()?;
    drop(values);
    Ok(outs)
}

/// The value of node `id`: a graph input or an already computed group root.
fn value_of<T: Clone>(
    g: &Graph,
    values: &HashMap<NodeId, T>,
    inputs: &[T],
    id: NodeId,
) -> Result<T, WalkError> {
    let node = g.nodes.get(id.index()).ok_or(WalkError::NoNode(id))?;
    if let NodeKind::Input { index } = node.kind {
        return inputs.get(index).cloned().ok_or(WalkError::NoInput {
            index,
            got: inputs.len(),
        });
    }
    values.get(&id).cloned().ok_or(WalkError::NotComputed {
        id,
        kind: node.kind.name(),
    })
}

/// A fresh contiguous host copy of `t` that shares no storage with it (what a graph output
/// that is a graph input returns).
pub(crate) fn fresh_copy(t: &Tensor) -> Result<Tensor, RuntimeError> {
    let c = t.to_contiguous();
    if Arc::ptr_eq(c.storage(), t.storage()) {
        Tensor::from_storage(Storage::clone(c.storage()), c.shape())
    } else {
        Ok(c)
    }
}

/// The executor over one backend: its kernel cache and the backend.
pub struct Executor<B: Backend> {
    backend: B,
    cache: KernelCache<B::Artifact>,
}

impl<B: Backend> Executor<B> {
    /// An executor with an empty cache.
    pub fn new(backend: B) -> Executor<B> {
        Executor {
            backend,
            cache: KernelCache::default(),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, to change its settings (cached artifacts stay valid: the cache key
    /// holds the compile options).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The artifact of `kernel`, from the cache or compiled now, and whether it was
    /// compiled now.
    pub fn artifact(&self, kernel: Kernel) -> Result<(B::Artifact, bool), B::Error> {
        self.cache
            .get_or_compile(kernel, self.backend.compile_options(), |k| {
                self.backend.compile(k)
            })
    }

    /// Runs the pipeline for the backend and compiles every kernel through the cache.
    pub fn compile(&self, graph: &Graph) -> Result<Program<B>, B::Error> {
        let lowered = lower_graph_with(
            graph,
            self.backend.stage_storage(),
            self.backend.window_bounds(),
        )?;
        let artifacts = lowered
            .kernels
            .iter()
            .map(|k| Ok(self.artifact(k.clone())?.0))
            .collect::<Result<Vec<_>, B::Error>>()?;
        Ok(Program { lowered, artifacts })
    }

    /// Compiles and runs `graph` on host `inputs`.
    pub fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, B::Error> {
        check_inputs(graph, inputs)?;
        self.compile(graph)?.run(&self.backend, inputs)
    }
}

/// A graph compiled for a backend.
pub struct Program<B: Backend> {
    /// The pipeline's result.
    pub lowered: Lowered,
    /// One artifact per group.
    pub artifacts: Vec<B::Artifact>,
}

impl<B: Backend> Program<B> {
    /// Runs every group on buffers already in the backend's memory; returns the graph
    /// outputs (a graph input returned as an output is that input's buffer).
    pub fn launch(&self, backend: &B, inputs: &[B::Buffer]) -> Result<Vec<B::Buffer>, B::Error> {
        let l = &self.lowered;
        walk_groups(
            &l.optimized,
            &l.partition,
            self.artifacts.len(),
            inputs,
            |gi, group, args, root| {
                let a = self.artifacts.get(gi).ok_or(WalkError::KernelCount {
                    kernels: self.artifacts.len(),
                    groups: l.partition.groups.len(),
                })?;
                backend.launch(a, group, args, &root.ty)
            },
        )
    }

    /// Runs on host `inputs`: uploads them, launches, downloads the outputs. An output that
    /// is a graph input comes back as a fresh copy of the host input.
    pub fn run(&self, backend: &B, inputs: &[Tensor]) -> Result<Vec<Tensor>, B::Error> {
        let g = &self.lowered.optimized;
        check_inputs(g, inputs)?;
        let dev = inputs
            .iter()
            .map(|t| backend.upload(t))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = self.launch(backend, &dev)?;
        let mut host = Vec::with_capacity(outs.len());
        for (o, &id) in outs.iter().zip(&g.outputs) {
            match g.node(id).kind {
                NodeKind::Input { index } => {
                    let t = inputs.get(index).ok_or(WalkError::NoInput {
                        index,
                        got: inputs.len(),
                    })?;
                    host.push(fresh_copy(t)?);
                }
                _ => host.push(backend.download(o)?),
            }
        }
        Ok(host)
    }

    /// The code image of every group's artifact, in group order.
    pub fn code_images(&self, backend: &B) -> Result<Vec<CodeImage>, B::Error> {
        self.artifacts
            .iter()
            .map(|a| backend.code_image(a))
            .collect()
    }
}
