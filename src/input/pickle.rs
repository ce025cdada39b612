//! A pickle virtual machine for the builtin subset that memory snapshots use
//! (dicts, lists, tuples, str, int, float, bool, None, bytes), protocols 0–5.
//!
//! It never imports, calls or instantiates anything: every opcode that would
//! (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*,
//! PERSID, BINPERSID) is refused with its name and byte offset. Memo references
//! stay shared nodes of the [`Arena`]. The machine is iterative, so nesting
//! depth costs heap, not stack, and no length prefix is trusted beyond the
//! bytes actually present.
//!
//! Built for gigabyte inputs: it reads from any [`Read`] through a window
//! of a few hundred kilobytes (the input is never held whole), keeps integers, bools,
//! floats and None inline on its stack (a node is made only when a container
//! keeps one), stores equal strings once and equal all-integer tuples
//! (pool ids) once — values are immutable, so sharing them is invisible. A
//! [`Sink`] may take a dict the moment its items arrive and leave a small
//! record node in its place: that is how the schema layer turns millions of
//! trace entries into the model while reading, instead of first building
//! them as dicts.
//!
//! Trace entries, nearly all of a large file, have a faster road still
//! ([`Vm::entry`]): where a sink says a dict would be a trace entry, the
//! bytes CPython's pickler writes for one (`EMPTY_DICT MEMOIZE MARK`, keys
//! and values as memo references, short strings and integers, a frames list
//! of memo references, `SETITEMS`) are read straight into the entry with no
//! value stack and no node: the entry stays on the stack as a
//! [`Val::Record`], its memo entry is a tagged number naming the record, its
//! frames list one naming the sink's stack, and the trace list that receives
//! the records is one [`Node::Trace`]. Anything else the bytes hold (another
//! opcode, a string not seen before, a key the sink will not take, the end
//! of the window) leaves the entry, from its first byte and with nothing
//! changed, to the general machine, which decodes it to the same model.
//! Records and stacks get a node only if the file names them somewhere else
//! too (a memo reference PyTorch never writes, but a hand-made file may).

use super::value::{Arena, Node, Vid};
use crate::core::hash::{FX, FxBuild};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::{self, Read};

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
    /// Bytes up to and including STOP.
    pub bytes: u64,
    /// Bytes taken from the reader (reading runs a little ahead of STOP).
    pub read: u64,
}

/// A value on the machine's stack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    Node(Vid),
    None,
    Bool(bool),
    Int(i64),
    BigInt,
    Float(f64),
    /// A trace entry the sink took, without a node: (list, index), as
    /// [`Node::Record`].
    Record(u32, u32),
    /// A frames list the sink took, without a node: as [`Node::Stack`].
    Stack(u32),
}

/// Lets the schema layer take records while the machine reads.
///
/// `stack` is the machine's stack and `marks` the positions of its MARKs,
/// innermost last: with them a sink can tell where a container will end up
/// (the container below the nearest MARK receives the items above it).
pub trait Sink {
    /// The list `list` was just pushed on top of `stack`.
    fn list_created(&mut self, _arena: &Arena, _stack: &[Val], _marks: &[usize], _list: Vid) {}
    /// The list on top of `stack` was read whole, with `items`, in one go
    /// (see [`Vm::list_of_references`]). Returning a node stores it in the
    /// list's place; the items then live wherever the sink keeps them.
    fn list_filled(
        &mut self,
        _arena: &Arena,
        _stack: &[Val],
        _marks: &[usize],
        _items: &[Vid],
    ) -> Option<Node> {
        None
    }
    /// The first items (keys and values alternating) are about to go into
    /// the empty dict at `stack[dict_pos]`. Returning a node stores it in
    /// the dict's place instead; the items are then dropped.
    fn dict_filled(
        &mut self,
        _arena: &mut Arena,
        _stack: &[Val],
        _marks: &[usize],
        _dict_pos: usize,
        _items: &[Val],
    ) -> Option<Node> {
        None
    }
    /// Whether trace entries may be read by the fast path ([`Vm::entry`]).
    fn fast_entries(&self) -> bool {
        false
    }
    /// The trace list that would receive a dict pushed on `stack` now, if
    /// this sink would take it.
    fn entry_owner(&mut self, _arena: &Arena, _stack: &[Val], _marks: &[usize]) -> Option<u32> {
        None
    }
    /// Takes a trace entry for `list` (`items`: keys and values
    /// alternating, as in [`Sink::dict_filled`]); its index in the list, or
    /// `None` to leave it to the arena. With `shape`, `items` are the values
    /// alone, of the keys numbered so by [`Sink::entry_shape`], in their
    /// order.
    fn take_entry(
        &mut self,
        _arena: &mut Arena,
        _list: u32,
        _items: &[Val],
        _shape: Option<u32>,
    ) -> Option<u32> {
        None
    }
    /// A number for the keys of an entry just taken (`items` as in
    /// [`Sink::take_entry`]), which later entries with the same keys in the
    /// same order pass to it; `None` when it keeps no such number.
    fn entry_shape(&mut self, _arena: &Arena, _items: &[Val]) -> Option<u32> {
        None
    }
    /// The stack number of a frames list with these items.
    fn take_stack(&mut self, _items: &[Vid]) -> Option<u32> {
        None
    }
    /// After STOP: the [`Node::Trace`] lists to turn into lists of
    /// [`Node::Record`]s, because the file names them elsewhere than where
    /// the schema layer reads them whole.
    fn finish(&mut self, _arena: &Arena, _root: Vid) -> Vec<Vid> {
        Vec::new()
    }
}

