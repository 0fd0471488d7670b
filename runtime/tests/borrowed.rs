//! Borrowed tensors (`Tensor::from_raw_parts`): the fused engine reads a caller's strided
//! memory in place and gives the bits of the same values in owned, contiguous storage;
//! eager, element reads and copies read it too; bad raw parts are typed errors.

mod common;

use common::window_data;
use kiln_ir::{Border, DType, Footprint, GraphBuilder, ReduceOp};
use kiln_runtime::eager;
use kiln_runtime::fused::{inputs_clean, Engine};
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

/// A 3x3 max then a 3x1 min under reflect, on f32 `[1, 2, h, w]`.
fn graph(shape: &[usize]) -> kiln_ir::Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let y = b
        .window_reduce(
            x,
            ReduceOp::Max,
            &Footprint::scipy_box(&[3, 3], &[0, 0]),
            Border::Reflect,
        )
        .unwrap();
    let z = b
        .window_reduce(
            y,
            ReduceOp::Min,
            &Footprint::scipy_box(&[3, 1], &[0, 0]),
            Border::Reflect,
        )
        .unwrap();
    b.finish(&[z]).unwrap()
}

/// The f32 elements of an owned tensor's storage.
fn values(t: &Tensor) -> Vec<f32> {
    match &**t.storage() {
        Storage::F32(v) => v.clone(),
        _ => panic!("not f32"),
    }
}

#[test]
fn the_engine_reads_strided_borrowed_memory_in_place() {
    // A caller's buffer holding a [1, 2, 13, 11] view with row pitch 16 (padding columns
    // set to NaN, never read) and its channels 13 rows * 16 apart, plus a transposed view.
    let shape = [1, 2, 13, 11];
    let src = window_data(&shape, 7, true);
    let mut buf = vec![f32::NAN; 2 * 13 * 16];
    let vals = values(&src);
    for c in 0..2 {
        for y in 0..13 {
            for x in 0..11 {
                buf[c * 208 + y * 16 + x] = vals[(c * 13 + y) * 11 + x];
            }
        }
    }
    let engine = Engine::new().with_threads(2);
    let want = eager::run(&graph(&shape), std::slice::from_ref(&src)).unwrap();
    // SAFETY: `buf` outlives `t` (dropped at the end of this block) and is not written
    // while it lives; every element of the view is inside `buf`.
    unsafe {
        let t = Tensor::from_raw_parts(DType::F32, buf.as_ptr().cast(), &shape, &[0, 208, 16, 1])
            .unwrap();
        assert!(t.is_borrowed() && t.data_ptr() == buf.as_ptr().cast());
        assert_eq!(first_difference(&t, &src), None, "element reads");
        let got = engine
            .run(&graph(&shape), std::slice::from_ref(&t))
            .unwrap();
        assert_eq!(
            first_difference(&got[0], &want[0]),
            None,
            "fused on a borrowed view"
        );
        let c = engine.compile(&graph(&shape)).unwrap();
        let got = c.run(&engine, std::slice::from_ref(&t)).unwrap();
        assert_eq!(first_difference(&got[0], &want[0]), None);
        assert_eq!(
            c.kept_input_copy_bytes(),
            0,
            "rows with unit stride are read in place"
        );
        let e = eager::run(&graph(&shape), std::slice::from_ref(&t)).unwrap();
        assert_eq!(first_difference(&e[0], &want[0]), None, "eager copies it");
        let owned = t.to_contiguous();
        assert!(!owned.is_borrowed());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&values(&owned)), bits(&vals));
        assert!(t.clone().into_unique_storage().is_err());
        // Clean checks walk the view's elements only (the padding NaN are not read).
        let clean = window_data(&[1, 1, 4, 4], 3, false);
        let cv = values(&clean);
        let tc = Tensor::from_raw_parts(
            DType::F32,
            cv.as_ptr().cast(),
            &[1, 1, 4, 4],
            &[16, 16, 4, 1],
        )
        .unwrap();
        assert!(inputs_clean(std::slice::from_ref(&clean)));
        assert!(inputs_clean(&[tc]));
        let dirty = Tensor::from_raw_parts(
            DType::F32,
            buf.as_ptr().cast(),
            &[1, 1, 2, 16],
            &[32, 32, 16, 1],
        )
        .unwrap();
        assert!(
            !inputs_clean(&[dirty]),
            "the NaN padding, read as a contiguous view"
        );
    }
    // The transposed view (strides swapped) is copied by the engine into a kept buffer and
    // gives the transposed image's result.
    let tshape = [1, 2, 11, 13];
    let transposed = src.permuted(&[0, 1, 3, 2]).unwrap().to_contiguous();
    let want = eager::run(&graph(&tshape), &[transposed]).unwrap();
    let c = engine.compile(&graph(&tshape)).unwrap();
    // SAFETY: as above; the view's elements are inside `buf`.
    let got = unsafe {
        let t = Tensor::from_raw_parts(DType::F32, buf.as_ptr().cast(), &tshape, &[0, 208, 1, 16])
            .unwrap();
        c.run(&engine, &[t]).unwrap()
    };
    assert_eq!(first_difference(&got[0], &want[0]), None, "transposed");
    assert_eq!(c.kept_input_copy_bytes(), 2 * 11 * 13 * 4);
}

#[test]
fn bad_raw_parts_are_typed_errors() {
    let v = [0f32; 8];
    let p: *const u8 = v.as_ptr().cast();
    // SAFETY: every call is rejected before a tensor exists, or views elements of `v`.
    unsafe {
        assert!(
            Tensor::from_raw_parts(DType::F32, std::ptr::null(), &[1, 1, 2], &[0, 0, 1]).is_err()
        );
        assert!(Tensor::from_raw_parts(DType::F32, p.add(1), &[1, 1, 2], &[0, 0, 1]).is_err());
        assert!(Tensor::from_raw_parts(DType::F32, p, &[1, 1, 2], &[0, 1]).is_err());
        assert!(Tensor::from_raw_parts(DType::F32, p, &[1, 0, 2], &[0, 0, 1]).is_err());
        assert!(Tensor::from_raw_parts(DType::F32, p, &[2, 2], &[usize::MAX, 1]).is_err());
        assert!(Tensor::from_raw_parts(DType::F32, p, &[1, 2, 4], &[0, 4, 1]).is_ok());
    }
}
