//! The stencil row scheduler (`kiln_runtime::fused` stencil module) tested with
//! hand-written row functions, independent of Cranelift, through its test hooks
//! (`fused::stencil_hooks`): block plans, settling of reads, scratch and copy caches, the
//! choice of guarded variants per block, plane replay, strided inputs and bad slots.
//!
//! Exactness: every run is compared bit for bit (`to_bits`) with a reference computed
//! here, or with a run from an empty cache; the stand-in variants mark their rows so the
//! tests see which form computed each block.
//!
//! Limits: f32 kernels of rank 4 with vertical 3-row sums only.

use std::sync::atomic::Ordering;

use kiln_codegen::cpu::{CpuStage, Guard, RowSlot, RowsFn, SlotKind};
use kiln_codegen::kernel::Source;
use kiln_ir::semantics::remap_index;
use kiln_ir::{Border, DType, Scalar};
use kiln_runtime::fused::stencil_hooks::{
    kept_copies, on_calling_thread, replace_kept_copy, run, scratch_buffers, settle, CleanBlocks,
    PlanProbe, RunCache, Variants, SCRATCH_BUDGET,
};
use kiln_runtime::tensor::{first_difference, Storage, Tensor};

/// `settle` by definition: each distinct row once, ascending, with the least and the
/// greatest chunk that reads it.
fn settle_reference(reads: &[(usize, usize)]) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    let mut sorted = reads.to_vec();
    sorted.sort_unstable();
    for (row, c) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == row => last.2 = c,
            _ => out.push((row, c, c)),
        }
    }
    out
}

/// `BlockPlan::position` (a table for dense rows, a binary search otherwise) finds
/// exactly the needed rows, at their index and ring slot, and nothing else.
#[test]
fn block_plan_positions_match_a_search_of_the_needed_rows() {
    let cases: Vec<Vec<usize>> = vec![
        Vec::new(),
        vec![0],
        vec![7],
        (5..40).collect(),
        (0..30).chain(33..50).chain(90..95).collect(),
        vec![3, 1_000, 5_000_000],
        (0..200).map(|i| i * 3 + 11).collect(),
    ];
    let mut tables = 0;
    for rows in cases {
        let plan = PlanProbe::new(rows.clone(), 7);
        tables += usize::from(plan.has_table());
        let probe = rows.iter().flat_map(|&r| [r.saturating_sub(1), r, r + 1]);
        for row in probe.chain([0, 1, 2, 6, 8, 100, 5_000_001]) {
            assert_eq!(
                plan.position(0, row),
                rows.binary_search(&row).ok().map(|i| (i, i % 7)),
                "{rows:?} row {row}"
            );
        }
        assert_eq!(plan.position(1, 0), None);
    }
    // Both ways were taken: tables for the five non-empty dense lists, a search for
    // the sparse one.
    assert_eq!(tables, 5);
}

#[test]
fn settle_dense_and_sparse_reads_match_the_definition() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % m as u64) as usize
    };
    let mut cases: Vec<Vec<(usize, usize)>> = vec![
        Vec::new(),
        vec![(5, 0)],
        // Far apart rows (the sorting path), e.g. `wrap` reading another plane's end.
        vec![(1_000_000, 2), (3, 1), (1_000_000, 0), (3, 4)],
    ];
    // Windows of neighbouring rows per reader, in reader order (the dense path), with
    // reflected rows at both ends and readers in chunks of 4.
    for k in [1usize, 3, 15] {
        let mut reads = Vec::new();
        for r in 0..40usize {
            for d in 0..k {
                let row = (r + d).abs_diff(k / 2).min(200);
                reads.push((row + 100, r / 4));
            }
        }
        cases.push(reads);
    }
    for _ in 0..50 {
        let n = 1 + next(300);
        let span = 1 + next(2000);
        cases.push((0..n).map(|_| (next(span), next(9))).collect());
    }
    for reads in cases {
        assert_eq!(
            settle(reads.clone()),
            settle_reference(&reads),
            "reads {reads:?}"
        );
    }
}

