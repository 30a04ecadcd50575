//! Latency and length distributions in constant memory.
//!
//! Values go into an HDR histogram with three significant digits: every percentile is within
//! 0.1 % of the value at that rank (nearest-rank definition), whatever the number of requests.
//! The mean, minimum and maximum are exact. Memory is about 8 B per histogram bucket the
//! values span, twice over (the histogram's counts and those held back from it): at most a
//! megabyte per distribution, independent of the run's length.

use std::borrow::Cow;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cost::FloorLine;
use crate::time::{round_below_2_52, TWO_52};

/// Significant digits kept: relative error ≤ 10⁻³.
const SIGFIG: u8 = 3;

/// A distribution of non-negative values, recorded in integer base units (nanoseconds, tokens)
/// and reported in display units (`base / divisor`).
#[derive(Clone, Debug)]
pub struct Distribution {
    /// The histogram, made when counts held back first go in ([`Held::drain`]) at the size
    /// they take, or empty when another's are merged or taken away first (`None` before: an
    /// empty histogram is 16 KiB of counts zeroed, which the first count beyond its range
    /// would copy and grow).
    hist: Option<Histogram<u64>>,
    /// Base units per display unit (1e6 for nanoseconds shown as milliseconds).
    divisor: f64,
    count: u64,
    /// Σ of the integer values, exact.
    sum_exact: u128,
    /// Σ of the values added as floats ([`Distribution::add`]), each exactly in units of
    /// 2^−[`FRACTION_BITS`] of a base unit (a nanosecond's four-billionth): exact, so the mean
    /// does not depend on the order the values come in, and a distribution of some of the
    /// values can be taken away ([`Distribution::subtract`]).
    sum_fraction: u128,
    /// Counts held back from the histogram, by bucket. A histogram keeps a count per bucket,
    /// so when counts go in does not matter, and every reader sees them
    /// ([`Distribution::histogram`]). A count held here is an index and an add; the histogram's
    /// update (`record_n`) costs some seventy instructions, paid once per bucket when read.
    held: Held,
}

/// Counts held back from a histogram: `counts[k]` is the count of the histogram's bucket
/// numbered `base + k` ([`bucket`]), for every bucket from the lowest given a count to the
/// highest, and `zeros` more values of bucket 0 counted apart. The counts' ends are on
/// multiples of [`BLOCK`] buckets. They grow up to the block of a higher bucket as it comes
/// (their allocation doubling when it must, as a vector's does), and down to a lower bucket's
/// block, at least twice as long — so the copies add up to at most about twice the final
/// length. Memory: 8 B per bucket spanned, allocated up to twice over, but never more than
/// `8 ·` [`BUCKETS`] = 440 KiB (values from 0 to 2^64: as many counts as the histogram then
/// keeps).
#[derive(Clone, Debug, Default)]
struct Held {
    base: u64,
    counts: Vec<u64>,
    /// Values 0 ([`Distribution::add_int_mostly_zero`]): waits that are mostly none would
    /// otherwise stretch the counts from bucket 0 to their others'.
    zeros: u64,
}

/// Buckets numbered below this hold every `u64` ([`bucket`]`(u64::MAX)` is numbered 56 319).
const BUCKETS: u64 = 55 << 10;

/// The held counts span whole blocks of this many buckets (a divisor of [`BUCKETS`]).
const BLOCK: u64 = 256;

impl Held {
    /// Hold `n` values of the bucket numbered `i` (below [`BUCKETS`]).
    #[inline(always)]
    fn hold(&mut self, i: u64, n: u64) {
        let at = usize::try_from(i.wrapping_sub(self.base)).ok();
        match at.and_then(|k| self.counts.get_mut(k)) {
            // (The histogram saturates its counts too.)
            Some(count) => *count = count.saturating_add(n),
            None => self.grow(i, n),
        }
    }

    /// Hold one value of the bucket numbered `i` (below [`BUCKETS`]): [`Held::hold`] without
    /// its saturation, which a count of ones, one at a time, cannot reach.
    #[inline(always)]
    fn hold_one(&mut self, i: u64) {
        let at = usize::try_from(i.wrapping_sub(self.base)).ok();
        match at.and_then(|k| self.counts.get_mut(k)) {
            Some(count) => *count += 1,
            None => self.grow(i, 1),
        }
    }

