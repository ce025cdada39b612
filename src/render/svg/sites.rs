//! Top call sites: per site, the live bytes it holds and the free bytes it
//! strands (free memory that cannot be returned or reused because the site's
//! blocks pin the segment). Bars in the order given: the caller ranks.

use super::*;
use crate::core::units::fmt_binary;

const CHART: &str = "top call sites";

#[derive(Debug, Clone, PartialEq)]
pub struct SiteBar {
    pub label: String,
    pub live: u64,
    pub stranded: u64,
}

/// Call sites in the order drawn.
pub type SitesChart<'a> = Chart<'a, SiteBar>;

const BARS: BarLayout = BarLayout {
    row: 40,
    label_area: 340,
};

pub fn sites_svg(c: &SitesChart) -> Result<Svg, ChartError> {
    let n = c.items.len().max(1);
    let height = BARS.height(n);
    let top = c
        .items
        .iter()
        .map(|s| s.live.max(s.stranded))
        .max()
        .unwrap_or(0)
        .max(1);
    let unit = byte_unit(top);
    // Room on the right for the value labels of the longest bar.
    let xmax = top as f64 / unit.div * 1.28;
    let legend = vec![
        LegendEntry::new("live bytes held by the site", ALLOCATED, Swatch::Fill),
        LegendEntry::new(
            "free bytes stranded in segments the site pins",
            STRANDED,
            Swatch::Fill,
        ),
    ];
    let max_chars = label_chars(BARS.label_area);
    let e = err(CHART);

    panel(CHART, c.width, height, &legend, |upper| {
        let mut chart = bar_rows(upper, c.title, BARS.label_area, xmax, n, unit.name, CHART)?;
        let (px, _) = chart.plotting_area().get_pixel_range();
        for (i, s) in c.items.iter().enumerate() {
            // Row i from the top.
            let y1 = n as f64 - i as f64;
            let mid = y1 - 0.5;
            for (v, color, a, b) in [
                (s.live, ALLOCATED, y1 - 0.12, mid),
                (s.stranded, STRANDED, mid, y1 - 0.88),
            ] {
                let w = v as f64 / unit.div;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, a), (w, b)],
                        color.filled(),
                    )))
                    .map_err(|x| e(&x))?;
                let (bx, by) = chart.backend_coord(&(w, (a + b) / 2.0));
                bar_text(upper, fmt_binary(v), (bx + 5, by), HPos::Left, &TEXT, CHART)?;
            }
            let (_, ly) = chart.backend_coord(&(0.0, mid));
            let label = ellipsize(&s.label, max_chars);
            bar_text(upper, label, (px.start - 10, ly), HPos::Right, &TEXT, CHART)?;
        }
        if c.items.is_empty() {
            let plot = chart.plotting_area().get_pixel_range();
            let note = "no live allocations with a recorded call site";
            centered_note(upper, &plot, note, CHART)?;
        }
        Ok(())
    })
}
