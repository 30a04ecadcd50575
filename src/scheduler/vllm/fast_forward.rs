//! Fast-forward: vLLM's steps taken without visiting every running request at every step, with
//! exactly the state, counters, outputs and log lines of the step-by-step path, each turn's
//! server state listed (`Outbox::turns`) for the simulator to integrate and to take the
//! time-series points inside the run. Under async scheduling each step is one turn of the batch
//! queue: schedule the next batch, then process the one on the GPU.
//!
//! Once every request of RUNNING decodes one token a step (each chunk on the GPU reaches its
//! last known token), RUNNING is kept as a [`Track`]: each request's computed tokens grow by one
//! a turn, so a request is described once — its computed tokens before turn `j` are
//! `base + j` — and its counters in [`Seq`] are brought up to date only when the step-by-step
//! path needs them ([`Vllm::materialize`]). A turn then costs O(1) plus O(1) per request it
//! preempts, admits or reports a first output for; a turn that finishes requests also moves
//! down the places after the first of them (`Track::remove_finished`). It follows `v1/core/sched/scheduler.py: Scheduler.schedule` and
//! `update_from_output` (`turn.rs`):
//!
//! * the requests needing a block at turn `j` are those whose computed count is a multiple of
//!   the block size, counted per residue class of `base`; they take one in RUNNING's order, and
//!   when none is left the last request of RUNNING is preempted (`_preempt_request`), again and
//!   again, or the request preempts itself;
//! * then, if nothing was preempted, WAITING's head is admitted with its whole known sequence
//!   in one chunk (`allocate_slots`, `full_sequence_must_fit`), as many as fit;
//! * the batch's output reaches its requests; those that reach their stop finish, which ends
//!   the run so that the simulator answers them (and the client sends the next request) before
//!   the next step is scheduled.
//!
//! Preemption takes RUNNING's tail and admission appends to it, so the track is a stack: the
//! earliest finishing turn is kept for each prefix of it, and the counts per residue class and
//! the sum of `base` for the whole track, a preempted place's taken out as it leaves. A turn the
//! track does not model (a partial prompt chunk, a request skipped for its output in flight,
//! everything preempted, a step with nothing to decode, under async scheduling the preemption
//! of a request that finishes in that step) is left to `schedule()`: the run stops before it.
//!
//! With prefix caching and no shared prefixes (`own_cache.rs`) a turn works on the free queue
//! itself, under a journal that undoes it when the turn is not taken (`v1/core/block_pool.py`,
//! `v1/core/kv_cache_manager.py: get_computed_blocks`).
//!
//! A long stretch of quiet turns is not taken turn by turn but as a run of its own, in closed
//! form (`stretch.rs`): a run of turns stops before one, and the next run is that stretch.

use super::log::INTERVAL;
use super::{blocks_of, full_blocks, Entry, Item, Seq, Status, Vllm};
use crate::request::{ReqId, Requests};
use crate::scheduler::{LogRecord, Outbox, RunState, Skip, Then};
use crate::time::{SimDuration, SimTime};

/// A request of RUNNING, by its place in RUNNING, as the track follows it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Place {
    pub id: ReqId,
    /// Its computed tokens before turn `j` are `base + j`.
    pub base: i64,
    /// `base` modulo the block size: it needs a block at turn `j` when `base + j` is a multiple.
    pub class: u32,
    pub prompt: u32,
    /// Its `num_cached_block` at turn `since`; later the floor of what the turns cache.
    pub h0: u32,
    /// Its tokens in the batch on the GPU at turn `since` (async; later 1).
    pub in_flight0: u32,
    /// Its first turn in the track.
    pub since: u64,
    /// The turn whose processed output is its first in the track.
    pub out0: u64,
    /// The turn whose processed output is its last (its `stop_at`).
    pub fin: u64,
    /// It stops at `max_tokens`: under async scheduling its last turn does not schedule it
    /// (its last token is already in flight).
    pub max_stop: bool,
}

/// A request of WAITING admitted in a turn, with its whole known sequence in one chunk.
#[derive(Clone, Copy, Debug)]
pub(super) struct Admit {
    pub id: ReqId,
    /// Known tokens (`num_tokens`).
    pub known: u64,
    /// Of them, the tokens of its own blocks found still cached.
    pub cached: u64,
}

