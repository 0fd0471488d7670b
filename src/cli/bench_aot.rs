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

use std::process::ExitCode;
use std::time::Instant;

use kiln::bench::Workload;
use kiln::codegen::{cpu, CompileOptions};
use kiln::ir::passes::StageStorage;
use kiln::ir::TensorType;
use kiln::runtime::aot::kernels::image_of_parts;
use kiln::runtime::aot::DiskCache;
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
    drop(disk);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ExitCode::SUCCESS)
}
