//! Input stage: bytes → typed model. Owns format sniffing by content (never
//! by extension) and dispatch to the decoders; the file system is the
//! loader's alone (`load.rs`: opening files or stdin, the size bound,
//! decompression). Every error names the file and a byte offset or record
//! path.
//!
//! Every input is decoded while it is read (after gzip/zstd when
//! compressed), so a file is never held whole: pickles (an uncompressed
//! pickle file is mapped and read in place, its pages released behind the
//! reader: `decode_mapped`), JSON documents, fragscope MessagePack, and
//! memory_viz HTML pages, whose base64 string is decoded into the pickle
//! machine as it is read ([`html`]).

pub mod html;
pub mod json;
pub mod load;
pub mod pickle;
pub mod profiler;
pub mod snapshot;
pub mod value;

use crate::core::text::one_line;
use crate::input::profiler::{MemoryTimeline, ProfilerTrace};
use crate::model::Snapshot;
use std::io::{BufRead, Read};

pub use crate::model::MSGPACK_MAGIC;
use crate::model::MSGPACK_PREFIX;
pub use load::{
    DEFAULT_MAX_INPUT, LoadOptions, decompress, load, load_observed, load_snapshot, open_stream,
    read_error,
};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    // The cause is not repeated here: it is the next link of the chain
    // (printed after `: ` on one line, or under `--verbose` on its own).
    #[error("{file}: cannot read")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {msg}")]
    Format { file: String, msg: String },
    #[error("{file}: {context}byte {offset}: {msg}")]
    Decode {
        file: String,
        context: String,
        offset: u64,
        msg: String,
    },
    #[error("{file}: {path}: {msg}")]
    Schema {
        file: String,
        path: String,
        msg: String,
    },
    #[error(
        "{file}: the input is larger than the limit of {limit} bytes{what}; raise it with --max-input-size"
    )]
    TooLarge {
        file: String,
        limit: u64,
        what: &'static str,
    },
}

impl LoadError {
    pub fn file(&self) -> &str {
        match self {
            LoadError::Io { file, .. }
            | LoadError::Format { file, .. }
            | LoadError::Decode { file, .. }
            | LoadError::Schema { file, .. }
            | LoadError::TooLarge { file, .. } => file,
        }
    }
}

