//! Bytes per sample of each device's replayed series, and how quickly the
//! series is made and read: prints `device=D samples=N bytes=B
//! bytes_per_sample=X` per device, then `replay_s=S forward_s=S
//! backward_s=S get_s=S` (the best of five: one replay of every device; one
//! pass over every series each way; 10 000 reads by index spread over it).
//!
//!     cargo run --release --example series_size -- snapshot.pickle

use fragscope::input::{self, Content, LoadOptions};
use std::hint::black_box;
use std::time::Instant;

/// The best wall time of five runs of `f`.
fn best<T>(mut f: impl FnMut() -> T) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn main() {
    let path = std::env::args().nth(1).expect("usage: series_size FILE");
    let l = input::load(&path, &LoadOptions::default()).expect("a readable snapshot");
    let Content::Snapshot(snap) = &l.content else {
        panic!("{path}: not a snapshot")
    };
    let r = fragscope::timeline::replay(snap);
    for d in &r {
        let s = &d.samples;
        println!(
            "device={} samples={} bytes={} bytes_per_sample={:.2} compact={}",
            d.device,
            s.len(),
            s.heap_bytes(),
            s.heap_bytes() as f64 / s.len().max(1) as f64,
            s.is_compact()
        );
    }
    let replay_s = best(|| fragscope::timeline::replay(snap));
    let forward_s = best(|| {
        r.iter()
            .map(|d| {
                d.samples
                    .iter()
                    .map(|s| s.active ^ s.lay().free_gaps)
                    .fold(0, u64::wrapping_add)
            })
            .sum::<u64>()
    });
    let backward_s = best(|| {
        r.iter()
            .map(|d| {
                d.samples
                    .iter()
                    .rev()
                    .map(|s| s.active ^ s.lay().free_gaps)
                    .fold(0, u64::wrapping_add)
            })
            .sum::<u64>()
    });
    let get_s = best(|| {
        let mut x = 0u64;
        for d in &r {
            let n = d.samples.len();
            for k in 0..10_000usize {
                x = x.wrapping_add(d.samples.at(k.wrapping_mul(7919) % n).active);
            }
        }
        x
    });
    println!(
        "replay_s={replay_s:.4} forward_s={forward_s:.4} backward_s={backward_s:.4} get_s={get_s:.4}"
    );
}
