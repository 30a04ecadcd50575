//! SGLang's scheduler, rule by rule, as SGLang 0.5.23's own code decides (checked request by
//! request against it: `tests/it/golden.rs`). Paths below are under `python/sglang/srt/`.
//!
//! One scheduler iteration runs **either** one prefill (extend) batch **or** one decode step for
//! the whole running batch: prefill has priority and pauses decode
//! (`managers/scheduler.py: get_next_batch_to_run`), unless mixed chunks put the decode rows
//! into the prefill batch. What is modelled:
//!
//! * **Admission** (`managers/schedule_policy.py: PrefillAdder`, `mem_cache/prefill_budget.py`):
//!   the budget is `available − Σ running reservations`, where a running request is charged
//!   `min(max_new − generated, clip) × new_token_ratio` (× 1.0 for `ignore_eos` requests) and a
//!   new one must satisfy `extend + min(max_new − generated, clip) + page < remaining`, then
//!   reserves `ceil_page(extend) + page + min(max_new, clip)`. Strict head-of-line: the pass stops
//!   at the first request that does not fit. With the radix cache disabled, `ignore_eos`
//!   requests take `add_one_req_ignore_eos` instead (see `admission.rs`).
//! * **Chunked prefill**: a prompt longer than the chunk budget is split; at most one request is
//!   mid-chunk; its chunks run back to back (decode stays paused) and it reserves decode tokens
//!   only with its last chunk (`add_chunked_req`).
//! * **The batch-is-full latch** (`get_next_batch_to_run`, `_get_new_batch_prefill_raw`): after
//!   a pass stops for lack of memory (with something running or admitted), or at the slot limit
//!   `max_running_requests`, no admission is attempted until the running batch shrinks — a
//!   request finishes or is retracted (0.5.23 filters finished requests out on every pass) — or
//!   is replaced: a prefill batch merged into an empty running batch becomes it, with the latch
//!   open, and so does a merged batch that shrinks as the continuing chunk is set aside.
//! * **`new_token_ratio`** (`managers/scheduler_components/new_token_ratio_tracker.py`): starts
//!   at `min(init × schedule_conservativeness, 1)`, decays linearly to `init × min_factor` over
//!   `decay_steps` decode steps, is re-estimated after a retraction, and is reset to `init` only
//!   when the server is fully idle.
//! * **Retraction** (`managers/schedule_batch.py: retract_decode`): when the next decode step's
//!   new pages do not fit, requests are retracted — fewest generated tokens first, ties to the
//!   longest prompt — until it fits (at least one, never the last). Retracted requests keep their
//!   output, go to the end of the waiting queue and later re-prefill prompt + output.
//! * **Policies** (`SchedulePolicy.calc_priority`): `fcfs` (no reordering), `lof` (stable sort by
//!   `max_new_tokens` descending), `random` (a fresh shuffle each pass).
//! * **Request limits** (`managers/scheduler.py: init_req_max_new_tokens`,
//!   `managers/tp_worker.py`): `max_req_len = min(context_len − 1, pool − 1)`; a prompt of
//!   `max_req_len − 5` tokens or more is refused; `max_new_tokens` is capped at
//!   `max_req_len − input − 1` and at what the empty pool holds.
//! * **The event loops**: SGLang's default overlapped loop (`event_loop_overlap`: each batch
//!   decided while the previous one runs, see `overlap.rs`) and the step-by-step loop
//!   (`event_loop_normal`, `--disable-overlap-schedule`); mixed chunks (`--enable-mixed-chunk`).
//! * **Logs** (`managers/scheduler_components/metrics_reporter.py`): a `Prefill batch` line per
//!   prefill batch, a `Decode batch` line every `decode_log_interval` decode batches whose
//!   `gen throughput` is the decode tokens since the previous line over the time since it.
//!
//! * **The radix cache** (`mem_cache/unified_radix_cache.py`, `cache.rs`, `radix.rs`), for
//!   workloads that share prompt prefixes: matched at admission, locked while running,
//!   published after each prefill and at the finish, evicted least recently used first;
//!   `lpm` and `dfs-weight` order the queue by it.
//!
//! Simplified, and said so in reports ([`SIMPLIFICATIONS`]): no speculative decoding, no
//! priority preemption, and scheduling takes no time.
//!
//! Cost: a decode step is O(1) when no request completes. Each running request's output count
//! and KV follow from two counters, completions come from a timing wheel over the step at which
//! each request reaches its length (`completions.rs`; a heap only for those further ahead than
//! the wheel spans), and the pages the next step needs are counted per residue class of the KV
//! held modulo the page size. A completion costs finding the request in the batch (a binary
//! search by stay) and taking it out of the batch's vector (a move of the requests after it;
//! with the radix cache, a scan of the batch).
//!
//! Files: this one holds the state, the running batch's bookkeeping and the [`Scheduler`]
//! protocol; `decode.rs` the decode step; `admission.rs` the prefill admission pass
//! (`PrefillAdder`), `reserved.rs` the running requests' reservations it reads;
//! `completions.rs` when requests complete; `retract.rs` retraction; `diagnosis.rs` why a run
//! cannot go on (stuck, or out of memory as SGLang raises it);
//! `cache.rs` the radix cache's use, `radix.rs` its tree; `overlap.rs` the overlapped loop;
//! `fast_forward.rs` the exact skip over runs of identical decode steps; `log.rs` the log lines;
//! `check.rs` the debug-build bookkeeping check; `settings.rs` the `[engine]` keys.

