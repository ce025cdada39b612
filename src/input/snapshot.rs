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
//! a trace entry belongs) it leaves to the arena. [`from_arena_with`] then
//! walks the file in the same order as ever and gives the provisional ids
//! their final numbers as it meets them, so the model — tables included — is
//! the one the arena alone would give, error paths too (a test holds both
//! paths equal on every real file).

use super::pickle::{Sink, Val};
use super::value::{Arena, Node, Vid};
use crate::core::hash::FxBuild;
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
    frame_cache: HashMap<Vid, FrameId, FxBuild>,
    str_cache: HashMap<Vid, StrId, FxBuild>,
    str_front: [(Vid, StrId); STR_FRONT],
    /// The sink's frames lists ([`Node::Stack`]) and their final ids.
    pstacks: &'a [Box<[Vid]>],
    /// The sink's pool table (its entries' provisional pool numbers).
    ppools: &'a [(i64, i64)],
    pstack_ids: Vec<Option<StackId>>,
    /// The sink's trace entries, per trace list; `mapped` once their ids
    /// are final.
    lists: Vec<Vec<TraceEvent>>,
    mapped: Vec<bool>,
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
pub fn expansion_budget(a: &Arena) -> u64 {
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
        .sum();
    2 * (a.values() + refs) + 4096
}

