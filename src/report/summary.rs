//! The summary JSON (the contract of `shared/spec/product.md`, plus more keys).

use serde::Serialize;

use crate::analysis::{Analysis, Binding, NoWindow, Overload, Regime, Replications};
use crate::metrics::latency::Stats;
use crate::metrics::{Latencies, RunResult, Sample, StopReason, Totals};
use crate::scenario::{ClientSpec, Scenario};
use crate::scheduler::sglang::settings::SglangSettings;
use crate::scheduler::vllm::settings::VllmSettings;
use crate::scheduler::{self, EngineSpec, PolicySpec, Words};

/// The summary of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// servesim's version.
    pub servesim_version: &'static str,
    /// Which scenario.
    pub scenario: ScenarioInfo,
    /// The KV pool (`max_total_num_tokens`).
    pub kv_capacity_tokens: u64,
    /// Where it came from (`given`, `derived from memory` or `num_gpu_blocks_override`).
    pub kv_capacity_source: &'static str,
    /// Engine settings that shape the result.
    pub engine: EngineInfo,
    /// The client.
    pub client: ClientInfo,
    /// The workload as sampled.
    pub workload: WorkloadInfo,
    /// Totals.
    pub totals: TotalsOut,
    /// The server's view over the whole run.
    pub server: ServerView,
    /// The steady state, or why there is none (its numbers are then null).
    pub steady_state: SteadyStateOut,
    /// The start-up: the requests sent before the first response and when they were answered.
    pub startup: StartUpOut,
    /// The client's lifetime view at the end of the run.
    pub lifetime: Lifetime,
    /// One per `run.observe_at_s`.
    pub observations: Vec<Observation>,
    /// The same views once a minute for the first 15 minutes: how they move while the batch
    /// fills.
    pub first_minutes: Vec<Observation>,
    /// Convergence of the lifetime average (null without a steady state).
    pub convergence: ConvergenceOut,
    /// What binds the batch, with the evidence.
    pub binding: Binding,
    /// When the first response arrived, seconds.
    pub first_completion_s: Option<f64>,
    /// When the client sent its last request (the drain starts), seconds.
    pub last_send_s: Option<f64>,
    /// Latency statistics over the whole run, milliseconds.
    pub latency: LatencyOut,
    /// The same in the steady window (null when there is none): the requests sent in it and the
    /// token gaps inside it.
    pub steady_latency: Option<SteadyLatencyOut>,
    /// Off-GPU time and the latencies at the engine (only when the scenario gives overheads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<OverheadOut>,
    /// For the roofline model: one decode step at the window's mean batch and KV (steady or
    /// overloaded; without a window, the whole run's), term by term.
    pub roofline_step: Option<RooflineStep>,
    /// The prefix cache, for a workload whose prompts share prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheOut>,
    /// What the model simplifies.
    pub simplifications: Vec<&'static str>,
    /// How reports speak of the engine (not serialised).
    #[serde(skip)]
    pub words: Words,
    /// The analysis behind the numbers, for the reports (not serialised: its numbers are
    /// above).
    #[serde(skip)]
    pub analysis: Analysis,
    /// With `run --replications N`: the steady rates of N runs under independent seeds and
    /// the t-interval across them (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replications: Option<Replications>,
}

/// `scenario`.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioInfo {
    /// Name.
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// Description.
    pub description: Option<String>,
}

/// `engine`: its kind, its own settings, its step-time model.
#[derive(Clone, Debug, Serialize)]
pub struct EngineInfo {
    /// `sglang` or `vllm`.
    pub kind: &'static str,
    /// The engine's own settings.
    #[serde(flatten)]
    pub settings: PolicyInfo,
    /// Step-time model.
    pub step_time: String,
    /// Where the step times come from: given, servesim's made-up defaults, the roofline, or a
    /// table of measured step times.
    pub step_time_source: &'static str,
}

/// An engine's own settings in `engine`.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum PolicyInfo {
    /// SGLang's settings that shape the result.
    Sglang(SglangInfo),
    /// vLLM's settings.
    Vllm(VllmSettings),
}

/// SGLang's settings in `engine`.
#[derive(Clone, Debug, Serialize)]
pub struct SglangInfo {
    /// Policy.
    pub schedule_policy: &'static str,
    /// Page size.
    pub page_size: u32,
    /// Slot limit after SGLang's cap.
    pub max_running_requests: u32,
    /// Chunk size, or -1.
    pub chunked_prefill_size: i64,
    /// Prefill token budget.
    pub max_prefill_tokens: u32,
    /// Decode steps between Decode log lines.
    pub decode_log_interval: u32,
}

