//! Renderers: figures and findings → text tables, JSON, SVG, HTML. A renderer
//! returns a `String` (or bytes) and never prints; `cli` decides where it goes.

pub mod check;
pub mod culprits;
pub mod diff;
pub mod explain;
pub mod flamegraph;
pub mod oom;
pub mod profiler;
pub mod segmap;
pub mod simulate;
pub mod stats;
pub mod table;
pub mod timeline;
