//! The memory figure: SGLang's split of each GPU's memory over a range of fractions.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::memory::{SglangMemory, SlackNeed, Verdict};

use super::axis::{thousands, Axis, Labels};
use super::style::{heading, text_width, tint, Entry, Legend, Swatch, FONT, TEXT_PX, TOP_FIRST};
use super::style::{DARK, GREEN, ORANGE, RED};
use super::{render, Area, Drawn, Figure, Format, PlotError};

/// The title of the [`memory_figure`].
pub const MEMORY_TITLE: &str = "GPU memory by mem_fraction_static: weights, KV pool and slack";

/// For each `(mem_fraction_static f, derivation)` of `rows`, in their order, a stacked bar of
/// one GPU's memory in GiB: the weights `W`, the KV pool `M_pre · f − W` and the slack
/// `(1 − f) · M_pre`, so every bar is `M_pre` tall (the memory free before the weights load).
/// The slack is coloured by the verdict (green safe, orange tight, red would run out of
/// memory); a black line across the bar marks `M_pre − need`, where the slack would be exactly
/// what the server must hold (the part of a pool above it is darker); the KV pool in tokens is
/// written above the bar.
pub fn memory_figure(rows: &[(f64, SglangMemory)], fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&MemoryFigure(rows), fmt)
}

struct MemoryFigure<'a>(&'a [(f64, SglangMemory)]);

/// One bar, GiB per GPU: `W`, `M_pre · f` (the top of the pool), `M_pre` (the top of the bar)
/// and `M_pre − need`, with the fraction, the verdict and the pool in tokens.
struct Bar {
    label: String,
    weights: f64,
    static_top: f64,
    top: f64,
    boundary: f64,
    verdict: Verdict,
    tokens: u64,
}

impl Bar {
    fn new(f: f64, m: &SglangMemory) -> Bar {
        let top = m.inputs.memory_before_weights_gib.max(0.0);
        Bar {
            label: fraction_label(f),
            weights: m.inputs.weight_gib_per_gpu.max(0.0),
            static_top: m.static_gib.clamp(0.0, top),
            top,
            boundary: (top - m.need_gib).clamp(0.0, top),
            verdict: m.verdict,
            tokens: m.max_total_num_tokens,
        }
    }
}

/// A fraction with two or three decimals: `0.80`, `0.855`.
fn fraction_label(f: f64) -> String {
    let s = format!("{f:.3}");
    match s.strip_suffix('0') {
        Some(two) if two.contains('.') => two.to_string(),
        _ => s,
    }
}

/// A fraction floored to three decimals, so that a fraction shown as a bound is on the right
/// side of it (an out-of-memory boundary at 0.8998 is shown as 0.899, not 0.900).
fn floor3(f: f64) -> String {
    format!("{:.3}", (f * 1000.0 + 1e-9).floor() / 1000.0)
}

const WEIGHTS: RGBColor = RGBColor(196, 196, 196);

/// The pool: `BLUE` at 70 % over white; above the OOM line (memory the slack needs), `PURPLE`
/// at 85 %.
const POOL: RGBColor = RGBColor(77, 156, 201);
const POOL_OVER: RGBColor = RGBColor(145, 89, 174);

fn slack(v: Verdict) -> RGBColor {
    match v {
        Verdict::Safe => tint(GREEN, 0.5),
        Verdict::Tight => tint(ORANGE, 0.8),
        Verdict::Oom => tint(RED, 0.75),
    }
}