impl EngineInfo {
    /// The engine section of a scenario's summary.
    pub fn new(e: &EngineSpec) -> Self {
        let settings = match &e.policy {
            PolicySpec::Sglang(s) => PolicyInfo::Sglang(SglangInfo::new(s)),
            PolicySpec::Vllm(s) => PolicyInfo::Vllm(s.clone()),
        };
        EngineInfo {
            kind: e.kind().as_str(),
            settings,
            step_time: e.step_time.describe(),
            step_time_source: e.step_time.source(),
        }
    }

    /// The waiting queue's order (vLLM's default policy is first come, first served).
    pub fn schedule_policy(&self) -> &'static str {
        match &self.settings {
            PolicyInfo::Sglang(s) => s.schedule_policy,
            PolicyInfo::Vllm(_) => "fcfs",
        }
    }

    /// What the server's statistics line averages over, e.g. "its last 40 decode steps".
    pub fn stats_window(&self) -> String {
        match &self.settings {
            PolicyInfo::Sglang(s) => format!("its last {} decode steps", s.decode_log_interval),
            PolicyInfo::Vllm(_) => "its logging interval".into(),
        }
    }
}

impl SglangInfo {
    fn new(s: &SglangSettings) -> Self {
        SglangInfo {
            schedule_policy: s.schedule_policy.as_str(),
            page_size: s.page_size,
            max_running_requests: s.max_running_requests,
            chunked_prefill_size: s.chunked_prefill_size.map_or(-1, i64::from),
            max_prefill_tokens: s.max_prefill_tokens,
            decode_log_interval: s.decode_log_interval,
        }
    }
}

/// `client`.
#[derive(Clone, Debug, Serialize)]
pub struct ClientInfo {
    /// `closed`, `poisson`, `gamma` or `trace`.
    pub mode: &'static str,
    /// Concurrency limit, if any.
    pub concurrency: Option<u32>,
    /// Open-loop rate.
    pub rate_per_s: Option<f64>,
    /// The windowed rate's window, seconds.
    pub window_s: f64,
}

/// `workload`.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadInfo {
    /// Requests planned.
    pub requests: u64,
    /// Prompt distribution.
    pub prompt_tokens: String,
    /// Output distribution.
    pub output_tokens: String,
    /// Mean prompt tokens of the completed requests.
    pub mean_prompt_tokens: f64,
    /// Mean output tokens of the completed requests.
    pub mean_output_tokens: f64,
    /// Output-token statistics of the completed requests.
    pub output_tokens_stats: Stats,
    /// `max_tokens` asked for (null when omitted).
    pub max_new_tokens: Option<u32>,
    /// `ignore_eos`.
    pub ignore_eos: bool,
}

/// `totals`.
#[derive(Clone, Debug, Serialize)]
pub struct TotalsOut {
    #[serde(flatten)]
    /// The totals.
    pub totals: Totals,
    /// Why the run stopped.
    pub stop_reason: StopReason,
}

/// `prefix_cache`: what the cache found at the requests' first admissions.
#[derive(Clone, Debug, Serialize)]
pub struct PrefixCacheOut {
    /// Whether the engine's prefix cache is on.
    pub enabled: bool,
    /// Requests admitted.
    pub requests: u64,
    /// Of them, those that found part of their prompt cached.
    pub hit_requests: u64,
    /// `hit_requests ÷ requests`.
    pub request_hit_rate: f64,
    /// Their prompt tokens.
    pub prompt_tokens: u64,
    /// Of them, those found cached: prefill work and new KV saved.
    pub cached_tokens: u64,
    /// `cached_tokens ÷ prompt_tokens`.
    pub token_hit_rate: f64,
    /// Tokens evicted from the cache to make room.
    pub evicted_tokens: u64,
}

/// `server`.
#[derive(Clone, Debug, Serialize)]
pub struct ServerView {
    /// Time-averaged running requests.
    pub mean_running: f64,
    /// Time-averaged queued requests.
    pub mean_queued: f64,
    /// Time-averaged token usage.
    pub mean_token_usage: f64,
    /// The Decode lines' `gen throughput`, each weighted by the time it covers: the decode
    /// tokens up to the last line over the time to it.
    pub gen_tok_per_s_mean: f64,
    /// The plain mean of the lines' values (each line counts once, however long it covers):
    /// what averaging the log's column gives, misleading when the lines cover unequal times.
    pub gen_tok_per_s_mean_of_lines: f64,
    /// Decode lines printed.
    pub decode_log_lines: u64,
}

