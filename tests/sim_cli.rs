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
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/simulate_oom.txt");
    if std::env::var_os("FRAGSCOPE_BLESS").is_some() {
        std::fs::create_dir_all(Path::new(golden).parent().unwrap()).unwrap();
        std::fs::write(golden, &o.stdout).unwrap();
        return;
    }
    let want = std::fs::read_to_string(golden).expect("golden file; bless with FRAGSCOPE_BLESS=1");
    assert_eq!(o.stdout, want, "{o}");
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
