//! Sweep figures: each summary metric of a sweep against one varied key.
//!
//! One figure per varied key, seven small panels sharing that key's axis — the steady
//! completion rate with its 95 % interval, the steady gen tok/s, the mean running batch, TTFT
//! p99, E2E p99, the time to finish and the KV pool — and, in the eighth cell, the key.
//!
//! * **Lines.** With one other varied key, one line per value of it; with more, one per
//!   combination of the others, the first [`MAX_SWEEP_LINES`] in sweep order (the key says how
//!   many are left out). Lines are set a little apart along x, so that lines that coincide
//!   stay visible.
//! * **x axis.** Values that are not all numbers (`fcfs`, `lof`) are categories in sweep order.
//!   Evenly spaced numbers sit at evenly spaced ticks labelled as the sweep wrote them (`0.80`,
//!   not `0.8`; round thousands from 10,000 as `60k`); other numbers on a linear scale.
//! * **Memory.** A run the memory model says would run out of memory is a ring, a tight one a
//!   triangle; where every run at an x value would run out of memory (or is tight) the panel
//!   is shaded red (orange) there.
//! * **Units.** Latencies and the time to finish are in s, min or h, as the largest value of the
//!   panel needs; a run stopped by `run.max_sim_s` has no time to finish and no point there.

use std::collections::HashMap;

use plotters::element::ErrorBar;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::sweep::Row;

use super::axis::{thousands, Axis, Labels};
use super::style::{
    heading, mark, text_width, wrap, Entry, Legend, Shape, Swatch, BLUE, DARK, FONT,
    GREY, HEADING_PX, PALETTE, TEXT_PX, Y_LABEL_AREA_PX,
};
use super::{panel, render, y_top, Area, DrawFailure, Figure, Format, PlotError, HEIGHT_PX};

/// Most lines a sweep figure draws; further combinations of the other keys are left out, and
/// the figure says so.
pub const MAX_SWEEP_LINES: usize = 8;

/// The title of the sweep figure for `key`.
pub fn sweep_title(key: &str) -> String {
    format!("Sweep over {key}: summary metrics of each run")
}

/// One figure per varied key (in `keys` order): every summary metric of `rows` against that
/// key, one line per value of the other key (or combination of the other keys), runs that
/// would run out of memory marked. Returns `(file stem, bytes)` per figure; the stem is
/// `sweep-` and the key with characters other than letters, digits, `_` and `-` replaced by
/// `-` (`sweep-engine-mem_fraction_static`). No keys, no figures.
pub fn sweep_figures(
    keys: &[String],
    rows: &[Row],
    fmt: Format,
) -> Result<Vec<(String, Vec<u8>)>, PlotError> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::with_capacity(keys.len());
    for k in 0..keys.len() {
        let mut stem = file_stem(&keys[k]);
        if out.iter().any(|(s, _)| *s == stem) {
            stem = format!("{stem}-{}", k + 1);
        }
        out.push((stem, render(&SweepFigure::new(keys, k, rows), fmt)?));
    }
    Ok(out)
}

fn file_stem(key: &str) -> String {
    let keep = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let body: String = key.chars().map(|c| if keep(c) { c } else { '-' }).collect();
    format!("sweep-{}", body.trim_matches('-'))
}

/// A varied value as a number, if it is one (TOML's `_` separators allowed).
fn number(v: &str) -> Option<f64> {
    v.trim().replace('_', "").parse::<f64>().ok().filter(|x| x.is_finite())
}

/// Most characters of a value shown as a label.
const MAX_LABEL_CHARS: usize = 14;

/// A varied value for display: without TOML quotes; if long, its start and end around an
/// ellipsis (the end of `{ dist = "constant", value = 100 }` is what tells it apart).
fn display(v: &str) -> String {
    let v = v.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| v.strip_prefix(*q).and_then(|s| s.strip_suffix(*q)))
        .unwrap_or(v);
    let n = unquoted.chars().count();
    if n <= MAX_LABEL_CHARS {
        return unquoted.to_string();
    }
    let head_n = (MAX_LABEL_CHARS - 1) / 2;
    let head: String = unquoted.chars().take(head_n).collect();
    let tail: String = unquoted.chars().skip(n - (MAX_LABEL_CHARS - 1 - head_n)).collect();
    format!("{}\u{2026}{}", head.trim_end(), tail.trim_start())
}

