//! Culprits: which live blocks pin fragmented memory, and where in the
//! program they were allocated.
//!
//! Owns the analysis of one allocator state ([`MomentState`]) into ranked
//! findings: stranded bytes per block (the scoring rule, `docs/culprits.md`),
//! groups by call site, stack or segment, the counterfactual largest gap
//! without a group, long-lived small blocks in large segments, almost-empty
//! segments, rounding waste by call site and blocks waiting on cross-stream
//! frees. Pure computation: no I/O, no formatting (renderers live in
//! `render::culprits`), and it never changes the state it is given.
//!
//! [`final_state`] builds the state at the end of a snapshot straight from its
//! final segments (with the replay's origins); every other moment comes from
//! the replay stage.

use crate::analysis::frames::{CallSite, FrameFacts, SiteKind};
use crate::core::order::sort_stable_by_index;
use crate::model::*;
use crate::timeline::{MomentState, Origin};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A segment is "almost empty" when its live blocks fill less than
/// `1 / ALMOST_EMPTY_DIVISOR` of it (5 %).
pub const ALMOST_EMPTY_DIVISOR: u64 = 20;
/// A block is "small" inside a large-pool segment when the segment is at
/// least this many times its size (the block fills at most 5 %).
pub const SMALL_BLOCK_FACTOR: u64 = 20;

/// The state at the end of the recording (the snapshot's final segments).
///
/// Origins are the replay's (`timeline::state_at` after the last event), so
/// that a block has the same age at `end` as at any other moment. A live
/// block the replay does not hold (its final state differs from the
/// recording there) falls back to [`recorded_origins`].
pub fn final_state(snap: &Snapshot, device: i64) -> MomentState {
    let mut segments: Vec<Segment> = snap.segments_of(device).cloned().collect();
    segments.sort_by_key(|s| s.address);
    let trace = snap.trace_of(device);
    let mut origins = recorded_origins(snap, device, &segments);
    if let Some(last) = trace.len().checked_sub(1) {
        let replayed = crate::timeline::state_at(snap, device, Some(last));
        for (a, o) in origins.iter_mut() {
            if let Some(r) = replayed.origins.get(a) {
                *o = *r;
            }
        }
    }
    MomentState {
        device,
        at: trace.len().checked_sub(1),
        time_us: trace.iter().rev().find_map(|e| e.time_us()),
        segments,
        origins,
        failed_request: None,
    }
}

/// Origins of the live blocks of `segments` from the trace alone: a block
/// whose address has an `alloc` in the device's trace was allocated by the
/// last such event; any other is older than the trace.
pub fn recorded_origins(
    snap: &Snapshot,
    device: i64,
    segments: &[Segment],
) -> HashMap<u64, Origin> {
    let mut last_alloc: HashMap<u64, u32> = HashMap::new();
    for (i, e) in snap.trace_of(device).iter().enumerate() {
        if e.action == Action::Alloc {
            last_alloc.insert(e.addr(), i as u32);
        }
    }
    let mut origins = HashMap::new();
    for b in segments.iter().flat_map(|s| &s.blocks) {
        if b.state != BlockState::Inactive {
            let o = last_alloc
                .get(&b.address)
                .map_or(Origin::OlderThanTrace, |&i| Origin::Event(i));
            origins.insert(b.address, o);
        }
    }
    origins
}

/// How culprits are grouped for the summary (and the table under `--group-by`).
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// By call site (the innermost user frame).
    #[default]
    Site,
    /// By the whole allocation stack.
    Stack,
    /// By segment.
    Segment,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The request the free memory should serve. `None`: the failed request
    /// of an OOM moment, else every free byte of a pinned segment counts.
    pub request: Option<u64>,
    pub group_by: GroupBy,
    /// How many culprits the "top N" counterfactual removes.
    pub top: usize,
}

