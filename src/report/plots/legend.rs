//! Legends: their entries, where they go (a place that hides no data, raising the top of the
//! y axis if need be), and drawing them.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::style::{FONT, LEGEND_PX};
use super::DrawFailure;

/// How a legend entry's sample is drawn.
#[derive(Clone, Copy, Debug)]
pub(super) enum Swatch {
    /// A solid line.
    Line(ShapeStyle),
    /// A dashed line.
    Dashed(ShapeStyle),
    /// A line over a shaded band (an estimate with its interval, or a filled area).
    Band(ShapeStyle, ShapeStyle),
}

/// One legend entry.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    label: String,
    swatch: Swatch,
}

impl Entry {
    pub(super) fn new(label: impl Into<String>, swatch: Swatch) -> Entry {
        Entry {
            label: label.into(),
            swatch,
        }
    }
}

const SWATCH_W: i32 = 30;
const PAD: i32 = 10;
const GAP: i32 = 8;
/// Space between legend columns.
const COLUMN_GAP: i32 = 24;
const ROW_H: i32 = LEGEND_PX as i32 + 9;
/// Distance of a legend from the plot's edges.
const INSET: i32 = 10;
/// Data closer than this to a legend counts as hidden by it.
const CLEARANCE: i32 = 8;
/// Size of the cells in which data is located.
const CELL: i32 = 4;
/// Vertical step of the positions tried.
const SLOT_STEP: i32 = 6;
/// Horizontal positions tried between the two edges.
const INNER_SLOTS: i32 = 6;
/// Most columns tried.
const MAX_COLUMNS: usize = 4;
const BORDER: RGBColor = RGBColor(170, 170, 170);

/// A legend's arrangement: its entries in `cols` columns, row by row.
#[derive(Clone, Debug)]
struct Layout {
    cols: usize,
    col_w: Vec<i32>,
    w: i32,
    h: i32,
}

/// Where a panel's legend goes, and the top of the panel's y axis that leaves it room.
#[derive(Clone, Debug)]
pub(super) struct Placement {
    /// The top of the y axis (at least the one asked for).
    pub(super) y_hi: f64,
    x0: i32,
    y0: i32,
    layout: Layout,
}

/// The cells of a plot that data lines pass through, with 2-D prefix sums to count the cells
/// under a box at once.
struct Coverage {
    cols: usize,
    rows: usize,
    sums: Vec<u32>,
}

impl Coverage {
    /// `lines` are polylines of (fraction of the x axis, value) on a y axis from 0 to `y_hi`.
    fn new(plot: (i32, i32), lines: &[Vec<(f64, f64)>], y_hi: f64) -> Coverage {
        let cols = (plot.0 / CELL + 1) as usize;
        let rows = (plot.1 / CELL + 1) as usize;
        let mut grid = vec![false; cols * rows];
        let to_cell = |(f, v): (f64, f64)| {
            (
                f * f64::from(plot.0) / f64::from(CELL),
                (1.0 - v / y_hi) * f64::from(plot.1) / f64::from(CELL),
            )
        };
        let mut mark = |(cx, cy): (f64, f64)| {
            if cx >= 0.0 && cy >= 0.0 && (cx as usize) < cols && (cy as usize) < rows {
                grid[cy as usize * cols + cx as usize] = true;
            }
        };
        for line in lines {
            let mut prev: Option<(f64, f64)> = None;
            for &p in line {
                if !(p.0.is_finite() && p.1.is_finite()) {
                    continue;
                }
                let c = to_cell(p);
                if let Some(q) = prev {
                    let steps = (c.0 - q.0).abs().max((c.1 - q.1).abs()).ceil();
                    let steps = steps.min((cols + rows) as f64) as u32;
                    for k in 1..steps {
                        let a = f64::from(k) / f64::from(steps);
                        mark((q.0 + (c.0 - q.0) * a, q.1 + (c.1 - q.1) * a));
                    }
                }
                mark(c);
                prev = Some(c);
            }
        }
        let mut sums = vec![0u32; (cols + 1) * (rows + 1)];
        for r in 0..rows {
            for c in 0..cols {
                sums[(r + 1) * (cols + 1) + c + 1] = u32::from(grid[r * cols + c])
                    + sums[r * (cols + 1) + c + 1]
                    + sums[(r + 1) * (cols + 1) + c]
                    - sums[r * (cols + 1) + c];
            }
        }
        Coverage { cols, rows, sums }
    }

