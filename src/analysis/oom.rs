//! OOM forensics: for every `oom` event of a snapshot, the replayed allocator
//! state at that moment measured against the failed request, with the
//! verdict and suggestions of [`crate::analysis::advice::diagnose`]; for a snapshot
//! with no `oom` event that was dumped at OOM time, what its final state
//! still tells.
//!
//! Owns the findings only (figures and sentences); reading files and
//! laying out text belong to `cli` and `render`.

use crate::analysis::advice::{Cause, Diagnosis, OomFigures, diagnose};
use crate::analysis::frames;
use crate::core::style::Style;
use crate::core::units::fmt_pct;
use crate::model::*;
use crate::timeline::{self, MomentState};
use serde::Serialize;

/// A final state "looks dumped at OOM time" when live and pending blocks
/// fill at least this share of reserved memory…
pub const DUMPED_AT_OOM_LIVE_SHARE: f64 = 0.98;
/// …of at least this size (a tiny, fully used cache says nothing),
pub const DUMPED_AT_OOM_MIN_RESERVED: u64 = 1 << 30;
/// or when reserved memory fills this share of a given capacity.
pub const DUMPED_AT_OOM_CAPACITY_SHARE: f64 = 0.90;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct GapSite {
    pub segment_address: u64,
    pub segment_size: u64,
    pub segment_type: &'static str,
    pub stream: i64,
    pub pool_id: (i64, i64),
    pub gap_address: u64,
    pub gap_size: u64,
}

impl GapSite {
    fn of(s: &Segment, b: &Block) -> GapSite {
        GapSite {
            segment_address: s.address,
            segment_size: s.total_size,
            segment_type: s.segment_type.as_str(),
            stream: s.stream,
            pool_id: s.pool(),
            gap_address: b.address,
            gap_size: b.size,
        }
    }
}

/// One failed allocation, measured on the replayed state at its event.
#[derive(Serialize, Debug, Clone)]
pub struct OomFinding {
    pub device: i64,
    /// Index of the `oom` event in the device's trace.
    pub event: usize,
    pub time_us: Option<i64>,
    pub stream: i64,
    /// The rounded size the allocator tried to place (the event's size).
    pub rounded_request: u64,
    /// `small` or `large`.
    pub pool: &'static str,
    /// New device memory the request needed: the cudaMalloc size of a new
    /// segment, or with expandable segments at most this many bytes of pages.
    pub new_memory_needed: u64,
    pub expandable_segments: bool,
    pub device_free: Option<u64>,
    pub capacity: Option<u64>,
    /// reserved + device free: the device had at least this much.
    pub capacity_at_least: Option<u64>,
    pub reserved: u64,
    /// Requested bytes of live tensors.
    pub allocated: u64,
    /// Block bytes of live tensors (allocated + rounding waste).
    pub active: u64,
    pub pending_free: u64,
    /// Inactive bytes: free inside reserved memory, in any pool or stream.
    pub free_in_reserved: u64,
    pub largest_free_gap: Option<GapSite>,
    /// The largest free block the request could use (its stream and pool).
    pub largest_usable_gap: Option<GapSite>,
    /// Free blocks of at least the rounded request anywhere / usable.
    pub free_blocks_that_fit: usize,
    pub usable_blocks_that_fit: usize,
    /// The failed request's stack, innermost first (Python frames when
    /// recorded).
    pub call_site: Vec<String>,
    /// The call site as every command names it (`model.py:524 (forward)`),
    /// when it is the program's own code.
    pub user_frame: Option<String>,
    /// Why the replayed state may be off at this event, if it may.
    pub replay_caveat: Option<String>,
    pub diagnosis: Diagnosis,
}

/// What a final state says when no `oom` event was recorded.
#[derive(Serialize, Debug, Clone)]
pub struct FinalStateFinding {
    pub device: i64,
    pub looks_dumped_at_oom: bool,
    pub reserved: u64,
    pub allocated: u64,
    pub active: u64,
    pub pending_free: u64,
    pub free_in_reserved: u64,
    pub largest_free_gap: Option<GapSite>,
    pub capacity: Option<u64>,
    pub diagnosis: Diagnosis,
}