/// Python dict semantics for a key the file repeats: the last value wins, in
/// the first occurrence's place (what `pickle.load` and JSON readers do, and
/// all that the JSON form can carry).
fn dedup_keys(v: &mut Vec<(String, Setting)>) {
    if v.len() < 2 {
        return;
    }
    let mut first: HashMap<String, usize> = HashMap::with_capacity(v.len());
    let mut out: Vec<(String, Setting)> = Vec::with_capacity(v.len());
    for (k, val) in v.drain(..) {
        match first.get(&k) {
            Some(&i) => out[i].1 = val,
            None => {
                first.insert(k.clone(), out.len());
                out.push((k, val));
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

impl<'a> Cx<'a> {
    fn node(&self, v: Vid) -> &'a Node {
        self.a.get(v)
    }
    fn over_budget(&self) -> bool {
        self.work > self.budget
    }
    fn spend(&mut self, n: u64, p: &P) -> R<()> {
        self.work = self.work.saturating_add(n);
        if self.over_budget() {
            return err(
                p,
                format!(
                    "shared references (pickle memo) expand to more than {} records, frames and \
                     settings values, out of proportion to the {} values the file holds; refusing \
                     to expand them",
                    self.budget,
                    self.a.values()
                ),
            );
        }
        Ok(())
    }
    fn dict(&self, v: Vid, p: &P) -> R<&'a [(Vid, Vid)]> {
        match self.node(v) {
            Node::Dict(d) => Ok(d),
            Node::Record(..) => err(p, "expected this record, found a trace entry"),
            n => err(p, format!("expected a dict, found {}", n.kind())),
        }
    }
    fn list(&self, v: Vid, p: &P) -> R<&'a [Vid]> {
        match self.node(v) {
            Node::List(l) => Ok(l),
            Node::Tuple(l) => Ok(l),
            Node::Stack(s) => Ok(&self.pstacks[*s as usize]),
            // Read whole by the `device_traces` loop; the decoder made every
            // other one a `List`.
            Node::Trace(..) => err(p, "expected a list, found a list of trace entries"),
            n => err(p, format!("expected a list, found {}", n.kind())),
        }
    }
    fn int(&self, v: Vid, p: &P) -> R<i64> {
        match self.node(v) {
            Node::Int(i) => Ok(*i),
            Node::Bool(b) => Ok(*b as i64),
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(*f as i64),
            Node::BigInt => err(p, "integer does not fit in 64 bits"),
            n => err(p, format!("expected an int, found {}", n.kind())),
        }
    }
    fn uint(&self, v: Vid, p: &P) -> R<u64> {
        let i = self.int(v, p)?;
        if i < 0 {
            return err(p, format!("expected a non-negative int, found {i}"));
        }
        Ok(i as u64)
    }
    fn string(&self, v: Vid, p: &P) -> R<&'a str> {
        match self.node(v) {
            Node::Str(s) => Ok(s),
            n => err(p, format!("expected a str, found {}", n.kind())),
        }
    }
    #[inline]
    fn str_id(&mut self, v: Vid, p: &P) -> R<StrId> {
        // Every trace entry names the same few strings (`compile_context`,
        // `user_metadata`): a direct-mapped cache in front of the table.
        let slot = v as usize % STR_FRONT;
        if self.str_front[slot].0 == v {
            return Ok(self.str_front[slot].1);
        }
        self.str_id_missed(v, p)
    }
    /// [`Cx::str_id`] past its cache.
    #[cold]
    fn str_id_missed(&mut self, v: Vid, p: &P) -> R<StrId> {
        let slot = v as usize % STR_FRONT;
        let id = match self.str_cache.get(&v) {
            Some(id) => *id,
            None => {
                let s = self.string(v, p)?;
                let id = full(self.intern.string(s), p)?;
                self.str_cache.insert(v, id);
                id
            }
        };
        self.str_front[slot] = (v, id);
        Ok(id)
    }
    fn bool(&self, v: Vid, p: &P) -> R<bool> {
        match self.node(v) {
            Node::Bool(b) => Ok(*b),
            Node::Int(i) => Ok(*i != 0),
            n => err(p, format!("expected a bool, found {}", n.kind())),
        }
    }
    fn pair(&self, v: Vid, p: &P) -> R<(i64, i64)> {
        let l = self.list(v, p)?;
        if l.len() != 2 {
            return err(p, format!("expected a pair, found {} items", l.len()));
        }
        Ok((self.int(l[0], &p.idx(0))?, self.int(l[1], &p.idx(1))?))
    }

    fn frame(&mut self, v: Vid, p: &P) -> R<FrameId> {
        if let Some(id) = self.frame_cache.get(&v) {
            return Ok(*id);
        }
        self.spend(1, p)?;
        let f = match self.node(v) {
            Node::Dict(d) => {
                let mut filename = None;
                let mut line = 0;
                let mut name = None;
                for &(k, val) in d.iter() {
                    match self.a.as_str(k) {
                        Some("filename") => filename = Some(val),
                        Some("line") => line = self.int(val, &p.key("line"))?,
                        Some("name") => name = Some(val),
                        _ => {}
                    }
                }
                // Interned in a fixed order so that the tables do not depend
                // on the key order of the file.
                let filename = match filename {
                    Some(v) => self.str_id(v, &p.key("filename"))?,
                    None => full(self.intern.string(""), p)?,
                };
                let name = match name {
                    Some(v) => self.str_id(v, &p.key("name"))?,
                    None => full(self.intern.string(""), p)?,
                };
                Frame {
                    filename,
                    line,
                    name,
                }
            }
            // 2.0 `cpp_frames` and some converters: a frame as one string.
            Node::Str(s) => {
                let empty = full(self.intern.string(""), p)?;
                let name = full(self.intern.string(s), p)?;
                Frame {
                    filename: empty,
                    line: 0,
                    name,
                }
            }
            n => return err(p, format!("expected a frame dict, found {}", n.kind())),
        };
        let id = self.intern.frame(f);
        self.frame_cache.insert(v, id);
        Ok(id)
    }

    fn stack(&mut self, v: Vid, p: &P) -> R<StackId> {
        if let Node::Stack(s) = self.node(v) {
            return self.pstack(*s, p);
        }
        if let Some(id) = self.stack_cache.get(&v) {
            return Ok(*id);
        }
        if matches!(self.node(v), Node::None) {
            return Ok(StackId::EMPTY);
        }
        let l = self.list(v, p)?;
        self.spend(l.len() as u64, p)?;
        let mut frames = Vec::with_capacity(l.len());
        for (i, &f) in l.iter().enumerate() {
            frames.push(self.frame(f, &p.idx(i))?);
        }
        let id = self.intern.stack(frames);
        self.stack_cache.insert(v, id);
        Ok(id)
    }

    /// A frames list the sink took, by its number.
    #[inline]
    fn pstack(&mut self, s: u32, p: &P) -> R<StackId> {
        if let Some(id) = self.pstack_ids[s as usize] {
            return Ok(id);
        }
        self.pstack_new(s, p)
    }
    /// [`Cx::pstack`] for a stack not yet interned.
    #[cold]
    fn pstack_new(&mut self, s: u32, p: &P) -> R<StackId> {
        let l = &self.pstacks[s as usize];
        self.spend(l.len() as u64, p)?;
        let mut frames = Vec::with_capacity(l.len());
        for (i, &f) in l.iter().enumerate() {
            frames.push(self.frame(f, &p.idx(i))?);
        }
        let id = self.intern.stack(frames);
        self.pstack_ids[s as usize] = Some(id);
        Ok(id)
    }

    /// Python frames followed by 2.0-style `cpp_frames`. Only the combined
    /// stack is interned, so that the model holds exactly the stacks its
    /// records use (and re-reading the JSON form yields the same tables).
    fn stack2(&mut self, py: Option<Vid>, cpp: Option<Vid>, p: &P) -> R<StackId> {
        let cpp = cpp.filter(|&c| match self.node(c) {
            Node::None => false,
            Node::List(l) => !l.is_empty(),
            Node::Tuple(l) => !l.is_empty(),
            _ => true,
        });
        let Some(c) = cpp else {
            return match py {
                Some(v) => self.stack(v, &p.key("frames")),
                None => Ok(StackId::EMPTY),
            };
        };
        if let Some(id) = self.stack2_cache.get(&(py, c)) {
            return Ok(*id);
        }
        let mut frames = Vec::new();
        for (key, list) in [("frames", py), ("cpp_frames", Some(c))] {
            let Some(v) = list else { continue };
            if matches!(self.node(v), Node::None) {
                continue;
            }
            let pk = p.key(key);
            let l = self.list(v, &pk)?;
            self.spend(l.len() as u64, &pk)?;
            frames.reserve(l.len());
            for (i, &f) in l.iter().enumerate() {
                frames.push(self.frame(f, &pk.idx(i))?);
            }
        }
        let id = self.intern.stack(frames);
        self.stack2_cache.insert((py, c), id);
        Ok(id)
    }

    fn setting(&mut self, v: Vid, p: &P, depth: usize) -> R<Setting> {
        if depth > 32 {
            return err(p, "nesting deeper than 32 levels in a settings value");
        }
        self.spend(1, p)?;
        Ok(match self.node(v) {
            Node::None => Setting::None,
            Node::Bool(b) => Setting::Bool(*b),
            Node::Int(i) => Setting::Int(*i),
            Node::BigInt => Setting::Str("<integer beyond 64 bits>".into()),
            Node::Float(f) => Setting::Float(*f),
            Node::Str(s) => Setting::Str(s.to_string()),
            Node::Bytes(b) => Setting::Str(String::from_utf8_lossy(b).into_owned()),
            Node::List(l) => Setting::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Tuple(l) => Setting::List(
                l.iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Stack(s) => Setting::List(
                self.pstacks[*s as usize]
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.setting(*x, &p.idx(i), depth + 1))
                    .collect::<R<_>>()?,
            ),
            Node::Record(..) => return err(p, "a trace entry where a settings value belongs"),
            // As the `List` of `Record`s it stands for.
            Node::Trace(_, n) if *n > 0 => {
                self.spend(1, p)?;
                return err(&p.idx(0), "a trace entry where a settings value belongs");
            }
            Node::Trace(..) => Setting::List(Vec::new()),
            Node::Dict(d) => {
                let mut out = Vec::with_capacity(d.len());
                for &(k, val) in d.iter() {
                    let key = match self.node(k) {
                        Node::Str(s) => s.to_string(),
                        Node::Int(i) => i.to_string(),
                        n => return err(p, format!("settings key of type {}", n.kind())),
                    };
                    let sub = self.setting(val, &p.key(&key), depth + 1)?;
                    out.push((key, sub));
                }
                dedup_keys(&mut out);
                Setting::Map(out)
            }
        })
    }

    fn block(&mut self, v: Vid, p: &P, next_addr: u64) -> R<Block> {
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut address = None;
        let mut size = None;
        let mut requested = None;
        let mut state = None;
        let mut frames = None;
        let mut history = None;
        for &(k, val) in d {
            match self.a.as_str(k) {
                Some("address") => address = Some(self.uint(val, &p.key("address"))?),
                Some("size") => size = Some(self.uint(val, &p.key("size"))?),
                Some("requested_size") => {
                    requested = Some(self.uint(val, &p.key("requested_size"))?)
                }
                Some("state") => {
                    let pk = p.key("state");
                    let s = self.string(val, &pk)?;
                    state = Some(match BlockState::parse(s) {
                        Some(st) => st,
                        None => return err(&pk, format!("unknown block state {s:?}")),
                    });
                }
                Some("frames") => frames = Some(val),
                Some("history") => history = Some(val),
                _ => {}
            }
        }
        let Some(size) = size else {
            return err(p, "block has no `size`");
        };
        let Some(state) = state else {
            return err(p, "block has no `state`");
        };
        let mut stack = match frames {
            Some(f) => self.stack(f, &p.key("frames"))?,
            None => StackId::EMPTY,
        };
        // 1.13–2.0: history[0] is the current (or last) user.
        if let Some(h) = history {
            let ph = p.key("history");
            if !matches!(self.node(h), Node::None) {
                let hl = self.list(h, &ph)?;
                if let Some(&h0) = hl.first() {
                    let ph0 = ph.idx(0);
                    let hd = self.dict(h0, &ph0)?;
                    let mut hf = None;
                    let mut hc = None;
                    for &(k, val) in hd {
                        match self.a.as_str(k) {
                            Some("real_size") if requested.is_none() => {
                                requested = Some(self.uint(val, &ph0.key("real_size"))?)
                            }
                            Some("frames") => hf = Some(val),
                            Some("cpp_frames") => hc = Some(val),
                            _ => {}
                        }
                    }
                    if stack == StackId::EMPTY {
                        stack = self.stack2(hf, hc, &ph0)?;
                    }
                }
            }
        }
        Ok(Block {
            address: address.unwrap_or(next_addr),
            size,
            requested_size: requested,
            state,
            frames: stack,
        })
    }

    fn segment(&mut self, v: Vid, p: &P) -> R<Segment> {
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut device = 0;
        let mut address = None;
        let mut total_size = None;
        let mut allocated_size = None;
        let mut active_size = None;
        let mut requested_size = None;
        let mut stream = 0;
        let mut segment_type = None;
        let mut pool_id = None;
        let mut is_expandable = None;
        let mut frames_v = None;
        let mut blocks_v = None;
        for &(k, val) in d {
            let Some(key) = self.a.as_str(k) else {
                continue;
            };
            let pk = p.key(key);
            match key {
                "device" => device = self.int(val, &pk)?,
                "address" => address = Some(self.uint(val, &pk)?),
                "total_size" => total_size = Some(self.uint(val, &pk)?),
                "allocated_size" => allocated_size = Some(self.uint(val, &pk)?),
                "active_size" => active_size = Some(self.uint(val, &pk)?),
                "requested_size" => requested_size = Some(self.uint(val, &pk)?),
                "stream" => stream = self.int(val, &pk)?,
                "segment_type" => {
                    let s = self.string(val, &pk)?;
                    segment_type = Some(match s {
                        "small" => SegmentType::Small,
                        "large" => SegmentType::Large,
                        _ => return err(&pk, format!("unknown segment type {s:?}")),
                    })
                }
                "segment_pool_id" if !matches!(self.node(val), Node::None) => {
                    pool_id = Some(self.pair(val, &pk)?)
                }
                "is_expandable" => is_expandable = Some(self.bool(val, &pk)?),
                "frames" => frames_v = Some(val),
                "blocks" => blocks_v = Some(val),
                _ => {}
            }
        }
        let Some(address) = address else {
            return err(p, "segment has no `address`");
        };
        let Some(total_size) = total_size else {
            return err(p, "segment has no `total_size`");
        };
        let frames = match frames_v {
            Some(v) => self.stack(v, &p.key("frames"))?,
            None => StackId::EMPTY,
        };
        let mut blocks = Vec::new();
        if let Some(bv) = blocks_v {
            let pb = p.key("blocks");
            let l = self.list(bv, &pb)?;
            blocks.reserve(l.len());
            let mut next = address;
            for (i, &b) in l.iter().enumerate() {
                let blk = self.block(b, &pb.idx(i), next)?;
                next = blk.address.saturating_add(blk.size);
                blocks.push(blk);
            }
        }
        let segment_type = segment_type.unwrap_or(if total_size <= 2 << 20 {
            SegmentType::Small
        } else {
            SegmentType::Large
        });
        Ok(Segment {
            device,
            address,
            total_size,
            allocated_size,
            active_size,
            requested_size,
            stream,
            segment_type,
            pool_id,
            is_expandable,
            frames,
            blocks,
        })
    }

    fn event(&mut self, v: Vid, p: &P) -> R<TraceEvent> {
        if let Node::Record(l, i) = *self.node(v) {
            return self.record(l, i, p);
        }
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut action = None;
        let mut addr = 0;
        let mut size = 0;
        let mut stream = 0;
        let mut time_us = None;
        let mut frames = None;
        let mut cpp = None;
        let mut device_free = None;
        let mut compile_context = None;
        let mut user_metadata = None;
        let mut pool_id = None;
        let mut category = None;
        for &(k, val) in d {
            let Some(key) = self.a.as_str(k) else {
                continue;
            };
            match key {
                "action" => action = Some(val),
                "addr" => addr = self.uint(val, &p.key("addr"))?,
                "size" => size = self.uint(val, &p.key("size"))?,
                "stream" => stream = self.int(val, &p.key("stream"))?,
                "time_us" if !matches!(self.node(val), Node::None) => {
                    time_us = Some(self.int(val, &p.key("time_us"))?)
                }
                "frames" => frames = Some(val),
                "cpp_frames" => cpp = Some(val),
                "device_free" => device_free = Some(self.uint(val, &p.key("device_free"))?),
                "compile_context" => compile_context = Some(val),
                "user_metadata" => user_metadata = Some(val),
                "pool_id" if !matches!(self.node(val), Node::None) => {
                    pool_id = Some(self.pair(val, &p.key("pool_id"))?)
                }
                "category" if !matches!(self.node(val), Node::None) => category = Some(val),
                _ => {}
            }
        }
        let Some(action) = action else {
            return err(p, "trace entry has no `action`");
        };
        let pk = p.key("action");
        let name = self.string(action, &pk)?;
        let action = full(self.intern.action(name), &pk)?;
        let frames = self.stack2(frames, cpp, p)?;
        let compile_context = match compile_context {
            Some(v) => Some(self.str_id(v, &p.key("compile_context"))?),
            None => None,
        };
        let user_metadata = match user_metadata {
            Some(v) => Some(self.str_id(v, &p.key("user_metadata"))?),
            None => None,
        };
        let category = match category {
            Some(v) => Some(self.str_id(v, &p.key("category"))?),
            None => None,
        };
        let pool = match pool_id {
            Some(pair) => Some(full(self.intern.pool(pair), &p.key("pool_id"))?),
            None => None,
        };
        Ok(TraceEvent::new(action, addr, size, stream, frames)
            .with_time_us(time_us)
            .with_device_free(device_free)
            .with_compile_context(compile_context)
            .with_user_metadata(user_metadata)
            .with_category(category)
            .with_pool(pool))
    }

    /// The sink's entry `i` of list `l`, with final ids.
    fn record(&mut self, l: u32, i: u32, p: &P) -> R<TraceEvent> {
        self.spend(1, p)?;
        let mut e = self.lists[l as usize][i as usize].clone();
        if !self.mapped[l as usize] {
            self.map_event(&mut e, p)?;
        }
        Ok(e)
    }

    /// Gives a sink entry's provisional ids their final numbers, interning
    /// in the order [`Cx::event`] would (action, frames, compile context,
    /// user metadata, category, pool). The sink takes no unknown action.
    #[inline]
    fn map_event(&mut self, e: &mut TraceEvent, p: &P) -> R<()> {
        e.frames = match e.frames.0 {
            0 => StackId::EMPTY,
            s => self.pstack(s - 1, &p.key("frames"))?,
        };
        if let Some(s) = e.compile_context() {
            e.set_compile_context(Some(self.str_id(s.0, &p.key("compile_context"))?));
        }
        if let Some(s) = e.user_metadata() {
            e.set_user_metadata(Some(self.str_id(s.0, &p.key("user_metadata"))?));
        }
        if let Some(s) = e.category() {
            e.set_category(Some(self.str_id(s.0, &p.key("category"))?));
        }
        if let Some(i) = e.pool() {
            let pair = self.ppools[i.0 as usize];
            e.set_pool(Some(full(self.intern.pool(pair), &p.key("pool_id"))?));
        }
        Ok(())
    }

    /// The sink list whose entries, all of them and in order, are `items`.
    fn whole_list(&self, items: &[Vid]) -> Option<u32> {
        let &first = items.first()?;
        let Node::Record(l, 0) = *self.node(first) else {
            return None;
        };
        if self.lists[l as usize].len() != items.len() {
            return None;
        }
        items
            .iter()
            .enumerate()
            .all(|(j, &v)| matches!(*self.node(v), Node::Record(x, i) if x == l && i as usize == j))
            .then_some(l)
    }

    fn annotation(&mut self, v: Vid, p: &P) -> R<Annotation> {
        let d = self.dict(v, p)?;
        self.spend(1, p)?;
        let mut a = Annotation::default();
        for &(k, val) in d {
            let key = match self.node(k) {
                Node::Str(s) => &**s,
                _ => continue,
            };
            match key {
                "device" => a.device = Some(self.int(val, &p.key("device"))?),
                "time_us" => a.time_us = Some(self.int(val, &p.key("time_us"))?),
                _ => a
                    .fields
                    .push((key.to_string(), self.setting(val, &p.key(key), 0)?)),
            }
        }
        dedup_keys(&mut a.fields);
        Ok(a)
    }
}

