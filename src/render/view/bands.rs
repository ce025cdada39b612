//! The allocations as bands (memory_viz's "Active Memory Timeline"): for a
//! window of events, the largest allocations live in it one band each, in
//! the order they were allocated, and the rest of the allocated block bytes
//! as one aggregate band beneath them.
//!
//! Everything comes from the replay: the intervals are
//! [`crate::timeline::Lifetime`]s and the aggregate is the series' `active`
//! bytes less the bands drawn, at real samples of the series (evenly spaced,
//! plus the edges of every band drawn, so each band's rise and fall is
//! drawn where it happened). The page stacks them; it computes nothing.
//!
//! A page carries tiers of windows: tier 0 the whole trace, tier `t` about
//! `8^t` windows, each twice the stride wide (so any view a stride wide
//! fits in one), as far as the byte budget allows; a served page asks
//! `/api/bands` for a zoomed window instead.

use super::PageStacks;
use crate::analysis::frames::{FrameFacts, frame_display};
use crate::core::serial::Seq;
use crate::model::{FrameId, Snapshot, StackId};
use crate::timeline::{Lifetime, Lifetimes, Series};
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How many bands a window draws one by one.
pub const TOP: usize = 64;
/// Evenly spaced samples a window carries (before the bands' edges).
const POINTS: usize = 400;
/// About how many bytes of JSON a window takes.
const BYTES_PER_WINDOW: usize = POINTS * 24 + TOP * 4 * 24 + TOP * 80;

/// The distinct stacks a set of blocks names: its call site and the frames
/// the viewer shows (the filter `culprits` uses), each listed once.
pub struct Stacks<'a> {
    facts: FrameFacts<'a>,
    list: Vec<Value>,
    named: Named,
}

impl<'a> Stacks<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        Stacks {
            facts: FrameFacts::new(snap),
            list: Vec::new(),
            named: Named::default(),
        }
    }

    /// The index of `id` in the list; `None` for no stack.
    pub fn of(&mut self, id: StackId) -> Option<usize> {
        let i = self.named.of(id)?;
        if i == self.list.len() {
            self.list.push(stack_value(&self.facts, id));
        }
        Some(i)
    }

    pub fn into_value(self) -> Value {
        Value::Array(self.list)
    }
}

/// The stacks a list names, in the order first named.
#[derive(Default)]
pub(super) struct Named {
    pub ids: Vec<StackId>,
    index: HashMap<StackId, usize>,
}

impl Named {
    /// The index of `id` in the list; `None` for no stack.
    pub fn of(&mut self, id: StackId) -> Option<usize> {
        if id == StackId::EMPTY {
            return None;
        }
        let ids = &mut self.ids;
        Some(*self.index.entry(id).or_insert_with(|| {
            ids.push(id);
            ids.len() - 1
        }))
    }
}

/// One entry of a `stacks` list: the stack's call site and the frames the
/// viewer shows. `facts` reads each frame's kind and whether the viewer shows it once,
/// however many stacks hold the frame.
pub fn stack_value(facts: &FrameFacts, id: StackId) -> Value {
    serde_json::to_value(StackEntry { facts, id }).expect("a stack serializes")
}

/// [`stack_value`] written as it is serialized: a page's list of a
/// thousand deep stacks is hundreds of thousands of frame labels, each
/// written into the output rather than made a string first.
pub struct StackEntry<'f, 'a> {
    pub facts: &'f FrameFacts<'a>,
    pub id: StackId,
}

impl Serialize for StackEntry<'_, '_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let facts = self.facts;
        let snap = facts.snap();
        let kept = facts.filtered(self.id);
        let mut m = ser.serialize_map(Some(2))?;
        m.serialize_entry("site", &facts.call_site_in(&kept).label())?;
        let labels = kept.iter().map(|&f| FrameText(snap, f));
        m.serialize_entry("frames", &Seq::new(labels))?;
        m.end()
    }
}

/// A frame's label as [`frame_label`] (short file names) writes it.
struct FrameText<'a>(&'a Snapshot, FrameId);

impl Serialize for FrameText<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(&frame_display(self.0, self.1, false))
    }
}

/// As `stats` prints a stream.
pub fn stream_text(stream: i64) -> String {
    if stream == 0 {
        "default".to_string()
    } else {
        format!("{stream:#x}")
    }
}

/// The `TOP` largest allocations live in samples `lo..hi`, in allocation
/// order.
fn largest_in(lives: &Lifetimes, lo: usize, hi: usize) -> Vec<Lifetime> {
    let mut heap = Largest::new();
    for i in 0..lives.len() {
        // A lifetime no larger than the heap's smallest, allocated after
        // it, ranks below it: read back only those that may enter.
        let enters = || heap.len() < TOP || heap.peek().is_some_and(|m| lives.size(i) > m.0.0);
        if overlaps(lives.events(i), lo, hi) && enters() {
            push_top(&mut heap, i, &lives.get(i));
        }
    }
    sorted(heap)
}

