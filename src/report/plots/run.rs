//! Figures of one run, from the run and its analysis. A run at least [`LOG_TIME_FACTOR`] times
//! longer than its start-up (its first response, or the client's window if longer) gets a
//! logarithmic time axis ticked in round times: on a linear one the start-up, where the
//! lifetime average lags, would be a sliver at the left. Other runs get a linear axis in s,
//! min or h. The series are the run's regular samples merged with the first minutes' and the
//! observations. Latencies are in seconds (TTFT, E2E) and milliseconds (TPOT, ITL), on a log
//! axis when their p99 exceeds their p1, or their maximum their median, by more than
//! [`LOG_LATENCY_SPREAD`] times.

use plotters::prelude::*;

use crate::analysis::{Analysis, NoWindow, Regime};
use crate::metrics::{CacheHits, Distribution, RunResult, Sample};

use super::axis::{human_duration as dur, sig3, thousands, Axis, Labels};
use super::style::{heading, mark, Corner, Entry, Legend, Shape, Swatch, BOTTOM_FIRST, TOP_FIRST};
use super::style::{BLUE, DARK, GREEN, GREY, LIGHT_BLUE, ORANGE, PURPLE, RED, VERMILLION};
use super::{line, render, y_top, Area, Drawn, Figure, Format, PlotError};

/// A run at least this many times longer than its start-up gets a logarithmic time axis.
pub const LOG_TIME_FACTOR: f64 = 20.0;
/// Latencies whose p99 exceeds their p1, or whose maximum their median, by more than this
/// factor get a logarithmic axis.
pub const LOG_LATENCY_SPREAD: f64 = 20.0;

/// The title of the [`throughput`] figure.
pub const THROUGHPUT_TITLE: &str = "Throughput over time: what the client sees vs. the server";
/// The title of the [`engine_state`] figure.
pub const ENGINE_STATE_TITLE: &str = "Engine state over time: requests and KV cache";
/// The title of the [`cache_hit_rate`] figure.
pub const CACHE_TITLE: &str = "Prefix cache over time: prompt tokens found cached";
/// The title of the [`latency_cdf`] figure.
pub const LATENCY_TITLE: &str = "Latency distributions: TTFT, end-to-end, TPOT and ITL";

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
    render(&Throughput(r, a, observe_at_s), fmt)
}

/// Running, queued and in-flight requests over time; below, on the same time axis, the KV
/// token usage as a fraction of the pool.
pub fn engine_state(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&EngineState(r), fmt)
}

/// The share of the completed requests' prompt tokens that the prefix cache held at their
/// first admission, since the start and over the client's window, as the caller computed it
/// ([`RunResult::cache_hits`]), on the time axis of the run's other figures.
pub fn cache_hit_rate(r: &RunResult, hits: &CacheHits, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&Cache(r, hits), fmt)
}

/// The empirical CDFs of TTFT and end-to-end latency, in seconds, with p50, p90 and p99
/// marked; below them those of TPOT and ITL, in milliseconds.
pub fn latency_cdf(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&Latency(r), fmt)
}

