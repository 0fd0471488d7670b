//! The benchmark harness behind `kiln bench`, `benches/` and `benches/peers/compare.py`:
//! the workloads of the performance issue, their deterministic inputs, timing statistics,
//! peak-memory measurement and the memory-copy floor.
//!
//! Inputs come from [`hash32`], an integer hash of the flat element index that numpy can
//! evaluate exactly (`benches/peers/compare.py` has the same formula), so kiln and its peers
//! time the same data without exchanging files.

pub mod data;
pub mod inputs;
pub mod json;
pub mod mem;
pub mod program;
pub mod stats;

use std::mem::MaybeUninit;
use std::time::Instant;

use kiln_ir::{DType, TensorType};
use rayon::prelude::*;

use crate::{Engine, Tensor};

pub use data::{checksum, generate, hash32};
pub use inputs::{Gen, Input};
pub use stats::Stats;

/// How `--sizes` (one side `s`) resizes a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Images: the last two axes become `s x s`.
    Plane,
    /// Volumes: the last three axes become `s x s x s`.
    Volume,
    /// Histograms of `d = s` bins: every axis of extent `d` becomes `s` (a, b `[B, d]`, a
    /// cost `[d, d]`).
    Bins,
    /// Histograms over an `s x s` grid: every axis of extent `d` becomes `s²` (and every
    /// axis of extent `sqrt(d)`, a per-axis cost table, becomes `s`).
    Grid,
}

/// One benchmark case: an operator with parameters on a generated input.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Stable identifier shared with `compare.py` (e.g. `median3_2048`).
    pub name: String,
    /// Operator name for [`kiln_ops::build_op`].
    pub op: String,
    /// Operator parameters `(name, value)`.
    pub params: Vec<(String, String)>,
    /// Input element type.
    pub dtype: DType,
    /// Input shape `[B, C, H, W]`.
    pub shape: Vec<usize>,
    /// Seed of the generated input.
    pub seed: u32,
    /// How the first input is generated ([`Gen::Hash`] unless set).
    pub gen: Gen,
    /// Further inputs (programs such as `binary_propagation`'s mask or Sinkhorn's `b`, `cost`).
    pub extra: Vec<Input>,
    /// How `--sizes` resizes it.
    pub scale: Scale,
    /// When set, a build error of the operator makes the row "skipped" with this reason first
    /// (a workload waiting for an operator that does not accept it yet).
    pub guard: Option<String>,
}

