//! Fidelity of the allocator model on every real snapshot with a trace:
//! replayed under its own recorded settings, how much of what the real
//! allocator did does it reproduce? The table in docs/fidelity.md is this
//! test's output (`FRAGSCOPE_BLESS=1` rewrites it); the test fails when the
//! figures drift from it, and asserts the targets of the issue on every
//! real trace.

use fragscope::input::{LoadOptions, load_snapshot};
use fragscope::sim::{self, Fidelity};
use std::fmt::Write;
use std::path::Path;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fidelity.md");
const BEGIN: &str = "<!-- fidelity-table:begin -->\n";
const END: &str = "<!-- fidelity-table:end -->";

fn pct(x: Option<f64>) -> String {
    x.map_or("n/a".into(), |v| format!("{:.1}%", v * 100.0))
}

struct Row {
    file: String,
    device: i64,
    /// The model's refusal of a malformed start state, as a row.
    f: Result<Fidelity, String>,
    events: usize,
}

fn rows() -> Option<Vec<Row>> {
    let dir = Path::new(REAL);
    if !dir.is_dir() {
        eprintln!("note: {REAL} is absent; the fidelity table is not checked");
        return None;
    }
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.ends_with(".pickle") || n.ends_with(".pkl")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let (snap, _) = load_snapshot(&p.to_string_lossy(), &LoadOptions::default()).unwrap();
        for d in snap.devices() {
            let n = snap.trace_of(d).len();
            if n == 0 {
                continue;
            }
            out.push(Row {
                file: name.clone(),
                device: d,
                f: sim::simulate_device(&snap, d, &[], None)
                    .map(|r| r.fidelity)
                    .map_err(|e| e.to_string()),
                events: n,
            });
        }
    }
    Some(out)
}

fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    t.push_str("| file | dev | events | start | segment events (rec / sim) | matched in order | reserved error max | mean | final segments matched | recorded OOMs reproduced |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let f = match &r.f {
            Ok(f) => f,
            Err(e) => {
                writeln!(
                    t,
                    "| `{}` | {} | {} | refused: {e} | | | | | | |",
                    r.file, r.device, r.events
                )
                .unwrap();
                continue;
            }
        };
        let start = if f.start_exact {
            "exact".to_string()
        } else {
            format!("rebuilt ({} older frees)", f.frees_of_older_blocks)
        };
        let ooms = if f.recorded_ooms == 0 {
            "-".to_string()
        } else {
            format!("{} / {}", f.recorded_ooms_reproduced, f.recorded_ooms)
        };
        writeln!(
            t,
            "| `{}` | {} | {} | {} | {} / {} | {} | {:.2}% | {:.3}% | {} ({} / {}) | {} |",
            r.file,
            r.device,
            r.events,
            start,
            f.recorded_segment_events,
            f.simulated_segment_events,
            pct(f.segment_events_matched),
            f.max_reserved_error_share * 100.0,
            f.mean_reserved_error_share * 100.0,
            pct(f.final_segments_share),
            f.final_segments_matched,
            f.final_segments_recorded.max(f.final_segments_simulated),
            ooms,
        )
        .unwrap();
    }
    t
}

#[test]
fn fidelity_table_matches_docs() {
    let Some(rows) = rows() else { return };
    let t = table(&rows);
    eprintln!("{t}");
    for r in &rows {
        let Ok(f) = &r.f else { continue };
        eprintln!(
            "{} dev {}: first divergence {:?}, max error at {:?} ({} B), skipped frees {}, spurious OOMs {}",
            r.file,
            r.device,
            f.first_divergence,
            f.max_reserved_error_event,
            f.max_reserved_error,
            f.skipped_frees,
            f.spurious_ooms
        );
    }
    crate::golden::check_section(std::path::Path::new(DOC), BEGIN, END, &t);
}

/// The targets on every real trace the model accepts: at least 95 %
/// of segment events matched in order (where the recording has any),
/// reserved error at most 2 % of the recorded peak, every recorded OOM
/// reproduced. The start state is the replay's reconstruction, exact or not.
#[test]
fn targets_hold_on_every_real_trace() {
    let Some(rows) = rows() else { return };
    let mut with_segment_events = 0;
    for r in &rows {
        let Ok(f) = &r.f else {
            assert!(
                r.file.contains("SYNTHETIC"),
                "{}: the model refused a real file's start state",
                r.file
            );
            continue;
        };
        // Every real trace's count is the longest common subsequence
        // itself, not one counted within windows.
        assert_eq!(f.segment_events_window, None, "{} dev {}", r.file, r.device);
        if f.recorded_segment_events > 0 {
            with_segment_events += 1;
            let m = f.segment_events_matched.unwrap_or(0.0);
            assert!(
                m >= 0.95,
                "{} dev {}: {:.1}% of segment events matched",
                r.file,
                r.device,
                m * 100.0
            );
        }
        assert!(
            f.max_reserved_error_share <= 0.02,
            "{} dev {}: reserved error {:.2}%",
            r.file,
            r.device,
            f.max_reserved_error_share * 100.0
        );
        assert_eq!(
            f.recorded_ooms_reproduced, f.recorded_ooms,
            "{} dev {}",
            r.file, r.device
        );
    }
    // Guards against the table silently shrinking (a loader change, a
    // renamed folder): ten device traces here have segment events.
    assert!(
        with_segment_events >= 10,
        "only {with_segment_events} traces with segment events"
    );
}
