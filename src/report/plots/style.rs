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
