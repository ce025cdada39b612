//! JSON inputs: the snapshot dict as JSON (same schema as the pickle, tuples
//! as arrays), profiler Chrome traces and memory-timeline exports. Which one a
//! document is follows from its content.
//!
//! A file whose text starts an object is parsed where it lies, mapped, its
//! strings read in place: the parser tells [`load_json_in_place`] where it
//! is through the strings it hands over (and each `traceEvents` entry's
//! text), and the pages behind go back to the system. Any other document
//! (compressed, stdin, a top-level array) is read as a stream, through a
//! buffer. Either way a `frames` value is taken as text first (a stack
//! written out again at every event that names it; a stream's text copied
//! out) and parsed only the first time that text comes, and a profiler
//! trace's entry is parsed only when its text names what is kept of it.
//! No document is held whole: a snapshot's values go
//! into the arena as they are parsed ([`build`]), its trace entries to the
//! [`TraceSink`](crate::input::snapshot::TraceSink) one by one; a Chrome
//! trace's `traceEvents` are read one entry at a time into a
//! [`TraceReader`], which keeps only what the model needs. A top-level
//! array that is no Chrome trace is read element by element too
//! ([`array`]): a memory-timeline export's rows into the numbers of its
//! timeline, a bare segment list into the arena. Only the other values of a
//! top-level object (small: settings, device properties), a Chrome trace's
//! entries one at a time, and a top-level array's first element when it is
//! an object are parsed into a `serde_json::Value`.

mod build;

use super::value::{Arena, Node, Vid};
use super::{Compression, Content, LoadError, load::read_error};
use crate::input::profiler::chrome::TraceReader;
use build::{Builder, Ctx, InPlace, Item, Seed};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::io::Read;

/// Parses JSON text and decides what it holds.
pub fn load_json(bytes: &[u8], name: &str) -> Result<Content, LoadError> {
    parse_in_place(bytes, name, &|_| {})
}

/// [`load_json`] on a mapped file: `read_to` is told where each string of
/// a snapshot or trace entry the parser hands over starts, so that the
/// pages behind it go back to the system as the parser goes on.
pub fn load_json_in_place(
    bytes: &[u8],
    name: &str,
    read_to: &dyn Fn(*const u8),
) -> Result<Content, LoadError> {
    parse_in_place(bytes, name, read_to)
}

/// Text in memory is parsed where it lies: strings with no escape are
/// read in place, not copied byte by byte as from a stream.
fn parse_in_place(
    bytes: &[u8],
    name: &str,
    read_to: &dyn Fn(*const u8),
) -> Result<Content, LoadError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let doc = Root(Some(InPlace {
        doc: bytes,
        read_to,
    }))
    .deserialize(&mut de)
    .and_then(|d| de.end().map(|()| d));
    content_of(doc.map_err(|e| invalid(&e, name))?, name)
}

/// The refusal of text that is no JSON.
fn invalid(e: &serde_json::Error, name: &str) -> LoadError {
    let msg = match build::nested_error(e) {
        Some((line, column, msg)) => {
            format!(
                "invalid JSON at line {line}, column {column}: {msg} at line {line} column {column}"
            )
        }
        None => format!(
            "invalid JSON at line {}, column {}: {e}",
            e.line(),
            e.column()
        ),
    };
    LoadError::Format {
        file: name.into(),
        msg,
    }
}

/// [`load_json`] on a stream (decompressed as `compression` says, for the
/// words of a read error).
pub fn load_json_reader(
    mut r: impl Read,
    name: &str,
    compression: Compression,
) -> Result<Content, LoadError> {
    // Owned, a `BufReader` hands the parser each byte from its buffer; a
    // parser over any other reader asks for every byte with a call of its own.
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(1 << 16, &mut r));
    let doc = Root(None)
        .deserialize(&mut de)
        .and_then(|d| de.end().map(|()| d));
    let doc = match doc {
        Ok(d) => d,
        Err(e) if e.is_io() => return Err(read_error(e.into(), name, compression)),
        Err(e) => {
            // As when the document was read whole before it was parsed: a
            // read error or the size bound further on comes first.
            std::io::copy(&mut r, &mut std::io::sink())
                .map_err(|e| read_error(e, name, compression))?;
            return Err(invalid(&e, name));
        }
    };
    content_of(doc, name)
}

