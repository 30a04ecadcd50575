//! The plan figure. The Pareto front and the picks come from
//! [`plan::highlights`](crate::plan::highlights). Shapes go circle, square, triangle, … from
//! the smallest TP up; every feasible candidate is labelled (`8× h200 TP8`), the front's first
//! (the front's only when there are more than `MAX_LABELLED`), each at whichever of sixteen
//! places around its marker covers the fewest others (below and left of it first); a deadline far from every candidate's time
//! is not drawn. Each axis is logarithmic when its values span more than [`LOG_SPAN`] times,
//! else linear from 0, or from a round value below the smallest when the values are close (so
//! that candidates of similar cost are told apart).

use std::collections::BTreeSet;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plan::{Highlights, PlanRow};

use super::axis::{sig3, thousands, Axis, Labels, Scale};
use super::style::{
    heading, mark, text_width, wrap, Entry, Legend, Shape, Swatch, DARK, FONT, GREY, PALETTE, RED,
    TEXT_PX,
};
use super::{panel, render, Area, Drawn, Figure, Format, PlotError};

/// The title of the [`plan_figure`].
pub const PLAN_TITLE: &str = "Cost against time to finish";

/// An axis whose values span more than this factor (largest over smallest) is logarithmic.
const LOG_SPAN: f64 = 20.0;

/// Where a label of the Pareto front may go around its marker, in order of preference, as
/// (across, down): −1 left or above, 0 centred, 1 right or below. Below and left first: no
/// other candidate can be there.
const ACROSS: [i32; 8] = [-1, -1, 0, -1, 1, 1, 0, 1];
const DOWN: [i32; 8] = [1, 0, 1, -1, 1, 0, -1, -1];

/// With more feasible candidates than this, only the Pareto front is labelled.
const MAX_LABELLED: usize = 16;

/// Width of the key right of the plot.
const KEY_W: u32 = 330;

/// The cost of each feasible candidate of a plan against its time to finish the workload, in
/// `fmt`: coloured by GPU type, shaped by tensor parallelism, sized by the number of GPUs,
/// with the Pareto front of `picks` as a labelled staircase, the deadline `deadline_h` (hours)
/// if given as a dashed line with the time beyond it shaded, the picks named under the title,
/// and a key that counts and lists the infeasible candidates with their reasons. With no
/// feasible candidate (or none at all) the figure says so and lists why each is infeasible.
///
/// Feasible rows whose time or cost is not a finite non-negative number are left out (the
/// subtitle counts the candidates drawn). Errors only if plotters fails to draw.
pub fn plan_figure(
    rows: &[PlanRow],
    picks: &Highlights,
    deadline_h: Option<f64>,
    fmt: Format,
) -> Result<Vec<u8>, PlotError> {
    render(&PlanFigure::new(rows, picks, deadline_h), fmt)
}

const SHAPES: [Shape; 6] = {
    use Shape::*;
    [Circle, Square, Up, Diamond, Down, Hexagon]
};

/// A marker's radius for `num_gpus` GPUs: 5 px for one, 1.5 px more per doubling, at most 12.
fn radius(num_gpus: u32) -> i32 {
    let r = 5.0 + 1.5 * f64::from(num_gpus.max(1)).log2();
    r.round().clamp(5.0, 12.0) as i32
}

/// `8× h200 TP8`.
fn label_of(r: &PlanRow) -> String {
    format!("{}\u{d7} {} TP{}", r.num_gpus, r.gpu, r.tensor_parallel)
}

