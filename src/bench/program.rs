//! Timing of program workloads (`kiln_ops::Program`: fill_holes, propagation, the distance
//! transforms, signed_distance, sinkhorn): several inputs, several outputs, native passes.
//!
//! Scope: the same method as a graph workload (docs/BENCHMARKS.md) where it applies: the
//! program is built once ([`kiln_ops::build_plan`]), run on a fresh engine of `threads`
//! workers with `Exec::Fused`, inside the engine's thread pool (so a program's own rayon
//! loops, e.g. Sinkhorn's tiles, use exactly `threads` threads too); the first call (which
//! compiles the program's graphs, if any) is reported as `first_call_ms`, the first three
//! calls measure peak memory and warm up, then calls repeat until `--min-time`: median and
//! IQR. Programs have no `run_into`, so `time_reused` stays empty; the copy floor copies
//! the bytes of all inputs into a buffer of the bytes of all outputs.
//!
//! Exactness: timing only; each output's checksum is reported so `compare.py` can check it
//! against the dumped outputs and the peers'.
//!
//! Limits: compile time is not separated from the first call (a program compiles lazily).

use std::time::Instant;

use kiln_ops::{build_plan, Exec, OpPlan};
use kiln_runtime::Tensor;

use super::{
    checksum, copy_floor, engine_for, failed, inputs, measure_peak, skip_reason, time_it,
    BenchOptions, BenchRow, Status, Workload,
};

/// Runs one program workload at one thread count (see the module header). Errors become rows.
pub fn run_program(w: &Workload, threads: usize, opts: &BenchOptions) -> (BenchRow, Vec<Tensor>) {
    let specs = w.inputs();
    let types: Vec<_> = specs
        .iter()
        .map(|i| kiln_ir::TensorType {
            dtype: i.dtype,
            shape: i.shape.clone(),
        })
        .collect();
    let plan = match build_plan(&w.op, &w.params, &types) {
        Ok(p) => p,
        Err(e) => return (BenchRow::empty(w, threads, skip_reason(w, e)), Vec::new()),
    };
    let mut row = BenchRow::empty(w, threads, Status::Ok);
    let mut xs = Vec::with_capacity(specs.len());
    for s in &specs {
        match inputs::make(s) {
            Ok(t) => xs.push(t),
            Err(e) => return failed(row, e),
        }
    }
    row.input_checksums = xs.iter().map(checksum).collect();
    row.input_checksum = row.input_checksums[0];
    row.in_bytes = xs.iter().map(|t| t.numel() * t.dtype().size_bytes()).sum();
    let engine = engine_for(threads, opts);
    let run = |plan: &OpPlan| engine.install(|| plan.run(Exec::Fused(&engine), &xs));

    let t = Instant::now();
    let first = run(&plan);
    row.first_call_ms = Some(t.elapsed().as_secs_f64() * 1e3);
    match first {
        Ok(outputs) => drop(outputs),
        Err(e) => return failed(row, e),
    }
    // Peak memory over the first three runs after the compiling one (as for graphs).
    if let Err(e) = measure_peak(&mut row, || run(&plan)) {
        return failed(row, e);
    }
    let mut last = Vec::new();
    match time_it(opts, || {
        last = run(&plan)?;
        Ok::<(), kiln_ops::RunError>(())
    }) {
        Ok(s) => row.time = s,
        Err(e) => return failed(row, e),
    }
    row.output_checksums = last.iter().map(checksum).collect();
    row.output_checksum = row.output_checksums.first().copied().unwrap_or(0);
    let (fresh, warm) = copy_floor(row.in_bytes, row.out_bytes, threads, opts);
    row.floor = fresh;
    row.floor_warm = warm;
    (row, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{family_workloads, row_json};

    fn quick() -> BenchOptions {
        BenchOptions {
            min_time: 0.0,
            min_reps: 2,
            max_reps: 2,
            ..BenchOptions::default()
        }
    }

    /// Each family workload at a small size: timed, and its outputs equal the eager run's.
    #[test]
    fn family_programs_run_small_and_match_eager() {
        for w in family_workloads() {
            let small = match w.scale {
                crate::bench::Scale::Volume => w.with_side(12),
                crate::bench::Scale::Grid => w.with_side(4),
                _ => w.with_side(48),
            };
            let (row, out) = crate::bench::run_workload(&small, 2, &quick());
            if let Status::Skipped(why) = &row.status {
                assert!(small.guard.is_some(), "{}: skipped: {why}", w.name);
                println!("SKIP {}: {why}", w.name);
                continue;
            }
            assert_eq!(row.status, Status::Ok, "{}", w.name);
            assert_eq!(row.time.reps, 2, "{}", w.name);
            assert!(!out.is_empty(), "{}", w.name);
            let xs: Vec<Tensor> = small
                .inputs()
                .iter()
                .map(|i| inputs::make(i).unwrap())
                .collect();
            let types: Vec<_> = xs
                .iter()
                .map(|t| kiln_ir::TensorType {
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                })
                .collect();
            let want = match build_plan(&small.op, &small.params, &types) {
                Ok(plan) => plan.run(Exec::Eager, &xs).unwrap(),
                Err(e) => panic!("{}: {e}", w.name),
            };
            assert_eq!(want.len(), out.len(), "{}", w.name);
            let sums: Vec<u64> = want.iter().map(checksum).collect();
            assert_eq!(row.output_checksums, sums, "{}: fused == eager", w.name);
            assert_eq!(row.input_checksums.len(), xs.len());
            let j = row_json(&row).to_string();
            assert!(
                j.contains("\"program\": true") || !small.is_program(),
                "{j}"
            );
        }
    }
}
