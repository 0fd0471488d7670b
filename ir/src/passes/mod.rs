//! Graph passes. Each pass is a function `Graph -> Graph` (or `Graph -> Partition` for the
//! fusion scheduler) in a file of its own.

pub mod cse;
pub mod dce;
pub mod fuse;
pub mod prune;

pub use fuse::{fuse, FusedGroup, GroupKind, Partition};
