//! Tiered compilation (`runtime/src/fused/tiers.rs`): a kernel whose vector steps were cut
//! down by the code budget, or that has a specialisation for clean inputs
//! (`codegen/src/cpu/clean.rs`), is compiled again in the background; runs switch to it
//! once it lands and give the same bits as before and as eager, on clean data (the clean
//! kernel) and on data with NaN, infinities or -0 (the checked fallback).

mod common;

use std::time::Duration;

use common::{f32_tensor, Data};
use kiln::codegen::cpu::Guard;
use kiln::ir::{DType, Graph, TensorType};
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

fn median(k: usize, shape: &[usize]) -> Graph {
    let ty = TensorType {
        dtype: DType::F32,
        shape: shape.to_vec(),
    };
    kiln::ops::build_op("median_blur", &[("k".into(), k.to_string())], &ty).unwrap()
}

fn steps(describe: &str) -> Option<&str> {
    describe
        .split(", ")
        .find(|p| p.contains("vectors per step"))
}

#[test]
fn capped_kernels_are_recompiled_in_the_background_and_give_the_same_bits() {
    let shape = [1, 2, 19, 45];
    let g = median(5, &shape);
    let engine = Engine::new();
    let compiled = engine.compile(&g).unwrap();
    assert_eq!(compiled.upgrades.len(), 1);
    let upgrade = compiled.upgrades[0]
        .as_ref()
        .expect("the 5x5 median's step is capped by the default budget");
    assert_eq!(engine.stats().upgrades_started, 1);
    let first = compiled.kernels[0].describe();

    // Before the upgrade lands (or whatever a run finds), after it: eager's bits.
    let inputs: Vec<_> = [Data::Uniform, Data::Ties, Data::Special]
        .into_iter()
        .enumerate()
        .map(|(i, d)| f32_tensor(&shape, d, 40 + i as u64))
        .collect();
    let want: Vec<_> = inputs
        .iter()
        .map(|x| eager::run(&g, std::slice::from_ref(x)).unwrap())
        .collect();
    for (x, w) in inputs.iter().zip(&want) {
        let got = compiled.run(&engine, std::slice::from_ref(x)).unwrap();
        assert!(first_difference(&w[0], &got[0]).is_none());
    }
    assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
    let better = upgrade.get().expect("the background compile succeeds");
    assert!(
        better.variant(Guard::CleanInputs).is_some(),
        "the median has a clean specialisation"
    );
    assert!(std::sync::Arc::ptr_eq(
        compiled.current_kernel(0).unwrap(),
        better
    ));
    let second = better.describe();
    // The first compile keeps the big stage's code small; the second carries values
    // between steps (see `cpu::shift`).
    assert_ne!(steps(&first), steps(&second), "{first}\n{second}");
    assert!(
        steps(&first).is_some_and(|s| s.starts_with("2 vectors") && !s.contains("carried")),
        "{first}"
    );
    assert!(
        steps(&second).is_some_and(|s| s.starts_with("2 vectors") && s.contains("carried")),
        "{second}"
    );
    for (x, w) in inputs.iter().zip(&want) {
        let got = compiled.run(&engine, std::slice::from_ref(x)).unwrap();
        if let Some(d) = first_difference(&w[0], &got[0]) {
            panic!("upgraded kernel differs from eager at {d}");
        }
    }
    // A second compile of the same graph hits the cache and shares the upgrade.
    let again = engine.compile(&g).unwrap();
    assert!(std::sync::Arc::ptr_eq(
        again.upgrades[0].as_ref().unwrap(),
        upgrade
    ));
    assert_eq!(engine.stats().upgrades_started, 1);
}

/// The addresses of a stencil kernel's row functions.
fn row_functions(k: &kiln::codegen::cpu::CpuKernel) -> Vec<usize> {
    match &k.body {
        kiln::codegen::cpu::CpuBody::Stencil(stages) => {
            stages.iter().map(|st| st.func as usize).collect()
        }
        _ => panic!("not a stencil kernel"),
    }
}

