//! Profiler inputs: Chrome traces with `[memory]` events and
//! `export_memory_timeline` files. (Placeholder types until the profiler
//! readers land.)

use crate::input::LoadError;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProfilerTrace {}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryTimeline {}

pub fn is_chrome_trace(v: &serde_json::Value) -> bool {
    v.get("traceEvents").is_some()
}

pub fn is_memory_timeline(_v: &serde_json::Value) -> bool {
    false
}

pub fn trace_from_json(_v: &serde_json::Value, name: &str) -> Result<ProfilerTrace, LoadError> {
    Err(LoadError::Format {
        file: name.into(),
        msg: "profiler traces are not supported yet".into(),
    })
}

pub fn timeline_from_json(_v: &serde_json::Value, name: &str) -> Result<MemoryTimeline, LoadError> {
    Err(LoadError::Format {
        file: name.into(),
        msg: "memory timelines are not supported yet".into(),
    })
}
