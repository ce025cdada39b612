//! Findings of the inputs that are not snapshots: a `torch.profiler` trace
//! recorded with `profile_memory=True` and an `export_memory_timeline` file.
//! `timeline`, `culprits` and `report` show these; `stats` has its own
//! tables in [`crate::render::stats`].
//!
//! Owns: the moment a report shows (the series and its key moments are the
//! timeline stage's, [`crate::timeline::trace`], as for a snapshot), the
//! live bytes by operator at that moment, the verdict sentences, and the one
//! line that says what a trace cannot give ([`NO_LAYOUT`]). It does not
//! decode (that is [`crate::input::profiler`]) and does no formatting beyond those
//! sentences. Output is deterministic: file names are base names, series are
//! downsampled to a fixed number of points, lists keep the order the decoder
//! gives them (largest first, ties by name).

use super::OomFinding;
use crate::analysis::advice::{OomFigures, diagnose};
use crate::core::style::Style;
use crate::core::text::upper_first;
use crate::core::units::fmt_pct;
use crate::model::OomMark;
use crate::model::memtimeline::MemoryTimeline;
use crate::model::profiler::{BEFORE_TRACE, DeviceSummary, OpShare, ProfilerTrace, TraceDevice};
use crate::timeline::downsample::{Order, downsample_categories, downsample_in};
use crate::timeline::trace::{trace_key_moments, trace_series};
use crate::timeline::{KeyMoment, Moment, Sample};

/// What every output on a trace says about the figures it lacks.
pub const NO_LAYOUT: &str = "a profiler trace records allocated and reserved totals but no segment or block layout, so free gaps, the largest free gap, fragmentation and stranded bytes are not measurable for it; record a memory snapshot (torch.cuda.memory._record_memory_history + _dump_snapshot) for those";

/// What every output on a memory-timeline export says about its figures.
pub const NO_ALLOCATOR: &str = "a memory-timeline export records live tensor bytes by category, not the allocator: reserved memory, free gaps, fragmentation and call sites are not measurable for it; record a profiler trace or a memory snapshot for those";

pub use super::REPORT_POINTS;

pub use super::moment_text;

#[derive(Debug, Clone)]
pub struct TraceDeviceReport {
    /// `cuda:0`, `hip:0`, `cpu`.
    pub label: String,
    pub device_id: i64,
    /// `cuda:0 (NVIDIA H100 80GB HBM3, 79.65 GiB)`.
    pub heading: String,
    pub is_cpu: bool,
    pub capacity: Option<u64>,
    pub events: u64,
    pub first_time_us: Option<i64>,
    /// The series for charts, downsampled (min/max per bucket).
    pub samples: Vec<Sample>,
    /// `Total Reserved` recorded (not CPU memory, not the 2021 schema).
    pub reserved_known: bool,
    pub key_moments: Vec<KeyMoment>,
    pub ooms: Vec<OomFinding>,
    pub moment_label: String,
    pub moment_at: Option<usize>,
    pub moment_sample: Sample,
    /// Live bytes by operator at the shown moment; `None` without `Addr`.
    pub live_by_op: Option<Vec<OpShare>>,
    pub summary: DeviceSummary,
}

impl TraceDeviceReport {
    pub fn moment_text(&self) -> String {
        moment_text(
            self.moment_at,
            self.moment_sample.time_us,
            self.first_time_us,
        )
    }
}

#[derive(Debug, Clone)]
pub struct TraceReport {
    /// Base name of the input.
    pub file: String,
    pub format: String,
    /// `profiler trace: 2551 trace events, 236 [memory] events, …`.
    pub kind: String,
    pub verdict: Vec<String>,
    pub devices: Vec<TraceDeviceReport>,
    /// Figures this input cannot give, with why.
    pub missing: Vec<(String, String)>,
    pub quality: Vec<String>,
    /// For a trace whose `[memory]` events are all CPU memory: the sentence
    /// that says so ([`ProfilerTrace::no_gpu_memory`]).
    pub no_gpu: Option<String>,
}

impl TraceReport {
    /// The device the summary image shows: the first with an OOM, else the
    /// accelerator with the largest peak reserved (then allocated).
    pub fn main_device(&self) -> Option<&TraceDeviceReport> {
        self.devices
            .iter()
            .find(|d| !d.ooms.is_empty())
            .or_else(|| {
                self.devices
                    .iter()
                    .fold(None, |b: Option<&TraceDeviceReport>, d| {
                        let key = |x: &TraceDeviceReport| {
                            (
                                !x.is_cpu,
                                x.summary.peak_reserved.as_ref().map_or(0, |p| p.bytes),
                                x.summary.peak_allocated.as_ref().map_or(0, |p| p.bytes),
                            )
                        };
                        match b {
                            Some(b) if key(b) >= key(d) => Some(b),
                            _ => Some(d),
                        }
                    })
            })
    }
}

