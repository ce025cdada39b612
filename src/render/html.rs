//! The self-contained HTML report: one file with inline CSS and inline SVG,
//! no script and no external resource, so it opens from a `file://` URL with
//! the network off and can be attached to a ticket as is. Collapsible stacks
//! use `<details>`, which needs no JavaScript.

use super::charts;
use super::stats::{NA, opt_bytes};
use super::svg::compose::escape;
use super::svg::{ChartError, Svg};
use crate::analysis::report::trace::{CategoryReport, TraceDeviceReport, TraceReport};
use crate::analysis::report::{DeviceReport, OomFinding, Report, moment_text};
use crate::analysis::stats::TraceCoverage;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::memtimeline::Category;
use crate::model::profiler::OpShare;
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
fn incl_pending_at(d: &DeviceReport) -> String {
    let p = &d.peak_allocated_incl_pending;
    moment_text(p.at, p.time_us, d.first_time_us)
}

fn device_section(
    st: &Style,
    out: &mut String,
    r: &Report,
    d: &DeviceReport,
) -> Result<(), ChartError> {
    let _ = writeln!(
        out,
        "<section id=\"device-{0}\">\n<h2>Device {0}</h2>",
        d.device
    );
    // No trace: no peak, only the recorded (final) state.
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
            d.peak_reserved.reserved_bytes(),
            d.peak_reserved.event,
            d.peak_reserved.time_us
        )),
        num(&peak(
            d.peak_allocated.allocated,
            d.peak_allocated.event,
            d.peak_allocated.time_us
        )),
        num(&if d.traced() {
            format!(
                "{} ({})",
                st.bytes(d.peak_allocated_incl_pending.bytes),
                incl_pending_at(d)
            )
        } else {
            "n/a (no trace)".into()
        }),
        num(&st.bytes(d.end.reserved_bytes())),
        num(&st.bytes(d.end.allocated)),
        num(&if d.traced() {
            d.ooms.len().to_string()
        } else {
            "n/a (no trace)".into()
        }),
    );
    oom_verdicts(out, &d.ooms, d.first_time_us);
    key_moments_table(st, out, &d.key_moments, false, |k| {
        d.when(k.at, k.sample.time_us)
    });
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
    out.push_str(&figure(
        &charts::timeline(r, d)?,
        &format!("{memory} of device {}", d.device),
    ));
    out.push_str(&figure(
        &charts::fragmentation(r, d)?,
        &format!("{fragmentation} of device {}", d.device),
    ));
    let _ = writeln!(
        out,
        "<h3>At {} ({})</h3>",
        escape(&d.moment_text()),
        escape(&d.moment_label)
    );
    out.push_str(&figure(
        &charts::segment_map(r, d, MAP_ROWS)?,
        &format!("segment map of device {}", d.device),
    ));
    out.push_str(&figure(
        &charts::gaps(r, d)?,
        &format!("free-gap histogram of device {}", d.device),
    ));
    out.push_str("<h3>Call sites</h3>\n");
    out.push_str(&figure(
        &charts::sites(r, d)?,
        &format!("top call sites of device {}", d.device),
    ));
    let rows: Vec<_> = r.culprits_of(d.device).take(TABLE_SITES).collect();
    if rows.is_empty() {
        out.push_str("<p>No live allocation at this moment.</p>\n");
    } else {
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
    if let Some(w) = r.what_if_of(d.device) {
        what_if_section(st, out, r, w);
    }
    out.push_str("</section>\n");
    Ok(())
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

/// The whole report as one HTML document.
pub fn html(st: &Style, r: &Report) -> Result<String, ChartError> {
    let mut out = String::new();
    head(&mut out, &r.file);
    let events: usize = r.devices.iter().map(|d| d.events).sum();
    let _ = writeln!(
        out,
        "<header><h1>Memory report: {}</h1>\n<p class=\"meta\">{} · {} device(s) · {} trace events</p></header>",
        escape(&r.file),
        escape(&r.format),
        r.devices.len(),
        events
    );
    verdict_section(
        &mut out,
        &super::verdict::lines(st, r),
        r.devices.iter().any(|d| !d.ooms.is_empty()),
    );
    let links: Vec<String> = r
        .devices
        .iter()
        .map(|d| format!("<a href=\"#device-{0}\">device {0}</a>", d.device))
        .collect();
    device_nav(&mut out, &links);
    for d in &r.devices {
        device_section(st, &mut out, r, d)?;
    }

    out.push_str("<section id=\"settings\"><h2>Allocator settings</h2>\n");
    if !r.settings_recorded {
        out.push_str("<p>Not recorded in this file (snapshots carry <code>allocator_settings</code> since PyTorch 2.3).</p>\n");
    } else if r.settings.is_empty() {
        out.push_str("<p>Recorded, but empty.</p>\n");
    } else {
        out.push_str("<table><tr><th>setting</th><th>value</th></tr>\n");
        for (k, v) in &r.settings {
            let _ = writeln!(out, "<tr>{}{}</tr>", cell(k), cell(v));
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");

    out.push_str("<section id=\"quality\"><h2>Data quality</h2>\n");
    if r.coverage.is_empty() {
        out.push_str("<p>No trace in this file (recorded without history, or a bare segment list): only the recorded state is known: no peak and no out-of-memory event.</p>\n");
    } else {
        out.push_str("<table><tr><th>device</th><th>trace events</th><th>time span</th><th>coverage</th></tr>\n");
        for c in &r.coverage {
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
        quality_list(&mut out, &r.quality);
    }
    out.push_str("</section>\n");
    footer(&mut out);
    Ok(out)
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

fn quality_section(out: &mut String, quality: &[String]) {
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

fn trace_device_section(
    st: &Style,
    out: &mut String,
    r: &TraceReport,
    d: &TraceDeviceReport,
) -> Result<(), ChartError> {
    let s = &d.summary;
    let _ = writeln!(
        out,
        "<section id=\"device-{}\">\n<h2>{}</h2>",
        anchor(&d.label),
        escape(&d.heading)
    );
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
    oom_verdicts(out, &d.ooms, d.first_time_us);
    key_moments_table(st, out, &d.key_moments, true, |k| {
        moment_text(k.at, k.sample.time_us, d.first_time_us)
    });
    out.push_str("<h3>Over time</h3>\n");
    out.push_str(&figure(
        &charts::trace_timeline(r, d)?,
        &format!("memory timeline of {}", d.label),
    ));
    let _ = writeln!(
        out,
        "<h3>Live at {} ({}), by operator</h3>",
        escape(&d.moment_text()),
        escape(&d.moment_label)
    );
    match &d.live_by_op {
        None => out.push_str("<p>Not available: this trace's memory events carry no address, so allocations cannot be paired with their frees.</p>\n"),
        Some(v) if v.is_empty() => out.push_str("<p>No live allocation at this moment.</p>\n"),
        Some(v) => ops_table(st, out, v, d.moment_sample.allocated, "live allocations"),
    }
    out.push_str("<p class=\"meta\">Stranded bytes: not measurable for a profiler trace (they need the segment layout).</p>\n");
    if !s.allocations_by_op.is_empty() {
        out.push_str("<h3>Bytes allocated over the trace, by operator</h3>\n");
        let total: u64 = s.allocations_by_op.iter().map(|x| x.bytes).sum();
        ops_table(st, out, &s.allocations_by_op, total, "allocations");
    }
    if !s.reserved_growth.is_empty() {
        out.push_str("<h3>Where reserved memory grew</h3>\n");
        let _ = writeln!(
            out,
            "<p>{} growth(s); {} of them ({}) while the cache already held at least the allocation's bytes free: fragmentation, or free memory in another pool or stream.</p>",
            s.reserved_growth.len(),
            s.growth_with_free_cache,
            st.bytes(s.growth_with_free_cache_bytes)
        );
        let mut steps: Vec<_> = s.reserved_growth.iter().collect();
        steps.sort_by(|a, b| {
            (b.reserved_after - b.reserved_before)
                .cmp(&(a.reserved_after - a.reserved_before))
                .then(a.event.cmp(&b.event))
        });
        out.push_str("<table><tr><th>when</th><th>grew by</th><th>reserved after</th><th>allocation</th><th>free before</th><th>operator</th></tr>\n");
        for g in steps.into_iter().take(TABLE_GROWTH) {
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
    out.push_str("</section>\n");
    Ok(())
}

/// The whole report of a profiler trace as one HTML document.
pub fn trace_html(st: &Style, r: &TraceReport) -> Result<String, ChartError> {
    let mut out = String::new();
    head(&mut out, &r.file);
    let _ = writeln!(
        out,
        "<header><h1>Memory report: {}</h1>\n<p class=\"meta\">{} · {}</p></header>",
        escape(&r.file),
        escape(&r.format),
        escape(&r.kind)
    );
    verdict_section(
        &mut out,
        &r.verdict,
        r.devices.iter().any(|d| !d.ooms.is_empty()),
    );
    let links: Vec<String> = r
        .devices
        .iter()
        .map(|d| {
            format!(
                "<a href=\"#device-{}\">{}</a>",
                anchor(&d.label),
                escape(&d.label)
            )
        })
        .collect();
    device_nav(&mut out, &links);
    for d in &r.devices {
        trace_device_section(st, &mut out, r, d)?;
    }
    out.push_str("<section id=\"missing\"><h2>Not measurable for a profiler trace</h2>\n<table><tr><th>figure</th><th>why</th></tr>\n");
    for (f, why) in &r.missing {
        let _ = writeln!(out, "<tr>{}{}</tr>", cell(f), cell(why));
    }
    out.push_str("</table>\n<p>Record a memory snapshot (<code>torch.cuda.memory._record_memory_history</code> + <code>_dump_snapshot</code>) for these.</p>\n</section>\n");
    quality_section(&mut out, &r.quality);
    footer(&mut out);
    Ok(out)
}

/// Rows of the category table: (category, before profiling, peak, share, end).
pub(crate) fn category_rows(st: &Style, r: &CategoryReport) -> Vec<[String; 5]> {
    let tl = &r.timeline;
    let Some(peak) = tl.peak else {
        return Vec::new();
    };
    let pre = tl.preexisting();
    let end = tl.end();
    let mut rows: Vec<[String; 5]> = Category::ALL
        .iter()
        .map(|&c| {
            let b = peak.bytes[c as usize];
            [
                c.as_str().to_string(),
                pre.map(|p| st.bytes(p.get(c)))
                    .unwrap_or_else(|| "-".into()),
                st.bytes(b),
                if peak.total > 0 {
                    fmt_pct(b as f64 / peak.total as f64)
                } else {
                    "-".into()
                },
                end.map(|e| st.bytes(e.get(c)))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    rows.push([
        "total".into(),
        pre.map(|p| st.bytes(p.total()))
            .unwrap_or_else(|| "-".into()),
        st.bytes(peak.total),
        String::new(),
        end.map(|e| st.bytes(e.total()))
            .unwrap_or_else(|| "-".into()),
    ]);
    rows
}

/// The whole report of a memory-timeline export as one HTML document.
pub fn categories_html(st: &Style, r: &CategoryReport) -> Result<String, ChartError> {
    let mut out = String::new();
    head(&mut out, &r.file);
    let _ = writeln!(
        out,
        "<header><h1>Memory report: {}</h1>\n<p class=\"meta\">{} · {}</p></header>",
        escape(&r.file),
        escape(&r.format),
        escape(&r.kind)
    );
    verdict_section(&mut out, &r.verdict, false);
    out.push_str("<section id=\"categories\"><h2>Live bytes by category</h2>\n");
    out.push_str(&figure(
        &charts::categories(r)?,
        "live tensor bytes by category over time",
    ));
    let rows = category_rows(st, r);
    if !rows.is_empty() {
        out.push_str("<table><tr><th>category</th><th>before profiling</th><th>at the peak</th><th>share of the peak</th><th>end</th></tr>\n");
        for row in rows {
            let _ = writeln!(
                out,
                "<tr>{}{}{}{}{}</tr>",
                cell(&row[0]),
                num(&row[1]),
                num(&row[2]),
                num(&row[3]),
                num(&row[4])
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<p class=\"meta\">Tensor bytes as the memory profiler sees them: unrounded, outside the allocator's cache.</p>\n</section>\n");
    quality_section(&mut out, &r.quality);
    footer(&mut out);
    Ok(out)
}
