//! Comparing two runs: every metric side by side with its change, and the
//! call sites whose memory moved the most.
//!
//! Owns: the comparison (which direction is a regression, relative changes),
//! the per-call-site figures of a snapshot (live bytes at the end, peak live
//! bytes over the trace, free memory pinned), "culprits new or gone", and
//! the segments of one run only (matched by address and size, as PyTorch's
//! `_memory_viz compare` matches them) with what they hold.
//! Must not compute the run-level metrics (that is [`crate::analysis::metrics`]) or
//! format output (that is `render::diff`).
//!
//! A call site is [`crate::analysis::frames::call_site`], the frame every command
//! names (the innermost user frame among those PyTorch's viewer shows), in
//! its [`crate::analysis::frames::CallSite::label_without_line`] form: the line is left out so that an
//! edit above a function does not make every site below it "new".

use crate::analysis::frames::call_site;
use crate::analysis::metrics::{MetricId, Metrics, Quantity, Source, Unit};
use crate::input::profiler::ProfilerTrace;
use crate::model::{BlockState, Segment, Snapshot, StackId, TraceEvent};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Version of the JSON that `diff --json` prints.
pub const DIFF_SCHEMA: &str = "fragscope.diff/1";

/// Site of blocks freed during the trace but allocated before it began (the
/// free's own stack does not say who allocated them).
pub const BEFORE_TRACE: &str = "(allocated before the trace)";

/// One call site of one run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct SiteFigures {
    pub site: String,
    /// Requested bytes of its live blocks in the final state.
    pub live_bytes: u64,
    pub live_blocks: u64,
    /// Most live bytes at one moment of the trace (the final state's when
    /// there is no trace); summed over devices.
    pub peak_bytes: u64,
    /// Free (inactive) bytes of the segments where it holds a live block:
    /// memory it keeps from being released. A segment's free bytes count for
    /// every site that holds a block in it.
    pub pinned_free_bytes: u64,
}

/// Per-call-site figures of a snapshot (one device, or all), sorted by site.
/// The second value counts frees that contradict the final state (a site
/// whose start would be negative); each is clamped at zero.
pub fn call_sites(snap: &Snapshot, device: Option<i64>) -> (Vec<SiteFigures>, u64) {
    let mut acc: BTreeMap<String, SiteFigures> = BTreeMap::new();
    let mut contradictions = 0;
    let mut names: HashMap<StackId, String> = HashMap::new();
    let mut site =
        |id: StackId| -> String { names.entry(id).or_insert_with(|| site_of(snap, id)).clone() };
    for d in snap.devices() {
        if device.is_some_and(|x| x != d) {
            continue;
        }
        let mut live: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for seg in snap.segments_of(d) {
            let mut in_seg = BTreeSet::new();
            let mut inactive = 0u64;
            for b in &seg.blocks {
                match b.state {
                    BlockState::ActiveAllocated => {
                        let s = site(b.frames);
                        let e = live.entry(s.clone()).or_default();
                        e.0 += b.requested_or_size().min(b.size);
                        e.1 += 1;
                        in_seg.insert(s);
                    }
                    BlockState::Inactive => inactive += b.size,
                    BlockState::ActivePendingFree => {}
                }
            }
            for s in in_seg {
                acc.entry(s.clone())
                    .or_insert_with(|| SiteFigures {
                        site: s,
                        ..Default::default()
                    })
                    .pinned_free_bytes += inactive;
            }
        }
        let (peaks, bad) = trace_peaks(snap.trace_of(d), &live, &mut site);
        contradictions += bad;
        for (s, (bytes, blocks)) in &live {
            let e = acc.entry(s.clone()).or_insert_with(|| SiteFigures {
                site: s.clone(),
                ..Default::default()
            });
            e.live_bytes += bytes;
            e.live_blocks += blocks;
        }
        for (s, p) in peaks {
            acc.entry(s.clone())
                .or_insert_with(|| SiteFigures {
                    site: s,
                    ..Default::default()
                })
                .peak_bytes += p;
        }
    }
    (acc.into_values().collect(), contradictions)
}

