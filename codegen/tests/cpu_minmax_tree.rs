//! Float min/max trees in compare form (`a < b ? a : b` plus the zero-sign fix, see
//! `values::Tree`) against the scalar reference: every pair of special values (NaN
//! payloads, ±Inf, ±0, subnormals, ties), zero-only windows, chains and balanced trees, on
//! the vector, strided-scalar and border paths, f32 and f64.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::compile;
use kiln_codegen::kernel::{Source, ValueId};
use kiln_codegen::{CompileOptions, Fault};
use kiln_ir::{BinaryOp, Border, DType, Scalar};

const IN0: Source = Source::Input(0);

/// Images rich in ties: specials, and rows made only of +0/-0 or of one value and zeros.
fn inputs(d: DType, h: usize, w: usize, seed: u64) -> Img {
    let mut r = Rng(seed);
    let mut img = rand_img(&mut r, d, h, w, false);
    let zero = |neg: bool| match d {
        DType::F32 => Scalar::F32(if neg { 0x8000_0000 } else { 0 }),
        _ => Scalar::F64(if neg { 1 << 63 } else { 0 }),
    };
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            img.data[i] = match y % 4 {
                // Only zeros, random signs: the sign fix decides every output.
                0 => zero(r.below(2) == 1),
                // Mostly zeros plus specials.
                1 if r.below(3) != 0 => zero(r.below(2) == 1),
                _ => match d {
                    DType::F32 => Scalar::F32(SPECIAL_F32[r.below(16) as usize]),
                    _ => Scalar::F64(SPECIAL_F64[r.below(12) as usize]),
                },
            };
        }
    }
    // Every special against every special in adjacent columns of the last rows.
    let specials: Vec<Scalar> = match d {
        DType::F32 => SPECIAL_F32.iter().map(|&b| Scalar::F32(b)).collect(),
        _ => SPECIAL_F64.iter().map(|&b| Scalar::F64(b)).collect(),
    };
    let n = specials.len();
    let base = (h - 2) * w;
    for k in 0..(2 * w).min(n * n / 2) {
        img.data[base + k] = specials[(k * 7 + k / n) % n];
    }
    img
}

/// `op` over loads at `dx` in `-r..=r` of one row (`dy` fixed), as a chain or balanced tree.
fn tree_stage(d: DType, op: BinaryOp, r: i64, balanced: bool, border: Border) -> StageB {
    let mut s = StageB::default();
    let mut vs: Vec<ValueId> = (-r..=r)
        .map(|dx| s.load(IN0, d, &[0, dx], border))
        .collect();
    if balanced {
        while vs.len() > 1 {
            let mut next = Vec::new();
            for c in vs.chunks(2) {
                next.push(if c.len() == 2 {
                    s.bin(op, c[0], c[1])
                } else {
                    c[0]
                });
            }
            vs = next;
        }
    } else {
        let mut acc = vs[0];
        for &v in &vs[1..] {
            acc = s.bin(op, acc, v);
        }
        vs = vec![acc];
    }
    let res = vs[0];
    s.insts.truncate(res.0 as usize + 1);
    s
}

fn check(k: &kiln_codegen::Kernel, img: &Img, what: &str, expect_tree: bool) {
    let ck = compile(k, &CompileOptions::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        ck.describe().contains("compare form"),
        expect_tree,
        "{what}\n{}",
        ck.describe()
    );
    let want = ref_all(k, std::slice::from_ref(img), img.h, img.w);
    for lay in LAYOUTS {
        let got = run_all(&ck, std::slice::from_ref(img), img.h, img.w, lay);
        if let Some(m) = diff(&got, &want) {
            panic!("{what} {lay:?}: {m}\n{}", ck.describe());
        }
    }
}

#[test]
fn min_and_max_trees_match_the_reference_on_special_values() {
    for d in [DType::F32, DType::F64] {
        for (h, w) in [(8, 37), (8, 1), (6, 4), (8, 17), (1, 9)] {
            let img = inputs(d, h.max(2), w, 3 + w as u64);
            for op in [BinaryOp::Min, BinaryOp::Max] {
                for (r, balanced) in [(1, false), (2, true), (3, false), (7, true)] {
                    for border in [
                        Border::Reflect,
                        Border::Constant(match d {
                            DType::F32 => Scalar::F32(0x8000_0000),
                            _ => Scalar::F64(0),
                        }),
                    ] {
                        let s = tree_stage(d, op, r, balanced, border);
                        let res = ValueId(s.insts.len() as u32 - 1);
                        let k = stencil(4, &[d], s.finish(res));
                        check(
                            &k,
                            &img,
                            &format!("{d} {op:?} r={r} {balanced} {border} {h}x{w}"),
                            true,
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn comparator_pairs_stay_on_keys_and_mixed_trees_are_exact() {
    let d = DType::F32;
    let img = inputs(d, 8, 29, 11);
    // min and max of the same operands (a comparator): key form.
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, -1], Border::Reflect);
    let b = s.load(IN0, d, &[0, 1], Border::Reflect);
    let lo = s.bin(BinaryOp::Min, a, b);
    let hi = s.bin(BinaryOp::Max, a, b);
    let r = s.bin(BinaryOp::Sub, hi, lo);
    check(&stencil(4, &[d], s.finish(r)), &img, "comparator", false);
    // max of two min trees: the mins feed a max and the max has min operands: keys.
    let mut s = StageB::default();
    let l: Vec<ValueId> = (-2..=2)
        .map(|dx| s.load(IN0, d, &[0, dx], Border::Mirror))
        .collect();
    let m1 = s.bin(BinaryOp::Min, l[0], l[1]);
    let m2 = s.bin(BinaryOp::Min, l[2], l[3]);
    let m3 = s.bin(BinaryOp::Min, m2, l[4]);
    let x = s.bin(BinaryOp::Max, m1, m3);
    check(&stencil(4, &[d], s.finish(x)), &img, "max of mins", false);
    // A min tree whose result feeds arithmetic and a comparison.
    let mut s = StageB::default();
    let l: Vec<ValueId> = (-2..=2)
        .map(|dx| s.load(IN0, d, &[0, dx], Border::Wrap))
        .collect();
    let mut m = l[0];
    for &v in &l[1..] {
        m = s.bin(BinaryOp::Min, m, v);
    }
    let sum = s.bin(BinaryOp::Add, m, l[2]);
    let lt = s.bin(BinaryOp::Lt, m, l[0]);
    let sel = s.push(kiln_codegen::kernel::Op::Select(lt, sum, m), d);
    check(
        &stencil(4, &[d], s.finish(sel)),
        &img,
        "tree then arithmetic",
        true,
    );
}

#[test]
fn planted_faults_still_show_on_trees() {
    // The fuzzer's min/max faults must still change results of compare-form trees.
    let d = DType::F32;
    let img = inputs(d, 8, 33, 5);
    let s = tree_stage(d, BinaryOp::Min, 2, true, Border::Reflect);
    let res = ValueId(s.insts.len() as u32 - 1);
    let k = stencil(4, &[d], s.finish(res));
    let want = ref_all(&k, std::slice::from_ref(&img), img.h, img.w);
    for fault in [Fault::DropNanMask, Fault::FminSemantics] {
        let ck = compile(
            &k,
            &CompileOptions {
                fault: Some(fault),
                ..Default::default()
            },
        )
        .unwrap();
        let got = run_all(&ck, std::slice::from_ref(&img), img.h, img.w, DENSE);
        assert!(diff(&got, &want).is_some(), "{fault:?} had no effect");
    }
}
