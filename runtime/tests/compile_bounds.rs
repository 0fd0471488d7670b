//! Bounded compile work over the extreme parameter space of the window operators (issue 27:
//! every kernel of every operator compiles in bounded time whatever its parameters).
//!
//! The test checks structure, not wall time (timing assertions are flaky on a shared
//! machine): over window extents 1..10001 on either axis and both, far origins, discs, rings
//! and sparse structures, every border mode, and images of 1x1 and 4096², every kernel has
//! at most [`MAX_STAGES`] stages, every stage at most [`STAGE_BOUND`] instructions, and a
//! graph at most [`BASE_KERNELS`] kernels plus [`KERNELS_PER_RUN`] per run of its footprint
//! (its description, not its area: a footprint's reads are cut into chunks). The one-off timing is
//! `compile_times_of_the_worst_kernels` (ignored: `cargo test -p kiln-runtime --test
//! compile_bounds -- --ignored --nocapture`), which prints the slowest first compiles.

use kiln_codegen::kernel::{Kernel, KernelBody};
use kiln_ir::passes::footprint::{best_cut, CHUNK_READS};
use kiln_ir::passes::{StageStorage, WindowBounds};
use kiln_ir::{DType, Graph, NodeKind, TensorType};
use kiln_runtime::executor::lower_graph_with;

/// Most stages a kernel may have.
const MAX_STAGES: usize = 32;

/// Most instructions of a stage that is not a footprint's final stage.
const STAGE_BOUND: usize = 300;

/// Most kernels per run of a footprint (chunks of `CHUNK_READS` reads, at most four reads
/// per run, each a kernel and an identity line), beyond [`BASE_KERNELS`].
const KERNELS_PER_RUN: f64 = 8.0 / CHUNK_READS as f64;

/// Kernels any graph of the space may have besides its footprint's chunks.
const BASE_KERNELS: usize = 24;

fn build(op: &str, params: &[(&str, String)], dtype: DType, shape: &[usize]) -> Graph {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let ty = TensorType {
        dtype,
        shape: shape.to_vec(),
    };
    kiln_ops::registry::build_op(op, &params, &ty).unwrap_or_else(|e| panic!("{op} {shape:?}: {e}"))
}