/// What a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pickle(u8),
    Json,
    MsgPack,
    Html,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Format::Pickle(p) => write!(f, "pickle protocol {p}"),
            Format::Json => f.write_str("JSON"),
            Format::MsgPack => f.write_str("fragscope MessagePack"),
            Format::Html => f.write_str("memory_viz HTML (embedded pickle)"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

#[derive(Debug)]
pub enum Content {
    Snapshot(Snapshot),
    Profiler(ProfilerTrace),
    MemoryTimeline(MemoryTimeline),
}

#[derive(Debug)]
pub struct Loaded {
    /// As the user named it (`-` for stdin).
    pub name: String,
    pub format: Format,
    pub compression: Compression,
    pub bytes: u64,
    pub content: Content,
    /// One tally per entry of the snapshot's `device_traces`, when the
    /// loader was asked to count the traces rather than keep them
    /// ([`LoadOptions::tally_traces`]) and did: the traces it counted are
    /// then empty in the model.
    pub tallies: Option<Vec<crate::model::tally::TraceTally>>,
}

/// Decodes an input from its (decompressed) stream `src`, named `path`,
/// while it is read, after its first bytes are sniffed. Only what they do
/// not tell (an empty file, a short run of blanks, a MessagePack prefix cut
/// short) is read whole, to be refused as ever.
fn decode_stream(
    mut src: Box<dyn BufRead + '_>,
    path: &str,
    compression: Compression,
) -> Result<Loaded, LoadError> {
    let first = src
        .fill_buf()
        .map_err(|e| read_error(e, path, compression))?
        .first()
        .copied();
    if first.is_some_and(starts_pickle) {
        let mut sink = snapshot::TraceSink::new();
        let d = pickle::decode_reader(&mut src, &mut sink).map_err(|e| match e {
            pickle::DecodeError::Pickle(e) => decode_error(e, path),
            pickle::DecodeError::Io(e, _) => read_error(e, path, compression),
        })?;
        // Bytes after STOP count towards the size, as when read whole.
        let rest = std::io::copy(&mut src, &mut std::io::sink())
            .map_err(|e| read_error(e, path, compression))?;
        return pickle_loaded(d, sink, path, compression, rest);
    }
    // Every other input is sniffed by its first bytes: refuse what none of
    // the readers takes now, before the rest is read (or decompressed: a
    // gzip bomb costs its first window, not its size).
    let head = src
        .fill_buf()
        .map_err(|e| read_error(e, path, compression))?;
    if head.starts_with(MSGPACK_MAGIC) {
        return decode_msgpack_stream(src, path, compression);
    }
    if let Some(&version) = head.strip_prefix(MSGPACK_PREFIX).and_then(|r| r.first()) {
        // Refused once read through, as when it was read whole: a read
        // error or the size bound comes first.
        std::io::copy(&mut src, &mut std::io::sink())
            .map_err(|e| read_error(e, path, compression))?;
        return Err(LoadError::Format {
            file: path.into(),
            msg: msgpack_version_refusal(version),
        });
    }
    if let Some(msg) = refusal(head) {
        return Err(LoadError::Format {
            file: path.into(),
            msg: match compression {
                Compression::None => msg,
                Compression::Gzip => format!("{msg} after gzip decompression"),
                Compression::Zstd => format!("{msg} after zstd decompression"),
            },
        });
    }
    // JSON and HTML are parsed as they are read.
    if !head.starts_with(MSGPACK_PREFIX) && matches!(first_non_ws(head), Some(b'{' | b'[')) {
        let mut counted = Counted { r: src, n: 0 };
        let content = json::load_json_reader(&mut counted, path, compression)?;
        // Bytes after the document (blanks) count towards the size.
        let rest = std::io::copy(&mut counted.r, &mut std::io::sink())
            .map_err(|e| read_error(e, path, compression))?;
        return Ok(Loaded {
            name: path.to_string(),
            format: Format::Json,
            compression,
            bytes: counted.n + rest,
            content,
            tallies: None,
        });
    }
    if !head.starts_with(MSGPACK_PREFIX) && first_non_ws(head) == Some(b'<') {
        return decode_page_stream(src, path, compression);
    }
    let mut bytes = Vec::new();
    src.read_to_end(&mut bytes)
        .map_err(|e| read_error(e, path, compression))?;
    let mut l = load_bytes(&bytes, path)?;
    l.compression = compression;
    Ok(l)
}

/// Whether a first byte starts a pickle: PROTO (protocol 2 on), or the
/// container or MARK that protocols 0 and 1 start with.
fn starts_pickle(b: u8) -> bool {
    matches!(b, 0x80 | b'}' | b']' | b'(')
}

#[cfg(target_os = "linux")]
/// Decodes a mapped file in place when it holds a pickle (`None` when it
/// holds anything else, for the stream readers), releasing its pages as the
/// decoder is done with them and telling `progress` how far it is.
///
/// With `tally`, each trace is counted as it is decoded and not kept
/// ([`LoadOptions::tally_traces`]); a file that names its trace entries one
/// by one somewhere is decoded again keeping them.
pub(crate) fn decode_mapped(
    map: &crate::core::mapped::Mapped,
    path: &str,
    progress: &dyn Fn(u64),
    tally: bool,
) -> Option<Result<Loaded, LoadError>> {
    if !map.bytes().starts_with(MSGPACK_PREFIX) && first_non_ws(map.bytes()) == Some(b'{') {
        return Some(json_mapped(map, path, progress));
    }
    if !map.bytes().first().copied().is_some_and(starts_pickle) {
        return None;
    }
    if tally {
        let mut sink = snapshot::TraceSink::tallying();
        let d = pickle::decode_slice(map.bytes(), &mut sink, &mut |at| {
            map.release(at);
            progress(at);
        });
        let d = match d {
            Ok(d) => d,
            Err(e) => return Some(Err(decode_error(e, path))),
        };
        match snapshot::summary_from_arena(&d.arena, d.root, sink) {
            Ok(Some((snap, t))) => {
                return Some(Ok(Loaded {
                    name: path.to_string(),
                    format: Format::Pickle(d.protocol),
                    compression: Compression::None,
                    bytes: d.read,
                    content: Content::Snapshot(snap),
                    tallies: Some(t),
                }));
            }
            Err(e) => return Some(Err(schema_error(e, path))),
            // Entries asked for one by one: read again, keeping them.
            Ok(None) => map.restart(),
        }
    }
    let mut sink = snapshot::TraceSink::new();
    let d = pickle::decode_slice(map.bytes(), &mut sink, &mut |at| {
        map.release(at);
        progress(at);
    });
    Some(
        d.map_err(|e| decode_error(e, path))
            .and_then(|d| pickle_loaded(d, sink, path, Compression::None, 0)),
    )
}

#[cfg(target_os = "linux")]
/// A JSON object in a mapped file, parsed where it lies; the pages behind
/// the strings the parser hands over are released as it goes.
fn json_mapped(
    map: &crate::core::mapped::Mapped,
    path: &str,
    progress: &dyn Fn(u64),
) -> Result<Loaded, LoadError> {
    let bytes = map.bytes();
    let base = bytes.as_ptr() as usize;
    let shown = std::cell::Cell::new(0u64);
    let read_to = |p: *const u8| {
        // A string the parser unescaped lies in a buffer of its own.
        let at = (p as usize).wrapping_sub(base) as u64;
        if at < bytes.len() as u64 && at >= shown.get() + (1 << 20) {
            map.release(at);
            progress(at);
            shown.set(at);
        }
    };
    let content = json::load_json_in_place(bytes, path, &read_to)?;
    Ok(Loaded {
        name: path.to_string(),
        format: Format::Json,
        compression: Compression::None,
        bytes: bytes.len() as u64,
        content,
        tallies: None,
    })
}

fn decode_error(e: pickle::PickleError, path: &str) -> LoadError {
    LoadError::Decode {
        file: path.into(),
        context: String::new(),
        offset: e.offset,
        msg: e.msg,
    }
}

/// A decoded pickle's snapshot, `rest` bytes after what the decoder read.
fn pickle_loaded(
    d: pickle::Decoded,
    sink: snapshot::TraceSink,
    path: &str,
    compression: Compression,
    rest: u64,
) -> Result<Loaded, LoadError> {
    let (protocol, read) = (d.protocol, d.read);
    let snap = snapshot_of(d, sink, path)?;
    Ok(Loaded {
        name: path.to_string(),
        format: Format::Pickle(protocol),
        compression,
        bytes: read + rest,
        content: Content::Snapshot(snap),
        tallies: None,
    })
}

/// Counts the bytes read through it.
struct Counted<R> {
    r: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf)?;
        self.n += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.r.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.n += n as u64;
        self.r.consume(n);
    }
}

