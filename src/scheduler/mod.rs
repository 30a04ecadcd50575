//! Engine scheduling policies behind one small trait.
//!
//! The simulator hands a scheduler the requests that arrive, asks it what to run next, and tells
//! it when that batch has finished. Everything else — queues, KV pool, admission estimates,
//! per-request progress — is the scheduler's own state. What it reports back is engine-neutral:
//! the [`ServerState`], [`LogRecord`]s built from [`ServerSample`]s, and [`SchedulerCounters`].
//!
//! Adding an engine means one folder here (its policy, its log format, its words, and its
//! settings section — `sglang/settings.rs` declares, reads and defaults SGLang's keys), one arm
//! in [`build`], [`render_line`], [`words`], [`simplifications`] and [`for_prefixes`], and one
//! variant of [`PolicySpec`] (`settings.rs`). SGLang's policy is in [`sglang`], vLLM's in
//! [`vllm`].

mod kv_stairs;
pub mod settings;
pub mod sglang;
pub mod vllm;

pub use kv_stairs::{KvStairs, RunKv};
pub use settings::{EngineKind, EngineSpec, PolicySpec};

use crate::cost::{DecodeSteps, FloorLine, StepTimeModel};
use crate::request::{ReqId, Request, Requests};
use crate::rng::Stream;
use crate::time::{SimDuration, SimTime};

/// The scheduler for an engine's settings: the one place where a policy's settings become a
/// policy. `context_len` is the model's, if known; `rng` is the "schedule_policy" stream;
/// `verbose_log` keeps the per-batch lines (prefill batches, evictions) besides the periodic
/// statistics lines that carry the server's view; `shares_prefixes`: the workload's prompts share
/// prefixes (a prefix cache then keeps them).
pub fn build(
    engine: &EngineSpec,
    context_len: Option<u64>,
    shares_prefixes: bool,
    cost: Box<dyn StepTimeModel>,
    rng: Stream,
    verbose_log: bool,
) -> Box<dyn Scheduler> {
    match &engine.policy {
        PolicySpec::Sglang(settings) => {
            let mut s =
                sglang::Sglang::new(engine, settings, context_len, shares_prefixes, cost, rng);
            s.set_verbose_log(verbose_log);
            Box::new(s)
        }
        PolicySpec::Vllm(settings) => {
            Box::new(vllm::Vllm::new(engine, settings, shares_prefixes, cost))
        }
    }
}

/// One log record as the engine prints it, timestamp and prefix included, for an engine of
/// `tensor_parallel` GPUs.
pub fn render_line(kind: EngineKind, rec: &LogRecord, tensor_parallel: u32) -> String {
    match kind {
        EngineKind::Sglang => sglang::log_line(rec, tensor_parallel),
        EngineKind::Vllm => vllm::log_line(rec),
    }
}

/// How reports speak of an engine: every engine-specific word of every report comes from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    /// The engine's name as its users write it.
    pub engine: &'static str,
    /// What the engine calls evicting a running request to make room, singular.
    pub eviction: &'static str,
    /// Plural.
    pub evictions: &'static str,
    /// The past participle ("retracted").
    pub evicted: &'static str,
    /// The verb ("retracts").
    pub evicts: &'static str,
    /// Where the server's view comes from, as a reader of its log knows it.
    pub latest_stats_line: &'static str,
    /// The same, as the throughput figure's legend names it.
    pub stats_line_in_figure: &'static str,
    /// The periodic statistics lines, plural ("Decode lines").
    pub stats_lines: &'static str,
    /// What the log calls the KV pool's use ("token usage").
    pub kv_usage: &'static str,
    /// Its first word, over "usage" in the views table's two-line header.
    pub kv_usage_column: &'static str,
    /// The axis of the KV usage panel.
    pub kv_usage_axis: &'static str,
    /// How the log computes it.
    pub kv_usage_source: &'static str,
    /// What the log calls the generation throughput.
    pub gen_throughput: &'static str,
    /// The requests counted as running.
    pub running_at_server: &'static str,
    /// A step with prompt tokens only.
    pub prefill_step: &'static str,
    /// Steps with prompt tokens only, plural.
    pub prefill_steps: &'static str,
    /// A step with decode tokens.
    pub decode_step: &'static str,
    /// Steps with decode tokens, plural.
    pub decode_steps: &'static str,
    /// The benchmark client whose latency convention the reports follow.
    pub bench_client: &'static str,
    /// Its module or command, as the latency figure names it.
    pub bench_client_in_figure: &'static str,
    /// The engine's key for the most requests running at once.
    pub slot_limit_key: &'static str,
    /// The share of GPU memory the engine takes, as the what-if names it.
    pub memory_fraction: &'static str,
    /// Its key, with a sweep range to try.
    pub memory_fraction_sweep: &'static str,
    /// The sweep axis that runs a workload with the engine's prefix cache on and off.
    pub prefix_cache_sweep: &'static str,
    /// How admission decides that the next request does not fit (a sentence in parentheses).
    pub admission_rule: &'static str,
}

