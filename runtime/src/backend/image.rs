//! [`CodeImage`]: a compiled kernel as plain data (machine-code bytes with a symbol table
//! and relocations, or PTX text), with a byte encoding that a later on-disk cache can store.
//!
//! Scope: the image is a copy of what a backend compiled, its functions laid out in one
//! blob, each at a multiple of [`FUNCTION_ALIGN`] bytes; nothing here loads or runs it.
//! [`CodeImage::from_functions`] resolves the PC-relative relocations between functions of
//! the image (direct calls: a stage's row forwarder calling its row function, a row function
//! calling its split-off border function), which depend only on the layout, so the blob runs
//! at any address ([`CodeImage::is_relocation_free`]); any other relocation (a library call)
//! is kept in [`CodeImage::relocs`] and the AOT cache refuses such an image. Exactness:
//! [`CodeImage::to_bytes`] and [`CodeImage::from_bytes`] are inverse on every image
//! (tested); a function without relocations has exactly the emitted bytes, one with them
//! differs only in the patched displacements. Decoding bad bytes gives an [`ImageError`],
//! never a panic.

use kiln_codegen::cpu::FunctionCode;
use thiserror::Error;

/// One function of a [`CodeImage`]: where its code lies in [`CodeImage::code`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// The function's name (`stage0_rows`, PTX entry names, ...).
    pub name: String,
    /// Byte offset of its first instruction in [`CodeImage::code`].
    pub offset: u64,
    /// Length of its code in bytes.
    pub len: u64,
}

/// A place in [`CodeImage::code`] that a linker patches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// Byte offset in [`CodeImage::code`].
    pub offset: u64,
    /// The code generator's name for the relocation kind.
    pub kind: String,
    /// The symbol referred to (see `kiln_codegen::cpu::CodeReloc::target`).
    pub target: String,
    /// The addend.
    pub addend: i64,
}

/// A compiled kernel as data: what a backend's artifact is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeImage {
    /// The backend that produced it (`cpu`, `cuda`).
    pub target: String,
    /// Machine code of every function, one after another (empty for PTX).
    pub code: Vec<u8>,
    /// Where each function lies in `code`, or the PTX entry names (offset and length 0).
    pub symbols: Vec<Symbol>,
    /// Relocations, at offsets in `code`.
    pub relocs: Vec<Relocation>,
    /// The PTX module text, for the CUDA backend.
    pub text: Option<String>,
}

/// Why bytes are not a [`CodeImage`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ImageError {
    /// The bytes do not start with the image magic.
    #[error("code image: not a kiln code image (bad magic)")]
    BadMagic,
    /// The bytes end inside a field.
    #[error("code image: truncated at byte {0}")]
    Truncated(usize),
    /// A string field is not UTF-8.
    #[error("code image: string at byte {0} is not UTF-8")]
    BadString(usize),
    /// Bytes follow the last field.
    #[error("code image: {0} trailing bytes")]
    Trailing(usize),
    /// A symbol lies outside the code.
    #[error("code image: symbol {0} lies outside the code")]
    BadSymbol(String),
}

const MAGIC: &[u8; 8] = b"KILNIMG1";

/// Alignment of every function in a CPU image's code (Cranelift asks for at most 16 bytes
/// of function alignment on x86_64 and aarch64, and its constant pools for as much).
pub const FUNCTION_ALIGN: u64 = 64;

