//! The model written back out: PyTorch's snapshot schema as JSON (readable by
//! PyTorch's memory_viz page and by fragscope), and fragscope's MessagePack
//! form. Reading either back yields an equal [`Snapshot`].

use crate::core::serial::Seq;
use crate::model::MSGPACK_MAGIC;
use crate::model::*;
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::cell::{Cell, RefCell};
use std::io::Write;

fn setting_json(s: &Setting) -> Value {
    match s {
        Setting::None => Value::Null,
        Setting::Bool(b) => json!(b),
        Setting::Int(i) => json!(i),
        Setting::Float(f) => json!(f),
        Setting::Str(s) => json!(s),
        Setting::List(l) => Value::Array(l.iter().map(setting_json).collect()),
        Setting::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), setting_json(v)))
                .collect(),
        ),
    }
}

/// What the JSON writer shares: the snapshot, and the frames of each
/// distinct stack as JSON text, made on the stack's first use. A stack is
/// named by every block and event allocated from it, and its frames are
/// most of the output (30 frames of a file name, a line and a function
/// name each), so escaping and formatting them once instead of at every
/// use is most of the writer's work saved. The texts are kept while they
/// add up to [`FRAME_TEXTS_BUDGET`]; a stack past it is written each time.
struct Enc<'a> {
    snap: &'a Snapshot,
    frames: RefCell<Vec<Option<Box<RawValue>>>>,
    kept: Cell<usize>,
}

/// Bytes of frame texts kept (a file whose distinct stacks say more than
/// this is written at the old speed past it, in the same bytes).
const FRAME_TEXTS_BUDGET: usize = 32 << 20;

impl<'a> Enc<'a> {
    fn new(snap: &'a Snapshot) -> Enc<'a> {
        Enc {
            snap,
            frames: RefCell::new(vec![None; snap.stacks.len()]),
            kept: Cell::new(0),
        }
    }
}

struct Frames<'a>(&'a Enc<'a>, StackId);

impl Serialize for Frames<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (enc, id) = (self.0, self.1.0 as usize);
        if let Some(Some(text)) = enc.frames.borrow().get(id) {
            return text.serialize(ser);
        }
        if enc.kept.get() < FRAME_TEXTS_BUDGET && id < enc.frames.borrow().len() {
            let text = serde_json::to_string(&FrameList(enc.snap, self.1))
                .ok()
                .and_then(|t| RawValue::from_string(t).ok());
            if let Some(text) = text {
                enc.kept.set(enc.kept.get() + text.get().len());
                let r = text.serialize(ser);
                enc.frames.borrow_mut()[id] = Some(text);
                return r;
            }
        }
        FrameList(enc.snap, self.1).serialize(ser)
    }
}

/// A stack's frames, written out.
struct FrameList<'a>(&'a Snapshot, StackId);

impl Serialize for FrameList<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (snap, stack) = (self.0, self.0.stack(self.1));
        let mut seq = ser.serialize_seq(Some(stack.len()))?;
        for f in stack {
            let f = snap.frame(*f);
            seq.serialize_element(&FrameJson {
                filename: snap.str(f.filename),
                line: f.line,
                name: snap.str(f.name),
            })?;
        }
        seq.end()
    }
}

#[derive(serde::Serialize)]
struct FrameJson<'a> {
    filename: &'a str,
    line: i64,
    name: &'a str,
}

struct SegmentJson<'a>(&'a Enc<'a>, &'a Segment);

impl Serialize for SegmentJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (enc, s) = (self.0, self.1);
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("device", &s.device)?;
        m.serialize_entry("address", &s.address)?;
        m.serialize_entry("total_size", &s.total_size)?;
        if let Some(v) = s.allocated_size {
            m.serialize_entry("allocated_size", &v)?;
        }
        if let Some(v) = s.active_size {
            m.serialize_entry("active_size", &v)?;
        }
        if let Some(v) = s.requested_size {
            m.serialize_entry("requested_size", &v)?;
        }
        m.serialize_entry("stream", &s.stream)?;
        m.serialize_entry("segment_type", s.segment_type.as_str())?;
        if let Some((a, b)) = s.pool_id {
            m.serialize_entry("segment_pool_id", &[a, b])?;
        }
        if let Some(e) = s.is_expandable {
            m.serialize_entry("is_expandable", &e)?;
        }
        m.serialize_entry("frames", &Frames(enc, s.frames))?;
        m.serialize_entry("blocks", &Blocks(enc, &s.blocks))?;
        m.end()
    }
}

struct Blocks<'a>(&'a Enc<'a>, &'a [Block]);

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut seq = ser.serialize_seq(Some(self.1.len()))?;
        for b in self.1 {
            seq.serialize_element(&BlockJson(self.0, b))?;
        }
        seq.end()
    }
}

struct BlockJson<'a>(&'a Enc<'a>, &'a Block);

impl Serialize for BlockJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let b = self.1;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("address", &b.address)?;
        m.serialize_entry("size", &b.size)?;
        if let Some(r) = b.requested_size {
            m.serialize_entry("requested_size", &r)?;
        }
        m.serialize_entry("state", b.state.as_str())?;
        m.serialize_entry("frames", &Frames(self.0, b.frames))?;
        m.end()
    }
}

struct EventJson<'a>(&'a Enc<'a>, &'a TraceEvent);

