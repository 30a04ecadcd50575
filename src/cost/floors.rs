//! Sums of the floors of a line, `Σ_{i=0}^{n} ⌊(a·i + b)/c⌋` and its weighted companions,
//! exactly: the closed forms behind the runs of the linear and the table models, whose step
//! times are such floors.
//!
//! [`floor_sums`] works in 128-bit integers for any inputs a run can produce.
//! [`floor_sums_small`] and [`floor_sum_small`] are the same reduction in 64-bit integers (no
//! 128-bit division, which costs a library call), for a line already reduced below its divisor
//! (`a, b < c`) with `n < 2²⁰` and `c·(n + 1) ≤ 2⁶²` ([`small`]); the models reduce their lines
//! to that form once per run and keep the 128-bit path for anything larger.

/// [`floor_sums_small`] takes `c·(n + 1)` up to this.
pub const SMALL_SPAN: u64 = 1 << 62;
/// [`floor_sums_small`] takes `n` below this.
pub const SMALL_TERMS: u64 = 1 << 20;

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

/// Whether [`floor_sums_small`] takes `(a, b, c, n)`: `a, b < c`, `n < 2²⁰` and
/// `c·(n + 1) ≤ 2⁶²`.
pub fn small(a: u64, b: u64, c: u64, n: u64) -> bool {
    a < c && b < c && n < SMALL_TERMS && c.checked_mul(n + 1).is_some_and(|x| x <= SMALL_SPAN)
}

/// [`floor_sum`] in 64-bit integers, for the inputs [`small`] takes.
///
/// Why nothing overflows: every level of the reduction counts at most 2²⁰ terms, each at most
/// 2²⁰ (at the top `⌊(a·i + b)/c⌋ ≤ i` since `a, b < c`; a swapped level has `m ≤ n + 1` terms
/// below `n`), so every partial sum is below 2⁴⁰; and `a·n + b < c·(n + 1) ≤ 2⁶²` at each level
/// (the divisors only shrink, and so do the counts: a level of `n + 1` terms below `N` has a
/// swapped level of at most `N` terms).
pub fn floor_sum_small(a: u64, b: u64, c: u64, n: u64) -> u64 {
    debug_assert!(small(a, b, c, n));
    let m = (a * n + b) / c;
    if a == 0 || m == 0 {
        return 0;
    }
    n * m - floor_sum_small_any(c, c - b - 1, a, m - 1)
}

