//! Figures: pure functions from computed data to PNG or SVG bytes. They draw; what they show
//! (the steady state, the plan's picks and Pareto front, memory verdicts) is worked out by
//! their callers.
//!
//! * [`throughput`], [`engine_state`], [`latency_cdf`] — one run (`run.rs`).
//! * [`sweep_figures`] — every summary metric of a sweep against each varied key (`sweep.rs`).
//! * [`memory_figure`] — SGLang's split of GPU memory over a range of fractions (`memory.rs`).
//! * [`plan_figure`] — cost against time to finish for `servesim plan` (`plan.rs`).
//!
//! Shared choices: one axis type, linear or logarithmic (`axis.rs`); one palette (Okabe–Ito,
//! distinguishable with colour-blindness) and one legend, plotters' series labels placed in the
//! corner of the plot that hides the fewest data points, the top of the y axis raised a little
//! if that frees one (`style.rs`); plotters' own dashed lines and error bars. Text is Noto Sans
//! (Apache-2.0), embedded in the binary and registered with plotters once per process, so
//! figures render the same on a machine with no fonts installed; SVG files name the font
//! `Noto Sans, sans-serif`. PNG is encoded here (`png.rs`): plotters' encoder writes only to
//! files.

mod axis;
mod memory;
mod plan;
mod png;
mod run;
mod style;
mod sweep;

pub use memory::{memory_figure, MEMORY_TITLE};
pub use plan::{plan_figure, PLAN_TITLE};
pub use run::{
    engine_state, latency_cdf, throughput, ENGINE_STATE_TITLE, LATENCY_TITLE, LOG_LATENCY_SPREAD,
    LOG_TIME_FACTOR, THROUGHPUT_TITLE,
};
pub use sweep::{sweep_figures, sweep_title, MAX_SWEEP_LINES};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use thiserror::Error;

use axis::Axis;
use style::{DESC_PX, FONT, GRID_BOLD, GRID_LIGHT, TEXT_PX, X_LABEL_AREA_PX, Y_LABEL_AREA_PX};

/// Width of a figure: pixels (PNG) or user units (SVG).
pub const WIDTH_PX: u32 = 1200;
/// Height of a figure: pixels (PNG) or user units (SVG).
pub const HEIGHT_PX: u32 = 700;

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
/// families and as `Noto Sans, sans-serif` (the name the figures use, which an SVG viewer
/// reads as a CSS font list), once per process. Every figure function calls it first.
pub fn register_fonts() -> Result<(), PlotError> {
    FONTS.call_once(|| {
        for family in ["sans-serif", "serif", "monospace", FONT] {
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

/// A plotters failure, before it is attributed to a figure.
struct DrawFailure(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawFailure {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawFailure(e.to_string())
    }
}

/// An area to draw on, in pixels.
type Area<DB> = DrawingArea<DB, Shift>;
/// A chart of two [`Axis`].
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

/// One figure, drawable on any backend.
trait Figure {
    /// Its name in error messages.
    const NAME: &'static str;
    /// Draw on `root`, already filled white; `raster` is true for a bitmap.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure>;
}

fn render<F: Figure>(fig: &F, fmt: Format) -> Result<Vec<u8>, PlotError> {
    fn draw<F: Figure, DB: DrawingBackend>(
        f: &F,
        root: Area<DB>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        root.fill(&WHITE)?;
        f.draw(&root, raster)?;
        Ok(root.present()?)
    }
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
            draw(fig, root, true).map_err(fail)?;
            Ok(png::encode_rgb(WIDTH_PX, HEIGHT_PX, &rgb))
        }
        Format::Svg => {
            let mut svg = String::new();
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            draw(fig, root, false).map_err(fail)?;
            Ok(svg.into_bytes())
        }
    }
}

/// The chart of a panel on `area`, before anything is drawn. A `bottom` panel has room for x
/// tick labels and the x description; one above another (sharing its x axis) has none.
fn build<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    x: &Axis,
    y: &Axis,
    bottom: bool,
) -> Result<Chart<'a, DB>, DrawFailure> {
    let (x_area, margin) = if bottom {
        (X_LABEL_AREA_PX, 6)
    } else {
        (4, 12)
    };
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(8)
        .margin_right(24)
        .margin_left(8)
        .margin_bottom(margin);
    builder
        .x_label_area_size(x_area)
        .y_label_area_size(Y_LABEL_AREA_PX);
    Ok(builder.build_cartesian_2d(x.clone(), y.clone())?)
}

