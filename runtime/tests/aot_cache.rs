//! The on-disk kernel cache (`kiln_runtime::aot`): key sensitivity, every corruption on its
//! own, random byte flips, write-once puts, LRU pruning, several processes warming one
//! directory, and verified code run from executable memory.
//!
//! Exactness: every rejected entry must come back as a miss with its reason, be moved to
//! `quarantine/`, and a recompiled (re-put) entry must then be served with exactly its bytes.
//! Limits: permission-based cases cannot be provoked as root (root ignores modes); those
//! print SKIP and the root-provokable variant (the directory replaced by a file) runs instead.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use kiln_codegen::kernel::{Inst, Kernel, KernelBody, Line, Op, Source, Stage, ValueId};
use kiln_ir::{Border, DType, ReduceOp, Scalar};
use kiln_runtime::aot::entry::MIN_LEN;
use kiln_runtime::aot::store::{self, PruneReport};
use kiln_runtime::aot::{
    CacheDir, CacheError, CacheKey, Entry, HostSpec, KeyInputs, Lookup, PtxTarget, PutOutcome,
    Symbol,
};
use proptest::prelude::*;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("kiln-aot-{tag}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o755));
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn stencil(border: Border, offset: i64) -> Kernel {
    Kernel {
        rank: 4,
        inputs: vec![DType::F32],
        output: DType::F32,
        body: KernelBody::Stencil {
            stages: vec![Stage {
                insts: vec![
                    Inst {
                        op: Op::Load {
                            source: Source::Input(0),
                            offset: vec![offset, 0],
                            border,
                        },
                        dtype: DType::F32,
                    },
                    Inst {
                        op: Op::Const(Scalar::f32(0.5)),
                        dtype: DType::F32,
                    },
                    Inst {
                        op: Op::Binary(kiln_ir::BinaryOp::Min, ValueId(0), ValueId(1)),
                        dtype: DType::F32,
                    },
                ],
                result: ValueId(2),
            }],
        },
    }
}

fn host() -> HostSpec {
    HostSpec::new("x86_64-unknown-linux-gnu", &["sse2", "avx"])
}

/// `mov eax, imm32; ret`, padded with `int3` to `len` bytes.
fn code(imm: u32, len: usize) -> Vec<u8> {
    let mut c = vec![0xb8];
    c.extend_from_slice(&imm.to_le_bytes());
    c.push(0xc3);
    c.resize(len.max(6), 0xcc);
    c
}

fn entry_for(key: CacheKey, imm: u32, len: usize) -> Entry {
    Entry {
        key,
        target: "x86_64-unknown-linux-gnu".into(),
        features: vec!["sse2".into()],
        symbols: vec![Symbol {
            name: "kernel_0".into(),
            offset: 0,
            len: 6,
        }],
        payload: code(imm, len),
    }
}

fn key_n(n: u32) -> CacheKey {
    let k = stencil(Border::Nearest, 0);
    KeyInputs::for_host(&k, format!("opt={n}").as_bytes(), &host()).key()
}

fn quarantine_count(dir: &Path) -> usize {
    fs::read_dir(dir.join("quarantine")).unwrap().count()
}

// ---------------------------------------------------------------- key

#[test]
fn same_inputs_give_the_same_key_and_bytes() {
    let a = KeyInputs::for_host(&stencil(Border::Reflect, 1), b"o", &host());
    let b = KeyInputs::for_host(&stencil(Border::Reflect, 1), b"o", &host());
    assert_eq!(a.canonical_bytes(), b.canonical_bytes());
    assert_eq!(a.key(), b.key());
    // The key is a pure function of the bytes: recomputing from a clone agrees too.
    assert_eq!(a.clone().key(), a.key());
}

#[test]
fn each_key_input_changes_the_key() {
    let base = KeyInputs::for_host(&stencil(Border::Reflect, 1), b"opt", &host());
    let mut variants: Vec<(&str, KeyInputs)> = Vec::new();
    let mut v = |name, f: &dyn Fn(&mut KeyInputs)| {
        let mut k = base.clone();
        f(&mut k);
        variants.push((name, k));
    };
    v("kernel offset", &|k| {
        k.kernel = stencil(Border::Reflect, 2).to_string()
    });
    v("kernel border", &|k| {
        k.kernel = stencil(Border::Mirror, 1).to_string()
    });
    v("kernel cval +0 vs -0", &|k| {
        k.kernel = stencil(Border::Constant(Scalar::f32(0.0)), 1).to_string()
    });
    v("kernel cval -0", &|k| {
        k.kernel = stencil(Border::Constant(Scalar::f32(-0.0)), 1).to_string()
    });
    v("kernel body", &|k| {
        k.kernel = Kernel {
            rank: 4,
            inputs: vec![DType::F32],
            output: DType::F32,
            body: KernelBody::Line(Line::scan(2, ReduceOp::Sum, DType::F32)),
        }
        .to_string()
    });
    v("compile options", &|k| k.compile_options = b"opu".to_vec());
    v("numerics rules", &|k| k.numerics_rules += 1);
    v("target triple", &|k| {
        k.target_triple = "aarch64-unknown-linux-gnu".into()
    });
    v("cpu features", &|k| k.cpu_features.push("avx2".into()));
    v("cranelift version", &|k| {
        k.cranelift_version = "0.135.9".into()
    });
    v("format version", &|k| k.format_version += 1);
    v("build id", &|k| k.build_id.push('x'));
    v("ptx sm_80", &|k| {
        k.ptx = Some(PtxTarget {
            sm: 80,
            isa: (7, 8),
        })
    });
    v("ptx sm_90", &|k| {
        k.ptx = Some(PtxTarget {
            sm: 90,
            isa: (7, 8),
        })
    });
    v("ptx isa 8.0", &|k| {
        k.ptx = Some(PtxTarget {
            sm: 80,
            isa: (8, 0),
        })
    });
    let mut keys = vec![("base", base.key())];
    for (n, k) in &variants {
        keys.push((n, k.key()));
    }
    for i in 0..keys.len() {
        for j in 0..i {
            assert_ne!(
                keys[i].1, keys[j].1,
                "{} and {} share a key",
                keys[i].0, keys[j].0
            );
        }
    }
    // Feature order is not an input: only the set is.
    let mut shuffled = base.clone();
    shuffled.cpu_features.reverse();
    shuffled.cpu_features.push(shuffled.cpu_features[0].clone());
    assert_eq!(shuffled.key(), base.key());
}

#[test]
fn fields_cannot_bleed_into_each_other() {
    // Without length prefixes these two would serialise alike.
    let mut a = KeyInputs::for_host(&stencil(Border::Wrap, 0), b"ab", &host());
    a.target_triple = "c".into();
    let mut b = a.clone();
    b.compile_options = b"a".to_vec();
    b.target_triple = "bc".into();
    assert_ne!(a.key(), b.key());
}

// ---------------------------------------------------------------- corruptions

/// Writes a valid entry for `key`, lets `corrupt` damage the cache, and checks that `get`
/// rejects it with `want`, quarantines it (when `quarantined`), and that a recompiled entry
/// is then written and served exactly.
fn expect_rejected(
    tag: &str,
    corrupt: impl FnOnce(&CacheDir, &Path),
    lookup_host: &HostSpec,
    cache_limit: Option<u64>,
    want: impl Fn(&CacheError) -> bool,
) {
    let tmp = TempDir::new(tag);
    let mut dir = CacheDir::open(&tmp.0).unwrap();
    let key = key_n(1);
    let good = entry_for(key, 42, 256);
    assert_eq!(dir.put(&good).unwrap(), PutOutcome::Written);
    let path = dir.entry_path(&key);
    corrupt(&dir, &path);
    if let Some(l) = cache_limit {
        dir = dir.with_max_entry_bytes(l);
    }
    match dir.get(&key, lookup_host) {
        Lookup::Rejected(r) => {
            assert!(want(&r.reason), "{tag}: unexpected reason {:?}", r.reason);
            let q = r.quarantined_to.as_ref().expect("quarantined");
            assert!(q.starts_with(tmp.0.join("quarantine")), "{tag}");
            assert!(!r.to_string().is_empty());
            eprintln!("{tag}: {r}");
        }
        other => panic!("{tag}: expected a rejection, got {other:?}"),
    }
    assert_eq!(quarantine_count(&tmp.0), 1, "{tag}");
    assert!(
        matches!(dir.get(&key, lookup_host), Lookup::Absent),
        "{tag}"
    );
    // The caller recompiles and writes again; the fresh entry is served bit for bit.
    let dir = dir.with_max_entry_bytes(store::DEFAULT_MAX_ENTRY_BYTES);
    let mut fresh = entry_for(key, 42, 256);
    fresh.target = lookup_host.triple.clone();
    fresh.features = lookup_host.features.clone();
    assert_eq!(dir.put(&fresh).unwrap(), PutOutcome::Written, "{tag}");
    assert_eq!(dir.get(&key, lookup_host).entry(), Some(fresh), "{tag}");
}

fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = fs::read(path).unwrap();
    f(&mut b);
    fs::remove_file(path).unwrap();
    fs::write(path, b).unwrap();
}

