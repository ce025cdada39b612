//! What the inspecting commands (`stats`, `culprits`, `timeline`, `events`)
//! find in one input, whatever its kind, for their renderer to print:
//! `pipeline` makes them, `render` words them, and the command itself
//! chooses no path by the input's kind.
//!
//! A snapshot and a profiler trace share a type where their figures differ
//! only in what a trace cannot give (`None`: no replay report, no layout);
//! a memory-timeline export stays its own variant where it records
//! something else altogether (tensor bytes by category, no events).

use super::culprits::{Analysis, TraceCulprits};
use super::stats::FileStats;
use crate::model::memtimeline::{CategorySample, MemoryTimeline};
use crate::model::profiler::ProfilerTrace;
use crate::model::{Segment, Snapshot};
use crate::timeline::{
    DeviceReplay, KeyMoment, KeyMomentsAt, Moment, MomentState, ReplayReport, Sample,
};

/// What `stats` finds in one input.
pub enum Stats {
    /// A snapshot's figures, and its final segments for the segment map.
    Snapshot(Box<FileStats>, Vec<Segment>),
    /// A profiler trace: its figures are the model's per-device summary.
    Trace {
        file: String,
        format: String,
        trace: Box<ProfilerTrace>,
    },
    /// A memory-timeline export: live bytes by category.
    Categories {
        file: String,
        format: String,
        timeline: MemoryTimeline,
    },
}

impl Stats {
    /// What the snapshot's figures warn of (a trace and an export say it
    /// in their text).
    pub fn warnings(&self) -> impl Iterator<Item = String> + '_ {
        let fs = match self {
            Stats::Snapshot(fs, _) => Some(fs),
            _ => None,
        };
        (fs.into_iter()).flat_map(|fs| fs.warnings.iter().map(|w| format!("{}: {w}", fs.file)))
    }

    /// The snapshot's figures, for the per-rank table of several files;
    /// `None` for a trace or an export, which the table leaves out.
    pub fn file_stats(self) -> Result<FileStats, String> {
        match self {
            Stats::Snapshot(fs, _) => Ok(*fs),
            Stats::Trace { file, .. } | Stats::Categories { file, .. } => Err(file),
        }
    }
}

/// What `culprits` finds at one moment of each device.
pub enum Culprits {
    /// The blocks and groups that strand free memory (the snapshot for
    /// their stacks).
    Snapshot {
        snap: Box<Snapshot>,
        analyses: Vec<Analysis>,
    },
    /// Live bytes by operator, each device's with its first time; stranded
    /// bytes are not measurable.
    Trace(Vec<(TraceCulprits, Option<i64>)>),
}

/// What `timeline` finds: every device's series and key moments, or the
/// state at one moment.
pub enum Timeline {
    /// The state of one device at one moment of its replay (`--at`).
    Moment {
        moment: Moment,
        state: MomentState,
        /// The time of the replay's first sample.
        t0: Option<i64>,
        report: ReplayReport,
    },
    /// A snapshot's devices, each replayed.
    Replays(Vec<ReplayedDevice>),
    /// A profiler trace's devices: the series its events give.
    Trace {
        trace: Box<ProfilerTrace>,
        devices: Vec<TraceTimeline>,
    },
    /// A memory-timeline export's samples by category: `points` when
    /// downsampled, else the timeline's own.
    Categories {
        timeline: MemoryTimeline,
        points: Option<Vec<CategorySample>>,
    },
}

/// One replayed device of a snapshot.
pub struct ReplayedDevice {
    pub replay: DeviceReplay,
    /// `None` when the output shows none (CSV); each one's sample is read
    /// from `replay.samples` as it is written.
    pub key_moments: Option<KeyMomentsAt>,
    /// The downsampled points (`--max-points`); `None`: the whole series,
    /// read from the compact one as it is written.
    pub points: Option<Vec<Sample>>,
    /// Whether `points` has fewer samples than the series.
    pub downsampled: bool,
}

/// One device of a profiler trace.
pub struct TraceTimeline {
    /// Its index in the trace's devices.
    pub device: usize,
    /// Empty when the output shows none (text).
    pub samples: Vec<Sample>,
    pub downsampled: bool,
    /// Empty when the output shows none (CSV).
    pub key_moments: Vec<KeyMoment>,
}
