//! Latency and length distributions: mean and percentiles.

use serde::Serialize;

/// A collection of values with exact percentiles (linear interpolation between order
/// statistics, as numpy's default, which `sglang.bench_serving` and `vllm bench serve` use).
#[derive(Clone, Debug, Default)]
pub struct Distribution {
    values: Vec<f64>,
    sum: f64,
}

/// Mean and percentiles, the `Stats` object of the summary contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Mean.
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

impl Distribution {
    /// Add one value.
    pub fn add(&mut self, x: f64) {
        self.values.push(x);
        self.sum += x;
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.values.len() as u64
    }

    /// The mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.values.is_empty() {
            0.0
        } else {
            self.sum / self.values.len() as f64
        }
    }

    /// Mean and p50/p90/p99 (all 0 when empty).
    pub fn stats(&self) -> Stats {
        if self.values.is_empty() {
            return Stats::default();
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        Stats {
            mean: self.mean(),
            p50: quantile_sorted(&v, 0.50),
            p90: quantile_sorted(&v, 0.90),
            p99: quantile_sorted(&v, 0.99),
            count: v.len() as u64,
        }
    }

    /// The empirical CDF as at most `max_points` `(value, cumulative fraction)` pairs, in
    /// increasing order (for plots).
    pub fn cdf_points(&self, max_points: usize) -> Vec<(f64, f64)> {
        if self.values.is_empty() || max_points < 2 {
            return Vec::new();
        }
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let k = max_points.min(n);
        (0..k)
            .map(|i| {
                let q = if k == 1 {
                    1.0
                } else {
                    i as f64 / (k - 1) as f64
                };
                (quantile_sorted(&v, q), q)
            })
            .collect()
    }
}

/// Quantile `q` of sorted values by linear interpolation.
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let mut d = Distribution::default();
        for x in [1.0, 2.0, 3.0, 4.0] {
            d.add(x);
        }
        let s = d.stats();
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.p50, 2.5); // numpy.percentile([1,2,3,4], 50)
        assert!((s.p90 - 3.7).abs() < 1e-12); // numpy: 3.7
        assert!((s.p99 - 3.97).abs() < 1e-12); // numpy: 3.97
    }
}