/// [`floor_sum_small`]'s levels below the top, whose `a` and `b` may exceed `c`.
fn floor_sum_small_any(a: u64, b: u64, c: u64, n: u64) -> u64 {
    let mut ans = 0u64;
    let (mut a, mut b) = (a, b);
    if a >= c {
        // n·(n + 1)/2 first: when it is 0, a/c may be large.
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
    ans + n * m - floor_sum_small_any(c, c - b - 1, a, m - 1)
}

/// [`floor_sums`] in 64-bit integers, for the inputs [`small`] takes.
///
/// Why nothing overflows: as for [`floor_sum_small`] every level has at most 2²⁰ terms of at
/// most 2²⁰, so its three sums are at most 2⁶⁰; every product below is one part of its level's sums
/// (multiplied in an order whose partial products are parts too: `qa·(qa·s2)`, not
/// `qa·qa·s2`, whose `qa²` may be large when the level has one term and `s2 = 0`).
pub fn floor_sums_small(a: u64, b: u64, c: u64, n: u64) -> (u64, u64, u64) {
    debug_assert!(small(a, b, c, n));
    floor_sums_small_any(a, b, c, n)
}

fn floor_sums_small_any(a: u64, b: u64, c: u64, n: u64) -> (u64, u64, u64) {
    let s1 = n * (n + 1) / 2;
    if a == 0 {
        let q = b / c;
        return ((n + 1) * q, q * s1, (n + 1) * q * q);
    }
    if a >= c || b >= c {
        let (qa, qb) = (a / c, b / c);
        let (f, g, h) = floor_sums_small_any(a % c, b % c, c, n);
        let s2 = n * (n + 1) * (2 * n + 1) / 6;
        let qa_s1 = qa * s1;
        return (
            f + qa_s1 + qb * (n + 1),
            g + qa * s2 + qb * s1,
            h + qa * (qa * s2) + qb * qb * (n + 1) + 2 * (qb * qa_s1) + 2 * (qb * f) + 2 * (qa * g),
        );
    }
    let m = (a * n + b) / c;
    if m == 0 {
        return (0, 0, 0);
    }
    let (f, g, h) = floor_sums_small_any(c, c - b - 1, a, m - 1);
    let f2 = n * m - f;
    let g2 = (m * n * (n + 1) - h - f) / 2;
    let h2 = n * m * (m + 1) - 2 * g - 2 * f - f2;
    (f2, g2, h2)
}

/// `Σ_{j<n} j = n(n − 1)/2` and `Σ_{j<n} j² = (n − 1)n(2n − 1)/6`, for `n < 2³²`, without a
/// 128-bit division: each division is of a factor that it divides.
pub fn power_sums(n: u64) -> (u128, u128) {
    debug_assert!(n < 1 << 32);
    if n == 0 {
        return (0, 0);
    }
    let (x, y, z) = (n - 1, n, 2 * n - 1);
    let t1 = match x % 2 {
        0 => (x / 2) * y,
        _ => x * (y / 2),
    };
    // One of x, y, z is a multiple of 3 (they are n − 1, n and n − 1 + n); when x or y is,
    // so is t1 = x·y/2.
    let t2 = match x % 3 == 0 || y % 3 == 0 {
        true => u128::from(t1 / 3) * u128::from(z),
        false => u128::from(t1) * u128::from(z / 3),
    };
    (u128::from(t1), t2)
}

/// The floors of a line's steps, `⌊(r0 + r1·j)/den⌋` ns at step `j` ([`FloorLine::parts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floors {
    /// At step 0, below `den`.
    pub r0: u64,
    /// Growth per step, below `den`.
    pub r1: u64,
    /// Divisor.
    pub den: u64,
}

/// A run of steps that is one line of floors, exactly as a model prices it: step `j` (from 0)
/// lasts `q0 + q1·j + ⌊(r0 + r1·j)/den⌋` ns for `j < steps`, with `r0, r1 < den`,
/// [`small`]`(r1, r0, den, steps − 1)` and every step between 1 ns and `u64::MAX` ns (so a
/// model's 1 ns floor and clamp change none of them). The linear model's runs are such lines,
/// and so are the table's within a KV segment; [`crate::cost::DecodeSteps`] answers its
/// questions about a run from one without calling the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloorLine {
    q0: i128,
    q1: i128,
    r0: u64,
    r1: u64,
    den: u64,
    steps: u64,
    /// The numerator of step 0, `den·q0 + r0`, and its growth per step, `den·q1 + r1`: step `j`
    /// lasts `⌊(n0 + c1·j)/den⌋` ns. Below `den·2⁶⁴ ≤ 2¹²⁶` at every step of the run.
    n0: i128,
    c1: i128,
}

impl FloorLine {
    /// The line, if it meets the conditions above.
    pub fn new(q0: i128, q1: i128, r0: u64, r1: u64, den: u64, steps: u64) -> Option<Self> {
        let within = |x: i128| (1..=i128::from(u64::MAX)).contains(&x);
        if steps == 0 || !small(r1, r0, den, steps - 1) || !within(q0) {
            return None;
        }
        let mut line = FloorLine {
            q0,
            q1,
            r0,
            r1,
            den,
            steps,
            n0: 0,
            c1: 0,
        };
        // The steps are monotone in j: the first and the last bound them all. Then
        // |q1| < 2⁶⁴ + 2 (unless one step: q1 is not used) and den < 2⁶², so the numerators fit.
        if !within(line.step(steps - 1)) {
            return None;
        }
        let d = i128::from(den);
        line.n0 = d * q0 + i128::from(r0);
        line.c1 = match steps {
            1 => 0,
            _ => d * q1 + i128::from(r1),
        };
        Some(line)
    }

