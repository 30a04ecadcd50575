//! Long quiet stretches taken at once: per event, not per turn.
//!
//! A quiet turn ([`Vllm::quiet_turns`]) preempts, admits, reports and finishes nothing: each
//! request of RUNNING decodes one token, and the requests whose tokens fill a block take a new
//! one (`v1/core/sched/scheduler.py: Scheduler.schedule`, `kv_cache_manager.py:
//! allocate_slots`). Through a stretch of them the batch is constant and its KV grows by one
//! token a request a turn, so the stretch is a run of decode steps of a constant batch, as
//! SGLang's are ([`crate::scheduler::DecodeRun`]), with the KV in use going up in blocks
//! ([`KvStairs`]). Where it ends comes in closed form, each bound once:
//!
//! * the first turn at which a request finishes or reports its first output (the track's
//!   prefix minima);
//! * the first at which RUNNING needs more blocks than are free (a preemption): the blocks the
//!   turns take repeat with the block size as period, so the turns they allow are a division
//!   and a search among one period's prefix sums;
//! * the last that ends before the run's limit: the step-time model's search over a run
//!   ([`crate::cost::StepTimeModel::decode_run_within`], or its steps priced once);
//! * the stats lines inside it, each placed by a search over the run's ends.
//!
//! The KV pool's time integral the simulator takes from the stretch's description
//! ([`KvStairs`]): on a line of floors, its whole part in closed form in a few operations and
//! its floors per residue of the block period (or in a pass without a division over a short
//! part); else one pass over the turns, a few integer operations each
//! ([`KvStairs::integral`]). Stretches
//! shorter than [`LONG_TURNS`] are taken turn by turn, which costs less there.
//!
//! Under async scheduling each turn ends when the batch on the GPU does, so the stretch's turns
//! end at the durations of the batches scheduled one turn earlier: the run starts with the
//! batch on the GPU, which must be the same decode step one turn back (else the stretch is
//! left to the turns).

use super::fast_forward::{Call, Track, Waiting};
use super::log::INTERVAL;
use super::Vllm;
use crate::cost::DecodeSteps;
use crate::scheduler::{DecodeRun, KvStairs, Outbox, RunKv, RunState};
use crate::time::{SimDuration, SimTime};

/// The shortest stretch taken at once. Setting one up costs about as much as this many quiet
/// turns taken one by one (its bounds, a period's prefix sums, a search over the run).
pub(super) const LONG_TURNS: u64 = 64;

/// A long quiet stretch, from turn `tr.turn + 1`, as [`Vllm::long_stretch`] found it.
pub(super) struct Stretch {
    /// Where WAITING stops throughout.
    w: Waiting,
    /// Its turns.
    pub turns: u64,
    /// The turn after it would end past the run's limit.
    pub stopped: bool,
    /// The KV tokens the run's first step attends: the first turn's step, or under async
    /// scheduling the batch on the GPU.
    kv_first: u64,
    /// The time from the stretch's start to its last turn's end, ns.
    total_ns: u64,
}

