//! Runs on the calling thread.
//!
//! Handing a run to rayon threads costs a wake-up and a context switch per parallel loop
//! (about 20–45 µs per call on the 2-core VM the benchmarks use: `kiln bench --sizes 8`
//! spent most of its time in the scheduler). A run that is small, or whose engine has one
//! thread anyway, runs inside [`run`]: every parallel loop of the fused runtime then runs
//! sequentially on the calling thread. Results do not depend on it (each loop writes
//! disjoint parts of its output, in any order).

use std::cell::Cell;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is inside [`run`]: parallel loops run sequentially.
pub(crate) fn active() -> bool {
    ACTIVE.with(|a| a.get())
}

/// `task(i)` for every `i` in `0..n`: on rayon threads, or in order on this thread inside
/// [`run`].
pub(crate) fn for_each_index(n: usize, task: impl Fn(usize) + Send + Sync) {
    use rayon::prelude::*;
    if active() {
        (0..n).for_each(task);
    } else {
        (0..n).into_par_iter().for_each(task);
    }
}

/// Runs `f` with every parallel loop of the fused runtime sequential on this thread.
pub(crate) fn run<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the previous state, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let _restore = Restore(ACTIVE.with(|a| a.replace(true)));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_panicking_runs_restore_the_flag() {
        assert!(!active());
        run(|| {
            assert!(active());
            run(|| assert!(active()));
            assert!(active());
        });
        assert!(!active());
        let r = std::panic::catch_unwind(|| run(|| panic!("inside")));
        assert!(r.is_err());
        assert!(!active());
    }
}