/// A memory_viz page decoded from its stream `src` as it is read: the page
/// scanned for its `"base64"` key, the string after it decoded from base64
/// straight into the pickle machine. As when it was read whole, a read
/// error or the size bound anywhere in the input comes first, then the
/// page's errors (a string unterminated or no valid base64), then the
/// pickle's.
fn decode_page_stream(
    src: Box<dyn BufRead + '_>,
    path: &str,
    compression: Compression,
) -> Result<Loaded, LoadError> {
    let mut src = Counted { r: src, n: 0 };
    let mut sink = snapshot::TraceSink::new();
    let d = match page_pickle(&mut src, &mut sink) {
        Err(PageFailure::Read(e)) => return Err(read_error(e, path, compression)),
        d => d,
    };
    std::io::copy(&mut src, &mut std::io::sink()).map_err(|e| read_error(e, path, compression))?;
    let d = d.map_err(|e| page_error(e, path, compression))?;
    Ok(Loaded {
        name: path.to_string(),
        format: Format::Html,
        compression,
        bytes: src.n,
        content: Content::Snapshot(snapshot_of(d, sink, path)?),
        tallies: None,
    })
}

/// Why a page gave no pickle.
enum PageFailure {
    Read(std::io::Error),
    Page(String),
    Pickle(pickle::PickleError),
}

/// The embedded pickle of the page read from `r`, decoded with `sink`.
fn page_pickle(
    r: &mut impl BufRead,
    sink: &mut snapshot::TraceSink,
) -> Result<pickle::Decoded, PageFailure> {
    let page = |e| match e {
        html::PageError::Read(e) => PageFailure::Read(e),
        html::PageError::Page(msg) => PageFailure::Page(msg),
    };
    let mut body = html::open_body(r).map_err(page)?;
    let d = pickle::decode_reader(&mut body, sink);
    // The string read to its end: whether it is valid base64 comes first.
    body.finish().map_err(page)?;
    d.map_err(|e| match e {
        pickle::DecodeError::Pickle(e) => PageFailure::Pickle(e),
        pickle::DecodeError::Io(e, _) => PageFailure::Read(e),
    })
}

