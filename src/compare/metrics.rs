//! bench_serving's metrics, computed from per-request samples exactly as
//! `sglang.benchmark.serving.calculate_metrics` (and `vllm bench serve`) compute them:
//!
//! * throughputs are over the benchmark's duration: completed / duration, output tokens /
//!   duration, (input + output tokens) / duration;
//! * TTFT and E2E: one value per successful request;
//! * TPOT: (E2E − TTFT) / (output − 1), only for requests with more than one output token;
//! * ITL: every inter-token gap of every request, pooled;
//! * mean, median, std (numpy's, population) and percentiles interpolated linearly (numpy's
//!   default), in milliseconds; an empty list counts as `[0]`, as `np.mean(x or 0)` does.

use serde::Serialize;

/// One successful request as a benchmark client sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Output tokens.
    pub output_tokens: u32,
    /// Time to the first token (s).
    pub ttft_s: f64,
    /// Gaps between consecutive tokens (s).
    pub itls_s: Vec<f64>,
    /// Time to the last token (s).
    pub e2e_s: f64,
    /// When it was sent (s from the start), if known.
    pub start_s: Option<f64>,
}

impl Sample {
    /// bench_serving's TPOT (s): (E2E − TTFT) / (output − 1), for more than one output token.
    pub fn tpot_s(&self) -> Option<f64> {
        (self.output_tokens > 1)
            .then(|| (self.e2e_s - self.ttft_s) / f64::from(self.output_tokens - 1))
    }
}

/// The empirical CDFs of TTFT, TPOT and E2E (seconds) of a set of samples, each at most
/// [`CDF_POINTS`] points `(value, fraction of requests)` ending at 1: what `compare`'s figure
/// draws.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyCdfs {
    /// How many requests.
    pub requests: usize,
    /// TTFT.
    pub ttft: Vec<(f64, f64)>,
    /// TPOT, of requests with more than one output token.
    pub tpot: Vec<(f64, f64)>,
    /// E2E.
    pub e2e: Vec<(f64, f64)>,
}

/// The most points of a CDF in [`LatencyCdfs`].
pub const CDF_POINTS: usize = 500;

impl LatencyCdfs {
    /// The CDFs of `samples`.
    pub fn of(samples: &[Sample]) -> LatencyCdfs {
        LatencyCdfs {
            requests: samples.len(),
            ttft: cdf(samples.iter().map(|s| s.ttft_s).collect()),
            tpot: cdf(samples.iter().filter_map(Sample::tpot_s).collect()),
            e2e: cdf(samples.iter().map(|s| s.e2e_s).collect()),
        }
    }
}

/// Up to [`CDF_POINTS`] points of the empirical CDF of `values` (finite ones), the last at 1.
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (values[i], (i + 1) as f64 / n as f64))
        .collect();
    if let (Some(&last), Some(p)) = (values.last(), pts.last()) {
        if p.1 < 1.0 {
            pts.push((last, 1.0));
        }
    }
    pts
}

/// Mean, median, std and percentiles of one latency, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Standard deviation (population, as numpy).
    pub std: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// numpy's `percentile(x, q)` with linear interpolation, of sorted `x`.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * q / 100.0;
    let (lo, frac) = (pos.floor() as usize, pos.fract());
    match sorted.get(lo + 1) {
        Some(hi) => sorted[lo] + (hi - sorted[lo]) * frac,
        None => sorted[lo],
    }
}

impl Spread {
    /// Of values in seconds, reported in milliseconds; `[0]` when empty.
    pub fn of_seconds(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().map(|s| s * 1000.0).collect();
        if v.is_empty() {
            v.push(0.0);
        }
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        Spread {
            mean,
            median: percentile(&v, 50.0),
            std: var.sqrt(),
            p90: percentile(&v, 90.0),
            p95: percentile(&v, 95.0),
            p99: percentile(&v, 99.0),
        }
    }
}

/// The metrics of one benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchMetrics {
    /// Successful requests.
    pub completed: u64,
    /// Their prompt tokens.
    pub total_input_tokens: u64,
    /// Their output tokens.
    pub total_output_tokens: u64,
    /// The benchmark's duration (s).
    pub duration_s: f64,
    /// Requests per second.
    pub request_throughput: f64,
    /// Prompt tokens per second.
    pub input_throughput: f64,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Prompt and output tokens per second.
    pub total_throughput: f64,
    /// TTFT (ms).
    pub ttft: Spread,
    /// TPOT (ms).
    pub tpot: Spread,
    /// ITL (ms).
    pub itl: Spread,
    /// E2E (ms).
    pub e2e: Spread,
    /// Σ E2E / duration: the mean number of requests in flight.
    pub concurrency: f64,
    /// The most output tokens in one second (needs start times; 0 without).
    pub max_output_tokens_per_s: f64,
    /// The most requests in flight in one second (needs start times; 0 without).
    pub max_concurrent_requests: u64,
}

impl BenchMetrics {
    /// The metrics of `samples` over a benchmark of `duration_s`.
    pub fn of(samples: &[Sample], duration_s: f64) -> BenchMetrics {
        let input: u64 = samples.iter().map(|s| u64::from(s.input_tokens)).sum();
        let output: u64 = samples.iter().map(|s| u64::from(s.output_tokens)).sum();
        let n = samples.len() as u64;
        let tpots = samples.iter().filter_map(Sample::tpot_s);
        let (max_tok, max_conc) = peaks(samples);
        BenchMetrics {
            completed: n,
            total_input_tokens: input,
            total_output_tokens: output,
            duration_s,
            request_throughput: n as f64 / duration_s,
            input_throughput: input as f64 / duration_s,
            output_throughput: output as f64 / duration_s,
            total_throughput: (input + output) as f64 / duration_s,
            ttft: Spread::of_seconds(samples.iter().map(|s| s.ttft_s)),
            tpot: Spread::of_seconds(tpots),
            itl: Spread::of_seconds(samples.iter().flat_map(|s| s.itls_s.iter().copied())),
            e2e: Spread::of_seconds(samples.iter().map(|s| s.e2e_s)),
            concurrency: samples.iter().map(|s| s.e2e_s).sum::<f64>() / duration_s,
            max_output_tokens_per_s: max_tok,
            max_concurrent_requests: max_conc,
        }
    }

