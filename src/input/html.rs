//! The page `_memory_viz.trace_plot`/`segment_plot` write: a base64 pickle
//! in `[{"name": ..., "base64": "..."}]`.
//!
//! `torch.profiler`'s `export_memory_timeline("x.html")` writes a page of
//! another kind: `<title>GPU Memory Timeline HTML</title>` and the plot as
//! a PNG in `<img src='data:image/png;base64,...'>`. It holds pixels, not
//! data; it is recognised so that the error says what to export instead.
//!
//! A page is read as a stream: it is scanned for the `"base64"` key as it
//! is read, and the string after it is decoded from base64 as it is read
//! ([`Body`], which the pickle machine reads from), so neither the page nor
//! the pickle is held whole. The result is the one the page read whole as
//! text (invalid UTF-8 replaced) gave: the string's whitespace (Unicode's)
//! is left out, and a string that is no valid base64 is refused with the
//! error `base64`'s standard engine gives for the whole string, even when
//! the pickle ended before.

use std::io::{self, BufRead, Read};

/// The refusal of an `export_memory_timeline` HTML page.
pub const MEMORY_TIMELINE_IMAGE: &str = "an export_memory_timeline HTML page: the plot as a \
    PNG image, with no memory data to read; export the data instead with \
    prof.export_memory_timeline(\"x.raw.json.gz\") (or \"x.json\"), which fragscope reads";

const NO_SNAPSHOT: &str = "an HTML page without an embedded snapshot (no \"base64\" field); \
    only pages written by torch.cuda._memory_viz are supported";
const MALFORMED: &str = "malformed \"base64\" field";
const UNTERMINATED: &str = "unterminated \"base64\" string";

const KEY: &[u8] = b"\"base64\"";
const TITLE: &[u8] = b"GPU Memory Timeline HTML";
const IMG: &[u8] = b"<img";
const PNG: &[u8] = b"data:image/png;base64,";

/// `export_memory_timeline`'s page: its title, or an inline PNG and no
/// embedded snapshot.
pub fn is_memory_timeline_image(text: &str) -> bool {
    text.contains("GPU Memory Timeline HTML")
        || (text.contains("<img") && text.contains("data:image/png;base64,"))
}

/// The embedded pickle of a page held whole.
pub fn extract_pickle(page: &[u8]) -> Result<Vec<u8>, String> {
    let mut r = page;
    let fail = |e: PageError| match e {
        PageError::Page(msg) => msg,
        PageError::Read(e) => e.to_string(),
    };
    let mut body = open_body(&mut r).map_err(fail)?;
    let mut out = Vec::new();
    // An error here is the body's, which `finish` tells.
    let _ = body.read_to_end(&mut out);
    body.finish().map_err(fail)?;
    Ok(out)
}

/// Why a page gives no pickle.
#[derive(Debug)]
pub enum PageError {
    /// The reader's own error.
    Read(io::Error),
    /// The page's: what is wrong with it, in words.
    Page(String),
}

/// Reads a page up to the start of its embedded pickle's base64 string.
pub fn open_body<R: BufRead>(mut r: R) -> Result<Body<R>, PageError> {
    find_key(&mut r)?;
    let malformed = || PageError::Page(MALFORMED.into());
    let next = |r: &mut R| {
        // Whitespace before the colon and before the string is passed over.
        loop {
            match next_char(r).map_err(PageError::Read)? {
                Some(c) if c.is_whitespace() => continue,
                c => return Ok(c),
            }
        }
    };
    if next(&mut r)? != Some(':') {
        return Err(malformed());
    }
    let quote = match next(&mut r)? {
        Some(q @ ('"' | '\'')) => q as u8,
        _ => return Err(malformed()),
    };
    Ok(Body {
        r,
        quote,
        syms: Vec::new(),
        b64: B64::default(),
        out: Vec::new(),
        out_pos: 0,
        end: None,
    })
}