/// Row function: `out[x] = rows[0][x] + rows[1][x] + rows[2][x]` (f32, left to right),
/// plus `rows[3][0]` as a 0/1 byte when a fourth slot is present (in-range flag).
unsafe extern "C" fn sum3(
    rows: *const *const u8,
    strides: *const i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
) {
    for x in 0..width as isize {
        let mut acc = 0.0f32;
        for s in 0..3 {
            // SAFETY: test row function; the scheduler passes 3 valid row pointers.
            unsafe {
                let p = *rows.add(s) as *const f32;
                let st = *strides.add(s) as isize;
                acc += *p.offset(x * st);
            }
        }
        // SAFETY: `out` has `width` elements with stride `out_stride`.
        unsafe { *(out as *mut f32).offset(x * out_stride as isize) = acc };
    }
}

/// `sum3` over `nrows` rows, per the [`RowsFn`] contract: slot pointers advanced by
/// their row steps, the output by `out_row_step`. Counts its calls in `RUNS`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn sum3_rows(
    rows: *const *const u8,
    row_steps: *const i64,
    strides: *const i64,
    out: *mut u8,
    out_row_step: i64,
    out_stride: i64,
    width: i64,
    nrows: i64,
) {
    RUNS.fetch_add(1, Ordering::Relaxed);
    for r in 0..nrows as isize {
        let mut p = [std::ptr::null::<u8>(); 3];
        for (s, q) in p.iter_mut().enumerate() {
            // SAFETY: test row function; the scheduler passes 3 row pointers and steps
            // such that each advanced pointer is a valid row.
            unsafe { *q = (*rows.add(s)).offset(r * *row_steps.add(s) as isize) };
        }
        // SAFETY: as above; `out` has `nrows` rows `out_row_step` bytes apart.
        unsafe {
            sum3(
                p.as_ptr(),
                strides,
                out.offset(r * out_row_step as isize),
                out_stride,
                width,
            )
        };
    }
}

static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn vertical(source: Source, border: Border, rank: usize) -> Vec<RowSlot> {
    (-1..=1)
        .map(|o| {
            let mut off = vec![0i64; rank - 3];
            off[0] = o * 3;
            RowSlot {
                kind: SlotKind::Row { source, border },
                outer_offset: off,
            }
        })
        .collect()
}

/// Reference of `vertical` + `sum3` on a contiguous f32 image `[1, 1, h, w]`.
fn reference(x: &[f32], h: usize, w: usize, border: Border) -> Vec<f32> {
    let mut out = vec![0.0; h * w];
    for i in 0..h {
        for j in 0..w {
            let mut acc = 0.0f32;
            for o in -1..=1i64 {
                acc += match remap_index(i as i64 + 3 * o, h, &border) {
                    Some(r) => x[r * w + j],
                    None => match border {
                        Border::Constant(Scalar::F32(b)) => f32::from_bits(b),
                        _ => unreachable!(),
                    },
                };
            }
            out[i * w + j] = acc;
        }
    }
    out
}

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 37) % 101) as f32 * 0.25).collect()
}

#[test]
fn one_and_two_stages_match_reference_under_every_border() {
    let plans = RunCache::default();
    for (h, w) in [(1, 1), (1, 7), (9, 1), (40, 13), (5, 3), (300, 3)] {
        let x = data(h * w);
        let t = Tensor::from_f32(x.clone(), &[1, 1, h, w]).unwrap();
        for border in Border::all(Scalar::f32(-2.5)) {
            for multi in [None, Some(sum3_rows as RowsFn)] {
                let one = [CpuStage {
                    slots: vertical(Source::Input(0), border, 4),
                    func: sum3,
                    rows: multi,
                }];
                let runs0 = RUNS.load(Ordering::Relaxed);
                let got = run(
                    &one,
                    Variants::default(),
                    &[DType::F32],
                    std::slice::from_ref(&t),
                    &[1, 1, h, w],
                    SCRATCH_BUDGET,
                    &RunCache::default(),
                )
                .unwrap()
                .0;
                if multi.is_some() && h >= 9 {
                    // Rows 3..h-3 are interior (offsets ±3): at least one multi-row call.
                    assert!(
                        RUNS.load(Ordering::Relaxed) > runs0,
                        "no multi-row call for {h}x{w} {border}"
                    );
                }
                let want = reference(&x, h, w, border);
                let got_v: Vec<u32> = got
                    .to_scalars()
                    .iter()
                    .map(|s| match s {
                        Scalar::F32(b) => *b,
                        _ => panic!(),
                    })
                    .collect();
                let want_v: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got_v, want_v, "one stage {h}x{w} {border}");

                // Chains of 2 and 3 stages, unchunked and in chunks of the fewest rows
                // (a 1-byte budget), so rings wrap and rows are reused across chunks.
                let stage = |source| CpuStage {
                    slots: vertical(source, border, 4),
                    func: sum3,
                    rows: multi,
                };
                for budget in [SCRATCH_BUDGET, 1] {
                    let mut want = want.clone();
                    for n in 2..=3 {
                        let chain: Vec<CpuStage> = (0..n)
                            .map(|k| {
                                stage(if k == 0 {
                                    Source::Input(0)
                                } else {
                                    Source::Stage(k as u32 - 1)
                                })
                            })
                            .collect();
                        // Twice through one cache shared by every case: the second
                        // run takes its block plans from the first.
                        let mut outs = (0..2).map(|_| {
                            run(
                                &chain,
                                Variants::default(),
                                &vec![DType::F32; n],
                                std::slice::from_ref(&t),
                                &[1, 1, h, w],
                                budget,
                                &plans,
                            )
                            .unwrap()
                            .0
                        });
                        let (first, got) = (outs.next().unwrap(), outs.next().unwrap());
                        assert_eq!(first_difference(&first, &got), None);
                        want = reference(&want, h, w, border);
                        let got_v: Vec<u32> = got
                            .to_scalars()
                            .iter()
                            .map(|s| match s {
                                Scalar::F32(b) => *b,
                                _ => panic!(),
                            })
                            .collect();
                        let want_v: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                        assert_eq!(
                            got_v,
                            want_v,
                            "{n} stages {h}x{w} {border} multi={} budget={budget}",
                            multi.is_some()
                        );
                    }
                }
            }
        }
    }
}

