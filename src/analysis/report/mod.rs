//! The report: every finding `fragscope report`, `fragscope plot` and
//! `fragscope view` show, gathered once into plain data that the renderers
//! ([`crate::render::charts`], [`crate::render::html`],
//! [`crate::render::markdown`]) lay out. One [`Report`] for a snapshot and
//! its replay ([`build`], in `snapshot.rs`, re-exported here) and for a
//! profiler trace ([`Report::of_trace`], in [`trace`]): what both give is a
//! field of [`Report`] and [`DeviceReport`]; what only one gives is in the
//! `detail` of each ([`ReportDetail`], [`DeviceDetail`]), so a renderer
//! asks once which figures there are and prints "not measurable" or skips
//! a section for the rest. A memory-timeline export has its own
//! [`trace::CategoryReport`]: series per tensor category, no allocator
//! events. What the inputs share lives here: the out-of-memory findings,
//! how a moment is named and dated, the series length of a chart.
//!
//! Output is deterministic: the file is named by its base name only, series
//! are downsampled to a fixed number of points, every list has a stable
//! order with explicit tie-breakers.

mod snapshot;
pub mod trace;

use crate::analysis::advice::Diagnosis;
use crate::analysis::culprits;
use crate::analysis::stats::{StateStats, TraceCoverage};
pub use crate::analysis::verdict::VerdictLine;
use crate::model::profiler::{DeviceSummary, OpShare};
use crate::model::{Moment, OomMark, Segment};
use crate::timeline::{KeyMoment, ReplayReport, Sample};
pub use snapshot::*;

/// Everything a report shows of one input, snapshot or profiler trace.
#[derive(Debug, Clone)]
pub struct Report {
    /// Base name of the input (never a full path).
    pub file: String,
    pub format: String,
    /// Plain-words summary, most important first.
    pub verdict: Vec<VerdictLine>,
    pub devices: Vec<DeviceReport>,
    /// Call sites by device at each device's moment; empty for a trace
    /// (it records no call site of a block).
    pub culprits: Vec<CulpritRow>,
    /// Data-quality notes (replay or decoding anomalies), each once.
    pub quality: Vec<String>,
    /// What-if model runs (one per device with allocations in its trace),
    /// attached by the caller; empty when not run, and for a trace.
    pub what_if: Vec<crate::sim::SimReport>,
    pub detail: ReportDetail,
}

/// What only one kind of input tells about the whole file.
#[derive(Debug, Clone)]
pub enum ReportDetail {
    /// A snapshot: its allocator settings and how much of the run its
    /// trace covers.
    Snapshot {
        /// `allocator_settings` as (key, value) text; empty when not recorded.
        settings: Vec<(String, String)>,
        settings_recorded: bool,
        coverage: Vec<TraceCoverage>,
    },
    /// A profiler trace.
    Trace {
        /// `profiler trace: 2551 trace events, 236 [memory] events, …`.
        kind: String,
        /// Figures this input cannot give, with why.
        missing: Vec<(String, String)>,
        /// For a trace whose `[memory]` events are all CPU memory: the
        /// sentence that says so
        /// ([`crate::model::profiler::ProfilerTrace::no_gpu_memory`]).
        no_gpu: Option<String>,
    },
}

/// One device of a [`Report`].
#[derive(Debug, Clone)]
pub struct DeviceReport {
    /// The device index (a trace's CPU memory: −1).
    pub device: i64,
    /// Trace events of a snapshot, `[memory]` events of a profiler trace.
    pub events: usize,
    /// Epoch µs of the first event, when events carry times.
    pub first_time_us: Option<i64>,
    /// The series for charts, downsampled (min/max per bucket).
    pub samples: Vec<Sample>,
    pub key_moments: Vec<KeyMoment>,
    pub ooms: Vec<OomFinding>,
    /// How the shown moment was chosen, e.g. `first out-of-memory event`.
    pub moment_label: String,
    /// Event after which the shown state holds (`None` = start).
    pub moment_at: Option<usize>,
    pub moment_time_us: Option<i64>,
    pub detail: DeviceDetail,
}

