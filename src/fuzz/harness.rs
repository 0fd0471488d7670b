//! The differential harness: runs a case through the eager oracle and a candidate executor
//! (the fused engine, or the runtime's one executor over the CUDA backend), each under
//! `catch_unwind`, and compares every output bit for bit.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::Graph;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::Tensor;

use super::gen::Case;

/// What kind of disagreement a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// Both paths ran and some output differs in its bits (or in dtype/shape/count).
    Mismatch,
    /// Exactly one path returned an error.
    OneSidedError,
    /// A path panicked.
    Crash,
}

impl FindingKind {
    /// Name used in reports and reproducer headers.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::Mismatch => "mismatch",
            FindingKind::OneSidedError => "one-sided-error",
            FindingKind::Crash => "crash",
        }
    }

    /// Parses [`FindingKind::name`].
    pub fn from_name(s: &str) -> Option<FindingKind> {
        Some(match s {
            "mismatch" => FindingKind::Mismatch,
            "one-sided-error" => FindingKind::OneSidedError,
            "crash" => FindingKind::Crash,
            _ => return None,
        })
    }
}

/// The result of running one case through both paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Both paths agree bit for bit.
    Pass,
    /// Both paths rejected the case (or its data could not be built): not a finding.
    Invalid(String),
    /// A disagreement, with a description.
    Finding(FindingKind, String),
}

impl Verdict {
    /// The finding kind, if this verdict is a finding.
    pub fn finding_kind(&self) -> Option<FindingKind> {
        match self {
            Verdict::Finding(k, _) => Some(*k),
            _ => None,
        }
    }
}

/// Kernels an executor compiled, and how many took code paths the fuzzer must be seen to
/// reach (so a clean run is evidence for them too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelPaths {
    /// Kernels compiled.
    pub compiled: usize,
    /// Of those, kernels sharing work between neighbouring columns.
    pub sharing_columns: usize,
    /// Of those, kernels carrying values from one step of the shared loop to the next.
    pub carrying_values: usize,
    /// Of those, kernels running the first and last columns of rows as edge vectors.
    pub edge_vectors: usize,
    /// Of those, kernels whose max stages run the code of min stages on negated values.
    pub dual_stages: usize,
    /// Row blocks the tiered compiles' clean-input specialisations computed (their input
    /// rows checked clean).
    pub clean_blocks: usize,
    /// Row blocks the specialisations for clean inputs with clear sign bits computed.
    pub nonneg_blocks: usize,
    /// Row blocks that met an unclean input row in a specialisation and were computed
    /// again by the general kernel.
    pub clean_blocks_aborted: usize,
}

