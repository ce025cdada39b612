//! Many ranks side by side: one horizontal bar per rank for peak reserved
//! memory and for fragmentation, outlier ranks in red, the median drawn as
//! a dashed line. Bars in the order given (the ranks' order).

use super::compose::stack;
use super::*;
use crate::core::units::{fmt_binary, fmt_pct};

#[derive(Debug, Clone, PartialEq)]
pub struct RankBar {
    pub label: String,
    /// `None`: not measurable for this rank (no bar, the label says so).
    pub peak_reserved: Option<u64>,
    pub end_reserved: u64,
    pub fragmentation: f64,
    pub outlier: bool,
}

/// Ranks in the order drawn.
pub type RanksChart<'a> = Chart<'a, RankBar>;

const CHART: &str = "ranks";
const BARS: BarLayout = BarLayout {
    row: 30,
    label_area: 300,
};

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

struct Bar {
    label: String,
    value: Option<f64>,
    /// A thinner second bar under the first (e.g. reserved at the end).
    second: Option<f64>,
    text: String,
    outlier: bool,
}

#[allow(clippy::too_many_arguments)]
fn bars_svg(
    title: &str,
    bars: &[Bar],
    xmax: f64,
    x_desc: &str,
    median: Option<f64>,
    legend: Vec<LegendEntry>,
    width: u32,
) -> Result<Svg, ChartError> {
    let n = bars.len().max(1);
    let height = BARS.height(n);
    let max_chars = label_chars(BARS.label_area);
    let e = err(CHART);
    panel(CHART, width, height, &legend, |upper| {
        let mut chart = bar_rows(upper, title, BARS.label_area, xmax, n, x_desc, CHART)?;
        let (px, _) = chart.plotting_area().get_pixel_range();
        // Under the bars and labels, so it never hides a figure.
        if let Some(m) = median {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(m, 0.0), (m, n as f64)],
                    MUTED.stroke_width(2),
                )))
                .map_err(|x| e(&x))?;
        }
        for (i, b) in bars.iter().enumerate() {
            let y1 = n as f64 - i as f64;
            let mid = y1 - 0.5;
            let color = if b.outlier { OOM } else { ALLOCATED };
            let end = b.value.unwrap_or(0.0);
            if let Some(v) = b.value {
                let (top, bottom) = if b.second.is_some() {
                    (y1 - 0.12, mid - 0.05)
                } else {
                    (y1 - 0.15, y1 - 0.85)
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, top), (v, bottom)],
                        color.filled(),
                    )))
                    .map_err(|x| e(&x))?;
            }
            if let Some(s) = b.second {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, mid - 0.1), (s, y1 - 0.88)],
                        RESERVED_FILL.filled(),
                    )))
                    .map_err(|x| e(&x))?;
            }
            let (bx, by) = chart.backend_coord(&(end, mid));
            bar_text(
                upper,
                b.text.clone(),
                (bx + 5, by),
                HPos::Left,
                &TEXT,
                CHART,
            )?;
            let label_color = if b.outlier { &OOM } else { &TEXT };
            let label = ellipsize(&b.label, max_chars);
            bar_text(
                upper,
                label,
                (px.start - 10, by),
                HPos::Right,
                label_color,
                CHART,
            )?;
        }
        if bars.is_empty() {
            let plot = chart.plotting_area().get_pixel_range();
            centered_note(upper, &plot, "no rank could be read as a snapshot", CHART)?;
        }
        Ok(())
    })
}

/// Two panels: peak reserved (with reserved at the end under it) and
/// fragmentation at the end, one row per rank.
pub fn ranks_svg(c: &RanksChart) -> Result<Svg, ChartError> {
    let top = c
        .items
        .iter()
        .map(|r| r.peak_reserved.unwrap_or(0).max(r.end_reserved))
        .max()
        .unwrap_or(0)
        .max(1);
    let unit = byte_unit(top);
    let bytes: Vec<Bar> = c
        .items
        .iter()
        .map(|r| Bar {
            label: r.label.clone(),
            value: r.peak_reserved.map(|p| p as f64 / unit.div),
            second: Some(r.end_reserved as f64 / unit.div),
            text: match r.peak_reserved {
                Some(p) => format!("{} (end {})", fmt_binary(p), fmt_binary(r.end_reserved)),
                None => format!("peak n/a (end {})", fmt_binary(r.end_reserved)),
            },
            outlier: r.outlier,
        })
        .collect();
    let legend = vec![
        LegendEntry::new("peak reserved", ALLOCATED, Swatch::Fill),
        LegendEntry::new("reserved at the end", RESERVED_FILL, Swatch::Fill),
        LegendEntry::new("outlier rank", OOM, Swatch::Fill),
        LegendEntry::new("median of reserved at the end", MUTED, Swatch::Line),
    ];
    let a = bars_svg(
        &format!("Peak reserved per rank · {}", c.title),
        &bytes,
        top as f64 / unit.div * 1.45,
        unit.name,
        median(
            c.items
                .iter()
                .map(|r| r.end_reserved as f64 / unit.div)
                .collect(),
        ),
        legend,
        c.width,
    )?;
    let frag: Vec<Bar> = c
        .items
        .iter()
        .map(|r| Bar {
            label: r.label.clone(),
            value: Some(r.fragmentation * 100.0),
            second: None,
            text: fmt_pct(r.fragmentation),
            outlier: r.outlier,
        })
        .collect();
    let legend = vec![
        LegendEntry::new(
            "fragmentation at the end (1 − largest free block / free bytes)",
            ALLOCATED,
            Swatch::Fill,
        ),
        LegendEntry::new("median", MUTED, Swatch::Line),
    ];
    let b = bars_svg(
        &format!("Fragmentation per rank · {}", c.title),
        &frag,
        118.0,
        "%",
        median(c.items.iter().map(|r| r.fragmentation * 100.0).collect()),
        legend,
        c.width,
    )?;
    Ok(stack(&[a, b], 12))
}
