//! Findings of the inputs that are not snapshots: the [`Report`] of a
//! `torch.profiler` trace recorded with `profile_memory=True`
//! ([`Report::of_trace`]; each device's figures are a [`Traced`] detail)
//! and the [`CategoryReport`] of an `export_memory_timeline` file.
//! `timeline`, `culprits` and `report` show these; `stats` has its own
//! tables in [`crate::render::stats`].
//!
//! Owns: the moment a report shows (the series and its key moments are the
//! timeline stage's, [`crate::timeline::trace`], as for a snapshot), the
//! live bytes by operator at that moment, and the one line that says what
//! a trace cannot give ([`NO_LAYOUT`]); the verdict is
//! [`crate::analysis::verdict`]'s, as a snapshot's. It does not decode (that
//! is [`crate::input::profiler`]) and does no formatting beyond those
//! sentences. Output is deterministic: file names are base names, series are
//! downsampled to a fixed number of points, lists keep the order the decoder
//! gives them (largest first, ties by name).

use super::{DeviceDetail, DeviceReport, OomFinding, Report, ReportDetail, Traced};
use crate::analysis::advice::{OomFigures, diagnose};
use crate::core::style::Style;
use crate::core::text::upper_first;
use crate::core::units::fmt_pct;
use crate::model::OomMark;
use crate::model::memtimeline::MemoryTimeline;
use crate::model::profiler::{ProfilerTrace, TraceDevice};
use crate::timeline::downsample::{Order, downsample_categories, downsample_in};
use crate::timeline::trace::{trace_key_moments, trace_series};
use crate::timeline::{Moment, Sample};

pub use crate::analysis::verdict::NO_LAYOUT;

/// What every output on a memory-timeline export says about its figures.
pub const NO_ALLOCATOR: &str = "a memory-timeline export records live tensor bytes by category, not the allocator: reserved memory, free gaps, fragmentation and call sites are not measurable for it; record a profiler trace or a memory snapshot for those";

pub use super::REPORT_POINTS;

/// `cuda:0 (NVIDIA H100, 79.65 GiB)`: the label, with the name and capacity
/// where the trace gives them.
pub fn heading(st: &Style, d: &TraceDevice) -> String {
    match (&d.name, d.capacity) {
        (Some(n), Some(c)) => format!("{} ({n}, {})", d.label, st.bytes(c)),
        (None, Some(c)) => format!("{} ({})", d.label, st.bytes(c)),
        (Some(n), None) => format!("{} ({n})", d.label),
        _ => d.label.clone(),
    }
}