/// The time axis of a run whose plotted points are `pts`, and its description.
fn time_axis(r: &RunResult, pts: &[&Sample]) -> (Axis, String) {
    let times = || pts.iter().map(|s| s.t_s);
    let t_end = times().fold(r.totals.sim_duration_s, f64::max);
    let first = times().find(|&t| t > 0.0);
    let start_up_s = r.first_completion_s.map(|f| f.max(r.window_s));
    match (start_up_s, first) {
        (Some(s), Some(first)) if s > 0.0 && t_end >= LOG_TIME_FACTOR * s => {
            // From a round time at or just before the first point.
            let decade = 10f64.powf(first.log10().floor());
            let m = [5.0, 3.0, 2.0].into_iter().find(|m| m * decade <= first);
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
    let on_axis = pts.iter().filter(|s| x.shows(s.t_s));
    let pts = on_axis.map(|s| (s.t_s, value(s)));
    pts.filter(|p| p.1.is_finite()).collect()
}

/// Something a panel draws.
pub(super) enum Draw {
    /// A line: its points, colour and width.
    Line(Vec<(f64, f64)>, RGBColor, u32),
    Dashed(Vec<(f64, f64)>, RGBColor),
    /// Vertical dashed lines at these x, with dashes this long.
    Marks(Vec<f64>, RGBColor, u32),
    /// A box shaded from one corner to the other.
    Band([(f64, f64); 2], RGBColor),
    /// A thin line with the area under it shaded.
    Under(Vec<(f64, f64)>, RGBColor),
    /// Dots.
    Dots(Vec<(f64, f64)>, RGBColor),
}

/// A panel of a run figure: its y description; the top of its y axis if fixed (else room is
/// left above the data, raised by up to 60 % if that makes room for the legend); the legend's
/// corners; what it draws, in order, each with its legend entry if any. The legend hides none
/// of the lines and bands if it can.
pub(super) struct Panel<'p>(
    pub(super) &'p str,
    pub(super) Option<f64>,
    pub(super) &'static [Corner],
    pub(super) Vec<(String, Draw)>,
);

impl Panel<'_> {
    /// Draw `draw` next, with a legend entry if `label` is not empty.
    pub(super) fn add(&mut self, label: impl Into<String>, draw: Draw) {
        self.3.push((label.into(), draw));
    }

    pub(super) fn draw<DB: DrawingBackend>(
        self,
        area: &Area<DB>,
        x: &Axis,
        x_desc: Option<&str>,
        raster: bool,
    ) -> Drawn {
        // The legend lists the items drawn last (on top) first.
        let (mut entries, mut avoid) = (Vec::new(), Vec::new());
        for (label, draw) in self.3.iter().rev() {
            let (swatch, pts) = match draw {
                Draw::Line(p, c, w) => (Swatch::line(*c, (*w).max(2)), p.clone()),
                Draw::Dashed(p, c) => (Swatch::dashed(*c), p.clone()),
                Draw::Marks(_, c, _) => (Swatch::dashed(*c), Vec::new()),
                Draw::Band([a, b], c) => (Swatch::band(*c), vec![(a.0, b.1), (b.0, b.1)]),
                Draw::Under(p, c) => (Swatch::band(*c), p.clone()),
                Draw::Dots(_, c) => (Swatch::line(*c, 3), Vec::new()),
            };
            if !label.is_empty() {
                entries.push(Entry(label.clone(), swatch));
            }
            avoid.push(pts);
        }
        let max = avoid.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
        let top = self.1.unwrap_or(y_top(max, 1.1));
        let ticks = (area.dim_in_pixel().1 / 45).max(6) as usize;
        let stretch = if self.1.is_some() { 1.0 } else { 1.6 };
        let legend = Legend::new(entries).avoiding(avoid, self.2, stretch);
        let y = Axis::linear(0.0, top, ticks);
        let (mut chart, at) = legend.panel(area, x, y, x_desc, self.0, raster)?;
        let y = chart.y_range();
        for (_, draw) in self.3 {
            match draw {
                Draw::Line(p, c, w) => line(&mut chart, &p, c, w, raster)?,
                Draw::Dashed(p, c) => {
                    chart.draw_series(DashedLineSeries::new(p, 10, 5, c.stroke_width(2)))?;
                }
                Draw::Marks(xs, c, dash) => {
                    for x in xs {
                        let style = c.stroke_width(2);
                        let pts = [(x, y.start), (x, y.end)];
                        chart.draw_series(DashedLineSeries::new(pts, dash, dash.max(3), style))?;
                    }
                }
                Draw::Band(corners, c) => {
                    chart.draw_series([Rectangle::new(corners, c.mix(0.2).filled())])?;
                }
                Draw::Under(p, c) => {
                    let area = AreaSeries::new(p.iter().copied(), 0.0, c.mix(0.18).filled());
                    chart.draw_series(area)?;
                    line(&mut chart, &p, c, 1, raster)?;
                }
                Draw::Dots(p, c) => {
                    chart.draw_series(p.into_iter().map(|p| {
                        let (c1, c2, p1, p2) = mark(Shape::Circle, 5, c, 0);
                        EmptyElement::at(p) + c1 + c2 + p1 + p2
                    }))?;
                }
            }
        }
        legend.draw(&mut chart, at, raster)
    }
}