/// The words for an engine.
pub fn words(kind: EngineKind) -> Words {
    match kind {
        EngineKind::Sglang => sglang::WORDS,
        EngineKind::Vllm => vllm::WORDS,
    }
}

/// The simplification that off-GPU time is nil, as engines list it; a scenario with off-GPU
/// overheads reports [`FIXED_OFF_GPU_TIME`] in its place.
pub const NO_OFF_GPU_TIME: &str =
    "the network and tokenizer take no time: a request arrives at the server the moment it is sent";

/// What replaces [`NO_OFF_GPU_TIME`] when a scenario gives off-GPU overheads.
pub const FIXED_OFF_GPU_TIME: &str = "off-GPU time is fixed per request and per token (client.network_rtt_ms, client.request_overhead_ms, client.per_token_overhead_ms): the HTTP server, tokenizer and detokenizer never queue";

/// What the model of an engine simplifies, for every report.
pub fn simplifications(kind: EngineKind) -> &'static [&'static str] {
    match kind {
        EngineKind::Sglang => sglang::SIMPLIFICATIONS,
        EngineKind::Vllm => vllm::SIMPLIFICATIONS,
    }
}

/// An engine's simplification `x` as a report states it for a workload that does
/// (`shares_prefixes`) or does not share prompt prefixes.
pub fn for_prefixes(kind: EngineKind, x: &'static str, shares_prefixes: bool) -> &'static str {
    let (without, with) = match kind {
        EngineKind::Sglang => (sglang::NO_PREFIXES, sglang::WITH_PREFIXES),
        EngineKind::Vllm => (vllm::NO_PREFIXES, vllm::WITH_PREFIXES),
    };
    if shares_prefixes && x == without {
        with
    } else {
        x
    }
}

/// What the server looks like right now (the quantities its logs report).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerState {
    /// Requests admitted and not finished: the decode batch plus any being prefilled.
    pub running: u64,
    /// Requests in the waiting queue.
    pub queued: u64,
    /// KV slots in use (`#token`).
    pub kv_used_tokens: u64,
    /// KV pool size (`max_total_num_tokens`).
    pub kv_capacity_tokens: u64,
}

/// Why the server refused a request at arrival.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The engine's own error text.
    pub message: String,
}

/// What kind of forward pass a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Prompt (or re-prefill) tokens only.
    Prefill,
    /// One token for every running request.
    Decode,
    /// Prefill chunks and decode tokens in one forward pass.
    Mixed,
}

/// The server at one instant, as an engine's log line reports it — in engine-neutral terms.
/// Each engine renders its own lines from these ([`render_line`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSample {
    /// When the line was printed.
    pub at: SimTime,
    /// The step the line reports on.
    pub kind: StepKind,
    /// Requests in the running batch the line counts.
    pub running: u64,
    /// Requests in the waiting queue.
    pub queued: u64,
    /// KV slots in use.
    pub kv_used_tokens: u64,
    /// The KV pool.
    pub kv_capacity_tokens: u64,
    /// Requests this step newly admitted (prefill lines).
    pub new_seqs: u64,
    /// Prompt tokens this step computes (prefill lines).
    pub new_tokens: u64,
    /// Prompt tokens found in the prefix cache (prefill lines).
    pub cached_tokens: u64,
    /// Prompt tokens still waiting to be computed (prefill lines).
    pub pending_tokens: u64,
    /// Output tokens per second over the engine's own logging window.
    pub gen_tok_per_s: f64,
    /// Prompt tokens per second over the engine's own logging window.
    pub input_tok_per_s: f64,
    /// Whether the step replayed a captured CUDA graph.
    pub cuda_graph: bool,
}

