//! Runs shared between a plan's candidates: a run is a function of its resolved scenario (and
//! the run options, the same for a whole plan), so two candidates that resolve to the same
//! per-server scenario need it simulated once. That happens where a search works per server:
//! an SLO search's saturation runs and probes have their own request counts and client, so
//! candidates of one GPU and TP degree that differ only in how many servers they rent
//! (`--counts 4,8 --tp 4`) search the same server — the second reads the first's runs.
//!
//! The key is the resolved scenario's full `Debug` text (every field is derived `Debug`, and
//! floats print in their shortest round-trip form), so equal keys mean equal scenarios and the
//! reuse is exact; scenarios whose text is larger than [`MAX_KEY_BYTES`] (long inline traces)
//! are simply run. What is kept per run is a summary the caller chooses (a full
//! [`RunResult`] holds megabytes of histograms). Concurrent callers of one key wait for the
//! first, so a run is never simulated twice at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::engine::{self, RunOptions, SimError};
use crate::metrics::RunResult;
use crate::scenario::Scenario;

/// Scenarios whose `Debug` text is longer are run without the memo.
pub const MAX_KEY_BYTES: usize = 1 << 20;

/// A run's summary, or why it could not finish (stuck, out of memory, or past the longest
/// simulated time).
pub type Outcome<T> = Result<T, String>;

type Slot<T> = Arc<Mutex<Option<Outcome<T>>>>;

/// The summaries of the runs done so far, by resolved scenario.
pub struct Memo<T> {
    slots: Mutex<HashMap<String, Slot<T>>>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

/// Run `sc` once: `Ok(Err(reason))` when the server is stuck, runs out of memory or the time
/// would overflow; other errors (an interrupt, `run.max_events`) pass through.
pub fn run_once(sc: &Scenario, opts: &RunOptions) -> Result<Outcome<RunResult>, SimError> {
    match engine::run(sc, opts) {
        Ok(r) => Ok(Ok(r)),
        Err(SimError::Stuck { reason, .. }) => Ok(Err(reason)),
        Err(e @ (SimError::TimeOverflow { .. } | SimError::OutOfMemory { .. })) => {
            Ok(Err(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

impl<T: Clone> Memo<T> {
    /// `summarise` of the run of `sc` ([`run_once`]), simulated only when no earlier call had
    /// the same scenario. Errors that pass through [`run_once`] are not kept.
    pub fn run(
        &self,
        sc: &Scenario,
        opts: &RunOptions,
        summarise: impl FnOnce(RunResult) -> T,
    ) -> Result<Outcome<T>, SimError> {
        let key = format!("{sc:?}");
        if key.len() > MAX_KEY_BYTES {
            return Ok(run_once(sc, opts)?.map(summarise));
        }
        let slot = Arc::clone(
            self.slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_default(),
        );
        // Held while simulating: a second caller of the same scenario waits for this one.
        let mut done = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(o) = done.as_ref() {
            return Ok(o.clone());
        }
        let o = run_once(sc, opts)?.map(summarise);
        *done = Some(o.clone());
        Ok(o)
    }

    /// Distinct scenarios run (or being run).
    pub fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether nothing ran yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn one_scenario_is_simulated_once_and_another_again() {
        let src = crate::scenario::Source::builtin_b2();
        let at = |n: u64| crate::scenario::load(&src, &[format!("workload.requests={n}")]).unwrap();
        let (a, b) = (at(50), at(60));
        let memo = Memo::default();
        let runs = Cell::new(0);
        let opts = RunOptions::default();
        let done = |r: RunResult| {
            runs.set(runs.get() + 1);
            r.totals.requests_completed
        };
        assert_eq!(memo.run(&a, &opts, done).unwrap(), Ok(50));
        assert_eq!(memo.run(&a, &opts, done).unwrap(), Ok(50));
        assert_eq!(runs.get(), 1);
        assert_eq!(memo.run(&b, &opts, done).unwrap(), Ok(60));
        assert_eq!((runs.get(), memo.len()), (2, 2));
    }
}
