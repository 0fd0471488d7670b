//! The C ABI called from Rust: a C-built operator run on C-style buffers (contiguous and with
//! negative element strides) gives the bits of the same operator built and run directly with
//! kiln's Rust API (eager oracle and fused engine).
//!
//! Exactness: compares `to_bits()` of every element. Limits: one operator family (median and
//! grey opening on f32 and u8); the C test (tests/c/test_kiln.c) covers the rest.

use std::ffi::c_int;
use std::ptr;

use kiln_capi::buffer::KilnBuffer;
use kiln_capi::engine::{
    kiln_compile, kiln_compiled_free, kiln_engine_free, kiln_engine_new, kiln_run,
};
use kiln_capi::graph::kiln_graph_free;
use kiln_capi::op::{
    kiln_op_build, kiln_op_free, kiln_op_new, kiln_op_set_int, kiln_op_set_string,
};
use kiln_capi::{KilnCompiled, KilnEngine, KilnGraph, KilnOp, KilnStatus};
use kiln_ir::{DType, TensorType};
use kiln_runtime::fused::Engine;
use kiln_runtime::{eager, Tensor};

const SHAPE: [usize; 4] = [1, 2, 9, 11];

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 29 {
            0 => f32::NAN,
            1 => -0.0,
            7 => f32::INFINITY,
            _ => ((i * 37) % 23) as f32 - 11.5,
        })
        .collect()
}

/// Builds `name` with `size=3` and `mode` through the C ABI and compiles it.
fn c_compiled(
    name: &std::ffi::CStr,
    mode: &std::ffi::CStr,
    dtype: c_int,
) -> (*mut KilnEngine, *mut KilnCompiled) {
    let mut engine: *mut KilnEngine = ptr::null_mut();
    let mut op: *mut KilnOp = ptr::null_mut();
    let mut graph: *mut KilnGraph = ptr::null_mut();
    let mut compiled: *mut KilnCompiled = ptr::null_mut();
    // SAFETY: every pointer passed is a valid out-pointer, a NUL-terminated string, or a
    // handle just returned by the library; SHAPE holds 4 extents.
    unsafe {
        assert_eq!(kiln_engine_new(&mut engine), KilnStatus::Ok);
        assert_eq!(kiln_op_new(name.as_ptr(), &mut op), KilnStatus::Ok);
        assert_eq!(kiln_op_set_int(op, c"size".as_ptr(), 3), KilnStatus::Ok);
        assert_eq!(
            kiln_op_set_string(op, c"mode".as_ptr(), mode.as_ptr()),
            KilnStatus::Ok
        );
        assert_eq!(
            kiln_op_build(op, dtype, SHAPE.as_ptr(), 4, &mut graph),
            KilnStatus::Ok
        );
        assert_eq!(kiln_compile(engine, graph, &mut compiled), KilnStatus::Ok);
        kiln_op_free(op);
        kiln_graph_free(graph);
    }
    (engine, compiled)
}

fn rust_reference(name: &str, mode: &str, input: &Tensor) -> (Tensor, Tensor) {
    let params = vec![
        ("size".to_string(), "3".to_string()),
        ("mode".to_string(), mode.to_string()),
    ];
    let ty = TensorType {
        dtype: input.dtype(),
        shape: SHAPE.to_vec(),
    };
    let g = kiln_ops::build_op(name, &params, &ty).unwrap();
    let e = eager::run(&g, std::slice::from_ref(input))
        .unwrap()
        .remove(0);
    let f = Engine::new()
        .run(&g, std::slice::from_ref(input))
        .unwrap()
        .remove(0);
    (e, f)
}

