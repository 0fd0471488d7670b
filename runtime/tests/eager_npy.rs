//! `.npy` reading and writing: round trips of every dtype, hand-built files (C and Fortran
//! order, format versions 1 to 3) and every kind of corrupt file.

use std::path::PathBuf;

use kiln_ir::Scalar;
use kiln_runtime::npy::{parse_npy, read_npy, to_npy_bytes, write_npy, NpyError};
use kiln_runtime::Tensor;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("kiln_npy_test_{}_{name}.npy", std::process::id()))
}

/// A file of format `major` with the given header dict text and data bytes; the header is
/// padded with spaces and a newline to a 64-byte boundary, as numpy does.
fn npy_file(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let pre = if major == 1 { 10 } else { 12 };
    let mut header = dict.to_string();
    while !(pre + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.push(major);
    out.push(0);
    if major == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn assert_same(a: &Tensor, b: &Tensor) {
    assert_eq!(a.dtype(), b.dtype());
    assert_eq!(a.shape(), b.shape());
    // Scalars compare by bits (NaN payloads, signed zeros).
    assert_eq!(a.to_scalars(), b.to_scalars());
}

#[test]
fn round_trip_every_dtype_through_a_file() {
    let f32s = vec![
        1.5f32,
        -0.0,
        f32::from_bits(0xffc0_1234),
        f32::INFINITY,
        1e-45,
        -3.25,
    ];
    let f64s = vec![
        0.1f64,
        -0.0,
        f64::from_bits(0x7ff0_0000_0000_0001),
        f64::NEG_INFINITY,
    ];
    let tensors = [
        ("f32", Tensor::from_f32(f32s, &[1, 2, 3]).unwrap()),
        ("f64", Tensor::from_f64(f64s, &[2, 2]).unwrap()),
        (
            "u8",
            Tensor::from_u8((0..=255).collect(), &[1, 1, 16, 16]).unwrap(),
        ),
        (
            "bool",
            Tensor::from_bool(vec![true, false, false, true, true], &[5]).unwrap(),
        ),
        ("scalar", Tensor::from_f32(vec![7.0], &[]).unwrap()),
        (
            "i8",
            Tensor::from_ndarray(
                &ndarray::ArrayD::from_shape_vec(vec![3], vec![i8::MIN, -1, i8::MAX]).unwrap(),
            ),
        ),
        (
            "u16",
            Tensor::from_ndarray(
                &ndarray::ArrayD::from_shape_vec(vec![1, 3], vec![0u16, 0x1234, u16::MAX]).unwrap(),
            ),
        ),
        (
            "i16",
            Tensor::from_ndarray(
                &ndarray::ArrayD::from_shape_vec(vec![2, 2], vec![i16::MIN, -2, 0, i16::MAX])
                    .unwrap(),
            ),
        ),
        (
            "i32",
            Tensor::from_ndarray(
                &ndarray::ArrayD::from_shape_vec(vec![1, 1, 3], vec![i32::MIN, -70000, i32::MAX])
                    .unwrap(),
            ),
        ),
        (
            "u32",
            Tensor::from_ndarray(
                &ndarray::ArrayD::from_shape_vec(vec![2], vec![7u32, u32::MAX]).unwrap(),
            ),
        ),
    ];
    for (name, t) in tensors {
        let path = temp(name);
        write_npy(&path, &t).unwrap();
        let back = read_npy(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_same(&back, &t);
        assert!(back.is_contiguous());
    }
}

#[test]
fn strided_tensors_are_written_in_c_order() {
    // Storage [[1, 2, 3], [4, 5, 6]] viewed transposed: logical [[1, 4], [2, 5], [3, 6]].
    let t = Tensor::from_f32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])
        .unwrap()
        .permuted(&[1, 0])
        .unwrap();
    let bytes = to_npy_bytes(&t);
    let data = &bytes[bytes.len() - 24..];
    assert_eq!(data, f32_bytes(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]).as_slice());
    let back = parse_npy(&bytes).unwrap();
    assert_eq!(back.shape(), &[3, 2]);
    assert_same(&back, &t);
}