/// What a parsed document holds.
fn content_of(doc: Doc<'_>, name: &str) -> Result<Content, LoadError> {
    let schema = |e: super::snapshot::SchemaError| LoadError::Schema {
        file: name.into(),
        path: e.path,
        msg: e.msg,
    };
    match doc {
        Doc::Value(v) => from_value(v, name),
        Doc::Array(array::Array::Timeline(t)) => Ok(Content::MemoryTimeline(t)),
        Doc::Array(array::Array::Segments(b, root)) => {
            let (arena, sink) = b.finish(root);
            let snap = super::snapshot::from_arena_with(&arena, root, sink).map_err(schema)?;
            Ok(Content::Snapshot(snap))
        }
        Doc::Array(array::Array::ListFirst) => {
            // Read as a list of segments, the document is refused at its
            // first element, a list where a dict belongs, whatever follows:
            // the refusal of a list holding one empty list.
            let mut a = Arena::default();
            let first = a.push(Node::List(Vec::new()));
            let root = a.push(Node::List(vec![first]));
            let e = super::snapshot::from_arena(&a, root).expect_err("a list is no segment");
            Err(schema(e))
        }
        Doc::Chrome(r, v) => r.finish(&v, name).map(Content::Profiler),
        Doc::Object(mut entries, mut b) => {
            super::snapshot::dedup_keys(&mut entries);
            if let Some((_, Entry::Events(_))) = entries.iter().find(|(k, _)| k == "traceEvents") {
                let mut events = None;
                let mut rest = serde_json::Map::new();
                for (k, e) in entries {
                    match e {
                        Entry::Events(r) => events = Some(r),
                        Entry::Value(v) => {
                            rest.insert(k, v);
                        }
                        Entry::Node(_) => {}
                    }
                }
                let r = events.expect("found above");
                return r.finish(&Value::Object(rest), name).map(Content::Profiler);
            }
            let mut items = Vec::with_capacity(entries.len());
            for (k, e) in entries {
                let k = b.str_node(&k);
                let v = match e {
                    Entry::Node(it) => b.vid(it, 0),
                    Entry::Value(v) => to_arena(&v, &mut b.arena),
                    Entry::Events(_) => unreachable!("not the last traceEvents"),
                };
                items.push((k, v));
            }
            let root = b.arena.push(Node::Dict(items));
            let (arena, sink) = b.finish(root);
            let snap = super::snapshot::from_arena_with(&arena, root, sink).map_err(schema)?;
            Ok(Content::Snapshot(snap))
        }
    }
}

/// A top-level scalar: no snapshot, refused by the schema layer.
fn from_value(v: Value, name: &str) -> Result<Content, LoadError> {
    let mut arena = Arena::default();
    let root = to_arena(&v, &mut arena);
    let snap = super::snapshot::from_arena(&arena, root).map_err(|e| LoadError::Schema {
        file: name.into(),
        path: e.path,
        msg: e.msg,
    })?;
    Ok(Content::Snapshot(snap))
}

/// A document as it was read.
enum Doc<'p> {
    /// A top-level scalar.
    Value(Value),
    /// A top-level array that is no Chrome trace.
    Array(array::Array),
    /// A Chrome trace in its bare-array form (and the array's place: no
    /// properties).
    Chrome(Box<TraceReader>, Value),
    /// A top-level object, its values as each was read.
    Object(Vec<(String, Entry)>, Box<Builder<'p>>),
}

/// A value of the top-level object: a snapshot's `segments` and
/// `device_traces` built into the arena, a `traceEvents` array read, any
/// other value whole.
enum Entry {
    Node(Item),
    Events(Box<TraceReader>),
    Value(Value),
}

/// The top-level value; where the parser has read to goes to the function
/// of a document parsed in place (which lends its text to the readers; one
/// read from a stream has none).
struct Root<'p>(Option<InPlace<'p>>);

impl<'de, 'p> DeserializeSeed<'de> for Root<'p> {
    type Value = Doc<'p>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Doc<'p>, D::Error> {
        d.deserialize_any(self)
    }
}

/// Scalars as `serde_json::Value` holds them, for the visitors below.
macro_rules! scalars {
    ($wrap:expr) => {
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v)))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v.into())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v)))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
    };
}

mod array;

