//! `kiln bench`: in-process timing of the fused kernels on the performance workloads, with
//! compile time, peak memory and the memory-copy floor. See docs/BENCHMARKS.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kiln::bench::json::Json;
use kiln::bench::{self, BenchOptions, BenchRow, Status, Workload};
use kiln::runtime::npy::write_npy;

use super::CliError;

/// Arguments of `kiln bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Write the results as JSON to this file (`-` for stdout, which silences the table).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Thread counts to run each workload with.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Workloads to run, by name (e.g. `median3_2048`) or operator (e.g. `median_blur`);
    /// all when absent. `--list` shows them.
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Repeat each timed call until at least this many seconds have passed.
    #[arg(long, default_value_t = 0.5)]
    min_time: f64,
    /// Time each selected workload at these image sides instead (`H = W = side`).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Override an operator parameter of the selected workloads, `name=value` (repeatable),
    /// e.g. `--ops erosion15_2048 --param size=15,1` (experiments beyond the fixed table).
    #[arg(long = "param")]
    params: Vec<String>,
    /// Write each workload's output (from the first thread count) to DIR/NAME.npy.
    #[arg(long)]
    dump_outputs: Option<PathBuf>,
    /// List the workloads and exit.
    #[arg(long)]
    list: bool,
    /// Turn off the CPU backend's work sharing between neighbouring columns (A/B runs).
    #[arg(long)]
    no_column_sharing: bool,
    /// A/B in this process: time each workload with and without the work sharing between
    /// neighbouring columns, alternating, and print the two medians and their ratio.
    #[arg(long, conflicts_with_all = ["no_column_sharing", "json"])]
    ab_column_sharing: bool,
    /// Optimise without the `double_windows` pass (k-row min/max windows as chains of
    /// two-read windows), for A/B runs.
    #[arg(long)]
    no_window_doubling: bool,
    /// A/B in this process: time each workload with and without the `double_windows` pass,
    /// alternating, and print the two medians and their ratio.
    #[arg(long, conflicts_with_all = ["no_window_doubling", "ab_column_sharing", "json"])]
    ab_window_doubling: bool,
    /// Turn off the CPU backend's edge vectors (the first and last columns of a row as
    /// vectors), for A/B runs.
    #[arg(long)]
    no_edge_vectors: bool,
    /// A/B in this process: time each workload with and without edge vectors, alternating,
    /// and print the two medians and their ratio.
    #[arg(long, conflicts_with_all = ["no_edge_vectors", "ab_column_sharing", "ab_window_doubling", "json"])]
    ab_edge_vectors: bool,
    /// Turn off the carrying of shared values between steps of the CPU backend's shared
    /// vector loop, for A/B runs.
    #[arg(long)]
    no_carried_values: bool,
    /// A/B in this process: time each workload with and without values carried between
    /// steps of the shared vector loop, alternating, and print the two medians and their
    /// ratio.
    #[arg(long, conflicts_with_all = ["no_carried_values", "ab_column_sharing", "ab_window_doubling", "ab_edge_vectors", "json"])]
    ab_carried_values: bool,
    /// Turn off the specialisation for clean inputs with clear sign bits (integer picks),
    /// for A/B runs.
    #[arg(long)]
    no_integer_picks: bool,
    /// A/B in this process: time each workload with and without the specialisation for
    /// clean inputs with clear sign bits, alternating, and print the two medians and their
    /// ratio.
    #[arg(long, conflicts_with_all = ["no_integer_picks", "ab_carried_values", "ab_column_sharing", "ab_window_doubling", "ab_edge_vectors", "json"])]
    ab_integer_picks: bool,
    /// Compile without tiering (no background compile with bigger steps or the clean-input
    /// specialisation), for A/B runs.
    #[arg(long)]
    no_tiering: bool,
    /// A/B in this process: time each workload with and without tiered compilation
    /// (bigger vector steps, the clean-input specialisation and its input check),
    /// alternating, and print the two medians and their ratio.
    #[arg(long, conflicts_with_all = ["no_tiering", "ab_column_sharing", "ab_window_doubling", "ab_edge_vectors", "json"])]
    ab_tiering: bool,
    /// Time loading each workload's kernels from the on-disk cache (verification included)
    /// against compiling them, and the cost of writing their entries (see `bench_aot.rs`).
    #[arg(long, conflicts_with_all = ["json", "ab_tiering", "ab_column_sharing", "ab_window_doubling", "ab_edge_vectors"])]
    aot_load: bool,
    /// Scratch bytes per chunk of a multi-stage block (default: the engine's
    /// `SCRATCH_BUDGET`), for experiments on the chunk size.
    #[arg(long)]
    scratch_budget: Option<usize>,
}

