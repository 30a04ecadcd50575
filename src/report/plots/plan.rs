//! The plan figure: what each feasible candidate of `servesim plan` costs against how long it
//! takes to finish the workload. The Pareto front and the picks come from
//! [`plan::highlights`](crate::plan::highlights).
//!
//! * **Markers.** One per feasible candidate at (time to finish in hours, total cost in $):
//!   the colour is the GPU type, the shape the GPUs per server (tensor parallelism: circle,
//!   square, triangle, diamond, …, from the smallest TP up) and the size grows with the GPUs
//!   rented. The key on the right says which is which, and lists the infeasible candidates
//!   with their reasons (as many as fit).
//! * **Pareto front.** A dark staircase through the candidates no other is both faster and
//!   cheaper than, each labelled (`8× h200 TP8`) below and left of its marker, where no other
//!   candidate can be.
//! * **Deadline.** A vertical dashed red line, the time beyond it shaded. A deadline far
//!   outside the candidates' times (more than twice the slowest, or on a logarithmic axis less
//!   than half the fastest) is not drawn; the key says where it is.
//! * **Axes.** Hours and dollars, each logarithmic when its values span more than [`LOG_SPAN`]
//!   times, else linear: from 0 when the smallest value is under 40 % of the largest, else
//!   from a round value below the smallest, so that candidates of similar cost are told apart.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plan::{Highlights, PlanRow};

use super::axis::{sig3, thousands, Axis, Labels};
use super::style::{
    heading, mark, text_width, wrap, Entry, Legend, Shape, Swatch, DARK, FONT, GREY, PALETTE,
    RED, SUBTITLE_PX, TEXT_PX,
};
use super::{panel, render, Area, DrawFailure, Figure, Format, PlotError, WIDTH_PX};

/// The title of the [`plan_figure`].
pub const PLAN_TITLE: &str = "Cost against time to finish";

/// An axis whose values span more than this factor (largest over smallest) is logarithmic.
const LOG_SPAN: f64 = 20.0;

/// Width of the key right of the plot.
const KEY_W: u32 = 330;

/// The cost of each feasible candidate of a plan against its time to finish the workload, in
/// `fmt`: coloured by GPU type, shaped by tensor parallelism, sized by the number of GPUs,
/// with the Pareto front of `picks` as a labelled staircase, the deadline `deadline_h` (hours)
/// if given as a dashed line with the time beyond it shaded, the picks named under the title,
/// and a key that counts and lists the infeasible candidates with their reasons. With no
/// feasible candidate (or none at all) the figure says so and lists why each is infeasible.
///
/// Feasible rows whose time or cost is not a finite non-negative number are left out and
/// counted in the key. Errors only if plotters fails to draw.
pub fn plan_figure(
    rows: &[PlanRow],
    picks: &Highlights,
    deadline_h: Option<f64>,
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&PlanFigure::new(rows, picks, deadline_h), fmt)
}

const SHAPES: [Shape; 6] = [
    Shape::Circle,
    Shape::Square,
    Shape::Up,
    Shape::Diamond,
    Shape::Down,
    Shape::Hexagon,
];

/// A marker's radius for `num_gpus` GPUs: 5 px for one, 1.5 px more per doubling, at most 12.
fn radius(num_gpus: u32) -> i32 {
    (5.0 + 1.5 * f64::from(num_gpus.max(1)).log2()).round().clamp(5.0, 12.0) as i32
}

/// `8× h200 TP8`.
fn label_of(r: &PlanRow) -> String {
    format!("{}\u{d7} {} TP{}", r.num_gpus, r.gpu, r.tensor_parallel)
}

/// Dollars for text: `$0.84`, `$12.5`, `$412`, `$1,234`.
fn usd(v: f64) -> String {
    match v.abs() {
        a if !a.is_finite() => format!("${v}"),
        a if a >= 100.0 => format!("${}", thousands(v.round().max(0.0) as u64)),
        a if a >= 10.0 => format!("${v:.1}"),
        _ => format!("${v:.2}"),
    }
}

/// A number as given, without trailing zeros: `24`, `1.5`, `0.25`.
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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

