//! The linear step-time model of `scenario.md`:
//!
//! * decode step = `decode_base + decode_per_seq × B + decode_per_kv_token × KV`
//! * prefill batch = `prefill_base + prefill_per_token × tokens`
//! * mixed step = `decode_base + decode_per_seq × decode rows + prefill_per_token × prompt tokens
//!   + decode_per_kv_token × KV` (KV = every scheduled request's context after the step), the
//!   form vLLM's steps take (issue 12; the vLLM oracle's `a + b·decode + c·prefill + d·KV`)
//!
//! Fixed and per-request terms are integer nanoseconds; per-token terms are integer picoseconds,
//! and the per-token product is rounded down to whole nanoseconds. Because everything is an
//! integer, the time of a run of decode steps has an exact closed form
//! ([`StepTimeModel::decode_run`]): an arithmetic series plus a sum of floors.

use super::{MixedStep, StepTimeModel};
use crate::settings::{keys, Bad, Values, When};
use crate::time::SimDuration;

const LINEAR: When = When::If("engine.step_time.model", &["linear"]);

keys! {
/// The linear model's coefficients in `[engine.step_time]`.
KEYS:
"engine.step_time.decode_base_ms" [Number(Within(0.0, 1e6)), Num(35.0), LINEAR, "ms"]
    "fixed cost of a decode step", e.g. "12.0";
"engine.step_time.decode_per_seq_ms" [Number(Within(0.0, 1e6)), Num(0.3), LINEAR, "ms"]
    "cost per running request in a decode step", e.g. "0.8";
"engine.step_time.decode_per_kv_token_ns" [Number(Within(0.0, 1e9)), Num(0.0), LINEAR, "ns"]
    "cost per KV token attended in a decode step", e.g. "60.0";
"engine.step_time.prefill_base_ms" [Number(Within(0.0, 1e6)), Num(10.0), LINEAR, "ms"]
    "fixed cost of a prefill batch", e.g. "15.0";
"engine.step_time.prefill_per_token_us" [Number(Within(0.0, 1e9)), Num(120.0), LINEAR, "µs"]
    "cost per prefilled token", e.g. "60.0";
}

/// The coefficient keys in `[engine.step_time]`, after the prefix.
pub const COEFFICIENTS: [&str; 5] = [
    "decode_base_ms",
    "decode_per_seq_ms",
    "decode_per_kv_token_ns",
    "prefill_base_ms",
    "prefill_per_token_us",
];

/// The linear step-time model, quantised to integers so that simulated time stays exact:
/// fixed and per-request terms in nanoseconds, per-token terms in picoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearStepTime {
    /// Fixed cost of a decode step.
    pub decode_base_ns: u64,
    /// Cost per running request in a decode step.
    pub decode_per_seq_ns: u64,
    /// Cost per KV token attended in a decode step, in picoseconds.
    pub decode_per_kv_token_ps: u64,
    /// Fixed cost of a prefill batch.
    pub prefill_base_ns: u64,
    /// Cost per prefilled (extend) token, in picoseconds.
    pub prefill_per_token_ps: u64,
}

impl LinearStepTime {
    /// Read the coefficients, quantised to whole nanoseconds and picoseconds.
    pub fn read(v: &dyn Values) -> Result<Self, Bad> {
        let get = |key: &str| v.get::<f64>(&format!("engine.step_time.{key}"));
        let scaled = |x: f64, scale: f64| (x * scale).round() as u64;
        Ok(LinearStepTime {
            decode_base_ns: scaled(get("decode_base_ms")?, 1e6),
            decode_per_seq_ns: scaled(get("decode_per_seq_ms")?, 1e6),
            decode_per_kv_token_ps: scaled(get("decode_per_kv_token_ns")?, 1e3),
            prefill_base_ns: scaled(get("prefill_base_ms")?, 1e6),
            prefill_per_token_ps: scaled(get("prefill_per_token_us")?, 1e6),
        })
    }
}

/// The linear model.
#[derive(Clone, Debug)]
pub struct Linear {
    p: LinearStepTime,
}