fn page_error(e: PageFailure, name: &str, compression: Compression) -> LoadError {
    match e {
        PageFailure::Read(e) => read_error(e, name, compression),
        PageFailure::Page(msg) => LoadError::Format {
            file: name.into(),
            msg,
        },
        PageFailure::Pickle(e) => LoadError::Decode {
            file: name.into(),
            context: "embedded pickle: ".into(),
            offset: e.offset,
            msg: e.msg,
        },
    }
}

fn snapshot_of(
    d: pickle::Decoded,
    sink: snapshot::TraceSink,
    name: &str,
) -> Result<Snapshot, LoadError> {
    snapshot::from_arena_with(&d.arena, d.root, sink).map_err(|e| schema_error(e, name))
}

fn schema_error(e: snapshot::SchemaError, name: &str) -> LoadError {
    LoadError::Schema {
        file: name.into(),
        path: e.path,
        msg: e.msg,
    }
}

/// Why the first bytes of an input (a window of it, or all of a short one)
/// are none that a reader takes, or `None` when they may be: MessagePack,
/// HTML, JSON (pickles are recognised before this). An empty window is left
/// to the readers, which name an empty file; so is a short run of
/// whitespace, which only the whole file tells from JSON.
fn refusal(head: &[u8]) -> Option<String> {
    if head.is_empty() || head.starts_with(MSGPACK_PREFIX) {
        return None;
    }
    match first_non_ws(head) {
        Some(b'<' | b'{' | b'[') => None,
        None if head.len() < 4096 => None,
        None => Some(format!(
            "not a memory snapshot, profiler trace or memory timeline (only whitespace in its first {} bytes)",
            head.len()
        )),
        Some(_) => Some(not_an_input(head)),
    }
}

fn not_an_input(bytes: &[u8]) -> String {
    format!(
        "not a memory snapshot, profiler trace or memory timeline (starts with bytes {:02x?})",
        &bytes[..bytes.len().min(4)]
    )
}

fn first_non_ws(b: &[u8]) -> Option<u8> {
    b.iter()
        .copied()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n' | 0xef | 0xbb | 0xbf))
}

/// Sniffs and decodes already-decompressed bytes.
pub fn load_bytes(bytes: &[u8], name: &str) -> Result<Loaded, LoadError> {
    let total = bytes.len() as u64;
    let mk = |format, content| Loaded {
        name: name.to_string(),
        format,
        compression: Compression::None,
        bytes: total,
        content,
        tallies: None,
    };
    if bytes.is_empty() {
        return Err(LoadError::Format {
            file: name.into(),
            msg: "empty file".into(),
        });
    }
    if bytes.starts_with(MSGPACK_MAGIC) {
        let snap = decode_msgpack(&bytes[MSGPACK_MAGIC.len()..])
            .map_err(|msg| msgpack_corrupt(name, &msg))?;
        return Ok(mk(Format::MsgPack, Content::Snapshot(snap)));
    }
    if let Some(&version) = bytes.strip_prefix(MSGPACK_PREFIX).and_then(|r| r.first()) {
        return Err(LoadError::Format {
            file: name.into(),
            msg: msgpack_version_refusal(version),
        });
    }
    // Pickle: PROTO (2+), or protocol 0/1 which start with a container or MARK.
    if bytes[0] == 0x80 || matches!(bytes[0], b'}' | b']' | b'(') {
        let snap = decode_pickle_snapshot(bytes, name)?;
        let proto = if bytes[0] == 0x80 {
            bytes.get(1).copied().unwrap_or(0)
        } else {
            0
        };
        return Ok(mk(Format::Pickle(proto), Content::Snapshot(snap)));
    }
    match first_non_ws(bytes) {
        Some(b'<') => {
            let mut sink = snapshot::TraceSink::new();
            let d = page_pickle(&mut &bytes[..], &mut sink)
                .map_err(|e| page_error(e, name, Compression::None))?;
            let snap = snapshot_of(d, sink, name)?;
            Ok(mk(Format::Html, Content::Snapshot(snap)))
        }
        Some(b'{') | Some(b'[') => {
            let content = json::load_json(bytes, name)?;
            Ok(mk(Format::Json, content))
        }
        _ => Err(LoadError::Format {
            file: name.into(),
            msg: not_an_input(bytes),
        }),
    }
}

/// Deepest MessagePack nesting accepted: the model needs about 100 levels
/// (settings values nest at most 32 deep, three levels each); deeper input
/// would only cost stack.
pub const MSGPACK_MAX_DEPTH: usize = 256;

