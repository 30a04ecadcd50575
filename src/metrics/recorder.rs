//! The recorder: fed by the simulator as the run goes, it keeps constant-size running totals,
//! a bounded time series and the observation snapshots.
//!
//! The server state is piecewise constant between events, so its time integrals are exact. The
//! time series starts at `run.timeseries_interval_s` (at most 1 s: the analysis needs that
//! resolution whatever the CSV's spacing; a coarser CSV gets a series of its own) and,
//! whenever it would exceed its point budget, drops every other point and doubles its
//! spacing: the points it keeps carry cumulative totals, so nothing measured is lost, only
//! resolution.
//!
//! Latencies are reported twice: for the whole run, and for the steady window — the requests
//! sent from the moment the start-up clears and the token gaps after it and before the client's
//! last send (or, with [`SteadyFrom::StartUpClearedUntil`], only those before a given time).
//! Each value is recorded once, in the steady window's distributions or in the rest of the
//! run's; at the end the whole run's take in the steady window's (`Recorder::finish`).

mod gaps;
mod runs;
#[cfg(test)]
mod tests;

use super::{
    DecodeLogStats, EngineLatencies, Latencies, RequestRecord, RunResult, Sample, StartUp,
    SteadyFrom, StopReason, TimeAverages, TokenGaps, Totals,
};
use crate::metrics::latency::{round_to_u64, Fraction};
use crate::metrics::Distribution;
use crate::request::Request;
use crate::scheduler::{IntervalStats, LogRecord, SchedulerCounters, ServerState, Words};
use crate::time::{SimDuration, SimTime, NS_PER_S};
use crate::workload::overhead::Overhead;

/// Default time-series point budget.
pub const DEFAULT_MAX_POINTS: usize = 4096;
/// The first minutes are also snapshotted once a minute at full resolution, to show how the
/// views move while the batch fills (the time series may be coarser by then).
pub const MINUTE_MARKS: u64 = 15;
/// The analysis's time series starts no coarser than this (before doubling), whatever the
/// CSV's spacing.
pub const ANALYSIS_INTERVAL_NS: u64 = NS_PER_S;
/// The start-up has cleared once all but this fraction of its requests are answered.
pub const STARTUP_STRAGGLERS: f64 = 0.01;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SnapshotKind {
    Observation,
    Minute,
    StartUp,
}

/// A regularly spaced series of snapshots within a point budget: whenever it would exceed the
/// budget it drops every other point and doubles its spacing.
#[derive(Debug)]
struct Series {
    interval: SimDuration,
    next: SimTime,
    max_points: usize,
    samples: Vec<Sample>,
}

impl Series {
    fn new(interval_ns: u64, max_points: usize) -> Self {
        Series {
            interval: SimDuration::from_ns(interval_ns.max(1)),
            next: SimTime::ZERO,
            max_points: max_points.max(4),
            samples: Vec::new(),
        }
    }

    /// Keep `snap`, taken at `t`, if the series has a point there.
    fn offer(&mut self, t: SimTime, snap: &Sample) {
        if t != self.next {
            return;
        }
        self.samples.push(snap.clone());
        self.next = t + self.interval;
        if self.samples.len() >= self.max_points {
            // Keep the points at even multiples of the spacing; double it.
            let mut i = 0;
            self.samples.retain(|_| {
                let keep = i % 2 == 0;
                i += 1;
                keep
            });
            self.interval = SimDuration::from_ns(self.interval.as_ns().saturating_mul(2));
            let last = SimTime::from_ns((self.samples.len() as u64 - 1) * self.interval.as_ns());
            self.next = last + self.interval;
        }
    }

    /// Close the series at the end of the run with a point there, unless it has one.
    fn close(&mut self, end: SimTime, snap: impl FnOnce() -> Sample) {
        if self
            .samples
            .last()
            .is_none_or(|s| s.t_s < end.as_secs_f64())
        {
            self.samples.push(snap());
        }
    }
}

/// The requests sent before the first completion, as they are answered.
#[derive(Debug, Default)]
struct Cohort {
    size: u64,
    answered: u64,
    cleared_at: Option<SimTime>,
}