impl MemoryFigure<'_> {
    /// The first row's derivation, if every row has the same `M_pre`, weights and need (then
    /// the texts state them).
    fn same(&self) -> Option<&SglangMemory> {
        let (_, first) = self.0.first()?;
        let key = |m: &SglangMemory| {
            let i = &m.inputs;
            [
                i.memory_before_weights_gib,
                i.weight_gib_per_gpu,
                m.need_gib,
            ]
        };
        let close = |a: [f64; 3]| a.iter().zip(key(first)).all(|(a, b)| (a - b).abs() < 1e-9);
        self.0.iter().all(|(_, m)| close(key(m))).then_some(first)
    }

    fn subtitle(&self) -> String {
        let Some(m) = self.same() else {
            return match self.0.len() {
                0 => "No settings to show.".to_string(),
                _ => "Per GPU, each bar is M_pre (free before the weights load) = W + KV pool \
                      + slack; the black line marks where the slack would be exactly what it \
                      must hold."
                    .to_string(),
            };
        };
        let source = match &m.inputs.need {
            SlackNeed::Observed {
                free_gib: free,
                at_fraction: f,
            } => {
                format!("{free:.2} GiB seen free at f = {}", fraction_label(*f))
            }
            SlackNeed::Derived(_) => "derived from the model and settings".to_string(),
            SlackNeed::Heuristic(_) => "SGLang's reservation estimate".to_string(),
        };
        let (free, need) = (m.inputs.memory_before_weights_gib, m.need_gib);
        let oom = floor3(m.oom_above_fraction);
        let safe = floor3(m.largest_safe_fraction);
        format!(
            "Per GPU: M_pre = {free:.2} GiB free before the weights load. The slack must hold \
             {need:.2} GiB ({source}): out of memory above f = {oom}, safe up to f = {safe}."
        )
    }

    fn legend(&self, bars: &[Bar]) -> Legend {
        let same = self.same();
        let patch = |c: RGBColor| Swatch::default().shaded(c);
        let w = same.map_or(String::new(), |m| {
            format!(" = {:.2} GiB", m.inputs.weight_gib_per_gpu)
        });
        let pool_text = "KV pool M_pre \u{b7} f \u{2212} W (tokens above the bar)";
        let mut e = vec![Entry(format!("weights W{w}"), patch(WEIGHTS))];
        e.push(Entry(pool_text.into(), patch(POOL)));
        let over = |b: &Bar| b.static_top > b.boundary.max(b.weights);
        if bars.iter().any(over) {
            e.push(Entry("pool above the OOM line".into(), patch(POOL_OVER)));
        }
        for (v, label) in [
            (Verdict::Safe, "slack (1 \u{2212} f) \u{b7} M_pre: safe"),
            (Verdict::Tight, "slack: tight (< 10 % to spare)"),
            (Verdict::Oom, "slack: would run out of memory"),
        ] {
            if bars.iter().any(|b| b.verdict == v) {
                e.push(Entry(label.into(), patch(slack(v))));
            }
        }
        let need = same.map_or("what it must hold".into(), |m| {
            format!("need = {:.2} GiB", m.need_gib)
        });
        let line = format!("OOM line: slack = {need}");
        e.push(Entry(line, Swatch::line(DARK, 3)));
        Legend::new(e)
    }
}

impl Figure for MemoryFigure<'_> {
    const NAME: &'static str = "memory";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Drawn {
        let body = heading(root, MEMORY_TITLE, &self.subtitle())?;
        let bars: Vec<Bar> = self.0.iter().map(|(f, m)| Bar::new(*f, m)).collect();
        let n = bars.len().max(1);
        let mut widest = 0;
        for b in &bars {
            widest = widest.max(text_width(&body, &b.label, TEXT_PX)?);
        }
        let slot_px = (body.dim_in_pixel().0 as i32 - 120) / n as i32;
        let names = Labels::Names(bars.iter().map(|b| b.label.clone()).collect());
        let ticks = (slot_px * n as i32 / (widest + 14)).max(1) as usize;
        let x = Axis::linear(-0.5, n as f64 - 0.5, ticks).with(names);
        // Bars at most 90 px wide, with room above them for their labels.
        let half = 0.32f64.min(45.0 / f64::from(slot_px.max(1)));
        let top = bars.iter().map(|b| b.top).fold(0.0, f64::max);
        let top = if top > 0.0 { top } else { 1.0 };
        let outline = |i: usize| {
            let (a, c, t) = (i as f64 - half, i as f64 + half, 1.06 * top);
            vec![(a, 0.0), (a, t), (c, t), (c, 0.0)]
        };
        let avoid = (0..bars.len()).map(outline).collect();
        let legend = self.legend(&bars).avoiding(avoid, &TOP_FIRST, 1.8);
        let y = Axis::linear(0.0, top * 1.1, 10);
        let (x_desc, y_desc) = (Some("mem_fraction_static, f"), "memory per GPU (GiB)");
        let (mut chart, at) = legend.panel(&body, &x, y, x_desc, y_desc, raster)?;
        let above = (FONT, TEXT_PX).into_font().color(&DARK);
        let above = above.pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, b) in bars.iter().enumerate() {
            let (a, c) = (i as f64 - half, i as f64 + half);
            let pool_top = b.static_top.max(b.weights);
            let segments = [
                (0.0, b.weights.min(b.top), WEIGHTS),
                (b.weights, pool_top, POOL),
                (b.boundary.max(b.weights), pool_top, POOL_OVER),
                (b.static_top, b.top, slack(b.verdict)),
            ];
            let boxes = segments.into_iter().filter(|s| s.1 > s.0);
            let boxes = boxes.map(|(lo, hi, f)| Rectangle::new([(a, lo), (c, hi)], f.filled()));
            chart.draw_series(boxes)?;
            chart.draw_series([Rectangle::new([(a, 0.0), (c, b.top)], DARK.stroke_width(1))])?;
            let oom = [(a - 0.06, b.boundary), (c + 0.06, b.boundary)];
            chart.draw_series(LineSeries::new(oom, DARK.stroke_width(3)))?;
            // The pool in tokens: with separators if that fits over the bar, else in thousands.
            let mut text = thousands(b.tokens);
            if text_width(&body, &text, TEXT_PX)? > slot_px - 4 {
                text = format!("{}k", (b.tokens as f64 / 1000.0).round());
            }
            if text_width(&body, &text, TEXT_PX)? <= slot_px - 2 {
                let text = Text::new(text, (0, -5), above.clone());
                chart.draw_series([EmptyElement::at((i as f64, b.top)) + text])?;
            }
        }
        legend.draw(&mut chart, at, raster)
    }
}