    /// Covered cells meeting the pixel box from `(x0, y0)` to `(x1, y1)`.
    fn count(&self, x0: i32, y0: i32, x1: i32, y1: i32) -> u32 {
        let cell = |v: i32, n: usize| (v.max(0) / CELL).min(n as i32) as usize;
        let (c0, c1) = (cell(x0, self.cols), cell(x1, self.cols - 1) + 1);
        let (r0, r1) = (cell(y0, self.rows), cell(y1, self.rows - 1) + 1);
        if c0 >= c1 || r0 >= r1 {
            return 0;
        }
        let w = self.cols + 1;
        self.sums[r1 * w + c1] + self.sums[r0 * w + c0]
            - self.sums[r0 * w + c1]
            - self.sums[r1 * w + c0]
    }
}

/// How a legend may be fitted into its panel.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fit {
    /// Most the top of the y axis may be raised, as a factor.
    pub(super) max_stretch: f64,
    /// Try positions from the top down (else from the bottom up).
    pub(super) prefer_top: bool,
    /// Text widths are multiplied by this: above 1 where the viewer may draw the text in a
    /// wider font than the one measured (SVG).
    pub(super) text_scale: f64,
}

/// Find a place for a legend of `entries` in a plot of `plot` pixels whose y axis runs from 0
/// to `y_hi`, hiding none of the `lines` (polylines of (fraction of the x axis, value)) if it
/// can.
///
/// Tries one to four columns (fewest first), and positions along the left and right edges and
/// between them, by height as `fit` prefers. If every position hides data, raises the top of
/// the y axis — by at most `fit.max_stretch` times — so the legend fits above the data in a
/// top corner; failing that, takes the position hiding least.
pub(super) fn place_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    plot: (i32, i32),
    entries: &[Entry],
    lines: &[Vec<(f64, f64)>],
    y_hi: f64,
    fit: Fit,
) -> Result<Placement, DrawFailure> {
    let font = TextStyle::from((FONT, LEGEND_PX).into_font());
    let mut widths = Vec::with_capacity(entries.len());
    for e in entries {
        let text = f64::from(area.estimate_text_size(&e.label, &font)?.0) * fit.text_scale;
        widths.push(text.ceil() as i32 + SWATCH_W + GAP);
    }
    let (pw, ph) = plot;
    let layouts: Vec<Layout> = (1..=entries.len().clamp(1, MAX_COLUMNS))
        .map(|cols| {
            let col_w: Vec<i32> = (0..cols)
                .map(|c| {
                    let column = widths.iter().skip(c).step_by(cols);
                    column.copied().max().unwrap_or(0)
                })
                .collect();
            let rows = entries.len().div_ceil(cols) as i32;
            let w = 2 * PAD + col_w.iter().sum::<i32>() + COLUMN_GAP * (cols as i32 - 1);
            let h = 2 * PAD + ROW_H * rows - 4;
            Layout { cols, col_w, w, h }
        })
        .filter(|l| l.cols == 1 || l.w + 2 * INSET <= pw)
        .collect();
    let right = |l: &Layout| (pw - INSET - l.w).max(INSET);

    // A free position without raising the axis.
    let coverage = Coverage::new(plot, lines, y_hi);
    let mut least: Option<(u32, Placement)> = None;
    for l in &layouts {
        let lowest = (ph - INSET - l.h).max(INSET);
        let mut ys: Vec<i32> = (0..)
            .map(|k| INSET + k * SLOT_STEP)
            .take_while(|&y| y < lowest)
            .chain(std::iter::once(lowest))
            .collect();
        if !fit.prefer_top {
            ys.reverse();
        }
        let (xr, xl) = (right(l), INSET);
        let xs: Vec<i32> = [xr, xl]
            .into_iter()
            .chain((1..INNER_SLOTS).map(|k| xr - (xr - xl) * k / INNER_SLOTS))
            .collect();
        for &y0 in &ys {
            for &x0 in &xs {
                let hidden = coverage.count(
                    x0 - CLEARANCE,
                    y0 - CLEARANCE,
                    x0 + l.w + CLEARANCE,
                    y0 + l.h + CLEARANCE,
                );
                let place = Placement {
                    y_hi,
                    x0,
                    y0,
                    layout: l.clone(),
                };
                if hidden == 0 {
                    return Ok(place);
                }
                if least.as_ref().is_none_or(|(m, _)| hidden < *m) {
                    least = Some((hidden, place));
                }
            }
        }
    }

    // Raise the top of the axis until a top corner is free: the least raise, but fewer columns
    // (an easier read) when they need at most 10 % more.
    let mut raised: Vec<Placement> = Vec::new();
    for l in &layouts {
        let free = 1.0 - f64::from(INSET + l.h + CLEARANCE + 2) / f64::from(ph);
        if free <= 0.0 {
            continue;
        }
        for x0 in [right(l), INSET] {
            let xa = f64::from(x0 - CLEARANCE) / f64::from(pw);
            let xb = f64::from(x0 + l.w + CLEARANCE) / f64::from(pw);
            let top = lines
                .iter()
                .map(|line| highest_between(line, xa, xb))
                .fold(0.0, f64::max);
            let need = (top / free).max(y_hi);
            if need <= y_hi * fit.max_stretch {
                raised.push(Placement {
                    y_hi: need,
                    x0,
                    y0: INSET,
                    layout: l.clone(),
                });
            }
        }
    }
    let lowest_raise = raised.iter().map(|p| p.y_hi).fold(f64::INFINITY, f64::min);
    let chosen = raised
        .into_iter()
        .filter(|p| p.y_hi <= lowest_raise * 1.1)
        .min_by(|a, b| {
            let by_cols = a.layout.cols.cmp(&b.layout.cols);
            by_cols.then(a.y_hi.total_cmp(&b.y_hi))
        });
    Ok(chosen.unwrap_or_else(|| {
        least
            .expect("invariant: a legend has at least one layout and position")
            .1
    }))
}

