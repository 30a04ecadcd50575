//! What a run measured: the recorder the simulator feeds, and the plain-data result it yields.

pub mod latency;
pub mod recorder;

use serde::Serialize;

pub use latency::Distribution;
pub use recorder::Recorder;

use crate::scheduler::{LogRecord, SchedulerCounters, Words};
use crate::time::SimTime;

/// The state of the three views at one instant (a time-series point or an observation).
///
/// A point at `t` reflects every event at times ≤ `t`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    /// Simulated seconds since the start.
    pub t_s: f64,
    /// Server: requests admitted and not finished (decode batch + prefilling).
    pub running: u64,
    /// Server: requests in the waiting queue.
    pub queued: u64,
    /// Server: KV slots in use (`#token`).
    pub kv_used_tokens: u64,
    /// Server: `#token / max_total_num_tokens`.
    pub token_usage: f64,
    /// Server: `gen throughput (token/s)` of the latest Decode log line (0 before the first).
    pub gen_tok_per_s: f64,
    /// Client: responses received so far.
    pub completed: u64,
    /// Client: `completed / t` — the lifetime average a progress bar shows.
    pub lifetime_req_per_s: f64,
    /// Client: responses in `(t − window, t]` divided by the window (by `t` before a whole
    /// window has passed).
    pub window_req_per_s: f64,
    /// Client: requests sent and not answered.
    pub in_flight: u64,
    /// Output tokens generated so far (all requests, finished or not).
    pub generated_tokens: u64,
    /// Client: requests it had to send so far — open loop: arrived (sent, or waiting for a
    /// concurrency slot); closed loop: sent.
    pub arrived: u64,
    /// Client: requests it had and has no answer for — in flight, or (open loop with a
    /// concurrency cap) waiting for a slot.
    pub backlog: u64,
    /// Σ end-to-end latency of the completed requests, seconds (for Little's law).
    pub sum_e2e_s: f64,
    /// Σ end-to-end latency² of the completed requests, s² (for the correlation time of the
    /// completions: `Σe² / Σe`, the mean time in system weighted by time in system).
    pub sum_e2e_sq_s2: f64,
    /// ∫ in_flight dt so far, request-seconds (for Little's law).
    pub in_flight_integral_s: f64,
    /// ∫ running dt so far, request-seconds.
    pub running_integral_s: f64,
    /// ∫ queued dt so far, request-seconds.
    pub queued_integral_s: f64,
    /// ∫ kv_used_tokens dt so far, token-seconds.
    pub kv_integral_token_s: f64,
    /// Time so far during which the server's waiting queue was not empty, seconds.
    pub queue_busy_s: f64,
    /// Output tokens of the requests completed so far.
    pub completed_output_tokens: u64,
    /// Prompt tokens of the requests completed so far.
    pub completed_prompt_tokens: u64,
    /// Of them, those their requests found in the prefix cache at their first admission.
    pub completed_cached_tokens: u64,
}

/// One answered request, with exact integer times (kept only when asked for).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestRecord {
    /// Send order, from 0.
    pub seq: u64,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens generated.
    pub output_tokens: u32,
    /// Ready to send (ns).
    pub ready_ns: u64,
    /// Sent (ns).
    pub sent_ns: u64,
    /// Reached the engine's queue (ns): `sent_ns` without off-GPU overheads.
    pub arrived_ns: u64,
    /// First admitted (ns); `None` if refused.
    pub admitted_ns: Option<u64>,
    /// First token received by the client (ns); `None` if refused.
    pub first_token_ns: Option<u64>,
    /// Response complete at the client (ns).
    pub done_ns: u64,
    /// Times retracted.
    pub retractions: u32,
    /// Prompt tokens found in the prefix cache at its first admission.
    pub cached_tokens: u32,
    /// False if the server refused or aborted it.
    pub completed: bool,
}

/// Why the run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every request was answered.
    AllAnswered,
    /// `run.max_sim_s` was reached with requests outstanding.
    MaxSimTime,
}

/// Latency distributions of the completed requests (recorded in nanoseconds, reported in
/// milliseconds).
#[derive(Clone, Debug)]
pub struct Latencies {
    /// First token − sent.
    pub ttft_ms: Distribution,
    /// (E2E − TTFT) / (output tokens − 1), for requests with more than one output token.
    pub tpot_ms: Distribution,
    /// Last token − sent.
    pub e2e_ms: Distribution,
    /// First admission − arrival at the server.
    pub queue_ms: Distribution,
    /// Sent − ready (waiting for a client concurrency slot).
    pub client_wait_ms: Distribution,
    /// Inter-token latency as `sglang.bench_serving` and `vllm bench serve` define it: every gap
    /// between two successive output tokens of a request, pooled over all requests (the first
    /// token's wait is TTFT, not a gap).
    pub itl_ms: Distribution,
}

