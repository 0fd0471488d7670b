//! The conformance suite: eager against a backend, bit for bit, on hand-built graphs
//! (networks, windows under every border, multi-stage kernels, 3-D stencils, scans and
//! reductions along every axis, pointwise chains with casts) over every dtype they take,
//! degenerate and odd shapes, windows bigger than the image, three memory layouts, and data
//! full of NaN payloads, infinities, signed zeros, subnormals and ties.
//!
//! Scope: the cases are written once, against [`Runner`]s (anything that runs a graph:
//! [`Executor`] over any [`Backend`], or an engine configuration), and instantiated per
//! target by [`conformance_tests!`] (`conformance_cpu.rs`, `conformance_cuda.rs`).
//! Exactness: every output is compared with `first_difference` (bits, dtype and shape),
//! never with a tolerance. Limits: a target that cannot run here (no GPU) makes its tests
//! print SKIP and check nothing; they do not claim a pass in their output.
#![allow(dead_code, unused_macros, unused_imports)] // Each test crate uses the part it needs.

use kiln_ir::{
    BinaryOp, Border, DType, Footprint, Graph, GraphBuilder, NodeId, ReduceOp, Scalar, UnaryOp,
};
use kiln_runtime::backend::Backend;
use kiln_runtime::eager;
use kiln_runtime::executor::Executor;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{Storage, Tensor};

use crate::common::{Rng, SPECIAL_F32};

pub mod math;
pub mod ops;

pub mod int_dtypes;

/// Every case, under one path for [`conformance_tests!`].
pub mod cases {
    pub use super::extern_line_functions_along_every_axis;
    pub use super::int_dtypes::*;
    pub use super::math::*;
    pub use super::ops::*;
    pub use super::{
        grey_opening_and_a_gather_of_it, median_network_with_nan_mask,
        network_with_extra_wires_and_two_outputs, pointwise_chains_with_casts_and_mixed_groups,
        scans_and_reductions_along_every_axis, shifted_pointwise_trees_under_constant_borders,
        three_d_stencils, unusual_outputs_and_unused_inputs, windows_under_every_border,
    };
}

/// Something that runs graphs on a target.
pub trait Runner {
    /// What to call it in failure messages.
    fn name(&self) -> String;
    /// Runs `graph` on `inputs`.
    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String>;
    /// Whether the target runs extern line functions (host code: the CPU only); a target
    /// that does not must refuse them with a clear error.
    fn runs_externs(&self) -> bool {
        true
    }
}

impl<B: Backend> Runner for Executor<B> {
    fn name(&self) -> String {
        format!("{} executor", self.backend().name())
    }

    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        Executor::run(self, graph, inputs).map_err(|e| e.to_string())
    }

    fn runs_externs(&self) -> bool {
        self.backend().name() == "cpu"
    }
}

/// Defines one `#[test]` per conformance case, each running the case on the runners that
/// `$runners()` (an `Option<Vec<Box<dyn Runner>>>`) gives; `None` means the target is not
/// available here, and the test prints SKIP (the function says why) and checks nothing.
macro_rules! conformance_tests {
    ($runners:path) => {
        conformance_tests!(@cases $runners,
            median_network_with_nan_mask,
            network_with_extra_wires_and_two_outputs,
            windows_under_every_border,
            grey_opening_and_a_gather_of_it,
            shifted_pointwise_trees_under_constant_borders,
            three_d_stencils,
            scans_and_reductions_along_every_axis,
            pointwise_chains_with_casts_and_mixed_groups,
            unusual_outputs_and_unused_inputs,
            median_blur_all_k,
            median_filter_all_k_all_modes,
            grey_morphology_all_k_all_modes,
            grey_morphology_rectangular_and_origin,
            gradient_magnitude_all_modes,
            binary_erosion_structures_and_border_values,
            f64_operators,
            large_windows_take_the_decomposed_path,
            int_windows_networks_and_scans,
            int_opening_and_tophat,
            int_pointwise_and_casts,
            int_grey_morphology_and_median,
            extern_line_functions_along_every_axis,
            morphology_tophats_and_binary_family,
            exp_and_log_pointwise_stencils_and_reductions
        );
    };
    (@cases $runners:path, $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                let Some(runners) = $runners() else {
                    return;
                };
                let refs: Vec<&dyn conformance::Runner> =
                    runners.iter().map(|r| r.as_ref()).collect();
                conformance::cases::$case(&refs);
            }
        )*
    };
}