impl Workload {
    /// A workload named `name`: operator `op` with `params` on a generated `dtype` input of
    /// `shape` (see [`generate`]) from `seed`.
    pub fn new(
        name: &str,
        op: &str,
        params: &[(&str, &str)],
        dtype: DType,
        shape: &[usize],
        seed: u32,
    ) -> Self {
        Workload {
            name: name.into(),
            op: op.into(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            dtype,
            shape: shape.to_vec(),
            seed,
            gen: Gen::Hash,
            extra: Vec::new(),
            scale: Scale::Plane,
            guard: None,
        }
    }

    /// The same workload with its first input made by `gen`.
    pub fn gen(mut self, gen: Gen) -> Self {
        self.gen = gen;
        self
    }

    /// The same workload with one more input.
    pub fn input(mut self, dtype: DType, shape: &[usize], seed: u32, gen: Gen) -> Self {
        self.extra.push(Input {
            dtype,
            shape: shape.to_vec(),
            seed,
            gen,
        });
        self
    }

    /// The same workload resized by `scale` under `--sizes`.
    pub fn scale(mut self, scale: Scale) -> Self {
        self.scale = scale;
        self
    }

    /// The same workload, skipped with `reason` while its operator refuses it.
    pub fn guard(mut self, reason: &str) -> Self {
        self.guard = Some(reason.to_string());
        self
    }

    /// Every input, the first one first.
    pub fn inputs(&self) -> Vec<Input> {
        let mut v = vec![Input {
            dtype: self.dtype,
            shape: self.shape.clone(),
            seed: self.seed,
            gen: self.gen,
        }];
        v.extend(self.extra.iter().cloned());
        v
    }

    /// True when the operator is a [`kiln_ops::Program`] (several inputs or outputs, native
    /// passes, or a window too large for a graph, e.g. a rank filter over 441 values), timed
    /// through [`program::run_program`].
    pub fn is_program(&self) -> bool {
        kiln_ops::program::program_info(&self.op).is_some()
            || matches!(
                kiln_ops::build_plan(&self.op, &self.params, &[self.tensor_type()]),
                Ok(kiln_ops::OpPlan::Program(_))
            )
    }

    /// The same workload resized to `side` as its [`Scale`] says (images: the last two
    /// dimensions set to `side x side`).
    pub fn with_side(&self, side: usize) -> Workload {
        let mut w = self.clone();
        let scale = w.scale;
        let resize = |shape: &mut Vec<usize>, from: usize| match scale {
            Scale::Plane | Scale::Volume => {
                let k = if scale == Scale::Plane { 2 } else { 3 };
                let n = shape.len();
                for d in &mut shape[n.saturating_sub(k)..] {
                    *d = side;
                }
            }
            Scale::Bins | Scale::Grid => {
                let to = if scale == Scale::Bins {
                    side
                } else {
                    side * side
                };
                // Grids: an axis of the grid's side (a per-axis cost table) becomes `s`.
                let g = (1..=from).find(|g| g * g >= from).unwrap_or(from);
                for d in shape.iter_mut() {
                    if *d == from {
                        *d = to;
                    } else if scale == Scale::Grid && *d == g && g * g == from {
                        *d = side;
                    }
                }
            }
        };
        let bins = *self.shape.last().unwrap_or(&1);
        let mut shape = w.shape.clone();
        resize(&mut shape, bins);
        let mut extra = w.extra.clone();
        for e in &mut extra {
            resize(&mut e.shape, bins);
        }
        w.shape = shape;
        w.extra = extra;
        w
    }

    /// The same workload with `params` set (replacing a parameter of the same name), named
    /// `NAME[k=v,...]` so its rows stay distinguishable.
    pub fn with_params(&self, params: &[(String, String)]) -> Workload {
        let mut w = self.clone();
        for (k, v) in params {
            w.params.retain(|(old, _)| old != k);
            w.params.push((k.clone(), v.clone()));
        }
        let tag: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        w.name = format!("{}[{}]", w.name, tag.join(";"));
        w
    }

    /// Number of input elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The input's tensor type.
    pub fn tensor_type(&self) -> TensorType {
        TensorType {
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    /// Parameters formatted as `k=v k=v`.
    pub fn params_text(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The workloads of the performance issue, in its table's order (with the 5x5 median on
/// small planes after the 3x3 one), then 8-bit forms of its median and morphology rows
/// (beyond the table).
pub fn workloads() -> Vec<Workload> {
    use DType::{Bool, F32, U8};
    let img = [1, 1, 2048, 2048];
    let mut v = vec![
        Workload::new("median3_2048", "median_blur", &[("k", "3")], F32, &img, 1),
        Workload::new("median5_2048", "median_blur", &[("k", "5")], F32, &img, 2),
        Workload::new(
            "median3_8x3x256",
            "median_blur",
            &[("k", "3")],
            F32,
            &[8, 3, 256, 256],
            3,
        ),
        // Beyond the table: the 5x5 median on the same small planes.
        Workload::new(
            "median5_8x3x256",
            "median_blur",
            &[("k", "5")],
            F32,
            &[8, 3, 256, 256],
            14,
        ),
        Workload::new(
            "erosion15_2048",
            "grey_erosion",
            &[("size", "15")],
            F32,
            &img,
            4,
        ),
        Workload::new(
            "opening3_2048",
            "grey_opening",
            &[("size", "3")],
            F32,
            &img,
            5,
        ),
        Workload::new(
            "opening15_2048",
            "grey_opening",
            &[("size", "15")],
            F32,
            &img,
            6,
        ),
        Workload::new("binary_erosion3_2048", "binary_erosion", &[], Bool, &img, 7),
        Workload::new(
            "gradmag_1000x128x28",
            "gradient_magnitude",
            &[],
            F32,
            &[1000, 128, 28, 28],
            8,
        ),
        // 8-bit images, OpenCV's most common input: scipy's median filter with replicated
        // edges (OpenCV medianBlur's border), erosion and openings. Beyond the f32
        // table; they exercise the 16-lane byte path.
        Workload::new(
            "u8_median3_2048",
            "median_filter",
            &[("size", "3"), ("mode", "nearest")],
            U8,
            &img,
            9,
        ),
        Workload::new(
            "u8_median5_2048",
            "median_filter",
            &[("size", "5"), ("mode", "nearest")],
            U8,
            &img,
            10,
        ),
        Workload::new(
            "u8_erosion15_2048",
            "grey_erosion",
            &[("size", "15")],
            U8,
            &img,
            11,
        ),
        Workload::new(
            "u8_opening3_2048",
            "grey_opening",
            &[("size", "3")],
            U8,
            &img,
            12,
        ),
        Workload::new(
            "u8_opening15_2048",
            "grey_opening",
            &[("size", "15")],
            U8,
            &img,
            13,
        ),
        // Morphology family (helper morph): issue 28's fused derived operators.
        Workload::new(
            "white_tophat15_2048",
            "white_tophat",
            &[("size", "15")],
            F32,
            &img,
            14,
        ),
        Workload::new(
            "u8_morph_gradient3_2048",
            "morphological_gradient",
            &[("size", "3")],
            U8,
            &img,
            15,
        ),
    ];
    v.extend(family_workloads());
    v
}

/// The morphology, distance and Sinkhorn families' workloads (issues 28, 29, 30; helper
/// `bench`): programs with several inputs or outputs, structured inputs ([`Gen`]).
pub fn family_workloads() -> Vec<Workload> {
    use DType::{Bool, F32, I16, U16};
    let img = [1, 1, 2048, 2048];
    let (batch, d) = (16, 1024);
    let sink = |name: &str, log: &str, seed: u32| {
        Workload::new(
            name,
            "sinkhorn",
            &[
                ("eps", "0.05"),
                ("max_iter", "100"),
                ("tol", "0"),
                ("log_domain", log),
            ],
            F32,
            &[batch, d],
            seed,
        )
        .gen(Gen::Histogram)
        .input(F32, &[batch, d], seed + 1, Gen::Histogram)
        .input(F32, &[d, d], seed + 2, Gen::Hash)
        .scale(Scale::Bins)
    };
    vec![
        // Issue 28: fixpoints (blobs with holes; propagation: sparse seeds within blobs).
        Workload::new("fill_holes_2048", "binary_fill_holes", &[], Bool, &img, 20).gen(Gen::Blobs),
        Workload::new(
            "propagation_2048",
            "binary_propagation",
            &[],
            Bool,
            &img,
            21,
        )
        .gen(Gen::Seeds)
        .input(Bool, &img, 22, Gen::Blobs),
        // A CT volume: 64 planes of int16, 3x3 per plane (OpenCV medianBlur's border).
        Workload::new(
            "median3_i16_ct",
            "median_filter",
            &[("size", "3"), ("mode", "nearest")],
            I16,
            &[1, 64, 512, 512],
            23,
        ),
        // Issue 28: a large rank window (the sliding-histogram program above 441 values).
        Workload::new(
            "median31_u16_2048",
            "median_filter",
            &[("size", "31")],
            U16,
            &img,
            24,
        ),
        // Issue 29: distance transforms of blobs.
        Workload::new("edt_2048", "distance_transform_edt", &[], Bool, &img, 25).gen(Gen::Blobs),
        Workload::new(
            "edt_indices_2048",
            "distance_transform_edt",
            &[("return_indices", "1")],
            Bool,
            &img,
            26,
        )
        .gen(Gen::Blobs),
        Workload::new(
            "cdt_taxicab_2048",
            "distance_transform_cdt",
            &[("metric", "taxicab")],
            Bool,
            &img,
            27,
        )
        .gen(Gen::Blobs),
        Workload::new(
            "edt_128cube",
            "distance_transform_edt",
            &[],
            Bool,
            &[1, 1, 128, 128, 128],
            28,
        )
        .gen(Gen::Blobs)
        .scale(Scale::Volume),
        Workload::new(
            "signed_distance_2048",
            "signed_distance",
            &[],
            Bool,
            &img,
            29,
        )
        .gen(Gen::Blobs),
        // Issue 30: a shared random cost (f32, [0, 1)), 100 iterations (tol 0: all run).
        sink("sinkhorn_d1024_b16", "false", 30),
        sink("sinkhorn_log_d1024_b16", "true", 33),
        // 32x32 grids (d = 1024), one pair, 1000 iterations, the normalised grid cost.
        Workload::new(
            "sinkhorn_grid32_b1_1000it",
            "sinkhorn",
            &[("eps", "0.05"), ("max_iter", "1000"), ("tol", "0")],
            F32,
            &[1, 1024],
            36,
        )
        .gen(Gen::Histogram)
        .input(F32, &[1, 1024], 37, Gen::Histogram)
        .input(F32, &[1024, 1024], 38, Gen::GridCost)
        .scale(Scale::Grid),
        // The same problem through the separable kernel (`grid_axes = 2`, the cost as its
        // per-axis table [32, 32]).
        Workload::new(
            "sinkhorn_grid32_axes_b1_1000it",
            "sinkhorn",
            &[
                ("eps", "0.05"),
                ("max_iter", "1000"),
                ("tol", "0"),
                ("grid_axes", "2"),
            ],
            F32,
            &[1, 1024],
            36,
        )
        .gen(Gen::Histogram)
        .input(F32, &[1, 1024], 37, Gen::Histogram)
        .input(F32, &[32, 32], 38, Gen::AxisCost)
        .scale(Scale::Grid),
    ]
}

/// What happened to one (workload, thread count) case.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// Timed.
    Ok,
    /// Not run (e.g. the operator does not exist); the reason.
    Skipped(String),
    /// Failed while compiling or running; the error.
    Error(String),
}

/// One row of results: a workload at one thread count.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The workload.
    pub workload: Workload,
    /// Worker threads of the engine and of the copy floor.
    pub threads: usize,
    /// Outcome.
    pub status: Status,
    /// Kernels after fusion.
    pub kernels: usize,
    /// Compile time of the fused graph in milliseconds, until its kernels can run: the
    /// median of [`COMPILE_REPEATS`] compiles, each with a fresh engine (no cache hits).
    pub compile_ms: f64,
    /// Every compile time behind `compile_ms`, in order (the first is the process's first
    /// compile of this graph at this thread count).
    pub compile_samples: Vec<f64>,
    /// Milliseconds of the background compiles with a bigger step budget (tiered kernels
    /// only; the timings are taken after they landed): the median over the same compiles.
    pub upgrade_compile_ms: Option<f64>,
    /// Timings of the fused run in milliseconds (a fresh output each call, as `run` gives).
    pub time: Stats,
    /// Timings of the fused run writing into the previous call's outputs (`run_into`).
    pub time_reused: Stats,
    /// Timings of the copy floor (fresh destination, as the engine returns a fresh output).
    pub floor: Stats,
    /// Timings of the copy floor into a destination allocated once (no page faults).
    pub floor_warm: Stats,
    /// Input bytes.
    pub in_bytes: usize,
    /// Output bytes (all outputs).
    pub out_bytes: usize,
    /// Peak resident memory above the level before the first run (bytes), when measurable.
    pub peak_extra_bytes: Option<u64>,
    /// [`checksum`] of the input.
    pub input_checksum: u64,
    /// [`checksum`] of the first output.
    pub output_checksum: u64,
    /// Output shape.
    pub out_shape: Vec<usize>,
    /// [`checksum`] of every input, in order.
    pub input_checksums: Vec<u64>,
    /// [`checksum`] of every output, in order.
    pub output_checksums: Vec<u64>,
    /// Programs: the first call's milliseconds (it compiles the program's graphs, if any);
    /// `compile_ms` is NaN and `time_reused` empty for them (a program has no `run_into`).
    pub first_call_ms: Option<f64>,
}

impl BenchRow {
    fn empty(w: &Workload, threads: usize, status: Status) -> BenchRow {
        BenchRow {
            workload: w.clone(),
            threads,
            status,
            kernels: 0,
            compile_ms: f64::NAN,
            compile_samples: Vec::new(),
            upgrade_compile_ms: None,
            time: Stats::default(),
            time_reused: Stats::default(),
            floor: Stats::default(),
            floor_warm: Stats::default(),
            in_bytes: w.numel() * w.dtype.size_bytes(),
            out_bytes: 0,
            peak_extra_bytes: None,
            input_checksum: 0,
            output_checksum: 0,
            out_shape: Vec::new(),
            input_checksums: Vec::new(),
            output_checksums: Vec::new(),
            first_call_ms: None,
        }
    }

    /// Median fused time over median copy-floor time.
    pub fn floor_ratio(&self) -> f64 {
        self.time.median / self.floor.median
    }
}

/// Options of a benchmark run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Keep repeating a timed call until at least this many seconds have passed.
    pub min_time: f64,
    /// At least this many timed calls.
    pub min_reps: usize,
    /// At most this many timed calls.
    pub max_reps: usize,
    /// Code generation options of the engine under test (for A/B runs of one backend
    /// feature in the same process).
    pub compile: kiln_codegen::CompileOptions,
    /// Run the `double_windows` pass (off only for A/B runs).
    pub window_doubling: bool,
    /// Scratch bytes per chunk of a multi-stage block; the engine's default when `None`.
    pub scratch_budget: Option<usize>,
    /// Tiered compilation (off only for A/B runs).
    pub tiering: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            min_time: 0.5,
            min_reps: 5,
            max_reps: 10_000,
            compile: kiln_codegen::CompileOptions::default(),
            window_doubling: true,
            scratch_budget: None,
            tiering: true,
        }
    }
}

