//! The prefill admission pass: `managers/schedule_policy.py: PrefillAdder` with its memory budget
//! (`mem_cache/prefill_budget.py: PrefillBudget`), the policy's ordering
//! (`SchedulePolicy.calc_priority`) and `Scheduler.get_new_batch_prefill` (`managers/scheduler.py`).

use std::cmp::Reverse;

use rand::seq::SliceRandom;

use super::settings::SchedulePolicy;
use super::{InFlight, Place, PrefillItem, Sglang};
use crate::kv::pages_for;
use crate::request::{Phase, ReqId, Requests};
use crate::scheduler::{LogRecord, Outbox, ServerSample, StepKind};
use crate::time::{SimDuration, SimTime};

/// How an admission attempt ended (`AddReqResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AddResult {
    Continue,
    NoToken,
    Other,
}

/// The per-pass budget (`PrefillAdder` + `PrefillBudget`).
struct Adder {
    available: f64,
    total_offset: f64,
    current_offset: f64,
    rem_input: i64,
    rem_chunk: Option<i64>,
    page: u64,
}

impl Adder {
    fn remaining_total(&self) -> f64 {
        self.available - self.total_offset
    }
    fn remaining_current(&self) -> f64 {
        self.available - self.current_offset
    }
    fn ceil_page(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.page) * self.page
    }
    /// `PrefillBudget.reserve` and the input/chunk budget updates.
    fn reserve(&mut self, extend: u64, max_new: u64) {
        let extend = self.ceil_page(extend);
        let immediate = (extend + self.page) as f64;
        self.total_offset += immediate + max_new as f64;
        self.current_offset += immediate;
        self.rem_input -= extend as i64;
        if let Some(c) = self.rem_chunk.as_mut() {
            *c -= extend as i64;
        }
    }
    /// `PrefillAdder.budget_state`.
    fn state(&self) -> AddResult {
        if !(self.remaining_total() > 0.0 && self.remaining_current() > 0.0) {
            return AddResult::NoToken;
        }
        if self.rem_input <= 0 || self.rem_chunk.is_some_and(|c| c <= 0) {
            return AddResult::Other;
        }
        AddResult::Continue
    }
}

impl Sglang {
    /// Σ over the decode batch of `min(max_new − generated, clip) × ratio` (1.0 for
    /// `ignore_eos`): `PrefillAdder._get_running_request_total_token_offset`.
    fn running_reservations(&self, reqs: &Requests) -> f64 {
        self.running
            .iter()
            .map(|&id| {
                let r = &reqs[id];
                let left = u64::from(r.max_new_tokens)
                    .saturating_sub(u64::from(self.output_tokens(id, r)))
                    .min(self.p.clip) as f64;
                left * if r.ignore_eos { 1.0 } else { self.ratio }
            })
            .sum()
    }

    fn sort_waiting(&mut self, reqs: &Requests) {
        match self.p.policy {
            SchedulePolicy::Fcfs => {}
            SchedulePolicy::Lof => self
                .waiting
                .make_contiguous()
                .sort_by_key(|&id| Reverse(reqs[id].max_new_tokens)),
            SchedulePolicy::Random => self.waiting.make_contiguous().shuffle(&mut self.rng),
        }
    }

