//! The kernel cache's one error type.
//!
//! Scope: every way reading, verifying, writing or loading a cache entry can fail. Each
//! variant names what was wrong so that the one warning a rejected entry produces says why.
//! Limits: I/O errors carry the path and the operation, not a retry hint.

use std::path::PathBuf;

use thiserror::Error;

/// Why a cache operation failed or an entry was rejected.
#[derive(Debug, Error)]
pub enum CacheError {
    /// The entry is shorter than its fixed header and checksum.
    #[error("entry is {len} bytes, shorter than the smallest valid entry ({min})")]
    TooShort {
        /// Bytes present.
        len: usize,
        /// Smallest valid length.
        min: usize,
    },
    /// The first bytes are not kiln's cache magic.
    #[error("not a kiln cache entry (bad magic)")]
    BadMagic,
    /// The entry was written by a different format version.
    #[error("entry format version {found}, this kiln reads version {expected}")]
    Version {
        /// Version in the entry.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// The checksum over header and payload does not match.
    #[error("checksum mismatch: the entry is corrupt")]
    Checksum,
    /// A header field is out of range or inconsistent.
    #[error("malformed entry: {0}")]
    Malformed(String),
    /// The stored key is not the key that was asked for.
    #[error("stored key {stored} differs from the requested key {requested}")]
    KeyMismatch {
        /// Key in the entry.
        stored: String,
        /// Key recomputed by the caller.
        requested: String,
    },
    /// The entry was built for another target.
    #[error("entry targets {entry}, this host is {host}")]
    WrongTarget {
        /// Entry's target triple.
        entry: String,
        /// Host's target triple.
        host: String,
    },
    /// The host lacks CPU features the entry's code needs.
    #[error("host lacks CPU features the entry needs: {}", .0.join(", "))]
    MissingFeatures(Vec<String>),
    /// The path is a symbolic link (never followed).
    #[error("{} is a symbolic link", .0.display())]
    Symlink(PathBuf),
    /// The path is not a regular file.
    #[error("{} is not a regular file", .0.display())]
    NotRegularFile(PathBuf),
    /// The file is larger than the cache accepts.
    #[error("{} is {len} bytes, over the {limit}-byte limit", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A path exists but is not a usable cache directory.
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// No cache directory could be determined (no `KILN_CACHE_DIR`, XDG or HOME).
    #[error("no cache directory: set KILN_CACHE_DIR, XDG_CACHE_HOME or HOME")]
    NoDefaultDir,
    /// An I/O operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Executable memory could not be set up.
    #[error("executable memory: {0}")]
    ExecMem(String),
    /// The code image still needs relocations (a library call): it cannot run at another
    /// address, so it is not cached.
    #[error("the code needs {count} relocation(s) (first: {first}); not cached")]
    NeedsRelocation {
        /// How many relocations are left.
        count: usize,
        /// The first one, as `kind to target`.
        first: String,
    },
    /// The operation is not available on this platform.
    #[error("{0} is not supported on this platform")]
    Unsupported(&'static str),
}

impl CacheError {
    /// An [`CacheError::Io`] for `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CacheError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
