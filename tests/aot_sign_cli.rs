//! Signed bundles from the command line (issue 25): `kiln aot keygen`, `kiln aot build
//! --sign`, `kiln aot verify --require-signature`: a good signature passes; a missing one,
//! another key's, and a bundle changed after signing fail with exit status 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-sign-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn kiln(args: &[&str], paths: &[&Path]) -> Output {
    let mut c = Command::new(KILN);
    c.args(args);
    for p in paths {
        c.arg(p);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn verify(bundle: &Path, public: &Path) -> Output {
    let mut c = Command::new(KILN);
    c.args(["aot", "verify"])
        .arg(bundle)
        .arg("--require-signature")
        .arg(public);
    c.output().unwrap()
}

#[test]
fn signed_bundles_verify_and_tampering_fails() {
    let d = fresh_dir("flow");
    let (secret, public) = (d.join("k.secret"), d.join("k.pub"));
    let o = kiln(
        &["aot", "keygen", "--secret"],
        &[&secret, Path::new("--public"), &public],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Never replaces a key.
    let o = kiln(
        &["aot", "keygen", "--secret"],
        &[&secret, Path::new("--public"), &public],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    let manifest = d.join("m.toml");
    std::fs::write(
        &manifest,
        "[[kernel]]\nop = \"median_blur\"\nparams = { k = 3 }\nrank = 4\ndtypes = [\"f32\"]\n",
    )
    .unwrap();
    let bundle = d.join("bundle");
    let host = kiln::runtime::aot::host::host_triple();
    let mut c = Command::new(KILN);
    c.args(["aot", "build", "--manifest"])
        .arg(&manifest)
        .args(["--target", host, "--out"])
        .arg(&bundle)
        .arg("--sign")
        .arg(&secret);
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("signed"), "{}", text(&o));

    let o = verify(&bundle, &public);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("signature ok"), "{}", text(&o));

    // Another key.
    let (s2, p2) = (d.join("k2.secret"), d.join("k2.pub"));
    assert!(kiln(
        &["aot", "keygen", "--secret"],
        &[&s2, Path::new("--public"), &p2]
    )
    .status
    .success());
    let o = verify(&bundle, &p2);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not by the required key"), "{}", text(&o));

    // The manifest changed after signing.
    let m = bundle.join("kiln-bundle.txt");
    let before = std::fs::read(&m).unwrap();
    let mut edited = before.clone();
    edited.extend_from_slice(b"# edited\n");
    std::fs::write(&m, edited).unwrap();
    let o = verify(&bundle, &public);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("bad signature"), "{}", text(&o));
    std::fs::write(&m, before).unwrap();
    assert!(verify(&bundle, &public).status.success());

    // No signature.
    std::fs::remove_file(bundle.join("kiln-bundle.sig")).unwrap();
    let o = verify(&bundle, &public);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not signed"), "{}", text(&o));

    // A bad key file for --sign fails before anything is written.
    let other = d.join("other");
    let mut c = Command::new(KILN);
    c.args(["aot", "build", "--manifest"])
        .arg(&manifest)
        .args(["--target", host, "--out"])
        .arg(&other)
        .arg("--sign")
        .arg(&public);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--sign"), "{}", text(&o));
    assert!(!other.exists());
    let _ = std::fs::remove_dir_all(&d);
}