/// What only one kind of input tells about a device: the replayed
/// allocator layout of a snapshot, or a trace's totals and operators.
#[derive(Debug, Clone)]
pub enum DeviceDetail {
    Replayed(Box<Replayed>),
    Traced(Box<Traced>),
}

/// A snapshot's device, replayed: its peaks as samples of the whole
/// series and the segment layout at the shown moment.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The first sample of the whole series where reserved peaks.
    pub peak_reserved: Sample,
    /// The first sample where allocated peaks.
    pub peak_allocated: Sample,
    /// Where allocated peaks when a pending-free block counts until its
    /// `free_completed`, as PyTorch's memory_viz counts.
    pub peak_allocated_incl_pending: PeakInclPending,
    /// The first sample where the fragmentation ratio is highest.
    pub highest_fragmentation: Sample,
    pub end: Sample,
    pub segments: Vec<Segment>,
    pub moment_stats: StateStats,
    pub failed_request: Option<u64>,
    pub replay_report: ReplayReport,
    /// The culprits summary at the shown moment.
    pub culprit_summary: Option<culprits::Summary>,
}

/// A profiler trace's device: the allocator's totals, no layout.
#[derive(Debug, Clone)]
pub struct Traced {
    /// `cuda:0`, `hip:0`, `cpu`.
    pub label: String,
    /// `cuda:0 (NVIDIA H100 80GB HBM3, 79.65 GiB)`.
    pub heading: String,
    pub is_cpu: bool,
    pub capacity: Option<u64>,
    /// `Total Reserved` recorded (not CPU memory, not the 2021 schema).
    pub reserved_known: bool,
    /// The totals after the shown moment's event.
    pub moment_sample: Sample,
    /// Live bytes by operator at the shown moment; `None` without `Addr`.
    pub live_by_op: Option<Vec<OpShare>>,
    pub summary: DeviceSummary,
}

/// The peak of allocated bytes including pending frees
/// ([`ReplayReport::peak_allocated_incl_pending`]) and when it was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeakInclPending {
    pub bytes: u64,
    /// Event after which it is first reached (`None` = start).
    pub at: Option<usize>,
    pub time_us: Option<i64>,
}

impl DeviceReport {
    /// The replayed layout, for a snapshot's device.
    pub fn replayed(&self) -> Option<&Replayed> {
        match &self.detail {
            DeviceDetail::Replayed(x) => Some(x),
            DeviceDetail::Traced(_) => None,
        }
    }

    /// The totals and operators, for a trace's device.
    pub fn traced_detail(&self) -> Option<&Traced> {
        match &self.detail {
            DeviceDetail::Traced(x) => Some(x),
            DeviceDetail::Replayed(_) => None,
        }
    }

    /// `device 0` for a snapshot's device, `cuda:0` for a trace's.
    pub fn name(&self) -> String {
        match &self.detail {
            DeviceDetail::Replayed(_) => format!("device {}", self.device),
            DeviceDetail::Traced(t) => t.label.clone(),
        }
    }

    /// Sizes of the free blocks at the shown moment (none without a layout).
    pub fn gaps(&self) -> Vec<u64> {
        self.replayed().map_or_else(Vec::new, |x| {
            x.segments
                .iter()
                .flat_map(|s| s.blocks.iter())
                .filter(|b| b.state == crate::model::BlockState::Inactive)
                .map(|b| b.size)
                .collect()
        })
    }

    /// `event 421, t=1.234 s`, `start of the trace`, or `the recorded
    /// state` when there is no trace.
    pub fn moment_text(&self) -> String {
        if !self.traced() {
            return "the recorded state".into();
        }
        moment_text(self.moment_at, self.moment_time_us, self.first_time_us)
    }

