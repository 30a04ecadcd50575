//! Token-length distributions.
//!
//! Each distribution draws a real number, which is rounded to the nearest integer and clamped to
//! `[min, max]` (with `min ≥ 1`): token counts are integers of at least one. `normal` is
//! truncated rather than clamped: draws outside `[min, max]` are redrawn (up to 1000 times, then
//! clamped), as the scenario contract says.

use std::sync::Arc;

use rand::RngExt;
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Normal};

use crate::rng::Stream;

/// The largest token count servesim accepts for one request (10 million).
pub const MAX_TOKENS_PER_REQUEST: u32 = 10_000_000;

/// A distribution of token counts with its clamps.
#[derive(Clone, Debug)]
pub struct LengthDist {
    /// The shape.
    pub shape: Shape,
    /// Smallest value returned (at least 1).
    pub min: u32,
    /// Largest value returned.
    pub max: u32,
}

/// The shape of a length distribution, parameterised as the scenario writes it.
#[derive(Clone, Debug)]
pub enum Shape {
    /// Always `value`.
    Constant {
        /// The value.
        value: f64,
    },
    /// Integers uniform on `[min, max]` inclusive (the distribution's own bounds are the clamps).
    Uniform,
    /// Normal with this mean and standard deviation, truncated to `[min, max]`.
    Normal {
        /// Mean of the untruncated normal.
        mean: f64,
        /// Standard deviation of the untruncated normal.
        std: f64,
    },
    /// Log-normal whose *result* has this mean and coefficient of variation.
    LogNormal {
        /// Mean of the result.
        mean: f64,
        /// Coefficient of variation (std / mean) of the result.
        cv: f64,
    },
    /// Gamma with this mean and coefficient of variation (shape = 1/cv², scale = mean·cv²).
    Gamma {
        /// Mean.
        mean: f64,
        /// Coefficient of variation.
        cv: f64,
    },
    /// Exponential with this mean.
    Exponential {
        /// Mean.
        mean: f64,
    },
    /// Resample uniformly from these values (from the scenario or a CSV column).
    Empirical {
        /// The values, each ≥ 1 and finite.
        values: Arc<[f64]>,
    },
}

impl LengthDist {
    /// A constant length.
    pub fn constant(n: u32) -> Self {
        LengthDist {
            shape: Shape::Constant {
                value: f64::from(n),
            },
            min: 1,
            max: MAX_TOKENS_PER_REQUEST,
        }
    }

    /// Draw one token count.
    pub fn sample(&self, rng: &mut Stream) -> u32 {
        let x = match &self.shape {
            Shape::Constant { value } => *value,
            Shape::Uniform => return rng.random_range(self.min..=self.max),
            Shape::Normal { mean, std } => {
                let d = Normal::new(*mean, *std).expect("invariant: validated normal parameters");
                let (lo, hi) = (f64::from(self.min) - 0.5, f64::from(self.max) + 0.5);
                let mut x = d.sample(rng);
                for _ in 0..1000 {
                    if x >= lo && x < hi {
                        break;
                    }
                    x = d.sample(rng);
                }
                x
            }
            Shape::LogNormal { mean, cv } => {
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                LogNormal::new(mu, sigma2.sqrt())
                    .expect("invariant: validated lognormal parameters")
                    .sample(rng)
            }
            Shape::Gamma { mean, cv } => {
                let shape = 1.0 / (cv * cv);
                Gamma::new(shape, mean / shape)
                    .expect("invariant: validated gamma parameters")
                    .sample(rng)
            }
            Shape::Exponential { mean } => Exp::new(1.0 / mean)
                .expect("invariant: validated exponential mean")
                .sample(rng),
            Shape::Empirical { values } => values[rng.random_range(0..values.len())],
        };
        self.clamp(x)
    }

    fn clamp(&self, x: f64) -> u32 {
        let r = x.round();
        if r.is_nan() || r < f64::from(self.min) {
            self.min
        } else if r > f64::from(self.max) {
            self.max
        } else {
            r as u32
        }
    }

    /// The smallest count the distribution can return.
    pub fn smallest(&self) -> u32 {
        match &self.shape {
            Shape::Constant { value } => self.clamp(*value),
            Shape::Empirical { values } => {
                self.clamp(values.iter().copied().fold(f64::INFINITY, f64::min))
            }
            _ => self.min,
        }
    }

