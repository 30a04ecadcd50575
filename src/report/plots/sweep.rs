//! Sweep figures: one per varied key, seven small panels sharing that key's axis (the steady
//! rate with its 95 % interval, gen tok/s, mean running, TTFT p99, E2E p99, time to finish and
//! KV pool) and the key in the fourth cell of the top row. With other varied keys, one line per value (or
//! combination) of them, the first [`MAX_SWEEP_LINES`], set a little apart along x so that
//! lines that coincide stay visible. Values that are not all numbers are categories in sweep
//! order; evenly spaced numbers are labelled as the sweep wrote them (`0.80`; `60k`); other
//! numbers sit on a linear scale. A run that would run out of memory is a ring, a tight one a
//! triangle, and the panel is shaded where every run is. Times are in s, min or h.

use plotters::element::ErrorBar;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::sweep::Row;

use super::axis::{thousands, Axis, Labels};
use super::style::{
    heading, mark, text_width, Entry, Legend, Shape, Swatch, BLUE, DARK, FONT, GREY, HEADING_PX,
    PALETTE, TEXT_PX, Y_LABEL_AREA_PX,
};
use super::{panel, render, y_top, Area, Drawn, Figure, Format, PlotError, HEIGHT_PX};

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
    let n = v.trim().replace('_', "").parse::<f64>().ok();
    n.filter(|x| x.is_finite())
}

/// A varied value for display: without TOML quotes; if longer than 14 characters, its start
/// and end around an ellipsis (the end of `{ dist = "constant", value = 100 }` tells it apart).
fn display(v: &str) -> String {
    let v = v.trim();
    let quoted = |q| v.strip_prefix(q).and_then(|s: &str| s.strip_suffix(q));
    let v = quoted('"').or(quoted('\'')).unwrap_or(v);
    let n = v.chars().count();
    if n <= 14 {
        return v.to_string();
    }
    let head: String = v.chars().take(6).collect();
    let tail: String = v.chars().skip(n - 7).collect();
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
    let named = row.varied.iter().find(|(name, _)| *name == keys[k]);
    named.or(row.varied.get(k)).map_or("", |v| &v.1)
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
    let nums = nums.filter(|n| !n.is_empty());
    let key = |i: usize| (nums.as_ref().map(|n| n[i]), values[i]);
    let same = |a: (Option<f64>, &str), b: (Option<f64>, &str)| {
        a.0 == b.0 && (a.0.is_some() || a.1 == b.1)
    };
    // The distinct values: in increasing order if numbers, else in sweep order.
    let mut distinct: Vec<(Option<f64>, &str)> = Vec::new();
    for i in 0..values.len() {
        if !distinct.iter().any(|&d| same(d, key(i))) {
            distinct.push(key(i));
        }
    }
    distinct.sort_by(|a, b| a.0.unwrap_or(0.0).total_cmp(&b.0.unwrap_or(0.0)));
    let at: Vec<f64> = distinct.iter().filter_map(|d| d.0).collect();
    let step = at.get(1).map_or(1.0, |b| b - at[0]);
    let gap = |w: &[f64]| ((w[1] - w[0]) - step).abs() <= 1e-6 * step;
    let even = at.windows(2).all(gap);
    if let (Some(nums), false) = (nums.as_ref(), even) {
        let (lo, hi) = (at[0], at[at.len() - 1]);
        let pad = (hi - lo) * 0.06;
        return (Axis::linear(lo - pad, hi + pad, 8), nums.clone(), false);
    }
    let index = |i: usize| distinct.iter().position(|&d| same(d, key(i))).unwrap_or(0);
    let xs = (0..values.len()).map(|i| index(i) as f64).collect();
    let label = |d: &(Option<f64>, &str)| [display, compact][usize::from(d.0.is_some())](d.1);
    let labels = Labels::Names(distinct.iter().map(label).collect());
    let n = distinct.len().max(1) as f64;
    let x = Axis::linear(-0.5, n - 0.5, distinct.len()).with(labels);
    (x, xs, true)
}

