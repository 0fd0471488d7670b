//! The cache key: a SHA-256 over a canonical byte string of every input that changes the
//! machine code of a kernel.
//!
//! Scope: the inputs are the kernel form (its deterministic text from
//! `codegen/src/kernel_print.rs`, which prints every field: rank, input and output dtypes,
//! each stage's instructions with their dtypes, operands, load offsets, border modes and
//! constants by their exact bits, the result value, and a scan's or reduction's axis and
//! op), the caller's compile options as canonical bytes, the numerics-rules version, the
//! target triple, the CPU feature flags the code may use, the Cranelift version, kiln's
//! entry format version, kiln's build id and, for PTX, the sm and PTX ISA version.
//!
//! Exactness: the canonical string is a sequence of `(name, value)` fields, each
//! length-prefixed (u64 little-endian), in a fixed order, with feature flags sorted and
//! deduplicated. Length prefixes make the encoding injective, so two different input sets
//! never share a byte string; nothing is hashed through a pointer, an address or an
//! interning table, so the key is the same in every process and on every machine.
//!
//! Limits: the caller must put every option that changes code into `compile_options`; a
//! forgotten option is a stale-entry bug this module cannot see.

use std::fmt;

use kiln_codegen::kernel::Kernel;
use sha2::{Digest, Sha256};

use super::host::HostSpec;

/// Version of kiln's on-disk entry format ([`super::entry`]); part of every key.
pub const FORMAT_VERSION: u32 = 1;

/// Version of kiln's numerics rules (SEMANTICS.md). Bump it whenever a rule that changes
/// results (NaN canonicalisation, min/max order, casts, reduction order) changes.
pub const NUMERICS_RULES_VERSION: u32 = 1;

/// The Cranelift version kiln is built with (pinned with `=` in the workspace Cargo.toml; a
/// test checks the two agree).
pub const CRANELIFT_VERSION: &str = "0.135.8";

/// kiln's build id: the crate version and a digest of the sources that generate code
/// (computed by `runtime/build.rs`).
pub fn build_id() -> String {
    format!(
        "{}+src.{}",
        env!("CARGO_PKG_VERSION"),
        env!("KILN_SOURCE_DIGEST")
    )
}

/// A PTX target: the SM architecture and the PTX ISA version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxTarget {
    /// Compute capability, e.g. 80 for `sm_80`.
    pub sm: u32,
    /// PTX ISA version as (major, minor), e.g. (7, 8).
    pub isa: (u32, u32),
}

/// Every input of a cache key. Build it with [`KeyInputs::for_host`] and adjust fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInputs {
    /// Canonical text of the kernel form ([`kernel_text`]).
    pub kernel: String,
    /// Compile options, canonically serialised by the caller.
    pub compile_options: Vec<u8>,
    /// [`NUMERICS_RULES_VERSION`] unless testing.
    pub numerics_rules: u32,
    /// Target triple the code is for.
    pub target_triple: String,
    /// CPU features the code may use (any order; sorted when encoded).
    pub cpu_features: Vec<String>,
    /// [`CRANELIFT_VERSION`] unless testing.
    pub cranelift_version: String,
    /// [`FORMAT_VERSION`] unless testing.
    pub format_version: u32,
    /// [`build_id`] unless testing.
    pub build_id: String,
    /// For PTX code: the sm and ISA version.
    pub ptx: Option<PtxTarget>,
}

/// The canonical text of a kernel form: its deterministic printer's output.
pub fn kernel_text(kernel: &Kernel) -> String {
    kernel.to_string()
}

impl KeyInputs {
    /// Inputs for CPU code for `host`, with this build's versions.
    pub fn for_host(kernel: &Kernel, compile_options: &[u8], host: &HostSpec) -> Self {
        KeyInputs {
            kernel: kernel_text(kernel),
            compile_options: compile_options.to_vec(),
            numerics_rules: NUMERICS_RULES_VERSION,
            target_triple: host.triple.clone(),
            cpu_features: host.features.clone(),
            cranelift_version: CRANELIFT_VERSION.to_string(),
            format_version: FORMAT_VERSION,
            build_id: build_id(),
            ptx: None,
        }
    }

    /// The canonical byte string the key hashes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |name: &str, value: &[u8]| {
            out.extend_from_slice(&(name.len() as u64).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value);
        };
        field("kiln-cache-key", b"1");
        field("kernel", self.kernel.as_bytes());
        field("compile_options", &self.compile_options);
        field("numerics_rules", &self.numerics_rules.to_le_bytes());
        field("target_triple", self.target_triple.as_bytes());
        let mut feats: Vec<&str> = self.cpu_features.iter().map(String::as_str).collect();
        feats.sort_unstable();
        feats.dedup();
        let mut fbytes = Vec::new();
        for f in feats {
            fbytes.extend_from_slice(&(f.len() as u64).to_le_bytes());
            fbytes.extend_from_slice(f.as_bytes());
        }
        field("cpu_features", &fbytes);
        field("cranelift_version", self.cranelift_version.as_bytes());
        field("format_version", &self.format_version.to_le_bytes());
        field("build_id", self.build_id.as_bytes());
        match self.ptx {
            None => field("ptx", b""),
            Some(p) => {
                let mut b = Vec::with_capacity(12);
                b.extend_from_slice(&p.sm.to_le_bytes());
                b.extend_from_slice(&p.isa.0.to_le_bytes());
                b.extend_from_slice(&p.isa.1.to_le_bytes());
                field("ptx", &b);
            }
        }
        out
    }

    /// The key: SHA-256 of [`KeyInputs::canonical_bytes`].
    pub fn key(&self) -> CacheKey {
        CacheKey(Sha256::digest(self.canonical_bytes()).into())
    }
}

/// A cache key: 32 bytes, shown as 64 lower-case hex digits (also the entry's file name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// Parses 64 hex digits (either case); `None` for anything else.
    pub fn from_hex(s: &str) -> Option<CacheKey> {
        let b = s.as_bytes();
        if b.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            let hi = (b[2 * i] as char).to_digit(16)?;
            let lo = (b[2 * i + 1] as char).to_digit(16)?;
            *o = (hi * 16 + lo) as u8;
        }
        Some(CacheKey(out))
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cranelift_version_matches_the_workspace_pin() {
        let toml = include_str!("../../../Cargo.toml");
        let pin = format!("cranelift-codegen = \"={CRANELIFT_VERSION}\"");
        assert!(toml.contains(&pin), "workspace Cargo.toml lacks {pin}");
    }

    #[test]
    fn hex_round_trips() {
        let k = CacheKey([0xa5; 32]);
        assert_eq!(CacheKey::from_hex(&k.to_string()), Some(k));
        assert_eq!(CacheKey::from_hex("zz"), None);
        assert_eq!(CacheKey::from_hex(&"g".repeat(64)), None);
    }
}
