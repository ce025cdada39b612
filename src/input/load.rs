//! The loader: the input stage's one door to the file system. Opens a path
//! (or `-` for stdin), bounds the bytes read by `--max-input-size`, undoes
//! gzip and zstd as streams (bounded too) and hands the decoders a reader
//! or bytes; every read error becomes the [`LoadError`] it stands for.

use super::{Compression, Content, LoadError, Loaded, decode_stream};
use crate::model::Snapshot;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
#[cfg(target_os = "linux")]
use {super::decode_mapped, crate::core::mapped::Mapped};

/// The first bytes of a gzip and of a zstd stream.
const GZIP: &[u8] = &[0x1f, 0x8b];
const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Default bound on the (decompressed) bytes read from one input: 16 GiB.
pub const DEFAULT_MAX_INPUT: u64 = 16 << 30;

#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub max_input_size: u64,
    /// Count each device's trace as it is decoded and keep none of it
    /// ([`Loaded::tallies`]), where the input allows: an uncompressed
    /// pickle file. What `stats` asks: the figures it prints need no more.
    pub tally_traces: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_input_size: DEFAULT_MAX_INPUT,
            tally_traces: false,
        }
    }
}

fn read_bounded(
    mut r: impl Read,
    name: &str,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, LoadError> {
    let mut buf = Vec::new();
    (&mut r)
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| match what {
            "" => LoadError::Io {
                file: name.to_string(),
                source: e,
            },
            _ => LoadError::Format {
                file: name.to_string(),
                msg: format!(
                    "corrupt {} data: {e}",
                    what.trim_start_matches(" after ")
                        .trim_end_matches(" decompression")
                ),
            },
        })?;
    if buf.len() as u64 > limit {
        return Err(LoadError::TooLarge {
            file: name.to_string(),
            limit,
            what,
        });
    }
    Ok(buf)
}

/// Opens a file for reading; the error names it.
fn open_file(path: &str) -> Result<std::fs::File, LoadError> {
    std::fs::File::open(Path::new(path)).map_err(|e| LoadError::Io {
        file: path.to_string(),
        source: e,
    })
}

/// Undoes gzip or zstd compression (detected by magic bytes), bounded.
pub fn decompress(
    raw: Vec<u8>,
    name: &str,
    opts: &LoadOptions,
) -> Result<(Vec<u8>, Compression), LoadError> {
    if raw.starts_with(GZIP) {
        let d = flate2::read::MultiGzDecoder::new(&raw[..]);
        let out = read_bounded(d, name, opts.max_input_size, " after gzip decompression")?;
        return Ok((out, Compression::Gzip));
    }
    if raw.starts_with(ZSTD) {
        let d = zstd::stream::read::Decoder::new(&raw[..]).map_err(|e| LoadError::Format {
            file: name.to_string(),
            msg: format!("corrupt zstd data: {e}"),
        })?;
        let out = read_bounded(d, name, opts.max_input_size, " after zstd decompression")?;
        return Ok((out, Compression::Zstd));
    }
    Ok((raw, Compression::None))
}

/// Marks the read that went past `--max-input-size`.
#[derive(Debug)]
struct OverLimit {
    limit: u64,
    what: &'static str,
}
impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {} bytes{}", self.limit, self.what)
    }
}
impl std::error::Error for OverLimit {}

/// A reader that fails once more than `limit` bytes came through it.
struct Bounded<R> {
    r: R,
    left: u64,
    limit: u64,
    what: &'static str,
}

impl<R: Read> Bounded<R> {
    fn new(r: R, limit: u64, what: &'static str) -> Bounded<R> {
        Bounded {
            r,
            left: limit,
            limit,
            what,
        }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(self.left.saturating_add(1)) as usize;
        let n = self.r.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(std::io::Error::other(OverLimit {
                limit: self.limit,
                what: self.what,
            }));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A read error as the load error it stands for.
pub fn read_error(e: std::io::Error, name: &str, compression: Compression) -> LoadError {
    if let Some(o) = e.get_ref().and_then(|i| i.downcast_ref::<OverLimit>()) {
        return LoadError::TooLarge {
            file: name.to_string(),
            limit: o.limit,
            what: o.what,
        };
    }
    match compression {
        Compression::None => LoadError::Io {
            file: name.to_string(),
            source: e,
        },
        Compression::Gzip | Compression::Zstd => LoadError::Format {
            file: name.to_string(),
            msg: format!(
                "corrupt {}: {e}",
                if compression == Compression::Gzip {
                    "gzip"
                } else {
                    "zstd"
                }
            ),
        },
    }
}

/// Counts the bytes read from a file for a progress display.
struct Observed<'p, R> {
    r: R,
    done: u64,
    shown: u64,
    progress: &'p dyn Fn(u64),
}

impl<R: Read> Read for Observed<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf)?;
        self.done += n as u64;
        if self.done - self.shown >= 1 << 20 {
            self.shown = self.done;
            (self.progress)(self.done);
        }
        Ok(n)
    }
}

