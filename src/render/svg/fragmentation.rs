//! Fragmentation over time: the fragmentation ratio (1 − largest free gap /
//! free bytes, left axis) and the number of free gaps (right axis), with the
//! out-of-memory events marked.

use super::timeline::OomMark;
use super::*;

pub struct FragmentationChart<'a> {
    pub title: &'a str,
    pub samples: &'a [Sample],
    pub ooms: &'a [OomMark],
    pub width: u32,
    pub height: u32,
    /// The highest fragmentation of the whole series, where the caller has
    /// it (see [`super::timeline::TimelineChart::peak_reserved`] for why);
    /// `None` draws no mark.
    pub highest: Option<Sample>,
    /// Time of the first trace event (see
    /// [`super::timeline::TimelineChart::first_time_us`]).
    pub first_time_us: Option<i64>,
}

impl<'a> FragmentationChart<'a> {
    pub fn new(title: &'a str, samples: &'a [Sample], ooms: &'a [OomMark]) -> Self {
        FragmentationChart {
            title,
            samples,
            ooms,
            width: WIDTH,
            height: 380,
            highest: None,
            first_time_us: None,
        }
    }
}

const CHART: &str = "fragmentation";

pub fn fragmentation_svg(c: &FragmentationChart) -> Result<Svg, ChartError> {
    let TimeAxis {
        axis,
        pts,
        range: xr,
    } = time_axis(c.samples, c.first_time_us, c.ooms);
    let max_gaps = c
        .samples
        .iter()
        .map(|s| s.lay().free_gaps)
        .max()
        .unwrap_or(0);
    let gap_top = ((max_gaps as f64) * 1.12).ceil().max(4.0);
    let worst = c.highest;
    let mut legend = vec![
        LegendEntry::new(
            "fragmentation = 1 − largest free gap / free bytes (left)",
            FRAGMENTATION,
            Swatch::Line,
        ),
        LegendEntry::new("free gaps (right)", LARGEST_GAP, Swatch::Line),
    ];
    if let Some(w) = &worst {
        legend.push(LegendEntry::new(
            format!(
                "highest {:.1}% at {}",
                w.lay().fragmentation * 100.0,
                axis.moment(w.event, w.time_us)
            ),
            FRAGMENTATION,
            Swatch::Dot,
        ));
    }
    if !c.ooms.is_empty() {
        legend.push(LegendEntry::new("out-of-memory event", OOM, Swatch::Line));
    }
    let lh = legend_height(&legend, c.width);
    let e = err(CHART);

    render(CHART, c.width, c.height + lh, |root| {
        let (upper, lower) = root.split_vertically(c.height);
        let mut chart = frame(&upper, c.title, 64)
            // The secondary axis takes the right margin's room.
            .margin_right(12)
            .right_y_label_area_size(64)
            .build_cartesian_2d(xr.clone(), 0f64..1.05)
            .map_err(|x| e(&x))?
            .set_secondary_coord(xr.clone(), 0f64..gap_top);
        let xfmt = |v: &f64| tick(*v);
        let yfmt = |v: &f64| format!("{:.0}%", v * 100.0);
        let gfmt = |v: &f64| tick(*v);
        house_style(&mut chart.configure_mesh())
            .x_desc(axis.desc())
            .y_desc("fragmentation")
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .x_labels(10)
            .y_labels(6)
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .configure_secondary_axes()
            .y_desc("free gaps")
            .y_label_formatter(&gfmt)
            .y_labels(6)
            .label_style((FONT, LABEL_SIZE))
            .axis_desc_style((FONT, LABEL_SIZE))
            .draw()
            .map_err(|x| e(&x))?;
        for o in c.ooms {
            let x = axis.x_event(Some(o.event as u32), o.time_us);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.0), (x, 1.05)],
                    OOM.stroke_width(2),
                )))
                .map_err(|x| e(&x))?;
        }
        chart
            .draw_secondary_series(LineSeries::new(
                pts.iter().map(|s| (axis.x(s), s.lay().free_gaps as f64)),
                LARGEST_GAP.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|s| (axis.x(s), s.lay().fragmentation)),
                FRAGMENTATION.stroke_width(2),
            ))
            .map_err(|x| e(&x))?;
        if let Some(w) = &worst {
            chart
                .draw_series(std::iter::once(Circle::new(
                    (axis.x(w), w.lay().fragmentation),
                    6,
                    FRAGMENTATION.filled(),
                )))
                .map_err(|x| e(&x))?;
        }
        if c.samples.len() <= 1 {
            no_series_note(&upper, &chart.plotting_area().get_pixel_range(), CHART)?;
        }
        draw_legend(&lower, &legend, CHART)
    })
}
