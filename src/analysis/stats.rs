//! Figures of one allocator state (the final `segments` of a snapshot, or a
//! replayed moment), with the definitions of `docs/json-schema.md`:
//!
//! * allocated = requested bytes of `active_allocated` blocks (block size when
//!   no request size is recorded); active = their block sizes;
//! * internal free = active − allocated (rounding waste);
//! * external free = every other block (inactive and pending-free);
//! * largest free block over `inactive` blocks; fragmentation =
//!   1 − largest free block / inactive bytes (0 when nothing is free).
//!
//! Owns the arithmetic only: no I/O, no formatting.

use crate::model::tally::TraceTally;
use crate::model::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct StateStats {
    pub segments: u64,
    pub blocks: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub active_bytes: u64,
    pub internal_free_bytes: u64,
    pub external_free_bytes: u64,
    pub inactive_bytes: u64,
    pub pending_free_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub free_blocks: u64,
    pub fragmentation: f64,
}

impl StateStats {
    // Sums saturate: figures come from untrusted files, and a hostile one
    // must not wrap them (release) or panic (debug).
    pub fn add_segment(&mut self, seg: &Segment) {
        self.segments += 1;
        self.reserved_bytes = self.reserved_bytes.saturating_add(seg.total_size);
        for b in &seg.blocks {
            self.add_block(b);
        }
        self.finish();
    }

    pub fn add_block(&mut self, b: &Block) {
        self.blocks += 1;
        match b.state {
            BlockState::ActiveAllocated => {
                let req = b.requested_or_size().min(b.size);
                self.allocated_bytes = self.allocated_bytes.saturating_add(req);
                self.active_bytes = self.active_bytes.saturating_add(b.size);
                self.internal_free_bytes = self.internal_free_bytes.saturating_add(b.size - req);
            }
            BlockState::ActivePendingFree => {
                self.pending_free_bytes = self.pending_free_bytes.saturating_add(b.size);
                self.external_free_bytes = self.external_free_bytes.saturating_add(b.size);
            }
            BlockState::Inactive => {
                self.inactive_bytes = self.inactive_bytes.saturating_add(b.size);
                self.external_free_bytes = self.external_free_bytes.saturating_add(b.size);
                self.free_blocks += 1;
                self.largest_free_block_bytes = self.largest_free_block_bytes.max(b.size);
            }
        }
    }

    pub fn merge(&mut self, o: &StateStats) {
        self.segments = self.segments.saturating_add(o.segments);
        self.blocks = self.blocks.saturating_add(o.blocks);
        self.reserved_bytes = self.reserved_bytes.saturating_add(o.reserved_bytes);
        self.allocated_bytes = self.allocated_bytes.saturating_add(o.allocated_bytes);
        self.active_bytes = self.active_bytes.saturating_add(o.active_bytes);
        self.internal_free_bytes = self
            .internal_free_bytes
            .saturating_add(o.internal_free_bytes);
        self.external_free_bytes = self
            .external_free_bytes
            .saturating_add(o.external_free_bytes);
        self.inactive_bytes = self.inactive_bytes.saturating_add(o.inactive_bytes);
        self.pending_free_bytes = self.pending_free_bytes.saturating_add(o.pending_free_bytes);
        self.free_blocks = self.free_blocks.saturating_add(o.free_blocks);
        self.largest_free_block_bytes = self
            .largest_free_block_bytes
            .max(o.largest_free_block_bytes);
        self.finish();
    }

    pub fn finish(&mut self) {
        self.fragmentation = fragmentation(self.largest_free_block_bytes, self.inactive_bytes);
    }

    pub fn of<'a>(segs: impl IntoIterator<Item = &'a Segment>) -> StateStats {
        let mut s = StateStats::default();
        for seg in segs {
            s.add_segment(seg);
        }
        s.finish();
        s
    }

    /// Free bytes inside reserved memory (internal + external).
    pub fn free_bytes(&self) -> u64 {
        self.internal_free_bytes
            .saturating_add(self.external_free_bytes)
    }
}

/// Per device, then per (pool, stream, segment type).
#[derive(Serialize, Debug, Clone)]
pub struct PoolStats {
    pub pool_id: (i64, i64),
    pub stream: i64,
    pub segment_type: &'static str,
    #[serde(flatten)]
    pub stats: StateStats,
}

#[derive(Serialize, Debug, Clone)]
pub struct DeviceStats {
    pub device: i64,
    #[serde(flatten)]
    pub stats: StateStats,
    pub trace_events: u64,
    pub pools: Vec<PoolStats>,
}