/// How a turn went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Not taken: left to `schedule()`, or past the run's limit.
    Stop,
    /// Taken.
    Taken,
    /// Taken, and requests finished: the run ends here.
    Finished,
}

/// RUNNING as a stack of [`Place`]s, with the counts of each prefix.
#[derive(Debug, Default)]
pub(super) struct Track {
    /// The track holds RUNNING (its requests' counters in `Seq` lag).
    pub on: bool,
    /// Turns taken since it was built; the next is `turn + 1`.
    pub turn: u64,
    pub places: Vec<Place>,
    /// Σ `base` over the places.
    pub base_sum: i64,
    /// The earliest `fin` up to each place.
    min_fin: Vec<u64>,
    /// Places per residue class.
    pub classes: Vec<u64>,
    /// The class that needs a block at the next turn: `−(turn + 1)` modulo the block size.
    want: usize,
    /// WAITING's outcome, while it holds.
    pub waiting: Option<Waiting>,
    /// A turn's scratch: the victims' segments (serial + 1) in preemption order, the
    /// admissions, the places that finished.
    pub victims: Vec<u64>,
    pub admits: Vec<Admit>,
    pub done: Vec<Place>,
    /// Scratch for [`Track::block_prefix`].
    pub prefix: Vec<u64>,
}

impl Track {
    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn push(&mut self, p: Place) {
        let fin = self.min_fin.last().copied().unwrap_or(u64::MAX).min(p.fin);
        self.base_sum += p.base;
        self.min_fin.push(fin);
        self.classes[p.class as usize] += 1;
        self.places.push(p);
    }

    pub fn pop(&mut self) -> Place {
        let p = self.places.pop().expect("invariant: a place to pop");
        self.base_sum -= p.base;
        self.min_fin.pop();
        self.classes[p.class as usize] -= 1;
        p
    }

    /// The earliest `fin` among the first `l` places.
    pub fn min_fin(&self, l: usize) -> u64 {
        if l == 0 {
            u64::MAX
        } else {
            self.min_fin[l - 1]
        }
    }

    /// The first of the first `l` places whose `fin` is `j`, when `j` is their earliest
    /// (`min_fin(l) == j`): where their prefix minimum reaches `j`.
    pub fn first_fin(&self, l: usize, j: u64) -> usize {
        debug_assert_eq!(
            self.min_fin(l),
            j,
            "invariant: a place of the prefix finishes at j"
        );
        self.min_fin[..l].partition_point(|&f| f > j)
    }

    /// Remove the places that finish at turn `j` (the earliest `fin`), into `done` in order,
    /// and the same entries of `running`, which holds the places' ids.
    pub fn remove_finished(&mut self, j: u64, running: &mut Vec<ReqId>) {
        let len = self.places.len();
        debug_assert_eq!(running.len(), len, "invariant: the track is RUNNING");
        let from = self.first_fin(len, j);
        self.done.clear();
        // At the loop's top `places[k]` finishes; the places after it up to the next that
        // does move down to `w`.
        let (mut w, mut k) = (from, from);
        while k < len {
            let p = self.places[k];
            self.classes[p.class as usize] -= 1;
            self.base_sum -= p.base;
            self.done.push(p);
            k += 1;
            let start = k;
            while k < len && self.places[k].fin != j {
                k += 1;
            }
            self.places.copy_within(start..k, w);
            running.copy_within(start..k, w);
            w += k - start;
        }
        self.places.truncate(w);
        running.truncate(w);
        self.min_fin.truncate(w);
        let mut fin = self.min_fin(from);
        for (m, p) in self.min_fin[from..].iter_mut().zip(&self.places[from..]) {
            fin = fin.min(p.fin);
            *m = fin;
        }
    }

    fn clear(&mut self, block: u64) {
        self.on = false;
        self.turn = 0;
        self.waiting = None;
        self.places.clear();
        self.base_sum = 0;
        self.min_fin.clear();
        self.classes.clear();
        self.classes.resize(block as usize, 0);
        self.want = (block - 1) as usize;
    }

