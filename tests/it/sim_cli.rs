//! `fragscope simulate` end to end: a small self-made snapshot whose OOM is
//! fragmentation (expandable segments avoid it), the real OOM snapshot
//! (nothing avoids it), JSON, the SVG chart and the errors. Failures print
//! the command, its stdout and its stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");
const OOM_FILE: &str = "constructor-sun_code-location_oom_expandable_3dev.pickle";
const MIB: u64 = 1 << 20;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
    cmd: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "command: {}\nexit: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.cmd, self.code, self.stdout, self.stderr
        )
    }
}

fn run(dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        cmd: format!("fragscope {}", args.join(" ")),
    }
}

fn real() -> Option<PathBuf> {
    let p = PathBuf::from(REAL);
    if p.join(OOM_FILE).is_file() {
        Some(p)
    } else {
        eprintln!("note: {REAL} is absent; the real-file checks are skipped");
        None
    }
}

/// Three 20 MiB segments, each holding a live 8 MiB tensor and 12 MiB of
/// cached space, then a failed 16 MiB request with no memory left: 36 MiB
/// free in reserved memory, never 16 MiB in one piece.
fn fragmented_snapshot(dir: &Path) -> PathBuf {
    let mut segments = Vec::new();
    let mut trace = Vec::new();
    let ev = |action: &str, addr: u64, size: u64| serde_json::json!({"action": action, "addr": addr, "size": size, "stream": 0, "frames": []});
    for i in 0..3u64 {
        let base = (256 + 32 * i) * MIB;
        trace.push(ev("segment_alloc", base, 20 * MIB));
        trace.push(ev("alloc", base, 8 * MIB));
        trace.push(ev("alloc", base + 8 * MIB, 8 * MIB));
        segments.push(serde_json::json!({
            "device": 0, "address": base, "total_size": 20 * MIB,
            "allocated_size": 8 * MIB, "active_size": 8 * MIB, "requested_size": 8 * MIB,
            "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0],
            "is_expandable": false, "frames": [],
            "blocks": [
                {"address": base, "size": 8 * MIB, "requested_size": 8 * MIB, "state": "active_allocated", "frames": []},
                {"address": base + 8 * MIB, "size": 12 * MIB, "requested_size": 0, "state": "inactive", "frames": []}
            ]
        }));
    }
    for i in 0..3u64 {
        let b = (256 + 32 * i) * MIB + 8 * MIB;
        trace.push(ev("free_requested", b, 8 * MIB));
        trace.push(ev("free_completed", b, 8 * MIB));
    }
    trace.push(serde_json::json!({"action": "oom", "size": 16 * MIB, "stream": 0, "device_free": 0, "frames": []}));
    let snap = serde_json::json!({
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": false}
    });
    let p = dir.join("fragmented.json");
    std::fs::write(&p, serde_json::to_vec(&snap).unwrap()).unwrap();
    p
}

#[test]
fn expandable_segments_avoid_a_fragmentation_oom() {
    let d = tempfile::tempdir().unwrap();
    fragmented_snapshot(d.path());
    let o = run(d.path(), &["simulate", "fragmented.json"]);
    assert_eq!(o.code, 0, "{o}");
    assert!(
        o.stdout
            .contains("a model of PyTorch's CUDA caching allocator"),
        "{o}"
    );
    assert!(o.stdout.contains("capacity     60.00 MiB"), "{o}");
    assert!(
        o.stdout
            .contains("Avoided with no other OOM: expandable_segments:True."),
        "{o}"
    );
    assert!(
        o.stdout
            .contains("so a perfectly packing allocator would have served it"),
        "{o}"
    );

    let o = run(
        d.path(),
        &[
            "simulate",
            "fragmented.json",
            "--conf",
            "expandable_segments:True",
            "--json",
        ],
    );
    assert_eq!(o.code, 0, "{o}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["schema"], "fragscope.simulate/1");
    assert_eq!(v["file"], "fragmented.json");
    assert_eq!(v["capacity"], 60 * MIB);
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["config"], "defaults");
    assert_eq!(r[0]["recorded_ooms_avoided"], 0);
    assert_eq!(r[1]["config"], "expandable_segments:True");
    assert_eq!(r[1]["recorded_ooms_avoided"], 1);
    assert_eq!(r[1]["ooms"], 0);
    assert_eq!(v["fidelity"]["segment_events_matched"], 1.0);
    assert_eq!(v["fidelity"]["recorded_ooms_reproduced"], 1);
}