impl Latencies {
    /// Take away `part`, the latencies of some of the requests and token gaps recorded here
    /// (see [`SteadyFrom::StartUpClearedUntil`]): what is left is exactly the others'.
    pub fn subtract(&mut self, part: &Latencies) {
        self.ttft_ms.subtract(&part.ttft_ms);
        self.tpot_ms.subtract(&part.tpot_ms);
        self.e2e_ms.subtract(&part.e2e_ms);
        self.queue_ms.subtract(&part.queue_ms);
        self.client_wait_ms.subtract(&part.client_wait_ms);
        self.itl_ms.subtract(&part.itl_ms);
    }
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            ttft_ms: Distribution::nanos_as_ms(),
            tpot_ms: Distribution::nanos_as_ms(),
            e2e_ms: Distribution::nanos_as_ms(),
            queue_ms: Distribution::nanos_as_ms(),
            client_wait_ms: Distribution::nanos_as_ms(),
            itl_ms: Distribution::nanos_as_ms(),
        }
    }
}

/// Latencies as the engine sees them, from the request reaching its queue to its first and
/// last token leaving it: recorded only when off-GPU overheads make them differ from the
/// client's.
#[derive(Clone, Debug)]
pub struct EngineLatencies {
    /// First token − reached the queue.
    pub ttft_ms: Distribution,
    /// Last token − reached the queue.
    pub e2e_ms: Distribution,
}

impl Default for EngineLatencies {
    fn default() -> Self {
        EngineLatencies {
            ttft_ms: Distribution::nanos_as_ms(),
            e2e_ms: Distribution::nanos_as_ms(),
        }
    }
}

/// Totals over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Requests the client sent.
    pub requests_sent: u64,
    /// Requests answered with their full output.
    pub requests_completed: u64,
    /// Requests the server refused (prompt too long) or aborted.
    pub requests_rejected: u64,
    /// Output tokens of the completed requests.
    pub output_tokens: u64,
    /// Output tokens generated in all (including requests unfinished at a `max_sim_s` stop).
    pub generated_tokens: u64,
    /// Prompt tokens of the completed requests.
    pub prompt_tokens: u64,
    /// When the run ended (last response, or `max_sim_s`).
    pub sim_duration_s: f64,
    /// Retracted requests (counting repeats).
    pub retractions: u64,
    /// Decode steps that retracted.
    pub retraction_events: u64,
    /// Prefill batches.
    pub prefill_batches: u64,
    /// Decode steps.
    pub decode_steps: u64,
}

/// Time averages of the server state over the whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeAverages {
    /// Mean requests running.
    pub running: f64,
    /// Mean requests queued.
    pub queued: f64,
    /// Mean KV slots in use.
    pub kv_used_tokens: f64,
    /// Mean token usage.
    pub token_usage: f64,
    /// Mean requests in flight (client view).
    pub in_flight: f64,
}

/// The Decode log lines' throughput figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DecodeLogStats {
    /// Decode lines printed.
    pub lines: u64,
    /// Plain mean of their `gen throughput` values: each line counts once, however long a
    /// stretch it covers (what averaging the log's column gives).
    pub gen_tok_per_s_mean_of_lines: f64,
    /// The lines' values weighted by the time each covers: decode tokens ÷ the time from the
    /// start to the last Decode line — the server's mean gen throughput.
    pub gen_tok_per_s_time_weighted: f64,
}

/// The start-up: the requests sent before the first response came back, and when (almost) all
/// of them had been answered. Until then the batch holds requests from the start, whose mix
/// (short ones finish first) is not yet the steady one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StartUp {
    /// Requests sent before the first completion (0 if nothing completed).
    pub cohort: u64,
    /// When all but 1 % of them (rounded down) had been answered.
    pub cleared_at_s: Option<f64>,
    /// The three views at that moment (a snapshot at exactly `cleared_at_s`).
    pub sample: Option<Sample>,
}

/// Which requests and tokens the steady-window latencies count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SteadyFrom {
    /// From the moment the start-up clears (known during the run).
    #[default]
    StartUpCleared,
    /// From the moment the start-up clears until this time only: the requests sent before it
    /// and the token gaps that end at or before it. The run stops as soon as they are all
    /// recorded, so only its `steady_latency` is meant to be read. A window found after a run
    /// to start at this time (MSER cut a further transient) has the run's steady latencies
    /// less these ([`Latencies::subtract`], `engine::record_steady_latencies`).
    StartUpClearedUntil(SimTime),
}

/// Whether a run times the gaps between successive tokens of a request (the ITL
/// distributions, [`Latencies::itl_ms`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenGaps {
    /// Every gap is timed.
    #[default]
    Timed,
    /// None is: both `itl_ms` stay empty, and nothing else changes. For callers that never read
    /// them (`plan`), which then skip the per-step bookkeeping of the gaps.
    Untimed,
}