/// Converts a decoded value into a snapshot.
pub fn from_arena(a: &Arena, root: Vid) -> Result<Snapshot, SchemaError> {
    from_arena_with(a, root, TraceSink::default())
}

/// Converts a value decoded with `sink` taking trace entries.
pub fn from_arena_with(a: &Arena, root: Vid, sink: TraceSink) -> Result<Snapshot, SchemaError> {
    let TraceSink {
        pstacks,
        lists,
        ppools,
        ..
    } = sink;
    let lists: Vec<Vec<TraceEvent>> = lists.into_iter().map(Events::into_vec).collect();
    let mut cx = Cx {
        a,
        intern: Interner::new(),
        stack_cache: HashMap::default(),
        frame_cache: HashMap::default(),
        str_cache: HashMap::default(),
        str_front: [(Vid::MAX, StrId(0)); STR_FRONT],
        pstacks: &pstacks,
        ppools: &ppools,
        pstack_ids: vec![None; pstacks.len()],
        mapped: vec![false; lists.len()],
        lists,
        stack2_cache: HashMap::default(),
        work: 0,
        budget: expansion_budget(a),
    };
    let mut snap = Snapshot::default();
    let top = P::root("");
    match a.get(root) {
        Node::List(segs) => {
            snap.shape = Shape::SegmentList;
            snap.segments.reserve(segs.len());
            for (i, &s) in segs.iter().enumerate() {
                let p = P {
                    parent: None,
                    seg: Seg::Index(i),
                };
                snap.segments.push(cx.segment(s, &p)?);
            }
        }
        Node::Dict(d) => {
            snap.shape = Shape::Dict;
            let mut keyed: [Option<Vid>; 4] = [None; 4];
            for &(k, val) in d {
                let Some(key) = a.as_str(k) else {
                    snap.unknown_keys
                        .push((format!("<{} key>", a.get(k).kind()), Setting::None));
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
                        let v = match cx.setting(val, &P::root(other), 0) {
                            Ok(v) => v,
                            Err(e) if cx.over_budget() => return Err(e),
                            Err(_) => Setting::Str("<not representable>".into()),
                        };
                        snap.unknown_keys.push((other.to_string(), v));
                    }
                }
            }
            if keyed[0].is_none() && keyed[1].is_none() {
                return err(
                    &top,
                    "not a memory snapshot: no `segments` or `device_traces` key",
                );
            }
            if let Some(val) = keyed[0] {
                let p = P::root("segments");
                let l = cx.list(val, &p)?;
                snap.segments.reserve(l.len());
                for (i, &s) in l.iter().enumerate() {
                    snap.segments.push(cx.segment(s, &p.idx(i))?);
                }
            }
            if let Some(val) = keyed[1] {
                let p = P::root("device_traces");
                let l = cx.list(val, &p)?;
                enum Trace {
                    Built(Vec<TraceEvent>),
                    Sink(u32),
                }
                let mut traces = Vec::with_capacity(l.len());
                for (i, &t) in l.iter().enumerate() {
                    let pt = p.idx(i);
                    // The first entries of a sink list, without nodes.
                    let whole = match *cx.node(t) {
                        Node::Trace(s, n) if n as usize == cx.lists[s as usize].len() => Some(s),
                        Node::Trace(s, n) => {
                            let mut evs = Vec::with_capacity(n as usize);
                            for j in 0..n {
                                evs.push(cx.record(s, j, &pt.idx(j as usize))?);
                            }
                            traces.push(Trace::Built(evs));
                            continue;
                        }
                        _ => None,
                    };
                    let el: &[Vid] = match whole {
                        Some(_) => &[],
                        None => cx.list(t, &pt)?,
                    };
                    // The common case: the list is exactly one sink list,
                    // whose entries get their final ids in place.
                    if let Some(s) = whole.or_else(|| cx.whole_list(el)) {
                        cx.spend(cx.lists[s as usize].len() as u64, &pt)?;
                        if !cx.mapped[s as usize] {
                            let mut evs = std::mem::take(&mut cx.lists[s as usize]);
                            for (j, e) in evs.iter_mut().enumerate() {
                                cx.map_event(e, &pt.idx(j))?;
                            }
                            cx.lists[s as usize] = evs;
                            cx.mapped[s as usize] = true;
                        }
                        traces.push(Trace::Sink(s));
                        continue;
                    }
                    let mut evs = Vec::with_capacity(el.len());
                    for (j, &e) in el.iter().enumerate() {
                        evs.push(cx.event(e, &pt.idx(j))?);
                    }
                    traces.push(Trace::Built(evs));
                }
                // Sink lists move into the model; one named twice is copied.
                let mut out: Vec<Vec<TraceEvent>> = Vec::with_capacity(traces.len());
                let mut first: HashMap<u32, usize> = HashMap::new();
                for t in traces {
                    match t {
                        Trace::Built(v) => out.push(v),
                        Trace::Sink(s) => match first.get(&s) {
                            Some(&k) => {
                                let copy = out[k].clone();
                                out.push(copy);
                            }
                            None => {
                                first.insert(s, out.len());
                                out.push(std::mem::take(&mut cx.lists[s as usize]));
                            }
                        },
                    }
                }
                snap.device_traces = Some(out);
            }
            if let Some(val) = keyed[2] {
                let p = P::root("allocator_settings");
                let d = cx.dict(val, &p)?;
                let mut entries = Vec::with_capacity(d.len());
                for &(k2, v2) in d {
                    let Some(k2s) = a.as_str(k2) else { continue };
                    entries.push((k2s.to_string(), cx.setting(v2, &p.key(k2s), 0)?));
                }
                dedup_keys(&mut entries);
                snap.allocator_settings = Some(AllocatorSettings { entries });
            }
            if let Some(val) = keyed[3] {
                let p = P::root("external_annotations");
                let l = cx.list(val, &p)?;
                let mut out = Vec::with_capacity(l.len());
                for (i, &e) in l.iter().enumerate() {
                    out.push(cx.annotation(e, &p.idx(i))?);
                }
                snap.external_annotations = Some(out);
            }
        }
        n => {
            return err(
                &top,
                format!(
                    "not a memory snapshot: the top-level value is a {}",
                    n.kind()
                ),
            );
        }
    }
    dedup_keys(&mut snap.unknown_keys);
    cx.intern.finish(&mut snap);
    Ok(snap)
}