/// The devices of a trace a command looks at: every one, or those whose
/// device index is `device` (CPU memory has index −1).
pub fn select(tr: &ProfilerTrace, device: Option<i64>) -> Result<Vec<&TraceDevice>, String> {
    let all: Vec<&TraceDevice> = tr.devices.iter().collect();
    let Some(want) = device else { return Ok(all) };
    let hit: Vec<&TraceDevice> = all
        .iter()
        .copied()
        .filter(|d| d.key.device_id == want && !d.key.is_cpu())
        .collect();
    if hit.is_empty() {
        return Err(format!(
            "device {want} has no memory events in this trace (devices: {})",
            if all.is_empty() {
                "none".to_string()
            } else {
                all.iter()
                    .map(|d| d.label.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    }
    Ok(hit)
}

/// The moment a report or `culprits` shows by default: the first OOM,
/// else the peak of allocated bytes.
pub fn default_moment(d: &TraceDevice) -> (Moment, String) {
    if d.ooms.is_empty() {
        (Moment::PeakAllocated, "peak allocated".into())
    } else {
        (Moment::Oom(0), "first out-of-memory event".into())
    }
}

impl Report {
    /// Everything a report shows of a trace. `at`: the moment of the
    /// operator table (default [`default_moment`]); an error names the
    /// device and why.
    pub fn of_trace(
        st: &Style,
        tr: &ProfilerTrace,
        file: &str,
        format: &str,
        device: Option<i64>,
        at: Option<Moment>,
    ) -> Result<Report, String> {
        let mut devices = Vec::new();
        for d in select(tr, device)? {
            devices.push(trace_device(st, tr, d, at)?);
        }
        let mut r = Report {
            file: crate::analysis::report::base_name(file),
            format: format.to_string(),
            verdict: Vec::new(),
            devices,
            culprits: Vec::new(),
            quality: trace_quality(tr),
            what_if: Vec::new(),
            detail: ReportDetail::Trace {
                kind: trace_kind(tr),
                missing: crate::model::profiler::MISSING_FIGURES
                    .iter()
                    .map(|(f, why)| (f.to_string(), why.to_string()))
                    .collect(),
                no_gpu: tr.no_gpu_memory(),
            },
        };
        r.verdict = crate::analysis::verdict::verdict(st, &r);
        Ok(r)
    }
}

/// One device of a trace's report, at `at` (default [`default_moment`]).
fn trace_device(
    st: &Style,
    tr: &ProfilerTrace,
    d: &TraceDevice,
    at: Option<Moment>,
) -> Result<DeviceReport, String> {
    let (m, label) = match at {
        Some(m) => (m, crate::analysis::report::moment_name(m)),
        None => default_moment(d),
    };
    let moment_at =
        crate::timeline::trace::resolve(d, m).map_err(|e| format!("{}: {e}", d.label))?;
    let ooms = d
        .ooms
        .iter()
        .map(|o| {
            let at = d.events.iter().rposition(|e| e.ts_us <= o.ts_us);
            OomFinding {
                mark: OomMark {
                    // Drawn where the failure met the state: after the
                    // last memory event recorded before it.
                    event: at.unwrap_or(0),
                    time_us: Some(o.ts_us.floor() as i64),
                    request: o.bytes,
                    largest_gap: None,
                    device_free: None,
                },
                diagnosis: diagnose(st, &OomFigures::of_trace(o, d.capacity)),
            }
        })
        .collect();
    let reserved_known = d.summary.peak_reserved.is_some();
    // The start sample has no reserved figure (a trace reports totals
    // after events); drawing it as 0 would invent a drop.
    let series = trace_series(d);
    let samples: Vec<Sample> = downsample_in(&series.to_vec(), REPORT_POINTS, Order::LowThenHigh)
        .into_iter()
        .filter(|x| !reserved_known || x.reserved.is_some())
        .collect();
    let moment_sample = series.after(moment_at);
    Ok(DeviceReport {
        device: d.key.device_id,
        events: d.summary.events as usize,
        first_time_us: d.summary.first_time_us,
        samples,
        key_moments: trace_key_moments(d, &tr.names, &series),
        ooms,
        moment_label: label,
        moment_at,
        moment_time_us: moment_sample.time_us,
        detail: DeviceDetail::Traced(Box::new(Traced {
            label: d.label.clone(),
            heading: heading(st, d),
            is_cpu: d.key.is_cpu(),
            capacity: d.capacity,
            reserved_known,
            moment_sample,
            live_by_op: d.live_by_op(&tr.names, moment_at),
            summary: d.summary.clone(),
        })),
    })
}

/// The trace's decoding anomalies and schema notes.
fn trace_quality(tr: &ProfilerTrace) -> Vec<String> {
    let mut quality = Vec::new();
    for a in &tr.anomalies {
        quality.push(format!("{} × {} (e.g. {})", a.count, a.kind, a.example));
    }
    if tr.bytes_only() {
        quality.push(
            "2021 schema ([memory] events carry only Bytes): allocated bytes are rebuilt by summing from the least the trace implies was allocated before it; reserved memory is not recorded and allocations cannot be paired with their frees".into(),
        );
    }
    quality
}

/// `profiler trace: 2551 trace events, 236 [memory] events, …`.
fn trace_kind(tr: &ProfilerTrace) -> String {
    let mut kind = format!(
        "profiler trace: {} trace events, {} [memory] events, {} operators",
        tr.trace_events, tr.memory_events, tr.op_events
    );
    if let (Some(r), Some(w)) = (tr.rank, tr.world_size) {
        kind.push_str(&format!(", rank {r} of {w}"));
    }
    kind
}

/// Everything a report shows of a memory-timeline export.
#[derive(Debug, Clone)]
pub struct CategoryReport {
    pub file: String,
    pub format: String,
    pub kind: String,
    pub verdict: Vec<String>,
    /// The file's figures, with its series downsampled for the chart.
    pub timeline: MemoryTimeline,
    pub quality: Vec<String>,
}

pub fn build_categories(
    st: &Style,
    tl: &MemoryTimeline,
    file: &str,
    format: &str,
) -> CategoryReport {
    let small = MemoryTimeline {
        form: tl.form,
        rows: tl.rows,
        samples: downsample_categories(&tl.samples, REPORT_POINTS).into(),
        peak: tl.peak,
        actions: tl.actions,
        anomalies: tl.anomalies.clone(),
    };
    let form = match tl.form {
        Some(crate::model::memtimeline::TimelineForm::Raw) => "raw rows",
        _ => "times and sizes",
    };
    let kind = format!(
        "memory timeline (export_memory_timeline, {form}): {} rows, {} time steps",
        tl.rows,
        tl.samples.len()
    );
    let mut verdict = Vec::new();
    match tl.peak {
        None => verdict.push("The memory timeline is empty.".into()),
        Some(p) => {
            let mut parts: Vec<(u64, crate::model::memtimeline::Category)> =
                crate::model::memtimeline::Category::ALL
                    .iter()
                    .map(|&c| (p.bytes[c as usize], c))
                    .filter(|x| x.0 > 0)
                    .collect();
            parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let at = match (p.time_us, tl.first_time_us()) {
                (Some(t), Some(o)) => format!("t={:.3} s", (t - o) as f64 / 1e6),
                _ => "before profiling".into(),
            };
            verdict.push(format!(
                "Peak: {} of live tensors at {at}.",
                st.bytes(p.total)
            ));
            if let Some((b, c)) = parts.first() {
                verdict.push(format!(
                    "The largest category at the peak: {} with {} ({} of the peak).",
                    c.as_str(),
                    st.bytes(*b),
                    fmt_pct(*b as f64 / p.total.max(1) as f64)
                ));
            }
        }
    }
    verdict.push(upper_first(NO_ALLOCATOR) + ".");
    CategoryReport {
        file: crate::analysis::report::base_name(file),
        format: format.to_string(),
        kind,
        verdict,
        timeline: small,
        quality: tl
            .anomalies
            .iter()
            .map(|a| format!("{} × {} (e.g. {})", a.count, a.kind, a.example))
            .collect(),
    }
}