/// `lifetime`.
#[derive(Clone, Debug, Serialize)]
pub struct Lifetime {
    /// Completed ÷ run duration.
    pub req_per_s: f64,
    /// `req_per_s × mean output tokens`: the case study's "effective tok/s".
    pub effective_tok_per_s: f64,
}

/// One observation row.
#[derive(Clone, Debug, Serialize)]
pub struct Observation {
    /// When.
    pub t_s: f64,
    /// Client lifetime rate.
    pub lifetime_req_per_s: f64,
    /// Client windowed rate.
    pub window_req_per_s: f64,
    /// Server `gen throughput` of the latest Decode line.
    pub gen_tok_per_s: f64,
    /// Server running.
    pub running: u64,
    /// Server queued.
    pub queued: u64,
    /// Server token usage.
    pub token_usage: f64,
    /// Responses so far.
    pub completed: u64,
    /// Lifetime rate × the run's mean output tokens (the dataset average, as the case study
    /// multiplied).
    pub effective_tok_per_s: f64,
    /// Output tokens generated so far (finished requests or not).
    pub generated_tokens: u64,
    /// Share of those tokens that belong to requests not finished yet.
    pub in_progress_token_share: f64,
    /// Mean output tokens of the responses completed so far (0 before the first).
    pub completed_mean_output_tokens: f64,
}

/// `roofline_step`.
#[derive(Clone, Debug, Serialize)]
pub struct RooflineStep {
    /// Running requests (the window's mean, steady or overloaded, else the whole run's; rounded).
    pub batch: u64,
    /// KV tokens attended (the same mean use, rounded).
    pub kv_tokens: u64,
    /// The terms.
    pub breakdown: crate::cost::roofline::Breakdown,
    /// `batch / step time`.
    pub gen_tok_per_s: f64,
}

/// `steady_state`: every key of the contract, null when the run has no steady state, with
/// `status` and `reason` saying why.
#[derive(Clone, Debug, Serialize)]
pub struct SteadyStateOut {
    /// `steady`, `overloaded` or `no_steady_window`.
    pub status: &'static str,
    /// Why there is no steady state, or what to keep in mind about it.
    pub reason: Option<String>,
    /// Whether the window is long enough to trust (false without a steady state).
    pub reliable: bool,
    /// Completions per second in the steady window.
    pub req_per_s: Option<f64>,
    /// 95 % confidence interval (overlapping batch means).
    pub req_per_s_ci95: Option<[f64; 2]>,
    /// Output tokens generated per second in the window.
    pub output_tok_per_s: Option<f64>,
    /// Start of the window (end of the start-up), seconds.
    pub start_s: Option<f64>,
    /// End of the window (start of the drain), seconds.
    pub end_s: Option<f64>,
    /// `L / W`.
    pub little_law_req_per_s: Option<f64>,
    /// `L`: time-averaged requests in flight.
    pub little_l_requests: Option<f64>,
    /// `W`: mean end-to-end seconds of the requests completed in the window.
    pub little_w_s: Option<f64>,
    /// `output_tok_per_s ÷ mean output tokens`.
    pub tokens_req_per_s: Option<f64>,
    /// Time-averaged running requests in the window.
    pub mean_running: Option<f64>,
    /// Time-averaged queued requests in the window.
    pub mean_queued: Option<f64>,
    /// Time-averaged token usage in the window.
    pub mean_token_usage: Option<f64>,
    /// Fraction of the window with requests in the server's queue.
    pub queue_busy_fraction: Option<f64>,
    /// Completions inside the window.
    pub completions: Option<u64>,
    /// The completions' correlation time `Σe²/Σe`, seconds: where the interval's batch length
    /// starts (it may double, `ci_batch_s`).
    pub correlation_s: Option<f64>,
    /// The interval's batch length, seconds.
    pub ci_batch_s: Option<f64>,
    /// The interval's degrees of freedom.
    pub ci_degrees_of_freedom: Option<u64>,
    /// An overloaded open loop: what arrives, what the server sustains, how the backlog grows.
    pub overload: Option<Overload>,
    /// Why no stretch of the run is steady.
    pub no_window: Option<NoWindow>,
}