/// A varied value for a tick: as [`display`], but round thousands and millions of 10,000 or
/// more shortened (`60000` → `60k`), so that the ticks of a narrow panel fit.
fn compact(v: &str) -> String {
    match v.trim().replace('_', "").parse::<i64>() {
        Ok(n) if n.abs() >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        Ok(n) if n.abs() >= 10_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        _ => display(v),
    }
}

/// The value of key `k` in `row` (found by name, else by position).
fn value_of<'r>(row: &'r Row, keys: &[String], k: usize) -> &'r str {
    row.varied
        .iter()
        .find(|(name, _)| *name == keys[k])
        .or_else(|| row.varied.get(k))
        .map_or("", |(_, v)| v.as_str())
}

/// The memory model's verdict on a run, as its marker.
fn shape_of(row: &Row) -> Shape {
    match row.oom_verdict.as_str() {
        "oom" => Shape::Ring,
        "tight" => Shape::Up,
        _ => Shape::Circle,
    }
}

/// The varied key's axis, each row's x, and whether the axis is indexed: categories or evenly
/// spaced numbers at 0, 1, … (labelled by their values); other numbers at themselves.
fn x_axis(values: &[&str]) -> (Axis, Vec<f64>, bool) {
    let nums: Option<Vec<f64>> = values.iter().map(|v| number(v)).collect();
    let mut labels: Vec<String> = Vec::new();
    let xs: Vec<f64> = match nums {
        Some(nums) if !nums.is_empty() => {
            let mut distinct = nums.clone();
            distinct.sort_by(f64::total_cmp);
            distinct.dedup();
            let step = distinct.get(1).map_or(1.0, |b| b - distinct[0]);
            let even = distinct.windows(2).all(|w| ((w[1] - w[0]) - step).abs() <= 1e-6 * step);
            if !even {
                let (lo, hi) = (distinct[0], distinct[distinct.len() - 1]);
                let pad = (hi - lo) * 0.06;
                return (Axis::linear(lo - pad, hi + pad, 8), nums, false);
            }
            let index = |n: &f64| distinct.iter().position(|d| d == n).unwrap_or(0);
            labels = vec![String::new(); distinct.len()];
            for (v, n) in values.iter().zip(&nums) {
                let l = &mut labels[index(n)];
                if l.is_empty() {
                    *l = compact(v);
                }
            }
            nums.iter().map(|n| index(n) as f64).collect()
        }
        _ => {
            let mut seen: Vec<&str> = Vec::new();
            let mut xs = Vec::with_capacity(values.len());
            for &v in values {
                let i = seen.iter().position(|s| *s == v).unwrap_or_else(|| {
                    seen.push(v);
                    labels.push(display(v));
                    seen.len() - 1
                });
                xs.push(i as f64);
            }
            xs
        }
    };
    let n = labels.len().max(1);
    let axis = Axis::linear(-0.5, n as f64 - 0.5, n).with(Labels::Names(labels));
    (axis, xs, true)
}

/// One line of the figure: the runs sharing the values of the other keys.
#[derive(Clone, Debug)]
struct Group {
    label: String,
    colour: RGBColor,
    /// Indices into the rows, by increasing x.
    rows: Vec<usize>,
    /// Added to the x of its runs, so that lines that coincide stay visible.
    dodge: f64,
}

/// Shading where every run would run out of memory, or is tight.
const OOM: RGBColor = RGBColor(249, 228, 228);
const TIGHT: RGBColor = RGBColor(252, 241, 214);

/// How far apart the lines are set, as a fraction of the distance between the closest two x
/// positions.
const DODGE: f64 = 0.2;

