//! SGLang's scheduler, rule by rule (`shared/spec/engine-semantics.md` §2; SGLang 0.5.23 unless
//! a rule says otherwise). Paths below are under `python/sglang/srt/` in the SGLang source.
//!
//! One scheduler iteration runs **either** one prefill (extend) batch **or** one decode step for
//! the whole running batch, never both: prefill has priority and pauses decode
//! (`managers/scheduler.py: get_next_batch_to_run`). What is modelled:
//!
//! * **Admission** (`managers/schedule_policy.py: PrefillAdder`, `mem_cache/prefill_budget.py`):
//!   the budget is `available − Σ running reservations`, where a running request is charged
//!   `min(max_new − generated, clip) × new_token_ratio` (× 1.0 for `ignore_eos` requests) and a
//!   new one must satisfy `extend + min(max_new − generated, clip) + page < remaining`, then
//!   reserves `ceil_page(extend) + page + min(max_new, clip)`. Strict head-of-line: the pass stops
//!   at the first request that does not fit.
//! * **Chunked prefill**: a prompt longer than the chunk budget is split; at most one request is
//!   mid-chunk; its chunks run back to back (decode stays paused) and it reserves decode tokens
//!   only with its last chunk (`add_chunked_req`).
//! * **The batch-is-full latch** (`get_new_batch_prefill`): after a pass stops for lack of memory
//!   (with something running or admitted), or when the slot limit `max_running_requests` is
//!   reached, no admission is attempted until the running batch shrinks. The batch is filtered
//!   of finished requests in `update_running_batch`, i.e. at the next decode step — so a
//!   completion frees memory at once but unlocks admission one decode step later.
//! * **`new_token_ratio`** (`managers/scheduler_components/new_token_ratio_tracker.py`): starts
//!   at `init`, decays linearly to `init × min_factor` over `decay_steps` decode steps, is
//!   re-estimated after a retraction, and is reset to `init` only when the server is fully idle.
//! * **Retraction** (`managers/schedule_batch.py: retract_decode`): when the next decode step's
//!   new pages do not fit, requests are retracted — fewest generated tokens first, ties to the
//!   longest prompt — until it fits (at least one, never the last). Retracted requests keep their
//!   output, go to the end of the waiting queue and later re-prefill prompt + output.
//! * **Policies** (`SchedulePolicy.calc_priority`): `fcfs` (no reordering), `lof` (stable sort by
//!   `max_new_tokens` descending), `random` (a fresh shuffle each pass).
//! * **Request limits** (`managers/scheduler.py`, `managers/tp_worker.py`): `max_req_len =
//!   min(context_len − 1, pool − 1)`; a prompt of `max_req_len − 5` tokens or more is refused;
//!   `max_new_tokens` is capped at `max_req_len − input − 1`.
//! * **Logs** (`managers/scheduler_components/metrics_reporter.py`): a `Prefill batch` line per
//!   prefill batch, a `Decode batch` line every `decode_log_interval` decode steps whose
//!   `gen throughput` is the decode tokens since the previous line over the time since it.
//!
//! Simplified, and said so in reports: no prefix sharing (the radix cache never hits), the
//! non-overlapped event loop (`event_loop_normal`), no mixed chunks, no speculative decoding,
//! no priority preemption.
//!
//! Cost: a decode step is O(1) plus O(log B) per completion. Each running request's output count
//! is derived from the decode-step counter, completions come from a heap keyed by the step at
//! which each request reaches its length, and the pages the next step needs are counted per
//! residue class of the context length modulo the page size.
//!
//! Files: this one holds the state, the decode step, retraction and the [`Scheduler`] protocol;
//! [`admission`](self::admission) the prefill admission pass (`PrefillAdder`);
//! `fast_forward.rs` the exact skip over runs of identical decode steps; `log.rs` the log lines;
//! `check.rs` the debug-build bookkeeping check.

mod admission;
#[cfg(debug_assertions)]
mod check;
mod fast_forward;
mod log;
pub mod settings;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::EngineSpec;
use super::{
    Eviction, LogRecord, Outbox, Rejection, Scheduler, SchedulerCounters, ServerState, Skip,
};
use crate::cost::StepTimeModel;
use crate::kv::{pages_for, KvPool};
use crate::request::{Phase, ReqId, Request, Requests};
use crate::rng::Stream;
use crate::time::{SimDuration, SimTime};
use settings::{SchedulePolicy, SglangSettings};

pub use log::{log_line, WORDS};

