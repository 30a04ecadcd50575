//! Fast-forward: the decode steps between two events that change the batch differ only in the
//! KV they attend, so a run of them is taken at once — its duration and KV time-integral in
//! closed form from the step-time model, or, for a model without one
//! (`StepTimeModel::closed_form_runs`), from its steps' ends priced in one pass
//! (`decode_ends_within`) — with exactly the state, counters and log lines the step-by-step
//! path would leave.
//!
//! In the overlapped loop the run starts with a decode step decided ahead (`planned`): each
//! step of the run launches it and decides the next. The steps, their times and log lines are
//! the same; the allocations come one step earlier, and the run ends with the next decode step
//! decided.

use super::Sglang;
use crate::cost::FloorLine;
use crate::scheduler::{DecodeRun, Outbox, RunKv, RunState, Skip, Then};
use crate::time::{SimDuration, SimTime};

/// A planned fast-forward: `steps` decode steps of `batch` requests.
#[derive(Clone, Copy, Debug)]
pub(super) struct SkipPlan {
    steps: u64,
    batch: u64,
    /// KV tokens attended by the first step.
    attended_first: u64,
    /// KV slots in use during the first step.
    used_first: u64,
    /// The last step is the one at whose end the next requests complete: its end is processed
    /// as step by step ([`Sglang::finish_skip`]).
    completes: bool,
}

impl Sglang {
    /// Whether the next iterations may be plain decode steps, more than one before the next
    /// completion, as far as O(1) checks tell: a batch running, none in flight, no chunk
    /// continuing, no admission to try (the latch closed or nobody waiting), page size 1 (with
    /// larger pages the pool grows unevenly); overlapped, the decode step decided ahead is of
    /// the whole running batch (not one that still holds a request finished since); and no
    /// completion due at the next step, which would leave a run of one step at most, declined
    /// ([`plan_skip`](Self::plan_skip)) — as when requests complete at nearly every step
    /// (`scenarios/short-responses.toml`). The step's slot in the completions' wheel tells: it
    /// may also hold entries no longer current, and then a run is declined that the
    /// step-by-step path takes instead, with the same result.
    #[inline]
    pub(super) fn may_skip(&self) -> bool {
        let batch = self.running.len() as u64;
        self.p.page == 1
            && self.in_flight.is_none()
            && self.chunked.is_none()
            && batch > 0
            && (self.batch_is_full || self.waiting.is_empty())
            && (!self.p.overlap
                || matches!(self.planned, Some((super::InFlight::Decode { batch: b }, _))
                    if b == batch && self.leaving.is_empty()))
            && !self.finish.may_hold(self.decode_step + 1)
    }

    /// `skip_decode` once [`may_skip`](Self::may_skip) holds.
    #[inline(never)]
    pub(super) fn skip_run(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        reqs: &mut crate::request::Requests,
        out: &mut Outbox,
    ) -> Option<Skip> {
        let s = self.plan_skip(now, limit, max_steps, &mut out.run_ends, &mut out.run_line)?;
        let skip = self.take_skip(now, s, out);
        self.finish_skip(skip.end, s, reqs, out);
        #[cfg(debug_assertions)]
        self.debug_check(reqs);
        Some(skip)
    }

