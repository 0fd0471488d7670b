//! Argument parsing and dispatch for the `kiln` binary. Each subcommand lives in its own file.

mod aot;
mod bench;
mod demo;
mod dump;
mod fuzz;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Top-level command line.
#[derive(Parser, Debug)]
#[command(
    name = "kiln",
    version,
    about = "JIT kernel compiler and fusion engine for image operators"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Median 3x3, median 5x5 and grey_opening 3x3 on a generated 2048² image with NaN/Inf:
    /// eager vs fused timings and a bit-exactness check.
    Demo(demo::DemoArgs),
    /// Run one operator on a .npy file.
    Run(run::RunArgs),
    /// Print an operator's graph before and after each pass, its fused groups and kernels.
    Dump(dump::DumpArgs),
    /// Differential fuzzing of fused against eager on random graphs.
    Fuzz(fuzz::FuzzArgs),
    /// Time the fused kernels on the benchmark workloads (median, copy floor, compile).
    Bench(bench::BenchArgs),
    /// Inspect and check kernel cache directories and bundles (`ls`, `verify`).
    Aot(aot::AotArgs),
    /// Manage the kernel cache (`prune`).
    Cache(aot::CacheArgs),
}

/// A CLI failure: printed as one line, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments or input data.
    #[error("{0}")]
    Usage(String),
    /// An operator rejected its parameters.
    #[error(transparent)]
    Op(#[from] kiln::ops::OpError),
    /// Reading or writing a .npy file failed.
    #[error(transparent)]
    Npy(#[from] kiln::runtime::npy::NpyError),
    /// Execution failed.
    #[error(transparent)]
    Runtime(#[from] kiln::RuntimeError),
    /// Code generation failed.
    #[error(transparent)]
    Codegen(#[from] kiln::codegen::CodegenError),
    /// The IR rejected a graph.
    #[error(transparent)]
    Build(#[from] kiln::ir::BuildError),
}

/// Runs the chosen subcommand.
pub fn dispatch(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::Run(a) => run::run(a),
        Command::Dump(a) => dump::run(a),
        Command::Fuzz(a) => fuzz::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Aot(a) => aot::run_aot(a),
        Command::Cache(a) => aot::run_cache(a),
    }
}

/// Parses `name=value` parameters.
pub fn parse_params(params: &[String]) -> Result<Vec<(String, String)>, CliError> {
    params
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| CliError::Usage(format!("parameter '{p}' is not name=value")))
        })
        .collect()
}