/// Runs `graph` eagerly and on every runner, on inputs made for it in every layout (with
/// special values), then once more contiguous without special values; asserts equal bits
/// and contiguous outputs.
pub fn check(runners: &[&dyn Runner], graph: &Graph, what: &str) {
    let rank = graph.inputs.first().map_or(0, |t| t.shape.len());
    let mut layouts_data: Vec<(String, Vec<Tensor>)> = Vec::new();
    for (li, layout) in layouts(rank).iter().enumerate() {
        let inputs = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| {
                data(ty.dtype, &ty.shape, 7 + i as u64 * 31 + li as u64, true)
                    .with_memory_order(layout)
                    .unwrap()
            })
            .collect();
        layouts_data.push((format!("layout {layout:?}"), inputs));
    }
    for specials in [true, false] {
        let inputs = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, ty)| data(ty.dtype, &ty.shape, 5 + i as u64 * 17, specials))
            .collect();
        layouts_data.push((format!("contiguous, specials {specials}"), inputs));
    }
    check_sets(runners, graph, what, &layouts_data);
}

/// Runs `graph` eagerly and on every runner on each named input set of `sets`; asserts
/// equal bits and contiguous outputs.
pub fn check_sets(
    runners: &[&dyn Runner],
    graph: &Graph,
    what: &str,
    sets: &[(String, Vec<Tensor>)],
) {
    for (how, inputs) in sets {
        let want = eager::run(graph, inputs).unwrap();
        for r in runners {
            let got = r
                .run(graph, inputs)
                .unwrap_or_else(|e| panic!("{what}: {} failed ({how}): {e}", r.name()));
            assert_eq!(want.len(), got.len(), "{what}: {} output count", r.name());
            for (k, (w, g)) in want.iter().zip(&got).enumerate() {
                assert!(
                    g.is_contiguous(),
                    "{what}: {} output {k} not contiguous",
                    r.name()
                );
                if let Some(d) = first_difference(w, g) {
                    panic!(
                        "{what}: output {k}, {how}, shape {:?}: eager vs {} differ at {d}",
                        graph.inputs.first().map(|t| t.shape.clone()),
                        r.name()
                    );
                }
            }
        }
    }
}

/// Memory layouts for an input of rank `rank`: contiguous, last two axes swapped, channels
/// last (rank 2 and up; lower ranks only contiguous).
pub fn layouts(rank: usize) -> Vec<Vec<usize>> {
    let id: Vec<usize> = (0..rank).collect();
    if rank < 2 {
        return vec![id];
    }
    let mut t = id.clone();
    t.swap(rank - 1, rank - 2);
    let mut cl = vec![0];
    cl.extend(2..rank);
    cl.push(1);
    vec![id, t, cl]
}

/// Deterministic test data of `dtype`: small integers (many ties), random values and the
/// special values above.
pub fn data(dtype: DType, shape: &[usize], seed: u64, specials: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let mut r = Rng::new(seed);
    let storage = match dtype {
        DType::F32 => Storage::F32(
            (0..n)
                .map(|_| {
                    let k = r.next();
                    match k % 8 {
                        0 if specials => f32::from_bits(SPECIAL_F32[(k / 8) as usize % 12]),
                        1 | 2 => ((k / 8) % 5) as f32 - 2.0,
                        _ => (k % 20011) as f32 * 0.013 - 100.0,
                    }
                })
                .collect(),
        ),
        DType::F64 => Storage::F64(
            (0..n)
                .map(|_| {
                    let k = r.next();
                    match k % 8 {
                        0 if specials => {
                            let s = f32::from_bits(SPECIAL_F32[(k / 8) as usize % 12]);
                            if s.is_nan() {
                                f64::from_bits(0x7ff8_0000_0000_0000 | (k & 0xffff))
                            } else {
                                s as f64
                            }
                        }
                        1 | 2 => ((k / 8) % 5) as f64 - 2.0,
                        _ => (k % 20011) as f64 * 0.0131 - 100.0,
                    }
                })
                .collect(),
        ),
        DType::U8 => Storage::U8((0..n).map(|_| (r.next() % 256) as u8).collect()),
        DType::Bool => Storage::Bool((0..n).map(|_| r.next().is_multiple_of(3) as u8).collect()),
        // The other integers: small values around zero (ties; signed and unsigned orders
        // differ there), the dtype's extremes and their neighbours, and random bit patterns.
        d => {
            let (lo, hi) = d.int_range().unwrap();
            let mut st = Storage::zeros(d, n);
            for i in 0..n {
                let k = r.next();
                let v = match k % 8 {
                    0 | 1 => ((k / 8) % 5) as i64 - 2,
                    2 if specials => [lo, lo + 1, hi - 1, hi][(k / 8) as usize % 4],
                    _ => (k >> 16) as i64,
                };
                st.set(i, Scalar::wrap_int(d, v).unwrap());
            }
            st
        }
    };
    Tensor::from_storage(storage, shape).unwrap()
}

