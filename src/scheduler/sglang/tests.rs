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
            // The hand cases below follow the step-by-step loop; `overlapped` switches it on.
            disable_overlap_schedule: true,
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
    build(spec(kv, policy))
}

/// The overlapped loop (SGLang's default), with decode steps of 10 µs + 1 µs per request and
/// prefill batches of 10 µs + 1 ns per token.
fn overlapped(kv: u64) -> Sglang {
    build(overlapped_spec(kv))
}

/// [`overlapped`]'s engine, before it is built.
fn overlapped_spec(kv: u64) -> EngineSpec {
    let mut s = spec(kv, SchedulePolicy::Fcfs);
    if let PolicySpec::Sglang(p) = &mut s.policy {
        p.disable_overlap_schedule = false;
    }
    s.step_time = StepTimeSpec::Linear(LinearStepTime {
        decode_base_ns: 10_000,
        decode_per_seq_ns: 1_000,
        decode_per_kv_token_ps: 0,
        prefill_base_ns: 10_000,
        prefill_per_token_ps: 1_000,
    });
    s
}

fn build(s: EngineSpec) -> Sglang {
    build_sharing(s, false)
}

/// [`build`] for a workload that shares prompt prefixes or not: with `shares_prefixes` (and
/// the radix cache on, as in [`spec`]) the scheduler keeps a radix cache.
fn build_sharing(s: EngineSpec, shares_prefixes: bool) -> Sglang {
    let StepTimeSpec::Linear(l) = s.step_time.clone() else {
        unreachable!("the test spec is linear")
    };
    Sglang::new(
        &s,
        settings(&s),
        None,
        shares_prefixes,
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
        prefix: None,
        ready_at: SimTime::ZERO,
        sent_at: SimTime::ZERO,
        arrived_at: SimTime::ZERO,
        admitted_at: None,
        first_token_at: None,
        evicted_at: None,
        outside_token_at: None,
        out_tokens: 0,
        evictions: 0,
        cached_tokens: 0,
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
        Some(InFlight::Prefill { items, .. }) => (true, items.iter().map(|i| i.id).collect()),
        _ => (false, s.running.clone()),
    };
    *t += d;
    s.finish_current(*t, reqs, &mut out);
    for id in out.finished {
        reqs.remove(id);
    }
    Some(what)
}

/// What a launched batch is: the requests of a prefill, or the size of a decode batch.
#[derive(Debug, PartialEq, Eq)]
enum Launched {
    Prefill(Vec<ReqId>),
    Decode(u64),
}

/// Each launched batch with its start time (ns), and each finished request with its finish
/// time (ns).
type Timeline = (Vec<(u64, Launched)>, Vec<(ReqId, u64)>);

/// The overlapped loop from `t`: launch the next batch, end it, and repeat `n` times.
fn run_overlapped(s: &mut Sglang, reqs: &mut Requests, t: &mut SimTime, n: usize) -> Timeline {
    let (mut launched, mut finished) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let mut out = Outbox::default();
        let Some(d) = s.start_next(*t, reqs, &mut out) else {
            break;
        };
        let what = match &s.in_flight {
            Some(InFlight::Prefill { items, .. }) => {
                Launched::Prefill(items.iter().map(|i| i.id).collect())
            }
            Some(InFlight::Decode { batch }) => Launched::Decode(*batch),
            None => unreachable!("a batch was launched"),
        };
        launched.push((t.as_ns(), what));
        *t += d;
        s.finish_current(*t, reqs, &mut out);
        for id in out.finished {
            finished.push((id, t.as_ns()));
            reqs.remove(id);
        }
    }
    (launched, finished)
}

