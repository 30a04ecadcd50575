//! The table step-time model: measured step times, interpolated.
//!
//! * A **decode** step of `B` requests attending `K` KV tokens is read from a grid of batch
//!   sizes × KV sizes by bilinear interpolation: linear in `B` between the two batch sizes
//!   around it and linear in `K` between the two KV sizes around it. The axes are meant to be
//!   log-spaced (1, 2, 4, … 256 requests), which gives small batches the resolution their steep
//!   per-request cost needs; the interpolation between two points is linear in the quantity
//!   itself.
//! * A **prefill** batch of `T` tokens is read from a list of token counts the same way (the
//!   number of requests in it is not an axis).
//! * Outside the table, each axis is **extended linearly from its nearest segment** (the last
//!   two points above the table, the first two below it), and the result is at least 1 ns:
//!   reports name the table's ranges so that a run far outside them is seen.
//! * A **mixed** step (decode rows and prompt tokens in one forward pass) costs the decode step
//!   of its decode rows attending all the step's KV tokens, plus what its prompt tokens add to
//!   a prefill batch beyond the batch's fixed cost: `prefill(T) − prefill(0)`, the prefill line
//!   extended to zero tokens (the step's fixed cost is paid once, by the decode part). For a
//!   table made from the linear model this is exactly the linear model's mixed step.
//!
//! Times are stored in integer picoseconds and interpolated in integer arithmetic (a step
//! rounds down to whole nanoseconds), so that a run of decode steps of a constant batch — whose
//! KV grows by the batch each step — has an exact closed form per KV segment
//! ([`StepTimeModel::decode_run`]): sums of floors, as in the linear model.

mod priced;
pub mod read;

pub use priced::PricedTable;

use super::floors::floor_sums;
use super::{MixedStep, StepTimeModel};
use crate::time::SimDuration;

/// A table of measured step times (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepTable {
    /// Batch sizes, strictly increasing (at least two).
    pub decode_batch: Vec<u64>,
    /// KV sizes (tokens attended by the whole batch), strictly increasing (at least two).
    pub decode_kv_tokens: Vec<u64>,
    /// Decode step times in picoseconds, one row per batch size: `[batch][kv]`.
    pub decode_ps: Vec<u64>,
    /// Prefill batch sizes in tokens, strictly increasing (at least two).
    pub prefill_tokens: Vec<u64>,
    /// Prefill batch times in picoseconds.
    pub prefill_ps: Vec<u64>,
    /// Where the table comes from: a file name, or "inline".
    pub source: String,
}

/// Sums beyond these fall back to adding step by step (they cannot happen in a real run, but
/// the closed form's integers must not overflow).
const MAX_STEPS_CLOSED: u64 = 1 << 32;
const MAX_FLOOR_NS: i128 = 1 << 40;
const MAX_DENOM: i128 = 1 << 72;

/// The segment of `axis` used for `x`: the index of the last point ≤ `x`, kept within the
/// first and the last segment (so that outside the axis the nearest segment is extended).
fn segment(axis: &[u64], x: u64) -> usize {
    axis.partition_point(|&p| p <= x)
        .saturating_sub(1)
        .min(axis.len() - 2)
}

/// The decode time at batch `b` as `(α + β·K) / denominator` picoseconds, valid on one KV
/// segment.
#[derive(Clone, Copy, Debug)]
struct Line {
    alpha: i128,
    beta: i128,
    denom: i128,
}

impl Line {
    fn ns(&self, kv: u64) -> i128 {
        (self.alpha + self.beta * i128::from(kv)).div_euclid(self.denom * 1000)
    }
}

fn at_least_one_ns(ns: i128) -> SimDuration {
    SimDuration::from_ns(ns.clamp(1, i128::from(u64::MAX)) as u64)
}

/// The corners of the decode grid's cell `(j, i)`: its batch bounds `b`, its KV bounds `k` and
/// its four measured times `t[batch corner][KV corner]` in picoseconds.
pub(super) struct Corners {
    pub b: [i128; 2],
    pub k: [i128; 2],
    pub t: [[i128; 2]; 2],
}

