//! Distributions against their references: hdrhistogram's buckets and percentiles, values added
//! one by one, and exact sums.

use super::*;

#[test]
fn percentiles_use_the_nearest_rank_and_the_mean_is_exact() {
    let mut d = Distribution::plain();
    for x in [1.0, 2.0, 3.0, 4.0] {
        d.add(x);
    }
    let s = d.stats();
    assert_eq!(s.mean, 2.5);
    assert_eq!(s.p50, 2.0);
    assert_eq!(s.p90, 4.0);
    assert_eq!(s.p99, 4.0);
}

#[test]
fn large_values_stay_within_a_tenth_of_a_percent() {
    let mut d = Distribution::nanos_as_ms();
    let values: Vec<f64> = (1..=10_000).map(|i| f64::from(i) * 1.234_567e6).collect();
    for v in &values {
        d.add(*v);
    }
    for q in [0.5, 0.9, 0.99] {
        let exact = values[(q * values.len() as f64).ceil() as usize - 1] / 1e6;
        let got = d.quantile(q);
        assert!((got / exact - 1.0).abs() <= 1e-3, "q {q}: {got} vs {exact}");
    }
    assert!((d.mean() - 5000.5 * 1.234_567).abs() < 1e-6);
}

#[test]
fn counted_values_are_the_same_as_repeated_ones_whatever_the_grouping() {
    let mut one_by_one = Distribution::nanos_as_ms();
    for _ in 0..3 {
        one_by_one.add(2_000_000.0);
    }
    one_by_one.add(5_000_000.0);
    let mut grouped = Distribution::nanos_as_ms();
    grouped.add_n(2_000_000, 2);
    grouped.add_n(5_000_000, 1);
    grouped.add_n(2_000_000, 1);
    grouped.add_n(7, 0);
    assert_eq!(grouped.stats(), one_by_one.stats());
    // Runs of equivalent values recorded at once give the same distribution.
    let values: Vec<(u64, u64)> = (0..500u64).map(|i| (10_000_000 + 997 * i, 3)).collect();
    let (mut each, mut runs) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    for &(v, n) in &values {
        each.add_n(v, n);
    }
    runs.add_grouped(values.iter().copied());
    assert_eq!(runs.stats(), each.stats());
    assert_eq!(runs.mean(), each.mean());
    for q in [0.0, 0.1, 0.5, 0.9, 0.999, 1.0] {
        assert_eq!(runs.quantile(q), each.quantile(q));
    }
    assert_eq!(grouped.mean(), 2.75);
    assert!((grouped.quantile(0.75) / 2.0 - 1.0).abs() <= 1e-3);
    assert!((grouped.quantile(1.0) / 5.0 - 1.0).abs() <= 1e-3);
}

#[test]
fn sorted_values_counted_per_bucket_are_the_values_added_one_by_one() {
    // Non-decreasing values over several buckets and bucket sizes, in many runs.
    let (mut each, mut runs) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    // The runs held back as they are found ([`Distribution::add_sorted`]).
    let mut folded = Distribution::nanos_as_ms();
    let mut groups = Vec::new();
    for r in 0..40u64 {
        let value = |i: u64| 3_000 + r * 1_000_003 + i * i * (r % 7) + 211 * i;
        let n = 1 + r * 13 % 200;
        let weight = 1 + r % 5;
        for i in 0..n {
            each.add_n(value(i), weight);
        }
        let sum: u128 = (0..n).map(|i| u128::from(value(i))).sum();
        runs.sorted_groups(n, value, &mut groups);
        assert!(groups.len() as u64 <= n);
        runs.add_groups(&groups, weight, sum);
        folded.add_sorted(n, value, weight, sum);
    }
    assert_eq!(folded.count(), runs.count());
    assert_eq!(folded.mean(), runs.mean());
    folded.flush();
    runs.flush();
    assert_eq!(folded.bucket_counts(), runs.bucket_counts());
    assert_eq!(runs.count(), each.count());
    assert_eq!(runs.mean(), each.mean());
    for q in [0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
        assert_eq!(runs.quantile(q), each.quantile(q));
    }
}

/// Runs of values labelled by their buckets' numbers, labelled by their lowest values.
fn lowest(groups: &[(u64, u64)]) -> Vec<(u64, u64)> {
    groups.iter().map(|&(i, m)| (bucket_lowest(i), m)).collect()
}