/// The run, its analysis and the observation times.
struct Throughput<'a>(&'a RunResult, &'a Analysis, &'a [f64]);

impl Throughput<'_> {
    fn subtitle(&self) -> String {
        let (r, a) = (self.0, self.1);
        let first = r.first_completion_s.map(dur);
        let first = first.map_or(String::new(), |t| format!("First response at t = {t}. "));
        match (&a.regime, a.steady()) {
            (_, Some(w)) if w.span.req_per_s > 0.0 => {
                let (rate, from) = (sig3(w.span.req_per_s), dur(w.span.start_s));
                let head = format!("{first}Steady state {rate} req/s from t = {from}.");
                let converged = a.convergence.as_ref();
                let tail = match converged.and_then(|c| c.lifetime_within_5pct_at_s).map(dur) {
                    Some(t) => format!("stays within 5 % of it from t = {t} on."),
                    None => "is not within 5 % of it when the drain begins.".into(),
                };
                format!("{head} The lifetime average {tail}")
            }
            (Regime::Overloaded(o), _) => format!(
                "{first}No steady state: requests arrive at {} req/s, the server completes {} \
                 req/s, the backlog grows by {} per second.",
                sig3(o.arrival_req_per_s),
                sig3(o.served_req_per_s),
                sig3(o.backlog_growth_req_per_s)
            ),
            (Regime::NoSteadyWindow(NoWindow::NothingCompleted), _) => {
                "No request completed: there is no steady rate to show.".to_string()
            }
            (Regime::NoSteadyWindow(NoWindow::OneBatch { .. }), _) => format!(
                "{first}No steady state: every request was sent before the first response, \
                 so the run is one batch."
            ),
            _ => format!("{first}No steady state: the start-up lasts until the drain."),
        }
    }
}

impl Figure for Throughput<'_> {
    const NAME: &'static str = "throughput";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let r = self.0;
        let window = self.1.steady().map(|w| (&w.span, w.ci95()));
        let body = heading(root, THROUGHPUT_TITLE, &self.subtitle())?;
        let pts = r.timeline();
        let (x, x_desc) = time_axis(r, &pts);
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 6 / 10);
        let marks = self.2.iter().copied().filter(|&t| x.shows(t));
        let marks: Vec<f64> = marks.collect();
        let converged = self.1.convergence.as_ref();
        let converged = converged.and_then(|c| c.lifetime_within_5pct_at_s);
        let converged = converged.filter(|&t| x.shows(t));
        let on_axis = |t: f64| t.clamp(x.lo, x.hi);
        let (s0, s1) = window.map_or((0.0, 0.0), |(w, _)| (on_axis(w.start_s), on_axis(w.end_s)));
        let steady = window.filter(|(w, _)| w.req_per_s > 0.0 && s1 > s0);
        let level = |v: f64| vec![(s0, v), (s1, v)];

        // Top: the client's two rates against the steady state.
        let mut p = Panel("client completions (req/s)", None, &TOP_FIRST, vec![]);
        if !marks.is_empty() {
            let shown: Vec<String> = marks.iter().take(4).map(|&t| dur(t)).collect();
            let more = if marks.len() > 4 { ", \u{2026}" } else { "" };
            let text = format!("observation times: {}{more}", shown.join(", "));
            p.add(text, Draw::Marks(marks.clone(), GREY, 6));
        }
        if let Some(t) = converged {
            let text = format!("lifetime average within 5 % of steady from t = {}", dur(t));
            p.add(text, Draw::Marks(vec![t], GREEN, 3));
        }
        if let Some((w, Some([lo, hi]))) = steady {
            let (rate, a, b) = (sig3(w.req_per_s), sig3(lo), sig3(hi));
            let text = format!("steady state {rate} req/s (shaded: 95 % CI {a} to {b})");
            p.add(text, Draw::Band([(s0, lo), (s1, hi)], GREEN));
        }
        let windowed = series(&pts, &x, |s| s.window_req_per_s);
        let w = dur(r.window_s);
        let text = format!("windowed rate: completions per second over the last {w}");
        p.add(text, Draw::Line(windowed, LIGHT_BLUE, 1));
        match steady {
            Some((w, Some(_))) => p.add("", Draw::Line(level(w.req_per_s), GREEN, 3)),
            Some((w, None)) => {
                let text = format!("steady state {} req/s (no interval)", sig3(w.req_per_s));
                p.add(text, Draw::Line(level(w.req_per_s), GREEN, 3));
            }
            None => {}
        }
        let lifetime = series(&pts, &x, |s| s.lifetime_req_per_s);
        let text = "lifetime average: completed \u{f7} t (what a progress bar shows)";
        p.add(text, Draw::Line(lifetime, VERMILLION, 4));
        p.draw(&top, &x, None, raster)?;

        // Bottom: the server's gen throughput, on the same time axis.
        let mut p = Panel("server gen (tok/s)", None, &TOP_FIRST, vec![]);
        p.add("", Draw::Marks(marks, GREY, 6));
        let gen = series(&pts, &x, |s| s.gen_tok_per_s);
        let text = format!("server gen throughput ({})", r.words.stats_line_in_figure);
        p.add(text, Draw::Line(gen, PURPLE, 1));
        if let Some((w, _)) = steady.filter(|(w, _)| w.output_tok_per_s > 0.0) {
            let text = format!("steady state: {} output tok/s", sig3(w.output_tok_per_s));
            p.add(text, Draw::Dashed(level(w.output_tok_per_s), DARK));
        }
        p.draw(&bottom, &x, Some(&x_desc), raster)
    }
}