impl<'de, 'p> Visitor<'de> for Root<'p> {
    type Value = Doc<'p>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    scalars!(Doc::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc<'p>, A::Error> {
        let first = match seq.next_element_seed(array::FirstSeed)? {
            None => return Ok(Doc::Array(array::empty())),
            Some(array::First::Numbers(n)) => {
                return array::after_numbers(n, seq).map(Doc::Array);
            }
            Some(array::First::Value(v)) => v,
        };
        // The bare-array form of a Chrome trace: its entries carry `ph`.
        if first.get("ph").is_some() && first.get("name").is_some() {
            let mut r = TraceReader::default();
            r.add(&first);
            drop(first);
            while let Some(e) = seq.next_element::<Value>()? {
                r.add(&e);
            }
            return Ok(Doc::Chrome(Box::new(r), Value::Null));
        }
        array::segments(first, seq).map(Doc::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc<'p>, A::Error> {
        let mut b = Box::new(Builder::reading(self.0));
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            let ctx = match k.as_str() {
                "traceEvents" => {
                    let e = map.next_value_seed(Events(self.0))?;
                    entries.push((k, e));
                    continue;
                }
                "device_traces" | "traces" => Ctx::DeviceTraces,
                "segments" => Ctx::Plain,
                _ => {
                    let v = map.next_value::<Value>()?;
                    entries.push((k, Entry::Value(v)));
                    continue;
                }
            };
            let it = map.next_value_seed(Seed { b: &mut b, ctx })?;
            entries.push((k, Entry::Node(it)));
        }
        Ok(Doc::Object(entries, b))
    }
}

/// The value of a top-level `traceEvents` key: an array read entry by
/// entry, anything else whole. Parsed in place (with where the parser has
/// read to told to the function), each entry is found as text first.
struct Events<'p>(Option<InPlace<'p>>);

impl<'de> DeserializeSeed<'de> for Events<'_> {
    type Value = Entry;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Events<'_> {
    type Value = Entry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    scalars!(Entry::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        let mut r = TraceReader::default();
        match self.0 {
            Some(place) => {
                while let Some(raw) = seq.next_element::<&'de serde_json::value::RawValue>()? {
                    (place.read_to)(raw.get().as_ptr());
                    r.add_text(raw.get())
                        .map_err(|e| de::Error::custom(build::nested(self.0, raw.get(), &e)))?;
                }
            }
            None => {
                while let Some(raw) = seq.next_element::<Box<serde_json::value::RawValue>>()? {
                    r.add_text(raw.get())
                        .map_err(|e| de::Error::custom(build::nested(None, raw.get(), &e)))?;
                }
            }
        }
        Ok(Entry::Events(Box::new(r)))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Entry, A::Error> {
        let v = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(Entry::Value(v))
    }
}