    /// [`Held::hold`] for a bucket outside the counts: they grow to take it in.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: u64, n: u64) {
        debug_assert!(i < BUCKETS, "invariant: bucket {i} is a u64's");
        let (len, block) = (self.counts.len() as u64, i / BLOCK * BLOCK);
        if len == 0 {
            self.base = block;
            self.counts.resize(BLOCK as usize, 0);
        } else if i >= self.base + len {
            let (end, allocated) = (block + BLOCK - self.base, self.counts.capacity() as u64);
            if end > allocated {
                // Twice the allocation (or more), but not past the last bucket.
                let allocated = (2 * allocated).clamp(end, BUCKETS - self.base);
                self.counts.reserve_exact((allocated - len) as usize);
            }
            self.counts.resize(end as usize, 0);
        } else {
            let base = self.base.saturating_sub(len).min(block);
            let mut counts = vec![0; (self.base + len - base) as usize];
            counts[(self.base - base) as usize..].copy_from_slice(&self.counts);
            (self.base, self.counts) = (base, counts);
        }
        self.counts[(i - self.base) as usize] = n;
    }

    /// Whether no count is held.
    fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.zeros == 0
    }

    /// Put every count held into `hist`: the highest bucket's first, so that the histogram
    /// grows once to take them all — or, when there is none yet, is made at the size it would
    /// grow to ([`sized_for`]) and does not grow.
    fn drain(self, hist: &mut Option<Histogram<u64>>) {
        let Held {
            base,
            counts,
            zeros,
        } = self;
        let top = counts.iter().rposition(|&n| n > 0);
        let hist = hist.get_or_insert_with(|| {
            sized_for(top.map_or(0, |top| bucket_lowest(base + top as u64)))
        });
        if let Some(top) = top {
            record_now(hist, base + top as u64, counts[top]);
            // (Eight at a time past the empty ones.)
            for (c, chunk) in counts[..top].chunks(8).enumerate() {
                if chunk.iter().fold(0, |any, &n| any | n) == 0 {
                    continue;
                }
                for (k, &n) in chunk.iter().enumerate() {
                    if n > 0 {
                        record_now(hist, base + (8 * c + k) as u64, n);
                    }
                }
            }
        }
        if zeros > 0 {
            record_now(hist, 0, zeros);
        }
    }
}

/// An empty histogram of three significant digits that grows to take the values that come.
fn empty_histogram() -> Histogram<u64> {
    Histogram::new(SIGFIG).expect("invariant: 3 significant figures is valid")
}

/// An empty histogram whose counts reach `v`'s: the one that [`empty_histogram`] grows to when
/// `v` is recorded first (the same counts, so the same readings and merges), made at that size
/// rather than grown (only its highest trackable value, which the histograms' auto-resizing
/// never reads, may be lower).
fn sized_for(v: u64) -> Histogram<u64> {
    // An empty histogram's counts hold the values below 2048 (hdrhistogram's `new` covers
    // 2 with 2048 sub-buckets of one value each).
    if v < 2048 {
        return empty_histogram();
    }
    let mut hist = Histogram::new_with_bounds(1, v, SIGFIG)
        .expect("invariant: 1 to a value of at least 2048 at 3 significant figures is valid");
    hist.auto(true);
    hist
}

/// `n` values of the bucket numbered `i` into `hist` now.
#[inline(never)]
fn record_now(hist: &mut Histogram<u64>, i: u64, n: u64) {
    let v = bucket_lowest(i);
    debug_assert!(
        same_bucket(hist, v),
        "invariant: the buckets held back are the histogram's"
    );
    // `record_n` grows the histogram; only beyond its 2^62 ceiling does it saturate.
    if n > 0 && hist.record_n(v, n).is_err() {
        hist.saturating_record_n(v, n);
    }
}

/// Whether [`bucket`]`(v)` is `hist`'s bucket of `v`: from its lowest value equivalent to `v`
/// to the last value before the next one's (hdrhistogram's highest equivalent value is one
/// short of `u64::MAX` in the top bucket).
fn same_bucket(hist: &Histogram<u64>, v: u64) -> bool {
    let (_, lo, hi) = bucket(v);
    hist.lowest_equivalent(v) == lo
        && hist.lowest_equivalent(hi) == lo
        && (hi == u64::MAX || hist.lowest_equivalent(hi + 1) == hi + 1)
}

