//! The typed model of a memory snapshot: what every later stage reads.
//!
//! Owns: segments, blocks, trace events, allocator settings, annotations and
//! the interned string/frame/stack tables. It is a normalised form of every
//! PyTorch version's dict (legacy `history` folded into `frames` and
//! `requested_size`, `active_awaiting_free` spelled `active_pending_free`,
//! block addresses filled in); it never holds decoder state. The model
//! serialises with serde, and re-reading what `convert` writes yields an equal
//! model.

pub mod catseries;
mod interner;
pub mod memtimeline;
pub mod moment;
pub mod policy;
pub mod profiler;
pub mod tally;
#[cfg(test)]
pub(crate) mod test_support;

pub use interner::{Interner, TableFull};
pub use moment::{Moment, OomMark};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Magic prefix of fragscope's MessagePack form of the model (what
/// `convert --to msgpack` writes and the input stage reads back). The last
/// byte is the version of the form: the serde form of this model, so it
/// changes whenever the model does.
pub const MSGPACK_MAGIC: &[u8] = b"FRAGSCOPE-MSGPACK\x05";

/// The prefix of every version of the MessagePack form, [`MSGPACK_MAGIC`]
/// without its version byte.
pub const MSGPACK_PREFIX: &[u8] = b"FRAGSCOPE-MSGPACK";

/// Index into [`Snapshot::strings`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(pub u32);
/// Index into [`Snapshot::frames`].
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);
/// Index into [`Snapshot::stacks`]; `StackId(0)` is always the empty stack.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default,
)]
pub struct StackId(pub u32);

impl StackId {
    pub const EMPTY: StackId = StackId(0);
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub filename: StrId,
    pub line: i64,
    pub name: StrId,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// `memory_snapshot()` / 1.x: a bare list of segments.
    SegmentList,
    /// `_snapshot()` 2.x dict.
    #[default]
    Dict,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockState {
    ActiveAllocated,
    /// `active_pending_free` (also spelled `active_awaiting_free` in the docs).
    ActivePendingFree,
    Inactive,
}

impl BlockState {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        }
    }
    pub fn parse(s: &str) -> Option<BlockState> {
        Some(match s {
            "active_allocated" => BlockState::ActiveAllocated,
            "active_pending_free" | "active_awaiting_free" => BlockState::ActivePendingFree,
            "inactive" => BlockState::Inactive,
            _ => return None,
        })
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentType {
    Small,
    Large,
}

impl SegmentType {
    pub fn as_str(self) -> &'static str {
        match self {
            SegmentType::Small => "small",
            SegmentType::Large => "large",
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Block {
    pub address: u64,
    /// Rounded size: what the allocator carved.
    pub size: u64,
    /// What the caller asked for; stale for inactive blocks. `None` when the
    /// file has neither `requested_size` nor `history`.
    pub requested_size: Option<u64>,
    pub state: BlockState,
    pub frames: StackId,
}

impl Block {
    /// Requested bytes of a live block: `requested_size`, or `size` when absent.
    pub fn requested_or_size(&self) -> u64 {
        self.requested_size.unwrap_or(self.size)
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Segment {
    pub device: i64,
    pub address: u64,
    pub total_size: u64,
    pub allocated_size: Option<u64>,
    pub active_size: Option<u64>,
    pub requested_size: Option<u64>,
    pub stream: i64,
    pub segment_type: SegmentType,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: Option<bool>,
    pub frames: StackId,
    pub blocks: Vec<Block>,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.address.saturating_add(self.total_size)
    }
    pub fn pool(&self) -> (i64, i64) {
        self.pool_id.unwrap_or((0, 0))
    }
    pub fn expandable(&self) -> bool {
        self.is_expandable.unwrap_or(false)
    }
}

/// An action this version does not know, by its place in
/// [`Snapshot::other_actions`] (first seen, first numbered). Two bytes with
/// no alignment, so that an [`Action`] takes three and a [`TraceEvent`]
/// fits in 64; a file may name at most [`ActionName::MAX`] distinct unknown
/// actions.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActionName([u8; 2]);

impl ActionName {
    /// How many distinct unknown actions a snapshot can name.
    pub const MAX: usize = 1 << 16;
    pub fn new(index: u16) -> ActionName {
        ActionName(index.to_le_bytes())
    }
    pub fn index(self) -> usize {
        u16::from_le_bytes(self.0) as usize
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Snapshot,
    Oom,
    Annotate,
    Other(ActionName),
}

impl Action {
    pub fn parse(s: &str) -> Option<Action> {
        Some(match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "snapshot" => Action::Snapshot,
            "oom" => Action::Oom,
            "annotate" => Action::Annotate,
            _ => return None,
        })
    }
    /// The PyTorch spelling; `Other` needs the snapshot's tables.
    pub fn name<'a>(&self, snap: &'a Snapshot) -> &'a str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Snapshot => "snapshot",
            Action::Oom => "oom",
            Action::Annotate => "annotate",
            Action::Other(n) => snap.str(snap.other_actions[n.index()]),
        }
    }
}

/// Index into [`Snapshot::pools`]: the memory pool of a trace event.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolIdx(pub u32);

/// A trace event's stream: 0 for the default stream (stream 0), else one
/// past the stream's place in [`Snapshot::streams`]. A trace names a few
/// streams, each many times, so an event holds this 4-byte index rather
/// than the 8-byte value; [`Snapshot::stream`] reads it.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default,
)]
pub struct StreamIdx(pub u32);

