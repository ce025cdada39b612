//! A paste read as a stream, never held whole: the line readers (messages,
//! `memory_summary()` tables) take it a line at a time, the readers of
//! dumps broken across lines (`memory_stats()`, segment dicts) take the
//! lines glued together through a bounded window.
//!
//! Both see the text cleaned as it comes: terminal colour codes left out
//! first ([`Uncoloured`]), then `\r\n` and a lone `\r` ending a line.
//!
//! A line longer than [`WINDOW`] bytes (a one-line log, a dump printed on
//! one line) is handed to the line readers in windows of that size, each
//! overlapping the one before by [`OVERLAP`] bytes; a message belongs to
//! the window its first words start in. The glued text is scanned the same
//! way. What is read of one message, key or dict is thus within
//! [`OVERLAP`] bytes of its start, far more than PyTorch ever prints for
//! one.

use super::reading::{BLOCK_DICT, BLOCK_SIZE, BLOCK_STATE, SEG_ALLOCATED, SEG_TOTAL, STAT_KV};
use super::*;
use std::io::BufRead;

/// The most of one line the line readers get at once.
pub(super) const WINDOW: usize = 1 << 20;
/// How far consecutive windows of one line overlap.
pub(super) const OVERLAP: usize = 64 << 10;

/// A line, or a window of a long one.
pub(super) struct Piece {
    /// The text, without colour codes or line ends.
    pub text: String,
    /// 0-based number of the line it is (part of).
    pub line: usize,
    /// A message starting at or past this byte is the next window's.
    pub own: usize,
    /// `text[fresh..]` was not in the window before (the whole text for a
    /// line read at once).
    pub fresh: usize,
    /// A whole line (not a window of a longer one).
    pub whole: bool,
}

/// The pieces of a reader's text, in order. A read error ends them; it is
/// kept in [`Pieces::error`].
pub(super) struct Pieces<R> {
    r: Uncoloured<R>,
    line: usize,
    /// The overlap a long line's next window starts with (raw bytes).
    carry: Vec<u8>,
    /// The last line ended with `\r`: a `\n` next is part of that ending.
    skip_lf: bool,
    done: bool,
    pub error: Option<std::io::Error>,
}

impl<R: BufRead> Pieces<R> {
    pub fn new(r: R) -> Pieces<R> {
        Pieces {
            r: Uncoloured::new(r),
            line: 0,
            carry: Vec::new(),
            skip_lf: false,
            done: false,
            error: None,
        }
    }

    /// `raw` as a piece: its first `fresh` bytes were in the window before,
    /// bytes from `own` on will be in the next one. Each part is decoded on
    /// its own (a byte that is not UTF-8 reads as U+FFFD), so that the
    /// offsets hold after decoding.
    fn piece(&mut self, raw: &[u8], fresh: usize, own: usize, last: bool) -> Piece {
        let mut text = String::from_utf8_lossy(&raw[..fresh]).into_owned();
        let fresh_at = text.len();
        text.push_str(&String::from_utf8_lossy(&raw[fresh..own]));
        let own_at = text.len();
        text.push_str(&String::from_utf8_lossy(&raw[own..]));
        let p = Piece {
            text,
            line: self.line,
            own: own_at,
            fresh: fresh_at,
            whole: last && fresh == 0,
        };
        if last {
            self.line += 1;
        }
        p
    }
}

impl<R: BufRead> Iterator for Pieces<R> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.done {
            return None;
        }
        let mut raw = std::mem::take(&mut self.carry);
        let fresh = raw.len();
        loop {
            let buf = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.error = Some(e);
                    self.done = true;
                    return None;
                }
            };
            if buf.is_empty() {
                self.done = true;
                if raw.is_empty() {
                    return None;
                }
                let n = raw.len();
                return Some(self.piece(&raw, fresh, n, true));
            }
            if std::mem::take(&mut self.skip_lf) && buf[0] == b'\n' {
                self.r.consume(1);
                continue;
            }
            let take = &buf[..buf.len().min(WINDOW - raw.len())];
            if let Some(i) = memchr::memchr2(b'\n', b'\r', take) {
                raw.extend_from_slice(&take[..i]);
                self.skip_lf = take[i] == b'\r';
                self.r.consume(i + 1);
                let n = raw.len();
                return Some(self.piece(&raw, fresh, n, true));
            }
            let n = take.len();
            raw.extend_from_slice(take);
            self.r.consume(n);
            if raw.len() >= WINDOW {
                let own = WINDOW - OVERLAP;
                self.carry = raw[own..].to_vec();
                return Some(self.piece(&raw, fresh, own, false));
            }
        }
    }
}

/// Longest colour code taken out whole; a longer run of digits after
/// `ESC [` is kept as text.
const LONGEST_CODE: usize = 4096;

/// A reader's bytes without terminal colour codes (`ESC [`, digits and
/// semicolons, a letter), as the pattern `\x1b\[[0-9;]*[A-Za-z]` would find
/// them from the first byte on: taken out before the line ends are read, so
/// that a code between `\r` and `\n` leaves one line end, as in the text
/// cleaned whole.
pub(super) struct Uncoloured<R> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    /// The start of a code not yet complete (`ESC`, `ESC [`, digits…).
    code: Vec<u8>,
}

impl<R: BufRead> Uncoloured<R> {
    fn new(r: R) -> Uncoloured<R> {
        Uncoloured {
            r,
            buf: Vec::new(),
            pos: 0,
            code: Vec::new(),
        }
    }

