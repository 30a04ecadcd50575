//! How a run is controlled: the scenario's `[run]` section ([`RunSpec`]: when to stop, what to
//! observe) and the options that change what a run records or how fast, never what is simulated
//! ([`RunOptions`]). The engine ([`crate::engine`]) takes both.

use crate::settings::{keys, Bad, Values, MAX_SIM_S};
use crate::time::{SimDuration, SimTime};

keys! {
/// `[run]`.
KEYS:
"run" [Table, Absent("all defaults"), All, ""] "run control and observation", e.g. "[run]";
"run.max_sim_s" [Number(Within(1e-9, MAX_SIM_S)), Absent("none"), All, "s"]
    "stop at this simulated time even if requests remain", e.g. "36000";
"run.observe_at_s" [Numbers(Within(0.0, MAX_SIM_S)), Absent("[]"), All, "s"]
    "snapshot the three views at these times", e.g. "[300, 600, 1800]";
"run.window_s" [Number(Within(1e-3, MAX_SIM_S)), Num(60.0), All, "s"]
    "the client's windowed-rate window", e.g. "60";
"run.timeseries_interval_s" [Number(Within(1e-3, MAX_SIM_S)), Num(1.0), All, "s"]
    "initial time-series spacing, doubled whenever the series would exceed 4,096 points", e.g. "1";
"run.max_events" [Integer(1, 1_000_000_000_000), Int(2_000_000_000), All, ""]
    "stop with an error after this many scheduler batches (prefill batches + decode steps)", e.g. "2000000000";
}

/// `[run]`.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Stop at this simulated time even if requests remain.
    pub max_sim: Option<SimDuration>,
    /// Snapshot the three views at these times (sorted, distinct).
    pub observe_at: Vec<SimTime>,
    /// The client's windowed-rate window.
    pub window: SimDuration,
    /// Initial spacing of the time series (doubled whenever it would exceed its point budget).
    pub timeseries_interval: SimDuration,
    /// Stop with an error after this many scheduler batches (prefill batches + decode steps).
    pub max_events: u64,
}

fn secs(x: f64) -> SimDuration {
    SimDuration::from_secs_f64(x).expect("invariant: seconds were range-checked")
}

impl RunSpec {
    /// Read `[run]`.
    pub fn read(v: &dyn Values) -> Result<Self, Bad> {
        let observe_at_s = v.opt::<Vec<f64>>("run.observe_at_s")?.unwrap_or_default();
        let mut observe_at: Vec<SimTime> = observe_at_s
            .into_iter()
            .map(|s| SimTime::from_secs_f64(s).expect("invariant: range-checked"))
            .collect();
        observe_at.sort();
        observe_at.dedup();
        Ok(RunSpec {
            max_sim: v.opt("run.max_sim_s")?.map(secs),
            observe_at,
            window: secs(v.get("run.window_s")?),
            timeseries_interval: secs(v.get("run.timeseries_interval_s")?),
            max_events: v.get("run.max_events")?,
        })
    }
}

/// How the simulator advances through decode steps. Both give identical results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stepping {
    /// Jump over runs of decode steps in closed form (see
    /// [`Scheduler::skip_decode`](crate::scheduler::Scheduler::skip_decode)).
    #[default]
    FastForward,
    /// One event per decode step: the reference the fast path is tested against.
    StepByStep,
}

/// Options that change what is recorded or how fast, never what is simulated.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Fast-forward or step by step.
    pub stepping: Stepping,
    /// Keep the engine's log lines (for `server.log`).
    pub keep_log: bool,
    /// Time-series point budget.
    pub max_points: usize,
    /// Keep a record of every answered request (memory grows with the run).
    pub keep_requests: bool,
    /// Keep the end of every decode round, from which each request's token times follow
    /// (memory grows with the run's decode steps; the run goes step by step).
    pub keep_token_times: bool,
    /// Set from outside (Ctrl-C) to stop the run.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Where the steady-window latencies start.
    pub steady_from: crate::metrics::SteadyFrom,
    /// Whether the inter-token gaps are timed.
    pub token_gaps: crate::metrics::TokenGaps,
    /// Length draws made once for runs that send the same requests (a plan's candidates, a
    /// sweep's points); a run whose seed or distributions differ draws its own.
    pub predrawn: Option<std::sync::Arc<crate::workload::Predrawn>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            stepping: Stepping::FastForward,
            keep_log: false,
            max_points: crate::metrics::recorder::DEFAULT_MAX_POINTS,
            keep_requests: false,
            keep_token_times: false,
            interrupt: None,
            steady_from: crate::metrics::SteadyFrom::StartUpCleared,
            token_gaps: crate::metrics::TokenGaps::Timed,
            predrawn: None,
        }
    }
}