#[test]
fn f32_median_through_the_c_abi_matches_rust_with_negative_strides() {
    let n: usize = SHAPE.iter().product();
    let x = data(n);
    let (e, f) = rust_reference(
        "median_filter",
        "mirror",
        &Tensor::from_f32(x.clone(), &SHAPE).unwrap(),
    );
    let (engine, compiled) = c_compiled(c"median_filter", c"mirror", 0);

    // Every row stored reversed: element (b, c, y, x) at row start + (10 - x).
    let mut rev = x.clone();
    for row in rev.chunks_mut(11) {
        row.reverse();
    }
    let strides: [i64; 4] = [198, 99, 11, -1];
    let mut out = vec![0f32; n];
    let inb = KilnBuffer {
        // The element at index [0,0,0,0] is the last of the first stored row.
        data: rev.as_mut_ptr().wrapping_add(10).cast(),
        dtype: 0,
        rank: 4,
        shape: SHAPE.as_ptr(),
        strides: strides.as_ptr(),
    };
    let outb = KilnBuffer {
        data: out.as_mut_ptr().cast(),
        dtype: 0,
        rank: 4,
        shape: SHAPE.as_ptr(),
        strides: ptr::null(),
    };
    // SAFETY: both buffers describe memory of `rev`/`out` (every addressed element lies in
    // them: the reversed rows reach back to each stored row's start), alive for the call.
    let s = unsafe { kiln_run(compiled, &inb, 1, &outb, 1) };
    assert_eq!(s, KilnStatus::Ok);
    // Scalars hold their bits, so equality is bit equality (NaN payloads, signed zeros).
    assert_eq!(e.to_scalars(), f.to_scalars(), "Rust eager vs fused");
    let c = Tensor::from_f32(out, &SHAPE).unwrap();
    assert_eq!(c.to_scalars(), e.to_scalars(), "C ABI vs Rust eager");
    // SAFETY: handles from the library, freed once.
    unsafe {
        kiln_compiled_free(compiled);
        kiln_engine_free(engine);
    }
}

#[test]
fn u8_opening_through_the_c_abi_matches_rust() {
    let n: usize = SHAPE.iter().product();
    let mut x: Vec<u8> = (0..n).map(|i| ((i * 53) % 251) as u8).collect();
    let input = Tensor::from_u8(x.clone(), &SHAPE).unwrap();
    let (e, _) = rust_reference("grey_opening", "nearest", &input);
    assert_eq!(e.dtype(), DType::U8);
    let (engine, compiled) = c_compiled(c"grey_opening", c"nearest", 2);
    let mut out = vec![0u8; n];
    let buf = |p: *mut u8| KilnBuffer {
        data: p.cast(),
        dtype: 2,
        rank: 4,
        shape: SHAPE.as_ptr(),
        strides: ptr::null(),
    };
    // SAFETY: contiguous buffers over `x` and `out`, n elements each, alive for the call.
    let s = unsafe { kiln_run(compiled, &buf(x.as_mut_ptr()), 1, &buf(out.as_mut_ptr()), 1) };
    assert_eq!(s, KilnStatus::Ok);
    assert_eq!(
        Tensor::from_u8(out, &SHAPE).unwrap().to_scalars(),
        e.to_scalars()
    );
    // SAFETY: handles from the library, freed once.
    unsafe {
        kiln_compiled_free(compiled);
        kiln_engine_free(engine);
    }
}

/// The integer dtype codes appended after the first four: each round-trips, and an i16
/// median through the C ABI (code 6) matches the Rust engine bit for bit.
#[test]
fn i16_median_through_the_c_abi_matches_rust() {
    use kiln_capi::buffer::{dtype_code, dtype_from_code};
    for (code, d) in [
        (0, DType::F32),
        (1, DType::F64),
        (2, DType::U8),
        (3, DType::Bool),
        (4, DType::I8),
        (5, DType::U16),
        (6, DType::I16),
        (7, DType::I32),
        (8, DType::U32),
    ] {
        assert_eq!(dtype_code(d), code);
        assert_eq!(dtype_from_code(code).ok(), Some(d));
    }
    assert!(dtype_from_code(9).is_err());
    let n: usize = SHAPE.iter().product();
    let mut x: Vec<i16> = (0..n)
        .map(|i| [i16::MIN, -1, 0, 1, i16::MAX, (i as i16).wrapping_mul(4099)][i % 6])
        .collect();
    let input = Tensor::from_storage(kiln_runtime::Storage::I16(x.clone()), &SHAPE).unwrap();
    let (e, _) = rust_reference("median_filter", "reflect", &input);
    assert_eq!(e.dtype(), DType::I16);
    let (engine, compiled) = c_compiled(c"median_filter", c"reflect", 6);
    let mut out = vec![0i16; n];
    let buf = |p: *mut i16| KilnBuffer {
        data: p.cast(),
        dtype: 6,
        rank: 4,
        shape: SHAPE.as_ptr(),
        strides: ptr::null(),
    };
    // SAFETY: contiguous buffers over `x` and `out`, n elements each, alive for the call.
    let s = unsafe { kiln_run(compiled, &buf(x.as_mut_ptr()), 1, &buf(out.as_mut_ptr()), 1) };
    assert_eq!(s, KilnStatus::Ok);
    let got = Tensor::from_storage(kiln_runtime::Storage::I16(out), &SHAPE).unwrap();
    assert_eq!(got.to_scalars(), e.to_scalars());
    // SAFETY: handles from the library, freed once.
    unsafe {
        kiln_compiled_free(compiled);
        kiln_engine_free(engine);
    }
}
