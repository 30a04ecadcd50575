//! The figure of `servesim compare`: the measured and the simulated CDFs of TTFT, TPOT and
//! E2E, one panel each, in seconds (a log axis where the spread is wide, as the run's latency
//! figure).

use plotters::prelude::*;

use crate::compare::LatencyCdfs;

use super::run::{latency_axis, Draw, Panel};
use super::style::{heading, BLUE, BOTTOM_FIRST, VERMILLION};
use super::{render, Area, Drawn, Figure, Format, PlotError};

/// The title of the [`compare_cdf`] figure.
pub const COMPARE_TITLE: &str = "Measured vs. servesim: TTFT, TPOT and E2E";

/// The CDFs of TTFT, TPOT and E2E of the measured and the simulated requests (computed by
/// [`LatencyCdfs::of`]).
pub fn compare_cdf(
    measured: &LatencyCdfs,
    simulated: &LatencyCdfs,
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&Compare(measured, simulated), fmt)
}

struct Compare<'a>(&'a LatencyCdfs, &'a LatencyCdfs);

/// A panel's axis description and its curve.
type Metric = (&'static str, fn(&LatencyCdfs) -> &[(f64, f64)]);

const METRICS: [Metric; 3] = [
    ("TTFT (s)", |c| &c.ttft),
    ("TPOT (s)", |c| &c.tpot),
    ("E2E (s)", |c| &c.e2e),
];

impl Figure for Compare<'_> {
    const NAME: &'static str = "compare";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let subtitle = format!(
            "{} measured requests, {} simulated; empirical CDFs, as bench_serving defines each latency.",
            self.0.requests,
            self.1.requests
        );
        let body = heading(root, COMPARE_TITLE, &subtitle)?;
        let panels = body.split_evenly((1, 3));
        for ((desc, curve), area) in METRICS.iter().zip(&panels) {
            let (m, s) = (curve(self.0), curve(self.1));
            let (x, _) = latency_axis(&[m, s], "s");
            let mut p = Panel(
                "fraction of requests (CDF)",
                Some(1.04),
                &BOTTOM_FIRST,
                vec![],
            );
            for (name, c, colour) in [("measured", m, BLUE), ("servesim", s, VERMILLION)] {
                if let Some(&(first, _)) = c.first() {
                    let curve = std::iter::once((first, 0.0))
                        .chain(c.iter().copied())
                        .collect();
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
    use crate::compare::Sample;

    #[test]
    fn the_figure_draws_in_both_formats() {
        let s = |t: f64| Sample {
            input_tokens: 10,
            output_tokens: 3,
            ttft_s: t,
            itls_s: vec![0.01, 0.01],
            e2e_s: t + 0.02,
            start_s: None,
        };
        let a = LatencyCdfs::of(&[s(0.1), s(0.2)]);
        let b = LatencyCdfs::of(&[s(0.15)]);
        for fmt in Format::ALL {
            assert!(!compare_cdf(&a, &b, fmt).unwrap().is_empty());
        }
    }
}
