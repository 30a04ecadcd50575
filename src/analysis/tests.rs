//! The regime's, the binding constraint's and the convergence's rules by hand, on spans and time
//! series made up for each rule (only the fields a rule reads are set).

use super::*;

/// A run's result to hang made-up numbers on: a tiny closed loop (its counters and totals are
/// only carried along into the binding).
fn template() -> RunResult {
    let text = "name = \"t\"\n[engine]\nkv_capacity_tokens = 10000\n[workload]\nrequests = 4\n\
                prompt_tokens = { dist = \"constant\", value = 10 }\n\
                output_tokens = { dist = \"constant\", value = 2 }\n[client]\nconcurrency = 2\n";
    let src = crate::scenario::Source {
        name: "t.toml".into(),
        base_dir: std::path::PathBuf::from("."),
        text: text.into(),
    };
    let sc = crate::scenario::load(&src, &[]).unwrap();
    crate::engine::run(&sc, &crate::engine::RunOptions::default()).unwrap()
}

/// A span from `start_s` to `end_s` with every measure zero.
fn span(start_s: f64, end_s: f64) -> Span {
    Span {
        start_s,
        end_s,
        completions: 0,
        req_per_s: 0.0,
        output_tok_per_s: 0.0,
        little_l_requests: 0.0,
        little_w_s: 0.0,
        little_law_req_per_s: 0.0,
        tokens_req_per_s: 0.0,
        mean_running: 0.0,
        mean_queued: 0.0,
        mean_token_usage: 0.0,
        queue_busy_fraction: 0.0,
        arrival_req_per_s: 0.0,
        backlog_start: 0,
        backlog_end: 0,
        correlation_s: 0.0,
    }
}

/// A window over `span` with an interval (its numbers are not read by the rules tested here).
fn window(span: Span) -> Window {
    Window {
        interval: Some(Interval {
            req_per_s_ci95: [1.0, 2.0],
            batch_s: 1.0,
            batches: 10,
            degrees_of_freedom: 13,
        }),
        startup_cleared_at_s: Some(span.start_s),
        mser_cut: false,
        span,
    }
}

#[test]
fn an_open_loop_backlog_growing_by_exactly_twenty_requests_is_overloaded() {
    // 10 s at 10 arrivals/s, 8 completions/s; the backlog goes from 5 to 25: it grows by
    // 20 / 10 s = 2 req/s > 5 % × 10 = 0.5 req/s, and by 20 requests, the least that counts.
    let mut r = template();
    r.open_loop = true;
    let s = Span {
        arrival_req_per_s: 10.0,
        req_per_s: 8.0,
        backlog_start: 5,
        backlog_end: 25,
        ..span(0.0, 10.0)
    };
    let o = overload(&r, &window(s.clone())).expect("overloaded");
    assert_eq!(o.backlog_growth_req_per_s, 2.0);
    // arrival / served − 1 = 10 / 8 − 1: each second of arrivals adds a quarter second of wait.
    assert_eq!(o.wait_growth_s_per_s, 0.25);
    // One request fewer is not enough; nor is a closed loop's growth.
    let short = Span {
        backlog_end: 24,
        ..s.clone()
    };
    assert!(overload(&r, &window(short)).is_none());
    r.open_loop = false;
    assert!(overload(&r, &window(s)).is_none());
}

#[test]
fn a_backlog_growing_by_less_than_five_percent_of_the_arrivals_is_not_overload() {
    // 100 s at 100 arrivals/s: the bar is 5 % × 100 = 5 req/s. A backlog from 0 to 400 grows
    // by 4 req/s (and by far more than 20 requests): below the bar. From 0 to 600: 6 req/s.
    let mut r = template();
    r.open_loop = true;
    let s = Span {
        arrival_req_per_s: 100.0,
        req_per_s: 96.0,
        backlog_end: 400,
        ..span(0.0, 100.0)
    };
    assert!(overload(&r, &window(s.clone())).is_none());
    let growing = Span {
        backlog_end: 600,
        ..s
    };
    assert!(overload(&r, &window(growing)).is_some());
}

