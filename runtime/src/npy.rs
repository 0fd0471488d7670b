//! Reading and writing NumPy `.npy` files (format versions 1, 2 and 3) for f32, f64, u8 and
//! bool tensors, little-endian. Written files are C order; Fortran-order files are read as a
//! strided view. Every malformed file gives an [`NpyError`], never a panic.
//!
//! Untrusted input: [`read_npy`] reads regular files only (devices, pipes and directories
//! get [`NpyError::NotRegularFile`]), reads the header first and checks the size it declares
//! against the file's size before reading any data, and refuses a file whose data would not
//! fit in the memory the OS reports as available ([`NpyError::TooLarge`]). Writes are atomic
//! ([`crate::atomic_file::write_atomic`]): a failed write leaves the old file as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kiln_ir::DType;
use thiserror::Error;

use crate::{RuntimeError, Storage, Tensor};

/// The 6 bytes every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Largest header accepted on read (numpy itself refuses more than 10 000 bytes by default).
const MAX_HEADER: usize = 1 << 20;

/// Why a `.npy` file could not be read or written.
#[derive(Debug, Error)]
pub enum NpyError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file does not start with the `.npy` magic string.
    #[error("not a .npy file (bad magic bytes)")]
    BadMagic,
    /// A format version other than 1.0, 2.0 or 3.0.
    #[error("unsupported .npy format version {0}.{1}")]
    UnsupportedVersion(u8, u8),
    /// The file ends before the header or the data does.
    #[error("truncated .npy file: {0}")]
    Truncated(String),
    /// The header dictionary is malformed.
    #[error("bad .npy header: {0}")]
    BadHeader(String),
    /// The dtype descriptor is not one kiln supports (`<f4`, `<f8`, `|u1`, `|b1`).
    #[error("unsupported .npy dtype {0:?} (kiln reads '<f4', '<f8', '|u1', '|b1')")]
    UnsupportedDType(String),
    /// Bytes after the data.
    #[error("{0} unexpected bytes after the .npy data")]
    TrailingBytes(usize),
    /// A bool element that is neither 0 nor 1.
    #[error("bool element {index} holds byte {value}, not 0 or 1")]
    BadBool {
        /// Flat index in file order.
        index: usize,
        /// The byte found.
        value: u8,
    },
    /// The path is a device, pipe, socket or directory: only regular files are read.
    #[error("{path}: not a regular file (kiln reads .npy input from regular files only)")]
    NotRegularFile {
        /// The path.
        path: PathBuf,
    },
    /// Reading the file would need more memory than the OS reports as available.
    #[error("{path}: reading it needs {needed} bytes of memory, only {available} are available")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Bytes the read would allocate.
        needed: u64,
        /// Bytes the OS reported as available.
        available: u64,
    },
    /// The shape cannot be made into a tensor.
    #[error(transparent)]
    Tensor(#[from] RuntimeError),
}

/// Reads a `.npy` file into a tensor (see [`parse_npy`]). Only regular files are read; the
/// header is parsed first and the data size it declares must match the file's size, and the
/// data must fit in available memory, before any data is read.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor, NpyError> {
    use std::io::Read;
    let path = path.as_ref();
    let io = |source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_regular = || NpyError::NotRegularFile {
        path: path.to_path_buf(),
    };
    // Checked before opening (opening a FIFO blocks until a writer appears) and again on
    // the open handle (the path may have been replaced in between).
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let file_len = meta.len();
    // The prelude (magic, version, header) is at most 12 + MAX_HEADER bytes.
    let mut bytes = Vec::new();
    let prelude_cap = file_len.min((12 + MAX_HEADER) as u64);
    (&file)
        .take(prelude_cap)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let prelude = parse_prelude(&bytes)?;
    check_data_len(&prelude, file_len.saturating_sub(prelude.data_start as u64))?;
    // The file bytes and the decoded storage are both alive while decoding.
    let needed = file_len.saturating_add(prelude.size as u64);
    if needed >= crate::memory::CHECK_ABOVE_BYTES {
        if let Some(available) = crate::memory::available_bytes() {
            if needed > available {
                return Err(NpyError::TooLarge {
                    path: path.to_path_buf(),
                    needed,
                    available,
                });
            }
        }
    }
    // Read at most one byte more than the size checked above: a file that grows meanwhile
    // gives `TrailingBytes`, never an unbounded read.
    let rest = file_len - bytes.len() as u64 + 1;
    bytes
        .try_reserve_exact(rest as usize)
        .map_err(|_| NpyError::TooLarge {
            path: path.to_path_buf(),
            needed,
            available: crate::memory::available_bytes().unwrap_or(0),
        })?;
    (&file).take(rest).read_to_end(&mut bytes).map_err(io)?;
    parse_npy(&bytes)
}

