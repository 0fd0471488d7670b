//! `kiln fuzz`: differential fuzzing of fused against eager.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use kiln::fuzz::{fuzz, replay, Backend, FuzzOptions};

use super::CliError;

/// Arguments of `kiln fuzz`.
#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// Number of random cases.
    #[arg(long, default_value_t = 1000)]
    cases: u64,
    /// Seed; the same seed gives the same cases.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Largest number of nodes in a generated graph.
    #[arg(long, default_value_t = 12)]
    max_nodes: usize,
    /// Directory for shrunk reproducers.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Re-run reproducer files (a file or a directory) instead of generating cases.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// Executor compared against eager: the fused CPU engine, or CUDA (needs a build with
    /// `--features cuda` and a GPU).
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "cuda"])]
    backend: String,
}

/// Runs `kiln fuzz`; exit code 1 when anything was found.
pub fn run(a: FuzzArgs) -> Result<ExitCode, CliError> {
    let backend = Backend::from_name(&a.backend)
        .ok_or_else(|| CliError::Usage(format!("unknown backend '{}'", a.backend)))?;
    if backend == Backend::Cuda && !cfg!(feature = "cuda") {
        return Err(CliError::Usage(
            "--backend cuda: built without the cuda feature".into(),
        ));
    }
    if let Some(path) = a.replay {
        if backend != Backend::Cpu {
            return Err(CliError::Usage(
                "--replay runs on the cpu backend only".into(),
            ));
        }
        let report = replay(&path, None).map_err(|e| CliError::Usage(e.to_string()))?;
        println!("{}", report.summary());
        return Ok(if report.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if a.max_nodes == 0 {
        return Err(CliError::Usage("--max-nodes must be at least 1".into()));
    }
    let opts = FuzzOptions {
        cases: a.cases,
        seed: a.seed,
        max_nodes: a.max_nodes,
        corpus: a.corpus,
        time_limit: a.time_limit.map(Duration::from_secs_f64),
        fault: None,
        progress: true,
        backend,
        ..FuzzOptions::default()
    };
    let report = fuzz(&opts);
    if let Some(e) = &report.backend_error {
        return Err(CliError::Usage(format!(
            "--backend {}: {e}",
            backend.name()
        )));
    }
    println!("{}", report.summary());
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