#[test]
fn a_window_of_four_correlation_times_and_fifty_completions_is_reliable() {
    // 40 s over a 10 s correlation time: exactly 4 times, the least trusted; 50 completions,
    // exactly the least trusted. 49 completions are too few.
    let s = Span {
        completions: 50,
        correlation_s: 10.0,
        ..span(0.0, 40.0)
    };
    assert_eq!(reliability(&window(s.clone())), (true, None));
    let fewer = Span {
        completions: 49,
        ..s
    };
    let (reliable, note) = reliability(&window(fewer));
    assert!(!reliable);
    assert!(note.unwrap().contains("only 49 completions"));
}

/// The constraint `binding` names for span `s` of a run with `max_running` slots and the
/// client's `concurrency`.
fn constraint(s: &Span, max_running: u64, concurrency: Option<u64>) -> Constraint {
    let mut r = template();
    r.max_running_requests = max_running;
    r.client_concurrency = concurrency;
    binding(&r, s, "steady window").constraint
}

#[test]
fn requests_waiting_half_the_time_bind_the_batch_at_the_server() {
    // The queue busy exactly half the time counts as waiting (the bound is 0.5, inclusive):
    // with 10 of 100 slots running, the KV budget stops admission. Just below half, the
    // server admits everything it gets and, without a client limit, the step time binds.
    let s = Span {
        queue_busy_fraction: 0.5,
        mean_running: 10.0,
        ..span(0.0, 100.0)
    };
    assert_eq!(constraint(&s, 100, None), Constraint::KvBudget);
    let less = Span {
        queue_busy_fraction: 0.49,
        ..s
    };
    assert_eq!(constraint(&less, 100, None), Constraint::StepTime);
}

#[test]
fn a_batch_within_five_percent_of_the_slot_limit_is_bound_by_it() {
    // 97 of 100 slots running on average is at the limit (≥ 95 % × 100); 94 is not, and with
    // requests waiting the KV budget is what stops admission.
    let s = Span {
        queue_busy_fraction: 0.8,
        mean_running: 97.0,
        ..span(0.0, 100.0)
    };
    assert_eq!(constraint(&s, 100, None), Constraint::MaxRunningRequests);
    let below = Span {
        mean_running: 94.0,
        ..s
    };
    assert_eq!(constraint(&below, 100, None), Constraint::KvBudget);
}

#[test]
fn the_client_limit_binds_when_its_requests_in_flight_fill_it_not_the_running_ones() {
    // Concurrency 64: 62 requests in flight on average is at the limit (≥ 95 % × 64 = 60.8),
    // though only 40 of them are running (the rest are being prefilled or answered); 60 in
    // flight is not, whatever runs.
    let s = Span {
        queue_busy_fraction: 0.2,
        little_l_requests: 62.0,
        mean_running: 40.0,
        ..span(0.0, 100.0)
    };
    assert_eq!(constraint(&s, 256, Some(64)), Constraint::ClientConcurrency);
    let below = Span {
        little_l_requests: 60.0,
        mean_running: 62.0,
        ..s
    };
    assert_eq!(constraint(&below, 256, Some(64)), Constraint::StepTime);
}

#[test]
fn convergence_is_the_first_point_after_the_last_one_off_by_more_than_five_percent() {
    // A steady rate of 10 req/s; completions 5, 16, 28, 39, 51 by t = 1…5 s give lifetime
    // averages 5, 8, 9.33, 9.75, 10.2: the one at 3 s is 6.7 % off, the last outside 5 %, so
    // the average is within from the next point, 4 s. At the window's end, 5 s, the deficit is
    // d = 5 − 51 / 10 = −0.1 s (the start-up ran ahead), and the estimate 20 × |d| = 2 s.
    let mut r = template();
    let at = r.samples[0].clone();
    r.samples = [0u64, 5, 16, 28, 39, 51]
        .iter()
        .enumerate()
        .map(|(t, &completed)| Sample {
            t_s: t as f64,
            completed,
            lifetime_req_per_s: if t == 0 {
                0.0
            } else {
                completed as f64 / t as f64
            },
            ..at.clone()
        })
        .collect();
    let s = Span {
        req_per_s: 10.0,
        ..span(2.0, 5.0)
    };
    let c = convergence(&r, &s);
    assert_eq!(c.lifetime_within_5pct_at_s, Some(4.0));
    assert!((c.deficit_s + 0.1).abs() < 1e-9, "{c:?}");
    assert!((c.estimated_s - 2.0).abs() < 1e-9, "{c:?}");
}
