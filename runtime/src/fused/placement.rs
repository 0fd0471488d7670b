//! Where a compiled graph's runs go: on the calling thread or on the engine's threads,
//! decided from how long the graph takes on the calling thread.
//!
//! Handing a run to the pool costs waking its threads: 15–40 µs a call on the 2-core VM,
//! more when they had gone to sleep between calls. The estimated work
//! ([`super::CompiledGraph::estimated_work`]) predicts a run's time only roughly: per unit
//! of it, a 3x3 median on clean input took about 12 ps, a gradient magnitude 40–55 ps, a
//! 15x15 erosion on 32² planes 150 ps. So a graph of less estimated work than
//! [`MEASURED_MAX_WORK`] times its runs on the calling thread: the first
//! [`CALIBRATION_RUNS`] runs go there, and so does one run in every [`RECHECK_EVERY`]
//! (background compiles land, inputs turn clean or not). The runs in between stay on the
//! calling thread if the fastest of those timings was under [`INLINE_SECS`], and go to the
//! threads otherwise. Only absolute times on the calling thread are compared, never a
//! threaded run's, whose time depends on whether the threads were still awake. Results
//! never depend on the place, only speed.

use std::sync::Mutex;

use super::lock;

/// Graphs of more estimated work always run on the threads: a median 3x3 at 320² (about
/// 7 M units) takes 60–100 µs on one thread, where the hand-over is already small.
pub(crate) const MEASURED_MAX_WORK: u64 = 8 << 20;

/// Runs on the calling thread below this many seconds stay there. Measured on the 2-core
/// VM, 2 threads, back to back: median 3x3 at 192² 25–31 µs on the caller against 35–45 µs
/// on the threads, at 256² 41–55 against 37–42 µs; gradient magnitude at 320² 42–50
/// against 33–46 µs.
pub(crate) const INLINE_SECS: f64 = 40e-6;

/// Runs timed on the calling thread before each decision; the fastest counts (the first
/// run builds the graph's caches, and a single run can meet a hiccup).
pub(crate) const CALIBRATION_RUNS: u64 = 3;

/// After this many runs, the timing starts again.
pub(crate) const RECHECK_EVERY: u64 = 256;

/// Where one run goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// The calling thread (see `crate::inline`).
    Caller,
    /// The engine's thread pool.
    Threads,
}

/// The timings of one compiled graph on the calling thread.
#[derive(Default)]
pub(crate) struct Placement {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Runs so far.
    runs: u64,
    /// Timed runs still to come in the current round (calibration or recheck).
    to_time: u64,
    /// The fastest timed run of the current round, in seconds.
    best: Option<f64>,
    /// The last decision (`None` before the calibration ends).
    decided: Option<Place>,
}

impl Placement {
    /// Where the next run goes, and whether it is timed (pass its time to [`Self::record`]).
    pub(crate) fn choose(&self) -> (Place, bool) {
        let mut s = lock(&self.state);
        if s.to_time == 0 && (s.decided.is_none() || s.runs.is_multiple_of(RECHECK_EVERY)) {
            s.to_time = CALIBRATION_RUNS;
        }
        match s.decided {
            Some(place) if s.to_time == 0 => (place, false),
            _ => (Place::Caller, true),
        }
    }

    /// Counts a run; `secs` is its time when [`Self::choose`] asked for it.
    pub(crate) fn record(&self, secs: Option<f64>) {
        let mut s = lock(&self.state);
        s.runs += 1;
        let Some(secs) = secs else { return };
        let best = s.best.map_or(secs, |b| b.min(secs));
        s.to_time = s.to_time.saturating_sub(1);
        if s.to_time > 0 {
            s.best = Some(best);
            return;
        }
        s.decided = Some(if best < INLINE_SECS {
            Place::Caller
        } else {
            Place::Threads
        });
        s.best = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` runs taking `caller` seconds when timed on the calling thread; their places.
    fn drive(p: &Placement, n: usize, caller: f64) -> Vec<Place> {
        (0..n)
            .map(|_| {
                let (at, timed) = p.choose();
                p.record(timed.then_some(caller));
                at
            })
            .collect()
    }

    #[test]
    fn calibrates_on_the_caller_then_decides_and_rechecks_now_and_then() {
        for (secs, after) in [(10e-6, Place::Caller), (90e-6, Place::Threads)] {
            let p = Placement::default();
            let got = drive(&p, 1000, secs);
            let timing = CALIBRATION_RUNS;
            for (run, &at) in got.iter().enumerate() {
                let run = run as u64;
                let want = match run % RECHECK_EVERY < timing {
                    true => Place::Caller,
                    false => after,
                };
                assert_eq!(at, want, "run {run}, {secs} s");
            }
        }
    }

    #[test]
    fn the_fastest_timed_run_decides() {
        // A slow first run (it builds caches) and one hiccup do not send a fast graph to
        // the threads; a slow graph goes there even with one fast run.
        for (times, want) in [
            ([500e-6, 10e-6, 12e-6], Place::Caller),
            ([11e-6, 300e-6, 12e-6], Place::Caller),
            ([10e-6, 12e-6, 300e-6], Place::Caller),
            ([90e-6, 95e-6, 80e-6], Place::Threads),
        ] {
            let p = Placement::default();
            for t in times {
                let (at, timed) = p.choose();
                assert_eq!((at, timed), (Place::Caller, true));
                p.record(Some(t));
            }
            assert_eq!(p.choose(), (want, false), "{times:?}");
        }
    }

    #[test]
    fn a_recheck_follows_a_change_in_the_times() {
        let p = Placement::default();
        assert!(drive(&p, 10, 10e-6).ends_with(&[Place::Caller]));
        // The runs get slower (an input that is not clean any more, say): after the next
        // recheck they go to the threads.
        let got = drive(&p, RECHECK_EVERY as usize, 200e-6);
        assert_eq!(got.last(), Some(&Place::Threads), "{got:?}");
        // And back.
        let got = drive(&p, RECHECK_EVERY as usize, 10e-6);
        assert_eq!(got.last(), Some(&Place::Caller));
    }
}