struct EngineState<'a>(&'a RunResult);

impl Figure for EngineState<'_> {
    const NAME: &'static str = "engine state";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let (r, avg) = (self.0, &self.0.time_avg);
        let pool = thousands(r.kv_capacity_tokens);
        let (running, queued, in_flight) = (avg.running, avg.queued, avg.in_flight);
        let usage = avg.token_usage;
        let usage = format!(
            "{} {usage:.2} of a KV pool of {pool} tokens",
            r.words.kv_usage
        );
        let subtitle = format!(
            "Time averages over the run: {running:.1} running, {queued:.1} queued, \
             {in_flight:.1} in flight; {usage}."
        );
        let body = heading(root, ENGINE_STATE_TITLE, &subtitle)?;
        let pts = r.timeline();
        let (x, x_desc) = time_axis(r, &pts);
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 58 / 100);
        let mut p = Panel("requests", None, &TOP_FIRST, vec![]);
        let in_flight = series(&pts, &x, |s| s.in_flight as f64);
        let text = "in flight at the client (sent, not answered)";
        p.add(text, Draw::Dashed(in_flight, GREY));
        let queued = series(&pts, &x, |s| s.queued as f64);
        p.add("queued at the server", Draw::Line(queued, ORANGE, 2));
        let running = series(&pts, &x, |s| s.running as f64);
        p.add(r.words.running_at_server, Draw::Line(running, BLUE, 2));
        p.draw(&top, &x, None, raster)?;

        // The shading under the usage line is not data a legend must avoid; the line is.
        let mut p = Panel(r.words.kv_usage_axis, Some(1.1), &TOP_FIRST, vec![]);
        let full = vec![(x.lo, 1.0), (x.hi, 1.0)];
        p.add("the pool is full", Draw::Dashed(full, RED));
        let usage = series(&pts, &x, |s| s.token_usage);
        let (what, why) = (r.words.kv_usage, r.words.kv_usage_source);
        let text = format!("{what}: KV tokens in use \u{f7} {pool} ({why})");
        p.add(text, Draw::Under(usage, GREEN));
        p.draw(&bottom, &x, Some(&x_desc), raster)
    }
}