/// One active block (allocated or waiting on a cross-stream free).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct BlockFinding {
    /// 1-based rank among culprits (allocated blocks that strand bytes).
    pub rank: Option<usize>,
    pub address: u64,
    pub state: BlockState,
    /// Rounded size.
    pub size: u64,
    pub requested: Option<u64>,
    pub segment: u64,
    pub segment_size: u64,
    pub segment_type: SegmentType,
    pub stream: i64,
    /// Free bytes this block strands (the scoring rule).
    pub stranded: u64,
    pub origin: Origin,
    /// Events between the allocation and the moment.
    pub age_events: Option<u64>,
    /// Microseconds between the allocation and the moment.
    pub age_us: Option<i64>,
    /// Shared by the blocks of a stack: millions of blocks, a few sites.
    pub call_site: Arc<CallSite>,
    /// The allocation stack (the block's own, or its trace `alloc`'s).
    #[serde(skip)]
    pub stack: StackId,
}

impl BlockFinding {
    pub fn waste(&self) -> u64 {
        self.requested.map_or(0, |r| self.size.saturating_sub(r))
    }
}

/// A group of culprits sharing a call site, a stack or a segment.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Group {
    pub label: String,
    /// The call site of the group's first block (for every grouping).
    pub call_site: CallSite,
    /// Indices into [`Analysis::blocks`], in rank order.
    pub blocks: Vec<usize>,
    pub stranded: u64,
    pub size: u64,
    pub requested: u64,
    /// Distinct segments the blocks sit in.
    pub segments: u64,
    #[serde(skip)]
    pub stack: Option<StackId>,
}

