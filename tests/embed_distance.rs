//! `kiln::embed::distance`: the typed distance transforms on ndarray views against scipy's
//! goldens (one image per call, every axis spatial), strided views, and clear errors.

#[path = "../ops/tests/common/gold.rs"]
mod gold;

use kiln::embed::distance::{
    distance_transform_bf, distance_transform_cdt, distance_transform_edt, BfArray, BfMetric,
    CdtMetric,
};
use kiln::runtime::npy::read_npy;
use ndarray::{ArrayD, Axis, IxDyn};

/// A golden case's input as an `f64` array with the `[1, 1]` batch/channel axes dropped.
fn input(name: &str) -> ArrayD<f64> {
    let t = read_npy(gold::dir().join(format!("{name}.in.npy"))).unwrap();
    assert_eq!(&t.shape()[..2], &[1, 1], "{name}: one image");
    let a = t.to_ndarray::<f64>().unwrap();
    a.index_axis_move(Axis(0), 0).index_axis_move(Axis(0), 0)
}

fn param(name: &str, key: &str) -> Option<String> {
    gold::cases()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap()
        .params
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn sampling(name: &str) -> Option<Vec<f64>> {
    param(name, "sampling").map(|v| v.split(',').map(|x| x.parse().unwrap()).collect())
}

#[test]
fn edt_matches_scipy_on_golden_images_including_strided_views() {
    for name in [
        "edt_2d_random",
        "edt_2d_nonint",
        "edt_3d_random",
        "edt_2d_nobg_sampled",
        "edt_4d_random",
    ] {
        let x = input(name);
        let s = sampling(name);
        let (d, i) = distance_transform_edt(x.view(), s.as_deref(), true).unwrap();
        let want_d = gold::read(&format!("{name}.dist.npy")).f64s();
        let want_i = gold::read(&format!("{name}.idx.npy")).i32s();
        let got_d: Vec<u64> = d.iter().map(|v| v.to_bits()).collect();
        let want_bits: Vec<u64> = want_d.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got_d, want_bits, "{name}: distances");
        let i = i.unwrap();
        assert_eq!(i.shape()[0], x.ndim(), "{name}: (ndim,) + shape");
        assert_eq!(
            i.iter().copied().collect::<Vec<_>>(),
            want_i,
            "{name}: indices"
        );
        // The same image read through a reversed-axes view of a transposed copy: strided.
        let t = x.t().to_owned();
        let (d2, _) = distance_transform_edt(t.t(), s.as_deref(), false).unwrap();
        assert_eq!(d2, d, "{name}: strided view");
    }
}

#[test]
fn cdt_and_bf_match_scipy_on_golden_images() {
    for (name, metric) in [
        ("cdt_2d_taxicab", CdtMetric::Taxicab),
        ("cdt_3d_chessboard", CdtMetric::Chessboard),
    ] {
        let (d, i) = distance_transform_cdt(input(name).view(), &metric, true).unwrap();
        assert_eq!(
            d.iter().copied().collect::<Vec<_>>(),
            gold::read(&format!("{name}.dist.npy")).i32s(),
            "{name}"
        );
        assert_eq!(
            i.unwrap().iter().copied().collect::<Vec<_>>(),
            gold::read(&format!("{name}.idx.npy")).i32s(),
            "{name}"
        );
    }
    let name = "cdt_2d_array_asym";
    let st = ArrayD::from_shape_vec(
        IxDyn(&[3, 3]),
        vec![true, true, false, true, true, false, false, false, false],
    )
    .unwrap();
    let (d, _) =
        distance_transform_cdt(input(name).view(), &CdtMetric::Structure(st), false).unwrap();
    assert_eq!(
        d.iter().copied().collect::<Vec<_>>(),
        gold::read(&format!("{name}.dist.npy")).i32s(),
        "{name}"
    );

    let name = "bf_2d_sampled";
    let (d, i) = distance_transform_bf(
        input(name).view(),
        BfMetric::Euclidean,
        sampling(name).as_deref(),
        true,
    )
    .unwrap();
    let BfArray::F64(d) = d else {
        panic!("euclidean is f64")
    };
    let want: Vec<u64> = gold::read(&format!("{name}.dist.npy"))
        .f64s()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(d.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
    assert_eq!(
        i.unwrap().iter().copied().collect::<Vec<_>>(),
        gold::read(&format!("{name}.idx.npy")).i32s()
    );
    let name = "bf_2d_chessboard";
    let (d, _) =
        distance_transform_bf(input(name).view(), BfMetric::Chessboard, None, false).unwrap();
    let BfArray::U32(d) = d else {
        panic!("chessboard is u32")
    };
    assert_eq!(
        d.iter().copied().collect::<Vec<_>>(),
        gold::read(&format!("{name}.dist.npy")).u32s()
    );
}

#[test]
fn bad_arguments_are_typed_errors() {
    let x = ArrayD::<f32>::zeros(IxDyn(&[4, 5]));
    let e = distance_transform_edt(x.view(), Some(&[1.0, 2.0, 3.0]), false).unwrap_err();
    assert!(e.to_string().contains("sampling has 3 values"), "{e}");
    let empty = ArrayD::<u8>::zeros(IxDyn(&[0, 5]));
    let e = distance_transform_edt(empty.view(), None, false).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let nine = ArrayD::<bool>::from_elem(IxDyn(&[1; 9]), true);
    assert!(distance_transform_bf(nine.view(), BfMetric::Taxicab, None, false).is_err());
    let st = ArrayD::from_elem(IxDyn(&[3, 3, 3]), true);
    let e = distance_transform_cdt(x.view(), &CdtMetric::Structure(st), false).unwrap_err();
    assert!(e.to_string().contains("extent 3"), "{e}");
}
