//! Signed bundles (issue 25, optional part): a bundle signed with ed25519 verifies with its
//! public key and serves an engine without compiling; a missing signature, another key, an
//! altered signature, a changed manifest and an added, removed or replaced entry are all
//! refused, and an engine requiring the signature then compiles everything (correctly).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kiln_ir::{DType, Graph, TensorType};
use kiln_runtime::aot::sign::{
    public_key_of, read_public_key, read_secret_key, sign_bundle, verify_bundle, write_key_files,
    SignError, BUNDLE_MANIFEST, SIGNATURE_FILE,
};
use kiln_runtime::aot::store::{list_entry_files, DEFAULT_MAX_ENTRY_BYTES};
use kiln_runtime::aot::Entry;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{eager, Tensor};

const MAX: u64 = DEFAULT_MAX_ENTRY_BYTES;

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-sign-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn graphs() -> Vec<Graph> {
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 20, 33],
    };
    [("median_blur", "k", "3"), ("grey_opening", "size", "3")]
        .iter()
        .map(|(op, k, v)| kiln_ops::build_op(op, &[(k.to_string(), v.to_string())], &ty).unwrap())
        .collect()
}

fn input() -> Tensor {
    let data = (0..20 * 33)
        .map(|i| match i % 41 {
            3 => f32::NAN,
            7 => -0.0,
            _ => ((i * 13 % 57) as f32 * 0.71).cos() * 5.0,
        })
        .collect();
    Tensor::from_f32(data, &[1, 1, 20, 33]).unwrap()
}

/// Runs every graph, checks eager's bits, returns the engine's (compiled, disk hits).
fn run(engine: &Engine) -> (usize, usize) {
    for g in graphs() {
        let c = engine.compile(&g).unwrap();
        let x = input();
        let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
        let got = c.run(engine, std::slice::from_ref(&x)).unwrap();
        assert_eq!(first_difference(&want[0], &got[0]), None);
    }
    let st = engine.stats();
    (st.kernels_compiled, st.disk_hits)
}

/// A bundle of the graphs' kernels with a manifest, signed with a fresh key; returns the
/// secret and public keys.
fn signed_bundle(dir: &Path) -> ([u8; 32], [u8; 32]) {
    let e = Engine::new().with_cache_dir(dir);
    let (compiled, _) = run(&e);
    assert!(compiled >= 2);
    assert!(e
        .disk_cache()
        .unwrap()
        .wait_for_writes(Duration::from_secs(60)));
    drop(e);
    std::fs::write(dir.join(BUNDLE_MANIFEST), "# test bundle\n").unwrap();
    let secret = kiln_runtime::aot::sign::generate_secret_key().unwrap();
    let n = sign_bundle(dir, &secret, MAX).unwrap();
    assert_eq!(n, list_entry_files(dir).unwrap().len());
    (secret, public_key_of(&secret))
}

