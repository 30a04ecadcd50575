//! `servesim explain`: the story of a run in plain words, every number from the run. Which
//! sentences are told depends on the run's regime (a steady state, an overloaded open loop, or
//! one batch with no steady phase) and on its numbers, so that each is true of the run it
//! describes; `tests/it/explain.rs` checks every sentence of every teaching scenario against
//! the numbers it states.

use std::fmt::Write;

use super::summary::{Observation, OverheadOut, Summary};
use super::text::thousands;
use crate::analysis::{NoWindow, Regime, Window};
use crate::memory::resolve::KvSource;
use crate::scenario::{ClientSpec, Scenario};
use crate::scheduler::PolicySpec;

use super::doc::Doc;
pub use super::doc::Format;

mod advice;
mod regimes;

use advice::{binding, hides, prefix_cache, what_if};
use regimes::{no_window, one_batch, overload};

/// What the reader needs to rerun things: the scenario path as typed, the overrides given,
/// and what the scenario pins.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The scenario argument to repeat in suggested commands (`None`: the built-in B2).
    pub scenario_arg: Option<String>,
    /// The `--set KEY=VALUE` overrides given, repeated in suggested commands.
    pub sets: Vec<String>,
    /// Whether the scenario has memory-model inputs.
    pub has_memory_model: bool,
    /// Whether the scenario pins the KV pool (`engine.kv_capacity_tokens`, or vLLM's
    /// `num_gpu_blocks_override`): the memory settings then change nothing.
    pub kv_pinned: bool,
    /// vLLM's `num_gpu_blocks_override`, when the scenario gives it.
    pub kv_blocks_override: Option<u64>,
    /// The scenario's KV budget, for a suggested sweep.
    pub kv_capacity_tokens: u64,
    /// The scenario's open-loop rate, if any.
    pub rate_per_s: Option<f64>,
}

impl Context {
    /// The context of `sc`, given as `scenario_arg` (`None`: the built-in B2) with `sets`.
    pub fn new(sc: &Scenario, scenario_arg: Option<String>, sets: &[String]) -> Self {
        Context {
            scenario_arg,
            sets: sets.to_vec(),
            has_memory_model: sc.memory.is_some(),
            kv_pinned: sc.engine.kv_source != KvSource::Derived,
            kv_blocks_override: match &sc.engine.policy {
                PolicySpec::Vllm(v) => v.num_gpu_blocks_override,
                PolicySpec::Sglang(_) => None,
            },
            kv_capacity_tokens: sc.engine.kv_capacity_tokens,
            rate_per_s: match &sc.client {
                ClientSpec::Poisson { rate_per_s, .. } | ClientSpec::Gamma { rate_per_s, .. } => {
                    Some(*rate_per_s)
                }
                ClientSpec::Closed { .. } | ClientSpec::Trace { .. } => None,
            },
        }
    }
}

/// A fraction as a whole percentage.
pub fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

/// A duration, with the precision its size deserves: `450 ms`, `7.4 s`, `52 s`,
/// `3,120 s (52 min)`, `9,000 s (2.5 h)`.
pub fn secs(s: f64) -> String {
    let a = s.abs();
    let sign = if s < 0.0 { "−" } else { "" };
    if a >= 7200.0 {
        format!(
            "{sign}{} s ({:.1} h)",
            thousands(a.round() as u64),
            a / 3600.0
        )
    } else if a >= 120.0 {
        format!(
            "{sign}{} s ({:.0} min)",
            thousands(a.round() as u64),
            a / 60.0
        )
    } else if a >= 10.0 {
        format!("{sign}{a:.0} s")
    } else if a >= 1.0 {
        format!("{sign}{a:.1} s")
    } else if a >= 0.0995 {
        format!("{sign}{:.0} ms", a * 1e3)
    } else if a >= 0.0005 {
        format!("{sign}{:.1} ms", a * 1e3)
    } else if a > 0.0 {
        "0 ms".to_string()
    } else {
        "0 s".to_string()
    }
}

/// [`secs`] without the minutes or hours in parentheses, for a formula.
fn bare_secs(s: f64) -> String {
    let t = secs(s);
    match t.split_once(" (") {
        Some((bare, _)) => bare.to_string(),
        None => t,
    }
}

/// A rate in req/s.
fn rps(x: f64) -> String {
    format!("{x:.3} req/s")
}

