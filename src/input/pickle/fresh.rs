//! Frames lists whose frames (all or some) are dicts written where the
//! list is, not references to dicts written once: what a file holds when
//! the program that wrote it built each entry's frames anew (a converter,
//! a generator of its own) instead of sharing them as PyTorch does. Read as the general
//! machine reads them, every such dict would stay a node (and its line
//! number another) for the rest of the file: several times the file's size.
//!
//! The bytes of such a list name its frames as surely as a list of
//! references does. Read with each memo index it spells made relative (a
//! PUT is always of the next index, a reference to a value of the list
//! itself is counted from the list's first), the same bytes are the same
//! frames wherever they stand, provided every other reference is to a
//! value before the entry and the memo was not written over since. The
//! first reading makes the frames' nodes (an equal dict read before is the
//! same node) and takes the stack; a later one finds both by the bytes and
//! only stores its memo entries, naming the nodes of the first. Values are
//! immutable but for a dict's items: a SETITEM on a dict made here (which
//! PyTorch never writes) is refused, so sharing them stays invisible.

use super::frames::{Cached, FramesCache};
use super::literals::{long_from_le, small_int};
use super::ops::string_node;
use super::{NO_MEMO, StrIndex, TAG, Val};
use crate::input::value::{Arena, Node, Vid};
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// Lists read before, by their bytes, and the dicts made for them.
pub(super) struct FreshCache {
    index: HashTable<u32>,
    lists: Vec<FreshList>,
    hits: usize,
    /// The dicts made here, by their items (keys all nodes): an equal dict
    /// of another list is the same node.
    dicts: HashTable<Vid>,
    /// One bit a node: made here (see the module's note on SETITEM).
    made: Vec<u64>,
    /// Scratch: the spelled indices of the list read last, and its bytes
    /// with them made relative.
    patches: Vec<(usize, u8, u32)>,
    key: Vec<u8>,
    items: Vec<Item>,
    pending: Option<Pending>,
    /// Seeded per cache: the bytes come from the file.
    hasher: foldhash::fast::RandomState,
}

struct FreshList {
    hash: u64,
    /// From the first frame to the APPENDS, exclusive, indices made
    /// relative.
    bytes: Box<[u8]>,
    /// The memo entries the list's values made, in order.
    memo: Box<[u32]>,
    stack: u32,
    /// The memo's generation ([`super::Vm::f_gen`]) when read.
    generation: u32,
    /// [`Seen::values`].
    values: u64,
}

/// An item of a dict being made: a node, or a scalar that gets one only
/// if the dict is new.
#[derive(Clone, Copy, PartialEq, Hash)]
enum Item {
    Node(Vid),
    Int(i64),
    /// The bits of a float: equal bits, equal value for sharing.
    Float(u64),
    Bool(bool),
    None,
    BigInt,
}

/// Lists cached before the cache must pay for itself: past this many, a
/// list is cached only while lists were found again at least as often as
/// they were cached, so a file whose lists never repeat costs no more
/// than this many copies of them.
const FREE_LISTS: usize = 4096;

/// Marks a list of this cache where the frames cache keeps a stack.
pub(super) const FRESH: u32 = 1 << 31;

/// Opcodes of no pickle, standing in a cached list's bytes for a memo
/// index made relative: BINGET, LONG_BINGET, BINPUT, LONG_BINPUT.
const REL_GET: u8 = 0xf0;
const REL_LONG_GET: u8 = 0xf1;
const REL_PUT: u8 = 0xf2;
const REL_LONG_PUT: u8 = 0xf3;

