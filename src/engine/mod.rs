//! The simulator: the one owner of all mutable state, and the event loop.
//!
//! [`run`] builds the client, the scheduler and the recorder from a scenario and advances
//! simulated time from event to event until every request is answered or `run.max_sim_s` is
//! reached (or, for a run that records only part of its steady window,
//! [`SteadyFrom::StartUpClearedUntil`], once
//! that part is recorded). It is deterministic: the same scenario and seed give the same
//! result, bit for bit.

pub mod events;
mod fast_forward;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::analysis::{self, Analysis};
use crate::cost;
use crate::metrics::{Recorder, RequestRecord, RunResult, SteadyFrom, StopReason};
use crate::request::{Phase, ReqId, Request, Requests};
use crate::rng::{Seeds, StreamName};
pub use crate::run::{RunOptions, Stepping};
use crate::scenario::Scenario;
use crate::scheduler::{self, LogRecord, Outbox, Scheduler};
use crate::time::{SimDuration, SimTime};
use crate::workload::client::{Client, ClientAction, ClientSpec};
use crate::workload::overhead::Overhead;
use crate::workload::prefix::PrefixSampler;
use crate::workload::{LengthStreams, Lengths};
use events::{EventKind, EventQueue};
use fast_forward::Run;

/// A run that could not finish.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The server is idle with requests waiting that it can never admit.
    #[error("the simulation cannot make progress at t = {at_s:.3} s: {waiting} request(s) wait and none can be admitted")]
    Stuck {
        /// When it stopped.
        at_s: f64,
        /// Requests waiting.
        waiting: u64,
        /// The scheduler's explanation.
        reason: String,
    },
    /// `run.max_events` scheduler batches ran and requests remain.
    #[error("stopped after {limit} scheduler batches (run.max_events) at t = {at_s:.3} s with {left} request(s) unanswered")]
    TooManyBatches {
        /// The bound.
        limit: u64,
        /// When it stopped.
        at_s: f64,
        /// Requests not yet answered.
        left: u64,
        /// Evictions so far (a high count means the batch thrashes).
        retractions: u64,
        /// The engine (whose words name them).
        engine: scheduler::EngineKind,
    },
    /// The user interrupted the run.
    #[error("interrupted")]
    Interrupted,
    /// The batch the engine decided needs more KV than is free: the engine itself raises an
    /// error there and stops serving.
    #[error("the engine runs out of KV memory at t = {at_s:.3} s: its next batch must allocate {need_tokens} tokens and {free_tokens} are free")]
    OutOfMemory {
        /// When it stopped.
        at_s: f64,
        /// Tokens the batch must allocate.
        need_tokens: u64,
        /// Tokens free, the cache's evictable ones included.
        free_tokens: u64,
        /// How the engine came to it, in its words.
        reason: String,
    },
    /// The run would pass [`SimTime::LIMIT`], the latest instant servesim represents.
    #[error("the simulated time would pass {:.0} s (about {} years), the longest run servesim represents, at t = {at_s:.3} s", SimTime::LIMIT.as_secs_f64(), SimTime::LIMIT.as_secs_f64() as u64 / 31_557_600)]
    TimeOverflow {
        /// The last instant simulated.
        at_s: f64,
        /// Requests not yet answered.
        left: u64,
    },
}

/// Where a run hands what it produces as it goes, so that memory stays independent of the
/// run's length.
#[derive(Default)]
pub struct Sinks<'s> {
    /// Every answered request, as it is answered.
    pub requests: Option<&'s mut dyn FnMut(&RequestRecord)>,
    /// Every engine log line, as it is printed (then the scheduler records them even without
    /// [`RunOptions::keep_log`]).
    pub log: Option<&'s mut dyn FnMut(&LogRecord)>,
}