    /// The class that needs a block at turn `j`, the next.
    pub fn want_at(&self, j: u64, block: u64) -> usize {
        debug_assert_eq!(j, self.turn + 1, "invariant: the next turn");
        debug_assert_eq!(self.want as u64, (block - j % block) % block);
        self.want
    }

    /// The blocks the next turns take, as `prefix[t]` for the first `t` of them, `t` up to the
    /// block size (their period): turn `j` takes one for each place of the class
    /// [`Track::want_at`] names, which steps back by one a turn.
    pub fn block_prefix(&self, prefix: &mut Vec<u64>) {
        let period = self.classes.len();
        prefix.clear();
        prefix.push(0);
        let (mut w, mut sum) = (self.want, 0);
        for _ in 0..period {
            sum += self.classes[w];
            prefix.push(sum);
            w = w.checked_sub(1).unwrap_or(period - 1);
        }
    }

    /// Turns `turn + 1` to `turn + k` were taken.
    pub fn advance_by(&mut self, k: u64) {
        let period = self.classes.len() as u64;
        self.turn += k;
        self.want = ((self.want as u64 + period - k % period) % period) as usize;
    }

    /// Turn `turn + 1` was taken.
    pub fn advance(&mut self) {
        self.turn += 1;
        self.want = match self.want {
            0 => self.classes.len() - 1,
            w => w - 1,
        };
    }
}

/// Where WAITING stopped in the latest turn that preempted and admitted nothing (or stops in
/// the next, as `Vllm::settle` finds it before the turn), when it will stop there again while
/// its head and RUNNING stay and the free blocks only shrink: the outcome of every step the
/// track models depends on the head's known tokens (fixed while it waits), its cached blocks
/// (which only evictions change, fewer), RUNNING's length (the budget left and `max_num_seqs`)
/// and the free blocks — a stop for the head's whole sequence, at the slot limit, without
/// budget, or (chunked prefill off) for a chunk too long stays one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Waiting {
    pub head: Option<ReqId>,
    /// RUNNING's length then.
    pub running: usize,
    /// Free blocks then, after RUNNING's.
    pub free: u64,
    pub slot_stop: bool,
    pub memory_stop: bool,
}

/// What one call of the fast-forward carries from turn to turn.
pub(super) struct Call {
    /// When the next turn starts.
    pub t: SimTime,
    /// Turns must end before this.
    pub limit: SimTime,
    /// Async: the duration of the batch on the GPU, which ends the next turn.
    pub pending: SimDuration,
    /// When the next stats line is due.
    pub next_log: SimTime,
    /// Outputs processed since the stats logger last heard: tokens, prompts of first tokens,
    /// preemptions reported.
    pub generated: u64,
    pub prompts: u64,
    pub events: u64,
    /// The state after the latest turn's output, if the logger has not seen it.
    pub seen: Option<(u64, u64, u64)>,
    /// A turn's output left a request running.
    pub saw_running: bool,
}

/// A place's `num_cached_block` at the start of turn `j` (`lag`: 1 under async scheduling,
/// whose outputs cache the tokens no longer in flight).
pub(super) fn hashed_at(block: u64, p: &Place, j: u64, lag: u64) -> u64 {
    let h0 = u64::from(p.h0);
    if j == p.since {
        h0
    } else {
        h0.max(full_blocks(block, (p.base + j as i64) as u64 - lag))
    }
}

