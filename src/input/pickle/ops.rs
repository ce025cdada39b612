//! The operations the opcodes share: errors at the current offset, reading
//! lengths and strings, the value stack and its MARKs, nodes for values,
//! containers filled in place, and the memo.

use super::window::Feed;
use super::{NO_MEMO, PAYLOAD, PickleError, Sink, StrIndex, TAG, TAG_STACK, Val, Vm};
use crate::core::hash::FxBuild;
use crate::input::value::{Arena, Node, Vid};
use std::collections::HashMap;

/// The node of the string `s`: the one made before for an equal string,
/// or a new one (equal strings are one node). The index holds no copy of
/// the strings; it finds them in the arena. Out of line: the fast path
/// that calls it for a string not met before is tight on registers.
#[inline(never)]
pub(super) fn string_node(strings: &mut StrIndex, arena: &mut Arena, s: &str) -> Vid {
    let h = strings.hash(s);
    if let Some(id) = strings.find_hashed(h, s, |v| text_of(&arena.nodes, v)) {
        return id;
    }
    let id = arena.push(Node::Str(s.into()));
    strings.insert_hashed(h, id);
    id
}

/// The node of the tuple of `ints` (one to three integers, a tuple
/// [`super::is_shared_tuple`] names): the one made before for an equal
/// tuple, else a new one. Cold: the fast path meets a pool id at a few
/// entries of a file or at every one, and finds it in the memo after.
#[cold]
pub(super) fn tuple_node<const N: usize>(
    tuples: &mut HashMap<[i64; 4], Vid, FxBuild>,
    arena: &mut Arena,
    ints: [i64; N],
) -> Vid {
    // The length is part of the value: (0,) and (0, 0) differ.
    let mut key = [N as i64, 0, 0, 0];
    key[1..=N].copy_from_slice(&ints);
    if let Some(&id) = tuples.get(&key) {
        return id;
    }
    let kids: Box<[Vid]> = ints.iter().map(|&n| arena.push(Node::Int(n))).collect();
    let id = arena.push(Node::Tuple(kids));
    tuples.insert(key, id);
    id
}

/// The text of string node `v`, the only kind the string index names.
fn text_of(nodes: &[Node], v: Vid) -> &str {
    match &nodes[v as usize] {
        Node::Str(t) => t,
        _ => unreachable!("the string index names only string nodes"),
    }
}