/// Copies a JSON tree into the arena without recursion (serde_json already
/// bounds nesting at 128 levels while parsing).
pub fn to_arena(v: &serde_json::Value, arena: &mut Arena) -> Vid {
    use serde_json::Value as J;
    match v {
        J::Null => arena.push(Node::None),
        J::Bool(b) => arena.push(Node::Bool(*b)),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                arena.push(Node::Int(i))
            } else if n.as_u64().is_some() {
                arena.push(Node::BigInt)
            } else {
                arena.push(Node::Float(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        J::String(s) => arena.push(Node::Str(s.as_str().into())),
        J::Array(a) => {
            let items: Vec<Vid> = a.iter().map(|x| to_arena(x, arena)).collect();
            arena.push(Node::List(items))
        }
        J::Object(o) => {
            let items: Vec<(Vid, Vid)> = o
                .iter()
                .map(|(k, x)| {
                    let kid = arena.push(Node::Str(k.as_str().into()));
                    (kid, to_arena(x, arena))
                })
                .collect();
            arena.push(Node::Dict(items))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{load_json, load_json_reader};
    use crate::input::Compression;

    /// A document parsed in place (a `frames` value found again by its
    /// text) reads as the same document read from a stream, byte by byte.
    #[test]
    fn in_place_and_streamed_read_the_same() {
        let frame =
            |f: &str, l: u32| format!(r#"{{"filename": "{f}", "line": {l}, "name": "fn_{l}"}}"#);
        let a = format!("[{}, {}]", frame("a.py", 1), frame("b.py", 2));
        // The same frames in other words: equal, though not the same text.
        let a_spaced = a.replace(", ", ",\n   ");
        let b = format!("[{}]", frame("a\\u0020.py", 3));
        let entry = |action: &str, addr: u64, frames: &str| {
            format!(
                r#"{{"action": "{action}", "addr": {addr}, "size": 512, "stream": 0, "time_us": {addr}, "frames": {frames}}}"#
            )
        };
        let trace = [
            entry("alloc", 1024, &a),
            entry("alloc", 2048, &a),
            entry("free_requested", 1024, &a_spaced),
            entry("alloc", 4096, &b),
            entry("alloc", 8192, "[]"),
            entry("alloc", 16384, r#""not a list""#),
            entry("free_completed", 1024, &b),
            entry("alloc", 32768, &format!("[{}, [1]]", frame("c.py", 4))),
        ]
        .join(", ");
        let segments = format!(
            r#"[{{"device": 0, "address": 1024, "total_size": 2097152, "stream": 0, "segment_type": "small", "allocated_size": 0, "active_size": 0, "blocks": [{{"address": 1024, "size": 2097152, "requested_size": 0, "state": "inactive", "frames": {a}, "history": [{{"addr": 1024, "real_size": 512, "frames": {a}}}]}}]}}]"#
        );
        let docs = [
            format!(r#"{{"segments": {segments}, "device_traces": [[{trace}]]}}"#),
            format!(r#"{{"device_traces": [[{trace}]], "segments": {segments}, "frames": {a}}}"#),
            format!(r#"{{"segments": [], "device_traces": [[{}]]}}"#, entry("alloc", 1, "[")),
            r#"{"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Total Reserved": 4096, "Total Allocated": 512, "Bytes": 512, "Addr": 1024, "Device Id": 0, "Device Type": 1}}, {"ph": "X", "name": "aten::op", "pid": 1, "tid": 1, "ts": 1, "dur": 9}]}"#.to_string(),
            r#"{"traceEvents": [{"ph": "X", "name": "a\u0020b", "pid": 1, "tid": 1, "ts": 1, "dur": 9}, 5]}"#.to_string(),
        ];
        let spread: Vec<String> = docs.iter().map(|d| d.replace(", ", ",\n ")).collect();
        for d in docs.iter().chain(&spread) {
            let in_place = format!("{:?}", load_json(d.as_bytes(), "x"));
            let streamed = format!(
                "{:?}",
                load_json_reader(d.as_bytes(), "x", Compression::None)
            );
            assert_eq!(in_place, streamed, "{d}");
        }
        // What the check of a `frames` text lets through fails where the
        // same value fails read with the rest: a number out of range (which
        // a stream's parser places a byte further on, after it).
        let bad = format!(
            r#"{{"segments": [], "device_traces": [[{}, {}]]}}"#,
            entry("alloc", 1, &a),
            entry("alloc", 2, r#"[{"x": 1, "y": 1e400}]"#)
        );
        for d in [bad.clone(), bad.replace(", ", ",\n ")] {
            let nested = load_json(d.as_bytes(), "x").unwrap_err().to_string();
            let read_with_the_rest = load_json(d.replace("frames", "framez").as_bytes(), "x")
                .unwrap_err()
                .to_string();
            assert!(nested.contains("number out of range"), "{nested}");
            assert_eq!(nested, read_with_the_rest, "{d}");
        }
        // The same in a profiler trace's entry that is kept; in one that is
        // not (a kernel), the value is never read.
        let op = r#"{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1e400}"#;
        let trace = format!(r#"{{"traceEvents": [{op}]}}"#);
        for d in [trace.clone(), trace.replace(", ", ",\n ")] {
            let in_place = load_json(d.as_bytes(), "x").unwrap_err().to_string();
            assert!(in_place.contains("number out of range"), "{in_place}");
            // Placed at the number's last digit, as the whole parse places it.
            let digit = d.find("1e400").unwrap() + 5;
            let line = 1 + d[..digit].matches('\n').count();
            let column = digit - d[..digit].rfind('\n').map_or(0, |n| n + 1);
            assert!(
                in_place.contains(&format!("line {line}, column {column}:")),
                "{in_place}"
            );
            // A stream's reader places it after the entry.
            let streamed = load_json_reader(d.as_bytes(), "x", Compression::None)
                .unwrap_err()
                .to_string();
            assert!(streamed.contains("number out of range"), "{streamed}");
        }
        let kernel = op.replace("cpu_op", "kernel");
        let d = format!(r#"{{"traceEvents": [{kernel}]}}"#);
        let in_place = format!("{:?}", load_json(d.as_bytes(), "x"));
        assert!(!in_place.contains("out of range"), "{in_place}");
        let streamed = format!(
            "{:?}",
            load_json_reader(d.as_bytes(), "x", Compression::None)
        );
        assert_eq!(in_place, streamed);
    }
}
