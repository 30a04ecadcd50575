//! What a run measured: the recorder the simulator feeds, and the plain-data result it yields.

pub mod latency;
pub mod recorder;

use serde::Serialize;

pub use latency::Distribution;
pub use recorder::Recorder;

use crate::scheduler::{LogRecord, SchedulerCounters, Words};

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
    /// Σ end-to-end latency of the completed requests, seconds (for Little's law).
    pub sum_e2e_s: f64,
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
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            ttft_ms: Distribution::nanos_as_ms(),
            tpot_ms: Distribution::nanos_as_ms(),
            e2e_ms: Distribution::nanos_as_ms(),
            queue_ms: Distribution::nanos_as_ms(),
            client_wait_ms: Distribution::nanos_as_ms(),
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
    /// Mean of their `gen throughput` values.
    pub gen_tok_per_s_mean: f64,
    /// Decode tokens ÷ (time from the start to the last Decode line), the figure the lines'
    /// values average to when weighted by their windows.
    pub gen_tok_per_s_time_weighted: f64,
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
    /// The time series (regularly spaced, plus a last point at the end of the run).
    pub samples: Vec<Sample>,
    /// Spacing of the time series after any doubling.
    pub sample_interval_s: f64,
    /// One per `run.observe_at_s`.
    pub observations: Vec<Sample>,
    /// One per minute for the first 15 minutes (or until the run ends).
    pub first_minutes: Vec<Sample>,
    /// Latencies.
    pub latency: Latencies,
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
}
