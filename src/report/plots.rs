//! Figures of one run: pure functions from a run (and its analysis) to PNG or SVG bytes.
//!
//! * [`throughput`] — the client's lifetime average and windowed rate against the steady state,
//!   and the server's gen tok/s below on the same time axis: the case study in one picture.
//! * [`engine_state`] — running, queued and in-flight requests, and the KV token usage.
//! * [`latency_cdf`] — the distributions of TTFT and end-to-end latency.
//!
//! Choices a reader of the figures should know:
//!
//! * **Time axis.** A run at least [`LOG_TIME_FACTOR`] times longer than its start-up (its
//!   first response, or the client's window if that is longer) is drawn on a logarithmic time
//!   axis ticked in round seconds, minutes, hours and days: on a linear axis the start-up —
//!   where the lifetime average lags — would be a sliver at the left edge (B2 lasts 28 h; its
//!   lifetime average settles within the first hour). Other runs get a linear axis in seconds
//!   (up to 15 min), minutes (up to 10 h) or hours, named in the axis label.
//! * **Time series.** The run's regularly spaced series merged with the minute-by-minute points
//!   of the first 15 minutes and the observations: the same quantities at more instants.
//! * **Latency axis.** Seconds; logarithmic when the 99th percentile exceeds the 1st by more
//!   than [`LOG_LATENCY_SPREAD`] times (TTFT and E2E together), else linear from 0.
//! * **Colours** (Okabe–Ito, distinguishable with colour-blindness): the lifetime average is a
//!   thick vermillion line, the windowed rate a thin blue one, the steady state green with its
//!   95 % interval shaded; the server is purple.
//! * **Legends** go where they hide no data line, raising the top of the y axis (by at most
//!   60 %) when there is no such place.
//! * **Text** is Noto Sans (Apache-2.0), embedded in the binary and registered with plotters
//!   once per process, so figures render the same on a machine with no fonts installed. SVG
//!   files name the font `Noto Sans, sans-serif`: the viewer uses Noto Sans if installed, else
//!   its own sans-serif font (legend boxes leave room for a wider one).
//! * **PNG** is encoded here (`plots/png.rs`): plotters' own encoder writes only to files.

mod axis;
mod legend;
mod memory;
mod plan;
mod png;
mod style;
mod sweep;

pub use memory::{memory_figure, MEMORY_TITLE};
pub use plan::{plan_figure, PLAN_TITLE};
pub use sweep::{sweep_figures, sweep_title, MAX_SWEEP_LINES};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use thiserror::Error;

use crate::analysis::Analysis;
use crate::metrics::latency::Stats;
use crate::metrics::{Distribution, RunResult, Sample};

use axis::{human_duration, sig3, thousands, LatencyAxis, Ticked, TimeAxis};
use legend::{draw_legend, place_legend, Entry, Fit, Placement, Swatch};
use style::{
    heading, plot_px, BLUE, DARK, DESC_PX, FONT, GREEN, GREY, GRID_BOLD, GRID_LIGHT, LIGHT_BLUE,
    ORANGE, PANEL_MARGIN_BOTTOM_PX, PANEL_MARGIN_LEFT_PX, PANEL_MARGIN_TOP_PX, PURPLE, RED,
    RIGHT_MARGIN_PX, TICK_PX, TOP_PANEL_MARGIN_BOTTOM_PX, TOP_PANEL_X_AREA_PX, VERMILLION,
    X_LABEL_AREA_PX, Y_LABEL_AREA_PX,
};

/// Width of a figure: pixels (PNG) or user units (SVG).
pub const WIDTH_PX: u32 = 1200;
/// Height of a figure: pixels (PNG) or user units (SVG).
pub const HEIGHT_PX: u32 = 700;
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

/// The file format of a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// A PNG image, [`WIDTH_PX`] × [`HEIGHT_PX`] pixels, 8-bit RGB.
    Png,
    /// An SVG document (UTF-8 text).
    Svg,
}

impl Format {
    /// Both formats, PNG first.
    pub const ALL: [Format; 2] = [Format::Png, Format::Svg];

    /// The file extension, without the dot: `png` or `svg`.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
}

