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

use super::floors::{
    floor_sum, floor_sum_small, floor_sums, floor_sums_small, power_sums, SMALL_TERMS,
};
use super::{one_by_one, FloorLine, MixedStep, StepTimeModel};
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
    /// The KV coefficient `c` ps split as `1000·kv_whole + kv_part` (`kv_part < 1000`), so that
    /// `⌊c·x/1000⌋ = kv_whole·x + ⌊kv_part·x/1000⌋` ns in 64 bits.
    kv_whole: u64,
    kv_part: u64,
}

impl Linear {
    /// A model with these (already quantised) coefficients.
    pub fn new(p: LinearStepTime) -> Self {
        Linear {
            kv_whole: p.decode_per_kv_token_ps / 1000,
            kv_part: p.decode_per_kv_token_ps % 1000,
            p,
        }
    }

    /// A decode step's fixed and per-request terms, `base + per_seq·batch` ns, if it fits in 64
    /// bits.
    fn fixed(&self, batch: u64) -> Option<u64> {
        (self.p.decode_per_seq_ns.checked_mul(batch)?).checked_add(self.p.decode_base_ns)
    }

    /// [`StepTimeModel::mixed`] in 128 bits (every term fits; the sum is clamped to
    /// `[1, u64::MAX]` ns).
    fn mixed_wide(&self, step: MixedStep) -> SimDuration {
        let p = &self.p;
        let kv = u128::from(step.decode_kv_tokens) + u128::from(step.prefill_kv_tokens);
        let ns = u128::from(p.decode_base_ns)
            + u128::from(p.decode_per_seq_ns) * u128::from(step.decode_seqs)
            + ps_times(p.prefill_per_token_ps, u128::from(step.prefill_tokens))
            + ps_times(p.decode_per_kv_token_ps, kv);
        at_least_one(ns)
    }

    /// `c·x` ps as whole nanoseconds and the picoseconds left over (below 1000), if they fit in
    /// 64 bits.
    fn split(&self, x: u64) -> Option<(u64, u64)> {
        let part = self.kv_part.checked_mul(x)?;
        let whole = (self.kv_whole.checked_mul(x)?).checked_add(part / 1000)?;
        Some((whole, part % 1000))
    }

    /// The run of `batch` from `kv_first` in its 64-bit form, when its terms fit and no step can
    /// fall to the 1 ns floor (a fixed cost).
    fn run(&self, batch: u64, kv_first: u64) -> Option<Run> {
        let fixed = self.fixed(batch).filter(|&f| f > 0)?;
        let (whole, rest) = self.split(kv_first)?;
        let (slope, part) = self.split(batch)?;
        Some(Run {
            base: fixed.checked_add(whole)?,
            slope,
            rest,
            part,
        })
    }

    /// [`StepTimeModel::decode_run`] in 128 bits (or step by step when a step may fall to the
    /// 1 ns floor): what [`Run::total`] computes when its terms fit in 64.
    pub(super) fn decode_run_wide(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        let p = &self.p;
        let fixed =
            u128::from(p.decode_base_ns) + u128::from(p.decode_per_seq_ns) * u128::from(batch);
        if steps == 0 || fixed == 0 {
            return self
                .decode_run_weighted_wide(batch, kv_first, steps, 0, 0)
                .0;
        }
        let n = u128::from(steps);
        let a = u128::from(p.decode_per_kv_token_ps) * u128::from(batch);
        let b = u128::from(p.decode_per_kv_token_ps) * u128::from(kv_first);
        let total = fixed * n + floor_sum(a, b, 1000, n - 1);
        saturated(total)
    }

    /// [`StepTimeModel::decode_run_weighted`] in 128 bits: what [`Run::weighted`] computes when
    /// its terms fit in 64.
    pub(super) fn decode_run_weighted_wide(
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
            return one_by_one::weighted(steps, w_first, w_slope, |i| {
                self.decode(batch, kv_first + batch * i)
            });
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
        (saturated(total), weighted)
    }

