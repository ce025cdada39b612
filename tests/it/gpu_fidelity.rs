//! The what-if model against the same program recorded under each setting
//! on a real GPU (`fixtures/gpu/<workload>/<setting>.pickle.gz` with its
//! `.json`, made by `scripts/gpu/record.py`): the model starts from the
//! defaults recording and predicts every other setting, and each
//! prediction is held to that setting's own recording. The table in
//! docs/fidelity.md ("Under other settings, on a real GPU") is this test's
//! output (`FRAGSCOPE_BLESS=1` rewrites it).
//!
//! Until recordings exist the test says so and checks only its own
//! measure, on a real file whose model reproduces it exactly.

use fragscope::input::{LoadOptions, load_snapshot};
use fragscope::model::{Action, Snapshot};
use fragscope::sim::{self, SimConfig, run::summarize};
use std::fmt::Write;
use std::path::{Path, PathBuf};

const GPU: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/gpu");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fidelity.md");
const BEGIN: &str = "<!-- gpu-table:begin -->\n";
const END: &str = "<!-- gpu-table:end -->";

/// What a run did, recorded or predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    peak_reserved: u64,
    end_reserved: u64,
    device_allocs: u64,
    device_frees: u64,
    /// The first request refused: its number among the trace's requests
    /// (`alloc` and `oom` entries, from 0).
    first_oom: Option<usize>,
}

/// Requests before trace event `i`.
fn request_number(snap: &Snapshot, device: i64, i: usize) -> usize {
    snap.trace_of(device)[..i]
        .iter()
        .filter(|e| matches!(e.action, Action::Alloc | Action::Oom))
        .count()
}

/// What the recording shows.
fn recorded(snap: &Snapshot, device: i64) -> Outcome {
    let trace = snap.trace_of(device);
    let reserved = sim::trace::recorded_reserved(snap, device);
    let start = sim::trace::recorded_start_reserved(snap, device);
    let count = |a: &[Action]| trace.iter().filter(|e| a.contains(&e.action)).count() as u64;
    Outcome {
        peak_reserved: reserved.iter().fold(start, u64::max),
        end_reserved: reserved.last().unwrap_or(start),
        device_allocs: count(&[Action::SegmentAlloc, Action::SegmentMap]),
        device_frees: count(&[Action::SegmentFree, Action::SegmentUnmap]),
        first_oom: trace
            .iter()
            .position(|e| e.action == Action::Oom)
            .map(|i| request_number(snap, device, i)),
    }
}

/// What the model predicts under `cfg` from `snap`'s requests, read for
/// `device` of a device of `capacity` bytes.
fn predicted(snap: &Snapshot, device: i64, cfg: &SimConfig, capacity: u64) -> Outcome {
    predicted_from(
        snap,
        device,
        &sim::run::prepare(snap, device, Some(capacity)),
        cfg,
    )
}

/// [`predicted`] from requests already read (one workload's defaults
/// recording serves every setting).
fn predicted_from(
    snap: &Snapshot,
    device: i64,
    input: &sim::run::DeviceInput,
    cfg: &SimConfig,
) -> Outcome {
    let run = sim::run::run(input, cfg).expect("the model runs");
    let s = summarize(&run);
    Outcome {
        peak_reserved: s.peak_reserved,
        end_reserved: s.end_reserved,
        device_allocs: s.device_allocs,
        device_frees: s.device_frees,
        first_oom: s.first_oom_event.map(|i| request_number(snap, device, i)),
    }
}

