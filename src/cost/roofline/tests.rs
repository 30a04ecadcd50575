//! The roofline model's tests.

use super::*;
use crate::catalog::Catalog;

fn parts(gpu: &str, model: &str) -> (Gpu, Model) {
    let c = Catalog::builtin();
    (c.gpu(gpu).unwrap().clone(), c.model(model).unwrap().clone())
}

#[test]
fn a_dense_model_by_hand() {
    // Llama-3.1-8B on one H100: no experts, no all-reduce.
    let (gpu, model) = parts("h100", "llama-3.1-8b");
    let r = Roofline::new(&gpu, &model, 1, 131_072, RooflineSettings::default());
    let b = r.decode_breakdown(32, 100_000);
    let bw = 3350e9 * 0.75;
    let dense = model.dense_read_bytes_per_gpu(1) as f64;
    assert!((b.weights_s - dense / bw).abs() < 1e-12);
    assert!((b.kv_s - 100_000.0 * 131_072.0 / bw).abs() < 1e-12);
    // FLOPs: 32 tokens × 2 × active + 100 000 pairs × 4 × 32 heads × 128 × 32 layers.
    let flops = 32.0 * 2.0 * model.active_params() as f64 + 100_000.0 * 4.0 * 32.0 * 128.0 * 32.0;
    assert!((b.compute_s - flops / (989e12 * 0.5)).abs() < 1e-12);
    assert_eq!(b.communication_s, 0.0);
    assert_eq!(b.experts_touched, 0.0);
    let total = (dense / bw + 100_000.0 * 131_072.0 / bw).max(flops / (989e12 * 0.5)) + 0.002;
    assert!((b.total_s - total).abs() < 1e-12);
    // About 5.3 ms of weights and 5.2 ms of KV: memory-bound.
    assert!(b.memory_s > b.compute_s);
}

#[test]
fn a_mixed_step_without_prompt_tokens_is_a_decode_step_and_prompt_tokens_cost_more() {
    let (gpu, model) = parts("rtx-pro-6000", "kimi-k2.5");
    let r = Roofline::new(&gpu, &model, 8, 70_272, RooflineSettings::default());
    let decode_only = MixedStep {
        decode_seqs: 50,
        decode_kv_tokens: 100_000,
        ..MixedStep::default()
    };
    assert_eq!(r.mixed(decode_only), r.decode(50, 100_000));
    let with_chunk = MixedStep {
        prefill_seqs: 1,
        prefill_tokens: 4096,
        prefill_kv_tokens: 4096,
        ..decode_only
    };
    let b = r.mixed_breakdown(with_chunk);
    assert!(r.mixed(with_chunk) > r.decode(50, 100_000));
    // The chunk's causal attention over itself: 4096 × (4096 − 2048) pairs; nothing cached
    // before it, so it reads no more KV than the decode rows.
    let flops = (50.0 + 4096.0) * r.flops_per_token
        + (100_000.0 + 4096.0 * 2048.0) * r.attention_flops_per_pair;
    assert!((b.compute_s - flops / (r.peak_flops_per_s * r.compute_efficiency)).abs() < 1e-12);
    assert_eq!(b.kv_s, r.decode_breakdown(50, 100_000).kv_s);
}

#[test]
fn an_moe_model_by_hand() {
    // Kimi-K2.5 on 8 × RTX PRO 6000: 384 experts, 8 per token, 60 MoE layers.
    let (gpu, model) = parts("rtx-pro-6000", "kimi-k2.5");
    let r = Roofline::new(&gpu, &model, 8, 70_272, RooflineSettings::default());
    let touched = 384.0 * (1.0 - (1.0 - 8.0 / 384.0_f64).powf(50.0));
    assert!((r.experts_touched(50.0) - touched).abs() < 1e-9);
    assert!((touched - 250.0).abs() < 1.0);
    let b = r.decode_breakdown(50, 100_000);
    let bw = gpu.hbm_bandwidth_gb_per_s * 1e9 * 0.75;
    let expert = model.expert_bytes_per_gpu(8) as f64;
    let weights = model.dense_read_bytes_per_gpu(8) as f64 + touched * 60.0 * expert;
    assert!((b.weights_s - weights / bw).abs() < 1e-12);
    assert!((b.kv_s - 100_000.0 * 70_272.0 / bw).abs() < 1e-12);
    // Two all-reduces per layer of 50 × 7168 × 2 bytes.
    let link = gpu.interconnect_gb_per_s * 1e9;
    let ar = 2.0
        * 61.0
        * (gpu.collective_latency_us * 1e-6 + 2.0 * 7.0 / 8.0 * 50.0 * 7168.0 * 2.0 / link);
    assert!((b.communication_s - ar).abs() < 1e-12);
    assert!(b.memory_s > b.compute_s);
    // One expert of one layer on one GPU: 3 × 7168 × 2048 INT4 weights with BF16 scales per
    // 32, split 8 ways: ≈ 3.1 MB.
    assert!((expert - 3.0 * 7168.0 * 2048.0 * 9.0 / 16.0 / 8.0).abs() < 2.0);
}

#[test]
fn prefill_pays_the_quadratic_attention_term() {
    let (gpu, model) = parts("h100", "llama-3.1-8b");
    let r = Roofline::new(&gpu, &model, 1, 131_072, RooflineSettings::default());
    let one = r.prefill_breakdown(1, 8192).compute_s;
    let split = r.prefill_breakdown(8, 8192).compute_s;
    assert!(
        one > split,
        "one long prompt costs more attention than eight short ones"
    );
}

