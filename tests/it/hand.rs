//! Tiny scenarios whose every time is computed by hand in the comments.

use servesim::scheduler::LogRecord;

use crate::{run, scenario};

/// Step costs used below: decode 10 ms + 1 ms per request (+ `kv_ns` per KV token);
/// prefill 5 ms + 10 µs per token. SGLang's step-by-step loop (`--disable-overlap-schedule`),
/// whose decisions follow each result; the overlapped loop has its own cases.
fn base(kv_tokens: u64, extra: &str, kv_ns: f64) -> String {
    format!(
        r#"
name = "hand"
[engine]
kv_capacity_tokens = {kv_tokens}
disable_overlap_schedule = true
{extra}
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 1.0
decode_per_kv_token_ns = {kv_ns}
prefill_base_ms = 5.0
prefill_per_token_us = 10.0
"#
    )
}

#[test]
fn one_request_has_exact_ttft_tpot_and_e2e() {
    let text = base(10_000, "", 1.0)
        + r#"
[workload]
requests = 1
prompt_tokens = { dist = "constant", value = 100 }
output_tokens = { dist = "constant", value = 5 }
[client]
concurrency = 1
"#;
    let r = run(&scenario(&text));
    let req = &r.requests[0];
    // Prefill of 100 tokens: 5 ms + 100 × 10 µs = 6 ms, and it yields the first token.
    assert_eq!(req.first_token_ns, Some(6_000_000));
    // Four decode steps of one request attending 101, 102, 103, 104 KV tokens at 1 ns each:
    // 4 × 11 ms + 410 ns.
    assert_eq!(req.done_ns, 6_000_000 + 44_000_000 + 410);
    assert_eq!(req.output_tokens, 5);
    let tpot = r.latency.tpot_ms.stats().mean;
    assert!((tpot - (44.000410 / 4.0)).abs() < 1e-9, "tpot {tpot}");
    assert_eq!(r.totals.decode_steps, 4);
    assert_eq!(r.totals.generated_tokens, 5);
}

#[test]
fn the_overlapped_loop_answers_at_the_same_times_with_one_more_decode_step() {
    // SGLang's default loop decides each decode step before the previous one is processed: the
    // request above still gets its tokens at the same times, but the step after its fifth
    // token was decided before that token ended it (EOS cannot be foreseen) and runs for
    // nothing.
    let text = base(10_000, "", 1.0).replace("disable_overlap_schedule = true\n", "")
        + r#"
[workload]
requests = 1
prompt_tokens = { dist = "constant", value = 100 }
output_tokens = { dist = "constant", value = 5 }
[client]
concurrency = 1
"#;
    let r = run(&scenario(&text));
    let req = &r.requests[0];
    assert_eq!(req.first_token_ns, Some(6_000_000));
    assert_eq!(req.done_ns, 6_000_000 + 44_000_000 + 410);
    assert_eq!(r.totals.decode_steps, 5);
    assert_eq!(r.totals.generated_tokens, 5);
    // The run ends when the wasted step does: a fifth decode step attending 105 KV tokens.
    assert_eq!(
        (r.totals.sim_duration_s * 1e9).round() as u64,
        6_000_000 + 55_000_000 + 515
    );
}

