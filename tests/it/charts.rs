//! Charts and reports: golden files for the SVG, HTML and Markdown structure
//! (rewrite them with `FRAGSCOPE_BLESS=1`), rasterization of every chart with
//! resvg so an SVG that does not render fails, and checks on real snapshots
//! (skipped with a note when `../shared/real` is absent).
//!
//! `FRAGSCOPE_PNG_DIR=dir` additionally writes every rasterized chart there
//! as PNG, for looking at them.

use crate::golden;
use fragscope::analysis::report::{self, DeviceCulprits, DeviceInput, Report};
use fragscope::analysis::stats::StateStats;
use fragscope::core::style::Style;
use fragscope::model::*;
use fragscope::pipeline::{attach_what_if, device_culprits};
use fragscope::render::charts::{self, Kind};
use fragscope::render::svg::Svg;
use fragscope::render::svg::segmap::{SegmentMapChart, layout, segmap_svg};
use fragscope::render::{html, markdown};
use fragscope::timeline::{
    DeviceReplay, KeyMoment, LayoutFigures, MomentState, ReplayReport, Sample,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");
const MIB: u64 = 1 << 20;
const T0: i64 = 1_700_000_000_000_000;

fn fontdb_options() -> resvg::usvg::Options<'static> {
    static DB: std::sync::OnceLock<std::sync::Arc<resvg::usvg::fontdb::Database>> =
        std::sync::OnceLock::new();
    let db = DB.get_or_init(|| {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        // fontdb maps sans-serif to Arial, which most Linux machines lack.
        let family = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(n, _)| n.clone()))
            .filter(|n| n.contains("Sans") && !n.contains("Mono"))
            .min()
            .or_else(|| {
                db.faces()
                    .next()
                    .and_then(|f| f.families.first().map(|x| x.0.clone()))
            });
        if let Some(f) = family {
            db.set_sans_serif_family(f);
        }
        std::sync::Arc::new(db)
    });
    resvg::usvg::Options {
        fontdb: db.clone(),
        ..Default::default()
    }
}

/// Parses and rasterizes an SVG; fails when it does not parse, renders
/// nothing, or (when the machine has fonts) renders no text.
fn rasterize(name: &str, svg: &str) {
    assert!(
        svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{name}: not one SVG element"
    );
    let mut reader = quick_xml::Reader::from_str(svg);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("{name}: not well-formed XML: {e}"),
        }
    }
    let opt = fontdb_options();
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .unwrap_or_else(|e| panic!("{name}: resvg cannot parse it: {e}"));
    let size = tree.size().to_int_size();
    assert!(
        size.width() >= 200 && size.height() >= 40,
        "{name}: {size:?}"
    );
    // Half scale keeps the debug-build rasterizer quick; full scale when
    // the PNGs are wanted for looking at.
    let scale = if std::env::var_os("FRAGSCOPE_PNG_DIR").is_some() {
        1.0
    } else {
        0.5
    };
    let mut pixmap = resvg::tiny_skia::Pixmap::new(
        (size.width() as f32 * scale).ceil() as u32,
        (size.height() as f32 * scale).ceil() as u32,
    )
    .unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    let px = pixmap.pixels();
    let inked = px
        .iter()
        .filter(|p| p.alpha() > 0 && (p.red() < 200 || p.green() < 200 || p.blue() < 200))
        .count();
    assert!(
        inked * 200 > px.len(),
        "{name}: almost nothing drawn ({inked} of {} pixels)",
        px.len()
    );
    let has_fonts = !opt.fontdb.is_empty();
    if has_fonts {
        fn count_text(g: &resvg::usvg::Group) -> usize {
            g.children()
                .iter()
                .map(|n| match n {
                    resvg::usvg::Node::Text(_) => 1,
                    resvg::usvg::Node::Group(g) => count_text(g),
                    _ => 0,
                })
                .sum()
        }
        assert!(count_text(tree.root()) > 0, "{name}: no text rendered");
    }
    if let Some(dir) = std::env::var_os("FRAGSCOPE_PNG_DIR") {
        let p = PathBuf::from(dir).join(format!("{name}.png"));
        pixmap.save_png(p).unwrap();
    }
}

// ---------------------------------------------------------------------------
// A small hand-made snapshot: two call sites, four segments, an OOM.

struct Fixture {
    snap: Snapshot,
    inputs: Vec<DeviceInput>,
    culprits: Vec<DeviceCulprits>,
}

fn segment(device: i64, address: u64, ty: SegmentType, blocks: Vec<Block>) -> Segment {
    Segment {
        device,
        address,
        total_size: blocks.iter().map(|b| b.size).sum(),
        allocated_size: None,
        active_size: None,
        requested_size: None,
        stream: 0,
        segment_type: ty,
        pool_id: Some((0, 0)),
        is_expandable: Some(false),
        frames: StackId::EMPTY,
        blocks,
    }
}

