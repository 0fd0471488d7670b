//! The `kiln` command line: `demo`, `run`, `dump`, `fuzz`, `bench`.
//!
//! Every failure is one `kiln: error: ...` line on stderr and exit code 2; a command-line
//! usage error may add one `usage: ...` hint line. `--help` and `--version` print as usual.

mod cli;

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
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
    quiet_on_closed_stdout();
    match panic::catch_unwind(AssertUnwindSafe(|| cli::dispatch(args))) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("kiln: error: {e}");
            ExitCode::from(2)
        }
        // The reader went away (`kiln demo | head`): nothing left to tell anyone.
        Err(payload) if is_closed_stdout(payload.as_ref()) => ExitCode::SUCCESS,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// `println!` panics when stdout is a pipe whose reader has exited. That panic is silenced
/// here and ends the process with exit code 0 (see `main`), as `kiln dump` does with its own
/// writer; every other panic is reported by the default hook, unchanged.
fn quiet_on_closed_stdout() {
    let default = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !is_closed_stdout(info.payload()) {
            default(info)
        }
    }));
}

/// Whether a panic payload is std's "failed printing to stdout" on a closed pipe (EPIPE).
fn is_closed_stdout(payload: &(dyn Any + Send)) -> bool {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    msg.starts_with("failed printing to stdout")
        && (msg.contains("Broken pipe") || msg.contains("os error 32"))
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