#[test]
fn truncated_entries_are_rejected() {
    for cut in [0usize, 1, 8, MIN_LEN - 1, MIN_LEN, 100, 200, 1] {
        expect_rejected(
            "trunc",
            |_, p| rewrite(p, |b| b.truncate(b.len().min(cut))),
            &host(),
            None,
            |e| {
                matches!(
                    e,
                    CacheError::TooShort { .. } | CacheError::Checksum | CacheError::BadMagic
                )
            },
        );
    }
    expect_rejected(
        "trunc-last",
        |_, p| rewrite(p, |b| b.truncate(b.len() - 1)),
        &host(),
        None,
        |e| matches!(e, CacheError::Checksum),
    );
    expect_rejected(
        "appended",
        |_, p| rewrite(p, |b| b.push(0)),
        &host(),
        None,
        |e| matches!(e, CacheError::Checksum),
    );
}

#[test]
fn bit_flipped_header_is_rejected() {
    // magic, version, flags, key, triple length, triple, feature count.
    for (pos, want) in [
        (0usize, "magic"),
        (9, "version"),
        (13, "sum"),
        (20, "sum"),
        (48, "sum"),
        (55, "sum"),
        (75, "sum"),
    ] {
        expect_rejected(
            "header",
            |_, p| rewrite(p, |b| b[pos] ^= 0x10),
            &host(),
            None,
            |e| match want {
                "magic" => matches!(e, CacheError::BadMagic),
                "version" => matches!(e, CacheError::Version { .. }),
                _ => matches!(e, CacheError::Checksum),
            },
        );
    }
}