/// A chain of `n` stages of 3-row vertical sums under `border`: the first reads the
/// input, each later one the stage before it.
fn sum3_chain(n: usize, border: Border) -> Vec<CpuStage> {
    (0..n)
        .map(|k| CpuStage {
            slots: vertical(
                if k == 0 {
                    Source::Input(0)
                } else {
                    Source::Stage(k as u32 - 1)
                },
                border,
                4,
            ),
            func: sum3,
            rows: Some(sum3_rows),
        })
        .collect()
}

/// Runs f32 `stages` on `t` (`[1, 1, H, W]`) with a scratch `budget` and `cache`.
fn run_chain(stages: &[CpuStage], t: &Tensor, budget: usize, cache: &RunCache) -> Tensor {
    let dtypes = vec![DType::F32; stages.len()];
    let out = run(
        stages,
        Variants::default(),
        &dtypes,
        std::slice::from_ref(t),
        t.shape(),
        budget,
        cache,
    );
    out.unwrap().0
}

#[test]
fn scratch_is_kept_between_runs_and_reused() {
    // A 3-stage chain (two stages in scratch). On the calling thread (one pool, blocks
    // in order) the second run must find the first run's scratch buffers in the cache
    // and use them: the same allocations afterwards. On rayon's threads which pool
    // serves which blocks depends on how the work was split (a pool that meets a block
    // with bigger rings than before grows, and a run may take more pools than the last),
    // so there only the bits are checked. Both give the same bits as a run with an empty
    // cache.
    let (h, w) = (64, 37);
    let t = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
    let stages = sum3_chain(3, Border::Reflect);
    let go = |cache: &RunCache| run_chain(&stages, &t, SCRATCH_BUDGET, cache);
    let buffers = scratch_buffers;
    let want = go(&RunCache::default());
    for on_caller in [true, false] {
        let cache = RunCache::default();
        let run = |cache: &RunCache| match on_caller {
            true => on_calling_thread(|| go(cache)),
            false => go(cache),
        };
        let first = run(&cache);
        let kept = buffers(&cache);
        assert!(kept.len() >= 2, "no scratch kept: {} buffers", kept.len());
        let second = run(&cache);
        if on_caller {
            assert_eq!(
                buffers(&cache),
                kept,
                "the second run allocated its scratch again"
            );
        }
        for got in [&first, &second] {
            assert_eq!(first_difference(&want, got), None);
        }
    }
}

