//! Times the decode phase alone (`input::load`, one thread), as
//! `stage_times` measures it, a few rounds in a row: prints each round's
//! wall seconds and MiB/s, then the median. For work on the decoder, where
//! running the whole of `stage_times` costs more than the phase measured.
//!
//!     cargo run --release --example decode_times -- snapshot.pickle [ROUNDS]

use fragscope::input::{self, Content, LoadOptions};
use std::time::Instant;

mod common;
use common::cpu;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: decode_times FILE [ROUNDS]");
    let rounds: usize = args
        .next()
        .map_or(3, |r| r.parse().expect("a number of rounds"));
    let mib = std::fs::metadata(&path).expect("a readable file").len() as f64 / (1u64 << 20) as f64;
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..rounds.max(1) {
        let (t, c) = (Instant::now(), cpu());
        let l = input::load(&path, &LoadOptions::default()).expect("a readable snapshot");
        let wall = t.elapsed().as_secs_f64();
        let used = cpu() - c;
        let events: usize = match &l.content {
            Content::Snapshot(s) => s.traces().iter().map(|t| t.len()).sum(),
            _ => 0,
        };
        drop(l);
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
