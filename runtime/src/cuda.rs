//! Running kernels on CUDA (feature `cuda`): PTX from [`kiln_codegen::ptx`], loaded and
//! launched through the dynamically loaded driver (cudarc), so building needs no CUDA.
//!
//! [`CudaEngine`] renders a kernel for the device's compute capability, loads the module,
//! copies the inputs to the device (as contiguous copies), builds the parameter block of
//! docs/PTX.md, launches the entry points in order and copies the output back. Without a
//! driver or a GPU, [`CudaEngine::new`] returns [`CudaError::NoDevice`].
//!
//! Status: built and type-checked without CUDA; not yet run on a GPU (see docs/PTX.md).

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use kiln_codegen::kernel::Kernel;
use kiln_codegen::ptx::{self, PtxModule, PtxTarget};
use kiln_codegen::{CodegenError, CompileOptions};
use kiln_ir::{DType, Scalar};
use thiserror::Error;

use crate::executor::KernelCache;
use crate::tensor::{Storage, Tensor};

/// Errors of the CUDA engine.
#[derive(Debug, Error)]
pub enum CudaError {
    /// No CUDA driver library could be loaded, or it reports no device.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(String),
    /// Rendering the kernel failed.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// Inputs do not fit the kernel.
    #[error("inputs: {0}")]
    Inputs(String),
    /// Lowering or input checking of a graph failed (see [`crate::cuda_graph`]).
    #[error(transparent)]
    Runtime(#[from] crate::RuntimeError),
}

fn drv(e: impl std::fmt::Debug) -> CudaError {
    CudaError::Driver(format!("{e:?}"))
}

/// A loaded module and its entry points.
struct Loaded {
    module: PtxModule,
    funcs: Vec<CudaFunction>,
}

/// One CUDA device with a stream and a cache of loaded kernels.
pub struct CudaEngine {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    target: PtxTarget,
    cache: KernelCache<Arc<Loaded>>,
}

impl CudaEngine {
    /// Opens device `ordinal`. Fails with [`CudaError::NoDevice`] when the driver library is
    /// missing or there is no such device (never panics).
    pub fn new(ordinal: usize) -> Result<CudaEngine, CudaError> {
        // SAFETY: only tries to dlopen the vendor's driver library by its usual names.
        let present =
            std::panic::catch_unwind(|| unsafe { cudarc::driver::sys::is_culib_present() })
                .unwrap_or(false);
        if !present {
            return Err(CudaError::NoDevice(
                "the CUDA driver library (libcuda) was not found".into(),
            ));
        }
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|_| CudaError::NoDevice("loading the CUDA driver panicked".into()))?
            .map_err(|e| CudaError::NoDevice(format!("device {ordinal}: {e:?}")))?;
        let (major, minor) = ctx.compute_capability().map_err(drv)?;
        let sm = (major as u32) * 10 + minor as u32;
        // PTX for sm_80 runs on any later GPU; sm_90 gets its own target.
        let target = if sm >= 90 {
            PtxTarget::sm90()
        } else {
            PtxTarget {
                sm: sm.min(80),
                ptx_version: (7, 8),
            }
        };
        let stream = ctx.default_stream();
        Ok(CudaEngine {
            ctx,
            stream,
            target,
            cache: KernelCache::default(),
        })
    }

    /// The PTX target used for this device.
    pub fn target(&self) -> PtxTarget {
        self.target
    }

    fn load(&self, kernel: &Kernel, options: &CompileOptions) -> Result<Arc<Loaded>, CudaError> {
        let (loaded, _) = self
            .cache
            .get_or_compile(kernel.clone(), options, |kernel| {
                let module = ptx::render(kernel, &self.target, options)?;
                let m = self
                    .ctx
                    .load_module(Ptx::from_src(module.text.clone()))
                    .map_err(drv)?;
                let funcs = module
                    .entries
                    .iter()
                    .map(|n| m.load_function(n).map_err(drv))
                    .collect::<Result<Vec<_>, CudaError>>()?;
                Ok::<_, CudaError>(Arc::new(Loaded { module, funcs }))
            })?;
        Ok(loaded)
    }

    /// Refuses `needed` bytes of new device allocations that the device cannot hold (a
    /// typed `OutOfMemory` before anything is allocated or queued).
    fn ensure_device_fits(&self, needed: usize, what: &str) -> Result<(), CudaError> {
        let (free, _total) = self.ctx.mem_get_info().map_err(drv)?;
        Ok(crate::memory::ensure_fits_on_device(
            needed as u64,
            free as u64,
            what,
        )?)
    }

