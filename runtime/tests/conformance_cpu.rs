//! The conformance suite (`conformance/`) on the CPU: the executor over the CPU backend,
//! and the fused engine as it is used (default, in the smallest scratch chunks, and on its
//! tiered compiles once they landed).

mod common;
#[macro_use]
mod conformance;

use std::time::Duration;

use conformance::Runner;
use kiln_ir::Graph;
use kiln_runtime::backend::cpu::CpuBackend;
use kiln_runtime::executor::Executor;
use kiln_runtime::fused::Engine;
use kiln_runtime::Tensor;

/// The engine, run as `Engine::run` does.
struct Plain(&'static str, Engine);

impl Runner for Plain {
    fn name(&self) -> String {
        self.0.to_string()
    }

    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        self.1.run(graph, inputs).map_err(|e| e.to_string())
    }
}

/// The engine on its background compiles (bigger steps, clean-input specialisations),
/// waited for.
struct Tiered(Engine);

impl Runner for Tiered {
    fn name(&self) -> String {
        "engine, tiered compiles".into()
    }

    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let compiled = self.0.compile(graph).map_err(|e| e.to_string())?;
        if !compiled.wait_for_upgrades(Duration::from_secs(120)) {
            return Err("a background compile did not finish in 120 s".into());
        }
        compiled.run(&self.0, inputs).map_err(|e| e.to_string())
    }
}

fn runners() -> Option<Vec<Box<dyn Runner>>> {
    Some(vec![
        Box::new(Executor::new(CpuBackend::default())),
        Box::new(Plain("engine", Engine::new())),
        Box::new(Plain(
            "engine, smallest scratch chunks",
            Engine::new().with_scratch_budget(1),
        )),
        Box::new(Tiered(Engine::new())),
    ])
}

conformance_tests!(runners);

/// The suite's check can fail: a backend with a planted miscompilation (the right border
/// column read wrongly) is caught on a window under `wrap`.
#[test]
fn the_check_catches_a_planted_fault() {
    use kiln_codegen::{CompileOptions, Fault};
    use kiln_ir::{Border, DType, Footprint, ReduceOp};
    use kiln_runtime::Tuning;
    let g = conformance::window(
        DType::F32,
        &[1, 1, 17, 33],
        ReduceOp::Max,
        &Footprint::scipy_box(&[3, 3], &[0, 0]),
        Border::Wrap,
    );
    let faulty = Executor::new(CpuBackend::new(Tuning {
        compile: CompileOptions {
            fault: Some(Fault::WrongBorderRightEdge),
            ..Default::default()
        },
        ..Tuning::default()
    }));
    let sound = Executor::new(CpuBackend::default());
    conformance::check(&[&sound], &g, "sound");
    let caught = std::panic::catch_unwind(|| conformance::check(&[&faulty], &g, "faulty"));
    assert!(caught.is_err(), "the planted fault went unnoticed");
}