impl SteadyStateOut {
    fn new(a: &Analysis) -> Self {
        let w = a.steady();
        let s = w.map(|w| &w.span);
        let i = w.and_then(|w| w.interval.as_ref());
        SteadyStateOut {
            status: match a.regime {
                Regime::Steady { .. } => "steady",
                Regime::Overloaded(_) => "overloaded",
                Regime::NoSteadyWindow(_) => "no_steady_window",
            },
            reason: a.reason(),
            reliable: matches!(a.regime, Regime::Steady { reliable: true, .. }),
            req_per_s: s.map(|s| s.req_per_s),
            req_per_s_ci95: i.map(|i| i.req_per_s_ci95),
            output_tok_per_s: s.map(|s| s.output_tok_per_s),
            start_s: s.map(|s| s.start_s),
            end_s: s.map(|s| s.end_s),
            little_law_req_per_s: s.map(|s| s.little_law_req_per_s),
            little_l_requests: s.map(|s| s.little_l_requests),
            little_w_s: s.map(|s| s.little_w_s),
            tokens_req_per_s: s.map(|s| s.tokens_req_per_s),
            mean_running: s.map(|s| s.mean_running),
            mean_queued: s.map(|s| s.mean_queued),
            mean_token_usage: s.map(|s| s.mean_token_usage),
            queue_busy_fraction: s.map(|s| s.queue_busy_fraction),
            completions: s.map(|s| s.completions),
            correlation_s: s.map(|s| s.correlation_s),
            ci_batch_s: i.map(|i| i.batch_s),
            ci_degrees_of_freedom: i.map(|i| i.degrees_of_freedom),
            overload: match &a.regime {
                Regime::Overloaded(o) => Some(o.clone()),
                _ => None,
            },
            no_window: match &a.regime {
                Regime::NoSteadyWindow(n) => Some(n.clone()),
                _ => None,
            },
        }
    }
}

/// `startup`.
#[derive(Clone, Debug, Serialize)]
pub struct StartUpOut {
    /// Requests sent before the first response.
    pub requests: u64,
    /// When all but 1 % of them had been answered, seconds.
    pub cleared_at_s: Option<f64>,
}

/// `convergence` (null numbers without a steady state).
#[derive(Clone, Debug, Serialize)]
pub struct ConvergenceOut {
    /// Measured on the time series, if it happened before the drain.
    pub lifetime_within_5pct_at_s: Option<f64>,
    /// `20 × |deficit|`.
    pub estimated_s: Option<f64>,
    /// The start-up deficit `d`, seconds (negative: the lifetime average runs ahead).
    pub deficit_s: Option<f64>,
}

/// `steady_latency`.
#[derive(Clone, Debug, Serialize)]
pub struct SteadyLatencyOut {
    /// Requests sent from this time on, and token gaps after it, count.
    pub from_s: f64,
    /// … and token gaps up to the client's last send (the drain is left out).
    pub until_s: Option<f64>,
    /// The statistics.
    #[serde(flatten)]
    pub latency: LatencyOut,
}

/// `latency`.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyOut {
    /// Time to first token.
    pub ttft_ms: Stats,
    /// Time per output token after the first, per request.
    pub tpot_ms: Stats,
    /// Inter-token latency: every gap between a request's successive tokens, pooled.
    pub itl_ms: Stats,
    /// End to end.
    pub e2e_ms: Stats,
    /// Waiting in the server's queue before first admission.
    pub queue_ms: Stats,
    /// Waiting for a client concurrency slot.
    pub client_wait_ms: Stats,
}

impl LatencyOut {
    /// The statistics of a set of distributions.
    pub fn new(l: &Latencies) -> Self {
        LatencyOut {
            ttft_ms: l.ttft_ms.stats(),
            tpot_ms: l.tpot_ms.stats(),
            itl_ms: l.itl_ms.stats(),
            e2e_ms: l.e2e_ms.stats(),
            queue_ms: l.queue_ms.stats(),
            client_wait_ms: l.client_wait_ms.stats(),
        }
    }
}

