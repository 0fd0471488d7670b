//! Footprints that are not boxes, and windows whose origin reaches past their centre, run
//! fused with code that grows with their runs, never with their area (issue 27:
//! `kiln_ir::passes::footprint`, called from `long_windows`).
//!
//! * Discs, rings and sparse structures with a wide extent (`grey_erosion`/`grey_dilation`
//!   `footprint=`, `binary_erosion` `structure=`) under every border mode, on images from 1x1
//!   up, match the eager oracle bit for bit (NaN payloads, signed zeros, infinities in the
//!   data), with the window passes on and with chains alone.
//! * Long reflect/mirror windows with origins of ±32 and more (left whole before), and long
//!   windows not holding offset 0, likewise.
//! * Structure: every chain stage has at most 3 reads, every final stage at most
//!   `CHUNK_READS` (more reads become chunks through identity lines); the issue's 250x250
//!   disc and a 255x255 checkerboard on a 4096² image lower (they were refused by the JIT
//!   limit).
//! * One large-image case runs fused on 2048² with a 125-radius disc and is checked at sampled
//!   points against the definition (the oracle would take minutes).

mod common;

use common::window_data;
use kiln_codegen::kernel::{KernelBody, Op};
use kiln_ir::passes::footprint::{best_cut, CHUNK_READS};
use kiln_ir::passes::{optimize_with, StageStorage, WindowBounds};
use kiln_ir::{DType, Footprint, Graph, NodeKind, TensorType};
use kiln_runtime::eager;
use kiln_runtime::executor::lower_graph_with;
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::Tensor;

/// Registry parameters, `name=value`.
type Params<'a> = Vec<(&'a str, String)>;

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

