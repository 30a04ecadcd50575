//! Sweep figures: each summary metric of a sweep against one varied key.
//!
//! One figure per varied key, seven small panels sharing that key's axis — the steady
//! completion rate with its 95 % interval, the steady gen tok/s, the mean running batch, TTFT
//! p99, E2E p99, the time to finish and the KV pool — and, in the eighth cell, the key to the
//! lines and markers. Choices a reader should know:
//!
//! * **Lines.** With one other varied key, one line per value of it; with more, one per
//!   combination of the others, the first [`MAX_SWEEP_LINES`] in sweep order (the key says how
//!   many are left out). Lines are set a little apart along x (a fifth of the closest two
//!   positions at most), so that lines that coincide stay visible.
//! * **x axis.** Values that are not all numbers (`fcfs`, `lof`) are categories in sweep order.
//!   Evenly spaced numbers (any `start:stop:step`) sit at evenly spaced ticks labelled as the
//!   sweep wrote them (`0.80`, not `0.8`; round thousands from 10,000 as `60k`); other numbers
//!   on a linear scale.
//! * **Memory.** A run the memory model says would run out of memory is a hollow circle, a tight
//!   one a triangle; where every run at an x value would run out of memory (or is tight) the
//!   panel is shaded red (orange) there.
//! * **Units.** Latencies and the time to finish are in s, min or h, whichever the largest value
//!   of the panel needs; a run stopped by `run.max_sim_s` has no time to finish and no point in
//!   that panel.

use std::collections::HashMap;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::sweep::Row;

use super::axis::{thousands, Ticked};
use super::style::{
    heading, plot_px, text_scale, wrap, BLUE, DARK, FONT, GREEN, GREY, LEGEND_PX, ORANGE, PURPLE,
    RED, VERMILLION,
};
use super::{line, panel, render, y_top, Chart, DrawFailure, Figure, Format, PlotError};

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
        let fig = SweepFigure::new(keys, k, rows);
        out.push((stem, render(&fig, fmt)?));
    }
    Ok(out)
}

fn file_stem(key: &str) -> String {
    let body: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("sweep-{}", body.trim_matches('-'))
}

// ---------------------------------------------------------------------------------------------
// Data

/// A varied value as a number, if it is one (TOML's `_` separators allowed).
fn number(v: &str) -> Option<f64> {
    v.trim()
        .replace('_', "")
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
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
    if n > MAX_LABEL_CHARS {
        let head_n = (MAX_LABEL_CHARS - 1) / 2;
        let tail_n = MAX_LABEL_CHARS - 1 - head_n;
        let head: String = unquoted.chars().take(head_n).collect();
        let tail: String = unquoted.chars().skip(n - tail_n).collect();
        format!("{}\u{2026}{}", head.trim_end(), tail.trim_start())
    } else {
        unquoted.to_string()
    }
}

