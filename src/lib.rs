//! fragscope: offline analysis of PyTorch CUDA memory snapshots.
//!
//! Data flows one way: bytes → typed model ([`input`], [`model`]) → replayed
//! timeline → metrics and findings ([`stats`]) → renderers ([`render`]).
//! See `docs/architecture.md`.

pub mod advice;
pub mod alloc;
pub mod check;
pub mod cli;
pub mod culprits;
pub mod diff;
pub mod encode;
pub mod events;
pub mod explain;
pub mod frames;
pub mod input;
pub mod metrics;
pub mod model;
pub mod oom;
pub mod output;
pub mod profiler;
pub mod ranks;
pub mod render;
pub mod replay;
pub mod report;
pub mod serial;
pub mod sim;
pub mod stats;
pub mod synth;
pub mod trace_report;
pub mod units;