/// How one panel reads a row.
struct Metric {
    desc: String,
    /// The value in the panel's unit, if the row has one.
    get: Box<dyn Fn(&Row) -> Option<f64>>,
    /// Draw the steady rate's 95 % interval.
    ci: bool,
    /// What the panel says when no run has a value.
    empty: &'static str,
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn metrics(rows: &[Row]) -> Vec<Metric> {
    let plain = |desc: &str, get: fn(&Row) -> Option<f64>| Metric {
        desc: desc.to_string(),
        get: Box::new(get),
        ci: false,
        empty: "no run to show",
    };
    // Seconds, minutes or hours, as the largest value needs.
    let time = |desc: &str, get: fn(&Row) -> Option<f64>, empty| {
        let max = rows.iter().filter_map(get).fold(0.0, f64::max);
        let (div, unit) = match max {
            m if m < 120.0 => (1.0, "s"),
            m if m < 7_200.0 => (60.0, "min"),
            _ => (3_600.0, "h"),
        };
        Metric {
            desc: format!("{desc} ({unit})"),
            get: Box::new(move |r| get(r).map(|v| v / div)),
            ci: false,
            empty,
        }
    };
    let none = "no run to show";
    vec![
        Metric {
            ci: true,
            ..plain("steady state (req/s)", |r| finite(r.steady_req_per_s))
        },
        plain("steady gen throughput (tok/s)", |r| finite(r.gen_tok_per_s)),
        plain("mean running (requests)", |r| finite(r.mean_running)),
        time("TTFT p99", |r| finite(r.ttft_p99_ms / 1000.0), none),
        time("E2E p99", |r| finite(r.e2e_p99_ms / 1000.0), none),
        time(
            "time to finish",
            |r| r.time_to_finish_s.and_then(finite),
            "no run finished: each was stopped by run.max_sim_s",
        ),
        plain("KV capacity (tokens)", |r| Some(r.kv_capacity_tokens as f64)),
    ]
}

struct SweepFigure<'a> {
    key: &'a str,
    rows: &'a [Row],
    x: Axis,
    /// Whether x is indexed: categories or evenly spaced values at 0, 1, ….
    indexed: bool,
    /// Each row's x.
    xs: Vec<f64>,
    groups: Vec<Group>,
    /// Groups in all (some may be left out).
    total_groups: usize,
    /// What the lines stand for ("one line per …"), if there is more than one key.
    line_header: Option<String>,
}