#[test]
fn kernels_with_nothing_to_gain_and_untiered_engines_compile_once() {
    // Gradient magnitude: arithmetic only (no min/max, no NaN test) in small steps.
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 16, 40],
    };
    let g = kiln::ops::build_op("gradient_magnitude", &[], &ty).unwrap();
    let engine = Engine::new();
    let c = engine.compile(&g).unwrap();
    assert!(c.upgrades.iter().all(|u| u.is_none()));
    // The 3x3 median takes the biggest step already, but has a clean specialisation: the
    // background compile attaches it to the first compile's code, compiled once.
    let c = engine.compile(&median(3, &[1, 1, 16, 40])).unwrap();
    assert!(c.wait_for_upgrades(Duration::from_secs(120)));
    let up = c.upgrades[0].as_ref().and_then(|u| u.get()).unwrap();
    assert!(up.variant(Guard::CleanInputs).is_some());
    assert_eq!(up.compile_ms, 0.0, "the general form was compiled again");
    assert_eq!(row_functions(up), row_functions(&c.kernels[0]));
    // A 15x15 erosion reaches 7 columns: the first compile runs no edge vectors, a bigger
    // budget two per end, so its general form is compiled again.
    let c = engine
        .compile(&op("grey_erosion", &[("size", "15")], &[1, 1, 16, 40]))
        .unwrap();
    assert!(c.wait_for_upgrades(Duration::from_secs(120)));
    let up = c.upgrades[0].as_ref().and_then(|u| u.get()).unwrap();
    assert!(up.compile_ms > 0.0);
    assert_ne!(row_functions(up), row_functions(&c.kernels[0]));
    assert!(up.describe().contains("first and last 8 columns"));
    assert!(!c.kernels[0].describe().contains("first and last 8 columns"));
    // Tiering off: the capped kernel stays as first compiled.
    let engine = Engine::new().with_tiering(false);
    let c = engine.compile(&median(5, &[1, 1, 16, 40])).unwrap();
    assert!(c.upgrades.iter().all(|u| u.is_none()));
    assert_eq!(engine.stats().upgrades_started, 0);
    assert!(c.wait_for_upgrades(Duration::ZERO));
}

#[test]
fn the_input_check_finds_every_unclean_value() {
    use kiln::runtime::fused::inputs_clean;
    use kiln::runtime::Storage;
    let t32 = |v: Vec<f32>| kiln::Tensor::from_storage(Storage::F32(v), &[1, 1, 1, 3]).unwrap();
    let t64 = |v: Vec<f64>| kiln::Tensor::from_storage(Storage::F64(v), &[1, 1, 1, 3]).unwrap();
    let sub = f32::from_bits(1);
    assert!(inputs_clean(&[t32(vec![0.0, sub, -3.5])]));
    for bad in [-0.0, f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        // Each position of a long row (the check works in chunks).
        for at in [0, 1, 2] {
            let mut v = vec![1.0f32; 3];
            v[at] = bad;
            assert!(!inputs_clean(&[t32(v)]), "{bad:?} at {at}");
        }
        let mut long = vec![0.25f32; 70_000];
        long[69_999] = bad;
        let t = kiln::Tensor::from_storage(Storage::F32(long), &[1, 1, 7, 10_000]).unwrap();
        assert!(!inputs_clean(&[t]), "{bad:?} in a long tensor");
    }
    assert!(inputs_clean(&[t64(vec![0.0, f64::from_bits(1), 2.0])]));
    for bad in [-0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(!inputs_clean(&[t64(vec![1.0, bad, 2.0])]), "{bad:?}");
    }
    // Every float input is checked; other dtypes need no check.
    let u8s = kiln::Tensor::from_storage(Storage::U8(vec![0, 255, 7]), &[1, 1, 1, 3]).unwrap();
    assert!(inputs_clean(&[u8s.clone(), t32(vec![1.0, 2.0, 3.0])]));
    assert!(!inputs_clean(&[u8s, t32(vec![1.0, f32::NAN, 3.0])]));
    // A strided view is not walked: it takes the ordinary kernel.
    let x = f32_tensor(&[1, 1, 6, 5], Data::Uniform, 3);
    let view = x.permuted(&[0, 1, 3, 2]).unwrap();
    assert!(!view.is_contiguous());
    assert!(!inputs_clean(&[view]));
}