#[test]
fn chart_is_well_formed_svg_with_a_curve_per_run() {
    let d = tempfile::tempdir().unwrap();
    fragmented_snapshot(d.path());
    let o = run(
        d.path(),
        &[
            "simulate",
            "fragmented.json",
            "--conf",
            "expandable_segments:True",
            "--conf",
            "max_split_size_mb:64",
            "--svg",
            "chart.svg",
        ],
    );
    assert_eq!(o.code, 0, "{o}");
    let svg = std::fs::read_to_string(d.path().join("chart.svg")).unwrap();
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut polylines = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Empty(e)) if e.name().as_ref() == "polyline" => {
                polylines += 1
            }
            Ok(_) => {}
            Err(e) => panic!("malformed SVG: {e}"),
        }
    }
    // The recording, the recorded settings and two configurations.
    assert_eq!(polylines, 4);
    assert!(svg.contains("capacity"));
}

#[test]
fn errors_name_the_problem() {
    let d = tempfile::tempdir().unwrap();
    fragmented_snapshot(d.path());
    let o = run(
        d.path(),
        &[
            "simulate",
            "fragmented.json",
            "--conf",
            "expandable_segment:True",
        ],
    );
    assert_eq!(o.code, 2, "{o}");
    assert!(
        o.stderr.contains("unknown key \"expandable_segment\""),
        "{o}"
    );
    assert_eq!(o.stderr.lines().count(), 1, "{o}");
    let o = run(d.path(), &["simulate", "fragmented.json", "--device", "3"]);
    assert_eq!(o.code, 2, "{o}");
    assert!(o.stderr.contains("device 3 has no allocations"), "{o}");
    let o = run(
        d.path(),
        &["simulate", "fragmented.json", "--capacity", "lots"],
    );
    assert_eq!(o.code, 2, "{o}");
}

#[test]
fn real_oom_snapshot_golden() {
    let Some(dir) = real() else { return };
    let o = run(&dir, &["simulate", OOM_FILE]);
    assert_eq!(o.code, 0, "{o}");
    crate::golden::check("simulate_oom.txt", &o.stdout);
}

#[test]
fn real_oom_is_capacity_bound_with_expandable_segments_off() {
    let Some(dir) = real() else { return };
    let o = run(
        &dir,
        &[
            "simulate",
            OOM_FILE,
            "--conf",
            "expandable_segments:False",
            "--json",
        ],
    );
    assert_eq!(o.code, 0, "{o}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["device"], 1, "the device with the OOM is chosen");
    assert_eq!(v["recorded_config"], "expandable_segments:True");
    let r = v["results"].as_array().unwrap();
    assert_eq!(r[1]["config"], "defaults");
    assert_eq!(r[0]["recorded_ooms_avoided"], 0);
    assert_eq!(r[1]["recorded_ooms_avoided"], 0);
    assert_eq!(v["fidelity"]["segment_events_matched"], 1.0);
    // The program's own demand at the OOM exceeds the capacity.
    let d = &v["oom_demand"][0];
    let need = d["held"].as_u64().unwrap() + d["request"].as_u64().unwrap();
    assert!(need > v["capacity"].as_u64().unwrap());
}

#[test]
fn real_files_that_cannot_be_simulated_say_why() {
    let Some(dir) = real() else { return };
    let o = run(&dir, &["simulate", "hitsbe_empty-snapshot.pickle"]);
    assert_eq!(o.code, 2, "{o}");
    assert!(
        o.stderr.contains("no device trace holds allocations"),
        "{o}"
    );
    let o = run(
        &dir,
        &["simulate", "snapviewer_example_LIKELY-SYNTHETIC.pickle"],
    );
    assert_eq!(o.code, 2, "{o}");
    assert!(o.stderr.contains("not aligned"), "{o}");
}

#[test]
fn parallel_runs_equal_sequential_runs() {
    let d = tempfile::tempdir().unwrap();
    let p = fragmented_snapshot(d.path());
    let (snap, _) = fragscope::input::load_snapshot(
        &p.to_string_lossy(),
        &fragscope::input::LoadOptions::default(),
    )
    .unwrap();
    let configs: Vec<_> = fragscope::sim::DEFAULT_SWEEP
        .iter()
        .map(|s| fragscope::sim::SimConfig::parse(s).unwrap())
        .collect();
    let report = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let r = fragscope::sim::simulate_device(&snap, 0, &configs, Some(64 * MIB)).unwrap();
            serde_json::to_string(&r).unwrap()
        })
    };
    assert_eq!(report(1), report(4));
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

