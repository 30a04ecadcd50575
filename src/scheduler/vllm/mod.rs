//! vLLM's V1 scheduler, rule by rule (vLLM 0.33.0; `shared/spec/engine-semantics.md` §4). Paths
//! below are under `vllm/` in the vLLM package; every rule cites the file it follows.
//!
//! There are no prefill and decode phases: every request has computed tokens and known tokens
//! (prompt + outputs), and each step gives requests tokens so that the computed ones catch up
//! (`v1/core/sched/scheduler.py: Scheduler.schedule`). What is modelled:
//!
//! * **One token budget per step** (`max_num_batched_tokens`), spent on RUNNING first, in list
//!   order: each request gets `min(known + placeholders − computed, long_prefill_token_threshold,
//!   budget left, max_model_len − computed − 1)` (`schedule.rs`). Prefill chunks and decodes share
//!   the step; a chunk that does not reach the last known token samples nothing.
//! * **Then WAITING**, only if this step preempted nothing, while `len(running) < max_num_seqs`:
//!   the head gets its known tokens (capped as above); without chunked prefill a head that does
//!   not fit the budget left stops admission, and with `scheduler_reserve_full_isl` its whole
//!   known sequence must fit in free blocks (`v1/core/kv_cache_manager.py: allocate_slots`,
//!   `full_sequence_must_fit`), else admission stops: strict head-of-line.
//! * **KV in blocks** of `block_size`; block 0 is vLLM's null block, so the usable blocks are
//!   `num_gpu_blocks − 1` (`v1/core/block_pool.py`); a request holds `⌈tokens / block_size⌉`
//!   (`v1/core/single_type_kv_cache_manager.py: get_num_blocks_to_allocate`).
//! * **Preemption** (FCFS): when a running request cannot get its blocks, the last request of
//!   RUNNING is preempted, again and again, until the blocks fit or the request preempts itself.
//!   The victim frees every block, its computed tokens go back to 0, it is prepended to WAITING
//!   and keeps its outputs, which it recomputes with its prompt (`_preempt_request`) — except
//!   the leading blocks it finds still cached, with prefix caching on.
//! * **`long_prefill_token_threshold`** applies only when running + waiting > 1.
//! * **Async scheduling** (`v1/core/sched/async_scheduler.py`, `v1/engine/core.py:
//!   step_with_batch_queue`): a batch queue of 2 — batch k + 1 is scheduled before batch k's
//!   output is processed, with one output placeholder per request whose chunk reaches its end;
//!   a request whose last token is in flight is not scheduled again; a request preempted with
//!   tokens in flight keeps receiving them ("stale" output). vLLM skips such a request in
//!   WAITING until they arrive (`deferred_waiting`, "Deferred: N reqs" in the stats line), which
//!   with a queue of 2 never happens: they are all in the one batch in flight when it was
//!   preempted, whose output is processed before the next `schedule()`. servesim keeps the skip,
//!   checked unreached in debug builds. Without async scheduling (`EngineCore.step`) each batch's output
//!   is processed before the next is scheduled. The simulated GPU runs the queued batches back
//!   to back.
//! * **Request limits** (`entrypoints/serve/utils/api_utils.py: get_max_tokens`,
//!   `v1/engine/input_processor.py`): a prompt of `max_model_len` tokens or more is refused;
//!   `max_tokens` is capped at `max_model_len − prompt`.
//! * **Prefix caching** (`enable_prefix_caching`, on by default): for workloads that declare
//!   shared prefixes, the block pool block by block (`prefix.rs`) — full blocks named by their
//!   chained hash, the lookup of a WAITING request's leading cached blocks, admission counting
//!   the hit blocks it takes off the free queue, LRU reuse of freed blocks that keep their hash
//!   (`v1/core/kv_cache_manager.py`, `v1/core/block_pool.py`); without shared prefixes only a
//!   preempted request's own freed blocks can hit, and the free queue is kept as counts
//!   (`own_cache.rs`), which the fast-forward follows.
//! * **Logs** (`v1/metrics/loggers.py: LoggingStatLogger`): the stats line every
//!   `VLLM_LOG_STATS_INTERVAL` = 10 s, and the start-up KV lines (`log.rs`).
//!
//! The step time is the scenario's model priced as one mixed forward pass: decode rows, prompt
//! tokens of requests still computing known tokens (resumed ones included: `computed < known −
//! 1`) and the KV attended, Σ over scheduled requests of (computed before the step + scheduled).
//!
//! Files: this one holds the state and the [`Scheduler`] protocol with the batch queue;
//! `schedule.rs` one call of `schedule()`; `output.rs` `update_from_output`; `log.rs` the log
//! lines; `fast_forward.rs` and `turn.rs` the fast-forward, which follows a RUNNING whose every
//! request decodes through its preemptions, admissions and completions, exactly and without
//! visiting each request at each step, and `stretch.rs` its long quiet stretches, taken at once;
//! `prefix.rs` and `own_cache.rs` the prefix cache; `settings.rs` vLLM's scenario keys;
//! `tests.rs` the unit tests.

