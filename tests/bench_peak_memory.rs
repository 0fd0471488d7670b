//! The peak-memory probe of `kiln bench` sees a large allocation. In a file of its own so the
//! process runs this one test alone: other tests allocating and freeing in parallel threads
//! would move the process's RSS under it.

use kiln::bench::mem::{release_free_memory, reset_peak, set_malloc_thresholds, status_bytes};

#[test]
fn peak_tracks_a_large_allocation() {
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(set_malloc_thresholds(128 << 10, 128 << 10));
    }
    release_free_memory();
    if !reset_peak() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"SKIP: /proc/self/clear_refs is unavailable, peak memory cannot be reset\n",
        );
        return;
    }
    let before = status_bytes("VmRSS").unwrap();
    let v = vec![1u8; 64 << 20];
    std::hint::black_box(&v);
    drop(v);
    let peak = status_bytes("VmHWM").unwrap();
    assert!(peak >= before + (60 << 20), "peak {peak} before {before}");
}
