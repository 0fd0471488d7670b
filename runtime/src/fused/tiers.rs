//! Tiered compilation: a kernel is compiled first with the default code budget (fast to
//! compile), and compiled again on a background thread when that pays: with a bigger
//! budget when the default one held some stage's code back (smaller vector-loop steps, no
//! carried values, fewer edge vectors) or when max stages ran min stages' code on negated
//! values (`cpu::dual`, fewer functions to compile), and with its specialisation for clean inputs
//! (`cpu::compile_clean`) when it has one, attached to the first compile's code when no
//! bigger budget is needed. Runs use the second compile as soon as it is ready. Both
//! compiles give the same bits (the step size of the shared vector loop differs, and the
//! clean specialisation runs only on inputs checked clean), so which one a run uses changes
//! its speed only.
//!
//! A run picks its kernel once, at the start, and holds its `Arc`: a compile that lands
//! mid-run is used from the next run on, and neither compiled kernel is freed while a run
//! uses it.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use kiln_codegen::cpu::{self, CpuKernel};
use kiln_codegen::CompileOptions;

/// Step code budget of the background compile: large enough for 8-vector steps of the
/// 5x5 median's 290-instruction stage. Measured on the 2-core EPYC VM (2048² f32, 1 thread),
/// before values were carried between steps: the 5x5 median ran in 17.7 ms with it against
/// 21.5 ms under the default budget, and compiled in 8.6-8.9 ms against 3.8 ms. With
/// carried values (see `cpu::shift`) the median takes 4-vector steps under it.
pub const UPGRADE_STEP_BUDGET: usize = 3000;

/// What runs when a background compile has finished: given the kernel and whether its
/// general code was compiled again.
pub(crate) type OnDone = Box<dyn FnOnce(&CpuKernel, bool) + Send>;

/// The options of the background compile of a kernel first compiled with `options`.
pub fn upgrade_options(options: &CompileOptions) -> CompileOptions {
    CompileOptions {
        step_code_budget: Some(UPGRADE_STEP_BUDGET),
        no_dual_stages: true,
        ..options.clone()
    }
}

/// The background compile of one kernel: with [`UPGRADE_STEP_BUDGET`] when that changes
/// its code (else sharing the first compile's code), and with its guarded variants for
/// clean inputs attached (`CpuKernel::variants`) when it has them.
#[derive(Default)]
pub struct Upgrade {
    /// The faster kernel once compiled; `None` inside when that compile failed (the first
    /// compile stays in use).
    done: OnceLock<Option<Arc<CpuKernel>>>,
    lock: Mutex<()>,
    ready: Condvar,
}

impl Upgrade {
    /// Whether a compile under [`UPGRADE_STEP_BUDGET`], without dual stages, would give
    /// different code than `first`, compiled with `options`.
    fn bigger_pays(first: &CpuKernel, options: &CompileOptions) -> bool {
        (first.budget_limited
            && options.step_code_budget.unwrap_or(cpu::STEP_CODE_BUDGET) < UPGRADE_STEP_BUDGET)
            || first.dual_stages
    }

    /// Whether compiling `first`'s kernel again would pay.
    pub(crate) fn worthwhile(first: &CpuKernel, options: &CompileOptions) -> bool {
        Upgrade::bigger_pays(first, options) || cpu::clean_kernel(&first.kernel).is_some()
    }

    /// Starts compiling `first`'s kernel (first compiled with `options`) on a new thread:
    /// again with a bigger step budget when that gives different code, else sharing
    /// `first`'s code, and with its clean specialisations attached. `None` when no thread
    /// could be started (the first compile then stays in use).
    ///
    /// `on_done` is called with the finished kernel, and whether its general code was
    /// compiled again (with [`upgrade_options`]) rather than shared, before waiters wake up
    /// (the disk cache writes its entry there).
    pub(crate) fn start(
        first: Arc<CpuKernel>,
        options: &CompileOptions,
        on_done: Option<OnDone>,
    ) -> Option<Arc<Upgrade>> {
        let up = Arc::new(Upgrade::default());
        let recompile = Upgrade::bigger_pays(&first, options);
        let options = upgrade_options(options);
        let theirs = up.clone();
        std::thread::Builder::new()
            .name("kiln-upgrade".into())
            .spawn(move || {
                // The forms compile at the same time, the clean ones on threads of their own
                // (the upgrade lands 19-24% sooner than compiling them one after another).
                // A failed or panicking compile leaves the first one in use (a clean form
                // whose compile failed is left out); either way the upgrade finishes, so
                // nobody waits for it in vain.
                let compiled = std::panic::catch_unwind(|| {
                    let kernel = &first.kernel;
                    std::thread::scope(|s| {
                        let options = &options;
                        let variants: Vec<_> = cpu::Guard::ALL
                            .into_iter()
                            .filter(|g| g.enabled(options))
                            .map(|g| (g, s.spawn(move || cpu::compile_variant(kernel, g, options))))
                            .collect();
                        let general = if recompile {
                            cpu::compile(kernel, options).ok()
                        } else {
                            Some(first.share_code())
                        };
                        // A variant whose compile failed or panicked is left out.
                        let compiled = variants
                            .into_iter()
                            .filter_map(|(guard, h)| {
                                let kernel = h.join().ok()?.ok()??;
                                Some(cpu::GuardedVariant { guard, kernel })
                            })
                            .collect();
                        let mut k = general?;
                        k.variants = cpu::attachable(compiled);
                        Some(Arc::new(k))
                    })
                })
                .ok()
                .flatten();
                if let (Some(k), Some(f)) = (&compiled, on_done) {
                    f(k, recompile);
                }
                theirs.finish(compiled);
            })
            .ok()?;
        Some(up)
    }

    fn finish(&self, compiled: Option<Arc<CpuKernel>>) {
        let _ = self.done.set(compiled);
        // Hold the lock while notifying so a waiter between its check and its wait cannot
        // miss the wake-up.
        let _guard = super::lock(&self.lock);
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
        let mut guard = super::lock(&self.lock);
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
