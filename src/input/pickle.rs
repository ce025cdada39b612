//! A pickle virtual machine for the builtin subset that memory snapshots use
//! (dicts, lists, tuples, str, int, float, bool, None, bytes), protocols 0–5.
//!
//! It never imports, calls or instantiates anything: every opcode that would
//! (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*,
//! PERSID, BINPERSID) is refused with its name and byte offset. Memo references
//! stay shared nodes of the [`Arena`]. The machine is iterative, so nesting
//! depth costs heap, not stack, and no length prefix is trusted beyond the
//! bytes actually present.

use super::value::{Arena, Node, Vid};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset}: {msg}")]
pub struct PickleError {
    pub offset: u64,
    pub msg: String,
}

/// The decoded value and facts about the encoding.
pub struct Decoded {
    pub arena: Arena,
    pub root: Vid,
    pub protocol: u8,
}

/// Names of the opcodes that would execute code; refused, never acted on.
fn forbidden(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

struct Vm<'a> {
    data: &'a [u8],
    pos: usize,
    arena: Arena,
    stack: Vec<Vid>,
    marks: Vec<usize>,
    memo: Vec<Vid>,
    memo_sparse: std::collections::HashMap<u64, Vid>,
    op_start: usize,
}

const NO_MEMO: Vid = Vid::MAX;

/// Node ids are u32 (half the memory of usize on the large files); one
/// opcode makes at most one node, so only an input of more than 4 Gi
/// opcodes can run out of them, and it is refused rather than wrapped.
const MAX_NODES: usize = NO_MEMO as usize - 1;

