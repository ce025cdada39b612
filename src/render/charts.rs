//! The charts of a [`Report`]: picks the figures of each device out of the
//! report and hands them to the chart modules under [`super::svg`]; also the
//! one-page summary image (verdict, timeline, segment map).

use super::svg::categories::{CategoriesChart, categories_svg};
use super::svg::compose::{Para, stack, text_panel};
use super::svg::fragmentation::{FragmentationChart, fragmentation_svg};
use super::svg::gaps::{GapsChart, gaps_svg};
use super::svg::segmap::{Highlight, SegmentMapChart, segmap_svg};
use super::svg::sites::{SiteBar, SitesChart, sites_svg};
use super::svg::timeline::{OomMark, TimelineChart, timeline_svg};
use super::svg::{ChartError, Svg, WIDTH};
use crate::analysis::report::trace::CategoryReport;
use crate::analysis::report::{DeviceDetail, DeviceReport, Replayed, Report, Traced};
use crate::core::style::Style;
use crate::core::units::fmt_binary;
use crate::model::profiler::Peak;
use crate::timeline::Sample;

/// Culprits outlined on the segment map.
pub const HIGHLIGHT_SITES: usize = 5;

/// Blocks outlined per culprit (its largest).
pub const HIGHLIGHT_BLOCKS: usize = 50;

/// Sites in the call-site chart.
pub const CHART_SITES: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reserved, allocated, free-in-reserved and largest free gap over time.
    Timeline,
    /// Fragmentation ratio and number of free gaps over time.
    Fragmentation,
    /// Every segment to scale at one moment, blocks colored by state.
    Segments,
    /// Histogram of free-gap sizes at one moment, failing request marked.
    Gaps,
    /// Live and stranded bytes of the top call sites.
    Sites,
}

fn title(what: &str, r: &Report, d: &DeviceReport) -> String {
    format!("{what} · {} · {}", r.file, d.name())
}

fn marks(d: &DeviceReport) -> Vec<OomMark> {
    d.ooms.iter().map(|o| o.mark.clone()).collect()
}

/// Charts of a device without a trace show its one recorded state: no
/// time axis to speak of, and no peak to mark.
fn over_time(what: &str, d: &DeviceReport) -> String {
    if d.traced() {
        format!("{what} over time")
    } else {
        format!("{what} in the recorded state (no trace)")
    }
}

/// The memory timeline of a device: a snapshot's reserved, allocated,
/// free-in-reserved and largest free gap; a trace's allocated and (when
/// recorded) reserved and free-in-reserved, with no largest-free-gap line.
pub fn timeline(r: &Report, d: &DeviceReport) -> Result<Svg, ChartError> {
    let t = title(&over_time("Memory", d), r, d);
    let m = marks(d);
    let mut c = TimelineChart::new(&t, &d.samples, &m);
    match &d.detail {
        DeviceDetail::Replayed(x) => {
            if d.traced() {
                c.peak_reserved = Some(x.peak_reserved);
                c.peak_allocated = Some(x.peak_allocated);
            }
        }
        DeviceDetail::Traced(x) => trace_peaks(&mut c, x),
    }
    c.first_time_us = d.first_time_us;
    timeline_svg(&c)
}

/// A trace's peaks as the samples the chart marks; it draws reserved only
/// where the trace records it, and no largest free gap.
fn trace_peaks(c: &mut TimelineChart, x: &Traced) {
    c.reserved = x.reserved_known;
    c.largest_gap = false;
    let at = |p: &Peak, set: fn(&mut Sample, u64)| {
        let mut s = Sample {
            event: p.event,
            time_us: p.time_us,
            ..Default::default()
        };
        set(&mut s, p.bytes);
        s
    };
    c.peak_reserved = x
        .summary
        .peak_reserved
        .as_ref()
        .map(|p| at(p, |s, b| s.reserved = Some(b)));
    c.peak_allocated = x
        .summary
        .peak_allocated
        .as_ref()
        .map(|p| at(p, |s, b| s.allocated = b));
}

/// The replayed layout a chart needs; a trace's device has none.
fn layout<'a>(chart: &'static str, d: &'a DeviceReport) -> Result<&'a Replayed, ChartError> {
    d.replayed().ok_or_else(|| ChartError {
        chart,
        msg: format!(
            "not measurable for {}: a profiler trace records no segment layout",
            d.name()
        ),
    })
}

pub fn fragmentation(r: &Report, d: &DeviceReport) -> Result<Svg, ChartError> {
    let x = layout("fragmentation", d)?;
    let t = title(&over_time("Fragmentation", d), r, d);
    let m = marks(d);
    let mut c = FragmentationChart::new(&t, &d.samples, &m);
    c.highest = d.traced().then_some(x.highest_fragmentation);
    c.first_time_us = d.first_time_us;
    fragmentation_svg(&c)
}