/// Writes a tensor (any strides) to a `.npy` file in C order, atomically: on failure the
/// file at `path` is unchanged.
pub fn write_npy(path: impl AsRef<Path>, t: &Tensor) -> Result<(), NpyError> {
    let path = path.as_ref();
    crate::atomic_file::write_atomic(path, &to_npy_bytes(t)).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The descriptor numpy writes for a dtype.
fn descr(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::I8 => "|i1",
        DType::U16 => "<u2",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
    }
}

/// The bytes of a `.npy` file holding `t` in C order (format 1.0, or 2.0 when the header
/// needs more than 65535 bytes).
pub fn to_npy_bytes(t: &Tensor) -> Vec<u8> {
    let shape = match t.shape() {
        [] => "()".to_string(),
        [d] => format!("({d},)"),
        s => format!(
            "({})",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(t.dtype())
    );
    // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary.
    let (version, len_bytes) = if header.len() + 1 + 10 <= 65535 {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let pre = MAGIC.len() + 2 + len_bytes;
    let total = (pre + header.len() + 1).div_ceil(64) * 64;
    header.push_str(&" ".repeat(total - pre - header.len() - 1));
    header.push('\n');
    let mut out = Vec::with_capacity(total + t.numel() * t.dtype().size_bytes());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    match t.contiguous_storage() {
        Storage::F32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Storage::F64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Storage::U8(v) => out.extend_from_slice(&v),
        Storage::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b != 0))),
        Storage::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
        Storage::U16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Storage::I16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Storage::I32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Storage::U32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
    out
}

/// What the bytes before a `.npy` file's data declare.
struct Prelude {
    dtype: DType,
    shape: Vec<usize>,
    fortran_order: bool,
    numel: usize,
    /// Offset of the first data byte.
    data_start: usize,
    /// Data bytes the header declares.
    size: usize,
}

