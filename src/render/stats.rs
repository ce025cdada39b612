//! Text rendering of `fragscope stats`, and its text and JSON for profiler
//! traces and memory-timeline exports: the snapshot tables' column names,
//! units and wording; figures a format cannot give read `n/a` and a note
//! says why.

use super::pretty::write_line;
use super::table::{Tone, align_numbers, fragmentation_tone, new_table, toned};
use crate::analysis::findings::Stats;
use crate::analysis::ranks::{OUTLIER_FRAGMENTATION_MARGIN, OUTLIER_RESERVED_FACTOR};
use crate::analysis::stats::{FileStats, StateStats};
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::memtimeline::{Category, MemoryTimeline};
use crate::model::profiler::{
    DeviceSummary, MISSING_FIGURES, OpShare, Peak, ProfilerTrace, TraceDevice,
};
use comfy_table::Cell;
use serde::Serialize;
use serde_json::json;
use std::io::{self, Write};

/// Out-of-memory events the text lists per device.
const OOMS_LISTED: u64 = 20;

pub fn stat_cells(st: &Style, s: &StateStats) -> Vec<Cell> {
    vec![
        Cell::new(s.segments),
        Cell::new(s.blocks),
        Cell::new(st.bytes(s.reserved_bytes)),
        Cell::new(st.bytes(s.allocated_bytes)),
        Cell::new(st.bytes(s.internal_free_bytes)),
        Cell::new(st.bytes(s.external_free_bytes)),
        Cell::new(st.bytes(s.pending_free_bytes)),
        Cell::new(st.bytes(s.largest_free_block_bytes)),
        Cell::new(s.free_blocks),
        toned(
            fmt_pct(s.fragmentation),
            fragmentation_tone(s.fragmentation),
        ),
    ]
}

pub const STAT_HEADER: [&str; 10] = [
    "segments",
    "blocks",
    "reserved",
    "allocated",
    "free internal",
    "free external",
    "pending free",
    "largest free",
    "free blocks",
    "fragmentation",
];

/// `fragscope stats` on a snapshot: the device table, the pools (when a
/// device has several), the trace's coverage, the OOM events, the
/// allocator settings, the segment map, the totals and the warnings.
pub fn render(st: &Style, fs: &FileStats, segmap: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!("{} ({})\n", fs.file, fs.format));
    out.push_str(&device_table(st, fs));
    if fs.devices.iter().any(|d| d.pools.len() > 1) {
        out.push_str("\nBy pool and stream:\n");
        out.push_str(&pool_table(st, fs));
    }
    out.push_str("\nTrace:\n");
    out.push_str(&coverage_table(st, fs));
    if !fs.oom_events.is_empty() {
        out.push_str("\nOut-of-memory events:\n");
        // A program that catches its OOMs and goes on may record one at
        // most steps: the first few of each device tell the story, and
        // `oom` lists each (the JSON form holds them all).
        let mut shown: std::collections::BTreeMap<i64, u64> = Default::default();
        for o in &fs.oom_events {
            let n = shown.entry(o.device).or_default();
            *n += 1;
            if *n > OOMS_LISTED {
                continue;
            }
            out.push_str(&format!(
                "  device {} event #{}: tried {} with {} free on the device\n",
                o.device,
                o.index,
                st.bytes(o.size),
                o.device_free
                    .map(|b| st.bytes(b))
                    .unwrap_or_else(|| "unknown".into())
            ));
        }
        for (d, n) in shown.into_iter().filter(|&(_, n)| n > OOMS_LISTED) {
            out.push_str(&format!(
                "  device {d}: {} more (`fragscope oom` explains each)\n",
                n - OOMS_LISTED
            ));
        }
    }
    if let Some(c) = &fs.allocator_conf
        && !c.is_empty()
    {
        out.push_str(&format!("\nPYTORCH_CUDA_ALLOC_CONF: {c}\n"));
    }
    out.push('\n');
    out.push_str(segmap);
    out.push_str(&format!(
        "segments: {}\ntotal_reserved: {}\ntotal_allocated: {}\ntotal_free: {} ({} internal, {} external)\n",
        fs.totals.segments,
        st.bytes(fs.totals.reserved_bytes),
        st.bytes(fs.totals.allocated_bytes),
        st.bytes(fs.totals.free_bytes()),
        st.bytes(fs.totals.internal_free_bytes),
        st.bytes(fs.totals.external_free_bytes),
    ));
    for w in &fs.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

