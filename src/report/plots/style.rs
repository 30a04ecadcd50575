//! The figures' look: font and text sizes, the one palette, markers, the heading, and the one
//! legend (plotters' series labels, put where they hide the least data). Text other than the
//! title is at most 16 px (but the 22 px notice of a plan figure without candidates): larger,
//! plotters' ab_glyph renderer lets Noto Sans's letters touch.

use plotters::chart::SeriesLabelPosition;
use plotters::prelude::*;

use super::axis::Axis;
use super::{build, panel, Area, Chart, Drawn};

/// The font: registered as the embedded Noto Sans, and a CSS font list in SVG.
pub(super) const FONT: &str = "Noto Sans, sans-serif";
/// Axis descriptions.
pub(super) const DESC_PX: u32 = 16;
/// Tick labels, legends and labels in plots.
pub(super) const TEXT_PX: u32 = 15;
/// Height of the title and subtitle band.
pub(super) const HEADING_PX: u32 = 72;
/// Width of the y-axis label area, the same in every panel so stacked panels line up.
pub(super) const Y_LABEL_AREA_PX: u32 = 84;
/// Height of a bottom panel's x-axis label area.
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
/// Colours of categories (a sweep's lines, a plan's GPU types), in order.
pub(super) const PALETTE: [RGBColor; 8] =
    [BLUE, VERMILLION, GREEN, PURPLE, SKY, ORANGE, PINK, DARK];

/// A pixel position.
type Px = (i32, i32);
/// A line in data coordinates.
pub(super) type Pts = Vec<(f64, f64)>;

