//! Outputs of more than `HUGE_PAGE_ADVICE_ABOVE_BYTES` come from `memory::fresh_vec`, which
//! advises their mapping for transparent huge pages (an `unsafe` `madvise`). The advice must
//! change nothing but the page size: fused outputs stay eager's, bit for bit, fresh or
//! written into the previous call's buffers.

mod common;

use common::{f32_tensor, op_graph, Data};
use kiln::ir::DType;
use kiln::runtime::memory::HUGE_PAGE_ADVICE_ABOVE_BYTES;
use kiln::runtime::tensor::first_difference;
use kiln::{eager, Engine};

#[test]
fn outputs_above_the_huge_page_threshold_match_eager() {
    // 3000² f32 = 36 MB per output, over the 32 MiB threshold; a one-stage kernel (gradient
    // magnitude) and a two-stage one (a 3x3 opening).
    let shape = [1, 1, 3000, 3000];
    const { assert!(3000 * 3000 * 4 > HUGE_PAGE_ADVICE_ABOVE_BYTES) };
    for (op, params) in [
        ("gradient_magnitude", vec![]),
        ("grey_opening", vec![("size", "3,3")]),
    ] {
        let g = op_graph(op, &params, DType::F32, &shape);
        let engine = Engine::new().with_tiering(false);
        let compiled = engine.compile(&g).unwrap();
        for (seed, data) in [(1, Data::Special), (2, Data::Uniform)] {
            let x = f32_tensor(&shape, data, seed);
            let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
            let fresh = compiled.run(&engine, std::slice::from_ref(&x)).unwrap();
            if let Some(d) = first_difference(&want[0], &fresh[0]) {
                panic!("{op} {data:?} fresh output: {d}");
            }
            let reused = compiled
                .run_into(&engine, std::slice::from_ref(&x), fresh)
                .unwrap();
            if let Some(d) = first_difference(&want[0], &reused[0]) {
                panic!("{op} {data:?} reused output: {d}");
            }
        }
    }
}
