//! Hand-computed cases of SGLang's rules.

use super::*;
use crate::cost::linear::Linear;
use crate::memory::{KvCacheDtype, KvSource};
use crate::rng::{Seeds, StreamName};
use crate::scenario::{LinearStepTime, PolicySpec, StepTimeSpec};
use crate::scheduler::Scheduler;
use settings::NewTokenRatioSpec;

fn spec(kv: u64, policy: SchedulePolicy) -> EngineSpec {
    EngineSpec {
        kv_capacity_tokens: kv,
        kv_source: KvSource::Given,
        kv_cache_dtype: KvCacheDtype::Auto,
        step_time: StepTimeSpec::Linear(LinearStepTime {
            decode_base_ns: 1_000,
            decode_per_seq_ns: 0,
            decode_per_kv_token_ps: 0,
            prefill_base_ns: 1_000,
            prefill_per_token_ps: 0,
        }),
        policy: PolicySpec::Sglang(SglangSettings {
            page_size: 1,
            max_running_requests: 4096,
            chunked_prefill_size: Some(8192),
            max_prefill_tokens: 16384,
            schedule_policy: policy,
            decode_log_interval: 40,
            new_token_ratio: NewTokenRatioSpec {
                init: 0.7,
                min_factor: 0.14,
                decay_steps: 600,
                clip_max_new_tokens: 4096,
            },
            cuda_graph_max_bs: 256,
            disable_radix_cache: false,
            disable_overlap_schedule: false,
            enable_mixed_chunk: false,
            schedule_conservativeness: 1.0,
        }),
    }
}

fn settings(e: &EngineSpec) -> &SglangSettings {
    match &e.policy {
        PolicySpec::Sglang(s) => s,
        PolicySpec::Vllm(_) => unreachable!("the test spec is SGLang's"),
    }
}

fn sched(kv: u64, policy: SchedulePolicy) -> Sglang {
    let s = spec(kv, policy);
    let StepTimeSpec::Linear(l) = s.step_time.clone() else {
        unreachable!("the test spec is linear")
    };
    Sglang::new(
        &s,
        settings(&s),
        None,
        Box::new(Linear::new(l)),
        Seeds::new(1).stream(StreamName::SchedulePolicy),
    )
}

fn add(
    s: &mut Sglang,
    reqs: &mut Requests,
    seq: u64,
    prompt: u32,
    max_new: u32,
    target: u32,
) -> ReqId {
    let id = reqs.insert(Request {
        seq,
        prompt_tokens: prompt,
        max_new_tokens: max_new,
        target_output_tokens: target,
        ignore_eos: false,
        ready_at: SimTime::ZERO,
        sent_at: SimTime::ZERO,
        admitted_at: None,
        first_token_at: None,
        last_token_at: None,
        out_tokens: 0,
        evictions: 0,
        phase: Phase::Waiting,
    });
    s.arrive(SimTime::ZERO, id, reqs).unwrap();
    id
}

/// Run one iteration to its end; returns whether it was a prefill and the requests in it.
fn step(s: &mut Sglang, reqs: &mut Requests, t: &mut SimTime) -> Option<(bool, Vec<ReqId>)> {
    let mut out = Outbox::default();
    let d = s.start_next(*t, reqs, &mut out)?;
    let what = match &s.in_flight {
        Some(InFlight::Prefill(items)) => (true, items.iter().map(|i| i.id).collect()),
        _ => (false, s.running.clone()),
    };
    *t += d;
    s.finish_current(*t, reqs, &mut out);
    for id in out.finished {
        reqs.remove(id);
    }
    Some(what)
}

#[test]
fn admission_is_strict_head_of_line() {
    let (mut s, mut reqs) = (sched(300, SchedulePolicy::Fcfs), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 50, 100, 2);
    let b = add(&mut s, &mut reqs, 1, 200, 100, 2);
    let c = add(&mut s, &mut reqs, 2, 10, 100, 2);
    let mut t = SimTime::ZERO;
    // a reserves 50 + 1 + 100 = 151; b needs 200 + 100 + 1 = 301 ≥ 149 left: stop there,
    // although c (10 + 100 + 1) would fit.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a])));
    assert!(s.batch_is_full);
    assert_eq!(s.waiting.iter().copied().collect::<Vec<_>>(), vec![b, c]);
}

