//! The linear model's tests.

use super::*;
use proptest::prelude::*;

fn model(kv_ps: u64) -> Linear {
    Linear::new(LinearStepTime {
        decode_base_ns: 35_000_000,
        decode_per_seq_ns: 300_000,
        decode_per_kv_token_ps: kv_ps,
        prefill_base_ns: 10_000_000,
        prefill_per_token_ps: 120_000_000,
    })
}

#[test]
fn a_mixed_step_by_hand() {
    use crate::cost::MixedStep;
    // 35 ms + 10 × 0.3 ms + 500 prompt tokens × 120 µs + (20 000 + 600) KV × 0.15 ns.
    let step = MixedStep {
        decode_seqs: 10,
        decode_kv_tokens: 20_000,
        prefill_seqs: 1,
        prefill_tokens: 500,
        prefill_kv_tokens: 600,
    };
    assert_eq!(
        model(150).mixed(step).as_ns(),
        35_000_000 + 3_000_000 + 60_000_000 + 3_090
    );
    // Without prompt tokens it is a decode step.
    let decode = MixedStep {
        decode_seqs: 50,
        decode_kv_tokens: 100_000,
        ..MixedStep::default()
    };
    assert_eq!(model(150).mixed(decode), model(150).decode(50, 100_000));
}

#[test]
fn one_decode_step_by_hand() {
    // 35 ms + 50 × 0.3 ms + 100 000 tokens × 0.15 ns = 35 + 15 + 0.015 ms.
    assert_eq!(model(150).decode(50, 100_000).as_ns(), 50_015_000);
    // Prefill of 300 tokens: 10 ms + 300 × 120 µs = 46 ms.
    assert_eq!(model(0).prefill(1, 300).as_ns(), 46_000_000);
}

proptest! {
    #[test]
    fn the_weighted_run_equals_the_loop(kv_ps in 0u64..200_000, batch in 1u64..2000, kv0 in 0u64..10_000_000, steps in 0u64..300, w0 in 0u64..10_000_000, ws in 0u64..2000) {
        let m = model(kv_ps);
        let mut total = SimDuration::ZERO;
        let mut weighted = 0u128;
        for i in 0..steps {
            let d = m.decode(batch, kv0 + batch * i);
            weighted += u128::from(w0 + ws * i) * u128::from(d.as_ns());
            total = total + d;
        }
        prop_assert_eq!(m.decode_run_weighted(batch, kv0, steps, w0, ws), (total, weighted));
    }

    #[test]
    fn decode_run_equals_the_sum_of_steps(kv_ps in 0u64..5000, batch in 1u64..500, kv0 in 0u64..1_000_000, steps in 0u64..400) {
        let m = model(kv_ps);
        let direct = (0..steps).fold(SimDuration::ZERO, |acc, i| acc + m.decode(batch, kv0 + batch * i));
        prop_assert_eq!(m.decode_run(batch, kv0, steps), direct);
    }

    #[test]
    fn the_searched_prefix_is_the_longest_below_the_budget(kv_ps in 0u64..5000, batch in 1u64..500, kv0 in 0u64..1_000_000, most in 0u64..400, budget_ms in 0u64..20_000) {
        let m = model(kv_ps);
        let budget = SimDuration::from_ns(budget_ms * 1_000_000);
        // The one pass every model may use, step by step.
        let (mut steps, mut total) = (0u64, SimDuration::ZERO);
        while steps < most {
            let next = total + m.decode(batch, kv0 + batch * steps);
            if next >= budget {
                break;
            }
            total = next;
            steps += 1;
        }
        prop_assert_eq!(m.decode_run_within(batch, kv0, most, budget), (steps, total));
    }
}

/// Values of every magnitude: `k` random bits for a uniform `k`, or a few below a power of two
/// (the 64-bit bounds the fast paths check among them).
fn edgy() -> impl Strategy<Value = u64> {
    prop_oneof![
        bits(64),
        (0u32..=64, 0u64..3).prop_map(|(k, d)| match k {
            64 => u64::MAX - d,
            k => (1u64 << k).saturating_sub(d),
        }),
    ]
}