fn blocks(start: u64, spec: &[(u64, u64, BlockState, StackId)]) -> Vec<Block> {
    let mut a = start;
    spec.iter()
        .map(|(size, req, state, frames)| {
            let b = Block {
                address: a,
                size: *size,
                requested_size: Some(*req),
                state: *state,
                frames: *frames,
            };
            a += size;
            b
        })
        .collect()
}

fn event(action: Action, addr: u64, size: u64, i: usize) -> TraceEvent {
    TraceEvent::new(action, addr, size, StreamIdx::DEFAULT, StackId::EMPTY)
        .with_time_us(Some(T0 + i as i64 * 1500))
}

fn sample_of(segs: &[Segment], event: Option<u32>, time_us: Option<i64>) -> Sample {
    let s = StateStats::of(segs);
    Sample {
        event,
        time_us,
        allocated: s.allocated_bytes,
        active: s.active_bytes,
        reserved: Some(s.reserved_bytes),
        external_free: Some(s.external_free_bytes),
        layout: Some(LayoutFigures {
            internal_free: s.internal_free_bytes,
            pending_free: s.pending_free_bytes,
            largest_free_gap: s.largest_free_block_bytes,
            free_gaps: s.free_blocks,
            fragmentation: s.fragmentation,
            largest_small_request: 0,
            largest_large_request: s.largest_free_block_bytes,
        }),
    }
}