/// `c` at opacity `a` over white, as an opaque colour.
pub(super) fn tint(c: RGBColor, a: f64) -> RGBColor {
    let mix = |v: u8| (f64::from(v) * a + 255.0 * (1.0 - a)).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// Draw the title and a subtitle line at the top left; returns the area under them.
pub(super) fn heading<DB: DrawingBackend>(
    root: &Area<DB>,
    title: &str,
    subtitle: &str,
) -> Drawn<Area<DB>> {
    let (head, body) = root.split_vertically(HEADING_PX);
    head.draw_text(title, &(FONT, 26).into_font().color(&BLACK), (20, 12))?;
    let grey = (FONT, TEXT_PX).into_font().color(&RGBColor(70, 70, 70));
    head.draw_text(subtitle, &grey, (20, 46))?;
    Ok(body)
}

/// The width of `text` at `px` pixels.
pub(super) fn text_width<DB: DrawingBackend>(area: &Area<DB>, text: &str, px: u32) -> Drawn<i32> {
    let font = TextStyle::from((FONT, px).into_font());
    Ok(area.estimate_text_size(text, &font)?.0 as i32)
}

/// `text` at [`TEXT_PX`] broken into lines at most `width` pixels wide, at spaces.
pub(super) fn wrap(area: &Area<impl DrawingBackend>, text: &str, width: i32) -> Drawn<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(area, &format!("{line} {word}"), TEXT_PX)? <= width => {
                *line += &format!(" {word}");
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
    /// A hollow circle.
    Ring,
}

type Dot = Circle<Px, i32>;
/// A marker: a filled circle and its border, or a filled polygon and its border (the parts a
/// shape does not use are empty). Placed with `EmptyElement::at(p) + a + b + c + d`.
pub(super) type Mark = (Dot, Dot, Polygon<Px>, PathElement<Px>);

/// A marker of radius `r` around (`dx`, 0). Filled shapes have a white border that keeps
/// overlapping markers apart; a ring is white inside.
pub(super) fn mark(shape: Shape, r: i32, colour: RGBColor, dx: i32) -> Mark {
    use std::f64::consts::{FRAC_PI_2 as UP, FRAC_PI_4 as DIAGONAL, TAU};
    let (n, start, scale) = match shape {
        Shape::Circle | Shape::Ring => (0, 0.0, 1.0),
        Shape::Square => (4, DIAGONAL, 1.2),
        Shape::Up => (3, UP, 1.55),
        Shape::Diamond => (4, 0.0, 1.25),
        Shape::Down => (3, -UP, 1.55),
        Shape::Hexagon => (6, 0.0, 1.1),
    };
    let (fill, border) = match shape {
        Shape::Ring => (WHITE.filled(), colour.stroke_width(2)),
        _ => (colour.filled(), WHITE.stroke_width(1)),
    };
    let rr = scale * f64::from(r);
    let round = |v: f64| (rr * v).round() as i32;
    let xy = |a: f64| (dx + round(a.cos()), -round(a.sin()));
    let angle = |k: u32| start + f64::from(k) * TAU / f64::from(n);
    let pts: Vec<Px> = (0..=n).filter(|_| n > 0).map(|k| xy(angle(k))).collect();
    let none = TRANSPARENT.filled();
    let (cf, cb) = if n > 0 { (none, none) } else { (fill, border) };
    let c = |style| Circle::new((dx, 0), r + i32::from(shape == Shape::Ring), style);
    let polygon = Polygon::new(pts.clone(), fill);
    (c(cf), c(cb), polygon, PathElement::new(pts, border))
}

/// How a legend entry's sample looks: a shaded box, a line and a marker, each if given; none
/// for a heading or a note.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Swatch {
    shade: Option<RGBColor>,
    line: Option<(RGBColor, Stroke)>,
    mark: Option<(Shape, i32, RGBColor)>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stroke {
    Solid(u32),
    Dashed,
    /// An error bar, upright.
    Bar,
}

impl Swatch {
    fn stroke(c: RGBColor, stroke: Stroke) -> Swatch {
        let line = Some((c, stroke));
        Swatch {
            line,
            ..Default::default()
        }
    }
    pub(super) fn line(c: RGBColor, width: u32) -> Swatch {
        Swatch::stroke(c, Stroke::Solid(width))
    }
    pub(super) fn dashed(c: RGBColor) -> Swatch {
        Swatch::stroke(c, Stroke::Dashed)
    }
    pub(super) fn error_bar(c: RGBColor) -> Swatch {
        Swatch::stroke(c, Stroke::Bar)
    }
    /// A line over a band shaded in its colour.
    pub(super) fn band(c: RGBColor) -> Swatch {
        Swatch::line(c, 3).shaded(tint(c, 0.2))
    }
    /// This swatch over a box shaded `c`.
    pub(super) fn shaded(self, c: RGBColor) -> Swatch {
        let shade = Some(c);
        Swatch { shade, ..self }
    }
    /// This swatch with a marker on it.
    pub(super) fn marked(self, shape: Shape, r: i32, c: RGBColor) -> Swatch {
        let mark = Some((shape, r, c));
        Swatch { mark, ..self }
    }

    /// Its parts, around its left end: one type for every swatch, as plotters' legend wants.
    fn parts(self) -> (Rectangle<Px>, [PathElement<Px>; 3], Mark) {
        let none = TRANSPARENT.filled();
        let path = |pts: Vec<Px>, c: RGBColor, w: u32| PathElement::new(pts, c.stroke_width(w));
        let empty = || PathElement::new(vec![], none);
        let (w, m) = (SWATCH_PX, SWATCH_PX / 2);
        let bar = [(-4, -8), (4, -8), (0, -8), (0, 8), (-4, 8), (4, 8)].map(|(x, y)| (m + x, y));
        let lines = match self.line {
            None => [empty(), empty(), empty()],
            Some((c, Stroke::Solid(width))) => {
                [path(vec![(0, 0), (w, 0)], c, width), empty(), empty()]
            }
            Some((c, Stroke::Dashed)) => [0, 12, 23].map(|a| path(vec![(a, 0), (a + 7, 0)], c, 2)),
            Some((c, Stroke::Bar)) => [path(bar.into(), c, 1), empty(), empty()],
        };
        let (s, r, c) = self.mark.unwrap_or((Shape::Circle, 0, WHITE));
        let mut marker = mark(s, r, c, m);
        if self.mark.is_none() {
            (marker.0, marker.1) = (Circle::new((0, 0), 0, none), Circle::new((0, 0), 0, none));
        }
        let shade = self.shade.map_or(none, |c| c.filled());
        (Rectangle::new([(0, -7), (w, 7)], shade), lines, marker)
    }
}

/// Width of a swatch.
const SWATCH_PX: i32 = 30;
/// Space inside a legend's border, and between a swatch and its text.
const PAD_PX: i32 = 8;
/// Distance of a legend from the plot's edges.
const INSET_PX: i32 = 10;

/// Where a legend may sit: how far across and down the room around it, in halves.
pub(super) type Corner = (u8, u8);
/// Right and left: at the top, in the middle, at the bottom; then the top middle.
pub(super) const TOP_FIRST: [Corner; 7] = [(2, 0), (0, 0), (2, 1), (0, 1), (2, 2), (0, 2), (1, 0)];
/// Right and left: at the bottom, in the middle, at the top; then the bottom middle.
pub(super) const BOTTOM_FIRST: [Corner; 7] =
    [(2, 2), (0, 2), (2, 1), (0, 1), (2, 0), (0, 0), (1, 2)];

/// One legend entry: its text and its sample.
#[derive(Clone, Debug)]
pub(super) struct Entry(pub(super) String, pub(super) Swatch);

impl Entry {
    /// A heading or a note.
    pub(super) fn text(label: impl Into<String>) -> Entry {
        Entry(label.into(), Swatch::default())
    }
}

/// A legend: its entries in one column, drawn by plotters as series labels, and the data it
/// should not hide.
#[derive(Clone, Debug, Default)]
pub(super) struct Legend {
    entries: Vec<Entry>,
    text_px: u32,
    /// Lines in data coordinates.
    avoid: Vec<Pts>,
    /// Where it may go, in order of preference.
    corners: &'static [Corner],
    /// Most the top of the y axis may be raised to make room for it.
    max_stretch: f64,
}

impl Legend {
    pub(super) fn new(entries: Vec<Entry>) -> Legend {
        let mut legend = Legend::default();
        (legend.entries, legend.text_px) = (entries, TEXT_PX);
        legend.avoiding(Vec::new(), &TOP_FIRST, 1.0)
    }

    /// The legend hiding as few points of `avoid` as it can, in one of `corners`, the top of
    /// the y axis raised by up to `max_stretch` times if that frees one.
    pub(super) fn avoiding(mut self, avoid: Vec<Pts>, at: &'static [Corner], most: f64) -> Self {
        (self.avoid, self.corners, self.max_stretch) = (avoid, at, most);
        self
    }

    /// An entry's text as drawn. In SVG it ends in en spaces, invisible, which widen the
    /// legend's box for a viewer that draws the text in a font wider than Noto Sans.
    fn text(&self, e: &Entry, raster: bool) -> String {
        let pad = usize::from(!raster) * (e.0.chars().count() / 8 + 1);
        format!("{}{}", e.0, "\u{2002}".repeat(pad))
    }

    /// The legend's size in pixels, as plotters lays it out.
    fn size<DB: DrawingBackend>(&self, area: &Area<DB>, raster: bool) -> Drawn<Px> {
        let mut w = 0;
        for e in &self.entries {
            w = w.max(text_width(area, &self.text(e, raster), self.text_px)?);
        }
        let rows = self.entries.len().max(1) as f64 - 1.0;
        let h = (1.25 * f64::from(self.text_px) * rows).round() as i32 + self.text_px as i32;
        Ok((w + SWATCH_PX + 3 * PAD_PX, h + 2 * PAD_PX))
    }

    /// A panel (see [`panel`]) with room for the legend: in the first of its corners that
    /// hides none of its data, the top of `y` raised in steps until one does if need be, else
    /// where it hides the least. Returns the chart and the legend's top left pixel in the plot.
    pub(super) fn panel<'a, DB: DrawingBackend>(
        &self,
        area: &'a Area<DB>,
        x: &Axis,
        y: Axis,
        x_desc: Option<&str>,
        y_desc: &str,
        raster: bool,
    ) -> Drawn<(Chart<'a, DB>, Px)> {
        let size = self.size(area, raster)?;
        let mut first = None;
        let stretches = (0..=20).map(|k: u8| 1.0 + 0.1 * f64::from(k));
        for stretch in stretches.take_while(|s| *s <= self.max_stretch + 1e-9) {
            let y = y.clone().up_to(y.hi * stretch);
            let chart = build(area, x, &y, x_desc.is_some())?;
            let (hidden, at) = self.least_hidden(&chart, size);
            if hidden == 0 {
                return Ok((panel(area, x, &y, x_desc, y_desc)?, at));
            }
            first.get_or_insert((y, at));
        }
        let (y, at) = first.expect("invariant: a legend tries at least its unraised place");
        Ok((panel(area, x, &y, x_desc, y_desc)?, at))
    }

    /// Draw the legend alone in `area` (a key beside plots) at its top left, headings and
    /// notes broken into lines, its text made smaller if it would not fit.
    pub(super) fn draw_alone<DB: DrawingBackend>(mut self, area: &Area<DB>, raster: bool) -> Drawn {
        let (w, h) = area.dim_in_pixel();
        for e in std::mem::take(&mut self.entries) {
            let width = w as i32 - SWATCH_PX - 4 * PAD_PX;
            let lines = match e.1 == Swatch::default() && text_width(area, &e.0, TEXT_PX)? > width {
                true => wrap(area, &e.0, width)?,
                false => vec![e.0],
            };
            let lines = lines.into_iter().map(|l| Entry(l, e.1));
            self.entries.extend(lines);
        }
        while self.text_px > 12 && self.size(area, raster)?.1 > h as i32 - INSET_PX {
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
        at: Px,
        raster: bool,
    ) -> Drawn {
        if self.entries.is_empty() {
            return Ok(());
        }
        for e in &self.entries {
            let anno = chart.draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?;
            let swatch = e.1;
            anno.label(self.text(e, raster)).legend(move |c| {
                let (shade, [a, b, d], (c1, c2, p1, p2)) = swatch.parts();
                EmptyElement::at(c) + shade + a + b + d + c1 + c2 + p1 + p2
            });
        }
        let font = (FONT, self.text_px).into_font().color(&BLACK);
        let mut labels = chart.configure_series_labels();
        labels.position(SeriesLabelPosition::Coordinate(at.0, at.1));
        labels.label_font(font).margin(PAD_PX);
        labels.legend_area_size(SWATCH_PX + PAD_PX);
        labels.background_style(WHITE.mix(0.92));
        labels.border_style(RGBColor(170, 170, 170)).draw()?;
        Ok(())
    }

    /// The corner of its corners whose box of `size` (grown by a few pixels) holds the
    /// fewest points of the lines it avoids, sampled every few pixels along each line:
    /// `(points hidden, top left pixel)`.
    fn least_hidden(&self, chart: &Chart<'_, impl DrawingBackend>, size: Px) -> (usize, Px) {
        let (bx, by) = chart.plotting_area().get_base_pixel();
        let (w, h) = chart.plotting_area().dim_in_pixel();
        let px = |p: &(f64, f64)| {
            let (x, y) = chart.backend_coord(p);
            (f64::from(x - bx), f64::from(y - by))
        };
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for line in &self.avoid {
            let line: Vec<(f64, f64)> = line.iter().filter(|p| p.1.is_finite()).map(px).collect();
            pts.extend(line.first());
            for s in line.windows(2) {
                let (dx, dy) = (s[1].0 - s[0].0, s[1].1 - s[0].1);
                let n = (dx.abs().max(dy.abs()) / 3.0).ceil().min(2_000.0);
                let along = |f: f64| (s[0].0 + dx * f, s[0].1 + dy * f);
                pts.extend((1..=n as u32).map(|k| along(f64::from(k) / n)));
            }
        }
        let room = |total: u32, size: i32| (total as i32 - size - 2 * INSET_PX).max(0);
        let hidden = |&(across, down): &Corner| {
            let x0 = INSET_PX + i32::from(across) * room(w, size.0) / 2;
            let y0 = INSET_PX + i32::from(down) * room(h, size.1) / 2;
            // Data closer than 6 px counts as hidden.
            let (xa, ya) = (f64::from(x0 - 6), f64::from(y0 - 6));
            let (xb, yb) = (f64::from(x0 + size.0 + 6), f64::from(y0 + size.1 + 6));
            let inside = |p: &&(f64, f64)| p.0 >= xa && p.0 <= xb && p.1 >= ya && p.1 <= yb;
            (pts.iter().filter(inside).count(), (x0, y0))
        };
        let best = self.corners.iter().map(hidden).min_by_key(|c| c.0);
        best.unwrap_or((0, (INSET_PX, INSET_PX)))
    }
}