/// Mostly values a run can take, sometimes [`edgy`] ones.
fn coef() -> impl Strategy<Value = u64> {
    prop_oneof![3 => bits(44), 1 => edgy()]
}

fn edgy_model(base: u64, per_seq: u64, kv_ps: u64) -> Linear {
    Linear::new(LinearStepTime {
        decode_base_ns: base,
        decode_per_seq_ns: per_seq,
        decode_per_kv_token_ps: kv_ps,
        prefill_base_ns: 0,
        prefill_per_token_ps: 0,
    })
}

/// What a run reaches, for a run that is one (a request or more, each step's KV and weight in
/// 64 bits: the callers' contract): whether the 128-bit path can price it (its total, estimated
/// in floats, below 2¹²⁰; a fixed cost or a short run, which that path adds step by step) and
/// also weight it (the weighted sum and the steps' squares below 2¹²⁰: it computes them).
fn reach(m: &Linear, batch: u64, kv0: u64, steps: u64, w: (u64, u64)) -> (bool, bool) {
    let last = batch
        .checked_mul(steps.saturating_sub(1))
        .and_then(|k| k.checked_add(kv0));
    let last_weight = (w.1.checked_mul(steps)).and_then(|x| x.checked_add(w.0));
    let run = batch > 0 && last.is_some() && last_weight.is_some();
    let p = &m.p;
    let step = p.decode_base_ns as f64
        + p.decode_per_seq_ns as f64 * batch as f64
        + p.decode_per_kv_token_ps as f64 * (kv0 as f64 + batch as f64 * steps as f64) / 1000.0
        + 1.0;
    let weight = w.0 as f64 + w.1 as f64 * steps as f64 + 1.0;
    let fixed = p.decode_base_ns > 0 || p.decode_per_seq_ns > 0;
    let n = steps as f64;
    let far = 2f64.powi(120);
    let total = run && step * n < far && (fixed || steps < 2000);
    (
        total,
        total && step * n * weight < far && step * step * n < far,
    )
}

/// Bits `0..k` random for a uniform `k ≤ top`.
fn bits(top: u32) -> impl Strategy<Value = u64> {
    (0u32..=top, any::<u64>()).prop_map(|(k, x)| match k {
        64 => x,
        k => x & ((1u64 << k) - 1),
    })
}

#[test]
fn the_run_lengths_at_the_fast_paths_bounds() {
    // A KV coefficient in whole ns (no floors: any length below 2³²) and one with picoseconds
    // left over (floors: lengths up to 2²⁰).
    for kv_ps in [60_000u64, 60_001, 999, 1] {
        let m = edgy_model(12_000_000, 800_000, kv_ps);
        for steps in [
            SMALL_TERMS - 1,
            SMALL_TERMS,
            SMALL_TERMS + 1,
            RUN_STEPS - 1,
            RUN_STEPS,
            RUN_STEPS + 1,
        ] {
            let (batch, kv0) = (37, 123_456);
            assert_eq!(
                m.decode_run(batch, kv0, steps),
                m.decode_run_wide(batch, kv0, steps),
                "kv_ps {kv_ps}, {steps} steps"
            );
            assert_eq!(
                m.decode_run_weighted(batch, kv0, steps, 1_000, batch),
                m.decode_run_weighted_wide(batch, kv0, steps, 1_000, batch),
                "kv_ps {kv_ps}, {steps} steps"
            );
        }
    }
    // A run whose total saturates at u64::MAX ns.
    let m = edgy_model(u64::MAX / 3, 0, 0);
    assert_eq!(m.decode_run(1, 0, 4).as_ns(), u64::MAX);
    assert_eq!(
        m.decode_run_weighted(1, 0, 4, 1, 0),
        m.decode_run_weighted_wide(1, 0, 4, 1, 0)
    );
}

