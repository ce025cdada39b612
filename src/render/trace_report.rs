//! `fragscope report` for a profiler trace ([`TraceReport`]) or a
//! memory-timeline export ([`CategoryReport`]): the same three forms as for
//! a snapshot (self-contained HTML, a one-page SVG, Markdown), with the
//! snapshot report's headings, columns and units for the figures both have,
//! `n/a` for the ones a trace cannot give, and a section that says why.

use super::html::{CSS, cell, figure, nowrap, num, oom_verdicts};
use super::markdown::md;
use super::svg::categories::{CategoriesChart, categories_svg};
use super::svg::compose::{Para, escape, stack, text_panel};
use super::svg::timeline::{OomMark, TimelineChart, timeline_svg};
use super::svg::{ChartError, Svg, WIDTH};
use crate::analysis::report::trace::{CategoryReport, TraceDeviceReport, TraceReport, moment_text};
use crate::core::units::{fmt_bytes, fmt_pct};
use crate::model::memtimeline::Category;
use crate::model::profiler::{OpShare, Peak};
use crate::timeline::Sample;
use std::fmt::Write;

/// Operator rows listed per table.
pub const TABLE_OPS: usize = 20;
/// Reserved-growth rows listed.
pub const TABLE_GROWTH: usize = 10;
const NA: &str = "n/a";

fn opt_bytes(x: Option<u64>) -> String {
    x.map(fmt_bytes).unwrap_or_else(|| NA.into())
}

/// The memory timeline of one trace device: allocated and (when recorded)
/// reserved and free-in-reserved; no largest-free-gap line.
pub fn timeline(r: &TraceReport, d: &TraceDeviceReport) -> Result<Svg, ChartError> {
    let t = format!("Memory over time · {} · {}", r.file, d.label);
    let marks: Vec<OomMark> = d.ooms.iter().map(|o| o.mark.clone()).collect();
    let mut c = TimelineChart::new(&t, &d.samples, &marks);
    c.reserved = d.reserved_known;
    c.largest_gap = false;
    c.first_time_us = d.first_time_us;
    let at = |p: &Peak, set: fn(&mut Sample, u64)| {
        let mut s = Sample {
            event: p.event,
            time_us: p.time_us,
            ..Default::default()
        };
        set(&mut s, p.bytes);
        s
    };
    c.peak_reserved = d
        .summary
        .peak_reserved
        .as_ref()
        .map(|p| at(p, |s, b| s.reserved = b));
    c.peak_allocated = d
        .summary
        .peak_allocated
        .as_ref()
        .map(|p| at(p, |s, b| s.allocated = b));
    timeline_svg(&c)
}

fn head(out: &mut String, file: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Memory report: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        escape(file)
    );
}