#[test]
fn strided_input_copies_are_kept_between_runs_and_reused() {
    // A transposed input is copied to contiguous rows before the stages run, and the
    // copy is kept. The next run must copy into the kept buffer (marked here by its
    // capacity and NaN contents: a fresh allocation could land at the same address),
    // and every run must equal the run on a contiguous copy.
    let cache = RunCache::default();
    let (h, w) = (45, 38);
    let dense = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
    let transposed = dense.with_memory_order(&[0, 1, 3, 2]).unwrap();
    assert_ne!(transposed.strides()[3], 1, "the view must be strided");
    let stages = sum3_chain(2, Border::Nearest);
    let want = run_chain(&stages, &dense, SCRATCH_BUDGET, &RunCache::default());
    let first = run_chain(&stages, &transposed, SCRATCH_BUDGET, &cache);
    assert_eq!(first_difference(&want, &first), None);
    assert_eq!(kept_copies(&cache).len(), 1, "the copy was not kept");
    let marked_capacity = h * w + 1000;
    let mut marked = Vec::with_capacity(marked_capacity);
    marked.resize(h * w, f32::NAN);
    assert!(replace_kept_copy(&cache, 0, Storage::F32(marked)));
    let kept = kept_copies;
    let marked = kept(&cache);
    assert_eq!(marked[0].1, marked_capacity);
    let second = run_chain(&stages, &transposed, SCRATCH_BUDGET, &cache);
    assert_eq!(first_difference(&want, &second), None);
    assert_eq!(
        kept(&cache),
        marked,
        "the second run copied into a new buffer"
    );
    // A contiguous input is not copied, and leaves the kept copy alone.
    run_chain(&stages, &dense, SCRATCH_BUDGET, &cache);
    assert_eq!(kept(&cache), marked);
}

#[test]
fn block_plans_are_kept_per_shape_chunk_and_kernel() {
    // One cache across kernels, shapes and chunk sizes, revisiting each: every run must
    // equal a run with an empty cache (a plan of another key would compute other rows).
    let plans = RunCache::default();
    let cases = [
        (40, 13, 2, Border::Wrap, 1),
        (40, 13, 3, Border::Reflect, 1),
        (40, 13, 3, Border::Wrap, 1),
        (33, 5, 3, Border::Wrap, 1),
        (40, 13, 3, Border::Wrap, SCRATCH_BUDGET),
        (40, 13, 3, Border::Reflect, 1),
        (40, 13, 2, Border::Wrap, 1),
        (33, 5, 3, Border::Wrap, 1),
        (40, 13, 3, Border::Wrap, 1),
    ];
    for round in 0..2 {
        for &(h, w, n, border, budget) in &cases {
            let t = Tensor::from_f32(data(h * w), &[1, 1, h, w]).unwrap();
            let stages = sum3_chain(n, border);
            let go = |cache: &RunCache| run_chain(&stages, &t, budget, cache);
            let (got, want) = (go(&plans), go(&RunCache::default()));
            assert_eq!(
                first_difference(&got, &want),
                None,
                "round {round}: {h}x{w}, {n} stages, {border}, budget {budget}"
            );
        }
    }
}

/// A stand-in for a clean-input form: `sum3` plus 1000, so that the rows it computed
/// can be told apart.
unsafe extern "C" fn sum3_marked(
    rows: *const *const u8,
    strides: *const i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
) {
    // SAFETY: the caller's contract is `sum3`'s.
    unsafe { sum3(rows, strides, out, out_stride, width) };
    // SAFETY: `sum3` wrote the row.
    unsafe { add_1000(out, out_stride, width) };
}

/// A second stand-in: `sum3` plus 2000.
unsafe extern "C" fn sum3_marked_more(
    rows: *const *const u8,
    strides: *const i64,
    out: *mut u8,
    out_stride: i64,
    width: i64,
) {
    // SAFETY: the caller's contract is `sum3`'s.
    unsafe { sum3_marked(rows, strides, out, out_stride, width) };
    // SAFETY: `sum3_marked` wrote the row.
    unsafe { add_1000(out, out_stride, width) };
}

/// Adds 1000 to each of the `width` f32 elements at `out`, `out_stride` apart.
///
/// # Safety
/// `out` must point at `width` initialised f32 elements `out_stride` apart.
unsafe fn add_1000(out: *mut u8, out_stride: i64, width: i64) {
    for x in 0..width as isize {
        // SAFETY: inside the row, by the function's contract.
        unsafe { *(out as *mut f32).offset(x * out_stride as isize) += 1000.0 };
    }
}

