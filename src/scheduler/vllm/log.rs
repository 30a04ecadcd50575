//! vLLM's log lines (0.33.0), rendered from engine-neutral records: the stats line of
//! `v1/metrics/loggers.py: LoggingStatLogger.log` every `VLLM_LOG_STATS_INTERVAL` = 10 s
//! (`envs.py`), and the start-up line of `v1/core/kv_cache_utils.py: update_kv_cache_capacity`.
//! Each carries vLLM's prefix (`logger.py: _FORMAT`): `(process pid=N) LEVEL MM-DD HH:MM:SS
//! [file:line] `.

use crate::scheduler::{IntervalStats, KvCacheLine, LogRecord, ServerSample, StepKind, Words};
use crate::time::{SimDuration, SimTime, NS_PER_S};

/// How reports speak of vLLM.
pub const WORDS: Words = Words {
    engine: "vLLM",
    eviction: "preemption",
    evictions: "preemptions",
    evicted: "preempted",
    evicts: "preempts",
    latest_stats_line: "vLLM's last stats line",
    stats_line_in_figure: "vLLM's latest stats line, every 10 s",
    stats_lines: "stats lines",
    kv_usage: "KV cache usage",
    kv_usage_column: "KV",
    kv_usage_axis: "GPU KV cache usage (fraction)",
    kv_usage_source: "vLLM's GPU KV cache usage: blocks in use / usable blocks",
    gen_throughput: "generation throughput",
    running_at_server: "running at the server (vLLM's RUNNING: decoding or prefilling)",
    prefill_step: "step without decodes",
    prefill_steps: "steps without decodes",
    decode_step: "step with decodes",
    decode_steps: "steps with decodes",
    bench_client: "vllm bench serve",
    bench_client_in_figure: "vllm bench serve",
    slot_limit_key: "max_num_seqs",
    memory_fraction: "gpu_memory_utilization",
    memory_fraction_sweep: "engine.gpu_memory_utilization=0.85:0.95:0.01",
    prefix_cache_sweep: "engine.enable_prefix_caching=true,false",
    admission_rule: "(vLLM admits a waiting request only if the free blocks hold its whole known sequence, with scheduler_reserve_full_isl, and when a running request cannot get a block it preempts the newest running one, which later recomputes its prompt and outputs, less the blocks it finds still cached with prefix caching on.)",
};

/// The simplification about prefixes for a workload that declares none.
pub const NO_PREFIXES: &str = "no shared prompt prefixes: with prefix caching on, only a preempted request's own blocks not yet reused can hit (at its re-admission)";

/// What replaces [`NO_PREFIXES`] when the workload declares shared prefixes.
pub const WITH_PREFIXES: &str =
    "prompts share only their group's prefix (one per request; the rest of each prompt and every output unique)";

/// What this model of vLLM simplifies, printed with every report.
pub const SIMPLIFICATIONS: &[&str] = &[
    NO_PREFIXES,
    "FCFS policy, one full-attention KV group, no speculative decoding, no KV connectors",
    "scheduling and output processing take no time; with async scheduling the GPU runs the queued batches back to back",
    crate::scheduler::NO_OFF_GPU_TIME,
    "step times come from the scenario's step-time model, not from a GPU",
];

/// `VLLM_LOG_STATS_INTERVAL`.
pub(super) const INTERVAL: SimDuration = SimDuration::from_ns(10 * NS_PER_S);
/// The line of the stats logger's call in `v1/metrics/loggers.py` (0.33.0).
const LOGGERS_LINE: u32 = 335;
/// The line of the KV capacity call in `v1/core/kv_cache_utils.py` (0.33.0).
const KV_CACHE_UTILS_LINE: u32 = 1147;
/// The simulated processes' pid (the real one is the operating system's).
const PID: u32 = 1;

/// One record as vLLM prints it.
pub fn log_line(rec: &LogRecord) -> String {
    let w = rec.at().wall_clock();
    let (process, file, line) = match rec {
        LogRecord::KvCache(_) => ("EngineCore", "kv_cache_utils.py", KV_CACHE_UTILS_LINE),
        _ => ("APIServer", "loggers.py", LOGGERS_LINE),
    };
    format!(
        "({process} pid={PID}) INFO {:02}-{:02} {:02}:{:02}:{:02} [{file}:{line}] {}",
        w.month,
        w.day,
        w.hour,
        w.minute,
        w.second,
        message(rec)
    )
}