pub const SHAPES_2D: [[usize; 4]; 7] = [
    [1, 1, 1, 1],
    [1, 1, 1, 9],
    [1, 1, 9, 1],
    [1, 1, 2, 3],
    [2, 3, 7, 5],
    [1, 1, 17, 33],
    [1, 2, 40, 21],
];

pub fn cval_of(dtype: DType) -> Scalar {
    match dtype {
        DType::F32 => Scalar::f32(-0.0),
        DType::F64 => Scalar::f64(f64::from_bits(0x7ff8_0000_0000_0042)),
        DType::U8 => Scalar::U8(17),
        DType::Bool => Scalar::Bool(true),
        DType::I8 => Scalar::I8(-7),
        DType::U16 => Scalar::U16(65000),
        DType::I16 => Scalar::I16(-300),
        DType::I32 => Scalar::I32(i32::MIN + 5),
        DType::U32 => Scalar::U32(u32::MAX - 3),
    }
}

/// Odd-even transposition sort network on `n` wires (n rounds): a valid sorting network.
pub fn sort_pairs(n: u32) -> Vec<(u32, u32)> {
    let mut p = Vec::new();
    for round in 0..n {
        let mut i = round % 2;
        while i + 1 < n {
            p.push((i, i + 1));
            i += 2;
        }
    }
    p
}

/// kornia-style median 3x3: nine gathers under a border, a sorting network's middle wire,
/// NaN where any tap is NaN.
pub fn median3(dtype: DType, shape: &[usize], border: Border) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let mut taps = Vec::new();
    for dy in -1..=1 {
        for dx in -1..=1 {
            taps.push(b.gather(x, &[dy, dx], border).unwrap());
        }
    }
    let med = b.network(&taps, 9, &sort_pairs(9), 4).unwrap();
    if !dtype.is_float() {
        return b.finish(&[med]).unwrap();
    }
    let nans: Vec<NodeId> = taps
        .iter()
        .map(|&t| b.unary(UnaryOp::IsNan, t).unwrap())
        .collect();
    let mut any = nans[0];
    for &n in &nans[1..] {
        any = b.binary(BinaryOp::Or, any, n).unwrap();
    }
    let nan = b
        .constant_like(Scalar::from_f64(dtype, f64::NAN), x)
        .unwrap();
    let out = b.select(any, nan, med).unwrap();
    b.finish(&[out]).unwrap()
}

pub fn window(
    dtype: DType,
    shape: &[usize],
    op: ReduceOp,
    fp: &Footprint,
    border: Border,
) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input(dtype, shape).unwrap();
    let w = b.window_reduce(x, op, fp, border).unwrap();
    b.finish(&[w]).unwrap()
}

pub fn median_network_with_nan_mask(runners: &[&dyn Runner]) {
    for shape in SHAPES_2D {
        for dtype in [DType::F32, DType::F64, DType::U8] {
            for border in Border::all(cval_of(dtype)) {
                let g = median3(dtype, &shape, border);
                check(runners, &g, &format!("median {dtype} {border}"));
            }
        }
    }
}

