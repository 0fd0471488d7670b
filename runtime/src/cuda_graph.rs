//! Running whole graphs on CUDA (feature `cuda`): the executor's pass pipeline
//! ([`crate::executor::lower_graph`] for [`StageStorage::DevicePasses`]) and group walk
//! ([`crate::executor::walk_groups`]), one PTX kernel per fused group
//! ([`crate::backend::cuda::launch_group`]), launched in partition order on one stream.
//! Graph inputs are uploaded once; intermediates stay in device memory and are freed after
//! their last reader; only the graph outputs are copied back.
//!
//! Status: built and type-checked without CUDA; without a driver [`CudaEngine::new`] returns a
//! clear error. Not yet run on a GPU (see docs/PTX.md).

use std::sync::Arc;

use kiln_codegen::kernel::Kernel;
use kiln_codegen::CompileOptions;
use kiln_ir::passes::{Partition, StageStorage};
use kiln_ir::{Graph, NodeKind};

use crate::backend::cuda::launch_group;
use crate::cuda::{CudaEngine, CudaError, DeviceTensor};
use crate::eager::check_inputs;
use crate::executor::{fresh_copy, lower_graph, walk_groups, Lowered};
use crate::tensor::Tensor;

/// A graph lowered to kernels for the CUDA engine (no device state: kernels are rendered and
/// loaded by the engine's cache on first launch).
pub struct CudaGraph {
    /// The graph after `kiln_ir::passes::optimize_for` (the partition refers to it).
    pub optimized: Graph,
    /// The fused groups, in execution order.
    pub partition: Partition,
    /// One kernel per group, in the same order.
    pub kernels: Vec<Kernel>,
    /// Compile options (planted faults) the kernels are rendered with.
    pub options: CompileOptions,
}

impl CudaGraph {
    /// Optimises, fuses and lowers `graph` like `Engine::compile` (without the Cranelift
    /// step), except that the pipeline is the one for recomputed stages
    /// ([`StageStorage::DevicePasses`]: no window doubling chains).
    pub fn compile(graph: &Graph, options: CompileOptions) -> Result<CudaGraph, CudaError> {
        let Lowered {
            optimized,
            partition,
            kernels,
        } = lower_graph(graph, StageStorage::DevicePasses)?;
        Ok(CudaGraph {
            optimized,
            partition,
            kernels,
            options,
        })
    }

    /// Number of kernels (fused groups).
    pub fn kernel_count(&self) -> usize {
        self.kernels.len()
    }

    /// Uploads `inputs` (checked against the graph) to the device.
    pub fn upload(
        &self,
        engine: &CudaEngine,
        inputs: &[Tensor],
    ) -> Result<Vec<Arc<DeviceTensor>>, CudaError> {
        check_inputs(&self.optimized, inputs)?;
        inputs
            .iter()
            .map(|t| engine.upload(t).map(Arc::new))
            .collect()
    }

    /// Queues every kernel on device inputs (from [`CudaGraph::upload`]); returns the graph
    /// outputs as device tensors without waiting. A graph output that is a graph input is
    /// the input's device tensor itself.
    pub fn launch(
        &self,
        engine: &CudaEngine,
        inputs: &[Arc<DeviceTensor>],
    ) -> Result<Vec<Arc<DeviceTensor>>, CudaError> {
        let g = &self.optimized;
        if inputs.len() != g.inputs.len() {
            return Err(CudaError::Inputs(format!(
                "graph has {} inputs, {} were given",
                g.inputs.len(),
                inputs.len()
            )));
        }
        walk_groups(
            g,
            &self.partition,
            self.kernels.len(),
            inputs,
            |gi, group, args, root| {
                let kernel = self.kernels.get(gi).ok_or_else(|| {
                    CudaError::Inputs(format!(
                        "{} kernels for {} groups",
                        self.kernels.len(),
                        self.partition.groups.len()
                    ))
                })?;
                launch_group(engine, &self.options, kernel, group, args, &root.ty)
            },
        )
    }

