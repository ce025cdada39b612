//! From a snapshot's trace to what the simulator consumes: the start state,
//! the program's request stream, and the recorded figures the model is
//! compared with (reserved bytes after every event, segment events, OOMs,
//! the device capacity they imply).
//!
//! Owns reading the model's `TraceEvent`s for simulation; it neither runs
//! the allocator model nor formats anything.

use crate::model::{Action, Segment, Snapshot, TraceEvent};
use crate::timeline::ReplayReport;
use serde::Serialize;
use std::collections::HashSet;

/// The start state of one device's trace, and how much of it is known
/// rather than inferred.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct StartState {
    /// Segments of the device before the first trace event.
    pub segments: Vec<Segment>,
    /// True when the trace accounts for every block it frees and the replay
    /// met no anomaly: nothing in the state had to be inferred.
    pub exact: bool,
    /// Frees of blocks the trace never saw allocated (allocated before the
    /// ring buffer's first entry). The replay puts those blocks back with
    /// sizes inferred from their requests.
    pub frees_of_older_blocks: u64,
    /// Index of the first such free.
    pub first_older_free: Option<usize>,
    /// Of the blocks put back, those given more than their rounded size
    /// (an unsplittable remainder of the large pool).
    pub widened_blocks: u64,
    /// Trace events the replay could not apply as recorded (counted,
    /// worked around).
    pub replay_anomalies: u64,
    /// The first of them, in words.
    pub first_replay_anomaly: Option<String>,
    /// Replaying forward from this state reproduced the recorded final
    /// segments and blocks exactly.
    pub final_state_reproduced: bool,
}

/// The start state of one device's trace: the replay stage's reconstructed
/// start (`crate::timeline::state_at(snap, device, None)`), which undoes the
/// trace on the final segments and puts back the blocks older than the
/// trace that the trace frees, with sizes inferred from their requests.
/// This is the one place the simulator takes its start state from.
pub fn start_state(snap: &Snapshot, device: i64) -> StartState {
    // One rebuild of the start, and the report without the series.
    let replayer = crate::timeline::Replayer::new(snap, device);
    start_state_from(
        snap,
        device,
        replayer.state_at(None).segments,
        &replayer.report(),
    )
}

/// A start state whose replay report is not known yet: `segments` and
/// what the trace alone tells; [`start_state_from`] gives the whole one.
/// Enough to run the model ([`super::run_configs`] reads only the
/// segments), not to report on it.
pub fn start_state_unreported(segments: Vec<Segment>) -> StartState {
    StartState {
        segments,
        exact: false,
        frees_of_older_blocks: 0,
        first_older_free: None,
        widened_blocks: 0,
        replay_anomalies: 0,
        first_replay_anomaly: None,
        final_state_reproduced: false,
    }
}

/// [`start_state`] from a replay the caller already ran: `segments` the
/// replayer's start (`Replayer::state_at(None)`), `report` its report.
/// Gives the same answer without replaying the trace again.
pub fn start_state_from(
    snap: &Snapshot,
    device: i64,
    segments: Vec<Segment>,
    report: &ReplayReport,
) -> StartState {
    let trace = snap.trace_of(device);
    // Completed frees of addresses the trace never allocated: blocks older
    // than the trace, which only the replay can put back. (foldhash: a
    // lookup an event; the set is never walked.)
    let mut live: HashSet<u64, foldhash::fast::RandomState> = HashSet::default();
    let mut older = 0u64;
    let mut first_older = None;
    for (i, e) in trace.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr());
            }
            Action::FreeCompleted if !live.remove(&e.addr()) => {
                older += 1;
                first_older.get_or_insert(i);
            }
            _ => {}
        }
    }
    let anomalies: u64 = report.anomalies.iter().map(|a| a.count).sum();
    let first_anomaly = report
        .anomalies
        .iter()
        .min_by_key(|a| (a.first_event, a.kind))
        .map(|a| a.example.clone());
    StartState {
        segments,
        exact: older == 0 && anomalies == 0,
        frees_of_older_blocks: older,
        first_older_free: first_older,
        widened_blocks: report.widened_blocks as u64,
        replay_anomalies: anomalies,
        first_replay_anomaly: first_anomaly,
        final_state_reproduced: report.final_state_matches,
    }
}

/// What the program asked of the allocator, in trace order. Blocks are
/// named by their recorded address (`key`); the simulator's addresses
/// differ and are mapped by the driver.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// `key` is `None` for the request of a recorded `oom` (it never
    /// received an address).
    Alloc {
        key: Option<u64>,
        size: u64,
        stream: i64,
        pool: (i64, i64),
    },
    FreeRequested {
        key: u64,
    },
    FreeCompleted {
        key: u64,
    },
    /// `torch.cuda.empty_cache()`, inferred from a run of segment releases
    /// that no allocation needed.
    EmptyCache,
}