impl Serialize for EventJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (enc, e) = (self.0, self.1);
        let snap = enc.snap;
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("action", e.action.name(snap))?;
        if e.action != Action::Oom || e.addr() != 0 {
            m.serialize_entry("addr", &e.addr())?;
        }
        m.serialize_entry("size", &e.size)?;
        m.serialize_entry("stream", &snap.stream(e))?;
        if let Some(t) = e.time_us() {
            m.serialize_entry("time_us", &t)?;
        }
        if e.frames != StackId::EMPTY {
            m.serialize_entry("frames", &Frames(enc, e.frames))?;
        }
        let x = snap.extras(e);
        if let Some(v) = snap.device_free(e) {
            m.serialize_entry("device_free", &v)?;
        }
        if let Some(v) = x.compile_context {
            m.serialize_entry("compile_context", snap.str(v))?;
        }
        if let Some(v) = x.user_metadata {
            m.serialize_entry("user_metadata", snap.str(v))?;
        }
        if let Some((a, b)) = snap.pool_of(e) {
            m.serialize_entry("pool_id", &[a, b])?;
        }
        if let Some(v) = x.category {
            m.serialize_entry("category", snap.str(v))?;
        }
        m.end()
    }
}

struct SnapshotJson<'a>(&'a Enc<'a>);

impl Serialize for SnapshotJson<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let (enc, snap) = (self.0, self.0.snap);
        let segs = Seq::new(snap.segments.iter().map(|s| SegmentJson(enc, s)));
        if snap.shape == Shape::SegmentList {
            return segs.serialize(ser);
        }
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("segments", &segs)?;
        if let Some(t) = &snap.device_traces {
            let traces = Seq::new(
                t.iter()
                    .map(|tr| Seq::new(tr.iter().map(|e| EventJson(enc, e)))),
            );
            m.serialize_entry("device_traces", &traces)?;
        }
        if let Some(s) = &snap.allocator_settings {
            let settings: Map<String, Value> = s
                .entries
                .iter()
                .map(|(k, v)| (k.clone(), setting_json(v)))
                .collect();
            m.serialize_entry("allocator_settings", &settings)?;
        }
        if let Some(a) = &snap.external_annotations {
            let annotations: Vec<Value> = a
                .iter()
                .map(|x| {
                    let mut am: Map<String, Value> = x
                        .fields
                        .iter()
                        .map(|(k, v)| (k.clone(), setting_json(v)))
                        .collect();
                    if let Some(d) = x.device {
                        am.insert("device".into(), json!(d));
                    }
                    if let Some(t) = x.time_us {
                        am.insert("time_us".into(), json!(t));
                    }
                    Value::Object(am)
                })
                .collect();
            m.serialize_entry("external_annotations", &annotations)?;
        }
        // Keys the reader did not know, once each: a key named twice keeps
        // its first place and its last value, as in a JSON object.
        let keys = &snap.unknown_keys;
        for (i, (k, _)) in keys.iter().enumerate() {
            if keys[..i].iter().any(|(e, _)| e == k) {
                continue;
            }
            let last = keys.iter().rev().find(|(e, _)| e == k).map(|(_, v)| v);
            m.serialize_entry(k, &setting_json(last.expect("k is in keys")))?;
        }
        m.end()
    }
}

/// A writer for serde_json's many small writes (a key, a colon, a number):
/// they land in a buffer of a type the serializer inlines, and reach the
/// output in pieces of at least [`CHUNK`] bytes. Through `&mut dyn Write`
/// each was a call through a vtable into the output's own buffer. A piece
/// that large goes past the 1 MiB buffer of the output ([`std::io::BufWriter`]
/// writes what fills its capacity straight through) instead of being
/// copied into it: a tenth of the work of `timeline --json`.
/// [`Chunked::finish`] writes the rest.
pub struct Chunked<'a> {
    buf: Vec<u8>,
    out: &'a mut dyn Write,
}

const CHUNK: usize = 1 << 20;

impl<'a> Chunked<'a> {
    pub fn new(out: &'a mut dyn Write) -> Chunked<'a> {
        Chunked {
            buf: Vec::with_capacity(CHUNK),
            out,
        }
    }

    fn drain(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Writes what is buffered.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.drain()
    }
}

impl Write for Chunked<'_> {
    #[inline]
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.write_all(b)?;
        Ok(b.len())
    }

    #[inline]
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        if b.len() >= CHUNK {
            self.drain()?;
            return self.out.write_all(b);
        }
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.drain()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain()?;
        self.out.flush()
    }
}

/// The snapshot in PyTorch's schema (a bare list for `SegmentList` files),
/// written to `w` as it is produced: segments, blocks and trace events are
/// never held as JSON values, so the output can be far larger than memory.
pub fn write_json(snap: &Snapshot, w: &mut dyn Write) -> std::io::Result<()> {
    let mut out = Chunked::new(w);
    serde_json::to_writer(&mut out, &SnapshotJson(&Enc::new(snap)))
        .map_err(std::io::Error::from)?;
    out.finish()
}

pub fn to_json_bytes(snap: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    write_json(snap, &mut out).expect("writing to memory");
    out
}

/// fragscope's MessagePack form, written to `w` as it is produced.
pub fn write_msgpack(snap: &Snapshot, w: &mut dyn Write) -> std::io::Result<()> {
    w.write_all(MSGPACK_MAGIC)?;
    rmp_serde::encode::write(w, snap).map_err(std::io::Error::other)
}

pub fn to_msgpack_bytes(snap: &Snapshot) -> Vec<u8> {
    let mut out = Vec::new();
    write_msgpack(snap, &mut out).expect("writing to memory");
    out
}
