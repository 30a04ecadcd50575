//! The memory figure: SGLang's split of each GPU's memory for a range of
//! `mem_fraction_static` values.
//!
//! One stacked bar per fraction `f`, in GiB per GPU: the weights `W` from 0, the KV pool
//! `M_pre · f − W` above them, and the slack `(1 − f) · M_pre` on top, so every bar is `M_pre`
//! tall (the memory free before the weights load). The slack is coloured by the memory model's
//! verdict (green safe, orange tight, red would run out of memory). A black line across each
//! bar sits at `M_pre − need`: where the top of the pool would leave exactly the slack the
//! server needs; a pool reaching above it takes memory the slack needs, and that part of the
//! pool is hatched. The KV pool in tokens is written above each bar.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::memory::{SglangMemory, SlackNeed, Verdict};

use super::axis::{thousands, Ticked};
use super::legend::{draw_legend, Entry, Swatch};
use super::style::{heading, plot_px, BLUE, DARK, FONT, GREEN, ORANGE, RED, TICK_PX};
use super::{fit, line, panel, plan_legend, render, Chart, DrawFailure, Figure, Format, PlotError};

/// The title of the [`memory_figure`].
pub const MEMORY_TITLE: &str = "GPU memory by mem_fraction_static: weights, KV pool and slack";

/// For each `(mem_fraction_static, derivation)` of `rows`, in their order, a stacked bar of
/// one GPU's memory: weights, KV pool and slack, in GiB, with the height at which the slack
/// would be exactly what it must hold (the out-of-memory boundary), the slack coloured by the
/// verdict, and the KV pool in tokens above the bar.
pub fn memory_figure(rows: &[(f64, SglangMemory)], fmt: Format) -> Result<Vec<u8>, PlotError> {
    render(&MemoryFigure { rows }, fmt)
}

struct MemoryFigure<'a> {
    rows: &'a [(f64, SglangMemory)],
}

