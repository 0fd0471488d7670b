//! PTX coverage: every kernel the engine produces for every registered operator (across its
//! parameter space) and 300 distinct kernels from the fuzzer's generator are rendered as PTX
//! and assembled with ptxas for sm_80 and sm_90: exit 0 and nothing on stderr.
//!
//! Kernels come from the PTX pipeline (`optimize_for(DevicePasses) → fuse → lower`: the
//! passes of `Engine::compile` without window doubling and without the Cranelift step,
//! checked against `Engine::compile` on a sample). Identical PTX texts are assembled once; ptxas runs in parallel.
//! Without ptxas the test fails when `CI` or `KILN_PTXAS` is set and prints a visible
//! `SKIP: ...` line (past the harness's output capture) elsewhere.
//! `KILN_PTX_TIMES=1` prints the ptxas time of every module (to keep the test fast).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use kiln::codegen::kernel::Kernel;
use kiln::codegen::lower::lower;
use kiln::codegen::ptx::{self, ptxas, PtxTarget};
use kiln::codegen::CompileOptions;
use kiln::ir::passes::{fuse, optimize_for, Partition, StageStorage};
use kiln::ir::{DType, Graph, TensorType};
use kiln::Engine;
use rayon::prelude::*;

/// The PTX pass pipeline up to the partition (as in `CudaGraph::compile`).
fn plan(graph: &Graph) -> (Graph, Partition) {
    let optimized = optimize_for(graph, StageStorage::DevicePasses);
    let partition = fuse(&optimized);
    (optimized, partition)
}

/// Every kernel of `graph`, lowered from its fused groups.
fn kernels_of(graph: &Graph) -> Result<Vec<Kernel>, String> {
    let (optimized, partition) = plan(graph);
    partition
        .groups
        .iter()
        .map(|g| lower(&optimized, g).map_err(|e| e.to_string()))
        .collect()
}

/// Distinct kernels with a name for messages (the first graph that produced each).
#[derive(Default)]
struct Collected {
    kernels: BTreeMap<String, (String, Kernel)>,
}

