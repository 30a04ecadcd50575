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
        for it in &batch.items {
            let i = it.id.0 as usize;
            if self.seqs[i].uid != it.uid || self.seqs[i].status == Status::Absent {
                // Finished while this batch was in flight (async scheduling).
                continue;
            }
            let s = &mut self.seqs[i];
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
            if !stale && s.placeholders > 0 {
                s.placeholders -= 1;
            }
            let first = s.output == 1;
            let events = std::mem::take(&mut s.preemption_events);
            let stopped = s.output >= s.stop_at;
            let (prompt, output) = (s.prompt, s.output);
            self.stats
                .on_output(first.then_some(u64::from(prompt)), u64::from(events));
            out.generated_tokens += 1;
            let r = &mut reqs[it.id];
            r.out_tokens = output;
            r.first_token_at.get_or_insert(now);
            if stopped {
                let s = &mut self.seqs[i];
                match s.status {
                    Status::Running => left_running = true,
                    _ => left_waiting = true,
                }
                if s.deferred {
                    self.deferred -= 1;
                }
                self.used_blocks -= u64::from(s.blocks);
                *s = Default::default();
                r.phase = Phase::Finished;
                out.finished.push(it.id);
                self.finished_pending = true;
            }
        }
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
