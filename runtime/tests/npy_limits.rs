//! Input limits of `read_npy`: only regular files are read, the header's declared data size
//! is checked against the file size before any data is read, and a file whose data would
//! not fit in available memory is refused with a typed error instead of being read.
//!
//! The memory case uses a sparse file of 1 TiB (no disk blocks are used); where the file
//! system or the OS cannot tell (no sparse files, unknown available memory) it prints a
//! visible `SKIP` line.

use std::io::Write;
use std::path::PathBuf;

use kiln_runtime::npy::{read_npy, NpyError};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kiln-npy-limits-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A v1 header declaring `shape_text` of `descr`, padded to 64 bytes.
fn header(descr: &str, shape_text: &str) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((h.len() as u16).to_le_bytes());
    out.extend(h.as_bytes());
    out
}

#[test]
fn devices_and_directories_are_not_read() {
    for p in ["/dev/zero", "/dev/null", "/"] {
        match read_npy(p) {
            Err(NpyError::NotRegularFile { path }) => assert_eq!(path, PathBuf::from(p)),
            other => panic!("{p}: {other:?}"),
        }
    }
}

#[test]
fn a_declared_size_beyond_the_file_is_truncated() {
    let d = scratch("trunc");
    let p = d.join("huge.npy");
    // 2^40 f32 elements declared, 16 bytes present: refused from the header alone.
    let mut bytes = header("<f4", "(1099511627776,)");
    bytes.extend([0u8; 16]);
    std::fs::write(&p, &bytes).unwrap();
    match read_npy(&p) {
        Err(NpyError::Truncated(msg)) => assert!(msg.contains("4398046511104"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // One byte too many is trailing data.
    let mut bytes = header("|u1", "(3,)");
    bytes.extend([1u8, 2, 3, 4]);
    std::fs::write(&p, &bytes).unwrap();
    assert!(matches!(read_npy(&p), Err(NpyError::TrailingBytes(1))));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn data_larger_than_memory_is_refused_before_reading() {
    let Some(available) = kiln_runtime::memory::available_bytes() else {
        let _ = writeln!(std::io::stderr(), "SKIP: available memory is unknown");
        return;
    };
    let d = scratch("mem");
    let p = d.join("sparse.npy");
    let n: u64 = 1 << 40;
    assert!(n > available, "this machine has over 1 TiB available");
    let h = header("|u1", &format!("({n},)"));
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(&h).unwrap();
    if f.set_len(h.len() as u64 + n).is_err() {
        let _ = writeln!(std::io::stderr(), "SKIP: no 1 TiB sparse file here");
        std::fs::remove_dir_all(&d).unwrap();
        return;
    }
    drop(f);
    match read_npy(&p) {
        Err(NpyError::TooLarge { needed, .. }) => assert!(needed >= n),
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_regular_file_still_round_trips() {
    use kiln_runtime::{Storage, Tensor};
    let d = scratch("ok");
    let p = d.join("t.npy");
    let t = Tensor::from_storage(Storage::F64(vec![1.5, -0.0, f64::INFINITY]), &[3]).unwrap();
    kiln_runtime::npy::write_npy(&p, &t).unwrap();
    let back = read_npy(&p).unwrap();
    assert!(kiln_runtime::tensor::first_difference(&t, &back).is_none());
    std::fs::remove_dir_all(&d).unwrap();
}
