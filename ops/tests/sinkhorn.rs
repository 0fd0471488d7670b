//! `sinkhorn` against POT goldens (scripts/gold_sinkhorn.py → tests/golden/sinkhorn/), and
//! eager (reference loop) == fused (tiles of 8, rayon) bit for bit on every case.
//!
//! Tolerances (SEMANTICS.md): f64 within rtol 1e-12 of POT (per element, plus 1e-12 of the
//! array's largest magnitude for entries near zero) with the same iteration counts; f32
//! within rtol 1e-5 the same way, iteration counts equal. `-inf` potentials must match
//! exactly; no output may be NaN.
use std::path::{Path, PathBuf};

use kiln_ir::{DType, TensorType};
use kiln_ops::program::{build_plan, Exec};
use kiln_runtime::fused::Engine;
use kiln_runtime::npy::read_npy;
use kiln_runtime::{Storage, Tensor};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/sinkhorn")
}

fn vals(t: &Tensor) -> Vec<f64> {
    match t.contiguous_storage() {
        Storage::F32(v) => v.iter().map(|&x| x as f64).collect(),
        Storage::F64(v) => v,
        _ => panic!("not float"),
    }
}

fn bits(t: &Tensor) -> Vec<u64> {
    match t.contiguous_storage() {
        Storage::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Storage::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        _ => panic!("not float"),
    }
}

/// Asserts every element within tolerance; returns the largest `|g - w| / (|w| + scale)`.
fn close(what: &str, got: &[f64], want: &[f64], rtol: f64) -> f64 {
    let mut worst = 0.0f64;
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want
        .iter()
        .filter(|x| x.is_finite())
        .fold(0.0f64, |m, x| m.max(x.abs()));
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(!g.is_nan(), "{what}[{k}]: NaN");
        if w.is_infinite() {
            assert_eq!(g, w, "{what}[{k}]");
            continue;
        }
        let tol = rtol * (w.abs() + scale);
        assert!(
            (g - w).abs() <= tol,
            "{what}[{k}]: {g} vs POT {w} (tol {tol:e})"
        );
        if w.abs() + scale > 0.0 {
            worst = worst.max((g - w).abs() / (w.abs() + scale));
        }
    }
    worst
}

fn params(case: &Path, plan: bool) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(case.join("params.txt")).unwrap();
    let mut p: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    p.push(("plan".into(), plan.to_string()));
    p
}

/// Runs a case eagerly and fused; asserts equal bits; returns the eager outputs.
fn run_case(case: &Path, engine: &Engine) -> Vec<Tensor> {
    let inputs: Vec<Tensor> = ["a", "b", "cost"]
        .iter()
        .map(|n| read_npy(case.join(format!("{n}.npy"))).unwrap())
        .collect();
    let types: Vec<TensorType> = inputs
        .iter()
        .map(|t| TensorType {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
        })
        .collect();
    let plan = build_plan("sinkhorn", &params(case, true), &types).unwrap();
    let eager = plan.run(Exec::Eager, &inputs).unwrap();
    let fused = plan.run(Exec::Fused(engine), &inputs).unwrap();
    assert_eq!(eager.len(), 5);
    for (k, (e, f)) in eager.iter().zip(&fused).enumerate() {
        assert_eq!(e.shape(), f.shape());
        assert_eq!(
            bits(e),
            bits(f),
            "{case:?}: output {k}: eager vs fused bits"
        );
    }
    eager
}

#[test]
fn every_golden_case_matches_pot_and_eager_equals_fused() {
    let engine = Engine::new();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 15, "goldens missing: {cases:?}");
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let out = run_case(case, &engine);
        let rtol = if name.ends_with("f32") { 1e-5 } else { 1e-12 };
        let want = |f: &str| vals(&read_npy(case.join(format!("out_{f}.npy"))).unwrap());
        assert_eq!(vals(&out[3]), want("niter"), "{name}: iteration counts");
        let worst = [
            close(&format!("{name} cost"), &vals(&out[0]), &want("cost"), rtol),
            close(&format!("{name} f"), &vals(&out[1]), &want("f"), rtol),
            close(&format!("{name} g"), &vals(&out[2]), &want("g"), rtol),
            close(&format!("{name} plan"), &vals(&out[4]), &want("plan"), rtol),
        ];
        eprintln!("{name}: ok, largest relative deviation from POT {worst:?}");
    }
}