/// What this model of SGLang simplifies, printed with every report so nobody mistakes the model
/// for the engine.
pub const SIMPLIFICATIONS: &[&str] = &[
    "no shared prompt prefixes: the radix cache never hits, so finished requests' KV counts as free",
    "SGLang's non-overlapped event loop: scheduling takes no time and results are processed before the next batch",
    "no mixed chunks, speculative decoding, priority preemption or data-parallel attention",
    "the network and tokenizer take no time: a request arrives at the server the moment it is sent",
    "step times come from the scenario's step-time model, not from a GPU",
];

/// `SGLANG_RETRACT_DECODE_STEPS`: the headroom per request in the ratio re-estimate.
const RETRACT_DECODE_STEPS: u64 = 20;

/// The parameters SGLang takes from its flags and environment.
#[derive(Clone, Debug)]
struct Params {
    page: u64,
    max_running: u64,
    chunk: Option<u64>,
    max_prefill: u64,
    policy: SchedulePolicy,
    log_interval: u64,
    ratio_init: f64,
    ratio_min: f64,
    ratio_decay: f64,
    clip: u64,
    graph_max_bs: u64,
    max_req_len: u64,
    max_req_input_len: u64,
}

/// What is in flight.
#[derive(Debug)]
enum InFlight {
    Prefill(Vec<PrefillItem>),
    Decode { batch: u64 },
}

#[derive(Clone, Copy, Debug)]
struct PrefillItem {
    id: ReqId,
    take: u32,
}

/// Where a request is in SGLang's scheduler: its own bookkeeping, kept beside the engine-neutral
/// [`Request`] and indexed by its arena id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Place {
    /// Not in this scheduler (answered, or never seen).
    #[default]
    Absent,
    /// In the waiting queue.
    Waiting,
    /// Admitted to a prefill batch or between chunks: `done` of its `input` tokens are cached.
    Prefilling {
        /// Input tokens already computed.
        done: u32,
        /// Input tokens to compute: the prompt plus any output generated before a retraction.
        input: u32,
    },
    /// In the decode batch since decode step `since_step`, when it had `out_then` output tokens.
    Running {
        /// The decode-step counter when the request joined the batch.
        since_step: u64,
        /// Output tokens at that moment.
        out_then: u32,
        /// Unique number of this stay in the batch (guards stale completion-heap entries).
        stay: u64,
    },
}

/// SGLang's scheduler. Owns the waiting queue, the running batch, the KV pool and every
/// request's place in them.
pub struct Sglang {
    p: Params,
    cost: Box<dyn StepTimeModel>,
    kv: KvPool,
    waiting: VecDeque<ReqId>,
    /// Σ input tokens (prompt + generated) of the waiting queue, for `#pending-token`.
    waiting_tokens: u64,
    /// The decode batch, in batch order (merge order).
    running: Vec<ReqId>,
    /// The request between chunks, if any.
    chunked: Option<ReqId>,
    /// Requests admitted and not yet in the decode batch (prefilling or mid-chunk).
    prefilling: u64,
    batch_is_full: bool,
    /// Requests finished in the last decode step, not yet filtered out of the batch.
    finished_since_filter: bool,
    ratio: f64,
    /// `forward_ct_decode`: decode steps run so far.
    decode_step: u64,
    next_stay: u64,
    /// `(step at which it generates its last token, stay, id)`.
    finish_heap: BinaryHeap<Reverse<(u64, u64, ReqId)>>,
    /// Σ KV tokens held by the decode batch.
    running_kv_tokens: u64,
    /// Running requests by `(context − since_step) mod page` (see the module docs).
    page_buckets: Vec<u64>,
    in_flight: Option<InFlight>,
    /// Each request's place, by arena index.
    places: Vec<Place>,
    rng: Stream,
    counters: SchedulerCounters,
    log_enabled: bool,
    decode_tokens_since_log: u64,
    last_decode_log_at: SimTime,
    last_prefill_log_at: SimTime,
    /// When the latest decode step ended: every request in it got a token then.
    last_decode_end: Option<SimTime>,
    /// Requests that joined the decode batch since the latest decode step was scheduled.
    joined: Vec<ReqId>,
    /// For the decode step in flight: when each request that joined since the previous step got
    /// its latest token (the others got theirs at `last_decode_end`).
    joiner_tokens_at: Vec<SimTime>,
}