/// `v`'s bucket in a histogram of three significant digits whose lowest discernible value is
/// 1: `(its index, its lowest value, its highest value)`, the index being hdrhistogram's index
/// of its count. The values below 2048 are a bucket each, then come 1024 buckets per power of
/// two, each `2^shift` values wide.
#[inline]
fn bucket(v: u64) -> (u64, u64, u64) {
    let shift = 53 - (v | 2047).leading_zeros();
    let q = v >> shift;
    // (The top bucket's end, 2^64, wraps to 0.)
    let hi = ((q + 1) << shift).wrapping_sub(1);
    ((u64::from(shift) << 10) + q, q << shift, hi)
}

/// The lowest value of the bucket numbered `i` ([`bucket`]).
fn bucket_lowest(i: u64) -> u64 {
    match i {
        0..2048 => i,
        _ => {
            let shift = (i >> 10) - 1;
            (i - (shift << 10)) << shift
        }
    }
}

/// The binary places kept of a value added as a float (see `Distribution::sum_fraction`).
const FRACTION_BITS: i32 = 32;

/// `x` (≥ 0) in units of 2^−[`FRACTION_BITS`]: `x · 2^32` is exact in binary floating point,
/// and so is its rounding to an integer, `(x · 2^32).round() as u128` — below 2^52 that of
/// [`round_to_u64`], above it the value itself (every double from 2^52 on is an integer),
/// converted through `i64` below 2^63.
fn in_fraction_units(x: f64) -> u128 {
    let y = x * f64::from(2u32).powi(FRACTION_BITS);
    if y < TWO_52 {
        u128::from(round_below_2_52(y))
    } else if y < TWO_63 {
        u128::from(y as i64 as u64)
    } else {
        y as u128
    }
}

/// A value added as a float ([`Distribution::add`]), converted once for the distributions it
/// goes to: its rounding for the histogram and its exact share of the mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    rounded: u64,
    units: u128,
}

impl Fraction {
    /// The value `x` in base units (negative counts as 0).
    pub fn new(x: f64) -> Self {
        let x = x.max(0.0);
        Fraction {
            rounded: round_to_u64(x),
            units: in_fraction_units(x),
        }
    }

    /// The quotient `a as f64 / f64::from(b)` (`b > 0`) in base units: the same as
    /// [`Fraction::new`] of it, which is never negative. (Below 2^63, `a` converts to a double
    /// through `i64`, in one instruction rather than six.)
    #[inline]
    pub fn quotient(a: u64, b: u32) -> Self {
        /// `a as f64`, out of line (else it is computed on both paths).
        #[cold]
        #[inline(never)]
        fn wide(a: u64) -> f64 {
            a as f64
        }
        let a = match i64::try_from(a) {
            Ok(a) => a as f64,
            Err(_) => wide(a),
        };
        let x = a / f64::from(b);
        Fraction {
            rounded: round_to_u64(x),
            units: in_fraction_units(x),
        }
    }
}

/// Every integer up to this one is a double.
const EXACT_F64: u64 = 1 << f64::MANTISSA_DIGITS;

/// Mean and percentiles, the `Stats` object of the summary contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Mean (exact).
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Values summarised.
    pub count: u64,
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::with_divisor(1.0)
    }
}

impl Distribution {
    /// Values recorded in nanoseconds, reported in milliseconds.
    pub fn nanos_as_ms() -> Self {
        Distribution::with_divisor(1e6)
    }

    /// Values recorded and reported in the same unit (tokens).
    pub fn plain() -> Self {
        Distribution::with_divisor(1.0)
    }

    fn with_divisor(divisor: f64) -> Self {
        Distribution {
            hist: None,
            divisor,
            count: 0,
            sum_exact: 0,
            sum_fraction: 0,
            held: Held::default(),
        }
    }