/// fragscope's MessagePack form is the model itself, so unlike the other
/// decoders nothing has built it through the interner: every id is checked
/// before a later stage indexes a table with it. It is read from `r` as it
/// is decoded (what follows the snapshot is left unread).
fn decode_msgpack(r: impl Read) -> Result<Snapshot, String> {
    use serde::Deserialize;
    let mut de = rmp_serde::Deserializer::new(r);
    de.set_max_depth(MSGPACK_MAX_DEPTH);
    let snap = Snapshot::deserialize(&mut de).map_err(|e| e.to_string())?;
    check_ids(&snap)?;
    Ok(snap)
}

fn msgpack_corrupt(name: &str, msg: &str) -> LoadError {
    LoadError::Format {
        file: name.into(),
        msg: format!("corrupt fragscope MessagePack: {}", one_line(msg)),
    }
}

fn msgpack_version_refusal(version: u8) -> String {
    format!(
        "fragscope MessagePack version {version} was written by {} fragscope; \
         convert the original snapshot again",
        if version < MSGPACK_MAGIC[MSGPACK_PREFIX.len()] {
            "an earlier"
        } else {
            "a later"
        }
    )
}

/// A MessagePack snapshot decoded from its stream `src` (which starts with
/// [`MSGPACK_MAGIC`]) as it is read. As when it was read whole, a read error
/// or the size bound anywhere in the input comes before the snapshot's own
/// errors, and the bytes after the snapshot count towards the size.
fn decode_msgpack_stream(
    mut src: Box<dyn BufRead + '_>,
    path: &str,
    compression: Compression,
) -> Result<Loaded, LoadError> {
    src.consume(MSGPACK_MAGIC.len());
    let mut r = Tapped::new(src, MSGPACK_MAGIC.len() as u64);
    let snap = decode_msgpack(&mut r);
    if r.err.is_none() {
        // The rest, read through.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    }
    if let Some(e) = r.err.take() {
        return Err(read_error(e, path, compression));
    }
    let snap = snap.map_err(|msg| msgpack_corrupt(path, &msg))?;
    Ok(Loaded {
        name: path.to_string(),
        format: Format::MsgPack,
        compression,
        bytes: r.n,
        content: Content::Snapshot(snap),
        tallies: None,
    })
}

/// Reads `r` through a buffer of its own (a decoder's many small reads stay
/// in it), counts the bytes taken from `r`, and keeps the reader's own
/// error apart from what a decoder makes of it: the decoder sees an error
/// whose text says nothing, the first error of `r` is kept in `err`.
struct Tapped<R> {
    r: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    n: u64,
    err: Option<std::io::Error>,
}

impl<R: Read> Tapped<R> {
    fn new(r: R, n: u64) -> Tapped<R> {
        Tapped {
            r,
            buf: vec![0; 1 << 16].into_boxed_slice(),
            pos: 0,
            end: 0,
            n,
            err: None,
        }
    }

    fn read_inner(
        r: &mut R,
        n: &mut u64,
        err: &mut Option<std::io::Error>,
        buf: &mut [u8],
    ) -> std::io::Result<usize> {
        if err.is_some() {
            return Err(std::io::Error::other("the input could not be read"));
        }
        match r.read(buf) {
            Ok(k) => {
                *n += k as u64;
                Ok(k)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                *err = Some(e);
                Err(std::io::Error::other("the input could not be read"))
            }
        }
    }
}

impl<R: Read> Read for Tapped<R> {
    #[inline]
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.end {
            if out.len() >= self.buf.len() {
                return Self::read_inner(&mut self.r, &mut self.n, &mut self.err, out);
            }
            self.end = Self::read_inner(&mut self.r, &mut self.n, &mut self.err, &mut self.buf)?;
            self.pos = 0;
        }
        let k = out.len().min(self.end - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }

    #[inline]
    fn read_exact(&mut self, out: &mut [u8]) -> std::io::Result<()> {
        let end = self.pos + out.len();
        if end <= self.end {
            // MessagePack's markers and numbers: a few bytes each.
            match out.len() {
                1 => out[0] = self.buf[self.pos],
                _ => out.copy_from_slice(&self.buf[self.pos..end]),
            }
            self.pos = end;
            return Ok(());
        }
        // `Read`'s own, for its errors.
        struct Plain<'a, R>(&'a mut Tapped<R>);
        impl<R: Read> Read for Plain<'_, R> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                self.0.read(out)
            }
        }
        Plain(self).read_exact(out)
    }
}

