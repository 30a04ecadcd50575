//! The last sections: what binds the batch, what "req/s × mean tokens" hides, and one
//! what-if to try (a command that keeps the user's overrides and changes something).

use std::fmt::Write;

use super::{count, pct, rps, secs, Context};
use crate::analysis::{Constraint, Regime};
use crate::report::doc::Doc;
use crate::report::summary::{Observation, Summary};
use crate::report::text::thousands;

pub(super) fn binding(d: &mut Doc, s: &Summary, n: usize) {
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
                    ", and running requests were {} {} when they outgrew it",
                    s.words.evicted,
                    if b.retractions == 1 {
                        "once".to_string()
                    } else {
                        format!("{} times", thousands(b.retractions))
                    }
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

/// With shared prefixes: what the prefix cache bought in this run, or that it is off, with the
/// sweep that compares the two in the engine's own key.
pub(super) fn prefix_cache(d: &mut Doc, s: &Summary, _ctx: &Context) {
    let Some(c) = &s.prefix_cache else {
        return;
    };
    let key = s.words.prefix_cache_sweep;
    d.para(&if c.enabled {
        format!(
            "What the prefix cache bought: {} of the {} prompt tokens ({}) were found cached \
             when their requests were first admitted, and {} of {} requests hit. Those tokens \
             needed no prefill and no new KV: shorter prefill steps, a lower time to first \
             token, and room in the pool for more requests at once. The cache evicted {} tokens \
             to make room. Without the cache every prompt is prefilled whole: to compare, vary \
             {key} in a sweep.",
            thousands(c.cached_tokens),
            thousands(c.prompt_tokens),
            pct(c.token_hit_rate),
            thousands(c.hit_requests),
            thousands(c.requests),
            thousands(c.evicted_tokens)
        )
    } else {
        format!(
            "The requests share prompt prefixes but the engine's prefix cache is off: each of the \
             {} prompt tokens was prefilled and held once per request. To see what the cache \
             would save, vary {key} in a sweep.",
            thousands(c.prompt_tokens)
        )
    });
}

pub(super) fn hides(d: &mut Doc, s: &Summary, o: Option<&Observation>, n: usize) {
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

pub(super) fn what_if(d: &mut Doc, s: &Summary, ctx: &Context, n: usize) {
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