#[test]
fn two_requests_and_a_small_pool_retract_in_the_documented_order() {
    // Pool of 100 tokens; both prompts are 10 tokens, both responses 60 tokens, max_new 100
    // (capped by SGLang to 88, see below).
    // clip_max_new_tokens = 20 makes each new request reserve 10 + 1 (page) + 20 = 31 tokens,
    // so both are admitted at t = 0 in one prefill batch of 20 tokens (5.2 ms).
    let text = base(100, "clip_max_new_tokens = 20", 0.0)
        + r#"
[workload]
requests = 2
prompt_tokens = { dist = "constant", value = 10 }
output_tokens = { dist = "constant", value = 60 }
max_new_tokens = 100
[client]
concurrency = 2
"#;
    let r = run(&scenario(&text));
    let by_seq = |s: u64| r.requests.iter().find(|q| q.seq == s).unwrap().clone();
    let (a, b) = (by_seq(0), by_seq(1));
    assert_eq!(a.first_token_ns, Some(5_200_000));
    assert_eq!(b.first_token_ns, Some(5_200_000));
    // 40 decode steps of 2 requests (12 ms each) fill the pool: 2 × (10 + 41 − 1) = 100.
    // Step 41 needs 2 slots: retract. Equal generated counts and prompts, so the later one in
    // batch order (B) goes. A continues alone: steps 41..59 at 11 ms.
    // A: 5.2 + 480 + 19 × 11 = 694.2 ms.
    assert_eq!(a.done_ns, 694_200_000);
    assert_eq!(a.retractions, 0);
    // B waits (its 51-token re-prefill + 20 + 1 does not fit beside A), then is re-prefilled
    // when A leaves: 5 ms + 51 × 10 µs = 5.51 ms, then 18 decode steps of 11 ms.
    assert_eq!(b.done_ns, 694_200_000 + 5_510_000 + 18 * 11_000_000);
    assert_eq!(b.retractions, 1);
    assert_eq!((a.output_tokens, b.output_tokens), (60, 60));
    assert_eq!(r.totals.retractions, 1);
    assert_eq!(r.totals.generated_tokens, 120);
    // The retraction re-estimates the ratio over the request that stays:
    // (41 generated + 20) / (max_new + 1), where SGLang has capped max_new at
    // max_req_len − input − 1 = (100 − 1) − 10 − 1 = 88.
    let retract = r
        .log
        .iter()
        .find_map(|l| match l {
            LogRecord::Evict(e) => Some((e.at, e.requests, e.ratio_after)),
            _ => None,
        })
        .expect("one retraction");
    assert_eq!(retract.0.as_ns(), 485_200_000);
    assert_eq!(retract.1, 1);
    assert!((retract.2 - 61.0 / 89.0).abs() < 1e-12);
}

