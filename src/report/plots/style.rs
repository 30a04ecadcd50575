//! The figures' look: fonts, sizes, colours, the heading and the panels' geometry.
//!
//! Text other than the title is at most 16 px: plotters' ab_glyph renderer drops each glyph's
//! whole-pixel left bearing, and at 16 px and below Noto Sans's lower-case bearings are under
//! a pixel, so letters keep their spacing (at 17 px "cl" already touches).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::DrawFailure;

/// The font every text uses: registered as the embedded Noto Sans, and a CSS font list in SVG.
pub(super) const FONT: &str = "Noto Sans, sans-serif";
/// The title.
pub(super) const TITLE_PX: u32 = 26;
/// The line under the title.
pub(super) const SUBTITLE_PX: u32 = 15;
/// Axis descriptions.
pub(super) const DESC_PX: u32 = 16;
/// Tick labels.
pub(super) const TICK_PX: u32 = 15;
/// Legend entries.
pub(super) const LEGEND_PX: u32 = 15;
/// Height of the title and subtitle band.
pub(super) const HEADING_PX: u32 = 72;
/// Width of the y-axis label area, the same in every panel so stacked panels line up.
pub(super) const Y_LABEL_AREA_PX: u32 = 84;
/// Height of the x-axis label area of a bottom panel (tick labels and the description).
pub(super) const X_LABEL_AREA_PX: u32 = 56;
/// Space right of the plots.
pub(super) const RIGHT_MARGIN_PX: u32 = 30;

// Okabe–Ito colours (distinguishable with colour-blindness), a few darkened for thin lines.
pub(super) const VERMILLION: RGBColor = RGBColor(213, 94, 0);
pub(super) const BLUE: RGBColor = RGBColor(0, 114, 178);
/// [`BLUE`] at 60 % over white, for a noisy series that should stay in the background.
pub(super) const LIGHT_BLUE: RGBColor = RGBColor(102, 170, 209);
pub(super) const GREEN: RGBColor = RGBColor(0, 140, 100);
pub(super) const ORANGE: RGBColor = RGBColor(230, 159, 0);
pub(super) const PURPLE: RGBColor = RGBColor(125, 60, 160);
pub(super) const RED: RGBColor = RGBColor(200, 40, 40);
pub(super) const GREY: RGBColor = RGBColor(105, 105, 105);
pub(super) const DARK: RGBColor = RGBColor(40, 40, 40);
pub(super) const GRID_BOLD: RGBColor = RGBColor(218, 218, 218);
pub(super) const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);
const TEXT_GREY: RGBColor = RGBColor(70, 70, 70);

/// Draw the title and a subtitle line at the top left; returns the area under them.
pub(super) fn heading<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<DB, Shift>, DrawFailure> {
    let (head, body) = root.split_vertically(HEADING_PX);
    head.draw_text(title, &(FONT, TITLE_PX).into_font().color(&BLACK), (20, 12))?;
    head.draw_text(
        subtitle,
        &(FONT, SUBTITLE_PX).into_font().color(&TEXT_GREY),
        (20, 46),
    )?;
    Ok(body)
}

/// The size in pixels of a plot drawn by `panel` in an area of `area` pixels.
pub(super) fn plot_px(area: (u32, u32), bottom: bool) -> (i32, i32) {
    let w = area.0 as i32 - PANEL_MARGIN_LEFT_PX - RIGHT_MARGIN_PX as i32 - Y_LABEL_AREA_PX as i32;
    let h = area.1 as i32
        - PANEL_MARGIN_TOP_PX
        - if bottom {
            PANEL_MARGIN_BOTTOM_PX + X_LABEL_AREA_PX as i32
        } else {
            TOP_PANEL_X_AREA_PX + TOP_PANEL_MARGIN_BOTTOM_PX
        };
    (w.max(1), h.max(1))
}

/// Left margin of a panel.
pub(super) const PANEL_MARGIN_LEFT_PX: i32 = 8;
/// Top margin of a panel.
pub(super) const PANEL_MARGIN_TOP_PX: i32 = 8;
/// Bottom margin of a bottom panel.
pub(super) const PANEL_MARGIN_BOTTOM_PX: i32 = 6;
/// Bottom margin of a panel above another: a gap between their tick labels.
pub(super) const TOP_PANEL_MARGIN_BOTTOM_PX: i32 = 12;
/// The x label area of a panel above another (tick marks only).
pub(super) const TOP_PANEL_X_AREA_PX: i32 = 4;

/// How much wider than measured text is taken to be: 1 in PNG, where the embedded font draws
/// it; 1.15 in SVG, whose viewer may substitute a wider font.
pub(super) fn text_scale(raster: bool) -> f64 {
    if raster {
        1.0
    } else {
        1.15
    }
}

/// The size of `text` at `px` pixels, widened as [`text_scale`] says.
pub(super) fn measure<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    px: u32,
    raster: bool,
) -> Result<(i32, i32), DrawFailure> {
    let font = TextStyle::from((FONT, px).into_font());
    let (w, h) = area.estimate_text_size(text, &font)?;
    Ok(((f64::from(w) * text_scale(raster)).ceil() as i32, h as i32))
}

/// `text` at legend size broken into lines at most `width` pixels wide, at spaces (a word
/// longer than that stands alone).
pub(super) fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    width: i32,
    raster: bool,
) -> Result<Vec<String>, DrawFailure> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in text.split_whitespace() {
        let candidate = if current.is_empty() {
            word.to_string()
        } else {
            format!("{current} {word}")
        };
        if measure(area, &candidate, LEGEND_PX, raster)?.0 > width && !current.is_empty() {
            lines.push(std::mem::replace(&mut current, word.to_string()));
        } else {
            current = candidate;
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    Ok(lines)
}
