//! Borrowed tensors: a strided view of a caller's memory, read in place (no copy in).
//!
//! Scope: [`Tensor::from_raw_parts`] makes a tensor whose elements live at a caller's
//! address with the caller's element strides (an `ndarray` view's, a C buffer's); the fused
//! CPU engine reads it where it reads owned storage (row functions, line functions, the
//! purity checks of guarded variants: all through [`Tensor::data_ptr`] and the element runs
//! here), and every other reader gets an owned copy ([`Tensor::to_contiguous`],
//! [`Tensor::contiguous_storage_in`], element by element [`Tensor::get`]; `eager::run`
//! copies borrowed inputs first). Exactness: elements are read bit for bit, as from owned
//! storage. Limits: strides are non-negative (a negative-stride view needs a copy by its
//! caller); only elements of the view are ever read (never the gaps between them, which
//! the caller may be writing elsewhere); the tensor does not track the borrow's lifetime,
//! which is the constructor's contract (see its `# Safety`).

use kiln_ir::{DType, Scalar};

use super::{Storage, Tensor};
use crate::RuntimeError;

/// The address of a borrowed tensor's element 0 (offset 0 of its view).
#[derive(Clone, Copy, Debug)]
pub(super) struct Borrowed(*const u8);

// SAFETY: a borrowed tensor only reads through the pointer, and `Tensor::from_raw_parts`'s
// contract keeps the view's elements valid and unwritten, from any thread, while the tensor
// or a clone of it lives.
unsafe impl Send for Borrowed {}
// SAFETY: see `Send`: shared access only reads.
unsafe impl Sync for Borrowed {}

/// Reads element `i` of type `T` at `base` (`T`-aligned).
///
/// # Safety
/// Element `i` must be an element of a live borrowed view of `T`s.
unsafe fn read<T: Copy>(base: *const u8, i: usize) -> T {
    // SAFETY: forwarded contract: `base + i·size` is an aligned, valid, unwritten `T`.
    unsafe { base.cast::<T>().add(i).read() }
}

impl Borrowed {
    /// Element `i` (storage index: `Σ index·stride`) as a scalar of `dtype`.
    pub(super) fn get(self, dtype: DType, i: usize) -> Scalar {
        // SAFETY: `Tensor::get` passes the storage index of an element of the view, which
        // `from_raw_parts`'s contract keeps valid for the tensor's life.
        unsafe {
            match dtype {
                DType::F32 => Scalar::F32(read::<f32>(self.0, i).to_bits()),
                DType::F64 => Scalar::F64(read::<f64>(self.0, i).to_bits()),
                DType::U8 => Scalar::U8(read(self.0, i)),
                DType::Bool => Scalar::Bool(read::<u8>(self.0, i) != 0),
                DType::I8 => Scalar::I8(read(self.0, i)),
                DType::U16 => Scalar::U16(read(self.0, i)),
                DType::I16 => Scalar::I16(read(self.0, i)),
                DType::I32 => Scalar::I32(read(self.0, i)),
                DType::U32 => Scalar::U32(read(self.0, i)),
            }
        }
    }

    /// A row-major copy of the view (`shape`, `strides`) as storage of `dtype`, written into
    /// `reuse` when it has that dtype and length.
    pub(super) fn gather(
        self,
        dtype: DType,
        shape: &[usize],
        strides: &[usize],
        reuse: Option<Storage>,
    ) -> Storage {
        let n: usize = shape.iter().product();
        macro_rules! copy {
            ($variant:ident, $t:ty) => {{
                let mut out = match reuse {
                    Some(Storage::$variant(mut buf)) if buf.len() == n => {
                        buf.clear();
                        buf
                    }
                    _ => Vec::with_capacity(n),
                };
                let mut index = vec![0usize; shape.len()];
                for _ in 0..n {
                    let at: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
                    // SAFETY: `at` is the storage index of an element of the view.
                    out.push(unsafe { read::<$t>(self.0, at) });
                    super::increment(&mut index, shape);
                }
                Storage::$variant(out)
            }};
        }
        match dtype {
            DType::F32 => copy!(F32, f32),
            DType::F64 => copy!(F64, f64),
            DType::U8 => copy!(U8, u8),
            DType::Bool => copy!(Bool, u8),
            DType::I8 => copy!(I8, i8),
            DType::U16 => copy!(U16, u16),
            DType::I16 => copy!(I16, i16),
            DType::I32 => copy!(I32, i32),
            DType::U32 => copy!(U32, u32),
        }
    }
}