impl Linear {
    /// A model with these (already quantised) coefficients.
    pub fn new(p: LinearStepTime) -> Self {
        Linear { p }
    }
}

/// `⌊ps × n / 1000⌋` ns, in 64 bits when the product fits (the usual case: no 128-bit division
/// per step), else in 128.
fn ps_times(ps: u64, n: u128) -> u128 {
    match u64::try_from(n).ok().and_then(|n| ps.checked_mul(n)) {
        Some(x) => u128::from(x / 1000),
        None => u128::from(ps) * n / 1000,
    }
}

fn at_least_one(ns: u128) -> SimDuration {
    SimDuration::from_ns(ns.clamp(1, u128::from(u64::MAX)) as u64)
}

impl StepTimeModel for Linear {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.decode_base_ns)
            + u128::from(p.decode_per_seq_ns) * u128::from(batch)
            + ps_times(p.decode_per_kv_token_ps, u128::from(kv_tokens));
        at_least_one(ns)
    }

    /// Closed forms, unless a step can fall to the 1 ns floor (no fixed cost at all).
    fn closed_form_runs(&self) -> bool {
        self.p.decode_base_ns > 0 || self.p.decode_per_seq_ns > 0
    }

    /// Every coefficient is non-negative.
    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        true
    }

    /// In closed form: `fixed + ⌊c·(kv_first + batch·j)/1000⌋ ≤ limit` while
    /// `c·(kv_first + batch·j) < 1000·(limit − fixed + 1)`.
    fn decode_steps_at_most(&self, batch: u64, kv_first: u64, steps: u64, limit_ns: u64) -> u64 {
        let p = &self.p;
        let fixed =
            u128::from(p.decode_base_ns) + u128::from(p.decode_per_seq_ns) * u128::from(batch);
        let limit = u128::from(limit_ns);
        if fixed == 0 {
            // Steps may hit the 1 ns floor: search.
            return super::leading(steps, |i| {
                self.decode(batch, kv_first + batch * i).as_ns() <= limit_ns
            });
        }
        if limit < fixed {
            return 0;
        }
        let c = u128::from(p.decode_per_kv_token_ps);
        let room = 1000 * (limit - fixed + 1);
        let first = c * u128::from(kv_first);
        if first >= room {
            return 0;
        }
        let slope = c * u128::from(batch);
        if slope == 0 {
            return steps;
        }
        // The largest j with first + slope·j < room, plus one (in 64 bits when it fits: no
        // 128-bit division).
        let n = match (u64::try_from(room - 1 - first), u64::try_from(slope)) {
            (Ok(x), Ok(y)) => u128::from(x / y),
            _ => (room - 1 - first) / slope,
        } + 1;
        n.min(u128::from(steps)) as u64
    }

    fn prefill(&self, _seqs: u64, extend_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.prefill_base_ns)
            + u128::from(p.prefill_per_token_ps) * u128::from(extend_tokens) / 1000;
        at_least_one(ns)
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        let p = &self.p;
        let kv = u128::from(step.decode_kv_tokens) + u128::from(step.prefill_kv_tokens);
        let ns = u128::from(p.decode_base_ns)
            + u128::from(p.decode_per_seq_ns) * u128::from(step.decode_seqs)
            + ps_times(p.prefill_per_token_ps, u128::from(step.prefill_tokens))
            + ps_times(p.decode_per_kv_token_ps, kv);
        at_least_one(ns)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let p = &self.p;
        let fixed =
            u128::from(p.decode_base_ns) + u128::from(p.decode_per_seq_ns) * u128::from(batch);
        if steps == 0 || fixed == 0 {
            return self.decode_run_weighted(batch, kv_first, steps, 0, 0).0;
        }
        let n = u128::from(steps);
        let a = u128::from(p.decode_per_kv_token_ps) * u128::from(batch);
        let b = u128::from(p.decode_per_kv_token_ps) * u128::from(kv_first);
        let total = fixed * n + floor_sum(a, b, 1000, n - 1);
        SimDuration::from_ns(total.min(u128::from(u64::MAX)) as u64)
    }

    /// A search over the closed form, which starts where the run's real-valued time (within
    /// `n` ns of the floors' sum) meets the budget: the answer is there or a step away, found
    /// with two or three closed forms; a binary search between what those probes proved
    /// otherwise. O(log steps) closed forms at worst.
    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let all = self.decode_run(batch, kv_first, most);
        if all < budget || most == 0 {
            return (most, all);
        }
        // `lo` steps fit (their total `at_lo`); more than `hi` do not.
        let (mut lo, mut at_lo, mut hi) = (0u64, SimDuration::ZERO, most - 1);
        let probe = |n: u64, lo: &mut u64, at_lo: &mut SimDuration, hi: &mut u64| {
            let t = self.decode_run(batch, kv_first, n);
            match t < budget {
                true => (*lo, *at_lo) = (n, t),
                false => *hi = n - 1,
            }
        };
        // d_j ≈ first + slope·j ns (the floor taking half a ns on average): Σ_{j<n} meets the
        // budget at the root of slope/2·n² + (first − slope/2)·n − budget.
        let p = &self.p;
        let kv_ps = p.decode_per_kv_token_ps as f64;
        let first = p.decode_base_ns as f64
            + p.decode_per_seq_ns as f64 * batch as f64
            + kv_ps * kv_first as f64 / 1000.0
            - 0.5;
        let half = kv_ps * batch as f64 / 2000.0;
        let linear = first - half;
        let b = budget.as_ns() as f64;
        let root = match half > 0.0 {
            true => (-linear + (linear * linear + 4.0 * half * b).sqrt()) / (2.0 * half),
            false => b / first,
        };
        let guess = match root.is_finite() && root >= 1.0 {
            true => (root as u64).min(hi),
            false => 0,
        };
        if guess > lo {
            probe(guess, &mut lo, &mut at_lo, &mut hi);
            match lo == guess {
                true if guess < hi => probe(guess + 1, &mut lo, &mut at_lo, &mut hi),
                false if guess > lo + 1 => probe(guess - 1, &mut lo, &mut at_lo, &mut hi),
                _ => {}
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            probe(mid, &mut lo, &mut at_lo, &mut hi);
        }
        (lo, at_lo)
    }

    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let p = &self.p;
        let fixed =
            u128::from(p.decode_base_ns) + u128::from(p.decode_per_seq_ns) * u128::from(batch);
        if steps == 0 || fixed == 0 {
            // No steps, or steps that may hit the 1 ns floor: add them one by one.
            let mut total = SimDuration::ZERO;
            let mut weighted = 0u128;
            for i in 0..steps {
                let d = self.decode(batch, kv_first + batch * i);
                weighted += u128::from(w_first + w_slope * i) * u128::from(d.as_ns());
                total = total + d;
            }
            return (total, weighted);
        }
        // d_j = fixed + ⌊(a·j + b) / 1000⌋ with a = c·batch, b = c·kv_first.
        let n = u128::from(steps);
        let a = u128::from(p.decode_per_kv_token_ps) * u128::from(batch);
        let b = u128::from(p.decode_per_kv_token_ps) * u128::from(kv_first);
        let (f, g, _) = floor_sums(a, b, 1000, n - 1);
        let (w0, ws) = (u128::from(w_first), u128::from(w_slope));
        let total = fixed * n + f;
        // Σ (w0 + ws·j)(fixed + ⌊…⌋) = fixed·(n·w0 + ws·n(n−1)/2) + w0·Σ⌊…⌋ + ws·Σ j⌊…⌋.
        let weighted = fixed * (n * w0 + ws * n * (n - 1) / 2) + w0 * f + ws * g;
        (
            SimDuration::from_ns(total.min(u128::from(u64::MAX)) as u64),
            weighted,
        )
    }

    fn describe(&self) -> String {
        let p = &self.p;
        format!(
            "linear: decode {:.3} ms + {:.4} ms/seq + {:.4} ns/KV token; prefill {:.3} ms + {:.3} µs/token",
            p.decode_base_ns as f64 / 1e6,
            p.decode_per_seq_ns as f64 / 1e6,
            p.decode_per_kv_token_ps as f64 / 1e3,
            p.prefill_base_ns as f64 / 1e6,
            p.prefill_per_token_ps as f64 / 1e6
        )
    }
}