/// The recorder. See the module docs.
pub struct Recorder<'a> {
    // State as of `last_t` and its integrals up to `last_t` (ns × count).
    last_t: SimTime,
    state: ServerState,
    in_flight: u64,
    int_running: u128,
    int_queued: u128,
    int_kv: u128,
    int_in_flight: u128,
    int_queue_busy: u128,

    // Cumulative counters.
    completed: u64,
    rejected: u64,
    sent: u64,
    arrived: u64,
    generated_tokens: u64,
    output_tokens: u64,
    prompt_tokens: u64,
    /// Their prompt tokens found in the prefix cache at the first admission.
    cached_tokens: u64,
    sum_e2e_ns: u128,
    sum_e2e_sq_ns2: u128,
    first_completion: Option<SimTime>,
    last_send: Option<SimTime>,
    cohort: Cohort,

    // The steady window's latencies.
    steady_start: Option<SimTime>,
    /// With [`SteadyFrom::StartUpClearedUntil`]: the end of the part of the steady window
    /// recorded.
    steady_until: Option<SimTime>,
    /// The client has sent its last request, or the time is past `steady_until`: no further
    /// token gap is the steady window's.
    draining: bool,
    /// With `steady_until`: requests of the part (sent from the start-up's clearing to
    /// `steady_until`) not answered yet.
    part_open: u64,
    /// With `steady_until`: the latest instant a request was sent at, and how many were.
    sends_now: (SimTime, u64),
    startup_sample: Option<Sample>,
    /// The end of the latest batch that gave tokens to requests holding one already (for the
    /// inter-token latencies).
    last_decode_end: Option<SimTime>,
    /// Tokens that came outside a decode step (first tokens, tokens after an eviction), whose
    /// requests' next tokens are timed from them: `(when, how many)`.
    awaiting_next: Vec<(SimTime, u64)>,
    /// Whether the gaps are timed at all (untimed, the two above stay as they start).
    token_gaps: TokenGaps,

    // Client window.
    window: SimDuration,
    /// The completion times from `window_start` on (non-decreasing) are those still in the
    /// window as of the latest snapshot, and those since; the ones before, out of it, are
    /// dropped once they are half the vector.
    window_completions: Vec<SimTime>,
    window_start: usize,

    // Server log view.
    last_gen_tok_per_s: f64,
    decode_lines: u64,
    sum_gen_tok_per_s: f64,
    decode_tokens_logged: u64,
    last_decode_line_at: SimTime,
    keep_log: bool,
    log: Vec<LogRecord>,
    log_sink: Option<&'a mut dyn FnMut(&LogRecord)>,
    keep_requests: bool,
    requests: Vec<RequestRecord>,
    request_sink: Option<&'a mut dyn FnMut(&RequestRecord)>,

    // Time series (the analysis's, and the CSV's when it is coarser) and observations.
    series: Series,
    csv: Option<Series>,
    /// Snapshot times: the user's observations and the minute marks, sorted.
    observe_at: Vec<(SimTime, SnapshotKind)>,
    next_obs: usize,
    /// The next instant a point or an observation is due (see [`Recorder::next_snapshot_at`]),
    /// kept up to date by whatever moves one of them.
    next_due: SimTime,
    observations: Vec<Sample>,
    minutes: Vec<Sample>,

    latency: Latencies,
    steady_latency: Latencies,
    output_dist: Distribution,
    prompt_dist: Distribution,

    // Off-GPU time, and the latencies at the engine when there is any.
    overhead: Overhead,
    engine_latency: Option<EngineLatencies>,
    decode_round_ns: Vec<u64>,
}

