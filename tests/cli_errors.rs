//! Bad CLI input gives a one-line error and exit code 2, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

fn kiln(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes a minimal v1 .npy file with the given descr and shape and raw data bytes.
fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let shape_txt = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

fn assert_clean_error(code: i32, stderr: &str, what: &str) {
    assert_eq!(code, 2, "{what}: exit code {code}, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: panic: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{what}: not one line: {stderr}"
    );
    assert!(
        stderr.starts_with("kiln: error: ") || stderr.starts_with("error:"),
        "{what}: {stderr}"
    );
}

/// A valid 1x1x4x4 f32 input; each test names its own copy (tests run in parallel).
fn good_input(tag: &str) -> PathBuf {
    let p = tmp(&format!("good-{tag}.npy"));
    let data: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    write_npy(&p, "<f4", &[1, 1, 4, 4], &data);
    p
}

#[test]
fn good_run_succeeds() {
    let input = good_input("run");
    let out = tmp("out.npy");
    for exec in ["eager", "fused"] {
        let (code, _, err) = kiln(&[
            "run",
            "median_blur",
            "--input",
            input.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--param",
            "k=3",
            "--exec",
            exec,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.exists());
    }
}

#[test]
fn unknown_op() {
    let input = good_input("op");
    let (code, _, err) = kiln(&[
        "run",
        "no_such_op",
        "--input",
        input.to_str().unwrap(),
        "--output",
        "/dev/null",
    ]);
    assert_clean_error(code, &err, "unknown op");
}

#[test]
fn unknown_parameter_and_bad_value() {
    let input = good_input("param");
    let i = input.to_str().unwrap();
    for p in ["bogus=1", "k=abc", "k=0", "k", "mode=sideways"] {
        let (code, _, err) = kiln(&[
            "run",
            "median_blur",
            "--input",
            i,
            "--output",
            "/dev/null",
            "--param",
            p,
        ]);
        assert_clean_error(code, &err, p);
    }
    let (code, _, err) = kiln(&[
        "run",
        "grey_erosion",
        "--input",
        i,
        "--output",
        "/dev/null",
        "--param",
        "size=3",
        "--param",
        "origin=5",
    ]);
    assert_clean_error(code, &err, "bad origin");
}

#[test]
fn wrong_dtype() {
    let p = tmp("int.npy");
    write_npy(&p, "<i4", &[1, 1, 2, 2], &[0u8; 16]);
    let (code, _, err) = kiln(&[
        "run",
        "median_blur",
        "--input",
        p.to_str().unwrap(),
        "--output",
        "/dev/null",
    ]);
    assert_clean_error(code, &err, "int32 input");
}

#[test]
fn wrong_rank() {
    let p = tmp("rank1.npy");
    write_npy(&p, "<f4", &[4], &[0u8; 16]);
    let (code, _, err) = kiln(&[
        "run",
        "median_blur",
        "--input",
        p.to_str().unwrap(),
        "--output",
        "/dev/null",
    ]);
    assert_clean_error(code, &err, "rank 1");
    let p3 = tmp("rank3.npy");
    write_npy(&p3, "<f4", &[1, 2, 2], &[0u8; 16]);
    let (code, _, err) = kiln(&[
        "run",
        "median_blur",
        "--input",
        p3.to_str().unwrap(),
        "--output",
        "/dev/null",
    ]);
    assert_clean_error(code, &err, "median_blur on one spatial dim");
}

#[test]
fn corrupt_npy() {
    let cases: [(&str, Vec<u8>); 4] = [
        ("empty.npy", vec![]),
        ("magic.npy", b"NOTNUMPY-file".to_vec()),
        ("truncated.npy", {
            let mut b = std::fs::read(good_input("corrupt")).unwrap();
            b.truncate(b.len() - 7);
            b
        }),
        ("header.npy", {
            let mut b = b"\x93NUMPY\x01\x00\x20\x00".to_vec();
            b.extend(b"{'descr': '<f4', 'shape': (((( \n");
            b
        }),
    ];
    for (name, bytes) in cases {
        let p = tmp(name);
        std::fs::write(&p, bytes).unwrap();
        let (code, _, err) = kiln(&[
            "run",
            "median_blur",
            "--input",
            p.to_str().unwrap(),
            "--output",
            "/dev/null",
        ]);
        assert_clean_error(code, &err, name);
    }
}

#[test]
fn missing_input_file() {
    let (code, _, err) = kiln(&[
        "run",
        "median_blur",
        "--input",
        "/nonexistent/x.npy",
        "--output",
        "/dev/null",
    ]);
    assert_clean_error(code, &err, "missing file");
}

#[test]
fn bad_cli_syntax_is_exit_2() {
    let (code, _, err) = kiln(&["run"]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("panicked"));
    let (code, _, _) = kiln(&["frobnicate"]);
    assert_eq!(code, 2);
}

/// Usage errors are one `kiln: error:` line plus at most a `usage:` hint, exit 2.
#[test]
fn usage_errors_are_one_line() {
    let input = good_input("usage");
    let inp = input.to_str().unwrap();
    let out = tmp("usage-out.npy");
    let out = out.to_str().unwrap();
    let cases: [&[&str]; 5] = [
        &[
            "run",
            "median_blur",
            "--input",
            inp,
            "--output",
            out,
            "--exec",
            "bogus",
        ],
        &["run", "median_blur", "--output", out],
        &[
            "run",
            "median_blur",
            "--input",
            inp,
            "--output",
            out,
            "--bogus",
        ],
        &["frobnicate"],
        &[],
    ];
    for args in cases {
        let (code, stdout, err) = kiln(args);
        let what = format!("{args:?}");
        assert_eq!(code, 2, "{what}: {err}");
        assert!(stdout.is_empty(), "{what}: {stdout}");
        let lines: Vec<&str> = err.trim_end().lines().collect();
        assert!(
            (1..=2).contains(&lines.len()),
            "{what}: {} lines: {err}",
            lines.len()
        );
        assert!(lines[0].starts_with("kiln: error: "), "{what}: {err}");
        if let Some(hint) = lines.get(1) {
            assert!(hint.starts_with("usage: kiln"), "{what}: {err}");
        }
    }
    let (_, _, err) = kiln(cases[0]);
    assert!(
        err.contains("bogus") && err.contains("eager, fused"),
        "{err}"
    );
    let (_, _, err) = kiln(cases[1]);
    assert!(err.contains("--input"), "{err}");
    // --help and --version still print in full and succeed.
    let (code, stdout, _) = kiln(&["run", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("--input"), "{stdout}");
}

/// `kiln dump ... | head -n 1`: the closed pipe ends the dump quietly, exit 0.
#[test]
fn dump_into_a_closed_pipe_exits_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["dump", "median_blur", "--param", "k=5", "--ptx"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one small chunk, then close the read end while kiln is still writing.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"== graph"));
    drop(stdout);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "stderr: {err}");
}

