//! Graphs (`kiln_graph`): parsed from IR text (docs/IR_TEXT.md), printed back, and queried for
//! the dtypes and shapes of their inputs and outputs; the eager oracle (`kiln_run_eager`).
//!
//! Exactness: `kiln_run_eager` is `kiln_runtime::eager::run` on bit copies of the buffers.
//! Limits: graphs are shape-bound (their input types are part of the graph).

use std::ffi::{c_char, c_int, CString};

use kiln_ir::{Graph, TensorType};

use crate::buffer::{dtype_code, read_inputs, read_str, KilnBuffer, Outputs};
use crate::status::{free_boxed, guard, guard_void, Failure, KilnStatus};

/// Most axes a tensor may have: batch, channel and 8 spatial axes.
pub const KILN_MAX_RANK: usize = 2 + kiln_ir::types::MAX_SPATIAL_DIMS;

/// An owned, validated graph (`kiln_graph` in kiln.h).
pub struct KilnGraph {
    /// The graph.
    pub graph: Graph,
}

/// The dtype and shape of one graph input or output (`kiln_tensor_info`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KilnTensorInfo {
    /// Element type (`kiln_dtype`).
    pub dtype: c_int,
    /// Number of axes.
    pub rank: usize,
    /// The first `rank` entries are the extents; the rest are 0.
    pub shape: [usize; KILN_MAX_RANK],
}

impl KilnTensorInfo {
    fn of(ty: &TensorType) -> Result<KilnTensorInfo, Failure> {
        let mut shape = [0usize; KILN_MAX_RANK];
        if ty.shape.len() > KILN_MAX_RANK {
            return Err(Failure::new(
                KilnStatus::Internal,
                format!("graph tensor of rank {}", ty.shape.len()),
            ));
        }
        shape[..ty.shape.len()].copy_from_slice(&ty.shape);
        Ok(KilnTensorInfo {
            dtype: dtype_code(ty.dtype),
            rank: ty.shape.len(),
            shape,
        })
    }
}

/// Borrows the graph behind a handle.
///
/// # Safety
/// `g`, when not NULL, must be a live handle from this library.
pub unsafe fn graph_ref<'a>(g: *const KilnGraph) -> Result<&'a Graph, Failure> {
    // SAFETY: caller contract: NULL or a live `KilnGraph`.
    unsafe { g.as_ref() }
        .map(|g| &g.graph)
        .ok_or_else(|| Failure::null("graph"))
}

/// Writes `value` through the out-pointer `out` (named `what`), failing on NULL.
///
/// # Safety
/// `out`, when not NULL, must be valid for a write of `T`.
pub unsafe fn write_out<T>(out: *mut T, value: T, what: &str) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL and writable by the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Boxes `graph` into a handle written through `out`.
///
/// # Safety
/// `out` must be NULL (an error) or valid for a write.
pub unsafe fn hand_out_graph(graph: Graph, out: *mut *mut KilnGraph) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::null("out"));
    }
    let h = Box::into_raw(Box::new(KilnGraph { graph }));
    // SAFETY: checked non-NULL; writable by the caller's contract.
    unsafe { out.write(h) };
    Ok(())
}

/// Parses IR text into a new graph (`*out`, freed with `kiln_graph_free`).
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_parse(
    text: *const c_char,
    out: *mut *mut KilnGraph,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract: `text` is NULL or NUL-terminated.
        let text = unsafe { read_str(text, "text") }?;
        let graph = kiln_ir::parser::parse(text)?;
        // SAFETY: caller contract on `out`.
        unsafe { hand_out_graph(graph, out) }
    })
}

/// Frees a graph; NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_free(graph: *mut KilnGraph) {
    // SAFETY: the handle contract of `free_boxed` is this function's own.
    unsafe { free_boxed(graph) }
}

/// The graph as IR text in a new string (`*out`, freed with `kiln_string_free`).
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_to_text(
    graph: *const KilnGraph,
    out: *mut *mut c_char,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract on `graph`.
        let g = unsafe { graph_ref(graph) }?;
        let text = CString::new(kiln_ir::printer::print(g))
            .map_err(|_| Failure::new(KilnStatus::Internal, "IR text holds a NUL byte"))?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        // SAFETY: checked non-NULL; writable by the caller's contract.
        unsafe { out.write(text.into_raw()) };
        Ok(())
    })
}

