//! The PTX backend: renders the kernel form as PTX text for CUDA.
//!
//! A second renderer of the same [`Kernel`] the Cranelift backend consumes. It writes PTX
//! text itself (no CUDA toolkit involved) and describes how to launch it: the entry points,
//! the block shape, the grid for a given shape, and the parameter block that carries the
//! shapes and strides (the kernel form has no sizes, so they are run-time arguments).
//! docs/PTX.md documents the ABI and the exactness rules; [`ptxas::assemble_check`]
//! assembles the text with NVIDIA's `ptxas` (no GPU needed).
//!
//! Schedules:
//! * [`Schedule::Fused`]: one launch; a 2-D grid over the two innermost spatial axes (x only
//!   for one spatial axis) with batch × channel × outer axes folded into grid z, one thread
//!   per output element. Earlier stages read at offsets are computed by the block into
//!   shared-memory tiles with a halo, then `bar.sync`, then the last stage reads them.
//! * [`Schedule::Staged`]: the fallback when tiles do not fit (halo too large, a stage read
//!   at an offset along an outer axis, or a chain of stages deeper than producer → consumer):
//!   one entry point per stage, launched in order, earlier stages written to a global
//!   scratch buffer.
//! * [`Schedule::Lines`]: line bodies (scans, axis reductions and other recurrences), one
//!   thread per independent line, sequential along the axis (`line.rs`).
//!
//! Extern line functions (`KernelBody::Extern`) are host Rust code: [`render`] refuses them
//! with [`CodegenError::ExternUnsupported`].

mod emit;
pub mod ptxas;

use kiln_ir::{BinaryOp, DType};

use crate::kernel::{Kernel, KernelBody, Op};
use crate::{CodegenError, CompileOptions};

/// Threads per block for kernels with two or more spatial axes (x, y).
pub const BLOCK_2D: [u32; 3] = [32, 8, 1];
/// Threads per block for kernels with one spatial axis, and for line kernels.
pub const BLOCK_1D: [u32; 3] = [256, 1, 1];
/// Static shared memory a fused kernel may use for its tiles; above it the renderer falls
/// back to [`Schedule::Staged`].
pub const MAX_SHARED_BYTES: usize = 48 * 1024;
/// Largest grid dimensions the renderer asks for (every loop over blocks is grid-strided,
/// so any shape is covered).
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// What to generate PTX for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtxTarget {
    /// Compute capability `sm_XX` (80 for Ampere, 90 for Hopper).
    pub sm: u32,
    /// PTX ISA version written in `.version` (major, minor).
    pub ptx_version: (u32, u32),
}

impl Default for PtxTarget {
    fn default() -> Self {
        PtxTarget::sm80()
    }
}

impl PtxTarget {
    /// sm_80 (Ampere), PTX ISA 7.8.
    pub fn sm80() -> PtxTarget {
        PtxTarget {
            sm: 80,
            ptx_version: (7, 8),
        }
    }

    /// sm_90 (Hopper), PTX ISA 7.8 (the first ISA that knows sm_90).
    pub fn sm90() -> PtxTarget {
        PtxTarget {
            sm: 90,
            ptx_version: (7, 8),
        }
    }
}

/// How a rendered kernel is launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// One entry point computes the output; earlier stages live in shared-memory tiles.
    Fused {
        /// Static shared memory the entry uses, in bytes.
        shared_bytes: usize,
    },
    /// One entry point per stage, launched in order; stage `j` (but the last) writes the
    /// scratch buffer at byte offset `scratch_offsets[j]`, later stages read it.
    Staged,
    /// One thread per line along `axis` (a line body over input 0).
    Lines {
        /// Axis into the full shape.
        axis: usize,
        /// True when each step value is kept, false when the final carry is (output has
        /// length 1 along `axis`).
        scan: bool,
    },
}

/// A rendered module: PTX text plus what a launcher needs to know.
#[derive(Clone, Debug)]
pub struct PtxModule {
    /// The PTX source (one module).
    pub text: String,
    /// The target it was rendered for.
    pub target: PtxTarget,
    /// Entry points, to be launched in this order with the same arguments.
    pub entries: Vec<String>,
    /// Threads per block (`blockDim`).
    pub block: [u32; 3],
    /// The launch schedule.
    pub schedule: Schedule,
    /// Full rank of every tensor.
    pub rank: usize,
    /// Input dtypes.
    pub inputs: Vec<DType>,
    /// Output dtype.
    pub output: DType,
    /// Dtype of every stage (stencil kernels; empty otherwise).
    pub stages: Vec<DType>,
}

