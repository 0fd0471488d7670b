//! CPU code-generation targets: the instruction set a kernel is compiled for, as a target
//! triple plus the CPU features its code may use.
//!
//! Scope: [`CpuTarget::native`] is the machine this process runs on, with exactly the
//! features `cranelift-native` enables (what every JIT compile uses); [`CpuTarget::parse`]
//! reads the names `kiln aot build --target` takes: `x86_64-unknown-linux-gnu` /
//! `aarch64-unknown-linux-gnu` (or just `x86_64` / `aarch64`) for the triple's baseline
//! level, `x86_64+avx`, `x86_64+avx2`, `x86_64+avx512f` for the higher x86 levels
//! ([`LEVELS`]). A target other than the native one builds its ISA with
//! `cranelift_codegen::isa::lookup` and the level's Cranelift settings (`has_sse41`,
//! `has_avx2`, ...), so kernels can be compiled for aarch64 on an x86_64 host and back.
//!
//! Feature names are the ones `std::arch::is_*_feature_detected!` takes (`sse4.1`, `avx2`,
//! `lse`, `paca`), each tied to the Cranelift setting it turns on ([`FEATURES`]); a
//! target's feature list is read back from the settings of the ISA it builds, so it is
//! exactly what its code was compiled for.
//!
//! Exactness: Cranelift's ISA settings choose instructions, never results (kiln builds no
//! CLIF `fma`, `fmin` or `fmax`, whose lowering could differ); the same kernel compiled for
//! two levels or two architectures gives the same bits (tested by running kernels compiled
//! for each level, and under qemu for aarch64). Limits: 64-bit Linux triples only; the x86
//! baseline is x86-64-v2 (SSE4.2 and POPCNT: without SSE4.1 Cranelift calls libm for float
//! rounding, which a relocation-free cache entry cannot hold); aarch64 has one level, the
//! architecture's baseline (NEON).

use std::sync::{Arc, OnceLock};

use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::settings::{self, Configurable};

use crate::CodegenError;

/// Each CPU feature kiln records: its name (as `is_*_feature_detected!` spells it), the
/// architecture, and the Cranelift ISA setting it enables.
pub const FEATURES: &[(&str, &str, &str)] = &[
    ("cmpxchg16b", "x86_64", "has_cmpxchg16b"),
    ("sse3", "x86_64", "has_sse3"),
    ("ssse3", "x86_64", "has_ssse3"),
    ("sse4.1", "x86_64", "has_sse41"),
    ("sse4.2", "x86_64", "has_sse42"),
    ("popcnt", "x86_64", "has_popcnt"),
    ("avx", "x86_64", "has_avx"),
    ("avx2", "x86_64", "has_avx2"),
    ("fma", "x86_64", "has_fma"),
    ("avxvnni", "x86_64", "has_avx_vnni"),
    ("avx512vnni", "x86_64", "has_avx512vnni"),
    ("bmi1", "x86_64", "has_bmi1"),
    ("bmi2", "x86_64", "has_bmi2"),
    ("avx512bitalg", "x86_64", "has_avx512bitalg"),
    ("avx512dq", "x86_64", "has_avx512dq"),
    ("avx512f", "x86_64", "has_avx512f"),
    ("avx512vl", "x86_64", "has_avx512vl"),
    ("avx512vbmi", "x86_64", "has_avx512vbmi"),
    ("lzcnt", "x86_64", "has_lzcnt"),
    ("lse", "aarch64", "has_lse"),
    ("paca", "aarch64", "has_pauth"),
    ("fp16", "aarch64", "has_fp16"),
    ("dotprod", "aarch64", "has_dotprod"),
    ("i8mm", "aarch64", "has_i8mm"),
];

/// The named feature levels `kiln aot build --target` accepts: architecture, level suffix
/// (`""` for the baseline), features. Each level includes the ones before it.
pub const LEVELS: &[(&str, &str, &[&str])] = &[
    (
        "x86_64",
        "",
        &["cmpxchg16b", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"],
    ),
    (
        "x86_64",
        "avx",
        &[
            "avx",
            "cmpxchg16b",
            "popcnt",
            "sse3",
            "sse4.1",
            "sse4.2",
            "ssse3",
        ],
    ),
    (
        "x86_64",
        "avx2",
        &[
            "avx",
            "avx2",
            "bmi1",
            "bmi2",
            "cmpxchg16b",
            "fma",
            "lzcnt",
            "popcnt",
            "sse3",
            "sse4.1",
            "sse4.2",
            "ssse3",
        ],
    ),
    (
        "x86_64",
        "avx512f",
        &[
            "avx",
            "avx2",
            "avx512dq",
            "avx512f",
            "avx512vl",
            "bmi1",
            "bmi2",
            "cmpxchg16b",
            "fma",
            "lzcnt",
            "popcnt",
            "sse3",
            "sse4.1",
            "sse4.2",
            "ssse3",
        ],
    ),
    ("aarch64", "", &[]),
];

/// The Linux triple of each architecture kiln compiles for.
fn triple_of(arch: &str) -> Option<&'static str> {
    match arch {
        "x86_64" => Some("x86_64-unknown-linux-gnu"),
        "aarch64" => Some("aarch64-unknown-linux-gnu"),
        _ => None,
    }
}