/// Decodes one pickle from `data`. Trailing bytes after STOP are ignored (as
/// `pickle.load` does).
pub fn decode(data: &[u8]) -> Result<Decoded, PickleError> {
    let mut vm = Vm {
        data,
        pos: 0,
        // A rough guess that avoids most regrowth without trusting the input.
        arena: Arena {
            nodes: Vec::with_capacity(data.len() / 6),
        },
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Vec::new(),
        memo_sparse: Default::default(),
        op_start: 0,
    };
    let mut protocol = 0u8;
    loop {
        vm.op_start = vm.pos;
        if vm.arena.nodes.len() >= MAX_NODES {
            return Err(vm.err("more than 4 billion values; fragscope cannot index them"));
        }
        let op = vm
            .byte()
            .map_err(|_| vm.err_at(vm.pos, "unexpected end of data (no STOP opcode)"))?;
        if let Some(name) = forbidden(op) {
            return Err(vm.err(format!(
                "refused opcode {name} (0x{op:02x}): snapshots contain only builtin values, and this \
                 file asks to import or call code"
            )));
        }
        match op {
            0x80 => {
                protocol = vm.byte()?;
                if protocol > 5 {
                    return Err(vm.err(format!("unsupported pickle protocol {protocol}")));
                }
            }
            0x95 => {
                vm.take(8)?; // FRAME: a length hint only
            }
            b'.' => {
                let root = vm.pop()?;
                if !vm.stack.is_empty() || !vm.marks.is_empty() {
                    return Err(vm.err("STOP with values left on the stack"));
                }
                return Ok(Decoded {
                    arena: vm.arena,
                    root,
                    protocol,
                });
            }
            b'(' => vm.marks.push(vm.stack.len()),
            b'0' => {
                vm.pop()?;
            }
            b'1' => {
                let m = vm.pop_mark()?;
                vm.stack.truncate(m);
            }
            b'2' => {
                let top = *vm
                    .stack
                    .last()
                    .ok_or_else(|| vm.err("DUP on an empty stack"))?;
                vm.stack.push(top);
            }
            b'N' => vm.push(Node::None),
            0x88 => vm.push(Node::Bool(true)),
            0x89 => vm.push(Node::Bool(false)),
            b'J' => {
                let b = vm.take(4)?;
                let v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                vm.push(Node::Int(v as i64))
            }
            b'K' => {
                let v = vm.byte()?;
                vm.push(Node::Int(v as i64))
            }
            b'M' => {
                let b = vm.take(2)?;
                vm.push(Node::Int(u16::from_le_bytes([b[0], b[1]]) as i64))
            }
            0x8a => {
                let n = vm.byte()? as usize;
                let b = vm.take(n)?;
                let node = long_from_le(b);
                vm.push(node)
            }
            0x8b => {
                let n = vm.len4()?;
                let b = vm.take(n)?;
                let node = long_from_le(b);
                vm.push(node)
            }
            b'I' => {
                let line = vm.line()?;
                let node = match line {
                    b"00" => Node::Bool(false),
                    b"01" => Node::Bool(true),
                    _ => parse_int_text(line).ok_or_else(|| vm.err("malformed INT text"))?,
                };
                vm.push(node)
            }
            b'L' => {
                let line = vm.line()?;
                let line = line.strip_suffix(b"L").unwrap_or(line);
                let node = parse_int_text(line).ok_or_else(|| vm.err("malformed LONG text"))?;
                vm.push(node)
            }
            b'F' => {
                let line = vm.line()?;
                let v = std::str::from_utf8(line)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .ok_or_else(|| vm.err("malformed FLOAT text"))?;
                vm.push(Node::Float(v))
            }
            b'G' => {
                let b = vm.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                vm.push(Node::Float(f64::from_be_bytes(a)))
            }
            b'X' => {
                let n = vm.len4()?;
                vm.push_str(n)?
            }
            0x8c => {
                let n = vm.byte()? as usize;
                vm.push_str(n)?
            }
            0x8d => {
                let n = vm.len8()?;
                vm.push_str(n)?
            }
            b'V' => {
                let line = vm.line()?;
                let s = decode_raw_unicode_escape(line)
                    .ok_or_else(|| vm.err("malformed UNICODE text"))?;
                vm.push(Node::Str(s.into_boxed_str()))
            }
            // Python 2 str: bytes that CPython 3 decodes as ASCII/latin-1 by default.
            b'T' => {
                let n = vm.len4()?;
                vm.push_latin1(n)?
            }
            b'U' => {
                let n = vm.byte()? as usize;
                vm.push_latin1(n)?
            }
            b'S' => {
                let line = vm.line()?;
                let s =
                    parse_py_string_literal(line).ok_or_else(|| vm.err("malformed STRING text"))?;
                vm.push(Node::Str(s.into_boxed_str()))
            }
            b'B' => {
                let n = vm.len4()?;
                let b = vm.take(n)?;
                let node = Node::Bytes(b.into());
                vm.push(node)
            }
            b'C' => {
                let n = vm.byte()? as usize;
                let b = vm.take(n)?;
                let node = Node::Bytes(b.into());
                vm.push(node)
            }
            0x8e | 0x96 => {
                let n = vm.len8()?;
                let b = vm.take(n)?;
                let node = Node::Bytes(b.into());
                vm.push(node)
            }
            b']' => vm.push(Node::List(Vec::new())),
            b')' => vm.push(Node::Tuple(Box::new([]))),
            b'}' => vm.push(Node::Dict(Vec::new())),
            0x8f => vm.push(Node::List(Vec::new())), // EMPTY_SET, kept as a list
            b'l' => {
                let m = vm.pop_mark()?;
                let items = vm.stack.split_off(m);
                vm.push(Node::List(items))
            }
            b't' | 0x91 => {
                let m = vm.pop_mark()?;
                let items = vm.stack.split_off(m);
                let node = if op == b't' {
                    Node::Tuple(items.into_boxed_slice())
                } else {
                    Node::List(items)
                };
                vm.push(node)
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if vm.stack.len() < n + vm.marks.last().copied().unwrap_or(0) {
                    return Err(vm.err("TUPLE with too few values on the stack"));
                }
                let items = vm.stack.split_off(vm.stack.len() - n);
                vm.push(Node::Tuple(items.into_boxed_slice()))
            }
            b'd' => {
                let m = vm.pop_mark()?;
                let items = vm.stack.split_off(m);
                if !items.len().is_multiple_of(2) {
                    return Err(vm.err("DICT with an odd number of items"));
                }
                let pairs = items.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                vm.push(Node::Dict(pairs))
            }
            b'a' => {
                let v = vm.pop()?;
                let target = vm.top()?;
                vm.list_extend(target, std::iter::once(v))?
            }
            b'e' | 0x90 => {
                let m = vm.pop_mark()?;
                let items = vm.stack.split_off(m);
                let target = vm.top()?;
                vm.list_extend(target, items.into_iter())?
            }
            b's' => {
                let v = vm.pop()?;
                let k = vm.pop()?;
                let target = vm.top()?;
                vm.dict_extend(target, &[k, v])?
            }
            b'u' => {
                let m = vm.pop_mark()?;
                let items = vm.stack.split_off(m);
                if !items.len().is_multiple_of(2) {
                    return Err(vm.err("SETITEMS with an odd number of items"));
                }
                let target = vm.top()?;
                vm.dict_extend(target, &items)?
            }
            b'p' => {
                let line = vm.line()?;
                let idx = parse_u64_text(line).ok_or_else(|| vm.err("malformed PUT index"))?;
                vm.put(idx)?
            }
            b'q' => {
                let idx = vm.byte()? as u64;
                vm.put(idx)?
            }
            b'r' => {
                let idx = vm.len4()? as u64;
                vm.put(idx)?
            }
            0x94 => {
                let idx = vm.memo.len() as u64;
                vm.put(idx)?
            }
            b'g' => {
                let line = vm.line()?;
                let idx = parse_u64_text(line).ok_or_else(|| vm.err("malformed GET index"))?;
                vm.get(idx)?
            }
            b'h' => {
                let idx = vm.byte()? as u64;
                vm.get(idx)?
            }
            b'j' => {
                let idx = vm.len4()? as u64;
                vm.get(idx)?
            }
            _ => return Err(vm.err(format!("unknown pickle opcode 0x{op:02x}"))),
        }
    }
}