#[test]
fn clean_and_unclean_data_give_eager_bits_through_the_clean_specialisation() {
    let shape = [2, 1, 23, 37];
    for k in [3, 5] {
        let g = median(k, &shape);
        let engine = Engine::new();
        let compiled = engine.compile(&g).unwrap();
        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
        let up = compiled.current_kernel(0).unwrap();
        let clean = up
            .variant(Guard::CleanInputs)
            .expect("clean specialisation");
        assert!(
            !clean.describe().contains("NaN guard"),
            "{}",
            clean.describe()
        );
        let base = f32_tensor(&shape, Data::Ties, 9 + k as u64);
        assert!(kiln::runtime::fused::inputs_clean(std::slice::from_ref(
            &base
        )));
        // Clean, then one unclean value at a corner, an edge and the middle.
        let mut cases = vec![base.clone()];
        let v = match &**base.storage() {
            kiln::runtime::Storage::F32(v) => v.clone(),
            _ => unreachable!(),
        };
        for (at, bad) in [
            (0, -0.0f32),
            (36, f32::NAN),
            (400, f32::INFINITY),
            (851, -0.0),
        ] {
            let mut w = v.clone();
            w[at] = bad;
            cases.push(kiln::Tensor::from_storage(kiln::runtime::Storage::F32(w), &shape).unwrap());
        }
        for (ci, x) in cases.iter().enumerate() {
            let want = eager::run(&g, std::slice::from_ref(x)).unwrap();
            let got = compiled.run(&engine, std::slice::from_ref(x)).unwrap();
            if let Some(d) = first_difference(&want[0], &got[0]) {
                panic!("k={k} case {ci}: {d}");
            }
        }
    }
}

/// A graph of one scipy-style operator on an f32 input of `shape`.
fn op(name: &str, params: &[(&str, &str)], shape: &[usize]) -> Graph {
    common::op_graph(name, params, DType::F32, shape)
}

/// Row blocks of one run, by the form that computed them (see `EngineStats`).
#[derive(Debug, PartialEq, Eq)]
struct Blocks {
    /// By the clean specialisation.
    clean: usize,
    /// By the specialisation for clean inputs with clear sign bits.
    nonneg: usize,
    /// Given back by a specialisation partway.
    aborted: usize,
}

impl Blocks {
    /// Blocks computed by either specialisation.
    fn specialised(&self) -> usize {
        self.clean + self.nonneg
    }
}

/// Runs `x` through `compiled`, checks eager's bits, and returns how the row blocks went.
fn run_counting_blocks(
    engine: &Engine,
    compiled: &kiln::runtime::fused::CompiledGraph,
    g: &Graph,
    x: &kiln::Tensor,
    label: &str,
) -> Blocks {
    let before = engine.stats();
    let want = eager::run(g, std::slice::from_ref(x)).unwrap();
    let got = compiled.run(engine, std::slice::from_ref(x)).unwrap();
    if let Some(d) = first_difference(&want[0], &got[0]) {
        panic!("{label}: {d}");
    }
    let after = engine.stats();
    Blocks {
        clean: after.clean_blocks - before.clean_blocks,
        nonneg: after.nonneg_blocks - before.nonneg_blocks,
        aborted: after.clean_blocks_aborted - before.clean_blocks_aborted,
    }
}

/// The values of `x`, made non-negative (so blocks start on the specialisation for clean
/// inputs with clear sign bits; see `signed_rows_fall_back_to_the_clean_form`).
fn magnitudes(x: &kiln::Tensor) -> Vec<f32> {
    match &**x.storage() {
        kiln::runtime::Storage::F32(v) => v.iter().map(|v| v.abs()).collect(),
        _ => unreachable!(),
    }
}

/// Each row block checks the input rows it reads (after the clean specialisation read
/// them) and alone goes back to the general kernel when one is unclean: blocks before an
/// unclean row stay on the specialisation, and a row read only through a `wrap` border
/// sends the block that reads it there back too. On one thread the blocks run in order.
#[test]
fn an_unclean_row_sends_only_the_blocks_that_read_it_to_the_general_kernel() {
    let shape = [1, 1, 256, 64];
    let cases: [(&str, Vec<(&str, &str)>); 3] = [
        ("median_blur", vec![("k", "3")]),
        ("grey_erosion", vec![("size", "15"), ("mode", "reflect")]),
        ("grey_erosion", vec![("size", "15"), ("mode", "wrap")]),
    ];
    for (name, params) in cases {
        let g = op(name, &params, &shape);
        let engine = Engine::new().with_threads(1);
        let compiled = engine.compile(&g).unwrap();
        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
        assert!(
            compiled
                .current_kernel(0)
                .unwrap()
                .variant(Guard::CleanInputs)
                .is_some(),
            "{name}"
        );
        let values = magnitudes(&f32_tensor(&shape, Data::Uniform, 77));
        let base = kiln::Tensor::from_f32(values.clone(), &shape).unwrap();
        let with = |row: usize, bad: f32| {
            let mut v = values.clone();
            v[row * shape[3] + 5] = bad;
            kiln::Tensor::from_storage(kiln::runtime::Storage::F32(v), &shape).unwrap()
        };
        let label = format!("{name} {params:?}");
        let run = |x: &kiln::Tensor| {
            let b = run_counting_blocks(&engine, &compiled, &g, x, &label);
            (b.specialised(), b.aborted)
        };
        let (blocks, aborted) = run(&base);
        assert_eq!(aborted, 0, "{name} {params:?}");
        assert!(blocks >= 4, "{name} {params:?}: {blocks} blocks");
        // An unclean row near the end: the blocks before its readers stay clean.
        let (clean, aborted) = run(&with(232, f32::NAN));
        assert_eq!(aborted, 1, "{name} {params:?}");
        assert!(
            clean >= blocks / 2,
            "{name} {params:?}: {clean} of {blocks}"
        );
        // The last row: under wrap the first block reads it too.
        let wraps = params.contains(&("mode", "wrap"));
        let (clean, aborted) = run(&with(shape[2] - 1, -0.0));
        assert_eq!(aborted, 1, "{name} {params:?}");
        assert_eq!(
            clean,
            if wraps { 0 } else { blocks - 1 },
            "{name} {params:?}"
        );
        // The first row: the first block stops at once.
        let (clean, aborted) = run(&with(0, f32::INFINITY));
        assert_eq!((clean, aborted), (0, 1), "{name} {params:?}");
    }
}