/// One row a device, and a row `all` when there are several.
fn device_table(st: &Style, fs: &FileStats) -> String {
    let mut h = vec!["device"];
    h.extend(STAT_HEADER);
    let mut t = new_table(st, &h);
    for d in &fs.devices {
        let mut row = vec![Cell::new(d.device)];
        row.extend(stat_cells(st, &d.stats));
        t.add_row(row);
    }
    if fs.devices.len() > 1 {
        let mut row = vec![Cell::new("all")];
        row.extend(stat_cells(st, &fs.totals));
        t.add_row(row);
    }
    align_numbers(&mut t, 1);
    format!("{t}\n")
}

/// One row a (device, pool, stream).
fn pool_table(st: &Style, fs: &FileStats) -> String {
    let mut h = vec!["device", "pool", "stream", "type"];
    h.extend(STAT_HEADER);
    let mut t = new_table(st, &h);
    for d in &fs.devices {
        for p in &d.pools {
            let mut row = vec![
                Cell::new(d.device),
                Cell::new(format!("({}, {})", p.pool_id.0, p.pool_id.1)),
                Cell::new(if p.stream == 0 {
                    "default".into()
                } else {
                    format!("{:#x}", p.stream)
                }),
                Cell::new(p.segment_type),
            ];
            row.extend(stat_cells(st, &p.stats));
            t.add_row(row);
        }
    }
    align_numbers(&mut t, 4);
    format!("{t}\n")
}

/// What each device's trace covers (its events, actions and time span,
/// and whether it starts mid-run), or that the file has none.
fn coverage_table(st: &Style, fs: &FileStats) -> String {
    if fs.trace_coverage.is_empty() {
        return "  no device_traces in this file (recorded without history, or a bare segment list)\n"
            .into();
    }
    let mut t = new_table(
        st,
        &["device", "events", "actions", "time span", "coverage"],
    );
    for c in &fs.trace_coverage {
        let actions = c
            .actions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let span = match (c.first_time_us, c.last_time_us) {
            // In f64: a hostile file's times may be i64::MIN and i64::MAX.
            (Some(a), Some(b)) => format!("{:.3} s", (b as f64 - a as f64) / 1e6),
            _ => "no time_us".into(),
        };
        let cov = if c.events == 0 {
            "empty".to_string()
        } else if c.single_entry {
            "1 entry (recorded with enabled=\"state\"?)".to_string()
        } else if c.starts_mid_run {
            format!(
                "starts mid-run: {} frees of blocks allocated before the first entry (ring buffer full, or recording started late)",
                c.frees_without_alloc
            )
        } else {
            "complete from the first allocation".to_string()
        };
        t.add_row(vec![
            Cell::new(c.device),
            Cell::new(c.events),
            Cell::new(if actions.is_empty() {
                "-".into()
            } else {
                actions
            }),
            Cell::new(span),
            Cell::new(cov),
        ]);
    }
    format!("{t}\n")
}

/// Schema of `fragscope stats --json` for a trace.
pub const TRACE_STATS_SCHEMA: &str = "fragscope.trace-stats/1";

/// Schema of `fragscope stats --json` for a memory timeline.
pub const TIMELINE_STATS_SCHEMA: &str = "fragscope.timeline-stats/1";

/// Rows shown in the per-operator lists.
const TOP: usize = 5;

pub(crate) const NA: &str = "n/a";

/// The columns of a device's state in the `stats` tables, snapshot or trace.
pub const STATE_COLUMNS: [&str; 6] = [
    "reserved",
    "allocated",
    "free internal",
    "free external",
    "largest free",
    "fragmentation",
];