/// A mask as the registry's `footprint=`/`structure=` text.
fn mask_text(mask: &[Vec<bool>]) -> String {
    mask.iter()
        .map(|r| {
            r.iter()
                .map(|&b| if b { "1" } else { "0" })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// A disc of radius `r` (`(2r+1)²` mask).
fn disc(r: i64) -> Vec<Vec<bool>> {
    (-r..=r)
        .map(|y| (-r..=r).map(|x| x * x + y * y <= r * r).collect())
        .collect()
}

/// A ring of radii `(r−w, r]`.
fn ring(r: i64, w: i64) -> Vec<Vec<bool>> {
    (-r..=r)
        .map(|y| {
            (-r..=r)
                .map(|x| {
                    let d = x * x + y * y;
                    d <= r * r && d > (r - w) * (r - w)
                })
                .collect()
        })
        .collect()
}

/// A sparse structure with a wide extent: three rows, isolated points and a long run off
/// centre (`rows x cols`).
fn sparse(rows: usize, cols: usize) -> Vec<Vec<bool>> {
    let mut m = vec![vec![false; cols]; rows];
    for c in (0..cols).step_by(7) {
        m[0][c] = true;
    }
    for v in &mut m[rows / 2][cols / 2..] {
        *v = true;
    }
    m[rows - 1][0] = true;
    m[rows - 1][cols - 1] = true;
    m
}

/// A checkerboard of `n x n` (every run one offset long, on either axis).
fn checker(n: usize) -> Vec<Vec<bool>> {
    (0..n)
        .map(|y| (0..n).map(|x| (x + y) % 2 == 0).collect())
        .collect()
}

fn same(want: &Tensor, got: &Tensor, what: &str) {
    if let Some(d) = first_difference(want, got) {
        panic!("{what}: differ at {d}");
    }
}

const CHAINS_ONLY: WindowBounds = WindowBounds {
    clip: false,
    chains: true,
};

/// Eager on `g` is the oracle; eager on the rewrite and fused (passes on, chains alone) agree.
fn check_bits(g: &Graph, x: &Tensor, what: &str) {
    let want = eager::run(g, std::slice::from_ref(x)).unwrap();
    let rewritten = optimize_with(g, StageStorage::ScratchRows, WindowBounds::default());
    let got = eager::run(&rewritten, std::slice::from_ref(x)).unwrap();
    same(&want[0], &got[0], &format!("{what} (rewrite, eager)"));
    for bounds in [WindowBounds::default(), CHAINS_ONLY] {
        let engine = Engine::new().with_window_bounds(bounds);
        let got = engine.run(g, std::slice::from_ref(x)).unwrap();
        same(&want[0], &got[0], &format!("{what} (fused, {bounds:?})"));
    }
}

fn data(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let f = window_data(shape, seed, true);
    if dtype == DType::F32 {
        return f;
    }
    let mut b = kiln_ir::GraphBuilder::new();
    let x = b.input(DType::F32, shape).unwrap();
    let z = b.constant(kiln_ir::Scalar::F32(0), shape).unwrap();
    let c = b.binary(kiln_ir::BinaryOp::Gt, x, z).unwrap();
    let g = b.finish(&[c]).unwrap();
    eager::run(&g, &[f]).unwrap().remove(0)
}

const MODES: [(&str, Option<&str>); 6] = [
    ("reflect", None),
    ("mirror", None),
    ("nearest", None),
    ("wrap", None),
    ("constant", Some("-0.0")),
    ("constant", Some("nan")),
];

/// Non-box footprints under every mode, grey and binary, eager == fused.
#[test]
fn non_box_footprints_match_eager() {
    let masks = [
        ("disc 20", disc(20)),
        ("ring 24/3", ring(24, 3)),
        ("sparse 5x150", sparse(5, 150)),
        // 421 runs of one offset: four chunks through identity lines.
        ("checker 29", checker(29)),
    ];
    let shapes = [vec![1, 1, 1, 1], vec![1, 1, 7, 9], vec![1, 1, 61, 83]];
    for (name, mask) in &masks {
        let text = mask_text(mask);
        for shape in &shapes {
            for (mode, cval) in MODES {
                for op in ["grey_erosion", "grey_dilation"] {
                    let mut params = vec![("footprint", text.clone()), ("mode", mode.into())];
                    if let Some(c) = cval {
                        params.push(("cval", c.into()));
                    }
                    let what = format!("{op} {name} mode={mode} cval={cval:?} on {shape:?}");
                    let g = build(op, &params, DType::F32, shape);
                    check_bits(&g, &data(DType::F32, shape, 11), &what);
                }
            }
            for border_value in ["0", "1"] {
                let params = vec![
                    ("structure", text.clone()),
                    ("border_value", border_value.into()),
                ];
                let what = format!("binary_erosion {name} border_value={border_value} {shape:?}");
                let g = build("binary_erosion", &params, DType::Bool, shape);
                check_bits(&g, &data(DType::Bool, shape, 5), &what);
            }
        }
    }
}

/// Long windows whose origin reaches 32 or more past the centre under reflect/mirror (left
/// whole before: one stage of every offset), and a box with a long axis off centre.
#[test]
fn far_origins_match_eager() {
    let cases: [(&str, &str); 6] = [
        ("1,200", "0,90"),
        ("1,200", "0,-100"),
        ("1,129", "0,-40"),
        ("150,1", "60,0"),
        ("101,3", "-50,1"),
        ("70,70", "34,-35"),
    ];
    for shape in [[1usize, 1, 1, 1], [1, 1, 37, 41], [1, 1, 160, 170]] {
        for (size, origin) in cases {
            for (mode, cval) in MODES {
                for op in ["grey_erosion", "grey_dilation"] {
                    let mut params = vec![
                        ("size", size.to_string()),
                        ("origin", origin.to_string()),
                        ("mode", mode.to_string()),
                    ];
                    if let Some(c) = cval {
                        params.push(("cval", c.into()));
                    }
                    let what = format!("{op} size={size} origin={origin} {mode} on {shape:?}");
                    let g = build(op, &params, DType::F32, &shape);
                    check_bits(&g, &data(DType::F32, &shape, 3), &what);
                }
            }
        }
    }
}

/// Loads in a stage (reads of inputs or earlier stages).
fn loads(stage: &kiln_codegen::kernel::Stage) -> usize {
    stage
        .insts
        .iter()
        .filter(|i| matches!(i.op, Op::Load { .. }))
        .count()
}

/// The footprint of the one window of `g`.
fn the_footprint(g: &Graph) -> Footprint {
    g.nodes
        .iter()
        .find_map(|n| match &n.kind {
            NodeKind::WindowReduce { footprint, .. } => Some(footprint.clone()),
            _ => None,
        })
        .expect("a window")
}

/// The issue's 250x250 disc, a wide ring and a 255x255 checkerboard on a 4096² image lower
/// for both pipelines (they were refused by the JIT limit), with chain stages of at most 3
/// reads, final stages of at most `CHUNK_READS`, and kernels growing with the runs.
#[test]
fn big_footprints_lower_with_bounded_stages() {
    let shape = [1usize, 1, 4096, 4096];
    let cases = [
        ("grey_erosion", "footprint", disc(125), DType::F32),
        ("grey_dilation", "footprint", ring(120, 4), DType::F32),
        ("binary_erosion", "structure", disc(125), DType::Bool),
        ("grey_erosion", "footprint", checker(255), DType::F32),
    ];
    for (op, key, mask, dtype) in cases {
        for mode in ["reflect", "nearest", "wrap", "constant"] {
            let params = vec![(key, mask_text(&mask)), ("mode", mode.into())];
            let params = if op == "binary_erosion" {
                vec![(key, mask_text(&mask))]
            } else {
                params
            };
            let g = build(op, &params, dtype, &shape);
            let runs = best_cut(&the_footprint(&g)).1.len();
            let mut kernels = 0;
            for storage in [StageStorage::ScratchRows, StageStorage::DevicePasses] {
                let what = format!("{op} mode={mode} ({storage:?})");
                let lowered = lower_graph_with(&g, storage, WindowBounds::default())
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                kernels = lowered.kernels.len();
                // Chunks of CHUNK_READS reads (at most four per run), each a kernel and a
                // line, plus the chain kernels and the final one.
                assert!(
                    kernels <= 2 * (4 * runs).div_ceil(CHUNK_READS) + 16,
                    "{what}: {kernels}"
                );
                for k in &lowered.kernels {
                    let KernelBody::Stencil { stages } = &k.body else {
                        continue;
                    };
                    let last = stages.len() - 1;
                    for (j, s) in stages.iter().enumerate() {
                        let n = loads(s);
                        let bound = if j == last { CHUNK_READS } else { 4 };
                        assert!(n <= bound, "{what}: stage {j}/{last} has {n} loads");
                    }
                }
            }
            println!("{op} mode={mode}: {runs} runs, {kernels} kernels");
        }
    }
}

/// One large image, fused only: a 125-radius disc erosion on 2048², checked at sampled
/// points against the definition (min over the disc of the reflected input; no NaN in the
/// data, so every min is an exact selection).
#[test]
fn large_image_disc_runs_fused() {
    let (h, w) = (2048usize, 2048usize);
    let shape = [1usize, 1, h, w];
    let mask = disc(125);
    let g = build(
        "grey_erosion",
        &[("footprint", mask_text(&mask))],
        DType::F32,
        &shape,
    );
    let x = window_data(&shape, 9, false);
    let t = std::time::Instant::now();
    let got = Engine::new().run(&g, std::slice::from_ref(&x)).unwrap();
    println!("2048² disc 125 fused: {:.2?} (compile + run)", t.elapsed());
    let at = |t: &Tensor, y: usize, c: usize| match t.get(&[0, 0, y, c]) {
        kiln_ir::Scalar::F32(bits) => f32::from_bits(bits),
        s => panic!("not f32: {s:?}"),
    };
    let border = kiln_ir::Border::Reflect;
    let r = 125i64;
    let mut rng = common::Rng::new(17);
    let mut points: Vec<(usize, usize)> = vec![(0, 0), (h - 1, w - 1), (3, w - 5), (h / 2, 7)];
    points.extend((0..40).map(|_| (rng.next() as usize % h, rng.next() as usize % w)));
    for (y, c) in points {
        let mut m = f32::INFINITY;
        for dy in -r..=r {
            for dx in -r..=r {
                if dx * dx + dy * dy > r * r {
                    continue;
                }
                let yy = kiln_ir::semantics::remap_index(y as i64 + dy, h, &border).unwrap();
                let xx = kiln_ir::semantics::remap_index(c as i64 + dx, w, &border).unwrap();
                m = m.min(at(&x, yy, xx));
            }
        }
        let v = at(&got[0], y, c);
        assert_eq!(v.to_bits(), m.to_bits(), "at ({y}, {c}): {v} vs {m}");
    }
}

/// The issue's remaining refusals at reduced image sizes that keep the same code path (the
/// footprints are not clipped: every offset lies inside the image): a 250x250 disc for
/// `grey_erosion` and `binary_erosion`, and a reflect/mirror window of 12001 offsets with
/// origin 100 (was one stage of 24001 instructions, past the JIT limit of 20000).
#[test]
fn issue_cases_at_reduced_size_match_eager() {
    let d = mask_text(&disc(125));
    let cases: Vec<(&str, Params, DType, Vec<usize>)> = vec![
        (
            "grey_erosion",
            vec![("footprint", d.clone())],
            DType::F32,
            vec![1, 1, 130, 131],
        ),
        (
            "binary_erosion",
            vec![("structure", d)],
            DType::Bool,
            vec![1, 1, 130, 131],
        ),
        (
            "grey_erosion",
            vec![("size", "1,12001".into()), ("origin", "0,100".into())],
            DType::F32,
            vec![1, 1, 2, 6200],
        ),
        (
            "grey_dilation",
            vec![
                ("size", "12001,1".into()),
                ("origin", "-100,0".into()),
                ("mode", "mirror".into()),
            ],
            DType::F32,
            vec![1, 1, 6200, 2],
        ),
    ];
    for (op, params, dtype, shape) in cases {
        let what = format!("{op} on {shape:?}");
        let g = build(op, &params, dtype, &shape);
        let lowered = lower_graph_with(&g, StageStorage::ScratchRows, WindowBounds::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let largest = lowered
            .kernels
            .iter()
            .filter_map(|k| match &k.body {
                KernelBody::Stencil { stages } => stages.iter().map(|s| s.insts.len()).max(),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        assert!(largest <= 2000, "{what}: a stage of {largest} instructions");
        check_bits(&g, &data(dtype, &shape, 21), &what);
    }
}

/// Chunked footprints on the GPU pipeline: every kernel (chain, chunk, identity line, final
/// combine) renders to PTX, and assembles where ptxas is found.
#[test]
fn chunked_footprints_render_to_ptx() {
    let target = kiln_codegen::ptx::PtxTarget::default();
    let ptxas = kiln_codegen::ptx::ptxas::find_ptxas();
    let mut lines = 0;
    for (mask, dtype, op, key) in [
        (checker(29), DType::F32, "grey_erosion", "footprint"),
        (disc(40), DType::Bool, "binary_erosion", "structure"),
    ] {
        let g = build(op, &[(key, mask_text(&mask))], dtype, &[1, 1, 90, 95]);
        let lowered = lower_graph_with(&g, StageStorage::DevicePasses, WindowBounds::default())
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        for k in &lowered.kernels {
            if matches!(k.body, KernelBody::Line(_)) {
                lines += 1;
            }
            let m = kiln_codegen::ptx::render(k, &target, &Default::default())
                .unwrap_or_else(|e| panic!("{op}: {e}"));
            if let Some(p) = &ptxas {
                kiln_codegen::ptx::ptxas::assemble_with(p, &m.text, target.sm)
                    .unwrap_or_else(|e| panic!("{op}: ptxas: {e}"));
            }
        }
    }
    assert!(lines >= 2, "chunks go through identity lines: {lines}");
    if ptxas.is_none() {
        // Written past the harness's capture, so the skip shows in every run.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIP: ptxas not found (set KILN_PTXAS): chunked footprints' PTX rendered, not assembled\n",
        );
    }
}
