//! The model written back out: PyTorch's snapshot schema as JSON (readable by
//! PyTorch's memory_viz page and by fragscope), and fragscope's MessagePack
//! form. Reading either back yields an equal [`Snapshot`].

use crate::input::MSGPACK_MAGIC;
use crate::model::*;
use serde_json::{Map, Value, json};

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

fn frames_json(snap: &Snapshot, id: StackId) -> Value {
    Value::Array(
        snap.stack(id)
            .iter()
            .map(|f| {
                let f = snap.frame(*f);
                json!({"filename": snap.str(f.filename), "line": f.line, "name": snap.str(f.name)})
            })
            .collect(),
    )
}

fn segment_json(snap: &Snapshot, s: &Segment) -> Value {
    let mut m = Map::new();
    m.insert("device".into(), json!(s.device));
    m.insert("address".into(), json!(s.address));
    m.insert("total_size".into(), json!(s.total_size));
    if let Some(v) = s.allocated_size {
        m.insert("allocated_size".into(), json!(v));
    }
    if let Some(v) = s.active_size {
        m.insert("active_size".into(), json!(v));
    }
    if let Some(v) = s.requested_size {
        m.insert("requested_size".into(), json!(v));
    }
    m.insert("stream".into(), json!(s.stream));
    m.insert("segment_type".into(), json!(s.segment_type.as_str()));
    if let Some((a, b)) = s.pool_id {
        m.insert("segment_pool_id".into(), json!([a, b]));
    }
    if let Some(e) = s.is_expandable {
        m.insert("is_expandable".into(), json!(e));
    }
    m.insert("frames".into(), frames_json(snap, s.frames));
    let blocks: Vec<Value> = s
        .blocks
        .iter()
        .map(|b| {
            let mut bm = Map::new();
            bm.insert("address".into(), json!(b.address));
            bm.insert("size".into(), json!(b.size));
            if let Some(r) = b.requested_size {
                bm.insert("requested_size".into(), json!(r));
            }
            bm.insert("state".into(), json!(b.state.as_str()));
            bm.insert("frames".into(), frames_json(snap, b.frames));
            Value::Object(bm)
        })
        .collect();
    m.insert("blocks".into(), Value::Array(blocks));
    Value::Object(m)
}

fn event_json(snap: &Snapshot, e: &TraceEvent) -> Value {
    let mut m = Map::new();
    m.insert("action".into(), json!(e.action.name(snap)));
    if e.action != Action::Oom || e.addr != 0 {
        m.insert("addr".into(), json!(e.addr));
    }
    m.insert("size".into(), json!(e.size));
    m.insert("stream".into(), json!(e.stream));
    if let Some(t) = e.time_us() {
        m.insert("time_us".into(), json!(t));
    }
    if e.frames != StackId::EMPTY {
        m.insert("frames".into(), frames_json(snap, e.frames));
    }
    if let Some(v) = e.device_free() {
        m.insert("device_free".into(), json!(v));
    }
    if let Some(v) = e.compile_context() {
        m.insert("compile_context".into(), json!(snap.str(v)));
    }
    if let Some(v) = e.user_metadata() {
        m.insert("user_metadata".into(), json!(snap.str(v)));
    }
    if let Some((a, b)) = snap.pool_of(e) {
        m.insert("pool_id".into(), json!([a, b]));
    }
    if let Some(v) = e.category() {
        m.insert("category".into(), json!(snap.str(v)));
    }
    Value::Object(m)
}

/// The snapshot in PyTorch's schema (a bare list for `SegmentList` files).
pub fn to_pytorch_json(snap: &Snapshot) -> Value {
    let segs = Value::Array(
        snap.segments
            .iter()
            .map(|s| segment_json(snap, s))
            .collect(),
    );
    if snap.shape == Shape::SegmentList {
        return segs;
    }
    let mut m = Map::new();
    m.insert("segments".into(), segs);
    if let Some(t) = &snap.device_traces {
        m.insert(
            "device_traces".into(),
            Value::Array(
                t.iter()
                    .map(|tr| Value::Array(tr.iter().map(|e| event_json(snap, e)).collect()))
                    .collect(),
            ),
        );
    }
    if let Some(s) = &snap.allocator_settings {
        m.insert(
            "allocator_settings".into(),
            Value::Object(
                s.entries
                    .iter()
                    .map(|(k, v)| (k.clone(), setting_json(v)))
                    .collect(),
            ),
        );
    }
    if let Some(a) = &snap.external_annotations {
        m.insert(
            "external_annotations".into(),
            Value::Array(
                a.iter()
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
                    .collect(),
            ),
        );
    }
    for (k, v) in &snap.unknown_keys {
        m.insert(k.clone(), setting_json(v));
    }
    Value::Object(m)
}

pub fn to_json_bytes(snap: &Snapshot) -> Vec<u8> {
    serde_json::to_vec(&to_pytorch_json(snap)).expect("JSON of a snapshot cannot fail")
}

pub fn to_msgpack_bytes(snap: &Snapshot) -> Vec<u8> {
    let mut out = MSGPACK_MAGIC.to_vec();
    rmp_serde::encode::write(&mut out, snap).expect("MessagePack of a snapshot cannot fail");
    out
}
