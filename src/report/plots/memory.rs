//! The memory figure: SGLang's split of each GPU's memory for a range of
//! `mem_fraction_static` values.
//!
//! One stacked bar per fraction `f`, in GiB per GPU: the weights `W` from 0, the KV pool
//! `M_pre · f − W` above them, and the slack `(1 − f) · M_pre` on top, so every bar is `M_pre`
//! tall (the memory free before the weights load). The slack is coloured by the memory model's
//! verdict (green safe, orange tight, red would run out of memory). A black line across each
//! bar sits at `M_pre − need`: where the top of the pool would leave exactly the slack the
//! server needs; the part of a pool reaching above it (memory the slack needs) is drawn
//! darker. The KV pool in tokens is written above each bar.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::memory::{SglangMemory, SlackNeed, Verdict};

use super::axis::{thousands, Axis, Labels};
use super::style::{
    heading, text_width, tint, Entry, Legend, Swatch, BLUE, DARK, FONT, GREEN, ORANGE, PURPLE,
    RED, TEXT_PX, TOP_FIRST,
};
use super::{panel, render, Area, DrawFailure, Figure, Format, PlotError};

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

const WEIGHTS: RGBColor = RGBColor(196, 196, 196);

fn pool() -> RGBColor {
    tint(BLUE, 0.7)
}

/// The pool above the OOM line: memory the slack needs.
fn pool_over() -> RGBColor {
    tint(PURPLE, 0.85)
}

fn slack(v: Verdict) -> RGBColor {
    match v {
        Verdict::Safe => tint(GREEN, 0.5),
        Verdict::Tight => tint(ORANGE, 0.8),
        Verdict::Oom => tint(RED, 0.75),
    }
}

/// Whether every row has the same `M_pre`, weights and need (then the texts state them).
fn same_inputs(rows: &[(f64, SglangMemory)]) -> Option<&SglangMemory> {
    let (_, first) = rows.first()?;
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
    let i = &first.inputs;
    rows.iter()
        .all(|(_, m)| {
            same(m.inputs.memory_before_weights_gib, i.memory_before_weights_gib)
                && same(m.need_gib, first.need_gib)
                && same(m.inputs.weight_gib_per_gpu, i.weight_gib_per_gpu)
        })
        .then_some(first)
}

impl MemoryFigure<'_> {
    fn subtitle(&self) -> String {
        let Some(m) = same_inputs(self.rows) else {
            if self.rows.is_empty() {
                return "No settings to show.".to_string();
            }
            return "Per GPU, each bar is M_pre (free before the weights load) = W + KV pool + \
                    slack; the black line marks where the slack would be exactly what it must \
                    hold."
                .to_string();
        };
        let source = match &m.inputs.need {
            SlackNeed::Observed {
                free_gib,
                at_fraction,
            } => format!("{free_gib:.2} GiB seen free at f = {}", fraction_label(*at_fraction)),
            SlackNeed::Heuristic(_) => "SGLang's reservation estimate".to_string(),
        };
        format!(
            "Per GPU: M_pre = {:.2} GiB free before the weights load. The slack must hold {:.2} \
             GiB ({source}): out of memory above f = {}, safe up to f = {}.",
            m.inputs.memory_before_weights_gib,
            m.need_gib,
            floor3(m.oom_above_fraction),
            floor3(m.largest_safe_fraction)
        )
    }

    fn legend(&self, bars: &[Bar]) -> Legend {
        let same = same_inputs(self.rows);
        let weights = match same {
            Some(m) => format!("weights W = {:.2} GiB", m.inputs.weight_gib_per_gpu),
            None => "weights W".to_string(),
        };
        let mut entries = vec![
            Entry::new(weights, Swatch::Patch(WEIGHTS)),
            Entry::new(
                "KV pool M_pre \u{b7} f \u{2212} W (tokens above the bar)",
                Swatch::Patch(pool()),
            ),
        ];
        if bars.iter().any(|b| b.static_top > b.boundary.max(b.weights)) {
            entries.push(Entry::new("pool above the OOM line", Swatch::Patch(pool_over())));
        }
        for (v, label) in [
            (Verdict::Safe, "slack (1 \u{2212} f) \u{b7} M_pre: safe"),
            (Verdict::Tight, "slack: tight (< 10 % to spare)"),
            (Verdict::Oom, "slack: would run out of memory"),
        ] {
            if bars.iter().any(|b| b.verdict == v) {
                entries.push(Entry::new(label, Swatch::Patch(slack(v))));
            }
        }
        let need = match same {
            Some(m) => format!("OOM line: slack = need = {:.2} GiB", m.need_gib),
            None => "OOM line: slack = what it must hold".to_string(),
        };
        entries.push(Entry::new(need, Swatch::Line(DARK, 3)));
        Legend::new(entries)
    }
}

