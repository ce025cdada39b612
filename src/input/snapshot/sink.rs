//! The [`TraceSink`]: takes each trace entry of `device_traces[d]`, and each
//! block of a segment, the moment the pickle machine has its items, builds
//! its [`TraceEvent`] or [`Block`] with provisional ids and leaves a small
//! record behind (or, on the machine's fast path, no node at all).

use super::fields::{BlockFields, Fields, Key, block_field, classify, field};
use super::lists::SinkList;
use crate::core::hash::FxBuild;
use crate::core::table::IdTable;
use crate::input::pickle::{Sink, Val, is_shared_tuple};
use crate::input::value::{Arena, Node, Vid};
use crate::model::*;
use std::collections::HashMap;

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

/// Runs `$f` (giving `Option<()>`) on each item of a record (`$k` what its
/// key is, `$v` its value), returning `None` from the function it is in as
/// soon as `$f` does. With a key set (`$shape`), `$items` are its values
/// alone, else keys and values alternating. A macro rather than a function
/// taking a closure: through a closure, the trace entry's fields went
/// through memory at each item (10 % more of `stats`' instructions).
macro_rules! each_item {
    ($sink:expr, $a:expr, $items:expr, $shape:expr, |$k:ident, $v:ident| $f:expr) => {
        match $shape {
            Some(s) => {
                let kinds = &$sink.shapes.get(s as usize)?.kinds;
                if kinds.len() != $items.len() {
                    return None;
                }
                for (&$k, &$v) in kinds.iter().zip($items) {
                    $f?;
                }
            }
            None => {
                for kv in $items.chunks_exact(2) {
                    let ($k, $v) = ($sink.key($a, kv[0]), kv[1]);
                    $f?;
                }
            }
        }
    };
}

/// [`TraceSink::into_parts`]: what the sink's entries' provisional ids
/// number.
pub(super) struct Parts {
    /// Frames lists.
    pub stacks: Vec<Box<[Vid]>>,
    /// Trace entries per list.
    pub lists: Vec<SinkList>,
    pub pools: Vec<(i64, i64)>,
    /// Combinations of extras.
    pub extras: Vec<EventExtras>,
    /// Nonzero streams: an entry's provisional stream `i` names
    /// `streams[i - 1]`, as [`StreamIdx`] does.
    pub streams: Vec<i64>,
}

