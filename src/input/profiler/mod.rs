//! Profiler inputs: `torch.profiler` Chrome traces recorded with
//! `profile_memory=True` ([`chrome`]) and `export_memory_timeline` files
//! ([`memtimeline`]).
//!
//! Owns decoding those JSON documents into the typed data of
//! [`crate::model::profiler`] and [`crate::model::memtimeline`]: the
//! per-device memory events of a trace (with the operator that was running at
//! each event, paired allocations and frees, and the totals after each) and
//! the per-category live bytes of a memory timeline. It must not read files,
//! print, or touch the snapshot model: the input stage hands it a parsed
//! `serde_json::Value`, a trace's entries one at a time
//! ([`chrome::TraceReader`]) or a memory timeline's rows one at a time
//! ([`memtimeline::RawRows`], [`memtimeline::CoalescedSteps`]). Downsampling, key moments and findings are later
//! stages' ([`crate::timeline`], [`crate::analysis`]).

pub mod chrome;
mod entry;
pub mod memtimeline;

pub use chrome::{MISSING_FIGURES, ProfilerTrace, TraceDevice, is_chrome_trace, trace_from_json};
pub use memtimeline::{Category, MemoryTimeline, is_memory_timeline, timeline_from_json};

pub use crate::model::profiler::Anomaly;

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
