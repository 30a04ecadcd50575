//! The steady window: where it starts and ends, what it measured, and the confidence interval
//! of its completion rate.
//!
//! * **Start** — the start-up clears when all but 1 % of the requests sent before the first
//!   response have been answered ([`crate::metrics::StartUp`]): until then the batch still holds
//!   requests from the start, whose mix is not the steady one (short ones finish first, so a
//!   closed loop with varied lengths completes *faster* than its steady rate for a while). From
//!   there, MSER-5 (White 1997; MSER-1 when there are fewer than 20 bins) on completions binned
//!   about ten to a bin may cut a further
//!   transient: the truncation `d` minimising `Σ_{j≥d}(y_j − ȳ_d)² / (m − d)²` over `d ≤ m/2`.
//! * **End** — exact, not guessed: the client's last send (after it the run drains), or
//!   `max_sim_s`.
//! * **Interval** — overlapping batch means (Meketon and Schmeiser 1984), Student's t with
//!   `1.5 (n/L − 1)` degrees of freedom. The batch length `L` starts at the completions'
//!   correlation time `τ = Σe² / Σe` over the window's requests (the mean time in system, each
//!   request weighted by its own time in system: a long request holds its slot, and the
//!   completions around it, that long) and doubles while three batches fit; the widest
//!   interval is kept. Batches shorter than the correlation see correlated neighbours and give
//!   intervals that are too narrow (with heavy-tailed lengths the correlation outlasts `τ`).

use serde::Serialize;

use crate::metrics::{RunResult, Sample};

/// Completions per bin aimed for when looking for a further transient.
const TARGET_COMPLETIONS_PER_BIN: f64 = 10.0;
/// A window shorter than this many correlation times gives an interval not to be trusted.
pub const RELIABLE_CORRELATION_TIMES: f64 = 4.0;
/// Fewer completions than this in the window give an interval not to be trusted.
pub const RELIABLE_COMPLETIONS: u64 = 50;

/// What a stretch of the run measured, from the client's and the server's time integrals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Span {
    /// Start, seconds.
    pub start_s: f64,
    /// End, seconds.
    pub end_s: f64,
    /// Completions inside it.
    pub completions: u64,
    /// Completions per second.
    pub req_per_s: f64,
    /// Output tokens generated per second.
    pub output_tok_per_s: f64,
    /// `L`: time-averaged requests in flight (sent, not answered).
    pub little_l_requests: f64,
    /// `W`: mean end-to-end seconds of the requests completed inside it.
    pub little_w_s: f64,
    /// `L / W`.
    pub little_law_req_per_s: f64,
    /// `output_tok_per_s ÷ mean output tokens`.
    pub tokens_req_per_s: f64,
    /// Time-averaged running requests.
    pub mean_running: f64,
    /// Time-averaged queued requests.
    pub mean_queued: f64,
    /// Time-averaged token usage.
    pub mean_token_usage: f64,
    /// Fraction of the time the server's waiting queue was not empty.
    pub queue_busy_fraction: f64,
    /// Requests the client had to send per second (open loop: arrivals; closed loop: sends).
    pub arrival_req_per_s: f64,
    /// Requests the client had and no answer for (in flight or waiting for a slot), at the
    /// start.
    pub backlog_start: u64,
    /// The same at the end.
    pub backlog_end: u64,
    /// The completions' correlation time `τ = Σe² / Σe` over the requests completed inside
    /// it, seconds.
    pub correlation_s: f64,
}

impl Span {
    /// Measure the stretch between two snapshots.
    pub fn between(r: &RunResult, a: &Sample, b: &Sample) -> Span {
        let dt = b.t_s - a.t_s;
        let per_s = |x: f64| if dt > 0.0 { x / dt } else { 0.0 };
        let completions = b.completed.saturating_sub(a.completed);
        let sum_e2e = b.sum_e2e_s - a.sum_e2e_s;
        let w = if completions > 0 {
            sum_e2e / completions as f64
        } else {
            0.0
        };
        let l = per_s(b.in_flight_integral_s - a.in_flight_integral_s);
        let gen = per_s((b.generated_tokens - a.generated_tokens) as f64);
        let mean_out = r.output_tokens.mean();
        Span {
            start_s: a.t_s,
            end_s: b.t_s,
            completions,
            req_per_s: per_s(completions as f64),
            output_tok_per_s: gen,
            little_l_requests: l,
            little_w_s: w,
            little_law_req_per_s: if w > 0.0 { l / w } else { 0.0 },
            tokens_req_per_s: if mean_out > 0.0 { gen / mean_out } else { 0.0 },
            mean_running: per_s(b.running_integral_s - a.running_integral_s),
            mean_queued: per_s(b.queued_integral_s - a.queued_integral_s),
            mean_token_usage: per_s(b.kv_integral_token_s - a.kv_integral_token_s)
                / r.kv_capacity_tokens as f64,
            queue_busy_fraction: per_s(b.queue_busy_s - a.queue_busy_s),
            arrival_req_per_s: per_s(b.arrived.saturating_sub(a.arrived) as f64),
            backlog_start: a.backlog,
            backlog_end: b.backlog,
            correlation_s: if sum_e2e > 0.0 {
                (b.sum_e2e_sq_s2 - a.sum_e2e_sq_s2) / sum_e2e
            } else {
                0.0
            },
        }
    }