impl<'a> Recorder<'a> {
    /// A recorder with this window, initial time-series spacing (of the CSV), point budget (at
    /// least 4) and observation times (sorted). With `keep_log` the engine's log lines are
    /// kept; `steady_from` says where the steady-window latencies start.
    pub fn new(
        window: SimDuration,
        interval: SimDuration,
        max_points: usize,
        observe_at: Vec<SimTime>,
        kv_capacity_tokens: u64,
        keep_log: bool,
        steady_from: SteadyFrom,
    ) -> Self {
        let csv_ns = interval.as_ns().max(1);
        let mut r = Recorder {
            last_t: SimTime::ZERO,
            state: ServerState {
                kv_capacity_tokens,
                ..ServerState::default()
            },
            in_flight: 0,
            int_running: 0,
            int_queued: 0,
            int_kv: 0,
            int_in_flight: 0,
            int_queue_busy: 0,
            completed: 0,
            rejected: 0,
            sent: 0,
            arrived: 0,
            generated_tokens: 0,
            output_tokens: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            sum_e2e_ns: 0,
            sum_e2e_sq_ns2: 0,
            first_completion: None,
            last_send: None,
            cohort: Cohort::default(),
            steady_start: None,
            steady_until: match steady_from {
                SteadyFrom::StartUpCleared => None,
                SteadyFrom::StartUpClearedUntil(t) => Some(t),
            },
            draining: false,
            part_open: 0,
            sends_now: (SimTime::ZERO, 0),
            startup_sample: None,
            last_decode_end: None,
            awaiting_next: Vec::new(),
            token_gaps: TokenGaps::Timed,
            window,
            window_completions: Vec::new(),
            window_start: 0,
            last_gen_tok_per_s: 0.0,
            decode_lines: 0,
            sum_gen_tok_per_s: 0.0,
            decode_tokens_logged: 0,
            last_decode_line_at: SimTime::ZERO,
            keep_log,
            log: Vec::new(),
            log_sink: None,
            keep_requests: false,
            requests: Vec::new(),
            request_sink: None,
            series: Series::new(csv_ns.min(ANALYSIS_INTERVAL_NS), max_points),
            csv: (csv_ns > ANALYSIS_INTERVAL_NS).then(|| Series::new(csv_ns, max_points)),
            observe_at: {
                let mut v: Vec<(SimTime, SnapshotKind)> = observe_at
                    .into_iter()
                    .map(|t| (t, SnapshotKind::Observation))
                    .chain(
                        (1..=MINUTE_MARKS)
                            .map(|m| (SimTime::from_ns(m * 60 * NS_PER_S), SnapshotKind::Minute)),
                    )
                    .collect();
                v.sort();
                v
            },
            next_obs: 0,
            next_due: SimTime::ZERO,
            observations: Vec::new(),
            minutes: Vec::new(),
            latency: Latencies::default(),
            steady_latency: Latencies::default(),
            output_dist: Distribution::plain(),
            prompt_dist: Distribution::plain(),
            overhead: Overhead::default(),
            engine_latency: None,
            decode_round_ns: Vec::new(),
        };
        r.refresh_due();
        r
    }

    /// Time the inter-token gaps, or not (by default they are timed).
    pub fn set_token_gaps(&mut self, gaps: TokenGaps) {
        self.token_gaps = gaps;
    }

    /// Whether the inter-token gaps are timed: untimed, the calls that hand them over
    /// ([`Recorder::on_tokens`], [`Recorder::on_decode_run`], [`Recorder::on_decode_steps`],
    /// [`Recorder::on_abandoned_await`]) may be left out, and do nothing if made.
    #[inline]
    pub fn times_token_gaps(&self) -> bool {
        self.token_gaps == TokenGaps::Timed
    }

    /// The off-GPU overheads: latencies are then recorded as the client sees them, and as the
    /// engine sees them apart.
    pub fn set_overhead(&mut self, overhead: Overhead) {
        self.overhead = overhead;
        self.engine_latency = (!overhead.is_zero()).then(EngineLatencies::default);
    }

    /// A decode round (every running request got a token) was processed at `now`.
    pub fn on_decode_round(&mut self, now: SimTime) {
        self.decode_round_ns.push(now.as_ns());
    }

    /// Keep a record of every answered request.
    pub fn keep_requests(&mut self, on: bool) {
        self.keep_requests = on;
    }

    /// Hand every answered request to `sink` as it is answered (e.g. to stream a CSV).
    pub fn stream_requests(&mut self, sink: &'a mut dyn FnMut(&RequestRecord)) {
        self.request_sink = Some(sink);
    }

    /// Hand every engine log line to `sink` as it is printed (e.g. to stream `server.log`),
    /// instead of or besides keeping it.
    pub fn stream_log(&mut self, sink: &'a mut dyn FnMut(&LogRecord)) {
        self.log_sink = Some(sink);
    }