    /// Steps in the run.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The line of the run's first `m` steps (`1 ≤ m ≤ steps`; `None` otherwise).
    pub fn prefix(&self, m: u64) -> Option<FloorLine> {
        match m <= self.steps {
            true => FloorLine::new(self.q0, self.q1, self.r0, self.r1, self.den, m),
            false => None,
        }
    }

    /// Step `j`'s duration in two parts: `q0 + q1·j` ns, and `⌊(r0 + r1·j)/den⌋` ns
    /// ([`Floors`]) — `None` when the line grows by whole nanoseconds per step (`r1 = 0`,
    /// so `⌊r0/den⌋ = 0`), as the linear model's does with a whole number of ns per KV token.
    /// `r0, r1 < den`, and `r0 + r1·j < den·(j + 1) ≤ 2⁶²` for every step `j` ([`small`]).
    pub fn parts(&self) -> ((i128, i128), Option<Floors>) {
        let floors = (self.r1 != 0).then_some(Floors {
            r0: self.r0,
            r1: self.r1,
            den: self.den,
        });
        ((self.q0, self.q1), floors)
    }

    /// Step `j`'s duration (`j < steps`), ns.
    pub fn step(&self, j: u64) -> i128 {
        let whole = self.q0 + self.q1 * i128::from(j);
        match self.r1 {
            0 => whole, // ⌊r0/den⌋ = 0
            // r0 + r1·j < den·(j + 1) ≤ 2⁶² ([`small`]).
            r1 => whole + i128::from((self.r0 + r1 * j) / self.den),
        }
    }

    /// Step `j`'s duration (`j < steps`), ns.
    pub fn duration(&self, j: u64) -> u64 {
        self.step(j) as u64
    }

    /// `Σ_{j<m} d_j` for `m ≤ steps`. Exact: `m·q0 < 2⁸⁵`, and `|q1| ≤ 2⁶⁵` unless the run has
    /// one step (then `Σ j = 0`).
    pub fn sum(&self, m: u64) -> u128 {
        if m == 0 {
            return 0;
        }
        let t1 = i128::from(m * (m - 1) / 2); // m ≤ 2²⁰
        let f = match self.r1 {
            0 => 0, // ⌊r0/den⌋ = 0
            _ => floor_sum_small(self.r1, self.r0, self.den, m - 1),
        };
        (i128::from(m) * self.q0 + self.q1 * t1 + i128::from(f)) as u128
    }

    /// `(Σ_{j<m} d_j, Σ_{j<m} j·d_j)` for `m ≤ steps` (`|q1·Σ j²| < 2¹²⁵`).
    pub fn sums(&self, m: u64) -> (u128, u128) {
        if m == 0 {
            return (0, 0);
        }
        let (t1, t2) = power_sums(m);
        let (t1, t2, mi) = (t1 as i128, t2 as i128, i128::from(m));
        let (f, g) = match self.r1 {
            0 => (0, 0), // ⌊r0/den⌋ = 0
            _ => {
                let (f, g, _) = floor_sums_small(self.r1, self.r0, self.den, m - 1);
                (f, g)
            }
        };
        let sum = mi * self.q0 + self.q1 * t1 + i128::from(f);
        let moment = self.q0 * t1 + self.q1 * t2 + i128::from(g);
        (sum as u128, moment as u128)
    }

    /// `(Σ_{j<m} d_j, Σ_{j<m} (w_first + w_slope·j)·d_j)` for `m ≤ steps`: the first `m` steps'
    /// duration and the time integral of a quantity that grows by `w_slope` a step (the KV in
    /// use), as a model's `decode_run_weighted` gives them.
    pub fn weighted(&self, m: u64, w_first: u64, w_slope: u64) -> (u128, u128) {
        let (sum, moment) = self.sums(m);
        (
            sum,
            u128::from(w_first) * sum + u128::from(w_slope) * moment,
        )
    }

    /// The time to the end of the first `m ≤ steps` steps, ns, saturated at `u64::MAX` (as a
    /// model's `decode_run` is).
    pub fn elapsed(&self, m: u64) -> u64 {
        self.sum(m).min(u128::from(u64::MAX)) as u64
    }

