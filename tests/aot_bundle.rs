//! `kiln aot build` (issue 25): the example manifest builds a bundle for x86_64 (baseline
//! and `+avx2`), aarch64, sm_80 and sm_90 that `kiln aot verify` passes and `kiln aot ls`
//! lists with targets and features, and a fresh process runs the demo from it with zero
//! compiles (bit-exact against eager); unknown targets are refused. CPU entries built for a
//! target: the triple and feature level are key inputs, and a host that lacks a feature or
//! is another architecture refuses the entry as a miss. (The aarch64 entries run under qemu
//! in `scripts/ci-aarch64.sh`.)

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
    let targets = [
        "x86_64-unknown-linux-gnu",
        "x86_64+avx2",
        "aarch64-unknown-linux-gnu",
        "sm_80",
        "sm_90",
    ];
    let mut build = Command::new(KILN);
    build.args(["aot", "build", "--manifest"]).arg(manifest());
    for t in targets {
        build.args(["--target", t]);
    }
    let build = build
        .arg("--out")
        .arg(&out)
        .env("KILN_CACHE", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "{err}");
    assert!(err.contains("[15/15]"), "progress lines: {err}");
    // One entry per kernel and target: 3 demo kernels x 5 targets, all listed.
    let listed = std::fs::read_to_string(out.join("kiln-bundle.txt")).unwrap();
    let lines: Vec<&str> = listed.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 15, "{listed}");
    for t in targets {
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
    // `kiln aot ls`: each entry's target and the features its code needs.
    let ls = Command::new(KILN)
        .args(["aot", "ls"])
        .arg(&out)
        .output()
        .unwrap();
    let ls = String::from_utf8_lossy(&ls.stdout);
    let count = |pred: &dyn Fn(&str) -> bool| ls.lines().filter(|l| pred(l)).count();
    assert_eq!(
        count(&|l| l.contains("aarch64-unknown-linux-gnu  features=  ")),
        3,
        "{ls}"
    );
    assert_eq!(
        count(&|l| l.contains("x86_64-unknown-linux-gnu  features=") && l.contains("avx2")),
        3,
        "{ls}"
    );
    assert_eq!(
        count(&|l| l.contains("x86_64-unknown-linux-gnu  features=")
            && l.contains("sse4.1")
            && !l.contains("avx")),
        3,
        "{ls}"
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
fn target_and_features_are_key_inputs_and_hosts_refuse_what_they_cannot_run() {
    use kiln::codegen::cpu::CpuTarget;
    use kiln::runtime::aot::cpu_entries::cpu_entry;
    use kiln::runtime::aot::{CacheDir, CacheError, HostSpec, Lookup};
    let ty = kiln::ir::TensorType {
        dtype: kiln::ir::DType::F32,
        shape: vec![1, 1, 30, 30],
    };
    let g = kiln::ops::build_op("median_blur", &[("k".into(), "3".into())], &ty).unwrap();
    let k = kiln::runtime::executor::lower_graph(&g, kiln::ir::passes::StageStorage::ScratchRows)
        .unwrap()
        .kernels
        .remove(0);
    let o = kiln::codegen::CompileOptions::default();
    let names = [
        "aarch64-unknown-linux-gnu",
        "x86_64-unknown-linux-gnu",
        "x86_64+avx",
        "x86_64+avx2",
        "x86_64+avx512f",
    ];
    let entries: Vec<_> = names
        .iter()
        .map(|n| {
            let t = CpuTarget::parse(n).unwrap();
            let e = cpu_entry(&k, &o, true, &t).unwrap().unwrap();
            assert_eq!(e.target, t.triple(), "{n}");
            assert_eq!(e.features, t.features(), "{n}");
            e
        })
        .collect();
    // Every target and level has its own key; the same build gives the same key.
    for i in 0..entries.len() {
        for j in 0..i {
            assert_ne!(entries[i].key, entries[j].key, "{} {}", names[i], names[j]);
        }
    }
    let again = cpu_entry(&k, &o, true, &CpuTarget::parse(names[3]).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(again.key, entries[3].key);
    assert_eq!(
        again.payload, entries[3].payload,
        "code generation is deterministic"
    );
    // Tiering is a key input too.
    let untiered = cpu_entry(&k, &o, false, &CpuTarget::parse(names[3]).unwrap())
        .unwrap()
        .unwrap();
    assert_ne!(untiered.key, entries[3].key);
    // A host of the triple that lacks a feature, and a host of the other architecture:
    // each refuses the entry as a miss, with the reason.
    let out = fresh_dir("refuse");
    let dir = CacheDir::open(&out).unwrap();
    for e in &entries {
        dir.put(e).unwrap();
    }
    let baseline_x86 = HostSpec::for_target(&CpuTarget::parse("x86_64").unwrap());
    match dir.get(&entries[3].key, &baseline_x86) {
        Lookup::Rejected(r) => match &r.reason {
            CacheError::MissingFeatures(f) => assert!(f.iter().any(|x| x == "avx2"), "{f:?}"),
            other => panic!("{other}"),
        },
        _ => panic!("an avx2 entry on a host without avx2 must be refused"),
    }
    match dir.get(&entries[0].key, &baseline_x86) {
        Lookup::Rejected(r) => assert!(
            matches!(r.reason, CacheError::WrongTarget { .. }),
            "{}",
            r.reason
        ),
        _ => panic!("an aarch64 entry on an x86_64 host must be refused"),
    }
    let a64 = HostSpec::new("aarch64-unknown-linux-gnu", &["neon"]);
    assert!(dir.get(&entries[1].key, &a64).entry().is_none());
    // The refused entries were quarantined (each is a miss from now on).
    assert!(matches!(
        dir.get(&entries[3].key, &baseline_x86),
        Lookup::Absent
    ));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn targets_the_host_cannot_build_for_are_refused() {
    let out = fresh_dir("refused");
    for t in [
        "riscv64gc-unknown-linux-gnu",
        "x86_64+sse9",
        "aarch64+avx2",
        "sm_75",
    ] {
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
