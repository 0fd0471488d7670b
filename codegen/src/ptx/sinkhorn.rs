//! PTX rendering of the Sinkhorn lane passes (`kiln_ops::sinkhorn`, `lanes.rs`): one thread
//! per (sample, lane), walking the matrix rows in order.
//!
//! Declared inside `emit` (it uses that module's register allocator and its `exp`/`log`).
//! A pass reads a matrix of `rows x width` (row-major), per sample a row vector `w[q]`
//! (`rows` long) and, for some kinds, a lane vector `s[q]` (`width` long), and writes
//! `out[q][lane]`. Kinds and terms (`m = mat[x][lane]`), as in `lanes.rs`:
//! `MulW` `acc + m·w`, `SMulW` `acc + (s·m)·w`, `WMulS` `acc + (w·m)·s`, `ExpAddWS`
//! `acc + exp((m + w) + s)`, `LseAddW` the running log-sum-exp of `m + w` (one exp per
//! term, the branch-free select form of `mod.rs`'s `lse_push`, then `lse_end`).
//!
//! Exactness: every float op is `.rn` (no contraction into `fma`, no `.ftz`), `exp`/`log`
//! are the emitter's, the same IEEE sequence as `kiln_ir::math`; each thread is one of the
//! CPU's accumulators and takes its terms in the same order with the same operand order,
//! so the values are the CPU's bits (NaN payloads aside: the host canonicalises NaN
//! outputs). Comparisons follow Rust's: `x > m` ordered `gt`, `m != -inf` unordered `neu`,
//! `m == -inf` ordered `eq`.
//!
//! ABI: entry `kiln_sinkhorn`, parameters `kiln_args` (u64 words: rows, width, samples,
//! w stride, s stride, out stride, in elements), `kiln_out`, `kiln_scratch` (unused),
//! `kiln_in0` (matrix), `kiln_in1` (w), `kiln_in2` (s; any pointer when the kind reads
//! none). Blocks of [`BLOCK_1D`] threads, grid-strided over `samples · width`.
//!
//! Limits: no sharing of matrix loads between samples (each thread streams its column);
//! the CPU path's tiles are a schedule, not a semantics, so the bits do not depend on it.

use kiln_ir::DType;

use super::math::imm;
use super::Em;
use crate::kernel::{Kernel, KernelBody};
use crate::{CodegenError, CompileOptions};

use super::super::{SinkhornPass, BLOCK_1D};