/// Something that runs graphs: the eager oracle, the fused engine, or a test double.
pub trait Executor {
    /// Runs `graph` on `inputs`, giving its outputs or an error message.
    fn run(&mut self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
    /// Kernels compiled so far, and the code paths they took (zero for interpreters).
    fn kernel_paths(&self) -> KernelPaths {
        KernelPaths::default()
    }
    /// Called after the executor panicked, so it can drop state a panic may have broken.
    fn reset(&mut self) {}
}

/// The eager oracle ([`kiln_runtime::eager::run`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Eager;

impl Executor for Eager {
    fn run(&mut self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        kiln_runtime::eager::run(graph, inputs).map_err(|e| e.to_string())
    }
}

/// The fused engine ([`kiln_runtime::fused::Engine`]) with optional planted fault. One
/// engine serves every case, so its kernel cache is shared. Each case runs twice: on the
/// first compiles (an engine without tiering) and on the tiered ones once they landed
/// (bigger vector steps, the clean-input specialisation); the two must agree bit for bit.
pub struct Fused {
    fault: Option<Fault>,
    engine: kiln_runtime::fused::Engine,
    first: kiln_runtime::fused::Engine,
    /// Kernels compiled by engines dropped after a panic.
    before: KernelPaths,
}

impl Fused {
    /// A fresh engine compiling with `fault` planted (`None`: normal code).
    pub fn new(fault: Option<Fault>) -> Fused {
        let tuning = kiln_runtime::Tuning {
            compile: CompileOptions {
                fault,
                ..Default::default()
            },
            ..Default::default()
        };
        Fused {
            fault,
            engine: kiln_runtime::fused::Engine::with_tuning(tuning.clone()),
            first: kiln_runtime::fused::Engine::with_tuning(kiln_runtime::Tuning {
                tiering: false,
                ..tuning
            }),
            before: KernelPaths::default(),
        }
    }
}

impl Executor for Fused {
    fn run(&mut self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let first = self.first.run(graph, inputs).map_err(|e| e.to_string())?;
        let compiled = self.engine.compile(graph).map_err(|e| e.to_string())?;
        if !compiled.wait_for_upgrades(std::time::Duration::from_secs(120)) {
            return Err("a background compile did not finish in 120 s".into());
        }
        let tiered = compiled
            .run(&self.engine, inputs)
            .map_err(|e| e.to_string())?;
        for (k, (a, b)) in first.iter().zip(&tiered).enumerate() {
            if let Some(d) = first_difference(a, b) {
                return Err(format!(
                    "output {k}: first and tiered compiles differ at {d}"
                ));
            }
        }
        Ok(first)
    }

    fn kernel_paths(&self) -> KernelPaths {
        let st = self.first.stats();
        let tiered = self.engine.stats();
        KernelPaths {
            compiled: self.before.compiled + st.kernels_compiled,
            sharing_columns: self.before.sharing_columns + st.kernels_sharing_columns,
            carrying_values: self.before.carrying_values + st.kernels_carrying_values,
            edge_vectors: self.before.edge_vectors + st.kernels_with_edge_vectors,
            dual_stages: self.before.dual_stages + st.kernels_with_dual_stages,
            clean_blocks: self.before.clean_blocks + tiered.clean_blocks,
            nonneg_blocks: self.before.nonneg_blocks + tiered.nonneg_blocks,
            clean_blocks_aborted: self.before.clean_blocks_aborted + tiered.clean_blocks_aborted,
        }
    }

    fn reset(&mut self) {
        let before = self.kernel_paths();
        *self = Fused::new(self.fault);
        self.before = before;
    }
}

/// The runtime's executor over the CUDA backend ([`kiln_runtime::backend::cuda`]) on
/// device 0, with optional planted fault. Only with the `cuda` feature.
#[cfg(feature = "cuda")]
pub struct Cuda {
    exec: kiln_runtime::executor::Executor<kiln_runtime::backend::cuda::CudaBackend>,
}

#[cfg(feature = "cuda")]
impl Cuda {
    /// Opens device 0; a one-line error without a driver or GPU.
    pub fn new(fault: Option<Fault>) -> Result<Cuda, String> {
        let options = CompileOptions {
            fault,
            ..Default::default()
        };
        let backend = kiln_runtime::backend::cuda::CudaBackend::open(0, options)
            .map_err(|e| e.to_string())?;
        Ok(Cuda {
            exec: kiln_runtime::executor::Executor::new(backend),
        })
    }
}

#[cfg(feature = "cuda")]
impl Executor for Cuda {
    fn run(&mut self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        self.exec.run(graph, inputs).map_err(|e| e.to_string())
    }
}

thread_local! {
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for panics the harness catches on this
/// thread, and defers to the previous hook otherwise.
fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                prev(info);
            }
        }));
    });
}

/// Text of a panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".into()
    }
}

/// Runs `f`, turning a panic into `Err(message)`, without printing it.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    QUIET.with(|q| q.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    r.map_err(|p| panic_message(&*p))
}

/// Compares an oracle and a candidate executor on cases.
pub struct Harness {
    oracle: Box<dyn Executor>,
    candidate: Box<dyn Executor>,
    /// Number of cases checked (shrinking steps included).
    pub runs: u64,
}

