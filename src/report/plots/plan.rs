//! The plan figure: what each feasible candidate of `servesim plan` costs against how long it
//! takes to finish the workload.
//!
//! * **Markers.** One per feasible candidate at (time to finish in hours, total cost in $):
//!   the colour is the GPU type, the shape the GPUs per server (tensor parallelism: circle,
//!   square, triangle, diamond, …, from the smallest TP up) and the size grows with the GPUs
//!   rented. Infeasible candidates have no time or cost: the key on the right counts them and
//!   lists each with its reason (as many as fit).
//! * **Labels** read `8× h200 TP8` (GPUs rented, GPU, GPUs per server). They are placed
//!   greedily, Pareto-optimal candidates first, where they cover no marker and no other label
//!   (preferring places off the Pareto line), farther out with a leader line if need be. With
//!   more than [`MAX_LABELLED`] feasible candidates only the Pareto-optimal ones are labelled;
//!   the key says so, and how many labels found no room.
//! * **Pareto front.** A dark staircase through the candidates no other is both faster and
//!   cheaper than: at each time, the cost of the cheapest candidate finishing within it.
//! * **Deadline.** A vertical dashed red line, the time beyond it shaded. A deadline far
//!   outside the candidates' times (more than twice the slowest, or on a logarithmic axis less
//!   than half the fastest) is not drawn; the key says where it is.
//! * **Axes.** Hours and dollars, each logarithmic when its values span more than [`LOG_SPAN`]
//!   times (decades ticked at 1, 2 and 5), else linear: from 0 when the smallest value is under
//!   40 % of the largest, else from a round value below the smallest, so that candidates of
//!   similar cost or time are told apart (the tick labels say where the axis starts).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plan::PlanRow;

use super::axis::{fmt_tick, nice_ticks, sig3, thousands, Ticked};
use super::style::{
    heading, measure, wrap, BLUE, DARK, DESC_PX, FONT, GREEN, GREY, GRID_BOLD, GRID_LIGHT,
    LEGEND_PX, ORANGE, PANEL_MARGIN_BOTTOM_PX, PANEL_MARGIN_LEFT_PX, PANEL_MARGIN_TOP_PX, PURPLE,
    RED, SUBTITLE_PX, TICK_PX, VERMILLION, X_LABEL_AREA_PX, Y_LABEL_AREA_PX,
};
use super::{render, DrawFailure, Figure, Format, PlotError, WIDTH_PX};

/// The title of the [`plan_figure`].
pub const PLAN_TITLE: &str = "Cost against time to finish";

/// With more feasible candidates than this, only the Pareto-optimal ones are labelled.
const MAX_LABELLED: usize = 16;

/// An axis whose values span more than this factor (largest over smallest) is logarithmic.
const LOG_SPAN: f64 = 20.0;

/// The cost of each feasible candidate of a plan against its time to finish the workload, in
/// `fmt`: coloured by GPU type, shaped by tensor parallelism, sized by the number of GPUs,
/// labelled (`8× h200 TP8`; with more than 16 feasible candidates only the Pareto-optimal
/// ones), with the Pareto front (the cheapest candidate finishing within each time) as a
/// staircase, the deadline `deadline_h` (hours) if given as a dashed line with the time beyond
/// it shaded, and a key that counts and lists the infeasible candidates with their reasons.
/// Axes are in hours and dollars, logarithmic when their values span more than 20 times. With
/// no feasible candidate (or none at all) the figure says so and lists why each is infeasible.
///
/// Feasible rows whose time or cost is not a finite non-negative number are left out and
/// counted in the key. Errors only if plotters fails to draw.
pub fn plan_figure(
    rows: &[PlanRow],
    deadline_h: Option<f64>,
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&PlanFigure::new(rows, deadline_h), fmt)
}

// ---------------------------------------------------------------------------------------------
// Data

/// Sky blue and reddish purple of the Okabe–Ito palette.
const SKY: RGBColor = RGBColor(86, 180, 233);
const PINK: RGBColor = RGBColor(204, 121, 167);
/// The GPU types' colours, in alphabetical order of their names (repeating after eight).
const PALETTE: [RGBColor; 8] = [BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY, PINK, DARK];

/// A marker's shape: one per tensor-parallel size, from the smallest up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    Up,
    Diamond,
    Down,
    Hexagon,
}

const SHAPES: [Shape; 6] = [
    Shape::Circle,
    Shape::Square,
    Shape::Up,
    Shape::Diamond,
    Shape::Down,
    Shape::Hexagon,
];

impl Shape {
    /// The outline around `c` for a marker of radius `r`, or `None` for a circle.
    fn polygon(self, (x, y): (i32, i32), r: i32) -> Option<Vec<(i32, i32)>> {
        let r = f64::from(r);
        let at = |k: f64, n: f64, start: f64, scale: f64| {
            let a = start + k * std::f64::consts::TAU / n;
            (
                x + (scale * r * a.cos()).round() as i32,
                y - (scale * r * a.sin()).round() as i32,
            )
        };
        let ring = |n: usize, start: f64, scale: f64| -> Vec<(i32, i32)> {
            (0..n)
                .map(|k| at(k as f64, n as f64, start, scale))
                .collect()
        };
        use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};
        match self {
            Shape::Circle => None,
            Shape::Square => Some(ring(4, FRAC_PI_4, 1.2)),
            Shape::Up => Some(ring(3, FRAC_PI_2, 1.3)),
            Shape::Diamond => Some(ring(4, 0.0, 1.25)),
            Shape::Down => Some(ring(3, -FRAC_PI_2, 1.3)),
            Shape::Hexagon => Some(ring(6, 0.0, 1.1)),
        }
    }
}

/// A marker's radius for `num_gpus` GPUs: 5 px for one, 1.5 px more per doubling, at most 12.
fn radius(num_gpus: u32) -> i32 {
    (5.0 + 1.5 * f64::from(num_gpus.max(1)).log2())
        .round()
        .clamp(5.0, 12.0) as i32
}

/// `8× h200 TP8`.
fn label_of(r: &PlanRow) -> String {
    format!("{}\u{d7} {} TP{}", r.num_gpus, r.gpu, r.tensor_parallel)
}

/// Dollars for text: `$0.84`, `$12.5`, `$412`, `$1,234`.
fn usd(v: f64) -> String {
    if !v.is_finite() {
        format!("${v}")
    } else if v.abs() >= 100.0 {
        format!("${}", thousands(v.round().max(0.0) as u64))
    } else if v.abs() >= 10.0 {
        format!("${v:.1}")
    } else {
        format!("${v:.2}")
    }
}

/// Hours for text, three significant digits: `0.521 h`, `20.1 h`, `132 h`.
fn hours(h: f64) -> String {
    format!("{} h", sig3(h))
}

/// A number as given, without trailing zeros: `24`, `1.5`, `0.25`.
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One feasible candidate drawn.
#[derive(Clone, Debug)]
struct Point {
    /// Index into the rows.
    row: usize,
    t_h: f64,
    cost: f64,
    colour: RGBColor,
    shape: Shape,
    radius: i32,
    /// No other candidate is at least as fast and cheaper, or faster and as cheap.
    pareto: bool,
    label: String,
}

/// Infeasible candidates sharing one reason.
#[derive(Clone, Debug, PartialEq)]
struct Infeasible {
    labels: Vec<String>,
    reason: String,
}

/// Where the deadline is, relative to the time axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Deadline {
    None,
    /// On the axis, in hours.
    Drawn(f64),
    /// Far right of every candidate: all finish by it.
    FarRight(f64),
    /// Far left of every candidate: none finishes by it.
    FarLeft(f64),
}

/// A linear or logarithmic axis. Coordinates are the values themselves (linear) or their
/// `log10` (logarithmic); plotters draws a plain linear range with the ticks given here.
#[derive(Clone, Debug)]
struct Scale {
    log: bool,
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    minor: Vec<f64>,
}