    /// How fast the backlog grew, requests per second (negative: it shrank).
    pub fn backlog_growth_req_per_s(&self) -> f64 {
        let dt = self.end_s - self.start_s;
        if dt > 0.0 {
            (self.backlog_end as f64 - self.backlog_start as f64) / dt
        } else {
            0.0
        }
    }
}

/// The 95 % confidence interval of a window's completion rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Low and high ends, req/s.
    pub req_per_s_ci95: [f64; 2],
    /// The batch length, seconds (at least the correlation time, unless the window is too short
    /// for three such batches: then up to half the window).
    pub batch_s: f64,
    /// Overlapping batches behind it.
    pub batches: u64,
    /// Degrees of freedom of its Student's t.
    pub degrees_of_freedom: u64,
}

/// The window found: its first and last snapshots.
pub struct Found<'a> {
    /// The start (the start-up's snapshot or a time-series point).
    pub start: &'a Sample,
    /// The end (the last time-series point before the drain).
    pub end: &'a Sample,
    /// The time-series points inside, from the first at or after `start` to `end`.
    pub grid: &'a [Sample],
    /// Whether MSER cut a transient after the start-up.
    pub mser_cut: bool,
}

/// The window from the start-up snapshot `startup` to the last point at or before `drain_s`, if
/// one is left.
pub fn find<'a>(r: &'a RunResult, startup: &'a Sample, drain_s: f64) -> Option<Found<'a>> {
    let s = &r.samples;
    let from = s.partition_point(|p| p.t_s < startup.t_s);
    let to = s.partition_point(|p| p.t_s <= drain_s);
    if to <= from {
        return None;
    }
    let pts = &s[from..to];
    let end = pts.last()?;
    if end.t_s <= startup.t_s {
        return None;
    }
    // A further transient: MSER on bins of about ten completions.
    let n_int = pts.len() - 1;
    let total = end.completed.saturating_sub(pts[0].completed) as f64;
    let k = if total > 0.0 {
        ((TARGET_COMPLETIONS_PER_BIN * n_int as f64 / total).ceil() as usize)
            .clamp(1, (n_int / 10).max(1))
    } else {
        1
    };
    let edges: Vec<usize> = (0..=n_int).step_by(k).collect();
    let rates: Vec<f64> = edges
        .windows(2)
        .map(|w| rate(&pts[w[0]], &pts[w[1]]))
        .collect();
    let cut = mser(&rates, if rates.len() >= 20 { 5 } else { 1 });
    let cut_at = edges.get(cut).copied().unwrap_or(0);
    if cut_at > 0 && cut_at < n_int {
        return Some(Found {
            start: &pts[cut_at],
            end,
            grid: &pts[cut_at..],
            mser_cut: true,
        });
    }
    Some(Found {
        start: startup,
        end,
        grid: pts,
        mser_cut: false,
    })
}

/// The time-series points from the first at or after `from_s` to the last at or before
/// `to_s`, if there are at least two.
pub fn points(r: &RunResult, from_s: f64, to_s: f64) -> Option<&[Sample]> {
    let s = &r.samples;
    let from = s.partition_point(|p| p.t_s < from_s);
    let to = s.partition_point(|p| p.t_s <= to_s);
    (to >= from + 2).then(|| &s[from..to])
}

fn rate(a: &Sample, b: &Sample) -> f64 {
    let dt = b.t_s - a.t_s;
    if dt > 0.0 {
        (b.completed - a.completed) as f64 / dt
    } else {
        0.0
    }
}

