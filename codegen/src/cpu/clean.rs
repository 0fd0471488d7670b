//! Specialisation on clean data.
//!
//! Call a float tensor *clean* when none of its elements is a NaN, an infinity or -0. Most
//! images are; kiln's exact rules (the NaN result, -0 ordered below +0) cost work only for
//! the others. Given clean kernel inputs, some values of a kernel are clean too (*clean
//! values*): loads of an input, loads of an earlier stage whose result is clean (under a
//! constant border only when the constant is finite and not -0), finite constants other
//! than -0, and min, max or select of clean values (each returns one of its operands).
//!
//! On clean values:
//! * `is_finite` is true and `is_nan` false, so NaN guards fold away (the kornia median's
//!   mask and its select);
//! * a float min or max is one plain `minps`/`maxps` pick: with no NaN and no -0 the picks
//!   of equal operands have equal bits, so no order keys, no second pick and no NaN mask.
//!
//! [`clean_kernel`] rewrites the tests; the code generator reads [`clean_values`] to emit
//! plain picks. The runtime runs the clean kernel only after checking that every input is
//! clean, and the ordinary kernel otherwise, so both give eager's bits.

use kiln_ir::{BinaryOp, Border, DType, Scalar, UnaryOp};

use crate::kernel::{Kernel, KernelBody, Op, Source, Stage};

/// Whether a constant is clean: a finite float other than -0.
fn clean_scalar(s: Scalar) -> bool {
    match s {
        Scalar::F32(b) => f32::from_bits(b).is_finite() && b != 0x8000_0000,
        Scalar::F64(b) => f64::from_bits(b).is_finite() && b != 0x8000_0000_0000_0000,
        _ => false,
    }
}

/// Per stage, per instruction: whether the value is clean when every kernel input is.
pub(crate) fn clean_values(kernel: &Kernel) -> Vec<Vec<bool>> {
    let KernelBody::Stencil { stages } = &kernel.body else {
        return Vec::new();
    };
    let mut out: Vec<Vec<bool>> = Vec::with_capacity(stages.len());
    for stage in stages {
        let mut clean = vec![false; stage.insts.len()];
        for (i, inst) in stage.insts.iter().enumerate() {
            if !inst.dtype.is_float() {
                continue;
            }
            let c = |v: &crate::kernel::ValueId| clean.get(v.0 as usize).copied() == Some(true);
            clean[i] = match &inst.op {
                Op::Load { source, border, .. } => {
                    let src = match source {
                        Source::Input(k) => {
                            kernel.inputs.get(*k as usize).is_some_and(|d| d.is_float())
                        }
                        Source::Stage(k) => out
                            .get(*k as usize)
                            .zip(stages.get(*k as usize))
                            .is_some_and(|(f, st)| f.get(st.result.0 as usize) == Some(&true)),
                    };
                    let border_ok = match border {
                        Border::Constant(k) => clean_scalar(*k),
                        _ => true,
                    };
                    src && border_ok
                }
                Op::Const(s) => clean_scalar(*s),
                Op::Binary(BinaryOp::Min | BinaryOp::Max, a, b) => c(a) && c(b),
                Op::Select(_, a, b) => c(a) && c(b),
                _ => false,
            };
        }
        out.push(clean);
    }
    out
}

/// The kernel with every `is_finite` of a clean value replaced by `true` and every
/// `is_nan` by `false` (same instruction indices), valid only for clean inputs. `None`
/// when there is nothing to gain: no test folds and no float min/max becomes a plain pick
/// (a plain pick saves two of the three operations of an exact tree step, and every
/// conversion to and from order keys of a comparator). Measured on the 2-core EPYC VM
/// (2048² f32, 1 thread, with the input check, against the ordinary kernel): median 3x3
/// 4.37 -> 3.50 ms, opening 3x3 4.14 -> 3.42 ms, opening 15x15 11.7 -> 9.9 ms, erosion
/// 15x15 5.66 -> 5.15 ms.
pub fn clean_kernel(kernel: &Kernel) -> Option<Kernel> {
    specialise(kernel).map(|(k, _)| k)
}