#[test]
fn a_long_prompt_is_chunked_and_its_chunks_run_back_to_back() {
    let text = base(100_000, "chunked_prefill_size = 8192", 0.0)
        + r#"
[workload]
requests = 1
prompt_tokens = { dist = "constant", value = 20000 }
output_tokens = { dist = "constant", value = 2 }
[client]
concurrency = 1
"#;
    let r = run(&scenario(&text));
    // Chunks of 8192, 8192 and 3616 tokens: (5 + 81.92) + (5 + 81.92) + (5 + 36.16) = 215 ms;
    // the last chunk yields the first token; then one decode step of 11 ms.
    let q = &r.requests[0];
    assert_eq!(r.totals.prefill_batches, 3);
    assert_eq!(q.first_token_ns, Some(215_000_000));
    assert_eq!(q.done_ns, 226_000_000);
    let prefill_tokens: Vec<u64> = r
        .log
        .iter()
        .filter_map(|l| match l {
            LogRecord::Batch(s) => Some(s.new_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(prefill_tokens, vec![8192, 8192, 3616]);
}

#[test]
fn a_prompt_too_long_for_the_pool_is_refused_and_counted() {
    // max_req_len = pool − 1 = 999; prompts of 999 − 5 = 994 tokens or more are refused, like
    // SGLang refuses them; shorter ones are served. (A scenario whose every prompt would be
    // refused is refused before running: see the corpus.)
    let text = base(1000, "", 0.0)
        + r#"
[workload]
requests = 200
prompt_tokens = { dist = "uniform", min = 980, max = 1010 }
output_tokens = { dist = "constant", value = 2 }
[client]
concurrency = 1
"#;
    let r = run(&scenario(&text));
    let refused: Vec<_> = r.requests.iter().filter(|q| !q.completed).collect();
    assert!(!refused.is_empty());
    assert!(refused
        .iter()
        .all(|q| q.prompt_tokens >= 994 && q.admitted_ns.is_none()));
    assert!(r
        .requests
        .iter()
        .filter(|q| q.completed)
        .all(|q| q.prompt_tokens < 994));
    assert_eq!(r.totals.requests_rejected, refused.len() as u64);
    assert_eq!(
        r.totals.requests_completed + r.totals.requests_rejected,
        200
    );
}

#[test]
fn decode_log_lines_come_every_interval_with_the_windowed_throughput() {
    let text = base(10_000, "decode_log_interval = 2", 0.0)
        + r#"
[workload]
requests = 1
prompt_tokens = { dist = "constant", value = 100 }
output_tokens = { dist = "constant", value = 6 }
[client]
concurrency = 1
"#;
    let r = run(&scenario(&text));
    let lines: Vec<(u64, f64)> = r
        .log
        .iter()
        .filter_map(|l| match l {
            LogRecord::Stats(s) => Some((s.at.as_ns(), s.gen_tok_per_s)),
            _ => None,
        })
        .collect();
    // Prefill 6 ms, then decode steps of 11 ms: lines after steps 2 and 4 (28 ms and 50 ms).
    // The first window runs from t = 0 and includes the prefill: 2 tokens / 28 ms.
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].0, 28_000_000);
    assert!((lines[0].1 - 2.0 / 0.028).abs() < 1e-9);
    assert_eq!(lines[1].0, 50_000_000);
    assert!((lines[1].1 - 2.0 / 0.022).abs() < 1e-9);
}

#[test]
fn inter_token_gaps_are_every_gap_between_a_requests_tokens() {
    // The retraction case above, gap by gap. A: its first token at 5.2 ms (prefill), then 40
    // decode steps of 12 ms and 19 of 11 ms: 59 gaps. B: 40 gaps of 12 ms up to its retraction
    // after step 40 (its last token at 485.2 ms); its re-prefill yields its 42nd token at
    // 694.2 + 5.51 = 699.71 ms, one gap of 214.51 ms from its retraction; then 18 steps of
    // 11 ms (timed from the previous decode step, A's last, not from the prefill between).
    let text = base(100, "clip_max_new_tokens = 20", 0.0)
        + r#"
[workload]
requests = 2
prompt_tokens = { dist = "constant", value = 10 }
output_tokens = { dist = "constant", value = 60 }
max_new_tokens = 100
[client]
concurrency = 2
"#;
    let r = run(&scenario(&text));
    let itl = &r.latency.itl_ms;
    assert_eq!(itl.count(), 118);
    let mean = (80.0 * 12.0 + 37.0 * 11.0 + 214.51) / 118.0;
    assert!((itl.mean() - mean).abs() < 1e-9, "{}", itl.mean());
    let within = |got: f64, want: f64| (got / want - 1.0).abs() <= 1e-3;
    assert!(within(itl.quantile(0.30), 11.0), "{}", itl.quantile(0.30));
    assert!(within(itl.quantile(0.50), 12.0));
    assert!(
        within(itl.quantile(0.99), 12.0),
        "the long gap is the last 1 %"
    );
    assert!(within(itl.quantile(1.0), 214.51), "{}", itl.quantile(1.0));
    // TPOT averages each request's gaps: A (40·12 + 19·11)/59, B (40·12 + 214.51 + 18·11)/59.
    let tpot = r.latency.tpot_ms.mean();
    let want =
        ((40.0 * 12.0 + 19.0 * 11.0) / 59.0 + (40.0 * 12.0 + 214.51 + 18.0 * 11.0) / 59.0) / 2.0;
    assert!((tpot - want).abs() < 1e-9, "{tpot} vs {want}");
}

/// vLLM's batch queue (`v1/engine/core.py: step_with_batch_queue`) schedules once more after a
/// request finishes, while `has_finished_requests()` holds, to hand the finished ids on. Async
/// scheduling, decode steps of 90 ms: request 0 finishes at about 9.0 s while the next batch,
/// still holding its item, runs; request 1 (a 1,000-token prompt, a 5 s prefill) arrives at
/// 9.10 s, during that batch. The empty step queued for the finished ids is taken from the
/// queue only after request 1 is scheduled, so the stats line at 10 s sees it running, with
/// its blocks (1,008 of 3,184 tokens): not waiting, with none.
#[test]
fn vllm_schedules_once_more_for_finished_requests_before_its_stats_snapshot() {
    let toml = "name = \"finished ids\"\n[engine]\nkind = \"vllm\"\nnum_gpu_blocks_override = 200\nblock_size = 16\nmax_num_seqs = 8\nmax_num_batched_tokens = 2048\nmax_model_len = 2048\nasync_scheduling = true\n[engine.step_time]\ndecode_base_ms = 90.0\nprefill_per_token_us = 5000.0\n[workload]\ntrace = \"trace.csv\"\n[client]\nmode = \"trace\"\n";
    let r = crate::run_with_trace(
        toml,
        "prompt_tokens,output_tokens,arrival_s,max_new_tokens,ignore_eos\n10,100,0.0,1000,false\n1000,5,9.10,1000,false\n",
    );
    let at_10 = r
        .log
        .iter()
        .find_map(|l| match l {
            LogRecord::Interval(i) if i.sample.at.as_secs_f64() == 10.0 => Some(i.sample.clone()),
            _ => None,
        })
        .expect("a stats line at 10 s");
    assert_eq!((at_10.running, at_10.queued), (1, 0));
    assert_eq!(at_10.kv_used_tokens, 1_008);
}
