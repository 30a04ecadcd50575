//! Fast-forward: a run of steps in which every running request decodes one token, nothing in
//! WAITING is admitted and nothing finishes changes only counters, the tail of RUNNING and the
//! head of WAITING, so it is taken at once — with exactly the state, counters and log totals the
//! step-by-step path leaves, and each turn's server state listed (`Outbox::turns`) for the
//! simulator to integrate and to take the time-series points inside the run. Under async
//! scheduling each step of the run is one turn of the batch queue: schedule the next batch,
//! then process the one on the GPU.
//!
//! A step whose block requests outrun the free blocks preempts inside the run, as
//! `v1/core/sched/scheduler.py: Scheduler.schedule` does: the requests needing a block take one
//! in RUNNING's order, and when none is left the last request of RUNNING is preempted
//! (`_preempt_request`), again and again, or the request preempts itself. RUNNING only loses
//! its tail during a run, so a request's place in it never changes and each step costs O(1)
//! plus O(1) per preemption: the requests needing a block at step `j` are those whose computed
//! count is a multiple of the block size, counted per residue class.
//!
//! With prefix caching and no shared prefixes (`own_cache.rs`) the run also follows the free
//! queue: each step's blocks are popped from its head (evicting cached blocks of preempted
//! requests, last block first), a request preempted in the run frees its unhashed blocks to the
//! head and its hashed ones to the tail, and WAITING's head is admitted with what is left of its
//! own blocks (`v1/core/block_pool.py`, `v1/core/kv_cache_manager.py: get_computed_blocks`).
//! A [`View`] of the queue does this without touching it; the run applies it at the end.

use super::log::INTERVAL;
use super::own_cache::View;
use super::{blocks_of, full_blocks, Entry, Item, Status, Vllm};
use crate::cost::MixedStep;
use crate::request::{Phase, Requests};
use crate::scheduler::{LogRecord, Outbox, RunState, Skip, Turn};
use crate::time::{SimDuration, SimTime};

/// A request's `num_cached_block` after `turns` turns of a run from `c0` computed tokens and
/// `h0` cached blocks (`lag`: 1 under async scheduling).
fn hashed_after(block: u64, h0: u32, c0: u32, turns: u64, lag: u64) -> u64 {
    let h0 = u64::from(h0);
    if turns == 0 {
        h0
    } else {
        h0.max(full_blocks(block, u64::from(c0) + turns - lag))
    }
}

/// What WAITING does in one step of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitingOutcome {
    /// Nothing to look at, no budget left, or a head too long for the step without chunking.
    Nothing,
    /// Stopped at `max_num_seqs`.
    SlotStop,
    /// Stopped because the head's blocks are not free.
    MemoryStop,
}

/// Scratch space of a run, reused from one run to the next.
#[derive(Debug, Default)]
pub(super) struct RunScratch {
    /// Computed tokens of each request of RUNNING (by place) when the run starts.
    c0: Vec<u32>,
    /// Its residue class: computed tokens modulo the block size.
    class: Vec<u32>,
    /// Requests per residue class among the places still in RUNNING.
    classes: Vec<u64>,
    /// The step (from 1) at which each preempted request was preempted and when that step was
    /// scheduled, in preemption order: the `k`-th from the tail of RUNNING at the start.
    preempted_at: Vec<(u64, SimTime)>,
    /// Each turn's end and the tokens its output gave.
    ends: Vec<(SimTime, u64)>,
    /// Each turn's server state: running, queued, KV slots in use.
    states: Vec<(u64, u64, u64)>,
    /// Preemptions of each request not yet reported (they go with its next output).
    old_events: Vec<u32>,
    /// The stats lines due inside the run.
    logs: Vec<LogPoint>,
    /// Own-block cache: each request's `num_cached_block` when the run starts (by place).
    h0: Vec<u32>,
    /// The cached blocks of the requests preempted in the run, in the order they joined the
    /// free queue's tail.
    pushed: Vec<u64>,
    /// By place: the preempted request's entry in `pushed` + 1 (0: none).
    seg_of: Vec<u32>,
    /// By entry of `pushed`: its segment's serial + 1 in the queue after the run (0: evicted).
    serials: Vec<u64>,
}

/// Where WAITING's head has its cached blocks (own-block cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cached {
    /// In the queue's segment of this serial + 1 (0: none).
    Queue(u64),
    /// In the run's appended segment of this entry + 1 (0: none).
    Pushed(u32),
}

