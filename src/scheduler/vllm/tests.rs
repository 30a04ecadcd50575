//! Hand-computed cases of vLLM's rules, each small enough to follow step by step.

use super::*;
use crate::cost::linear::{Linear, LinearStepTime};
use crate::cost::StepTimeSpec;
use crate::memory::{KvCacheDtype, KvSource};
use crate::request::{Phase, Request};
use crate::scheduler::PolicySpec;

/// 1 ms per step, plus 0.1 ms per decode, 10 ns per prompt token and 1 ns per KV token.
const PRICED: LinearStepTime = LinearStepTime {
    decode_base_ns: 1_000_000,
    decode_per_seq_ns: 100_000,
    decode_per_kv_token_ps: 1_000,
    prefill_base_ns: 0,
    prefill_per_token_ps: 10_000,
};

/// 1 ms per step, whatever it holds.
const FLAT: LinearStepTime = LinearStepTime {
    decode_base_ns: 1_000_000,
    decode_per_seq_ns: 0,
    decode_per_kv_token_ps: 0,
    prefill_base_ns: 0,
    prefill_per_token_ps: 0,
};

fn settings() -> VllmSettings {
    VllmSettings {
        max_num_seqs: 256,
        max_num_batched_tokens: 100,
        enable_chunked_prefill: true,
        long_prefill_token_threshold: 0,
        block_size: 16,
        num_gpu_blocks_override: None,
        async_scheduling: false,
        scheduler_reserve_full_isl: true,
        max_model_len: Some(4096),
        enable_prefix_caching: false,
    }
}

fn vllm(blocks: u64, cost: LinearStepTime, s: VllmSettings) -> Vllm {
    let engine = EngineSpec {
        kv_capacity_tokens: blocks * u64::from(s.block_size),
        kv_source: KvSource::Given,
        kv_cache_dtype: KvCacheDtype::Auto,
        step_time: StepTimeSpec::Linear(cost.clone()),
        policy: PolicySpec::Vllm(s.clone()),
    };
    Vllm::new(&engine, &s, false, Box::new(Linear::new(cost)))
}

/// What happened to one request: first token, finish (ns), preemptions.
type Outcome = (u64, u64, u32);

/// Drive the scheduler as the simulator does: requests `(arrival ns, prompt, output)` arrive
/// at their times; a batch ends before the arrivals of its instant; the scheduler starts the
/// next batch once every event of an instant is handled.
fn drive(s: &mut Vllm, arrivals: &[(u64, u32, u32)]) -> Vec<Outcome> {
    drive_with(s, arrivals, false).0
}

/// [`drive`], and with `fast` the fast-forward tried whenever no batch is on the GPU, as the
/// simulator tries it: a run stops before the next arrival, and one that finishes requests
/// answers them, then the next run is tried. Also returns how many batches `start_next`
/// started.
fn drive_with(s: &mut Vllm, arrivals: &[(u64, u32, u32)], fast: bool) -> (Vec<Outcome>, u64) {
    let mut reqs = Requests::default();
    let mut out = Outbox::default();
    let mut results = vec![(0, 0, 0); arrivals.len()];
    let (mut now, mut busy, mut next_arrival) = (SimTime::ZERO, None::<SimTime>, 0);
    let mut started = 0;
    let mut answer = |out: &Outbox, reqs: &mut Requests, now: SimTime| {
        for &id in &out.finished {
            let r = reqs.remove(id);
            results[r.seq as usize] = (r.first_token_at.unwrap().as_ns(), now.as_ns(), r.evictions);
        }
    };
    loop {
        while next_arrival < arrivals.len() && arrivals[next_arrival].0 == now.as_ns() {
            let (_, prompt, output) = arrivals[next_arrival];
            let id = reqs.insert(Request {
                seq: next_arrival as u64,
                prompt_tokens: prompt,
                max_new_tokens: output,
                target_output_tokens: output,
                ignore_eos: true,
                ready_at: now,
                sent_at: now,
                arrived_at: now,
                admitted_at: None,
                first_token_at: None,
                evicted_at: None,
                outside_token_at: None,
                out_tokens: 0,
                evictions: 0,
                phase: Phase::Waiting,
                prefix: None,
                cached_tokens: 0,
            });
            s.arrive(now, id, &mut reqs).unwrap();
            next_arrival += 1;
        }
        let arrival = arrivals.get(next_arrival).map(|a| SimTime::from_ns(a.0));
        while fast && busy.is_none() {
            out.clear();
            let limit = arrival.unwrap_or(SimTime::LIMIT);
            let Some(skip) = s.skip_decode(now, limit, u64::MAX, &mut reqs, &mut out) else {
                break;
            };
            now = skip.end;
            answer(&out, &mut reqs, now);
            if out.finished.is_empty() {
                break;
            }
        }
        if busy.is_none() {
            busy = s.start_next(now, &mut reqs, &mut out).map(|d| now + d);
            started += u64::from(busy.is_some());
        }
        now = match (busy, arrival) {
            (Some(b), Some(a)) => b.min(a),
            (Some(b), None) => b,
            (None, Some(a)) => a,
            (None, None) => break,
        };
        if busy == Some(now) {
            busy = None;
            out.clear();
            s.finish_current(now, &mut reqs, &mut out);
            answer(&out, &mut reqs, now);
        }
    }
    assert!(reqs.is_empty(), "every request finished");
    (results, started)
}

