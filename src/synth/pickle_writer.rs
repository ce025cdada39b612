//! A pickle writer that produces, byte for byte, what CPython's C pickler
//! (`_pickle.c`, `pickle.dump(obj, f, protocol=4)`) writes for the builtin
//! values a memory snapshot holds: dict, list, tuple, str, int, float, bool
//! and None.
//!
//! What "as CPython does" means here, rule by rule:
//!
//! * `PROTO 4`, then everything in frames: a frame is closed at the start of
//!   the first value written after it reached 64 KiB (so frames are slightly
//!   *over* 64 KiB, never cut inside a value's opcodes), the last frame
//!   holds `STOP`, and a frame shorter than 4 bytes gets no `FRAME` header.
//!   A string of 64 KiB or more is written outside any frame.
//! * Every str, list, dict and non-empty tuple is memoized (`MEMOIZE`) when
//!   first written and referenced (`BINGET` below index 256, `LONG_BINGET`
//!   above) every later time *the same object* is written. Identity is the
//!   caller's: [`Ident::Shared`] names one object, [`Ident::Fresh`] is a new
//!   object each time. CPython's own singletons (the empty string and
//!   one-character strings below U+0100) are shared whatever the caller says,
//!   because Python hands out one object for them.
//! * Lists and dicts: `EMPTY_LIST`/`EMPTY_DICT`, `MEMOIZE`, then one item with
//!   `APPEND`/`SETITEM`, or batches of 1000 in `MARK … APPENDS`/`SETITEMS`.
//!   As in `batch_dict_exact`, a dict whose last batch is exactly full is
//!   followed by an empty `MARK SETITEMS`.
//! * Ints: `BININT1`, `BININT2`, `BININT` for what fits in 32 signed bits,
//!   `LONG1` with the shortest two's-complement bytes otherwise. Floats:
//!   `BINFLOAT` (big-endian). Bools: `NEWTRUE`/`NEWFALSE`.
//!
//! The writer streams: values are pushed by the caller one by one (lists and
//! dicts through callbacks), so a gigabyte snapshot never exists in memory,
//! and committed frames go to the output as they close.
//!
//! Owns the encoding only; what a snapshot holds is `synth`'s business.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

const FRAME_SIZE_TARGET: usize = 64 * 1024;
const FRAME_SIZE_MIN: usize = 4;
const FRAME_HEADER_SIZE: usize = 9;
const BATCHSIZE: usize = 1000;

/// The opcodes of a batched container.
struct Batched {
    /// The empty container.
    empty: u8,
    /// After a single item.
    one: u8,
    /// After each batch.
    batch: u8,
    /// Whether a full last batch is followed by an empty one (dicts: the
    /// batch loop stops on a batch that is not full).
    after_full_batch: bool,
}

impl Batched {
    const LIST: Batched = Batched {
        empty: b']',
        one: b'a',
        batch: b'e',
        after_full_batch: false,
    };
    const DICT: Batched = Batched {
        empty: b'}',
        one: b's',
        batch: b'u',
        after_full_batch: true,
    };
}

/// The identity of a str, list, dict or tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ident {
    /// A new object, written once.
    Fresh,
    /// One object however often it is written; the number is the caller's.
    Shared(u64),
}

/// Ids at or above this are the writer's own (CPython's string singletons).
pub const RESERVED_IDS: u64 = u64::MAX - 512;

/// Memo keys are ids the caller chose; a multiplicative hash is enough and
/// much cheaper than SipHash on millions of references.
#[derive(Default)]
struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub struct Pickler<W: Write> {
    out: W,
    /// Bytes not yet handed to `out`: the open frame, or a header.
    buf: Vec<u8>,
    /// Where the open frame's 9-byte header sits in `buf`.
    frame_start: Option<usize>,
    framing: bool,
    memo: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    memo_len: u32,
    written: u64,
}