/// A request and the trace event after which the recording shows its
/// effect complete (for an inferred `empty_cache`, the last release).
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracedRequest {
    pub event: usize,
    pub request: Request,
}

/// Recorded reserved bytes after each event of a device trace: the final
/// reserved bytes minus the net segment changes still to come (exact
/// whatever the start state).
pub fn recorded_reserved(snap: &Snapshot, device: i64) -> RecordedReserved {
    let trace = snap.trace_of(device);
    let end: i128 = snap.segments_of(device).map(|s| s.total_size as i128).sum();
    let mut steps = Vec::new();
    let mut r = end;
    let mut last = None;
    for (i, e) in trace.iter().enumerate().rev() {
        let v = r.max(0) as u64;
        if last != Some(v) {
            steps.push((i, v));
            last = Some(v);
        } else if let Some(s) = steps.last_mut() {
            s.0 = i;
        }
        r -= segment_delta(e);
    }
    steps.reverse();
    RecordedReserved {
        len: trace.len(),
        steps,
    }
}

/// [`recorded_reserved`]: one figure per trace event, kept as the events
/// where it changes. Only segment events change it, and they are few, so
/// this costs a few bytes a segment event instead of 8 bytes an event (the
/// what-if model keeps it while the report is built).
#[derive(Serialize, Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedReserved {
    len: usize,
    /// (first event of a run of equal figures, the figure), ascending; the
    /// first run starts at event 0.
    steps: Vec<(usize, u64)>,
}

impl RecordedReserved {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The figure after event `i`; `None` past the end.
    pub fn get(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.steps[self.step_of(i)].1)
    }

    /// The step event `i < len` falls in.
    fn step_of(&self, i: usize) -> usize {
        self.steps.partition_point(|&(at, _)| at <= i) - 1
    }

    pub fn last(&self) -> Option<u64> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// The figure after each event, in order.
    pub fn iter(&self) -> ReservedIter<'_> {
        ReservedIter {
            of: self,
            next: 0,
            step: 0,
        }
    }
}

/// [`RecordedReserved::iter`].
pub struct ReservedIter<'a> {
    of: &'a RecordedReserved,
    next: usize,
    step: usize,
}

impl Iterator for ReservedIter<'_> {
    type Item = u64;
    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.next >= self.of.len {
            return None;
        }
        let steps = &self.of.steps;
        while steps.get(self.step + 1).is_some_and(|s| s.0 <= self.next) {
            self.step += 1;
        }
        self.next += 1;
        Some(steps[self.step].1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.of.len - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReservedIter<'_> {}

impl std::ops::Index<usize> for RecordedReserved {
    type Output = u64;
    fn index(&self, i: usize) -> &u64 {
        assert!(i < self.len, "event {i} of {}", self.len);
        &self.steps[self.step_of(i)].1
    }
}

/// Reserved bytes before the first event.
pub fn recorded_start_reserved(snap: &Snapshot, device: i64) -> u64 {
    let end: i128 = snap.segments_of(device).map(|s| s.total_size as i128).sum();
    let net: i128 = snap.trace_of(device).iter().map(segment_delta).sum();
    (end - net).max(0) as u64
}

pub fn segment_delta(e: &TraceEvent) -> i128 {
    match e.action {
        Action::SegmentAlloc | Action::SegmentMap => e.size as i128,
        Action::SegmentFree | Action::SegmentUnmap => -(e.size as i128),
        _ => 0,
    }
}

/// Bytes the allocator could reserve on the device, from the recorded OOMs:
/// reserved at the failure plus what the driver reported free. The lowest
/// over all OOM events; `None` without one.
pub fn capacity_from_ooms(snap: &Snapshot, device: i64) -> Option<u64> {
    capacity_from_ooms_with(snap, device, &recorded_reserved(snap, device))
}

/// [`capacity_from_ooms`] given the device's [`recorded_reserved`].
pub fn capacity_from_ooms_with(
    snap: &Snapshot,
    device: i64,
    rec: &RecordedReserved,
) -> Option<u64> {
    snap.trace_of(device)
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Oom)
        .filter_map(|(i, e)| snap.device_free(e).map(|f| rec[i].saturating_add(f)))
        .min()
}

/// The request stream of a device trace. Runs of `segment_free` /
/// `segment_unmap` are the allocator's own doing when an allocation needed
/// the room (an OOM retry: the run ends in an `oom`, or in a new segment
/// that would not have fit under `capacity`); any other run is read as a
/// call to `empty_cache()`. `snap` holds the events' pool ids
/// ([`Snapshot::pool_of`]).
pub fn requests(
    events: &[TraceEvent],
    snap: &Snapshot,
    capacity: Option<u64>,
    recorded: &RecordedReserved,
) -> Vec<TracedRequest> {
    let mut out = Vec::new();
    requests_into(events, snap, capacity, recorded, |r| out.push(r));
    out
}