/// The plan's marginals: columns match b to the stopping tolerance (the last update is of
/// u, so rows match a to rounding); zero-mass bins give zero rows/columns.
#[test]
fn plan_marginals_match_a_and_b() {
    let engine = Engine::new();
    for name in [
        "shared_std_f64",
        "shared_log_f64",
        "tiles_log_f64",
        "zero_mass_log_f64",
    ] {
        let case = dir().join(name);
        let out = run_case(&case, &engine);
        let a = vals(&read_npy(case.join("a.npy")).unwrap());
        let b = vals(&read_npy(case.join("b.npy")).unwrap());
        let plan = vals(&out[4]);
        let sh = out[4].shape().to_vec();
        let (bs, n, m) = (sh[0], sh[1], sh[2]);
        for s in 0..bs {
            for i in 0..n {
                let r: f64 = (0..m).map(|j| plan[(s * n + i) * m + j]).sum();
                assert!((r - a[s * n + i]).abs() < 1e-12, "{name} row {i}: {r}");
            }
            let mut err = 0.0;
            for j in 0..m {
                let c: f64 = (0..n).map(|i| plan[(s * n + i) * m + j]).sum();
                err += (c - b[s * m + j]).powi(2);
            }
            assert!(
                err.sqrt() < 1e-8,
                "{name} sample {s}: column error {}",
                err.sqrt()
            );
        }
    }
}

#[test]
fn zero_mass_bins_give_minus_inf_potentials_and_no_nan() {
    let case = dir().join("zero_mass_log_f64");
    let out = run_case(&case, &Engine::new());
    let a = vals(&read_npy(case.join("a.npy")).unwrap());
    let f = vals(&out[1]);
    for (x, w) in f.iter().zip(&a) {
        assert_eq!(*w == 0.0, *x == f64::NEG_INFINITY, "a {w} f {x}");
    }
    for t in &out {
        assert!(vals(t).iter().all(|x| !x.is_nan()));
    }
}