impl<W: Write> Pickler<W> {
    /// Writes `PROTO 4`; framing starts with the first value.
    pub fn new(out: W) -> Pickler<W> {
        Pickler {
            out,
            buf: vec![0x80, 4],
            frame_start: None,
            framing: true,
            memo: HashMap::default(),
            memo_len: 0,
            written: 0,
        }
    }

    /// Writes `STOP`, closes the last frame and returns the output and the
    /// number of bytes written.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        self.write(b".");
        self.commit_frame();
        self.flush_buf()?;
        self.out.flush()?;
        Ok((self.out, self.written))
    }

    /// How many objects are memoized so far.
    pub fn memo_len(&self) -> u32 {
        self.memo_len
    }

    // ---- framing ------------------------------------------------------------

    fn write(&mut self, bytes: &[u8]) {
        if self.framing && self.frame_start.is_none() {
            self.frame_start = Some(self.buf.len());
            self.buf.extend_from_slice(&[0xFE; FRAME_HEADER_SIZE]);
        }
        self.buf.extend_from_slice(bytes);
    }

    fn commit_frame(&mut self) {
        let Some(start) = self.frame_start.take() else {
            return;
        };
        let len = self.buf.len() - start - FRAME_HEADER_SIZE;
        if len >= FRAME_SIZE_MIN {
            self.buf[start] = 0x95;
            self.buf[start + 1..start + FRAME_HEADER_SIZE]
                .copy_from_slice(&(len as u64).to_le_bytes());
        } else {
            self.buf.drain(start..start + FRAME_HEADER_SIZE);
        }
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// CPython checks the frame size at the start of every `save()`.
    fn boundary(&mut self) -> io::Result<()> {
        if let Some(start) = self.frame_start
            && self.buf.len() - start - FRAME_HEADER_SIZE >= FRAME_SIZE_TARGET
        {
            self.commit_frame();
            self.flush_buf()?;
        }
        Ok(())
    }

    // ---- memo ---------------------------------------------------------------

    /// Emits a memo reference when `id` was written before.
    fn get(&mut self, id: Ident) -> bool {
        let Ident::Shared(id) = id else {
            return false;
        };
        let Some(&idx) = self.memo.get(&id) else {
            return false;
        };
        if idx < 256 {
            self.write(&[b'h', idx as u8]);
        } else {
            let mut op = [b'j', 0, 0, 0, 0];
            op[1..].copy_from_slice(&idx.to_le_bytes());
            self.write(&op);
        }
        true
    }

    fn memoize(&mut self, id: Ident) {
        if let Ident::Shared(id) = id {
            self.memo.insert(id, self.memo_len);
        }
        self.memo_len += 1;
        self.write(&[0x94]);
    }

    // ---- values -------------------------------------------------------------

    pub fn none(&mut self) -> io::Result<()> {
        self.boundary()?;
        self.write(b"N");
        Ok(())
    }

    pub fn bool(&mut self, v: bool) -> io::Result<()> {
        self.boundary()?;
        self.write(&[if v { 0x88 } else { 0x89 }]);
        Ok(())
    }

    pub fn int(&mut self, v: i64) -> io::Result<()> {
        self.boundary()?;
        if let Ok(v32) = i32::try_from(v) {
            let b = v32.to_le_bytes();
            if b[3] != 0 || b[2] != 0 {
                self.write(&[b'J', b[0], b[1], b[2], b[3]]);
            } else if b[1] != 0 {
                self.write(&[b'M', b[0], b[1]]);
            } else {
                self.write(&[b'K', b[0]]);
            }
            return Ok(());
        }
        // `save_long`: bit length / 8 + 1 bytes, one fewer for the negative
        // numbers whose top byte is pure sign.
        let nbits = 64 - v.unsigned_abs().leading_zeros() as usize;
        let mut n = nbits / 8 + 1;
        let full = v.to_le_bytes();
        let ext = if v < 0 { 0xFF } else { 0 };
        let byte = |i: usize| if i < 8 { full[i] } else { ext };
        if v < 0 && n > 1 && byte(n - 1) == 0xFF && byte(n - 2) & 0x80 != 0 {
            n -= 1;
        }
        let mut op = Vec::with_capacity(n + 2);
        op.push(0x8A);
        op.push(n as u8);
        op.extend((0..n).map(byte));
        self.write(&op);
        Ok(())
    }

    pub fn float(&mut self, v: f64) -> io::Result<()> {
        self.boundary()?;
        let mut op = [b'G'; 9];
        op[1..].copy_from_slice(&v.to_be_bytes());
        self.write(&op);
        Ok(())
    }

    pub fn str(&mut self, id: Ident, s: &str) -> io::Result<()> {
        self.boundary()?;
        let id = singleton(s).unwrap_or(id);
        if self.get(id) {
            return Ok(());
        }
        let n = s.len();
        let mut header = Vec::with_capacity(9);
        if n <= 0xFF {
            header.extend_from_slice(&[0x8C, n as u8]);
        } else if n as u64 <= 0xFFFF_FFFF {
            header.push(b'X');
            header.extend_from_slice(&(n as u32).to_le_bytes());
        } else {
            header.push(0x8D);
            header.extend_from_slice(&(n as u64).to_le_bytes());
        }
        if n >= FRAME_SIZE_TARGET {
            // `_Pickler_write_bytes`: large payloads go between frames.
            self.commit_frame();
            self.framing = false;
            self.write(&header);
            self.write(s.as_bytes());
            self.framing = true;
        } else {
            self.write(&header);
            self.write(s.as_bytes());
        }
        self.memoize(id);
        Ok(())
    }

    /// A list of `len` items; `item(p, i)` writes item `i`. Nothing of the
    /// items is written when `id` names a list written before.
    pub fn list(
        &mut self,
        id: Ident,
        len: usize,
        item: impl FnMut(&mut Self, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        self.batched(id, len, item, Batched::LIST)
    }

    /// A dict of `len` items; `item(p, i)` writes the key and then the value
    /// of item `i`.
    pub fn dict(
        &mut self,
        id: Ident,
        len: usize,
        item: impl FnMut(&mut Self, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        self.batched(id, len, item, Batched::DICT)
    }

    /// A list or dict as CPython's `batch_list` and `batch_dict` write it:
    /// the empty container (memoized), then one item and its single opcode,
    /// or batches of at most `BATCHSIZE` items between a mark and the batch
    /// opcode.
    fn batched(
        &mut self,
        id: Ident,
        len: usize,
        mut item: impl FnMut(&mut Self, usize) -> io::Result<()>,
        kind: Batched,
    ) -> io::Result<()> {
        self.boundary()?;
        if self.get(id) {
            return Ok(());
        }
        self.write(&[kind.empty]);
        self.memoize(id);
        if len == 0 {
            return Ok(());
        }
        if len == 1 {
            item(self, 0)?;
            self.write(&[kind.one]);
            return Ok(());
        }
        let mut i = 0;
        loop {
            self.write(b"(");
            let end = (i + BATCHSIZE).min(len);
            let full = end - i == BATCHSIZE;
            while i < end {
                item(self, i)?;
                i += 1;
            }
            self.write(&[kind.batch]);
            if i == len && !(full && kind.after_full_batch) {
                return Ok(());
            }
        }
    }

    /// A tuple of `len` items (PyTorch writes pool ids as 2-tuples).
    pub fn tuple(
        &mut self,
        id: Ident,
        len: usize,
        mut item: impl FnMut(&mut Self, usize) -> io::Result<()>,
    ) -> io::Result<()> {
        self.boundary()?;
        if self.get(id) {
            return Ok(());
        }
        if len == 0 {
            self.write(b")");
            return Ok(());
        }
        if len <= 3 {
            for i in 0..len {
                item(self, i)?;
            }
            self.write(&[0x84 + len as u8]);
        } else {
            self.write(b"(");
            for i in 0..len {
                item(self, i)?;
            }
            self.write(b"t");
        }
        self.memoize(id);
        Ok(())
    }
}

/// CPython has one object for the empty string and for each one-character
/// string below U+0100, so a "fresh" one is still shared.
fn singleton(s: &str) -> Option<Ident> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (None, _) => Some(Ident::Shared(RESERVED_IDS)),
        (Some(c), None) if (c as u32) < 256 => Some(Ident::Shared(RESERVED_IDS + 1 + c as u64)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(f: impl FnOnce(&mut Pickler<Vec<u8>>) -> io::Result<()>) -> Vec<u8> {
        let mut p = Pickler::new(Vec::new());
        f(&mut p).unwrap();
        p.finish().unwrap().0
    }

    #[test]
    fn ints_take_cpythons_shortest_opcode() {
        // Expected bytes from `pickle.dumps(v, 4)` (CPython 3.11).
        let cases: &[(i64, &[u8])] = &[
            (0, b"K\x00"),
            (255, b"K\xff"),
            (256, b"M\x00\x01"),
            (65535, b"M\xff\xff"),
            (65536, b"J\x00\x00\x01\x00"),
            (-1, b"J\xff\xff\xff\xff"),
            (i32::MAX as i64, b"J\xff\xff\xff\x7f"),
            (1 << 31, b"\x8a\x05\x00\x00\x00\x80\x00"),
            (-(1 << 31) - 1, b"\x8a\x05\xff\xff\xff\x7f\xff"),
            (-(1 << 39), b"\x8a\x05\x00\x00\x00\x00\x80"),
            (0x7f12_3456_7800, b"\x8a\x06\x00\x78\x56\x34\x12\x7f"),
            (i64::MAX, b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"),
            (i64::MIN, b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"),
        ];
        for &(v, want) in cases {
            let got = dump(|p| p.int(v));
            // A frame of fewer than 4 bytes has no header.
            let body = if got[2] == 0x95 {
                &got[11..]
            } else {
                &got[2..]
            };
            assert_eq!(&body[..body.len() - 1], want, "{v}");
        }
    }

    #[test]
    fn shared_objects_are_memo_references() {
        let got = dump(|p| p.list(Ident::Fresh, 3, |p, _| p.str(Ident::Shared(7), "size")));
        // pickle.dumps(['size'] * 3, 4) with one str object
        assert_eq!(
            got,
            b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00]\x94(\x8c\x04size\x94h\x01h\x01e."
        );
    }

    #[test]
    fn empty_and_one_char_strings_are_singletons() {
        let got = dump(|p| p.list(Ident::Fresh, 2, |p, _| p.str(Ident::Fresh, "")));
        assert_eq!(
            got,
            b"\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00]\x94(\x8c\x00\x94h\x01e."
        );
    }

    #[test]
    fn frames_close_at_the_first_value_past_64k() {
        let n = 30_000;
        let got = dump(|p| p.list(Ident::Fresh, n, |p, i| p.int(i as i64 + 1_000_000)));
        let first = u64::from_le_bytes(got[3..11].try_into().unwrap()) as usize;
        assert!((FRAME_SIZE_TARGET..FRAME_SIZE_TARGET + 16).contains(&first));
        assert_eq!(got[2 + FRAME_HEADER_SIZE + first], 0x95);
    }

    #[test]
    fn a_dict_of_exactly_one_batch_ends_with_an_empty_batch() {
        let got = dump(|p| {
            p.dict(Ident::Fresh, BATCHSIZE, |p, i| {
                p.int(i as i64)?;
                p.none()
            })
        });
        assert!(got.ends_with(b"u(u."));
    }

    #[test]
    fn a_list_of_exactly_one_batch_ends_with_that_batch() {
        let got = dump(|p| p.list(Ident::Fresh, BATCHSIZE, |p, i| p.int(i as i64)));
        assert!(got.ends_with(b"e."));
        assert!(!got.ends_with(b"(e."));
    }
}
