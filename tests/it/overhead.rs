//! Off-GPU overheads (`client.network_rtt_ms`, `client.request_overhead_ms`,
//! `client.per_token_overhead_ms`): they shift what the client sees, not what the GPU does.

use servesim::engine::{self, RunOptions, Stepping};

use crate::{run, scenario};

/// Decode 10 ms + 1 ms per request + 1 ns per KV token; prefill 5 ms + 10 µs per token; the
/// step-by-step loop. A 100-token prompt with 5 output tokens: prefill 6 ms, then four decode
/// steps of 11 ms attending 101..104 KV tokens: 44 ms + 410 ns.
fn text(extra_client: &str, requests: u32) -> String {
    format!(
        r#"
name = "overhead"
[engine]
kv_capacity_tokens = 10000
disable_overlap_schedule = true
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 1.0
decode_per_kv_token_ns = 1.0
prefill_base_ms = 5.0
prefill_per_token_us = 10.0
[workload]
requests = {requests}
prompt_tokens = {{ dist = "constant", value = 100 }}
output_tokens = {{ dist = "constant", value = 5 }}
[client]
{extra_client}
"#
    )
}

const OVERHEADS: &str =
    "network_rtt_ms = 2.0\nrequest_overhead_ms = 40.0\nper_token_overhead_ms = 0.5\n";

#[test]
fn a_closed_loop_client_sees_every_overhead_and_holds_its_slot_until_the_last_token() {
    let r = run(&scenario(&text(
        &format!("concurrency = 1\n{OVERHEADS}"),
        2,
    )));
    let (a, b) = (&r.requests[0], &r.requests[1]);
    // Sent at 0, in the engine's queue at 1 ms (half the round trip) + 40 ms; prefill ends at
    // 47 ms; the first token reaches the client 1 ms + 0.5 ms later.
    assert_eq!(a.sent_ns, 0);
    assert_eq!(a.arrived_ns, 41_000_000);
    assert_eq!(a.first_token_ns, Some(48_500_000));
    // The engine's last token at 47 ms + 44 ms + 410 ns; the client has it 1 ms + 5 × 0.5 ms
    // later.
    assert_eq!(a.done_ns, 91_000_410 + 3_500_000);
    // The slot was held until then: the second request leaves at that instant.
    assert_eq!(b.sent_ns, a.done_ns);
    assert_eq!(b.arrived_ns, b.sent_ns + 41_000_000);
    assert_eq!(b.done_ns, b.arrived_ns + 50_000_410 + 3_500_000);
    // The client's latencies carry the overheads; the engine's do not.
    let ttft = r.latency.ttft_ms.stats();
    assert!((ttft.mean - 48.5).abs() < 1e-9, "{ttft:?}");
    let tpot = r.latency.tpot_ms.stats().mean;
    assert!((tpot - (11.0001025 + 0.5)).abs() < 1e-6, "{tpot}");
    let engine = r.engine_latency.as_ref().expect("recorded with overheads");
    assert!((engine.ttft_ms.stats().mean - 6.0).abs() < 1e-9);
    assert!((engine.e2e_ms.stats().mean - 50.000410).abs() < 1e-9);
    // The GPU did exactly the same work as without overheads, and queues measure the engine.
    let bare = run(&scenario(&text("concurrency = 1\n", 2)));
    assert_eq!(r.totals.decode_steps, bare.totals.decode_steps);
    assert_eq!(r.totals.prefill_batches, bare.totals.prefill_batches);
    assert!(r.latency.queue_ms.stats().p99 < 1e-9);
    assert!(bare.engine_latency.is_none());
}

#[test]
fn requests_in_transit_and_responses_on_their_way_back_do_not_hold_the_gpu() {
    // Eight slots, every request sent at once: they all reach the engine 41 ms later and
    // are batched together, exactly as without overheads but 41 ms later.
    let bare = run(&scenario(&text("concurrency = 8\n", 8)));
    let with = run(&scenario(&text(
        &format!("concurrency = 8\n{OVERHEADS}"),
        8,
    )));
    assert_eq!(with.requests.len(), 8);
    for (w, b) in with.requests.iter().zip(&bare.requests) {
        assert_eq!(w.arrived_ns, b.arrived_ns + 41_000_000);
        assert_eq!(
            w.first_token_ns.unwrap(),
            b.first_token_ns.unwrap() + 41_000_000 + 1_500_000
        );
        assert_eq!(w.done_ns, b.done_ns + 41_000_000 + 1_000_000 + 2_500_000);
    }
}