#[derive(Serialize, Debug, Clone, Default)]
pub struct OomReport {
    pub ooms: Vec<OomFinding>,
    /// Only when the file has no `oom` event.
    pub final_state: Vec<FinalStateFinding>,
    /// `oom` events past the first [`MAX_DIAGNOSED_OOMS`] of a device:
    /// counted, not diagnosed.
    pub undiagnosed_ooms: usize,
}

/// `oom` events diagnosed one by one, per device. A real run records a
/// handful (a failed allocation usually ends it); a file naming an OOM at
/// every event would otherwise cost the trace length times the layout,
/// quadratic in the input.
pub const MAX_DIAGNOSED_OOMS: usize = 100;

/// `capacity`: total device memory when the user knows it (snapshots do
/// not record it).
pub fn analyse(style: &Style, snap: &Snapshot, capacity: Option<u64>) -> OomReport {
    let mut out = OomReport::default();
    for d in snap.devices() {
        let trace = snap.trace_of(d);
        let ooms: Vec<usize> = (0..trace.len())
            .filter(|&i| trace[i].action == Action::Oom)
            .collect();
        if ooms.is_empty() {
            continue;
        }
        let rep = timeline::replay_device(snap, d);
        let shown = &ooms[..ooms.len().min(MAX_DIAGNOSED_OOMS)];
        out.undiagnosed_ooms += ooms.len() - shown.len();
        timeline::for_each_state_at(snap, d, shown, |st| {
            let i = st.at.expect("an event");
            out.ooms.push(finding(
                style,
                snap,
                &trace[i],
                i,
                &st,
                &rep.report,
                capacity,
            ));
        });
    }
    if out.ooms.is_empty() {
        for d in snap.devices() {
            let st = timeline::state_at(snap, d, snap.trace_of(d).len().checked_sub(1));
            out.final_state
                .push(final_state(style, snap, &st, capacity));
        }
    }
    out
}

struct Figures {
    reserved: u64,
    allocated: u64,
    active: u64,
    pending: u64,
    inactive: u64,
}

fn figures(st: &MomentState) -> Figures {
    let mut f = Figures {
        reserved: 0,
        allocated: 0,
        active: 0,
        pending: 0,
        inactive: 0,
    };
    for s in &st.segments {
        f.reserved += s.total_size;
        for b in &s.blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    f.allocated += b.requested_or_size().min(b.size);
                    f.active += b.size;
                }
                BlockState::ActivePendingFree => f.pending += b.size,
                BlockState::Inactive => f.inactive += b.size,
            }
        }
    }
    f
}

fn settings_figures(snap: &Snapshot) -> (Option<bool>, Option<u64>, Option<f64>) {
    let s = snap.allocator_settings.as_ref();
    let expandable = s
        .and_then(|s| s.expandable_segments())
        .or_else(|| snap.segments.iter().any(|x| x.expandable()).then_some(true));
    (
        expandable,
        s.and_then(|s| s.max_split_size()),
        s.and_then(|s| s.garbage_collection_threshold()),
    )
}

fn fmt_frame(snap: &Snapshot, f: &Frame) -> String {
    format!("{} ({}:{})", snap.str(f.name), snap.str(f.filename), f.line)
}

/// The innermost frames of a stack as `name (file:line)`: its Python frames
/// when it has any (C++ frames of the allocator and dispatcher say little
/// about where a tensor came from), else every frame PyTorch's viewer shows.
pub fn call_site(snap: &Snapshot, stack: StackId, max: usize) -> Vec<String> {
    let frames: Vec<&Frame> = snap.stack(stack).iter().map(|f| snap.frame(*f)).collect();
    let python = |f: &&Frame| snap.str(f.filename).ends_with(".py");
    if frames.iter().any(python) {
        return frames
            .into_iter()
            .filter(python)
            .take(max)
            .map(|f| fmt_frame(snap, f))
            .collect();
    }
    frames::filtered(snap, stack)
        .into_iter()
        .take(max)
        .map(|f| fmt_frame(snap, snap.frame(f)))
        .collect()
}