/// The largest free gap with some blocks removed from the state.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Counterfactual {
    pub removed_blocks: u64,
    pub largest_gap_before: u64,
    pub largest_gap_after: u64,
    /// Whether the target request fits in the largest gap (when there is one).
    pub request_fits_before: Option<bool>,
    pub request_fits_after: Option<bool>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct AlmostEmptySegment {
    pub address: u64,
    pub total_size: u64,
    pub segment_type: SegmentType,
    pub stream: i64,
    /// Bytes of the active blocks (rounded sizes).
    pub live: u64,
    pub free: u64,
    /// Indices into [`Analysis::blocks`] of the blocks that keep it.
    #[serde(skip)]
    pub kept_by: Vec<usize>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RoundingWaste {
    pub call_site: CallSite,
    pub blocks: u64,
    pub requested: u64,
    pub size: u64,
    pub waste: u64,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Analysis {
    pub device: i64,
    pub at: Option<usize>,
    pub time_us: Option<i64>,
    /// The request gaps are measured against, and where it came from.
    pub target: Option<u64>,
    pub target_source: Option<&'static str>,
    pub segments: u64,
    pub reserved: u64,
    /// Bytes of inactive blocks.
    pub free: u64,
    pub total_stranded: u64,
    pub largest_gap: u64,
    /// Every active block, culprits first in rank order, then the blocks that
    /// strand nothing, pending-free blocks among them by the same order.
    pub blocks: Vec<BlockFinding>,
    pub culprits: u64,
    pub group_by: GroupBy,
    pub groups: Vec<Group>,
    /// Without the top group.
    pub without_top_group: Option<Counterfactual>,
    /// Without the top `Options::top` culprits.
    pub without_top_culprits: Option<Counterfactual>,
    /// Indices into `blocks`, ranked like culprits.
    pub long_lived_small: Vec<usize>,
    pub almost_empty: Vec<AlmostEmptySegment>,
    pub rounding_waste: Vec<RoundingWaste>,
    /// Indices into `blocks` of `active_pending_free` blocks, by stranded bytes.
    pub pending_free: Vec<usize>,
    /// Facts about the data worth a line (each once, with a count).
    pub notes: Vec<String>,
}

impl Analysis {
    /// The culprits in rank order.
    pub fn ranked(&self) -> impl Iterator<Item = &BlockFinding> {
        self.blocks.iter().take(self.culprits as usize)
    }
}

/// Where the top group's blocks come from, as the summary names it.
#[derive(Debug, Clone, PartialEq)]
pub enum Whence {
    /// Grouped by call site, and none was recorded.
    NoStack,
    Site(String),
    Stack(String),
    Segment(String),
}

/// The culprit finding in brief: the top group, what it strands and what
/// removing it would change, or why there is no top group. Worded by
/// `render::culprits::summary`, in `fragscope culprits` and in the report's
/// verdict alike.
#[derive(Debug, Clone, PartialEq)]
pub enum Summary {
    /// No live block strands free memory.
    NothingStranded,
    /// Only blocks waiting on cross-stream frees strand memory.
    OnlyPendingFrees { stranded: u64 },
    Top {
        blocks: u64,
        whence: Whence,
        stranded: u64,
        /// How many segments the group spans (`None` when grouped by
        /// segment).
        segments: Option<u64>,
        /// The largest gap without the group, and the request it is
        /// measured against.
        without: Option<Counterfactual>,
        target: Option<u64>,
    },
}

/// The summary of `a`: its top group, else what strands memory at all.
pub fn summary(a: &Analysis) -> Summary {
    let Some(g) = a.groups.first() else {
        return if a.total_stranded == 0 {
            Summary::NothingStranded
        } else {
            Summary::OnlyPendingFrees {
                stranded: a.total_stranded,
            }
        };
    };
    let whence = match a.group_by {
        GroupBy::Site if g.call_site.kind == SiteKind::Unknown => Whence::NoStack,
        GroupBy::Site => Whence::Site(g.label.clone()),
        GroupBy::Stack => Whence::Stack(g.label.clone()),
        GroupBy::Segment => Whence::Segment(g.label.clone()),
    };
    Summary::Top {
        blocks: g.blocks.len() as u64,
        whence,
        stranded: g.stranded,
        segments: (a.group_by != GroupBy::Segment).then_some(g.segments),
        without: a.without_top_group.clone(),
        target: a.target,
    }
}

fn is_active(b: &Block) -> bool {
    b.state != BlockState::Inactive
}

/// Stranded bytes of each block of a segment (0 for inactive blocks).
///
/// A gap is a maximal run of inactive blocks. In a segment holding at least
/// one active block, a gap is stranded when no target is given, or when it is
/// smaller than the target. A stranded gap is charged to the active blocks
/// bounding it: half each when there are two (the odd byte to the lower
/// address), all of it to the only one at a segment edge.
pub fn stranded_in_segment(seg: &Segment, target: Option<u64>) -> Vec<u64> {
    let mut out = vec![0u64; seg.blocks.len()];
    if !seg.blocks.iter().any(is_active) {
        return out;
    }
    let mut i = 0;
    while i < seg.blocks.len() {
        if is_active(&seg.blocks[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut bytes = 0u64;
        while i < seg.blocks.len() && !is_active(&seg.blocks[i]) {
            bytes += seg.blocks[i].size;
            i += 1;
        }
        if target.is_some_and(|t| bytes >= t) {
            continue;
        }
        let left = start.checked_sub(1);
        let right = (i < seg.blocks.len()).then_some(i);
        match (left, right) {
            (Some(l), Some(r)) => {
                out[r] += bytes / 2;
                out[l] += bytes - bytes / 2;
            }
            (Some(x), None) | (None, Some(x)) => out[x] += bytes,
            (None, None) => {}
        }
    }
    out
}

/// The largest run of contiguous free bytes in any segment, counting the
/// blocks at `removed` addresses as free (merged with free neighbours).
pub fn largest_gap_without(segments: &[Segment], removed: &HashSet<u64>) -> u64 {
    let mut best = 0u64;
    for seg in segments {
        let mut run = 0u64;
        let mut run_end = None;
        for b in &seg.blocks {
            let free = b.state == BlockState::Inactive || removed.contains(&b.address);
            if !free {
                run = 0;
                run_end = None;
                continue;
            }
            // A hole in a malformed layout ends the run: bytes not in any
            // block cannot be assumed free.
            if run_end != Some(b.address) {
                run = 0;
            }
            run += b.size;
            run_end = Some(b.address.saturating_add(b.size));
            best = best.max(run);
        }
    }
    best
}

pub fn largest_gap(segments: &[Segment]) -> u64 {
    largest_gap_without(segments, &HashSet::new())
}

fn counterfactual(
    segments: &[Segment],
    blocks: &[BlockFinding],
    members: impl IntoIterator<Item = usize>,
    target: Option<u64>,
    before: u64,
) -> Counterfactual {
    let removed: HashSet<u64> = members.into_iter().map(|i| blocks[i].address).collect();
    let after = largest_gap_without(segments, &removed);
    Counterfactual {
        removed_blocks: removed.len() as u64,
        largest_gap_before: before,
        largest_gap_after: after,
        request_fits_before: target.map(|t| before >= t),
        request_fits_after: target.map(|t| after >= t),
    }
}

/// Ranking order: most stranded bytes first; then the smaller block (a small
/// block pinning as much is the cheaper fix); then segment address, block
/// address (unique), so the order is total.
fn rank_key(b: &BlockFinding) -> (std::cmp::Reverse<u64>, u64, u64, u64) {
    (std::cmp::Reverse(b.stranded), b.size, b.segment, b.address)
}

/// Analyses one state. `snap` supplies stacks and the trace (for origins and
/// ages); `state` is never modified.
pub fn analyze(snap: &Snapshot, state: &MomentState, opts: &Options) -> Analysis {
    let (target, target_source) = match (opts.request, state.failed_request) {
        (Some(r), _) => (Some(r), Some("request")),
        (None, Some(r)) => (Some(r), Some("failed_request")),
        (None, None) => (None, None),
    };
    let mut segments: Vec<&Segment> = state.segments.iter().collect();
    segments.sort_by_key(|s| s.address);

    let found = find_blocks(snap, state, &segments, target);
    let mut blocks = found.blocks;
    let culprits = rank(&mut blocks);
    let total_stranded: u64 = blocks.iter().map(|b| b.stranded).sum();
    let gap = largest_gap(&state.segments);

    let groups = group(&blocks[..culprits], opts.group_by);
    let without_top_group = groups.first().map(|g| {
        counterfactual(
            &state.segments,
            &blocks,
            g.blocks.iter().copied(),
            target,
            gap,
        )
    });
    let without_top_culprits = (culprits > 0 && opts.top > 0).then(|| {
        counterfactual(
            &state.segments,
            &blocks,
            0..culprits.min(opts.top),
            target,
            gap,
        )
    });

    let long_lived_small = long_lived_small(&blocks[..culprits], state.at);
    let almost_empty = almost_empty(&segments, &blocks);
    let rounding_waste = rounding_waste(&blocks);
    let mut pending_free: Vec<usize> = (0..blocks.len())
        .filter(|&i| blocks[i].state == BlockState::ActivePendingFree)
        .collect();
    pending_free.sort_by_key(|&i| rank_key(&blocks[i]));
    let notes = notes(&blocks, found.stack_from_trace);

    Analysis {
        device: state.device,
        at: state.at,
        time_us: state.time_us,
        target,
        target_source,
        segments: segments.len() as u64,
        reserved: found.reserved,
        free: found.free,
        total_stranded,
        largest_gap: gap,
        culprits: culprits as u64,
        group_by: opts.group_by,
        groups,
        without_top_group,
        without_top_culprits,
        long_lived_small,
        almost_empty,
        rounding_waste,
        pending_free,
        notes,
        blocks,
    }
}

/// The active blocks of a state, unranked, with the totals gathered on the
/// way.
struct Found {
    blocks: Vec<BlockFinding>,
    /// Bytes of inactive blocks.
    free: u64,
    reserved: u64,
    /// Blocks without a stack of their own that took their `alloc` event's.
    stack_from_trace: u64,
}

/// One finding per active block of `segments` (in address order), with its
/// stranded bytes, origin, age and call site.
fn find_blocks(
    snap: &Snapshot,
    state: &MomentState,
    segments: &[&Segment],
    target: Option<u64>,
) -> Found {
    let trace = snap.trace_of(state.device);
    let mut sites: HashMap<StackId, Arc<CallSite>> = HashMap::new();
    let facts = FrameFacts::new(snap);
    let mut found = Found {
        blocks: Vec::new(),
        free: 0,
        reserved: 0,
        stack_from_trace: 0,
    };
    for seg in segments {
        found.reserved += seg.total_size;
        let stranded = stranded_in_segment(seg, target);
        for (b, s) in seg.blocks.iter().zip(stranded) {
            if !is_active(b) {
                found.free += b.size;
                continue;
            }
            let origin = state
                .origins
                .get(&b.address)
                .copied()
                .unwrap_or(Origin::OlderThanTrace);
            let ev = match origin {
                Origin::Event(i) => trace.get(i as usize),
                Origin::OlderThanTrace => None,
            };
            let stack = if b.frames != StackId::EMPTY {
                b.frames
            } else if let Some(e) = ev.filter(|e| e.frames != StackId::EMPTY) {
                found.stack_from_trace += 1;
                e.frames
            } else {
                StackId::EMPTY
            };
            let site = sites
                .entry(stack)
                .or_insert_with(|| Arc::new(facts.call_site(stack)))
                .clone();
            let (age_events, age_us) = match origin {
                Origin::Event(i) => (
                    state.at.map(|a| (a as u64).saturating_sub(i as u64)),
                    match (state.time_us, ev.and_then(|e| e.time_us())) {
                        (Some(now), Some(then)) => Some(now - then),
                        _ => None,
                    },
                ),
                Origin::OlderThanTrace => (None, None),
            };
            found.blocks.push(BlockFinding {
                rank: None,
                address: b.address,
                state: b.state,
                size: b.size,
                requested: b.requested_size,
                segment: seg.address,
                segment_size: seg.total_size,
                segment_type: seg.segment_type,
                stream: seg.stream,
                stranded: s,
                origin,
                age_events,
                age_us,
                call_site: site,
                stack,
            });
        }
    }
    found
}

/// Puts the culprits (allocated, stranding something) first, in rank order
/// and numbered, the rest after them in the same order; returns how many
/// culprits there are.
fn rank(blocks: &mut [BlockFinding]) -> usize {
    let is_culprit = |b: &BlockFinding| b.state == BlockState::ActiveAllocated && b.stranded > 0;
    sort_stable_by_index(blocks, |b| (!is_culprit(b), rank_key(b)));
    let culprits = blocks.iter().take_while(|b| is_culprit(b)).count();
    (blocks.iter_mut().take(culprits).enumerate()).for_each(|(i, b)| b.rank = Some(i + 1));
    culprits
}

/// Indices of the culprits that are small blocks in large segments and
/// have lived at least half of the events so far (or since before the
/// trace) at the moment `at`.
fn long_lived_small(culprits: &[BlockFinding], at: Option<usize>) -> Vec<usize> {
    let events_so_far = at.map_or(0, |a| a as u64 + 1);
    (0..culprits.len())
        .filter(|&i| {
            let b = &culprits[i];
            let long_lived = match b.age_events {
                None => b.origin == Origin::OlderThanTrace,
                Some(age) => age * 2 >= events_so_far,
            };
            b.segment_type == SegmentType::Large
                && b.size.saturating_mul(SMALL_BLOCK_FACTOR) <= b.segment_size
                && long_lived
        })
        .collect()
}

/// Facts about the blocks worth a line: missing stacks, stacks taken from
/// the trace, missing requested sizes.
fn notes(blocks: &[BlockFinding], stack_from_trace: u64) -> Vec<String> {
    let mut notes = Vec::new();
    let unknown = blocks
        .iter()
        .filter(|b| b.call_site.kind == SiteKind::Unknown)
        .count();
    if unknown > 0 {
        notes.push(format!(
            "{unknown} of {} active blocks have no recorded stack (allocated before recording started, or recorded without context)",
            blocks.len()
        ));
    }
    if stack_from_trace > 0 {
        notes.push(format!(
            "{stack_from_trace} of {} active blocks had no stack of their own and took the stack of their trace alloc event",
            blocks.len()
        ));
    }
    let no_request = blocks.iter().filter(|b| b.requested.is_none()).count();
    if no_request > 0 {
        notes.push(format!(
            "{no_request} of {} active blocks have no requested size; their rounding waste is unknown and counted as 0",
            blocks.len()
        ));
    }
    notes
}

#[derive(PartialEq, Eq, Hash, Clone)]
enum Key {
    Site(CallSite),
    Stack(StackId),
    Segment(u64),
}

/// Groups ranked culprits. Groups are ordered by stranded bytes, ties by the
/// rank of their best block (unique, so the order is total).
fn group(culprits: &[BlockFinding], by: GroupBy) -> Vec<Group> {
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for (i, b) in culprits.iter().enumerate() {
        let key = match by {
            GroupBy::Site => Key::Site((*b.call_site).clone()),
            GroupBy::Stack => Key::Stack(b.stack),
            GroupBy::Segment => Key::Segment(b.segment),
        };
        let gi = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                label: match by {
                    GroupBy::Site => b.call_site.label(),
                    GroupBy::Stack => format!("stack #{} at {}", b.stack.0, b.call_site.label()),
                    GroupBy::Segment => format!("segment {:#x}", b.segment),
                },
                call_site: (*b.call_site).clone(),
                blocks: Vec::new(),
                stranded: 0,
                size: 0,
                requested: 0,
                segments: 0,
                stack: (by == GroupBy::Stack).then_some(b.stack),
            });
            groups.len() - 1
        });
        let g = &mut groups[gi];
        g.blocks.push(i);
        g.stranded += b.stranded;
        g.size += b.size;
        g.requested += b.requested.unwrap_or(b.size);
    }
    for g in &mut groups {
        let segs: HashSet<u64> = g.blocks.iter().map(|&i| culprits[i].segment).collect();
        g.segments = segs.len() as u64;
    }
    groups.sort_by_key(|g| (std::cmp::Reverse(g.stranded), g.blocks[0]));
    groups
}