#[test]
fn the_buckets_are_the_histograms() {
    use rand::{Rng, RngExt, SeedableRng};
    let d = Distribution::nanos_as_ms();
    let h = d.histogram();
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(5);
    let mut values: Vec<u64> = (0..5_000).collect();
    for k in 1..64 {
        let p = 1u64 << k;
        values.extend([p - 2, p - 1, p, p + 1, p + 2, p + p / 3, p | (p - 1)]);
    }
    values.extend([u64::MAX, u64::MAX - 1, u64::MAX / 2]);
    values.extend((0..100_000).map(|_| rng.next_u64() >> rng.random_range(0..64u32)));
    for v in values {
        let (i, lo, hi) = bucket(v);
        assert!(d.same_bucket(v), "v = {v}");
        if hi < u64::MAX {
            assert_eq!((lo, hi), (h.lowest_equivalent(v), h.highest_equivalent(v)));
        }
        assert_eq!(bucket_lowest(i), lo, "v = {v}");
        // The numbers are the buckets' order, without gaps.
        if hi < u64::MAX {
            assert_eq!(bucket(hi + 1).0, i + 1, "v = {v}");
        }
    }
    assert_eq!(bucket(0).0, 0);
}

/// Runs of values the histogram cannot tell apart, one value at a time (the definition).
fn groups_one_by_one(d: &Distribution, values: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &v in values {
        let lo = d.histogram().lowest_equivalent(v);
        match out.last_mut() {
            Some((l, m)) if *l == lo => *m += 1,
            _ => out.push((lo, 1)),
        }
    }
    out
}

#[test]
fn sorted_groups_are_the_runs_of_equivalent_values_whatever_the_rise() {
    use rand::{Rng, RngExt, SeedableRng};
    let d = Distribution::nanos_as_ms();
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(17);
    let mut groups = Vec::new();
    for case in 0..3_000u64 {
        let n = 1 + rng.random_range(0..400u64);
        let start: u64 = match case % 4 {
            0 => rng.random_range(0..5_000),
            1 => rng.random_range(1_000_000..200_000_000),
            // Just below a power of two, where the buckets double.
            2 => (1u64 << rng.random_range(12..40u32)).saturating_sub(rng.random_range(0..20_000)),
            _ => rng.next_u64() >> rng.random_range(1..30u32),
        };
        // Even rises with floor rounding (decode steps), uneven ones, flat stretches, jumps.
        let slope_ps = rng.random_range(0..50_000_000u64) >> rng.random_range(0..20u32);
        let jumpy = case % 3 == 0;
        let mut values = Vec::with_capacity(n as usize);
        let mut extra = 0u64;
        for j in 0..n {
            if jumpy && rng.random_range(0..10) == 0 {
                extra += rng.random_range(0..3_000_000u64) >> rng.random_range(0..12u32);
            }
            values.push(start.saturating_add(slope_ps * j / 1000 + extra));
        }
        d.sorted_groups(n, |i| values[i as usize], &mut groups);
        assert_eq!(
            lowest(&groups),
            groups_one_by_one(&d, &values),
            "case {case}"
        );
    }
    // Constant values are one run; a single value is one.
    d.sorted_groups(1000, |_| 77_777, &mut groups);
    assert_eq!(
        lowest(&groups),
        [(d.histogram().lowest_equivalent(77_777), 1000)]
    );
    d.sorted_groups(1, |_| 5, &mut groups);
    assert_eq!(lowest(&groups), [(5, 1)]);
    d.sorted_groups(0, |_| 5, &mut groups);
    assert!(groups.is_empty());
}