/// fixtures/inherited_peak_trace.json (fixtures/README.md): the start state,
/// inherited from before the trace, holds 120 MiB; the trace opens with
/// empty_cache and never reserves more than 72 MiB again. Every setting's
/// peak over the whole run is the start's; the peak during the trace tells
/// them apart, and the output says which figure is which.
#[test]
fn inherited_start_holding_the_peak_is_told_apart() {
    let dir = Path::new(FIXTURES);
    let o = run(dir, &["simulate", "inherited_peak_trace.json", "--json"]);
    assert_eq!(o.code, 0, "{o}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["recorded_start_reserved"], 120 * MIB);
    assert_eq!(v["recorded_peak_reserved"], 120 * MIB);
    assert_eq!(v["recorded_peak_reserved_in_trace"], 72 * MIB);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 9);
    let by = |c: &str| results.iter().find(|r| r["config"] == c).unwrap();
    for r in results {
        assert_eq!(r["peak_reserved"], 120 * MIB, "{}", r["config"]);
        assert_eq!(r["start_reserved"], 120 * MIB, "{}", r["config"]);
    }
    // Worked out in scripts/make_trace_fixtures.py: the defaults cut two
    // segments (22 + 30 MiB) beside the 20 MiB one that stays; expandable
    // segments map 40 MiB of 20 MiB pages for both; power-of-two rounding
    // by 4 rounds 22 MiB up to 24 MiB.
    assert_eq!(by("defaults")["peak_reserved_in_trace"], 72 * MIB);
    assert_eq!(
        by("expandable_segments:True")["peak_reserved_in_trace"],
        60 * MIB
    );
    assert_eq!(
        by("roundup_power2_divisions:4")["peak_reserved_in_trace"],
        76 * MIB
    );

    let o = run(dir, &["simulate", "inherited_peak_trace.json"]);
    assert_eq!(o.code, 0, "{o}");
    let t = &o.stdout;
    assert!(
        t.contains("120.00 MiB reserved at the start, inherited from before the trace"),
        "{o}"
    );
    assert!(
        t.contains("peak reserved 120.00 MiB (the inherited start; 72.00 MiB during the trace)"),
        "{o}"
    );
    assert!(
        t.contains("peak reserved (incl. start) ┆ peak during the trace"),
        "{o}"
    );
    let row = t
        .lines()
        .find(|l| l.contains("│ expandable_segments:True "))
        .expect("a row per setting");
    let cells: Vec<&str> = row.split(['│', '┆']).map(str::trim).collect();
    assert_eq!(
        &cells[1..4],
        ["expandable_segments:True", "120.00 MiB", "60.00 MiB"],
        "{row}"
    );
    assert!(
        t.contains("holds the peak under all 9 settings, so compare the settings by their peak during the trace"),
        "{o}"
    );

    // The report's what-if section compares the same figures.
    let o = run(dir, &["report", "inherited_peak_trace.json", "--markdown"]);
    assert_eq!(o.code, 0, "{o}");
    assert!(
        o.stdout.contains("expandable_segments:True peaks at 60.00 MiB reserved during the trace, against 72.00 MiB under the recorded settings (both start from the 120.00 MiB inherited from before the trace"),
        "{o}"
    );
}

/// A start below the peak changes nothing: one peak column, as before.
#[test]
fn a_trace_that_outgrows_its_start_keeps_one_peak_column() {
    let d = tempfile::tempdir().unwrap();
    fragmented_snapshot(d.path());
    let o = run(d.path(), &["simulate", "fragmented.json"]);
    assert_eq!(o.code, 0, "{o}");
    assert!(!o.stdout.contains("peak during the trace"), "{o}");
    assert!(o.stdout.contains("┆ peak reserved ┆"), "{o}");
}

/// On every real snapshot that can be simulated: the recording's peak
/// during the trace is the highest reserved bytes the replay finds after an
/// event (an independent rebuild of the same recording), each run's peak is
/// the larger of its start and its peak during the trace, and every run
/// starts from the recorded start.
#[test]
fn peaks_during_the_trace_on_real_files() {
    let Some(dir) = real() else { return };
    let configs = [fragscope::sim::SimConfig::parse("expandable_segments:True").unwrap()];
    let mut checked = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    paths.sort();
    for p in paths {
        let Ok((snap, _)) =
            fragscope::input::load_snapshot(&p.to_string_lossy(), &Default::default())
        else {
            continue;
        };
        let Some(device) = fragscope::sim::trace::default_device(&snap) else {
            continue;
        };
        let Ok(r) = fragscope::sim::simulate_device(&snap, device, &configs, None) else {
            continue;
        };
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let replay = fragscope::timeline::replay_device(&snap, device);
        if replay.report.final_state_matches && replay.report.anomalies.is_empty() {
            let after_events = replay
                .samples
                .iter()
                .skip(1)
                .map(|s| s.reserved_bytes())
                .max();
            assert_eq!(r.recorded_peak_reserved_in_trace, after_events, "{name}");
            assert_eq!(
                r.recorded_start_reserved,
                replay.samples.at(0).reserved_bytes(),
                "{name}"
            );
        }
        for s in &r.results {
            assert_eq!(
                s.peak_reserved,
                s.start_reserved.max(s.peak_reserved_in_trace.unwrap_or(0)),
                "{name} {}",
                s.config
            );
            assert_eq!(
                s.start_reserved, r.recorded_start_reserved,
                "{name} {}",
                s.config
            );
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} real files simulated");
}
