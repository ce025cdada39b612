//! The window the machine reads its input through: a buffer of a few
//! hundred kilobytes refilled from any [`Read`], so that the input is never
//! held whole, with the offset of every byte for error messages.

use std::io::{self, Read};

/// The window the machine reads through. Small enough to stay in a core's
/// L2 cache: each `read` then copies into cache-resident memory, which the
/// machine reads back at once, instead of through main memory (measured
/// faster than 4 MiB on 100 MB files; a length prefix longer than the window
/// still grows it as bytes arrive).
pub(super) const WINDOW: usize = 256 << 10;

pub(super) struct Input<R> {
    pub(super) r: R,
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    pub(super) end: usize,
    /// Input offset of `buf[0]`.
    pub(super) base: u64,
    pub(super) eof: bool,
    pub(super) err: Option<io::Error>,
}

impl<R: Read> Input<R> {
    #[inline]
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes `n` bytes available at `pos`; false when the input ends first.
    /// The window grows only as bytes arrive, so a length prefix that lies
    /// costs at most the input's own size.
    #[cold]
    pub(super) fn fill(&mut self, n: usize) -> bool {
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
    pub(super) fn peek(&self) -> Option<u8> {
        self.buf[..self.end].get(self.pos).copied()
    }

    #[inline]
    pub(super) fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill(1) {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    /// `n` bytes, or how many were left.
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&[u8], usize> {
        if self.end - self.pos < n && !self.fill(n) {
            return Err(self.end - self.pos);
        }
        let s = &self.buf[self.pos..self.pos + n];
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