/// Why a figure could not be drawn.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlotError {
    /// plotters refused the embedded font.
    #[error("the embedded Noto Sans font could not be registered with plotters")]
    Font,
    /// plotters failed while drawing.
    #[error("drawing the {figure} figure failed: {message}")]
    Draw {
        /// Which figure.
        figure: &'static str,
        /// plotters' message.
        message: String,
    },
}

static FONTS: Once = Once::new();
static FONTS_FAILED: AtomicBool = AtomicBool::new(false);

/// Register the embedded Noto Sans as plotters' `sans-serif`, `serif` and `monospace`
/// families, once per process. Every figure function calls it first.
///
/// The figures name their font `Noto Sans, sans-serif`, registered too: plotters measures and
/// draws it with the embedded font, and an SVG viewer reads the name as a CSS font list, so it
/// uses Noto Sans where installed (the text then fits the boxes measured for it) and its
/// sans-serif font elsewhere.
pub fn register_fonts() -> Result<(), PlotError> {
    FONTS.call_once(|| {
        for family in ["sans-serif", "serif", "monospace", style::FONT] {
            if register_font(family, FontStyle::Normal, ttf_noto_sans::REGULAR).is_err() {
                FONTS_FAILED.store(true, Ordering::SeqCst);
            }
        }
    });
    if FONTS_FAILED.load(Ordering::SeqCst) {
        Err(PlotError::Font)
    } else {
        Ok(())
    }
}

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
    render(&ThroughputFigure { r, a, observe_at_s }, fmt)
}

/// Running, queued and in-flight requests over time; below, on the same time axis, the KV
/// token usage as a fraction of the pool.
pub fn engine_state(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&EngineFigure { r }, fmt)
}

/// The empirical CDFs of TTFT and end-to-end latency, in seconds, with p50, p90 and p99
/// marked.
pub fn latency_cdf(r: &RunResult, fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&LatencyFigure { r }, fmt)
}

// ---------------------------------------------------------------------------------------------
// Rendering

/// A plotters failure, before it is attributed to a figure.
struct DrawFailure(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawFailure {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawFailure(e.to_string())
    }
}

/// One figure, drawable on any backend.
trait Figure {
    /// Its name in error messages.
    const NAME: &'static str;
    /// Draw on `root`, already filled white; `raster` is true for a bitmap.
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure>;
}

fn render<F: Figure>(fig: &F, fmt: Format) -> Result<Vec<u8>, PlotError> {
    register_fonts()?;
    let fail = |e: DrawFailure| PlotError::Draw {
        figure: F::NAME,
        message: e.0,
    };
    let size = (WIDTH_PX, HEIGHT_PX);
    match fmt {
        Format::Png => {
            let mut rgb = vec![0u8; WIDTH_PX as usize * HEIGHT_PX as usize * 3];
            let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
            draw_on(fig, &root, true).map_err(fail)?;
            drop(root);
            Ok(png::encode_rgb(WIDTH_PX, HEIGHT_PX, &rgb))
        }
        Format::Svg => {
            let mut svg = String::new();
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            draw_on(fig, &root, false).map_err(fail)?;
            drop(root);
            Ok(svg.into_bytes())
        }
    }
}

fn draw_on<F: Figure, DB: DrawingBackend>(
    fig: &F,
    root: &DrawingArea<DB, Shift>,
    raster: bool,
) -> Result<(), DrawFailure> {
    root.fill(&WHITE)?;
    fig.draw(root, raster)?;
    root.present()?;
    Ok(())
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Ticked, Ticked>>;

/// A panel with its grid and axis descriptions. `x_desc` is `None` for a panel above another
/// that shares its time axis: it gets no x tick labels. Its plot has the size `plot_px` says.
fn panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    x: Ticked,
    x_label: &dyn Fn(f64) -> String,
    x_desc: Option<&str>,
    y: Ticked,
    y_desc: &str,
) -> Result<Chart<'a, DB>, DrawFailure> {
    let bottom = x_desc.is_some();
    let mut chart = ChartBuilder::on(area)
        .margin_top(PANEL_MARGIN_TOP_PX)
        .margin_right(RIGHT_MARGIN_PX)
        .margin_left(PANEL_MARGIN_LEFT_PX)
        .margin_bottom(if bottom {
            PANEL_MARGIN_BOTTOM_PX
        } else {
            TOP_PANEL_MARGIN_BOTTOM_PX
        })
        .x_label_area_size(if bottom {
            X_LABEL_AREA_PX as i32
        } else {
            TOP_PANEL_X_AREA_PX
        })
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(x, y.clone())?;
    let fx = |v: &f64| if bottom { x_label(*v) } else { String::new() };
    let fy = |v: &f64| y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .y_desc(y_desc)
        .label_style((FONT, TICK_PX))
        .axis_desc_style((FONT, DESC_PX))
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT);
    if let Some(d) = x_desc {
        mesh.x_desc(d);
    }
    mesh.draw()?;
    Ok(chart)
}