/// A count of tokens or requests, rounded, with thousands separators.
fn count(x: f64) -> String {
    thousands(x.round().max(0.0) as u64)
}

/// The observation the story is told at: the first observation, else the first minute mark
/// with at least one response, else the first minute mark, else none.
fn focus(s: &Summary) -> Option<&Observation> {
    s.observations
        .first()
        .or_else(|| s.first_minutes.iter().find(|o| o.completed > 0))
        .or(s.first_minutes.first())
}

/// The explanation's title.
pub fn title(s: &Summary) -> String {
    format!(
        "Why the client and the server disagree — {}",
        s.scenario.name
    )
}

/// The explanation.
pub fn render(s: &Summary, ctx: &Context, fmt: Format) -> String {
    let mut d = Doc::new(fmt);
    d.title(&title(s));
    let obs: Vec<&Observation> = if s.observations.is_empty() {
        focus(s).into_iter().collect()
    } else {
        s.observations.iter().collect()
    };
    let a = &s.analysis;

    d.heading(1, "Three views of one run");
    for o in &obs {
        d.para(&views(s, o));
    }
    match (&a.regime, &a.window) {
        (Regime::Steady { reliable, .. }, Some(w)) => {
            d.para(&steady_sentence(s, w, *reliable, obs.first().copied()));
            d.heading(2, "Why the lifetime rate differs from the steady rate");
            d.para(&start_up(s, w));
            if let Some(o) = obs.first() {
                d.para(&deficit(o, w.span.req_per_s, s.workload.mean_output_tokens));
            }
            d.heading(3, "When the lifetime average will be within 5 %");
            d.para(&convergence(s, w));
            d.heading(4, "Little's law with this run's numbers");
            d.para(&little(s, w));
        }
        (Regime::Overloaded(o), Some(w)) => {
            let ci = o.served_req_per_s_ci95.map_or(String::new(), |[lo, hi]| {
                format!(" (95 % interval {lo:.3}–{hi:.3})")
            });
            d.para(&format!(
                "There is no steady state: requests arrive at {} but the server completes only \
                 {}{ci}, so the backlog of requests waiting for an answer grows by {:.1} every \
                 second, and every wait grows with the run.",
                rps(o.arrival_req_per_s),
                rps(o.served_req_per_s),
                o.backlog_growth_req_per_s
            ));
            d.heading(2, "Why the waits grow");
            d.para(&overload(s, o, w));
        }
        (Regime::NoSteadyWindow(NoWindow::NothingCompleted), _) => {
            d.para("No request completed during the run, so there is nothing to explain.");
            return d.out;
        }
        (Regime::NoSteadyWindow(n), _) => {
            d.para(&no_window(s, n));
            d.heading(2, "The run as one batch");
            d.para(&one_batch(s, n));
        }
        (_, None) => unreachable!("invariant: steady and overloaded runs have a window"),
    }
    if let Some(o) = &s.overhead {
        d.para(&off_gpu(o));
    }
    let n = if a.steady().is_some() { 5 } else { 3 };
    binding(&mut d, s, n);
    prefix_cache(&mut d, s, ctx);
    hides(&mut d, s, obs.first().copied(), n + 1);
    what_if(&mut d, s, ctx, n + 2);
    d.out
}

/// What the off-GPU overheads add to the client's latencies (`workload/overhead.rs`), and what
/// the engine itself sees, over the whole run.
fn off_gpu(o: &OverheadOut) -> String {
    format!(
        "Not all of the client's latency is the server's: {:.0} ms of every time to first token \
         is spent off the GPU (a network round trip of {:.1} ms, {:.1} ms of HTTP handling and \
         tokenizer, {:.2} ms to stream a token), and each later token reaches the client {:.2} ms \
         after the one before it on top of the engine's step — {:.1} s of each response on \
         average. Over the run the engine itself sees {} to the first token and {} to the last \
         on average.",
        o.ttft_added_ms,
        o.network_rtt_ms,
        o.request_overhead_ms,
        o.per_token_overhead_ms,
        o.per_token_overhead_ms,
        o.e2e_added_ms_mean / 1000.0,
        secs(o.engine_ttft_ms.mean / 1000.0),
        secs(o.engine_e2e_ms.mean / 1000.0)
    )
}