fn mask_text(f: impl Fn(i64, i64) -> bool, r: i64, c: i64) -> String {
    (-r..=r)
        .map(|y| {
            (-c..=c)
                .map(|x| if f(y, x) { "1" } else { "0" })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// One case: `(name, op, params, dtype)`.
type Case = (String, &'static str, Vec<(&'static str, String)>, DType);

/// Every case of the extreme parameter space.
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let modes = ["reflect", "mirror", "nearest", "wrap", "constant"];
    let extents = [1usize, 2, 3, 15, 63, 64, 65, 130, 255, 3001, 10001];
    for &k in &extents {
        let mut sizes = vec![format!("{k},1"), format!("1,{k}")];
        if k * k <= 1 << 16 {
            sizes.push(format!("{k},{k}"));
        }
        for size in sizes {
            for mode in modes {
                for op in ["grey_erosion", "grey_opening"] {
                    let params = vec![("size", size.clone()), ("mode", mode.to_string())];
                    out.push((format!("{op} size={size} {mode}"), op, params, DType::F32));
                }
            }
        }
    }
    for (size, origin) in [
        ("1,3001", "0,1400"),
        ("3001,1", "-1500,0"),
        ("255,255", "100,-127"),
    ] {
        for mode in modes {
            let params = vec![
                ("size", size.to_string()),
                ("origin", origin.to_string()),
                ("mode", mode.to_string()),
            ];
            let name = format!("grey_erosion size={size} origin={origin} {mode}");
            out.push((name, "grey_erosion", params, DType::F32));
        }
    }
    let masks = [
        (
            "disc 125",
            mask_text(|y, x| x * x + y * y <= 125 * 125, 125, 125),
        ),
        (
            "ring 120/4",
            mask_text(
                |y, x| (116 * 116..=120 * 120).contains(&(x * x + y * y)),
                120,
                120,
            ),
        ),
        (
            "sparse 3x301",
            mask_text(|y, x| y == 0 || x % 9 == 0, 1, 150),
        ),
        ("disc 20", mask_text(|y, x| x * x + y * y <= 400, 20, 20)),
        ("checker 255", mask_text(|y, x| (x + y) % 2 == 0, 127, 127)),
    ];
    for (name, text) in &masks {
        for mode in modes {
            let params = vec![("footprint", text.clone()), ("mode", mode.to_string())];
            out.push((
                format!("grey_erosion {name} {mode}"),
                "grey_erosion",
                params,
                DType::F32,
            ));
        }
        let params = vec![("structure", text.clone())];
        out.push((
            format!("binary_erosion {name}"),
            "binary_erosion",
            params,
            DType::Bool,
        ));
    }
    out
}

/// The most runs of any window footprint of `g` (0 without windows).
fn max_runs(g: &Graph) -> usize {
    g.nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::WindowReduce { footprint, .. } => Some(best_cut(footprint).1.len()),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The kernels of every case on every shape, for `storage`, with the case's name and runs.
fn kernels(storage: StageStorage) -> Vec<(String, usize, Kernel)> {
    let mut out = Vec::new();
    for shape in [[1usize, 1, 1, 1], [1, 1, 4096, 4096]] {
        for (name, op, params, dtype) in cases() {
            let g = build(op, &params, dtype, &shape);
            let runs = max_runs(&g);
            let what = format!("{name} on {}x{}", shape[2], shape[3]);
            let lowered = lower_graph_with(&g, storage, WindowBounds::default())
                .unwrap_or_else(|e| panic!("{what} ({storage:?}): {e}"));
            let n = lowered.kernels.len();
            let bound = BASE_KERNELS + (KERNELS_PER_RUN * runs as f64).ceil() as usize;
            assert!(
                n <= bound,
                "{what} ({storage:?}): {n} kernels (bound {bound})"
            );
            for k in lowered.kernels {
                out.push((what.clone(), runs, k));
            }
        }
    }
    out
}

#[test]
fn every_kernel_has_bounded_stages() {
    for storage in [StageStorage::ScratchRows, StageStorage::DevicePasses] {
        let ks = kernels(storage);
        let (mut most_stages, mut largest) = (0, 0);
        for (what, _, k) in &ks {
            let KernelBody::Stencil { stages } = &k.body else {
                continue;
            };
            assert!(
                stages.len() <= MAX_STAGES,
                "{what} ({storage:?}): {} stages",
                stages.len()
            );
            most_stages = most_stages.max(stages.len());
            for (j, s) in stages.iter().enumerate() {
                assert!(
                    s.insts.len() <= STAGE_BOUND,
                    "{what} ({storage:?}): stage {j} has {} instructions",
                    s.insts.len()
                );
                largest = largest.max(s.insts.len());
            }
        }
        println!(
            "{storage:?}: {} kernels, at most {most_stages} stages, largest stage {largest}",
            ks.len()
        );
    }
}

/// One-off timing of the first compile of every kernel (dev profile; noisy on a shared
/// machine): prints the slowest.
#[test]
#[ignore]
fn compile_times_of_the_worst_kernels() {
    let opts = kiln_codegen::CompileOptions::default();
    let mut times: Vec<(f64, String, usize, usize)> = Vec::new();
    let only = std::env::var("KILN_COMPILE_ONLY").unwrap_or_default();
    for (what, _, k) in kernels(StageStorage::ScratchRows) {
        if !what.contains(only.as_str()) {
            continue;
        }
        let (stages, insts) = match &k.body {
            KernelBody::Stencil { stages } => {
                (stages.len(), stages.iter().map(|s| s.insts.len()).sum())
            }
            _ => (1, 0),
        };
        // The fastest of three (the machine is shared).
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            kiln_codegen::cpu::compile(&k, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
        }
        times.push((best, what, stages, insts));
    }
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (ms, what, stages, insts) in times.iter().take(25) {
        println!("{ms:8.2} ms  {stages:3} stages {insts:6} insts  {what}");
    }
    println!("{} kernels compiled", times.len());
}