    /// Copies `t` to the device as a contiguous buffer (any strides on the host).
    pub fn upload(&self, t: &Tensor) -> Result<DeviceTensor, CudaError> {
        self.ensure_device_fits(t.numel().saturating_mul(t.dtype().size_bytes()), "upload")?;
        let bytes = to_bytes(&t.to_contiguous());
        // A zero-length allocation is not allowed: keep at least one byte.
        let buf = if bytes.is_empty() {
            self.stream.alloc_zeros(1).map_err(drv)?
        } else {
            self.stream.clone_htod(&bytes).map_err(drv)?
        };
        Ok(DeviceTensor {
            buf,
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
        })
    }

    /// Copies a device tensor back to a fresh contiguous host tensor (waits for the stream).
    pub fn download(&self, t: &DeviceTensor) -> Result<Tensor, CudaError> {
        let n: usize = t.shape.iter().product::<usize>() * t.dtype.size_bytes();
        let mut bytes = self.stream.clone_dtoh(&t.buf).map_err(drv)?;
        self.stream.synchronize().map_err(drv)?;
        bytes.truncate(n);
        Tensor::from_storage(from_bytes(t.dtype, &bytes), &t.shape)
            .map_err(|e| CudaError::Inputs(e.to_string()))
    }

    /// Waits until every launch and copy queued so far has finished.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(drv)
    }

    /// Records a timing event on the engine's stream (for [`CudaEngine::elapsed_ms`]).
    pub fn record_event(&self) -> Result<CudaEvent, CudaError> {
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv)
    }

    /// Milliseconds between two events of [`CudaEngine::record_event`] (waits for `end`).
    pub fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f64, CudaError> {
        start.elapsed_ms(end).map(f64::from).map_err(drv)
    }

    /// Queues `kernel` on device tensors: `dims` is the kernel's shape (stencils: the shape
    /// of every input and of the output; scans and reductions: the input's shape). Returns
    /// the output (of [`PtxModule::output_shape`]) without waiting for the launch. A kernel
    /// without inputs (a constant) is allowed.
    pub fn launch(
        &self,
        kernel: &Kernel,
        options: &CompileOptions,
        inputs: &[&DeviceTensor],
        dims: &[usize],
    ) -> Result<DeviceTensor, CudaError> {
        if inputs.len() != kernel.inputs.len() {
            return Err(CudaError::Inputs(format!(
                "kernel takes {} inputs, {} given",
                kernel.inputs.len(),
                inputs.len()
            )));
        }
        if dims.len() != kernel.rank || dims.contains(&0) {
            return Err(CudaError::Inputs(format!(
                "shape {dims:?} for a kernel of rank {} (no empty axes)",
                kernel.rank
            )));
        }
        for (i, (t, &d)) in inputs.iter().zip(&kernel.inputs).enumerate() {
            if t.dtype != d || t.shape != dims {
                return Err(CudaError::Inputs(format!(
                    "input {i}: expected {d} {dims:?}, got {} {:?}",
                    t.dtype, t.shape
                )));
            }
        }
        let loaded = self.load(kernel, options)?;
        let m = &loaded.module;
        let out_shape = m.output_shape(dims);
        let out_n: usize = out_shape.iter().product();
        let contiguous: Vec<usize> = ptx::contiguous_strides(dims);
        let in_strides = vec![contiguous; inputs.len()];
        let words = m.param_block(dims, &in_strides, &ptx::contiguous_strides(&out_shape))?;
        let out_bytes = out_n.saturating_mul(kernel.output.size_bytes());
        let scratch_bytes = m.scratch_bytes(dims).max(1);
        self.ensure_device_fits(
            out_bytes
                .saturating_add(scratch_bytes)
                .saturating_add(words.len().saturating_mul(8)),
            "kernel launch",
        )?;
        let args: CudaSlice<i64> = self.stream.clone_htod(&words).map_err(drv)?;
        let mut out: CudaSlice<u8> = self.stream.alloc_zeros(out_bytes).map_err(drv)?;
        let mut scratch: CudaSlice<u8> = self.stream.alloc_zeros(scratch_bytes).map_err(drv)?;
        let grid = m.grid(dims);
        let cfg = LaunchConfig {
            grid_dim: (grid[0], grid[1], grid[2]),
            block_dim: (m.block[0], m.block[1], m.block[2]),
            shared_mem_bytes: 0,
        };
        for f in &loaded.funcs {
            let mut b = self.stream.launch_builder(f);
            b.arg(&args).arg(&mut out).arg(&mut scratch);
            for x in inputs {
                b.arg(&x.buf);
            }
            // SAFETY: the argument list matches the entry's `.param` list (docs/PTX.md):
            // parameter block, output, scratch, one pointer per input; every buffer has the
            // size the parameter block describes (contiguous inputs of `dims` checked above,
            // contiguous output of `output_shape`, scratch of `scratch_bytes`), so the
            // kernel's accesses stay inside them. `args` and `scratch` are freed by the
            // stream-ordered allocator after the launches queued before their drop.
            unsafe { b.launch(cfg) }.map_err(drv)?;
        }
        Ok(DeviceTensor {
            buf: out,
            dtype: kernel.output,
            shape: out_shape,
        })
    }

    /// Runs `kernel` on host `inputs` (all of one shape for stencils; one input for scans
    /// and reductions) and returns the contiguous output.
    pub fn run(
        &self,
        kernel: &Kernel,
        options: &CompileOptions,
        inputs: &[&Tensor],
    ) -> Result<Tensor, CudaError> {
        let Some(first) = inputs.first() else {
            return Err(CudaError::Inputs(
                "no inputs: use `launch` with an explicit shape".into(),
            ));
        };
        let dims = first.shape().to_vec();
        let dev = inputs
            .iter()
            .map(|t| self.upload(t))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&DeviceTensor> = dev.iter().collect();
        let out = self.launch(kernel, options, &refs, &dims)?;
        self.download(&out)
    }
}