impl FreshCache {
    pub(super) fn new() -> FreshCache {
        FreshCache {
            index: HashTable::new(),
            lists: Vec::new(),
            hits: 0,
            dicts: HashTable::new(),
            made: Vec::new(),
            patches: Vec::new(),
            key: Vec::new(),
            items: Vec::new(),
            pending: None,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// Forgets every list (when generations wrap around).
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.lists.clear();
        self.hits = 0;
        self.pending = None;
    }

    /// Whether node `v` is a dict made here.
    pub(super) fn made(&self, v: Vid) -> bool {
        let v = v as usize;
        self.made
            .get(v / 64)
            .is_some_and(|w| w >> (v % 64) & 1 == 1)
    }

    fn mark(&mut self, v: Vid) {
        let v = v as usize;
        if self.made.len() <= v / 64 {
            self.made.resize(v / 64 + 1, 0);
        }
        self.made[v / 64] |= 1 << (v % 64);
    }
}

/// What the fast path lends [`read`]: the memo before the entry, the
/// entry's memo entries so far, and where nodes are made.
pub(super) struct Parts<'a> {
    pub memo: &'a [u32],
    pub f_memo: &'a mut Vec<u32>,
    pub arena: &'a mut Arena,
    pub strings: &'a mut StrIndex,
    /// Receives the list's frames, for the sink to take as a stack.
    pub frames: &'a mut Vec<Vid>,
    pub generation: u32,
}

/// Reads the frames list whose items start at `b[from]` (just after its
/// MARK; `set` is [`super::frames::frames_set`] of them), its memo entries
/// pushed on `f_memo`: the index just past its APPENDS, with the sink's
/// stack for it when it was read before. Else its
/// frames' nodes are on `frames`, for the sink to take as a stack and
/// [`FreshCache::commit`] to keep with the list. `None` when the general
/// machine must read the entry: nodes made on the way stay, unnamed. Out of
/// line: the fast path that calls it is tight on registers.
#[inline(never)]
pub(super) fn read(
    c: &mut FreshCache,
    fc: &mut FramesCache,
    mut p: Parts<'_>,
    b: &[u8],
    from: usize,
    set: Option<usize>,
) -> Option<(Option<u32>, usize)> {
    c.pending = None;
    // A list of these very bytes read before (the frames cache holds
    // those whose bytes are their key, found without reading them).
    if let Some(set) = set
        && let Some((k, end)) = fc.find(b, from, set, p.generation)
        && let Some(l) = (k & FRESH != 0)
            .then(|| c.lists.get((k & !FRESH) as usize))
            .flatten()
    {
        p.f_memo.extend_from_slice(&l.memo);
        p.arena.taken += l.values;
        c.hits += 1;
        return Some((Some(l.stack), end));
    }
    let seen = walk(c, b, from, &mut p, false)?;
    let raw = &b[from..seen.end];
    let bytes: &[u8] = if c.patches.is_empty() {
        raw
    } else {
        c.key.clear();
        c.key.extend_from_slice(raw);
        for &(at, len, v) in &c.patches {
            let at = at - from;
            c.key[at] = match c.key[at] {
                b'h' => REL_GET,
                b'j' => REL_LONG_GET,
                b'q' => REL_PUT,
                _ => REL_LONG_PUT,
            };
            let len = len as usize;
            c.key[at + 1..at + 1 + len].copy_from_slice(&v.to_le_bytes()[..len]);
        }
        &c.key
    };
    let hash = c.hasher.hash_one(bytes);
    let lists = &c.lists;
    let found = (c.index.find(hash, |&k| *lists[k as usize].bytes == *bytes)).map(|&k| k as usize);
    if let Some(k) = found
        && lists[k].generation == p.generation
    {
        p.f_memo.extend_from_slice(&lists[k].memo);
        p.arena.taken += seen.values;
        c.hits += 1;
        if let Some(set) = set
            && c.patches.is_empty()
        {
            fc.insert(set, raw, FRESH | k as u32, p.generation, Cached::Fresh);
        }
        return Some((Some(lists[k].stack), seen.end + 1));
    }
    let room = c.lists.len() < FREE_LISTS || c.hits >= c.lists.len();
    let keep = found.is_some() || (seen.cacheable && room);
    let list_bytes: Option<Box<[u8]>> = keep.then(|| bytes.into());
    let start = p.f_memo.len();
    p.frames.clear();
    walk(c, b, from, &mut p, true)?;
    if let Some(bytes) = list_bytes {
        c.pending = Some(Pending {
            hash,
            bytes,
            memo: start..p.f_memo.len(),
            generation: p.generation,
            found,
            values: seen.values,
            set: set.filter(|_| c.patches.is_empty()),
        });
    }
    Some((None, seen.end + 1))
}

