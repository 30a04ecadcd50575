//! Engine scheduling policies behind one small trait.
//!
//! The simulator hands a scheduler the requests that arrive, asks it what to run next, and tells
//! it when that batch has finished. Everything else — queues, KV pool, admission estimates — is
//! the scheduler's own state. SGLang's policy is in [`sglang`]; vLLM's will sit beside it.

pub mod sglang;

use crate::request::{ReqId, Requests};
use crate::time::{SimDuration, SimTime};

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

/// One line of the engine's log, as data (rendered by `report::server_log`).
#[derive(Clone, Debug, PartialEq)]
pub enum LogRecord {
    /// SGLang's `Prefill batch` line, printed for every prefill batch.
    Prefill {
        /// When the batch was scheduled.
        at: SimTime,
        /// `#new-seq`.
        new_seq: u64,
        /// `#new-token`.
        new_token: u64,
        /// `#cached-token` (always 0: no shared prefixes).
        cached_token: u64,
        /// `token usage` (before this batch's allocation).
        token_usage: f64,
        /// `#running-req` (the decode batch, excluding this batch).
        running_req: u64,
        /// `#queue-req` (after this batch left the queue).
        queue_req: u64,
        /// `#pending-token`.
        pending_token: u64,
        /// `input throughput (token/s)`.
        input_tok_per_s: f64,
    },
    /// SGLang's `Decode batch` line, printed every `decode_log_interval` decode steps.
    Decode {
        /// End of the decode step that printed it.
        at: SimTime,
        /// `#running-req`.
        running_req: u64,
        /// `#token`.
        token: u64,
        /// `token usage`.
        token_usage: f64,
        /// `cuda graph`.
        cuda_graph: bool,
        /// `gen throughput (token/s)`: decode tokens since the previous Decode line divided by
        /// the time since it.
        gen_tok_per_s: f64,
        /// `#queue-req`.
        queue_req: u64,
    },
    /// SGLang's retraction warning.
    Retract {
        /// When the decode step that needed the memory was scheduled.
        at: SimTime,
        /// `#retracted_reqs`.
        retracted: u64,
        /// `#new_tokens_gained` (KV slots freed).
        new_tokens_gained: u64,
        /// The admission ratio before.
        ratio_before: f64,
        /// The admission ratio after.
        ratio_after: f64,
    },
}

/// What a scheduler call produced, for the simulator to act on.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Requests whose response is complete (finished, or aborted by the engine).
    pub finished: Vec<ReqId>,
    /// Output tokens generated (decode steps and first tokens from prefill).
    pub generated_tokens: u64,
    /// Log lines printed.
    pub log: Vec<LogRecord>,
}

impl Outbox {
    /// Empty the outbox for reuse.
    pub fn clear(&mut self) {
        self.finished.clear();
        self.generated_tokens = 0;
        self.log.clear();
    }
}

/// Counters a scheduler keeps over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerCounters {
    /// Requests retracted (a request retracted twice counts twice).
    pub retractions: u64,
    /// Decode steps that had to retract.
    pub retraction_events: u64,
    /// Prefill batches run.
    pub prefill_batches: u64,
    /// Decode steps run.
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
