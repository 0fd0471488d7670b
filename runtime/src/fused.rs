//! TODO fused