/// An axis over `values` (and `extra`, if given): logarithmic when every value is positive
/// and they span more than [`LOG_SPAN`] times; else linear from 0 when the smallest is under
/// 40 % of the largest, or from a round value a little below the smallest.
fn value_axis(values: &[f64], extra: Option<f64>) -> Axis {
    let min_of = |vs: &mut dyn Iterator<Item = f64>| vs.fold(f64::INFINITY, f64::min);
    let (min, max) = (min_of(&mut values.iter().copied()), values.iter().copied().fold(0.0, f64::max));
    let log = min > 0.0 && max / min > LOG_SPAN;
    let extra = extra.filter(|e| e.is_finite() && *e > 0.0);
    let (min, max) = (min.min(extra.unwrap_or(min)), max.max(extra.unwrap_or(max)));
    if log {
        let span = (max / min).log10().max(0.3);
        let pad = 10f64.powf((0.06 * span).max(0.04));
        return Axis::log(min / pad, max * 10f64.powf((0.1 * span).max(0.04)), 9);
    }
    if !(max.is_finite() && max > 0.0) {
        return Axis::linear(0.0, 1.0, 8);
    }
    let min = if min.is_finite() { min.max(0.0) } else { 0.0 };
    if min <= 0.4 * max || max - min <= 1e-9 * max {
        return Axis::linear(0.0, 1.1 * max, 8);
    }
    let span = max - min;
    let (lo, hi) = (min - 0.1 * span, max + 0.1 * span);
    let step = match Axis::linear(lo, hi, 8).ticks.as_slice() {
        [a, b, ..] => b - a,
        _ => span,
    };
    Axis::linear(((lo / step).floor() * step).max(0.0), hi, 8)
}

fn distinct<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v.dedup();
    v
}

/// One feasible candidate drawn.
struct Point {
    /// Index into the rows.
    row: usize,
    t_h: f64,
    cost: f64,
    colour: RGBColor,
    shape: Shape,
    radius: i32,
}

/// What the figure shows, worked out from the rows before drawing.
struct PlanFigure<'a> {
    rows: &'a [PlanRow],
    picks: &'a Highlights,
    points: Vec<Point>,
    /// `(GPU, colour, $/GPU-hour)` of the GPU types drawn.
    gpus: Vec<(String, RGBColor, f64)>,
    /// `(TP, shape)` of the tensor-parallel sizes drawn.
    tps: Vec<(u32, Shape)>,
    /// Infeasible candidates sharing a reason: `(labels, reason)`.
    infeasible: Vec<(Vec<String>, String)>,
    /// Feasible rows without a finite, non-negative time and cost.
    undrawable: usize,
    deadline: Deadline,
    x: Axis,
    y: Axis,
}

