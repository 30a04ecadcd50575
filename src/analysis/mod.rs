//! From a run's time series to the steady state, its confidence interval, the Little's-law
//! cross-check and the convergence of the lifetime average. Pure functions of a [`RunResult`].
//!
//! * **Drain** — exact, not guessed: the client sends its last request at `last_send`; after
//!   that the number in flight can only fall. The steady window ends there (or at `max_sim_s`).
//! * **Warm-up** — MSER-5 (White 1997; the marginal standard error rule on batches of five):
//!   completions are binned (about ten per bin), grouped in fives, and the truncation point `d`
//!   minimising `Σ_{j≥d}(y_j − ȳ_d)² / (m − d)²` over `d ≤ m/2` ends the warm-up.
//! * **Rate and interval** — the steady rate is the completions in the window over its length;
//!   the 95 % interval comes from batch means (up to 20 equal batches, Student's t).
//! * **Little's law** — `λ = L / W` with `L` the time-averaged requests in flight and `W` the
//!   mean end-to-end time of the requests completed in the window.
//! * **Convergence** — the first time after which the lifetime average stays within 5 % of the
//!   steady rate, measured on the time series; and the estimate `20 × |d|`, where the start-up
//!   deficit `d = T − completed(T)/rate` makes the lifetime average `rate × (1 − d/T)`.

use serde::Serialize;

use crate::metrics::{RunResult, Sample, StopReason};

/// Completions per bin aimed for when detecting the warm-up.
const TARGET_COMPLETIONS_PER_BIN: f64 = 10.0;
/// Most batches used for the batch-means interval.
const MAX_BATCHES: usize = 20;
/// The convergence tolerance.
pub const CONVERGENCE_TOLERANCE: f64 = 0.05;

/// The steady state of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SteadyState {
    /// Completions per second in the steady window.
    pub req_per_s: f64,
    /// 95 % confidence interval by batch means.
    pub req_per_s_ci95: [f64; 2],
    /// Batches behind the interval.
    pub ci_batches: u64,
    /// Output tokens generated per second in the window.
    pub output_tok_per_s: f64,
    /// Start of the window (end of the warm-up), seconds.
    pub start_s: f64,
    /// End of the window (start of the drain), seconds.
    pub end_s: f64,
    /// `L / W`.
    pub little_law_req_per_s: f64,
    /// `L`: time-averaged requests in flight in the window.
    pub little_l_requests: f64,
    /// `W`: mean end-to-end seconds of the requests completed in the window.
    pub little_w_s: f64,
    /// `output_tok_per_s ÷ mean output tokens`.
    pub tokens_req_per_s: f64,
    /// Time-averaged running requests in the window.
    pub mean_running: f64,
    /// Time-averaged queued requests in the window.
    pub mean_queued: f64,
    /// Time-averaged token usage in the window.
    pub mean_token_usage: f64,
    /// Fraction of the window during which the server's waiting queue was not empty.
    pub queue_busy_fraction: f64,
    /// Completions inside the window.
    pub completions: u64,
    /// Whether the window is long enough to trust (at least 10 bins and 50 completions).
    pub reliable: bool,
    /// Why it is not, or what to keep in mind.
    pub note: Option<String>,
}

/// When the lifetime average gets within 5 % of the steady rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Convergence {
    /// Measured on the time series, if it happened before the drain.
    pub lifetime_within_5pct_at_s: Option<f64>,
    /// `20 × |deficit|`.
    pub estimated_s: f64,
    /// The start-up deficit `d` in seconds (positive: the lifetime average lags).
    pub deficit_s: f64,
}

/// What limits the batch in the steady state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// Requests wait in the server's queue and the batch is below the slot limit: admission
    /// stops because the next request does not fit in the KV budget.
    KvBudget,
    /// Requests wait and the batch is at `max_running_requests`.
    MaxRunningRequests,
    /// The server admits everything it gets, and the client keeps its concurrency limit full.
    ClientConcurrency,
    /// The server admits everything it gets and the client is not at a limit: the batch is
    /// arrivals × time in service, and time in service is set by the step time.
    StepTime,
}

impl Constraint {
    /// Words for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Constraint::KvBudget => "the KV budget",
            Constraint::MaxRunningRequests => "max_running_requests",
            Constraint::ClientConcurrency => "the client's concurrency limit",
            Constraint::StepTime => "the step time (with the arrival rate)",
        }
    }
}

