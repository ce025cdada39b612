//! `fragscope report` on several ranks: the per-rank chart, the rank table
//! with the outliers flagged, and the verdict, as HTML, SVG or Markdown.

use super::html::{CSS, cell, figure, num};
use super::markdown::md;
use super::svg::compose::{Para, escape, stack, text_panel};
use super::svg::ranks::{RankBar, RanksChart, ranks_svg};
use super::svg::{ChartError, Svg, WIDTH};
use crate::analysis::ranks::RanksReport;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use std::fmt::Write;

fn opt_bytes(st: &Style, x: Option<u64>) -> String {
    x.map(|b| st.bytes(b)).unwrap_or_else(|| "n/a".into())
}

pub fn chart(r: &RanksReport) -> Result<Svg, ChartError> {
    let bars: Vec<RankBar> = r
        .rows
        .iter()
        .map(|x| RankBar {
            label: x.file.clone(),
            peak_reserved: x.peak_reserved,
            end_reserved: x.end_reserved,
            fragmentation: x.fragmentation,
            outlier: x.outlier.is_some(),
        })
        .collect();
    let title = format!("{} ranks", r.rows.len());
    ranks_svg(&RanksChart::new(&title, &bars))
}

/// The one-page image: verdict and the per-rank chart.
pub fn summary(r: &RanksReport) -> Result<Svg, ChartError> {
    let mut paras = vec![Para::new(
        format!("fragscope report: {} ranks", r.rows.len()),
        24,
        true,
        "#1e1e1e",
    )];
    for (i, v) in r.verdict.iter().enumerate() {
        paras.push(Para::new(
            v.clone(),
            if i == 0 { 18 } else { 16 },
            i == 0,
            "#1e1e1e",
        ));
    }
    Ok(stack(&[text_panel(&paras, WIDTH), chart(r)?], 8))
}

pub fn html(st: &Style, r: &RanksReport) -> Result<String, ChartError> {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Memory report: {} ranks</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        r.rows.len()
    );
    let _ = writeln!(
        out,
        "<header><h1>Memory report: {} ranks</h1></header>",
        r.rows.len()
    );
    let any = r.rows.iter().any(|x| x.outlier.is_some() || x.ooms > 0);
    let _ = writeln!(
        out,
        "<section id=\"verdict\"><h2>Verdict</h2>\n<div class=\"verdict{}\">",
        if any { " oom" } else { "" }
    );
    for (i, v) in r.verdict.iter().enumerate() {
        let _ = writeln!(
            out,
            "<p{}>{}</p>",
            if i == 0 { " class=\"lead\"" } else { "" },
            escape(v)
        );
    }
    out.push_str("</div></section>\n<section id=\"ranks\"><h2>Ranks</h2>\n");
    out.push_str(&figure(
        &chart(r)?,
        "peak reserved and fragmentation per rank",
    ));
    out.push_str("<table><tr><th>rank file</th><th>devices</th><th>segments</th><th>peak reserved</th><th>peak allocated</th><th>reserved at the end</th><th>allocated at the end</th><th>fragmentation at the end</th><th>worst fragmentation under pressure</th><th>events</th><th>OOMs</th><th>outlier</th></tr>\n");
    for x in &r.rows {
        let _ = writeln!(
            out,
            "<tr>{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
            cell(&x.file),
            num(&x.devices.to_string()),
            num(&x.segments.to_string()),
            num(&opt_bytes(st, x.peak_reserved)),
            num(&opt_bytes(st, x.peak_allocated)),
            num(&st.bytes(x.end_reserved)),
            num(&st.bytes(x.end_allocated)),
            num(&fmt_pct(x.fragmentation)),
            num(&x
                .worst_fragmentation
                .map(fmt_pct)
                .unwrap_or_else(|| "n/a".into())),
            num(&x.events.to_string()),
            num(&x.ooms.to_string()),
            cell(x.outlier.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<p class=\"meta\">Outlier rule (as <code>fragscope stats</code> on several files): {}.</p>",
        escape(&r.rule)
    );
    if !r.left_out.is_empty() {
        out.push_str("<p>Left out:</p><ul>\n");
        for l in &r.left_out {
            let _ = writeln!(out, "<li>{}</li>", escape(l));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<p>Run <code>fragscope report FILE</code> on one rank for its full report.</p>\n</section>\n");
    let _ = write!(
        out,
        "<footer>fragscope {}</footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
    Ok(out)
}

pub fn markdown(st: &Style, r: &RanksReport, svg_link: Option<&str>) -> String {
    let mut o = format!("## Memory report: {} ranks\n\n", r.rows.len());
    for v in &r.verdict {
        let _ = writeln!(o, "> {}\n>", md(v));
    }
    if o.ends_with(">\n") {
        o.truncate(o.len() - 2);
    }
    o.push('\n');
    if let Some(link) = svg_link {
        let _ = writeln!(o, "![per-rank memory]({link})\n");
    }
    o.push_str("| rank file | peak reserved | reserved at the end | fragmentation at the end | OOMs | outlier |\n|---|---:|---:|---:|---:|---|\n");
    for x in &r.rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            md(&x.file),
            opt_bytes(st, x.peak_reserved),
            st.bytes(x.end_reserved),
            fmt_pct(x.fragmentation),
            x.ooms,
            md(x.outlier.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(o, "\nOutlier rule: {}.", md(&r.rule));
    for l in &r.left_out {
        let _ = writeln!(o, "\n- left out: {}", md(l));
    }
    o
}
