//! TODO ops
