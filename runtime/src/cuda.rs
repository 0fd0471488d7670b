//! TODO cuda