/// One line of the figure: the runs sharing the values of the other keys.
#[derive(Clone, Debug, Default)]
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

/// How one panel reads a row: its description, the value in its unit (if the row has one),
/// and what it says when no run has a value.
type Metric = (String, Box<dyn Fn(&Row) -> Option<f64>>, &'static str);

/// The metrics of the panels. A description without a unit is of a time: in seconds,
/// minutes or hours, as the largest value needs.
fn metrics(rows: &[Row]) -> Vec<Metric> {
    let metric = |desc: &str, get: fn(&Row) -> Option<f64>| -> Metric {
        let (div, unit) = match rows.iter().filter_map(get).fold(0.0, f64::max) {
            _ if desc.contains('(') => (1.0, ""),
            m if m < 120.0 => (1.0, " (s)"),
            m if m < 7_200.0 => (60.0, " (min)"),
            _ => (3_600.0, " (h)"),
        };
        let get = Box::new(move |r: &Row| get(r).map(|v| v / div).filter(|v| v.is_finite()));
        let empty = ["no run to show", "no run finished"][usize::from(desc == "time to finish")];
        (format!("{desc}{unit}"), get, empty)
    };
    vec![
        metric("steady state (req/s)", |r| r.steady_req_per_s),
        metric("steady gen throughput (tok/s)", |r| {
            r.steady_req_per_s.and(r.gen_tok_per_s)
        }),
        metric("mean running (requests)", |r| r.mean_running),
        metric("TTFT p99", |r| Some(r.ttft_p99_ms / 1000.0)),
        metric("E2E p99", |r| Some(r.e2e_p99_ms / 1000.0)),
        metric("time to finish", |r| r.time_to_finish_s),
        metric("KV capacity (tokens)", |r| {
            Some(r.kv_capacity_tokens as f64)
        }),
    ]
}

#[derive(Default)]
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
        let mut ids: Vec<Vec<&str>> = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let id: Vec<&str> = others.iter().map(|&j| value_of(r, keys, j)).collect();
            let g = ids.iter().position(|x| *x == id).unwrap_or(ids.len());
            if g == ids.len() && g < MAX_SWEEP_LINES {
                let label = id.iter().map(|v| display(v)).collect::<Vec<_>>().join(", ");
                let mut group = Group::default();
                (group.label, group.colour) = (label, PALETTE[g]);
                groups.push(group);
            }
            if g == ids.len() {
                ids.push(id);
            }
            if let Some(group) = groups.get_mut(g) {
                group.rows.push(i);
            }
        }
        // Lines side by side, within DODGE of the closest two x positions.
        let mut at = xs.clone();
        at.sort_by(f64::total_cmp);
        let gaps = at.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0.0);
        let spacing = gaps.reduce(f64::min).unwrap_or(1.0);
        let n = groups.len();
        for (g, group) in groups.iter_mut().enumerate() {
            group.rows.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
            if n > 1 {
                group.dodge = (g as f64 / (n - 1) as f64 - 0.5) * DODGE * spacing;
            }
        }
        let names: Vec<&str> = others.iter().map(|&j| keys[j].as_str()).collect();
        let line_header = match names[..] {
            [] => None,
            [one] => Some(format!("one line per {one}")),
            _ => Some(format!("one line per ({})", names.join(", "))),
        };
        let (key, total_groups) = (&keys[k], ids.len());
        let mut fig = SweepFigure::default();
        (fig.key, fig.rows, fig.x, fig.indexed, fig.xs) = (key, rows, x, indexed, xs);
        (fig.groups, fig.total_groups, fig.line_header) = (groups, total_groups, line_header);
        fig
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
        let (runs, s) = (thousands(n as u64), if n == 1 { "" } else { "s" });
        let steady = "Steady state: between the warm-up and the drain.";
        let mut text = format!("{runs} simulated run{s}, one per point of the sweep. {steady}");
        let count = |f: fn(&str) -> bool| self.rows.iter().filter(|r| f(&r.oom_verdict)).count();
        let (known, oom) = (count(|v| v != "unknown"), count(|v| v == "oom"));
        if known > 0 {
            text += &format!(" Memory model: {oom} of {known} would run out of memory.");
        }
        text
    }

    /// The stretches of x to shade, by the verdict every run there shares: `(from, to, shape)`
    /// for runs that would run out of memory (ring) or are tight (triangle).
    fn shading(&self) -> Vec<(f64, f64, Shape)> {
        let shape = |i: usize| (self.xs[i], shape_of(&self.rows[i]));
        let mut at: Vec<(f64, Shape)> = self.shown().map(shape).collect();
        at.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut all: Vec<(f64, Option<Shape>)> = Vec::new();
        for (x, s) in at {
            match all.last_mut() {
                Some(last) if last.0 == x => last.1 = last.1.filter(|&v| v == s),
                _ => all.push((x, Some(s))),
            }
        }
        // A whole step of an indexed axis; on a numeric one a narrow band (nothing is known
        // between runs), at most halfway to the nearest neighbour.
        let gaps = all.windows(2).map(|w| w[1].0 - w[0].0);
        let gap = gaps.fold(f64::INFINITY, f64::min);
        let reach = [0.025 * (self.x.hi - self.x.lo), 0.5][usize::from(self.indexed)];
        let reach = reach.min(gap / 2.0);
        let band = |(x, s): (f64, Option<Shape>)| {
            Some((x - reach, x + reach, s.filter(|s| *s != Shape::Circle)?))
        };
        all.into_iter().filter_map(band).collect()
    }

    /// One metric's panel; the first, the steady rate, with its 95 % intervals.
    fn draw_metric<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        (desc, value, empty): &Metric,
        k: usize,
    ) -> Drawn {
        let value = |i: usize| value(&self.rows[i]);
        let ci = |i: usize| {
            let [lo, hi] = self.rows[i].steady_req_per_s_ci?;
            (k == 0 && lo.is_finite() && hi.is_finite() && hi >= lo).then_some((lo, hi))
        };
        let values = self.shown().flat_map(|i| [value(i), ci(i).map(|c| c.1)]);
        let y = Axis::linear(0.0, y_top(values.flatten().fold(0.0, f64::max), 1.12), 5);
        // As many x ticks as their labels leave room for.
        let mut widest = 0;
        for t in &self.x.ticks {
            widest = widest.max(text_width(area, &self.x.label(*t), TEXT_PX)?);
        }
        let plot_w = area.dim_in_pixel().0 as i32 - 40 - Y_LABEL_AREA_PX as i32;
        let fit = (plot_w / (widest + 14)).max(1) as usize;
        let ticks = if self.indexed { fit } else { fit.clamp(2, 8) };
        let x = self.x.clone().at_most(ticks);
        let mut chart = panel(area, &x, &y, (k >= 3).then_some(self.key), desc)?;
        for (a, b, s) in self.shading() {
            let fill = if s == Shape::Ring { OOM } else { TIGHT };
            chart.draw_series([Rectangle::new([(a, 0.0), (b, y.hi)], fill.filled())])?;
        }
        for g in &self.groups {
            let at = |i: usize| Some((self.xs[i] + g.dodge, value(i)?));
            // Lines, broken where a run has no value.
            let pts: Vec<Option<(f64, f64)>> = g.rows.iter().map(|&i| at(i)).collect();
            for run in pts.split(Option::is_none) {
                let run = run.iter().flatten().copied();
                chart.draw_series(LineSeries::new(run, g.colour.stroke_width(2)))?;
            }
            let style = g.colour.stroke_width(1);
            chart.draw_series(g.rows.iter().filter_map(|&i| {
                let ((x, v), (lo, hi)) = (at(i)?, ci(i)?);
                Some(ErrorBar::new_vertical(x, lo, v, hi, style, 8))
            }))?;
            chart.draw_series(g.rows.iter().filter_map(|&i| {
                let (c1, c2, p1, p2) = mark(shape_of(&self.rows[i]), 4, g.colour, 0);
                Some(EmptyElement::at(at(i)?) + c1 + c2 + p1 + p2)
            }))?;
        }
        if !self.shown().any(|i| value(i).is_some()) {
            let style = (FONT, TEXT_PX).into_font().color(&GREY);
            let style = style.pos(Pos::new(HPos::Center, VPos::Center));
            let middle = ((x.lo + x.hi) / 2.0, (y.lo + y.hi) / 2.0);
            chart.draw_series([Text::new(*empty, middle, style)])?;
        }
        Ok(())
    }

    /// The key: lines, the interval, the memory verdicts present, and what is left out.
    fn key(&self) -> Legend {
        let dot = |c| Swatch::line(c, 2).marked(Shape::Circle, 4, c);
        let mut e = Vec::new();
        match &self.line_header {
            Some(h) => {
                e.push(Entry::text(h));
                let line = |g: &Group| Entry(g.label.clone(), dot(g.colour));
                e.extend(self.groups.iter().map(line));
            }
            None if !self.groups.is_empty() => {
                e.push(Entry("each dot: one simulated run".into(), dot(BLUE)));
            }
            None => {}
        }
        if self.shown().next().is_some() {
            let ci = Swatch::error_bar(DARK);
            e.push(Entry("95 % CI of the steady rate".into(), ci));
        }
        let shaded = self.shading();
        for (verdict, shape, label, fill) in [
            ("safe", Shape::Circle, "memory: safe", WHITE),
            ("tight", Shape::Up, "memory: tight (< 10 % to spare)", TIGHT),
            ("oom", Shape::Ring, "would run out of memory", OOM),
        ] {
            let fill = [WHITE, fill][usize::from(shaded.iter().any(|b| b.2 == shape))];
            let swatch = Swatch::default().marked(shape, 4, DARK).shaded(fill);
            if self.shown().any(|i| self.rows[i].oom_verdict == verdict) {
                e.push(Entry(label.into(), swatch));
            }
        }
        let (drawn, all) = (self.groups.len(), self.total_groups);
        if all > drawn {
            let note = format!("Only the first {drawn} of {all} lines are drawn.");
            e.push(Entry::text(note));
        }
        let stopped = |i: &usize| self.rows[*i].time_to_finish_s.is_none();
        let n = self.shown().filter(stopped).count();
        if n > 0 {
            let were = if n == 1 { "run was" } else { "runs were" };
            let note = format!("{n} {were} stopped by run.max_sim_s: no time to finish.");
            e.push(Entry::text(note));
        }
        Legend::new(e)
    }
}

