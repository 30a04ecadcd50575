//! The figure of `servesim compare`: the measured and the simulated CDFs of TTFT, TPOT and
//! E2E, one panel each, in seconds (a log axis where the spread is wide, as the run's latency
//! figure).

use plotters::prelude::*;

use crate::compare::LatencyCdfs;

use super::run::cdf_panel;
use super::style::{heading, BLUE, VERMILLION};
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
        let (m, s) = (self.0.requests, self.1.requests);
        let how = "empirical CDFs, as bench_serving defines each latency.";
        let subtitle = format!("{m} measured requests, {s} simulated; {how}");
        let body = heading(root, COMPARE_TITLE, &subtitle)?;
        for ((desc, curve), area) in METRICS.iter().zip(&body.split_evenly((1, 3))) {
            let cdf = |(name, c, colour): (&str, &LatencyCdfs, _)| {
                (name.to_string(), curve(c).to_vec(), colour, vec![])
            };
            let curves = [("measured", self.0, BLUE), ("servesim", self.1, VERMILLION)];
            let descs = ("fraction of requests (CDF)", Some(*desc));
            cdf_panel(area, descs, curves.map(cdf).to_vec(), "s", raster)?;
        }
        Ok(())
    }
}
