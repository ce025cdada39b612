//! Times the decode phase alone (`input::load`, one thread), as
//! `stage_times` measures it, a few rounds in a row: prints each round's
//! wall seconds and MiB/s, then the median. For work on the decoder, where
//! running the whole of `stage_times` costs more than the phase measured.
//! With `general` after the rounds, an uncompressed pickle is decoded with
//! the fast path for trace entries off (`TraceSink::with_fast_path`), to
//! compare the two on the same machine.
//!
//!     cargo run --release --example decode_times -- snapshot.pickle [ROUNDS] [general]

use fragscope::input::snapshot::{TraceSink, from_arena_with};
use fragscope::input::{self, Content, LoadOptions, pickle};
use fragscope::model::Snapshot;
use std::time::Instant;

mod common;
use common::cpu;

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: decode_times FILE [ROUNDS]");
    let rounds: usize = args
        .next()
        .map_or(3, |r| r.parse().expect("a number of rounds"));
    let general = args.next().is_some_and(|a| a == "general");
    let mib = std::fs::metadata(&path).expect("a readable file").len() as f64 / (1u64 << 20) as f64;
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..rounds.max(1) {
        let (t, c) = (Instant::now(), cpu());
        let snap = if general {
            let f = std::fs::File::open(&path).expect("a readable file");
            let mut sink = TraceSink::new().with_fast_path(false);
            let d = pickle::decode_from(f, &mut sink).expect("a pickle");
            from_arena_with(&d.arena, d.root, sink).expect("a snapshot")
        } else {
            let l = input::load(&path, &LoadOptions::default()).expect("a readable snapshot");
            match l.content {
                Content::Snapshot(s) => s,
                _ => Snapshot::default(),
            }
        };
        let wall = t.elapsed().as_secs_f64();
        let used = cpu() - c;
        let events: usize = snap.traces().iter().map(|t| t.len()).sum();
        drop(snap);
        println!(
            "decode_s={wall:.4} cpu_s={used:.2} mib_s={:.1} events={events}",
            mib / wall
        );
        walls.push(wall);
        cpus.push(used);
    }
    walls.sort_by(f64::total_cmp);
    cpus.sort_by(f64::total_cmp);
    let (m, c) = (walls[walls.len() / 2], cpus[cpus.len() / 2]);
    println!(
        "median decode_s={m:.4} cpu_s={c:.2} mib_s={:.1} size_mib={mib:.1}",
        mib / m
    );
}