impl StepTable {
    /// The corners of the decode cell of batch segment `j` and KV segment `i`.
    pub(super) fn corners(&self, j: usize, i: usize) -> Corners {
        let nk = self.decode_kv_tokens.len();
        let t = |bj: usize, ki: usize| i128::from(self.decode_ps[bj * nk + ki]);
        Corners {
            b: [j, j + 1].map(|x| i128::from(self.decode_batch[x])),
            k: [i, i + 1].map(|x| i128::from(self.decode_kv_tokens[x])),
            t: [[t(j, i), t(j, i + 1)], [t(j + 1, i), t(j + 1, i + 1)]],
        }
    }

    /// The decode line of `batch` on KV segment `i`: bilinear in (batch, KV), so linear in KV
    /// for a fixed batch.
    fn decode_line(&self, batch: u64, i: usize) -> Line {
        let j = segment(&self.decode_batch, batch);
        let Corners {
            b: [b0, b1],
            k: [k0, k1],
            t: [[t00, t01], [t10, t11]],
        } = self.corners(j, i);
        let b = i128::from(batch);
        let (low, high) = (b1 - b, b - b0);
        Line {
            alpha: low * (k1 * t00 - k0 * t01) + high * (k1 * t10 - k0 * t11),
            beta: low * (t01 - t00) + high * (t11 - t10),
            denom: (b1 - b0) * (k1 - k0),
        }
    }

    /// The decode time in whole nanoseconds, before the 1 ns floor (may be ≤ 0 far outside
    /// the table).
    fn decode_ns(&self, batch: u64, kv_tokens: u64) -> i128 {
        let i = segment(&self.decode_kv_tokens, kv_tokens);
        self.decode_line(batch, i).ns(kv_tokens)
    }

    /// The prefill time of `tokens` as `(numerator, denominator)` picoseconds.
    fn prefill_ratio(&self, tokens: u64) -> (i128, i128) {
        let i = segment(&self.prefill_tokens, tokens);
        let (p0, p1) = (
            i128::from(self.prefill_tokens[i]),
            i128::from(self.prefill_tokens[i + 1]),
        );
        let (v0, v1) = (
            i128::from(self.prefill_ps[i]),
            i128::from(self.prefill_ps[i + 1]),
        );
        let t = i128::from(tokens);
        ((p1 - t) * v0 + (t - p0) * v1, p1 - p0)
    }

    /// The decode time of each point, in seconds: `(batch, kv_tokens, seconds)`.
    pub fn decode_points(&self) -> impl Iterator<Item = (u64, u64, f64)> + '_ {
        let nk = self.decode_kv_tokens.len();
        self.decode_ps.iter().enumerate().map(move |(n, &ps)| {
            (
                self.decode_batch[n / nk],
                self.decode_kv_tokens[n % nk],
                ps as f64 * 1e-12,
            )
        })
    }

    /// The prefill time of each point, in seconds: `(tokens, seconds)`.
    pub fn prefill_points(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.prefill_tokens
            .iter()
            .zip(&self.prefill_ps)
            .map(|(&t, &ps)| (t, ps as f64 * 1e-12))
    }

    /// `n` decode steps of `batch` on one KV line, the first attending `kv`: `(Σ d, Σ l·d)` in
    /// ns for `l` from 0, in closed form when every step is at least 1 ns and the integers stay
    /// small, else step by step.
    fn line_run(&self, line: Line, batch: u64, kv: u64, n: u64) -> (u128, u128) {
        let c0 = line.alpha + line.beta * i128::from(kv);
        let c1 = line.beta * i128::from(batch);
        let d = line.denom * 1000;
        let last = c0 + c1 * i128::from(n - 1);
        let (first_ns, last_ns) = (c0.div_euclid(d), last.div_euclid(d));
        let closed = n < MAX_STEPS_CLOSED
            && d < MAX_DENOM
            && (1..MAX_FLOOR_NS).contains(&first_ns)
            && (1..MAX_FLOOR_NS).contains(&last_ns);
        if !closed {
            let mut sums = (0u128, 0u128);
            for l in 0..n {
                let ns = self.decode(batch, kv + batch * l).as_ns();
                sums.0 += u128::from(ns);
                sums.1 += u128::from(l) * u128::from(ns);
            }
            return sums;
        }
        let m = u128::from(n - 1);
        if c1 >= 0 {
            let (f, g, _) = floor_sums(c1 as u128, c0 as u128, d as u128, m);
            (f, g)
        } else {
            // Read backwards from the last step, where the line is lowest: l' = n − 1 − l.
            let (f, g, _) = floor_sums((-c1) as u128, last as u128, d as u128, m);
            (f, m * f - g)
        }
    }
}