/// Times `f`: one warm-up call, then calls until `min_time` seconds and `min_reps` calls
/// have passed (at most `max_reps`). Returns the statistics in milliseconds.
pub fn time_it<E>(opts: &BenchOptions, mut f: impl FnMut() -> Result<(), E>) -> Result<Stats, E> {
    f()?;
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < opts.max_reps.max(1)
        && (samples.len() < opts.min_reps || start.elapsed().as_secs_f64() < opts.min_time)
    {
        let t = Instant::now();
        f()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Stats::from_samples(&samples))
}

/// Copies `src` into `dst` in `threads` (or more) contiguous chunks on `pool`, so that every
/// thread streams its own part. Lengths may differ: `dst` is filled by repeating `src`.
/// `dst` may be uninitialised (a fresh buffer is not zeroed first, like kiln's outputs).
pub fn parallel_copy(pool: &rayon::ThreadPool, src: &[u8], dst: &mut [MaybeUninit<u8>]) {
    if src.is_empty() {
        return;
    }
    let chunk = (dst.len() / (pool.current_num_threads() * 4)).max(1 << 16);
    pool.install(|| {
        dst.par_chunks_mut(chunk).enumerate().for_each(|(i, d)| {
            let mut pos = (i * chunk) % src.len();
            let mut d = d;
            while !d.is_empty() {
                let n = d.len().min(src.len() - pos);
                d[..n].write_copy_of_slice(&src[pos..pos + n]);
                d = &mut d[n..];
                pos = 0;
            }
        });
    });
}

