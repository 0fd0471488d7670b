//! `kiln aot build` (issue 25): the example manifest builds a bundle for the host, sm_80 and
//! sm_90 that `kiln aot verify` passes, and a fresh process runs the demo from it with zero
//! compiles (bit-exact against eager); targets the host cannot build for are refused.

use std::path::PathBuf;
use std::process::Command;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-bundle-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/aot/kernels.toml")
}

#[test]
fn the_example_bundle_verifies_and_runs_the_demo_without_compiling() {
    let out = fresh_dir("example");
    let host = kiln::runtime::aot::host::host_triple();
    let build = Command::new(KILN)
        .args(["aot", "build", "--manifest"])
        .arg(manifest())
        .args([
            "--target", host, "--target", "sm_80", "--target", "sm_90", "--out",
        ])
        .arg(&out)
        .env("KILN_CACHE", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "{err}");
    assert!(err.contains("[9/9]"), "progress lines: {err}");
    // One entry per kernel and target: 3 demo kernels x 3 targets, all listed.
    let listed = std::fs::read_to_string(out.join("kiln-bundle.txt")).unwrap();
    let lines: Vec<&str> = listed.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 9, "{listed}");
    for t in [host, "sm_80", "sm_90"] {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains(&format!("  {t}  ")))
                .count(),
            3
        );
    }
    let verify = Command::new(KILN)
        .args(["aot", "verify"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    let demo = Command::new(KILN)
        .args(["demo", "--size", "40"])
        .env("KILN_CACHE_DIR", &out)
        .env_remove("KILN_CACHE")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&demo.stdout);
    assert!(demo.status.success(), "{text}");
    assert!(text.contains("bit-exact: yes"), "{text}");
    assert!(
        text.contains(": 0 kernels compiled, 3 loaded from the cache"),
        "{text}"
    );
    // In this process too, through the bundle API.
    let ty = kiln::ir::TensorType {
        dtype: kiln::ir::DType::F32,
        shape: vec![1, 1, 30, 30],
    };
    let g = kiln::ops::build_op("median_blur", &[("k".into(), "5".into())], &ty).unwrap();
    let engine = kiln::Engine::new().with_cache_bundle(&out);
    engine.compile(&g).unwrap();
    let st = engine.stats();
    assert_eq!((st.kernels_compiled, st.disk_hits), (0, 1), "{st:?}");
    drop(engine);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn targets_the_host_cannot_build_for_are_refused() {
    let out = fresh_dir("refused");
    for t in ["aarch64-unknown-linux-gnu", "x86_64+avx2", "sm_75"] {
        let r = Command::new(KILN)
            .args(["aot", "build", "--manifest"])
            .arg(manifest())
            .args(["--target", t, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{t}: {err}");
        assert!(err.contains(&format!("--target {t}")), "{err}");
        // Refused before anything is written.
        assert!(!out.exists());
    }
    // A bad manifest names its line.
    let bad = fresh_dir("bad.toml");
    std::fs::write(
        &bad,
        "[[kernel]]\nop = \"median_blur\"\nrank = 4\ndtypes = [\"f99\"]\n",
    )
    .unwrap();
    let r = Command::new(KILN)
        .args(["aot", "build", "--manifest"])
        .arg(&bad)
        .args(["--target", "sm_80", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("line 1") && err.contains("f99"), "{err}");
    let _ = std::fs::remove_file(&bad);
}

#[test]
fn bench_aot_load_times_compile_write_and_load() {
    let r = Command::new(KILN)
        .args([
            "bench",
            "--aot-load",
            "--ops",
            "median3_2048",
            "--sizes",
            "64",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    // One row per kernel: compile ms, write ms, write %, load µs, speedup.
    let row = text
        .lines()
        .find(|l| l.starts_with("median3_"))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.len(), 7, "{row}");
    let load_us: f64 = cols[5].parse().unwrap();
    assert!(load_us > 0.0, "{row}");
}