fn fixture() -> Fixture {
    let mut i = Interner::new();
    let user = i.string("/home/me/proj/model.py").unwrap();
    let train = i.string("/home/me/proj/train.py").unwrap();
    let lin = i
        .string("/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py")
        .unwrap();
    let fwd = i.string("forward").unwrap();
    let step = i.string("train_step").unwrap();
    let f_lin = i.frame(Frame {
        filename: lin,
        line: 125,
        name: fwd,
    });
    let f_model = i.frame(Frame {
        filename: user,
        line: 88,
        name: fwd,
    });
    let f_train = i.frame(Frame {
        filename: train,
        line: 41,
        name: step,
    });
    let s_act = i.stack(vec![f_lin, f_model, f_train]);
    let s_opt = i.stack(vec![f_train]);
    let mut snap = Snapshot::default();
    i.finish(&mut snap);
    use BlockState::*;
    let e = StackId::EMPTY;
    let base = 0x7f00_0000_0000u64;
    let segs = vec![
        segment(
            0,
            base,
            SegmentType::Large,
            blocks(
                base,
                &[
                    (20 * MIB, 20 * MIB - 3000, ActiveAllocated, s_act),
                    (8 * MIB, 0, Inactive, e),
                    (16 * MIB, 15 * MIB, ActiveAllocated, s_opt),
                    (12 * MIB, 0, Inactive, e),
                    (8 * MIB, 8 * MIB, ActivePendingFree, s_act),
                ],
            ),
        ),
        segment(
            0,
            base + (64 << 20),
            SegmentType::Large,
            blocks(
                base + (64 << 20),
                &[
                    (30 * MIB, 30 * MIB, ActiveAllocated, s_act),
                    (34 * MIB, 0, Inactive, e),
                ],
            ),
        ),
        segment(
            0,
            base + (128 << 20),
            SegmentType::Large,
            blocks(
                base + (128 << 20),
                &[
                    (2 * MIB, 2 * MIB, ActiveAllocated, s_opt),
                    (40 * MIB, 0, Inactive, e),
                    (20 * MIB, 20 * MIB - 512, ActiveAllocated, s_act),
                ],
            ),
        ),
        segment(
            0,
            base + (192 << 20),
            SegmentType::Small,
            blocks(
                base + (192 << 20),
                &[
                    (512, 100, ActiveAllocated, s_opt),
                    (1024, 0, Inactive, e),
                    (512 * 1024, 500 * 1024, ActiveAllocated, s_act),
                    (2 * MIB - 512 * 1024 - 1536, 0, Inactive, e),
                ],
            ),
        ),
        segment(
            1,
            0x7e00_0000_0000,
            SegmentType::Large,
            blocks(
                0x7e00_0000_0000,
                &[(20 * MIB, 12 * MIB, ActiveAllocated, s_opt)],
            ),
        ),
    ];
    let dev0: Vec<Segment> = segs.iter().filter(|s| s.device == 0).cloned().collect();
    let dev1: Vec<Segment> = segs.iter().filter(|s| s.device == 1).cloned().collect();

    // 120 events; the OOM is event 90. The series rises in three steps of
    // reserved memory while allocations come and go.
    let n = 120usize;
    let oom_at = 90usize;
    let mut trace = Vec::new();
    for k in 0..n {
        if k == oom_at {
            let mut ev = event(Action::Oom, 0, 96 * MIB, k);
            ev.set_extras(Some(ExtrasIdx(0)));
            trace.push(ev);
        } else if k % 2 == 0 {
            trace.push(event(Action::Alloc, base + k as u64 * 4096, MIB, k));
        } else {
            trace.push(event(Action::FreeCompleted, base + k as u64 * 4096, MIB, k));
        }
    }
    let end = sample_of(&dev0, Some(n as u32 - 1), trace[n - 1].time_us());
    let mut samples = vec![Sample {
        event: None,
        time_us: None,
        reserved: Some(64 * MIB),
        allocated: 20 * MIB,
        active: 20 * MIB,
        external_free: Some(44 * MIB),
        layout: Some(LayoutFigures {
            largest_free_gap: 44 * MIB,
            largest_large_request: 44 * MIB,
            free_gaps: 1,
            ..Default::default()
        }),
    }];
    for (k, ev) in trace.iter().enumerate() {
        let reserved =
            (64 + 64 * (k as u64 * 3 / n as u64)) * MIB + if k > 80 { 2 * MIB } else { 0 };
        let wave = ((k * 37) % 23) as u64;
        let allocated = (reserved / MIB / 2 + wave) * MIB;
        let gaps = 1 + (k as u64 % 7);
        let free = reserved - allocated;
        let largest = free / gaps.max(1);
        samples.push(Sample {
            event: Some(k as u32),
            time_us: ev.time_us(),
            allocated,
            active: allocated,
            reserved: Some(reserved),
            external_free: Some(free),
            layout: Some(LayoutFigures {
                largest_free_gap: largest,
                largest_large_request: largest,
                free_gaps: gaps,
                fragmentation: 1.0 - largest as f64 / free as f64,
                ..Default::default()
            }),
        });
    }
    *samples.last_mut().unwrap() = end;
    // The moment the segment map shows agrees with the series.
    samples[oom_at + 1] = sample_of(&dev0, Some(oom_at as u32), trace[oom_at].time_us());
    snap.segments = segs;
    snap.device_traces = Some(vec![trace, Vec::new()]);
    snap.event_extras = vec![EventExtras {
        device_free: Some(50 * MIB),
        ..EventExtras::NONE
    }];
    snap.allocator_settings = Some(AllocatorSettings {
        entries: vec![
            (
                "PYTORCH_CUDA_ALLOC_CONF".into(),
                Setting::Str("max_split_size_mb:128".into()),
            ),
            ("max_split_size".into(), Setting::Int(128 << 20)),
            ("expandable_segments".into(), Setting::Bool(false)),
            ("garbage_collection_threshold".into(), Setting::Float(0.0)),
        ],
    });
    let key = |label: &str, at: Option<usize>, s: &[Sample]| KeyMoment {
        label: label.into(),
        at,
        sample: s[at.map(|a| a + 1).unwrap_or(0)],
        op: None,
    };
    // No block of this series is ever pending free: allocated including
    // pending frees peaks with allocated (first sample on ties).
    let peak = samples.iter().fold(
        &samples[0],
        |b, s| if s.allocated > b.allocated { s } else { b },
    );
    let (peak_alloc, peak_alloc_at) = (peak.allocated, peak.event.map(|e| e as usize));
    let dev0_key_moments = vec![
        key("start", None, &samples),
        key("peak reserved", Some(81), &samples),
        key("out of memory #1", Some(oom_at), &samples),
        key("end", Some(n - 1), &samples),
    ];
    let dev0_input = DeviceInput::new(
        DeviceReplay {
            device: 0,
            samples: samples.into(),
            report: ReplayReport {
                events: n,
                clean_events: n - 2,
                anomalies: vec![fragscope::timeline::Anomaly {
                    kind: fragscope::timeline::AnomalyKind::FreeOfUnknownAddress,
                    count: 2,
                    first_event: Some(1),
                    example: "free_completed of 0x7f0000001000 with no live block".into(),
                }],
                final_state_matches: true,
                peak_allocated_incl_pending: peak_alloc,
                peak_allocated_incl_pending_at: peak_alloc_at,
                ..Default::default()
            },
        },
        dev0_key_moments,
        MomentState {
            device: 0,
            at: Some(oom_at),
            time_us: Some(T0 + oom_at as i64 * 1500),
            segments: dev0.clone(),
            origins: HashMap::new(),
            failed_request: Some(96 * MIB),
        },
        "first out-of-memory event".into(),
    );
    // No trace on device 1: the one moment is the recorded state, as the
    // replay and report::default_moment give it.
    let dev1_sample = sample_of(&dev1, None, None);
    let dev1_input = DeviceInput::new(
        DeviceReplay {
            device: 1,
            samples: vec![dev1_sample].into(),
            report: ReplayReport {
                peak_allocated_incl_pending: dev1_sample.allocated,
                ..Default::default()
            },
        },
        vec![KeyMoment {
            label: fragscope::timeline::RECORDED_STATE.into(),
            at: None,
            sample: dev1_sample,
            op: None,
        }],
        MomentState {
            device: 1,
            at: None,
            time_us: None,
            segments: dev1.clone(),
            origins: HashMap::new(),
            failed_request: None,
        },
        "no trace recorded".into(),
    );
    let inputs = vec![dev0_input, dev1_input];
    let culprits = device_culprits(&snap, &inputs);
    Fixture {
        snap,
        inputs,
        culprits,
    }
}

