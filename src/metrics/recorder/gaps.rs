//! The inter-token gaps: every token's gap since its request's previous one, timed without
//! following each request — from the decode steps' ends, or, for a fast-forward's run of decode
//! steps of a constant batch, from the run's description.

use super::Recorder;
use crate::cost::DecodeSteps;
use crate::metrics::Distribution;
use crate::time::{SimDuration, SimTime};

impl Recorder<'_> {
    /// A batch (or one step of a fast-forward) ended at `at` giving `tokens` output tokens:
    /// `first` of them requests' first ones, one per `resumed` gap to a request evicted since
    /// its previous token (the gap since the eviction), the others decode tokens. Their gaps
    /// since each request's previous token are the inter-token latencies, timed without
    /// following each request: the next decode step gives the requests that got a token
    /// outside one (a first token, a token after an eviction) their next, timed from then; the
    /// other decode tokens are timed from the previous decode step (every running request gets
    /// one token per decode step), so a prefill batch between two decode steps lengthens their
    /// gap as it does in `bench_serving`. The client sees every gap longer by the per-token
    /// streaming time (`workload/overhead.rs`: token `k` reaches it `k × per_token` later).
    #[inline]
    pub fn on_tokens(&mut self, at: SimTime, tokens: u64, first: u64, resumed: &[SimDuration]) {
        if !self.times_token_gaps() {
            return;
        }
        if first == 0 && resumed.is_empty() && self.awaiting_next.is_empty() {
            // Decode tokens only, all timed from the previous decode step (the general case
            // with nothing outside a decode step).
            if tokens > 0 {
                if let Some(prev) = self.last_decode_end {
                    self.gaps(self.steady_at(at), at - prev, tokens);
                }
                self.last_decode_end = Some(at);
            }
            return;
        }
        self.tokens_outside(at, tokens, first, resumed);
    }

    /// Whether a gap ending at `at` is the steady window's.
    #[inline(always)]
    fn steady_at(&self, at: SimTime) -> bool {
        !self.draining && self.steady_start.is_some_and(|s| at > s)
    }

    /// [`Recorder::on_tokens`] when some of the tokens came, or the next decode step's will
    /// be timed from, outside a decode step (out of line: the decode-only case is the common
    /// one).
    #[inline(never)]
    fn tokens_outside(&mut self, at: SimTime, tokens: u64, first: u64, resumed: &[SimDuration]) {
        let steady = self.steady_at(at);
        for &gap in resumed {
            self.gaps(steady, gap, 1);
        }
        let mut later = tokens.saturating_sub(first + resumed.len() as u64);
        if later > 0 {
            for k in 0..self.awaiting_next.len() {
                let (t, n) = self.awaiting_next[k];
                let n = n.min(later);
                self.gaps(steady, at - t, n);
                later -= n;
            }
            self.awaiting_next.clear();
            if let (Some(prev), true) = (self.last_decode_end, later > 0) {
                self.gaps(steady, at - prev, later);
            }
            self.last_decode_end = Some(at);
        }
        let outside = first + resumed.len() as u64;
        if outside > 0 {
            self.awaiting_next.push((at, outside));
        }
    }

    /// Whether, after a step of `b` tokens ending at `at`, every token of the next decode step
    /// is timed from `at`: those that await a gap from outside a decode step all got their
    /// token at `at`, and the others' previous decode step ended then.
    fn only_awaiting_since(&self, at: SimTime, b: u64) -> bool {
        match self.awaiting_next.as_slice() {
            [] => self.last_decode_end == Some(at),
            &[(t, n)] => t == at && (n >= b || self.last_decode_end == Some(at)),
            _ => false,
        }
    }

    /// `n` inter-token gaps of `gap` (and the per-token streaming time) ending at a time in the
    /// steady window (`steady`) or not. A steady gap goes into the steady window's distribution
    /// only (the whole run's takes its values at the end).
    #[inline(always)]
    fn gaps(&mut self, steady: bool, gap: SimDuration, n: u64) {
        let v = gap.as_ns() + self.overhead.per_token.as_ns();
        match steady {
            true => self.steady_latency.itl_ms.add_n(v, n),
            false => self.latency.itl_ms.add_n(v, n),
        }
    }

    /// A fast-forward's decode steps ended at `ends` (each with its tokens), the first giving
    /// `first` first tokens and the `resumed` tokens after an eviction: the same as
    /// [`Recorder::on_tokens`] for each step. Steps are handed to it one by one until no token
    /// awaits a gap timed from outside a decode step; from then on each later step's gaps are
    /// its duration for all its tokens, recorded in runs.
    pub fn on_decode_run(&mut self, ends: &[(SimTime, u64)], first: u64, resumed: &[SimDuration]) {
        if !self.times_token_gaps() {
            return;
        }
        let (mut first, mut resumed) = (first, resumed);
        let mut k = 0;
        while k < ends.len()
            && (k == 0 || !self.awaiting_next.is_empty() || self.last_decode_end.is_none())
        {
            let (at, tokens) = ends[k];
            self.on_tokens(
                at,
                tokens,
                std::mem::take(&mut first),
                std::mem::take(&mut resumed),
            );
            k += 1;
        }
        if k == 0 || k >= ends.len() {
            return;
        }
        let rest = &ends[k - 1..];
        let per_token = self.overhead.per_token.as_ns();
        let gaps = |ends| step_gaps(ends, per_token);
        // The steady window's gaps (a suffix: the ends increase) go into its distribution only.
        let split = match self.steady_start.filter(|_| !self.draining) {
            Some(s) => rest.windows(2).position(|w| w[1].0 > s),
            None => None,
        }
        .unwrap_or(rest.len() - 1);
        let (before, steady) = (&rest[..split + 1], &rest[split..]);
        self.latency.itl_ms.add_grouped(gaps(before));
        if steady.len() > 1 {
            self.steady_latency.itl_ms.add_grouped(gaps(steady));
        }
        self.last_decode_end = Some(ends[ends.len() - 1].0);
    }

    /// A fast-forward's decode steps of a constant batch, started at `start` and described by
    /// `run` rather than listed (each step gives every request of the batch a token): the same
    /// as [`Recorder::on_decode_run`] with their ends. While a token awaits a gap timed from
    /// outside a decode step the steps are handed to [`Recorder::on_tokens`] one by one; when
    /// none does, the first step's gap is since the previous decode step's end (as
    /// [`Recorder::on_tokens`] times it). Every later step's gap is its duration, for each of
    /// its tokens, recorded per histogram bucket (the steady window's from the first step that
    /// ends after its start): O(1) per bucket the gaps pass through for a line of floors,
    /// O(log steps) per bucket for other steps that never get shorter, and, when they may
    /// (a table whose step time falls as the KV grows), a look at every step.
    pub fn on_decode_steps(
        &mut self,
        start: SimTime,
        run: &DecodeSteps,
        first: u64,
        resumed: &[SimDuration],
    ) {
        if !self.times_token_gaps() {
            return;
        }
        let (n, b) = (run.steps(), run.batch());
        let per_token = self.overhead.per_token.as_ns();
        let quiet = first == 0 && resumed.is_empty() && self.awaiting_next.is_empty() && b > 0;
        // Steps `k..n` are recorded by bucket, step k's gap being `lead` when it is not its
        // duration.
        let (k, lead) = match self.last_decode_end {
            Some(prev) if quiet && n > 0 => {
                let at = start + SimDuration::from_ns(run.duration(0));
                (0, Some((at - prev).as_ns() + per_token))
            }
            _ => {
                let (mut first, mut resumed) = (first, resumed);
                let mut k = 0;
                let mut at = start;
                while k < n
                    && (k == 0 || !self.awaiting_next.is_empty() || self.last_decode_end.is_none())
                {
                    at += SimDuration::from_ns(run.duration(k));
                    self.on_tokens(
                        at,
                        b,
                        std::mem::take(&mut first),
                        std::mem::take(&mut resumed),
                    );
                    k += 1;
                    if k == 1 && k < n && self.only_awaiting_since(at, b) {
                        // Every token of the second step is timed from the first's end.
                        self.awaiting_next.clear();
                        break;
                    }
                }
                (k, None)
            }
        };
        if k >= n {
            return;
        }
        let total = run.elapsed(n);
        // Σ of the gaps of steps `a..n` (the run's time from the end of step `a − 1`), step
        // k's being its duration.
        let tail =
            |a: u64| u128::from(total - run.elapsed(a)) + u128::from(per_token) * u128::from(n - a);
        // Step k's gap beyond its duration.
        let extra = lead.map_or(0, |v| v - (run.duration(k) + per_token));
        // The steps from `from` on end after the steady window's start: their gaps go into its
        // distribution only (the whole run's takes its values at the end), the others into the
        // whole run's.
        let from = match self.steady_start.filter(|_| !self.draining) {
            Some(s) if s > start => run.ended_by((s - start).as_ns()).clamp(k, n),
            Some(_) => k,
            None => n,
        };
        let tail_k = tail(k) + u128::from(extra);
        let tail_from = match from {
            _ if from == k => tail_k,
            _ if from == n => 0,
            _ => tail(from),
        };
        let steps = Steps {
            run,
            per_token,
            lead: lead.map(|v| (k, v)),
        };
        if from > k {
            let whole = &mut self.latency.itl_ms;
            steps.add(whole, (k, from), tail_k - tail_from);
        }
        if from < n {
            steps.add(&mut self.steady_latency.itl_ms, (from, n), tail_from);
        }
        self.last_decode_end = Some(start + SimDuration::from_ns(total));
    }
}

