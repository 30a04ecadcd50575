//! `servesim explain`: the story of a run in plain words, every number from the run. Which
//! sentences are told depends on the run's regime (a steady state, an overloaded open loop, or
//! one batch with no steady phase) and on its numbers, so that each is true of the run it
//! describes; `tests/it/explain.rs` checks every sentence of every teaching scenario against
//! the numbers it states.

use std::fmt::Write;

use super::summary::{Observation, Summary};
use super::text::thousands;
use crate::analysis::{Constraint, NoWindow, Regime, Window};
use crate::memory::resolve::KvSource;
use crate::scenario::{ClientSpec, Scenario};
use crate::scheduler::PolicySpec;

use super::doc::Doc;
pub use super::doc::Format;

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
/// with at least one response, else none.
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
    let n = if a.steady().is_some() { 5 } else { 3 };
    binding(&mut d, s, n);
    hides(&mut d, s, obs.first().copied(), n + 1);
    what_if(&mut d, s, ctx, n + 2);
    d.out
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
                 Little's law on the batch): over the run {} requests were {} and waited in the \
                 queue again.",
                secs(running_s),
                st.mean_running,
                rps(st.req_per_s),
                thousands(retractions),
                s.words.evicted
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

fn overload(s: &Summary, o: &crate::analysis::Overload, w: &Window) -> String {
    let st = &w.span;
    let mut out = format!(
        "Requests arrive at {} and the server completes {}: the backlog of requests sent and \
         not answered grew from {} to {} between t = {} and t = {}, {:.1} per second. First \
         come, first served, each request waits behind the backlog ahead of it, and each second \
         that passes adds about {:.2} s to the wait of a request arriving then: the longer the \
         run, the longer the waits — this run's median TTFT of {} says how long it lasted, not \
         how fast the server is.",
        rps(o.arrival_req_per_s),
        rps(o.served_req_per_s),
        thousands(o.backlog_start),
        thousands(o.backlog_end),
        secs(st.start_s),
        secs(st.end_s),
        o.backlog_growth_req_per_s,
        o.wait_growth_s_per_s,
        secs(s.latency.ttft_ms.p50 / 1e3)
    );
    let z = st.little_law_req_per_s;
    let near = |x: f64| (z / x - 1.0).abs() <= 0.1;
    let which = if near(o.arrival_req_per_s) {
        "close to the arrival rate, not the completion rate"
    } else if near(o.served_req_per_s) {
        "close to the completion rate"
    } else {
        "neither the arrival rate nor the completion rate"
    };
    let _ = write!(
        out,
        " Little's law relates averages that do not settle here: L = {:.1} requests in flight, \
         W = {} each, L / W = {}, {which}. What the server sustains at this workload is its \
         completion rate, about {}: keep the arrival rate below it for a steady state.",
        st.little_l_requests,
        secs(st.little_w_s),
        rps(z),
        rps(o.served_req_per_s)
    );
    out
}

fn no_window(s: &Summary, n: &NoWindow) -> String {
    match n {
        NoWindow::OneBatch { requests, .. } => {
            let limit = match s.client.concurrency {
                Some(c) if s.client.mode == "closed" && u64::from(c) >= *requests => {
                    format!(" (the client's concurrency, {c}, is not below the number of requests)")
                }
                _ => String::new(),
            };
            let first = s
                .first_completion_s
                .map_or(String::new(), |t| format!(" at t = {}", secs(t)));
            format!(
                "There is no steady state: all {} requests were sent before the first response \
                 came back{first}{limit}, so no client slot was ever refilled — the run is one \
                 batch, and its makespan, the time to its last response, is {}.",
                thousands(*requests),
                secs(s.totals.totals.sim_duration_s)
            )
        }
        NoWindow::StartUpUntilDrain {
            cohort,
            cleared_at_s,
            drain_at_s,
        } => {
            let cleared = cleared_at_s.map_or("was never 99 % answered".to_string(), |t| {
                format!("was not 99 % answered until t = {}", secs(t))
            });
            format!(
                "There is no steady state: the start-up — the {} requests sent before the first \
                 response — {cleared}, and the client sent its last request at t = {}: no \
                 stretch of the run is past the start-up and before the drain.",
                thousands(*cohort),
                secs(*drain_at_s)
            )
        }
        NoWindow::NothingCompleted => String::new(),
    }
}