mod admission;
mod cache;
#[cfg(debug_assertions)]
mod check;
mod completions;
mod decode;
mod diagnosis;
mod fast_forward;
mod log;
mod overlap;
mod radix;
mod reserved;
mod retract;
pub mod settings;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::EngineSpec;
use super::{Outbox, Rejection, Scheduler, SchedulerCounters, ServerSample, ServerState, Skip};
use crate::cost::StepTimeModel;
use crate::kv::KvPool;
use crate::request::{Phase, ReqId, Request, Requests};
use crate::rng::Stream;
use crate::time::{SimDuration, SimTime};
use settings::{SchedulePolicy, SglangSettings};

pub use log::{log_line, WORDS};

/// The simplification about prefixes for a workload that declares none.
pub const NO_PREFIXES: &str =
    "no shared prompt prefixes: the radix cache never hits, so finished requests' KV counts as free";

/// What replaces [`NO_PREFIXES`] when the workload declares shared prefixes.
pub const WITH_PREFIXES: &str =
    "prompts share only their group's prefix (one per request; the rest of each prompt and every output unique)";

/// What this model of SGLang simplifies, printed with every report so nobody mistakes the model
/// for the engine.
pub const SIMPLIFICATIONS: &[&str] = &[
    // Still true of every workload that declares no shared prefixes (kept word for word: it is
    // in every report); with declared prefixes the radix cache is modelled and reports say
    // `WITH_PREFIXES` instead.
    NO_PREFIXES,
    "scheduling and processing results take no time: the overlapped loop's one-step lag in decisions is modelled, the CPU time it hides is not",
    "no speculative decoding, priority preemption or data-parallel attention",
    super::NO_OFF_GPU_TIME,
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
    /// The radix cache is on (`--disable-radix-cache` not given): `ignore_eos` requests are
    /// then admitted by the general rule.
    radix_cache: bool,
    /// `is_mixed_chunk`: `--enable-mixed-chunk` with chunked prefill on.
    mixed_chunk: bool,
    /// The overlapped event loop (`--disable-overlap-schedule` not given).
    overlap: bool,
}

