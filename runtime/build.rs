//! Build script of kiln-runtime: gives the kernel cache (`aot`) the facts it keys on that only
//! the build knows.
//!
//! - `KILN_TARGET_TRIPLE`: the triple this crate is compiled for (cache entries record it).
//! - `KILN_SOURCE_DIGEST`: a 64-bit FNV-1a digest over the sources of the crates that decide
//!   what machine code a kernel gets (ir, codegen, runtime) and the workspace `Cargo.lock`.
//!   It is part of every cache key, so a rebuilt kiln whose code generation changed never
//!   reads entries written by the old one, even from an uncommitted work tree (a git hash
//!   would miss those edits). Files are visited in sorted path order, so the digest depends
//!   on content only. Where the sources are not beside the crate (a packaged crate), the
//!   digest covers what is found and the crate version still separates releases.

use std::fs;
use std::path::{Path, PathBuf};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=KILN_TARGET_TRIPLE={target}");

    let roots = [
        manifest.join("../ir/src"),
        manifest.join("../codegen/src"),
        manifest.join("src"),
    ];
    let lock = manifest.join("../Cargo.lock");
    let mut files = Vec::new();
    for r in &roots {
        println!("cargo:rerun-if-changed={}", r.display());
        collect(r, &mut files);
    }
    println!("cargo:rerun-if-changed={}", lock.display());
    if lock.is_file() {
        files.push(lock);
    }
    files.sort();
    let mut h = FNV_OFFSET;
    for f in &files {
        let rel = f.strip_prefix(&manifest).unwrap_or(f);
        let rel = rel.to_string_lossy();
        let body = fs::read(f).unwrap_or_default();
        h = fnv(h, &(rel.len() as u64).to_le_bytes());
        h = fnv(h, rel.as_bytes());
        h = fnv(h, &(body.len() as u64).to_le_bytes());
        h = fnv(h, &body);
    }
    println!("cargo:rustc-env=KILN_SOURCE_DIGEST={h:016x}");
}
