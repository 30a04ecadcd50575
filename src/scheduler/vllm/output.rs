//! `update_from_output` (`v1/core/sched/scheduler.py`): a batch's sampled tokens reach their
//! requests, stale ones included (`_update_request_with_output`), and requests that reach their
//! stop leave (`check_stop` in `v1/core/sched/utils.py`, `_free_request`).

use super::{Batch, Status, Vllm};
use crate::request::{Phase, Requests};
use crate::scheduler::Outbox;
use crate::time::SimTime;

impl Vllm {
    /// Process a batch's output at `now`, when it ends.
    pub(super) fn process(
        &mut self,
        mut batch: Batch,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        let mut left_running = false;
        let mut left_waiting = false;
        let (mut generated, mut prompts, mut events) = (0u64, 0u64, 0u64);
        let mut decode_round = false;
        for it in &batch.items {
            let i = it.id.0 as usize;
            let s = &mut self.seqs[i];
            if s.uid != it.uid || s.status == Status::Absent {
                // Finished while this batch was in flight (async scheduling).
                continue;
            }
            s.in_flight -= it.tokens;
            let stale = s.stale > 0;
            if stale {
                s.stale -= it.tokens;
            }
            if !it.samples {
                // A partial prefill chunk returns no token.
                continue;
            }
            s.output += 1;
            if !stale && s.status == Status::Running && s.placeholders > 0 {
                // Async: the blocks computed and no longer in flight are cached as the
                // output arrives (`update_from_output`, `has_output_placeholders`).
                if let Some(pool) = &mut self.pool {
                    pool.cache(i, u64::from(s.computed - s.in_flight).min(s.tokens()));
                } else if self.own.is_some() {
                    s.cache_to(
                        self.p.block,
                        u64::from(s.computed - s.in_flight).min(s.tokens()),
                    );
                }
            }
            generated += 1;
            decode_round |= s.output > 1;
            if !stale && s.placeholders > 0 {
                s.placeholders -= 1;
            }
            events += u64::from(std::mem::take(&mut s.preemption_events));
            if s.output == 1 {
                prompts += u64::from(s.prompt);
                s.resumed = false;
                out.first_token(&mut reqs[it.id], now);
            } else if !stale && s.resumed {
                s.resumed = false;
                out.token_after_eviction(&mut reqs[it.id], now);
            }
            if s.output >= s.stop_at {
                match s.status {
                    Status::Running => left_running = true,
                    _ => left_waiting = true,
                }
                if s.deferred {
                    self.deferred -= 1;
                }
                match &mut self.pool {
                    // `_free_request` → `kv_cache_manager.free`.
                    Some(pool) => {
                        pool.free(i);
                        self.used_blocks = self.p.usable_blocks - pool.free_blocks();
                    }
                    None => self.used_blocks -= u64::from(s.blocks),
                }
                if let Some(q) = &mut self.own {
                    // Its hashed blocks (or, finished in WAITING, its cached ones) stay in the
                    // free queue, where nothing will look them up.
                    q.free_finished(u64::from(s.blocks), u64::from(s.hashed));
                    q.orphan(s.own);
                }
                let r = &mut reqs[it.id];
                r.out_tokens = s.output;
                r.phase = Phase::Finished;
                *s = Default::default();
                out.finished.push(it.id);
                self.finished_pending = true;
            }
        }
        self.stats.on_outputs(generated, prompts, events);
        out.generated_tokens += generated;
        out.decode_rounds += u64::from(decode_round);
        if left_running {
            let seqs = &self.seqs;
            self.running
                .retain(|id| seqs[id.0 as usize].status == Status::Running);
        }
        if left_waiting {
            let seqs = &self.seqs;
            self.waiting
                .retain(|id| seqs[id.0 as usize].status == Status::Waiting);
        }
        self.snapshot_stats();
        batch.items.clear();
        self.spare.push(batch.items);
    }
}