    /// Whether the next iterations are plain decode steps, and how many of them can be taken at
    /// once: until the next completion (its step included when the decisions made up to it are
    /// still plain decode steps), while memory lasts, at most `max_steps`, and while they end
    /// before `limit` — [`may_skip`](Self::may_skip) holding. None when at most one could be.
    /// The run's steps are kept in `line` when the model gives one for it
    /// ([`StepTimeModel::decode_floor_line`](crate::cost::StepTimeModel::decode_floor_line)),
    /// and in `ends` when the model prices them one by one.
    #[inline(always)]
    pub(super) fn plan_skip(
        &mut self,
        now: SimTime,
        limit: SimTime,
        max_steps: u64,
        ends: &mut Vec<u64>,
        line: &mut Option<FloorLine>,
    ) -> Option<SkipPlan> {
        debug_assert!(self.may_skip());
        let batch = self.running.len() as u64;
        // Overlapped: the first step is the decode step decided ahead, its KV allocated.
        let attended_first = if self.p.overlap {
            self.running_kv_tokens
        } else {
            self.running_kv_tokens + batch
        };
        // The next completion (stale entries of retracted requests are dropped on the way).
        let stays = &self.stays;
        let next_finish =
            (self.finish).next_step(|id, stay| super::current_stay(stays, id, stay))?;
        // The step at whose end the next requests complete is decided, and (overlapped) decides
        // the next, before anything changes: it belongs to the run, unless that decision sets a
        // request aside as finishing by length (`set_aside_finishing`; the filter errs only
        // early, so `false` is sure).
        let through = !self.p.overlap || !self.length_due_by(next_finish - 1);
        let by_completion = next_finish.saturating_sub(self.decode_step + 1) + u64::from(through);
        let by_memory = self.free_tokens() / batch;
        let most = by_completion.min(by_memory).min(max_steps);
        // A run of one step is declined: the step-by-step path takes it for less (as when
        // requests complete at nearly every step, `scenarios/short-responses.toml`).
        if most <= 1 {
            return None;
        }
        // The largest number of steps whose end is before `limit` (usually all of them): on
        // the model's line of floors for the run (kept for the run), in closed form, or by
        // pricing the steps once (their ends are kept for the run).
        let budget = limit.saturating_since(now);
        let lo = if self.cost.closed_form_runs() {
            let run = self.cost.decode_floor_line(batch, attended_first, most);
            // Steps that never get shorter all end in time if `most` of the last would.
            let last = match &run {
                Some(l) => l.duration(most - 1),
                None => (self.cost)
                    .decode(batch, attended_first + batch * (most - 1))
                    .as_ns(),
            };
            let all = self.cost.decode_non_decreasing(batch)
                && u128::from(last) * u128::from(most) < u128::from(budget.as_ns());
            match run {
                Some(l) => {
                    let lo = if all { most } else { l.within(budget.as_ns()) };
                    *line = if lo == most { Some(l) } else { l.prefix(lo) };
                    lo
                }
                None if all => most,
                None => {
                    (self.cost)
                        .decode_run_within(batch, attended_first, most, budget)
                        .0
                }
            }
        } else {
            (self.cost).decode_ends_within(batch, attended_first, most, budget, ends)
        };
        (lo > 0).then_some(SkipPlan {
            steps: lo,
            batch,
            attended_first,
            used_first: self.usage_tokens() + batch,
            completes: through && self.decode_step + lo == next_finish,
        })
    }

