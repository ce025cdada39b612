//! Times the replay phase alone (`timeline::replay`, as `stage_times`
//! measures it), a few rounds in a row on one decoded snapshot: prints each
//! round's wall seconds and millions of events a second, then the median;
//! then, once a device, the second replay `fragscope view` makes for the
//! bands (`Replayer::lifetimes`). For work on the replay, where decoding
//! every round costs more than the phase measured.
//!
//!     cargo run --release --example replay_times -- snapshot.pickle [ROUNDS]

use std::time::Instant;

mod common;
use common::cpu;

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    let (path, rounds) = common::file_and_rounds("replay_times");
    let l = common::load(&path);
    let snap = common::snapshot(&l, &path);
    let events: usize = snap.traces().iter().map(|t| t.len()).sum();
    let mut walls = Vec::new();
    for _ in 0..rounds.max(1) {
        let (t, c) = (Instant::now(), cpu());
        let r = fragscope::timeline::replay(snap);
        let wall = t.elapsed().as_secs_f64();
        let used = cpu() - c;
        drop(std::hint::black_box(r));
        println!(
            "replay_s={wall:.4} cpu_s={used:.2} mev_s={:.2} events={events}",
            events as f64 / wall / 1e6
        );
        walls.push(wall);
    }
    walls.sort_by(f64::total_cmp);
    let m = walls[walls.len() / 2];
    println!(
        "median replay_s={m:.4} mev_s={:.2}",
        events as f64 / m / 1e6
    );
    // What `fragscope view` adds to its first page: each device's
    // allocations replayed once more, as bands.
    for d in snap.devices() {
        let t = Instant::now();
        let lives = fragscope::timeline::Replayer::new(snap, d).lifetimes();
        println!(
            "lifetimes_s={:.4} device={d} lifetimes={}",
            t.elapsed().as_secs_f64(),
            std::hint::black_box(lives).len()
        );
    }
}