/// One bar, GiB per GPU.
struct Bar {
    label: String,
    /// `W`.
    weights: f64,
    /// `M_pre · f`: the top of the pool.
    static_top: f64,
    /// `M_pre`: the top of the bar.
    top: f64,
    /// `M_pre − need`: where the slack would be exactly the need.
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

/// `c` at opacity `a` over white, as an opaque colour.
fn tint(c: RGBColor, a: f64) -> RGBColor {
    let mix = |v: u8| (f64::from(v) * a + 255.0 * (1.0 - a)).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

const WEIGHTS: RGBColor = RGBColor(196, 196, 196);

fn pool_colour() -> RGBColor {
    tint(BLUE, 0.7)
}

fn slack_colour(v: Verdict) -> RGBColor {
    match v {
        Verdict::Safe => tint(GREEN, 0.5),
        Verdict::Tight => tint(ORANGE, 0.8),
        Verdict::Oom => tint(RED, 0.75),
    }
}

/// Widest bar, pixels.
const MAX_BAR_PX: f64 = 90.0;
/// Room above a bar for its token label, pixels.
const LABEL_ROOM_PX: f64 = 26.0;
/// Space between hatch lines, pixels.
const HATCH_PX: i32 = 7;

/// Whether every row has the same `M_pre` and need (then the subtitle states them).
fn same_inputs(rows: &[(f64, SglangMemory)]) -> Option<&SglangMemory> {
    let (_, first) = rows.first()?;
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
    rows.iter()
        .all(|(_, m)| {
            same(
                m.inputs.memory_before_weights_gib,
                first.inputs.memory_before_weights_gib,
            ) && same(m.need_gib, first.need_gib)
                && same(m.inputs.weight_gib_per_gpu, first.inputs.weight_gib_per_gpu)
        })
        .then_some(first)
}

impl MemoryFigure<'_> {
    fn subtitle(&self) -> String {
        match same_inputs(self.rows) {
            None if self.rows.is_empty() => "No settings to show.".to_string(),
            None => "Per GPU, each bar is M_pre (free before the weights load) = W + KV pool + \
                     slack; the black line marks where the slack would be exactly what it must \
                     hold."
                .to_string(),
            Some(m) => {
                let source = match &m.inputs.need {
                    SlackNeed::Observed {
                        free_gib,
                        at_fraction,
                    } => format!(
                        "{free_gib:.2} GiB seen free at f = {}",
                        fraction_label(*at_fraction)
                    ),
                    SlackNeed::Heuristic(_) => "SGLang's reservation estimate".to_string(),
                };
                format!(
                    "Per GPU: M_pre = {:.2} GiB free before the weights load. The slack must \
                     hold {:.2} GiB ({source}): out of memory above f = {}, safe up to f = {}.",
                    m.inputs.memory_before_weights_gib,
                    m.need_gib,
                    floor3(m.oom_above_fraction),
                    floor3(m.largest_safe_fraction)
                )
            }
        }
    }

    fn entries(&self, bars: &[Bar]) -> Vec<Entry> {
        let patch = |c: RGBColor| Swatch::Band(c.stroke_width(1), c.filled());
        let same = same_inputs(self.rows);
        let mut entries = vec![
            Entry::new(
                match same {
                    Some(m) => format!("weights W = {:.2} GiB", m.inputs.weight_gib_per_gpu),
                    None => "weights W".to_string(),
                },
                patch(WEIGHTS),
            ),
            Entry::new(
                "KV pool M_pre \u{b7} f \u{2212} W (tokens above the bar)",
                patch(pool_colour()),
            ),
        ];
        for (v, label) in [
            (Verdict::Safe, "slack (1 \u{2212} f) \u{b7} M_pre: safe"),
            (Verdict::Tight, "slack: tight (< 10 % to spare)"),
            (Verdict::Oom, "slack: would run out of memory"),
        ] {
            if bars.iter().any(|b| b.verdict == v) {
                entries.push(Entry::new(label, patch(slack_colour(v))));
            }
        }
        let need = match same {
            Some(m) => format!("OOM line: slack = need = {:.2} GiB", m.need_gib),
            None => "OOM line: slack = what it must hold".to_string(),
        };
        entries.push(Entry::new(need, Swatch::Line(DARK.stroke_width(3))));
        if bars
            .iter()
            .any(|b| b.static_top > b.boundary.max(b.weights))
        {
            entries.push(Entry::new(
                "hatched: pool above the OOM line",
                Swatch::Band(RED.stroke_width(2), pool_colour().filled()),
            ));
        }
        entries
    }
}

impl Figure for MemoryFigure<'_> {
    const NAME: &'static str = "memory";

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        raster: bool,
    ) -> Result<(), DrawFailure> {
        let body = heading(root, MEMORY_TITLE, &self.subtitle())?;
        let bars: Vec<Bar> = self.rows.iter().map(|(f, m)| Bar::new(*f, m)).collect();
        let n = bars.len().max(1);
        let (lo, hi) = (-0.5, n as f64 - 0.5);
        let (pw, ph) = plot_px(body.dim_in_pixel(), true);
        let x_per_px = (hi - lo) / f64::from(pw);
        let half = (0.32f64).min(MAX_BAR_PX / 2.0 * x_per_px);

        // The y axis leaves room for the labels above the bars, and for the legend.
        let max_top = bars.iter().map(|b| b.top).fold(0.0, f64::max);
        let max_top = if max_top > 0.0 { max_top } else { 1.0 };
        let y_hi = max_top / (1.0 - LABEL_ROOM_PX / f64::from(ph)).max(0.5);
        let label_top = max_top + LABEL_ROOM_PX * y_hi / f64::from(ph);
        let frac = |x: f64| (x - lo) / (hi - lo);
        let mut data: Vec<Vec<(f64, f64)>> = Vec::new();
        for (i, b) in bars.iter().enumerate() {
            let (a, c) = (frac(i as f64 - half), frac(i as f64 + half));
            data.push(vec![(a, 0.0), (a, b.top), (c, b.top), (c, 0.0)]);
            data.push(vec![(a, label_top), (c, label_top)]);
        }
        let entries = self.entries(&bars);
        let place = plan_legend(&body, true, &entries, &data, y_hi, fit(raster, 1.8, true))?;

        let font = TextStyle::from((FONT, TICK_PX).into_font());
        let mut widest = 0;
        for b in &bars {
            widest = widest.max(body.estimate_text_size(&b.label, &font)?.0 as i32);
        }
        let max_ticks = (pw / (widest + 14).max(1)).max(1) as usize;
        let x = Ticked::linear(lo, hi, max_ticks.min(n));
        let x_label = |v: f64| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            bars.get(i as usize)
                .map_or(String::new(), |b| b.label.clone())
        };
        let mut chart = panel(
            &body,
            x,
            &x_label,
            Some("mem_fraction_static, f"),
            Ticked::linear(0.0, place.y_hi, 10),
            "memory per GPU (GiB)",
        )?;

        for (i, b) in bars.iter().enumerate() {
            let (a, c) = (i as f64 - half, i as f64 + half);
            let pool_top = b.static_top.max(b.weights);
            let segments = [
                (0.0, b.weights.min(b.top), WEIGHTS),
                (b.weights, pool_top, pool_colour()),
                (b.static_top, b.top, slack_colour(b.verdict)),
            ];
            for (y0, y1, colour) in segments {
                if y1 > y0 {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(a, y0), (c, y1)],
                        colour.filled(),
                    )))?;
                }
            }
            let over = b.boundary.max(b.weights);
            if pool_top > over {
                hatch(&mut chart, (a, over), (c, pool_top))?;
            }
            chart.draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (c, b.top)],
                DARK.stroke_width(1),
            )))?;
            let ext = 6.0 * x_per_px;
            line(
                &mut chart,
                &[(a - ext, b.boundary), (c + ext, b.boundary)],
                DARK,
                3,
                raster,
            )?;
        }
        token_labels(&mut chart, &bars, pw / n as i32 - 4)?;
        draw_legend(&chart.plotting_area().strip_coord_spec(), &entries, &place)?;
        Ok(())
    }
}