/// A periodic statistics line that covers a window of time rather than a step (vLLM's, every
/// 10 s): the server's state as last reported, the window's rates, and what happened in it.
#[derive(Clone, Debug, PartialEq)]
pub struct IntervalStats {
    /// The state and the window's throughputs.
    pub sample: ServerSample,
    /// Requests evicted (preempted) in the window.
    pub evictions: u64,
    /// Waiting requests the engine skips for now (vLLM's `Deferred`).
    pub deferred: u64,
    /// The prefix cache's hit rate, when the engine reports one.
    pub prefix_cache_hit_rate: Option<f64>,
}

impl ServerSample {
    /// `kv_used_tokens / kv_capacity_tokens`.
    pub fn token_usage(&self) -> f64 {
        self.kv_used_tokens as f64 / self.kv_capacity_tokens as f64
    }
}

/// Requests evicted from the running batch to make room (SGLang: retraction).
#[derive(Clone, Debug, PartialEq)]
pub struct Eviction {
    /// When the step that needed the memory was scheduled.
    pub at: SimTime,
    /// Requests evicted.
    pub requests: u64,
    /// KV slots freed.
    pub tokens_freed: u64,
    /// The admission estimate before (SGLang's `new_token_ratio`).
    pub ratio_before: f64,
    /// The admission estimate after.
    pub ratio_after: f64,
}

/// The KV pool as the engine announces it at start-up.
#[derive(Clone, Debug, PartialEq)]
pub struct KvCacheLine {
    /// When it was printed.
    pub at: SimTime,
    /// The pool in tokens, as the engine counts it.
    pub tokens: u64,
    /// The longest request (`max_model_len`), if known.
    pub max_request_tokens: Option<u64>,
    /// How many requests of that length fit at once.
    pub max_concurrency: f64,
}

/// One line of the engine's log, as engine-neutral data.
#[derive(Clone, Debug, PartialEq)]
pub enum LogRecord {
    /// The engine's periodic statistics line: the server's own view of its throughput (SGLang:
    /// `Decode batch`, every `decode_log_interval` decode steps).
    Stats(ServerSample),
    /// A line printed for every prefill batch (SGLang: `Prefill batch`).
    Batch(ServerSample),
    /// Requests evicted to make room.
    Evict(Eviction),
    /// The engine's periodic statistics line over a window of time (vLLM's stats line): the
    /// server's own view of its throughput, like [`LogRecord::Stats`].
    Interval(IntervalStats),
    /// The KV pool at start-up (vLLM: `GPU KV cache size`).
    KvCache(KvCacheLine),
}

impl LogRecord {
    /// When it was printed.
    pub fn at(&self) -> SimTime {
        match self {
            LogRecord::Stats(s) | LogRecord::Batch(s) => s.at,
            LogRecord::Evict(e) => e.at,
            LogRecord::Interval(i) => i.sample.at,
            LogRecord::KvCache(k) => k.at,
        }
    }
}

/// A batch that needs more KV than the pool has free, the cache's evictable tokens included:
/// the engine raises an error there and stops serving (SGLang's `alloc_token_slots`,
/// `mem_cache/allocation.py`), and so does the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// Tokens the batch must allocate.
    pub need_tokens: u64,
    /// Tokens free, the cache's evictable ones included.
    pub free_tokens: u64,
    /// How the engine came to it and what it does then, in its words.
    pub reason: String,
}