/// `Σ_{i=0}^{n} ⌊(a·i + b)/c⌋` alone (the first component of [`floor_sums`], cheaper).
pub fn floor_sum(a: u128, b: u128, c: u128, n: u128) -> u128 {
    let mut ans = 0u128;
    let (mut a, mut b) = (a, b);
    if a >= c {
        ans += n * (n + 1) / 2 * (a / c);
        a %= c;
    }
    if b >= c {
        ans += (n + 1) * (b / c);
        b %= c;
    }
    if a == 0 {
        return ans;
    }
    let m = (a * n + b) / c;
    if m == 0 {
        return ans;
    }
    // Counting lattice points the other way: Σ = n·m − Σ_{j=0}^{m−1} ⌊(c·j + c − b − 1)/a⌋.
    ans + n * m - floor_sum(c, c - b - 1, a, m - 1)
}

/// `(Σ_{i=0}^{n} ⌊(a·i + b)/c⌋, Σ i·⌊…⌋, Σ ⌊…⌋²)`, exactly, by the Euclid-like reduction
/// (each level swaps the roles of `a` and `c`, so the depth is O(log c)).
pub fn floor_sums(a: u128, b: u128, c: u128, n: u128) -> (u128, u128, u128) {
    let s1 = n * (n + 1) / 2;
    if a == 0 {
        let q = b / c;
        return ((n + 1) * q, q * s1, (n + 1) * q * q);
    }
    if a >= c || b >= c {
        let (qa, qb) = (a / c, b / c);
        let (f, g, h) = floor_sums(a % c, b % c, c, n);
        let s2 = n * (n + 1) * (2 * n + 1) / 6;
        return (
            f + qa * s1 + qb * (n + 1),
            g + qa * s2 + qb * s1,
            h + qa * qa * s2 + qb * qb * (n + 1) + 2 * qa * qb * s1 + 2 * qb * f + 2 * qa * g,
        );
    }
    let m = (a * n + b) / c;
    if m == 0 {
        return (0, 0, 0);
    }
    let (f, g, h) = floor_sums(c, c - b - 1, a, m - 1);
    let f2 = n * m - f;
    let g2 = (m * n * (n + 1) - h - f) / 2;
    let h2 = n * m * (m + 1) - 2 * g - 2 * f - f2;
    (f2, g2, h2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn model(kv_ps: u64) -> Linear {
        Linear::new(LinearStepTime {
            decode_base_ns: 35_000_000,
            decode_per_seq_ns: 300_000,
            decode_per_kv_token_ps: kv_ps,
            prefill_base_ns: 10_000_000,
            prefill_per_token_ps: 120_000_000,
        })
    }

    #[test]
    fn a_mixed_step_by_hand() {
        use crate::cost::MixedStep;
        // 35 ms + 10 × 0.3 ms + 500 prompt tokens × 120 µs + (20 000 + 600) KV × 0.15 ns.
        let step = MixedStep {
            decode_seqs: 10,
            decode_kv_tokens: 20_000,
            prefill_seqs: 1,
            prefill_tokens: 500,
            prefill_kv_tokens: 600,
        };
        assert_eq!(
            model(150).mixed(step).as_ns(),
            35_000_000 + 3_000_000 + 60_000_000 + 3_090
        );
        // Without prompt tokens it is a decode step.
        let decode = MixedStep {
            decode_seqs: 50,
            decode_kv_tokens: 100_000,
            ..MixedStep::default()
        };
        assert_eq!(model(150).mixed(decode), model(150).decode(50, 100_000));
    }

    #[test]
    fn one_decode_step_by_hand() {
        // 35 ms + 50 × 0.3 ms + 100 000 tokens × 0.15 ns = 35 + 15 + 0.015 ms.
        assert_eq!(model(150).decode(50, 100_000).as_ns(), 50_015_000);
        // Prefill of 300 tokens: 10 ms + 300 × 120 µs = 46 ms.
        assert_eq!(model(0).prefill(1, 300).as_ns(), 46_000_000);
    }

    proptest! {
        #[test]
        fn floor_sums_match_the_loops(a in 0u128..3000, b in 0u128..3000, c in 1u128..2000, n in 0u128..200) {
            let fl = |i: u128| (a * i + b) / c;
            let f: u128 = (0..=n).map(fl).sum();
            let g: u128 = (0..=n).map(|i| i * fl(i)).sum();
            let h: u128 = (0..=n).map(|i| fl(i) * fl(i)).sum();
            prop_assert_eq!(floor_sums(a, b, c, n), (f, g, h));
        }

        #[test]
        fn floor_sum_is_the_first_floor_sum(a in 0u128..3000, b in 0u128..3000, c in 1u128..2000, n in 0u128..200) {
            prop_assert_eq!(floor_sum(a, b, c, n), floor_sums(a, b, c, n).0);
        }

        #[test]
        fn the_weighted_run_equals_the_loop(kv_ps in 0u64..200_000, batch in 1u64..2000, kv0 in 0u64..10_000_000, steps in 0u64..300, w0 in 0u64..10_000_000, ws in 0u64..2000) {
            let m = model(kv_ps);
            let mut total = SimDuration::ZERO;
            let mut weighted = 0u128;
            for i in 0..steps {
                let d = m.decode(batch, kv0 + batch * i);
                weighted += u128::from(w0 + ws * i) * u128::from(d.as_ns());
                total = total + d;
            }
            prop_assert_eq!(m.decode_run_weighted(batch, kv0, steps, w0, ws), (total, weighted));
        }

        #[test]
        fn the_steps_at_most_a_limit_are_counted_exactly(kv_ps in 0u64..200_000, base in 0u64..3, batch in 1u64..500, kv0 in 0u64..1_000_000, steps in 0u64..300, slack in 0u64..2_000_000) {
            let mut m = model(kv_ps);
            if base < 2 {
                m.p.decode_base_ns = base;
                m.p.decode_per_seq_ns = 0;
            }
            // A limit near the run's durations.
            let limit = m.decode(batch, kv0).as_ns().saturating_sub(1_000_000) + slack;
            let counted = (0..steps).take_while(|&i| m.decode(batch, kv0 + batch * i).as_ns() <= limit).count() as u64;
            prop_assert_eq!(m.decode_steps_at_most(batch, kv0, steps, limit), counted);
        }

        #[test]
        fn decode_run_equals_the_sum_of_steps(kv_ps in 0u64..5000, batch in 1u64..500, kv0 in 0u64..1_000_000, steps in 0u64..400) {
            let m = model(kv_ps);
            let direct = (0..steps).fold(SimDuration::ZERO, |acc, i| acc + m.decode(batch, kv0 + batch * i));
            prop_assert_eq!(m.decode_run(batch, kv0, steps), direct);
        }

        #[test]
        fn the_searched_prefix_is_the_longest_below_the_budget(kv_ps in 0u64..5000, batch in 1u64..500, kv0 in 0u64..1_000_000, most in 0u64..400, budget_ms in 0u64..20_000) {
            let m = model(kv_ps);
            let budget = SimDuration::from_ns(budget_ms * 1_000_000);
            // The one pass every model may use, step by step.
            let (mut steps, mut total) = (0u64, SimDuration::ZERO);
            while steps < most {
                let next = total + m.decode(batch, kv0 + batch * steps);
                if next >= budget {
                    break;
                }
                total = next;
                steps += 1;
            }
            prop_assert_eq!(m.decode_run_within(batch, kv0, most, budget), (steps, total));
        }
    }
}
