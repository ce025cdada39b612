//! The outputs of `fragscope diff`: a side-by-side text report and JSON
//! (schema `fragscope.diff/1`), both from one [`DiffReport`].

use super::table::{Tone, align_numbers, new_table, toned};
use crate::analysis::diff::{
    Culprit, DiffReport, Direction, MetricDelta, SegmentDiff, SegmentFigures, Side,
};
use crate::analysis::metrics::Unit;
use crate::core::style::Style;
use crate::core::units::{fmt_pct, pct_rounds_to_zero};
use comfy_table::{Cell, CellAlignment};

fn side(s: &Side) -> String {
    match s.device {
        Some(d) => format!("{} (device {d})", s.file),
        None => s.file.clone(),
    }
}

fn change(st: &Style, d: &MetricDelta) -> String {
    let Some(c) = d.change else {
        return "n/a".into();
    };
    let abs = match d.metric.unit() {
        Unit::Bytes => st.delta(c as i128),
        Unit::Ratio if pct_rounds_to_zero(c) => "±0".into(),
        Unit::Ratio => format!("{:+.1} pt", c * 100.0),
        Unit::Count if c == 0.0 => "±0".into(),
        Unit::Count => format!("{:+}", c as i64),
    };
    match d.relative {
        Some(r) if c != 0.0 && d.metric.unit() != Unit::Ratio => {
            format!("{abs} ({}{})", if r > 0.0 { "+" } else { "" }, fmt_pct(r))
        }
        _ => abs,
    }
}

fn cell(
    st: &Style,
    q: Option<crate::analysis::metrics::Quantity>,
    dev: Option<i64>,
    show_dev: bool,
) -> String {
    match (q, dev) {
        (None, _) => "n/a".into(),
        (Some(q), Some(d)) if show_dev => format!("{} (dev {d})", q.fmt(st)),
        (Some(q), _) => q.fmt(st),
    }
}

/// The before and after cells of a metric; two sizes that would print the
/// same although they differ get the decimals that tell them apart.
fn cells(st: &Style, m: &MetricDelta, show_dev: bool) -> (String, String) {
    use crate::analysis::metrics::Quantity;
    if let (Some(Quantity::Bytes(b)), Some(Quantity::Bytes(a))) = (m.before, m.after) {
        let (fb, fa) = st.bytes_pair(b, a);
        let dev = |s: String, d: Option<i64>| match d {
            Some(d) if show_dev => format!("{s} (dev {d})"),
            _ => s,
        };
        return (dev(fb, m.before_device), dev(fa, m.after_device));
    }
    (
        cell(st, m.before, m.before_device, show_dev),
        cell(st, m.after, m.after_device, show_dev),
    )
}

fn culprits(st: &Style, out: &mut String, title: &str, list: &[Culprit]) {
    if list.is_empty() {
        return;
    }
    out.push_str(&format!("\n{title}:\n"));
    let mut t = new_table(st, &["call site", "free bytes pinned", "live bytes"]);
    for c in list {
        t.add_row(vec![
            c.site.clone(),
            st.bytes(c.pinned_free_bytes),
            st.bytes(c.live_bytes),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');
}

fn segment_table(
    st: &Style,
    out: &mut String,
    title: &str,
    shown: &[SegmentFigures],
    count: usize,
) {
    if shown.is_empty() {
        return;
    }
    out.push_str(&format!("\n{title} ({} of {count}):\n", shown.len()));
    let mut t = new_table(
        st,
        &[
            "segment",
            "device",
            "type",
            "stream",
            "size",
            "allocated",
            "live blocks",
            "free",
            "top call site",
            "its bytes",
        ],
    );
    for s in shown {
        t.add_row(vec![
            format!("{:#x}", s.address),
            s.device.to_string(),
            s.segment_type.clone(),
            if s.stream == 0 {
                "default".into()
            } else {
                format!("{:#x}", s.stream)
            },
            st.bytes(s.total_size),
            st.bytes(s.allocated_bytes),
            s.live_blocks.to_string(),
            st.bytes(s.free_bytes),
            s.top_site.clone().unwrap_or_else(|| "-".into()),
            if s.top_site.is_some() {
                st.bytes(s.top_site_bytes)
            } else {
                "-".into()
            },
        ]);
    }
    for i in [1, 4, 5, 6, 7, 9] {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&t.to_string());
    out.push('\n');
}

/// The segments of one run only, matched by address and size.
fn segments(st: &Style, out: &mut String, d: &SegmentDiff) {
    let side = |n: usize, bytes: u64| {
        if n == 0 {
            "0".to_string()
        } else {
            format!("{n} ({})", st.bytes(bytes))
        }
    };
    out.push_str(&format!(
        "\nSegments, matched by address and size: {} in both runs, {} only before, {} only after\n",
        d.in_both,
        side(d.only_before_count, d.only_before_bytes),
        side(d.only_after_count, d.only_after_bytes),
    ));
    segment_table(
        st,
        out,
        "Segments only before",
        &d.only_before,
        d.only_before_count,
    );
    segment_table(
        st,
        out,
        "Segments only after",
        &d.only_after,
        d.only_after_count,
    );
}

pub fn text(st: &Style, r: &DiffReport) -> String {
    let mut out = format!("before: {}\nafter:  {}\n", side(&r.before), side(&r.after));
    // Several devices per side: name the device each figure comes from.
    let show_dev = r.before.devices.len() > 1 || r.after.devices.len() > 1;
    let mut t = new_table(st, &["metric", "before", "after", "change", ""]);
    for m in &r.metrics {
        let (word, tone) = match m.direction {
            Direction::Worse => ("worse", Tone::Bad),
            Direction::Better => ("better", Tone::Good),
            Direction::Same => ("unchanged", Tone::Muted),
            Direction::Unknown => ("", Tone::Muted),
        };
        let (before, after) = cells(st, m, show_dev);
        t.add_row(vec![
            Cell::new(m.metric.label()),
            Cell::new(before),
            Cell::new(after),
            Cell::new(change(st, m)),
            toned(word, tone),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&t.to_string());
    out.push('\n');
    if !r.call_sites.is_empty() {
        out.push_str(&format!(
            "\nCall sites that moved most ({} of {} changed):\n",
            r.call_sites.len(),
            r.call_sites_changed
        ));
        let mut t = new_table(
            st,
            &[
                "call site",
                "live before",
                "live after",
                "live change",
                "peak before",
                "peak after",
                "peak change",
            ],
        );
        for s in &r.call_sites {
            t.add_row(vec![
                s.site.clone(),
                st.bytes(s.live_before),
                st.bytes(s.live_after),
                st.delta(s.live_change()),
                st.bytes(s.peak_before),
                st.bytes(s.peak_after),
                st.delta(s.peak_change()),
            ]);
        }
        align_numbers(&mut t, 1);
        out.push_str(&t.to_string());
        out.push('\n');
    }
    culprits(
        st,
        &mut out,
        "New culprits (pin free memory only after)",
        &r.new_culprits,
    );
    culprits(
        st,
        &mut out,
        "Gone culprits (pinned free memory only before)",
        &r.gone_culprits,
    );
    if let Some(sd) = &r.segments {
        segments(st, &mut out, sd);
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

pub fn json(r: &DiffReport) -> String {
    serde_json::to_string_pretty(r).expect("a diff report always serialises") + "\n"
}