/// What a scheduler call produced, for the simulator to act on.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Requests whose response is complete (finished, or aborted by the engine).
    pub finished: Vec<ReqId>,
    /// Output tokens generated (decode steps and first tokens from prefill).
    pub generated_tokens: u64,
    /// Requests' first output tokens among `generated_tokens` (see [`Outbox::first_token`]).
    pub first_tokens: u64,
    /// For the tokens among `generated_tokens` that evicted requests got next: the gap since
    /// their eviction (see [`Outbox::token_after_eviction`]).
    pub resumed_gaps: Vec<SimDuration>,
    /// For each request evicted before a decode step gave it the token after one it got
    /// outside a decode step: when it got that one (see [`Outbox::evicted`]).
    pub abandoned_awaits: Vec<SimTime>,
    /// A fast-forward's decode steps, each one's end and the tokens it gave (the engine times
    /// inter-token latencies by them; a single batch ends at the batch's end). This and the
    /// fields after it to `run_line` only [`Scheduler::skip_decode`] writes.
    pub step_ends: Vec<(SimTime, u64)>,
    /// With `step_ends`: the steps that gave first tokens or tokens after an eviction, when
    /// not only the first did — for each, in order, its index in `step_ends` and how many of
    /// `first_tokens` and of `resumed_gaps` (taken in order) it gave. Empty: all came with the
    /// first step.
    pub outside_tokens: Vec<(usize, u64, usize)>,
    /// A fast-forward's turns when the state changed inside the run ([`RunState::Turns`]): the
    /// server's state during each and the tokens its end delivered, listed in order when a
    /// time-series point may fall inside the run (so that the simulator takes it as the
    /// step-by-step path would), else summed.
    pub turns: Turns,
    /// A fast-forward's decode steps of a constant batch, described instead of listed in
    /// `step_ends`: the engine reads their gaps from the step-time model
    /// ([`Scheduler::step_time`]).
    pub decode_run: Option<DecodeRun>,
    /// With `decode_run`, when the step-time model has no closed form for runs: its steps'
    /// ends, ns from its start, priced once ([`StepTimeModel::decode_ends_within`]).
    pub run_ends: Vec<u64>,
    /// With `decode_run`, when the scheduler priced it on the model's line of floors
    /// ([`StepTimeModel::decode_floor_line`]): that line, so that nothing prices it again.
    pub run_line: Option<FloorLine>,
    /// With `decode_run`: how the KV in use grows from step to step.
    pub run_kv: RunKv,
    /// Decode rounds processed by a step ([`Scheduler::finish_current`]): each gave every
    /// request of the running batch one token (a decode step, or the decode rows of a mixed
    /// batch). Requests that got their first token in the same batch are not part of its
    /// round. Read only where per-token times are kept, which takes every step one by one, so
    /// [`Scheduler::skip_decode`] does not count its runs' rounds.
    pub decode_rounds: u64,
    /// Log lines printed.
    pub log: Vec<LogRecord>,
    /// The batch [`Scheduler::start_next`] decided needs more KV than there is. The simulator
    /// takes it at once and stops the run, so no clearing empties it.
    pub out_of_memory: Option<Box<OutOfMemory>>,
}

impl Outbox {
    /// Empty the outbox for reuse.
    pub fn clear(&mut self) {
        self.clear_for_run(SimTime::ZERO, SimTime::ZERO);
    }

    /// Empty what any call of a scheduler writes: all but what only
    /// [`Scheduler::skip_decode`] writes (`step_ends`, `outside_tokens`, `turns`,
    /// `decode_run`, `run_ends`, `run_line`), which the simulator reads after a run only and
    /// empties before each attempt ([`Outbox::clear_for_run`]), and `out_of_memory`, which
    /// ends the run.
    #[inline]
    pub fn clear_for_step(&mut self) {
        self.finished.clear();
        self.generated_tokens = 0;
        self.first_tokens = 0;
        self.resumed_gaps.clear();
        self.abandoned_awaits.clear();
        self.decode_rounds = 0;
        self.log.clear();
    }