/// A list read for the first time, kept once the sink has taken its stack.
struct Pending {
    hash: u64,
    bytes: Box<[u8]>,
    /// Its memo entries, in the entry's.
    memo: std::ops::Range<usize>,
    generation: u32,
    /// Where the same bytes were cached in an older generation.
    found: Option<usize>,
    values: u64,
    /// The frames cache's set for it, when its bytes are its key.
    set: Option<usize>,
}

impl FreshCache {
    /// Keeps the list [`read`] read last, if it is to be kept, with
    /// `stack`, the sink's stack for its frames; `f_memo` holds its memo
    /// entries where they were pushed.
    pub(super) fn commit(&mut self, stack: u32, f_memo: &[u32], fc: &mut FramesCache) {
        let Some(p) = self.pending.take() else { return };
        let list = FreshList {
            hash: p.hash,
            bytes: p.bytes,
            memo: f_memo[p.memo].into(),
            stack,
            generation: p.generation,
            values: p.values,
        };
        let k = match p.found {
            // Read in an older generation: the same bytes now name new values.
            Some(k) => {
                self.lists[k] = list;
                k
            }
            None => {
                let k = self.lists.len();
                self.lists.push(list);
                let lists = &self.lists;
                (self.index).insert_unique(p.hash, k as u32, |&j| lists[j as usize].hash);
                k
            }
        };
        if let Some(set) = p.set {
            fc.insert(
                set,
                &self.lists[k].bytes,
                FRESH | k as u32,
                p.generation,
                Cached::Fresh,
            );
        }
    }
}

/// What [`walk`] found of a list.
struct Seen {
    /// The index of its APPENDS.
    end: usize,
    /// Whether the same bytes elsewhere (indices made relative) would be
    /// the same values: every other reference to a value before the entry,
    /// no FRAME opcode among them.
    cacheable: bool,
    /// Values read that have no node of their own when the list is found
    /// again (its dicts and numbers): for [`Arena::taken`].
    values: u64,
}

