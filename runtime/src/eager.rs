//! TODO eager
