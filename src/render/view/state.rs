//! The segment map of one moment (`state` in docs/viewer.md), serialized
//! straight into the writer: a scrub's answer holds thousands of segments
//! and tens of thousands of blocks, which as a `serde_json::Value` tree were
//! as many small allocations, made, written and freed per answer. The bytes
//! are those serde_json writes for the same values.

use super::bands::{Named, StackEntry, stream_text};
use super::event_num;
use crate::analysis::frames::FrameFacts;
use crate::core::style::Style;
use crate::model::{Block, BlockState, Segment, SegmentType, Snapshot, StackId, TraceEvent};
use crate::timeline::{MomentState, Origin};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

/// The segment map of one moment: segments by address, each with its
/// blocks (offset in the segment, size, requested size, state, stack,
/// allocating event), the distinct stacks the blocks name (call site and
/// the frames the viewer shows; in the page's list instead for a page's
/// key moment), and where the largest free block is.
pub struct StateJson<'a> {
    pub style: &'a Style,
    pub snap: &'a Snapshot,
    pub state: &'a MomentState,
    /// Where the blocks' stacks are listed.
    pub stacks: KeptStacks<'a>,
}

/// Where a [`StateJson`]'s blocks name their stacks.
#[derive(Clone, Copy)]
pub enum KeptStacks<'a> {
    /// In a list of the state's own, each entry kept as compact JSON text
    /// for later states: a server's scrubs, each answer compact JSON.
    Texts(&'a StackTexts),
    /// In the page's one list, written once after every device: a page's
    /// key moments.
    Page(&'a PageStacks<'a>),
}

/// Each stack's entry of a state's `stacks` list as compact JSON text, made
/// once and reused by every later scrub that names the stack: a deep stack
/// is hundreds of frame labels to format, most of a scrub's time on states
/// that name hundreds of such stacks. Compact writers only (a pretty one
/// would not indent the text).
#[derive(Default)]
pub struct StackTexts(RefCell<HashMap<StackId, Box<RawValue>>>);

/// The stacks a page's document names, listed once in its `stacks`: every
/// stack index of the document (a key moment's blocks, a band) is a place
/// in that list. A page's key moments (up to a hundred OOMs a device) name
/// the same deep stacks again and again; a list of their own each wrote
/// each entry as many times, most of such a page's bytes. Serialized, it
/// is the list, each entry made as it is written.
pub struct PageStacks<'a> {
    facts: FrameFacts<'a>,
    named: RefCell<Named>,
}

impl<'a> PageStacks<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        PageStacks {
            facts: FrameFacts::new(snap),
            named: RefCell::default(),
        }
    }

    /// The index of `id` in the list; `None` for no stack.
    pub fn of(&self, id: StackId) -> Option<usize> {
        self.named.borrow_mut().of(id)
    }
}

impl Serialize for PageStacks<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let named = self.named.borrow();
        let mut seq = ser.serialize_seq(Some(named.ids.len()))?;
        for &id in &named.ids {
            seq.serialize_element(&StackEntry {
                facts: &self.facts,
                id,
            })?;
        }
        seq.end()
    }
}

/// A state's own `stacks` list, kept as text for the next state.
struct StackList<'a> {
    snap: &'a Snapshot,
    named: &'a Named,
    texts: &'a StackTexts,
}

impl Serialize for StackList<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.named.ids.len()))?;
        let mut texts = self.texts.0.borrow_mut();
        // Made at the first stack not written yet: most scrubs name none.
        let mut facts = None;
        for &id in &self.named.ids {
            let text = texts.entry(id).or_insert_with(|| {
                let facts = facts.get_or_insert_with(|| FrameFacts::new(self.snap));
                let v = serde_json::to_string(&StackEntry { facts, id });
                RawValue::from_string(v.expect("a stack serializes")).expect("JSON text")
            });
            seq.serialize_element(&**text)?;
        }
        seq.end()
    }
}

