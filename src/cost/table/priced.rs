//! The table model made ready to price steps and runs: what [`StepTable`] computes, with each
//! cell's interpolation precomputed and split by its divisor so that a step or a run costs
//! 64-bit divisions rather than 128-bit ones (a library call each), and runs are searched in
//! closed form rather than by pricing their steps.
//!
//! On cell `(j, i)` (batch segment `j`, KV segment `i`) the table's bilinear interpolation is
//! `(α(b) + β(b)·K) / D` ps with `D = (b₁ − b₀)(k₁ − k₀)`; `α(b) = a₀ + a₁·b` and
//! `β(b) = c₀ + c₁·b` are [`StepTable::decode_line`]'s `alpha` and `beta` expanded in `b` — the
//! same integers. A step lasts `⌊(α + β·K) / (1000·D)⌋` ns. With each coefficient split as
//! `x = q·den + r` (`den = 1000·D`, `0 ≤ r < den`), the integer parts are summed exactly and only
//! the remainders, below `den`, are divided: in 64 bits whenever they fit (checked, with the
//! 128-bit path as the fallback), and a run's floors are [`floor_sums_small`](crate::cost::floors::floor_sums_small) of a line below
//! `den`. Everything is the same integer the table computes, so every step, total and integral
//! is bit for bit the table's.

use super::{at_least_one_ns, segment, StepTable};
use crate::cost::{last_true, FloorLine, MixedStep, StepTimeModel};
use crate::time::SimDuration;

/// Batches below this are priced in split form (their products stay far inside i128).
const SPLIT_BATCH: u64 = 1 << 32;
/// KV sizes below this are priced in split form.
const SPLIT_KV: u64 = 1 << 40;
/// Cells whose divisor is below this are split.
const SPLIT_DEN: i128 = 1 << 62;

/// A [`StepTable`] with its cells precomputed: the model a run uses (the same values as the
/// table's own, faster).
#[derive(Clone, Debug)]
pub struct PricedTable {
    table: StepTable,
    /// One per (batch segment, KV segment), by batch segment.
    cells: Vec<Cell>,
    /// KV segments per batch segment.
    kv_segments: usize,
}

/// One cell of the grid: its interpolation as a polynomial in (batch, KV).
#[derive(Clone, Copy, Debug)]
struct Cell {
    /// `α(b) = a[0] + a[1]·b`, `β(b) = a[2] + a[3]·b`: the numerator is `α + β·K`; over
    /// `den = 1000 × (b₁ − b₀)(k₁ − k₀)` it is the step in ns.
    a: [i128; 4],
    /// `a` split by `den`, when `den` is below [`SPLIT_DEN`].
    split: Option<Split>,
}

/// A cell's coefficients as `q·den + r`, `0 ≤ r < den`.
#[derive(Clone, Copy, Debug)]
struct Split {
    q: [i128; 4],
    r: [u64; 4],
    den: u64,
}

/// `x / d` and `x % d`, in 64 bits when `x` fits.
fn divmod(x: u128, d: u64) -> (u128, u64) {
    match u64::try_from(x) {
        Ok(x) => (u128::from(x / d), x % d),
        Err(_) => (x / u128::from(d), (x % u128::from(d)) as u64),
    }
}

impl Cell {
    fn new(t: &StepTable, j: usize, i: usize) -> Self {
        let super::Corners {
            b: [b0, b1],
            k: [k0, k1],
            t: [[t00, t01], [t10, t11]],
        } = t.corners(j, i);
        // decode_line: α = (b₁ − b)·p + (b − b₀)·q, β = (b₁ − b)·u + (b − b₀)·v.
        let (p, q) = (k1 * t00 - k0 * t01, k1 * t10 - k0 * t11);
        let (u, v) = (t01 - t00, t11 - t10);
        let a = [b1 * p - b0 * q, q - p, b1 * u - b0 * v, v - u];
        let den = (b1 - b0) * (k1 - k0) * 1000;
        let split = (den < SPLIT_DEN).then(|| Split {
            q: a.map(|x| x.div_euclid(den)),
            r: a.map(|x| x.rem_euclid(den) as u64),
            den: den as u64,
        });
        Cell { a, split }
    }

    /// The numerator's line in the KV at batch `b` (< [`SPLIT_BATCH`]): `(α, β)`, exactly
    /// [`StepTable::decode_line`]'s.
    fn line(&self, b: u64) -> (i128, i128) {
        let b = i128::from(b);
        (self.a[0] + self.a[1] * b, self.a[2] + self.a[3] * b)
    }

