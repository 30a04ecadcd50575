//! `servesim explain`: the story of a run in plain words, every number from the run.

use std::fmt::Write;

use super::summary::{Observation, Summary};
use super::text::thousands;
use crate::analysis::Constraint;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Plain text for a terminal.
    Text,
    /// Markdown.
    Markdown,
}

/// What the reader needs to rerun things: the scenario path as typed, and whether a memory
/// model is available.
#[derive(Clone, Debug)]
pub struct Context {
    /// The scenario argument to repeat in suggested commands (`None`: the built-in B2).
    pub scenario_arg: Option<String>,
    /// Whether the scenario has memory-model inputs.
    pub has_memory_model: bool,
    /// The scenario's KV budget, for a suggested sweep.
    pub kv_capacity_tokens: u64,
    /// The scenario's `mem_fraction_static`, if known.
    pub mem_fraction_static: Option<f64>,
    /// The scenario's open-loop rate, if any.
    pub rate_per_s: Option<f64>,
}

struct Doc {
    out: String,
    fmt: Format,
}

impl Doc {
    fn heading(&mut self, n: usize, title: &str) {
        match self.fmt {
            Format::Text => {
                let _ = writeln!(self.out, "\n{n}. {title}");
            }
            Format::Markdown => {
                let _ = writeln!(self.out, "\n## {n}. {title}\n");
            }
        }
    }

    /// A paragraph, wrapped at 96 columns in text (Markdown is left unwrapped).
    fn para(&mut self, text: &str) {
        match self.fmt {
            Format::Markdown => {
                let _ = writeln!(self.out, "{text}\n");
            }
            Format::Text => {
                let mut line = String::from("  ");
                for word in text.split_whitespace() {
                    if line.len() + word.len() + 1 > 96 && !line.trim().is_empty() {
                        let _ = writeln!(self.out, "{}", line.trim_end());
                        line = String::from("  ");
                    }
                    line.push_str(word);
                    line.push(' ');
                }
                if !line.trim().is_empty() {
                    let _ = writeln!(self.out, "{}", line.trim_end());
                }
            }
        }
    }