    /// Copies `input` into `out` without the codes, keeping an incomplete
    /// one in `code` for the next read.
    fn filter(input: &[u8], code: &mut Vec<u8>, out: &mut Vec<u8>) {
        let mut rest = input;
        while !rest.is_empty() {
            if code.is_empty() {
                match memchr::memchr(0x1b, rest) {
                    None => {
                        out.extend_from_slice(rest);
                        return;
                    }
                    Some(i) => {
                        out.extend_from_slice(&rest[..i]);
                        code.push(0x1b);
                        rest = &rest[i + 1..];
                    }
                }
                continue;
            }
            let b = rest[0];
            let goes_on = if code.len() == 1 {
                b == b'['
            } else {
                b.is_ascii_digit() || b == b';'
            };
            if goes_on && code.len() < LONGEST_CODE {
                code.push(b);
                rest = &rest[1..];
            } else if code.len() >= 2 && b.is_ascii_alphabetic() {
                // A whole code: left out.
                code.clear();
                rest = &rest[1..];
            } else {
                // Not a code after all: its bytes are text, and `b` is
                // read again (it may start a code itself).
                out.append(code);
            }
        }
    }
}

impl<R: BufRead> std::io::Read for Uncoloured<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let b = self.fill_buf()?;
        let n = b.len().min(out.len());
        out[..n].copy_from_slice(&b[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Uncoloured<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            let input = self.r.fill_buf()?;
            if input.is_empty() {
                // The end: an incomplete code is text.
                self.buf.append(&mut self.code);
                break;
            }
            let n = input.len();
            Self::filter(input, &mut self.code, &mut self.buf);
            self.r.consume(n);
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
    }
}

/// The readers of the glued text (every line, no line ends): one pass of
/// each pattern over a window that keeps the last [`OVERLAP`] bytes.
#[derive(Default)]
pub(super) struct Glued {
    buf: String,
    /// Offset of `buf` in the glued text.
    base: usize,
    /// Per pattern, where its next match may start (offset in the glued
    /// text): the end of the last one handled.
    resume: [usize; 4],
    stats: MemoryStats,
    /// The segment dicts' figures so far.
    seg: SegmentsPaste,
}

impl Glued {
    pub fn push(&mut self, s: &str) {
        self.buf.push_str(s);
        while self.buf.len() >= WINDOW {
            self.scan(false);
        }
    }

    /// Handles the matches that start before the window's last
    /// [`OVERLAP`] bytes (all of them at the end) and drops what the next
    /// window need not see.
    fn scan(&mut self, last: bool) {
        let mut own = if last {
            self.buf.len()
        } else {
            self.buf.len() - OVERLAP
        };
        while !self.buf.is_char_boundary(own) {
            own -= 1;
        }
        let (buf, base) = (self.buf.as_str(), self.base);
        let [r_kv, r_total, r_alloc, r_dict] = &mut self.resume;
        // The patterns end in the number; what they match is cut apart by
        // hand (captures cost a second, slower search of every match, and
        // JSON holds a key-number pair at every turn).
        let stats = &mut self.stats;
        each(&STAT_KV, buf, base, own, r_kv, |m| {
            let key = m[1..].split(['\'', '"']).next().unwrap_or("");
            super::reading::stat_kv(stats, key, trailing_number(m));
        });
        let seg = &mut self.seg;
        each(&SEG_TOTAL, buf, base, own, r_total, |m| {
            if let Ok(v) = trailing_number(m).parse::<u64>() {
                seg.segments += 1;
                seg.reserved = seg.reserved.saturating_add(v);
            }
        });
        each(&SEG_ALLOCATED, buf, base, own, r_alloc, |m| {
            if let Ok(v) = trailing_number(m).parse::<u64>() {
                seg.allocated = Some(seg.allocated.unwrap_or(0).saturating_add(v));
            }
        });
        each(&BLOCK_DICT, buf, base, own, r_dict, |d| {
            if !d.contains("state") {
                return;
            }
            let (Some(sz), Some(st)) = (BLOCK_SIZE.captures(d), BLOCK_STATE.captures(d)) else {
                return;
            };
            seg.blocks += 1;
            if &st[1] == "inactive"
                && let Ok(b) = sz[1].parse::<u64>()
            {
                seg.largest_inactive_block = Some(seg.largest_inactive_block.unwrap_or(0).max(b));
            }
        });
        if !last {
            self.buf.drain(..own);
            self.base += own;
        }
    }

    /// The `memory_stats()` dump (at least three of the allocator's keys)
    /// and the segment dicts found.
    pub fn finish(mut self) -> (Option<MemoryStats>, Option<SegmentsPaste>) {
        self.scan(true);
        // One or two matches could be prose; a dump has many keys.
        let stats = (self.stats.values.len() >= 3).then_some(self.stats);
        let segments = (self.seg.segments > 0).then_some(self.seg);
        (stats, segments)
    }
}

/// Hands `f` each match of `re` in `buf` (at `base` in the glued text)
/// that starts at or after `resume` and before `own`, in order, moving
/// `resume` past it: matches never overlap, as in one pass over the text.
fn each(
    re: &Regex,
    buf: &str,
    base: usize,
    own: usize,
    resume: &mut usize,
    mut f: impl FnMut(&str),
) {
    let from = resume.saturating_sub(base).min(buf.len());
    for m in re.find_iter(&buf[from..]) {
        if from + m.start() >= own {
            break;
        }
        f(m.as_str());
        *resume = base + from + m.end();
    }
}

/// The number a match ends with: `-?\d+`.
fn trailing_number(m: &str) -> &str {
    let digits = m.len() - m.bytes().rev().take_while(u8::is_ascii_digit).count();
    let start = if m[..digits].ends_with('-') {
        digits - 1
    } else {
        digits
    };
    &m[start..]
}
