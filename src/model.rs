//! The typed model of a memory snapshot: what every later stage reads.
//!
//! Owns: segments, blocks, trace events, allocator settings, annotations and
//! the interned string/frame/stack tables. It is a normalised form of every
//! PyTorch version's dict (legacy `history` folded into `frames` and
//! `requested_size`, `active_awaiting_free` spelled `active_pending_free`,
//! block addresses filled in); it never holds decoder state. The model
//! serialises with serde, and re-reading what `convert` writes yields an equal
//! model.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

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

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
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
    Other(StrId),
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
    /// The PyTorch spelling; `Other` needs the string table.
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
            Action::Other(s) => snap.str(*s),
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub action: Action,
    /// Absent for `oom` (0 here).
    pub addr: u64,
    pub size: u64,
    pub stream: i64,
    pub time_us: Option<i64>,
    pub frames: StackId,
    pub device_free: Option<u64>,
    pub compile_context: Option<StrId>,
    pub user_metadata: Option<StrId>,
    pub pool_id: Option<(i64, i64)>,
    pub category: Option<StrId>,
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
    pub fn traces(&self) -> &[Vec<TraceEvent>] {
        self.device_traces.as_deref().unwrap_or(&[])
    }
    /// Every device that has a segment or a trace entry, ascending.
    pub fn devices(&self) -> Vec<i64> {
        let mut d: Vec<i64> = self.segments.iter().map(|s| s.device).collect();
        for (i, t) in self.traces().iter().enumerate() {
            if !t.is_empty() {
                d.push(i as i64);
            }
        }
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

/// Builds the interned tables while a snapshot is decoded.
#[derive(Default)]
pub struct Interner {
    strings: Vec<String>,
    string_ids: HashMap<String, StrId>,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, FrameId>,
    stacks: Vec<Vec<FrameId>>,
    stack_ids: HashMap<Vec<FrameId>, StackId>,
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Interner::default();
        i.stacks.push(Vec::new());
        i.stack_ids.insert(Vec::new(), StackId::EMPTY);
        i
    }
    pub fn string(&mut self, s: &str) -> StrId {
        if let Some(id) = self.string_ids.get(s) {
            return *id;
        }
        let id = StrId(self.strings.len() as u32);
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }
    pub fn frame(&mut self, f: Frame) -> FrameId {
        if let Some(id) = self.frame_ids.get(&f) {
            return *id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(f.clone());
        self.frame_ids.insert(f, id);
        id
    }
    pub fn stack(&mut self, frames: Vec<FrameId>) -> StackId {
        if let Some(id) = self.stack_ids.get(&frames) {
            return *id;
        }
        let id = StackId(self.stacks.len() as u32);
        self.stacks.push(frames.clone());
        self.stack_ids.insert(frames, id);
        id
    }
    /// The frames of an interned stack (while still building).
    pub fn stack_frames(&self, id: StackId) -> Vec<FrameId> {
        self.stacks[id.0 as usize].clone()
    }
    pub fn finish(self, snap: &mut Snapshot) {
        snap.strings = self.strings;
        snap.frames = self.frames;
        snap.stacks = self.stacks;
    }
    /// Starts from an existing snapshot's tables (for tools that add stacks).
    pub fn from_snapshot(snap: &Snapshot) -> Self {
        let mut i = Interner::new();
        for s in &snap.strings {
            i.string(s);
        }
        for f in &snap.frames {
            i.frame(f.clone());
        }
        for st in snap.stacks.iter().skip(1) {
            i.stack(st.clone());
        }
        i
    }
}
