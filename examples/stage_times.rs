//! Times the stages of one file, for `scripts/bench.py`: prints
//! `count_s=S count_cpu_s=S decode_s=S decode_cpu_s=S events=N replay_s=S
//! ...` on one line. `count` is the decoder alone, reading every trace
//! entry and counting it as `stats` does (no model of the trace);
//! `decode` builds the whole model, each entry stored. Besides decode and
//! replay, the phases of `fragscope report`:
//! `gather` (replay of every device and the state at the report moment),
//! `culprits`, `what_if` (the allocator model under the alternative
//! settings) and `html`. CPU seconds (Linux only; 0 elsewhere) hold better
//! than wall time on a machine other work is loading.
//!
//!     cargo run --release --example stage_times -- snapshot.pickle

use fragscope::core::style::Style;
use fragscope::input::{self, Content, LoadOptions};
use fragscope::pipeline::{attach_what_if, device_culprits};
use std::io::Write;
use std::time::Instant;

mod common;
use common::cpu;

/// Runs `f`, then prints `name_s=WALL name_cpu_s=CPU ` at once (a phase
/// that fails leaves the earlier ones printed).
fn phase<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let (t, c) = (Instant::now(), cpu());
    let r = f();
    print!(
        "{name}_s={:.4} {name}_cpu_s={:.2} ",
        t.elapsed().as_secs_f64(),
        cpu() - c
    );
    std::io::stdout().flush().expect("stdout");
    r
}

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    let path = std::env::args().nth(1).expect("usage: stage_times FILE");
    let counted = phase("count", || {
        let o = LoadOptions {
            tally_traces: true,
            ..LoadOptions::default()
        };
        input::load(&path, &o).expect("a readable snapshot")
    });
    drop(counted);
    let l = phase("decode", || {
        input::load(&path, &LoadOptions::default()).expect("a readable snapshot")
    });
    let Content::Snapshot(snap) = &l.content else {
        panic!("{path}: not a snapshot")
    };
    let events: usize = snap.traces().iter().map(|t| t.len()).sum();
    print!("events={events} ");
    let r = phase("replay", || fragscope::timeline::replay(snap));
    std::hint::black_box(&r);
    drop(r);
    let inputs = phase("gather", || {
        fragscope::analysis::report::gather(&Style::default(), snap, None, None)
            .expect("replayable devices")
    });
    let culprits = phase("culprits", || device_culprits(snap, &inputs));
    let mut rep = fragscope::analysis::report::build(
        &Style::default(),
        snap,
        &l.name,
        "pickle",
        inputs,
        culprits,
    );
    phase("what_if", || attach_what_if(&mut rep, snap));
    let html = phase("html", || {
        fragscope::render::html::html(&Style::default(), &rep).expect("an HTML report")
    });
    std::hint::black_box(html);
    println!();
}