fn views(s: &Summary, o: &Observation) -> String {
    let server = if o.gen_tok_per_s > 0.0 {
        format!(
            "At t = {} the server logs {:.0} tok/s with {} requests running and {} queued \
             ({} {:.2}).",
            secs(o.t_s),
            o.gen_tok_per_s,
            o.running,
            o.queued,
            s.words.kv_usage,
            o.token_usage
        )
    } else {
        format!(
            "At t = {} the server has {} requests running and {} queued ({} {:.2}) \
             and has logged no decode throughput yet.",
            secs(o.t_s),
            o.running,
            o.queued,
            s.words.kv_usage,
            o.token_usage
        )
    };
    format!(
        "{server} The client's progress line — completions since the start ÷ time since the \
         start — shows {}; counting only the last {} it is {}.",
        rps(o.lifetime_req_per_s),
        secs(s.client.window_s.min(o.t_s)),
        rps(o.window_req_per_s)
    )
}

fn steady_sentence(s: &Summary, w: &Window, reliable: bool, o: Option<&Observation>) -> String {
    let st = &w.span;
    let ci = w.ci95().map_or(
        " (no interval: the window is too short)".to_string(),
        |[lo, hi]| format!(" (95 % interval {lo:.3}–{hi:.3})"),
    );
    let mut out = format!(
        "The steady state — completions per second once the start-up is over and before the \
         last requests drain — is {}{ci}, or {:.0} output tok/s.",
        rps(st.req_per_s),
        st.output_tok_per_s
    );
    if !reliable {
        if let Some(n) = &s.steady_state.reason {
            let _ = write!(out, " Take it as a rough figure: {n}.");
        }
    }
    if let Some(o) = o.filter(|_| st.req_per_s > 0.0) {
        let ratio = o.lifetime_req_per_s / st.req_per_s;
        let words = if ratio < 0.35 {
            "far below it"
        } else if ratio < 0.65 {
            "about half of it"
        } else if ratio < 0.95 {
            "below it"
        } else if ratio <= 1.05 {
            "within 5 % of it"
        } else {
            "above it"
        };
        let _ = write!(
            out,
            " So at t = {} the lifetime figure is {} of the steady rate — {words}.",
            secs(o.t_s),
            pct(ratio)
        );
    }
    out
}

fn start_up(s: &Summary, w: &Window) -> String {
    let st = &w.span;
    let start = match s.client.concurrency {
        Some(c) if s.client.mode == "closed" => {
            let n = u64::from(c).min(s.workload.requests);
            let which = if n == u64::from(c) {
                "its concurrency limit"
            } else {
                "every request of the run"
            };
            format!(
                "At t = 0 the client sent {} requests at once ({which}).",
                thousands(n)
            )
        }
        _ => format!(
            "Requests arrived from t = 0 on, {} in the steady window.",
            rps(st.arrival_req_per_s)
        ),
    };
    let first = s.first_completion_s.map_or(String::new(), |t| {
        format!(" The first response arrived at t = {}.", secs(t))
    });
    let share = if st.mean_running > 0.0 && st.output_tok_per_s > 0.0 {
        let each = st.output_tok_per_s / st.mean_running;
        let mean_out = s.workload.mean_output_tokens;
        format!(
            " In the steady window the server's {:.0} tok/s were shared by {:.1} running \
             requests on average, so each advanced at about {:.1} tok/s while running: a \
             response of the mean {} tokens needs about {} of running.",
            st.output_tok_per_s,
            st.mean_running,
            each,
            count(mean_out),
            secs(mean_out / each)
        )
    } else {
        String::new()
    };
    format!("{start}{first}{share}")
}

