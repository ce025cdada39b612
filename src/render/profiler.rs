//! Text and JSON of `fragscope stats` for profiler traces and memory-timeline
//! exports. Same column names, units and wording as the snapshot tables of
//! [`super::stats`]; figures a format cannot give read `n/a` and a note says
//! why.

use super::table::{align_numbers, new_table};
use crate::analysis::culprits::{NO_STRANDED, TraceCulprits};
use crate::core::units::{fmt_bytes, fmt_pct};
use crate::model::memtimeline::{Category, MemoryTimeline};
use crate::model::profiler::{DeviceSummary, OpShare, Peak, TraceDevice};
use crate::model::profiler::{MISSING_FIGURES, ProfilerTrace};
use serde_json::json;

/// Schema of `fragscope stats --json` for a trace.
pub const TRACE_STATS_SCHEMA: &str = "fragscope.trace-stats/1";
/// Schema of `fragscope stats --json` for a memory timeline.
pub const TIMELINE_STATS_SCHEMA: &str = "fragscope.timeline-stats/1";

/// Rows shown in the per-operator lists.
const TOP: usize = 5;
const NA: &str = "n/a";

/// Seconds since `start`, e.g. `+1.234 s`.
fn rel(t: Option<i64>, start: Option<i64>) -> String {
    match (t, start) {
        (Some(t), Some(s)) => format!("+{:.3} s", (t - s) as f64 / 1e6),
        (None, _) => "start".into(),
        _ => "-".into(),
    }
}

fn opt_bytes(x: Option<u64>) -> String {
    x.map(fmt_bytes).unwrap_or_else(|| NA.to_string())
}

fn where_(p: &Peak, start: Option<i64>) -> String {
    let mut s = rel(p.time_us, start);
    if let Some(op) = &p.op {
        s.push_str(&format!(" in {op}"));
    }
    s
}