impl Vllm {
    /// Take the turns from `now` on that end before `limit`, at most `max_steps`, up to and
    /// including the first that finishes a request.
    pub(super) fn fast_forward(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        let asynchronous = self.p.depth > 1;
        if !self.track.on && !self.build_track(now) {
            return None;
        }
        let pending = match self.queue.front() {
            Some(Entry::Real(b)) if asynchronous => {
                debug_assert_eq!(b.start, now, "invariant: the batch on the GPU started now");
                b.end - b.start
            }
            _ => SimDuration::ZERO,
        };
        let mut cx = Call {
            t: now,
            limit,
            pending,
            next_log: self.stats.next_at(),
            generated: 0,
            prompts: 0,
            events: 0,
            seen: None,
            saw_running: false,
        };
        let mut tr = std::mem::take(&mut self.track);
        let mut steps = 0;
        let (mut state, mut then) = (RunState::Turns, Then::Batch);
        while steps < max_steps {
            // A long quiet stretch is a run of its own: the first thing in a run, or the next.
            if let Some(s) = self.long_stretch(&mut tr, &cx, max_steps - steps, out) {
                if steps == 0 {
                    steps = s.turns;
                    then = if s.stopped { Then::Batch } else { Then::Run };
                    state = self.take_stretch(&mut tr, &mut cx, out, s);
                } else {
                    out.run_ends.clear();
                    then = Then::Run;
                }
                break;
            }
            let (quiet, stopped) = self.quiet_turns(&mut tr, &mut cx, out, max_steps - steps);
            steps += quiet;
            if stopped || steps == max_steps {
                break;
            }
            match self.turn(&mut tr, &mut cx, reqs, out) {
                Outcome::Stop => break,
                Outcome::Taken => steps += 1,
                Outcome::Finished => {
                    steps += 1;
                    break;
                }
            }
        }
        self.track = tr;
        if steps == 0 {
            return None;
        }
        self.flush_stats(&mut cx);
        if cx.saw_running {
            self.stats.saw_running();
        }
        let (running, waiting, used) = (
            self.running.len() as u64,
            self.waiting.len() as u64,
            self.used_blocks * self.p.block,
        );
        self.stats.snapshot(running, waiting, self.deferred, used);
        if asynchronous {
            // The batch the last turn scheduled is on the GPU from the run's end (its items are
            // the track's, written out by `materialize`).
            let Some(Entry::Real(b)) = self.queue.front_mut() else {
                unreachable!("invariant: a run under async scheduling keeps a batch on the GPU");
            };
            b.start = cx.t;
            b.end = cx.t + cx.pending;
            self.gpu_free = b.end;
        } else {
            self.gpu_free = cx.t;
        }
        self.check_track();
        Some(Skip {
            steps,
            end: cx.t,
            state,
            then,
        })
    }

    /// Hand the stats logger the outputs since it last heard, and the state after the latest.
    pub(super) fn flush_stats(&mut self, cx: &mut Call) {
        self.stats.on_outputs(
            std::mem::take(&mut cx.generated),
            std::mem::take(&mut cx.prompts),
            std::mem::take(&mut cx.events),
        );
        if let Some((running, waiting, used)) = cx.seen.take() {
            self.stats.snapshot(running, waiting, self.deferred, used);
        }
    }

    /// The stats lines due before `end`, each after the outputs before it.
    #[inline]
    pub(super) fn log_until(&mut self, cx: &mut Call, end: SimTime, out: &mut Outbox) {
        if cx.next_log < end {
            self.log_lines_until(cx, end, out);
        }
    }

    /// [`Vllm::log_until`] when a line is due (every 10 s of the run: out of line).
    #[inline(never)]
    fn log_lines_until(&mut self, cx: &mut Call, end: SimTime, out: &mut Outbox) {
        while cx.next_log < end {
            self.flush_stats(cx);
            if let Some(rec) = self.stats.tick(cx.next_log) {
                out.log.push(LogRecord::Interval(rec));
            }
            cx.next_log += INTERVAL;
        }
    }

