//! Caller buffers (`kiln_buffer`): checked views of C memory with a shape and element strides,
//! copied into kiln tensors before a run and written back from its outputs.
//!
//! Exactness: elements are moved as bit patterns (`read_unaligned`/`write_unaligned` of the
//! element type), so NaN payloads and signed zeros survive; bool input bytes are normalised to
//! 0/1 (any nonzero byte is true), the only value change.
//!
//! Limits: strides are in elements and may be negative or zero; kiln cannot know how large the
//! caller's allocation is, so the caller guarantees that every addressed element lies in it.
//! Data need not be aligned. Outputs are written in row-major index order, so where output
//! strides alias elements the last write in that order wins.

use std::ffi::{c_int, c_void, CStr};
use std::sync::Arc;

use kiln_ir::{DType, TensorType};
use kiln_runtime::{Storage, Tensor};

use crate::graph::KILN_MAX_RANK;
use crate::status::{Failure, KilnStatus};

/// One caller buffer (`kiln_buffer` in kiln.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KilnBuffer {
    /// Address of the element at index `[0, 0, ...]`; only read for inputs.
    pub data: *mut c_void,
    /// Element type (`kiln_dtype`).
    pub dtype: c_int,
    /// Number of axes, at most `KILN_MAX_RANK`.
    pub rank: usize,
    /// `rank` extents, batch and channel first.
    pub shape: *const usize,
    /// `rank` strides in elements (not bytes), or NULL for C-contiguous (row-major).
    pub strides: *const i64,
}

/// The dtype with C code `code` (`KILN_F32 = 0`, `KILN_F64`, `KILN_U8`, `KILN_BOOL`).
pub fn dtype_from_code(code: c_int) -> Result<DType, Failure> {
    match code {
        0 => Ok(DType::F32),
        1 => Ok(DType::F64),
        2 => Ok(DType::U8),
        3 => Ok(DType::Bool),
        4 => Ok(DType::I8),
        5 => Ok(DType::U16),
        6 => Ok(DType::I16),
        7 => Ok(DType::I32),
        8 => Ok(DType::U32),
        _ => Err(Failure::new(
            KilnStatus::InvalidArgument,
            format!("unknown dtype code {code} (expected KILN_F32=0, KILN_F64=1, KILN_U8=2, KILN_BOOL=3, KILN_I8=4, KILN_U16=5, KILN_I16=6, KILN_I32=7 or KILN_U32=8)"),
        )),
    }
}

/// The C code of `dtype`.
pub fn dtype_code(dtype: DType) -> c_int {
    match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::U8 => 2,
        DType::Bool => 3,
        DType::I8 => 4,
        DType::U16 => 5,
        DType::I16 => 6,
        DType::I32 => 7,
        DType::U32 => 8,
    }
}

/// Copies a `rank`-element C array into a vector, checking for NULL and `rank`'s range.
///
/// # Safety
/// `ptr`, when not NULL and `rank <= KILN_MAX_RANK`, must point to `rank` readable values.
pub unsafe fn read_dims<T: Copy>(
    ptr: *const T,
    rank: usize,
    what: &str,
) -> Result<Vec<T>, Failure> {
    if rank > KILN_MAX_RANK {
        return Err(Failure::new(
            KilnStatus::Shape,
            format!("{what}: rank {rank} exceeds KILN_MAX_RANK ({KILN_MAX_RANK})"),
        ));
    }
    if rank == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL, and the caller guarantees `rank` (bounded above) readable values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, rank) }.to_vec())
}

/// Reads a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `ptr`, when not NULL, must point to a NUL-terminated string.
pub unsafe fn read_str<'a>(ptr: *const std::ffi::c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Failure::new(KilnStatus::InvalidArgument, format!("{what} is not UTF-8")))
}

/// A buffer whose description has been checked: dtype, shape and byte offsets of each axis.
struct View {
    data: *mut u8,
    dtype: DType,
    shape: Vec<usize>,
    /// Strides in bytes.
    byte_strides: Vec<isize>,
}

