//! One turn of the fast-forward's track (`fast_forward.rs`): `schedule()` for a RUNNING whose
//! every request decodes one token (`v1/core/sched/scheduler.py: Scheduler.schedule`, with
//! `AsyncScheduler._update_after_schedule` under async scheduling), then the output of the
//! batch that ends the turn (`update_from_output`) — the same decisions, counters and reports as
//! `schedule.rs` and `output.rs`, in O(1) plus O(1) per request preempted, admitted or
//! reporting its first output in the track; a turn that finishes requests also walks the
//! places from the first of them on (`Track::remove_finished`, and under async scheduling the
//! search for those whose last token is in flight).
//!
//! A turn is first tried — the free queue changed under its journal, nothing else — and then
//! taken or given up (the journal undone), so that a run stops exactly before a turn it does not
//! model or that would end too late. Most turns change nothing but the free blocks and the
//! counters ([`Vllm::quiet_turns`]): no preemption, admission, first output or completion, and
//! WAITING stopping where it stopped in the turn before, or, for the first of a stretch, where
//! [`Vllm::settle`] finds it stops for good.

use super::fast_forward::{fin, hashed_at, Admit, Call, Outcome, Place, Track, Waiting};
use super::{blocks_of, full_blocks, Status, Vllm};
use crate::cost::MixedStep;
use crate::request::{Phase, Requests};
use crate::scheduler::{Outbox, Turn};