impl StreamIdx {
    /// Stream 0, which every snapshot names without a table entry.
    pub const DEFAULT: StreamIdx = StreamIdx(0);
}

/// "Absent" for the optional ids a [`TraceEvent`] keeps inline. The
/// interner hands out ids below it ([`Interner::string`], [`Interner::pool`]
/// refuse to reach it), so no file can make a present id read as absent.
const NO_ID: u32 = u32::MAX;

fn opt_id(raw: u32) -> Option<u32> {
    (raw != NO_ID).then_some(raw)
}

/// Index into [`Snapshot::event_extras`]: the rarely varying fields of a
/// trace event.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtrasIdx(pub u32);

/// The fields of a trace event that most events lack or share with many
/// others: the compile context, user metadata and category strings, the
/// pool, and a `device_free` that the event cannot hold itself. A snapshot
/// keeps each distinct combination once ([`Snapshot::event_extras`]); an
/// event names its combination, or none when every field is absent.
///
/// An `oom` entry's `device_free` differs from one OOM to the next, so it
/// would make a combination of its own for each; an `oom` without an
/// address holds it in place of the address instead
/// ([`TraceEvent::hold_device_free`]), as PyTorch's own trace entry does.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EventExtras {
    pub device_free: Option<u64>,
    pub compile_context: Option<StrId>,
    pub user_metadata: Option<StrId>,
    pub category: Option<StrId>,
    /// The event's pool; [`Snapshot::pool_of`] gives the pair.
    pub pool: Option<PoolIdx>,
}

impl EventExtras {
    /// No field present: what an event without extras reads as.
    pub const NONE: EventExtras = EventExtras {
        device_free: None,
        compile_context: None,
        user_metadata: None,
        category: None,
        pool: None,
    };
    pub fn is_none(&self) -> bool {
        *self == EventExtras::NONE
    }
}

/// One entry of a device trace.
///
/// Millions of these are most of a loaded snapshot, so an event holds
/// inline only what nearly every event has its own value of: `time_us` as
/// its raw value with a presence bit (exact for every value, `i64::MIN`
/// included), and the rest of its fields as the index of their interned
/// combination ([`EventExtras`], `u32::MAX` for none), an `oom` without an
/// address its `device_free` in the address's place. Build one with
/// [`TraceEvent::new`] and the setters, and give it its extras through
/// [`Interner::event_extras`]; an absent value is always stored as zero (or
/// `u32::MAX`), so equal events of one snapshot compare equal.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub action: Action,
    flags: u8,
    pub frames: StackId,
    extras: u32,
    /// The address ([`TraceEvent::addr`]); absent for `oom` (0 there), or
    /// its `device_free` when it holds one (the flag `OOM_FREE`).
    addr: u64,
    pub size: u64,
    /// [`Snapshot::stream`] reads its value.
    pub stream: StreamIdx,
    time_us: i64,
}

const _: () = assert!(std::mem::size_of::<TraceEvent>() <= 40);

impl TraceEvent {
    const HAS_TIME: u8 = 1;
    /// An `oom` whose `addr` field holds its `device_free`.
    const OOM_FREE: u8 = 2;
    /// Every flag bit a valid event may carry.
    pub const FLAGS: u8 = Self::HAS_TIME | Self::OOM_FREE;

    /// An event with no optional field; the setters add them.
    pub fn new(
        action: Action,
        addr: u64,
        size: u64,
        stream: StreamIdx,
        frames: StackId,
    ) -> TraceEvent {
        TraceEvent {
            action,
            flags: 0,
            frames,
            extras: NO_ID,
            addr,
            size,
            stream,
            time_us: 0,
        }
    }

