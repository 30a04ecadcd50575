//! The recorder's shortcuts against its step-by-step reference: a fast-forward's run of decode
//! steps ([`Recorder::on_decode_steps`]) records the same inter-token latencies as its steps
//! handed to [`Recorder::on_tokens`] one by one, whether the run is a line of floors, listed
//! ends, or the model asked each time.

use super::*;
use crate::cost::linear::{Linear, LinearStepTime};
use crate::cost::tests::Unlined;
use crate::cost::{DecodeSteps, MixedStep, StepTimeModel};
use crate::metrics::latency::Stats;
use proptest::prelude::*;

/// Steps that rise and fall with the KV (listed ends only).
struct Uneven;

impl StepTimeModel for Uneven {
    fn decode(&self, batch: u64, kv_tokens: u64) -> SimDuration {
        SimDuration::from_ns(1_000_000 + batch * 1_000 + (kv_tokens * 7_919 % 1_013) * 3_001)
    }
    fn prefill(&self, _seqs: u64, extend_tokens: u64) -> SimDuration {
        SimDuration::from_ns(1 + extend_tokens)
    }
    fn mixed(&self, step: MixedStep) -> SimDuration {
        self.decode(step.decode_seqs.max(1), step.decode_kv_tokens)
    }
    fn describe(&self) -> String {
        "uneven".into()
    }
}

/// One run of a case: its batch, first KV, steps, the idle time before it, the first tokens
/// and resumed gaps its first step gives.
#[derive(Clone, Debug)]
struct Run {
    batch: u64,
    kv_first: u64,
    steps: u64,
    idle_ns: u64,
    first: u64,
    resumed: Vec<u64>,
}

fn recorder<'a>(per_token: u64, steady: Option<u64>, draining: bool) -> Recorder<'a> {
    let s = |x: u64| SimDuration::from_ns(x);
    let mut r = Recorder::new(
        s(1),
        s(1),
        64,
        Vec::new(),
        1,
        false,
        SteadyFrom::StartUpCleared,
    );
    r.set_overhead(Overhead {
        per_token: s(per_token),
        ..Overhead::default()
    });
    r.steady_start = steady.map(SimTime::from_ns);
    r.draining = draining;
    r
}

/// The latencies a recorder holds, read after putting everything held back in.
fn itl(mut r: Recorder) -> Vec<(Stats, Vec<(u64, u64)>)> {
    r.latency.flush();
    r.steady_latency.flush();
    let read = |d: &Distribution| (d.stats(), d.bucket_counts());
    vec![read(&r.latency.itl_ms), read(&r.steady_latency.itl_ms)]
}

/// How a run is described to [`Recorder::on_decode_steps`].
#[derive(Clone, Copy, Debug)]
enum Priced {
    Line,
    Ends,
    Model,
}

/// Feed the runs to a recorder as runs, described as `priced` says, and to one step by step;
/// both must hold the same latencies.
fn same_latencies(
    model: &dyn StepTimeModel,
    priced: Priced,
    runs: &[Run],
    per_token: u64,
    steady: Option<u64>,
    draining: bool,
) {
    let (mut fast, mut slow) = (
        recorder(per_token, steady, draining),
        recorder(per_token, steady, draining),
    );
    let unlined = Unlined(model);
    let mut t = SimTime::from_ns(1_000);
    for run in runs {
        t += SimDuration::from_ns(run.idle_ns);
        let resumed: Vec<SimDuration> = run
            .resumed
            .iter()
            .map(|&x| SimDuration::from_ns(x))
            .collect();
        let mut ends = Vec::new();
        let mut e = 0u64;
        for j in 0..run.steps {
            e += model
                .decode(run.batch, run.kv_first + run.batch * j)
                .as_ns();
            ends.push(e);
            let (first, resumed) = if j == 0 {
                (run.first, resumed.as_slice())
            } else {
                (0, &[][..])
            };
            slow.on_tokens(t + SimDuration::from_ns(e), run.batch, first, resumed);
        }
        let (b, kv, n) = (run.batch, run.kv_first, run.steps);
        let steps = match priced {
            Priced::Line => DecodeSteps::new(model, b, kv, n, &[]),
            Priced::Ends => DecodeSteps::new(model, b, kv, n, &ends),
            Priced::Model => DecodeSteps::new(&unlined, b, kv, n, &[]),
        };
        fast.on_decode_steps(t, &steps, run.first, &resumed);
        t += SimDuration::from_ns(e);
        assert_eq!(fast.last_decode_end, slow.last_decode_end);
        assert_eq!(fast.awaiting_next, slow.awaiting_next);
    }
    assert_eq!(itl(fast), itl(slow), "{priced:?}, {runs:?}");
}

