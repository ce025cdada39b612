//! SVG charts, drawn with plotters' SVG backend into `String`s.
//!
//! Owns chart layout only: every chart takes plain, already computed figures
//! (samples, segments, gap sizes, per-site byte counts) and returns an
//! [`Svg`]. Nothing here loads files, replays traces or decides what a
//! culprit is; the report builder ([`crate::analysis::report`]) and the commands feed
//! the charts.
//!
//! Shared conventions: byte axes are in binary units (the unit is chosen from
//! the largest value so tick labels stay short), every chart has a title that
//! names the file and device, and the legend is drawn in its own strip under
//! the plot so it never hides data. Long series are downsampled with the
//! min/max downsampler first, so peaks and dips survive.

pub mod categories;
pub mod compose;
pub mod fragmentation;
pub mod gaps;
pub mod ranks;
pub mod segmap;
pub mod sites;
pub mod timeline;

use crate::timeline::Sample;
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Font family of every chart: the browser's or rasterizer's sans-serif.
pub const FONT: &str = "sans-serif";
/// Default width of every chart, in pixels (fits a GitHub issue column).
pub const WIDTH: u32 = 1000;
/// Points drawn per series at most (min/max pairs).
pub const MAX_POINTS: usize = 1200;

/// Plotters sizes fonts in its own unit; the SVG gets `size / 1.24`.
pub(crate) const TITLE_SIZE: f64 = 24.0;
pub(crate) const LABEL_SIZE: f64 = 18.0;
pub(crate) const SMALL_SIZE: f64 = 17.0;

pub const RESERVED_LINE: RGBColor = RGBColor(70, 70, 70);
pub const RESERVED_FILL: RGBColor = RGBColor(215, 215, 215);
pub const ALLOCATED: RGBColor = RGBColor(52, 101, 196);
pub const WASTE: RGBColor = RGBColor(240, 170, 40);
pub const FREE_IN_RESERVED: RGBColor = RGBColor(230, 120, 20);
pub const LARGEST_GAP: RGBColor = RGBColor(30, 150, 130);
pub const FREE_BLOCK: RGBColor = RGBColor(228, 228, 228);
pub const PENDING: RGBColor = RGBColor(148, 103, 189);
pub const OOM: RGBColor = RGBColor(214, 39, 40);
pub const CULPRIT: RGBColor = RGBColor(224, 33, 138);
pub const FRAGMENTATION: RGBColor = RGBColor(120, 70, 170);
pub const STRANDED: RGBColor = RGBColor(230, 120, 20);
pub const TEXT: RGBColor = RGBColor(30, 30, 30);
pub const MUTED: RGBColor = RGBColor(100, 100, 100);
pub const GRID: RGBColor = RGBColor(235, 235, 235);
pub const OUTLINE: RGBColor = RGBColor(90, 90, 90);

/// A finished chart: the SVG document and its size in pixels.
#[derive(Debug, Clone, PartialEq)]
pub struct Svg {
    pub width: u32,
    pub height: u32,
    pub body: String,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot draw the {chart} chart: {msg}")]
pub struct ChartError {
    pub chart: &'static str,
    pub msg: String,
}

pub(crate) fn err(chart: &'static str) -> impl Fn(&dyn std::fmt::Display) -> ChartError {
    move |e| ChartError {
        chart,
        msg: e.to_string(),
    }
}

/// Draws into a fresh SVG of `width × height` on a white background.
pub(crate) fn render(
    chart: &'static str,
    width: u32,
    height: u32,
    f: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ChartError>,
) -> Result<Svg, ChartError> {
    let mut body = String::new();
    {
        let root = SVGBackend::with_string(&mut body, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(chart)(&e))?;
        f(&root)?;
        root.present().map_err(|e| err(chart)(&e))?;
    }
    Ok(Svg {
        width,
        height,
        body,
    })
}

/// What a chart of one list takes: its title, the items in the order drawn
/// and its width in pixels.
pub struct Chart<'a, T> {
    pub title: &'a str,
    pub items: &'a [T],
    pub width: u32,
}

impl<'a, T> Chart<'a, T> {
    pub fn new(title: &'a str, items: &'a [T]) -> Self {
        Chart {
            title,
            items,
            width: WIDTH,
        }
    }
}

