//! The window the machine reads its input through, with the offset of every
//! byte for error messages. Two feeds fill it: [`Reader`], a buffer of a few
//! hundred kilobytes refilled from any [`Read`], so that a stream is never
//! held whole; and [`Slice`], bytes already in memory (a mapped file, a
//! decoded page), read where they lie with no copy, the window moved on in
//! steps so that the owner hears how far the machine has come.

use std::io::{self, Read};

/// The window the machine reads through. Small enough to stay in a core's
/// L2 cache: each `read` then copies into cache-resident memory, which the
/// machine reads back at once, instead of through main memory (measured
/// faster than 4 MiB on 100 MB files; a length prefix longer than the window
/// still grows it as bytes arrive).
pub(super) const WINDOW: usize = 256 << 10;

/// How far a [`Slice`]'s window reaches past the cursor: the owner hears of
/// the machine's progress once a step.
const STEP: usize = 1 << 20;

/// Where the window's bytes come from.
pub(super) trait Feed {
    /// The bytes the window's offsets index (`pos`, `end`).
    fn bytes(&self) -> &[u8];
    /// Makes `n` bytes available at `inp.pos`; false when the input ends
    /// first.
    fn fill(inp: &mut Input<Self>, n: usize) -> bool
    where
        Self: Sized;
}

/// A stream read through a buffer of its own.
pub(super) struct Reader<R> {
    pub(super) r: R,
    pub(super) buf: Vec<u8>,
}

/// Bytes in memory, read in place. `seen` is told each time the window
/// moves on: every byte before the offset it is given has been read for the
/// last time but for the entry in progress (at most a few kilobytes back),
/// which an owner that maps a file may release.
pub(super) struct Slice<'a> {
    pub(super) data: &'a [u8],
    pub(super) seen: &'a mut dyn FnMut(u64),
}

pub(super) struct Input<F> {
    pub(super) f: F,
    pub(super) pos: usize,
    pub(super) end: usize,
    /// Input offset of `bytes()[0]`.
    pub(super) base: u64,
    pub(super) eof: bool,
    pub(super) err: Option<io::Error>,
}

impl<R: Read> Feed for Reader<R> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The window grows only as bytes arrive, so a length prefix that lies
    /// costs at most the input's own size.
    #[cold]
    fn fill(inp: &mut Input<Self>, n: usize) -> bool {
        if inp.end - inp.pos >= n {
            return true;
        }
        let buf = &mut inp.f.buf;
        buf.copy_within(inp.pos..inp.end, 0);
        inp.base += inp.pos as u64;
        inp.end -= inp.pos;
        inp.pos = 0;
        while inp.end < n && !inp.eof {
            if inp.end == buf.len() {
                let grown = (buf.len() * 2).max(WINDOW);
                buf.resize(grown, 0);
            }
            match inp.f.r.read(&mut buf[inp.end..]) {
                Ok(0) => inp.eof = true,
                Ok(k) => inp.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    inp.err = Some(e);
                    inp.eof = true;
                }
            }
        }
        inp.end - inp.pos >= n
    }
}

impl Feed for Slice<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.data
    }

    #[cold]
    fn fill(inp: &mut Input<Self>, n: usize) -> bool {
        let len = inp.f.data.len();
        inp.end = len.min(inp.pos.saturating_add(n.max(STEP)));
        inp.eof = inp.end == len;
        (inp.f.seen)(inp.pos as u64);
        inp.end - inp.pos >= n
    }
}

impl<R: Read> Input<Reader<R>> {
    pub(super) fn reader(r: R) -> Self {
        Input {
            f: Reader {
                r,
                buf: vec![0; WINDOW],
            },
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            err: None,
        }
    }
}

impl<'a> Input<Slice<'a>> {
    pub(super) fn slice(data: &'a [u8], seen: &'a mut dyn FnMut(u64)) -> Self {
        Input {
            f: Slice { data, seen },
            pos: 0,
            end: 0,
            base: 0,
            eof: data.is_empty(),
            err: None,
        }
    }
}

impl<F: Feed> Input<F> {
    #[inline]
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The bytes of the window, up to its end.
    #[inline]
    pub(super) fn window(&self) -> &[u8] {
        &self.f.bytes()[..self.end]
    }

    #[inline]
    pub(super) fn fill(&mut self, n: usize) -> bool {
        F::fill(self, n)
    }

    /// The next byte if it is in the window.
    #[inline]
    pub(super) fn peek(&self) -> Option<u8> {
        self.window().get(self.pos).copied()
    }

    #[inline]
    pub(super) fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill(1) {
            return None;
        }
        let b = self.f.bytes()[self.pos];
        self.pos += 1;
        Some(b)
    }

    /// `n` bytes, or how many were left.
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&[u8], usize> {
        if self.end - self.pos < n && !self.fill(n) {
            return Err(self.end - self.pos);
        }
        let s = &self.f.bytes()[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], usize> {
        self.take(N).map(|b| b.try_into().expect("N bytes"))
    }

    /// Up to the next newline (protocol 0 arguments), without it.
    pub(super) fn line(&mut self) -> Option<Vec<u8>> {
        let mut from = self.pos;
        loop {
            if let Some(i) = self.window()[from..].iter().position(|&b| b == b'\n') {
                let at = from + i;
                let line = self.f.bytes()[self.pos..at].to_vec();
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