mod fast_forward;
mod log;
mod output;
mod own_cache;
mod prefix;
mod schedule;
pub mod settings;
mod stretch;
#[cfg(test)]
mod tests;
mod turn;

use std::collections::VecDeque;

use super::{
    EngineSpec, LogRecord, Outbox, Rejection, Scheduler, SchedulerCounters, ServerState, Skip,
};
use crate::cost::StepTimeModel;
use crate::request::{Phase, ReqId, Requests};
use crate::time::{SimDuration, SimTime};
use log::StatsLog;
use settings::VllmSettings;

pub use log::{log_line, NO_PREFIXES, SIMPLIFICATIONS, WITH_PREFIXES, WORDS};

/// The parameters vLLM takes from its flags.
#[derive(Clone, Debug)]
struct Params {
    block: u64,
    usable_blocks: u64,
    max_seqs: usize,
    budget: u64,
    chunked: bool,
    threshold: u64,
    full_isl: bool,
    /// `max_model_len`, or a bound no request reaches.
    max_model_len: u64,
    /// The batch queue: 1 without async scheduling, 2 with it.
    depth: usize,
}

/// Where a request is in vLLM's queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Status {
    /// Not in this scheduler.
    #[default]
    Absent,
    /// In WAITING (new, or preempted).
    Waiting,
    /// In RUNNING.
    Running,
}

/// vLLM's `Request` as far as scheduling goes (`v1/request.py`), indexed by arena id.
#[derive(Clone, Copy, Debug, Default)]
struct Seq {
    status: Status,
    /// Distinguishes this request from a later one in the same arena slot.
    uid: u64,
    prompt: u32,
    /// `SamplingParams.max_tokens` after the `max_model_len` cap.
    max_tokens: u32,
    /// Output tokens at which it stops (EOS, or `max_tokens`).
    stop_at: u32,
    /// Output tokens processed.
    output: u32,
    /// `num_output_placeholders`: tokens scheduled whose output is not processed yet.
    placeholders: u32,
    /// `num_computed_tokens` (placeholders included).
    computed: u32,
    /// `num_in_flight_tokens`.
    in_flight: u32,
    /// `num_stale_output_tokens`: in-flight tokens of a preempted request.
    stale: u32,
    /// KV blocks held.
    blocks: u32,
    /// `num_cached_block`: of them, the leading blocks registered in the prefix cache (kept
    /// only by the own-block cache, `own_cache.rs`).
    hashed: u32,
    /// A preempted request's cached blocks in the free queue: the segment's serial + 1 (0:
    /// none; `own_cache.rs`).
    own: u64,
    /// Preemptions not yet reported to the stats logger (they travel with the next output).
    preemption_events: u32,
    /// Skipped by the WAITING scan (vLLM's `deferred_waiting`).
    deferred: bool,
    /// Evicted since its latest token was reported (set at each `Request::evicted`, cleared
    /// when a token is reported): unset, reporting a token after the first is a no-op, so the
    /// hot loops skip the request's record.
    resumed: bool,
}

impl Seq {
    /// `num_tokens`: prompt and outputs.
    fn tokens(&self) -> u64 {
        u64::from(self.prompt) + u64::from(self.output)
    }

    /// `cache_blocks(request, tokens)` under the own-block cache (`own_cache.rs`): its full
    /// blocks among the first `tokens` tokens are registered, at most the blocks it holds
    /// (`v1/core/single_type_kv_cache_manager.py: cache_blocks`).
    fn cache_to(&mut self, block: u64, tokens: u64) {
        let full = full_blocks(block, tokens) as u32;
        self.hashed = self.hashed.max(full.min(self.blocks));
    }
}