impl<'a> Vm<'a> {
    fn err_at(&self, offset: usize, msg: impl Into<String>) -> PickleError {
        PickleError {
            offset: offset as u64,
            msg: msg.into(),
        }
    }
    fn err(&self, msg: impl Into<String>) -> PickleError {
        self.err_at(self.op_start, msg)
    }
    #[inline]
    fn byte(&mut self) -> Result<u8, PickleError> {
        match self.data.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => Err(self.err("truncated: the file ends inside an opcode")),
        }
    }
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let data: &'a [u8] = self.data;
        if data.len() - self.pos < n {
            return Err(self.err(format!(
                "length {n} runs past the end of the data ({} bytes left)",
                data.len() - self.pos
            )));
        }
        let s = &data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn len4(&mut self) -> Result<usize, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn len8(&mut self) -> Result<usize, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        let n = u64::from_le_bytes(a);
        usize::try_from(n).map_err(|_| self.err(format!("length {n} is larger than the data")))
    }
    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let data: &'a [u8] = self.data;
        let rest = &data[self.pos..];
        match rest.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.pos += i + 1;
                Ok(&rest[..i])
            }
            None => Err(self.err("truncated: no newline after a text argument")),
        }
    }
    #[inline]
    fn push(&mut self, n: Node) {
        let id = self.arena.push(n);
        self.stack.push(id);
    }
    fn push_str(&mut self, n: usize) -> Result<(), PickleError> {
        let b = self.take(n)?;
        let s = match std::str::from_utf8(b) {
            Ok(s) => s.into(),
            // CPython writes lone surrogates with 'surrogatepass'; keep what we can.
            Err(_) => String::from_utf8_lossy(b).into_owned().into_boxed_str(),
        };
        self.push(Node::Str(s));
        Ok(())
    }
    fn push_latin1(&mut self, n: usize) -> Result<(), PickleError> {
        let b = self.take(n)?;
        let s: String = b.iter().map(|&c| c as char).collect();
        self.push(Node::Str(s.into_boxed_str()));
        Ok(())
    }
    #[inline]
    fn pop(&mut self) -> Result<Vid, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(self.stack.pop().unwrap())
    }
    fn top(&self) -> Result<Vid, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(*self.stack.last().unwrap())
    }
    fn pop_mark(&mut self) -> Result<usize, PickleError> {
        self.marks
            .pop()
            .ok_or_else(|| self.err("no MARK on the stack"))
    }
    fn list_extend(
        &mut self,
        target: Vid,
        items: impl Iterator<Item = Vid>,
    ) -> Result<(), PickleError> {
        let kind = self.arena.get(target).kind();
        match &mut self.arena.nodes[target as usize] {
            Node::List(v) => {
                v.extend(items);
                Ok(())
            }
            _ => Err(self.err(format!("APPEND to a {kind}, not a list"))),
        }
    }
    fn dict_extend(&mut self, target: Vid, items: &[Vid]) -> Result<(), PickleError> {
        let kind = self.arena.get(target).kind();
        match &mut self.arena.nodes[target as usize] {
            Node::Dict(v) => {
                v.extend(items.chunks_exact(2).map(|p| (p[0], p[1])));
                Ok(())
            }
            _ => Err(self.err(format!("SETITEM on a {kind}, not a dict"))),
        }
    }
    fn put(&mut self, idx: u64) -> Result<(), PickleError> {
        let top = self.top()?;
        let len = self.memo.len() as u64;
        if idx < len {
            self.memo[idx as usize] = top;
        } else if idx < len + 64 {
            self.memo.resize(idx as usize, NO_MEMO);
            self.memo.push(top);
        } else {
            self.memo_sparse.insert(idx, top);
        }
        Ok(())
    }
    fn get(&mut self, idx: u64) -> Result<(), PickleError> {
        let v = match self.memo.get(idx as usize) {
            Some(&v) if v != NO_MEMO => Some(v),
            _ => self.memo_sparse.get(&idx).copied(),
        };
        match v {
            Some(v) => {
                self.stack.push(v);
                Ok(())
            }
            None => Err(self.err(format!("memo reference {idx} was never stored"))),
        }
    }
}