impl Figure for SweepFigure<'_> {
    const NAME: &'static str = "sweep";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let body = heading(root, &sweep_title(self.key), &self.subtitle())?;
        // Two rows of four cells, the key in the fourth of the first; the top row's panels
        // have no x tick labels (the panel below shares the axis), so the row is shorter by
        // them and all plots are as tall.
        let (top, bottom) = body.split_vertically((HEIGHT_PX - HEADING_PX - 46) / 2);
        let mut cells = top.split_evenly((1, 4));
        let key = cells.remove(3).margin(8, 0, 8, 4);
        self.key().draw_alone(&key, raster)?;
        cells.extend(bottom.split_evenly((1, 4)));
        for (k, (m, cell)) in metrics(self.rows).iter().zip(&cells).enumerate() {
            self.draw_metric(cell, m, k)?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::check::{both, scenario_file, texts};
    use super::*;
    use crate::engine::RunOptions;
    use crate::scenario::{load, Source};
    use crate::sweep::{parse_vary, points, run_point};

    type Sweep = (Vec<String>, Vec<Row>);

    /// Run a sweep as `servesim sweep` does: `(keys, rows)`.
    pub(in crate::report::plots) fn sweep(src: &Source, sets: &[&str], vary: &[&str]) -> Sweep {
        let axes: Vec<_> = vary.iter().map(|v| parse_vary(v).unwrap()).collect();
        let keys = axes.iter().map(|a| a.key.clone()).collect();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let run = |(i, p): (usize, &Vec<String>)| {
            let sc = load(src, &[&sets[..], p].concat()).unwrap();
            run_point(i, p, &sc, &RunOptions::default()).unwrap()
        };
        let rows = points(&axes).unwrap().iter().enumerate().map(run).collect();
        (keys, rows)
    }

    /// A sweep of a small closed-loop scenario that finishes in a fraction of a second.
    fn tiny(sets: &[&str], vary: &[&str]) -> Sweep {
        let text = "name = \"tiny\"\n[engine]\nkv_capacity_tokens = 3000\n[engine.step_time]\n\
            decode_base_ms = 10.0\ndecode_per_seq_ms = 1.0\nprefill_base_ms = 5.0\n\
            prefill_per_token_us = 10.0\n[workload]\nrequests = 60\nmax_new_tokens = 400\n\
            prompt_tokens = { dist = \"uniform\", min = 20, max = 200 }\noutput_tokens = \
            { dist = \"lognormal\", mean = 100, cv = 0.5, min = 5, max = 400 }\n\
            [client]\nconcurrency = 6\n";
        let src = Source {
            text: text.into(),
            ..Source::builtin_b2()
        };
        sweep(&src, sets, vary)
    }

    /// The B2 memory scenario shrunk to a few requests with short responses.
    pub(in crate::report::plots) const SMALL_B2: [&str; 3] = [
        "workload.requests=24",
        "client.concurrency=8",
        r#"workload.output_tokens={ dist = "lognormal", mean = 300, cv = 0.2, min = 1, max = 1000 }"#,
    ];

    /// Both formats of the first key's figure, checked; returns its SVG's texts.
    fn render((keys, rows): &Sweep) -> String {
        let t = texts(&both(|f| Ok(sweep_figures(keys, rows, f)?.remove(0).1)).1);
        assert!(t.contains(&sweep_title(&keys[0])) && t.contains("\nKV capacity (tokens)\n"));
        assert!(t.lines().count() >= 40, "tick labels are drawn");
        t
    }

    #[test]
    fn a_sweep_over_the_memory_fraction_marks_the_runs_that_would_run_out_of_memory() {
        let src = scenario_file("case-study-b2-memory.toml");
        let fractions = ["engine.mem_fraction_static=0.86,0.89,0.92"];
        let s = sweep(&src, &SMALL_B2, &fractions);
        let verdicts: Vec<&str> = s.1.iter().map(|r| r.oom_verdict.as_str()).collect();
        assert_eq!(verdicts, ["safe", "tight", "oom"]);
        let shaded = SweepFigure::new(&s.0, 0, &s.1).shading();
        assert_eq!(shaded, [(0.5, 1.5, Shape::Up), (1.5, 2.5, Shape::Ring)]);
        let t = render(&s);
        assert!(t.contains("\nwould run out of memory\n") && t.contains("1 of 3 would run out"));
        assert!(t.contains("\nmemory: tight (< 10 % to spare)\n"));
        // The values as written label the axis under each of the four bottom panels.
        for v in ["0.86", "0.89", "0.92"] {
            assert_eq!(t.matches(&format!("\n{v}\n")).count(), 4, "tick {v}");
        }
        let stem = &sweep_figures(&s.0, &s.1, Format::Svg).unwrap()[0].0;
        assert_eq!(stem, "sweep-engine-mem_fraction_static");
    }

    #[test]
    fn other_keys_give_a_line_per_value_up_to_eight_set_apart() {
        let kv = "engine.kv_capacity_tokens=2000,4000";
        let s = tiny(&[], &["client.concurrency=2,4,6", kv]);
        let t = render(&s);
        assert!(t.contains("\none line per engine.kv_capacity_tokens\n2000\n4000\n"));
        assert!(!t.contains("would run out of memory"), "no memory model");
        let fig = SweepFigure::new(&s.0, 0, &s.1);
        assert!(fig.groups.iter().all(|g| g.rows.len() == 3));
        // The two lines are set apart, symmetrically, by a fifth of the spacing of the ticks.
        let (a, b) = (fig.groups[0].dodge, fig.groups[1].dodge);
        assert!((b - a - DODGE).abs() < 1e-12 && (a + b).abs() < 1e-12);
        let svg = || sweep_figures(&s.0, &s.1, Format::Svg).unwrap();
        assert_eq!(svg(), svg(), "deterministic");
        let kv = "engine.kv_capacity_tokens=2000,3000,4000";
        let prefill = "engine.max_prefill_tokens=1000,2000,4000";
        let vary = ["client.concurrency=2,4", kv, prefill];
        let t = render(&tiny(&["workload.requests=12"], &vary));
        assert!(t.contains("one line per (engine.kv_capacity_tokens,"));
        let flat = t.replace('\n', " ");
        assert!(flat.contains("Only the first 8 of 9 lines are drawn."));
        assert!(t.contains("\n2000, 1000\n"));
        assert!(!t.contains("\n4000, 4000\n"), "the ninth is left out");
    }

    #[test]
    fn categories_single_points_and_unfinished_runs_still_draw() {
        let t = render(&tiny(&[], &["engine.schedule_policy=fcfs,lof"]));
        assert!(t.contains("\nfcfs\nlof\n"));
        let t = render(&tiny(&[], &["client.concurrency=4"]));
        assert!(t.contains("\n4\n") && t.contains("1 simulated run,") && t.contains("each dot"));
        let s = tiny(&["run.max_sim_s=30"], &["client.concurrency=1,6"]);
        assert!(s.1[0].time_to_finish_s.is_none() && s.1[1].time_to_finish_s.is_some());
        let note = "1 run was stopped by run.max_sim_s";
        assert!(render(&s).replace('\n', " ").contains(note));
        let s = tiny(&["run.max_sim_s=1"], &["client.concurrency=1,2"]);
        assert!(render(&s).contains("\nno run finished"));
        let keys = ["client.concurrency".to_string()];
        let none = both(|f| Ok(sweep_figures(&keys, &[], f)?.remove(0).1)).1;
        assert!(texts(&none).contains("No runs"));
        assert!(sweep_figures(&[], &[], Format::Png).unwrap().is_empty());
    }

    #[test]
    fn axes_are_indexed_for_categories_and_even_steps_and_linear_otherwise() {
        let names = |v: &[&str]| {
            let (x, _, indexed) = x_axis(v);
            let names = (0..v.len()).map(|i| x.label(i as f64));
            names.filter(|_| indexed).collect::<Vec<_>>()
        };
        assert_eq!(x_axis(&["0.80", "0.90", "0.85"]).1, [0.0, 2.0, 1.0]);
        assert_eq!(names(&["0.80", "0.90", "0.85"]), ["0.80", "0.85", "0.90"]);
        let (x, xs, indexed) = x_axis(&["1", "2", "10"]);
        assert!(!indexed && xs == [1.0, 2.0, 10.0] && x.lo < 1.0 && x.hi > 10.0);
        assert_eq!(names(&["\"a\"", "b", "\"a\""])[..2], ["a", "b"]);
        let long = names(&[r#"{ dist = "constant", value = 512 }"#]);
        assert_eq!(long, ["{ dist\u{2026}= 512 }"]);
        assert!(names(&["60000", "120000", "2000000", "4000000"]).is_empty());
        let thousands = names(&["60000", "120_000", "180000"]);
        assert_eq!(thousands, ["60k", "120k", "180k"]);
        assert_eq!(names(&["1000000", "2000000"]), ["1M", "2M"]);
        assert_eq!(names(&["5000", "7500"]), ["5000", "7500"]);
        assert_eq!(file_stem("client.concurrency"), "sweep-client-concurrency");
    }
}