/// The samples a lifetime is live in: sample `k` holds after event `k − 1`.
fn live_samples(l: &Lifetime, len: usize) -> (usize, usize) {
    live_span((l.alloc(), l.end()), len)
}

/// [`live_samples`] of a lifetime's allocating event and end.
fn live_span((alloc, end): (Option<u32>, Option<u32>), len: usize) -> (usize, usize) {
    let a = alloc.map_or(0, |a| a as usize + 1);
    let b = end.map_or(len, |e| (e as usize + 1).min(len));
    (a.min(len), b.max(a.min(len)))
}

/// Whether a lifetime of allocating event and end `events` is live in
/// any of samples `lo..hi`.
fn overlaps(events: (Option<u32>, Option<u32>), lo: usize, hi: usize) -> bool {
    let (a, b) = live_span(events, usize::MAX);
    a < hi && b > lo
}

/// One window of bands, as the data writes it (docs/viewer.md).
#[derive(Serialize)]
struct Window {
    from: i64,
    to: i64,
    event: Vec<i64>,
    rest: Vec<u64>,
    bands: Vec<Band>,
}

/// `[allocating event, end, size, requested, stack, free_completed,
/// address, stream]`.
type Band = (
    i64,
    Option<u32>,
    u64,
    u64,
    Option<usize>,
    Option<u32>,
    String,
    String,
);

/// One window: samples `lo..hi` of `series`, the bands of `chosen` (in
/// allocation order).
fn window(
    series: &Series,
    chosen: &[Lifetime],
    (lo, hi): (usize, usize),
    stack_of: &mut dyn FnMut(StackId) -> Option<usize>,
) -> Window {
    let len = series.len();
    let mut at: Vec<usize> = (0..POINTS)
        .map(|k| lo + k * (hi - lo - 1) / (POINTS - 1).max(1))
        .collect();
    for l in chosen {
        let (a, b) = live_samples(l, len);
        for s in [a.wrapping_sub(1), a, b.wrapping_sub(1), b] {
            if (lo..hi).contains(&s) {
                at.push(s);
            }
        }
    }
    at.sort_unstable();
    at.dedup();
    let mut events = Vec::with_capacity(at.len());
    let mut rest = Vec::with_capacity(at.len());
    for sample in series.at_ascending(&at) {
        let e = sample.event.map_or(-1, i64::from);
        let shown: u64 = chosen
            .iter()
            .filter(|l| l.live_after(e))
            .map(|l| l.size)
            .sum();
        events.push(e);
        rest.push(sample.active.saturating_sub(shown));
    }
    let bands = chosen
        .iter()
        .map(|l| {
            (
                l.alloc().map_or(-1, i64::from),
                l.end(),
                l.size,
                l.requested,
                stack_of(l.frames),
                l.freed(),
                format!("{:#x}", l.address),
                stream_text(l.stream),
            )
        })
        .collect();
    Window {
        from: lo as i64 - 1,
        to: hi as i64 - 2,
        event: events,
        rest,
        bands,
    }
}

/// The slots of each tier a page carries, within `budget` bytes and
/// `max_tiers` tiers (tier 0, one slot, always), for a series of `len`
/// samples. Tier 0 is one window; a tier of `slots` slots has `slots − 1`
/// windows of two slots ([`spans`]).
fn tier_slots(len: usize, budget: usize, max_tiers: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if len == 0 {
        return out;
    }
    let mut used = 0;
    let mut slots = 1usize;
    while out.len() < max_tiers.max(1) {
        let spans = spans(len, slots);
        let cost = spans.len() * BYTES_PER_WINDOW;
        if !out.is_empty() && (used + cost > budget || spans.iter().any(|(a, b)| b - a < 4)) {
            break;
        }
        used += cost;
        out.push(slots);
        // A window wider than its points is what finer tiers refine.
        if len / slots <= POINTS {
            break;
        }
        slots *= 8;
    }
    out
}

/// The sample spans of a tier's windows.
fn spans(len: usize, slots: usize) -> Vec<(usize, usize)> {
    if slots == 1 {
        vec![(0, len)]
    } else {
        (0..slots - 1).map(|j| span(len, slots, j)).collect()
    }
}

/// Window `j` of a tier of `slots` slots (more than one): two slots wide.
fn span(len: usize, slots: usize, j: usize) -> (usize, usize) {
    (j * len / slots, ((j + 2) * len / slots).min(len))
}

/// The largest lifetimes of one window so far, as a min-heap: its top is
/// the one to drop when a larger one comes.
type Largest = BinaryHeap<Reverse<Ranked>>;

/// A lifetime ranked by size, then by allocation: of two the same size,
/// the one allocated first ranks higher.
#[derive(Clone, Copy)]
struct Ranked(u64, Reverse<usize>, Lifetime);