/// Takes nothing: every value stays in the arena.
pub struct NoSink;
impl Sink for NoSink {}

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

/// The window the machine reads through. Small enough to stay in a core's
/// L2 cache: each `read` then copies into cache-resident memory, which the
/// machine reads back at once, instead of through main memory (measured
/// faster than 4 MiB on 100 MB files; a length prefix longer than the window
/// still grows it as bytes arrive).
const WINDOW: usize = 256 << 10;

struct Input<R> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Input offset of `buf[0]`.
    base: u64,
    eof: bool,
    err: Option<io::Error>,
}

impl<R: Read> Input<R> {
    #[inline]
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes `n` bytes available at `pos`; false when the input ends first.
    /// The window grows only as bytes arrive, so a length prefix that lies
    /// costs at most the input's own size.
    #[cold]
    fn fill(&mut self, n: usize) -> bool {
        if self.end - self.pos >= n {
            return true;
        }
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        while self.end < n && !self.eof {
            if self.end == self.buf.len() {
                let grown = (self.buf.len() * 2).max(WINDOW);
                self.buf.resize(grown, 0);
            }
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.err = Some(e);
                    self.eof = true;
                }
            }
        }
        self.end - self.pos >= n
    }

    /// The next byte if it is in the window.
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.buf[..self.end].get(self.pos).copied()
    }

    #[inline]
    fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill(1) {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    /// `n` bytes, or how many were left.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], usize> {
        if self.end - self.pos < n && !self.fill(n) {
            return Err(self.end - self.pos);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], usize> {
        self.take(N).map(|b| b.try_into().expect("N bytes"))
    }

    /// Up to the next newline (protocol 0 arguments), without it.
    fn line(&mut self) -> Option<Vec<u8>> {
        let mut from = self.pos;
        loop {
            if let Some(i) = self.buf[from..self.end].iter().position(|&b| b == b'\n') {
                let at = from + i;
                let line = self.buf[self.pos..at].to_vec();
                self.pos = at + 1;
                return Some(line);
            }
            let have = self.end - self.pos;
            if self.eof || !self.fill(have + 1) {
                return None;
            }
            from = self.pos + have;
        }
    }
}

