//! The PTX backend: renders the kernel form as PTX text for CUDA.