#[test]
fn admission_is_strict_head_of_line() {
    let (mut s, mut reqs) = (sched(300, SchedulePolicy::Fcfs), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 50, 100, 10);
    let b = add(&mut s, &mut reqs, 1, 200, 100, 2);
    let c = add(&mut s, &mut reqs, 2, 10, 100, 2);
    let mut t = SimTime::ZERO;
    // a reserves 50 + 1 + 100 = 151; b needs 200 + 100 + 1 = 301 ≥ 149 left: stop there,
    // although c (10 + 100 + 1) would fit.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a])));
    assert_eq!(s.waiting.iter().copied().collect::<Vec<_>>(), vec![b, c]);
    // The prefill batch became the running batch: the stop is forgotten and admission is tried
    // again — b still needs 301 ≥ 300 − 50 − 99 × 0.7 = 180.7, so this is a decode step, with
    // the latch closed.
    assert!(!s.batch_is_full);
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![a])));
    assert!(s.batch_is_full);
}

#[test]
fn the_first_prefill_into_an_empty_batch_forgets_the_stop_and_admits_again() {
    // The case study's shape (SGLang admits 26, then 8 more at once): the first pass reserves
    // each new request's full max_new_tokens; the second charges the running ones only
    // max_new × new_token_ratio.
    let (mut s, mut reqs) = (sched(1_100, SchedulePolicy::Fcfs), Requests::default());
    let ids: Vec<ReqId> = (0..6)
        .map(|i| add(&mut s, &mut reqs, i, 100, 200, 50))
        .collect();
    let mut t = SimTime::ZERO;
    // Each new request reserves 100 + 1 + 200 = 301: three fit (the fourth needs 301 ≥ 1100 −
    // 903 = 197).
    assert_eq!(
        step(&mut s, &mut reqs, &mut t),
        Some((true, ids[..3].to_vec()))
    );
    // The three running ones are now charged 199 × 0.7 each: 1100 − 300 − 417.9 = 382.1
    // remains, and the fourth (301) is admitted in a second prefill; the fifth (301 ≥ 81.1)
    // is not.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![ids[3]])));
    assert_eq!(
        step(&mut s, &mut reqs, &mut t),
        Some((false, ids[..4].to_vec()))
    );
    assert!(s.batch_is_full);
}

#[test]
fn a_completion_reopens_admission_at_the_next_pass() {
    let (mut s, mut reqs) = (sched(500, SchedulePolicy::Fcfs), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 50, 100, 3);
    let b = add(&mut s, &mut reqs, 1, 50, 100, 10);
    let c = add(&mut s, &mut reqs, 2, 200, 100, 2);
    let mut t = SimTime::ZERO;
    // a and b reserve 151 each; c needs 301 ≥ 198 left: NO_TOKEN. The batch becomes the
    // running batch (the stop is forgotten); the next pass charges a and b 99 × 0.7 each and
    // c still does not fit (301 ≥ 400 − 138.6): the latch closes and the batch decodes.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a, b])));
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![a, b])));
    assert!(s.batch_is_full);
    // Decode step 2 gives a its third token: it finishes, frees its KV, and the next pass
    // filters it out of the batch, which reopens admission at once.
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((false, vec![a, b])));
    assert!(reqs.get(a).is_none());
    assert!(!s.batch_is_full);
    // c fits: 500 − 52 free, minus b's 97 × 0.698 reservation, leaves about 380 > 301.
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
fn many_completions_in_one_step_leave_the_rest_of_the_batch_in_order() {
    // 100 requests decode together: 30 finish at one step (more than are looked up one by
    // one), 10 at another, 3 at a third; the batch keeps the others' order.
    let (mut s, mut reqs) = (sched(1_000_000, SchedulePolicy::Fcfs), Requests::default());
    let target = |i: u64| match i % 10 {
        0..=2 => 4,
        3 => 7,
        4 if i < 30 => 9,
        _ => 12,
    };
    let ids: Vec<ReqId> = (0..100)
        .map(|i| add(&mut s, &mut reqs, i, 10, 100, target(i)))
        .collect();
    let mut t = SimTime::ZERO;
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, ids.clone())));
    let mut seen = Vec::new();
    while let Some((prefill, batch)) = step(&mut s, &mut reqs, &mut t) {
        assert!(!prefill);
        let left: Vec<ReqId> = batch
            .iter()
            .copied()
            .filter(|&id| reqs.get(id).is_some())
            .collect();
        assert_eq!(s.running, left, "the batch after a step keeps its order");
        if left.len() < batch.len() {
            seen.push(batch.len() - left.len());
        }
    }
    assert_eq!(seen, vec![30, 10, 3, 57]);
    assert!(reqs.is_empty());
}

