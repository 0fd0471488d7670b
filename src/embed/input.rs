//! How an `ndarray` view becomes the kernels' input: read in place when its strides allow,
//! else copied once.
//!
//! Scope: [`input_tensor`] maps a view, permuted by its [`Layout`], onto kiln's
//! `[1, N, S1..Sd]`: the spatial axes keep the view's strides,
//! and the non-spatial axes fold into the channel axis `N` when their strides chain (each
//! is the next one's stride times its extent, extents of 1 ignored); axes of extent 1 get
//! the stride a row-major layout gives them (a contiguous view stays contiguous). Then the tensor
//! borrows the caller's memory ([`Tensor::from_raw_parts`]): transposed views, slices with
//! steps, and broadcast (zero-stride) views are read in place. Exactness: elements are read
//! bit for bit where they are; a copy is the same elements in row-major order. Limits: a
//! view with a negative stride, or non-spatial axes that do not chain, is copied once
//! (kiln's strides are non-negative); the row functions read rows with unit stride, so a
//! view whose last spatial axis is strided is copied once more by the engine (into a
//! buffer kept between runs, see `CompiledGraph::kept_input_copy_bytes`).

use kiln_runtime::Tensor;
use ndarray::ArrayViewD;

use super::element::Element;
use super::error::Result;
use super::layout::Layout;

/// The kiln input for `x` under `layout`, and whether it was copied (`true`) or borrows
/// `x`'s memory (`false`). A borrowing tensor must be dropped before `x`'s borrow ends:
/// the facade hands it to one run, which keeps no input past its return.
pub fn input_tensor<T: Element>(x: &ArrayViewD<'_, T>, layout: &Layout) -> Result<(Tensor, bool)> {
    let v = x.view().permuted_axes(layout.perm.clone());
    if let Some(strides) = kiln_strides(v.shape(), v.strides(), layout) {
        // SAFETY: `v` borrows `x`'s elements for `'_` (shared, so nobody writes them while
        // the borrow lasts); `strides` address exactly the elements of `v` from its first
        // element `v.as_ptr()` (the channel axis steps over the folded axes' elements, the
        // batch axis has extent 1), all non-negative; `T` is one of kiln's dtypes with its
        // layout (bool is a 0/1 byte). The tensor is dropped by the caller's run before `x`
        // is released (see this function's docs).
        let t = unsafe {
            Tensor::from_raw_parts(
                T::DTYPE,
                v.as_ptr().cast::<u8>(),
                &layout.kiln_shape,
                &strides,
            )
        }?;
        return Ok((t, false));
    }
    let data: Vec<T> = match v.as_slice() {
        Some(s) => s.to_vec(),
        None => v.iter().copied().collect(),
    };
    let t = Tensor::from_storage(T::into_storage(data), &layout.kiln_shape)?;
    Ok((t, true))
}

/// Element strides of the kiln shape `[1, N, S..]` over a permuted view of `shape` and
/// `strides` (non-spatial axes first), or `None` when a stride is negative or the
/// non-spatial axes cannot fold into one.
fn kiln_strides(shape: &[usize], strides: &[isize], layout: &Layout) -> Option<Vec<usize>> {
    if strides.iter().any(|&s| s < 0) || shape.len() != strides.len() {
        return None;
    }
    let spatial = layout.kiln_shape.len() - 2;
    let batch = shape.len().checked_sub(spatial)?;
    // The non-spatial axes of extent > 1, outermost first: each must step over the next.
    let outer: Vec<(usize, usize)> = (0..batch)
        .filter(|&k| shape[k] > 1)
        .map(|k| (shape[k], strides[k] as usize))
        .collect();
    for w in outer.windows(2) {
        if w[0].1 != w[1].1.checked_mul(w[1].0)? {
            return None;
        }
    }
    let mut out = vec![0, outer.last().map_or(0, |&(_, s)| s)];
    out.extend(strides[batch..].iter().map(|&s| s as usize));
    // Axes of extent 1 (the batch axis, a channel axis of 1) take the stride a row-major
    // layout would give them, so a contiguous view reads as contiguous.
    let ks = &layout.kiln_shape;
    for k in (0..2).rev() {
        if ks[k] == 1 {
            out[k] = out[k + 1].checked_mul(ks[k + 1])?;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, ArrayD, IxDyn};

    #[test]
    fn views_borrow_unless_a_stride_is_negative_or_axes_do_not_fold() {
        let a = ArrayD::<f32>::from_shape_fn(IxDyn(&[4, 5, 6]), |i| {
            (i[0] * 30 + i[1] * 6 + i[2]) as f32
        });
        let all = Layout::new(&[4, 5, 6], None, 1).unwrap();
        let (t, copied) = input_tensor(&a.view(), &all).unwrap();
        assert!(!copied && t.is_borrowed() && t.data_ptr() == a.as_ptr().cast());
        assert_eq!(t.strides(), &[120, 120, 30, 6, 1]);
        // Transposed and stepped views borrow; element values are the view's.
        let tr = a.view().reversed_axes();
        let lt = Layout::new(tr.shape(), None, 1).unwrap();
        let (t, copied) = input_tensor(&tr, &lt).unwrap();
        assert!(!copied);
        assert_eq!(t.strides(), &[6, 6, 1, 6, 30]);
        assert!(!t.is_contiguous());
        let st = a.slice(s![.., ..;2, 1..;3]).into_dyn();
        let ls = Layout::new(st.shape(), None, 1).unwrap();
        let (t, copied) = input_tensor(&st, &ls).unwrap();
        assert!(!copied);
        let got: Vec<u32> = t.contiguous_storage().get_all_f32();
        let want: Vec<u32> = st.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want);
        // Two batch axes fold when they chain (axes = last one) ...
        let l1 = Layout::new(&[4, 5, 6], Some(&[-1]), 1).unwrap();
        let (t, copied) = input_tensor(&a.view(), &l1).unwrap();
        assert!(!copied);
        assert_eq!(
            (t.shape(), t.strides()),
            (&[1, 20, 6][..], &[120, 6, 1][..])
        );
        assert!(t.is_contiguous());
        // ... and are copied when they do not (a step along the inner batch axis).
        let sb = a.slice(s![.., ..;2, ..]).into_dyn();
        let lb = Layout::new(sb.shape(), Some(&[-1]), 1).unwrap();
        let (t, copied) = input_tensor(&sb, &lb).unwrap();
        assert!(copied && !t.is_borrowed());
        // A negative stride is copied.
        let neg = a.slice(s![.., ..;-1, ..]).into_dyn();
        let (t, copied) = input_tensor(&neg, &all).unwrap();
        assert!(copied && !t.is_borrowed());
    }

    trait AllF32 {
        fn get_all_f32(&self) -> Vec<u32>;
    }

    impl AllF32 for kiln_runtime::Storage {
        fn get_all_f32(&self) -> Vec<u32> {
            match self {
                kiln_runtime::Storage::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
                _ => Vec::new(),
            }
        }
    }
}