/// Per-operator figures of a profiler trace (one device, or every device
/// but the CPU), in the shape of [`call_sites`]: the call site of an
/// allocation is the operator that made it. `pinned_free_bytes` stays 0 (a
/// trace has no segment layout). `None` when a device lacks `Addr`.
pub fn trace_sites(tr: &ProfilerTrace, device: Option<i64>) -> Option<Vec<SiteFigures>> {
    let mut acc: BTreeMap<String, SiteFigures> = BTreeMap::new();
    for d in tr.accelerators(device) {
        for (op, live, peak, n) in d.op_figures(&tr.names)? {
            let e = acc.entry(op.clone()).or_insert_with(|| SiteFigures {
                site: op,
                ..Default::default()
            });
            e.live_bytes += live;
            e.live_blocks += n;
            e.peak_bytes += peak;
        }
    }
    Some(acc.into_values().collect())
}

/// Peak live bytes per site over one device's trace. The trace gives each
/// site's changes; the final state fixes where they end, so the start is the
/// end minus the net change and the peak is the start plus the highest
/// running sum. Frees are counted when the program frees (`free_requested`),
/// matching `allocated`, which leaves pending-free blocks out.
fn trace_peaks(
    trace: &[TraceEvent],
    live_end: &BTreeMap<String, (u64, u64)>,
    site: &mut impl FnMut(StackId) -> String,
) -> (BTreeMap<String, u64>, u64) {
    use crate::model::Action;
    // site → (running sum, highest running sum)
    let mut run: BTreeMap<String, (i128, i128)> = BTreeMap::new();
    // addr → (site, size, free requested)
    let mut blocks: HashMap<u64, (String, u64, bool)> = HashMap::new();
    let mut step = |s: &str, delta: i128| {
        let e = run.entry(s.to_string()).or_insert((0, 0));
        e.0 += delta;
        e.1 = e.1.max(e.0);
    };
    for e in trace {
        match e.action {
            Action::Alloc => {
                let s = site(e.frames);
                step(&s, e.size as i128);
                blocks.insert(e.addr, (s, e.size, false));
            }
            Action::FreeRequested => match blocks.get_mut(&e.addr) {
                Some((s, size, freed)) if !*freed => {
                    *freed = true;
                    step(s, -(*size as i128));
                }
                Some(_) => {}
                None => {
                    step(BEFORE_TRACE, -(e.size as i128));
                    blocks.insert(e.addr, (BEFORE_TRACE.into(), e.size, true));
                }
            },
            Action::FreeCompleted => match blocks.remove(&e.addr) {
                Some((_, _, true)) => {}
                // No `free_requested` recorded (skip_actions, or a cut ring buffer).
                Some((s, size, false)) => step(&s, -(size as i128)),
                None => step(BEFORE_TRACE, -(e.size as i128)),
            },
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    let mut contradictions = 0;
    let sites: BTreeSet<&String> = run.keys().chain(live_end.keys()).collect();
    for s in sites {
        let end = live_end.get(s).map_or(0, |x| x.0) as i128;
        let (net, high) = run.get(s).copied().unwrap_or((0, 0));
        let mut start = end - net;
        if start < 0 {
            contradictions += 1;
            start = 0;
        }
        let peak = (start + high).max(end).max(0);
        out.insert(s.clone(), peak.min(u64::MAX as i128) as u64);
    }
    (out, contradictions)
}

/// The call site of a stack (see the module doc).
fn site_of(snap: &Snapshot, id: StackId) -> String {
    call_site(snap, id).label_without_line()
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Better,
    Worse,
    Same,
    /// Not measurable on one side.
    Unknown,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MetricDelta {
    pub metric: MetricId,
    pub before: Option<Quantity>,
    pub after: Option<Quantity>,
    pub before_device: Option<i64>,
    pub after_device: Option<i64>,
    /// after − before, in the metric's unit.
    pub change: Option<f64>,
    /// change / before (`None` when before is 0 or unknown).
    pub relative: Option<f64>,
    pub direction: Direction,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SiteDelta {
    pub site: String,
    pub live_before: u64,
    pub live_after: u64,
    pub peak_before: u64,
    pub peak_after: u64,
}

impl SiteDelta {
    pub fn live_change(&self) -> i128 {
        self.live_after as i128 - self.live_before as i128
    }
    pub fn peak_change(&self) -> i128 {
        self.peak_after as i128 - self.peak_before as i128
    }
    fn moved(&self) -> u128 {
        self.live_change()
            .unsigned_abs()
            .max(self.peak_change().unsigned_abs())
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Culprit {
    pub site: String,
    pub pinned_free_bytes: u64,
    pub live_bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Side {
    pub file: String,
    /// The device asked for (`None`: every device of the file).
    pub device: Option<i64>,
    /// The devices measured.
    pub devices: Vec<i64>,
    pub source: Source,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DiffReport {
    pub schema: String,
    pub before: Side,
    pub after: Side,
    pub metrics: Vec<MetricDelta>,
    /// The biggest movers, by the larger of |live change| and |peak change|.
    pub call_sites: Vec<SiteDelta>,
    /// Sites whose figures changed at all (of which `call_sites` shows the top).
    pub call_sites_changed: usize,
    /// Sites that pin free memory in AFTER but not in BEFORE.
    pub new_culprits: Vec<Culprit>,
    /// Sites that pinned free memory in BEFORE but no longer do.
    pub gone_culprits: Vec<Culprit>,
    /// Segments of one run only (two snapshots; `None` otherwise).
    pub segments: Option<SegmentDiff>,
    pub notes: Vec<String>,
}

/// One segment of one run, with what it holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SegmentFigures {
    pub device: i64,
    pub address: u64,
    pub total_size: u64,
    /// `small` or `large`.
    pub segment_type: String,
    pub stream: i64,
    pub pool_id: (i64, i64),
    /// Requested bytes of its live (`active_allocated`) blocks.
    pub allocated_bytes: u64,
    pub live_blocks: u64,
    /// Bytes of its inactive blocks.
    pub free_bytes: u64,
    /// The call site (as `culprits` names it, with its line) holding the
    /// most requested bytes in the segment; `None` without a live block.
    pub top_site: Option<String>,
    pub top_site_bytes: u64,
}

/// Segments matched by (address, total size), as PyTorch's `_memory_viz
/// compare` matches them: those of one run only.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SegmentDiff {
    /// Segments of BEFORE whose address and size AFTER has too.
    pub in_both: usize,
    pub only_before_count: usize,
    pub only_before_bytes: u64,
    pub only_after_count: usize,
    pub only_after_bytes: u64,
    /// The largest first (then by device and address), at most `--top`.
    pub only_before: Vec<SegmentFigures>,
    pub only_after: Vec<SegmentFigures>,
}

/// The segments of one run only, between two snapshots (each side one
/// device, or every device when `None`). A segment is the same in both when
/// its address and total size are: CUDA's unified addressing gives every
/// device its own addresses, so the device is not part of the key (and two
/// devices of one file can be compared). An expandable segment that grew
/// or shrank is therefore in both lists, as `_memory_viz compare` has it.
/// `top` bounds the lists (0 = all); the counts and bytes cover every one.
pub fn segment_diff(
    before: &Snapshot,
    before_device: Option<i64>,
    after: &Snapshot,
    after_device: Option<i64>,
    top: usize,
) -> SegmentDiff {
    let (b, a) = (
        segments_of(before, before_device),
        segments_of(after, after_device),
    );
    let keys = |v: &[&Segment]| -> BTreeSet<(u64, u64)> {
        v.iter().map(|x| (x.address, x.total_size)).collect()
    };
    let (kb, ka) = (keys(&b), keys(&a));
    let only = |snap: &Snapshot, v: &[&Segment], other: &BTreeSet<(u64, u64)>| {
        let mut names: HashMap<StackId, String> = HashMap::new();
        let mut out: Vec<SegmentFigures> = v
            .iter()
            .filter(|x| !other.contains(&(x.address, x.total_size)))
            .map(|x| segment_figures(snap, x, &mut names))
            .collect();
        out.sort_by(|p, q| {
            q.total_size
                .cmp(&p.total_size)
                .then(p.device.cmp(&q.device))
                .then(p.address.cmp(&q.address))
        });
        let bytes = out.iter().fold(0u64, |t, x| t.saturating_add(x.total_size));
        (out, bytes)
    };
    let (mut ob, ob_bytes) = only(before, &b, &ka);
    let (mut oa, oa_bytes) = only(after, &a, &kb);
    let (ob_count, oa_count) = (ob.len(), oa.len());
    if top > 0 {
        ob.truncate(top);
        oa.truncate(top);
    }
    SegmentDiff {
        in_both: b.len() - ob_count,
        only_before_count: ob_count,
        only_before_bytes: ob_bytes,
        only_after_count: oa_count,
        only_after_bytes: oa_bytes,
        only_before: ob,
        only_after: oa,
    }
}

/// One device's segments, or every device's.
fn segments_of(s: &Snapshot, device: Option<i64>) -> Vec<&Segment> {
    s.segments
        .iter()
        .filter(|x| device.is_none_or(|d| x.device == d))
        .collect()
}

fn segment_figures(
    snap: &Snapshot,
    seg: &Segment,
    names: &mut HashMap<StackId, String>,
) -> SegmentFigures {
    let (mut allocated, mut live, mut free) = (0u64, 0u64, 0u64);
    let mut by_site: BTreeMap<String, u64> = BTreeMap::new();
    for b in &seg.blocks {
        match b.state {
            BlockState::ActiveAllocated => {
                let bytes = b.requested_or_size().min(b.size);
                allocated = allocated.saturating_add(bytes);
                live += 1;
                let site = names
                    .entry(b.frames)
                    .or_insert_with(|| call_site(snap, b.frames).label());
                let e = by_site.entry(site.clone()).or_default();
                *e = e.saturating_add(bytes);
            }
            BlockState::Inactive => free = free.saturating_add(b.size),
            BlockState::ActivePendingFree => {}
        }
    }
    // Most bytes; ties to the first site by name (the map's order).
    let top = by_site
        .into_iter()
        .fold(None::<(String, u64)>, |best, (s, n)| match best {
            Some((_, m)) if m >= n => best,
            _ => Some((s, n)),
        });
    SegmentFigures {
        device: seg.device,
        address: seg.address,
        total_size: seg.total_size,
        segment_type: seg.segment_type.as_str().into(),
        stream: seg.stream,
        pool_id: seg.pool(),
        allocated_bytes: allocated,
        live_blocks: live,
        free_bytes: free,
        top_site_bytes: top.as_ref().map_or(0, |t| t.1),
        top_site: top.map(|t| t.0),
    }
}

/// One side of a comparison. `sites` is `None` for inputs that do not
/// record who allocated (a profiler trace without `Addr`).
pub struct DiffInput<'a> {
    pub file: &'a str,
    pub device: Option<i64>,
    pub metrics: &'a Metrics,
    pub sites: Option<&'a [SiteFigures]>,
}

/// Compares two runs; `top` bounds the call-site and culprit lists (0 = all).
pub fn diff(before: &DiffInput, after: &DiffInput, top: usize) -> DiffReport {
    // The metrics either input can measure at all: the allocator's for
    // snapshots and traces, the category peaks for memory-timeline exports.
    let metrics = MetricId::ALL
        .into_iter()
        .filter(|m| m.applies_to(before.metrics.source) || m.applies_to(after.metrics.source))
        .map(|m| metric_delta(m, before.metrics, after.metrics))
        .collect();
    let mut notes = Vec::new();
    for (side, inp) in [("before", before), ("after", after)] {
        notes.extend(
            inp.metrics
                .notes
                .iter()
                .map(|n| format!("{side} ({}): {n}", inp.file)),
        );
    }
    let timelines = [before, after]
        .iter()
        .filter(|i| i.metrics.source == Source::MemoryTimeline)
        .count();
    if before.metrics.source != after.metrics.source && timelines == 0 {
        notes.push(
            "comparing a snapshot with a profiler trace: snapshots count requested bytes as \
allocated, profiler totals count block bytes, so allocated figures differ by the rounding"
                .into(),
        );
    }
    if timelines == 2 {
        notes.push(
            "memory-timeline exports: each category's peak is its own highest live bytes, and the categories may peak at different moments, so they need not add up to the peak total"
                .into(),
        );
    }
    // A trace without GPU memory events has no call site to compare; its
    // note says so.
    let no_gpu = [before, after]
        .iter()
        .any(|i| i.metrics.trace.is_some_and(|t| t.cpu_only));
    let limit = |n: usize| if top == 0 { n } else { top.min(n) };
    let (mut movers, mut new_c, mut gone_c) = (Vec::new(), Vec::new(), Vec::new());
    let mut changed = 0;
    let same_kind = before.metrics.source == after.metrics.source;
    match (before.sites, after.sites) {
        (Some(b), Some(a)) if same_kind => {
            let bm: BTreeMap<&str, &SiteFigures> = b.iter().map(|s| (s.site.as_str(), s)).collect();
            let am: BTreeMap<&str, &SiteFigures> = a.iter().map(|s| (s.site.as_str(), s)).collect();
            let keys: BTreeSet<&str> = bm.keys().chain(am.keys()).copied().collect();
            for k in keys {
                let (x, y) = (bm.get(k), am.get(k));
                let d = SiteDelta {
                    site: k.to_string(),
                    live_before: x.map_or(0, |s| s.live_bytes),
                    live_after: y.map_or(0, |s| s.live_bytes),
                    peak_before: x.map_or(0, |s| s.peak_bytes),
                    peak_after: y.map_or(0, |s| s.peak_bytes),
                };
                if d.moved() > 0 {
                    movers.push(d);
                }
                let pinned = |s: Option<&&SiteFigures>| s.map_or(0, |s| s.pinned_free_bytes);
                if pinned(y) > 0 && pinned(x) == 0 {
                    new_c.push(culprit(y.unwrap()));
                }
                if pinned(x) > 0 && pinned(y) == 0 {
                    gone_c.push(culprit(x.unwrap()));
                }
            }
            changed = movers.len();
            // Stable sorts over site-ordered input: ties stay by site name.
            movers.sort_by_key(|q| std::cmp::Reverse(q.moved()));
            movers.truncate(limit(movers.len()));
            for c in [&mut new_c, &mut gone_c] {
                c.sort_by_key(|q| std::cmp::Reverse(q.pinned_free_bytes));
                c.truncate(limit(c.len()));
            }
        }
        _ if no_gpu => {}
        _ => notes.push(
            "call sites are compared only between two inputs of one kind that record who allocated: two snapshots (stacks), or two profiler traces with `Addr` (operators)"
                .into(),
        ),
    }
    if before.sites.is_some()
        && after.sites.is_some()
        && !no_gpu
        && before.metrics.source == Source::ProfilerTrace
    {
        notes.push(
            "profiler traces: a call site is the operator that allocated; without a segment layout no site can be shown pinning free memory"
                .into(),
        );
    }
    DiffReport {
        schema: DIFF_SCHEMA.into(),
        before: side(before),
        after: side(after),
        metrics,
        call_sites: movers,
        call_sites_changed: changed,
        new_culprits: new_c,
        gone_culprits: gone_c,
        segments: None,
        notes,
    }
}

fn side(i: &DiffInput) -> Side {
    Side {
        file: i.file.into(),
        device: i.device,
        devices: i.metrics.devices.iter().map(|d| d.device).collect(),
        source: i.metrics.source,
    }
}

fn culprit(s: &SiteFigures) -> Culprit {
    Culprit {
        site: s.site.clone(),
        pinned_free_bytes: s.pinned_free_bytes,
        live_bytes: s.live_bytes,
    }
}

fn metric_delta(m: MetricId, before: &Metrics, after: &Metrics) -> MetricDelta {
    let (b, a) = (before.get(m), after.get(m));
    let mut d = MetricDelta {
        metric: m,
        before: b.map(|x| x.value),
        after: a.map(|x| x.value),
        before_device: b.and_then(|x| x.device),
        after_device: a.and_then(|x| x.device),
        change: None,
        relative: None,
        direction: Direction::Unknown,
    };
    if let (Some(b), Some(a)) = (b, a) {
        let (bv, av) = (b.value.as_f64(), a.value.as_f64());
        let change = av - bv;
        d.change = Some(change);
        d.relative = (bv != 0.0).then(|| change / bv);
        // A change that prints as zero (a ratio within 0.05 points) is no
        // change, in every output.
        let negligible = m.unit() == Unit::Ratio && crate::core::units::pct_rounds_to_zero(change);
        d.direction = if change == 0.0 || negligible {
            Direction::Same
        } else if (change > 0.0) != m.lower_is_worse() {
            Direction::Worse
        } else {
            Direction::Better
        };
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::frames::CallSite;
    use crate::model::*;

    /// A one-device snapshot: one segment per entry of `segs`, each a list of
    /// (size, state, call site file or ""), plus a trace.
    pub(crate) fn snap(
        segs: &[&[(u64, BlockState, &str)]],
        trace: &[(Action, u64, u64, &str)],
    ) -> Snapshot {
        let mut i = Interner::new();
        let mut stack = |file: &str| {
            if file.is_empty() {
                return StackId::EMPTY;
            }
            let name = i.string("forward").unwrap();
            let fname = i.string(file).unwrap();
            let torch = i
                .string("/usr/lib/python3/site-packages/torch/nn/modules/linear.py")
                .unwrap();
            let lin = i.string("forward").unwrap();
            let inner = i.frame(Frame {
                filename: torch,
                line: 125,
                name: lin,
            });
            let user = i.frame(Frame {
                filename: fname,
                line: 10,
                name,
            });
            i.stack(vec![inner, user])
        };
        let mut segments = Vec::new();
        let mut addr = 1u64 << 32;
        for blocks in segs {
            let start = addr;
            let mut bs = Vec::new();
            for (size, state, file) in blocks.iter() {
                bs.push(Block {
                    address: addr,
                    size: *size,
                    requested_size: Some(*size),
                    state: *state,
                    frames: if *state == BlockState::ActiveAllocated {
                        stack(file)
                    } else {
                        StackId::EMPTY
                    },
                });
                addr += size;
            }
            segments.push(Segment {
                device: 0,
                address: start,
                total_size: addr - start,
                allocated_size: None,
                active_size: None,
                requested_size: None,
                stream: 0,
                segment_type: SegmentType::Large,
                pool_id: None,
                is_expandable: None,
                frames: StackId::EMPTY,
                blocks: bs,
            });
            addr += 1 << 30;
        }
        let events = trace
            .iter()
            .map(|(action, a, size, file)| TraceEvent::new(*action, *a, *size, 0, stack(file)))
            .collect();
        let mut s = Snapshot {
            segments,
            device_traces: Some(vec![events]),
            ..Snapshot::default()
        };
        i.finish(&mut s);
        s
    }

    use BlockState::{ActiveAllocated as A, Inactive as I};

    #[test]
    fn sites_skip_torch_frames_and_count_live_and_pinned_bytes() {
        let s = snap(
            &[
                &[(100, A, "/home/u/proj/train.py"), (50, I, "")],
                &[(30, A, "/home/u/proj/model.py"), (20, A, "")],
            ],
            &[],
        );
        let (sites, bad) = call_sites(&s, None);
        assert_eq!(bad, 0);
        let by: BTreeMap<_, _> = sites.iter().map(|x| (x.site.as_str(), x)).collect();
        let t = by["train.py (forward)"];
        assert_eq!(
            (t.live_bytes, t.peak_bytes, t.pinned_free_bytes),
            (100, 100, 50)
        );
        let m = by["model.py (forward)"];
        assert_eq!((m.live_bytes, m.pinned_free_bytes), (30, 0));
        assert_eq!(by[CallSite::unknown().label().as_str()].live_bytes, 20);
    }

    #[test]
    fn peaks_follow_the_trace_backwards_from_the_final_state() {
        let base = 1u64 << 32;
        // Final: train.py holds 100 at `base`. The trace allocates 400 from
        // model.py and frees it, then allocates the 100; a block from before
        // the trace (60) is freed too.
        let s = snap(
            &[&[(100, A, "/p/train.py"), (400, I, "")]],
            &[
                (Action::Alloc, base + 100, 400, "/p/model.py"),
                (Action::FreeRequested, base + 100, 400, "/p/other.py"),
                (Action::FreeCompleted, base + 100, 400, "/p/other.py"),
                (Action::FreeRequested, 7, 60, ""),
                (Action::FreeCompleted, 7, 60, ""),
                (Action::Alloc, base, 100, "/p/train.py"),
            ],
        );
        let (sites, bad) = call_sites(&s, Some(0));
        assert_eq!(bad, 0);
        let by: BTreeMap<_, _> = sites.iter().map(|x| (x.site.as_str(), x)).collect();
        assert_eq!(by["model.py (forward)"].peak_bytes, 400);
        assert_eq!(by["model.py (forward)"].live_bytes, 0);
        assert_eq!(by["train.py (forward)"].peak_bytes, 100);
        assert_eq!(by[BEFORE_TRACE].peak_bytes, 60);
        assert_eq!(by[BEFORE_TRACE].live_bytes, 0);
        // The free's own stack names no allocation site.
        assert!(!by.contains_key("other.py (forward)"));
    }

    #[test]
    fn diff_of_a_known_regression() {
        let before = snap(&[&[(100, A, "/p/a.py"), (10, I, "")]], &[]);
        let after = snap(
            &[
                &[(100, A, "/p/a.py"), (60, I, "")],
                &[(50, A, "/p/b.py"), (40, I, "")],
            ],
            &[],
        );
        let mb = Metrics::of_snapshot(&before, None).unwrap();
        let ma = Metrics::of_snapshot(&after, None).unwrap();
        let (sb, _) = call_sites(&before, None);
        let (sa, _) = call_sites(&after, None);
        let r = diff(
            &DiffInput {
                file: "before.json",
                device: None,
                metrics: &mb,
                sites: Some(&sb),
            },
            &DiffInput {
                file: "after.json",
                device: None,
                metrics: &ma,
                sites: Some(&sa),
            },
            10,
        );
        let get = |m| r.metrics.iter().find(|d| d.metric == m).unwrap();
        let pr = get(MetricId::PeakReserved);
        assert_eq!(pr.before, Some(Quantity::Bytes(110)));
        assert_eq!(pr.after, Some(Quantity::Bytes(250)));
        assert_eq!(pr.change, Some(140.0));
        assert_eq!(pr.direction, Direction::Worse);
        assert_eq!(get(MetricId::LargestGap).direction, Direction::Better);
        assert_eq!(get(MetricId::OomEvents).direction, Direction::Same);
        assert_eq!(r.call_sites.len(), 1);
        assert_eq!(r.call_sites[0].site, "b.py (forward)");
        assert_eq!(r.call_sites[0].live_change(), 50);
        assert_eq!(r.new_culprits.len(), 1);
        assert_eq!(r.new_culprits[0].site, "b.py (forward)");
        assert_eq!(r.new_culprits[0].pinned_free_bytes, 40);
        assert!(r.gone_culprits.is_empty());
        assert_eq!(r.call_sites_changed, 1);
    }

    #[test]
    fn segments_of_one_run_only_are_matched_by_address_and_size() {
        // Segment 1 is the same in both; segment 2 keeps its address but not
        // its size; AFTER has a third.
        let before = snap(
            &[
                &[(100, A, "/p/a.py"), (50, I, "")],
                &[(30, A, "/p/model.py"), (20, A, ""), (10, I, "")],
            ],
            &[],
        );
        let after = snap(
            &[
                &[(100, A, "/p/a.py"), (50, I, "")],
                &[(40, A, "/p/b.py"), (30, I, "")],
                &[(200, A, "/p/c.py"), (300, I, "")],
            ],
            &[],
        );
        assert_eq!(before.segments[1].address, after.segments[1].address);
        let d = segment_diff(&before, None, &after, None, 0);
        assert_eq!(d.in_both, 1);
        assert_eq!((d.only_before_count, d.only_before_bytes), (1, 60));
        assert_eq!((d.only_after_count, d.only_after_bytes), (2, 570));
        let b = &d.only_before[0];
        assert_eq!(
            (
                b.address,
                b.total_size,
                b.allocated_bytes,
                b.live_blocks,
                b.free_bytes
            ),
            (before.segments[1].address, 60, 50, 2, 10)
        );
        assert_eq!(
            (b.top_site.as_deref(), b.top_site_bytes),
            (Some("model.py:10 (forward)"), 30)
        );
        assert_eq!((b.segment_type.as_str(), b.pool_id), ("large", (0, 0)));
        // The largest first.
        let sizes: Vec<u64> = d.only_after.iter().map(|x| x.total_size).collect();
        assert_eq!(sizes, vec![500, 70]);
        assert_eq!(
            d.only_after[0].top_site.as_deref(),
            Some("c.py:10 (forward)")
        );
        // `top` bounds the lists, not the counts.
        let t = segment_diff(&before, None, &after, None, 1);
        assert_eq!(
            (t.only_after.len(), t.only_after_count, t.only_after_bytes),
            (1, 2, 570)
        );
        assert_eq!(t.only_after[0], d.only_after[0]);
        // A run against itself: everything in both.
        let same = segment_diff(&after, None, &after, None, 0);
        assert_eq!(
            (same.in_both, same.only_before_count, same.only_after_count),
            (3, 0, 0)
        );
        // A device with no segments: everything of the other side is its own.
        let none = segment_diff(&after, Some(0), &after, Some(4), 0);
        assert_eq!(
            (none.in_both, none.only_before_count, none.only_after_count),
            (0, 3, 0)
        );
    }

    #[test]
    fn a_segment_without_live_blocks_has_no_top_site_and_ties_go_by_name() {
        let before = snap(&[&[(64, I, "")]], &[]);
        let after = snap(
            &[&[(10, A, "/p/z.py"), (10, A, "/p/y.py"), (5, I, "")]],
            &[],
        );
        let d = segment_diff(&before, None, &after, None, 0);
        assert_eq!(d.only_before[0].top_site, None);
        assert_eq!(d.only_before[0].top_site_bytes, 0);
        assert_eq!(
            (
                d.only_after[0].top_site.as_deref(),
                d.only_after[0].top_site_bytes
            ),
            (Some("y.py:10 (forward)"), 10)
        );
    }

    #[test]
    fn sites_are_named_like_every_other_command() {
        let mut i = Interner::new();
        let mut fr = |name: &str, file: &str, line| {
            let (name, filename) = (i.string(name).unwrap(), i.string(file).unwrap());
            i.frame(Frame {
                filename,
                line,
                name,
            })
        };
        let cpp = vec![
            fr("torch::unwind::unwind()", "??", 0),
            fr(
                "at::_ops::sum_dim_IntList::call(at::Tensor const&)",
                "??",
                0,
            ),
            fr(
                "torch::autograd::Engine::thread_main(std::shared_ptr<x>)",
                "??",
                0,
            ),
        ];
        let py = vec![
            fr(
                "forward",
                "/x/site-packages/torch/nn/modules/linear.py",
                125,
            ),
            fr("forward", "/home/u/proj/model.py", 524),
        ];
        let (cpp, py) = (i.stack(cpp), i.stack(py));
        let mut s = Snapshot::default();
        i.finish(&mut s);
        assert_eq!(site_of(&s, cpp), "aten::sum_dim_IntList (no Python frame)");
        assert_eq!(site_of(&s, py), "model.py (forward)");
        // The same frame `culprits` names, without its line.
        assert_eq!(
            crate::analysis::frames::call_site(&s, py).label(),
            "model.py:524 (forward)"
        );
        assert_eq!(site_of(&s, StackId::EMPTY), CallSite::unknown().label());
    }
}