/// One scheduled request in a batch.
#[derive(Clone, Copy, Debug)]
struct Item {
    id: ReqId,
    uid: u64,
    tokens: u32,
    /// The chunk reaches the last known token: the model samples one.
    samples: bool,
}

/// A batch that ran or will run on the GPU.
#[derive(Debug)]
struct Batch {
    items: Vec<Item>,
    /// When the GPU starts it.
    start: SimTime,
    /// When it ends.
    end: SimTime,
}

/// An entry of the batch queue: `schedule()` may return an empty batch, which still takes a place.
#[derive(Debug)]
enum Entry {
    Real(Batch),
    Empty,
}

/// Whether `block` (never 0) is a power of two. `u64::is_power_of_two` counts the bits, which
/// takes a dozen instructions where the CPU has no `popcnt` (the default x86-64 target), and
/// this runs for every request of every step.
#[inline]
fn power_of_two(block: u64) -> bool {
    block & (block - 1) == 0
}

/// `⌈tokens / block⌉`, a shift for a power-of-two `block`.
#[inline]
fn blocks_of(block: u64, tokens: u64) -> u64 {
    if power_of_two(block) {
        (tokens + block - 1) >> block.trailing_zeros()
    } else {
        tokens.div_ceil(block)
    }
}

/// `⌊tokens / block⌋`: the full blocks of `tokens` tokens.
#[inline]
fn full_blocks(block: u64, tokens: u64) -> u64 {
    if power_of_two(block) {
        tokens >> block.trailing_zeros()
    } else {
        tokens / block
    }
}

/// vLLM's scheduler. Owns RUNNING, WAITING, the block pool, the batch queue and every request's
/// counters.
pub struct Vllm {
    p: Params,
    cost: Box<dyn StepTimeModel>,
    running: Vec<ReqId>,
    waiting: VecDeque<ReqId>,
    seqs: Vec<Seq>,
    used_blocks: u64,
    queue: VecDeque<Entry>,
    /// When the GPU is done with every queued batch.
    gpu_free: SimTime,
    /// A request finished since the last `schedule()` (vLLM's `finished_req_ids`).
    finished_pending: bool,
    /// Requests in WAITING skipped by the scan.
    deferred: u64,
    next_uid: u64,
    counters: SchedulerCounters,
    stats: StatsLog,
    /// Item buffers of processed batches, reused.
    spare: Vec<Vec<Item>>,
    /// The schedule pass's plan, reused.
    plan: Vec<schedule::Planned>,
    /// RUNNING as the fast-forward follows it (`fast_forward.rs`); while it is on, RUNNING's
    /// counters in `seqs` (and under async scheduling the items of the batch on the GPU) lag
    /// until [`Vllm::materialize`].
    track: fast_forward::Track,
    /// The block pool with prefix caching (`prefix.rs`): on when `enable_prefix_caching` and
    /// the workload shares prefixes.
    pool: Option<prefix::PrefixPool>,
    /// The free queue as counts (`own_cache.rs`): on when `enable_prefix_caching` and the
    /// workload shares no prefix, so that only a preempted request's own blocks can hit. With
    /// neither, blocks are only counted.
    own: Option<own_cache::FreeQueue>,
}

impl Vllm {
    /// A scheduler with vLLM's settings `spec` for the engine `engine`; `shares_prefixes`:
    /// whether the workload's requests share prompt prefixes (the prefix cache is modelled
    /// block by block only then).
    pub fn new(
        engine: &EngineSpec,
        spec: &VllmSettings,
        shares_prefixes: bool,
        cost: Box<dyn StepTimeModel>,
    ) -> Self {
        let block = u64::from(spec.block_size);
        let usable_blocks = engine.kv_capacity_tokens / block;
        let pool = (spec.enable_prefix_caching && shares_prefixes)
            .then(|| prefix::PrefixPool::new(usable_blocks, block));
        let own = (spec.enable_prefix_caching && !shares_prefixes)
            .then(|| own_cache::FreeQueue::new(usable_blocks));
        Vllm {
            p: Params {
                block,
                usable_blocks,
                max_seqs: spec.max_num_seqs as usize,
                budget: u64::from(spec.max_num_batched_tokens),
                chunked: spec.enable_chunked_prefill,
                threshold: u64::from(spec.long_prefill_token_threshold),
                full_isl: spec.scheduler_reserve_full_isl,
                max_model_len: spec.max_model_len.unwrap_or(1 << 40),
                depth: if spec.async_scheduling { 2 } else { 1 },
            },
            cost,
            running: Vec::new(),
            waiting: VecDeque::new(),
            seqs: Vec::new(),
            used_blocks: 0,
            queue: VecDeque::new(),
            gpu_free: SimTime::ZERO,
            finished_pending: false,
            deferred: 0,
            next_uid: 0,
            counters: SchedulerCounters::default(),
            stats: StatsLog::new(
                usable_blocks * block,
                block,
                spec.max_model_len,
                spec.enable_prefix_caching,
            ),
            spare: Vec::new(),
            plan: Vec::new(),
            track: fast_forward::Track::default(),
            pool,
            own,
        }
    }