    /// Empty the whole outbox for a [`Scheduler::skip_decode`] from `at`, its turns ending
    /// by `sum_until` summed ([`Turns::start`]).
    #[inline]
    pub fn clear_for_run(&mut self, at: SimTime, sum_until: SimTime) {
        self.clear_for_step();
        self.step_ends.clear();
        self.outside_tokens.clear();
        self.decode_run = None;
        self.run_ends.clear();
        self.run_line = None;
        self.run_kv = RunKv::default();
        self.turns.start(at, sum_until);
    }

    /// The steps of `decode_run` (`r`): [`DecodeRun::priced`] with this outbox's line and ends.
    pub fn decode_steps<'a>(
        &'a self,
        model: &'a dyn StepTimeModel,
        r: &DecodeRun,
    ) -> DecodeSteps<'a> {
        r.priced(model, self.run_line.as_ref(), &self.run_ends)
    }

    /// Request `r` gets an output token at `now`: if it is its first, note when, and count it;
    /// if `r` was evicted since its previous one, note the gap (see
    /// [`Outbox::token_after_eviction`]).
    pub fn first_token(&mut self, r: &mut Request, now: SimTime) {
        if r.first_token_at.is_none() {
            r.first_token_at = Some(now);
            r.outside_token_at = Some(now);
            self.first_tokens += 1;
        } else {
            self.token_after_eviction(r, now);
        }
    }

    /// Request `r` is evicted from a running batch whose latest decode round's tokens came at
    /// `last_round`: its latest token came then, or — if it joined the batch since — outside a
    /// decode round, when it notes (`outside_token_at`); its next token's gap counts from that
    /// one, not from the eviction, which may come later (after a prefill batch). If that
    /// outside token is still awaiting a decode step's next one, the recorder must stop waiting
    /// for it (another request's token would otherwise be timed from it): SGLang's retraction,
    /// which takes the request out of the next decode step — under the overlapped loop its
    /// token of the batch in flight is discarded too (`sglang/overlap.rs`).
    pub fn evicted(&mut self, r: &mut Request, last_round: SimTime) {
        let outside = r.outside_token_at.take();
        r.evicted(outside.map_or(last_round, |at| at.max(last_round)));
        if let Some(at) = outside {
            self.abandoned_awaits.push(at);
        }
    }

    /// Request `r` gets an output token at `now`: if it was evicted since its previous one,
    /// the gap since the eviction is this token's inter-token latency.
    pub fn token_after_eviction(&mut self, r: &mut Request, now: SimTime) {
        if let Some(at) = r.evicted_at.take() {
            self.resumed_gaps.push(now - at);
            r.outside_token_at = Some(now);
        }
    }
}

/// One turn of a fast-forward run (a step, or under vLLM's async scheduling one turn of its
/// batch queue): from the previous turn's end (the run's start for the first) to `end`, the
/// server in `state` — as the step-by-step path sets it when it starts the turn's batch — and
/// `tokens` output tokens delivered at `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// When it ended.
    pub end: SimTime,
    /// Requests running during it.
    pub running: u64,
    /// Requests queued during it.
    pub queued: u64,
    /// KV slots in use during it.
    pub kv_used_tokens: u64,
    /// Output tokens delivered at its end.
    pub tokens: u64,
}

/// A fast-forward's turns ([`Outbox::turns`]): those that end before the next time-series
/// point or observation is due only summed (their time integrals are all the recorder takes
/// from them), the others listed, in order, for the simulator to take each point as the
/// step-by-step path would.
#[derive(Clone, Debug, Default)]
pub struct Turns {
    /// Turns ending at or before this instant, while none has been listed, are summed (the
    /// recorder's next point or observation: points are taken strictly before a turn's end).
    pub sum_until: SimTime,
    /// The summed turns, from the run's start.
    pub sums: TurnSums,
    /// The turns after them.
    pub list: Vec<Turn>,
}

