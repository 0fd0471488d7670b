//! The host a cache entry must match: its target triple and the CPU features it has; and
//! the compile targets a host looks entries up for.
//!
//! Scope: run-time feature detection on x86_64 (`is_x86_feature_detected!`) and aarch64
//! (`is_aarch64_feature_detected!`) over a fixed list of features that code generators use
//! (every feature of `kiln_codegen::cpu::FEATURES`, the ones Cranelift's ISA settings
//! name, under the same names), reported as a sorted list of names; the check that a host
//! has every feature an entry needs; [`HostSpec::for_target`], the triple and features a
//! kernel was compiled for (what a key and an entry record); and [`lookup_specs`], the
//! targets whose entries this host may run, best first: the native target (what its JIT
//! compiles for), then each named feature level of its architecture that it has, highest
//! first (the levels `kiln aot build --target` builds).
//!
//! Exactness: detection only reads CPUID / the OS's hwcaps, so it is the same on every
//! call; an entry's features are its code's compile settings, and the store refuses an entry
//! whose features this host lacks. Limits: other architectures report no features.

use kiln_codegen::cpu::CpuTarget;

/// A host (or a target being built for): triple and available CPU features, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    /// Target triple, e.g. `x86_64-unknown-linux-gnu`.
    pub triple: String,
    /// CPU feature names, sorted and deduplicated.
    pub features: Vec<String>,
}

impl HostSpec {
    /// The machine this process runs on.
    pub fn detect() -> Self {
        HostSpec {
            triple: host_triple().to_string(),
            features: host_features(),
        }
    }

    /// A spec with the given triple and features (sorted and deduplicated here).
    pub fn new(triple: &str, features: &[&str]) -> Self {
        let mut f: Vec<String> = features.iter().map(|s| s.to_string()).collect();
        f.sort();
        f.dedup();
        HostSpec {
            triple: triple.to_string(),
            features: f,
        }
    }

    /// The triple and features code compiled for `target` records (its key and entry).
    pub fn for_target(target: &CpuTarget) -> Self {
        HostSpec {
            triple: target.triple().to_string(),
            features: target.features().to_vec(),
        }
    }

    /// The features in `required` this host lacks (empty when it has them all).
    pub fn missing(&self, required: &[String]) -> Vec<String> {
        required
            .iter()
            .filter(|r| !self.features.iter().any(|h| h == *r))
            .cloned()
            .collect()
    }
}

/// The compile targets whose cache entries this host looks up, best first: the native
/// target (what its JIT compiles for; its entries are written under it), then every named
/// feature level of its architecture whose features it has, highest first. Duplicates
/// (a level equal to the native target) are dropped.
pub fn lookup_specs() -> Vec<HostSpec> {
    let native = CpuTarget::native();
    let host = HostSpec::detect();
    let mut v = vec![HostSpec::for_target(&native)];
    for level in CpuTarget::levels(native.arch()) {
        let spec = HostSpec::for_target(&level);
        if host.missing(&spec.features).is_empty() && !v.contains(&spec) {
            v.push(spec);
        }
    }
    v
}

/// The target triple this kiln was compiled for.
pub fn host_triple() -> &'static str {
    env!("KILN_TARGET_TRIPLE")
}

/// The CPU features of this machine, sorted.
pub fn host_features() -> Vec<String> {
    let mut v: Vec<String> = detect().into_iter().map(str::to_string).collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Vec<&'static str> {
    let mut v = Vec::new();
    macro_rules! probe {
        ($($f:tt),*) => {$(
            if std::arch::is_x86_feature_detected!($f) {
                v.push($f);
            }
        )*};
    }
    probe!(
        "sse2",
        "sse3",
        "ssse3",
        "sse4.1",
        "sse4.2",
        "popcnt",
        "avx",
        "avx2",
        "fma",
        "bmi1",
        "bmi2",
        "lzcnt",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512dq",
        "avx512vl",
        "cmpxchg16b",
        "avxvnni",
        "avx512vnni",
        "avx512bitalg",
        "avx512vbmi"
    );
    v
}

#[cfg(target_arch = "aarch64")]
fn detect() -> Vec<&'static str> {
    let mut v = Vec::new();
    macro_rules! probe {
        ($($f:tt),*) => {$(
            if std::arch::is_aarch64_feature_detected!($f) {
                v.push($f);
            }
        )*};
    }
    probe!("neon", "fp16", "lse", "crc", "aes", "sha2", "sve", "sve2", "dotprod", "paca", "i8mm");
    v
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Vec<&'static str> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_has_every_feature_of_its_lookup_specs() {
        let host = HostSpec::detect();
        let specs = lookup_specs();
        assert_eq!(specs[0], HostSpec::for_target(&CpuTarget::native()));
        for s in &specs {
            assert_eq!(s.triple, host.triple);
            assert!(host.missing(&s.features).is_empty(), "{s:?} vs {host:?}");
        }
        // Every feature name of the host's architecture is probed.
        let arch = host.triple.split('-').next().unwrap_or("");
        for (name, a, _) in kiln_codegen::cpu::FEATURES {
            if *a == arch && CpuTarget::native().features().iter().any(|f| f == name) {
                assert!(host.features.iter().any(|f| f == name), "{name}");
            }
        }
    }

    #[test]
    fn features_are_sorted_and_the_host_has_them_all() {
        let h = HostSpec::detect();
        let mut s = h.features.clone();
        s.sort();
        s.dedup();
        assert_eq!(s, h.features);
        assert!(h.missing(&h.features).is_empty());
        #[cfg(target_arch = "x86_64")]
        assert!(
            h.features.iter().any(|f| f == "sse2"),
            "x86_64 always has sse2"
        );
    }

    #[test]
    fn missing_lists_exactly_what_lacks() {
        let h = HostSpec::new("x", &["b", "a"]);
        assert_eq!(h.features, ["a", "b"]);
        let req = vec!["a".to_string(), "c".to_string()];
        assert_eq!(h.missing(&req), ["c"]);
    }
}