/// A chart with its legend in a strip under it: `draw` draws the chart
/// into the upper `height` pixels, the legend goes below.
pub(crate) fn panel(
    chart: &'static str,
    width: u32,
    height: u32,
    legend: &[LegendEntry],
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ChartError>,
) -> Result<Svg, ChartError> {
    render(
        chart,
        width,
        height + legend_height(legend, width),
        |root| {
            let (upper, lower) = root.split_vertically(height);
            draw(&upper)?;
            draw_legend(&lower, legend, chart)
        },
    )
}

/// The frame every chart shares: its title, margins and room for the axis
/// labels (`y_label_area` pixels on the left).
pub(crate) fn frame<'a, 'b, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: &'b str,
    y_label_area: u32,
) -> ChartBuilder<'a, 'b, DB> {
    let mut b = ChartBuilder::on(area);
    // A title is centred: one wider than the chart (a long file name) would
    // lose both ends, so it is drawn smaller until it fits (down to 12).
    let room = area.dim_in_pixel().0 as i32 - 36;
    let mut size = TITLE_SIZE;
    while size > 12.0 && text_width(title, size) > room {
        size -= 1.0;
    }
    b.caption(title, (FONT, size))
        .margin(12)
        .margin_right(24)
        .x_label_area_size(48)
        .y_label_area_size(y_label_area);
    b
}

/// The plot of a horizontal bar chart: `rows` rows, the first at the top,
/// on a value axis from 0 to `xmax` described by `x_desc` (no horizontal
/// grid lines), with `label_area` pixels on the left for the rows' labels.
pub(crate) fn bar_rows<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    label_area: u32,
    xmax: f64,
    rows: usize,
    x_desc: &str,
    chart: &'static str,
) -> Result<BarRows<'a, 'b>, ChartError> {
    let e = err(chart);
    let mut c = frame(area, title, label_area)
        .build_cartesian_2d(0f64..xmax, 0f64..rows as f64)
        .map_err(|x| e(&x))?;
    let xfmt = |v: &f64| tick(*v);
    house_style(&mut c.configure_mesh())
        .x_desc(x_desc)
        .x_label_formatter(&xfmt)
        .x_labels(8)
        .y_labels(0)
        .disable_y_mesh()
        .draw()
        .map_err(|x| e(&x))?;
    Ok(c)
}

/// A plot with a linear x and y axis, both in `f64`.
pub(crate) type Plot<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A horizontal bar chart's plot, as [`bar_rows`] builds it.
pub(crate) type BarRows<'a, 'b> = Plot<'a, 'b>;

/// The rows of a horizontal bar chart: each row's height and the room
/// left of the axis for its label, in pixels.
pub(crate) struct BarLayout {
    pub row: u32,
    pub label_area: u32,
}

impl BarLayout {
    /// The chart's height for `n` rows, with its title and axis.
    pub(crate) fn height(&self, n: usize) -> u32 {
        110 + self.row * n as u32
    }
}

/// How many characters of a row's label fit in `label_area` pixels.
pub(crate) fn label_chars(label_area: u32) -> usize {
    ((label_area as f64 - 16.0) / (SMALL_SIZE / 1.24 * 0.6)) as usize
}

/// Small text centred on `y`: a bar's value after its end (`HPos::Left`),
/// a row's label before the axis (`HPos::Right`).
pub(crate) fn bar_text(
    area: &DrawingArea<SVGBackend, Shift>,
    text: String,
    at: (i32, i32),
    h: HPos,
    color: &'static RGBColor,
    chart: &'static str,
) -> Result<(), ChartError> {
    area.draw(&Text::new(
        text,
        at,
        anchored(text_style(SMALL_SIZE, color), h, VPos::Center),
    ))
    .map_err(|x| err(chart)(&x))
}

/// The label fonts and grid lines every chart's mesh shares.
pub(crate) fn house_style<'m, 'a, 'b, X, Y, XT, YT, DB>(
    m: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged<ValueType = XT> + ValueFormatter<XT>,
    Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    DB: DrawingBackend,
{
    m.label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, LABEL_SIZE))
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
}

/// The unit a byte axis is labelled in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ByteUnit {
    pub name: &'static str,
    pub div: f64,
}

