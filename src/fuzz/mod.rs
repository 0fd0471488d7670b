//! Differential fuzzer (in progress).