#[test]
fn the_fast_forward_takes_admissions_preemptions_and_completions_inside_its_runs() {
    // 12 usable blocks of 16 tokens for eight requests arriving at once and two later: the pool
    // fills, the tail of RUNNING is preempted again and again (with prefix caching, a victim
    // finds its own blocks still cached unless reused), and every completion frees blocks for
    // WAITING's head. Fast-forwarded, the same times, preemptions and counters as step by
    // step, nearly every step taken by the runs.
    let ms = 1_000_000;
    let mut arrivals: Vec<(u64, u32, u32)> = (0..8).map(|k| (0, 5 + 7 * k, 30 + 11 * k)).collect();
    arrivals.push((40 * ms + 300_000, 33, 17));
    arrivals.push((95 * ms, 1, 1));
    for (asynchronous, caching) in [(false, false), (true, false), (false, true), (true, true)] {
        let set = VllmSettings {
            async_scheduling: asynchronous,
            enable_prefix_caching: caching,
            ..settings()
        };
        let mut step = vllm(12, PRICED, set.clone());
        let mut fast = vllm(12, PRICED, set);
        let (want, batches) = drive_with(&mut step, &arrivals, false);
        let (got, started) = drive_with(&mut fast, &arrivals, true);
        let what = format!("async {asynchronous}, caching {caching}");
        assert_eq!(got, want, "{what}");
        let (c, f) = (step.counters(), fast.counters());
        assert!(c.evictions >= 10, "{what}: {c:?}");
        assert_eq!(
            SchedulerCounters {
                fast_forwarded_steps: 0,
                ..f
            },
            c,
            "{what}"
        );
        assert_eq!(f.fast_forwarded_steps + started, batches, "{what}");
        assert!(
            started * 10 < batches,
            "{what}: {started} of {batches} batches step by step"
        );
    }
}

#[test]
fn chunked_prefill_mixes_chunks_and_decodes_in_one_priced_step() {
    // Budget 100: A's 70 prompt tokens, then 30 of B's 50 (a partial chunk samples nothing).
    //   step 1: prefill 100 tokens, KV 70 + 30:        1 ms + 100 × 10 ns + 100 × 1 ns = 1,001,100
    //   step 2: A decodes (KV 71), B's last 20 (KV 50): 1 ms + 0.1 ms + 200 + 121      = 1,100,321
    //   step 3: both decode (KV 72 + 51):               1 ms + 0.2 ms + 123            = 1,200,123
    //   step 4: B decodes (KV 52):                      1 ms + 0.1 ms + 52             = 1,100,052
    let mut s = vllm(100, PRICED, settings());
    let got = drive(&mut s, &[(0, 70, 3), (0, 50, 3)]);
    let t1 = 1_001_100;
    let t2 = t1 + 1_100_321;
    let t3 = t2 + 1_200_123;
    let t4 = t3 + 1_100_052;
    assert_eq!(got, vec![(t1, t3, 0), (t2, t4, 0)]);
    assert_eq!(s.counters().prefill_batches, 1);
    assert_eq!(s.counters().decode_steps, 3);
}

#[test]
fn the_tail_of_running_is_preempted_and_recomputes_prompt_and_outputs() {
    // 4 usable blocks of 16 tokens; two 16-token prompts, 40 outputs each, 1 ms a step.
    // Step 1 prefills both (1 block each); step 2 gives each its second block. In step 18 A
    // (computed 32) needs a third block and none is free: B, the tail of RUNNING, is preempted
    // (17 outputs so far) and A takes one of its blocks. B's 33 known tokens need 3 blocks, and
    // only 1 is free until A finishes at step 40 (A's fourth block comes at step 34). Step 41
    // recomputes B's prompt and outputs in one chunk and samples its 18th token; its 40th comes
    // at step 63.
    let mut s = vllm(4, FLAT, settings());
    let got = drive(&mut s, &[(0, 16, 40), (0, 16, 40)]);
    let ms = 1_000_000;
    assert_eq!(got, vec![(ms, 40 * ms, 0), (ms, 63 * ms, 1)]);
    let c = s.counters();
    assert_eq!((c.evictions, c.eviction_events), (1, 1));
    // Steps 19–40 each stop admission at B: its whole sequence does not fit.
    assert_eq!(c.memory_stops, 22);
}

