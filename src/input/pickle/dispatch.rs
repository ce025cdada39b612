//! The general machine: the loop that reads one opcode at a time and acts
//! on it, for every opcode of protocols 0 to 5.

use super::entry::append_records;
use super::literals::{
    decode_raw_unicode_escape, long_from_le, parse_int_text, parse_py_string_literal,
    parse_u64_text, sign_extend,
};
use super::window::Feed;
use super::{Decoded, MAX_NODES, PickleError, Sink, Val, Vm, forbidden};
use crate::input::value::Node;

impl<F: Feed, S: Sink> Vm<'_, F, S> {
    /// Runs the machine to STOP: the decoded value, or the first error.
    ///
    /// One match with an arm for every opcode of protocols 0 to 5, so about
    /// 300 lines long on purpose: it is the decoder's hottest loop, every
    /// byte of a general value passes through it, and the arms share the
    /// loop's state (`protocol`, the current offset). Shared work is already
    /// in the operations of `ops.rs`; an arm moved into a function of its own
    /// would only move where the reader looks.
    pub(super) fn run(&mut self) -> Result<Decoded, PickleError> {
        let mut protocol = 0u8;
        loop {
            self.op_start = self.inp.offset();
            if self.arena.nodes.len() >= MAX_NODES {
                return Err(self.err("more than 2 billion values; fragscope cannot index them"));
            }
            let Some(op) = self.inp.byte() else {
                return Err(self.err_at(self.op_start, "unexpected end of data (no STOP opcode)"));
            };
            match op {
                0x80 => {
                    protocol = self.byte()?;
                    if protocol > 5 {
                        return Err(self.err(format!("unsupported pickle protocol {protocol}")));
                    }
                }
                0x95 => {
                    self.array::<8>()?; // FRAME: a length hint only
                }
                b'.' => {
                    let root = self.pop()?;
                    if !self.stack.is_empty() || !self.marks.is_empty() {
                        return Err(self.err("STOP with values left on the stack"));
                    }
                    let root = self.vid(root);
                    for t in self.sink.finish(&self.arena, root) {
                        self.materialize_trace(t);
                    }
                    return Ok(Decoded {
                        arena: std::mem::take(&mut self.arena),
                        root,
                        protocol,
                        bytes: self.inp.offset(),
                        read: self.inp.base + self.inp.end as u64,
                    });
                }
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    let m = self.pop_mark()?;
                    self.stack.truncate(m);
                }
                b'2' => {
                    let top = self.top()?;
                    self.stack.push(top);
                }
                b'N' => self.stack.push(Val::None),
                0x88 => self.stack.push(Val::Bool(true)),
                0x89 => self.stack.push(Val::Bool(false)),
                b'J' => {
                    let v = i32::from_le_bytes(self.array::<4>()?);
                    self.stack.push(Val::Int(v as i64))
                }
                b'K' => {
                    let v = self.byte()?;
                    self.stack.push(Val::Int(v as i64))
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.array::<2>()?);
                    self.stack.push(Val::Int(v as i64))
                }
                0x8a => {
                    let n = self.byte()? as usize;
                    // Addresses and times: up to 8 bytes, read as one word
                    // while the window holds 8 (no copy of a variable length).
                    let (pos, end) = (self.inp.pos, self.inp.end);
                    if n <= 8 && end - pos >= 8 {
                        let w = u64::from_le_bytes(
                            self.inp.f.bytes()[pos..pos + 8]
                                .try_into()
                                .expect("8 bytes"),
                        );
                        self.inp.pos += n;
                        self.stack.push(Val::Int(sign_extend(w, n)));
                    } else {
                        let v = long_from_le(self.take(n)?);
                        self.stack.push(v)
                    }
                }
                0x8b => {
                    let n = self.len4()?;
                    let v = long_from_le(self.take(n)?);
                    self.stack.push(v)
                }
                b'I' => {
                    let line = self.line()?;
                    let v = match &line[..] {
                        b"00" => Some(Val::Bool(false)),
                        b"01" => Some(Val::Bool(true)),
                        _ => parse_int_text(&line),
                    };
                    let v = v.ok_or_else(|| self.err("malformed INT text"))?;
                    self.stack.push(v)
                }
                b'L' => {
                    let line = self.line()?;
                    let line = line.strip_suffix(b"L").unwrap_or(&line);
                    let v = parse_int_text(line).ok_or_else(|| self.err("malformed LONG text"))?;
                    self.stack.push(v)
                }
                b'F' => {
                    let line = self.line()?;
                    let v = std::str::from_utf8(&line)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| self.err("malformed FLOAT text"))?;
                    self.stack.push(Val::Float(v))
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.array::<8>()?);
                    self.stack.push(Val::Float(v))
                }
                b'X' => {
                    let n = self.len4()?;
                    self.push_str(n)?
                }
                0x8c => {
                    let n = self.byte()? as usize;
                    self.push_str(n)?
                }
                0x8d => {
                    let n = self.len8()?;
                    self.push_str(n)?
                }
                b'V' => {
                    let line = self.line()?;
                    let s = decode_raw_unicode_escape(&line)
                        .ok_or_else(|| self.err("malformed UNICODE text"))?;
                    self.push_string(&s)
                }
                // Python 2 str: bytes that CPython 3 decodes as ASCII/latin-1 by default.
                b'T' => {
                    let n = self.len4()?;
                    self.push_latin1(n)?
                }
                b'U' => {
                    let n = self.byte()? as usize;
                    self.push_latin1(n)?
                }
                b'S' => {
                    let line = self.line()?;
                    let s = parse_py_string_literal(&line)
                        .ok_or_else(|| self.err("malformed STRING text"))?;
                    self.push_string(&s)
                }
                b'B' => {
                    let n = self.len4()?;
                    self.push_bytes(n)?
                }
                b'C' => {
                    let n = self.byte()? as usize;
                    self.push_bytes(n)?
                }
                0x8e | 0x96 => {
                    let n = self.len8()?;
                    self.push_bytes(n)?
                }
                b']' => {
                    let id = self.arena.push(Node::List(Vec::new()));
                    self.stack.push(Val::Node(id));
                    self.sink
                        .list_created(&self.arena, &self.stack, &self.marks, id);
                    self.list_of_references(id);
                }
                b')' => self.push_node(Node::Tuple(Box::new([]))),
                b'}' => {
                    if !(self.fast && self.entry()) {
                        self.push_node(Node::Dict(Vec::new()))
                    }
                }
                0x8f => self.push_node(Node::List(Vec::new())), // EMPTY_SET, kept as a list
                b'l' | 0x91 => {
                    let m = self.pop_mark()?;
                    let items = self.vids_from(m);
                    self.push_node(Node::List(items))
                }
                b't' => {
                    let m = self.pop_mark()?;
                    self.push_tuple(m);
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    if self.stack.len() < n + self.marks.last().copied().unwrap_or(0) {
                        return Err(self.err("TUPLE with too few values on the stack"));
                    }
                    self.push_tuple(self.stack.len() - n);
                }
                b'd' => {
                    let m = self.pop_mark()?;
                    if !(self.stack.len() - m).is_multiple_of(2) {
                        return Err(self.err("DICT with an odd number of items"));
                    }
                    let items = self.vids_from(m);
                    let pairs = items.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                    self.push_node(Node::Dict(pairs))
                }
                b'a' => {
                    let v = self.pop()?;
                    let target = self.top()?;
                    if !(self.fast && append_records(&mut self.arena, target, &[v])) {
                        let v = self.vid(v);
                        self.list_extend(target, &[v])?
                    }
                }
                b'e' | 0x90 => {
                    let m = self.pop_mark()?;
                    if m == 0 || self.marks.last().is_some_and(|&f| m <= f) {
                        return Err(self.err("stack underflow (a malformed or truncated pickle)"));
                    }
                    let target = self.stack[m - 1];
                    if self.fast && append_records(&mut self.arena, target, &self.stack[m..]) {
                        self.stack.truncate(m);
                        continue;
                    }
                    let items = self.vids_from(m);
                    // The first batch into an empty list is the list.
                    if let Val::Node(t) = target
                        && let Node::List(v) = &mut self.arena.nodes[t as usize]
                        && v.is_empty()
                    {
                        *v = items;
                    } else {
                        self.list_extend(target, &items)?
                    }
                }
                b's' => {
                    if self.stack.len() < 3 + self.marks.last().copied().unwrap_or(0) {
                        return Err(self.err("stack underflow (a malformed or truncated pickle)"));
                    }
                    let at = self.stack.len() - 2;
                    self.dict_extend(at)?
                }
                b'u' => {
                    let m = self.pop_mark()?;
                    if !(self.stack.len() - m).is_multiple_of(2) {
                        return Err(self.err("SETITEMS with an odd number of items"));
                    }
                    if m == 0 || self.marks.last().is_some_and(|&f| m <= f) {
                        return Err(self.err("stack underflow (a malformed or truncated pickle)"));
                    }
                    self.dict_extend(m)?
                }
                b'p' => {
                    let line = self.line()?;
                    let idx =
                        parse_u64_text(&line).ok_or_else(|| self.err("malformed PUT index"))?;
                    self.put(idx)?
                }
                b'q' => {
                    let idx = self.byte()? as u64;
                    self.put(idx)?
                }
                b'r' => {
                    let idx = self.len4()? as u64;
                    self.put(idx)?
                }
                0x94 => {
                    let idx = self.memo.len() as u64;
                    self.put(idx)?
                }
                b'g' => {
                    let line = self.line()?;
                    let idx =
                        parse_u64_text(&line).ok_or_else(|| self.err("malformed GET index"))?;
                    self.get(idx)?
                }
                b'h' | b'j' => {
                    // Runs of memo references (a stack's frames, a record's
                    // keys) are most of a snapshot: read them without going
                    // back through the dispatch.
                    let mut op = op;
                    loop {
                        let idx = if op == b'h' {
                            self.byte()? as u64
                        } else {
                            self.len4()? as u64
                        };
                        self.get(idx)?;
                        match self.inp.peek() {
                            Some(next @ (b'h' | b'j')) => {
                                op = next;
                                self.op_start = self.inp.offset();
                                self.inp.pos += 1;
                            }
                            _ => break,
                        }
                    }
                }
                _ => {
                    if let Some(name) = forbidden(op) {
                        return Err(self.err(format!(
                            "refused opcode {name} (0x{op:02x}): snapshots contain only builtin values, \
                             and this file asks to import or call code"
                        )));
                    }
                    return Err(self.err(format!("unknown pickle opcode 0x{op:02x}")));
                }
            }
        }
    }
}