impl Serialize for StateJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (snap, st) = (self.snap, self.state);
        let gap =
            crate::timeline::largest_free_gap_segment(st).map(|(s, b)| (s.address, b.address));
        let largest_gap = gap.and_then(|(sa, ba)| {
            let si = st.segments.iter().position(|s| s.address == sa)?;
            let bi = st.segments[si]
                .blocks
                .iter()
                .position(|b| b.address == ba)?;
            Some([si, bi])
        });
        let own = RefCell::new(Named::default());
        let stacks = match self.stacks {
            KeptStacks::Page(page) => &page.named,
            KeptStacks::Texts(_) => &own,
        };
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("device", &st.device)?;
        m.serialize_entry("event", &event_num(st.at))?;
        m.serialize_entry("time_us", &st.time_us)?;
        m.serialize_entry("failed_request", &st.failed_request)?;
        m.serialize_entry(
            "failed_request_text",
            &st.failed_request.map(|b| self.style.bytes(b)),
        )?;
        m.serialize_entry("largest_gap", &largest_gap)?;
        m.serialize_entry("segments", &Segments { snap, st, stacks })?;
        if let KeptStacks::Texts(texts) = self.stacks {
            m.serialize_entry(
                "stacks",
                &StackList {
                    snap,
                    named: &own.borrow(),
                    texts,
                },
            )?;
        }
        m.end()
    }
}

struct Segments<'a> {
    snap: &'a Snapshot,
    st: &'a MomentState,
    stacks: &'a RefCell<Named>,
}

impl Serialize for Segments<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.st.segments.len()))?;
        for s in &self.st.segments {
            seq.serialize_element(&SegmentJson { of: self, s })?;
        }
        seq.end()
    }
}

struct SegmentJson<'a> {
    of: &'a Segments<'a>,
    s: &'a Segment,
}

impl Serialize for SegmentJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.s;
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("address", &Text(format_args!("{:#x}", s.address)))?;
        m.serialize_entry("size", &s.total_size)?;
        // As `stats` prints a stream (a pointer may pass 2^53, which a
        // JavaScript number cannot hold).
        m.serialize_entry("stream", &stream_text(s.stream))?;
        m.serialize_entry("pool", &Text(format_args!("{:?}", s.pool())))?;
        m.serialize_entry("place", &Text(Place(s)))?;
        m.serialize_entry("small", &(s.segment_type == SegmentType::Small))?;
        m.serialize_entry("expandable", &s.expandable())?;
        m.serialize_entry("blocks", &Blocks(self))?;
        m.end()
    }
}

struct Blocks<'a>(&'a SegmentJson<'a>);

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (of, s) = (self.0.of, self.0.s);
        let trace = of.snap.trace_of(of.st.device);
        let mut stacks = of.stacks.borrow_mut();
        let mut seq = ser.serialize_seq(Some(s.blocks.len()))?;
        for b in &s.blocks {
            let live = b.state != BlockState::Inactive;
            let origin = of.st.origins.get(&b.address).copied();
            let code: u8 = match b.state {
                BlockState::ActiveAllocated => 0,
                BlockState::ActivePendingFree => 1,
                BlockState::Inactive => 2,
            };
            let born = match origin {
                Some(Origin::Event(i)) if live => Some(i),
                _ => None,
            };
            seq.serialize_element(&(
                b.address - s.address,
                b.size,
                live.then_some(b.requested_size),
                code,
                stacks.of(block_stack(b, origin, trace)),
                born,
            ))?;
        }
        seq.end()
    }
}

/// A string written from its `Display`, as serde_json writes the string
/// it makes, without making it.
struct Text<T>(T);

impl<T: fmt::Display> Serialize for Text<T> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(&self.0)
    }
}

/// Where a segment's memory comes from, as the pool/stream filter names it.
pub(super) struct Place<'a>(pub &'a Segment);

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let s = self.0;
        let kind = if s.segment_type == SegmentType::Small {
            "small"
        } else {
            "large"
        };
        match s.pool() {
            (0, 0) => write!(f, "{kind} pool")?,
            (a, b) => write!(f, "private pool ({a}, {b}), {kind}")?,
        }
        write!(f, " · stream {}", stream_text(s.stream))
    }
}

/// The stack a block of a moment is shown with: its own, else the stack
/// of the event that allocated it (as `culprits` reads it); none for a free
/// block.
pub(super) fn block_stack(b: &Block, origin: Option<Origin>, trace: &[TraceEvent]) -> StackId {
    if b.state == BlockState::Inactive {
        StackId::EMPTY
    } else if b.frames != StackId::EMPTY {
        b.frames
    } else {
        match origin {
            Some(Origin::Event(i)) => trace.get(i as usize).map_or(StackId::EMPTY, |e| e.frames),
            _ => StackId::EMPTY,
        }
    }
}