/// One pass over a list of dicts of scalars from `b[from]` to its APPENDS.
/// With `make`, as the general machine would read it (a node for each
/// dict and each number in one, equal strings one node) but for an equal
/// dict read before, which is the same node; each memo entry pushed on
/// `f_memo`, each dict on `frames`. Without, it finds the end, the indices
/// to make relative (`c.patches`) and what the bytes alone can show.
fn walk(c: &mut FreshCache, b: &[u8], from: usize, p: &mut Parts<'_>, make: bool) -> Option<Seen> {
    let memo_len = p.memo.len();
    // The memo index of the list's first new value, and of the next.
    let base = memo_len + p.f_memo.len();
    let mut next = base;
    let mut seen = Seen {
        end: 0,
        cacheable: true,
        values: 0,
    };
    c.patches.clear();
    let mut i = from;
    loop {
        let op = *b.get(i)?;
        match op {
            0x95 => {
                i += 9;
                seen.cacheable = false;
                continue;
            }
            b'e' => break,
            b'}' => i += 1,
            // A frame written before: a reference among the dicts.
            b'h' | b'j' => {
                let at = i;
                i += 1;
                if let Some(v) = named(c, p, &mut seen, b, (at, &mut i), base..next, make)?
                    && make
                {
                    p.frames.push(v);
                }
                continue;
            }
            _ => return None,
        }
        // A dict: `}`, its memo opcode, then `(` keys and values `u`, or
        // nothing (an empty dict).
        let memoized = memo_op(c, b, &mut i, next)?;
        let slot = p.f_memo.len();
        if memoized {
            next += 1;
            if make {
                // Filled once the dict is made; nothing may name it before.
                p.f_memo.push(NO_MEMO);
            }
        }
        c.items.clear();
        let mut n_items = 0usize;
        while b.get(i) == Some(&0x95) {
            i += 9;
            seen.cacheable = false;
        }
        if b.get(i) == Some(&b'(') {
            i += 1;
            loop {
                let op = *b.get(i)?;
                i += 1;
                n_items += 1;
                let item = match op {
                    b'u' => {
                        n_items -= 1;
                        break;
                    }
                    0x95 => {
                        i += 8;
                        n_items -= 1;
                        seen.cacheable = false;
                        continue;
                    }
                    b'h' | b'j' => {
                        match named(c, p, &mut seen, b, (i - 1, &mut i), base..next, make)? {
                            Some(v) => Item::Node(v),
                            None => continue,
                        }
                    }
                    0x8c | b'X' => {
                        let w = if op == 0x8c { 1 } else { 4 };
                        let n = index(b, i, w)?;
                        let text = b.get(i + w..(i + w).checked_add(n)?)?;
                        i += w + n;
                        let memoized = memo_op(c, b, &mut i, next)?;
                        next += memoized as usize;
                        if !make {
                            continue;
                        }
                        let id = string_node(p.strings, p.arena, std::str::from_utf8(text).ok()?);
                        if memoized {
                            p.f_memo.push(id);
                        }
                        Item::Node(id)
                    }
                    _ => {
                        let (v, len) = scalar(op, &b[i..])?;
                        i += len;
                        seen.values += 1;
                        v
                    }
                };
                if make {
                    c.items.push(item);
                }
            }
        } else if !matches!(b.get(i), Some(b'}' | b'e')) {
            return None;
        }
        if !n_items.is_multiple_of(2) {
            return None;
        }
        seen.values += 1;
        if make {
            let id = make_dict(c, p.arena);
            if memoized {
                p.f_memo[slot] = id;
            }
            p.frames.push(id);
        }
    }
    seen.end = i;
    Some(seen)
}

/// The node the memo reference whose opcode is at `b[at]` names, its index
/// read and `*i` moved past it; `Some(None)` where [`walk`] without `make`
/// cannot know it (a value of the entry); `None` for one the fast path
/// does not take. An index of the list's own values (`list`, from its
/// first) is made relative in the key; any other past the memo before the
/// entry makes the list one not to cache.
#[inline]
fn named(
    c: &mut FreshCache,
    p: &Parts<'_>,
    seen: &mut Seen,
    b: &[u8],
    (at, i): (usize, &mut usize),
    list: std::ops::Range<usize>,
    make: bool,
) -> Option<Option<Vid>> {
    let w = if b[at] == b'h' { 1 } else { 4 };
    let idx = index(b, at + 1, w)?;
    *i = at + 1 + w;
    let memo_len = p.memo.len();
    let v = if idx < memo_len {
        p.memo[idx]
    } else {
        if list.contains(&idx) {
            c.patches.push((at, w as u8, (idx - list.start) as u32));
        } else {
            seen.cacheable = false;
        }
        if !make {
            return Some(None);
        }
        *p.f_memo.get(idx - memo_len)?
    };
    (v < TAG).then_some(Some(v))
}

