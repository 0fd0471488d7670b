//! Scan and axis-reduce kernels of the CPU backend: the fold (innermost axis) and the
//! combine step (outer axes) against a left fold of the reference ops.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::{compile, CpuBody};
use kiln_codegen::kernel::{Kernel, KernelBody};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{DType, ReduceOp, Scalar};

fn ops_for(d: DType) -> Vec<ReduceOp> {
    match d {
        DType::Bool => vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Any, ReduceOp::All],
        _ => vec![ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum],
    }
}

fn bytes(v: &[Scalar], stride: usize) -> Vec<u8> {
    let es = v.first().map_or(1, |s| s.dtype().size_bytes());
    let mut b = vec![0xa5u8; v.len().max(1) * stride.max(1) * es + 8];
    for (i, s) in v.iter().enumerate() {
        b[i * stride * es..][..es].copy_from_slice(&s.to_le_bytes());
    }
    b
}

fn read(d: DType, b: &[u8], n: usize, stride: usize) -> Vec<Scalar> {
    let es = d.size_bytes();
    (0..n)
        .map(|i| {
            let p = &b[i * stride * es..];
            match d {
                DType::F32 => Scalar::F32(u32::from_le_bytes(p[..4].try_into().unwrap())),
                DType::F64 => Scalar::F64(u64::from_le_bytes(p[..8].try_into().unwrap())),
                DType::U8 => Scalar::U8(p[0]),
                DType::Bool => Scalar::Bool(p[0] != 0),
            }
        })
        .collect()
}

fn kernel(d: DType, op: ReduceOp, scan: bool) -> Kernel {
    Kernel {
        rank: 4,
        inputs: vec![d],
        output: d,
        body: if scan {
            KernelBody::Scan { axis: 3, op }
        } else {
            KernelBody::AxisReduce { axis: 3, op }
        },
    }
}

#[test]
fn fold_and_combine_match_left_folds() {
    for d in DType::ALL {
        for op in ops_for(d) {
            for scan in [true, false] {
                let k = kernel(d, op, scan);
                let ck = compile(&k, &CompileOptions::default()).unwrap();
                let CpuBody::AlongAxis {
                    fold,
                    combine,
                    scan: s2,
                    ..
                } = ck.body
                else {
                    panic!()
                };
                assert_eq!(s2, scan);
                for w in [1usize, 2, 3, 7, 33] {
                    let mut r = Rng(w as u64 * 13 + 1);
                    let src: Vec<Scalar> = (0..w).map(|_| rand_scalar(&mut r, d, false)).collect();
                    let src2: Vec<Scalar> = (0..w).map(|_| rand_scalar(&mut r, d, false)).collect();
                    // Reference left fold / scan.
                    let mut want = vec![src[0]];
                    for &x in &src[1..] {
                        let acc = *want.last().unwrap();
                        want.push(ref_binary(op.combiner(), acc, x));
                    }
                    for (ss, os) in [(1usize, 1usize), (3, 2)] {
                        let sb = bytes(&src, ss);
                        let mut ob = vec![0x5au8; w * os * d.size_bytes() + 8];
                        // SAFETY: `sb` holds `w` elements at stride `ss`, `ob` holds `w`
                        // elements at stride `os`; `w >= 1`.
                        unsafe {
                            fold(
                                sb.as_ptr(),
                                ss as i64,
                                ob.as_mut_ptr(),
                                os as i64,
                                w as i64,
                                scan as i64,
                            )
                        };
                        if scan {
                            assert_eq!(read(d, &ob, w, os), want, "scan {d} {op:?} w={w}");
                        } else {
                            assert_eq!(
                                read(d, &ob, 1, os)[0],
                                want[w - 1],
                                "fold {d} {op:?} w={w}"
                            );
                        }
                        // Combine: elementwise op(acc, src) with acc and src interleaved
                        // in other strides.
                        let ab = bytes(&src2, os);
                        let mut cb = vec![0x5au8; w * ss * d.size_bytes() + 8];
                        // SAFETY: `ab` (stride `os`), `sb` (stride `ss`) and `cb`
                        // (stride `ss`) all hold `w` elements.
                        unsafe {
                            combine(
                                ab.as_ptr(),
                                os as i64,
                                sb.as_ptr(),
                                ss as i64,
                                cb.as_mut_ptr(),
                                ss as i64,
                                w as i64,
                            )
                        };
                        let want_c: Vec<Scalar> = src2
                            .iter()
                            .zip(&src)
                            .map(|(&a, &b)| ref_binary(op.combiner(), a, b))
                            .collect();
                        assert_eq!(read(d, &cb, w, ss), want_c, "combine {d} {op:?} w={w}");
                    }
                }
            }
        }
    }
}

#[test]
fn scan_keeps_first_element_bits_and_faults_apply() {
    // out[0] = x[0] bit for bit (a NaN payload stays), later NaNs are canonical.
    let k = kernel(DType::F32, ReduceOp::Min, true);
    let src = [
        Scalar::F32(0xffc0_0001),
        Scalar::f32(1.0),
        Scalar::F32(0x7f80_0001),
        Scalar::f32(-0.0),
    ];
    let run = |fault: Option<Fault>| {
        let ck = compile(
            &k,
            &CompileOptions {
                fault,
                ..Default::default()
            },
        )
        .unwrap();
        let CpuBody::AlongAxis { fold, .. } = ck.body else {
            panic!()
        };
        let sb = bytes(&src, 1);
        let mut ob = vec![0u8; 16];
        // SAFETY: four f32 in and out, stride 1.
        unsafe { fold(sb.as_ptr(), 1, ob.as_mut_ptr(), 1, 4, 1) };
        read(DType::F32, &ob, 4, 1)
    };
    let nan = Scalar::F32(0x7fc0_0000);
    assert_eq!(run(None), vec![src[0], nan, nan, nan]);
    assert_ne!(run(Some(Fault::DropNanMask)), run(None));
}

#[test]
fn bad_along_kernels_are_errors() {
    let bad = [
        kernel(DType::Bool, ReduceOp::Sum, true),
        kernel(DType::F32, ReduceOp::Any, false),
        Kernel {
            rank: 4,
            inputs: vec![DType::F32],
            output: DType::F32,
            body: KernelBody::Scan {
                axis: 4,
                op: ReduceOp::Sum,
            },
        },
        Kernel {
            rank: 4,
            inputs: vec![DType::F32],
            output: DType::U8,
            body: KernelBody::Scan {
                axis: 2,
                op: ReduceOp::Sum,
            },
        },
    ];
    for k in bad {
        assert!(compile(&k, &CompileOptions::default()).is_err(), "{k:?}");
    }
}
