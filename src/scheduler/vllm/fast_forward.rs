//! Fast-forward: a run of steps in which every running request decodes one token, nothing in
//! WAITING can be admitted, no block runs out and nothing finishes changes only counters, so it
//! is taken at once — with exactly the state, counters, log totals and KV time integral the
//! step-by-step path leaves. Under async scheduling each step of the run is one turn of the
//! batch queue: schedule the next batch, then process the one on the GPU.

use super::{Entry, Vllm};
use crate::cost::MixedStep;
use crate::request::Requests;
use crate::scheduler::{Outbox, Skip};
use crate::time::{SimDuration, SimTime};

/// What WAITING does in each step of a run (the same in all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitingOutcome {
    /// Nothing to look at, no budget left, or a head too long for the step without chunking.
    Nothing,
    /// Stopped at `max_num_seqs`.
    SlotStop,
    /// Stopped because the head's blocks are not free.
    MemoryStop,
}

impl Vllm {
    /// Take the steps from `now` on that change nothing but counters and end before `limit`.
    pub(super) fn fast_forward(
        &mut self,
        now: SimTime,
        limit: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        let asynchronous = self.p.depth > 1;
        let r = self.running.len() as u64;
        if r == 0 || r > self.p.budget || self.deferred > 0 {
            return None;
        }
        // What WAITING does (O(1), so first): nothing that could be admitted.
        let waiting = self.waiting_outcome()?;
        // The batch on the GPU (async): every request of RUNNING, in order, each chunk reaching
        // its last known token (so it samples, and the next steps are decodes).
        let first_dur = match (asynchronous, self.queue.len(), self.queue.front()) {
            (false, 0, _) => None,
            (true, 1, Some(Entry::Real(b))) => {
                let same = b.items.len() == self.running.len()
                    && b.items.iter().zip(&self.running).all(|(it, &id)| {
                        let s = self.seq(id);
                        it.id == id && it.uid == s.uid && it.samples && it.tokens == s.in_flight
                    });
                if !same || b.start != now {
                    return None;
                }
                Some(b.end - b.start)
            }
            _ => return None,
        };
        // Every running request decodes: the longest run that finishes nothing.
        let mut most = u64::MAX;
        let mut kv_first = 0u64;
        self.classes.clear();
        self.classes.resize(self.p.block as usize, 0);
        for &id in &self.running {
            let s = self.seq(id);
            let c = u64::from(s.computed);
            let decoding = if asynchronous {
                c == s.tokens() && s.placeholders == 1 && s.in_flight == 1
            } else {
                c + 1 == s.tokens() && s.placeholders == 0 && s.in_flight == 0
            };
            if !decoding
                || s.output == 0
                || s.stale > 0
                || u64::from(s.blocks) != self.blocks_for(c)
            {
                return None;
            }
            most = most.min(u64::from(s.stop_at - s.output) - 1);
            kv_first += c + 1;
            let class = (c % self.p.block) as usize;
            self.classes[class] += 1;
        }
        if most == 0 {
            return None;
        }
        // Step j (from 1) allocates a block for each request whose computed count before it is
        // a multiple of the block size; all must fit without preempting.
        let block = self.p.block;
        let classes = &self.classes;
        let need_at = |j: u64| classes[((block - (j - 1) % block) % block) as usize];
        let used0 = self.used_blocks;
        let free0 = self.free_blocks();
        let (mut steps, mut t, mut cum, mut kv_integral) = (0u64, now, 0u64, 0u128);
        let mut pending = first_dur;
        let mut last_dur = SimDuration::ZERO;
        while steps < most {
            let j = steps + 1;
            let need = need_at(j);
            if cum + need > free0 {
                break;
            }
            let cost = self.cost.mixed(MixedStep {
                decode_seqs: r,
                decode_kv_tokens: kv_first + r * (j - 1),
                ..MixedStep::default()
            });
            // The segment that ends this turn: this step (sync), or the batch already on the
            // GPU (async), whose successor is the step just priced.
            let seg = pending.replace(cost).unwrap_or(cost);
            let pending_now = if asynchronous { pending } else { None };
            if t + seg >= limit {
                break;
            }
            t += seg;
            cum += need;
            let used = (used0 + cum) * block;
            kv_integral += u128::from(used) * u128::from(seg.as_ns());
            last_dur = pending_now.unwrap_or(SimDuration::ZERO);
            if !asynchronous {
                pending = None;
            }
            steps = j;
            out.step_ends.push((t, r));
        }
        if steps == 0 {
            return None;
        }
        let first_end = now
            + first_dur.unwrap_or_else(|| {
                self.cost.mixed(MixedStep {
                    decode_seqs: r,
                    decode_kv_tokens: kv_first,
                    ..MixedStep::default()
                })
            });
        self.take_run(steps, t, cum, last_dur, waiting, first_end, reqs, out);
        Some(Skip {
            steps,
            end: t,
            running: r,
            queued: self.waiting.len() as u64,
            kv_integral,
            kv_last: self.used_blocks * block,
        })
    }