// ---- trace entries while reading -------------------------------------------

/// The keys of a trace entry, as [`Cx::event`] reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Action,
    Addr,
    Size,
    Stream,
    TimeUs,
    Frames,
    DeviceFree,
    CompileContext,
    UserMetadata,
    PoolId,
    Category,
    /// A key the arena path must see (2.0 `cpp_frames`).
    Legacy,
    Ignored,
}

fn classify(s: &str) -> Key {
    match s {
        "action" => Key::Action,
        "addr" => Key::Addr,
        "size" => Key::Size,
        "stream" => Key::Stream,
        "time_us" => Key::TimeUs,
        "frames" => Key::Frames,
        "cpp_frames" => Key::Legacy,
        "device_free" => Key::DeviceFree,
        "compile_context" => Key::CompileContext,
        "user_metadata" => Key::UserMetadata,
        "pool_id" => Key::PoolId,
        "category" => Key::Category,
        _ => Key::Ignored,
    }
}

const KEY_CACHE: usize = 64;

/// A key set of trace entries ([`Sink::entry_shape`]).
struct KeySet {
    /// The keys' nodes, in order.
    keys: Box<[Val]>,
    /// What each of them is.
    kinds: Box<[Key]>,
}
/// Key sets ([`Sink::entry_shape`]) kept; a trace has one or two.
const MAX_SHAPES: usize = 16;
const ACTION_CACHE: usize = 16;