impl CudaEngine {
    /// Runs the Sinkhorn lane pass `pass` (`kiln_codegen::ptx::render_sinkhorn`) on the
    /// device: `mat` `[rows, width]`, `w` `[samples, >= rows]` (row vectors), `s`
    /// `[samples, width]` for the passes that read lane vectors; returns `[samples, width]`.
    /// All of one float dtype. The CPU twin is `kiln_ops::sinkhorn::lane_pass` (same bits up
    /// to NaN payloads).
    pub fn sinkhorn_pass(
        &self,
        pass: ptx::SinkhornPass,
        mat: &Tensor,
        w: &Tensor,
        s: Option<&Tensor>,
    ) -> Result<Tensor, CudaError> {
        let d = mat.dtype();
        let (&[rows, width], &[samples, wlen]) = (mat.shape(), w.shape()) else {
            return Err(CudaError::Inputs(format!(
                "sinkhorn pass: mat [rows, width] and w [samples, n], got {:?} and {:?}",
                mat.shape(),
                w.shape()
            )));
        };
        let s_ok = match s {
            Some(t) => t.dtype() == d && t.shape() == [samples, width],
            None => !pass.reads_lane_vector(),
        };
        if w.dtype() != d || wlen < rows || !s_ok || rows * width * samples == 0 {
            return Err(CudaError::Inputs(format!(
                "sinkhorn pass {pass:?}: mat {d} {:?}, w {} {:?}, s {:?} do not fit",
                mat.shape(),
                w.dtype(),
                w.shape(),
                s.map(|t| t.shape().to_vec())
            )));
        }
        let text = ptx::render_sinkhorn(pass, d, &self.target)?;
        let module = self.ctx.load_module(Ptx::from_src(text)).map_err(drv)?;
        let func = module.load_function("kiln_sinkhorn").map_err(drv)?;
        let dev_mat = self.upload(mat)?;
        let dev_w = self.upload(w)?;
        let dev_s = match s {
            Some(t) => self.upload(t)?,
            None => self.upload(&Tensor::from_storage(Storage::F64(vec![0.0]), &[1])?)?,
        };
        let sz = d.size_bytes();
        let items = samples * width;
        let out_bytes = items.saturating_mul(sz);
        self.ensure_device_fits(out_bytes.saturating_add(64), "sinkhorn pass")?;
        let words: Vec<i64> = [rows, width, samples, wlen, width, width]
            .iter()
            .map(|&x| x as i64)
            .collect();
        let args: CudaSlice<i64> = self.stream.clone_htod(&words).map_err(drv)?;
        let mut out: CudaSlice<u8> = self.stream.alloc_zeros(out_bytes).map_err(drv)?;
        let mut scratch: CudaSlice<u8> = self.stream.alloc_zeros(1).map_err(drv)?;
        let blocks = items
            .div_ceil(ptx::BLOCK_1D[0] as usize)
            .min(ptx::MAX_GRID[0] as usize);
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (ptx::BLOCK_1D[0], 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(&func);
        b.arg(&args)
            .arg(&mut out)
            .arg(&mut scratch)
            .arg(&dev_mat.buf)
            .arg(&dev_w.buf)
            .arg(&dev_s.buf);
        // SAFETY: the arguments match the entry's `.param` list (ptx/sinkhorn.rs: parameter
        // block, output, scratch, matrix, w, s); the block's words describe the buffers
        // uploaded above (mat rows x width, w samples x wlen with wlen >= rows, s samples x
        // width when read, out samples x width), so every access stays inside them; the
        // threads are grid-strided over samples x width.
        unsafe { b.launch(cfg) }.map_err(drv)?;
        let result = DeviceTensor {
            buf: out,
            dtype: d,
            shape: vec![samples, width],
        };
        self.download(&result)
    }
}

/// A contiguous tensor in device memory (little-endian elements; bool as 0/1 bytes).
pub struct DeviceTensor {
    buf: CudaSlice<u8>,
    dtype: DType,
    shape: Vec<usize>,
}

impl DeviceTensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
}