impl Scale {
    /// The axis for positive-or-zero `values`, reaching to `extra` too if given: logarithmic
    /// when every value is positive and they span more than [`LOG_SPAN`] times, else linear
    /// (see [`Scale::linear`]). `headroom` is room left beyond the largest value, as a
    /// fraction of the values' span.
    fn new(values: &[f64], extra: Option<f64>, headroom: f64) -> Scale {
        let lo_hi = |vs: &[f64]| {
            let min = vs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = vs.iter().copied().fold(0.0, f64::max);
            (min, max)
        };
        let (min, max) = lo_hi(values);
        let (lo_v, hi_v) = match extra {
            Some(e) if e.is_finite() && e > 0.0 => (min.min(e), max.max(e)),
            _ => (min, max),
        };
        if Scale::is_log_for(values) {
            Scale::log(lo_v, hi_v, headroom)
        } else {
            Scale::linear(lo_v, hi_v, headroom)
        }
    }

    /// Would `values` get a logarithmic axis?
    fn is_log_for(values: &[f64]) -> bool {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(0.0, f64::max);
        min > 0.0 && max / min > LOG_SPAN
    }

    /// A linear axis over `min` to `max`: from 0 when `min` is under 40 % of `max` (or they
    /// are equal), else from a round value a little below `min`, so that candidates of
    /// similar cost are told apart.
    fn linear(min: f64, max: f64, headroom: f64) -> Scale {
        if !(max.is_finite() && max > 0.0) {
            return Scale {
                log: false,
                lo: 0.0,
                hi: 1.0,
                ticks: nice_ticks(0.0, 1.0, 8),
                minor: Vec::new(),
            };
        }
        let min = if min.is_finite() { min.max(0.0) } else { 0.0 };
        let from_zero = min <= 0.4 * max || max - min <= 1e-9 * max;
        let (lo, hi) = if from_zero {
            (0.0, max + headroom.max(0.08) * max)
        } else {
            let span = max - min;
            let lo = min - 0.1 * span;
            let hi = max + headroom.max(0.08) * span;
            let ticks = nice_ticks(lo, hi, 8);
            let step = if ticks.len() >= 2 {
                ticks[1] - ticks[0]
            } else {
                span
            };
            (((lo / step).floor() * step).max(0.0), hi)
        };
        Scale {
            log: false,
            lo,
            hi,
            ticks: nice_ticks(lo, hi, 8),
            minor: Vec::new(),
        }
    }

    fn log(min: f64, max: f64, headroom: f64) -> Scale {
        let (a, b) = (min.log10(), max.log10());
        let span = (b - a).max(0.3);
        let lo = a - (0.06 * span).max(0.04);
        let hi = b + (headroom * span).max(0.04);
        let in_range = |v: f64| v >= lo - 1e-9 && v <= hi + 1e-9;
        let decades = (lo.floor() as i32)..=(hi.ceil() as i32);
        let with = |ms: &[f64]| -> Vec<f64> {
            decades
                .clone()
                .flat_map(|d| ms.iter().map(move |m| f64::from(d) + m.log10()))
                .filter(|&v| in_range(v))
                .collect()
        };
        let mut ticks = with(&[1.0, 2.0, 5.0]);
        if ticks.len() < 4 {
            ticks = with(&[1.0, 2.0, 3.0, 5.0, 7.0]);
        }
        if ticks.len() > 9 {
            ticks = with(&[1.0, 3.0]);
        }
        if ticks.len() > 9 {
            ticks = with(&[1.0]);
        }
        let minor = with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        Scale {
            log: true,
            lo,
            hi,
            ticks,
            minor,
        }
    }

    /// The axis coordinate of `v`.
    fn at(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-12).log10()
        } else {
            v
        }
    }

    /// The value at coordinate `c`.
    fn value(&self, c: f64) -> f64 {
        if self.log {
            10f64.powf(c)
        } else {
            c
        }
    }

    /// Whether coordinate `c` is on the axis.
    fn shows(&self, c: f64) -> bool {
        c >= self.lo - 1e-9 && c <= self.hi + 1e-9
    }

    /// The plotting coordinate: a linear range over `at(value)` with this axis's ticks.
    fn coord(&self) -> Ticked {
        Ticked::with_ticks(self.lo, self.hi, self.ticks.clone(), self.minor.clone())
    }

    /// The text of the tick at `c`, with `$` in front if `money`.
    fn label(&self, c: f64, money: bool) -> String {
        let v = self.value(c);
        let text = if self.log {
            if v >= 999.5 {
                thousands(v.round() as u64)
            } else if v >= 1.0 {
                format!("{}", v.round())
            } else {
                let decimals = (-(v.log10() + 1e-9).floor()).max(0.0) as usize;
                format!("{v:.decimals$}")
            }
        } else {
            let step = if self.ticks.len() >= 2 {
                self.ticks[1] - self.ticks[0]
            } else {
                1.0
            };
            if step >= 1.0 && v >= 999.5 {
                thousands(v.round() as u64)
            } else {
                fmt_tick(v, step)
            }
        };
        if money {
            format!("${text}")
        } else {
            text
        }
    }
}

/// What the figure shows, worked out from the rows before drawing.
struct PlanFigure<'a> {
    rows: &'a [PlanRow],
    points: Vec<Point>,
    /// The Pareto-optimal points' indices into `points`, by increasing time.
    front: Vec<usize>,
    /// `(GPU, colour, $/GPU-hour)` of the GPU types drawn.
    gpus: Vec<(String, RGBColor, f64)>,
    /// `(TP, shape)` of the tensor-parallel sizes drawn.
    tps: Vec<(u32, Shape)>,
    infeasible: Vec<Infeasible>,
    infeasible_count: usize,
    /// Feasible rows without a finite, non-negative time and cost.
    undrawable: usize,
    deadline: Deadline,
    x: Scale,
    y: Scale,
    /// Label only the Pareto-optimal points.
    front_labels_only: bool,
}

impl<'a> PlanFigure<'a> {
    fn new(rows: &'a [PlanRow], deadline_h: Option<f64>) -> PlanFigure<'a> {
        let drawable = |r: &PlanRow| {
            r.metrics().is_some_and(|m| {
                m.time_to_finish_s.is_finite()
                    && m.time_to_finish_s > 0.0
                    && m.cost_usd.is_finite()
                    && m.cost_usd >= 0.0
            })
        };
        let mut gpu_names: Vec<&str> = rows
            .iter()
            .filter(|r| drawable(r))
            .map(|r| r.gpu.as_str())
            .collect();
        gpu_names.sort_unstable();
        gpu_names.dedup();
        let gpus: Vec<(String, RGBColor, f64)> = gpu_names
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let price = rows
                    .iter()
                    .find(|r| r.gpu == *g)
                    .map_or(f64::NAN, |r| r.price_usd_per_gpu_hour);
                (g.to_string(), PALETTE[i % PALETTE.len()], price)
            })
            .collect();
        let mut tp_values: Vec<u32> = rows
            .iter()
            .filter(|r| drawable(r))
            .map(|r| r.tensor_parallel)
            .collect();
        tp_values.sort_unstable();
        tp_values.dedup();
        let tps: Vec<(u32, Shape)> = tp_values
            .iter()
            .enumerate()
            .map(|(i, &tp)| (tp, SHAPES[i % SHAPES.len()]))
            .collect();

