//! The fast path for trace entries and frames lists: the bytes CPython's
//! pickler writes for them, read straight into the sink's records with no
//! value stack and no node, or left, unchanged, to the general machine.

use super::frames::{Cached, frames_set, le_word, references_end};
use super::fresh;
use super::literals::{long_from_le, sign_extend, small_int};
use super::ops::{string_node, tuple_node};
use super::window::Feed;
use super::{
    ENTRY_MAX, NO_MEMO, PAYLOAD, PENDING_DICT, PENDING_LIST, Sink, TAG, TAG_STACK, Val, Vm,
};
use crate::input::value::{Arena, Node, Vid};

impl<F: Feed, S: Sink> Vm<'_, F, S> {
    /// CPython writes a list of shared objects (a stack's frames) as
    /// `MEMOIZE MARK` (`BINGET n` | `LONG_BINGET n`)… `APPENDS`. When the
    /// window holds all of that after the new list `id`, it is read here in
    /// one pass, with the effect the opcodes would have; anything else (and a
    /// reference the memo does not hold) is left to the dispatch loop.
    #[inline]
    pub(super) fn list_of_references(&mut self, id: Vid) {
        let buf = &self.inp.window()[self.inp.pos..];
        if buf.len() < 3 || buf[0] != 0x94 || buf[1] != b'(' {
            return;
        }
        let mut i = 2;
        let items = &mut self.scratch;
        items.clear();
        loop {
            let idx = match buf.get(i) {
                Some(b'h') => match buf.get(i + 1) {
                    Some(&n) => {
                        i += 2;
                        n as usize
                    }
                    None => return,
                },
                Some(b'j') => match buf.get(i + 1..i + 5) {
                    Some(n) => {
                        i += 5;
                        u32::from_le_bytes(n.try_into().expect("4 bytes")) as usize
                    }
                    None => return,
                },
                Some(b'e') => break,
                _ => return,
            };
            match self.memo.get(idx) {
                Some(&v) if v < TAG => items.push(v),
                _ => return,
            }
        }
        self.memo.push(id);
        self.inp.pos += i + 1;
        let node = self
            .sink
            .list_filled(&self.arena, &self.stack, &self.marks, &self.scratch)
            .unwrap_or_else(|| Node::List(self.scratch.clone()));
        self.arena.nodes[id as usize] = node;
    }

    /// The fast path for one trace entry, called just after its
    /// `EMPTY_DICT`: true when the entry was read whole (and stands on the
    /// stack as a [`Val::Record`]); false, with the input back at the byte
    /// after `EMPTY_DICT` and nothing else changed, when the general machine
    /// must read it. Memo entries are numbered exactly as the general
    /// machine numbers them.
    #[inline(never)]
    pub(super) fn entry(&mut self) -> bool {
        let Some(l) = self.sink.entry_owner(&self.arena, &self.stack, &self.marks) else {
            return false;
        };
        if self.records >= PAYLOAD {
            return false;
        }
        if self.inp.end - self.inp.pos < ENTRY_MAX && !self.inp.eof {
            self.inp.fill(ENTRY_MAX);
        }
        let start = self.inp.pos;
        match self.read_entry(l) {
            Some(end) => {
                self.inp.pos = end;
                true
            }
            None => {
                self.inp.pos = start;
                false
            }
        }
    }

    /// [`Vm::entry`] once the window holds the entry: parses it, then hands
    /// it to the sink, then stores its memo entries. The end of the entry.
    ///
    /// One function of about 370 lines on purpose: it reads nearly every
    /// byte of a large file, and its cursor, window and scratch buffers are
    /// locals shared by the closures and the `value!` macro that both
    /// loops (the known shape, then the general one) inline. Split into
    /// functions, that state would travel through memory on every value
    /// (the comments below name stalls measured for less), and any early
    /// `None` (hand the entry back to the general machine) would have to be
    /// passed up through each of them.
    pub(super) fn read_entry(&mut self, l: u32) -> Option<usize> {
        let Vm {
            inp,
            arena,
            memo,
            strings,
            last_str,
            f_items,
            f_memo,
            f_frames,
            f_cache,
            f_gen,
            shape,
            shape_gen,
            f_keys,
            f_items_spare,
            f_fresh,
            tuples,
            ..
        } = self;
        let b = inp.window();
        let mut i = inp.pos;
        f_items.clear();
        f_memo.clear();
        f_frames.clear();
        let memo_len = memo.len();
        // A memo reference as a value: a node or a stack, never a record or
        // an entry of this dict still pending.
        let lookup = |f_memo: &[u32], idx: usize| -> Option<Val> {
            let v = match memo.get(idx) {
                Some(&v) => v,
                None => *f_memo.get(idx - memo_len)?,
            };
            if v < TAG {
                Some(Val::Node(v))
            } else if (TAG_STACK..PENDING_LIST).contains(&v) {
                Some(Val::Stack(v & PAYLOAD))
            } else {
                None
            }
        };
        // MEMOIZE, or BINPUT/LONG_BINPUT of the next index.
        let memo_op = |i: &mut usize, next: usize| -> Option<bool> {
            match b.get(*i) {
                Some(0x94) => {
                    *i += 1;
                    Some(true)
                }
                Some(b'q') => {
                    (*b.get(*i + 1)? as usize == next).then_some(())?;
                    *i += 2;
                    Some(true)
                }
                Some(b'r') => {
                    let n = u32::from_le_bytes(b.get(*i + 1..*i + 5)?.try_into().ok()?);
                    (n as usize == next).then_some(())?;
                    *i += 5;
                    Some(true)
                }
                _ => Some(false),
            }
        };
        // FRAME opcodes may stand between any two others.
        let skip_frames = |i: &mut usize| {
            while b.get(*i) == Some(&0x95) {
                *i += 9;
            }
        };
        let reference = |i: &mut usize| -> Option<usize> {
            match *b.get(*i)? {
                b'h' => {
                    let n = *b.get(*i + 1)? as usize;
                    *i += 2;
                    Some(n)
                }
                b'j' => {
                    let n = u32::from_le_bytes(b.get(*i + 1..*i + 5)?.try_into().ok()?);
                    *i += 5;
                    Some(n as usize)
                }
                _ => None,
            }
        };
        if memo_op(&mut i, memo_len)? {
            f_memo.push(PENDING_DICT);
        }
        skip_frames(&mut i);
        if b.get(i) != Some(&b'(') {
            return None;
        }
        i += 1;
        let mut list_at = None;
        let mut frames_known = None;
        let mut fresh_miss = false;
        let mut cache_at = None;
        // A one-byte integer value just read (`i` past it). Followed by
        // another integer and TUPLE2, it is a pool id, as PyTorch writes one
        // at every entry (a first number past 255 is left, with its entry,
        // to the general machine, which reads it the same): the
        // pair's node is the general machine's for an equal tuple
        // (`Vm::push_tuple`, made once), memoized as CPython memoizes a
        // tuple. Whether the value was memoized.
        macro_rules! int_value {
            ($n:expr, $at_key:expr) => {{
                let n = $n;
                if !$at_key && matches!(b.get(i), Some(b'K' | b'M' | b'J' | 0x8a)) {
                    let (y, end) = int_at(b, i)?;
                    (b.get(end) == Some(&0x86)).then_some(())?;
                    i = end + 1;
                    let id = tuple_node(tuples, arena, [n, y]);
                    f_items.push(Val::Node(id));
                    let memoized = memo_op(&mut i, memo_len + f_memo.len())?;
                    if memoized {
                        f_memo.push(id);
                    }
                    memoized
                } else {
                    f_items.push(Val::Int(n));
                    false
                }
            }};
        }
        // One value from the opcode `$op` just read (at `i - 1`), with the
        // memo opcode after it, pushed on `f_items`: whether it was
        // memoized. Inline in both loops below. Each kind of value is pushed
        // where it is made: a value made in pieces in one place and pushed
        // from another is stored and loaded again whole, which the
        // processor cannot forward from the pieces (a stall a value).
        macro_rules! value {
            ($op:expr, $at_key:expr) => {{
                let op = $op;
                // Memo references, most values, are tested before the table
                // of the other opcodes.
                if op == b'h' {
                    let idx = *b.get(i)? as usize;
                    i += 1;
                    f_items.push(lookup(f_memo, idx)?);
                    false
                } else if op == b'j' {
                    let idx = u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?) as usize;
                    i += 4;
                    f_items.push(lookup(f_memo, idx)?);
                    false
                } else {
                    match op {
                        b'K' => {
                            i += 1;
                            let n = *b.get(i - 1)? as i64;
                            int_value!(n, $at_key)
                        }
                        b'M' => {
                            i += 2;
                            let n = u16::from_le_bytes(b.get(i - 2..i)?.try_into().ok()?);
                            f_items.push(Val::Int(n as i64));
                            false
                        }
                        b'J' => {
                            i += 4;
                            let n = i32::from_le_bytes(b.get(i - 4..i)?.try_into().ok()?);
                            f_items.push(Val::Int(n as i64));
                            false
                        }
                        0x8a => {
                            let n = *b.get(i)? as usize;
                            if n > 8 {
                                return None;
                            }
                            match b.get(i + 1..i + 9) {
                                Some(w) => f_items.push(Val::Int(sign_extend(
                                    u64::from_le_bytes(w.try_into().ok()?),
                                    n,
                                ))),
                                None => f_items.push(long_from_le(b.get(i + 1..i + 1 + n)?)),
                            }
                            i += 1 + n;
                            false
                        }
                        b'N' => {
                            f_items.push(Val::None);
                            false
                        }
                        0x88 | 0x89 => {
                            f_items.push(Val::Bool(op == 0x88));
                            false
                        }
                        b'G' => {
                            i += 8;
                            let x = f64::from_be_bytes(b.get(i - 8..i)?.try_into().ok()?);
                            f_items.push(Val::Float(x));
                            false
                        }
                        0x8c => {
                            let n = *b.get(i)? as usize;
                            let s = b.get(i + 1..i + 1 + n)?;
                            i += 1 + n;
                            // A string not read before gets its node here, as
                            // the general machine makes it (equal strings are
                            // one node, so a general reading of this entry
                            // finds it again): entries that each name a new
                            // string (a step number in `user_metadata`) stay
                            // on this path.
                            let id = if last_str.1 != NO_MEMO && s == &last_str.0[..] {
                                last_str.1
                            } else {
                                let st = std::str::from_utf8(s).ok()?;
                                let id = string_node(strings, arena, st);
                                if n <= 32 {
                                    last_str.0.clear();
                                    last_str.0.extend_from_slice(s);
                                    last_str.1 = id;
                                }
                                id
                            };
                            f_items.push(Val::Node(id));
                            // CPython memoizes strings, not numbers, None or
                            // memo references: a memo opcode after any of
                            // those is read as the next item, which fails,
                            // and the general machine reads the entry.
                            let memoized = memo_op(&mut i, memo_len + f_memo.len())?;
                            if memoized {
                                f_memo.push(id);
                            }
                            memoized
                        }
                        b']' => {
                            if list_at.is_some() || $at_key {
                                return None;
                            }
                            let memoized = memo_op(&mut i, memo_len + f_memo.len())?;
                            if memoized {
                                f_memo.push(PENDING_LIST);
                            }
                            skip_frames(&mut i);
                            match b.get(i) {
                                Some(b'(') => {
                                    i += 1;
                                    // References only, as CPython writes a list of
                                    // shared frames: the bytes name the stack.
                                    let from = i;
                                    // A dict written out among them (or a list
                                    // the frames cache names as one): the list
                                    // is read as one of dicts written out.
                                    let mut fresh_from = None;
                                    // A list seen before is found by its bytes
                                    // without walking them: same bytes (references
                                    // only) followed by APPENDS are the same list.
                                    let set = frames_set(&b[from..]);
                                    if b.get(from) == Some(&b'}') {
                                        fresh_from = Some(from);
                                    } else if let Some(set) = set
                                        && let Some((s, end)) = f_cache.find(b, from, set, *f_gen)
                                    {
                                        if s & fresh::FRESH == 0 {
                                            frames_known = Some(s);
                                            i = end;
                                        } else {
                                            fresh_from = Some(from);
                                        }
                                    }
                                    if frames_known.is_none() && fresh_from.is_none() {
                                        let j = references_end(b, from);
                                        if let Some(set) = set
                                            && b.get(j) == Some(&b'e')
                                        {
                                            match f_cache.find_deep(&b[from..j], *f_gen) {
                                                Ok(s) => {
                                                    f_cache.insert(
                                                        set,
                                                        &b[from..j],
                                                        s,
                                                        *f_gen,
                                                        Cached::Deep,
                                                    );
                                                    frames_known = Some(s);
                                                    i = j + 1;
                                                }
                                                Err(hash) => cache_at = Some((set, from, j, hash)),
                                            }
                                        }
                                    }
                                    while frames_known.is_none() && fresh_from.is_none() {
                                        skip_frames(&mut i);
                                        if b.get(i) == Some(&b'e') {
                                            i += 1;
                                            break;
                                        }
                                        let Some(idx) = reference(&mut i) else {
                                            (b.get(i) == Some(&b'}')).then_some(())?;
                                            fresh_from = Some(from);
                                            break;
                                        };
                                        if idx >= memo_len {
                                            cache_at = None;
                                        }
                                        let Val::Node(v) = lookup(f_memo, idx)? else {
                                            return None;
                                        };
                                        f_frames.push(v);
                                    }
                                    if let Some(from) = fresh_from {
                                        cache_at = None;
                                        let parts = fresh::Parts {
                                            memo,
                                            f_memo,
                                            arena,
                                            strings,
                                            frames: f_frames,
                                            generation: *f_gen,
                                        };
                                        let (s, end) =
                                            fresh::read(f_fresh, f_cache, parts, b, from, set)?;
                                        // A list read before, or one whose
                                        // frames the sink takes below.
                                        frames_known = s;
                                        fresh_miss = s.is_none();
                                        i = end;
                                    }
                                }
                                // One frame: the reference, then APPEND.
                                Some(b'h' | b'j') => {
                                    let mut j = i;
                                    let idx = reference(&mut j)?;
                                    if b.get(j) == Some(&b'a') {
                                        let Val::Node(v) = lookup(f_memo, idx)? else {
                                            return None;
                                        };
                                        f_frames.push(v);
                                        i = j + 1;
                                    }
                                }
                                _ => {}
                            }
                            list_at = Some(f_items.len());
                            f_items.push(Val::Stack(0));
                            false
                        }
                        _ => return None,
                    }
                }
            }};
        }
        f_keys.clear();
        // The keys of `shape`, as far as they match, each read as the bytes
        // it was last time; then the general loop from wherever they stop.
        let mut shaped = 0;
        if *shape_gen == *f_gen {
            // No FRAME opcode is looked for here: one (every 64 KiB of a
            // file) where a key should be fails the comparison, and the
            // general loop below skips it; one where a value should be is
            // no value, and the general machine reads the entry.
            for &(w, n, _) in shape.iter() {
                let Some(x) = b.get(i..i + 8) else { break };
                if u64::from_le_bytes(x.try_into().ok()?) & (u64::MAX >> (64 - 8 * n as u32)) != w {
                    break;
                }
                i += n as usize;
                let op = *b.get(i)?;
                i += 1;
                value!(op, false);
                shaped += 1;
            }
        }
        skip_frames(&mut i);
        // Every key of the shape and nothing after them: `f_items` holds
        // the values alone. Otherwise keys and values alternate from here.
        let shaped = shaped > 0 && shaped == shape.len() && b.get(i) == Some(&b'u');
        if shaped {
            i += 1;
        } else if !f_items.is_empty() {
            std::mem::swap(f_items, f_items_spare);
            f_items.clear();
            for (&(_, _, key), &v) in shape.iter().zip(f_items_spare.iter()) {
                f_items.push(key);
                f_items.push(v);
            }
            f_keys.extend_from_slice(&shape[..f_items_spare.len()]);
            list_at = list_at.map(|k| 2 * k + 1);
        }
        // Whether the keys so far are all memo references (not memoized
        // again), the keys a new shape would hold.
        let mut keys_are_refs = true;
        if !shaped {
            loop {
                skip_frames(&mut i);
                let op = *b.get(i)?;
                if op == b'u' {
                    i += 1;
                    break;
                }
                let at_key = f_items.len() % 2 == 0;
                let from = i;
                i += 1;
                let memoized = value!(op, at_key);
                if at_key && keys_are_refs {
                    keys_are_refs = (op == b'j' || op == b'h') && !memoized;
                    if keys_are_refs {
                        let v = *f_items.last()?;
                        f_keys.push((le_word(&b[from..i]), (i - from) as u8, v));
                    }
                }
            }
        }
        if !shaped && f_items.len() % 2 != 0 {
            return None;
        }
        let new_shape = !shaped && keys_are_refs && f_keys.len() * 2 == f_items.len();
        let mut stack = None;
        if let Some(at) = list_at {
            let s = match frames_known {
                Some(s) => s,
                None => self.sink.take_stack(&self.f_frames)?,
            };
            if s >= PAYLOAD {
                return None;
            }
            if fresh_miss {
                self.f_fresh.commit(s, &self.f_memo, &mut self.f_cache);
            }
            if let Some((set, from, to, hash)) = cache_at
                && self.f_cache.admit()
            {
                let bytes = &self.inp.f.bytes()[from..to];
                self.f_cache.insert(set, bytes, s, self.f_gen, Cached::Read);
                self.f_cache.insert_deep(bytes, hash, s, self.f_gen);
            }
            self.f_items[at] = Val::Stack(s);
            stack = Some(s);
        }
        let idx = self.sink.take_entry(
            &mut self.arena,
            l,
            &self.f_items,
            shaped.then_some(self.shape_id),
        )?;
        if new_shape && let Some(id) = self.sink.entry_shape(&self.arena, &self.f_items) {
            std::mem::swap(&mut self.shape, &mut self.f_keys);
            self.shape_id = id;
            self.shape_gen = self.f_gen;
        }
        let g = self.records;
        self.records += 1;
        match self.runs.last() {
            Some(&(g0, l0, i0)) if l0 == l && i0.wrapping_add(g - g0) == idx => {}
            _ => self.runs.push((g, l, idx)),
        }
        for &v in &self.f_memo {
            self.memo.push(match v {
                PENDING_DICT => TAG | g,
                PENDING_LIST => TAG_STACK | stack.unwrap_or(PAYLOAD),
                v => v,
            });
        }
        self.arena.taken += 1 + stack.is_some() as u64;
        self.stack.push(Val::Record(l, idx));
        Some(i)
    }
}