#[test]
fn a_steps_completions_are_released_in_the_order_the_requests_joined() {
    // Eight requests join in one prefill and finish at the same decode step: they leave, and
    // are answered, in the order they joined (their stays) — the completion wheel gives them
    // newest first.
    let (mut s, mut reqs) = (sched(1_000_000, SchedulePolicy::Fcfs), Requests::default());
    let ids: Vec<ReqId> = (0..8)
        .map(|i| add(&mut s, &mut reqs, i, 10, 100, 5))
        .collect();
    let mut t = SimTime::ZERO;
    let mut finished = Vec::new();
    while finished.is_empty() {
        let mut out = Outbox::default();
        let d = (s.start_next(t, &mut reqs, &mut out)).expect("they run until they finish");
        t += d;
        s.finish_current(t, &mut reqs, &mut out);
        finished = out.finished;
    }
    assert_eq!(finished, ids);
}

#[test]
fn page_buckets_track_which_requests_need_a_new_page() {
    let mut sp = spec(10_000, SchedulePolicy::Fcfs);
    if let PolicySpec::Sglang(g) = &mut sp.policy {
        g.page_size = 4;
    }
    let mut s = build(sp);
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

#[test]
fn overlapped_the_second_batch_is_decided_with_the_first_in_flight() {
    let (mut s, mut reqs) = (overlapped(10_000), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 100, 1000, 3);
    let b = add(&mut s, &mut reqs, 1, 100, 1000, 3);
    let mut t = SimTime::ZERO;
    let (launched, finished) = run_overlapped(&mut s, &mut reqs, &mut t, 10);
    // Prefill of 200 tokens: 10.2 µs. The decode batch after it was decided at t = 0 with the
    // prefill in flight, a and b already merged (their first tokens unknown): 12 µs each.
    // a and b reach 3 tokens after two decode steps; the third decode step was decided before
    // the second was processed, and — finishing by EOS, which the scheduler cannot foresee —
    // both still take a row in it.
    assert_eq!(
        launched,
        vec![
            (0, Launched::Prefill(vec![a, b])),
            (10_200, Launched::Decode(2)),
            (22_200, Launched::Decode(2)),
            (34_200, Launched::Decode(2)),
        ]
    );
    assert_eq!(finished, vec![(a, 34_200), (b, 34_200)]);
    assert_eq!(s.kv.used_tokens(), 0);
}

#[test]
fn overlapped_requests_finishing_by_length_are_set_aside_from_the_next_batch() {
    let (mut s, mut reqs) = (overlapped(10_000), Requests::default());
    // a stops at max_new_tokens = 3 (known in advance), b by EOS at 5.
    let a = add(&mut s, &mut reqs, 0, 100, 3, 3);
    let b = add(&mut s, &mut reqs, 1, 100, 1000, 5);
    let mut t = SimTime::ZERO;
    let (launched, finished) = run_overlapped(&mut s, &mut reqs, &mut t, 10);
    // The second decode step gives a its third token; the third, decided while the second is
    // in flight, leaves a out (11 µs). b's fifth token comes from the fourth decode step; the
    // fifth step was decided before that and still holds b.
    assert_eq!(
        launched,
        vec![
            (0, Launched::Prefill(vec![a, b])),
            (10_200, Launched::Decode(2)),
            (22_200, Launched::Decode(2)),
            (34_200, Launched::Decode(1)),
            (45_200, Launched::Decode(1)),
            (56_200, Launched::Decode(1)),
        ]
    );
    assert_eq!(finished, vec![(a, 34_200), (b, 56_200)]);
    assert_eq!(s.kv.used_tokens(), 0);
}

#[test]
fn overlapped_a_request_arriving_while_a_batch_runs_is_considered_one_batch_later() {
    let (mut s, mut reqs) = (overlapped(10_000), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 100, 1000, 50);
    let mut t = SimTime::ZERO;
    run_overlapped(&mut s, &mut reqs, &mut t, 3);
    // t = 32.1 µs: the third batch (a decode) just ended; the fourth was decided at 21.1 µs.
    assert_eq!(t.as_ns(), 10_100 + 2 * 11_000);
    // c arrives now: the fourth batch, launched now, was decided without it; the fifth is
    // decided now and admits it.
    let c = add(&mut s, &mut reqs, 1, 100, 1000, 50);
    let (launched, _) = run_overlapped(&mut s, &mut reqs, &mut t, 2);
    assert_eq!(
        launched,
        vec![
            (32_100, Launched::Decode(1)),
            (43_100, Launched::Prefill(vec![c]))
        ]
    );
    let _ = a;
}

/// Requests of one group admitted in the same prefill batch each compute the shared prefix
/// (nothing is cached when they are matched); publishing after the prefill keeps one copy; a
/// request admitted later finds it and extends only its own tokens.
#[test]
fn group_members_admitted_together_each_compute_the_prefix_and_later_ones_hit_it() {
    let mut sch = build_sharing(spec(100_000, SchedulePolicy::Fcfs), true);
    let mut reqs = Requests::default();
    let shared = Some(crate::request::SharedPrefix {
        group: 0,
        tokens: 300,
    });
    let grouped = |sch: &mut Sglang, reqs: &mut Requests, seq, prompt| {
        let id = add(sch, reqs, seq, prompt, 100, 50);
        reqs[id].prefix = shared;
        // `arrive` took the request's sequence before the prefix was set: take it again.
        sch.cache_arrive(id, reqs);
        id
    };
    let a = grouped(&mut sch, &mut reqs, 0, 500);
    let b = grouped(&mut sch, &mut reqs, 1, 400);
    let mut t = SimTime::ZERO;
    assert_eq!(step(&mut sch, &mut reqs, &mut t), Some((true, vec![a, b])));
    assert_eq!((reqs[a].cached_tokens, reqs[b].cached_tokens), (0, 0));
    // b's copy of the prefix is freed when it publishes: one copy is kept.
    assert_eq!(sch.kv.used_tokens(), 500 + 400 - 300);
    let c = grouped(&mut sch, &mut reqs, 2, 350);
    assert_eq!(step(&mut sch, &mut reqs, &mut t), Some((true, vec![c])));
    assert_eq!(reqs[c].cached_tokens, 300);
    assert_eq!(sch.kv.used_tokens(), 600 + 50);
}

#[test]
fn a_head_that_cannot_fit_is_refused_without_a_pass_as_the_pass_refuses_it() {
    // One request running (50 + 1 + its reservation), then a head of every prompt length from
    // one that fits to one that does not: the refusal without a pass holds only where the
    // exact admission pass stops at the head for lack of memory, nothing admitted — and holds
    // once the head is clearly too long.
    let mut refused_fast = 0;
    for prompt in (1..=290).step_by(3) {
        let (mut s, mut reqs) = (sched(300, SchedulePolicy::Fcfs), Requests::default());
        let a = add(&mut s, &mut reqs, 0, 50, 100, 10);
        let mut t = SimTime::ZERO;
        assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a])));
        step(&mut s, &mut reqs, &mut t);
        add(&mut s, &mut reqs, 1, prompt, 100, 2);
        let allocatable = s.p.max_running - s.running.len() as u64;
        let bounds = s
            .reservation_interval(&reqs)
            .expect("a ratio of 0.7 has bounds");
        let fast = s.head_surely_refused(&reqs, 0, allocatable, bounds);
        let exact = s.running_reservations(&reqs);
        let (pass, stop) = s.pass(&reqs, 0, allocatable, exact, Vec::new());
        let refused = pass.items.is_empty() && stop == Some(admission::AddResult::NoToken);
        assert!(
            !fast || refused,
            "prompt {prompt}: refused without a pass, admitted by it"
        );
        assert_eq!(
            fast, refused,
            "prompt {prompt}: far from the boundary the two agree"
        );
        refused_fast += u32::from(fast);
    }
    assert!(refused_fast > 10, "only {refused_fast} heads refused");
}