#[test]
fn bit_flipped_payload_and_checksum_are_rejected() {
    for back in [33usize, 40, 200, 32, 1] {
        expect_rejected(
            "payload",
            |_, p| {
                rewrite(p, |b| {
                    let i = b.len() - back;
                    b[i] ^= 1
                })
            },
            &host(),
            None,
            |e| matches!(e, CacheError::Checksum),
        );
    }
}

#[test]
fn wrong_key_is_rejected() {
    // A well-formed entry for another key sits under this key's name.
    expect_rejected(
        "wrongkey",
        |_, p| {
            let other = entry_for(key_n(2), 42, 256);
            fs::remove_file(p).unwrap();
            fs::write(p, other.encode().unwrap()).unwrap();
        },
        &host(),
        None,
        |e| matches!(e, CacheError::KeyMismatch { .. }),
    );
}

#[test]
fn stale_entry_for_another_option_is_never_used() {
    let tmp = TempDir::new("stale");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let k = stencil(Border::Reflect, 1);
    let old = KeyInputs::for_host(&k, b"opt_level=1", &host()).key();
    let new = KeyInputs::for_host(&k, b"opt_level=2", &host()).key();
    dir.put(&entry_for(old, 1, 64)).unwrap();
    assert!(matches!(dir.get(&new, &host()), Lookup::Absent));
    assert!(dir.get(&old, &host()).entry().is_some());
}