/// The workloads selected by `--ops` and `--sizes`.
fn select(a: &BenchArgs) -> Result<Vec<Workload>, CliError> {
    let all = bench::workloads();
    for o in &a.ops {
        if !all.iter().any(|w| &w.name == o || &w.op == o) {
            let names: Vec<_> = all.iter().map(|w| w.name.as_str()).collect();
            return Err(CliError::Usage(format!(
                "unknown workload '{o}' (known: {})",
                names.join(", ")
            )));
        }
    }
    let chosen: Vec<Workload> = all
        .into_iter()
        .filter(|w| a.ops.is_empty() || a.ops.iter().any(|o| o == &w.name || o == &w.op))
        .collect();
    let params = super::parse_params(&a.params)?;
    let chosen: Vec<Workload> = if params.is_empty() {
        chosen
    } else {
        chosen.iter().map(|w| w.with_params(&params)).collect()
    };
    if a.sizes.is_empty() {
        return Ok(chosen);
    }
    if let Some(&s) = a.sizes.iter().find(|&&s| s == 0 || s > 65_536) {
        return Err(CliError::Usage(format!(
            "--sizes: side {s} is not in 1..=65536"
        )));
    }
    Ok(chosen
        .iter()
        .flat_map(|w| a.sizes.iter().map(move |&s| w.with_side(s)))
        .collect())
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// One table line for a row.
fn line(r: &BenchRow) -> String {
    let w = &r.workload;
    let shape = w
        .shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x");
    let head = format!("{:<22} {:<15} {:>3}", w.name, shape, r.threads);
    match &r.status {
        Status::Skipped(m) => format!("{head}  skipped: {m}"),
        Status::Error(m) => format!("{head}  ERROR: {m}"),
        Status::Ok => {
            let peak = r
                .peak_extra_bytes
                .map_or("?".to_string(), |b| format!("{:.1}", mib(b as usize)));
            format!(
                "{head} {:>9.3} {:>8.3} {:>5} {:>9.3} {:>9.3} {:>6.2}x {:>9.3} {:>7.2}x {:>11} {:>7} {:>8.1} {:>8}",
                r.time.median,
                r.time.iqr(),
                r.time.reps,
                r.floor.median,
                r.floor_warm.median,
                r.floor_ratio(),
                r.time_reused.median,
                r.time_reused.median / r.floor_warm.median,
                match (r.first_call_ms, r.upgrade_compile_ms) {
                    (Some(first), _) => format!("1st {first:.1}"),
                    (None, Some(up)) => format!("{:.2}+{up:.1}", r.compile_ms),
                    (None, None) => format!("{:.2}", r.compile_ms),
                },
                r.kernels,
                mib(r.in_bytes + r.out_bytes),
                peak
            )
        }
    }
}

/// Runs `kiln bench`.
pub fn run(a: BenchArgs) -> Result<ExitCode, CliError> {
    if !(a.min_time.is_finite() && a.min_time >= 0.0) {
        return Err(CliError::Usage(
            "--min-time must be a non-negative number of seconds".into(),
        ));
    }
    if a.threads.is_empty() || a.threads.iter().any(|&t| t == 0 || t > 1024) {
        return Err(CliError::Usage(
            "--threads: each count must be in 1..=1024".into(),
        ));
    }
    let workloads = select(&a)?;
    if a.list {
        for w in &workloads {
            let inputs: Vec<String> = w
                .inputs()
                .iter()
                .map(|i| format!("{:?}{:?}:{}", i.dtype, i.shape, i.gen.name()))
                .collect();
            println!(
                "{:<26} {} {} {}",
                w.name,
                w.op,
                w.params_text(),
                inputs.join(" ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &a.dump_outputs {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::Usage(format!("--dump-outputs {}: {e}", dir.display())))?;
    }
    let opts = BenchOptions {
        min_time: a.min_time,
        compile: kiln_codegen::CompileOptions {
            no_column_sharing: a.no_column_sharing,
            no_edge_vectors: a.no_edge_vectors,
            no_carried_values: a.no_carried_values,
            no_integer_picks: a.no_integer_picks,
            ..Default::default()
        },
        window_doubling: !a.no_window_doubling,
        scratch_budget: a.scratch_budget,
        tiering: !a.no_tiering,
        ..BenchOptions::default()
    };
    // Same-process A/Bs of one compiler feature: the same options with it turned off.
    type Off = fn(&mut kiln_codegen::CompileOptions);
    let compile_abs: [(bool, Off, [&str; 2]); 4] = [
        (
            a.ab_column_sharing,
            |c| c.no_column_sharing = true,
            ["shared", "unshared"],
        ),
        (
            a.ab_edge_vectors,
            |c| c.no_edge_vectors = true,
            ["edges", "scalar"],
        ),
        (
            a.ab_integer_picks,
            |c| c.no_integer_picks = true,
            ["int", "float"],
        ),
        (
            a.ab_carried_values,
            |c| c.no_carried_values = true,
            ["carried", "recomputed"],
        ),
    ];
    for (asked, turn_off, names) in compile_abs {
        if asked {
            let mut compile = opts.compile.clone();
            turn_off(&mut compile);
            let off = BenchOptions {
                compile,
                ..opts.clone()
            };
            return ab(&workloads, &a.threads, &opts, &off, names);
        }
    }
    if a.ab_window_doubling {
        let off = BenchOptions {
            window_doubling: false,
            ..opts.clone()
        };
        return ab(&workloads, &a.threads, &opts, &off, ["doubled", "whole"]);
    }
    if a.aot_load {
        return super::bench_aot::run(&workloads);
    }
    if a.ab_tiering {
        let off = BenchOptions {
            tiering: false,
            ..opts.clone()
        };
        return ab(&workloads, &a.threads, &opts, &off, ["tiered", "first"]);
    }
    let quiet = a.json.as_deref() == Some(std::path::Path::new("-"));
    if !quiet {
        println!(
            "{:<22} {:<15} {:>3} {:>9} {:>8} {:>5} {:>9} {:>9} {:>7} {:>9} {:>8} {:>11} {:>7} {:>8} {:>8}",
            "workload",
            "shape",
            "thr",
            "median ms",
            "iqr ms",
            "reps",
            "floor ms",
            "floor*ms",
            "/floor",
            "kiln* ms",
            "/floor*",
            "compile",
            "kernels",
            "in+out M",
            "peak+ M"
        );
    }
    let mut rows = Vec::new();
    let mut failed = false;
    for w in &workloads {
        for (ti, &t) in a.threads.iter().enumerate() {
            let (row, outputs) = bench::run_workload(w, t, &opts);
            failed |= matches!(row.status, Status::Error(_));
            if !quiet {
                println!("{}", line(&row));
            }
            if let (Some(dir), 0) = (&a.dump_outputs, ti) {
                let suffix = if a.sizes.is_empty() {
                    String::new()
                } else {
                    format!("_{}", w.shape.last().copied().unwrap_or(0))
                };
                // The first output is NAME.npy, further ones (programs) NAME.outK.npy.
                for (k, out) in outputs.iter().enumerate() {
                    let tag = if k == 0 {
                        String::new()
                    } else {
                        format!(".out{k}")
                    };
                    let path = dir.join(format!("{}{suffix}{tag}.npy", w.name));
                    write_npy(&path, out)?;
                    // Flushed to disk now: the kernel's writeback would otherwise run during
                    // the next compile (measured: opening 15x15's parallel compile took
                    // 6.0-6.2 ms right after a dump, 4.3-4.6 ms without one).
                    std::fs::File::open(&path)
                        .and_then(|f| f.sync_all())
                        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
                }
            }
            rows.push(row);
        }
    }
    if !quiet {
        println!(
            "median/iqr: fused run (fresh output each call); floor: parallel copy of the input \
             bytes into a fresh output-sized buffer (floor*: into a reused one), same threads; \
             /floor = median / floor; kiln*: fused run into the previous call's outputs \
             (run_into), /floor* = kiln* / floor*; compile: ms until the kernels run, median of 5 \
             compiles with fresh engines (+ ms of the background compile, for tiered kernels: \
             bigger vector steps and the clean-input specialisations, in Cranelift, median; programs: \
             `1st` = the first call, which compiles their graphs); peak+: peak RSS \
             above the level before the first run (MiB)"
        );
    }
    if let Some(path) = &a.json {
        let doc = Json::obj([
            ("metadata", bench::metadata_json(&a.threads, &opts)),
            (
                "results",
                Json::Arr(rows.iter().map(bench::row_json).collect()),
            ),
        ]);
        if quiet {
            println!("{doc}");
        } else {
            kiln::runtime::atomic_file::write_atomic(path, format!("{doc}\n").as_bytes())
                .map_err(|e| CliError::Usage(format!("--json {}: {e}", path.display())))?;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--ab-column-sharing`, `--ab-window-doubling`: each workload and thread count timed with
/// the feature on, then off, then on and off again (the better of each pair of runs is
/// kept, which evens out a slow phase of the machine), in this process. `names` label the
/// two columns.
fn ab(
    workloads: &[Workload],
    threads: &[usize],
    on: &BenchOptions,
    off: &BenchOptions,
    names: [&str; 2],
) -> Result<ExitCode, CliError> {
    let [a, b] = names;
    println!(
        "{:<22} {:>3} {:>12} {:>12} {:>9}",
        "workload",
        "thr",
        format!("{a} ms"),
        format!("{b} ms"),
        "off/on"
    );
    let mut failed = false;
    for w in workloads {
        for &t in threads {
            let mut best = [f64::INFINITY; 2];
            for _ in 0..2 {
                for (k, o) in [on, off].into_iter().enumerate() {
                    let (row, _) = bench::run_workload(w, t, o);
                    if let Status::Error(e) = &row.status {
                        eprintln!("{}: {e}", w.name);
                        failed = true;
                    }
                    best[k] = best[k].min(row.time.median);
                }
            }
            println!(
                "{:<22} {:>3} {:>12.3} {:>12.3} {:>8.2}x",
                w.name,
                t,
                best[0],
                best[1],
                best[1] / best[0]
            );
        }
    }
    println!(
        "median ms of the fused run (the lower of two runs each, alternating {a}/{b}); \
         off/on = {b} / {a}"
    );
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        a: BenchArgs,
    }

    fn args(v: &[&str]) -> BenchArgs {
        Wrap::try_parse_from(std::iter::once("bench").chain(v.iter().copied()))
            .unwrap()
            .a
    }

    #[test]
    fn selects_by_name_or_operator_and_resizes() {
        let w = select(&args(&["--ops", "median_blur"])).unwrap();
        assert_eq!(w.len(), 4);
        assert!(w.iter().all(|w| w.op == "median_blur"));
        let w = select(&args(&["--ops", "opening3_2048", "--sizes", "256,512"])).unwrap();
        let shapes: Vec<_> = w.iter().map(|w| w.shape.clone()).collect();
        assert_eq!(shapes, vec![vec![1, 1, 256, 256], vec![1, 1, 512, 512]]);
        assert_eq!(select(&args(&[])).unwrap().len(), bench::workloads().len());
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        assert!(matches!(
            select(&args(&["--ops", "nope"])),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            select(&args(&["--sizes", "0"])),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            run(args(&["--threads", "0"])),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            run(args(&["--min-time", "nan"])),
            Err(CliError::Usage(_))
        ));
    }
}
