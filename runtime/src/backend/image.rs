//! [`CodeImage`]: a compiled kernel as plain data (machine-code bytes with a symbol table
//! and relocations, or PTX text), with a byte encoding that a later on-disk cache can store.
//!
//! Scope: the image is a faithful copy of what a backend compiled; nothing here links,
//! loads or runs it. Exactness: [`CodeImage::to_bytes`] and [`CodeImage::from_bytes`] are
//! inverse on every image (tested), so a stored image has the same bytes as the compiled
//! code. Limits: CPU images are unlinked (calls between a kernel's functions are
//! relocations) and hold process-local cell addresses where a stage calls a split-off
//! border function (see `kiln_codegen::cpu::FunctionCode`); loading them back is the AOT
//! cache's job. Decoding bad bytes gives an [`ImageError`], never a panic.

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

impl CodeImage {
    /// The image of CPU functions: their bytes laid one after another, in order, with
    /// their relocations moved to image offsets.
    pub fn from_functions(functions: &[FunctionCode]) -> CodeImage {
        let mut image = CodeImage {
            target: "cpu".into(),
            code: Vec::new(),
            symbols: Vec::with_capacity(functions.len()),
            relocs: Vec::new(),
            text: None,
        };
        for f in functions {
            let base = image.code.len() as u64;
            image.symbols.push(Symbol {
                name: f.name.clone(),
                offset: base,
                len: f.bytes.len() as u64,
            });
            image.code.extend_from_slice(&f.bytes);
            image.relocs.extend(f.relocs.iter().map(|r| Relocation {
                offset: base + u64::from(r.offset),
                kind: r.kind.clone(),
                target: r.target.clone(),
                addend: r.addend,
            }));
        }
        image
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
                    kind: "Abs8".into(),
                    target: "a".into(),
                    addend: -4,
                }],
            },
        ])
    }

    #[test]
    fn functions_are_laid_out_in_order_with_moved_relocations() {
        let im = sample();
        assert_eq!(im.code, vec![1, 2, 3, 9, 8, 7, 6, 5]);
        assert_eq!(im.function("b"), Some(&[9u8, 8, 7, 6, 5][..]));
        assert_eq!(im.relocs[0].offset, 4);
        assert_eq!(im.relocs[0].addend, -4);
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