/// Loads any supported input from a path or `-`.
pub fn load(path: &str, opts: &LoadOptions) -> Result<Loaded, LoadError> {
    load_observed(path, opts, &|_| {})
}

/// [`load`], telling `progress` how many bytes of the file (before any
/// decompression) were read so far, every mebibyte.
pub fn load_observed(
    path: &str,
    opts: &LoadOptions,
    progress: &dyn Fn(u64),
) -> Result<Loaded, LoadError> {
    let limit = opts.max_input_size;
    let file: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = open_file(path)?;
        // An uncompressed pickle file within the bound is read where it
        // lies, mapped; anything else (or a file that cannot be mapped) as
        // a stream, from its first byte: mapping moves no file offset.
        #[cfg(target_os = "linux")]
        if let Ok(m) = f.metadata()
            && m.is_file()
            && m.len() <= limit
            && let Some(map) = Mapped::of(std::os::fd::AsFd::as_fd(&f), m.len())
            && !map.bytes().starts_with(GZIP)
            && !map.bytes().starts_with(ZSTD)
            && let Some(loaded) = decode_mapped(&map, path, progress, opts.tally_traces)
        {
            return loaded;
        }
        Box::new(f)
    };
    let file = Observed {
        r: file,
        done: 0,
        shown: 0,
        progress,
    };
    let (src, compression) = stream_of(Box::new(file), path, limit)?;
    decode_stream(src, path, compression)
}

/// A path (or `-` for stdin) as a stream of its bytes, gzip or zstd undone,
/// every stage bounded by `--max-input-size`: for readers that take any text
/// as it comes (`explain`). A read error of the stream becomes a load error
/// with [`read_error`].
pub fn open_stream(
    path: &str,
    opts: &LoadOptions,
) -> Result<(Box<dyn BufRead>, Compression), LoadError> {
    let file: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(open_file(path)?)
    };
    stream_of(file, path, opts.max_input_size)
}

/// `file` bounded, and decompressed as a stream when its first bytes say
/// gzip or zstd (the decompressed bytes bounded too).
fn stream_of<'a>(
    file: Box<dyn Read + 'a>,
    path: &str,
    limit: u64,
) -> Result<(Box<dyn BufRead + 'a>, Compression), LoadError> {
    let mut raw = BufReader::with_capacity(1 << 16, Bounded::new(file, limit, ""));
    let head = raw
        .fill_buf()
        .map_err(|e| read_error(e, path, Compression::None))?;
    Ok(if head.starts_with(GZIP) {
        let d = flate2::read::MultiGzDecoder::new(raw);
        let b = Bounded::new(d, limit, " after gzip decompression");
        (
            Box::new(BufReader::with_capacity(1 << 16, b)),
            Compression::Gzip,
        )
    } else if head.starts_with(ZSTD) {
        let d = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| LoadError::Format {
            file: path.to_string(),
            msg: format!("corrupt zstd data: {e}"),
        })?;
        let b = Bounded::new(d, limit, " after zstd decompression");
        (
            Box::new(BufReader::with_capacity(1 << 16, b)),
            Compression::Zstd,
        )
    } else {
        (Box::new(raw), Compression::None)
    })
}

/// Loads a snapshot only; other inputs are a clear error.
pub fn load_snapshot(path: &str, opts: &LoadOptions) -> Result<(Snapshot, Loaded), LoadError> {
    let mut l = load(path, opts)?;
    match std::mem::replace(&mut l.content, Content::Snapshot(Snapshot::default())) {
        Content::Snapshot(s) => Ok((s, l)),
        Content::Profiler(_) => Err(LoadError::Format {
            file: path.to_string(),
            msg: "this is a profiler trace, not a memory snapshot; this command needs a snapshot \
                  (record one with torch.cuda.memory._record_memory_history and _dump_snapshot)"
                .into(),
        }),
        Content::MemoryTimeline(_) => Err(LoadError::Format {
            file: path.to_string(),
            msg: "this is a memory-timeline export, not a memory snapshot".into(),
        }),
    }
}