    /// The figures `compare` sets side by side: `(bench_serving's key, value)`.
    pub fn compared(&self) -> Vec<(&'static str, f64)> {
        let mut v = vec![
            ("request_throughput", self.request_throughput),
            ("output_throughput", self.output_throughput),
            ("total_throughput", self.total_throughput),
        ];
        for (name, s) in [
            ("ttft_ms", &self.ttft),
            ("tpot_ms", &self.tpot),
            ("itl_ms", &self.itl),
            ("e2e_latency_ms", &self.e2e),
        ] {
            let keys: [&'static str; 3] = match name {
                "ttft_ms" => ["mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms"],
                "tpot_ms" => ["mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms"],
                "itl_ms" => ["mean_itl_ms", "median_itl_ms", "p99_itl_ms"],
                _ => [
                    "mean_e2e_latency_ms",
                    "median_e2e_latency_ms",
                    "p99_e2e_latency_ms",
                ],
            };
            v.extend(keys.into_iter().zip([s.mean, s.median, s.p99]));
        }
        v
    }
}

/// bench_serving's `max_output_tokens_per_s` and `max_concurrent_requests`: tokens and
/// requests in flight counted in one-second buckets from the first send; (0, 0) without
/// start times.
fn peaks(samples: &[Sample]) -> (f64, u64) {
    let starts: Option<Vec<f64>> = samples.iter().map(|s| s.start_s).collect();
    let Some(starts) = starts.filter(|s| !s.is_empty()) else {
        return (0.0, 0);
    };
    let min = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let end = (samples.iter().zip(&starts)).fold(min, |m, (s, t)| m.max(t + s.e2e_s));
    let buckets = (end - min).ceil() as usize + 1;
    let (mut tokens, mut reqs) = (vec![0u64; buckets], vec![0u64; buckets]);
    for (s, &t) in samples.iter().zip(&starts) {
        let mut at = t + s.ttft_s;
        for gap in std::iter::once(0.0).chain(s.itls_s.iter().copied()) {
            at += gap;
            if let Some(b) = tokens.get_mut((at - min) as usize) {
                *b += 1;
            }
        }
        let (first, last) = ((t - min) as usize, (t + s.e2e_s - min) as usize);
        for r in &mut reqs[first..=last.min(buckets - 1)] {
            *r += 1;
        }
    }
    let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    (max(&tokens) as f64, max(&reqs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(out: u32, ttft_s: f64, itls_s: Vec<f64>) -> Sample {
        let e2e_s = ttft_s + itls_s.iter().sum::<f64>();
        Sample {
            input_tokens: 10,
            output_tokens: out,
            ttft_s,
            itls_s,
            e2e_s,
            start_s: Some(0.0),
        }
    }

    #[test]
    fn percentiles_interpolate_like_numpy_and_tpot_skips_single_token_requests() {
        // numpy: percentile([1, 2, 3, 4], 90) = 3.7, median 2.5, std 1.118…
        let s = Spread::of_seconds([0.004, 0.001, 0.003, 0.002]);
        assert!((s.p90 - 3.7).abs() < 1e-9 && (s.median - 2.5).abs() < 1e-9);
        assert!((s.std - 1.25f64.sqrt()).abs() < 1e-9);
        assert_eq!(Spread::of_seconds([]), Spread::default());
        let m = BenchMetrics::of(
            &[sample(3, 0.1, vec![0.02, 0.04]), sample(1, 0.3, vec![])],
            2.0,
        );
        // TPOT only of the first: (0.16 − 0.1) / 2 = 30 ms; ITL pools its two gaps.
        assert!((m.tpot.mean - 30.0).abs() < 1e-9 && m.tpot.std == 0.0);
        assert!((m.itl.mean - 30.0).abs() < 1e-9 && (m.itl.p99 - 39.8).abs() < 1e-9);
        assert!((m.ttft.mean - 200.0).abs() < 1e-9);
        assert_eq!(
            (m.completed, m.total_output_tokens, m.total_input_tokens),
            (2, 4, 20)
        );
        assert!((m.total_throughput - 12.0).abs() < 1e-12);
        assert_eq!(
            (m.max_output_tokens_per_s, m.max_concurrent_requests),
            (4.0, 2)
        );
    }

    #[test]
    fn cdfs_end_at_one_skip_single_token_tpots_and_keep_at_most_500_points() {
        let c = LatencyCdfs::of(&[sample(3, 0.2, vec![0.02, 0.04]), sample(1, 0.1, vec![])]);
        assert_eq!(c.ttft, vec![(0.1, 0.5), (0.2, 1.0)]);
        assert_eq!(c.tpot, vec![(0.03, 1.0)]);
        assert_eq!((c.requests, c.e2e.last().map(|p| p.1)), (2, Some(1.0)));
        let many: Vec<f64> = (0..1001).map(f64::from).collect();
        let pts = cdf(many);
        assert!(pts.len() <= CDF_POINTS + 1 && pts.last() == Some(&(1000.0, 1.0)));
    }
}
