//! Zero-copy input (issue 26): `Op::run`, `Pipeline::run` and `run_into` read an `ndarray`
//! view in place when its strides allow (transposed, sliced with steps, broadcast, batch
//! axes that fold), copy it once otherwise (negative strides), and every layout gives the
//! bits of the same values in standard layout, which equal the eager oracle's.
//!
//! No copy is proven by two counters that can fail: the facade's
//! `Pipeline::input_bytes_copied` (a negative-stride view moves it) and the engine's
//! `CompiledGraph::kept_input_copy_bytes` (a view whose last axis is strided moves it, since
//! row functions read unit-stride rows); the pointer the kernels read is the view's own
//! (`kiln::embed::input` unit tests).

use kiln::embed::{Mode, Op, Pipeline};
use kiln::ir::DType;
use kiln::{eager, Tensor};
use ndarray::{s, ArrayD, ArrayViewD, IxDyn};

fn image(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        match s % 89 {
            0 => f32::NAN,
            1 => -0.0,
            2 => f32::INFINITY,
            _ => (s % 1000) as f32 / 8.0 - 40.0,
        }
    })
}

/// A standard-layout copy of `v` (the copied path's input).
fn standard<T: Copy>(v: &ArrayViewD<'_, T>) -> ArrayD<T> {
    ArrayD::from_shape_vec(IxDyn(v.shape()), v.iter().copied().collect()).unwrap()
}

