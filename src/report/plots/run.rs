//! Figures of one run, from the run and its analysis.
//!
//! * [`throughput`] — the client's lifetime average and windowed rate against the steady state,
//!   and the server's gen tok/s below on the same time axis: the case study in one picture.
//! * [`engine_state`] — running, queued and in-flight requests, and the KV token usage.
//! * [`latency_cdf`] — the distributions of TTFT and end-to-end latency.
//!
//! * **Time axis.** A run at least [`LOG_TIME_FACTOR`] times longer than its start-up (its
//!   first response, or the client's window if that is longer) gets a logarithmic time axis
//!   ticked in round seconds, minutes, hours and days: on a linear axis the start-up — where
//!   the lifetime average lags — would be a sliver at the left edge. Other runs get a linear
//!   axis in seconds (up to 15 min), minutes (up to 10 h) or hours.
//! * **Time series.** The run's regular series merged with the minute-by-minute points of the
//!   first 15 minutes and the observations: the same quantities at more instants.
//! * **Latency axis.** Seconds; logarithmic when the 99th percentile exceeds the 1st by more
//!   than [`LOG_LATENCY_SPREAD`] times (TTFT and E2E together), else linear from 0.
//! * **Colours.** The lifetime average is a thick vermillion line, the windowed rate a thin
//!   blue one, the steady state green with its 95 % interval shaded; the server is purple.

use plotters::prelude::*;

use crate::analysis::Analysis;
use crate::metrics::{Distribution, RunResult, Sample};

use super::axis::{human_duration, sig3, thousands, Axis, Labels};
use super::style::{
    heading, mark, Entry, Legend, Shape, Swatch, BLUE, BOTTOM_FIRST, DARK, GREEN, GREY,
    LIGHT_BLUE, ORANGE, PURPLE, RED, TOP_FIRST, VERMILLION,
};
use super::{line, panel, render, y_top, Area, Chart, DrawFailure, Figure, Format, PlotError};

/// A run at least this many times longer than its start-up gets a logarithmic time axis.
pub const LOG_TIME_FACTOR: f64 = 20.0;
/// Latencies whose p99 exceeds their p1 by more than this factor get a logarithmic axis.
pub const LOG_LATENCY_SPREAD: f64 = 20.0;

/// The title of the [`throughput`] figure.
pub const THROUGHPUT_TITLE: &str = "Throughput over time: what the client sees vs. the server";
/// The title of the [`engine_state`] figure.
pub const ENGINE_STATE_TITLE: &str = "Engine state over time: requests and KV cache";
/// The title of the [`latency_cdf`] figure.
pub const LATENCY_TITLE: &str = "Latency distributions: TTFT and end-to-end";

/// The client's lifetime average and windowed rate over time against the steady state (a
/// line over the steady window, its 95 % interval shaded), with `observe_at_s` marked (usually
/// the scenario's `run.observe_at_s`) and the moment the lifetime average gets within 5 % of
/// the steady rate; below, on the same time axis, the server's gen tok/s.
pub fn throughput(
    r: &RunResult,
    a: &Analysis,
    observe_at_s: &[f64],
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&Throughput { r, a, observe_at_s }, fmt)
}

/// Running, queued and in-flight requests over time; below, on the same time axis, the KV
/// token usage as a fraction of the pool.
pub fn engine_state(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&EngineState { r }, fmt)
}

/// The empirical CDFs of TTFT and end-to-end latency, in seconds, with p50, p90 and p99
/// marked.
pub fn latency_cdf(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&Latency { r }, fmt)
}

/// The time series to draw: the regular samples, the first minutes and the observations up to
/// the end of the run, ordered by time, one point per instant.
fn timeline(r: &RunResult) -> Vec<&Sample> {
    let end_s = r.samples.last().map_or(r.totals.sim_duration_s, |s| {
        s.t_s.max(r.totals.sim_duration_s)
    });
    let extra = r.first_minutes.iter().chain(&r.observations);
    let mut pts: Vec<&Sample> = r
        .samples
        .iter()
        .chain(extra.filter(|s| s.t_s <= end_s))
        .filter(|s| s.t_s.is_finite())
        .collect();
    pts.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    pts.dedup_by(|a, b| a.t_s == b.t_s);
    pts
}

