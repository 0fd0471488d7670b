//! Engines (`kiln_engine`) and compiled graphs (`kiln_compiled`): compile once, run fused
//! kernels on caller buffers any number of times, from any number of threads.
//!
//! Exactness: runs are `CompiledGraph::run`, which the runtime's tests hold bit-identical to
//! the eager oracle; this layer only copies bits in and out (see `buffer`).
//! Limits: a compiled graph accepts only the input types it was compiled for.

use std::sync::Arc;

use kiln_ir::TensorType;
use kiln_runtime::fused::{CompiledGraph, Engine};

use crate::buffer::{read_inputs, KilnBuffer, Outputs};
use crate::graph::{graph_ref, io_types, write_out, KilnGraph};
use crate::status::{free_boxed, guard, Failure, KilnStatus};

/// An engine: kernel cache and threads (`kiln_engine` in kiln.h).
pub struct KilnEngine {
    engine: Arc<Engine>,
}

/// A graph compiled into fused kernels (`kiln_compiled`); it keeps its engine alive.
pub struct KilnCompiled {
    engine: Arc<Engine>,
    compiled: CompiledGraph,
    inputs: Vec<TensorType>,
    outputs: Vec<TensorType>,
}

/// Handles are shared between threads: the engine and compiled graphs must be `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Engine>();
    shareable::<CompiledGraph>();
};

fn new_engine(engine: Engine, out: *mut *mut KilnEngine) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null("out"));
    }
    let h = Box::into_raw(Box::new(KilnEngine {
        engine: Arc::new(engine),
    }));
    // SAFETY: checked non-NULL; writable by the caller's contract.
    unsafe { out.write(h) };
    Ok(())
}

/// Creates an engine running on the process-wide thread pool (`*out`, freed with
/// `kiln_engine_free`).
#[no_mangle]
pub unsafe extern "C" fn kiln_engine_new(out: *mut *mut KilnEngine) -> KilnStatus {
    guard(|| new_engine(Engine::new(), out))
}

/// Creates an engine with its own pool of `threads` threads (0: one per core).
#[no_mangle]
pub unsafe extern "C" fn kiln_engine_new_with_threads(
    threads: usize,
    out: *mut *mut KilnEngine,
) -> KilnStatus {
    guard(|| {
        if threads > 4096 {
            return Err(Failure::new(
                KilnStatus::InvalidArgument,
                format!("{threads} threads requested, at most 4096"),
            ));
        }
        new_engine(Engine::new().with_threads(threads), out)
    })
}

/// Frees an engine; NULL is ignored. Compiled graphs made with it stay usable.
#[no_mangle]
pub unsafe extern "C" fn kiln_engine_free(engine: *mut KilnEngine) {
    // SAFETY: the handle contract of `free_boxed` is this function's own.
    unsafe { free_boxed(engine) }
}

/// Compiles `graph` into fused kernels (`*out`, freed with `kiln_compiled_free`). The graph
/// is not consumed and may be freed at once.
#[no_mangle]
pub unsafe extern "C" fn kiln_compile(
    engine: *const KilnEngine,
    graph: *const KilnGraph,
    out: *mut *mut KilnCompiled,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: NULL or a live engine handle.
        let engine = unsafe { engine.as_ref() }.ok_or_else(|| Failure::null("engine"))?;
        // SAFETY: caller contract on `graph`.
        let g = unsafe { graph_ref(graph) }?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        let compiled = engine.engine.compile(g)?;
        let h = Box::into_raw(Box::new(KilnCompiled {
            engine: Arc::clone(&engine.engine),
            compiled,
            inputs: io_types(g, false),
            outputs: io_types(g, true),
        }));
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(h) };
        Ok(())
    })
}

/// Frees a compiled graph; NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn kiln_compiled_free(compiled: *mut KilnCompiled) {
    // SAFETY: the handle contract of `free_boxed` is this function's own.
    unsafe { free_boxed(compiled) }
}

/// Writes the number of fused kernels of a compiled graph to `*count`.
#[no_mangle]
pub unsafe extern "C" fn kiln_compiled_kernel_count(
    compiled: *const KilnCompiled,
    count: *mut usize,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: NULL or a live handle.
        let c = unsafe { compiled.as_ref() }.ok_or_else(|| Failure::null("compiled"))?;
        // SAFETY: caller contract on `count`.
        unsafe { write_out(count, c.compiled.kernel_count(), "count") }
    })
}

/// Runs the fused kernels on the input buffers and writes the output buffers. Every buffer
/// is checked before anything runs; inputs are copied first, so outputs may alias inputs.
#[no_mangle]
pub unsafe extern "C" fn kiln_run(
    compiled: *const KilnCompiled,
    inputs: *const KilnBuffer,
    num_inputs: usize,
    outputs: *const KilnBuffer,
    num_outputs: usize,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: NULL or a live handle.
        let c = unsafe { compiled.as_ref() }.ok_or_else(|| Failure::null("compiled"))?;
        // SAFETY: caller contract: the buffers describe valid memory.
        let outs = unsafe { Outputs::new(outputs, num_outputs, &c.outputs) }?;
        // SAFETY: as above.
        let ins = unsafe { read_inputs(inputs, num_inputs, &c.inputs) }?;
        let result = c.compiled.run(&c.engine, &ins)?;
        outs.write(&result)
    })
}