        let mut points: Vec<Point> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| drawable(r))
            .filter_map(|(i, r)| Some((i, r, r.metrics()?)))
            .map(|(i, r, m)| Point {
                row: i,
                t_h: m.time_to_finish_s / 3600.0,
                cost: m.cost_usd,
                colour: gpus.iter().find(|g| g.0 == r.gpu).map_or(DARK, |g| g.1),
                shape: tps
                    .iter()
                    .find(|t| t.0 == r.tensor_parallel)
                    .map_or(Shape::Circle, |t| t.1),
                radius: radius(r.num_gpus),
                pareto: false,
                label: label_of(r),
            })
            .collect();
        let front = pareto_front(&mut points);

        let mut infeasible: Vec<Infeasible> = Vec::new();
        let mut infeasible_count = 0;
        for (r, why) in rows.iter().filter_map(|r| Some((r, r.reason()?))) {
            infeasible_count += 1;
            let reason = Some(why.to_string())
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| "no reason given".to_string());
            match infeasible.iter_mut().find(|g| g.reason == reason) {
                Some(g) => g.labels.push(label_of(r)),
                None => infeasible.push(Infeasible {
                    labels: vec![label_of(r)],
                    reason,
                }),
            }
        }
        let undrawable = rows
            .iter()
            .filter(|r| r.metrics().is_some() && !drawable(r))
            .count();

        let times: Vec<f64> = points.iter().map(|p| p.t_h).collect();
        let costs: Vec<f64> = points.iter().map(|p| p.cost).collect();
        let t_min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let t_max = times.iter().copied().fold(0.0, f64::max);
        let deadline = match deadline_h.filter(|d| d.is_finite() && *d > 0.0) {
            None => Deadline::None,
            Some(d) if points.is_empty() => Deadline::Drawn(d),
            Some(d) if d > 2.0 * t_max => Deadline::FarRight(d),
            Some(d) if Scale::is_log_for(&times) && d < 0.5 * t_min => Deadline::FarLeft(d),
            Some(d) => Deadline::Drawn(d),
        };
        let drawn_deadline = match deadline {
            Deadline::Drawn(d) => Some(d),
            _ => None,
        };
        // Room right of the slowest candidate for its label, and past the deadline for its
        // shading.
        let x = Scale::new(&times, drawn_deadline.map(|d| d * 1.04), 0.1);
        let y = Scale::new(&costs, None, 0.1);
        PlanFigure {
            rows,
            front_labels_only: points.len() > MAX_LABELLED,
            points,
            front,
            gpus,
            tps,
            infeasible,
            infeasible_count,
            undrawable,
            deadline,
            x,
            y,
        }
    }

    /// The line under the title: how many candidates, and the pick.
    fn subtitles(&self) -> Vec<String> {
        let n = self.rows.len();
        if n == 0 {
            return vec!["No candidates to show.".to_string()];
        }
        let plural = |k: usize, one: &str, many: &str| {
            if k == 1 {
                one.to_string()
            } else {
                many.to_string()
            }
        };
        if self.points.is_empty() {
            return vec![
                format!(
                    "None of the {n} {} is feasible: there is nothing to plot. Why each is \
                     infeasible is listed below.",
                    plural(n, "candidate", "candidates")
                ),
                format!("None of the {n} candidates is feasible: nothing to plot."),
            ];
        }
        let counts = format!(
            "{n} {}: {} drawn, {} infeasible.",
            plural(n, "candidate", "candidates"),
            self.points.len(),
            self.infeasible_count
        );
        let describe = |p: &Point| format!("{} at {} in {}", p.label, usd(p.cost), hours(p.t_h));
        let cheapest = |within: Option<f64>| {
            self.points
                .iter()
                .filter(|p| within.is_none_or(|d| p.t_h <= d))
                .min_by(|a, b| a.cost.total_cmp(&b.cost).then(a.t_h.total_cmp(&b.t_h)))
        };
        let fastest = self
            .points
            .iter()
            .min_by(|a, b| a.t_h.total_cmp(&b.t_h).then(a.cost.total_cmp(&b.cost)));
        let deadline_h = match self.deadline {
            Deadline::Drawn(d) | Deadline::FarLeft(d) | Deadline::FarRight(d) => Some(d),
            Deadline::None => None,
        };
        let pick = match deadline_h {
            Some(d) => match cheapest(Some(d)) {
                Some(p) => format!(
                    "Cheapest finishing within the {} h deadline: {}.",
                    short(d),
                    describe(p)
                ),
                None => format!(
                    "None finishes within the {} h deadline; the fastest: {}.",
                    short(d),
                    fastest.map_or(String::new(), describe)
                ),
            },
            None => {
                let c = cheapest(None).map_or(String::new(), describe);
                let f = fastest.map_or(String::new(), describe);
                if c == f {
                    format!("Cheapest and fastest: {c}.")
                } else {
                    format!("Cheapest: {c}; fastest: {f}.")
                }
            }
        };
        vec![format!("{counts} {pick}"), pick, counts]
    }
}

/// Mark the Pareto-optimal points (no other is at least as fast and cheaper, or faster and as
/// cheap) and return their indices by increasing time.
fn pareto_front(points: &mut [Point]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        let (p, q) = (&points[a], &points[b]);
        p.t_h.total_cmp(&q.t_h).then(p.cost.total_cmp(&q.cost))
    });
    let mut front = Vec::new();
    let mut best = f64::INFINITY;
    for i in order {
        if points[i].cost < best {
            best = points[i].cost;
            points[i].pareto = true;
            front.push(i);
        }
    }
    front
}

// ---------------------------------------------------------------------------------------------
// Drawing

/// Width of the key right of the plot.
const KEY_W: u32 = 310;
/// Rows of the key.
const ROW_PX: i32 = LEGEND_PX as i32 + 8;
/// Width of a swatch in the key.
const SWATCH_PX: i32 = 30;
/// Space between a swatch and its text.
const GAP_PX: i32 = 8;
/// Size of the labels of the points.
const LABEL_PX: u32 = 14;
/// Space between a marker and its label.
const LABEL_GAP_PX: i32 = 3;
/// Most lines one infeasible entry of the key takes.
const MAX_ENTRY_LINES: usize = 3;
/// Dash and gap of the deadline line.
const DASH_PX: (i32, i32) = (8, 5);

/// `c` darkened for text.
fn ink(c: RGBColor) -> RGBColor {
    let d = |v: u8| (f64::from(v) * 0.72).round() as u8;
    RGBColor(d(c.0), d(c.1), d(c.2))
}

/// Draw a marker centred on pixel `c` of `area`, with a white outline that keeps overlapping
/// markers apart.
fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: (i32, i32),
    r: i32,
    shape: Shape,
    colour: RGBColor,
) -> Result<(), DrawFailure> {
    match shape.polygon(c, r) {
        None => {
            area.draw(&Circle::new(c, r, colour.filled()))?;
            area.draw(&Circle::new(c, r, WHITE.stroke_width(1)))?;
        }
        Some(pts) => {
            area.draw(&Polygon::new(pts.clone(), colour.filled()))?;
            let mut closed = pts.clone();
            closed.push(pts[0]);
            area.draw(&PathElement::new(closed, WHITE.stroke_width(1)))?;
        }
    }
    Ok(())
}

/// A dashed vertical line at `x` from `y0` to `y1` (pixels).
fn dashed_vertical<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: i32,
    (y0, y1): (i32, i32),
    style: ShapeStyle,
) -> Result<(), DrawFailure> {
    let mut y = y0;
    while y < y1 {
        let end = (y + DASH_PX.0).min(y1);
        area.draw(&PathElement::new(vec![(x, y), (x, end)], style))?;
        y = end + DASH_PX.1;
    }
    Ok(())
}

/// A box in pixels: left, top, right, bottom.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rect {
    x0: i32,
    y0: i32,
    x1: i32,
    y1: i32,
}

impl Rect {
    fn around((x, y): (i32, i32), r: i32) -> Rect {
        Rect {
            x0: x - r,
            y0: y - r,
            x1: x + r,
            y1: y + r,
        }
    }