    /// The most steps whose saturated total stays below `budget` ns (what a model's
    /// `decode_run_within` finds): a galloping search from where the mean step puts it.
    pub fn within(&self, budget: u64) -> u64 {
        if budget == 0 {
            return 0;
        }
        // Σ_{j<m} d_j ≈ m·(q0 + s·(m − 1)/2) with s the mean growth per step: one step of a
        // fixed-point iteration from m = budget/q0.
        // (`q0` is within `u64`, and `q1` nearly always within `i64`: their conversions then
        // take no library call.)
        let (b, q0) = (budget as f64, self.q0 as u64 as f64);
        let q1 = i64::try_from(self.q1).map_or_else(|_| self.q1 as f64, |q1| q1 as f64);
        let s = q1 + self.r1 as f64 / self.den as f64;
        let m0 = b / q0;
        let guess = b / (q0 + s * (m0 - 1.0).max(0.0) / 2.0).max(1.0);
        crate::cost::last_true(self.steps, guess as u64, |m| self.elapsed(m) < budget)
    }

    /// The steps `from..to` (`to ≤ steps`) of a line whose steps never get shorter, cut into
    /// runs of steps of the same class: `class(d)` gives the label of the class of a step of
    /// `d` ns and the longest duration of that class (at least `d`; a class holds the
    /// durations from `d` to it, and the classes of longer steps come after it, the next one
    /// being `class(top + 1)`). Hands each run's label and steps to `emit`, in order, and
    /// returns `true`; `false` (and nothing) when the steps may get shorter.
    ///
    /// In 64 bits when the run's numerators fit (the linear model's do while its steps stay
    /// below about 1.8 × 10¹⁶ ns, some seven months), a run costs no
    /// division when it is of the class after the previous run's and of the width of a class
    /// met before (the common case: steps growing by less than a class), else the division of
    /// its first step and one to count it; otherwise each run costs [`Self::up_to`].
    pub fn runs(
        &self,
        (from, to): (u64, u64),
        class: impl Fn(u64) -> (u64, u64),
        mut emit: impl FnMut(u64, u64),
    ) -> bool {
        if self.c1 < 0 {
            return false;
        }
        if from >= to {
            return true;
        }
        // The numerators from step `from` to step `to − 1`, and the room below the last one's
        // class (the classes rise with the durations), in 64 bits if they fit.
        let last = self.n0 + self.c1 * i128::from(to - 1);
        if let (Ok(mut num), Ok(c1), Ok(last)) = (
            u64::try_from(self.n0 + self.c1 * i128::from(from)),
            u64::try_from(self.c1),
            u64::try_from(last),
        ) {
            let den = self.den;
            let room = |top: u64| top.checked_add(1).and_then(|t| t.checked_mul(den));
            if c1 == 0 {
                emit(class(num / den).0, to - from);
                return true;
            }
            if room(class(last / den).1).is_some() {
                // The first run's class by division; each later one, when the step after a
                // run falls in the next class (the steps grow by less than a class), without:
                // that step's numerator is `bound + e` with `0 ≤ e < c1` (the step before it
                // was below `bound`, where the class left ends), and the steps below the next
                // class's end `bound + w` are `⌈(w − e)/c1⌉ = q + [ρ > e]` for `w = q·c1 + ρ`,
                // `q` and `ρ` divided once for each width of class met.
                let (mut label, mut top) = class(num / den);
                let mut m = ((top + 1) * den - 1 - num) / c1 + 1;
                let mut j = from;
                let mut width = (0, 0, 0); // (w, q, ρ)
                loop {
                    let m_here = m.min(to - j);
                    emit(label, m_here);
                    j += m_here;
                    if j >= to {
                        return true;
                    }
                    num += c1 * m_here;
                    // No overflow: the next step's value is at least `top + 1` and at most the
                    // last step's, so the classes met are at most the last step's.
                    let bound = (top + 1) * den;
                    let (next, next_top) = class(top + 1);
                    let next_bound = (next_top + 1) * den;
                    if num < next_bound {
                        let w = next_bound - bound;
                        if w != width.0 {
                            width = (w, w / c1, w % c1);
                        }
                        m = width.1 + u64::from(width.2 > num - bound);
                        (label, top) = (next, next_top);
                    } else {
                        (label, top) = class(num / den);
                        m = ((top + 1) * den - 1 - num) / c1 + 1;
                    }
                }
            }
        }
        let mut j = from;
        while j < to {
            let (label, top) = class(self.duration(j));
            let m = self.up_to(j, top).unwrap_or(1).clamp(1, to - j);
            emit(label, m);
            j += m;
        }
        true
    }

