//! Argument parsing and dispatch for the `kiln` binary. Each subcommand lives in its own file.

mod aot;
mod aot_build;
mod aot_emit;
mod aot_sign;
mod bench;
mod bench_aot;
mod demo;
mod dump;
mod fuzz;
mod manifest;
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
    /// Build, inspect and check kernel cache directories and bundles (`build`, `ls`, `verify`).
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
    /// Writing to standard output failed (other than the reader closing the pipe).
    #[error("writing to standard output: {0}")]
    Stdout(std::io::Error),
    /// The IR rejected a graph.
    #[error(transparent)]
    Build(#[from] kiln::ir::BuildError),
    /// An operator program failed at run time.
    #[error(transparent)]
    Program(#[from] kiln::ops::RunError),
}

/// Turns clap's rendered error text into one message line and at most one usage hint line:
/// the `error:` line with the indented lines that complete it (missing arguments, possible
/// values) folded in, and the `Usage:` line. Tips and the "For more information" trailer are
/// dropped. Text without an `error:` line (clap's help for a missing subcommand) becomes
/// "a subcommand is required".
pub fn one_line_usage_error(text: &str) -> (String, Option<String>) {
    let mut lines = text.lines();
    let mut message = String::new();
    for line in lines.by_ref() {
        if let Some(rest) = line.strip_prefix("error: ") {
            message.push_str(rest.trim().trim_end_matches(':'));
            break;
        }
    }
    let mut details = Vec::new();
    if !message.is_empty() {
        for line in lines.by_ref() {
            if line.trim().is_empty() {
                break;
            }
            details.push(line.trim());
        }
    }
    if !details.is_empty() {
        message = format!("{message}: {}", details.join(", "));
    }
    if message.is_empty() {
        message = "a subcommand is required".to_string();
    }
    let usage = text
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .map(|u| format!("usage: {} (see --help)", u.trim()));
    (message, usage)
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
