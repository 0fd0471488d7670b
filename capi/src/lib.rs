//! kiln-capi: the C ABI of kiln, declared in `include/kiln.h` (docs/C_API.md).
//!
//! Scope: create/free an engine, build a one-operator graph by registry name with typed
//! parameters or parse IR text, compile, run fused (or eager, the oracle) on caller buffers
//! with shapes and element strides, status codes plus a thread-local message, version query.
//!
//! Exactness: this layer computes nothing. Inputs are copied element by element (bit copies)
//! into kiln tensors and outputs copied back, so a C call gives exactly the bits of the same
//! graph run from Rust; `kiln_run_eager` is the eager oracle on the same copies.
//!
//! Limits: caller buffers are copied in and out (no zero-copy); kiln cannot check that a
//! caller's buffer really spans its shape and strides. No panic crosses the boundary: every
//! entry point runs under `catch_unwind` ([`status::guard`]).

#![allow(clippy::missing_safety_doc)]

pub mod buffer;
pub mod engine;
pub mod graph;
pub mod op;
pub mod status;

pub use buffer::KilnBuffer;
pub use engine::{KilnCompiled, KilnEngine};
pub use graph::{KilnGraph, KilnTensorInfo, KILN_MAX_RANK};
pub use op::KilnOp;
pub use status::KilnStatus;

use std::ffi::c_char;

/// The crate version as a NUL-terminated string, e.g. `"0.1.0"`.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

/// The library version, `"MAJOR.MINOR.PATCH"`, a static string.
#[no_mangle]
pub extern "C" fn kiln_version() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// The library version as `MAJOR * 10000 + MINOR * 100 + PATCH`, to compare with the header's
/// `KILN_VERSION_NUMBER`.
#[no_mangle]
pub extern "C" fn kiln_version_number() -> u32 {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    part(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + part(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + part(env!("CARGO_PKG_VERSION_PATCH"))
}
