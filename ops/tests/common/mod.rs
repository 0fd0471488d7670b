//! Helpers shared by the ops tests.

pub mod gold;
pub mod manifest;