/// Takes the dicts of `device_traces[d]` while a pickle is read (see the
/// module doc). The entries it builds hold provisional ids: `frames` is one
/// more than a number in its stack table (0 = no frames), string ids are
/// arena node numbers.
pub struct TraceSink {
    /// `device_traces` (normally one list).
    dt: Vec<Vid>,
    /// Per-device trace lists and their number in `lists`.
    trace_lists: Vec<(Vid, u32)>,
    lists: Vec<Events>,
    pstacks: Vec<Box<[Vid]>>,
    pstack_ix: HashMap<Box<[Vid]>, u32, FxBuild>,
    /// Pool ids by provisional number.
    ppools: Vec<(i64, i64)>,
    ppool_ix: HashMap<(i64, i64), u32, FxBuild>,
    /// Key strings by node, direct-mapped (PyTorch shares one string per key).
    keys: [(Vid, Key); KEY_CACHE],
    /// Action strings by node, direct-mapped, as read.
    actions: [(Vid, Action); ACTION_CACHE],
    /// The batch being read: its MARK, its list, how far it is known to
    /// hold only this sink's entries, and whether something else sits in it.
    batch: (usize, u32, usize, bool),
    /// Whether the pickle machine may read entries by its fast path.
    fast: bool,
    /// Key sets numbered for the pickle machine ([`Sink::entry_shape`]):
    /// the keys' nodes and what each key is.
    shapes: Vec<KeySet>,
}

