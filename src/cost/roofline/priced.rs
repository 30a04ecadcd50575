//! The roofline model made ready for a run: what [`Roofline`] computes, with the terms a batch
//! fixes ([`DecodeAt`]: the experts it touches — a `powf` — its weights, FLOPs and all-reduces)
//! computed once per batch size rather than once per call, and a run's steps priced by a
//! tighter loop. Every value is the same float operation for operation, so every step is bit
//! for bit the roofline's.

use std::sync::OnceLock;

use super::{DecodeAt, Roofline, EXACT_INTEGERS};
use crate::cost::{one_by_one, MixedStep, StepTimeModel};
use crate::time::SimDuration;

/// Batch sizes below this have their terms kept once computed.
const KEPT_BATCHES: usize = 2048;

/// Steps priced between two growths of the ends' vector.
const CHUNK: u64 = 256;

/// 2⁵²: from it up every float is an integer.
const TWO_52: f64 = 4_503_599_627_370_496.0;

/// A [`Roofline`] that keeps each batch size's terms: the model a run uses.
#[derive(Debug)]
pub struct PricedRoofline {
    r: Roofline,
    /// [`Roofline::decode_at`] of each batch size below [`KEPT_BATCHES`], once asked for.
    at: Box<[OnceLock<DecodeAt>]>,
    /// [`Roofline::decode_non_decreasing`] (the same for every batch).
    non_decreasing: bool,
}

impl PricedRoofline {
    /// The roofline, ready to price runs.
    pub fn new(r: Roofline) -> Self {
        PricedRoofline {
            non_decreasing: r.decode_non_decreasing(1),
            at: (0..KEPT_BATCHES).map(|_| OnceLock::new()).collect(),
            r,
        }
    }

    /// The terms of a decode step of `batch` requests.
    fn at(&self, batch: u64) -> DecodeAt {
        match self.at.get(batch as usize) {
            Some(kept) => *kept.get_or_init(|| self.r.decode_at(batch)),
            None => self.r.decode_at(batch),
        }
    }
}

impl DecodeAt {
    /// `s × 10⁹` of the step attending `kv` tokens, `s` the seconds
    /// [`duration_at`](Self::duration_at) rounds: the same operations in the same order.
    fn ns_f64(&self, kv: f64) -> f64 {
        let kv_s = kv * self.kv_bytes_per_token / self.bw;
        let compute_s = (self.batch_flops + kv * self.attention_flops_per_pair) / self.flops_per_s;
        let memory_s = self.weights_s + kv_s;
        // `f64::max` without its NaN handling: neither is NaN here (finite terms).
        let slower = if compute_s > memory_s {
            compute_s
        } else {
            memory_s
        };
        (slower + self.communication_s + self.overhead_s) * self.scale * 1e9
    }

    /// Whether every term is finite (then so is every step's value).
    fn finite(&self) -> bool {
        [
            self.weights_s,
            self.bw,
            self.batch_flops,
            self.flops_per_s,
            self.kv_bytes_per_token,
            self.attention_flops_per_pair,
            self.communication_s,
            self.overhead_s,
            self.scale,
        ]
        .iter()
        .all(|x| x.is_finite())
    }
}

/// [`super::to_duration`] of `x / 10⁹` s for `0.5 ≤ x < 2⁵²`: `y = x + 2⁵²` is `x` rounded to an
/// integer (ties to even), whose bits less 2⁵²'s are that integer; a tie rounded down is
/// rounded up instead.
fn rounded(x: f64) -> u64 {
    let y = x + TWO_52;
    let r = y.to_bits() - TWO_52.to_bits();
    r + u64::from(x - (y - TWO_52) >= 0.5)
}

impl StepTimeModel for PricedRoofline {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        self.at(batch).duration(kv_tokens)
    }

    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration {
        self.r.prefill(seqs, extend_tokens)
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        self.r.mixed(step)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let at = self.at(batch);
        one_by_one::total(steps, |i| at.duration(kv_first + batch * i))
    }

    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let at = self.at(batch);
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
        let at = self.at(batch);
        one_by_one::weighted(steps, w_first, w_slope, |i| {
            at.duration(kv_first + batch * i)
        })
    }

    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        self.non_decreasing
    }

    /// When the steps never get shorter, their contexts stay below 2⁵³ (so the float context
    /// is stepped exactly) and the first and the last step round in
    /// [`super::to_duration`]'s usual range, every step does (each operation is monotone in the
    /// context): the loop rounds without checking, and fills the ends a chunk at a time.
    /// Otherwise the roofline's own loop.
    fn decode_ends_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
        ends: &mut Vec<u64>,
    ) -> u64 {
        let at = self.at(batch);
        let last = (batch.checked_mul(most)).and_then(|k| k.checked_add(kv_first));
        let usual = |kv: u64| (0.5..TWO_52).contains(&at.ns_f64(kv as f64));
        let plain = most > 0
            && self.non_decreasing
            && last.is_some_and(|k| k < EXACT_INTEGERS)
            && at.finite()
            && usual(kv_first)
            && usual(kv_first + batch * (most - 1));
        if !plain {
            return self
                .r
                .decode_ends_within(batch, kv_first, most, budget, ends);
        }
        let (step, budget) = (batch as f64, budget.as_ns());
        let mut kv = kv_first as f64;
        let mut total = 0u64;
        let mut done = 0u64;
        while done < most {
            let start = ends.len();
            ends.resize(start + (most - done).min(CHUNK) as usize, 0);
            for (k, slot) in ends[start..].iter_mut().enumerate() {
                let next = total.saturating_add(rounded(at.ns_f64(kv)));
                if next >= budget {
                    ends.truncate(start + k);
                    return done + k as u64;
                }
                total = next;
                *slot = total;
                kv += step;
            }
            done += (ends.len() - start) as u64;
        }
        most
    }

    fn describe(&self) -> String {
        self.r.describe()
    }
}

#[cfg(test)]
mod tests;
