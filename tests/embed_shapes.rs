//! Shape-free pipelines (issue 26): a `Pipeline` builds, optimises and fuses its graph once
//! per dtype, rank and shape class (`kiln_runtime::fused::Binding`) and runs it on any
//! shape of the class, bit-identical to the eager oracle on the graph built at each exact
//! shape; the class boundary (a spatial extent below `2·M + 2`) gets a compile of its own;
//! the on-disk kernel cache, keyed by shape-free kernel forms, serves every shape.

use std::sync::Arc;

use kiln::embed::{Mode, Op, Pipeline};
use kiln::ir::DType;
use kiln::{eager, Engine, Tensor};
use ndarray::{ArrayD, IxDyn};

fn image(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        match s % 97 {
            0 => f32::NAN,
            1 => -0.0,
            _ => (s % 1000) as f32 / 8.0 - 40.0,
        }
    })
}

fn bits(a: &ArrayD<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// The eager oracle on `p`'s graph built at `x`'s exact shape (every axis spatial).
fn eager_of(p: &Pipeline, x: &ArrayD<f32>) -> Vec<u32> {
    let layout = p.layout(x.shape()).unwrap();
    let g = p.graph(DType::F32, &layout.kiln_shape).unwrap();
    let t = Tensor::from_f32(x.iter().copied().collect(), &layout.kiln_shape).unwrap();
    let out = eager::run(&g, &[t]).unwrap().remove(0);
    out.to_ndarray::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn fifty_shapes_one_graph_build_every_result_equals_eager() {
    let engine = Arc::new(Engine::new());
    let p = Pipeline::with_engine(engine.clone())
        .then(Op::grey_opening([3, 5]).mode(Mode::Reflect))
        .then(Op::median_filter(3).mode(Mode::Wrap))
        .then(Op::grey_dilation(3).mode(Mode::Mirror));
    let mut kernels = None;
    for i in 0..50u64 {
        let shape = [8 + (i * 7 % 41) as usize, 10 + (i * 13 % 57) as usize];
        let x = image(&shape, i);
        let y = p.run(x.view()).unwrap();
        assert_eq!(y.shape(), x.shape());
        assert_eq!(bits(&y), eager_of(&p, &x), "shape {shape:?}");
        let compiled = engine.stats().kernels_compiled;
        assert_eq!(
            *kernels.get_or_insert(compiled),
            compiled,
            "Cranelift ran again"
        );
    }
    assert_eq!(p.graph_builds(), 1, "one graph build for 50 shapes");
    assert_eq!(p.cached_graphs(), 1);
}

#[test]
fn run_into_binds_shapes_too() {
    let p = Pipeline::new()
        .then(Op::grey_erosion(3))
        .then(Op::median_filter(3));
    for (i, shape) in [[9usize, 11], [30, 7], [7, 30]].into_iter().enumerate() {
        let x = image(&shape, 70 + i as u64);
        let mut out = ArrayD::<f32>::zeros(IxDyn(&shape));
        p.run_into(x.view(), out.view_mut()).unwrap();
        assert_eq!(bits(&out), eager_of(&p, &x), "shape {shape:?}");
    }
    assert_eq!(p.graph_builds(), 1);
}

/// A 5-row window under `wrap` (`M = 2`): extents from 6 share one graph; 5 and less is a
/// class of its own per extent (clipping depends on it), and still equals eager.
#[test]
fn the_class_boundary_gets_its_own_compile() {
    let p = Pipeline::new().then(Op::grey_erosion([5, 1]).mode(Mode::Wrap));
    let run = |shape: [usize; 2], seed| {
        let x = image(&shape, seed);
        assert_eq!(
            bits(&p.run(x.view()).unwrap()),
            eager_of(&p, &x),
            "{shape:?}"
        );
    };
    run([6, 9], 1);
    run([40, 3], 2);
    assert_eq!(p.graph_builds(), 1, "6 and 40 rows are both large");
    run([5, 9], 3);
    assert_eq!(p.graph_builds(), 2, "5 rows is below the class boundary");
    run([5, 31], 4);
    assert_eq!(
        p.graph_builds(),
        2,
        "the columns do not matter (no window along them)"
    );
    for rows in 1..5 {
        run([rows, 4], 10 + rows as u64);
    }
    assert_eq!(p.graph_builds(), 6, "each small extent is its own class");
    // A 3-D array is another rank: its own graph.
    let x = image(&[6, 4, 5], 5);
    let q = Pipeline::new().then(Op::grey_erosion([5, 1, 1]).mode(Mode::Wrap));
    assert_eq!(bits(&q.run(x.view()).unwrap()), eager_of(&q, &x));
}

/// The on-disk cache hashes kernel forms, which hold no shape: a second process (a fresh
/// engine on the same directory) running another shape loads every kernel from disk.
#[test]
fn two_shapes_share_the_disk_entries() {
    let dir = std::env::temp_dir().join(format!("kiln-embed-shapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let chain = |engine: &Arc<Engine>| {
        Pipeline::with_engine(engine.clone())
            .then(Op::grey_closing(3))
            .then(Op::median_filter(5))
    };
    let first = Arc::new(Engine::new().with_tiering(false).with_cache_dir(&dir));
    let x = image(&[12, 20], 8);
    let p = chain(&first);
    assert_eq!(bits(&p.run(x.view()).unwrap()), eager_of(&p, &x));
    // Cache writes run on threads of their own.
    let disk = first.disk_cache().expect("the cache directory opens");
    assert!(disk.wait_for_writes(std::time::Duration::from_secs(120)));
    let written = first.stats().disk_writes;
    assert!(written > 0, "the first engine wrote its kernels");

    let second = Arc::new(Engine::new().with_tiering(false).with_cache_dir(&dir));
    let y = image(&[31, 9], 9);
    let q = chain(&second);
    assert_eq!(bits(&q.run(y.view()).unwrap()), eager_of(&q, &y));
    let st = second.stats();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        st.kernels_compiled, 0,
        "another shape compiled kernels: {st:?}"
    );
    assert_eq!(st.disk_hits, written, "every kernel came from disk");
    assert_eq!(st.disk_writes, 0);
}
