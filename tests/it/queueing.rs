//! Analytic cross-checks from queueing theory.

use servesim::analysis;

use crate::{run, scenario};

/// With no fixed step cost and 1 ms per running request, a decode step of B requests takes
/// B ms and gives each one token: the server is a processor-sharing queue serving 1000 tokens/s.
/// With Poisson arrivals this is M/G/1-PS, whose mean response time is E[S] / (1 − ρ) for any
/// service distribution. Prefill is free (1 ns), so a request's service is its output − 1
/// tokens.
#[test]
fn processor_sharing_mean_response_time_matches_mg1_ps() {
    let text = r#"
name = "M/G/1-PS"
seed = 11
[engine]
kv_capacity_tokens = 10000000
max_running_requests = 100000
[engine.step_time]
decode_base_ms = 0.0
decode_per_seq_ms = 1.0
decode_per_kv_token_ns = 0.0
prefill_base_ms = 0.0
prefill_per_token_us = 0.0
[workload]
requests = 60000
prompt_tokens = { dist = "constant", value = 1 }
output_tokens = { dist = "exponential", mean = 100 }
[client]
mode = "poisson"
rate_per_s = 5.0
"#;
    let r = run(&scenario(text));
    let n = r.requests.len() as f64;
    let mean_service_s = r
        .requests
        .iter()
        .map(|q| f64::from(q.output_tokens - 1) * 1e-3)
        .sum::<f64>()
        / n;
    let rho = 5.0 * mean_service_s;
    let expected = mean_service_s / (1.0 - rho);
    let measured = r.latency.e2e_ms.stats().mean / 1000.0;
    let rel = (measured / expected - 1.0).abs();
    // Tolerance: sampling error of the mean over 60 000 correlated responses is about 2 %,
    // and a decode step's granularity adds about half a step per request (< 1 %).
    assert!(
        rel < 0.05,
        "PS mean response {measured:.4} s vs theory {expected:.4} s (rho {rho:.3})"
    );
    // Little's law: mean number in system = throughput × mean time in system, and for PS the
    // mean number in system is ρ / (1 − ρ).
    let l = r.time_avg.in_flight;
    assert!((l / (rho / (1.0 - rho)) - 1.0).abs() < 0.06, "L = {l}");
    // The steady-state analysis finds the arrival rate.
    let a = analysis::analyse(&r);
    let w = &a.steady().expect("a steady state").span;
    assert!((w.req_per_s / 5.0 - 1.0).abs() < 0.03, "{w:?}");
    let [lo, hi] = a.steady().unwrap().ci95().unwrap();
    assert!(lo <= 5.0 * 1.01 && hi >= 5.0 * 0.99);
    assert!((w.little_law_req_per_s / w.req_per_s - 1.0).abs() < 0.02);
}

/// A closed loop of N clients with no think time keeps exactly N requests in flight until the
/// drain: Little's law then gives throughput = N / mean E2E, which must match the completion
/// rate in the steady window.
#[test]
fn closed_loop_throughput_obeys_littles_law() {
    let text = r#"
name = "closed"
seed = 3
[engine]
kv_capacity_tokens = 200000
[engine.step_time]
decode_base_ms = 20.0
decode_per_seq_ms = 0.5
prefill_base_ms = 5.0
prefill_per_token_us = 50.0
[workload]
requests = 5000
prompt_tokens = { dist = "lognormal", mean = 200, cv = 0.5 }
output_tokens = { dist = "gamma", mean = 300, cv = 1.0 }
[client]
concurrency = 32
"#;
    let r = run(&scenario(text));
    let a = analysis::analyse(&r);
    let w = &a.steady().expect("a steady state").span;
    assert!((w.little_l_requests - 32.0).abs() < 1e-6, "{w:?}");
    let rel = (w.little_law_req_per_s / w.req_per_s - 1.0).abs();
    assert!(rel < 0.03, "{w:?}");
    let tok = (w.tokens_req_per_s / w.req_per_s - 1.0).abs();
    assert!(tok < 0.05, "{w:?}");
}