impl PtxModule {
    /// Number of i64 words of the parameter block (see docs/PTX.md).
    pub fn param_words(&self) -> usize {
        let r = self.rank;
        match self.schedule {
            Schedule::Lines { .. } => 3 * r,
            _ => r * (self.inputs.len() + 3) + self.stages.len().saturating_sub(1),
        }
    }

    /// The output shape for input/output shape `dims` (the reduced axis becomes 1).
    pub fn output_shape(&self, dims: &[usize]) -> Vec<usize> {
        let mut out = dims.to_vec();
        if let Schedule::Lines { axis, scan: false } = self.schedule {
            if axis < out.len() {
                out[axis] = 1;
            }
        }
        out
    }

    /// Bytes of global scratch the launch needs for shape `dims` (0 unless staged).
    pub fn scratch_bytes(&self, dims: &[usize]) -> usize {
        match self.schedule {
            Schedule::Staged => {
                let n: usize = dims.iter().product();
                self.scratch_offsets(dims).last().map_or(0, |&o| {
                    o as usize + n * self.stages[self.stages.len() - 2].size_bytes()
                })
            }
            _ => 0,
        }
    }

    fn scratch_offsets(&self, dims: &[usize]) -> Vec<i64> {
        let n: usize = dims.iter().product();
        let mut offs = Vec::new();
        let mut at = 0usize;
        for d in self.stages.iter().take(self.stages.len().saturating_sub(1)) {
            at = at.div_ceil(8) * 8;
            offs.push(at as i64);
            at += n * d.size_bytes();
        }
        offs
    }

    /// Builds the parameter block for input shape `dims` (the stencil output has the same
    /// shape), element strides of each input, and element strides of the output.
    pub fn param_block(
        &self,
        dims: &[usize],
        in_strides: &[Vec<usize>],
        out_strides: &[usize],
    ) -> Result<Vec<i64>, CodegenError> {
        let r = self.rank;
        if dims.len() != r || out_strides.len() != r || in_strides.len() != self.inputs.len() {
            return Err(err(format!(
                "param block: rank {r} and {} inputs expected, got dims {dims:?}, {} input strides, {} output strides",
                self.inputs.len(),
                in_strides.len(),
                out_strides.len()
            )));
        }
        if dims.contains(&0) {
            return Err(err(format!("param block: empty dimension in {dims:?}")));
        }
        let mut w: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        for s in in_strides {
            if s.len() != r {
                return Err(err(format!(
                    "param block: input strides {s:?} for rank {r}"
                )));
            }
            w.extend(s.iter().map(|&x| x as i64));
        }
        w.extend(out_strides.iter().map(|&x| x as i64));
        if !matches!(self.schedule, Schedule::Lines { .. }) {
            w.extend(contiguous_strides(dims).iter().map(|&x| x as i64));
            w.extend(self.scratch_offsets(dims));
        }
        debug_assert_eq!(w.len(), self.param_words());
        Ok(w)
    }

    /// The grid (`gridDim`) for input shape `dims`; each dimension is at most [`MAX_GRID`].
    pub fn grid(&self, dims: &[usize]) -> [u32; 3] {
        let clamp = |v: usize, m: u32| v.clamp(1, m as usize) as u32;
        match self.schedule {
            Schedule::Lines { axis, .. } => {
                let lines: usize = dims
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k != axis)
                    .map(|(_, &d)| d)
                    .product();
                [
                    clamp(lines.div_ceil(self.block[0] as usize), MAX_GRID[0]),
                    1,
                    1,
                ]
            }
            _ => {
                let r = dims.len();
                let w = dims[r - 1];
                let (h, folded) = if r - 2 >= 2 {
                    (dims[r - 2], &dims[..r - 2])
                } else {
                    (1, &dims[..r - 1])
                };
                let z: usize = folded.iter().product();
                [
                    clamp(w.div_ceil(self.block[0] as usize), MAX_GRID[0]),
                    clamp(h.div_ceil(self.block[1] as usize), MAX_GRID[1]),
                    clamp(z, MAX_GRID[2]),
                ]
            }
        }
    }
}

/// Row-major element strides of `dims`.
pub fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

