//! No fused multiply-add on any target: `a*b + c` and its variants round twice, as
//! SEMANTICS.md says, on the vector, scalar and border paths.
//!
//! Exactness argument of the test: with `c = -(a*b)` (rounded) the exact two-rounding result
//! is 0 (or `±0`), while a fused `a*b + c` leaves the product's rounding error, which is
//! non-zero on most of the random data (checked: the data must be able to tell). So the
//! bit comparison with the scalar reference fails if Cranelift contracted anything, on x86_64
//! and on aarch64 alike (aarch64 has `fmadd`/`fmla`; Cranelift only emits them for an
//! explicit CLIF `fma`, which kiln never builds). On aarch64 the machine code is also
//! scanned for those instruction encodings. Limits: the scan reads every aligned 32-bit
//! word, constant islands included, so a constant could in principle look like one (none
//! do in these kernels); the scan covers the scalar and vector fused multiply-add forms.

mod cpu_common;

use cpu_common::*;
use kiln_codegen::cpu::compile;
use kiln_codegen::kernel::Source;
use kiln_codegen::CompileOptions;
use kiln_ir::{BinaryOp, Border, DType, Scalar};

const IN0: Source = Source::Input(0);
const IN1: Source = Source::Input(1);
const IN2: Source = Source::Input(2);

/// The four shapes a contraction could take: `a*b + c`, `c + a*b`, `a*b - c`, `c - a*b`.
#[derive(Clone, Copy, Debug)]
enum Form {
    ProductPlus,
    PlusProduct,
    ProductMinus,
    MinusProduct,
}

const FORMS: [Form; 4] = [
    Form::ProductPlus,
    Form::PlusProduct,
    Form::ProductMinus,
    Form::MinusProduct,
];

/// The rounding error of `a*b` in f64, exactly (Veltkamp split and Dekker's product, no
/// fused operation needed).
fn product_error_f64(a: f64, b: f64) -> f64 {
    fn split(x: f64) -> (f64, f64) {
        let c = 134_217_729.0 * x; // 2^27 + 1
        let hi = c - (c - x);
        (hi, x - hi)
    }
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    ((ah * bh - p) + ah * bl + al * bh) + al * bl
}

/// Random floats with random full mantissas, either sign, magnitudes in [1/16, 32): their
/// products are almost never exact.
fn full_mantissa_img(r: &mut Rng, d: DType, h: usize, w: usize) -> Img {
    let data = (0..h * w)
        .map(|_| {
            let sign = r.below(2);
            let exp = r.below(9);
            let bits = r.next();
            match d {
                DType::F32 => Scalar::F32(
                    (sign as u32) << 31 | (123 + exp as u32) << 23 | (bits as u32 & 0x7f_ffff),
                ),
                _ => Scalar::F64(sign << 63 | (1019 + exp) << 52 | (bits & 0xf_ffff_ffff_ffff)),
            }
        })
        .collect();
    Img {
        dtype: d,
        h,
        w,
        data,
    }
}

/// Inputs `a`, `b` and `c = ∓(a*b)` for `form`, and how many elements have an inexact
/// product (where a fused operation would give a different result).
fn inputs(d: DType, form: Form, h: usize, w: usize, seed: u64) -> (Vec<Img>, usize) {
    let mut r = Rng(seed);
    let a = full_mantissa_img(&mut r, d, h, w);
    let b = full_mantissa_img(&mut r, d, h, w);
    let negate = matches!(form, Form::ProductPlus | Form::PlusProduct);
    let mut inexact = 0;
    let data = a
        .data
        .iter()
        .zip(&b.data)
        .map(|(&x, &y)| match (x, y) {
            (Scalar::F32(x), Scalar::F32(y)) => {
                let (x, y) = (f32::from_bits(x), f32::from_bits(y));
                let p = x * y;
                // A product of two f32 is exact in f64.
                if p.is_finite() && (x as f64) * (y as f64) != p as f64 {
                    inexact += 1;
                }
                Scalar::F32(if negate { -p } else { p }.to_bits())
            }
            (Scalar::F64(x), Scalar::F64(y)) => {
                let (x, y) = (f64::from_bits(x), f64::from_bits(y));
                let p = x * y;
                if p.is_finite() && product_error_f64(x, y) != 0.0 {
                    inexact += 1;
                }
                Scalar::F64(if negate { -p } else { p }.to_bits())
            }
            _ => unreachable!("float inputs"),
        })
        .collect();
    let c = Img {
        dtype: d,
        h,
        w,
        data,
    };
    (vec![a, b, c], inexact)
}