impl<'a> SweepFigure<'a> {
    fn new(keys: &'a [String], k: usize, rows: &'a [Row]) -> SweepFigure<'a> {
        let values: Vec<&str> = rows.iter().map(|r| value_of(r, keys, k)).collect();
        let (x, xs, indexed) = x_axis(&values);
        let others: Vec<usize> = (0..keys.len()).filter(|&j| j != k).collect();
        let mut groups: Vec<Group> = Vec::new();
        let mut index: HashMap<Vec<&str>, usize> = HashMap::new();
        for (i, r) in rows.iter().enumerate() {
            let id: Vec<&str> = others.iter().map(|&j| value_of(r, keys, j)).collect();
            let n = index.len();
            let g = *index.entry(id.clone()).or_insert(n);
            if g == groups.len() && g < MAX_SWEEP_LINES {
                let label: Vec<String> = id.iter().map(|v| display(v)).collect();
                let colour = PALETTE[g];
                let (label, dodge) = (label.join(", "), 0.0);
                groups.push(Group { label, colour, rows: Vec::new(), dodge });
            }
            if let Some(group) = groups.get_mut(g) {
                group.rows.push(i);
            }
        }
        let mut at = xs.clone();
        at.sort_by(f64::total_cmp);
        at.dedup();
        let spacing = at.windows(2).map(|w| w[1] - w[0]).fold(x.hi - x.lo, f64::min);
        let last = groups.len().saturating_sub(1).max(1) as f64;
        let lines = groups.len();
        for (g, group) in groups.iter_mut().enumerate() {
            group.rows.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
            if lines > 1 {
                group.dodge = (g as f64 / last - 0.5) * DODGE * spacing;
            }
        }
        let names: Vec<&str> = others.iter().map(|&j| keys[j].as_str()).collect();
        let line_header = match names.as_slice() {
            [] => None,
            [one] => Some(format!("one line per {one}")),
            _ => Some(format!("one line per ({})", names.join(", "))),
        };
        SweepFigure {
            key: &keys[k],
            rows,
            x,
            indexed,
            xs,
            groups,
            total_groups: index.len(),
            line_header,
        }
    }

    /// The rows drawn.
    fn shown(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups.iter().flat_map(|g| g.rows.iter().copied())
    }

    fn subtitle(&self) -> String {
        let n = self.rows.len();
        if n == 0 {
            return "No runs to show.".to_string();
        }
        let mut s = format!(
            "{} simulated run{}, one per point of the sweep. Steady state: between the warm-up \
             and the drain.",
            thousands(n as u64),
            if n == 1 { "" } else { "s" }
        );
        let known = self.rows.iter().filter(|r| r.oom_verdict != "unknown").count();
        if known > 0 {
            let oom = self.rows.iter().filter(|r| r.oom_verdict == "oom").count();
            s.push_str(&format!(" Memory model: {oom} of {known} would run out of memory."));
        }
        s
    }

    /// The stretches of x to shade, by the verdict every run there shares: `(from, to, shape)`
    /// for runs that would run out of memory (ring) or are tight (triangle).
    fn shading(&self) -> Vec<(f64, f64, Shape)> {
        let mut at: Vec<(f64, Shape)> = self.shown().map(|i| (self.xs[i], shape_of(&self.rows[i]))).collect();
        at.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut all: Vec<(f64, Option<Shape>)> = Vec::new();
        for (x, s) in at {
            match all.last_mut() {
                Some(last) if last.0 == x => last.1 = last.1.filter(|&v| v == s),
                _ => all.push((x, Some(s))),
            }
        }
        // A whole step of an indexed axis; on a numeric one a narrow band (nothing is known
        // between runs), at most halfway to a neighbour.
        let reach = if self.indexed { 0.5 } else { 0.025 * (self.x.hi - self.x.lo) };
        let mut out = Vec::new();
        for (i, &(x, s)) in all.iter().enumerate() {
            let left = if i > 0 { (x - all[i - 1].0) / 2.0 } else { reach };
            let right = all.get(i + 1).map_or(reach, |n| (n.0 - x) / 2.0);
            if let Some(s @ (Shape::Ring | Shape::Up)) = s {
                out.push((x - left.min(reach), x + right.min(reach), s));
            }
        }
        out
    }

    fn draw_metric<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        m: &Metric,
        bottom: bool,
    ) -> Result<(), DrawFailure> {
        let value = |i: usize| (m.get)(&self.rows[i]);
        let ci = |i: usize| {
            let [lo, hi] = self.rows[i].steady_req_per_s_ci;
            (m.ci && lo.is_finite() && hi.is_finite() && hi >= lo).then_some((lo, hi))
        };
        let y_max = self
            .shown()
            .flat_map(|i| [value(i), ci(i).map(|c| c.1)])
            .flatten()
            .fold(0.0, f64::max);
        let y = Axis::linear(0.0, y_top(y_max, 1.12), 5);
        // As many x ticks as their labels leave room for.
        let mut widest = 0;
        for t in &self.x.ticks {
            widest = widest.max(text_width(area, &self.x.label(*t), TEXT_PX)?);
        }
        let plot_w = area.dim_in_pixel().0 as i32 - 40 - Y_LABEL_AREA_PX as i32;
        let fit = (plot_w / (widest + 14).max(1)).max(1) as usize;
        let x = self.x.clone().at_most(if self.indexed { fit } else { fit.clamp(2, 8) });
        let mut chart = panel(area, &x, &y, bottom.then_some(self.key), &m.desc)?;
        for (a, b, s) in self.shading() {
            let fill = if s == Shape::Ring { OOM } else { TIGHT };
            chart.draw_series([Rectangle::new([(a, 0.0), (b, y.hi)], fill.filled())])?;
        }
        let mut any = false;
        for g in &self.groups {
            let at = |i: usize| self.xs[i] + g.dodge;
            // Lines, broken where a run has no value.
            let pts: Vec<Option<(f64, f64)>> = g.rows.iter().map(|&i| value(i).map(|v| (at(i), v))).collect();
            for run in pts.split(Option::is_none) {
                let run: Vec<(f64, f64)> = run.iter().flatten().copied().collect();
                chart.draw_series(LineSeries::new(run, g.colour.stroke_width(2)))?;
            }
            let bars = g.rows.iter().filter_map(|&i| {
                let (lo, hi) = ci(i)?;
                Some(ErrorBar::new_vertical(at(i), lo, value(i)?, hi, g.colour.stroke_width(1), 8))
            });
            chart.draw_series(bars)?;
            let marks = g.rows.iter().filter_map(|&i| {
                let p = (at(i), value(i)?);
                let (c1, c2, p1, p2) = mark(shape_of(&self.rows[i]), 4, g.colour);
                Some(EmptyElement::at(p) + c1 + c2 + p1 + p2)
            });
            chart.draw_series(marks)?;
            any |= g.rows.iter().any(|&i| value(i).is_some());
        }
        if !any {
            let plot = chart.plotting_area().strip_coord_spec();
            let (w, h) = plot.dim_in_pixel();
            let style = (FONT, TEXT_PX).into_font().color(&GREY).pos(Pos::new(HPos::Center, VPos::Center));
            let lines = wrap(&plot, m.empty, w as i32 - 16, TEXT_PX)?;
            let top = h as i32 / 2 - (lines.len() as i32 - 1) * 10;
            for (k, l) in lines.into_iter().enumerate() {
                plot.draw(&Text::new(l, (w as i32 / 2, top + 20 * k as i32), style.clone()))?;
            }
        }
        Ok(())
    }

    /// The key: lines, the interval, the memory verdicts present, and what is left out.
    fn key<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<Legend, DrawFailure> {
        let width = area.dim_in_pixel().0 as i32 - 70;
        let mut entries = Vec::new();
        let note = |text: &str, entries: &mut Vec<Entry>| -> Result<(), DrawFailure> {
            for l in wrap(area, text, width, TEXT_PX)? {
                entries.push(Entry::new(l, Swatch::Text));
            }
            Ok(())
        };
        match &self.line_header {
            Some(h) => {
                note(h, &mut entries)?;
                for g in &self.groups {
                    entries.push(Entry::new(g.label.clone(), Swatch::LineDot(g.colour)));
                }
            }
            None if !self.groups.is_empty() => {
                entries.push(Entry::new("each dot: one simulated run", Swatch::LineDot(BLUE)));
            }
            None => {}
        }
        if self.shown().next().is_some() {
            entries.push(Entry::new("95 % CI of the steady rate", Swatch::ErrorBar(DARK)));
        }
        let shaded = self.shading();
        for (verdict, shape, label, fill) in [
            ("safe", Shape::Circle, "memory: safe", None),
            ("tight", Shape::Up, "memory: tight (< 10 % to spare)", Some(TIGHT)),
            ("oom", Shape::Ring, "would run out of memory", Some(OOM)),
        ] {
            if self.shown().any(|i| self.rows[i].oom_verdict == verdict) {
                let fill = fill.filter(|_| shaded.iter().any(|b| b.2 == shape));
                entries.push(Entry::new(label, Swatch::Mark(shape, 4, DARK, fill)));
            }
        }
        if self.total_groups > self.groups.len() {
            let text = format!(
                "Only the first {} of {} lines are drawn.",
                self.groups.len(),
                self.total_groups
            );
            note(&text, &mut entries)?;
        }
        let unfinished = self.shown().filter(|&i| self.rows[i].time_to_finish_s.is_none()).count();
        if unfinished > 0 && unfinished < self.shown().count() {
            let were = if unfinished == 1 { " was" } else { "s were" };
            note(&format!("{unfinished} run{were} stopped by run.max_sim_s: no time to finish."), &mut entries)?;
        }
        Ok(Legend::new(entries))
    }
}