/// What is in flight.
#[derive(Debug)]
enum InFlight {
    /// A prefill (extend) batch; with `--enable-mixed-chunk` also the decode batch's
    /// `decode_rows` requests, one token each (`ForwardMode.MIXED`).
    Prefill {
        items: Vec<PrefillItem>,
        decode_rows: u64,
        /// The `Prefill batch` line, completed when the result is processed.
        log: Option<Box<ServerSample>>,
    },
    Decode {
        batch: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// In the running batch. Its output count and its KV follow from two counters, so that a
    /// decode step touches no request: it has `out_then + (decode_step − since_step)` output
    /// tokens and holds `kv_then + (alloc_step − alloc_since)` KV slots. Its stay is in
    /// [`Sglang::stays`].
    Running {
        /// [`Sglang::decode_step`] when it joined.
        since_step: u64,
        /// Output tokens then.
        out_then: u32,
        /// [`Sglang::alloc_step`] when it joined.
        alloc_since: u64,
        /// KV slots it held then.
        kv_then: u64,
        /// Its `max_new_tokens`: its admission reservation follows (see `reserved.rs`).
        max_new: u32,
        /// Whether it reserves at a ratio of 1 (`ignore_eos`) rather than `new_token_ratio`.
        ignore_eos: bool,
        /// Its prompt tokens (retraction's second key).
        prompt: u32,
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
    /// `running_batch.batch_is_full`: admission is not attempted while it is set.
    batch_is_full: bool,
    /// The latest admission pass stopped for lack of memory (a hint for the next: see
    /// `admission.rs`, `head_surely_refused`).
    memory_stopped: bool,
    ratio: f64,
    /// The ratio's decay over a fast-forward run.
    decay: fast_forward::Decay,
    /// Decode tokens given to the running batch so far (by processed decode and mixed
    /// batches): a running request's output count derives from it.
    decode_step: u64,
    /// When the latest decode round's tokens came (the end of the batch that gave them): a
    /// running request's latest token came then, or later outside a decode round if it joined
    /// the batch since (see [`Outbox::evicted`]).
    last_round_end: SimTime,
    /// Decode slots allocated to the running batch so far (when decode and mixed batches are
    /// scheduled): a running request's KV derives from it.
    alloc_step: u64,
    /// `forward_ct_decode`: decode batches processed so far (the `Decode batch` line's cadence).
    decode_batches: u64,
    next_stay: u64,
    /// `(step at which it generates its last token, stay, id)` of each running request.
    finish: completions::Completions,
    /// [`advance_decode`](Self::advance_decode)'s completions and their places in the batch,
    /// buffers kept between calls.
    done_buf: Vec<completions::Entry>,
    index_buf: Vec<usize>,
    /// The requests a retraction takes back, a buffer kept between calls.
    retracted: Vec<ReqId>,
    /// A fast-forward's Decode lines, `(step in the run, when)`, a buffer kept between calls.
    line_steps: Vec<(u64, SimTime)>,
    /// Prefill batches' item lists, kept for the next admission passes once the batches are
    /// done.
    spare_items: Vec<Vec<PrefillItem>>,
    /// The running requests' admission reservations, as exact sums (`reserved.rs`).
    reserved: reserved::Reserved,
    /// Overlapped loop: `(decode step from which its next token is its max_new_tokens-th,
    /// stay, id)` of each running request — a filter that lets
    /// [`set_aside_finishing`](Self::set_aside_finishing) skip its scan of the batch when no
    /// request can be finishing by length (entries of past stays are dropped lazily).
    length_due: BinaryHeap<Reverse<(u64, u64, ReqId)>>,
    /// Σ KV tokens held by the decode batch.
    running_kv_tokens: u64,
    /// Σ over the decode batch of `out_then − since_step` (a request's output count less the
    /// decode counter: constant while it runs, but for its first token) and of
    /// `max_new_tokens`: the sums of retraction's ratio re-estimate, without a scan.
    out_less_since: i64,
    max_new_sum: u64,
    /// Running requests by `(kv_then − alloc_since) mod page` (see the module docs; the
    /// allocation counter, which the overlapped loop runs a step ahead of the decode one); not kept
    /// with one-token pages, where every running request needs a page at every step.
    page_buckets: Vec<u64>,
    in_flight: Option<InFlight>,
    /// Overlapped loop: the batch decided while `in_flight` runs, and its duration.
    planned: Option<(InFlight, SimDuration)>,
    /// Overlapped loop: requests the batch in flight finishes by length, set aside from the
    /// running batch, with the KV slots they hold.
    leaving: Vec<(ReqId, u64)>,
    /// Each request's place, by arena index.
    places: Vec<Place>,
    /// Each running request's stay, by arena index: the unique number of its stay in the batch
    /// (it guards stale completion entries, and orders the batch but for mixed batches);
    /// [`NOT_RUNNING`] for the others. Kept apart from [`places`](Self::places) so that the
    /// searches by stay read a dense array.
    stays: Vec<u64>,
    /// The radix cache, when it is on and the workload shares prefixes.
    cache: Option<cache::Cache>,
    rng: Stream,
    counters: SchedulerCounters,
    log_enabled: bool,
    /// The waiting queue when the batch in flight was launched, after the decisions made then:
    /// what its log line reports (SGLang takes new requests in only when it decides).
    queue_at_launch: u64,
    decode_tokens_since_log: u64,
    last_decode_log_at: SimTime,
    last_prefill_log_at: SimTime,
}

impl Sglang {
    /// A scheduler with SGLang's settings `spec` for the engine `engine`; `rng` is the
    /// "schedule_policy" stream. With `context_len` the request-length limits follow the
    /// model's context too. With `shares_prefixes` (and the radix cache on) the cache is kept.
    pub fn new(
        engine: &EngineSpec,
        spec: &SglangSettings,
        context_len: Option<u64>,
        shares_prefixes: bool,
        cost: Box<dyn StepTimeModel>,
        rng: Stream,
    ) -> Self {
        // `new_token_ratio_tracker.py`: init = min(SGLANG_INIT_NEW_TOKEN_RATIO ×
        // schedule_conservativeness, 1), floor = min(init × factor, 1).
        let r = &spec.new_token_ratio;
        let ratio_init = (r.init * spec.schedule_conservativeness).min(1.0);
        let ratio_min = (ratio_init * r.min_factor).min(1.0);
        let ratio_decay = (ratio_init - ratio_min) / f64::from(r.decay_steps);
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
                ratio_decay,
                clip: u64::from(r.clip_max_new_tokens),
                graph_max_bs: u64::from(spec.cuda_graph_max_bs),
                max_req_len,
                max_req_input_len: max_req_len.saturating_sub(5),
                radix_cache: !spec.disable_radix_cache,
                mixed_chunk: spec.enable_mixed_chunk && spec.chunked_prefill_size.is_some(),
                overlap: !spec.disable_overlap_schedule,
            },
            cost,
            kv: KvPool::new(pool, page),
            waiting: VecDeque::new(),
            waiting_tokens: 0,
            running: Vec::new(),
            chunked: None,
            prefilling: 0,
            batch_is_full: false,
            memory_stopped: false,
            ratio: ratio_init,
            decay: fast_forward::Decay::new(ratio_decay, ratio_min),
            decode_step: 0,
            alloc_step: 0,
            decode_batches: 0,
            next_stay: 0,
            finish: completions::Completions::new(max_req_len + 1),
            done_buf: Vec::new(),
            index_buf: Vec::new(),
            retracted: Vec::new(),
            line_steps: Vec::new(),
            spare_items: Vec::new(),
            length_due: BinaryHeap::new(),
            reserved: reserved::Reserved::default(),
            running_kv_tokens: 0,
            out_less_since: 0,
            max_new_sum: 0,
            page_buckets: vec![0; page as usize],
            in_flight: None,
            planned: None,
            leaving: Vec::new(),
            places: Vec::new(),
            stays: Vec::new(),
            cache: (shares_prefixes && !spec.disable_radix_cache).then(|| cache::Cache::new(page)),
            rng,
            counters: SchedulerCounters::default(),
            log_enabled: true,
            queue_at_launch: 0,
            decode_tokens_since_log: 0,
            last_decode_log_at: SimTime::ZERO,
            last_prefill_log_at: SimTime::ZERO,
            last_round_end: SimTime::ZERO,
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

    #[inline]
    fn place(&self, id: ReqId) -> Place {
        self.places.get(id.0 as usize).copied().unwrap_or_default()
    }

    /// Make room for the place of `id`, a request arriving (before its first
    /// [`set_place`](Self::set_place)).
    #[inline]
    fn make_place(&mut self, id: ReqId) {
        let i = id.0 as usize;
        if i >= self.places.len() {
            self.places.resize(i + 1, Place::Absent);
            self.stays.resize(i + 1, NOT_RUNNING);
        }
    }

    /// Set the place of `id`, a request that has arrived ([`make_place`](Self::make_place)).
    #[inline]
    fn set_place(&mut self, id: ReqId, place: Place) {
        self.places[id.0 as usize] = place;
    }

    /// Output tokens a request has generated so far (while running, derived from the
    /// decode-step counter).
    #[inline]
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

    /// KV slots a running request holds now: prompt + generated − 1 (the newest token's KV is
    /// written by the next decode step), plus a slot per decode step scheduled and not yet
    /// processed.
    #[inline]
    fn running_kv(&self, id: ReqId) -> u64 {
        match self.place(id) {
            Place::Running {
                alloc_since,
                kv_then,
                ..
            } => kv_then + (self.alloc_step - alloc_since),
            _ => panic!("invariant: running_kv of a request that is not running"),
        }
    }

    /// Whether the `length_due` heap's entry `(stay, id)` still refers to a running request.
    #[inline]
    fn is_current_stay(&self, id: ReqId, stay: u64) -> bool {
        current_stay(&self.stays, id, stay)
    }

    /// The stay of `id`, a running request.
    #[inline]
    fn stay(&self, id: ReqId) -> u64 {
        let stay = self.stays[id.0 as usize];
        debug_assert_ne!(
            stay, NOT_RUNNING,
            "invariant: only running requests have a stay"
        );
        stay
    }

    /// The page bucket of a running request that held `kv_then` KV slots at allocation step
    /// `since`, pages being of more than one token.
    #[inline]
    fn bucket_of(&self, kv_then: u64, since: u64) -> usize {
        let p = self.p.page;
        ((kv_then % p + p - since % p) % p) as usize
    }

    /// [`pages_for`](crate::kv::pages_for) `tokens` — without its division for one-token
    /// pages (SGLang's default).
    #[inline(always)]
    fn pages(&self, tokens: u64) -> u64 {
        match self.p.page {
            1 => tokens,
            p => crate::kv::pages_for(tokens, p),
        }
    }

    /// Pages the next decode step must allocate (`check_decode_mem`).
    #[inline]
    fn pages_needed_next_step(&self) -> u64 {
        let p = self.p.page;
        if p == 1 {
            return self.running.len() as u64;
        }
        let idx = ((p - self.alloc_step % p) % p) as usize;
        self.page_buckets[idx]
    }

    #[inline]
    fn next_step_fits(&self) -> bool {
        self.pages_needed_next_step() * self.p.page <= self.free_tokens()
    }

    /// Put a request into the running batch, holding the KV of its input (prompt + output so
    /// far, the newest output token excepted).
    #[inline]
    fn join_running(&mut self, id: ReqId, reqs: &mut Requests) {
        self.join_running_at(id, reqs, false, true);
    }

    /// [`join_running`](Self::join_running) for a request whose first token is still to come
    /// (`first_token_pending`: it holds its whole input's KV and its output count excludes that
    /// token); without `schedule_finish` its completion is scheduled when that token arrives.
    #[inline(always)]
    fn join_running_at(
        &mut self,
        id: ReqId,
        reqs: &mut Requests,
        first_token_pending: bool,
        schedule_finish: bool,
    ) {
        let stay = self.next_stay;
        self.next_stay += 1;
        let r = &mut reqs[id];
        r.phase = Phase::Running;
        let out = r.out_tokens;
        let kv_then =
            u64::from(r.prompt_tokens) + u64::from(out) + u64::from(first_token_pending) - 1;
        let finish_step = self.decode_step + u64::from(r.target_output_tokens - out);
        let max_new = r.max_new_tokens;
        let target = r.target_output_tokens;
        let place = Place::Running {
            since_step: self.decode_step,
            out_then: out,
            alloc_since: self.alloc_step,
            kv_then,
            max_new,
            ignore_eos: r.ignore_eos,
            prompt: r.prompt_tokens,
        };
        self.set_place(id, place);
        self.stays[id.0 as usize] = stay;
        self.count_reserved_at(id, place, Some(target));
        self.running_kv_tokens += kv_then;
        self.out_less_since += i64::from(out) - self.decode_step as i64;
        self.max_new_sum += u64::from(max_new);
        if self.p.page > 1 {
            let b = self.bucket_of(kv_then, self.alloc_step);
            self.page_buckets[b] += 1;
        }
        if schedule_finish {
            self.finish.push(finish_step, stay, id);
        }
        // A request whose first token is pending is counted with it (a step early: the filter
        // may only err early), so that the token's arrival needs no second entry. One that
        // stops short of `max_new_tokens` (by EOS) leaves before it could be set aside: a
        // decision sees running requests with fewer than `target` tokens, and sets aside only
        // those one token short of `max_new_tokens`.
        let counted = out + u32::from(first_token_pending);
        if target >= max_new {
            self.note_length_due(id, stay, self.decode_step, counted, max_new);
        }
        self.running.push(id);
    }

    /// Take a request out of the running batch's accounting (the caller removes it from
    /// `running`), its KV still held.
    #[inline]
    fn forget_running(&mut self, id: ReqId) {
        self.forget_running_at(id, self.place(id));
    }

    /// [`forget_running`](Self::forget_running) of `id`, whose place is `place`. Returns the KV
    /// slots it holds.
    #[inline(always)]
    fn forget_running_at(&mut self, id: ReqId, place: Place) -> u64 {
        let Place::Running {
            alloc_since,
            kv_then,
            since_step,
            out_then,
            max_new,
            ..
        } = place
        else {
            panic!("invariant: forget_running on a request that is not running");
        };
        let kv = kv_then + (self.alloc_step - alloc_since);
        self.out_less_since -= i64::from(out_then) - since_step as i64;
        self.max_new_sum -= u64::from(max_new);
        self.count_reserved_at(id, place, None);
        self.set_place(id, Place::Absent);
        self.stays[id.0 as usize] = NOT_RUNNING;
        if self.p.page > 1 {
            let b = self.bucket_of(kv_then, alloc_since);
            self.page_buckets[b] -= 1;
        }
        self.running_kv_tokens -= kv;
        kv
    }

    /// Take a request out of the running batch (the caller removes it from `running`) and
    /// release its KV — a finished request's published to the radix cache first. Returns the KV
    /// slots released.
    #[inline(always)]
    fn leave_running(&mut self, id: ReqId, reqs: &mut Requests) -> u64 {
        let place = self.place(id);
        let Place::Running {
            since_step,
            out_then,
            ..
        } = place
        else {
            panic!("invariant: leave_running on a request that is not running");
        };
        let out = out_then + (self.decode_step - since_step) as u32;
        let kv = self.forget_running_at(id, place);
        let r = &mut reqs[id];
        r.out_tokens = out;
        let written = (u64::from(r.prompt_tokens) + u64::from(out) - 1).min(kv);
        self.release_kv(id, kv, Some(written as u32), reqs);
        kv
    }

    #[inline(always)]
    fn push_waiting(&mut self, id: ReqId, reqs: &mut Requests) {
        self.set_place(id, Place::Waiting);
        let r = &mut reqs[id];
        r.phase = Phase::Waiting;
        self.waiting_tokens += u64::from(r.prompt_tokens) + u64::from(r.out_tokens);
        self.waiting.push_back(id);
    }

    fn finish_prefill(
        &mut self,
        now: SimTime,
        items: Vec<PrefillItem>,
        decode_rows: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        // A mixed batch gives its decode rows their token first; they stay behind the prefilled
        // requests in batch order (`mix_with_running` appends the running batch).
        let earlier: Option<Vec<ReqId>> = (decode_rows > 0).then(|| {
            self.advance_decode(now, reqs, out);
            // The running batch was handed to the mixed batch: what comes back is new.
            self.batch_is_full = false;
            std::mem::take(&mut self.running)
        });
        // `get_next_batch_to_run` merges this batch into the running one. The latch reopens if
        // the batch shrinks when filtered (a request finished, or the request still between
        // chunks is set aside) or if the running batch was empty: the prefill batch then becomes
        // the running batch, a new `ScheduleBatch` whose `batch_is_full` is false — the stop of
        // the admission that built it is forgotten.
        if self.running.is_empty() {
            self.batch_is_full = false;
        }
        // The request between chunks publishes its chunk last (`stash_chunked_request`, at the
        // next `get_next_batch_to_run`).
        let mut stash = None;
        for &it in &items {
            let Place::Prefilling { done, input } = self.place(it.id) else {
                panic!("invariant: prefill items are prefilling");
            };
            let done = done + it.take;
            if done < input {
                self.set_place(it.id, Place::Prefilling { done, input });
                self.batch_is_full = false;
                stash = Some((it.id, done));
                continue;
            }
            let r = &mut reqs[it.id];
            if self.chunked == Some(it.id) {
                self.chunked = None;
            }
            self.prefilling -= 1;
            // The forward pass over the input yields the next token.
            r.out_tokens += 1;
            out.generated_tokens += 1;
            out.first_token(r, now);
            if r.out_tokens >= r.target_output_tokens {
                let kv = u64::from(r.prompt_tokens) + u64::from(r.out_tokens) - 1;
                r.phase = Phase::Finished;
                self.release_kv(it.id, kv, Some(kv as u32), reqs);
                self.set_place(it.id, Place::Absent);
                out.finished.push(it.id);
                self.batch_is_full = false;
            } else {
                self.join_running(it.id, reqs);
                self.checkpoint(it.id, done, reqs);
            }
        }
        if let Some((id, done)) = stash {
            self.checkpoint(id, done, reqs);
        }
        if let Some(earlier) = earlier {
            self.running.extend(earlier);
        }
        self.recycle_items(items);
    }

    /// Keep a processed prefill batch's item list for the next admission pass.
    #[inline]
    fn recycle_items(&mut self, mut items: Vec<PrefillItem>) {
        // A few (the overlapped loop has a batch decided while another runs).
        if self.spare_items.len() < 4 {
            items.clear();
            self.spare_items.push(items);
        }
    }
}

impl Sglang {
    /// `get_next_batch_to_run`: the next batch and its duration, its KV allocated. With the
    /// overlapped loop a batch may be in flight (scheduled, not processed).
    #[inline(always)]
    fn decide(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<(InFlight, SimDuration)> {
        if let Some(b) = self.try_prefill(now, reqs, out) {
            return Some(b);
        }
        if out.out_of_memory.is_some() {
            return None;
        }
        if let Some(b) = self.try_decode(now, reqs, out) {
            return Some(b);
        }
        // A retraction may have emptied the batch into the queue: the loop spins again at once.
        if let Some(b) = self.try_prefill(now, reqs, out) {
            return Some(b);
        }
        if self.in_flight.is_none()
            && self.running.is_empty()
            && self.waiting.is_empty()
            && self.chunked.is_none()
        {
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
        // `init_req_max_new_tokens` (`managers/scheduler.py`): the context's limit, then the
        // empty pool's (`allocator.max_new_tokens_for_memory`: pool − paged input − page − 1).
        let page = self.p.page;
        let by_memory = self
            .kv
            .capacity_tokens()
            .saturating_sub(self.pages(input) * page + page + 1);
        let cap = (self.p.max_req_len - input - 1).min(by_memory);
        let capped = u64::from(r.max_new_tokens).min(cap) as u32;
        r.max_new_tokens = capped;
        r.target_output_tokens = r.target_output_tokens.min(capped);
        self.make_place(id);
        self.push_waiting(id, reqs);
        self.cache_arrive(id, reqs);
        Ok(())
    }

    fn start_next(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        debug_assert!(self.in_flight.is_none(), "invariant: one batch at a time");
        let d = if self.p.overlap {
            self.start_overlapped(now, reqs, out)
        } else {
            self.decide(now, reqs, out).map(|(batch, d)| {
                self.in_flight = Some(batch);
                d
            })
        };
        self.queue_at_launch = self.waiting.len() as u64;
        // A batch that could not be allocated ends the run where it was being built.
        #[cfg(debug_assertions)]
        if out.out_of_memory.is_none() {
            self.debug_check(reqs);
        }
        d
    }

    fn finish_current(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        match self.in_flight.take() {
            Some(batch) if self.p.overlap => self.finish_overlapped(now, batch, reqs, out),
            Some(InFlight::Prefill {
                items,
                decode_rows,
                log,
            }) => {
                self.finish_prefill(now, items, decode_rows, reqs, out);
                self.log_prefill(now, log, out);
            }
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
            kv_used_tokens: self.usage_tokens(),
            kv_capacity_tokens: self.kv.capacity_tokens(),
        }
    }

    fn counters(&self) -> SchedulerCounters {
        SchedulerCounters {
            cache_evicted_tokens: self.cache.as_ref().map_or(0, |c| c.tree.evicted_tokens()),
            ..self.counters
        }
    }

    fn step_time(&self) -> &dyn StepTimeModel {
        &*self.cost
    }

    #[inline]
    fn may_skip_decode(&self) -> bool {
        self.may_skip()
    }

    fn skip_decode(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        // Most calls end here, before the run's frame is set up.
        if !self.may_skip() {
            return None;
        }
        self.skip_run(now, limit, max_steps, reqs, out)
    }

    fn stuck_reason(&self, reqs: &Requests) -> Option<String> {
        self.why_stuck(reqs)
    }
}

/// [`Sglang::stays`] of a request that is not running (stays count up from 0).
const NOT_RUNNING: u64 = u64::MAX;

/// Whether `(id, stay)` is a running request's current stay in the batch, by the stays.
#[inline(always)]
fn current_stay(stays: &[u64], id: ReqId, stay: u64) -> bool {
    stays.get(id.0 as usize) == Some(&stay)
}
