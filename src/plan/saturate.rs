//! The concurrency that saturates a candidate's server, searched.
//!
//! More requests in flight help until the server runs as many as it can at once; past that,
//! SGLang's admission (which reserves room for the outputs) keeps the batch the same and the
//! extra requests only wait — but vLLM admits a request when its prompt fits and preempts when
//! the running ones cannot grow, so too many in flight cost recomputation and throughput
//! *falls*. Hence a search rather than a formula: from the most a server could run at once
//! ([`upper_bound`]), a ladder of concurrencies, each `1/√2` of the previous, is run until the
//! score is well below the best seen ([`GIVE_UP_BELOW`]) or [`MAX_STEPS`] runs; the saturating
//! concurrency is the smallest tried whose score is within [`TOLERANCE`] of the best.

use crate::engine::SimError;
use crate::memory;
use crate::scenario::{PolicySpec, Scenario};

/// Most runs of the ladder.
pub const MAX_STEPS: usize = 10;
/// Scores within this fraction of the best count as the best: the smallest such concurrency
/// is taken.
pub const TOLERANCE: f64 = 0.002;
/// The ladder stops once a score falls below this fraction of the best seen: the server is
/// short of work there, and smaller concurrencies only do worse.
pub const GIVE_UP_BELOW: f64 = 0.9;

/// The most requests a server of `sc` could run at once: its slot limit (SGLang's
/// `max_running_requests`, vLLM's `max_num_seqs`), or as many of the workload's mean prompts as
/// its KV pool holds (`kv_capacity_tokens / (mean prompt + 1)`; with shared prefixes and the
/// engine's prefix cache on, each prefix held once and each request's own tokens,
/// [`memory::prompts_fit`]), whichever is smaller.
pub fn at_once(sc: &Scenario) -> u64 {
    let (prompt, _) = sc.workload.mean_lengths();
    let cache = match &sc.engine.policy {
        PolicySpec::Sglang(s) => !s.disable_radix_cache,
        PolicySpec::Vllm(v) => v.enable_prefix_caching,
    };
    let cached = sc.workload.cached_prefixes().filter(|_| cache);
    let fits = memory::prompts_fit(sc.engine.kv_capacity_tokens, prompt, cached);
    u64::from(sc.engine.policy.max_running_requests())
        .min(fits)
        .max(1)
}

/// Where the search starts: [`at_once`], but never more than the server's requests.
pub fn upper_bound(sc: &Scenario) -> u64 {
    at_once(sc).min(sc.workload.requests).max(1)
}

/// The concurrencies of the ladder below `upper`: each `⌈previous / √2⌉` (and at least one
/// less), down to 1.
pub fn next_below(c: u64) -> Option<u64> {
    (c > 1).then(|| ((c as f64 / std::f64::consts::SQRT_2).ceil() as u64).min(c - 1))
}

/// What the search found.
#[derive(Debug)]
pub struct Saturation<T> {
    /// The saturating concurrency.
    pub concurrency: u64,
    /// Its run.
    pub result: T,
    /// Every concurrency tried, its score and the time its run took, in the order tried.
    pub tried: Vec<(u64, f64, f64)>,
}