    pub fn time_us(&self) -> Option<i64> {
        (self.flags & Self::HAS_TIME != 0).then_some(self.time_us)
    }
    /// The address; 0 for an `oom`, which has none.
    pub fn addr(&self) -> u64 {
        if self.flags & Self::OOM_FREE != 0 {
            0
        } else {
            self.addr
        }
    }
    /// The `device_free` an `oom` holds itself; [`Snapshot::device_free`]
    /// reads it wherever it is.
    pub fn held_device_free(&self) -> Option<u64> {
        (self.flags & Self::OOM_FREE != 0).then_some(self.addr)
    }
    /// Sets the address of an event that holds no `device_free`.
    pub fn set_addr(&mut self, a: u64) {
        debug_assert!(self.flags & Self::OOM_FREE == 0, "the address of an oom");
        self.addr = a;
    }
    /// Moves `x.device_free` into the event when it can hold it: an `oom`
    /// without an address. Every builder of events does this before it
    /// interns `x` ([`Interner::event_extras`]), so an event has one form.
    pub fn hold_device_free(&mut self, x: &mut EventExtras) {
        if self.action == Action::Oom
            && self.flags & Self::OOM_FREE == 0
            && self.addr == 0
            && let Some(v) = x.device_free.take()
        {
            self.addr = v;
            self.flags |= Self::OOM_FREE;
        }
    }
    /// The index of the event's [`EventExtras`]; [`Snapshot::extras`] reads
    /// them.
    pub fn extras(&self) -> Option<ExtrasIdx> {
        opt_id(self.extras).map(ExtrasIdx)
    }

    pub fn set_time_us(&mut self, v: Option<i64>) {
        self.time_us = v.unwrap_or(0);
        self.set_flag(Self::HAS_TIME, v.is_some());
    }
    pub fn set_extras(&mut self, v: Option<ExtrasIdx>) {
        self.extras = raw_id(v.map(|x| x.0));
    }

    /// The builder forms of the setters.
    pub fn with_time_us(mut self, v: Option<i64>) -> TraceEvent {
        self.set_time_us(v);
        self
    }
    pub fn with_extras(mut self, v: Option<ExtrasIdx>) -> TraceEvent {
        self.set_extras(v);
        self
    }

    fn set_flag(&mut self, bit: u8, on: bool) {
        if on {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
    }

    /// What a MessagePack reader must check beyond the ids, given the
    /// event's extras `x`: no unknown flag bit, zero behind an absent value,
    /// and `device_free` where [`TraceEvent::hold_device_free`] puts it, so
    /// that the event equals the one the setters would build.
    pub fn canonical_error(&self, x: &EventExtras) -> Option<&'static str> {
        if self.flags & !Self::FLAGS != 0 {
            return Some("unknown flag bits");
        }
        if self.time_us().is_none() && self.time_us != 0 {
            return Some("a value behind an absent time_us");
        }
        if self.held_device_free().is_some() && self.action != Action::Oom {
            return Some("a device_free held by an event that is not an oom");
        }
        if x.device_free.is_some() {
            let mut held = self.clone();
            held.hold_device_free(&mut x.clone());
            if held != *self {
                return Some("the device_free of an oom without an address kept apart from it");
            }
        }
        None
    }
}

fn raw_id(v: Option<u32>) -> u32 {
    // The interner never hands out `NO_ID`; an id built by hand that equals
    // it would read back as absent, which is a caller's bug.
    debug_assert!(v != Some(NO_ID), "id u32::MAX is reserved for absent");
    v.unwrap_or(NO_ID)
}

/// A value of `allocator_settings` or of an annotation, kept as written.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Setting {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Map(Vec<(String, Setting)>),
    List(Vec<Setting>),
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct AllocatorSettings {
    pub entries: Vec<(String, Setting)>,
}

