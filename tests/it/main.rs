//! Every integration test, as modules of one test binary (`cargo test --test
//! it`; `cargo test --test it MODULE::` runs one module): one link instead of
//! one per file, which is most of a test build's time on two cores. The
//! modules run the built `fragscope` binary, or call the library, and share
//! [`util`] (running the binary, locating fixtures and the real files) and
//! [`golden`] (the compare-or-bless helper).
//!
//! Tests in one binary share a process: a module must not change
//! process-wide state (environment variables, the current directory) that
//! another could read.

mod golden;
mod util;

mod blocks;
mod charts;
mod check_diff;
mod check_diff_timeline;
mod checkpoints;
mod cli_replay;
mod convert;
mod culprits;
mod culprits_real;
mod decoder;
mod ergonomics;
mod errors;
mod events;
mod explain_real;
mod fresh_frames;
mod fuzz_seeds;
mod gpu_fidelity;
mod guide;
mod hostile;
mod hostile_commands;
mod independent;
mod json_schema;
mod layers;
mod memory;
mod no_trace;
mod packaging;
mod pending_frees;
mod profiler_real;
mod replay_real;
mod replay_series;
mod replayer;
mod sim_cli;
mod sim_fidelity;
mod sim_plan;
mod sim_policy;
mod sim_props;
mod sim_stream;
mod stats;
mod synth;
mod tally;
mod trace_commands;
mod view;
mod view_api;
mod view_bands;