#[test]
fn retraction_takes_the_latest_of_equal_keys() {
    // b and c tie on generated tokens and prompt: SGLang's stable sort pops the later, c.
    let (mut s, mut reqs) = (sched(2_000, SchedulePolicy::Fcfs), Requests::default());
    s.p.clip = 10;
    let a = add(&mut s, &mut reqs, 0, 100, 2000, 1500);
    let b = add(&mut s, &mut reqs, 1, 200, 2000, 1500);
    let c = add(&mut s, &mut reqs, 2, 200, 2000, 1500);
    let mut t = SimTime::ZERO;
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a, b, c])));
    while s.counters.eviction_events == 0 {
        step(&mut s, &mut reqs, &mut t);
    }
    assert_eq!(reqs[c].phase, Phase::Waiting);
    assert_eq!(reqs[a].phase, Phase::Running);
    assert_eq!(reqs[b].phase, Phase::Running);
}

#[test]
fn the_victim_scan_from_the_batchs_end_finds_the_whole_scans_victim_under_many_retractions() {
    // `next_victim` stops once a request has waited more steps than the fewest tokens found
    // so far; in test builds every victim it finds is checked against the whole batch's scan
    // (`retraction_victim`). In the overlapped loop a request whose first token is still to
    // come has generated only the steps it waited, so it can tie in tokens with a later one
    // re-admitted with its earlier output: the earlier one, with the longer prompt, is then
    // the victim, and the scan must not stop at it. Forty requests at once on a small pool,
    // with admission reckoning each request's growth at 2 tokens (CLIP_MAX_NEW_TOKENS 2):
    // over a hundred retractions, and such ties among them.
    #[rustfmt::skip]
    const LENGTHS: [(u32, u32); 40] = [
        (255, 881), (145, 204), (213, 497), (133, 328), (156, 1148), (98, 1157), (148, 26),
        (104, 966), (8, 693), (64, 696), (212, 1085), (150, 1153), (229, 843), (28, 933),
        (27, 67), (273, 386), (210, 342), (235, 662), (53, 363), (251, 424), (56, 669),
        (203, 1033), (156, 184), (210, 1117), (132, 279), (175, 244), (192, 884), (194, 949),
        (40, 93), (198, 1126), (208, 1), (157, 586), (209, 1158), (147, 1130), (208, 1053),
        (217, 847), (126, 1096), (29, 594), (252, 402), (108, 1154),
    ];
    let (mut s, mut reqs) = (overlapped(3_912), Requests::default());
    s.p.clip = 2;
    for (seq, &(prompt, target)) in LENGTHS.iter().enumerate() {
        add(&mut s, &mut reqs, seq as u64, prompt, 4_096, target);
    }
    let mut t = SimTime::ZERO;
    while step(&mut s, &mut reqs, &mut t).is_some() {}
    assert!(reqs.is_empty(), "every request finishes");
    assert!(s.counters.evictions > 100, "{:?}", s.counters);
}