    /// Add one value in base units (rounded to an integer for the percentiles; the mean uses it
    /// to 2^−32 of a unit). Negative values count as 0.
    pub fn add(&mut self, x: f64) {
        self.add_fraction(Fraction::new(x));
    }

    /// Add one value converted already ([`Distribution::add`]).
    pub fn add_fraction(&mut self, x: Fraction) {
        self.held.hold_one(bucket(x.rounded).0);
        self.count += 1;
        self.sum_fraction += x.units;
    }

    /// Add the integer value `v` (base units) once: the same as [`Distribution::add`] with
    /// `v as f64`, whose rounding is then the identity.
    #[inline]
    pub fn add_int(&mut self, v: u64) {
        /// `v as f64 as u64`, out of line (else it is computed on both paths).
        #[cold]
        #[inline(never)]
        fn rounded(v: u64) -> u64 {
            v as f64 as u64
        }
        // `v as f64` is integral, so it is its own rounding (`add` would record
        // `x.round() as u64`), and up to 2^53 it is `v` exactly.
        let r = if v <= EXACT_F64 { v } else { rounded(v) };
        self.held.hold_one(bucket(r).0);
        self.count += 1;
        self.sum_exact += u128::from(v);
    }

    /// [`Distribution::add_int`] for values that are mostly 0 (waits): a 0 is counted apart,
    /// without finding its bucket.
    #[inline]
    pub fn add_int_mostly_zero(&mut self, v: u64) {
        if v == 0 {
            self.held.zeros += 1;
            self.count += 1;
        } else {
            self.add_int(v);
        }
    }

    /// Put the counts held back into the histogram.
    pub fn flush(&mut self) {
        if !self.held.is_empty() {
            std::mem::take(&mut self.held).drain(&mut self.hist);
        }
    }

    /// Whether the histogram is made or counts are held back for it: if not, it is empty.
    fn has_histogram(&self) -> bool {
        self.hist.is_some() || !self.held.is_empty()
    }