#[test]
fn a_good_signature_verifies_and_serves_without_compiling() {
    let dir = fresh_dir("good");
    let (_, public) = signed_bundle(&dir);
    let digests = verify_bundle(&dir, &public, MAX).unwrap();
    assert_eq!(digests.len(), list_entry_files(&dir).unwrap().len());
    let e = Engine::new().with_signed_bundle(&dir, &public);
    assert!(e.disk_cache().is_some_and(|d| d.is_signed()));
    let (compiled, hits) = run(&e);
    assert_eq!(compiled, 0);
    assert!(hits >= 2);
    drop(e);
    // Still valid: the engine wrote nothing into the bundle.
    verify_bundle(&dir, &public, MAX).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_foreign_and_altered_signatures_are_refused() {
    let dir = fresh_dir("bad-sig");
    let (_, public) = signed_bundle(&dir);
    let sig = dir.join(SIGNATURE_FILE);
    let good = std::fs::read_to_string(&sig).unwrap();

    // Another key.
    let other = public_key_of(&[9; 32]);
    assert!(matches!(
        verify_bundle(&dir, &other, MAX),
        Err(SignError::OtherKey { .. })
    ));
    // An altered signature (one hex digit of the signature line changed).
    let line = good.lines().find(|l| l.starts_with("signature ")).unwrap();
    let last = line.chars().last().unwrap();
    let flipped = format!(
        "{}{}",
        &line[..line.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    std::fs::write(&sig, good.replace(line, &flipped)).unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::BadSignature)
    ));
    // Garbage.
    std::fs::write(&sig, "hello\n").unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::Format { .. })
    ));
    // Missing: an engine requiring the signature has no disk cache and compiles.
    std::fs::remove_file(&sig).unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::Unsigned(_))
    ));
    let e = Engine::new().with_signed_bundle(&dir, &public);
    assert!(e.disk_cache().is_none());
    let (compiled, hits) = run(&e);
    assert!(compiled >= 2);
    assert_eq!(hits, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn changed_entries_and_manifests_break_the_signature() {
    let dir = fresh_dir("tamper");
    let (secret, public) = signed_bundle(&dir);
    let entries = list_entry_files(&dir).unwrap();
    assert!(entries.len() >= 2);

    // The manifest changed.
    let m = dir.join(BUNDLE_MANIFEST);
    std::fs::write(&m, "# test bundle, edited\n").unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::BadSignature)
    ));
    std::fs::write(&m, "# test bundle\n").unwrap();
    verify_bundle(&dir, &public, MAX).unwrap();

    // An entry removed (a valid bundle of fewer entries, still not what was signed).
    let moved = dir.join("moved.bin");
    std::fs::rename(&entries[0], &moved).unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::BadSignature)
    ));
    std::fs::rename(&moved, &entries[0]).unwrap();

    // An entry added after signing: a valid entry of another kernel (built into a second
    // directory) copied in.
    let other = fresh_dir("tamper-other");
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 20, 33],
    };
    let g = kiln_ops::build_op("median_blur", &[("k".into(), "5".into())], &ty).unwrap();
    let e = Engine::new().with_cache_dir(&other);
    e.compile(&g).unwrap();
    assert!(e
        .disk_cache()
        .unwrap()
        .wait_for_writes(Duration::from_secs(60)));
    drop(e);
    let extra = list_entry_files(&other).unwrap();
    let added = dir.join(extra[0].file_name().unwrap());
    std::fs::copy(&extra[0], &added).unwrap();
    assert!(matches!(
        verify_bundle(&dir, &public, MAX),
        Err(SignError::BadSignature)
    ));
    // Re-signing with the secret key covers it again.
    sign_bundle(&dir, &secret, MAX).unwrap();
    verify_bundle(&dir, &public, MAX).unwrap();

    // A corrupt entry: refused before any signature check, with the entry named.
    let mut bytes = std::fs::read(&entries[1]).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 1;
    std::fs::write(&entries[1], bytes).unwrap();
    let err = verify_bundle(&dir, &public, MAX).unwrap_err();
    assert!(matches!(err, SignError::Entry { .. }), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn an_entry_replaced_after_the_engine_opened_the_bundle_is_not_run() {
    let dir = fresh_dir("swap");
    let (_, public) = signed_bundle(&dir);
    let e = Engine::new().with_signed_bundle(&dir, &public);
    assert!(e.disk_cache().is_some());
    // After the check at open, every entry is replaced by a valid entry for the same key
    // (checksum and key verify) whose code differs in one byte of padding: only the signed
    // digest tells it apart, and it must not be run.
    for f in list_entry_files(&dir).unwrap() {
        let mut entry = Entry::decode(&std::fs::read(&f).unwrap()).unwrap();
        entry.payload.push(0xcc);
        std::fs::write(&f, entry.encode().unwrap()).unwrap();
        kiln_runtime::aot::store::verify_file(&f, MAX).unwrap();
    }
    let (compiled, hits) = run(&e);
    assert!(compiled >= 2);
    assert_eq!(hits, 0);
    assert!(e.stats().disk_rejected >= 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn key_files_round_trip_and_bad_ones_are_clear_errors() {
    let dir = fresh_dir("keys");
    std::fs::create_dir_all(&dir).unwrap();
    let (s, p) = (dir.join("k.secret"), dir.join("k.pub"));
    let secret = [5u8; 32];
    write_key_files(&secret, &s, &p).unwrap();
    assert_eq!(read_secret_key(&s).unwrap(), secret);
    assert_eq!(read_public_key(&p).unwrap(), public_key_of(&secret));
    // Never replaces a secret key.
    assert!(write_key_files(&secret, &s, &p).is_err());
    // A public key file is not a secret key file, and garbage is refused.
    assert!(matches!(read_secret_key(&p), Err(SignError::Format { .. })));
    std::fs::write(&p, "kiln-ed25519-public-key 12\n").unwrap();
    assert!(matches!(read_public_key(&p), Err(SignError::Format { .. })));
    assert!(matches!(
        read_public_key(&dir.join("absent")),
        Err(SignError::Io { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
