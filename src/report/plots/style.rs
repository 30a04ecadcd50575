//! The figures' look: the font and text sizes, the one palette, markers, the heading, and the
//! one legend (plotters' series labels, placed where they hide the least data).
//!
//! Text other than the title is at most 16 px: plotters' ab_glyph renderer drops each glyph's
//! whole-pixel left bearing, and at 16 px and below Noto Sans's lower-case bearings are under
//! a pixel, so letters keep their spacing (at 17 px "cl" already touches).

use plotters::chart::SeriesLabelPosition;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::axis::Axis;
use super::{build, Chart, DrawFailure};

/// The font every text uses: registered as the embedded Noto Sans, and a CSS font list in SVG.
pub(super) const FONT: &str = "Noto Sans, sans-serif";
/// The title.
pub(super) const TITLE_PX: u32 = 26;
/// The line under the title.
pub(super) const SUBTITLE_PX: u32 = 15;
/// Axis descriptions.
pub(super) const DESC_PX: u32 = 16;
/// Tick labels, legend entries and labels in plots.
pub(super) const TEXT_PX: u32 = 15;
/// Height of the title and subtitle band.
pub(super) const HEADING_PX: u32 = 72;
/// Width of the y-axis label area, the same in every panel so stacked panels line up.
pub(super) const Y_LABEL_AREA_PX: u32 = 84;
/// Height of the x-axis label area of a bottom panel (tick labels and the description).
pub(super) const X_LABEL_AREA_PX: u32 = 56;

// Okabe–Ito colours (distinguishable with colour-blindness), a few darkened for thin lines.
pub(super) const VERMILLION: RGBColor = RGBColor(213, 94, 0);
pub(super) const BLUE: RGBColor = RGBColor(0, 114, 178);
/// [`BLUE`] at 60 % over white, for a noisy series that should stay in the background.
pub(super) const LIGHT_BLUE: RGBColor = RGBColor(102, 170, 209);
pub(super) const GREEN: RGBColor = RGBColor(0, 140, 100);
pub(super) const ORANGE: RGBColor = RGBColor(230, 159, 0);
pub(super) const PURPLE: RGBColor = RGBColor(125, 60, 160);
pub(super) const SKY: RGBColor = RGBColor(86, 180, 233);
pub(super) const PINK: RGBColor = RGBColor(204, 121, 167);
pub(super) const RED: RGBColor = RGBColor(200, 40, 40);
pub(super) const GREY: RGBColor = RGBColor(105, 105, 105);
pub(super) const DARK: RGBColor = RGBColor(40, 40, 40);
pub(super) const GRID_BOLD: RGBColor = RGBColor(218, 218, 218);
pub(super) const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);
const TEXT_GREY: RGBColor = RGBColor(70, 70, 70);
const BORDER: RGBColor = RGBColor(170, 170, 170);

/// A pixel position.
type Px = (i32, i32);

/// Colours of categories (a sweep's lines, a plan's GPU types), in order.
pub(super) const PALETTE: [RGBColor; 8] = [BLUE, VERMILLION, GREEN, PURPLE, SKY, ORANGE, PINK, DARK];

/// `c` at opacity `a` over white, as an opaque colour.
pub(super) fn tint(c: RGBColor, a: f64) -> RGBColor {
    let mix = |v: u8| (f64::from(v) * a + 255.0 * (1.0 - a)).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// Draw the title and a subtitle line at the top left; returns the area under them.
pub(super) fn heading<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<DB, Shift>, DrawFailure> {
    let (head, body) = root.split_vertically(HEADING_PX);
    head.draw_text(title, &(FONT, TITLE_PX).into_font().color(&BLACK), (20, 12))?;
    let sub = (FONT, SUBTITLE_PX).into_font().color(&TEXT_GREY);
    head.draw_text(subtitle, &sub, (20, 46))?;
    Ok(body)
}

/// The width of `text` at `px` pixels.
pub(super) fn text_width<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    px: u32,
) -> Result<i32, DrawFailure> {
    let font = TextStyle::from((FONT, px).into_font());
    Ok(area.estimate_text_size(text, &font)?.0 as i32)
}

/// `text` at `px` broken into lines at most `width` pixels wide, at spaces (a word longer than
/// that stands alone).
pub(super) fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    width: i32,
    px: u32,
) -> Result<Vec<String>, DrawFailure> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(area, &format!("{line} {word}"), px)? <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    Ok(lines)
}

/// A marker's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    Circle,
    Square,
    Up,
    Diamond,
    Down,
    Hexagon,
    /// A ring: a hollow circle.
    Ring,
}

