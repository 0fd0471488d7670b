//! `kiln bench --aot-load`: loading a kernel from the on-disk cache, verification included,
//! against compiling it, and the cost of writing its entry (issue 25's measurements).
//!
//! Per kernel of each selected workload, in a fresh temporary cache directory: the first
//! compile (`cpu::compile`, the engine's default options, tiering off so the entry holds that
//! compile), the write of its entry (`DiskCache::store`: encode, temporary file, fsync,
//! link), and the load (`DiskCache::load`: read, checksum, key, host check, copy into
//! executable memory, plans recomputed), each the median of repeated runs. Exactness: every
//! loaded kernel's code image is checked equal to the compiled one. Limits: the times are
//! this machine's, with the file in the page cache (a cold disk read is not measured).
//!
//! A second table splits a load into its parts, each timed alone (median of 20): the key
//! (kernel text + SHA-256), the file read, decoding (SHA-256 checksum + fields), the LRU
//! clock update (open + set mtime), the copy into executable memory (map, copy, protect),
//! and rebuilding the `CpuKernel` (stage plans and slots recomputed, `cpu::load`).

use std::process::ExitCode;
use std::time::Instant;

use kiln::bench::Workload;
use kiln::codegen::{cpu, CompileOptions};
use kiln::ir::passes::StageStorage;
use kiln::ir::TensorType;
use kiln::runtime::aot::exec_mem::ExecMem;
use kiln::runtime::aot::kernels::{image_of_parts, kernel_from_entry, kernel_key};
use kiln::runtime::aot::{CacheError, DiskCache, Entry};
use kiln::runtime::executor::lower_graph;

use super::CliError;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the measurement over `workloads`.
pub fn run(workloads: &[Workload]) -> Result<ExitCode, CliError> {
    let dir = std::env::temp_dir().join(format!("kiln-bench-aot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let disk = DiskCache::open(&dir).map_err(|e| CliError::Usage(format!("cache: {e}")))?;
    let options = CompileOptions::default();
    println!(
        "{:<22} {:>6} {:>11} {:>9} {:>8} {:>9} {:>8}",
        "workload", "kernel", "compile ms", "write ms", "write %", "load µs", "speedup"
    );
    let mut parts_of = Vec::new();
    for w in workloads {
        // Programs compile their graphs lazily inside `run`: no kernels to store up front.
        if w.is_program() {
            println!(
                "{:<22} skipped: a program (no kernels to load up front)",
                w.name
            );
            continue;
        }
        let ty = TensorType {
            dtype: w.dtype,
            shape: w.shape.clone(),
        };
        let graph = kiln::ops::build_op(&w.op, &w.params, &ty)?;
        let kernels = lower_graph(&graph, StageStorage::ScratchRows)?.kernels;
        for (i, kernel) in kernels.iter().enumerate() {
            let mut compile = Vec::new();
            let mut compiled = None;
            for _ in 0..5 {
                let t = Instant::now();
                let k = cpu::compile(kernel, &options)?;
                compile.push(t.elapsed().as_secs_f64() * 1e3);
                compiled = Some(k);
            }
            let Some(k) = compiled else { continue };
            let before = disk.counts().writes;
            let t = Instant::now();
            disk.store(&k, &options, false, false);
            let write_ms = t.elapsed().as_secs_f64() * 1e3;
            if disk.counts().writes == before {
                println!("{:<22} {:>6} not cacheable (see the warning)", w.name, i);
                continue;
            }
            parts_of.push((w.name.clone(), i, kernel.clone()));
            let mut load = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                let loaded = disk.load(kernel, &options, false);
                load.push(t.elapsed().as_secs_f64() * 1e6);
                let same = loaded.is_some_and(|l| {
                    image_of_parts(&[("base", &l)]) == image_of_parts(&[("base", &k)])
                });
                if !same {
                    return Err(CliError::Usage(format!(
                        "{}: kernel {i} did not load back as compiled",
                        w.name
                    )));
                }
            }
            let (c, l) = (median(compile), median(load));
            println!(
                "{:<22} {:>6} {:>11.2} {:>9.3} {:>7.1}% {:>9.1} {:>7.0}x",
                w.name,
                i,
                c,
                write_ms,
                write_ms / c * 100.0,
                l,
                c * 1e3 / l
            );
        }
    }
    println!();
    println!(
        "{:<22} {:>6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8}   (µs, median of 20)",
        "load parts", "kernel", "key", "read", "decode", "mtime", "exec", "rebuild", "load"
    );
    for (name, i, kernel) in &parts_of {
        let p = parts(&disk, kernel, &options)?;
        println!(
            "{:<22} {:>6} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>8.1}",
            name, i, p[0], p[1], p[2], p[3], p[4], p[5], p[6]
        );
    }
    drop(disk);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ExitCode::SUCCESS)
}

/// The parts of loading `kernel`'s entry from `disk` (see the module docs), each the
/// median of 20 timings in µs: key, read, decode, mtime, exec, rebuild, whole load.
fn parts(
    disk: &DiskCache,
    kernel: &kiln::codegen::Kernel,
    options: &CompileOptions,
) -> Result<[f64; 7], CliError> {
    // The spec this process writes its entries under (the first lookup spec).
    let host = disk.lookup_specs()[0].clone();
    let err = |e: CacheError| CliError::Usage(format!("cache: {e}"));
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    let mut v: [Vec<f64>; 7] = Default::default();
    for _ in 0..20 {
        let t = Instant::now();
        let key = kernel_key(kernel, options, false, &host);
        v[0].push(us(t));
        let path = disk.dir().entry_path(&key);
        let t = Instant::now();
        let bytes = std::fs::read(&path).map_err(|e| CliError::Usage(format!("{e}")))?;
        v[1].push(us(t));
        let t = Instant::now();
        let entry = Entry::decode(&bytes).map_err(err)?;
        v[2].push(us(t));
        let t = Instant::now();
        let touched =
            std::fs::File::open(&path).and_then(|f| f.set_modified(std::time::SystemTime::now()));
        v[3].push(us(t));
        touched.map_err(|e| CliError::Usage(format!("{e}")))?;
        let t = Instant::now();
        let mem = ExecMem::load(&entry.payload).map_err(err)?;
        v[4].push(us(t));
        drop(mem);
        let t = Instant::now();
        let k = kernel_from_entry(&entry, kernel, options).map_err(err)?;
        v[5].push(us(t));
        drop(k);
        let t = Instant::now();
        let k = disk.load(kernel, options, false);
        v[6].push(us(t));
        if k.is_none() {
            return Err(CliError::Usage("an entry did not load".into()));
        }
    }
    // `kernel_from_entry` includes the copy into executable memory: report the rest.
    let exec = median(v[4].clone());
    let mut out = [0.0; 7];
    for (o, x) in out.iter_mut().zip(v) {
        *o = median(x);
    }
    out[5] = (out[5] - exec).max(0.0);
    Ok(out)
}