    /// The step at batch `b` attending `k` tokens, ns before the 1 ns floor, in split form:
    /// `None` outside it.
    fn ns(&self, b: u64, k: u64) -> Option<i128> {
        let s = self.split.as_ref()?;
        if b >= SPLIT_BATCH || k >= SPLIT_KV {
            return None;
        }
        let wide = |x: u64| u128::from(x);
        // β's remainder part, reduced first only if it does not fit in 64 bits.
        let (beta_q, beta_r) = match wide(s.r[2]) + wide(s.r[3]) * wide(b) {
            x if x >> 64 == 0 => (0, x),
            x => {
                let (q, r) = divmod(x, s.den);
                (q as i128, wide(r))
            }
        };
        let rest = wide(s.r[0]) + wide(s.r[1]) * wide(b) + beta_r * wide(k);
        let (carry, _) = divmod(rest, s.den);
        let (b, k) = (i128::from(b), i128::from(k));
        Some(s.q[0] + s.q[1] * b + (s.q[2] + s.q[3] * b + beta_q) * k + carry as i128)
    }

    /// The run of `n ≥ 1` steps of `batch` from `kv` on this cell in split form, when it fits
    /// and no step falls to the 1 ns floor: step `l` lasts `q0 + q1·l + ⌊(r0 + r1·l)/den⌋` ns.
    fn run(&self, batch: u64, kv: u64, n: u64) -> Option<FloorLine> {
        let s = self.split.as_ref()?;
        let last_kv = batch.checked_mul(n - 1)?.checked_add(kv)?;
        if batch >= SPLIT_BATCH || last_kv >= SPLIT_KV {
            return None;
        }
        let wide = |x: u64| u128::from(x);
        let (bi, ki) = (i128::from(batch), i128::from(kv));
        // α and β at this batch, split: qa·den + ra, qb·den + rb.
        let (ca, ra) = divmod(wide(s.r[0]) + wide(s.r[1]) * wide(batch), s.den);
        let (cb, rb) = divmod(wide(s.r[2]) + wide(s.r[3]) * wide(batch), s.den);
        let qa = s.q[0] + s.q[1] * bi + ca as i128;
        let qb = s.q[2] + s.q[3] * bi + cb as i128;
        // The run's numerator: (α + β·kv) + β·batch·l.
        let (c0, r0) = divmod(wide(ra) + wide(rb) * wide(kv), s.den);
        let (c1, r1) = divmod(wide(rb) * wide(batch), s.den);
        let q0 = qa + qb * ki + c0 as i128;
        FloorLine::new(q0, qb * bi + c1 as i128, r0, r1, s.den, n)
    }
}

/// A run's stretch on one KV segment: its first step, its steps, the KV at its first step and
/// the segment.
#[derive(Clone, Copy, Debug)]
struct Stretch {
    from: u64,
    steps: u64,
    kv: u64,
    segment: usize,
}

impl PricedTable {
    /// The table, precomputed.
    pub fn new(table: StepTable) -> Self {
        let nb = table.decode_batch.len() - 1;
        let nk = table.decode_kv_tokens.len() - 1;
        let cells = (0..nb * nk)
            .map(|c| Cell::new(&table, c / nk, c % nk))
            .collect();
        PricedTable {
            table,
            cells,
            kv_segments: nk,
        }
    }

    /// The cells of `batch`'s batch segment, by KV segment.
    fn row(&self, batch: u64) -> &[Cell] {
        let j = segment(&self.table.decode_batch, batch);
        &self.cells[j * self.kv_segments..(j + 1) * self.kv_segments]
    }