/// Little-endian bytes of a contiguous tensor's elements.
fn to_bytes(t: &Tensor) -> Vec<u8> {
    let n = t.numel();
    let s = t.storage();
    let mut out = Vec::with_capacity(n * t.dtype().size_bytes());
    for i in 0..n {
        out.extend(s.get(t.offset() + i).to_le_bytes());
    }
    out
}

/// Elements of `dtype` from little-endian bytes.
fn from_bytes(dtype: DType, b: &[u8]) -> Storage {
    match dtype {
        DType::F32 => Storage::F32(
            b.chunks_exact(4)
                .map(|c| f32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        ),
        DType::F64 => Storage::F64(
            b.chunks_exact(8)
                .map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    f64::from_bits(u64::from_le_bytes(a))
                })
                .collect(),
        ),
        DType::U8 => Storage::U8(b.to_vec()),
        DType::Bool => Storage::Bool(b.iter().map(|&x| (x != 0) as u8).collect()),
        // The other integer dtypes, element by element from their little-endian bytes.
        d => {
            let size = d.size_bytes();
            let mut st = Storage::zeros(d, b.len() / size);
            for (i, c) in b.chunks_exact(size).enumerate() {
                st.set(i, Scalar::from_le_bytes(d, c).expect("whole element"));
            }
            st
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_codegen::kernel::{Inst, KernelBody, Op, Source, Stage, ValueId};
    use kiln_ir::{BinaryOp, Border, Scalar};

    #[test]
    fn bytes_round_trip_keeps_bits() {
        let t = Tensor::from_f32(vec![f32::from_bits(0xffc0_1234), -0.0, 1.5], &[1, 1, 3]).unwrap();
        let s = from_bytes(DType::F32, &to_bytes(&t));
        assert_eq!(s.get(0), Scalar::F32(0xffc0_1234));
        assert_eq!(s.get(1), Scalar::F32(0x8000_0000));
        assert_eq!(s.get(2), Scalar::f32(1.5));
    }

    /// On a machine without CUDA this checks the clear error; on a GPU machine it runs a
    /// 3-wide min filter under reflect and compares bit for bit with a host computation.
    #[test]
    fn engine_errors_without_gpu_or_runs_a_kernel() {
        let engine = match CudaEngine::new(0) {
            Err(CudaError::NoDevice(msg)) => {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("SKIP: no GPU here ({msg}); only the error was checked\n").as_bytes(),
                );
                return;
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(e) => e,
        };
        let d = DType::F32;
        let load = |o: i64| Inst {
            op: Op::Load {
                source: Source::Input(0),
                offset: vec![o],
                border: Border::Reflect,
            },
            dtype: d,
        };
        let stage = Stage {
            insts: vec![
                load(-1),
                load(0),
                load(1),
                Inst {
                    op: Op::Binary(BinaryOp::Min, ValueId(0), ValueId(1)),
                    dtype: d,
                },
                Inst {
                    op: Op::Binary(BinaryOp::Min, ValueId(3), ValueId(2)),
                    dtype: d,
                },
            ],
            result: ValueId(4),
        };
        let kernel = Kernel {
            rank: 3,
            inputs: vec![d],
            output: d,
            body: KernelBody::Stencil {
                stages: vec![stage],
            },
        };
        let xs: Vec<f32> = vec![3.0, -0.0, 0.0, f32::NAN, 7.0, 2.0, -1.0];
        let x = Tensor::from_f32(xs.clone(), &[1, 1, xs.len()]).unwrap();
        let y = engine
            .run(&kernel, &CompileOptions::default(), &[&x])
            .unwrap();
        let n = xs.len() as i64;
        for i in 0..n {
            let mut acc = None;
            for o in -1..=1 {
                let j =
                    kiln_ir::semantics::remap_index(i + o, n as usize, &Border::Reflect).unwrap();
                let v = xs[j];
                acc = Some(match acc {
                    None => v,
                    Some(a) => kiln_ir::semantics::min_f32(a, v),
                });
            }
            assert_eq!(
                y.get(&[0, 0, i as usize]),
                Scalar::F32(acc.unwrap().to_bits()),
                "at {i}"
            );
        }
    }
}
