//! The engine with an on-disk kernel cache (issue 25): a fresh engine on a warmed directory
//! compiles nothing and gives eager's bits; entries written under other options are not
//! used; corrupt entries are never run (quarantined, recompiled, correct); code images that
//! need relocations are refused. Cross-process runs are in the root crate's
//! `tests/aot_cli.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kiln_codegen::CompileOptions;
use kiln_ir::{DType, Graph, TensorType};
use kiln_runtime::aot::kernels::{entry_of, kernel_key};
use kiln_runtime::aot::{CacheError, HostSpec};
use kiln_runtime::backend::CodeImage;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{eager, Tensor, Tuning};

/// A fresh empty directory under the target's temporary dir.
fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-aot-engine-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Graphs with stencil kernels (a split border function in the 5x5 median), a dual-stage
/// opening and a line kernel (scan), on a 1x1x24x40 f32 image.
fn graphs() -> Vec<Graph> {
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 24, 40],
    };
    let cases = [
        ("median_blur", "k", "5"),
        ("median_blur", "k", "3"),
        ("grey_opening", "size", "3"),
        ("gradient_magnitude", "mode", "reflect"),
    ];
    let mut gs: Vec<Graph> = cases
        .iter()
        .map(|(op, k, v)| kiln_ops::build_op(op, &[(k.to_string(), v.to_string())], &ty).unwrap())
        .collect();
    let mut b = kiln_ir::GraphBuilder::new();
    let x = b.input(DType::F32, &[1, 1, 24, 40]).unwrap();
    let s = b.scan(x, 3, kiln_ir::ReduceOp::Sum).unwrap();
    gs.push(b.finish(&[s]).unwrap());
    gs
}

/// Input with NaN, infinities and -0 sprinkled in (so guarded variants are not taken).
fn input(special: bool) -> Tensor {
    let data = (0..24 * 40)
        .map(|i| match i % 97 {
            3 if special => f32::NAN,
            5 if special => f32::NEG_INFINITY,
            7 if special => -0.0,
            _ => ((i * 37 % 101) as f32 * 0.37).sin() * 10.0,
        })
        .collect();
    Tensor::from_f32(data, &[1, 1, 24, 40]).unwrap()
}

/// Runs every graph on `engine` (both inputs, so clean-input variants run too) and checks
/// each result against eager, bit for bit.
fn run_all_checked(engine: &Engine) {
    for g in graphs() {
        let compiled = engine.compile(&g).unwrap();
        for special in [true, false] {
            let x = input(special);
            let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
            let got = compiled.run(engine, std::slice::from_ref(&x)).unwrap();
            assert_eq!(first_difference(&want[0], &got[0]), None);
        }
    }
}

fn engine(dir: &Path, tiering: bool) -> Engine {
    Engine::new().with_tiering(tiering).with_cache_dir(dir)
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
    kiln_runtime::aot::store::list_entry_files(dir).unwrap()
}