    fn record(&mut self, now: SimTime, r: &Request, completed: bool) {
        if !self.keep_requests && self.request_sink.is_none() {
            return;
        }
        let rec = RequestRecord {
            seq: r.seq,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.out_tokens,
            ready_ns: r.ready_at.as_ns(),
            sent_ns: r.sent_at.as_ns(),
            arrived_ns: r.arrived_at.as_ns(),
            admitted_ns: r.admitted_at.map(SimTime::as_ns),
            first_token_ns: r
                .first_token_at
                .map(|t| self.overhead.seen_at(t, 1).as_ns()),
            done_ns: now.as_ns(),
            retractions: r.evictions,
            cached_tokens: r.cached_tokens,
            completed,
        };
        if let Some(sink) = self.request_sink.as_mut() {
            sink(&rec);
        }
        if self.keep_requests {
            self.requests.push(rec);
        }
    }

    fn integrate_to(&mut self, t: SimTime) {
        let dt = u128::from((t - self.last_t).as_ns());
        if dt > 0 {
            self.int_running += dt * u128::from(self.state.running);
            self.int_queued += dt * u128::from(self.state.queued);
            self.int_kv += dt * u128::from(self.state.kv_used_tokens);
            self.int_in_flight += dt * u128::from(self.in_flight);
            if self.state.queued > 0 {
                self.int_queue_busy += dt;
            }
            self.last_t = t;
        }
    }

    /// The server state changed at `now` (call after every batch of same-time events).
    pub fn set_state(&mut self, now: SimTime, state: ServerState, in_flight: u64) {
        self.integrate_to(now);
        self.state = state;
        self.in_flight = in_flight;
    }

    /// The next instant at which a time-series point or an observation is due.
    pub fn next_snapshot_at(&self) -> SimTime {
        self.next_due
    }

    /// Recompute [`Recorder::next_snapshot_at`] after a point, an observation or a new
    /// observation time.
    fn refresh_due(&mut self) {
        let obs = self
            .observe_at
            .get(self.next_obs)
            .map_or(SimTime::MAX, |&(t, _)| t);
        self.next_due = obs.min(self.next_sample_at());
    }

    /// The next time-series point of either series.
    fn next_sample_at(&self) -> SimTime {
        let csv = self.csv.as_ref().map_or(SimTime::MAX, |c| c.next);
        self.series.next.min(csv)
    }

    /// Emit every time-series point and observation strictly before `t` (the next event time).
    #[inline]
    pub fn advance_to(&mut self, t: SimTime) {
        if t > self.next_due {
            self.emit_before(t);
        }
    }

    /// [`Recorder::advance_to`] when something is due before `t`.
    fn emit_before(&mut self, t: SimTime) {
        loop {
            let obs = self
                .observe_at
                .get(self.next_obs)
                .copied()
                .filter(|&(o, _)| o < t);
            let sample = Some(self.next_sample_at()).filter(|&s| s < t);
            match (obs, sample) {
                (Some((o, kind)), s) if s.is_none_or(|s| o <= s) => {
                    self.take_snapshot(o, kind);
                    self.next_obs += 1;
                }
                (_, Some(s)) => {
                    let snap = self.snapshot(s);
                    self.series.offer(s, &snap);
                    if let Some(c) = self.csv.as_mut() {
                        c.offer(s, &snap);
                    }
                }
                _ => break,
            }
        }
        self.refresh_due();
    }

    fn take_snapshot(&mut self, at: SimTime, kind: SnapshotKind) {
        let snap = self.snapshot(at);
        match kind {
            SnapshotKind::Observation => self.observations.push(snap),
            SnapshotKind::Minute => self.minutes.push(snap),
            SnapshotKind::StartUp => self.startup_sample = Some(snap),
        }
    }

    /// Pass the completions that left the window `(at − window, at]`; returns how many are in
    /// it (every recorded completion happened at or before `at`: points are emitted in order).
    fn prune_window(&mut self, at: SimTime) -> usize {
        let times = &mut self.window_completions;
        if let Some(cutoff) = at.as_ns().checked_sub(self.window.as_ns()) {
            // The times are non-decreasing: those out of the window come first.
            self.window_start +=
                times[self.window_start..].partition_point(|c| c.as_ns() <= cutoff);
            if self.window_start > times.len() / 2 {
                times.drain(..self.window_start);
                self.window_start = 0;
            }
        }
        times.len() - self.window_start
    }

