//! `Pipeline`: a chain of typed operators compiled into fused kernels and run on `ndarray`
//! arrays.
//!
//! Scope: builds the chain's graph for an array's dtype and kiln shape (see [`Layout`]),
//! compiles it with a shared [`Engine`], keeps the compiled graph per `(dtype, shape)` and
//! runs it. The kernel form is shape-free, so a new shape of an already-seen rank and dtype
//! rebuilds and re-fuses the small graph but hits the engine's kernel cache: Cranelift runs
//! once per rank, dtype and chain. Exactness: the fused kernels are kiln's, bit-identical to
//! the eager oracle; the facade only copies elements (bit for bit) in and out. Limits: the
//! input is copied once into kiln's storage (kiln tensors own their storage); a result
//! `ArrayD` takes the kernel's output vector without a copy; `run_into` copies the result
//! into the caller's view. The graph cache holds at most [`GRAPH_CACHE`] shapes and is
//! emptied when full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use kiln_ir::{DType, Graph, GraphBuilder};
use kiln_runtime::fused::{CompiledGraph, Engine};
use kiln_runtime::Tensor;
use ndarray::{ArrayD, ArrayViewD, ArrayViewMutD, IxDyn};

use super::element::Element;
use super::error::{Error, Result};
use super::layout::Layout;
use super::op::{Mode, Op};

/// The most `(dtype, shape)` entries a pipeline's graph cache holds.
pub const GRAPH_CACHE: usize = 64;

type Key = (DType, Vec<usize>);

/// The process-wide engine every [`Pipeline::new`] shares (one kernel cache, rayon's pool).
pub fn shared_engine() -> Arc<Engine> {
    static ENGINE: OnceLock<Arc<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Arc::new(Engine::new())).clone()
}

/// A chain of operators, applied in order, compiled once per dtype and shape and run on any
/// array. Safe to share between threads.
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
    cache: Mutex<HashMap<Key, Arc<CompiledGraph>>>,
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
            cache: Mutex::new(HashMap::new()),
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
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).clear();
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
    /// freshly compiled.
    pub fn compiled(&self, dtype: DType, kiln_shape: &[usize]) -> Result<Arc<CompiledGraph>> {
        let key = (dtype, kiln_shape.to_vec());
        if let Some(c) = self.lock().get(&key) {
            return Ok(c.clone());
        }
        let graph = self.graph(dtype, kiln_shape)?;
        let out_dtype = graph.node(graph.outputs[0]).ty.dtype;
        if out_dtype != dtype {
            return Err(Error::Internal(format!(
                "chain maps {dtype} to {out_dtype}; every kiln operator keeps the dtype"
            )));
        }
        let compiled = Arc::new(self.engine.compile(&graph)?);
        let mut cache = self.lock();
        if cache.len() >= GRAPH_CACHE {
            cache.clear();
        }
        cache.insert(key, compiled.clone());
        Ok(compiled)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<CompiledGraph>>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of compiled graphs held (one per dtype and shape seen).
    pub fn cached_graphs(&self) -> usize {
        self.lock().len()
    }

    /// Runs the chain on `x` (any layout); returns a new array of `x`'s shape and dtype.
    pub fn run<T: Element>(&self, x: ArrayViewD<'_, T>) -> Result<ArrayD<T>> {
        let layout = self.layout(x.shape())?;
        let compiled = self.compiled(T::DTYPE, &layout.kiln_shape)?;
        let data: Vec<T> = if layout.is_identity() {
            match x.as_slice() {
                Some(s) => s.to_vec(),
                None => x.iter().copied().collect(),
            }
        } else {
            x.view()
                .permuted_axes(layout.perm.clone())
                .iter()
                .copied()
                .collect()
        };
        let input = Tensor::from_storage(T::into_storage(data), &layout.kiln_shape)?;
        let out = compiled
            .run(&self.engine, &[input])?
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
    /// (any layout).
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
        let y = self.run(x)?;
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
    /// graph, the fused groups and each kernel.
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
