//! The Sinkhorn lane passes (`ptx/sinkhorn.rs`): every pass × f32/f64 assembles with ptxas
//! for sm_80 and sm_90 (exit 0, nothing on stderr), and the text keeps the exactness rules
//! (`.rn` float arithmetic, no `.ftz`, no `fma`, no `.approx`, Rust's comparison
//! orderedness in the log-sum-exp). Without ptxas the assembly test fails when `CI` or
//! `KILN_PTXAS` is set and prints a visible `SKIP: ...` line elsewhere; the text checks run
//! always. (Running the passes needs a GPU: `runtime/tests/sinkhorn_cuda.rs`.)

use kiln_codegen::ptx::{ptxas, render_sinkhorn, PtxTarget, SinkhornPass};
use kiln_ir::DType;

fn modules(target: PtxTarget) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for pass in SinkhornPass::ALL {
        for d in [DType::F32, DType::F64] {
            let text = render_sinkhorn(pass, d, &target)
                .unwrap_or_else(|e| panic!("{pass:?} {d}: render failed: {e}"));
            v.push((format!("{pass:?} {d} sm_{}", target.sm), text));
        }
    }
    v
}

#[test]
fn every_pass_assembles_for_sm80_and_sm90() {
    let Some(ptxas_bin) = ptxas::ptxas_or_skip() else {
        return;
    };
    let mut failures = Vec::new();
    for target in [PtxTarget::sm80(), PtxTarget::sm90()] {
        for (name, text) in modules(target) {
            if let Err(e) = ptxas::assemble_with(&ptxas_bin, &text, target.sm) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn passes_keep_the_exactness_rules() {
    for (name, text) in modules(PtxTarget::sm80()) {
        let code: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("//"))
            .collect();
        for l in &code {
            assert!(!l.contains(".ftz") && !l.contains(".approx"), "{name}: {l}");
            assert!(
                !l.starts_with("fma") && !l.starts_with("mad.f"),
                "{name}: {l}"
            );
            for op in ["add", "sub", "mul", "div"] {
                for t in ["f32", "f64"] {
                    if l.starts_with(&format!("{op}.")) && l.contains(&format!(".{t} ")) {
                        assert!(l.starts_with(&format!("{op}.rn.{t}")), "{name}: {l}");
                    }
                }
            }
        }
        assert!(
            code.iter()
                .any(|l| l.starts_with(".visible .entry kiln_sinkhorn(")),
            "{name}"
        );
        if name.starts_with("LseAddW") {
            // x > mx ordered, mx != -inf unordered (true on NaN, as Rust's `!=`), == ordered.
            assert!(code.iter().any(|l| l.starts_with("setp.gt.f")), "{name}");
            assert!(code.iter().any(|l| l.starts_with("setp.neu.f")), "{name}");
            assert!(code.iter().any(|l| l.starts_with("setp.eq.f")), "{name}");
        }
    }
}

#[test]
fn integer_dtypes_are_refused() {
    assert!(render_sinkhorn(SinkhornPass::MulW, DType::U8, &PtxTarget::sm80()).is_err());
}
