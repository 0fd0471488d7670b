//! The typed morphology API (`kiln::embed`: `Op` variants and the program functions of
//! `kiln::embed::morphology`) against scipy 1.17 goldens from tests/golden/morphology
//! (scripts/gold_morphology.py), bit for bit, plus its error cases.

use std::path::{Path, PathBuf};

use kiln::embed::morphology::{generate_binary_structure, iterate_structure};
use kiln::embed::{
    binary_fill_holes, binary_morphology, binary_propagation, BinaryMorphology, BinaryOptions,
    Mode, Op, Window,
};
use kiln::runtime::npy::read_npy;
use kiln::runtime::tensor::NdElement;
use ndarray::ArrayD;

fn golden<T: NdElement>(file: &str) -> ArrayD<T> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/morphology");
    read_npy(dir.join(file))
        .expect("golden file")
        .to_ndarray::<T>()
        .expect("dtype")
}

#[test]
fn program_functions_match_scipy() {
    // binary_erosion_mask_it0_bv1: iterations=0, border_value=1, mask.
    let (x, m) = (golden::<bool>("in_11.npy"), golden::<bool>("in_12.npy"));
    let opts = BinaryOptions {
        iterations: 0,
        border_value: true,
        ..BinaryOptions::default()
    };
    let y = binary_morphology(BinaryMorphology::Erosion, x.view(), Some(m.view()), &opts).unwrap();
    assert_eq!(y, golden::<bool>("binary_erosion_mask_it0_bv1.out.npy"));
    // binary_closing_mask_it-1_bv0.
    let (x, m) = (golden::<bool>("in_48.npy"), golden::<bool>("in_49.npy"));
    let opts = BinaryOptions {
        iterations: -1,
        ..BinaryOptions::default()
    };
    let y = binary_morphology(BinaryMorphology::Closing, x.view(), Some(m.view()), &opts).unwrap();
    assert_eq!(y, golden::<bool>("binary_closing_mask_it-1_bv0.out.npy"));
    // binary_propagation_0_cross_bv0.
    let (x, m) = (golden::<bool>("in_59.npy"), golden::<bool>("in_60.npy"));
    let y = binary_propagation(x.view(), Some(m.view()), None, false, &[]).unwrap();
    assert_eq!(y, golden::<bool>("binary_propagation_0_cross_bv0.out.npy"));
    // binary_fill_holes_cross.
    let x = golden::<bool>("in_65.npy");
    let y = binary_fill_holes(x.view(), None, &[]).unwrap();
    assert_eq!(y, golden::<bool>("binary_fill_holes_cross.out.npy"));
}

#[test]
fn op_variants_match_scipy() {
    let x = golden::<f32>("in_71.npy");
    let y = Op::white_tophat(3).run(x.view()).unwrap();
    let want = golden::<f32>("white_tophat_float32_size3_reflect.out.npy");
    assert_eq!(
        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let x = golden::<u8>("in_96.npy");
    let y = Op::morphological_laplace(3)
        .mode(Mode::Constant)
        .cval(7.0)
        .run(x.view())
        .unwrap();
    assert_eq!(
        y,
        golden::<u8>("morphological_laplace_uint8_size3_constant.out.npy")
    );
    let x = golden::<f64>("in_104.npy");
    let y = Op::grey_dilation(Window::footprint(&[2, 2], &[true; 4]))
        .structure(&[0.5, 1.0, 0.0, 3.0])
        .origin([-1, 0])
        .mode(Mode::Nearest)
        .run(x.view())
        .unwrap();
    let want = golden::<f64>("grey_dilation_float64_st_o_nearest.out.npy");
    assert_eq!(
        y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    let x = golden::<bool>("in_50.npy");
    let s1 = Window::footprint(
        &[3, 3],
        &[false, true, false, true, true, true, false, false, false],
    );
    let s2 = Window::footprint(
        &[3, 3],
        &[false, false, false, false, false, false, true, true, true],
    );
    let y = Op::binary_hit_or_miss(Some(s1), Some(s2))
        .run(x.view())
        .unwrap();
    assert_eq!(y, golden::<bool>("binary_hit_or_miss_s1s2_bool.out.npy"));
}

#[test]
fn typed_errors() {
    let x = ArrayD::from_elem(vec![5, 6], true);
    let ring = Window::footprint(
        &[3, 3],
        &[true, true, true, true, false, true, true, true, true],
    );
    let opts = BinaryOptions {
        structure: Some(ring),
        iterations: 0,
        ..BinaryOptions::default()
    };
    assert!(binary_morphology(BinaryMorphology::Dilation, x.view(), None, &opts).is_err());
    let opts = BinaryOptions {
        origin: vec![2],
        ..BinaryOptions::default()
    };
    assert!(binary_morphology(BinaryMorphology::Erosion, x.view(), None, &opts).is_err());
    let m = ArrayD::from_elem(vec![5, 5], true);
    assert!(binary_propagation(x.view(), Some(m.view()), None, false, &[]).is_err());
    let empty = ArrayD::<bool>::from_elem(vec![0, 3], true);
    assert!(binary_fill_holes(empty.view(), None, &[]).is_err());
    assert!(Op::binary_dilation(None)
        .iterations(65)
        .run(x.view())
        .is_err());
    assert!(Op::binary_opening(None)
        .mode(Mode::Wrap)
        .run(x.view())
        .is_err());
    let xb = ArrayD::from_elem(vec![4, 4], true);
    assert!(Op::morphological_gradient(3).run(xb.view()).is_err());
    let xu = ArrayD::from_elem(vec![4, 4], 3u8);
    assert!(Op::white_tophat([2, 2])
        .structure(&[0.0, 1.0, 1.0, 0.0])
        .run(xu.view())
        .is_err());
    assert!(Op::median_filter(3)
        .structure(&[0.0; 9])
        .run(xu.view())
        .is_err());
    assert!(Op::grey_erosion(3).iterations(2).run(xu.view()).is_err());
    assert!(generate_binary_structure(0, 1).is_err());
    assert_eq!(
        iterate_structure(&generate_binary_structure(1, 1).unwrap(), 2, None)
            .unwrap()
            .shape,
        vec![5]
    );
}
