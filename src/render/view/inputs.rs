//! The page's data for the inputs that have no segment map: a profiler
//! trace (allocated and reserved totals per device, live bytes by
//! operator) and a memory-timeline export (live tensor bytes by category),
//! from the reports `fragscope report` builds of them, and a directory of
//! ranks (the per-rank table of `fragscope stats DIR`). `kind` tells the
//! page which it is; `no_segment_map` says why there is no map.

use super::{VIEW_SCHEMA, columns, event_num};
use crate::analysis::ranks::RanksReport;
use crate::analysis::report::trace::{CategoryReport, NO_ALLOCATOR, NO_LAYOUT};
use crate::analysis::report::{DeviceReport, Report, ReportDetail, Traced};
use crate::core::style::Style;
use crate::core::text::upper_first;
use crate::core::units::fmt_pct;
use crate::model::memtimeline::Category;
use serde_json::{Value, json};

/// A profiler trace: each device's series (the report's, downsampled as
/// for its chart), key moments with the operator running, and the live
/// bytes by operator at the report's moment. A snapshot's page, which
/// carries its states and segment maps, is [`super::data`]'s.
pub fn trace_data(sty: &Style, r: &Report, served: bool) -> Value {
    let devices: Vec<Value> = r
        .devices
        .iter()
        .filter_map(|d| Some(trace_device(sty, d, d.traced_detail()?)))
        .collect();
    let no_gpu = match &r.detail {
        ReportDetail::Trace { no_gpu, .. } => no_gpu.clone(),
        ReportDetail::Snapshot { .. } => None,
    };
    let verdict = crate::render::verdict::lines(sty, r);
    doc(
        sty,
        "profiler_trace",
        (&r.file, &r.format, served),
        (&verdict, &r.quality),
        json!({
            "no_segment_map": no_gpu.unwrap_or_else(|| upper_first(NO_LAYOUT) + "."),
            "devices": devices,
        }),
    )
}

/// One device of [`trace_data`].
fn trace_device(sty: &Style, d: &DeviceReport, t: &Traced) -> Value {
    let moments: Vec<Value> = d
        .key_moments
        .iter()
        .map(|k| {
            json!({
                "label": k.label,
                "event": event_num(k.at),
                "op": k.op,
                "allocated_text": sty.bytes(k.sample.allocated),
                "reserved_text": k.sample.reserved.map(|b| sty.bytes(b)),
            })
        })
        .collect();
    let ops: Option<Vec<Value>> = t.live_by_op.as_ref().map(|ops| {
        ops.iter()
            .map(|o| json!({"op": o.op, "bytes": o.bytes, "bytes_text": sty.bytes(o.bytes), "events": o.events}))
            .collect()
    });
    json!({
        "device": t.label,
        "heading": t.heading,
        "events": d.events,
        "reserved_known": t.reserved_known,
        "ooms": d.ooms.len(),
        "series": columns(&d.samples, false),
        "key_moments": moments,
        "ops_moment": d.moment_label,
        "ops_when": d.moment_text(),
        "live_by_op": ops,
    })
}

/// A memory-timeline export: live bytes per category after every time
/// step (downsampled as for the report's chart), with each category's
/// colour as the report draws it.
pub fn categories_data(sty: &Style, r: &CategoryReport, served: bool) -> Value {
    let samples = &r.timeline.samples;
    let first = r.timeline.first_time_us();
    let per_category: Vec<Value> = Category::ALL
        .iter()
        .map(|&c| {
            json!({
                "name": c.as_str(),
                "color": c.color(),
                "bytes": samples.iter().map(|s| s.get(c)).collect::<Vec<_>>(),
            })
        })
        .collect();
    doc(
        sty,
        "memory_timeline",
        (&r.file, &r.format, served),
        (&r.verdict, &r.quality),
        json!({
        "no_segment_map": upper_first(NO_ALLOCATOR) + ".",
        "first_time_us": first,
        "time_us": samples.iter().map(|s| s.time_us).collect::<Vec<_>>(),
        "categories": per_category,
        "peak_text": r.timeline.peak.as_ref().map(|p| sty.bytes(p.total)),
        // One device's tensors, drawn as the page's only view.
        "devices": [],
        }),
    )
}

/// A directory of ranks: the per-rank table of `fragscope stats DIR`,
/// each row with its figures' text and why it is an outlier, if it is.
pub fn ranks_data(sty: &Style, r: &RanksReport, served: bool, file: &str) -> Value {
    let opt_bytes = |b: Option<u64>| b.map(|b| sty.bytes(b));
    let ranks: Vec<Value> = r
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            json!({
                "index": i,
                "file": row.file,
                "devices": row.devices,
                "segments": row.segments,
                "events": row.events,
                "ooms": row.ooms,
                "end_reserved_text": sty.bytes(row.end_reserved),
                "end_allocated_text": sty.bytes(row.end_allocated),
                "fragmentation_text": fmt_pct(row.fragmentation),
                "peak_reserved_text": opt_bytes(row.peak_reserved),
                "peak_allocated_text": opt_bytes(row.peak_allocated),
                "worst_fragmentation_text": row.worst_fragmentation.map(fmt_pct),
                "outlier": row.outlier,
            })
        })
        .collect();
    doc(
        sty,
        "ranks",
        (file, &format!("{} ranks", r.rows.len()), served),
        (&r.verdict, &r.left_out),
        json!({"rule": r.rule, "ranks": ranks, "devices": []}),
    )
}

/// The fields every kind's data opens with (as a snapshot's), then `rest`.
fn doc(
    sty: &Style,
    kind: &str,
    (file, format, served): (&str, &str, bool),
    (verdict, quality): (&[String], &[String]),
    rest: Value,
) -> Value {
    let mut v = json!({
        "schema": VIEW_SCHEMA,
        "kind": kind,
        "file": file,
        "format": format,
        "served": served,
        "exact_bytes": sty.exact_bytes,
        "verdict": verdict,
        "quality": quality,
    });
    if let (Some(m), Value::Object(r)) = (v.as_object_mut(), rest) {
        m.extend(r);
    }
    v
}