/// Entries of one trace list. A plain vector: its large buffers grow by
/// `realloc`, which the system allocator serves by remapping pages rather
/// than copying them, and capacity it never touches costs no memory. The
/// model takes it as it is: shrinking a short list out of its first chunk
/// copied it into memory new to the process (on the largest real file,
/// 350 page faults of 900 and a tenth of a decode), and spare capacity is
/// address space it never touches, not resident memory.
const FIRST: usize = 1 << 16;

#[derive(Default)]
struct Events {
    events: Vec<TraceEvent>,
}

impl Events {
    #[inline]
    fn push(&mut self, e: TraceEvent) {
        if self.events.capacity() == 0 {
            // Large enough that the allocator maps it apart from its heap
            // (grown by remapping, returned whole), as a chunk of 64 Ki
            // events was before; a short trace touches only what it uses.
            self.events.reserve_exact(FIRST);
        }
        self.events.push(e);
    }

    fn into_vec(self) -> Vec<TraceEvent> {
        self.events
    }
}

impl Default for TraceSink {
    fn default() -> Self {
        TraceSink {
            dt: Vec::new(),
            trace_lists: Vec::new(),
            lists: Vec::new(),
            pstacks: Vec::new(),
            pstack_ix: HashMap::default(),
            ppools: Vec::new(),
            ppool_ix: HashMap::default(),
            keys: [(Vid::MAX, Key::Ignored); KEY_CACHE],
            actions: std::array::from_fn(|_| (Vid::MAX, Action::Alloc)),
            batch: (usize::MAX, u32::MAX, 0, false),
            fast: true,
            shapes: Vec::new(),
        }
    }
}

impl TraceSink {
    pub fn new() -> TraceSink {
        TraceSink::default()
    }

    /// With `false`, every entry goes through the general pickle machine
    /// (the model is the same; tests compare the two).
    pub fn with_fast_path(mut self, on: bool) -> TraceSink {
        self.fast = on;
        self
    }

    /// Trace entries taken so far.
    pub fn entries(&self) -> usize {
        self.lists.iter().map(|l| l.events.len()).sum()
    }

    fn trace_list(&self, v: Val) -> Option<u32> {
        let Val::Node(id) = v else { return None };
        self.trace_lists
            .iter()
            .find(|(l, _)| *l == id)
            .map(|(_, i)| *i)
    }

    fn is_dt(&self, v: Val) -> bool {
        matches!(v, Val::Node(id) if self.dt.contains(&id))
    }

    #[inline]
    fn key(&mut self, a: &Arena, v: Val) -> Key {
        let Val::Node(id) = v else {
            return Key::Ignored;
        };
        let slot = id as usize % KEY_CACHE;
        if self.keys[slot].0 == id {
            return self.keys[slot].1;
        }
        self.key_missed(a, id)
    }

    /// [`TraceSink::key`] for a string not yet in its cache.
    #[cold]
    fn key_missed(&mut self, a: &Arena, id: Vid) -> Key {
        let slot = id as usize % KEY_CACHE;
        let k = match a.get(id) {
            Node::Str(s) => classify(s),
            _ => Key::Ignored,
        };
        self.keys[slot] = (id, k);
        k
    }

    /// The trace list that will receive the dict at `stack[e]`: it sits
    /// right above the list (a one-entry list), or in a batch over the
    /// list's MARK that so far holds only entries taken here.
    fn owner(&mut self, a: &Arena, stack: &[Val], marks: &[usize], e: usize) -> Option<u32> {
        // The next entry of a batch: right above the entry this sink took
        // last, under the same MARK (what the general case below finds, in
        // a few comparisons).
        let (bm, bl, upto, blocked) = self.batch;
        if !blocked
            && upto + 1 == e
            && marks.last() == Some(&bm)
            && matches!(stack.get(upto), Some(Val::Record(y, _)) if *y == bl)
        {
            self.batch.2 = e;
            return Some(bl);
        }
        if e >= 1
            && let Some(l) = self.trace_list(stack[e - 1])
        {
            return Some(l);
        }
        let &m = marks.last()?;
        if m == 0 || m > e {
            return None;
        }
        let l = self.trace_list(stack[m - 1])?;
        let (bm, bl, upto, blocked) = self.batch;
        if bm != m || bl != l || upto > e || e == m {
            self.batch = (m, l, m, false);
        } else if blocked {
            return None;
        }
        for v in &stack[self.batch.2..e] {
            let ok = match *v {
                Val::Record(y, _) => y == l,
                Val::Node(x) => matches!(a.get(x), Node::Record(y, _) if *y == l),
                _ => false,
            };
            if !ok {
                self.batch.3 = true;
                return None;
            }
        }
        self.batch.2 = e;
        Some(l)
    }