/// Search from `upper` down: `run_at(c)` is the run with `c` in flight (`Ok(Err(reason))` when
/// it cannot run or finish), `score` what to maximise (higher is better) and `duration` the
/// run's simulated time. `Err(reason)` inside when no concurrency ran to the end.
pub fn search<T>(
    upper: u64,
    run_at: impl Fn(u64) -> Result<Result<T, String>, SimError>,
    score: impl Fn(&T) -> f64,
    duration: impl Fn(&T) -> f64,
) -> Result<Result<Saturation<T>, String>, SimError> {
    let mut runs: Vec<(u64, f64, T)> = Vec::new();
    let mut first_failure = None;
    let mut c = upper.max(1);
    for _ in 0..MAX_STEPS {
        match run_at(c)? {
            Ok(r) => {
                let s = score(&r);
                let best = runs.iter().map(|r| r.1).fold(s, f64::max);
                runs.push((c, s, r));
                if s < GIVE_UP_BELOW * best {
                    break;
                }
            }
            Err(reason) => {
                first_failure.get_or_insert(reason);
            }
        }
        match next_below(c) {
            Some(n) => c = n,
            None => break,
        }
    }
    let Some(best) = runs.iter().map(|r| r.1).reduce(f64::max) else {
        return Ok(Err(first_failure.unwrap_or_else(|| "nothing ran".into())));
    };
    let tried = runs.iter().map(|(c, s, r)| (*c, *s, duration(r))).collect();
    let (concurrency, _, result) = runs
        .into_iter()
        .filter(|r| r.1 >= best * (1.0 - TOLERANCE))
        .min_by_key(|r| r.0)
        .expect("invariant: the best run is within the tolerance of itself");
    Ok(Ok(Saturation {
        concurrency,
        result,
        tried,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// [`search`] from `upper` with `score(c)` the score of the run at `c` (the run is its
    /// concurrency; `Err` when it cannot run): what it found, and the concurrencies it ran, in
    /// order.
    fn searched(
        upper: u64,
        score: impl Fn(u64) -> Result<f64, String>,
    ) -> (Result<Saturation<u64>, String>, Vec<u64>) {
        let ran = RefCell::new(Vec::new());
        let found = search(
            upper,
            |c| {
                ran.borrow_mut().push(c);
                Ok(score(c).map(|_| c))
            },
            |&c| score(c).expect("only runs that ran are scored"),
            |&c| c as f64,
        )
        .expect("no simulation error");
        (found, ran.into_inner())
    }

    #[test]
    fn the_ladder_steps_down_by_root_two_to_one() {
        let mut c = Some(670);
        let mut ladder = Vec::new();
        while let Some(x) = c {
            ladder.push(x);
            c = next_below(x);
        }
        assert_eq!(
            ladder,
            [670, 474, 336, 238, 169, 120, 85, 61, 44, 32, 23, 17, 13, 10, 8, 6, 5, 4, 3, 2, 1]
        );
    }

    #[test]
    fn the_ladder_runs_at_most_max_steps_times() {
        // Every score the same: nothing stops the ladder but its length, and the smallest
        // concurrency tried is taken.
        let (found, ran) = searched(670, |_| Ok(1.0));
        assert_eq!(ran, [670, 474, 336, 238, 169, 120, 85, 61, 44, 32]);
        assert_eq!(ran.len(), MAX_STEPS);
        let s = found.unwrap();
        assert_eq!((s.concurrency, s.result), (32, 32));
        assert_eq!(s.tried.len(), MAX_STEPS);
    }

    #[test]
    fn it_stops_below_nine_tenths_of_the_best_and_takes_the_smallest_within_the_tolerance() {
        // The best is 336's 1.001; 238 is within 0.2 % of it (0.9995 ≥ 0.998998), 169 is not
        // (0.998); 61 falls below 0.9 × 1.001 = 0.9009 and ends the ladder, so 44's higher
        // score is never seen.
        let scores = [
            (670, 1.0),
            (474, 1.0),
            (336, 1.001),
            (238, 0.9995),
            (169, 0.998),
            (120, 0.95),
            (85, 0.95),
            (61, 0.85),
            (44, 1.1),
        ];
        let (found, ran) = searched(670, |c| {
            Ok(scores
                .iter()
                .find(|s| s.0 == c)
                .expect("a rung of the ladder")
                .1)
        });
        assert_eq!(ran, [670, 474, 336, 238, 169, 120, 85, 61]);
        let s = found.unwrap();
        assert_eq!(s.concurrency, 238);
        assert_eq!(s.result, 238);
        let tried: Vec<(u64, f64, f64)> =
            scores[..8].iter().map(|&(c, x)| (c, x, c as f64)).collect();
        assert_eq!(s.tried, tried);
    }

    #[test]
    fn a_score_of_exactly_nine_tenths_of_the_best_does_not_end_the_ladder() {
        let (_, ran) = searched(3, |c| Ok(if c == 2 { GIVE_UP_BELOW } else { 1.0 }));
        assert_eq!(ran, [3, 2, 1]);
    }

    #[test]
    fn a_score_exactly_at_the_tolerance_counts_as_the_best() {
        let (found, _) = searched(2, |c| Ok(if c == 2 { 1.0 } else { 1.0 - TOLERANCE }));
        assert_eq!(found.unwrap().concurrency, 1);
    }

    #[test]
    fn runs_that_cannot_run_are_passed_over_and_when_none_runs_the_first_reason_is_given() {
        // The ladder goes on below a concurrency that cannot run.
        let (found, ran) = searched(8, |c| match c {
            8 => Err("eight do not fit".to_string()),
            _ => Ok(1.0),
        });
        assert_eq!(ran[..2], [8, 6]);
        assert_eq!(found.unwrap().tried[0].0, 6);
        // None runs: the first reason, not the last.
        let (found, ran) = searched(8, |c| Err(format!("{c} do not fit")));
        assert_eq!(ran, [8, 6, 5, 4, 3, 2, 1]);
        assert_eq!(found.unwrap_err(), "8 do not fit");
    }
}