impl<F: Feed, S: Sink> Vm<'_, F, S> {
    pub(super) fn err_at(&self, offset: u64, msg: impl Into<String>) -> PickleError {
        PickleError {
            offset,
            msg: msg.into(),
        }
    }
    pub(super) fn err(&self, msg: impl Into<String>) -> PickleError {
        self.err_at(self.op_start, msg)
    }
    pub(super) fn truncated(&self) -> PickleError {
        self.err("truncated: the file ends inside an opcode")
    }
    #[inline]
    pub(super) fn byte(&mut self) -> Result<u8, PickleError> {
        match self.inp.byte() {
            Some(b) => Ok(b),
            None => Err(self.truncated()),
        }
    }
    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        self.inp.array::<N>().map_err(|_| self.truncated())
    }
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        if self.inp.end - self.inp.pos < n && !self.inp.fill(n) {
            let left = self.inp.end - self.inp.pos;
            return Err(self.err(format!(
                "length {n} runs past the end of the data ({left} bytes left)"
            )));
        }
        Ok(self.inp.take(n).expect("filled"))
    }
    #[inline]
    pub(super) fn len4(&mut self) -> Result<usize, PickleError> {
        Ok(u32::from_le_bytes(self.array::<4>()?) as usize)
    }
    pub(super) fn len8(&mut self) -> Result<usize, PickleError> {
        let n = u64::from_le_bytes(self.array::<8>()?);
        usize::try_from(n).map_err(|_| self.err(format!("length {n} is larger than the data")))
    }
    /// A protocol-0 text argument (rare and short: copied).
    pub(super) fn line(&mut self) -> Result<Vec<u8>, PickleError> {
        self.inp
            .line()
            .ok_or_else(|| self.err("truncated: no newline after a text argument"))
    }
    #[inline]
    pub(super) fn push_node(&mut self, n: Node) {
        let id = self.arena.push(n);
        self.stack.push(Val::Node(id));
    }
    /// A node for a stack value (scalars become nodes only here).
    #[inline]
    pub(super) fn vid(&mut self, v: Val) -> Vid {
        match v {
            Val::Node(id) => id,
            Val::None => self.arena.push(Node::None),
            Val::Bool(b) => self.arena.push(Node::Bool(b)),
            Val::Int(i) => self.arena.push(Node::Int(i)),
            Val::BigInt => self.arena.push(Node::BigInt),
            Val::Float(f) => self.arena.push(Node::Float(f)),
            Val::Record(l, i) => self.record_node(l, i),
            Val::Stack(s) => self.stack_node(s),
        }
    }
    /// The node of a record of the fast path, made when first needed.
    pub(super) fn record_node(&mut self, l: u32, i: u32) -> Vid {
        if let Some(&id) = self.record_nodes.get(&(l, i)) {
            return id;
        }
        let id = self.arena.push(Node::Record(l, i));
        self.arena.taken = self.arena.taken.saturating_sub(1);
        self.record_nodes.insert((l, i), id);
        id
    }
    pub(super) fn stack_node(&mut self, s: u32) -> Vid {
        if let Some(&id) = self.stack_nodes.get(&s) {
            return id;
        }
        let id = self.arena.push(Node::Stack(s));
        self.arena.taken = self.arena.taken.saturating_sub(1);
        self.stack_nodes.insert(s, id);
        id
    }
    /// A [`Node::Trace`] made the list of `Record`s it stands for.
    pub(super) fn materialize_trace(&mut self, t: Vid) {
        if let Some(&Node::Trace(l, n)) = self.arena.nodes.get(t as usize) {
            let items = (0..n).map(|i| self.record_node(l, i)).collect();
            self.arena.nodes[t as usize] = Node::List(items);
        }
    }
    #[inline]
    pub(super) fn vids_from(&mut self, m: usize) -> Vec<Vid> {
        let mut out = Vec::with_capacity(self.stack.len() - m);
        for i in m..self.stack.len() {
            let v = self.stack[i];
            out.push(self.vid(v));
        }
        self.stack.truncate(m);
        out
    }
    /// Equal strings are one node.
    pub(super) fn push_string(&mut self, s: &str) {
        let id = string_node(&mut self.strings, &mut self.arena, s);
        self.stack.push(Val::Node(id));
    }
    #[inline]
    pub(super) fn push_str(&mut self, n: usize) -> Result<(), PickleError> {
        self.take(n)?;
        let b = &self.inp.f.bytes()[self.inp.pos - n..self.inp.pos];
        // The same short string over and over (every entry's
        // `compile_context`) skips the hash table.
        if self.last_str.1 != NO_MEMO && b == &self.last_str.0[..] {
            self.stack.push(Val::Node(self.last_str.1));
            return Ok(());
        }
        let id = match std::str::from_utf8(b) {
            Ok(s) => string_node(&mut self.strings, &mut self.arena, s),
            // CPython writes lone surrogates with 'surrogatepass'; keep what we can.
            Err(_) => {
                let s = String::from_utf8_lossy(b).into_owned();
                let id = self.arena.push(Node::Str(s.into_boxed_str()));
                self.stack.push(Val::Node(id));
                return Ok(());
            }
        };
        if n <= 32 {
            self.last_str.0.clear();
            self.last_str.0.extend_from_slice(b);
            self.last_str.1 = id;
        }
        self.stack.push(Val::Node(id));
        Ok(())
    }
    pub(super) fn push_latin1(&mut self, n: usize) -> Result<(), PickleError> {
        let s: String = self.take(n)?.iter().map(|&c| c as char).collect();
        self.push_string(&s);
        Ok(())
    }
    pub(super) fn push_bytes(&mut self, n: usize) -> Result<(), PickleError> {
        let b: Box<[u8]> = self.take(n)?.into();
        self.push_node(Node::Bytes(b));
        Ok(())
    }
    /// A tuple of `stack[from..]`; tuples of up to three integers (pool ids)
    /// are stored once per value.
    pub(super) fn push_tuple(&mut self, from: usize) {
        let items = &self.stack[from..];
        if super::is_shared_tuple(items, |v| matches!(v, Val::Int(_))) {
            let int = |k: usize| match items[k] {
                Val::Int(i) => i,
                _ => unreachable!("a shared tuple holds integers only"),
            };
            let (t, a) = (&mut self.tuples, &mut self.arena);
            let id = match items.len() {
                1 => tuple_node(t, a, [int(0)]),
                2 => tuple_node(t, a, [int(0), int(1)]),
                _ => tuple_node(t, a, [int(0), int(1), int(2)]),
            };
            self.stack.truncate(from);
            self.stack.push(Val::Node(id));
            return;
        }
        let kids = self.vids_from(from);
        self.push_node(Node::Tuple(kids.into_boxed_slice()));
    }
    #[inline]
    pub(super) fn pop(&mut self) -> Result<Val, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(self.stack.pop().expect("checked"))
    }
    #[inline]
    pub(super) fn top(&self) -> Result<Val, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(*self.stack.last().expect("checked"))
    }
    #[inline]
    pub(super) fn pop_mark(&mut self) -> Result<usize, PickleError> {
        self.marks
            .pop()
            .ok_or_else(|| self.err("no MARK on the stack"))
    }
    pub(super) fn list_extend(&mut self, target: Val, items: &[Vid]) -> Result<(), PickleError> {
        let target = match target {
            Val::Node(t) => t,
            Val::Stack(_) => {
                return Err(self.err(
                    "APPEND to a stack list after a trace entry used it (PyTorch never writes this)",
                ));
            }
            _ => return Err(self.err(format!("APPEND to a {}, not a list", val_kind(target)))),
        };
        if let Node::Trace(..) = self.arena.get(target) {
            self.materialize_trace(target);
        }
        let kind = self.arena.get(target).kind();
        match &mut self.arena.nodes[target as usize] {
            Node::List(v) => {
                v.extend_from_slice(items);
                Ok(())
            }
            Node::Stack(_) => Err(self.err(
                "APPEND to a stack list after a trace entry used it (PyTorch never writes this)",
            )),
            _ => Err(self.err(format!("APPEND to a {kind}, not a list"))),
        }
    }
    /// SETITEM(S): the dict is `stack[at - 1]`, the items `stack[at..]`.
    pub(super) fn dict_extend(&mut self, at: usize) -> Result<(), PickleError> {
        let target = self.stack[at - 1];
        let t = match target {
            Val::Node(t) => t,
            Val::Record(..) => {
                return Err(self.err(
                    "SETITEM on a trace entry or block after it was read (PyTorch never writes this)",
                ));
            }
            _ => return Err(self.err(format!("SETITEM on a {}, not a dict", val_kind(target)))),
        };
        let empty = match self.arena.get(t) {
            Node::Dict(_) if self.f_fresh.made(t) => {
                return Err(self.err(
                    "SETITEM on a frame after a trace entry used it (PyTorch never writes this)",
                ));
            }
            Node::Dict(d) => d.is_empty(),
            Node::Record(..) => {
                return Err(self.err(
                    "SETITEM on a trace entry or block after it was read (PyTorch never writes this)",
                ));
            }
            n => return Err(self.err(format!("SETITEM on a {}, not a dict", n.kind()))),
        };
        if empty {
            let (stack, items) = self.stack.split_at(at);
            if let Some(n) =
                self.sink
                    .dict_filled(&mut self.arena, stack, &self.marks, at - 1, items)
            {
                self.arena.nodes[t as usize] = n;
                self.stack.truncate(at);
                return Ok(());
            }
        }
        let items = self.vids_from(at);
        if let Node::Dict(v) = &mut self.arena.nodes[t as usize] {
            v.extend(items.chunks_exact(2).map(|p| (p[0], p[1])));
        }
        Ok(())
    }
    #[inline(always)]
    pub(super) fn put(&mut self, idx: u64) -> Result<(), PickleError> {
        let top = self.top()?;
        let top = match top {
            Val::Node(id) => id,
            v => {
                // A memoized scalar: it needs a node to be referenced from.
                let id = self.vid(v);
                *self.stack.last_mut().expect("checked") = Val::Node(id);
                id
            }
        };
        if top >= TAG {
            return Err(self.err("more than 2 billion values; fragscope cannot index them"));
        }
        let len = self.memo.len() as u64;
        if idx < len {
            self.memo[idx as usize] = top;
            // The bytes of a frames list no longer name the same frames.
            self.f_gen = self.f_gen.wrapping_add(1);
            if self.f_gen == 0 {
                // Entries of a generation 2^32 overwrites ago would look current.
                self.f_cache.clear();
                self.f_fresh.clear();
            }
        } else if idx < len + 64 {
            self.memo.resize(idx as usize, NO_MEMO);
            self.memo.push(top);
        } else {
            self.memo_sparse.insert(idx, top);
        }
        Ok(())
    }
    #[inline(always)]
    pub(super) fn get(&mut self, idx: u64) -> Result<(), PickleError> {
        match self.memo.get(idx as usize) {
            Some(&v) if v < TAG => {
                self.stack.push(Val::Node(v));
                Ok(())
            }
            _ => self.get_sparse(idx),
        }
    }
    /// A memo entry that is not a node: a record or stack of the fast path
    /// (tagged), or one stored out of order.
    #[cold]
    pub(super) fn get_sparse(&mut self, idx: u64) -> Result<(), PickleError> {
        if let Some(&v) = self.memo.get(idx as usize)
            && v != NO_MEMO
        {
            let val = if v >= TAG_STACK {
                Val::Stack(v & PAYLOAD)
            } else {
                let g = v & PAYLOAD;
                let k = self.runs.partition_point(|r| r.0 <= g);
                let Some(&(g0, l, i0)) = k.checked_sub(1).and_then(|k| self.runs.get(k)) else {
                    return Err(self.err(format!("memo reference {idx} was never stored")));
                };
                Val::Record(l, i0 + (g - g0))
            };
            self.stack.push(val);
            return Ok(());
        }
        match self.memo_sparse.get(&idx).copied() {
            Some(v) => {
                self.stack.push(Val::Node(v));
                Ok(())
            }
            None => Err(self.err(format!("memo reference {idx} was never stored"))),
        }
    }
}

pub(super) fn val_kind(v: Val) -> &'static str {
    match v {
        Val::Node(_) => "value",
        Val::None => "None",
        Val::Bool(_) => "bool",
        Val::Int(_) | Val::BigInt => "int",
        Val::Float(_) => "float",
        Val::Record(..) => "dict",
        Val::Stack(_) => "list",
    }
}