#[test]
fn fast_forward_and_step_by_step_agree_with_overheads() {
    let sc = scenario(
        &text(&format!("concurrency = 3\n{OVERHEADS}"), 40).replace("value = 5 }", "value = 200 }"),
    );
    let go = |stepping| {
        engine::run(
            &sc,
            &RunOptions {
                keep_requests: true,
                stepping,
                ..RunOptions::default()
            },
        )
        .unwrap()
    };
    let (ff, sbs) = (go(Stepping::FastForward), go(Stepping::StepByStep));
    assert_eq!(ff.requests, sbs.requests);
    assert!(ff.totals.decode_steps > 0);
}

/// The same under vLLM: a request's way to the engine and back shifts its times exactly, the
/// GPU's work is unchanged, and fast-forward equals step by step.
#[test]
fn vllm_sees_the_same_shift_and_fast_forward_agrees() {
    let vllm = |client: &str| {
        text(client, 12)
            .replace("disable_overlap_schedule = true\n", "kind = \"vllm\"\n")
            .replace("value = 5 }", "value = 40 }")
    };
    let bare = run(&scenario(&vllm("concurrency = 12\n")));
    let with_sc = scenario(&vllm(&format!("concurrency = 12\n{OVERHEADS}")));
    let with = run(&with_sc);
    assert_eq!(with.totals.decode_steps, bare.totals.decode_steps);
    for (w, b) in with.requests.iter().zip(&bare.requests) {
        assert_eq!(
            w.first_token_ns.unwrap(),
            b.first_token_ns.unwrap() + 42_500_000
        );
        assert_eq!(w.done_ns, b.done_ns + 41_000_000 + 1_000_000 + 40 * 500_000);
    }
    let go = |stepping| {
        let opts = RunOptions {
            keep_requests: true,
            stepping,
            ..RunOptions::default()
        };
        engine::run(&with_sc, &opts).unwrap().requests
    };
    assert_eq!(go(Stepping::FastForward), go(Stepping::StepByStep));
}

/// bench_serving's view of the hand case above: each inter-token gap is one decode step (11 ms
/// plus 1 ns per KV token attended: 101 … 104) plus the per-token streaming time.
#[test]
fn the_client_sees_each_decode_step_plus_the_streaming_time_between_tokens() {
    let sc = scenario(&text(&format!("concurrency = 1\n{OVERHEADS}"), 2));
    let r = servesim::compare::run_for_bench(&sc).unwrap();
    let (samples, _) = servesim::compare::simulated(&sc, &r);
    assert_eq!(samples.len(), 2);
    for s in &samples {
        let want: Vec<f64> = (101..=104)
            .map(|kv| (11_000_000.0 + f64::from(kv) + 500_000.0) / 1e9)
            .collect();
        assert_eq!(s.itls_s.len(), 4);
        for (got, want) in s.itls_s.iter().zip(&want) {
            assert!((got - want).abs() < 1e-12, "{:?} vs {want:?}", s.itls_s);
        }
        assert!((s.ttft_s - 0.0485).abs() < 1e-12, "{}", s.ttft_s);
        let e2e = 0.0485 + want.iter().sum::<f64>();
        assert!((s.e2e_s - e2e).abs() < 1e-12, "{} vs {e2e}", s.e2e_s);
    }
    // The report's ITL pools the same gaps: 8 of them, 11.5001015 … 11.5001045 ms, in both
    // engines' loops (the fast-forward records a run's later steps in groups).
    for stepping in [Stepping::StepByStep, Stepping::FastForward] {
        let opts = RunOptions {
            stepping,
            ..RunOptions::default()
        };
        let r = engine::run(&sc, &opts).unwrap();
        let itl = &r.latency.itl_ms;
        assert_eq!(itl.count(), 8, "{stepping:?}");
        let mean = (101..=104)
            .map(|kv| 11.5 + f64::from(kv) * 1e-6)
            .sum::<f64>()
            / 4.0;
        assert!(
            (itl.mean() - mean).abs() < 1e-9,
            "{stepping:?}: {}",
            itl.mean()
        );
    }
}
