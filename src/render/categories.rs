//! The report of a memory-timeline export (`export_memory_timeline`) as
//! HTML and Markdown: live tensor bytes by category over time, with no
//! allocator events, so it has its own [`CategoryReport`] rather than the
//! one [`crate::analysis::report::Report`]. The page's frame (head,
//! verdict, footer) is [`super::html`]'s and [`super::markdown`]'s.

use super::svg::ChartError;
use super::{charts, html, markdown};
use crate::analysis::report::trace::CategoryReport;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::memtimeline::Category;
use std::fmt::Write;

/// Rows of the category table: (category, before profiling, peak, share, end).
fn category_rows(st: &Style, r: &CategoryReport) -> Vec<[String; 5]> {
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
pub fn html(st: &Style, r: &CategoryReport) -> Result<String, ChartError> {
    let mut out = String::new();
    html::head(&mut out, &r.file);
    html::kind_header(&mut out, &r.file, &r.format, &r.kind);
    html::verdict_section(&mut out, &r.verdict, false);
    out.push_str("<section id=\"categories\"><h2>Live bytes by category</h2>\n");
    out.push_str(&html::figure(
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
                html::cell(&row[0]),
                html::num(&row[1]),
                html::num(&row[2]),
                html::num(&row[3]),
                html::num(&row[4])
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<p class=\"meta\">Tensor bytes as the memory profiler sees them: unrounded, outside the allocator's cache.</p>\n</section>\n");
    html::quality_section(&mut out, &r.quality);
    html::footer(&mut out);
    Ok(out)
}

/// The report of a memory-timeline export as Markdown.
pub fn markdown(st: &Style, r: &CategoryReport, svg_link: Option<&str>) -> String {
    let mut o = markdown::head(&r.file, &r.verdict, svg_link);
    let rows = category_rows(st, r);
    if !rows.is_empty() {
        o.push_str("| category | before profiling | at the peak | share of the peak | end |\n|---|---:|---:|---:|---:|\n");
        for row in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                markdown::md(&row[0]),
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
