//! Peak resident memory from `/proc/self/status` (Linux). Elsewhere every call reports
//! "unknown" and the benchmark leaves the peak-memory column empty.

/// Returns freed heap memory to the operating system (glibc `malloc_trim(0)`), so that a
/// following peak measurement is not hidden by pages the allocator kept from earlier runs
/// (glibc raises its mmap threshold after large frees and then serves large blocks from the
/// heap, which stays resident). A no-op outside Linux/glibc.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: `malloc_trim` is glibc's documented, thread-safe function taking a byte
        // count and touching only the allocator's own free lists; no Rust memory is aliased.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// glibc's `mallopt` parameter numbers.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_TRIM_THRESHOLD: std::ffi::c_int = -1;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_MMAP_THRESHOLD: std::ffi::c_int = -3;

/// Calls glibc's `mallopt(param, value)`; false when it fails or outside Linux/glibc.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn mallopt_bytes(param: std::ffi::c_int, bytes: usize) -> bool {
    extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    let v = std::ffi::c_int::try_from(bytes).unwrap_or(std::ffi::c_int::MAX);
    // SAFETY: `mallopt` is glibc's documented allocator tuning call; it takes two ints,
    // changes only allocator parameters under the allocator's own lock, and returns 1 on
    // success.
    unsafe { mallopt(param, v) == 1 }
}

/// Blocks of at least `mmap_bytes` are mapped fresh from the OS and unmapped when freed, and
/// free memory above `trim_bytes` at the top of the heap is returned to the OS (glibc
/// `mallopt(M_MMAP_THRESHOLD)` and `mallopt(M_TRIM_THRESHOLD)`; this also stops glibc
/// adjusting them by itself). Small values make every large allocation show in the peak
/// resident size; large ones (32 MiB / 64 MiB) let freed blocks be reused without new page
/// faults, which is where glibc's own adaptive thresholds settle in any steady loop (the
/// Python peers' included). Returns whether both were applied (false outside Linux/glibc).
pub fn set_malloc_thresholds(mmap_bytes: usize, trim_bytes: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        mallopt_bytes(M_MMAP_THRESHOLD, mmap_bytes) & mallopt_bytes(M_TRIM_THRESHOLD, trim_bytes)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (mmap_bytes, trim_bytes);
        false
    }
}

/// Resets the process's peak resident size (`VmHWM`) to the current resident size by writing
/// `5` to `/proc/self/clear_refs` (Linux ≥ 4.0). Returns whether the reset succeeded.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `kB` field of `/proc/self/status` (e.g. `VmRSS`, `VmHWM`) in bytes.
pub fn status_bytes(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_status(&text, key)
}

/// Finds `key:   123 kB` in the text of `/proc/self/status` and returns bytes.
fn parse_status(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kb * 1024)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_fields() {
        let text = "Name:\tkiln\nVmHWM:\t   2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_status(text, "VmHWM"), Some(2048 * 1024));
        assert_eq!(parse_status(text, "VmRSS"), Some(1024 * 1024));
        assert_eq!(parse_status(text, "VmSwap"), None);
        assert_eq!(parse_status(text, "Name"), None);
    }
}
