//! SGLang's overlapped event loop (`managers/scheduler.py: event_loop_overlap`, the default
//! unless `--disable-overlap-schedule`): the scheduler decides batch k + 1 and queues it on the
//! GPU before it processes the result of batch k. Every decision is therefore made one step
//! early, without the result of the batch in flight:
//!
//! * batch k + 1 is decided when batch k starts on the GPU (the previous result has just been
//!   processed), and runs when batch k ends — the GPU runs back to back;
//! * a prefill batch joins the running batch as soon as it is launched (`get_next_batch_to_run`
//!   merges the last batch before its result is processed), its first tokens still unknown;
//! * requests that the batch in flight finishes *by length* are known and set aside from the
//!   next decode batch (`_reqs_finishing_inflight`, `update_running_batch`); requests it
//!   finishes by EOS are not, and take a row (and a KV slot) of the next batch for nothing;
//!   if the next decode step does not fit but requests are finishing, it waits instead of
//!   retracting;
//! * a request retracted by a decision loses the token of the batch in flight (its result is
//!   discarded);
//! * KV, outputs and finishes are released when a result is processed, one step later than
//!   decided.
//!
//! From an idle server, the first batch is decided with nothing in flight and the second at
//! once, with the first in flight.

use std::cmp::Reverse;

use super::{InFlight, Place, PrefillItem, Sglang};
use crate::request::{Phase, ReqId, Requests};
use crate::scheduler::Outbox;
use crate::time::{SimDuration, SimTime};