    /// The stack number of these frames.
    fn intern_stack(&mut self, items: &[Vid]) -> u32 {
        match self.pstack_ix.get(items) {
            Some(&s) => s,
            None => {
                let s = self.pstacks.len() as u32;
                let items: Box<[Vid]> = items.into();
                self.pstacks.push(items.clone());
                self.pstack_ix.insert(items, s);
                s
            }
        }
    }

    /// The provisional number of a pool id.
    fn intern_pool(&mut self, pair: (i64, i64)) -> PoolIdx {
        let n = self.ppools.len() as u32;
        let i = *self.ppool_ix.entry(pair).or_insert(n);
        if i == n {
            self.ppools.push(pair);
        }
        PoolIdx(i)
    }

    /// A frames list as a stack number (+1), or `None` when the arena path
    /// must look at it.
    fn frames(&mut self, a: &mut Arena, v: Val) -> Option<u32> {
        let id = match v {
            Val::None => return Some(0),
            Val::Stack(s) => return Some(s + 1),
            Val::Node(id) => id,
            _ => return None,
        };
        let s = match a.get(id) {
            Node::None => return Some(0),
            Node::Stack(s) => return Some(s + 1),
            Node::List(items) => {
                let items = items.clone();
                self.intern_stack(&items)
            }
            _ => return None,
        };
        // The list's items now live in the stack table.
        a.nodes[id as usize] = Node::Stack(s);
        Some(s + 1)
    }

    /// [`Cx::event`] for the common case; `None` for anything it would
    /// coerce, reject or read as a legacy format.
    fn event(&mut self, a: &mut Arena, items: &[Val], shape: Option<u32>) -> Option<TraceEvent> {
        fn int(a: &Arena, v: Val) -> Option<i64> {
            match v {
                Val::Int(i) => Some(i),
                Val::Node(id) => match a.get(id) {
                    Node::Int(i) => Some(*i),
                    _ => None,
                },
                _ => None,
            }
        }
        fn uint(a: &Arena, v: Val) -> Option<u64> {
            int(a, v).and_then(|i| u64::try_from(i).ok())
        }
        fn is_none(a: &Arena, v: Val) -> bool {
            match v {
                Val::None => true,
                Val::Node(id) => matches!(a.get(id), Node::None),
                _ => false,
            }
        }
        fn string(a: &Arena, v: Val) -> Option<StrId> {
            match v {
                Val::Node(id) if matches!(a.get(id), Node::Str(_)) => Some(StrId(id)),
                _ => None,
            }
        }
        fn pair(a: &Arena, v: Val) -> Option<(i64, i64)> {
            let Val::Node(id) = v else { return None };
            let l: &[Vid] = match a.get(id) {
                Node::Tuple(l) => l,
                Node::List(l) => l,
                _ => return None,
            };
            match l {
                [x, y] => Some((int(a, Val::Node(*x))?, int(a, Val::Node(*y))?)),
                _ => None,
            }
        }
        /// An entry's fields as they are read.
        struct Fields {
            e: TraceEvent,
            action: Option<Val>,
            frames: Option<Val>,
            pool: Option<(i64, i64)>,
        }
        #[inline(always)]
        fn field(f: &mut Fields, a: &Arena, key: Key, v: Val) -> Option<()> {
            let e = &mut f.e;
            match key {
                Key::Action => f.action = Some(v),
                Key::Addr => e.addr = uint(a, v)?,
                Key::Size => e.size = uint(a, v)?,
                Key::Stream => e.stream = int(a, v)?,
                Key::TimeUs if !is_none(a, v) => e.set_time_us(Some(int(a, v)?)),
                Key::Frames => f.frames = Some(v),
                Key::DeviceFree => e.set_device_free(Some(uint(a, v)?)),
                Key::CompileContext => e.set_compile_context(Some(string(a, v)?)),
                Key::UserMetadata => e.set_user_metadata(Some(string(a, v)?)),
                Key::PoolId if !is_none(a, v) => f.pool = Some(pair(a, v)?),
                Key::Category if !is_none(a, v) => e.set_category(Some(string(a, v)?)),
                Key::Legacy => return None,
                _ => {}
            }
            Some(())
        }
        let mut f = Fields {
            e: TraceEvent::new(Action::Alloc, 0, 0, 0, StackId(0)),
            action: None,
            frames: None,
            pool: None,
        };
        match shape {
            // With a key set, `items` are its values alone.
            Some(s) => {
                let kinds = &self.shapes.get(s as usize)?.kinds;
                if kinds.len() != items.len() {
                    return None;
                }
                for (&k, &v) in kinds.iter().zip(items) {
                    field(&mut f, a, k, v)?;
                }
            }
            None => {
                for kv in items.chunks_exact(2) {
                    field(&mut f, a, self.key(a, kv[0]), kv[1])?;
                }
            }
        }
        let Fields {
            mut e,
            action,
            frames,
            pool,
        } = f;
        if let Some(pair) = pool {
            e.set_pool(Some(self.intern_pool(pair)));
        }
        let Val::Node(action) = action? else {
            return None;
        };
        // Every entry names one of a few shared action strings.
        // Hashed: the few action strings are nodes made close together,
        // whose numbers may share their low bits.
        let slot = (action.wrapping_mul(0x9e37_79b9) >> 28) as usize % ACTION_CACHE;
        e.action = if self.actions[slot].0 == action {
            self.actions[slot].1
        } else {
            let Node::Str(name) = a.get(action) else {
                return None;
            };
            // An unknown action (rare) is numbered by the arena path.
            let parsed = Action::parse(name)?;
            self.actions[slot] = (action, parsed);
            parsed
        };
        if let Some(v) = frames {
            e.frames = StackId(self.frames(a, v)?);
        }
        Some(e)
    }
}