/// Turns summed from a run's start: the time integrals (ns × value) of the server's state over
/// them — exactly the sums of setting each turn's state at its start — their tokens, and the
/// last turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TurnSums {
    /// The end of the latest turn summed (the run's start before the first).
    pub until: SimTime,
    /// ∫ running requests dt.
    pub running_ns: u128,
    /// ∫ queued requests dt.
    pub queued_ns: u128,
    /// Time with requests queued.
    pub queue_busy_ns: u128,
    /// ∫ KV slots in use dt.
    pub kv_used_ns: u128,
    /// Output tokens delivered.
    pub tokens: u64,
    /// The latest turn summed.
    pub last: Option<Turn>,
}

impl Turns {
    /// A run's turns from `at` on: those ending by `sum_until` summed.
    #[inline]
    pub fn start(&mut self, at: SimTime, sum_until: SimTime) {
        self.sum_until = sum_until;
        self.list.clear();
        self.sums = TurnSums {
            until: at,
            ..TurnSums::default()
        };
    }

    /// The next turn.
    #[inline]
    pub fn push(&mut self, t: Turn) {
        if t.end > self.sum_until || !self.list.is_empty() {
            self.list.push(t);
            return;
        }
        let s = &mut self.sums;
        let dt = u128::from((t.end - s.until).as_ns());
        s.running_ns += dt * u128::from(t.running);
        s.queued_ns += dt * u128::from(t.queued);
        if t.queued > 0 {
            s.queue_busy_ns += dt;
        }
        s.kv_used_ns += dt * u128::from(t.kv_used_tokens);
        s.tokens += t.tokens;
        s.until = t.end;
        s.last = Some(t);
    }

    /// Whether a turn ending at `end` would be summed by [`Turns::push`].
    #[inline]
    pub fn sums_to(&self, end: SimTime) -> bool {
        end <= self.sum_until && self.list.is_empty()
    }

    /// `n` turns that [`Turns::push`] would each sum ([`Turns::sums_to`] their ends), of one
    /// `running`, `queued` and `tokens` as `last` (the latest of them), summed at once from
    /// their durations' total `dt_ns` and `Σ dt·kv_used_tokens` (`kv_ns`): the same sums.
    pub fn push_summed(&mut self, n: u64, dt_ns: u64, kv_ns: u128, last: Turn) {
        if n == 0 {
            return;
        }
        debug_assert!(self.sums_to(last.end), "invariant: turns summed");
        let s = &mut self.sums;
        debug_assert_eq!(
            (last.end - s.until).as_ns(),
            dt_ns,
            "invariant: the turns' span"
        );
        let dt = u128::from(dt_ns);
        s.running_ns += dt * u128::from(last.running);
        s.queued_ns += dt * u128::from(last.queued);
        if last.queued > 0 {
            s.queue_busy_ns += dt;
        }
        s.kv_used_ns += kv_ns;
        s.tokens += n * last.tokens;
        s.until = last.end;
        s.last = Some(last);
    }
}

/// Decode steps of a constant batch taken at once: step `j` (from 0) attends
/// `kv_first + batch·j` KV tokens and gives each of the `batch` requests a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeRun {
    /// When the first step started.
    pub start: SimTime,
    /// Requests in every step.
    pub batch: u64,
    /// KV tokens the first step attends.
    pub kv_first: u64,
    /// Steps.
    pub steps: u64,
    /// When the last step ended.
    pub end: SimTime,
}

impl DecodeRun {
    /// The run's steps, from its `line` or its priced `ends` (`Outbox::run_line`,
    /// `Outbox::run_ends`), else from the model's closed forms.
    pub fn priced<'a>(
        &self,
        model: &'a dyn StepTimeModel,
        line: Option<&FloorLine>,
        ends: &'a [u64],
    ) -> DecodeSteps<'a> {
        let run = match line {
            Some(&line) => DecodeSteps::from_line(model, self.batch, self.kv_first, line),
            None => DecodeSteps::new(model, self.batch, self.kv_first, self.steps, ends),
        };
        run.with_total((self.end - self.start).as_ns())
    }
}