/// Plan the legend of a panel drawn in `area` (see [`place_legend`]).
fn plan_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    bottom: bool,
    entries: &[Entry],
    lines: &[Vec<(f64, f64)>],
    y_hi: f64,
    fit: Fit,
) -> Result<Placement, DrawFailure> {
    let plot = plot_px(area.dim_in_pixel(), bottom);
    place_legend(area, plot, entries, lines, y_hi, fit)
}

/// How legends fit: `max_stretch` and `prefer_top` as [`Fit`] says, text measured wider in SVG
/// (whose viewer may draw it in a font wider than Noto Sans).
fn fit(raster: bool, max_stretch: f64, prefer_top: bool) -> Fit {
    Fit {
        max_stretch,
        prefer_top,
        text_scale: style::text_scale(raster),
    }
}

/// Draw a polyline `width` pixels wide.
///
/// On a bitmap, plotters widens a line into a polygon, which leaves holes and spikes where a
/// noisy series zigzags; there the line is drawn as 1-pixel lines side by side instead.
fn line<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    pts: &[(f64, f64)],
    colour: RGBColor,
    width: u32,
    raster: bool,
) -> Result<(), DrawFailure> {
    if !raster || width <= 1 {
        chart.draw_series(LineSeries::new(
            pts.iter().copied(),
            colour.stroke_width(width),
        ))?;
        return Ok(());
    }
    let (pw, ph) = chart.plotting_area().dim_in_pixel();
    let (xr, yr) = (chart.x_range(), chart.y_range());
    let dx = (xr.end - xr.start) / f64::from(pw.max(1));
    let dy = (yr.end - yr.start) / f64::from(ph.max(1));
    let first = -((width as i32 - 1) / 2);
    for k in first..first + width as i32 {
        let o = f64::from(k);
        chart.draw_series(LineSeries::new(
            pts.iter().map(|&(x, y)| (x + o * dx, y)),
            colour.stroke_width(1),
        ))?;
        if k != 0 {
            chart.draw_series(LineSeries::new(
                pts.iter().map(|&(x, y)| (x, y - o * dy)),
                colour.stroke_width(1),
            ))?;
        }
    }
    Ok(())
}

/// A vertical dashed marker at `x` across the panel.
fn marker<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    x: f64,
    style: ShapeStyle,
    dash: u32,
) -> Result<(), DrawFailure> {
    let yr = chart.y_range();
    chart.draw_series(DashedLineSeries::new(
        [(x, yr.start), (x, yr.end)],
        dash,
        dash.max(3),
        style,
    ))?;
    Ok(())
}

/// The time series to draw: the regular samples, the first minutes and the observations up to
/// the end of the run, ordered by time, one point per instant.
fn timeline(r: &RunResult) -> Vec<&Sample> {
    let end_s = r.samples.last().map_or(r.totals.sim_duration_s, |s| {
        s.t_s.max(r.totals.sim_duration_s)
    });
    let mut pts: Vec<&Sample> = r
        .samples
        .iter()
        .chain(
            r.first_minutes
                .iter()
                .chain(&r.observations)
                .filter(|s| s.t_s <= end_s),
        )
        .filter(|s| s.t_s.is_finite())
        .collect();
    pts.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    pts.dedup_by(|a, b| a.t_s == b.t_s);
    pts
}

/// `(x, value)` of every point on the axis with a finite value.
fn series(pts: &[&Sample], axis: &TimeAxis, value: fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    pts.iter()
        .filter_map(|s| Some((axis.x(s.t_s)?, value(s))))
        .filter(|p| p.1.is_finite())
        .collect()
}