fn fixture_report() -> Report {
    let f = fixture();
    report::build(
        &Style::default(),
        &f.snap,
        "/home/someone/private/runs/synthetic.pickle",
        "pickle protocol 4, 12.00 KiB",
        f.inputs,
        f.culprits,
    )
}

fn check_no_paths_or_network(name: &str, s: &str) {
    assert!(
        !s.contains("/home/someone"),
        "{name}: absolute input path leaked"
    );
    assert!(
        !s.to_ascii_lowercase().contains("<script"),
        "{name}: script"
    );
    let mut rest = s;
    while let Some(i) = rest.find("http") {
        let tail = &rest[i..];
        assert!(
            tail.starts_with("http://www.w3.org/2000/svg"),
            "{name}: external reference {:?}",
            &tail[..tail.len().min(60)]
        );
        rest = &rest[i + 4..];
    }
}

#[test]
fn every_chart_matches_its_golden_file_and_renders() {
    let r = fixture_report();
    let d0 = &r.devices[0];
    let cases: Vec<(&str, Svg)> = vec![
        ("timeline", charts::timeline(&r, d0).unwrap()),
        ("fragmentation", charts::fragmentation(&r, d0).unwrap()),
        ("segments", charts::segment_map(&r, d0, 36).unwrap()),
        ("gaps", charts::gaps(&r, d0).unwrap()),
        ("sites", charts::sites(&r, d0).unwrap()),
        ("summary", charts::summary(&Style::default(), &r).unwrap()),
        (
            "segments-all-devices",
            charts::plot(Kind::Segments, &r, 36).unwrap(),
        ),
    ];
    for (name, svg) in &cases {
        check_no_paths_or_network(name, &svg.body);
        assert!(
            svg.body.contains(&format!(
                "width=\"{}\" height=\"{}\"",
                svg.width, svg.height
            )),
            "{name}: declared size differs from the reported one"
        );
        rasterize(name, &svg.body);
        golden::check(&format!("{name}.svg"), &svg.body);
    }
}

#[test]
fn charts_carry_titles_units_legends_and_marks() {
    let r = fixture_report();
    let d0 = &r.devices[0];
    let t = charts::timeline(&r, d0).unwrap().body;
    assert!(t.contains("Memory over time · synthetic.pickle · device 0"));
    assert!(t.contains(">\nMiB\n</text>"), "binary unit on the y axis");
    assert!(t.contains("OOM: 96.00 MiB requested, largest free gap"));
    assert!(t.contains("peak reserved 194.00 MiB"));
    assert!(t.contains("seconds since the first trace event"));
    let g = charts::gaps(&r, d0).unwrap().body;
    assert!(g.contains("failing request 96.00 MiB"));
    assert!(g.contains("largest 40.00 MiB"));
    let m = charts::segment_map(&r, d0, 36).unwrap().body;
    assert!(m.contains(">\n#1\n</text>"), "the top culprit is labelled");
    assert!(m.contains("the failed request, 96.00 MiB at the same scale"));
    let s = charts::sites(&r, d0).unwrap().body;
    assert!(s.contains("model.py:88 (forward)"));
}

#[test]
fn html_report_is_self_contained_and_matches_golden() {
    let r = fixture_report();
    let h = html::html(&Style::default(), &r).unwrap();
    check_no_paths_or_network("report.html", &h);
    assert!(h.starts_with("<!DOCTYPE html>"));
    for section in ["verdict", "device-0", "device-1", "settings", "quality"] {
        assert!(
            h.contains(&format!("id=\"{section}\"")),
            "section {section}"
        );
    }
    // Five charts per device, each inline and renderable.
    let mut n = 0;
    let mut rest = h.as_str();
    while let Some(i) = rest.find("<svg role=\"img\"") {
        let end = rest[i..].find("</svg></figure>").expect("closed svg") + i + 6;
        rasterize(&format!("report-inline-{n}"), &rest[i..end]);
        n += 1;
        rest = &rest[end..];
    }
    assert_eq!(n, 10);
    assert!(h.contains("<details><summary>3 frames</summary>"));
    assert!(h.contains("max_split_size_mb:128"));
    assert!(h.contains("FreeOfUnknownAddress"));
    assert!(h.contains("Out of memory #1 at event 90, t=0.135 s"));
    golden::check("report.html", &h);
}