/// A run's steps as gaps: each step's duration and the per-token streaming time, the gap of
/// the step `lead.0` being `lead.1` instead.
struct Steps<'r, 'm> {
    run: &'r DecodeSteps<'m>,
    per_token: u64,
    lead: Option<(u64, u64)>,
}

impl Steps<'_, '_> {
    /// Add the gaps of the steps `from..to`, whose Σ is `sum`, each for every request of the
    /// batch, to `d`.
    fn add(&self, d: &mut Distribution, (from, to): (u64, u64), sum: u128) {
        let (run, per_token, b) = (self.run, self.per_token, self.run.batch());
        let lead = self.lead.filter(|l| l.0 == from).map(|l| l.1);
        // The lead alone (its bucket's count is held back with the others'), then the steps
        // after it by bucket.
        if let Some(v) = lead {
            d.add_n(v, b);
        }
        let (after, sum) = (
            from + u64::from(lead.is_some()),
            sum - lead.map_or(0, u128::from),
        );
        if let Some(line) = run.line() {
            if d.add_line(line, (after, to), per_token, (b, sum)) {
                return;
            }
        }
        if run.non_decreasing() {
            match run.ends() {
                // Step `j` lasts `ends[j] − ends[j − 1]` (the first, `ends[0]`): the same
                // durations as `run.duration`, read from the slice of the steps asked for.
                Some(ends) => {
                    let (after, to) = (after as usize, to as usize);
                    let before = if after == 0 { 0 } else { ends[after - 1] };
                    let w = &ends[after..to];
                    let gap = |i: u64| {
                        let i = i as usize;
                        w[i] - if i == 0 { before } else { w[i - 1] } + per_token
                    };
                    d.add_sorted(w.len() as u64, gap, b, sum);
                }
                None => d.add_sorted(to - after, |i| run.duration(after + i) + per_token, b, sum),
            }
        } else {
            d.add_grouped((after..to).map(|j| (run.duration(j) + per_token, b)));
        }
    }
}

/// Each step's gap since the step before (and the per-token streaming time), for each of its
/// tokens: `(gap, tokens)` for the steps ending at `ends[1..]`.
fn step_gaps(ends: &[(SimTime, u64)], per_token: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
    let steps = ends.iter().zip(&ends[1..]);
    steps.map(move |(a, b)| ((b.0 - a.0).as_ns() + per_token, b.1))
}