/// A cropped view (rows strided past its width, an offset into a bigger storage) is checked
/// on the elements it views: unclean values outside it leave every block on the clean
/// specialisation, one inside sends its blocks to the general kernel; eager's bits either way.
#[test]
fn cropped_views_are_checked_on_the_elements_they_view() {
    let (h, w, ph, pw, top, left) = (256usize, 64usize, 300usize, 80usize, 20usize, 8usize);
    let shape = [1, 1, h, w];
    for (name, params) in [
        ("median_blur", vec![("k", "3")]),
        ("grey_erosion", vec![("size", "15"), ("mode", "wrap")]),
    ] {
        let g = op(name, &params, &shape);
        let engine = Engine::new().with_threads(1);
        let compiled = engine.compile(&g).unwrap();
        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
        let values = magnitudes(&f32_tensor(&[1, 1, ph, pw], Data::Uniform, 5));
        let view = |bad: &[(usize, usize, f32)]| {
            let mut v = values.clone();
            for &(r, c, x) in bad {
                v[r * pw + c] = x;
            }
            let storage = std::sync::Arc::new(kiln::runtime::Storage::F32(v));
            let t = kiln::Tensor::from_parts(
                storage,
                &shape,
                &[ph * pw, ph * pw, pw, 1],
                top * pw + left,
            )
            .unwrap();
            assert!(!t.is_contiguous());
            t
        };
        let run = |x: &kiln::Tensor| {
            let b = run_counting_blocks(&engine, &compiled, &g, x, name);
            (b.specialised(), b.aborted)
        };
        // Unclean values only in the storage around the view: left and right of its rows,
        // above and below it.
        let outside = [
            (top + 3, left - 1, f32::NAN),
            (top + 40, left + w, -0.0),
            (top - 1, left + 5, f32::INFINITY),
            (top + h, left + 5, f32::NAN),
        ];
        let (clean, aborted) = run(&view(&outside));
        assert_eq!(aborted, 0, "{name}");
        assert!(clean >= 4, "{name}: {clean} blocks");
        // One inside the view, near its end.
        let (_, aborted) = run(&view(&[(top + 230, left + 7, f32::NAN)]));
        assert_eq!(aborted, 1, "{name}");
    }
}

