//! The memory timeline: reserved, allocated and free-in-reserved bytes over
//! time, the largest free gap as its own line, the peaks marked, and every
//! out-of-memory event drawn as a vertical line annotated with the request
//! and the largest gap at that moment.

use super::*;
use crate::core::units::fmt_binary;

pub use crate::model::OomMark;

pub struct TimelineChart<'a> {
    pub title: &'a str,
    pub samples: &'a [Sample],
    pub ooms: &'a [OomMark],
    pub width: u32,
    pub height: u32,
    /// Draw reserved and free-in-reserved (off where the input does not
    /// record reserved memory: CPU memory, 2021 profiler traces).
    pub reserved: bool,
    /// Draw the largest free gap (off for inputs without a segment layout,
    /// such as profiler traces; the legend then says it is not measurable).
    pub largest_gap: bool,
    /// The exact peaks of the whole series, where the caller has them. The
    /// downsampled `samples` keep every bucket's maximum but date it at the
    /// bucket's last event, so a peak taken from them can be off by up to a
    /// bucket, so the caller hands them in; `None` draws no mark.
    pub peak_reserved: Option<Sample>,
    pub peak_allocated: Option<Sample>,
    /// Time of the first trace event, the origin of a time axis (see
    /// [`XAxis::from_first`]); `None` takes the earliest sample's.
    pub first_time_us: Option<i64>,
}

impl<'a> TimelineChart<'a> {
    pub fn new(title: &'a str, samples: &'a [Sample], ooms: &'a [OomMark]) -> Self {
        TimelineChart {
            title,
            samples,
            ooms,
            width: WIDTH,
            height: 440,
            reserved: true,
            largest_gap: true,
            peak_reserved: None,
            peak_allocated: None,
            first_time_us: None,
        }
    }
}

const CHART: &str = "memory timeline";

/// Reserved and allocated bytes over time, with the free memory inside
/// reserved, the largest free gap, the peaks and the OOM events.
pub fn timeline_svg(c: &TimelineChart) -> Result<Svg, ChartError> {
    let TimeAxis { axis, pts, range } = time_axis(c.samples, c.first_time_us, c.ooms);
    let top = c
        .samples
        .iter()
        .map(|s| {
            if c.reserved {
                s.reserved_bytes().max(s.allocated)
            } else {
                s.allocated
            }
        })
        .max()
        .unwrap_or(0)
        .max(1);
    let unit = byte_unit(top);
    let ymax = top as f64 / unit.div * 1.12;
    let legend = legend_of(c, &axis);
    let lh = legend_height(&legend, c.width);
    let e = err(CHART);

    render(CHART, c.width, c.height + lh, |root| {
        let (upper, lower) = root.split_vertically(c.height);
        let mut chart = frame(&upper, c.title, 64)
            .build_cartesian_2d(range.clone(), 0f64..ymax)
            .map_err(|x| e(&x))?;
        let xfmt = |v: &f64| tick(*v);
        let yfmt = |v: &f64| tick(*v);
        house_style(&mut chart.configure_mesh())
            .x_desc(axis.desc())
            .y_desc(unit.name)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .x_labels(10)
            .y_labels(8)
            .draw()
            .map_err(|x| e(&x))?;
        draw_series(&mut chart, c, &pts, &axis, unit.div)?;
        draw_peaks(&mut chart, c, &axis, unit.div)?;
        draw_ooms(&mut chart, &upper, c, &axis, (unit.div, ymax))?;
        if c.samples.len() <= 1 {
            no_series_note(&upper, &chart.plotting_area().get_pixel_range(), CHART)?;
        }
        draw_legend(&lower, &legend, CHART)
    })
}

/// The legend: each series drawn (or why it is not), the peaks with their
/// bytes and moments, and the OOM mark.
fn legend_of(c: &TimelineChart, axis: &XAxis) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    if c.reserved {
        legend.push(LegendEntry::new("reserved", RESERVED_FILL, Swatch::Fill));
    }
    legend.push(LegendEntry::new("allocated", ALLOCATED, Swatch::Fill));
    if c.reserved {
        legend.push(LegendEntry::new(
            "free in reserved",
            FREE_IN_RESERVED,
            Swatch::Line,
        ));
    }
    if c.largest_gap {
        legend.push(LegendEntry::new(
            "largest free gap",
            LARGEST_GAP,
            Swatch::Line,
        ));
    } else {
        legend.push(LegendEntry::new(
            "largest free gap: not measurable (no segment layout)",
            MUTED,
            Swatch::Line,
        ));
    }
    if !c.reserved {
        legend.push(LegendEntry::new(
            "reserved: not recorded",
            MUTED,
            Swatch::Line,
        ));
    }
    // A peak's dot in the legend: the figure, its bytes and when.
    let peak_entry = |what: &str, bytes: u64, p: &Sample, color| {
        let when = axis.moment(p.event, p.time_us);
        LegendEntry::new(
            format!("peak {what} {} at {when}", fmt_binary(bytes)),
            color,
            Swatch::Dot,
        )
    };
    if let Some(p) = &c.peak_reserved.filter(|_| c.reserved) {
        legend.push(peak_entry("reserved", p.reserved_bytes(), p, RESERVED_LINE));
    }
    if let Some(p) = &c.peak_allocated {
        legend.push(peak_entry("allocated", p.allocated, p, ALLOCATED));
    }
    if !c.ooms.is_empty() {
        legend.push(LegendEntry::new(
            "out-of-memory event (× = failed request)",
            OOM,
            Swatch::Line,
        ));
    }
    legend
}