/// [`clean_kernel`] and, per stage and instruction, whether it is a float min/max of two
/// clean values (emitted as one plain pick).
pub(crate) fn specialise(kernel: &Kernel) -> Option<(Kernel, Vec<Vec<bool>>)> {
    let KernelBody::Stencil { stages } = &kernel.body else {
        return None;
    };
    if !kernel
        .inputs
        .iter()
        .any(|d| matches!(d, DType::F32 | DType::F64))
    {
        return None;
    }
    let clean = clean_values(kernel);
    let mut worth = false;
    let mut out: Vec<Stage> = Vec::with_capacity(stages.len());
    let mut picks: Vec<Vec<bool>> = Vec::with_capacity(stages.len());
    for (stage, flags) in stages.iter().zip(&clean) {
        let mut st = stage.clone();
        let mut plain = vec![false; st.insts.len()];
        for (i, inst) in st.insts.iter_mut().enumerate() {
            let c = |v: &crate::kernel::ValueId| flags.get(v.0 as usize) == Some(&true);
            match inst.op {
                Op::Unary(UnaryOp::IsFinite, v) if c(&v) => {
                    inst.op = Op::Const(Scalar::Bool(true));
                    worth = true;
                }
                Op::Unary(UnaryOp::IsNan, v) if c(&v) => {
                    inst.op = Op::Const(Scalar::Bool(false));
                    worth = true;
                }
                Op::Binary(BinaryOp::Min | BinaryOp::Max, a, b)
                    if inst.dtype.is_float() && c(&a) && c(&b) =>
                {
                    plain[i] = true;
                    worth = true;
                }
                _ => {}
            }
        }
        out.push(st);
        picks.push(plain);
    }
    worth.then(|| {
        let k = Kernel {
            body: KernelBody::Stencil { stages: out },
            ..kernel.clone()
        };
        (k, picks)
    })
}

/// How clean a run of floats is, from least to most: the specialisations a block of a
/// kernel may run after checking its input rows (see the runtime's `stencil::Job::block`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Purity {
    /// Some NaN, infinity or -0: only the general kernel.
    Unclean,
    /// Finite and not -0: the clean specialisation ([`clean_kernel`]).
    Clean,
    /// Finite with a clear sign bit (`+0` up to the largest finite float): also the
    /// integer-pick specialisation ([`super::compile_nonneg`]).
    NonNeg,
}

/// The clean specialisation ([`specialise`]) when its plain picks may be integer picks on
/// inputs checked [`Purity::NonNeg`]: every float input is f32 (the check reads f32 rows),
/// some min/max is a plain pick, and every clean constant (and constant border of a clean
/// load) has a clear sign bit. Then every value a plain pick reads is finite with a clear
/// sign bit (clean values are loads, such constants and min/max/select of clean values),
/// and such floats order like their bits as signed integers.
pub(crate) fn nonneg_kernel(kernel: &Kernel) -> Option<(Kernel, Vec<Vec<bool>>)> {
    if kernel.inputs.contains(&DType::F64) {
        return None;
    }
    let (k, picks) = specialise(kernel)?;
    if !picks.iter().flatten().any(|&p| p) {
        return None;
    }
    let KernelBody::Stencil { stages } = &k.body else {
        return None;
    };
    let clean = clean_values(&k);
    let negative = |s: Scalar| match s {
        Scalar::F32(b) => b >> 31 != 0,
        Scalar::F64(b) => b >> 63 != 0,
        _ => false,
    };
    let signed_constant = stages.iter().zip(&clean).any(|(st, flags)| {
        st.insts.iter().zip(flags).any(|(inst, &c)| {
            c && match &inst.op {
                Op::Const(s) => negative(*s),
                Op::Load {
                    border: Border::Constant(s),
                    ..
                } => negative(*s),
                _ => false,
            }
        })
    });
    (!signed_constant).then_some((k, picks))
}

/// Whether every element of `xs` is clean: finite and not -0.
pub fn clean_f32(xs: &[f32]) -> bool {
    f32_purity(xs) >= Purity::Clean
}