fn check_ids(snap: &Snapshot) -> Result<(), String> {
    let (ns, nf, nk) = (snap.strings.len(), snap.frames.len(), snap.stacks.len());
    let (np, na) = (snap.pools.len(), snap.other_actions.len());
    if snap.stacks.first().is_none_or(|s| !s.is_empty()) {
        return Err("stack 0 must be the empty stack".into());
    }
    let bad = |what: &str, id: u32, n: usize| format!("{what} id {id} is not below {n}");
    for (i, f) in snap.frames.iter().enumerate() {
        for s in [f.filename, f.name] {
            if s.0 as usize >= ns {
                return Err(format!("frames[{i}]: {}", bad("string", s.0, ns)));
            }
        }
    }
    for (i, st) in snap.stacks.iter().enumerate() {
        if let Some(f) = st.iter().find(|f| f.0 as usize >= nf) {
            return Err(format!("stacks[{i}]: {}", bad("frame", f.0, nf)));
        }
    }
    if na > crate::model::ActionName::MAX {
        return Err(format!(
            "other_actions: more than {} unknown actions",
            crate::model::ActionName::MAX
        ));
    }
    if let Some((i, s)) = (snap.other_actions.iter().enumerate()).find(|(_, s)| s.0 as usize >= ns)
    {
        return Err(format!("other_actions[{i}]: {}", bad("string", s.0, ns)));
    }
    for (i, seg) in snap.segments.iter().enumerate() {
        let stacks = std::iter::once(seg.frames).chain(seg.blocks.iter().map(|b| b.frames));
        if let Some(s) = stacks.into_iter().find(|s| s.0 as usize >= nk) {
            return Err(format!("segments[{i}]: {}", bad("stack", s.0, nk)));
        }
    }
    let nx = snap.event_extras.len();
    let mut seen = std::collections::HashMap::with_capacity(nx);
    for (i, x) in snap.event_extras.iter().enumerate() {
        let at = |what: String| format!("event_extras[{i}]: {what}");
        if x.is_none() {
            return Err(at("no field present".into()));
        }
        if let Some(j) = seen.insert(x, i) {
            return Err(at(format!("the same as event_extras[{j}]")));
        }
        if let Some(p) = x.pool.filter(|p| p.0 as usize >= np) {
            return Err(at(bad("pool", p.0, np)));
        }
        let strs = [x.compile_context, x.user_metadata, x.category];
        if let Some(s) = strs.into_iter().flatten().find(|s| s.0 as usize >= ns) {
            return Err(at(bad("string", s.0, ns)));
        }
    }
    let mut seen = std::collections::HashMap::with_capacity(snap.streams.len());
    for (i, &v) in snap.streams.iter().enumerate() {
        let at = |what: String| format!("streams[{i}]: {what}");
        if v == 0 {
            return Err(at("stream 0, which needs no entry".into()));
        }
        if let Some(j) = seen.insert(v, i) {
            return Err(at(format!("the same as streams[{j}]")));
        }
    }
    let nst = snap.streams.len() + 1;
    for (d, tr) in snap.traces().iter().enumerate() {
        for (j, e) in tr.iter().enumerate() {
            let at = |what: String| format!("device_traces[{d}][{j}]: {what}");
            if let crate::model::Action::Other(n) = e.action
                && n.index() >= na
            {
                return Err(at(bad("unknown-action", n.index() as u32, na)));
            }
            if let Some(x) = e.extras().filter(|x| x.0 as usize >= nx) {
                return Err(at(bad("extras", x.0, nx)));
            }
            if let Some(what) = e.canonical_error(&snap.extras(e)) {
                return Err(at(what.into()));
            }
            if e.stream.0 as usize >= nst {
                return Err(at(bad("stream", e.stream.0, nst)));
            }
            if e.frames.0 as usize >= nk {
                return Err(at(bad("stack", e.frames.0, nk)));
            }
        }
    }
    Ok(())
}

fn decode_pickle_snapshot(bytes: &[u8], name: &str) -> Result<Snapshot, LoadError> {
    let mut sink = snapshot::TraceSink::new();
    let d = pickle::decode_from(bytes, &mut sink).map_err(|e| decode_error(e, name))?;
    snapshot_of(d, sink, name)
}