fn message(rec: &LogRecord) -> String {
    match rec {
        LogRecord::Interval(IntervalStats {
            sample: s,
            evictions,
            deferred,
            prefix_cache_hit_rate,
        }) => {
            let mut m = format!(
                "Engine 000: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, \
                 Running: {} reqs, Waiting: {} reqs",
                s.input_tok_per_s, s.gen_tok_per_s, s.running, s.queued
            );
            if *deferred > 0 {
                m += &format!(", Deferred: {deferred} reqs");
            }
            if *evictions > 0 {
                m += &format!(", Preemptions: {evictions}");
            }
            m += &format!(", GPU KV cache usage: {:.1}%", 100.0 * s.token_usage());
            if let Some(rate) = prefix_cache_hit_rate {
                m += &format!(", Prefix cache hit rate: {:.1}%", 100.0 * rate);
            }
            m
        }
        LogRecord::KvCache(k) => {
            let mut m = format!("GPU KV cache size: {} tokens", thousands(k.tokens));
            if let Some(len) = k.max_request_tokens {
                m += &format!(
                    ", Maximum concurrency for {} tokens per request: {:.2}x",
                    thousands(len),
                    k.max_concurrency
                );
            }
            m
        }
        // Records vLLM's model does not produce.
        LogRecord::Stats(_) | LogRecord::Batch(_) | LogRecord::Evict(_) => String::new(),
    }
}

/// Thousands separators, as Python's `f"{n:,}"`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The scheduler's state as the stats logger last saw it (`SchedulerStats`).
#[derive(Clone, Copy, Debug, Default)]
struct Snapshot {
    running: u64,
    waiting: u64,
    deferred: u64,
    kv_used_tokens: u64,
}

/// `LoggingStatLogger`: what it accumulates between lines and what it last saw.
#[derive(Debug)]
pub(super) struct StatsLog {
    kv_capacity_tokens: u64,
    block: u64,
    max_model_len: Option<u64>,
    prefix_caching: bool,
    startup_done: bool,
    next_at: SimTime,
    last_at: SimTime,
    prompt_tokens: u64,
    generation_tokens: u64,
    preemptions: u64,
    last_prompt_tp: f64,
    last_generation_tp: f64,
    seen: Snapshot,
    /// A prefix-cache lookup was reported (a request was admitted).
    looked_up: bool,
    /// Lookups of new requests since the last snapshot (`PrefixCacheStats`: requests,
    /// queries, hits), recorded only where the prefix cache is modelled.
    lookups: (u64, u64, u64),
    /// `CachingMetrics`: the recent snapshots' lookups and their sums.
    recent: std::collections::VecDeque<(u64, u64, u64)>,
    recent_sum: (u64, u64, u64),
}

/// `CachingMetrics(max_recent_requests=1000)`.
const RECENT_REQUESTS: u64 = 1000;

impl StatsLog {
    pub(super) fn new(
        kv_capacity_tokens: u64,
        block: u64,
        max_model_len: Option<u64>,
        prefix_caching: bool,
    ) -> Self {
        StatsLog {
            kv_capacity_tokens,
            block,
            max_model_len,
            prefix_caching,
            startup_done: false,
            next_at: SimTime::ZERO + INTERVAL,
            last_at: SimTime::ZERO,
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            last_prompt_tp: 0.0,
            last_generation_tp: 0.0,
            seen: Snapshot::default(),
            looked_up: false,
            lookups: (0, 0, 0),
            recent: std::collections::VecDeque::new(),
            recent_sum: (0, 0, 0),
        }
    }

