//! Retraction (`managers/schedule_batch.py: ScheduleBatch.retract_decode`): when the next decode
//! step's pages do not fit, running requests go back to the waiting queue, fewest generated
//! tokens first; `release_req` frees each one's KV without publishing it to the radix cache.

use std::cmp::Reverse;

use super::{Place, Sglang, RETRACT_DECODE_STEPS};
use crate::request::{Phase, ReqId, Requests};
use crate::scheduler::{Eviction, LogRecord, Outbox};
use crate::time::SimTime;

impl Sglang {
    /// [`leave_running`](Self::leave_running) for a retracted request: nothing published;
    /// `remaining` requests stay in the batch.
    fn leave_retracted(&mut self, id: ReqId, remaining: u64, reqs: &mut Requests) -> u64 {
        let kv = self.running_kv(id);
        reqs[id].out_tokens = self.output_tokens(id, &reqs[id]);
        self.forget_running(id);
        self.release_retracted(id, kv, remaining, reqs);
        kv
    }

    /// Where the next victim is in the batch: the smallest `(generated, −prompt)`, among equal
    /// keys the latest in batch order (see [`retract`](Self::retract)).
    fn retraction_victim(&self, reqs: &Requests) -> usize {
        let mut at = 0;
        let mut best = (u32::MAX, Reverse(0));
        for (i, &id) in self.running.iter().enumerate() {
            let key = (
                self.output_tokens(id, &reqs[id]),
                Reverse(reqs[id].prompt_tokens),
            );
            if key <= best {
                (best, at) = (key, i);
            }
        }
        at
    }

    /// `ScheduleBatch.retract_decode` and the ratio re-estimate.
    pub(super) fn retract(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        // SGLang sorts by (generated, −prompt) descending with a stable sort and pops victims
        // from the end: the victim is the smallest key, and among equal keys the latest in batch
        // order. Usually one victim suffices, so select it rather than sort.
        // One pass over the batch: the first victim, and the sums the ratio re-estimate takes
        // over the requests that stay (the victims' are taken off as they go).
        // The key `(generated, Reverse(prompt))` as one integer, from the places alone.
        let (mut decoded, mut max_new) = (0u64, 0u64);
        let mut at = 0;
        let mut best = u64::MAX;
        let step = self.decode_step;
        for (i, &id) in self.running.iter().enumerate() {
            let Some(&Place::Running {
                since_step,
                out_then,
                max_new: m,
                prompt,
                ..
            }) = self.places.get(id.0 as usize)
            else {
                panic!("invariant: running requests are running");
            };
            let generated = out_then + (step - since_step) as u32;
            let key = (u64::from(generated) << 32) | u64::from(!prompt);
            if key <= best {
                (best, at) = (key, i);
            }
            decoded += u64::from(generated);
            max_new += u64::from(m);
        }
        debug_assert_eq!(at, self.retraction_victim(reqs));
        let mut retracted = std::mem::take(&mut self.retracted);
        retracted.clear();
        let mut freed = 0u64;
        let mut first = true;
        while first || !self.next_step_fits() {
            if self.running.len() == 1 {
                break;
            }
            if !first {
                at = self.retraction_victim(reqs);
            }
            first = false;
            let victim = self.running.remove(at);
            decoded -= u64::from(self.output_tokens(victim, &reqs[victim]));
            max_new -= u64::from(reqs[victim].max_new_tokens);
            let remaining = self.running.len() as u64;
            freed += self.leave_retracted(victim, remaining, reqs);
            retracted.push(victim);
        }
        let ratio_before = self.ratio;
        if !self.next_step_fits() {
            // Newer SGLang aborts the last request when even it cannot grow.
            let last = self.running.pop().expect("invariant: one request is kept");
            decoded -= u64::from(self.output_tokens(last, &reqs[last]));
            max_new -= u64::from(reqs[last].max_new_tokens);
            freed += self.leave_retracted(last, 0, reqs);
            reqs[last].phase = Phase::Rejected;
            if let Some(at) = reqs[last].outside_token_at.take() {
                out.abandoned_awaits.push(at);
            }
            self.counters.aborted += 1;
            out.finished.push(last);
        }
        debug_assert_eq!(
            (decoded, max_new),
            self.running.iter().fold((0, 0), |(d, m), &id| {
                let r = &reqs[id];
                (
                    d + u64::from(self.output_tokens(id, r)),
                    m + u64::from(r.max_new_tokens),
                )
            }),
            "invariant: the re-estimate's sums are the remaining batch's"
        );
        let n = self.running.len() as u64;
        self.ratio = ((decoded + RETRACT_DECODE_STEPS * n) as f64 / (max_new + 1) as f64).min(1.0);
        self.counters.eviction_events += 1;
        self.counters.evictions += retracted.len() as u64;
        for &id in &retracted {
            reqs[id].evictions += 1;
            out.evicted(&mut reqs[id], self.last_round_end);
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
        self.retracted = retracted;
    }
}
