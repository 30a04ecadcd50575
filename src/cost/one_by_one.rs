//! A run of decode steps priced one step at a time: `step(i)` is the duration of step `i`
//! (from 0). The trait's defaults and the models without a closed form for a run
//! ([`super::roofline`] outside its priced steps, `DecodeAt::ends` in `roofline/priced.rs`; the
//! linear model's floor-hitting runs) add their steps here, so that each answer is the plain
//! sum its contract names.

use crate::time::SimDuration;

/// The first `steps` steps' total.
pub fn total(steps: u64, step: impl Fn(u64) -> SimDuration) -> SimDuration {
    (0..steps).fold(SimDuration::ZERO, |t, i| t + step(i))
}

/// The longest prefix of at most `most` steps whose total stays below `budget`: its length
/// and total.
pub fn within(
    most: u64,
    budget: SimDuration,
    step: impl Fn(u64) -> SimDuration,
) -> (u64, SimDuration) {
    let mut total = SimDuration::ZERO;
    for i in 0..most {
        let next = total + step(i);
        if next >= budget {
            return (i, total);
        }
        total = next;
    }
    (most, total)
}

/// The first `steps` steps' total and `Σ_i (w_first + w_slope·i) × d_i` (ns × weight units).
pub fn weighted(
    steps: u64,
    w_first: u64,
    w_slope: u64,
    step: impl Fn(u64) -> SimDuration,
) -> (SimDuration, u128) {
    let mut total = SimDuration::ZERO;
    let mut weighted = 0u128;
    for i in 0..steps {
        let d = step(i);
        weighted += u128::from(w_first + w_slope * i) * u128::from(d.as_ns());
        total = total + d;
    }
    (total, weighted)
}

/// [`within`], pushing each step's end (ns from the run's start) to `ends`: the steps taken.
pub fn ends_within(
    most: u64,
    budget: SimDuration,
    ends: &mut Vec<u64>,
    step: impl Fn(u64) -> SimDuration,
) -> u64 {
    let mut total = SimDuration::ZERO;
    for i in 0..most {
        let next = total + step(i);
        if next >= budget {
            return i;
        }
        total = next;
        ends.push(total.as_ns());
    }
    most
}

/// `Σ ends`, exactly, for a run's step ends (non-decreasing): in 64 bits when their count
/// times the last cannot overflow them (a sum the compiler vectorizes), else in 128.
pub fn sum_of_ends(ends: &[u64]) -> u128 {
    let Some(&last) = ends.last() else {
        return 0;
    };
    debug_assert!(
        ends.windows(2).all(|w| w[0] <= w[1]),
        "invariant: ends never go back"
    );
    if last.checked_mul(ends.len() as u64).is_some() {
        u128::from(ends.iter().sum::<u64>())
    } else {
        ends.iter().map(|&e| u128::from(e)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_of_ends_is_exact_in_either_width() {
        assert_eq!(sum_of_ends(&[]), 0);
        assert_eq!(sum_of_ends(&[3, 5, 9]), 17);
        // Past 64 bits: the wide sum.
        let big = [u64::MAX / 2, u64::MAX / 2 + 1, u64::MAX];
        let want = u128::from(u64::MAX / 2) * 2 + 1 + u128::from(u64::MAX);
        assert_eq!(sum_of_ends(&big), want);
    }

    #[test]
    fn steps_one_by_one_by_hand() {
        let step = |i: u64| SimDuration::from_ns(10 + i);
        assert_eq!(total(3, step).as_ns(), 10 + 11 + 12);
        // 10 + 11 = 21 < 22; 33 is not.
        assert_eq!(
            within(5, SimDuration::from_ns(22), step),
            (2, SimDuration::from_ns(21))
        );
        assert_eq!(within(2, SimDuration::from_ns(1_000), step).0, 2);
        // (1·10 + 3·11 + 5·12) with weights 1, 3, 5.
        assert_eq!(
            weighted(3, 1, 2, step),
            (SimDuration::from_ns(33), 10 + 33 + 60)
        );
        let mut ends = vec![7];
        assert_eq!(ends_within(5, SimDuration::from_ns(33), &mut ends, step), 2);
        assert_eq!(ends, [7, 10, 21]);
    }
}
