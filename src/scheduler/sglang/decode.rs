//! The decode step: `update_running_batch` and `prepare_for_decode` when it is decided
//! (`managers/scheduler.py`, `managers/schedule_batch.py`), and its result when processed
//! (`process_batch_result_decode`): every running request gets a token, those reaching their
//! length finish.

use super::{completions, InFlight, Sglang};
use crate::request::{Phase, ReqId, Requests};
use crate::scheduler::Outbox;
use crate::time::{SimDuration, SimTime};

impl Sglang {
    /// `update_running_batch` and the decode step.
    #[inline(always)]
    pub(super) fn try_decode(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<(InFlight, SimDuration)> {
        let initial = self.running.len();
        let finishing = self.set_aside_finishing(reqs);
        if self.running.is_empty() {
            self.batch_is_full = false;
            return None;
        }
        if !self.next_step_fits() && finishing {
            // The batch in flight frees the finishing requests' KV when it ends: decode the
            // rest at the next step instead of retracting them.
            self.batch_is_full = false;
            return None;
        }
        if self.running.len() < initial {
            self.batch_is_full = false;
        }
        if self.next_step_fits() {
            self.ratio = (self.ratio - self.p.ratio_decay).max(self.p.ratio_min);
        } else {
            self.retract(now, reqs, out);
            if self.running.is_empty() {
                return None;
            }
        }
        let batch = self.alloc_decode_slots();
        self.counters.decode_steps += 1;
        let d = self.cost.decode(batch, self.running_kv_tokens);
        Some((InFlight::Decode { batch }, d))
    }

    /// `prepare_for_decode`: a KV slot for every running request's next token. Returns the
    /// batch size.
    #[inline(always)]
    pub(super) fn alloc_decode_slots(&mut self) -> u64 {
        let pages = self.pages_needed_next_step();
        self.alloc_evicting(pages);
        self.alloc_step += 1;
        let batch = self.running.len() as u64;
        self.running_kv_tokens += batch;
        batch
    }

    /// Every running request gets one token at `now`: the decode counter advances, and those
    /// reaching their length finish (their KV is released). Returns whether any finished.
    #[inline(always)]
    pub(super) fn advance_decode(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> bool {
        self.decode_step += 1;
        self.last_round_end = now;
        out.generated_tokens += self.running.len() as u64;
        out.decode_rounds += 1;
        // The step's completions, in a buffer kept between calls (taken out of it only when
        // there are several).
        self.done_buf.clear();
        let stays = &self.stays;
        let current = |id, stay| super::current_stay(stays, id, stay);
        self.finish
            .take(self.decode_step, current, &mut self.done_buf);
        // The next pass of `get_next_batch_to_run` filters them out of the running batch,
        // which reopens admission at once (0.5.23 filters on every pass).
        let any = match self.done_buf.len() {
            0 => false,
            1 => {
                let (_, stay, id) = self.done_buf[0];
                let at = self.running_index(id, stay, 0);
                self.leave_running(id, reqs);
                reqs[id].phase = Phase::Finished;
                out.finished.push(id);
                self.running.remove(at);
                true
            }
            _ => {
                let mut done = std::mem::take(&mut self.done_buf);
                self.finish_several(&mut done, reqs, out);
                self.done_buf = done;
                true
            }
        };
        if any {
            self.batch_is_full = false;
        }
        any
    }

    /// [`advance_decode`](Self::advance_decode)'s completions when a step has several: released
    /// in the order of their stays, as they joined (with the radix cache, in batch order).
    fn finish_several(
        &mut self,
        done: &mut [completions::Entry],
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        // The wheel gives a step's entries newest first (`completions.rs`): usually in
        // descending stays, put in order by a reversal (stays are unique: the order is the
        // sort's).
        if done.is_sorted_by(|a, b| a.1 > b.1) {
            done.reverse();
        } else {
            done.sort_unstable_by_key(|e| e.1);
        }
        if self.cache.is_some() {
            // Released in batch order (`process_batch_result_decode`): the cache's access
            // times follow it.
            let at = |&(_, _, id): &(u64, u64, ReqId)| self.running.iter().position(|x| *x == id);
            done.sort_by_key(at);
        }
        // Up to a few dozen are found where they are (while they are still running), more by
        // their phase.
        let few = done.len() <= 24;
        let mut at = std::mem::take(&mut self.index_buf);
        at.clear();
        let mut ascending = true;
        if few {
            // In batch order (by stays, as the batch is but for mixed batches; with the radix
            // cache, by place): each is searched for after the previous one.
            let mut from = 0;
            at.extend(done.iter().map(|&(_, stay, id)| {
                let i = self.running_index(id, stay, from);
                ascending &= i >= from;
                from = i + 1;
                i
            }));
        }
        for &(_, _, id) in done.iter() {
            self.leave_running(id, reqs);
            reqs[id].phase = Phase::Finished;
            out.finished.push(id);
        }
        if few {
            if !ascending {
                at.sort_unstable();
            }
            remove_sorted(&mut self.running, &at);
        } else {
            self.running.retain(|&id| reqs[id].phase == Phase::Running);
        }
        self.index_buf = at;
    }

    /// Where the running request `id` of stay `stay` is in the batch, looked for from index
    /// `from` on (where it usually is: a step's completions are taken in batch order). The
    /// batch is in order of stays unless mixed batches put older requests behind newer ones,
    /// so in a large batch a binary search by stay finds it, checked; else a scan — and if it
    /// is not found so, a scan of the whole batch.
    #[inline(always)]
    fn running_index(&self, id: ReqId, stay: u64, from: usize) -> usize {
        let rest = self.running.get(from..).unwrap_or_default();
        if rest.len() > 16 {
            // A running request's stay is in `stays` (read once: the search's steps then
            // load nothing else).
            let stays = &self.stays[..];
            let i = from + rest.partition_point(|x| stays[x.0 as usize] < stay);
            if self.running.get(i) == Some(&id) {
                return i;
            }
        } else if let Some(i) = rest.iter().position(|x| *x == id) {
            return from + i;
        }
        (self.running.iter().position(|x| *x == id))
            .expect("invariant: a finished request was running")
    }

    #[inline(always)]
    pub(super) fn finish_decode(
        &mut self,
        now: SimTime,
        batch: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        self.decode_tokens_since_log += batch;
        self.advance_decode(now, reqs, out);
        // `forward_ct_decode` counts decode batches only (a mixed batch is an extend batch).
        self.decode_batches += 1;
        if self.decode_batches % self.p.log_interval == 0 {
            let token = self.usage_tokens();
            self.log_decode(&mut out.log, now, batch, token);
        }
    }
}

/// Remove the elements at the indices `at` (ascending, distinct) from `v`, keeping the order of
/// the rest: one pass of moves.
fn remove_sorted<T: Copy>(v: &mut Vec<T>, at: &[usize]) {
    let Some(&first) = at.first() else {
        return;
    };
    let mut w = first;
    for (j, &i) in at.iter().enumerate() {
        let end = at.get(j + 1).copied().unwrap_or(v.len());
        v.copy_within(i + 1..end, w);
        w += end - i - 1;
    }
    v.truncate(w);
}

#[cfg(test)]
mod tests {
    use super::remove_sorted;

    #[test]
    fn removing_sorted_indices_keeps_the_order_of_the_rest() {
        let all: Vec<u32> = (0..10).collect();
        for at in [
            vec![],
            vec![0],
            vec![9],
            vec![0, 9],
            vec![3, 4, 5],
            vec![1, 3, 8],
            (0..10).collect(),
        ] {
            let mut v = all.clone();
            remove_sorted(&mut v, &at);
            let want: Vec<u32> = all
                .iter()
                .copied()
                .filter(|x| !at.contains(&(*x as usize)))
                .collect();
            assert_eq!(v, want, "removing {at:?}");
        }
    }
}