impl View {
    /// Checks `buf` (`what` names it in messages) against the expected type `ty`.
    ///
    /// # Safety
    /// `buf.shape` and `buf.strides` (when not NULL) must point to `buf.rank` values.
    unsafe fn new(buf: &KilnBuffer, ty: &TensorType, what: &str) -> Result<View, Failure> {
        if buf.data.is_null() {
            return Err(Failure::null(&format!("{what}.data")));
        }
        let dtype = dtype_from_code(buf.dtype)?;
        // SAFETY: forwarded caller contract on `shape`.
        let shape = unsafe { read_dims(buf.shape, buf.rank, &format!("{what}.shape")) }?;
        if dtype != ty.dtype || shape != ty.shape {
            return Err(Failure::new(
                KilnStatus::Shape,
                format!("{what} is {dtype}{shape:?}, the graph expects {ty}"),
            ));
        }
        let size = dtype.size_bytes() as i64;
        let elem_strides: Vec<i64> = if buf.strides.is_null() {
            let mut s = vec![0i64; shape.len()];
            let mut acc: i64 = 1;
            for (k, &d) in shape.iter().enumerate().rev() {
                s[k] = acc;
                acc = acc.saturating_mul(d as i64);
            }
            s
        } else {
            // SAFETY: forwarded caller contract on `strides`.
            unsafe { read_dims(buf.strides, buf.rank, &format!("{what}.strides")) }?
        };
        let overflow = || {
            Failure::new(
                KilnStatus::Shape,
                format!("{what}: strides overflow the address space"),
            )
        };
        let mut byte_strides = Vec::with_capacity(shape.len());
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&d, &s) in shape.iter().zip(&elem_strides) {
            let b = s.checked_mul(size).ok_or_else(overflow)?;
            let span = (d as i64 - 1).checked_mul(b).ok_or_else(overflow)?;
            if span < 0 {
                lo = lo.checked_add(span).ok_or_else(overflow)?;
            } else {
                hi = hi.checked_add(span).ok_or_else(overflow)?;
            }
            byte_strides.push(isize::try_from(b).map_err(|_| overflow())?);
        }
        // Every addressed byte must be representable relative to `data`.
        isize::try_from(lo).map_err(|_| overflow())?;
        isize::try_from(hi.checked_add(size).ok_or_else(overflow)?).map_err(|_| overflow())?;
        Ok(View {
            data: buf.data.cast(),
            dtype,
            shape,
            byte_strides,
        })
    }

    /// Whether the elements are contiguous in row-major order (strides as `NULL` gives).
    fn is_contiguous(&self) -> bool {
        let mut expect = self.dtype.size_bytes() as isize;
        for (&d, &s) in self.shape.iter().zip(&self.byte_strides).rev() {
            if d != 1 && s != expect {
                return false;
            }
            expect *= d as isize;
        }
        true
    }

    /// Number of elements.
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Calls `f` with the byte offset of every element from `data`, in row-major index
    /// order (an odometer over the outer axes, a run along the last).
    fn for_each_offset(&self, mut f: impl FnMut(isize)) {
        let Some(last) = self.shape.len().checked_sub(1) else {
            f(0);
            return;
        };
        if self.shape.contains(&0) {
            return;
        }
        let (n_last, s_last) = (self.shape[last] as isize, self.byte_strides[last]);
        let mut idx = vec![0usize; last];
        let mut base = 0isize;
        loop {
            for i in 0..n_last {
                f(base + i * s_last);
            }
            let mut k = last;
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                base += self.byte_strides[k];
                if idx[k] < self.shape[k] {
                    break;
                }
                base -= self.byte_strides[k] * self.shape[k] as isize;
                idx[k] = 0;
            }
        }
    }
}

/// Reads the elements of `v` as `T`s (a plain-data type of `v`'s element size).
///
/// # Safety
/// Every element of `v` must lie in readable caller memory holding `T` bit patterns.
unsafe fn gather<T: Copy>(v: &View) -> Vec<T> {
    let n = v.numel();
    let mut out: Vec<T> = Vec::with_capacity(n);
    if v.is_contiguous() {
        // SAFETY: the caller guarantees the n contiguous elements at `data` are readable;
        // `out` has capacity n; T (a float or integer type) accepts any bit pattern; the regions
        // cannot overlap since `out` is fresh.
        unsafe {
            std::ptr::copy_nonoverlapping(
                v.data.cast_const(),
                out.as_mut_ptr().cast::<u8>(),
                n * size_of::<T>(),
            );
            out.set_len(n);
        }
        return out;
    }
    v.for_each_offset(|o| {
        // SAFETY: `View::new` checked the offsets fit in isize; the caller guarantees the
        // memory is readable; `read_unaligned` needs no alignment.
        out.push(unsafe { v.data.offset(o).cast::<T>().read_unaligned() })
    });
    out
}

/// Writes `vals` (row-major, at least numel of them) into the elements of `v`.
///
/// # Safety
/// Every element of `v` must lie in writable caller memory.
unsafe fn scatter<T: Copy>(v: &View, vals: &[T]) {
    let n = v.numel().min(vals.len());
    if v.is_contiguous() {
        // SAFETY: the caller guarantees the n contiguous elements at `data` are writable;
        // `vals` is kiln's own storage, so it does not overlap caller memory.
        unsafe {
            std::ptr::copy_nonoverlapping(vals.as_ptr().cast::<u8>(), v.data, n * size_of::<T>())
        };
        return;
    }
    let mut it = vals.iter();
    v.for_each_offset(|o| {
        if let Some(&x) = it.next() {
            // SAFETY: as in `gather`, for writable memory.
            unsafe { v.data.offset(o).cast::<T>().write_unaligned(x) }
        }
    });
}