fn one_batch(s: &Summary, n: &NoWindow) -> String {
    let t = &s.totals.totals;
    let m = t.sim_duration_s;
    let l = &s.latency;
    let more = match n {
        NoWindow::OneBatch { .. } => {
            "A steady rate needs more requests than the client's concurrency, so that slots are \
             refilled as responses come back."
        }
        _ => "A steady rate needs a run long enough for the start-up to clear before the drain.",
    };
    format!(
        "Over the run the server had {:.1} requests running and {:.1} queued on average, and \
         the last response came at t = {}: {} requests in that makespan is {} and {:.0} output \
         tok/s. Per request: TTFT median {} and p99 {}; end to end median {} and p99 {}; TPOT \
         median {}. {more}",
        s.server.mean_running,
        s.server.mean_queued,
        secs(m),
        thousands(t.requests_completed),
        rps(if m > 0.0 {
            t.requests_completed as f64 / m
        } else {
            0.0
        }),
        if m > 0.0 {
            t.output_tokens as f64 / m
        } else {
            0.0
        },
        secs(l.ttft_ms.p50 / 1e3),
        secs(l.ttft_ms.p99 / 1e3),
        secs(l.e2e_ms.p50 / 1e3),
        secs(l.e2e_ms.p99 / 1e3),
        secs(l.tpot_ms.p50 / 1e3)
    )
}

fn binding(d: &mut Doc, s: &Summary, n: usize) {
    let b = &s.analysis.binding;
    let (over, of) = match b.measured_over {
        "steady window" => ("", "of the steady window"),
        "overloaded window" => (" (while overloaded)", "of the window"),
        _ => (" (over the whole run)", "of the run"),
    };
    d.heading(
        n,
        &format!("What binds the batch: {}{over}", b.constraint.describe()),
    );
    let evidence = match b.constraint {
        Constraint::KvBudget => {
            let far = if b.mean_running < 0.5 * b.max_running_requests as f64 {
                "far below"
            } else {
                "below"
            };
            let retracted = if b.retractions == 0 {
                String::new()
            } else {
                format!(
                    ", and {} requests were {} when the running ones outgrew it",
                    thousands(b.retractions),
                    s.words.evicted
                )
            };
            // The engine's rule; a pool used to the brim is not bound "before it is full".
            let rule = if b.mean_token_usage < 0.95 {
                s.words.admission_rule.to_string()
            } else {
                s.words
                    .admission_rule
                    .replace(": memory binds before the pool is full", "")
            };
            format!(
                "Requests waited in the server's queue {} {of}, yet only {:.1} ran on average — \
                 {far} the slot limit of {} — with {} at {:.2}. Over the run, \
                 admission stopped {} times because the next request did not fit in the KV \
                 budget{retracted}. {rule}",
                pct(b.queue_busy_fraction),
                b.mean_running,
                thousands(b.max_running_requests),
                s.words.kv_usage,
                b.mean_token_usage,
                thousands(b.memory_stops),
            )
        }
        Constraint::MaxRunningRequests => format!(
            "Requests waited in the server's queue {} {of} while {:.1} ran on average, at the \
             slot limit {} = {} ({} {:.2}; over the run, admission \
             stopped at the limit {} times).",
            pct(b.queue_busy_fraction),
            b.mean_running,
            s.words.slot_limit_key,
            thousands(b.max_running_requests),
            s.words.kv_usage,
            b.mean_token_usage,
            thousands(b.slot_stops)
        ),
        Constraint::ClientConcurrency => format!(
            "The server's queue was empty {} {of} and {} averaged {:.2}: the server \
             admits what it gets. The client kept {:.1} requests in flight against its limit \
             of {}, so the batch is as large as the client lets it be.",
            pct(1.0 - b.queue_busy_fraction),
            s.words.kv_usage,
            b.mean_token_usage,
            b.mean_in_flight,
            b.client_concurrency.unwrap_or(0)
        ),
        Constraint::StepTime => {
            let client = match b.client_concurrency {
                Some(c) => format!("was below its limit of {c}"),
                None => "has no concurrency limit".to_string(),
            };
            format!(
                "The server's queue was empty {} {of} and {} averaged {:.2}; the \
                 client {client} ({:.1} in flight). The batch ({:.1} running on average) is \
                 the arrival rate times the time each request spends in service — which the \
                 step time sets.",
                pct(1.0 - b.queue_busy_fraction),
                s.words.kv_usage,
                b.mean_token_usage,
                b.mean_in_flight,
                b.mean_running
            )
        }
    };
    d.para(&evidence);
}