    fn overlaps(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    fn grown(&self, by: i32) -> Rect {
        Rect {
            x0: self.x0 - by,
            y0: self.y0 - by,
            x1: self.x1 + by,
            y1: self.y1 + by,
        }
    }

    /// Whether the horizontal or vertical segment from `a` to `b` passes through it.
    fn crosses(&self, a: (i32, i32), b: (i32, i32)) -> bool {
        let seg = Rect {
            x0: a.0.min(b.0),
            y0: a.1.min(b.1),
            x1: a.0.max(b.0) + 1,
            y1: a.1.max(b.1) + 1,
        };
        self.overlaps(&seg)
    }

    /// The point of the box nearest to `p`.
    fn nearest(&self, (x, y): (i32, i32)) -> (i32, i32) {
        (x.clamp(self.x0, self.x1), y.clamp(self.y0, self.y1))
    }
}

/// A horizontal or vertical line in pixels, from one end to the other.
type Segment = ((i32, i32), (i32, i32));

/// A placed label: its box, and a leader line from the marker if it stands off.
struct Placed {
    point: usize,
    rect: Rect,
    leader: Option<Segment>,
}

/// Directions tried around a marker, in order of preference: right, left, above, below, then
/// the diagonals.
const DIRECTIONS: [(i32, i32); 8] = [
    (1, 0),
    (-1, 0),
    (0, -1),
    (0, 1),
    (1, -1),
    (1, 1),
    (-1, -1),
    (-1, 1),
];

/// Place the labels of the points `order` (in that priority) at pixel positions `px`, in a
/// plot of `size` pixels: never over a marker, another label or `blocked` boxes, nor out of
/// the plot; preferably crossing none of the `segments` (horizontal or vertical lines), and
/// next to their marker. A label with no room is left out.
fn place_labels(
    points: &[Point],
    px: &[(i32, i32)],
    sizes: &[(i32, i32)],
    order: &[usize],
    size: (i32, i32),
    blocked: &[Rect],
    segments: &[Segment],
) -> Vec<Placed> {
    let markers: Vec<Rect> = points
        .iter()
        .zip(px)
        .map(|(p, &c)| Rect::around(c, p.radius + 1))
        .collect();
    let mut placed: Vec<Placed> = Vec::new();
    for &i in order {
        let (w, h) = sizes[i];
        let (cx, cy) = px[i];
        let r = points[i].radius + LABEL_GAP_PX;
        let mut best: Option<(i32, Placed)> = None;
        for ring in 0..3 {
            let extra = ring * (h + 4);
            for (k, &(dx, dy)) in DIRECTIONS.iter().enumerate() {
                let reach = if dx != 0 && dy != 0 {
                    (f64::from(r + extra) * 0.75).round() as i32
                } else {
                    r + extra
                };
                let (ax, ay) = (cx + dx * reach, cy + dy * reach);
                let x0 = match dx {
                    1 => ax,
                    -1 => ax - w,
                    _ => ax - w / 2,
                };
                let y0 = match dy {
                    1 => ay,
                    -1 => ay - h,
                    _ => ay - h / 2,
                };
                let rect = Rect {
                    x0,
                    y0,
                    x1: x0 + w,
                    y1: y0 + h,
                };
                let inside = rect.x0 >= 2 && rect.y0 >= 2 && rect.x1 <= size.0 - 2 && {
                    rect.y1 <= size.1 - 2
                };
                let padded = rect.grown(2);
                let free = inside
                    && !markers.iter().any(|m| m.overlaps(&padded))
                    && !blocked.iter().any(|b| b.overlaps(&padded))
                    && !placed.iter().any(|p| p.rect.overlaps(&padded));
                if !free {
                    continue;
                }
                let crossings = segments
                    .iter()
                    .filter(|(a, b)| rect.crosses(*a, *b))
                    .count() as i32;
                // Crossing a line costs more than standing one step off; order breaks ties.
                let score = (crossings * 3 + ring) * 16 + k as i32;
                if best.as_ref().is_none_or(|(s, _)| score < *s) {
                    let leader = (ring > 0).then(|| {
                        let end = rect.nearest((cx, cy));
                        let (ex, ey) = (f64::from(end.0 - cx), f64::from(end.1 - cy));
                        let len = ex.hypot(ey).max(1.0);
                        let start = (
                            cx + (ex / len * f64::from(points[i].radius + 1)).round() as i32,
                            cy + (ey / len * f64::from(points[i].radius + 1)).round() as i32,
                        );
                        (start, end)
                    });
                    best = Some((
                        score,
                        Placed {
                            point: i,
                            rect,
                            leader,
                        },
                    ));
                }
            }
            if best.as_ref().is_some_and(|(s, _)| *s < (ring + 1) * 16) {
                // Free of lines at this distance: farther out cannot do better.
                break;
            }
        }
        if let Some((_, p)) = best {
            placed.push(p);
        }
    }
    placed
}

/// One row of the key.
enum KeyRow {
    /// A heading, dark.
    Header(String),
    /// Markers with their texts, side by side: `(shape, radius, colour, text)`.
    Markers(Vec<(Shape, i32, RGBColor, String)>),
    /// The Pareto staircase.
    Front(String),
    /// The deadline: a dashed line over the shading.
    Deadline(String),
    /// A line of a note, grey, indented by the pixels given.
    Note(String, i32),
    /// Half a row of space.
    Gap,
}

impl KeyRow {
    fn height(&self) -> i32 {
        match self {
            KeyRow::Gap => ROW_PX / 2,
            KeyRow::Note(..) => ROW_PX - 3,
            _ => ROW_PX,
        }
    }
}

impl PlanFigure<'_> {
    /// The key's rows, fitted into `height` pixels (the list of infeasible candidates is cut
    /// short if need be). `unlabelled` counts the labels that found no room.
    fn key_rows<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        width: i32,
        height: i32,
        unlabelled: usize,
        raster: bool,
    ) -> Result<Vec<KeyRow>, DrawFailure> {
        let mut rows: Vec<KeyRow> = Vec::new();
        // Markers laid out side by side in rows no wider than the key.
        let marker_rows = |items: Vec<(Shape, i32, RGBColor, String)>,
                           rows: &mut Vec<KeyRow>|
         -> Result<(), DrawFailure> {
            let mut line: Vec<(Shape, i32, RGBColor, String)> = Vec::new();
            let mut used = 0;
            for item in items {
                let w = 2 * 12 + GAP_PX + measure(area, &item.3, LEGEND_PX, raster)?.0 + 14;
                if used + w > width && !line.is_empty() {
                    rows.push(KeyRow::Markers(std::mem::take(&mut line)));
                    used = 0;
                }
                used += w;
                line.push(item);
            }
            if !line.is_empty() {
                rows.push(KeyRow::Markers(line));
            }
            Ok(())
        };
        if !self.points.is_empty() {
            rows.push(KeyRow::Header("colour: GPU ($ per GPU-hour)".into()));
            for (g, c, price) in &self.gpus {
                let text = if price.is_finite() {
                    format!("{g} ({})", usd(*price))
                } else {
                    g.clone()
                };
                rows.push(KeyRow::Markers(vec![(Shape::Circle, 6, *c, text)]));
            }
            rows.push(KeyRow::Gap);
            rows.push(KeyRow::Header("shape: GPUs per server (TP)".into()));
            let shapes = self
                .tps
                .iter()
                .map(|&(tp, s)| (s, 6, DARK, format!("TP{tp}")))
                .collect();
            marker_rows(shapes, &mut rows)?;
            let counts: Vec<u32> = {
                let mut c: Vec<u32> = self
                    .points
                    .iter()
                    .map(|p| self.rows[p.row].num_gpus)
                    .collect();
                c.sort_unstable();
                c.dedup();
                c
            };
            if counts.len() > 1 {
                rows.push(KeyRow::Header("size: GPUs rented".into()));
                let sizes = counts
                    .iter()
                    .map(|&n| (Shape::Circle, radius(n), GREY, n.to_string()))
                    .collect();
                marker_rows(sizes, &mut rows)?;
            }
            rows.push(KeyRow::Gap);
            rows.push(KeyRow::Front("cheapest within each time".into()));
            rows.push(KeyRow::Note("(Pareto front)".into(), SWATCH_PX + GAP_PX));
            if let Deadline::Drawn(d) = self.deadline {
                rows.push(KeyRow::Deadline(format!("deadline {} h", short(d))));
                rows.push(KeyRow::Note(
                    "(shaded: finishes too late)".into(),
                    SWATCH_PX + GAP_PX,
                ));
            }
            rows.push(KeyRow::Gap);
        }

        // Notes.
        let mut notes: Vec<String> = Vec::new();
        match self.deadline {
            Deadline::FarRight(d) => notes.push(format!(
                "The {} h deadline is far right of the axis: every candidate meets it.",
                short(d)
            )),
            Deadline::FarLeft(d) => notes.push(format!(
                "The {} h deadline is far left of the axis: no candidate meets it.",
                short(d)
            )),
            _ => {}
        }
        if self.front_labels_only {
            notes.push(format!(
                "Labelled: only the {} Pareto-optimal of {} candidates.",
                self.front.len(),
                self.points.len()
            ));
        }
        if unlabelled > 0 {
            notes.push(format!(
                "{unlabelled} label{} left out for lack of room.",
                if unlabelled == 1 { "" } else { "s" }
            ));
        }
        if self.undrawable > 0 {
            notes.push(format!(
                "{} feasible candidate{} no finite time or cost: not drawn.",
                self.undrawable,
                if self.undrawable == 1 {
                    " has"
                } else {
                    "s have"
                }
            ));
        }
        let n = self.rows.len();
        let feasibility = match self.infeasible_count {
            _ if n == 0 => None,
            0 if n == 1 => Some("The only candidate is feasible.".to_string()),
            1 if n == 1 => Some("The only candidate is infeasible:".to_string()),
            0 => Some(format!("All {n} candidates are feasible.")),
            k if k == n => Some(format!("All {n} candidates are infeasible:")),
            k => Some(format!(
                "{k} of {n} candidates {} infeasible, not drawn:",
                if k == 1 { "is" } else { "are" }
            )),
        };
        notes.extend(feasibility);
        for note in notes {
            for l in wrap(area, &note, width, raster)? {
                rows.push(KeyRow::Note(l, 0));
            }
        }

        // The infeasible candidates, as many as fit.
        let indent = 12;
        let used: i32 = rows.iter().map(KeyRow::height).sum();
        let mut room = height - used;
        let line_h = KeyRow::Note(String::new(), 0).height();
        let mut shown = 0;
        let total: usize = self.infeasible.iter().map(|g| g.labels.len()).sum();
        let mut entries: Vec<Vec<String>> = Vec::new();
        for g in &self.infeasible {
            let text = format!("{}: {}", g.labels.join(", "), g.reason);
            let mut lines = wrap(area, &text, width - indent, raster)?;
            if lines.len() > MAX_ENTRY_LINES {
                lines.truncate(MAX_ENTRY_LINES);
                if let Some(last) = lines.last_mut() {
                    last.push('\u{2026}');
                }
            }
            entries.push(lines);
        }
        for (g, lines) in self.infeasible.iter().zip(entries) {
            let left = total - shown - g.labels.len();
            // Keep a line for "… and N more" unless this is the last entry.
            let need = lines.len() as i32 + i32::from(left > 0);
            if need * line_h > room {
                break;
            }
            room -= lines.len() as i32 * line_h;
            shown += g.labels.len();
            for (k, l) in lines.into_iter().enumerate() {
                rows.push(KeyRow::Note(l, if k == 0 { 0 } else { indent }));
            }
        }
        if shown < total {
            rows.push(KeyRow::Note(
                format!("\u{2026} and {} more (see plan.csv)", total - shown),
                0,
            ));
        }
        Ok(rows)
    }

    fn draw_key<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        top: i32,
        unlabelled: usize,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let (w, h) = area.dim_in_pixel();
        let (x0, width) = (8, w as i32 - 26);
        let rows = self.key_rows(area, width, h as i32 - top - 8, unlabelled, raster)?;
        let text = |colour: &RGBColor| {
            (FONT, LEGEND_PX)
                .into_font()
                .color(colour)
                .pos(Pos::new(HPos::Left, VPos::Center))
        };
        let mut y = top;
        for row in &rows {
            let mid = y + row.height() / 2;
            match row {
                KeyRow::Header(t) => {
                    area.draw(&Text::new(t.clone(), (x0, mid), text(&DARK)))?;
                }
                KeyRow::Markers(items) => {
                    let mut x = x0;
                    for (shape, r, colour, t) in items {
                        let slot = (2 * r).max(SWATCH_PX / 2 + 1);
                        draw_marker(area, (x + slot / 2, mid), *r, *shape, *colour)?;
                        let tx = x + slot + GAP_PX;
                        area.draw(&Text::new(t.clone(), (tx, mid), text(&BLACK)))?;
                        x = tx + measure(area, t, LEGEND_PX, raster)?.0 + 14;
                    }
                }
                KeyRow::Front(t) => {
                    let s = DARK.stroke_width(2);
                    area.draw(&PathElement::new(
                        vec![
                            (x0, mid - 6),
                            (x0 + SWATCH_PX / 2, mid - 6),
                            (x0 + SWATCH_PX / 2, mid + 6),
                            (x0 + SWATCH_PX, mid + 6),
                        ],
                        s,
                    ))?;
                    let tx = x0 + SWATCH_PX + GAP_PX;
                    area.draw(&Text::new(t.clone(), (tx, mid), text(&BLACK)))?;
                }
                KeyRow::Deadline(t) => {
                    let cx = x0 + SWATCH_PX / 2;
                    area.draw(&Rectangle::new(
                        [(cx, mid - 9), (x0 + SWATCH_PX, mid + 9)],
                        RED.mix(0.1).filled(),
                    ))?;
                    dashed_vertical(area, cx, (mid - 9, mid + 9), RED.stroke_width(2))?;
                    let tx = x0 + SWATCH_PX + GAP_PX;
                    area.draw(&Text::new(t.clone(), (tx, mid), text(&BLACK)))?;
                }
                KeyRow::Note(t, indent) => {
                    area.draw(&Text::new(t.clone(), (x0 + indent, mid), text(&GREY)))?;
                }
                KeyRow::Gap => {}
            }
            y += row.height();
        }
        Ok(())
    }

    /// The plot of cost against time; returns how many labels found no room.
    fn draw_plot<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<usize, DrawFailure> {
        let (x, y) = (&self.x, &self.y);
        let x_desc = if x.log {
            "time to finish the workload (hours, log scale)"
        } else {
            "time to finish the workload (hours)"
        };
        let y_desc = if y.log {
            "total cost ($, log scale)"
        } else {
            "total cost ($)"
        };
        let mut chart = ChartBuilder::on(area)
            .margin_top(PANEL_MARGIN_TOP_PX)
            .margin_right(16)
            .margin_left(PANEL_MARGIN_LEFT_PX)
            .margin_bottom(PANEL_MARGIN_BOTTOM_PX)
            .x_label_area_size(X_LABEL_AREA_PX)
            .y_label_area_size(Y_LABEL_AREA_PX)
            .build_cartesian_2d(x.coord(), y.coord())?;
        let fx = |c: &f64| x.label(*c, false);
        let fy = |c: &f64| y.label(*c, true);
        chart
            .configure_mesh()
            .x_label_formatter(&fx)
            .y_label_formatter(&fy)
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, TICK_PX))
            .axis_desc_style((FONT, DESC_PX))
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT)
            .draw()?;

        let plot_area = chart.plotting_area();
        let (bx, by) = plot_area.get_base_pixel();
        let plot = plot_area.strip_coord_spec();
        let (w, h) = plot.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let to_px = |t_h: f64, cost: f64| {
            let (px, py) = chart.backend_coord(&(x.at(t_h), y.at(cost)));
            (px - bx, py - by)
        };

        // The deadline: the time beyond it shaded, a dashed line and its name at the top.
        let mut blocked: Vec<Rect> = Vec::new();
        let mut segments: Vec<Segment> = Vec::new();
        if let Deadline::Drawn(d) = self.deadline {
            if x.shows(x.at(d)) {
                let dx = to_px(d, y.value(y.lo)).0;
                plot.draw(&Rectangle::new([(dx, 0), (w, h)], RED.mix(0.07).filled()))?;
                dashed_vertical(&plot, dx, (0, h), RED.stroke_width(2))?;
                segments.push(((dx, 0), (dx, h)));
                let name = format!("deadline {} h", short(d));
                let (tw, th) = measure(&plot, &name, LEGEND_PX, raster)?;
                let right = dx + 6 + tw <= w - 4;
                let tx = if right { dx + 6 } else { dx - 6 - tw };
                plot.draw(&Text::new(
                    name,
                    (tx, 6),
                    (FONT, LEGEND_PX)
                        .into_font()
                        .color(&RED)
                        .pos(Pos::new(HPos::Left, VPos::Top)),
                ))?;
                blocked.push(Rect {
                    x0: tx,
                    y0: 6,
                    x1: tx + tw,
                    y1: 6 + th,
                });
            }
        }

        if self.points.is_empty() {
            return Ok(0);
        }
        let px: Vec<(i32, i32)> = self.points.iter().map(|p| to_px(p.t_h, p.cost)).collect();

        // The Pareto front as a staircase: right from each point to the next one's time, down
        // to its cost, and on to the right edge from the last.
        let mut stair: Vec<(i32, i32)> = Vec::new();
        for (k, &i) in self.front.iter().enumerate() {
            if k > 0 {
                let prev = stair[stair.len() - 1];
                stair.push((px[i].0, prev.1));
            }
            stair.push(px[i]);
        }
        if let Some(&last) = stair.last() {
            stair.push((w, last.1));
        }
        for s in stair.windows(2) {
            segments.push((s[0], s[1]));
        }
        plot.draw(&PathElement::new(stair, DARK.mix(0.85).stroke_width(2)))?;

        // Markers, the largest first so that small ones stay visible on top.
        let mut order: Vec<usize> = (0..self.points.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.points[i].radius));
        for &i in &order {
            let p = &self.points[i];
            draw_marker(&plot, px[i], p.radius, p.shape, p.colour)?;
        }

        // Labels: the Pareto front by time, then the rest by cost.
        let mut wanted: Vec<usize> = self.front.clone();
        if !self.front_labels_only {
            let mut rest: Vec<usize> = (0..self.points.len())
                .filter(|&i| !self.points[i].pareto)
                .collect();
            rest.sort_by(|&a, &b| self.points[a].cost.total_cmp(&self.points[b].cost));
            wanted.extend(rest);
        }
        let mut sizes = Vec::with_capacity(self.points.len());
        for p in &self.points {
            let (tw, th) = measure(&plot, &p.label, LABEL_PX, raster)?;
            sizes.push((tw + 2, th + 2));
        }
        let placed = place_labels(
            &self.points,
            &px,
            &sizes,
            &wanted,
            (w, h),
            &blocked,
            &segments,
        );
        for l in &placed {
            let p = &self.points[l.point];
            if let Some((a, b)) = l.leader {
                plot.draw(&PathElement::new(vec![a, b], GREY.stroke_width(1)))?;
            }
            plot.draw(&Rectangle::new(
                [(l.rect.x0, l.rect.y0), (l.rect.x1, l.rect.y1)],
                WHITE.mix(0.8).filled(),
            ))?;
            plot.draw(&Text::new(
                p.label.clone(),
                (l.rect.x0 + 1, l.rect.y0 + 1),
                (FONT, LABEL_PX)
                    .into_font()
                    .color(&ink(p.colour))
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            ))?;
        }
        Ok(wanted.len() - placed.len())
    }
}