#[test]
fn a_completion_unlocks_admission_one_decode_step_later() {
    let (mut s, mut reqs) = (sched(500, SchedulePolicy::Fcfs), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 50, 100, 3);
    let b = add(&mut s, &mut reqs, 1, 50, 100, 10);
    let c = add(&mut s, &mut reqs, 2, 200, 100, 2);
    let mut t = SimTime::ZERO;
    // a and b reserve 151 each; c needs 301 ≥ 198 left: NO_TOKEN, the latch is set.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a, b])));
    assert!(s.batch_is_full);
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![a, b])));
    // Decode step 2 gives a its third token: it finishes and frees its KV.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![a, b])));
    assert!(reqs.get(a).is_none());
    // The latch still holds: this iteration is a decode step (which filters the batch).
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![b])));
    // Now c fits: 500 − 53 free, minus b's 96 × 0.697 reservation, leaves about 380 > 301.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![c])));
}

#[test]
fn the_ratio_decays_linearly_to_its_floor_and_resets_when_idle() {
    let (mut s, mut reqs) = (sched(100_000, SchedulePolicy::Fcfs), Requests::default());
    add(&mut s, &mut reqs, 0, 10, 1000, 700);
    let mut t = SimTime::ZERO;
    step(&mut s, &mut reqs, &mut t); // prefill
    for _ in 0..300 {
        step(&mut s, &mut reqs, &mut t);
    }
    let decay = (0.7 - 0.098) / 600.0;
    assert!((s.new_token_ratio() - (0.7 - 300.0 * decay)).abs() < 1e-9);
    for _ in 0..399 {
        step(&mut s, &mut reqs, &mut t);
    }
    assert!((s.new_token_ratio() - 0.098).abs() < 1e-12);
    assert!(reqs.is_empty());
    assert_eq!(step(&mut s, &mut reqs, &mut t), None);
    assert_eq!(s.new_token_ratio(), 0.7);
}

#[test]
fn lof_admits_the_longest_max_new_tokens_first() {
    let (mut s, mut reqs) = (sched(100_000, SchedulePolicy::Lof), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 10, 10, 2);
    let b = add(&mut s, &mut reqs, 1, 10, 300, 2);
    let c = add(&mut s, &mut reqs, 2, 10, 200, 2);
    let d = add(&mut s, &mut reqs, 3, 10, 300, 2);
    let mut t = SimTime::ZERO;
    // Stable: b before d (equal max_new), then c, then a.
    assert_eq!(
        step(&mut s, &mut reqs, &mut t),
        Some((true, vec![b, d, c, a]))
    );
}

#[test]
fn retraction_takes_fewest_generated_then_longest_prompt() {
    let (mut s, mut reqs) = (sched(2_000, SchedulePolicy::Fcfs), Requests::default());
    s.p.clip = 10; // small reservations so that all three are admitted at once
    let a = add(&mut s, &mut reqs, 0, 100, 2000, 1500);
    let b = add(&mut s, &mut reqs, 1, 300, 2000, 1500);
    let c = add(&mut s, &mut reqs, 2, 200, 2000, 1500);
    let mut t = SimTime::ZERO;
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a, b, c])));
    // All have equal generated counts; the pool fills after (2000 − 600) / 3 steps. The first
    // victim is the longest prompt, b.
    while s.counters.eviction_events == 0 {
        step(&mut s, &mut reqs, &mut t);
    }
    assert_eq!(reqs[b].phase, Phase::Waiting);
    assert_eq!(reqs[b].evictions, 1);
    assert_eq!(reqs[a].phase, Phase::Running);
    assert_eq!(reqs[c].phase, Phase::Running);
}

#[test]
fn page_buckets_track_which_requests_need_a_new_page() {
    let mut sp = spec(10_000, SchedulePolicy::Fcfs);
    if let PolicySpec::Sglang(g) = &mut sp.policy {
        g.page_size = 4;
    }
    let StepTimeSpec::Linear(l) = sp.step_time.clone() else {
        unreachable!("the test spec is linear")
    };
    let mut s = Sglang::new(
        &sp,
        settings(&sp),
        None,
        Box::new(Linear::new(l)),
        Seeds::new(1).stream(StreamName::SchedulePolicy),
    );
    let mut reqs = Requests::default();
    for (i, p) in [5u32, 6, 7, 8, 9].iter().enumerate() {
        add(&mut s, &mut reqs, i as u64, *p, 50, 20 + i as u32);
    }
    let mut t = SimTime::ZERO;
    // debug_check (run after every call in debug builds) recomputes the pages by brute force.
    while step(&mut s, &mut reqs, &mut t).is_some() {}
    assert!(reqs.is_empty());
    assert_eq!(s.kv.used_tokens(), 0);
}
