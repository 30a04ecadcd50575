//! Fast-forward: the decode steps a scheduler takes at once
//! ([`crate::scheduler::Scheduler::skip_decode`]), and what the recorder sees of them — the
//! time-series points and observations inside a run taken as the step-by-step path takes them.

use super::Simulator;
use crate::cost;
use crate::scheduler::{RunKv, RunState, ServerState, Then};
use crate::time::{SimDuration, SimTime};

/// What [`Simulator::fast_forward`] did.
pub(super) enum Run {
    /// No run: the next batch goes step by step.
    None,
    /// A run, ended before anything changed.
    Taken,
    /// A run, ended before anything changed, after which the scheduler may take another at
    /// once ([`Then::Run`]).
    Again,
    /// A run whose last step completed requests.
    Completed,
}

impl Simulator<'_> {
    /// Take at once the decode steps that change nothing but the KV (but for the completions
    /// at a run's last step and, under vLLM, the preemptions and admissions inside it:
    /// [`crate::scheduler::Scheduler::skip_decode`]), up to the next event or `max_sim_s`; the scheduler prints the lines on its own clock that fall inside
    /// the run. Time-series points and observations inside the run are taken as the
    /// step-by-step path takes them ([`Simulator::constant_run`], [`Simulator::take_turns`]).
    /// `batches`: the scheduler batches run so far. Returns whether a run was taken, and
    /// whether its last step completed requests (in the outbox, to be answered at the run's
    /// end, now).
    pub(super) fn fast_forward(&mut self, batches: u64) -> Run {
        // `max_sim_s`; and a part of the steady window ends at its end: the steps up to it,
        // then the others.
        let cap = if self.now <= self.caps.part_end {
            self.caps.in_part
        } else {
            self.caps.after_part
        };
        let limit = self.events.peek_time().unwrap_or(SimTime::LIMIT).min(cap);
        // `check_limits` stops a run that has used up `run.max_events` batches: a run takes
        // no more than are left, so that it stops where step by step would.
        let left = self.max_batches.saturating_sub(batches);
        // Turns are listed only from where a time-series point or an observation may fall.
        let due = self.recorder.next_snapshot_at();
        self.outbox.clear_for_run(self.now, due);
        let (now, reqs, out) = (self.now, &mut self.requests, &mut self.outbox);
        if let Some(skip) = self.scheduler.skip_decode(now, limit, left, reqs, out) {
            // The run's state integrals start now: the recorder integrates up to now and takes
            // the requests in flight. The server state it is given is the one after the run,
            // which the run overwrites before anything reads it (`integrate_run`,
            // `integrate_turns`, the first listed turn's `set_state`) but for the KV pool's
            // size, the same throughout; so no attempt that takes no run asks for the state.
            self.sync_state();
            match skip.state {
                RunState::Constant {
                    running,
                    queued,
                    kv_last,
                } => self.constant_run(skip.end, running, queued, kv_last),
                RunState::Turns => self.take_turns(skip.end),
            }
            // Any first tokens, and tokens after an eviction, come with the run's first outputs.
            let (first, resumed) = (self.outbox.first_tokens, &self.outbox.resumed_gaps);
            match self.outbox.decode_run {
                // Untimed gaps: the recorder would take nothing of the run's steps.
                _ if !self.recorder.times_token_gaps() => {}
                Some(r) => {
                    let run = self.outbox.decode_steps(self.scheduler.step_time(), &r);
                    self.recorder.on_decode_steps(r.start, &run, first, resumed);
                }
                None => {
                    let ends = &self.outbox.step_ends;
                    let outside = &self.outbox.outside_tokens;
                    if outside.is_empty() {
                        self.recorder.on_decode_run(ends, first, resumed);
                    } else {
                        // First tokens and tokens after an eviction came with several steps:
                        // from each such step to the next, the steps as one run.
                        let (mut from, mut gaps) = (0, resumed.as_slice());
                        for (k, &(at, first, n)) in outside.iter().enumerate() {
                            if at > from {
                                self.recorder.on_decode_run(&ends[from..at], 0, &[]);
                            }
                            let to = outside.get(k + 1).map_or(ends.len(), |o| o.0);
                            let (now, rest) = gaps.split_at(n);
                            self.recorder.on_decode_run(&ends[at..to], first, now);
                            (from, gaps) = (to, rest);
                        }
                    }
                }
            }
            self.drain_outbox_logs();
            self.now = skip.end;
            return match (self.outbox.finished.is_empty(), skip.then) {
                (false, _) => Run::Completed,
                (true, Then::Batch) => Run::Taken,
                (true, Then::Run) => Run::Again,
            };
        }
        Run::None
    }

    /// A run of a constant batch ending at `end` ([`RunState::Constant`], described by
    /// `Outbox::decode_run`). With no time-series point or observation inside it, one lump.
    /// Otherwise the recorder takes each point as the step-by-step path does: the steps ended
    /// by then lumped (their KV integral in closed form), the state of the step the point falls
    /// in, the lines printed before it (at or before the point), the lines stamped later in that
    /// step each after the points before it, then the rest of the run.
    fn constant_run(&mut self, end: SimTime, running: u64, queued: u64, kv_last: u64) {
        let r = (self.outbox.decode_run).expect("invariant: a constant run is described");
        let model = self.scheduler.step_time();
        let (ends, line) = (&self.outbox.run_ends, self.outbox.run_line.as_ref());
        let steps = || r.priced(model, line, ends);
        if self.recorder.next_snapshot_at() >= end {
            let kv_integral = match &self.outbox.run_kv {
                RunKv::PerToken { kv_integral } => *kv_integral,
                RunKv::Blocks(stairs) => stairs.integral(&steps(), 0, r.steps),
            };
            self.recorder
                .integrate_run(end, running, queued, kv_integral, kv_last);
            self.recorder.on_generated(self.outbox.generated_tokens);
            return;
        }
        let run = steps();
        let b = r.batch;
        // Per token, the KV in use during step j (from 1) is used_first + b·(j − 1).
        let used_first = || kv_last - b * (r.steps - 1);
        // The KV in use during step k (from 0), and Σ used × duration over the steps from
        // `done` (whose sum is `done_kv`) to k.
        let used_during = |k: u64| match &self.outbox.run_kv {
            RunKv::PerToken { .. } => used_first() + b * k,
            RunKv::Blocks(stairs) => stairs.used_during(k),
        };
        let kv_before = |done: u64, done_kv: u128, k: u64| -> u128 {
            match (&self.outbox.run_kv, k, line, ends.as_slice()) {
                (RunKv::Blocks(stairs), k, ..) => done_kv + stairs.integral(&run, done, k),
                (RunKv::PerToken { .. }, 0, ..) => 0,
                (RunKv::PerToken { .. }, k, Some(line), _) => line.weighted(k, used_first(), b).1,
                (RunKv::PerToken { .. }, k, None, []) => {
                    model
                        .decode_run_weighted(b, r.kv_first, k, used_first(), b)
                        .1
                }
                // Σ j·d_j = (k − 1)·e_k − Σ_{j < k − 1} e_j, steps from 0.
                (RunKv::PerToken { .. }, k, None, ends) => {
                    let e = u128::from(ends[k as usize - 1]);
                    let before = cost::one_by_one::sum_of_ends(&ends[..k as usize - 1]);
                    u128::from(used_first()) * e + u128::from(b) * (u128::from(k - 1) * e - before)
                }
            }
        };
        let log = std::mem::take(&mut self.outbox.log);
        let mut lines = log.iter().peekable();
        let (mut done, mut done_kv) = (0u64, 0u128);
        loop {
            let point = self.recorder.next_snapshot_at();
            if point >= end {
                break;
            }
            // Steps ended by the point, lumped (`k`, ending `elapsed` after the start, the KV
            // integrated to `kv_k`); the point falls in step k + 1, ending at `at_next`.
            let since = (point - r.start).as_ns();
            let (k, elapsed, kv_k, at_next) = if ends.is_empty() && line.is_none() {
                // In closed form, each quantity priced once: the steps' count and total in
                // one search, the next step's end from its duration.
                let budget = SimDuration::from_ns(since.saturating_add(1));
                let (k, elapsed) = model.decode_run_within(b, r.kv_first, r.steps, budget);
                let kv_k = kv_before(done, done_kv, k);
                let next = model.decode(b, r.kv_first + b * k);
                (k, elapsed.as_ns(), kv_k, elapsed + next)
            } else {
                let k = run.ended_by(since);
                let next = SimDuration::from_ns(run.elapsed(k + 1));
                (k, run.elapsed(k), kv_before(done, done_kv, k), next)
            };
            debug_assert_eq!(
                (k, elapsed, at_next.as_ns()),
                (run.ended_by(since), run.elapsed(k), run.elapsed(k + 1)),
                "invariant: the point's step, priced in closed form, is the run's"
            );
            let at_k = r.start + SimDuration::from_ns(elapsed);
            let used = used_during(k);
            self.recorder
                .integrate_run(at_k, running, queued, kv_k - done_kv, used);
            self.recorder.on_generated(b * (k - done));
            while let Some(rec) = lines.next_if(|rec| rec.at() <= point) {
                self.recorder.on_log(rec);
            }
            // Lines stamped later inside the same step (vLLM's, with the instant they were
            // due), each after the points before it: another point may fall in this step.
            let step_end = r.start + at_next;
            // Else the next point would be this one again, forever.
            assert!(
                step_end > point,
                "invariant: the step a point falls in ends after it"
            );
            while let Some(rec) = lines.next_if(|rec| rec.at() < step_end) {
                self.recorder.advance_to(rec.at());
                self.recorder.on_log(rec);
            }
            self.recorder.advance_to(step_end);
            (done, done_kv) = (k, kv_k);
        }
        let left = match &self.outbox.run_kv {
            RunKv::PerToken { kv_integral } => kv_integral - done_kv,
            RunKv::Blocks(stairs) => stairs.integral(&run, done, r.steps),
        };
        self.recorder
            .integrate_run(end, running, queued, left, kv_last);
        self.recorder.on_generated(b * (r.steps - done));
        for rec in lines {
            self.recorder.on_log(rec);
        }
        self.outbox.log = log;
        self.outbox.log.clear();
    }

    /// A run of turns (`Outbox::turns`), ending at `end`. Those before the next time-series
    /// point or observation come summed: their lines, then their state's time integrals at
    /// once (nothing falls due among them). The recorder sees each later turn as the
    /// step-by-step path shows it — the state set when the turn starts, the engine's lines on
    /// its own clock and the time-series points and observations before the turn's end in
    /// time order (a line before a point of the same instant), then the turn's tokens.
    fn take_turns(&mut self, end: SimTime) {
        let capacity = self.scheduler.state().kv_capacity_tokens;
        let in_flight = self.client.in_flight();
        let log = std::mem::take(&mut self.outbox.log);
        let mut lines = log.iter().peekable();
        let mut start = self.now;
        let sums = self.outbox.turns.sums;
        if let Some(last) = sums.last {
            // The turns before the next point or observation, at once: their lines in order
            // (none makes a point due), then the state's integrals.
            while let Some(rec) = lines.next_if(|r| r.at() < sums.until) {
                self.recorder.on_log(rec);
            }
            let state = ServerState {
                running: last.running,
                queued: last.queued,
                kv_used_tokens: last.kv_used_tokens,
                kv_capacity_tokens: capacity,
            };
            self.recorder.integrate_turns(sums.until, &sums, state);
            self.recorder.on_generated(sums.tokens);
            start = sums.until;
        }
        for turn in &self.outbox.turns.list {
            let state = ServerState {
                running: turn.running,
                queued: turn.queued,
                kv_used_tokens: turn.kv_used_tokens,
                kv_capacity_tokens: capacity,
            };
            self.recorder.set_state(start, state, in_flight);
            while let Some(rec) = lines.next_if(|r| r.at() < turn.end) {
                self.recorder.advance_to(rec.at());
                self.recorder.on_log(rec);
            }
            self.recorder.advance_to(turn.end);
            self.recorder.on_generated(turn.tokens);
            start = turn.end;
        }
        debug_assert_eq!(start, end, "invariant: the turns make up the run");
        for rec in lines {
            self.recorder.on_log(rec);
        }
        self.outbox.log = log;
        self.outbox.log.clear();
    }
}