/// The time axis of a run whose plotted points are `pts`, and its description.
fn time_axis(r: &RunResult, pts: &[&Sample]) -> (Axis, String) {
    let t_end = pts.iter().map(|s| s.t_s).fold(r.totals.sim_duration_s, f64::max).max(0.0);
    let first = pts.iter().map(|s| s.t_s).find(|&t| t > 0.0);
    let start_up_s = r.first_completion_s.map(|f| f.max(r.window_s));
    match (start_up_s, first) {
        (Some(s), Some(first)) if s > 0.0 && t_end >= LOG_TIME_FACTOR * s => {
            // From a round time at or just before the first point.
            let decade = 10f64.powf(first.log10().floor());
            let m = [5.0, 3.0, 2.0, 1.0].into_iter().find(|m| m * decade <= first);
            let lo = m.unwrap_or(1.0) * decade;
            let axis = Axis::log(lo, t_end.max(10.0 * lo), 10).with(Labels::Time);
            (axis, "time since the start (log scale)".into())
        }
        _ => {
            let (unit_s, unit) = match t_end {
                t if t <= 900.0 => (1.0, "s"),
                t if t <= 36_000.0 => (60.0, "min"),
                _ => (3_600.0, "h"),
            };
            let hi = if t_end > 0.0 { t_end } else { unit_s };
            let axis = Axis::linear(0.0, hi, 10).with(Labels::Time).in_unit(unit_s);
            (axis, format!("time since the start ({unit})"))
        }
    }
}

/// `(t, value)` of every point on the axis with a finite value.
fn series(pts: &[&Sample], x: &Axis, value: fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    pts.iter()
        .filter(|s| x.shows(s.t_s))
        .map(|s| (s.t_s, value(s)))
        .filter(|p| p.1.is_finite())
        .collect()
}

/// The largest value of `lines`.
fn highest(lines: &[Vec<(f64, f64)>]) -> f64 {
    lines.iter().flatten().map(|p| p.1).fold(0.0, f64::max)
}

/// A vertical dashed line at `x` across the panel.
fn vline<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    x: f64,
    colour: RGBColor,
    dash: u32,
) -> Result<(), DrawFailure> {
    let y = chart.y_range();
    let style = colour.stroke_width(2);
    chart.draw_series(DashedLineSeries::new([(x, y.start), (x, y.end)], dash, dash.max(3), style))?;
    Ok(())
}

/// Most the y axis of a time panel may grow to make room for its legend.
const MAX_STRETCH: f64 = 1.6;

struct Throughput<'a> {
    r: &'a RunResult,
    a: &'a Analysis,
    observe_at_s: &'a [f64],
}

impl Throughput<'_> {
    fn subtitle(&self) -> String {
        let s = &self.a.steady;
        if s.req_per_s <= 0.0 {
            return "No request completed in the steady window: there is no steady rate to show."
                .to_string();
        }
        let first = self.r.first_completion_s.map_or(String::new(), |t| {
            format!("First response at t = {}. ", human_duration(t))
        });
        let head = format!(
            "{first}Steady state {} req/s from t = {}. The lifetime average ",
            sig3(s.req_per_s),
            human_duration(s.start_s)
        );
        match self.a.convergence.lifetime_within_5pct_at_s {
            Some(t) => format!("{head}stays within 5 % of it from t = {} on.", human_duration(t)),
            None => format!("{head}never gets within 5 % of it before the drain."),
        }
    }
}