    fn snapshot(&mut self, at: SimTime) -> Sample {
        let in_window = self.prune_window(at) as f64;
        let dt = u128::from(at.saturating_since(self.last_t).as_ns());
        let ns_to_s = |x: u128| u128_to_f64(x) / NS_PER_S as f64;
        let t_s = at.as_secs_f64();
        Sample {
            t_s,
            running: self.state.running,
            queued: self.state.queued,
            kv_used_tokens: self.state.kv_used_tokens,
            token_usage: self.state.kv_used_tokens as f64 / self.state.kv_capacity_tokens as f64,
            gen_tok_per_s: self.last_gen_tok_per_s,
            completed: self.completed,
            lifetime_req_per_s: if t_s > 0.0 {
                self.completed as f64 / t_s
            } else {
                0.0
            },
            // Before a whole window has passed, the window is the time so far.
            window_req_per_s: if t_s > 0.0 {
                in_window / self.window.as_secs_f64().min(t_s)
            } else {
                0.0
            },
            in_flight: self.in_flight,
            generated_tokens: self.generated_tokens,
            arrived: self.arrived.max(self.sent),
            backlog: self.in_flight + self.arrived.saturating_sub(self.sent),
            sum_e2e_s: ns_to_s(self.sum_e2e_ns),
            sum_e2e_sq_s2: u128_to_f64(self.sum_e2e_sq_ns2) / (NS_PER_S as f64 * NS_PER_S as f64),
            in_flight_integral_s: ns_to_s(self.int_in_flight + dt * u128::from(self.in_flight)),
            running_integral_s: ns_to_s(self.int_running + dt * u128::from(self.state.running)),
            queued_integral_s: ns_to_s(self.int_queued + dt * u128::from(self.state.queued)),
            kv_integral_token_s: ns_to_s(self.int_kv + dt * u128::from(self.state.kv_used_tokens)),
            queue_busy_s: ns_to_s(self.int_queue_busy + if self.state.queued > 0 { dt } else { 0 }),
            completed_output_tokens: self.output_tokens,
            completed_prompt_tokens: self.prompt_tokens,
            completed_cached_tokens: self.cached_tokens,
        }
    }

    /// A request was sent at `now`; `last`: the client has nothing left to send (the drain
    /// begins).
    pub fn on_send(&mut self, now: SimTime, last: bool) {
        self.sent += 1;
        self.last_send = Some(now);
        self.draining |= last;
        if let Some(until) = self.steady_until {
            self.sends_now = match self.sends_now {
                (t, n) if t == now => (t, n + 1),
                _ => (now, 1),
            };
            if now < until && self.steady_start.is_some() {
                self.part_open += 1;
            }
        }
    }

    /// Whether a request sent at `sent_at` is the steady window's.
    fn in_steady(&self, sent_at: SimTime) -> bool {
        self.steady_start.is_some_and(|s| sent_at >= s)
            && self.steady_until.is_none_or(|u| sent_at < u)
    }

    /// A request sent at `sent_at` was answered: one fewer of the part left
    /// ([`SteadyFrom::StartUpClearedUntil`]).
    fn answered(&mut self, sent_at: SimTime) {
        if self.steady_until.is_some() && self.in_steady(sent_at) {
            self.part_open -= 1;
        }
    }

    /// With [`SteadyFrom::StartUpClearedUntil`], the time is now past its end: no later token
    /// gap is the part's. Returns whether every request of the part has been answered (the run
    /// can stop).
    pub fn past_steady_until(&mut self) -> bool {
        self.draining = true;
        self.part_open == 0
    }

    /// An open-loop request arrived at the client (it is sent at once, or waits for a slot).
    pub fn on_arrival(&mut self) {
        self.arrived += 1;
    }

