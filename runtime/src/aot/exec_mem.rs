//! Verified machine code made executable: copied into fresh anonymous memory, then sealed
//! read+execute.
//!
//! Scope: [`ExecMem::load`] maps fresh private anonymous pages read+write, copies the code,
//! switches the pages to read+execute (never writable and executable at once), and on
//! aarch64 flushes the instruction cache. A cache file is never mapped, never `dlopen`ed:
//! only bytes that already passed every check in private memory are copied here.
//!
//! Exactness: the bytes executed are exactly the verified payload; the mapping is private to
//! the process and released on drop.
//!
//! Limits: Linux only (other platforms get [`CacheError::Unsupported`]); the code must be
//! position-independent and relocation-free, which the entry's producer guarantees.

use super::entry::Symbol;
use super::error::CacheError;

/// A read+execute copy of a code blob, unmapped on drop.
#[derive(Debug)]
pub struct ExecMem {
    ptr: *mut u8,
    map_len: usize,
    code_len: usize,
}

// SAFETY: the mapping is owned by this value alone, read+execute and never written after
// `load` returns, so sharing or moving it between threads cannot race.
unsafe impl Send for ExecMem {}
// SAFETY: as above: the memory is immutable once sealed.
unsafe impl Sync for ExecMem {}

impl ExecMem {
    /// Copies `code` into fresh memory and makes it read+execute.
    #[cfg(target_os = "linux")]
    pub fn load(code: &[u8]) -> Result<ExecMem, CacheError> {
        if code.is_empty() {
            return Err(CacheError::ExecMem("empty code".into()));
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let map_len = code
            .len()
            .checked_add(page - 1)
            .map(|n| n & !(page - 1))
            .ok_or_else(|| CacheError::ExecMem("code too large".into()))?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel chooses; no
        // existing memory is affected. The result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(CacheError::ExecMem(format!(
                "mmap: {}",
                std::io::Error::last_os_error()
            )));
        }
        let mem = ExecMem {
            ptr: p.cast::<u8>(),
            map_len,
            code_len: code.len(),
        };
        // SAFETY: `mem.ptr` points to `map_len >= code.len()` writable bytes that nothing
        // else references, and `code` cannot overlap a mapping created just now.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), mem.ptr, code.len()) };
        // SAFETY: changes the protection of exactly the mapping created above.
        let rc = unsafe { libc::mprotect(p, map_len, libc::PROT_READ | libc::PROT_EXEC) };
        if rc != 0 {
            // `mem` drops here and unmaps the pages.
            return Err(CacheError::ExecMem(format!(
                "mprotect: {}",
                std::io::Error::last_os_error()
            )));
        }
        flush_icache(mem.ptr, code.len())?;
        Ok(mem)
    }

    /// Executable memory is Linux only for now.
    #[cfg(not(target_os = "linux"))]
    pub fn load(_code: &[u8]) -> Result<ExecMem, CacheError> {
        Err(CacheError::Unsupported("loading cached machine code"))
    }

    /// Start of the code.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Length of the code (not of the mapping).
    pub fn len(&self) -> usize {
        self.code_len
    }

    /// Always false: [`ExecMem::load`] refuses empty code.
    pub fn is_empty(&self) -> bool {
        self.code_len == 0
    }

    /// Address of `sym` in this code, or `None` when it lies outside it.
    pub fn symbol_ptr(&self, sym: &Symbol) -> Option<*const u8> {
        let end = sym.offset.checked_add(sym.len)?;
        if end > self.code_len as u64 || sym.len == 0 {
            return None;
        }
        // SAFETY: `offset < code_len`, so the result stays inside the mapping.
        Some(unsafe { self.ptr.add(sym.offset as usize) })
    }
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn flush_icache(ptr: *const u8, len: usize) -> Result<(), CacheError> {
    use wasmtime_internal_jit_icache_coherence as icc;
    // SAFETY: `ptr..ptr+len` is the mapping just written and still owned by the caller.
    unsafe { icc::clear_cache(ptr.cast(), len) }
        .map_err(|e| CacheError::ExecMem(format!("icache flush: {e}")))?;
    icc::pipeline_flush_mt().map_err(|e| CacheError::ExecMem(format!("pipeline flush: {e}")))
}

#[cfg(all(target_os = "linux", not(target_arch = "aarch64")))]
fn flush_icache(_ptr: *const u8, _len: usize) -> Result<(), CacheError> {
    // x86_64 keeps instruction and data caches coherent.
    Ok(())
}

impl Drop for ExecMem {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: `ptr`/`map_len` are exactly the mapping `load` created; no reference into
        // it outlives `self` (callers hold raw function pointers at their own risk, as with
        // any JIT memory).
        unsafe {
            libc::munmap(self.ptr.cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_code_is_refused() {
        assert!(ExecMem::load(&[]).is_err());
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn runs_mov_eax_42_ret() {
        // mov eax, 42 ; ret
        let code = [0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3];
        let mem = ExecMem::load(&code).unwrap();
        let sym = Symbol {
            name: "f".into(),
            offset: 0,
            len: 6,
        };
        let p = mem.symbol_ptr(&sym).unwrap();
        // SAFETY: `p` points at the six bytes above, a complete function with the C ABI
        // `extern "C" fn() -> i32`, in read+execute memory kept alive by `mem`.
        let f: extern "C" fn() -> i32 = unsafe { std::mem::transmute(p) };
        assert_eq!(f(), 42);
        let outside = Symbol {
            name: "g".into(),
            offset: 4,
            len: 3,
        };
        assert!(mem.symbol_ptr(&outside).is_none());
    }
}