/// A varied value for a tick: as [`display`], but round thousands and millions of 10,000 or
/// more shortened (`60000` → `60k`), so that the ticks of a narrow panel fit.
fn compact(v: &str) -> String {
    let t = v.trim().replace('_', "");
    match t.parse::<i64>() {
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

/// The memory model's verdict on a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Safe,
    Tight,
    Oom,
    Unknown,
}

impl Verdict {
    fn of(row: &Row) -> Verdict {
        match row.oom_verdict.as_str() {
            "safe" => Verdict::Safe,
            "tight" => Verdict::Tight,
            "oom" => Verdict::Oom,
            _ => Verdict::Unknown,
        }
    }
}

/// The varied key's axis: indexed (categories, or evenly spaced numbers, at 0, 1, …) or
/// numeric (the values themselves).
#[derive(Clone, Debug)]
struct XAxis {
    /// The label of each position of an indexed axis; empty for a numeric axis.
    labels: Vec<String>,
    lo: f64,
    hi: f64,
}

impl XAxis {
    /// The axis for `values` (one per row) and each row's x.
    fn new(values: &[&str]) -> (XAxis, Vec<f64>) {
        let nums: Option<Vec<f64>> = values.iter().map(|v| number(v)).collect();
        match nums {
            Some(nums) if !nums.is_empty() => {
                let mut distinct = nums.clone();
                distinct.sort_by(f64::total_cmp);
                distinct.dedup();
                let index = |n: f64| {
                    distinct
                        .binary_search_by(|d| d.total_cmp(&n))
                        .expect("invariant: every value is among the distinct values")
                };
                if evenly_spaced(&distinct) {
                    let mut labels = vec![String::new(); distinct.len()];
                    for (v, &n) in values.iter().zip(&nums) {
                        let l = &mut labels[index(n)];
                        if l.is_empty() {
                            *l = compact(v);
                        }
                    }
                    let xs = nums.iter().map(|&n| index(n) as f64).collect();
                    (XAxis::indexed(labels), xs)
                } else {
                    let (lo, hi) = (distinct[0], distinct[distinct.len() - 1]);
                    let pad = (hi - lo) * 0.06;
                    let axis = XAxis {
                        labels: Vec::new(),
                        lo: lo - pad,
                        hi: hi + pad,
                    };
                    (axis, nums)
                }
            }
            _ => {
                let mut labels: Vec<String> = Vec::new();
                let mut seen: HashMap<&str, usize> = HashMap::new();
                let xs = values
                    .iter()
                    .map(|v| {
                        let i = *seen.entry(v).or_insert_with(|| {
                            labels.push(display(v));
                            labels.len() - 1
                        });
                        i as f64
                    })
                    .collect();
                (XAxis::indexed(labels), xs)
            }
        }
    }

    fn indexed(labels: Vec<String>) -> XAxis {
        let n = labels.len().max(1);
        XAxis {
            labels,
            lo: -0.5,
            hi: n as f64 - 0.5,
        }
    }

    fn is_indexed(&self) -> bool {
        !self.labels.is_empty()
    }

    /// The range for plotters, with as many ticks as labels fit in `plot_w` pixels.
    fn coord<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        plot_w: i32,
    ) -> Result<Ticked, DrawFailure> {
        let font = TextStyle::from((FONT, LEGEND_PX).into_font());
        let widest = if self.is_indexed() {
            let mut w = 0;
            for l in &self.labels {
                w = w.max(area.estimate_text_size(l, &font)?.0 as i32);
            }
            w
        } else {
            // About as wide as the widest tick label.
            let m = self.lo.abs().max(self.hi.abs());
            let probe = if m >= 10.0 {
                format!("-{m:.0}")
            } else {
                format!("-{m:.2}")
            };
            area.estimate_text_size(&probe, &font)?.0 as i32
        };
        let fit = (plot_w / (widest + 14).max(1)).max(1) as usize;
        let max_ticks = if self.is_indexed() {
            fit.min(self.labels.len())
        } else {
            fit.clamp(2, 8)
        };
        Ok(Ticked::linear(self.lo, self.hi, max_ticks))
    }

    /// The text of the tick at `x` (`coord` is the range `coord` gave).
    fn label(&self, x: f64, coord: &Ticked) -> String {
        if !self.is_indexed() {
            return coord.label(x);
        }
        let i = x.round();
        if (x - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        self.labels.get(i as usize).cloned().unwrap_or_default()
    }

    /// The band shaded around each of the sorted positions `xs`: the whole step of an indexed
    /// axis; on a numeric axis a narrow band ([`BAND`] of the axis, or wide enough for the
    /// lines set apart by [`DODGE`], but not past halfway to a neighbour), since nothing is
    /// known between the runs.
    fn bands(&self, xs: &[f64]) -> Vec<(f64, f64)> {
        if self.is_indexed() {
            return xs.iter().map(|&x| (x - 0.5, x + 0.5)).collect();
        }
        let closest = xs
            .windows(2)
            .map(|w| w[1] - w[0])
            .fold(self.hi - self.lo, f64::min);
        let widest = (BAND * (self.hi - self.lo)).max(0.75 * DODGE * closest);
        xs.iter()
            .enumerate()
            .map(|(i, &x)| {
                let left = if i == 0 {
                    widest
                } else {
                    (x - xs[i - 1]) / 2.0
                };
                let right = match xs.get(i + 1) {
                    Some(next) => (next - x) / 2.0,
                    None => widest,
                };
                (x - left.min(widest), x + right.min(widest))
            })
            .collect()
    }
}

/// Most a shaded band around a run reaches on a numeric axis, as a fraction of the axis.
const BAND: f64 = 0.025;

/// Sorted distinct numbers at a constant step (two or fewer always are).
fn evenly_spaced(distinct: &[f64]) -> bool {
    if distinct.len() <= 2 {
        return true;
    }
    let step = distinct[1] - distinct[0];
    distinct
        .windows(2)
        .all(|w| ((w[1] - w[0]) - step).abs() <= 1e-6 * step.abs())
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

/// Sky blue and reddish purple of the Okabe–Ito palette, for the fifth and seventh lines.
const SKY: RGBColor = RGBColor(86, 180, 233);
const PINK: RGBColor = RGBColor(204, 121, 167);
/// The lines' colours, in order.
const PALETTE: [RGBColor; MAX_SWEEP_LINES] =
    [BLUE, VERMILLION, GREEN, PURPLE, SKY, ORANGE, PINK, DARK];

/// How far apart the lines are set, as a fraction of the distance between the closest two x
/// positions: runs at one x stay distinguishable when lines coincide (as `fcfs` and `lof` do
/// when every request asks for the same `max_new_tokens`).
const DODGE: f64 = 0.2;

/// How one panel reads a row.
struct Metric {
    desc: String,
    /// The value in the row's unit, if the row has one.
    get: fn(&Row) -> Option<f64>,
    /// The panel's unit, in the row's.
    div: f64,
    /// Draw the steady rate's 95 % interval.
    ci: bool,
    /// What the panel says when no run has a value.
    empty: &'static str,
}

/// Seconds, minutes or hours, as the largest of `values_s` needs: `(divisor, unit)`.
fn time_unit(values_s: impl Iterator<Item = f64>) -> (f64, &'static str) {
    let max = values_s.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max < 120.0 {
        (1.0, "s")
    } else if max < 2.0 * 3_600.0 {
        (60.0, "min")
    } else {
        (3_600.0, "h")
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

fn metrics(rows: &[Row]) -> Vec<Metric> {
    let time = |desc: &str, get: fn(&Row) -> Option<f64>, empty: &'static str| {
        let (div, unit) = time_unit(rows.iter().filter_map(get));
        Metric {
            desc: format!("{desc} ({unit})"),
            get,
            div,
            ci: false,
            empty,
        }
    };
    let plain = |desc: &str, get: fn(&Row) -> Option<f64>| Metric {
        desc: desc.to_string(),
        get,
        div: 1.0,
        ci: false,
        empty: "no run to show",
    };
    vec![
        Metric {
            ci: true,
            ..plain("steady state (req/s)", |r| finite(r.steady_req_per_s))
        },
        plain("steady gen throughput (tok/s)", |r| finite(r.gen_tok_per_s)),
        plain("mean running (requests)", |r| finite(r.mean_running)),
        time(
            "TTFT p99",
            |r| finite(r.ttft_p99_ms / 1000.0),
            "no run to show",
        ),
        time(
            "E2E p99",
            |r| finite(r.e2e_p99_ms / 1000.0),
            "no run to show",
        ),
        time(
            "time to finish",
            |r| r.time_to_finish_s.and_then(finite),
            "no run finished: each was stopped by run.max_sim_s",
        ),
        plain("KV capacity (tokens)", |r| {
            Some(r.kv_capacity_tokens as f64)
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The figure

struct SweepFigure<'a> {
    key: &'a str,
    rows: &'a [Row],
    x: XAxis,
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
        let (x, xs) = XAxis::new(&values);
        let others: Vec<usize> = (0..keys.len()).filter(|&j| j != k).collect();
        let mut groups: Vec<Group> = Vec::new();
        let mut index: HashMap<Vec<&str>, usize> = HashMap::new();
        let mut total_groups = 0;
        for (i, r) in rows.iter().enumerate() {
            let id: Vec<&str> = others.iter().map(|&j| value_of(r, keys, j)).collect();
            let g = *index.entry(id.clone()).or_insert_with(|| {
                total_groups += 1;
                total_groups - 1
            });
            if g < MAX_SWEEP_LINES {
                if g == groups.len() {
                    let label: Vec<String> = id.iter().map(|v| display(v)).collect();
                    groups.push(Group {
                        label: label.join(", "),
                        colour: PALETTE[g],
                        rows: Vec::new(),
                        dodge: 0.0,
                    });
                }
                groups[g].rows.push(i);
            }
        }
        if groups.len() == 1 {
            groups[0].colour = BLUE;
        }
        for g in &mut groups {
            g.rows.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
        }
        // Lines side by side within DODGE of the closest two x positions.
        if groups.len() > 1 {
            let mut at: Vec<f64> = xs.clone();
            at.sort_by(f64::total_cmp);
            at.dedup();
            let spacing = at
                .windows(2)
                .map(|w| w[1] - w[0])
                .fold(x.hi - x.lo, f64::min);
            let last = (groups.len() - 1) as f64;
            for (g, group) in groups.iter_mut().enumerate() {
                group.dodge = (g as f64 / last - 0.5) * DODGE * spacing;
            }
        }
        let line_header = match others.as_slice() {
            [] => None,
            [j] => Some(format!("one line per {}", keys[*j])),
            _ => {
                let names: Vec<&str> = others.iter().map(|&j| keys[j].as_str()).collect();
                Some(format!("one line per ({})", names.join(", ")))
            }
        };
        SweepFigure {
            key: &keys[k],
            rows,
            x,
            xs,
            groups,
            total_groups,
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
        let known = self
            .rows
            .iter()
            .filter(|r| Verdict::of(r) != Verdict::Unknown)
            .count();
        if known > 0 {
            let oom = self
                .rows
                .iter()
                .filter(|r| Verdict::of(r) == Verdict::Oom)
                .count();
            s.push_str(&format!(
                " Memory model: {oom} of {known} would run out of memory."
            ));
        }
        s
    }

    /// The x positions of the shown runs and whether every run there would run out of memory
    /// or is tight: `(x, all oom, all tight)`, by increasing x.
    fn verdict_bands(&self) -> Vec<(f64, bool, bool)> {
        let mut at: Vec<(f64, Verdict)> = self
            .shown()
            .map(|i| (self.xs[i], Verdict::of(&self.rows[i])))
            .collect();
        at.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<(f64, bool, bool)> = Vec::new();
        for (x, v) in at {
            match out.last_mut() {
                Some(last) if last.0 == x => {
                    last.1 &= v == Verdict::Oom;
                    last.2 &= v == Verdict::Tight;
                }
                _ => out.push((x, v == Verdict::Oom, v == Verdict::Tight)),
            }
        }
        out
    }

    fn draw_metric<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        m: &Metric,
        bottom: bool,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let plot_w = plot_px(area.dim_in_pixel(), bottom).0;
        let coord = self.x.coord(area, plot_w)?;
        let x_label = |x: f64| self.x.label(x, &coord);
        let value = |i: usize| (m.get)(&self.rows[i]).map(|v| v / m.div);
        let ci = |i: usize| {
            let [lo, hi] = self.rows[i].steady_req_per_s_ci;
            (m.ci && lo.is_finite() && hi.is_finite() && hi >= lo).then_some((lo, hi))
        };
        let y_max = self
            .shown()
            .flat_map(|i| [value(i), ci(i).map(|c| c.1)])
            .flatten()
            .fold(0.0, f64::max);
        let y_hi = y_top(y_max, 1.12);
        let y = Ticked::linear(0.0, y_hi, 5);
        let desc = self.key.to_string();
        let mut chart = panel(
            area,
            coord.clone(),
            &x_label,
            bottom.then_some(desc.as_str()),
            y,
            &m.desc,
        )?;

        // Shading where every run would run out of memory (or is tight).
        let bands = self.verdict_bands();
        let positions: Vec<f64> = bands.iter().map(|b| b.0).collect();
        for (&(_, oom, tight), (a, b)) in bands.iter().zip(self.x.bands(&positions)) {
            let fill = if oom {
                RED.mix(0.12).filled()
            } else if tight {
                ORANGE.mix(0.16).filled()
            } else {
                continue;
            };
            chart.draw_series(std::iter::once(Rectangle::new([(a, 0.0), (b, y_hi)], fill)))?;
        }

        let mut any = false;
        for g in &self.groups {
            // Lines, broken where a run has no value.
            let mut segment: Vec<(f64, f64)> = Vec::new();
            for &i in &g.rows {
                match value(i) {
                    Some(v) => segment.push((self.xs[i] + g.dodge, v)),
                    None => {
                        if segment.len() > 1 {
                            line(&mut chart, &segment, g.colour, 2, raster)?;
                        }
                        segment.clear();
                    }
                }
            }
            if segment.len() > 1 {
                line(&mut chart, &segment, g.colour, 2, raster)?;
            }
            for &i in &g.rows {
                if let Some((lo, hi)) = ci(i) {
                    error_bar(&mut chart, self.xs[i] + g.dodge, lo, hi, g.colour)?;
                }
            }
            for &i in &g.rows {
                if let Some(v) = value(i) {
                    any = true;
                    let verdict = Verdict::of(&self.rows[i]);
                    point(&mut chart, (self.xs[i] + g.dodge, v), g.colour, verdict)?;
                }
            }
        }
        if !any {
            let plot = chart.plotting_area().strip_coord_spec();
            let (w, h) = plot.dim_in_pixel();
            let style = (FONT, LEGEND_PX)
                .into_font()
                .color(&GREY)
                .pos(Pos::new(HPos::Center, VPos::Center));
            let lines = wrap(&plot, m.empty, w as i32 - 16, raster)?;
            let top = h as i32 / 2 - (lines.len() as i32 - 1) * KEY_ROW_PX / 2;
            for (k, l) in lines.into_iter().enumerate() {
                plot.draw(&Text::new(
                    l,
                    (w as i32 / 2, top + k as i32 * KEY_ROW_PX),
                    style.clone(),
                ))?;
            }
        }
        Ok(())
    }

    /// The key to lines, markers and shading, in a cell of its own. Its rows are made shorter
    /// (down to the text's height) if they would not fit in the cell.
    fn draw_key<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let (w, h) = area.dim_in_pixel();
        let (x0, width) = (KEY_INSET_PX, w as i32 - 2 * KEY_INSET_PX);
        let text = |colour: &RGBColor| {
            (FONT, LEGEND_PX)
                .into_font()
                .color(colour)
                .pos(Pos::new(HPos::Left, VPos::Center))
        };
        let label_x = x0 + KEY_SWATCH_PX + KEY_GAP_PX;

        // Measure: what the key holds, in rows.
        let header = match &self.line_header {
            Some(t) => wrap(area, t, width, raster)?,
            None => Vec::new(),
        };
        let (cols, col_w) = if header.is_empty() {
            (1, width)
        } else {
            let font = TextStyle::from((FONT, LEGEND_PX).into_font());
            let mut m = 0;
            for g in &self.groups {
                m = m.max(area.estimate_text_size(&g.label, &font)?.0 as i32);
            }
            let col_w = KEY_SWATCH_PX + KEY_GAP_PX + (f64::from(m) * text_scale(raster)) as i32;
            let col_w = col_w + 20;
            let two = self.groups.len() > 3 && 2 * col_w <= width;
            (if two { 2 } else { 1 }, col_w)
        };
        let line_rows = if header.is_empty() {
            usize::from(!self.groups.is_empty())
        } else {
            self.groups.len().div_ceil(cols)
        };
        let ci_row = self.shown().next().is_some();
        let bands = self.verdict_bands();
        let shaded_oom = bands.iter().any(|b| b.1);
        let shaded_tight = bands.iter().any(|b| b.2);
        let present = |v: Verdict| self.shown().any(|i| Verdict::of(&self.rows[i]) == v);
        let verdicts: Vec<(Verdict, &str, Option<ShapeStyle>)> = [
            (Verdict::Safe, "memory: safe", None),
            (
                Verdict::Tight,
                "memory: tight (< 10 % to spare)",
                shaded_tight.then(|| ORANGE.mix(0.16).filled()),
            ),
            (
                Verdict::Oom,
                "would run out of memory",
                shaded_oom.then(|| RED.mix(0.12).filled()),
            ),
        ]
        .into_iter()
        .filter(|(v, _, _)| present(*v))
        .collect();
        let mut notes = Vec::new();
        if self.total_groups > self.groups.len() {
            notes.push(format!(
                "Only the first {} of {} lines are drawn.",
                self.groups.len(),
                self.total_groups
            ));
        }
        let unfinished = self
            .shown()
            .filter(|&i| self.rows[i].time_to_finish_s.is_none())
            .count();
        if unfinished > 0 && unfinished < self.shown().count() {
            notes.push(format!(
                "{unfinished} run{} stopped by run.max_sim_s: no time to finish.",
                if unfinished == 1 { " was" } else { "s were" }
            ));
        }
        let mut note_lines = Vec::new();
        for n in &notes {
            note_lines.extend(wrap(area, n, width, raster)?);
        }
        // Sections are a third of a row apart.
        let thirds = 3 * (header.len() + line_rows + usize::from(ci_row) + verdicts.len())
            + 3 * note_lines.len()
            + 3;
        let room = h as i32 - 2 * KEY_INSET_PX;
        let row = (3 * room / thirds.max(1) as i32).clamp(LEGEND_PX as i32 + 1, KEY_ROW_PX);
        let gap = row / 3;

        // Draw.
        let mut y = KEY_INSET_PX + row / 2;
        for l in header.iter() {
            area.draw(&Text::new(l.clone(), (x0, y), text(&DARK)))?;
            y += row;
        }
        if header.is_empty() {
            if let Some(g) = self.groups.first() {
                line_swatch(area, (x0, y), g.colour)?;
                area.draw(&Text::new(
                    "each dot: one simulated run",
                    (label_x, y),
                    text(&BLACK),
                ))?;
            }
        } else {
            for (i, g) in self.groups.iter().enumerate() {
                let (r, c) = ((i / cols) as i32, (i % cols) as i32);
                let (sx, sy) = (x0 + c * col_w, y + r * row);
                line_swatch(area, (sx, sy), g.colour)?;
                area.draw(&Text::new(
                    g.label.clone(),
                    (sx + KEY_SWATCH_PX + KEY_GAP_PX, sy),
                    text(&BLACK),
                ))?;
            }
        }
        y += line_rows as i32 * row + gap;

        // The steady rate's interval.
        if ci_row {
            let cx = x0 + KEY_SWATCH_PX / 2;
            let half = (row / 2 - 3).min(8);
            area.draw(&PathElement::new(
                vec![(cx, y - half), (cx, y + half)],
                DARK.stroke_width(1),
            ))?;
            for cy in [y - half, y + half] {
                area.draw(&PathElement::new(
                    vec![(cx - 4, cy), (cx + 4, cy)],
                    DARK.stroke_width(1),
                ))?;
            }
            area.draw(&Text::new(
                "95 % CI of the steady rate",
                (label_x, y),
                text(&BLACK),
            ))?;
            y += row + gap;
        }

        // The memory verdicts present, with their shading if a panel is shaded for them.
        for (v, label, shade) in verdicts {
            if let Some(fill) = shade {
                let half = (row / 2 - 2).min(9);
                area.draw(&Rectangle::new(
                    [(x0, y - half), (x0 + KEY_SWATCH_PX, y + half)],
                    fill,
                ))?;
            }
            marker(area, (x0 + KEY_SWATCH_PX / 2, y), DARK, v)?;
            area.draw(&Text::new(label, (label_x, y), text(&BLACK)))?;
            y += row;
        }

        // Notes: what is left out or missing.
        y += gap;
        for l in note_lines {
            area.draw(&Text::new(l, (x0, y), text(&GREY)))?;
            y += row;
        }
        Ok(())
    }
}

/// Rows of the key.
const KEY_ROW_PX: i32 = LEGEND_PX as i32 + 8;
/// Width of a swatch in the key.
const KEY_SWATCH_PX: i32 = 30;
/// Space between a swatch and its text.
const KEY_GAP_PX: i32 = 8;
/// Distance of the key from its cell's edges.
const KEY_INSET_PX: i32 = 14;

/// A line with a dot on it, centred vertically on `(x, y)`.
fn line_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    colour: RGBColor,
) -> Result<(), DrawFailure> {
    area.draw(&PathElement::new(
        vec![(x, y), (x + KEY_SWATCH_PX, y)],
        colour.stroke_width(2),
    ))?;
    marker(area, (x + KEY_SWATCH_PX / 2, y), colour, Verdict::Safe)
}

/// Radius of a run's dot.
const DOT_PX: i32 = 4;

/// A run's marker at pixel `c` of `area`: a dot (safe or unknown), a triangle (tight) or a
/// hollow circle (would run out of memory).
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: (i32, i32),
    colour: RGBColor,
    v: Verdict,
) -> Result<(), DrawFailure> {
    match v {
        Verdict::Safe | Verdict::Unknown => area.draw(&Circle::new(c, DOT_PX, colour.filled()))?,
        Verdict::Tight => area.draw(&TriangleMarker::new(c, DOT_PX + 2, colour.filled()))?,
        Verdict::Oom => {
            area.draw(&Circle::new(c, DOT_PX + 1, WHITE.filled()))?;
            area.draw(&Circle::new(c, DOT_PX + 1, colour.stroke_width(2)))?;
        }
    }
    Ok(())
}

/// A run's marker at data point `p`.
fn point<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    p: (f64, f64),
    colour: RGBColor,
    v: Verdict,
) -> Result<(), DrawFailure> {
    let area = chart.plotting_area();
    let (bx, by) = area.get_base_pixel();
    let (px, py) = chart.backend_coord(&p);
    marker(&area.strip_coord_spec(), (px - bx, py - by), colour, v)
}

/// A vertical error bar from `lo` to `hi` at `x`, with caps.
fn error_bar<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    x: f64,
    lo: f64,
    hi: f64,
    colour: RGBColor,
) -> Result<(), DrawFailure> {
    let area = chart.plotting_area();
    let (bx, by) = area.get_base_pixel();
    let (px, top) = chart.backend_coord(&(x, hi));
    let (_, bottom) = chart.backend_coord(&(x, lo));
    let (px, top, bottom) = (px - bx, top - by, bottom - by);
    let plot = area.strip_coord_spec();
    let style = colour.stroke_width(1);
    plot.draw(&PathElement::new(vec![(px, top), (px, bottom)], style))?;
    for y in [top, bottom] {
        plot.draw(&PathElement::new(vec![(px - 4, y), (px + 4, y)], style))?;
    }
    Ok(())
}