/// The lane passes of `kiln_ops::sinkhorn` (its `lanes.rs`), for [`render_sinkhorn`]: the
/// term each (sample, lane) accumulator adds per matrix row `x`, `m = mat[x][lane]`, `w`
/// the sample's row vector, `s` its lane vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SinkhornPass {
    /// `acc + m·w` (`Σ_i K_ij u_i`).
    MulW,
    /// `acc + (s·m)·w` (`Σ_j (a⁻¹_i K_ij) v_j` on the transposed kernel).
    SMulW,
    /// `acc + (w·m)·s` (`Σ_i (u_i K_ij) v_j`).
    WMulS,
    /// `acc + exp((m + w) + s)` (`Σ_i exp((Mr_ij + u_i) + v_j)`).
    ExpAddWS,
    /// Running log-sum-exp of `m + w` (`LSE_i(Mr_ij + u_i)`).
    LseAddW,
}

impl SinkhornPass {
    /// Every pass.
    pub const ALL: [SinkhornPass; 5] = [
        SinkhornPass::MulW,
        SinkhornPass::SMulW,
        SinkhornPass::WMulS,
        SinkhornPass::ExpAddWS,
        SinkhornPass::LseAddW,
    ];

    /// Whether the pass reads a per-lane vector `s`.
    pub fn reads_lane_vector(self) -> bool {
        matches!(
            self,
            SinkhornPass::SMulW | SinkhornPass::WMulS | SinkhornPass::ExpAddWS
        )
    }
}

/// The PTX module (entry `kiln_sinkhorn`) of a Sinkhorn lane pass on `dtype` (f32 or f64)
/// for `target`; `ptx/sinkhorn.rs` documents the parameter block and the exactness
/// argument. Launch with blocks of [`BLOCK_1D`] threads over `samples · width` items.
pub fn render_sinkhorn(
    pass: SinkhornPass,
    dtype: DType,
    target: &PtxTarget,
) -> Result<String, CodegenError> {
    let mut text = emit::header(target);
    text.push_str(&emit::sinkhorn::render(pass, dtype)?);
    Ok(text)
}

pub(crate) fn err(msg: impl Into<String>) -> CodegenError {
    CodegenError::Lower(format!("ptx: {}", msg.into()))
}

/// Renders `kernel` as a PTX module for `target`. `options.fault` plants the same deliberate
/// miscompilations as the CPU backend (tests of the fuzzer only). An ill-formed kernel
/// (operand out of order, dtype mismatch, wrong offset length...) is an error, not a panic.
pub fn render(
    kernel: &Kernel,
    target: &PtxTarget,
    options: &CompileOptions,
) -> Result<PtxModule, CodegenError> {
    validate(kernel)?;
    let kernel = apply_swap_fault(kernel, options);
    emit::render(&kernel, target, options)
}

/// For [`crate::Fault::SwapComparator`]: swaps the first min/max pair on equal operands.
fn apply_swap_fault(kernel: &Kernel, options: &CompileOptions) -> Kernel {
    let mut k = kernel.clone();
    if options.fault != Some(crate::Fault::SwapComparator) {
        return k;
    }
    if let KernelBody::Stencil { stages } = &mut k.body {
        for st in stages.iter_mut() {
            let mut pair = None;
            'find: for (i, inst) in st.insts.iter().enumerate() {
                if let Op::Binary(BinaryOp::Min, a, b) = inst.op {
                    for (j, other) in st.insts.iter().enumerate() {
                        if let Op::Binary(BinaryOp::Max, c, d) = other.op {
                            if (c, d) == (a, b) || (c, d) == (b, a) {
                                pair = Some((i, j));
                                break 'find;
                            }
                        }
                    }
                }
            }
            if let Some((i, j)) = pair {
                if let Op::Binary(op, _, _) = &mut st.insts[i].op {
                    *op = BinaryOp::Max;
                }
                if let Op::Binary(op, _, _) = &mut st.insts[j].op {
                    *op = BinaryOp::Min;
                }
                break;
            }
        }
    }
    k
}

fn validate(kernel: &Kernel) -> Result<(), CodegenError> {
    let r = kernel.rank;
    if !(3..=2 + kiln_ir::types::MAX_SPATIAL_DIMS).contains(&r) {
        return Err(err(format!("rank {r} outside 3..=10")));
    }
    match &kernel.body {
        KernelBody::Line(_) => crate::validate::check_line(kernel).map(|_| ()),
        KernelBody::Stencil { .. } => crate::validate::check_stencil(kernel),
        KernelBody::Extern(call) => {
            return Err(CodegenError::ExternUnsupported {
                name: call.name.clone(),
            })
        }
    }
    .map_err(err)
}