impl Harness {
    /// Eager against the fused engine with `fault` planted.
    pub fn new(fault: Option<Fault>) -> Harness {
        Harness::with_executors(Box::new(Eager), Box::new(Fused::new(fault)))
    }

    /// Eager against the executor of `backend` with `fault` planted; an error (one line)
    /// when the backend cannot start (no GPU, or built without the `cuda` feature).
    pub fn for_backend(backend: super::Backend, fault: Option<Fault>) -> Result<Harness, String> {
        match backend {
            super::Backend::Cpu => Ok(Harness::new(fault)),
            #[cfg(feature = "cuda")]
            super::Backend::Cuda => Ok(Harness::with_executors(
                Box::new(Eager),
                Box::new(Cuda::new(fault)?),
            )),
            #[cfg(not(feature = "cuda"))]
            super::Backend::Cuda => Err("built without the cuda feature".into()),
        }
    }

    /// Any oracle against any candidate (tests use doubles).
    pub fn with_executors(oracle: Box<dyn Executor>, candidate: Box<dyn Executor>) -> Harness {
        Harness {
            oracle,
            candidate,
            runs: 0,
        }
    }

    /// Kernels the candidate compiled so far, and the code paths they took.
    pub fn kernel_paths(&self) -> KernelPaths {
        self.candidate.kernel_paths()
    }

    /// Runs the oracle alone on a graph (used by the shrinker to turn a node into an input).
    pub fn oracle_run(&mut self, graph: &Graph, inputs: &[Tensor]) -> Option<Vec<Tensor>> {
        let oracle = &mut self.oracle;
        guarded(|| oracle.run(graph, inputs)).ok()?.ok()
    }

    /// Runs `case` through both paths and compares.
    pub fn check(&mut self, case: &Case) -> Verdict {
        self.runs += 1;
        let mut tensors = Vec::with_capacity(case.inputs.len());
        for inp in &case.inputs {
            match inp.to_tensor() {
                Ok(t) => tensors.push(t),
                Err(e) => return Verdict::Invalid(format!("input data: {e}")),
            }
        }
        let graph = &case.graph;
        let oracle = &mut self.oracle;
        let expected = guarded(|| oracle.run(graph, &tensors));
        let candidate = &mut self.candidate;
        let got = guarded(|| candidate.run(graph, &tensors));
        let expected = match expected {
            Ok(r) => r,
            Err(msg) => {
                self.oracle.reset();
                return Verdict::Finding(FindingKind::Crash, format!("eager panicked: {msg}"));
            }
        };
        let got = match got {
            Ok(r) => r,
            Err(msg) => {
                self.candidate.reset();
                return Verdict::Finding(FindingKind::Crash, format!("fused panicked: {msg}"));
            }
        };
        match (expected, got) {
            (Err(a), Err(b)) => Verdict::Invalid(format!("both failed: eager: {a}; fused: {b}")),
            (Err(a), Ok(_)) => Verdict::Finding(
                FindingKind::OneSidedError,
                format!("eager failed ({a}), fused succeeded"),
            ),
            (Ok(_), Err(b)) => Verdict::Finding(
                FindingKind::OneSidedError,
                format!("fused failed ({b}), eager succeeded"),
            ),
            (Ok(x), Ok(y)) => {
                if x.len() != y.len() {
                    return Verdict::Finding(
                        FindingKind::Mismatch,
                        format!("eager gave {} outputs, fused {}", x.len(), y.len()),
                    );
                }
                for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                    if let Some(d) = first_difference(a, b) {
                        return Verdict::Finding(
                            FindingKind::Mismatch,
                            format!(
                                "output {i} (node {}): {d} (eager vs fused)",
                                graph.outputs[i]
                            ),
                        );
                    }
                }
                Verdict::Pass
            }
        }
    }
}