impl StepTimeModel for StepTable {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        at_least_one_ns(self.decode_ns(batch, kv_tokens))
    }

    fn prefill(&self, _seqs: u64, extend_tokens: u64) -> SimDuration {
        let (num, den) = self.prefill_ratio(extend_tokens);
        at_least_one_ns(num.div_euclid(den * 1000))
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        let kv = step.decode_kv_tokens + step.prefill_kv_tokens;
        if step.prefill_tokens == 0 {
            return self.decode(step.decode_seqs, step.decode_kv_tokens);
        }
        let i = segment(&self.decode_kv_tokens, kv);
        let line = self.decode_line(step.decode_seqs, i);
        let decode_ps = (line.alpha + line.beta * i128::from(kv)).div_euclid(line.denom);
        let (num, den) = self.prefill_ratio(step.prefill_tokens);
        let (num0, den0) = self.prefill_ratio(0);
        let added_ps = (num.div_euclid(den) - num0.div_euclid(den0)).max(0);
        // Each part rounded down to whole nanoseconds, as the linear model's terms are.
        at_least_one_ns(decode_ps.max(0).div_euclid(1000) + added_ps.div_euclid(1000))
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        self.decode_run_weighted(batch, kv_first, steps, 0, 0).0
    }

    /// Sums of floors per KV segment (step by step only beyond the bounds of
    /// `MAX_STEPS_CLOSED`, `MAX_FLOOR_NS` and `MAX_DENOM`, which a real run does not reach).
    fn closed_form_runs(&self) -> bool {
        true
    }

    /// The interpolation is continuous in the KV (two segments meet at a point of the table),
    /// so it never decreases when no segment's slope at this batch is negative.
    fn decode_non_decreasing(&self, batch: u64) -> bool {
        (0..self.decode_kv_tokens.len() - 1).all(|i| self.decode_line(batch, i).beta >= 0)
    }

    /// A binary search over the closed form (every step is at least 1 ns, so the runs grow
    /// strictly with their length): O(log steps) closed-form sums.
    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let all = self.decode_run(batch, kv_first, most);
        if all < budget {
            return (most, all);
        }
        let (mut lo, mut hi) = (0u64, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.decode_run(batch, kv_first, mid) < budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        (lo, self.decode_run(batch, kv_first, lo))
    }

    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let kv_axis = &self.decode_kv_tokens;
        let (mut total, mut weighted) = (0u128, 0u128);
        let mut j = 0u64;
        while j < steps {
            let kv = kv_first + batch * j;
            let i = segment(kv_axis, kv);
            // The steps left on this KV segment: until the KV reaches the next point.
            let end = match kv_axis.get(i + 1) {
                Some(&next) if i + 2 < kv_axis.len() && batch > 0 => {
                    (j + (next - kv).div_ceil(batch)).min(steps)
                }
                _ => steps,
            };
            let (f, g) = self.line_run(self.decode_line(batch, i), batch, kv, end - j);
            total += f;
            weighted += u128::from(w_first + w_slope * j) * f + u128::from(w_slope) * g;
            j = end;
        }
        (
            SimDuration::from_ns(total.min(u128::from(u64::MAX)) as u64),
            weighted,
        )
    }

    fn describe(&self) -> String {
        let span = |v: &[u64]| format!("{}–{}", v[0], v[v.len() - 1]);
        format!(
            "table ({}): decode at {} batch sizes ({}) × {} KV sizes ({} tokens), prefill at {} sizes ({} tokens); \
             linear between points, extended linearly from the nearest segment outside them",
            self.source,
            self.decode_batch.len(),
            span(&self.decode_batch),
            self.decode_kv_tokens.len(),
            span(&self.decode_kv_tokens),
            self.prefill_tokens.len(),
            span(&self.prefill_tokens),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::linear::{Linear, LinearStepTime};
    use proptest::prelude::*;

    /// Batch 1 and 16 × KV 0 and 100 000; prefill at 100 and 1 100 tokens.
    fn small() -> StepTable {
        StepTable {
            decode_batch: vec![1, 16],
            decode_kv_tokens: vec![0, 100_000],
            // ms: (1, 0) 10, (1, 100k) 12, (16, 0) 13, (16, 100k) 17.
            decode_ps: vec![
                10_000_000_000,
                12_000_000_000,
                13_000_000_000,
                17_000_000_000,
            ],
            prefill_tokens: vec![100, 1_100],
            // 20 ms and 70 ms: 15 ms + 50 µs per token.
            prefill_ps: vec![20_000_000_000, 70_000_000_000],
            source: "inline".into(),
        }
    }

    #[test]
    fn points_of_the_table_are_read_exactly() {
        let t = small();
        assert_eq!(t.decode(1, 0).as_ns(), 10_000_000);
        assert_eq!(t.decode(16, 100_000).as_ns(), 17_000_000);
        assert_eq!(t.prefill(3, 1_100).as_ns(), 70_000_000);
    }

    #[test]
    fn bilinear_interpolation_by_hand() {
        let t = small();
        // Batch 6 is a third of the way from 1 to 16; KV 25 000 a quarter of the way.
        // At batch 1: 10 + 0.25 × 2 = 10.5 ms; at batch 16: 13 + 0.25 × 4 = 14 ms;
        // at batch 6: 10.5 + (14 − 10.5) / 3 = 11.6666… ms → 11 666 666 ns (rounded down).
        assert_eq!(t.decode(6, 25_000).as_ns(), 11_666_666);
        // Prefill of 600 tokens: halfway, 45 ms.
        assert_eq!(t.prefill(1, 600).as_ns(), 45_000_000);
    }

    #[test]
    fn outside_the_table_the_nearest_segment_is_extended() {
        let t = small();
        // Batch 31 (one more segment width): 13 + 3 = 16 ms at KV 0, by the batch segment.
        assert_eq!(t.decode(31, 0).as_ns(), 16_000_000);
        // KV 200 000 at batch 1: 10 + 2 × 2 = 14 ms.
        assert_eq!(t.decode(1, 200_000).as_ns(), 14_000_000);
        // Prefill of 0 tokens: 20 − 5 = 15 ms (the fixed cost); of 2 100: 120 ms.
        assert_eq!(t.prefill(1, 0).as_ns(), 15_000_000);
        assert_eq!(t.prefill(1, 2_100).as_ns(), 120_000_000);
        // Far below: never under 1 ns.
        let steep = StepTable {
            prefill_ps: vec![1_000, 70_000_000_000],
            ..small()
        };
        assert_eq!(steep.prefill(1, 0).as_ns(), 1);
    }

    #[test]
    fn a_mixed_step_is_the_decode_step_plus_what_the_prompt_adds() {
        let t = small();
        let step = MixedStep {
            decode_seqs: 16,
            decode_kv_tokens: 40_000,
            prefill_seqs: 1,
            prefill_tokens: 600,
            prefill_kv_tokens: 10_000,
        };
        // Decode at batch 16 and 50 000 KV: 15 ms; the prompt adds 45 − 15 = 30 ms.
        assert_eq!(t.mixed(step).as_ns(), 45_000_000);
        let decode_only = MixedStep {
            prefill_seqs: 0,
            prefill_tokens: 0,
            prefill_kv_tokens: 0,
            ..step
        };
        assert_eq!(t.mixed(decode_only), t.decode(16, 40_000));
    }

    /// The linear model as a table: two points per axis, extended.
    fn linear_pair(kv_ps: u64) -> (Linear, StepTable) {
        let l = LinearStepTime {
            decode_base_ns: 12_000_000,
            decode_per_seq_ns: 300_000,
            decode_per_kv_token_ps: kv_ps,
            prefill_base_ns: 8_000_000,
            prefill_per_token_ps: 60_000_000,
        };
        let d = |b: u64, k: u64| {
            (l.decode_base_ns + l.decode_per_seq_ns * b) * 1000 + l.decode_per_kv_token_ps * k
        };
        let t = StepTable {
            decode_batch: vec![1, 101],
            decode_kv_tokens: vec![0, 1_000_000],
            decode_ps: vec![d(1, 0), d(1, 1_000_000), d(101, 0), d(101, 1_000_000)],
            prefill_tokens: vec![0, 1_000],
            prefill_ps: vec![
                l.prefill_base_ns * 1000,
                l.prefill_base_ns * 1000 + l.prefill_per_token_ps * 1000,
            ],
            source: "inline".into(),
        };
        (Linear::new(l), t)
    }

    proptest! {
        #[test]
        fn a_table_of_the_linear_model_is_the_linear_model(kv_ps in 0u64..200_000, batch in 1u64..500, kv in 0u64..3_000_000, tokens in 0u64..20_000, seqs in 0u64..300) {
            let (l, t) = linear_pair(kv_ps);
            prop_assert_eq!(t.decode(batch, kv), l.decode(batch, kv));
            prop_assert_eq!(t.prefill(1, tokens), l.prefill(1, tokens));
            let step = MixedStep { decode_seqs: seqs, decode_kv_tokens: kv, prefill_seqs: 1, prefill_tokens: tokens, prefill_kv_tokens: tokens };
            prop_assert_eq!(t.mixed(step), l.mixed(step));
        }

        #[test]
        fn runs_equal_the_steps_added_one_by_one(
            batch_axis in proptest::collection::btree_set(1u64..300, 2..5),
            kv_axis in proptest::collection::btree_set(0u64..400_000, 2..5),
            times in proptest::collection::vec(0u64..80_000_000_000, 16),
            batch in 0u64..400, kv0 in 0u64..500_000, steps in 0u64..300,
            w0 in 0u64..1_000_000, ws in 0u64..500,
        ) {
            let b: Vec<u64> = batch_axis.into_iter().collect();
            let k: Vec<u64> = kv_axis.into_iter().collect();
            let t = StepTable {
                decode_ps: times[..b.len() * k.len()].to_vec(),
                decode_batch: b,
                decode_kv_tokens: k,
                ..small()
            };
            let mut total = SimDuration::ZERO;
            let mut weighted = 0u128;
            for i in 0..steps {
                let d = t.decode(batch, kv0 + batch * i);
                weighted += u128::from(w0 + ws * i) * u128::from(d.as_ns());
                total = total + d;
            }
            prop_assert_eq!(t.decode_run_weighted(batch, kv0, steps, w0, ws), (total, weighted));
            prop_assert_eq!(t.decode_run(batch, kv0, steps), total);
            // The longest prefix below a budget: as the one pass every model may use.
            let budget = SimDuration::from_ns(w0 * 1000);
            let (mut n, mut sum) = (0u64, SimDuration::ZERO);
            while n < steps {
                let next = sum + t.decode(batch, kv0 + batch * n);
                if next >= budget {
                    break;
                }
                sum = next;
                n += 1;
            }
            prop_assert_eq!(t.decode_run_within(batch, kv0, steps, budget), (n, sum));
        }
    }
}
