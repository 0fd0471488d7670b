//! Border modes, in-range tests, strides and multi-stage kernels of the CPU backend.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::{compile, CpuBody, SlotKind};
use kiln_codegen::kernel::{Kernel, KernelBody, Op, Source};
use kiln_codegen::CompileOptions;
use kiln_ir::{BinaryOp, Border, DType, Scalar};

const IN0: Source = Source::Input(0);

fn modes(d: DType) -> [Border; 5] {
    let c = match d {
        DType::F32 => Scalar::F32(0x7fc0_0123), // a NaN payload, must arrive unchanged
        DType::F64 => Scalar::f64(-3.5),
        DType::U8 => Scalar::U8(200),
        DType::Bool => Scalar::Bool(true),
        d => Scalar::wrap_int(d, -3).unwrap(),
    };
    Border::all(c)
}

#[test]
fn every_border_mode_width_and_offset_rank3() {
    for d in [DType::F32, DType::U8, DType::F64, DType::Bool] {
        for border in modes(d) {
            for dx in -7..=7 {
                let mut s = StageB::default();
                let a = s.load(IN0, d, &[dx], border);
                let k = stencil(3, &[d], s.finish(a));
                let ck = compile(&k, &CompileOptions::default()).unwrap();
                for w in [1, 2, 3, 5, 17] {
                    let mut r = Rng(w as u64 + 1);
                    let inputs = vec![rand_img(&mut r, d, 2, w, false)];
                    let want = ref_all(&k, &inputs, 2, w);
                    for lay in [
                        DENSE,
                        Layout {
                            src_stride: 3,
                            out_stride: 2,
                        },
                    ] {
                        let got = run_all(&ck, &inputs, 2, w, lay);
                        if let Some(m) = diff(&got, &want) {
                            panic!("{d} {border} dx={dx} w={w} {lay:?}: {m}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn border_modes_rank4_with_outer_offsets() {
    for d in [DType::F32, DType::U8] {
        for border in modes(d) {
            for (dy, dx) in [(-7, 7), (-1, -1), (0, -7), (2, 3), (7, -2), (1, 0)] {
                let mut s = StageB::default();
                let a = s.load(IN0, d, &[dy, dx], border);
                let k = stencil(4, &[d], s.finish(a));
                let ck = compile(&k, &CompileOptions::default()).unwrap();
                for (h, w) in [(1, 1), (3, 2), (4, 5), (5, 17)] {
                    let mut r = Rng(h as u64 * 31 + w as u64);
                    let inputs = vec![rand_img(&mut r, d, h, w, false)];
                    let want = ref_all(&k, &inputs, h, w);
                    let got = run_all(&ck, &inputs, h, w, DENSE);
                    if let Some(m) = diff(&got, &want) {
                        panic!("{d} {border} ({dy},{dx}) {h}x{w}: {m}");
                    }
                }
            }
        }
    }
}

#[test]
fn many_loads_mixed_modes_share_slots() {
    // Sum of loads under every mode at several offsets: slot sharing and per-load remapping.
    let d = DType::F32;
    let mut s = StageB::default();
    let mut acc = None;
    for (i, border) in modes(d).into_iter().enumerate() {
        let border = if let Border::Constant(_) = border {
            Border::Constant(Scalar::f32(0.25))
        } else {
            border
        };
        for dx in [-3i64, 0, 2, 6] {
            let l = s.load(IN0, d, &[(i as i64 % 3) - 1, dx], border);
            let scale = s.push(Op::Const(Scalar::f32((i * 4 + 1) as f32)), d);
            let t = s.bin(BinaryOp::Mul, l, scale);
            acc = Some(match acc {
                None => t,
                Some(a) => s.bin(BinaryOp::Add, a, t),
            });
        }
    }
    let k = stencil(4, &[d], s.finish(acc.unwrap()));
    let ck = compile(&k, &CompileOptions::default()).unwrap();
    let CpuBody::Stencil(st) = &ck.body else {
        panic!()
    };
    // five modes at three distinct outer offsets: one slot per (mode, dy) pair
    assert_eq!(st[0].slots.len(), 5, "{}", ck.describe());
    for w in [1, 2, 3, 5, 8, 17, 40] {
        let mut r = Rng(w as u64);
        let inputs = vec![rand_img(&mut r, d, 4, w, true)];
        let want = ref_all(&k, &inputs, 4, w);
        let got = run_all(&ck, &inputs, 4, w, DENSE);
        assert_eq!(diff(&got, &want), None, "w={w}");
    }
}

#[test]
fn in_range_with_outer_and_inner_offsets() {
    // select(in_range(o), 2 * x[o], cval): the lowering's exact inlining of a pointwise
    // producer read through a constant border.
    for (dy, dx) in [(0, 0), (0, 3), (-1, 0), (2, -2), (-7, 7), (1, 1)] {
        let d = DType::F32;
        let mut s = StageB::default();
        let inr = s.push(Op::InRange(vec![dy, dx]), DType::Bool);
        let x = s.load(IN0, d, &[dy, dx], Border::Nearest);
        let two = s.push(Op::Const(Scalar::f32(2.0)), d);
        let y = s.bin(BinaryOp::Mul, x, two);
        let c = s.push(Op::Const(Scalar::f32(-9.0)), d);
        let r = s.push(Op::Select(inr, y, c), d);
        let k = stencil(4, &[d], s.finish(r));
        let ck = compile(&k, &CompileOptions::default()).unwrap();
        let CpuBody::Stencil(st) = &ck.body else {
            panic!()
        };
        let n_flags = st[0]
            .slots
            .iter()
            .filter(|s| s.kind == SlotKind::OuterInRange)
            .count();
        assert_eq!(n_flags, (dy != 0) as usize);
        for (h, w) in [(1, 1), (3, 3), (4, 9), (6, 17)] {
            let mut r = Rng(5);
            let inputs = vec![rand_img(&mut r, d, h, w, false)];
            let want = ref_all(&k, &inputs, h, w);
            for lay in [
                DENSE,
                Layout {
                    src_stride: 2,
                    out_stride: 1,
                },
            ] {
                let got = run_all(&ck, &inputs, h, w, lay);
                assert_eq!(diff(&got, &want), None, "({dy},{dx}) {h}x{w} {lay:?}");
            }
        }
    }
    // Rank 3: no outer axes, no flag slot.
    let mut s = StageB::default();
    let inr = s.push(Op::InRange(vec![-2]), DType::Bool);
    let k = stencil(3, &[], s.finish(inr));
    let ck = compile(&k, &CompileOptions::default()).unwrap();
    let CpuBody::Stencil(st) = &ck.body else {
        panic!()
    };
    assert!(st[0].slots.is_empty());
    for w in [1, 2, 3, 7] {
        assert_eq!(
            diff(&run_all(&ck, &[], 2, w, DENSE), &ref_all(&k, &[], 2, w)),
            None
        );
    }
}

#[test]
fn stride_zero_rows_read_one_element() {
    // A row given as one element with stride 0 (how the runtime passes a constant row).
    let d = DType::F32;
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, -1], Border::Reflect);
    let b = s.load(IN0, d, &[0, 1], Border::Reflect);
    let m = s.bin(BinaryOp::Min, a, b);
    let k = stencil(4, &[d], s.finish(m));
    let ck = compile(&k, &CompileOptions::default()).unwrap();
    for w in [1, 4, 13] {
        let mut r = Rng(3);
        let mut img = rand_img(&mut r, d, 3, w, false);
        for y in 0..3 {
            let v = img.data[y * w];
            for x in 0..w {
                img.data[y * w + x] = v;
            }
        }
        let want = ref_all(&k, std::slice::from_ref(&img), 3, w);
        let got = run_all(
            &ck,
            &[img],
            3,
            w,
            Layout {
                src_stride: 0,
                out_stride: 1,
            },
        );
        assert_eq!(diff(&got, &want), None, "w={w}");
    }
}

#[test]
fn vector_and_scalar_interiors_agree_bit_for_bit() {
    // Dense (F32X4 interior) vs strided (scalar interior) on awkward floats.
    let d = DType::F32;
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, -1], Border::Mirror);
    let b = s.load(IN0, d, &[0, 0], Border::Mirror);
    let c = s.load(IN0, d, &[0, 1], Border::Mirror);
    let lo = s.bin(BinaryOp::Min, a, b);
    let hi = s.bin(BinaryOp::Max, b, c);
    let sum = s.bin(BinaryOp::Add, lo, hi);
    let q = s.bin(BinaryOp::Div, sum, c);
    let r = s.un(kiln_ir::UnaryOp::Sqrt, q);
    let k = stencil(4, &[d], s.finish(r));
    let ck = compile(&k, &CompileOptions::default()).unwrap();
    assert!(ck.describe().contains("vectorised"), "{}", ck.describe());
    let mut r = Rng(1234);
    let img = rand_img(&mut r, d, 8, 67, false);
    let dense = run_all(&ck, std::slice::from_ref(&img), 8, 67, DENSE);
    let strided = run_all(
        &ck,
        std::slice::from_ref(&img),
        8,
        67,
        Layout {
            src_stride: 2,
            out_stride: 2,
        },
    );
    assert_eq!(diff(&dense, &strided), None);
    assert_eq!(diff(&dense, &ref_all(&k, &[img], 8, 67)), None);
}

#[test]
fn two_stage_kernel_reads_earlier_stage() {
    // grey opening: stage 0 = 3-wide min (erosion), stage 1 = 3-tall max of stage 0.
    let d = DType::F32;
    let mut s0 = StageB::default();
    let l: Vec<_> = (-1..=1)
        .map(|dx| s0.load(IN0, d, &[0, dx], Border::Reflect))
        .collect();
    let m = s0.bin(BinaryOp::Min, l[0], l[1]);
    let m = s0.bin(BinaryOp::Min, m, l[2]);
    let mut s1 = StageB::default();
    let l: Vec<_> = (-1..=1)
        .map(|dy| s1.load(Source::Stage(0), d, &[dy, 0], Border::Reflect))
        .collect();
    let x = s1.bin(BinaryOp::Max, l[0], l[1]);
    let x = s1.bin(BinaryOp::Max, x, l[2]);
    let k = Kernel {
        rank: 4,
        inputs: vec![d],
        output: d,
        body: KernelBody::Stencil {
            stages: vec![s0.finish(m), s1.finish(x)],
        },
    };
    let ck = compile(&k, &CompileOptions::default()).unwrap();
    let mut r = Rng(8);
    let img = rand_img(&mut r, d, 7, 21, false);
    let want = ref_all(&k, std::slice::from_ref(&img), 7, 21);
    assert_eq!(diff(&run_all(&ck, &[img], 7, 21, DENSE), &want), None);
}

#[test]
fn compiled_kernels_free_their_code() {
    // Many compile/drop cycles: each CpuKernel frees its JIT memory on drop.
    let d = DType::F32;
    for i in 0..200 {
        let mut s = StageB::default();
        let a = s.load(IN0, d, &[0, i % 5 - 2], Border::Wrap);
        let k = stencil(4, &[d], s.finish(a));
        let ck = compile(&k, &CompileOptions::default()).unwrap();
        let img = rand_img(&mut Rng(i as u64 + 1), d, 2, 6, false);
        assert_eq!(
            diff(
                &run_all(&ck, std::slice::from_ref(&img), 2, 6, DENSE),
                &ref_all(&k, &[img], 2, 6)
            ),
            None
        );
    }
}

#[test]
fn cpu_kernel_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<kiln_codegen::cpu::CpuKernel>();
}

/// Options under which a stage reaching 5 to 8 columns takes two edge vectors per end (the
/// step budget of a tiered kernel's background compile).
fn wide_edges() -> CompileOptions {
    CompileOptions {
        step_code_budget: Some(3000),
        ..Default::default()
    }
}

/// Checks `k` against the reference on rows around the edge-vector minimum widths (12 and
/// 20), dense and strided.
fn check_edge_widths(k: &Kernel, what: &str) {
    let ck = compile(k, &wide_edges()).unwrap();
    for w in [4, 9, 11, 12, 13, 15, 16, 19, 20, 21, 23, 24, 28, 64] {
        let mut r = Rng(w as u64 * 7 + 3);
        let inputs = vec![rand_img(&mut r, DType::F32, 3, w, false)];
        let want = ref_all(k, &inputs, 3, w);
        for lay in LAYOUTS {
            let got = run_all(&ck, &inputs, 3, w, lay);
            if let Some(m) = diff(&got, &want) {
                panic!("{what} w={w} {lay:?}: {m}\n{}", ck.describe());
            }
        }
    }
}

#[test]
fn edge_vectors_agree_with_the_reference_for_every_mode_and_offset() {
    let d = DType::F32;
    for border in modes(d) {
        // One load per offset (the edge vector's lane picks alone), then every offset at
        // once (several anchors and picks in one vector).
        let mut all = StageB::default();
        let mut sum = None;
        for dx in -8..=8 {
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[1, dx], border);
            let k = stencil(4, &[d], s.finish(a));
            let ck = compile(&k, &wide_edges()).unwrap();
            // No border columns at dx = 0: nothing for edge vectors to do.
            assert_eq!(
                ck.describe().contains("edge vectors"),
                dx != 0,
                "{}",
                ck.describe()
            );
            // Under the default budget, only one vector per end.
            let first = compile(&k, &CompileOptions::default()).unwrap();
            assert_eq!(
                first.describe().contains("edge vectors"),
                dx != 0 && dx.abs() <= 4,
                "{}",
                first.describe()
            );
            check_edge_widths(&k, &format!("{border} dx={dx}"));
            let a = all.load(IN0, d, &[dx % 2, dx], border);
            sum = Some(match sum {
                None => a,
                Some(t) => all.bin(BinaryOp::Sub, a, t),
            });
        }
        let k = stencil(4, &[d], all.finish(sum.unwrap()));
        check_edge_widths(&k, &format!("{border} all offsets"));
    }
}

#[test]
fn edge_vectors_handle_in_range_tests() {
    // `in_range(x + dx) ? load(x + dx) : load(x)`, plus an outer in-range test: constant
    // lane masks on edge vectors, combined with the row's in-range byte.
    let d = DType::F32;
    for dx in [-8, -5, -4, -3, -1, 1, 2, 4, 6, 8] {
        for dy in [0, 1] {
            let mut s = StageB::default();
            let a = s.load(IN0, d, &[dy, dx], Border::Nearest);
            let b = s.load(IN0, d, &[0, 0], Border::Nearest);
            let c = s.push(Op::InRange(vec![dy, dx]), DType::Bool);
            let r = s.push(Op::Select(c, a, b), d);
            let k = stencil(4, &[d], s.finish(r));
            let ck = compile(&k, &wide_edges()).unwrap();
            assert!(ck.describe().contains("edge vectors"), "{}", ck.describe());
            check_edge_widths(&k, &format!("in_range ({dy},{dx})"));
        }
    }
}

#[test]
fn edge_vectors_only_within_eight_columns() {
    let d = DType::F32;
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, 9], Border::Reflect);
    let k = stencil(4, &[d], s.finish(a));
    let ck = compile(&k, &wide_edges()).unwrap();
    assert!(ck.describe().contains("vectorised"), "{}", ck.describe());
    assert!(!ck.describe().contains("edge vectors"), "{}", ck.describe());
    check_edge_widths(&k, "dx=9");
}

#[test]
fn edge_vectors_off_when_asked() {
    let d = DType::F32;
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, -1], Border::Mirror);
    let b = s.load(IN0, d, &[0, 2], Border::Wrap);
    let r = s.bin(BinaryOp::Sub, a, b);
    let k = stencil(4, &[d], s.finish(r));
    let on = compile(&k, &CompileOptions::default()).unwrap();
    let off = compile(
        &k,
        &CompileOptions {
            no_edge_vectors: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(on.describe().contains("edge vectors"), "{}", on.describe());
    assert!(
        !off.describe().contains("edge vectors"),
        "{}",
        off.describe()
    );
    for w in [12, 13, 30] {
        let mut r = Rng(w as u64);
        let inputs = vec![rand_img(&mut r, d, 3, w, false)];
        let a = run_all(&on, &inputs, 3, w, DENSE);
        let b = run_all(&off, &inputs, 3, w, DENSE);
        assert_eq!(diff(&a, &b), None, "w={w}");
    }
}