    /// Runs the graph on host `inputs`; returns its outputs as fresh contiguous host tensors.
    pub fn run(&self, engine: &CudaEngine, inputs: &[Tensor]) -> Result<Vec<Tensor>, CudaError> {
        check_inputs(&self.optimized, inputs)?;
        let dev = self.upload(engine, inputs)?;
        let outs = self.launch(engine, &dev)?;
        let mut host = Vec::with_capacity(outs.len());
        for (k, (o, &id)) in outs.iter().zip(&self.optimized.outputs).enumerate() {
            // A graph input returned as an output: a fresh copy of the host input (as the CPU
            // engine does), not a round trip through the device.
            if let NodeKind::Input { index } = self.optimized.node(id).kind {
                let t = inputs.get(index).ok_or_else(|| {
                    CudaError::Inputs(format!("output {k} reads missing input {index}"))
                })?;
                host.push(fresh_copy(t)?);
            } else {
                host.push(engine.download(o)?);
            }
        }
        Ok(host)
    }

    /// Times the kernels alone (inputs already on the device, outputs not copied back) with
    /// CUDA events: `warmup` untimed runs, then `reps` timed ones; returns the milliseconds
    /// of each timed run.
    pub fn time_kernels(
        &self,
        engine: &CudaEngine,
        inputs: &[Tensor],
        warmup: usize,
        reps: usize,
    ) -> Result<Vec<f64>, CudaError> {
        let dev = self.upload(engine, inputs)?;
        for _ in 0..warmup {
            self.launch(engine, &dev)?;
        }
        engine.synchronize()?;
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let start = engine.record_event()?;
            let outs = self.launch(engine, &dev)?;
            let end = engine.record_event()?;
            times.push(engine.elapsed_ms(&start, &end)?);
            drop(outs);
        }
        Ok(times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_ir::{Border, DType, Footprint, GraphBuilder, ReduceOp};

    /// A scan feeding a window max (two groups), plus the input returned as an output.
    fn graph() -> Graph {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &[1, 2, 5, 6]).unwrap();
        let s = b.scan(x, 3, ReduceOp::Sum).unwrap();
        let fp = Footprint::scipy_box(&[3, 3], &[0, 0]);
        let m = b
            .window_reduce(s, ReduceOp::Max, &fp, Border::Reflect)
            .unwrap();
        b.finish(&[m, x]).unwrap()
    }

    #[test]
    fn compile_matches_the_cpu_engine_pipeline() {
        let g = graph();
        let c = CudaGraph::compile(&g, CompileOptions::default()).unwrap();
        let cpu = crate::fused::Engine::new().compile(&g).unwrap();
        assert_eq!(c.optimized, cpu.optimized);
        assert_eq!(c.partition, cpu.partition);
        let cpu_kernels: Vec<Kernel> = cpu.kernels.iter().map(|k| k.kernel.clone()).collect();
        assert_eq!(c.kernels, cpu_kernels);
        assert_eq!(c.kernel_count(), 2);
    }

    /// Without a GPU: the clear error. With one: the graph (a scan feeding a stencil, plus
    /// an input returned as an output) is bit-exact against eager.
    #[test]
    fn graph_errors_without_gpu_or_matches_eager() {
        let engine = match CudaEngine::new(0) {
            Err(CudaError::NoDevice(msg)) => {
                assert!(!msg.is_empty());
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("SKIP: no GPU here ({msg}); only the error was checked\n").as_bytes(),
                );
                return;
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(e) => e,
        };
        let g = graph();
        let data: Vec<f32> = (0..60)
            .map(|i| match i % 13 {
                3 => f32::NAN,
                7 => -0.0,
                _ => (i as f32 * 0.37).sin(),
            })
            .collect();
        let x = Tensor::from_f32(data, &[1, 2, 5, 6]).unwrap();
        let c = CudaGraph::compile(&g, CompileOptions::default()).unwrap();
        let got = c.run(&engine, std::slice::from_ref(&x)).unwrap();
        let want = crate::eager::run(&g, std::slice::from_ref(&x)).unwrap();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert_eq!(crate::tensor::first_difference(a, b), None);
        }
    }
}
