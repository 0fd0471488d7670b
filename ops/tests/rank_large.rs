//! The large-window rank program (ops/src/rank) against the selection networks and errors.
//!
//! (a) The program is forced onto windows the networks take (≤ 441 values) and compared
//! with the network graph bit for bit: its eager path (sorting reference) and its fused path
//! (sliding histograms) against the network run by the eager oracle, over every dtype,
//! border mode, box/even/masked footprints, origins at both limits, shapes smaller than the
//! window, ranks at both ends and inside, and float data with NaN payloads, ±0 and ±Inf.
//! (c) Errors: bad ranks and percentiles, bad inputs, oversized scratch, all typed.
//! The scipy goldens of large windows are in `rank_golden.rs`.

use kiln_ir::{Border, DType, Footprint, GraphBuilder, Scalar, TensorType};
use kiln_ops::rank::{spec_for, Poison, RankProgram, RankSpec};
use kiln_ops::{build_op, build_plan, op_info, select_rank, Exec, OpPlan, Params, Program};
use kiln_runtime::fused::Engine;
use kiln_runtime::tensor::first_difference;
use kiln_runtime::{eager, Storage, Tensor};

const DTYPES: [DType; 9] = [
    DType::Bool,
    DType::U8,
    DType::I8,
    DType::U16,
    DType::I16,
    DType::I32,
    DType::U32,
    DType::F32,
    DType::F64,
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One random element of `dtype` as a scalar: ties, extremes and (for floats) ±0, ±Inf and,
/// with `nan`, NaNs with several payloads.
fn element(r: &mut Rng, dtype: DType, nan: bool) -> Scalar {
    let pick = r.below(10);
    match dtype {
        DType::Bool => Scalar::Bool(r.below(2) == 1),
        DType::F32 | DType::F64 => {
            let v = match pick {
                0 => [-0.0, 0.0][r.below(2) as usize],
                1 => [f64::INFINITY, f64::NEG_INFINITY, f64::MAX, -1e-300][r.below(4) as usize],
                2 if nan && r.below(4) == 0 => f64::NAN,
                3..=5 => (r.below(5) as f64) - 2.0,
                _ => (r.below(2001) as f64 - 1000.0) / 7.0,
            };
            if dtype == DType::F32 {
                let mut b = (v as f32).to_bits();
                if v.is_nan() {
                    b = [0x7fc0_0000u32, 0xffc0_0001, 0x7f80_0001][r.below(3) as usize];
                }
                Scalar::F32(b)
            } else {
                let mut b = v.to_bits();
                if v.is_nan() {
                    b = [
                        0x7ff8_0000_0000_0000u64,
                        0xfff8_0000_0000_0abc,
                        0x7ff0_0000_0000_0001,
                    ][r.below(3) as usize];
                }
                Scalar::F64(b)
            }
        }
        _ => {
            let (lo, hi) = dtype.int_range().unwrap();
            let v = match pick {
                0 => lo,
                1 => hi,
                2..=5 => (lo.max(-3)) + r.below(6) as i64,
                _ => lo + (r.next() % ((hi - lo) as u64 + 1)) as i64,
            };
            Scalar::wrap_int(dtype, v).unwrap()
        }
    }
}

fn tensor(r: &mut Rng, dtype: DType, shape: &[usize], nan: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = Storage::zeros(dtype, n);
    for i in 0..n {
        s.set(i, element(r, dtype, nan));
    }
    Tensor::from_storage(s, shape).unwrap()
}

/// The network's answer: `select_rank`'s graph run by the eager oracle.
fn network(x: &Tensor, spec: &RankSpec) -> Tensor {
    let mut b = GraphBuilder::new();
    let i = b.input(x.dtype(), x.shape()).unwrap();
    let o = select_rank(&mut b, i, &spec.footprint, spec.border, spec.rank).unwrap();
    let g = b.finish(&[o]).unwrap();
    eager::run(&g, std::slice::from_ref(x)).unwrap().remove(0)
}

fn program_both(x: &Tensor, spec: &RankSpec, engine: &Engine) -> (Tensor, Tensor) {
    let p = RankProgram::new("rank_filter", spec.clone()).unwrap();
    let e = p
        .run(Exec::Eager, std::slice::from_ref(x))
        .unwrap()
        .remove(0);
    let f = p
        .run(Exec::Fused(engine), std::slice::from_ref(x))
        .unwrap()
        .remove(0);
    (e, f)
}

/// scipy's footprint of `mask` (row-major over `shape`) with `origin`.
fn footprint(shape: &[usize], mask: &[bool], origin: &[i64]) -> Footprint {
    Footprint::scipy_masked(shape, mask, origin)
}

fn borders(dtype: DType, r: &mut Rng) -> Vec<Border> {
    let mut v = vec![
        Border::Reflect,
        Border::Mirror,
        Border::Nearest,
        Border::Wrap,
    ];
    v.push(Border::Constant(element(r, dtype, false)));
    if dtype.is_float() {
        v.push(Border::Constant(Scalar::from_f64(dtype, -0.0)));
        v.push(Border::Constant(Scalar::from_f64(dtype, f64::NAN)));
    }
    v
}

/// Window shapes and masks per spatial rank: boxes (odd, even), a cross/disc, a random mask.
fn windows(nd: usize, r: &mut Rng) -> Vec<(Vec<usize>, Vec<bool>)> {
    let mut out = Vec::new();
    let shapes: Vec<Vec<usize>> = match nd {
        1 => vec![vec![1], vec![2], vec![5], vec![8]],
        2 => vec![vec![3, 3], vec![4, 4], vec![2, 5], vec![1, 3], vec![5, 5]],
        _ => vec![vec![3, 3, 3], vec![2, 3, 4]],
    };
    for s in shapes {
        let n: usize = s.iter().product();
        out.push((s.clone(), vec![true; n]));
        if n >= 4 {
            // A random mask with at least one entry, and a disc-like one (corners off).
            let mut m: Vec<bool> = (0..n).map(|_| r.below(3) != 0).collect();
            m[n / 2] = true;
            out.push((s.clone(), m));
            if nd == 2 && s[0] >= 3 && s[1] >= 3 {
                let mut d = vec![true; n];
                let (h, w) = (s[0], s[1]);
                for &(y, x) in &[(0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)] {
                    d[y * w + x] = false;
                }
                out.push((s.clone(), d));
            }
        }
    }
    out
}

/// (a) The program forced on small windows equals the network bit for bit.
#[test]
fn forced_program_equals_network_on_small_windows() {
    let engine = Engine::new();
    let mut r = Rng(28);
    let shapes: [&[usize]; 6] = [
        &[1, 1, 9],
        &[2, 1, 3],
        &[1, 1, 6, 7],
        &[1, 2, 2, 3],
        &[1, 1, 1, 1],
        &[1, 1, 3, 2, 4],
    ];
    let mut cases = 0;
    let mut failures = Vec::new();
    for dtype in DTYPES {
        for shape in shapes {
            let nd = shape.len() - 2;
            for nan in [false, true] {
                if nan && !dtype.is_float() {
                    continue;
                }
                let x = tensor(&mut r, dtype, shape, nan);
                for (ws, mask) in windows(nd, &mut r) {
                    let lo: Vec<i64> = ws.iter().map(|&s| -((s / 2) as i64)).collect();
                    let hi: Vec<i64> = ws.iter().map(|&s| ((s - 1) / 2) as i64).collect();
                    let zero = vec![0i64; nd];
                    for origin in [&zero, &lo, &hi] {
                        let fp = footprint(&ws, &mask, origin);
                        let n = fp.offsets.len();
                        for border in borders(dtype, &mut r) {
                            let mut ranks = vec![n / 2, 0, n - 1];
                            ranks.push(r.below(n as u64) as usize);
                            ranks.dedup();
                            for rank in ranks {
                                let spec = RankSpec {
                                    footprint: fp.clone(),
                                    border,
                                    rank,
                                    poison: Poison::Nan,
                                };
                                let want = network(&x, &spec);
                                let (e, f) = program_both(&x, &spec, &engine);
                                cases += 1;
                                for (what, got) in [("eager", &e), ("fused", &f)] {
                                    if let Some(d) = first_difference(got, &want) {
                                        failures.push(format!(
                                            "{dtype} {shape:?} window {ws:?} {mask:?} origin \
                                             {origin:?} {border:?} rank {rank}: {what} vs \
                                             network at {d}"
                                        ));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for f in failures.iter().take(20) {
        eprintln!("{f}");
    }
    assert!(cases > 5000, "only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases differ",
        failures.len()
    );
}

/// (a) Through the registry: rank_filter, percentile_filter, median_filter and median_blur
/// (both paddings) as graphs and as forced programs agree, eager and fused (JIT) alike.
#[test]
fn registry_graphs_equal_forced_programs() {
    let engine = Engine::new();
    let mut r = Rng(7);
    let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let cases: Vec<(&str, Vec<(String, String)>, DType, Vec<usize>)> = vec![
        (
            "rank_filter",
            p(&[("rank", "-2"), ("size", "4")]),
            DType::I16,
            vec![1, 1, 6, 5],
        ),
        (
            "rank_filter",
            p(&[
                ("rank", "1"),
                ("footprint", "0,1,0;1,1,1;0,1,0"),
                ("mode", "wrap"),
            ]),
            DType::F32,
            vec![1, 2, 5, 4],
        ),
        (
            "percentile_filter",
            p(&[
                ("percentile", "30"),
                ("size", "3,5"),
                ("mode", "constant"),
                ("cval", "-0.0"),
            ]),
            DType::F64,
            vec![1, 1, 4, 7],
        ),
        (
            "percentile_filter",
            p(&[("percentile", "-10"), ("size", "5"), ("origin", "2")]),
            DType::U16,
            vec![1, 1, 9],
        ),
        (
            "percentile_filter",
            p(&[("percentile", "100"), ("size", "2")]),
            DType::U8,
            vec![1, 1, 3, 3],
        ),
        (
            "median_filter",
            p(&[("size", "3"), ("mode", "mirror")]),
            DType::I32,
            vec![2, 1, 2, 2, 3],
        ),
        (
            "median_blur",
            p(&[("k", "3")]),
            DType::F32,
            vec![1, 2, 5, 6],
        ),
        (
            "median_blur",
            p(&[("k", "2,3"), ("padding", "reflect")]),
            DType::F32,
            vec![1, 1, 4, 5],
        ),
        (
            "median_blur",
            p(&[("k", "5"), ("padding", "reflect")]),
            DType::F64,
            vec![2, 1, 3, 3],
        ),
    ];
    for (op, params, dtype, shape) in cases {
        let x = tensor(&mut r, dtype, &shape, true);
        let ty = TensorType {
            dtype,
            shape: shape.clone(),
        };
        let g = build_op(op, &params, &ty).unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
        let ge = eager::run(&g, std::slice::from_ref(&x)).unwrap().remove(0);
        let gf = engine.run(&g, std::slice::from_ref(&x)).unwrap().remove(0);
        assert_eq!(
            first_difference(&ge, &gf),
            None,
            "{op} {params:?}: graph eager vs fused"
        );
        let info = op_info(op).unwrap();
        let spec = spec_for(&Params::new(info, &params).unwrap(), &ty).unwrap();
        assert_eq!(
            spec.poison,
            if op == "median_blur" {
                Poison::NonFinite
            } else {
                Poison::Nan
            }
        );
        let (e, f) = program_both(&x, &spec, &engine);
        assert_eq!(
            first_difference(&e, &ge),
            None,
            "{op} {params:?}: program eager"
        );
        assert_eq!(
            first_difference(&f, &ge),
            None,
            "{op} {params:?}: program fused"
        );
        // Small windows stay graphs.
        assert!(matches!(
            build_plan(op, &params, &[ty]).unwrap(),
            OpPlan::Graph(_)
        ));
    }
}

/// Windows over the network limit are programs through `build_plan`, whose eager and fused
/// paths agree; the graph builder refuses them with its typed error.
#[test]
fn large_windows_are_programs_eager_equals_fused() {
    let engine = Engine::new();
    let mut r = Rng(99);
    let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let cases: Vec<(&str, Vec<(String, String)>, DType, Vec<usize>)> = vec![
        (
            "median_filter",
            p(&[("size", "23")]),
            DType::U16,
            vec![1, 1, 30, 27],
        ),
        (
            "median_filter",
            p(&[("size", "22"), ("mode", "wrap")]),
            DType::F32,
            vec![2, 1, 9, 40],
        ),
        (
            "rank_filter",
            p(&[
                ("rank", "-3"),
                ("size", "21,22"),
                ("mode", "constant"),
                ("cval", "5"),
            ]),
            DType::I8,
            vec![1, 1, 25, 25],
        ),
        (
            "percentile_filter",
            p(&[("percentile", "12.5"), ("size", "500"), ("mode", "nearest")]),
            DType::F64,
            vec![1, 2, 700],
        ),
        (
            "median_filter",
            p(&[("size", "8"), ("origin", "-4,3,0")]),
            DType::I32,
            vec![1, 1, 9, 10, 11],
        ),
        (
            "median_blur",
            p(&[("k", "23")]),
            DType::F32,
            vec![1, 1, 24, 30],
        ),
        (
            "median_blur",
            p(&[("k", "22,21"), ("padding", "reflect")]),
            DType::F64,
            vec![1, 1, 20, 20],
        ),
        (
            "median_filter",
            p(&[("size", "30")]),
            DType::Bool,
            vec![1, 1, 31, 33],
        ),
        (
            "median_filter",
            p(&[("size", "30"), ("mode", "mirror")]),
            DType::U32,
            vec![1, 1, 5, 3],
        ),
    ];
    for (op, params, dtype, shape) in cases {
        let ty = TensorType {
            dtype,
            shape: shape.clone(),
        };
        let plan = build_plan(op, &params, std::slice::from_ref(&ty))
            .unwrap_or_else(|e| panic!("{op} {params:?}: {e}"));
        assert!(
            matches!(plan, OpPlan::Program(_)),
            "{op} {params:?} is not a program"
        );
        assert!(
            build_op(op, &params, &ty).is_err(),
            "{op}: the network refuses"
        );
        for nan in [false, true] {
            if nan && !dtype.is_float() {
                continue;
            }
            let x = tensor(&mut r, dtype, &shape, nan);
            let e = plan
                .run(Exec::Eager, std::slice::from_ref(&x))
                .unwrap()
                .remove(0);
            let f = plan
                .run(Exec::Fused(&engine), std::slice::from_ref(&x))
                .unwrap()
                .remove(0);
            assert_eq!(first_difference(&e, &f), None, "{op} {params:?} nan={nan}");
        }
    }
}

/// (c) Bad parameters and inputs are typed errors, never panics.
#[test]
fn errors_are_typed() {
    let p = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let ty = TensorType {
        dtype: DType::U16,
        shape: vec![1, 1, 40, 40],
    };
    let err = |op: &str, params: &[(&str, &str)], ty: &TensorType| -> String {
        build_plan(op, &p(params), std::slice::from_ref(ty))
            .map(|_| ())
            .expect_err("must fail")
            .to_string()
    };
    // Ranks and percentiles out of range, small and large windows alike.
    for size in ["3", "25"] {
        let n: i64 = size.parse::<i64>().unwrap().pow(2);
        let e = err(
            "rank_filter",
            &[("rank", &n.to_string()), ("size", size)],
            &ty,
        );
        assert!(e.contains("not within"), "{e}");
        let e = err(
            "rank_filter",
            &[("rank", &(-n - 1).to_string()), ("size", size)],
            &ty,
        );
        assert!(e.contains("not within"), "{e}");
        let e = err(
            "percentile_filter",
            &[("percentile", "100.5"), ("size", size)],
            &ty,
        );
        assert!(e.contains("percentile"), "{e}");
        let e = err(
            "percentile_filter",
            &[("percentile", "-101"), ("size", size)],
            &ty,
        );
        assert!(e.contains("percentile"), "{e}");
        let e = err("rank_filter", &[("size", size)], &ty);
        assert!(e.contains("missing"), "{e}");
        let e = err(
            "percentile_filter",
            &[("percentile", "x"), ("size", size)],
            &ty,
        );
        assert!(e.contains("percentile"), "{e}");
        let e = err("median_filter", &[("size", size), ("origin", "13")], &ty);
        assert!(e.contains("origin"), "{e}");
    }
    let e = err("median_blur", &[("k", "25"), ("padding", "circular")], &ty);
    assert!(e.contains("padding"), "{e}");
    let e = err("median_blur", &[("k", "25")], &ty);
    assert!(e.contains("f32 or f64"), "{e}");
    let e = err(
        "median_blur",
        &[("k", "300")],
        &TensorType {
            dtype: DType::F32,
            shape: vec![1, 1, 4, 4],
        },
    );
    assert!(e.contains("window of more than"), "{e}");
    let e = err("median_filter", &[("size", "257")], &ty);
    assert!(e.contains("window larger"), "{e}");
    // Specs the program refuses.
    let fp = Footprint {
        offsets: vec![vec![0, 0], vec![0, 0]],
    };
    let spec = RankSpec {
        footprint: fp,
        border: Border::Reflect,
        rank: 0,
        poison: Poison::Nan,
    };
    assert!(RankProgram::new("rank_filter", spec)
        .unwrap_err()
        .to_string()
        .contains("repeated"));
    let spec = RankSpec {
        footprint: Footprint {
            offsets: vec![vec![0], vec![1]],
        },
        border: Border::Reflect,
        rank: 2,
        poison: Poison::Nan,
    };
    assert!(RankProgram::new("rank_filter", spec).is_err());
    // Inputs the program refuses at run time: wrong rank, zero extent, cval of another
    // dtype, wrong input count.
    let spec = RankSpec {
        footprint: Footprint {
            offsets: vec![vec![0, 0], vec![0, 1]],
        },
        border: Border::Constant(Scalar::F32(0)),
        rank: 1,
        poison: Poison::Nan,
    };
    let prog = RankProgram::new("rank_filter", spec).unwrap();
    let engine = Engine::new();
    for exec in [Exec::Eager, Exec::Fused(&engine)] {
        let bad = [
            Tensor::zeros(DType::F32, &[1, 1, 4]),
            Tensor::zeros(DType::F32, &[1, 1, 0, 4]),
            Tensor::zeros(DType::U8, &[1, 1, 4, 4]),
        ];
        for x in &bad {
            let e = prog
                .run(exec, std::slice::from_ref(x))
                .unwrap_err()
                .to_string();
            assert!(e.contains("rank selection"), "{e}");
        }
        assert!(prog.run(exec, &[]).is_err());
    }
}

/// (c) Scratch beyond the available memory is refused with the typed memory error before
/// anything is allocated: a broadcast view (zero strides) of one element posing as a
/// 2^20 x 2^20 image.
#[test]
fn oversized_scratch_is_refused_before_allocating() {
    if kiln_runtime::memory::available_bytes().is_none() {
        println!("SKIP: available memory unknown on this OS, the check cannot trigger");
        return;
    }
    let big = 1usize << 20;
    let x = Tensor::from_parts(
        std::sync::Arc::new(Storage::U16(vec![7])),
        &[1, 1, big, big],
        &[0, 0, 0, 0],
        0,
    )
    .unwrap();
    let spec = RankSpec {
        footprint: kiln_ops::rank::blur_footprint(23, 23),
        border: Border::Reflect,
        rank: 264,
        poison: Poison::Nan,
    };
    let engine = Engine::new();
    let prog = RankProgram::new("median_filter", spec).unwrap();
    let e = prog
        .run(Exec::Fused(&engine), std::slice::from_ref(&x))
        .unwrap_err();
    assert!(
        matches!(
            e,
            kiln_ops::RunError::Runtime(kiln_runtime::RuntimeError::OutOfMemory { .. })
        ),
        "{e}"
    );
}

/// Rough timing of the workload (median 31x31 u16 2048², fused path); run with
/// `cargo test -p kiln-ops --test rank_large -- --ignored --nocapture`. Also checks the
/// result against the reference on a few rows.
#[test]
#[ignore = "timing; run by hand"]
fn timing_median_31_u16_2048() {
    let mut r = Rng(5);
    let n = 2048;
    let x = tensor(&mut r, DType::U16, &[1, 1, n, n], false);
    let ty = TensorType {
        dtype: DType::U16,
        shape: vec![1, 1, n, n],
    };
    let params = vec![("size".to_string(), "31".to_string())];
    let plan = build_plan("median_filter", &params, &[ty]).unwrap();
    let engine = Engine::new();
    // Process CPU seconds (utime + stime at 100 Hz) from /proc, as the machine may be shared.
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let f: Vec<&str> = s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (tick(11) + tick(12)) / 100.0
    };
    for _ in 0..3 {
        let (t, c) = (std::time::Instant::now(), cpu());
        let out = plan
            .run(Exec::Fused(&engine), std::slice::from_ref(&x))
            .unwrap();
        println!(
            "median_filter 31x31 u16 {n}x{n}: {:.3} s wall, {:.2} s CPU on {} threads",
            t.elapsed().as_secs_f64(),
            cpu() - c,
            engine.threads()
        );
        assert_eq!(out[0].shape(), x.shape());
    }
}