impl Figure for SweepFigure<'_> {
    const NAME: &'static str = "sweep";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let body = heading(root, &sweep_title(self.key), &self.subtitle())?;
        // Two rows of four cells; the top row's panels show no x tick labels (the panel below
        // shares the axis), so it is shorter by the difference and all plots are as tall.
        let (top, bottom) = body.split_vertically(TOP_ROW_PX);
        let top = top.split_evenly((1, 4));
        let bottom = bottom.split_evenly((1, 4));
        let metrics = metrics(self.rows);
        for (m, cell) in metrics.iter().zip(top.iter().take(3)) {
            self.draw_metric(cell, m, false, raster)?;
        }
        self.draw_key(&top[3], raster)?;
        for (m, cell) in metrics.iter().skip(3).zip(bottom.iter()) {
            self.draw_metric(cell, m, true, raster)?;
        }
        Ok(())
    }
}

/// Height of the top row of cells: the bottom row's x labels take 46 px more (see
/// `style::plot_px`), so both rows' plots are the same height.
const TOP_ROW_PX: u32 = (super::HEIGHT_PX - super::style::HEADING_PX - 46) / 2;

#[cfg(test)]
pub(super) mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::engine::RunOptions;
    use crate::scenario::{load, Source};
    use crate::sweep::{parse_vary, points, run_point};

    /// The width and height of a PNG, after checking its signature.
    pub(in crate::report::plots) fn png_size(png: &[u8]) -> (u32, u32) {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&png[12..16], b"IHDR", "IHDR first");
        let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
        (be(16), be(20))
    }

    /// The SVG document as text, after checking it is whole.
    pub(in crate::report::plots) fn svg_text(svg: &[u8]) -> &str {
        let s = std::str::from_utf8(svg).expect("SVG is UTF-8");
        assert!(s.trim_start().starts_with("<svg"), "an SVG document");
        assert!(s.trim_end().ends_with("</svg>"), "a complete SVG document");
        s
    }

    /// The texts of an SVG document's `<text>` elements, trimmed.
    pub(in crate::report::plots) fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let inner = t.split_once('>')?.1.split_once("</text>")?.0;
                Some(inner.trim().replace("&lt;", "<").replace("&amp;", "&"))
            })
            .collect()
    }

    /// The y of the first `<text>` element of `svg` that starts with `want`.
    fn text_y(svg: &str, want: &str) -> Option<f64> {
        svg.split("<text").skip(1).find_map(|t| {
            let (attrs, rest) = t.split_once('>')?;
            if !rest.trim_start().starts_with(want) {
                return None;
            }
            let y = attrs.split_once(" y=\"")?.1.split_once('"')?.0;
            y.parse().ok()
        })
    }

    /// Whether some text of `svg` is exactly `want`.
    pub(in crate::report::plots) fn has_text(svg: &str, want: &str) -> bool {
        texts(svg).iter().any(|t| t == want)
    }

    /// A scenario file of the repository.
    pub(in crate::report::plots) fn scenario_file(name: &str) -> Source {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name);
        Source::read(&path).expect("the scenario file is readable")
    }

    /// Run a sweep as `servesim sweep` does: `(keys, rows)`.
    fn sweep(src: &Source, sets: &[&str], vary: &[&str]) -> (Vec<String>, Vec<Row>) {
        let axes: Vec<_> = vary.iter().map(|v| parse_vary(v).unwrap()).collect();
        let keys = axes.iter().map(|a| a.key.clone()).collect();
        let rows = points(&axes)
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let all: Vec<String> = sets
                    .iter()
                    .map(|s| s.to_string())
                    .chain(p.clone())
                    .collect();
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
        assert_eq!(pngs.len(), keys.len());
        assert_eq!(svgs.len(), keys.len());
        let mut out = Vec::new();
        for ((key, (stem_p, png)), (stem_s, svg)) in keys.iter().zip(&pngs).zip(&svgs) {
            assert_eq!(stem_p, stem_s);
            assert!(stem_p.starts_with("sweep-"), "{stem_p}");
            assert_eq!(
                png_size(png),
                (super::super::WIDTH_PX, super::super::HEIGHT_PX)
            );
            assert!(
                png.len() > 10_000,
                "a PNG with content: {} bytes",
                png.len()
            );
            let s = svg_text(svg);
            assert!(s.contains(&sweep_title(key)), "the SVG holds its title");
            for desc in [
                "steady state (req/s)",
                "mean running (requests)",
                "KV capacity",
            ] {
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
        let (keys, rows) = sweep(
            &src,
            &SMALL_B2,
            &["engine.mem_fraction_static=0.86,0.89,0.92"],
        );
        let verdicts: Vec<&str> = rows.iter().map(|r| r.oom_verdict.as_str()).collect();
        assert_eq!(verdicts, ["safe", "tight", "oom"]);
        let svgs = render_both(&keys, &rows);
        let s = &svgs[0];
        assert!(has_text(s, "would run out of memory"));
        assert!(has_text(s, "memory: tight (< 10 % to spare)"));
        assert!(s.contains("1 of 3 would run out of memory"));
        // The axis is labelled with the values as written, under each of the four bottom
        // panels.
        for v in ["0.86", "0.89", "0.92"] {
            assert_eq!(texts(s).iter().filter(|t| *t == v).count(), 4, "tick {v}");
        }
        assert_eq!(
            sweep_figures(&keys, &rows, Format::Svg).unwrap()[0].0,
            "sweep-engine-mem_fraction_static"
        );
    }

    #[test]
    fn two_keys_give_a_figure_per_key_with_a_line_per_value_of_the_other() {
        let (keys, rows) = sweep(
            &tiny(),
            &[],
            &[
                "client.concurrency=2,4,6",
                "engine.kv_capacity_tokens=2000,4000",
            ],
        );
        let svgs = render_both(&keys, &rows);
        assert!(has_text(&svgs[0], "one line per engine.kv_capacity_tokens"));
        assert!(has_text(&svgs[1], "one line per client.concurrency"));
        assert!(has_text(&svgs[0], "2000") && has_text(&svgs[0], "4000"));
        assert!(
            !svgs[0].contains("would run out of memory"),
            "no memory model"
        );
        let fig = SweepFigure::new(&keys, 0, &rows);
        assert_eq!(fig.groups.len(), 2);
        assert_eq!(fig.groups[0].label, "2000");
        assert!(fig.groups.iter().all(|g| g.rows.len() == 3));
        // The two lines are set apart, symmetrically, by a fifth of the spacing of the ticks.
        assert!((fig.groups[1].dodge - fig.groups[0].dodge - DODGE).abs() < 1e-12);
        assert!((fig.groups[0].dodge + fig.groups[1].dodge).abs() < 1e-12);
        assert_eq!(
            sweep_figures(&keys, &rows, Format::Svg).unwrap(),
            sweep_figures(&keys, &rows, Format::Svg).unwrap(),
            "deterministic"
        );
    }

    #[test]
    fn a_categorical_key_gets_its_values_as_ticks() {
        let (keys, rows) = sweep(&tiny(), &[], &["engine.schedule_policy=fcfs,lof"]);
        let fig = SweepFigure::new(&keys, 0, &rows);
        assert_eq!(fig.x.labels, ["fcfs", "lof"]);
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
    }

    #[test]
    fn runs_stopped_before_the_end_have_no_time_to_finish() {
        let (keys, rows) = sweep(&tiny(), &["run.max_sim_s=30"], &["client.concurrency=1,6"]);
        assert_eq!(
            rows[0].time_to_finish_s, None,
            "one slot is too slow for 30 s"
        );
        assert!(rows[1].time_to_finish_s.is_some());
        let s = &render_both(&keys, &rows)[0];
        assert!(texts(s)
            .concat()
            .contains("1 run was stopped by run.max_sim_s"));
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
        assert!(texts(s)
            .join(" ")
            .contains("Only the first 8 of 9 lines are drawn."));
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
        let note = "Only the first 8 of 9 lines are drawn.";
        let bottom = f64::from(super::super::style::HEADING_PX + TOP_ROW_PX);
        let y = text_y(s, note)
            .or_else(|| text_y(s, "Only the first"))
            .unwrap();
        assert!(
            y + 8.0 < bottom,
            "the note at y = {y} is above the cell's bottom {bottom}"
        );
        assert!(has_text(s, "would run out of memory"));
        assert!(has_text(s, "memory: tight (< 10 % to spare)"));
    }

    #[test]
    fn axes_are_indexed_for_categories_and_even_steps_and_linear_otherwise() {
        let (x, xs) = XAxis::new(&["0.80", "0.90", "0.85"]);
        assert_eq!(x.labels, ["0.80", "0.85", "0.90"]);
        assert_eq!(xs, [0.0, 2.0, 1.0]);
        let (x, xs) = XAxis::new(&["1", "2", "10"]);
        assert!(!x.is_indexed());
        assert_eq!(xs, [1.0, 2.0, 10.0]);
        assert!(x.lo < 1.0 && x.hi > 10.0);
        let (x, _) = XAxis::new(&["\"a\"", "b", "\"a\""]);
        assert_eq!(x.labels, ["a", "b"]);
        let (x, _) = XAxis::new(&[r#"{ dist = "constant", value = 512 }"#]);
        assert_eq!(x.labels[0], "{ dist\u{2026}= 512 }");
        let (x, _) = XAxis::new(&["60000", "120000", "2000000", "4000000"]);
        assert!(!x.is_indexed(), "uneven");
        let (x, _) = XAxis::new(&["60000", "120_000", "180000"]);
        assert_eq!(x.labels, ["60k", "120k", "180k"]);
        let (x, _) = XAxis::new(&["1000000", "2000000"]);
        assert_eq!(x.labels, ["1M", "2M"]);
        let (x, _) = XAxis::new(&["5000", "7500"]);
        assert_eq!(x.labels, ["5000", "7500"]);
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
        let write = |prefix: &str, keys: &[String], rows: &[Row]| {
            for fmt in Format::ALL {
                for (stem, bytes) in sweep_figures(keys, rows, fmt).unwrap() {
                    let name = format!("{prefix}{stem}.{}", fmt.extension());
                    std::fs::write(dir.join(name), bytes).unwrap();
                }
            }
        };
        let requests = ["workload.requests=2000"];
        let (keys, rows) = sweep(
            &scenario_file("case-study-b2-memory.toml"),
            &requests,
            &["engine.mem_fraction_static=0.80:0.95:0.01"],
        );
        write("b2-memory-", &keys, &rows);
        let (keys, rows) = sweep(
            &scenario_file("case-study-b2.toml"),
            &requests,
            &[
                "client.concurrency=50,100,150",
                "engine.kv_capacity_tokens=60000:240000:60000",
            ],
        );
        write("b2-2key-", &keys, &rows);
        let (keys, rows) = sweep(
            &scenario_file("case-study-b2-memory.toml"),
            &requests,
            &[
                "client.concurrency=50,150",
                "engine.mem_fraction_static=0.84:0.92:0.04",
                "engine.schedule_policy=fcfs,lof",
            ],
        );
        write("b2-3key-", &keys, &rows);
        let (keys, rows) = sweep(&tiny(), &["run.max_sim_s=30"], &["client.concurrency=1,6"]);
        write("tiny-unfinished-", &keys, &rows);
        let (keys, rows) = sweep(&tiny(), &[], &["client.concurrency=4"]);
        write("tiny-single-", &keys, &rows);
        let (keys, rows) = sweep(
            &tiny(),
            &["workload.requests=12"],
            &[
                "client.concurrency=2,4",
                "engine.kv_capacity_tokens=2000,3000,4000",
                "engine.max_prefill_tokens=1000,2000,4000",
            ],
        );
        write("tiny-capped-", &keys, &rows);
        let src = scenario_file("case-study-b2-memory.toml");
        let (keys, rows) = sweep(&src, &SMALL_B2, &CROWDED);
        write("small-crowded-", &keys, &rows);
    }
}