    fn seq(&self, id: ReqId) -> &Seq {
        &self.seqs[id.0 as usize]
    }

    fn seq_mut(&mut self, id: ReqId) -> &mut Seq {
        &mut self.seqs[id.0 as usize]
    }

    fn free_blocks(&self) -> u64 {
        self.usable_blocks() - self.used_blocks
    }

    /// After a change of the prefix pool: the used blocks and the request's held blocks.
    fn sync_pool(&mut self, id: ReqId) {
        if let Some(pool) = &self.pool {
            self.used_blocks = self.p.usable_blocks - pool.free_blocks();
            let held = pool.held(id.0 as usize) as u32;
            self.seqs[id.0 as usize].blocks = held;
        }
    }

    fn usable_blocks(&self) -> u64 {
        self.p.usable_blocks
    }

    /// `⌈tokens / block_size⌉` (a shift for the usual power-of-two sizes: this runs for every
    /// request of every step).
    fn blocks_for(&self, tokens: u64) -> u64 {
        blocks_of(self.p.block, tokens)
    }

    /// `get_num_unfinished_requests() > 0 or has_finished_requests()` (`scheduler.py:
    /// has_requests`).
    fn has_requests(&self) -> bool {
        !self.running.is_empty() || !self.waiting.is_empty() || self.finished_pending
    }

    /// What the stats logger reads after each processed output (`make_stats`).
    fn snapshot_stats(&mut self) {
        let (running, waiting) = (self.running.len() as u64, self.waiting.len() as u64);
        let used = self.used_blocks * self.p.block;
        self.stats.snapshot(running, waiting, self.deferred, used);
    }

    /// The batch queue, from the top of `step_with_batch_queue` (or `step`): schedule while the
    /// queue has room, then take the oldest entry. A real batch is handed to the GPU (the engine
    /// ends it at its end time); an empty one is processed at once.
    fn run_queue(&mut self, now: SimTime, reqs: &mut Requests) -> Option<SimDuration> {
        loop {
            if self.has_requests() {
                let entry = self.schedule(now, reqs);
                let executed = matches!(entry, Entry::Real(_));
                self.queue.push_back(entry);
                if self.queue.len() < self.p.depth && (executed || self.has_requests()) {
                    continue;
                }
            } else if self.queue.is_empty() {
                return None;
            }
            match self.queue.front() {
                Some(Entry::Real(b)) => {
                    debug_assert_eq!(b.start, now, "invariant: the oldest batch starts now");
                    return Some(b.end - now);
                }
                Some(Entry::Empty) => {
                    self.queue.pop_front();
                    self.snapshot_stats();
                    if !self.queue.iter().any(|e| matches!(e, Entry::Real(_))) {
                        // Nothing is in flight, so nothing but an arrival can change what
                        // `schedule()` does: idle (vLLM jumps to the next arrival, or spins).
                        self.queue.clear();
                        self.finished_pending = false;
                        return None;
                    }
                }
                None => {
                    unreachable!("invariant: an entry was just queued or the queue is not empty")
                }
            }
        }
    }

    /// The own-block cache's free queue holds exactly the free blocks.
    fn check_queue(&self) {
        #[cfg(debug_assertions)]
        if let Some(q) = &self.own {
            debug_assert_eq!(q.len(), self.free_blocks(), "invariant: the free queue");
        }
    }

    /// Reuse a processed batch's item buffer.
    fn items_buffer(&mut self) -> Vec<Item> {
        self.spare.pop().unwrap_or_default()
    }
}