impl AllocatorSettings {
    pub fn get(&self, key: &str) -> Option<&Setting> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn conf_string(&self) -> Option<&str> {
        match self.get("PYTORCH_CUDA_ALLOC_CONF") {
            Some(Setting::Str(s)) => Some(s),
            _ => None,
        }
    }
    pub fn expandable_segments(&self) -> Option<bool> {
        match self.get("expandable_segments") {
            Some(Setting::Bool(b)) => Some(*b),
            _ => None,
        }
    }
    /// `None` = unlimited (PyTorch writes -1).
    pub fn max_split_size(&self) -> Option<u64> {
        match self.get("max_split_size") {
            Some(Setting::Int(v)) if *v > 0 => Some(*v as u64),
            _ => None,
        }
    }
    pub fn garbage_collection_threshold(&self) -> Option<f64> {
        match self.get("garbage_collection_threshold") {
            Some(Setting::Float(v)) => Some(*v),
            Some(Setting::Int(v)) => Some(*v as f64),
            _ => None,
        }
    }
    /// Divisions per MiB bucket (index = log2 of the bucket's lower bound in MiB).
    pub fn roundup_power2_divisions(&self) -> Option<[u64; 16]> {
        let Some(Setting::Map(m)) = self.get("roundup_power2_divisions") else {
            return None;
        };
        let mut out = [0u64; 16];
        for (k, v) in m {
            let (Ok(mb), Setting::Int(d)) = (k.parse::<u64>(), v) else {
                continue;
            };
            if mb.is_power_of_two() {
                let idx = mb.trailing_zeros() as usize;
                if idx < 16 {
                    out[idx] = (*d).max(0) as u64;
                }
            }
        }
        Some(out)
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Annotation {
    pub device: Option<i64>,
    pub time_us: Option<i64>,
    /// Every other key, as written.
    pub fields: Vec<(String, Setting)>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    pub shape: Shape,
    pub segments: Vec<Segment>,
    /// `None` when the file has no `device_traces` key.
    pub device_traces: Option<Vec<Vec<TraceEvent>>>,
    pub allocator_settings: Option<AllocatorSettings>,
    pub external_annotations: Option<Vec<Annotation>>,
    /// Top-level keys this version does not interpret, kept as written.
    pub unknown_keys: Vec<(String, Setting)>,
    pub strings: Vec<String>,
    pub frames: Vec<Frame>,
    pub stacks: Vec<Vec<FrameId>>,
    /// The distinct `pool_id`s of trace events, by [`PoolIdx`].
    pub pools: Vec<(i64, i64)>,
    /// The names of actions this version does not know, by [`ActionName`].
    pub other_actions: Vec<StrId>,
    /// The distinct [`EventExtras`] of trace events, by [`ExtrasIdx`].
    pub event_extras: Vec<EventExtras>,
    /// The distinct nonzero streams of trace events: [`StreamIdx`] `i`
    /// names `streams[i - 1]`.
    pub streams: Vec<i64>,
}

impl Snapshot {
    pub fn str(&self, id: StrId) -> &str {
        &self.strings[id.0 as usize]
    }
    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id.0 as usize]
    }
    pub fn stack(&self, id: StackId) -> &[FrameId] {
        &self.stacks[id.0 as usize]
    }
    /// A trace event's rarely present fields (all absent when it has none).
    pub fn extras(&self, e: &TraceEvent) -> EventExtras {
        e.extras()
            .map_or(EventExtras::NONE, |x| self.event_extras[x.0 as usize])
    }
    /// A trace event's stream.
    pub fn stream(&self, e: &TraceEvent) -> i64 {
        self.stream_value(e.stream)
    }
    /// The stream an index names.
    pub fn stream_value(&self, s: StreamIdx) -> i64 {
        match s.0 {
            0 => 0,
            i => self.streams[i as usize - 1],
        }
    }
    /// A trace event's `device_free` (an `oom`'s), held or in its extras.
    pub fn device_free(&self, e: &TraceEvent) -> Option<u64> {
        e.held_device_free().or_else(|| self.extras(e).device_free)
    }
    /// A trace event's `pool_id`.
    pub fn pool_of(&self, e: &TraceEvent) -> Option<(i64, i64)> {
        self.extras(e).pool.map(|p| self.pools[p.0 as usize])
    }
    pub fn traces(&self) -> &[Vec<TraceEvent>] {
        self.device_traces.as_deref().unwrap_or(&[])
    }
    /// Every device that has a segment or a trace entry, ascending.
    pub fn devices(&self) -> Vec<i64> {
        self.devices_with(self.traces().iter().map(|t| !t.is_empty()))
    }
    /// Every device that has a segment, or whose trace has entries as
    /// `has_entries` says (one flag per entry of `device_traces`: a trace
    /// counted, not kept), ascending.
    pub fn devices_with(&self, has_entries: impl Iterator<Item = bool>) -> Vec<i64> {
        let mut d: Vec<i64> = self.segments.iter().map(|s| s.device).collect();
        d.extend((has_entries.enumerate()).filter_map(|(i, some)| some.then_some(i as i64)));
        d.sort_unstable();
        d.dedup();
        d
    }
    pub fn segments_of(&self, device: i64) -> impl Iterator<Item = &Segment> {
        self.segments.iter().filter(move |s| s.device == device)
    }
    pub fn trace_of(&self, device: i64) -> &[TraceEvent] {
        usize::try_from(device)
            .ok()
            .and_then(|d| self.traces().get(d))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }
}

/// 1 − largest / total free; 0 when nothing is free.
pub fn fragmentation(largest: u64, free: u64) -> f64 {
    if free == 0 {
        0.0
    } else {
        1.0 - largest as f64 / free as f64
    }
}

#[cfg(test)]
mod tests;
