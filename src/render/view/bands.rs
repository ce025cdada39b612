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

use crate::analysis::frames::{FrameFacts, frame_label};
use crate::core::serial::Seq;
use crate::model::{Snapshot, StackId};
use crate::timeline::{Lifetime, Series};
use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};
use std::cell::RefCell;
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

    /// The stacks listed so far, in their order.
    pub fn list(&self) -> &[Value] {
        &self.list
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
    let snap = facts.snap();
    let kept = facts.filtered(id);
    let frames: Vec<String> = (kept.iter())
        .map(|&f| frame_label(snap, f, false))
        .collect();
    json!({"site": facts.call_site_in(&kept).label(), "frames": frames})
}

/// As `stats` prints a stream.
pub fn stream_text(stream: i64) -> String {
    if stream == 0 {
        "default".to_string()
    } else {
        format!("{stream:#x}")
    }
}

/// The `TOP` largest allocations live in samples `lo..hi`, by index into
/// `lives`, in allocation order.
fn largest_in(lives: &[Lifetime], lo: usize, hi: usize) -> Vec<usize> {
    let mut heap: BinaryHeap<Reverse<(u64, Reverse<usize>)>> = BinaryHeap::new();
    for (i, l) in lives.iter().enumerate() {
        if overlaps(l, lo, hi) {
            push_top(&mut heap, l.size, i);
        }
    }
    sorted(heap)
}

fn push_top(heap: &mut BinaryHeap<Reverse<(u64, Reverse<usize>)>>, size: u64, i: usize) {
    let item = Reverse((size, Reverse(i)));
    if heap.len() < TOP {
        heap.push(item);
    } else if heap.peek().is_some_and(|m| item < *m) {
        heap.pop();
        heap.push(item);
    }
}

fn sorted(heap: BinaryHeap<Reverse<(u64, Reverse<usize>)>>) -> Vec<usize> {
    let mut v: Vec<usize> = heap.into_iter().map(|Reverse((_, Reverse(i)))| i).collect();
    v.sort_unstable();
    v
}

/// The samples a lifetime is live in: sample `k` holds after event `k − 1`.
fn live_samples(l: &Lifetime, len: usize) -> (usize, usize) {
    let a = l.alloc().map_or(0, |a| a as usize + 1);
    let b = l.end().map_or(len, |e| (e as usize + 1).min(len));
    (a.min(len), b.max(a.min(len)))
}