/// `overhead`: what the off-GPU time adds to the client's latencies, and the latencies at the
/// engine (from the request reaching its queue to its first and last token leaving it).
#[derive(Clone, Debug, Serialize)]
pub struct OverheadOut {
    /// `client.network_rtt_ms`.
    pub network_rtt_ms: f64,
    /// `client.request_overhead_ms`.
    pub request_overhead_ms: f64,
    /// `client.per_token_overhead_ms`.
    pub per_token_overhead_ms: f64,
    /// Added to every TTFT: round trip + request overhead + one token's streaming.
    pub ttft_added_ms: f64,
    /// Added to every TPOT and inter-token gap.
    pub tpot_added_ms: f64,
    /// Added to E2E, on average: round trip + request overhead + mean output × per token.
    pub e2e_added_ms_mean: f64,
    /// TTFT at the engine.
    pub engine_ttft_ms: Stats,
    /// E2E at the engine.
    pub engine_e2e_ms: Stats,
}

fn overhead(sc: &Scenario, r: &RunResult) -> Option<OverheadOut> {
    let o = &sc.overhead;
    let engine = r.engine_latency.as_ref()?;
    let per_token_ms = o.per_token.as_ms_f64();
    let fixed_ms = o.network_rtt.as_ms_f64() + o.request.as_ms_f64();
    Some(OverheadOut {
        network_rtt_ms: o.network_rtt.as_ms_f64(),
        request_overhead_ms: o.request.as_ms_f64(),
        per_token_overhead_ms: per_token_ms,
        ttft_added_ms: o.ttft_added().as_ms_f64(),
        tpot_added_ms: per_token_ms,
        e2e_added_ms_mean: fixed_ms + per_token_ms * r.output_tokens.mean(),
        engine_ttft_ms: engine.ttft_ms.stats(),
        engine_e2e_ms: engine.e2e_ms.stats(),
    })
}

fn observation(s: &Sample, mean_out: f64) -> Observation {
    Observation {
        t_s: s.t_s,
        lifetime_req_per_s: s.lifetime_req_per_s,
        window_req_per_s: s.window_req_per_s,
        gen_tok_per_s: s.gen_tok_per_s,
        running: s.running,
        queued: s.queued,
        token_usage: s.token_usage,
        completed: s.completed,
        effective_tok_per_s: s.lifetime_req_per_s * mean_out,
        generated_tokens: s.generated_tokens,
        in_progress_token_share: if s.generated_tokens > 0 {
            1.0 - s.completed_output_tokens as f64 / s.generated_tokens as f64
        } else {
            0.0
        },
        completed_mean_output_tokens: if s.completed > 0 {
            s.completed_output_tokens as f64 / s.completed as f64
        } else {
            0.0
        },
    }
}

/// Whether the run's prefix cache can hit: the workload shares prompt prefixes and the engine's
/// cache is on (SGLang's radix cache unless `disable_radix_cache`, vLLM's
/// `enable_prefix_caching`).
pub fn prefix_cache_can_hit(sc: &Scenario) -> bool {
    sc.workload.shares_prefixes()
        && match &sc.engine.policy {
            PolicySpec::Sglang(s) => !s.disable_radix_cache,
            PolicySpec::Vllm(v) => v.enable_prefix_caching,
        }
}