#[test]
fn async_scheduling_sees_an_arrival_one_step_later() {
    // A arrives at 0, B at 0.5 ms; 1 ms a step. Without async scheduling B is prefilled in the
    // step from 1 ms and answered at 2 ms. With it, batch 2 (A's decode) was scheduled at 0,
    // before batch 1's output, so B first runs in batch 3, from 2 ms: answered at 3 ms. A's
    // three tokens end at 1, 2 and 3 ms either way.
    let ms = 1_000_000;
    let arrivals = [(0, 10, 3), (ms / 2, 10, 1)];
    let mut sync = vllm(100, FLAT, settings());
    assert_eq!(
        drive(&mut sync, &arrivals),
        vec![(ms, 3 * ms, 0), (2 * ms, 2 * ms, 0)]
    );
    let mut asynchronous = vllm(
        100,
        FLAT,
        VllmSettings {
            async_scheduling: true,
            ..settings()
        },
    );
    assert_eq!(
        drive(&mut asynchronous, &arrivals),
        vec![(ms, 3 * ms, 0), (3 * ms, 3 * ms, 0)]
    );
}

#[test]
fn the_long_prefill_threshold_applies_only_with_company() {
    // Threshold 30: alone, a 100-token prompt takes the whole step (first token at 1 ms); with
    // a second one, each request's chunk is capped at 30 tokens a step (60 of the budget of
    // 100): chunks of 30, 30, 30 and 10, both prompts done in step 4.
    let ms = 1_000_000;
    let s = VllmSettings {
        long_prefill_token_threshold: 30,
        ..settings()
    };
    let mut alone = vllm(100, FLAT, s.clone());
    assert_eq!(drive(&mut alone, &[(0, 100, 1)]), vec![(ms, ms, 0)]);
    let mut two = vllm(100, FLAT, s);
    assert_eq!(
        drive(&mut two, &[(0, 100, 1), (0, 100, 1)]),
        vec![(4 * ms, 4 * ms, 0), (4 * ms, 4 * ms, 0)]
    );
}

#[test]
fn without_chunking_the_head_of_waiting_blocks_a_later_request_that_would_fit() {
    // Budget 100, no chunking: A (60) is admitted; B (60) does not fit the 40 left and stops
    // admission, so C (10) waits although it would fit. Step 2: A decodes, B is prefilled (60
    // tokens) and C (10) fits the 39 left. A finishes at 2 ms, B and C at 2 ms too.
    let ms = 1_000_000;
    let mut s = vllm(
        100,
        FLAT,
        VllmSettings {
            enable_chunked_prefill: false,
            ..settings()
        },
    );
    let got = drive(&mut s, &[(0, 60, 2), (0, 60, 1), (0, 10, 1)]);
    assert_eq!(
        got,
        vec![(ms, 2 * ms, 0), (2 * ms, 2 * ms, 0), (2 * ms, 2 * ms, 0)]
    );
}

#[test]
fn max_num_seqs_caps_running() {
    // One slot: B waits for A's three steps and stops admission at the cap in each.
    let ms = 1_000_000;
    let mut s = vllm(
        100,
        FLAT,
        VllmSettings {
            max_num_seqs: 1,
            ..settings()
        },
    );
    let got = drive(&mut s, &[(0, 10, 3), (0, 10, 1)]);
    assert_eq!(got, vec![(ms, 3 * ms, 0), (4 * ms, 4 * ms, 0)]);
    assert_eq!(s.counters().slot_stops, 3);
}

#[test]
fn a_prompt_of_max_model_len_is_refused_and_max_tokens_is_capped() {
    let mut s = vllm(1000, FLAT, settings());
    let mut reqs = Requests::default();
    let mut add = |prompt: u32| {
        reqs.insert(Request {
            seq: 0,
            prompt_tokens: prompt,
            max_new_tokens: u32::MAX,
            target_output_tokens: 5000,
            ignore_eos: false,
            ready_at: SimTime::ZERO,
            sent_at: SimTime::ZERO,
            arrived_at: SimTime::ZERO,
            admitted_at: None,
            first_token_at: None,
            evicted_at: None,
            outside_token_at: None,
            out_tokens: 0,
            evictions: 0,
            phase: Phase::Waiting,
            prefix: None,
            cached_tokens: 0,
        })
    };
    let (long, short) = (add(4096), add(96));
    let e = s.arrive(SimTime::ZERO, long, &mut reqs).unwrap_err();
    assert!(
        e.message
            .contains("plus the number of requested output tokens"),
        "{e:?}"
    );
    s.arrive(SimTime::ZERO, short, &mut reqs).unwrap();
    assert_eq!(
        (reqs[short].max_new_tokens, reqs[short].target_output_tokens),
        (4000, 4000)
    );
}