/// The overlapping-batch-means interval of `rate` over the evenly spaced points `grid`, with
/// batches of at least `correlation_s` seconds; `None` with fewer than two intervals of the
/// grid.
///
/// Heavy-tailed requests make completions correlated over longer than `correlation_s` (one
/// long request holds its slot, and depresses the completions, for minutes): batch lengths
/// from `correlation_s` up, doubling while at least three fit in the window, are tried, and
/// the widest interval is kept — short batches that see correlated neighbours would give one
/// that is too narrow.
pub fn interval(grid: &[Sample], rate: f64, correlation_s: f64) -> Option<Interval> {
    let n = grid.len().checked_sub(1).filter(|&n| n >= 2)?;
    let step = (grid[n].t_s - grid[0].t_s) / n as f64;
    let first = if step > 0.0 {
        ((correlation_s / step).ceil() as usize).max(1)
    } else {
        1
    };
    let mut lengths: Vec<usize> = std::iter::successors(Some(first), |l| Some(l * 2))
        .take_while(|&l| l <= n / 3)
        .collect();
    if lengths.is_empty() {
        lengths.push(first.min(n / 2).max(1));
    }
    lengths
        .into_iter()
        .map(|l| obm(grid, rate, l, step))
        .max_by(|a, b| {
            let half = |i: &Interval| i.req_per_s_ci95[1] - rate;
            half(a).total_cmp(&half(b))
        })
}

/// Overlapping batch means with batches of `l` grid intervals of `step` seconds.
fn obm(grid: &[Sample], rate: f64, l: usize, step: f64) -> Interval {
    let n = grid.len() - 1;
    let sum_sq: f64 = (0..=n - l)
        .map(|i| (self::rate(&grid[i], &grid[i + l]) - rate).powi(2))
        .sum();
    let var_mean = l as f64 / ((n - l + 1) as f64 * (n - l) as f64) * sum_sq;
    let df = ((1.5 * (n as f64 / l as f64 - 1.0)).floor() as u64).max(1);
    let half = t975(df as usize) * var_mean.sqrt();
    Interval {
        req_per_s_ci95: [(rate - half).max(0.0), rate + half],
        batch_s: l as f64 * step,
        batches: (n - l + 1) as u64,
        degrees_of_freedom: df,
    }
}

/// MSER-`batch`: the index (in bins) where the warm-up ends.
pub fn mser(bins: &[f64], batch: usize) -> usize {
    let ys: Vec<f64> = bins
        .chunks(batch)
        .filter(|c| c.len() == batch)
        .map(|c| c.iter().sum::<f64>() / batch as f64)
        .collect();
    let m = ys.len();
    if m < 4 {
        return 0;
    }
    let mut best = (f64::INFINITY, 0usize);
    for d in 0..=m / 2 {
        let tail = &ys[d..];
        let n = tail.len() as f64;
        let mean = tail.iter().sum::<f64>() / n;
        let ss = tail.iter().map(|y| (y - mean).powi(2)).sum::<f64>();
        let stat = ss / (n * n);
        if stat < best.0 {
            best = (stat, d);
        }
    }
    best.1 * batch
}