fn overlaps(l: &Lifetime, lo: usize, hi: usize) -> bool {
    let (a, b) = live_samples(l, usize::MAX);
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

/// One window: samples `lo..hi` of `series`, the bands of `chosen`.
fn window(
    series: &Series,
    lives: &[Lifetime],
    chosen: &[usize],
    (lo, hi): (usize, usize),
    stacks: &mut Stacks,
) -> Window {
    let len = series.len();
    let mut at: Vec<usize> = (0..POINTS)
        .map(|k| lo + k * (hi - lo - 1) / (POINTS - 1).max(1))
        .collect();
    for &i in chosen {
        let (a, b) = live_samples(&lives[i], len);
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
    for &s in &at {
        let sample = series.at(s);
        let e = sample.event.map_or(-1, i64::from);
        let shown: u64 = chosen
            .iter()
            .map(|&i| &lives[i])
            .filter(|l| l.live_after(e))
            .map(|l| l.size)
            .sum();
        events.push(e);
        rest.push(sample.active.saturating_sub(shown));
    }
    let bands = chosen
        .iter()
        .map(|&i| {
            let l = &lives[i];
            (
                l.alloc().map_or(-1, i64::from),
                l.end(),
                l.size,
                l.requested,
                stacks.of(l.frames),
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

/// The tiers of windows a page carries, within `budget` bytes and
/// `max_tiers` tiers (tier 0 always), with the stacks they name: each
/// window made as it is written.
pub struct Tiers<'a> {
    pub snap: &'a Snapshot,
    pub series: &'a Series,
    pub lives: &'a [Lifetime],
    pub budget: usize,
    pub max_tiers: usize,
}

impl Serialize for Tiers<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let stacks = RefCell::new(Stacks::new(self.snap));
        let mut m = ser.serialize_map(Some(2))?;
        m.serialize_entry("tiers", &TierList(self, &stacks))?;
        m.serialize_entry("stacks", stacks.borrow().list())?;
        m.end()
    }
}

/// The `tiers` of [`Tiers`], naming their stacks in the second field.
struct TierList<'a>(&'a Tiers<'a>, &'a RefCell<Stacks<'a>>);

impl Serialize for TierList<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let (series, lives) = (t.series, t.lives);
        let mut stacks = self.1.borrow_mut();
        let len = series.len();
        let mut seq = ser.serialize_seq(None)?;
        if len == 0 {
            return seq.end();
        }
        let (mut used, mut made) = (0, 0);
        let mut slots = 1usize;
        while made < t.max_tiers.max(1) {
            // Tier 0 is one window; tier t has `slots − 1` windows of two slots.
            let spans: Vec<(usize, usize)> = if slots == 1 {
                vec![(0, len)]
            } else {
                (0..slots - 1)
                    .map(|j| (j * len / slots, ((j + 2) * len / slots).min(len)))
                    .collect()
            };
            let cost = spans.len() * BYTES_PER_WINDOW;
            if made > 0 && (used + cost > t.budget || spans.iter().any(|(a, b)| b - a < 4)) {
                break;
            }
            used += cost;
            let chosen = if slots == 1 {
                vec![largest_in(lives, 0, len)]
            } else {
                largest_per_window(lives, len, slots)
            };
            let windows = spans
                .iter()
                .zip(&chosen)
                .map(|(&span, c)| window(series, lives, c, span, &mut stacks));
            // Each window serialized as it is made: a tier is never held.
            seq.serialize_element(&Seq::new(windows))?;
            made += 1;
            // A window wider than its points is what finer tiers refine.
            if len / slots <= POINTS {
                break;
            }
            slots *= 8;
        }
        seq.end()
    }
}

/// The largest lifetimes of one window so far, as a min-heap of (size,
/// index): its top is the one to drop when a larger one comes.
type Largest = BinaryHeap<Reverse<(u64, Reverse<usize>)>>;

/// [`largest_in`] for every window of a tier at once: each lifetime goes
/// to the windows it overlaps.
fn largest_per_window(lives: &[Lifetime], len: usize, slots: usize) -> Vec<Vec<usize>> {
    let n = slots - 1;
    let mut heaps: Vec<Largest> = (0..n).map(|_| BinaryHeap::new()).collect();
    let slot_of = |s: usize| (s * slots / len).min(slots - 1);
    for (i, l) in lives.iter().enumerate() {
        let (a, b) = live_samples(l, len);
        if a >= b {
            continue;
        }
        // Slot edges round down: look one window further each side.
        let (ka, kb) = (slot_of(a), slot_of(b - 1));
        for (j, heap) in heaps
            .iter_mut()
            .enumerate()
            .take((kb + 1).min(n - 1) + 1)
            .skip(ka.saturating_sub(2))
        {
            let span = (j * len / slots, ((j + 2) * len / slots).min(len));
            if a < span.1 && b > span.0 {
                push_top(heap, l.size, i);
            }
        }
    }
    heaps.into_iter().map(sorted).collect()
}

/// The bands of events `from..=to` (`-1` = the start), with their own
/// stacks: what a served page asks for when zoomed in.
pub fn window_of(
    snap: &Snapshot,
    series: &Series,
    lives: &[Lifetime],
    from: i64,
    to: i64,
) -> Value {
    let n = series.len() as i64;
    if n == 0 {
        return json!({"from": from, "to": to, "event": [], "rest": [], "bands": [], "stacks": []});
    }
    let lo = (from + 1).clamp(0, n - 1) as usize;
    let hi = (to + 2).clamp(lo as i64 + 1, n) as usize;
    let chosen = largest_in(lives, lo, hi);
    let mut stacks = Stacks::new(snap);
    let mut w = serde_json::to_value(window(series, lives, &chosen, (lo, hi), &mut stacks))
        .expect("a window serializes");
    w["stacks"] = stacks.into_value();
    w
}