    /// Apply a planned fast-forward: exactly what `steps` calls of `try_decode` +
    /// `finish_decode` would do — but the end of the last step if it completes requests, which
    /// [`finish_skip`](Self::finish_skip) processes.
    pub(super) fn take_skip(&mut self, now: SimTime, s: SkipPlan, out: &mut Outbox) -> Skip {
        let (b, n) = (s.batch, s.steps);
        // Steps whose end is taken here.
        let ended = n - u64::from(s.completes);
        // Each step of the run is launched with the queue as it is now.
        self.queue_at_launch = self.waiting.len() as u64;
        // The run is described, not listed: its steps' ends (the inter-token latencies are timed
        // by them, the log lines printed at them) come in closed form, or from the one pass of
        // `plan_skip`. Its duration and the KV pool's time integral, Σ (used_first + b·j) × d_j:
        let (total, kv_integral) = match (&out.run_line, out.run_ends.as_slice()) {
            // Exact in 128 bits ([`FloorLine::sums`]); the total is below the budget.
            (Some(line), _) => {
                let (sum, weighted) = line.weighted(n, s.used_first, b);
                (SimDuration::from_ns(sum as u64), weighted)
            }
            (None, []) => (self.cost).decode_run_weighted(b, s.attended_first, n, s.used_first, b),
            // Σ j·d_j = (n − 1)·T − Σ_{j < n − 1} end_j.
            (None, ends) => {
                let t = u128::from(ends[ends.len() - 1]);
                let before_last = crate::cost::one_by_one::sum_of_ends(&ends[..ends.len() - 1]);
                let weighted = u128::from(s.used_first) * t
                    + u128::from(b) * (u128::from(n - 1) * t - before_last);
                (SimDuration::from_ns(t as u64), weighted)
            }
        };
        let described = DecodeRun {
            start: now,
            batch: b,
            kv_first: s.attended_first,
            steps: n,
            end: now + total,
        };
        // Decode log lines inside the run, at the global step numbers that are multiples of the
        // interval.
        let interval = self.p.log_interval;
        let first_line = interval - self.decode_batches % interval;
        let mut counted = 0u64;
        if first_line <= ended {
            // Their steps and times, the run priced once.
            let mut lines = std::mem::take(&mut self.line_steps);
            lines.clear();
            let run = described.priced(&*self.cost, out.run_line.as_ref(), &out.run_ends);
            let steps = (first_line..=ended).step_by(interval as usize);
            lines.extend(steps.map(|j| (j, now + SimDuration::from_ns(run.elapsed(j)))));
            for &(j, at) in &lines {
                self.decode_tokens_since_log += b * (j - counted);
                counted = j;
                let token = s.used_first + b * (j - 1);
                self.log_decode(&mut out.log, at, b, token);
            }
            self.line_steps = lines;
        }
        self.decode_tokens_since_log += b * (ended - counted);
        out.run_kv = RunKv::PerToken { kv_integral };
        out.decode_run = Some(described);
        // The ratio decays once per step, exactly as step by step.
        self.ratio = self.decay.run(self.ratio, n);
        // Evicting for the whole run at once takes the same leaves as step by step: nothing
        // touches the cache in between.
        self.alloc_evicting(b * n);
        self.running_kv_tokens += b * n;
        if self.p.overlap {
            // The step after the run, decided at the launch of its last step: of the same
            // batch as the step decided ahead (`may_skip`), only its duration changes.
            let next = self.cost.decode(b, s.attended_first + b * n);
            match &mut self.planned {
                Some((super::InFlight::Decode { batch }, d)) if *batch == b => *d = next,
                _ => panic!("invariant: a run follows a decode step decided ahead"),
            }
        }
        self.decode_step += ended;
        self.finish.pass(self.decode_step);
        self.last_round_end = now + total;
        self.alloc_step += n;
        self.decode_batches += ended;
        self.counters.decode_steps += n;
        self.counters.fast_forwarded_steps += n;
        out.generated_tokens += b * ended;
        Skip {
            steps: n,
            end: now + total,
            state: RunState::Constant {
                running: b + self.prefilling,
                queued: self.waiting.len() as u64,
                kv_last: s.used_first + b * (n - 1),
            },
            then: Then::Batch,
        }
    }
}

impl Sglang {
    /// The end of a run's last step when it completes requests ([`SkipPlan::completes`]): the
    /// result is processed as step by step — the tokens, the completions (in `out.finished`,
    /// for the simulator to answer at `end`) and a Decode line due at this step, whose usage
    /// is the pool's after their release.
    pub(super) fn finish_skip(
        &mut self,
        end: SimTime,
        s: SkipPlan,
        reqs: &mut crate::request::Requests,
        out: &mut Outbox,
    ) {
        if !s.completes {
            return;
        }
        if self.p.overlap {
            self.finish_overlapped(end, super::InFlight::Decode { batch: s.batch }, reqs, out);
        } else {
            self.finish_decode(end, s.batch, reqs, out);
        }
        debug_assert!(
            !out.finished.is_empty(),
            "invariant: a run that ends at a completion completes requests"
        );
    }
}

