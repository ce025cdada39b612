//! One benchmark per pipeline stage, with throughput: decode (bytes/s),
//! replay (events/s), metrics (events/s: end-of-file figures, per-sample
//! fragmentation, the report's culprits and moments), sim (events/s: the
//! allocator model under the recorded settings, and `simulate`'s sweep)
//! and render (events/s: the stats table, the timeline CSV, the HTML
//! report), on synthetic snapshots made in memory by `fragscope::synth`,
//! one of each shape of `FRAGSCOPE_BENCH_SHAPES` (default `narrow`,
//! `many-sites` and `fragmented`: many call sites, fragmentation-heavy),
//! and, when ../shared/real is present, on the largest real pickle.
//!
//!     cargo bench --bench stages
//!     FRAGSCOPE_BENCH_EVENTS=1000000 cargo bench --bench stages -- decode
//!     FRAGSCOPE_BENCH_SHAPES=fragmented cargo bench --bench stages -- sim
//!
//! The end-to-end comparison with Python is `scripts/bench.py`.

use clap::ValueEnum;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fragscope::analysis::metrics::DeviceMetrics;
use fragscope::analysis::report::Report;
use fragscope::core::style::Style;
use fragscope::input::{self, Content, Loaded};
use fragscope::model::Snapshot;
use fragscope::pipeline::{attach_what_if, build_report};
use fragscope::synth::{Shape, SynthOptions, generate, write_pickle};
use std::hint::black_box;
use std::time::Duration;

/// Binary units, no color: what a pipe gets.
const STYLE: Style = Style {
    exact_bytes: false,
    color: false,
};

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");

/// The allocator of the binary, so that the figures are the binary's.
#[global_allocator]
static ALLOC: fragscope::core::alloc::HugePages = fragscope::core::alloc::HugePages;

/// (label, pickle bytes) of every input benchmarked.
fn inputs() -> Vec<(String, Vec<u8>)> {
    let events = std::env::var("FRAGSCOPE_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000u64);
    let shapes = std::env::var("FRAGSCOPE_BENCH_SHAPES")
        .unwrap_or_else(|_| "narrow,many-sites,fragmented".into());
    let mut out = Vec::new();
    for name in shapes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let shape = Shape::from_str(name, true)
            .unwrap_or_else(|e| panic!("FRAGSCOPE_BENCH_SHAPES: {name}: {e}"));
        let s = generate(&SynthOptions {
            events,
            seed: 1,
            shape,
            ..Default::default()
        });
        let mut bytes = Vec::new();
        write_pickle(&s, &mut bytes).expect("writing to memory");
        out.push((format!("{name}-{events}"), bytes));
    }
    let largest = std::fs::read_dir(REAL).ok().and_then(|d| {
        d.filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
            .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
    });
    match largest {
        Some(p) => out.push((
            p.file_stem().unwrap().to_string_lossy().into_owned(),
            std::fs::read(&p).expect("a readable real file"),
        )),
        None => eprintln!("{REAL} not found: benchmarking the synthetic snapshot only"),
    }
    out
}

fn load(bytes: &[u8]) -> Snapshot {
    match input::load_bytes(bytes, "bench")
        .expect("a valid pickle")
        .content
    {
        Content::Snapshot(s) => s,
        _ => panic!("not a snapshot"),
    }
}

/// What `fragscope report` builds before rendering: replay, moments,
/// culprits and the what-if model.
fn report_model(snap: &Snapshot, loaded: &Loaded) -> Report {
    let mut r = build_report(&STYLE, snap, loaded, None, None).expect("a report");
    attach_what_if(&mut r, snap);
    r
}

fn events(s: &Snapshot) -> u64 {
    s.traces()
        .iter()
        .map(|t| t.len() as u64)
        .sum::<u64>()
        .max(1)
}

fn stages(c: &mut Criterion) {
    for (label, bytes) in inputs() {
        let loaded = input::load_bytes(&bytes, &label).expect("a valid pickle");
        let snap = load(&bytes);
        let n = events(&snap);
        let replays = fragscope::timeline::replay(&snap);

        let mut g = c.benchmark_group("decode");
        g.sample_size(10).measurement_time(Duration::from_secs(10));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(&label), &bytes, |b, bytes| {
            b.iter(|| load(black_box(bytes)))
        });
        g.finish();

        let mut g = c.benchmark_group("replay");
        g.sample_size(10).measurement_time(Duration::from_secs(10));
        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::from_parameter(&label), &snap, |b, s| {
            b.iter(|| fragscope::timeline::replay(black_box(s)))
        });
        g.finish();

        let mut g = c.benchmark_group("metrics");
        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::from_parameter(&label), &snap, |b, s| {
            b.iter(|| {
                let fs =
                    fragscope::analysis::stats::file_stats(black_box(s), "bench", String::new());
                let per_device: Vec<DeviceMetrics> = replays
                    .iter()
                    .map(|r| {
                        let end = fs
                            .devices
                            .iter()
                            .find(|d| d.device == r.device)
                            .map(|d| d.stats.clone())
                            .unwrap_or_default();
                        DeviceMetrics::from_parts(r.device, &end, &r.samples, 0)
                    })
                    .collect();
                (fs, per_device)
            })
        });
        g.sample_size(10);
        g.bench_with_input(BenchmarkId::new("report", &label), &snap, |b, s| {
            b.iter(|| report_model(black_box(s), &loaded))
        });
        g.finish();
        if let Some(d) = fragscope::sim::trace::default_device(&snap) {
            let (recorded, _, _) = fragscope::sim::run::recorded_config(&snap);
            let input = fragscope::sim::run::prepare(&snap, d, None);
            let sweep = fragscope::sim::default_sweep(&recorded);
            let mut g = c.benchmark_group("sim");
            g.sample_size(10);
            g.throughput(Throughput::Elements(n));
            g.bench_with_input(BenchmarkId::new("recorded", &label), &input, |b, i| {
                b.iter(|| fragscope::sim::run::run(black_box(i), &recorded).expect("a run"))
            });
            g.bench_with_input(BenchmarkId::new("sweep", &label), &input, |b, i| {
                b.iter(|| fragscope::sim::run_configs(black_box(i), &sweep).expect("runs"))
            });
            g.finish();
        }
        let report = report_model(&snap, &loaded);

        let fs = fragscope::analysis::stats::file_stats(&snap, "bench", String::new());
        let mut g = c.benchmark_group("render");
        g.sample_size(10);
        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::new("stats", &label), &snap, |b, s| {
            b.iter(|| {
                let map = fragscope::render::segmap::segment_map(&STYLE, &s.segments, 40);
                fragscope::render::stats::render(&STYLE, black_box(&fs), &map)
            })
        });
        g.bench_with_input(
            BenchmarkId::new("timeline-csv", &label),
            &replays
                .iter()
                .map(|d| (d.device, d.samples.to_vec()))
                .collect::<Vec<_>>(),
            |b, r| {
                b.iter(|| {
                    fragscope::render::timeline::csv(
                        black_box(r).iter().map(|(d, s)| (*d, s.as_slice())),
                    )
                })
            },
        );
        g.bench_with_input(BenchmarkId::new("report-html", &label), &report, |b, r| {
            b.iter(|| fragscope::render::html::html(&STYLE, black_box(r)).expect("an HTML report"))
        });
        g.finish();
    }
}

criterion_group!(benches, stages);
criterion_main!(benches);
