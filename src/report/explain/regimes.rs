//! The sentences of runs without a steady state: an overloaded open loop, one batch, a
//! start-up that lasts until the drain.

use std::fmt::Write;

use super::{rps, secs};
use crate::analysis::{NoWindow, Overload, Window};
use crate::report::summary::Summary;
use crate::report::text::thousands;

pub(super) fn overload(s: &Summary, o: &Overload, w: &Window) -> String {
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

pub(super) fn no_window(s: &Summary, n: &NoWindow) -> String {
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

pub(super) fn one_batch(s: &Summary, n: &NoWindow) -> String {
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