impl Sglang {
    /// A scheduler with SGLang's settings `spec` for the engine `engine`; `rng` is the
    /// "schedule_policy" stream. With `context_len` the request-length limits follow the
    /// model's context too.
    pub fn new(
        engine: &EngineSpec,
        spec: &SglangSettings,
        context_len: Option<u64>,
        cost: Box<dyn StepTimeModel>,
        rng: Stream,
    ) -> Self {
        let r = &spec.new_token_ratio;
        let ratio_init = r.init.min(1.0);
        let ratio_min = (ratio_init * r.min_factor).min(1.0);
        let pool = engine.kv_capacity_tokens;
        let max_req_len = context_len
            .map_or(pool - 1, |c| (c - 1).min(pool - 1))
            .max(1);
        let page = u64::from(spec.page_size);
        Sglang {
            p: Params {
                page,
                max_running: u64::from(spec.max_running_requests),
                chunk: spec.chunked_prefill_size.map(u64::from),
                max_prefill: u64::from(spec.max_prefill_tokens),
                policy: spec.schedule_policy,
                log_interval: u64::from(spec.decode_log_interval),
                ratio_init,
                ratio_min,
                ratio_decay: (ratio_init - ratio_min) / f64::from(r.decay_steps),
                clip: u64::from(r.clip_max_new_tokens),
                graph_max_bs: u64::from(spec.cuda_graph_max_bs),
                max_req_len,
                max_req_input_len: max_req_len.saturating_sub(5),
            },
            cost,
            kv: KvPool::new(pool, page),
            waiting: VecDeque::new(),
            waiting_tokens: 0,
            running: Vec::new(),
            chunked: None,
            prefilling: 0,
            batch_is_full: false,
            finished_since_filter: false,
            ratio: ratio_init,
            decode_step: 0,
            next_stay: 0,
            finish_heap: BinaryHeap::new(),
            running_kv_tokens: 0,
            page_buckets: vec![0; page as usize],
            in_flight: None,
            places: Vec::new(),
            rng,
            counters: SchedulerCounters::default(),
            log_enabled: true,
            decode_tokens_since_log: 0,
            last_decode_log_at: SimTime::ZERO,
            last_prefill_log_at: SimTime::ZERO,
            last_decode_end: None,
            joined: Vec::new(),
            joiner_tokens_at: Vec::new(),
        }
    }

    /// The current `new_token_ratio`.
    pub fn new_token_ratio(&self) -> f64 {
        self.ratio
    }

    /// Stop producing `Prefill batch` and retraction log records (Decode lines are always
    /// produced: they carry the server's throughput view).
    pub fn set_verbose_log(&mut self, on: bool) {
        self.log_enabled = on;
    }

    fn place(&self, id: ReqId) -> Place {
        self.places.get(id.0 as usize).copied().unwrap_or_default()
    }

    fn set_place(&mut self, id: ReqId, place: Place) {
        let i = id.0 as usize;
        if i >= self.places.len() {
            self.places.resize(i + 1, Place::Absent);
        }
        self.places[i] = place;
    }

    /// Output tokens a request has generated so far (while running, derived from the
    /// decode-step counter).
    fn output_tokens(&self, id: ReqId, r: &Request) -> u32 {
        match self.place(id) {
            Place::Running {
                since_step,
                out_then,
                ..
            } => out_then + (self.decode_step - since_step) as u32,
            _ => r.out_tokens,
        }
    }

    /// KV tokens a running request holds now: prompt + generated − 1 (the newest token's KV is
    /// written by the next decode step).
    fn running_kv(&self, id: ReqId, r: &Request) -> u64 {
        u64::from(r.prompt_tokens) + u64::from(self.output_tokens(id, r)) - 1
    }

    /// Whether the completion-heap entry `(stay, id)` still refers to a running request.
    fn is_current_stay(&self, id: ReqId, stay: u64) -> bool {
        matches!(self.place(id), Place::Running { stay: s, .. } if s == stay)
    }

    fn bucket_of(&self, kv_then: u64, since: u64) -> usize {
        let p = self.p.page;
        ((kv_then % p + p - since % p) % p) as usize
    }

    /// Pages the next decode step must allocate (`check_decode_mem`).
    fn pages_needed_next_step(&self) -> u64 {
        let p = self.p.page;
        if p == 1 {
            return self.running.len() as u64;
        }
        let idx = ((p - self.decode_step % p) % p) as usize;
        self.page_buckets[idx]
    }

    fn next_step_fits(&self) -> bool {
        self.pages_needed_next_step() * self.p.page <= self.kv.available_tokens()
    }