fn shares(out: &mut String, title: &str, v: &[OpShare], total: Option<u64>) {
    if v.is_empty() {
        return;
    }
    out.push_str(title);
    let mut t = new_table(&["operator", "bytes", "share", "allocations"]);
    for s in v.iter().take(TOP) {
        t.add_row(vec![
            s.op.clone(),
            fmt_bytes(s.bytes),
            total
                .filter(|&t| t > 0)
                .map(|t| fmt_pct(s.bytes as f64 / t as f64))
                .unwrap_or_default(),
            if s.events == 0 {
                "-".into()
            } else {
                s.events.to_string()
            },
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));
    if v.len() > TOP {
        out.push_str(&format!("  ({} more operators)\n", v.len() - TOP));
    }
}

fn start_of(tr: &ProfilerTrace) -> Option<i64> {
    tr.devices
        .iter()
        .filter_map(|d| d.summary.first_time_us)
        .min()
}

fn device_name(d: &TraceDevice) -> String {
    match (&d.name, d.capacity) {
        (Some(n), Some(c)) => format!("{} ({n}, {})", d.label, fmt_bytes(c)),
        (None, Some(c)) => format!("{} ({})", d.label, fmt_bytes(c)),
        (Some(n), None) => format!("{} ({n})", d.label),
        _ => d.label.clone(),
    }
}

/// `fragscope stats` on a profiler trace.
pub fn trace_text(file: &str, format: &str, tr: &ProfilerTrace) -> String {
    let start = start_of(tr);
    let mut out = format!("{file} ({format})\n");
    out.push_str(&format!(
        "profiler trace: {} trace events, {} [memory] events, {} operators",
        tr.trace_events, tr.memory_events, tr.op_events
    ));
    if let (Some(r), Some(w)) = (tr.rank, tr.world_size) {
        out.push_str(&format!(", rank {r} of {w}"));
    }
    out.push('\n');
    if let Some(n) = tr.no_gpu_memory() {
        out.push_str(&format!("{n}\n"));
    }
    if tr.bytes_only() {
        out.push_str(
            "schema: 2021 ([memory] events carry only Bytes): allocated bytes are rebuilt by \
             summing, counting from the least the trace implies was allocated before it; \
             reserved memory is not recorded\n",
        );
    }

    out.push_str("\nAt the end of the trace:\n");
    let mut t = new_table(&[
        "device",
        "events",
        "reserved",
        "allocated",
        "free internal",
        "free external",
        "largest free",
        "fragmentation",
    ]);
    for d in &tr.devices {
        let s = &d.summary;
        t.add_row(vec![
            d.label.clone(),
            s.events.to_string(),
            opt_bytes(s.reserved_end),
            fmt_bytes(s.allocated_end),
            NA.into(),
            opt_bytes(s.external_free_end),
            NA.into(),
            NA.into(),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));

    out.push_str("\nOver the trace:\n");
    let mut t = new_table(&[
        "device",
        "allocated before",
        "peak reserved",
        "peak allocated",
        "at",
        "peak free external",
        "at",
        "reserved grew",
    ]);
    for d in &tr.devices {
        let s = &d.summary;
        let before = if s.allocated_before_is_lower_bound {
            format!("≥ {}", fmt_bytes(s.allocated_before_trace))
        } else {
            fmt_bytes(s.allocated_before_trace)
        };
        let pa = s.peak_allocated.as_ref();
        let pf = s.peak_external_free.as_ref();
        t.add_row(vec![
            d.label.clone(),
            before,
            opt_bytes(s.peak_reserved.as_ref().map(|p| p.bytes)),
            opt_bytes(pa.map(|p| p.bytes)),
            pa.map(|p| where_(p, start)).unwrap_or_else(|| "-".into()),
            opt_bytes(pf.map(|p| p.bytes)),
            pf.map(|p| where_(p, start)).unwrap_or_else(|| "-".into()),
            if s.has_totals && !d.key.is_cpu() {
                match s.reserved_growth.len() {
                    0 => "never".to_string(),
                    1 => "once".to_string(),
                    n => format!("{n} times"),
                }
            } else {
                NA.into()
            },
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));

    for d in &tr.devices {
        device_details(&mut out, d, start);
    }

    out.push_str("\nNotes:\n");
    out.push_str(
        "  allocated counts rounded block bytes (Total Allocated, as torch.cuda.memory_allocated); \
         in snapshot stats allocated counts requested bytes and the rounding shows as free internal\n",
    );
    out.push_str(
        "  free external = reserved − allocated: bytes cached by the allocator but not in a live tensor\n",
    );
    out.push_str(
        "  n/a: a profiler trace holds no segment or block layout, so largest free block, \
         fragmentation and rounding waste need a snapshot (torch.cuda.memory._record_memory_history + _dump_snapshot)\n",
    );
    for a in &tr.anomalies {
        out.push_str(&format!(
            "warning: {} × {} (e.g. {})\n",
            a.count, a.kind, a.example
        ));
    }
    out
}

fn device_details(out: &mut String, d: &TraceDevice, start: Option<i64>) {
    let s: &DeviceSummary = &d.summary;
    out.push_str(&format!("\n{}:\n", device_name(d)));
    if s.has_totals && !d.key.is_cpu() {
        if s.reserved_growth.is_empty() {
            out.push_str(&format!(
                "  reserved memory stayed at {} for the whole trace (no new segment was needed)\n",
                opt_bytes(s.reserved_start)
            ));
        } else {
            let grown: u64 = s
                .reserved_growth
                .iter()
                .map(|g| g.reserved_after - g.reserved_before)
                .sum();
            out.push_str(&format!(
                "  reserved memory grew {} times by {} in all; {} of them ({}) while the cache \
                 already held at least the request free: fragmentation, or free memory in another pool or stream\n",
                s.reserved_growth.len(),
                fmt_bytes(grown),
                s.growth_with_free_cache,
                fmt_bytes(s.growth_with_free_cache_bytes)
            ));
            let mut steps: Vec<_> = s.reserved_growth.iter().collect();
            steps.sort_by(|a, b| {
                (b.reserved_after - b.reserved_before)
                    .cmp(&(a.reserved_after - a.reserved_before))
                    .then(a.event.cmp(&b.event))
            });
            let mut t = new_table(&[
                "at",
                "grew by",
                "reserved after",
                "allocation",
                "free before",
                "operator",
            ]);
            for g in steps.into_iter().take(TOP) {
                t.add_row(vec![
                    rel(Some(g.time_us), start),
                    fmt_bytes(g.reserved_after - g.reserved_before),
                    fmt_bytes(g.reserved_after),
                    fmt_bytes(g.bytes),
                    fmt_bytes(g.free_before),
                    g.op.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            align_numbers(&mut t, 1);
            out.push_str(&format!("{t}\n"));
        }
    }
    if s.frees_before_trace > 0 {
        out.push_str(&format!(
            "  {} frees ({}) of memory allocated before the trace started\n",
            s.frees_before_trace,
            fmt_bytes(s.frees_before_trace_bytes)
        ));
    }
    if let (Some(n), Some(b)) = (s.live_at_end, s.live_at_end_bytes)
        && n > 0
    {
        out.push_str(&format!(
            "  {n} allocations made during the trace are still live at its end ({})\n",
            fmt_bytes(b)
        ));
    }
    for o in &d.ooms {
        out.push_str(&format!(
            "  out of memory at {}: tried {} with {} reserved, {} allocated{}\n",
            rel(Some(o.ts_us.floor() as i64), start),
            fmt_bytes(o.bytes),
            opt_bytes(o.total_reserved),
            opt_bytes(o.total_allocated),
            o.op.as_ref()
                .map(|x| format!(", in {x}"))
                .unwrap_or_default()
        ));
    }
    let total_alloc: u64 = s.allocations_by_op.iter().map(|x| x.bytes).sum();
    shares(
        out,
        "  Bytes allocated, by operator:\n",
        &s.allocations_by_op,
        Some(total_alloc),
    );
    shares(
        out,
        "  Live at the peak of allocated, by operator:\n",
        &s.live_at_peak_by_op,
        s.peak_allocated.as_ref().map(|p| p.bytes),
    );
}

/// `fragscope stats --json` on a profiler trace (schema
/// `fragscope.trace-stats/1`).
pub fn trace_json(file: &str, format: &str, tr: &ProfilerTrace) -> String {
    let v = json!({
        "schema": TRACE_STATS_SCHEMA,
        "file": file,
        "format": format,
        "kind": "profiler_trace",
        "trace": tr,
        "notes": tr.no_gpu_memory().into_iter().collect::<Vec<_>>(),
        "missing_figures": MISSING_FIGURES
            .iter()
            .map(|(f, why)| json!({"figure": f, "why": why}))
            .collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

/// `fragscope stats` on a memory-timeline export.
pub fn timeline_text(file: &str, format: &str, tl: &MemoryTimeline) -> String {
    let mut out = format!("{file} ({format})\n");
    let start = tl.first_time_us();
    let span = match (start, tl.last_time_us()) {
        (Some(a), Some(b)) => format!(", {:.3} s", (b - a) as f64 / 1e6),
        _ => String::new(),
    };
    let form = match tl.form {
        Some(crate::model::memtimeline::TimelineForm::Raw) => "raw rows",
        _ => "times and sizes",
    };
    out.push_str(&format!(
        "memory timeline (export_memory_timeline, {form}): {} rows, {} time steps{span}\n",
        tl.rows,
        tl.samples.len()
    ));
    let Some(peak) = tl.peak else {
        out.push_str("  empty\n");
        return out;
    };
    let pre = tl.preexisting();
    let end = tl.end().expect("non-empty");
    let mut h = vec!["category"];
    if pre.is_some() {
        h.push("before profiling");
    }
    h.extend(["peak", "share of peak", "end"]);
    let mut t = new_table(&h);
    for c in Category::ALL {
        let mut row = vec![c.as_str().to_string()];
        if let Some(p) = pre {
            row.push(fmt_bytes(p.get(c)));
        }
        let b = peak.bytes[c as usize];
        row.push(fmt_bytes(b));
        row.push(if peak.total > 0 {
            fmt_pct(b as f64 / peak.total as f64)
        } else {
            "-".into()
        });
        row.push(fmt_bytes(end.get(c)));
        t.add_row(row);
    }
    let mut row = vec!["total".to_string()];
    if let Some(p) = pre {
        row.push(fmt_bytes(p.total()));
    }
    row.extend([fmt_bytes(peak.total), String::new(), fmt_bytes(end.total())]);
    t.add_row(row);
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));
    let mut parts: Vec<(u64, Category)> = Category::ALL
        .iter()
        .map(|&c| (peak.bytes[c as usize], c))
        .filter(|x| x.0 > 0)
        .collect();
    parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    out.push_str(&format!(
        "peak: {} live at {}: {}\n",
        fmt_bytes(peak.total),
        rel(peak.time_us, start),
        parts
            .iter()
            .map(|(b, c)| format!("{} {}", c.as_str(), fmt_bytes(*b)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(a) = tl.actions {
        out.push_str(&format!(
            "rows: {} pre-existing, {} created, {} version bumps, {} destroyed\n",
            a.preexisting, a.create, a.increment_version, a.destroy
        ));
    }
    out.push_str(
        "note: tensor bytes as the memory profiler sees them (unrounded, outside the allocator's \
         cache); reserved memory, free blocks and fragmentation need a snapshot or a profiler trace\n",
    );
    for a in &tl.anomalies {
        out.push_str(&format!(
            "warning: {} × {} (e.g. {})\n",
            a.count, a.kind, a.example
        ));
    }
    out
}

/// `fragscope stats --json` on a memory timeline (schema
/// `fragscope.timeline-stats/1`).
pub fn timeline_json(file: &str, format: &str, tl: &MemoryTimeline) -> String {
    let named = |b: &[u64; 8]| {
        let mut m = serde_json::Map::new();
        for c in Category::ALL {
            m.insert(c.as_str().replace(' ', "_"), json!(b[c as usize]));
        }
        m.insert("total".into(), json!(b.iter().sum::<u64>()));
        serde_json::Value::Object(m)
    };
    let v = json!({
        "schema": TIMELINE_STATS_SCHEMA,
        "file": file,
        "format": format,
        "kind": "memory_timeline",
        "form": tl.form,
        "rows": tl.rows,
        "time_steps": tl.samples.len(),
        "first_time_us": tl.first_time_us(),
        "last_time_us": tl.last_time_us(),
        "before_profiling": tl.preexisting().map(|s| named(&s.bytes)),
        "peak": tl.peak.map(|p| json!({"time_us": p.time_us, "bytes": named(&p.bytes)})),
        "end": tl.end().map(|s| named(&s.bytes)),
        "actions": tl.actions,
        "anomalies": tl.anomalies,
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

// ---------------------------------------------------------------------------
// `fragscope timeline` and `fragscope culprits` on a trace or a memory
// timeline: the snapshot outputs' columns and wording for the figures these
// inputs have, `n/a` and one line of why for the others.

/// `fragscope timeline` on a profiler trace: the key-moment table of each
/// device, with the snapshot timeline's columns.
pub fn trace_timeline_text(
    file: &str,
    format: &str,
    tr: &ProfilerTrace,
    devices: &[&TraceDevice],
) -> String {
    use crate::analysis::report::trace::{NO_LAYOUT, key_moments};
    let mut out = format!("{file} ({format})\n");
    out.push_str(&format!(
        "profiler trace: {} trace events, {} [memory] events, {} operators\n",
        tr.trace_events, tr.memory_events, tr.op_events
    ));
    if let Some(n) = tr.no_gpu_memory() {
        out.push_str(&format!("{n}\n"));
    }
    for d in devices {
        let s = &d.summary;
        out.push_str(&format!(
            "\n{}: {} memory events, {} allocations, {} frees\n",
            device_name(d),
            s.events,
            s.allocations,
            s.frees
        ));
        let t0 = s.first_time_us;
        let mut t = new_table(&[
            "moment",
            "event",
            "time",
            "allocated",
            "reserved",
            "free internal",
            "free external",
            "pending free",
            "largest gap",
            "gaps",
            "fragmentation",
            "operator",
        ]);
        for k in key_moments(d, &tr.names) {
            let x = &k.sample;
            t.add_row(vec![
                k.label.clone(),
                k.at.map_or("-".into(), |a| a.to_string()),
                super::timeline::fmt_time(x.time_us, t0),
                fmt_bytes(x.allocated),
                opt_bytes(x.reserved),
                NA.into(),
                opt_bytes(x.external_free),
                NA.into(),
                NA.into(),
                NA.into(),
                NA.into(),
                k.op.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        align_numbers(&mut t, 1);
        out.push_str(&format!("{t}\n"));
        if s.has_totals && !d.key.is_cpu() {
            if s.reserved_growth.is_empty() {
                out.push_str("reserved memory did not grow during the trace\n");
            } else {
                out.push_str(&format!(
                    "reserved memory grew {} times; {} of them ({}) while the cache already held at least the allocation's bytes free\n",
                    s.reserved_growth.len(),
                    s.growth_with_free_cache,
                    fmt_bytes(s.growth_with_free_cache_bytes)
                ));
            }
        }
    }
    out.push_str(&format!(
        "\nfree external = reserved − allocated. n/a: {NO_LAYOUT}.\n"
    ));
    for a in &tr.anomalies {
        out.push_str(&format!(
            "warning: {} × {} (e.g. {})\n",
            a.count, a.kind, a.example
        ));
    }
    out
}

fn csv_opt(x: Option<u64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// The series of a trace as CSV, with the snapshot CSV's header; figures a
/// trace lacks are empty, the device is its label (`cuda:0`).
pub fn trace_timeline_csv(
    devices: &[(&TraceDevice, Vec<crate::model::profiler::TraceSample>)],
) -> String {
    let mut out = String::from(super::timeline::CSV_HEADER);
    for (d, samples) in devices {
        for s in samples {
            out.push_str(&format!(
                "{},{},{},{},{},{},,{},,,,,,\n",
                d.label,
                s.event.map_or(String::new(), |e| e.to_string()),
                s.time_us.map_or(String::new(), |t| t.to_string()),
                s.allocated,
                s.active,
                csv_opt(s.reserved),
                csv_opt(s.external_free),
            ));
        }
    }
    out
}

/// `fragscope timeline --json` on a trace (schema `fragscope.timeline/1`,
/// `kind: profiler_trace`).
pub fn trace_timeline_json(
    file: &str,
    tr: &ProfilerTrace,
    devices: &[(&TraceDevice, Vec<crate::model::profiler::TraceSample>, bool)],
) -> String {
    let v = json!({
        "schema": "fragscope.timeline/1",
        "file": file,
        "kind": "profiler_trace",
        "devices": devices.iter().map(|(d, samples, down)| json!({
            "device": d.label,
            "summary": d.summary,
            "key_moments": crate::analysis::report::trace::key_moments(d, &tr.names).iter().map(|k| json!({
                "label": k.label,
                "at": k.at,
                "sample": k.sample,
                "op": k.op,
            })).collect::<Vec<_>>(),
            "downsampled": down,
            "samples": samples,
        })).collect::<Vec<_>>(),
        "not_measurable": MISSING_FIGURES
            .iter()
            .map(|(f, why)| json!({"figure": f, "why": why}))
            .collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

/// `fragscope timeline` on a memory-timeline export: live bytes by
/// category at the start, the peak and the end.
pub fn categories_timeline_text(file: &str, format: &str, tl: &MemoryTimeline) -> String {
    use crate::analysis::report::trace::NO_ALLOCATOR;
    let mut out = format!("{file} ({format})\n");
    out.push_str(&format!(
        "memory timeline: {} rows, {} time steps\n",
        tl.rows,
        tl.samples.len()
    ));
    let start = tl.first_time_us();
    let mut h = vec!["moment", "time", "total"];
    h.extend(Category::ALL.iter().map(|c| c.as_str()));
    let mut t = new_table(&h);
    let mut row = |label: &str, s: &crate::model::memtimeline::CategorySample| {
        let mut r = vec![
            label.to_string(),
            match s.time_us {
                None => "before profiling".into(),
                t => super::timeline::fmt_time(t, start),
            },
            fmt_bytes(s.total()),
        ];
        r.extend(Category::ALL.iter().map(|&c| fmt_bytes(s.get(c))));
        t.add_row(r);
    };
    if let Some(first) = tl.samples.first() {
        row("start", first);
    }
    if let Some(p) = tl.peak {
        row("peak", &tl.samples[p.sample]);
    }
    if let Some(end) = tl.end() {
        row("end", end);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));
    out.push_str(&format!("note: {NO_ALLOCATOR}.\n"));
    out
}

pub fn categories_timeline_csv(samples: &[crate::model::memtimeline::CategorySample]) -> String {
    let mut out = String::from("time_us,total");
    for c in Category::ALL {
        out.push(',');
        out.push_str(&c.as_str().replace(' ', "_"));
    }
    out.push('\n');
    for s in samples {
        out.push_str(&s.time_us.map_or(String::new(), |t| t.to_string()));
        out.push_str(&format!(",{}", s.total()));
        for c in Category::ALL {
            out.push_str(&format!(",{}", s.get(c)));
        }
        out.push('\n');
    }
    out
}

pub fn categories_timeline_json(
    file: &str,
    tl: &MemoryTimeline,
    samples: &[crate::model::memtimeline::CategorySample],
    downsampled: bool,
) -> String {
    let v = json!({
        "schema": "fragscope.timeline/1",
        "file": file,
        "kind": "memory_timeline",
        "categories": Category::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "peak": tl.peak,
        "downsampled": downsampled,
        "samples": samples,
        "not_measurable": crate::analysis::report::trace::NO_ALLOCATOR,
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}

/// `fragscope culprits` on a trace: live bytes by operator at the moment,
/// in the snapshot output's units, and why stranded bytes are missing.
pub fn trace_culprits_text(c: &TraceCulprits, first_time_us: Option<i64>, top: usize) -> String {
    let at = match c.at {
        Some(i) => format!(
            "after event {i}, {}",
            super::timeline::fmt_time(c.time_us, first_time_us)
        ),
        None => "before the first event".into(),
    };
    let mut out = format!("{} at {} ({at})\n", c.device, c.moment);
    out.push_str(&format!(
        "Live: {} allocated, {} reserved, {} free external (reserved − allocated).\n",
        fmt_bytes(c.allocated),
        opt_bytes(c.reserved),
        opt_bytes(c.external_free)
    ));
    out.push_str(&format!(
        "{}.\n",
        crate::core::text::upper_first(NO_STRANDED)
    ));
    match &c.live_by_op {
        None => out.push_str(
            "Live bytes by operator: not measurable for this trace: its memory events carry no address (2021 schema), so allocations cannot be paired with their frees.\n",
        ),
        Some(v) if v.is_empty() => out.push_str("No live allocation at this moment.\n"),
        Some(v) => {
            out.push_str("Live bytes by operator (the call site of a trace):\n");
            let mut t = new_table(&["rank", "operator", "live", "share", "allocations"]);
            for (i, s) in v.iter().take(top).enumerate() {
                t.add_row(vec![
                    (i + 1).to_string(),
                    s.op.clone(),
                    fmt_bytes(s.bytes),
                    if c.allocated > 0 {
                        fmt_pct(s.bytes as f64 / c.allocated as f64)
                    } else {
                        String::new()
                    },
                    if s.events == 0 {
                        "-".into()
                    } else {
                        s.events.to_string()
                    },
                ]);
            }
            align_numbers(&mut t, 2);
            out.push_str(&format!("{t}\n"));
            if v.len() > top {
                out.push_str(&format!("  … and {} more (raise --top)\n", v.len() - top));
            }
        }
    }
    out
}

pub fn trace_culprits_json(file: &str, all: &[TraceCulprits]) -> String {
    let v = json!({
        "schema": "fragscope.trace-culprits/1",
        "file": file,
        "kind": "profiler_trace",
        "devices": all,
    });
    serde_json::to_string_pretty(&v).expect("serialisable") + "\n"
}
