//! Renderers: figures and findings → text tables, JSON, SVG, HTML. A renderer
//! returns a `String` (or bytes) and never prints; `cli` decides where it goes.

pub mod categories;
pub mod charts;
pub mod check;
pub mod culprits;
pub mod diff;
pub mod encode;
pub mod events;
pub mod explain;
pub mod flamegraph;
pub mod html;
pub mod markdown;
pub mod oom;
pub mod pretty;
pub mod ranks;
pub mod segmap;
pub mod simulate;
pub mod stats;
pub mod svg;
pub mod table;
pub mod timeline;
pub mod timeline_json;
pub mod verdict;
pub mod view;
