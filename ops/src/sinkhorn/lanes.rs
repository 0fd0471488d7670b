//! Lane kernels of the Sinkhorn fast path ([`Exec::Fused`](crate::program::Exec)): the
//! matrix-vector sums and log-sum-exps of one iteration, strip of adjacent output lanes by
//! strip, with run-time ISA selection on x86_64 (AVX-512F, AVX2, baseline; aarch64 runs
//! the baseline, NEON being part of it).
//!
//! Shape: a pass reads a matrix of `rows` rows (the kernel `K[i][j]`, or its transpose
//! `K[j][i]` for the sums over columns), row by row, and updates one accumulator per
//! (sample, lane) held in registers, 4 samples (8 on AVX-512) sharing each row load; a
//! strip of the matrix is read by every sample in turn while it is in cache.
//!
//! Exactness: every (sample, lane) accumulator is an independent scalar that takes its
//! terms in ascending row order with the very expression of the reference loop in
//! `mod.rs` (same operands, same operand order, the same `lse_push`), so the kernels
//! compute the reference's bits; vector lanes only run independent accumulators side by
//! side. The ISA variants compile the same Rust: `target_feature` changes instruction
//! selection, never the IEEE operations (Rust never contracts `a * b + c` into an FMA).
//! The unit tests compare every variant the host has with a plain loop, bit for bit,
//! including NaN, ±inf and -inf potentials (NaN compared canonicalised: which operand's
//! payload an add propagates follows the compiler's operand order, so `mod.rs` makes every
//! output NaN canonical).
//!
//! Limits: the matrices are padded to a multiple of [`WIDTH`] lanes with zeros; padded
//! lanes are computed and never read.

use rayon::prelude::*;

use kiln_codegen::ptx::SinkhornPass;

use super::{lse_end, lse_push, Real};

/// Padded matrices are a multiple of this many lanes wide (a multiple of every strip).
pub(super) const WIDTH: usize = 128;
/// Samples that share each load of a matrix row in the sums (AVX2 and baseline; AVX-512
/// groups 8: its 32 registers hold twice the accumulators).
const GROUP: usize = 4;

/// `w` rounded up to a multiple of [`WIDTH`].
pub(super) fn padded(w: usize) -> usize {
    w.div_ceil(WIDTH) * WIDTH
}

/// `src` (`rows × cols`, row-major) with every row zero-padded to `padded(cols)`.
pub(super) fn pad<T: Real>(src: &[T], rows: usize, cols: usize) -> Vec<T> {
    let w = padded(cols);
    let mut out = vec![T::ZERO; rows * w];
    for (o, s) in out.chunks_exact_mut(w).zip(src.chunks_exact(cols)) {
        o[..cols].copy_from_slice(s);
    }
    out
}

/// The transpose of `src` (`rows × cols`): `cols` rows zero-padded to `padded(rows)`.
pub(super) fn pad_transposed<T: Real>(src: &[T], rows: usize, cols: usize) -> Vec<T> {
    const B: usize = 32;
    let w = padded(rows);
    let mut out = vec![T::ZERO; cols * w];
    for i0 in (0..rows).step_by(B) {
        for j0 in (0..cols).step_by(B) {
            for i in i0..(i0 + B).min(rows) {
                for j in j0..(j0 + B).min(cols) {
                    out[j * w + i] = src[i * cols + j];
                }
            }
        }
    }
    out
}

/// A padded row-major matrix: `rows` rows of `width` lanes (a multiple of [`WIDTH`]).
#[derive(Clone, Copy)]
pub(super) struct Mat<'a, T> {
    /// `rows × width` values.
    pub data: &'a [T],
    /// Rows (the summation index).
    pub rows: usize,
    /// Lanes per row.
    pub width: usize,
}