    fn command(&mut self, cmd: &str) {
        match self.fmt {
            Format::Text => {
                let _ = writeln!(self.out, "    {cmd}");
            }
            Format::Markdown => {
                let _ = writeln!(self.out, "```sh\n{cmd}\n```\n");
            }
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

fn dur(s: f64) -> String {
    if s >= 7200.0 {
        format!("{} s ({:.1} h)", thousands(s.round() as u64), s / 3600.0)
    } else if s >= 120.0 {
        format!("{} s ({:.0} min)", thousands(s.round() as u64), s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// The observation the story is told at: the first observation, else the first minute mark
/// with at least one response, else none.
fn focus(s: &Summary) -> Option<&Observation> {
    s.observations
        .first()
        .or_else(|| s.first_minutes.iter().find(|o| o.completed > 0))
        .or(s.first_minutes.first())
}

/// The explanation.
pub fn render(s: &Summary, ctx: &Context, fmt: Format) -> String {
    let mut d = Doc {
        out: String::new(),
        fmt,
    };
    let st = &s.steady_state;
    let rate = st.req_per_s;
    let mean_out = s.workload.mean_output_tokens;
    match fmt {
        Format::Text => {
            let _ = writeln!(
                d.out,
                "Why the client and the server disagree — {}",
                s.scenario.name
            );
        }
        Format::Markdown => {
            let _ = writeln!(
                d.out,
                "# Why the client and the server disagree — {}",
                s.scenario.name
            );
        }
    }

    // 1. The three views.
    d.heading(1, "Three views of one run");
    let obs: Vec<&Observation> = if s.observations.is_empty() {
        focus(s).into_iter().collect()
    } else {
        s.observations.iter().collect()
    };
    for o in &obs {
        d.para(&format!(
            "At t = {:.0} s the server logs {:.0} tok/s with {} requests running and {} queued \
             ({} {:.2}). The client's progress line — completions since the start ÷ time \
             since the start — shows {:.3} req/s; counting only the last {:.0} s it is {:.3} req/s.",
            o.t_s,
            o.gen_tok_per_s,
            o.running,
            o.queued,
            s.words.kv_usage,
            o.token_usage,
            o.lifetime_req_per_s,
            s.client.window_s.min(o.t_s),
            o.window_req_per_s
        ));
    }
    d.para(&format!(
        "The steady state — completions per second once the start-up is over and before the \
         last requests drain — is {:.3} req/s (95 % interval {:.3}–{:.3}), or {:.0} output tok/s.",
        rate, st.req_per_s_ci95[0], st.req_per_s_ci95[1], st.output_tok_per_s
    ));
    if let Some(o) = obs.first() {
        if rate > 0.0 {
            let ratio = o.lifetime_req_per_s / rate;
            let words = if (0.35..=0.65).contains(&ratio) {
                "about half of it"
            } else if ratio < 0.35 {
                "far below it"
            } else if ratio < 0.95 {
                "below it"
            } else {
                "already close to it"
            };
            d.para(&format!(
                "So at t = {:.0} s the lifetime figure is {} of the steady rate — {words} — \
                 while the server is working at full speed.",
                o.t_s,
                pct(ratio)
            ));
        }
    }

    // 2. Why the lifetime rate lags.
    d.heading(2, "Why the lifetime rate lags");
    let per_request = if st.mean_running > 0.0 {
        st.output_tok_per_s / st.mean_running
    } else {
        0.0
    };
    let sent_at_once = s.client.mode == "closed";
    let start = if sent_at_once {
        format!(
            "All {} client slots fired at t = 0.",
            s.client
                .concurrency
                .map_or(String::from("the"), |c| c.to_string())
        )
    } else {
        "Requests arrived from t = 0 on.".to_string()
    };
    match s.first_completion_s {
        Some(t1) => d.para(&format!(
            "{start} The first response arrived only at t = {t1:.0} s: each response is about \
             {} tokens, and the server's {:.0} tok/s are shared by about {:.0} running requests, \
             so each advances at about {:.0} tok/s and needs about {:.0} s once admitted.",
            thousands(mean_out.round() as u64),
            st.output_tok_per_s,
            st.mean_running,
            per_request,
            if per_request > 0.0 {
                mean_out / per_request
            } else {
                0.0
            }
        )),
        None => d.para(&format!("{start} No response arrived during the run.")),
    }
    if let (Some(o), true) = (obs.first(), rate > 0.0) {
        let d_t = o.t_s - o.completed as f64 / rate;
        d.para(&format!(
            "Measure the start-up by its deficit d: how far the completions lag behind what the \
             steady rate would have delivered. At t = {:.0} s the client had {} responses where \
             {:.3} req/s × {:.0} s = {:.0} were due: d = {:.0} s. After a deficit of d seconds the \
             lifetime average can only reach 1 − d/T of the steady rate at time T: \
             1 − {:.0}/{:.0} = {} — exactly what the progress line shows.",
            o.t_s,
            o.completed,
            rate,
            o.t_s,
            rate * o.t_s,
            d_t,
            d_t,
            o.t_s,
            pct(1.0 - d_t / o.t_s)
        ));
    }

    // 3. When it will be within 5 %.
    d.heading(3, "When the lifetime average will be within 5 %");
    let c = &s.convergence;
    let rule = format!(
        "The whole ramp left a deficit of d = {:.0} s; the lifetime average is within 5 % of the \
         steady rate once d/T ≤ 5 %, i.e. after about 20 × d = {}.",
        c.deficit_s,
        dur(c.estimated_s)
    );
    match c.lifetime_within_5pct_at_s {
        Some(t) => d.para(&format!(
            "{rule} In this run it stays within 5 % from t = {} on (measured).",
            dur(t)
        )),
        None => d.para(&format!(
            "{rule} This run drains before that, so the progress line never shows the steady rate."
        )),
    }

    // 4. Little's law.
    d.heading(4, "Little's law with this run's numbers");
    let ttft = s.latency.ttft_ms.mean / 1000.0;
    let e2e = s.latency.e2e_ms.mean / 1000.0;
    d.para(&format!(
        "Requests in flight = throughput × time in flight. In the steady window the client kept \
         L = {:.1} requests in flight and each took W = {:.0} s from send to last token, so \
         L / W = {:.3} req/s — the measured rate is {:.3} req/s. Of those {:.0} s, about {:.0} s \
         pass before the first token (mostly waiting in the server's queue) and {:.0} s \
         generating.",
        st.little_l_requests,
        st.little_w_s,
        st.little_law_req_per_s,
        rate,
        e2e,
        ttft,
        (e2e - ttft).max(0.0)
    ));

    // 5. What binds the batch.
    let b = &s.binding;
    d.heading(
        5,
        &format!("What binds the batch: {}", b.constraint.describe()),
    );
    let evidence = match b.constraint {
        Constraint::KvBudget => format!(
            "Requests waited in the server's queue {} of the steady window, yet only {:.1} ran on \
             average — far below the slot limit of {} — with {} at {:.2}. Admission \
             stopped {} times because the next request did not fit in the KV budget{}. {}",
            pct(b.queue_busy_fraction),
            b.mean_running,
            thousands(b.max_running_requests),
            s.words.kv_usage,
            b.mean_token_usage,
            thousands(b.memory_stops),
            if b.retractions == 0 {
                String::new()
            } else {
                format!(
                    ", and {} requests were {} when the running ones outgrew it",
                    thousands(b.retractions),
                    s.words.evicted
                )
            },
            s.words.admission_rule
        ),
        Constraint::MaxRunningRequests => format!(
            "Requests waited in the server's queue {} of the steady window while {:.1} ran on \
             average, at the slot limit {} = {} ({} {:.2}; admission \
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
            "The server's queue was empty {} of the steady window and {} averaged \
             {:.2}: the server admits what it gets. The client kept {:.1} requests in flight \
             against its limit of {}, so the batch is as large as the client lets it be.",
            pct(1.0 - b.queue_busy_fraction),
            s.words.kv_usage,
            b.mean_token_usage,
            b.mean_in_flight,
            b.client_concurrency.unwrap_or(0)
        ),
        Constraint::StepTime => format!(
            "The server's queue was empty {} of the steady window, {} averaged {:.2} \
             and the client was not at a concurrency limit ({:.1} in flight): every request is \
             admitted on arrival, and the batch ({:.1} running on average) is the arrival rate \
             times the time each request spends in service — which the step time sets.",
            pct(1.0 - b.queue_busy_fraction),
            s.words.kv_usage,
            b.mean_token_usage,
            b.mean_in_flight,
            b.mean_running
        ),
    };
    d.para(&evidence);

    // 6. What req/s × mean tokens hides.
    d.heading(6, "What \"req/s × mean tokens\" hides");
    if let Some(o) = obs.first() {
        d.para(&format!(
            "At t = {:.0} s, {:.3} req/s × {} tokens = {:.0} \"effective\" tok/s against the \
             server's {:.0} tok/s. The difference is not lost work: {} of the {} tokens generated \
             by then belong to requests that had not finished, which a completion count cannot see.",
            o.t_s,
            o.lifetime_req_per_s,
            thousands(mean_out.round() as u64),
            o.effective_tok_per_s,
            o.gen_tok_per_s,
            pct(o.in_progress_token_share),
            thousands(o.generated_tokens)
        ));
    }
    let ot = &s.workload.output_tokens_stats;
    let drain = match (s.last_send_s, s.totals.stop_reason) {
        (Some(l), crate::metrics::StopReason::AllAnswered) => {
            format!(
                " After the client sent its last request at t = {}, the run took another {} to drain.",
                dur(l),
                dur(s.totals.totals.sim_duration_s - l)
            )
        }
        _ => String::new(),
    };
    d.para(&format!(
        "A mean also hides the spread: responses had a median of {} tokens and a p99 of {}, and \
         the longest ones set how long a batch job takes to finish.{drain}",
        thousands(ot.p50.round() as u64),
        thousands(ot.p99.round() as u64)
    ));

    // 7. One what-if.
    d.heading(7, "One what-if to try");
    let scen = ctx
        .scenario_arg
        .clone()
        .unwrap_or_else(|| "scenarios/case-study-b2.toml".to_string());
    let (why, cmd) = match b.constraint {
        Constraint::KvBudget if ctx.has_memory_model => (
            format!(
                "The KV budget binds: see what a larger {} buys, and where it runs out of memory.",
                s.words.memory_fraction
            ),
            format!(
                "servesim sweep {scen} --vary {}",
                s.words.memory_fraction_sweep
            ),
        ),
        Constraint::KvBudget => {
            let kv = ctx.kv_capacity_tokens;
            (
                "The KV budget binds: see what a larger pool would buy (servesim memory says whether it fits).".to_string(),
                format!(
                    "servesim sweep {scen} --vary engine.kv_capacity_tokens={}:{}:{}",
                    kv / 2,
                    kv * 2,
                    (kv / 2).max(1)
                ),
            )
        }
        Constraint::MaxRunningRequests => (
            "The slot limit binds: raise it.".to_string(),
            format!(
                "servesim sweep {scen} --vary engine.{}={},{},{}",
                s.words.slot_limit_key,
                b.max_running_requests,
                b.max_running_requests * 2,
                b.max_running_requests * 4
            ),
        ),
        Constraint::ClientConcurrency => {
            let cc = b.client_concurrency.unwrap_or(1);
            (
                "The client's concurrency binds: let more requests in flight and watch where the server starts to queue.".to_string(),
                format!("servesim sweep {scen} --vary client.concurrency={},{},{}", cc, cc * 2, cc * 4),
            )
        }
        Constraint::StepTime => {
            let r = ctx.rate_per_s.unwrap_or(rate);
            (
                "The server keeps up: raise the arrival rate to find where it saturates."
                    .to_string(),
                format!(
                    "servesim sweep {scen} --vary client.rate_per_s={:.3},{:.3},{:.3}",
                    r,
                    r * 1.5,
                    r * 2.0
                ),
            )
        }
    };
    d.para(&why);
    d.command(&cmd);
    d.out
}