    /// The distribution's nominal mean before rounding and clamping (for reports).
    pub fn nominal_mean(&self) -> f64 {
        match &self.shape {
            Shape::Constant { value } => *value,
            Shape::Uniform => (f64::from(self.min) + f64::from(self.max)) / 2.0,
            Shape::Normal { mean, .. }
            | Shape::LogNormal { mean, .. }
            | Shape::Gamma { mean, .. }
            | Shape::Exponential { mean } => *mean,
            Shape::Empirical { values } => values.iter().sum::<f64>() / values.len() as f64,
        }
    }

    /// A one-line description, e.g. `lognormal(mean 4116, cv 0.45) in [1, 16384]`.
    pub fn describe(&self) -> String {
        let body = match &self.shape {
            Shape::Constant { value } => format!("constant {value}"),
            Shape::Uniform => "uniform".to_string(),
            Shape::Normal { mean, std } => format!("normal(mean {mean}, std {std})"),
            Shape::LogNormal { mean, cv } => format!("lognormal(mean {mean}, cv {cv})"),
            Shape::Gamma { mean, cv } => format!("gamma(mean {mean}, cv {cv})"),
            Shape::Exponential { mean } => format!("exponential(mean {mean})"),
            Shape::Empirical { values } => format!("empirical({} values)", values.len()),
        };
        format!("{body} in [{}, {}]", self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Seeds, StreamName};

    fn draws(d: &LengthDist, n: usize) -> Vec<u32> {
        let mut rng = Seeds::new(3).stream(StreamName::OutputTokens);
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    fn mean_cv(xs: &[u32]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let v = xs.iter().map(|&x| (f64::from(x) - m).powi(2)).sum::<f64>() / (n - 1.0);
        (m, v.sqrt() / m)
    }

    #[test]
    fn lognormal_is_parameterised_by_the_mean_and_cv_of_the_result() {
        let d = LengthDist {
            shape: Shape::LogNormal {
                mean: 4116.0,
                cv: 0.45,
            },
            min: 1,
            max: MAX_TOKENS_PER_REQUEST,
        };
        let (m, cv) = mean_cv(&draws(&d, 200_000));
        assert!((m / 4116.0 - 1.0).abs() < 0.01, "mean {m}");
        assert!((cv / 0.45 - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn gamma_and_exponential_have_the_requested_mean() {
        let g = LengthDist {
            shape: Shape::Gamma {
                mean: 500.0,
                cv: 2.0,
            },
            min: 1,
            max: MAX_TOKENS_PER_REQUEST,
        };
        let (m, cv) = mean_cv(&draws(&g, 200_000));
        assert!((m / 500.0 - 1.0).abs() < 0.03, "mean {m}");
        assert!((cv / 2.0 - 1.0).abs() < 0.05, "cv {cv}");
        let e = LengthDist {
            shape: Shape::Exponential { mean: 300.0 },
            min: 1,
            max: MAX_TOKENS_PER_REQUEST,
        };
        let (m, cv) = mean_cv(&draws(&e, 200_000));
        assert!((m / 300.0 - 1.0).abs() < 0.02, "mean {m}");
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
    }

    #[test]
    fn clamps_hold_and_counts_are_at_least_one() {
        let d = LengthDist {
            shape: Shape::Normal {
                mean: 0.0,
                std: 100.0,
            },
            min: 1,
            max: 50,
        };
        assert!(draws(&d, 10_000).iter().all(|&x| (1..=50).contains(&x)));
        let c = LengthDist {
            shape: Shape::Exponential { mean: 1000.0 },
            min: 10,
            max: 20,
        };
        let xs = draws(&c, 10_000);
        assert!(xs.iter().all(|&x| (10..=20).contains(&x)));
        assert!(xs.contains(&10) && xs.contains(&20));
    }

    #[test]
    fn uniform_is_inclusive_of_both_bounds() {
        let d = LengthDist {
            shape: Shape::Uniform,
            min: 3,
            max: 5,
        };
        let xs = draws(&d, 1000);
        for v in 3..=5 {
            assert!(xs.contains(&v));
        }
        assert!(xs.iter().all(|&x| (3..=5).contains(&x)));
    }

    #[test]
    fn empirical_resamples_the_given_values() {
        let d = LengthDist {
            shape: Shape::Empirical {
                values: vec![7.0, 11.0].into(),
            },
            min: 1,
            max: MAX_TOKENS_PER_REQUEST,
        };
        let xs = draws(&d, 1000);
        assert!(xs.iter().all(|&x| x == 7 || x == 11));
        assert!(xs.contains(&7) && xs.contains(&11));
    }
}
