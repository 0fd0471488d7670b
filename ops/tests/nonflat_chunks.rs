//! Non-flat grey structures past `CHUNK_READS` (128) entries: the fold is cut into chunks
//! materialised through identity lines (ops/src/morphology_grey.rs). Checks that the chunked
//! graph gives scipy's definition bit for bit (an independent reference written here), eager
//! and fused, and that a 71x71 structure, one stage of ~20,000 instructions before (refused
//! by the JIT limit), now runs fused as several bounded kernels.
//!
//! Reference: scipy's `grey_erosion(x, structure=s, mode='nearest')` for odd sizes and origin
//! 0 is `out[i] = min_o (f64(x[clamp(i + o)]) - s[o])`, converted to f32, with kiln's lattice
//! min (`-0 < +0`; the data has no NaN).

use kiln_ir::{DType, Scalar, TensorType};
use kiln_ops::build_op;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{eager, Storage, Tensor};

fn lattice_min(a: f64, b: f64) -> f64 {
    if a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// A deterministic image with ties, negative values and signed zeros.
fn image(h: usize, w: usize) -> Vec<f32> {
    (0..h * w)
        .map(|i| {
            let v = ((i as u64 * 2654435761) % 97) as f32 * 0.5 - 20.0;
            if i % 13 == 0 {
                -0.0
            } else {
                v
            }
        })
        .collect()
}

/// Structure values: quarters in [-4, 4], row-major over `k x k`.
fn structure(k: usize) -> Vec<f64> {
    (0..k * k)
        .map(|i| ((i * 37 + 11) % 33) as f64 * 0.25 - 4.0)
        .collect()
}

fn structure_text(k: usize, s: &[f64]) -> String {
    (0..k)
        .map(|r| {
            (0..k)
                .map(|c| format!("{}", s[r * k + c]))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

fn reference(x: &[f32], h: usize, w: usize, k: usize, s: &[f64]) -> Vec<f32> {
    let c = (k / 2) as isize;
    let mut out = vec![0f32; h * w];
    for i in 0..h as isize {
        for j in 0..w as isize {
            let mut acc: Option<f64> = None;
            for a in 0..k as isize {
                for b in 0..k as isize {
                    let ii = (i + a - c).clamp(0, h as isize - 1) as usize;
                    let jj = (j + b - c).clamp(0, w as isize - 1) as usize;
                    let t = f64::from(x[ii * w + jj]) + (-s[(a as usize) * k + b as usize]);
                    acc = Some(acc.map_or(t, |m| lattice_min(m, t)));
                }
            }
            out[i as usize * w + j as usize] = acc.unwrap() as f32;
        }
    }
    out
}

fn run_case(h: usize, w: usize, k: usize, op: &str) -> (Tensor, Tensor, Vec<f32>) {
    let x = image(h, w);
    let s = structure(k);
    let input = Tensor::from_storage(Storage::F32(x.clone()), &[1, 1, h, w]).unwrap();
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, h, w],
    };
    let params = vec![
        ("structure".to_string(), structure_text(k, &s)),
        ("mode".to_string(), "nearest".to_string()),
    ];
    let graph = build_op(op, &params, &ty).expect("build");
    let e = eager::run(&graph, std::slice::from_ref(&input))
        .expect("eager")
        .remove(0);
    let f = Engine::new()
        .run(&graph, std::slice::from_ref(&input))
        .expect("fused runs (no JIT-limit refusal)")
        .remove(0);
    (e, f, reference(&x, h, w, k, &s))
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_scalars()
        .into_iter()
        .map(|v| match v {
            Scalar::F32(b) => b,
            other => panic!("f32 expected, got {other:?}"),
        })
        .collect()
}

#[test]
fn chunked_structures_match_the_definition_eager_and_fused() {
    // 11x11 = 121 entries (one chunk), 12x12 would be even: 13x13 = 169 and 25x25 = 625
    // entries are chunked (2 and 5 chunks).
    for &k in &[11usize, 13, 25] {
        let (e, f, want) = run_case(29, 31, k, "grey_erosion");
        assert_eq!(first_difference(&e, &f), None, "k={k}: eager vs fused");
        let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
        let got = bits(&e);
        let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
        assert_eq!(bad, 0, "k={k}: {bad} elements differ from the definition");
    }
}

#[test]
fn dilation_with_a_chunked_structure_is_eager_equal_fused() {
    let (e, f, _) = run_case(27, 22, 17, "grey_dilation");
    assert_eq!(first_difference(&e, &f), None);
}

#[test]
fn a_71x71_structure_runs_fused() {
    // 5041 entries: 40 chunks of at most 128 gathers each, then a combine tree.
    let (e, f, want) = run_case(75, 73, 71, "grey_erosion");
    assert_eq!(first_difference(&e, &f), None, "eager vs fused");
    let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
    assert_eq!(bits(&f), want, "fused vs the definition");
}