/// The top of a y axis from 0 that leaves `headroom` above `max`.
fn y_top(max: f64, headroom: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * headroom
    } else {
        1.0
    }
}

/// Lines as polylines of (fraction of the time axis, value), for placing a legend.
fn along<'p>(
    axis: &TimeAxis,
    lines: impl IntoIterator<Item = &'p [(f64, f64)]>,
) -> Vec<Vec<(f64, f64)>> {
    lines
        .into_iter()
        .map(|pts| pts.iter().map(|&(x, v)| (axis.fraction(x), v)).collect())
        .collect()
}

/// The largest value of `lines`.
fn highest(lines: &[Vec<(f64, f64)>]) -> f64 {
    lines.iter().flatten().map(|p| p.1).fold(0.0, f64::max)
}

/// Most the y axis of a time panel may grow to make room for its legend.
const MAX_STRETCH: f64 = 1.6;

// ---------------------------------------------------------------------------------------------
// Throughput

struct ThroughputFigure<'a> {
    r: &'a RunResult,
    a: &'a Analysis,
    observe_at_s: &'a [f64],
}

impl ThroughputFigure<'_> {
    fn subtitle(&self) -> String {
        let s = &self.a.steady;
        if s.req_per_s <= 0.0 {
            return "No request completed in the steady window: there is no steady rate to show."
                .to_string();
        }
        let first = self
            .r
            .first_completion_s
            .map(|t| format!("First response at t = {}. ", human_duration(t)))
            .unwrap_or_default();
        let head = format!(
            "{first}Steady state {} req/s from t = {}. The lifetime average ",
            sig3(s.req_per_s),
            human_duration(s.start_s)
        );
        match self.a.convergence.lifetime_within_5pct_at_s {
            Some(t) => format!(
                "{head}stays within 5 % of it from t = {} on.",
                human_duration(t)
            ),
            None => format!("{head}never gets within 5 % of it before the drain."),
        }
    }
}

