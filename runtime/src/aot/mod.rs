//! The on-disk kernel cache (issue 25): keys, the entry format, the cache directory and
//! loading verified machine code into executable memory.
//!
//! Scope: everything of the cache that does not depend on a backend. The caller supplies the
//! kernel form, its compile options as canonical bytes and the machine code (a relocation-free
//! blob plus a symbol table); this module keys it ([`key`]), frames it ([`entry`]), stores it
//! ([`store`]) and maps it executable ([`exec_mem`]) only after every check has passed.
//!
//! Exactness: the cache never changes what runs. An entry is used only when its stored key is
//! byte-for-byte the key the caller recomputed from every input that changes the code, its
//! checksum verifies, and the host has every CPU feature it needs; anything else is a miss.
//!
//! [`kernels`] wires it to the CPU backend: `Engine::with_cache_dir` and friends load a
//! kernel's final code from a verified entry on a miss of the in-memory cache, else compile
//! it and write its entry.
//!
//! [`sign`] signs and checks whole bundles (ed25519) for caches shipped to other machines.
//!
//! Limits: executable memory is Linux only.

pub mod cpu_entries;
pub mod entry;
pub mod error;
pub mod exec_mem;
pub mod host;
pub mod kernels;
pub mod key;
pub mod ptx_entries;
pub mod sign;
pub mod store;

pub use entry::{Entry, Symbol};
pub use error::CacheError;
pub use host::HostSpec;
pub use kernels::{DiskCache, DiskCounts};
pub use key::{CacheKey, KeyInputs, PtxTarget};
pub use store::{CacheDir, Lookup, PutOutcome, Rejection};
