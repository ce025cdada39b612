//! The report as Markdown for a PR comment or a CI step summary: the
//! verdict, the figures per device, the out-of-memory events, the key
//! moments and the top call sites as GitHub tables, and a link to the
//! summary SVG when one was written.

use super::stats::{NA, opt_bytes};
use crate::analysis::report::{DeviceDetail, DeviceReport, Report, Traced, moment_text};
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

/// The report as Markdown; `svg_link`: where the summary image will be,
/// relative to the Markdown. A trace's report has no OOM table (its OOMs
/// are in the verdict) and no call sites; it lists the live bytes by
/// operator instead.
pub fn markdown(st: &Style, r: &Report, svg_link: Option<&str>) -> String {
    let mut o = head(&r.file, &super::verdict::lines(st, r), svg_link);
    if !r.devices.is_empty() {
        devices_table(st, &mut o, r);
    }
    if !r.is_trace() {
        oom_table(st, &mut o, r);
    }
    for d in &r.devices {
        key_moments(st, &mut o, d);
    }
    for d in &r.devices {
        match &d.detail {
            DeviceDetail::Replayed(_) => top_sites(st, &mut o, r, d),
            DeviceDetail::Traced(t) => live_by_op(st, &mut o, d, t),
        }
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

/// One row of figures per device, and what the peak incl. pending frees
/// means (or why a trace cannot give it).
fn devices_table(st: &Style, o: &mut String, r: &Report) {
    o.push_str("| device | events | peak reserved | peak allocated | peak allocated incl. pending frees | final reserved | final allocated | OOMs |\n");
    o.push_str(if r.is_trace() {
        "|---|---:|---:|---:|---:|---:|---:|---:|\n"
    } else {
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    });
    for d in &r.devices {
        let _ = writeln!(o, "{}", device_row(st, d));
    }
    o.push_str(if r.is_trace() {
        "\nPeak allocated incl. pending frees (a block counted until `free_completed`, as PyTorch's memory_viz does) is not measurable for a profiler trace: its totals leave pending frees out.\n\n"
    } else {
        "\nPeak allocated counts a block until `free_requested`; incl. pending frees, until `free_completed`, as PyTorch's memory_viz does.\n\n"
    });
}

/// A device's row of [`devices_table`]: a snapshot's device without a
/// trace has no peak, only the recorded (final) state.
fn device_row(st: &Style, d: &DeviceReport) -> String {
    match &d.detail {
        DeviceDetail::Replayed(x) => {
            let peak = |b: u64| {
                if d.traced() {
                    st.bytes(b)
                } else {
                    "n/a (no trace)".into()
                }
            };
            format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                d.device,
                d.events,
                peak(x.peak_reserved.reserved_bytes()),
                peak(x.peak_allocated.allocated),
                peak(x.peak_allocated_incl_pending.bytes),
                st.bytes(x.end.reserved_bytes()),
                st.bytes(x.end.allocated),
                if d.traced() {
                    d.ooms.len().to_string()
                } else {
                    "n/a (no trace)".into()
                }
            )
        }
        DeviceDetail::Traced(t) => {
            let s = &t.summary;
            format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                md(&t.label),
                d.events,
                opt_bytes(st, s.peak_reserved.as_ref().map(|p| p.bytes)),
                opt_bytes(st, s.peak_allocated.as_ref().map(|p| p.bytes)),
                NA,
                opt_bytes(st, s.reserved_end),
                st.bytes(s.allocated_end),
                d.ooms.len()
            )
        }
    }
}

/// Every out-of-memory event of a snapshot, then what to try, each
/// suggestion once.
fn oom_table(st: &Style, o: &mut String, r: &Report) {
    let ooms: Vec<_> = r
        .devices
        .iter()
        .flat_map(|d| d.ooms.iter().map(move |x| (d, x)))
        .collect();
    if ooms.is_empty() {
        return;
    }
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

/// A device's key moments; the figures a trace cannot give are "n/a".
fn key_moments(st: &Style, o: &mut String, d: &DeviceReport) {
    if d.key_moments.is_empty() {
        return;
    }
    match d.traced_detail() {
        None => {
            let _ = writeln!(o, "### Key moments, device {}\n", d.device);
        }
        Some(t) => {
            let _ = writeln!(o, "### Key moments, {}\n", md(&t.label));
        }
    }
    o.push_str("| moment | when | reserved | allocated | free in reserved | largest free gap | fragmentation |\n");
    o.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    for k in &d.key_moments {
        let s = &k.sample;
        let when = md(&d.when(k.at, s.time_us));
        let _ = match d.detail {
            DeviceDetail::Replayed(_) => writeln!(
                o,
                "| {} | {when} | {} | {} | {} | {} | {} |",
                md(&k.label),
                st.bytes(s.reserved_bytes()),
                st.bytes(s.allocated),
                st.bytes(s.reserved_bytes().saturating_sub(s.allocated)),
                st.bytes(s.lay().largest_free_gap),
                fmt_pct(s.lay().fragmentation)
            ),
            DeviceDetail::Traced(_) => writeln!(
                o,
                "| {} | {when} | {} | {} | {} | {NA} | {NA} |",
                md(&k.label),
                opt_bytes(st, s.reserved),
                st.bytes(s.allocated),
                opt_bytes(st, s.external_free),
            ),
        };
    }
    o.push('\n');
}

/// The call sites holding the most at a snapshot device's moment.
fn top_sites(st: &Style, o: &mut String, r: &Report, d: &DeviceReport) {
    let rows: Vec<_> = r.culprits_of(d.device).take(MD_SITES).collect();
    if rows.is_empty() {
        return;
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

/// The operators holding the most at a trace device's moment.
fn live_by_op(st: &Style, o: &mut String, d: &DeviceReport, t: &Traced) {
    let Some(v) = &t.live_by_op else { return };
    if v.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "### Live by operator, {} at {}\n",
        md(&t.label),
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
            if t.moment_sample.allocated > 0 {
                fmt_pct(s.bytes as f64 / t.moment_sample.allocated as f64)
            } else {
                String::new()
            }
        );
    }
    o.push('\n');
}

/// The title, the verdict and the link to the summary image that open
/// every report.
pub(crate) fn head(file: &str, verdict: &[String], svg_link: Option<&str>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn cells_cannot_break_rows() {
        assert_eq!(md("a|b\nc"), "a\\|b c");
    }
}