struct Vm<'s, R, S> {
    inp: Input<R>,
    arena: Arena,
    stack: Vec<Val>,
    marks: Vec<usize>,
    memo: Vec<Vid>,
    memo_sparse: HashMap<u64, Vid>,
    op_start: u64,
    strings: HashMap<Box<str>, Vid, FxBuild>,
    /// The last short string read and its node.
    last_str: (Vec<u8>, Vid),
    scratch: Vec<Vid>,
    tuples: HashMap<[i64; 4], Vid, FxBuild>,
    sink: &'s mut S,
    /// Whether the fast path for trace entries is on.
    fast: bool,
    /// Records taken by the fast path, numbered in order (their memo tag).
    records: u32,
    /// Runs of those numbers: (first number, list, index in the list).
    runs: Vec<(u32, u32, u32)>,
    /// Nodes made for records and stacks the file names again.
    record_nodes: HashMap<(u32, u32), Vid, FxBuild>,
    stack_nodes: HashMap<u32, Vid, FxBuild>,
    /// Scratch of the fast path: the entry's items, its memo entries, its
    /// frames.
    f_items: Vec<Val>,
    f_memo: Vec<u32>,
    f_frames: Vec<Vid>,
    /// Frames lists by their bytes (memo references only): the same call
    /// sites recur all through a trace.
    f_cache: FramesCache,
    /// Bumped when a memo entry is written over: the bytes of a frames list
    /// read before may no longer name the same frames.
    f_gen: u32,
    /// The keys of the last entry whose keys were all memo references and
    /// not those of the shape before: each as its opcode's bytes (up to 5,
    /// little-endian) with their length and the value they stand for; the
    /// sink's number for them ([`Sink::entry_shape`]); the generation they
    /// were read in. A trace repeats its keys entry after entry: matching
    /// those bytes spares each key's memo lookup here and its
    /// classification in the sink.
    shape: Vec<(u64, u8, Val)>,
    shape_id: u32,
    shape_gen: u32,
    /// Scratch: the current entry's keys as `shape` holds them; a second
    /// item buffer, for when a shape stops matching part way.
    f_keys: Vec<(u64, u8, Val)>,
    f_items_spare: Vec<Val>,
}

/// Frames lists read before, by their bytes: the stack each was taken as
/// and the generation ([`Vm::f_gen`]) it was read in. [`FRAMES_SETS`] sets
/// of [`FRAMES_WAYS`], a set chosen by the bytes where a list starts, so a
/// list is found before its end is known; a way compared costs one byte
/// (is there an APPENDS where the way's list ends?) unless it matches.
///
/// Lists of many call sites start with the same innermost frames, so the
/// same bytes, and land in one set: hence many ways. A set is filled in
/// turn and looked at first where it was last hit and just after: the
/// same call site again, or the next of a cycle of them in the order they
/// were first read, as a training step repeats its stacks. (Keeping each
/// set's ways in order of use instead, the largest real file found 3 020
/// of its 14 299 lists at the 14th way: a cycle of 14 stacks.)
///
/// Behind it, a list missed there is looked for by a hash of all its
/// bytes ([`DEEP_SETS`] sets of [`DEEP_WAYS`], filled in turn), found at
/// the cost of reading it to its end: on a file whose call sites share
/// their innermost frames by the hundred (the OOM file among the real
/// ones), one set's ways cannot hold them all.
struct FramesCache {
    slots: Vec<FramesSlot>,
    /// Per set: the way filled next, and the way last hit or filled.
    next: Vec<u8>,
    last: Vec<u8>,
    /// Empty until a list is cached there (most files never miss).
    deep: Vec<DeepSlot>,
    deep_next: Vec<u8>,
    hasher: foldhash::fast::FixedState,
}

#[derive(Clone)]
struct FramesSlot {
    bytes: Box<[u8]>,
    /// [`tail_word`] of `bytes`: the lists of a set share their first 32
    /// bytes and most differ in their last 8, so most misses are told
    /// without comparing all of them.
    tail: u64,
    /// [`NO_STACK`]: the way is empty.
    stack: u32,
    generation: u32,
}

#[derive(Clone)]
struct DeepSlot {
    bytes: Box<[u8]>,
    hash: u64,
    /// [`NO_STACK`]: the way is empty.
    stack: u32,
    generation: u32,
}

const FRAMES_SETS: usize = 64;
const FRAMES_WAYS: usize = 32;
const DEEP_SETS: usize = 256;
const DEEP_WAYS: usize = 8;
const NO_STACK: u32 = u32::MAX;

/// The deep cache's set for a list's hash.
fn deep_set(hash: u64) -> usize {
    (hash >> 56) as usize % DEEP_SETS
}

impl FramesCache {
    fn new() -> FramesCache {
        let empty = FramesSlot {
            bytes: Box::default(),
            tail: 0,
            stack: NO_STACK,
            generation: 0,
        };
        FramesCache {
            slots: vec![empty; FRAMES_SETS * FRAMES_WAYS],
            next: vec![0; FRAMES_SETS],
            last: vec![0; FRAMES_SETS],
            deep: Vec::new(),
            deep_next: Vec::new(),
            hasher: foldhash::fast::FixedState::default(),
        }
    }