    /// Put a request into the decode batch.
    fn join_running(&mut self, id: ReqId, reqs: &mut Requests) {
        let stay = self.next_stay;
        self.next_stay += 1;
        self.set_place(
            id,
            Place::Running {
                since_step: self.decode_step,
                out_then: reqs[id].out_tokens,
                stay,
            },
        );
        let r = &mut reqs[id];
        r.phase = Phase::Running;
        let out = r.out_tokens;
        let kv_then = u64::from(r.prompt_tokens) + u64::from(out) - 1;
        let finish_step = self.decode_step + u64::from(r.target_output_tokens - out);
        self.running_kv_tokens += kv_then;
        let b = self.bucket_of(kv_then, self.decode_step);
        self.page_buckets[b] += 1;
        self.finish_heap.push(Reverse((finish_step, stay, id)));
        self.running.push(id);
        self.joined.push(id);
    }

    /// Take a request out of the decode batch's accounting (the caller removes it from
    /// `running`). Returns the KV tokens it held, which are released.
    fn leave_running(&mut self, id: ReqId, reqs: &mut Requests) -> u64 {
        let kv = self.running_kv(id, &reqs[id]);
        let Place::Running {
            since_step,
            out_then,
            ..
        } = self.place(id)
        else {
            panic!("invariant: leave_running on a request that is not running");
        };
        let out = self.output_tokens(id, &reqs[id]);
        let r = &mut reqs[id];
        let kv_then = u64::from(r.prompt_tokens) + u64::from(out_then) - 1;
        r.out_tokens = out;
        self.set_place(id, Place::Absent);
        let b = self.bucket_of(kv_then, since_step);
        self.page_buckets[b] -= 1;
        self.running_kv_tokens -= kv;
        self.kv.free_pages(pages_for(kv, self.p.page));
        kv
    }

    fn push_waiting(&mut self, id: ReqId, reqs: &mut Requests) {
        self.set_place(id, Place::Waiting);
        let r = &mut reqs[id];
        r.phase = Phase::Waiting;
        self.waiting_tokens += u64::from(r.prompt_tokens) + u64::from(r.out_tokens);
        self.waiting.push_back(id);
    }

    /// `update_running_batch` and the decode step.
    fn try_decode(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        if self.finished_since_filter {
            // `filter_batch` removes the finished requests: the batch shrank.
            self.finished_since_filter = false;
            self.batch_is_full = false;
        }
        if self.running.is_empty() {
            self.batch_is_full = false;
            return None;
        }
        if self.next_step_fits() {
            self.ratio = (self.ratio - self.p.ratio_decay).max(self.p.ratio_min);
        } else {
            self.retract(now, reqs, out);
            if self.running.is_empty() {
                return None;
            }
        }
        self.plan_token_gaps(reqs);
        let pages = self.pages_needed_next_step();
        self.kv.alloc_pages(pages);
        let batch = self.running.len() as u64;
        self.running_kv_tokens += batch;
        self.counters.decode_steps += 1;
        self.in_flight = Some(InFlight::Decode { batch });
        Some(self.cost.decode(batch, self.running_kv_tokens))
    }