/// Reads up to the end of the first `"base64"` key; a page without one is
/// refused, as an `export_memory_timeline` image when it is one.
fn find_key(r: &mut impl BufRead) -> Result<(), PageError> {
    // The last bytes of what was scanned, for a pattern across two reads.
    let mut tail: Vec<u8> = Vec::new();
    let mut window: Vec<u8> = Vec::new();
    let (mut title, mut img, mut png) = (false, false, false);
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(PageError::Read(e)),
        };
        if buf.is_empty() {
            let msg = if title || (img && png) {
                MEMORY_TIMELINE_IMAGE
            } else {
                NO_SNAPSHOT
            };
            return Err(PageError::Page(msg.into()));
        }
        window.clear();
        window.extend_from_slice(&tail);
        window.extend_from_slice(buf);
        if let Some(i) = find(&window, KEY) {
            let end = i + KEY.len() - tail.len();
            r.consume(end);
            return Ok(());
        }
        title = title || find(&window, TITLE).is_some();
        img = img || find(&window, IMG).is_some();
        png = png || find(&window, PNG).is_some();
        let n = buf.len();
        r.consume(n);
        let keep = window.len().min(TITLE.len() - 1);
        tail.clear();
        tail.extend_from_slice(&window[window.len() - keep..]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The next character of `r` read as text, an invalid UTF-8 sequence
/// replaced by U+FFFD as `String::from_utf8_lossy` does (one for each
/// maximal invalid part); `None` at the end.
fn next_char(r: &mut impl BufRead) -> io::Result<Option<char>> {
    let Some(b) = peek(r)? else {
        return Ok(None);
    };
    r.consume(1);
    if b < 0x80 {
        return Ok(Some(b as char));
    }
    // The length of the sequence and the range of its second byte.
    let (len, lo, hi) = match b {
        0xc2..=0xdf => (2, 0x80, 0xbf),
        0xe0 => (3, 0xa0, 0xbf),
        0xe1..=0xec | 0xee..=0xef => (3, 0x80, 0xbf),
        0xed => (3, 0x80, 0x9f),
        0xf0 => (4, 0x90, 0xbf),
        0xf1..=0xf3 => (4, 0x80, 0xbf),
        0xf4 => (4, 0x80, 0x8f),
        _ => return Ok(Some(char::REPLACEMENT_CHARACTER)),
    };
    let mut bytes = [b, 0, 0, 0];
    for (k, slot) in bytes[..len].iter_mut().enumerate().skip(1) {
        let (lo, hi) = if k == 1 { (lo, hi) } else { (0x80, 0xbf) };
        match peek(r)? {
            Some(c) if (lo..=hi).contains(&c) => {
                r.consume(1);
                *slot = c;
            }
            _ => return Ok(Some(char::REPLACEMENT_CHARACTER)),
        }
    }
    Ok(std::str::from_utf8(&bytes[..len])
        .ok()
        .and_then(|s| s.chars().next()))
}

fn peek(r: &mut impl BufRead) -> io::Result<Option<u8>> {
    loop {
        match r.fill_buf() {
            Ok(b) => return Ok(b.first().copied()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Symbols gathered before they are decoded.
const SYMS: usize = 1 << 16;

/// The embedded pickle: the bytes of the page's base64 string, decoded as
/// the string is read. It fails (with an error that says nothing, see
/// [`Body::finish`]) once the string turns out to be no valid base64, or
/// to have no end, or the reader fails.
pub struct Body<R> {
    r: R,
    quote: u8,
    /// Symbols read (whitespace left out), not decoded yet.
    syms: Vec<u8>,
    b64: B64,
    out: Vec<u8>,
    out_pos: usize,
    /// How the string ended, once it has.
    end: Option<Result<(), PageError>>,
}

impl<R: BufRead> Body<R> {
    /// Reads the rest of the string: whether it is valid base64 with its
    /// closing quote, and the reader's error if it failed.
    pub fn finish(mut self) -> Result<(), PageError> {
        while self.end.is_none() {
            self.out.clear();
            self.fill();
        }
        self.end.expect("ended")
    }

    /// Reads on until more bytes are decoded or the string ends.
    fn fill(&mut self) {
        self.out.clear();
        self.out_pos = 0;
        while self.out.is_empty() && self.end.is_none() {
            match self.gather() {
                Err(e) => self.end = Some(Err(PageError::Read(e))),
                Ok(Gathered::Quads) => {}
                Ok(Gathered::End) => {
                    self.end = Some(Err(PageError::Page(UNTERMINATED.into())));
                }
                Ok(Gathered::Closed) => {
                    let k = self.syms.len().saturating_sub(1) / 4 * 4;
                    self.b64.quads(&self.syms[..k], &mut self.out);
                    let verdict = self.b64.finish(&self.syms[k..], &mut self.out);
                    self.syms.clear();
                    self.end = Some(verdict.map_err(|e| {
                        PageError::Page(format!("the embedded snapshot is not valid base64: {e}"))
                    }));
                }
            }
        }
    }

    /// Reads symbols until a batch of them is decoded (all quads but the
    /// last one to four symbols, which may be the string's last quad), the
    /// closing quote, or the end of the input.
    fn gather(&mut self) -> io::Result<Gathered> {
        loop {
            let buf = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(Gathered::End);
            }
            let (mut used, mut closed, mut wide) = (0, false, false);
            for &b in buf {
                if b == self.quote {
                    used += 1;
                    closed = true;
                    break;
                }
                if b >= 0x80 {
                    wide = true;
                    break;
                }
                used += 1;
                if !(b as char).is_whitespace() {
                    self.syms.push(b);
                }
            }
            self.r.consume(used);
            if closed {
                return Ok(Gathered::Closed);
            }
            if wide
                && let Some(c) = next_char(&mut self.r)?
                && !c.is_whitespace()
            {
                let mut utf8 = [0; 4];
                self.syms
                    .extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
            if self.syms.len() >= SYMS {
                let k = (self.syms.len() - 1) / 4 * 4;
                self.b64.quads(&self.syms[..k], &mut self.out);
                self.syms.drain(..k);
                return Ok(Gathered::Quads);
            }
        }
    }
}

enum Gathered {
    Quads,
    Closed,
    End,
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.out_pos == self.out.len() {
            match &self.end {
                Some(Ok(())) => return Ok(0),
                Some(Err(_)) => {
                    return Err(io::Error::other("the embedded snapshot is unreadable"));
                }
                None => self.fill(),
            }
        }
        let n = buf.len().min(self.out.len() - self.out_pos);
        buf[..n].copy_from_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        Ok(n)
    }
}

/// Not a symbol of the standard alphabet.
const INVALID: u8 = 0xff;

/// The standard base64 alphabet's values (`=` is none: padding is read
/// apart).
const TABLE: [u8; 256] = {
    let mut t = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// A base64 string decoded piecewise, with the verdict (and the error, to
/// its offset) of `base64`'s standard engine (padding required, no trailing
/// bits) on the string whole: its quads are decoded as they come, save the
/// last one to four symbols, which are its last quad's (read as
/// `decode_suffix` does); an error in an earlier quad is kept, and told
/// only at the end, after what the engine checks first (a last symbol that
/// is no symbol, when the length is one past a multiple of four).
#[derive(Default)]
struct B64 {
    /// Symbols decoded so far (a multiple of 4).
    pos: u64,
    /// The first symbol that is not one in a decoded quad.
    err: Option<base64::DecodeError>,
}

impl B64 {
    /// Decodes `syms`, whole quads none of which is the string's last.
    fn quads(&mut self, syms: &[u8], out: &mut Vec<u8>) {
        debug_assert!(syms.len().is_multiple_of(4));
        if self.err.is_none() {
            out.reserve(syms.len() / 4 * 3);
            for (i, q) in syms.chunks_exact(4).enumerate() {
                let m = [
                    TABLE[q[0] as usize],
                    TABLE[q[1] as usize],
                    TABLE[q[2] as usize],
                    TABLE[q[3] as usize],
                ];
                if let Some(j) = m.iter().position(|&x| x == INVALID) {
                    let at = self.pos as usize + 4 * i + j;
                    self.err = Some(base64::DecodeError::InvalidByte(at, q[j]));
                    break;
                }
                let n = (u32::from(m[0]) << 18)
                    | (u32::from(m[1]) << 12)
                    | (u32::from(m[2]) << 6)
                    | u32::from(m[3]);
                out.extend_from_slice(&n.to_be_bytes()[1..]);
            }
        }
        self.pos += syms.len() as u64;
    }

    /// Decodes the string's last symbols (`last`: one to four of them, or
    /// none for an empty string) and gives the verdict on the whole.
    fn finish(&mut self, last: &[u8], out: &mut Vec<u8>) -> Result<(), base64::DecodeError> {
        use base64::DecodeError::*;
        debug_assert!(last.len() <= 4);
        let start = self.pos as usize;
        let len = start + last.len();
        if len % 4 == 1
            && let Some(&b) = last.last()
            && b != b'='
            && TABLE[b as usize] == INVALID
        {
            return Err(InvalidByte(len - 1, b));
        }
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        let mut morsels = [0u8; 4];
        let (mut n, mut pads, mut first_pad) = (0, 0, 0);
        let (mut last_symbol, mut last_value) = (0u8, 0u8);
        for (i, &b) in last.iter().enumerate() {
            if b == b'=' {
                if i < 2 {
                    return Err(InvalidByte(start + i, b));
                }
                if pads == 0 {
                    first_pad = i;
                }
                pads += 1;
                continue;
            }
            if pads > 0 {
                return Err(InvalidByte(start + first_pad, b'='));
            }
            let m = TABLE[b as usize];
            (last_symbol, last_value) = (b, m);
            if m == INVALID {
                return Err(InvalidByte(start + i, b));
            }
            morsels[n] = m;
            n += 1;
        }
        if len > 0 && n < 2 {
            return Err(InvalidLength(start + n));
        }
        if (pads + n) % 4 != 0 {
            return Err(InvalidPadding);
        }
        let bytes = n * 6 / 8;
        let num = (u32::from(morsels[0]) << 26)
            | (u32::from(morsels[1]) << 20)
            | (u32::from(morsels[2]) << 14)
            | (u32::from(morsels[3]) << 8);
        if num & (!0u32 >> (bytes * 8)) != 0 {
            return Err(InvalidLastSymbol {
                offset: start + n - 1,
                symbol: last_symbol,
                symbol_value: last_value,
            });
        }
        out.extend_from_slice(&num.to_be_bytes()[..bytes]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// The page read whole as text, as it was before it was read as a
    /// stream: what the stream must give, bytes and errors.
    fn whole(page: &[u8]) -> Result<Vec<u8>, String> {
        let text = String::from_utf8_lossy(page);
        let Some(i) = text.find("\"base64\"") else {
            if is_memory_timeline_image(&text) {
                return Err(MEMORY_TIMELINE_IMAGE.into());
            }
            return Err(NO_SNAPSHOT.into());
        };
        let rest = text[i + 8..]
            .trim_start()
            .strip_prefix(':')
            .ok_or(MALFORMED)?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().ok_or(MALFORMED)?;
        if quote != '"' && quote != '\'' {
            return Err(MALFORMED.into());
        }
        let body = &rest[1..];
        let end = body.find(quote).ok_or(UNTERMINATED)?;
        let b64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
        base64::engine::general_purpose::STANDARD
            .decode(b64.as_bytes())
            .map_err(|e| format!("the embedded snapshot is not valid base64: {e}"))
    }

    /// The page read as a stream through a window of `cap` bytes.
    fn streamed(page: &[u8], cap: usize) -> Result<Vec<u8>, String> {
        let r = io::BufReader::with_capacity(cap, page);
        let fail = |e: PageError| match e {
            PageError::Page(msg) => msg,
            PageError::Read(e) => panic!("{e}"),
        };
        let mut body = open_body(r).map_err(fail)?;
        let mut out = Vec::new();
        let _ = body.read_to_end(&mut out);
        body.finish().map_err(fail)?;
        Ok(out)
    }

    fn check(page: &[u8]) {
        let want = whole(page);
        for cap in [1, 2, 3, 5, 7, 64, 1 << 16] {
            assert_eq!(
                streamed(page, cap),
                want,
                "{:?}, window {cap}",
                String::from_utf8_lossy(page)
            );
        }
        assert_eq!(extract_pickle(page), want);
    }

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn pages_of_every_shape_read_as_when_whole() {
        let pieces: &[&[u8]] = &[
            b"<html>",
            b"\"base64\"",
            b":",
            b" ",
            b"\n",
            b"\t",
            "\u{a0}".as_bytes(),
            "\u{2028}".as_bytes(),
            "\u{85}".as_bytes(),
            "é".as_bytes(),
            b"\"",
            b"'",
            b"=",
            b"==",
            b"!",
            b"QUJD",
            b"QQ",
            b"QR",
            b"Q",
            b"AAAA",
            b"/+9z",
            b"\xff",
            b"\xc3",
            b"\xe2\x80",
            b"\xf0\x9f\x98",
            b"\xed\xa0\x80",
            b"GPU Memory Timeline HTML",
            b"<img",
            b"data:image/png;base64,",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..4000 {
            let mut page = Vec::new();
            // Most pages get the key early, to reach the string.
            if rng.below(4) != 0 {
                page.extend_from_slice(b"<html>[{\"name\": \"x\", \"base64\": \"");
            }
            for _ in 0..rng.below(24) {
                page.extend_from_slice(pieces[rng.below(pieces.len())]);
            }
            check(&page);
        }
    }

    #[test]
    fn valid_strings_and_their_corruptions_read_as_when_whole() {
        let mut rng = Rng(42);
        let std = base64::engine::general_purpose::STANDARD;
        for n in 0..300 {
            let data: Vec<u8> = (0..n * 7 % 500).map(|_| rng.next() as u8).collect();
            let mut text = std.encode(&data).into_bytes();
            // Line breaks, as some writers wrap base64.
            if n % 3 == 0 {
                let mut wrapped = Vec::new();
                for (i, c) in text.chunks(76).enumerate() {
                    if i > 0 {
                        wrapped.extend_from_slice(b"\r\n  ");
                    }
                    wrapped.extend_from_slice(c);
                }
                text = wrapped;
            }
            let page = |t: &[u8]| {
                let mut p = b"<script>const f = [{\"name\": \"s\", \"base64\" :\n '".to_vec();
                p.extend_from_slice(t);
                p.extend_from_slice(b"'}]</script>");
                p
            };
            check(&page(&text));
            if text.is_empty() {
                continue;
            }
            for _ in 0..4 {
                let mut t = text.clone();
                match rng.below(4) {
                    0 => {
                        let i = rng.below(t.len());
                        t[i] = b"=!A\xff-"[rng.below(5)];
                    }
                    1 => t.truncate(rng.below(t.len())),
                    2 => t.extend_from_slice(&b"A=AA="[..1 + rng.below(4)]),
                    _ => {
                        let i = rng.below(t.len());
                        t.insert(i, b'=');
                    }
                }
                check(&page(&t));
            }
        }
    }

    /// Every string of up to six symbols from a few that matter (letters,
    /// padding, a stray symbol, a blank, an invalid byte, a blank that is
    /// no ASCII).
    #[test]
    fn every_short_string_reads_as_when_whole() {
        let alphabet: [&[u8]; 7] = [b"A", b"Q", b"=", b"!", b" ", b"\xff", "\u{a0}".as_bytes()];
        let mut strings: Vec<Vec<u8>> = Vec::new();
        for len in 0..=6u32 {
            for mut n in 0..7usize.pow(len) {
                let mut t = Vec::new();
                for _ in 0..len {
                    t.extend_from_slice(alphabet[n % 7]);
                    n /= 7;
                }
                strings.push(t);
            }
        }
        for s in strings {
            let mut page = b"\"base64\":\"".to_vec();
            page.extend_from_slice(&s);
            page.push(b'"');
            let want = whole(&page);
            for cap in [1, 3, 64] {
                assert_eq!(
                    streamed(&page, cap),
                    want,
                    "{:?}",
                    String::from_utf8_lossy(&page)
                );
            }
        }
    }

    /// Batches of symbols are decoded as the string is read: a string
    /// longer than one batch, its errors placed about batch boundaries.
    #[test]
    fn long_strings_read_as_when_whole() {
        let std = base64::engine::general_purpose::STANDARD;
        let data: Vec<u8> = (0..SYMS * 2).map(|i| (i * 31 % 251) as u8).collect();
        let text = std.encode(&data).into_bytes();
        let page = |t: &[u8]| {
            let mut p = b"\"base64\": \"".to_vec();
            p.extend_from_slice(t);
            p.push(b'"');
            p
        };
        check(&page(&text));
        for at in [SYMS - 5, SYMS - 1, SYMS, SYMS + 3, text.len() - 1] {
            let mut t = text.clone();
            t[at] = b'!';
            check(&page(&t));
            t.truncate(at + 1);
            check(&page(&t));
        }
    }
}
