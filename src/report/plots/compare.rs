//! The figure of `servesim compare`: the measured and the simulated CDFs of TTFT, TPOT and
//! E2E, one panel each, in seconds (a log axis where the spread is wide, as the run's latency
//! figure).

use plotters::prelude::*;

use crate::compare::Sample;

use super::run::{latency_axis, Draw, Panel};
use super::style::{heading, BLUE, BOTTOM_FIRST, VERMILLION};
use super::{render, Area, Drawn, Figure, Format, PlotError};

/// The title of the [`compare_cdf`] figure.
pub const COMPARE_TITLE: &str = "Measured vs. servesim: TTFT, TPOT and E2E";

/// The CDFs of TTFT, TPOT and E2E of the measured and the simulated requests.
pub fn compare_cdf(
    measured: &[Sample],
    simulated: &[Sample],
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&Compare(measured, simulated), fmt)
}

struct Compare<'a>(&'a [Sample], &'a [Sample]);

/// Up to 500 points of the empirical CDF of `values` (seconds).
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let step = n.div_ceil(500).max(1);
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

type Metric = (&'static str, fn(&Sample) -> Option<f64>);

const METRICS: [Metric; 3] = [
    ("TTFT (s)", |s| Some(s.ttft_s)),
    ("TPOT (s)", |s| {
        (s.output_tokens > 1).then(|| (s.e2e_s - s.ttft_s) / f64::from(s.output_tokens - 1))
    }),
    ("E2E (s)", |s| Some(s.e2e_s)),
];

impl Figure for Compare<'_> {
    const NAME: &'static str = "compare";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let subtitle = format!(
            "{} measured requests, {} simulated; empirical CDFs, as bench_serving defines each latency.",
            self.0.len(),
            self.1.len()
        );
        let body = heading(root, COMPARE_TITLE, &subtitle)?;
        let panels = body.split_evenly((1, 3));
        for ((desc, value), area) in METRICS.iter().zip(&panels) {
            let of = |s: &[Sample]| cdf(s.iter().filter_map(value).collect());
            let (m, s) = (of(self.0), of(self.1));
            let (x, _) = latency_axis(&[&m, &s], "s");
            let mut p = Panel(
                "fraction of requests (CDF)",
                Some(1.04),
                &BOTTOM_FIRST,
                vec![],
            );
            for (name, c, colour) in [("measured", m, BLUE), ("servesim", s, VERMILLION)] {
                if let Some(&(first, _)) = c.first() {
                    let curve = std::iter::once((first, 0.0)).chain(c).collect();
                    p.add(name, Draw::Line(curve, colour, 3));
                }
            }
            p.draw(area, &x, Some(desc), raster)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_figure_draws_in_both_formats_and_cdfs_end_at_one() {
        let s = |t: f64| Sample {
            input_tokens: 10,
            output_tokens: 3,
            ttft_s: t,
            itls_s: vec![0.01, 0.01],
            e2e_s: t + 0.02,
            start_s: None,
        };
        let (a, b) = (vec![s(0.1), s(0.2)], vec![s(0.15)]);
        for fmt in Format::ALL {
            assert!(!compare_cdf(&a, &b, fmt).unwrap().is_empty());
        }
        assert_eq!(cdf(vec![2.0, 1.0]), vec![(1.0, 0.5), (2.0, 1.0)]);
    }
}
