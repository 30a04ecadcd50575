//! The roofline model made ready for a run: what [`Roofline`] computes, with the terms a batch
//! fixes ([`DecodeAt`]: the experts it touches — a `powf` — its weights, FLOPs and all-reduces)
//! computed once per batch size rather than once per call, those no prefill batch changes
//! ([`PrefillAt`]) computed once, and a run's steps priced by a tighter loop. Every value is
//! the same float operation for operation, so every step is bit for bit the roofline's.

use std::sync::OnceLock;

use super::{DecodeAt, Roofline, EXACT_INTEGERS};
use crate::cost::{one_by_one, MixedStep, StepTimeModel};
use crate::time::{round_below_2_52, SimDuration, TWO_52};

/// Batch sizes below this have their terms kept once computed.
const KEPT_BATCHES: usize = 2048;

/// [`DecodeAt::ns_f64_of`]: every step's memory time is its larger one.
const MEMORY: u8 = 0;
/// [`DecodeAt::ns_f64_of`]: every step's compute time is its larger one.
const COMPUTE: u8 = 1;
/// [`DecodeAt::ns_f64_of`]: the larger one is found step by step.
const EITHER: u8 = 2;

/// A [`Roofline`] that keeps each batch size's terms: the model a run uses.
#[derive(Debug)]
pub struct PricedRoofline {
    r: Roofline,
    /// [`Roofline::decode_at`] of each batch size below [`KEPT_BATCHES`], once asked for.
    at: Box<[OnceLock<DecodeAt>]>,
    /// [`Roofline::decode_non_decreasing`] (the same for every batch).
    non_decreasing: bool,
    /// The terms of every prefill batch.
    prefill: PrefillAt,
}

/// The terms of [`Roofline::prefill_terms`] that no batch changes, computed once: the same
/// operations on the same values, so each prefill's time is bit for bit the roofline's.
#[derive(Clone, Copy, Debug)]
struct PrefillAt {
    /// The weights' read time when no routed expert is touched: a dense model's every batch.
    dense_weights_s: Option<f64>,
    /// `1 − k/E`: a token's chance to miss a routed expert.
    miss: f64,
    /// Bandwidth reached.
    bw: f64,
    /// FLOP/s reached.
    flops_per_s: f64,
    /// The all-reduces' `2 × layers`.
    two_layers: f64,
    /// The all-reduces' `2(TP − 1)/TP` (none at TP 1).
    ring: Option<f64>,
}

impl PrefillAt {
    fn new(r: &Roofline) -> Self {
        let bw = r.bandwidth_bytes_per_s * r.bandwidth_efficiency;
        let tp = f64::from(r.tensor_parallel);
        PrefillAt {
            // `experts_touched` is 0 without routed experts.
            dense_weights_s: (r.routed_experts == 0.0)
                .then(|| (r.dense_read_bytes + 0.0 * r.moe_layers * r.expert_bytes) / bw),
            miss: 1.0 - r.experts_per_token / r.routed_experts,
            bw,
            flops_per_s: r.peak_flops_per_s * r.compute_efficiency,
            two_layers: 2.0 * r.layers,
            ring: (r.tensor_parallel > 1).then(|| 2.0 * (tp - 1.0) / tp),
        }
    }
}

impl PricedRoofline {
    /// The roofline, ready to price runs.
    pub fn new(r: Roofline) -> Self {
        PricedRoofline {
            non_decreasing: r.decode_non_decreasing(1),
            at: (0..KEPT_BATCHES).map(|_| OnceLock::new()).collect(),
            prefill: PrefillAt::new(&r),
            r,
        }
    }

    /// The terms of a decode step of `batch` requests: the kept ones, or (the first time, or
    /// for a batch too large to keep) computed, into `spare` if not kept. A reference, not a
    /// copy: a step reads a few of the terms, once each.
    #[inline(always)]
    fn at<'a>(&'a self, batch: u64, spare: &'a mut Option<DecodeAt>) -> &'a DecodeAt {
        match self.at.get(batch as usize).and_then(OnceLock::get) {
            Some(kept) => kept,
            None => self.compute_at(batch, spare),
        }
    }

    /// [`at`](Self::at) of a batch whose terms are not kept yet.
    #[inline(never)]
    fn compute_at<'a>(&'a self, batch: u64, spare: &'a mut Option<DecodeAt>) -> &'a DecodeAt {
        match self.at.get(batch as usize) {
            Some(kept) => kept.get_or_init(|| self.r.decode_at(batch)),
            None => spare.insert(self.r.decode_at(batch)),
        }
    }
}