impl Sink for TraceSink {
    fn list_created(&mut self, a: &Arena, stack: &[Val], marks: &[usize], list: Vid) {
        let p = stack.len() - 1;
        // `device_traces` (or `traces`, as `_memory_viz.py` names it): a value
        // of the top-level dict, right above its key.
        let root_value = match marks {
            [] => p == 2,
            [1] => p >= 2 && p.is_multiple_of(2),
            _ => false,
        };
        if root_value
            && matches!(stack[0], Val::Node(r) if matches!(a.get(r), Node::Dict(_)))
            && matches!(stack[p - 1], Val::Node(k) if matches!(a.get(k), Node::Str(s) if &**s == "device_traces" || &**s == "traces"))
        {
            self.dt.push(list);
            return;
        }
        // A device's trace: the only item of `device_traces`, or one of a
        // batch of lists over its MARK.
        let in_dt = (p >= 1 && self.is_dt(stack[p - 1]))
            || marks.last().is_some_and(|&m| {
                m >= 1
                    && m <= p
                    && self.is_dt(stack[m - 1])
                    && stack[m..p].iter().all(|v| self.trace_list(*v).is_some())
            });
        if in_dt {
            self.trace_lists.push((list, self.lists.len() as u32));
            self.lists.push(Events::default());
        }
    }

    /// The `frames` list of an entry this sink will take goes straight into
    /// the stack table, its items never copied into the arena.
    fn list_filled(
        &mut self,
        a: &Arena,
        stack: &[Val],
        marks: &[usize],
        items: &[Vid],
    ) -> Option<Node> {
        if self.trace_lists.is_empty() {
            return None;
        }
        let p = stack.len().checked_sub(1)?;
        let &m = marks.last()?;
        // [..., entry, MARK, key, value, ..., "frames", list]
        if p < 2
            || m < 1
            || m > p - 1
            || (p - m) % 2 != 1
            || self.key(a, stack[p - 1]) != Key::Frames
        {
            return None;
        }
        let e = m - 1;
        if !matches!(stack[e], Val::Node(d) if matches!(a.get(d), Node::Dict(v) if v.is_empty())) {
            return None;
        }
        self.owner(a, &stack[..=e], &marks[..marks.len() - 1], e)?;
        Some(Node::Stack(self.intern_stack(items)))
    }

    fn dict_filled(
        &mut self,
        a: &mut Arena,
        stack: &[Val],
        marks: &[usize],
        dict_pos: usize,
        items: &[Val],
    ) -> Option<Node> {
        if self.trace_lists.is_empty() {
            return None;
        }
        let l = self.owner(a, stack, marks, dict_pos)?;
        let i = self.take_entry(a, l, items, None)?;
        Some(Node::Record(l, i))
    }

    fn fast_entries(&self) -> bool {
        self.fast
    }

    fn entry_owner(&mut self, a: &Arena, stack: &[Val], marks: &[usize]) -> Option<u32> {
        if self.trace_lists.is_empty() {
            return None;
        }
        self.owner(a, stack, marks, stack.len())
    }

    fn take_entry(
        &mut self,
        a: &mut Arena,
        l: u32,
        items: &[Val],
        shape: Option<u32>,
    ) -> Option<u32> {
        let e = self.event(a, items, shape)?;
        let list = &mut self.lists[l as usize];
        list.push(e);
        Some((list.events.len() - 1) as u32)
    }

    fn entry_shape(&mut self, a: &Arena, items: &[Val]) -> Option<u32> {
        let keys = items.iter().step_by(2);
        if let Some(n) = self
            .shapes
            .iter()
            .position(|s| s.keys.len() == items.len() / 2 && keys.clone().eq(s.keys.iter()))
        {
            return Some(n as u32);
        }
        if self.shapes.len() >= MAX_SHAPES {
            return None;
        }
        let kinds = keys.clone().map(|&k| self.key(a, k)).collect();
        self.shapes.push(KeySet {
            keys: keys.copied().collect(),
            kinds,
        });
        Some(self.shapes.len() as u32 - 1)
    }

    fn take_stack(&mut self, items: &[Vid]) -> Option<u32> {
        Some(self.intern_stack(items))
    }

    /// A [`Node::Trace`] is read whole only as an item of the list the
    /// schema layer reads as `device_traces`, named nowhere else; any other
    /// becomes the list of records it stands for.
    fn finish(&mut self, a: &Arena, root: Vid) -> Vec<Vid> {
        let mut seen: HashMap<Vid, (u32, u32), FxBuild> = a
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n, Node::Trace(..)))
            .map(|(v, _)| (v as Vid, (0, 0)))
            .collect();
        if seen.is_empty() {
            return Vec::new();
        }
        let mut count = |v: Vid| {
            if let Some(c) = seen.get_mut(&v) {
                c.0 += 1;
            }
        };
        count(root);
        for n in &a.nodes {
            match n {
                Node::List(v) => v.iter().for_each(|&c| count(c)),
                Node::Tuple(v) => v.iter().for_each(|&c| count(c)),
                Node::Dict(d) => d.iter().for_each(|&(k, v)| {
                    count(k);
                    count(v)
                }),
                _ => {}
            }
        }
        for st in &self.pstacks {
            st.iter().for_each(|&c| count(c));
        }
        // The value `from_arena_with` takes: the last of these keys.
        let dt = match a.get(root) {
            Node::Dict(d) => d
                .iter()
                .rev()
                .find(|(k, _)| matches!(a.as_str(*k), Some("device_traces" | "traces")))
                .map(|&(_, v)| v),
            _ => None,
        };
        if let Some(dt) = dt
            && let Node::List(items) = a.get(dt)
        {
            for c in items {
                if let Some(c) = seen.get_mut(c) {
                    c.1 += 1;
                }
            }
        }
        let mut out: Vec<Vid> = seen
            .into_iter()
            .filter(|(_, (refs, clean))| (*refs, *clean) != (1, 1))
            .map(|(v, _)| v)
            .collect();
        out.sort_unstable();
        out
    }
}