#[test]
fn a_warmed_directory_serves_every_kernel_without_compiling() {
    for tiering in [false, true] {
        let dir = fresh_dir(&format!("warm-{tiering}"));
        let first = engine(&dir, tiering);
        run_all_checked(&first);
        let st = first.stats();
        assert!(st.kernels_compiled >= 5, "{st:?}");
        assert_eq!(st.disk_hits, 0);
        assert_eq!(st.disk_misses, st.kernels_compiled);
        assert!(first
            .disk_cache()
            .unwrap()
            .wait_for_writes(Duration::from_secs(60)));
        let st = first.stats();
        assert_eq!(st.disk_writes, st.kernels_compiled, "{st:?}");
        drop(first);
        assert_eq!(entry_files(&dir).len(), st.kernels_compiled);

        let second = engine(&dir, tiering);
        run_all_checked(&second);
        let st2 = second.stats();
        assert_eq!(st2.kernels_compiled, 0, "tiering {tiering}: {st2:?}");
        assert_eq!(st2.upgrades_started, 0);
        assert_eq!(st2.disk_hits, st.kernels_compiled);
        assert_eq!(
            (st2.disk_misses, st2.disk_writes, st2.disk_rejected),
            (0, 0, 0)
        );
        if tiering {
            // The entries hold the background compile's code: a recompiled general kernel
            // and clean-input variants, which the clean input ran on.
            let names: Vec<String> = entry_files(&dir)
                .iter()
                .flat_map(|f| {
                    let e = kiln_runtime::aot::store::verify_file(f, 1 << 26).unwrap();
                    e.symbols.into_iter().map(|s| s.name)
                })
                .collect();
            assert!(
                names.iter().any(|n| n.starts_with("upgraded/")),
                "{names:?}"
            );
            assert!(names.iter().any(|n| n.starts_with("clean/")), "{names:?}");
            assert!(st2.clean_blocks + st2.nonneg_blocks > 0, "{st2:?}");
        }
        // A loaded kernel's image is the stored code: relocation-free, every function there.
        let g = &graphs()[0];
        let c = second.compile(g).unwrap();
        for im in c.code_images() {
            assert!(im.is_relocation_free());
            assert!(!im.symbols.is_empty());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_entry_written_under_other_options_is_not_used() {
    let dir = fresh_dir("stale");
    let a = Engine::with_tuning(Tuning {
        tiering: false,
        ..Tuning::default()
    })
    .with_cache_dir(&dir);
    run_all_checked(&a);
    let n = a.stats().kernels_compiled;
    drop(a);
    let other = CompileOptions {
        no_edge_vectors: true,
        ..CompileOptions::default()
    };
    let b = Engine::with_options(other)
        .with_tiering(false)
        .with_cache_dir(&dir);
    run_all_checked(&b);
    let st = b.stats();
    assert_eq!(st.disk_hits, 0, "{st:?}");
    assert_eq!(st.kernels_compiled, n);
    drop(b);
    // Tiering changes what an entry holds: also a different key.
    let c = engine(&dir, true);
    run_all_checked(&c);
    assert_eq!(c.stats().disk_hits, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn flipped_bytes_are_never_run_and_kernels_are_recompiled() {
    let dir = fresh_dir("flips");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let warm = engine(&dir, false);
    run_all_checked(&warm);
    let n = warm.stats().kernels_compiled;
    drop(warm);
    // Several rounds: flip one random bit in every entry, then a fresh engine must reject
    // each one, recompile, write a fresh entry and still give eager's bits.
    for round in 0..3 {
        let files = entry_files(&dir);
        assert_eq!(files.len(), n, "round {round}");
        for f in &files {
            let mut bytes = std::fs::read(f).unwrap();
            let at = (rng.next() % bytes.len() as u64) as usize;
            bytes[at] ^= 1 << (rng.next() % 8);
            std::fs::write(f, &bytes).unwrap();
        }
        let e = engine(&dir, false);
        run_all_checked(&e);
        assert!(e
            .disk_cache()
            .unwrap()
            .wait_for_writes(Duration::from_secs(60)));
        let st = e.stats();
        assert_eq!(st.disk_hits, 0, "round {round}: {st:?}");
        assert_eq!(st.disk_rejected, n, "round {round}");
        assert_eq!(st.kernels_compiled, n);
        assert_eq!(st.disk_writes, n);
        let quarantined = std::fs::read_dir(dir.join("quarantine")).unwrap().count();
        assert_eq!(quarantined, n * (round + 1));
    }
    // The rewritten entries are good again.
    let e = engine(&dir, false);
    run_all_checked(&e);
    assert_eq!(e.stats().disk_hits, n);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_and_foreign_entries_are_misses() {
    let dir = fresh_dir("trunc");
    let warm = engine(&dir, false);
    run_all_checked(&warm);
    drop(warm);
    let files = entry_files(&dir);
    // Truncate one, replace another with a symlink, empty a third.
    let len = std::fs::metadata(&files[0]).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&files[0])
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    std::fs::write(&files[2], b"").unwrap();
    let target = dir.join("elsewhere");
    std::fs::rename(&files[1], &target).unwrap();
    std::os::unix::fs::symlink(&target, &files[1]).unwrap();
    let e = engine(&dir, false);
    run_all_checked(&e);
    let st = e.stats();
    assert_eq!(st.disk_rejected, 3, "{st:?}");
    assert_eq!(st.kernels_compiled, 3);
    assert_eq!(st.disk_hits, files.len() - 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_image_that_needs_relocations_is_refused() {
    let f = kiln_codegen::cpu::FunctionCode {
        name: "f".into(),
        bytes: vec![0x90; 16],
        relocs: vec![kiln_codegen::cpu::CodeReloc {
            offset: 4,
            kind: "X86CallPCRel4".into(),
            target: "LibCall(FloorF32)".into(),
            addend: -4,
        }],
    };
    let image = CodeImage::from_functions(&[f]);
    let host = HostSpec::detect();
    let g = &graphs()[1];
    let k = kiln_runtime::executor::lower_graph(g, kiln_ir::passes::StageStorage::ScratchRows)
        .unwrap()
        .kernels
        .remove(0);
    let key = kernel_key(&k, &CompileOptions::default(), false, &host);
    match entry_of(key, &image, &host) {
        Err(CacheError::NeedsRelocation { count: 1, first }) => {
            assert!(first.contains("FloorF32"), "{first}")
        }
        other => panic!("expected NeedsRelocation, got {other:?}"),
    }
}

#[test]
fn an_unusable_directory_means_no_cache_not_a_crash() {
    let dir = fresh_dir("file");
    std::fs::write(&dir, b"not a directory").unwrap();
    let e = engine(&dir, false);
    assert!(e.disk_cache().is_none());
    run_all_checked(&e);
    let _ = std::fs::remove_file(&dir);
}