    /// A request of the start-up cohort was answered at `now` (or, at the first completion, the
    /// cohort is formed): when all but its stragglers are, the start-up has cleared.
    fn count_startup(&mut self, now: SimTime, seq: u64) {
        if self.first_completion.is_none() {
            // The first response: every request sent so far is the start-up; those refused so
            // far are answered.
            self.cohort.size = self.sent;
            self.cohort.answered = self.rejected;
        }
        if self.cohort.cleared_at.is_some() || seq >= self.cohort.size {
            return;
        }
        self.cohort.answered += 1;
        let size = self.cohort.size;
        let stragglers = (size as f64 * STARTUP_STRAGGLERS).floor() as u64;
        if self.cohort.answered + stragglers >= size {
            self.cohort.cleared_at = Some(now);
            self.steady_start = Some(now);
            // The requests sent at this instant before it are the part's too.
            if self.steady_until.is_some_and(|u| now < u) && self.sends_now.0 == now {
                self.part_open += self.sends_now.1;
            }
            // Snapshot the views at exactly this instant, after every event at it.
            let i = self.next_obs
                + self.observe_at[self.next_obs..]
                    .partition_point(|&o| o <= (now, SnapshotKind::StartUp));
            self.observe_at.insert(i, (now, SnapshotKind::StartUp));
            self.refresh_due();
        }
    }

    /// Output tokens were generated.
    pub fn on_generated(&mut self, tokens: u64) {
        self.generated_tokens += tokens;
    }

    /// A request that got a token at `at` outside a decode step was evicted (see
    /// [`crate::scheduler::Outbox::evicted`]), or finished with that token, before a decode
    /// step gave it the next: stop waiting for that next one. Nothing happens if a decode step
    /// has already timed it.
    pub fn on_abandoned_await(&mut self, at: SimTime) {
        if !self.times_token_gaps() {
            return;
        }
        if let Some(i) = (self.awaiting_next.iter()).position(|w| w.0 == at && w.1 > 0) {
            self.awaiting_next[i].1 -= 1;
            if self.awaiting_next[i].1 == 0 {
                self.awaiting_next.remove(i);
            }
        }
    }

    /// A request's full response reached the client at `now`. Its first token reached the
    /// client one token's way after the engine produced it.
    pub fn on_completion(&mut self, now: SimTime, r: &Request) {
        // If its last token came outside a decode step — its first, or the one after an
        // eviction (the re-prefill's) — it awaits no next one. A decode step since would have
        // timed every token awaiting then: a wait still held at that token's time is its own.
        if let Some(at) = r.outside_token_at {
            self.on_abandoned_await(at);
        }
        if self.keep_requests || self.request_sink.is_some() {
            self.record(now, r, true);
        }
        // Once the start-up has cleared there is nothing left to count.
        if self.cohort.cleared_at.is_none() {
            self.count_startup(now, r.seq);
        }
        self.completed += 1;
        self.first_completion.get_or_insert(now);
        // (Those that left the window go at the next snapshot, which counts the others.)
        self.window_completions.push(now);
        let e2e = now - r.sent_at;
        self.sum_e2e_ns += u128::from(e2e.as_ns());
        self.output_tokens += u64::from(r.out_tokens);
        self.prompt_tokens += u64::from(r.prompt_tokens);
        self.cached_tokens += u64::from(r.cached_tokens);
        self.output_dist.add_int(u64::from(r.out_tokens));
        self.prompt_dist.add_int(u64::from(r.prompt_tokens));
        let e2e_ns = u128::from(e2e.as_ns());
        self.sum_e2e_sq_ns2 += e2e_ns * e2e_ns;
        let first = r
            .first_token_at
            .expect("invariant: a completed request has a first token");
        if let Some(engine) = self.engine_latency.as_mut() {
            let done = now.as_ns() - self.overhead.to_client(r.out_tokens).as_ns();
            engine.ttft_ms.add_int((first - r.arrived_at).as_ns());
            engine.e2e_ms.add_int(done - r.arrived_at.as_ns());
        }
        // The client sees the first token one token's way after the engine produced it.
        let first = self.overhead.seen_at(first, 1);
        let admitted = r
            .admitted_at
            .expect("invariant: a completed request was admitted");
        let steady = self.in_steady(r.sent_at);
        self.answered(r.sent_at);
        let (whole, steady) = (
            &mut self.latency,
            steady.then_some(&mut self.steady_latency),
        );
        record_latencies(whole, steady, r, first, admitted, e2e);
    }