/// WAITING's head: its known tokens and where its cached blocks are.
type Head = Option<(u64, Cached)>;

/// A stats line due inside a run, with the totals of the run's outputs processed before it
/// and the state at the last of them (`None`: none processed yet).
#[derive(Clone, Copy, Debug)]
struct LogPoint {
    at: SimTime,
    generated: u64,
    prompts: u64,
    events: u64,
    seen: Option<(u64, u64, u64)>,
}

/// The outcome of a run, before it is applied.
struct RunPlan {
    steps: u64,
    end: SimTime,
    /// Requests still in RUNNING at the end.
    len: usize,
    /// Free blocks at the end.
    free: u64,
    /// Duration of the batch the last turn scheduled (async; it stays queued).
    next_dur: SimDuration,
    first_end: SimTime,
    /// Tokens sampled by the batches processed during the run, the prompts of the first
    /// tokens among them, and the preemptions reported with them.
    generated: u64,
    prompts: u64,
    events: u64,
    slot_stops: u64,
    memory_stops: u64,
    /// Steps that preempted, and requests preempted.
    eviction_events: u64,
    evictions: u64,
    /// The free queue after the run (own-block cache).
    view: View,
}

impl Vllm {
    /// Take the steps from `now` on that admit nothing, finish nothing and end before `limit`,
    /// at most `max_steps`.
    pub(super) fn fast_forward(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        reqs: &mut Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        let asynchronous = self.p.depth > 1;
        let r = self.running.len();
        if r == 0 || r as u64 > self.p.budget || self.deferred > 0 {
            return None;
        }
        // The head of WAITING: a request skipped for its output in flight would make the scan
        // look further.
        let head_known: Head = match self.waiting.front() {
            Some(&head) if self.seq(head).stale > 0 => return None,
            Some(&head) => Some((self.seq(head).tokens(), Cached::Queue(self.seq(head).own))),
            None => None,
        };
        // After a completion the head is usually admitted at the first step: if it would be
        // with every request of RUNNING taking a block (none preempted), there is no run.
        let free = self.free_blocks();
        if let Some(q) = &self.own {
            let head_hit = self.head_hit(head_known, &View::new(q), &[]);
            if r as u64 <= free
                && self
                    .waiting_at(head_known, head_hit, r as u64, free - r as u64)
                    .is_none()
            {
                return None;
            }
        } else if r as u64 <= free
            && self
                .waiting_at(head_known, 0, r as u64, free - r as u64)
                .is_none()
        {
            return None;
        }
        // The batch on the GPU (async): every request of RUNNING, in order, each chunk reaching
        // its last known token (so it samples, and the next steps are decodes: a decode, or a
        // whole prompt or recomputation); besides them only requests finished since it was
        // scheduled, whose outputs are dropped (`update_from_output`).
        let first_dur = match (asynchronous, self.queue.len(), self.queue.front()) {
            (false, 0, _) => None,
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
                    return None;
                }
                Some(b.end - b.start)
            }
            _ => return None,
        };
        // Every running request decodes: the longest run that finishes nothing.
        let block = self.p.block;
        let mut most = u64::MAX;
        let mut kv_first = 0u64;
        let mut sc = std::mem::take(&mut self.run);
        sc.c0.clear();
        sc.class.clear();
        sc.preempted_at.clear();
        sc.ends.clear();
        sc.states.clear();
        sc.old_events.clear();
        sc.logs.clear();
        sc.h0.clear();
        sc.pushed.clear();
        sc.seg_of.clear();
        sc.seg_of.resize(r, 0);
        let mut prompts = 0u64;
        sc.classes.clear();
        sc.classes.resize(block as usize, 0);
        for &id in &self.running {
            let s = self.seq(id);
            let c = u64::from(s.computed);
            // Async: its chunk on the GPU (checked above) samples the token after the known
            // ones, possibly its first; sync: one known token left to compute, after the first.
            let decoding = if asynchronous {
                c == s.tokens() && s.placeholders == 1 && s.in_flight >= 1
            } else {
                c + 1 == s.tokens() && s.placeholders == 0 && s.in_flight == 0 && s.output > 0
            };
            if !decoding || s.stale > 0 || u64::from(s.blocks) != self.blocks_for(c) {
                self.run = sc;
                return None;
            }
            most = most.min(u64::from(s.stop_at - s.output) - 1);
            kv_first += c + 1;
            let class = self.in_block(c) as u32;
            if s.output == 0 {
                // Its first token comes with the run's first output (async only).
                prompts += u64::from(s.prompt);
            }
            sc.old_events.push(s.preemption_events);
            sc.h0.push(s.hashed);
            sc.c0.push(s.computed);
            sc.class.push(class);
            sc.classes[class as usize] += 1;
        }
        let most = most.min(max_steps);
        let plan = if most == 0 {
            None
        } else {
            let start = (most, first_dur, kv_first, head_known, prompts);
            self.plan_run(&mut sc, now, limit, start)
        };
        let Some(plan) = plan else {
            self.run = sc;
            return None;
        };
        if let Some(q) = &mut self.own {
            plan.view.apply(q, &sc.pushed, &mut sc.serials);
        }
        self.take_run(&plan, &sc, reqs, out);
        self.run = sc;
        Some(Skip {
            steps: plan.steps,
            end: plan.end,
            state: RunState::Turns,
        })
    }

    /// Walk the run step by step in O(1) a step (plus O(1) a preemption), without touching the
    /// requests: how far it goes and what it does. `None` if not even one step can be taken.
    /// `start`: the longest run, the batch on the GPU's duration (async), the KV the first
    /// step attends, WAITING's head (known tokens, cached blocks), the prompts of first tokens
    /// to come.
    fn plan_run(
        &self,
        sc: &mut RunScratch,
        now: SimTime,
        limit: SimTime,
        start: (u64, Option<SimDuration>, u64, Head, u64),
    ) -> Option<RunPlan> {
        let (most, first_dur, kv_first, head_known, prompts) = start;
        let asynchronous = self.p.depth > 1;
        let block = self.p.block;
        let usable = self.usable_blocks();
        let r = sc.c0.len();
        let waiting0 = self.waiting.len() as u64;
        let (mut len, mut free, mut kv) = (r, self.free_blocks(), kv_first);
        // The known tokens of WAITING's head. A request preempted at step j holds c0 + j: its
        // outputs of the steps before (sync: computed = known − 1 at the start), and under
        // async scheduling the one in flight (computed = known at the start), which arrives
        // before the next step is scheduled.
        let mut head = head_known;
        let (mut steps, mut t) = (0u64, now);
        let mut pending = first_dur;
        let mut next_dur = SimDuration::ZERO;
        // The batch the next turn processes (async): the one on the GPU.
        let mut prev_len = r as u64;
        let mut next_log = self.stats.next_at();
        let mut seen = None;
        let mut known_outcome: Option<(WaitingOutcome, u64)> = None;
        // The free queue (own-block cache), and how many turns each request's hashed blocks
        // follow: after t turns, `⌊(c0 + t − a) / block⌋` with a = 1 under async scheduling
        // (`allocate_slots` caches up to the known tokens, `update_from_output` up to those no
        // longer in flight).
        let cache = self.own.as_ref();
        let mut view = cache.map(View::new).unwrap_or_default();
        let lag = u64::from(asynchronous);
        let mut plan = RunPlan {
            steps: 0,
            end: now,
            len: r,
            free,
            next_dur,
            first_end: now,
            generated: 0,
            prompts: 0,
            events: 0,
            slot_stops: 0,
            memory_stops: 0,
            eviction_events: 0,
            evictions: 0,
            view,
        };
        while steps < most {
            let j = steps + 1;
            // Step j allocates a block for each request whose computed count before it is a
            // multiple of the block size.
            let class = self.in_block(block - self.in_block(j - 1)) as u32;
            let mut wanting = sc.classes[class as usize];
            let (mut l, mut f, mut k) = (len, free, kv);
            let (mut v, pushed_len) = (view, sc.pushed.len());
            if wanting <= f {
                f -= wanting;
                if let Some(q) = cache {
                    v.take(q, &sc.pushed, wanting);
                }
            } else {
                // The first `f` take the free blocks; the next one preempts the tail, and so on.
                let mut served = f;
                if let Some(q) = cache {
                    v.take(q, &sc.pushed, f);
                }
                f = 0;
                while served < wanting {
                    let tail = l - 1;
                    let in_class = sc.class[tail] == class;
                    let itself = in_class && served + 1 == wanting;
                    l -= 1;
                    let c = u64::from(sc.c0[tail]) + j - 1;
                    let held = self.blocks_for(c);
                    f += held;
                    k -= u64::from(sc.c0[tail]) + 1;
                    if cache.is_some() {
                        // Its unhashed blocks go to the head, its hashed ones to the tail.
                        let hashed = hashed_after(block, sc.h0[tail], sc.c0[tail], j - 1, lag);
                        v.head += held - hashed;
                        sc.seg_of[tail] = if hashed > 0 {
                            sc.pushed.push(hashed);
                            sc.pushed.len() as u32
                        } else {
                            0
                        };
                    }
                    if itself {
                        break;
                    }
                    if in_class {
                        wanting -= 1;
                    }
                    let take = (wanting - served).min(f);
                    served += take;
                    f -= take;
                    if let Some(q) = cache {
                        v.take(q, &sc.pushed, take);
                    }
                }
            }
            if l == 0 {
                // Everything preempted: an empty step, left to `schedule()`.
                sc.pushed.truncate(pushed_len);
                break;
            }
            let preempted = (len - l) as u64;
            // WAITING's head: the last request preempted, the lowest place popped.
            let head_now = if preempted > 0 {
                Some((u64::from(sc.c0[l]) + j, Cached::Pushed(sc.seg_of[l])))
            } else {
                head
            };
            let hit = self.head_hit(head_now, &v, &sc.pushed);
            // What WAITING does stays the same while the head and RUNNING do and the free
            // blocks only shrink (a memory stop stays one; the other outcomes ignore them).
            // With the own-block cache, while its cached blocks stay as they are.
            let outcome = match known_outcome {
                _ if preempted > 0 => WaitingOutcome::Nothing,
                Some((o, h)) if h == hit => o,
                _ => match self.waiting_at(head_now, hit, l as u64, f) {
                    Some(o) => o,
                    // The head would be admitted.
                    None => {
                        sc.pushed.truncate(pushed_len);
                        break;
                    }
                },
            };
            let cost = self.cost.mixed(MixedStep {
                decode_seqs: l as u64,
                decode_kv_tokens: k + l as u64 * (j - 1),
                ..MixedStep::default()
            });
            // The segment that ends this turn: this step (sync), or the batch already on the
            // GPU (async), whose successor is the step just priced.
            let seg = pending.replace(cost).unwrap_or(cost);
            if t + seg >= limit {
                sc.pushed.truncate(pushed_len);
                break;
            }
            // Take step j. The stats lines due before its output see the outputs before.
            while next_log < t + seg {
                sc.logs.push(LogPoint {
                    at: next_log,
                    generated: plan.generated,
                    prompts: plan.prompts,
                    events: plan.events,
                    seen,
                });
                next_log += INTERVAL;
            }
            if j == 1 {
                // The first output reports the preemptions each request carried, except (sync)
                // from those preempted before it.
                plan.prompts = prompts;
                plan.events = sc.old_events.iter().map(|&e| u64::from(e)).sum();
                if !asynchronous {
                    plan.events -= sc.old_events[l..len]
                        .iter()
                        .map(|&e| u64::from(e))
                        .sum::<u64>();
                }
            }
            if asynchronous {
                // A request preempted now reports it with its output in flight, processed in
                // this turn.
                plan.events += (len - l) as u64;
            }
            for tail in l..len {
                sc.classes[sc.class[tail] as usize] -= 1;
                sc.preempted_at.push((j, t));
            }
            if preempted > 0 {
                plan.eviction_events += 1;
                plan.evictions += preempted;
            }
            match outcome {
                WaitingOutcome::Nothing => {}
                WaitingOutcome::SlotStop => plan.slot_stops += 1,
                WaitingOutcome::MemoryStop => plan.memory_stops += 1,
            }
            if j == 1 {
                plan.first_end = t + seg;
            }
            t += seg;
            let queued = waiting0 + (r - l) as u64;
            // The batch processed this turn: the one before (async) or this one (sync).
            let tokens = if asynchronous { prev_len } else { l as u64 };
            plan.generated += tokens;
            sc.ends.push((t, tokens));
            sc.states.push((l as u64, queued, (usable - f) * block));
            prev_len = l as u64;
            seen = Some((l as u64, queued, (usable - f) * block));
            next_dur = if asynchronous {
                pending.unwrap_or(SimDuration::ZERO)
            } else {
                SimDuration::ZERO
            };
            if !asynchronous {
                pending = None;
            }
            (len, free, kv, head, view) = (l, f, k, head_now, v);
            known_outcome = (preempted == 0).then_some((outcome, hit));
            steps = j;
        }
        if steps == 0 {
            return None;
        }
        plan.steps = steps;
        plan.end = t;
        plan.len = len;
        plan.free = free;
        plan.next_dur = next_dur;
        plan.view = view;
        Some(plan)
    }

    /// The blocks WAITING's head would hit with the queue as `view` leaves it: what is left of
    /// its own, at most `⌊(num_tokens − 1) / block⌋` (`get_computed_blocks`).
    #[inline]
    fn head_hit(&self, head: Head, view: &View, pushed: &[u64]) -> u64 {
        let (Some(q), Some((known, at))) = (&self.own, head) else {
            return 0;
        };
        let left = match at {
            Cached::Queue(0) | Cached::Pushed(0) => 0,
            Cached::Queue(own) => view.cached(q, own),
            Cached::Pushed(e) => view.cached_pushed(q, pushed, e as usize - 1),
        };
        left.min(full_blocks(self.p.block, known - 1))
    }

    /// What WAITING does in a step with `running` requests in RUNNING and `free` blocks left
    /// after RUNNING's, its head holding `head` known tokens and hitting `hit` cached blocks;
    /// `None` if the head is admitted.
    fn waiting_at(&self, head: Head, hit: u64, running: u64, free: u64) -> Option<WaitingOutcome> {
        let Some((known, _)) = head else {
            return Some(WaitingOutcome::Nothing);
        };
        let cached = hit * self.p.block;
        let left = self.p.budget - running;
        if left == 0 {
            return Some(WaitingOutcome::Nothing);
        }
        if running >= self.p.max_seqs as u64 {
            return Some(WaitingOutcome::SlotStop);
        }
        let n = if self.p.threshold > 0 && known - cached > self.p.threshold {
            self.p.threshold
        } else {
            known - cached
        };
        if !self.p.chunked && n > left {
            return Some(WaitingOutcome::Nothing);
        }
        let mml = self.p.max_model_len;
        let full = self.p.full_isl && self.blocks_for(known.min(mml)) > free;
        (full || self.blocks_for((cached + n.min(left)).min(mml)) > free)
            .then_some(WaitingOutcome::MemoryStop)
    }

    /// Apply a planned run: the requests still in RUNNING advanced by `steps` tokens, the
    /// preempted ones moved to the head of WAITING as `_preempt_request` leaves them (with the
    /// output in flight processed under async scheduling), the counters and the stats log.
    fn take_run(&mut self, plan: &RunPlan, sc: &RunScratch, reqs: &mut Requests, out: &mut Outbox) {
        let steps = plan.steps;
        let (mut events, mut prompts) = (0u64, 0u64);
        let asynchronous = self.p.depth > 1;
        let block = self.p.block;
        let (cache, lag) = (self.own.is_some(), u64::from(asynchronous));
        // Whether the first batch processed had a request past its first token (a decode
        // round); every later one has.
        let mut decoded = false;
        for k in 0..plan.len {
            let id = self.running[k];
            let s = &mut self.seqs[id.0 as usize];
            decoded |= s.output > 0;
            if s.output == 0 {
                prompts += u64::from(s.prompt);
            }
            // Its first token, or its first after a preemption, comes with the run's first
            // output (after the first, nothing to report unless it was evicted since).
            if s.output == 0 || s.resumed {
                s.resumed = false;
                out.first_token(&mut reqs[id], plan.first_end);
            }
            s.computed += steps as u32;
            s.output += steps as u32;
            s.blocks = blocks_of(block, u64::from(s.computed)) as u32;
            if cache {
                s.hashed = hashed_after(block, sc.h0[k], sc.c0[k], steps, lag) as u32;
            }
            if asynchronous {
                s.in_flight = 1;
            }
            events += u64::from(std::mem::take(&mut s.preemption_events));
        }
        // The preempted, tail first: each is prepended to WAITING.
        for (n, &(j, at)) in sc.preempted_at.iter().enumerate() {
            let k = sc.c0.len() - 1 - n;
            let id = self.running[k];
            let s = &mut self.seqs[id.0 as usize];
            // Outputs processed before it was preempted at step j (sync: steps 1 … j − 1),
            // and under async the one in flight (the batch of step j − 1), stale.
            let outputs = if asynchronous { j } else { j - 1 };
            decoded |= s.output > 0;
            let r = &mut reqs[id];
            if j >= 2 {
                // Its token of the first turn came while it ran; then it was evicted.
                out.first_token(r, plan.first_end);
                r.evicted(at);
            } else {
                // Evicted at the first schedule; under async scheduling the batch on the GPU
                // still gives it a (stale) token: a first one counts, another is an ordinary
                // token (`output.rs`).
                r.evicted(at);
                if asynchronous && s.output == 0 {
                    out.first_token(r, plan.first_end);
                }
            }
            // Whatever it reported before, it is evicted now.
            s.resumed = true;
            if s.output == 0 && outputs > 0 {
                prompts += u64::from(s.prompt);
            }
            s.output += outputs as u32;
            s.computed = 0;
            s.blocks = 0;
            if cache {
                s.hashed = 0;
                s.own = match sc.seg_of[k] {
                    0 => 0,
                    e => sc.serials[e as usize - 1],
                };
            }
            s.in_flight = 0;
            s.stale = 0;
            s.placeholders = 0;
            s.status = Status::Waiting;
            if outputs > 0 {
                events += u64::from(std::mem::take(&mut s.preemption_events));
            }
            if asynchronous {
                // The preemption is reported with the stale output.
                events += 1;
            } else {
                s.preemption_events += 1;
            }
            let r = &mut reqs[id];
            r.evictions += 1;
            r.phase = Phase::Waiting;
            self.waiting.push_front(id);
        }
        self.running.truncate(plan.len);
        self.used_blocks = self.usable_blocks() - plan.free;
        debug_assert_eq!(
            self.used_blocks,
            self.running
                .iter()
                .map(|&id| u64::from(self.seq(id).blocks))
                .sum::<u64>()
                + self
                    .waiting
                    .iter()
                    .map(|&id| u64::from(self.seq(id).blocks))
                    .sum::<u64>(),
            "invariant: the pool's use is the requests' blocks"
        );
        debug_assert_eq!(
            (prompts, events),
            (plan.prompts, plan.events),
            "invariant: the plan's reports are the requests'"
        );
        // The stats lines inside the run, each after the outputs before it.
        let mut reported = (0, 0, 0);
        for lp in &sc.logs {
            self.stats.on_outputs(
                lp.generated - reported.0,
                lp.prompts - reported.1,
                lp.events - reported.2,
            );
            reported = (lp.generated, lp.prompts, lp.events);
            if let Some((running, waiting, used)) = lp.seen {
                self.stats.snapshot(running, waiting, self.deferred, used);
            }
            if let Some(rec) = self.stats.tick(lp.at) {
                out.log.push(LogRecord::Interval(rec));
            }
        }
        self.stats.on_outputs(
            plan.generated - reported.0,
            plan.prompts - reported.1,
            plan.events - reported.2,
        );
        out.generated_tokens += plan.generated;
        out.step_ends.extend_from_slice(&sc.ends);
        out.turns.extend(sc.ends.iter().zip(&sc.states).map(
            |(&(end, tokens), &(running, queued, kv_used_tokens))| Turn {
                end,
                running,
                queued,
                kv_used_tokens,
                tokens,
            },
        ));
        out.decode_rounds += steps - u64::from(!decoded);
        self.counters.decode_steps += steps;
        self.counters.fast_forwarded_steps += steps;
        self.counters.slot_stops += plan.slot_stops;
        self.counters.memory_stops += plan.memory_stops;
        self.counters.evictions += plan.evictions;
        self.counters.eviction_events += plan.eviction_events;
        self.finished_pending = false;
        if asynchronous {
            // The batch the last turn scheduled is on the GPU from `end`.
            let len = plan.len;
            let Some(Entry::Real(b)) = self.queue.front_mut() else {
                unreachable!(
                    "invariant: a run under async scheduling starts with a batch on the GPU"
                );
            };
            b.start = plan.end;
            b.end = plan.end + plan.next_dur;
            b.items.clear();
            b.items.extend(self.running[..len].iter().map(|&id| Item {
                id,
                uid: self.seqs[id.0 as usize].uid,
                tokens: 1,
                samples: true,
            }));
            self.gpu_free = b.end;
        } else {
            self.gpu_free = plan.end;
        }
        let (running, waiting_n, used) = (
            self.running.len() as u64,
            self.waiting.len() as u64,
            self.used_blocks * self.p.block,
        );
        self.stats.snapshot(running, waiting_n, self.deferred, used);
    }
}