    /// When a key moment or a peak holds, for the tables: `no trace` when
    /// the device has none (its one moment is the recorded state, not the
    /// start of a trace).
    pub fn when(&self, at: Option<usize>, time_us: Option<i64>) -> String {
        if !self.traced() {
            return "no trace".into();
        }
        moment_text(at, time_us, self.first_time_us)
    }

    /// A trace was recorded for this device: peaks and moments exist
    /// (always, for a profiler trace's device).
    pub fn traced(&self) -> bool {
        self.events > 0 || self.traced_detail().is_some()
    }

    /// What [`Report::main_device`] ranks devices by: accelerators first,
    /// then peak reserved, then (for a trace) peak allocated.
    fn main_key(&self) -> (bool, Option<u64>, Option<u64>) {
        match &self.detail {
            DeviceDetail::Replayed(x) => (true, x.peak_reserved.reserved, None),
            DeviceDetail::Traced(t) => {
                let s = &t.summary;
                (
                    !t.is_cpu,
                    Some(s.peak_reserved.as_ref().map_or(0, |p| p.bytes)),
                    Some(s.peak_allocated.as_ref().map_or(0, |p| p.bytes)),
                )
            }
        }
    }
}

impl Report {
    /// The device the one-page summary shows: the first with an OOM, else
    /// the one [`DeviceReport::main_key`] ranks first (lowest ordinal on
    /// ties).
    pub fn main_device(&self) -> Option<&DeviceReport> {
        self.devices
            .iter()
            .find(|d| !d.ooms.is_empty())
            .or_else(|| {
                self.devices
                    .iter()
                    .fold(None, |b: Option<&DeviceReport>, d| match b {
                        Some(b) if b.main_key() >= d.main_key() => Some(b),
                        _ => Some(d),
                    })
            })
    }

    pub fn culprits_of(&self, device: i64) -> impl Iterator<Item = &CulpritRow> {
        self.culprits.iter().filter(move |c| c.device == device)
    }

    pub fn what_if_of(&self, device: i64) -> Option<&crate::sim::SimReport> {
        self.what_if.iter().find(|w| w.device == device)
    }

    /// Any device has an out-of-memory event.
    pub fn any_oom(&self) -> bool {
        self.devices.iter().any(|d| !d.ooms.is_empty())
    }

    /// The input is a profiler trace.
    pub fn is_trace(&self) -> bool {
        matches!(self.detail, ReportDetail::Trace { .. })
    }
}

#[derive(Debug, Clone)]
pub struct OomFinding {
    pub mark: OomMark,
    pub diagnosis: Diagnosis,
}

/// `event N, t=S s` after `origin` (the first timed event), or the start.
pub fn moment_text(at: Option<usize>, time_us: Option<i64>, origin: Option<i64>) -> String {
    match (at, time_us, origin) {
        (None, _, _) => "start of the trace".into(),
        (Some(i), Some(t), Some(o)) => format!("event {i}, t={:.3} s", (t - o) as f64 / 1e6),
        (Some(i), _, _) => format!("event {i}"),
    }
}

/// Points kept per device series in reports.
pub const REPORT_POINTS: usize = 800;

/// `path/to/x.pickle` → `x.pickle`; stdin stays `-`.
pub fn base_name(path: &str) -> String {
    if path == "-" {
        return "-".into();
    }
    std::path::Path::new(path)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// The moment as the user would name it on the command line.
pub fn moment_name(m: Moment) -> String {
    match m {
        Moment::Start => "start".into(),
        Moment::End => "end".into(),
        Moment::Event(n) => format!("after event {n}"),
        Moment::TimeUs(t) => format!("t={t} µs"),
        Moment::PeakAllocated => "peak allocated".into(),
        Moment::PeakReserved => "peak reserved".into(),
        Moment::MaxFragmentation => "highest fragmentation".into(),
        Moment::MinLargestGap => "smallest largest free gap".into(),
        Moment::Oom(n) => format!("out-of-memory event {}", n + 1),
    }
}