/// What binds the batch, with the evidence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Binding {
    /// The constraint.
    pub constraint: Constraint,
    /// Fraction of the steady window with requests waiting in the server's queue.
    pub queue_busy_fraction: f64,
    /// Mean running requests in the window.
    pub mean_running: f64,
    /// The slot limit.
    pub max_running_requests: u64,
    /// Mean requests in flight (client view).
    pub mean_in_flight: f64,
    /// The client's concurrency limit.
    pub client_concurrency: Option<u64>,
    /// Mean token usage in the window.
    pub mean_token_usage: f64,
    /// Admission passes stopped by the KV budget, over the whole run.
    pub memory_stops: u64,
    /// Admission passes stopped by the slot limit, over the whole run.
    pub slot_stops: u64,
    /// Retractions over the whole run.
    pub retractions: u64,
}

/// Everything derived from a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// The steady state.
    pub steady: SteadyState,
    /// Convergence of the lifetime average.
    pub convergence: Convergence,
    /// What binds the batch.
    pub binding: Binding,
}

/// Analyse a run.
pub fn analyse(r: &RunResult) -> Analysis {
    let steady = steady_state(r);
    let convergence = convergence(r, &steady);
    let binding = binding(r, &steady);
    Analysis {
        steady,
        convergence,
        binding,
    }
}

/// The queue-busy fraction above which requests are said to wait for the server.
const QUEUE_BOUND: f64 = 0.5;
/// How close to a limit counts as at the limit.
const AT_LIMIT: f64 = 0.95;

fn binding(r: &RunResult, s: &SteadyState) -> Binding {
    let constraint = if s.queue_busy_fraction >= QUEUE_BOUND {
        if s.mean_running >= AT_LIMIT * r.max_running_requests as f64 {
            Constraint::MaxRunningRequests
        } else {
            Constraint::KvBudget
        }
    } else {
        match r.client_concurrency {
            Some(c) if s.little_l_requests >= AT_LIMIT * c as f64 => Constraint::ClientConcurrency,
            _ => Constraint::StepTime,
        }
    };
    Binding {
        constraint,
        queue_busy_fraction: s.queue_busy_fraction,
        mean_running: s.mean_running,
        max_running_requests: r.max_running_requests,
        mean_in_flight: s.little_l_requests,
        client_concurrency: r.client_concurrency,
        mean_token_usage: s.mean_token_usage,
        memory_stops: r.counters.memory_stops,
        slot_stops: r.counters.slot_stops,
        retractions: r.totals.retractions,
    }
}

/// The sample at or just before `t` (the first sample if none).
fn at_or_before(samples: &[Sample], t: f64) -> &Sample {
    let i = samples.partition_point(|s| s.t_s <= t);
    &samples[i.saturating_sub(1)]
}