/// `new_token_ratio`'s decay over runs of decode steps that each set it to
/// `max(ratio − decay, min)` (the float operations of `try_decode`), exactly — in O(1) per
/// binade it crosses rather than per step.
///
/// Within a binade `[2^e, 2^(e+1))`, whose floats are the multiples of its ulp `u` (the ratio's
/// mantissa counts them above `2^e`), a step whose exact result `r − decay` stays in the binade
/// rounds it to a multiple of `u`: down by `q·u` or `(q + 1)·u` where `decay = q·u + f`,
/// `0 ≤ f < u`, as `f` is below or above `u/2` — the same for every such step, so they are an
/// arithmetic sequence, counted at once. A tie (`f = u/2`, rounded to even, alternating), a step
/// that leaves the binade and a decay of a binade or more are taken one at a time; a decay
/// below half an ulp leaves the ratio where it is. What depends on the binade alone is kept for
/// the next run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Decay {
    decay: f64,
    min: f64,
    /// How the steps go in the binades met lately, by the ratio's bits above its mantissa
    /// (a binade `exp` in slot `exp % 4`: the ratio decays through a few).
    binades: [(u64, Binade); 4],
}

/// How the steps go in one binade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binade {
    /// One at a time.
    Single,
    /// Not at all (a decay below half an ulp).
    Frozen,
    /// `ulps` down each, while the ratio is at least `need` ulps above the binade's floor.
    Sequence { ulps: u64, need: u64 },
}

const MANTISSA: u64 = (1 << 52) - 1;

impl Decay {
    /// The decay by `decay` per step down to `min`.
    pub(super) fn new(decay: f64, min: f64) -> Self {
        Decay {
            decay,
            min,
            binades: [(u64::MAX, Binade::Single); 4],
        }
    }

    fn binade(&self, exp: u64) -> Binade {
        let decay = self.decay;
        // Normal positive ratios away from the subnormals (their ulp a normal power of two).
        if !(decay > 0.0 && decay.is_finite() && (61..0x7ff).contains(&exp)) {
            return Binade::Single;
        }
        let ulp = f64::from_bits((exp - 52) << 52);
        // Exact: a division by a power of two, far from the subnormals.
        let t = decay / ulp;
        if t >= (1u64 << 52) as f64 {
            return Binade::Single;
        }
        let q = t.floor();
        let frac = t - q;
        if frac == 0.5 {
            return Binade::Single;
        }
        let ulps = q as u64 + u64::from(frac > 0.5);
        if ulps == 0 {
            return Binade::Frozen;
        }
        // A step keeps its exact result in the binade while `R − decay/u ≥ 0`, R the ratio's
        // ulps above the floor: `R ≥ ceil(t)`.
        Binade::Sequence {
            ulps,
            need: t.ceil() as u64,
        }
    }

    /// `ratio` after `steps` decode steps.
    #[inline]
    pub(super) fn run(&mut self, ratio: f64, steps: u64) -> f64 {
        // `max(r − 0, min)` is `r` while it is above `min`; at `min` it stays.
        if steps == 0 || ratio <= self.min || self.decay == 0.0 {
            return ratio;
        }
        self.run_above(ratio, steps)
    }

    /// [`run`](Self::run) from above the floor.
    #[inline(never)]
    fn run_above(&mut self, mut ratio: f64, mut steps: u64) -> f64 {
        let (decay, min) = (self.decay, self.min);
        let step = |r: f64| (r - decay).max(min);
        while steps > 0 && ratio > min {
            let bits = ratio.to_bits();
            let exp = bits >> 52;
            let slot = (exp % 4) as usize;
            if self.binades[slot].0 != exp {
                self.binades[slot] = (exp, self.binade(exp));
            }
            let (ulps, need) = match self.binades[slot].1 {
                Binade::Frozen => return ratio,
                Binade::Single => {
                    ratio = step(ratio);
                    steps -= 1;
                    continue;
                }
                Binade::Sequence { ulps, need } => (ulps, need),
            };
            let r_units = bits & MANTISSA;
            if r_units < need {
                ratio = step(ratio);
                steps -= 1;
                continue;
            }
            let k = ((r_units - need) / ulps + 1).min(steps);
            let r = f64::from_bits((exp << 52) | (r_units - k * ulps));
            debug_assert_eq!(
                r.to_bits(),
                decayed_by_steps(ratio, decay, f64::MIN, k).to_bits(),
                "invariant: a binade's steps are an arithmetic sequence"
            );
            steps -= k;
            if r <= min {
                return min;
            }
            ratio = r;
        }
        ratio
    }
}