/// Little-endian two's-complement integer of any length (LONG1/LONG4).
fn long_from_le(b: &[u8]) -> Node {
    if b.is_empty() {
        return Node::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
        a[..b.len()].copy_from_slice(b);
        return Node::Int(i64::from_le_bytes(a));
    }
    // Longer encodings still fit when the extra bytes are pure sign extension.
    let neg = b[b.len() - 1] & 0x80 != 0;
    let ext = if neg { 0xff } else { 0 };
    if b[8..].iter().all(|&x| x == ext) && ((b[7] & 0x80 != 0) == neg) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        return Node::Int(i64::from_le_bytes(a));
    }
    Node::BigInt
}

fn parse_int_text(line: &[u8]) -> Option<Node> {
    let s = std::str::from_utf8(line).ok()?.trim();
    if s.is_empty() {
        return None;
    }
    match s.parse::<i64>() {
        Ok(v) => Some(Node::Int(v)),
        Err(_)
            if s.trim_start_matches('-')
                .bytes()
                .all(|c| c.is_ascii_digit()) =>
        {
            Some(Node::BigInt)
        }
        Err(_) => None,
    }
}

fn parse_u64_text(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// `raw-unicode-escape`: bytes are latin-1 except `\uXXXX` and `\UXXXXXXXX`.
fn decode_raw_unicode_escape(b: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() && (b[i + 1] == b'u' || b[i + 1] == b'U') {
            let n = if b[i + 1] == b'u' { 4 } else { 8 };
            let hex = std::str::from_utf8(b.get(i + 2..i + 2 + n)?).ok()?;
            let cp = u32::from_str_radix(hex, 16).ok()?;
            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
            i += 2 + n;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    Some(out)
}

/// Protocol-0 `STRING`: a quoted Python literal with backslash escapes.
fn parse_py_string_literal(line: &[u8]) -> Option<String> {
    let q = *line.first()?;
    if (q != b'\'' && q != b'"') || line.len() < 2 || *line.last()? != q {
        return None;
    }
    let body = &line[1..line.len() - 1];
    let mut out = String::new();
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && i + 1 < body.len() {
            let e = body[i + 1];
            i += 2;
            match e {
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'\\' => out.push('\\'),
                b'\'' => out.push('\''),
                b'"' => out.push('"'),
                b'x' => {
                    let hex = std::str::from_utf8(body.get(i..i + 2)?).ok()?;
                    out.push(u8::from_str_radix(hex, 16).ok()? as char);
                    i += 2;
                }
                _ => {
                    out.push('\\');
                    out.push(e as char);
                }
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(d: &Decoded) -> &Node {
        d.arena.get(d.root)
    }

    #[test]
    fn protocol2_dict_with_memo_sharing() {
        // {"a": [1, 2], "b": <same list>} as CPython protocol 2 writes it.
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01K\x02eX\x01\x00\x00\x00bq\x03h\x02u.";
        let d = decode(p).unwrap();
        assert_eq!(d.protocol, 2);
        let Node::Dict(items) = root(&d) else {
            panic!()
        };
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[0].1, items[1].1,
            "memo reference must be a shared node"
        );
    }

    #[test]
    fn refuses_global_with_offset() {
        let p = b"\x80\x02cos\nsystem\n.";
        let e = decode(p).err().unwrap();
        assert_eq!(e.offset, 2);
        assert!(e.msg.contains("GLOBAL"), "{}", e.msg);
    }

    #[test]
    fn long1_negative_and_big() {
        let p = b"\x80\x02]q\x00(\x8a\x01\xff\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00e.";
        let d = decode(p).unwrap();
        let Node::List(v) = root(&d) else { panic!() };
        assert_eq!(d.arena.get(v[0]), &Node::Int(-1));
        assert_eq!(d.arena.get(v[1]), &Node::Int(i64::MIN));
        assert_eq!(d.arena.get(v[2]), &Node::BigInt);
    }

    #[test]
    fn huge_length_prefix_is_an_error_not_an_allocation() {
        let p = b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f";
        let e = decode(p).err().unwrap();
        assert!(
            e.msg.contains("past the end") || e.msg.contains("larger"),
            "{}",
            e.msg
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut p = vec![0x80, 4];
        p.extend(std::iter::repeat_n(b']', 200_000));
        p.extend(std::iter::repeat_n(b'a', 199_999));
        p.push(b'.');
        assert!(decode(&p).is_ok());
    }

    #[test]
    fn protocol0_text_opcodes() {
        let p = b"(dp0\nS'x'\np1\nI42\nsVh\\u00e9\np2\nL7L\ns.";
        let d = decode(p).unwrap();
        let Node::Dict(items) = root(&d) else {
            panic!()
        };
        assert_eq!(d.arena.get(items[0].1), &Node::Int(42));
        assert_eq!(d.arena.as_str(items[1].0), Some("hé"));
    }

    #[test]
    fn missing_memo_key() {
        let e = decode(b"\x80\x04h\x05.").err().unwrap();
        assert!(e.msg.contains("memo reference 5"));
    }
}
