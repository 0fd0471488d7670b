//! The on-disk kernel cache across processes (issue 25): `kiln demo` run twice on one cache
//! directory compiles no kernel the second time and stays bit-exact against eager; several
//! processes warming one empty directory at once all give eager's bits, and leave a cache
//! that a later process runs from without compiling.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn demo(dir: &Path, seed: u64) -> Command {
    let mut c = Command::new(KILN);
    c.args(["demo", "--size", "48", "--seed", &seed.to_string()])
        .env("KILN_CACHE_DIR", dir)
        .env_remove("KILN_CACHE");
    c
}

/// `(compiled, loaded)` from the demo's cache line; checks the run was bit-exact.
fn counts(out: &Output) -> (usize, usize) {
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{text}\n{err}");
    assert!(text.contains("bit-exact: yes"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("kernel cache "))
        .unwrap_or_else(|| panic!("no cache line in:\n{text}"));
    let num = |word: &str| -> usize {
        let before = line.split(word).next().unwrap();
        before
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{line}"))
    };
    (num(" kernels compiled"), num(" loaded from"))
}

#[test]
fn the_second_demo_run_compiles_no_kernel() {
    let dir = fresh_dir("twice");
    let (compiled, loaded) = counts(&demo(&dir, 1).output().unwrap());
    assert!(compiled >= 3, "first run compiled {compiled}");
    assert_eq!(loaded, 0);
    let (compiled2, loaded2) = counts(&demo(&dir, 2).output().unwrap());
    assert_eq!(compiled2, 0, "second run compiled {compiled2}");
    assert_eq!(loaded2, compiled);
    // KILN_CACHE=off: no cache, everything compiled again.
    let out = demo(&dir, 3).env("KILN_CACHE", "off").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("kernel cache off"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_processes_warm_one_directory_correctly() {
    let dir = fresh_dir("concurrent");
    let children: Vec<_> = (0..4)
        .map(|i| {
            demo(&dir, 10 + i)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        // Every process checked each of its results against eager (`bit-exact: yes`).
        let (compiled, loaded) = counts(&out);
        assert!(compiled + loaded >= 3);
    }
    let (compiled, loaded) = counts(&demo(&dir, 20).output().unwrap());
    assert_eq!(compiled, 0);
    assert!(loaded >= 3);
    let _ = std::fs::remove_dir_all(&dir);
}
