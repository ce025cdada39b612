//! JSON inputs: the snapshot dict as JSON (same schema as the pickle, tuples
//! as arrays), profiler Chrome traces and memory-timeline exports. Which one a
//! document is follows from its content.
//!
//! A document is read as a stream, never held whole: a snapshot's values go
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
use build::{Builder, Ctx, Item, Seed};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::io::Read;

/// Parses JSON text and decides what it holds.
pub fn load_json(bytes: &[u8], name: &str) -> Result<Content, LoadError> {
    load_json_reader(bytes, name, Compression::None)
}

/// [`load_json`] on a stream (decompressed as `compression` says, for the
/// words of a read error).
pub fn load_json_reader(
    mut r: impl Read,
    name: &str,
    compression: Compression,
) -> Result<Content, LoadError> {
    let mut de = serde_json::Deserializer::from_reader(&mut r);
    let doc = Root.deserialize(&mut de).and_then(|d| de.end().map(|()| d));
    let doc = match doc {
        Ok(d) => d,
        Err(e) if e.is_io() => return Err(read_error(e.into(), name, compression)),
        Err(e) => {
            // As when the document was read whole before it was parsed: a
            // read error or the size bound further on comes first.
            std::io::copy(&mut r, &mut std::io::sink())
                .map_err(|e| read_error(e, name, compression))?;
            return Err(LoadError::Format {
                file: name.into(),
                msg: format!(
                    "invalid JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            });
        }
    };
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
enum Doc {
    /// A top-level scalar.
    Value(Value),
    /// A top-level array that is no Chrome trace.
    Array(array::Array),
    /// A Chrome trace in its bare-array form (and the array's place: no
    /// properties).
    Chrome(Box<TraceReader>, Value),
    /// A top-level object, its values as each was read.
    Object(Vec<(String, Entry)>, Box<Builder>),
}

/// A value of the top-level object: a snapshot's `segments` and
/// `device_traces` built into the arena, a `traceEvents` array read, any
/// other value whole.
enum Entry {
    Node(Item),
    Events(Box<TraceReader>),
    Value(Value),
}

/// The top-level value.
struct Root;

impl<'de> DeserializeSeed<'de> for Root {
    type Value = Doc;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Doc, D::Error> {
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

impl<'de> Visitor<'de> for Root {
    type Value = Doc;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    scalars!(Doc::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Doc, A::Error> {
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

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Doc, A::Error> {
        let mut b = Box::<Builder>::default();
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            let ctx = match k.as_str() {
                "traceEvents" => {
                    let e = map.next_value_seed(Events)?;
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
/// entry, anything else whole.
struct Events;

impl<'de> DeserializeSeed<'de> for Events {
    type Value = Entry;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Entry, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Events {
    type Value = Entry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    scalars!(Entry::Value);

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry, A::Error> {
        let mut r = TraceReader::default();
        while let Some(e) = seq.next_element::<Value>()? {
            r.add(&e);
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