/// Student's t, 97.5 % quantile, for `df` degrees of freedom: the table's three decimals up to
/// 30, then `1.960 + 2.4 / df`, within 0.003 of the quantile there.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 1.960 + 2.4 / df as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mser_cuts_a_transient() {
        let mut bins = vec![0.0; 20];
        bins.extend(std::iter::repeat_n(1.0, 80));
        let d = mser(&bins, 5);
        assert_eq!(d, 20);
    }

    #[test]
    fn mser_keeps_a_stationary_series() {
        let bins: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.0 } else { 1.2 })
            .collect();
        assert_eq!(mser(&bins, 5), 0);
    }

    #[test]
    fn mser_may_cut_exactly_half_the_series() {
        // Ten 0s then ten 1s: cutting the ten 0s, half the means and the most MSER cuts, leaves
        // a constant tail, a statistic of 0; every shorter cut leaves some 0s, and a larger statistic.
        let bins: Vec<f64> = (0..20).map(|i| if i < 10 { 0.0 } else { 1.0 }).collect();
        assert_eq!(mser(&bins, 1), 10);
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(19), 2.093);
        assert!((t975(1000) - 1.96).abs() < 0.01);
    }

    #[test]
    fn t_quantiles_beyond_the_table_are_within_three_thousandths() {
        // The published quantiles for 31, 40, 60 and 120 degrees of freedom; 1.960 alone would
        // be 0.04 off at 60.
        for (df, t) in [(31, 2.040), (40, 2.021), (60, 2.000), (120, 1.980)] {
            assert!((t975(df) - t).abs() < 0.003, "{df}: {}", t975(df));
        }
    }

    fn grid(counts: &[u64]) -> Vec<Sample> {
        let mut completed = 0;
        let mut out = Vec::new();
        for (i, c) in std::iter::once(&0).chain(counts).enumerate() {
            completed += c;
            out.push(Sample {
                t_s: i as f64,
                running: 0,
                queued: 0,
                kv_used_tokens: 0,
                token_usage: 0.0,
                gen_tok_per_s: 0.0,
                completed,
                lifetime_req_per_s: 0.0,
                window_req_per_s: 0.0,
                in_flight: 0,
                generated_tokens: 0,
                arrived: 0,
                backlog: 0,
                sum_e2e_s: 0.0,
                sum_e2e_sq_s2: 0.0,
                in_flight_integral_s: 0.0,
                running_integral_s: 0.0,
                queued_integral_s: 0.0,
                kv_integral_token_s: 0.0,
                queue_busy_s: 0.0,
                completed_output_tokens: 0,
                completed_prompt_tokens: 0,
                completed_cached_tokens: 0,
            });
        }
        out
    }

    #[test]
    fn overlapping_batch_means_by_hand() {
        // Completions 1, 3, 1, 3, 1, 3 per second: rate 2. With 1-s batches: six batch means,
        // each 1 away from the mean; OBM variance of the mean = 1/(6·5) × 6 = 1/5, df = 1.5 × 5
        // = 7. With 2-s batches every batch mean is 2: a zero-width interval. The wider is kept.
        let g = grid(&[1, 3, 1, 3, 1, 3]);
        let i = interval(&g, 2.0, 1.0).unwrap();
        assert_eq!((i.batches, i.degrees_of_freedom, i.batch_s), (6, 7, 1.0));
        let half = 2.365 * (1.0f64 / 5.0).sqrt();
        assert!((i.req_per_s_ci95[1] - (2.0 + half)).abs() < 1e-12, "{i:?}");
        assert!((i.req_per_s_ci95[0] - (2.0 - half)).abs() < 1e-12, "{i:?}");
        // Starting at 2-s batches (the only length with three batches) gives the zero width.
        let i = interval(&g, 2.0, 2.0).unwrap();
        assert_eq!((i.batches, i.degrees_of_freedom), (5, 3));
        assert_eq!(i.req_per_s_ci95, [2.0, 2.0]);
        // A slow swing (1, 1, 1, 3, 3, 3) is invisible to 1-s batches but not to 2-s ones,
        // whose wider interval wins.
        let g = grid(&[1, 1, 1, 3, 3, 3]);
        let i = interval(&g, 2.0, 1.0).unwrap();
        assert_eq!(i.batch_s, 2.0);
        // A window shorter than three batches uses half the window; one interval has none.
        assert_eq!(interval(&g, 2.0, 100.0).unwrap().batch_s, 3.0);
        assert!(interval(&grid(&[5]), 5.0, 1.0).is_none());
    }

    #[test]
    fn an_interval_wider_than_the_rate_stops_at_zero() {
        // Four completions in the first of six seconds: rate 2/3. One-second batches: means 4
        // and five 0s, Σ(x − 2/3)² = 100/9 + 5 × 4/9 = 40/3, variance 1/(6·5) × 40/3 = 4/9,
        // df 7, half 2.365 × 2/3 = 1.577. Two-second batches: means 2 and four 0s,
        // Σ = 16/9 + 4 × 4/9 = 32/9, variance 2/(5·4) × 32/9 = 16/45, df 3, half 3.182 × 0.596
        // = 1.897, the wider. Its low end, 2/3 − 1.897, is no rate: 0.
        let i = interval(&grid(&[4, 0, 0, 0, 0, 0]), 4.0 / 6.0, 1.0).unwrap();
        assert_eq!(i.batch_s, 2.0);
        assert_eq!(i.req_per_s_ci95[0], 0.0);
        let half = 3.182 * (16.0f64 / 45.0).sqrt();
        assert!(
            (i.req_per_s_ci95[1] - (4.0 / 6.0 + half)).abs() < 1e-12,
            "{i:?}"
        );
    }
}
