//! A snapshot without history (no trace events: `_record_memory_history`
//! was off, or a bare segment list): only its recorded state is known.
//! report, timeline, check and diff say so; none speaks of a peak or of the
//! start of a trace, and the one moment is named "recorded state". On
//! fixtures/fragmented.json (always present) and the real files of
//! ../shared/real that have no trace (skipped with a note when absent).

use crate::util::*;

const REAL_WITHOUT_TRACE: [&str; 3] = [
    "kkaitlyn_cs336_1457-segments_empty-trace.pickle",
    "maphsge4_select-n_tiny_no-history.pickle",
    "muduard_layoutediting_segments-list-only_device1.pkl",
];

const SAID: &str = "No allocator trace was recorded in this snapshot, so only its recorded state is known: peaks over the run and out-of-memory events are not measurable; record the trace with torch.cuda.memory._record_memory_history() before the steps you snapshot.";

fn inputs() -> Vec<String> {
    let mut v = vec![fixture("fragmented.json")];
    if let Some(d) = real_dir() {
        v.extend(
            REAL_WITHOUT_TRACE
                .iter()
                .map(|n| d.join(n).to_string_lossy().into_owned()),
        );
    }
    v
}

/// Words that claim a trace: a peak found over it, or its start.
fn no_trace_words(what: &str, text: &str) {
    for w in [
        "Peak on device",
        "start of the trace",
        "before the first trace event",
        "allocated before the trace began",
        " at start",
        "(final state)",
    ] {
        assert!(!text.contains(w), "{what} says {w:?}:\n{text}");
    }
}

#[test]
fn report_speaks_of_the_recorded_state_only() {
    for f in inputs() {
        let dir = tempfile::tempdir().unwrap();
        let o = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
        run([
            "report",
            f.as_str(),
            "-o",
            &o("r.html"),
            "-o",
            &o("r.svg"),
            "-o",
            &o("r.md"),
        ])
        .expect_code(0);
        let md = std::fs::read_to_string(o("r.md")).unwrap();
        let html = std::fs::read_to_string(o("r.html")).unwrap();
        let svg = std::fs::read_to_string(o("r.svg")).unwrap();
        for (form, text) in [("md", &md), ("html", &html), ("svg", &svg)] {
            no_trace_words(&format!("{f} {form}"), text);
        }
        // Said first, once; the figures are called the recorded state's.
        assert!(
            md.contains(&format!("\n\n> {SAID}\n>\n> Device ")),
            "{f}:\n{md}"
        );
        assert_eq!(md.matches(SAID).count(), 1, "{f}");
        assert_eq!(html.matches(SAID).count(), 1, "{f}");
        assert!(md.contains("> Recorded state of device "), "{f}:\n{md}");
        assert!(!md.contains("No out-of-memory event was recorded"), "{f}");
        assert!(
            md.contains("| n/a (no trace) | n/a (no trace) |"),
            "{f}:\n{md}"
        );
        assert!(
            md.contains("\n| recorded state | no trace | "),
            "{f}:\n{md}"
        );
        assert!(
            html.contains("<h3>The recorded state (no trace)</h3>"),
            "{f}"
        );
    }
    // fragmented.json: 60 MiB reserved, 300 B allocated (requested bytes).
    let md = run(["report", "--markdown", &fixture("fragmented.json")])
        .expect_code(0)
        .stdout();
    assert!(
        md.contains("> Recorded state of device 0: 60.00 MiB reserved, 300 B allocated.\n"),
        "{md}"
    );
}