    /// The stack of the list of references that starts at `b[from]` and
    /// the end of its APPENDS, when it was read before in `generation`.
    #[inline]
    fn find(&mut self, b: &[u8], from: usize, set: usize, generation: u32) -> Option<(u32, usize)> {
        let ways = &self.slots[set * FRAMES_WAYS..][..FRAMES_WAYS];
        let is = |w: usize| {
            let slot = &ways[w];
            let n = slot.bytes.len();
            slot.generation == generation
                && slot.stack != NO_STACK
                && b.get(from + n) == Some(&b'e')
                && tail_word(&b[from..from + n]) == slot.tail
                && b[from..from + n] == *slot.bytes
        };
        let last = self.last[set] as usize;
        let after = (last + 1) % FRAMES_WAYS;
        let w = if is(last) {
            last
        } else if is(after) {
            after
        } else {
            (0..FRAMES_WAYS).find(|&w| w != last && w != after && is(w))?
        };
        self.last[set] = w as u8;
        let slot = &ways[w];
        Some((slot.stack, from + slot.bytes.len() + 1))
    }

    /// Caches a list (its references, without the APPENDS) in `set`.
    fn insert(&mut self, set: usize, bytes: &[u8], stack: u32, generation: u32) {
        let w = self.next[set] as usize;
        self.next[set] = ((w + 1) % FRAMES_WAYS) as u8;
        self.last[set] = w as u8;
        self.slots[set * FRAMES_WAYS + w] = FramesSlot {
            tail: tail_word(bytes),
            bytes: bytes.into(),
            stack,
            generation,
        };
    }

    /// The stack of a list missed by [`FramesCache::find`], by all its
    /// bytes; else the hash to cache it under.
    #[inline]
    fn find_deep(&self, bytes: &[u8], generation: u32) -> Result<u32, u64> {
        let hash = self.hasher.hash_one(bytes);
        let set = deep_set(hash);
        self.deep
            .get(set * DEEP_WAYS..(set + 1) * DEEP_WAYS)
            .unwrap_or_default()
            .iter()
            .find(|d| {
                d.hash == hash
                    && d.generation == generation
                    && d.stack != NO_STACK
                    && *d.bytes == *bytes
            })
            .map(|d| d.stack)
            .ok_or(hash)
    }

    fn insert_deep(&mut self, bytes: &[u8], hash: u64, stack: u32, generation: u32) {
        if self.deep.is_empty() {
            let empty = DeepSlot {
                bytes: Box::default(),
                hash: 0,
                stack: NO_STACK,
                generation: 0,
            };
            self.deep = vec![empty; DEEP_SETS * DEEP_WAYS];
            self.deep_next = vec![0; DEEP_SETS];
        }
        let set = deep_set(hash);
        let w = self.deep_next[set] as usize;
        self.deep_next[set] = ((w + 1) % DEEP_WAYS) as u8;
        self.deep[set * DEEP_WAYS + w] = DeepSlot {
            bytes: bytes.into(),
            stack,
            generation,
            hash,
        };
    }

    /// Forgets every list (when generations wrap around).
    fn clear(&mut self) {
        self.slots.iter_mut().for_each(|c| c.stack = NO_STACK);
        self.deep.iter_mut().for_each(|c| c.stack = NO_STACK);
    }
}

const NO_MEMO: Vid = Vid::MAX;

/// A memo entry is a node id below [`TAG`]; above, a record of the fast
/// path (`TAG | number`) or a stack (`TAG_STACK | number`), which have no
/// node. 4 bytes each, like a node id.
const TAG: u32 = 1 << 31;
const TAG_STACK: u32 = 3 << 30;
const PAYLOAD: u32 = (1 << 30) - 1;
/// Memo entries of the fast path not yet stored: the entry's dict, its
/// frames list.
const PENDING_DICT: u32 = u32::MAX;
const PENDING_LIST: u32 = u32::MAX - 1;

/// Node ids are u32 (half the memory of usize on the large files) and
/// below [`TAG`]; one opcode makes at most one node, so only an input of
/// more than 2 Gi opcodes can run out of them, and it is refused rather
/// than wrapped.
const MAX_NODES: usize = TAG as usize - 1;

/// How many bytes the window should hold where a trace entry starts: more
/// than any entry CPython writes with known keys (a few hundred bytes); a
/// longer one is read by the general machine.
const ENTRY_MAX: usize = 8 << 10;

/// Decodes one pickle held in memory. Trailing bytes after STOP are ignored
/// (as `pickle.load` does).
pub fn decode(data: &[u8]) -> Result<Decoded, PickleError> {
    decode_from(data, &mut NoSink)
}

