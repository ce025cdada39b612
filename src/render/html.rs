//! The self-contained HTML report: one file with inline CSS and inline SVG,
//! no script and no external resource, so it opens from a `file://` URL with
//! the network off and can be attached to a ticket as is. Collapsible stacks
//! use `<details>`, which needs no JavaScript.

use super::charts;
use super::stats::{NA, opt_bytes};
use super::svg::compose::escape;
use super::svg::{ChartError, Svg};
use super::table::largest_growth_first;
use crate::analysis::report::{
    DeviceDetail, DeviceReport, OomFinding, Replayed, Report, ReportDetail, Traced, moment_text,
};
use crate::analysis::stats::TraceCoverage;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::profiler::{DeviceSummary, OpShare};
use crate::timeline::KeyMoment;
use std::fmt::Write;

/// The key-moment table of a device, snapshot or trace: a figure the input
/// cannot give is "n/a"; `operator` adds the operator running at each moment
/// (a trace's). `when` dates a moment.
fn key_moments_table(
    st: &Style,
    out: &mut String,
    moments: &[KeyMoment],
    operator: bool,
    when: impl Fn(&KeyMoment) -> String,
) {
    if moments.is_empty() {
        return;
    }
    out.push_str("<h3>Key moments</h3>\n<table><tr><th>moment</th><th>when</th><th>reserved</th><th>allocated</th><th>free in reserved</th><th>largest free gap</th><th>free gaps</th><th>fragmentation</th>");
    out.push_str(if operator {
        "<th>operator</th></tr>\n"
    } else {
        "</tr>\n"
    });
    for k in moments {
        let s = &k.sample;
        let free = s.reserved.map(|r| r.saturating_sub(s.allocated));
        let _ = write!(
            out,
            "<tr>{}{}{}{}{}",
            cell(&k.label),
            nowrap(&when(k)),
            num(&opt_bytes(st, s.reserved)),
            num(&st.bytes(s.allocated)),
            num(&opt_bytes(st, free)),
        );
        let _ = match &s.layout {
            Some(l) => write!(
                out,
                "{}{}{}",
                num(&st.bytes(l.largest_free_gap)),
                num(&l.free_gaps.to_string()),
                num(&fmt_pct(l.fragmentation)),
            ),
            None => write!(out, "{}{}{}", num(NA), num(NA), num(NA)),
        };
        if operator {
            out.push_str(&cell(k.op.as_deref().unwrap_or("-")));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Culprit rows listed per device.
pub const TABLE_SITES: usize = 20;

/// Segment-map rows in the report.
pub const MAP_ROWS: usize = 36;

pub(crate) const CSS: &str = "\
:root{color-scheme:light}
body{font-family:-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Helvetica,Arial,sans-serif;color:#1e1e1e;background:#fff;margin:0 auto;max-width:1040px;padding:20px 16px 48px;line-height:1.45}
h1{font-size:1.6em;margin:.2em 0}
h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em;margin-top:1.4em}
.meta{color:#555;margin-top:0}
.verdict{background:#f6f7f9;border-left:4px solid #3465c4;padding:10px 16px;margin:12px 0}
.verdict p{margin:.4em 0}
.verdict p.lead{font-weight:bold;font-size:1.08em}
.oom{border-left-color:#d62728}
table{border-collapse:collapse;margin:8px 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.w{white-space:nowrap}
figure{margin:14px 0}
figure svg{max-width:100%;height:auto;display:block;border:1px solid #eee}
details pre{white-space:pre-wrap;font-size:.85em;margin:4px 0;background:#fafafa;padding:6px}
summary{cursor:pointer;color:#3465c4}
ul.sugg li.no{color:#777}
footer{margin-top:3em;color:#777;font-size:.85em}
code{font-size:.92em}
";

pub(crate) fn figure(svg: &Svg, label: &str) -> String {
    let body = svg.body.trim_start();
    let rest = body.strip_prefix("<svg").unwrap_or(body);
    format!(
        "<figure><svg role=\"img\" aria-label=\"{}\"{}</figure>\n",
        escape(label),
        rest.trim_end()
    )
}

pub(crate) fn cell(s: &str) -> String {
    format!("<td>{}</td>", escape(s))
}

pub(crate) fn nowrap(s: &str) -> String {
    format!("<td class=\"w\">{}</td>", escape(s))
}

pub(crate) fn num(s: &str) -> String {
    format!("<td class=\"n\">{}</td>", escape(s))
}

fn coverage_text(c: &TraceCoverage) -> String {
    if c.events == 0 {
        "empty".into()
    } else if c.single_entry {
        "1 entry (recorded with enabled=\"state\"?)".into()
    } else if c.starts_mid_run {
        format!(
            "starts mid-run: {} frees of blocks allocated before the first entry",
            c.frees_without_alloc
        )
    } else {
        "complete from the first allocation".into()
    }
}

/// One verdict box per out-of-memory event: the diagnosis, its details,
/// what to try and any figures that contradict each other. Shared by the
/// snapshot and the profiler-trace reports.
pub(super) fn oom_verdicts(out: &mut String, ooms: &[OomFinding], first_time_us: Option<i64>) {
    for (k, o) in ooms.iter().enumerate() {
        let g = &o.diagnosis;
        let _ = writeln!(
            out,
            "<div class=\"verdict oom\"><p class=\"lead\">Out of memory #{} at {}: {}</p>",
            k + 1,
            escape(&moment_text(
                Some(o.mark.event),
                o.mark.time_us,
                first_time_us
            )),
            escape(&g.headline)
        );
        if !g.details.is_empty() {
            out.push_str("<ul>");
            for x in &g.details {
                let _ = write!(out, "<li>{}</li>", escape(x));
            }
            out.push_str("</ul>\n");
        }
        if !g.suggestions.is_empty() {
            out.push_str("<p>What to try:</p><ul class=\"sugg\">");
            for s in &g.suggestions {
                let _ = write!(
                    out,
                    "<li class=\"{}\"><code>{}</code> {}: {}</li>",
                    if s.applies { "yes" } else { "no" },
                    escape(&s.what),
                    if s.applies {
                        "applies"
                    } else {
                        "does not apply"
                    },
                    escape(&s.why)
                );
            }
            out.push_str("</ul>\n");
        }
        for i in &g.inconsistencies {
            let _ = writeln!(out, "<p>Inconsistent figures: {}</p>", escape(i));
        }
        out.push_str("</div>\n");
    }
}

/// When the peak of allocated bytes including pending frees was reached,
/// in the words of the other peaks.
fn incl_pending_at(d: &DeviceReport, x: &Replayed) -> String {
    let p = &x.peak_allocated_incl_pending;
    moment_text(p.at, p.time_us, d.first_time_us)
}

/// One device's section: its figures, OOMs and key moments, then what its
/// input shows of it (a snapshot's layout and call sites, a trace's
/// operators).
fn device_section(
    st: &Style,
    out: &mut String,
    r: &Report,
    d: &DeviceReport,
) -> Result<(), ChartError> {
    match &d.detail {
        DeviceDetail::Replayed(x) => {
            let _ = writeln!(
                out,
                "<section id=\"device-{0}\">\n<h2>Device {0}</h2>",
                d.device
            );
            replayed_figures(st, out, d, x);
        }
        DeviceDetail::Traced(t) => {
            let _ = writeln!(
                out,
                "<section id=\"device-{}\">\n<h2>{}</h2>",
                anchor(&t.label),
                escape(&t.heading)
            );
            traced_figures(st, out, d, t);
        }
    }
    oom_verdicts(out, &d.ooms, d.first_time_us);
    key_moments_table(st, out, &d.key_moments, d.traced_detail().is_some(), |k| {
        d.when(k.at, k.sample.time_us)
    });
    match &d.detail {
        DeviceDetail::Replayed(_) => replayed_body(st, out, r, d)?,
        DeviceDetail::Traced(t) => traced_body(st, out, r, d, t)?,
    }
    out.push_str("</section>\n");
    Ok(())
}

/// A snapshot's device: its peaks (none without a trace: only the
/// recorded, final, state) and its final figures.
fn replayed_figures(st: &Style, out: &mut String, d: &DeviceReport, x: &Replayed) {
    let peak = |b: u64, e: Option<u32>, t: Option<i64>| {
        if d.traced() {
            format!(
                "{} ({})",
                st.bytes(b),
                moment_text(e.map(|x| x as usize), t, d.first_time_us)
            )
        } else {
            "n/a (no trace)".into()
        }
    };
    let _ = writeln!(
        out,
        "<table><tr><th>trace events</th><th>peak reserved</th><th>peak allocated</th><th title=\"a block counted as allocated until free_completed, as PyTorch's memory_viz counts\">peak allocated incl. pending frees</th><th>final reserved</th><th>final allocated</th><th>out-of-memory events</th></tr>\n<tr>{}{}{}{}{}{}{}</tr></table>",
        num(&d.events.to_string()),
        num(&peak(
            x.peak_reserved.reserved_bytes(),
            x.peak_reserved.event,
            x.peak_reserved.time_us
        )),
        num(&peak(
            x.peak_allocated.allocated,
            x.peak_allocated.event,
            x.peak_allocated.time_us
        )),
        num(&if d.traced() {
            format!(
                "{} ({})",
                st.bytes(x.peak_allocated_incl_pending.bytes),
                incl_pending_at(d, x)
            )
        } else {
            "n/a (no trace)".into()
        }),
        num(&st.bytes(x.end.reserved_bytes())),
        num(&st.bytes(x.end.allocated)),
        num(&if d.traced() {
            d.ooms.len().to_string()
        } else {
            "n/a (no trace)".into()
        }),
    );
}

/// A trace's device: the peaks it records; pending frees are not
/// measurable (its totals leave them out).
fn traced_figures(st: &Style, out: &mut String, d: &DeviceReport, t: &Traced) {
    let s = &t.summary;
    let at = |p: &crate::model::profiler::Peak| {
        moment_text(p.event.map(|e| e as usize), p.time_us, d.first_time_us)
    };
    let _ = writeln!(
        out,
        "<table><tr><th>memory events</th><th>peak reserved</th><th>peak allocated</th><th title=\"a block counted as allocated until free_completed, as PyTorch's memory_viz counts; a profiler trace records the allocator's totals, which leave pending frees out\">peak allocated incl. pending frees</th><th>final reserved</th><th>final allocated</th><th>out-of-memory events</th></tr>\n<tr>{}{}{}{}{}{}{}</tr></table>",
        num(&d.events.to_string()),
        num(&s
            .peak_reserved
            .as_ref()
            .map(|p| format!("{} ({})", st.bytes(p.bytes), at(p)))
            .unwrap_or_else(|| NA.into())),
        num(&s
            .peak_allocated
            .as_ref()
            .map(|p| format!("{} ({})", st.bytes(p.bytes), at(p)))
            .unwrap_or_else(|| NA.into())),
        num(NA),
        num(&opt_bytes(st, s.reserved_end)),
        num(&st.bytes(s.allocated_end)),
        num(&d.ooms.len().to_string()),
    );
}

/// A figure with its label, under the device's name.
fn device_figure(out: &mut String, svg: &Svg, what: &str, d: &DeviceReport) {
    out.push_str(&figure(svg, &format!("{what} of {}", d.name())));
}

/// The heading of what the shown moment holds.
fn moment_heading(out: &mut String, what: &str, d: &DeviceReport, after: &str) {
    let _ = writeln!(
        out,
        "<h3>{what} {} ({}){after}</h3>",
        escape(&d.moment_text()),
        escape(&d.moment_label)
    );
}

/// A snapshot's device over time and at its moment: the charts, the
/// segment map, the free gaps, the call sites and the what-if model.
fn replayed_body(
    st: &Style,
    out: &mut String,
    r: &Report,
    d: &DeviceReport,
) -> Result<(), ChartError> {
    let (heading, memory, fragmentation) = if d.traced() {
        ("Over time", "memory timeline", "fragmentation over time")
    } else {
        (
            "The recorded state (no trace)",
            "memory in the recorded state",
            "fragmentation in the recorded state",
        )
    };
    let _ = writeln!(out, "<h3>{heading}</h3>");
    device_figure(out, &charts::timeline(r, d)?, memory, d);
    device_figure(out, &charts::fragmentation(r, d)?, fragmentation, d);
    moment_heading(out, "At", d, "");
    device_figure(out, &charts::segment_map(r, d, MAP_ROWS)?, "segment map", d);
    device_figure(out, &charts::gaps(r, d)?, "free-gap histogram", d);
    out.push_str("<h3>Call sites</h3>\n");
    device_figure(out, &charts::sites(r, d)?, "top call sites", d);
    sites_table(st, out, r, d);
    if let Some(w) = r.what_if_of(d.device) {
        what_if_section(st, out, r, w);
    }
    Ok(())
}

/// The call sites holding memory at the device's moment, with their stacks.
fn sites_table(st: &Style, out: &mut String, r: &Report, d: &DeviceReport) {
    let rows: Vec<_> = r.culprits_of(d.device).take(TABLE_SITES).collect();
    if rows.is_empty() {
        out.push_str("<p>No live allocation at this moment.</p>\n");
        return;
    }
    out.push_str("<table><tr><th>#</th><th>call site</th><th>live</th><th>stranded</th><th>live blocks</th><th>stack</th></tr>\n");
    for (i, c) in rows.iter().enumerate() {
        let stack = if c.stack.is_empty() {
            "<td>no stack recorded</td>".to_string()
        } else {
            format!(
                "<td><details><summary>{} frame{}</summary><pre>{}</pre></details></td>",
                c.stack.len(),
                if c.stack.len() == 1 { "" } else { "s" },
                escape(&c.stack.join("\n"))
            )
        };
        let _ = writeln!(
            out,
            "<tr>{}{}{}{}{}{stack}</tr>",
            num(&(i + 1).to_string()),
            cell(&c.site),
            num(&st.bytes(c.live_bytes)),
            num(&st.bytes(c.stranded_bytes)),
            num(&c.blocks.len().to_string()),
        );
    }
    out.push_str("</table>\n");
}

/// The what-if model's chart and answer, labelled as a model with its
/// fidelity so nobody takes it for a measurement.
fn what_if_section(st: &Style, out: &mut String, r: &Report, w: &crate::sim::SimReport) {
    use super::simulate::{answer, chart_svg, expandable_answer, fidelity_line};
    out.push_str("<h3>What if: other allocator settings (a model)</h3>\n");
    if let Some(a) = crate::analysis::what_if::expandable_answer(w) {
        let a = expandable_answer(st, &a);
        let _ = writeln!(out, "<p class=\"lead\"><b>{}</b></p>", escape(&a));
    }
    let _ = writeln!(out, "<p>{}</p>", escape(&fidelity_line(w)));
    let title = format!(
        "Reserved over the trace per setting · {} · device {} (model)",
        r.file, w.device
    );
    let svg = Svg {
        width: 960,
        height: 460,
        body: chart_svg(&title, w),
    };
    out.push_str(&figure(
        &svg,
        &format!("what-if model of reserved memory, device {}", w.device),
    ));
    if let Some(a) = answer(st, w) {
        let _ = writeln!(out, "<p>{}</p>", escape(&a));
    }
    let _ = writeln!(
        out,
        "<p class=\"meta\">This is {}. <code>fragscope simulate</code> tries more settings.</p>",
        escape(w.model)
    );
}

/// The whole report as one HTML document: a snapshot's ends with its
/// allocator settings and its trace's coverage, a trace's with the figures
/// it cannot give.
pub fn html(st: &Style, r: &Report) -> Result<String, ChartError> {
    let mut out = String::new();
    report_head(st, &mut out, r);
    for d in &r.devices {
        device_section(st, &mut out, r, d)?;
    }
    match &r.detail {
        ReportDetail::Snapshot {
            settings,
            settings_recorded,
            coverage,
        } => {
            settings_section(&mut out, settings, *settings_recorded);
            snapshot_quality_section(&mut out, r, coverage);
        }
        ReportDetail::Trace { missing, .. } => {
            missing_section(&mut out, missing);
            quality_section(&mut out, &r.quality);
        }
    }
    footer(&mut out);
    Ok(out)
}

/// The snapshot's `allocator_settings`, or why there are none.
fn settings_section(out: &mut String, settings: &[(String, String)], recorded: bool) {
    out.push_str("<section id=\"settings\"><h2>Allocator settings</h2>\n");
    if !recorded {
        out.push_str("<p>Not recorded in this file (snapshots carry <code>allocator_settings</code> since PyTorch 2.3).</p>\n");
    } else if settings.is_empty() {
        out.push_str("<p>Recorded, but empty.</p>\n");
    } else {
        out.push_str("<table><tr><th>setting</th><th>value</th></tr>\n");
        for (k, v) in settings {
            let _ = writeln!(out, "<tr>{}{}</tr>", cell(k), cell(v));
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
}

/// A snapshot's data quality: how much of the run each trace covers, then
/// the notes.
fn snapshot_quality_section(out: &mut String, r: &Report, coverage: &[TraceCoverage]) {
    out.push_str("<section id=\"quality\"><h2>Data quality</h2>\n");
    if coverage.is_empty() {
        out.push_str("<p>No trace in this file (recorded without history, or a bare segment list): only the recorded state is known: no peak and no out-of-memory event.</p>\n");
    } else {
        out.push_str("<table><tr><th>device</th><th>trace events</th><th>time span</th><th>coverage</th></tr>\n");
        for c in coverage {
            let span = match (c.first_time_us, c.last_time_us) {
                (Some(a), Some(b)) => format!("{:.3} s", (b - a) as f64 / 1e6),
                _ => "no time_us".into(),
            };
            let _ = writeln!(
                out,
                "<tr>{}{}{}{}</tr>",
                num(&c.device.to_string()),
                num(&c.events.to_string()),
                num(&span),
                cell(&coverage_text(c))
            );
        }
        out.push_str("</table>\n");
    }
    if r.quality.is_empty() {
        if r.devices.iter().any(|d| d.events > 0) {
            out.push_str("<p>No data-quality issue: every trace event replayed cleanly and the replay reproduced the recorded final state.</p>\n");
        } else {
            out.push_str("<p>No data-quality issue found.</p>\n");
        }
    } else {
        quality_list(out, &r.quality);
    }
    out.push_str("</section>\n");
}

/// Operator rows listed per table.
pub const TABLE_OPS: usize = 20;

/// Reserved-growth rows listed.
pub const TABLE_GROWTH: usize = 10;

/// The document head, with the inline style sheet.
pub(crate) fn head(out: &mut String, file: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Memory report: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        escape(file)
    );
}

/// The verdict box; `oom` colors it as a failure.
pub(crate) fn verdict_section(out: &mut String, verdict: &[String], oom: bool) {
    let _ = writeln!(
        out,
        "<section id=\"verdict\"><h2>Verdict</h2>\n<div class=\"verdict{}\">",
        if oom { " oom" } else { "" }
    );
    for (i, v) in verdict.iter().enumerate() {
        let _ = writeln!(
            out,
            "<p{}>{}</p>",
            if i == 0 { " class=\"lead\"" } else { "" },
            escape(v)
        );
    }
    out.push_str("</div></section>\n");
}

/// The data-quality notes as a list.
pub(crate) fn quality_list(out: &mut String, quality: &[String]) {
    out.push_str("<ul>\n");
    for q in quality {
        let _ = writeln!(out, "<li>{}</li>", escape(q));
    }
    out.push_str("</ul>\n");
}

pub(crate) fn quality_section(out: &mut String, quality: &[String]) {
    out.push_str("<section id=\"quality\"><h2>Data quality</h2>\n");
    if quality.is_empty() {
        out.push_str("<p>No data-quality issue found.</p>\n");
    } else {
        quality_list(out, quality);
    }
    out.push_str("</section>\n");
}

/// Links to the device sections, where there is more than one.
fn device_nav(out: &mut String, links: &[String]) {
    if links.len() > 1 {
        out.push_str("<nav><p>Devices: ");
        out.push_str(&links.join(" · "));
        out.push_str("</p></nav>\n");
    }
}

/// The footer that closes the document.
pub(crate) fn footer(out: &mut String) {
    let _ = write!(
        out,
        "<footer>fragscope {} · charts are downsampled (minimum and maximum of every bucket kept)</footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
}

fn anchor(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn ops_table(st: &Style, out: &mut String, ops: &[OpShare], total: u64, count_header: &str) {
    out.push_str(&format!(
        "<table><tr><th>#</th><th>operator</th><th>bytes</th><th>share</th><th>{count_header}</th></tr>\n"
    ));
    for (i, s) in ops.iter().take(TABLE_OPS).enumerate() {
        let _ = writeln!(
            out,
            "<tr>{}{}{}{}{}</tr>",
            num(&(i + 1).to_string()),
            cell(&s.op),
            num(&st.bytes(s.bytes)),
            num(&if total > 0 {
                fmt_pct(s.bytes as f64 / total as f64)
            } else {
                String::new()
            }),
            num(&if s.events == 0 {
                "-".to_string()
            } else {
                s.events.to_string()
            }),
        );
    }
    out.push_str("</table>\n");
    if ops.len() > TABLE_OPS {
        let _ = writeln!(
            out,
            "<p class=\"meta\">… and {} more operators.</p>",
            ops.len() - TABLE_OPS
        );
    }
}

/// A trace's device over time and at its moment: the timeline, the live
/// bytes by operator, the allocations by operator and where reserved
/// memory grew.
fn traced_body(
    st: &Style,
    out: &mut String,
    r: &Report,
    d: &DeviceReport,
    t: &Traced,
) -> Result<(), ChartError> {
    let s = &t.summary;
    out.push_str("<h3>Over time</h3>\n");
    device_figure(out, &charts::timeline(r, d)?, "memory timeline", d);
    moment_heading(out, "Live at", d, ", by operator");
    match &t.live_by_op {
        None => out.push_str("<p>Not available: this trace's memory events carry no address, so allocations cannot be paired with their frees.</p>\n"),
        Some(v) if v.is_empty() => out.push_str("<p>No live allocation at this moment.</p>\n"),
        Some(v) => ops_table(st, out, v, t.moment_sample.allocated, "live allocations"),
    }
    out.push_str("<p class=\"meta\">Stranded bytes: not measurable for a profiler trace (they need the segment layout).</p>\n");
    if !s.allocations_by_op.is_empty() {
        out.push_str("<h3>Bytes allocated over the trace, by operator</h3>\n");
        let total: u64 = s.allocations_by_op.iter().map(|x| x.bytes).sum();
        ops_table(st, out, &s.allocations_by_op, total, "allocations");
    }
    if !s.reserved_growth.is_empty() {
        growth_table(st, out, d, s);
    }
    Ok(())
}

/// Where reserved memory grew, the largest growths first.
fn growth_table(st: &Style, out: &mut String, d: &DeviceReport, s: &DeviceSummary) {
    out.push_str("<h3>Where reserved memory grew</h3>\n");
    let _ = writeln!(
        out,
        "<p>{} growth(s); {} of them ({}) while the cache already held at least the allocation's bytes free: fragmentation, or free memory in another pool or stream.</p>",
        s.reserved_growth.len(),
        s.growth_with_free_cache,
        st.bytes(s.growth_with_free_cache_bytes)
    );
    out.push_str("<table><tr><th>when</th><th>grew by</th><th>reserved after</th><th>allocation</th><th>free before</th><th>operator</th></tr>\n");
    for g in largest_growth_first(&s.reserved_growth)
        .into_iter()
        .take(TABLE_GROWTH)
    {
        let _ = writeln!(
            out,
            "<tr>{}{}{}{}{}{}</tr>",
            nowrap(&moment_text(
                Some(g.event as usize),
                Some(g.time_us),
                d.first_time_us
            )),
            num(&st.bytes(g.reserved_after - g.reserved_before)),
            num(&st.bytes(g.reserved_after)),
            num(&st.bytes(g.bytes)),
            num(&st.bytes(g.free_before)),
            cell(g.op.as_deref().unwrap_or("-")),
        );
    }
    out.push_str("</table>\n");
}

/// The heading, the verdict and the links to the device sections.
fn report_head(st: &Style, out: &mut String, r: &Report) {
    head(out, &r.file);
    match &r.detail {
        ReportDetail::Snapshot { .. } => {
            let events: usize = r.devices.iter().map(|d| d.events).sum();
            let _ = writeln!(
                out,
                "<header><h1>Memory report: {}</h1>\n<p class=\"meta\">{} · {} device(s) · {} trace events</p></header>",
                escape(&r.file),
                escape(&r.format),
                r.devices.len(),
                events
            );
        }
        ReportDetail::Trace { kind, .. } => kind_header(out, &r.file, &r.format, kind),
    }
    verdict_section(out, &super::verdict::lines(st, r), r.any_oom());
    let links: Vec<String> = r
        .devices
        .iter()
        .map(|d| match d.traced_detail() {
            None => format!("<a href=\"#device-{0}\">device {0}</a>", d.device),
            Some(t) => format!(
                "<a href=\"#device-{}\">{}</a>",
                anchor(&t.label),
                escape(&t.label)
            ),
        })
        .collect();
    device_nav(out, &links);
}

/// The header of a report whose input is named by its kind.
pub(crate) fn kind_header(out: &mut String, file: &str, format: &str, kind: &str) {
    let _ = writeln!(
        out,
        "<header><h1>Memory report: {}</h1>\n<p class=\"meta\">{} · {}</p></header>",
        escape(file),
        escape(format),
        escape(kind)
    );
}

/// What a profiler trace cannot give, and why.
fn missing_section(out: &mut String, missing: &[(String, String)]) {
    out.push_str("<section id=\"missing\"><h2>Not measurable for a profiler trace</h2>\n<table><tr><th>figure</th><th>why</th></tr>\n");
    for (f, why) in missing {
        let _ = writeln!(out, "<tr>{}{}</tr>", cell(f), cell(why));
    }
    out.push_str("</table>\n<p>Record a memory snapshot (<code>torch.cuda.memory._record_memory_history</code> + <code>_dump_snapshot</code>) for these.</p>\n</section>\n");
}
