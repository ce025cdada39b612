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

use crate::analysis::frames::FrameFacts;
use crate::analysis::metrics::{MetricId, Metrics, Quantity, Source, Unit};
use crate::input::profiler::ProfilerTrace;
use crate::model::{BlockState, Segment, Snapshot, StackId, TraceEvent};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

mod segments;
pub use segments::*;

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
    let facts = FrameFacts::new(snap);
    let mut site = |id: StackId| -> String {
        (names.entry(id))
            .or_insert_with(|| site_of(&facts, id))
            .clone()
    };
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
                blocks.insert(e.addr(), (s, e.size, false));
            }
            Action::FreeRequested => match blocks.get_mut(&e.addr()) {
                Some((s, size, freed)) if !*freed => {
                    *freed = true;
                    step(s, -(*size as i128));
                }
                Some(_) => {}
                None => {
                    step(BEFORE_TRACE, -(e.size as i128));
                    blocks.insert(e.addr(), (BEFORE_TRACE.into(), e.size, true));
                }
            },
            Action::FreeCompleted => match blocks.remove(&e.addr()) {
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
fn site_of(facts: &FrameFacts, id: StackId) -> String {
    facts.call_site(id).label_without_line()
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
mod tests;
