//! Independent replications: one scenario run under several seeds, and a Student-t interval
//! across their steady rates. The runs share nothing, so their rates are independent draws —
//! no assumption about how long the completions stay correlated within a run, which is what
//! the batch-means interval of a single run must make.

use serde::Serialize;

use super::window::t975;

/// The steady rates of runs that differ only in their seed, and the interval across them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replications {
    /// The seeds run, in order (the scenario's own first).
    pub seeds: Vec<u64>,
    /// Each run's steady rate, req/s (`None`: that run has no steady state).
    pub req_per_s: Vec<Option<f64>>,
    /// Runs with a steady state: the interval is over them.
    pub steady_runs: u64,
    /// The mean of their steady rates.
    pub mean_req_per_s: Option<f64>,
    /// The standard deviation across them.
    pub sd_req_per_s: Option<f64>,
    /// The mean's 95 % interval, `mean ± t(0.975, n − 1) · sd / √n` (two runs at least).
    pub req_per_s_ci95: Option<[f64; 2]>,
}

/// The replications of `seeds` whose steady rates (or `None`) are `req_per_s`, in order.
pub fn across(seeds: Vec<u64>, req_per_s: Vec<Option<f64>>) -> Replications {
    let rates: Vec<f64> = req_per_s.iter().flatten().copied().collect();
    let n = rates.len();
    let mean = (n > 0).then(|| rates.iter().sum::<f64>() / n as f64);
    let sd = mean.filter(|_| n > 1).map(|m| {
        let ss: f64 = rates.iter().map(|x| (x - m) * (x - m)).sum();
        (ss / (n - 1) as f64).sqrt()
    });
    let ci = mean.zip(sd).map(|(m, sd)| {
        let half = t975(n - 1) * sd / (n as f64).sqrt();
        [m - half, m + half]
    });
    Replications {
        seeds,
        req_per_s,
        steady_runs: n as u64,
        mean_req_per_s: mean,
        sd_req_per_s: sd,
        req_per_s_ci95: ci,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_students_t_over_the_runs_with_a_steady_state() {
        // 1, 2, 3: mean 2, sd 1, t(0.975, 2) = 4.303, half-width 4.303 / √3.
        let r = across(
            vec![7, 8, 9, 10],
            vec![Some(1.0), None, Some(2.0), Some(3.0)],
        );
        assert_eq!(r.steady_runs, 3);
        assert_eq!(r.mean_req_per_s, Some(2.0));
        assert_eq!(r.sd_req_per_s, Some(1.0));
        let [lo, hi] = r.req_per_s_ci95.unwrap();
        let half = 4.303 / 3f64.sqrt();
        assert!((lo - (2.0 - half)).abs() < 1e-12 && (hi - (2.0 + half)).abs() < 1e-12);
        // One run with a steady state has a mean but no interval; none has neither.
        let one = across(vec![1, 2], vec![None, Some(5.0)]);
        assert_eq!((one.mean_req_per_s, one.req_per_s_ci95), (Some(5.0), None));
        let none = across(vec![1], vec![None]);
        assert_eq!((none.mean_req_per_s, none.sd_req_per_s), (None, None));
    }
}
