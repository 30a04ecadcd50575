//! From a run's time series to its regime — a steady state, an overloaded open loop, or no
//! steady phase at all — the steady rate with its confidence interval, the Little's-law
//! cross-check, the convergence of the lifetime average and what binds the batch. Pure
//! functions of a [`RunResult`].
//!
//! * **The window** ([`window`]) runs from the end of the start-up to the drain: the start-up
//!   ends when all but 1 % of the requests sent before the first response are answered (MSER-5,
//!   or MSER-1 with fewer than 20 bins, may cut a further transient), the drain starts at the client's last send. Its rate comes
//!   with a 95 % interval by overlapping batch means, batches as long as the completions'
//!   correlation time.
//! * **Regime** — a steady state needs such a window, and an open loop whose backlog does not
//!   grow through it: when arrivals outpace completions (by more than 5 % of the arrival rate)
//!   the queue and every wait grow without bound, so the run is *overloaded*: no steady state,
//!   and the window's completion rate is what the server sustains. A run whose requests were
//!   all sent before the first response came back (a closed loop with no more requests than
//!   concurrency) is one batch, with no steady phase; so is one whose start-up lasts until the
//!   drain.
//! * **Little's law** — `λ = L / W` with `L` the time-averaged requests in flight and `W` the
//!   mean end-to-end time of the requests completed in the window.
//! * **Convergence** — the first time after which the lifetime average stays within 5 % of the
//!   steady rate, measured on the time series; and the estimate `20 × |d|`, where the start-up
//!   deficit `d = T − completed(T)/rate` makes the lifetime average `rate × (1 − d/T)` (`d` is
//!   negative when the start-up completes faster than the steady state: short requests first).

pub mod replications;
pub mod window;

use serde::Serialize;

use crate::metrics::{RunResult, Sample, StopReason};
pub use replications::Replications;
pub use window::{mser, t975, Interval, Span};

/// The convergence tolerance.
pub const CONVERGENCE_TOLERANCE: f64 = 0.05;
/// An open loop whose backlog grows by more than this fraction of its arrival rate through the
/// window is overloaded.
pub const OVERLOAD_GROWTH: f64 = 0.05;
/// … and by at least this many requests.
pub const OVERLOAD_MIN_REQUESTS: u64 = 20;

/// The stretch between the start-up and the drain, measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// What it measured.
    #[serde(flatten)]
    pub span: Span,
    /// The 95 % interval of its completion rate (`None`: too few time-series points).
    pub interval: Option<Interval>,
    /// When the start-up cleared, seconds (`None`: an overloaded run examined without it).
    pub startup_cleared_at_s: Option<f64>,
    /// Whether MSER cut a further transient after the start-up (the window then starts later).
    pub mser_cut: bool,
}

impl Window {
    /// The interval's ends, if there is an interval.
    pub fn ci95(&self) -> Option<[f64; 2]> {
        self.interval.as_ref().map(|i| i.req_per_s_ci95)
    }
}

/// An open loop whose arrivals outpace its completions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overload {
    /// The window examined: from the end of the start-up, seconds…
    pub window_start_s: f64,
    /// … to the client's last send.
    pub window_end_s: f64,
    /// Requests arriving per second in the window.
    pub arrival_req_per_s: f64,
    /// Completions per second in the window: what the server sustains at this workload.
    pub served_req_per_s: f64,
    /// Its 95 % interval.
    pub served_req_per_s_ci95: Option<[f64; 2]>,
    /// How fast the backlog (requests in flight or waiting for a slot) grew, requests/s.
    pub backlog_growth_req_per_s: f64,
    /// Requests waiting for an answer at the start of the window.
    pub backlog_start: u64,
    /// … and at its end.
    pub backlog_end: u64,
    /// `arrival / served − 1`: first come, first served, every second of arrivals adds this
    /// many seconds to the wait of the requests behind them.
    pub wait_growth_s_per_s: f64,
}

/// Why a run has no steady window.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoWindow {
    /// No request completed.
    NothingCompleted,
    /// Every request was sent before the first response came back: one batch.
    OneBatch {
        /// Requests sent.
        requests: u64,
        /// The client's concurrency limit, if any.
        concurrency: Option<u64>,
    },
    /// The start-up had not cleared when the drain began.
    StartUpUntilDrain {
        /// Requests of the start-up.
        cohort: u64,
        /// When it cleared, if it did.
        cleared_at_s: Option<f64>,
        /// When the drain began.
        drain_at_s: f64,
    },
}

/// What kind of run this is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Regime {
    /// A steady state: the window's numbers describe what the server sustains.
    Steady {
        /// Whether the window is long enough to trust its interval.
        reliable: bool,
        /// Why it is not, or what to keep in mind.
        note: Option<String>,
    },
    /// An open loop whose backlog grows through the window: no steady state.
    Overloaded(Overload),
    /// No stretch of the run is past the start-up and before the drain.
    NoSteadyWindow(NoWindow),
}