struct Simulator<'s> {
    scenario: &'s Scenario,
    now: SimTime,
    events: EventQueue,
    client: Client,
    scheduler: Box<dyn Scheduler>,
    requests: Requests,
    recorder: Recorder<'s>,
    lengths_rng: LengthStreams,
    prefixes: Option<PrefixSampler>,
    busy: bool,
    outbox: Outbox,
    stepping: Stepping,
    max_sim: Option<SimTime>,
    max_batches: u64,
    /// Set on Ctrl-C (never, without [`RunOptions::interrupt`]).
    interrupt: Arc<std::sync::atomic::AtomicBool>,
    /// Off-GPU time on the way to the engine and back.
    overhead: Overhead,
    /// `overhead` is nil.
    no_overhead: bool,
    /// `overhead.to_server()`.
    to_server: SimDuration,
    /// Requests sent and not yet in the engine's queue, in send order (they all travel for the
    /// same time, so they arrive in that order).
    in_transit: VecDeque<ReqId>,
    /// Responses on their way back to the client, by the sequence number of their delivery
    /// event.
    returning: BTreeMap<u64, Request>,
    /// Note when each decode round ends (for per-token times).
    keep_token_times: bool,
    /// The engine prints lines on its own clock ([`Scheduler::next_log_at`] is `Some` at the
    /// start, and `None` means never).
    engine_clock: bool,
    /// With [`SteadyFrom::StartUpClearedUntil`]: the end of the part of the steady window the
    /// run records (no fast-forward crosses it; the run stops once the part is recorded).
    part_until: Option<SimTime>,
    /// The bounds of the loop's checks, computed once ([`Caps`]).
    caps: Caps,
}

/// The bounds that `max_sim_s`, [`SimTime::LIMIT`] and `part_until` set, as the event loop
/// compares them.
struct Caps {
    /// No event up to this instant reaches `part_until`, `max_sim_s` or the limit: the loop's
    /// checks of them are skipped.
    quiet_until: SimTime,
    /// `part_until`, or never.
    part_end: SimTime,
    /// Where a fast-forward stops while the clock is at or before `part_end`: `max_sim_s`, or
    /// just after `part_until`.
    in_part: SimTime,
    /// Where it stops after: `max_sim_s`.
    after_part: SimTime,
}

impl Caps {
    fn new(max_sim: Option<SimTime>, part_until: Option<SimTime>) -> Self {
        let after_part = max_sim.unwrap_or(SimTime::LIMIT);
        let last = SimTime::from_ns(SimTime::LIMIT.as_ns() - 1);
        Caps {
            quiet_until: last
                .min(max_sim.unwrap_or(SimTime::MAX))
                .min(part_until.unwrap_or(SimTime::MAX)),
            part_end: part_until.unwrap_or(SimTime::MAX),
            in_part: part_until.map_or(after_part, |u| after_part.min(u + SimDuration::from_ns(1))),
            after_part,
        }
    }
}

/// Simulate a scenario.
pub fn run(scenario: &Scenario, opts: &RunOptions) -> Result<RunResult, SimError> {
    run_with_sink(scenario, opts, None)
}

/// Simulate a scenario and analyse the run, with the steady window's latencies recorded from
/// the window's start (see [`record_steady_latencies`]).
pub fn run_analysed(
    scenario: &Scenario,
    opts: &RunOptions,
) -> Result<(RunResult, Analysis), SimError> {
    let mut r = run(scenario, opts)?;
    let a = analysis::analyse(&r);
    record_steady_latencies(scenario, opts, &mut r, &a)?;
    Ok((r, a))
}

/// The steady-window latencies of `r` are recorded from the moment the start-up cleared; when
/// the analysis `a` starts the window later (MSER cut a further transient), the latencies of
/// what falls between the two — the requests sent in between, the token gaps that end in
/// between — are taken away. The run is deterministic, so they are recorded by running it
/// again only as far as they go ([`SteadyFrom::StartUpClearedUntil`]: until the window's start
/// and the answers of the requests sent before it), usually a small part of the run.
pub fn record_steady_latencies(
    scenario: &Scenario,
    opts: &RunOptions,
    r: &mut RunResult,
    a: &Analysis,
) -> Result<(), SimError> {
    let Some(w) = a
        .steady()
        .filter(|w| r.steady_from_s != Some(w.span.start_s))
    else {
        return Ok(());
    };
    let from = SimTime::from_secs_f64(w.span.start_s)
        .expect("invariant: a window starts at a time of the run");
    let part = run(
        scenario,
        &RunOptions {
            keep_log: false,
            keep_requests: false,
            keep_token_times: false,
            steady_from: SteadyFrom::StartUpClearedUntil(from),
            ..opts.clone()
        },
    )?;
    r.steady_latency.subtract(&part.steady_latency);
    r.steady_from_s = Some(from.as_secs_f64());
    Ok(())
}

