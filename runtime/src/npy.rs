//! TODO npy