impl Figure for ThroughputFigure<'_> {
    const NAME: &'static str = "throughput";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let (r, steady) = (self.r, &self.a.steady);
        let body = heading(root, THROUGHPUT_TITLE, &self.subtitle())?;
        let pts = timeline(r);
        let axis = TimeAxis::for_run(r, &pts);
        let x_label = |x: f64| axis.tick_label(x);
        let top_h = (f64::from(body.dim_in_pixel().1) * 0.6) as u32;
        let (top, bottom) = body.split_vertically(top_h);

        let marks: Vec<f64> = self
            .observe_at_s
            .iter()
            .filter_map(|&t| axis.x(t))
            .collect();
        let converged = self
            .a
            .convergence
            .lifetime_within_5pct_at_s
            .and_then(|t| Some((t, axis.x(t)?)));
        let (x0, x1) = (axis.x_clamped(steady.start_s), axis.x_clamped(steady.end_s));
        let has_steady = steady.req_per_s > 0.0 && x1 > x0;
        // A level line over the steady window (none without a steady state).
        let steady_line = |v: f64| -> Vec<(f64, f64)> {
            if has_steady {
                vec![(x0, v), (x1, v)]
            } else {
                Vec::new()
            }
        };

        // Top: the client's two rates against the steady state.
        let lifetime = series(&pts, &axis, |s| s.lifetime_req_per_s);
        let windowed = series(&pts, &axis, |s| s.window_req_per_s);
        let [ci_lo, ci_hi] = steady.req_per_s_ci95;
        let mut entries = vec![
            Entry::new(
                "lifetime average: completed \u{f7} t (what a progress bar shows)",
                Swatch::Line(VERMILLION.stroke_width(4)),
            ),
            Entry::new(
                format!(
                    "windowed rate: completions per second over the last {}",
                    human_duration(r.window_s)
                ),
                Swatch::Line(LIGHT_BLUE.stroke_width(2)),
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
                Swatch::Band(GREEN.stroke_width(3), GREEN.mix(0.2).filled()),
            ));
        }
        if let Some((t, _)) = converged {
            entries.push(Entry::new(
                format!(
                    "lifetime average within 5 % of steady from t = {}",
                    human_duration(t)
                ),
                Swatch::Dashed(GREEN.stroke_width(2)),
            ));
        }
        if !marks.is_empty() {
            let shown: Vec<String> = self
                .observe_at_s
                .iter()
                .filter(|&&t| axis.x(t).is_some())
                .take(4)
                .map(|&t| human_duration(t))
                .collect();
            let more = if marks.len() > 4 { ", \u{2026}" } else { "" };
            entries.push(Entry::new(
                format!("observation times: {}{more}", shown.join(", ")),
                Swatch::Dashed(GREY.stroke_width(2)),
            ));
        }
        let data = along(
            &axis,
            [&lifetime[..], &windowed[..], &steady_line(ci_hi)[..]],
        );
        let y_max = highest(&data);
        let place = plan_legend(
            &top,
            false,
            &entries,
            &data,
            y_top(y_max, 1.08),
            fit(raster, MAX_STRETCH, true),
        )?;
        let y = Ticked::linear(0.0, place.y_hi, 8);
        let mut chart = panel(
            &top,
            axis.coord(),
            &x_label,
            None,
            y,
            "client completions (req/s)",
        )?;
        if has_steady {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, ci_lo), (x1, ci_hi)],
                GREEN.mix(0.2).filled(),
            )))?;
        }
        for &x in &marks {
            marker(&mut chart, x, GREY.stroke_width(2), 6)?;
        }
        if let Some((_, x)) = converged {
            marker(&mut chart, x, GREEN.stroke_width(2), 3)?;
        }
        line(&mut chart, &windowed, LIGHT_BLUE, 1, raster)?;
        if has_steady {
            line(&mut chart, &steady_line(steady.req_per_s), GREEN, 3, raster)?;
        }
        line(&mut chart, &lifetime, VERMILLION, 4, raster)?;
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;

        // Bottom: the server's gen throughput, on the same time axis.
        let gen = series(&pts, &axis, |s| s.gen_tok_per_s);
        let out = steady.output_tok_per_s;
        let show_out = has_steady && out > 0.0;
        let mut entries = vec![Entry::new(
            "server gen throughput (SGLang's latest Decode log line)",
            Swatch::Line(PURPLE.stroke_width(2)),
        )];
        if show_out {
            entries.push(Entry::new(
                format!("steady state: {} output tok/s", sig3(out)),
                Swatch::Dashed(DARK.stroke_width(2)),
            ));
        }
        let out_line = if show_out {
            steady_line(out)
        } else {
            Vec::new()
        };
        let data = along(&axis, [&gen[..], &out_line[..]]);
        let g_max = highest(&data);
        let place = plan_legend(
            &bottom,
            true,
            &entries,
            &data,
            y_top(g_max, 1.1),
            fit(raster, MAX_STRETCH, true),
        )?;
        let description = axis.description();
        let mut chart = panel(
            &bottom,
            axis.coord(),
            &x_label,
            Some(&description),
            Ticked::linear(0.0, place.y_hi, 5),
            "server gen (tok/s)",
        )?;
        for &x in &marks {
            marker(&mut chart, x, GREY.stroke_width(2), 6)?;
        }
        line(&mut chart, &gen, PURPLE, 1, raster)?;
        if show_out {
            chart.draw_series(DashedLineSeries::new(
                [(x0, out), (x1, out)],
                10,
                5,
                DARK.stroke_width(2),
            ))?;
        }
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Engine state

struct EngineFigure<'a> {
    r: &'a RunResult,
}

