//! Peak resident memory from `/proc/self/status` (Linux). Elsewhere every call reports
//! "unknown" and the benchmark leaves the peak-memory column empty.

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

    #[test]
    fn peak_tracks_a_large_allocation() {
        if !reset_peak() {
            return; // not Linux, or clear_refs unavailable: nothing to measure
        }
        let before = status_bytes("VmRSS").unwrap();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        drop(v);
        let peak = status_bytes("VmHWM").unwrap();
        assert!(peak >= before + (60 << 20), "peak {peak} before {before}");
    }
}