impl Scheduler for Vllm {
    fn arrive(&mut self, _now: SimTime, id: ReqId, reqs: &mut Requests) -> Result<(), Rejection> {
        let r = &mut reqs[id];
        let prompt = u64::from(r.prompt_tokens);
        let mml = self.p.max_model_len;
        if prompt >= mml {
            r.phase = Phase::Rejected;
            let message = if prompt > mml {
                format!(
                    "The decoder prompt (length {prompt}) is longer than the maximum model length of {mml}. \
                     Make sure that `max_model_len` is no smaller than the number of text tokens."
                )
            } else {
                format!(
                    "The decoder prompt (length {prompt}) plus the number of requested output tokens \
                     (at least 1) is longer than the maximum model length of {mml}. Make sure that \
                     `max_model_len` is no smaller than the number of text tokens (prompt + requested \
                     output tokens)."
                )
            };
            return Err(Rejection { message });
        }
        let max_tokens = u64::from(r.max_new_tokens).min(mml - prompt) as u32;
        r.max_new_tokens = max_tokens;
        r.target_output_tokens = r.target_output_tokens.min(max_tokens);
        r.phase = Phase::Waiting;
        let uid = self.next_uid;
        self.next_uid += 1;
        let seq = Seq {
            status: Status::Waiting,
            uid,
            prompt: r.prompt_tokens,
            max_tokens,
            stop_at: r.target_output_tokens,
            ..Seq::default()
        };
        let i = id.0 as usize;
        if i >= self.seqs.len() {
            self.seqs.resize(i + 1, Seq::default());
        }
        self.seqs[i] = seq;
        if let Some(pool) = &mut self.pool {
            pool.arrive(i, uid, r.prefix);
        }
        self.waiting.push_back(id);
        Ok(())
    }

    fn start_next(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        if let Some(rec) = self.stats.startup() {
            out.log.push(rec);
        }
        self.materialize();
        self.run_queue(now, reqs)
    }

    fn finish_current(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        self.materialize();
        let Some(Entry::Real(batch)) = self.queue.pop_front() else {
            panic!("invariant: finish_current with a batch on the GPU");
        };
        debug_assert_eq!(batch.end, now, "invariant: a batch ends at its end time");
        self.process(batch, now, reqs, out);
        self.check_queue();
    }

    fn state(&self) -> ServerState {
        ServerState {
            running: self.running.len() as u64,
            queued: self.waiting.len() as u64,
            kv_used_tokens: self.used_blocks * self.p.block,
            kv_capacity_tokens: self.usable_blocks() * self.p.block,
        }
    }

    fn counters(&self) -> SchedulerCounters {
        SchedulerCounters {
            cache_evicted_tokens: match (&self.pool, &self.own) {
                (Some(p), _) => p.evicted * self.p.block,
                (None, Some(q)) => q.evicted * self.p.block,
                (None, None) => 0,
            },
            ..self.counters
        }
    }

    fn step_time(&self) -> &dyn StepTimeModel {
        &*self.cost
    }

    fn stuck_reason(&self, _reqs: &Requests) -> Option<String> {
        let &head = self.waiting.front()?;
        let s = self.seq(head);
        let need = self.blocks_for(s.tokens().min(self.p.max_model_len));
        Some(format!(
            "the request at the head of WAITING needs {need} KV blocks of {} tokens for its {} known \
             tokens (prompt {} + outputs {}), but the pool has only {} usable blocks with nothing running",
            self.p.block,
            s.tokens(),
            s.prompt,
            s.output,
            self.usable_blocks()
        ))
    }

    fn may_skip_decode(&self) -> bool {
        // With the block pool, step by step (`skip_decode`).
        self.pool.is_none()
    }

    fn skip_decode(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        if self.pool.is_some() {
            // Each decode step may take blocks off the free queue (evicting hashes) and register
            // full ones; the fast-forward's runs do not follow the block pool: step by step.
            return None;
        }
        let skip = self.fast_forward(now, limit, max_steps, reqs, out);
        self.check_queue();
        skip
    }

    fn next_log_at(&self) -> Option<SimTime> {
        Some(self.stats.next_at())
    }

    fn log_at(&mut self, now: SimTime, out: &mut Outbox) {
        if let Some(rec) = self.stats.tick(now) {
            out.log.push(LogRecord::Interval(rec));
        }
    }
}