impl Collected {
    /// Adds `k` under `name`; returns true when it was new (by its sm_80 PTX text).
    fn add(&mut self, name: &str, k: Kernel) -> bool {
        let m = ptx::render(&k, &PtxTarget::sm80(), &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{name}: render failed: {e}\n{k:?}"));
        if self.kernels.contains_key(&m.text) {
            return false;
        }
        self.kernels.insert(m.text, (name.to_string(), k));
        true
    }
}

/// Operator parameters as `build_op` takes them.
type Params = Vec<(String, String)>;

fn p(pairs: &[(&str, &str)]) -> Params {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn shape_for(spatial: usize) -> Vec<usize> {
    match spatial {
        1 => vec![1, 2, 11],
        2 => vec![2, 1, 9, 10],
        _ => vec![1, 1, 5, 6, 7],
    }
}

const MODES: [&str; 5] = ["constant", "reflect", "mirror", "nearest", "wrap"];
const SIZES: [&str; 6] = ["1", "2", "3", "4", "5", "7"];

/// The parameter sets for a scipy-window operator (`size`/`footprint`, `mode`, `cval`,
/// `origin`), with the spatial rank and dtype of the input. A covering design rather than
/// the full product (which would take ptxas minutes): every value of every parameter at
/// least once per dtype, and every mode at every spatial rank.
fn scipy_window_cases() -> Vec<(usize, DType, Params)> {
    let mut cases = Vec::new();
    // every size, 1-D and 2-D, in f32; the small sizes in f64 and u8
    for s in SIZES {
        for spatial in [1, 2] {
            cases.push((spatial, DType::F32, p(&[("size", s)])));
        }
    }
    for d in [DType::F64, DType::U8] {
        for s in ["1", "2", "3", "5"] {
            cases.push((2, d, p(&[("size", s)])));
        }
    }
    // every mode: at 1-D, 2-D and 3-D in f32, at 2-D in f64 and u8
    for m in MODES {
        for spatial in [1, 2, 3] {
            cases.push((spatial, DType::F32, p(&[("size", "3"), ("mode", m)])));
        }
        for d in [DType::F64, DType::U8] {
            cases.push((2, d, p(&[("size", "3"), ("mode", m)])));
        }
        // an even size (window not centred)
        cases.push((2, DType::F32, p(&[("size", "4"), ("mode", m)])));
    }
    // non-zero and special constants
    for (c, d) in [
        ("nan", DType::F32),
        ("-inf", DType::F64),
        ("200", DType::U8),
    ] {
        cases.push((2, d, p(&[("size", "3"), ("mode", "constant"), ("cval", c)])));
    }
    // rectangular sizes
    for s in ["3,5", "5,1", "2,4", "1,7"] {
        cases.push((2, DType::F32, p(&[("size", s)])));
    }
    cases.push((2, DType::F64, p(&[("size", "3,5")])));
    for s in ["3,1,5", "2,3,2"] {
        cases.push((3, DType::F32, p(&[("size", s), ("mode", "wrap")])));
    }
    // origins
    for (s, o, spatial) in [
        ("3", "-1", 1),
        ("3", "1", 1),
        ("4", "-2", 1),
        ("4", "1", 2),
        ("5", "-1,2", 2),
        ("3", "1,0,-1", 3),
    ] {
        cases.push((spatial, DType::F32, p(&[("size", s), ("origin", o)])));
    }
    // masked footprints
    for (fp, spatial) in [
        ("0,1,0;1,1,1;0,1,0", 2),
        ("1,0,0;0,1,1", 2),
        ("1,0,1,1", 1),
        ("0,1,0;1,1,1;0,1,0|1,1,1;1,0,1;1,1,1", 3),
    ] {
        cases.push((
            spatial,
            DType::F32,
            p(&[("footprint", fp), ("mode", "mirror")]),
        ));
    }
    cases.push((2, DType::U8, p(&[("footprint", "0,1,0;1,1,1;0,1,0")])));
    cases.push((
        2,
        DType::F64,
        p(&[
            ("footprint", "1,1;0,1"),
            ("origin", "-1,0"),
            ("mode", "constant"),
        ]),
    ));
    cases
}

/// One operator graph to build: a name for messages, the operator, input type, parameters.
type OpCase = (String, &'static str, TensorType, Vec<(String, String)>);

/// Every (op, input type, parameters) combination the coverage test builds.
fn op_cases() -> Vec<OpCase> {
    let mut out = Vec::new();
    let mut push = |op: &'static str, spatial: usize, d: DType, params: Vec<(String, String)>| {
        let ty = TensorType {
            dtype: d,
            shape: shape_for(spatial),
        };
        let name = format!(
            "{op} {d} {}-D {}",
            spatial,
            params
                .iter()
                .map(|(a, b)| format!("{a}={b}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        out.push((name, op, ty, params));
    };
    for &op in kiln::ops::op_names() {
        match op {
            "median_blur" => {
                for k in ["1", "2", "3", "4", "5", "7", "3,5", "5,3", "1,4"] {
                    for d in [DType::F32, DType::F64, DType::U8] {
                        for spatial in [1, 2, 3] {
                            push(op, spatial, d, p(&[("k", k)]));
                        }
                    }
                }
            }
            "gradient_magnitude" => {
                for d in [DType::F32, DType::F64, DType::U8] {
                    for spatial in [1, 2, 3] {
                        for m in MODES {
                            push(op, spatial, d, p(&[("mode", m)]));
                        }
                    }
                }
                push(
                    op,
                    2,
                    DType::F32,
                    p(&[("mode", "constant"), ("cval", "nan")]),
                );
            }
            "binary_erosion" => {
                for spatial in [1, 2, 3] {
                    for bv in ["0", "1"] {
                        push(op, spatial, DType::Bool, p(&[("border_value", bv)]));
                    }
                    push(op, spatial, DType::Bool, p(&[("origin", "1")]));
                }
                for (s, spatial) in [
                    ("1,1,1;1,1,1;1,1,1", 2),
                    ("1,0;1,1", 2),
                    ("1,1,0,1,1", 1),
                    ("1,1,1;1,1,1", 2),
                    ("0,1,0;1,1,1;0,1,0|1,1,1;1,1,1;1,1,1", 3),
                ] {
                    for bv in ["0", "1"] {
                        push(
                            op,
                            spatial,
                            DType::Bool,
                            p(&[("structure", s), ("border_value", bv)]),
                        );
                    }
                }
                push(
                    op,
                    2,
                    DType::Bool,
                    p(&[("structure", "1,1;1,1"), ("origin", "-1,0")]),
                );
            }
            // Morphology family (helper morph).
            "binary_dilation" | "binary_opening" | "binary_closing" => {
                for spatial in [1, 2, 3] {
                    for bv in ["0", "1"] {
                        push(op, spatial, DType::Bool, p(&[("border_value", bv)]));
                    }
                    push(op, spatial, DType::F32, p(&[("iterations", "2")]));
                }
                push(
                    op,
                    2,
                    DType::Bool,
                    p(&[("structure", "1,0;1,1"), ("origin", "-1,0")]),
                );
            }
            "binary_hit_or_miss" => {
                for spatial in [1, 2, 3] {
                    push(op, spatial, DType::Bool, vec![]);
                    push(op, spatial, DType::U8, p(&[("origin1", "1")]));
                }
                push(
                    op,
                    2,
                    DType::Bool,
                    p(&[("structure1", "1,1,1;1,1,1;1,1,1")]),
                );
            }
            // Rank filters (helper rank): every fourth scipy window (they share
            // median_filter's kernels but the rank) with a rank or a percentile.
            "rank_filter" | "percentile_filter" => {
                let cases = scipy_window_cases().into_iter().step_by(4);
                for (i, (spatial, d, mut params)) in cases.enumerate() {
                    let (name, value) = match (op, i % 3) {
                        ("rank_filter", 0) => ("rank", "0"),
                        ("rank_filter", _) => ("rank", "-1"),
                        (_, 0) => ("percentile", "25"),
                        (_, 1) => ("percentile", "100"),
                        _ => ("percentile", "-40"),
                    };
                    params.push((name.to_string(), value.to_string()));
                    push(op, spatial, d, params);
                }
            }
            _ => {
                for (spatial, d, params) in scipy_window_cases() {
                    push(op, spatial, d, params);
                }
            }
        }
    }
    out
}

/// Assembles every text for sm_80 and sm_90 in parallel; returns the failures.
fn assemble_all(ptxas: &Path, kernels: &BTreeMap<String, (String, Kernel)>) -> Vec<String> {
    let jobs: Vec<(&String, &Kernel, PtxTarget)> = kernels
        .values()
        .flat_map(|(name, k)| [(name, k, PtxTarget::sm80()), (name, k, PtxTarget::sm90())])
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                .clamp(2, 8),
        )
        .build()
        .expect("thread pool");
    pool.install(|| {
        jobs.par_iter()
            .filter_map(|(name, k, target)| {
                let m = match ptx::render(k, target, &CompileOptions::default()) {
                    Ok(m) => m,
                    Err(e) => return Some(format!("{name} (sm_{}): render: {e}", target.sm)),
                };
                let t = Instant::now();
                let r = ptxas::assemble_with(ptxas, &m.text, target.sm);
                if std::env::var_os("KILN_PTX_TIMES").is_some() {
                    eprintln!(
                        "TIME {:.3} {} {name}",
                        t.elapsed().as_secs_f64(),
                        m.text.len()
                    );
                }
                r.err().map(|e| format!("{name} (sm_{}): {e}", target.sm))
            })
            .collect()
    })
}

#[test]
fn every_op_kernel_assembles_for_sm80_and_sm90() {
    let Some(ptxas) = ptxas::ptxas_or_skip() else {
        return;
    };
    let t0 = Instant::now();
    let mut collected = Collected::default();
    let mut built_per_op: BTreeMap<&str, usize> = BTreeMap::new();
    let mut graphs = 0;
    for (name, op, ty, params) in op_cases() {
        let graph = match kiln::ops::build_op(op, &params, &ty) {
            Ok(g) => g,
            // combinations the operator rejects (dtype, rank) are not kernels
            Err(_) => continue,
        };
        graphs += 1;
        *built_per_op.entry(op).or_default() += 1;
        let ks = kernels_of(&graph).unwrap_or_else(|e| panic!("{name}: lowering failed: {e}"));
        assert!(!ks.is_empty(), "{name}: no kernels");
        for k in ks {
            collected.add(&name, k);
        }
    }
    // every registered operator contributed graphs (so a registry change cannot silently
    // empty the coverage)
    for &op in kiln::ops::op_names() {
        let n = built_per_op.get(op).copied().unwrap_or(0);
        assert!(n >= 5, "operator {op}: only {n} parameter sets built");
    }
    let n = collected.kernels.len();
    eprintln!(
        "ops: {graphs} graphs, {n} distinct kernels, collected in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(n >= 200, "only {n} distinct kernels");
    let failures = assemble_all(&ptxas, &collected.kernels);
    eprintln!(
        "ops: assembled {} modules in {:.1} s",
        2 * n,
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {} assemblies failed:\n{}",
        failures.len(),
        2 * n,
        failures.join("\n")
    );
}

#[test]
fn three_hundred_fuzzer_kernels_assemble_for_sm80_and_sm90() {
    let Some(ptxas) = ptxas::ptxas_or_skip() else {
        return;
    };
    let t0 = Instant::now();
    let mut collected = Collected::default();
    let mut seed = 0u64;
    while collected.kernels.len() < 300 {
        assert!(
            seed < 20_000,
            "fewer than 300 distinct kernels in {seed} cases"
        );
        // Without extern nodes: they are host functions the PTX renderer refuses by design
        // (`CodegenError::ExternUnsupported`, tested in runtime/tests/line_extern.rs).
        let case = kiln::fuzz::generate_for(kiln::fuzz::rng::case_seed(0x9e3, seed), 12, false);
        let name = format!("fuzz seed {seed}");
        seed += 1;
        let ks = kernels_of(&case.graph).unwrap_or_else(|e| {
            panic!(
                "{name}: lowering failed: {e}\n{}",
                kiln::ir::printer::print(&case.graph)
            )
        });
        for k in ks {
            if collected.kernels.len() < 300 {
                collected.add(&name, k);
            }
        }
    }
    eprintln!(
        "fuzz: 300 distinct kernels from {seed} cases in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let failures = assemble_all(&ptxas, &collected.kernels);
    eprintln!(
        "fuzz: assembled 600 modules in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of 600 assemblies failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The test's pipeline is the engine's: same optimised graph and partition as
/// `Engine::compile`, on a sample of operator graphs and fuzz cases.
#[test]
fn pipeline_matches_engine_compile() {
    let engine = Engine::new();
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape_for(2),
    };
    let mut graphs = vec![
        kiln::ops::build_op("median_blur", &p(&[("k", "3")]), &ty).unwrap(),
        kiln::ops::build_op("grey_opening", &p(&[("size", "3")]), &ty).unwrap(),
        kiln::ops::build_op("gradient_magnitude", &p(&[("mode", "wrap")]), &ty).unwrap(),
    ];
    for s in 0..8 {
        graphs.push(kiln::fuzz::generate(s, 8).graph);
    }
    for g in &graphs {
        let (optimized, partition) = plan(g);
        let compiled = engine.compile(g).expect("compiles");
        assert_eq!(compiled.optimized, optimized);
        assert_eq!(compiled.partition, partition);
        for (group, ck) in partition.groups.iter().zip(&compiled.kernels) {
            assert_eq!(lower(&optimized, group).unwrap(), ck.kernel);
        }
    }
}

/// `--backend cuda` without the feature (or without a GPU) is a clear one-line error from
/// the library and the CLI; with a GPU, a short fuzz run on it is clean.
#[test]
fn cuda_backend_is_a_clear_error_or_clean() {
    use kiln::fuzz::{fuzz, Backend, FuzzOptions};
    let opts = FuzzOptions {
        cases: 20,
        seed: 3,
        backend: Backend::Cuda,
        ..FuzzOptions::default()
    };
    let report = fuzz(&opts);
    match &report.backend_error {
        Some(e) => {
            let expected = if cfg!(feature = "cuda") {
                "no CUDA device"
            } else {
                "built without the cuda feature"
            };
            assert!(e.contains(expected), "{e}");
            assert!(!report.is_clean());
            assert_eq!(report.cases, 0);
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
                .args(["fuzz", "--backend", "cuda", "--cases", "1"])
                .output()
                .expect("runs kiln");
            assert_eq!(out.status.code(), Some(2));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            assert!(stderr.contains(expected), "{stderr}");
        }
        None => assert!(report.is_clean(), "{}", report.summary()),
    }
    assert_eq!(Backend::from_name("cuda"), Some(Backend::Cuda));
    assert_eq!(Backend::from_name("tpu"), None);
}

/// Staged kernels read each stage's scratch offset from the parameter-block word that
/// `Module::param_block` writes it to (dims, input strides, output strides, scratch strides,
/// then the offsets). Found on the first GPU run: the emitter read the scratch strides'
/// first word as stage 0's offset (misaligned or wrong scratch addresses). Checked on the
/// text, so it runs without ptxas or a GPU.
#[test]
fn staged_kernels_read_scratch_offsets_from_their_param_words() {
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape_for(2),
    };
    let mut staged = 0;
    for (op, params) in [
        ("grey_opening", p(&[("size", "5"), ("mode", "constant")])),
        ("grey_opening", p(&[("size", "15"), ("mode", "constant")])),
        ("grey_closing", p(&[("size", "5,3"), ("mode", "reflect")])),
    ] {
        let graph = kiln::ops::build_op(op, &params, &ty).unwrap();
        for k in kernels_of(&graph).unwrap() {
            let m = ptx::render(&k, &PtxTarget::sm80(), &CompileOptions::default()).unwrap();
            if !matches!(m.schedule, ptx::Schedule::Staged) {
                continue;
            }
            staged += 1;
            let first_offset_word = k.rank * (k.inputs.len() + 3);
            let mut bases = 0;
            // Registers are numbered per entry point: check each entry on its own.
            for entry in m.text.split(".entry").skip(1) {
                let words = param_words_read(entry);
                for line in entry.lines() {
                    // `add.s64 BASE, SCRATCH, OFF`: a stage's base address in the scratch buffer.
                    let t: Vec<&str> = line
                        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                        .filter(|s| !s.is_empty())
                        .collect();
                    if t.len() == 4
                        && t[0] == "add.s64"
                        && words.scratch.contains(&t[2].to_string())
                    {
                        let w = words.by_reg.get(t[3]).copied();
                        assert!(
                        w.is_some_and(|w| w >= first_offset_word && w < m.param_words()),
                        "{op}: scratch base from word {w:?}, offsets start at {first_offset_word} \
                         of {} words",
                        m.param_words()
                    );
                        bases += 1;
                    }
                }
            }
            assert!(bases > 0, "{op}: a staged kernel with no scratch base");
        }
    }
    assert!(
        staged > 0,
        "no staged kernel among the cases: the test checks nothing"
    );
}

/// The registers loaded from the parameter block (`[args+8w]` → word `w`) and the scratch
/// pointer registers of a PTX text.
struct ParamWords {
    by_reg: std::collections::HashMap<String, usize>,
    scratch: Vec<String>,
}

fn param_words_read(text: &str) -> ParamWords {
    let mut args = Vec::new();
    let mut out = ParamWords {
        by_reg: Default::default(),
        scratch: Vec::new(),
    };
    for line in text.lines() {
        let t: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '[' || c == ']')
            .filter(|s| !s.is_empty())
            .collect();
        match t.as_slice() {
            ["ld.param.u64", reg, "kiln_args"] => args.push(reg.to_string()),
            ["ld.param.u64", reg, "kiln_scratch"] => out.scratch.push(reg.to_string()),
            ["ld.global.nc.u64", reg, addr] => {
                if let Some((base, off)) = addr.split_once('+') {
                    if args.iter().any(|a| a == base) {
                        let off: usize = off.parse().expect("byte offset");
                        out.by_reg.insert(reg.to_string(), off / 8);
                    }
                }
            }
            _ => {}
        }
    }
    out
}