/// The integer written at `b[at]` (BININT1, BININT2, BININT or a LONG1
/// of at most 8 bytes) and the index past it.
#[inline]
fn int_at(b: &[u8], at: usize) -> Option<(i64, usize)> {
    let (n, len) = small_int(*b.get(at)?, b.get(at + 1..)?)?;
    Some((n, at + 1 + len))
}

/// Records appended, in order, to a list that so far holds the records
/// before them (or nothing): the list stays one [`Node::Trace`]. Records of
/// the general machine (a node each: the first entries, with strings not
/// seen before) count as well. False, with nothing changed, for anything
/// else.
pub(super) fn append_records(arena: &mut Arena, target: Val, items: &[Val]) -> bool {
    let record = |v: &Val| match *v {
        Val::Record(l, i) => Some((l, i)),
        Val::Node(x) => match arena.get(x) {
            Node::Record(l, i) => Some((*l, *i)),
            _ => None,
        },
        _ => None,
    };
    let Val::Node(t) = target else {
        return false;
    };
    let Some((l, first)) = items.first().and_then(record) else {
        return false;
    };
    let (tl, n) = match arena.get(t) {
        Node::List(v) if v.is_empty() => (l, 0),
        Node::Trace(tl, n) => (*tl, *n),
        _ => return false,
    };
    if tl != l || first != n {
        return false;
    }
    let Some(end) = u32::try_from(items.len())
        .ok()
        .and_then(|k| n.checked_add(k))
    else {
        return false;
    };
    let consecutive = items
        .iter()
        .zip(n..end)
        .all(|(v, i)| record(v) == Some((l, i)));
    if !consecutive {
        return false;
    }
    arena.nodes[t as usize] = Node::Trace(l, end);
    true
}