/// The measure itself, on a real recording the model reproduces exactly
/// (docs/fidelity.md's first table): predicting the recorded setting from
/// its own recording gives back what it recorded, the OOM included.
#[test]
fn predicting_a_recording_from_itself_gives_it_back() {
    let Some(real) = crate::util::real_dir() else {
        return;
    };
    let path = real.join("constructor-sun_code-location_oom_expandable_3dev.pickle");
    let (snap, _) = load_snapshot(&path.to_string_lossy(), &LoadOptions::default()).unwrap();
    let capacity = sim::trace::capacity_from_ooms(&snap, 1).unwrap();
    let cfg = SimConfig::parse("expandable_segments:True").unwrap();
    let rec = recorded(&snap, 1);
    assert_eq!(predicted(&snap, 1, &cfg, capacity), rec);
    // The figures themselves, read off the trace independently.
    let trace = snap.trace_of(1);
    let oom = trace.iter().position(|e| e.action == Action::Oom).unwrap();
    assert_eq!(oom, 421);
    let requests = trace[..oom]
        .iter()
        .filter(|e| e.action == Action::Alloc)
        .count();
    assert_eq!(rec.first_oom, Some(requests));
    // The refused request counts as one: the next is one further on.
    assert_eq!(
        request_number(&snap, 1, oom + 1),
        requests + 1,
        "an oom entry is a request"
    );
    assert_eq!(rec.peak_reserved, 84_202_749_952);
    assert_eq!(rec.device_allocs + rec.device_frees, 46);
}

/// A workload's recordings: setting name → (snapshot, its metadata).
struct Workload {
    name: String,
    runs: Vec<(String, Snapshot, serde_json::Value)>,
}

/// The recordings' folder: `FRAGSCOPE_GPU_FIXTURES` when set (to read a
/// dry run of the recorder, say), else `fixtures/gpu`.
fn gpu_dir() -> PathBuf {
    std::env::var_os("FRAGSCOPE_GPU_FIXTURES").map_or_else(|| PathBuf::from(GPU), PathBuf::from)
}

fn workloads() -> Vec<Workload> {
    let Ok(dirs) = std::fs::read_dir(gpu_dir()) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = dirs
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|d| {
            let mut runs = Vec::new();
            let mut names: Vec<PathBuf> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.ends_with(".pickle.gz") && !n.ends_with(".oom.pickle.gz")
                })
                .collect();
            names.sort();
            for p in names {
                let n = p.file_name().unwrap().to_string_lossy();
                let setting = n.trim_end_matches(".pickle.gz").to_string();
                let meta: serde_json::Value = serde_json::from_slice(
                    &std::fs::read(Path::new(d).join(format!("{setting}.json"))).unwrap(),
                )
                .unwrap();
                // The calibration run has no cap: nothing to predict.
                if meta["memory_fraction"].as_f64().is_none() {
                    continue;
                }
                let (snap, _) =
                    load_snapshot(&p.to_string_lossy(), &LoadOptions::default()).unwrap();
                runs.push((setting, snap, meta));
            }
            Workload {
                name: d.file_name().unwrap().to_string_lossy().to_string(),
                runs,
            }
        })
        .collect()
}

/// A setting as the model takes it: its configuration string with the
/// recording's memory fraction, over the device's total memory (as the
/// allocator computes its limit).
fn setting(meta: &serde_json::Value) -> (SimConfig, u64) {
    let conf = meta["conf"].as_str().unwrap();
    let fraction = meta["memory_fraction"].as_f64().unwrap();
    let total = meta["device_total"].as_u64().unwrap();
    let spec = if conf.is_empty() {
        format!("per_process_memory_fraction:{fraction}")
    } else {
        format!("{conf},per_process_memory_fraction:{fraction}")
    };
    (SimConfig::parse(&spec).unwrap(), total)
}

fn gib(b: u64) -> String {
    format!("{:.2}", b as f64 / f64::from(1u32 << 30))
}

fn oom(o: Option<usize>) -> String {
    o.map_or("none".into(), |r| format!("request {r}"))
}