/// The purity of `xs`: the least of its elements' (an empty slice is [`Purity::NonNeg`]).
pub fn f32_purity(xs: &[f32]) -> Purity {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above), the only requirement of a
        // `#[target_feature(enable = "avx2")]` function; its body is safe code.
        return unsafe { f32_purity_avx2(xs) };
    }
    f32_purity_any(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn f32_purity_avx2(xs: &[f32]) -> Purity {
    f32_purity_any(xs)
}

/// [`f32_purity`] in portable code: two min/max reductions per element (so the compiler
/// vectorises it for the target features of its caller), one early exit per chunk.
///
/// With `b` an element's bits, `b + 2^23` (wrapping) moves +infinity, the positive NaNs and
/// -0 (and nothing else) to the bottom `2^23 + 1` values of the signed range, and the
/// negative infinity and NaNs are exactly the bits from `0xff80_0000` up: so the signed
/// minimum of the first and the unsigned maximum of the bits find every unclean element,
/// with half the instructions of testing each case. Every element is also finite with a
/// clear sign bit exactly when that unsigned maximum is below +infinity's `0x7f80_0000`
/// (the sign bit would put it at `0x8000_0000` or above).
#[inline(always)]
fn f32_purity_any(xs: &[f32]) -> Purity {
    const EXP_ONE: u32 = 1 << 23;
    let mut purity = Purity::NonNeg;
    for c in xs.chunks(1024) {
        let (lo, hi) = c.iter().fold((i32::MAX, 0u32), |(lo, hi), x| {
            let b = x.to_bits();
            (lo.min(b.wrapping_add(EXP_ONE) as i32), hi.max(b))
        });
        let p = if hi < 0x7f80_0000 {
            Purity::NonNeg
        } else if lo > i32::MIN + EXP_ONE as i32 && hi < 0xff80_0000 {
            Purity::Clean
        } else {
            return Purity::Unclean;
        };
        purity = purity.min(p);
    }
    purity
}

/// Whether every element of `xs` is clean: finite and not -0 (the same reductions as
/// [`clean_f32`], with the f64 exponent's unit).
pub fn clean_f64(xs: &[f64]) -> bool {
    const EXP_ONE: u64 = 1 << 52;
    xs.chunks(512).all(|c| {
        let (lo, hi) = c.iter().fold((i64::MAX, 0u64), |(lo, hi), x| {
            let b = x.to_bits();
            (lo.min(b.wrapping_add(EXP_ONE) as i64), hi.max(b))
        });
        lo > i64::MIN + EXP_ONE as i64 && hi < 0xfff0_0000_0000_0000
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: finite and not -0.
    fn clean32(b: u32) -> bool {
        let x = f32::from_bits(b);
        x.is_finite() && b != 0x8000_0000
    }

    /// The definition of each purity.
    fn purity32(b: u32) -> Purity {
        let x = f32::from_bits(b);
        if x.is_finite() && b >> 31 == 0 {
            Purity::NonNeg
        } else if clean32(b) {
            Purity::Clean
        } else {
            Purity::Unclean
        }
    }

    fn clean64(b: u64) -> bool {
        let x = f64::from_bits(b);
        x.is_finite() && b != 0x8000_0000_0000_0000
    }

    /// Bit patterns around every boundary of the two reductions, plus a sweep.
    fn patterns32() -> Vec<u32> {
        let edges = [
            0u32,
            0x8000_0000,
            0x7f80_0000,
            0xff80_0000,
            0x7f7f_ffff,
            0xff7f_ffff,
            0x7fff_ffff,
            0xffff_ffff,
            0x0080_0000,
            0x8080_0000,
        ];
        let mut v: Vec<u32> = edges
            .iter()
            .flat_map(|&e| (0..7u32).map(move |d| e.wrapping_add(d).wrapping_sub(3)))
            .collect();
        v.extend((0..=u32::MAX / 9973).map(|i| i * 9973));
        v
    }

    #[test]
    fn clean_f32_matches_the_definition_on_every_boundary() {
        let base = [1.0f32, -2.5, 0.0, f32::MIN_POSITIVE, -f32::MAX];
        for b in patterns32() {
            // Alone, and at every position of a longer slice (vector lanes, tail).
            assert_eq!(clean_f32(&[f32::from_bits(b)]), clean32(b), "{b:#x}");
            assert_eq!(f32_purity(&[f32::from_bits(b)]), purity32(b), "{b:#x}");
            for at in [0, 3, 8, 17, 1030] {
                let mut xs: Vec<f32> = (0..1100).map(|i| base[i % base.len()]).collect();
                xs[at] = f32::from_bits(b);
                assert_eq!(clean_f32(&xs), clean32(b), "{b:#x} at {at}");
                // Among non-negative values, the element decides; among signed ones, at
                // most clean.
                let mut pos: Vec<f32> = xs.iter().map(|x| x.abs()).collect();
                pos[at] = f32::from_bits(b);
                assert_eq!(f32_purity(&pos), purity32(b), "{b:#x} at {at}");
                assert_eq!(
                    f32_purity(&xs),
                    purity32(b).min(Purity::Clean),
                    "{b:#x} at {at}"
                );
            }
        }
        assert!(clean_f32(&[]));
        assert_eq!(f32_purity(&[]), Purity::NonNeg);
    }

    #[test]
    fn clean_f64_matches_the_definition_on_every_boundary() {
        let edges = [
            0u64,
            0x8000_0000_0000_0000,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7fef_ffff_ffff_ffff,
            0xffef_ffff_ffff_ffff,
            0x7fff_ffff_ffff_ffff,
            u64::MAX,
            0x0010_0000_0000_0000,
            0x8010_0000_0000_0000,
        ];
        let sweep = (0..1u64 << 16).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for b in edges
            .iter()
            .flat_map(|&e| (0..7u64).map(move |d| e.wrapping_add(d).wrapping_sub(3)))
            .chain(sweep)
        {
            assert_eq!(clean_f64(&[f64::from_bits(b)]), clean64(b), "{b:#x}");
            let mut xs = vec![1.5f64; 600];
            xs[513] = f64::from_bits(b);
            assert_eq!(clean_f64(&xs), clean64(b), "{b:#x} in a long slice");
        }
        assert!(clean_f64(&[]));
    }
}