/// A marker's parts: a filled circle and its border, or a filled polygon and its border
/// (the parts a shape does not use are transparent, and not drawn).
pub(super) type Mark = (Circle<Px, i32>, Circle<Px, i32>, Polygon<Px>, PathElement<Px>);

/// A marker of radius `r` around (0, 0), to be placed with `EmptyElement::at(p) + a + b + c +
/// d`. Filled shapes have a white border that keeps overlapping markers apart; a ring is
/// white inside.
pub(super) fn mark(shape: Shape, r: i32, colour: RGBColor) -> Mark {
    mark_at(shape, r, colour, 0)
}

/// [`mark`] around `(dx, 0)`.
fn mark_at(shape: Shape, r: i32, colour: RGBColor, dx: i32) -> Mark {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};
    let none = TRANSPARENT.filled();
    let circle = |r: i32, style: ShapeStyle| Circle::new((dx, 0), r, style);
    let (fill, border) = (colour.filled(), WHITE.stroke_width(1));
    let (n, start, scale) = match shape {
        Shape::Circle | Shape::Ring => {
            let (r, fill, border) = match shape {
                Shape::Ring => (r + 1, WHITE.filled(), colour.stroke_width(2)),
                _ => (r, fill, border),
            };
            let (_, _, p, b) = no_mark();
            return (circle(r, fill), circle(r, border), p, b);
        }
        Shape::Square => (4, FRAC_PI_4, 1.2),
        Shape::Up => (3, FRAC_PI_2, 1.3),
        Shape::Diamond => (4, 0.0, 1.25),
        Shape::Down => (3, -FRAC_PI_2, 1.3),
        Shape::Hexagon => (6, 0.0, 1.1),
    };
    let rr = scale * f64::from(r);
    let pts: Vec<Px> = (0..=n)
        .map(|k| start + f64::from(k) * std::f64::consts::TAU / f64::from(n))
        .map(|a| (dx + (rr * a.cos()).round() as i32, -(rr * a.sin()).round() as i32))
        .collect();
    let polygon = Polygon::new(pts.clone(), fill);
    (circle(0, none), circle(0, none), polygon, PathElement::new(pts, border))
}

/// No marker.
fn no_mark() -> Mark {
    let none = TRANSPARENT.filled();
    let circle = || Circle::new((0, 0), 0, none);
    (circle(), circle(), Polygon::new(vec![], none), PathElement::new(vec![], none))
}

/// How a legend entry's sample looks.
#[derive(Clone, Copy, Debug)]
pub(super) enum Swatch {
    /// None: a heading or a note.
    Text,
    /// A line of this colour and width.
    Line(RGBColor, u32),
    /// A dashed line.
    Dashed(RGBColor),
    /// A line over a shaded band.
    Band(RGBColor),
    /// A filled box.
    Patch(RGBColor),
    /// A marker (shape, radius, colour) over a shaded box, if any.
    Mark(Shape, i32, RGBColor, Option<RGBColor>),
    /// A line with a dot on it.
    LineDot(RGBColor),
    /// An error bar.
    ErrorBar(RGBColor),
}

/// Width of a swatch.
const SWATCH_PX: i32 = 30;
/// Space inside a legend's border, and between a swatch and its text.
const PAD_PX: i32 = 8;
/// Distance of a legend from the plot's edges.
const INSET_PX: i32 = 10;

/// A swatch's parts, around its left end: a box, three lines and a marker (transparent parts
/// are not drawn). One type for every swatch, as plotters' legend wants.
type Parts = (Rectangle<Px>, [PathElement<Px>; 3], Mark);

