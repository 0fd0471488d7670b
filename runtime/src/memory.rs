//! A pre-flight memory check, so that a graph too big for this machine fails with a clear
//! error before it starts, instead of aborting the process on a failed allocation halfway;
//! and fresh output buffers, with huge pages asked for when they are big.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::RuntimeError;

/// Fresh buffers of more than this many bytes get the huge-page advice ([`fresh_vec`]).
/// glibc maps every allocation this big on its own (its largest `mmap` threshold is 32 MiB on
/// 64-bit hosts), so the advice never touches a heap range shared with other allocations.
pub const HUGE_PAGE_ADVICE_ABOVE_BYTES: usize = 32 << 20;

/// The transparent huge page size of x86-64 and most aarch64 Linux kernels.
const HUGE_PAGE_BYTES: usize = 2 << 20;

static HUGE_PAGE_ADVICE: AtomicBool = AtomicBool::new(true);

/// Turns the huge-page advice of [`fresh_vec`] on (the default) or off for the whole process.
/// Off suits a process that must not risk the kernel compacting memory in a page fault (with
/// THP's `defrag` setting at `madvise`, the first touch of an advised range may wait for
/// that), at the cost of 4 KiB page faults on big fresh outputs.
pub fn set_huge_page_advice(on: bool) {
    HUGE_PAGE_ADVICE.store(on, Ordering::Relaxed);
}

/// Whether [`fresh_vec`] advises big buffers for huge pages (see [`set_huge_page_advice`]).
pub fn huge_page_advice() -> bool {
    HUGE_PAGE_ADVICE.load(Ordering::Relaxed)
}

/// An empty vector with room for `len` elements, uninitialised, for an output that is about
/// to be written in full. Above [`HUGE_PAGE_ADVICE_ABOVE_BYTES`] its 2 MiB-aligned part is
/// advised for transparent huge pages ([`advise_huge_pages`]; unless
/// [`set_huge_page_advice`] turned that off): a fresh 400 MB output then faults in 2 MiB at
/// a time instead of 4 KiB, about 500 times fewer page faults.
pub fn fresh_vec<T>(len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    if len.saturating_mul(std::mem::size_of::<T>()) > HUGE_PAGE_ADVICE_ABOVE_BYTES
        && huge_page_advice()
    {
        advise_huge_pages(v.spare_capacity_mut());
    }
    v
}

