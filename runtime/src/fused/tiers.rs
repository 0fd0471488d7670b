//! Tiered compilation: a kernel is compiled first with the default code budget (fast to
//! compile), and, when that budget made some stage take smaller vector-loop steps than it
//! could, compiled again with a bigger budget on a background thread. Runs use the second
//! compile as soon as it is ready. Both compiles give the same bits (only the step size of
//! the shared vector loop differs), so which one a run uses changes its speed only.
//!
//! A run picks its kernel once, at the start, and holds its `Arc`: a compile that lands
//! mid-run is used from the next run on, and neither compiled kernel is freed while a run
//! uses it.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kiln_codegen::cpu::{self, CpuKernel};
use kiln_codegen::{CompileOptions, Kernel};

/// Step code budget of the background compile: large enough for 8-vector steps of the
/// 5x5 median's 288-instruction stage. Measured on the 2-core EPYC VM (2048² f32, 1 thread):
/// the 5x5 median runs in 17.7 ms with it against 21.5 ms under the default budget,
/// and compiles in 8.6-8.9 ms against 3.8 ms.
pub const UPGRADE_STEP_BUDGET: usize = 3000;

/// The background compile of one kernel with [`UPGRADE_STEP_BUDGET`].
#[derive(Default)]
pub struct Upgrade {
    /// The faster kernel once compiled; `None` inside when that compile failed (the first
    /// compile stays in use).
    done: OnceLock<Option<Arc<CpuKernel>>>,
    lock: Mutex<()>,
    ready: Condvar,
}

impl Upgrade {
    /// Starts compiling `kernel` with `options` and a bigger step budget on a new thread.
    /// `None` when no thread could be started (the first compile then stays in use).
    pub(crate) fn start(kernel: Kernel, options: &CompileOptions) -> Option<Arc<Upgrade>> {
        let up = Arc::new(Upgrade::default());
        let options = CompileOptions {
            step_code_budget: Some(UPGRADE_STEP_BUDGET),
            ..options.clone()
        };
        let theirs = up.clone();
        std::thread::Builder::new()
            .name("kiln-upgrade".into())
            .spawn(move || {
                let compiled = cpu::compile(&kernel, &options).ok().map(Arc::new);
                theirs.finish(compiled);
            })
            .ok()?;
        Some(up)
    }

    fn finish(&self, compiled: Option<Arc<CpuKernel>>) {
        let _ = self.done.set(compiled);
        // Hold the lock while notifying so a waiter between its check and its wait cannot
        // miss the wake-up.
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.ready.notify_all();
    }

    /// The faster kernel, when its compile has finished and succeeded.
    pub fn get(&self) -> Option<&Arc<CpuKernel>> {
        self.done.get().and_then(|k| k.as_ref())
    }

    /// Whether the background compile has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        self.done.get().is_some()
    }

    /// Waits up to `timeout` for the background compile; returns whether it finished.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.is_finished() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = match self.ready.wait_timeout(guard, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        true
    }
}