impl Vllm {
    /// The quiet turns from `tr.turn + 1` on, at most `most`, if there are at least
    /// [`LONG_TURNS`] of them before the run's limit — exactly those [`Vllm::quiet_turns`]
    /// would take. Prices the stretch's steps into `out.run_ends` when the step-time model has
    /// no closed form for runs (emptied when it returns `None`).
    pub(super) fn long_stretch(
        &self,
        tr: &mut Track,
        cx: &Call,
        most: u64,
        out: &mut Outbox,
    ) -> Option<Stretch> {
        let l = tr.len();
        let j0 = tr.turn + 1;
        // The turn at which a request finishes, and the last at which one reports its first
        // output, are not quiet: the cheap bounds first.
        if l == 0 || tr.places.last().is_some_and(|p| p.out0 >= j0) {
            return None;
        }
        let most = tr.min_fin(l).checked_sub(j0).map_or(most, |d| d.min(most));
        if most < LONG_TURNS || cx.limit <= cx.t {
            return None;
        }
        // The blocks the turns take: none may need more than are free. Each request takes
        // one a period, so the first LONG_TURNS take at least this many.
        let free = self.free_blocks();
        let period = self.p.block;
        if free < (LONG_TURNS / period) * l as u64 {
            return None;
        }
        let mut prefix = std::mem::take(&mut tr.prefix);
        tr.block_prefix(&mut prefix);
        let per_period = prefix[period as usize];
        let first = prefix[1];
        let fits = match free.checked_div(per_period) {
            None => u64::MAX,
            // Whole periods, then the longest prefix of the next that still fits.
            Some(whole) => {
                let rest = free - whole * per_period;
                let part = prefix[..period as usize].partition_point(|&x| x <= rest) as u64 - 1;
                whole.saturating_mul(period).saturating_add(part)
            }
        };
        tr.prefix = prefix;
        let most = most.min(fits);
        if most < LONG_TURNS {
            return None;
        }
        // And the first must not leave more free than WAITING's stop allows (the later ones
        // leave fewer).
        let holds = |w: &Waiting| l == w.running && self.waiting.front().copied() == w.head;
        let w = match tr.waiting {
            Some(w) if holds(&w) => w,
            _ => self.settle(tr)?,
        };
        if free - first > w.free {
            return None;
        }
        // Turn `j`'s step attends `kv + b·(j − j0)`; under async scheduling turn j ends with
        // the step scheduled one turn earlier, the first with the batch on the GPU.
        let b = l as u64;
        let kv = (tr.base_sum + l as i64 * (j0 as i64 + 1)) as u64;
        let kv_first = if self.p.depth > 1 {
            let before = kv.checked_sub(b)?;
            if self.cost.decode(b, before) != cx.pending {
                return None;
            }
            before
        } else {
            kv
        };
        let budget = cx.limit - cx.t;
        let (turns, total_ns) = if self.cost.closed_form_runs() {
            let (n, total) = self.cost.decode_run_within(b, kv_first, most, budget);
            (n, total.as_ns())
        } else {
            out.run_ends.clear();
            let n = (self.cost).decode_ends_within(b, kv_first, most, budget, &mut out.run_ends);
            (n, out.run_ends.last().copied().unwrap_or(0))
        };
        if turns < LONG_TURNS {
            out.run_ends.clear();
            return None;
        }
        Some(Stretch {
            w,
            turns,
            stopped: turns < most,
            kv_first,
            total_ns,
        })
    }

    /// Take the stretch `s` at once: exactly what [`Vllm::quiet_turns`] does over its turns,
    /// described to the simulator as one run ([`RunState::Constant`], `out.decode_run`,
    /// `out.run_kv`).
    pub(super) fn take_stretch(
        &mut self,
        tr: &mut Track,
        cx: &mut Call,
        out: &mut Outbox,
        s: Stretch,
    ) -> RunState {
        let b = tr.len() as u64;
        let k = s.turns;
        let queued = self.waiting.len() as u64;
        let start = cx.t;
        let stairs = KvStairs::new(self.used_blocks, self.p.block, tr.prefix.clone());
        let ends = std::mem::take(&mut out.run_ends);
        let run = DecodeSteps::new(&*self.cost, b, s.kv_first, k, &ends).with_total(s.total_ns);
        // The stats lines inside it, each printed in the turn it falls in: how many turns
        // ended before it, and when that turn ends (every line due before then is printed
        // there, after the outputs of the turns before).
        let end = start + SimDuration::from_ns(s.total_ns);
        let mut lines: Vec<(u64, SimTime)> = Vec::new();
        let mut at = cx.next_log;
        while at < end {
            let ended = run.ended_by(at.saturating_since(start).as_ns());
            let turn_end = start + SimDuration::from_ns(run.elapsed(ended + 1));
            lines.push((ended, turn_end));
            while at < turn_end {
                at += INTERVAL;
            }
        }
        let kv_last = stairs.used_during(k - 1);
        out.run_ends = ends;
        let mut counted = 0;
        for (ended, turn_end) in lines {
            cx.generated += b * (ended - counted);
            counted = ended;
            // The state after the turn before, if it is the stretch's.
            if ended > 0 {
                cx.seen = Some((b, queued, stairs.used_during(ended - 1)));
            }
            self.log_until(cx, turn_end, out);
        }
        cx.generated += b * (k - counted);
        cx.seen = Some((b, queued, kv_last));
        cx.saw_running = true;
        self.finished_pending = false;
        let taken = stairs.taken(k);
        self.used_blocks += taken;
        // RUNNING's new blocks off the free queue, the stretch's at once (as `quiet_turns`).
        if let Some(q) = &mut self.own {
            q.take(taken);
        }
        cx.t = end;
        if self.p.depth > 1 {
            cx.pending = self.cost.decode(b, s.kv_first + b * k);
        }
        tr.advance_by(k);
        out.generated_tokens += b * k;
        self.counters.decode_steps += k;
        self.counters.fast_forwarded_steps += k;
        self.counters.slot_stops += k * u64::from(s.w.slot_stop);
        self.counters.memory_stops += k * u64::from(s.w.memory_stop);
        out.decode_run = Some(DecodeRun {
            start,
            batch: b,
            kv_first: s.kv_first,
            steps: k,
            end,
        });
        out.run_kv = RunKv::Blocks(stairs);
        RunState::Constant {
            running: b,
            queued,
            kv_last,
        }
    }
}