impl Swatch {
    fn parts(self) -> Parts {
        let none = TRANSPARENT.stroke_width(1);
        let path = |pts: Vec<Px>, style: ShapeStyle| PathElement::new(pts, style);
        let across = |c: RGBColor, w: u32| path(vec![(0, 0), (SWATCH_PX, 0)], c.stroke_width(w));
        let patch = |style: ShapeStyle| Rectangle::new([(0, -7), (SWATCH_PX, 7)], style);
        let no_mark = no_mark();
        let lines = |a, b, c| [a, b, c];
        let empty = || path(vec![], none);
        match self {
            Swatch::Text => (patch(none), lines(empty(), empty(), empty()), no_mark),
            Swatch::Line(c, w) => (patch(none), lines(across(c, w), empty(), empty()), no_mark),
            Swatch::Dashed(c) => {
                let dash = |a: i32| path(vec![(a, 0), (a + 7, 0)], c.stroke_width(2));
                (patch(none), lines(dash(0), dash(12), dash(23)), no_mark)
            }
            Swatch::Band(c) => {
                let band = patch(tint(c, 0.2).filled());
                (band, lines(across(c, 3), empty(), empty()), no_mark)
            }
            Swatch::Patch(c) => (patch(c.filled()), lines(empty(), empty(), empty()), no_mark),
            Swatch::Mark(shape, r, c, shade) => {
                let shade = patch(shade.map_or(none, |s| s.filled()));
                (shade, lines(empty(), empty(), empty()), mark_at(shape, r, c, SWATCH_PX / 2))
            }
            Swatch::LineDot(c) => {
                let dot = mark_at(Shape::Circle, 4, c, SWATCH_PX / 2);
                (patch(none), lines(across(c, 2), empty(), empty()), dot)
            }
            Swatch::ErrorBar(c) => {
                let m = SWATCH_PX / 2;
                let bar = vec![(m - 4, -8), (m + 4, -8), (m, -8), (m, 8), (m - 4, 8), (m + 4, 8)];
                (patch(none), lines(path(bar, c.stroke_width(1)), empty(), empty()), no_mark)
            }
        }
    }
}

/// The corners a legend may take, in order of preference: the top first, or the bottom.
pub(super) const TOP_FIRST: [Corner; 6] = [
    Corner::TopRight,
    Corner::TopLeft,
    Corner::BottomLeft,
    Corner::BottomRight,
    Corner::Top,
    Corner::Bottom,
];
pub(super) const BOTTOM_FIRST: [Corner; 6] = [
    Corner::BottomRight,
    Corner::BottomLeft,
    Corner::Bottom,
    Corner::TopLeft,
    Corner::TopRight,
    Corner::Top,
];

/// Where a legend may sit in a plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Corner {
    TopLeft,
    Top,
    TopRight,
    BottomLeft,
    Bottom,
    BottomRight,
}

impl Corner {
    /// The top left pixel of a box of `size` in this corner of a plot of `plot` pixels.
    fn origin(self, size: (i32, i32), plot: (i32, i32)) -> (i32, i32) {
        let x = match self {
            Corner::TopLeft | Corner::BottomLeft => INSET_PX,
            Corner::Top | Corner::Bottom => (plot.0 - size.0) / 2,
            Corner::TopRight | Corner::BottomRight => plot.0 - size.0 - INSET_PX,
        };
        let y = match self {
            Corner::TopLeft | Corner::Top | Corner::TopRight => INSET_PX,
            _ => plot.1 - size.1 - INSET_PX,
        };
        (x.max(0), y.max(0))
    }
}

/// One legend entry.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    label: String,
    swatch: Swatch,
}

impl Entry {
    pub(super) fn new(label: impl Into<String>, swatch: Swatch) -> Entry {
        Entry {
            label: label.into(),
            swatch,
        }
    }
}

/// A legend: its entries in one column, drawn by plotters as series labels.
#[derive(Clone, Debug)]
pub(super) struct Legend {
    pub(super) entries: Vec<Entry>,
    /// Text size.
    pub(super) text_px: u32,
}

impl Legend {
    pub(super) fn new(entries: Vec<Entry>) -> Legend {
        Legend {
            entries,
            text_px: TEXT_PX,
        }
    }

    /// An entry's text as drawn. In SVG it ends in en spaces, invisible, which widen the
    /// legend's box for a viewer that draws the text in a font wider than Noto Sans.
    fn text(&self, e: &Entry, raster: bool) -> String {
        let pad = if raster { 0 } else { e.label.chars().count() / 8 + 1 };
        format!("{}{}", e.label, "\u{2002}".repeat(pad))
    }

    /// The legend's size in pixels, as plotters lays it out.
    pub(super) fn size<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(i32, i32), DrawFailure> {
        let mut w = 0;
        for e in &self.entries {
            w = w.max(text_width(area, &self.text(e, raster), self.text_px)?);
        }
        let rows = self.entries.len().max(1) as f64;
        let h = (1.25 * f64::from(self.text_px) * (rows - 1.0)).round() as i32 + self.text_px as i32;
        Ok((w + SWATCH_PX + 3 * PAD_PX, h + 2 * PAD_PX))
    }