/// [`requests`], handing each request to `out` in order instead of
/// collecting them.
pub fn requests_into(
    events: &[TraceEvent],
    snap: &Snapshot,
    capacity: Option<u64>,
    recorded: &RecordedReserved,
    mut out: impl FnMut(TracedRequest),
) {
    let mut i = 0;
    while i < events.len() {
        let e = &events[i];
        match e.action {
            Action::Alloc => out(TracedRequest {
                event: i,
                request: Request::Alloc {
                    key: Some(e.addr()),
                    size: e.size,
                    stream: snap.stream(e),
                    pool: snap.pool_of(e).unwrap_or((0, 0)),
                },
            }),
            Action::Oom => out(TracedRequest {
                event: i,
                request: Request::Alloc {
                    key: None,
                    size: e.size,
                    stream: snap.stream(e),
                    pool: snap.pool_of(e).unwrap_or((0, 0)),
                },
            }),
            Action::FreeRequested => out(TracedRequest {
                event: i,
                request: Request::FreeRequested { key: e.addr() },
            }),
            Action::FreeCompleted => out(TracedRequest {
                event: i,
                request: Request::FreeCompleted { key: e.addr() },
            }),
            Action::SegmentFree | Action::SegmentUnmap => {
                // A flush may complete pending frees between its releases.
                let mut j = i;
                while j + 1 < events.len()
                    && matches!(
                        events[j + 1].action,
                        Action::SegmentFree | Action::SegmentUnmap | Action::FreeCompleted
                    )
                {
                    j += 1;
                }
                let before = if i == 0 {
                    recorded[0].saturating_add_signed(-(segment_delta(e) as i64))
                } else {
                    recorded[i - 1]
                };
                let next = events.get(j + 1);
                let retry = match next.map(|n| &n.action) {
                    Some(Action::Oom) => true,
                    Some(Action::SegmentAlloc | Action::SegmentMap) => {
                        capacity.is_some_and(|c| before.saturating_add(next.unwrap().size) > c)
                    }
                    _ => false,
                };
                // Completions inside the run stay requests of their own.
                for (k, ev) in events.iter().enumerate().take(j + 1).skip(i) {
                    if ev.action == Action::FreeCompleted {
                        out(TracedRequest {
                            event: k,
                            request: Request::FreeCompleted { key: ev.addr() },
                        });
                    }
                }
                if !retry {
                    out(TracedRequest {
                        event: j,
                        request: Request::EmptyCache,
                    });
                }
                i = j + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Recorded segment events of a trace, in order: (action, size).
pub fn recorded_segment_events(events: &[TraceEvent]) -> Vec<(Action, u64)> {
    indexed_segment_events(events).map(|(_, e)| e).collect()
}

/// Recorded segment events of a trace, in order: (index, (action, size)).
pub fn indexed_segment_events(
    events: &[TraceEvent],
) -> impl Iterator<Item = (usize, (Action, u64))> + '_ {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.action,
                Action::SegmentAlloc
                    | Action::SegmentFree
                    | Action::SegmentMap
                    | Action::SegmentUnmap
            )
        })
        .map(|(i, e)| (i, (e.action, e.size)))
}

/// The direction the recording's cudaMalloc took: new segment addresses
/// outside the span seen so far, counted below and above it (freed ranges
/// handed out again do not count). `Up` when the trace does not tell.
pub fn address_order(events: &[TraceEvent]) -> super::allocator::AddressOrder {
    use super::allocator::AddressOrder;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let (mut below, mut above) = (0u64, 0u64);
    for e in events.iter().filter(|e| e.action == Action::SegmentAlloc) {
        if lo <= hi {
            if e.addr() < lo {
                below += 1;
            } else if e.addr() > hi {
                above += 1;
            }
        }
        lo = lo.min(e.addr());
        hi = hi.max(e.addr());
    }
    if below > above {
        AddressOrder::Down
    } else {
        AddressOrder::Up
    }
}

/// Devices worth simulating: a trace with at least one allocation.
pub fn simulable_devices(snap: &Snapshot) -> Vec<i64> {
    snap.devices()
        .into_iter()
        .filter(|&d| snap.trace_of(d).iter().any(|e| e.action == Action::Alloc))
        .collect()
}

/// The device a command looks at by default: the first with an OOM, else
/// the one with the most allocations.
pub fn default_device(snap: &Snapshot) -> Option<i64> {
    let devs = simulable_devices(snap);
    if let Some(&d) = devs
        .iter()
        .find(|&&d| snap.trace_of(d).iter().any(|e| e.action == Action::Oom))
    {
        return Some(d);
    }
    let mut best: Option<(usize, i64)> = None;
    for d in devs {
        let n = snap
            .trace_of(d)
            .iter()
            .filter(|e| e.action == Action::Alloc)
            .count();
        if best.is_none_or(|(m, _)| n > m) {
            best = Some((n, d));
        }
    }
    best.map(|(_, d)| d)
}