/// Pass kinds (the term each accumulator adds per row `x`, with `m = mat[x][lane]`, `w`
/// the sample's row vector, `s` its lane vector).
/// `acc + m * w`: `Σ_i K_ij u_i`.
pub(super) const MUL_W: u8 = 0;
/// `acc + (s * m) * w`: `Σ_j (a⁻¹_i K_ij) v_j` read from the transposed kernel.
pub(super) const S_MUL_W: u8 = 1;
/// `acc + (w * m) * s`: `Σ_i (u_i K_ij) v_j`.
pub(super) const W_MUL_S: u8 = 2;
/// `acc + exp((m + w) + s)`: `Σ_i exp((Mr_ij + u_i) + v_j)`.
pub(super) const EXP_ADD_W_S: u8 = 3;
/// Running log-sum-exp of `m + w`: `LSE_i(Mr_ij + u_i)` (or over j, transposed).
pub(super) const LSE_ADD_W: u8 = 4;

/// Whether a pass kind reads a per-lane vector `s`.
const fn reads_s(kind: u8) -> bool {
    matches!(kind, S_MUL_W | W_MUL_S | EXP_ADD_W_S)
}

/// The instruction sets a pass can be compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// The target's baseline (x86-64: SSE2; aarch64: NEON).
    Baseline,
    /// x86_64 AVX2.
    Avx2,
    /// x86_64 AVX-512F.
    Avx512,
}

impl Isa {
    /// The widest set this CPU has.
    pub fn host() -> Isa {
        [Isa::Avx512, Isa::Avx2]
            .into_iter()
            .find(|i| i.available())
            .unwrap_or(Isa::Baseline)
    }

    /// Whether this CPU can run code compiled for the set.
    pub fn available(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }
}

/// One strip of `L` lanes from `l0`, for `G` samples: `out[g][l0 - lo + l]` for `l < L`
/// (`out` holds the lanes from `lo`).
#[inline(always)]
fn strip<T: Real, const KIND: u8, const G: usize, const L: usize>(
    mat: Mat<'_, T>,
    (lo, l0): (usize, usize),
    w: &[&[T]; G],
    s: &[&[T]; G],
    out: &mut [&mut [T]; G],
) {
    let mut acc = [[T::ZERO; L]; G];
    let mut mx = [[T::NEG_INF; L]; G];
    let mut sl = [[T::ZERO; L]; G];
    if reads_s(KIND) {
        for g in 0..G {
            sl[g].copy_from_slice(&s[g][l0..l0 + L]);
        }
    }
    let w: [&[T]; G] = std::array::from_fn(|g| &w[g][..mat.rows]);
    for (x, row) in mat.data.chunks_exact(mat.width).take(mat.rows).enumerate() {
        let row = &row[l0..l0 + L];
        let wx: [T; G] = std::array::from_fn(|g| w[g][x]);
        // One loop over the lanes per kind, the samples innermost (a `match` inside the
        // lane loop, or a sample loop around it, keeps LLVM from vectorising it).
        match KIND {
            LSE_ADD_W => {
                for l in 0..L {
                    for g in 0..G {
                        lse_push(&mut mx[g][l], &mut acc[g][l], row[l] + wx[g]);
                    }
                }
            }
            MUL_W => {
                for l in 0..L {
                    for g in 0..G {
                        acc[g][l] = acc[g][l] + row[l] * wx[g];
                    }
                }
            }
            S_MUL_W => {
                for l in 0..L {
                    for g in 0..G {
                        acc[g][l] = acc[g][l] + (sl[g][l] * row[l]) * wx[g];
                    }
                }
            }
            W_MUL_S => {
                for l in 0..L {
                    for g in 0..G {
                        acc[g][l] = acc[g][l] + (wx[g] * row[l]) * sl[g][l];
                    }
                }
            }
            _ => {
                for l in 0..L {
                    for g in 0..G {
                        acc[g][l] = acc[g][l] + ((row[l] + wx[g]) + sl[g][l]).kexp();
                    }
                }
            }
        }
    }
    for g in 0..G {
        for l in 0..L {
            out[g][l0 - lo + l] = if KIND == LSE_ADD_W {
                lse_end(mx[g][l], acc[g][l])
            } else {
                acc[g][l]
            };
        }
    }
}

