//! The roofline with its batches' terms kept against the roofline itself.

use super::*;
use crate::catalog::Catalog;
use crate::cost::roofline::RooflineSettings;
use proptest::prelude::*;

fn roofline(gpu: &str, model: &str, tp: u32, kv_bytes: u64) -> Roofline {
    let c = Catalog::builtin();
    let (gpu, model) = (c.gpu(gpu).unwrap(), c.model(model).unwrap());
    Roofline::new(gpu, model, tp, kv_bytes, RooflineSettings::default())
}

/// Every answer of the two for one run, and the ends of its steps again by hand.
fn same_run(r: &Roofline, batch: u64, kv0: u64, most: u64, budget: u64) {
    let p = PricedRoofline::new(r.clone());
    let at = format!("batch {batch}, kv {kv0}, {most} steps, budget {budget}");
    let budget = SimDuration::from_ns(budget);
    for j in [0, most / 2, most.saturating_sub(1)] {
        let kv = kv0 + batch * j;
        assert_eq!(p.decode(batch, kv), r.decode(batch, kv), "step {j}: {at}");
    }
    assert_eq!(
        p.decode_run(batch, kv0, most),
        r.decode_run(batch, kv0, most)
    );
    assert_eq!(
        p.decode_run_within(batch, kv0, most, budget),
        r.decode_run_within(batch, kv0, most, budget),
        "{at}"
    );
    assert_eq!(
        p.decode_run_weighted(batch, kv0, most, 1_000, batch),
        r.decode_run_weighted(batch, kv0, most, 1_000, batch),
        "{at}"
    );
    assert_eq!(
        p.decode_non_decreasing(batch),
        r.decode_non_decreasing(batch)
    );
    for (seqs, tokens) in [(batch, kv0), (1, most), (0, batch), (batch % 7, kv0 / 3)] {
        // Bit for bit before rounding.
        let (mine, theirs) = (p.prefill_s(seqs, tokens), r.prefill_breakdown(seqs, tokens));
        let at = format!("prefill of {tokens} tokens over {seqs}");
        assert_eq!(mine.to_bits(), theirs.total_s.to_bits(), "{at}");
        assert_eq!(p.prefill(seqs, tokens), r.prefill(seqs, tokens), "{at}");
    }
    // The ends, after some already there (the vector is the run's, reused).
    let (mut mine, mut theirs) = (vec![7, 8], vec![7, 8]);
    let n = p.decode_ends_within(batch, kv0, most, budget, &mut mine);
    let m = r.decode_ends_within(batch, kv0, most, budget, &mut theirs);
    assert_eq!((n, &mine), (m, &theirs), "{at}");
    // And step by step.
    let mut total = SimDuration::ZERO;
    for (i, &end) in mine[2..].iter().enumerate() {
        total = total + r.decode(batch, kv0 + batch * i as u64);
        assert_eq!(end, total.as_ns(), "end {i}: {at}");
    }
    assert!(n == most || total + r.decode(batch, kv0 + batch * n) >= budget);
}

#[test]
fn runs_of_the_benches_models() {
    let kimi = roofline("rtx-pro-6000", "kimi-k2.5", 8, 70_272);
    let llama = roofline("h200", "llama-3.1-8b", 1, 131_072);
    for r in [&kimi, &llama] {
        for batch in [1, 7, 50, 150, 1000, KEPT_BATCHES as u64, 5000] {
            for (kv0, most) in [(0, 1), (100_000, 300), (845_000, 700), (3_000, 0)] {
                for budget in [0, 1, 30_000_000, 2_000_000_000, u64::MAX] {
                    same_run(r, batch, kv0, most, budget);
                }
            }
        }
    }
    // Contexts about 2⁵³, where the float context is no longer stepped exactly.
    same_run(&llama, 1 << 20, EXACT_INTEGERS - (1 << 27), 200, u64::MAX);
    same_run(&llama, 1, EXACT_INTEGERS - 100, 200, u64::MAX);
}

#[test]
fn steps_about_where_compute_overtakes_memory_and_outside_the_usual_rounding() {
    // A batch where the FLOPs and the bytes take about as long: the larger of the two changes
    // within the run.
    let r = roofline("h100", "llama-3.1-8b", 1, 131_072);
    let crossing = (1..4096u64).find(|&b| {
        let a = r.decode_at(b);
        (a.compute_s(0.0) > a.memory_s(0.0)) != (a.compute_s(4e6) > a.memory_s(4e6))
    });
    let b = crossing.expect("a batch where the larger term changes within 4M tokens");
    same_run(&r, b, 0, 4_000, u64::MAX);
    same_run(&r, b, 3_000_000, 1_000, u64::MAX);
    for b in [300, 400, 600] {
        same_run(&r, b, 0, 2_000, u64::MAX);
    }
    // No overhead and a tiny scale: steps below half a ns, rounded to the 1 ns floor.
    let mut tiny = r.clone();
    tiny.decode_overhead_s = 0.0;
    tiny.scale = 1e-12;
    same_run(&tiny, 4, 0, 50, u64::MAX);
    // A scale that makes steps longer than 2⁵² ns, and a negative one (steps that shrink).
    let mut huge = r.clone();
    huge.scale = 1e9;
    same_run(&huge, 4, 0, 50, u64::MAX);
    let mut negative = r.clone();
    negative.scale = -1.0;
    same_run(&negative, 4, 0, 50, 1_000_000);
}

