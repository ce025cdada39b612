//! Times the decode and replay stages of one file, for `scripts/bench.py`:
//! prints `events=N decode_s=S decode_cpu_s=S replay_s=S replay_cpu_s=S`
//! on one line. CPU seconds (Linux only; 0 elsewhere) hold better than wall
//! time on a machine other work is loading.
//!
//!     cargo run --release --example stage_times -- snapshot.pickle

use fragscope::input::{self, Content, LoadOptions};
use std::time::Instant;

/// User + system CPU seconds of this process so far.
fn cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, in clock ticks (100 per second on
    // every Linux this runs on).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f
        .get(11..13)
        .map(|t| t.iter().filter_map(|x| x.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: stage_times FILE");
    let (t, c) = (Instant::now(), cpu());
    let l = input::load(&path, &LoadOptions::default()).expect("a readable snapshot");
    let (decode, decode_cpu) = (t.elapsed().as_secs_f64(), cpu() - c);
    let Content::Snapshot(snap) = l.content else {
        panic!("{path}: not a snapshot")
    };
    let events: usize = snap.traces().iter().map(|t| t.len()).sum();
    let (t, c) = (Instant::now(), cpu());
    let r = fragscope::replay::replay(&snap);
    let (replay, replay_cpu) = (t.elapsed().as_secs_f64(), cpu() - c);
    std::hint::black_box(&r);
    println!(
        "events={events} decode_s={decode:.4} decode_cpu_s={decode_cpu:.2} replay_s={replay:.4} replay_cpu_s={replay_cpu:.2}"
    );
}
