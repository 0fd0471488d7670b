//! The conformance suite (`conformance/`) on CUDA (feature `cuda`): the executor over the
//! CUDA backend on device 0. Without a driver or a GPU every test prints SKIP with the
//! reason and checks nothing.
#![cfg(feature = "cuda")]

mod common;
#[macro_use]
mod conformance;

use conformance::Runner;
use kiln_codegen::CompileOptions;
use kiln_runtime::backend::cuda::CudaBackend;
use kiln_runtime::executor::Executor;

fn runners() -> Option<Vec<Box<dyn Runner>>> {
    match CudaBackend::open(0, CompileOptions::default()) {
        Ok(b) => Some(vec![Box::new(Executor::new(b))]),
        Err(e) => {
            eprintln!("SKIP: CUDA conformance not run, no GPU here: {e}");
            None
        }
    }
}

conformance_tests!(runners);