#[test]
fn wrong_target_is_rejected() {
    expect_rejected(
        "target",
        |_, _| {},
        &HostSpec::new("aarch64-unknown-linux-gnu", &["sse2"]),
        None,
        |e| matches!(e, CacheError::WrongTarget { .. }),
    );
}

#[test]
fn missing_feature_is_rejected() {
    expect_rejected(
        "feature",
        |_, _| {},
        &HostSpec::new("x86_64-unknown-linux-gnu", &["avx"]),
        None,
        |e| matches!(e, CacheError::MissingFeatures(f) if f == &["sse2".to_string()]),
    );
}

#[cfg(unix)]
#[test]
fn symlink_is_rejected_and_its_target_untouched() {
    let outside = TempDir::new("symtarget");
    let target = outside.0.join("good.kce");
    expect_rejected(
        "symlink",
        |_, p| {
            fs::rename(p, &target).unwrap();
            std::os::unix::fs::symlink(&target, p).unwrap();
        },
        &host(),
        None,
        |e| matches!(e, CacheError::Symlink(_)),
    );
    assert!(Entry::decode(&fs::read(&target).unwrap()).is_ok());
}

#[test]
fn non_regular_files_are_rejected() {
    expect_rejected(
        "dir",
        |_, p| {
            fs::remove_file(p).unwrap();
            fs::create_dir(p).unwrap();
        },
        &host(),
        None,
        |e| matches!(e, CacheError::NotRegularFile(_)),
    );
    #[cfg(target_os = "linux")]
    expect_rejected(
        "fifo",
        |_, p| {
            fs::remove_file(p).unwrap();
            let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            // SAFETY: `c` is a valid NUL-terminated path; mkfifo only creates a node.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        },
        &host(),
        None,
        |e| matches!(e, CacheError::NotRegularFile(_)),
    );
}

#[test]
fn file_too_large_is_rejected() {
    expect_rejected(
        "large",
        |_, _| {},
        &host(),
        Some(100),
        |e| matches!(e, CacheError::TooLarge { limit: 100, .. }),
    );
    let tmp = TempDir::new("largeput");
    let dir = CacheDir::open(&tmp.0).unwrap().with_max_entry_bytes(100);
    assert!(matches!(
        dir.put(&entry_for(key_n(1), 1, 256)),
        Err(CacheError::TooLarge { .. })
    ));
}

/// Whether file modes bind this process (they do not for root).
#[cfg(unix)]
fn modes_bind(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join("probe");
    fs::create_dir(&probe).unwrap();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o500)).unwrap();
    let binds = fs::write(probe.join("x"), b"x").is_err();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_dir_all(&probe).unwrap();
    binds
}

#[cfg(unix)]
#[test]
fn unreadable_and_unwritable_directories_are_errors_not_crashes() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = TempDir::new("perm");
    let root = tmp.0.join("cache");
    let dir = CacheDir::open(&root).unwrap();
    let key = key_n(1);
    dir.put(&entry_for(key, 7, 64)).unwrap();
    if modes_bind(&tmp.0) {
        fs::set_permissions(&root, fs::Permissions::from_mode(0o000)).unwrap();
        match dir.get(&key, &host()) {
            Lookup::Rejected(r) => assert!(matches!(r.reason, CacheError::Io { .. })),
            other => panic!("unreadable dir: {other:?}"),
        }
        fs::set_permissions(&root, fs::Permissions::from_mode(0o500)).unwrap();
        assert!(matches!(
            dir.put(&entry_for(key_n(2), 7, 64)),
            Err(CacheError::Io { .. })
        ));
        assert!(CacheDir::open(root.join("sub")).is_err());
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    } else {
        println!("SKIP: running as root, directory modes do not bind; checking the directory-replaced-by-a-file variant only");
    }
    // Provokable as any user: the directory is replaced by a regular file.
    fs::rename(&root, tmp.0.join("moved")).unwrap();
    fs::write(&root, b"not a directory").unwrap();
    match dir.get(&key, &host()) {
        Lookup::Rejected(r) => {
            assert!(matches!(r.reason, CacheError::Io { .. }), "{:?}", r.reason);
            assert!(r.quarantined_to.is_none());
        }
        Lookup::Absent => {}
        Lookup::Hit(_) => panic!("a file is not a cache"),
    }
    assert!(matches!(
        dir.put(&entry_for(key_n(2), 7, 64)),
        Err(CacheError::Io { .. })
    ));
    assert!(CacheDir::open(&root).is_err());
    assert!(CacheDir::open(root.join("sub")).is_err());
}

