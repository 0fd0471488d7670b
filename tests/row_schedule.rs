//! The CPU row schedule (`codegen/src/cpu/schedule.rs`), as `kiln dump` prints it, must be
//! the schedule the compiled kernel runs: for every kernel of the bench workloads, under
//! the first compile's options, the background compile's step budget and with column
//! sharing or edge vectors turned off, the schedule's shared stages, edge-vector stages and
//! split-off border functions must be those the compiled kernel reports.

use kiln::codegen::cpu::{compile, row_schedules, CpuBody};
use kiln::codegen::lower::lower;
use kiln::codegen::CompileOptions;
use kiln::ir::passes::{fuse, optimize};
use kiln::ir::TensorType;

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| l.contains(what)).count()
}

#[test]
fn row_schedule_matches_the_compiled_kernel() {
    let variants = [
        CompileOptions::default(),
        CompileOptions {
            step_code_budget: Some(3000),
            no_dual_stages: true,
            ..Default::default()
        },
        CompileOptions {
            no_column_sharing: true,
            ..Default::default()
        },
        CompileOptions {
            no_edge_vectors: true,
            ..Default::default()
        },
    ];
    let mut stencils = 0;
    for w in kiln::bench::workloads() {
        // Programs (fill_holes, distances, sinkhorn) have no kernels up front.
        if w.is_program() {
            continue;
        }
        let ty = TensorType {
            dtype: w.dtype,
            shape: w.shape.clone(),
        };
        let graph = match kiln::ops::build_op(&w.op, &w.params, &ty) {
            Ok(g) => g,
            // A guarded workload waits for its operator to accept it (bench "skipped" row).
            Err(e) if w.guard.is_some() => {
                println!("SKIP {}: {e}", w.name);
                continue;
            }
            Err(e) => panic!("bench op builds: {}: {e}", w.name),
        };
        let optimized = optimize(&graph);
        for group in &fuse(&optimized).groups {
            let kernel = lower(&optimized, group).expect("bench kernel lowers");
            for options in &variants {
                let cpu = compile(&kernel, options).expect("bench kernel compiles");
                let lines = row_schedules(&kernel, options).expect("schedule plans");
                let CpuBody::Stencil(stages) = &cpu.body else {
                    assert!(lines.is_empty(), "{}: schedule of a non-stencil", w.name);
                    continue;
                };
                stencils += 1;
                let what = format!("{} {options:?}", w.name);
                assert_eq!(lines.len(), stages.len(), "{what}: one line per stage");
                assert_eq!(
                    count(&lines, "shared by lane shifts"),
                    cpu.shared_column_stages,
                    "{what}: shared stages\n{}",
                    lines.join("\n")
                );
                assert_eq!(
                    lines.len() - count(&lines, "left edge: scalar"),
                    cpu.edge_vector_stages,
                    "{what}: edge-vector stages\n{}",
                    lines.join("\n")
                );
                assert_eq!(
                    count(&lines, "border: split-off function"),
                    count(
                        &cpu.describe().lines().map(String::from).collect::<Vec<_>>(),
                        "border columns in a separate"
                    ),
                    "{what}: split-off border functions\n{}",
                    lines.join("\n")
                );
                if options.no_column_sharing {
                    assert_eq!(count(&lines, "shared by lane shifts"), 0, "{what}");
                }
                if options.no_edge_vectors {
                    assert_eq!(count(&lines, "right edge"), 0, "{what}");
                }
            }
        }
    }
    // Every bench workload is a stencil kernel today; the check must have run.
    assert!(
        stencils >= 4 * 10,
        "only {stencils} stencil kernels checked"
    );
}