    /// [`StepTimeModel::decode`] in 128 bits.
    pub(super) fn decode_wide(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.decode_base_ns)
            + u128::from(p.decode_per_seq_ns) * u128::from(batch)
            + ps_times(p.decode_per_kv_token_ps, u128::from(kv_tokens));
        at_least_one(ns)
    }
}

/// A run of decode steps of the linear model in 64-bit form: step `j` (from 0) lasts
/// `base + slope·j + ⌊(rest + part·j)/1000⌋` ns with `rest, part < 1000` — the model's
/// `fixed + ⌊c·(kv_first + batch·j)/1000⌋` with `c·kv_first` and `c·batch` ps split into whole
/// nanoseconds and the picoseconds left over ([`Linear::split`]). Its sums need no 128-bit
/// division: with a KV coefficient in whole nanoseconds (`part = 0`) the floors vanish, and
/// otherwise they are [`floor_sums_small`] of a line below 1000.
#[derive(Clone, Copy, Debug)]
struct Run {
    base: u64,
    slope: u64,
    rest: u64,
    part: u64,
}

/// Runs of this many steps or more are priced in 128 bits (`n(n − 1)/2` must fit in 64).
const RUN_STEPS: u64 = 1 << 32;

impl Run {
    /// `(Σ_{j<n} ⌊(rest + part·j)/1000⌋, Σ j·⌊…⌋)` for `1 ≤ n`; the second only if `weighted`.
    /// `None` beyond [`floor_sums_small`]'s bound.
    fn floors(&self, n: u64, weighted: bool) -> Option<(u64, u64)> {
        if self.part == 0 {
            return Some((0, 0)); // ⌊rest/1000⌋ = 0
        }
        if n > SMALL_TERMS {
            return None;
        }
        Some(match weighted {
            false => (floor_sum_small(self.part, self.rest, 1000, n - 1), 0),
            true => {
                let (f, g, _) = floor_sums_small(self.part, self.rest, 1000, n - 1);
                (f, g)
            }
        })
    }

    /// The first `n` steps' total, ns (not saturated). `None` when it must be priced in 128
    /// bits.
    fn total(&self, n: u64) -> Option<u128> {
        if n == 0 || n >= RUN_STEPS {
            return (n == 0).then_some(0);
        }
        let (f, _) = self.floors(n, false)?;
        let t1 = u128::from(n) * u128::from(n - 1) / 2;
        // n·base < 2⁹⁶, slope·t1 < 2¹²⁷: no overflow.
        Some(u128::from(n) * u128::from(self.base) + u128::from(self.slope) * t1 + u128::from(f))
    }