pub fn network_with_extra_wires_and_two_outputs(runners: &[&dyn Runner]) {
    for dtype in [DType::F32, DType::U8, DType::Bool] {
        let mut b = GraphBuilder::new();
        let x = b.input(dtype, &[1, 1, 6, 7]).unwrap();
        let y = b.gather(x, &[0, 1], Border::Wrap).unwrap();
        let z = b.gather(x, &[1, -1], Border::Mirror).unwrap();
        let pairs = [(0, 3), (1, 2), (0, 1), (2, 3), (1, 2)];
        let lo = b.network(&[x, y, z], 4, &pairs, 0).unwrap();
        let hi = b.network(&[x, y, z], 4, &pairs, 3).unwrap();
        let mid = b.network(&[x, y, z], 4, &pairs, 2).unwrap();
        let g = b.finish(&[lo, hi, mid, x]).unwrap();
        check(runners, &g, &format!("network {dtype}"));
    }
}

pub fn windows_under_every_border(runners: &[&dyn Runner]) {
    let fps = [
        Footprint::scipy_box(&[3, 3], &[0, 0]),
        Footprint::scipy_box(&[2, 5], &[0, 1]),
        Footprint::scipy_masked(
            &[3, 3],
            &[false, true, false, true, true, true, false, true, false],
            &[0, 0],
        ),
        // bigger than most test images
        Footprint::scipy_box(&[7, 9], &[0, 0]),
    ];
    for shape in SHAPES_2D {
        for fp in &fps {
            for (dtype, ops) in [
                (
                    DType::F32,
                    &[ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum][..],
                ),
                (DType::F64, &[ReduceOp::Sum, ReduceOp::Max][..]),
                (DType::U8, &[ReduceOp::Sum, ReduceOp::Min][..]),
                (DType::Bool, &[ReduceOp::Any, ReduceOp::All][..]),
            ] {
                for &op in ops {
                    for border in Border::all(cval_of(dtype)) {
                        let g = window(dtype, &shape, op, fp, border);
                        check(
                            runners,
                            &g,
                            &format!("window {dtype} {op:?} {border} {fp:?}"),
                        );
                    }
                }
            }
        }
    }
}

pub fn grey_opening_and_a_gather_of_it(runners: &[&dyn Runner]) {
    let fp = Footprint::scipy_box(&[3, 5], &[0, 0]);
    for shape in SHAPES_2D {
        for dtype in [DType::F32, DType::U8] {
            for border in Border::all(cval_of(dtype)) {
                let mut b = GraphBuilder::new();
                let x = b.input(dtype, &shape).unwrap();
                let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
                let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
                let g = b.finish(&[d]).unwrap();
                check(runners, &g, &format!("opening {dtype} {border}"));
                // three stages: top-hat style x - opening, with a gather of the opening
                let mut b = GraphBuilder::new();
                let x = b.input(dtype, &shape).unwrap();
                let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
                let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
                let s = b.gather(d, &[-2, 3], Border::Wrap).unwrap();
                let t = b.binary(BinaryOp::Max, s, x).unwrap();
                let g = b.finish(&[t]).unwrap();
                check(runners, &g, &format!("opening+gather {dtype} {border}"));
            }
        }
    }
}

pub fn shifted_pointwise_trees_under_constant_borders(runners: &[&dyn Runner]) {
    for shape in SHAPES_2D {
        for border in Border::all(Scalar::f32(3.5)) {
            let mut b = GraphBuilder::new();
            let x = b.input(DType::F32, &shape).unwrap();
            let y = b.input(DType::F32, &shape).unwrap();
            let two = b.constant_like(Scalar::f32(2.0), x).unwrap();
            let m = b.binary(BinaryOp::Mul, x, two).unwrap();
            let a = b.binary(BinaryOp::Sub, m, y).unwrap();
            let s = b.unary(UnaryOp::Abs, a).unwrap();
            let g1 = b.gather(s, &[1, -2], border).unwrap();
            let g2 = b.gather(s, &[-1, 0], border).unwrap();
            let c = b
                .gather(two, &[0, 5], Border::Constant(Scalar::f32(-1.0)))
                .unwrap();
            let p = b.binary(BinaryOp::Add, g1, g2).unwrap();
            let q = b.binary(BinaryOp::Mul, p, c).unwrap();
            let w = b
                .window_reduce(
                    s,
                    ReduceOp::Sum,
                    &Footprint::scipy_box(&[3, 3], &[0, 0]),
                    border,
                )
                .unwrap();
            let out = b.binary(BinaryOp::Add, q, w).unwrap();
            let g = b.finish(&[out]).unwrap();
            check(runners, &g, &format!("shifted tree {border}"));
        }
    }
}