    /// `ScheduleBatch.retract_decode` and the ratio re-estimate.
    fn retract(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        // SGLang sorts by (generated, −prompt) descending with a stable sort and pops victims
        // from the end: the victim is the smallest key, and among equal keys the latest in batch
        // order. Usually one victim suffices, so select it rather than sort.
        let mut keys: Vec<(u32, Reverse<u32>)> = self
            .running
            .iter()
            .map(|&id| {
                (
                    self.output_tokens(id, &reqs[id]),
                    Reverse(reqs[id].prompt_tokens),
                )
            })
            .collect();
        let mut retracted: Vec<ReqId> = Vec::new();
        let mut freed = 0u64;
        let mut first = true;
        while first || !self.next_step_fits() {
            if self.running.len() == 1 {
                break;
            }
            first = false;
            let mut at = 0;
            for (i, k) in keys.iter().enumerate() {
                if *k <= keys[at] {
                    at = i;
                }
            }
            keys.remove(at);
            let victim = self.running.remove(at);
            if let Place::Running { since_step, .. } = self.place(victim) {
                if since_step < self.decode_step {
                    // It decoded in the latest step; a request that joined since keeps the
                    // time of its prefill's token.
                    reqs[victim].last_token_at = self.last_decode_end;
                }
            }
            freed += self.leave_running(victim, reqs);
            retracted.push(victim);
        }
        let ratio_before = self.ratio;
        if !self.next_step_fits() {
            // Newer SGLang aborts the last request when even it cannot grow.
            let last = self.running.pop().expect("invariant: one request is kept");
            freed += self.leave_running(last, reqs);
            reqs[last].phase = Phase::Rejected;
            self.counters.aborted += 1;
            out.finished.push(last);
        }
        let (decoded, max_new): (u64, u64) = self.running.iter().fold((0, 0), |(d, m), &id| {
            let r = &reqs[id];
            (
                d + u64::from(self.output_tokens(id, r)),
                m + u64::from(r.max_new_tokens),
            )
        });
        let n = self.running.len() as u64;
        self.ratio = ((decoded + RETRACT_DECODE_STEPS * n) as f64 / (max_new + 1) as f64).min(1.0);
        self.counters.eviction_events += 1;
        self.counters.evictions += retracted.len() as u64;
        for &id in &retracted {
            reqs[id].evictions += 1;
            self.push_waiting(id, reqs);
        }
        self.batch_is_full = false;
        if self.log_enabled {
            out.log.push(LogRecord::Evict(Eviction {
                at: now,
                requests: retracted.len() as u64,
                tokens_freed: freed,
                ratio_before,
                ratio_after: self.ratio,
            }));
        }
    }

    fn finish_prefill(
        &mut self,
        now: SimTime,
        items: Vec<PrefillItem>,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        for it in items {
            let Place::Prefilling { done, input } = self.place(it.id) else {
                panic!("invariant: prefill items are prefilling");
            };
            let done = done + it.take;
            if done < input {
                self.set_place(it.id, Place::Prefilling { done, input });
                continue;
            }
            let r = &mut reqs[it.id];
            if self.chunked == Some(it.id) {
                self.chunked = None;
            }
            self.prefilling -= 1;
            // The forward pass over the input yields the next token; after a retraction it
            // comes a long gap after the request's previous one.
            if let (true, Some(prev)) = (r.out_tokens > 0, r.last_token_at) {
                out.token_gap(now - prev, 1);
            }
            r.out_tokens += 1;
            out.generated_tokens += 1;
            r.first_token_at.get_or_insert(now);
            r.last_token_at = Some(now);
            if r.out_tokens >= r.target_output_tokens {
                let kv = u64::from(r.prompt_tokens) + u64::from(r.out_tokens) - 1;
                self.kv.free_pages(pages_for(kv, self.p.page));
                r.phase = Phase::Finished;
                self.set_place(it.id, Place::Absent);
                out.finished.push(it.id);
                // `filter_batch` on the merged prefill batch shrank it.
                self.batch_is_full = false;
            } else {
                self.join_running(it.id, reqs);
            }
        }
    }

    fn finish_decode(&mut self, now: SimTime, batch: u64, reqs: &mut Requests, out: &mut Outbox) {
        self.record_token_gaps(now, batch, out);
        self.decode_step += 1;
        out.generated_tokens += batch;
        self.decode_tokens_since_log += batch;
        let mut any = false;
        while let Some(&Reverse((step, stay, id))) = self.finish_heap.peek() {
            if step > self.decode_step {
                break;
            }
            self.finish_heap.pop();
            if !self.is_current_stay(id, stay) {
                continue;
            }
            debug_assert_eq!(
                step, self.decode_step,
                "invariant: completions are never skipped"
            );
            self.leave_running(id, reqs);
            reqs[id].phase = Phase::Finished;
            out.finished.push(id);
            any = true;
        }
        if any {
            self.running.retain(|&id| reqs[id].phase == Phase::Running);
            self.finished_since_filter = true;
        }
        if self.decode_step % self.p.log_interval == 0 {
            let token = self.kv.used_tokens();
            self.log_decode(&mut out.log, now, batch, token);
        }
    }
}

impl Sglang {
    /// Before a decode step is scheduled (after any retraction): which requests of the batch
    /// joined since the previous step, and when they got their latest token.
    fn plan_token_gaps(&mut self, reqs: &Requests) {
        self.joiner_tokens_at.clear();
        for &id in &self.joined {
            if let Place::Running { since_step, .. } = self.place(id) {
                if since_step == self.decode_step {
                    let at = reqs[id]
                        .last_token_at
                        .expect("invariant: a request joins the decode batch after a token");
                    self.joiner_tokens_at.push(at);
                }
            }
        }
        self.joined.clear();
    }