/// Takes the dicts of `device_traces[d]` while a pickle is read (see the
/// module doc). The entries it builds hold provisional ids: `frames` is one
/// more than a number in its stack table (0 = no frames), string ids are
/// arena node numbers.
pub struct TraceSink {
    /// `device_traces` (normally one list).
    dt: Vec<Vid>,
    /// Per-device trace lists and their number in `lists`.
    trace_lists: Vec<(Vid, u32)>,
    /// Lists of segments: the top-level list or the value of `segments`.
    segment_lists: Vec<Vid>,
    /// The block list made last and its number in `lists`: PyTorch writes
    /// a segment's blocks right after its list, so only that one is
    /// filled (a block of another goes to the arena).
    blocks: Option<(Vid, u32)>,
    lists: Vec<SinkList>,
    /// Whether new trace lists are tallied rather than kept.
    tally: bool,
    pstacks: IdTable<Box<[Vid]>, FxBuild>,
    /// The number of the empty stack, once it has one.
    pstack_empty: Option<u32>,
    /// Pool ids by provisional number.
    ppools: Vec<(i64, i64)>,
    ppool_ix: HashMap<(i64, i64), u32, FxBuild>,
    /// Combinations of extras by provisional number (string ids are arena
    /// nodes, pools provisional numbers), and the last one named, which
    /// the next entry nearly always names again.
    pextras: IdTable<EventExtras, FxBuild>,
    last_extras: Option<(EventExtras, u32)>,
    /// Nonzero streams by provisional number, and the last one named.
    pstreams: Vec<i64>,
    pstream_ix: HashMap<i64, u32, FxBuild>,
    last_stream: (i64, StreamIdx),
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

impl Default for TraceSink {
    fn default() -> Self {
        TraceSink {
            dt: Vec::new(),
            trace_lists: Vec::new(),
            segment_lists: Vec::new(),
            blocks: None,
            lists: Vec::new(),
            tally: false,
            pstacks: IdTable::default(),
            pstack_empty: None,
            ppools: Vec::new(),
            ppool_ix: HashMap::default(),
            pextras: IdTable::default(),
            last_extras: None,
            pstreams: Vec::new(),
            pstream_ix: HashMap::default(),
            last_stream: (0, StreamIdx::DEFAULT),
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

    /// A sink that counts each trace list's entries into a
    /// [`Tallier`] and keeps none of them: the schema walk gives empty
    /// traces and their tallies ([`super::summary_from_arena`]).
    pub fn tallying() -> TraceSink {
        TraceSink {
            tally: true,
            ..TraceSink::default()
        }
    }

    fn new_sink_list(&mut self) -> u32 {
        self.lists.push(match self.tally {
            false => SinkList::Kept(Vec::new()),
            true => SinkList::Tallied(Box::default()),
        });
        self.lists.len() as u32 - 1
    }

    /// A new trace list for a reader that finds device traces itself (the
    /// JSON reader): its number, for [`Sink::take_entry`].
    pub(crate) fn new_list(&mut self) -> u32 {
        self.new_sink_list()
    }

    /// The frames of stack `s`, as [`Sink::take_stack`] took them.
    pub(crate) fn stack_items(&self, s: u32) -> &[Vid] {
        &self.pstacks.items()[s as usize]
    }

    /// Trace entries taken so far.
    pub fn entries(&self) -> usize {
        (self.lists.iter().filter(|l| !l.is_blocks()))
            .map(SinkList::len)
            .sum()
    }

    /// Segments' blocks taken so far.
    pub fn blocks(&self) -> usize {
        (self.lists.iter().filter(|l| l.is_blocks()))
            .map(SinkList::len)
            .sum()
    }

    /// What the schema walk takes over once the pickle is read: the frames
    /// lists, the trace entries of each list, the pool table.
    pub(super) fn into_parts(self) -> Parts {
        let TraceSink {
            pstacks,
            lists,
            ppools,
            pextras,
            pstreams,
            ..
        } = self;
        Parts {
            stacks: pstacks.into_items(),
            lists,
            pools: ppools,
            extras: pextras.into_items(),
            streams: pstreams,
        }
    }

    /// The sink list `v` is: a trace list or the block list made last.
    fn trace_list(&self, v: Val) -> Option<u32> {
        let Val::Node(id) = v else { return None };
        if let Some((b, l)) = self.blocks
            && b == id
        {
            return Some(l);
        }
        self.trace_lists
            .iter()
            .find(|(l, _)| *l == id)
            .map(|(_, i)| *i)
    }

    /// Whether records may be taken: a trace or block list was made.
    fn taking(&self) -> bool {
        !self.trace_lists.is_empty() || self.blocks.is_some()
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
    #[inline]
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
        self.owner_found(a, stack, marks, e)
    }

    /// [`TraceSink::owner`] past the next entry of the batch.
    #[inline(never)]
    fn owner_found(&mut self, a: &Arena, stack: &[Val], marks: &[usize], e: usize) -> Option<u32> {
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
        // A recording without stack traces names the empty list at every
        // event: found without a lookup.
        if items.is_empty()
            && let Some(s) = self.pstack_empty
        {
            return s;
        }
        let s = self.intern_stack_by_lookup(items);
        if items.is_empty() {
            self.pstack_empty = Some(s);
        }
        s
    }

    #[inline(never)]
    fn intern_stack_by_lookup(&mut self, items: &[Vid]) -> u32 {
        // Each stack a value of the file's bytes: fewer than ids.
        (self.pstacks.intern(items, |s| s.into())).expect("fewer stacks than ids")
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

    /// The provisional number of a nonzero stream.
    fn intern_stream(&mut self, v: i64) -> StreamIdx {
        if self.last_stream.0 == v {
            return self.last_stream.1;
        }
        let n = self.pstreams.len() as u32 + 1;
        let i = StreamIdx(*self.pstream_ix.entry(v).or_insert(n));
        if i.0 == n {
            self.pstreams.push(v);
        }
        self.last_stream = (v, i);
        i
    }

    /// The provisional number of a combination of extras.
    fn intern_extras(&mut self, x: EventExtras) -> ExtrasIdx {
        if let Some((l, i)) = self.last_extras
            && l == x
        {
            return ExtrasIdx(i);
        }
        let i = self.intern_extras_by_lookup(x);
        self.last_extras = Some((x, i));
        ExtrasIdx(i)
    }

    #[inline(never)]
    fn intern_extras_by_lookup(&mut self, x: EventExtras) -> u32 {
        // Each combination named by an entry of the file: fewer than ids.
        (self.pextras.intern(&x, |x| *x)).expect("fewer combinations than ids")
    }

    /// A frames list (or tuple, as a writer of its own may keep them) as a
    /// stack number (+1), or `None` when the arena path must look at it.
    #[inline(always)]
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
            // Not a tuple the machine shares (a pool id), nor an empty one:
            // frames are dicts.
            Node::Tuple(items)
                if !items.is_empty()
                    && !is_shared_tuple(items, |&x| matches!(a.get(x), Node::Int(_))) =>
            {
                let items = items.clone();
                self.intern_stack(&items)
            }
            _ => return None,
        };
        // The list's items now live in the stack table (a tuple's, read
        // back, are a list's, as the schema walk reads either).
        a.nodes[id as usize] = Node::Stack(s);
        Some(s + 1)
    }

    /// [`Cx::event`] for the common case; `None` for anything it would
    /// coerce, reject or read as a legacy format.
    fn event(&mut self, a: &mut Arena, items: &[Val], shape: Option<u32>) -> Option<TraceEvent> {
        let mut f = Fields {
            e: TraceEvent::new(Action::Alloc, 0, 0, StreamIdx::DEFAULT, StackId(0)),
            x: EventExtras::NONE,
            action: None,
            frames: None,
            pool: None,
            stream: 0,
        };
        each_item!(self, a, items, shape, |k, v| field(&mut f, a, k, v));
        let Fields {
            mut e,
            mut x,
            action,
            frames,
            pool,
            stream,
        } = f;
        if stream != 0 {
            e.stream = self.intern_stream(stream);
        }
        if let Some(pair) = pool {
            x.pool = Some(self.intern_pool(pair));
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
        // An `oom` holds its own device_free.
        if x.device_free.is_some() {
            e.hold_device_free(&mut x);
        }
        if !x.is_none() {
            e.set_extras(Some(self.intern_extras(x)));
        }
        if let Some(v) = frames {
            e.frames = StackId(self.frames(a, v)?);
        }
        Some(e)
    }
}

impl TraceSink {
    /// Whether the list just pushed on `stack` is the `blocks` of a
    /// segment being read: `[…, segments, MARK?, …, segment, MARK, key,
    /// value, …, "blocks", list]`.
    fn is_block_list(&mut self, a: &Arena, stack: &[Val], marks: &[usize]) -> bool {
        let p = stack.len() - 1;
        let Some((&m, outer)) = marks.split_last() else {
            return false;
        };
        if self.segment_lists.is_empty()
            || m < 2
            || m + 1 > p
            || (p - m) % 2 != 1
            || self.key(a, stack[p - 1]) != Key::Blocks
        {
            return false;
        }
        let seg = m - 1;
        let is_segments = |v: Val| matches!(v, Val::Node(id) if self.segment_lists.contains(&id));
        matches!(stack[seg], Val::Node(d) if matches!(a.get(d), Node::Dict(v) if v.is_empty()))
            && (is_segments(stack[seg - 1])
                || outer
                    .last()
                    .is_some_and(|&m2| m2 >= 1 && m2 <= seg && is_segments(stack[m2 - 1])))
    }

    /// [`Sink::take_entry`] for a block list: the block's index, or `None`
    /// for anything [`Cx::block`] would coerce, reject or read as a legacy
    /// format (and a block without an address, which depends on the one
    /// before).
    #[inline(never)]
    fn take_block(
        &mut self,
        a: &mut Arena,
        l: u32,
        items: &[Val],
        shape: Option<u32>,
    ) -> Option<u32> {
        let mut f = BlockFields::default();
        each_item!(self, a, items, shape, |k, v| block_field(&mut f, a, k, v));
        let block = Block {
            address: f.address?,
            size: f.size?,
            requested_size: f.requested,
            state: f.state?,
            frames: StackId(match f.frames {
                Some(v) => self.frames(a, v)?,
                None => 0,
            }),
        };
        let SinkList::Blocks(v) = &mut self.lists[l as usize] else {
            return None;
        };
        v.push(block);
        // The block's keys and values, which the arena would have held, count
        // towards the expansion budget as its nodes and references did.
        a.taken += items.len() as u64;
        Some(v.len() as u32 - 1)
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
        let root_key = |name: &str| {
            root_value
                && matches!(stack[0], Val::Node(r) if matches!(a.get(r), Node::Dict(_)))
                && matches!(stack[p - 1], Val::Node(k) if a.as_str(k) == Some(name))
        };
        if root_key("device_traces") || root_key("traces") {
            self.dt.push(list);
            return;
        }
        // The segments: the top-level list, or the value of `segments`.
        if p == 0 || root_key("segments") {
            self.segment_lists.push(list);
            return;
        }
        if self.is_block_list(a, stack, marks) {
            // The list before is filled: its growth's spare room goes back
            // (in place), so only the open list holds any.
            if let Some((_, before)) = self.blocks
                && let SinkList::Blocks(v) = &mut self.lists[before as usize]
            {
                v.shrink_to_fit();
            }
            let n = self.lists.len() as u32;
            self.lists.push(SinkList::Blocks(Vec::new()));
            self.blocks = Some((list, n));
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
            let n = self.new_sink_list();
            self.trace_lists.push((list, n));
        }
    }

    /// The `frames` list of an entry or block this sink will take goes straight into
    /// the stack table, its items never copied into the arena.
    fn list_filled(
        &mut self,
        a: &Arena,
        stack: &[Val],
        marks: &[usize],
        items: &[Vid],
    ) -> Option<Node> {
        if !self.taking() {
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
        if !self.taking() {
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
        if !self.taking() {
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
        if self.lists.get(l as usize)?.is_blocks() {
            return self.take_block(a, l, items, shape);
        }
        let e = self.event(a, items, shape)?;
        let pextras = self.pextras.items();
        let list = &mut self.lists[l as usize];
        Some(list.push(e, |x| pextras[x.0 as usize].device_free))
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
        // The trace nodes, ascending, each with the references to it and
        // those from the `device_traces` list. There are a few (one a
        // device), and every child of every container is looked up: a
        // range test and a binary search, no hashing.
        // A segment's block list is read wherever it is named.
        let mut seen: Vec<(Vid, u32, u32)> = (a.nodes.iter().enumerate())
            .filter(|(_, n)| matches!(n, Node::Trace(l, _) if !self.lists[*l as usize].is_blocks()))
            .map(|(v, _)| (v as Vid, 0, 0))
            .collect();
        let (Some(&(lo, ..)), Some(&(hi, ..))) = (seen.first(), seen.last()) else {
            return Vec::new();
        };
        let mut count = |v: Vid, clean: bool| {
            if (lo..=hi).contains(&v)
                && let Ok(i) = seen.binary_search_by_key(&v, |s| s.0)
            {
                match clean {
                    false => seen[i].1 += 1,
                    true => seen[i].2 += 1,
                }
            }
        };
        count(root, false);
        for n in &a.nodes {
            match n {
                Node::List(v) => v.iter().for_each(|&c| count(c, false)),
                Node::Tuple(v) => v.iter().for_each(|&c| count(c, false)),
                Node::Dict(d) => d.iter().for_each(|&(k, v)| {
                    count(k, false);
                    count(v, false)
                }),
                _ => {}
            }
        }
        for st in self.pstacks.items() {
            st.iter().for_each(|&c| count(c, false));
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
            for &c in items {
                count(c, true);
            }
        }
        // Ascending, as `seen` is.
        (seen.into_iter())
            .filter(|&(_, refs, clean)| (refs, clean) != (1, 1))
            .map(|(v, ..)| v)
            .collect()
    }
}