/// Decodes one pickle from a reader, offering dicts to `sink`. Stops reading
/// at STOP. An I/O error of the reader comes back as
/// [`DecodeError::Io`]; everything else the file got wrong as
/// [`DecodeError::Pickle`].
pub fn decode_from<R: Read, S: Sink>(r: R, sink: &mut S) -> Result<Decoded, PickleError> {
    decode_reader(r, sink).map_err(|e| match e {
        DecodeError::Pickle(p) => p,
        DecodeError::Io(e, offset) => PickleError {
            offset,
            msg: format!("cannot read: {e}"),
        },
    })
}

#[derive(Debug)]
pub enum DecodeError {
    Pickle(PickleError),
    /// The reader failed at this offset.
    Io(io::Error, u64),
}

/// [`decode_from`], keeping a reader's own error apart from the file's.
pub fn decode_reader<R: Read, S: Sink>(r: R, sink: &mut S) -> Result<Decoded, DecodeError> {
    let mut vm = Vm {
        inp: Input {
            r,
            buf: vec![0; WINDOW],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            err: None,
        },
        arena: Arena::default(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: Vec::new(),
        memo_sparse: Default::default(),
        op_start: 0,
        strings: HashMap::default(),
        last_str: (Vec::new(), NO_MEMO),
        scratch: Vec::new(),
        tuples: HashMap::default(),
        fast: sink.fast_entries(),
        sink,
        records: 0,
        runs: Vec::new(),
        record_nodes: HashMap::default(),
        stack_nodes: HashMap::default(),
        f_items: Vec::new(),
        f_memo: Vec::new(),
        f_frames: Vec::new(),
        f_cache: FramesCache::new(),
        f_gen: 0,
        shape: Vec::new(),
        shape_id: 0,
        shape_gen: 0,
        f_keys: Vec::new(),
        f_items_spare: Vec::new(),
    };
    let r = vm.run();
    if let Some(e) = vm.inp.err.take() {
        let at = vm.inp.offset();
        return Err(DecodeError::Io(e, at));
    }
    r.map_err(DecodeError::Pickle)
}

impl<R: Read, S: Sink> Vm<'_, R, S> {
    fn run(&mut self) -> Result<Decoded, PickleError> {
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
                            self.inp.buf[pos..pos + 8].try_into().expect("8 bytes"),
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

    /// CPython writes a list of shared objects (a stack's frames) as
    /// `MEMOIZE MARK` (`BINGET n` | `LONG_BINGET n`)… `APPENDS`. When the
    /// window holds all of that after the new list `id`, it is read here in
    /// one pass, with the effect the opcodes would have; anything else (and a
    /// reference the memo does not hold) is left to the dispatch loop.
    #[inline]
    fn list_of_references(&mut self, id: Vid) {
        let buf = &self.inp.buf[self.inp.pos..self.inp.end];
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
    fn entry(&mut self) -> bool {
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
    fn read_entry(&mut self, l: u32) -> Option<usize> {
        let Vm {
            inp,
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
            ..
        } = self;
        let b = &inp.buf[..inp.end];
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
        let mut cache_at = None;
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
                if op == b'j' || op == b'h' {
                    i -= 1;
                    let idx = reference(&mut i)?;
                    f_items.push(lookup(f_memo, idx)?);
                    false
                } else {
                    match op {
                        b'K' => {
                            i += 1;
                            f_items.push(Val::Int(*b.get(i - 1)? as i64));
                            false
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
                            // Only strings already read: a new one makes a node,
                            // which is the general machine's to make.
                            let id = if last_str.1 != NO_MEMO && s == &last_str.0[..] {
                                last_str.1
                            } else {
                                let id = *strings.get(std::str::from_utf8(s).ok()?)?;
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
                                    // A list seen before is found by its bytes
                                    // without walking them: same bytes (references
                                    // only) followed by APPENDS are the same list.
                                    let set = frames_set(&b[from..]);
                                    if let Some(set) = set
                                        && let Some((s, end)) = f_cache.find(b, from, set, *f_gen)
                                    {
                                        frames_known = Some(s);
                                        i = end;
                                    }
                                    if frames_known.is_none() {
                                        let j = references_end(b, from);
                                        if let Some(set) = set
                                            && b.get(j) == Some(&b'e')
                                        {
                                            match f_cache.find_deep(&b[from..j], *f_gen) {
                                                Ok(s) => {
                                                    f_cache.insert(set, &b[from..j], s, *f_gen);
                                                    frames_known = Some(s);
                                                    i = j + 1;
                                                }
                                                Err(hash) => cache_at = Some((set, from, j, hash)),
                                            }
                                        }
                                    }
                                    while frames_known.is_none() {
                                        skip_frames(&mut i);
                                        if b.get(i) == Some(&b'e') {
                                            i += 1;
                                            break;
                                        }
                                        let idx = reference(&mut i)?;
                                        if idx >= memo_len {
                                            cache_at = None;
                                        }
                                        let Val::Node(v) = lookup(f_memo, idx)? else {
                                            return None;
                                        };
                                        f_frames.push(v);
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
            if let Some((set, from, to, hash)) = cache_at {
                let bytes = &self.inp.buf[from..to];
                self.f_cache.insert(set, bytes, s, self.f_gen);
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

    fn err_at(&self, offset: u64, msg: impl Into<String>) -> PickleError {
        PickleError {
            offset,
            msg: msg.into(),
        }
    }
    fn err(&self, msg: impl Into<String>) -> PickleError {
        self.err_at(self.op_start, msg)
    }
    fn truncated(&self) -> PickleError {
        self.err("truncated: the file ends inside an opcode")
    }
    #[inline]
    fn byte(&mut self) -> Result<u8, PickleError> {
        match self.inp.byte() {
            Some(b) => Ok(b),
            None => Err(self.truncated()),
        }
    }
    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        self.inp.array::<N>().map_err(|_| self.truncated())
    }
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        if self.inp.end - self.inp.pos < n && !self.inp.fill(n) {
            let left = self.inp.end - self.inp.pos;
            return Err(self.err(format!(
                "length {n} runs past the end of the data ({left} bytes left)"
            )));
        }
        Ok(self.inp.take(n).expect("filled"))
    }
    #[inline]
    fn len4(&mut self) -> Result<usize, PickleError> {
        Ok(u32::from_le_bytes(self.array::<4>()?) as usize)
    }
    fn len8(&mut self) -> Result<usize, PickleError> {
        let n = u64::from_le_bytes(self.array::<8>()?);
        usize::try_from(n).map_err(|_| self.err(format!("length {n} is larger than the data")))
    }
    /// A protocol-0 text argument (rare and short: copied).
    fn line(&mut self) -> Result<Vec<u8>, PickleError> {
        self.inp
            .line()
            .ok_or_else(|| self.err("truncated: no newline after a text argument"))
    }
    #[inline]
    fn push_node(&mut self, n: Node) {
        let id = self.arena.push(n);
        self.stack.push(Val::Node(id));
    }
    /// A node for a stack value (scalars become nodes only here).
    #[inline]
    fn vid(&mut self, v: Val) -> Vid {
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
    fn record_node(&mut self, l: u32, i: u32) -> Vid {
        if let Some(&id) = self.record_nodes.get(&(l, i)) {
            return id;
        }
        let id = self.arena.push(Node::Record(l, i));
        self.arena.taken = self.arena.taken.saturating_sub(1);
        self.record_nodes.insert((l, i), id);
        id
    }
    fn stack_node(&mut self, s: u32) -> Vid {
        if let Some(&id) = self.stack_nodes.get(&s) {
            return id;
        }
        let id = self.arena.push(Node::Stack(s));
        self.arena.taken = self.arena.taken.saturating_sub(1);
        self.stack_nodes.insert(s, id);
        id
    }
    /// A [`Node::Trace`] made the list of `Record`s it stands for.
    fn materialize_trace(&mut self, t: Vid) {
        if let Some(&Node::Trace(l, n)) = self.arena.nodes.get(t as usize) {
            let items = (0..n).map(|i| self.record_node(l, i)).collect();
            self.arena.nodes[t as usize] = Node::List(items);
        }
    }
    #[inline]
    fn vids_from(&mut self, m: usize) -> Vec<Vid> {
        let mut out = Vec::with_capacity(self.stack.len() - m);
        for i in m..self.stack.len() {
            let v = self.stack[i];
            out.push(self.vid(v));
        }
        self.stack.truncate(m);
        out
    }
    /// Equal strings are one node.
    fn push_string(&mut self, s: &str) {
        let id = match self.strings.get(s) {
            Some(&id) => id,
            None => {
                let id = self.arena.push(Node::Str(s.into()));
                self.strings.insert(s.into(), id);
                id
            }
        };
        self.stack.push(Val::Node(id));
    }
    #[inline]
    fn push_str(&mut self, n: usize) -> Result<(), PickleError> {
        self.take(n)?;
        let b = &self.inp.buf[self.inp.pos - n..self.inp.pos];
        // The same short string over and over (every entry's
        // `compile_context`) skips the hash table.
        if self.last_str.1 != NO_MEMO && b == &self.last_str.0[..] {
            self.stack.push(Val::Node(self.last_str.1));
            return Ok(());
        }
        let id = match std::str::from_utf8(b) {
            Ok(s) => match self.strings.get(s) {
                Some(&id) => id,
                None => {
                    let id = self.arena.push(Node::Str(s.into()));
                    self.strings.insert(s.into(), id);
                    id
                }
            },
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
    fn push_latin1(&mut self, n: usize) -> Result<(), PickleError> {
        let s: String = self.take(n)?.iter().map(|&c| c as char).collect();
        self.push_string(&s);
        Ok(())
    }
    fn push_bytes(&mut self, n: usize) -> Result<(), PickleError> {
        let b: Box<[u8]> = self.take(n)?.into();
        self.push_node(Node::Bytes(b));
        Ok(())
    }
    /// A tuple of `stack[from..]`; tuples of up to three integers (pool ids)
    /// are stored once per value.
    fn push_tuple(&mut self, from: usize) {
        let items = &self.stack[from..];
        if (1..=3).contains(&items.len()) && items.iter().all(|v| matches!(v, Val::Int(_))) {
            // The length is part of the value: (0,) and (0, 0) differ.
            let mut key = [items.len() as i64, 0, 0, 0];
            for (k, v) in key[1..].iter_mut().zip(items) {
                if let Val::Int(i) = v {
                    *k = *i;
                }
            }
            if let Some(&id) = self.tuples.get(&key) {
                self.stack.truncate(from);
                self.stack.push(Val::Node(id));
                return;
            }
            let kids = self.vids_from(from);
            let id = self.arena.push(Node::Tuple(kids.into_boxed_slice()));
            self.tuples.insert(key, id);
            self.stack.push(Val::Node(id));
            return;
        }
        let kids = self.vids_from(from);
        self.push_node(Node::Tuple(kids.into_boxed_slice()));
    }
    #[inline]
    fn pop(&mut self) -> Result<Val, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(self.stack.pop().expect("checked"))
    }
    #[inline]
    fn top(&self) -> Result<Val, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow (a malformed or truncated pickle)"));
        }
        Ok(*self.stack.last().expect("checked"))
    }
    #[inline]
    fn pop_mark(&mut self) -> Result<usize, PickleError> {
        self.marks
            .pop()
            .ok_or_else(|| self.err("no MARK on the stack"))
    }
    fn list_extend(&mut self, target: Val, items: &[Vid]) -> Result<(), PickleError> {
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
    fn dict_extend(&mut self, at: usize) -> Result<(), PickleError> {
        let target = self.stack[at - 1];
        let t = match target {
            Val::Node(t) => t,
            Val::Record(..) => {
                return Err(self.err(
                    "SETITEM on a trace entry after it was read (PyTorch never writes this)",
                ));
            }
            _ => return Err(self.err(format!("SETITEM on a {}, not a dict", val_kind(target)))),
        };
        let empty = match self.arena.get(t) {
            Node::Dict(d) => d.is_empty(),
            Node::Record(..) => {
                return Err(self.err(
                    "SETITEM on a trace entry after it was read (PyTorch never writes this)",
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
    fn put(&mut self, idx: u64) -> Result<(), PickleError> {
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
    fn get(&mut self, idx: u64) -> Result<(), PickleError> {
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
    fn get_sparse(&mut self, idx: u64) -> Result<(), PickleError> {
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

fn val_kind(v: Val) -> &'static str {
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

/// The last 8 bytes of `b` (all of a shorter one) as a number.
#[inline]
fn tail_word(b: &[u8]) -> u64 {
    match b.len().checked_sub(8) {
        Some(k) => u64::from_le_bytes(b[k..].try_into().expect("8 bytes")),
        None => le_word(b),
    }
}

/// `b`, of at most 8 bytes, as a little-endian number (zeros above it).
#[inline]
fn le_word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// The set of the fast path's frames cache for a list whose items start
/// at `b[0]`: its first 32 bytes (several references; a shorter list adds
/// the bytes after it, which only costs a miss where they differ). `None`
/// near the end of the input.
#[inline]
fn frames_set(b: &[u8]) -> Option<usize> {
    let w: &[u8; 32] = b.get(..32)?.try_into().ok()?;
    let word = |k: usize| u64::from_le_bytes(w[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
    let h = (word(0) ^ word(1).rotate_left(17) ^ word(2).rotate_left(31) ^ word(3).rotate_left(47))
        .wrapping_mul(FX);
    Some((h >> 57) as usize % FRAMES_SETS)
}

/// Where a run of BINGET/LONG_BINGET opcodes starting at `b[i]` ends.
/// Eight bytes at a time while they are four BINGETs (most references of
/// a small memo), one opcode at a time otherwise.
#[inline]
fn references_end(b: &[u8], mut i: usize) -> usize {
    const MASK: u64 = 0x00ff_00ff_00ff_00ff;
    const GETS: u64 = 0x0068_0068_0068_0068;
    loop {
        if let Some(w) = b.get(i..i + 8)
            && u64::from_le_bytes(w.try_into().expect("8 bytes")) & MASK == GETS
        {
            i += 8;
            continue;
        }
        match b.get(i) {
            Some(b'h') => i += 2,
            Some(b'j') => i += 5,
            _ => return i,
        }
    }
}

/// Records appended, in order, to a list that so far holds the records
/// before them (or nothing): the list stays one [`Node::Trace`]. Records of
/// the general machine (a node each: the first entries, with strings not
/// seen before) count as well. False, with nothing changed, for anything
/// else.
fn append_records(arena: &mut Arena, target: Val, items: &[Val]) -> bool {
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

/// The low `n` bytes (0..=8) of `w` as a two's-complement integer.
#[inline]
fn sign_extend(w: u64, n: usize) -> i64 {
    if n == 0 {
        return 0;
    }
    let shift = 64 - 8 * n as u32;
    ((w << shift) as i64) >> shift
}

/// Little-endian two's-complement integer of any length (LONG1/LONG4).
fn long_from_le(b: &[u8]) -> Val {
    if b.is_empty() {
        return Val::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
        a[..b.len()].copy_from_slice(b);
        return Val::Int(i64::from_le_bytes(a));
    }
    // Longer encodings still fit when the extra bytes are pure sign extension.
    let neg = b[b.len() - 1] & 0x80 != 0;
    let ext = if neg { 0xff } else { 0 };
    if b[8..].iter().all(|&x| x == ext) && ((b[7] & 0x80 != 0) == neg) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        return Val::Int(i64::from_le_bytes(a));
    }
    Val::BigInt
}

fn parse_int_text(line: &[u8]) -> Option<Val> {
    let s = std::str::from_utf8(line).ok()?.trim();
    if s.is_empty() {
        return None;
    }
    match s.parse::<i64>() {
        Ok(v) => Some(Val::Int(v)),
        Err(_)
            if s.trim_start_matches('-')
                .bytes()
                .all(|c| c.is_ascii_digit()) =>
        {
            Some(Val::BigInt)
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
    fn long1_word_read_agrees_with_the_byte_read() {
        let samples: [&[u8]; 9] = [
            b"",
            b"\x7f",
            b"\x80",
            b"\xff\x00",
            b"\x00\x80",
            b"\x00\xa0\x3c\x8b\xfe\x7f",
            b"\x45\x23\x01\x00\x00\x00\x06\x00",
            b"\x00\x00\x00\x00\x00\x00\x00\x80",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for b in samples {
            let mut w = [0xa5u8; 8];
            w[..b.len()].copy_from_slice(b);
            let fast = Val::Int(sign_extend(u64::from_le_bytes(w), b.len()));
            assert_eq!(fast, long_from_le(b), "{b:?}");
        }
        // Through the machine: a LONG1 near the end of the data takes the
        // byte path, one further in the word path; both give the value.
        let mut p = b"\x80\x04]\x94(\x8a\x03\xff\xff\x7f".to_vec();
        p.extend_from_slice(b"\x8a\x02\x00\x80e.");
        let d = decode(&p).unwrap();
        let Node::List(v) = root(&d) else { panic!() };
        assert_eq!(d.arena.get(v[0]), &Node::Int(0x7f_ffff));
        assert_eq!(d.arena.get(v[1]), &Node::Int(-32768));
    }

    #[test]
    fn missing_memo_key() {
        let e = decode(b"\x80\x04h\x05.").err().unwrap();
        assert!(e.msg.contains("memo reference 5"));
    }
}