/// Parses the magic string, version and header at the start of `bytes` (which may end
/// anywhere after the header).
fn parse_prelude(bytes: &[u8]) -> Result<Prelude, NpyError> {
    if bytes.len() < MAGIC.len() {
        return Err(if MAGIC.starts_with(bytes) {
            NpyError::Truncated("file ends inside the magic string".into())
        } else {
            NpyError::BadMagic
        });
    }
    if &bytes[..6] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let need = |n: usize, what: &str| -> Result<(), NpyError> {
        if bytes.len() < n {
            Err(NpyError::Truncated(format!(
                "{what} needs {n} bytes, the file has {}",
                bytes.len()
            )))
        } else {
            Ok(())
        }
    };
    need(8, "the version")?;
    let (major, minor) = (bytes[6], bytes[7]);
    let (len_bytes, header_start) = match (major, minor) {
        (1, 0) => (2, 10),
        (2, 0) | (3, 0) => (4, 12),
        _ => return Err(NpyError::UnsupportedVersion(major, minor)),
    };
    need(header_start, "the header length")?;
    let header_len = if len_bytes == 2 {
        u16::from_le_bytes([bytes[8], bytes[9]]) as usize
    } else {
        u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
    };
    if header_len > MAX_HEADER {
        return Err(NpyError::BadHeader(format!(
            "header of {header_len} bytes (at most {MAX_HEADER})"
        )));
    }
    let data_start = header_start + header_len;
    need(data_start, "the header")?;
    let text = std::str::from_utf8(&bytes[header_start..data_start])
        .map_err(|_| NpyError::BadHeader("header is not UTF-8 text".into()))?;
    if major == 1 && !text.is_ascii() {
        return Err(NpyError::BadHeader("version 1 header is not ASCII".into()));
    }
    let header = Header::parse(text)?;
    let dtype = match header.descr.as_str() {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "|u1" | "u1" | "<u1" => DType::U8,
        "|b1" | "b1" | "?" => DType::Bool,
        "|i1" | "i1" | "<i1" => DType::I8,
        "<u2" => DType::U16,
        "<i2" => DType::I16,
        "<i4" => DType::I32,
        "<u4" => DType::U32,
        other => return Err(NpyError::UnsupportedDType(other.to_string())),
    };
    let numel = header
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| NpyError::BadHeader(format!("shape {:?} overflows", header.shape)))?;
    let size = numel
        .checked_mul(dtype.size_bytes())
        .ok_or_else(|| NpyError::BadHeader(format!("shape {:?} overflows", header.shape)))?;
    Ok(Prelude {
        dtype,
        shape: header.shape,
        fortran_order: header.fortran_order,
        numel,
        data_start,
        size,
    })
}

/// Checks that `have` data bytes are exactly what the header declares.
fn check_data_len(p: &Prelude, have: u64) -> Result<(), NpyError> {
    let size = p.size as u64;
    if have < size {
        return Err(NpyError::Truncated(format!(
            "shape {:?} of {} needs {size} data bytes, the file has {have}",
            p.shape, p.dtype
        )));
    }
    if have > size {
        return Err(NpyError::TrailingBytes(
            usize::try_from(have - size).unwrap_or(usize::MAX),
        ));
    }
    Ok(())
}