fn almost_empty(segments: &[&Segment], blocks: &[BlockFinding]) -> Vec<AlmostEmptySegment> {
    let mut by_segment: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, b) in blocks.iter().enumerate() {
        by_segment.entry(b.segment).or_default().push(i);
    }
    let mut out: Vec<AlmostEmptySegment> = segments
        .iter()
        .filter_map(|s| {
            let kept_by = by_segment.get(&s.address)?.clone();
            let live: u64 = kept_by.iter().map(|&i| blocks[i].size).sum();
            (live.saturating_mul(ALMOST_EMPTY_DIVISOR) < s.total_size).then(|| AlmostEmptySegment {
                address: s.address,
                total_size: s.total_size,
                segment_type: s.segment_type,
                stream: s.stream,
                live,
                free: s.total_size.saturating_sub(live),
                kept_by,
            })
        })
        .collect();
    out.sort_by_key(|s| (std::cmp::Reverse(s.free), s.address));
    out
}

fn rounding_waste(blocks: &[BlockFinding]) -> Vec<RoundingWaste> {
    let mut by_site: HashMap<&CallSite, RoundingWaste> = HashMap::new();
    for b in blocks
        .iter()
        .filter(|b| b.state == BlockState::ActiveAllocated)
    {
        let Some(req) = b.requested else { continue };
        let w = by_site
            .entry(&b.call_site)
            .or_insert_with(|| RoundingWaste {
                call_site: (*b.call_site).clone(),
                blocks: 0,
                requested: 0,
                size: 0,
                waste: 0,
            });
        w.blocks += 1;
        w.requested += req.min(b.size);
        w.size += b.size;
        w.waste += b.waste();
    }
    let mut out: Vec<RoundingWaste> = by_site.into_values().filter(|w| w.waste > 0).collect();
    out.sort_by(|a, b| {
        b.waste
            .cmp(&a.waste)
            .then_with(|| a.call_site.cmp(&b.call_site))
    });
    out
}