/// The memory-copy floor: times copying `in_bytes` into a fresh `out_bytes` buffer (first
/// result) and into a buffer allocated once (second result), on `threads` threads.
pub fn copy_floor(
    in_bytes: usize,
    out_bytes: usize,
    threads: usize,
    opts: &BenchOptions,
) -> (Stats, Stats) {
    let pool = match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(p) => p,
        Err(_) => return (Stats::default(), Stats::default()),
    };
    let src: Vec<u8> = (0..in_bytes.max(1)).map(|i| (i % 251) as u8 + 1).collect();
    // A fresh output is allocated as kiln allocates its outputs: without zeroing (a zeroed
    // `vec!` would add a memset of the whole buffer to the floor whenever the allocator
    // reuses memory), and with the same huge-page advice when it is big (`fresh_vec`).
    let fresh = time_it::<()>(opts, || {
        let mut dst: Vec<u8> = crate::runtime::memory::fresh_vec(out_bytes);
        parallel_copy(&pool, &src, dst.spare_capacity_mut());
        std::hint::black_box(&dst);
        Ok(())
    })
    .unwrap_or_default();
    let mut dst = vec![MaybeUninit::new(0u8); out_bytes];
    let warm = time_it::<()>(opts, || {
        parallel_copy(&pool, &src, &mut dst);
        std::hint::black_box(&dst);
        Ok(())
    })
    .unwrap_or_default();
    (fresh, warm)
}