/// Parses the bytes of a `.npy` file. Accepts versions 1.0, 2.0 and 3.0, the dtypes `<f4`,
/// `<f8`, `|u1` (or `u1`, `<u1`), `|b1` (or `b1`, `?`), `|i1` (or `i1`, `<i1`), `<u2`,
/// `<i2`, `<i4` and `<u4` (little-endian only), C or Fortran order (Fortran gives
/// a column-major strided view). The data must fill the rest of the file exactly.
pub fn parse_npy(bytes: &[u8]) -> Result<Tensor, NpyError> {
    let p = parse_prelude(bytes)?;
    let data = &bytes[p.data_start..];
    check_data_len(&p, data.len() as u64)?;
    let (dtype, numel) = (p.dtype, p.numel);
    let storage = match dtype {
        DType::F32 => Storage::F32(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::F64 => Storage::F64(
            data.chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        DType::U8 => Storage::U8(data.to_vec()),
        DType::Bool => {
            if let Some((index, &value)) = data.iter().enumerate().find(|(_, &b)| b > 1) {
                return Err(NpyError::BadBool { index, value });
            }
            Storage::Bool(data.to_vec())
        }
        DType::I8 => Storage::I8(data.iter().map(|&b| b as i8).collect()),
        DType::U16 => Storage::U16(
            data.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        DType::I16 => Storage::I16(
            data.chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        DType::I32 => Storage::I32(
            data.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::U32 => Storage::U32(
            data.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
    };
    let shape = &p.shape;
    if !p.fortran_order || numel == 0 {
        return Ok(Tensor::from_storage(storage, shape)?);
    }
    // Fortran order: the first axis varies fastest.
    let mut strides = vec![1usize; shape.len()];
    for i in 1..shape.len() {
        strides[i] = strides[i - 1] * shape[i - 1];
    }
    Ok(Tensor::from_parts(Arc::new(storage), shape, &strides, 0)?)
}

/// The three keys of a `.npy` header.
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    /// Parses the Python dict literal numpy writes, e.g.
    /// `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }` followed by padding.
    fn parse(text: &str) -> Result<Header, NpyError> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let (mut descr, mut fortran, mut shape) = (None, None, None);
        p.expect(b'{')?;
        loop {
            p.ws();
            if p.eat(b'}') {
                break;
            }
            let key = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            match key.as_str() {
                "descr" => descr = Some(p.string()?),
                "fortran_order" => fortran = Some(p.boolean()?),
                "shape" => shape = Some(p.tuple()?),
                other => return Err(bad(format!("unknown key {other:?}"))),
            }
            p.ws();
            if p.eat(b',') {
                continue;
            }
            p.ws();
            p.expect(b'}')?;
            break;
        }
        if p.s[p.i..].iter().any(|c| !c.is_ascii_whitespace()) {
            return Err(bad("text after the header dictionary".into()));
        }
        Ok(Header {
            descr: descr.ok_or_else(|| bad("missing 'descr'".into()))?,
            fortran_order: fortran.ok_or_else(|| bad("missing 'fortran_order'".into()))?,
            shape: shape.ok_or_else(|| bad("missing 'shape'".into()))?,
        })
    }
}

/// A header error.
fn bad(msg: String) -> NpyError {
    NpyError::BadHeader(msg)
}

/// A cursor over header text.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), NpyError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(bad(format!("expected '{}' at byte {}", c as char, self.i)))
        }
    }

    /// A quoted string without escapes (`'...'` or `"..."`).
    fn string(&mut self) -> Result<String, NpyError> {
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(bad(format!("expected a string at byte {}", self.i))),
        };
        self.i += 1;
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i] != q {
            self.i += 1;
        }
        if self.i >= self.s.len() {
            return Err(bad("unterminated string".into()));
        }
        let v = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        self.i += 1;
        Ok(v)
    }

    fn boolean(&mut self) -> Result<bool, NpyError> {
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(true)
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(false)
        } else {
            Err(bad(format!("expected True or False at byte {}", self.i)))
        }
    }

    /// A tuple of non-negative integers: `()`, `(3,)`, `(3, 4)`, `(3, 4,)`.
    fn tuple(&mut self) -> Result<Vec<usize>, NpyError> {
        self.expect(b'(')?;
        let mut v = Vec::new();
        let mut comma_after_last = false;
        loop {
            self.ws();
            if self.eat(b')') {
                break;
            }
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
                self.i += 1;
            }
            if start == self.i {
                return Err(bad(format!("expected a dimension at byte {start}")));
            }
            let digits = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
            let d = digits
                .parse::<usize>()
                .map_err(|_| bad(format!("dimension {digits} is too large")))?;
            v.push(d);
            self.ws();
            comma_after_last = self.eat(b',');
            if !comma_after_last {
                self.ws();
                self.expect(b')')?;
                break;
            }
        }
        if v.len() == 1 && !comma_after_last {
            // `(3)` is an int in Python, not a tuple.
            return Err(bad("a one-dimensional shape needs a trailing comma".into()));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parses_numpy_forms() {
        let h = Header::parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }   \n")
            .unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("<f4", false, vec![3, 4])
        );
        let h = Header::parse("{\"shape\":(7,),\"fortran_order\":True,\"descr\":\"|b1\"}").unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape),
            ("|b1", true, vec![7])
        );
        let h = Header::parse("{'descr': '|u1', 'fortran_order': False, 'shape': (), }").unwrap();
        assert!(h.shape.is_empty());
        assert!(Header::parse("{'descr': '<f4', 'fortran_order': False, 'shape': (7), }").is_err());
        assert!(Header::parse("{'descr': '<f4', 'fortran_order': 0, 'shape': (7,), }").is_err());
        assert!(Header::parse("{'descr': '<f4', 'shape': (7,), }").is_err());
        assert!(
            Header::parse("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }").is_err()
        );
        assert!(Header::parse(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }"
        )
        .is_err());
        assert!(
            Header::parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x").is_err()
        );
        assert!(Header::parse("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)").is_err());
    }
}