fn heading(st: &Style, d: &TraceDevice) -> String {
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

/// Everything a report shows of a trace. `at`: the moment of the operator
/// table (default [`default_moment`]); an error names the device and why.
pub fn build(
    st: &Style,
    tr: &ProfilerTrace,
    file: &str,
    format: &str,
    device: Option<i64>,
    at: Option<Moment>,
) -> Result<TraceReport, String> {
    let mut devices = Vec::new();
    for d in select(tr, device)? {
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
        let samples: Vec<Sample> =
            downsample_in(&series.to_vec(), REPORT_POINTS, Order::LowThenHigh)
                .into_iter()
                .filter(|x| !reserved_known || x.reserved.is_some())
                .collect();
        devices.push(TraceDeviceReport {
            label: d.label.clone(),
            device_id: d.key.device_id,
            heading: heading(st, d),
            is_cpu: d.key.is_cpu(),
            capacity: d.capacity,
            events: d.summary.events,
            first_time_us: d.summary.first_time_us,
            samples,
            reserved_known,
            key_moments: trace_key_moments(d, &tr.names, &series),
            ooms,
            moment_label: label,
            moment_at,
            moment_sample: series.after(moment_at),
            live_by_op: d.live_by_op(&tr.names, moment_at),
            summary: d.summary.clone(),
        });
    }
    let mut quality = Vec::new();
    for a in &tr.anomalies {
        quality.push(format!("{} × {} (e.g. {})", a.count, a.kind, a.example));
    }
    if tr.bytes_only() {
        quality.push(
            "2021 schema ([memory] events carry only Bytes): allocated bytes are rebuilt by summing from the least the trace implies was allocated before it; reserved memory is not recorded and allocations cannot be paired with their frees".into(),
        );
    }
    let mut kind = format!(
        "profiler trace: {} trace events, {} [memory] events, {} operators",
        tr.trace_events, tr.memory_events, tr.op_events
    );
    if let (Some(r), Some(w)) = (tr.rank, tr.world_size) {
        kind.push_str(&format!(", rank {r} of {w}"));
    }
    let mut r = TraceReport {
        file: crate::analysis::report::base_name(file),
        format: format.to_string(),
        kind,
        verdict: Vec::new(),
        devices,
        missing: crate::model::profiler::MISSING_FIGURES
            .iter()
            .map(|(f, why)| (f.to_string(), why.to_string()))
            .collect(),
        quality,
        no_gpu: tr.no_gpu_memory(),
    };
    r.verdict = verdict(st, &r);
    Ok(r)
}

/// The summary in words, with the snapshot report's wording for the
/// figures both have.
pub fn verdict(st: &Style, r: &TraceReport) -> Vec<String> {
    let mut v = Vec::new();
    if r.devices.is_empty() {
        v.push("The trace holds no memory events for the devices asked for.".into());
        return v;
    }
    for d in &r.devices {
        for o in &d.ooms {
            v.push(format!(
                "{}: out of memory at {}. {}.",
                d.label,
                moment_text(Some(o.mark.event), o.mark.time_us, d.first_time_us),
                upper_first(&o.diagnosis.headline),
            ));
        }
    }
    if let Some(n) = &r.no_gpu {
        // Said first and once: it is why no GPU figure follows.
        v.push(upper_first(n) + ".");
    } else if r.devices.iter().all(|d| d.ooms.is_empty()) {
        v.push("No out-of-memory event was recorded.".into());
    }
    let Some(d) = r.main_device() else { return v };
    let s = &d.summary;
    let peak_alloc = s.peak_allocated.as_ref().map_or(0, |p| p.bytes);
    match &s.peak_reserved {
        Some(p) => v.push(format!(
            "Peak on {}: {} reserved, {} allocated.",
            d.label,
            st.bytes(p.bytes),
            st.bytes(peak_alloc)
        )),
        None if d.is_cpu => v.push(format!(
            "Peak on {}: {} allocated (CPU memory is not cached by an allocator, so it has no reserved figure).",
            d.label,
            st.bytes(peak_alloc)
        )),
        None => v.push(format!(
            "Peak on {}: {} allocated (reserved memory is not recorded in this trace).",
            d.label,
            st.bytes(peak_alloc)
        )),
    }
    if let Some(p) = &s.peak_external_free {
        let growth = if s.reserved_growth.is_empty() {
            "reserved memory did not grow during the trace".to_string()
        } else {
            format!(
                "reserved memory grew {} time{}, {} of them while the cache already held the allocation's bytes free (fragmentation, or free memory in another pool or stream)",
                s.reserved_growth.len(),
                if s.reserved_growth.len() == 1 {
                    ""
                } else {
                    "s"
                },
                s.growth_with_free_cache
            )
        };
        v.push(format!(
            "Free external (reserved − allocated: cached by PyTorch, in no live tensor) peaked at {} at {}; {growth}.",
            st.bytes(p.bytes),
            moment_text(
                p.event.map(|e| e as usize),
                p.time_us,
                d.first_time_us
            ),
        ));
    }
    if let Some(ops) = &d.live_by_op {
        let total = d.moment_sample.allocated;
        let share = |b: u64| {
            if total > 0 {
                format!(
                    " ({} of {} allocated)",
                    fmt_pct(b as f64 / total as f64),
                    st.bytes(total)
                )
            } else {
                String::new()
            }
        };
        let older = ops
            .iter()
            .find(|o| o.op == BEFORE_TRACE)
            .map_or(0, |o| o.bytes);
        let top = ops.iter().find(|o| o.op != BEFORE_TRACE);
        let mut s = format!("At {} ({})", d.moment_text(), d.moment_label);
        if older > 0 {
            s.push_str(&format!(
                ", {} was allocated before the trace began{}",
                st.bytes(older),
                share(older)
            ));
        }
        match top {
            Some(t) => s.push_str(&format!(
                "{} {} holds the most live memory of the trace's allocations: {}{}.",
                if older > 0 { "; of the rest," } else { "," },
                t.op,
                st.bytes(t.bytes),
                share(t.bytes)
            )),
            None => s.push_str("; no allocation of the trace is live."),
        }
        v.push(s);
    }
    if r.no_gpu.is_none() {
        v.push(upper_first(NO_LAYOUT) + ".");
    }
    v
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
    let mut small = tl.clone();
    small.samples = downsample_categories(&tl.samples, REPORT_POINTS);
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
