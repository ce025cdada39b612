//! Schema layer: turns a decoded [`Arena`] (from pickle or JSON) into the typed
//! [`Snapshot`]. Accepts every shape PyTorch has written (bare segment lists,
//! 1.13 `history`, 2.0 `cpp_frames`, 2.x dicts, keys newer than we know) and
//! reports type errors with the record path (`device_traces[0][18342].addr`).
//!
//! Trace entries are nearly all of a large file, so they are not left to the
//! arena: [`TraceSink`] takes each dict of `device_traces[d]` the moment the
//! pickle machine has its items, builds the [`TraceEvent`] with provisional
//! ids (arena node numbers) and leaves a small [`Node::Record`] behind; the
//! frames lists they use shrink to [`Node::Stack`]. With the pickle
//! machine's fast path for trace entries ([`TraceSink::with_fast_path`], on
//! by default) the entries and new frames lists get no node at all, and the
//! list of a device's entries is one [`Node::Trace`]. Whatever it is unsure of
//! (a legacy key, a type it would have to coerce, an entry that is not where
//! a trace entry belongs) it leaves to the arena. A segment's blocks go the
//! same way: each block a [`Block`] of the sink, each segment's block list
//! one [`Node::Trace`], moved into the segment whole (a block without an
//! address, or with 1.13's `history`, is left to the arena; so is the rest
//! of its batch). [`from_arena_with`] then
//! walks the file in the same order as ever and gives the provisional ids
//! their final numbers as it meets them, so the model — tables included — is
//! the one the arena alone would give, error paths too (a test holds both
//! paths equal on every real file).

//!
//! Its parts: [`values`] (a node read as an integer, a string, a frame or a
//! stack, with the record path for errors), [`records`] (segments, blocks,
//! trace entries, settings and annotations built from those), [`sink`] (the
//! [`TraceSink`] that takes trace entries and blocks while the pickle
//! machine reads), [`lists`] (the lists it fills) and [`fields`] (the keys
//! of the records it takes and how their values are read).

mod fields;
mod lists;
mod records;
mod sink;
mod values;

use lists::SinkList;
pub use sink::TraceSink;

use super::value::{Arena, Node, Vid};
use crate::core::hash::FxBuild;
use crate::model::tally::TraceTally;
use crate::model::*;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {msg}")]
pub struct SchemaError {
    pub path: String,
    pub msg: String,
}