/// The start-up deficit at an observation, with the sign it has (`mean_out`: the run's mean
/// output tokens).
fn deficit(o: &Observation, rate: f64, mean_out: f64) -> String {
    let t = o.t_s;
    let due = rate * t;
    let d = t - o.completed as f64 / rate;
    let lead = format!(
        "Measure the start-up by its deficit d = t − completed ÷ rate: how far the completions \
         lag behind what the steady rate would have delivered. At t = {} the client had {} \
         responses where {} × {} = {} were due",
        secs(t),
        thousands(o.completed),
        rps(rate),
        bare_secs(t),
        count(due)
    );
    let ratio = 1.0 - d / t;
    if (d / t).abs() <= 0.05 {
        format!(
            "{lead}: d = {}, {} of t, so the lifetime average is already within 5 % of the \
             steady rate ({} of it).",
            secs(d),
            pct((d / t).abs()),
            pct(ratio)
        )
    } else if d > 0.0 {
        format!(
            "{lead}: d = {}. After a deficit of d seconds the lifetime average can only reach \
             1 − d/T of the steady rate at time T: 1 − {}/{} = {} — what the progress line \
             shows.",
            secs(d),
            bare_secs(d),
            bare_secs(t),
            pct(ratio)
        )
    } else {
        let why = if o.completed_mean_output_tokens < mean_out {
            format!(
                ", because short responses finish first: the {} finished by then averaged {} \
                 tokens, against {} over the run",
                thousands(o.completed),
                count(o.completed_mean_output_tokens),
                count(mean_out)
            )
        } else {
            String::new()
        };
        format!(
            "{lead}: d = {}, negative — the start-up ran ahead of the steady rate{why}. The \
             lifetime average is 1 − d/T = 1 + {}/{} = {} of the steady rate, and falls towards \
             it as T grows.",
            secs(d),
            bare_secs(-d),
            bare_secs(t),
            pct(ratio)
        )
    }
}

fn convergence(s: &Summary, w: &Window) -> String {
    let Some(c) = &s.analysis.convergence else {
        return String::new();
    };
    let sign = if c.deficit_s < 0.0 {
        " (negative: the lifetime average runs ahead)"
    } else {
        ""
    };
    let rule = format!(
        "By the end of the steady window, at t = {}, the start-up had left a deficit of d = \
         {}{sign}; the lifetime average is within 5 % of the steady rate once |d|/T ≤ 5 %, i.e. \
         after about 20 × |d| = {}.",
        secs(w.span.end_s),
        secs(c.deficit_s),
        secs(c.estimated_s)
    );
    match c.lifetime_within_5pct_at_s {
        Some(t) => format!(
            "{rule} In this run it stays within 5 % from t = {} on (measured).",
            secs(t)
        ),
        None => format!(
            "{rule} In this run it is not within 5 % of the steady rate when the drain begins \
             at t = {}.",
            secs(w.span.end_s)
        ),
    }
}

fn little(s: &Summary, w: &Window) -> String {
    let st = &w.span;
    let mut out = format!(
        "Requests in flight = throughput × time in flight. In the steady window the client kept \
         L = {:.1} requests in flight and the requests completed in it took W = {} each on \
         average from send to last token, so L / W = {} — the measured rate is {}.",
        st.little_l_requests,
        secs(st.little_w_s),
        rps(st.little_law_req_per_s),
        rps(st.req_per_s)
    );
    if let Some(l) = &s.steady_latency {
        let lat = &l.latency;
        let (ttft, queue, e2e) = (lat.ttft_ms.mean, lat.queue_ms.mean, lat.e2e_ms.mean);
        let after = (e2e - ttft).max(0.0) / 1e3;
        let _ = write!(
            out,
            " The requests sent in the steady window waited {} on average for their first \
             token — {} of it in the server's queue — and took {} more to their last token.",
            secs(ttft / 1e3),
            secs(queue / 1e3),
            secs(after)
        );
        let running_s = st.mean_running / st.req_per_s;
        let retractions = s.analysis.binding.retractions;
        if retractions > 0 && after > 1.1 * running_s {
            let _ = write!(
                out,
                " That is more than the {} a request spends running ({:.1} running ÷ {}, \
                 Little's law on the batch): over the run {} {} sent a running request back to \
                 wait in the queue again.",
                secs(running_s),
                st.mean_running,
                rps(st.req_per_s),
                thousands(retractions),
                if retractions == 1 {
                    s.words.eviction
                } else {
                    s.words.evictions
                }
            );
        }
        if lat.itl_ms.count > 0 {
            let _ = write!(
                out,
                " Once generating, they took {} per token on average (TPOT); half of all gaps \
                 between successive tokens were at most {} and 1 % were longer than {} (ITL).",
                secs(lat.tpot_ms.mean / 1e3),
                secs(lat.itl_ms.p50 / 1e3),
                secs(lat.itl_ms.p99 / 1e3)
            );
        }
    }
    out
}