/// Every sample on the strip from `l0`, `L` lanes wide: groups of `G` samples sharing each
/// load of a matrix row, then single samples.
#[inline(always)]
fn strip_all<T: Real, const KIND: u8, const G: usize, const L: usize>(
    mat: Mat<'_, T>,
    at: (usize, usize),
    w: &[&[T]],
    s: &[&[T]],
    out: &mut [&mut [T]],
) {
    let s_of = |q: usize| -> &[T] { s.get(q).copied().unwrap_or(&[]) };
    let mut q = 0;
    for chunk in out.chunks_mut(G) {
        if chunk.len() == G {
            let mut it = chunk.iter_mut();
            let mut oa: [&mut [T]; G] = std::array::from_fn(|_| match it.next() {
                Some(o) => &mut **o,
                None => &mut [],
            });
            let wa: [&[T]; G] = std::array::from_fn(|g| w[q + g]);
            let sa: [&[T]; G] = std::array::from_fn(|g| s_of(q + g));
            strip::<T, KIND, G, L>(mat, at, &wa, &sa, &mut oa);
        } else {
            for (k, o) in chunk.iter_mut().enumerate() {
                let (wq, sq) = (w[q + k], s_of(q + k));
                strip::<T, KIND, 1, L>(mat, at, &[wq], &[sq], &mut [&mut **o]);
            }
        }
        q += chunk.len();
    }
}

/// The pass for every sample, strip by strip (each strip of the matrix is read by every
/// sample while it is in cache), `BYTES` bytes of accumulators per strip for the sums
/// (the register file's worth: 8 vectors) and a quarter of it for the exp kinds (whose
/// temporaries need registers too).
#[inline(always)]
fn pass_body<T: Real, const KIND: u8, const BYTES: usize, const G: usize>(
    mat: Mat<'_, T>,
    (lo, hi): (usize, usize),
    w: &[&[T]],
    s: &[&[T]],
    out: &mut [&mut [T]],
) {
    // Sums over G samples or more: G samples share each row load, BYTES of
    // accumulators in all. Fewer samples: one at a time on strips of BYTES (the exp
    // kinds a quarter of it: their temporaries need registers too).
    let grouped = w.len() >= G && !matches!(KIND, LSE_ADD_W | EXP_ADD_W_S);
    let bytes = match KIND {
        LSE_ADD_W | EXP_ADD_W_S => BYTES / 4,
        _ if grouped => BYTES / G,
        _ => BYTES,
    };
    // A power of two from 16 to 128 (so WIDTH is a multiple of it).
    let lanes = (bytes / std::mem::size_of::<T>()).clamp(16, WIDTH);
    for l0 in (lo..hi).step_by(lanes) {
        let at = (lo, l0);
        match (grouped, lanes) {
            (false, 128) => strip_all::<T, KIND, 1, 128>(mat, at, w, s, out),
            (false, 64) => strip_all::<T, KIND, 1, 64>(mat, at, w, s, out),
            (false, 32) => strip_all::<T, KIND, 1, 32>(mat, at, w, s, out),
            (false, _) => strip_all::<T, KIND, 1, 16>(mat, at, w, s, out),
            (true, 128) => strip_all::<T, KIND, G, 128>(mat, at, w, s, out),
            (true, 64) => strip_all::<T, KIND, G, 64>(mat, at, w, s, out),
            (true, 32) => strip_all::<T, KIND, G, 32>(mat, at, w, s, out),
            (true, _) => strip_all::<T, KIND, G, 16>(mat, at, w, s, out),
        }
    }
}