fn highlights(r: &Report, d: &DeviceReport) -> Vec<Highlight> {
    let mut out = Vec::new();
    for (k, c) in r.culprits_of(d.device).take(HIGHLIGHT_SITES).enumerate() {
        for a in c.blocks.iter().take(HIGHLIGHT_BLOCKS) {
            out.push(Highlight {
                address: *a,
                label: format!("#{}", k + 1),
            });
        }
    }
    out
}

pub fn segment_map(r: &Report, d: &DeviceReport, max_rows: usize) -> Result<Svg, ChartError> {
    let x = layout("segment map", d)?;
    let t = title("Segments", r, d);
    let h = highlights(r, d);
    let s = &x.moment_stats;
    let mut c = SegmentMapChart::new(&t, &x.segments);
    c.subtitle = format!(
        "At {} ({}): {} allocated, {} free in reserved, largest free gap {}",
        d.moment_text(),
        d.moment_label,
        fmt_binary(s.allocated_bytes),
        fmt_binary(s.free_bytes()),
        fmt_binary(s.largest_free_block_bytes)
    );
    c.highlights = &h;
    c.request = x.failed_request;
    c.max_rows = max_rows;
    segmap_svg(&c)
}

pub fn gaps(r: &Report, d: &DeviceReport) -> Result<Svg, ChartError> {
    let x = layout("free-gap", d)?;
    let t = title(&format!("Free gaps at {}", d.moment_text()), r, d);
    let g = d.gaps();
    gaps_svg(&GapsChart::new(&t, &g, x.failed_request))
}

pub fn sites(r: &Report, d: &DeviceReport) -> Result<Svg, ChartError> {
    let t = title(&format!("Top call sites at {}", d.moment_text()), r, d);
    let bars: Vec<SiteBar> = r
        .culprits_of(d.device)
        .take(CHART_SITES)
        .map(|c| SiteBar {
            label: c.site.clone(),
            live: c.live_bytes,
            stranded: c.stranded_bytes,
        })
        .collect();
    sites_svg(&SitesChart::new(&t, &bars))
}

/// One chart kind for every device of the report, stacked.
pub fn plot(kind: Kind, r: &Report, max_rows: usize) -> Result<Svg, ChartError> {
    let mut panels = Vec::new();
    for d in &r.devices {
        panels.push(match kind {
            Kind::Timeline => timeline(r, d)?,
            Kind::Fragmentation => fragmentation(r, d)?,
            Kind::Segments => segment_map(r, d, max_rows)?,
            Kind::Gaps => gaps(r, d)?,
            Kind::Sites => sites(r, d)?,
        });
    }
    if panels.is_empty() {
        return Ok(text_panel(
            &[Para::new(
                format!("{}: no device has segments or trace events", r.file),
                18,
                false,
                "#333333",
            )],
            WIDTH,
        ));
    }
    Ok(stack(&panels, 16))
}

/// The single-page summary: verdict, the main device's timeline and, for
/// a snapshot, its segment map at the shown moment.
pub fn summary(st: &Style, r: &Report) -> Result<Svg, ChartError> {
    let mut panels = vec![summary_panel(&r.file, &super::verdict::lines(st, r))];
    if let Some(d) = r.main_device() {
        panels.push(timeline(r, d)?);
        if d.replayed().is_some() {
            panels.push(segment_map(r, d, 16)?);
        }
    }
    Ok(stack(&panels, 8))
}

/// The verdict as the text panel that heads a one-page summary.
pub(crate) fn summary_panel(file: &str, verdict: &[String]) -> Svg {
    let mut paras = vec![Para::new(
        format!("fragscope report: {file}"),
        24,
        true,
        "#1e1e1e",
    )];
    for (i, v) in verdict.iter().enumerate() {
        paras.push(Para::new(
            v,
            if i == 0 { 18 } else { 16 },
            i == 0,
            "#1e1e1e",
        ));
    }
    text_panel(&paras, WIDTH)
}

/// The stacked chart of live bytes by category.
pub fn categories(r: &CategoryReport) -> Result<Svg, ChartError> {
    let t = format!("Live tensor bytes by category · {}", r.file);
    // The report's timeline is downsampled: a few hundred samples.
    let samples = r.timeline.samples.to_vec();
    categories_svg(&CategoriesChart::new(&t, &samples))
}

/// The one-page summary of a memory-timeline export: verdict and the
/// stacked chart.
pub fn categories_summary(r: &CategoryReport) -> Result<Svg, ChartError> {
    Ok(stack(
        &[summary_panel(&r.file, &r.verdict), categories(r)?],
        8,
    ))
}