impl<'a> PlanFigure<'a> {
    fn new(rows: &'a [PlanRow], picks: &'a Highlights, deadline_h: Option<f64>) -> Self {
        let drawable = |r: &&PlanRow| {
            let (t, c) = (r.time_to_finish_s, r.cost_usd);
            r.feasible && t.is_finite() && t > 0.0 && c.is_finite() && c >= 0.0
        };
        let gpu_names = distinct(rows.iter().filter(drawable).map(|r| r.gpu.as_str()).collect());
        let gpus: Vec<(String, RGBColor, f64)> = gpu_names
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let price = rows.iter().find(|r| r.gpu == *g).map_or(f64::NAN, |r| r.price_usd_per_gpu_hour);
                (g.to_string(), PALETTE[i % PALETTE.len()], price)
            })
            .collect();
        let tp_values = distinct(rows.iter().filter(drawable).map(|r| r.tensor_parallel).collect());
        let tps: Vec<(u32, Shape)> =
            tp_values.iter().enumerate().map(|(i, &tp)| (tp, SHAPES[i % SHAPES.len()])).collect();
        let points: Vec<Point> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| drawable(r))
            .map(|(i, r)| Point {
                row: i,
                t_h: r.time_to_finish_s / 3600.0,
                cost: r.cost_usd,
                colour: gpus.iter().find(|g| g.0 == r.gpu).map_or(DARK, |g| g.1),
                shape: tps.iter().find(|t| t.0 == r.tensor_parallel).map_or(Shape::Circle, |t| t.1),
                radius: radius(r.num_gpus),
            })
            .collect();
        let mut infeasible: Vec<(Vec<String>, String)> = Vec::new();
        for r in rows.iter().filter(|r| !r.feasible) {
            let reason = r.reason.clone().filter(|s| !s.trim().is_empty());
            let reason = reason.unwrap_or_else(|| "no reason given".to_string());
            match infeasible.iter_mut().find(|g| g.1 == reason) {
                Some(g) => g.0.push(label_of(r)),
                None => infeasible.push((vec![label_of(r)], reason)),
            }
        }
        let times: Vec<f64> = points.iter().map(|p| p.t_h).collect();
        let costs: Vec<f64> = points.iter().map(|p| p.cost).collect();
        let t_min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let t_max = times.iter().copied().fold(0.0, f64::max);
        let log_time = t_min > 0.0 && t_max / t_min > LOG_SPAN;
        let deadline = match deadline_h.filter(|d| d.is_finite() && *d > 0.0) {
            None => Deadline::None,
            Some(d) if points.is_empty() => Deadline::Drawn(d),
            Some(d) if d > 2.0 * t_max => Deadline::FarRight(d),
            Some(d) if log_time && d < 0.5 * t_min => Deadline::FarLeft(d),
            Some(d) => Deadline::Drawn(d),
        };
        // Room past the deadline for its shading.
        let past_deadline = match deadline {
            Deadline::Drawn(d) => Some(d * 1.04),
            _ => None,
        };
        PlanFigure {
            rows,
            picks,
            undrawable: rows.iter().filter(|r| r.feasible).count() - points.len(),
            points,
            gpus,
            tps,
            infeasible,
            deadline,
            x: value_axis(&times, past_deadline).with(Labels::Number),
            y: value_axis(&costs, None).with(Labels::Dollars),
        }
    }

    /// The lines under the title, longest first: how many candidates, and the picks.
    fn subtitles(&self) -> Vec<String> {
        let n = self.rows.len();
        if n == 0 {
            return vec!["No candidates to show.".to_string()];
        }
        let s = if n == 1 { "" } else { "s" };
        if self.points.is_empty() {
            return vec![format!(
                "None of the {n} candidate{s} is feasible: there is nothing to plot. Why each is \
                 infeasible is listed below."
            )];
        }
        let counts = format!(
            "{n} candidate{s}: {} drawn, {} infeasible.",
            self.points.len(),
            self.rows.iter().filter(|r| !r.feasible).count()
        );
        let describe = |i: Option<usize>| {
            i.map_or(String::new(), |i| {
                let r = &self.rows[i];
                format!("{} at {} in {} h", label_of(r), usd(r.cost_usd), sig3(r.time_to_finish_s / 3600.0))
            })
        };
        let (cheapest, fastest) = (describe(self.picks.cheapest), describe(self.picks.fastest));
        let pick = match self.deadline {
            Deadline::None if cheapest == fastest => format!("Cheapest and fastest: {cheapest}."),
            Deadline::None => format!("Cheapest: {cheapest}; fastest: {fastest}."),
            Deadline::Drawn(d) | Deadline::FarLeft(d) | Deadline::FarRight(d) => {
                match self.picks.cheapest {
                    Some(_) => format!("Cheapest finishing within the {} h deadline: {cheapest}.", short(d)),
                    None => format!("None finishes within the {} h deadline; the fastest: {fastest}.", short(d)),
                }
            }
        };
        vec![format!("{counts} {pick}"), pick, counts]
    }

    /// The key: what colour, shape and size stand for, the front and the deadline, notes, and
    /// the infeasible candidates with their reasons, as many as fit `height` pixels.
    fn key<DB: DrawingBackend>(&self, area: &Area<DB>, height: i32) -> Result<Legend, DrawFailure> {
        let width = area.dim_in_pixel().0 as i32 - 60;
        let mut e: Vec<Entry> = Vec::new();
        let text = |t: &str| Entry::new(t, Swatch::Text);
        if !self.points.is_empty() {
            e.push(text("colour: GPU ($ per GPU-hour)"));
            for (g, c, price) in &self.gpus {
                let t = if price.is_finite() { format!("{g} ({})", usd(*price)) } else { g.clone() };
                e.push(Entry::new(t, Swatch::Mark(Shape::Circle, 6, *c, None)));
            }
            e.push(text("shape: GPUs per server (TP)"));
            for &(tp, s) in &self.tps {
                e.push(Entry::new(format!("TP{tp}"), Swatch::Mark(s, 6, DARK, None)));
            }
            let mut counts: Vec<u32> = self.points.iter().map(|p| self.rows[p.row].num_gpus).collect();
            counts.sort_unstable();
            counts.dedup();
            if counts.len() > 1 {
                e.push(text("size: GPUs rented"));
                for n in counts {
                    e.push(Entry::new(n.to_string(), Swatch::Mark(Shape::Circle, radius(n), GREY, None)));
                }
            }
            e.push(Entry::new("cheapest within each time (Pareto front)", Swatch::Line(DARK, 2)));
            if let Deadline::Drawn(d) = self.deadline {
                e.push(Entry::new(format!("deadline {} h (shaded: too late)", short(d)), Swatch::Dashed(RED)));
            }
        }
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
        if self.undrawable > 0 {
            let have = if self.undrawable == 1 { " has" } else { "s have" };
            notes.push(format!(
                "{} feasible candidate{have} no finite time or cost: not drawn.",
                self.undrawable
            ));
        }
        let (n, k) = (self.rows.len(), self.infeasible.iter().map(|g| g.0.len()).sum::<usize>());
        notes.push(match k {
            _ if n == 0 => "No candidates: the plan had none to evaluate.".to_string(),
            0 if n == 1 => "The only candidate is feasible.".to_string(),
            1 if n == 1 => "The only candidate is infeasible:".to_string(),
            0 => format!("All {n} candidates are feasible."),
            k if k == n => format!("All {n} candidates are infeasible:"),
            1 => format!("1 of {n} candidates is infeasible, not drawn:"),
            k => format!("{k} of {n} candidates are infeasible, not drawn:"),
        });
        for note in notes {
            for l in wrap(area, &note, width, TEXT_PX)? {
                e.push(text(&l));
            }
        }
        // The infeasible candidates, as many as fit.
        let rows_fit = ((f64::from(height) - 30.0) / (1.25 * f64::from(TEXT_PX))) as usize;
        let mut shown = 0;
        for (labels, reason) in &self.infeasible {
            let mut lines = wrap(area, &format!("{reason}: {}", labels.join(", ")), width, TEXT_PX)?;
            if lines.len() > 3 {
                lines.truncate(3);
                lines[2].push('\u{2026}');
            }
            let more = usize::from(shown + labels.len() < k);
            if e.len() + lines.len() + more > rows_fit {
                break;
            }
            shown += labels.len();
            for (i, l) in lines.iter().enumerate() {
                e.push(text(&if i == 0 { l.clone() } else { format!("    {l}") }));
            }
        }
        if shown < k {
            e.push(text(&format!("\u{2026} and {} more (see plan.csv)", k - shown)));
        }
        Ok(Legend::new(e))
    }

    /// The plot: deadline, Pareto staircase, markers and the front's labels.
    fn draw_plot<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<(), DrawFailure> {
        let (x, y) = (&self.x, &self.y);
        let log = |a: &Axis, what: &str| {
            let scale = if a.scale == super::axis::Scale::Log { ", log scale" } else { "" };
            format!("{what}{scale})")
        };
        let x_desc = log(x, "time to finish the workload (hours");
        let mut chart = panel(area, x, y, Some(&x_desc), &log(y, "total cost ($"))?;
        let text = |c: &RGBColor, px: u32| (FONT, px).into_font().color(c).pos(Pos::new(HPos::Left, VPos::Top));
        if let Deadline::Drawn(d) = self.deadline {
            let shade = Rectangle::new([(d, y.lo), (x.hi, y.hi)], RED.mix(0.07).filled());
            chart.draw_series([shade])?;
            let line = DashedLineSeries::new([(d, y.lo), (d, y.hi)], 8, 5, RED.stroke_width(2));
            chart.draw_series(line)?;
            let name = format!("deadline {} h", short(d));
            let w = text_width(area, &name, TEXT_PX)?;
            let room = chart.backend_coord(&(x.hi, y.hi)).0 - chart.backend_coord(&(d, y.hi)).0;
            let dx = if room > w + 12 { 6 } else { -6 - w };
            chart.draw_series([EmptyElement::at((d, y.hi)) + Text::new(name, (dx, 6), text(&RED, TEXT_PX))])?;
        }
        let front: Vec<&Point> =
            self.picks.pareto.iter().filter_map(|&i| self.points.iter().find(|p| p.row == i)).collect();
        let mut stair: Vec<(f64, f64)> = Vec::new();
        for p in &front {
            if let Some(&(_, c)) = stair.last() {
                stair.push((p.t_h, c));
            }
            stair.push((p.t_h, p.cost));
        }
        if let Some(&(_, c)) = stair.last() {
            stair.push((x.hi, c));
        }
        chart.draw_series(LineSeries::new(stair, DARK.mix(0.85).stroke_width(2)))?;
        // Markers, the largest first so that small ones stay visible on top.
        let mut order: Vec<&Point> = self.points.iter().collect();
        order.sort_by_key(|p| std::cmp::Reverse(p.radius));
        let marks = order.iter().map(|p| {
            let (c1, c2, p1, p2) = mark(p.shape, p.radius, p.colour);
            EmptyElement::at((p.t_h, p.cost)) + c1 + c2 + p1 + p2
        });
        chart.draw_series(marks)?;
        // The front's labels, below and left of each marker (no other candidate is both
        // faster and cheaper), moved down clear of the label before.
        let (base_x, base_y) = chart.plotting_area().get_base_pixel();
        let (plot_w, plot_h) = chart.plotting_area().dim_in_pixel();
        let mut last: Option<(i32, i32, i32, i32)> = None;
        for p in front {
            let label = label_of(&self.rows[p.row]);
            let (w, h) = (text_width(area, &label, 14)? + 4, 19);
            let (px, py) = chart.backend_coord(&(p.t_h, p.cost));
            let (px, py) = (px - base_x, py - base_y);
            let off = (f64::from(p.radius) * 0.7).round() as i32;
            let (mut x0, mut y0) = (px - off - w, py + off);
            if x0 < 2 {
                (x0, y0) = (2, py + p.radius + 2);
            }
            if let Some(l) = last.filter(|l| x0 < l.2 && l.0 < x0 + w && y0 < l.3) {
                y0 = l.3 + 1;
            }
            if y0 + h > plot_h as i32 || x0 + w > plot_w as i32 {
                continue;
            }
            last = Some((x0, y0, x0 + w, y0 + h));
            let plot = chart.plotting_area().strip_coord_spec();
            plot.draw(&Rectangle::new([(x0, y0), (x0 + w, y0 + h)], WHITE.mix(0.8).filled()))?;
            let ink = RGBColor(
                (f64::from(p.colour.0) * 0.72) as u8,
                (f64::from(p.colour.1) * 0.72) as u8,
                (f64::from(p.colour.2) * 0.72) as u8,
            );
            plot.draw(&Text::new(label, (x0 + 2, y0 + 1), text(&ink, 14)))?;
        }
        Ok(())
    }
}