fn hides(d: &mut Doc, s: &Summary, o: Option<&Observation>, n: usize) {
    d.heading(n, "What \"req/s × mean tokens\" hides");
    let mean_out = s.workload.mean_output_tokens;
    if let Some(o) = o {
        let avg = if o.t_s > 0.0 {
            o.generated_tokens as f64 / o.t_s
        } else {
            0.0
        };
        if o.completed == 0 {
            d.para(&format!(
                "At t = {}, no response had come back: the \"effective\" figure (req/s × mean \
                 tokens) is 0, while the server had generated {} tokens — all of them for \
                 requests not finished yet.",
                secs(o.t_s),
                thousands(o.generated_tokens)
            ));
        } else {
            let verdict = if o.effective_tok_per_s < avg {
                "So the \"effective\" figure undercounts the work done so far."
            } else {
                "So the \"effective\" figure overcounts the work done so far: the first \
                 responses to finish are the short ones."
            };
            d.para(&format!(
                "At t = {}, {} × {} tokens = {:.0} \"effective\" tok/s, against the server's \
                 {:.0} tok/s in its latest log line. By then the server had generated {} \
                 tokens, {:.0} tok/s on average since the start: {} of them belong to requests \
                 not finished yet, which a completion count cannot see, and the {} responses \
                 finished by then averaged {} tokens, not {}. {verdict}",
                secs(o.t_s),
                rps(o.lifetime_req_per_s),
                count(mean_out),
                o.effective_tok_per_s,
                o.gen_tok_per_s,
                thousands(o.generated_tokens),
                avg,
                pct(o.in_progress_token_share),
                thousands(o.completed),
                count(o.completed_mean_output_tokens),
                count(mean_out)
            ));
        }
    }
    let ot = &s.workload.output_tokens_stats;
    let drain = match (s.last_send_s, s.totals.stop_reason) {
        (Some(l), crate::metrics::StopReason::AllAnswered) => format!(
            " After the client sent its last request at t = {}, the run took another {} to \
             drain.",
            secs(l),
            secs(s.totals.totals.sim_duration_s - l)
        ),
        _ => String::new(),
    };
    d.para(&format!(
        "A mean also hides the spread: responses had a median of {} tokens and a p99 of {}.{drain}",
        count(ot.p50),
        count(ot.p99)
    ));
}