#[test]
fn markdown_report_matches_golden() {
    let r = fixture_report();
    let md = markdown::markdown(&Style::default(), &r, Some("summary.svg"));
    check_no_paths_or_network("report.md", &md);
    assert!(md.contains("![memory summary of synthetic.pickle](summary.svg)"));
    assert!(md.contains("| 0 | event 90, t=0.135 s | 96.00 MiB |"));
    golden::check("report.md", &md);
}

#[test]
fn output_is_deterministic() {
    let a = html::html(&Style::default(), &fixture_report()).unwrap();
    let b = html::html(&Style::default(), &fixture_report()).unwrap();
    assert_eq!(a, b);
    let a = charts::summary(&Style::default(), &fixture_report()).unwrap();
    let b = charts::summary(&Style::default(), &fixture_report()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn long_series_are_downsampled_without_losing_the_peak() {
    let mut f = fixture();
    let n = 50_000u32;
    let samples: Vec<Sample> = (0..n)
        .map(|i| Sample {
            event: Some(i),
            time_us: Some(T0 + i as i64),
            reserved: Some((1 << 30) + (i as u64 % 1000) * MIB),
            allocated: 512 * MIB + if i == 31_337 { 700 * MIB } else { 0 },
            external_free: Some(0),
            layout: Some(LayoutFigures::default()),
            ..Default::default()
        })
        .collect();
    f.inputs[0].replay.samples = samples.into();
    let r = report::build(
        &Style::default(),
        &f.snap,
        "x.pickle",
        "test",
        f.inputs,
        f.culprits,
    );
    assert!(r.devices[0].samples.len() <= report::REPORT_POINTS + 1);
    assert_eq!(
        r.devices[0].replayed().unwrap().peak_allocated.allocated,
        1212 * MIB
    );
    assert_eq!(
        r.devices[0].samples.iter().map(|s| s.allocated).max(),
        Some(1212 * MIB)
    );
    let t = charts::timeline(&r, &r.devices[0]).unwrap();
    assert!(t.body.len() < 200_000, "{} bytes", t.body.len());
}

/// The marks of a downsampled chart name the exact moments of the whole
/// series, as the tables do: a bucket's maximum is dated at the bucket's
/// last event, and the first bucket loses the first event's time, so marks
/// taken from the downsampled points would read a bucket late and the time
/// axis would start late.
#[test]
fn chart_marks_name_the_exact_moments_of_a_long_series() {
    let mut f = fixture();
    let n = 50_000u32;
    let first = f.snap.device_traces.as_ref().unwrap()[0][0]
        .time_us()
        .unwrap();
    let start = Sample {
        reserved: Some(1 << 30),
        external_free: Some(0),
        layout: Some(LayoutFigures::default()),
        ..Default::default()
    };
    let samples: Vec<Sample> = std::iter::once(start)
        .chain((0..n).map(|i| Sample {
            event: Some(i),
            time_us: Some(first + i as i64 * 1000),
            reserved: Some((1 << 30) + if i == 12_345 { 64 * MIB } else { 0 }),
            allocated: 512 * MIB + if i == 31_337 { 700 * MIB } else { 0 },
            external_free: Some(0),
            layout: Some(LayoutFigures {
                fragmentation: if i == 20_001 { 0.9 } else { 0.1 },
                ..Default::default()
            }),
            ..Default::default()
        }))
        .collect();
    f.inputs[0].replay.samples = samples.into();
    let r = report::build(
        &Style::default(),
        &f.snap,
        "x.pickle",
        "test",
        f.inputs,
        f.culprits,
    );
    let d = &r.devices[0];
    let x = d.replayed().unwrap();
    assert!(d.samples.len() <= report::REPORT_POINTS + 1);
    assert_eq!(x.peak_allocated.event, Some(31_337));
    assert_eq!(x.peak_reserved.event, Some(12_345));
    assert_eq!(x.highest_fragmentation.event, Some(20_001));
    // What the downsampled points alone would say.
    let bucket_peak = d.samples.iter().max_by_key(|s| s.allocated).unwrap();
    assert_ne!(
        bucket_peak.event,
        Some(31_337),
        "the test needs a late date"
    );
    let t = charts::timeline(&r, d).unwrap().body;
    assert!(
        t.contains("peak allocated 1.18 GiB at t=31.337 s (event 31337)"),
        "{}",
        legend_lines(&t)
    );
    assert!(
        t.contains("peak reserved 1.06 GiB at t=12.345 s (event 12345)"),
        "{}",
        legend_lines(&t)
    );
    let g = charts::fragmentation(&r, d).unwrap().body;
    assert!(
        g.contains("highest 90.0% at t=20.001 s (event 20001)"),
        "{}",
        legend_lines(&g)
    );
}

fn legend_lines(svg: &str) -> String {
    svg.lines()
        .filter(|l| l.contains(" at "))
        .collect::<Vec<_>>()
        .join(" | ")
}

// ---------------------------------------------------------------------------
// Real snapshots.

fn real(name: &str) -> Option<Snapshot> {
    let p = Path::new(REAL).join(name);
    if !p.exists() {
        eprintln!("note: {} absent; skipping", p.display());
        return None;
    }
    Some(
        fragscope::input::load_snapshot(p.to_str().unwrap(), &Default::default())
            .unwrap()
            .0,
    )
}

/// The recorded final state as a one-sample series (what the replay yields
/// for a device without trace events).
fn final_state_input(snap: &Snapshot, device: i64) -> DeviceInput {
    let segs: Vec<Segment> = snap.segments_of(device).cloned().collect();
    let sample = sample_of(&segs, None, None);
    DeviceInput::new(
        DeviceReplay {
            device,
            samples: vec![sample].into(),
            report: ReplayReport::default(),
        },
        vec![KeyMoment {
            label: fragscope::timeline::RECORDED_STATE.into(),
            at: None,
            sample,
            op: None,
        }],
        MomentState {
            device,
            at: None,
            time_us: None,
            segments: segs,
            origins: HashMap::new(),
            failed_request: None,
        },
        "no trace recorded".into(),
    )
}

#[test]
fn thousands_of_segments_stay_legible() {
    let Some(snap) = real("kkaitlyn_cs336_1457-segments_empty-trace.pickle") else {
        return;
    };
    let segs: Vec<Segment> = snap.segments_of(0).cloned().collect();
    assert_eq!(segs.len(), 1457);
    let l = layout(&segs, 960, 36);
    assert!(l.rows <= 36, "{} rows", l.rows);
    assert_eq!(l.drawn.len() + l.aggregated.len(), 1457);
    let drawn: u64 = l.pieces.iter().map(|p| p.hi - p.lo).sum();
    let total: u64 = segs.iter().map(|s| s.total_size).sum();
    assert_eq!(drawn + l.aggregated_bytes.total(), total);
    eprintln!(
        "kkaitlyn: {} segments drawn, {} aggregated, {} rows, {:.2} MiB per pixel",
        l.drawn.len(),
        l.aggregated.len(),
        l.rows,
        l.bytes_per_px / MIB as f64
    );
    let svg = segmap_svg(&SegmentMapChart::new("kkaitlyn final state", &segs)).unwrap();
    assert!(svg.body.len() < 600_000, "{} bytes", svg.body.len());
    rasterize("real-kkaitlyn-segments", &svg.body);

    let inputs = vec![final_state_input(&snap, 0)];
    let culprits = device_culprits(&snap, &inputs);
    let r = report::build(
        &Style::default(),
        &snap,
        "kkaitlyn.pickle",
        "pickle",
        inputs,
        culprits,
    );
    let h = html::html(&Style::default(), &r).unwrap();
    eprintln!("kkaitlyn: final-state HTML report {} bytes", h.len());
    assert!(h.len() < 1_500_000, "{} bytes", h.len());
}

#[test]
fn real_final_states_render() {
    for (name, device) in [
        (
            "constructor-sun_code-location_oom_expandable_3dev.pickle",
            1,
        ),
        ("octreenca_inference_24GB_few-segments.pickle", 0),
        ("magma27_cs336_torch2.11_user_metadata.pickle", 0),
        ("muduard_layoutediting_diffusers_6.6k-blocks.pickle", 0),
        ("hitsbe_empty-snapshot.pickle", 0),
    ] {
        let Some(snap) = real(name) else {
            return;
        };
        let inputs: Vec<DeviceInput> = snap
            .devices()
            .into_iter()
            .filter(|d| *d == device)
            .map(|d| final_state_input(&snap, d))
            .collect();
        let culprits = device_culprits(&snap, &inputs);
        let r = report::build(&Style::default(), &snap, name, "pickle", inputs, culprits);
        for kind in [Kind::Segments, Kind::Gaps, Kind::Sites] {
            let svg = charts::plot(kind, &r, 36).unwrap();
            rasterize(&format!("real-{name}-{kind:?}"), &svg.body);
        }
        rasterize(
            &format!("real-{name}-summary"),
            &charts::summary(&Style::default(), &r).unwrap().body,
        );
    }
}

/// `fragscope culprits --at MOMENT --device D FILE`: its summary line.
fn culprits_summary_line(file: &Path, device: i64, at: Option<usize>) -> String {
    let at = at.map_or("start".to_string(), |a| a.to_string());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .args(["culprits", "--at", &at, "--device", &device.to_string()])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().nth(1).unwrap_or_default().to_string()
}

/// The whole pipeline on real files, through the replay: the report's
/// culprit sentences are `fragscope culprits`'s at the same moment, its top
/// call site is the first bar of the call-site chart, and the what-if model
/// answers for the OOM device.
#[test]
fn real_reports_through_the_replay() {
    for name in [
        "constructor-sun_code-location_oom_expandable_3dev.pickle",
        "octreenca_inference_24GB_few-segments.pickle",
        "magma27_cs336_torch2.11_user_metadata.pickle",
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
        "kkaitlyn_cs336_1457-segments_empty-trace.pickle",
    ] {
        let Some(snap) = real(name) else {
            return;
        };
        let inputs = report::gather(&Style::default(), &snap, None, None).unwrap();
        let culprits = device_culprits(&snap, &inputs);
        let mut r = report::build(&Style::default(), &snap, name, "pickle", inputs, culprits);
        attach_what_if(&mut r, &snap);
        let h = html::html(&Style::default(), &r).unwrap();
        check_no_paths_or_network(name, &h);
        eprintln!("{name}: HTML {} bytes", h.len());
        assert!(h.len() < 3_000_000);
        rasterize(
            &format!("replayed-{name}-summary"),
            &charts::summary(&Style::default(), &r).unwrap().body,
        );
        let path = Path::new(REAL).join(name);
        let verdict = fragscope::render::verdict::lines(&Style::default(), &r);
        for d in &r.devices {
            let sentence = fragscope::render::culprits::summary(
                &Style::default(),
                d.replayed().unwrap().culprit_summary.as_ref().unwrap(),
            );
            assert_eq!(
                culprits_summary_line(&path, d.device, d.moment_at),
                sentence,
                "{name} device {}",
                d.device
            );
            if r.main_device().map(|m| m.device) == Some(d.device) {
                assert!(
                    verdict.iter().any(|v| v.ends_with(&sentence)),
                    "{name}: the verdict carries the main device's culprit sentence"
                );
            }
            // The top row (the first bar of the call-site chart) is the
            // group the sentence names.
            if let Some(top) = r.culprits_of(d.device).next()
                && top.stranded_bytes > 0
            {
                let named = if top.site == "(no stack recorded)" {
                    "with no recorded stack"
                } else {
                    top.site.as_str()
                };
                assert!(
                    sentence.contains(named),
                    "{name}: {sentence} / {}",
                    top.site
                );
            }
        }
        if name.starts_with("constructor-sun") {
            let d1 = r.devices.iter().find(|d| d.device == 1).unwrap();
            assert_eq!(d1.ooms.len(), 1);
            assert_eq!(d1.ooms[0].mark.request, 5_308_694_528);
            assert_eq!(d1.replayed().unwrap().failed_request, Some(5_308_694_528));
            // The recording ran with expandable segments: the model says so,
            // with its fidelity, and the chart is in the page.
            let w = r.what_if_of(1).unwrap();
            assert_eq!(w.recorded_ooms.len(), 1);
            assert!(
                verdict.iter().any(|v| v
                    .starts_with("What-if model, device 1: expandable_segments was already on")),
                "{verdict:?}"
            );
            assert!(h.contains("Model fidelity under the recorded settings"));
            assert!(h.contains("Reserved over the trace per setting"));
            assert!(
                fragscope::render::culprits::summary(
                    &Style::default(),
                    d1.replayed().unwrap().culprit_summary.as_ref().unwrap()
                )
                .contains("models.py:194 (update_nodes)")
            );
        }
        if name.starts_with("kkaitlyn") {
            // No trace events: nothing to replay, so no what-if run.
            assert!(r.what_if.is_empty());
        }
    }
}

fn run_cli(args: &[&str]) -> i32 {
    let mut v: Vec<std::ffi::OsString> = vec!["fragscope".into()];
    v.extend(args.iter().map(|a| a.into()));
    fragscope::cli::main_with_args(v)
}

#[test]
fn report_and_plot_commands_write_their_files() {
    let p = Path::new(REAL).join("hitsbe_empty-snapshot.pickle");
    if !p.exists() {
        eprintln!("note: {} absent; skipping", p.display());
        return;
    }
    let input = p.to_str().unwrap();
    let d = tempfile::tempdir().unwrap();
    let out = |n: &str| d.path().join(n).to_string_lossy().into_owned();
    // Nowhere to write, or an unknown extension: exit 2, nothing written.
    assert_eq!(run_cli(&["report", input]), 2);
    assert_eq!(run_cli(&["report", input, "-o", &out("r.pdf")]), 2);
    assert!(!Path::new(&out("r.pdf")).exists());
    // An empty snapshot still yields every form, saying there is nothing.
    assert_eq!(
        run_cli(&[
            "report",
            input,
            "-o",
            &out("r.html"),
            "-o",
            &out("r.svg"),
            "-o",
            &out("r.md")
        ]),
        0
    );
    let h = std::fs::read_to_string(out("r.html")).unwrap();
    assert!(h.contains("The snapshot holds no segments and no trace events"));
    assert!(h.contains("Memory report: hitsbe_empty-snapshot.pickle"));
    let md = std::fs::read_to_string(out("r.md")).unwrap();
    assert!(md.contains("![memory summary of hitsbe_empty-snapshot.pickle](r.svg)"));
    rasterize(
        "cli-empty-summary",
        &std::fs::read_to_string(out("r.svg")).unwrap(),
    );
    assert_eq!(run_cli(&["plot", "gaps", input, "-o", &out("g.svg")]), 0);
    let g = std::fs::read_to_string(out("g.svg")).unwrap();
    assert!(g.contains("no device has segments or trace events"));
    // Refuses to overwrite its input (a copy: never risk the shared file).
    let copy = out("copy.pickle");
    std::fs::copy(&p, &copy).unwrap();
    assert_eq!(run_cli(&["plot", "gaps", &copy, "-o", &copy]), 2);
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&p).unwrap());
}

