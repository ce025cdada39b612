//! Renderers: figures and findings → text tables, JSON, SVG, HTML. A renderer
//! returns a `String` (or bytes) and never prints; `cli` decides where it goes.

pub mod oom;
pub mod segmap;
pub mod stats;
pub mod table;
pub mod timeline;