impl PricedRoofline {
    /// The `total_s` of [`Roofline::prefill_breakdown`], with the fixed terms kept
    /// ([`PrefillAt`]).
    fn prefill_s(&self, seqs: u64, extend_tokens: u64) -> f64 {
        let (r, p) = (&self.r, &self.prefill);
        let (n, t) = (seqs.max(1) as f64, extend_tokens as f64);
        let weights_s = match p.dense_weights_s {
            Some(w) => w,
            None => {
                let touched = r.routed_experts * (1.0 - p.miss.powf(t));
                (r.dense_read_bytes + touched * r.moe_layers * r.expert_bytes) / p.bw
            }
        };
        let flops = t * r.flops_per_token * r.matmul_time_factor
            + 0.5 * t * t / n * r.attention_flops_per_pair;
        let compute_s = flops / p.flops_per_s;
        let communication_s = match p.ring {
            None => 0.0,
            Some(ring) => {
                let bytes = t * r.hidden_size * 2.0;
                p.two_layers * (r.collective_latency_s + ring * bytes / r.link_bytes_per_s)
            }
        };
        // `finish`: the memory time is the weights' and no KV.
        let memory_s = weights_s + 0.0;
        (memory_s.max(compute_s) + communication_s + r.prefill_overhead_s) * r.scale
    }
}

impl DecodeAt {
    /// The nanoseconds of the step attending `kv` tokens before rounding: what
    /// [`duration_at`](Self::duration_at) rounds, the same operations in the same order.
    fn ns_f64(&self, kv: f64) -> f64 {
        self.ns_f64_of::<EITHER>(kv)
    }

    /// [`ns_f64`](Self::ns_f64) knowing which of the two times is the larger one (`BOUND`:
    /// [`MEMORY`], [`COMPUTE`], or [`EITHER`] to compare them).
    #[inline(always)]
    fn ns_f64_of<const BOUND: u8>(&self, kv: f64) -> f64 {
        let slower = match BOUND {
            MEMORY => self.memory_s(kv),
            COMPUTE => self.compute_s(kv),
            _ => {
                let (compute_s, memory_s) = (self.compute_s(kv), self.memory_s(kv));
                // `f64::max` without its NaN handling: neither is NaN here (finite terms).
                if compute_s > memory_s {
                    compute_s
                } else {
                    memory_s
                }
            }
        };
        slower * self.ns_per_s
    }

    /// The ends of the run's steps from `kv_first`, `batch` more each step, until the budget,
    /// appended to `ends`: how many fit. Every step must round in the usual range (see
    /// [`PricedRoofline::decode_ends_within`]) and last no less than the one before, every
    /// context must be below 2⁵³, and `BOUND` must be the larger time of every step's; `first`
    /// and `last` are the first and the last (at `most − 1`) step's [`rounded`]
    /// [`ns_f64`](Self::ns_f64) (the same as `BOUND`'s: the larger time is the same float).
    ///
    /// No step lasts less than the first nor more than the last that may fit, so at most
    /// `(budget − 1) / first` steps fit, and of the budget left after some steps, at least
    /// `(left − 1) / longest` more surely do, `longest` the last that may fit: those are priced
    /// without a check (nor a saturation: their ends stay below the budget), and only the
    /// steps past such a stretch one by one.
    #[inline(always)]
    fn ends<const BOUND: u8>(&self, run: Run, budget: u64, ends: &mut Vec<u64>) -> u64 {
        let Run {
            kv_first,
            first,
            last,
            batch,
            most,
        } = run;
        let price = |kv: u64| rounded(self.ns_f64_of::<BOUND>(exact_f64(kv)));
        // The first step bounds the steps that fit and is the first end (it fits when any
        // step does: `first ≤ budget − 1`).
        let cap = most.min(budget.saturating_sub(1) / first);
        if cap == 0 {
            return 0;
        }
        ends.push(first);
        if cap == 1 {
            return 1;
        }
        // The step at `cap − 1`, priced once (already, when it is the run's last): it bounds
        // the others and is the last that may fit (its context below 2⁵³, the float context
        // stepped to it is the same).
        let longest = match cap == most {
            true => last,
            false => price(kv_first + batch * (cap - 1)),
        };
        let step = exact_f64(batch);
        let mut kv = exact_f64(kv_first) + step;
        let (mut total, mut done) = (first, 1u64);
        // The steps between the first and the one at `cap − 1`.
        let inner = cap - 1;
        while done < inner {
            let sure = (inner - done).min((budget - 1 - total) / longest);
            if sure > 0 {
                // A range's map has an exact length: the vector grows once, unchecked after.
                ends.extend((0..sure).map(|_| {
                    total += rounded(self.ns_f64_of::<BOUND>(kv));
                    kv += step;
                    total
                }));
                done += sure;
            } else {
                let next = total.saturating_add(rounded(self.ns_f64_of::<BOUND>(kv)));
                if next >= budget {
                    return done;
                }
                total = next;
                ends.push(total);
                kv += step;
                done += 1;
            }
        }
        let next = total.saturating_add(longest);
        if next >= budget {
            return done;
        }
        ends.push(next);
        cap
    }
}