/// Patches the PC-relative relocation `kind` at `at` to reach `target` (both offsets in
/// `code`) with `addend`; false when the kind is not one resolved here or the value does
/// not fit (the relocation is then kept).
fn patch(code: &mut [u8], kind: &str, at: u64, target: u64, addend: i64) -> bool {
    let value = i128::from(target) + i128::from(addend) - i128::from(at);
    let Ok(at) = usize::try_from(at) else {
        return false;
    };
    match kind {
        // x86_64: a 32-bit displacement from the relocation's place.
        "X86CallPCRel4" | "X86PCRel4" => {
            let Ok(v) = i32::try_from(value) else {
                return false;
            };
            match code.get_mut(at..at.saturating_add(4)) {
                Some(dst) if dst.len() == 4 => {
                    dst.copy_from_slice(&v.to_le_bytes());
                    true
                }
                _ => false,
            }
        }
        // aarch64 `bl`: a 26-bit word displacement in the instruction's low bits.
        "Arm64Call" => {
            if value % 4 != 0 || !(-(1i128 << 27)..(1i128 << 27)).contains(&value) {
                return false;
            }
            match code.get_mut(at..at.saturating_add(4)) {
                Some(dst) if dst.len() == 4 => {
                    let mut insn = u32::from_le_bytes([dst[0], dst[1], dst[2], dst[3]]);
                    insn = (insn & !0x03ff_ffff) | (((value >> 2) as u32) & 0x03ff_ffff);
                    dst.copy_from_slice(&insn.to_le_bytes());
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

impl CodeImage {
    /// The image of CPU functions: their bytes laid one after another in order, each at a
    /// multiple of [`FUNCTION_ALIGN`] (zero padding), with the PC-relative relocations
    /// between them resolved and every other relocation moved to image offsets.
    pub fn from_functions(functions: &[FunctionCode]) -> CodeImage {
        let mut image = CodeImage {
            target: "cpu".into(),
            code: Vec::new(),
            symbols: Vec::with_capacity(functions.len()),
            relocs: Vec::new(),
            text: None,
        };
        for f in functions {
            let base = image.code.len().next_multiple_of(FUNCTION_ALIGN as usize);
            image.code.resize(base, 0);
            image.symbols.push(Symbol {
                name: f.name.clone(),
                offset: base as u64,
                len: f.bytes.len() as u64,
            });
            image.code.extend_from_slice(&f.bytes);
        }
        for (f, sym) in functions.iter().zip(image.symbols.clone()) {
            for r in &f.relocs {
                let at = sym.offset + u64::from(r.offset);
                let target = match r.target.strip_prefix('+') {
                    Some(off) => off.parse::<u64>().ok().map(|o| sym.offset + o),
                    None => image
                        .symbols
                        .iter()
                        .find(|s| s.name == r.target)
                        .map(|s| s.offset),
                };
                let patched =
                    target.is_some_and(|t| patch(&mut image.code, &r.kind, at, t, r.addend));
                if !patched {
                    image.relocs.push(Relocation {
                        offset: at,
                        kind: r.kind.clone(),
                        target: r.target.clone(),
                        addend: r.addend,
                    });
                }
            }
        }
        image
    }

    /// Whether the code needs no linking: every call between its functions is resolved
    /// and nothing refers outside it (always true for PTX).
    pub fn is_relocation_free(&self) -> bool {
        self.relocs.is_empty()
    }

    /// The image of a PTX module: its text and entry names.
    pub fn from_ptx(text: String, entries: &[String]) -> CodeImage {
        CodeImage {
            target: "cuda".into(),
            code: Vec::new(),
            symbols: entries
                .iter()
                .map(|n| Symbol {
                    name: n.clone(),
                    offset: 0,
                    len: 0,
                })
                .collect(),
            relocs: Vec::new(),
            text: Some(text),
        }
    }

    /// The code bytes of symbol `name`, if it has any.
    pub fn function(&self, name: &str) -> Option<&[u8]> {
        let s = self.symbols.iter().find(|s| s.name == name)?;
        let start = usize::try_from(s.offset).ok()?;
        let end = start.checked_add(usize::try_from(s.len).ok()?)?;
        self.code.get(start..end)
    }

    /// The byte encoding: magic, then every field length-prefixed, little-endian.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(self.code.len() + 64);
        w.extend_from_slice(MAGIC);
        put_bytes(&mut w, self.target.as_bytes());
        put_bytes(&mut w, &self.code);
        put_u64(&mut w, self.symbols.len() as u64);
        for s in &self.symbols {
            put_bytes(&mut w, s.name.as_bytes());
            put_u64(&mut w, s.offset);
            put_u64(&mut w, s.len);
        }
        put_u64(&mut w, self.relocs.len() as u64);
        for r in &self.relocs {
            put_u64(&mut w, r.offset);
            put_bytes(&mut w, r.kind.as_bytes());
            put_bytes(&mut w, r.target.as_bytes());
            put_u64(&mut w, r.addend as u64);
        }
        match &self.text {
            None => w.push(0),
            Some(t) => {
                w.push(1);
                put_bytes(&mut w, t.as_bytes());
            }
        }
        w
    }

    /// Decodes [`CodeImage::to_bytes`]; checks every length against the bytes and every
    /// symbol against the code.
    pub fn from_bytes(bytes: &[u8]) -> Result<CodeImage, ImageError> {
        if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
            return Err(ImageError::BadMagic);
        }
        let mut r = Reader {
            bytes,
            pos: MAGIC.len(),
        };
        let target = r.string()?;
        let code = r.bytes()?.to_vec();
        let n = r.u64()?;
        let mut symbols = Vec::new();
        for _ in 0..n {
            let s = Symbol {
                name: r.string()?,
                offset: r.u64()?,
                len: r.u64()?,
            };
            let end = s.offset.checked_add(s.len);
            if end.is_none_or(|e| e > code.len() as u64) {
                return Err(ImageError::BadSymbol(s.name));
            }
            symbols.push(s);
        }
        let n = r.u64()?;
        let mut relocs = Vec::new();
        for _ in 0..n {
            relocs.push(Relocation {
                offset: r.u64()?,
                kind: r.string()?,
                target: r.string()?,
                addend: r.u64()? as i64,
            });
        }
        let text = match r.take(1)?[0] {
            0 => None,
            _ => Some(r.string()?),
        };
        if r.pos != bytes.len() {
            return Err(ImageError::Trailing(bytes.len() - r.pos));
        }
        Ok(CodeImage {
            target,
            code,
            symbols,
            relocs,
            text,
        })
    }
}

fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(w: &mut Vec<u8>, b: &[u8]) {
    put_u64(w, b.len() as u64);
    w.extend_from_slice(b);
}

/// A cursor over encoded bytes; every read checks the length first.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(ImageError::Truncated(self.pos))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u64(&mut self) -> Result<u64, ImageError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ImageError> {
        let at = self.pos;
        let n = usize::try_from(self.u64()?).map_err(|_| ImageError::Truncated(at))?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, ImageError> {
        let at = self.pos;
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| ImageError::BadString(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_codegen::cpu::CodeReloc;

    fn sample() -> CodeImage {
        CodeImage::from_functions(&[
            FunctionCode {
                name: "a".into(),
                bytes: vec![1, 2, 3],
                relocs: vec![],
            },
            FunctionCode {
                name: "b".into(),
                bytes: vec![9, 8, 7, 6, 5],
                relocs: vec![CodeReloc {
                    offset: 1,
                    kind: "X86CallPCRel4".into(),
                    target: "a".into(),
                    addend: -4,
                }],
            },
        ])
    }

    #[test]
    fn functions_are_aligned_and_calls_between_them_resolved() {
        let im = sample();
        let b = FUNCTION_ALIGN as usize;
        assert_eq!(im.symbols[1].offset, FUNCTION_ALIGN);
        assert_eq!(&im.code[..3], &[1, 2, 3]);
        assert!(im.code[3..b].iter().all(|&x| x == 0));
        // `b` calls `a` at its byte 1: displacement a - (b + 1) + addend (-4).
        let disp = -(b as i32) - 1 - 4;
        let mut want = vec![9u8];
        want.extend_from_slice(&disp.to_le_bytes());
        assert_eq!(im.function("b"), Some(&want[..]));
        assert!(im.is_relocation_free());
        // An unknown target or kind stays a relocation, at its image offset.
        let kept = CodeImage::from_functions(&[FunctionCode {
            name: "c".into(),
            bytes: vec![0; 8],
            relocs: vec![
                CodeReloc {
                    offset: 2,
                    kind: "X86CallPCRel4".into(),
                    target: "LibCall(FloorF32)".into(),
                    addend: -4,
                },
                CodeReloc {
                    offset: 0,
                    kind: "Abs8".into(),
                    target: "c".into(),
                    addend: 0,
                },
            ],
        }]);
        assert!(!kept.is_relocation_free());
        assert_eq!(kept.relocs.len(), 2);
        assert_eq!(kept.code, vec![0; 8]);
    }

    #[test]
    fn bytes_round_trip_and_bad_bytes_are_typed_errors() {
        let mut im = sample();
        assert_eq!(CodeImage::from_bytes(&im.to_bytes()), Ok(im.clone()));
        im.text = Some("ptx text".into());
        let b = im.to_bytes();
        assert_eq!(CodeImage::from_bytes(&b), Ok(im));
        for cut in [0, 7, 9, b.len() - 1] {
            assert!(CodeImage::from_bytes(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(CodeImage::from_bytes(&long), Err(ImageError::Trailing(1)));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(CodeImage::from_bytes(&bad), Err(ImageError::BadMagic));
    }
}