/// A candidate's time to finish (hours) and cost ($); not a number if infeasible.
fn hours_usd(r: &PlanRow) -> (f64, f64) {
    r.time_and_cost()
        .map_or((f64::NAN, f64::NAN), |(t, c)| (t / 3600.0, c))
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

/// An axis over `values` (and `extra`, if given): logarithmic when every value is positive
/// and they span more than [`LOG_SPAN`] times; else linear from 0 when the smallest is under
/// 40 % of the largest, or from a round value a little below the smallest.
fn value_axis(values: &[f64], extra: Option<f64>) -> Axis {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    let log = min > 0.0 && max / min > LOG_SPAN;
    let (min, max) = extra.map_or((min, max), |e| (min.min(e), max.max(e)));
    if log {
        let span = (max / min).log10().max(0.3);
        let pad = |f: f64| 10f64.powf((f * span).max(0.04));
        return Axis::log(min / pad(0.06), max * pad(0.1), 9);
    }
    let (min, max) = (min.max(0.0), if max > 0.0 { max } else { 1.0 });
    if min <= 0.4 * max || max - min <= 1e-9 * max {
        return Axis::linear(0.0, 1.1 * max, 8);
    }
    let (lo, hi) = (min - 0.1 * (max - min), max + 0.1 * (max - min));
    let step = match Axis::linear(lo, hi, 8).ticks[..] {
        [a, b, ..] => b - a,
        _ => hi - lo,
    };
    Axis::linear(((lo / step).floor() * step).max(0.0), hi, 8)
}

/// What the figure shows, worked out from the rows before drawing.
#[derive(Default)]
struct PlanFigure<'a> {
    rows: &'a [PlanRow],
    picks: Highlights,
    deadline_h: Option<f64>,
    /// The feasible rows drawn: with a finite time and cost.
    drawn: Vec<usize>,
    /// The GPU types drawn, each with its colour, and the tensor-parallel sizes, each with its
    /// marker's shape.
    gpus: Vec<(&'a str, RGBColor)>,
    tps: Vec<(u32, Shape)>,
    /// The deadline, if on the time axis.
    deadline_drawn: Option<f64>,
    x: Axis,
    y: Axis,
}

impl<'a> PlanFigure<'a> {
    fn new(rows: &'a [PlanRow], picks: &'a Highlights, deadline_h: Option<f64>) -> Self {
        let ok = |r: &PlanRow| r.time_and_cost().is_some();
        let drawn: Vec<usize> = (0..rows.len()).filter(|&i| ok(&rows[i])).collect();
        let gpus: BTreeSet<&str> = drawn.iter().map(|&i| rows[i].gpu.as_str()).collect();
        let gpus = gpus.into_iter().zip(PALETTE.into_iter().cycle()).collect();
        let tps: BTreeSet<u32> = drawn.iter().map(|&i| rows[i].tensor_parallel).collect();
        let tps = tps.into_iter().zip(SHAPES.into_iter().cycle()).collect();
        let (times, costs): (Vec<f64>, Vec<f64>) =
            drawn.iter().map(|&i| hours_usd(&rows[i])).unzip();
        let t_min = times.iter().copied().fold(f64::INFINITY, f64::min);
        let t_max = times.iter().copied().fold(0.0, f64::max);
        // A deadline far from every candidate's time is not drawn (the subtitle names it).
        let log = t_min > 0.0 && t_max / t_min > LOG_SPAN;
        let near = |d: f64| d <= 2.0 * t_max && (!log || d >= 0.5 * t_min);
        let on_axis = |d: &f64| d.is_finite() && *d > 0.0 && (near(*d) || times.is_empty());
        let deadline_drawn = deadline_h.filter(on_axis);
        // Room past the deadline for its shading.
        let x = value_axis(&times, deadline_drawn.map(|d| d * 1.04));
        let y = value_axis(&costs, None).with(Labels::Dollars);
        let mut fig = PlanFigure::default();
        (fig.rows, fig.picks, fig.deadline_h, fig.drawn) = (rows, picks.clone(), deadline_h, drawn);
        (fig.gpus, fig.tps, fig.deadline_drawn, fig.x, fig.y) = (gpus, tps, deadline_drawn, x, y);
        fig
    }

    /// Candidate `i`'s time to finish (hours) and cost ($).
    fn at(&self, i: usize) -> (f64, f64) {
        hours_usd(&self.rows[i])
    }

    /// The line under the title: how many candidates, and the picks.
    fn subtitle(&self) -> String {
        let n = self.rows.len();
        let s = if n == 1 { "" } else { "s" };
        if n == 0 {
            return "No candidates to show.".to_string();
        } else if self.drawn.is_empty() {
            let why = "Why each is infeasible is listed below.";
            return format!("None of the {n} candidate{s} is feasible: nothing to plot. {why}");
        }
        let infeasible = self.rows.iter().filter(|r| r.metrics().is_none()).count();
        let drawn = self.drawn.len();
        let counts = format!("{n} candidate{s}: {drawn} drawn, {infeasible} infeasible.");
        let describe = |i: usize| {
            let ((t, c), r) = (self.at(i), &self.rows[i]);
            format!("{} at {} in {} h", label_of(r), usd(c), sig3(t))
        };
        let describe = |i: Option<usize>| i.map(describe).unwrap_or_default();
        let (cheapest, fastest) = (describe(self.picks.cheapest), describe(self.picks.fastest));
        let within = |d: f64| format!("within the {} h deadline", short(d));
        let pick = match (self.deadline_h.map(within), self.picks.cheapest) {
            (None, _) if cheapest == fastest => format!("Cheapest and fastest: {cheapest}."),
            (None, _) => format!("Cheapest: {cheapest}; fastest: {fastest}."),
            (Some(d), Some(_)) => format!("Cheapest finishing {d}: {cheapest}."),
            (Some(d), None) => format!("None finishes {d}; the fastest: {fastest}."),
        };
        format!("{counts} {pick}")
    }

    /// The key: what colour, shape and size stand for, the front and the deadline, notes, and
    /// the infeasible candidates by reason, as many as fit in `area`.
    fn key<DB: DrawingBackend>(&self, area: &Area<DB>) -> Drawn<Legend> {
        let (width, height) = (area.dim_in_pixel().0 as i32 - 80, area.dim_in_pixel().1);
        let mut e: Vec<Entry> = Vec::new();
        if !self.drawn.is_empty() {
            e.push(Entry::text("colour: GPU ($ per GPU-hour)"));
            let marker = |s, r, c| Swatch::default().marked(s, r, c);
            for &(g, c) in &self.gpus {
                let row = self.rows.iter().find(|r| r.gpu == g);
                let price = usd(row.map_or(f64::NAN, |r| r.price_usd_per_gpu_hour));
                let swatch = marker(Shape::Circle, 6, c);
                e.push(Entry(format!("{g} ({price})"), swatch));
            }
            e.push(Entry::text("shape: GPUs per server (TP)"));
            for &(tp, s) in &self.tps {
                e.push(Entry(format!("TP{tp}"), marker(s, 6, DARK)));
            }
            let counts: BTreeSet<u32> = self.drawn.iter().map(|&i| self.rows[i].num_gpus).collect();
            if counts.len() > 1 {
                e.push(Entry::text("size: GPUs rented"));
                for n in counts {
                    let swatch = marker(Shape::Circle, radius(n), GREY);
                    e.push(Entry(n.to_string(), swatch));
                }
            }
            let front = "cheapest within each time (Pareto front)";
            e.push(Entry(front.into(), Swatch::line(DARK, 2)));
            if self.drawn.len() > MAX_LABELLED {
                let (n, all) = (self.picks.pareto.len(), self.drawn.len());
                let note = format!("Labelled: only the {n} Pareto-optimal of {all} candidates.");
                e.push(Entry::text(note));
            }
            if let Some(d) = self.deadline_drawn {
                let label = format!("deadline {} h (shaded: too late)", short(d));
                e.push(Entry(label, Swatch::dashed(RED)));
            }
        }
        let n = self.rows.len();
        let k = self.rows.iter().filter(|r| r.metrics().is_none()).count();
        e.push(Entry::text(match k {
            _ if n == 0 => "No candidates: the plan had none to evaluate.".to_string(),
            0 if n == 1 => "The only candidate is feasible.".to_string(),
            1 if n == 1 => "The only candidate is infeasible:".to_string(),
            0 => format!("All {n} candidates are feasible."),
            k if k == n => format!("All {n} candidates are infeasible:"),
            1 => format!("1 of {n} candidates is infeasible, not drawn:"),
            k => format!("{k} of {n} candidates are infeasible, not drawn:"),
        }));
        // The infeasible candidates by reason, as many as fit.
        let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.metrics().is_none()) {
            let reason = r.reason().filter(|s| !s.trim().is_empty());
            let reason = reason.unwrap_or("no reason given");
            match reasons.iter_mut().find(|g| g.0 == reason) {
                Some(g) => g.1.push(label_of(r)),
                None => reasons.push((reason, vec![label_of(r)])),
            }
        }
        let fit = ((f64::from(height) - 30.0) / (1.25 * f64::from(TEXT_PX))) as usize;
        let mut shown = 0;
        for (reason, labels) in &reasons {
            let all = format!("{reason}: {}", labels.join(", "));
            let mut lines = wrap(area, &all, width)?;
            if lines.len() > 3 {
                lines.truncate(3);
                lines[2].push('\u{2026}');
            }
            if e.len() + lines.len() + usize::from(shown + labels.len() < k) > fit {
                break;
            }
            shown += labels.len();
            for line in lines.iter_mut().skip(1) {
                line.insert(0, '\u{2003}'); // An em space: continued lines are indented.
            }
            e.extend(lines.into_iter().map(Entry::text));
        }
        if shown < k {
            let more = format!("\u{2026} and {} more (see plan.csv)", k - shown);
            e.push(Entry::text(more));
        }
        Ok(Legend::new(e))
    }

    /// The plot: deadline, Pareto staircase, markers and the front's labels.
    fn draw_plot<DB: DrawingBackend>(&self, area: &Area<DB>) -> Drawn {
        let (x, y) = (&self.x, &self.y);
        let log = |a: &Axis| [")", ", log scale)"][usize::from(a.scale == Scale::Log)];
        let x_desc = format!("time to finish the workload (hours{}", log(x));
        let y_desc = format!("total cost (${}", log(y));
        let mut chart = panel(area, x, y, Some(&x_desc), &y_desc)?;
        let top_left = Pos::new(HPos::Left, VPos::Top);
        let text = |c: &RGBColor, px: u32| (FONT, px).into_font().color(c).pos(top_left);
        if let Some(d) = self.deadline_drawn {
            let shade = Rectangle::new([(d, y.lo), (x.hi, y.hi)], RED.mix(0.07).filled());
            chart.draw_series([shade])?;
            let line = DashedLineSeries::new([(d, y.lo), (d, y.hi)], 8, 5, RED.stroke_width(2));
            chart.draw_series(line)?;
            let name = format!("deadline {} h", short(d));
            let w = text_width(area, &name, TEXT_PX)?;
            let room = chart.backend_coord(&(x.hi, y.hi)).0 - chart.backend_coord(&(d, y.hi)).0;
            let dx = if room > w + 12 { 6 } else { -6 - w };
            let name = Text::new(name, (dx, 6), text(&RED, TEXT_PX));
            chart.draw_series([EmptyElement::at((d, y.hi)) + name])?;
        }
        let at = |i: usize| self.at(i);
        let drawn = |i: &usize| self.drawn.contains(i);
        let (front, crowded) = (self.picks.pareto.iter(), self.drawn.len() > MAX_LABELLED);
        let front = front.copied().filter(drawn);
        let front: Vec<usize> = front.collect();
        let mut stair: Vec<(f64, f64)> = Vec::new();
        for &i in &front {
            if let Some(&(_, c)) = stair.last() {
                stair.push((at(i).0, c));
            }
            stair.push(at(i));
        }
        stair.extend(stair.last().map(|&(_, c)| (x.hi, c)));
        chart.draw_series(LineSeries::new(stair, DARK.mix(0.85).stroke_width(2)))?;
        // Markers, the largest first so that small ones stay visible on top.
        let r = |i: &usize| radius(self.rows[*i].num_gpus);
        let mut order = self.drawn.clone();
        order.sort_by_key(|i| std::cmp::Reverse(r(i)));
        let colour = |i: usize| {
            let gpu = self.gpus.iter().find(|g| g.0 == self.rows[i].gpu);
            gpu.map_or(DARK, |g| g.1)
        };
        chart.draw_series(order.iter().map(|&i| {
            let tp = self.rows[i].tensor_parallel;
            let tp = self.tps.iter().find(|t| t.0 == tp);
            let shape = tp.map_or(Shape::Circle, |t| t.1);
            let (c1, c2, p1, p2) = mark(shape, r(&i), colour(i), 0);
            EmptyElement::at(at(i)) + c1 + c2 + p1 + p2
        }))?;
        // The front's labels, each at the first place around its marker (see ACROSS), near or
        // else farther, that covers the fewest markers' squares and labels before it.
        let (bx, by) = chart.plotting_area().get_base_pixel();
        let (pw, ph) = chart.plotting_area().dim_in_pixel();
        let (pw, ph) = (pw as i32, ph as i32);
        let px = |i: usize| chart.backend_coord(&at(i));
        let centre = |i: usize| (px(i).0 - bx, px(i).1 - by, r(&i));
        let square = |(x, y, o): (i32, i32, i32)| [x - o, y - o, x + o, y + o];
        let mut taken: Vec<[i32; 4]> = self.drawn.iter().map(|&i| square(centre(i))).collect();
        let overlap =
            |b: &[i32; 4], t: &[i32; 4]| b[0] < t[2] && t[0] < b[2] && b[1] < t[3] && t[1] < b[3];
        let (plot, mut labels) = (chart.plotting_area().strip_coord_spec(), Vec::new());
        // Every candidate is labelled, the front first, unless there are too many.
        let rest = self.drawn.iter().filter(|i| !front.contains(i) && !crowded);
        for i in front.iter().chain(rest).copied() {
            let label = label_of(&self.rows[i]);
            let ((w, h), (x, y, o)) = ((text_width(area, &label, 14)? + 4, 19), centre(i));
            let place = |(kx, ky): (i32, i32), g: i32| {
                let (x0, y0) = (x + (kx - 1) * w / 2 + kx * g, y + (ky - 1) * h / 2 + ky * g);
                [x0, y0, x0 + w, y0 + h]
            };
            let near_then_far = [o, o + 24].into_iter().flat_map(|g| {
                let places = ACROSS.into_iter().zip(DOWN);
                places.map(move |p| place(p, g))
            });
            let inside = |b: &[i32; 4]| b[0] >= 0 && b[1] >= 0 && b[2] <= pw && b[3] <= ph;
            let covered = |b: &[i32; 4]| taken.iter().filter(|t| overlap(b, t)).count();
            let Some(b) = near_then_far.filter(inside).min_by_key(covered) else {
                continue;
            };
            taken.push(b);
            // A label set apart from its marker is tied to it by a line, drawn under labels.
            let (nx, ny) = (x.clamp(b[0], b[2]), y.clamp(b[1], b[3]));
            if (nx - x).abs().max((ny - y).abs()) > o + 4 {
                let from = (x + (nx - x).signum() * o, y + (ny - y).signum() * o);
                plot.draw(&PathElement::new(vec![from, (nx, ny)], GREY))?;
            }
            labels.push((label, b, colour(i)));
        }
        for (label, [x0, y0, x1, y1], c) in labels {
            let under = WHITE.mix(0.8).filled();
            plot.draw(&Rectangle::new([(x0, y0), (x1, y1)], under))?;
            let ink = RGBColor(c.0 / 4 * 3, c.1 / 4 * 3, c.2 / 4 * 3);
            plot.draw(&Text::new(label, (x0 + 2, y0 + 1), text(&ink, 14)))?;
        }
        Ok(())
    }
}