/// A fresh engine with `threads` workers and the options under test.
fn engine_for(threads: usize, opts: &BenchOptions) -> Engine {
    let engine = Engine::with_options(opts.compile.clone())
        .with_threads(threads)
        .with_window_doubling(opts.window_doubling)
        .with_tiering(opts.tiering);
    match opts.scratch_budget {
        Some(b) => engine.with_scratch_budget(b),
        None => engine,
    }
}

/// Fresh-engine compiles per workload and thread count; `compile_ms` is their median.
pub const COMPILE_REPEATS: usize = 5;

/// Runs one workload at one thread count: generate, compile (fresh engine), measure peak
/// memory of the first run, time the fused run and the copy floor. Errors become rows.
/// Returns the row and the outputs of the last run (for `--dump-outputs`).
pub fn run_workload(w: &Workload, threads: usize, opts: &BenchOptions) -> (BenchRow, Vec<Tensor>) {
    if w.is_program() {
        return program::run_program(w, threads, opts);
    }
    let graph = match kiln_ops::build_op(&w.op, &w.params, &w.tensor_type()) {
        Ok(g) => g,
        Err(e) => return (BenchRow::empty(w, threads, skip_reason(w, e)), Vec::new()),
    };
    let input = match generate(w.dtype, &w.shape, w.seed) {
        Ok(t) => t,
        Err(e) => return failed(BenchRow::empty(w, threads, Status::Ok), e),
    };
    let mut row = BenchRow::empty(w, threads, Status::Ok);
    row.input_checksum = checksum(&input);
    row.input_checksums = vec![row.input_checksum];
    let make_engine = || engine_for(threads, opts);
    // Compile times are single shots that vary between runs, so the graph is compiled
    // several times, each with a fresh engine, and the median is reported. Each compile's
    // background compile (tiered kernels) is waited for before the next starts, so that
    // none competes with another; the timings below run the last compile's kernels, in
    // their steady state.
    let mut last = None;
    let mut upgrade_samples = Vec::new();
    for _ in 0..COMPILE_REPEATS {
        let engine = make_engine();
        let fresh = match engine.compile(&graph) {
            Ok(c) => c,
            Err(e) => return failed(row, e),
        };
        row.compile_samples.push(fresh.compile_ms);
        if fresh.wait_for_upgrades(std::time::Duration::from_secs(60)) {
            let upgraded: Vec<f64> = fresh
                .upgrades
                .iter()
                .flatten()
                .filter_map(|u| u.get().map(|k| k.compile_ms_with_forms()))
                .collect();
            if !upgraded.is_empty() {
                upgrade_samples.push(upgraded.iter().sum());
            }
        }
        last = Some((engine, fresh));
    }
    let Some((engine, compiled)) = last else {
        return failed(row, "no compile");
    };
    row.compile_ms = Stats::from_samples(&row.compile_samples).median;
    if !upgrade_samples.is_empty() {
        row.upgrade_compile_ms = Some(Stats::from_samples(&upgrade_samples).median);
    }
    row.kernels = compiled.kernel_count();
    let inputs = std::slice::from_ref(&input);

    if let Err(e) = measure_peak(&mut row, || compiled.run(&engine, inputs)) {
        return failed(row, e);
    }

    let mut last = Vec::new();
    match time_it(opts, || {
        last = compiled.run(&engine, inputs)?;
        Ok::<(), crate::RuntimeError>(())
    }) {
        Ok(s) => row.time = s,
        Err(e) => return failed(row, e),
    }
    let mut bufs = last;
    match time_it(opts, || {
        bufs = compiled.run_into(&engine, inputs, std::mem::take(&mut bufs))?;
        Ok::<(), crate::RuntimeError>(())
    }) {
        Ok(s) => row.time_reused = s,
        Err(e) => return failed(row, e),
    }
    let outputs = bufs;
    row.output_checksums = outputs.iter().map(checksum).collect();
    row.output_checksum = row.output_checksums.first().copied().unwrap_or(0);
    let (fresh, warm) = copy_floor(row.in_bytes, row.out_bytes, threads, opts);
    row.floor = fresh;
    row.floor_warm = warm;
    (row, outputs)
}