struct Cache<'a>(&'a RunResult, &'a CacheHits);

impl Figure for Cache<'_> {
    const NAME: &'static str = "prefix cache";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let (r, c) = (self.0, &self.0.counters);
        let (hit, all) = (
            thousands(c.cache_hit_requests),
            thousands(c.first_admissions),
        );
        let (cached, prompt) = (c.cached_prompt_tokens, c.first_admission_prompt_tokens);
        let share = 100.0 * cached as f64 / prompt.max(1) as f64;
        let (prompt, evicted) = (thousands(prompt), thousands(c.cache_evicted_tokens));
        let subtitle = format!(
            "At their first admission {hit} of {all} requests found a cached prefix, \
             {share:.1} % of their {prompt} prompt tokens; {evicted} cached tokens evicted."
        );
        let body = heading(root, CACHE_TITLE, &subtitle)?;
        let (x, x_desc) = time_axis(r, &r.timeline());
        let on_axis = |p: &[(f64, f64)]| p.iter().copied().filter(|p| x.shows(p.0)).collect();
        let y_desc = "share of prompt tokens found cached";
        // A share: the axis ends at 1. The window's thin line is drawn over the wide one, which
        // it follows closely once the cache is warm.
        let mut p = Panel(y_desc, Some(1.0), &BOTTOM_FIRST, vec![]);
        let text = "since the start: cached \u{f7} prompt tokens of the requests completed";
        p.add(text, Draw::Line(on_axis(&self.1.lifetime), VERMILLION, 4));
        let text = format!(
            "the same of the requests completed in the last {}",
            dur(r.window_s)
        );
        p.add(text, Draw::Line(on_axis(&self.1.window), BLUE, 2));
        p.draw(&body, &x, Some(&x_desc), raster)
    }
}

struct Latency<'a>(&'a RunResult);

/// A latency distribution (milliseconds) as 500 CDF points, in milliseconds divided by `per`.
fn cdf_points(d: &Distribution, per: f64) -> Vec<(f64, f64)> {
    let scale = |(ms, q): (f64, f64)| (ms / per, q);
    let pts = d.cdf_points(500).into_iter().map(scale);
    pts.filter(|p| p.0.is_finite()).collect()
}

/// The latency axis for CDF curves of `(latency in unit, fraction)` points, and its
/// description.
pub(super) fn latency_axis(curves: &[&[(f64, f64)]], unit: &str) -> (Axis, String) {
    let at = |c: &[(f64, f64)], q: f64| c.iter().find(|p| p.1 >= q).or(c.last()).map(|p| p.0);
    let at = |q: f64| curves.iter().filter_map(move |c| at(c, q));
    let p1 = at(0.01).fold(f64::INFINITY, f64::min);
    let p99 = at(0.99).fold(0.0, f64::max);
    let values = || curves.iter().flat_map(|c| c.iter().map(|p| p.0));
    let max = values().fold(0.0, f64::max);
    let min_positive = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    // A tail far beyond the medians (a few long stalls) would squeeze the curves too.
    let p50 = at(0.5).fold(f64::INFINITY, f64::min);
    let spread = p99 / p1 > LOG_LATENCY_SPREAD || max / p50 > LOG_LATENCY_SPREAD;
    if p1 > 0.0 && spread && min_positive.is_finite() {
        let lo = 10f64.powf(min_positive.log10().floor());
        let hi = 10f64.powf(max.log10().ceil()).max(10.0 * lo);
        (
            Axis::log(lo, hi, 12),
            format!("latency ({unit}, log scale)"),
        )
    } else {
        let hi = if max > 0.0 { max * 1.05 } else { 1.0 };
        (Axis::linear(0.0, hi, 10), format!("latency ({unit})"))
    }
}

/// One CDF curve: its legend text, `(latency, fraction)` points, colour and the dots on it.
pub(super) type Cdf = (String, Vec<(f64, f64)>, RGBColor, Vec<(f64, f64)>);

