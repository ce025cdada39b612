//! fragscope: offline analysis of PyTorch CUDA memory snapshots.
//!
//! Data flows one way, one stage a folder: bytes → typed model ([`input`],
//! [`model`]) → one replayed [`timeline`] → the what-if model ([`sim`]) →
//! findings ([`analysis`]) → bytes by format ([`render`]); [`pipeline`] runs
//! the stages, [`cli`] parses arguments and writes outputs. See
//! `docs/architecture.md`.

pub mod analysis;
pub mod cli;
pub mod core;
pub mod input;
pub mod model;
pub mod pipeline;
pub mod render;
pub mod sim;
pub mod synth;
pub mod timeline;