impl Figure for Throughput<'_> {
    const NAME: &'static str = "throughput";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        let (r, steady) = (self.r, &self.a.steady);
        let body = heading(root, THROUGHPUT_TITLE, &self.subtitle())?;
        let pts = timeline(r);
        let (x, x_desc) = time_axis(r, &pts);
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 6 / 10);
        let marks: Vec<f64> = self.observe_at_s.iter().copied().filter(|&t| x.shows(t)).collect();
        let converged = self.a.convergence.lifetime_within_5pct_at_s.filter(|&t| x.shows(t));
        let (s0, s1) = (steady.start_s.clamp(x.lo, x.hi), steady.end_s.clamp(x.lo, x.hi));
        let has_steady = steady.req_per_s > 0.0 && s1 > s0;
        // A level line over the steady window (none without a steady state).
        let level = |v: f64| if has_steady { vec![(s0, v), (s1, v)] } else { Vec::new() };

        // Top: the client's two rates against the steady state.
        let lifetime = series(&pts, &x, |s| s.lifetime_req_per_s);
        let windowed = series(&pts, &x, |s| s.window_req_per_s);
        let [ci_lo, ci_hi] = steady.req_per_s_ci95;
        let window = human_duration(r.window_s);
        let mut entries = vec![
            Entry::new(
                "lifetime average: completed \u{f7} t (what a progress bar shows)",
                Swatch::Line(VERMILLION, 4),
            ),
            Entry::new(
                format!("windowed rate: completions per second over the last {window}"),
                Swatch::Line(LIGHT_BLUE, 2),
            ),
        ];
        if has_steady {
            entries.push(Entry::new(
                format!(
                    "steady state {} req/s (shaded: 95 % CI {} to {})",
                    sig3(steady.req_per_s),
                    sig3(ci_lo),
                    sig3(ci_hi)
                ),
                Swatch::Band(GREEN),
            ));
        }
        if let Some(t) = converged {
            let text = format!("lifetime average within 5 % of steady from t = {}", human_duration(t));
            entries.push(Entry::new(text, Swatch::Dashed(GREEN)));
        }
        if !marks.is_empty() {
            let shown: Vec<String> = marks.iter().take(4).map(|&t| human_duration(t)).collect();
            let more = if marks.len() > 4 { ", \u{2026}" } else { "" };
            let text = format!("observation times: {}{more}", shown.join(", "));
            entries.push(Entry::new(text, Swatch::Dashed(GREY)));
        }
        let legend = Legend::new(entries);
        let avoid = vec![lifetime.clone(), windowed.clone(), level(ci_hi)];
        let y = Axis::linear(0.0, y_top(highest(&avoid), 1.08), 8);
        let (y, at) = legend.place(&top, &x, y, false, &avoid, &TOP_FIRST, MAX_STRETCH, raster)?;
        let mut chart = panel(&top, &x, &y, None, "client completions (req/s)")?;
        if has_steady {
            let band = Rectangle::new([(s0, ci_lo), (s1, ci_hi)], GREEN.mix(0.2).filled());
            chart.draw_series([band])?;
        }
        for &t in &marks {
            vline(&mut chart, t, GREY, 6)?;
        }
        if let Some(t) = converged {
            vline(&mut chart, t, GREEN, 3)?;
        }
        line(&mut chart, &windowed, LIGHT_BLUE, 1, raster)?;
        line(&mut chart, &level(steady.req_per_s), GREEN, 3, raster)?;
        line(&mut chart, &lifetime, VERMILLION, 4, raster)?;
        legend.draw(&mut chart, at, raster)?;

        // Bottom: the server's gen throughput, on the same time axis.
        let gen = series(&pts, &x, |s| s.gen_tok_per_s);
        let out = steady.output_tok_per_s;
        let out_line = if out > 0.0 { level(out) } else { Vec::new() };
        let mut entries = vec![Entry::new(
            "server gen throughput (SGLang's latest Decode log line)",
            Swatch::Line(PURPLE, 2),
        )];
        if !out_line.is_empty() {
            let text = format!("steady state: {} output tok/s", sig3(out));
            entries.push(Entry::new(text, Swatch::Dashed(DARK)));
        }
        let legend = Legend::new(entries);
        let avoid = vec![gen.clone(), out_line.clone()];
        let y = Axis::linear(0.0, y_top(highest(&avoid), 1.1), 5);
        let (y, at) = legend.place(&bottom, &x, y, true, &avoid, &TOP_FIRST, MAX_STRETCH, raster)?;
        let mut chart = panel(&bottom, &x, &y, Some(&x_desc), "server gen (tok/s)")?;
        for &t in &marks {
            vline(&mut chart, t, GREY, 6)?;
        }
        chart.draw_series(LineSeries::new(gen, PURPLE.stroke_width(1)))?;
        chart.draw_series(DashedLineSeries::new(out_line, 10, 5, DARK.stroke_width(2)))?;
        legend.draw(&mut chart, at, raster)?;
        Ok(())
    }
}

struct EngineState<'a> {
    r: &'a RunResult,
}