/// Simulate a scenario, handing every answered request to `sink` as it is answered (memory
/// then stays independent of the number of requests).
pub fn run_with_sink<'s>(
    scenario: &'s Scenario,
    opts: &RunOptions,
    sink: Option<&'s mut dyn FnMut(&RequestRecord)>,
) -> Result<RunResult, SimError> {
    run_with_sinks(
        scenario,
        opts,
        Sinks {
            requests: sink,
            log: None,
        },
    )
}

/// Simulate a scenario, handing answered requests and log lines to `sinks` as they come.
pub fn run_with_sinks<'s>(
    scenario: &'s Scenario,
    opts: &RunOptions,
    sinks: Sinks<'s>,
) -> Result<RunResult, SimError> {
    let seeds = Seeds::new(scenario.seed);
    let scheduler = scheduler::build(
        &scenario.engine,
        scenario.model.as_ref().and_then(|m| m.context_len),
        scenario.workload.shares_prefixes(),
        cost::from_spec(&scenario.engine.step_time),
        seeds.stream(StreamName::SchedulePolicy),
        opts.keep_log || sinks.log.is_some(),
    );
    let mut recorder = Recorder::new(
        scenario.run.window,
        scenario.run.timeseries_interval,
        opts.max_points,
        scenario.run.observe_at.clone(),
        scenario.engine.kv_capacity_tokens,
        opts.keep_log,
        opts.steady_from,
    );
    recorder.keep_requests(opts.keep_requests);
    recorder.set_token_gaps(opts.token_gaps);
    recorder.set_overhead(scenario.overhead);
    if let Some(sink) = sinks.requests {
        recorder.stream_requests(sink);
    }
    if let Some(sink) = sinks.log {
        recorder.stream_log(sink);
    }
    // The trace mode sends each row at its own arrival time.
    let arrivals: Option<Arc<[SimTime]>> = match (&scenario.client, &scenario.workload.lengths) {
        (ClientSpec::Trace { .. }, Lengths::Trace { rows, .. }) => Some(
            rows.iter()
                .map(|r| {
                    r.arrival
                        .expect("invariant: a trace client's rows have arrivals")
                })
                .collect(),
        ),
        _ => None,
    };
    let engine_clock = scheduler.next_log_at().is_some();
    let max_sim = scenario.run.max_sim.map(|d| SimTime::ZERO + d);
    let part_until = match opts.steady_from {
        SteadyFrom::StartUpCleared => None,
        SteadyFrom::StartUpClearedUntil(t) => Some(t),
    };
    let sim = Simulator {
        scenario,
        now: SimTime::ZERO,
        events: EventQueue::default(),
        client: Client::new(
            scenario.client.clone(),
            scenario.workload.requests,
            seeds.stream(StreamName::Arrivals),
            arrivals,
        ),
        scheduler,
        requests: Requests::default(),
        recorder,
        lengths_rng: LengthStreams::with_predrawn(
            scenario.seed,
            &scenario.workload,
            opts.predrawn.as_ref(),
        ),
        prefixes: scenario
            .workload
            .prefix_sampler(seeds.stream(StreamName::PrefixGroups)),
        busy: false,
        outbox: Outbox::default(),
        // Per-token times need every decode round's end: no fast-forward then.
        stepping: if opts.keep_token_times {
            Stepping::StepByStep
        } else {
            opts.stepping
        },
        max_sim,
        max_batches: scenario.run.max_events,
        interrupt: opts.interrupt.clone().unwrap_or_default(),
        overhead: scenario.overhead,
        no_overhead: scenario.overhead.is_zero(),
        to_server: scenario.overhead.to_server(),
        in_transit: VecDeque::new(),
        returning: BTreeMap::new(),
        keep_token_times: opts.keep_token_times,
        engine_clock,
        part_until,
        caps: Caps::new(max_sim, part_until),
    };
    sim.run_loop()
}