#[test]
fn with_the_radix_cache_a_steps_completions_are_released_in_batch_order() {
    // A mixed batch puts the request it prefills ahead of the running ones
    // (`managers/schedule_batch.py`: `ScheduleBatch.mix_with_running` merges the running
    // batch after the new one), so b, which joined after a, runs ahead of it. Both
    // finish at one decode step; with the radix cache they are released in batch order (b
    // first: `process_batch_result_decode` walks the batch), which sets the order of the
    // cache's access times.
    let mut e = spec(100_000, SchedulePolicy::Fcfs);
    if let PolicySpec::Sglang(p) = &mut e.policy {
        p.enable_mixed_chunk = true;
    }
    let mut s = build_sharing(e, true);
    assert!(s.cache.is_some());
    let mut reqs = Requests::default();
    let a = add(&mut s, &mut reqs, 0, 10, 100, 6);
    let mut t = SimTime::ZERO;
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![a])));
    // a has its first token; b's prefill is mixed with a's decode row, and b gets its first
    // token as a gets its second: 4 decode steps later both reach their targets.
    let b = add(&mut s, &mut reqs, 1, 10, 100, 5);
    assert_eq!(step(&mut s, &mut reqs, &mut t), Some((true, vec![b])));
    assert_eq!(s.running, vec![b, a]);
    let mut finished = Vec::new();
    while finished.is_empty() {
        let mut out = Outbox::default();
        t += s
            .start_next(t, &mut reqs, &mut out)
            .expect("they run until they finish");
        s.finish_current(t, &mut reqs, &mut out);
        finished = out.finished;
    }
    assert_eq!(finished, vec![b, a]);
}