/// A CPU the kernels are compiled for: triple and the features its code may use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CpuTarget {
    triple: String,
    /// Sorted, deduplicated names from [`FEATURES`].
    features: Vec<String>,
    /// This machine through `cranelift-native` (code that may run in this process).
    native: bool,
}

fn target_err(msg: String) -> CodegenError {
    CodegenError::Target(msg)
}

impl CpuTarget {
    /// The machine this process runs on, with the features `cranelift-native` detects:
    /// the target of every JIT compile.
    pub fn native() -> CpuTarget {
        static NATIVE: OnceLock<Result<CpuTarget, String>> = OnceLock::new();
        let r = NATIVE.get_or_init(|| {
            let isa = native_isa(true).map_err(|e| e.to_string())?;
            Ok(CpuTarget {
                triple: isa.triple().to_string(),
                features: features_of(&*isa),
                native: true,
            })
        });
        match r {
            Ok(t) => t.clone(),
            // No native ISA (an architecture Cranelift lacks): every compile fails with
            // the same error, so the target only names the triple.
            Err(_) => CpuTarget {
                triple: String::new(),
                features: Vec::new(),
                native: true,
            },
        }
    }

    /// A target by name: `TRIPLE` or `ARCH` (the baseline level) or `ARCH+LEVEL`
    /// (see [`LEVELS`]), e.g. `aarch64-unknown-linux-gnu`, `x86_64+avx2`.
    pub fn parse(name: &str) -> Result<CpuTarget, CodegenError> {
        let (base, level) = name.split_once('+').unwrap_or((name, ""));
        let arch = base.split('-').next().unwrap_or(base);
        let Some(triple) = triple_of(arch) else {
            return Err(target_err(format!(
                "unknown CPU architecture in `{name}` (x86_64 or aarch64)"
            )));
        };
        if base != arch && base != triple {
            return Err(target_err(format!(
                "unsupported triple `{base}` (kiln compiles for {triple})"
            )));
        }
        let Some((_, _, feats)) = LEVELS.iter().find(|(a, l, _)| *a == arch && *l == level) else {
            let known: Vec<String> = LEVELS
                .iter()
                .filter(|(a, l, _)| *a == arch && !l.is_empty())
                .map(|(a, l, _)| format!("{a}+{l}"))
                .collect();
            return Err(target_err(format!(
                "unknown feature level `+{level}` for {arch} (known: {})",
                if known.is_empty() {
                    "none, only the baseline".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        let wanted = CpuTarget {
            triple: triple.to_string(),
            features: feats.iter().map(|s| s.to_string()).collect(),
            native: false,
        };
        // The features as the ISA records them (a check that every name maps to a setting).
        let isa = wanted.isa(true)?;
        let got = features_of(&*isa);
        if got != wanted.features {
            return Err(target_err(format!(
                "{name}: Cranelift enabled {got:?}, not {:?}",
                wanted.features
            )));
        }
        Ok(wanted)
    }

    /// The named levels of `arch` (highest first), as targets.
    pub fn levels(arch: &str) -> Vec<CpuTarget> {
        let mut v: Vec<CpuTarget> = LEVELS
            .iter()
            .rev()
            .filter(|(a, _, _)| *a == arch)
            .filter_map(|(a, l, _)| {
                let name = if l.is_empty() {
                    a.to_string()
                } else {
                    format!("{a}+{l}")
                };
                CpuTarget::parse(&name).ok()
            })
            .collect();
        v.dedup();
        v
    }

    /// The target triple, e.g. `aarch64-unknown-linux-gnu`.
    pub fn triple(&self) -> &str {
        &self.triple
    }

    /// The architecture, the triple's first part.
    pub fn arch(&self) -> &str {
        self.triple.split('-').next().unwrap_or("")
    }

    /// The CPU features the code may use, sorted (names as in [`FEATURES`]).
    pub fn features(&self) -> &[String] {
        &self.features
    }

    /// Whether code compiled for this target can run in this process: the native target,
    /// or one of the host's triple whose every feature the native target has.
    pub fn runs_here(&self) -> bool {
        if self.native {
            return true;
        }
        let n = CpuTarget::native();
        n.triple == self.triple && self.features.iter().all(|f| n.features.contains(f))
    }

    /// Whether this is the native target.
    pub fn is_native(&self) -> bool {
        self.native
    }

    /// The Cranelift ISA, optimising for speed or (cold code) for compile time.
    pub(crate) fn isa(&self, speed: bool) -> Result<Arc<dyn TargetIsa>, CodegenError> {
        if self.native {
            return native_isa(speed);
        }
        let triple: target_lexicon::Triple = self
            .triple
            .parse()
            .map_err(|e| target_err(format!("{}: {e}", self.triple)))?;
        let mut b = cranelift_codegen::isa::lookup(triple)
            .map_err(|e| target_err(format!("{}: {e}", self.triple)))?;
        for f in &self.features {
            let setting = FEATURES
                .iter()
                .find(|(n, _, _)| n == f)
                .map(|(_, _, s)| *s)
                .ok_or_else(|| target_err(format!("unknown CPU feature `{f}`")))?;
            b.enable(setting)
                .map_err(|e| target_err(format!("{setting}: {e}")))?;
        }
        finish_isa(b, speed)
    }
}

/// The ISA of this machine through `cranelift-native`.
fn native_isa(speed: bool) -> Result<Arc<dyn TargetIsa>, CodegenError> {
    let b = cranelift_native::builder().map_err(|e| CodegenError::Cranelift(e.to_string()))?;
    finish_isa(b, speed)
}

/// The ISA of `b` with kiln's shared flags (no fast-math-like flag exists in Cranelift and
/// none is set; the verifier runs in debug builds).
fn finish_isa(
    b: cranelift_codegen::isa::Builder,
    speed: bool,
) -> Result<Arc<dyn TargetIsa>, CodegenError> {
    let cl_err =
        |what: &str, e: settings::SetError| CodegenError::Cranelift(format!("{what}: {e:?}"));
    let mut fb = settings::builder();
    fb.set("opt_level", if speed { "speed" } else { "none" })
        .map_err(|e| cl_err("opt_level", e))?;
    if !speed {
        fb.set("regalloc_algorithm", "single_pass")
            .map_err(|e| cl_err("regalloc_algorithm", e))?;
    }
    fb.set(
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )
    .map_err(|e| cl_err("enable_verifier", e))?;
    fb.set("is_pic", "false").map_err(|e| cl_err("is_pic", e))?;
    let isa = b
        .finish(settings::Flags::new(fb))
        .map_err(|e| CodegenError::Cranelift(format!("isa: {e:?}")))?;
    if isa.pointer_type() != cranelift_codegen::ir::types::I64 {
        return Err(CodegenError::Cranelift(
            "the CPU backend needs a 64-bit target".into(),
        ));
    }
    Ok(isa)
}

/// The features of [`FEATURES`] whose Cranelift setting is on in `isa`, sorted.
fn features_of(isa: &dyn TargetIsa) -> Vec<String> {
    let on: Vec<String> = isa
        .isa_flags()
        .iter()
        .filter(|v| v.as_bool() == Some(true))
        .map(|v| v.name.to_string())
        .collect();
    let mut f: Vec<String> = FEATURES
        .iter()
        .filter(|(_, _, s)| on.iter().any(|o| o == s))
        .map(|(n, _, _)| n.to_string())
        .collect();
    f.sort();
    f.dedup();
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_record_their_features() {
        let base = CpuTarget::parse("x86_64-unknown-linux-gnu").unwrap();
        assert_eq!(base, CpuTarget::parse("x86_64").unwrap());
        assert!(base.features().iter().any(|f| f == "sse4.1"));
        let avx2 = CpuTarget::parse("x86_64+avx2").unwrap();
        assert!(avx2.features().iter().any(|f| f == "avx2"));
        assert!(base.features().iter().all(|f| avx2.features().contains(f)));
        let a64 = CpuTarget::parse("aarch64-unknown-linux-gnu").unwrap();
        assert_eq!(a64.triple(), "aarch64-unknown-linux-gnu");
        assert!(a64.features().is_empty());
        for bad in [
            "riscv64",
            "x86_64+sse9",
            "aarch64+avx2",
            "x86_64-apple-darwin",
        ] {
            assert!(CpuTarget::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(CpuTarget::levels("x86_64").len(), 4);
    }

    #[test]
    fn the_native_target_records_what_cranelift_native_enabled() {
        let n = CpuTarget::native();
        assert!(n.is_native() && n.runs_here());
        let mut s = n.features().to_vec();
        s.sort();
        s.dedup();
        assert_eq!(s, n.features());
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.1") {
            assert!(n.features().iter().any(|f| f == "sse4.1"));
        }
    }
}
