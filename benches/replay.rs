//! Replay throughput in events per second (issue 8 aims at 5 M/s): a
//! synthetic trace of a million events over a thousand segments, and the
//! longest real trace when ../shared/real is present.
//!
//!     cargo bench --bench replay

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fragscope::model::*;
use std::hint::black_box;

const MIB: u64 = 1 << 20;

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

fn ev(action: Action, addr: u64, size: u64, t: i64) -> TraceEvent {
    TraceEvent::new(action, addr, size, StreamIdx::DEFAULT, StackId::EMPTY).with_time_us(Some(t))
}

/// `segs` 20 MiB segments; each round allocates five 4 MiB tensors in one
/// segment and frees them in a scrambled order (15 events per round). The
/// final state is every segment empty.
fn synthetic(segs: u64, rounds: u64) -> Snapshot {
    let base = 0x7f00_0000_0000u64;
    let mut trace = Vec::with_capacity((rounds * 15) as usize);
    let mut t = 1_700_000_000_000_000i64;
    for r in 0..rounds {
        let sa = base + (r * 7919 % segs) * 32 * MIB;
        for k in 0..5 {
            trace.push(ev(Action::Alloc, sa + k * 4 * MIB, 4 * MIB, t));
            t += 3;
        }
        for k in [3, 0, 4, 1, 2] {
            trace.push(ev(Action::FreeRequested, sa + k * 4 * MIB, 4 * MIB, t));
            trace.push(ev(Action::FreeCompleted, sa + k * 4 * MIB, 4 * MIB, t));
            t += 3;
        }
    }
    let segments = (0..segs)
        .map(|i| {
            let a = base + i * 32 * MIB;
            Segment {
                device: 0,
                address: a,
                total_size: 20 * MIB,
                allocated_size: Some(0),
                active_size: Some(0),
                requested_size: Some(0),
                stream: 0,
                segment_type: SegmentType::Large,
                pool_id: Some((0, 0)),
                is_expandable: Some(false),
                frames: StackId::EMPTY,
                blocks: vec![Block {
                    address: a,
                    size: 20 * MIB,
                    requested_size: Some(0),
                    state: BlockState::Inactive,
                    frames: StackId::EMPTY,
                }],
            }
        })
        .collect();
    Snapshot {
        segments,
        device_traces: Some(vec![trace]),
        stacks: vec![vec![]],
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    let snap = synthetic(1000, 70_000);
    let n = snap.trace_of(0).len() as u64;
    let check = fragscope::timeline::replay_device(&snap, 0).report;
    assert!(check.final_state_matches && check.clean_events == check.events);
    g.throughput(Throughput::Elements(n));
    g.bench_function("synthetic_1M_events", |b| {
        b.iter(|| black_box(fragscope::timeline::replay_device(black_box(&snap), 0)))
    });
    let real = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/real/decomfl_windows-paths_torch2.9.pickle"
    );
    if std::path::Path::new(real).exists() {
        let (snap, _) =
            fragscope::input::load_snapshot(real, &fragscope::input::LoadOptions::default())
                .unwrap();
        g.throughput(Throughput::Elements(snap.trace_of(0).len() as u64));
        g.bench_function("decomfl_23k_events", |b| {
            b.iter(|| black_box(fragscope::timeline::replay_device(black_box(&snap), 0)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