impl Figure for EngineFigure<'_> {
    const NAME: &'static str = "engine state";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let r = self.r;
        let avg = &r.time_avg;
        let subtitle = format!(
            "Time averages over the run: {:.1} running, {:.1} queued, {:.1} in flight; token \
             usage {:.2} of a KV pool of {} tokens.",
            avg.running,
            avg.queued,
            avg.in_flight,
            avg.token_usage,
            thousands(r.kv_capacity_tokens)
        );
        let body = heading(root, ENGINE_STATE_TITLE, &subtitle)?;
        let pts = timeline(r);
        let axis = TimeAxis::for_run(r, &pts);
        let x_label = |x: f64| axis.tick_label(x);
        let top_h = (f64::from(body.dim_in_pixel().1) * 0.58) as u32;
        let (top, bottom) = body.split_vertically(top_h);

        let running = series(&pts, &axis, |s| s.running as f64);
        let queued = series(&pts, &axis, |s| s.queued as f64);
        let in_flight = series(&pts, &axis, |s| s.in_flight as f64);
        let usage = series(&pts, &axis, |s| s.token_usage);

        let entries = [
            Entry::new(
                "in flight at the client (sent, not answered)",
                Swatch::Dashed(GREY.stroke_width(2)),
            ),
            Entry::new("queued at the server", Swatch::Line(ORANGE.stroke_width(2))),
            Entry::new(
                "running at the server (decode batch + prefill)",
                Swatch::Line(BLUE.stroke_width(2)),
            ),
        ];
        let data = along(&axis, [&running[..], &queued[..], &in_flight[..]]);
        let n_max = highest(&data);
        let y_hi = y_top(n_max, 1.08).max(1.0);
        let place = plan_legend(
            &top,
            false,
            &entries,
            &data,
            y_hi,
            fit(raster, MAX_STRETCH, true),
        )?;
        let mut chart = panel(
            &top,
            axis.coord(),
            &x_label,
            None,
            Ticked::linear(0.0, place.y_hi, 6),
            "requests",
        )?;
        chart.draw_series(DashedLineSeries::new(
            in_flight.iter().copied(),
            8,
            4,
            GREY.stroke_width(2),
        ))?;
        line(&mut chart, &queued, ORANGE, 2, raster)?;
        line(&mut chart, &running, BLUE, 2, raster)?;
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;

        let fill = GREEN.mix(0.18).filled();
        let entries = [
            Entry::new(
                format!(
                    "token usage: KV tokens in use \u{f7} {} (SGLang's #token / max_total_num_tokens)",
                    thousands(r.kv_capacity_tokens)
                ),
                Swatch::Band(GREEN.stroke_width(2), fill),
            ),
            Entry::new("the pool is full", Swatch::Dashed(RED.stroke_width(2))),
        ];
        // The shading under the line is not data a legend must avoid; the line is.
        let full = [(axis.lo, 1.0), (axis.hi, 1.0)];
        let data = along(&axis, [&usage[..], &full[..]]);
        let place = plan_legend(&bottom, true, &entries, &data, 1.1, fit(raster, 1.0, true))?;
        let description = axis.description();
        let mut chart = panel(
            &bottom,
            axis.coord(),
            &x_label,
            Some(&description),
            Ticked::linear(0.0, place.y_hi, 6),
            "KV token usage (fraction)",
        )?;
        chart.draw_series(AreaSeries::new(usage.iter().copied(), 0.0, fill))?;
        line(&mut chart, &usage, GREEN, 1, raster)?;
        chart.draw_series(DashedLineSeries::new(full, 10, 5, RED.stroke_width(2)))?;
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Latency

struct LatencyFigure<'a> {
    r: &'a RunResult,
}

/// One latency curve of the figure.
struct Curve {
    name: &'static str,
    stats: Stats,
    /// (axis x, cumulative fraction).
    pts: Vec<(f64, f64)>,
    colour: RGBColor,
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

impl Figure for LatencyFigure<'_> {
    const NAME: &'static str = "latency";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let r = self.r;
        let ttft = cdf_seconds(&r.latency.ttft_ms);
        let e2e = cdf_seconds(&r.latency.e2e_ms);
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
        let axis = LatencyAxis::for_curves(&[&ttft, &e2e]);
        let x_label = |x: f64| axis.tick_label(x);