    /// The histogram with the counts held back in it.
    fn histogram(&self) -> Cow<'_, Histogram<u64>> {
        if self.held.is_empty() {
            match &self.hist {
                Some(hist) => Cow::Borrowed(hist),
                None => Cow::Owned(empty_histogram()),
            }
        } else {
            let mut hist = self.hist.clone();
            self.held.clone().drain(&mut hist);
            Cow::Owned(hist.expect("invariant: draining counts makes the histogram"))
        }
    }

    /// The histogram, made empty if it is not yet (for a merge or a subtraction: as if it had
    /// been made with the distribution).
    fn histogram_mut(&mut self) -> &mut Histogram<u64> {
        self.hist.get_or_insert_with(empty_histogram)
    }

    /// Add `other`'s values to this distribution's: its counts, exact sums and histogram (the
    /// mean and percentiles are those of adding each value here).
    pub fn merge(&mut self, other: &Distribution) {
        self.merge_histogram(other);
        self.count += other.count;
        self.sum_exact += other.sum_exact;
        self.sum_fraction += other.sum_fraction;
    }

    /// Add `other`'s histogram counts to this one's (its count and mean are not touched). The
    /// per-bucket counts are exact, so the percentiles are those of recording each value here.
    fn merge_histogram(&mut self, other: &Distribution) {
        self.flush();
        // (Adding an empty histogram changes nothing.)
        if other.has_histogram() {
            self.histogram_mut()
                .add(&*other.histogram())
                .expect("invariant: a histogram of the same precision can take another's counts");
        }
    }

    /// Take away `part`, a distribution of some of the values added here (the same values, each
    /// added the same way): what is left is exactly the distribution of the others — counts per
    /// bucket, count and sums are all exact.
    pub fn subtract(&mut self, part: &Distribution) {
        self.flush();
        // (Taking away an empty histogram changes nothing.)
        if part.has_histogram() {
            self.histogram_mut()
                .subtract(&*part.histogram())
                .expect("invariant: a part's values were all added here");
        }
        self.count -= part.count;
        self.sum_exact -= part.sum_exact;
        self.sum_fraction -= part.sum_fraction;
    }

    /// Add the integer value `v` (base units) `n` times. Its share of the mean is summed in
    /// integers, so the result does not depend on how the same values are grouped.
    pub fn add_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.record_run(v, n);
        self.count += n;
        self.sum_exact += u128::from(v) * u128::from(n);
    }

    /// Add each `(v, n)` as [`Distribution::add_n`] does, recording runs of values the histogram
    /// cannot tell apart as one (the result is the same, with fewer histogram updates: the
    /// histogram keeps a count per bucket, whatever its size when a value comes). Returns the
    /// count and the exact sum added.
    pub fn add_grouped(&mut self, values: impl IntoIterator<Item = (u64, u64)>) -> (u64, u128) {
        let mut values = values.into_iter();
        let Some((v, n)) = values.next() else {
            return (0, 0);
        };
        // The current run's count and the values the histogram cannot tell from its first (the
        // bucket's bounds, so that each value costs two comparisons); the totals added.
        let ((mut i, mut lo, mut hi), mut m) = (bucket(v), n);
        let (mut count, mut sum) = (n, u128::from(v) * u128::from(n));
        for (v, n) in values {
            count += n;
            sum += u128::from(v) * u128::from(n);
            if lo <= v && v <= hi {
                m += n;
            } else {
                self.record_index(i, m);
                ((i, lo, hi), m) = (bucket(v), n);
            }
        }
        self.record_index(i, m);
        self.count += count;
        self.sum_exact += sum;
        (count, sum)
    }

    /// The `n` values `value(0)`, …, `value(n − 1)`, non-decreasing, as runs of values the
    /// histogram cannot tell apart, each `(the bucket's index, count)`, into `groups` (cleared
    /// first).
    ///
    /// Each run's end is searched from a guess, the values' mean rise per step so far
    /// extrapolated to the bucket's top: for values that rise about evenly (a run of decode
    /// steps whose KV grows by the batch each step) the guess is right or one off, so a run
    /// costs about two calls of `value`, the first value past it being the next run's start;
    /// a wrong guess costs a galloping search from it, O(log) calls. The runs do not depend on
    /// the guesses: any search finds the same ends of a non-decreasing sequence.
    ///
    /// With [`add_groups`](Self::add_groups), the reference that the tests hold
    /// [`add_sorted`](Self::add_sorted) to.
    #[cfg(test)]
    pub fn sorted_groups(&self, n: u64, value: impl Fn(u64) -> u64, groups: &mut Vec<(u64, u64)>) {
        groups.clear();
        sorted_runs(n, value, |i, m| groups.push((i, m)));
    }

    /// Add the `n` values `value(0)`, …, `value(n − 1)`, non-decreasing, each `weight` times,
    /// whose sum (counted once) is `sum`: the same as `sorted_groups` then `add_groups` (the
    /// reference, in test builds), each run of a bucket held back as it is
    /// found, without a list of the runs.
    pub fn add_sorted(&mut self, n: u64, value: impl Fn(u64) -> u64, weight: u64, sum: u128) {
        if weight == 0 {
            return;
        }
        if n > 0 {
            let held = &mut self.held;
            sorted_runs(n, value, |i, m| held.hold(i, m * weight));
        }
        self.count += n * weight;
        self.sum_exact += sum * u128::from(weight);
    }

    /// Add the gaps `d_j + add` of the steps `j` in `from..to` of `line` (step `j` lasting
    /// `d_j` ns), each `weight` times, whose sum is `sum`: the same as adding each with
    /// [`Distribution::add_n`], with one count per bucket the gaps pass through — the steps of
    /// a bucket are those from its first up to its top, counted with a division
    /// ([`FloorLine::runs`]). `false` (and nothing added) when the line's steps get shorter.
    pub fn add_line(
        &mut self,
        line: &FloorLine,
        (from, to): (u64, u64),
        add: u64,
        (weight, sum): (u64, u128),
    ) -> bool {
        // A step of d ns is in the bucket of d + add, which holds the gaps up to its top.
        let class = |d: u64| {
            let (index, _, hi) = bucket(d + add);
            (index, hi - add)
        };
        let held = &mut self.held;
        let mut steps = 0;
        let added = line.runs((from, to), class, |i, m| {
            steps += m;
            held.hold(i, m * weight);
        });
        if added {
            self.count += steps * weight;
            self.sum_exact += sum * u128::from(weight);
        }
        added
    }

    /// Add the values of `groups` ([`Distribution::sorted_groups`]: the values of a bucket,
    /// each `(the bucket's index, count)`), each `weight` times, whose sum is `sum` — the
    /// same as adding each value with [`Distribution::add_n`], with one histogram update per
    /// bucket. The reference of [`add_sorted`](Self::add_sorted), in tests.
    #[cfg(test)]
    pub fn add_groups(&mut self, groups: &[(u64, u64)], weight: u64, sum: u128) {
        if weight == 0 {
            return;
        }
        for &(i, m) in groups {
            self.count += m * weight;
            self.record_index(i, m * weight);
        }
        self.sum_exact += sum * u128::from(weight);
    }

    /// `n` values equivalent to `v` into the histogram only.
    #[inline(always)]
    fn record_run(&mut self, v: u64, n: u64) {
        self.record_index(bucket(v).0, n);
    }

    /// `n` values of the bucket numbered `i` into the histogram only: held back
    /// ([`Held::hold`]).
    #[inline(always)]
    fn record_index(&mut self, i: u64, n: u64) {
        self.held.hold(i, n);
    }

    /// Whether [`bucket`]`(v)` is the histogram's bucket of `v` ([`same_bucket`]).
    #[cfg(test)]
    fn same_bucket(&self, v: u64) -> bool {
        same_bucket(&self.histogram(), v)
    }

    /// [`Distribution::add`] with the value recorded in the histogram at once (nothing held
    /// back): the reference.
    #[cfg(test)]
    pub(crate) fn add_at_once(&mut self, x: f64) {
        let x = x.max(0.0);
        let v = round_to_u64(x);
        let hist = self.histogram_mut();
        if hist.record(v).is_err() {
            hist.saturating_record(v);
        }
        self.count += 1;
        self.sum_fraction += in_fraction_units(x);
    }

    /// The histogram's count in each bucket that has one: `(its lowest value, count)`.
    #[cfg(test)]
    pub(crate) fn bucket_counts(&self) -> Vec<(u64, u64)> {
        let h = self.histogram();
        let buckets = h.iter_recorded();
        buckets
            .map(|v| {
                (
                    h.lowest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
            .collect()
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The mean in display units (0 when empty): the exact sum, rounded once, over the count.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let scale = f64::from(2u32).powi(FRACTION_BITS);
        let exact_units = (self.sum_exact.checked_mul(1 << FRACTION_BITS))
            .and_then(|units| units.checked_add(self.sum_fraction));
        let sum = match exact_units {
            // Integers only, or the whole sum in 2^−32 units: rounded once.
            _ if self.sum_fraction == 0 => self.sum_exact as f64,
            Some(units) => units as f64 / scale,
            // Past 2^128 units (never in a run: 2^96 base units), two roundings.
            None => self.sum_exact as f64 + self.sum_fraction as f64 / scale,
        };
        sum / self.count as f64 / self.divisor
    }

    /// The value at quantile `q` in display units: the smallest value with at least `q` of the
    /// values at or below it, within 0.1 %.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.histogram().value_at_quantile(q) as f64 / self.divisor
    }

    /// The values at the quantiles `qs` (non-decreasing) in display units, each that of
    /// [`Distribution::quantile`]: found in one pass over the histogram's counts
    /// (`value_at_quantiles`) rather than one per quantile.
    fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [f64; N] {
        let mut out = [0.0; N];
        if self.count > 0 {
            let hist = self.histogram();
            for (o, v) in out.iter_mut().zip(hist.value_at_quantiles(qs)) {
                *o = v as f64 / self.divisor;
            }
        }
        out
    }

    /// Mean and p50/p90/p99 (all 0 when empty).
    pub fn stats(&self) -> Stats {
        let [p50, p90, p99] = self.quantiles([0.50, 0.90, 0.99]);
        Stats {
            mean: self.mean(),
            p50,
            p90,
            p99,
            count: self.count,
        }
    }

    /// The CDF as at most `max_points` `(value, cumulative fraction)` pairs, in increasing order
    /// (for plots).
    pub fn cdf_points(&self, max_points: usize) -> Vec<(f64, f64)> {
        if self.count == 0 || max_points < 2 {
            return Vec::new();
        }
        let k = max_points.min(self.count as usize).max(2);
        let q = |i: usize| i as f64 / (k - 1) as f64;
        // (One pass over the counts for all the quantiles, which rise.)
        let hist = self.histogram();
        let values = hist.value_at_quantiles((0..k).map(q));
        values
            .enumerate()
            .map(|(i, v)| (v as f64 / self.divisor, q(i)))
            .collect()
    }
}

/// 2^63: below it, a double converts to `i64` in one instruction, exactly if it is an integer.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// `x.round() as u64` without a libm call on the baseline x86-64 target: below 2^52 by
/// [`round_below_2_52`]; from 2^52 on every double is an integer, below 2^63 one conversion
/// instruction's; the others are negative or NaN (0 either way) or past `u64`'s range, which
/// the conversion takes as `round` would leave them.
pub(super) fn round_to_u64(x: f64) -> u64 {
    if (0.0..TWO_52).contains(&x) {
        round_below_2_52(x)
    } else if (TWO_52..TWO_63).contains(&x) {
        x as i64 as u64
    } else {
        x as u64
    }
}

/// The runs of `Distribution::sorted_groups` (none when `n = 0`), each `(the bucket's index,
/// count)` handed to `emit` in order.
#[inline(always)]
fn sorted_runs(n: u64, value: impl Fn(u64) -> u64, mut emit: impl FnMut(u64, u64)) {
    if n == 0 {
        return;
    }
    let first = value(0);
    // The second value, for the first guess (and then as a probe of the first run).
    let second = if n > 1 { value(1) } else { first };
    let (mut i, mut v) = (0, first);
    // The mean rise per step so far is `rise / steps`.
    let (mut rise, mut steps) = (second - first, 1);
    loop {
        let (index, _, hi) = bucket(v);
        let left = n - i;
        let guess = match (hi - v).checked_mul(steps) {
            Some(x) if rise > 0 => (x / rise + 1).min(left),
            _ => left,
        };
        let at = |j: u64| {
            if i == 0 && j == 1 {
                second
            } else {
                value(i + j)
            }
        };
        // The guess is right when the value at it is past the bucket and the one before is
        // in it (or is the run's first); for the rest of the run, when its last value is in.
        let (m, next) = if guess < left {
            let x = at(guess);
            if x <= hi {
                run_end(&at, hi, guess, left, None, true)
            } else if guess == 1 {
                (1, Some(x))
            } else {
                let y = at(guess - 1);
                if y <= hi {
                    (guess, Some(x))
                } else {
                    run_end(&at, hi, 0, guess - 1, Some(y), false)
                }
            }
        } else {
            let y = at(left - 1);
            if y <= hi || left == 1 {
                (left, None)
            } else {
                run_end(&at, hi, 0, left - 1, Some(y), false)
            }
        };
        emit(index, m);
        i += m;
        match next {
            Some(x) if i < n => v = x,
            _ => break,
        }
        (rise, steps) = (v - first, i);
    }
}

/// The end of a run of values at most `hi` among the non-decreasing `at(0)`, …: its length
/// `bad` and the first value past it, `at(bad)` (`None` at the end, `left`), given
/// `at(ok) ≤ hi` and `at(bad) = bad_v > hi` (or `bad = left`); found by galloping from the
/// guess's side (`up`: from `ok`, else from `bad`), then bisecting once bracketed.
fn run_end(
    at: &impl Fn(u64) -> u64,
    hi: u64,
    mut ok: u64,
    mut bad: u64,
    mut bad_v: Option<u64>,
    up: bool,
) -> (u64, Option<u64>) {
    let (mut step, mut bisect) = (1, false);
    while ok + 1 < bad {
        let j = if bisect {
            ok + (bad - ok) / 2
        } else if up {
            (ok + step).min(bad - 1)
        } else {
            bad - step.min(bad - ok - 1)
        };
        let x = at(j);
        if x <= hi {
            ok = j;
            bisect |= !up;
        } else {
            (bad, bad_v) = (j, Some(x));
            bisect |= up;
        }
        step = step.saturating_mul(2);
    }
    (bad, bad_v)
}

#[cfg(test)]
mod tests;