/// Start the first batch at t = 0, which must be a prefill: its items.
fn first_prefill(s: &mut Sglang, reqs: &mut Requests) -> Vec<PrefillItem> {
    let mut out = Outbox::default();
    s.start_next(SimTime::ZERO, reqs, &mut out)
        .expect("a prefill");
    let Some(InFlight::Prefill { items, .. }) = &s.in_flight else {
        panic!("not a prefill")
    };
    items.clone()
}

/// SGLang with pages of `page` tokens, chunks of `chunk`, the radix cache off.
fn paged(kv: u64, page: u64, chunk: u32) -> Sglang {
    let mut e = spec(kv, SchedulePolicy::Fcfs);
    if let PolicySpec::Sglang(p) = &mut e.policy {
        p.page_size = page as u32;
        p.chunked_prefill_size = Some(chunk);
        p.disable_radix_cache = true;
    }
    build(e)
}

#[test]
fn a_pass_that_spends_the_budget_exactly_stops_for_memory_and_closes_the_latch() {
    // Pages of 4, a pool of 64: `max_new_tokens` 20 stays (below 64 − 8 − 4 − 1). a needs
    // 5 + 20 + 4 = 29 < 64 and reserves its paged input, a page and its 20 new tokens:
    // 8 + 4 + 20 = 32. b needs 29 < 32 and leaves exactly 0: `budget_state` answers NO_TOKEN
    // (only a positive remainder goes on), which closes the latch — although both were admitted.
    let (mut s, mut reqs) = (paged(64, 4, 8192), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 5, 20, 10);
    let b = add(&mut s, &mut reqs, 1, 5, 20, 10);
    let items = first_prefill(&mut s, &mut reqs);
    assert_eq!(items.iter().map(|i| i.id).collect::<Vec<_>>(), vec![a, b]);
    assert!(s.batch_is_full);
    assert_eq!(s.counters.memory_stops, 1);
}

#[test]
fn a_prompt_whose_pages_fill_the_chunk_exactly_is_prefilled_whole() {
    // Pages of 4 and chunks of 16: 13 prompt tokens take 16 paged, which is not more than the
    // chunk (`add_one_req` chunks only a paged input above `rem_chunk_tokens`): one prefill of
    // the 13 tokens, nothing left to chunk.
    let (mut s, mut reqs) = (paged(200, 4, 16), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 13, 20, 10);
    let items = first_prefill(&mut s, &mut reqs);
    assert_eq!(items, vec![PrefillItem { id: a, take: 13 }]);
    assert!(s.chunked.is_none());
}

