//! Profiler traces and the memory-timeline export of ../shared/real, with
//! the figures of its README (event counts per device, max Total Allocated /
//! Total Reserved) and the derived ones, which were cross-checked by an
//! independent reading of the same JSON (time-ordered events, paired by
//! address).

use fragscope::core::style::Style;
use fragscope::input::profiler::memtimeline::{ActionCounts, TimelineForm};
use fragscope::input::profiler::{Category, MemoryTimeline, ProfilerTrace};
use fragscope::input::{Content, LoadOptions, load};

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");

fn load_real(name: &str) -> Option<Content> {
    let path = format!("{REAL}/{name}");
    if !std::path::Path::new(&path).exists() {
        eprintln!("note: {path} not found; skipping");
        return None;
    }
    Some(
        load(&path, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .content,
    )
}

fn trace(name: &str) -> Option<ProfilerTrace> {
    match load_real(name)? {
        Content::Profiler(t) => Some(t),
        _ => panic!("{name}: not read as a profiler trace"),
    }
}

/// Expected figures of one device.
#[derive(Debug, PartialEq)]
struct Dev {
    label: &'static str,
    events: u64,
    allocations: u64,
    frees: u64,
    peak_allocated: u64,
    peak_reserved: Option<u64>,
    allocated_before: u64,
    allocated_end: u64,
    reserved_end: Option<u64>,
    peak_external_free: Option<u64>,
    reserved_growths: usize,
    live_at_end: Option<u64>,
    frees_before_trace: u64,
}

fn got(t: &ProfilerTrace) -> Vec<Dev> {
    t.devices
        .iter()
        .map(|d| {
            let s = &d.summary;
            Dev {
                label: Box::leak(d.label.clone().into_boxed_str()),
                events: s.events,
                allocations: s.allocations,
                frees: s.frees,
                peak_allocated: s.peak_allocated.as_ref().unwrap().bytes,
                peak_reserved: s.peak_reserved.as_ref().map(|p| p.bytes),
                allocated_before: s.allocated_before_trace,
                allocated_end: s.allocated_end,
                reserved_end: s.reserved_end,
                peak_external_free: s.peak_external_free.as_ref().map(|p| p.bytes),
                reserved_growths: s.reserved_growth.len(),
                live_at_end: s.live_at_end,
                frees_before_trace: s.frees_before_trace,
            }
        })
        .collect()
}

/// A CPU device of a current-schema trace: balanced, nothing cached.
fn cpu(events: u64, peak: u64) -> Dev {
    Dev {
        label: "cpu",
        events,
        allocations: events / 2,
        frees: events / 2,
        peak_allocated: peak,
        peak_reserved: None,
        allocated_before: 0,
        allocated_end: 0,
        reserved_end: None,
        peak_external_free: None,
        reserved_growths: 0,
        live_at_end: Some(0),
        frees_before_trace: 0,
    }
}

fn check(
    name: &str,
    trace_events: u64,
    memory_events: u64,
    want: Vec<Dev>,
) -> Option<ProfilerTrace> {
    let t = trace(name)?;
    assert_eq!(t.trace_events, trace_events, "{name}: traceEvents");
    assert_eq!(t.memory_events, memory_events, "{name}: [memory] events");
    assert_eq!(got(&t), want, "{name}");
    assert!(t.anomalies.is_empty(), "{name}: {:?}", t.anomalies);
    for d in &t.devices {
        let series = fragscope::timeline::trace::trace_series(d);
        assert_eq!(series.len() as u64, d.summary.events + 1);
        // The rebuilt allocation timeline agrees with Total Allocated at
        // every event (Bytes summed in time order from the start figure).
        if d.summary.has_totals {
            for (e, s) in d.events.iter().zip(series.iter().skip(1)) {
                assert_eq!(Some(s.allocated), e.total_allocated);
            }
        }
    }
    Some(t)
}

#[test]
fn hta_v100_ddp_rank1_2022() {
    let _ = check(
        "hta_v100_ddp-rank1_profile-memory_2022.json.gz",
        216092,
        28010,
        vec![
            Dev {
                label: "cuda:1",
                events: 26770,
                allocations: 13385,
                frees: 13385,
                peak_allocated: 6629508096,
                peak_reserved: Some(12782141440),
                allocated_before: 4096614400,
                allocated_end: 4096614400,
                reserved_end: Some(12782141440),
                peak_external_free: Some(8685527040),
                reserved_growths: 0,
                live_at_end: Some(0),
                frees_before_trace: 0,
            },
            cpu(1240, 8),
        ],
    );
}

#[test]
fn tracelens_h100_qwen() {
    let _ = check(
        "tracelens_h100_qwen1.5-0.5b_profile-memory.json.gz",
        18221,
        2450,
        vec![
            Dev {
                label: "cuda:0",
                events: 2250,
                allocations: 1125,
                frees: 1125,
                peak_allocated: 2088508416,
                peak_reserved: Some(2629828608),
                allocated_before: 984742400,
                allocated_end: 984742400,
                reserved_end: Some(2629828608),
                peak_external_free: Some(1645086208),
                reserved_growths: 0,
                live_at_end: Some(0),
                frees_before_trace: 0,
            },
            cpu(200, 16),
        ],
    );
}

#[test]
fn tracelens_mi300x_hip_graph_capture() {
    let name = "tracelens_mi300x_vllm-decode-cudagraph-capture.pt.trace.json.gz";
    let Some(t) = check(
        name,
        131243,
        1184,
        vec![Dev {
            label: "hip:0",
            events: 1184,
            allocations: 592,
            frees: 592,
            peak_allocated: 191628704768,
            peak_reserved: Some(193621655552),
            allocated_before: 191610969088,
            allocated_end: 191610969088,
            reserved_end: Some(193621655552),
            peak_external_free: Some(2010686464),
            reserved_growths: 0,
            live_at_end: Some(0),
            frees_before_trace: 0,
        }],
    ) else {
        return;
    };
    let d = &t.devices[0];
    assert_eq!(d.capacity, Some(206141652992));
    // `finished` is read where present.
    assert!(d.events.iter().all(|e| e.finished == Some(false)));
    // Graph capture allocates outside any aten operator; the Python frame
    // (inductor's generated `call`) names those.
    assert!(
        d.summary.allocations_by_op[0].op.starts_with("python: "),
        "{:?}",
        d.summary.allocations_by_op[0]
    );
}

#[test]
fn tracelens_h100_bert() {
    let name = "tracelens_h100_bert-small_profile-memory.json.gz";
    let Some(t) = check(
        name,
        2551,
        236,
        vec![
            Dev {
                label: "cuda:0",
                events: 218,
                allocations: 109,
                frees: 109,
                peak_allocated: 101305344,
                peak_reserved: Some(121634816),
                allocated_before: 91360768,
                allocated_end: 91360768,
                reserved_end: Some(121634816),
                peak_external_free: Some(30274048),
                reserved_growths: 0,
                live_at_end: Some(0),
                frees_before_trace: 0,
            },
            cpu(18, 16),
        ],
    ) else {
        return;
    };
    let d = &t.devices[0];
    assert_eq!(d.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    // Every CUDA allocation of this inference run happens inside an aten
    // operator on the main thread (frees happen outside, when Python drops
    // the tensor).
    assert!(
        d.events
            .iter()
            .filter(|e| e.bytes > 0)
            .all(|e| e.op.is_some()),
        "unattributed allocations"
    );
    assert_eq!(d.events.iter().filter(|e| e.op.is_none()).count(), 59);
    // At the peak, the allocations made during the trace plus the memory
    // older than it add up to the peak.
    let peak = d.summary.peak_allocated.as_ref().unwrap();
    let live: u64 = d.summary.live_at_peak_by_op.iter().map(|s| s.bytes).sum();
    assert_eq!(live, peak.bytes);
}

#[test]
fn kineto_2021_bytes_only_schema() {
    let name = "kineto-tbplugin_resnet50_v100_2021_old-memory-schema.pt.trace.json.gz";
    let Some(t) = trace(name) else { return };
    assert_eq!((t.trace_events, t.memory_events), (75718, 12838));
    assert!(t.bytes_only());
    let want = vec![
        Dev {
            label: "cuda:0",
            events: 8220,
            allocations: 4110,
            frees: 4110,
            peak_allocated: 2791636480,
            peak_reserved: None,
            allocated_before: 0,
            allocated_end: 0,
            reserved_end: None,
            peak_external_free: None,
            reserved_growths: 0,
            live_at_end: None,
            frees_before_trace: 0,
        },
        Dev {
            label: "cpu",
            events: 4618,
            allocations: 2310,
            frees: 2308,
            peak_allocated: 57803264,
            peak_reserved: None,
            allocated_before: 0,
            allocated_end: 19267840,
            reserved_end: None,
            peak_external_free: None,
            reserved_growths: 0,
            live_at_end: None,
            frees_before_trace: 0,
        },
    ];
    assert_eq!(got(&t), want);
    for d in &t.devices {
        assert!(d.summary.allocated_before_is_lower_bound);
        assert!(!d.summary.has_addr && !d.summary.has_totals);
        let series = fragscope::timeline::trace::trace_series(d);
        assert!(
            series
                .iter()
                .all(|s| s.reserved.is_none() && s.layout.is_none())
        );
    }
    // 2021 kineto names operators with cat "Operator": still attributed.
    assert!(t.op_events > 0);
    assert!(t.devices[0].events.iter().any(|e| e.op.is_some()));
}

#[test]
fn hta_memory_timeline_raw() {
    let Some(c) = load_real("hta_memory_timeline.raw.json.gz") else {
        return;
    };
    let Content::MemoryTimeline(t) = c else {
        panic!("not read as a memory timeline")
    };
    let t: MemoryTimeline = t;
    assert_eq!(t.form, Some(TimelineForm::Raw));
    assert_eq!(t.rows, 16845);
    assert_eq!(
        t.actions,
        Some(ActionCounts {
            preexisting: 645,
            create: 3345,
            increment_version: 9510,
            destroy: 3345
        })
    );
    assert_eq!(t.samples.len(), 7717);
    assert_eq!(
        t.last_time_us().unwrap() - t.first_time_us().unwrap(),
        987187
    );
    let pre = t.preexisting().unwrap();
    assert_eq!(
        pre.bytes,
        [102440608, 102228128, 19395584, 0, 0, 0, 0, 107996584]
    );
    let p = t.peak.unwrap();
    assert_eq!(p.total, 3082832104);
    assert_eq!(p.time_us, Some(1696966047194486));
    assert_eq!(
        p.bytes,
        [
            102440608, 102228128, 19395584, 0, 2592465920, 67858432, 64225280, 134218152
        ]
    );
    assert_eq!(p.bytes[Category::Activation as usize], 2592465920);
    let end = t.end().unwrap();
    assert_eq!(
        end.bytes,
        [102440608, 102228128, 19395584, 0, 128000, 107868160, 0, 424]
    );
    assert!(t.anomalies.is_empty(), "{:?}", t.anomalies);
}

/// `stats` on a snapshot and on a trace: the same column names for the
/// figures both have, the same units, and `n/a` (with the reason) for what a
/// trace cannot give.
#[test]
fn stats_wording_matches_snapshots() {
    let Some(t) = trace("tracelens_h100_bert-small_profile-memory.json.gz") else {
        return;
    };
    let Some(Content::Snapshot(s)) = load_real("silmont_cs336_small_py312.pickle") else {
        return;
    };
    let snap = fragscope::render::stats::render(
        &Style::default(),
        &fragscope::analysis::stats::file_stats(&s, "snap", "pickle".into()),
        "",
    );
    let tr = fragscope::render::stats::trace_text(&Style::default(), "trace", "JSON", &t);
    for h in [
        "reserved",
        "allocated",
        "free internal",
        "free external",
        "largest free",
        "fragmentation",
    ] {
        assert!(snap.contains(h), "snapshot stats lack {h:?}");
        assert!(tr.contains(h), "trace stats lack {h:?}");
    }
    // 121634816 bytes reserved, in the units snapshot stats use.
    assert!(tr.contains("116.00 MiB"), "{tr}");
    assert!(tr.contains("n/a: a profiler trace holds no segment or block layout"));
    let mut written = Vec::new();
    fragscope::render::stats::write_trace_json(&mut written, "trace", "JSON", &t).unwrap();
    let j: serde_json::Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(j["schema"], "fragscope.trace-stats/1");
    assert_eq!(
        j["trace"]["devices"][0]["summary"]["peak_reserved"]["bytes"],
        121634816
    );
    assert!(
        j["missing_figures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["figure"] == "largest_free_gap")
    );
}