impl Sglang {
    /// Launch the batch decided before (or decide one, from idle), then decide the next with it
    /// in flight.
    #[inline(always)]
    pub(super) fn start_overlapped(
        &mut self,
        now: SimTime,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<SimDuration> {
        let (batch, d) = match self.planned.take() {
            Some(planned) => planned,
            None => self.decide(now, reqs, out)?,
        };
        self.launch(&batch, reqs);
        self.in_flight = Some(batch);
        self.planned = self.decide(now, reqs, out);
        Some(d)
    }

    /// A prefill (or mixed) batch is merged into the running batch when the next batch is
    /// decided, that is, as it is launched: its prefilled requests join with their first token
    /// still to come, and a continuing chunk's progress counts from now.
    #[inline(always)]
    fn launch(&mut self, batch: &InFlight, reqs: &mut Requests) {
        let InFlight::Prefill {
            items, decode_rows, ..
        } = batch
        else {
            return;
        };
        // The latch reopens as in `finish_prefill`: the running batch was empty (or handed to a
        // mixed batch), or the merged batch shrinks when the continuing chunk is set aside.
        if self.running.is_empty() || *decode_rows > 0 {
            self.batch_is_full = false;
        }
        let earlier = (*decode_rows > 0).then(|| std::mem::take(&mut self.running));
        for it in items {
            let Place::Prefilling { done, input } = self.place(it.id) else {
                panic!("invariant: prefill items are prefilling");
            };
            let done = done + it.take;
            if done < input {
                self.set_place(it.id, Place::Prefilling { done, input });
                self.batch_is_full = false;
                continue;
            }
            if self.chunked == Some(it.id) {
                self.chunked = None;
            }
            self.prefilling -= 1;
            // In a mixed batch the decode counter gives the first token; otherwise it is
            // added when the result is processed.
            self.join_running_at(it.id, reqs, true, *decode_rows > 0);
        }
        if let Some(earlier) = earlier {
            self.running.extend(earlier);
        }
    }

    /// `_reqs_finishing_inflight`: before a decode decision, set aside the running requests
    /// that the batch in flight finishes by reaching `max_new_tokens`. Returns whether any
    /// was. Only the overlapped loop has a batch in flight when deciding.
    #[inline]
    pub(super) fn set_aside_finishing(&mut self, reqs: &Requests) -> bool {
        if self.in_flight.is_none() || !self.any_length_due() {
            return false;
        }
        self.set_aside_due(reqs)
    }

    /// [`set_aside_finishing`](Self::set_aside_finishing) once some request may be finishing.
    #[inline(never)]
    fn set_aside_due(&mut self, reqs: &Requests) -> bool {
        let members: Vec<ReqId> = match &self.in_flight {
            None => return false,
            // A decode or mixed batch holds every running request.
            Some(InFlight::Decode { .. })
            | Some(InFlight::Prefill {
                decode_rows: 1.., ..
            }) => self.running.clone(),
            Some(InFlight::Prefill { items, .. }) => items.iter().map(|it| it.id).collect(),
        };
        let mut any = false;
        for id in members {
            if !matches!(self.place(id), Place::Running { .. }) {
                continue;
            }
            let r = &reqs[id];
            if self.output_tokens(id, r) + 1 < r.max_new_tokens {
                continue;
            }
            let kv = self.running_kv(id);
            self.forget_running(id);
            self.running.retain(|&x| x != id);
            self.leaving.push((id, kv));
            any = true;
        }
        any
    }

    /// Record when a request joining the running batch can first be set aside by
    /// [`set_aside_finishing`](Self::set_aside_finishing): from the decode step at which
    /// `out_then + (step − since_step) + 1 ≥ max_new_tokens`. Only the overlapped loop sets
    /// requests aside.
    #[inline]
    pub(super) fn note_length_due(
        &mut self,
        id: ReqId,
        stay: u64,
        since_step: u64,
        out_then: u32,
        max_new: u32,
    ) {
        if !self.p.overlap {
            return;
        }
        let due = since_step + u64::from(max_new.saturating_sub(out_then + 1));
        self.length_due.push(Reverse((due, stay, id)));
        // Entries of past stays leave only when they surface: rebuild now and then so that the
        // heap stays the size of the batch.
        if self.length_due.len() > 8 * self.running.len() + 1024 {
            let heap = std::mem::take(&mut self.length_due).into_vec();
            let current = heap
                .into_iter()
                .filter(|Reverse((_, stay, id))| self.is_current_stay(*id, *stay));
            self.length_due = current.collect();
        }
    }

    /// Whether some running request has reached the step from which it may be finishing by
    /// length (a superset: [`set_aside_finishing`](Self::set_aside_finishing) then decides
    /// exactly, request by request).
    #[inline]
    fn any_length_due(&mut self) -> bool {
        self.length_due_by(self.decode_step)
    }

    /// Whether some running request may be set aside as finishing by length by a decision
    /// made at decode step `step` (`false` is sure; `true` may err early). Drops the entries
    /// of past stays on top of the heap.
    #[inline]
    pub(super) fn length_due_by(&mut self, step: u64) -> bool {
        while let Some(&Reverse((due, stay, id))) = self.length_due.peek() {
            if self.is_current_stay(id, stay) {
                return due <= step;
            }
            self.length_due.pop();
        }
        false
    }

    /// Process the result of the batch in flight.
    #[inline(always)]
    pub(super) fn finish_overlapped(
        &mut self,
        now: SimTime,
        batch: InFlight,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        match batch {
            InFlight::Decode { batch } => {
                // The log counts the batch's rows, wasted ones included (`num_generated_tokens`
                // is the batch size); the outputs count the tokens requests receive.
                self.decode_tokens_since_log += batch;
                self.finish_leaving(now, reqs, out);
                self.advance_decode(now, reqs, out);
                self.decode_batches += 1;
                if self.decode_batches % self.p.log_interval == 0 {
                    let token = self.usage_tokens();
                    self.log_decode(&mut out.log, now, batch, token);
                }
            }
            InFlight::Prefill {
                items,
                decode_rows,
                log,
            } => {
                self.finish_leaving(now, reqs, out);
                if decode_rows > 0 {
                    self.advance_decode(now, reqs, out);
                }
                let mut stash = None;
                for &it in &items {
                    if let Place::Prefilling { done, .. } = self.place(it.id) {
                        stash = Some((it.id, done));
                    }
                    self.first_token(now, it, decode_rows == 0, reqs, out);
                }
                // The request between chunks publishes what it computed last.
                if let Some((id, done)) = stash {
                    self.checkpoint(id, done, reqs);
                }
                self.log_prefill(now, log, out);
                self.recycle_items(items);
            }
        }
    }

    /// A prefilled request's first token. `add` when the decode counter did not give it.
    #[inline(always)]
    fn first_token(
        &mut self,
        now: SimTime,
        it: PrefillItem,
        add: bool,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) {
        let Place::Running {
            since_step,
            out_then,
            kv_then,
            max_new,
            ignore_eos,
            ..
        } = self.place(it.id)
        else {
            // Still chunking; or retracted (its result is discarded); or finished already —
            // set aside as finishing by length, or by a mixed batch's decode counter at its
            // first token (counted there).
            let r = &mut reqs[it.id];
            if r.phase == Phase::Finished {
                out.first_token(r, now);
            }
            return;
        };
        out.first_token(&mut reqs[it.id], now);
        let target = reqs[it.id].target_output_tokens;
        if !add || out_then + 1 < target {
            // Its input is published (a request finishing now publishes as it leaves).
            self.checkpoint(it.id, kv_then as u32, reqs);
        }
        if !add {
            return;
        }
        out.generated_tokens += 1;
        let out_then = out_then + 1;
        // Its reservation is counted anew from its new output count — unless it reserves
        // `clip`, or falls by one per step, before and after, with no change to come (the
        // usual case): then the counts are updated at once.
        let class = usize::from(ignore_eos);
        let recount = !self.count_one_more(since_step, out_then, max_new, target, class);
        if recount {
            self.count_reserved(it.id, None);
        }
        // Only its output count changes.
        if let Some(Place::Running { out_then: o, .. }) = self.places.get_mut(it.id.0 as usize) {
            *o = out_then;
        }
        self.out_less_since += 1;
        if recount {
            self.count_reserved(it.id, Some(target));
        }
        if out_then >= target {
            self.leave_running(it.id, reqs);
            self.running.retain(|&x| x != it.id);
            reqs[it.id].phase = Phase::Finished;
            out.finished.push(it.id);
            self.batch_is_full = false;
        } else {
            let finish_step = since_step + u64::from(target - out_then);
            let stay = self.stay(it.id);
            self.finish.push(finish_step, stay, it.id);
        }
    }

    /// The requests set aside as finishing by length finish now; their KV is released.
    #[inline]
    fn finish_leaving(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        if !self.leaving.is_empty() {
            self.finish_left(now, reqs, out);
        }
    }

    /// [`finish_leaving`](Self::finish_leaving) when some are.
    #[inline(never)]
    fn finish_left(&mut self, now: SimTime, reqs: &mut Requests, out: &mut Outbox) {
        for (id, kv) in std::mem::take(&mut self.leaving) {
            let r = &mut reqs[id];
            r.out_tokens = r.max_new_tokens;
            let written = (u64::from(r.prompt_tokens) + u64::from(r.out_tokens) - 1).min(kv);
            self.release_kv(id, kv, Some(written as u32), reqs);
            let r = &mut reqs[id];
            out.first_token(r, now);
            out.generated_tokens += 1;
            r.phase = Phase::Finished;
            out.finished.push(id);
            self.batch_is_full = false;
        }
    }
}
