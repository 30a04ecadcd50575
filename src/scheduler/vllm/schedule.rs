//! One call of vLLM's `schedule()` (`v1/core/sched/scheduler.py: Scheduler.schedule`, with
//! `AsyncScheduler._update_after_schedule` under async scheduling): RUNNING first, then WAITING,
//! the blocks each needs (`v1/core/kv_cache_manager.py: allocate_slots`), preemption, and the
//! step's cost.

use super::{Batch, Entry, Item, Status, Vllm};
use crate::cost::MixedStep;
use crate::request::{Phase, ReqId, Requests};
use crate::time::SimTime;

/// What the schedule pass decided for one request, before vLLM advances its counters.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planned {
    id: ReqId,
    tokens: u64,
}

impl Vllm {
    /// `schedule()` at `now`: the batch it builds (started when the GPU is free), or an empty
    /// entry.
    pub(super) fn schedule(&mut self, now: SimTime, reqs: &mut Requests) -> Entry {
        let mut budget = self.p.budget;
        // `long_prefill_token_threshold` only when more than one request is eligible.
        let eligible = self.running.len() + self.waiting.len();
        let threshold = if eligible > 1 { self.p.threshold } else { 0 };
        let cap = |n: u64| {
            if threshold > 0 && n > threshold {
                threshold
            } else {
                n
            }
        };
        let mut planned = std::mem::take(&mut self.plan);
        planned.clear();
        let mut preempted = 0u64;
        // When the GPU starts what this call schedules.
        let start = now.max(self.gpu_free);

        // RUNNING, in list order.
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let id = self.running[i];
            let s = *self.seq(id);
            let (c, h) = (u64::from(s.computed), u64::from(s.placeholders));
            // Async: the previous step already reached max_tokens.
            if h > 0 && (c + 2).saturating_sub(h) >= u64::from(s.prompt) + u64::from(s.max_tokens) {
                i += 1;
                continue;
            }
            // vLLM's `max_model_len − 1 − num_computed_tokens` never binds as servesim
            // schedules, so debug builds (the test suite's) check that it does not: `arrive`
            // caps `max_tokens` at `max_model_len − prompt`; a request is scheduled with at
            // most one batch of it in flight (the queue holds `depth − 1` when `schedule` is
            // called), so `h ≤ 1`; with `h = 0` its output is below `max_tokens`, and with
            // `h = 1` its in-flight batch computed its known tokens (`c ≥ tokens`) and the
            // skip above leaves `c + 1 < prompt + max_tokens`.
            debug_assert!(
                h <= 1 && s.tokens() + h < self.p.max_model_len,
                "invariant: the model length does not cut a scheduled request's tokens"
            );
            let n = cap(s.tokens() + h - c)
                .min(budget)
                .min(self.p.max_model_len.saturating_sub(c + 1));
            if n == 0 {
                i += 1;
                continue;
            }
            let need = |v: &Vllm| {
                let held = u64::from(v.seq(id).blocks);
                v.blocks_for((c + n).min(v.p.max_model_len))
                    .saturating_sub(held)
            };
            let mut needed = need(self);
            let fits = loop {
                if needed <= self.free_blocks() {
                    break true;
                }
                // Preempt the lowest-priority request: under FCFS, the last of RUNNING.
                let victim = self
                    .running
                    .pop()
                    .expect("invariant: the request being scheduled is in RUNNING");
                self.preempt(victim, now, reqs);
                preempted += 1;
                if victim == id {
                    break false;
                }
                needed = need(self);
            };
            if !fits {
                break;
            }
            if needed == 0 && self.pool.is_none() {
                // No block to add (15 steps in 16 for a decode): only the blocks its computed
                // tokens fill are registered, as `take_blocks` would.
                if self.own.is_some() {
                    let block = self.p.block;
                    let s = &mut self.seqs[id.0 as usize];
                    s.cache_to(block, (c + n).min(s.tokens()));
                }
            } else {
                self.take_blocks(id, c + n);
            }
            planned.push(Planned { id, tokens: n });
            budget -= n;
            i += 1;
        }

