//! JSON inputs: the snapshot dict as JSON (same schema as the pickle, tuples
//! as arrays), profiler Chrome traces and memory-timeline exports. Which one a
//! document is follows from its content.

use super::value::{Arena, Node, Vid};
use super::{Content, LoadError};

/// Parses JSON text and decides what it holds.
pub fn load_json(bytes: &[u8], name: &str) -> Result<Content, LoadError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| LoadError::Format {
        file: name.into(),
        msg: format!(
            "invalid JSON at line {}, column {}: {e}",
            e.line(),
            e.column()
        ),
    })?;
    if crate::input::profiler::is_chrome_trace(&v) {
        return crate::input::profiler::trace_from_json(&v, name).map(Content::Profiler);
    }
    if crate::input::profiler::is_memory_timeline(&v) {
        return crate::input::profiler::timeline_from_json(&v, name).map(Content::MemoryTimeline);
    }
    let mut arena = Arena::default();
    let root = to_arena(&v, &mut arena);
    drop(v);
    let snap = super::snapshot::from_arena(&arena, root).map_err(|e| LoadError::Schema {
        file: name.into(),
        path: e.path,
        msg: e.msg,
    })?;
    Ok(Content::Snapshot(snap))
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
