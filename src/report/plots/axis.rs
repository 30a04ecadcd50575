//! Axes: the time axis (linear in s, min or h, or logarithmic), the latency axis, and the number
//! and duration formats of their ticks and of the figures' text.
//!
//! Every axis is drawn by plotters as a plain linear range: the figures transform their data
//! (seconds to minutes, or `log10`) with the axis's `x` and give plotters explicit tick
//! positions, so one code path serves linear and logarithmic axes alike.

pub(super) use crate::report::text::thousands;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

use crate::metrics::{RunResult, Sample};

use super::{LOG_LATENCY_SPREAD, LOG_TIME_FACTOR};

/// A linear range from `lo` to `hi` with explicit major (`ticks`) and minor (`minor`) grid
/// positions.
#[derive(Clone, Debug)]
pub(super) struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl Ticked {
    /// An axis from `lo` to `hi` with the given ticks and minor grid lines.
    pub(super) fn with_ticks(lo: f64, hi: f64, ticks: Vec<f64>, minor: Vec<f64>) -> Ticked {
        Ticked {
            lo,
            hi,
            ticks,
            minor,
        }
    }

    /// A plain linear axis from `lo` to `hi` with about `max_ticks` round ticks.
    pub(super) fn linear(lo: f64, hi: f64, max_ticks: usize) -> Ticked {
        Ticked {
            lo,
            hi,
            ticks: nice_ticks(lo, hi, max_ticks),
            minor: Vec::new(),
        }
    }

    /// The text of the tick at `v`, with the decimals its step needs.
    pub(super) fn label(&self, v: f64) -> String {
        fmt_tick(v, step_of(&self.ticks))
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span.is_nan() || span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        // Clamped a little beyond the edges: lines leaving the plot are clipped, not wrapped.
        let f = ((value - self.lo) / span).clamp(-1.0, 2.0);
        limit.0 + (f64::from(limit.1 - limit.0) * f).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Tick candidates of a logarithmic time axis, seconds: about two per decade, each a round
/// number in its own unit.
const LOG_TICKS_S: [f64; 24] = [
    0.001,
    0.003,
    0.01,
    0.03,
    0.1,
    0.3,
    1.0,
    3.0,
    10.0,
    30.0,
    60.0,
    300.0,
    600.0,
    1_800.0,
    3_600.0,
    3.0 * 3_600.0,
    10.0 * 3_600.0,
    86_400.0,
    3.0 * 86_400.0,
    10.0 * 86_400.0,
    30.0 * 86_400.0,
    100.0 * 86_400.0,
    365.0 * 86_400.0,
    3650.0 * 86_400.0,
];

/// How simulated time maps to the horizontal axis: `x = t / unit_s` (linear) or
/// `x = log10(t / 1 s)` (logarithmic).
#[derive(Clone, Debug)]
pub(super) struct TimeAxis {
    /// Logarithmic?
    pub(super) log: bool,
    unit_s: f64,
    unit: &'static str,
    /// Left end, in `x`.
    pub(super) lo: f64,
    /// Right end, in `x`.
    pub(super) hi: f64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl TimeAxis {
    /// The axis for a run whose plotted points are `pts` (see the module documentation of
    /// `plots` for the rule).
    pub(super) fn for_run(r: &RunResult, pts: &[&Sample]) -> TimeAxis {
        let t_end = pts
            .iter()
            .map(|s| s.t_s)
            .fold(r.totals.sim_duration_s, f64::max)
            .max(0.0);
        let first_positive = pts.iter().map(|s| s.t_s).find(|&t| t > 0.0);
        let start_up_s = r.first_completion_s.map(|f| f.max(r.window_s));
        match (start_up_s, first_positive) {
            (Some(s), Some(first)) if s > 0.0 && t_end >= LOG_TIME_FACTOR * s => {
                TimeAxis::log(first, t_end)
            }
            _ => TimeAxis::linear(t_end),
        }
    }

    fn linear(t_end: f64) -> TimeAxis {
        let (unit_s, unit) = if t_end <= 900.0 {
            (1.0, "s")
        } else if t_end <= 36_000.0 {
            (60.0, "min")
        } else {
            (3_600.0, "h")
        };
        let hi = if t_end > 0.0 { t_end / unit_s } else { 1.0 };
        TimeAxis {
            log: false,
            unit_s,
            unit,
            lo: 0.0,
            hi,
            ticks: nice_ticks(0.0, hi, 10),
            minor: Vec::new(),
        }
    }

    fn log(first_s: f64, t_end: f64) -> TimeAxis {
        // Start at a round time just before the first point, or at the point itself.
        let lo_s = LOG_TICKS_S
            .iter()
            .copied()
            .rfind(|&c| c <= first_s && first_s <= 1.5 * c)
            .unwrap_or(first_s);
        let hi_s = t_end.max(lo_s * 10.0);
        let ticks: Vec<f64> = LOG_TICKS_S
            .iter()
            .filter(|&&c| c >= lo_s && c <= hi_s * (1.0 + 1e-9))
            .map(|c| c.log10())
            .collect();
        let mut minor = Vec::new();
        let mut decade = 10f64.powf(lo_s.log10().floor());
        while decade <= hi_s {
            for m in 1..10 {
                let v = decade * f64::from(m);
                if v >= lo_s && v <= hi_s {
                    minor.push(v.log10());
                }
            }
            decade *= 10.0;
        }
        TimeAxis {
            log: true,
            unit_s: 1.0,
            unit: "",
            lo: lo_s.log10(),
            hi: hi_s.log10(),
            ticks,
            minor,
        }
    }

    /// The axis coordinate of `t_s`, if the axis shows it.
    pub(super) fn x(&self, t_s: f64) -> Option<f64> {
        if !t_s.is_finite() || (self.log && t_s <= 0.0) {
            return None;
        }
        let x = self.raw(t_s);
        (x >= self.lo - 1e-9 && x <= self.hi + 1e-9).then_some(x)
    }

    /// The axis coordinate of `t_s`, moved onto the axis if outside it.
    pub(super) fn x_clamped(&self, t_s: f64) -> f64 {
        self.raw(t_s.max(1e-12)).clamp(self.lo, self.hi)
    }

    fn raw(&self, t_s: f64) -> f64 {
        if self.log {
            t_s.log10()
        } else {
            t_s / self.unit_s
        }
    }

    /// The range for plotters.
    pub(super) fn coord(&self) -> Ticked {
        Ticked {
            lo: self.lo,
            hi: self.hi,
            ticks: self.ticks.clone(),
            minor: self.minor.clone(),
        }
    }

    /// The text of the tick at `x`.
    pub(super) fn tick_label(&self, x: f64) -> String {
        if self.log {
            round_time(10f64.powf(x))
        } else {
            fmt_tick(x, step_of(&self.ticks))
        }
    }

    /// The axis description, with its unit.
    pub(super) fn description(&self) -> String {
        if self.log {
            "time since the start (log scale)".to_string()
        } else {
            format!("time since the start ({})", self.unit)
        }
    }

    /// Where `x` lies along the axis: 0 at the left end, 1 at the right.
    pub(super) fn fraction(&self, x: f64) -> f64 {
        (x - self.lo) / (self.hi - self.lo)
    }
}

/// The latency axis in seconds: `x = v` (linear, from 0) or `x = log10(v / 1 s)`.
#[derive(Clone, Debug)]
pub(super) struct LatencyAxis {
    /// Logarithmic?
    pub(super) log: bool,
    /// Left end, in `x`.
    pub(super) lo: f64,
    /// Right end, in `x`.
    pub(super) hi: f64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl LatencyAxis {
    /// The axis for CDF curves of `(seconds, fraction)` points.
    pub(super) fn for_curves(curves: &[&[(f64, f64)]]) -> LatencyAxis {
        let value_at = |c: &[(f64, f64)], q: f64| {
            c.iter()
                .find(|p| p.1 >= q)
                .or(c.last())
                .map_or(0.0, |p| p.0)
        };
        let non_empty = || curves.iter().filter(|c| !c.is_empty());
        let p1 = non_empty()
            .map(|c| value_at(c, 0.01))
            .fold(f64::INFINITY, f64::min);
        let p99 = non_empty().map(|c| value_at(c, 0.99)).fold(0.0, f64::max);
        let values = || {
            curves
                .iter()
                .flat_map(|c| c.iter().map(|p| p.0))
                .filter(|v| v.is_finite())
        };
        let max = values().fold(0.0, f64::max);
        let min_positive = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        if p1 > 0.0 && p99 / p1 > LOG_LATENCY_SPREAD && min_positive.is_finite() {
            let lo = min_positive.log10().floor();
            let hi = max.log10().ceil().max(lo + 1.0);
            let decades = (hi - lo).round() as i32;
            let mut ticks = Vec::new();
            let mut minor = Vec::new();
            for d in 0..=decades {
                let base = lo + f64::from(d);
                ticks.push(base);
                for m in 2..10 {
                    let v = base + f64::from(m).log10();
                    if v <= hi {
                        minor.push(v);
                        if decades <= 2 && (m == 2 || m == 5) {
                            ticks.push(v);
                        }
                    }
                }
            }
            ticks.sort_by(f64::total_cmp);
            LatencyAxis {
                log: true,
                lo,
                hi,
                ticks,
                minor,
            }
        } else {
            let hi = if max > 0.0 { max * 1.05 } else { 1.0 };
            LatencyAxis {
                log: false,
                lo: 0.0,
                hi,
                ticks: nice_ticks(0.0, hi, 10),
                minor: Vec::new(),
            }
        }
    }

    /// The axis coordinate of `v_s` seconds (values below a logarithmic axis sit at its left
    /// end).
    pub(super) fn x(&self, v_s: f64) -> f64 {
        if self.log {
            v_s.max(10f64.powf(self.lo)).log10()
        } else {
            v_s
        }
    }

    /// The range for plotters.
    pub(super) fn coord(&self) -> Ticked {
        Ticked {
            lo: self.lo,
            hi: self.hi,
            ticks: self.ticks.clone(),
            minor: self.minor.clone(),
        }
    }

    /// The text of the tick at `x`.
    pub(super) fn tick_label(&self, x: f64) -> String {
        if self.log {
            let v = 10f64.powf(x);
            fmt_tick(v, 10f64.powf(x.floor()))
        } else {
            fmt_tick(x, step_of(&self.ticks))
        }
    }

    /// The axis description, with its unit.
    pub(super) fn description(&self) -> &'static str {
        if self.log {
            "latency (s, log scale)"
        } else {
            "latency (s)"
        }
    }

    /// Where `x` lies along the axis: 0 at the left end, 1 at the right.
    pub(super) fn fraction(&self, x: f64) -> f64 {
        (x - self.lo) / (self.hi - self.lo)
    }
}

fn step_of(ticks: &[f64]) -> f64 {
    if ticks.len() >= 2 {
        ticks[1] - ticks[0]
    } else {
        1.0
    }
}

/// A round time for a logarithmic axis tick, in its natural unit: `30 s`, `5 min`, `3 h`,
/// `10 d`.
pub(super) fn round_time(t_s: f64) -> String {
    let num = |v: f64| {
        let r = (v * 1000.0).round() / 1000.0;
        if r == r.round() {
            format!("{r:.0}")
        } else {
            format!("{r}")
        }
    };
    if t_s < 60.0 - 1e-9 {
        format!("{} s", num(t_s))
    } else if t_s < 3_600.0 - 1e-9 {
        format!("{} min", num(t_s / 60.0))
    } else if t_s < 86_400.0 - 1e-9 {
        format!("{} h", num(t_s / 3_600.0))
    } else {
        format!("{} d", num(t_s / 86_400.0))
    }
}

/// A duration for text, in the unit that keeps it short: `190 s`, `51.7 min`, `28.4 h`.
pub(super) fn human_duration(t_s: f64) -> String {
    if t_s < 1.0 {
        let s = format!("{t_s:.3}");
        format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
    } else if t_s < 10.0 {
        format!("{t_s:.1} s")
    } else if t_s < 600.0 {
        format!("{t_s:.0} s")
    } else if t_s < 3.0 * 3_600.0 {
        format!("{:.1} min", t_s / 60.0)
    } else if t_s < 3.0 * 86_400.0 {
        format!("{:.1} h", t_s / 3_600.0)
    } else {
        format!("{:.1} d", t_s / 86_400.0)
    }
}

/// Ticks at a round step (1, 2 or 5 × 10^k) from `lo` to `hi`, at most about `max_n`.
pub(super) fn nice_ticks(lo: f64, hi: f64, max_n: usize) -> Vec<f64> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 {
        return vec![lo];
    }
    let raw = span / max_n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick value with as many decimals as its step needs.
pub(super) fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step < 1.0 {
        (-(step.log10() + 1e-9).floor()) as usize
    } else {
        0
    };
    let s = format!("{v:.decimals$}");
    // No "-0".
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// Three significant digits: `0.195`, `806`, `1.20`.
pub(super) fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_use_round_steps() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 10),
            (0..=10).map(f64::from).collect::<Vec<_>>()
        );
        assert_eq!(
            nice_ticks(0.0, 28.4, 10),
            vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0]
        );
        assert_eq!(nice_ticks(0.0, 0.0, 10), vec![0.0]);
    }

    #[test]
    fn numbers_are_formatted_for_reading() {
        assert_eq!(fmt_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_tick(-0.0, 0.5), "0.0");
        assert_eq!(fmt_tick(1500.0, 500.0), "1500");
        assert_eq!(sig3(0.19521), "0.195");
        assert_eq!(sig3(806.04), "806");
        assert_eq!(thousands(116_171), "116,171");
        assert_eq!(thousands(20_000), "20,000");
        assert_eq!(thousands(150), "150");
        assert_eq!(round_time(30.0), "30 s");
        assert_eq!(round_time(300.0), "5 min");
        assert_eq!(round_time(10_800.0), "3 h");
        assert_eq!(round_time(0.3), "0.3 s");
        assert_eq!(human_duration(3104.0), "51.7 min");
        assert_eq!(human_duration(190.0), "190 s");
        assert_eq!(human_duration(0.01), "0.01 s");
        assert_eq!(human_duration(0.0), "0 s");
        assert_eq!(human_duration(5.0), "5.0 s");
        assert_eq!(human_duration(102_411.0), "28.4 h");
    }

    #[test]
    fn a_long_run_gets_a_log_axis_ticked_in_round_times() {
        let axis = TimeAxis::log(32.0, 102_411.0);
        assert!(axis.log);
        let labels: Vec<String> = axis.ticks.iter().map(|&x| axis.tick_label(x)).collect();
        assert_eq!(
            labels,
            ["30 s", "1 min", "5 min", "10 min", "30 min", "1 h", "3 h", "10 h", "1 d"]
        );
        assert_eq!(axis.x(0.0), None);
        assert!((axis.x(3_600.0).unwrap() - 3_600f64.log10()).abs() < 1e-12);
    }

    #[test]
    fn a_short_run_gets_a_linear_axis_in_a_unit_fitting_its_length() {
        assert_eq!(
            TimeAxis::linear(600.0).description(),
            "time since the start (s)"
        );
        assert_eq!(
            TimeAxis::linear(3_000.0).description(),
            "time since the start (min)"
        );
        let h = TimeAxis::linear(100_000.0);
        assert_eq!(h.description(), "time since the start (h)");
        assert!((h.x(7_200.0).unwrap() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_wide_latency_spread_gets_a_log_axis() {
        let wide: Vec<(f64, f64)> = (0..=100)
            .map(|i| (0.01 * 1.1f64.powi(i), f64::from(i) / 100.0))
            .collect();
        let narrow: Vec<(f64, f64)> = (0..=100)
            .map(|i| (10.0 + f64::from(i) / 10.0, f64::from(i) / 100.0))
            .collect();
        assert!(LatencyAxis::for_curves(&[&wide]).log);
        assert!(!LatencyAxis::for_curves(&[&narrow]).log);
        assert!(!LatencyAxis::for_curves(&[&[]]).log);
    }
}