#[test]
fn writer_matches_numpy_header_layout() {
    let t = Tensor::from_f32(vec![0.0; 6], &[2, 3]).unwrap();
    let bytes = to_npy_bytes(&t);
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert_eq!(bytes, npy_file(1, dict, &[0u8; 24]));
    assert!((10 + bytes[8] as usize + bytes[9] as usize * 256).is_multiple_of(64));
    let one_d = to_npy_bytes(&Tensor::from_u8(vec![1, 2], &[2]).unwrap());
    let dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }";
    assert_eq!(one_d, npy_file(1, dict, &[1, 2]));
    let b = to_npy_bytes(&Tensor::from_bool(vec![true], &[1, 1, 1]).unwrap());
    let dict = "{'descr': '|b1', 'fortran_order': False, 'shape': (1, 1, 1), }";
    assert_eq!(b, npy_file(1, dict, &[1]));
}

#[test]
fn reads_hand_built_files() {
    // C order, version 1.
    let f = npy_file(
        1,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        &f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    );
    let t = parse_npy(&f).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.get(&[1, 0]), Scalar::f32(4.0));
    assert_eq!(t.get(&[0, 2]), Scalar::f32(3.0));

    // Fortran order: the file holds columns; logical [[1, 2, 3], [4, 5, 6]].
    let f = npy_file(
        1,
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
        &f32_bytes(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]),
    );
    let t = parse_npy(&f).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    let want: Vec<Scalar> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .map(|&v| Scalar::f32(v))
        .collect();
    assert_eq!(t.to_scalars(), want);
    // Written back it is C order.
    let again = parse_npy(&to_npy_bytes(&t)).unwrap();
    assert!(again.is_contiguous());
    assert_eq!(again.to_scalars(), want);

    // Versions 2 and 3, f64, other key order and quotes.
    for major in [2u8, 3] {
        let data: Vec<u8> = [0.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let f = npy_file(
            major,
            "{\"shape\": (1, 2), \"descr\": \"<f8\", \"fortran_order\": False}",
            &data,
        );
        let t = parse_npy(&f).unwrap();
        assert_eq!(t.to_scalars(), vec![Scalar::f64(0.5), Scalar::f64(-2.0)]);
    }

    // u8 and bool descriptors numpy may write.
    for d in ["|u1", "u1", "<u1"] {
        let f = npy_file(
            1,
            &format!("{{'descr': '{d}', 'fortran_order': False, 'shape': (3,), }}"),
            &[9, 0, 255],
        );
        assert_eq!(
            parse_npy(&f).unwrap().to_scalars(),
            vec![Scalar::U8(9), Scalar::U8(0), Scalar::U8(255)]
        );
    }
    // The integer descriptors beyond u8, little-endian.
    let f = npy_file(
        1,
        "{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }",
        &[0x80, 0x7f],
    );
    assert_eq!(
        parse_npy(&f).unwrap().to_scalars(),
        vec![Scalar::I8(-128), Scalar::I8(127)]
    );
    let f = npy_file(
        1,
        "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }",
        &[0x00, 0x80, 0xfe, 0xff],
    );
    assert_eq!(
        parse_npy(&f).unwrap().to_scalars(),
        vec![Scalar::I16(i16::MIN), Scalar::I16(-2)]
    );
    let f = npy_file(
        1,
        "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
        &[0x34, 0x12],
    );
    assert_eq!(
        parse_npy(&f).unwrap().to_scalars(),
        vec![Scalar::U16(0x1234)]
    );
    let f = npy_file(
        1,
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
        &[0xff, 0xff, 0xff, 0x7f],
    );
    assert_eq!(
        parse_npy(&f).unwrap().to_scalars(),
        vec![Scalar::I32(i32::MAX)]
    );
    let f = npy_file(
        1,
        "{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }",
        &[0xff, 0xff, 0xff, 0xff],
    );
    assert_eq!(
        parse_npy(&f).unwrap().to_scalars(),
        vec![Scalar::U32(u32::MAX)]
    );
    for d in ["|b1", "b1", "?"] {
        let f = npy_file(
            1,
            &format!("{{'descr': '{d}', 'fortran_order': False, 'shape': (2,), }}"),
            &[1, 0],
        );
        assert_eq!(
            parse_npy(&f).unwrap().to_scalars(),
            vec![Scalar::Bool(true), Scalar::Bool(false)]
        );
    }
}