/// A panel: the chart with its grid, tick labels and axis descriptions. `x_desc` is `None`
/// for a panel above another that shares its x axis: it gets no x tick labels.
fn panel<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    x: &Axis,
    y: &Axis,
    x_desc: Option<&str>,
    y_desc: &str,
) -> Result<Chart<'a, DB>, DrawFailure> {
    let mut chart = build(area, x, y, x_desc.is_some())?;
    let fx = |v: &f64| x_desc.map_or(String::new(), |_| x.label(*v));
    let fy = |v: &f64| y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&fx).y_label_formatter(&fy);
    mesh.x_desc(x_desc.unwrap_or("")).y_desc(y_desc);
    mesh.label_style((FONT, TEXT_PX))
        .axis_desc_style((FONT, DESC_PX));
    mesh.bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    Ok(chart)
}

/// A polyline `width` pixels wide. On a bitmap, plotters widens a line into a polygon, which
/// leaves holes and spikes where a noisy series zigzags; there the line is drawn as 1-pixel
/// lines side by side instead.
fn line<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    pts: &[(f64, f64)],
    colour: RGBColor,
    width: u32,
    raster: bool,
) -> Result<(), DrawFailure> {
    if !raster || width <= 1 {
        let style = colour.stroke_width(width);
        chart.draw_series(LineSeries::new(pts.iter().copied(), style))?;
        return Ok(());
    }
    let (bx, by) = chart.plotting_area().get_base_pixel();
    let px: Vec<(i32, i32)> = pts.iter().map(|p| chart.backend_coord(p)).collect();
    let plot = chart.plotting_area().strip_coord_spec();
    let first = -((width as i32 - 1) / 2);
    for k in first..first + width as i32 {
        for (dx, dy) in [(k - bx, -by), (-bx, k - by)] {
            let shifted: Vec<(i32, i32)> = px.iter().map(|p| (p.0 + dx, p.1 + dy)).collect();
            plot.draw(&PathElement::new(shifted, colour.stroke_width(1)))?;
        }
    }
    Ok(())
}

/// The top of a y axis from 0 that leaves `headroom` above `max` (1 with nothing to show).
fn y_top(max: f64, headroom: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * headroom
    } else {
        1.0
    }
}

/// Test helpers shared by the figures' tests.
#[cfg(test)]
mod check {
    /// The width and height of a PNG, after checking its signature.
    pub(super) fn png_size(png: &[u8]) -> (u32, u32) {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&png[12..16], b"IHDR", "IHDR first");
        let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
        (be(16), be(20))
    }

    /// The SVG document as text, after checking it is whole.
    pub(super) fn svg_text(svg: &[u8]) -> &str {
        let s = std::str::from_utf8(svg).expect("SVG is UTF-8");
        assert!(s.trim_start().starts_with("<svg"), "an SVG document");
        assert!(s.trim_end().ends_with("</svg>"), "a complete SVG document");
        s
    }

    /// The texts of an SVG document's `<text>` elements, trimmed (of the en spaces that pad
    /// legend entries too).
    pub(super) fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let inner = t.split_once('>')?.1.split_once("</text>")?.0;
                Some(inner.trim().replace("&lt;", "<").replace("&amp;", "&"))
            })
            .collect()
    }

    /// Whether some text of `svg` is exactly `want`.
    pub(super) fn has_text(svg: &str, want: &str) -> bool {
        texts(svg).iter().any(|t| t == want)
    }

    /// How many pixels of a PNG have exactly the colour `c`.
    pub(super) fn pixels(png: &[u8], c: plotters::style::RGBColor) -> usize {
        let (_, _, px) = super::png::decode_rgb(png);
        px.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count()
    }

    /// A scenario file of the repository.
    pub(super) fn scenario_file(name: &str) -> crate::scenario::Source {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name);
        crate::scenario::Source::read(&path).expect("the scenario file is readable")
    }
}