#[test]
fn steps_about_where_memory_gives_way_to_compute() {
    // A KV of a few bytes per token: the attention FLOPs outgrow the bytes, so a run starts
    // memory-bound (the weights) and turns compute-bound — the other way round from the
    // catalog's models, whose KV bytes outgrow the FLOPs.
    let mut r = roofline("h100", "llama-3.1-8b", 1, 131_072);
    r.kv_bytes_per_token = 2.0;
    let memory = |b: u64, kv: f64| r.decode_at(b).memory_s(kv);
    let compute = |b: u64, kv: f64| r.decode_at(b).compute_s(kv);
    for b in [1, 16, 64] {
        // The context where the two times meet, found by halving; runs across it.
        assert!(
            compute(b, 0.0) < memory(b, 0.0),
            "batch {b} starts memory-bound"
        );
        let (mut lo, mut hi) = (0u64, 1u64 << 40);
        assert!(
            compute(b, hi as f64) > memory(b, hi as f64),
            "batch {b} turns compute-bound"
        );
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if compute(b, mid as f64) > memory(b, mid as f64) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let most = 2_000;
        let kv0 = hi.saturating_sub(b * most / 2);
        same_run(&r, b, kv0, most, u64::MAX);
        same_run(&r, b, kv0, most, 20_000_000_000);
    }
}

proptest! {
    #[test]
    fn a_roofline_with_kept_terms_is_the_roofline(
        which in 0usize..4, batch in 1u64..3000, kv0 in 0u64..2_000_000, most in 0u64..400,
        budget in prop_oneof![Just(u64::MAX), 0u64..40_000_000_000],
        scale in prop_oneof![Just(1.0f64), 0.2f64..5.0],
        overhead_ms in prop_oneof![Just(2.0f64), 0.0f64..20.0],
    ) {
        let (gpu, model, tp, kv) = [
            ("rtx-pro-6000", "kimi-k2.5", 8, 70_272),
            ("h200", "llama-3.1-8b", 1, 131_072),
            ("h100", "qwen3-30b-a3b", 2, 49_152),
            ("mi300x", "llama-3.1-70b", 4, 81_920),
        ][which];
        let mut r = roofline(gpu, model, tp, kv);
        r.scale = scale;
        r.decode_overhead_s = overhead_ms * 1e-3;
        same_run(&r, batch, kv0, most, budget);
    }
}

#[test]
fn the_plain_rounding_is_half_away_from_zero() {
    let mut xs = vec![0.5, 0.75, 1.0, 1.5, 2.5, 3.5, 1e9 + 0.5, 12_345_678.5];
    xs.extend([
        TWO_52 - 0.5,
        TWO_52 - 1.0,
        TWO_52 - 1.5,
        (1u64 << 51) as f64 + 0.5,
    ]);
    for k in 0..2000u64 {
        xs.push(k as f64 + 0.5);
        xs.push(k as f64 * 1.000_000_1 + 0.499_999_999);
    }
    for x in xs {
        assert_eq!(rounded(x), x.round() as u64, "{x}");
    }
}

proptest! {
    #[test]
    fn the_plain_rounding_matches_round(x in 0.5f64..TWO_52) {
        prop_assert_eq!(rounded(x), x.round() as u64);
    }
}

#[test]
fn budgets_about_every_end_cut_the_run_where_the_roofline_does() {
    // Memory-bound, compute-bound and crossing runs, each cut at, before and after each end of
    // its steps: where the stretches priced without a check meet the steps priced one by one.
    let llama = roofline("h100", "llama-3.1-8b", 1, 131_072);
    let kimi = roofline("rtx-pro-6000", "kimi-k2.5", 8, 70_272);
    for (r, batch, kv0, most) in [
        (&llama, 64, 50_000, 120),
        (&llama, 5000, 1_000_000, 60),
        (&kimi, 7, 0, 150),
        (&kimi, 2000, 845_000, 80),
    ] {
        let mut ends = Vec::new();
        r.decode_ends_within(batch, kv0, most, SimDuration::from_ns(u64::MAX), &mut ends);
        for &e in &ends {
            for budget in [e - 1, e, e + 1] {
                same_run(r, batch, kv0, most, budget);
            }
        }
    }
    // And a crossing run.
    let r = &llama;
    let crossing = (1..4096u64)
        .find(|&b| {
            let a = r.decode_at(b);
            (a.compute_s(0.0) > a.memory_s(0.0)) != (a.compute_s(4e6) > a.memory_s(4e6))
        })
        .expect("a batch where the larger term changes within 4M tokens");
    let mut ends = Vec::new();
    let (kv0, most) = (0, 4_000);
    r.decode_ends_within(
        crossing,
        kv0,
        most,
        SimDuration::from_ns(u64::MAX),
        &mut ends,
    );
    for &e in ends.iter().step_by(97) {
        for budget in [e - 1, e, e + 1] {
            same_run(r, crossing, kv0, most, budget);
        }
    }
}