#[test]
fn the_waiting_prefixes_refresh_touches_a_waiting_requests_output_too() {
    // Cache-agnostic policies touch the waiting requests' prefixes every
    // WAITING_PREFIX_REFRESH_INTERVAL passes over their prompt and output so far
    // (`mem_cache/common.py: touch_waiting_prefix` matches `origin_input_ids + output_ids`):
    // a retracted request's output still in the tree becomes as recent as its prompt.
    let mut s = build_sharing(spec(1_000, SchedulePolicy::Fcfs), true);
    let mut reqs = Requests::default();
    let a = add(&mut s, &mut reqs, 0, 10, 100, 50);
    reqs[a].out_tokens = 5;
    let seq_a = s.cache.as_ref().unwrap().hold(a).unwrap().seq;
    let other = radix::Seq::new(99, None);
    s.kv.alloc_pages(10 + 5 + 20);
    let tree = &mut s.cache.as_mut().unwrap().tree;
    // a's prompt, then its output below it (as published chunk by chunk), then another
    // sequence of 20 tokens, the newest leaf.
    tree.insert(&seq_a, 10);
    tree.insert(&seq_a, 15);
    tree.insert(&other, 20);
    // The first pass refreshes: a's whole path, its output's node included, is now newer
    // than the other leaf, which is the one evicted for 5 tokens.
    s.cache_priority(&reqs);
    let before = s.kv.available_tokens();
    let tree = &mut s.cache.as_mut().unwrap().tree;
    assert_eq!(tree.evict_until(&mut s.kv, before + 5), 20);
    assert_eq!(tree.match_prefix(&seq_a, 15).0, 15);
}

#[test]
fn intake_caps_max_new_tokens_at_the_empty_pools_pages() {
    // `init_req_max_new_tokens` (`managers/scheduler.py`) with pages of 16 and a pool of
    // 1,024 tokens: `max_new_tokens_for_memory` leaves the paged prompt (112 for 100), a page
    // and one token: 1,024 − 112 − 16 − 1 = 895, below `max_req_len − input − 1` = 1,023 − 100 − 1
    // = 922 (`max_req_len` = pool − 1 without a context).
    let (mut s, mut reqs) = (paged(1_024, 16, 8192), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 100, 4_096, 4_096);
    assert_eq!(reqs[a].max_new_tokens, 895);
    assert_eq!(reqs[a].target_output_tokens, 895);
    // A prompt that fills its pages exactly: 1,024 − 96 − 16 − 1 = 911.
    let b = add(&mut s, &mut reqs, 1, 96, 4_096, 50);
    assert_eq!(reqs[b].max_new_tokens, 911);
    assert_eq!(reqs[b].target_output_tokens, 50);
}

#[test]
fn a_context_shorter_than_the_pool_sets_the_request_length_limits() {
    // `max_req_len = min(context_len − 1, pool − 1)` (`managers/tp_worker.py`): with a context
    // of 1,024 tokens and a pool of 20,000, 1,023. A prompt of `max_req_len − 5` = 1,018 tokens
    // or more is refused (`validate_input_length`), and `max_new_tokens` is capped at
    // `max_req_len − input − 1`.
    let e = spec(20_000, SchedulePolicy::Fcfs);
    let StepTimeSpec::Linear(l) = e.step_time.clone() else {
        unreachable!("the test spec is linear")
    };
    let mut s = Sglang::new(
        &e,
        settings(&e),
        Some(1_024),
        false,
        Box::new(Linear::new(l)),
        Seeds::new(1).stream(StreamName::SchedulePolicy),
    );
    let mut reqs = Requests::default();
    let a = add(&mut s, &mut reqs, 0, 100, 4_096, 2_000);
    assert_eq!(reqs[a].max_new_tokens, 922);
    assert_eq!(reqs[a].target_output_tokens, 922);
    let b = add(&mut s, &mut reqs, 1, 1_017, 4_096, 10);
    assert_eq!(reqs[b].max_new_tokens, 5);
    let mut too_long = |seq: u64, prompt: u32| {
        let id = reqs.insert(Request {
            seq,
            prompt_tokens: prompt,
            ..reqs[a].clone()
        });
        s.arrive(SimTime::ZERO, id, &mut reqs).is_err()
    };
    assert!(too_long(2, 1_018));
    assert!(!too_long(3, 1_016));
}