/// The call site every command names ([`frames::call_site`]) when it is the
/// program's own code: `model.py:524 (forward)`.
pub fn user_frame(snap: &Snapshot, stack: StackId) -> Option<String> {
    let site = frames::call_site(snap, stack);
    (site.kind == frames::SiteKind::User).then(|| site.label())
}

/// The advice's wording for the other-processes check assumes an OOM
/// message; a snapshot without the capacity cannot compute that figure.
fn reword_for_snapshots(d: &mut Diagnosis, capacity: Option<u64>) {
    if capacity.is_some() {
        return;
    }
    for s in d.suggestions.iter_mut().filter(|s| !s.applies) {
        if s.what.starts_with("check other processes") {
            s.why = "snapshots do not record the device's capacity; with --capacity the memory held outside PyTorch (capacity − reserved − free) is computed".into();
        }
    }
}

/// The finding of the `oom` event at trace index `event` of `state`'s
/// device, measured on `state` (the replayed state after that event): what
/// `fragscope oom` prints for it, and what the report says of that moment.
/// `None` when that event is not an `oom`.
pub fn finding_at(
    style: &Style,
    snap: &Snapshot,
    state: &MomentState,
    event: usize,
    report: &timeline::ReplayReport,
    capacity: Option<u64>,
) -> Option<OomFinding> {
    let e = snap.trace_of(state.device).get(event)?;
    (e.action == Action::Oom).then(|| finding(style, snap, e, event, state, report, capacity))
}

fn finding(
    style: &Style,
    snap: &Snapshot,
    e: &TraceEvent,
    i: usize,
    st: &MomentState,
    report: &timeline::ReplayReport,
    capacity: Option<u64>,
) -> OomFinding {
    let f = figures(st);
    let rounded = e.size;
    let small = rounded <= 1 << 20;
    let kind = if small {
        SegmentType::Small
    } else {
        SegmentType::Large
    };
    let pool = snap.pool_of(e).unwrap_or((0, 0));
    let (expandable, max_split, gc) = settings_figures(snap);
    let exp = expandable.unwrap_or(false);
    let stream = snap.stream(e);
    let usable = |s: &Segment| s.stream == stream && s.segment_type == kind && s.pool() == pool;
    let largest = timeline::largest_free_gap_segment(st).map(|(s, b)| GapSite::of(s, b));
    let largest_usable =
        timeline::largest_free_gap_where(st, usable).map(|(s, b)| GapSite::of(s, b));
    let usable_fit = st
        .segments
        .iter()
        .filter(|s| usable(s))
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Inactive && b.size >= rounded)
        .count();
    let page = if small { 2 << 20 } else { 20 << 20 };
    let new_memory_needed = if exp {
        rounded.div_ceil(page) * page
    } else {
        timeline::allocation_size(rounded)
    };
    let replay_caveat = {
        let before: Vec<String> = report
            .anomalies
            .iter()
            .filter(|a| a.first_event.is_none_or(|x| x <= i))
            .map(|a| {
                format!(
                    "{} {:?} anomaly(ies), first: {}",
                    a.count, a.kind, a.example
                )
            })
            .collect();
        if !before.is_empty() {
            Some(format!(
                "the replay met anomalies up to this event: {}",
                before.join("; ")
            ))
        } else if !report.final_state_matches {
            Some(format!(
                "the replay does not reproduce the recorded final state ({})",
                report.final_state_diff.clone().unwrap_or_default()
            ))
        } else {
            None
        }
    };
    let device_free = snap.device_free(e);
    let figs = OomFigures {
        requested: Some(rounded),
        alloc_size: None,
        capacity,
        device_free,
        reserved: Some(f.reserved),
        allocated: Some(f.active + f.pending),
        largest_free_gap: Some(largest_usable.as_ref().map_or(0, |g| g.gap_size)),
        expandable_segments: expandable,
        max_split_size: max_split,
        gc_threshold: gc,
        ..Default::default()
    };
    OomFinding {
        device: st.device,
        event: i,
        time_us: e.time_us(),
        stream,
        rounded_request: rounded,
        pool: kind.as_str(),
        new_memory_needed,
        expandable_segments: exp,
        device_free,
        capacity,
        capacity_at_least: device_free.map(|d| d + f.reserved),
        reserved: f.reserved,
        allocated: f.allocated,
        active: f.active,
        pending_free: f.pending,
        free_in_reserved: f.inactive,
        free_blocks_that_fit: timeline::free_blocks_at_least(st, rounded),
        usable_blocks_that_fit: usable_fit,
        largest_free_gap: largest,
        largest_usable_gap: largest_usable,
        call_site: call_site(snap, e.frames, 8),
        user_frame: user_frame(snap, e.frames),
        replay_caveat,
        diagnosis: {
            let mut d = diagnose(style, &figs);
            reword_for_snapshots(&mut d, capacity);
            d
        },
    }
}

