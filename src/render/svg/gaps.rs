//! Free-gap histogram at one moment: how many free blocks fall in each
//! power-of-two size class (log-scale x axis), the bytes each class holds,
//! and the failing request marked, so "plenty free, nothing big enough" is
//! visible at a glance.

use super::*;
use crate::core::units::fmt_binary;

pub struct GapsChart<'a> {
    pub title: &'a str,
    /// Sizes of the free (inactive) blocks at the moment.
    pub gaps: &'a [u64],
    /// The request that failed there, if any.
    pub request: Option<u64>,
    pub width: u32,
    pub height: u32,
}

impl<'a> GapsChart<'a> {
    pub fn new(title: &'a str, gaps: &'a [u64], request: Option<u64>) -> Self {
        GapsChart {
            title,
            gaps,
            request,
            width: WIDTH,
            height: 380,
        }
    }
}

/// One bar: gaps in `[2^class, 2^(class+1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapClass {
    pub class: u32,
    pub count: u64,
    pub bytes: u64,
}

fn log2_floor(n: u64) -> u32 {
    63 - n.max(1).leading_zeros()
}

/// Gaps grouped by power-of-two size class, ascending; empty classes
/// between the smallest and largest are kept so the axis is continuous.
pub fn gap_classes(gaps: &[u64]) -> Vec<GapClass> {
    let nz: Vec<u64> = gaps.iter().copied().filter(|g| *g > 0).collect();
    let (Some(lo), Some(hi)) = (
        nz.iter().map(|g| log2_floor(*g)).min(),
        nz.iter().map(|g| log2_floor(*g)).max(),
    ) else {
        return Vec::new();
    };
    let mut out: Vec<GapClass> = (lo..=hi)
        .map(|class| GapClass {
            class,
            count: 0,
            bytes: 0,
        })
        .collect();
    for g in nz {
        let c = &mut out[(log2_floor(g) - lo) as usize];
        c.count += 1;
        c.bytes += g;
    }
    out
}

const CHART: &str = "free-gap histogram";

/// The free gaps of one moment by power-of-two size class, with the
/// failing request's size marked.
pub fn gaps_svg(c: &GapsChart) -> Result<Svg, ChartError> {
    let classes = gap_classes(c.gaps);
    let total: u64 = c.gaps.iter().sum();
    let largest = c.gaps.iter().copied().max().unwrap_or(0);
    let req_x = c.request.filter(|r| *r > 0).map(|r| (r as f64).log2());
    let (lo, hi) = x_bounds(&classes, req_x);
    let max_count = classes.iter().map(|k| k.count).max().unwrap_or(0);
    let ytop = ((max_count as f64) * 1.25).ceil().max(2.0);

    let mut legend = vec![LegendEntry::new(
        format!(
            "free gaps: {} totalling {}, largest {}",
            c.gaps.len(),
            fmt_binary(total),
            fmt_binary(largest)
        ),
        LARGEST_GAP,
        Swatch::Fill,
    )];
    if let Some(r) = c.request {
        legend.push(LegendEntry::new(
            format!("failing request {}", fmt_binary(r)),
            OOM,
            Swatch::Line,
        ));
    }
    let lh = legend_height(&legend, c.width);
    let e = err(CHART);

    render(CHART, c.width, c.height + lh, |root| {
        let (upper, lower) = root.split_vertically(c.height);
        let mut chart = frame(&upper, c.title, 64)
            .build_cartesian_2d(lo..hi, 0f64..ytop)
            .map_err(|x| e(&x))?;
        // Ticks on whole powers of two only.
        let xfmt = |v: &f64| {
            if (v - v.round()).abs() < 1e-9 && *v >= 0.0 && *v < 64.0 {
                short_bytes(1u64 << (v.round() as u32))
            } else {
                String::new()
            }
        };
        let yfmt = |v: &f64| {
            if (v - v.round()).abs() < 1e-9 {
                tick(*v)
            } else {
                String::new()
            }
        };
        house_style(&mut chart.configure_mesh())
            .x_desc("free gap size (log scale: one bar per power of two)")
            .y_desc("free gaps")
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .x_labels(((hi - lo) as usize + 1).min(12))
            .y_labels(6)
            .disable_x_mesh()
            .draw()
            .map_err(|x| e(&x))?;
        draw_bars(&mut chart, &upper, &classes, lo)?;
        if let (Some(rx), Some(r)) = (req_x, c.request) {
            draw_request(&mut chart, &upper, (rx, ytop), r)?;
        }
        if classes.is_empty() {
            let (px, py) = chart.plotting_area().get_pixel_range();
            upper
                .draw(&Text::new(
                    "no free gaps at this moment",
                    ((px.start + px.end) / 2, (py.start + py.end) / 2),
                    anchored(text_style(LABEL_SIZE, &MUTED), HPos::Center, VPos::Center),
                ))
                .map_err(|x| e(&x))?;
        }
        draw_legend(&lower, &legend, CHART)
    })
}

