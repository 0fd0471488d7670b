//! The CPU backend: renders the kernel form to native code with Cranelift.
//!
//! Schedule: a stencil stage becomes a *row function* that computes one output row (all
//! columns along the innermost axis) from one row pointer per [`RowSlot`]. The runtime
//! resolves the outer spatial axes (remapping borders, or pointing at a constant) when it
//! builds the row pointers; the row function handles the innermost axis itself, with an
//! interior fast path (fixed offsets, no bounds checks, F32X4 vectors) and a scalar border
//! path that remaps column indices.

use kiln_ir::{Border, ReduceOp};

use crate::kernel::{Kernel, Source};
use crate::{CodegenError, CompileOptions};

/// What a row slot points at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlotKind {
    /// The row of `source` at the output row's outer coordinates plus the slot's
    /// `outer_offset`, remapped under `border`; under a constant border and out of range, a
    /// single element holding the constant (stride 0).
    Row {
        /// Tensor the row belongs to.
        source: Source,
        /// Border mode along the outer axes (and along the innermost axis, inside the kernel).
        border: Border,
    },
    /// A single byte (stride 0): 1 if the output row's outer coordinates plus `outer_offset`
    /// are inside the shape, else 0. Feeds [`crate::kernel::Op::InRange`].
    OuterInRange,
}

/// One pointer a stage's row function needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowSlot {
    /// What the pointer refers to.
    pub kind: SlotKind,
    /// Offsets along the spatial axes except the innermost (`spatial_rank - 1` entries).
    pub outer_offset: Vec<i64>,
}

/// Computes one output row of a stencil stage.
///
/// * `rows[s]` points at column 0 of slot `s`'s source row (or, for a row outside the tensor
///   under a constant border, at one element holding the constant, with `strides[s] == 0`);
/// * `strides[s]` is that row's column stride in elements (any value, 0 included);
/// * `out` points at column 0 of the output row, `out_stride` is its column stride in elements;
/// * `width` is the number of columns (`>= 1`), the same for every source.
pub type RowFn = unsafe extern "C" fn(
    rows: *const *const u8,
    strides: *const i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
);

/// `out[x] = op(acc[x], src[x])` for `x < width` (strides in elements): one step of a scan or
/// reduction along an outer axis.
pub type CombineFn = unsafe extern "C" fn(
    acc: *const u8,
    acc_stride: i64,
    src: *const u8,
    src_stride: i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
);

/// A scan or reduction along the innermost axis of one row: with `scan != 0`,
/// `out[x] = op(out[x-1], src[x])` and `out[0] = src[0]`; with `scan == 0`, `out[0]` gets the
/// left fold of `src[0..width]`.
pub type FoldFn = unsafe extern "C" fn(
    src: *const u8,
    src_stride: i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
    scan: i64,
);

/// A compiled stencil stage.
pub struct CpuStage {
    /// The row pointers the function expects, in argument order.
    pub slots: Vec<RowSlot>,
    /// The compiled row function.
    pub func: RowFn,
}

/// What a compiled kernel exposes to the runtime.
pub enum CpuBody {
    /// One row function per stage.
    Stencil(Vec<CpuStage>),
    /// A scan (`scan == true`) or axis reduction along `axis`.
    AlongAxis {
        /// Axis into the full shape.
        axis: usize,
        /// Combining op.
        op: ReduceOp,
        /// True for a scan, false for a reduction.
        scan: bool,
        /// Used when `axis` is the innermost axis.
        fold: FoldFn,
        /// Used when `axis` is an outer axis.
        combine: CombineFn,
    },
}

/// A kernel compiled for the host CPU. Owns the JIT memory its functions live in; the
/// function pointers are valid as long as this value is alive.
pub struct CpuKernel {
    /// The kernel form it was compiled from.
    pub kernel: Kernel,
    /// Entry points.
    pub body: CpuBody,
    /// Milliseconds spent in Cranelift.
    pub compile_ms: f64,
    // The JIT module that owns the code goes here (freed on drop).
}

/// Compiles `kernel` for the host CPU. `options.fault` plants a deliberate miscompilation
/// (tests of the fuzzer only).
pub fn compile(kernel: &Kernel, options: &CompileOptions) -> Result<CpuKernel, CodegenError> {
    let _ = (kernel, options);
    todo!("Cranelift backend")
}