/// The arguments of one pass over the lanes `range` (`out` holds those lanes).
type Args<'a, 'b, T> = (
    Mat<'a, T>,
    (usize, usize),
    &'b [&'a [T]],
    &'b [&'a [T]],
    &'b mut [&'a mut [T]],
);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn pass_avx512<T: Real, const KIND: u8>((mat, range, w, s, out): Args<'_, '_, T>) {
    pass_body::<T, KIND, 512, 8>(mat, range, w, s, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn pass_avx2<T: Real, const KIND: u8>((mat, range, w, s, out): Args<'_, '_, T>) {
    pass_body::<T, KIND, 256, GROUP>(mat, range, w, s, out)
}

/// One pass over a lane range on the ISA asked for (the baseline if the CPU lacks it).
fn pass_range<T: Real, const KIND: u8>(isa: Isa, args: Args<'_, '_, T>) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked on the line above), the only
            // requirement of calling a `target_feature(enable = "avx512f")` function.
            return unsafe { pass_avx512::<T, KIND>(args) };
        }
        if isa == Isa::Avx2 && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked on the line above).
            return unsafe { pass_avx2::<T, KIND>(args) };
        }
    }
    let _ = isa;
    let (mat, range, w, s, out) = args;
    pass_body::<T, KIND, 128, GROUP>(mat, range, w, s, out)
}

/// Runs pass `KIND` for every sample: `out[q][lane]` for every lane of `mat` (`out[q]` is
/// `mat.width` long), `w[q]` at least `mat.rows` long, `s[q]` (kinds that read one)
/// `mat.width` long. The lanes are cut into `parts` ranges run in parallel (rayon; lanes
/// are independent, so the bits do not depend on it).
pub(super) fn pass<T: Real, const KIND: u8>(
    isa: Isa,
    mat: Mat<'_, T>,
    w: &[&[T]],
    s: &[&[T]],
    out: &mut [Vec<T>],
    parts: usize,
) {
    assert!(
        mat.width.is_multiple_of(WIDTH)
            && mat.data.len() >= mat.rows * mat.width
            && out.len() == w.len()
            && out.iter().all(|o| o.len() == mat.width)
            && w.iter().all(|x| x.len() >= mat.rows)
            && (!reads_s(KIND) || (s.len() == w.len() && s.iter().all(|x| x.len() == mat.width))),
        "sinkhorn lanes: malformed pass"
    );
    let chunk = mat.width.div_ceil(parts.max(1)).div_ceil(WIDTH) * WIDTH;
    if chunk >= mat.width {
        let mut o: Vec<&mut [T]> = out.iter_mut().map(|v| v.as_mut_slice()).collect();
        return pass_range::<T, KIND>(isa, (mat, (0, mat.width), w, s, &mut o));
    }
    // Per lane range, every sample's slice of it.
    let mut ranges: Vec<Vec<&mut [T]>> = (0..mat.width / chunk + 1).map(|_| Vec::new()).collect();
    for v in out.iter_mut() {
        for (r, piece) in v.chunks_mut(chunk).enumerate() {
            ranges[r].push(piece);
        }
    }
    ranges
        .into_par_iter()
        .enumerate()
        .filter(|(_, o)| !o.is_empty())
        .for_each(|(r, mut o)| {
            let lo = r * chunk;
            let hi = (lo + chunk).min(mat.width);
            pass_range::<T, KIND>(isa, (mat, (lo, hi), w, s, &mut o));
        });
}