/// Counters a scheduler keeps over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerCounters {
    /// Requests evicted from the running batch (SGLang: retracted; a request evicted twice
    /// counts twice).
    pub evictions: u64,
    /// Steps that had to evict.
    pub eviction_events: u64,
    /// Steps with prompt tokens only.
    pub prefill_batches: u64,
    /// Steps with decode tokens (pure decode or mixed).
    pub decode_steps: u64,
    /// Requests aborted by the engine after admission.
    pub aborted: u64,
    /// Admission passes that stopped because the next request did not fit in the KV budget.
    pub memory_stops: u64,
    /// Admission passes that stopped at the `max_running_requests` slot limit.
    pub slot_stops: u64,
    /// Decode steps taken by fast-forward rather than one by one (never in reports: results
    /// must not depend on it).
    pub fast_forwarded_steps: u64,
    /// Requests admitted for the first time.
    pub first_admissions: u64,
    /// Their prompt tokens.
    pub first_admission_prompt_tokens: u64,
    /// Of those, the tokens found in the prefix cache.
    pub cached_prompt_tokens: u64,
    /// Requests that found at least one token cached at their first admission.
    pub cache_hit_requests: u64,
    /// Tokens evicted from the prefix cache.
    pub cache_evicted_tokens: u64,
}

/// A run of decode steps that [`Scheduler::skip_decode`] took at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Decode steps taken.
    pub steps: u64,
    /// When the last of them ended.
    pub end: SimTime,
    /// The server's state through the run.
    pub state: RunState,
    /// What comes after it.
    pub then: Then,
}

/// What the simulator does after a run that completed nothing ([`Skip::then`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// The next batch goes step by step.
    Batch,
    /// Another attempt at once: the scheduler ended the run before a stretch it takes as a
    /// run of its own, or after one (vLLM's long quiet stretches).
    Run,
}

/// The server's state through a fast-forward run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    /// The same requests ran and waited throughout; only the KV grew (as
    /// [`Outbox::run_kv`] says, with its time integral).
    Constant {
        /// Requests running.
        running: u64,
        /// Requests queued.
        queued: u64,
        /// KV slots in use during the last step.
        kv_last: u64,
    },
    /// It changed inside the run (vLLM's preemptions): [`Outbox::turns`] lists it turn by turn.
    Turns,
}

/// A serving engine's scheduling policy.
///
/// Protocol: [`arrive`](Scheduler::arrive) whenever a request reaches the server;
/// [`start_next`](Scheduler::start_next) only when no batch is in flight; when it returns a
/// duration `d`, call [`finish_current`](Scheduler::finish_current) at `now + d` before anything
/// else of the scheduler's.
pub trait Scheduler {
    /// A request reached the server. `Err` if the engine refuses it outright; it then holds no
    /// resources and the response goes back at once.
    fn arrive(&mut self, now: SimTime, id: ReqId, reqs: &mut Requests) -> Result<(), Rejection>;