/// A title wider than its chart (a long file name) is drawn smaller until it
/// fits; centred at full size it would lose both ends.
#[test]
fn a_long_title_is_drawn_small_enough_to_fit() {
    let d = tempfile::tempdir().unwrap();
    let name = format!("{}.json", "a_very_long_snapshot_name_".repeat(4));
    let input = d.path().join(&name);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fragmented.json"),
        &input,
    )
    .unwrap();
    let out = d.path().join("t.svg");
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .args(["plot", "timeline"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let svg = std::fs::read_to_string(&out).unwrap();
    // The title's <text> element: its font size, and the chart's width.
    let at = svg.find(&name).expect("the title names the file");
    let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
    let size: f64 = tag
        .split("font-size=\"")
        .nth(1)
        .and_then(|x| x.split('"').next())
        .and_then(|x| x.parse().ok())
        .expect("a font size");
    let title = svg[at..].split('\n').next().unwrap();
    let title = format!("{}{title}", &svg[svg[..at].rfind('\n').unwrap() + 1..at]);
    let width: i32 = svg
        .split("width=\"")
        .nth(1)
        .and_then(|x| x.split('"').next())
        .and_then(|x| x.parse().ok())
        .unwrap();
    assert!(size < 24.0, "{tag}");
    assert!(
        fragscope::render::svg::text_width(title.trim(), size) <= width - 36,
        "{title:?} at {size} in {width}"
    );
}

/// A report gathered by `report::gather` reads each device's series once
/// (moments, peaks, chart points) and reaches its moment and its OOMs in
/// one partial replay of its own start; an input made with
/// `DeviceInput::new` has `build` read the series and replay for the OOMs
/// on its own. Both give the same report, whatever the moment.
#[test]
fn one_read_and_one_partial_replay_give_the_same_report() {
    let fixture = |name: &str| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name);
        fragscope::input::load_snapshot(p.to_str().unwrap(), &Default::default())
            .unwrap()
            .0
    };
    let mut files = vec![
        (
            "expandable_oom_proto5.pickle",
            fixture("expandable_oom_proto5.pickle"),
        ),
        (
            "view_oom_two_devices.pickle",
            fixture("view_oom_two_devices.pickle"),
        ),
        (
            "worked_example_proto2.pickle",
            fixture("worked_example_proto2.pickle"),
        ),
    ];
    let name = "constructor-sun_code-location_oom_expandable_3dev.pickle";
    if let Some(snap) = real(name) {
        files.push((name, snap));
    }
    let st = Style::default();
    let mut with_ooms = 0;
    for (name, snap) in &files {
        for at in [
            None,
            Some(Moment::Start),
            Some(Moment::Event(3)),
            Some(Moment::PeakReserved),
            Some(Moment::End),
        ] {
            let Ok(gathered) = report::gather(&st, snap, None, at) else {
                continue;
            };
            let plain: Vec<DeviceInput> = gathered
                .iter()
                .cloned()
                .map(|i| DeviceInput::new(i.replay, i.key_moments, i.moment, i.moment_label))
                .collect();
            let build = |inputs: Vec<DeviceInput>| {
                let culprits = device_culprits(snap, &inputs);
                report::build(&st, snap, name, "pickle", inputs, culprits)
            };
            let (a, b) = (build(gathered), build(plain));
            with_ooms += a.devices.iter().filter(|d| !d.ooms.is_empty()).count();
            assert_eq!(
                markdown::markdown(&st, &a, None),
                markdown::markdown(&st, &b, None),
                "{name} at {at:?}"
            );
            assert_eq!(
                html::html(&st, &a).unwrap(),
                html::html(&st, &b).unwrap(),
                "{name} at {at:?}"
            );
        }
    }
    eprintln!(
        "{} files, {with_ooms} reports with diagnosed OOMs",
        files.len()
    );
    assert!(with_ooms > 0, "no report diagnosed an OOM");
}