fn verdict_section(out: &mut String, verdict: &[String], oom: bool) {
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

fn quality_section(out: &mut String, quality: &[String]) {
    out.push_str("<section id=\"quality\"><h2>Data quality</h2>\n");
    if quality.is_empty() {
        out.push_str("<p>No data-quality issue found.</p>\n");
    } else {
        out.push_str("<ul>\n");
        for q in quality {
            let _ = writeln!(out, "<li>{}</li>", escape(q));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn footer(out: &mut String) {
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

fn ops_table(out: &mut String, ops: &[OpShare], total: u64, count_header: &str) {
    out.push_str(&format!(
        "<table><tr><th>#</th><th>operator</th><th>bytes</th><th>share</th><th>{count_header}</th></tr>\n"
    ));
    for (i, s) in ops.iter().take(TABLE_OPS).enumerate() {
        let _ = writeln!(
            out,
            "<tr>{}{}{}{}{}</tr>",
            num(&(i + 1).to_string()),
            cell(&s.op),
            num(&fmt_bytes(s.bytes)),
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

fn device_section(
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
            .map(|p| format!("{} ({})", fmt_bytes(p.bytes), at(p)))
            .unwrap_or_else(|| NA.into())),
        num(&s
            .peak_allocated
            .as_ref()
            .map(|p| format!("{} ({})", fmt_bytes(p.bytes), at(p)))
            .unwrap_or_else(|| NA.into())),
        num(NA),
        num(&opt_bytes(s.reserved_end)),
        num(&fmt_bytes(s.allocated_end)),
        num(&d.ooms.len().to_string()),
    );
    oom_verdicts(out, &d.ooms, d.first_time_us);
    if !d.key_moments.is_empty() {
        out.push_str("<h3>Key moments</h3>\n<table><tr><th>moment</th><th>when</th><th>reserved</th><th>allocated</th><th>free in reserved</th><th>largest free gap</th><th>free gaps</th><th>fragmentation</th><th>operator</th></tr>\n");
        for k in &d.key_moments {
            let x = &k.sample;
            let _ = writeln!(
                out,
                "<tr>{}{}{}{}{}{}{}{}{}</tr>",
                cell(&k.label),
                nowrap(&moment_text(k.at, x.time_us, d.first_time_us)),
                num(&opt_bytes(x.reserved)),
                num(&fmt_bytes(x.allocated)),
                num(&opt_bytes(x.external_free)),
                num(NA),
                num(NA),
                num(NA),
                cell(k.op.as_deref().unwrap_or("-")),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<h3>Over time</h3>\n");
    out.push_str(&figure(
        &timeline(r, d)?,
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
        Some(v) => ops_table(out, v, d.moment_sample.allocated, "live allocations"),
    }
    out.push_str("<p class=\"meta\">Stranded bytes: not measurable for a profiler trace (they need the segment layout).</p>\n");
    if !s.allocations_by_op.is_empty() {
        out.push_str("<h3>Bytes allocated over the trace, by operator</h3>\n");
        let total: u64 = s.allocations_by_op.iter().map(|x| x.bytes).sum();
        ops_table(out, &s.allocations_by_op, total, "allocations");
    }
    if !s.reserved_growth.is_empty() {
        out.push_str("<h3>Where reserved memory grew</h3>\n");
        let _ = writeln!(
            out,
            "<p>{} growth(s); {} of them ({}) while the cache already held at least the allocation's bytes free: fragmentation, or free memory in another pool or stream.</p>",
            s.reserved_growth.len(),
            s.growth_with_free_cache,
            fmt_bytes(s.growth_with_free_cache_bytes)
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
                num(&fmt_bytes(g.reserved_after - g.reserved_before)),
                num(&fmt_bytes(g.reserved_after)),
                num(&fmt_bytes(g.bytes)),
                num(&fmt_bytes(g.free_before)),
                cell(g.op.as_deref().unwrap_or("-")),
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The whole report of a profiler trace as one HTML document.
pub fn html(r: &TraceReport) -> Result<String, ChartError> {
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
    if r.devices.len() > 1 {
        out.push_str("<nav><p>Devices: ");
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
        out.push_str(&links.join(" · "));
        out.push_str("</p></nav>\n");
    }
    for d in &r.devices {
        device_section(&mut out, r, d)?;
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

fn summary_panel(file: &str, verdict: &[String]) -> Svg {
    let mut paras = vec![Para::new(
        format!("fragscope report: {file}"),
        24,
        true,
        "#1e1e1e",
    )];
    for (i, v) in verdict.iter().enumerate() {
        paras.push(Para::new(
            v.clone(),
            if i == 0 { 18 } else { 16 },
            i == 0,
            "#1e1e1e",
        ));
    }
    text_panel(&paras, WIDTH)
}

/// The one-page summary: verdict and the main device's timeline.
pub fn summary(r: &TraceReport) -> Result<Svg, ChartError> {
    let mut panels = vec![summary_panel(&r.file, &r.verdict)];
    if let Some(d) = r.main_device() {
        panels.push(timeline(r, d)?);
    }
    Ok(stack(&panels, 8))
}

/// The report as Markdown, with the snapshot report's tables.
pub fn markdown(r: &TraceReport, svg_link: Option<&str>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Memory report: `{}`\n", r.file.replace('`', "'"));
    quote(&mut o, &r.verdict);
    if let Some(link) = svg_link {
        let _ = writeln!(o, "![memory summary of {}]({})\n", md(&r.file), link);
    }
    if !r.devices.is_empty() {
        o.push_str("| device | events | peak reserved | peak allocated | peak allocated incl. pending frees | final reserved | final allocated | OOMs |\n");
        o.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for d in &r.devices {
            let s = &d.summary;
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                md(&d.label),
                d.events,
                opt_bytes(s.peak_reserved.as_ref().map(|p| p.bytes)),
                opt_bytes(s.peak_allocated.as_ref().map(|p| p.bytes)),
                NA,
                opt_bytes(s.reserved_end),
                fmt_bytes(s.allocated_end),
                d.ooms.len()
            );
        }
        o.push_str("\nPeak allocated incl. pending frees (a block counted until `free_completed`, as PyTorch's memory_viz does) is not measurable for a profiler trace: its totals leave pending frees out.\n\n");
    }
    for d in &r.devices {
        if d.key_moments.is_empty() {
            continue;
        }
        let _ = writeln!(o, "### Key moments, {}\n", md(&d.label));
        o.push_str("| moment | when | reserved | allocated | free in reserved | largest free gap | fragmentation |\n");
        o.push_str("|---|---|---:|---:|---:|---:|---:|\n");
        for k in &d.key_moments {
            let x = &k.sample;
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {NA} | {NA} |",
                md(&k.label),
                md(&moment_text(k.at, x.time_us, d.first_time_us)),
                opt_bytes(x.reserved),
                fmt_bytes(x.allocated),
                opt_bytes(x.external_free),
            );
        }
        o.push('\n');
    }
    for d in &r.devices {
        let Some(v) = &d.live_by_op else { continue };
        if v.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "### Live by operator, {} at {}\n",
            md(&d.label),
            md(&d.moment_text())
        );
        o.push_str("| # | operator | live | share |\n|---:|---|---:|---:|\n");
        for (i, s) in v.iter().take(10).enumerate() {
            let _ = writeln!(
                o,
                "| {} | `{}` | {} | {} |",
                i + 1,
                md(&s.op).replace('`', "'"),
                fmt_bytes(s.bytes),
                if d.moment_sample.allocated > 0 {
                    fmt_pct(s.bytes as f64 / d.moment_sample.allocated as f64)
                } else {
                    String::new()
                }
            );
        }
        o.push('\n');
    }
    if !r.quality.is_empty() {
        o.push_str("<details><summary>Data quality</summary>\n\n");
        for q in &r.quality {
            let _ = writeln!(o, "- {}", md(q));
        }
        o.push_str("\n</details>\n");
    }
    o
}

fn quote(o: &mut String, verdict: &[String]) {
    for v in verdict {
        let _ = writeln!(o, "> {}", md(v));
        o.push_str(">\n");
    }
    if o.ends_with(">\n") {
        o.truncate(o.len() - 2);
    }
    o.push('\n');
}

/// The stacked chart of live bytes by category.
pub fn categories(r: &CategoryReport) -> Result<Svg, ChartError> {
    let t = format!("Live tensor bytes by category · {}", r.file);
    categories_svg(&CategoriesChart::new(&t, &r.timeline.samples))
}

/// Rows of the category table: (category, before profiling, peak, share, end).
fn category_rows(r: &CategoryReport) -> Vec<[String; 5]> {
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
                pre.map(|p| fmt_bytes(p.get(c)))
                    .unwrap_or_else(|| "-".into()),
                fmt_bytes(b),
                if peak.total > 0 {
                    fmt_pct(b as f64 / peak.total as f64)
                } else {
                    "-".into()
                },
                end.map(|e| fmt_bytes(e.get(c)))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    rows.push([
        "total".into(),
        pre.map(|p| fmt_bytes(p.total()))
            .unwrap_or_else(|| "-".into()),
        fmt_bytes(peak.total),
        String::new(),
        end.map(|e| fmt_bytes(e.total()))
            .unwrap_or_else(|| "-".into()),
    ]);
    rows
}

pub fn categories_html(r: &CategoryReport) -> Result<String, ChartError> {
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
        &categories(r)?,
        "live tensor bytes by category over time",
    ));
    let rows = category_rows(r);
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

pub fn categories_summary(r: &CategoryReport) -> Result<Svg, ChartError> {
    Ok(stack(
        &[summary_panel(&r.file, &r.verdict), categories(r)?],
        8,
    ))
}

pub fn categories_markdown(r: &CategoryReport, svg_link: Option<&str>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Memory report: `{}`\n", r.file.replace('`', "'"));
    quote(&mut o, &r.verdict);
    if let Some(link) = svg_link {
        let _ = writeln!(o, "![memory summary of {}]({})\n", md(&r.file), link);
    }
    let rows = category_rows(r);
    if !rows.is_empty() {
        o.push_str("| category | before profiling | at the peak | share of the peak | end |\n|---|---:|---:|---:|---:|\n");
        for row in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                md(&row[0]),
                row[1],
                row[2],
                row[3],
                row[4]
            );
        }
        o.push('\n');
    }
    o
}