impl Figure for PlanFigure<'_> {
    const NAME: &'static str = "plan";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let body = heading(root, PLAN_TITLE, &self.subtitle())?;
        let (w, n) = (body.dim_in_pixel().0, self.rows.len());
        let key = if self.drawn.is_empty() {
            let message = ["No candidates", "No feasible candidate"][usize::from(n > 0)];
            let style = (FONT, 22).into_font().color(&DARK);
            let style = style.pos(Pos::new(HPos::Center, VPos::Top));
            body.draw(&Text::new(message, (w as i32 / 2, 30), style))?;
            body.margin(80, 10, 220, 220)
        } else {
            let (plot, key) = body.split_horizontally(w - KEY_W);
            self.draw_plot(&plot)?;
            key.margin(10, 0, 8, 8)
        };
        self.key(&key)?.draw_alone(&key, raster)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::check::{both, pixels, placed, texts};
    use super::super::HEIGHT_PX;
    use super::*;
    use crate::plan::highlights;

    /// A candidate finishing in `time_h` hours at `price` $/GPU-hour, or infeasible (time 0).
    pub(crate) fn row(gpu: &str, n: u32, time_h: f64, price: f64, reason: &str) -> PlanRow {
        use crate::plan::{Candidate, Outcome, PlanMetrics};
        let candidate = Candidate {
            gpu: gpu.into(),
            num_gpus: n,
            tensor_parallel: n.min(8),
        };
        let outcome = match time_h > 0.0 {
            true => Outcome::Feasible(PlanMetrics::example(
                time_h * 3600.0,
                time_h * f64::from(n) * price,
            )),
            false => Outcome::Infeasible {
                reason: reason.into(),
            },
        };
        PlanRow::new(&candidate, price, outcome)
    }

    /// GPU types × 1, 2, 4 and 8 GPUs with their times (0: it does not fit).
    fn plan(types: &[(&str, f64, [f64; 4])]) -> Vec<PlanRow> {
        let fit = "model weights 131.5 GiB per GPU exceed the memory free before they load";
        let mut rows = Vec::new();
        for &(g, price, times) in types {
            let counts = [1, 2, 4, 8].into_iter().zip(times);
            rows.extend(counts.map(|(n, t)| row(g, n, t, price, fit)));
        }
        rows
    }

    /// A 70B model: one GPU of any type cannot hold it, the PCIe card scales worse.
    pub(in crate::report::plots) fn realistic() -> Vec<PlanRow> {
        let h100 = ("h100", 2.95, [0.0, 31.0, 12.5, 7.1]);
        let h200 = ("h200", 4.0, [0.0, 19.0, 9.2, 5.3]);
        plan(&[h100, h200, ("rtx-pro-6000", 1.57, [0.0, 58.0, 26.0, 15.5])])
    }

    /// Four types scaling almost perfectly: each type's candidates cost about the same, and
    /// the times span 24-fold.
    pub(in crate::report::plots) fn crowded() -> Vec<PlanRow> {
        let t = |t1: f64| [1.0, 2.0, 4.0, 8.0].map(|n| t1 / n * (1.0 + 0.02 * n));
        let b200 = ("b200", 5.25, t(20.0));
        let h100 = ("h100", 2.95, t(40.0));
        let (h200, rtx) = (("h200", 4.0, t(28.0)), ("rtx-pro-6000", 1.57, t(60.0)));
        plan(&[b200, h100, h200, rtx])
    }

    /// Forty infeasible candidates, each with its own reason, and one feasible.
    pub(in crate::report::plots) fn long_infeasible() -> Vec<PlanRow> {
        let reason = |n: u32| format!("would run out of memory at mem_fraction_static 0.{n:03}");
        let l40s = |n: u32| row("l40s", n, 0.0, 1.4, &reason(n));
        let mut rows: Vec<PlanRow> = (1..=40).map(l40s).collect();
        rows.push(row("h100", 8, 3.0, 2.95, ""));
        rows
    }

    /// The figure of `rows`, checked in both formats: its pixels and its SVG.
    fn figure(rows: &[PlanRow], deadline_h: Option<f64>) -> (Vec<u8>, String) {
        let picks = highlights(rows, deadline_h);
        both(|f| plan_figure(rows, &picks, deadline_h, f))
    }

    /// The texts of the figure of `rows`.
    fn text(rows: &[PlanRow], deadline_h: Option<f64>) -> String {
        texts(&figure(rows, deadline_h).1)
    }

    #[test]
    fn a_realistic_plan_draws_every_feasible_candidate_and_labels_the_front() {
        let rows = realistic();
        let t = text(&rows, Some(24.0));
        for text in [
            "\n8\u{d7} h200 TP8\n8\u{d7} h100 TP8\n4\u{d7} h200 TP4\n",
            "\ndeadline 24 h\n",
            "\ntime to finish the workload (hours)\n",
            "\ntotal cost ($)\n",
            "\nh200 ($4.00)\n",
            "\nTP8\n",
            "3 of 12 candidates are infeasible, not drawn:",
            "within the 24 h deadline: 4\u{d7} h200 TP4 at $147 in 9.20 h.",
        ] {
            assert!(t.contains(text), "{text:?} in {t}");
        }
        let unfit = "load: 1\u{d7} h100 TP1, 1\u{d7} h200 TP1, 1\u{d7} rtx-pro-6000";
        assert!(t.replace('\n', " ").contains(unfit), "infeasible by reason");
        assert!(
            t.contains("\n2\u{d7} h100 TP2\n"),
            "every candidate is labelled"
        );
        let picks = highlights(&rows, Some(24.0));
        let fig = PlanFigure::new(&rows, &picks, Some(24.0));
        assert!(fig.x.scale == Scale::Linear && fig.y.lo > 0.0);
        let png = figure(&rows, Some(24.0)).0;
        assert!(fig.gpus.iter().all(|g| pixels(&png, g.1) > 200), "markers");
        let t = text(&rows, None);
        assert!(t.contains("Cheapest: 4\u{d7} h200 TP4 at $147 in 9.20 h; fastest: 8\u{d7} h200"));
    }

    #[test]
    fn without_a_feasible_candidate_the_figure_says_so() {
        let unfit = row("h100", 1, 0.0, 2.95, "the model does not fit");
        let t = text(&[unfit, row("l40s", 2, 0.0, 1.4, "x")], Some(10.0));
        assert!(t.contains("\nNo feasible candidate\n"));
        assert!(t.contains("None of the 2 candidates is feasible"));
        let why = "\nAll 2 candidates are infeasible:\nthe model does not fit: 1\u{d7} h100 TP1";
        assert!(t.contains(why) && t.contains("\nx: 2\u{d7} l40s TP2\n"));
        assert!(text(&[], None).contains("\nNo candidates\n"));
    }

    #[test]
    fn a_single_candidate_still_draws_with_a_deadline_near_or_far() {
        let rows = [row("h100", 8, 3.0, 2.95, "")];
        let t = text(&rows, None);
        assert!(t.contains("\n8\u{d7} h100 TP8\n"));
        assert!(t.contains("Cheapest and fastest: 8\u{d7} h100 TP8 at $70.8 in 3.00 h."));
        let none = Highlights::default();
        let fig = PlanFigure::new(&rows, &none, None);
        assert_eq!((fig.x.lo, fig.y.lo), (0.0, 0.0), "one point: axes from 0");
        let t = text(&rows, Some(2.0));
        assert!(t.contains("\ndeadline 2 h\n") && t.contains("None finishes within the 2 h"));
        let t = text(&rows, Some(100.0));
        assert!(!t.contains("\ndeadline 100 h\n"), "far: not drawn");
        assert!(t.contains("Cheapest finishing within the 100 h deadline"));
    }

    #[test]
    fn a_wide_span_gets_log_axes_and_the_labels_do_not_overlap() {
        let rows = crowded();
        let picks = highlights(&rows, Some(6.0));
        let fig = PlanFigure::new(&rows, &picks, Some(6.0));
        assert_eq!(fig.x.scale, Scale::Log, "times span more than 20×");
        let ticks: Vec<String> = fig.x.ticks.iter().map(|&c| fig.x.label(c)).collect();
        assert!(ticks.contains(&"10".to_string()) && ticks.contains(&"5".to_string()));
        let svg = figure(&rows, Some(6.0)).1;
        assert!(texts(&svg).contains("\ntime to finish the workload (hours, log scale)\n"));
        // Each label's box: its x and y, 7.5 px per character, 17 px tall.
        let label = |t: &(f64, f64, String)| rows.iter().any(|r| t.2 == label_of(r));
        let boxes: Vec<_> = placed(&svg).into_iter().filter(label).collect();
        assert_eq!(boxes.len(), rows.len(), "every candidate");
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let (wa, wb) = (7.5 * a.2.len() as f64, 7.5 * b.2.len() as f64);
                let apart = a.0 + wa <= b.0 || b.0 + wb <= a.0 || (a.1 - b.1).abs() >= 17.0;
                assert!(apart, "labels {a:?} and {b:?} overlap");
            }
        }
        let many = [crowded(), realistic()].concat();
        let t = text(&many, None).replace('\n', " ");
        assert!(t.contains("Labelled: only the 7 Pareto-optimal of 25 candidates."));
    }

    #[test]
    fn a_long_list_of_infeasible_candidates_is_cut_short_within_the_figure() {
        let rows = long_infeasible();
        let svg = figure(&rows, None).1;
        let t = texts(&svg);
        assert!(t.contains("40 of 41 candidates are infeasible, not drawn:"));
        let more = t.lines().find(|l| l.starts_with("\u{2026} and ")).unwrap();
        assert!(more.ends_with(" more (see plan.csv)"));
        let left_out: usize = more.split(' ').nth(2).unwrap().parse().unwrap();
        let listed = t.matches("\u{d7} l40s").count();
        assert_eq!(listed + left_out, 40, "listed or counted");
        let key = placed(&svg).into_iter().filter(|t| t.2.contains("l40s"));
        let bottom = f64::from(HEIGHT_PX) - 30.0;
        assert!(key.map(|t| t.1).all(|y| y < bottom), "fits");
        assert_eq!(figure(&rows, None), figure(&rows, None), "deterministic");
    }
}
