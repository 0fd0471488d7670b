//! The `kiln` command line: `demo`, `run`, `dump`, `fuzz`, `bench`.
//!
//! Every failure is one `kiln: error: ...` line on stderr and exit code 2; a command-line
//! usage error may add one `usage: ...` hint line. `--help` and `--version` print as usual.

mod cli;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

fn main() -> ExitCode {
    // A write past `ulimit -f` must fail with an error (and the atomic write clean up), not
    // kill the process.
    kiln::runtime::atomic_file::ignore_file_size_signal();
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => return usage_error(&e),
    };
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kiln: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints a clap error as one `kiln: error:` line plus at most one usage hint line (exit 2);
/// help and version requests print in full (exit 0).
fn usage_error(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.to_string();
    let (message, usage) = cli::one_line_usage_error(&text);
    eprintln!("kiln: error: {message}");
    if let Some(u) = usage {
        eprintln!("{u}");
    }
    ExitCode::from(2)
}