fn final_state(
    style: &Style,
    snap: &Snapshot,
    st: &MomentState,
    capacity: Option<u64>,
) -> FinalStateFinding {
    let f = figures(st);
    let (expandable, max_split, gc) = settings_figures(snap);
    let largest = timeline::largest_free_gap_segment(st).map(|(s, b)| GapSite::of(s, b));
    let gap = largest.as_ref().map_or(0, |g| g.gap_size);
    let live = f.active + f.pending;
    let live_share = if f.reserved > 0 {
        live as f64 / f.reserved as f64
    } else {
        0.0
    };
    let full_cache =
        f.reserved >= DUMPED_AT_OOM_MIN_RESERVED && live_share >= DUMPED_AT_OOM_LIVE_SHARE;
    let near_capacity = capacity
        .is_some_and(|c| c > 0 && f.reserved as f64 >= DUMPED_AT_OOM_CAPACITY_SHARE * c as f64);
    let looks = full_cache || near_capacity;
    let mut d = diagnose(
        style,
        &OomFigures {
            capacity,
            reserved: Some(f.reserved),
            allocated: Some(live),
            expandable_segments: expandable,
            max_split_size: max_split,
            gc_threshold: gc,
            ..Default::default()
        },
    );
    let mut details = vec![format!(
        "no oom event in the trace; live and pending blocks fill {} of {} reserved ({})",
        style.bytes(live),
        style.bytes(f.reserved),
        fmt_pct(live_share)
    )];
    if !looks {
        d.cause = Cause::Unknown;
        d.headline = "no oom event, and the final state does not look like an out-of-memory moment"
            .to_string();
    } else {
        let not_frag = format!(
            "not fragmentation: only {} is free inside reserved memory and the largest free block is {}, so any request above {} needed new device memory",
            style.bytes(f.inactive),
            style.bytes(gap),
            style.bytes(gap)
        );
        match capacity {
            Some(c) if near_capacity => {
                d.cause = Cause::Capacity;
                d.headline = format!(
                    "capacity: PyTorch had reserved {} of the device's {} ({}) and its cache was full; {not_frag}",
                    style.bytes(f.reserved),
                    style.bytes(c),
                    fmt_pct(f.reserved as f64 / c as f64)
                );
            }
            Some(c) => {
                d.cause = Cause::Unknown;
                d.headline = format!(
                    "{not_frag}; the device had {} beyond PyTorch's reservation, so either the failed request was larger than that or memory outside PyTorch (CUDA context, other processes) took it",
                    style.bytes(c.saturating_sub(f.reserved))
                );
            }
            None => {
                d.cause = Cause::Unknown;
                d.headline = format!(
                    "{not_frag}; whether the device was full or memory outside PyTorch took the rest cannot be told without its capacity (pass --capacity)"
                );
            }
        }
    }
    details.append(&mut d.details);
    d.details = details;
    reword_for_snapshots(&mut d, capacity);
    FinalStateFinding {
        device: st.device,
        looks_dumped_at_oom: looks,
        reserved: f.reserved,
        allocated: f.allocated,
        active: f.active,
        pending_free: f.pending,
        free_in_reserved: f.inactive,
        largest_free_gap: largest,
        capacity,
        diagnosis: d,
    }
}