/// Seconds since `start`, e.g. `+1.234 s`.
fn rel(t: Option<i64>, start: Option<i64>) -> String {
    match (t, start) {
        (Some(t), Some(s)) => format!("+{:.3} s", (t - s) as f64 / 1e6),
        (None, _) => "start".into(),
        _ => "-".into(),
    }
}

/// Bytes, or `n/a` for a figure the input does not record.
pub(crate) fn opt_bytes(st: &Style, x: Option<u64>) -> String {
    x.map(|b| st.bytes(b)).unwrap_or_else(|| NA.to_string())
}

fn where_(p: &Peak, start: Option<i64>) -> String {
    let mut s = rel(p.time_us, start);
    if let Some(op) = &p.op {
        s.push_str(&format!(" in {op}"));
    }
    s
}

fn shares(st: &Style, out: &mut String, title: &str, v: &[OpShare], total: Option<u64>) {
    if v.is_empty() {
        return;
    }
    out.push_str(title);
    let mut t = new_table(st, &["operator", "bytes", "share", "allocations"]);
    for s in v.iter().take(TOP) {
        t.add_row(vec![
            s.op.clone(),
            st.bytes(s.bytes),
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

/// `fragscope stats` on a profiler trace.
pub fn trace_text(st: &Style, file: &str, format: &str, tr: &ProfilerTrace) -> String {
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
    let mut t = new_table(st, &[&["device", "events"][..], &STATE_COLUMNS].concat());
    for d in &tr.devices {
        let s = &d.summary;
        t.add_row(vec![
            d.label.clone(),
            s.events.to_string(),
            opt_bytes(st, s.reserved_end),
            st.bytes(s.allocated_end),
            NA.into(),
            opt_bytes(st, s.external_free_end),
            NA.into(),
            NA.into(),
        ]);
    }
    align_numbers(&mut t, 1);
    out.push_str(&format!("{t}\n"));

    out.push_str("\nOver the trace:\n");
    let mut t = new_table(
        st,
        &[
            "device",
            "allocated before",
            "peak reserved",
            "peak allocated",
            "at",
            "peak free external",
            "at",
            "reserved grew",
        ],
    );
    for d in &tr.devices {
        let s = &d.summary;
        let before = if s.allocated_before_is_lower_bound {
            format!("≥ {}", st.bytes(s.allocated_before_trace))
        } else {
            st.bytes(s.allocated_before_trace)
        };
        let pa = s.peak_allocated.as_ref();
        let pf = s.peak_external_free.as_ref();
        t.add_row(vec![
            d.label.clone(),
            before,
            opt_bytes(st, s.peak_reserved.as_ref().map(|p| p.bytes)),
            opt_bytes(st, pa.map(|p| p.bytes)),
            pa.map(|p| where_(p, start)).unwrap_or_else(|| "-".into()),
            opt_bytes(st, pf.map(|p| p.bytes)),
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
        device_details(st, &mut out, d, start);
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

fn device_details(st: &Style, out: &mut String, d: &TraceDevice, start: Option<i64>) {
    let s: &DeviceSummary = &d.summary;
    out.push_str(&format!(
        "\n{}:\n",
        crate::analysis::report::trace::heading(st, d)
    ));
    if s.has_totals && !d.key.is_cpu() {
        if s.reserved_growth.is_empty() {
            out.push_str(&format!(
                "  reserved memory stayed at {} for the whole trace (no new segment was needed)\n",
                opt_bytes(st, s.reserved_start)
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
                st.bytes(grown),
                s.growth_with_free_cache,
                st.bytes(s.growth_with_free_cache_bytes)
            ));
            let steps = super::table::largest_growth_first(&s.reserved_growth);
            let mut t = new_table(
                st,
                &[
                    "at",
                    "grew by",
                    "reserved after",
                    "allocation",
                    "free before",
                    "operator",
                ],
            );
            for g in steps.into_iter().take(TOP) {
                t.add_row(vec![
                    rel(Some(g.time_us), start),
                    st.bytes(g.reserved_after - g.reserved_before),
                    st.bytes(g.reserved_after),
                    st.bytes(g.bytes),
                    st.bytes(g.free_before),
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
            st.bytes(s.frees_before_trace_bytes)
        ));
    }
    if let (Some(n), Some(b)) = (s.live_at_end, s.live_at_end_bytes)
        && n > 0
    {
        out.push_str(&format!(
            "  {n} allocations made during the trace are still live at its end ({})\n",
            st.bytes(b)
        ));
    }
    for o in &d.ooms {
        out.push_str(&format!(
            "  out of memory at {}: tried {} with {} reserved, {} allocated{}\n",
            rel(Some(o.ts_us.floor() as i64), start),
            st.bytes(o.bytes),
            opt_bytes(st, o.total_reserved),
            opt_bytes(st, o.total_allocated),
            o.op.as_ref()
                .map(|x| format!(", in {x}"))
                .unwrap_or_default()
        ));
    }
    let total_alloc: u64 = s.allocations_by_op.iter().map(|x| x.bytes).sum();
    shares(
        st,
        out,
        "  Bytes allocated, by operator:\n",
        &s.allocations_by_op,
        Some(total_alloc),
    );
    shares(
        st,
        out,
        "  Live at the peak of allocated, by operator:\n",
        &s.live_at_peak_by_op,
        s.peak_allocated.as_ref().map(|p| p.bytes),
    );
}

/// `fragscope stats --json` on a profiler trace (schema
/// `fragscope.trace-stats/1`), written as it is serialized: a trace's list
/// of OOMs is as long as the trace makes it.
pub fn write_trace_json(
    w: &mut dyn Write,
    file: &str,
    format: &str,
    tr: &ProfilerTrace,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Missing {
        figure: &'static str,
        why: &'static str,
    }
    #[derive(Serialize)]
    struct TraceStats<'a> {
        schema: &'static str,
        file: &'a str,
        format: &'a str,
        kind: &'static str,
        trace: &'a ProfilerTrace,
        notes: Vec<String>,
        missing_figures: Vec<Missing>,
    }
    let doc = TraceStats {
        schema: TRACE_STATS_SCHEMA,
        file,
        format,
        kind: "profiler_trace",
        trace: tr,
        notes: tr.no_gpu_memory().into_iter().collect(),
        missing_figures: MISSING_FIGURES
            .iter()
            .map(|&(figure, why)| Missing { figure, why })
            .collect(),
    };
    write_line(w, &doc)
}

/// `fragscope stats` on a memory-timeline export.
pub fn timeline_text(st: &Style, file: &str, format: &str, tl: &MemoryTimeline) -> String {
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
    let mut t = new_table(st, &h);
    for c in Category::ALL {
        let mut row = vec![c.as_str().to_string()];
        if let Some(p) = pre {
            row.push(st.bytes(p.get(c)));
        }
        let b = peak.bytes[c as usize];
        row.push(st.bytes(b));
        row.push(if peak.total > 0 {
            fmt_pct(b as f64 / peak.total as f64)
        } else {
            "-".into()
        });
        row.push(st.bytes(end.get(c)));
        t.add_row(row);
    }
    let mut row = vec!["total".to_string()];
    if let Some(p) = pre {
        row.push(st.bytes(p.total()));
    }
    row.extend([st.bytes(peak.total), String::new(), st.bytes(end.total())]);
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
        st.bytes(peak.total),
        rel(peak.time_us, start),
        parts
            .iter()
            .map(|(b, c)| format!("{} {}", c.as_str(), st.bytes(*b)))
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
/// `fragscope.timeline-stats/1`): a few figures a category.
pub fn write_timeline_json(
    w: &mut dyn Write,
    file: &str,
    format: &str,
    tl: &MemoryTimeline,
) -> io::Result<()> {
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
    write_line(w, &v)
}

// ---------------------------------------------------------------------------
// `fragscope timeline` and `fragscope culprits` on a trace or a memory
// timeline: the snapshot outputs' columns and wording for the figures these
// inputs have, `n/a` and one line of why for the others.

/// `fragscope stats` on one input, whatever its kind: the tables with the
/// segment map (`map_rows` segments at most), or a trace's or an export's
/// text.
pub fn text_of(st: &Style, s: &Stats, map_rows: usize) -> String {
    match s {
        Stats::Snapshot(fs, segments) => {
            render(st, fs, &super::segmap::segment_map(st, segments, map_rows))
        }
        Stats::Trace {
            file,
            format,
            trace,
        } => trace_text(st, file, format, trace),
        Stats::Categories {
            file,
            format,
            timeline,
        } => timeline_text(st, file, format, timeline),
    }
}

/// `fragscope stats --json` on one input, whatever its kind, written as it
/// is serialized: a snapshot's list of OOMs has an entry for each.
pub fn write_json_of(w: &mut dyn Write, s: &Stats) -> io::Result<()> {
    match s {
        Stats::Snapshot(fs, _) => write_line(w, &**fs),
        Stats::Trace {
            file,
            format,
            trace,
        } => write_trace_json(w, file, format, trace),
        Stats::Categories {
            file,
            format,
            timeline,
        } => write_timeline_json(w, file, format, timeline),
    }
}

/// `fragscope stats` on several snapshots: one row a file, with its
/// outlier flag, and what the flag means when one is raised.
pub fn files_text(st: &Style, files: &[FileStats], flags: &[Option<String>]) -> String {
    let mut t = new_table(
        st,
        &[
            &["file", "devices", "segments"][..],
            &STATE_COLUMNS,
            &["events", "OOMs", "outlier"],
        ]
        .concat(),
    );
    for (f, o) in files.iter().zip(flags) {
        let ooms = f.oom_events.len();
        t.add_row(vec![
            Cell::new(&f.file),
            Cell::new(f.devices.len()),
            Cell::new(f.totals.segments),
            Cell::new(st.bytes(f.totals.reserved_bytes)),
            Cell::new(st.bytes(f.totals.allocated_bytes)),
            Cell::new(st.bytes(f.totals.internal_free_bytes)),
            Cell::new(st.bytes(f.totals.external_free_bytes)),
            Cell::new(st.bytes(f.totals.largest_free_block_bytes)),
            toned(
                fmt_pct(f.totals.fragmentation),
                fragmentation_tone(f.totals.fragmentation),
            ),
            Cell::new(f.trace_events.iter().sum::<u64>()),
            if ooms > 0 {
                toned(ooms, Tone::Bad)
            } else {
                Cell::new(ooms)
            },
            toned(o.clone().unwrap_or_default(), Tone::Warn),
        ]);
    }
    align_numbers(&mut t, 1);
    let mut out = format!("{t}\n");
    if flags.iter().any(|f| f.is_some()) {
        out.push_str(&format!(
            "outlier: reserved more than {:.0}% above the median, or fragmentation more than {:.2} above it\n",
            (OUTLIER_RESERVED_FACTOR - 1.0) * 100.0,
            OUTLIER_FRAGMENTATION_MARGIN
        ));
    }
    out
}

/// `fragscope stats --json` on several snapshots (schema
/// `fragscope.stats-multi/1`), written as it is serialized.
pub fn write_files_json(
    w: &mut dyn Write,
    files: &[FileStats],
    flags: &[Option<String>],
    unreadable: usize,
) -> io::Result<()> {
    #[derive(Serialize)]
    struct Outlier<'a> {
        file: &'a str,
        why: &'a str,
    }
    #[derive(Serialize)]
    struct Multi<'a> {
        schema: &'static str,
        files: &'a [FileStats],
        outliers: Vec<Outlier<'a>>,
        unreadable: usize,
    }
    let outliers = (files.iter().zip(flags))
        .filter_map(|(f, o)| o.as_deref().map(|why| Outlier { file: &f.file, why }))
        .collect();
    write_line(
        w,
        &Multi {
            schema: "fragscope.stats-multi/1",
            files,
            outliers,
            unreadable,
        },
    )
}
