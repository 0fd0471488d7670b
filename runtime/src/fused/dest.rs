//! Where a group's output goes: a fresh buffer, a reused kiln storage, or a caller's memory.
//!
//! Scope: [`Dest`], what `run_kernel` writes a group root into. A [`Dest::Raw`] destination
//! (from [`super::CompiledGraph::run_bound_into_raw`]) is written by the stencil row
//! functions directly; line and extern kernels write a kiln buffer that is then copied
//! into it (one copy). The result is then a borrowed tensor over the caller's memory, which
//! never leaves the run. Exactness: the same bytes land in the caller's memory as in a kiln
//! buffer. Limits: the destination is contiguous row-major, of the output's dtype and size.

use kiln_ir::DType;

use super::out_ptr::OutPtr;
use crate::tensor::{contiguous_strides, Storage, Tensor};
use crate::RuntimeError;

/// A group output's destination.
pub(crate) enum Dest {
    /// A kiln storage of the output's dtype and length, overwritten.
    Storage(Storage),
    /// `len` elements of `dtype` at a caller's address, contiguous, overwritten.
    Raw {
        /// The first element.
        ptr: OutPtr,
        /// Element type.
        dtype: DType,
        /// Number of elements.
        len: usize,
    },
}

impl Dest {
    /// A borrowed tensor of `shape` over a raw destination the kernel wrote in full.
    ///
    /// # Safety
    /// `ptr` holds `shape`'s elements of `dtype`, all written (bools as 0/1), and stays
    /// valid and unwritten while the tensor lives.
    pub(crate) unsafe fn raw_tensor(
        ptr: OutPtr,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, RuntimeError> {
        // SAFETY: forwarded contract.
        unsafe {
            Tensor::from_raw_parts(
                dtype,
                ptr.get().cast_const(),
                shape,
                &contiguous_strides(shape),
            )
        }
    }

    /// Copies the contiguous tensor `t` into this raw destination and returns a borrowed
    /// tensor over it, or hands a storage destination back (`Err`).
    pub(crate) fn fill_raw(self, t: &Tensor) -> Result<Result<Tensor, Storage>, RuntimeError> {
        let (ptr, dtype, len) = match self {
            Dest::Storage(s) => return Ok(Err(s)),
            Dest::Raw { ptr, dtype, len } => (ptr, dtype, len),
        };
        let c = t.to_contiguous();
        if c.dtype() != dtype || c.numel() != len {
            return Err(RuntimeError::Shape(format!(
                "output buffer of {len} {dtype} elements for a {} output of {}",
                c.dtype(),
                c.numel()
            )));
        }
        let es = dtype.size_bytes();
        // SAFETY: `c` is owned and contiguous from its offset with `len` elements of `dtype`;
        // the destination holds `len` such elements (the raw run's contract) and is the
        // caller's memory, distinct from `c`'s fresh storage.
        unsafe {
            std::ptr::copy_nonoverlapping(
                c.storage().as_ptr().add(c.offset() * es),
                ptr.get(),
                len * es,
            );
            Self::raw_tensor(ptr, dtype, c.shape()).map(Ok)
        }
    }
}