/// The highest value of a polyline over the x fractions `[xa, xb]`.
fn highest_between(line: &[(f64, f64)], xa: f64, xb: f64) -> f64 {
    let mut top = 0.0f64;
    for w in line.windows(2) {
        let ((f0, v0), (f1, v1)) = (w[0], w[1]);
        let (lo, hi) = (f0.min(f1), f0.max(f1));
        if hi < xa || lo > xb {
            continue;
        }
        // The segment clipped to the range: its highest point is at a clipped end.
        let at = |f: f64| {
            if f1 == f0 {
                v0.max(v1)
            } else {
                v0 + (v1 - v0) * (f - f0) / (f1 - f0)
            }
        };
        top = top.max(at(lo.max(xa))).max(at(hi.min(xb)));
    }
    if let [(f, v)] = line {
        if *f >= xa && *f <= xb {
            top = top.max(*v);
        }
    }
    top
}

/// Draw the legend of `entries` on `plot` (a plotting area, in pixels) where `place` says.
pub(super) fn draw_legend<DB: DrawingBackend>(
    plot: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    place: &Placement,
) -> Result<(), DrawFailure> {
    if entries.is_empty() {
        return Ok(());
    }
    let l = &place.layout;
    let (x0, y0) = (place.x0, place.y0);
    let corners = [(x0, y0), (x0 + l.w, y0 + l.h)];
    plot.draw(&Rectangle::new(corners, WHITE.mix(0.92).filled()))?;
    plot.draw(&Rectangle::new(corners, BORDER.stroke_width(1)))?;
    let text_style = (FONT, LEGEND_PX)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in entries.iter().enumerate() {
        let (row, col) = ((i / l.cols) as i32, i % l.cols);
        let sx = x0 + PAD + l.col_w[..col].iter().sum::<i32>() + COLUMN_GAP * col as i32;
        let y = y0 + PAD + ROW_H * row + ROW_H / 2 - 2;
        match e.swatch {
            Swatch::Line(s) => {
                plot.draw(&PathElement::new(vec![(sx, y), (sx + SWATCH_W, y)], s))?;
            }
            Swatch::Dashed(s) => {
                for k in 0..3 {
                    let a = sx + k * 12;
                    let b = (a + 7).min(sx + SWATCH_W);
                    plot.draw(&PathElement::new(vec![(a, y), (b, y)], s))?;
                }
            }
            Swatch::Band(line, band) => {
                plot.draw(&Rectangle::new([(sx, y - 7), (sx + SWATCH_W, y + 7)], band))?;
                plot.draw(&PathElement::new(vec![(sx, y), (sx + SWATCH_W, y)], line))?;
            }
        }
        plot.draw(&Text::new(
            e.label.clone(),
            (sx + SWATCH_W + GAP, y),
            text_style.clone(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_counts_the_cells_a_line_crosses() {
        // A diagonal from the bottom left to the top right of a 100 × 100 plot.
        let c = Coverage::new((100, 100), &[vec![(0.0, 0.0), (1.0, 1.0)]], 1.0);
        assert!(c.count(0, 0, 100, 100) >= 25);
        assert_eq!(c.count(0, 0, 30, 30), 0, "the top left is free");
        assert_eq!(c.count(70, 70, 100, 100), 0, "the bottom right is free");
        assert!(c.count(45, 45, 55, 55) > 0, "the middle is crossed");
    }

    #[test]
    fn the_highest_point_over_a_range_includes_segments_crossing_it() {
        let line = [(0.0, 0.0), (1.0, 10.0)];
        assert!((highest_between(&line, 0.4, 0.6) - 6.0).abs() < 1e-12);
        assert_eq!(highest_between(&[(0.5, 3.0)], 0.4, 0.6), 3.0);
        assert_eq!(highest_between(&[(0.5, 3.0)], 0.6, 0.7), 0.0);
    }
}
