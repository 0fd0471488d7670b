//! Guarded variants (`cpu::guard`): `compile_variant` compiles what `compile_clean` and
//! `compile_nonneg` compile, a guard applies only where its argument holds (no integer
//! picks on f64 inputs or under a negative constant), `attachable` keeps a variant only
//! beside the one it needs and in `Guard::ALL` order, and `CpuKernel::variant` finds what
//! was attached.
//!
//! Exactness: these tests check which code is compiled and attached, not values; the bits
//! of each variant on inputs its guard admits are checked by the runtime's tests
//! (`runtime/tests/row_blocks.rs`, `tests/tiered_compile.rs`).
//!
//! Limits: single-stage f32/f64 min windows only.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::{
    attachable, compile, compile_clean, compile_nonneg, compile_variant, CpuKernel, Guard,
    GuardedVariant,
};
use kiln_codegen::kernel::{Op, Source};
use kiln_codegen::{CompileOptions, Kernel};
use kiln_ir::{BinaryOp, Border, DType, Scalar};

/// A 3-wide min window over input 0 (of `d`), then a min with `constant` when given.
fn min_window(d: DType, constant: Option<Scalar>) -> Kernel {
    let mut s = StageB::default();
    let a = s.load(Source::Input(0), d, &[0, -1], Border::Reflect);
    let b = s.load(Source::Input(0), d, &[0, 0], Border::Reflect);
    let c = s.load(Source::Input(0), d, &[0, 1], Border::Reflect);
    let ab = s.bin(BinaryOp::Min, a, b);
    let mut r = s.bin(BinaryOp::Min, ab, c);
    if let Some(k) = constant {
        let k = s.push(Op::Const(k), d);
        r = s.bin(BinaryOp::Min, r, k);
    }
    stencil(4, &[d], s.finish(r))
}

/// What a kernel's plan says, without its compile time (the first line).
fn plan(k: &CpuKernel) -> String {
    k.describe().lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn compile_variant_compiles_each_guards_form() {
    let o = CompileOptions::default();
    let k = min_window(DType::F32, None);
    let clean = compile_variant(&k, Guard::CleanInputs, &o)
        .unwrap()
        .unwrap();
    let want = compile_clean(&k, &o).unwrap().unwrap();
    assert_eq!(plan(&clean), plan(&want));
    let nonneg = compile_variant(&k, Guard::NonNegative, &o)
        .unwrap()
        .unwrap();
    let want = compile_nonneg(&k, &o).unwrap().unwrap();
    assert_eq!(plan(&nonneg), plan(&want));
}

#[test]
fn non_negative_guard_needs_f32_inputs_and_non_negative_constants() {
    let o = CompileOptions::default();
    let f64_window = min_window(DType::F64, None);
    assert!(compile_variant(&f64_window, Guard::CleanInputs, &o)
        .unwrap()
        .is_some());
    assert!(compile_variant(&f64_window, Guard::NonNegative, &o)
        .unwrap()
        .is_none());
    let negative = min_window(DType::F32, Some(c32(-1.0)));
    assert!(compile_variant(&negative, Guard::CleanInputs, &o)
        .unwrap()
        .is_some());
    assert!(compile_variant(&negative, Guard::NonNegative, &o)
        .unwrap()
        .is_none());
    let positive = min_window(DType::F32, Some(c32(1.0)));
    assert!(compile_variant(&positive, Guard::NonNegative, &o)
        .unwrap()
        .is_some());
}

#[test]
fn attachable_keeps_variants_beside_what_they_need_in_guard_order() {
    let o = CompileOptions::default();
    let k = min_window(DType::F32, None);
    let variant = |guard| GuardedVariant {
        guard,
        kernel: compile_variant(&k, guard, &o).unwrap().unwrap(),
    };
    let guards = |v: &[GuardedVariant]| v.iter().map(|v| v.guard).collect::<Vec<_>>();
    let both = attachable(vec![
        variant(Guard::CleanInputs),
        variant(Guard::NonNegative),
    ]);
    assert_eq!(guards(&both), Guard::ALL.to_vec());
    let alone = attachable(vec![variant(Guard::NonNegative)]);
    assert!(
        alone.is_empty(),
        "the integer-pick variant without its clean one"
    );
    let clean = attachable(vec![variant(Guard::CleanInputs)]);
    assert_eq!(guards(&clean), vec![Guard::CleanInputs]);

    let mut general = compile(&k, &o).unwrap();
    assert!(Guard::ALL.iter().all(|&g| general.variant(g).is_none()));
    let alone_ms = general.compile_ms_with_forms();
    let want: Vec<String> = both.iter().map(|v| plan(&v.kernel)).collect();
    let variants_ms: f64 = both.iter().map(|v| v.kernel.compile_ms).sum();
    general.variants = both;
    for (g, want) in Guard::ALL.iter().zip(&want) {
        assert_eq!(plan(general.variant(*g).unwrap()), *want, "{g:?}");
    }
    assert_eq!(general.compile_ms_with_forms(), alone_ms + variants_ms);
}
