//! Allocated bytes including pending frees: fragscope's `allocated` stops
//! counting a block at `free_requested`; PyTorch's memory_viz counts it
//! until `free_completed`. The replay reports the peak of the second count
//! too (`peak_allocated_incl_pending`), and it must equal memory_viz's own
//! rule recounted from the raw events: on a hand-made trace with
//! record_stream frees (fixtures/pending_frees_trace.json), on generated
//! training runs (whose batch copies are freed with record_stream), and on
//! every real snapshot in ../shared/real.

use crate::util::{each_real_snapshot, fixture, real_dir, run, synthetic_pickle};
use fragscope::core::style::Style;
use fragscope::input::{Content, load_bytes, load_snapshot};
use fragscope::model::{Action, BlockState, Snapshot};
use fragscope::synth::SynthOptions;
use fragscope::timeline::replay_device;
use std::collections::HashMap;

const MIB: u64 = 1 << 20;

/// memory_viz's "Active Memory Timeline" rule (docs/snapshot-format.md
/// §3.2), recounted from the events alone: an `alloc` opens an element of
/// its (requested) size, the `free_completed` of its address closes it; a
/// `free_completed` with nothing open was allocated before the trace and
/// counts from the start; live blocks of the final state that no event
/// opened count for the whole window. memory_viz leaves out the
/// `active_pending_free` blocks of the final state that the trace never
/// touched; fragscope's replay knows they were live, so they count here too.
/// Returns the peak and the event after which it is first reached
/// (`None`: the start).
fn memory_viz_peak(snap: &Snapshot, device: i64) -> (u64, Option<usize>) {
    let trace = snap.trace_of(device);
    let mut open: HashMap<u64, u64> = HashMap::new();
    let mut initial = 0u64;
    // Pass 1: what was live before the first event.
    for e in trace {
        match e.action {
            Action::Alloc => {
                open.insert(e.addr(), e.size);
            }
            Action::FreeCompleted => {
                // Nothing open: allocated before the trace.
                let before_the_trace = open.remove(&e.addr()).is_none();
                if before_the_trace {
                    initial += e.size;
                }
            }
            _ => {}
        }
    }
    for s in snap.segments_of(device) {
        for b in &s.blocks {
            if b.state != BlockState::Inactive && !open.contains_key(&b.address) {
                initial += b.requested_or_size().min(b.size);
            }
        }
    }
    // Pass 2: the running total.
    open.clear();
    let (mut cur, mut peak) = (initial, (initial, None));
    for (i, e) in trace.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                open.insert(e.addr(), e.size);
                cur += e.size;
            }
            Action::FreeCompleted => {
                cur -= open.remove(&e.addr()).unwrap_or(e.size);
            }
            _ => {}
        }
        if cur > peak.0 {
            peak = (cur, Some(i));
        }
    }
    peak
}

fn replayed_peak(snap: &Snapshot, device: i64) -> (u64, Option<usize>) {
    let r = replay_device(snap, device).report;
    (
        r.peak_allocated_incl_pending,
        r.peak_allocated_incl_pending_at,
    )
}

#[test]
fn hand_made_record_stream_trace() {
    let (snap, _) = load_snapshot(&fixture("pending_frees_trace.json"), &Default::default())
        .expect("the fixture loads");
    let r = replay_device(&snap, 0);
    // fixtures/README.md: A (4 MiB − 100 requested) is pending when C is
    // allocated at event 4; allocated alone peaks at event 6.
    assert_eq!(r.report.peak_allocated_incl_pending, 12 * MIB - 100);
    assert_eq!(r.report.peak_allocated_incl_pending_at, Some(4));
    let peak_allocated = r.samples.iter().map(|s| s.allocated).max().unwrap();
    assert_eq!(peak_allocated, 10 * MIB);
    assert_eq!(memory_viz_peak(&snap, 0), (12 * MIB - 100, Some(4)));
    assert!(r.report.final_state_matches && r.report.anomalies.is_empty());
}