pub fn three_d_stencils(runners: &[&dyn Runner]) {
    for shape in [
        [1, 1, 1, 1, 1],
        [1, 1, 3, 1, 4],
        [1, 2, 5, 6, 7],
        [2, 1, 4, 9, 3],
    ] {
        for border in Border::all(Scalar::f32(0.25)) {
            let fp = Footprint::scipy_box(&[3, 3, 3], &[0, 0, 0]);
            let mut b = GraphBuilder::new();
            let x = b.input(DType::F32, &shape).unwrap();
            let e = b.window_reduce(x, ReduceOp::Min, &fp, border).unwrap();
            let d = b.window_reduce(e, ReduceOp::Max, &fp, border).unwrap();
            let s = b.window_reduce(x, ReduceOp::Sum, &fp, border).unwrap();
            let g = b.gather(x, &[2, -1, 1], border).unwrap();
            let o = b.binary(BinaryOp::Add, s, g).unwrap();
            let graph = b.finish(&[d, o]).unwrap();
            check(runners, &graph, &format!("3-D {border} {shape:?}"));
        }
    }
    // 1-D spatial: rows are (b, c) only.
    for border in Border::all(Scalar::U8(9)) {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::U8, &[2, 3, 11]).unwrap();
        let w = b
            .window_reduce(x, ReduceOp::Sum, &Footprint::scipy_box(&[5], &[1]), border)
            .unwrap();
        let e = b
            .window_reduce(w, ReduceOp::Max, &Footprint::scipy_box(&[3], &[0]), border)
            .unwrap();
        let graph = b.finish(&[e]).unwrap();
        check(runners, &graph, &format!("1-D {border}"));
    }
}

pub fn scans_and_reductions_along_every_axis(runners: &[&dyn Runner]) {
    for shape in [
        [1usize, 1, 1, 1],
        [2, 3, 4, 5],
        [1, 1, 1, 300],
        [1, 1, 300, 1],
        [3, 2, 9, 17],
    ] {
        for axis in 0..4 {
            for (dtype, ops) in [
                (
                    DType::F32,
                    &[ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max][..],
                ),
                (DType::F64, &[ReduceOp::Sum][..]),
                (DType::U8, &[ReduceOp::Sum, ReduceOp::Max][..]),
                (DType::Bool, &[ReduceOp::Any, ReduceOp::All][..]),
            ] {
                for &op in ops {
                    let mut b = GraphBuilder::new();
                    let x = b.input(dtype, &shape).unwrap();
                    let s = b.scan(x, axis, op).unwrap();
                    let r = b.axis_reduce(x, axis, op).unwrap();
                    let g = b.finish(&[s, r]).unwrap();
                    check(
                        runners,
                        &g,
                        &format!("scan/reduce {dtype} {op:?} axis {axis}"),
                    );
                }
            }
        }
    }
}

pub fn pointwise_chains_with_casts_and_mixed_groups(runners: &[&dyn Runner]) {
    for shape in SHAPES_2D {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &shape).unwrap();
        let u = b.input(DType::U8, &shape).unwrap();
        let xs = b.unary(UnaryOp::Sqrt, x).unwrap();
        let xn = b.unary(UnaryOp::Neg, xs).unwrap();
        let xd = b.cast(xn, DType::F64).unwrap();
        let uf = b.cast(u, DType::F64).unwrap();
        let q = b.binary(BinaryOp::Div, xd, uf).unwrap();
        let qf = b.cast(q, DType::F32).unwrap();
        let qu = b.cast(qf, DType::U8).unwrap();
        let w = b.binary(BinaryOp::Mul, qu, u).unwrap();
        let wd = b.binary(BinaryOp::Div, u, qu).unwrap();
        let lt = b.binary(BinaryOp::Lt, w, wd).unwrap();
        let fin = b.unary(UnaryOp::IsFinite, x).unwrap();
        let both = b.binary(BinaryOp::And, lt, fin).unwrap();
        let nb = b.unary(UnaryOp::Not, both).unwrap();
        let sel = b.select(nb, qf, x).unwrap();
        let bf = b.cast(both, DType::F32).unwrap();
        let mn = b.binary(BinaryOp::Min, sel, bf).unwrap();
        // a stencil over a scan output, and a scan over a stencil output
        let sc = b.scan(mn, 3, ReduceOp::Sum).unwrap();
        let gs = b.gather(sc, &[1, 1], Border::Reflect).unwrap();
        let mx = b.binary(BinaryOp::Max, gs, mn).unwrap();
        let red = b.axis_reduce(mx, 2, ReduceOp::Min).unwrap();
        let g = b.finish(&[mx, red, u, nb]).unwrap();
        check(runners, &g, &format!("pointwise chain {shape:?}"));
    }
}