    /// The server refused or aborted a request.
    pub fn on_rejection(&mut self, now: SimTime, r: &Request) {
        self.record(now, r, false);
        self.answered(r.sent_at);
        if self.first_completion.is_some() {
            self.count_startup(now, r.seq);
        }
        self.rejected += 1;
    }

    /// The engine printed a log line. Its periodic statistics lines carry the server's view.
    pub fn on_log(&mut self, rec: &LogRecord) {
        if let LogRecord::Stats(s) | LogRecord::Interval(IntervalStats { sample: s, .. }) = rec {
            self.decode_lines += 1;
            self.sum_gen_tok_per_s += s.gen_tok_per_s;
            self.last_gen_tok_per_s = s.gen_tok_per_s;
            let since = s.at.saturating_since(self.last_decode_line_at);
            self.decode_tokens_logged += round_to_u64(s.gen_tok_per_s * since.as_secs_f64());
            self.last_decode_line_at = s.at;
        }
        if let Some(sink) = self.log_sink.as_mut() {
            sink(rec);
        }
        if self.keep_log {
            self.log.push(rec.clone());
        }
    }

    /// The run ended at `end`: emit the remaining points and build the result, for an engine
    /// spoken of in `words`.
    pub fn finish(
        mut self,
        end: SimTime,
        stop: StopReason,
        counters: SchedulerCounters,
        words: Words,
    ) -> RunResult {
        // Points up to and including `end`.
        self.advance_to(SimTime::from_ns(end.as_ns().saturating_add(1)));
        self.integrate_to(end);
        // The last point is the end of the run: taken before the snapshots after the end, which
        // move the client's window past the last completions.
        let snap = self.snapshot(end);
        self.series.close(end, || snap.clone());
        if let Some(c) = self.csv.as_mut() {
            c.close(end, || snap);
        }
        // Observations after the end see the idle system.
        while self.next_obs < self.observe_at.len() {
            let (o, kind) = self.observe_at[self.next_obs];
            self.take_snapshot(o, kind);
            self.next_obs += 1;
        }
        let end_s = end.as_secs_f64();
        let avg = |x: u128| {
            if end.as_ns() == 0 {
                0.0
            } else {
                x as f64 / end.as_ns() as f64
            }
        };
        // Counts held back go into the histograms; the whole run's distributions take the
        // values recorded in the steady window's only.
        self.latency.flush();
        self.steady_latency.flush();
        self.output_dist.flush();
        self.prompt_dist.flush();
        if let Some(e) = self.engine_latency.as_mut() {
            e.ttft_ms.flush();
            e.e2e_ms.flush();
        }
        self.latency.merge(&self.steady_latency);
        let cap = self.state.kv_capacity_tokens as f64;
        let lines_until_s = self.last_decode_line_at.as_secs_f64();
        RunResult {
            kv_capacity_tokens: self.state.kv_capacity_tokens,
            totals: Totals {
                requests_sent: self.sent,
                requests_completed: self.completed,
                requests_rejected: self.rejected,
                output_tokens: self.output_tokens,
                generated_tokens: self.generated_tokens,
                prompt_tokens: self.prompt_tokens,
                sim_duration_s: end_s,
                retractions: counters.evictions,
                retraction_events: counters.eviction_events,
                prefill_batches: counters.prefill_batches,
                decode_steps: counters.decode_steps,
            },
            time_avg: TimeAverages {
                running: avg(self.int_running),
                queued: avg(self.int_queued),
                kv_used_tokens: avg(self.int_kv),
                token_usage: avg(self.int_kv) / cap,
                in_flight: avg(self.int_in_flight),
            },
            decode_log: DecodeLogStats {
                lines: self.decode_lines,
                gen_tok_per_s_mean_of_lines: if self.decode_lines > 0 {
                    self.sum_gen_tok_per_s / self.decode_lines as f64
                } else {
                    0.0
                },
                gen_tok_per_s_time_weighted: if lines_until_s > 0.0 {
                    self.decode_tokens_logged as f64 / lines_until_s
                } else {
                    0.0
                },
            },
            sample_interval_s: self.series.interval.as_secs_f64(),
            samples: self.series.samples,
            csv_samples: self.csv.map(|c| c.samples),
            observations: self.observations,
            first_minutes: self.minutes,
            latency: self.latency,
            steady_latency: self.steady_latency,
            steady_from_s: self.steady_start.map(SimTime::as_secs_f64),
            startup: StartUp {
                cohort: self.cohort.size,
                cleared_at_s: self.cohort.cleared_at.map(SimTime::as_secs_f64),
                sample: self.startup_sample,
            },
            output_tokens: self.output_dist,
            prompt_tokens: self.prompt_dist,
            first_completion_s: self.first_completion.map(SimTime::as_secs_f64),
            last_send_s: self.last_send.map(SimTime::as_secs_f64),
            stop,
            counters,
            log: self.log,
            window_s: self.window.as_secs_f64(),
            requests: self.requests,
            engine_latency: self.engine_latency,
            decode_round_ns: self.decode_round_ns,
            // Configuration facts, filled in by the simulator.
            max_running_requests: 0,
            client_concurrency: None,
            open_loop: false,
            words,
        }
    }
}