    /// Choose and start the next batch. `None` means idle until something arrives — or, with
    /// [`Outbox::out_of_memory`] set, that the engine cannot allocate the batch it decided and
    /// stops.
    fn start_next(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration>;

    /// The batch in flight ends now: generate its tokens, release finished requests.
    fn finish_current(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox);

    /// The server's state now.
    fn state(&self) -> ServerState;

    /// Counters so far.
    fn counters(&self) -> SchedulerCounters;

    /// Scheduler batches run so far, as `run.max_events` counts them: the counters' decode
    /// steps plus prefill batches (the simulator asks before every batch).
    fn batches(&self) -> u64 {
        let c = self.counters();
        c.decode_steps + c.prefill_batches
    }

    /// The step-time model that prices its steps.
    fn step_time(&self) -> &dyn StepTimeModel;

    /// Why requests in the waiting queue cannot be admitted, when the server is idle with
    /// work waiting (for a diagnosis instead of a silent stop).
    fn stuck_reason(&self, reqs: &Requests) -> Option<String>;

    /// Fast-forward: take at once the decode steps from `now` on that [`start_next`] would take
    /// one by one with nothing changing but the KV growing — no admission possible, no
    /// completion, no retraction, except that a run may end with the step that finishes
    /// requests, listed in `out.finished` for the simulator to answer as after a batch (vLLM:
    /// preemptions of RUNNING's tail and admissions are taken inside too) — and
    /// that all end before `limit` (the next event; time-series points and observations
    /// inside the run the simulator takes itself, from [`RunState`]), at most `max_steps` of
    /// them (the batches `run.max_events` leaves, so that a run stops where step by step would). Their
    /// log lines go to `out`, those on the engine's clock ([`next_log_at`]) due before the end
    /// included, each with the state it would see step by step. The state afterwards must be exactly
    /// what the step-by-step path leaves. `None` when no step can be skipped; the default never
    /// skips.
    ///
    /// [`start_next`]: Scheduler::start_next
    /// [`next_log_at`]: Scheduler::next_log_at
    fn skip_decode(
        &mut self,
        _now: SimTime,
        _limit: SimTime,
        _max_steps: u64,
        _reqs: &mut Requests,
        _out: &mut Outbox,
    ) -> Option<Skip> {
        None
    }

    /// `false` only when [`skip_decode`](Scheduler::skip_decode) surely takes no run now, as
    /// an O(1) check tells (the simulator then does not set an attempt up). Changes nothing; the
    /// default, with the default `skip_decode` that never skips, says so.
    fn may_skip_decode(&self) -> bool {
        false
    }

    /// When the engine next prints a line on its own clock rather than at a step (vLLM's stats
    /// line every 10 s); `None` if it never does. The simulator calls
    /// [`log_at`](Scheduler::log_at) at that time, before the events of any later time.
    fn next_log_at(&self) -> Option<SimTime> {
        None
    }

    /// Print the lines due at `now` (the time [`next_log_at`](Scheduler::next_log_at) named).
    /// Changes nothing but the engine's log.
    fn log_at(&mut self, _now: SimTime, _out: &mut Outbox) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Turns of one state but their KV, ending at `ends`.
    fn turns(ends: &[u64], kv: &[u64]) -> Vec<Turn> {
        ends.iter()
            .zip(kv)
            .map(|(&end, &kv_used_tokens)| Turn {
                end: SimTime::from_ns(end),
                running: 7,
                queued: 3,
                kv_used_tokens,
                tokens: 7,
            })
            .collect()
    }

    #[test]
    fn turns_summed_at_once_are_the_turns_pushed_one_by_one() {
        let start = SimTime::from_ns(100);
        let (ends, kv) = ([130, 150, 151, 190], [64, 80, 80, 96]);
        let list = turns(&ends, &kv);
        let mut one_by_one = Turns::default();
        one_by_one.start(start, SimTime::from_ns(1_000));
        for &t in &list {
            assert!(one_by_one.sums_to(t.end));
            one_by_one.push(t);
        }
        // By hand: Σ dt = 90; Σ dt·kv = 30·64 + 20·80 + 1·80 + 39·96 = 7,344.
        let mut at_once = Turns::default();
        at_once.start(start, SimTime::from_ns(1_000));
        at_once.push_summed(4, 90, 7_344, list[3]);
        assert_eq!(at_once.sums, one_by_one.sums);
        assert_eq!(
            (
                at_once.sums.running_ns,
                at_once.sums.queue_busy_ns,
                at_once.sums.tokens
            ),
            (630, 90, 28)
        );
        // None at all changes nothing.
        at_once.push_summed(0, 0, 0, list[0]);
        assert_eq!(at_once.sums, one_by_one.sums);
    }

    #[test]
    fn a_turn_past_the_point_is_listed_and_so_is_every_later_one() {
        let list = turns(&[130, 150, 170], &[1, 2, 3]);
        let mut t = Turns::default();
        t.start(SimTime::from_ns(100), SimTime::from_ns(150));
        assert!(t.sums_to(list[1].end));
        t.push(list[0]);
        t.push(list[1]);
        assert!(!t.sums_to(list[2].end));
        t.push(list[2]);
        // Listed from there: even a turn that ends before the point would be now.
        assert!(!t.sums_to(SimTime::from_ns(120)));
        assert_eq!((t.sums.until, t.list.len()), (SimTime::from_ns(150), 1));
    }
}
