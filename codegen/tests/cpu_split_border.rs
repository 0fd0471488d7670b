//! Big stages compile their border columns as a separate function in a module built for
//! compile speed (`rowfn::split_border`), called per row by address: every border mode,
//! widths from 1 up, strided rows, f32 (vector interior) and f64 (scalar), against the
//! scalar reference.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::compile;
use kiln_codegen::kernel::{Source, ValueId};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{BinaryOp, Border, DType, Scalar};

const IN0: Source = Source::Input(0);

/// A 3x7 window: sort-ish comparator layers over the 21 loads, then a sum of a few of the
/// results (well over 96 instructions).
fn big_stage(d: DType, border: Border) -> StageB {
    let mut s = StageB::default();
    let mut v: Vec<ValueId> = Vec::new();
    for dy in -1..=1 {
        for dx in -3..=3 {
            v.push(s.load(IN0, d, &[dy, dx], border));
        }
    }
    for round in 0..6 {
        let start = round % 2;
        let mut i = start;
        while i + 1 < v.len() {
            let lo = s.bin(BinaryOp::Min, v[i], v[i + 1]);
            let hi = s.bin(BinaryOp::Max, v[i], v[i + 1]);
            v[i] = lo;
            v[i + 1] = hi;
            i += 2;
        }
    }
    let mut acc = v[3];
    for &x in &v[9..13] {
        acc = s.bin(BinaryOp::Add, acc, x);
    }
    let r = s.bin(BinaryOp::Sub, acc, v[20]);
    s.insts.truncate(r.0 as usize + 1);
    s
}

fn modes(d: DType) -> [Border; 5] {
    Border::all(match d {
        DType::F32 => Scalar::F32(0x7fc0_0123),
        _ => Scalar::f64(-3.5),
    })
}

#[test]
fn split_border_functions_match_the_reference() {
    for d in [DType::F32, DType::F64] {
        for border in modes(d) {
            let s = big_stage(d, border);
            assert!(s.insts.len() > 96, "{}", s.insts.len());
            let res = ValueId(s.insts.len() as u32 - 1);
            let k = stencil(4, &[d], s.finish(res));
            let ck = compile(&k, &CompileOptions::default()).unwrap();
            assert!(
                ck.describe().contains("separate fast-compiling function"),
                "{}",
                ck.describe()
            );
            for w in [1, 2, 3, 6, 7, 8, 11, 17, 30] {
                let h = 5;
                let mut r = Rng(w as u64 * 31 + 7);
                let inputs = vec![rand_img(&mut r, d, h, w, false)];
                let want = ref_all(&k, &inputs, h, w);
                for lay in [
                    DENSE,
                    Layout {
                        src_stride: 3,
                        out_stride: 1,
                    },
                    Layout {
                        src_stride: 1,
                        out_stride: 2,
                    },
                ] {
                    let got = run_all(&ck, &inputs, h, w, lay);
                    if let Some(m) = diff(&got, &want) {
                        panic!("{d} {border} w={w} {lay:?}: {m}\n{}", ck.describe());
                    }
                }
            }
        }
    }
}

#[test]
fn planted_border_fault_reaches_the_split_function() {
    // The fuzzer's right-edge border fault must still show when the border columns are
    // compiled apart.
    let d = DType::F32;
    let s = big_stage(d, Border::Reflect);
    let res = ValueId(s.insts.len() as u32 - 1);
    let k = stencil(4, &[d], s.finish(res));
    let ck = compile(
        &k,
        &CompileOptions {
            fault: Some(Fault::WrongBorderRightEdge),
            ..Default::default()
        },
    )
    .unwrap();
    let (h, w) = (4, 19);
    let mut r = Rng(3);
    let inputs = vec![rand_img(&mut r, d, h, w, true)];
    let want = ref_all(&k, &inputs, h, w);
    assert!(diff(&run_all(&ck, &inputs, h, w, DENSE), &want).is_some());
}
