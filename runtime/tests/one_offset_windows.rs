//! A window reduction over one offset is a move (SEMANTICS.md, "Folds of one element are
//! moves"): eager and fused agree bit for bit, NaN payloads included, for min, max and sum,
//! f32 and f64, under every border mode. Found by the fuzzer (seed 201, case 7225: a
//! one-offset `window max` under reflect on a 1x1x1 image kept the NaN payload eagerly and
//! gave the canonical NaN fused). Cases that still differ are listed (DIFF lines).

use kiln_ir::{Border, DType, Footprint, GraphBuilder, ReduceOp, Scalar};
use kiln_runtime::{eager, fused::Engine, Storage, Tensor};

const F32_NANS: [u32; 4] = [0xffc5_2a24, 0x7f80_0001, 0xff80_0001, 0x7fc0_0000];
const F64_NANS: [u64; 3] = [
    0xfff8_0000_0000_0abc,
    0x7ff0_0000_0000_0001,
    0x7ff8_0000_0000_0000,
];

fn borders(dtype: DType) -> Vec<Border> {
    let cval = Scalar::from_f64(dtype, 2.5);
    ["constant", "reflect", "mirror", "nearest", "wrap"]
        .iter()
        .map(|m| Border::from_mode_name(m, cval).unwrap())
        .collect()
}

fn input(dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let storage = match dtype {
        DType::F32 => Storage::F32(
            (0..n)
                .map(|i| match i % 3 {
                    0 => f32::from_bits(F32_NANS[(i / 3) % F32_NANS.len()]),
                    1 => -0.0,
                    _ => i as f32 - 7.5,
                })
                .collect(),
        ),
        _ => Storage::F64(
            (0..n)
                .map(|i| match i % 3 {
                    0 => f64::from_bits(F64_NANS[(i / 3) % F64_NANS.len()]),
                    1 => -0.0,
                    _ => i as f64 - 7.5,
                })
                .collect(),
        ),
    };
    Tensor::from_storage(storage, shape).unwrap()
}

#[test]
fn one_offset_windows_move_their_value_in_eager_and_fused() {
    let engine = Engine::new();
    let mut checked = 0;
    let mut bad = 0;
    for dtype in [DType::F32, DType::F64] {
        for shape in [&[1usize, 1, 1][..], &[1, 2, 7], &[2, 1, 3, 5]] {
            let rank = shape.len() - 2;
            for border in borders(dtype) {
                for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum] {
                    for off in [-1i64, 0, 2] {
                        let mut b = GraphBuilder::new();
                        let x = b.input(dtype, shape).unwrap();
                        let fp = Footprint::along_axis(rank, rank - 1, &[off]);
                        let y = b.window_reduce(x, op, &fp, border).unwrap();
                        let g = b.finish(&[y]).unwrap();
                        let t = input(dtype, shape);
                        let e = eager::run(&g, std::slice::from_ref(&t)).unwrap();
                        let f = engine.run(&g, std::slice::from_ref(&t)).unwrap();
                        let (e, f) = (e[0].to_scalars(), f[0].to_scalars());
                        if e != f {
                            eprintln!(
                                "DIFF {dtype} {shape:?} {border:?} {op:?} offset {off}: {e:?} vs {f:?}"
                            );
                            bad += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 3 * 5 * 3 * 3);
    assert_eq!(
        bad, 0,
        "{bad} one-offset windows differ between eager and fused"
    );
}