/// The lane pass `kind` for every sample on `isa` (the baseline when the CPU lacks it), as
/// the fast path runs it: `out[q][lane]` for the `rows x width` matrix `mat` (row-major,
/// `width` a multiple of 128), `w[q]` at least `rows` long, `s[q]` `width` long for the
/// passes that read one. Public so that other backends (the PTX passes) can be compared
/// with it bit for bit; malformed arguments are an error, not a panic.
pub fn lane_pass<T: Real>(
    kind: SinkhornPass,
    isa: Isa,
    (mat, rows, width): (&[T], usize, usize),
    w: &[&[T]],
    s: &[&[T]],
) -> Result<Vec<Vec<T>>, String> {
    let reads = kind.reads_lane_vector();
    if !width.is_multiple_of(WIDTH)
        || rows.checked_mul(width) != Some(mat.len())
        || w.iter().any(|x| x.len() < rows)
        || (reads && (s.len() != w.len() || s.iter().any(|x| x.len() != width)))
    {
        return Err(format!(
            "sinkhorn lane pass {kind:?}: matrix {rows} x {width} (width a multiple of {WIDTH}) \
             of {} values, {} row vectors, {} lane vectors",
            mat.len(),
            w.len(),
            s.len()
        ));
    }
    let m = Mat {
        data: mat,
        rows,
        width,
    };
    let mut out = vec![vec![T::ZERO; width]; w.len()];
    let s: &[&[T]] = if reads { s } else { &[] };
    let o = &mut out;
    match kind {
        SinkhornPass::MulW => pass::<T, MUL_W>(isa, m, w, s, o, 1),
        SinkhornPass::SMulW => pass::<T, S_MUL_W>(isa, m, w, s, o, 1),
        SinkhornPass::WMulS => pass::<T, W_MUL_S>(isa, m, w, s, o, 1),
        SinkhornPass::ExpAddWS => pass::<T, EXP_ADD_W_S>(isa, m, w, s, o, 1),
        SinkhornPass::LseAddW => pass::<T, LSE_ADD_W>(isa, m, w, s, o, 1),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic value stream with NaN, ±inf, -0 and ordinary values.
    fn values<T: Real>(n: usize, seed: u64, specials: bool) -> Vec<T> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|k| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                let v = match (specials, k % 97) {
                    (true, 3) => f64::NAN,
                    (true, 5) => f64::NEG_INFINITY,
                    (true, 7) => f64::INFINITY,
                    (true, 11) => -0.0,
                    _ => 4.0 * u - 2.0,
                };
                T::from_f64(v)
            })
            .collect()
    }

    /// The reference: one accumulator per (sample, lane), rows ascending.
    fn plain<T: Real>(kind: u8, mat: Mat<'_, T>, w: &[&[T]], s: &[&[T]]) -> Vec<Vec<T>> {
        w.iter()
            .enumerate()
            .map(|(q, wq)| {
                (0..mat.width)
                    .map(|l| {
                        let (mut acc, mut mx) = (T::ZERO, T::NEG_INF);
                        for x in 0..mat.rows {
                            let m = mat.data[x * mat.width + l];
                            match kind {
                                LSE_ADD_W => lse_push(&mut mx, &mut acc, m + wq[x]),
                                MUL_W => acc = acc + m * wq[x],
                                S_MUL_W => acc = acc + (s[q][l] * m) * wq[x],
                                W_MUL_S => acc = acc + (wq[x] * m) * s[q][l],
                                _ => acc = acc + ((m + wq[x]) + s[q][l]).kexp(),
                            }
                        }
                        if kind == LSE_ADD_W {
                            lse_end(mx, acc)
                        } else {
                            acc
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn bits<T: Real>(v: &[Vec<T>]) -> Vec<Vec<f64>> {
        v.iter()
            .map(|r| r.iter().map(|x| x.to_f64()).collect())
            .collect()
    }

    /// `samples` samples (6: a group of 4 and two single ones; 2: single ones on wide
    /// strips) over three padded widths, in `parts` parallel lane ranges.
    fn run_kind<T: Real, const KIND: u8>(specials: bool, samples: usize, parts: usize) {
        let (rows, width) = (37, 3 * WIDTH);
        let data = values::<T>(rows * width, 1, specials);
        let mat = Mat {
            data: &data,
            rows,
            width,
        };
        let ws: Vec<Vec<T>> = (0..samples as u64)
            .map(|q| values(rows, 10 + q, specials))
            .collect();
        let ss: Vec<Vec<T>> = (0..samples as u64)
            .map(|q| values(width, 20 + q, specials))
            .collect();
        let w: Vec<&[T]> = ws.iter().map(|v| v.as_slice()).collect();
        let s: Vec<&[T]> = if reads_s(KIND) {
            ss.iter().map(|v| v.as_slice()).collect()
        } else {
            Vec::new()
        };
        let want = plain(KIND, mat, &w, &s);
        for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
            if !isa.available() {
                eprintln!("SKIP sinkhorn lanes {isa:?}: this CPU lacks it");
                continue;
            }
            let mut out = vec![vec![T::ZERO; width]; samples];
            pass::<T, KIND>(isa, mat, &w, &s, &mut out, parts);
            let same = out.iter().zip(&want).all(|(o, e)| {
                o.iter()
                    .zip(e)
                    .all(|(a, b)| a.canon().bits() == b.canon().bits())
            });
            assert!(
                same,
                "kind {KIND} {isa:?} samples {samples} parts {parts}: {:?} vs {:?}",
                &bits(&out)[0][..4],
                &bits(&want)[0][..4]
            );
        }
    }

    fn all_kinds<T: Real>() {
        for (specials, samples, parts) in [(false, 6, 1), (true, 6, 2), (true, 2, 3), (false, 1, 1)]
        {
            run_kind::<T, MUL_W>(specials, samples, parts);
            run_kind::<T, S_MUL_W>(specials, samples, parts);
            run_kind::<T, W_MUL_S>(specials, samples, parts);
            run_kind::<T, EXP_ADD_W_S>(specials, samples, parts);
            run_kind::<T, LSE_ADD_W>(specials, samples, parts);
        }
    }

    #[test]
    fn every_isa_matches_the_plain_loop_bit_for_bit_f32() {
        all_kinds::<f32>();
    }

    #[test]
    fn every_isa_matches_the_plain_loop_bit_for_bit_f64() {
        all_kinds::<f64>();
    }

    #[test]
    fn lane_pass_checks_its_arguments_and_matches_the_plain_loop() {
        let (rows, width) = (5, WIDTH);
        let data = values::<f64>(rows * width, 3, true);
        let ws = [values::<f64>(rows, 4, true)];
        let ss = [values::<f64>(width, 5, true)];
        let (w, s): (Vec<&[f64]>, Vec<&[f64]>) = (vec![&ws[0][..]], vec![&ss[0][..]]);
        let mat = Mat {
            data: &data,
            rows,
            width,
        };
        let got = lane_pass(
            SinkhornPass::WMulS,
            Isa::host(),
            (&data, rows, width),
            &w,
            &s,
        )
        .unwrap();
        let want = plain(W_MUL_S, mat, &w, &s);
        assert!(got[0]
            .iter()
            .zip(&want[0])
            .all(|(a, b)| a.canon().bits() == b.canon().bits()));
        // Width not a multiple of WIDTH, a short matrix, a missing lane vector: errors.
        let bad = |m: (&[f64], usize, usize), s: &[&[f64]]| {
            lane_pass(SinkhornPass::SMulW, Isa::Baseline, m, &w, s).is_err()
        };
        assert!(bad((&data[..rows * 100], rows, 100), &s));
        assert!(bad((&data[..width], rows, width), &s));
        assert!(bad((&data, rows, width), &[]));
    }

    #[test]
    fn padding_and_transpose() {
        let src: Vec<f64> = (0..15).map(|k| k as f64).collect();
        let p = pad(&src, 3, 5);
        assert_eq!(p.len(), 3 * WIDTH);
        assert_eq!(&p[WIDTH..WIDTH + 6], &[5.0, 6.0, 7.0, 8.0, 9.0, 0.0]);
        let t = pad_transposed(&src, 3, 5);
        assert_eq!(t.len(), 5 * WIDTH);
        assert_eq!(&t[2 * WIDTH..2 * WIDTH + 4], &[2.0, 7.0, 12.0, 0.0]);
    }
}