/// `ratio` after `steps` decode steps of [`Decay`] (a fresh one).
#[cfg(test)]
pub(super) fn decayed(ratio: f64, decay: f64, min: f64, steps: u64) -> f64 {
    Decay::new(decay, min).run(ratio, steps)
}

/// `decayed` (a run of [`Decay`]) one step at a time, as `try_decode` does (the reference).
pub(super) fn decayed_by_steps(mut ratio: f64, decay: f64, min: f64, steps: u64) -> f64 {
    for _ in 0..steps {
        if ratio <= min {
            break;
        }
        ratio = (ratio - decay).max(min);
    }
    ratio
}

#[cfg(test)]
mod tests {
    use super::{decayed, decayed_by_steps};
    use proptest::prelude::*;

    /// A float `units` ulps of `x`'s binade.
    fn ulps(x: f64, units: f64) -> f64 {
        let exp = (x.to_bits() >> 52) & 0x7ff;
        f64::from_bits((exp - 52) << 52) * units
    }

    #[test]
    fn the_ratio_decays_as_step_by_step_across_binades_ties_and_the_floor() {
        // SGLang's defaults (0.7 to 0.098 over 600 steps), and decays of exact ulp multiples,
        // ties (half an ulp over), and below half an ulp.
        let init = 0.7f64;
        let min = init * 0.14;
        let mut cases = vec![(init, (init - min) / 600.0, min)];
        for units in [1.0, 2.0, 1.5, 2.5, 0.5, 0.25, 0.75, 3.0 + 1.0 / 3.0] {
            cases.push((init, ulps(init, units), min));
            cases.push((0.5, ulps(0.5, units), 0.25 - ulps(0.25, 1.0)));
        }
        for (r, d, m) in cases {
            for steps in [0, 1, 2, 3, 10, 100, 599, 600, 601, 5_000] {
                assert_eq!(
                    decayed(r, d, m, steps).to_bits(),
                    decayed_by_steps(r, d, m, steps).to_bits(),
                    "ratio {r}, decay {d}, min {m}, {steps} steps"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn one_decay_over_many_runs_is_step_by_step(
            d in 1e-5f64..0.01,
            runs in proptest::collection::vec(
                (0.0f64..1.0, 0u64..700, 0usize..4, 0u32..2_000_000), 1..20),
        ) {
            // As the scheduler uses it: one decay, runs from ratios set anew (retractions) —
            // anywhere, or a few ulps above a binade's floor.
            let min = 0.098;
            let mut decay = super::Decay::new(d, min);
            for (r, steps, floor, above) in runs {
                let r = match floor {
                    0 => min + r * (1.0 - min),
                    k => {
                        let lo = 1.0 / f64::from(1u32 << k);
                        lo + ulps(lo, f64::from(above))
                    }
                };
                prop_assert_eq!(
                    decay.run(r, steps).to_bits(),
                    decayed_by_steps(r, d, min, steps).to_bits()
                );
            }
        }

        #[test]
        fn the_ratio_decays_as_step_by_step(
            r in 1e-6f64..1.0,
            d in prop_oneof![1e-9f64..0.05, (0u32..64).prop_map(|h| f64::from(h) / 2.0)],
            m in 0.0f64..1.0,
            steps in 0u64..3_000,
        ) {
            // `d` as a number of half ulps of `r`'s binade, or as a plain fraction.
            let d = if d >= 0.5 && d.fract() == 0.0 || d.fract() == 0.5 { ulps(r, d) } else { d };
            let m = m * r;
            prop_assert_eq!(
                decayed(r, d, m, steps).to_bits(),
                decayed_by_steps(r, d, m, steps).to_bits()
            );
        }
    }
}
