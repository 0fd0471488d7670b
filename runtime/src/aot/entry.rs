//! The cache entry format: a self-describing, checksummed frame around relocation-free
//! machine code.
//!
//! Layout (all integers little-endian; see docs/AOT.md for the table):
//! magic `KILNAOT\x1a` (8) · format version u32 · flags u32 (0) · key (32) ·
//! triple (u16 length + UTF-8) · features (u16 count, each u8 length + UTF-8, strictly
//! ascending) · symbols (u32 count, each u16 name length + UTF-8 + offset u64 + len u64) ·
//! payload length u64 · payload · SHA-256 (32) of every preceding byte.
//!
//! Exactness: [`Entry::decode`] checks, in order, the minimum length, the magic, the version,
//! the checksum, then parses every field with bounds checks and demands the fields end
//! exactly at the checksum; no arithmetic can overflow and no slice index can panic, whatever
//! the bytes. Decoding a valid encoding gives back the same entry.
//!
//! Limits: verifying that the key is the one asked for and that the host can run the code is
//! the caller's job ([`super::store`]); the payload is opaque bytes here.

use sha2::{Digest, Sha256};

use super::error::CacheError;
use super::key::{CacheKey, FORMAT_VERSION};

/// The eight bytes every entry starts with.
pub const MAGIC: [u8; 8] = *b"KILNAOT\x1a";

/// Length of the checksum trailer.
pub const CHECKSUM_LEN: usize = 32;

/// Fixed bytes: magic, version, flags, key, the four length/count fields, checksum.
pub const MIN_LEN: usize = 8 + 4 + 4 + 32 + 2 + 2 + 4 + 8 + CHECKSUM_LEN;

/// Most symbols an entry may list.
pub const MAX_SYMBOLS: usize = 1 << 16;

/// A named function inside the payload: the same symbol table a [`crate::backend::CodeImage`]
/// carries, so an image's symbols go into an entry unchanged.
pub use crate::backend::Symbol;

/// One cache entry: the key it answers, what it needs to run, and the code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key the entry was written for.
    pub key: CacheKey,
    /// Target triple of the code.
    pub target: String,
    /// CPU features the code needs, strictly ascending.
    pub features: Vec<String>,
    /// Functions in the payload.
    pub symbols: Vec<Symbol>,
    /// Relocation-free machine code (or PTX text).
    pub payload: Vec<u8>,
}

fn malformed(what: impl Into<String>) -> CacheError {
    CacheError::Malformed(what.into())
}

impl Entry {
    /// Checks the rules [`Entry::decode`] enforces, so that nothing undecodable is written.
    fn validate(&self) -> Result<(), CacheError> {
        if self.target.is_empty() || self.target.len() > usize::from(u16::MAX) {
            return Err(malformed("target triple empty or too long"));
        }
        if self.features.len() > usize::from(u16::MAX) {
            return Err(malformed("too many features"));
        }
        for f in &self.features {
            if f.is_empty() || f.len() > usize::from(u8::MAX) {
                return Err(malformed(format!("feature name '{f}' empty or too long")));
            }
        }
        if self.features.windows(2).any(|w| w[0] >= w[1]) {
            return Err(malformed("features not strictly ascending"));
        }
        if self.symbols.len() > MAX_SYMBOLS {
            return Err(malformed("too many symbols"));
        }
        let plen = self.payload.len() as u64;
        for (i, s) in self.symbols.iter().enumerate() {
            if s.name.is_empty() || s.name.len() > usize::from(u16::MAX) {
                return Err(malformed("symbol name empty or too long"));
            }
            match s.offset.checked_add(s.len) {
                Some(end) if end <= plen => {}
                _ => {
                    return Err(malformed(format!(
                        "symbol '{}' outside the payload",
                        s.name
                    )))
                }
            }
            if self.symbols[..i].iter().any(|o| o.name == s.name) {
                return Err(malformed(format!("symbol '{}' listed twice", s.name)));
            }
        }
        Ok(())
    }