    /// What WAITING would do in every step of a run, if that stays the same while blocks only
    /// get scarcer; `None` if the head could be admitted.
    fn waiting_outcome(&self) -> Option<WaitingOutcome> {
        let Some(&head) = self.waiting.front() else {
            return Some(WaitingOutcome::Nothing);
        };
        if self.seq(head).stale > 0 {
            // Skipped for its output still in flight: the scan would look further.
            return None;
        }
        let left = self.p.budget - self.running.len() as u64;
        if left == 0 {
            return Some(WaitingOutcome::Nothing);
        }
        if self.running.len() >= self.p.max_seqs {
            return Some(WaitingOutcome::SlotStop);
        }
        if let Some(pool) = &self.pool {
            // The run's blocks may evict part of the head's hit. With the whole sequence to fit
            // (`full_sequence_must_fit`) and chunks, what the head lacks only grows as its hit
            // shrinks (the hit blocks others use are what it saves) while the free blocks only
            // shrink: a head that does not fit now fits in no step of the run.
            let known = self.seq(head).tokens().min(self.p.max_model_len);
            let hit = pool.lookup(head.0 as usize, self.seq(head).tokens());
            let stays = self.p.full_isl
                && self.p.chunked
                && pool.to_allocate(head.0 as usize, known, &hit) > pool.free_blocks();
            return stays.then_some(WaitingOutcome::MemoryStop);
        }
        let known = self.seq(head).tokens();
        let n = if self.p.threshold > 0 && known > self.p.threshold {
            self.p.threshold
        } else {
            known
        };
        if !self.p.chunked && n > left {
            return Some(WaitingOutcome::Nothing);
        }
        let mml = self.p.max_model_len;
        let free = self.free_blocks();
        let full = self.p.full_isl && self.blocks_for(known.min(mml)) > free;
        (full || self.blocks_for(n.min(left).min(mml)) > free).then_some(WaitingOutcome::MemoryStop)
    }

    /// Apply a planned run of `steps` steps ending at `end`, which took `blocks` blocks and
    /// whose first outputs came at `first_end`; under async scheduling the batch its last turn
    /// scheduled takes `next_dur` and stays queued.
    #[allow(clippy::too_many_arguments)]
    fn take_run(
        &mut self,
        steps: u64,
        end: SimTime,
        blocks: u64,
        next_dur: SimDuration,
        waiting: WaitingOutcome,
        first_end: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        let r = self.running.len() as u64;
        let (mut events, mut prompts) = (0u64, 0u64);
        let asynchronous = self.p.depth > 1;
        if self.pool.is_some() {
            self.take_run_blocks(steps);
        }
        for k in 0..self.running.len() {
            let id = self.running[k];
            let block = self.p.block;
            let s = &mut self.seqs[id.0 as usize];
            if s.output == 0 {
                // Its first token comes with the run's first output.
                prompts += u64::from(s.prompt);
            }
            // So does the first after a preemption.
            out.first_token(&mut reqs[id], first_end);
            s.computed += steps as u32;
            s.output += steps as u32;
            s.blocks = u64::from(s.computed).div_ceil(block) as u32;
            if asynchronous {
                s.in_flight = 1;
            }
            events += u64::from(std::mem::take(&mut s.preemption_events));
        }
        if let Some(pool) = &mut self.pool {
            // Registered as step by step leaves them: the computed tokens no longer in flight
            // (`allocate_slots`; under async scheduling also `update_from_output`).
            for &id in &self.running {
                let s = &self.seqs[id.0 as usize];
                pool.cache(id.0 as usize, u64::from(s.computed - s.in_flight));
            }
            debug_assert_eq!(
                self.used_blocks + blocks,
                self.p.usable_blocks - pool.free_blocks()
            );
        }
        self.used_blocks += blocks;
        // Without sharing, the pool's use is the requests' blocks.
        debug_assert!(
            self.pool.is_some()
                || self.used_blocks
                    == self
                        .running
                        .iter()
                        .chain(&self.waiting)
                        .map(|&id| u64::from(self.seq(id).blocks))
                        .sum::<u64>(),
            "invariant: the pool's use is the requests' blocks"
        );
        self.stats.on_outputs(r * steps, prompts, events);
        out.generated_tokens += r * steps;
        out.decode_rounds += steps;
        self.counters.decode_steps += steps;
        self.counters.fast_forwarded_steps += steps;
        match waiting {
            WaitingOutcome::Nothing => {}
            WaitingOutcome::SlotStop => self.counters.slot_stops += steps,
            WaitingOutcome::MemoryStop => self.counters.memory_stops += steps,
        }
        self.finished_pending = false;
        if self.p.depth > 1 {
            // The batch the last turn scheduled is on the GPU from `end`.
            let Some(Entry::Real(b)) = self.queue.front_mut() else {
                unreachable!(
                    "invariant: a run under async scheduling starts with a batch on the GPU"
                );
            };
            b.start = end;
            b.end = end + next_dur;
            for it in &mut b.items {
                it.tokens = 1;
            }
            self.gpu_free = b.end;
        } else {
            self.gpu_free = end;
        }
        let (running, waiting_n, used) = (
            self.running.len() as u64,
            self.waiting.len() as u64,
            self.used_blocks * self.p.block,
        );
        self.stats.snapshot(running, waiting_n, self.deferred, used);
    }

    /// The blocks a run of `steps` decode steps takes off the free queue, in the order step by
    /// step takes them (step by step, RUNNING in order; nothing is freed during a run), with the
    /// evictions that come with them.
    fn take_run_blocks(&mut self, steps: u64) {
        let b = self.p.block;
        let mut takes: Vec<(u64, usize)> = Vec::new();
        for (k, &id) in self.running.iter().enumerate() {
            let c0 = u64::from(self.seq(id).computed);
            // Step j (from 1) computes token c0 + j − 1: a new block when it starts one.
            let mut j = (b - c0 % b) % b + 1;
            while j <= steps {
                takes.push((j, k));
                j += b;
            }
        }
        takes.sort_unstable();
        let pool = self.pool.as_mut().expect("invariant: called with the pool");
        for (j, k) in takes {
            let id = self.running[k];
            let c0 = u64::from(self.seqs[id.0 as usize].computed);
            pool.allocate(id.0 as usize, &[], c0 + j, 0);
        }
    }
}