/// The x axis's classes: those with gaps and the request's, at least
/// eight classes wide so a single bar does not fill the chart.
fn x_bounds(classes: &[GapClass], req_x: Option<f64>) -> (f64, f64) {
    let mut lo = classes.first().map(|k| k.class as f64).unwrap_or(9.0);
    let mut hi = classes.last().map(|k| k.class as f64 + 1.0).unwrap_or(21.0);
    if let Some(r) = req_x {
        lo = lo.min(r.floor());
        hi = hi.max(r.floor() + 1.0);
    }
    while hi - lo < 8.0 {
        lo = (lo - 1.0).max(0.0);
        hi += 1.0;
    }
    (lo, hi)
}

/// One bar a class with gaps, and its bytes above it when the bar is wide
/// enough.
fn draw_bars(
    chart: &mut Plot,
    upper: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    classes: &[GapClass],
    lo: f64,
) -> Result<(), ChartError> {
    let e = err(CHART);
    chart
        .draw_series(classes.iter().filter(|k| k.count > 0).map(|k| {
            let x = k.class as f64;
            Rectangle::new(
                [(x + 0.06, 0.0), (x + 0.94, k.count as f64)],
                LARGEST_GAP.mix(0.85).filled(),
            )
        }))
        .map_err(|x| e(&x))?;
    let bar_px = {
        let (a, _) = chart.backend_coord(&(lo, 0.0));
        let (b, _) = chart.backend_coord(&(lo + 1.0, 0.0));
        b - a
    };
    for k in classes.iter().filter(|k| k.count > 0) {
        let label = short_bytes(k.bytes);
        if text_width(&label, SMALL_SIZE) + 4 > bar_px {
            continue;
        }
        let (bx, by) = chart.backend_coord(&(k.class as f64 + 0.5, k.count as f64));
        upper
            .draw(&Text::new(
                label,
                (bx, by - 4),
                anchored(text_style(SMALL_SIZE, &TEXT), HPos::Center, VPos::Bottom),
            ))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// The failing request `r`: a line at its class position `rx` up to
/// `ytop`, captioned on the side with more room.
fn draw_request(
    chart: &mut Plot,
    upper: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    (rx, ytop): (f64, f64),
    r: u64,
) -> Result<(), ChartError> {
    let e = err(CHART);
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(rx, 0.0), (rx, ytop)],
            OOM.stroke_width(3),
        )))
        .map_err(|x| e(&x))?;
    let (bx, by) = chart.backend_coord(&(rx, ytop));
    let (px, _) = chart.plotting_area().get_pixel_range();
    let right_side = bx < (px.start + px.end) / 2;
    let (tx, h) = if right_side {
        (bx + 6, HPos::Left)
    } else {
        (bx - 6, HPos::Right)
    };
    upper
        .draw(&Text::new(
            format!("failing request {}", fmt_binary(r)),
            (tx, by + 6),
            anchored(text_style(SMALL_SIZE, &OOM), h, VPos::Top),
        ))
        .map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_contiguous_and_conserve_bytes() {
        let gaps = [512, 700, 4096, 3 << 20, 0];
        let k = gap_classes(&gaps);
        assert_eq!(k.first().unwrap().class, 9);
        assert_eq!(k.last().unwrap().class, 21);
        assert_eq!(k.len(), 13);
        assert_eq!(k.iter().map(|c| c.count).sum::<u64>(), 4);
        assert_eq!(
            k.iter().map(|c| c.bytes).sum::<u64>(),
            512 + 700 + 4096 + (3 << 20)
        );
        assert_eq!(k[0].count, 2);
        assert!(gap_classes(&[]).is_empty());
    }
}
