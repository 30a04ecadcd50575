//! Figures: pure functions from computed data to PNG or SVG bytes. They draw; what they show
//! (the steady state, the plan's picks and Pareto front, memory verdicts) is worked out by
//! their callers.
//!
//! * [`throughput`], [`engine_state`], [`latency_cdf`], [`cache_hit_rate`]: one run (`run.rs`).
//! * [`sweep_figures`]: every summary metric of a sweep against each varied key (`sweep.rs`).
//! * [`compare_cdf`]: measured vs. simulated latency CDFs for `servesim compare` (`compare.rs`).
//! * [`memory_figure`]: SGLang's split of GPU memory over a range of fractions (`memory.rs`).
//! * [`plan_figure`]: cost against time to finish for `servesim plan` (`plan.rs`).
//!
//! They share one axis type, linear or logarithmic (`axis.rs`); one palette (Okabe–Ito) and one
//! legend, plotters' series labels put in the corner that hides the fewest data points
//! (`style.rs`). Text is Noto Sans, embedded and registered with plotters, so figures render
//! the same on a machine with no fonts; SVG names it `Noto Sans, sans-serif`. PNG is encoded
//! here: plotters' own encoder writes only to files.

mod axis;
mod compare;
mod memory;
mod plan;
mod run;
mod style;
mod sweep;

pub use compare::{compare_cdf, COMPARE_TITLE};
pub use memory::{memory_figure, MEMORY_TITLE};
pub use plan::{plan_figure, PLAN_TITLE};
pub use run::{
    cache_hit_rate, engine_state, latency_cdf, throughput, CACHE_TITLE, ENGINE_STATE_TITLE,
    LATENCY_TITLE, LOG_LATENCY_SPREAD, LOG_TIME_FACTOR, THROUGHPUT_TITLE,
};
pub use sweep::{sweep_figures, sweep_title, MAX_SWEEP_LINES};

use std::sync::OnceLock;

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

/// Register the embedded Noto Sans as plotters' `sans-serif`, `serif` and `monospace`
/// families and as `Noto Sans, sans-serif` (the name the figures use, which an SVG viewer
/// reads as a CSS font list), once per process. Every figure function calls it first.
pub fn register_fonts() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let families = ["sans-serif", "serif", "monospace", FONT];
    let font = |f: &&str| register_font(f, FontStyle::Normal, ttf_noto_sans::REGULAR).is_ok();
    let ok = *REGISTERED.get_or_init(|| families.iter().all(font));
    ok.then_some(()).ok_or(PlotError::Font)
}

/// A plotters failure, before it is attributed to a figure.
struct DrawFailure(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawFailure {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawFailure(e.to_string())
    }
}

/// What drawing gives: `T`, or plotters' failure.
type Drawn<T = ()> = Result<T, DrawFailure>;
/// An area to draw on, in pixels.
type Area<DB> = DrawingArea<DB, Shift>;
/// A chart of two [`Axis`].
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

/// One figure, drawable on any backend.
trait Figure {
    /// Its name in error messages.
    const NAME: &'static str;
    /// Draw on `root`, already filled white; `raster` is true for a bitmap.
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn;
}

fn render<F: Figure>(fig: &F, fmt: Format) -> Result<Vec<u8>, PlotError> {
    fn draw<F: Figure, DB: DrawingBackend>(f: &F, root: Area<DB>, raster: bool) -> Drawn {
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
            Ok(encode_png(&rgb))
        }
        Format::Svg => {
            let mut svg = String::new();
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            draw(fig, root, false).map_err(fail)?;
            Ok(svg.into_bytes())
        }
    }
}

/// PNG bytes of a figure drawn as 8-bit RGB.
fn encode_png(rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, WIDTH_PX, HEIGHT_PX);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Default); // The encoder's own default is Fast.
    let invariant = "invariant: a width × height × 3 RGB buffer encodes to memory";
    let mut w = enc.write_header().expect(invariant);
    w.write_image_data(rgb).expect(invariant);
    w.finish().expect(invariant);
    out
}