/// Per device: every device with a segment or a trace entry, ascending.
pub fn device_stats(snap: &Snapshot, tallies: &[TraceTally]) -> Vec<DeviceStats> {
    snap.devices_with(tallies.iter().map(|t| t.events > 0))
        .into_iter()
        .map(|d| {
            let mut groups: BTreeMap<((i64, i64), i64, SegmentType), StateStats> = BTreeMap::new();
            let mut all = StateStats::default();
            for seg in snap.segments_of(d) {
                all.add_segment(seg);
                groups
                    .entry((seg.pool(), seg.stream, seg.segment_type))
                    .or_default()
                    .add_segment(seg);
            }
            all.finish();
            let events = usize::try_from(d).ok().and_then(|d| tallies.get(d));
            DeviceStats {
                device: d,
                stats: all,
                trace_events: events.map_or(0, |t| t.events),
                pools: groups
                    .into_iter()
                    .map(|((pool_id, stream, ty), stats)| PoolStats {
                        pool_id,
                        stream,
                        segment_type: ty.as_str(),
                        stats,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// What the trace covers, per device.
#[derive(Serialize, Debug, Clone, Default)]
pub struct TraceCoverage {
    pub device: i64,
    pub events: u64,
    /// Count per action, in PyTorch's spelling, sorted by name.
    pub actions: BTreeMap<String, u64>,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    /// Frees whose allocation is not in the trace (it happened earlier).
    pub frees_without_alloc: u64,
    /// True when the trace starts mid-run: frees of blocks the trace never
    /// saw allocated. The ring buffer probably dropped older entries (or
    /// recording started late).
    pub starts_mid_run: bool,
    /// `enabled="state"` keeps a one-entry ring buffer.
    pub single_entry: bool,
}

/// [`trace_coverage`] of each trace of `snap`, counted without listing
/// its `oom` entries ([`TraceTally::counts_of`]).
pub fn snapshot_trace_coverage(snap: &Snapshot) -> Vec<TraceCoverage> {
    let tallies: Vec<TraceTally> = snap
        .traces()
        .iter()
        .map(|t| TraceTally::counts_of(t))
        .collect();
    trace_coverage(snap, &tallies)
}

/// What each trace covers, from its tally (`tallies[d]` counts
/// `device_traces[d]`).
pub fn trace_coverage(snap: &Snapshot, tallies: &[TraceTally]) -> Vec<TraceCoverage> {
    tallies
        .iter()
        .enumerate()
        .map(|(d, t)| {
            let mut actions: BTreeMap<String, u64> = BTreeMap::new();
            for (a, n) in &t.actions {
                *actions.entry(a.name(snap).to_string()).or_default() += n;
            }
            TraceCoverage {
                device: d as i64,
                events: t.events,
                actions,
                first_time_us: t.first_time_us,
                last_time_us: t.last_time_us,
                frees_without_alloc: t.frees_without_alloc,
                starts_mid_run: t.frees_without_alloc > 0,
                single_entry: t.events == 1,
            }
        })
        .collect()
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct OomEvent {
    pub device: i64,
    pub index: u64,
    pub size: u64,
    pub device_free: Option<u64>,
    pub time_us: Option<i64>,
}

/// Every `oom` entry of a snapshot's traces, device by device (what
/// [`oom_events`] gives of their tallies).
pub fn snapshot_oom_events(snap: &Snapshot) -> Vec<OomEvent> {
    let mut out = Vec::new();
    for (d, tr) in snap.traces().iter().enumerate() {
        for (i, e) in tr.iter().enumerate() {
            if e.action == Action::Oom {
                out.push(OomEvent {
                    device: d as i64,
                    index: i as u64,
                    size: e.size,
                    device_free: snap.device_free(e),
                    time_us: e.time_us(),
                });
            }
        }
    }
    out
}

/// Every `oom` entry, device by device, from the tallies.
pub fn oom_events(tallies: &[TraceTally]) -> Vec<OomEvent> {
    let mut out = Vec::new();
    for (d, t) in tallies.iter().enumerate() {
        out.extend(t.ooms.iter().map(|o| OomEvent {
            device: d as i64,
            index: o.index,
            size: o.size,
            device_free: o.device_free,
            time_us: o.time_us,
        }));
    }
    out
}

/// Data-quality findings about the final state, each reported once.
pub fn consistency_warnings(snap: &Snapshot) -> Vec<String> {
    let mut bad_sum = Vec::new();
    let mut overlaps = 0u64;
    for (i, s) in snap.segments.iter().enumerate() {
        if s.blocks.is_empty() {
            continue;
        }
        let sum: u64 = s.blocks.iter().fold(0u64, |a, b| a.saturating_add(b.size));
        if sum != s.total_size {
            bad_sum.push((i, sum, s.total_size));
        }
        for w in s.blocks.windows(2) {
            if w[0].address.saturating_add(w[0].size) != w[1].address {
                overlaps += 1;
            }
        }
    }
    let mut out = Vec::new();
    if let Some(&(i, sum, total)) = bad_sum.first() {
        out.push(format!(
            "{} segment(s) whose blocks do not add up to their total_size (e.g. segments[{i}]: blocks sum to {sum} bytes, total_size is {total}); figures use the blocks as recorded",
            bad_sum.len()
        ));
    }
    if overlaps > 0 {
        out.push(format!(
            "{overlaps} pair(s) of neighbouring blocks that are not contiguous (gaps or overlaps in the recorded layout)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(size: u64, req: Option<u64>, state: BlockState) -> Block {
        crate::model::test_support::block(0, size, req, state, StackId::EMPTY)
    }

    #[test]
    fn coverage_counts_frees_of_blocks_the_trace_never_saw() {
        let ev = |a, addr, t: Option<i64>| {
            TraceEvent::new(a, addr, 512, StreamIdx::DEFAULT, StackId::EMPTY).with_time_us(t)
        };
        let snap = Snapshot {
            device_traces: Some(vec![
                vec![
                    // Allocated and freed inside the trace: not counted.
                    ev(Action::Alloc, 0x1000, Some(30)),
                    ev(Action::FreeRequested, 0x1000, Some(10)),
                    ev(Action::FreeCompleted, 0x1000, Some(40)),
                    // Allocated before the trace: one free, in two steps.
                    ev(Action::FreeRequested, 0x2000, None),
                    ev(Action::FreeCompleted, 0x2000, Some(20)),
                    // A completed free alone; then its address reused.
                    ev(Action::FreeCompleted, 0x3000, Some(25)),
                    ev(Action::Alloc, 0x3000, Some(26)),
                    ev(Action::SegmentAlloc, 0x4000, None),
                ],
                vec![ev(Action::Snapshot, 0, None)],
            ]),
            ..Default::default()
        };
        let c = trace_coverage(&snap, &TraceTally::of_snapshot(&snap));
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].events, 8);
        assert_eq!(c[0].frees_without_alloc, 2);
        assert!(c[0].starts_mid_run);
        assert_eq!(
            (c[0].first_time_us, c[0].last_time_us),
            (Some(10), Some(40))
        );
        let actions: Vec<(&str, u64)> =
            c[0].actions.iter().map(|(k, &n)| (k.as_str(), n)).collect();
        assert_eq!(
            actions,
            [
                ("alloc", 2),
                ("free_completed", 3),
                ("free_requested", 2),
                ("segment_alloc", 1)
            ]
        );
        assert!(!c[0].single_entry);
        assert_eq!((c[1].first_time_us, c[1].last_time_us), (None, None));
        assert_eq!(c[1].frees_without_alloc, 0);
        assert!(c[1].single_entry);
    }

    #[test]
    fn definitions() {
        let seg = crate::model::test_support::segment(
            0,
            vec![
                blk(4000, Some(3000), BlockState::ActiveAllocated),
                blk(1000, Some(1000), BlockState::ActivePendingFree),
                blk(3000, Some(7), BlockState::Inactive),
                blk(2000, None, BlockState::Inactive),
            ],
        );
        let s = StateStats::of([&seg]);
        assert_eq!(s.allocated_bytes, 3000);
        assert_eq!(s.active_bytes, 4000);
        assert_eq!(s.internal_free_bytes, 1000);
        assert_eq!(s.external_free_bytes, 6000);
        assert_eq!(s.inactive_bytes, 5000);
        assert_eq!(s.pending_free_bytes, 1000);
        assert_eq!(s.largest_free_block_bytes, 3000);
        assert!((s.fragmentation - 0.4).abs() < 1e-12);
        assert_eq!(s.allocated_bytes + s.free_bytes(), s.reserved_bytes);
    }
}

/// Everything `fragscope stats --json` prints for one snapshot
/// (schema `fragscope.stats/1`, documented in docs/json-schema.md).
#[derive(Serialize, Debug, Clone)]
pub struct FileStats {
    pub schema: &'static str,
    pub file: String,
    pub format: String,
    pub shape: &'static str,
    #[serde(flatten)]
    pub totals: StateStats,
    /// One count per entry of `device_traces` (empty when the key is absent).
    pub trace_events: Vec<u64>,
    pub oom_events: Vec<OomEvent>,
    pub devices: Vec<DeviceStats>,
    pub trace_coverage: Vec<TraceCoverage>,
    pub allocator_conf: Option<String>,
    pub warnings: Vec<String>,
}

pub const STATS_SCHEMA: &str = "fragscope.stats/1";

/// The figures of `snap`, its traces counted.
pub fn file_stats(snap: &Snapshot, file: &str, format: String) -> FileStats {
    file_stats_with(snap, &TraceTally::of_snapshot(snap), file, format)
}

/// The figures of `snap`, whose traces `tallies` counts (one per entry of
/// `device_traces`: the loader's, when it counted them instead of keeping
/// them).
pub fn file_stats_with(
    snap: &Snapshot,
    tallies: &[TraceTally],
    file: &str,
    format: String,
) -> FileStats {
    FileStats {
        schema: STATS_SCHEMA,
        file: file.to_string(),
        format,
        shape: match snap.shape {
            Shape::SegmentList => "segment_list",
            Shape::Dict => "dict",
        },
        totals: StateStats::of(&snap.segments),
        trace_events: tallies.iter().map(|t| t.events).collect(),
        oom_events: oom_events(tallies),
        devices: device_stats(snap, tallies),
        trace_coverage: trace_coverage(snap, tallies),
        allocator_conf: snap
            .allocator_settings
            .as_ref()
            .and_then(|s| s.conf_string().map(|x| x.to_string())),
        warnings: consistency_warnings(snap),
    }
}
