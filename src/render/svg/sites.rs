//! Top call sites: per site, the live bytes it holds and the free bytes it
//! strands (free memory that cannot be returned or reused because the site's
//! blocks pin the segment). Bars in the order given: the caller ranks.

use super::*;
use crate::core::units::fmt_binary;

#[derive(Debug, Clone, PartialEq)]
pub struct SiteBar {
    pub label: String,
    pub live: u64,
    pub stranded: u64,
}

pub struct SitesChart<'a> {
    pub title: &'a str,
    pub sites: &'a [SiteBar],
    pub width: u32,
}

impl<'a> SitesChart<'a> {
    pub fn new(title: &'a str, sites: &'a [SiteBar]) -> Self {
        SitesChart {
            title,
            sites,
            width: WIDTH,
        }
    }
}

const CHART: &str = "top call sites";
const ROW: u32 = 40;
const LABEL_AREA: u32 = 340;

pub fn sites_svg(c: &SitesChart) -> Result<Svg, ChartError> {
    let n = c.sites.len().max(1);
    let height = 110 + ROW * n as u32;
    let top = c
        .sites
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
    let lh = legend_height(&legend, c.width);
    let max_chars = ((LABEL_AREA as f64 - 16.0) / (SMALL_SIZE / 1.24 * 0.6)) as usize;
    let labels: Vec<String> = c
        .sites
        .iter()
        .map(|s| ellipsize(&s.label, max_chars))
        .collect();
    let e = err(CHART);

    render(CHART, c.width, height + lh, |root| {
        let (upper, lower) = root.split_vertically(height);
        let mut chart = frame(&upper, c.title, LABEL_AREA)
            .build_cartesian_2d(0f64..xmax, 0f64..n as f64)
            .map_err(|x| e(&x))?;
        let xfmt = |v: &f64| tick(*v);
        house_style(&mut chart.configure_mesh())
            .x_desc(unit.name)
            .x_label_formatter(&xfmt)
            .x_labels(8)
            .y_labels(0)
            .disable_y_mesh()
            .draw()
            .map_err(|x| e(&x))?;
        let (px, _) = chart.plotting_area().get_pixel_range();
        for (i, s) in c.sites.iter().enumerate() {
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
                upper
                    .draw(&Text::new(
                        fmt_binary(v),
                        (bx + 5, by),
                        anchored(text_style(SMALL_SIZE, &TEXT), HPos::Left, VPos::Center),
                    ))
                    .map_err(|x| e(&x))?;
            }
            let (_, ly) = chart.backend_coord(&(0.0, mid));
            upper
                .draw(&Text::new(
                    labels[i].clone(),
                    (px.start - 10, ly),
                    anchored(text_style(SMALL_SIZE, &TEXT), HPos::Right, VPos::Center),
                ))
                .map_err(|x| e(&x))?;
        }
        if c.sites.is_empty() {
            let (px, py) = chart.plotting_area().get_pixel_range();
            upper
                .draw(&Text::new(
                    "no live allocations with a recorded call site",
                    ((px.start + px.end) / 2, (py.start + py.end) / 2),
                    anchored(text_style(LABEL_SIZE, &MUTED), HPos::Center, VPos::Center),
                ))
                .map_err(|x| e(&x))?;
        }
        draw_legend(&lower, &legend, CHART)
    })
}