/// When the lifetime average gets within 5 % of the steady rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Convergence {
    /// Measured on the time series, if it happened before the drain.
    pub lifetime_within_5pct_at_s: Option<f64>,
    /// `20 × |deficit|`.
    pub estimated_s: f64,
    /// The start-up deficit `d` in seconds at the end of the window (positive: the lifetime
    /// average lags; negative: it runs ahead).
    pub deficit_s: f64,
}

/// What limits the batch.
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

/// What binds the batch, with the evidence (over the window, or the whole run without one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Binding {
    /// The constraint.
    pub constraint: Constraint,
    /// Fraction of the time with requests waiting in the server's queue.
    pub queue_busy_fraction: f64,
    /// Mean running requests.
    pub mean_running: f64,
    /// The slot limit.
    pub max_running_requests: u64,
    /// Mean requests in flight (client view).
    pub mean_in_flight: f64,
    /// The client's concurrency limit.
    pub client_concurrency: Option<u64>,
    /// Mean token usage.
    pub mean_token_usage: f64,
    /// Admission passes stopped by the KV budget, over the whole run.
    pub memory_stops: u64,
    /// Admission passes stopped by the slot limit, over the whole run.
    pub slot_stops: u64,
    /// Retractions over the whole run.
    pub retractions: u64,
    /// Over what: `steady window`, `overloaded window` or `whole run`.
    pub measured_over: &'static str,
}

/// Everything derived from a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analysis {
    /// The kind of run.
    pub regime: Regime,
    /// The window between the start-up and the drain, when there is one (steady or not).
    pub window: Option<Window>,
    /// Convergence of the lifetime average to the steady rate (steady runs only).
    pub convergence: Option<Convergence>,
    /// What binds the batch.
    pub binding: Binding,
}

impl Analysis {
    /// The steady window, if the run has a steady state.
    pub fn steady(&self) -> Option<&Window> {
        match self.regime {
            Regime::Steady { .. } => self.window.as_ref(),
            _ => None,
        }
    }

    /// The rate the server sustains: the steady rate, or an overloaded server's completion
    /// rate; `None` without a window.
    pub fn sustained_req_per_s(&self) -> Option<f64> {
        self.window.as_ref().map(|w| w.span.req_per_s)
    }

    /// Why there is no steady state, or what to keep in mind about it.
    pub fn reason(&self) -> Option<String> {
        match &self.regime {
            Regime::Steady { note, .. } => note.clone(),
            Regime::Overloaded(o) => Some(format!(
                "overloaded: requests arrive at {:.3} req/s but complete at only {:.3} req/s, so \
                 the backlog grows by {:.3} requests per second (from {} to {} through the \
                 window) and every wait grows with the run: there is no steady state; the \
                 server sustains about {:.3} req/s at this workload",
                o.arrival_req_per_s,
                o.served_req_per_s,
                o.backlog_growth_req_per_s,
                o.backlog_start,
                o.backlog_end,
                o.served_req_per_s
            )),
            Regime::NoSteadyWindow(w) => Some(match w {
                NoWindow::NothingCompleted => "no request completed".to_string(),
                NoWindow::OneBatch {
                    requests,
                    concurrency,
                } => {
                    let limit = concurrency.map_or(String::new(), |c| {
                        format!(" ({requests} requests, concurrency {c})")
                    });
                    format!(
                        "one batch: every request was sent before the first response came \
                         back{limit}, so no slot was ever refilled and there is no steady \
                         phase — the makespan and the per-request latencies describe the run"
                    )
                }
                NoWindow::StartUpUntilDrain {
                    cohort,
                    cleared_at_s,
                    drain_at_s,
                } => {
                    let cleared = cleared_at_s.map_or("never cleared".to_string(), |t| {
                        format!("cleared only at t = {t:.0} s")
                    });
                    format!(
                        "no steady phase: the start-up (the {cohort} requests sent before the \
                         first response) {cleared}, and the client sent its last request at \
                         t = {drain_at_s:.0} s — run more requests for a steady window"
                    )
                }
            }),
        }
    }
}

/// Analyse a run.
pub fn analyse(r: &RunResult) -> Analysis {
    let drain_s = match r.stop {
        StopReason::MaxSimTime => r.totals.sim_duration_s,
        StopReason::AllAnswered => r.last_send_s.unwrap_or(0.0),
    };
    let (regime, window) = regime(r, drain_s);
    let convergence = match (&regime, &window) {
        (Regime::Steady { .. }, Some(w)) => Some(convergence(r, &w.span)),
        _ => None,
    };
    let (span, measured_over) = match (&regime, &window) {
        (Regime::Steady { .. }, Some(w)) => (w.span.clone(), "steady window"),
        (_, Some(w)) => (w.span.clone(), "overloaded window"),
        (_, None) => {
            let first = r.samples.first().expect("invariant: a run has a sample");
            let last = r.samples.last().expect("invariant: a run has a sample");
            (Span::between(r, first, last), "whole run")
        }
    };
    Analysis {
        binding: binding(r, &span, measured_over),
        regime,
        window,
        convergence,
    }
}