/// [`super::to_duration`] of `x / 10⁹` s for `0.5 ≤ x < 2⁵²`.
#[inline(always)]
fn rounded(x: f64) -> u64 {
    round_below_2_52(x)
}

/// `n as f64` for `n` below 2⁵³ (where every integer is a float, so the signed conversion
/// gives the same float): one instruction on the baseline x86-64 target, where the unsigned
/// one takes several.
#[inline(always)]
fn exact_f64(n: u64) -> f64 {
    debug_assert!(n < EXACT_INTEGERS, "invariant: {n} is below 2^53");
    n as i64 as f64
}

/// A run of decode steps for [`DecodeAt::ends`]: at most `most` steps (at least one) from
/// `kv_first` context tokens, `batch` more each step, the first and the last [`rounded`].
#[derive(Clone, Copy)]
struct Run {
    kv_first: u64,
    first: u64,
    last: u64,
    batch: u64,
    most: u64,
}

impl StepTimeModel for PricedRoofline {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        self.at(batch, &mut None).duration(kv_tokens)
    }

    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration {
        super::to_duration(self.prefill_s(seqs, extend_tokens))
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        self.r.mixed(step)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let mut spare = None;
        let at = self.at(batch, &mut spare);
        one_by_one::total(steps, |i| at.duration(kv_first + batch * i))
    }

    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let mut spare = None;
        let at = self.at(batch, &mut spare);
        one_by_one::within(most, budget, |i| at.duration(kv_first + batch * i))
    }

    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let mut spare = None;
        let at = self.at(batch, &mut spare);
        one_by_one::weighted(steps, w_first, w_slope, |i| {
            at.duration(kv_first + batch * i)
        })
    }

    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        self.non_decreasing
    }

    /// When the steps never get shorter, their contexts stay below 2⁵³ (so the float context
    /// is stepped exactly) and the first and the last step round in
    /// `to_duration`'s usual range, every step does (each operation is monotone in the
    /// context): the loop rounds without checking (`DecodeAt::ends`). Otherwise the
    /// roofline's own loop.
    fn decode_ends_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
        ends: &mut Vec<u64>,
    ) -> u64 {
        let mut spare = None;
        let at = self.at(batch, &mut spare);
        let last = (batch.checked_mul(most)).and_then(|k| k.checked_add(kv_first));
        let plain = most > 0
            && self.non_decreasing
            && last.is_some_and(|k| k < EXACT_INTEGERS)
            && at.finite;
        let usual_ns = |ns: f64| (0.5..TWO_52).contains(&ns);
        // The first and the last step's values, computed once: checked here and priced in the
        // loop.
        let (first_ns, last_ns, first, last) = if plain {
            let first = exact_f64(kv_first);
            let last = exact_f64(kv_first + batch * (most - 1));
            (at.ns_f64(first), at.ns_f64(last), first, last)
        } else {
            (0.0, 0.0, 0.0, 0.0)
        };
        if !(plain && usual_ns(first_ns) && usual_ns(last_ns)) {
            return self
                .r
                .decode_ends_within(batch, kv_first, most, budget, ends);
        }
        // Each term is monotone in the context: when the memory time of the first step is at
        // least the compute time of the last, every step's larger one is its memory time (the
        // roofline takes the memory time on a tie), and the other way round.
        let (memory, compute) = (|kv| at.memory_s(kv), |kv| at.compute_s(kv));
        let run = Run {
            kv_first,
            first: rounded(first_ns),
            last: rounded(last_ns),
            batch,
            most,
        };
        let budget = budget.as_ns();
        if compute(last) <= memory(first) {
            at.ends::<MEMORY>(run, budget, ends)
        } else if compute(first) > memory(last) {
            at.ends::<COMPUTE>(run, budget, ends)
        } else {
            at.ends::<EITHER>(run, budget, ends)
        }
    }

    fn describe(&self) -> String {
        self.r.describe()
    }
}

#[cfg(test)]
mod tests;
