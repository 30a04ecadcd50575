//! Simulated time: integer nanoseconds.
//!
//! Every instant and duration inside the simulator is an integer number of nanoseconds, so sums
//! are exact and runs are reproducible bit for bit. Floating-point values become times only
//! through one rounding each: a scenario's seconds when it is read, an open-loop gap as it is
//! drawn, a roofline step as it is priced; reports turn times back into seconds.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Nanoseconds in one second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// 2⁵²: every double from it on is an integer.
pub const TWO_52: f64 = 4_503_599_627_370_496.0;

/// `x.round() as u64` for `x` in `[0, 2⁵²)`, without `f64::round`'s library call (on the
/// baseline x86-64 target) nor a float-to-integer conversion and its range checks: `x + 2⁵²`
/// is `x` rounded to an integer (ties to even) in the binade whose unit is 1, so that integer
/// is its bits less 2⁵²'s; `x − (that integer)` is exact, and a tie rounded down (to even) goes
/// up instead, as `round` takes ties away from zero.
#[inline(always)]
pub fn round_below_2_52(x: f64) -> u64 {
    let shifted = x + TWO_52;
    let nearest = shifted.to_bits() - TWO_52.to_bits();
    nearest + u64::from(x - (shifted - TWO_52) >= 0.5)
}

/// An instant of simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of simulated time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    /// The start of every run.
    pub const ZERO: SimTime = SimTime(0);
    /// The latest representable instant (about 584 years).
    pub const MAX: SimTime = SimTime(u64::MAX);
    /// The latest instant a run may reach: 2⁶³ ns, about 292 years. Sums of times saturate at
    /// [`SimTime::MAX`], beyond this limit, so every instant below it is exact; the engine stops
    /// a run with an error when its next instant is not below it, rather than report clamped
    /// numbers.
    pub const LIMIT: SimTime = SimTime(1 << 63);

    /// An instant from integer nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        SimTime(ns)
    }
    /// Integer nanoseconds since the start of the run.
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    /// Seconds since the start, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    /// An instant from seconds, rounded to the nearest nanosecond. `None` if negative, not finite
    /// or beyond the representable range.
    pub fn from_secs_f64(s: f64) -> Option<Self> {
        SimDuration::from_secs_f64(s).map(|d| SimTime(d.0))
    }
    /// Time elapsed since `earlier` (zero if `earlier` is later).
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);

    /// A duration from integer nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        SimDuration(ns)
    }
    /// Integer nanoseconds.
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    /// Seconds, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NS_PER_S as f64
    }
    /// Milliseconds, for reports only.
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// A duration from seconds, rounded to the nearest nanosecond. `None` if negative, not
    /// finite or longer than about 584 years.
    pub fn from_secs_f64(s: f64) -> Option<Self> {
        if !s.is_finite() || s < 0.0 {
            return None;
        }
        let ns = (s * NS_PER_S as f64).round();
        if ns >= u64::MAX as f64 {
            return None;
        }
        Some(SimDuration(ns as u64))
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    /// Saturates at [`SimTime::MAX`] rather than wrapping.
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    /// Panics in debug builds if `other` is later than `self` (the clock never goes back).
    fn sub(self, other: SimTime) -> SimDuration {
        debug_assert!(
            self.0 >= other.0,
            "invariant: time difference must not be negative"
        );
        SimDuration(self.0.saturating_sub(other.0))
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, o: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(o.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} s", self.as_secs_f64())
    }
}

/// Days from 1970-01-01 to 2026-01-01: simulated time 0 is printed as that date in logs.
const EPOCH_DAYS: i64 = 20454;

/// A simulated instant as a calendar date and time of day, for engine log lines (simulated time
/// 0 is 2026-01-01 00:00:00).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// Year.
    pub year: i64,
    /// Month, 1–12.
    pub month: u32,
    /// Day of the month, 1–31.
    pub day: u32,
    /// Hour, 0–23.
    pub hour: u32,
    /// Minute, 0–59.
    pub minute: u32,
    /// Second, 0–59.
    pub second: u32,
}

impl SimTime {
    /// This instant on the wall clock of the logs (whole seconds).
    pub fn wall_clock(self) -> WallClock {
        let secs = (self.0 / NS_PER_S) as i64;
        let (year, month, day) = civil_from_days(EPOCH_DAYS + secs.div_euclid(86_400));
        let rem = secs.rem_euclid(86_400) as u32;
        WallClock {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
        }
    }
}

/// Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_to_the_nearest_nanosecond() {
        assert_eq!(
            SimDuration::from_secs_f64(1.5).unwrap().as_ns(),
            1_500_000_000
        );
        assert_eq!(SimDuration::from_secs_f64(1e-9 * 0.6).unwrap().as_ns(), 1);
        assert_eq!(SimDuration::from_secs_f64(-1.0), None);
        assert_eq!(SimDuration::from_secs_f64(f64::NAN), None);
        assert_eq!(SimDuration::from_secs_f64(f64::INFINITY), None);
        assert_eq!(SimDuration::from_secs_f64(1e30), None);
    }

    #[test]
    fn adding_saturates_instead_of_wrapping() {
        assert_eq!(SimTime::MAX + SimDuration::from_ns(5), SimTime::MAX);
        // A sum that saturates lands beyond the limit the engine stops at.
        let long = SimDuration::from_ns(u64::MAX / 2 + 1);
        assert!(SimTime::LIMIT + long >= SimTime::LIMIT);
        assert_eq!(SimTime::ZERO + long, SimTime::LIMIT);
    }

    #[test]
    fn the_log_wall_clock_starts_on_new_year_2026_and_rolls_over() {
        let w = SimTime::ZERO.wall_clock();
        assert_eq!((w.year, w.month, w.day, w.hour), (2026, 1, 1, 0));
        let w = SimTime::from_ns(86_400_000_000_000 * 59 + 3_661_000_000_000).wall_clock();
        assert_eq!(
            (w.year, w.month, w.day, w.hour, w.minute, w.second),
            (2026, 3, 1, 1, 1, 1)
        );
    }

    #[test]
    fn february_is_dated_in_the_year_it_belongs_to() {
        // 31 days after 2026-01-01 is 2026-02-01; 58 days and 23:59:59 later, 2026-02-28 at
        // 23:59:59 (2026 is not a leap year: the next second is 1 March).
        let day = 86_400_000_000_000;
        let w = SimTime::from_ns(31 * day).wall_clock();
        assert_eq!((w.year, w.month, w.day), (2026, 2, 1));
        let w = SimTime::from_ns(59 * day - 1_000_000_000).wall_clock();
        assert_eq!(
            (w.year, w.month, w.day, w.hour, w.minute, w.second),
            (2026, 2, 28, 23, 59, 59)
        );
        let w = SimTime::from_ns(59 * day).wall_clock();
        assert_eq!((w.year, w.month, w.day), (2026, 3, 1));
    }

    #[test]
    fn two_to_the_64_nanoseconds_is_beyond_a_duration() {
        // u64::MAX as f64 is 2⁶⁴ (the nearest double): a duration of that many nanoseconds,
        // about 584.5 years, does not fit in a u64 and is refused rather than saturated.
        let s = 2f64.powi(64) / 1e9;
        assert_eq!((s * NS_PER_S as f64).round(), 2f64.powi(64));
        assert_eq!(SimDuration::from_secs_f64(s), None);
        // 2⁶³ ns (the engine's limit) is a duration.
        let half = 2f64.powi(63) / 1e9;
        assert_eq!(
            SimDuration::from_secs_f64(half).map(SimDuration::as_ns),
            Some(1 << 63)
        );
    }
}