impl Figure for PlanFigure<'_> {
    const NAME: &'static str = "plan";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        // The longest subtitle that fits.
        let options = self.subtitles();
        let room = WIDTH_PX as i32 - 40;
        let mut subtitle = options.last().cloned().unwrap_or_default();
        for s in &options {
            if measure(root, s, SUBTITLE_PX, raster)?.0 <= room {
                subtitle = s.clone();
                break;
            }
        }
        let body = heading(root, PLAN_TITLE, &subtitle)?;
        if self.points.is_empty() {
            return self.draw_empty(&body, raster);
        }
        let bw = body.dim_in_pixel().0;
        let (left, key) = body.split_horizontally(bw - KEY_W);
        let unlabelled = self.draw_plot(&left, raster)?;
        self.draw_key(&key, PANEL_MARGIN_TOP_PX + 2, unlabelled, raster)?;
        Ok(())
    }
}

impl PlanFigure<'_> {
    /// With nothing to plot: a frame saying so, and in it the infeasible candidates with their
    /// reasons.
    fn draw_empty<DB: DrawingBackend>(
        &self,
        body: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let (w, h) = body.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let frame = [(20, PANEL_MARGIN_TOP_PX), (w - 20, h - 20)];
        body.draw(&Rectangle::new(frame, GRID_BOLD.stroke_width(1)))?;
        let cx = w / 2;
        let centred = |px: u32, colour: RGBColor| {
            (FONT, px)
                .into_font()
                .color(&colour)
                .pos(Pos::new(HPos::Center, VPos::Center))
        };
        let (message, why) = if self.rows.is_empty() {
            ("No candidates", "the plan had no candidate to evaluate")
        } else {
            ("No feasible candidate", "there is no cost or time to plot")
        };
        let top = frame[0].1;
        body.draw(&Text::new(message, (cx, top + 40), centred(22, DARK)))?;
        body.draw(&Text::new(why, (cx, top + 70), centred(LEGEND_PX, GREY)))?;
        // The list, in a column as wide as reads well.
        let list_w = 760.min(w - 80);
        let list = body.margin(
            (top + 96) as u32,
            (h - frame[1].1 + 8) as u32,
            ((w - list_w) / 2) as u32,
            ((w - list_w) / 2) as u32,
        );
        self.draw_key(&list, 0, 0, raster)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::png::decode_rgb;
    use super::super::sweep::tests::{png_size, svg_text, texts};
    use super::super::HEIGHT_PX;
    use super::*;
    use crate::analysis::Constraint;
    use crate::memory::Verdict;
    use crate::plan::{Candidate, Outcome, PlanMetrics};

    /// A feasible candidate finishing in `time_h` hours at the GPU's `price` per hour.
    fn row(gpu: &str, num_gpus: u32, tp: u32, time_h: f64, price: f64) -> PlanRow {
        PlanRow::new(
            &candidate(gpu, num_gpus, tp),
            price,
            Outcome::Feasible(PlanMetrics {
                kv_capacity_tokens: 100_000,
                oom_verdict: Some(Verdict::Safe),
                gen_tok_per_s: 1_000.0,
                steady_req_per_s: 1.0,
                time_to_finish_s: time_h * 3600.0,
                cost_usd: time_h * f64::from(num_gpus) * price,
                usd_per_m_output_tokens: 1.0,
                ttft_p99_ms: 500.0,
                e2e_p99_ms: 60_000.0,
                binding: Constraint::ClientConcurrency,
                meets_deadline: None,
            }),
        )
    }

    fn candidate(gpu: &str, num_gpus: u32, tensor_parallel: u32) -> Candidate {
        Candidate {
            gpu: gpu.into(),
            num_gpus,
            tensor_parallel,
        }
    }

    /// An infeasible candidate.
    fn infeasible(gpu: &str, num_gpus: u32, tp: u32, price: f64, reason: &str) -> PlanRow {
        PlanRow::new(
            &candidate(gpu, num_gpus, tp),
            price,
            Outcome::Infeasible {
                reason: reason.into(),
            },
        )
    }

    /// A 70B dense model on three GPU types × 1, 2, 4 and 8 GPUs (TP = GPUs): one GPU of any
    /// type cannot hold it, the PCIe card scales worse.
    fn realistic() -> Vec<PlanRow> {
        let fit = "model weights 131.5 GiB per GPU exceed the memory free before they load";
        vec![
            infeasible("h100", 1, 1, 2.95, fit),
            row("h100", 2, 2, 31.0, 2.95),
            row("h100", 4, 4, 12.5, 2.95),
            row("h100", 8, 8, 7.1, 2.95),
            infeasible(
                "h200",
                1,
                1,
                4.0,
                "would run out of memory at mem_fraction_static 0.880",
            ),
            row("h200", 2, 2, 19.0, 4.0),
            row("h200", 4, 4, 9.2, 4.0),
            row("h200", 8, 8, 5.3, 4.0),
            infeasible("rtx-pro-6000", 1, 1, 1.57, fit),
            row("rtx-pro-6000", 2, 2, 58.0, 1.57),
            row("rtx-pro-6000", 4, 4, 26.0, 1.57),
            row("rtx-pro-6000", 8, 8, 15.5, 1.57),
        ]
    }

    /// Seven GPU types × 1 to 16 GPUs × every TP dividing the count, times spanning
    /// 100-fold: too many to label every point.
    fn many() -> Vec<PlanRow> {
        let gpus = [
            ("a100-80gb", 1.30, 1.6),
            ("b200", 5.25, 0.45),
            ("h100", 2.95, 1.0),
            ("h200", 4.00, 0.7),
            ("l40s", 1.40, 2.6),
            ("mi300x", 1.85, 0.8),
            ("rtx-pro-6000", 1.57, 1.8),
        ];
        let mut rows = Vec::new();
        for (g, price, slow) in gpus {
            for n in [1u32, 2, 4, 8, 16] {
                for tp in [1u32, 2, 4, 8] {
                    if tp > n {
                        continue;
                    }
                    if g == "l40s" && tp < 4 {
                        rows.push(infeasible(g, n, tp, price, "the model does not fit"));
                        continue;
                    }
                    let t = 40.0 * slow / f64::from(n).powf(0.9) * (1.0 + 0.05 * f64::from(tp));
                    rows.push(row(g, n, tp, t, price));
                }
            }
        }
        rows
    }

    /// Four GPU types × 1, 2, 4 and 8 GPUs scaling almost perfectly: each type's candidates
    /// cost about the same, on a line across a 24-fold range of times.
    fn crowded() -> Vec<PlanRow> {
        let mut rows = Vec::new();
        for (g, price, t1) in [
            ("b200", 5.25, 20.0),
            ("h100", 2.95, 40.0),
            ("h200", 4.0, 28.0),
            ("rtx-pro-6000", 1.57, 60.0),
        ] {
            for n in [1u32, 2, 4, 8] {
                let t = t1 / f64::from(n) * (1.0 + 0.02 * f64::from(n));
                rows.push(row(g, n, n, t, price));
            }
        }
        rows
    }

    /// Forty infeasible candidates, each with its own reason, and one feasible.
    fn long_infeasible() -> Vec<PlanRow> {
        let mut rows: Vec<PlanRow> = (1..=40)
            .map(|n| {
                infeasible(
                    "l40s",
                    n,
                    1,
                    1.4,
                    &format!("would run out of memory at mem_fraction_static 0.{n:03}"),
                )
            })
            .collect();
        rows.push(row("h100", 8, 8, 3.0, 2.95));
        rows
    }

    /// Render both formats, check them, and return the SVG's texts.
    fn render_both(rows: &[PlanRow], deadline_h: Option<f64>) -> (String, Vec<String>) {
        let png = plan_figure(rows, deadline_h, Format::Png).unwrap();
        assert_eq!(png_size(&png), (WIDTH_PX, HEIGHT_PX));
        assert!(
            png.len() > 10_000,
            "a PNG with content: {} bytes",
            png.len()
        );
        let svg = plan_figure(rows, deadline_h, Format::Svg).unwrap();
        let s = svg_text(&svg).to_string();
        assert!(s.contains(PLAN_TITLE), "the SVG holds its title");
        let t = texts(&s);
        (s, t)
    }

    fn has(texts: &[String], want: &str) -> bool {
        texts.iter().any(|t| t == want)
    }

    #[test]
    fn a_realistic_plan_draws_every_feasible_candidate_labelled() {
        let rows = realistic();
        let (s, t) = render_both(&rows, Some(24.0));
        assert!(s.matches("<text").count() >= 40, "ticks, labels and key");
        for r in rows.iter().filter(|r| r.metrics().is_some()) {
            assert!(has(&t, &label_of(r)), "{} is labelled", label_of(r));
        }
        assert!(
            has(&t, "deadline 24 h"),
            "the deadline is named on the plot"
        );
        assert!(has(&t, "time to finish the workload (hours)"));
        assert!(has(&t, "total cost ($)"));
        assert!(has(&t, "h200 ($4.00)"), "the key gives each GPU's price");
        assert!(has(&t, "TP8"));
        assert!(has(&t, "3 of 12 candidates are infeasible, not drawn:"));
        let all = t.join(" ");
        assert!(all.contains("1\u{d7} h100 TP1, 1\u{d7} rtx-pro-6000 TP1: model weights"));
        assert!(all.contains("would run out of memory"));
        assert!(s.contains(
            "Cheapest finishing within the 24 h deadline: 4\u{d7} h200 TP4 at $147 in 9.20 h."
        ));
        let fig = PlanFigure::new(&rows, Some(24.0));
        assert!(!fig.x.log && !fig.y.log, "times span 11×, costs 1.3×");
        assert!(
            fig.y.lo > 0.0,
            "similar costs get an axis that tells them apart"
        );
        // The PNG holds the markers' colours.
        let png = plan_figure(&rows, Some(24.0), Format::Png).unwrap();
        let (_, _, px) = decode_rgb(&png);
        let count = |c: RGBColor| px.chunks(3).filter(|p| p == &[c.0, c.1, c.2]).count();
        for (g, c, _) in &fig.gpus {
            assert!(count(*c) > 200, "{g}'s markers are drawn");
        }
    }

    #[test]
    fn the_pareto_front_is_the_cheapest_for_each_time() {
        let rows = realistic();
        let fig = PlanFigure::new(&rows, None);
        let front: Vec<String> = fig
            .front
            .iter()
            .map(|&i| fig.points[i].label.clone())
            .collect();
        // h200 ×8 is fastest, h100 ×8 slower and cheaper, h200 ×4 slower and cheaper still;
        // nothing slower is cheaper than that.
        assert_eq!(
            front,
            ["8\u{d7} h200 TP8", "8\u{d7} h100 TP8", "4\u{d7} h200 TP4"]
        );
        assert_eq!(fig.points.iter().filter(|p| p.pareto).count(), 3);
        let (s, _) = render_both(&rows, None);
        assert!(s.contains("Cheapest: 4\u{d7} h200 TP4 at $147 in 9.20 h; fastest: 8\u{d7} h200"));
    }

    #[test]
    fn no_feasible_candidate_draws_a_figure_that_says_so() {
        let rows = vec![
            infeasible("h100", 1, 1, 2.95, "the model does not fit"),
            infeasible("l40s", 2, 2, 1.4, "the model does not fit"),
            infeasible("h100", 8, 3, 2.95, "TP 3 does not divide 8 GPUs"),
        ];
        let (s, t) = render_both(&rows, Some(10.0));
        assert!(has(&t, "No feasible candidate"));
        assert!(s.contains("None of the 3 candidates is feasible"));
        assert!(has(&t, "All 3 candidates are infeasible:"));
        let all = t.join(" ");
        assert!(all.contains("1\u{d7} h100 TP1, 2\u{d7} l40s TP2: the model does not fit"));
        assert!(all.contains("8\u{d7} h100 TP3: TP 3 does not divide 8 GPUs"));
        let (_, t) = render_both(&[], None);
        assert!(has(&t, "No candidates"));
    }

    #[test]
    fn a_single_candidate_still_draws() {
        let rows = vec![row("h100", 8, 8, 3.0, 2.95)];
        let (s, t) = render_both(&rows, None);
        assert!(has(&t, "8\u{d7} h100 TP8"));
        assert!(s.contains("Cheapest and fastest: 8\u{d7} h100 TP8 at $70.8 in 3.00 h."));
        assert!(has(&t, "The only candidate is feasible."));
        let fig = PlanFigure::new(&rows, None);
        assert_eq!(fig.front, [0]);
        assert_eq!((fig.x.lo, fig.y.lo), (0.0, 0.0), "one point: axes from 0");
        // A deadline it misses, and one far beyond it.
        let (_, t) = render_both(&rows, Some(2.0));
        assert!(has(&t, "deadline 2 h"));
        let (s, t) = render_both(&rows, Some(100.0));
        assert!(!has(&t, "deadline 100 h"));
        assert!(t
            .join(" ")
            .contains("The 100 h deadline is far right of the axis"));
        assert!(s.contains("Cheapest finishing within the 100 h deadline"));
    }

    #[test]
    fn many_candidates_get_log_axes_and_labels_on_the_pareto_front_only() {
        let rows = many();
        let fig = PlanFigure::new(&rows, Some(8.0));
        assert!(fig.points.len() > MAX_LABELLED);
        assert!(fig.front_labels_only);
        assert!(fig.x.log, "times span more than {LOG_SPAN}×");
        let (s, t) = render_both(&rows, Some(8.0));
        assert!(has(&t, "time to finish the workload (hours, log scale)"));
        assert!(t.join(" ").contains(&format!(
            "Labelled: only the {} Pareto-optimal of {} candidates.",
            fig.front.len(),
            fig.points.len()
        )));
        let labelled = fig
            .points
            .iter()
            .filter(|p| has(&t, &p.label))
            .collect::<Vec<_>>();
        assert!(
            labelled.iter().all(|p| p.pareto),
            "only the front is labelled"
        );
        assert!(
            labelled.len() >= fig.front.len() - 1,
            "the front is labelled"
        );
        assert!(s.matches("<text").count() >= 30);
        // Log ticks at 1, 2 and 5 per decade.
        let ticks: Vec<String> = fig.x.ticks.iter().map(|&c| fig.x.label(c, false)).collect();
        assert!(ticks.contains(&"10".to_string()) && ticks.contains(&"2".to_string()));
    }

    #[test]
    fn labels_never_overlap_markers_or_each_other() {
        // Twelve points in a tight cluster, each with a long label.
        let points: Vec<Point> = (0..12)
            .map(|i| Point {
                row: i,
                t_h: 1.0,
                cost: 1.0,
                colour: BLUE,
                shape: Shape::Circle,
                radius: 7,
                pareto: false,
                label: String::new(),
            })
            .collect();
        let px: Vec<(i32, i32)> = (0..12)
            .map(|i| (300 + (i % 4) * 30, 200 + (i / 4) * 25))
            .collect();
        let sizes = vec![(90, 17); 12];
        let order: Vec<usize> = (0..12).collect();
        let segments = [((0, 210), (800, 210))];
        let placed = place_labels(&points, &px, &sizes, &order, (800, 500), &[], &segments);
        assert!(placed.len() >= 8, "most labels find room: {}", placed.len());
        for (k, a) in placed.iter().enumerate() {
            for (i, &c) in px.iter().enumerate() {
                assert!(
                    !a.rect.overlaps(&Rect::around(c, 7)),
                    "label {} covers marker {i}",
                    a.point
                );
            }
            for b in &placed[k + 1..] {
                assert!(
                    !a.rect.overlaps(&b.rect),
                    "labels {} and {}",
                    a.point,
                    b.point
                );
            }
        }
        // A lone point's label goes right of it, off the line through it.
        let lone = place_labels(
            &points[..1],
            &[(100, 100)],
            &[(90, 17)],
            &[0],
            (800, 500),
            &[],
            &[((0, 100), (800, 100))],
        );
        assert_eq!(lone.len(), 1);
        assert!(
            lone[0].rect.y1 <= 100 || lone[0].rect.y0 >= 100,
            "off the line"
        );
    }

    #[test]
    fn axes_are_logarithmic_beyond_twenty_fold_and_ticked_in_round_values() {
        let lin = Scale::new(&[5.0, 50.0], None, 0.1);
        assert!(!lin.log && lin.lo == 0.0);
        let log = Scale::new(&[0.5, 40.0], None, 0.1);
        assert!(log.log);
        let labels: Vec<String> = log.ticks.iter().map(|&c| log.label(c, true)).collect();
        assert_eq!(labels, ["$0.5", "$1", "$2", "$5", "$10", "$20", "$50"]);
        let money = Scale::new(&[1_500.0, 9_000.0], None, 0.1);
        assert!(money
            .ticks
            .iter()
            .any(|&c| money.label(c, true) == "$4,000"));
        let zero = Scale::new(&[0.0, 0.0], None, 0.1);
        assert!(!zero.log && zero.hi > zero.lo);
        assert_eq!(usd(1234.4), "$1,234");
        assert_eq!(usd(12.34), "$12.3");
        assert_eq!(usd(0.5), "$0.50");
        assert_eq!(short(24.0), "24");
        assert_eq!(short(1.5), "1.5");
    }

    #[test]
    fn a_long_list_of_infeasible_candidates_is_cut_short_within_the_figure() {
        let rows = long_infeasible();
        let (s, t) = render_both(&rows, None);
        assert!(has(&t, "40 of 41 candidates are infeasible, not drawn:"));
        let more = t
            .iter()
            .find(|l| l.starts_with("\u{2026} and ") && l.ends_with(" more (see plan.csv)"))
            .expect("the list says how many it leaves out");
        let left_out: usize = more
            .trim_start_matches("\u{2026} and ")
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let listed = t
            .iter()
            .filter(|l| l.starts_with("l40s") || l.contains("\u{d7} l40s"))
            .count();
        assert_eq!(listed + left_out, 40, "each is listed or counted");
        // The key's texts lie within the figure.
        let attr = |t: &str, name: &str| -> Option<f64> {
            let v = t.split_once(&format!(" {name}=\""))?.1.split_once('"')?.0;
            v.parse().ok()
        };
        let key_left = f64::from(WIDTH_PX - KEY_W);
        let key_ys: Vec<f64> = s
            .split("<text")
            .skip(1)
            .filter(|t| attr(t, "x").is_some_and(|x| x >= key_left))
            .filter_map(|t| attr(t, "y"))
            .collect();
        assert!(key_ys.len() > 10);
        for y in key_ys {
            assert!(y < f64::from(HEIGHT_PX) - 10.0, "key text at y = {y}");
        }
    }

    #[test]
    fn the_figure_is_deterministic() {
        let rows = realistic();
        assert_eq!(
            plan_figure(&rows, Some(24.0), Format::Svg).unwrap(),
            plan_figure(&rows, Some(24.0), Format::Svg).unwrap()
        );
    }

    /// Writes plan figures to /tmp/plan-plot-check/ for looking at them:
    /// `cargo test --lib plan_figures_to_look_at -- --ignored`.
    #[test]
    #[ignore]
    fn plan_figures_to_look_at() {
        let dir = PathBuf::from("/tmp/plan-plot-check");
        std::fs::create_dir_all(&dir).unwrap();
        let one = vec![row("h100", 8, 8, 3.0, 2.95)];
        let none = vec![
            infeasible("h100", 1, 1, 2.95, "the model does not fit"),
            infeasible("h100", 8, 3, 2.95, "TP 3 does not divide 8 GPUs"),
        ];
        let cases: [(&str, &[PlanRow], Option<f64>); 8] = [
            ("long-infeasible", &long_infeasible(), Some(4.0)),
            ("crowded", &crowded(), Some(6.0)),
            ("realistic", &realistic(), Some(24.0)),
            ("realistic-no-deadline", &realistic(), None),
            ("many", &many(), Some(8.0)),
            ("one", &one, Some(2.0)),
            ("none", &none, Some(24.0)),
            ("empty", &[], None),
        ];
        for (name, rows, deadline) in cases {
            for fmt in Format::ALL {
                let bytes = plan_figure(rows, deadline, fmt).unwrap();
                std::fs::write(dir.join(format!("{name}.{}", fmt.extension())), bytes).unwrap();
            }
        }
    }
}