    /// Where in a panel of `x` against `y` drawn on `area` the legend hides the fewest points
    /// of `avoid` (polylines in data coordinates), trying `corners` in order; if each hides
    /// some, the top of `y` is raised by up to `max_stretch` times until a corner is free.
    /// Returns the y axis and the legend's top left pixel in the plot.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn place<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        x: &Axis,
        y: Axis,
        bottom: bool,
        avoid: &[Vec<(f64, f64)>],
        corners: &[Corner],
        max_stretch: f64,
        raster: bool,
    ) -> Result<(Axis, (i32, i32)), DrawFailure> {
        let size = self.size(area, raster)?;
        let mut first = None;
        for k in 0..=6 {
            let stretch = 1.0 + 0.1 * f64::from(k);
            if stretch > max_stretch + 1e-9 {
                break;
            }
            let y = y.clone().up_to(y.hi * stretch);
            let chart = build(area, x, &y, bottom)?;
            let (hidden, at) = least_hidden(&chart, size, avoid, corners);
            if hidden == 0 {
                return Ok((y, at));
            }
            first.get_or_insert((y, at));
        }
        Ok(first.expect("invariant: a legend tries at least its unraised place"))
    }

    /// Draw the legend alone in `area` (a key beside the plots), at its top left, its text
    /// made smaller if it would not fit.
    pub(super) fn draw_alone<DB: DrawingBackend>(
        mut self,
        area: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let room = area.dim_in_pixel().1 as i32 - INSET_PX;
        while self.text_px > 12 && self.size(area, raster)?.1 > room {
            self.text_px -= 1;
        }
        let unit = Axis::linear(0.0, 1.0, 1);
        let mut chart = ChartBuilder::on(area).build_cartesian_2d(unit.clone(), unit)?;
        self.draw(&mut chart, (0, 0), raster)
    }

    /// Draw the legend on `chart` with its top left at pixel `at` of the plot.
    pub(super) fn draw<'a, DB: DrawingBackend + 'a>(
        &self,
        chart: &mut Chart<'a, DB>,
        at: (i32, i32),
        raster: bool,
    ) -> Result<(), DrawFailure> {
        if self.entries.is_empty() {
            return Ok(());
        }
        for e in &self.entries {
            let anno = chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?;
            anno.label(self.text(e, raster));
            let swatch = e.swatch;
            anno.legend(move |c| {
                let (patch, [a, b, d], (c1, c2, p1, p2)) = swatch.parts();
                EmptyElement::at(c) + patch + a + b + d + c1 + c2 + p1 + p2
            });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::Coordinate(at.0, at.1))
            .margin(PAD_PX)
            .legend_area_size(SWATCH_PX + PAD_PX)
            .label_font((FONT, self.text_px).into_font().color(&BLACK))
            .background_style(WHITE.mix(0.92))
            .border_style(BORDER)
            .draw()?;
        Ok(())
    }
}

/// The corner of `corners` whose box of `size` (grown by a few pixels) holds the fewest points
/// of `avoid`, sampled every few pixels along each line: `(points hidden, top left pixel)`.
fn least_hidden<DB: DrawingBackend>(
    chart: &Chart<'_, DB>,
    size: (i32, i32),
    avoid: &[Vec<(f64, f64)>],
    corners: &[Corner],
) -> (usize, (i32, i32)) {
    let area = chart.plotting_area();
    let (bx, by) = area.get_base_pixel();
    let (w, h) = area.dim_in_pixel();
    let px = |p: &(f64, f64)| {
        let (x, y) = chart.backend_coord(p);
        (f64::from(x - bx), f64::from(y - by))
    };
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for line in avoid {
        let line: Vec<(f64, f64)> = line.iter().filter(|p| p.0.is_finite() && p.1.is_finite()).map(px).collect();
        pts.extend(line.first());
        for s in line.windows(2) {
            let n = ((s[1].0 - s[0].0).abs().max((s[1].1 - s[0].1).abs()) / 3.0).ceil().min(2_000.0);
            let along = |k: f64| (s[0].0 + (s[1].0 - s[0].0) * k / n, s[0].1 + (s[1].1 - s[0].1) * k / n);
            pts.extend((1..=n as u32).map(|k| along(f64::from(k))));
        }
    }
    let clear = 6.0;
    corners
        .iter()
        .map(|c| {
            let (x0, y0) = c.origin(size, (w as i32, h as i32));
            let (x0, y0) = (f64::from(x0) - clear, f64::from(y0) - clear);
            let (x1, y1) = (x0 + f64::from(size.0) + 2.0 * clear, y0 + f64::from(size.1) + 2.0 * clear);
            let hidden = pts.iter().filter(|p| p.0 >= x0 && p.0 <= x1 && p.1 >= y0 && p.1 <= y1).count();
            (hidden, c.origin(size, (w as i32, h as i32)))
        })
        .min_by_key(|(hidden, _)| *hidden)
        .unwrap_or((0, (INSET_PX, INSET_PX)))
}