    /// The start-up KV line, once: `num_blocks × block_size` tokens (the null block included),
    /// and `num_blocks / ⌈max_model_len / block_size⌉` requests of `max_model_len` tokens
    /// (`get_max_concurrency_for_kv_cache_config`).
    pub(super) fn startup(&mut self) -> Option<LogRecord> {
        if std::mem::replace(&mut self.startup_done, true) {
            return None;
        }
        let blocks = self.kv_capacity_tokens / self.block + 1;
        let concurrency = self
            .max_model_len
            .map_or(0.0, |len| blocks as f64 / len.div_ceil(self.block) as f64);
        Some(LogRecord::KvCache(KvCacheLine {
            at: SimTime::ZERO,
            tokens: match self.max_model_len {
                Some(len) => (concurrency * len as f64) as u64,
                None => blocks * self.block,
            },
            max_request_tokens: self.max_model_len,
            max_concurrency: concurrency,
        }))
    }

    /// Outputs reached the front end: `tokens` generated, the `prompt_tokens` of the requests
    /// whose first output is among them, and the preemptions that travel with them.
    pub(super) fn on_outputs(&mut self, tokens: u64, prompt_tokens: u64, preemptions: u64) {
        self.generation_tokens += tokens;
        self.prompt_tokens += prompt_tokens;
        self.preemptions += preemptions;
    }

    /// A prefix-cache lookup at an admission (`record_prefix_cache_stats`): `tokens` known,
    /// `hits` found; a request preempted before counts apart (not in the logged rate).
    pub(super) fn lookup(&mut self, tokens: u64, hits: u64, preempted: bool) {
        if !preempted {
            self.lookups.0 += 1;
            self.lookups.1 += tokens;
            self.lookups.2 += hits;
        }
    }

    /// The scheduler's state after an output was processed.
    pub(super) fn snapshot(&mut self, running: u64, waiting: u64, deferred: u64, kv_used: u64) {
        self.looked_up |= running > 0;
        // `make_stats` hands the lookups over; `CachingMetrics.observe` keeps those of the most
        // recent 1000 requests (the latest set whatever its size).
        let l = std::mem::take(&mut self.lookups);
        if l.0 > 0 {
            self.recent.push_back(l);
            self.recent_sum = (
                self.recent_sum.0 + l.0,
                self.recent_sum.1 + l.1,
                self.recent_sum.2 + l.2,
            );
            while self.recent.len() > 1 && self.recent_sum.0 > RECENT_REQUESTS {
                let o = self.recent.pop_front().expect("invariant: not empty");
                self.recent_sum = (
                    self.recent_sum.0 - o.0,
                    self.recent_sum.1 - o.1,
                    self.recent_sum.2 - o.2,
                );
            }
        }
        self.seen = Snapshot {
            running,
            waiting,
            deferred,
            kv_used_tokens: kv_used,
        };
    }

    /// A snapshot after an output saw requests running (the fast-forward's runs hand the
    /// logger only their last state).
    pub(super) fn saw_running(&mut self) {
        self.looked_up = true;
    }

    /// When the next line is due.
    pub(super) fn next_at(&self) -> SimTime {
        self.next_at
    }