/// Build the summary.
pub fn summarize(sc: &Scenario, r: &RunResult, a: &Analysis) -> Summary {
    let mean_out = r.output_tokens.mean();
    let dur = r.totals.sim_duration_s;
    let lifetime = if dur > 0.0 {
        r.totals.requests_completed as f64 / dur
    } else {
        0.0
    };
    let e = &sc.engine;
    let (prompt_tokens, output_tokens) = sc.workload.describe();
    let (mode, rate) = match &sc.client {
        ClientSpec::Closed { .. } => ("closed", None),
        ClientSpec::Poisson { rate_per_s, .. } => ("poisson", Some(*rate_per_s)),
        ClientSpec::Gamma { rate_per_s, .. } => ("gamma", Some(*rate_per_s)),
        ClientSpec::Trace { .. } => ("trace", None),
    };
    Summary {
        servesim_version: env!("CARGO_PKG_VERSION"),
        scenario: ScenarioInfo {
            name: sc.name.clone(),
            seed: sc.seed,
            description: sc.description.clone(),
        },
        kv_capacity_tokens: r.kv_capacity_tokens,
        kv_capacity_source: sc.engine.kv_source.as_str(),
        engine: EngineInfo::new(e),
        client: ClientInfo {
            mode,
            concurrency: sc.client.concurrency(),
            rate_per_s: rate,
            window_s: r.window_s,
        },
        workload: WorkloadInfo {
            requests: sc.workload.requests,
            prompt_tokens,
            output_tokens,
            mean_prompt_tokens: r.prompt_tokens.mean(),
            mean_output_tokens: mean_out,
            output_tokens_stats: r.output_tokens.stats(),
            max_new_tokens: sc.workload.max_new_tokens,
            ignore_eos: sc.workload.ignore_eos,
        },
        totals: TotalsOut {
            totals: r.totals.clone(),
            stop_reason: r.stop,
        },
        server: ServerView {
            mean_running: r.time_avg.running,
            mean_queued: r.time_avg.queued,
            mean_token_usage: r.time_avg.token_usage,
            gen_tok_per_s_mean: r.decode_log.gen_tok_per_s_time_weighted,
            gen_tok_per_s_mean_of_lines: r.decode_log.gen_tok_per_s_mean_of_lines,
            decode_log_lines: r.decode_log.lines,
        },
        steady_state: SteadyStateOut::new(a),
        startup: StartUpOut {
            requests: r.startup.cohort,
            cleared_at_s: r.startup.cleared_at_s,
        },
        lifetime: Lifetime {
            req_per_s: lifetime,
            effective_tok_per_s: lifetime * mean_out,
        },
        observations: r
            .observations
            .iter()
            .map(|o| observation(o, mean_out))
            .collect(),
        first_minutes: r
            .first_minutes
            .iter()
            .filter(|o| o.t_s <= dur)
            .map(|o| observation(o, mean_out))
            .collect(),
        convergence: ConvergenceOut {
            lifetime_within_5pct_at_s: a
                .convergence
                .as_ref()
                .and_then(|c| c.lifetime_within_5pct_at_s),
            estimated_s: a.convergence.as_ref().map(|c| c.estimated_s),
            deficit_s: a.convergence.as_ref().map(|c| c.deficit_s),
        },
        binding: a.binding.clone(),
        first_completion_s: r.first_completion_s,
        last_send_s: r.last_send_s,
        latency: LatencyOut::new(&r.latency),
        steady_latency: a
            .steady()
            .and(r.steady_from_s)
            .map(|from_s| SteadyLatencyOut {
                from_s,
                until_s: (r.stop == StopReason::AllAnswered)
                    .then_some(r.last_send_s)
                    .flatten(),
                latency: LatencyOut::new(&r.steady_latency),
            }),
        prefix_cache: sc.workload.shares_prefixes().then(|| {
            let c = &r.counters;
            let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            PrefixCacheOut {
                enabled: prefix_cache_can_hit(sc),
                requests: c.first_admissions,
                hit_requests: c.cache_hit_requests,
                request_hit_rate: ratio(c.cache_hit_requests, c.first_admissions),
                prompt_tokens: c.first_admission_prompt_tokens,
                cached_tokens: c.cached_prompt_tokens,
                token_hit_rate: ratio(c.cached_prompt_tokens, c.first_admission_prompt_tokens),
                evicted_tokens: c.cache_evicted_tokens,
            }
        }),
        overhead: overhead(sc, r),
        simplifications: scheduler::simplifications(e.kind())
            .iter()
            .map(|&x| match x {
                scheduler::NO_OFF_GPU_TIME if !sc.overhead.is_zero() => {
                    scheduler::FIXED_OFF_GPU_TIME
                }
                x => scheduler::for_prefixes(e.kind(), x, sc.workload.shares_prefixes()),
            })
            .collect(),
        words: scheduler::words(e.kind()),
        analysis: a.clone(),
        replications: None,
        roofline_step: match &sc.engine.step_time {
            crate::scenario::StepTimeSpec::Roofline(model) => {
                // The window's mean batch (steady or overloaded), else the whole run's.
                let (running, usage) = a
                    .window
                    .as_ref()
                    .map_or((r.time_avg.running, r.time_avg.token_usage), |w| {
                        (w.span.mean_running, w.span.mean_token_usage)
                    });
                let batch = running.round().max(1.0) as u64;
                let kv_tokens = (usage * r.kv_capacity_tokens as f64).round() as u64;
                let breakdown = model.decode_breakdown(batch, kv_tokens);
                Some(RooflineStep {
                    batch,
                    kv_tokens,
                    breakdown,
                    gen_tok_per_s: batch as f64 / breakdown.total_s,
                })
            }
            _ => None,
        },
    }
}

/// The summary as pretty JSON with a trailing newline.
pub fn to_json(s: &Summary) -> String {
    let mut out = serde_json::to_string_pretty(s).expect("invariant: the summary serialises");
    out.push('\n');
    out
}