/// A record path, rendered only when an error needs it.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}
#[derive(Clone, Copy)]
struct P<'a> {
    parent: Option<&'a P<'a>>,
    seg: Seg<'a>,
}
impl<'a> P<'a> {
    fn root(name: &'a str) -> P<'a> {
        P {
            parent: None,
            seg: Seg::Key(name),
        }
    }
    fn key(&'a self, k: &'a str) -> P<'a> {
        P {
            parent: Some(self),
            seg: Seg::Key(k),
        }
    }
    fn idx(&'a self, i: usize) -> P<'a> {
        P {
            parent: Some(self),
            seg: Seg::Index(i),
        }
    }
    fn render(&self) -> String {
        let mut segs = Vec::new();
        let mut cur = Some(self);
        while let Some(p) = cur {
            segs.push(p.seg);
            cur = p.parent;
        }
        segs.reverse();
        let mut s = String::new();
        for seg in segs {
            match seg {
                Seg::Key(k) if s.is_empty() => push_escaped(&mut s, k),
                Seg::Key(k) => {
                    s.push('.');
                    push_escaped(&mut s, k)
                }
                Seg::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        if s.is_empty() {
            "(top level)".into()
        } else {
            s
        }
    }
}

/// Keys come from the file: a newline in one must not split an error line.
fn push_escaped(out: &mut String, k: &str) {
    for c in k.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

struct Cx<'a> {
    a: &'a Arena,
    intern: Interner,
    stack_cache: HashMap<Vid, StackId, FxBuild>,
    /// Per arena node, the model's frame read from it + 1 (0: none yet):
    /// an eighth of the arena's 32 bytes a node, of which only the pages
    /// around frames are ever touched; no hashing, and no map whose size
    /// follows a file that writes a new frame at every allocation.
    frame_ids: Vec<u32>,
    str_front: [(Vid, StrId); STR_FRONT],
    /// The sink's frames lists that an arena node names ([`Node::Stack`]):
    /// the walk may read them as lists, as often as they are named.
    plisted: &'a HashMap<u32, Box<[Vid]>, FxBuild>,
    /// The sink's other frames lists (read only as an entry's or a block's
    /// stack, by number): each is dropped once the model holds its stack,
    /// so that the model's stacks take the room the sink's leave.
    pstacks: Vec<Box<[Vid]>>,
    /// The sink's pool table (its entries' provisional pool numbers).
    ppools: &'a [(i64, i64)],
    /// The sink's combinations of extras (provisional string and pool ids)
    /// and their final indexes, once an entry has named them.
    pextras: &'a [EventExtras],
    pextras_ids: Vec<Option<ExtrasIdx>>,
    /// The sink's nonzero streams and their final indexes, once an entry
    /// has named them.
    pstreams: &'a [i64],
    pstream_ids: Vec<Option<StreamIdx>>,
    /// Per sink stack, its model stack's number + 1 (0: not read yet).
    pstack_ids: Vec<u32>,
    /// The sink's trace entries, per trace list; `mapped` once their ids
    /// are final.
    lists: Vec<SinkList>,
    mapped: Vec<bool>,
    /// For a block list moved whole into a segment, that segment's index.
    blocks_in: Vec<Option<usize>>,
    /// For each entry of `device_traces` read, the sink list it is (when
    /// it is one whole).
    trace_sinks: Vec<Option<u32>>,
    /// Set when a tallied list's entries were asked for one by one: only a
    /// sink that keeps them can give this file's model.
    needs_entries: bool,
    /// Python frames + C++ frames of 2.0 files, by the pair of lists.
    stack2_cache: HashMap<(Option<Vid>, Vid), StackId>,
    /// Records, frames and settings values built so far, against
    /// [`expansion_budget`].
    work: u64,
    budget: u64,
}

/// How much the schema layer may build from an arena.
///
/// A memo reference (pickle `BINGET`) names an already-decoded value for two
/// bytes, so a few hundred kilobytes can name one block list from 100 000
/// segments, or nest ten references thirty deep, and a naive conversion
/// builds 10^8 blocks or 10^30 settings values. Frames and stacks are cached
/// by node, so sharing them (which PyTorch does heavily) costs nothing here;
/// records and settings values are built per reference. A file without
/// shared records needs at most one unit per node and per reference, so the
/// budget is twice that plus a constant: memory and time stay linear in the
/// input, and only a file built to expand is refused.
///
/// `taken_stacks` are the frames lists the decoder read straight into its
/// sink (each distinct list once, its frames references in the file):
/// they count as the lists of the arena do.
pub fn expansion_budget(a: &Arena, taken_stacks: &[Box<[Vid]>]) -> u64 {
    let refs: u64 = a
        .nodes
        .iter()
        .map(|n| match n {
            Node::List(v) => v.len() as u64,
            Node::Tuple(v) => v.len() as u64,
            Node::Dict(v) => 2 * v.len() as u64,
            // Its records are counted in `taken`.
            Node::Trace(_, n) => *n as u64,
            _ => 0,
        })
        .sum::<u64>()
        + taken_stacks.iter().map(|s| s.len() as u64).sum::<u64>();
    2 * (a.values() + refs) + 4096
}

/// Moves out of `pstacks` the frames lists an arena node names (a
/// [`Node::Stack`], which the walk may read as a list, and more than once);
/// most files' lists are named by their entries' and blocks' records only.
fn listed_stacks(a: &Arena, pstacks: &mut [Box<[Vid]>]) -> HashMap<u32, Box<[Vid]>, FxBuild> {
    let mut listed = HashMap::default();
    for n in &a.nodes {
        if let Node::Stack(s) = *n
            && let Some(l) = pstacks.get_mut(s as usize)
            && !listed.contains_key(&s)
        {
            listed.insert(s, std::mem::take(l));
        }
    }
    listed
}

/// Python dict semantics for a key the file repeats: the last value wins, in
/// the first occurrence's place (what `pickle.load` and JSON readers do, and
/// all that the JSON form can carry).
pub(crate) fn dedup_keys<K: Eq + std::hash::Hash + Clone, V>(v: &mut Vec<(K, V)>) {
    let n = v.len();
    if n < 2 {
        return;
    }
    let mut out: Vec<(K, V)> = Vec::with_capacity(n);
    if n <= 16 {
        for (k, val) in v.drain(..) {
            match out.iter_mut().find(|(o, _)| *o == k) {
                Some(o) => o.1 = val,
                None => out.push((k, val)),
            }
        }
    } else {
        let mut first: HashMap<K, usize> = HashMap::with_capacity(n);
        for (k, val) in v.drain(..) {
            match first.get(&k) {
                Some(&i) => out[i].1 = val,
                None => {
                    first.insert(k.clone(), out.len());
                    out.push((k, val));
                }
            }
        }
    }
    *v = out;
}

type R<T> = Result<T, SchemaError>;

const STR_FRONT: usize = 16;

fn err<T>(p: &P, msg: impl Into<String>) -> R<T> {
    Err(SchemaError {
        path: p.render(),
        msg: msg.into(),
    })
}

/// An interned table that is full, as an error at `p`.
fn full<T>(r: Result<T, TableFull>, p: &P) -> R<T> {
    r.or_else(|e| err(p, e.to_string()))
}

/// Converts a decoded value into a snapshot.
pub fn from_arena(a: &Arena, root: Vid) -> Result<Snapshot, SchemaError> {
    from_arena_with(a, root, TraceSink::default())
}

/// Converts a value decoded with `sink` taking trace entries.
pub fn from_arena_with(a: &Arena, root: Vid, sink: TraceSink) -> Result<Snapshot, SchemaError> {
    walk(a, root, sink).map(|w| w.snap).map_err(|(e, _)| e)
}

/// [`from_arena_with`] for a sink that tallies ([`TraceSink::tallying`]):
/// the snapshot, whose traces that were sink lists are empty, and one tally
/// per entry of `device_traces`. `None` when the file names its trace
/// entries one by one somewhere (a rare layout): only a sink that keeps
/// them gives its model, so decode it again with one.
pub fn summary_from_arena(
    a: &Arena,
    root: Vid,
    sink: TraceSink,
) -> Result<Option<(Snapshot, Vec<TraceTally>)>, SchemaError> {
    let w = match walk(a, root, sink) {
        Ok(w) => w,
        Err((_, true)) => return Ok(None),
        Err((e, false)) => return Err(e),
    };
    let Walked {
        snap,
        mut lists,
        trace_sinks,
    } = w;
    // By sink list: a few of them (the block lists are no traces).
    let mut done: HashMap<usize, TraceTally> = HashMap::new();
    let tallies = (snap.traces().iter().enumerate())
        .map(|(i, t)| match trace_sinks.get(i).copied().flatten() {
            Some(s) => {
                let s = s as usize;
                let tally = done.entry(s).or_insert_with(|| {
                    match std::mem::replace(&mut lists[s], SinkList::Kept(Vec::new())) {
                        SinkList::Tallied(t) => t.tally.finish(),
                        SinkList::Kept(_) | SinkList::Blocks(_) => TraceTally::of(&snap, t),
                    }
                });
                tally.clone()
            }
            None => TraceTally::of(&snap, t),
        })
        .collect();
    Ok(Some((snap, tallies)))
}

/// What the schema walk gives: the snapshot, and the sink's lists with the
/// entry of `device_traces` each one is.
struct Walked {
    snap: Snapshot,
    lists: Vec<SinkList>,
    trace_sinks: Vec<Option<u32>>,
}

/// The schema walk; when it fails, its error and whether it asked a
/// tallied list for its entries one by one.
fn walk(a: &Arena, root: Vid, sink: TraceSink) -> Result<Walked, (SchemaError, bool)> {
    let sink::Parts {
        stacks: mut pstacks,
        lists,
        pools: ppools,
        extras: pextras,
        streams: pstreams,
    } = sink.into_parts();
    let budget = expansion_budget(a, &pstacks);
    let plisted = listed_stacks(a, &mut pstacks);
    let mut cx = Cx {
        a,
        intern: Interner::new(),
        stack_cache: HashMap::default(),
        frame_ids: vec![0; a.nodes.len()],
        str_front: [(Vid::MAX, StrId(0)); STR_FRONT],
        plisted: &plisted,
        ppools: &ppools,
        pextras: &pextras,
        pextras_ids: vec![None; pextras.len()],
        pstreams: &pstreams,
        pstream_ids: vec![None; pstreams.len()],
        pstack_ids: vec![0; pstacks.len()],
        mapped: vec![false; lists.len()],
        blocks_in: vec![None; lists.len()],
        lists,
        trace_sinks: Vec::new(),
        needs_entries: false,
        stack2_cache: HashMap::default(),
        work: 0,
        budget,
        pstacks,
    };
    // Each frames list and combination the sink took is a stack or
    // combination of the model (most are distinct).
    cx.intern.reserve(cx.pstacks.len(), pextras.len());
    let mut snap = Snapshot::default();
    let r = cx.root(root, &mut snap);
    if let Err(e) = r {
        return Err((e, cx.needs_entries));
    }
    dedup_keys(&mut snap.unknown_keys);
    cx.intern.finish(&mut snap);
    Ok(Walked {
        snap,
        lists: cx.lists,
        trace_sinks: cx.trace_sinks,
    })
}

impl<'a> Cx<'a> {
    /// The file's top-level value: a bare list of segments or a dict.
    fn root(&mut self, root: Vid, snap: &mut Snapshot) -> R<()> {
        match self.a.get(root) {
            Node::List(segs) => {
                snap.shape = Shape::SegmentList;
                snap.segments.reserve(segs.len());
                for (i, &s) in segs.iter().enumerate() {
                    let p = P {
                        parent: None,
                        seg: Seg::Index(i),
                    };
                    let seg = self.segment(s, &p, &snap.segments)?;
                    snap.segments.push(seg);
                }
                Ok(())
            }
            Node::Dict(d) => self.top_dict(d, snap),
            n => err(
                &P::root(""),
                format!(
                    "not a memory snapshot: the top-level value is a {}",
                    n.kind()
                ),
            ),
        }
    }

    /// The top-level dict of a 2.x file (or `_memory_viz.py`'s wrapper):
    /// its known keys in the order the model wants them, the others kept as
    /// settings values.
    fn top_dict(&mut self, d: &'a [(Vid, Vid)], snap: &mut Snapshot) -> R<()> {
        snap.shape = Shape::Dict;
        let mut keyed: [Option<Vid>; 4] = [None; 4];
        for &(k, val) in d {
            let Some(key) = self.a.as_str(k) else {
                snap.unknown_keys
                    .push((format!("<{} key>", self.a.get(k).kind()), Setting::None));
                continue;
            };
            match key {
                "segments" => keyed[0] = Some(val),
                // `_memory_viz.py` wraps bare lists as {"segments", "traces"}.
                "device_traces" | "traces" => keyed[1] = Some(val),
                "allocator_settings" => keyed[2] = Some(val),
                "external_annotations" => keyed[3] = Some(val),
                other => {
                    // Kept, never fatal: a value we cannot represent is named
                    // only. A file that expands without bound is refused all
                    // the same.
                    let v = match self.setting(val, &P::root(other), 0) {
                        Ok(v) => v,
                        Err(e) if self.over_budget() => return Err(e),
                        Err(_) => Setting::Str("<not representable>".into()),
                    };
                    snap.unknown_keys.push((other.to_string(), v));
                }
            }
        }
        if keyed[0].is_none() && keyed[1].is_none() {
            return err(
                &P::root(""),
                "not a memory snapshot: no `segments` or `device_traces` key",
            );
        }
        if let Some(val) = keyed[0] {
            let p = P::root("segments");
            let l = self.list(val, &p)?;
            snap.segments.reserve(l.len());
            for (i, &s) in l.iter().enumerate() {
                let seg = self.segment(s, &p.idx(i), &snap.segments)?;
                snap.segments.push(seg);
            }
        }
        if let Some(val) = keyed[1] {
            snap.device_traces = Some(self.device_traces(val)?);
        }
        if let Some(val) = keyed[2] {
            snap.allocator_settings = Some(self.allocator_settings(val)?);
        }
        if let Some(val) = keyed[3] {
            snap.external_annotations = Some(self.annotations(val)?);
        }
        Ok(())
    }

    /// `device_traces`: a list of trace lists, most of them one sink list
    /// each, moved into the model with their final ids.
    fn device_traces(&mut self, val: Vid) -> R<Vec<Vec<TraceEvent>>> {
        let p = P::root("device_traces");
        let l = self.list(val, &p)?;
        enum Trace {
            Built(Vec<TraceEvent>),
            Sink(u32),
        }
        let mut traces = Vec::with_capacity(l.len());
        for (i, &t) in l.iter().enumerate() {
            let pt = p.idx(i);
            // The first entries of a sink list, without nodes.
            let whole = match *self.node(t) {
                Node::Trace(s, _) if self.lists[s as usize].is_blocks() => {
                    return err(&pt.idx(0), "a segment's block where a trace entry belongs");
                }
                Node::Trace(s, n) if n as usize == self.lists[s as usize].len() => Some(s),
                Node::Trace(s, n) => {
                    let mut evs = Vec::with_capacity(n as usize);
                    for j in 0..n {
                        evs.push(self.record(s, j, &pt.idx(j as usize))?);
                    }
                    traces.push(Trace::Built(evs));
                    continue;
                }
                _ => None,
            };
            let el: &[Vid] = match whole {
                Some(_) => &[],
                None => self.list(t, &pt)?,
            };
            // The common case: the list is exactly one sink list,
            // whose entries get their final ids in place (a tallied
            // list: the entries that name a stack or extras first).
            if let Some(s) = whole.or_else(|| self.whole_list(el)) {
                let si = s as usize;
                self.spend(self.lists[si].len() as u64, &pt)?;
                if !self.mapped[si] {
                    match std::mem::replace(&mut self.lists[si], SinkList::Kept(Vec::new())) {
                        SinkList::Kept(mut evs) => {
                            for (j, e) in evs.iter_mut().enumerate() {
                                self.map_event(e, &pt.idx(j))?;
                            }
                            self.lists[si] = SinkList::Kept(evs);
                        }
                        SinkList::Tallied(mut t) => {
                            let firsts = std::mem::take(&mut t.firsts);
                            self.lists[si] = SinkList::Tallied(t);
                            for (j, mut e) in firsts {
                                self.map_event(&mut e, &pt.idx(j as usize))?;
                            }
                        }
                        SinkList::Blocks(_) => unreachable!("a block list is no trace"),
                    }
                    self.mapped[si] = true;
                }
                traces.push(Trace::Sink(s));
                continue;
            }
            let mut evs = Vec::with_capacity(el.len());
            for (j, &e) in el.iter().enumerate() {
                evs.push(self.event(e, &pt.idx(j))?);
            }
            traces.push(Trace::Built(evs));
        }
        // Sink lists move into the model; one named twice is copied.
        // A tallied list leaves an empty trace behind.
        let mut out: Vec<Vec<TraceEvent>> = Vec::with_capacity(traces.len());
        let mut first: HashMap<u32, usize> = HashMap::new();
        self.trace_sinks.clear();
        for t in traces {
            match t {
                Trace::Built(v) => {
                    out.push(v);
                    self.trace_sinks.push(None);
                }
                Trace::Sink(s) => {
                    self.trace_sinks.push(Some(s));
                    match first.get(&s) {
                        Some(&k) => {
                            let copy = out[k].clone();
                            out.push(copy);
                        }
                        None => {
                            first.insert(s, out.len());
                            out.push(match &mut self.lists[s as usize] {
                                SinkList::Kept(v) => std::mem::take(v),
                                SinkList::Tallied(_) | SinkList::Blocks(_) => Vec::new(),
                            });
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// `allocator_settings`: its keys and values, the last of a repeated
    /// key winning.
    fn allocator_settings(&mut self, val: Vid) -> R<AllocatorSettings> {
        let p = P::root("allocator_settings");
        let d = self.dict(val, &p)?;
        let mut entries = Vec::with_capacity(d.len());
        for &(k2, v2) in d {
            let Some(k2s) = self.a.as_str(k2) else {
                continue;
            };
            entries.push((k2s.to_string(), self.setting(v2, &p.key(k2s), 0)?));
        }
        dedup_keys(&mut entries);
        Ok(AllocatorSettings { entries })
    }

    /// `external_annotations`: a list of annotation dicts.
    fn annotations(&mut self, val: Vid) -> R<Vec<Annotation>> {
        let p = P::root("external_annotations");
        let l = self.list(val, &p)?;
        let mut out = Vec::with_capacity(l.len());
        for (i, &e) in l.iter().enumerate() {
            out.push(self.annotation(e, &p.idx(i))?);
        }
        Ok(out)
    }
}