impl Figure for EngineState<'_> {
    const NAME: &'static str = "engine state";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        let r = self.r;
        let avg = &r.time_avg;
        let pool = thousands(r.kv_capacity_tokens);
        let subtitle = format!(
            "Time averages over the run: {:.1} running, {:.1} queued, {:.1} in flight; token \
             usage {:.2} of a KV pool of {pool} tokens.",
            avg.running, avg.queued, avg.in_flight, avg.token_usage,
        );
        let body = heading(root, ENGINE_STATE_TITLE, &subtitle)?;
        let pts = timeline(r);
        let (x, x_desc) = time_axis(r, &pts);
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 58 / 100);

        let running = series(&pts, &x, |s| s.running as f64);
        let queued = series(&pts, &x, |s| s.queued as f64);
        let in_flight = series(&pts, &x, |s| s.in_flight as f64);
        let legend = Legend::new(vec![
            Entry::new("in flight at the client (sent, not answered)", Swatch::Dashed(GREY)),
            Entry::new("queued at the server", Swatch::Line(ORANGE, 2)),
            Entry::new("running at the server (decode batch + prefill)", Swatch::Line(BLUE, 2)),
        ]);
        let avoid = vec![running.clone(), queued.clone(), in_flight.clone()];
        let y = Axis::linear(0.0, y_top(highest(&avoid), 1.08).max(1.0), 6);
        let (y, at) = legend.place(&top, &x, y, false, &avoid, &TOP_FIRST, MAX_STRETCH, raster)?;
        let mut chart = panel(&top, &x, &y, None, "requests")?;
        chart.draw_series(DashedLineSeries::new(in_flight, 8, 4, GREY.stroke_width(2)))?;
        line(&mut chart, &queued, ORANGE, 2, raster)?;
        line(&mut chart, &running, BLUE, 2, raster)?;
        legend.draw(&mut chart, at, raster)?;

        let usage = series(&pts, &x, |s| s.token_usage);
        let legend = Legend::new(vec![
            Entry::new(
                format!(
                    "token usage: KV tokens in use \u{f7} {pool} (SGLang's #token / max_total_num_tokens)"
                ),
                Swatch::Band(GREEN),
            ),
            Entry::new("the pool is full", Swatch::Dashed(RED)),
        ]);
        // The shading under the line is not data a legend must avoid; the line is.
        let full = vec![(x.lo, 1.0), (x.hi, 1.0)];
        let avoid = vec![usage.clone(), full.clone()];
        let y = Axis::linear(0.0, 1.1, 6);
        let (y, at) = legend.place(&bottom, &x, y, true, &avoid, &TOP_FIRST, 1.0, raster)?;
        let mut chart = panel(&bottom, &x, &y, Some(&x_desc), "KV token usage (fraction)")?;
        chart.draw_series(AreaSeries::new(usage.iter().copied(), 0.0, GREEN.mix(0.18).filled()))?;
        chart.draw_series(LineSeries::new(usage, GREEN.stroke_width(1)))?;
        chart.draw_series(DashedLineSeries::new(full, 10, 5, RED.stroke_width(2)))?;
        legend.draw(&mut chart, at, raster)?;
        Ok(())
    }
}

struct Latency<'a> {
    r: &'a RunResult,
}

/// Points of each CDF curve.
const CDF_POINTS: usize = 500;

/// A latency distribution (milliseconds) as CDF points in seconds.
fn cdf_seconds(d: &Distribution) -> Vec<(f64, f64)> {
    d.cdf_points(CDF_POINTS)
        .into_iter()
        .map(|(ms, q)| (ms / 1000.0, q))
        .filter(|p| p.0.is_finite())
        .collect()
}