/// The reserved and allocated areas, the free memory inside reserved and
/// the largest free gap, from the downsampled points; `div`: bytes per
/// unit of the y axis.
fn draw_series(
    chart: &mut Plot,
    c: &TimelineChart,
    pts: &[Sample],
    axis: &XAxis,
    div: f64,
) -> Result<(), ChartError> {
    let e = err(CHART);
    let series = |f: fn(&Sample) -> u64| -> Vec<(f64, f64)> {
        pts.iter().map(|s| (axis.x(s), f(s) as f64 / div)).collect()
    };
    if c.reserved {
        chart
            .draw_series(
                AreaSeries::new(series(|s| s.reserved_bytes()), 0.0, RESERVED_FILL.mix(0.8))
                    .border_style(RESERVED_LINE.stroke_width(2)),
            )
            .map_err(|x| e(&x))?;
    }
    chart
        .draw_series(
            AreaSeries::new(series(|s| s.allocated), 0.0, ALLOCATED.mix(0.35))
                .border_style(ALLOCATED.stroke_width(2)),
        )
        .map_err(|x| e(&x))?;
    if c.reserved {
        chart
            .draw_series(LineSeries::new(
                series(|s| s.reserved_bytes().saturating_sub(s.allocated)),
                FREE_IN_RESERVED.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
    }
    if c.largest_gap {
        chart
            .draw_series(LineSeries::new(
                series(|s| s.lay().largest_free_gap),
                LARGEST_GAP.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}

/// A dot at each peak (reserved only when drawn), taken from the whole
/// series, not the downsampled points.
fn draw_peaks(
    chart: &mut Plot,
    c: &TimelineChart,
    axis: &XAxis,
    div: f64,
) -> Result<(), ChartError> {
    let e = err(CHART);
    let peak_res = c.peak_reserved.filter(|_| c.reserved);
    let peak_alloc = c.peak_allocated;
    for (p, v, color) in [
        (
            peak_res,
            peak_res.map(|p| p.reserved_bytes()),
            RESERVED_LINE,
        ),
        (peak_alloc, peak_alloc.map(|p| p.allocated), ALLOCATED),
    ] {
        if let (Some(p), Some(v)) = (p, v) {
            let at = (axis.x(&p), v as f64 / div);
            chart
                .draw_series(std::iter::once(Circle::new(at, 6, color.filled())))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Circle::new(at, 6, WHITE.stroke_width(1))))
                .map_err(|x| e(&x))?;
        }
    }
    Ok(())
}

/// OOM lines with a cross at the failed request, and their captions
/// stacked from the top so several failures close together do not print
/// over each other.
fn draw_ooms(
    chart: &mut Plot,
    upper: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    c: &TimelineChart,
    axis: &XAxis,
    (div, ymax): (f64, f64),
) -> Result<(), ChartError> {
    let e = err(CHART);
    let (px_range, py_range) = chart.plotting_area().get_pixel_range();
    let mid = (px_range.start + px_range.end) / 2;
    for (k, o) in c.ooms.iter().enumerate() {
        let x = axis.x_event(Some(o.event as u32), o.time_us);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, ymax)],
                OOM.stroke_width(2),
            )))
            .map_err(|x| e(&x))?;
        let ry = o.request as f64 / div;
        if ry <= ymax {
            chart
                .draw_series(std::iter::once(Cross::new((x, ry), 7, OOM.stroke_width(3))))
                .map_err(|x| e(&x))?;
        }
        let (bx, _) = chart.backend_coord(&(x, 0.0));
        let bx = bx.clamp(px_range.start, px_range.end);
        let ty = py_range.start + 8 + (k as i32 % 4) * 20;
        let (tx, h) = if bx > mid {
            (bx - 6, HPos::Right)
        } else {
            (bx + 6, HPos::Left)
        };
        let label = if c.ooms.len() > 1 {
            format!("#{} {}", k + 1, o.caption())
        } else {
            o.caption()
        };
        upper
            .draw(&Text::new(
                label,
                (tx, ty),
                anchored(text_style(SMALL_SIZE, &OOM), h, VPos::Top),
            ))
            .map_err(|x| e(&x))?;
    }
    Ok(())
}
