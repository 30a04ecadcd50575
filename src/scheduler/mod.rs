//! Engine scheduling policies behind one small trait.
//!
//! The simulator hands a scheduler the requests that arrive, asks it what to run next, and tells
//! it when that batch has finished. Everything else — queues, KV pool, admission estimates,
//! per-request progress — is the scheduler's own state. What it reports back is engine-neutral:
//! the [`ServerState`], [`LogRecord`]s built from [`ServerSample`]s, and [`SchedulerCounters`].
//!
//! Adding an engine means one folder here (its policy, its log format, its words, and its
//! settings section — `sglang/settings.rs` declares, reads and defaults SGLang's keys), one arm
//! in [`build`], [`render_line`], [`words`] and [`simplifications`], and one variant of
//! [`PolicySpec`] (`settings.rs`). SGLang's policy is in [`sglang`]; [`vllm`] has its settings.

pub mod settings;
pub mod sglang;
pub mod vllm;

pub use settings::{EngineKind, EngineSpec, PolicySpec};

use crate::cost::StepTimeModel;
use crate::request::{ReqId, Request, Requests};
use crate::rng::Stream;
use crate::time::{SimDuration, SimTime};

/// The scheduler for an engine's settings: the one place where a policy's settings become a
/// policy. `context_len` is the model's, if known; `rng` is the "schedule_policy" stream;
/// `verbose_log` keeps the per-batch lines (prefill batches, evictions) besides the periodic
/// statistics lines that carry the server's view.
pub fn build(
    engine: &EngineSpec,
    context_len: Option<u64>,
    cost: Box<dyn StepTimeModel>,
    rng: Stream,
    verbose_log: bool,
) -> Result<Box<dyn Scheduler>, Unsupported> {
    match &engine.policy {
        PolicySpec::Sglang(settings) => {
            let mut s = sglang::Sglang::new(engine, settings, context_len, cost, rng);
            s.set_verbose_log(verbose_log);
            Ok(Box::new(s))
        }
        PolicySpec::Vllm(_) => Err(Unsupported(EngineKind::Vllm)),
    }
}

/// One log record as the engine prints it, timestamp and prefix included, for an engine of
/// `tensor_parallel` GPUs.
pub fn render_line(kind: EngineKind, rec: &LogRecord, tensor_parallel: u32) -> String {
    match kind {
        EngineKind::Sglang => sglang::log_line(rec, tensor_parallel),
        EngineKind::Vllm => unreachable!("invariant: `build` refuses vLLM, so no vLLM log exists"),
    }
}

/// How reports speak of an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Words {
    /// The engine's name as its users write it.
    pub engine: &'static str,
    /// What the engine calls evicting a running request to make room, singular.
    pub eviction: &'static str,
    /// Plural.
    pub evictions: &'static str,
    /// Where the server's view comes from, as a reader of its log knows it.
    pub latest_stats_line: &'static str,
}

/// The words for an engine.
pub fn words(kind: EngineKind) -> Words {
    match kind {
        EngineKind::Sglang => sglang::WORDS,
        EngineKind::Vllm => Words {
            engine: "vLLM",
            eviction: "preemption",
            evictions: "preemptions",
            latest_stats_line: "vLLM's last stats line",
        },
    }
}

/// What the model of an engine simplifies, for every report.
pub fn simplifications(kind: EngineKind) -> &'static [&'static str] {
    match kind {
        EngineKind::Sglang => sglang::SIMPLIFICATIONS,
        EngineKind::Vllm => &[],
    }
}

/// The scenario asks for an engine whose scheduler is not modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("engine.kind = \"{}\" has a memory model but no scheduler yet: `servesim memory` works, simulation does not", .0.as_str())]
pub struct Unsupported(pub EngineKind);

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
}

impl LogRecord {
    /// When it was printed.
    pub fn at(&self) -> SimTime {
        match self {
            LogRecord::Stats(s) | LogRecord::Batch(s) => s.at,
            LogRecord::Evict(e) => e.at,
        }
    }
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
    /// A fast-forward's decode steps, each one's end and the tokens it gave (the engine times
    /// inter-token latencies by them; a single batch ends at the batch's end).
    pub step_ends: Vec<(SimTime, u64)>,
    /// Log lines printed.
    pub log: Vec<LogRecord>,
}

impl Outbox {
    /// Empty the outbox for reuse.
    pub fn clear(&mut self) {
        self.finished.clear();
        self.generated_tokens = 0;
        self.first_tokens = 0;
        self.step_ends.clear();
        self.log.clear();
    }

    /// Request `r` gets an output token at `now`: if it is its first, note when, and count it.
    pub fn first_token(&mut self, r: &mut Request, now: SimTime) {
        if r.first_token_at.is_none() {
            r.first_token_at = Some(now);
            self.first_tokens += 1;
        }
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
}

/// A run of decode steps that [`Scheduler::skip_decode`] took at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Decode steps taken.
    pub steps: u64,
    /// When the last of them ended.
    pub end: SimTime,
    /// Requests running during the run (constant).
    pub running: u64,
    /// Requests queued during the run (constant).
    pub queued: u64,
    /// `Σ kv_used × step duration` over the run, ns × tokens.
    pub kv_integral: u128,
    /// KV slots in use during the last step.
    pub kv_last: u64,
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

    /// Choose and start the next batch. `None` means idle until something arrives.
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

    /// Why requests in the waiting queue cannot be admitted, when the server is idle with
    /// work waiting (for a diagnosis instead of a silent stop).
    fn stuck_reason(&self, reqs: &Requests) -> Option<String>;

    /// Fast-forward: take at once the decode steps from `now` on that [`start_next`] would take
    /// one by one with nothing changing but the KV growing — no admission possible, no
    /// completion, no retraction — and that all end before `limit` (the next event, observation
    /// or time-series point). Their log lines go to `out`. The state afterwards must be exactly
    /// what the step-by-step path leaves. `None` when no step can be skipped; the default never
    /// skips.
    ///
    /// [`start_next`]: Scheduler::start_next
    fn skip_decode(
        &mut self,
        _now: SimTime,
        _limit: SimTime,
        _reqs: &mut Requests,
        _out: &mut Outbox,
    ) -> Option<Skip> {
        None
    }
}