/// Kernels whose plain picks read only input values (and sign-clear constants) also get a
/// form for clean inputs with clear sign bits, whose picks are integer minima and maxima of
/// the bits. Blocks run it while their rows check so; a block that reads a negative row
/// goes to the clean form, not the general kernel, and so do the blocks after it; signed
/// data runs the clean form after one block. Eager's bits throughout.
#[test]
fn signed_rows_fall_back_to_the_clean_form() {
    let shape = [1, 1, 256, 64];
    for (name, params) in [
        ("median_blur", vec![("k", "5")]),
        ("grey_opening", vec![("size", "3"), ("mode", "reflect")]),
    ] {
        let g = op(name, &params, &shape);
        let engine = Engine::new().with_threads(1);
        let compiled = engine.compile(&g).unwrap();
        assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
        assert!(
            compiled
                .current_kernel(0)
                .unwrap()
                .variant(Guard::NonNegative)
                .is_some(),
            "{name}"
        );
        let signed = f32_tensor(&shape, Data::Uniform, 78);
        let values = magnitudes(&signed);
        let with = |row: usize, v: f32| {
            let mut x = values.clone();
            x[row * shape[3] + 9] = v;
            kiln::Tensor::from_f32(x, &shape).unwrap()
        };
        let counts = |x: &kiln::Tensor| {
            let b = run_counting_blocks(&engine, &compiled, &g, x, name);
            (b.nonneg, b.clean, b.aborted)
        };
        let (nonneg, clean, aborted) = counts(&with(0, 0.5));
        assert!(
            nonneg >= 4 && clean == 0 && aborted == 0,
            "{name}: {nonneg} {clean} {aborted}"
        );
        let blocks = nonneg;
        // A negative value near the end: the blocks before its readers stay on the
        // integer-pick form, the rest run the clean form.
        let (nonneg, clean, aborted) = counts(&with(232, -0.75));
        assert_eq!(aborted, 1, "{name}");
        assert_eq!(nonneg + clean, blocks, "{name}");
        assert!(
            nonneg >= blocks / 2 && clean >= 1,
            "{name}: {nonneg} {clean}"
        );
        // Signed data: the first block falls back, every block runs the clean form.
        let (nonneg, clean, aborted) = counts(&signed);
        assert_eq!((nonneg, clean, aborted), (0, blocks, 1), "{name}");
        // +0 is non-negative; -0 is not clean at all.
        let (nonneg, _, aborted) = counts(&with(100, 0.0));
        assert_eq!((nonneg, aborted), (blocks, 0), "{name}");
        let (_, clean, aborted) = counts(&with(0, -0.0));
        assert_eq!((clean, aborted), (0, 1), "{name}");
    }
}

/// A big byte-path stage (the u8 5x5 median, 211 instructions) compiles unshared first:
/// its shared steps and their one-vector loop are left to the background compile, which
/// lands with them and gives the same bits.
#[test]
fn big_byte_stages_are_shared_by_the_background_compile() {
    let shape = [1, 1, 9, 70];
    let ty = TensorType {
        dtype: DType::U8,
        shape: shape.to_vec(),
    };
    let params = [("size".to_string(), "5".to_string())];
    let g = kiln::ops::build_op("median_filter", &params, &ty).unwrap();
    let engine = Engine::new();
    let compiled = engine.compile(&g).unwrap();
    let first = compiled.kernels[0].describe();
    assert!(!first.contains("shared across columns"), "{first}");
    assert!(compiled.kernels[0].budget_limited);
    let v: Vec<u8> = (0..shape.iter().product::<usize>())
        .map(|i| (i * 37 % 251) as u8)
        .collect();
    let x = kiln::Tensor::from_u8(v, &shape).unwrap();
    let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
    let before = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
    assert!(first_difference(&want[0], &before[0]).is_none());
    assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
    let upgraded = compiled.upgrades[0]
        .as_ref()
        .and_then(|u| u.get())
        .expect("the background compile lands");
    assert!(upgraded.describe().contains("shared across columns"));
    let after = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
    assert!(first_difference(&want[0], &after[0]).is_none());
}

/// The four stages of a 15x15 opening (1x15 min, 15x1 min, 1x15 max, 15x1 max) compile in
/// two groups of about equal compile time: each pairs a min stage with a max stage (the
/// max stages and the 15-row blocks take longer, see `StagePlan::compile_weight`), not
/// the two max stages together. (Under a constant border: with the others, the max stages
/// run the min stages' code, see `tests/dual_stages.rs`.)
#[test]
fn opening_stages_compile_in_balanced_groups() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIP: opening_stages_compile_in_balanced_groups needs 2+ threads\n",
        );
        return;
    }
    let ty = TensorType {
        dtype: DType::F32,
        shape: vec![1, 1, 64, 64],
    };
    let params = [
        ("size".to_string(), "15,15".to_string()),
        ("mode".to_string(), "constant".to_string()),
    ];
    let g = kiln::ops::build_op("grey_opening", &params, &ty).unwrap();
    let compiled = Engine::new().with_tiering(false).compile(&g).unwrap();
    let describe = compiled.kernels[0].describe();
    let groups = describe
        .lines()
        .find_map(|l| l.split("on threads of their own: ").nth(1))
        .unwrap_or_else(|| panic!("no compile groups in\n{describe}"));
    // Stages 0 and 1 are the erosion's (min), 2 and 3 the dilation's (max).
    let groups: Vec<Vec<usize>> = groups
        .split("] [")
        .map(|g| {
            g.trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .map(|i| i.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(groups.len(), 2, "{describe}");
    for g in &groups {
        assert_eq!(g.len(), 2, "{describe}");
        assert_eq!(
            g.iter().filter(|&&i| i >= 2).count(),
            1,
            "each group should have one max stage: {describe}"
        );
    }
}