impl Ranked {
    fn key(&self) -> (u64, Reverse<usize>) {
        (self.0, self.1)
    }
}

impl PartialEq for Ranked {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Ranked {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}

fn push_top(heap: &mut Largest, i: usize, l: &Lifetime) {
    let item = Reverse(Ranked(l.size, Reverse(i), *l));
    if heap.len() < TOP {
        heap.push(item);
    } else if heap.peek().is_some_and(|m| item < *m) {
        heap.pop();
        heap.push(item);
    }
}

/// A heap's lifetimes in allocation order.
fn sorted(heap: Largest) -> Vec<Lifetime> {
    let mut v: Vec<Ranked> = heap.into_iter().map(|Reverse(r)| r).collect();
    v.sort_unstable_by_key(|r| r.1.0);
    v.into_iter().map(|r| r.2).collect()
}

/// The largest lifetimes of every window of a page's tiers, gathered one
/// lifetime at a time and in any order: a page holds its windows' bands,
/// never every allocation of the device.
pub struct Chosen {
    len: usize,
    /// Each tier's slots and its windows' heaps.
    tiers: Vec<(usize, Vec<Largest>)>,
}

impl Chosen {
    /// The tiers of a series of `len` samples within `budget` bytes and
    /// `max_tiers` tiers, none chosen yet.
    pub fn new(len: usize, budget: usize, max_tiers: usize) -> Chosen {
        let tiers = tier_slots(len, budget, max_tiers)
            .into_iter()
            .map(|slots| {
                let windows = spans(len, slots).len();
                (slots, (0..windows).map(|_| Largest::new()).collect())
            })
            .collect();
        Chosen { len, tiers }
    }

    /// Lifetime `i` (its index in [`crate::timeline::Replayer::lifetimes`]).
    pub fn add(&mut self, i: usize, l: &Lifetime) {
        let len = self.len;
        for (slots, heaps) in &mut self.tiers {
            let slots = *slots;
            if slots == 1 {
                if overlaps((l.alloc(), l.end()), 0, len) {
                    push_top(&mut heaps[0], i, l);
                }
                continue;
            }
            let (a, b) = live_samples(l, len);
            if a >= b {
                continue;
            }
            // Slot edges round down: look one window further each side.
            let n = slots - 1;
            let slot_of = |s: usize| (s * slots / len).min(slots - 1);
            let (ka, kb) = (slot_of(a), slot_of(b - 1));
            for (j, heap) in heaps
                .iter_mut()
                .enumerate()
                .take((kb + 1).min(n - 1) + 1)
                .skip(ka.saturating_sub(2))
            {
                let (lo, hi) = span(len, slots, j);
                if a < hi && b > lo {
                    push_top(heap, i, l);
                }
            }
        }
    }

    /// [`Chosen::add`] of every lifetime of `lives`, each at its index.
    pub fn of_all(mut self, lives: &Lifetimes) -> Chosen {
        for i in 0..lives.len() {
            self.add(i, &lives.get(i));
        }
        self
    }
}

/// The tiers of windows a page carries ([`Chosen`]), naming their stacks
/// in the page's list: each window made as it is written.
pub struct Tiers<'a> {
    pub stacks: &'a PageStacks<'a>,
    pub series: &'a Series,
    pub chosen: Chosen,
}

impl Serialize for Tiers<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(Some(1))?;
        m.serialize_entry("tiers", &TierList(self))?;
        m.end()
    }
}

/// The `tiers` of [`Tiers`].
struct TierList<'a>(&'a Tiers<'a>);

impl Serialize for TierList<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let series = t.series;
        let mut stack_of = |id| t.stacks.of(id);
        let len = series.len();
        let mut seq = ser.serialize_seq(None)?;
        for (slots, heaps) in &t.chosen.tiers {
            let windows = (spans(len, *slots).into_iter().zip(heaps))
                .map(|(span, heap)| window(series, &sorted(heap.clone()), span, &mut stack_of));
            // Each window serialized as it is made: a tier is never held.
            seq.serialize_element(&Seq::new(windows))?;
        }
        seq.end()
    }
}

/// The bands of events `from..=to` (`-1` = the start), with their own
/// stacks: what a served page asks for when zoomed in.
pub fn window_of(snap: &Snapshot, series: &Series, lives: &Lifetimes, from: i64, to: i64) -> Value {
    let n = series.len() as i64;
    if n == 0 {
        return json!({"from": from, "to": to, "event": [], "rest": [], "bands": [], "stacks": []});
    }
    let lo = (from + 1).clamp(0, n - 1) as usize;
    let hi = (to + 2).clamp(lo as i64 + 1, n) as usize;
    let chosen = largest_in(lives, lo, hi);
    let mut stacks = Stacks::new(snap);
    let mut w = serde_json::to_value(window(series, &chosen, (lo, hi), &mut |id| stacks.of(id)))
        .expect("a window serializes");
    w["stacks"] = stacks.into_value();
    w
}
