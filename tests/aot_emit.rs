//! `kiln aot build --emit obj,h` (issue 25): the objects, headers and runner header it
//! writes, its argument errors, and (when a C compiler is installed) the emitted code linked
//! into tests/c/aot_emit/test_aot_emit.c and compared byte for byte with `kiln run --exec
//! eager` on the same images. scripts/ci-c.sh runs the same C test under ASan and UBSan.

use std::path::{Path, PathBuf};
use std::process::Command;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");
const MANIFEST: &str = "tests/c/aot_emit/kernels.toml";

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-emit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn host() -> &'static str {
    kiln::runtime::aot::host::host_triple()
}

fn build(out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(KILN)
        .args(["aot", "build", "--manifest", MANIFEST, "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// The names of the kernel sets of the manifest, as the C test includes them.
const SETS: &[&str] = &[
    "median_blur_f32",
    "grey_erosion_u8",
    "gradient_magnitude_f32",
    "grey_opening_f32",
    "white_tophat_u8",
    "grey_dilation_u8",
    "median_filter_f32",
    "binary_erosion_bool",
    "morphological_laplace_f64",
];

#[test]
fn emit_writes_objects_headers_and_the_runner() {
    let out = fresh_dir("files");
    let r = build(&out, &["--target", host(), "--emit", "obj,h"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    for set in SETS {
        let obj = std::fs::read(out.join(format!("{set}.o"))).unwrap();
        if cfg!(target_os = "linux") {
            assert_eq!(&obj[..4], b"\x7fELF", "{set}.o");
        }
        let sym = format!("kiln_{set}_k0_stage0_rows");
        assert!(
            obj.windows(sym.len()).any(|w| w == sym.as_bytes()),
            "{set}.o lacks {sym}"
        );
        let h = std::fs::read_to_string(out.join(format!("{set}.h"))).unwrap();
        assert!(h.contains(&format!("void {sym}(")), "{h}");
        assert!(h.contains(&format!("static inline int kiln_{set}(")), "{h}");
        assert!(h.contains("#include \"kiln_aot_runtime.h\""));
    }
    assert!(out.join("kiln_aot_runtime.h").is_file());
    // The bundle itself is still written and verifies.
    let v = Command::new(KILN)
        .args(["aot", "verify"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    // A second build replaces the emitted files.
    let r = build(&out, &["--target", host(), "--emit", "h"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn emit_arguments_are_checked_before_anything_is_written() {
    let cases: &[(&[&str], &str)] = &[
        (&["--emit", "asm"], "unknown kind"),
        (&["--emit", "obj,obj"], "twice"),
    ];
    for (args, needle) in cases {
        let out = fresh_dir("bad");
        let mut all = vec!["--target", host()];
        all.extend_from_slice(args);
        let r = build(&out, &all);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let out = fresh_dir("ptx-only");
    let r = build(&out, &["--target", "sm_80", "--emit", "obj,h"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("writes host code"), "{err}");
    assert!(!out.exists());
}

fn have_cc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    Command::new(&cc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cc)
}

#[test]
fn emitted_objects_link_with_c_and_match_eager() {
    let Some(cc) = have_cc() else {
        println!("SKIP: no C compiler (cc, or $CC) to link the emitted objects with");
        return;
    };
    let dir = fresh_dir("link");
    let bundle = dir.join("bundle");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let r = build(&bundle, &["--target", host(), "--emit", "obj,h"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let exe = dir.join("test_aot_emit");
    let objs: Vec<PathBuf> = SETS.iter().map(|s| bundle.join(format!("{s}.o"))).collect();
    let c = Command::new(&cc)
        .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(&bundle)
        .arg("tests/c/aot_emit/test_aot_emit.c")
        .args(&objs)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let g = Command::new(&exe).arg("gen").arg(&data).output().unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let cases = std::fs::read_to_string("tests/c/aot_emit/cases.txt").unwrap();
    let mut n = 0;
    for line in cases
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut words = line.split_whitespace();
        let (name, op) = (words.next().unwrap(), words.next().unwrap());
        let mut cmd = Command::new(KILN);
        cmd.args(["run", op, "--layout", "bcs", "--exec", "eager"]);
        for p in words {
            cmd.args(["--param", p]);
        }
        let r = cmd
            .arg("--input")
            .arg(data.join(format!("{name}.in.npy")))
            .arg("--output")
            .arg(data.join(format!("{name}.expect.npy")))
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        n += 1;
    }
    let check = Command::new(&exe).arg("check").arg(&data).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && text.contains(&format!("{n} passed, 0 failed")),
        "{text}\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // The comparison can fail: a flipped byte in one expected file fails that case.
    let f = data.join("median_blur_f32.expect.npy");
    let mut bytes = std::fs::read(&f).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x40;
    std::fs::write(&f, bytes).unwrap();
    let check = Command::new(&exe).arg("check").arg(&data).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{text}");
    assert!(
        text.contains(&format!("{} passed, 1 failed", n - 1)),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