/// Asks Linux to back the 2 MiB-aligned part of `buf` with transparent huge pages
/// (`madvise(MADV_HUGEPAGE)`; honoured when `/sys/kernel/mm/transparent_hugepage/enabled`
/// is `madvise` or `always`). Advice only: contents and validity of the memory do not
/// change. Returns whether the advice was taken (false elsewhere, on a buffer with no
/// aligned 2 MiB inside, or when the kernel refuses it).
pub fn advise_huge_pages<T>(buf: &mut [MaybeUninit<T>]) -> bool {
    let start = buf.as_mut_ptr() as usize;
    let end = start + std::mem::size_of_val(buf);
    let lo = start.next_multiple_of(HUGE_PAGE_BYTES);
    let hi = end - end % HUGE_PAGE_BYTES;
    if hi <= lo {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `[lo, hi)` lies inside `buf`, memory this process owns and has mapped
        // (`lo >= start`, `hi <= end`, both page aligned); `MADV_HUGEPAGE` only marks the
        // range as eligible for huge pages (the kernel may split the mapping's bookkeeping
        // at `lo` and `hi`) and never changes the memory's contents or where it is mapped;
        // `madvise` reads no memory through the pointer. A failure is reported, not acted on.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Bytes the OS reports as available for new allocations (`MemAvailable` plus `SwapFree`
/// from `/proc/meminfo`), or `None` where that is unknown (not Linux).
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let kb: u64 = line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some(field("MemAvailable:")? + field("SwapFree:").unwrap_or(0))
}

/// Below this many bytes the check is skipped: reading `/proc/meminfo` costs tens of
/// microseconds, which small kernels must not pay.
pub const CHECK_ABOVE_BYTES: u64 = 256 << 20;

/// Fails with [`RuntimeError::OutOfMemory`] when `needed` bytes exceed what the OS reports as
/// available. Passes when the amount is unknown or below [`CHECK_ABOVE_BYTES`].
pub fn ensure_fits(needed: u64, what: &str) -> Result<(), RuntimeError> {
    if needed < CHECK_ABOVE_BYTES {
        return Ok(());
    }
    match available_bytes() {
        Some(available) if needed > available => Err(RuntimeError::OutOfMemory {
            what: what.to_string(),
            needed,
            available,
        }),
        _ => Ok(()),
    }
}

/// The device-memory preflight of the CUDA path: `needed` bytes about to be allocated on a
/// device reporting `free` bytes free. Unlike [`ensure_fits`] there is no lower threshold
/// (device memory is queried exactly, cheaply, and a failed allocation there leaves a
/// half-queued run), so any request above the free memory is refused before allocating.
pub fn ensure_fits_on_device(needed: u64, free: u64, what: &str) -> Result<(), RuntimeError> {
    if needed > free {
        return Err(RuntimeError::OutOfMemory {
            what: format!("{what} (device memory)"),
            needed,
            available: free,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_request_above_the_free_memory_is_refused_before_allocating() {
        assert!(ensure_fits_on_device(100, 100, "launch").is_ok());
        match ensure_fits_on_device(101, 100, "launch") {
            Err(RuntimeError::OutOfMemory {
                what,
                needed,
                available,
            }) => {
                assert_eq!((needed, available), (101, 100));
                assert!(what.contains("device memory"), "{what}");
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
    }

    /// Held by the tests that depend on the process-wide advice switch.
    static SWITCH: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The `VmFlags` line of the mapping of `/proc/self/smaps` that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = lo <= addr && addr < hi;
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.to_string());
                }
            }
        }
        None
    }

    /// Whether the mapping that holds `addr` carries the huge-page advice (`hg` in its
    /// `VmFlags`), with the flags for messages.
    #[cfg(target_os = "linux")]
    fn advised_at(addr: usize) -> (bool, String) {
        let flags = vm_flags(addr).expect("the buffer is mapped");
        (flags.split_whitespace().any(|f| f == "hg"), flags)
    }

    /// Whether this kernel has transparent huge pages (then it takes the advice).
    #[cfg(target_os = "linux")]
    fn kernel_has_thp() -> bool {
        std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
    }

    /// With the advice switched off, a big fresh buffer's mapping is not advised.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_advice_can_be_switched_off() {
        let _switch = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let len = HUGE_PAGE_ADVICE_ABOVE_BYTES + 3 * HUGE_PAGE_BYTES;
        let advised = |v: &Vec<u8>| advised_at(v.as_ptr() as usize + len / 2);
        set_huge_page_advice(false);
        let off: Vec<u8> = fresh_vec(len);
        set_huge_page_advice(true);
        let on: Vec<u8> = fresh_vec(len);
        let (off_advised, flags) = advised(&off);
        assert!(!off_advised, "VmFlags: {flags}");
        if kernel_has_thp() {
            let (on_advised, flags) = advised(&on);
            assert!(on_advised, "VmFlags: {flags}");
        }
    }

    #[test]
    fn small_buffers_get_no_advice() {
        let mut v: Vec<u8> = fresh_vec(1 << 20);
        assert!(v.capacity() >= 1 << 20);
        // Less than one aligned huge page inside: nothing to advise.
        assert!(!advise_huge_pages(&mut v.spare_capacity_mut()[..4096]));
    }

    /// A big fresh buffer's mapping carries the huge-page advice (`hg` in its `VmFlags`),
    /// and the buffer holds what is written to it, end to end.
    #[cfg(target_os = "linux")]
    #[test]
    fn big_fresh_buffers_are_advised_for_huge_pages() {
        let _switch = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let len = HUGE_PAGE_ADVICE_ABOVE_BYTES / 4 + 3 * HUGE_PAGE_BYTES;
        let mut v: Vec<u32> = fresh_vec(len);
        let (advised, flags) = advised_at(v.as_ptr() as usize + len * 2);
        // Kernels built without transparent huge pages refuse the advice; then so must we.
        let again = advise_huge_pages(v.spare_capacity_mut());
        assert_eq!(advised, again, "VmFlags: {flags}");
        if kernel_has_thp() {
            assert!(advised, "VmFlags: {flags}");
        }
        v.extend((0..len as u32).map(|i| i.wrapping_mul(2654435761)));
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u32).wrapping_mul(2654435761)));
    }
}