    /// The stretches of a run of `steps` steps of `batch` from `kv_first`, one per KV segment it
    /// crosses (as [`StepTable`]'s `decode_run_weighted` walks them).
    fn stretches(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
    ) -> impl Iterator<Item = Stretch> + '_ {
        let kv_axis = &self.table.decode_kv_tokens;
        let mut j = 0u64;
        std::iter::from_fn(move || {
            if j >= steps {
                return None;
            }
            let kv = kv_first + batch * j;
            let i = segment(kv_axis, kv);
            // The steps left on this KV segment: until the KV reaches the next point.
            let end = match kv_axis.get(i + 1) {
                Some(&next) if i + 2 < kv_axis.len() && batch > 0 => {
                    (j + (next - kv).div_ceil(batch)).min(steps)
                }
                _ => steps,
            };
            let s = Stretch {
                from: j,
                steps: end - j,
                kv,
                segment: i,
            };
            j = end;
            Some(s)
        })
    }

    /// A stretch's `(Σ d, Σ l·d)` (`l` from its first step; the second only if `weighted`): in
    /// split form, else the table's own.
    fn stretch_sums(&self, row: &[Cell], batch: u64, s: Stretch, weighted: bool) -> (u128, u128) {
        match row[s.segment].run(batch, s.kv, s.steps) {
            Some(run) if weighted => run.sums(s.steps),
            Some(run) => (run.sum(s.steps), 0),
            None => {
                let line = self.table.decode_line(batch, s.segment);
                self.table.line_run(line, batch, s.kv, s.steps)
            }
        }
    }

    /// The longest prefix of a stretch, fewer than its steps, whose total stays below `left`
    /// (which the whole stretch reaches): its length and total. In split form a galloping
    /// search from where the stretch's mean step puts it ([`FloorLine::within`]), else a
    /// binary search over the table's sums.
    fn stretch_within(&self, row: &[Cell], batch: u64, s: Stretch, left: u128) -> (u64, u128) {
        if let (Some(line), Ok(budget)) = (
            row[s.segment].run(batch, s.kv, s.steps),
            u64::try_from(left),
        ) {
            let m = line.within(budget);
            return (m, line.sum(m));
        }
        let price = |m: u64| match m {
            0 => 0,
            m => {
                self.stretch_sums(row, batch, Stretch { steps: m, ..s }, false)
                    .0
            }
        };
        let m = last_true(s.steps - 1, 0, |m| price(m) < left);
        (m, price(m))
    }
}

impl StepTimeModel for PricedTable {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        let i = segment(&self.table.decode_kv_tokens, kv_tokens);
        match self.row(batch)[i].ns(batch, kv_tokens) {
            Some(ns) => at_least_one_ns(ns),
            None => self.table.decode(batch, kv_tokens),
        }
    }

    fn prefill(&self, seqs: u64, extend_tokens: u64) -> SimDuration {
        self.table.prefill(seqs, extend_tokens)
    }

    fn mixed(&self, step: MixedStep) -> SimDuration {
        self.table.mixed(step)
    }

    fn decode_run(&self, batch: u64, kv_first: u64, steps: u64) -> SimDuration {
        self.decode_run_weighted(batch, kv_first, steps, 0, 0).0
    }

    /// Per KV segment, closed forms ([`StepTable::closed_form_runs`]).
    fn closed_form_runs(&self) -> bool {
        true
    }

    fn decode_non_decreasing(&self, batch: u64) -> bool {
        match batch < SPLIT_BATCH {
            true => self.row(batch).iter().all(|c| c.line(batch).1 >= 0),
            false => self.table.decode_non_decreasing(batch),
        }
    }

    /// The stretches that fit whole, then a search in the one that meets the budget: O(KV
    /// segments + log steps) closed forms.
    fn decode_run_within(
        &self,
        batch: u64,
        kv_first: u64,
        most: u64,
        budget: SimDuration,
    ) -> (u64, SimDuration) {
        let row = self.row(batch);
        let budget = u128::from(budget.as_ns());
        let mut total = 0u128;
        for s in self.stretches(batch, kv_first, most) {
            let (f, _) = self.stretch_sums(row, batch, s, false);
            if total + f < budget {
                total += f;
                continue;
            }
            // Every step lasts at least 1 ns: the prefix's total grows with its length.
            let (m, t) = self.stretch_within(row, batch, s, budget - total);
            return (s.from + m, SimDuration::from_ns((total + t) as u64));
        }
        (
            most,
            SimDuration::from_ns(total.min(u128::from(u64::MAX)) as u64),
        )
    }

    fn decode_run_weighted(
        &self,
        batch: u64,
        kv_first: u64,
        steps: u64,
        w_first: u64,
        w_slope: u64,
    ) -> (SimDuration, u128) {
        let row = self.row(batch);
        let (mut total, mut weighted) = (0u128, 0u128);
        for s in self.stretches(batch, kv_first, steps) {
            let (f, g) = self.stretch_sums(row, batch, s, w_slope > 0);
            total += f;
            weighted += u128::from(w_first + w_slope * s.from) * f + u128::from(w_slope) * g;
        }
        (
            SimDuration::from_ns(total.min(u128::from(u64::MAX)) as u64),
            weighted,
        )
    }

    /// The run's line on its KV segment, when it stays on one and fits the split form.
    fn decode_floor_line(&self, batch: u64, kv_first: u64, steps: u64) -> Option<FloorLine> {
        let s = self.stretches(batch, kv_first, steps).next()?;
        match s.steps == steps {
            true => self.row(batch)[s.segment].run(batch, s.kv, steps),
            false => None,
        }
    }

    fn describe(&self) -> String {
        self.table.describe()
    }
}

#[cfg(test)]
mod tests;