/// The cross-setting table of `ws`, with (pairs, peaks within 5 %, OOM
/// outcomes right). Asserts that each recording's own replay reproduces it.
fn table_of(ws: &[Workload]) -> (String, (usize, usize, usize)) {
    let mut t = String::from(
        "| workload | setting | peak reserved GiB (model / recorded) | error | end reserved GiB | device allocs / frees (model / recorded) | first OOM (model / recorded) |\n|---|---|---|---|---|---|---|\n",
    );
    let (mut pairs, mut within, mut oom_right) = (0, 0, 0);
    for w in ws {
        let Some((_, base, base_meta)) = w.runs.iter().find(|r| r.0 == "defaults") else {
            eprintln!("note: {} has no capped defaults recording; skipped", w.name);
            continue;
        };
        let base_input = sim::run::prepare(base, 0, Some(setting(base_meta).1));
        for (name, snap, meta) in &w.runs {
            let (cfg, total) = setting(meta);
            // Each recording's own replay reproduces it.
            assert_eq!(
                predicted(snap, 0, &cfg, total),
                recorded(snap, 0),
                "{}/{name}: the model does not reproduce its own recording",
                w.name
            );
            assert_eq!(
                total,
                setting(base_meta).1,
                "{}/{name}: another device",
                w.name
            );
            let (p, r) = (
                predicted_from(base, 0, &base_input, &cfg),
                recorded(snap, 0),
            );
            let err =
                p.peak_reserved.abs_diff(r.peak_reserved) as f64 / r.peak_reserved.max(1) as f64;
            pairs += 1;
            within += usize::from(err <= 0.05);
            oom_right += usize::from(p.first_oom.is_some() == r.first_oom.is_some());
            writeln!(
                t,
                "| {} | {name} | {} / {} | {:.1}% | {} / {} | {} / {} · {} / {} | {} / {} |",
                w.name,
                gib(p.peak_reserved),
                gib(r.peak_reserved),
                err * 100.0,
                gib(p.end_reserved),
                gib(r.end_reserved),
                p.device_allocs,
                p.device_frees,
                r.device_allocs,
                r.device_frees,
                oom(p.first_oom),
                oom(r.first_oom),
            )
            .unwrap();
        }
    }
    writeln!(
        t,
        "\n{within} of {pairs} peaks within 5 %; the OOM outcome right in {oom_right} of {pairs}."
    )
    .unwrap();
    (t, (pairs, within, oom_right))
}

#[test]
fn gpu_recordings_table_matches_docs() {
    let ws = workloads();
    if std::env::var_os("FRAGSCOPE_GPU_FIXTURES").is_some() {
        // Another folder's table is printed, not held to the docs.
        eprintln!("{}", table_of(&ws).0);
        return;
    }
    if ws.is_empty() {
        eprintln!("note: {GPU} holds no recordings yet; only the measure is checked");
        return;
    }
    let (t, _) = table_of(&ws);
    let doc = std::fs::read_to_string(DOC).unwrap();
    let (Some(a), Some(b)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/fidelity.md has no {BEGIN:?} … {END:?} block for the GPU table");
    };
    let current = &doc[a + BEGIN.len()..b];
    if std::env::var_os("FRAGSCOPE_BLESS").is_some_and(|v| v == "1") {
        let new = format!("{}{BEGIN}{t}{}", &doc[..a], &doc[b..]);
        std::fs::write(DOC, new).unwrap();
        return;
    }
    assert_eq!(
        current, t,
        "docs/fidelity.md's GPU table differs; FRAGSCOPE_BLESS=1 rewrites it"
    );
}

/// The recorder runs only where a GPU is, so here its scripts are at least
/// read by Python and answer `--help` (neither imports PyTorch for it).
#[test]
fn the_gpu_recorder_scripts_load_without_a_gpu() {
    let root = env!("CARGO_MANIFEST_DIR");
    for script in ["scripts/gpu/record.py", "scripts/gpu/device_run.py"] {
        let out = match std::process::Command::new("python3")
            .arg(format!("{root}/{script}"))
            .arg("--help")
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                eprintln!("note: python3 cannot run ({e}); {script} is not checked");
                return;
            }
        };
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{script} --help: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(help.contains("--dry-run"), "{script} --help: {help}");
    }
}
