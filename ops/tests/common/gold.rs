//! Golden files of the distance transforms (tests/golden/distance, scripts/gold_distance.py):
//! the case list and a small .npy reader for scipy's outputs (f64, int32, uint32).

#![allow(dead_code)]

use std::path::PathBuf;

/// The golden directory.
pub fn dir() -> PathBuf {
    // The ops crate's tests and the root crate's tests both use this file.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let here = root.join("tests/golden/distance");
    if here.is_dir() {
        here
    } else {
        root.join("../tests/golden/distance")
    }
}

/// One golden case: name, operator (`edt`, `cdt`, `bf`) and kiln parameters.
pub struct Case {
    pub name: String,
    pub op: String,
    pub params: Vec<(String, String)>,
}

/// Every case of `cases.txt`.
pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("cases.txt")).expect("cases.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().unwrap().to_string();
            let op = it.next().unwrap().to_string();
            let params = it
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("k=v");
                    (k.to_string(), v.to_string())
                })
                .collect();
            Case { name, op, params }
        })
        .collect()
}

/// A little-endian .npy array: its dtype descriptor, shape and raw bytes.
pub struct Npy {
    pub descr: String,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Reads a version 1 .npy file (C order) written by numpy.
pub fn read(name: &str) -> Npy {
    let bytes = std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{name}: not .npy");
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    assert!(
        header.contains("'fortran_order': False"),
        "{name}: fortran order"
    );
    let descr = header
        .split("'descr': '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_string();
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape = shape_text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    Npy {
        descr,
        shape,
        data: bytes[10 + hlen..].to_vec(),
    }
}

impl Npy {
    pub fn f64s(&self) -> Vec<f64> {
        assert_eq!(self.descr, "<f8");
        self.data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
    pub fn i32s(&self) -> Vec<i32> {
        assert_eq!(self.descr, "<i4");
        self.data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
    pub fn u32s(&self) -> Vec<u32> {
        assert_eq!(self.descr, "<u4");
        self.data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}