/// Diagonal red lines over the data rectangle from `lo` to `hi`.
fn hatch<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    lo: (f64, f64),
    hi: (f64, f64),
) -> Result<(), DrawFailure> {
    let area = chart.plotting_area();
    let (bx, by) = area.get_base_pixel();
    let (x0, y1) = chart.backend_coord(&lo);
    let (x1, y0) = chart.backend_coord(&hi);
    let (x0, x1, y0, y1) = (x0 - bx, x1 - bx, y0 - by, y1 - by);
    let plot = area.strip_coord_spec();
    let style = RED.stroke_width(2);
    // Lines x + y = s, clipped to the rectangle.
    let mut s = x0 + y0 + HATCH_PX / 2;
    while s < x1 + y1 {
        let (a, b) = ((s - y1).max(x0), (s - y0).min(x1));
        if a < b {
            plot.draw(&PathElement::new(vec![(a, s - a), (b, s - b)], style))?;
        }
        s += HATCH_PX;
    }
    Ok(())
}

/// The KV pool in tokens above each bar: with thousands separators if that fits in `slot_px`,
/// else in thousands (`116k`), else not at all.
fn token_labels<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    bars: &[Bar],
    slot_px: i32,
) -> Result<(), DrawFailure> {
    let area = chart.plotting_area();
    let (bx, by) = area.get_base_pixel();
    let plot = area.strip_coord_spec();
    let style = (FONT, TICK_PX)
        .into_font()
        .color(&DARK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let font = TextStyle::from((FONT, TICK_PX).into_font());
    for (i, b) in bars.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, b.top));
        let full = thousands(b.tokens);
        let short = format!("{}k", (b.tokens as f64 / 1000.0).round());
        let mut text = None;
        for t in [full, short] {
            if plot.estimate_text_size(&t, &font)?.0 as i32 <= slot_px {
                text = Some(t);
                break;
            }
        }
        if let Some(t) = text {
            plot.draw(&Text::new(t, (px - bx, py - by - 5), style.clone()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::sweep::tests::{has_text, png_size, scenario_file, svg_text, texts};
    use super::super::{HEIGHT_PX, WIDTH_PX};
    use super::*;
    use crate::scenario::{load, MemoryDerivation};

    /// The case study's memory derivation at each fraction, as `servesim memory --vary` makes
    /// them.
    fn case_study(fractions: &[&str]) -> Vec<(f64, SglangMemory)> {
        let src = scenario_file("case-study-b2-memory.toml");
        fractions
            .iter()
            .map(|f| {
                let sc = load(&src, &[format!("engine.mem_fraction_static={f}")]).unwrap();
                match sc
                    .memory
                    .expect("the scenario has a memory model")
                    .derivation
                {
                    MemoryDerivation::Sglang(m) => (f.parse().unwrap(), m),
                    MemoryDerivation::Vllm(_) => panic!("an SGLang scenario"),
                }
            })
            .collect()
    }

    fn range() -> Vec<String> {
        (80..=95).map(|p| format!("0.{p}")).collect()
    }

    #[test]
    fn the_memory_figure_renders_in_both_formats() {
        let fractions = range();
        let refs: Vec<&str> = fractions.iter().map(String::as_str).collect();
        let rows = case_study(&refs);
        let png = memory_figure(&rows, Format::Png).unwrap();
        assert_eq!(png_size(&png), (WIDTH_PX, HEIGHT_PX));
        assert!(png.len() > 10_000, "{} bytes", png.len());
        let svg = memory_figure(&rows, Format::Svg).unwrap();
        let s = svg_text(&svg);
        assert!(s.contains(MEMORY_TITLE));
        assert!(s.contains("memory per GPU (GiB)"));
        assert!(s.contains("mem_fraction_static, f"));
        assert!(
            s.matches("<text").count() >= 16 + 16 + 5,
            "labels and ticks"
        );
        // The case study's numbers: the pool at 0.85 and the boundary just below 0.90.
        assert!(has_text(s, "116,149"), "the tokens at 0.85");
        assert!(s.contains("(4.66 GiB seen free at f = 0.85): out of memory above f = 0.899"));
        assert!(s.contains("safe up to f = 0.889."));
        assert!(has_text(s, "slack: would run out of memory"));
        assert!(has_text(s, "slack: tight (< 10 % to spare)"));
        assert!(has_text(s, "OOM line: slack = need = 9.38 GiB"));
        assert!(has_text(s, "hatched: pool above the OOM line"));
        for f in fractions {
            assert!(has_text(s, &f), "tick {f}");
        }
        let tokens = texts(s)
            .iter()
            .filter(|t| t.contains(',') && t.chars().all(|c| c.is_ascii_digit() || c == ','))
            .count();
        assert_eq!(tokens, 16, "a token label per bar");
    }

    #[test]
    fn bars_split_the_memory_before_the_weights() {
        let rows = case_study(&["0.85", "0.95"]);
        let bars: Vec<Bar> = rows.iter().map(|(f, m)| Bar::new(*f, m)).collect();
        for b in &bars {
            assert!((b.top - 93.59).abs() < 1e-9);
            assert!(b.weights < b.static_top && b.static_top < b.top);
        }
        assert_eq!(bars[0].verdict, Verdict::Safe);
        assert!(
            bars[0].static_top < bars[0].boundary,
            "0.85 leaves the slack it needs"
        );
        assert_eq!(bars[1].verdict, Verdict::Oom);
        assert!(bars[1].static_top > bars[1].boundary, "0.95 takes from it");
    }

    #[test]
    fn one_setting_and_none_still_draw() {
        let rows = case_study(&["0.85"]);
        let svg = memory_figure(&rows, Format::Svg).unwrap();
        assert!(has_text(svg_text(&svg), "116,149"));
        assert!(!svg_text(&svg).contains("would run out of memory"));
        assert!(!svg_text(&svg).contains("hatched"));
        let svg = memory_figure(&[], Format::Svg).unwrap();
        assert!(svg_text(&svg).contains("No settings to show."));
        let png = memory_figure(&[], Format::Png).unwrap();
        assert_eq!(png_size(&png), (WIDTH_PX, HEIGHT_PX));
    }

    #[test]
    fn a_guessed_need_is_named_as_sglangs_estimate() {
        use crate::memory::HeuristicReserve;
        let rows: Vec<(f64, SglangMemory)> = case_study(&["0.85", "0.90"])
            .into_iter()
            .map(|(f, m)| {
                let mut i = m.inputs;
                i.need = SlackNeed::Heuristic(HeuristicReserve::sglang(8192, 8, true, 512));
                (f, i.derive())
            })
            .collect();
        let svg = memory_figure(&rows, Format::Svg).unwrap();
        let s = svg_text(&svg);
        assert!(s.contains("reservation estimate): out of memory above f = "));
        assert_eq!(
            svg,
            memory_figure(&rows, Format::Svg).unwrap(),
            "deterministic"
        );
    }

    #[test]
    fn fractions_are_labelled_with_two_or_three_decimals() {
        assert_eq!(fraction_label(0.8), "0.80");
        assert_eq!(fraction_label(0.85), "0.85");
        assert_eq!(fraction_label(0.855), "0.855");
        assert_eq!(fraction_label(1.0), "1.00");
    }

    /// Writes the case study's memory figure to /tmp/sweep-plots-check/ for looking at it:
    /// `cargo test --release --lib memory_figure_to_look_at -- --ignored`.
    #[test]
    #[ignore]
    fn memory_figure_to_look_at() {
        let dir = std::path::PathBuf::from("/tmp/sweep-plots-check");
        std::fs::create_dir_all(&dir).unwrap();
        let fractions = range();
        let refs: Vec<&str> = fractions.iter().map(String::as_str).collect();
        let rows = case_study(&refs);
        let few = case_study(&["0.85", "0.95"]);
        for fmt in Format::ALL {
            let ext = fmt.extension();
            let bytes = memory_figure(&rows, fmt).unwrap();
            std::fs::write(dir.join(format!("memory-b2.{ext}")), bytes).unwrap();
            let bytes = memory_figure(&few, fmt).unwrap();
            std::fs::write(dir.join(format!("memory-b2-two.{ext}")), bytes).unwrap();
        }
    }
}