/// The latency axis for CDF curves of `(seconds, fraction)` points, and its description.
fn latency_axis(curves: &[&[(f64, f64)]]) -> (Axis, &'static str) {
    let at = |c: &[(f64, f64)], q: f64| c.iter().find(|p| p.1 >= q).or(c.last()).map_or(0.0, |p| p.0);
    let non_empty = || curves.iter().filter(|c| !c.is_empty());
    let p1 = non_empty().map(|c| at(c, 0.01)).fold(f64::INFINITY, f64::min);
    let p99 = non_empty().map(|c| at(c, 0.99)).fold(0.0, f64::max);
    let values = || curves.iter().flat_map(|c| c.iter().map(|p| p.0));
    let max = values().fold(0.0, f64::max);
    let min_positive = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    if p1 > 0.0 && p99 / p1 > LOG_LATENCY_SPREAD && min_positive.is_finite() {
        let lo = 10f64.powf(min_positive.log10().floor());
        let hi = 10f64.powf(max.log10().ceil()).max(10.0 * lo);
        (Axis::log(lo, hi, 12), "latency (s, log scale)")
    } else {
        let hi = if max > 0.0 { max * 1.05 } else { 1.0 };
        (Axis::linear(0.0, hi, 10), "latency (s)")
    }
}

impl Figure for Latency<'_> {
    const NAME: &'static str = "latency";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        let r = self.r;
        let n = r.latency.e2e_ms.count();
        let subtitle = if n == 0 {
            "No request completed: there is no latency to show.".to_string()
        } else {
            format!(
                "{} completed request{}, timed from the send (after the client slot), as \
                 sglang.bench_serving does. Dots mark p50, p90 and p99.",
                thousands(n),
                if n == 1 { "" } else { "s" }
            )
        };
        let body = heading(root, LATENCY_TITLE, &subtitle)?;
        let (ttft, e2e) = (cdf_seconds(&r.latency.ttft_ms), cdf_seconds(&r.latency.e2e_ms));
        let (x, x_desc) = latency_axis(&[&ttft, &e2e]);
        let mut curves = Vec::new();
        let mut entries = Vec::new();
        for (name, d, c, colour) in [
            ("TTFT (first token)", &r.latency.ttft_ms, ttft, BLUE),
            ("E2E (last token)", &r.latency.e2e_ms, e2e, VERMILLION),
        ] {
            let Some(&(first, _)) = c.first() else { continue };
            // From 0, so the curve visibly rises from the axis.
            let pts: Vec<(f64, f64)> = std::iter::once((first, 0.0)).chain(c).collect();
            let st = d.stats();
            let q = |ms: f64| sig3(ms / 1000.0);
            let text = format!("{name}: p50 {} s, p90 {} s, p99 {} s", q(st.p50), q(st.p90), q(st.p99));
            entries.push(Entry::new(text, Swatch::Line(colour, 3)));
            let dots = [(st.p50, 0.5), (st.p90, 0.9), (st.p99, 0.99)].map(|(ms, f)| (ms / 1000.0, f));
            curves.push((pts, dots, colour));
        }
        let legend = Legend::new(entries);
        let avoid: Vec<Vec<(f64, f64)>> = curves.iter().map(|c| c.0.clone()).collect();
        let y = Axis::linear(0.0, 1.04, 11);
        let (y, at) = legend.place(&body, &x, y, true, &avoid, &BOTTOM_FIRST, 1.0, raster)?;
        let mut chart = panel(&body, &x, &y, Some(x_desc), "fraction of requests (CDF)")?;
        for (pts, dots, colour) in curves {
            line(&mut chart, &pts, colour, 3, raster)?;
            let dot = |p| {
                let (c1, c2, p1, p2) = mark(Shape::Circle, 5, colour);
                EmptyElement::at(p) + c1 + c2 + p1 + p2
            };
            chart.draw_series(dots.map(dot))?;
        }
        legend.draw(&mut chart, at, raster)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::check::{pixels, png_size, svg_text, texts};
    use super::super::{register_fonts, HEIGHT_PX, WIDTH_PX};
    use super::*;
    use crate::analysis::analyse;
    use crate::engine::{run, RunOptions};
    use crate::scenario::{load, Source};

    /// Run a scenario given as TOML text.
    fn simulate(text: &str) -> RunResult {
        let src = Source {
            name: "plots-test.toml".into(),
            base_dir: PathBuf::from("."),
            text: text.into(),
        };
        let sc = load(&src, &[]).unwrap_or_else(|e| {
            let lines: Vec<String> = e.problems.iter().map(|p| e.problem_line(p)).collect();
            panic!("test scenario is invalid:\n{}", lines.join("\n"))
        });
        run(&sc, &RunOptions::default()).expect("the run finishes")
    }

    /// 120 requests through 6 slots: a start-up, a steady phase and a drain in about 30 s.
    fn small(window_s: f64) -> String {
        format!(
            r#"
name = "plots"
[run]
observe_at_s = [5, 12]
window_s = {window_s}
timeseries_interval_s = 0.25
[engine]
kv_capacity_tokens = 3000
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 1.0
prefill_base_ms = 5.0
prefill_per_token_us = 10.0
[workload]
requests = 120
max_new_tokens = 400
prompt_tokens = {{ dist = "uniform", min = 20, max = 200 }}
output_tokens = {{ dist = "lognormal", mean = 100, cv = 0.5, min = 5, max = 400 }}
[client]
concurrency = 6
"#
        )
    }

    /// Every figure of `r` in both formats, checked; returns the PNGs and the SVGs' texts.
    fn render_all(r: &RunResult, observe_at_s: &[f64]) -> Vec<(Vec<u8>, Vec<String>)> {
        let a = analyse(r);
        let mut out = Vec::new();
        for (title, draw) in [
            (
                THROUGHPUT_TITLE,
                &(|f| throughput(r, &a, observe_at_s, f)) as &dyn Fn(Format) -> _,
            ),
            (ENGINE_STATE_TITLE, &|f| engine_state(r, f)),
            (LATENCY_TITLE, &|f| latency_cdf(r, f)),
        ] {
            let png = draw(Format::Png).unwrap_or_else(|e| panic!("{title}: {e}"));
            assert_eq!(png_size(&png), (WIDTH_PX, HEIGHT_PX), "{title}");
            let svg = draw(Format::Svg).unwrap_or_else(|e| panic!("{title}: {e}"));
            let t = texts(svg_text(&svg));
            assert!(t.iter().any(|s| s == title), "the SVG holds its title {title:?}");
            assert!(t.len() >= 10, "{title}: text is drawn");
            out.push((png, t));
        }
        out
    }

    #[test]
    fn every_figure_renders_in_both_formats_with_its_lines_and_legends() {
        let r = simulate(&small(2.0));
        let figs = render_all(&r, &[5.0, 12.0]);
        // The PNGs really hold the lines and the text.
        assert!(pixels(&figs[0].0, VERMILLION) > 500, "the lifetime line is drawn");
        assert!(pixels(&figs[0].0, PURPLE) > 200, "the server's line is drawn");
        assert!(pixels(&figs[1].0, BLUE) > 500, "the running line is drawn");
        assert!(pixels(&figs[2].0, BLUE) > 500, "the TTFT curve is drawn");
        assert!(pixels(&figs[0].0, BLACK) > 500, "the title is drawn");
        let all = figs.iter().flat_map(|f| f.1.clone()).collect::<Vec<_>>().join("\n");
        for legend in [
            "windowed rate: completions per second over the last 2.0 s",
            "the pool is full",
            "running at the server (decode batch + prefill)",
            "E2E (last token): p50",
        ] {
            assert!(all.contains(legend), "legend {legend:?}");
        }
    }

    #[test]
    fn a_long_run_gets_a_log_time_axis_and_a_short_one_a_linear_axis() {
        // The start-up is the first response or the window, whichever is later.
        let long = simulate(&small(1.0));
        let short = simulate(&small(30.0));
        let (axis, _) = time_axis(&long, &timeline(&long));
        assert_eq!(axis.scale, super::super::axis::Scale::Log);
        let (axis, desc) = time_axis(&short, &timeline(&short));
        assert_eq!(axis.scale, super::super::axis::Scale::Linear);
        assert_eq!(desc, "time since the start (s)");
        let svg = throughput(&long, &analyse(&long), &[], Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("time since the start (log scale)"));
        assert!(texts(svg_text(&svg)).iter().any(|t| t == "1 s"), "a round time tick");
        let svg = engine_state(&short, Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("time since the start (s)"));
    }

    #[test]
    fn the_throughput_figure_states_the_runs_numbers() {
        let r = simulate(&small(2.0));
        let a = analyse(&r);
        let svg = throughput(&r, &a, &[5.0, 12.0], Format::Svg).unwrap();
        let s = svg_text(&svg);
        assert!(s.contains(&format!("steady state {} req/s", sig3(a.steady.req_per_s))));
        assert!(s.contains("observation times: 5.0 s, 12 s"));
        assert!(s.contains("client completions (req/s)"));
        assert!(s.contains("server gen (tok/s)"));
    }

    #[test]
    fn a_wide_latency_spread_gets_a_log_axis() {
        let wide: Vec<(f64, f64)> =
            (0..=100).map(|i| (0.01 * 1.1f64.powi(i), f64::from(i) / 100.0)).collect();
        let narrow: Vec<(f64, f64)> =
            (0..=100).map(|i| (10.0 + f64::from(i) / 10.0, f64::from(i) / 100.0)).collect();
        assert_eq!(latency_axis(&[&wide]).1, "latency (s, log scale)");
        assert_eq!(latency_axis(&[&narrow]).1, "latency (s)");
        assert_eq!(latency_axis(&[&[]]).1, "latency (s)");
    }

    const ONE_REQUEST: &str = r#"
