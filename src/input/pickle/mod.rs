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
//! the records is one [`Node::Trace`]. A short string not read before gets
//! its node there, as the general machine makes it. Anything else the bytes
//! hold (another opcode, a key the sink will not take, the end of the
//! window) leaves the entry, from its first byte, to the general machine,
//! which decodes it to the same model: nothing else changed, and a string
//! node made on the way is found again (equal strings are one node).
//! Records and stacks get a node only if the file names them somewhere else
//! too (a memo reference PyTorch never writes, but a hand-made file may).

//!
//! The machine's parts, a file each: [`window`] (the read window over the
//! reader), [`dispatch`] (the opcode loop), [`entry`] (the fast path for
//! trace entries), [`frames`] (the cache of frames lists the fast path
//! finds again by their bytes), [`fresh`] (the same for frames lists whose
//! frames are dicts written out at every entry), [`ops`] (the stack, memo and container
//! operations the opcodes share) and [`literals`] (integers and strings
//! written as text or as little-endian bytes).

mod dispatch;
mod entry;
mod frames;
mod fresh;
mod literals;
mod ops;
mod window;

#[cfg(test)]
mod tests;

use frames::FramesCache;
use window::{Feed, Input};

use super::value::{Arena, Node, Vid};
use crate::core::hash::FxBuild;
use crate::core::table::IdIndex;
use std::collections::HashMap;
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

/// The string nodes of the arena, by their text.
type StrIndex = IdIndex<FxBuild>;

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

/// Whether the machine keeps one node for every tuple equal to `items`
/// (each an integer by `is_int`): a tuple of one to three integers, as a
/// pool id is, named wherever such a value is written. A sink leaves such a
/// node as it is.
pub fn is_shared_tuple<T>(items: &[T], is_int: impl Fn(&T) -> bool) -> bool {
    (1..=3).contains(&items.len()) && items.iter().all(is_int)
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

struct Vm<'s, F, S> {
    inp: Input<F>,
    arena: Arena,
    stack: Vec<Val>,
    marks: Vec<usize>,
    memo: Vec<Vid>,
    memo_sparse: HashMap<u64, Vid>,
    op_start: u64,
    strings: StrIndex,
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
    /// Frames lists of dicts written out, by their bytes.
    f_fresh: fresh::FreshCache,
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
    decode_slice(data, &mut NoSink, &mut |_| {})
}

/// Decodes one pickle held in memory (a mapped file, say), offering dicts
/// to `sink`, reading the bytes where they lie. `seen` is told, every
/// mebibyte, an offset before which every byte has been read for the last
/// time but for the entry in progress (a few kilobytes): an owner that maps
/// a file may release those pages. `read` is the slice's length.
pub fn decode_slice<S: Sink>(
    data: &[u8],
    sink: &mut S,
    seen: &mut dyn FnMut(u64),
) -> Result<Decoded, PickleError> {
    let mut vm = Vm::new(Input::slice(data, seen), sink);
    let mut d = vm.run()?;
    d.read = data.len() as u64;
    Ok(d)
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
    let mut vm = Vm::new(Input::reader(r), sink);
    let r = vm.run();
    if let Some(e) = vm.inp.err.take() {
        let at = vm.inp.offset();
        return Err(DecodeError::Io(e, at));
    }
    r.map_err(DecodeError::Pickle)
}

impl<'s, F: Feed, S: Sink> Vm<'s, F, S> {
    fn new(inp: Input<F>, sink: &'s mut S) -> Self {
        Vm {
            inp,
            arena: Arena::default(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: Vec::new(),
            memo_sparse: Default::default(),
            op_start: 0,
            strings: StrIndex::default(),
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
            f_fresh: fresh::FreshCache::new(),
            f_gen: 0,
            shape: Vec::new(),
            shape_id: 0,
            shape_gen: 0,
            f_keys: Vec::new(),
            f_items_spare: Vec::new(),
        }
    }
}