#[test]
fn tiny_eps_standard_form_stops_and_log_form_converges() {
    let engine = Engine::new();
    let std_out = run_case(&dir().join("tiny_eps_std_f64"), &engine);
    // Underflow at the first iteration: reverted to u = 1/n, v = 1/m, niter 0.
    assert_eq!(vals(&std_out[3]), vec![0.0, 0.0]);
    let log_out = run_case(&dir().join("tiny_eps_log_f64"), &engine);
    for t in &log_out {
        assert!(
            vals(t).iter().all(|x| x.is_finite()),
            "log form: finite outputs"
        );
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    let t = |s: &[usize]| TensorType {
        dtype: DType::F64,
        shape: s.to_vec(),
    };
    let p = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let ok = [t(&[2, 3]), t(&[2, 4]), t(&[3, 4])];
    assert!(build_plan("sinkhorn", &[], &ok).is_ok());
    assert!(build_plan("sinkhorn", &[], &[t(&[2, 3]), t(&[2, 4]), t(&[4, 3])]).is_err());
    assert!(build_plan("sinkhorn", &[], &[t(&[2, 3]), t(&[1, 4]), t(&[3, 4])]).is_err());
    assert!(build_plan("sinkhorn", &p(&[("eps", "0")]), &ok).is_err());
    assert!(build_plan("sinkhorn", &p(&[("eps", "nan")]), &ok).is_err());
    assert!(build_plan("sinkhorn", &p(&[("max_iter", "0")]), &ok).is_err());
    assert!(build_plan("sinkhorn", &p(&[("log_domain", "yes")]), &ok).is_err());
    let u8 = |s: &[usize]| TensorType {
        dtype: DType::U8,
        shape: s.to_vec(),
    };
    let u8s = [u8(&[2, 3]), u8(&[2, 4]), u8(&[3, 4])];
    assert!(build_plan("sinkhorn", &[], &u8s).is_err());
}

#[test]
fn cost_matrix_of_a_grid() {
    let c = kiln_ops::build_cost_matrix(&[2, 3], 2.0).unwrap();
    assert_eq!(c.shape(), &[6, 6]);
    let v = vals(&c);
    // points (0,0) and (1,2): 1 + 4.
    assert_eq!(v[5], 5.0);
    assert_eq!(v[5 * 6], 5.0);
    assert!((0..6).all(|k| v[k * 7] == 0.0));
    let c1 = vals(&kiln_ops::build_cost_matrix(&[2, 3], 1.0).unwrap());
    assert_eq!(c1[5], 5f64.sqrt());
    assert!(kiln_ops::build_cost_matrix(&[0, 3], 2.0).is_err());
    assert!(kiln_ops::build_cost_matrix(&[3], -1.0).is_err());
}

/// The entropic value `<P, M> + eps·Σ P log P` whose envelope gradients POT's `ot.solve`
/// sets (the centred potentials are its gradient w.r.t. a and b on the simplex).
fn value(plan: &[f64], _a: &[f64], _b: &[f64], c: &[f64], eps: f64) -> f64 {
    let mut v = 0.0;
    for (&p, &cost) in plan.iter().zip(c) {
        v += p * cost + eps * if p > 0.0 { p * p.ln() } else { 0.0 };
    }
    v
}

/// Envelope gradients against central finite differences of the converged value, along
/// directions that keep the masses (the gradients are defined up to a constant shift).
#[test]
fn envelope_gradients_match_finite_differences() {
    use kiln_runtime::Tensor;
    let (n, m, eps) = (6usize, 5usize, 0.2);
    let a0: Vec<f64> = (0..n).map(|i| 1.0 + 0.3 * i as f64).collect();
    let b0: Vec<f64> = (0..m).map(|j| 2.0 - 0.2 * j as f64).collect();
    let norm = |v: Vec<f64>| {
        let s: f64 = v.iter().sum();
        v.into_iter().map(|x| x / s).collect::<Vec<_>>()
    };
    let (a0, b0) = (norm(a0), norm(b0));
    let c0: Vec<f64> = (0..n * m)
        .map(|k| ((k / m) as f64 / n as f64 - (k % m) as f64 / m as f64).powi(2))
        .collect();
    for log_domain in [false, true] {
        let solve = |a: &[f64], b: &[f64], c: &[f64]| {
            let t =
                |v: &[f64], s: &[usize]| Tensor::from_storage(Storage::F64(v.to_vec()), s).unwrap();
            let types = [
                TensorType {
                    dtype: DType::F64,
                    shape: vec![1, n],
                },
                TensorType {
                    dtype: DType::F64,
                    shape: vec![1, m],
                },
                TensorType {
                    dtype: DType::F64,
                    shape: vec![n, m],
                },
            ];
            let params: Vec<(String, String)> = [
                ("eps", "0.2"),
                ("tol", "1e-14"),
                ("max_iter", "100000"),
                ("grad", "true"),
                ("log_domain", if log_domain { "true" } else { "false" }),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let plan = build_plan("sinkhorn", &params, &types).unwrap();
            plan.run(Exec::Eager, &[t(a, &[1, n]), t(b, &[1, m]), t(c, &[n, m])])
                .unwrap()
        };
        let out = solve(&a0, &b0, &c0);
        let (p, ga, gb) = (vals(&out[4]), vals(&out[5]), vals(&out[6]));
        let h = 1e-6;
        // d/da along e_i - e_k.
        for (i, k) in [(0, 5), (2, 3)] {
            let mut ap = a0.clone();
            let mut am = a0.clone();
            ap[i] += h;
            ap[k] -= h;
            am[i] -= h;
            am[k] += h;
            let vp = value(&vals(&solve(&ap, &b0, &c0)[4]), &ap, &b0, &c0, eps);
            let vm = value(&vals(&solve(&am, &b0, &c0)[4]), &am, &b0, &c0, eps);
            let fd = (vp - vm) / (2.0 * h);
            let want = ga[i] - ga[k];
            assert!(
                (fd - want).abs() < 1e-6,
                "log {log_domain} d/da: fd {fd} envelope {want}"
            );
        }
        // d/db along e_0 - e_4.
        let mut bp = b0.clone();
        let mut bm = b0.clone();
        bp[0] += h;
        bp[4] -= h;
        bm[0] -= h;
        bm[4] += h;
        let vp = value(&vals(&solve(&a0, &bp, &c0)[4]), &a0, &bp, &c0, eps);
        let vm = value(&vals(&solve(&a0, &bm, &c0)[4]), &a0, &bm, &c0, eps);
        let fd = (vp - vm) / (2.0 * h);
        assert!(
            (fd - (gb[0] - gb[4])).abs() < 1e-6,
            "d/db: fd {fd} envelope {}",
            gb[0] - gb[4]
        );
        // d/dM_ij = P_ij.
        for k in [0, 7, 29] {
            let mut cp = c0.clone();
            let mut cm = c0.clone();
            cp[k] += h;
            cm[k] -= h;
            let vp = value(&vals(&solve(&a0, &b0, &cp)[4]), &a0, &b0, &cp, eps);
            let vm = value(&vals(&solve(&a0, &b0, &cm)[4]), &a0, &b0, &cm, eps);
            let fd = (vp - vm) / (2.0 * h);
            assert!((fd - p[k]).abs() < 1e-6, "d/dM[{k}]: fd {fd} plan {}", p[k]);
        }
    }
}

/// Deterministic inputs: `batch` normalised histograms of `n` bins (a few empty ones when
/// `holes`) and a `[n, m]` cost in [0, 1), in f64 (xorshift stream).
fn problem(batch: usize, n: usize, m: usize, seed: u64, holes: bool) -> [Vec<f64>; 3] {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut hist = |len: usize| -> Vec<f64> {
        let mut v = Vec::with_capacity(batch * len);
        for _ in 0..batch {
            let w: Vec<f64> = (0..len)
                .map(|k| {
                    if holes && k % 7 == 3 {
                        0.0
                    } else {
                        0.05 + next()
                    }
                })
                .collect();
            let s: f64 = w.iter().sum();
            v.extend(w.iter().map(|x| x / s));
        }
        v
    };
    let (a, b) = (hist(n), hist(m));
    let c: Vec<f64> = (0..n * m).map(|_| next()).collect();
    [a, b, c]
}

/// Runs `sinkhorn` with `params` on f64 data converted to `dtype`; a per-sample cost when
/// `per_sample` (the `[n, m]` cost repeated with a per-sample offset).
fn run_problem(
    data: &[Vec<f64>; 3],
    (batch, n, m): (usize, usize, usize),
    dtype: DType,
    per_sample: bool,
    params: &[(&str, &str)],
    exec: Exec<'_>,
) -> Vec<Tensor> {
    let cost: Vec<f64> = if per_sample {
        (0..batch)
            .flat_map(|s| data[2].iter().map(move |c| c + 0.01 * s as f64))
            .collect()
    } else {
        data[2].clone()
    };
    let cshape = if per_sample {
        vec![batch, n, m]
    } else {
        vec![n, m]
    };
    let shapes = [vec![batch, n], vec![batch, m], cshape];
    run_shaped([&data[0], &data[1], &cost], &shapes, dtype, params, exec)
}

/// Runs `sinkhorn` on (a, b, cost) given in f64 with their shapes, converted to `dtype`.
fn run_shaped(
    data: [&[f64]; 3],
    shapes: &[Vec<usize>; 3],
    dtype: DType,
    params: &[(&str, &str)],
    exec: Exec<'_>,
) -> Vec<Tensor> {
    let tensors: Vec<Tensor> = data
        .iter()
        .zip(shapes)
        .map(|(v, s)| {
            let st = match dtype {
                DType::F32 => Storage::F32(v.iter().map(|&x| x as f32).collect()),
                _ => Storage::F64(v.to_vec()),
            };
            Tensor::from_storage(st, s).unwrap()
        })
        .collect();
    let types: Vec<TensorType> = shapes
        .iter()
        .map(|s| TensorType {
            dtype,
            shape: s.clone(),
        })
        .collect();
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    build_plan("sinkhorn", &params, &types)
        .unwrap()
        .run(exec, &tensors)
        .unwrap()
}

/// The f32 transport cost of a 256-bin problem tracks the f64 one within the documented
/// f32 tolerance (1e-5 relative). One running f32 sum over the 65 536 products of
/// `Σ_ij M_ij P_ij` was 5e-5 away here (9e-4 at 1024 bins), while the plan itself was
/// within 1e-6: the cost is summed by rows, then over the rows (SEMANTICS.md).
#[test]
fn f32_transport_cost_tracks_f64_on_a_large_problem() {
    let (batch, n, m) = (2, 256, 256);
    let data = problem(batch, n, m, 7, false);
    for log in ["false", "true"] {
        let params = [
            ("eps", "0.05"),
            ("max_iter", "50"),
            ("tol", "0"),
            ("log_domain", log),
            ("plan", "true"),
        ];
        let run = |d| run_problem(&data, (batch, n, m), d, false, &params, Exec::Eager);
        let (lo, hi) = (run(DType::F32), run(DType::F64));
        let (c32, c64) = (vals(&lo[0]), vals(&hi[0]));
        for (x, y) in c32.iter().zip(&c64) {
            let rel = (x - y).abs() / y.abs();
            assert!(
                rel < 1e-5,
                "log {log}: f32 cost {x} vs f64 {y}: rel {rel:e}"
            );
        }
        // The plan, the cost's terms, is within the same bound relative to its largest entry.
        let (p32, p64) = (vals(&lo[4]), vals(&hi[4]));
        let top = p64.iter().fold(0.0f64, |t, x| t.max(x.abs()));
        let worst = p32
            .iter()
            .zip(&p64)
            .fold(0.0f64, |w, (x, y)| w.max((x - y).abs() / top));
        assert!(worst < 1e-5, "log {log}: plan rel {worst:e}");
    }
}

/// Eager (the reference loop) == fused (lane kernels, tiles, parallel lane ranges) bit for
/// bit on shapes off every lane and tile boundary: batches of 1, 5, 13 (tiles of 8 with a
/// remainder, groups of 4 with single samples), empty bins, a per-sample cost, both forms,
/// f32 and f64, with the plan and gradients.
#[test]
fn eager_equals_fused_off_every_boundary() {
    let engine = Engine::new();
    for (batch, n, m, holes, per_sample) in [
        (1, 130, 129, false, false),
        (5, 37, 200, true, false),
        (13, 61, 67, false, false),
        (3, 29, 131, true, true),
    ] {
        let data = problem(batch, n, m, (batch * n + m) as u64, holes);
        for dtype in [DType::F32, DType::F64] {
            for log in ["false", "true"] {
                let params = [
                    ("eps", "0.07"),
                    ("max_iter", "23"),
                    ("tol", "1e-7"),
                    ("log_domain", log),
                    ("grad", "true"),
                ];
                let run = |e| run_problem(&data, (batch, n, m), dtype, per_sample, &params, e);
                let (eager, fused) = (run(Exec::Eager), run(Exec::Fused(&engine)));
                assert_eq!(eager.len(), 7);
                for (k, (e, f)) in eager.iter().zip(&fused).enumerate() {
                    assert_eq!(
                        bits(e),
                        bits(f),
                        "B {batch} n {n} m {m} {dtype} log {log}: output {k}"
                    );
                }
            }
        }
    }
}

/// The dense `[g^k, g^k]` cost of a per-axis table (axis 0 first, as grid.rs forms it).
fn dense_of_axes(c1: &[f64], g: usize, k: usize) -> Vec<f64> {
    let n = g.pow(k as u32);
    let coord = |p: usize, axis: usize| (p / g.pow((k - 1 - axis) as u32)) % g;
    let mut m = Vec::with_capacity(n * n);
    for p in 0..n {
        for q in 0..n {
            let mut acc = c1[coord(p, 0) * g + coord(q, 0)];
            for axis in 1..k {
                acc += c1[coord(p, axis) * g + coord(q, axis)];
            }
            m.push(acc);
        }
    }
    m
}

/// `grid_axes = k` (the separable kernel) against the dense form on the same cost: f64
/// within the POT tolerance (rtol 1e-12 of the largest entry), same iteration counts, both
/// forms, 1-, 2- and 3-axis grids (empty bins in the log form); eager == fused bit for
/// bit, f32 and f64.
#[test]
fn grid_axes_match_the_dense_cost_and_eager_equals_fused() {
    let engine = Engine::new();
    // (18, 2, 1): grid.rs's register tiles (16 lanes x 4 outputs) and their tails.
    for (g, k, batch) in [(9usize, 1usize, 2usize), (5, 2, 3), (3, 3, 2), (18, 2, 1)] {
        let n = g.pow(k as u32);
        // A squared-distance table scaled to [0, 1] per axis.
        let top = ((g - 1) * (g - 1)).max(1) as f64;
        let c1: Vec<f64> = (0..g * g)
            .map(|e| {
                let d = (e / g) as f64 - (e % g) as f64;
                d * d / top
            })
            .collect();
        for log in ["false", "true"] {
            // Empty bins in the log form only: the dense standard form (POT's) reverts at
            // iteration 0 on them (inf · 0 = NaN), the grid form does not (SEMANTICS.md).
            let mut data = problem(batch, n, n, (g * 10 + k) as u64, log == "true");
            data[2] = dense_of_axes(&c1, g, k);
            let dense_data = data.clone();
            let mut grid_data = data;
            grid_data[2] = c1.clone();
            let axes = k.to_string();
            let base = [
                ("eps", "0.1"),
                ("max_iter", "400"),
                ("tol", "1e-10"),
                ("log_domain", log),
                ("grad", "true"),
            ];
            let mut with_grid = base.to_vec();
            with_grid.push(("grid_axes", axes.as_str()));
            let dense = run_problem(
                &dense_data,
                (batch, n, n),
                DType::F64,
                false,
                &base,
                Exec::Eager,
            );
            let run_grid = |d, e| {
                let shapes = [vec![batch, n], vec![batch, n], vec![g, g]];
                let data = [&grid_data[0][..], &grid_data[1][..], &grid_data[2][..]];
                run_shaped(data, &shapes, d, &with_grid, e)
            };
            let grid = run_grid(DType::F64, Exec::Eager);
            assert_eq!(
                vals(&grid[3]),
                vals(&dense[3]),
                "g {g} k {k} log {log}: niter"
            );
            let outs = [(0, "cost"), (1, "f"), (2, "g"), (4, "plan"), (5, "grad_a")];
            for (o, what) in outs {
                close(
                    &format!("g {g} k {k} log {log} {what}"),
                    &vals(&grid[o]),
                    &vals(&dense[o]),
                    1e-12,
                );
            }
            for d in [DType::F32, DType::F64] {
                let (e, f) = (run_grid(d, Exec::Eager), run_grid(d, Exec::Fused(&engine)));
                for (o, (x, y)) in e.iter().zip(&f).enumerate() {
                    assert_eq!(bits(x), bits(y), "g {g} k {k} {d} log {log}: output {o}");
                }
            }
        }
    }
}

#[test]
fn grid_axes_bad_shapes_are_typed_errors() {
    let t = |s: &[usize]| TensorType {
        dtype: DType::F64,
        shape: s.to_vec(),
    };
    let p = vec![("grid_axes".to_string(), "2".to_string())];
    // 25 = 5^2 fits; 24 does not; a dense cost is not an axis table.
    assert!(build_plan("sinkhorn", &p, &[t(&[1, 25]), t(&[1, 25]), t(&[5, 5])]).is_ok());
    for shapes in [
        [vec![1, 24], vec![1, 24], vec![5, 5]],
        [vec![1, 25], vec![1, 25], vec![25, 25]],
        [vec![1, 25], vec![1, 25], vec![5, 4]],
    ] {
        let ty: Vec<TensorType> = shapes.iter().map(|s| t(s)).collect();
        assert!(build_plan("sinkhorn", &p, &ty).is_err(), "{shapes:?}");
    }
    let huge = vec![("grid_axes".to_string(), "9".to_string())];
    assert!(build_plan("sinkhorn", &huge, &[t(&[1, 1]), t(&[1, 1]), t(&[1, 1])]).is_err());
}

/// The grid standard form updates `u = a / (K v)`: empty source bins get `u = 0` and zero
/// plan rows, no revert (the dense form, like POT, reverts at iteration 0: `(1/0)·K·0`).
#[test]
fn grid_standard_form_keeps_empty_bins() {
    let (g, n, batch) = (4usize, 16usize, 1usize);
    let data = problem(batch, n, n, 99, true);
    let c1: Vec<f64> = (0..g * g)
        .map(|e| ((e / g) as f64 - (e % g) as f64).powi(2) / 9.0)
        .collect();
    let t = |v: &[f64], s: &[usize]| Tensor::from_storage(Storage::F64(v.to_vec()), s).unwrap();
    let types: Vec<TensorType> = [vec![batch, n], vec![batch, n], vec![g, g]]
        .into_iter()
        .map(|shape| TensorType {
            dtype: DType::F64,
            shape,
        })
        .collect();
    let params: Vec<(String, String)> = [
        ("grid_axes", "2"),
        ("eps", "0.1"),
        ("max_iter", "200"),
        ("tol", "1e-12"),
        ("plan", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let out = build_plan("sinkhorn", &params, &types)
        .unwrap()
        .run(
            Exec::Eager,
            &[t(&data[0], &[1, n]), t(&data[1], &[1, n]), t(&c1, &[g, g])],
        )
        .unwrap();
    assert!(vals(&out[3])[0] > 0.0, "no revert at iteration 0");
    let plan = vals(&out[4]);
    for (i, &ai) in data[0].iter().enumerate() {
        let row: f64 = plan[i * n..(i + 1) * n].iter().sum();
        if ai == 0.0 {
            assert_eq!(row, 0.0, "empty bin {i}");
        } else {
            assert!((row - ai).abs() < 1e-12, "row {i}: {row} vs {ai}");
        }
    }
}

/// Envelope gradients with empty bins (log form): `-inf` at the empty bins, the other
/// entries finite and centred over themselves (their mean is 0 up to rounding), no NaN.
#[test]
fn gradients_at_empty_bins_are_minus_inf_not_nan() {
    let (batch, n, m) = (2, 13, 11);
    let data = problem(batch, n, m, 21, true);
    let params = [
        ("eps", "0.1"),
        ("max_iter", "300"),
        ("tol", "1e-9"),
        ("log_domain", "true"),
        ("grad", "true"),
    ];
    let engine = Engine::new();
    for exec in [Exec::Eager, Exec::Fused(&engine)] {
        let out = run_problem(&data, (batch, n, m), DType::F64, false, &params, exec);
        for (o, marg, len) in [(5, &data[0], n), (6, &data[1], m)] {
            let grad = vals(&out[o]);
            for s in 0..batch {
                let (gs, ws) = (&grad[s * len..(s + 1) * len], &marg[s * len..(s + 1) * len]);
                let mut sum = 0.0;
                for (&gv, &w) in gs.iter().zip(ws) {
                    assert!(!gv.is_nan(), "output {o}: NaN gradient");
                    assert_eq!(
                        w == 0.0,
                        gv == f64::NEG_INFINITY,
                        "output {o}: mass {w} grad {gv}"
                    );
                    if w > 0.0 {
                        sum += gv;
                    }
                }
                assert!(
                    sum.abs() < 1e-12,
                    "output {o} sample {s}: finite part sums to {sum}"
                );
            }
        }
    }
}
