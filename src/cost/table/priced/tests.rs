//! The precomputed table against the table itself: every step, total, integral and search
//! the same.

use super::*;
use crate::cost::floors::SMALL_TERMS;
use proptest::prelude::*;

/// A table of `batch` × `kv` decode points with times `times` (ps, cycled), and a prefill line.
fn table(batch: Vec<u64>, kv: Vec<u64>, times: &[u64]) -> StepTable {
    let n = batch.len() * kv.len();
    StepTable {
        decode_ps: times.iter().copied().cycle().take(n).collect(),
        decode_batch: batch,
        decode_kv_tokens: kv,
        prefill_tokens: vec![1, 16_384],
        prefill_ps: vec![15_060_000_000, 998_040_000_000],
        source: "inline".into(),
    }
}

/// The benches' table: the B2 case study's linear step times at the corners.
fn b2() -> StepTable {
    let ms = |x: f64| (x * 1e9).round() as u64;
    table(
        vec![1, 512],
        vec![0, 200_000],
        &[ms(12.8), ms(24.8), ms(421.6), ms(433.6)],
    )
}

/// Every answer of the two models for one run.
fn same_run(t: &StepTable, batch: u64, kv0: u64, steps: u64, w: (u64, u64), budget: u64) {
    let p = PricedTable::new(t.clone());
    let at = format!("batch {batch}, kv {kv0}, {steps} steps, table {t:?}");
    for j in [0, steps / 2, steps.saturating_sub(1)] {
        let kv = kv0 + batch * j;
        assert_eq!(p.decode(batch, kv), t.decode(batch, kv), "step {j}: {at}");
    }
    assert_eq!(
        p.decode_run(batch, kv0, steps),
        t.decode_run(batch, kv0, steps),
        "{at}"
    );
    assert_eq!(
        p.decode_run_weighted(batch, kv0, steps, w.0, w.1),
        t.decode_run_weighted(batch, kv0, steps, w.0, w.1),
        "{at}"
    );
    let budget = SimDuration::from_ns(budget);
    assert_eq!(
        p.decode_run_within(batch, kv0, steps, budget),
        t.decode_run_within(batch, kv0, steps, budget),
        "budget {budget:?}: {at}"
    );
    assert_eq!(
        p.decode_non_decreasing(batch),
        t.decode_non_decreasing(batch),
        "{at}"
    );
}

#[test]
fn the_benches_table() {
    let t = b2();
    // Its runs are priced in split form.
    let p = PricedTable::new(t.clone());
    assert!(p.row(50)[0].run(50, 100_000, 300).is_some());
    assert!(p.row(50)[0].ns(50, 100_000).is_some());
    for (batch, kv0, steps) in [
        (1, 0, 1),
        (50, 100_000, 300),
        (50, 199_000, 300),
        (512, 0, 40),
        (600, 250_000, 17),
        (48, 95_000, 4_116),
    ] {
        for budget in [0, 1, 58_000_000, 1_000_000_000, 20_000_000_000, u64::MAX] {
            same_run(&t, batch, kv0, steps, (116_000, batch), budget);
        }
    }
}

#[test]
fn runs_across_many_segments_and_at_the_split_bounds() {
    // Five KV segments, one falling (negative slope), a batch axis with a falling cell too.
    let t = table(
        vec![1, 8, 64, 256],
        vec![0, 1_000, 50_000, 51_000, 400_000, 1 << 30],
        &[
            9_000_000_000,
            9_500_000_000,
            12_000_000_000,
            11_000_000_000,
            30_000_000_000,
            31_000_000_000,
            15_000_000_000,
        ],
    );
    for batch in [1, 3, 8, 63, 64, 200, 256, 300, 5_000] {
        for (kv0, steps) in [
            (0, 300),
            (900, 200),
            (49_990, 30),
            (50_500, 300),
            (399_000, 1),
        ] {
            for budget in [1, 50_000_000, 700_000_000, 3_000_000_000] {
                same_run(&t, batch, kv0, steps, (1_000, batch), budget);
            }
        }
    }
    // Runs of about 2²⁰ steps: the split sums' bound on the number of terms.
    let t = b2();
    for steps in [SMALL_TERMS - 1, SMALL_TERMS, SMALL_TERMS + 1] {
        let p = PricedTable::new(t.clone());
        assert_eq!(
            p.decode_run_weighted(1, 0, steps, 7, 1),
            t.decode_run_weighted(1, 0, steps, 7, 1)
        );
        let budget = SimDuration::from_ns(t.decode_run(1, 0, steps).as_ns() / 3);
        assert_eq!(
            p.decode_run_within(1, 0, steps, budget),
            t.decode_run_within(1, 0, steps, budget)
        );
    }
    // Batches and KV sizes beyond the split form: the table's own arithmetic.
    for (batch, kv0) in [
        (SPLIT_BATCH - 1, 0),
        (SPLIT_BATCH, 0),
        (1, SPLIT_KV - 3),
        (2, SPLIT_KV),
    ] {
        same_run(&b2(), batch, kv0, 4, (0, 1), 1 << 62);
    }
}