impl Vllm {
    /// Try turn `tr.turn + 1` from `cx.t` and take it if the track models it and it ends before
    /// `cx.limit`.
    pub(super) fn turn(
        &mut self,
        tr: &mut Track,
        cx: &mut Call,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Outcome {
        let asynchronous = self.p.depth > 1;
        let lag = u64::from(asynchronous);
        let block = self.p.block;
        let j = tr.turn + 1;
        let len = tr.len();
        let t = cx.t;
        // Async: the turn ends with the batch already on the GPU.
        if asynchronous && t + cx.pending >= cx.limit {
            return Outcome::Stop;
        }
        let eligible = len + self.waiting.len();
        // The class of the requests that need a block: `base + j` a multiple of the block.
        let want = tr.want_at(j, block);
        let mut wanting = tr.classes[want];
        // Async: a request whose last token (by `max_tokens`) is already in flight is not
        // scheduled (`schedule`: `num_output_placeholders` past `max_tokens`); it finishes
        // this turn, and so may others.
        let (mut unscheduled, mut unscheduled_kv) = (0u64, 0i64);
        let finishing = asynchronous && tr.min_fin(len) == j;
        if finishing {
            let from = tr.first_fin(len, j);
            for p in tr.places[from..]
                .iter()
                .filter(|p| p.fin == j && p.max_stop)
            {
                unscheduled += 1;
                unscheduled_kv += p.base + j as i64 + 1;
                wanting -= u64::from(p.class as usize == want);
            }
        }
        let mut free = self.free_blocks();
        if let Some(q) = &mut self.own {
            q.open();
        }
        // RUNNING: the first `free` requests needing a block take one; the next preempts the
        // tail, and so on, until a request preempts itself.
        let mut l = len;
        let mut victims_base = 0i64;
        tr.victims.clear();
        if wanting <= free {
            free -= wanting;
            if let Some(q) = &mut self.own {
                q.take(wanting);
            }
        } else {
            let mut served = free;
            if let Some(q) = &mut self.own {
                q.take(free);
            }
            free = 0;
            while served < wanting {
                let p = tr.places[l - 1];
                if finishing && p.fin == j {
                    // Its stale output would finish it in WAITING.
                    return self.give_up();
                }
                let in_class = p.class as usize == want;
                let itself = in_class && served + 1 == wanting;
                l -= 1;
                victims_base += p.base;
                let held = blocks_of(block, (p.base + j as i64) as u64);
                free += held;
                let own = match &mut self.own {
                    Some(q) => q.free_preempted(held, hashed_at(block, &p, j, lag)),
                    None => 0,
                };
                tr.victims.push(own);
                if itself {
                    break;
                }
                if in_class {
                    wanting -= 1;
                }
                let take = (wanting - served).min(free);
                served += take;
                free -= take;
                if let Some(q) = &mut self.own {
                    q.take(take);
                }
            }
            if l == 0 {
                // Everything preempted: an empty step.
                return self.give_up();
            }
        }
        let preempted = (len - l) as u64;
        // WAITING, only if nothing was preempted.
        tr.admits.clear();
        let (mut slot_stop, mut memory_stop) = (false, false);
        // WAITING stopped where it will stop again while its head, RUNNING and the budget stay
        // and the free blocks only shrink (the head's cached blocks only shrink too).
        let mut settled = false;
        if preempted == 0 {
            let threshold = if eligible > 1 { self.p.threshold } else { 0 };
            let mut left = self.p.budget - (l as u64 - unscheduled);
            while left > 0 {
                let k = tr.admits.len();
                match self.waiting_at(k, l + k, free, left, threshold, 0) {
                    Head::End | Head::Long => {
                        settled = true;
                        break;
                    }
                    Head::Slots => {
                        slot_stop = true;
                        settled = true;
                        break;
                    }
                    Head::Memory { settles } => {
                        memory_stop = true;
                        settled = settles;
                        break;
                    }
                    Head::GiveUp => return self.give_up(),
                    Head::Admit {
                        admit,
                        own,
                        own_hit,
                        n,
                    } => {
                        let blocks = blocks_of(block, admit.known);
                        if let Some(q) = &mut self.own {
                            if own > 0 {
                                q.take_back(own, own_hit);
                            }
                            q.take(blocks - own_hit);
                        }
                        free -= blocks;
                        left -= n;
                        tr.admits.push(admit);
                    }
                }
            }
            settled |= left == 0;
        }
        // The step's cost: RUNNING decodes; an admitted request computes its prompt (and
        // outputs), or decodes if only its last token is missing (`num_computed_tokens <
        // num_tokens − 1`).
        let l_sched = l as u64 - unscheduled;
        let mut step = MixedStep {
            decode_seqs: l_sched,
            decode_kv_tokens: (tr.base_sum - victims_base + l as i64 * (j as i64 + 1)
                - unscheduled_kv) as u64,
            ..MixedStep::default()
        };
        for a in &tr.admits {
            if a.cached + 1 < a.known {
                step.prefill_seqs += 1;
                step.prefill_tokens += a.known - a.cached;
                step.prefill_kv_tokens += a.known;
            } else {
                step.decode_seqs += 1;
                step.decode_kv_tokens += a.known;
            }
        }
        if step.decode_seqs == 0 {
            // A step without decodes (or an empty one) is not the track's.
            return self.give_up();
        }
        let dur = self.cost.mixed(step);
        let seg = if asynchronous { cx.pending } else { dur };
        if t + seg >= cx.limit {
            return self.give_up();
        }
        if let Some(q) = &mut self.own {
            q.close();
        }

        // Take it. The stats lines due before its output see the outputs before.
        let end = t + seg;
        self.log_until(cx, end, out);
        let turn_index = out.step_ends.len();
        let (first0, resumed0) = (out.first_tokens, out.resumed_gaps.len());
        let (mut prompts, mut events) = (0u64, 0u64);
        // The victims, tail first, each prepended to WAITING (`_preempt_request`); under async
        // scheduling its output in flight arrives now, stale, with the preemption.
        for k in 0..tr.victims.len() {
            let own = tr.victims[k];
            let p = tr.pop();
            let id = self.running.pop().expect("invariant: the track is RUNNING");
            debug_assert_eq!(id, p.id, "invariant: the track is RUNNING");
            let s = &mut self.seqs[id.0 as usize];
            let c = (p.base + j as i64) as u64;
            let before = c + 1 - lag - u64::from(p.prompt);
            s.output = (before + lag) as u32;
            s.computed = 0;
            s.blocks = 0;
            s.hashed = 0;
            s.own = own;
            s.in_flight = 0;
            s.stale = 0;
            s.placeholders = 0;
            s.status = Status::Waiting;
            s.preemption_events += 1;
            s.resumed = true;
            let r = &mut reqs[id];
            r.evictions += 1;
            r.evicted(t);
            r.phase = Phase::Waiting;
            if asynchronous {
                events += u64::from(std::mem::take(&mut s.preemption_events));
                if before == 0 {
                    prompts += u64::from(p.prompt);
                    s.resumed = false;
                    out.first_token(r, end);
                }
            }
            self.waiting.push_front(id);
        }
        if preempted > 0 {
            self.counters.evictions += preempted;
            self.counters.eviction_events += 1;
        }
        // The admitted, appended to RUNNING; the batch starts when the GPU is free.
        let start = if asynchronous { end } else { t };
        for k in 0..tr.admits.len() {
            let a = tr.admits[k];
            let id = self
                .waiting
                .pop_front()
                .expect("invariant: admitted from WAITING");
            debug_assert_eq!(id, a.id, "invariant: admitted in order");
            let s = &mut self.seqs[id.0 as usize];
            s.status = Status::Running;
            s.computed = a.known as u32;
            s.in_flight = (a.known - a.cached) as u32;
            s.placeholders = lag as u32;
            s.blocks = blocks_of(block, a.known) as u32;
            if self.own.is_some() {
                s.own = 0;
                s.hashed = full_blocks(block, a.known) as u32;
            }
            let r = &mut reqs[id];
            r.phase = Phase::Running;
            if r.admitted_at.is_none() {
                r.cached_tokens = a.cached as u32;
                self.counters.first_admissions += 1;
                self.counters.first_admission_prompt_tokens += u64::from(r.prompt_tokens);
                self.counters.cached_prompt_tokens += a.cached;
                self.counters.cache_hit_requests += u64::from(a.cached > 0);
            }
            r.admitted_at.get_or_insert(start);
            self.running.push(id);
            // Its computed tokens before turn j + 1 are its known ones.
            let base = a.known as i64 - j as i64 - 1;
            tr.push(Place {
                id,
                base,
                class: base.rem_euclid(block as i64) as u32,
                prompt: s.prompt,
                h0: s.hashed,
                in_flight0: s.in_flight,
                since: j + 1,
                out0: j + lag,
                fin: fin(s, base, lag as i64),
                max_stop: s.stop_at == s.max_tokens,
            });
        }
        self.used_blocks = self.p.usable_blocks - free;
        self.finished_pending = false;
        let state = (
            self.running.len() as u64,
            self.waiting.len() as u64,
            self.used_blocks * block,
        );

        // The output: under async scheduling the batch scheduled last turn (the places at
        // the turn's start, victims included), without it this turn's.
        let generated = if asynchronous {
            len as u64
        } else {
            tr.len() as u64
        };
        // The requests whose first output in the track this is (a suffix of RUNNING): a first
        // token, or the first since a preemption, and the preemptions they carried.
        let (mut from, mut to) = (0, 0);
        if tr.places.last().is_some_and(|p| p.out0 >= j) {
            to = tr.len();
            while to > 0 && tr.places[to - 1].out0 > j {
                to -= 1;
            }
            from = to;
            while from > 0 && tr.places[from - 1].out0 == j {
                from -= 1;
            }
        }
        for p in &tr.places[from..to] {
            let s = &mut self.seqs[p.id.0 as usize];
            events += u64::from(std::mem::take(&mut s.preemption_events));
            let r = &mut reqs[p.id];
            if s.output == 0 {
                prompts += u64::from(p.prompt);
                out.first_token(r, end);
            } else if s.resumed {
                out.token_after_eviction(r, end);
            }
            s.resumed = false;
        }
        // Those that reach their stop leave (`_free_request`): their hashed blocks to the free
        // queue's tail, the rest to its head.
        let finished = tr.min_fin(tr.len()) == j;
        if finished {
            tr.remove_finished(j, &mut self.running);
            for k in 0..tr.done.len() {
                let p = tr.done[k];
                let c = (p.base + j as i64) as u64;
                let blocks = if asynchronous && p.max_stop {
                    blocks_of(block, c)
                } else {
                    blocks_of(block, c + 1)
                };
                self.used_blocks -= blocks;
                if let Some(q) = &mut self.own {
                    let hashed = u64::from(p.h0).max(full_blocks(block, c + 1 - lag));
                    q.free_finished(blocks, hashed);
                }
                let s = &mut self.seqs[p.id.0 as usize];
                let r = &mut reqs[p.id];
                r.out_tokens = s.stop_at;
                r.phase = Phase::Finished;
                *s = Default::default();
                out.finished.push(p.id);
            }
            self.finished_pending = true;
        }
        tr.waiting =
            (preempted == 0 && tr.admits.is_empty() && settled && !finished).then(|| Waiting {
                head: self.waiting.front().copied(),
                running: l,
                free,
                slot_stop,
                memory_stop,
            });
        let firsts = out.first_tokens - first0;
        let resumed = out.resumed_gaps.len() - resumed0;
        if firsts > 0 || resumed > 0 {
            out.outside_tokens.push((turn_index, firsts, resumed));
        }
        out.step_ends.push((end, generated));
        out.turns.push(Turn {
            end,
            running: state.0,
            queued: state.1,
            kv_used_tokens: state.2,
            tokens: generated,
        });
        out.generated_tokens += generated;
        cx.generated += generated;
        cx.prompts += prompts;
        cx.events += events;
        let seen = (
            self.running.len() as u64,
            self.waiting.len() as u64,
            self.used_blocks * block,
        );
        cx.saw_running |= seen.0 > 0;
        cx.seen = Some(seen);
        self.counters.decode_steps += 1;
        self.counters.fast_forwarded_steps += 1;
        self.counters.slot_stops += u64::from(slot_stop);
        self.counters.memory_stops += u64::from(memory_stop);
        cx.t = end;
        if asynchronous {
            cx.pending = dur;
        }
        tr.advance();
        if finished {
            Outcome::Finished
        } else {
            Outcome::Taken
        }
    }

    /// Quiet turns — nothing to preempt, admit, report or finish, WAITING stopping as in the
    /// turn before ([`Waiting`]), or, when no turn before left it so, as [`Vllm::settle`] finds
    /// for the first of them — each taken in a few steps, at most `most` of them: how many
    /// were taken, and whether the next would end past the run's limit (the run stops; else
    /// the next turn, if any, is not quiet). While turns are quiet, RUNNING, WAITING and where
    /// WAITING stops do not change, so their checks are made once for the stretch, and the
    /// turns' state is summed for the simulator once for the stretch, not turn by turn
    /// ([`crate::scheduler::Turns::push_summed`]).
    pub(super) fn quiet_turns(
        &mut self,
        tr: &mut Track,
        cx: &mut Call,
        out: &mut Outbox,
        most: u64,
    ) -> (u64, bool) {
        let l = tr.len();
        let holds = |w: &Waiting| l == w.running && self.waiting.front().copied() == w.head;
        let w = match tr.waiting {
            Some(w) if holds(&w) => w,
            _ => match self.settle(tr) {
                Some(w) => w,
                None => return (0, false),
            },
        };
        let asynchronous = self.p.depth > 1;
        let block = self.p.block;
        // The first turn at which a request finishes, and the last at which one still reports
        // its first output: neither turn is quiet.
        let finish = tr.min_fin(l);
        let first_output = tr.places.last().map_or(0, |p| p.out0);
        // At most `most` of them, up to the one before `finish`; none if the first is a turn at
        // which a request reports its first output.
        let j0 = tr.turn + 1;
        let most = if first_output >= j0 {
            0
        } else {
            finish.checked_sub(j0).map_or(most, |d| d.min(most))
        };
        let queued = self.waiting.len() as u64;
        let decode_seqs = l as u64;
        let free0 = self.free_blocks();
        let mut free = free0;
        let mut used = self.used_blocks;
        // Each turn's step is a decode step of RUNNING (a step without prompt tokens costs
        // `decode`'s: `StepTimeModel::mixed`), attending `l` more KV tokens than the last.
        let kv_first = (tr.base_sum + l as i64 * (j0 as i64 + 1)) as u64;
        // The turns `Turns::push` would sum, summed here: how many, Σ dt and Σ dt·KV used (the
        // state is the same but for the KV); the latest turn taken.
        let (mut summed, mut sum_dt, mut sum_kv) = (0u64, 0u64, 0u128);
        let mut last: Option<Turn> = None;
        let mut taken = 0;
        let stopped = loop {
            if taken == most {
                break false;
            }
            let j = tr.turn + 1;
            let wanting = tr.classes[tr.want_at(j, block)];
            if wanting > free || free - wanting > w.free {
                break false;
            }
            let kv = kv_first + decode_seqs * taken;
            let dur = self.cost.decode(decode_seqs, kv);
            debug_assert_eq!(
                dur,
                self.cost.mixed(MixedStep {
                    decode_seqs,
                    decode_kv_tokens: kv,
                    ..MixedStep::default()
                }),
                "invariant: a quiet turn costs a decode step"
            );
            let end = cx.t + if asynchronous { cx.pending } else { dur };
            if end >= cx.limit {
                break true;
            }
            used += wanting;
            free -= wanting;
            if cx.next_log < end {
                // The lines due before this turn's end see the state after the turn before.
                if let Some(t) = last {
                    cx.seen = Some((decode_seqs, queued, t.kv_used_tokens));
                }
                self.log_until(cx, end, out);
            }
            let turn = Turn {
                end,
                running: decode_seqs,
                queued,
                kv_used_tokens: used * block,
                tokens: decode_seqs,
            };
            out.step_ends.push((end, decode_seqs));
            if out.turns.sums_to(end) {
                let dt = (end - cx.t).as_ns();
                summed += 1;
                sum_dt += dt;
                sum_kv += u128::from(dt) * u128::from(turn.kv_used_tokens);
            } else {
                // The turns summed so far go first (none, if a turn before was listed).
                if let Some(t) = last {
                    out.turns.push_summed(summed, sum_dt, sum_kv, t);
                    summed = 0;
                }
                out.turns.push(turn);
            }
            last = Some(turn);
            cx.generated += decode_seqs;
            cx.t = end;
            if asynchronous {
                cx.pending = dur;
            }
            tr.advance();
            taken += 1;
        };
        if let Some(t) = last {
            out.turns.push_summed(summed, sum_dt, sum_kv, t);
            cx.seen = Some((decode_seqs, queued, t.kv_used_tokens));
            cx.saw_running = true;
            self.finished_pending = false;
        }
        self.used_blocks = used;
        // RUNNING's new blocks off the free queue, the stretch's at once: nothing else takes or
        // frees blocks meanwhile, and turn by turn they leave the queue in its order, as
        // together.
        if let Some(q) = &mut self.own {
            q.take(free0 - free);
        }
        out.generated_tokens += decode_seqs * taken;
        self.counters.decode_steps += taken;
        self.counters.fast_forwarded_steps += taken;
        self.counters.slot_stops += taken * u64::from(w.slot_stop);
        self.counters.memory_stops += taken * u64::from(w.memory_stop);
        (taken, stopped)
    }

    /// Where WAITING stops at turn `tr.turn + 1`, if that turn is quiet but for it (nothing to
    /// preempt, report or finish) and WAITING stops there, settled, without admitting anything
    /// ([`Vllm::waiting_at`] on its head, after RUNNING's blocks): the [`Waiting`] the turn
    /// would leave, which then holds for it too. Changes nothing but `tr.waiting`.
    #[inline(always)]
    pub(super) fn settle(&self, tr: &mut Track) -> Option<Waiting> {
        let l = tr.len();
        let j = tr.turn + 1;
        if l == 0 || tr.min_fin(l) == j || tr.places.last().is_some_and(|p| p.out0 >= j) {
            return None;
        }
        let wanting = tr.classes[tr.want_at(j, self.p.block)];
        let free = self.free_blocks().checked_sub(wanting)?;
        let left = self.p.budget - l as u64;
        let (mut slot_stop, mut memory_stop) = (false, false);
        if left > 0 {
            let eligible = l + self.waiting.len();
            let threshold = if eligible > 1 { self.p.threshold } else { 0 };
            let head = self.waiting_at(0, l, free, left, threshold, wanting);
            match head {
                Head::End | Head::Long => {}
                Head::Slots => slot_stop = true,
                Head::Memory { settles: true } => memory_stop = true,
                Head::Memory { settles: false } | Head::GiveUp | Head::Admit { .. } => return None,
            }
        }
        let w = Waiting {
            head: self.waiting.front().copied(),
            running: l,
            free,
            slot_stop,
            memory_stop,
        };
        tr.waiting = Some(w);
        Some(w)
    }

    /// What WAITING's request `k` meets in a turn's admission (`schedule`'s WAITING loop), with
    /// `running` requests in RUNNING and those admitted before it, `free` blocks and `left` of
    /// the token budget, and `taking` blocks still to be taken off the free queue before it
    /// (RUNNING's, its own cached blocks counted as they will be then): the queue's end, the
    /// slot limit, a stop, a step the track does not model, or its admission with its whole
    /// known sequence in one chunk. Changes nothing.
    #[inline(always)]
    fn waiting_at(
        &self,
        k: usize,
        running: usize,
        free: u64,
        left: u64,
        threshold: u64,
        taking: u64,
    ) -> Head {
        let Some(&id) = self.waiting.get(k) else {
            return Head::End;
        };
        if running >= self.p.max_seqs {
            return Head::Slots;
        }
        let block = self.p.block;
        let s = &self.seqs[id.0 as usize];
        if s.stale > 0 {
            // Skipped for its output in flight (`deferred`; unreached, see `schedule`).
            return Head::GiveUp;
        }
        let known = s.tokens();
        let mml = self.p.max_model_len;
        let full = self.p.full_isl && blocks_of(block, known.min(mml)) > free;
        if full && self.p.chunked {
            // Whatever its cached blocks, its whole sequence does not fit.
            return Head::Memory { settles: true };
        }
        let own_hit = match &self.own {
            Some(q) if s.own > 0 => q.cached_after(s.own, taking).min((known - 1) / block),
            _ => 0,
        };
        let cached = own_hit * block;
        let n = if threshold > 0 && known - cached > threshold {
            threshold
        } else {
            known - cached
        };
        if !self.p.chunked && n > left {
            // Fewer cached blocks only lengthen the chunk.
            return Head::Long;
        }
        let n = n.min(left);
        if full || blocks_of(block, (cached + n).min(mml)) > free {
            // Unless the chunk was cut short, what it needs is its whole sequence.
            return Head::Memory {
                settles: full || cached + n == known,
            };
        }
        if cached + n < known {
            // A partial chunk: it samples nothing and goes on prefilling.
            return Head::GiveUp;
        }
        Head::Admit {
            admit: Admit { id, known, cached },
            own: s.own,
            own_hit,
            n,
        }
    }

    /// Give the turn up: the free queue as it was.
    fn give_up(&mut self) -> Outcome {
        if let Some(q) = &mut self.own {
            q.undo();
        }
        Outcome::Stop
    }
}

/// What a request of WAITING meets in a turn's admission ([`Vllm::waiting_at`]).
enum Head {
    /// WAITING ends before it.
    End,
    /// RUNNING is at `max_num_seqs`.
    Slots,
    /// Chunked prefill off, its chunk exceeds the budget left.
    Long,
    /// Its blocks do not fit; `settles`: what it needs is its whole sequence, so that it stops
    /// there again while the free blocks only shrink.
    Memory { settles: bool },
    /// A step the track does not model: skipped for its output in flight, or a partial chunk.
    GiveUp,
    /// Admitted, its `n` tokens computed, `own_hit` of its own cached blocks (segment `own`)
    /// taken back.
    Admit {
        admit: Admit,
        own: u64,
        own_hit: u64,
        n: u64,
    },
}
