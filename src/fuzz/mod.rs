//! `kiln fuzz`: a differential fuzzer of the fused engine against the eager oracle.
//!
//! [`fuzz`] generates random well-typed graphs with random shapes, layouts and data
//! ([`gen`], [`data`]), runs each through both paths ([`harness`]), shrinks every finding
//! ([`shrink`](mod@shrink)) and saves a replayable reproducer ([`corpus`]). [`replay`] re-runs saved
//! reproducers. Everything is deterministic for a given seed. See docs/FUZZING.md.

pub mod corpus;
pub mod data;
pub mod gen;
pub mod harness;
pub mod rng;
pub mod shrink;

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kiln_codegen::Fault;
use kiln_ir::Graph;
use kiln_runtime::Tensor;
use thiserror::Error;

pub use corpus::Reproducer;
pub use gen::{generate, generate_for, Case};
pub use harness::{FindingKind, Harness, KernelPaths, Verdict};
pub use shrink::{shrink, ShrinkLimits};

/// Errors of the fuzzer's file handling (reproducers, corpus directories).
#[derive(Debug, Error)]
pub enum FuzzError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A reproducer file is malformed.
    #[error("reproducer: {0}")]
    Format(String),
    /// A tensor could not be built from a reproducer's data.
    #[error(transparent)]
    Runtime(#[from] kiln_runtime::RuntimeError),
}

impl FuzzError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> FuzzError {
        FuzzError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Which executor the fuzzer compares against the eager oracle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The fused CPU engine (Cranelift).
    #[default]
    Cpu,
    /// The CUDA executor (PTX); needs the `cuda` feature and a GPU.
    Cuda,
}

impl Backend {
    /// Parses `cpu` or `cuda`.
    pub fn from_name(s: &str) -> Option<Backend> {
        match s {
            "cpu" => Some(Backend::Cpu),
            "cuda" => Some(Backend::Cuda),
            _ => None,
        }
    }

    /// `cpu` or `cuda`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        }
    }
}

/// Settings of a fuzz run.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    /// Number of cases to generate.
    pub cases: u64,
    /// Run seed; case `i` uses seed `rng::case_seed(seed, i)`.
    pub seed: u64,
    /// Most non-input nodes per generated graph.
    pub max_nodes: usize,
    /// Directory to write reproducers to (none: findings are only reported).
    pub corpus: Option<PathBuf>,
    /// Stop generating new cases after this much time.
    pub time_limit: Option<Duration>,
    /// Planted miscompilation (tests of the fuzzer itself).
    pub fault: Option<Fault>,
    /// Print a progress line to stderr.
    pub progress: bool,
    /// Stop after this many findings (none: run all cases).
    pub max_findings: Option<usize>,
    /// Limits for shrinking each finding.
    pub shrink: ShrinkLimits,
    /// The executor compared against eager (default: the fused CPU engine).
    pub backend: Backend,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            cases: 1000,
            seed: 1,
            max_nodes: 10,
            corpus: None,
            time_limit: None,
            fault: None,
            progress: false,
            max_findings: None,
            shrink: ShrinkLimits::default(),
            backend: Backend::Cpu,
        }
    }
}

/// One shrunk finding.
#[derive(Clone, Debug)]
pub struct Finding {
    /// What kind of disagreement.
    pub kind: FindingKind,
    /// Seed of the generated case.
    pub seed: u64,
    /// Case number within the run.
    pub case_index: u64,
    /// Description of the (shrunk) difference.
    pub detail: String,
    /// Node count of the generated graph before shrinking.
    pub original_nodes: usize,
    /// The shrunk case.
    pub case: Case,
    /// Where its reproducer was written, if a corpus directory was given.
    pub reproducer: Option<PathBuf>,
}

impl Finding {
    /// The reproducer of this finding under `fault`.
    pub fn reproducer_of(&self, fault: Option<Fault>) -> Reproducer {
        Reproducer {
            kind: self.kind,
            seed: self.seed,
            fault,
            detail: self.detail.clone(),
            case: self.case.clone(),
        }
    }
}

/// What a fuzz run did.
#[derive(Clone, Debug, Default)]
pub struct FuzzReport {
    /// Cases generated and checked (shrinking runs not counted).
    pub cases: u64,
    /// Kernels the fused engine compiled, and the code paths they took (so the fuzzer is
    /// seen to check those paths too).
    pub kernels: KernelPaths,
    /// Wall time of the run, shrinking included.
    pub elapsed: Duration,
    /// Bit mismatches and errors in only one path.
    pub mismatches: Vec<Finding>,
    /// Panics in either path.
    pub crashes: Vec<Finding>,
    /// Reproducer files written.
    pub reproducers: Vec<PathBuf>,
    /// Cases both paths rejected (not findings).
    pub invalid: u64,
    /// With a planted fault: findings that also show without the fault (not counted).
    pub not_the_fault: u64,
    /// The backend could not be started (nothing was run; not clean).
    pub backend_error: Option<String>,
}

