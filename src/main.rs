//! The `kiln` command line: `demo`, `run`, `dump`, `fuzz`, `bench`.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kiln: error: {e}");
            ExitCode::from(2)
        }
    }
}
