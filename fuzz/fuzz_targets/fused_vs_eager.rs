//! libFuzzer target: the bytes choose a generator seed (first 8 bytes, little-endian) and the
//! node budget (9th byte); the generated case runs through eager and fused, and any finding
//! panics so libFuzzer records the input. Run: `cargo +nightly fuzz run fused_vs_eager`.
#![no_main]

use std::cell::RefCell;

use kiln::fuzz::{check_seed, Harness, Verdict};
use libfuzzer_sys::fuzz_target;

thread_local! {
    // One engine for the whole fuzzing session, so its kernel cache is reused.
    static HARNESS: RefCell<Harness> = RefCell::new(Harness::new(None));
}

fuzz_target!(|data: &[u8]| {
    let mut seed = [0u8; 8];
    for (s, b) in seed.iter_mut().zip(data) {
        *s = *b;
    }
    let seed = u64::from_le_bytes(seed);
    let max_nodes = data.get(8).map_or(10, |b| 1 + (*b as usize) % 16);
    HARNESS.with(|h| {
        if let Verdict::Finding(kind, detail) = check_seed(&mut h.borrow_mut(), seed, max_nodes) {
            panic!(
                "{} on generator seed {seed:#x} (max_nodes {max_nodes}): {detail}\n\
                 the case is kiln::fuzz::generate({seed:#x}, {max_nodes})",
                kind.name()
            );
        }
    });
});