#[test]
fn corrupt_files_give_clear_errors() {
    let good = to_npy_bytes(&Tensor::from_f32(vec![1.0, 2.0, 3.0], &[1, 1, 3]).unwrap());
    let dict = |descr: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
    };
    type Check = fn(&NpyError) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("empty", vec![], |e| matches!(e, NpyError::Truncated(_))),
        ("short magic", b"\x93NUM".to_vec(), |e| {
            matches!(e, NpyError::Truncated(_))
        }),
        ("bad magic", b"PK\x03\x04 not numpy".to_vec(), |e| {
            matches!(e, NpyError::BadMagic)
        }),
        ("no version", b"\x93NUMPY\x01".to_vec(), |e| {
            matches!(e, NpyError::Truncated(_))
        }),
        (
            "version 9",
            {
                let mut f = good.clone();
                f[6] = 9;
                f
            },
            |e| matches!(e, NpyError::UnsupportedVersion(9, 0)),
        ),
        (
            "version 1.1",
            {
                let mut f = good.clone();
                f[7] = 1;
                f
            },
            |e| matches!(e, NpyError::UnsupportedVersion(1, 1)),
        ),
        ("no header length", b"\x93NUMPY\x01\x00\x10".to_vec(), |e| {
            matches!(e, NpyError::Truncated(_))
        }),
        ("header cut", good[..40].to_vec(), |e| {
            matches!(e, NpyError::Truncated(_))
        }),
        ("data cut", good[..good.len() - 1].to_vec(), |e| {
            matches!(e, NpyError::Truncated(_))
        }),
        (
            "trailing",
            {
                let mut f = good.clone();
                f.extend_from_slice(&[0, 0]);
                f
            },
            |e| matches!(e, NpyError::TrailingBytes(2)),
        ),
        (
            "huge header length",
            {
                let mut f = b"\x93NUMPY\x02\x00".to_vec();
                f.extend_from_slice(&u32::MAX.to_le_bytes());
                f
            },
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        ("not a dict", npy_file(1, "[1, 2, 3]", &[]), |e| {
            matches!(e, NpyError::BadHeader(_))
        }),
        (
            "missing shape",
            npy_file(1, "{'descr': '<f4', 'fortran_order': False}", &[]),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "unknown key",
            npy_file(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                &[0; 4],
            ),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "bad fortran flag",
            npy_file(
                1,
                "{'descr': '<f4', 'fortran_order': 1, 'shape': (1,)}",
                &[0; 4],
            ),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "unclosed",
            npy_file(
                1,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,",
                &[0; 4],
            ),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "negative dim",
            npy_file(1, &dict("<f4", "(-1,)"), &[]),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "overflowing shape",
            npy_file(1, &dict("<f4", "(4294967296, 4294967296, 4294967296)"), &[]),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "int64",
            npy_file(1, &dict("<i8", "(1,)"), &[0; 8]),
            |e| matches!(e, NpyError::UnsupportedDType(d) if d == "<i8"),
        ),
        (
            "big-endian f32",
            npy_file(1, &dict(">f4", "(1,)"), &[0; 4]),
            |e| matches!(e, NpyError::UnsupportedDType(d) if d == ">f4"),
        ),
        ("f16", npy_file(1, &dict("<f2", "(1,)"), &[0; 2]), |e| {
            matches!(e, NpyError::UnsupportedDType(_))
        }),
        (
            "structured",
            npy_file(
                1,
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                &[0; 4],
            ),
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
        (
            "bool byte 2",
            npy_file(1, &dict("|b1", "(3,)"), &[1, 2, 0]),
            |e| matches!(e, NpyError::BadBool { index: 1, value: 2 }),
        ),
        (
            "non-utf8 header",
            {
                let mut f = npy_file(1, &dict("<f4", "(1,)"), &[0; 4]);
                f[12] = 0xff;
                f
            },
            |e| matches!(e, NpyError::BadHeader(_)),
        ),
    ];
    for (name, bytes, check) in cases {
        match parse_npy(&bytes) {
            Err(e) => {
                assert!(check(&e), "{name}: unexpected error {e:?}");
                assert!(!e.to_string().is_empty());
            }
            Ok(t) => panic!("{name}: parsed as {:?}", t.shape()),
        }
    }
    // Every prefix of a good file is an error, never a panic.
    for n in 0..good.len() {
        assert!(parse_npy(&good[..n]).is_err(), "prefix {n}");
    }
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = temp("does_not_exist");
    match read_npy(&path) {
        Err(e @ NpyError::Io { .. }) => assert!(e.to_string().contains("does_not_exist")),
        other => panic!("{other:?}"),
    }
}
