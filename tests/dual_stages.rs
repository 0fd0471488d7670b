//! Dual stages (`codegen/src/cpu/dual.rs`): the general CPU form of an opening or a closing
//! stores some stage results negated so that its max stages run the programs of its min
//! stages, and compiles each program once. The outputs must be eager's, bit for bit, on
//! data with NaN, infinities, -0 and subnormals, in every border mode that qualifies, on
//! tiny and odd shapes and strided views, before and after the background compile.

mod common;

use std::time::Duration;

use common::{f32_tensor, layouts, op_graph, Data, Rng};
use kiln::ir::passes::WindowBounds;
use kiln::ir::DType;
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine, Tensor};

const SHAPES: [&[usize]; 5] = [
    &[1, 1, 1, 1],
    &[1, 1, 1, 9],
    &[1, 2, 7, 1],
    &[2, 1, 17, 23],
    &[1, 1, 40, 70],
];

/// Which stages run another stage's code, from a kernel's description.
fn shared_stages(describe: &str) -> usize {
    describe
        .lines()
        .filter(|l| l.contains("; the code of stage"))
        .count()
}

/// Inputs of `dtype`: f32 per `data`; u8 from the same generator's bits (uniform bytes,
/// a few values for `Ties`, and the extremes 0 and 255 for `Special`).
fn input(dtype: DType, shape: &[usize], data: Data, seed: u64) -> Tensor {
    let x = f32_tensor(shape, data, seed);
    match dtype {
        DType::U8 => {
            let mut rng = Rng(seed);
            let v = x
                .to_scalars()
                .iter()
                .map(|s| match data {
                    Data::Uniform => (rng.next_u64() >> 56) as u8,
                    Data::Ties => [3u8, 200, 77][rng.below(3)],
                    Data::Special => [0u8, 255, 1, 254, (s.to_f64() * 100.0) as u8][rng.below(5)],
                })
                .collect();
            Tensor::from_u8(v, shape).unwrap()
        }
        _ => x,
    }
}

fn check(op: &str, size: &str, mode: &str) {
    check_typed(op, size, mode, DType::F32);
}

fn check_typed(op: &str, size: &str, mode: &str, dtype: DType) {
    let params = [("size", size), ("mode", mode)];
    for (si, shape) in SHAPES.iter().enumerate() {
        let g = op_graph(op, &params, dtype, shape);
        for tiered in [false, true] {
            // Clipping would shrink these windows on the tiny shapes (to other kernels than
            // the dual form this file is about); it is tested in runtime/tests/window_bounds.rs.
            let engine = Engine::new()
                .with_tiering(tiered)
                .with_window_bounds(WindowBounds {
                    clip: false,
                    chains: true,
                });
            let compiled = engine.compile(&g).unwrap();
            let describe = compiled.kernels[0].describe();
            assert!(
                describe.contains("dual stages") && shared_stages(&describe) == 2,
                "{op} {size} {mode}: the max stages should run the min stages' code:\n{describe}"
            );
            if tiered {
                // The background compile brings the stages as they are (faster to run).
                assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
                let up = compiled.upgrades[0]
                    .as_ref()
                    .expect("a dual kernel is upgraded");
                let up = up.get().expect("the background compile succeeds");
                assert!(!up.dual_stages && !up.describe().contains("dual stages"));
                assert!(compiled.kernels[0].dual_stages);
            }
            for (di, data) in [Data::Special, Data::Uniform, Data::Ties]
                .into_iter()
                .enumerate()
            {
                let x = input(dtype, shape, data, (31 * si + di) as u64);
                let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                for (layout, view) in layouts(&x) {
                    let got = compiled.run(&engine, std::slice::from_ref(&view)).unwrap();
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!(
                            "{op} {size} {mode} {dtype:?} {shape:?} {data:?} {layout} \
                             tiered={tiered}: {d}"
                        );
                    }
                }
            }
        }
    }
}

// Boxes of 5x5 and more run as four stages (1xk and kx1 windows; see `ARCHITECTURE.md`).

#[test]
fn openings_share_code_and_match_eager() {
    for mode in ["reflect", "mirror", "nearest", "wrap"] {
        check("grey_opening", "5,5", mode);
    }
    check("grey_opening", "15,15", "reflect");
    check("grey_opening", "7,9", "mirror");
}

#[test]
fn closings_share_code_and_match_eager() {
    for mode in ["reflect", "mirror", "nearest", "wrap"] {
        check("grey_closing", "5,5", mode);
    }
    check("grey_closing", "15,15", "nearest");
    check("grey_closing", "9,7", "wrap");
}

/// Bytes: the dual of a byte max is the complement (`255 - x`) of a byte min of
/// complements.
#[test]
fn byte_openings_and_closings_share_code_and_match_eager() {
    for mode in ["reflect", "nearest", "wrap"] {
        check_typed("grey_opening", "5,5", mode, DType::U8);
        check_typed("grey_closing", "5,5", mode, DType::U8);
    }
    check_typed("grey_opening", "15,15", "mirror", DType::U8);
    check_typed("grey_closing", "7,9", "reflect", DType::U8);
}

/// A stage read under a constant border keeps its sign (the border constant is what the
/// clean forms read too), so a constant-mode opening compiles its four stages.
#[test]
fn constant_borders_keep_their_stages() {
    let g = op_graph(
        "grey_opening",
        &[("size", "5,5"), ("mode", "constant"), ("cval", "-2")],
        DType::F32,
        &[1, 1, 16, 16],
    );
    let compiled = Engine::new().with_tiering(false).compile(&g).unwrap();
    let describe = compiled.kernels[0].describe();
    assert!(!describe.contains("dual stages"), "{describe}");
    assert_eq!(shared_stages(&describe), 0, "{describe}");
}