fn runs() -> impl Strategy<Value = Vec<Run>> {
    let run = (
        prop_oneof![1u64..300, 1u64..4],
        0u64..200_000,
        prop_oneof![1u64..400, 1u64..3],
        prop_oneof![Just(0u64), 0u64..50_000_000],
        prop_oneof![3 => Just(0u64), 1 => 0u64..5],
        proptest::collection::vec(0u64..90_000_000, 0..3),
    );
    let run = run.prop_map(|(batch, kv_first, steps, idle_ns, first, resumed)| Run {
        batch,
        kv_first,
        steps,
        idle_ns,
        first: first.min(batch),
        resumed: resumed
            .into_iter()
            .take((batch - first.min(batch)) as usize)
            .collect(),
    });
    proptest::collection::vec(run, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn runs_of_decode_steps_record_what_their_steps_do(
        runs in runs(),
        base in prop_oneof![1u64..80_000_000, 1u64..20_000],
        per_seq in prop_oneof![0u64..400_000, 0u64..20],
        per_kv_ps in prop_oneof![Just(0u64), 0u64..5_000, 0u64..500_000, (1u64..4).prop_map(|x| x * 1000)],
        per_token in prop_oneof![Just(0u64), 0u64..3_000_000],
        steady in prop_oneof![Just(None), (0u64..20_000_000_000).prop_map(Some)],
        draining in any::<bool>(),
    ) {
        let linear = Linear::new(LinearStepTime {
            decode_base_ns: base,
            decode_per_seq_ns: per_seq,
            decode_per_kv_token_ps: per_kv_ps,
            prefill_base_ns: 1,
            prefill_per_token_ps: 1,
        });
        for priced in [Priced::Line, Priced::Ends, Priced::Model] {
            same_latencies(&linear, priced, &runs, per_token, steady, draining);
        }
        same_latencies(&Uneven, Priced::Ends, &runs, per_token, steady, draining);
    }
}

/// A request answered at `t` that took no time.
fn answered_at(seq: u64, t: SimTime) -> Request {
    Request {
        seq,
        prompt_tokens: 1,
        max_new_tokens: 1,
        target_output_tokens: 1,
        ignore_eos: false,
        prefix: None,
        ready_at: t,
        sent_at: t,
        arrived_at: t,
        admitted_at: Some(t),
        first_token_at: Some(t),
        evicted_at: None,
        outside_token_at: None,
        out_tokens: 1,
        evictions: 0,
        cached_tokens: 0,
        phase: crate::request::Phase::Finished,
    }
}

#[test]
fn the_window_counts_the_completions_of_its_last_span_and_keeps_no_more_than_twice_them() {
    let window = 1_000u64;
    let s = SimDuration::from_ns;
    let recorder = || {
        Recorder::new(
            s(window),
            s(1),
            64,
            Vec::new(),
            1,
            false,
            SteadyFrom::StartUpCleared,
        )
    };
    let mut r = recorder();
    // (Snapshots go forward in time, each after the completions before it.)
    let (mut times, mut t, mut last_at, mut on_the_edge) = (Vec::new(), 0u64, 0, 0);
    for i in 1..=30_000u64 {
        // Bursts at one instant, steady trickles, and lulls longer than the window.
        t = last_at.max(t)
            + match i % 7 {
                0 | 1 => 0,
                2..=4 => i % 13,
                5 => i % 211,
                _ if i % 997 == 0 => 3 * window,
                _ => 1,
            };
        r.on_completion(SimTime::from_ns(t), &answered_at(i, SimTime::from_ns(t)));
        times.push(t);
        if i % (1 + i % 89) == 0 {
            // A snapshot now, or just as a completion leaves the window.
            let at = match i % 3 {
                0 => t,
                1 => t + i % 2_000,
                _ => times[times.len() / 2 + (i as usize % (times.len() / 2 + 1))] + window,
            }
            .max(t)
            .max(last_at);
            last_at = at;
            let want = times.iter().filter(|&&c| c + window > at).count();
            on_the_edge += times.iter().filter(|&&c| c + window == at).count();
            let n = r.prune_window(SimTime::from_ns(at));
            assert_eq!(n, want, "at {at} ns");
            assert!(r.window_completions.len() <= 2 * n, "at {at} ns");
        }
    }
    assert!(on_the_edge > 100, "the edge is tested ({on_the_edge})");
    // The snapshot's rate: the count over the window, or over the time so far before it.
    let at = SimTime::from_ns(t + window / 2);
    let want = times.iter().filter(|&&c| c + window > at.as_ns()).count();
    let rate = r.snapshot(at).window_req_per_s;
    assert_eq!(rate, want as f64 / s(window).as_secs_f64());
    let mut early = recorder();
    for i in 0..3 {
        early.on_completion(
            SimTime::from_ns(100),
            &answered_at(i, SimTime::from_ns(100)),
        );
    }
    let rate = early.snapshot(SimTime::from_ns(400)).window_req_per_s;
    assert_eq!(rate, 3.0 / s(400).as_secs_f64());
}

#[test]
fn a_request_whose_token_after_an_eviction_is_its_last_leaves_no_wait_behind() {
    // A and B decode together (steps ending at 50 and 100 ms); A is retracted, B decodes alone
    // (150 ms); A's re-prefill ends at 180 ms with its last token, timed from its token at
    // 100 ms; B's next step ends at 230 ms: its gap is from its own token at 150 ms, 80 ms —
    // not from A's re-prefill, which would give 50.
    let ms = |x: u64| SimTime::from_ns(x * 1_000_000);
    let mut r = recorder(0, None, false);
    r.on_tokens(ms(50), 2, 0, &[]);
    r.on_tokens(ms(100), 2, 0, &[]);
    r.on_tokens(ms(150), 1, 0, &[]);
    r.on_tokens(ms(180), 1, 0, &[ms(180) - ms(100)]);
    let a = Request {
        out_tokens: 3,
        evictions: 1,
        outside_token_at: Some(ms(180)),
        ..answered_at(0, ms(180))
    };
    r.on_completion(ms(180), &a);
    r.on_tokens(ms(230), 1, 0, &[]);
    let (stats, _) = itl(r).swap_remove(0);
    // 50 and 50 (A and B at 100), 50 (B at 150), 80 (A at 180), 80 (B at 230).
    assert_eq!((stats.count, stats.mean), (5, 62.0));
}