fn kernel(d: DType, form: Form) -> kiln_codegen::Kernel {
    let mut s = StageB::default();
    let a = s.load(IN0, d, &[0, 0], Border::Reflect);
    let b = s.load(IN1, d, &[0, 0], Border::Reflect);
    let c = s.load(IN2, d, &[0, 0], Border::Reflect);
    let p = s.bin(BinaryOp::Mul, a, b);
    let r = match form {
        Form::ProductPlus => s.bin(BinaryOp::Add, p, c),
        Form::PlusProduct => s.bin(BinaryOp::Add, c, p),
        Form::ProductMinus => s.bin(BinaryOp::Sub, p, c),
        Form::MinusProduct => s.bin(BinaryOp::Sub, c, p),
    };
    stencil(4, &[d, d, d], s.finish(r))
}

/// aarch64 encodings of fused multiply-adds: scalar `fmadd`/`fmsub`/`fnmadd`/`fnmsub`,
/// vector `fmla`/`fmls` (by vector and by element). `(mask, value)` pairs.
const A64_FMA: [(u32, u32, &str); 3] = [
    (0xff00_0000, 0x1f00_0000, "fmadd/fmsub/fnmadd/fnmsub"),
    (0xbf20_fc00, 0x0e20_cc00, "fmla/fmls (vector)"),
    (0xbf80_b400, 0x0f80_1000, "fmla/fmls (by element)"),
];

/// The fused multiply-add instructions found in `code` (aarch64 encodings).
fn a64_fma_words(code: &[u8]) -> Vec<(usize, u32, &'static str)> {
    code.chunks_exact(4)
        .enumerate()
        .filter_map(|(i, w)| {
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            A64_FMA
                .iter()
                .find(|(m, v, _)| w & m == *v)
                .map(|(_, _, name)| (i * 4, w, *name))
        })
        .collect()
}

#[test]
fn the_encoding_scan_recognises_fused_multiply_adds() {
    // fmadd s0, s1, s2, s3; fmla v0.4s, v1.4s, v2.4s; fmla v0.4s, v1.4s, v2.s[1];
    // fmls v0.2d, v1.2d, v2.2d; then fadd s0, s1, s2 and fmul v0.4s, v1.4s, v2.4s (not fused).
    let words: [u32; 6] = [
        0x1f02_0c20,
        0x4e22_cc20,
        0x4fa2_1020,
        0x4ee2_cc20,
        0x1e22_2820,
        0x6e22_dc20,
    ];
    let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let found: Vec<usize> = a64_fma_words(&code).iter().map(|f| f.0).collect();
    assert_eq!(found, vec![0, 4, 8, 12]);
}

#[test]
fn multiply_then_add_rounds_twice_on_every_path() {
    let (h, w) = (5, 37);
    for d in [DType::F32, DType::F64] {
        for (fi, form) in FORMS.into_iter().enumerate() {
            let k = kernel(d, form);
            let ck = compile(&k, &CompileOptions::default()).unwrap();
            let (inputs, inexact) = inputs(d, form, h, w, 11 + fi as u64);
            assert!(
                inexact * 2 > h * w,
                "{d:?} {form:?}: only {inexact} of {} products are inexact: the data cannot tell",
                h * w
            );
            let want = ref_all(&k, &inputs, h, w);
            for lay in LAYOUTS {
                let got = run_all(&ck, &inputs, h, w, lay);
                if let Some(m) = diff(&got, &want) {
                    panic!("{d:?} {form:?} {lay:?}: {m}\n{}", ck.describe());
                }
            }
            if cfg!(target_arch = "aarch64") {
                for f in ck.machine_code() {
                    let found = a64_fma_words(&f.bytes);
                    assert!(found.is_empty(), "{d:?} {form:?} {}: {found:x?}", f.name);
                }
            } else {
                println!(
                    "SKIP (encoding scan): {d:?} {form:?}: not aarch64; the bit comparison above ran"
                );
            }
        }
    }
}