#[test]
fn calibration_reproduces_the_point_and_keeps_the_shape() {
    let (gpu, model) = parts("rtx-pro-6000", "kimi-k2.5");
    let r = Roofline::new(&gpu, &model, 8, 70_272, RooflineSettings::default());
    let ratio = r.decode_breakdown(20, 50_000).total_s / r.decode_breakdown(50, 100_000).total_s;
    let point = CalibrationPoint {
        gen_tok_per_s: 850.0,
        running: 50,
        kv_tokens: 100_000,
        mean_prompt_tokens: 250.0,
        mean_output_tokens: 4116.0,
        prefill_chunk_tokens: Some(8192),
    };
    let c = r.clone().calibrated(point.clone());
    assert!((c.logged_gen_tok_per_s(&point) - 850.0).abs() < 1e-6);
    // The logged rate includes the prefill of the requests replacing the finished ones, so
    // it is below the pure decode rate.
    assert!(50.0 / c.decode_breakdown(50, 100_000).total_s > 850.0);
    let ratio_c = c.decode_breakdown(20, 50_000).total_s / c.decode_breakdown(50, 100_000).total_s;
    assert!((ratio - ratio_c).abs() < 1e-12);
}

/// A run's ends are the sums of the model's steps, and each step is the breakdown's total to
/// the nanosecond: the step adds the same terms in another order (`DecodeAt`), so the two
/// floats can differ in their last bit and the rounding by 1 ns, where it falls on that bit.
#[test]
fn a_runs_steps_are_the_breakdowns_to_the_nanosecond() {
    for (gpu, name, tp) in [
        ("h100", "llama-3.1-8b", 1),
        ("rtx-pro-6000", "kimi-k2.5", 8),
    ] {
        let (gpu, model) = parts(gpu, name);
        let r = Roofline::new(&gpu, &model, tp, 70_272, RooflineSettings::default());
        assert!(r.decode_non_decreasing(7));
        for batch in [1, 7, 64, 150, 1000] {
            let mut ends = Vec::new();
            let n =
                r.decode_ends_within(batch, 5_000, 300, SimDuration::from_ns(u64::MAX), &mut ends);
            assert_eq!(n, 300);
            let (mut total, mut off) = (0, 0);
            for (i, &end) in ends.iter().enumerate() {
                let kv = 5_000 + batch * i as u64;
                let d = r.decode(batch, kv).as_ns();
                let whole = to_duration(r.decode_breakdown(batch, kv).total_s).as_ns();
                assert!(
                    d.abs_diff(whole) <= 1,
                    "batch {batch}, kv {kv}: {d} and {whole} ns"
                );
                off += u64::from(d != whole);
                total += d;
                assert_eq!(end, total);
            }
            assert!(
                off * 100 <= n,
                "batch {batch}: {off} of {n} steps off by 1 ns"
            );
        }
    }
}

#[test]
fn durations_round_half_away_from_zero() {
    let reference = |s: f64| {
        let ns = (s * 1e9).round();
        if ns.is_finite() && ns >= 1.0 {
            ns.min(u64::MAX as f64 / 2.0) as u64
        } else {
            1
        }
    };
    let mut x = 0.123_456_789_f64;
    for s in [
        0.0,
        4.9e-10,
        5e-10,
        1.5e-9,
        2.5e-9,
        0.047_616_904_5,
        1e6,
        4.6e6,
        1e300,
        -1.0,
        4_503_599_627_370_495.5 / 1e9,
        4_503_599_627_370_494.5 / 1e9,
        4_503_599_627_370_496.0 / 1e9,
        0.5 / 1e9,
        f64::from_bits(0.5f64.to_bits() - 1) / 1e9,
    ] {
        assert_eq!(to_duration(s).as_ns(), reference(s), "{s}");
    }
    for _ in 0..100_000 {
        x = (x * 7.123_456_7 + 0.311).fract();
        let s = x * 0.2;
        assert_eq!(to_duration(s).as_ns(), reference(s), "{s}");
        let half = (s * 1e9).floor() + 0.5;
        assert_eq!(to_duration(half / 1e9).as_ns(), reference(half / 1e9));
        // Ties and their neighbours over the whole fast range, even and odd.
        let big = (x * 52.0).exp2().floor() + 0.5;
        for v in [
            big,
            big + 1.0,
            f64::from_bits(big.to_bits() - 1),
            f64::from_bits(big.to_bits() + 1),
        ] {
            let s = v / 1e9;
            assert_eq!(to_duration(s).as_ns(), reference(s), "{v}");
        }
    }
}

#[test]
fn a_run_within_a_budget_is_the_longest_prefix_below_it() {
    // The roofline has no closed form: the trait's one-pass default prices its runs.
    let (gpu, model) = parts("h100", "llama-3.1-8b");
    let r = Roofline::new(&gpu, &model, 1, 131_072, RooflineSettings::default());
    let (batch, kv0) = (64, 200_000);
    let step = |i: u64| r.decode(batch, kv0 + batch * i);
    for budget_ms in [0, 1, 50, 333, 1_000, 100_000] {
        let budget = SimDuration::from_ns(budget_ms * 1_000_000);
        let (steps, total) = r.decode_run_within(batch, kv0, 500, budget);
        assert_eq!(total, r.decode_run(batch, kv0, steps), "{budget_ms} ms");
        assert!(total < budget || steps == 0, "{budget_ms} ms");
        assert!(
            steps == 500 || total + step(steps) >= budget,
            "{budget_ms} ms: one more step would fit"
        );
    }
    // A generous budget takes the whole run; none takes nothing.
    assert_eq!(
        r.decode_run_within(batch, kv0, 500, SimDuration::from_ns(u64::MAX))
            .0,
        500
    );
    assert_eq!(r.decode_run_within(batch, kv0, 500, SimDuration::ZERO).0, 0);
}