/// A `--set` as typed on a shell command line.
fn shell_word(w: &str) -> String {
    if w.chars()
        .all(|c| c.is_ascii_alphanumeric() || "._=:,/-+".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

fn what_if(d: &mut Doc, s: &Summary, ctx: &Context, n: usize) {
    d.heading(n, "One what-if to try");
    let scen = ctx
        .scenario_arg
        .clone()
        .unwrap_or_else(|| "scenarios/case-study-b2.toml".to_string());
    let b = &s.analysis.binding;
    let sweep = |key: &str, spec: String| (key.to_string(), format!("--vary {key}={spec}"));
    let (why, verb, (key, arg)) = match &s.analysis.regime {
        Regime::Overloaded(o) => {
            let mu = o.served_req_per_s;
            (
                "The server is overloaded: find the highest arrival rate that still has a steady state.".to_string(),
                "sweep",
                sweep("client.rate_per_s", format!("{:.3},{:.3},{:.3}", 0.5 * mu, 0.75 * mu, 0.9 * mu)),
            )
        }
        Regime::NoSteadyWindow(_) => {
            let c = s.client.concurrency.map_or(0, u64::from);
            let more = 10 * c.max(s.workload.requests);
            (
                "Run enough requests for the client to refill its slots and reach a steady state."
                    .to_string(),
                "explain",
                (
                    "workload.requests".to_string(),
                    format!("--set workload.requests={more}"),
                ),
            )
        }
        Regime::Steady { .. } => match b.constraint {
            Constraint::KvBudget if ctx.has_memory_model && !ctx.kv_pinned => {
                let (key, range) = s
                    .words
                    .memory_fraction_sweep
                    .split_once('=')
                    .expect("invariant: a memory-fraction sweep is key=range");
                (
                    format!(
                        "The KV budget binds: see what a larger {} buys, and where it runs out of memory.",
                        s.words.memory_fraction
                    ),
                    "sweep",
                    sweep(key, range.to_string()),
                )
            }
            Constraint::KvBudget if ctx.kv_blocks_override.is_some() => {
                let n = ctx.kv_blocks_override.unwrap_or(2);
                (
                    "The KV budget binds: see what more KV blocks would buy (servesim memory says whether they fit).".to_string(),
                    "sweep",
                    sweep(
                        "engine.num_gpu_blocks_override",
                        format!("{}:{}:{}", n / 2, n * 2, (n / 2).max(1)),
                    ),
                )
            }
            Constraint::KvBudget => {
                let kv = ctx.kv_capacity_tokens;
                (
                    "The KV budget binds: see what a larger pool would buy (servesim memory says whether it fits).".to_string(),
                    "sweep",
                    sweep(
                        "engine.kv_capacity_tokens",
                        format!("{}:{}:{}", kv / 2, kv * 2, (kv / 2).max(1)),
                    ),
                )
            }
            Constraint::MaxRunningRequests => {
                let m = b.max_running_requests;
                (
                    "The slot limit binds: raise it.".to_string(),
                    "sweep",
                    sweep(
                        &format!("engine.{}", s.words.slot_limit_key),
                        format!("{m},{},{}", m * 2, m * 4),
                    ),
                )
            }
            Constraint::ClientConcurrency => {
                let c = b.client_concurrency.unwrap_or(1);
                (
                    "The client's concurrency binds: let more requests in flight and watch where the server starts to queue.".to_string(),
                    "sweep",
                    sweep("client.concurrency", format!("{c},{},{}", c * 2, c * 4)),
                )
            }
            Constraint::StepTime => match ctx.rate_per_s {
                Some(r) => (
                    "The server keeps up: raise the arrival rate to find where it saturates."
                        .to_string(),
                    "sweep",
                    sweep(
                        "client.rate_per_s",
                        format!("{:.3},{:.3},{:.3}", r, r * 1.5, r * 2.0),
                    ),
                ),
                None => {
                    let c = b.client_concurrency.unwrap_or(1);
                    (
                        "The server keeps up: let more requests in flight to find where it saturates.".to_string(),
                        "sweep",
                        sweep("client.concurrency", format!("{c},{},{}", c * 2, c * 4)),
                    )
                }
            },
        },
    };
    let mut cmd = format!("servesim {verb} {}", shell_word(&scen));
    for set in &ctx.sets {
        let k = set.split_once('=').map_or(set.as_str(), |(k, _)| k.trim());
        if k != key {
            let _ = write!(cmd, " --set {}", shell_word(set));
        }
    }
    let _ = write!(cmd, " {}", shell_word_args(&arg));
    d.para(&why);
    d.command(&cmd);
}

/// `--flag KEY=VALUE` with the value quoted for a shell if it needs it.
fn shell_word_args(arg: &str) -> String {
    match arg.split_once(' ') {
        Some((flag, rest)) => format!("{flag} {}", shell_word(rest)),
        None => arg.to_string(),
    }
}