    /// `get_new_batch_prefill`: admit what fits and start a prefill batch.
    pub(super) fn try_prefill(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        if self.running.is_empty() {
            self.batch_is_full = false;
        }
        if (self.batch_is_full || self.waiting.is_empty()) && self.chunked.is_none() {
            return None;
        }
        let running_bs = self.running.len() as u64;
        let allocatable = self.p.max_running.saturating_sub(running_bs);
        if allocatable == 0 && self.chunked.is_none() {
            self.batch_is_full = true;
            self.counters.slot_stops += 1;
            return None;
        }
        self.sort_waiting(reqs);
        let mut adder = Adder {
            available: self.kv.available_tokens() as f64,
            total_offset: self.running_reservations(reqs),
            current_offset: 0.0,
            rem_input: self.p.max_prefill as i64,
            rem_chunk: self.p.chunk.map(|c| c as i64),
            page: self.p.page,
        };
        let mut items: Vec<PrefillItem> = Vec::new();

        // The request between chunks goes first (`add_chunked_req`).
        let mut chunk_continues = false;
        if let Some(id) = self.chunked {
            let Place::Prefilling { done, input } = self.place(id) else {
                panic!("invariant: the chunked request is prefilling");
            };
            let chunk_budget = adder.rem_chunk.expect("invariant: chunking is enabled");
            let mut rem = chunk_budget.min(adder.remaining_total().floor() as i64);
            if rem <= 0 {
                rem = chunk_budget;
            }
            let left = i64::from(input - done);
            let truncated = left > rem;
            let take = if truncated { rem } else { left } as u64;
            chunk_continues = truncated;
            let max_new = if truncated {
                0
            } else {
                u64::from(reqs[id].max_new_tokens).min(self.p.clip)
            };
            adder.reserve(take, max_new);
            items.push(PrefillItem {
                id,
                take: take as u32,
            });
        }

        let mut new_chunked: Option<ReqId> = None;
        let mut admitted = 0usize;
        for &id in self.waiting.iter() {
            if adder.state() == AddResult::Other {
                break;
            }
            if items.len() as u64 >= allocatable {
                self.batch_is_full = true;
                self.counters.slot_stops += 1;
                break;
            }
            let r = &reqs[id];
            let generated = u64::from(r.out_tokens);
            let extend = u64::from(r.prompt_tokens) + generated;
            let max_new_left = u64::from(r.max_new_tokens)
                .saturating_sub(generated)
                .min(self.p.clip);
            let total = (extend + max_new_left + self.p.page) as f64;
            let result = if total >= adder.remaining_total() {
                AddResult::NoToken
            } else {
                let input_tokens = adder.ceil_page(extend);
                match adder.rem_chunk {
                    None if !items.is_empty() && input_tokens as i64 >= adder.rem_input => {
                        AddResult::Other
                    }
                    Some(c) if input_tokens as i64 > c => {
                        let trunc = (c.max(0) as u64) / self.p.page * self.p.page;
                        if trunc == 0 || new_chunked.is_some() || chunk_continues {
                            AddResult::Other
                        } else {
                            adder.reserve(trunc, 0);
                            items.push(PrefillItem {
                                id,
                                take: trunc as u32,
                            });
                            new_chunked = Some(id);
                            admitted += 1;
                            adder.state()
                        }
                    }
                    _ => {
                        adder.reserve(extend, u64::from(r.max_new_tokens).min(self.p.clip));
                        items.push(PrefillItem {
                            id,
                            take: extend as u32,
                        });
                        admitted += 1;
                        adder.state()
                    }
                }
            };
            if result != AddResult::Continue {
                if result == AddResult::NoToken {
                    self.batch_is_full = !items.is_empty() || !self.running.is_empty();
                    self.counters.memory_stops += 1;
                }
                break;
            }
        }
        if items.is_empty() {
            return None;
        }

        // Admitted requests are a prefix of the (sorted) waiting queue.
        for _ in 0..admitted {
            let id = self
                .waiting
                .pop_front()
                .expect("invariant: admitted requests were waiting");
            let r = &mut reqs[id];
            self.waiting_tokens -= u64::from(r.prompt_tokens) + u64::from(r.out_tokens);
            let input = r.prompt_tokens + r.out_tokens;
            r.phase = Phase::Running;
            r.admitted_at.get_or_insert(now);
            self.set_place(id, Place::Prefilling { done: 0, input });
            self.prefilling += 1;
        }
        if let Some(id) = new_chunked {
            self.chunked = Some(id);
        }

        let new_token: u64 = items.iter().map(|i| u64::from(i.take)).sum();
        if self.log_enabled {
            let pending_chunk = self.chunked.map_or(0, |id| match self.place(id) {
                Place::Prefilling { done, input } => {
                    let this = items.iter().find(|i| i.id == id).map_or(0, |i| i.take);
                    u64::from(input - done - this)
                }
                _ => 0,
            });
            let dt = now.saturating_since(self.last_prefill_log_at).as_secs_f64();
            out.log.push(LogRecord::Batch(ServerSample {
                at: now,
                kind: StepKind::Prefill,
                running: running_bs,
                queued: self.waiting.len() as u64,
                // Read before this batch's allocation.
                kv_used_tokens: self.kv.used_tokens(),
                kv_capacity_tokens: self.kv.capacity_tokens(),
                new_seqs: items.len() as u64,
                new_tokens: new_token,
                cached_tokens: 0,
                pending_tokens: self.waiting_tokens + pending_chunk,
                gen_tok_per_s: 0.0,
                input_tok_per_s: if dt > 0.0 { new_token as f64 / dt } else { 0.0 },
                cuda_graph: false,
            }));
            self.last_prefill_log_at = now;
        }

        // Allocate the KV of this batch's tokens (`prepare_for_extend`).
        for it in &items {
            let Place::Prefilling { done, .. } = self.place(it.id) else {
                panic!("invariant: prefill items are prefilling");
            };
            let before = pages_for(u64::from(done), self.p.page);
            let after = pages_for(u64::from(done + it.take), self.p.page);
            self.kv.alloc_pages(after - before);
        }
        self.counters.prefill_batches += 1;
        let d = self.cost.prefill(items.len() as u64, new_token);
        self.in_flight = Some(InFlight::Prefill(items));
        Some(d)
    }
}
