//! Replay stage: a snapshot's trace → the allocator state at every event.
//!
//! CONTRACT (these types and signatures are what every later stage codes
//! against and must stay stable):
//!
//! * `replay_device` reconstructs the state before the first trace event by
//!   undoing events backwards from the final `segments`, then replays forward,
//!   producing one [`Sample`] per event plus the start: `samples[0]` is the
//!   start state, `samples[i + 1]` the state after event `i`. With no events,
//!   `samples` holds exactly one sample (the final state). The samples are
//!   kept as a delta-encoded [`Series`] (about 10 bytes each) and read back
//!   exactly.
//! * `state_at` returns the block-level layout after an event (`None` = start).
//! * Anomalies never abort; they are counted in [`ReplayReport`]. Records
//!   of the final state no allocator could have written (overlapping
//!   segments or live blocks, blocks outside their segment, ranges past
//!   2^64) are left out and counted as `InconsistentRecord`, so every state
//!   has disjoint segments tiled by their blocks and every sample conserves
//!   bytes (active + pending + inactive = reserved).
//! * [`Replayer`] rebuilds a device's start once and answers both (and the
//!   report alone) from it, with the same results as the functions above.
//!
//! Inside: `backward` rebuilds the start, `forward` applies one event,
//! `state` holds the layout with its O(log n) free-block index, `policy` the
//! allocator's rounding and split rules. The stage reads the model only; it
//! neither decodes input nor formats output.

mod backward;
pub mod checkpoints;
pub mod downsample;
mod extremes;
mod forward;
mod gaps;
mod lifetimes;
mod moments;
pub(crate) mod policy;
mod resolve;
mod sample;
pub mod series;
mod sorted;
mod state;
#[cfg(test)]
mod tests;
pub mod trace;

use resolve::{event_index, last_at_or_before};

pub use crate::model::Moment;
use crate::model::*;
pub use extremes::KeyMomentsFold;
use extremes::{first_max_by, min_gap_under_pressure};
pub use lifetimes::{Lifetime, Lifetimes};
pub use moments::KeyMomentsAt;
pub use sample::{LayoutFigures, Sample};
use serde::Serialize;
pub use series::Series;
use state::{Layout, Problem};
use std::collections::{BTreeMap, HashMap};

/// When a live block came to be.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Allocated before the first event of the trace.
    OlderThanTrace,
    /// Allocated by trace event `n`.
    Event(u32),
}

/// The block-level state at one moment.
#[derive(Debug, Clone)]
pub struct MomentState {
    pub device: i64,
    /// Event after which this state holds (`None` = start).
    pub at: Option<usize>,
    pub time_us: Option<i64>,
    /// Segments of this device, sorted by address, blocks tiling each one.
    pub segments: Vec<Segment>,
    /// For every live block (by address): when it was allocated.
    pub origins: HashMap<u64, Origin>,
    /// At an `oom` event: the (rounded) request that failed.
    pub failed_request: Option<u64>,
}

/// The largest free (inactive) block of a moment and the segment holding
/// it; ties go to the lowest address.
pub fn largest_free_gap_segment(state: &MomentState) -> Option<(&Segment, &Block)> {
    largest_free_gap_where(state, |_| true)
}

/// Like [`largest_free_gap_segment`], among the segments `keep` accepts
/// (e.g. the pool and stream a request could use).
pub fn largest_free_gap_where(
    state: &MomentState,
    keep: impl Fn(&Segment) -> bool,
) -> Option<(&Segment, &Block)> {
    let mut best: Option<(&Segment, &Block)> = None;
    for s in state.segments.iter().filter(|s| keep(s)) {
        for b in s.blocks.iter().filter(|b| b.state == BlockState::Inactive) {
            if best.is_none_or(|(_, x)| b.size > x.size) {
                best = Some((s, b));
            }
        }
    }
    best
}