/// The status of a workload whose operator did not build: skipped, with the workload's
/// guard reason first when it has one.
fn skip_reason(w: &Workload, e: impl std::fmt::Display) -> Status {
    Status::Skipped(match &w.guard {
        Some(g) => format!("{g}: {}: {e}", w.op),
        None => format!("{}: {e}", w.op),
    })
}

/// `row` marked as failed with `e`, and no outputs.
/// Peak memory of `run`, then its outputs' bytes and shape, into `row`: reset the
/// high-water mark, note the resident size, run, read the mark; on three runs (which also
/// warm up), keeping the largest: freeing of unrelated memory during a run can only hide
/// part of the peak, never inflate it. Blocks of 128 KiB and more come fresh from the OS
/// while measuring, so reuse of freed blocks cannot hide them; for timing, blocks up to
/// 32 MiB may be reused (what glibc's adaptive threshold does in any steady loop, Python
/// peers included). Graph rows and program rows both measure through this.
fn measure_peak<E>(
    row: &mut BenchRow,
    mut run: impl FnMut() -> Result<Vec<Tensor>, E>,
) -> Result<(), E> {
    mem::set_malloc_thresholds(128 << 10, 128 << 10);
    let mut outputs = Vec::new();
    for _ in 0..3 {
        drop(std::mem::take(&mut outputs));
        mem::release_free_memory();
        let reset = mem::reset_peak();
        let before = mem::status_bytes("VmRSS");
        let result = run();
        let after = mem::status_bytes("VmHWM");
        if std::env::var_os("KILN_BENCH_DEBUG_MEM").is_some() {
            eprintln!(
                "mem: reset {reset} rss before {before:?} hwm after {after:?} rss after {:?}",
                mem::status_bytes("VmRSS")
            );
        }
        outputs = match result {
            Ok(o) => o,
            Err(e) => {
                mem::set_malloc_thresholds(32 << 20, 64 << 20);
                return Err(e);
            }
        };
        if let (true, Some(b), Some(a)) = (reset, before, after) {
            let extra = a.saturating_sub(b);
            row.peak_extra_bytes = Some(row.peak_extra_bytes.map_or(extra, |p| p.max(extra)));
        }
    }
    mem::set_malloc_thresholds(32 << 20, 64 << 20);
    row.out_bytes = outputs
        .iter()
        .map(|t| t.numel() * t.dtype().size_bytes())
        .sum();
    row.out_shape = outputs
        .first()
        .map(|t| t.shape().to_vec())
        .unwrap_or_default();
    Ok(())
}

fn failed(row: BenchRow, e: impl std::fmt::Display) -> (BenchRow, Vec<Tensor>) {
    let status = Status::Error(e.to_string());
    (BenchRow { status, ..row }, Vec::new())
}