impl Figure for PlanFigure<'_> {
    const NAME: &'static str = "plan";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        // The longest subtitle that fits.
        let options = self.subtitles();
        let mut subtitle = options.last().cloned().unwrap_or_default();
        for s in &options {
            if text_width(root, s, SUBTITLE_PX)? <= WIDTH_PX as i32 - 40 {
                subtitle = s.clone();
                break;
            }
        }
        let body = heading(root, PLAN_TITLE, &subtitle)?;
        let w = body.dim_in_pixel().0;
        let key_area = if self.points.is_empty() {
            let message = if self.rows.is_empty() { "No candidates" } else { "No feasible candidate" };
            let style = (FONT, 22).into_font().color(&DARK).pos(Pos::new(HPos::Center, VPos::Top));
            body.draw(&Text::new(message, (w as i32 / 2, 30), style))?;
            body.margin(80, 10, 220, 220)
        } else {
            let (plot, key) = body.split_horizontally(w - KEY_W);
            self.draw_plot(&plot)?;
            key.margin(10, 0, 8, 8)
        };
        self.key(&key_area, key_area.dim_in_pixel().1 as i32)?.draw_alone(&key_area, raster)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::check::{pixels, png_size, svg_text, texts};
    use super::super::HEIGHT_PX;
    use super::*;
    use crate::plan::highlights;

    /// A feasible candidate finishing in `time_h` hours at the GPU's `price` per hour.
    fn row(gpu: &str, num_gpus: u32, tp: u32, time_h: f64, price: f64) -> PlanRow {
        PlanRow {
            gpu: gpu.into(),
            num_gpus,
            tensor_parallel: tp,
            replicas: num_gpus / tp.max(1),
            feasible: true,
            reason: None,
            kv_capacity_tokens: 100_000,
            oom_verdict: Some("safe".into()),
            gen_tok_per_s: 1_000.0,
            steady_req_per_s: 1.0,
            time_to_finish_s: time_h * 3600.0,
            price_usd_per_gpu_hour: price,
            cost_usd: time_h * f64::from(num_gpus) * price,
            usd_per_m_output_tokens: 1.0,
            ttft_p99_ms: 500.0,
            e2e_p99_ms: 60_000.0,
            binding: None,
            meets_deadline: None,
        }
    }

    /// An infeasible candidate.
    fn infeasible(gpu: &str, num_gpus: u32, tp: u32, price: f64, reason: &str) -> PlanRow {
        PlanRow {
            feasible: false,
            reason: Some(reason.into()),
            time_to_finish_s: 0.0,
            cost_usd: 0.0,
            ..row(gpu, num_gpus, tp, 1.0, price)
        }
    }

    /// A 70B dense model on three GPU types × 1, 2, 4 and 8 GPUs (TP = GPUs): one GPU of any
    /// type cannot hold it, the PCIe card scales worse.
    fn realistic() -> Vec<PlanRow> {
        let fit = "model weights 131.5 GiB per GPU exceed the memory free before they load";
        let oom = "would run out of memory at mem_fraction_static 0.880";
        vec![
            infeasible("h100", 1, 1, 2.95, fit),
            row("h100", 2, 2, 31.0, 2.95),
            row("h100", 4, 4, 12.5, 2.95),
            row("h100", 8, 8, 7.1, 2.95),
            infeasible("h200", 1, 1, 4.0, oom),
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
    /// 100-fold.
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
                for tp in [1u32, 2, 4, 8].into_iter().filter(|&tp| tp <= n) {
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
        for (g, price, t1) in [("b200", 5.25, 20.0), ("h100", 2.95, 40.0), ("h200", 4.0, 28.0), ("rtx-pro-6000", 1.57, 60.0)] {
            for n in [1u32, 2, 4, 8] {
                rows.push(row(g, n, n, t1 / f64::from(n) * (1.0 + 0.02 * f64::from(n)), price));
            }
        }
        rows
    }

    /// Forty infeasible candidates, each with its own reason, and one feasible.
    fn long_infeasible() -> Vec<PlanRow> {
        let mut rows: Vec<PlanRow> = (1..=40)
            .map(|n| {
                let reason = format!("would run out of memory at mem_fraction_static 0.{n:03}");
                infeasible("l40s", n, 1, 1.4, &reason)
            })
            .collect();
        rows.push(row("h100", 8, 8, 3.0, 2.95));
        rows
    }

    fn figure(rows: &[PlanRow], deadline_h: Option<f64>, fmt: Format) -> Vec<u8> {
        plan_figure(rows, &highlights(rows, deadline_h), deadline_h, fmt).unwrap()
    }

    /// Render both formats, check them, and return the SVG and its texts.
    fn render_both(rows: &[PlanRow], deadline_h: Option<f64>) -> (String, Vec<String>) {
        let png = figure(rows, deadline_h, Format::Png);
        assert_eq!(png_size(&png), (WIDTH_PX, HEIGHT_PX));
        assert!(png.len() > 10_000, "a PNG with content: {} bytes", png.len());
        let s = svg_text(&figure(rows, deadline_h, Format::Svg)).to_string();
        assert!(s.contains(PLAN_TITLE), "the SVG holds its title");
        let t = texts(&s);
        (s, t)
    }

    /// The texts as one, lines joined by spaces.
    fn all_of(texts: &[String]) -> String {
        texts.join(" ")
    }

    fn has(texts: &[String], want: &str) -> bool {
        texts.iter().any(|t| t == want)
    }

    #[test]
    fn a_realistic_plan_draws_every_feasible_candidate_and_labels_the_front() {
        let rows = realistic();
        let (s, t) = render_both(&rows, Some(24.0));
        for front in ["8\u{d7} h200 TP8", "8\u{d7} h100 TP8", "4\u{d7} h200 TP4"] {
            assert!(has(&t, front), "{front} is labelled");
        }
        assert!(has(&t, "deadline 24 h"), "the deadline is named on the plot");
        assert!(has(&t, "time to finish the workload (hours)"));
        assert!(has(&t, "total cost ($)"));
        assert!(has(&t, "h200 ($4.00)"), "the key gives each GPU's price");
        assert!(has(&t, "TP8"));
        assert!(all_of(&t).contains("3 of 12 candidates are infeasible, not drawn:"));
        let all = all_of(&t);
        assert!(all.contains("they load: 1\u{d7} h100 TP1, 1\u{d7} rtx-pro-6000 TP1"));
        assert!(all.contains("would run out of memory"));
        assert!(s.contains(
            "Cheapest finishing within the 24 h deadline: 4\u{d7} h200 TP4 at $147 in 9.20 h."
        ));
        let picks = highlights(&rows, Some(24.0));
        let fig = PlanFigure::new(&rows, &picks, Some(24.0));
        assert_eq!(fig.points.len(), 9);
        assert!(fig.x.scale == fig.y.scale && fig.y.scale == super::super::axis::Scale::Linear);
        assert!(fig.y.lo > 0.0, "similar costs get an axis that tells them apart");
        // The PNG holds every GPU type's markers.
        let png = figure(&rows, Some(24.0), Format::Png);
        for (g, c, _) in &fig.gpus {
            assert!(pixels(&png, *c) > 200, "{g}'s markers are drawn");
        }
    }

    #[test]
    fn without_a_deadline_the_subtitle_names_the_cheapest_and_the_fastest() {
        let (s, _) = render_both(&realistic(), None);
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
        assert!(all.contains("the model does not fit: 1\u{d7} h100 TP1, 2\u{d7} l40s TP2"));
        assert!(all.contains("TP 3 does not divide 8 GPUs: 8\u{d7} h100 TP3"));
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
        let picks = highlights(&rows, None);
        let fig = PlanFigure::new(&rows, &picks, None);
        assert_eq!((fig.x.lo, fig.y.lo), (0.0, 0.0), "one point: axes from 0");
        // A deadline it misses, and one far beyond it.
        let (s, t) = render_both(&rows, Some(2.0));
        assert!(has(&t, "deadline 2 h"));
        assert!(s.contains("None finishes within the 2 h deadline; the fastest: 8\u{d7} h100"));
        let (s, t) = render_both(&rows, Some(100.0));
        assert!(!has(&t, "deadline 100 h"));
        assert!(t.join(" ").contains("The 100 h deadline is far right of the axis"));
        assert!(s.contains("Cheapest finishing within the 100 h deadline"));
    }

    #[test]
    fn many_candidates_get_log_axes_and_labels_on_the_front_only() {
        let rows = many();
        let picks = highlights(&rows, Some(8.0));
        let fig = PlanFigure::new(&rows, &picks, Some(8.0));
        assert_eq!(fig.x.scale, super::super::axis::Scale::Log, "times span more than 20×");
        let (_, t) = render_both(&rows, Some(8.0));
        assert!(has(&t, "time to finish the workload (hours, log scale)"));
        let labelled: Vec<usize> = fig.points.iter().filter(|p| has(&t, &label_of(&rows[p.row]))).map(|p| p.row).collect();
        assert!(labelled.iter().all(|i| picks.pareto.contains(i)), "only the front is labelled");
        assert!(labelled.len() + 1 >= picks.pareto.len(), "the front is labelled");
        let ticks: Vec<String> = fig.x.ticks.iter().map(|&c| fig.x.label(c)).collect();
        assert!(ticks.contains(&"10".to_string()) && ticks.contains(&"2".to_string()));
    }

    #[test]
    fn the_fronts_labels_do_not_overlap() {
        let rows = crowded();
        let (s, _) = render_both(&rows, Some(6.0));
        let attr = |t: &str, name: &str| -> Option<f64> {
            t.split_once(&format!(" {name}=\""))?.1.split_once('"')?.0.parse().ok()
        };
        // Each label's box: its x and y, 7.5 px per character, 17 px tall.
        let boxes: Vec<(f64, f64, f64)> = s
            .split("<text")
            .skip(1)
            .filter(|t| t.contains(" TP") && t.contains("\u{d7}"))
            .filter_map(|t| Some((attr(t, "x")?, attr(t, "y")?, 7.5 * t.split_once('>')?.1.split('<').next()?.chars().count() as f64)))
            .collect();
        assert!(boxes.len() >= 5, "the front's labels: {boxes:?}");
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let apart = a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || (a.1 - b.1).abs() >= 17.0;
                assert!(apart, "labels at {a:?} and {b:?} overlap");
            }
        }
    }

    #[test]
    fn axes_are_logarithmic_beyond_twenty_fold_and_ticked_in_round_values() {
        let lin = value_axis(&[5.0, 50.0], None);
        assert!(lin.scale == super::super::axis::Scale::Linear && lin.lo == 0.0);
        let log = value_axis(&[0.5, 40.0], None).with(Labels::Dollars);
        let labels: Vec<String> = log.ticks.iter().map(|&c| log.label(c)).collect();
        assert_eq!(labels, ["$0.5", "$1", "$2", "$5", "$10", "$20", "$50"]);
        let money = value_axis(&[1_500.0, 9_000.0], None).with(Labels::Dollars);
        assert!(money.ticks.iter().any(|&c| money.label(c) == "$4,000"));
        let zero = value_axis(&[0.0, 0.0], None);
        assert!(zero.hi > zero.lo);
        assert_eq!((usd(1234.4), usd(12.34), usd(0.5)), ("$1,234".into(), "$12.3".into(), "$0.50".into()));
        assert_eq!((short(24.0), short(1.5)), ("24".into(), "1.5".into()));
    }

    #[test]
    fn a_long_list_of_infeasible_candidates_is_cut_short_within_the_figure() {
        let rows = long_infeasible();
        let (s, t) = render_both(&rows, None);
        assert!(all_of(&t).contains("40 of 41 candidates are infeasible, not drawn:"));
        let more = t
            .iter()
            .find(|l| l.starts_with("\u{2026} and ") && l.ends_with(" more (see plan.csv)"))
            .expect("the list says how many it leaves out");
        let left_out: usize = more.trim_start_matches("\u{2026} and ").split(' ').next().unwrap().parse().unwrap();
        let listed = all_of(&t).matches("\u{d7} l40s").count();
        assert_eq!(listed + left_out, 40, "each is listed or counted");
        // The key's texts lie within the figure.
        let attr = |t: &str, name: &str| -> Option<f64> {
            t.split_once(&format!(" {name}=\""))?.1.split_once('"')?.0.parse().ok()
        };
        let key_left = f64::from(WIDTH_PX - KEY_W);
        let ys: Vec<f64> = s
            .split("<text")
            .skip(1)
            .filter(|t| attr(t, "x").is_some_and(|x| x >= key_left))
            .filter_map(|t| attr(t, "y"))
            .collect();
        assert!(ys.len() > 10);
        assert!(ys.iter().all(|&y| y < f64::from(HEIGHT_PX) - 10.0), "{ys:?}");
        let svg = || figure(&rows, Some(4.0), Format::Svg);
        assert_eq!(svg(), svg(), "deterministic");
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
                let bytes = figure(rows, deadline, fmt);
                std::fs::write(dir.join(format!("{name}.{}", fmt.extension())), bytes).unwrap();
            }
        }
    }
}
