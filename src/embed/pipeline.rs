//! `Pipeline`: a chain of typed operators compiled into fused kernels and run on `ndarray`
//! arrays.
//!
//! Scope: builds the chain's graph for an array's dtype and kiln shape (see [`Layout`]),
//! compiles it with a shared [`Engine`], keeps the compiled graph per dtype and *shape
//! class* and runs it. A compiled graph is bound to the input's shape at run time
//! ([`CompiledGraph::run_bound`]): the graph is built, optimised, fused and lowered once per
//! dtype, rank and class, Cranelift runs once per kernel form (shape-free). The class of a
//! shape (see [`kiln_runtime::fused::Binding`]): batch and channel extents never count; a
//! spatial extent at least `2·M + 2` (`M` the chain's largest window offset along that
//! axis) is *large* and any large extent shares the plan; a smaller extent is part of the
//! key (the window-clipping passes depend on it). Chains whose graph does not bind are kept
//! per exact shape. Exactness: the fused kernels are kiln's, bit-identical to the eager
//! oracle; the facade only copies elements (bit for bit) in and out. Limits: the input is
//! read in place when its strides allow (see [`super::input`]: negative strides and
//! non-spatial axes that do not fold are copied once); a result `ArrayD` takes the
//! kernel's output vector without a copy; `run_into` has the kernels write a row-major
//! output view directly (`CompiledGraph::run_bound_into_raw`; stencil kernels, line and
//! extern kernels through one copy) and copies the result into other layouts. The graph cache holds at most
//! [`GRAPH_CACHE`] classes and is emptied when full.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kiln_ir::{DType, Graph, GraphBuilder};
use kiln_runtime::fused::{CompiledGraph, Engine};
use kiln_runtime::Tensor;
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};

use super::element::Element;
use super::error::{Error, Result};
use super::input::input_tensor;
use super::layout::Layout;
use super::op::{Mode, Op};

/// The most `(dtype, shape class)` entries a pipeline's graph cache holds.
pub const GRAPH_CACHE: usize = 64;

/// A cache key: the dtype and, per axis of the kiln shape, `None` for an extent that does not
/// matter (batch, channel, large spatial extents) or the extent itself.
type Key = (DType, Vec<Option<usize>>);

/// The compiled graphs of a pipeline.
#[derive(Default)]
struct Graphs {
    /// By dtype and shape class (see the module docs).
    compiled: HashMap<Key, Arc<CompiledGraph>>,
    /// By dtype and rank: the least large extent per spatial axis, from the first graph
    /// built that binds.
    large_from: HashMap<(DType, usize), Vec<usize>>,
}

impl Graphs {
    /// The key of a kiln shape: its class under `large_from`, else the exact shape.
    fn key(dtype: DType, shape: &[usize], large_from: Option<&Vec<usize>>) -> Key {
        let class = match large_from {
            Some(t) if t.len() + 2 == shape.len() => shape
                .iter()
                .enumerate()
                .map(|(a, &n)| (a >= 2 && n < t[a - 2]).then_some(n))
                .collect(),
            _ => shape.iter().map(|&n| Some(n)).collect(),
        };
        (dtype, class)
    }
}

/// The process-wide engine every [`Pipeline::new`] shares (one kernel cache, rayon's pool).
pub fn shared_engine() -> Arc<Engine> {
    static ENGINE: OnceLock<Arc<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Arc::new(Engine::new())).clone()
}

/// A chain of operators, applied in order, compiled once per dtype, rank and shape class
/// (see the module docs) and run on any array. Safe to share between threads.
///
/// ```
/// use kiln::embed::{Op, Pipeline};
/// let x = ndarray::ArrayD::<f32>::from_shape_fn(vec![6, 7], |i| (i[0] * 7 + i[1]) as f32);
/// let p = Pipeline::new().then(Op::grey_opening(3)).then(Op::median_filter(3));
/// let y = p.run(x.view()).unwrap();
/// assert_eq!(y.shape(), &[6, 7]);
/// ```
pub struct Pipeline {
    ops: Vec<Op>,
    axes: Option<Vec<isize>>,
    engine: Arc<Engine>,
    cache: Mutex<Graphs>,
    builds: AtomicUsize,
    copied_in: AtomicU64,
    copied_out: AtomicU64,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("ops", &self.ops)
            .field("axes", &self.axes)
            .finish_non_exhaustive()
    }
}

