//! The report: every finding `fragscope report` and `fragscope plot` show,
//! gathered once into plain data that the renderers
//! ([`crate::render::charts`], [`crate::render::html`],
//! [`crate::render::markdown`]) lay out. One stage for every input: a
//! snapshot and its replay ([`snapshot`], re-exported here), a profiler
//! trace or a memory-timeline export ([`trace`]). What the inputs share
//! lives here: the out-of-memory findings, how a moment is named and
//! dated, the series length of a chart.
//!
//! Output is deterministic: the file is named by its base name only, series
//! are downsampled to a fixed number of points, every list has a stable
//! order with explicit tie-breakers.

mod snapshot;
pub mod trace;

use crate::analysis::advice::Diagnosis;
use crate::model::{Moment, OomMark};
pub use snapshot::*;

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
