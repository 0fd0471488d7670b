//! kiln-ops: image-processing operators written in the kiln IR.

pub mod network;
