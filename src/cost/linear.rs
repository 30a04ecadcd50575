//! The linear step-time model of `scenario.md`:
//!
//! * decode step = `decode_base + decode_per_seq × B + decode_per_kv_token × KV`
//! * prefill batch = `prefill_base + prefill_per_token × tokens`
//!
//! Fixed and per-request terms are integer nanoseconds; per-token terms are integer picoseconds,
//! and the per-token product is rounded down to whole nanoseconds. Because everything is an
//! integer, the time of a run of decode steps has an exact closed form
//! ([`StepTimeModel::decode_run`]): an arithmetic series plus a sum of floors.

use super::StepTimeModel;
use crate::scenario::LinearStepTime;
use crate::time::SimDuration;

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

fn at_least_one(ns: u128) -> SimDuration {
    SimDuration::from_ns(ns.clamp(1, u128::from(u64::MAX)) as u64)
}

impl StepTimeModel for Linear {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.decode_base_ns)
            + u128::from(p.decode_per_seq_ns) * u128::from(batch)
            + u128::from(p.decode_per_kv_token_ps) * u128::from(kv_tokens) / 1000;
        at_least_one(ns)
    }

    fn prefill(&self, _seqs: u64, extend_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.prefill_base_ns)
            + u128::from(p.prefill_per_token_ps) * u128::from(extend_tokens) / 1000;
        at_least_one(ns)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        if steps == 0 {
            return SimDuration::ZERO;
        }
        let p = &self.p;
        let fixed =
            u128::from(p.decode_base_ns) + u128::from(p.decode_per_seq_ns) * u128::from(batch);
        if fixed == 0 {
            // Steps could hit the 1 ns floor individually; fall back to the exact sum.
            let mut total = SimDuration::ZERO;
            for i in 0..steps {
                total = total + self.decode(batch, kv_first + batch * i);
            }
            return total;
        }
        let n = u128::from(steps);
        let a = u128::from(p.decode_per_kv_token_ps) * u128::from(batch);
        let b = u128::from(p.decode_per_kv_token_ps) * u128::from(kv_first);
        let ns = fixed * n + floor_sum(n, 1000, a, b);
        SimDuration::from_ns(ns.min(u128::from(u64::MAX)) as u64)
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

/// `Σ_{i=0}^{n-1} floor((a·i + b) / m)`, exactly, in O(log m) steps (the classic Euclid-like
/// reduction).
pub fn floor_sum(mut n: u128, mut m: u128, mut a: u128, mut b: u128) -> u128 {
    let mut ans = 0u128;
    loop {
        if n == 0 {
            return ans;
        }
        if a >= m {
            ans += n * (n - 1) / 2 * (a / m);
            a %= m;
        }
        if b >= m {
            ans += n * (b / m);
            b %= m;
        }
        let y_max = a * n + b;
        if y_max < m {
            return ans;
        }
        n = y_max / m;
        b = y_max % m;
        std::mem::swap(&mut m, &mut a);
    }
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
    fn one_decode_step_by_hand() {
        // 35 ms + 50 × 0.3 ms + 100 000 tokens × 0.15 ns = 35 + 15 + 0.015 ms.
        assert_eq!(model(150).decode(50, 100_000).as_ns(), 50_015_000);
        // Prefill of 300 tokens: 10 ms + 300 × 120 µs = 46 ms.
        assert_eq!(model(0).prefill(1, 300).as_ns(), 46_000_000);
    }

    proptest! {
        #[test]
        fn floor_sum_matches_the_loop(n in 0u128..300, m in 1u128..2000, a in 0u128..5000, b in 0u128..5000) {
            let direct: u128 = (0..n).map(|i| (a * i + b) / m).sum();
            prop_assert_eq!(floor_sum(n, m, a, b), direct);
        }

        #[test]
        fn decode_run_equals_the_sum_of_steps(kv_ps in 0u64..5000, batch in 1u64..500, kv0 in 0u64..1_000_000, steps in 0u64..400) {
            let m = model(kv_ps);
            let direct = (0..steps).fold(SimDuration::ZERO, |acc, i| acc + m.decode(batch, kv0 + batch * i));
            prop_assert_eq!(m.decode_run(batch, kv0, steps), direct);
        }
    }
}