    /// The entry's bytes, checksum included.
    pub fn encode(&self) -> Result<Vec<u8>, CacheError> {
        self.validate()?;
        let mut out = Vec::with_capacity(MIN_LEN + self.target.len() + self.payload.len() + 64);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.key.0);
        out.extend_from_slice(&(self.target.len() as u16).to_le_bytes());
        out.extend_from_slice(self.target.as_bytes());
        out.extend_from_slice(&(self.features.len() as u16).to_le_bytes());
        for f in &self.features {
            out.push(f.len() as u8);
            out.extend_from_slice(f.as_bytes());
        }
        out.extend_from_slice(&(self.symbols.len() as u32).to_le_bytes());
        for s in &self.symbols {
            out.extend_from_slice(&(s.name.len() as u16).to_le_bytes());
            out.extend_from_slice(s.name.as_bytes());
            out.extend_from_slice(&s.offset.to_le_bytes());
            out.extend_from_slice(&s.len.to_le_bytes());
        }
        out.extend_from_slice(&(self.payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.payload);
        let sum = Sha256::digest(&out);
        out.extend_from_slice(&sum);
        Ok(out)
    }

    /// Parses and verifies an entry's bytes. Never panics, whatever `bytes` holds.
    pub fn decode(bytes: &[u8]) -> Result<Entry, CacheError> {
        if bytes.len() < MIN_LEN {
            return Err(CacheError::TooShort {
                len: bytes.len(),
                min: MIN_LEN,
            });
        }
        if bytes[..8] != MAGIC {
            return Err(CacheError::BadMagic);
        }
        let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if version != FORMAT_VERSION {
            return Err(CacheError::Version {
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let (body, sum) = bytes.split_at(bytes.len() - CHECKSUM_LEN);
        if Sha256::digest(body).as_slice() != sum {
            return Err(CacheError::Checksum);
        }
        let mut r = Reader { buf: body, pos: 12 };
        if r.u32()? != 0 {
            return Err(malformed("unknown flags"));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(r.take(32)?);
        let tlen = usize::from(r.u16()?);
        let target = r.utf8(tlen, "target triple")?;
        let nfeat = usize::from(r.u16()?);
        let mut features = Vec::with_capacity(nfeat.min(256));
        for _ in 0..nfeat {
            let flen = usize::from(r.u8()?);
            features.push(r.utf8(flen, "feature name")?);
        }
        let nsym = r.u32()? as usize;
        if nsym > MAX_SYMBOLS {
            return Err(malformed("too many symbols"));
        }
        let mut symbols = Vec::with_capacity(nsym.min(1024));
        for _ in 0..nsym {
            let nlen = usize::from(r.u16()?);
            let name = r.utf8(nlen, "symbol name")?;
            let offset = r.u64()?;
            let len = r.u64()?;
            symbols.push(Symbol { name, offset, len });
        }
        let plen = r.u64()?;
        let plen = usize::try_from(plen).map_err(|_| malformed("payload length"))?;
        let payload = r.take(plen)?.to_vec();
        if r.pos != body.len() {
            return Err(malformed(format!(
                "{} stray bytes before the checksum",
                body.len() - r.pos
            )));
        }
        let e = Entry {
            key: CacheKey(key),
            target,
            features,
            symbols,
            payload,
        };
        e.validate()?;
        Ok(e)
    }
}

/// A bounds-checked cursor over the entry's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CacheError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| malformed("a field runs past the end"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, CacheError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, CacheError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, CacheError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, CacheError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn utf8(&mut self, n: usize, what: &str) -> Result<String, CacheError> {
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| malformed(format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Entry {
        Entry {
            key: CacheKey([7; 32]),
            target: "x86_64-unknown-linux-gnu".into(),
            features: vec!["avx".into(), "sse2".into()],
            symbols: vec![Symbol {
                name: "k0".into(),
                offset: 0,
                len: 3,
            }],
            payload: vec![0xb8, 0x2a, 0xc3],
        }
    }

    #[test]
    fn round_trips() {
        let e = sample();
        assert_eq!(Entry::decode(&e.encode().unwrap()).unwrap(), e);
    }

    #[test]
    fn encode_refuses_what_decode_would_reject() {
        let mut e = sample();
        e.symbols[0].len = 4;
        assert!(matches!(e.encode(), Err(CacheError::Malformed(_))));
        let mut e = sample();
        e.features = vec!["sse2".into(), "avx".into()];
        assert!(matches!(e.encode(), Err(CacheError::Malformed(_))));
    }
}