impl Tensor {
    /// A tensor reading `shape` elements of `dtype` in place: element `index` is at
    /// `ptr + Σ index[k]·strides[k]·size` (strides in elements, offset 0). Errors: a null
    /// or misaligned `ptr`, a rank mismatch, a zero extent, a span past `isize::MAX` bytes.
    ///
    /// # Safety
    /// Every element of the view must be a valid value of `dtype` (bool: a 0 or 1 byte),
    /// readable, and not written by anyone, for as long as the returned tensor or any clone
    /// of it lives. The fused engine's runs ([`crate::fused::CompiledGraph::run`] and the
    /// others) keep no input past their return, so a tensor made for one run and dropped
    /// after it borrows only for the call. Nothing outside the view's elements is read.
    pub unsafe fn from_raw_parts(
        dtype: DType,
        ptr: *const u8,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Tensor, RuntimeError> {
        let es = dtype.size_bytes();
        if ptr.is_null() || !(ptr as usize).is_multiple_of(es) {
            return Err(RuntimeError::Shape(format!(
                "borrowed {dtype} elements at a null or misaligned address"
            )));
        }
        if shape.len() != strides.len() || shape.contains(&0) {
            return Err(RuntimeError::Shape(format!(
                "borrowed view of shape {shape:?} and strides {strides:?}"
            )));
        }
        let mut last = 0usize;
        for (&d, &s) in shape.iter().zip(strides) {
            last = (d - 1)
                .checked_mul(s)
                .and_then(|x| x.checked_add(last))
                .ok_or_else(|| RuntimeError::Shape("strides overflow".into()))?;
        }
        if last
            .checked_add(1)
            .and_then(|n| n.checked_mul(es))
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return Err(RuntimeError::Shape(
                "borrowed view spans too many bytes".into(),
            ));
        }
        Ok(Tensor {
            storage: std::sync::Arc::new(Storage::zeros(dtype, 0)),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset: 0,
            borrowed: Some(Borrowed(ptr)),
        })
    }

    /// Whether this tensor reads a caller's memory in place ([`Tensor::from_raw_parts`]);
    /// its [`Tensor::storage`] is then empty.
    pub fn is_borrowed(&self) -> bool {
        self.borrowed.is_some()
    }

    /// The address of storage element 0, the base every `offset` and stride counts from
    /// (a borrowed tensor's element 0).
    pub fn data_ptr(&self) -> *const u8 {
        match self.borrowed {
            Some(Borrowed(p)) => p,
            None => self.storage.as_ptr(),
        }
    }

    /// Whether `at..at + len` lies inside the view's span (first to last element).
    fn within(&self, at: usize, len: usize) -> bool {
        let last: usize = self
            .shape
            .iter()
            .zip(&self.strides)
            .map(|(&d, &s)| (d - 1) * s)
            .sum();
        at.checked_add(len).is_some_and(|end| end <= last + 1)
    }

    /// Storage elements `at..at + len` as f32, when the tensor is f32 and they exist.
    /// For a borrowed tensor the run must be elements of the view (a contiguous row).
    pub(crate) fn f32_run(&self, at: usize, len: usize) -> Option<&[f32]> {
        match (self.borrowed, &**self.storage()) {
            (Some(Borrowed(p)), Storage::F32(_)) if self.within(at, len) => {
                // SAFETY: callers ask for runs of the view's elements (a contiguous view's
                // elements, or one row with unit stride), valid while `self` lives.
                Some(unsafe { std::slice::from_raw_parts(p.cast::<f32>().add(at), len) })
            }
            (None, Storage::F32(v)) => v.get(at..at.checked_add(len)?),
            _ => None,
        }
    }

    /// Storage elements `at..at + len` as f64 (see [`Tensor::f32_run`]).
    pub(crate) fn f64_run(&self, at: usize, len: usize) -> Option<&[f64]> {
        match (self.borrowed, &**self.storage()) {
            (Some(Borrowed(p)), Storage::F64(_)) if self.within(at, len) => {
                // SAFETY: as in `f32_run`.
                Some(unsafe { std::slice::from_raw_parts(p.cast::<f64>().add(at), len) })
            }
            (None, Storage::F64(v)) => v.get(at..at.checked_add(len)?),
            _ => None,
        }
    }
}