/// The dict of `c.items`: the node made before for equal items whose keys
/// are all nodes, else a new one (with a node for each scalar).
fn make_dict(c: &mut FreshCache, arena: &mut Arena) -> Vid {
    // A value that is a node of a scalar (a memoized number) is that
    // scalar, as [`items_of`] reads a dict back.
    for kv in c.items.chunks_exact_mut(2) {
        if let Item::Node(v) = kv[1] {
            kv[1] = item(&arena.nodes, v);
        }
    }
    let items = &c.items;
    let keyed = items.iter().step_by(2).all(|k| matches!(k, Item::Node(_)));
    let hash = c.hasher.hash_one(items);
    let same = |&d: &Vid| match arena.get(d) {
        Node::Dict(pairs) => {
            pairs.len() * 2 == items.len()
                && (pairs.iter().zip(items.chunks_exact(2)))
                    .all(|(&(k, v), kv)| kv[0] == Item::Node(k) && kv[1] == item(&arena.nodes, v))
        }
        _ => false,
    };
    if keyed && let Some(&d) = c.dicts.find(hash, same) {
        return d;
    }
    let vid = |arena: &mut Arena, it: Item| match it {
        Item::Node(v) => v,
        Item::Int(n) => arena.push(Node::Int(n)),
        Item::Float(x) => arena.push(Node::Float(f64::from_bits(x))),
        Item::Bool(x) => arena.push(Node::Bool(x)),
        Item::None => arena.push(Node::None),
        Item::BigInt => arena.push(Node::BigInt),
    };
    let pairs = (c.items.chunks_exact(2))
        .map(|kv| (vid(arena, kv[0]), vid(arena, kv[1])))
        .collect();
    let d = arena.push(Node::Dict(pairs));
    c.mark(d);
    if keyed {
        let (hasher, nodes) = (&c.hasher, &arena.nodes);
        c.dicts
            .insert_unique(hash, d, |&x| hasher.hash_one(items_of(nodes, x)));
    }
    d
}

/// Node `v` as a dict's value: its scalar, or the node.
fn item(nodes: &[Node], v: Vid) -> Item {
    match nodes[v as usize] {
        Node::Int(n) => Item::Int(n),
        Node::Float(x) => Item::Float(x.to_bits()),
        Node::Bool(x) => Item::Bool(x),
        Node::None => Item::None,
        Node::BigInt => Item::BigInt,
        _ => Item::Node(v),
    }
}

/// The items of a dict made here, as [`make_dict`] hashes them.
fn items_of(nodes: &[Node], d: Vid) -> Vec<Item> {
    match &nodes[d as usize] {
        Node::Dict(pairs) => (pairs.iter())
            .flat_map(|&(k, v)| [Item::Node(k), item(nodes, v)])
            .collect(),
        _ => Vec::new(),
    }
}

/// MEMOIZE, or BINPUT/LONG_BINPUT of index `next` (whose index the key
/// makes relative): whether one is at `b[*i]`; `None` for a PUT elsewhere.
#[inline]
fn memo_op(c: &mut FreshCache, b: &[u8], i: &mut usize, next: usize) -> Option<bool> {
    let w = match b.get(*i) {
        Some(0x94) => {
            *i += 1;
            return Some(true);
        }
        Some(b'q') => 1,
        Some(b'r') => 4,
        _ => return Some(false),
    };
    (index(b, *i + 1, w)? == next).then_some(())?;
    c.patches.push((*i, w as u8, 0));
    *i += 1 + w;
    Some(true)
}

/// The index or length of `w` bytes (1 or 4) at `b[i]`.
#[inline(always)]
fn index(b: &[u8], i: usize, w: usize) -> Option<usize> {
    Some(match w {
        1 => *b.get(i)? as usize,
        _ => u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?) as usize,
    })
}

/// A number, None or a bool written as opcode `op` with the bytes `b`
/// after it: the item and how many of those bytes it took.
#[inline]
fn scalar(op: u8, b: &[u8]) -> Option<(Item, usize)> {
    let int = |v: Val| match v {
        Val::Int(n) => Item::Int(n),
        _ => Item::BigInt,
    };
    Some(match op {
        b'K' | b'M' | b'J' | 0x8a => match small_int(op, b) {
            Some((n, len)) => (Item::Int(n), len),
            // A LONG1 of more than 8 bytes.
            None if op == 0x8a => {
                let n = *b.first()? as usize;
                (int(long_from_le(b.get(1..1 + n)?)), 1 + n)
            }
            None => return None,
        },
        b'N' => (Item::None, 0),
        0x88 | 0x89 => (Item::Bool(op == 0x88), 0),
        b'G' => (
            Item::Float(f64::from_be_bytes(b.get(..8)?.try_into().ok()?).to_bits()),
            8,
        ),
        _ => return None,
    })
}