/// `x as f64`, converting 64 bits when `x` fits (the same nearest double of the same integer):
/// LLVM otherwise calls the 128-bit conversion routine, even on both paths of a branch,
/// unless it is out of line.
fn u128_to_f64(x: u128) -> f64 {
    #[cold]
    #[inline(never)]
    fn wide(x: u128) -> f64 {
        x as f64
    }
    match u64::try_from(x) {
        Ok(x) => x as f64,
        Err(_) => wide(x),
    }
}

/// Record a completed request's latencies as the client sees them (`first`: when its first
/// token reached the client, `admitted`: its first admission, `e2e`: sent to last token
/// received); its queueing time counts from reaching the engine's queue to admission.
///
/// Each value goes into one distribution: the steady window's if the request is in it
/// (`steady`), else the whole run's, which takes the steady window's values at the end
/// ([`Recorder::finish`]: its counts and exact sums, so the whole run's mean is that of every
/// value).
fn record_latencies(
    whole: &mut Latencies,
    steady: Option<&mut Latencies>,
    r: &Request,
    first: SimTime,
    admitted: SimTime,
    e2e: SimDuration,
) {
    let ttft = first - r.sent_at;
    let tpot = (r.out_tokens > 1)
        .then(|| Fraction::quotient(e2e.as_ns() - ttft.as_ns(), r.out_tokens - 1));
    let queue = (admitted - r.arrived_at).as_ns();
    let client_wait = (r.sent_at - r.ready_at).as_ns();
    let Some(lat) = steady else {
        whole.ttft_ms.add_int(ttft.as_ns());
        whole.e2e_ms.add_int(e2e.as_ns());
        if let Some(tpot) = tpot {
            whole.tpot_ms.add_fraction(tpot);
        }
        whole.queue_ms.add_int_mostly_zero(queue);
        whole.client_wait_ms.add_int_mostly_zero(client_wait);
        return;
    };
    lat.ttft_ms.add_int(ttft.as_ns());
    lat.e2e_ms.add_int(e2e.as_ns());
    if let Some(tpot) = tpot {
        lat.tpot_ms.add_fraction(tpot);
    }
    lat.queue_ms.add_int_mostly_zero(queue);
    lat.client_wait_ms.add_int_mostly_zero(client_wait);
}

impl Latencies {
    /// Put the values held back ([`Distribution::flush`]) into the histograms.
    fn flush(&mut self) {
        for d in [
            &mut self.ttft_ms,
            &mut self.tpot_ms,
            &mut self.e2e_ms,
            &mut self.queue_ms,
            &mut self.client_wait_ms,
            &mut self.itl_ms,
        ] {
            d.flush();
        }
    }

    /// Take the values of `steady`, recorded there rather than here (see
    /// [`record_latencies`]).
    fn merge(&mut self, steady: &Latencies) {
        self.ttft_ms.merge(&steady.ttft_ms);
        self.tpot_ms.merge(&steady.tpot_ms);
        self.e2e_ms.merge(&steady.e2e_ms);
        self.queue_ms.merge(&steady.queue_ms);
        self.client_wait_ms.merge(&steady.client_wait_ms);
        self.itl_ms.merge(&steady.itl_ms);
    }
}