// ---------------------------------------------------------------- random damage

fn arb_entry() -> impl Strategy<Value = Entry> {
    (
        any::<[u8; 32]>(),
        prop::collection::vec(any::<u8>(), 1..300),
        prop::collection::btree_set("[a-z0-9.]{1,8}", 0..4),
        0usize..4,
    )
        .prop_map(|(key, payload, feats, nsym)| {
            let symbols = (0..nsym)
                .map(|i| Symbol {
                    name: format!("k{i}"),
                    offset: (i * payload.len() / 4) as u64,
                    len: (payload.len() / 4) as u64,
                })
                .collect();
            Entry {
                key: CacheKey(key),
                target: "x86_64-unknown-linux-gnu".into(),
                features: feats.into_iter().collect(),
                symbols,
                payload,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_byte_flip_never_verifies(e in arb_entry(), pos in any::<prop::sample::Index>(), mask in 1u8..=255) {
        let mut b = e.encode().unwrap();
        prop_assert_eq!(Entry::decode(&b).unwrap(), e);
        let i = pos.index(b.len());
        b[i] ^= mask;
        prop_assert!(Entry::decode(&b).is_err());
    }

    #[test]
    fn any_truncation_never_verifies(e in arb_entry(), cut in any::<prop::sample::Index>()) {
        let b = e.encode().unwrap();
        let n = cut.index(b.len());
        prop_assert!(Entry::decode(&b[..n]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(mut b in prop::collection::vec(any::<u8>(), 0..400), magic in any::<bool>()) {
        if magic && b.len() >= 12 {
            b[..8].copy_from_slice(&kiln_runtime::aot::entry::MAGIC);
            b[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        let _ = Entry::decode(&b);
    }
}

#[test]
fn a_checksummed_but_inconsistent_header_is_rejected() {
    // Someone who recomputes the checksum still cannot make an out-of-payload symbol pass.
    use sha2::{Digest, Sha256};
    let e = entry_for(key_n(1), 1, 16);
    let mut b = e.encode().unwrap();
    b.truncate(b.len() - 32);
    // The symbol's len field is the 8 bytes before the payload length and payload.
    let len_at = b.len() - 16 - 8 - 8;
    b[len_at..len_at + 8].copy_from_slice(&1000u64.to_le_bytes());
    let sum = Sha256::digest(&b);
    b.extend_from_slice(&sum);
    assert!(matches!(Entry::decode(&b), Err(CacheError::Malformed(_))));
}

#[test]
fn random_flips_over_many_stored_entries_are_all_quarantined() {
    let tmp = TempDir::new("flips");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let n = 64;
    for i in 0..n {
        let key = key_n(100 + i);
        let e = entry_for(key, i, 64 + (next() % 512) as usize);
        dir.put(&e).unwrap();
        let p = dir.entry_path(&key);
        rewrite(&p, |b| {
            let at = (next() % b.len() as u64) as usize;
            b[at] ^= 1 << (next() % 8);
        });
        assert!(
            matches!(dir.get(&key, &host()), Lookup::Rejected(_)),
            "flip in entry {i} verified"
        );
    }
    assert_eq!(quarantine_count(&tmp.0), n as usize);
    assert!(dir.entry_files().unwrap().is_empty());
}

// ---------------------------------------------------------------- write-once, prune

#[test]
fn put_never_replaces_an_entry() {
    let tmp = TempDir::new("noreplace");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let key = key_n(1);
    let first = entry_for(key, 1, 64);
    let second = entry_for(key, 2, 64);
    assert_eq!(dir.put(&first).unwrap(), PutOutcome::Written);
    let before = fs::read(dir.entry_path(&key)).unwrap();
    assert_eq!(dir.put(&second).unwrap(), PutOutcome::AlreadyPresent);
    assert_eq!(fs::read(dir.entry_path(&key)).unwrap(), before);
    assert_eq!(dir.get(&key, &host()).entry(), Some(first));
    // No temporary file is left behind.
    let names: Vec<String> = fs::read_dir(&tmp.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp.")), "{names:?}");
}

#[test]
fn prune_keeps_the_most_recently_used_under_the_limit() {
    let tmp = TempDir::new("prune");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let base = SystemTime::now() - Duration::from_secs(10_000);
    let mut size = 0;
    for i in 0..10u32 {
        let key = key_n(i);
        dir.put(&entry_for(key, i, 200)).unwrap();
        let f = fs::File::options()
            .write(true)
            .open(dir.entry_path(&key))
            .unwrap();
        // Older keys were used longer ago.
        f.set_modified(base + Duration::from_secs(u64::from(i) * 10))
            .unwrap();
        size = f.metadata().unwrap().len();
    }
    // Using entries 0 and 1 now makes them the most recent.
    assert!(dir.get(&key_n(0), &host()).entry().is_some());
    assert!(dir.get(&key_n(1), &host()).entry().is_some());
    let rep: PruneReport = dir.prune(4 * size + size / 2).unwrap();
    assert_eq!((rep.kept, rep.removed), (4, 6));
    let mut kept: Vec<CacheKey> = dir
        .entry_files()
        .unwrap()
        .iter()
        .map(|p| CacheKey::from_hex(p.file_stem().unwrap().to_str().unwrap()).unwrap())
        .collect();
    kept.sort();
    let mut want = vec![key_n(0), key_n(1), key_n(9), key_n(8)];
    want.sort();
    assert_eq!(kept, want);
    assert_eq!(dir.prune(0).unwrap().kept, 0);
    assert!(dir.entry_files().unwrap().is_empty());
}

#[test]
fn verify_file_checks_the_name_against_the_key() {
    let tmp = TempDir::new("verify");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let key = key_n(1);
    dir.put(&entry_for(key, 1, 64)).unwrap();
    let p = dir.entry_path(&key);
    assert!(store::verify_file(&p, 1 << 20).is_ok());
    let renamed = dir.entry_path(&key_n(2));
    fs::rename(&p, &renamed).unwrap();
    assert!(matches!(
        store::verify_file(&renamed, 1 << 20),
        Err(CacheError::KeyMismatch { .. })
    ));
}

// ---------------------------------------------------------------- processes

const CHILD_ENV: &str = "KILN_AOT_TEST_CHILD_DIR";
const CHILD_KEYS: u32 = 24;

/// Run by `concurrent_processes_warm_one_directory` in child processes: warms the shared
/// directory, checking every hit's bytes.
#[test]
fn concurrent_worker_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        println!("SKIP: concurrent_worker_child works only as a child of concurrent_processes_warm_one_directory");
        return;
    };
    let dir = CacheDir::open(PathBuf::from(dir)).unwrap();
    let salt: u32 = std::process::id();
    for round in 0..3u32 {
        for j in 0..CHILD_KEYS {
            let i = (j + salt + round * 7) % CHILD_KEYS;
            let key = key_n(1000 + i);
            let want = entry_for(key, i, 4096 + i as usize * 37);
            match dir.get(&key, &host()) {
                Lookup::Hit(e) => assert_eq!(e, want, "entry {i} read back wrong"),
                Lookup::Absent => {
                    dir.put(&want).unwrap();
                }
                Lookup::Rejected(r) => panic!("a concurrent reader saw a bad entry: {r}"),
            }
        }
    }
    for i in 0..CHILD_KEYS {
        let key = key_n(1000 + i);
        assert_eq!(
            dir.get(&key, &host()).entry(),
            Some(entry_for(key, i, 4096 + i as usize * 37))
        );
    }
}

#[test]
fn concurrent_processes_warm_one_directory() {
    let tmp = TempDir::new("procs");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..6)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrent_worker_child",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD_ENV, &tmp.0)
                .output_spawn()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child failed:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "child ran no test:\n{text}");
        assert!(!text.contains("SKIP"), "child skipped:\n{text}");
    }
    let dir = CacheDir::open(&tmp.0).unwrap();
    let files = dir.entry_files().unwrap();
    assert_eq!(files.len(), CHILD_KEYS as usize);
    for f in &files {
        store::verify_file(f, 1 << 20).unwrap();
    }
    assert_eq!(quarantine_count(&tmp.0), 0);
    let stray = fs::read_dir(&tmp.0)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".tmp.")
        })
        .count();
    assert_eq!(stray, 0);
}

trait SpawnPiped {
    fn output_spawn(&mut self) -> std::process::Child;
}

impl SpawnPiped for Command {
    fn output_spawn(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

// ---------------------------------------------------------------- executable memory

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_verified_hit_runs_from_executable_memory() {
    use kiln_runtime::aot::exec_mem::ExecMem;
    let tmp = TempDir::new("exec");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let h = HostSpec::detect();
    let key = KeyInputs::for_host(&stencil(Border::Wrap, 3), b"", &h).key();
    let mut e = entry_for(key, 0x1234_5678, 128);
    e.target = h.triple.clone();
    dir.put(&e).unwrap();
    let hit = dir.get(&key, &h).entry().expect("hit");
    let mem = ExecMem::load(&hit.payload).unwrap();
    let p = mem.symbol_ptr(&hit.symbols[0]).unwrap();
    // SAFETY: the symbol is `mov eax, imm32; ret`, a complete `extern "C" fn() -> u32`, in
    // read+execute memory that `mem` keeps alive for the call.
    let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(p) };
    assert_eq!(f(), 0x1234_5678);
}

/// `movz w0, #lo; movk w0, #hi, lsl #16; ret`: an aarch64 `extern "C" fn() -> u32`
/// returning `imm`.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn a64_return(imm: u32) -> Vec<u8> {
    let movz = 0x5280_0000 | ((imm & 0xffff) << 5);
    let movk = 0x72a0_0000 | ((imm >> 16) << 5);
    let ret = 0xd65f_03c0u32;
    [movz, movk, ret]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
#[test]
fn a_verified_hit_runs_from_executable_memory_on_aarch64() {
    use kiln_runtime::aot::exec_mem::ExecMem;
    let tmp = TempDir::new("exec-a64");
    let dir = CacheDir::open(&tmp.0).unwrap();
    let h = HostSpec::detect();
    // Two entries loaded one after the other: the second mapping usually reuses the first's
    // pages, so it runs its own bytes only because `ExecMem::load` flushed the instruction
    // cache (under qemu this checks the encoding and the mapping; the flush itself needs
    // real hardware to matter).
    for (n, imm) in [0x1234_5678u32, 0x9abc_def0].into_iter().enumerate() {
        let key = KeyInputs::for_host(&stencil(Border::Wrap, n as i64), b"", &h).key();
        let payload = a64_return(imm);
        let e = Entry {
            key,
            target: h.triple.clone(),
            features: vec![],
            symbols: vec![Symbol {
                name: "kernel_0".into(),
                offset: 0,
                len: payload.len() as u64,
            }],
            payload,
        };
        dir.put(&e).unwrap();
        let hit = dir.get(&key, &h).entry().expect("hit");
        let mem = ExecMem::load(&hit.payload).unwrap();
        let p = mem.symbol_ptr(&hit.symbols[0]).unwrap();
        // SAFETY: the symbol is the three instructions of `a64_return`, a complete
        // `extern "C" fn() -> u32`, in read+execute memory that `mem` keeps alive for the call.
        let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(p) };
        assert_eq!(f(), imm);
    }
}
