//! The one axis type — linear or logarithmic, ticked by one routine — and the number and
//! duration formats of the figures' text. An axis holds values: plotters maps each through
//! [`Ranged::map`], so figures draw their data as it is on either scale.

pub(super) use crate::report::text::thousands;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// Linear or logarithmic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Scale {
    #[default]
    Linear,
    /// For positive values; others sit below the axis.
    Log,
}

/// How tick labels read.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) enum Labels {
    /// Numbers with the decimals their step needs; thousands separated.
    #[default]
    Number,
    /// Numbers after a `$`.
    Dollars,
    /// Seconds: round times in their unit on a log axis (`30 s`, `5 min`, `1 d`), numbers of
    /// the axis's unit on a linear one.
    Time,
    /// The name of each whole position 0, 1, …; nothing between them.
    Names(Vec<String>),
}

/// An axis from `lo` to `hi` with its ticks (labelled grid lines) and minor grid lines.
#[derive(Clone, Debug, Default)]
pub(super) struct Axis {
    pub(super) scale: Scale,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Linear ticks are round numbers of this unit (60 for minutes).
    unit: f64,
    labels: Labels,
    max_ticks: usize,
    pub(super) ticks: Vec<f64>,
    minor: Vec<f64>,
}

const M: f64 = 60.0;
const H: f64 = 3_600.0;
const D: f64 = 86_400.0;
/// Tick candidates of a logarithmic time axis, seconds: round times in their own unit.
const LOG_TICKS_S: [f64; 22] = [
    1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0,
    10800.0, 36000.0, 86400.0, 259200.0, 864000.0, 2592000.0, 8640000.0,
];

impl Axis {
    /// A linear axis from `lo` to `hi` with at most about `max_ticks` round ticks.
    pub(super) fn linear(lo: f64, hi: f64, max_ticks: usize) -> Axis {
        Axis::new(Scale::Linear, lo, hi, max_ticks)
    }

    /// A logarithmic axis from `lo` to `hi` with at most about `max_ticks` ticks at 1, 2 and 5
    /// per decade, or fewer (more, 1, 2, 3, 5 and 7, when 1, 2 and 5 would give fewer than
    /// three).
    pub(super) fn log(lo: f64, hi: f64, max_ticks: usize) -> Axis {
        Axis::new(Scale::Log, lo, hi, max_ticks)
    }

    fn new(scale: Scale, lo: f64, hi: f64, max_ticks: usize) -> Axis {
        let hi = if hi.is_finite() { hi } else { 1.0 };
        let lo = match scale {
            Scale::Log if !(lo > 0.0 && lo.is_finite()) => hi.max(1e-9) / 10.0,
            _ if !lo.is_finite() => 0.0,
            _ => lo,
        };
        let hi = if hi > lo { hi } else { lo + 1.0 };
        let mut axis = Axis::default();
        (axis.scale, axis.lo, axis.hi) = (scale, lo, hi);
        (axis.max_ticks, axis.unit) = (max_ticks, 1.0);
        axis.ticked()
    }

    /// The same axis with tick labels read as `labels`.
    pub(super) fn with(self, labels: Labels) -> Axis {
        Axis { labels, ..self }.ticked()
    }

    /// The same axis with linear ticks at round numbers of `unit`.
    pub(super) fn in_unit(self, unit: f64) -> Axis {
        Axis { unit, ..self }.ticked()
    }

    /// The same axis with at most about `max_ticks` ticks.
    pub(super) fn at_most(self, max_ticks: usize) -> Axis {
        Axis { max_ticks, ..self }.ticked()
    }

    /// The same axis reaching up to `hi`.
    pub(super) fn up_to(self, hi: f64) -> Axis {
        Axis { hi, ..self }.ticked()
    }