#[test]
fn timeline_names_its_one_moment_the_recorded_state() {
    for f in inputs() {
        let out = run(["timeline", f.as_str()]).expect_code(0).stdout();
        no_trace_words(&f, &out);
        assert!(
            out.contains(": no trace events: only the recorded state is known, so there is no peak and no out-of-memory event to show; record the trace with torch.cuda.memory._record_memory_history()"),
            "{f}:\n{out}"
        );
        let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("│ ")).collect();
        assert_eq!(rows.len(), 2, "a header and one moment: {out}");
        assert!(rows[1].starts_with("│ recorded state "), "{out}");
        for at in ["peak", "end", "min-gap"] {
            let out = run(["timeline", "--at", at, f.as_str()])
                .expect_code(0)
                .stdout();
            no_trace_words(&format!("{f} --at {at}"), &out);
            let first = out.lines().next().unwrap();
            assert!(
                first.ends_with(
                    ": the recorded state (no trace was recorded, so it is the only state known)"
                ),
                "{first}"
            );
        }
        let j: serde_json::Value = serde_json::from_str(
            &run(["timeline", "--json", f.as_str()])
                .expect_code(0)
                .stdout(),
        )
        .unwrap();
        for d in j["devices"].as_array().unwrap() {
            let k = d["key_moments"].as_array().unwrap();
            assert_eq!(k.len(), 1, "{f}");
            assert_eq!(k[0]["label"], "recorded state", "{f}");
        }
    }
}

#[test]
fn check_and_diff_say_their_figures_are_the_recorded_state() {
    let frag = fixture("fragmented.json");
    let traced = fixture("gap_fragmented_moment.json");
    let note = "device 0: no trace was recorded, so only the recorded state is known and every figure is that state's: the run's peaks (at least these) and its out-of-memory events are not measurable; record the trace with torch.cuda.memory._record_memory_history() before the steps you snapshot";
    let check = |f: &str, code: i32| -> serde_json::Value {
        let r = run([
            "check",
            "--no-config",
            "--format",
            "json",
            "--max-peak-reserved",
            "1GiB",
            "--max-fragmentation",
            "0.5",
            f,
        ]);
        r.expect_code(code);
        serde_json::from_str(&r.stdout()).unwrap()
    };
    let j = check(&frag, 1);
    assert_eq!(j["notes"], serde_json::json!([note]));
    let msg = |rule: &str| {
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        msg("max_peak_reserved"),
        "peak reserved 60.00 MiB on device 0 (of the recorded state: no trace) is within the limit of 1.00 GiB"
    );
    assert!(
        msg("max_fragmentation")
            .starts_with("worst fragmentation under pressure 80.0% on device 0 (of the recorded state: no trace) exceeds"),
        "{}",
        msg("max_fragmentation")
    );
    assert_eq!(
        msg("max_oom_events"),
        "OOM events 0 on device 0 (no trace, so none could be recorded) is within the limit of 0"
    );
    // A snapshot with a trace has none of it.
    let j = check(&traced, 1);
    let all = j.to_string();
    assert!(!all.contains("no trace"), "{all}");

    // Regression against a baseline without a trace names which side.
    let r = run([
        "check",
        "--no-config",
        "--format",
        "json",
        "--baseline",
        frag.as_str(),
        "--max-regression",
        "peak_reserved=50%",
        traced.as_str(),
    ]);
    let j: serde_json::Value = serde_json::from_str(&r.expect_code(0).stdout()).unwrap();
    let m = j["findings"][1]["message"].as_str().unwrap();
    assert!(
        m.starts_with("peak reserved 60.00 MiB → 40.00 MiB on device 0 (")
            && m.ends_with("; the baseline's figure is of its recorded state (no trace)"),
        "{m}"
    );

    // diff: the note once, for the side without a trace.
    let out = run(["diff", frag.as_str(), traced.as_str()])
        .expect_code(0)
        .stdout();
    assert_eq!(out.matches("no trace was recorded").count(), 1, "{out}");
    assert!(
        out.contains(&format!("note: before ({frag}): {note}")),
        "{out}"
    );
}

#[test]
fn culprits_name_the_recorded_state() {
    for f in inputs() {
        let out = run(["culprits", f.as_str()]).expect_code(0).stdout();
        no_trace_words(&f, &out);
        let first = out.lines().next().unwrap();
        assert!(
            first.starts_with("device ") && first.ends_with(" in the recorded state (no trace)"),
            "{f}: {first}"
        );
        assert!(!out.contains("no trace events)"), "{f}:\n{out}");
    }
}