/// Blocks run a kernel's purest form their input rows allow. With only a clean form:
/// the clean form until a block reads an unclean row (a NaN, an infinity, -0), then
/// the general kernel for it and every later block; a negative row is clean. With a
/// form for clean inputs with clear sign bits too: that form until a block reads a
/// negative row (then the clean form) or an unclean one (then the general kernel). One
/// aborted block either way, and every block's rows come from the form its count says
/// (each stand-in adds its own mark). Both the row loop (one plane of 128 rows) and
/// replayed planes (16 planes of 8, see `replay_planes`).
#[test]
fn blocks_use_the_purest_form_their_rows_allow() {
    let w = 7usize;
    let general = [CpuStage {
        slots: vertical(Source::Input(0), Border::Wrap, 4),
        func: sum3,
        rows: Some(sum3_rows),
    }];
    let form = |func| {
        [CpuStage {
            slots: general[0].slots.clone(),
            func,
            rows: None,
        }]
    };
    let (clean, nonneg) = (form(sum3_marked), form(sum3_marked_more));
    for with_nonneg in [false, true] {
        for (b, c, h) in [(1usize, 1usize, 128usize), (4, 4, 8)] {
            let rows = b * c * h;
            // The blocks `run` makes; on one thread they go in order.
            let block = rows
                .div_ceil(rayon::current_num_threads().max(1) * 4)
                .clamp(16, 1024);
            let nblocks = rows.div_ceil(block);
            // Output row `y` reads rows `y - 3`, `y` and `y + 3` of its plane, wrapped.
            let source = |y: usize, d: usize| (y / h) * h + (y % h + d) % h;
            let reads = |y: usize, r: usize| [h - 3, 0, 3].iter().any(|&d| source(y, d) == r);
            for bad_row in [None, Some(0), Some(rows - 1), Some(70), Some(rows - 2)] {
                // (value, whether it is clean)
                let bads = [
                    (-1.5f32, true),
                    (f32::NAN, false),
                    (f32::NEG_INFINITY, false),
                    (-0.0, false),
                ];
                for (bad, clean_ok) in bads {
                    let mut x = data(rows * w);
                    if let Some(r) = bad_row {
                        x[r * w + 2] = bad;
                    }
                    let t = Tensor::from_f32(x.clone(), &[b, c, h, w]).unwrap();
                    let (got, counts) = on_calling_thread(|| {
                        run(
                            &general,
                            match with_nonneg {
                                true => Variants::default()
                                    .with(Guard::CleanInputs, &clean)
                                    .with(Guard::NonNegative, &nonneg),
                                false => Variants::default().with(Guard::CleanInputs, &clean),
                            },
                            &[DType::F32],
                            std::slice::from_ref(&t),
                            &[b, c, h, w],
                            SCRATCH_BUDGET,
                            &RunCache::default(),
                        )
                    })
                    .unwrap();
                    // The first block that reads the row; the blocks from there on run the
                    // next form down, if the row is less pure than the first form needs.
                    let first = bad_row.map_or(nblocks, |r| {
                        (0..rows).find(|&y| reads(y, r)).unwrap() / block
                    });
                    let first = if with_nonneg || !clean_ok {
                        first
                    } else {
                        nblocks
                    };
                    let rest = nblocks - first;
                    let (top, next) = match (with_nonneg, clean_ok) {
                        (true, true) => (2000.0, 1000.0),
                        (true, false) => (2000.0, 0.0),
                        (false, _) => (1000.0, 0.0),
                    };
                    let want_counts = CleanBlocks {
                        clean: if with_nonneg {
                            rest * usize::from(clean_ok)
                        } else {
                            first
                        },
                        nonneg: if with_nonneg { first } else { 0 },
                        aborted: usize::from(rest > 0),
                    };
                    let case = format!("{with_nonneg} {b}x{c}x{h}: {bad_row:?} {bad}");
                    assert_eq!(counts, want_counts, "{case}");
                    let got = got.to_scalars();
                    for y in 0..rows {
                        for col in 0..w {
                            let sum = [h - 3, 0, 3]
                                .iter()
                                .map(|&d| x[source(y, d) * w + col])
                                .fold(0.0f32, |a, v| a + v);
                            let mark = if y / block < first { top } else { next };
                            let Scalar::F32(g) = got[y * w + col] else {
                                panic!("not f32")
                            };
                            assert_eq!(g, (sum + mark).to_bits(), "{case}: row {y} column {col}");
                        }
                    }
                }
            }
        }
    }
}

