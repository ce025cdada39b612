//! Profiler inputs: `torch.profiler` Chrome traces recorded with
//! `profile_memory=True` ([`chrome`]) and `export_memory_timeline` files
//! ([`memtimeline`]).
//!
//! Owns decoding those JSON documents into typed, already-analysed values:
//! the per-device allocation timeline of a trace (with the operator that was
//! running at each event) and the per-category live bytes of a memory
//! timeline. It must not read files, print, or touch the snapshot model: the
//! input stage hands it a parsed `serde_json::Value`, renderers and commands
//! read what it returns.
//!
//! What a trace cannot give: it holds no segment or block layout, so the
//! largest free gap, the number of free gaps, fragmentation in the snapshot
//! sense and internal (rounding) waste do not exist for it. See
//! [`chrome::MISSING_FIGURES`].

pub mod chrome;
pub mod memtimeline;

pub use chrome::{
    MISSING_FIGURES, ProfilerTrace, TraceDevice, TraceSample, is_chrome_trace, trace_from_json,
};
pub use memtimeline::{Category, MemoryTimeline, is_memory_timeline, timeline_from_json};

use serde::Serialize;

/// A problem in the data, counted and reported once with its first example.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub kind: &'static str,
    pub count: u64,
    /// Record path of the first occurrence, e.g. `traceEvents[1834].args`.
    pub example: String,
}

/// Collects anomalies by kind, keeping the first example of each.
#[derive(Debug, Default, Clone)]
pub(crate) struct Anomalies(Vec<Anomaly>);

impl Anomalies {
    pub(crate) fn add(&mut self, kind: &'static str, example: impl FnOnce() -> String) {
        if let Some(a) = self.0.iter_mut().find(|a| a.kind == kind) {
            a.count += 1;
        } else {
            self.0.push(Anomaly {
                kind,
                count: 1,
                example: example(),
            });
        }
    }
    pub(crate) fn into_vec(self) -> Vec<Anomaly> {
        self.0
    }
}
