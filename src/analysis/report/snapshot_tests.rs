//! Tests of the snapshot report.

use super::*;
use crate::analysis::report::base_name;
use crate::timeline::Series;

fn snap_with_frames() -> (Snapshot, StackId, StackId) {
    use crate::model::test_support::{TORCH_LINEAR, frame};
    let mut i = Interner::new();
    let f0 = frame(&mut i, TORCH_LINEAR, 125, "forward");
    let f1 = frame(&mut i, "/home/me/project/model.py", 88, "forward");
    let f2 = frame(&mut i, "train.py", 12, "step");
    let a = i.stack(vec![f0, f1]);
    let b = i.stack(vec![f2]);
    let mut s = Snapshot::default();
    i.finish(&mut s);
    (s, a, b)
}

use crate::model::test_support::segment;

fn block(address: u64, size: u64, req: u64, state: BlockState, frames: StackId) -> Block {
    crate::model::test_support::block(address, size, Some(req), state, frames)
}

#[test]
fn culprit_rows_follow_the_analysis_by_call_site() {
    let (snap, a, b) = snap_with_frames();
    let segs = vec![
        segment(
            0,
            vec![
                block(0, 300, 300, BlockState::ActiveAllocated, a),
                block(300, 100, 100, BlockState::ActiveAllocated, b),
                block(400, 1001, 0, BlockState::Inactive, StackId::EMPTY),
            ],
        ),
        // Entirely free: releasable, strands nothing.
        segment(
            10_000,
            vec![block(10_000, 5000, 0, BlockState::Inactive, StackId::EMPTY)],
        ),
        segment(
            20_000,
            vec![
                block(20_000, 512, 400, BlockState::ActiveAllocated, b),
                block(
                    20_512,
                    488,
                    0,
                    BlockState::ActivePendingFree,
                    StackId::EMPTY,
                ),
            ],
        ),
    ];
    let state = crate::timeline::MomentState {
        device: 0,
        at: None,
        time_us: None,
        segments: segs,
        origins: Default::default(),
        failed_request: None,
    };
    let an = crate::analysis::culprits::analyze(&snap, &state, &Default::default());
    let rows = culprit_rows(&snap, &an);
    assert_eq!(rows.len(), 2);
    // The gap at the end of the first segment is bounded by train.py's
    // block only, so it is all charged there; the pending-free block
    // holds no live tensor and is not a row.
    assert_eq!(rows[0].site, "train.py:12 (step)");
    assert_eq!(rows[0].site, an.groups[0].label);
    assert_eq!(rows[0].stranded_bytes, 1001);
    assert_eq!(rows[0].live_bytes, 100 + 400);
    assert_eq!(rows[0].blocks, vec![20_000, 300]);
    assert_eq!(rows[1].site, "model.py:88 (forward)");
    assert_eq!(rows[1].stranded_bytes, 0);
    assert_eq!(rows[1].live_bytes, 300);
    assert_eq!(rows[1].blocks, vec![0]);
    assert_eq!(
        rows[1].stack,
        vec![
            "/usr/lib/python3/site-packages/torch/nn/modules/linear.py:125:forward",
            "/home/me/project/model.py:88:forward"
        ]
    );
    let total: u64 = rows.iter().map(|r| r.stranded_bytes).sum();
    assert_eq!(total, an.total_stranded);
}

#[test]
fn default_moment_prefers_oom_then_most_free() {
    let mut snap = Snapshot::default();
    let ev = |action: Action| TraceEvent::new(action, 0, 10, StreamIdx::DEFAULT, StackId::EMPTY);
    let s = |e: Option<u32>, reserved: u64, allocated: u64| Sample {
        event: e,
        reserved: Some(reserved),
        allocated,
        ..Default::default()
    };
    let samples = Series::from(vec![
        s(None, 100, 90),
        s(Some(0), 100, 10),
        s(Some(1), 200, 110),
        s(Some(2), 100, 50),
    ]);
    // The series folded as the report's one read folds it.
    let moment = |snap: &Snapshot| {
        let mut cached = MostCached::default();
        for s in &samples {
            cached.add(&s);
        }
        default_moment(snap, 0, &samples, cached)
    };
    snap.device_traces = Some(vec![vec![
        ev(Action::Alloc),
        ev(Action::FreeRequested),
        ev(Action::Alloc),
    ]]);
    // Free = 90 at event 0 and at event 1: the earliest wins.
    assert_eq!(moment(&snap).0, Some(0));
    snap.device_traces = Some(vec![vec![
        ev(Action::Alloc),
        ev(Action::Oom),
        ev(Action::Alloc),
    ]]);
    let (at, label) = moment(&snap);
    assert_eq!(at, Some(1));
    assert!(label.contains("out-of-memory"));
}

#[test]
fn base_names_only() {
    assert_eq!(base_name("/home/me/runs/x.pickle"), "x.pickle");
    assert_eq!(base_name("x.pickle"), "x.pickle");
    assert_eq!(base_name("-"), "-");
}