#[test]
fn the_fast_rounding_is_f64_round() {
    let two52 = 4_503_599_627_370_496.0_f64;
    let mut xs = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -3.5,
        -0.2,
        0.0,
        -0.0,
        0.49999999999999994,
        0.5,
        1.5,
        2.5,
        1e6 + 0.5,
        1e6 - 0.5,
        two52 - 0.5,
        two52 - 1.5,
        two52,
        two52 * 4.0 + 4.0,
        // Around 2^63 (`i64`'s end) and 2^64 (`u64`'s).
        9_223_372_036_854_774_784.0,
        9_223_372_036_854_775_808.0,
        9_223_372_036_854_777_856.0,
        18_446_744_073_709_549_568.0,
        18_446_744_073_709_551_616.0,
        1e30,
    ];
    for i in 0..100_000u32 {
        let x = f64::from(i) * 0.25 + f64::from(i % 7) * 1e-9;
        xs.extend([x, x * 1234.567, (f64::from(i) * 0.37).exp2()]);
    }
    // Around 2^20, 2^31 and 2^32 (2^52, 2^63 and 2^64 fraction units).
    for p in [20, 31, 32] {
        let p = f64::from(2u32).powi(p);
        for k in 0..2_000u32 {
            let d = f64::from(k) * 2f64.powi(-40) * p;
            xs.extend([p - d, p + d, p - 0.5 + d, p * 3.0 + d]);
        }
    }
    for x in xs {
        assert_eq!(round_to_u64(x), x.round() as u64, "{x:e}");
        if x >= 0.0 {
            let units = (x * f64::from(2u32).powi(FRACTION_BITS)).round() as u128;
            assert_eq!(in_fraction_units(x), units, "{x:e}");
        }
    }
    let mut d = Distribution::plain();
    d.add_int(u64::MAX);
    d.add_int((1 << 53) + 1);
    assert_eq!(d.count(), 2);
}

#[test]
fn a_quotient_is_the_fraction_of_its_double() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(7);
    let mut pairs = vec![
        (0, 1),
        (1, 2),
        (3, 2),
        (5, 2),
        (1_000_001, 2),
        (u64::MAX, 1),
        (u64::MAX, u32::MAX),
        ((1 << 63) - 1, 3),
        (1 << 63, 3),
        ((1 << 53) + 1, 1),
    ];
    for _ in 0..100_000 {
        let a = rng.random::<u64>() >> rng.random_range(0..64u32);
        let b = (rng.random::<u32>() >> rng.random_range(0..32u32)).max(1);
        // Halves, and quotients just either side of them.
        pairs.extend([(a, b), (2 * (a >> 2) + 1, 2), (a >> 1, b.min(7))]);
    }
    for (a, b) in pairs {
        let want = Fraction::new(a as f64 / f64::from(b));
        assert_eq!(Fraction::quotient(a, b), want, "{a} / {b}");
    }
}

#[test]
fn values_held_back_count_in_every_reading() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(3);
    // `add_at_once` records each value at once: the reference.
    let (mut held, mut each) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    let (mut other, mut other_each) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    for i in 0..20_000u64 {
        // Runs of zeros and of other equal values, and values beyond 2^53.
        let v = match rng.random_range(0..4) {
            0 => 0,
            1 => 1_000_000 * (i / 100),
            2 => rng.random_range(0..10_000_000_000),
            _ => u64::MAX - rng.random_range(0..3),
        };
        held.add_int(v);
        each.add_at_once(v as f64);
        if i % 3 == 0 {
            other.add_int(v / 2);
            other_each.add_at_once((v / 2) as f64);
        }
        if i % 4999 == 0 {
            // Read while values are held back.
            assert_eq!(held.stats(), each.stats(), "at {i}");
        }
    }
    assert_eq!(held.stats(), each.stats());
    held.merge_histogram(&other);
    each.merge_histogram(&other_each);
    for q in [0.0, 0.01, 0.3, 0.5, 0.9, 0.99, 1.0] {
        assert_eq!(held.quantile(q), each.quantile(q), "q {q}");
    }
    held.flush();
    assert_eq!(held.stats(), each.stats());
    assert_eq!(held.cdf_points(50), each.cdf_points(50));
    assert_eq!(held.histogram().len(), each.histogram().len());
    assert_eq!(held.bucket_counts(), each.bucket_counts());
}