#[test]
fn overlapped_the_ratio_is_not_reset_while_a_batch_is_in_flight() {
    // `event_loop_overlap` (`managers/scheduler.py`) calls `on_idle`, which resets
    // new_token_ratio, only when there is no batch to run and none in flight. a stops at
    // max_new_tokens = 3: the decision made while its last decode step runs sets it aside and
    // finds nothing to run, but that step is in flight, so the ratio keeps its two decays.
    let (mut s, mut reqs) = (overlapped(10_000), Requests::default());
    let a = add(&mut s, &mut reqs, 0, 100, 3, 3);
    let mut t = SimTime::ZERO;
    let (launched, finished) = run_overlapped(&mut s, &mut reqs, &mut t, 3);
    assert_eq!(launched.len(), 3);
    assert_eq!(finished, vec![(a, t.as_ns())]);
    assert!(s.planned.is_none());
    let decay = (0.7 - 0.098) / 600.0;
    assert!((s.new_token_ratio() - (0.7 - 2.0 * decay)).abs() < 1e-12);
    // A request arriving now is admitted under that ratio; once nothing runs or waits and
    // nothing is in flight, the ratio is reset.
    let c = add(&mut s, &mut reqs, 1, 100, 2, 2);
    let (launched, finished) = run_overlapped(&mut s, &mut reqs, &mut t, 10);
    assert_eq!(launched[0].1, Launched::Prefill(vec![c]));
    assert_eq!(finished.len(), 1);
    assert_eq!(s.new_token_ratio(), 0.7);
}

/// [`overlapped`] with `--enable-mixed-chunk`: a prefill batch carries the running requests'
/// decode rows.
fn overlapped_mixed(kv: u64) -> Sglang {
    let mut s = overlapped_spec(kv);
    if let PolicySpec::Sglang(p) = &mut s.policy {
        p.enable_mixed_chunk = true;
    }
    build(s)
}

#[test]
fn overlapped_a_mixed_batch_launched_beside_running_requests_reopens_admission() {
    // A pool of 810 tokens; every request has a 100-token prompt and max_new_tokens 200, and
    // a new one reserves 100 + 1 + 200 = 301.
    let (mut s, mut reqs) = (overlapped_mixed(810), Requests::default());
    add(&mut s, &mut reqs, 0, 100, 200, 50);
    let mut t = SimTime::ZERO;
    // a's prefill ends; the decode step decided with it in flight is next.
    run_overlapped(&mut s, &mut reqs, &mut t, 1);
    let b = add(&mut s, &mut reqs, 1, 100, 200, 50);
    let c = add(&mut s, &mut reqs, 2, 100, 200, 50);
    let (launched, _) = run_overlapped(&mut s, &mut reqs, &mut t, 3);
    // Deciding with a's decode step in flight: a holds about 101 tokens and reserves about
    // 199 × 0.7 ≈ 139; b (301) fits, c then does not (810 − 101 − 139 − 301 ≈ 269 < 301): a
    // mixed batch of b and a's row, the latch closed by the memory stop. Its launch hands the
    // running batch to the mixed batch, and what comes back is a new batch with the latch
    // open: the next decision tries c again, and b now reserves only 200 × 0.7 = 140 beside
    // its 100 prompt tokens: 810 − 102 − 100 − 138.6 − 140 ≈ 329 ≥ 301, so c is admitted.
    assert_eq!(launched[0].1, Launched::Decode(1));
    assert_eq!(launched[1].1, Launched::Prefill(vec![b]));
    assert_eq!(launched[2].1, Launched::Prefill(vec![c]));
}