name = "one"
[engine]
kv_capacity_tokens = 1000
[workload]
requests = 1
prompt_tokens = { dist = "constant", value = 10 }
output_tokens = { dist = "constant", value = 3 }
[client]
concurrency = 1
"#;

    const NO_RESPONSE: &str = r#"
name = "none"
[run]
max_sim_s = 0.5
[engine]
kv_capacity_tokens = 10000
[workload]
requests = 4
prompt_tokens = { dist = "constant", value = 10 }
output_tokens = { dist = "constant", value = 1000 }
[client]
concurrency = 4
"#;

    #[test]
    fn a_run_with_a_single_request_still_draws() {
        let r = simulate(ONE_REQUEST);
        assert!(r.samples.len() <= 3, "few samples: {}", r.samples.len());
        render_all(&r, &[0.01, 1e9]);
    }

    #[test]
    fn a_run_stopped_before_any_response_still_draws() {
        let r = simulate(NO_RESPONSE);
        assert_eq!(r.totals.requests_completed, 0);
        let a = analyse(&r);
        let svg = throughput(&r, &a, &[], Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("there is no steady rate"));
        let svg = latency_cdf(&r, Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("no latency to show"));
        engine_state(&r, Format::Svg).unwrap();
    }

    #[test]
    fn figures_are_deterministic_and_fonts_register_once() {
        register_fonts().unwrap();
        register_fonts().unwrap();
        let r = simulate(&small(2.0));
        let svg = || engine_state(&r, Format::Svg).unwrap();
        assert_eq!(svg(), svg());
        assert_eq!((Format::Png.extension(), Format::Svg.extension()), ("png", "svg"));
    }

    fn write_figures(prefix: &str, r: &RunResult, observe_at_s: &[f64]) {
        let a = analyse(r);
        let dir = PathBuf::from("/tmp/plots-check");
        std::fs::create_dir_all(&dir).unwrap();
        for fmt in Format::ALL {
            let ext = fmt.extension();
            let figures = [
                ("throughput", throughput(r, &a, observe_at_s, fmt)),
                ("engine-state", engine_state(r, fmt)),
                ("latency-cdf", latency_cdf(r, fmt)),
            ];
            for (name, bytes) in figures {
                std::fs::write(dir.join(format!("{prefix}{name}.{ext}")), bytes.unwrap()).unwrap();
            }
        }
    }

    /// Writes the built-in B2's figures, and those of the small test scenarios, to
    /// /tmp/plots-check/ for looking at them: `cargo test --release --lib b2_figures -- --ignored`.
    #[test]
    #[ignore]
    fn b2_figures() {
        let sc = load(&Source::builtin_b2(), &[]).expect("the built-in scenario is valid");
        let r = run(&sc, &RunOptions::default()).expect("B2 finishes");
        let observe_at_s: Vec<f64> = sc.run.observe_at.iter().map(|t| t.as_secs_f64()).collect();
        write_figures("", &r, &observe_at_s);
        write_figures("small-log-", &simulate(&small(2.0)), &[5.0, 12.0]);
        write_figures("small-linear-", &simulate(&small(30.0)), &[5.0, 12.0]);
        write_figures("edge-none-", &simulate(NO_RESPONSE), &[]);
        write_figures("edge-one-", &simulate(ONE_REQUEST), &[0.01]);
    }
}
