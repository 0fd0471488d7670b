//! Resource exhaustion at the CLI: a file size limit (`ulimit -f`), a full disk (a tiny
//! tmpfs in a private mount namespace) and an unwritable output directory each give one
//! clean `kiln: error:` line and exit code 2, leave an existing output byte for byte as it
//! was, and leave no temporary file behind. Also: `.npy` input that is not a regular file.
//!
//! Limits: the full-disk case needs `unshare -m` and `mount` (root or CAP_SYS_ADMIN); where
//! they are missing it prints a visible `SKIP` line. Running as root, permission bits do not
//! stop writes, so the unwritable-directory case then writes into `/proc/self` instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kiln::runtime::npy::write_npy;
use kiln::runtime::{Storage, Tensor};

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

/// A fresh scratch directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-exhaust-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `[h, w]` f32 `.npy` input.
fn input(path: &Path, h: usize, w: usize) {
    let v: Vec<f32> = (0..h * w).map(|i| (i % 17) as f32 * 0.25).collect();
    write_npy(
        path,
        &Tensor::from_storage(Storage::F32(v), &[h, w]).unwrap(),
    )
    .unwrap();
}

/// Prints a skip notice past the test harness's output capture, so it shows in the run.
fn skip(msg: &str) {
    let _ = writeln!(std::io::stderr(), "SKIP: {msg}");
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One `kiln: error:` line, exit 2, no panic.
fn assert_clean_failure(o: &Output, what: &str) {
    let err = stderr_of(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    assert!(err.starts_with("kiln: error: "), "{what}: {err}");
}

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `kiln run median_blur k=3` arguments from `inp` to `out`.
fn run_args(inp: &Path, out: &Path) -> Vec<String> {
    [
        "run",
        "median_blur",
        "--param",
        "k=3",
        "--input",
        inp.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// A big input (64 KiB of output) and an existing small output written by kiln itself.
fn setup(d: &Path) -> (PathBuf, PathBuf, Vec<u8>) {
    let small = d.join("small.npy");
    let big = d.join("big.npy");
    input(&small, 4, 4);
    input(&big, 128, 128);
    let out = d.join("out.npy");
    let o = Command::new(KILN)
        .args(run_args(&small, &out))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let old = std::fs::read(&out).unwrap();
    (big, out, old)
}

#[test]
fn file_size_limit_keeps_the_old_output() {
    let d = scratch("fsize");
    let (big, out, old) = setup(&d);
    // `ulimit -f 16` is 8 or 16 KiB depending on the shell's block unit; the output needs 64.
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 16 && exec \"$0\" \"$@\"")
        .arg(KILN)
        .args(run_args(&big, &out))
        .output()
        .unwrap();
    assert_clean_failure(&o, "ulimit -f");
    assert!(
        stderr_of(&o).contains("File too large"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(std::fs::read(&out).unwrap(), old, "old output changed");
    assert_eq!(names(&d), ["big.npy", "out.npy", "small.npy"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn full_disk_keeps_the_old_output() {
    let d = scratch("full");
    let (big, out, old) = setup(&d);
    let mnt = d.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // In a private mount namespace: a 32 KiB tmpfs holding a copy of the old output; kiln
    // tries to replace it with 64 KiB. The script reports the exit code, whether the old
    // file survived, and what the directory holds, before the namespace (and tmpfs) goes.
    let script = r#"
        mount -t tmpfs -o size=32k tmpfs "$1" || exit 99
        cp "$2" "$1/out.npy" || exit 98
        "$3" run median_blur --param k=3 --input "$4" --output "$1/out.npy"
        echo "rc=$?" >&2
        cmp -s "$2" "$1/out.npy" && echo "same" >&2
        echo "files=$(ls -A "$1" | tr '\n' ' ')" >&2
    "#;
    let o = Command::new("unshare")
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(&mnt)
        .arg(&out)
        .arg(KILN)
        .arg(&big)
        .output();
    let o = match o {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            skip(&format!(
                "full disk: no private tmpfs (unshare -m/mount need root): {}",
                stderr_of(&o).trim()
            ));
            return;
        }
        Err(e) => {
            skip(&format!("full disk: unshare is unavailable: {e}"));
            return;
        }
    };
    let err = stderr_of(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(lines[0].starts_with("kiln: error: "), "{err}");
    assert!(lines[0].contains("No space left on device"), "{err}");
    assert_eq!(lines[1], "rc=2", "{err}");
    assert_eq!(lines[2], "same", "old output changed: {err}");
    assert_eq!(lines[3].trim_end(), "files=out.npy", "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), old);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn unwritable_directory_is_a_clean_error() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("ro");
    let (big, out, old) = setup(&d);
    let ro = d.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let kept = ro.join("out.npy");
    std::fs::copy(&out, &kept).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let root = std::fs::File::create(ro.join("probe")).is_ok();
    let target = if root {
        // Permission bits do not bind root: /proc/self refuses new files for everyone.
        PathBuf::from("/proc/self/kiln-out.npy")
    } else {
        kept.clone()
    };
    let o = Command::new(KILN)
        .args(run_args(&big, &target))
        .output()
        .unwrap();
    assert_clean_failure(&o, "unwritable directory");
    if !root {
        assert_eq!(std::fs::read(&kept).unwrap(), old);
        assert_eq!(names(&ro), ["out.npy"]);
    }
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn missing_output_directory_is_a_clean_error() {
    let d = scratch("missing");
    let (big, _, _) = setup(&d);
    let o = Command::new(KILN)
        .args(run_args(&big, &d.join("nope").join("out.npy")))
        .output()
        .unwrap();
    assert_clean_failure(&o, "missing directory");
    assert!(!d.join("nope").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn non_regular_inputs_are_refused() {
    let d = scratch("nonreg");
    let fifo = d.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    let mut inputs = vec![PathBuf::from("/dev/zero"), d.clone()];
    if matches!(made, Ok(s) if s.success()) {
        inputs.push(fifo);
    } else {
        skip("mkfifo is unavailable; the FIFO input case is not checked");
    }
    for inp in inputs {
        let o = Command::new(KILN)
            .args(run_args(&inp, &d.join("out.npy")))
            .output()
            .unwrap();
        assert_clean_failure(&o, &inp.display().to_string());
        assert!(
            stderr_of(&o).contains("not a regular file"),
            "{}",
            stderr_of(&o)
        );
        assert!(!d.join("out.npy").exists());
    }
    std::fs::remove_dir_all(&d).unwrap();
}