/// Everything a run measured. Plain data: analysis and reports are pure functions of it.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// KV pool size.
    pub kv_capacity_tokens: u64,
    /// Totals.
    pub totals: Totals,
    /// Whole-run time averages.
    pub time_avg: TimeAverages,
    /// Decode-log figures.
    pub decode_log: DecodeLogStats,
    /// The time series (regularly spaced, plus a last point at the end of the run), at
    /// `run.timeseries_interval_s` or 1 s, whichever is finer.
    pub samples: Vec<Sample>,
    /// Spacing of the time series after any doubling.
    pub sample_interval_s: f64,
    /// The series at the scenario's `run.timeseries_interval_s` when it is coarser than the
    /// analysis's (at most 1 s before doubling): the rows of `timeseries.csv`.
    pub csv_samples: Option<Vec<Sample>>,
    /// One per `run.observe_at_s`.
    pub observations: Vec<Sample>,
    /// One per minute for the first 15 minutes (or until the run ends).
    pub first_minutes: Vec<Sample>,
    /// Latencies of every completed request and every token gap.
    pub latency: Latencies,
    /// Latencies in the steady window: the requests sent from `steady_from_s` on, and the token
    /// gaps that end after it and before the client's last send.
    pub steady_latency: Latencies,
    /// Where the steady-window latencies start (`None`: the start-up never cleared).
    pub steady_from_s: Option<f64>,
    /// The start-up.
    pub startup: StartUp,
    /// Output-token distribution of completed requests.
    pub output_tokens: Distribution,
    /// Prompt-token distribution of completed requests.
    pub prompt_tokens: Distribution,
    /// First response received.
    pub first_completion_s: Option<f64>,
    /// When the client sent its last request: after it, the run drains.
    pub last_send_s: Option<f64>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The scheduler's counters.
    pub counters: SchedulerCounters,
    /// The engine's log lines, when asked for.
    pub log: Vec<LogRecord>,
    /// The client window, seconds.
    pub window_s: f64,
    /// Every answered request in answer order, when asked for.
    pub requests: Vec<RequestRecord>,
    /// The engine's own latencies, when off-GPU overheads make them differ from the client's.
    pub engine_latency: Option<EngineLatencies>,
    /// When each decode round was processed (ns), when asked for: a running request gets one
    /// token at each.
    pub decode_round_ns: Vec<u64>,
    /// The scheduler's slot limit (`max_running_requests`).
    pub max_running_requests: u64,
    /// The client's concurrency limit, if any.
    pub client_concurrency: Option<u64>,
    /// How reports speak of the engine that ran.
    pub words: Words,
    /// Whether the client is an open loop (requests arrive on their own schedule).
    pub open_loop: bool,
}

impl RunResult {
    /// The time series at the scenario's `run.timeseries_interval_s` (after any doubling), and
    /// the last point of the run: the rows of `timeseries.csv`.
    pub fn output_samples(&self) -> &[Sample] {
        self.csv_samples.as_deref().unwrap_or(&self.samples)
    }

    /// Every sample up to the end of the run — the regular ones, the first minutes' and the
    /// observations — ordered by time, one per instant: what the run figures draw.
    pub fn timeline(&self) -> Vec<&Sample> {
        let last = self.samples.last().map(|s| s.t_s);
        let end_s = last.unwrap_or(0.0).max(self.totals.sim_duration_s);
        let extra = self.first_minutes.iter().chain(&self.observations);
        let all = self.samples.iter().chain(extra.filter(|s| s.t_s <= end_s));
        let mut pts: Vec<&Sample> = all.filter(|s| s.t_s.is_finite()).collect();
        pts.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        pts.dedup_by(|a, b| a.t_s == b.t_s);
        pts
    }

    /// The share of the completed requests' prompt tokens that their first admission found
    /// in the prefix cache, at each point of the [`timeline`](Self::timeline) where requests
    /// with prompt tokens have completed.
    pub fn cache_hits(&self) -> CacheHits {
        let (pts, mut hits) = (self.timeline(), CacheHits::default());
        let tokens = |s: &Sample| (s.completed_cached_tokens, s.completed_prompt_tokens);
        let share = |(c, p): (u64, u64)| (p > 0).then(|| c as f64 / p as f64);
        let mut from = 0;
        for s in &pts {
            let t0 = s.t_s - self.window_s;
            while pts.get(from + 1).is_some_and(|n| n.t_s <= t0) {
                from += 1;
            }
            // Before a whole window has passed: since the start, as `window_req_per_s`.
            let (c0, p0) = [(0, 0), tokens(pts[from])][usize::from(pts[from].t_s <= t0)];
            let (c, p) = tokens(s);
            hits.lifetime.extend(share((c, p)).map(|v| (s.t_s, v)));
            hits.window
                .extend(share((c - c0, p - p0)).map(|v| (s.t_s, v)));
        }
        hits
    }
}

/// What the prefix cache found over time, as `(t_s, fraction of prompt tokens)` points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheHits {
    /// Cached ÷ prompt tokens of every request completed by `t`.
    pub lifetime: Vec<(f64, f64)>,
    /// Cached ÷ prompt tokens of the requests completed in the last window, `(t − window_s,
    /// t]` (since the start before a whole window has passed).
    pub window: Vec<(f64, f64)>,
}