#[test]
fn steps_that_fall_to_the_floor_and_steps_that_do_not_fit_in_64_bits() {
    // Steeply falling: the steps reach the 1 ns floor within the run.
    let falling = table(
        vec![1, 2],
        vec![0, 1_000],
        &[5_000_000, 1_000, 5_000_000, 1_000],
    );
    same_run(&falling, 1, 900, 300, (3, 1), 1_000_000);
    same_run(&falling, 2, 0, 300, (3, 1), 5_000_000);
    // Times at the table's largest (10⁶ ms) over a huge KV span: a divisor beyond the split.
    let big = table(
        vec![1, 1 << 24],
        vec![0, 1 << 40],
        &[
            1_000_000_000_000_000,
            1,
            999_999_999_999_999,
            1_000_000_000_000_000,
        ],
    );
    same_run(&big, 1 << 20, 1 << 39, 200, (5, 1), u64::MAX);
}

/// A strictly increasing axis from its first point and gaps.
fn axis(first: u64, gaps: &[u64]) -> Vec<u64> {
    let mut x = vec![first];
    for g in gaps {
        x.push(x[x.len() - 1] + g);
    }
    x
}

proptest! {
    #[test]
    fn a_precomputed_table_is_the_table(
        b0 in 1u64..300, b_gaps in proptest::collection::vec(1u64..1_000, 1..4),
        k0 in 0u64..100_000, k_gaps in proptest::collection::vec(1u64..300_000, 1..5),
        times in proptest::collection::vec(0u64..80_000_000_000, 1..20),
        batch in 1u64..2_000, kv0 in 0u64..1_500_000, steps in 0u64..300,
        w0 in 0u64..1_000_000, ws in 0u64..2_000, budget in 0u64..30_000_000_000,
    ) {
        let t = table(axis(b0, &b_gaps), axis(k0, &k_gaps), &times);
        same_run(&t, batch, kv0, steps, (w0, ws), budget);
    }

    #[test]
    fn a_dense_precomputed_table_is_the_table(
        b0 in 1u64..5, b_gaps in proptest::collection::vec(1u64..4, 1..5),
        k0 in 0u64..100, k_gaps in proptest::collection::vec(1u64..60, 1..8),
        times in proptest::collection::vec(0u64..80_000_000, 1..40), whole_ns in any::<bool>(),
        batch in 1u64..12, kv0 in 0u64..400, steps in prop_oneof![0u64..40, 0u64..300],
        w0 in 0u64..1_000_000, ws in 0u64..2_000, budget in 0u64..3_000_000_000,
    ) {
        // Divisors of a few thousand, and runs across many segments; with times in whole ns,
        // steps that are whole ns at the table's points.
        let times: Vec<u64> = times.iter().map(|&x| if whole_ns { x / 1000 * 1000 } else { x }).collect();
        let t = table(axis(b0, &b_gaps), axis(k0, &k_gaps), &times);
        same_run(&t, batch, kv0, steps, (w0, ws), budget);
    }

    #[test]
    fn a_precomputed_table_is_the_table_at_the_extremes(
        b0 in 1u64..1 << 23, b_gap in 1u64..1 << 23,
        k0 in 0u64..1 << 39, k_gap in 1u64..1 << 39,
        times in proptest::collection::vec(0u64..=1_000_000_000_000_000, 4),
        batch in 1u64..1 << 33, kv0 in 0u64..1 << 41, steps in 0u64..40,
        w0 in 0u64..1 << 40, ws in 0u64..1 << 20, budget in any::<u64>(),
    ) {
        let t = table(vec![b0, b0 + b_gap], vec![k0, k0 + k_gap], &times);
        same_run(&t, batch, kv0, steps, (w0, ws), budget);
    }

    #[test]
    fn a_precomputed_table_is_the_table_about_the_largest_split_divisor(
        b0 in 1u64..1 << 20, b_gap in 1u64..1 << 20,
        k0 in 0u64..1 << 30, k_gap in (1u64 << 28)..1 << 33,
        times in proptest::collection::vec(0u64..=1_000_000_000_000_000, 4),
        batch in 1u64..1 << 21, kv0 in 0u64..1 << 36, steps in 0u64..100,
        w0 in 0u64..1 << 40, ws in 0u64..1 << 20, budget in any::<u64>(),
    ) {
        // Divisors 1000·Δb·Δk on both sides of 2⁶².
        let t = table(vec![b0, b0 + b_gap], vec![k0, k0 + k_gap], &times);
        same_run(&t, batch, kv0, steps, (w0, ws), budget);
    }
}