impl FuzzReport {
    /// Cases per second over the whole run.
    pub fn cases_per_sec(&self) -> f64 {
        self.cases as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// True when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.mismatches.is_empty() && self.crashes.is_empty() && self.backend_error.is_none()
    }

    /// The end-of-run summary, several lines.
    pub fn summary(&self) -> String {
        if let Some(e) = &self.backend_error {
            return format!("backend unavailable: {e}\n");
        }
        let mut s = format!(
            "cases: {}\nkernels compiled: {} ({} sharing work between columns, {} of them carrying values between steps, {} with edge vectors, {} with dual stages)\nclean-input row blocks: {} (and {} with clear sign bits, {} that met less clean input and were recomputed)\nelapsed: {:.2} s ({:.0} graphs/s)\ninvalid (both paths failed): {}\nmismatches: {}\ncrashes: {}\n",
            self.cases,
            self.kernels.compiled,
            self.kernels.sharing_columns,
            self.kernels.carrying_values,
            self.kernels.edge_vectors,
            self.kernels.dual_stages,
            self.kernels.clean_blocks,
            self.kernels.nonneg_blocks,
            self.kernels.clean_blocks_aborted,
            self.elapsed.as_secs_f64(),
            self.cases_per_sec(),
            self.invalid,
            self.mismatches.len(),
            self.crashes.len()
        );
        if self.not_the_fault > 0 {
            s.push_str(&format!(
                "findings that also show without the planted fault (ignored): {}\n",
                self.not_the_fault
            ));
        }
        for f in self.mismatches.iter().chain(&self.crashes) {
            s.push_str(&format!(
                "  {} in case {} (seed {:#x}), shrunk {} -> {} nodes: {}\n",
                f.kind.name(),
                f.case_index,
                f.seed,
                f.original_nodes,
                f.case.node_count(),
                f.detail
            ));
        }
        if !self.reproducers.is_empty() {
            s.push_str("reproducers:\n");
            for p in &self.reproducers {
                s.push_str(&format!("  {}\n", p.display()));
            }
        }
        s
    }
}

/// Shrinking oracle backed by a harness: reproduces when the same kind of finding shows
/// (and, with a planted fault, when the clean engine passes on the case).
struct HarnessOracle<'h> {
    harness: &'h mut Harness,
    clean: Option<&'h mut Harness>,
    kind: FindingKind,
}

impl shrink::Oracle for HarnessOracle<'_> {
    fn reproduces(&mut self, case: &Case) -> bool {
        self.harness.check(case).finding_kind() == Some(self.kind)
            && self
                .clean
                .as_mut()
                .is_none_or(|c| c.check(case) == Verdict::Pass)
    }

    fn evaluate(&mut self, graph: &Graph, inputs: &[Tensor]) -> Option<Vec<Tensor>> {
        self.harness.oracle_run(graph, inputs)
    }
}

/// Shrinks a finding of `kind` on `case` with `harness`; returns the small case and its
/// verdict detail. With `clean` (a harness without the planted fault), candidates must also
/// pass there, so the shrunk case shows the fault and not some other bug.
pub fn shrink_finding(
    harness: &mut Harness,
    clean: Option<&mut Harness>,
    case: &Case,
    kind: FindingKind,
    limits: ShrinkLimits,
) -> (Case, String) {
    let small = shrink(
        case,
        &mut HarnessOracle {
            harness: &mut *harness,
            clean,
            kind,
        },
        limits,
    );
    let detail = match harness.check(&small) {
        Verdict::Finding(_, d) => d,
        other => format!("did not reproduce after shrinking: {other:?}"),
    };
    (small, detail)
}