/// Free blocks of at least `size` bytes at a moment.
pub fn free_blocks_at_least(state: &MomentState, size: u64) -> usize {
    state
        .segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Inactive && b.size >= size)
        .count()
}

/// The allocator's rounding of a request (512-byte multiples, or
/// `roundup_power2_divisions` when the settings ask for them).
pub fn round_size(settings: Option<&AllocatorSettings>, size: u64) -> u64 {
    policy::Policy::from_settings(settings).round_size(size)
}

/// The segment a new cudaMalloc would create for a rounded request (2 MiB
/// for the small pool, 20 MiB up to 10 MiB, else 2 MiB-rounded).
pub fn allocation_size(rounded: u64) -> u64 {
    policy::Policy::allocation_size(rounded)
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyKind {
    /// A free of an address with no live block.
    FreeOfUnknownAddress,
    /// An alloc overlapping a live block or outside every segment.
    OverlappingAlloc,
    /// A segment event that does not match the segment layout.
    SegmentMismatch,
    /// An action this version does not know (skipped).
    UnknownAction,
    /// The recorded segments contradict themselves (overlapping segments or
    /// blocks, a block outside its segment): the record is left out.
    /// Counted per record, with no event (`first_event` is `None`).
    InconsistentRecord,
    /// Anything else the replay had to work around.
    Other,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub count: u64,
    /// First event where it happened (`None`: in the recorded segments).
    pub first_event: Option<usize>,
    pub example: String,
}

#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct ReplayReport {
    pub events: usize,
    /// Events replayed without any anomaly.
    pub clean_events: usize,
    pub anomalies: Vec<Anomaly>,
    /// Replaying forward from the reconstructed start reproduced the recorded
    /// final segments and blocks exactly (address, size, state).
    pub final_state_matches: bool,
    /// The first difference when it did not.
    pub final_state_diff: Option<String>,
    /// Statements of what was inferred rather than read (e.g. rounded sizes).
    pub inferences: Vec<String>,
    /// Live blocks in the reconstructed start (allocated before the trace).
    pub older_blocks: usize,
    /// Of those, blocks freed in the trace whose size had to be inferred.
    pub inferred_blocks: usize,
    /// Of those, blocks given more than their rounded size (unsplit).
    pub widened_blocks: usize,
    /// The highest requested bytes of live blocks when a pending-free block
    /// counts as allocated until its `free_completed`, as PyTorch's
    /// memory_viz counts (`allocated` stops at `free_requested`); the start
    /// and every event included.
    pub peak_allocated_incl_pending: u64,
    /// The event after which it first reaches that peak (`None`: the start,
    /// or the recorded state when there are no events).
    pub peak_allocated_incl_pending_at: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct DeviceReplay {
    pub device: i64,
    pub samples: Series,
    pub report: ReplayReport,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct KeyMoment {
    /// `start`, `peak allocated`, `oom #1`, …: the same label for the same
    /// figure, whatever the input.
    pub label: String,
    /// Event after which the sample holds (`None` = start).
    pub at: Option<usize>,
    pub sample: Sample,
    /// The operator running at that event (a profiler trace's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
}

/// Replays every device that has segments or trace events.
pub fn replay(snap: &Snapshot) -> Vec<DeviceReplay> {
    snap.devices()
        .into_iter()
        .map(|d| replay_device(snap, d))
        .collect()
}

/// The reconstructed start of one device, ready to be replayed forward.
struct Run<'a> {
    ctx: forward::Ctx<'a>,
    trace: &'a [TraceEvent],
    start: Layout,
    /// First anomaly per event index (backward pass first).
    problems: BTreeMap<usize, Problem>,
    /// Records of the final state left out as impossible.
    recorded: Vec<Problem>,
}

impl<'a> Run<'a> {
    fn new(snap: &'a Snapshot, device: i64) -> Run<'a> {
        let trace = snap.trace_of(device);
        let ctx = forward::Ctx::new(snap, device, trace);
        let (end, recorded) = Layout::from_segments(snap.segments_of(device));
        let mut problems = BTreeMap::new();
        let mut start = backward::start_state(&ctx, end, trace, &mut problems);
        start.set_indexed(true);
        Run {
            ctx,
            trace,
            start,
            problems,
            recorded,
        }
    }

    /// Replays event `i` on `l`: its anomaly, if it has one (the replay
    /// goes on either way). Only the report's replay keeps them
    /// ([`Found`]); a moment's state needs none.
    fn step(&self, l: &mut Layout, i: usize) -> Result<(), Problem> {
        forward::step(l, &self.ctx, i, &self.trace[i])
    }
}

/// One device's start, rebuilt once and replayed forward as often as asked.
///
/// The backward pass that rebuilds the start costs about as much as the
/// forward replay, so a caller that needs the series and a moment (or the
/// start and the report) keeps one `Replayer` instead of calling
/// [`replay_device`] and [`state_at`], which rebuild it each time. Results
/// are the same as theirs.
pub struct Replayer<'a> {
    snap: &'a Snapshot,
    device: i64,
    run: Run<'a>,
}

impl<'a> Replayer<'a> {
    pub fn new(snap: &'a Snapshot, device: i64) -> Replayer<'a> {
        Replayer {
            snap,
            device,
            run: Run::new(snap, device),
        }
    }

    /// What [`replay_device`] returns.
    pub fn replay(&self) -> DeviceReplay {
        let (samples, report) = self.forward(true);
        DeviceReplay {
            device: self.device,
            samples,
            report,
        }
    }

    /// The report of [`Replayer::replay`] without the series (no memory
    /// per event).
    pub fn report(&self) -> ReplayReport {
        self.forward(false).1
    }

    /// What [`state_at`] returns.
    pub fn state_at(&self, at: Option<usize>) -> MomentState {
        let run = &self.run;
        // A moment's state is its blocks: the running totals and the
        // free-block index, which only the samples read, are not kept.
        let mut l = run.start.clone_unindexed();
        let upto = at.map_or(0, |a| (a + 1).min(run.trace.len()));
        for i in 0..upto {
            let _ = run.step(&mut l, i);
        }
        moment_state(run, &l, self.device, at)
    }

    /// What [`for_each_state_at`] gives, from this replayer's start.
    pub fn for_each_state_at(&self, events: &[usize], mut f: impl FnMut(MomentState)) {
        let run = &self.run;
        let mut l = run.start.clone_unindexed();
        let mut done = 0;
        for &at in events {
            let upto = (at + 1).min(run.trace.len());
            // Earlier moments come out of a replay already past them.
            let state = if upto < done {
                self.state_at(Some(at))
            } else {
                for i in done..upto {
                    let _ = run.step(&mut l, i);
                }
                done = upto;
                moment_state(run, &l, self.device, Some(at))
            };
            f(state);
        }
    }

    fn forward(&self, keep_samples: bool) -> (Series, ReplayReport) {
        let (run, snap, device) = (&self.run, self.snap, self.device);
        let n = run.trace.len();
        // Forward anomalies take precedence over the backward pass's at the
        // same event: they describe the replay as shown.
        let mut found = Found::default();
        let mut samples = Series::with_capacity(if keep_samples { n + 1 } else { 0 });
        if keep_samples {
            samples.push_figures(&run.start.figures(None));
        }
        let mut incl_pending = (run.start.allocated_incl_pending(), None);
        // Without events the start is the end: read, not copied (a
        // snapshot of segments alone holds nothing else).
        let mut replayed = None;
        if n > 0 {
            let l = replayed.insert(run.start.clone());
            for (i, e) in run.trace.iter().enumerate() {
                if let Err(p) = run.step(l, i) {
                    found.add(i, p);
                }
                if keep_samples {
                    samples.push_figures(&l.figures(e.time_us()));
                }
                let v = l.allocated_incl_pending();
                if v > incl_pending.0 {
                    incl_pending = (v, Some(i));
                }
            }
        }
        let l = replayed.as_ref().unwrap_or(&run.start);
        let recorded: Vec<&Segment> = snap.segments_of(device).collect();
        // One replayed segment at a time: the layout is not built twice.
        let final_state_diff = diff_layout(&recorded, l.segments(device), l.segment_count());
        let (older_blocks, inferred_blocks, widened_blocks) = older_counts(run);
        let report = ReplayReport {
            events: n,
            clean_events: n - found.events(&run.problems),
            anomalies: summarize(&run.problems, &found, &run.recorded),
            final_state_matches: final_state_diff.is_none(),
            final_state_diff,
            inferences: inferences(run, snap),
            older_blocks,
            inferred_blocks,
            widened_blocks,
            peak_allocated_incl_pending: incl_pending.0,
            peak_allocated_incl_pending_at: incl_pending.1,
        };
        (samples, report)
    }
}

pub fn replay_device(snap: &Snapshot, device: i64) -> DeviceReplay {
    Replayer::new(snap, device).replay()
}

pub fn state_at(snap: &Snapshot, device: i64, at: Option<usize>) -> MomentState {
    Replayer::new(snap, device).state_at(at)
}

/// The states after each event of `events` (ascending), as [`state_at`]
/// gives them, from one replay: `f` gets each in turn. A file can hold an
/// OOM per event; one replay per state would be quadratic in the trace.
pub fn for_each_state_at(
    snap: &Snapshot,
    device: i64,
    events: &[usize],
    f: impl FnMut(MomentState),
) {
    // No state asked for: no start to rebuild.
    if events.is_empty() {
        return;
    }
    Replayer::new(snap, device).for_each_state_at(events, f)
}

fn moment_state(run: &Run, l: &Layout, device: i64, at: Option<usize>) -> MomentState {
    let ev = at.and_then(|a| run.trace.get(a));
    let live = l.segs.values().map(|s| s.blocks.len()).sum();
    let mut origins = HashMap::with_capacity(live);
    for s in l.segs.values() {
        for (a, b) in &s.blocks {
            origins.insert(*a, b.origin);
        }
    }
    MomentState {
        device,
        at: at.and_then(|a| run.trace.len().checked_sub(1).map(|last| a.min(last))),
        time_us: ev.and_then(|e| e.time_us()),
        segments: l.to_segments(device),
        origins,
        failed_request: ev.filter(|e| e.action == Action::Oom).map(|e| e.size),
    }
}

/// The first difference between the recorded and the replayed final state,
/// by address, size and state of every segment and block.
fn diff_layout(
    recorded: &[&Segment],
    mut replayed: impl Iterator<Item = Segment>,
    replayed_len: usize,
) -> Option<String> {
    let mut rec: Vec<&Segment> = recorded.to_vec();
    rec.sort_by_key(|s| s.address);
    for (i, r) in rec.iter().enumerate() {
        let Some(p) = replayed.next() else {
            return Some(format!(
                "the recorded segment at {:#x} ({} bytes) is missing from the replay ({} segments recorded, {} replayed)",
                r.address,
                r.total_size,
                rec.len(),
                replayed_len
            ));
        };
        if (r.address, r.total_size) != (p.address, p.total_size) {
            return Some(format!(
                "segment #{i}: recorded at {:#x} with {} bytes, replayed at {:#x} with {} bytes",
                r.address, r.total_size, p.address, p.total_size
            ));
        }
        for (j, rb) in r.blocks.iter().enumerate() {
            let Some(pb) = p.blocks.get(j) else {
                return Some(format!(
                    "segment at {:#x}: recorded block {} at {:#x} is missing from the replay ({} blocks recorded, {} replayed)",
                    r.address,
                    rb.state.as_str(),
                    rb.address,
                    r.blocks.len(),
                    p.blocks.len()
                ));
            };
            if (rb.address, rb.size, rb.state) != (pb.address, pb.size, pb.state) {
                return Some(format!(
                    "segment at {:#x}, block #{j}: recorded {} of {} bytes at {:#x}, replayed {} of {} bytes at {:#x}",
                    r.address,
                    rb.state.as_str(),
                    rb.size,
                    rb.address,
                    pb.state.as_str(),
                    pb.size,
                    pb.address
                ));
            }
        }
        if p.blocks.len() > r.blocks.len() {
            let pb = &p.blocks[r.blocks.len()];
            return Some(format!(
                "segment at {:#x}: the replay has an extra {} block of {} bytes at {:#x}",
                r.address,
                pb.state.as_str(),
                pb.size,
                pb.address
            ));
        }
    }
    if let Some(p) = replayed.next() {
        return Some(format!(
            "the replay has a segment at {:#x} ({} bytes) that is not recorded",
            p.address, p.total_size
        ));
    }
    None
}

/// The anomalies of a forward replay: each event's kind, in event order (a
/// replay meets each event once), and the message of each kind's first.
/// A trace the allocator rules do not fit can make every event one: a
/// message each would cost more than the events themselves.
#[derive(Default)]
struct Found {
    kinds: Vec<(usize, AnomalyKind)>,
    first: BTreeMap<AnomalyKind, (usize, String)>,
}

impl Found {
    fn add(&mut self, i: usize, p: Problem) {
        self.kinds.push((i, p.kind));
        self.first.entry(p.kind).or_insert((i, p.msg));
    }
    fn has(&self, i: usize) -> bool {
        self.kinds.binary_search_by_key(&i, |k| k.0).is_ok()
    }
    /// Events with an anomaly, with those of the backward pass.
    fn events(&self, backward: &BTreeMap<usize, Problem>) -> usize {
        self.kinds.len() + backward.keys().filter(|&&i| !self.has(i)).count()
    }
}

/// Each kind's count and first event, over the backward pass's anomalies
/// and the forward replay's (which take precedence at an event), after
/// those of the recorded final state.
fn summarize(
    backward: &BTreeMap<usize, Problem>,
    forward: &Found,
    recorded: &[Problem],
) -> Vec<Anomaly> {
    // Per kind: count, and the first event with its message.
    let mut merged: BTreeMap<AnomalyKind, (u64, usize, &str)> = BTreeMap::new();
    for (&i, p) in backward.iter().filter(|(i, _)| !forward.has(**i)) {
        merged.entry(p.kind).or_insert((0, i, &p.msg)).0 += 1;
    }
    for &(_, kind) in &forward.kinds {
        merged.entry(kind).or_insert((0, usize::MAX, "")).0 += 1;
    }
    for (kind, (at, msg)) in &forward.first {
        let m = merged.get_mut(kind).expect("counted above");
        if *at < m.1 {
            (m.1, m.2) = (*at, msg);
        }
    }
    let mut by: BTreeMap<AnomalyKind, Anomaly> = BTreeMap::new();
    for p in recorded {
        by.entry(p.kind)
            .and_modify(|a| a.count += 1)
            .or_insert_with(|| Anomaly {
                kind: p.kind,
                count: 1,
                first_event: None,
                example: p.msg.clone(),
            });
    }
    for (kind, (count, i, msg)) in merged {
        by.entry(kind)
            .and_modify(|a| a.count += count)
            .or_insert_with(|| Anomaly {
                kind,
                count,
                first_event: Some(i),
                example: format!("event {i}: {msg}"),
            });
    }
    by.into_values().collect()
}

/// (older than the trace, inferred, widened) blocks of the start.
fn older_counts(run: &Run) -> (usize, usize, usize) {
    let p = &run.ctx.policy;
    let (mut older, mut inferred, mut widened) = (0, 0, 0);
    for s in run.start.segs.values() {
        for b in s.blocks.values() {
            older += 1;
            if b.inferred {
                inferred += 1;
                if b.size > p.round_size(b.requested) {
                    widened += 1;
                }
            }
        }
    }
    (older, inferred, widened)
}

fn inferences(run: &Run, snap: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let p = &run.ctx.policy;
    let (older, inferred, widened) = older_counts(run);
    if !run.trace.is_empty() {
        let rounding = if p.uses_power2_rounding() {
            "512-byte multiples with roundup_power2_divisions from allocator_settings"
        } else {
            "512-byte multiples"
        };
        out.push(format!(
            "block sizes of allocations in the trace come from their requested sizes, rounded to {rounding} and split by the allocator's rules ({})",
            if p.expandable {
                "expandable segments: any remainder of 512 bytes or more is split off"
            } else {
                "small pool: remainders of 512 bytes or more are split off; large pool: only remainders over 1 MiB"
            }
        ));
    }
    if older > 0 && !run.trace.is_empty() {
        out.push(format!(
            "{older} block(s) were live before the first event (older than the trace)"
        ));
    }
    if inferred > 0 {
        out.push(format!(
            "{inferred} of them were freed in the trace without their allocation: their sizes are inferred from the request{}",
            if widened > 0 {
                format!(
                    "; {widened} took more than the rounded size because the large pool never leaves a free block of 1 MiB or less"
                )
            } else {
                String::new()
            }
        ));
    }
    let guessed = run.start.segs.values().filter(|s| s.kind_inferred).count()
        + run
            .trace
            .iter()
            .filter(|e| e.action == Action::SegmentAlloc)
            .filter(|e| !run.ctx.finals.contains_key(&e.addr()))
            .count();
    if guessed > 0 {
        out.push(format!(
            "{guessed} segment(s) absent from the final state: pool type inferred from the size (2 MiB = small pool), pool id from the trace or the default pool"
        ));
    }
    if p.expandable
        && snap
            .allocator_settings
            .as_ref()
            .and_then(|s| s.expandable_segments())
            .is_none()
    {
        out.push(
            "expandable segments assumed on: the file has expandable segments or segment_map/unmap events but no allocator_settings".into(),
        );
    }
    out
}

impl DeviceReplay {
    /// The event index a moment refers to (`Ok(None)` = start).
    pub fn resolve(&self, snap: &Snapshot, m: Moment) -> Result<Option<usize>, String> {
        let trace = snap.trace_of(self.device);
        let n = trace.len();
        let d = self.device;
        let at_sample = |i: usize| self.samples.at(i).event.map(|e| e as usize);
        Ok(match m {
            Moment::Start => None,
            Moment::End => n.checked_sub(1),
            Moment::Event(k) => event_index(k, n, || {
                format!(
                    "event {k} is past the end of device {d}'s trace ({n} events, numbered from 0)"
                )
            })?,
            Moment::TimeUs(t) => {
                if trace.iter().all(|e| e.time_us().is_none()) {
                    return Err(format!(
                        "device {d}'s trace records no time_us; name an event index instead"
                    ));
                }
                last_at_or_before(trace.iter().map(|e| e.time_us()), t)
            }
            Moment::PeakAllocated => at_sample(first_max_by(&self.samples, |s| s.allocated as f64)),
            Moment::PeakReserved => {
                at_sample(first_max_by(&self.samples, |s| s.reserved_bytes() as f64))
            }
            Moment::MaxFragmentation => {
                at_sample(first_max_by(&self.samples, |s| s.lay().fragmentation))
            }
            Moment::MinLargestGap => at_sample(min_gap_under_pressure(&self.samples)),
            Moment::Oom(k) => {
                let ooms: Vec<usize> = trace
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.action == Action::Oom)
                    .map(|(i, _)| i)
                    .collect();
                match ooms.get(k) {
                    Some(i) => Some(*i),
                    None => {
                        return Err(format!(
                            "device {d} has {} oom event(s); oom:{} does not exist",
                            ooms.len(),
                            k + 1
                        ));
                    }
                }
            }
        })
    }
    pub fn sample_at(&self, at: Option<usize>) -> Sample {
        self.samples.after(at)
    }
    pub fn end(&self) -> Sample {
        self.samples.last().expect("at least one sample")
    }
    /// The key moments of this device ([`key_moments`]): its OOMs are the
    /// trace's `oom` events.
    pub fn key_moments(&self, snap: &Snapshot) -> Vec<KeyMoment> {
        self.key_moments_first(snap, &KeyMomentsFold::read(&self.samples), usize::MAX)
    }

    /// [`DeviceReplay::key_moments`] from a fold fed every sample of this
    /// replay's series, in order, with only the first `max_ooms` OOMs
    /// among them.
    pub fn key_moments_first(
        &self,
        snap: &Snapshot,
        f: &KeyMomentsFold,
        max_ooms: usize,
    ) -> Vec<KeyMoment> {
        let at = self.key_moments_at(snap, f, max_ooms);
        at.iter(&self.samples).collect()
    }

    /// Where [`DeviceReplay::key_moments_first`] falls, each moment's
    /// sample left in the series until it is read.
    pub fn key_moments_at(
        &self,
        snap: &Snapshot,
        f: &KeyMomentsFold,
        max_ooms: usize,
    ) -> KeyMomentsAt {
        // Listed once: resolving `Moment::Oom(k)` scans the trace, and a
        // file may hold an OOM per event.
        let ooms = snap
            .trace_of(self.device)
            .iter()
            .enumerate()
            .filter(|(_, e)| e.action == Action::Oom)
            .map(|(i, _)| Some(i))
            .take(max_ooms);
        KeyMomentsAt::new(&self.samples, f, ooms)
    }
}

impl Series {
    /// The sample after event `at` (`None` = the start), the last one past
    /// the end.
    pub fn after(&self, at: Option<usize>) -> Sample {
        match at {
            None => self.at(0),
            Some(i) => self.at((i + 1).min(self.len() - 1)),
        }
    }
}

/// The key moments of one device's series, snapshot or profiler trace: the
/// start; the peaks of allocated and reserved bytes; with a layout the
/// highest fragmentation and the smallest largest gap under pressure,
/// without one the peak of reserved − allocated (what a trace has in their
/// place); each OOM (`ooms`: the event after which each failure met the
/// state); the end. `op` names the operator running at an event (a
/// trace's). A series of one sample with a layout is a snapshot without
/// trace events: only its recorded state is known, one moment,
/// [`RECORDED_STATE`].
pub fn key_moments(
    samples: &Series,
    ooms: impl IntoIterator<Item = Option<usize>>,
    op: impl Fn(usize) -> Option<String>,
) -> Vec<KeyMoment> {
    key_moments_with(samples, &KeyMomentsFold::read(samples), ooms, op)
}

/// [`key_moments`] with the series folded already.
fn key_moments_with(
    samples: &Series,
    f: &KeyMomentsFold,
    ooms: impl IntoIterator<Item = Option<usize>>,
    op: impl Fn(usize) -> Option<String>,
) -> Vec<KeyMoment> {
    let at = KeyMomentsAt::new(samples, f, ooms);
    (at.iter(samples))
        .map(|mut k| {
            k.op = k.at.and_then(&op);
            k
        })
        .collect()
}

/// The one key moment of a device without trace events.
pub const RECORDED_STATE: &str = "recorded state";

/// What to do about a snapshot without a trace, for every output that says
/// only its recorded state is known.
pub const RECORD_A_TRACE: &str = "record the trace with torch.cuda.memory._record_memory_history() before the steps you snapshot";
