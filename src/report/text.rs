//! The human report printed by `servesim run`.

use std::fmt::Write;

use super::summary::LatencyOut;
use super::Summary;
use crate::analysis::{Interval, Regime, Replications};
use crate::metrics::latency::Stats;
use crate::metrics::StopReason;

/// Thousands separators for integers.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn secs(s: f64) -> String {
    if s >= 3600.0 {
        format!("{s:.0} s ({:.1} h)", s / 3600.0)
    } else if s >= 120.0 {
        format!("{s:.0} s ({:.1} min)", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

fn stats_row(out: &mut String, name: &str, s: &Stats) {
    let _ = writeln!(
        out,
        "  {name:<20} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
        s.mean, s.p50, s.p90, s.p99
    );
}

fn views_table(w: &mut String, rows: &[super::summary::Observation], usage_word: &str) {
    let _ = writeln!(
        w,
        "  {:>8} │ {:>7} {:>7} {:>6} {:>9} │ {:>10} {:>10} {:>10}",
        "", "server", "", usage_word, "gen", "client", "client", "effective"
    );
    let _ = writeln!(
        w,
        "  {:>8} │ {:>7} {:>7} {:>6} {:>9} │ {:>10} {:>10} {:>10}",
        "t (s)", "running", "queued", "usage", "tok/s", "lifetime", "window", "tok/s"
    );
    let _ = writeln!(
        w,
        "  {:>8} │ {:>7} {:>7} {:>6} {:>9} │ {:>10} {:>10} {:>10}",
        "", "", "", "", "", "req/s", "req/s", ""
    );
    for ob in rows {
        let _ = writeln!(
            w,
            "  {:>8.0} │ {:>7} {:>7} {:>6.2} {:>9.1} │ {:>10.3} {:>10.3} {:>10.1}",
            ob.t_s,
            ob.running,
            ob.queued,
            ob.token_usage,
            ob.gen_tok_per_s,
            ob.lifetime_req_per_s,
            ob.window_req_per_s,
            ob.effective_tok_per_s
        );
    }
}

fn latency_block(w: &mut String, head: &str, l: &LatencyOut) {
    let _ = writeln!(w, "{head}");
    let _ = writeln!(
        w,
        "  {:<20} {:>12} {:>12} {:>12} {:>12}",
        "", "mean", "p50", "p90", "p99"
    );
    stats_row(w, "TTFT", &l.ttft_ms);
    stats_row(w, "TPOT", &l.tpot_ms);
    stats_row(w, "ITL", &l.itl_ms);
    stats_row(w, "E2E", &l.e2e_ms);
    stats_row(w, "server queue", &l.queue_ms);
    stats_row(w, "client slot wait", &l.client_wait_ms);
}

/// `run --replications N`: the steady rate across independent seeds.
fn replications_block(w: &mut String, r: &Replications) {
    let (first, last) = (r.seeds[0], r.seeds[r.seeds.len() - 1]);
    let _ = writeln!(
        w,
        "Replications: {} runs, seeds {first} … {last}, {} with a steady state",
        r.seeds.len(),
        r.steady_runs
    );
    match (r.mean_req_per_s, r.sd_req_per_s, r.req_per_s_ci95) {
        (Some(m), Some(sd), Some([lo, hi])) => {
            let _ = writeln!(
                w,
                "  {m:.4} req/s, 95 % t-interval [{lo:.4}, {hi:.4}] across them (sd {sd:.4}, {} df)",
                r.steady_runs - 1
            );
        }
        (Some(m), _, _) => {
            let _ = writeln!(w, "  {m:.4} req/s (one run: no interval)");
        }
        _ => {
            let _ = writeln!(w, "  no run has a steady state: no interval");
        }
    }
    let each: Vec<String> = r
        .seeds
        .iter()
        .zip(&r.req_per_s)
        .map(|(s, x)| x.map_or(format!("{s}: none"), |x| format!("{s}: {x:.4}")))
        .collect();
    let _ = writeln!(w, "  per seed: {}", each.join(", "));
}

/// The steady state, the overload, or the run as one batch; and the lifetime average's
/// convergence.
fn steady_section(w: &mut String, s: &Summary) {
    let a = &s.analysis;
    let rate_line = |w: &mut String, rate: f64, ci: Option<[f64; 2]>, i: Option<&Interval>| {
        let ci = match (ci, i) {
            (Some([lo, hi]), Some(i)) => format!(
                "95 % CI [{lo:.4}, {hi:.4}] (overlapping batch means, batches of {:.0} s, {} df)",
                i.batch_s, i.degrees_of_freedom
            ),
            _ => "no interval".to_string(),
        };
        let _ = writeln!(w, "  {rate:.4} req/s, {ci}");
    };
    match (&a.regime, &a.window) {
        (Regime::Steady { .. }, Some(win)) => {
            let st = &win.span;
            let cut = if let (true, Some(t)) = (win.mser_cut, win.startup_cleared_at_s) {
                format!("start-up cleared at {t:.0} s, then MSER-5 cut a further transient")
            } else {
                "from the end of the start-up".to_string()
            };
            let _ = writeln!(
                w,
                "Steady state (t = {:.0} … {:.0} s: {cut}, to the drain at the last send)",
                st.start_s, st.end_s
            );
            rate_line(w, st.req_per_s, win.ci95(), win.interval.as_ref());
            let _ = writeln!(
                w,
                "  {:.1} output tok/s; cross-checks: Little's law L/W = {:.1} / {:.1} s = {:.4} req/s; \
                 tok/s ÷ mean output = {:.4} req/s",
                st.output_tok_per_s,
                st.little_l_requests,
                st.little_w_s,
                st.little_law_req_per_s,
                st.tokens_req_per_s
            );
            let _ = writeln!(
                w,
                "  server in the window: {:.1} running, {:.1} queued, {} {:.2}",
                st.mean_running, st.mean_queued, s.words.kv_usage, st.mean_token_usage
            );
        }
        (Regime::Overloaded(o), Some(win)) => {
            let st = &win.span;
            let _ = writeln!(
                w,
                "No steady state: the open loop is overloaded (window t = {:.0} … {:.0} s)",
                st.start_s, st.end_s
            );
            let _ = writeln!(
                w,
                "  requests arrive at {:.4} req/s; the server completes {:.4} req/s — what it sustains at this workload:",
                o.arrival_req_per_s, o.served_req_per_s
            );
            rate_line(
                w,
                o.served_req_per_s,
                o.served_req_per_s_ci95,
                win.interval.as_ref(),
            );
            let _ = writeln!(
                w,
                "  the backlog grows by {:.2} requests per second ({} → {}), so every wait grows with the run: \
                 each second of arrivals adds {:.2} s to the wait of those behind",
                o.backlog_growth_req_per_s,
                thousands(o.backlog_start),
                thousands(o.backlog_end),
                o.wait_growth_s_per_s
            );
            let _ = writeln!(
                w,
                "  Little's law L/W = {:.1} / {:.1} s = {:.4} req/s follows the arrivals, not the completions; \
                 server: {:.1} running, {:.1} queued, {} {:.2}",
                st.little_l_requests,
                st.little_w_s,
                st.little_law_req_per_s,
                st.mean_running,
                st.mean_queued,
                s.words.kv_usage,
                st.mean_token_usage
            );
            let _ = writeln!(
                w,
                "  latencies below grow with the run's length; send fewer than about {:.2} req/s for a steady state",
                o.served_req_per_s
            );
        }
        _ => {
            let t = &s.totals.totals;
            let d = t.sim_duration_s;
            let per_s = |x: f64| if d > 0.0 { x / d } else { 0.0 };
            let _ = writeln!(w, "No steady state");
            let _ = writeln!(
                w,
                "  the run as a whole: {} requests answered in {} (makespan): {:.4} req/s, {:.1} output tok/s over it",
                thousands(t.requests_completed),
                secs(d),
                per_s(t.requests_completed as f64),
                per_s(t.output_tokens as f64)
            );
        }
    }
    if let Some(n) = &s.steady_state.reason {
        let _ = writeln!(w, "  note: {n}");
    }

    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Lifetime average at the end: {:.4} req/s ({:.1} effective tok/s = req/s × {:.0} mean output tokens)",
        s.lifetime.req_per_s, s.lifetime.effective_tok_per_s, s.workload.mean_output_tokens
    );
    if let Some(c) = &a.convergence {
        let ahead = if c.deficit_s < 0.0 {
            " (negative: the start-up completed faster than the steady rate)"
        } else {
            ""
        };
        match c.lifetime_within_5pct_at_s {
            Some(t) => {
                let _ = writeln!(
                    w,
                    "  it stays within 5 % of the steady rate from t = {} (measured); \
                     start-up deficit {:.0} s{ahead}, so 20 × |deficit| = {}",
                    secs(t),
                    c.deficit_s,
                    secs(c.estimated_s)
                );
            }
            None => {
                let _ = writeln!(
                    w,
                    "  it is not within 5 % of the steady rate before the drain; start-up deficit \
                     {:.0} s{ahead}, so it would be after about 20 × |deficit| = {}",
                    c.deficit_s,
                    secs(c.estimated_s)
                );
            }
        }
    }
}

/// The report text.
pub fn render(s: &Summary, source_name: &str) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "servesim {} — {}", s.servesim_version, s.scenario.name);
    let _ = writeln!(w, "scenario {source_name}, seed {}", s.scenario.seed);
    let conc = s
        .client
        .concurrency
        .map_or(String::new(), |c| format!(", concurrency {c}"));
    let rate = s
        .client
        .rate_per_s
        .map_or(String::new(), |r| format!(", {r} req/s"));
    let _ = writeln!(
        w,
        "engine {} ({}), KV pool {} tokens ({}), client {}{conc}{rate}",
        s.engine.kind,
        s.engine.schedule_policy(),
        thousands(s.kv_capacity_tokens),
        s.kv_capacity_source,
        s.client.mode
    );
    let _ = writeln!(
        w,
        "workload {} requests; prompts {}; responses {}",
        thousands(s.workload.requests),
        s.workload.prompt_tokens,
        s.workload.output_tokens
    );
    let _ = writeln!(w, "step time {}", s.engine.step_time);

    let _ = writeln!(w);
    let _ = writeln!(w, "The three views at the observation times");
    if s.observations.is_empty() {
        let _ = writeln!(
            w,
            "  (no observation times: set run.observe_at_s = [ … ] to snapshot the views)"
        );
    } else {
        views_table(w, &s.observations, s.words.kv_usage_column);
    }
    let _ = writeln!(
        w,
        "  server: {} (gen tok/s over {}); \
         client lifetime: completed ÷ t; window: completions in the last {:.0} s ÷ {:.0} s",
        s.words.latest_stats_line,
        s.engine.stats_window(),
        s.client.window_s,
        s.client.window_s
    );
    if !s.first_minutes.is_empty() {
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "How the views move in the first {} minutes",
            s.first_minutes.len()
        );
        views_table(w, &s.first_minutes, s.words.kv_usage_column);
    }

    let _ = writeln!(w);
    steady_section(w, s);
    if let Some(r) = &s.replications {
        replications_block(w, r);
    }

    if let Some(rs) = &s.roofline_step {
        let b = &rs.breakdown;
        let _ = writeln!(w);
        // The batch the summary priced: the window's mean (steady or overloaded), else the
        // whole run's.
        let at = match (&s.analysis.regime, &s.analysis.window) {
            (Regime::Steady { .. }, Some(_)) => "at the steady state",
            (Regime::Overloaded(_), Some(_)) => "at the overloaded window's mean batch",
            _ => "at the run's mean batch",
        };
        let _ = writeln!(
            w,
            "Roofline decode step {at} ({} running, {} KV tokens): {:.1} ms → {:.0} tok/s",
            rs.batch,
            thousands(rs.kv_tokens),
            1e3 * b.total_s,
            rs.gen_tok_per_s
        );
        let _ = writeln!(
            w,
            "  memory {:.1} ms (weights {:.1} ms, {:.0} experts touched per MoE layer; KV {:.1} ms) vs compute {:.1} ms; \
             all-reduces {:.1} ms; overhead {:.1} ms",
            1e3 * b.memory_s,
            1e3 * b.weights_s,
            b.experts_touched,
            1e3 * b.kv_s,
            1e3 * b.compute_s,
            1e3 * b.communication_s,
            1e3 * b.overhead_s
        );
    }

    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Server over the whole run: {:.1} running, {:.1} queued, {} {:.2}, \
         mean {} {:.1} tok/s (its {} {} weighted by the time each covers; \
         their plain mean {:.1})",
        s.server.mean_running,
        s.server.mean_queued,
        s.words.kv_usage,
        s.server.mean_token_usage,
        s.words.gen_throughput,
        s.server.gen_tok_per_s_mean,
        s.server.decode_log_lines,
        s.words.stats_lines,
        s.server.gen_tok_per_s_mean_of_lines
    );

    let _ = writeln!(w);
    latency_block(w, "Latency (ms), whole run", &s.latency);
    match &s.steady_latency {
        Some(l) => {
            let until = l.until_s.map_or(String::new(), |u| {
                format!(", token gaps until the last send at {u:.0} s")
            });
            let head = format!(
                "Latency (ms), steady window: requests sent from t = {:.0} s{until}",
                l.from_s
            );
            latency_block(w, &head, &l.latency);
        }
        None => {
            let _ = writeln!(w, "  (no steady window: no steady-state latencies)");
        }
    }
    let _ = writeln!(
        w,
        "  TTFT, TPOT and E2E count from the send, after the client slot (as {}); \
         slot wait is apart; ITL pools every gap between a request's successive tokens",
        s.words.bench_client
    );
    if let Some(o) = &s.overhead {
        let _ = writeln!(
            w,
            "  off the GPU (network round trip {:.1} ms, HTTP and tokenizer {:.1} ms, streaming \
             {:.3} ms per token): +{:.1} ms to every TTFT, +{:.3} ms to TPOT, +{:.1} ms to E2E \
             on average",
            o.network_rtt_ms,
            o.request_overhead_ms,
            o.per_token_overhead_ms,
            o.ttft_added_ms,
            o.tpot_added_ms,
            o.e2e_added_ms_mean
        );
        stats_row(w, "engine TTFT", &o.engine_ttft_ms);
        stats_row(w, "engine E2E", &o.engine_e2e_ms);
        let _ = writeln!(
            w,
            "  engine TTFT and E2E count from the request reaching the engine's queue to its \
             first and last token leaving it"
        );
    }

    let t = &s.totals.totals;
    let _ = writeln!(w);
    let stop = match s.totals.stop_reason {
        StopReason::AllAnswered => "every request answered",
        StopReason::MaxSimTime => "stopped at run.max_sim_s",
    };
    // `1 retraction`, `2 retractions`.
    let n_of = |n: u64, one: &str, many: &str| {
        format!("{} {}", thousands(n), if n == 1 { one } else { many })
    };
    let _ = writeln!(
        w,
        "Totals: {} completed, {} rejected, {} output tokens in {} ({stop}); {} in {}; {}, {}",
        thousands(t.requests_completed),
        thousands(t.requests_rejected),
        thousands(t.output_tokens),
        secs(t.sim_duration_s),
        n_of(t.retractions, s.words.eviction, s.words.evictions),
        n_of(t.retraction_events, "event", "events"),
        n_of(
            t.prefill_batches,
            s.words.prefill_step,
            s.words.prefill_steps
        ),
        n_of(t.decode_steps, s.words.decode_step, s.words.decode_steps),
    );
    let _ = writeln!(w);
    let _ = writeln!(w, "Simplified (see the README):");
    for x in &s.simplifications {
        let _ = writeln!(w, "  - {x}");
    }
    o
}