    /// The one tick routine: round steps of 1, 2 or 5 × 10^k on a linear axis (whole ones for
    /// names); on a log axis round times, or 1, 2 and 5 per decade thinned to 1 and 3, then 1,
    /// until few enough (1, 2, 3, 5 and 7 when 1, 2 and 5 give fewer than three).
    fn ticked(mut self) -> Axis {
        let (lo, hi, u) = (self.lo, self.hi, self.unit);
        let max = match &self.labels {
            Labels::Names(names) => self.max_ticks.min(names.len().max(1)),
            _ => self.max_ticks,
        };
        if self.scale == Scale::Linear {
            let ticks = nice_ticks(lo / u, hi / u, max);
            self.ticks = ticks.iter().map(|t| t * u).collect();
            return self;
        }
        let inside = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
        let decades = (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32);
        let at = |ms: &[f64]| -> Vec<f64> {
            let scaled = |d: i32| ms.iter().map(move |m| m * 10f64.powi(d));
            decades.clone().flat_map(scaled).filter(inside).collect()
        };
        self.minor = at(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        let options = [at(&[1.0, 2.0, 5.0]), at(&[1.0, 3.0]), at(&[1.0])];
        self.ticks = if self.labels == Labels::Time {
            LOG_TICKS_S.into_iter().filter(inside).collect()
        } else if options[0].len() < 3 {
            at(&[1.0, 2.0, 3.0, 5.0, 7.0])
        } else {
            let fits = options.iter().find(|t| t.len() <= max);
            fits.unwrap_or(&options[2]).clone()
        };
        self
    }

    /// The text of the tick at `v`.
    pub(super) fn label(&self, v: f64) -> String {
        let whole = (v - v.round()).abs() < 1e-6 && v > -0.5;
        match &self.labels {
            Labels::Names(names) if whole => names.get(v.round() as usize).cloned(),
            Labels::Names(_) => None,
            Labels::Time if self.scale == Scale::Log => Some(round_time(v)),
            Labels::Dollars => Some(format!("${}", self.number(v))),
            _ => Some(self.number(v)),
        }
        .unwrap_or_default()
    }

    fn number(&self, v: f64) -> String {
        let u = v / self.unit;
        let step = match (self.scale, &self.ticks[..]) {
            (Scale::Log, _) => 10f64.powf(u.abs().max(1e-12).log10().floor()),
            (Scale::Linear, [a, b, ..]) => (b - a) / self.unit,
            _ => 1.0,
        };
        if step >= 1.0 && u >= 999.5 {
            thousands(u.round() as u64)
        } else {
            fmt_tick(u, step)
        }
    }

    /// Whether `v` lies on the axis.
    pub(super) fn shows(&self, v: f64) -> bool {
        let tol = 1e-9 * (self.hi - self.lo).abs();
        v.is_finite() && v >= self.lo - tol && v <= self.hi + tol
    }

    fn coord(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log => v.max(1e-12).log10(),
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (lo, hi) = (self.coord(self.lo), self.coord(self.hi));
        // Clamped a little beyond the edges: lines leaving the plot are clipped, not wrapped.
        let f = ((self.coord(*value) - lo) / (hi - lo)).clamp(-1.0, 2.0);
        let f = if f.is_nan() { 0.5 } else { f };
        limit.0 + (f64::from(limit.1 - limit.0) * f).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let light = hint.weight().allow_light_points();
        if light { &self.minor } else { &self.ticks }.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
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
    let steps = [1.0, 2.0, 5.0, 10.0].map(|m| m * mag);
    let step = steps.into_iter().find(|s| *s >= raw * (1.0 - 1e-9));
    let step = step.unwrap_or(10.0 * mag);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// A tick value with as many decimals as its step needs (no `-0`).
pub(super) fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = (-(step.log10() + 1e-9).floor()).clamp(0.0, 12.0) as usize;
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
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

/// A round time in its natural unit: `30 s`, `5 min`, `3 h`, `10 d`.
pub(super) fn round_time(t_s: f64) -> String {
    let (v, unit) = match t_s {
        t if t < M - 1e-9 => (t, "s"),
        t if t < H - 1e-9 => (t / M, "min"),
        t if t < D - 1e-9 => (t / H, "h"),
        t => (t / D, "d"),
    };
    format!("{} {unit}", (v * 1000.0).round() / 1000.0)
}

/// A duration for text, in the unit that keeps it short: `190 s`, `51.7 min`, `28.4 h`.
pub(super) fn human_duration(t_s: f64) -> String {
    match t_s {
        t if t < 1.0 => {
            let s = format!("{t:.3}");
            format!("{} s", s.trim_end_matches('0').trim_end_matches('.'))
        }
        t if t < 10.0 => format!("{t:.1} s"),
        t if t < 600.0 => format!("{t:.0} s"),
        t if t < 3.0 * H => format!("{:.1} min", t / M),
        t if t < 3.0 * D => format!("{:.1} h", t / H),
        t => format!("{:.1} d", t / D),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tick labels of `a`, joined by `|`.
    fn ticks(a: Axis) -> String {
        let labels: Vec<String> = a.ticks.iter().map(|&t| a.label(t)).collect();
        labels.join("|")
    }

    #[test]
    fn linear_ticks_are_round_steps_in_the_axis_unit() {
        assert_eq!(ticks(Axis::linear(0.0, 10.0, 5)), "0|2|4|6|8|10");
        assert_eq!(ticks(Axis::linear(0.0, 0.3, 3)), "0.0|0.1|0.2|0.3");
        let minutes = Axis::linear(0.0, 3_000.0, 6).with(Labels::Time);
        assert_eq!(ticks(minutes.in_unit(60.0)), "0|10|20|30|40|50");
        let money = Axis::linear(0.0, 9_000.0, 5).with(Labels::Dollars);
        assert!(ticks(money).contains("|$4,000|"));
        assert_eq!(ticks(Axis::linear(0.0, 1.0, 2).up_to(2.0)), "0|1|2");
        let names = Labels::Names(vec!["a".into(), "b".into()]);
        assert_eq!(ticks(Axis::linear(-0.5, 1.5, 9).with(names)), "a|b");
    }

    #[test]
    fn log_ticks_thin_out_to_fit_and_time_axes_tick_round_times() {
        let money = Axis::log(0.5, 40.0, 8).with(Labels::Dollars);
        assert_eq!(ticks(money), "$0.5|$1|$2|$5|$10|$20");
        assert_eq!(ticks(Axis::log(0.001, 10.0, 6)), "0.001|0.01|0.1|1|10");
        let t = Axis::log(30.0, 102_411.0, 10).with(Labels::Time);
        let round = "30 s|1 min|5 min|10 min|30 min|1 h|3 h|10 h|1 d";
        assert_eq!(ticks(t), round);
    }

    #[test]
    fn values_map_linearly_or_by_their_logarithm() {
        assert_eq!(Axis::linear(0.0, 10.0, 5).map(&5.0, (0, 100)), 50);
        let log = Axis::log(1.0, 100.0, 5);
        assert_eq!(log.map(&10.0, (0, 100)), 50);
        assert_eq!(log.map(&0.0, (0, 100)), -100, "clamped below");
        assert!(log.shows(100.0) && !log.shows(0.5));
    }

    #[test]
    fn numbers_and_durations_are_formatted_for_reading() {
        assert_eq!(fmt_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_tick(-0.0, 0.5), "0.0");
        assert_eq!([0.19521, 806.04].map(sig3), ["0.195", "806"]);
        let times = [300.0, 10_800.0, 0.3].map(round_time).join("|");
        assert_eq!(times, "5 min|3 h|0.3 s");
        let durations = [3104.0, 190.0, 0.01, 0.0, 5.0, 102_411.0].map(human_duration);
        let durations = durations.join("|");
        assert_eq!(durations, "51.7 min|190 s|0.01 s|0 s|5.0 s|28.4 h");
    }
}
