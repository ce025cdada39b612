//! Files written by `scripts/make_snapshot.py`: Python's own pickler, an
//! allocator model and a workload that share no code with `fragscope synth`
//! (the benchmark's `py-*` shapes). Each shape's file is read and replayed
//! exactly: every event without an anomaly, the recorded final segments and
//! blocks reached, the events counted as the file holds them.

use crate::util;
use fragscope::input;
use fragscope::model::Snapshot;
use std::process::Command;

/// The generator's arguments of the benchmark's shapes (scripts/bench.py's
/// PY_SHAPES), at a size a test can afford.
const SHAPES: &[(&str, &[&str])] = &[
    ("py-training", &[]),
    (
        "py-shallow",
        &[
            "--depth",
            "2-12",
            "--sites",
            "200",
            "--streams",
            "16",
            "--side-rate",
            "0.97",
        ],
    ),
    (
        "py-deep",
        &[
            "--depth",
            "30-300",
            "--sites",
            "300",
            "--limit-gb",
            "24",
            "--side-rate",
            "0.8",
        ],
    ),
    // Deeper stacks than py-deep, nearly each event its own: the frames
    // lists (references to shared frames) far outnumber the file's other
    // values, and must not be taken for shared references that expand.
    ("py-verydeep", &["--depth", "200-600", "--sites", "2000"]),
    (
        "py-streams",
        &["--streams", "200", "--sites", "500", "--depth", "5-20"],
    ),
    (
        "py-pressure",
        &[
            "--devices",
            "4",
            "--limit-gb",
            "16",
            "--side-rate",
            "0.9",
            "--depth",
            "10-60",
        ],
    ),
    (
        "py-ring",
        &[
            "--depth",
            "5-30",
            "--sites",
            "3000",
            "--streams",
            "4",
            "--keep",
            "0.83",
        ],
    ),
    (
        "py-ranks",
        &["--devices", "8", "--busy", "8", "--depth", "8-40"],
    ),
    // Each call site's frames list one object, written once and named by
    // reference after: the most events a byte of the shapes with stacks.
    (
        "py-dense",
        &["--depth", "33-33", "--sites", "400", "--shared-lists"],
    ),
];

fn generate(dir: &std::path::Path, name: &str, args: &[&str]) -> Option<Snapshot> {
    let path = dir.join(format!("{name}.pickle"));
    let script = util::root().join("scripts/make_snapshot.py");
    let out = match Command::new("python3")
        .arg(&script)
        .args(args)
        .args(["--events", "6000", "--seed", "3", "-o"])
        .arg(&path)
        .output()
    {
        Ok(o) => o,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("note: python3 cannot run ({e}); {name} is not checked");
            return None;
        }
        Err(e) => panic!("python3 cannot run: {e}"),
    };
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let l = input::load_bytes(&std::fs::read(&path).unwrap(), "independent.pickle").unwrap();
    match l.content {
        input::Content::Snapshot(s) => Some(s),
        _ => panic!("{name}: not a snapshot"),
    }
}

#[test]
fn every_shape_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (name, args) in SHAPES {
        let Some(snap) = generate(dir.path(), name, args) else {
            return;
        };
        let events: usize = snap.traces().iter().map(|t| t.len()).sum();
        // (py-ring keeps the last 83 %.)
        assert!(events >= 4900, "{name}: {events} events");
        let replays = fragscope::timeline::replay(&snap);
        assert!(!replays.is_empty(), "{name}: no device replayed");
        for r in &replays {
            let rep = &r.report;
            assert_eq!(rep.events, snap.trace_of(r.device).len(), "{name}");
            assert!(
                rep.anomalies.is_empty(),
                "{name}, device {}: {:?}",
                r.device,
                rep.anomalies
            );
            assert_eq!(rep.clean_events, rep.events, "{name}, device {}", r.device);
            assert!(
                rep.final_state_matches,
                "{name}, device {}: {:?}",
                r.device, rep.final_state_diff
            );
        }
    }
}

/// A frames list named by reference (a writer that keeps one list per call
/// site, as py-dense's does) is read as the same list written out at every
/// entry: the same model, from a file a third the size.
#[test]
fn frames_lists_named_by_reference_read_as_written_out() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--depth", "33-33", "--sites", "60"];
    let Some(written) = generate(dir.path(), "written", &args) else {
        return;
    };
    let shared = [&args[..], &["--shared-lists"]].concat();
    let Some(named) = generate(dir.path(), "named", &shared) else {
        return;
    };
    let size = |n: &str| {
        std::fs::metadata(dir.path().join(format!("{n}.pickle")))
            .unwrap()
            .len()
    };
    assert!(
        size("named") * 2 < size("written"),
        "{} and {} bytes",
        size("named"),
        size("written")
    );
    assert!(!named.traces().is_empty() && named.traces()[0].len() >= 6000);
    assert!(
        named == written,
        "the two files read as different snapshots"
    );
}