#[test]
fn generated_runs_with_record_stream_frees() {
    for seed in [2u64, 7] {
        let o = SynthOptions {
            events: 4_000,
            seed,
            ..Default::default()
        };
        let l = load_bytes(&synthetic_pickle(&o), "synth").unwrap();
        let Content::Snapshot(snap) = &l.content else {
            panic!("not a snapshot")
        };
        let trace = snap.trace_of(0);
        // The runs do hold deferred frees: a free_requested with events
        // between it and its free_completed.
        let deferred = trace
            .windows(2)
            .filter(|w| {
                w[0].action == Action::FreeRequested
                    && !(w[1].action == Action::FreeCompleted && w[1].addr() == w[0].addr())
            })
            .count();
        assert!(deferred > 0, "seed {seed}: no deferred free");
        let r = replay_device(snap, 0);
        assert!(r.report.anomalies.is_empty(), "seed {seed}");
        let got = replayed_peak(snap, 0);
        assert_eq!(got, memory_viz_peak(snap, 0), "seed {seed}");
        let peak_allocated = r.samples.iter().map(|s| s.allocated).max().unwrap();
        assert!(got.0 >= peak_allocated, "seed {seed}");
    }
}

#[test]
fn every_real_snapshot_matches_the_recount() {
    let mut checked = 0;
    let present = each_real_snapshot(false, |name, snap, _| {
        for d in snap.devices() {
            let r = replay_device(snap, d);
            // The recount follows the events as recorded; where the replay
            // had to work around an event the two may part.
            if !r.report.anomalies.is_empty() || !r.report.final_state_matches {
                continue;
            }
            assert_eq!(
                replayed_peak(snap, d),
                memory_viz_peak(snap, d),
                "{name} device {d}"
            );
            checked += 1;
        }
    });
    if present {
        assert!(checked >= 10, "only {checked} devices compared");
    }
}

#[test]
fn real_file_with_pending_blocks_and_no_trace() {
    let Some(dir) = real_dir() else { return };
    let p = dir.join("verl_vllm-rollout_mempool-private-pools_pending-free.pickle");
    let (snap, _) = load_snapshot(&p.to_string_lossy(), &Default::default()).unwrap();
    assert!(snap.trace_of(0).is_empty());
    // With no trace the figure is the recorded state's: requested bytes of
    // allocated and pending-free blocks.
    let (mut allocated, mut pending) = (0u64, 0u64);
    for s in snap.segments_of(0) {
        for b in &s.blocks {
            let req = b.requested_or_size().min(b.size);
            match b.state {
                BlockState::ActiveAllocated => allocated += req,
                BlockState::ActivePendingFree => pending += req,
                BlockState::Inactive => {}
            }
        }
    }
    assert!(pending > 0, "the file holds pending-free blocks");
    assert_eq!(replayed_peak(&snap, 0), (allocated + pending, None));
    let out = run(["timeline", &p.to_string_lossy()])
        .expect_code(0)
        .stdout();
    assert!(
        out.contains(&format!(
            "allocated incl. pending frees (a block counted until free_completed, as memory_viz does): {} in the recorded state",
            Style::default().bytes(allocated + pending)
        )),
        "{out}"
    );
}

#[test]
fn timeline_and_report_show_the_figure() {
    let f = fixture("pending_frees_trace.json");
    let out = run(["timeline", &f]).expect_code(0).stdout();
    assert!(
        out.contains("allocated incl. pending frees (a block counted until free_completed, as memory_viz does): peak 12.00 MiB after event 4; allocated (until free_requested) peaks at 10.00 MiB"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&run(["timeline", &f, "--json"]).expect_code(0).stdout()).unwrap();
    let rep = &j["devices"][0]["report"];
    assert_eq!(rep["peak_allocated_incl_pending"], 12 * MIB - 100);
    assert_eq!(rep["peak_allocated_incl_pending_at"], 4);
    let md = run(["report", &f, "--markdown", "--no-what-if"])
        .expect_code(0)
        .stdout();
    assert!(
        md.contains("| peak allocated | peak allocated incl. pending frees |")
            && md.contains(
                "| 0 | 10 | 20.00 MiB | 10.00 MiB | 12.00 MiB | 20.00 MiB | 6.00 MiB | 0 |"
            ),
        "{md}"
    );
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    run(["report", &f, "--no-what-if", "-o", &html.to_string_lossy()]).expect_code(0);
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains("peak allocated incl. pending frees</th>")
            && html.contains("<td class=\"n\">12.00 MiB (event 4, t=0.004 s)</td>"),
        "the HTML report shows the figure and its moment"
    );
}