impl Simulator<'_> {
    fn run_loop(mut self) -> Result<RunResult, SimError> {
        let mut actions = Vec::new();
        self.client.start(&mut actions);
        self.handle_actions(&mut actions);
        let max_sim = self.max_sim;
        let stop = loop {
            if !self.busy {
                let batches = self.check_limits()?;
                // A run is exactly its steps taken one by one (a scheduler may always decline
                // one), so an attempt not made never changes a result: none is set up when the
                // scheduler surely takes no run (SGLang with requests to admit, as after an
                // arrival, or a batch in flight).
                if self.stepping == Stepping::FastForward && self.scheduler.may_skip_decode() {
                    match self.fast_forward(batches) {
                        Run::None => {}
                        Run::Taken => {
                            self.check_time(self.now)?;
                            // The run may have used up `run.max_events`.
                            self.check_limits()?;
                        }
                        Run::Again => {
                            // Nothing is due at the run's end (it ended before the next
                            // event): the next attempt, as if no batch had been started.
                            self.check_time(self.now)?;
                            continue;
                        }
                        Run::Completed => {
                            self.check_time(self.now)?;
                            // The run's last step completed requests: as at a batch's end, they
                            // are answered and the events of the instant handled before the next
                            // batch.
                            self.answer_finished(&mut actions);
                            self.handle_actions(&mut actions);
                            self.handle_events_at(self.now, &mut actions);
                            continue;
                        }
                    }
                }
                self.start_batch(&mut actions);
                if self.outbox.out_of_memory.is_some() {
                    return Err(self.out_of_memory());
                }
            }
            self.sync_state();
            let Some(next) = self.events.peek_time() else {
                break StopReason::AllAnswered;
            };
            let quiet = next <= self.caps.quiet_until;
            if !quiet
                && self.part_until.is_some_and(|u| next > u)
                && self.recorder.past_steady_until()
            {
                // The part of the steady window asked for is recorded: nothing else is read.
                return Ok(self.recorder.finish(
                    self.now,
                    StopReason::AllAnswered,
                    self.scheduler.counters(),
                    scheduler::words(self.scenario.engine.kind()),
                ));
            }
            if self.engine_clock {
                self.log_on_engine_clock(next.min(max_sim.unwrap_or(SimTime::MAX)));
            }
            debug_assert!(
                self.engine_clock || self.scheduler.next_log_at().is_none(),
                "invariant: an engine without a clock of its own never gets one"
            );
            if !quiet {
                if let Some(limit) = max_sim {
                    if next > limit {
                        self.recorder.advance_to(limit);
                        self.now = limit;
                        break StopReason::MaxSimTime;
                    }
                }
                self.check_time(next)?;
            }
            debug_assert!(self.check_time(next).is_ok());
            self.recorder.advance_to(next);
            debug_assert!(next >= self.now, "invariant: the clock never goes back");
            self.now = next;
            self.handle_events_at(next, &mut actions);
        };
        if stop == StopReason::AllAnswered && !self.requests.is_empty() {
            let waiting = self.scheduler.state().queued;
            let reason = self
                .scheduler
                .stuck_reason(&self.requests)
                .unwrap_or_else(|| "no request can be scheduled".to_string());
            return Err(SimError::Stuck {
                at_s: self.now.as_secs_f64(),
                waiting,
                reason,
            });
        }
        let counters = self.scheduler.counters();
        let words = scheduler::words(self.scenario.engine.kind());
        let mut r = self.recorder.finish(self.now, stop, counters, words);
        r.max_running_requests = u64::from(self.scenario.engine.policy.max_running_requests());
        r.client_concurrency = self.scenario.client.concurrency().map(u64::from);
        r.open_loop = !matches!(self.scenario.client, ClientSpec::Closed { .. });
        Ok(r)
    }

    /// Handle every event of the instant `t` (now), in the queue's order, those scheduled
    /// meanwhile for `t` included.
    #[inline]
    fn handle_events_at(&mut self, t: SimTime, actions: &mut Vec<ClientAction>) {
        if self.events.peek_time() == Some(t) {
            self.handle_events_now(t, actions);
        }
    }

    #[inline(never)]
    fn handle_events_now(&mut self, t: SimTime, actions: &mut Vec<ClientAction>) {
        while let Some(ev) = self.events.pop_at(t) {
            match ev.kind {
                EventKind::StepEnd => self.end_batch(actions),
                EventKind::Delivery => self.deliver(ev.seq, actions),
                EventKind::ClientWake => self.client.on_wake(actions),
                EventKind::Arrival => {
                    self.recorder.on_arrival();
                    self.client.on_arrival(self.now, actions);
                }
                EventKind::ServerArrival => {
                    let id = self
                        .in_transit
                        .pop_front()
                        .expect("invariant: a server arrival has a request in transit");
                    self.reach_server(id, actions);
                }
            }
            self.handle_actions(actions);
        }
    }

    /// Stop on Ctrl-C, or when the run has used up `run.max_events` scheduler batches; else
    /// the batches run so far.
    fn check_limits(&self) -> Result<u64, SimError> {
        if self.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(SimError::Interrupted);
        }
        let batches = self.scheduler.batches();
        if batches >= self.max_batches {
            return Err(SimError::TooManyBatches {
                limit: self.max_batches,
                at_s: self.now.as_secs_f64(),
                left: self.client.remaining() + self.client.in_flight(),
                retractions: self.scheduler.counters().evictions,
                engine: self.scenario.engine.kind(),
            });
        }
        Ok(batches)
    }

    /// Stop before the clock reaches [`SimTime::LIMIT`]: time sums saturate there, so a run
    /// that gets that far (centuries of simulated time) would report clamped numbers.
    fn check_time(&self, t: SimTime) -> Result<(), SimError> {
        if t < SimTime::LIMIT {
            return Ok(());
        }
        Err(SimError::TimeOverflow {
            at_s: self.now.as_secs_f64(),
            left: self.client.remaining() + self.client.in_flight(),
        })
    }

    /// The lines the engine prints on its own clock (vLLM's stats every 10 s) strictly before
    /// `until` (the next event), or at it when it is `max_sim_s`: each sees every event before it.
    fn log_on_engine_clock(&mut self, until: SimTime) {
        while let Some(t) = self.scheduler.next_log_at() {
            let due = t < until || (Some(until) == self.max_sim && t == until);
            if !due {
                break;
            }
            self.recorder.advance_to(t);
            self.now = t;
            self.outbox.clear_for_step();
            self.scheduler.log_at(t, &mut self.outbox);
            self.drain_outbox_logs();
        }
    }

    fn sync_state(&mut self) {
        let state = self.scheduler.state();
        self.recorder
            .set_state(self.now, state, self.client.in_flight());
    }

    /// Start the next batch, if any. A batch the scheduler could not allocate is left in
    /// [`Outbox::out_of_memory`] for the caller to stop on.
    fn start_batch(&mut self, actions: &mut Vec<ClientAction>) {
        self.outbox.clear_for_step();
        if let Some(d) = self
            .scheduler
            .start_next(self.now, &mut self.requests, &mut self.outbox)
        {
            self.events.push(self.now + d, EventKind::StepEnd);
            self.busy = true;
        }
        self.forward_abandoned_awaits();
        self.drain_outbox_logs();
        // A retraction that aborts a request answers it at once.
        self.answer_finished(actions);
        self.handle_actions(actions);
    }

    /// The error of a batch the scheduler could not allocate ([`Outbox::out_of_memory`]).
    #[cold]
    #[inline(never)]
    fn out_of_memory(&mut self) -> SimError {
        let oom = (self.outbox.out_of_memory.take()).expect("invariant: the scheduler said so");
        SimError::OutOfMemory {
            at_s: self.now.as_secs_f64(),
            need_tokens: oom.need_tokens,
            free_tokens: oom.free_tokens,
            reason: oom.reason,
        }
    }

    fn end_batch(&mut self, actions: &mut Vec<ClientAction>) {
        self.busy = false;
        self.outbox.clear_for_step();
        self.scheduler
            .finish_current(self.now, &mut self.requests, &mut self.outbox);
        self.recorder.on_generated(self.outbox.generated_tokens);
        self.recorder.on_tokens(
            self.now,
            self.outbox.generated_tokens,
            self.outbox.first_tokens,
            &self.outbox.resumed_gaps,
        );
        self.forward_abandoned_awaits();
        if self.keep_token_times && self.outbox.decode_rounds > 0 {
            self.recorder.on_decode_round(self.now);
        }
        self.drain_outbox_logs();
        self.answer_finished(actions);
    }

    /// Requests evicted while the recorder waited for their next token: it stops waiting.
    fn forward_abandoned_awaits(&mut self) {
        for &at in &self.outbox.abandoned_awaits {
            self.recorder.on_abandoned_await(at);
        }
    }

    fn drain_outbox_logs(&mut self) {
        for rec in &self.outbox.log {
            self.recorder.on_log(rec);
        }
        self.outbox.log.clear();
    }

    #[inline]
    fn answer_finished(&mut self, actions: &mut Vec<ClientAction>) {
        if !self.outbox.finished.is_empty() {
            self.answer_finished_now(actions);
        }
    }

    #[inline(never)]
    fn answer_finished_now(&mut self, actions: &mut Vec<ClientAction>) {
        // Responding leaves the outbox alone.
        let mut i = 0;
        while let Some(&id) = self.outbox.finished.get(i) {
            self.respond(id, actions);
            i += 1;
        }
        self.outbox.finished.clear();
    }

    /// The engine is done with request `id` (finished, refused or aborted): it leaves the
    /// arena, and its response reaches the client now, or after its way back.
    #[inline(always)]
    fn respond(&mut self, id: ReqId, actions: &mut Vec<ClientAction>) {
        if self.no_overhead {
            Self::record_response(&mut self.recorder, self.now, &self.requests[id]);
            self.requests.release(id);
            self.client.on_response(self.now, actions);
        } else {
            let r = self.requests.remove(id);
            let at = self.overhead.seen_at(self.now, r.out_tokens);
            let seq = self.events.push(at, EventKind::Delivery);
            self.returning.insert(seq, r);
        }
    }

    /// The response of the delivery event `seq` reaches the client.
    fn deliver(&mut self, seq: u64, actions: &mut Vec<ClientAction>) {
        let r = self
            .returning
            .remove(&seq)
            .expect("invariant: a delivery event has its response");
        self.receive(&r, actions);
    }

    /// The client has the whole response: it is counted, and its slot is free.
    fn receive(&mut self, r: &Request, actions: &mut Vec<ClientAction>) {
        Self::record_response(&mut self.recorder, self.now, r);
        self.client.on_response(self.now, actions);
    }

    /// A response reached the client at `now`: the recorder counts it.
    #[inline]
    fn record_response(recorder: &mut Recorder, now: SimTime, r: &Request) {
        match r.phase {
            Phase::Finished => recorder.on_completion(now, r),
            _ => recorder.on_rejection(now, r),
        }
    }

    #[inline]
    fn handle_actions(&mut self, actions: &mut Vec<ClientAction>) {
        if !actions.is_empty() {
            self.handle_actions_now(actions);
        }
    }

    #[inline(never)]
    fn handle_actions_now(&mut self, actions: &mut Vec<ClientAction>) {
        // Sending can answer at once (a rejection), which can send again: work through a queue.
        let mut i = 0;
        while i < actions.len() {
            match actions[i] {
                ClientAction::Send { seq, ready_at } => self.send(seq, ready_at, actions),
                ClientAction::WakeAt(t) => _ = self.events.push(t, EventKind::ClientWake),
                ClientAction::ArriveAt(t) => _ = self.events.push(t, EventKind::Arrival),
            }
            i += 1;
        }
        actions.clear();
    }

    fn send(&mut self, seq: u64, ready_at: SimTime, actions: &mut Vec<ClientAction>) {
        let d = self
            .scenario
            .workload
            .draw(seq, &mut self.lengths_rng, self.prefixes.as_mut());
        let arrived_at = self.now + self.to_server;
        let id = self.requests.insert(Request {
            seq,
            prompt_tokens: d.prompt_tokens,
            max_new_tokens: d.max_new_tokens,
            target_output_tokens: d.target_output_tokens,
            ignore_eos: d.ignore_eos,
            prefix: d.prefix,
            ready_at,
            sent_at: self.now,
            arrived_at,
            admitted_at: None,
            first_token_at: None,
            evicted_at: None,
            outside_token_at: None,
            out_tokens: 0,
            evictions: 0,
            cached_tokens: 0,
            phase: Phase::Waiting,
        });
        self.recorder
            .on_send(self.now, self.client.remaining() == 0);
        if arrived_at == self.now {
            self.reach_server(id, actions);
        } else {
            self.in_transit.push_back(id);
            self.events.push(arrived_at, EventKind::ServerArrival);
        }
    }

    /// A request reaches the engine's queue.
    #[inline]
    fn reach_server(&mut self, id: ReqId, actions: &mut Vec<ClientAction>) {
        if self
            .scheduler
            .arrive(self.now, id, &mut self.requests)
            .is_err()
        {
            self.refused(id, actions);
        }
    }

    /// The engine refused request `id` on arrival: it answers at once.
    #[cold]
    #[inline(never)]
    fn refused(&mut self, id: ReqId, actions: &mut Vec<ClientAction>) {
        self.respond(id, actions);
    }
}