/// The chart of a panel on `area`, before anything is drawn. A `bottom` panel has room for x
/// tick labels and the x description; one above another (sharing its x axis) has none.
fn build<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    x: &Axis,
    y: &Axis,
    bottom: bool,
) -> Drawn<Chart<'a, DB>> {
    let (x_area, margin) = [(4, 12), (X_LABEL_AREA_PX, 6)][usize::from(bottom)];
    let mut b = ChartBuilder::on(area);
    b.margin_top(8).margin_right(24).margin_left(8);
    b.margin_bottom(margin).x_label_area_size(x_area);
    b.y_label_area_size(Y_LABEL_AREA_PX);
    Ok(b.build_cartesian_2d(x.clone(), y.clone())?)
}

/// A panel: the chart with its grid, tick labels and axis descriptions. `x_desc` is `None`
/// for a panel above another that shares its x axis: it gets no x tick labels.
fn panel<'a, DB: DrawingBackend>(
    area: &'a Area<DB>,
    x: &Axis,
    y: &Axis,
    x_desc: Option<&str>,
    y_desc: &str,
) -> Drawn<Chart<'a, DB>> {
    let mut chart = build(area, x, y, x_desc.is_some())?;
    let fx = |v: &f64| x_desc.map_or(String::new(), |_| x.label(*v));
    let fy = |v: &f64| y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&fx).y_label_formatter(&fy);
    mesh.x_desc(x_desc.unwrap_or("")).y_desc(y_desc);
    mesh.label_style((FONT, TEXT_PX))
        .axis_desc_style((FONT, DESC_PX));
    mesh.bold_line_style(GRID_BOLD).light_line_style(GRID_LIGHT);
    mesh.draw()?;
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
) -> Drawn {
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
    [1.0, max * headroom][usize::from(max.is_finite() && max > 0.0)]
}

/// Test helpers shared by the figures' tests.
#[cfg(test)]
mod check {
    use super::{Format, PlotError, HEIGHT_PX, WIDTH_PX};

    /// A figure in both formats, checked: the PNG's pixels (RGB), and the SVG. Written to
    /// `SERVESIM_LOOK_DIR` if set, for a person to look at, as tests/it/plots.rs does.
    pub(super) fn both(draw: impl Fn(Format) -> Result<Vec<u8>, PlotError>) -> (Vec<u8>, String) {
        let bytes = draw(Format::Png).unwrap();
        let mut reader = png::Decoder::new(&bytes[..]).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!((info.width, info.height), (WIDTH_PX, HEIGHT_PX));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        rgb.truncate(info.buffer_size());
        let svg = String::from_utf8(draw(Format::Svg).unwrap()).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        if let Some(dir) = std::env::var_os("SERVESIM_LOOK_DIR").map(std::path::PathBuf::from) {
            let test = std::thread::current()
                .name()
                .unwrap_or("figure")
                .replace("::", "-");
            let n = std::fs::read_dir(&dir).map_or(0, |d| d.count());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("{test}-{n}.png")), &bytes).unwrap();
            std::fs::write(dir.join(format!("{test}-{n}.svg")), &svg).unwrap();
        }
        (rgb, svg)
    }

    /// The texts of an SVG, each on its own line (trimmed of the en spaces that pad legend
    /// entries), with a newline before the first.
    pub(super) fn texts(svg: &str) -> String {
        let lines: Vec<String> = placed(svg).into_iter().map(|t| t.2).collect();
        format!("\n{}\n", lines.join("\n"))
    }

    /// The texts of an SVG with their positions: `(x, y, text)`.
    pub(super) fn placed(svg: &str) -> Vec<(f64, f64, String)> {
        let attr = |t: &str, a: &str| t.split(a).nth(1)?.split('"').nth(1)?.parse().ok();
        let text = |t: &str| -> Option<(f64, f64, String)> {
            let inner = t.split_once('>')?.1.split_once("</text>")?.0.trim();
            let inner = inner.replace("&lt;", "<").replace("&amp;", "&");
            Some((attr(t, " x=")?, attr(t, " y=")?, inner))
        };
        svg.split("<text").skip(1).filter_map(text).collect()
    }

    /// How many pixels of RGB data have exactly the colour `c`.
    pub(super) fn pixels(rgb: &[u8], c: plotters::style::RGBColor) -> usize {
        rgb.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count()
    }

    /// A scenario file of the repository.
    pub(super) fn scenario_file(name: &str) -> crate::scenario::Source {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        crate::scenario::Source::read(&dir.join(name)).unwrap()
    }
}