#[test]
fn more_outputs_than_the_operator_has_is_a_usage_error() {
    let input = good_input("outputs");
    let (a, b) = (tmp("two-a.npy"), tmp("two-b.npy"));
    let (code, _, err) = kiln(&[
        "run",
        "grey_erosion",
        "--input",
        input.to_str().unwrap(),
        "--output",
        a.to_str().unwrap(),
        "--output",
        b.to_str().unwrap(),
        "--param",
        "size=3",
    ]);
    assert_clean_error(code, &err, "two outputs");
    assert!(err.contains("1 output(s) (out)"), "{err}");
    assert!(!b.exists(), "nothing is written on a usage error");
}

#[test]
fn two_inputs_for_a_one_input_operator_is_a_clean_error() {
    let input = good_input("inputs");
    let (code, _, err) = kiln(&[
        "run",
        "grey_erosion",
        "--input",
        input.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--output",
        "/dev/null",
        "--param",
        "size=3",
    ]);
    assert_clean_error(code, &err, "two inputs");
    assert!(err.contains("takes 1 input, got 2"), "{err}");
}

/// Every printing subcommand exits quietly with code 0 when its reader goes away.
#[test]
fn printing_subcommands_into_a_closed_pipe_exit_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    for args in [
        &["demo", "--size", "64"][..],
        &["fuzz", "--cases", "40", "--seed", "3"][..],
        &["bench", "--help"][..],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before kiln prints anything.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