/// The largest binary unit in which `max` is at least 1.
pub fn byte_unit(max: u64) -> ByteUnit {
    const UNITS: [(&str, u32); 5] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)];
    for (name, shift) in UNITS {
        if max >= 1u64 << shift {
            return ByteUnit {
                name,
                div: (1u64 << shift) as f64,
            };
        }
    }
    ByteUnit {
        name: "B",
        div: 1.0,
    }
}

/// A short axis label: `512 B`, `2 MiB`, `1.5 GiB` (trailing zeros dropped).
pub fn short_bytes(n: u64) -> String {
    let u = byte_unit(n);
    let v = n as f64 / u.div;
    let s = if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as u64)
    } else if v < 10.0 {
        let t = format!("{v:.2}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.1}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    };
    format!("{s} {}", u.name)
}

/// Tick label of a value on a unit-scaled axis (`2`, `0.5`, `12.5`,
/// `0.0005`: enough decimals for the millisecond ticks of short traces).
pub(crate) fn tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let t = format!("{v:.6}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// What the x axis of a time series measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum XAxis {
    /// Seconds since the first event (`time_us` on every event).
    Seconds { origin_us: i64 },
    /// Trace event number (0 = the reconstructed start).
    Events,
}

impl XAxis {
    /// Seconds when every event has a `time_us` and time advances; event
    /// numbers otherwise (files recorded before PyTorch 2.2 have no times).
    pub fn for_samples(samples: &[Sample]) -> XAxis {
        let events: Vec<&Sample> = samples.iter().filter(|s| s.event.is_some()).collect();
        if events.is_empty() || events.iter().any(|s| s.time_us.is_none()) {
            return XAxis::Events;
        }
        let lo = events.iter().filter_map(|s| s.time_us).min().unwrap_or(0);
        let hi = events.iter().filter_map(|s| s.time_us).max().unwrap_or(0);
        if hi > lo {
            XAxis::Seconds { origin_us: lo }
        } else {
            XAxis::Events
        }
    }

    /// The axis with its origin at `first_us`, the time of the first event,
    /// where the caller knows it: a downsampled series dates its first bucket
    /// at the bucket's last event, so the earliest time among its samples
    /// can be later than the first event's, and every moment on the chart
    /// would then read early against the tables.
    pub fn from_first(self, first_us: Option<i64>) -> XAxis {
        match (self, first_us) {
            (XAxis::Seconds { origin_us }, Some(f)) => XAxis::Seconds {
                origin_us: origin_us.min(f),
            },
            (axis, _) => axis,
        }
    }

    /// Position of an event (`None` = the start) on this axis.
    pub fn x_event(&self, event: Option<u32>, time_us: Option<i64>) -> f64 {
        match self {
            XAxis::Events => event.map(|e| e as f64 + 1.0).unwrap_or(0.0),
            XAxis::Seconds { origin_us } => time_us.map_or(0.0, |t| (t - origin_us) as f64 / 1e6),
        }
    }

    pub fn x(&self, s: &Sample) -> f64 {
        self.x_event(s.event, s.time_us)
    }

    pub fn desc(&self) -> &'static str {
        match self {
            XAxis::Events => "trace event",
            XAxis::Seconds { .. } => "seconds since the first trace event",
        }
    }

    /// Label of a moment for annotations: `t=1.234 s` or `event 4211`.
    pub fn moment(&self, event: Option<u32>, time_us: Option<i64>) -> String {
        match (self, event) {
            (_, None) => "start".into(),
            (XAxis::Events, Some(e)) => format!("event {e}"),
            (XAxis::Seconds { .. }, Some(e)) => {
                format!("t={:.3} s (event {e})", self.x_event(Some(e), time_us))
            }
        }
    }
}

/// The time axis of a chart over a series: the axis (its origin the first
/// trace event when given), the downsampled points drawn, and the x range
/// that holds the whole series and every OOM mark.
pub(crate) struct TimeAxis {
    pub axis: XAxis,
    pub pts: Vec<Sample>,
    pub range: std::ops::Range<f64>,
}

pub(crate) fn time_axis(
    samples: &[Sample],
    first_time_us: Option<i64>,
    ooms: &[crate::model::OomMark],
) -> TimeAxis {
    let axis = XAxis::for_samples(samples).from_first(first_time_us);
    let oom_x: Vec<f64> = (ooms.iter())
        .map(|o| axis.x_event(Some(o.event as u32), o.time_us))
        .collect();
    TimeAxis {
        pts: crate::timeline::downsample::downsample(samples, MAX_POINTS),
        range: x_range(&axis, samples, &oom_x),
        axis,
    }
}