    /// The first `n ≥ 1` steps' total and `Σ_j (w_first + w_slope·j) × d_j`. `None` when they
    /// must be priced in 128 bits (or would overflow them).
    fn weighted(&self, n: u64, w_first: u64, w_slope: u64) -> Option<(u128, u128)> {
        if n >= RUN_STEPS {
            return None;
        }
        let (f, g) = self.floors(n, true)?;
        let (t1, t2) = power_sums(n);
        let (n, w0, ws) = (u128::from(n), u128::from(w_first), u128::from(w_slope));
        let (base, slope) = (u128::from(self.base), u128::from(self.slope));
        let total = n * base + slope * t1 + u128::from(f);
        // Σ (w0 + ws·j)(base + slope·j + e_j)
        //   = base·(n·w0 + ws·Σj) + slope·(w0·Σj + ws·Σj²) + w0·Σe + ws·Σ j·e.
        let w = n * w0 + ws * t1; // < 2⁹⁶ + 2¹²⁷
        let v = (w0 * t1).checked_add(ws.checked_mul(t2)?)?;
        let weighted = (base.checked_mul(w)?)
            .checked_add(slope.checked_mul(v)?)?
            .checked_add(w0 * u128::from(f))?
            .checked_add(ws * u128::from(g))?;
        Some((total, weighted))
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

fn saturated(ns: u128) -> SimDuration {
    SimDuration::from_ns(ns.min(u128::from(u64::MAX)) as u64)
}

impl StepTimeModel for Linear {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        // In 64 bits when it fits (the usual case), else in 128: the same value.
        let kv_ns = self.p.decode_per_kv_token_ps.checked_mul(kv_tokens);
        match (self.fixed(batch).zip(kv_ns)).and_then(|(f, k)| f.checked_add(k / 1000)) {
            Some(ns) => SimDuration::from_ns(ns.max(1)),
            None => self.decode_wide(batch, kv_tokens),
        }
    }

    /// Closed forms, unless a step can fall to the 1 ns floor (no fixed cost at all).
    fn closed_form_runs(&self) -> bool {
        self.p.decode_base_ns > 0 || self.p.decode_per_seq_ns > 0
    }

    /// Every coefficient is non-negative.
    fn decode_non_decreasing(&self, _batch: u64) -> bool {
        true
    }

    fn prefill(&self, _seqs: u64, extend_tokens: u64) -> SimDuration {
        let p = &self.p;
        let ns = u128::from(p.prefill_base_ns)
            + u128::from(p.prefill_per_token_ps) * u128::from(extend_tokens) / 1000;
        at_least_one(ns)
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        // In 64 bits when every term and sum fits (the usual case), else in 128: the same value.
        let narrow = || {
            let kv = step.decode_kv_tokens.checked_add(step.prefill_kv_tokens)?;
            let kv_ns = self.p.decode_per_kv_token_ps.checked_mul(kv)? / 1000;
            let prefill_ns = self
                .p
                .prefill_per_token_ps
                .checked_mul(step.prefill_tokens)?
                / 1000;
            (self.fixed(step.decode_seqs)?.checked_add(prefill_ns))?.checked_add(kv_ns)
        };
        match narrow() {
            Some(ns) => SimDuration::from_ns(ns.max(1)),
            None => self.mixed_wide(step),
        }
    }

    /// An arithmetic series plus a sum of floors (`Run::total`, or in 128 bits).
    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        match self.run(batch, kv_first).and_then(|r| r.total(steps)) {
            Some(total) => saturated(total),
            None => self.decode_run_wide(batch, kv_first, steps),
        }
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
        let run = self.run(batch, kv_first);
        let price = |n: u64| match run.and_then(|r| r.total(n)) {
            Some(total) => saturated(total),
            None => self.decode_run_wide(batch, kv_first, n),
        };
        let all = price(most);
        if all < budget || most == 0 {
            return (most, all);
        }
        // `lo` steps fit (their total `at_lo`); more than `hi` do not.
        let (mut lo, mut at_lo, mut hi) = (0u64, SimDuration::ZERO, most - 1);
        let probe = |n: u64, lo: &mut u64, at_lo: &mut SimDuration, hi: &mut u64| {
            let t = price(n);
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

    /// `Run::weighted`, or in 128 bits.
    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let narrow = match steps {
            0 => None,
            _ => self.run(batch, kv_first),
        };
        match narrow.and_then(|r| r.weighted(steps, w_first, w_slope)) {
            Some((total, weighted)) => (saturated(total), weighted),
            None => self.decode_run_weighted_wide(batch, kv_first, steps, w_first, w_slope),
        }
    }

    /// The run (`Run`) as a [`FloorLine`], for runs of up to 2²⁰ steps that fit it.
    fn decode_floor_line(&self, batch: u64, kv_first: u64, steps: u64) -> Option<FloorLine> {
        let r = self.run(batch, kv_first)?;
        FloorLine::new(r.base.into(), r.slope.into(), r.rest, r.part, 1000, steps)
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

#[cfg(test)]
mod tests;