/// What `culprits` found on one trace device.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceCulprits {
    pub device: String,
    /// How the moment was named (`peak`, `oom`, `1234`).
    pub moment: String,
    pub at: Option<usize>,
    pub time_us: Option<i64>,
    pub allocated: u64,
    pub reserved: Option<u64>,
    pub external_free: Option<u64>,
    /// `None` without `Addr` (allocations cannot be paired with frees).
    pub live_by_op: Option<Vec<crate::model::profiler::OpShare>>,
    /// Why stranded bytes are not given.
    pub stranded: &'static str,
}

/// The sentence every trace `culprits` output carries instead of stranded
/// bytes.
pub const NO_STRANDED: &str = "stranded bytes: not measurable for a profiler trace: they need the segment layout (which free blocks share a segment with a live one), which a trace does not record; record a memory snapshot to rank blocks by the free memory they strand";

/// Live bytes by operator on one trace device after event `at` (`None`:
/// before the first), with the totals of that moment.
pub fn trace_culprits(
    d: &crate::model::profiler::TraceDevice,
    names: &[String],
    moment: &str,
    at: Option<usize>,
) -> TraceCulprits {
    let s = crate::timeline::trace::trace_series(d).after(at);
    TraceCulprits {
        device: d.label.clone(),
        moment: moment.to_string(),
        at,
        time_us: s.time_us,
        allocated: s.allocated,
        reserved: s.reserved,
        external_free: s.external_free,
        live_by_op: d.live_by_op(names, at),
        stranded: NO_STRANDED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment at `addr` of blocks (size, state), each requesting its size.
    fn seg(addr: u64, blocks: &[(u64, BlockState)]) -> Segment {
        let blocks: Vec<_> = blocks.iter().map(|&(s, st)| (s, Some(s), st)).collect();
        crate::model::test_support::laid_out(addr, &blocks)
    }

    use BlockState::{ActiveAllocated as L, ActivePendingFree as P, Inactive as F};

    #[test]
    fn gaps_are_split_between_their_bounding_blocks() {
        let s = seg(0, &[(7, F), (1, L), (5, F), (1, P), (3, F)]);
        assert_eq!(stranded_in_segment(&s, None), vec![0, 10, 0, 5, 0]);
        // A gap as large as the target is usable, so not stranded.
        assert_eq!(stranded_in_segment(&s, Some(7)), vec![0, 3, 0, 5, 0]);
        // A free segment strands nothing: it can be released.
        let free = seg(100, &[(20, F)]);
        assert_eq!(stranded_in_segment(&free, None), vec![0]);
    }

    #[test]
    fn removed_blocks_merge_with_free_neighbours() {
        let s = vec![
            seg(0, &[(7, F), (1, L), (5, F), (1, L), (3, F)]),
            seg(100, &[(9, F), (1, L)]),
        ];
        assert_eq!(largest_gap(&s), 9);
        let one: HashSet<u64> = [7].into();
        assert_eq!(largest_gap_without(&s, &one), 13);
        let both: HashSet<u64> = [7, 13].into();
        assert_eq!(largest_gap_without(&s, &both), 17);
    }
}