/// The x range of a series and of the extra positions `also` (marks that
/// must stay visible), never empty.
pub(crate) fn x_range(axis: &XAxis, samples: &[Sample], also: &[f64]) -> std::ops::Range<f64> {
    let xs = || {
        samples
            .iter()
            .map(|s| axis.x(s))
            .chain(also.iter().copied())
    };
    let lo = xs().fold(f64::INFINITY, f64::min);
    let hi = xs().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return 0.0..1.0;
    }
    // A little room on the right so a mark on the last event is not cut.
    if hi > lo {
        lo..hi + (hi - lo) * 0.015
    } else {
        lo..lo + 1.0
    }
}

/// Estimated width in pixels of `text` drawn at plotters size `size`
/// (deliberately generous: sans-serif fonts differ between viewers).
pub fn text_width(text: &str, size: f64) -> i32 {
    (text.chars().count() as f64 * size / 1.24 * 0.6).ceil() as i32
}

/// Shortens `s` to at most `max` characters, keeping both ends.
pub fn ellipsize(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 5 {
        return s.to_string();
    }
    let keep = max - 1;
    let head = keep / 3;
    let tail = keep - head;
    let a: String = s.chars().take(head).collect();
    let b: String = s.chars().skip(n - tail).collect();
    format!("{a}…{b}")
}

pub(crate) fn text_style(size: f64, color: &'static RGBColor) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(color)
}