fn steady_state(r: &RunResult) -> SteadyState {
    let samples = &r.samples;
    let run_end = r.totals.sim_duration_s;
    let drain_at = match r.stop {
        StopReason::MaxSimTime => run_end,
        StopReason::AllAnswered => r.last_send_s.unwrap_or(0.0),
    };
    let mut notes: Vec<String> = Vec::new();
    // Points of the window candidates: samples up to the drain.
    let mut upto = samples.partition_point(|s| s.t_s <= drain_at);
    if upto < 3 {
        notes.push(
            "the client sent every request at once (no more requests than concurrency): \
             there is no steady phase, so the whole run is used"
                .to_string(),
        );
        upto = samples.len();
    }
    let pts = &samples[..upto];
    let n_int = pts.len().saturating_sub(1);
    let end = pts
        .last()
        .expect("invariant: a run has at least one sample");
    let total = end.completed as f64;

    // Bins of k sample intervals with about ten completions each, and at least ten bins.
    let k = if total > 0.0 {
        ((TARGET_COMPLETIONS_PER_BIN * n_int as f64 / total).ceil() as usize)
            .clamp(1, (n_int / 10).max(1))
    } else {
        1
    };
    let bin_edges: Vec<usize> = (0..=n_int).step_by(k).collect();
    let rates: Vec<f64> = bin_edges
        .windows(2)
        .map(|w| rate(&pts[w[0]], &pts[w[1]]))
        .collect();
    let start_bin = mser(&rates, if rates.len() >= 20 { 5 } else { 1 });
    let start_idx = bin_edges.get(start_bin).copied().unwrap_or(0);
    let start = &pts[start_idx];

    let dt = end.t_s - start.t_s;
    let dc = end.completed.saturating_sub(start.completed);
    let req_per_s = if dt > 0.0 { dc as f64 / dt } else { 0.0 };

    // Batch means over the window.
    let win_bins = bin_edges.len().saturating_sub(1).saturating_sub(start_bin);
    let nb = win_bins.min(MAX_BATCHES);
    let ci = if nb >= 2 {
        let idx: Vec<usize> = (0..=nb)
            .map(|j| start_idx + (end_index(pts, end) - start_idx) * j / nb)
            .collect();
        let br: Vec<f64> = idx
            .windows(2)
            .map(|w| rate(&pts[w[0]], &pts[w[1]]))
            .collect();
        let m = br.iter().sum::<f64>() / nb as f64;
        let var = br.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (nb - 1) as f64;
        let half = t975(nb - 1) * (var / nb as f64).sqrt();
        [(req_per_s - half).max(0.0), req_per_s + half]
    } else {
        notes.push("too few bins for a confidence interval".to_string());
        [req_per_s, req_per_s]
    };

    let gen_per_s = if dt > 0.0 {
        (end.generated_tokens - start.generated_tokens) as f64 / dt
    } else {
        0.0
    };
    let l = if dt > 0.0 {
        (end.in_flight_integral_s - start.in_flight_integral_s) / dt
    } else {
        0.0
    };
    let w = if dc > 0 {
        (end.sum_e2e_s - start.sum_e2e_s) / dc as f64
    } else {
        0.0
    };
    let mean_out = r.output_tokens.mean();
    let reliable = win_bins >= 10 && dc >= 50 && upto == pts.len() && notes.is_empty();
    if !reliable && notes.is_empty() {
        notes.push(format!(
            "the steady window holds only {dc} completions in {win_bins} bins: run more requests \
             for a trustworthy interval"
        ));
    }
    let avg = |a: f64, b: f64| if dt > 0.0 { (b - a) / dt } else { 0.0 };
    SteadyState {
        req_per_s,
        req_per_s_ci95: ci,
        ci_batches: nb as u64,
        output_tok_per_s: gen_per_s,
        start_s: start.t_s,
        end_s: end.t_s,
        little_law_req_per_s: if w > 0.0 { l / w } else { 0.0 },
        little_l_requests: l,
        little_w_s: w,
        tokens_req_per_s: if mean_out > 0.0 {
            gen_per_s / mean_out
        } else {
            0.0
        },
        mean_running: avg(start.running_integral_s, end.running_integral_s),
        mean_queued: avg(start.queued_integral_s, end.queued_integral_s),
        mean_token_usage: avg(start.kv_integral_token_s, end.kv_integral_token_s)
            / r.kv_capacity_tokens as f64,
        queue_busy_fraction: avg(start.queue_busy_s, end.queue_busy_s),
        completions: dc,
        reliable,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

fn end_index(pts: &[Sample], end: &Sample) -> usize {
    pts.iter()
        .rposition(|s| s.t_s == end.t_s)
        .unwrap_or(pts.len() - 1)
}

fn rate(a: &Sample, b: &Sample) -> f64 {
    let dt = b.t_s - a.t_s;
    if dt > 0.0 {
        (b.completed - a.completed) as f64 / dt
    } else {
        0.0
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

/// Student's t, 97.5 % quantile, for `df` degrees of freedom.
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

fn convergence(r: &RunResult, s: &SteadyState) -> Convergence {
    let rate = s.req_per_s;
    if rate <= 0.0 {
        return Convergence {
            lifetime_within_5pct_at_s: None,
            estimated_s: 0.0,
            deficit_s: 0.0,
        };
    }
    let pts: Vec<&Sample> = r
        .samples
        .iter()
        .filter(|p| p.t_s > 0.0 && p.t_s <= s.end_s)
        .collect();
    let within = |p: &Sample| (p.lifetime_req_per_s / rate - 1.0).abs() <= CONVERGENCE_TOLERANCE;
    let measured = match pts.iter().rposition(|p| !within(p)) {
        None => pts.first().map(|p| p.t_s),
        Some(i) if i + 1 < pts.len() => Some(pts[i + 1].t_s),
        Some(_) => None,
    };
    let end = at_or_before(&r.samples, s.end_s);
    let deficit = end.t_s - end.completed as f64 / rate;
    Convergence {
        lifetime_within_5pct_at_s: measured,
        estimated_s: deficit.abs() / CONVERGENCE_TOLERANCE,
        deficit_s: deficit,
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
    fn t_quantiles() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(19), 2.093);
        assert!((t975(1000) - 1.96).abs() < 0.01);
    }
}