pub fn unusual_outputs_and_unused_inputs(runners: &[&dyn Runner]) {
    for shape in [[1usize, 1, 1, 1], [1, 2, 5, 4]] {
        let mut b = GraphBuilder::new();
        let x = b.input(DType::F32, &shape).unwrap();
        let _unused = b.input(DType::U8, &shape).unwrap();
        let k = b.constant_like(Scalar::f32(-0.0), x).unwrap();
        let p = b.binary(BinaryOp::Add, x, k).unwrap();
        let g1 = b.gather(p, &[1, 1], Border::Wrap).unwrap();
        let q = b.binary(BinaryOp::Mul, g1, p).unwrap();
        let g = b.finish(&[q, k, p, q, x]).unwrap();
        check(runners, &g, &format!("unusual outputs {shape:?}"));
    }
}

/// Extern line functions (the built-ins) between fused producers and consumers, along every
/// axis and both directions; a target that cannot run externs must refuse each graph with
/// the typed refusal's message.
pub fn extern_line_functions_along_every_axis(runners: &[&dyn Runner]) {
    let (cpu, others): (Vec<&dyn Runner>, Vec<&dyn Runner>) =
        runners.iter().copied().partition(|r| r.runs_externs());
    for shape in [
        [1usize, 1, 1, 1],
        [2, 3, 4, 5],
        [1, 1, 1, 300],
        [3, 2, 9, 17],
    ] {
        for axis in 0..4 {
            for backward in [false, true] {
                let ext = |name: &str, out: DType, params: Vec<Scalar>| kiln_ir::ExternCall {
                    name: name.into(),
                    axis,
                    backward,
                    out,
                    params,
                };
                let mut b = GraphBuilder::new();
                let x = b.input(DType::F32, &shape).unwrap();
                let u = b.input(DType::U8, &shape).unwrap();
                let a = b.unary(UnaryOp::Neg, x).unwrap();
                let m = b
                    .line_extern(a, ext("kiln.median3", DType::F32, vec![]))
                    .unwrap();
                let s = b.binary(BinaryOp::Add, m, x).unwrap();
                let d = b
                    .line_extern(u, ext("kiln.nearest_true", DType::F32, vec![]))
                    .unwrap();
                let t = b
                    .line_extern(
                        u,
                        ext("kiln.since_true", DType::F32, vec![Scalar::f32(0.25)]),
                    )
                    .unwrap();
                let dt = b.binary(BinaryOp::Min, d, t).unwrap();
                let c = b
                    .line_extern(dt, ext("kiln.copy", DType::F32, vec![]))
                    .unwrap();
                let g = b.finish(&[s, c]).unwrap();
                let what = format!("externs {shape:?} axis {axis} backward {backward}");
                check(&cpu, &g, &what);
                for r in &others {
                    let inputs: Vec<Tensor> = g
                        .inputs
                        .iter()
                        .map(|ty| data(ty.dtype, &ty.shape, 3, false))
                        .collect();
                    match r.run(&g, &inputs) {
                        Err(e) => assert!(
                            e.contains("cannot run on this target"),
                            "{what}: {} refused with {e}",
                            r.name()
                        ),
                        Ok(_) => panic!("{what}: {} ran an extern", r.name()),
                    }
                }
            }
        }
    }
}