    /// The line due at `now`, unless the engine is idle (`_update_stats`: no throughput in this
    /// interval or the last, logged at debug level only).
    pub(super) fn tick(&mut self, now: SimTime) -> Option<IntervalStats> {
        let dt = now.saturating_since(self.last_at).as_secs_f64();
        let per_s = |n: u64| if dt > 0.0 { n as f64 / dt } else { 0.0 };
        let (prompt_tp, generation_tp) = (per_s(self.prompt_tokens), per_s(self.generation_tokens));
        let idle = prompt_tp == 0.0
            && generation_tp == 0.0
            && self.last_prompt_tp == 0.0
            && self.last_generation_tp == 0.0;
        let preemptions = std::mem::take(&mut self.preemptions);
        self.prompt_tokens = 0;
        self.generation_tokens = 0;
        self.last_at = now;
        self.next_at = now + INTERVAL;
        self.last_prompt_tp = prompt_tp;
        self.last_generation_tp = generation_tp;
        if idle {
            return None;
        }
        let s = self.seen;
        let sample = ServerSample {
            at: now,
            kind: StepKind::Mixed,
            running: s.running,
            queued: s.waiting,
            kv_used_tokens: s.kv_used_tokens,
            kv_capacity_tokens: self.kv_capacity_tokens,
            new_seqs: 0,
            new_tokens: 0,
            cached_tokens: 0,
            pending_tokens: 0,
            gen_tok_per_s: generation_tp,
            input_tok_per_s: prompt_tp,
            cuda_graph: false,
        };
        Some(IntervalStats {
            sample,
            evictions: preemptions,
            deferred: s.deferred,
            prefix_cache_hit_rate: if self.recent_sum.0 > 0 {
                // `CachingMetrics.hit_rate`.
                let (_, queries, hits) = self.recent_sum;
                Some(if queries > 0 {
                    hits as f64 / queries as f64
                } else {
                    0.0
                })
            } else {
                // Without modelled lookups every new request misses.
                (self.prefix_caching && self.looked_up).then_some(0.0)
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_line_has_vllms_parts_in_vllms_order() {
        let mut log = StatsLog::new(116_160, 16, Some(262_144), true);
        log.snapshot(50, 100, 0, 104_000);
        log.on_outputs(8_513, 3_000, 2);
        let s = log.tick(SimTime::from_ns(10 * NS_PER_S)).unwrap();
        assert_eq!(
            log_line(&LogRecord::Interval(s)),
            "(APIServer pid=1) INFO 01-01 00:00:10 [loggers.py:335] Engine 000: Avg prompt throughput: 300.0 tokens/s, \
             Avg generation throughput: 851.3 tokens/s, Running: 50 reqs, Waiting: 100 reqs, Preemptions: 2, \
             GPU KV cache usage: 89.5%, Prefix cache hit rate: 0.0%"
        );
        // The next interval has no throughput but the last had: still logged; then idle.
        assert!(log.tick(SimTime::from_ns(20 * NS_PER_S)).is_some());
        assert!(log.tick(SimTime::from_ns(30 * NS_PER_S)).is_none());
    }

    #[test]
    fn the_hit_rate_is_over_the_most_recent_thousand_new_requests() {
        // `misses` misses of 100 tokens, then one set of two requests hitting 50 of 100 each.
        let rate = |misses: u32| {
            let mut log = StatsLog::new(116_160, 16, None, true);
            for _ in 0..misses {
                log.lookup(100, 0, false);
            }
            log.snapshot(1, 0, 0, 0);
            log.lookup(100, 50, false);
            log.lookup(100, 50, false);
            // A preempted request's lookup is not in the rate.
            log.lookup(100, 100, true);
            log.snapshot(1, 0, 0, 0);
            log.on_outputs(1, 0, 0);
            let s = log.tick(SimTime::from_ns(10 * NS_PER_S)).unwrap();
            s.prefix_cache_hit_rate
        };
        // `CachingMetrics.observe` (`v1/metrics/stats.py`) drops the oldest set while the sum
        // exceeds 1000: 1001 requests drop the misses; exactly 1000 keep every set.
        assert_eq!(rate(999), Some(0.5));
        assert_eq!(rate(998), Some(100.0 / 100_000.0));
    }

    #[test]
    fn the_startup_line_gives_the_pool_and_the_concurrency() {
        // 27,746 blocks of 16 (the null block included) for 131,072-token requests.
        let mut log = StatsLog::new(27_745 * 16, 16, Some(131_072), false);
        let rec = log.startup().unwrap();
        assert_eq!(
            log_line(&rec),
            "(EngineCore pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:1147] GPU KV cache size: 443,936 tokens, \
             Maximum concurrency for 131,072 tokens per request: 3.39x"
        );
        assert!(log.startup().is_none());
    }

    #[test]
    fn a_model_length_off_the_block_grid_takes_whole_blocks_a_request() {
        // `get_max_concurrency_for_kv_cache_config` (`v1/core/kv_cache_utils.py`): a request
        // of 1,000 tokens takes ⌈1000 / 16⌉ = 63 blocks; 201 blocks (the null block included)
        // hold 201 / 63 = 3.19 of them, and the line gives int(3.1905 × 1000) = 3,190 tokens.
        let mut log = StatsLog::new(200 * 16, 16, Some(1_000), false);
        assert_eq!(
            log_line(&log.startup().unwrap()),
            "(EngineCore pid=1) INFO 01-01 00:00:00 [kv_cache_utils.py:1147] GPU KV cache size: 3,190 tokens, \
             Maximum concurrency for 1,000 tokens per request: 3.19x"
        );
    }
}