        // WAITING, only if nothing was preempted.
        if preempted == 0 {
            let mut skipped: Vec<ReqId> = Vec::new();
            while budget > 0 {
                let Some(&id) = self.waiting.front() else {
                    break;
                };
                if self.running.len() >= self.p.max_seqs {
                    self.counters.slot_stops += 1;
                    break;
                }
                let s = *self.seq(id);
                if s.stale > 0 {
                    // Its in-flight output is still to come: skip it this step. Unreached with
                    // a batch queue of at most 2 (vLLM 0.33's `step_with_batch_queue` without
                    // pipeline parallelism, the only depths servesim runs): `schedule` is
                    // called with at most one batch queued, so a request it preempts has tokens
                    // in flight only in that batch; the batch the call builds fills the queue,
                    // so the older one is processed, draining them, before the next call.
                    debug_assert!(
                        self.p.depth > 2,
                        "invariant: a preempted request's stale output arrives before the next \
                         WAITING scan"
                    );
                    self.waiting.pop_front();
                    if !s.deferred {
                        self.seq_mut(id).deferred = true;
                        self.deferred += 1;
                    }
                    skipped.push(id);
                    continue;
                }
                let known = s.tokens();
                // The prefix-cache lookup (`get_computed_blocks`) of a request with nothing
                // computed: its hit is computed already.
                let hit = match &self.pool {
                    Some(pool) => pool.lookup(id.0 as usize, known),
                    None => Vec::new(),
                };
                // Without shared prefixes: what is left of its own blocks freed at its
                // preemption, at most `⌊(num_tokens − 1) / block_size⌋` (`own_cache.rs`).
                let own_hit = match &self.own {
                    Some(q) if s.own > 0 => q.cached(s.own).min((known - 1) / self.p.block),
                    _ => 0,
                };
                let cached = (hit.len() as u64 + own_hit) * self.p.block;
                let n = cap(known - cached);
                if !self.p.chunked && n > budget {
                    break;
                }
                let n = n.min(budget);
                let mml = self.p.max_model_len;
                let fits = match &self.pool {
                    // `allocate_slots`: the whole sequence (`full_sequence_must_fit`), then the
                    // step's slots, each counting the hit blocks taken off the free queue.
                    Some(pool) => {
                        let i = id.0 as usize;
                        let free = pool.free_blocks();
                        !(self.p.full_isl && pool.to_allocate(i, known.min(mml), &hit) > free)
                            && pool.to_allocate(i, (cached + n).min(mml), &hit) <= free
                    }
                    // The hit blocks are free (`ref_cnt` 0): they count among the blocks to
                    // allocate (`get_num_blocks_to_allocate`), so the sum is the plain one.
                    None => {
                        let full =
                            self.p.full_isl && self.blocks_for(known.min(mml)) > self.free_blocks();
                        !full && self.blocks_for((cached + n).min(mml)) <= self.free_blocks()
                    }
                };
                if !fits {
                    self.counters.memory_stops += 1;
                    break;
                }
                self.waiting.pop_front();
                let s = self.seq_mut(id);
                s.status = Status::Running;
                if s.deferred {
                    s.deferred = false;
                    self.deferred -= 1;
                }
                self.running.push(id);
                let r = &mut reqs[id];
                r.phase = Phase::Running;
                if r.admitted_at.is_none() {
                    // `prefill_stats.num_cached_tokens`: the first admission's lookup only.
                    r.cached_tokens = cached as u32;
                    self.counters.first_admissions += 1;
                    self.counters.first_admission_prompt_tokens += u64::from(r.prompt_tokens);
                    self.counters.cached_prompt_tokens += cached;
                    self.counters.cache_hit_requests += u64::from(cached > 0);
                }
                r.admitted_at.get_or_insert(start);
                if self.pool.is_some() {
                    self.stats.lookup(known, cached, r.evictions > 0);
                }
                if let Some(pool) = &mut self.pool {
                    let i = id.0 as usize;
                    let mml = self.p.max_model_len;
                    pool.allocate(i, &hit, (cached + n).min(mml), (cached + n).min(known));
                    self.seq_mut(id).computed = cached as u32;
                    self.sync_pool(id);
                } else {
                    if let Some(q) = &mut self.own {
                        // `touch` the hit, then allocate and cache the rest (`allocate_slots`).
                        let s = &mut self.seqs[id.0 as usize];
                        if s.own > 0 {
                            q.take_back(s.own, own_hit);
                            s.own = 0;
                        }
                        s.blocks = own_hit as u32;
                        s.hashed = own_hit as u32;
                        s.computed = cached as u32;
                        self.used_blocks += own_hit;
                    }
                    self.take_blocks(id, cached + n);
                }
                planned.push(Planned { id, tokens: n });
                budget -= n;
            }
            for &id in skipped.iter().rev() {
                self.waiting.push_front(id);
            }
        }
        if preempted > 0 {
            self.counters.evictions += preempted;
            self.counters.eviction_events += 1;
        }
        // `finished_req_ids` go out with this output (`_update_after_schedule`).
        self.finished_pending = false;
        let entry = if planned.is_empty() {
            Entry::Empty
        } else {
            Entry::Real(self.launch(start, &planned))
        };
        self.plan = planned;
        entry
    }

    /// Price the step, start it at `start`, and advance the counters as
    /// `_update_after_schedule` does.
    fn launch(&mut self, start: SimTime, planned: &[Planned]) -> Batch {
        let mut step = MixedStep::default();
        let mut items = self.items_buffer();
        let placeholders = self.p.depth > 1;
        for p in planned {
            let s = &mut self.seqs[p.id.0 as usize];
            let before = u64::from(s.computed);
            let known = s.tokens() + u64::from(s.placeholders);
            // vLLM's own prefill predicate: `num_computed_tokens < num_tokens − 1`.
            if before + 1 < known {
                step.prefill_seqs += 1;
                step.prefill_tokens += p.tokens;
                step.prefill_kv_tokens += before + p.tokens;
            } else {
                step.decode_seqs += 1;
                step.decode_kv_tokens += before + p.tokens;
            }
            let samples = before + p.tokens >= known;
            items.push(Item {
                id: p.id,
                uid: s.uid,
                tokens: p.tokens as u32,
                samples,
            });
            s.computed += p.tokens as u32;
            s.in_flight += p.tokens as u32;
            // Not `is_prefill_chunk`: the chunk reaches the known tokens and gets a placeholder.
            if placeholders && samples {
                s.placeholders += 1;
            }
        }
        let end = start + self.cost.mixed(step);
        self.gpu_free = end;
        if step.decode_seqs > 0 {
            self.counters.decode_steps += 1;
        } else {
            self.counters.prefill_batches += 1;
        }
        Batch { items, start, end }
    }

    /// Blocks for `tokens` tokens of a request (`allocate_slots` after its checks).
    #[inline]
    fn take_blocks(&mut self, id: ReqId, tokens: u64) {
        if let Some(pool) = &mut self.pool {
            let known = self.seqs[id.0 as usize].tokens();
            let slots = tokens.min(self.p.max_model_len);
            pool.allocate(id.0 as usize, &[], slots, tokens.min(known));
            self.sync_pool(id);
            return;
        }
        let want = self.blocks_for(tokens.min(self.p.max_model_len));
        let s = &mut self.seqs[id.0 as usize];
        let more = want.saturating_sub(u64::from(s.blocks));
        s.blocks += more as u32;
        self.used_blocks += more;
        if let Some(q) = &mut self.own {
            if more > 0 {
                q.take(more);
            }
            let known = s.tokens();
            s.cache_to(self.p.block, tokens.min(known));
        }
        debug_assert!(
            self.used_blocks <= self.usable_blocks(),
            "invariant: KV blocks within the pool"
        );
    }

    /// `_preempt_request`: free every block, recompute from scratch, first in WAITING; output
    /// still in flight arrives later as stale output.
    pub(super) fn preempt(&mut self, id: ReqId, now: SimTime, reqs: &mut Requests) {
        let s = &mut self.seqs[id.0 as usize];
        match &mut self.pool {
            Some(pool) => {
                pool.free(id.0 as usize);
                self.used_blocks = self.p.usable_blocks - pool.free_blocks();
            }
            None => self.used_blocks -= u64::from(s.blocks),
        }
        if let Some(q) = &mut self.own {
            // Its hashed blocks stay cached in the free queue (`own_cache.rs`).
            s.own = q.free_preempted(u64::from(s.blocks), u64::from(s.hashed));
            s.hashed = 0;
        }
        s.blocks = 0;
        s.status = Status::Waiting;
        s.computed = 0;
        s.stale = s.in_flight;
        s.placeholders = 0;
        s.preemption_events += 1;
        let r = &mut reqs[id];
        r.evictions += 1;
        r.evicted(now);
        s.resumed = true;
        r.phase = Phase::Waiting;
        self.waiting.push_front(id);
    }
}
