//! Times the allocator model's runs alone: each configuration of
//! `simulate`'s default sweep, one after another on one thread, on one
//! decoded snapshot's busiest device, a few rounds; prints each
//! configuration's median wall seconds and nanoseconds per request, then
//! the sum, then the runs `report` makes (shared as it shares them),
//! and what reading the requests costs before them. For work on the model, where decoding and replaying every
//! round cost more than the runs measured.
//!
//!     cargo run --release --example sim_times -- snapshot.pickle [ROUNDS]

use fragscope::sim::{self, SimConfig};
use std::time::Instant;

mod common;

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    let (path, rounds) = common::file_and_rounds("sim_times");
    let l = common::load(&path);
    let snap = common::snapshot(&l, &path);
    let device = sim::trace::simulable_devices(snap)
        .into_iter()
        .max_by_key(|&d| snap.trace_of(d).len())
        .expect("a device the model can run");
    let t = Instant::now();
    let start = sim::start_state(snap, device);
    let start_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let input = sim::run::prepare_from(snap, device, None, start);
    println!(
        "start_state_s={start_s:.4} prepare_s={:.4}",
        t.elapsed().as_secs_f64()
    );
    let configs: Vec<SimConfig> = sim::DEFAULT_SWEEP
        .iter()
        .map(|s| SimConfig::parse(s).expect("built-in configurations parse"))
        .collect();
    let n = input.requests.len().max(1) as f64;
    let mut total = 0.0;
    for c in &configs {
        let mut walls: Vec<f64> = (0..rounds.max(1))
            .map(|_| {
                let t = Instant::now();
                let r = sim::run::run(&input, c).expect("a run");
                let w = t.elapsed().as_secs_f64();
                std::hint::black_box(r);
                w
            })
            .collect();
        walls.sort_by(f64::total_cmp);
        let m = walls[walls.len() / 2];
        total += m;
        println!(
            "{:<28} run_s={m:.4} ns_per_request={:.0}",
            c.label(),
            m * 1e9 / n
        );
    }
    println!(
        "device {device}: {} requests, {} configurations, sum of medians {total:.4} s",
        input.requests.len(),
        configs.len()
    );
    // The sweep as `simulate` makes it: runs shared as `run_configs`
    // shares them (see `sim::plan`).
    let t = Instant::now();
    let runs = sim::run_configs(&input, &configs).expect("runs");
    println!(
        "simulate's sweep ({} configurations, shared): {:.4} s; the recorded run's split probe: {}",
        runs.len(),
        t.elapsed().as_secs_f64(),
        match runs[0].split_probe {
            u64::MAX => "a cudaMalloc failed".to_string(),
            p => format!("{p} B"),
        }
    );
    // What `report` runs: the recorded settings and its what-if
    // configurations, runs shared as `run_configs` shares them.
    let what_if = fragscope::pipeline::what_if_configs(snap);
    let t = Instant::now();
    let runs = sim::run_configs(&input, &what_if).expect("runs");
    println!(
        "report's runs ({} configurations): {:.4} s",
        runs.len(),
        t.elapsed().as_secs_f64()
    );
}