proptest! {
    #[test]
    fn the_64_bit_paths_equal_the_128_bit_ones(
        base in coef(), per_seq in coef(), kv_ps in coef(), batch in coef(), kv0 in coef(),
        steps in bits(36), w0 in bits(48), ws in bits(32),
    ) {
        let m = edgy_model(base, per_seq, kv_ps);
        prop_assert_eq!(m.decode(batch, kv0), m.decode_wide(batch, kv0));
        let (total, weighted) = reach(&m, batch, kv0, steps, (w0, ws));
        if total {
            prop_assert_eq!(m.decode_run(batch, kv0, steps), m.decode_run_wide(batch, kv0, steps));
        }
        if weighted {
            prop_assert_eq!(
                m.decode_run_weighted(batch, kv0, steps, w0, ws),
                m.decode_run_weighted_wide(batch, kv0, steps, w0, ws)
            );
        }
    }

    #[test]
    fn the_64_bit_paths_equal_the_steps_added_one_by_one(
        base in coef(), per_seq in coef(), kv_ps in coef(), batch in bits(40), kv0 in coef(),
        steps in 0u64..300, w0 in bits(48), ws in bits(32),
    ) {
        let m = edgy_model(base, per_seq, kv_ps);
        let (total, weighted) = reach(&m, batch, kv0, steps, (w0, ws));
        if !weighted {
            return Ok(());
        }
        let mut sum = SimDuration::ZERO;
        let mut integral = 0u128;
        for i in 0..steps {
            let d = m.decode(batch, kv0 + batch * i);
            integral += u128::from(w0 + ws * i) * u128::from(d.as_ns());
            sum = sum + d;
        }
        prop_assert_eq!(m.decode_run_weighted(batch, kv0, steps, w0, ws), (sum, integral));
        if total && m.closed_form_runs() {
            prop_assert_eq!(m.decode_run(batch, kv0, steps), sum);
        }
    }

    #[test]
    fn the_search_near_the_bounds_is_the_longest_prefix_below_the_budget(
        base in 1u64..1 << 40, per_seq in edgy(), kv_ps in edgy(),
        batch in 1u64..1 << 20, kv0 in edgy(), most in bits(24), budget in edgy(),
    ) {
        let m = edgy_model(base, per_seq, kv_ps);
        if !reach(&m, batch, kv0, most, (0, 0)).0 {
            return Ok(());
        }
        let budget = SimDuration::from_ns(budget);
        // Steps last at least 1 ns: the totals grow with the length. A plain binary search.
        let (mut lo, mut hi) = (0u64, most);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match m.decode_run_wide(batch, kv0, mid) < budget {
                true => lo = mid,
                false => hi = mid - 1,
            }
        }
        let expect = (lo, m.decode_run_wide(batch, kv0, lo));
        prop_assert_eq!(m.decode_run_within(batch, kv0, most, budget), expect);
    }
}

/// A value of about `2^bits`, so that products and sums reach past 64 bits sometimes.
fn sized(bits: u32, low: u64) -> u64 {
    match bits {
        0 => 0,
        64.. => u64::MAX - low % 7,
        b => (1u64 << (b - 1)) | (low & ((1u64 << (b - 1)) - 1)),
    }
}

proptest! {
    #[test]
    fn a_mixed_step_in_64_bits_is_the_wide_one(
        // Mostly sizes whose products fit in 64 bits, sometimes ones that do not.
        bits in proptest::collection::vec(prop_oneof![4 => 0u32..=32, 1 => 0u32..=64], 9),
        low in proptest::collection::vec(any::<u64>(), 9),
    ) {
        let v = |i: usize| sized(bits[i], low[i]);
        let m = Linear::new(LinearStepTime {
            decode_base_ns: v(0),
            decode_per_seq_ns: v(1),
            decode_per_kv_token_ps: v(2),
            prefill_base_ns: v(3),
            prefill_per_token_ps: v(4),
        });
        let step = MixedStep {
            decode_seqs: v(5),
            decode_kv_tokens: v(6),
            prefill_seqs: 1,
            prefill_tokens: v(7),
            prefill_kv_tokens: v(8),
        };
        prop_assert_eq!(m.mixed(step), m.mixed_wide(step));
    }
}
