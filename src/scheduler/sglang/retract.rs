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
    /// keys the latest in batch order (see [`retract`](Self::retract)). A scan of the whole
    /// batch: the reference of [`next_victim`](Self::next_victim).
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

    /// [`retraction_victim`](Self::retraction_victim), from the batch's end. A request has
    /// generated at least the decode steps since it joined, and without mixed batches the
    /// batch is in the order requests joined (`since_step` never falls along it): once a
    /// request has waited more steps than the fewest tokens found so far, it and every request
    /// before it have more tokens — the scan stops. Usually after a few of the latest.
    fn next_victim(&self, reqs: &Requests) -> usize {
        if self.p.mixed_chunk {
            return self.retraction_victim(reqs);
        }
        // The key `(generated, Reverse(prompt))` as one integer; from the end, the first of
        // the smallest keys is the latest in batch order.
        let (mut at, mut best) = (0, u64::MAX);
        let step = self.decode_step;
        for (i, &id) in self.running.iter().enumerate().rev() {
            let Some(&Place::Running {
                since_step,
                out_then,
                prompt,
                ..
            }) = self.places.get(id.0 as usize)
            else {
                panic!("invariant: running requests are running");
            };
            let waited = step - since_step;
            if waited > best >> 32 {
                break;
            }
            let generated = u64::from(out_then) + waited;
            let key = (generated << 32) | u64::from(!prompt);
            if key < best {
                (best, at) = (key, i);
            }
        }
        // Checked in debug builds and in every build of the unit tests, release ones included.
        #[cfg(any(test, debug_assertions))]
        assert_eq!(
            at,
            self.retraction_victim(reqs),
            "invariant: the scan from the end finds the whole scan's victim"
        );
        at
    }

    /// `ScheduleBatch.retract_decode` and the ratio re-estimate.
    pub(super) fn retract(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        // SGLang sorts by (generated, −prompt) descending with a stable sort and pops victims
        // from the end: the victim is the smallest key, and among equal keys the latest in batch
        // order. Usually one victim suffices, so select it rather than sort.
        let mut retracted = std::mem::take(&mut self.retracted);
        retracted.clear();
        let mut freed = 0u64;
        let mut first = true;
        while first || !self.next_step_fits() {
            if self.running.len() == 1 {
                break;
            }
            first = false;
            let at = self.next_victim(reqs);
            let victim = self.running.remove(at);
            let remaining = self.running.len() as u64;
            freed += self.leave_retracted(victim, remaining, reqs);
            retracted.push(victim);
        }
        let ratio_before = self.ratio;
        // Newer SGLang aborts the last request when even it cannot grow. As servesim admits
        // and decodes, that never happens, so debug builds (the test suite's) check it:
        // - `arrive` caps `max_new_tokens` at what the empty pool holds (the paged prompt, a
        //   page and one token spare), so a lone request's next step always fits the pool
        //   less what the tree could evict;
        // - nothing else holds KV here: no request is set aside as finishing (`try_decode`
        //   decodes the rest at the next step instead of retracting), no chunked request is
        //   between chunks (a continuation makes every round a prefill; a mixed step never
        //   retracts), and every retracted request has released its KV.
        // The branch stays, as SGLang's own guard.
        debug_assert!(
            self.next_step_fits(),
            "invariant: the last request's next step fits once the others are retracted"
        );
        if !self.next_step_fits() {
            let last = self.running.pop().expect("invariant: one request is kept");
            freed += self.leave_retracted(last, 0, reqs);
            reqs[last].phase = Phase::Rejected;
            if let Some(at) = reqs[last].outside_token_at.take() {
                out.abandoned_awaits.push(at);
            }
            self.counters.aborted += 1;
            out.finished.push(last);
        }
        // The sums over the requests that stay (the victims' were taken off as they left).
        let n = self.running.len() as u64;
        let decoded = (self.out_less_since + (n * self.decode_step) as i64) as u64;
        let max_new = self.max_new_sum;
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