/// Copies input buffers into contiguous kiln tensors, checking each against `types`.
///
/// # Safety
/// `bufs`, when not NULL, points to `n` buffers, each describing readable memory.
pub unsafe fn read_inputs(
    bufs: *const KilnBuffer,
    n: usize,
    types: &[TensorType],
) -> Result<Vec<Tensor>, Failure> {
    if n != types.len() {
        return Err(Failure::new(
            KilnStatus::Shape,
            format!(
                "the graph has {} inputs, {n} buffers were given",
                types.len()
            ),
        ));
    }
    if n > 0 && bufs.is_null() {
        return Err(Failure::null("inputs"));
    }
    let mut out = Vec::with_capacity(n);
    for (k, ty) in types.iter().enumerate() {
        // SAFETY: `bufs` holds `n` buffers (caller contract) and k < n.
        let buf = unsafe { &*bufs.add(k) };
        let what = format!("input {k}");
        // SAFETY: forwarded caller contract.
        let v = unsafe { View::new(buf, ty, &what) }?;
        // SAFETY (all four): the caller guarantees the view's memory holds its elements.
        let storage = match v.dtype {
            DType::F32 => Storage::F32(unsafe { gather(&v) }),
            DType::F64 => Storage::F64(unsafe { gather(&v) }),
            DType::U8 => Storage::U8(unsafe { gather(&v) }),
            DType::Bool => Storage::Bool(
                unsafe { gather::<u8>(&v) }
                    .into_iter()
                    .map(|b| (b != 0) as u8)
                    .collect(),
            ),
            DType::I8 => Storage::I8(unsafe { gather(&v) }),
            DType::U16 => Storage::U16(unsafe { gather(&v) }),
            DType::I16 => Storage::I16(unsafe { gather(&v) }),
            DType::I32 => Storage::I32(unsafe { gather(&v) }),
            DType::U32 => Storage::U32(unsafe { gather(&v) }),
        };
        out.push(Tensor::from_storage(storage, &v.shape)?);
    }
    Ok(out)
}

/// Checks the output buffers against `types` (before anything runs).
///
/// # Safety
/// As [`read_inputs`].
unsafe fn output_views(
    bufs: *const KilnBuffer,
    n: usize,
    types: &[TensorType],
) -> Result<Vec<View>, Failure> {
    if n != types.len() {
        return Err(Failure::new(
            KilnStatus::Shape,
            format!(
                "the graph has {} outputs, {n} buffers were given",
                types.len()
            ),
        ));
    }
    if n > 0 && bufs.is_null() {
        return Err(Failure::null("outputs"));
    }
    (0..n)
        .map(|k| {
            // SAFETY: `bufs` holds `n` buffers and k < n; forwarded caller contract.
            unsafe { View::new(&*bufs.add(k), &types[k], &format!("output {k}")) }
        })
        .collect()
}

/// Checked output buffers, written once the run has produced its tensors.
pub struct Outputs(Vec<View>);

impl Outputs {
    /// Checks `n` output buffers at `bufs` against `types`.
    ///
    /// # Safety
    /// `bufs`, when not NULL, points to `n` buffers, each describing writable memory that
    /// stays valid until [`Outputs::write`] returns.
    pub unsafe fn new(
        bufs: *const KilnBuffer,
        n: usize,
        types: &[TensorType],
    ) -> Result<Outputs, Failure> {
        // SAFETY: forwarded caller contract.
        unsafe { output_views(bufs, n, types) }.map(Outputs)
    }

    /// Writes `tensors` (one per buffer, of the checked types) into the buffers.
    pub fn write(&self, tensors: &[Tensor]) -> Result<(), Failure> {
        if tensors.len() != self.0.len() {
            return Err(Failure::new(
                KilnStatus::Internal,
                format!(
                    "the run returned {} outputs, expected {}",
                    tensors.len(),
                    self.0.len()
                ),
            ));
        }
        for (v, t) in self.0.iter().zip(tensors) {
            let t = if t.is_contiguous() && t.offset() == 0 {
                t.clone()
            } else {
                t.to_contiguous()
            };
            if t.dtype() != v.dtype || t.shape() != v.shape.as_slice() {
                return Err(Failure::new(
                    KilnStatus::Internal,
                    format!(
                        "the run returned {}{:?}, expected {}{:?}",
                        t.dtype(),
                        t.shape(),
                        v.dtype,
                        v.shape
                    ),
                ));
            }
            let storage: &Arc<Storage> = t.storage();
            if storage.len() < t.numel() {
                return Err(Failure::new(
                    KilnStatus::Internal,
                    "output storage shorter than its shape",
                ));
            }
            // SAFETY (all arms): `Outputs::new`'s contract makes every element writable; the
            // slices hold exactly numel elements in row-major order (contiguous, offset 0).
            match &**storage {
                Storage::F32(x) => unsafe { scatter(v, x) },
                Storage::F64(x) => unsafe { scatter(v, x) },
                Storage::U8(x) | Storage::Bool(x) => unsafe { scatter(v, x) },
                Storage::I8(x) => unsafe { scatter(v, x) },
                Storage::U16(x) => unsafe { scatter(v, x) },
                Storage::I16(x) => unsafe { scatter(v, x) },
                Storage::I32(x) => unsafe { scatter(v, x) },
                Storage::U32(x) => unsafe { scatter(v, x) },
            }
        }
        Ok(())
    }
}
