//! A pre-flight memory check, so that a graph too big for this machine fails with a clear
//! error before it starts, instead of aborting the process on a failed allocation halfway.

use crate::RuntimeError;

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