/// Single-stage kernels over many planes replay one plane's calls for the others
/// (`replay_planes`): the same bits as the per-plane reference under every border, with
/// and without a multi-row function, for blocks that start and end inside planes, and
/// for inputs whose planes are not evenly spaced (which take the row loop).
#[test]
fn replayed_planes_match_the_reference() {
    let (b, c, w) = (3usize, 5usize, 7usize);
    let borders = [
        Border::Reflect,
        Border::Mirror,
        Border::Nearest,
        Border::Wrap,
        Border::Constant(Scalar::F32(2.5f32.to_bits())),
    ];
    for h in [1usize, 2, 6, 8, 13] {
        let x = data(b * c * h * w);
        let t = Tensor::from_f32(x.clone(), &[b, c, h, w]).unwrap();
        // The same values with the channel axis outermost in memory: planes are not
        // evenly spaced across batches.
        let tc = t.with_memory_order(&[1, 0, 2, 3]).unwrap();
        assert_ne!(tc.strides()[0], c * tc.strides()[1]);
        for border in borders {
            for multi in [Some(sum3_rows as RowsFn), None] {
                let one = [CpuStage {
                    slots: vertical(Source::Input(0), border, 4),
                    func: sum3,
                    rows: multi,
                }];
                for input in [&t, &tc] {
                    let got = run(
                        &one,
                        Variants::default(),
                        &[DType::F32],
                        std::slice::from_ref(input),
                        &[b, c, h, w],
                        SCRATCH_BUDGET,
                        &RunCache::default(),
                    )
                    .unwrap()
                    .0
                    .to_scalars();
                    for plane in 0..b * c {
                        let at = plane * h * w;
                        let want = reference(&x[at..at + h * w], h, w, border);
                        for (k, v) in want.iter().enumerate() {
                            let Scalar::F32(g) = got[at + k] else {
                                panic!("not f32")
                            };
                            assert_eq!(
                                g,
                                v.to_bits(),
                                "h {h} {border} multi {} strides {:?}: plane {plane} element {k}",
                                multi.is_some(),
                                input.strides()
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn transposed_inputs_give_the_same_bits() {
    let (h, w) = (6, 5);
    let x = data(h * w);
    let t = Tensor::from_f32(x.clone(), &[1, 1, h, w]).unwrap();
    let tt = t.with_memory_order(&[0, 1, 3, 2]).unwrap();
    assert_ne!(tt.strides()[3], 1);
    let one = [CpuStage {
        slots: vertical(Source::Input(0), Border::Wrap, 4),
        func: sum3,
        rows: Some(sum3_rows),
    }];
    let a = run(
        &one,
        Variants::default(),
        &[DType::F32],
        &[t],
        &[1, 1, h, w],
        SCRATCH_BUDGET,
        &RunCache::default(),
    )
    .unwrap()
    .0;
    let b = run(
        &one,
        Variants::default(),
        &[DType::F32],
        &[tt],
        &[1, 1, h, w],
        SCRATCH_BUDGET,
        &RunCache::default(),
    )
    .unwrap()
    .0;
    assert_eq!(first_difference(&a, &b), None);
}

#[test]
fn bad_slots_are_errors() {
    let t = Tensor::from_f32(data(4), &[1, 1, 2, 2]).unwrap();
    let wrong_stage = [CpuStage {
        slots: vertical(Source::Stage(0), Border::Wrap, 4),
        func: sum3,
        rows: Some(sum3_rows),
    }];
    assert!(run(
        &wrong_stage,
        Variants::default(),
        &[DType::F32],
        std::slice::from_ref(&t),
        &[1, 1, 2, 2],
        SCRATCH_BUDGET,
        &RunCache::default(),
    )
    .is_err());
    let wrong_input = [CpuStage {
        slots: vertical(Source::Input(3), Border::Wrap, 4),
        func: sum3,
        rows: Some(sum3_rows),
    }];
    assert!(run(
        &wrong_input,
        Variants::default(),
        &[DType::F32],
        std::slice::from_ref(&t),
        &[1, 1, 2, 2],
        SCRATCH_BUDGET,
        &RunCache::default(),
    )
    .is_err());
    let wrong_shape = [CpuStage {
        slots: vertical(Source::Input(0), Border::Wrap, 4),
        func: sum3,
        rows: Some(sum3_rows),
    }];
    assert!(run(
        &wrong_shape,
        Variants::default(),
        &[DType::F32],
        &[t],
        &[1, 1, 2, 3],
        SCRATCH_BUDGET,
        &RunCache::default(),
    )
    .is_err());
}