fn bits(a: &ArrayD<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

/// The eager oracle on `p`'s graph at `x`'s shape, `x` copied to standard layout first.
fn eager_of(p: &Pipeline, x: &ArrayViewD<'_, f32>) -> Vec<u32> {
    let layout = p.layout(x.shape()).unwrap();
    let g = p.graph(DType::F32, &layout.kiln_shape).unwrap();
    let permuted = x.view().permuted_axes(layout.perm.clone());
    let t = Tensor::from_f32(permuted.iter().copied().collect(), &layout.kiln_shape).unwrap();
    let out = eager::run(&g, &[t]).unwrap().remove(0);
    let out = out
        .to_ndarray::<f32>()
        .unwrap()
        .into_shape_with_order(IxDyn(&layout.permuted_shape))
        .unwrap()
        .permuted_axes(layout.inverse());
    bits(&out)
}

/// `p` on `v` equals `p` on a standard-layout copy of `v` and eager, also through
/// `run_into`.
fn check(p: &Pipeline, v: ArrayViewD<'_, f32>, what: &str) {
    let y = p.run(v.view()).unwrap();
    let copy = standard(&v);
    assert!(copy.is_standard_layout());
    assert_eq!(
        bits(&y),
        bits(&p.run(copy.view()).unwrap()),
        "{what}: view vs copy"
    );
    assert_eq!(bits(&y), eager_of(p, &v), "{what}: fused vs eager");
    let mut out = ArrayD::<f32>::zeros(IxDyn(v.shape()));
    p.run_into(v.view(), out.view_mut()).unwrap();
    assert_eq!(bits(&out), bits(&y), "{what}: run_into");
}

#[test]
fn odd_layouts_give_the_copied_path_bits() {
    let p = Pipeline::new()
        .then(Op::grey_opening([3, 5]).mode(Mode::Reflect))
        .then(Op::median_filter(3).mode(Mode::Nearest));
    let a = image(&[23, 31], 1);
    check(&p, a.view(), "standard");
    check(&p, a.view().reversed_axes(), "transposed");
    check(&p, a.slice(s![1..;2, ..;3]).into_dyn(), "steps");
    check(&p, a.slice(s![..;-1, ..]).into_dyn(), "negative rows");
    check(&p, a.slice(s![.., ..;-2]).into_dyn(), "negative columns");
    let row = image(&[31], 2);
    let b = row.broadcast(IxDyn(&[9, 31])).unwrap();
    check(&p, b, "broadcast rows");
    // Batch axes: 3-D with the filter along the last two axes.
    let q = Pipeline::new()
        .then(Op::grey_erosion([3, 3]).mode(Mode::Wrap))
        .axes(&[1, 2]);
    let c = image(&[4, 13, 17], 3);
    check(&q, c.view(), "batch standard");
    check(&q, c.slice(s![..;2, .., ..]).into_dyn(), "batch steps");
    check(&q, c.view().permuted_axes(vec![2, 0, 1]), "batch permuted");
    check(&q, c.slice(s![.., ..;-1, ..]).into_dyn(), "batch negative");
}

#[test]
fn views_are_read_in_place_and_copies_are_counted() {
    let p = Pipeline::new().then(Op::grey_dilation(3));
    let a = image(&[40, 64], 4);
    let engine_copies = |p: &Pipeline, shape: &[usize]| {
        let layout = p.layout(shape).unwrap();
        p.compiled(DType::F32, &layout.kiln_shape)
            .unwrap()
            .kept_input_copy_bytes()
    };
    // Standard layout and a slice with steps along rows: no copy anywhere.
    p.run(a.view()).unwrap();
    let stepped = a.slice(s![..;2, ..]);
    p.run(stepped.into_dyn()).unwrap();
    assert_eq!(
        p.input_bytes_copied(),
        0,
        "the facade copied a view it can read"
    );
    assert_eq!(
        engine_copies(&p, &[40, 64]),
        0,
        "the engine copied an input"
    );
    // A transposed view: the facade still borrows it; the engine copies it into a kept
    // buffer (its rows are strided), which its counter shows.
    let q = Pipeline::new().then(Op::grey_dilation(3));
    let t = a.view().reversed_axes();
    q.run(t.view()).unwrap();
    assert_eq!(q.input_bytes_copied(), 0);
    assert_eq!(engine_copies(&q, t.shape()), 40 * 64 * 4);
    // A negative stride: copied once by the facade.
    let n = a.slice(s![..;-1, ..]);
    p.run(n.into_dyn()).unwrap();
    assert_eq!(p.input_bytes_copied(), 40 * 64 * 4);
}

#[test]
fn other_dtypes_are_read_in_place_too() {
    let a = image(&[21, 18], 5);
    let u: ArrayD<u8> = a.mapv(|v| (v.to_bits() % 251) as u8);
    let b: ArrayD<bool> = a.mapv(|v| v.to_bits() % 3 != 0);
    let d: ArrayD<f64> = a.mapv(f64::from);
    let op = Op::grey_erosion([3, 2]).mode(Mode::Mirror);
    for v in [
        u.view(),
        u.view().reversed_axes(),
        u.slice(s![..;3, 1..]).into_dyn(),
    ] {
        let y = op.run(v.view()).unwrap();
        assert_eq!(y, op.run(standard(&v).view()).unwrap());
    }
    for v in [
        d.view(),
        d.view().reversed_axes(),
        d.slice(s![2.., ..;2]).into_dyn(),
    ] {
        let y = op.run(v.view()).unwrap();
        let z = op.run(standard(&v).view()).unwrap();
        assert!(y.iter().zip(&z).all(|(p, q)| p.to_bits() == q.to_bits()));
    }
    let be = Op::binary_erosion(None);
    for v in [
        b.view(),
        b.view().reversed_axes(),
        b.slice(s![1..;2, ..]).into_dyn(),
    ] {
        assert_eq!(
            be.run(v.view()).unwrap(),
            be.run(standard(&v).view()).unwrap()
        );
    }
}

/// `run_into` has the kernels write a row-major output view directly (no copy counted);
/// another layout goes through one counted copy; both give `run`'s bits.
#[test]
fn row_major_outputs_are_written_directly() {
    let p = Pipeline::new()
        .then(Op::grey_closing(3).mode(Mode::Mirror))
        .then(Op::median_filter(3));
    let a = image(&[19, 26], 6);
    let want = bits(&p.run(a.view()).unwrap());
    let mut out = ArrayD::<f32>::from_elem(IxDyn(&[19, 26]), f32::NAN);
    p.run_into(a.view(), out.view_mut()).unwrap();
    assert_eq!(bits(&out), want);
    let mut t = ArrayD::<f32>::zeros(IxDyn(&[26, 19]));
    p.run_into(a.view().reversed_axes(), t.view_mut()).unwrap();
    assert_eq!(bits(&t), bits(&p.run(a.view().reversed_axes()).unwrap()));
    assert_eq!(
        p.output_bytes_copied(),
        0,
        "row-major outputs are written in place"
    );
    // A column-major output: one copy.
    use ndarray::ShapeBuilder;
    let mut f = ArrayD::<f32>::zeros(IxDyn(&[19, 26]).f());
    p.run_into(a.view(), f.view_mut()).unwrap();
    assert_eq!(bits(&standard(&f.view())), want);
    assert_eq!(p.output_bytes_copied(), 19 * 26 * 4);
}