impl From<Op> for Pipeline {
    fn from(op: Op) -> Pipeline {
        Pipeline::new().then(op)
    }
}

impl Pipeline {
    /// An empty pipeline on the shared engine ([`shared_engine`]).
    pub fn new() -> Pipeline {
        Pipeline::with_engine(shared_engine())
    }

    /// An empty pipeline on `engine`.
    pub fn with_engine(engine: Arc<Engine>) -> Pipeline {
        Pipeline {
            ops: Vec::new(),
            axes: None,
            engine,
            cache: Mutex::new(Graphs::default()),
            builds: AtomicUsize::new(0),
            copied_in: AtomicU64::new(0),
            copied_out: AtomicU64::new(0),
        }
    }

    /// Appends `op`, applied to the previous op's result.
    pub fn then(mut self, op: Op) -> Pipeline {
        self.ops.push(op);
        self.cache_clear();
        self
    }

    /// scipy's `axes=`: the spatial axes (negative from the end), in the order `size`,
    /// `footprint` and `origin` list them. The other axes are batch axes, never mixed.
    pub fn axes(mut self, axes: &[isize]) -> Pipeline {
        self.axes = Some(axes.to_vec());
        self.cache_clear();
        self
    }

    /// The operators, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The engine the kernels run on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    fn cache_clear(&self) {
        *self.lock() = Graphs::default();
    }

    fn min_spatial(&self) -> usize {
        self.ops.iter().map(Op::min_spatial_rank).max().unwrap_or(1)
    }

    /// The layout of an array of `shape` under this pipeline's axes.
    pub fn layout(&self, shape: &[usize]) -> Result<Layout> {
        let axes = match (
            &self.axes,
            self.ops.iter().any(|o| o.min_spatial_rank() == 2),
        ) {
            (Some(a), _) => Some(a.clone()),
            // kornia reads the last two axes; gradient_magnitude differentiates along the
            // last two spatial axes and leaves the others alone, so every axis may be
            // spatial there.
            (None, _)
                if self
                    .ops
                    .iter()
                    .any(|o| o.kind() == super::OpKind::MedianBlur) =>
            {
                Some(vec![-2, -1])
            }
            _ => None,
        };
        Layout::new(shape, axes.as_deref(), self.min_spatial())
    }

    /// The chain's graph for a kiln input of `dtype` and `kiln_shape` (`[B, C, S1..Sd]`).
    pub fn graph(&self, dtype: DType, kiln_shape: &[usize]) -> Result<Graph> {
        if self.ops.is_empty() {
            return Err(Error::Input("empty pipeline: add an operator first".into()));
        }
        let mut b = GraphBuilder::new();
        let mut x = b.input(dtype, kiln_shape)?;
        for op in &self.ops {
            x = op.append(&mut b, x, dtype)?;
        }
        Ok(b.finish(&[x])?)
    }

    /// The compiled chain for a kiln input of `dtype` and `kiln_shape`, from the cache or
    /// freshly compiled: a graph compiled for this shape or one of its class (see the module
    /// docs), so run it with [`CompiledGraph::run_bound`] when it binds.
    pub fn compiled(&self, dtype: DType, kiln_shape: &[usize]) -> Result<Arc<CompiledGraph>> {
        {
            let cache = self.lock();
            let large_from = cache.large_from.get(&(dtype, kiln_shape.len()));
            let runs_here = |c: &Arc<CompiledGraph>| match c.binding() {
                Some(b) => b.admits(kiln_shape),
                None => c.optimized.inputs[0].shape == kiln_shape,
            };
            for key in [
                Graphs::key(dtype, kiln_shape, large_from),
                Graphs::key(dtype, kiln_shape, None),
            ] {
                if let Some(c) = cache.compiled.get(&key).filter(|c| runs_here(c)) {
                    return Ok(c.clone());
                }
            }
        }
        self.builds.fetch_add(1, Ordering::Relaxed);
        let graph = self.graph(dtype, kiln_shape)?;
        let out_dtype = graph.node(graph.outputs[0]).ty.dtype;
        if out_dtype != dtype {
            return Err(Error::Internal(format!(
                "chain maps {dtype} to {out_dtype}; every kiln operator keeps the dtype"
            )));
        }
        let compiled = Arc::new(self.engine.compile(&graph)?);
        let mut cache = self.lock();
        if cache.compiled.len() >= GRAPH_CACHE {
            cache.compiled.clear();
        }
        let large_from = compiled.binding().map(|b| {
            cache
                .large_from
                .entry((dtype, kiln_shape.len()))
                .or_insert_with(|| b.large_from.clone())
                .clone()
        });
        let key = Graphs::key(dtype, kiln_shape, large_from.as_ref());
        cache.compiled.insert(key, compiled.clone());
        Ok(compiled)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Graphs> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of compiled graphs held (one per dtype and shape class seen).
    pub fn cached_graphs(&self) -> usize {
        self.lock().compiled.len()
    }

    /// How many times this pipeline built, optimised, fused and lowered its graph (once per
    /// dtype, rank and shape class while the cache holds it; Cranelift runs only for kernel
    /// forms the engine has not compiled).
    pub fn graph_builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }

    /// Bytes of input this pipeline copied before running (0 while every input was read in
    /// place; see [`super::input`]). The engine's own copies of views whose last axis is
    /// strided are [`CompiledGraph::kept_input_copy_bytes`].
    pub fn input_bytes_copied(&self) -> u64 {
        self.copied_in.load(Ordering::Relaxed)
    }

    /// Bytes of results [`Pipeline::run_into`] copied into callers' views (0 while every
    /// output view was row-major and written by the kernels directly).
    pub fn output_bytes_copied(&self) -> u64 {
        self.copied_out.load(Ordering::Relaxed)
    }

    /// Runs the chain on `x` (any layout, read in place when its strides allow); returns a
    /// new array of `x`'s shape and dtype.
    pub fn run<T: Element>(&self, x: ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
        let layout = self.layout(x.shape())?;
        let compiled = self.compiled(T::DTYPE, &layout.kiln_shape)?;
        // Borrows `x` when its strides allow; the run drops it before returning, while `x`
        // is still borrowed by this call.
        let (input, copied) = input_tensor(&x, &layout)?;
        if copied {
            let bytes = input.numel() * std::mem::size_of::<T>();
            self.copied_in.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        let out = run_compiled(&compiled, &self.engine, input)?
            .pop()
            .ok_or_else(|| Error::Internal("compiled chain returned no output".into()))?;
        let storage = out
            .into_unique_storage()
            .map_err(|_| Error::Internal("fresh output is not contiguous and unique".into()))?;
        let data = T::take(storage)
            .ok_or_else(|| Error::Internal("output storage has another dtype".into()))?;
        let permuted = ArrayD::from_shape_vec(IxDyn(&layout.permuted_shape), data)
            .map_err(|e| Error::Internal(format!("output of the wrong length: {e}")))?;
        Ok(if layout.is_identity() {
            permuted
        } else {
            permuted.permuted_axes(layout.inverse())
        })
    }

    /// Runs the chain on `x` and writes the result into `out`, which must have `x`'s shape
    /// (any layout). A row-major `out` (in the order [`Pipeline::layout`] reads the axes) is
    /// written by the kernels directly; any other layout through one copy
    /// ([`Pipeline::output_bytes_copied`]).
    pub fn run_into<T: Element>(
        &self,
        x: ArrayViewD<'_, T>,
        mut out: ArrayViewMutD<'_, T>,
    ) -> Result<()> {
        if out.shape() != x.shape() {
            return Err(Error::Output(format!(
                "shape {:?} differs from the input's {:?}",
                out.shape(),
                x.shape()
            )));
        }
        let layout = self.layout(x.shape())?;
        let compiled = self.compiled(T::DTYPE, &layout.kiln_shape)?;
        let mut o = out.view_mut().permuted_axes(layout.perm.clone());
        if compiled.binding().is_some() && o.is_standard_layout() {
            let (input, copied) = input_tensor(&x, &layout)?;
            if copied {
                let bytes = input.numel() * std::mem::size_of::<T>();
                self.copied_in.fetch_add(bytes as u64, Ordering::Relaxed);
            }
            // SAFETY: `o` is the caller's exclusive borrow `out`, so nothing else reads or
            // writes it during the call and it overlaps no element of `x` (a shared borrow);
            // it is row-major over the kiln shape's order with exactly the input's element
            // count, of `T`, the output's dtype (`compiled` checked that the chain keeps the
            // dtype), aligned for `T` (bool is a byte written 0 or 1).
            unsafe {
                compiled.run_bound_into_raw(
                    &self.engine,
                    std::slice::from_ref(&input),
                    o.as_mut_ptr().cast(),
                )
            }?;
            return Ok(());
        }
        let y = self.run(x)?;
        self.copied_out.fetch_add(
            (y.len() * std::mem::size_of::<T>()) as u64,
            Ordering::Relaxed,
        );
        out.assign(&y);
        Ok(())
    }

    /// How far the chain reads outside each point along each of `rank` spatial axes
    /// (`(before, after)`, summed over the chain): the overlap a chunked run needs.
    pub fn halo(&self, rank: usize) -> Result<Vec<(usize, usize)>> {
        let mut h = vec![(0, 0); rank];
        for op in &self.ops {
            for (a, b) in h.iter_mut().zip(op.halo(rank)?) {
                a.0 += b.0;
                a.1 += b.1;
            }
        }
        Ok(h)
    }

    /// The border modes the chain reads under, in order (`median_blur` reads under
    /// `constant` 0, `binary_erosion` under `constant` border_value).
    pub fn modes(&self) -> Vec<Mode> {
        self.ops
            .iter()
            .map(|o| match o.kind() {
                super::OpKind::MedianBlur | super::OpKind::BinaryErosion => Mode::Constant,
                // Morphology family (helper morph): binary borders are border_value.
                super::OpKind::BinaryDilation
                | super::OpKind::BinaryOpening
                | super::OpKind::BinaryClosing
                | super::OpKind::BinaryHitOrMiss => Mode::Constant,
                _ => o.border_mode(),
            })
            .collect()
    }

    /// A text dump of the chain compiled for an array of `dtype` and `shape`: the optimised
    /// graph, the fused groups and each kernel (of the graph compiled for the shape's class:
    /// its node shapes are those of the first shape of the class seen).
    pub fn dump(&self, dtype: DType, shape: &[usize]) -> Result<String> {
        let layout = self.layout(shape)?;
        let c = self.compiled(dtype, &layout.kiln_shape)?;
        let mut s = format!(
            "== optimized graph ({} nodes)\n{}\n== fused groups ({} kernels)\n{}\n",
            c.optimized.len(),
            kiln_ir::printer::print(&c.optimized),
            c.kernel_count(),
            c.partition.describe(&c.optimized)
        );
        for (i, k) in c.kernels.iter().enumerate() {
            s.push_str(&format!("== kernel {i}\n{}\n", k.kernel));
        }
        Ok(s)
    }
}

impl Op {
    /// Runs this one operator on `x` (a one-op [`Pipeline`] on the shared engine; a
    /// `median_filter` over more than 441 values runs the rank program instead).
    pub fn run<T: Element>(&self, x: ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
        // Rank filters (helper rank): windows over the network limit.
        if let Some(out) = super::rank::run_large_median(self, &x)? {
            return Ok(out);
        }
        Pipeline::from(self.clone()).run(x)
    }
}

/// Runs `compiled` on `input`: bound to its shape when the graph binds (see
/// [`CompiledGraph::run_bound`]), else at the shape it was compiled for.
fn run_compiled(
    compiled: &CompiledGraph,
    engine: &Engine,
    input: Tensor,
) -> Result<Vec<kiln_runtime::Tensor>> {
    Ok(match compiled.binding() {
        Some(_) => compiled.run_bound(engine, &[input])?,
        None => compiled.run(engine, &[input])?,
    })
}