#[test]
fn held_counts_are_the_values_whatever_the_order_they_come_in() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(5);
    // Values of every magnitude from 0 to 2^64 (the lowest and highest buckets among them).
    // (A 64th of them 0 or 1.)
    let mut values: Vec<u64> = (0..20_000)
        .map(|_| rng.random::<u64>() >> rng.random_range(0..=64u32).min(63))
        .collect();
    values.extend([
        0,
        1,
        2_047,
        2_048,
        1 << 53,
        2_046 << 53,
        u64::MAX - 1,
        u64::MAX,
    ]);
    let mut ascending = values.clone();
    ascending.sort_unstable();
    let descending: Vec<u64> = ascending.iter().rev().copied().collect();
    // From the middle out, alternately below and above: the held counts grow both ways.
    let mid = ascending.len() / 2;
    let (below, above) = ascending.split_at(mid);
    let mut middle_out = Vec::new();
    for k in 0..mid.max(above.len()) {
        middle_out.extend(above.get(k));
        middle_out.extend(below.get(mid.wrapping_sub(k + 1)));
    }
    // Few values, far apart: jumps up and down past twice the counts held.
    let sparse = vec![3, u64::MAX, 1 << 40, 0, 1 << 20, 2_046 << 53, u64::MAX];
    let sparse_down: Vec<u64> = sparse.iter().rev().copied().collect();
    let mut sparse_each = Distribution::plain();
    sparse
        .iter()
        .for_each(|&v| sparse_each.add_at_once(v as f64));
    let zeros = vec![0; 5];
    let mut zeros_each = Distribution::plain();
    zeros.iter().for_each(|&v| zeros_each.add_at_once(v as f64));
    // `add_at_once` records each value at once: the reference.
    let mut each = Distribution::plain();
    values.iter().for_each(|&v| each.add_at_once(v as f64));
    // Each order, its zeros also counted apart (`add_int_mostly_zero`).
    let orders = [
        ("random", &values, &each),
        ("ascending", &ascending, &each),
        ("descending", &descending, &each),
        ("middle out", &middle_out, &each),
        ("sparse", &sparse, &sparse_each),
        ("sparse, reversed", &sparse_down, &sparse_each),
        ("zeros only", &zeros, &zeros_each),
    ];
    for ((order, values, each), zeros_apart) in
        orders.into_iter().flat_map(|o| [(o, false), (o, true)])
    {
        let order = format!("{order}{}", if zeros_apart { ", zeros apart" } else { "" });
        let mut held = Distribution::plain();
        for &v in values {
            if zeros_apart {
                held.add_int_mostly_zero(v);
            } else {
                held.add_int(v);
            }
        }
        assert_eq!(held.count(), each.count(), "{order}");
        assert_eq!(
            same(&held.histogram(), &each.histogram()),
            Ok(()),
            "{order}"
        );
        assert_eq!(held.stats(), each.stats(), "{order}");
        // Whole blocks of buckets, no more than there are.
        let (base, len) = (held.held.base, held.held.counts.len() as u64);
        assert!(base % BLOCK == 0 && len % BLOCK == 0, "{order}");
        assert!(base + len <= BUCKETS, "{order}");
        assert!(
            base + held.held.counts.capacity() as u64 <= BUCKETS,
            "{order}"
        );
        held.flush();
        assert!(held.held.is_empty(), "{order}");
        assert_eq!(
            same(&held.histogram(), &each.histogram()),
            Ok(()),
            "{order}"
        );
    }
}

/// Whether `h` is `reference`: the same counts, in a vector as long, the same count, minimum
/// and maximum — but for a maximum in the top bucket, whose highest equivalent value
/// hdrhistogram leaves one short of `u64::MAX` when a count goes in at the bucket's lowest
/// value, as the counts held back do. `Err` says what differs.
fn same(h: &Histogram<u64>, reference: &Histogram<u64>) -> Result<(), &'static str> {
    let counts = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
        let all = h.iter_all();
        all.map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    };
    let top = |h: &Histogram<u64>| h.lowest_equivalent(h.max());
    if counts(h) != counts(reference) {
        Err("counts")
    } else if h.len() != reference.len() {
        Err("count")
    } else if h.min_nz() != reference.min_nz() || top(h) != top(reference) {
        Err("minimum or maximum")
    } else if h.max() != reference.max() && top(h) != bucket(u64::MAX).1 {
        Err("maximum")
    } else {
        Ok(())
    }
}

#[test]
fn large_counts_go_in_whole_and_saturate_as_the_histograms_do() {
    let (mut held, mut each) = (Distribution::plain(), Distribution::plain());
    let big = 1u64 << 32;
    for (v, n) in [
        (5, 3_000_000_000),
        (5, 3_000_000_000),
        (7, big << 8),
        (5, 1),
        (9_000, big - 2),
        (9_000, 1),
        (9_000, 1),
        (9_000, 5),
        (9_000 + 4096 * 1024, 3),
    ] {
        held.add_n(v, n);
        each.histogram_mut().record_n(v, n).expect("in range");
    }
    assert_eq!(held.bucket_counts(), each.bucket_counts());
    // Counts past 2^64 (not through `add_n`, whose count would overflow).
    for (v, n) in [(5, u64::MAX - 10), (5, 20), (9_000, u64::MAX), (5, 1)] {
        held.record_run(v, n);
        each.histogram_mut().record_n(v, n).expect("in range");
    }
    assert_eq!(same(&held.histogram(), &each.histogram()), Ok(()));
    assert_eq!(held.histogram().len(), u64::MAX);
}