impl Figure for MemoryFigure<'_> {
    const NAME: &'static str = "memory";

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>, raster: bool) -> Result<(), DrawFailure> {
        let body = heading(root, MEMORY_TITLE, &self.subtitle())?;
        let bars: Vec<Bar> = self.rows.iter().map(|(f, m)| Bar::new(*f, m)).collect();
        let n = bars.len().max(1);
        let names = bars.iter().map(|b| b.label.clone()).collect();
        let mut widest = 0;
        for b in &bars {
            widest = widest.max(text_width(&body, &b.label, TEXT_PX)?);
        }
        let plot_w = body.dim_in_pixel().0 as i32 - 120;
        let slot_px = plot_w / n as i32;
        let x = Axis::linear(-0.5, n as f64 - 0.5, (plot_w / (widest + 14)).max(1) as usize)
            .with(Labels::Names(names));
        // Bars at most 90 px wide; room above them for their labels.
        let half = 0.32f64.min(45.0 / f64::from(slot_px.max(1)));
        let max_top = bars.iter().map(|b| b.top).fold(0.0, f64::max);
        let max_top = if max_top > 0.0 { max_top } else { 1.0 };
        let label_top = max_top * 1.06;
        let avoid: Vec<Vec<(f64, f64)>> = (0..bars.len())
            .map(|i| {
                let (a, c) = (i as f64 - half, i as f64 + half);
                vec![(a, 0.0), (a, label_top), (c, label_top), (c, 0.0)]
            })
            .collect();
        let legend = self.legend(&bars);
        let y = Axis::linear(0.0, max_top * 1.1, 10);
        let (y, at) = legend.place(&body, &x, y, true, &avoid, &TOP_FIRST, 1.8, raster)?;
        let mut chart = panel(&body, &x, &y, Some("mem_fraction_static, f"), "memory per GPU (GiB)")?;
        let label_style = (FONT, TEXT_PX).into_font().color(&DARK).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, b) in bars.iter().enumerate() {
            let (a, c) = (i as f64 - half, i as f64 + half);
            let pool_top = b.static_top.max(b.weights);
            let over = b.boundary.max(b.weights);
            let segments = [
                (0.0, b.weights.min(b.top), WEIGHTS),
                (b.weights, pool_top, pool()),
                (over, pool_top, pool_over()),
                (b.static_top, b.top, slack(b.verdict)),
            ];
            let boxes = segments.into_iter().filter(|s| s.1 > s.0);
            chart.draw_series(boxes.map(|(y0, y1, c2)| Rectangle::new([(a, y0), (c, y1)], c2.filled())))?;
            chart.draw_series([Rectangle::new([(a, 0.0), (c, b.top)], DARK.stroke_width(1))])?;
            let ext = 0.06;
            let oom = [(a - ext, b.boundary), (c + ext, b.boundary)];
            chart.draw_series(LineSeries::new(oom, DARK.stroke_width(3)))?;
            // The pool in tokens: with separators if that fits over the bar, else in thousands.
            let full = thousands(b.tokens);
            let text = if text_width(&body, &full, TEXT_PX)? <= slot_px - 4 {
                full
            } else {
                format!("{}k", (b.tokens as f64 / 1000.0).round())
            };
            if text_width(&body, &text, TEXT_PX)? <= slot_px - 2 {
                let t = Text::new(text, (0, -5), label_style.clone());
                chart.draw_series([EmptyElement::at((i as f64, b.top)) + t])?;
            }
        }
        legend.draw(&mut chart, at, raster)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::check::{has_text, pixels, png_size, scenario_file, svg_text, texts};
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
                match sc.memory.expect("the scenario has a memory model").derivation {
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
        assert!(pixels(&png, pool()) > 10_000, "the pools are drawn");
        assert!(pixels(&png, pool_over()) > 500, "pools above the OOM line are marked");
        assert!(pixels(&png, slack(Verdict::Oom)) > 2_000, "slack that would run out");
        let svg = memory_figure(&rows, Format::Svg).unwrap();
        let s = svg_text(&svg);
        assert!(s.contains(MEMORY_TITLE));
        assert!(s.contains("memory per GPU (GiB)"));
        assert!(s.contains("mem_fraction_static, f"));
        // The case study's numbers: the pool at 0.85 and the boundary just below 0.90.
        assert!(has_text(s, "116,149"), "the tokens at 0.85");
        assert!(s.contains("(4.66 GiB seen free at f = 0.85): out of memory above f = 0.899"));
        assert!(s.contains("safe up to f = 0.889."));
        for label in [
            "slack: would run out of memory",
            "slack: tight (< 10 % to spare)",
            "OOM line: slack = need = 9.38 GiB",
            "pool above the OOM line",
        ] {
            assert!(has_text(s, label), "legend {label:?}");
        }
        let ticks = fractions.iter().filter(|f| has_text(s, f)).count();
        assert!(ticks >= 4, "fractions label the axis: {ticks}");
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
        assert!(bars[0].static_top < bars[0].boundary, "0.85 leaves the slack it needs");
        assert_eq!(bars[1].verdict, Verdict::Oom);
        assert!(bars[1].static_top > bars[1].boundary, "0.95 takes from it");
    }

    #[test]
    fn one_setting_and_none_still_draw() {
        let rows = case_study(&["0.85"]);
        let svg = memory_figure(&rows, Format::Svg).unwrap();
        assert!(has_text(svg_text(&svg), "116,149"));
        assert!(!svg_text(&svg).contains("would run out of memory"));
        assert!(!svg_text(&svg).contains("pool above the OOM line"));
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
        assert_eq!(svg, memory_figure(&rows, Format::Svg).unwrap(), "deterministic");
    }

    #[test]
    fn fractions_are_labelled_with_two_or_three_decimals() {
        assert_eq!(fraction_label(0.8), "0.80");
        assert_eq!(fraction_label(0.855), "0.855");
        assert_eq!(fraction_label(1.0), "1.00");
        assert_eq!(floor3(0.89987), "0.899");
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
        let cases = [("memory-b2", case_study(&refs)), ("memory-b2-two", case_study(&["0.85", "0.95"]))];
        for (name, rows) in cases {
            for fmt in Format::ALL {
                let bytes = memory_figure(&rows, fmt).unwrap();
                std::fs::write(dir.join(format!("{name}.{}", fmt.extension())), bytes).unwrap();
            }
        }
    }
}