/// A panel of CDF curves, each rising from the axis, in `unit` on [`latency_axis`]; the x
/// description is `x_desc`, else the axis's own.
pub(super) fn cdf_panel<DB: DrawingBackend>(
    area: &Area<DB>,
    (y_desc, x_desc): (&str, Option<&str>),
    curves: Vec<Cdf>,
    unit: &str,
    raster: bool,
) -> Drawn {
    let pts: Vec<&[(f64, f64)]> = curves.iter().map(|c| &c.1[..]).collect();
    let (x, desc) = latency_axis(&pts, unit);
    let mut p = Panel(y_desc, Some(1.04), &BOTTOM_FIRST, vec![]);
    for (text, c, colour, dots) in curves {
        let Some(&(first, _)) = c.first() else {
            continue;
        };
        let curve = std::iter::once((first, 0.0)).chain(c).collect();
        p.add(text, Draw::Line(curve, colour, 3));
        p.add("", Draw::Dots(dots, colour));
    }
    p.draw(area, &x, Some(x_desc.unwrap_or(&desc)), raster)
}

/// The CDF of a latency distribution (ms) named `name`, in `unit` of `per` ms, with p50, p90
/// and p99 in its legend text and marked by dots.
fn cdf((name, d, colour): (&str, &Distribution, RGBColor), (unit, per): (&str, f64)) -> Cdf {
    let (st, q) = (d.stats(), |ms: f64| sig3(ms / per));
    let (p50, p90, p99) = (q(st.p50), q(st.p90), q(st.p99));
    let text = format!("{name}: p50 {p50} {unit}, p90 {p90} {unit}, p99 {p99} {unit}");
    let dots = [(st.p50, 0.5), (st.p90, 0.9), (st.p99, 0.99)];
    let dots = dots.map(|(ms, f)| (ms / per, f)).to_vec();
    (text, cdf_points(d, per), colour, dots)
}

impl Figure for Latency<'_> {
    const NAME: &'static str = "latency";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let lat = &self.0.latency;
        let n = lat.e2e_ms.count();
        let subtitle = match n {
            0 => "No request completed: there is no latency to show.".to_string(),
            n => {
                let (n, s) = (thousands(n), if n == 1 { "" } else { "s" });
                let how = "timed from the send (after the client slot), as";
                let client = self.0.words.bench_client_in_figure;
                format!(
                    "{n} completed request{s}, {how} {client} does. Dots mark p50, p90 and p99."
                )
            }
        };
        let body = heading(root, LATENCY_TITLE, &subtitle)?;
        let (top, bottom) = body.split_vertically(body.dim_in_pixel().1 * 55 / 100);
        let requests = [
            ("E2E (last token)", &lat.e2e_ms, VERMILLION),
            ("TTFT (first token)", &lat.ttft_ms, BLUE),
        ];
        let requests = requests.map(|c| cdf(c, ("s", 1000.0))).to_vec();
        let y_desc = ("fraction of requests (CDF)", None);
        cdf_panel(&top, y_desc, requests, "s", raster)?;
        let tokens = [
            ("ITL (every gap between tokens)", &lat.itl_ms, PURPLE),
            ("TPOT (per request)", &lat.tpot_ms, GREEN),
        ];
        let tokens = tokens.map(|c| cdf(c, ("ms", 1.0))).to_vec();
        cdf_panel(&bottom, ("fraction (CDF)", None), tokens, "ms", raster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_latency_spread_gets_a_log_axis() {
        let curve = |f: fn(f64) -> f64| -> Vec<(f64, f64)> {
            let at = |i: u32| (f(f64::from(i)), f64::from(i) / 100.0);
            (0..=100).map(at).collect()
        };
        let wide = curve(|i| 0.01 * 1.1f64.powf(i));
        assert_eq!(latency_axis(&[&wide], "s").1, "latency (s, log scale)");
        assert_eq!(latency_axis(&[&curve(|i| 10.0 + i)], "s").1, "latency (s)");
        assert_eq!(latency_axis(&[&[]], "ms").1, "latency (ms)");
    }
}