    /// Build the track from RUNNING at `now`, if every request of it decodes: under async
    /// scheduling the batch on the GPU is RUNNING, in order, each chunk reaching its last known
    /// token (besides them only requests finished since it was scheduled, whose outputs are
    /// dropped by `update_from_output`); without it, each request has one known token left to
    /// compute after its first output.
    fn build_track(&mut self, now: SimTime) -> bool {
        let asynchronous = self.p.depth > 1;
        let r = self.running.len();
        if r == 0 || r as u64 > self.p.budget || self.deferred > 0 || self.pool.is_some() {
            return false;
        }
        match (asynchronous, self.queue.len(), self.queue.front()) {
            (false, 0, _) => {}
            (true, 1, Some(Entry::Real(b))) => {
                let seqs = &self.seqs;
                let mut live = b.items.iter().filter(|it| {
                    let s = &seqs[it.id.0 as usize];
                    s.uid == it.uid && s.status != Status::Absent
                });
                let same = self.running.iter().all(|&id| {
                    live.next().is_some_and(|it| {
                        it.id == id && it.samples && it.tokens == seqs[id.0 as usize].in_flight
                    })
                }) && live.next().is_none();
                if !same || b.start != now {
                    return false;
                }
            }
            _ => return false,
        }
        let block = self.p.block;
        let lag = i64::from(asynchronous);
        let mut tr = std::mem::take(&mut self.track);
        tr.clear(block);
        for &id in &self.running {
            let s = &self.seqs[id.0 as usize];
            let c = u64::from(s.computed);
            let decoding = if asynchronous {
                c == s.tokens() && s.placeholders == 1 && s.in_flight >= 1
            } else {
                c + 1 == s.tokens() && s.placeholders == 0 && s.in_flight == 0 && s.output > 0
            };
            if !decoding || s.stale > 0 || u64::from(s.blocks) != blocks_of(block, c) {
                self.track = tr;
                return false;
            }
            let base = c as i64 - 1;
            tr.push(Place {
                id,
                base,
                class: base.rem_euclid(block as i64) as u32,
                prompt: s.prompt,
                h0: s.hashed,
                in_flight0: s.in_flight,
                since: 1,
                out0: 1,
                fin: fin(s, base, lag),
                max_stop: s.stop_at == s.max_tokens,
            });
        }
        tr.on = true;
        self.track = tr;
        true
    }

    /// Bring RUNNING's counters (and under async scheduling the batch on the GPU) up to date
    /// from the track, for the step-by-step path; the track is off until the next run.
    pub(super) fn materialize(&mut self) {
        if !self.track.on {
            return;
        }
        let asynchronous = self.p.depth > 1;
        let (block, lag) = (self.p.block, u64::from(asynchronous));
        let cache = self.own.is_some();
        let j = self.track.turn + 1;
        for p in &self.track.places {
            let s = &mut self.seqs[p.id.0 as usize];
            let c = (p.base + j as i64) as u64;
            s.computed = c as u32;
            s.output = (c + 1 - lag - u64::from(s.prompt)) as u32;
            s.blocks = blocks_of(block, c) as u32;
            if cache {
                s.hashed = hashed_at(block, p, j, lag) as u32;
            }
            s.in_flight = match (asynchronous, j == p.since) {
                (false, _) => 0,
                (true, true) => p.in_flight0,
                (true, false) => 1,
            };
        }
        if asynchronous {
            let Some(Entry::Real(b)) = self.queue.front_mut() else {
                unreachable!("invariant: the track under async scheduling has a batch on the GPU");
            };
            b.items.clear();
            b.items.extend(self.track.places.iter().map(|p| {
                let s = &self.seqs[p.id.0 as usize];
                Item {
                    id: p.id,
                    uid: s.uid,
                    tokens: s.in_flight,
                    samples: true,
                }
            }));
        }
        self.track.on = false;
    }

    /// The track's invariants (debug builds): it is RUNNING, and the pool's use is its blocks.
    fn check_track(&self) {
        #[cfg(debug_assertions)]
        {
            let tr = &self.track;
            let j = tr.turn + 1;
            debug_assert!(
                tr.places
                    .iter()
                    .map(|p| p.id)
                    .eq(self.running.iter().copied()),
                "invariant: the track is RUNNING"
            );
            let held: u64 = tr
                .places
                .iter()
                .map(|p| blocks_of(self.p.block, (p.base + j as i64) as u64))
                .sum();
            debug_assert_eq!(
                held + self
                    .waiting
                    .iter()
                    .map(|&id| u64::from(self.seq(id).blocks))
                    .sum::<u64>(),
                self.used_blocks,
                "invariant: the pool's use is the requests' blocks"
            );
        }
    }
}

/// The turn whose processed output brings a request to its stop, for a place of `base` (`lag`:
/// 1 under async scheduling, where the output of turn `j` is the batch scheduled at `j − 1`).
pub(super) fn fin(s: &Seq, base: i64, lag: i64) -> u64 {
    (i64::from(s.prompt) + i64::from(s.stop_at) - base - 2 + lag) as u64
}
