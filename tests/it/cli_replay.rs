//! `fragscope timeline` and `fragscope oom` end to end: a hand-made snapshot
//! whose OOM is fragmentation (much free memory, no gap large enough), and
//! golden outputs on the real OOM files (`FRAGSCOPE_BLESS=1` rewrites them).

use crate::golden;
use fragscope::model::*;
use std::path::Path;
use std::process::{Command, Output};

const MIB: u64 = 1 << 20;
const B: u64 = 0x7f00_0000_0000;
const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");

fn fragscope(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run fragscope");
    eprintln!(
        "$ fragscope {}\nexit {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ev(action: Action, addr: u64, size: u64) -> TraceEvent {
    TraceEvent::new(action, addr, size, StreamIdx::DEFAULT, StackId::EMPTY)
}

fn block(address: u64, size: u64, state: BlockState) -> Block {
    Block {
        address,
        size,
        requested_size: Some(if state == BlockState::Inactive {
            0
        } else {
            size
        }),
        state,
        frames: StackId::EMPTY,
    }
}

/// Four 20 MiB segments, each with two free 4 MiB holes between live
/// blocks: 32 MiB free, no free block over 4 MiB; then an 8 MiB request
/// fails with 2 MiB free on the device.
fn fragmented() -> Snapshot {
    use BlockState::{ActiveAllocated as A, Inactive as I};
    let mut trace = Vec::new();
    let mut segments = Vec::new();
    for i in 0..4 {
        let sa = B + i * 32 * MIB;
        for k in 0..5 {
            trace.push(ev(Action::Alloc, sa + k * 4 * MIB, 4 * MIB));
        }
        for k in [1, 3] {
            trace.push(ev(Action::FreeRequested, sa + k * 4 * MIB, 4 * MIB));
            trace.push(ev(Action::FreeCompleted, sa + k * 4 * MIB, 4 * MIB));
        }
        segments.push(Segment {
            device: 0,
            address: sa,
            total_size: 20 * MIB,
            allocated_size: Some(12 * MIB),
            active_size: Some(12 * MIB),
            requested_size: Some(12 * MIB),
            stream: 0,
            segment_type: SegmentType::Large,
            pool_id: Some((0, 0)),
            is_expandable: Some(false),
            frames: StackId::EMPTY,
            blocks: (0..5)
                .map(|k| block(sa + k * 4 * MIB, 4 * MIB, if k % 2 == 0 { A } else { I }))
                .collect(),
        });
    }
    let mut oom = ev(Action::Oom, 0, 8 * MIB);
    oom.set_extras(Some(ExtrasIdx(0)));
    trace.push(oom);
    Snapshot {
        segments,
        device_traces: Some(vec![trace]),
        stacks: vec![vec![]],
        event_extras: vec![EventExtras {
            device_free: Some(2 * MIB),
            ..EventExtras::NONE
        }],
        ..Default::default()
    }
}

fn write_fragmented() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("frag.json"),
        fragscope::render::encode::to_json_bytes(&fragmented()),
    )
    .unwrap();
    d
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn oom_names_fragmentation_when_free_memory_is_scattered() {
    let d = write_fragmented();
    let o = fragscope(d.path(), &["oom", "frag.json"]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    assert!(
        s.contains("verdict: fragmentation: 32.00 MiB was free"),
        "{s}"
    );
    assert!(s.contains("largest free block: 4.00 MiB"), "{s}");
    assert!(
        s.contains("a free block of 8.00 MiB or more existed: no"),
        "{s}"
    );
    assert!(
        s.contains("[yes] PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        "{s}"
    );

    let o = fragscope(d.path(), &["oom", "--json", "frag.json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "fragscope.oom/1");
    let oom = &v["ooms"][0];
    assert_eq!(oom["diagnosis"]["cause"], "fragmentation");
    assert_eq!(oom["free_in_reserved"], 32 * MIB);
    assert_eq!(oom["largest_usable_gap"]["gap_size"], 4 * MIB);
    assert_eq!(oom["reserved"], 80 * MIB);
}

#[test]
fn timeline_table_series_and_moments() {
    let d = write_fragmented();
    let o = fragscope(d.path(), &["timeline", "frag.json"]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    assert!(s.contains("37 events, 37 replayed cleanly"), "{s}");
    assert!(s.contains("oom #1"), "{s}");
    assert!(
        s.contains("reproduces the recorded final state exactly"),
        "{s}"
    );

    let o = fragscope(d.path(), &["timeline", "--csv", "frag.json"]);
    let csv = stdout(&o);
    assert_eq!(csv.lines().count(), 1 + 38);
    assert!(csv.starts_with("device,event,time_us,allocated"));
    let last = csv.lines().last().unwrap();
    // After the OOM: 48 MiB live in 80 MiB, 8 free blocks of 4 MiB.
    assert!(
        last.starts_with(&format!("0,36,,{},{},{},", 48 * MIB, 48 * MIB, 80 * MIB)),
        "{last}"
    );

    let o = fragscope(
        d.path(),
        &["timeline", "--csv", "--max-points", "6", "frag.json"],
    );
    let n = stdout(&o).lines().count() - 1;
    assert!((2..=7).contains(&n), "{n} rows");

    let o = fragscope(d.path(), &["timeline", "--json", "frag.json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "fragscope.timeline/1");
    assert_eq!(v["devices"][0]["samples"].as_array().unwrap().len(), 38);
    assert_eq!(v["devices"][0]["report"]["final_state_matches"], true);

    let o = fragscope(d.path(), &["timeline", "--at", "oom", "frag.json"]);
    let s = stdout(&o);
    assert!(s.contains("after event 36"), "{s}");
    assert!(s.contains("out-of-memory: 8.00 MiB"), "{s}");
    assert!(s.contains("Segments of at least"), "{s}");

    let o = fragscope(d.path(), &["timeline", "--at", "99", "frag.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("past the end"));
    let o = fragscope(d.path(), &["timeline", "--device", "3", "frag.json"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn golden_outputs_on_the_real_oom_files() {
    let dir = Path::new(REAL);
    if !dir.is_dir() {
        eprintln!("note: {REAL} is absent; golden tests on real files skipped");
        return;
    }
    let exp = "constructor-sun_code-location_oom_expandable_3dev.pickle";
    let yiyi = "yiyi_llm-inference_oom-time_noframes_2023.pickle";
    golden::check(
        "oom_constructor-sun.txt",
        &stdout(&fragscope(dir, &["oom", exp])),
    );
    golden::check(
        "oom_yiyi.txt",
        &stdout(&fragscope(dir, &["oom", "--bytes", yiyi])),
    );
    golden::check(
        "timeline_constructor-sun_dev1.txt",
        &stdout(&fragscope(dir, &["timeline", "--device", "1", exp])),
    );
}