/// Renders the entry `kiln_sinkhorn` for `pass` on `d` (f32 or f64).
pub(crate) fn render(pass: SinkhornPass, d: DType) -> Result<String, CodegenError> {
    if !matches!(d, DType::F32 | DType::F64) {
        return Err(super::super::err(format!(
            "sinkhorn passes are f32 or f64, got {d}"
        )));
    }
    // The emitter's bookkeeping wants a kernel: three inputs of `d` (matrix, w, s).
    let shell = Kernel {
        rank: 3,
        inputs: vec![d; 3],
        output: d,
        body: KernelBody::Stencil { stages: Vec::new() },
    };
    let options = CompileOptions::default();
    let mut em = Em::new(&shell, &options);
    let sz = d.size_bytes();
    let (rows, width, samples) = (em.word(0), em.word(1), em.word(2));
    let (w_stride, s_stride, o_stride) = (em.word(3), em.word(4), em.word(5));
    let (mat, wv, sv, out) = (
        em.ins[0].clone(),
        em.ins[1].clone(),
        em.ins[2].clone(),
        em.out.clone(),
    );
    let (t32, c32, n32) = (em.r(), em.r(), em.r());
    let (li, step, total, t64) = (em.rd(), em.rd(), em.rd(), em.rd());
    e!(em, "mov.u32 {t32}, %tid.x");
    e!(em, "mov.u32 {c32}, %ctaid.x");
    e!(em, "mov.u32 {n32}, %nctaid.x");
    e!(em, "mul.wide.u32 {li}, {c32}, {}", BLOCK_1D[0]);
    e!(em, "cvt.u64.u32 {t64}, {t32}");
    e!(em, "add.s64 {li}, {li}, {t64}");
    e!(em, "mul.wide.u32 {step}, {n32}, {}", BLOCK_1D[0]);
    e!(em, "mul.lo.s64 {total}, {samples}, {width}");
    let (lp, end) = (em.label("item"), em.label("end"));
    em.put_label(&lp);
    let p = em.p();
    e!(em, "setp.ge.s64 {p}, {li}, {total}");
    e!(em, "@{p} bra {end}");
    // q = li / width, l = li - q·width
    let (q, l, t) = (em.rd(), em.rd(), em.rd());
    e!(em, "div.u64 {q}, {li}, {width}");
    e!(em, "mul.lo.s64 {t}, {q}, {width}");
    e!(em, "sub.s64 {l}, {li}, {t}");
    // Pointers: the matrix column, the sample's w, its lane of s and of out.
    let (mp, wp, rstep) = (em.rd(), em.rd(), em.rd());
    e!(em, "mad.lo.s64 {mp}, {l}, {sz}, {mat}");
    e!(em, "mul.lo.s64 {t}, {q}, {w_stride}");
    e!(em, "mad.lo.s64 {wp}, {t}, {sz}, {wv}");
    e!(em, "mul.lo.s64 {rstep}, {width}, {sz}");
    let s_val = if pass.reads_lane_vector() {
        let (sa, t2) = (em.rd(), em.rd());
        e!(em, "mul.lo.s64 {t2}, {q}, {s_stride}");
        e!(em, "add.s64 {t2}, {t2}, {l}");
        e!(em, "mad.lo.s64 {sa}, {t2}, {sz}, {sv}");
        Some(em.load("global", d, &sa, None))
    } else {
        None
    };
    let bits = |x: f64| {
        if d == DType::F64 {
            x.to_bits()
        } else {
            (x as f32).to_bits() as u64
        }
    };
    let (zero, one, neg_inf) = (
        imm(d, bits(0.0)),
        imm(d, bits(1.0)),
        imm(d, bits(f64::NEG_INFINITY)),
    );
    let (acc, mx) = (em.reg(d), em.reg(d));
    em.mov(d, &acc, &zero);
    em.mov(d, &mx, &neg_inf);
    let x = em.rd();
    e!(em, "mov.u64 {x}, 0");
    let (rl, rd) = (em.label("row"), em.label("rowsdone"));
    em.put_label(&rl);
    let pr = em.p();
    e!(em, "setp.ge.s64 {pr}, {x}, {rows}");
    e!(em, "@{pr} bra {rd}");
    let m = em.load("global", d, &mp, None);
    let w = em.load("global", d, &wp, None);
    let s = || s_val.clone().unwrap_or_default();
    match pass {
        SinkhornPass::LseAddW => {
            let xv = em.frn("add", d, &m, &w);
            lse_push(&mut em, d, (&mx, &acc), &xv, &one, &neg_inf);
        }
        _ => {
            let term = match pass {
                SinkhornPass::MulW => em.frn("mul", d, &m, &w),
                SinkhornPass::SMulW => {
                    let sm = em.frn("mul", d, &s(), &m);
                    em.frn("mul", d, &sm, &w)
                }
                SinkhornPass::WMulS => {
                    let wm = em.frn("mul", d, &w, &m);
                    em.frn("mul", d, &wm, &s())
                }
                _ => {
                    let a = em.frn("add", d, &m, &w);
                    let b = em.frn("add", d, &a, &s());
                    em.exp(d, &b)
                }
            };
            let sum = em.frn("add", d, &acc, &term);
            em.mov(d, &acc, &sum);
        }
    }
    e!(em, "add.s64 {mp}, {mp}, {rstep}");
    e!(em, "add.s64 {wp}, {wp}, {sz}");
    e!(em, "add.s64 {x}, {x}, 1");
    e!(em, "bra {rl}");
    em.put_label(&rd);
    let result = if pass == SinkhornPass::LseAddW {
        // lse_end: -inf when every term was -inf, else mx + log(s).
        let is_inf = em.fsetp("eq", d, &mx, &neg_inf);
        let lg = em.log(d, &acc);
        let r = em.frn("add", d, &mx, &lg);
        let ninf = em.reg(d);
        em.mov(d, &ninf, &neg_inf);
        em.select(d, &is_inf, &ninf, &r)
    } else {
        acc.clone()
    };
    let oa = em.rd();
    e!(em, "mul.lo.s64 {t}, {q}, {o_stride}");
    e!(em, "add.s64 {t}, {t}, {l}");
    e!(em, "mad.lo.s64 {oa}, {t}, {sz}, {out}");
    em.store("global", d, &oa, &result);
    e!(em, "add.s64 {li}, {li}, {step}");
    e!(em, "bra {lp}");
    em.put_label(&end);
    Ok(em.finish("kiln_sinkhorn", ""))
}

/// One term `x` more in the running log-sum-exp `(mx, s)`, as `lse_push` in `mod.rs`:
/// `e = exp(x > mx ? mx - x : x - mx)`, `s = x > mx ? s·e + 1 : (mx != -inf ? s + e : s)`,
/// `mx = x > mx ? x : mx`.
fn lse_push(em: &mut Em<'_>, d: DType, (mx, s): (&str, &str), x: &str, one: &str, neg_inf: &str) {
    let gt = em.fsetp("gt", d, x, mx);
    let d1 = em.frn("sub", d, mx, x);
    let d2 = em.frn("sub", d, x, mx);
    let arg = em.select(d, &gt, &d1, &d2);
    let e = em.exp(d, &arg);
    let se = em.frn("mul", d, s, &e);
    let above = em.frn("add", d, &se, one);
    let finite = em.fsetp("neu", d, mx, neg_inf);
    let plus = em.frn("add", d, s, &e);
    let below = em.select(d, &finite, &plus, s);
    let s_new = em.select(d, &gt, &above, &below);
    let mx_new = em.select(d, &gt, x, mx);
    em.mov(d, s, &s_new);
    em.mov(d, mx, &mx_new);
}