/// Runs a fuzz campaign (see [`FuzzOptions`]).
pub fn fuzz(opts: &FuzzOptions) -> FuzzReport {
    let start = Instant::now();
    let mut report = FuzzReport::default();
    let mut harness = match Harness::for_backend(opts.backend, opts.fault) {
        Ok(h) => h,
        Err(e) => {
            report.backend_error = Some(e);
            return report;
        }
    };
    // With a planted fault, a finding counts only if the clean engine passes on the case.
    let mut clean = match opts.fault {
        None => None,
        Some(_) => match Harness::for_backend(opts.backend, None) {
            Ok(h) => Some(h),
            Err(e) => {
                report.backend_error = Some(e);
                return report;
            }
        },
    };
    let mut last_progress = Instant::now();
    // On a terminal the line is redrawn in place every 250 ms; in a log (CI) a plain line is
    // written every 5 s instead, so the log stays readable.
    let terminal = std::io::stderr().is_terminal();
    let (every, lead, tail) = if terminal {
        (Duration::from_millis(250), "\r", "   ")
    } else {
        (Duration::from_secs(5), "", "\n")
    };
    for i in 0..opts.cases {
        if opts.time_limit.is_some_and(|t| start.elapsed() >= t) {
            break;
        }
        if opts
            .max_findings
            .is_some_and(|m| report.mismatches.len() + report.crashes.len() >= m)
        {
            break;
        }
        let seed = rng::case_seed(opts.seed, i);
        // Extern line functions are host code: the CUDA backend refuses them by design.
        let case = generate_for(seed, opts.max_nodes, opts.backend != Backend::Cuda);
        report.cases += 1;
        match harness.check(&case) {
            Verdict::Pass => {}
            Verdict::Invalid(_) => report.invalid += 1,
            Verdict::Finding(kind, _) => {
                if let Some(c) = clean.as_mut() {
                    if c.check(&case) != Verdict::Pass {
                        report.not_the_fault += 1;
                        continue;
                    }
                }
                let (small, detail) =
                    shrink_finding(&mut harness, clean.as_mut(), &case, kind, opts.shrink);
                let mut finding = Finding {
                    kind,
                    seed,
                    case_index: i,
                    detail,
                    original_nodes: case.node_count(),
                    case: small,
                    reproducer: None,
                };
                if let Some(dir) = &opts.corpus {
                    match finding.reproducer_of(opts.fault).save(dir) {
                        Ok(p) => {
                            report.reproducers.push(p.clone());
                            finding.reproducer = Some(p);
                        }
                        Err(e) => eprintln!("kiln fuzz: could not save a reproducer: {e}"),
                    }
                }
                if kind == FindingKind::Crash {
                    report.crashes.push(finding);
                } else {
                    report.mismatches.push(finding);
                }
            }
        }
        if opts.progress && last_progress.elapsed() >= every {
            last_progress = Instant::now();
            let rate = report.cases as f64 / start.elapsed().as_secs_f64().max(1e-9);
            eprint!(
                "{lead}fuzz: {}/{} cases, {rate:.0}/s, {} kernels, {} mismatches, {} crashes{tail}",
                report.cases,
                opts.cases,
                harness.kernel_paths().compiled,
                report.mismatches.len(),
                report.crashes.len()
            );
            let _ = std::io::stderr().flush();
        }
    }
    if opts.progress && terminal {
        eprintln!();
    }
    report.kernels = harness.kernel_paths();
    report.elapsed = start.elapsed();
    report
}

/// Checks the case generated from one seed (used by the cargo-fuzz target).
pub fn check_seed(harness: &mut Harness, seed: u64, max_nodes: usize) -> Verdict {
    harness.check(&generate(seed, max_nodes))
}

/// Result of replaying one reproducer.
#[derive(Clone, Debug)]
pub struct ReplayResult {
    /// The file.
    pub path: PathBuf,
    /// The kind recorded in the file.
    pub recorded: FindingKind,
    /// The fault recorded in the file.
    pub recorded_fault: Option<Fault>,
    /// What happens now.
    pub verdict: Verdict,
}

/// What a replay did.
#[derive(Clone, Debug, Default)]
pub struct ReplayReport {
    /// One entry per file, in name order.
    pub results: Vec<ReplayResult>,
}

impl ReplayReport {
    /// The files that still show a finding.
    pub fn failures(&self) -> Vec<&ReplayResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Finding(..)))
            .collect()
    }

    /// True when no file shows a finding (fused == eager or both reject, no crash).
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// One line per file and a total.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for r in &self.results {
            let v = match &r.verdict {
                Verdict::Pass => "pass".to_string(),
                Verdict::Invalid(m) => format!("pass (both paths reject: {m})"),
                Verdict::Finding(k, d) => format!("FAIL {}: {d}", k.name()),
            };
            s.push_str(&format!("{}: {v}\n", r.path.display()));
        }
        s.push_str(&format!(
            "replayed {} reproducers, {} failing\n",
            self.results.len(),
            self.failures().len()
        ));
        s
    }
}

/// Re-runs the reproducer `path` (a file, or every `*.repro` file of a directory) with
/// `fault` planted (normally `None`).
pub fn replay(path: &Path, fault: Option<Fault>) -> Result<ReplayReport, FuzzError> {
    let files = corpus::reproducer_files(path)?;
    let mut harness = Harness::new(fault);
    let mut report = ReplayReport::default();
    for f in files {
        let r = Reproducer::load(&f)?;
        let verdict = harness.check(&r.case);
        report.results.push(ReplayResult {
            path: f,
            recorded: r.kind,
            recorded_fault: r.fault,
            verdict,
        });
    }
    Ok(report)
}