        let curves: Vec<Curve> = [
            ("TTFT (first token)", &r.latency.ttft_ms, &ttft, BLUE),
            ("E2E (last token)", &r.latency.e2e_ms, &e2e, VERMILLION),
        ]
        .into_iter()
        .filter_map(|(name, d, c, colour)| {
            let first = c.first()?;
            // Start at 0, so the curve visibly rises from the axis.
            let pts = std::iter::once((axis.x(first.0), 0.0))
                .chain(c.iter().map(|&(v, q)| (axis.x(v), q)))
                .collect();
            Some(Curve {
                name,
                stats: d.stats(),
                pts,
                colour,
            })
        })
        .collect();
        let entries: Vec<Entry> = curves
            .iter()
            .map(|c| {
                Entry::new(
                    format!(
                        "{}: p50 {} s, p90 {} s, p99 {} s",
                        c.name,
                        sig3(c.stats.p50 / 1000.0),
                        sig3(c.stats.p90 / 1000.0),
                        sig3(c.stats.p99 / 1000.0)
                    ),
                    Swatch::Line(c.colour.stroke_width(3)),
                )
            })
            .collect();
        let data: Vec<Vec<(f64, f64)>> = curves
            .iter()
            .map(|c| c.pts.iter().map(|&(x, q)| (axis.fraction(x), q)).collect())
            .collect();
        let place = plan_legend(&body, true, &entries, &data, 1.04, fit(raster, 1.0, false))?;
        let mut chart = panel(
            &body,
            axis.coord(),
            &x_label,
            Some(axis.description()),
            Ticked::linear(0.0, place.y_hi, 11),
            "fraction of requests (CDF)",
        )?;
        for c in &curves {
            line(&mut chart, &c.pts, c.colour, 3, raster)?;
            let st = &c.stats;
            chart.draw_series(
                [(st.p50, 0.5), (st.p90, 0.9), (st.p99, 0.99)]
                    .into_iter()
                    .map(|(ms, q)| Circle::new((axis.x(ms / 1000.0), q), 5, c.colour.filled())),
            )?;
        }
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

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

    fn png_size(png: &[u8]) -> (u32, u32) {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&png[12..16], b"IHDR", "IHDR first");
        let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
        (be(16), be(20))
    }

    fn svg_text(svg: &[u8]) -> &str {
        let s = std::str::from_utf8(svg).expect("SVG is UTF-8");
        assert!(s.trim_start().starts_with("<svg"), "an SVG document");
        assert!(s.trim_end().ends_with("</svg>"), "a complete SVG document");
        s
    }

    /// Every figure of `r` in both formats, checked; returns the three PNGs.
    fn render_all(r: &RunResult, observe_at_s: &[f64]) -> Vec<Vec<u8>> {
        let a = analyse(r);
        let mut pngs = Vec::new();
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
            pngs.push(png);
            let svg = draw(Format::Svg).unwrap_or_else(|e| panic!("{title}: {e}"));
            let s = svg_text(&svg);
            assert!(s.contains(title), "the SVG holds its title {title:?}");
            assert!(s.matches("<text").count() >= 10, "{title}: text is drawn");
        }
        pngs
    }

    #[test]
    fn every_figure_renders_in_both_formats() {
        let r = simulate(&small(2.0));
        let pngs = render_all(&r, &[5.0, 12.0]);
        // The throughput PNG really holds the lifetime line and the text: decode it and
        // look for the lifetime colour and for dark (text) pixels.
        let (w, h, px) = png::decode_rgb(&pngs[0]);
        assert_eq!((w, h), (WIDTH_PX, HEIGHT_PX));
        let count = |c: RGBColor| px.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count();
        assert!(count(VERMILLION) > 500, "the lifetime line is drawn");
        assert!(count(BLACK) > 500, "the title is drawn");
    }

    #[test]
    fn a_long_run_gets_a_log_time_axis_and_a_short_one_a_linear_axis() {
        // The start-up is the first response or the window, whichever is later.
        let long = simulate(&small(1.0));
        let short = simulate(&small(30.0));
        let pts = timeline(&long);
        assert!(TimeAxis::for_run(&long, &pts).log);
        let pts = timeline(&short);
        assert!(!TimeAxis::for_run(&short, &pts).log);
        let svg = throughput(&long, &analyse(&long), &[], Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("log scale"));
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
    fn figures_are_deterministic() {
        let r = simulate(&small(2.0));
        assert_eq!(
            engine_state(&r, Format::Svg).unwrap(),
            engine_state(&r, Format::Svg).unwrap()
        );
    }

    #[test]
    fn fonts_register_once_and_formats_name_their_files() {
        register_fonts().unwrap();
        register_fonts().unwrap();
        assert_eq!(Format::Png.extension(), "png");
        assert_eq!(Format::Svg.extension(), "svg");
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