impl Figure for SweepFigure<'_> {
    const NAME: &'static str = "sweep";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        let body = heading(root, &sweep_title(self.key), &self.subtitle())?;
        // Two rows of four cells; the top row's panels show no x tick labels (the panel below
        // shares the axis), so it is shorter by the difference and all plots are as tall.
        let (top, bottom) = body.split_vertically(TOP_ROW_PX);
        let (top, bottom) = (top.split_evenly((1, 4)), bottom.split_evenly((1, 4)));
        let metrics = metrics(self.rows);
        for (m, cell) in metrics.iter().zip(&top[..3]) {
            self.draw_metric(cell, m, false)?;
        }
        let key = top[3].margin(8, 0, 8, 4);
        self.key(&key)?.draw_alone(&key, raster)?;
        for (m, cell) in metrics[3..].iter().zip(&bottom) {
            self.draw_metric(cell, m, true)?;
        }
        Ok(())
    }
}

/// Height of the top row of cells: the bottom row's x labels take 46 px more, so both rows'
/// plots are the same height.
const TOP_ROW_PX: u32 = (HEIGHT_PX - HEADING_PX - 46) / 2;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::check::{has_text, png_size, scenario_file, svg_text, texts};
    use super::super::WIDTH_PX;
    use super::*;
    use crate::engine::RunOptions;
    use crate::scenario::{load, Source};
    use crate::sweep::{parse_vary, points, run_point};

    /// Run a sweep as `servesim sweep` does: `(keys, rows)`.
    fn sweep(src: &Source, sets: &[&str], vary: &[&str]) -> (Vec<String>, Vec<Row>) {
        let axes: Vec<_> = vary.iter().map(|v| parse_vary(v).unwrap()).collect();
        let keys = axes.iter().map(|a| a.key.clone()).collect();
        let rows = points(&axes)
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let all: Vec<String> = sets.iter().map(|s| s.to_string()).chain(p.clone()).collect();
                let sc = load(src, &all).unwrap_or_else(|e| panic!("{p:?}: {e}"));
                run_point(i, p, &sc, &RunOptions::default()).unwrap()
            })
            .collect();
        (keys, rows)
    }

    /// A small closed-loop scenario that finishes in a fraction of a second.
    fn tiny() -> Source {
        Source {
            name: "sweep-plots-test.toml".into(),
            base_dir: PathBuf::from("."),
            text: r#"
name = "tiny"
[engine]
kv_capacity_tokens = 3000
[engine.step_time]
decode_base_ms = 10.0
decode_per_seq_ms = 1.0
prefill_base_ms = 5.0
prefill_per_token_us = 10.0
[workload]
requests = 60
max_new_tokens = 400
prompt_tokens = { dist = "uniform", min = 20, max = 200 }
output_tokens = { dist = "lognormal", mean = 100, cv = 0.5, min = 5, max = 400 }
[client]
concurrency = 6
"#
            .into(),
        }
    }

    /// The B2 memory scenario shrunk to a few requests with short responses.
    const SMALL_B2: [&str; 3] = [
        "workload.requests=24",
        "client.concurrency=8",
        r#"workload.output_tokens={ dist = "lognormal", mean = 300, cv = 0.2, min = 1, max = 1000 }"#,
    ];

    /// Render both formats, check them, and return the SVG texts (one per key).
    fn render_both(keys: &[String], rows: &[Row]) -> Vec<String> {
        let pngs = sweep_figures(keys, rows, Format::Png).unwrap();
        let svgs = sweep_figures(keys, rows, Format::Svg).unwrap();
        assert_eq!((pngs.len(), svgs.len()), (keys.len(), keys.len()));
        let mut out = Vec::new();
        for ((key, (stem_p, png)), (stem_s, svg)) in keys.iter().zip(&pngs).zip(&svgs) {
            assert_eq!(stem_p, stem_s);
            assert!(stem_p.starts_with("sweep-"), "{stem_p}");
            assert_eq!(png_size(png), (WIDTH_PX, HEIGHT_PX));
            assert!(png.len() > 10_000, "a PNG with content: {} bytes", png.len());
            let s = svg_text(svg);
            assert!(s.contains(&sweep_title(key)), "the SVG holds its title");
            for desc in ["steady state (req/s)", "mean running (requests)", "KV capacity"] {
                assert!(s.contains(desc), "the panel {desc:?} is drawn");
            }
            assert!(s.matches("<text").count() >= 40, "tick labels are drawn");
            out.push(s.to_string());
        }
        out
    }

    #[test]
    fn a_sweep_over_the_memory_fraction_marks_the_runs_that_would_run_out_of_memory() {
        let src = scenario_file("case-study-b2-memory.toml");
        let fractions = ["engine.mem_fraction_static=0.86,0.89,0.92"];
        let (keys, rows) = sweep(&src, &SMALL_B2, &fractions);
        let verdicts: Vec<&str> = rows.iter().map(|r| r.oom_verdict.as_str()).collect();
        assert_eq!(verdicts, ["safe", "tight", "oom"]);
        let fig = SweepFigure::new(&keys, 0, &rows);
        let shaded: Vec<(f64, f64, Shape)> = fig.shading();
        assert_eq!(shaded, [(0.5, 1.5, Shape::Up), (1.5, 2.5, Shape::Ring)]);
        let s = &render_both(&keys, &rows)[0];
        assert!(has_text(s, "would run out of memory"));
        assert!(has_text(s, "memory: tight (< 10 % to spare)"));
        assert!(s.contains("1 of 3 would run out of memory"));
        // The axis is labelled with the values as written, under each of the four bottom
        // panels.
        for v in ["0.86", "0.89", "0.92"] {
            assert_eq!(texts(s).iter().filter(|t| *t == v).count(), 4, "tick {v}");
        }
        let stem = &sweep_figures(&keys, &rows, Format::Svg).unwrap()[0].0;
        assert_eq!(stem, "sweep-engine-mem_fraction_static");
    }

    #[test]
    fn two_keys_give_a_figure_per_key_with_a_line_per_value_of_the_other() {
        let vary = ["client.concurrency=2,4,6", "engine.kv_capacity_tokens=2000,4000"];
        let (keys, rows) = sweep(&tiny(), &[], &vary);
        let svgs = render_both(&keys, &rows);
        assert!(has_text(&svgs[0], "one line per engine.kv_capacity_tokens"));
        assert!(has_text(&svgs[1], "one line per client.concurrency"));
        assert!(has_text(&svgs[0], "2000") && has_text(&svgs[0], "4000"));
        assert!(!svgs[0].contains("would run out of memory"), "no memory model");
        let fig = SweepFigure::new(&keys, 0, &rows);
        assert_eq!(fig.groups.len(), 2);
        assert_eq!(fig.groups[0].label, "2000");
        assert!(fig.groups.iter().all(|g| g.rows.len() == 3));
        // The two lines are set apart, symmetrically, by a fifth of the spacing of the ticks.
        assert!((fig.groups[1].dodge - fig.groups[0].dodge - DODGE).abs() < 1e-12);
        assert!((fig.groups[0].dodge + fig.groups[1].dodge).abs() < 1e-12);
        let svg = || sweep_figures(&keys, &rows, Format::Svg).unwrap();
        assert_eq!(svg(), svg(), "deterministic");
    }

    #[test]
    fn a_categorical_key_gets_its_values_as_ticks() {
        let (keys, rows) = sweep(&tiny(), &[], &["engine.schedule_policy=fcfs,lof"]);
        let fig = SweepFigure::new(&keys, 0, &rows);
        assert!(fig.indexed);
        assert_eq!(fig.xs, [0.0, 1.0]);
        let s = &render_both(&keys, &rows)[0];
        assert!(has_text(s, "fcfs") && has_text(s, "lof"));
    }

    #[test]
    fn a_single_point_still_draws() {
        let (keys, rows) = sweep(&tiny(), &[], &["client.concurrency=4"]);
        assert_eq!(rows.len(), 1);
        let s = &render_both(&keys, &rows)[0];
        assert!(has_text(s, "4"), "its value is the one tick");
        assert!(s.contains("1 simulated run,"));
        assert!(has_text(s, "each dot: one simulated run"));
    }

    #[test]
    fn runs_stopped_before_the_end_have_no_time_to_finish() {
        let (keys, rows) = sweep(&tiny(), &["run.max_sim_s=30"], &["client.concurrency=1,6"]);
        assert_eq!(rows[0].time_to_finish_s, None, "one slot is too slow for 30 s");
        assert!(rows[1].time_to_finish_s.is_some());
        let s = &render_both(&keys, &rows)[0];
        assert!(texts(s).join(" ").contains("1 run was stopped by run.max_sim_s"));
        let (keys, rows) = sweep(&tiny(), &["run.max_sim_s=1"], &["client.concurrency=1,2"]);
        assert!(rows.iter().all(|r| r.time_to_finish_s.is_none()));
        let s = &render_both(&keys, &rows)[0];
        assert!(texts(s).iter().any(|t| t.starts_with("no run finished")));
    }

    #[test]
    fn more_than_eight_combinations_are_capped_with_a_note() {
        let (keys, rows) = sweep(
            &tiny(),
            &["workload.requests=12"],
            &[
                "client.concurrency=2,4",
                "engine.kv_capacity_tokens=2000,3000,4000",
                "engine.max_prefill_tokens=1000,2000,4000",
            ],
        );
        assert_eq!(rows.len(), 18);
        let fig = SweepFigure::new(&keys, 0, &rows);
        assert_eq!((fig.groups.len(), fig.total_groups), (MAX_SWEEP_LINES, 9));
        assert_eq!(
            fig.line_header.as_deref(),
            Some("one line per (engine.kv_capacity_tokens, engine.max_prefill_tokens)")
        );
        let s = &render_both(&keys, &rows)[0];
        assert!(texts(s).join(" ").contains("Only the first 8 of 9 lines are drawn."));
        assert!(has_text(s, "2000, 1000"), "a combination's label");
        assert!(!has_text(s, "4000, 4000"), "the ninth is left out");
    }

    /// Nine long combinations of two keys, with memory verdicts: the most a key holds.
    const CROWDED: [&str; 3] = [
        "client.concurrency=4,8",
        r#"workload.prompt_tokens={ dist = "constant", value = 100 },{ dist = "constant", value = 200 },{ dist = "constant", value = 300 }"#,
        "engine.mem_fraction_static=0.84,0.89,0.92",
    ];

    #[test]
    fn a_crowded_key_still_fits_its_cell() {
        let src = scenario_file("case-study-b2-memory.toml");
        let (keys, rows) = sweep(&src, &SMALL_B2, &CROWDED);
        let s = &render_both(&keys, &rows)[0];
        // The key's last line lies above the cell's bottom.
        let y_of = |want: &str| {
            s.split("<text").skip(1).find_map(|t| {
                let (attrs, rest) = t.split_once('>')?;
                rest.trim_start().starts_with(want).then_some(())?;
                attrs.split_once(" y=\"")?.1.split_once('"')?.0.parse::<f64>().ok()
            })
        };
        let bottom = f64::from(HEADING_PX + TOP_ROW_PX);
        let y = y_of("Only the first").expect("the note is drawn");
        assert!(y + 8.0 < bottom, "the note at y = {y} is above the cell's bottom {bottom}");
        assert!(has_text(s, "would run out of memory"));
        assert!(has_text(s, "memory: tight (< 10 % to spare)"));
    }

    #[test]
    fn axes_are_indexed_for_categories_and_even_steps_and_linear_otherwise() {
        let (x, xs, indexed) = x_axis(&["0.80", "0.90", "0.85"]);
        assert!(indexed);
        assert_eq!(xs, [0.0, 2.0, 1.0]);
        assert_eq!([x.label(0.0), x.label(1.0), x.label(2.0)], ["0.80", "0.85", "0.90"]);
        let (x, xs, indexed) = x_axis(&["1", "2", "10"]);
        assert!(!indexed);
        assert_eq!(xs, [1.0, 2.0, 10.0]);
        assert!(x.lo < 1.0 && x.hi > 10.0);
        let (x, _, _) = x_axis(&["\"a\"", "b", "\"a\""]);
        assert_eq!([x.label(0.0), x.label(1.0)], ["a", "b"]);
        let (x, _, _) = x_axis(&[r#"{ dist = "constant", value = 512 }"#]);
        assert_eq!(x.label(0.0), "{ dist\u{2026}= 512 }");
        assert!(!x_axis(&["60000", "120000", "2000000", "4000000"]).2, "uneven");
        let (x, _, _) = x_axis(&["60000", "120_000", "180000"]);
        assert_eq!([x.label(0.0), x.label(2.0)], ["60k", "180k"]);
        let (x, _, _) = x_axis(&["1000000", "2000000"]);
        assert_eq!(x.label(1.0), "2M");
        assert_eq!(x_axis(&["5000", "7500"]).0.label(1.0), "7500");
        assert_eq!(file_stem("client.concurrency"), "sweep-client-concurrency");
    }

    #[test]
    fn no_keys_no_figures_and_no_rows_still_draw() {
        assert!(sweep_figures(&[], &[], Format::Png).unwrap().is_empty());
        let keys = vec!["client.concurrency".to_string()];
        let figs = sweep_figures(&keys, &[], Format::Svg).unwrap();
        assert!(svg_text(&figs[0].1).contains("No runs to show."));
    }

    /// Writes the sweep figures of the case study to /tmp/sweep-plots-check/ for looking at
    /// them: `cargo test --release --lib sweep_figures_to_look_at -- --ignored`.
    #[test]
    #[ignore]
    fn sweep_figures_to_look_at() {
        let dir = PathBuf::from("/tmp/sweep-plots-check");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |prefix: &str, (keys, rows): (Vec<String>, Vec<Row>)| {
            for fmt in Format::ALL {
                for (stem, bytes) in sweep_figures(&keys, &rows, fmt).unwrap() {
                    let name = format!("{prefix}{stem}.{}", fmt.extension());
                    std::fs::write(dir.join(name), bytes).unwrap();
                }
            }
        };
        let (b2, b2_memory) = (scenario_file("case-study-b2.toml"), scenario_file("case-study-b2-memory.toml"));
        let requests = ["workload.requests=2000"];
        let fractions = ["engine.mem_fraction_static=0.80:0.95:0.01"];
        write("b2-memory-", sweep(&b2_memory, &requests, &fractions));
        let two = ["client.concurrency=50,100,150", "engine.kv_capacity_tokens=60000:240000:60000"];
        write("b2-2key-", sweep(&b2, &requests, &two));
        let three = [
            "client.concurrency=50,150",
            "engine.mem_fraction_static=0.84:0.92:0.04",
            "engine.schedule_policy=fcfs,lof",
        ];
        write("b2-3key-", sweep(&b2_memory, &requests, &three));
        write("tiny-unfinished-", sweep(&tiny(), &["run.max_sim_s=30"], &["client.concurrency=1,6"]));
        write("tiny-single-", sweep(&tiny(), &[], &["client.concurrency=4"]));
        let capped = [
            "client.concurrency=2,4",
            "engine.kv_capacity_tokens=2000,3000,4000",
            "engine.max_prefill_tokens=1000,2000,4000",
        ];
        write("tiny-capped-", sweep(&tiny(), &["workload.requests=12"], &capped));
        write("small-crowded-", sweep(&b2_memory, &SMALL_B2, &CROWDED));
    }
}
