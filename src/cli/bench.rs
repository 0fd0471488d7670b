//! `kiln bench`: in-process timing of the fused kernels (owned by the benchmark work).

use std::process::ExitCode;

use clap::Args;

use super::CliError;

/// Arguments of `kiln bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {}

/// Runs `kiln bench`.
pub fn run(_a: BenchArgs) -> Result<ExitCode, CliError> {
    Err(CliError::Usage("kiln bench is not implemented yet".into()))
}
