//! The output buffer's base pointer, shared by the worker threads of one run.

/// The output's base pointer, shared by threads that each write a disjoint part of it.
#[derive(Clone, Copy)]
pub(super) struct OutPtr(pub(super) *mut u8);

impl OutPtr {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    pub(super) fn get(self) -> *mut u8 {
        self.0
    }
}

// SAFETY: an `OutPtr` is only made from a buffer that outlives the parallel loop sharing it
// (owned by the frame that runs the loop), and its users only write through it, each task a
// distinct set of elements: distinct rows (stencils: the blocks partition the row range;
// scans and reductions along the last axis), or distinct column chunks of a line (along
// another axis), or distinct lines of an extern. So no two threads touch the same bytes.
unsafe impl Send for OutPtr {}
// SAFETY: see `Send`: shared access only ever writes disjoint elements.
unsafe impl Sync for OutPtr {}