pub(crate) fn anchored(style: TextStyle<'static>, h: HPos, v: VPos) -> TextStyle<'static> {
    style.pos(Pos::new(h, v))
}

/// Written across a time chart that has a single sample: a file without
/// trace events only tells its recorded state.
pub(crate) fn no_series_note(
    area: &DrawingArea<SVGBackend, Shift>,
    plot: &(std::ops::Range<i32>, std::ops::Range<i32>),
    chart: &'static str,
) -> Result<(), ChartError> {
    centered_note(
        area,
        plot,
        "no trace: only the recorded state is known",
        chart,
    )
}

/// `text` across the middle of the plot (pixel ranges `plot`), in muted
/// letters: what a chart with nothing to draw says instead.
pub(crate) fn centered_note(
    area: &DrawingArea<SVGBackend, Shift>,
    plot: &(std::ops::Range<i32>, std::ops::Range<i32>),
    text: &str,
    chart: &'static str,
) -> Result<(), ChartError> {
    let (px, py) = plot;
    area.draw(&Text::new(
        text,
        ((px.start + px.end) / 2, (py.start + py.end) / 2),
        anchored(text_style(LABEL_SIZE, &MUTED), HPos::Center, VPos::Center),
    ))
    .map_err(|x| err(chart)(&x))
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Swatch {
    /// A filled box (areas, bars, block states).
    Fill,
    /// A line (series, markers drawn as lines).
    Line,
    /// An outline (highlighted blocks).
    Outline,
    /// A dot (point markers).
    Dot,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    pub label: String,
    pub color: RGBColor,
    pub swatch: Swatch,
}

impl LegendEntry {
    pub fn new(label: impl Into<String>, color: RGBColor, swatch: Swatch) -> Self {
        LegendEntry {
            label: label.into(),
            color,
            swatch,
        }
    }
}

const LEGEND_ROW: i32 = 22;
const LEGEND_PAD: i32 = 12;

fn legend_rows(entries: &[LegendEntry], width: i32) -> Vec<Vec<(i32, &LegendEntry)>> {
    let mut rows: Vec<Vec<(i32, &LegendEntry)>> = vec![Vec::new()];
    let mut x = LEGEND_PAD;
    for e in entries {
        let w = 22 + text_width(&e.label, SMALL_SIZE) + 22;
        if x + w > width - LEGEND_PAD && !rows.last().is_some_and(|r| r.is_empty()) {
            rows.push(Vec::new());
            x = LEGEND_PAD;
        }
        rows.last_mut().expect("one row").push((x, e));
        x += w;
    }
    rows
}

/// Height of the legend strip for `entries` at `width`.
pub(crate) fn legend_height(entries: &[LegendEntry], width: u32) -> u32 {
    if entries.is_empty() {
        return 0;
    }
    (legend_rows(entries, width as i32).len() as i32 * LEGEND_ROW + 8) as u32
}

/// Draws the legend entries left to right, wrapping, in `area`.
pub(crate) fn draw_legend(
    area: &DrawingArea<SVGBackend, Shift>,
    entries: &[LegendEntry],
    chart: &'static str,
) -> Result<(), ChartError> {
    let width = area.dim_in_pixel().0 as i32;
    let e = err(chart);
    for (r, row) in legend_rows(entries, width).iter().enumerate() {
        let cy = 4 + r as i32 * LEGEND_ROW + LEGEND_ROW / 2;
        for (x, entry) in row {
            let c = entry.color;
            match entry.swatch {
                Swatch::Fill => area
                    .draw(&Rectangle::new(
                        [(*x, cy - 6), (*x + 16, cy + 6)],
                        c.filled(),
                    ))
                    .map_err(|x| e(&x))?,
                Swatch::Line => area
                    .draw(&PathElement::new(
                        vec![(*x, cy), (*x + 16, cy)],
                        c.stroke_width(3),
                    ))
                    .map_err(|x| e(&x))?,
                Swatch::Outline => area
                    .draw(&Rectangle::new(
                        [(*x, cy - 6), (*x + 16, cy + 6)],
                        c.stroke_width(2),
                    ))
                    .map_err(|x| e(&x))?,
                Swatch::Dot => area
                    .draw(&Circle::new((*x + 8, cy), 5, c.filled()))
                    .map_err(|x| e(&x))?,
            }
            area.draw(&Text::new(
                entry.label.clone(),
                (*x + 22, cy),
                anchored(text_style(SMALL_SIZE, &TEXT), HPos::Left, VPos::Center),
            ))
            .map_err(|x| e(&x))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_labels() {
        assert_eq!(byte_unit(0).name, "B");
        assert_eq!(byte_unit(1023).name, "B");
        assert_eq!(byte_unit(1 << 20).name, "MiB");
        assert_eq!(byte_unit((1 << 30) - 1).name, "MiB");
        assert_eq!(short_bytes(512), "512 B");
        assert_eq!(short_bytes(2 << 20), "2 MiB");
        assert_eq!(short_bytes(3 << 29), "1.5 GiB");
        assert_eq!(short_bytes(5_308_694_528), "4.94 GiB");
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(0.25), "0.25");
    }

    #[test]
    fn ellipsize_keeps_both_ends() {
        assert_eq!(ellipsize("short", 10), "short");
        let e = ellipsize("/very/long/path/to/some/file.py:123 forward", 20);
        assert_eq!(e.chars().count(), 20);
        assert!(e.starts_with("/very/"));
        assert!(e.ends_with("forward"));
    }

    #[test]
    fn axis_prefers_time_and_falls_back_to_events() {
        let mk = |e: Option<u32>, t: Option<i64>| Sample {
            event: e,
            time_us: t,
            ..Default::default()
        };
        let timed = [
            mk(None, None),
            mk(Some(0), Some(1_000)),
            mk(Some(1), Some(3_000)),
        ];
        let ax = XAxis::for_samples(&timed);
        assert_eq!(ax, XAxis::Seconds { origin_us: 1_000 });
        assert_eq!(ax.x(&timed[2]), 0.002);
        assert_eq!(ax.x(&timed[0]), 0.0);
        let untimed = [mk(None, None), mk(Some(0), None), mk(Some(1), Some(5))];
        let ax = XAxis::for_samples(&untimed);
        assert_eq!(ax, XAxis::Events);
        assert_eq!(ax.x(&untimed[2]), 2.0);
    }

    #[test]
    fn legend_wraps_instead_of_overflowing() {
        let entries: Vec<LegendEntry> = (0..12)
            .map(|i| {
                LegendEntry::new(
                    format!("a fairly long legend label {i}"),
                    TEXT,
                    Swatch::Line,
                )
            })
            .collect();
        let rows = legend_rows(&entries, 1000);
        assert!(rows.len() > 1);
        for r in &rows {
            let (x, e) = r.last().unwrap();
            assert!(x + 22 + text_width(&e.label, SMALL_SIZE) <= 1000 - LEGEND_PAD);
        }
    }
}