/// Frees a string returned by kiln; NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn kiln_string_free(s: *mut c_char) {
    guard_void(|| {
        if !s.is_null() {
            // SAFETY: a non-NULL string came from `CString::into_raw` and is freed once.
            drop(unsafe { CString::from_raw(s) });
        }
    })
}

/// Writes the number of inputs or outputs of `graph` to `*out`.
unsafe fn count(graph: *const KilnGraph, outputs: bool, out: *mut usize) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract on `graph`.
        let g = unsafe { graph_ref(graph) }?;
        let n = if outputs {
            g.outputs.len()
        } else {
            g.inputs.len()
        };
        // SAFETY: caller contract on `out`.
        unsafe { write_out(out, n, "count") }
    })
}

/// Writes the number of graph inputs to `*count`.
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_num_inputs(
    graph: *const KilnGraph,
    count_out: *mut usize,
) -> KilnStatus {
    // SAFETY: forwarded caller contract.
    unsafe { count(graph, false, count_out) }
}

/// Writes the number of graph outputs to `*count`.
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_num_outputs(
    graph: *const KilnGraph,
    count_out: *mut usize,
) -> KilnStatus {
    // SAFETY: forwarded caller contract.
    unsafe { count(graph, true, count_out) }
}

/// The types of the graph's inputs or outputs.
pub fn io_types(g: &Graph, outputs: bool) -> Vec<TensorType> {
    if outputs {
        g.outputs.iter().map(|&o| g.node(o).ty.clone()).collect()
    } else {
        g.inputs.clone()
    }
}

unsafe fn info(
    graph: *const KilnGraph,
    outputs: bool,
    index: usize,
    out: *mut KilnTensorInfo,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract on `graph`.
        let g = unsafe { graph_ref(graph) }?;
        let types = io_types(g, outputs);
        let ty = types.get(index).ok_or_else(|| {
            Failure::new(
                KilnStatus::InvalidArgument,
                format!(
                    "{} index {index} out of range (the graph has {})",
                    if outputs { "output" } else { "input" },
                    types.len()
                ),
            )
        })?;
        // SAFETY: caller contract on `out`.
        unsafe { write_out(out, KilnTensorInfo::of(ty)?, "info") }
    })
}

/// Writes the dtype and shape of input `index` to `*info`.
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_input(
    graph: *const KilnGraph,
    index: usize,
    info_out: *mut KilnTensorInfo,
) -> KilnStatus {
    // SAFETY: forwarded caller contract.
    unsafe { info(graph, false, index, info_out) }
}

/// Writes the dtype and shape of output `index` to `*info`.
#[no_mangle]
pub unsafe extern "C" fn kiln_graph_output(
    graph: *const KilnGraph,
    index: usize,
    info_out: *mut KilnTensorInfo,
) -> KilnStatus {
    // SAFETY: forwarded caller contract.
    unsafe { info(graph, true, index, info_out) }
}

/// Runs `graph` op by op (the eager oracle) on the input buffers, writing the output buffers.
#[no_mangle]
pub unsafe extern "C" fn kiln_run_eager(
    graph: *const KilnGraph,
    inputs: *const KilnBuffer,
    num_inputs: usize,
    outputs: *const KilnBuffer,
    num_outputs: usize,
) -> KilnStatus {
    guard(|| {
        // SAFETY: caller contract on `graph`.
        let g = unsafe { graph_ref(graph) }?;
        // SAFETY: caller contract: the buffers describe valid memory.
        let outs = unsafe { Outputs::new(outputs, num_outputs, &io_types(g, true)) }?;
        // SAFETY: as above.
        let ins = unsafe { read_inputs(inputs, num_inputs, &g.inputs) }?;
        let result = kiln_runtime::eager::run(g, &ins)?;
        outs.write(&result)
    })
}