/// The JSON form of a row (times in ms, sizes in bytes; see docs/BENCHMARKS.md).
pub fn row_json(r: &BenchRow) -> json::Json {
    use json::Json;
    let stats = |s: &Stats| {
        Json::obj([
            ("reps", Json::Int(s.reps as i128)),
            ("median_ms", Json::Num(s.median)),
            ("q1_ms", Json::Num(s.q1)),
            ("q3_ms", Json::Num(s.q3)),
            ("iqr_ms", Json::Num(s.iqr())),
            ("min_ms", Json::Num(s.min)),
        ])
    };
    let (status, reason) = match &r.status {
        Status::Ok => ("ok", String::new()),
        Status::Skipped(m) => ("skipped", m.clone()),
        Status::Error(m) => ("error", m.clone()),
    };
    let w = &r.workload;
    let dims = |v: &[usize]| Json::Arr(v.iter().map(|&d| Json::Int(d as i128)).collect());
    Json::obj([
        ("name", Json::str(w.name.clone())),
        ("op", Json::str(w.op.clone())),
        (
            "params",
            Json::Obj(
                w.params
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::str(v.clone())))
                    .collect(),
            ),
        ),
        ("dtype", Json::str(w.dtype.name())),
        ("shape", dims(&w.shape)),
        ("seed", Json::Int(w.seed as i128)),
        ("threads", Json::Int(r.threads as i128)),
        ("status", Json::str(status)),
        ("reason", Json::str(reason)),
        ("kernels", Json::Int(r.kernels as i128)),
        ("compile_ms", Json::Num(r.compile_ms)),
        (
            "compile_samples_ms",
            Json::Arr(r.compile_samples.iter().map(|&v| Json::Num(v)).collect()),
        ),
        (
            "upgrade_compile_ms",
            r.upgrade_compile_ms.map_or(Json::Null, Json::Num),
        ),
        ("time", stats(&r.time)),
        ("floor", stats(&r.floor)),
        ("floor_warm", stats(&r.floor_warm)),
        ("time_reused", stats(&r.time_reused)),
        ("ratio_to_floor", Json::Num(r.floor_ratio())),
        ("in_bytes", Json::Int(r.in_bytes as i128)),
        ("out_bytes", Json::Int(r.out_bytes as i128)),
        ("out_shape", dims(&r.out_shape)),
        (
            "peak_extra_bytes",
            r.peak_extra_bytes
                .map_or(Json::Null, |b| Json::Int(b as i128)),
        ),
        ("input_checksum", Json::str(r.input_checksum.to_string())),
        ("output_checksum", Json::str(r.output_checksum.to_string())),
        (
            "inputs",
            Json::Arr(
                w.inputs()
                    .iter()
                    .map(|i| {
                        Json::obj([
                            ("dtype", Json::str(i.dtype.name())),
                            ("shape", dims(&i.shape)),
                            ("seed", Json::Int(i.seed as i128)),
                            ("gen", Json::str(i.gen.name())),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "input_checksums",
            Json::Arr(
                r.input_checksums
                    .iter()
                    .map(|c| Json::str(c.to_string()))
                    .collect(),
            ),
        ),
        (
            "output_checksums",
            Json::Arr(
                r.output_checksums
                    .iter()
                    .map(|c| Json::str(c.to_string()))
                    .collect(),
            ),
        ),
        ("program", Json::Bool(w.is_program())),
        ("first_call_ms", Json::opt_num(r.first_call_ms)),
    ])
}

/// Facts about the machine and build for the `metadata` object of the JSON report.
pub fn metadata_json(threads: &[usize], opts: &BenchOptions) -> json::Json {
    use json::Json;
    let cmd = |prog: &str, args: &[&str]| {
        std::process::Command::new(prog)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let commit = cmd("git", &["rev-parse", "HEAD"]);
    // Benchmark outputs (results.json, the plot and its data) are not the code under test.
    let dirty = cmd(
        "git",
        &[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)benches/*.json",
            ":(exclude)benches/*.png",
        ],
    )
    .map(|s| !s.is_empty());
    Json::obj([
        (
            "machine",
            Json::str(model.unwrap_or_else(|| "unknown".into())),
        ),
        ("cores", Json::Int(cores as i128)),
        ("os", Json::str(std::env::consts::OS)),
        ("arch", Json::str(std::env::consts::ARCH)),
        (
            "rustc",
            Json::str(cmd("rustc", &["--version"]).unwrap_or_else(|| "unknown".into())),
        ),
        ("kiln_version", Json::str(env!("CARGO_PKG_VERSION"))),
        (
            "kiln_commit",
            Json::str(commit.unwrap_or_else(|| "unknown".into())),
        ),
        ("kiln_dirty", dirty.map_or(Json::Null, Json::Bool)),
        ("debug_build", Json::Bool(cfg!(debug_assertions))),
        (
            "threads",
            Json::Arr(threads.iter().map(|&t| Json::Int(t as i128)).collect()),
        ),
        ("min_time_s", Json::Num(opts.min_time)),
        (
            "loadavg_at_start",
            Json::str(
                std::fs::read_to_string("/proc/loadavg")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_copy_fills_destination_by_repeating_source() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let src: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let mut dst = vec![MaybeUninit::new(0xffu8); 250_000];
        parallel_copy(&pool, &src, &mut dst);
        for (i, d) in dst.iter().enumerate() {
            // SAFETY: every element was initialised by `vec!` (0xff, which no source byte
            // is) and is only ever overwritten with initialised bytes.
            let d = unsafe { d.assume_init() };
            assert_eq!(d, src[i % src.len()], "byte {i}");
        }
    }

    #[test]
    fn time_it_respects_min_reps_and_propagates_errors() {
        let opts = BenchOptions {
            min_time: 0.0,
            min_reps: 7,
            max_reps: 100,
            ..BenchOptions::default()
        };
        let mut calls = 0;
        let s = time_it::<()>(&opts, || {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(s.reps, 7);
        assert_eq!(calls, 8, "one warm-up plus the timed calls");
        let mut n = 0;
        let r = time_it(&opts, || {
            n += 1;
            if n == 3 {
                Err("boom")
            } else {
                Ok(())
            }
        });
        assert_eq!(r.unwrap_err(), "boom");
    }

    #[test]
    fn workloads_have_unique_names_and_4d_shapes() {
        let ws = workloads();
        let mut names: Vec<_> = ws.iter().map(|w| w.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ws.len());
        // Graph workloads take one [B, C, H, W] image; programs may take others.
        assert!(ws
            .iter()
            .all(|w| w.is_program() || (w.shape.len() == 4 && w.extra.is_empty())));
        assert_eq!(ws[0].with_side(256).shape, vec![1, 1, 256, 256]);
        let find = |n: &str| ws.iter().find(|w| w.name == n).unwrap().clone();
        // --sizes resizes each family as its Scale says.
        assert_eq!(
            find("edt_128cube").with_side(16).shape,
            vec![1, 1, 16, 16, 16]
        );
        let s = find("sinkhorn_d1024_b16").with_side(64);
        let shapes: Vec<_> = s.inputs().iter().map(|i| i.shape.clone()).collect();
        assert_eq!(shapes, vec![vec![16, 64], vec![16, 64], vec![64, 64]]);
        let g = find("sinkhorn_grid32_b1_1000it").with_side(8);
        let shapes: Vec<_> = g.inputs().iter().map(|i| i.shape.clone()).collect();
        assert_eq!(shapes, vec![vec![1, 64], vec![1, 64], vec![64, 64]]);
        let g = find("sinkhorn_grid32_axes_b1_1000it").with_side(8);
        let shapes: Vec<_> = g.inputs().iter().map(|i| i.shape.clone()).collect();
        assert_eq!(shapes, vec![vec![1, 64], vec![1, 64], vec![8, 8]]);
        let p = find("propagation_2048").with_side(32);
        assert_eq!(p.extra[0].shape, vec![1, 1, 32, 32]);
    }

    #[test]
    fn run_workload_times_the_fused_kernel_and_matches_eager() {
        let opts = BenchOptions {
            min_time: 0.0,
            min_reps: 2,
            max_reps: 2,
            ..BenchOptions::default()
        };
        let w = workloads()[0].with_side(64);
        let (row, out) = run_workload(&w, 2, &opts);
        assert_eq!(row.status, Status::Ok, "{:?}", row.status);
        assert_eq!(row.time.reps, 2);
        assert_eq!(row.out_shape, vec![1, 1, 64, 64]);
        assert_eq!(row.in_bytes, 64 * 64 * 4);
        assert_eq!(row.out_bytes, 64 * 64 * 4);
        assert!(row.compile_ms > 0.0 && row.kernels >= 1);
        // The reported compile time is the median of the fresh-engine compiles.
        assert_eq!(row.compile_samples.len(), COMPILE_REPEATS);
        let mut sorted = row.compile_samples.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(row.compile_ms, sorted[COMPILE_REPEATS / 2]);
        let graph = kiln_ops::build_op(&w.op, &w.params, &w.tensor_type()).unwrap();
        let x = generate(w.dtype, &w.shape, w.seed).unwrap();
        let want = crate::eager::run(&graph, std::slice::from_ref(&x)).unwrap();
        assert_eq!(row.input_checksum, checksum(&x));
        assert_eq!(row.output_checksum, checksum(&want[0]));
        assert_eq!(checksum(&out[0]), checksum(&want[0]));
        let j = row_json(&row).to_string();
        assert!(
            j.contains("\"status\": \"ok\"") && j.contains("\"name\": \"median3_2048\""),
            "{j}"
        );
    }

    #[test]
    fn unknown_operator_is_a_skipped_row() {
        let mut w = workloads()[0].with_side(8);
        w.op = "no_such_op".into();
        let (row, out) = run_workload(&w, 1, &BenchOptions::default());
        assert!(matches!(row.status, Status::Skipped(_)), "{:?}", row.status);
        assert!(out.is_empty());
        assert!(row_json(&row)
            .to_string()
            .contains("\"status\": \"skipped\""));
    }

    #[test]
    fn copy_floor_times_something() {
        let opts = BenchOptions {
            min_time: 0.0,
            min_reps: 3,
            max_reps: 3,
            ..BenchOptions::default()
        };
        let (fresh, warm) = copy_floor(1 << 20, 1 << 20, 2, &opts);
        assert_eq!(fresh.reps, 3);
        assert_eq!(warm.reps, 3);
        assert!(fresh.median > 0.0 && warm.median > 0.0);
    }
}