    /// A decode step of `batch` requests ended at `now`: each request's gap since its previous
    /// token — the previous step's end for those that were in it, their prefill's token for
    /// those that joined since.
    fn record_token_gaps(&mut self, now: SimTime, batch: u64, out: &mut Outbox) {
        let joiners = self.joiner_tokens_at.len() as u64;
        let stayed = batch - joiners;
        if let Some(prev) = self.last_decode_end {
            out.token_gap(now - prev, stayed);
        } else {
            debug_assert_eq!(
                stayed, 0,
                "invariant: the first decode step holds joiners only"
            );
        }
        for &at in &self.joiner_tokens_at {
            out.token_gap(now - at, 1);
        }
        self.joiner_tokens_at.clear();
        self.last_decode_end = Some(now);
    }

    fn start_next_inner(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        debug_assert!(self.in_flight.is_none(), "invariant: one batch at a time");
        if let Some(d) = self.try_prefill(now, reqs, out) {
            return Some(d);
        }
        if let Some(d) = self.try_decode(now, reqs, out) {
            return Some(d);
        }
        // A retraction may have emptied the batch into the queue: the loop spins again at once.
        if let Some(d) = self.try_prefill(now, reqs, out) {
            return Some(d);
        }
        if self.running.is_empty() && self.waiting.is_empty() && self.chunked.is_none() {
            // `on_idle`: reset only when fully idle (0.5.23).
            self.ratio = self.p.ratio_init;
        }
        None
    }
}

impl Scheduler for Sglang {
    fn arrive(&mut self, _now: SimTime, id: ReqId, reqs: &mut Requests) -> Result<(), Rejection> {
        let r = &mut reqs[id];
        let input = u64::from(r.prompt_tokens);
        if input >= self.p.max_req_input_len {
            r.phase = Phase::Rejected;
            return Err(Rejection {
                message: format!(
                    "Input length ({input} tokens) exceeds the maximum allowed length ({} tokens). \
                     Use a shorter input or enable --allow-auto-truncate.",
                    self.p.max_req_input_len
                ),
            });
        }
        let cap = self.p.max_req_len - input - 1;
        let capped = u64::from(r.max_new_tokens).min(cap) as u32;
        r.max_new_tokens = capped;
        r.target_output_tokens = r.target_output_tokens.min(capped);
        self.push_waiting(id, reqs);
        Ok(())
    }

    fn start_next(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        let d = self.start_next_inner(now, reqs, out);
        #[cfg(debug_assertions)]
        self.debug_check(reqs);
        d
    }

    fn finish_current(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        match self.in_flight.take() {
            Some(InFlight::Prefill(items)) => self.finish_prefill(now, items, reqs, out),
            Some(InFlight::Decode { batch }) => self.finish_decode(now, batch, reqs, out),
            None => panic!("invariant: finish_current without a batch in flight"),
        }
        #[cfg(debug_assertions)]
        self.debug_check(reqs);
    }

    fn state(&self) -> ServerState {
        ServerState {
            running: self.running.len() as u64 + self.prefilling,
            queued: self.waiting.len() as u64,
            kv_used_tokens: self.kv.used_tokens(),
            kv_capacity_tokens: self.kv.capacity_tokens(),
        }
    }

    fn counters(&self) -> SchedulerCounters {
        self.counters
    }

    fn skip_decode(
        &mut self,
        now: SimTime,
        limit: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        let s = self.plan_skip(now, limit)?;
        let skip = self.take_skip(now, s, reqs, out);
        #[cfg(debug_assertions)]
        self.debug_check(reqs);
        Some(skip)
    }

    fn stuck_reason(&self, reqs: &Requests) -> Option<String> {
        let &head = self.waiting.front()?;
        let r = &reqs[head];
        let generated = u64::from(r.out_tokens);
        let need = u64::from(r.prompt_tokens)
            + generated
            + u64::from(r.max_new_tokens)
                .saturating_sub(generated)
                .min(self.p.clip)
            + self.p.page;
        Some(format!(
            "the request at the head of the waiting queue needs {need} KV tokens to be admitted \
             (prompt {} + generated {generated} + min(max_new_tokens {}, clip {}) + one page of {}), \
             but the pool holds only {} with nothing running",
            r.prompt_tokens,
            r.max_new_tokens,
            self.p.clip,
            self.p.page,
            self.kv.capacity_tokens()
        ))
    }
}