#[test]
fn the_mean_is_the_exact_sum_whatever_the_order_and_a_part_can_be_taken_away() {
    // Fractions and integers past 2^53 (where adding floats in order rounds).
    let values: Vec<f64> = (0..3_000u64)
        .map(|i| (i * 7_919 % 3_001) as f64 / 7.0 + if i % 3 == 0 { 3.3e15 } else { 0.0 })
        .collect();
    let add = |d: &mut Distribution, v: &[f64]| v.iter().for_each(|&x| d.add(x));
    let (mut forward, mut backward) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    add(&mut forward, &values);
    let reversed: Vec<f64> = values.iter().rev().copied().collect();
    add(&mut backward, &reversed);
    assert_eq!(forward.mean(), backward.mean());
    assert_eq!(forward.stats(), backward.stats());
    // The whole, less its first part, is its second part.
    let (part, rest) = values.split_at(1_234);
    let (mut first, mut second) = (Distribution::nanos_as_ms(), Distribution::nanos_as_ms());
    add(&mut first, part);
    add(&mut second, rest);
    forward.subtract(&first);
    assert_eq!(forward.stats(), second.stats());
    for q in [0.0, 0.01, 0.5, 0.999, 1.0] {
        assert_eq!(forward.quantile(q), second.quantile(q));
    }
    // Integers, counted and grouped, the same way.
    let mut whole = Distribution::plain();
    let mut part = Distribution::plain();
    for v in 1..=500u64 {
        whole.add_int(v * 1_000_003);
        whole.add_n(v, 3);
        if v % 2 == 0 {
            part.add_int(v * 1_000_003);
            part.add_n(v, 3);
        }
    }
    let mut odd = Distribution::plain();
    for v in (1..=500u64).filter(|v| v % 2 == 1) {
        odd.add_n(v, 3);
        odd.add_int(v * 1_000_003);
    }
    whole.subtract(&part);
    assert_eq!(whole.stats(), odd.stats());
}

#[test]
fn memory_does_not_grow_with_the_count() {
    let mut d = Distribution::plain();
    for i in 0..1_000_000u64 {
        d.add((i % 5000) as f64);
    }
    assert_eq!(d.count(), 1_000_000);
    assert!(d.histogram().len() == 1_000_000);
}

#[test]
fn stats_and_cdf_points_are_the_quantiles_one_by_one() {
    // Values over several powers of two and a run of zeros, read held back and flushed.
    let mut d = Distribution::nanos_as_ms();
    for i in 0..3_000u64 {
        d.add_int_mostly_zero(if i % 7 == 0 { 0 } else { i * i * 1_013 });
    }
    for flushed in [false, true] {
        if flushed {
            d.flush();
        }
        let s = d.stats();
        let each = [d.quantile(0.50), d.quantile(0.90), d.quantile(0.99)];
        assert_eq!([s.p50, s.p90, s.p99], each, "flushed: {flushed}");
        let points = d.cdf_points(37);
        assert_eq!(points.len(), 37);
        for (v, q) in points {
            assert_eq!(v, d.quantile(q), "q {q}, flushed: {flushed}");
        }
    }
    assert_eq!(Distribution::plain().stats(), Stats::default());
}

#[test]
fn a_histogram_made_at_the_flush_is_the_one_grown_to_its_values() {
    for top in [
        0,
        1,
        2_047,
        2_048,
        2_049,
        1_000_000,
        123_456_789_012,
        1 << 62,
        u64::MAX,
    ] {
        let mut d = Distribution::plain();
        d.add_int(top / 3);
        d.add_int(top);
        d.flush();
        let made = d.hist.as_ref().expect("made at the flush");
        // The reference: an empty histogram grown by recording the values.
        let mut grown = empty_histogram();
        for v in [top, top / 3] {
            if grown.record(v).is_err() {
                grown.saturating_record(v);
            }
        }
        assert_eq!(made.distinct_values(), grown.distinct_values(), "{top}");
        assert_eq!(made.buckets(), grown.buckets(), "{top}");
        assert_eq!(same(made, &grown), Ok(()), "{top}");
    }
    // Nothing added, nothing made.
    let mut d = Distribution::plain();
    d.flush();
    assert!(d.hist.is_none());
}