    /// How many of the steps from step `from` on last at most `limit_ns`, when the steps never
    /// get shorter (`None` when they may): `⌊(n0 + c1·j)/den⌋ ≤ limit` while
    /// `n0 + c1·j < (limit + 1)·den`.
    fn up_to(&self, from: u64, limit_ns: u64) -> Option<u64> {
        let left = self.steps.saturating_sub(from);
        if left == 0 || self.c1 < 0 {
            return (left == 0).then_some(0);
        }
        let c0 = self.n0 + self.c1 * i128::from(from);
        let room = (i128::from(limit_ns) + 1) * i128::from(self.den);
        if c0 >= room {
            return Some(0);
        }
        if self.c1 == 0 {
            return Some(left);
        }
        let span = room - 1 - c0;
        let n = match (u64::try_from(span), u64::try_from(self.c1)) {
            (Ok(x), Ok(y)) => u128::from(x / y),
            _ => (span / self.c1) as u128,
        } + 1;
        Some(n.min(u128::from(left)) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The loops the sums stand for.
    fn by_loop(a: u128, b: u128, c: u128, n: u128) -> (u128, u128, u128) {
        let fl = |i: u128| (a * i + b) / c;
        (
            (0..=n).map(fl).sum(),
            (0..=n).map(|i| i * fl(i)).sum(),
            (0..=n).map(|i| fl(i) * fl(i)).sum(),
        )
    }

    fn wide(x: (u64, u64, u64)) -> (u128, u128, u128) {
        (u128::from(x.0), u128::from(x.1), u128::from(x.2))
    }

    #[test]
    fn power_sums_by_hand_and_by_loop() {
        assert_eq!(power_sums(0), (0, 0));
        assert_eq!(power_sums(1), (0, 0));
        assert_eq!(power_sums(4), (6, 14));
        for n in 0..500u64 {
            let t1: u128 = (0..n).map(u128::from).sum();
            let t2: u128 = (0..n).map(|j| u128::from(j) * u128::from(j)).sum();
            assert_eq!(power_sums(n), (t1, t2), "n = {n}");
        }
        // Near the bound: against the 128-bit formula.
        for n in [
            (1u64 << 32) - 1,
            (1 << 32) - 2,
            (1 << 32) - 3,
            3_000_000_001,
        ] {
            let m = u128::from(n);
            let expect = (m * (m - 1) / 2, (m - 1) * m * (2 * m - 1) / 6);
            assert_eq!(power_sums(n), expect, "n = {n}");
        }
    }

    #[test]
    fn the_small_sums_at_their_bounds() {
        let n = SMALL_TERMS - 1;
        let c = SMALL_SPAN / SMALL_TERMS;
        assert!(small(c - 1, c - 1, c, n) && !small(c - 1, c - 1, c + 1, n));
        assert!(!small(0, 0, c, n + 1) && !small(c, 0, c, 0) && !small(0, c, c, 0));
        assert!(small(0, 0, SMALL_SPAN, 0) && !small(0, 0, SMALL_SPAN + 1, 0));
        for (a, b) in [
            (c - 1, c - 1),
            (c - 1, 0),
            (1, c - 1),
            (0, c - 1),
            (c / 2, c / 3),
            (1, 0),
            (999_983, 12_345),
        ] {
            let expect = floor_sums(a.into(), b.into(), c.into(), n.into());
            assert_eq!(
                wide(floor_sums_small(a, b, c, n)),
                expect,
                "a = {a}, b = {b}"
            );
            assert_eq!(u128::from(floor_sum_small(a, b, c, n)), expect.0);
            // One term: the level below may have a quotient near 2⁴⁰ and no sum of squares.
            assert_eq!(
                wide(floor_sums_small(a, b, c, 0)),
                floor_sums(a.into(), b.into(), c.into(), 0)
            );
            assert_eq!(
                wide(floor_sums_small(a, b, c, 1)),
                floor_sums(a.into(), b.into(), c.into(), 1)
            );
        }
        // A tiny slope against the largest divisor: one swap to a divisor of 1.
        assert_eq!(
            wide(floor_sums_small(1, c - 1, c, n)),
            floor_sums(1, u128::from(c - 1), u128::from(c), u128::from(n))
        );
        // The largest divisor, for one or two terms.
        for (c, n) in [(SMALL_SPAN, 0), (SMALL_SPAN / 2, 1), (SMALL_SPAN / 3, 2)] {
            for (a, b) in [(c - 1, c - 1), (1, c - 1), (c - 1, 0), (c / 7, c / 5)] {
                let expect = floor_sums(a.into(), b.into(), c.into(), n.into());
                assert_eq!(
                    wide(floor_sums_small(a, b, c, n)),
                    expect,
                    "{a} {b} {c} {n}"
                );
                assert_eq!(u128::from(floor_sum_small(a, b, c, n)), expect.0);
            }
        }
    }

    /// Classes as the latency histogram's buckets (`metrics::latency`) of the values `d + add`,
    /// with `bits` bits of sub-bucket: `2^bits` buckets of 1 ns, then `2^(bits − 1)` of each
    /// doubling width; labelled by the bucket's number, the top being the bucket's top − `add`.
    fn buckets(bits: u32, add: u64) -> impl Fn(u64) -> (u64, u64) {
        move |d: u64| {
            let v = d + add;
            let shift = (64 - bits) - (v | ((1 << bits) - 1)).leading_zeros();
            let q = v >> shift;
            let hi = ((q + 1) << shift).wrapping_sub(1);
            ((u64::from(shift) << (bits - 1)) + q, hi - add)
        }
    }

    /// [`FloorLine::runs`] of `line` (steps `d`) over a few ranges of steps, against the
    /// steps' classes one by one.
    fn check_runs(line: &FloorLine, d: &[i128], class: &dyn Fn(u64) -> (u64, u64), what: &str) {
        let steps = line.steps;
        for (from, to) in [
            (0, steps),
            (steps / 3, steps),
            (1.min(steps), steps / 2 + 1),
        ] {
            let to = to.min(steps);
            let mut out: Vec<(u64, u64)> = Vec::new();
            let ok = line.runs((from, to), class, |l, m| out.push((l, m)));
            let mut expect: Vec<(u64, u64)> = Vec::new();
            for &x in d.get(from as usize..to as usize).unwrap_or(&[]) {
                match expect.last_mut() {
                    Some((l, m)) if *l == class(x as u64).0 => *m += 1,
                    _ => expect.push((class(x as u64).0, 1)),
                }
            }
            match ok {
                true => assert_eq!(out, expect, "{what}, {from}..{to}"),
                false => assert!(line.c1 < 0 && out.is_empty()),
            }
        }
    }

    /// A line's answers by brute force: each step from the formula, the sums and searches by
    /// scanning them.
    fn check_line(q0: i128, q1: i128, r0: u64, r1: u64, den: u64, steps: u64) {
        let direct = |j: u64| q0 + q1 * i128::from(j) + i128::from((r0 + r1 * j) / den);
        let Some(line) = FloorLine::new(q0, q1, r0, r1, den, steps) else {
            // Refused only outside its conditions.
            let outside = (0..steps).any(|j| !(1..=i128::from(u64::MAX)).contains(&direct(j)));
            assert!(steps == 0 || !small(r1, r0, den, steps - 1) || outside);
            return;
        };
        let d: Vec<i128> = (0..steps).map(direct).collect();
        let (mut sum, mut moment) = (0i128, 0i128);
        for m in 0..=steps {
            assert_eq!(line.sum(m), sum as u128, "sum of {m}");
            assert_eq!(line.sums(m), (sum as u128, moment as u128), "sums of {m}");
            assert_eq!(line.elapsed(m), sum.min(i128::from(u64::MAX)) as u64);
            if m < steps {
                assert_eq!(line.step(m), d[m as usize]);
                assert_eq!(line.duration(m), d[m as usize] as u64);
                sum += d[m as usize];
                moment += i128::from(m) * d[m as usize];
            }
        }
        let ends: Vec<u64> = (1..=steps).map(|m| line.elapsed(m)).collect();
        for &e in ends.iter().chain(&[0, u64::MAX]) {
            for budget in [e.saturating_sub(1), e, e.saturating_add(1)] {
                let fit = ends.iter().take_while(|&&x| x < budget).count() as u64;
                assert_eq!(line.within(budget), fit, "budget {budget}");
            }
        }
        // A prefix has the first steps, and their sums.
        assert_eq!((line.prefix(0), line.prefix(steps + 1)), (None, None));
        for m in [1, 2, steps / 2, steps.saturating_sub(1), steps] {
            if (1..=steps).contains(&m) {
                let prefix = line.prefix(m).expect("a prefix");
                assert_eq!(prefix.steps(), m, "prefix {m}");
                let got: Vec<i128> = (0..m).map(|j| prefix.step(j)).collect();
                assert_eq!(got, d[..m as usize], "prefix {m}");
                assert_eq!(prefix.sums(m), line.sums(m), "prefix {m}");
                let (sum, moment) = line.sums(m);
                assert_eq!(
                    line.weighted(m, 7, 3),
                    (sum, 7 * sum + 3 * moment),
                    "weighted {m}"
                );
            }
        }
        // Runs of classes of durations, against the steps one by one: classes of `width` ns
        // from 0 (the last one shorter), and the latency histogram's buckets, whose width
        // doubles at each power of two, for values shifted by up to what the line leaves.
        let highest = d.iter().copied().max().unwrap_or(0) as u64;
        for width in [1u64, 2, 3, 7, 1000, 1 << 20, u64::MAX / 3, u64::MAX] {
            let class = |d: u64| {
                (
                    d / width,
                    (d / width).saturating_mul(width).saturating_add(width - 1),
                )
            };
            check_runs(&line, &d, &class, &format!("width {width}"));
        }
        for bits in [2, 3, 11] {
            for add in [0, 5, 1 << 20] {
                if highest.checked_add(add).is_some() {
                    let class = buckets(bits, add);
                    check_runs(&line, &d, &class, &format!("{bits}-bit buckets + {add}"));
                }
            }
        }
        for from in [0, steps / 3, steps.saturating_sub(1), steps] {
            for &x in d.iter().chain(&[1, i128::from(u64::MAX)]) {
                for limit in [x - 1, x, x + 1] {
                    let limit = limit.clamp(0, i128::from(u64::MAX)) as u64;
                    let counted = d[from.min(steps) as usize..]
                        .iter()
                        .take_while(|&&x| x <= i128::from(limit))
                        .count() as u64;
                    match line.up_to(from, limit) {
                        Some(n) => assert_eq!(n, counted, "from {from}, limit {limit}"),
                        None => assert!(line.c1 < 0 && from < steps),
                    }
                }
            }
        }
    }

    #[test]
    fn lines_by_hand_and_at_their_bounds() {
        // 3 + 2j + ⌊(1 + 3j)/4⌋: 3, 6, 8, 11.
        let line = FloorLine::new(3, 2, 1, 3, 4, 4).unwrap();
        assert_eq!(
            (0..4).map(|j| line.duration(j)).collect::<Vec<_>>(),
            [3, 6, 8, 11]
        );
        assert_eq!(
            (line.sum(4), line.within(17), line.up_to(1, 8)),
            (28, 2, Some(2))
        );
        // In buckets of 1 ns up to 3, then two of 2 ns (4–5, 6–7), two of 4 ns (8–11, 12–15):
        // 3 | 6 | 8, 11 — the third run found without dividing, the second by dividing (it
        // skips a bucket).
        let mut runs = Vec::new();
        assert!(line.runs((0, 4), buckets(2, 0), |l, m| runs.push((l, m))));
        assert_eq!(runs, [(3, 1), (5, 1), (6, 2)]);
        check_line(3, 2, 1, 3, 4, 4);
        let max = i128::from(u64::MAX);
        // Steps at the largest duration, a falling line, one step, the floor of 1 ns.
        check_line(max - 10, 3, 0, 0, 1000, 4);
        check_line(max - 10, 3, 0, 0, 1000, 5);
        check_line(max, -(1 << 60), 17, 5, 1 << 30, 12);
        check_line(5, -(1 << 100), 0, 0, 7, 1);
        check_line(3, -1, 0, 0, 1000, 3);
        check_line(3, -1, 0, 0, 1000, 4);
        // The largest divisor for a run of this length.
        let den = SMALL_SPAN / 64;
        check_line(1 << 40, 1 << 20, den - 1, den - 1, den, 64);
        check_line(1 << 40, 1 << 20, den - 1, den - 1, den + 1, 64);
    }

    proptest! {
        #[test]
        fn lines_match_their_steps(
            q0 in prop_oneof![1i128..1 << 40, Just(i128::from(u64::MAX)), (1i128 << 62)..1 << 64],
            q1 in prop_oneof![-1000i128..1000, -(1i128 << 50)..1 << 50, Just(0)],
            den in prop_oneof![1u64..2000, 1u64..1 << 40, (SMALL_SPAN / 300)..SMALL_SPAN / 200],
            r0 in any::<u64>(), r1 in any::<u64>(), steps in 0u64..200,
        ) {
            check_line(q0, q1, r0 % den, r1 % den, den, steps);
        }

        #[test]
        fn floor_sums_match_the_loops(a in 0u128..3000, b in 0u128..3000, c in 1u128..2000, n in 0u128..200) {
            prop_assert_eq!(floor_sums(a, b, c, n), by_loop(a, b, c, n));
        }

        #[test]
        fn floor_sum_is_the_first_floor_sum(a in 0u128..3000, b in 0u128..3000, c in 1u128..2000, n in 0u128..200) {
            prop_assert_eq!(floor_sum(a, b, c, n), floor_sums(a, b, c, n).0);
        }

        #[test]
        fn the_small_sums_match_the_loops(c in 1u64..3000, a in 0u64..3000, b in 0u64..3000, n in 0u64..200) {
            let (a, b) = (a % c, b % c);
            let expect = by_loop(a.into(), b.into(), c.into(), n.into());
            prop_assert_eq!(wide(floor_sums_small(a, b, c, n)), expect);
            prop_assert_eq!(u128::from(floor_sum_small(a, b, c, n)), expect.0);
        }

        #[test]
        fn the_small_sums_match_the_wide_ones_up_to_their_bounds(
            c in any::<u64>(), a in any::<u64>(), b in any::<u64>(), n in 0u64..SMALL_TERMS,
        ) {
            // Any divisor the number of terms allows.
            let c = 1 + c % (SMALL_SPAN / (n + 1));
            let (a, b) = (a % c, b % c);
            prop_assert!(small(a, b, c, n));
            let expect = floor_sums(a.into(), b.into(), c.into(), n.into());
            prop_assert_eq!(wide(floor_sums_small(a, b, c, n)), expect);
            prop_assert_eq!(u128::from(floor_sum_small(a, b, c, n)), expect.0);
        }

        #[test]
        fn the_small_sums_near_their_bounds(
            dc in 0u64..1000, da in 0u64..1000, db in 0u64..1000, dn in 0u64..1000,
        ) {
            let n = SMALL_TERMS - 1 - dn;
            let c = SMALL_SPAN / (n + 1) - dc;
            let (a, b) = ((c - 1).saturating_sub(da * da * da), (c - 1).saturating_sub(db));
            prop_assert!(small(a, b, c, n));
            let expect = floor_sums(a.into(), b.into(), c.into(), n.into());
            prop_assert_eq!(wide(floor_sums_small(a, b, c, n)), expect);
            prop_assert_eq!(u128::from(floor_sum_small(a, b, c, n)), expect.0);
        }

        #[test]
        fn power_sums_match_the_formula(n in 0u64..(1 << 32)) {
            let m = u128::from(n);
            let expect = match n {
                0 => (0, 0),
                _ => (m * (m - 1) / 2, (m - 1) * m * (2 * m - 1) / 6),
            };
            prop_assert_eq!(power_sums(n), expect);
        }
    }
}
