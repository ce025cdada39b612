//! The report as Markdown for a PR comment or a CI step summary: the
//! verdict, the figures per device, the out-of-memory events, the key
//! moments and the top call sites as GitHub tables, and a link to the
//! summary SVG when one was written.

use super::html::category_rows;
use super::stats::{NA, opt_bytes};
use crate::analysis::report::trace::{CategoryReport, TraceReport};
use crate::analysis::report::{Report, moment_text};
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use std::fmt::Write;

/// Call sites listed per device.
pub const MD_SITES: usize = 10;

/// A table cell: pipes and newlines would break the row.
pub(crate) fn md(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// `svg_link`: where the summary image will be, relative to the Markdown.
pub fn markdown(st: &Style, r: &Report, svg_link: Option<&str>) -> String {
    let mut o = head(&r.file, &super::verdict::lines(st, r), svg_link);
    if !r.devices.is_empty() {
        o.push_str("| device | events | peak reserved | peak allocated | peak allocated incl. pending frees | final reserved | final allocated | OOMs |\n");
        o.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for d in &r.devices {
            // No trace: no peak, only the recorded (final) state.
            let peak = |b: u64| {
                if d.traced() {
                    st.bytes(b)
                } else {
                    "n/a (no trace)".into()
                }
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                d.device,
                d.events,
                peak(d.peak_reserved.reserved_bytes()),
                peak(d.peak_allocated.allocated),
                peak(d.peak_allocated_incl_pending.bytes),
                st.bytes(d.end.reserved_bytes()),
                st.bytes(d.end.allocated),
                if d.traced() {
                    d.ooms.len().to_string()
                } else {
                    "n/a (no trace)".into()
                }
            );
        }
        o.push_str("\nPeak allocated counts a block until `free_requested`; incl. pending frees, until `free_completed`, as PyTorch's memory_viz does.\n\n");
    }
    let ooms: Vec<_> = r
        .devices
        .iter()
        .flat_map(|d| d.ooms.iter().map(move |x| (d, x)))
        .collect();
    if !ooms.is_empty() {
        o.push_str("### Out-of-memory events\n\n");
        o.push_str("| device | when | requested | largest free gap | device free | cause |\n");
        o.push_str("|---:|---|---:|---:|---:|---|\n");
        for (d, x) in ooms {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                d.device,
                md(&moment_text(
                    Some(x.mark.event),
                    x.mark.time_us,
                    d.first_time_us
                )),
                st.bytes(x.mark.request),
                x.mark
                    .largest_gap
                    .map(|b| st.bytes(b))
                    .unwrap_or("?".into()),
                x.mark
                    .device_free
                    .map(|b| st.bytes(b))
                    .unwrap_or("?".into()),
                md(x.diagnosis.cause.as_str())
            );
        }
        o.push('\n');
        let tries: Vec<_> = r
            .devices
            .iter()
            .flat_map(|d| d.ooms.iter())
            .flat_map(|x| x.diagnosis.suggestions.iter().filter(|s| s.applies))
            .collect();
        if !tries.is_empty() {
            o.push_str("What to try:\n\n");
            let mut seen = std::collections::BTreeSet::new();
            for s in tries {
                if seen.insert(s.what.clone()) {
                    let _ = writeln!(o, "- `{}`: {}", s.what.replace('`', "'"), md(&s.why));
                }
            }
            o.push('\n');
        }
    }
    for d in &r.devices {
        if d.key_moments.is_empty() {
            continue;
        }
        let _ = writeln!(o, "### Key moments, device {}\n", d.device);
        o.push_str("| moment | when | reserved | allocated | free in reserved | largest free gap | fragmentation |\n");
        o.push_str("|---|---|---:|---:|---:|---:|---:|\n");
        for k in &d.key_moments {
            let s = &k.sample;
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                md(&k.label),
                md(&d.when(k.at, s.time_us)),
                st.bytes(s.reserved_bytes()),
                st.bytes(s.allocated),
                st.bytes(s.reserved_bytes().saturating_sub(s.allocated)),
                st.bytes(s.lay().largest_free_gap),
                fmt_pct(s.lay().fragmentation)
            );
        }
        o.push('\n');
    }
    for d in &r.devices {
        let rows: Vec<_> = r.culprits_of(d.device).take(MD_SITES).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            o,
            "### Top call sites, device {} at {}\n",
            d.device,
            md(&d.moment_text())
        );
        o.push_str("| # | call site | live | stranded |\n|---:|---|---:|---:|\n");
        for (i, c) in rows.iter().enumerate() {
            let _ = writeln!(
                o,
                "| {} | `{}` | {} | {} |",
                i + 1,
                md(&c.site).replace('`', "'"),
                st.bytes(c.live_bytes),
                st.bytes(c.stranded_bytes)
            );
        }
        o.push('\n');
    }
    for w in &r.what_if {
        let _ = writeln!(o, "### What if (a model), device {}\n", w.device);
        if let Some(a) = crate::analysis::what_if::expandable_answer(w) {
            let a = super::simulate::expandable_answer(st, &a);
            let _ = writeln!(o, "**{}**\n", md(&a));
        }
        let _ = writeln!(o, "{}\n", md(&super::simulate::fidelity_line(w)));
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

/// The title, the verdict and the link to the summary image that open
/// every report.
fn head(file: &str, verdict: &[String], svg_link: Option<&str>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "## Memory report: `{}`\n", file.replace('`', "'"));
    quote(&mut o, verdict);
    if let Some(link) = svg_link {
        let _ = writeln!(o, "![memory summary of {}]({})\n", md(file), link);
    }
    o
}

/// The verdict as a block quote, one paragraph a sentence.
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

/// The report of a profiler trace as Markdown, with the snapshot report's
/// tables.
pub fn trace_markdown(st: &Style, r: &TraceReport, svg_link: Option<&str>) -> String {
    let mut o = head(&r.file, &r.verdict, svg_link);
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
                opt_bytes(st, s.peak_reserved.as_ref().map(|p| p.bytes)),
                opt_bytes(st, s.peak_allocated.as_ref().map(|p| p.bytes)),
                NA,
                opt_bytes(st, s.reserved_end),
                st.bytes(s.allocated_end),
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
                opt_bytes(st, x.reserved),
                st.bytes(x.allocated),
                opt_bytes(st, x.external_free),
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
                st.bytes(s.bytes),
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

/// The report of a memory-timeline export as Markdown.
pub fn categories_markdown(st: &Style, r: &CategoryReport, svg_link: Option<&str>) -> String {
    let mut o = head(&r.file, &r.verdict, svg_link);
    let rows = category_rows(st, r);
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn cells_cannot_break_rows() {
        assert_eq!(md("a|b\nc"), "a\\|b c");
    }
}