fn regime(r: &RunResult, drain_s: f64) -> (Regime, Option<Window>) {
    let no = |w| (Regime::NoSteadyWindow(w), None);
    let Some(first_s) = r.first_completion_s else {
        return no(NoWindow::NothingCompleted);
    };
    if r.stop == StopReason::AllAnswered && r.last_send_s.is_none_or(|l| l <= first_s) {
        return no(NoWindow::OneBatch {
            requests: r.totals.requests_sent,
            concurrency: r.client_concurrency,
        });
    }
    let until_drain = NoWindow::StartUpUntilDrain {
        cohort: r.startup.cohort,
        cleared_at_s: r.startup.cleared_at_s,
        drain_at_s: drain_s,
    };
    let startup = r.startup.sample.as_ref().filter(|s| s.t_s < drain_s);
    let Some(found) = startup.and_then(|s| window::find(r, s, drain_s)) else {
        // An overloaded open loop may never clear its start-up (its first requests wait
        // behind ever more): examine the second half of the sending instead.
        let mid = (first_s + drain_s) / 2.0;
        let examined = window::points(r, mid, drain_s).map(|pts| {
            let span = Span::between(r, &pts[0], &pts[pts.len() - 1]);
            let interval = window::interval(pts, span.req_per_s, span.correlation_s);
            Window {
                span,
                interval,
                startup_cleared_at_s: None,
                mser_cut: false,
            }
        });
        return match examined.and_then(|w| overload(r, &w).map(|o| (o, w))) {
            Some((o, w)) => (Regime::Overloaded(o), Some(w)),
            None => no(until_drain),
        };
    };
    let span = Span::between(r, found.start, found.end);
    let interval = window::interval(found.grid, span.req_per_s, span.correlation_s);
    let w = Window {
        interval,
        startup_cleared_at_s: startup.map(|s| s.t_s),
        mser_cut: found.mser_cut,
        span,
    };
    if let Some(o) = overload(r, &w) {
        return (Regime::Overloaded(o), Some(w));
    }
    let (reliable, note) = reliability(&w);
    (Regime::Steady { reliable, note }, Some(w))
}

/// Whether the window shows an overloaded open loop: its backlog grew by more than
/// [`OVERLOAD_GROWTH`] of the arrival rate, and by [`OVERLOAD_MIN_REQUESTS`] at least.
fn overload(r: &RunResult, w: &Window) -> Option<Overload> {
    let s = &w.span;
    let growth = s.backlog_growth_req_per_s();
    let grows = growth > OVERLOAD_GROWTH * s.arrival_req_per_s
        && s.backlog_end >= s.backlog_start + OVERLOAD_MIN_REQUESTS;
    (r.open_loop && grows).then(|| Overload {
        window_start_s: s.start_s,
        window_end_s: s.end_s,
        arrival_req_per_s: s.arrival_req_per_s,
        served_req_per_s: s.req_per_s,
        served_req_per_s_ci95: w.ci95(),
        backlog_growth_req_per_s: growth,
        backlog_start: s.backlog_start,
        backlog_end: s.backlog_end,
        wait_growth_s_per_s: if s.req_per_s > 0.0 {
            s.arrival_req_per_s / s.req_per_s - 1.0
        } else {
            f64::INFINITY
        },
    })
}

fn reliability(w: &Window) -> (bool, Option<String>) {
    let s = &w.span;
    let len = s.end_s - s.start_s;
    if w.interval.is_none() {
        let why = format!(
            "the steady window ({len:.1} s) spans fewer than two points of the time series: \
             there is no interval — run more requests"
        );
        return (false, Some(why));
    }
    let times = if s.correlation_s > 0.0 {
        len / s.correlation_s
    } else {
        f64::INFINITY
    };
    if times < window::RELIABLE_CORRELATION_TIMES {
        let why = format!(
            "the steady window ({len:.0} s) is only {times:.1} × the completions' correlation \
             time ({:.0} s, the mean time in system weighted by time in system): run more \
             requests for a trustworthy interval",
            s.correlation_s
        );
        return (false, Some(why));
    }
    if s.completions < window::RELIABLE_COMPLETIONS {
        let why = format!(
            "the steady window holds only {} completions: run more requests for a trustworthy \
             interval",
            s.completions
        );
        return (false, Some(why));
    }
    (true, None)
}

/// The queue-busy fraction above which requests are said to wait for the server.
const QUEUE_BOUND: f64 = 0.5;
/// How close to a limit counts as at the limit.
const AT_LIMIT: f64 = 0.95;

fn binding(r: &RunResult, s: &Span, measured_over: &'static str) -> Binding {
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
        measured_over,
    }
}

/// The sample at or just before `t` (the first sample if none).
fn at_or_before(samples: &[Sample], t: f64) -> &Sample {
    let i = samples.partition_point(|s| s.t_s <= t);
    &samples[i.saturating_sub(1)]
}

fn convergence(r: &RunResult, s: &Span) -> Convergence {
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
mod tests;
