use super::*;
use crate::analysis::frames::CallSite;
use crate::model::test_support;
use crate::model::*;

/// A one-device snapshot: one segment per entry of `segs`, each a list of
/// (size, state, call site file or ""), plus a trace.
pub(crate) fn snap(
    segs: &[&[(u64, BlockState, &str)]],
    trace: &[(Action, u64, u64, &str)],
) -> Snapshot {
    let mut i = Interner::new();
    let mut stack = |file: &str| {
        if file.is_empty() {
            return StackId::EMPTY;
        }
        let inner = test_support::frame(&mut i, test_support::TORCH_LINEAR, 125, "forward");
        let user = test_support::frame(&mut i, file, 10, "forward");
        i.stack(vec![inner, user])
    };
    let mut segments = Vec::new();
    let mut addr = 1u64 << 32;
    for blocks in segs {
        let start = addr;
        let mut bs = Vec::new();
        for (size, state, file) in blocks.iter() {
            let frames = if *state == BlockState::ActiveAllocated {
                stack(file)
            } else {
                StackId::EMPTY
            };
            bs.push(test_support::block(
                addr,
                *size,
                Some(*size),
                *state,
                frames,
            ));
            addr += size;
        }
        segments.push(test_support::segment(start, bs));
        addr += 1 << 30;
    }
    let events = trace
        .iter()
        .map(|(action, a, size, file)| {
            TraceEvent::new(*action, *a, *size, StreamIdx::DEFAULT, stack(file))
        })
        .collect();
    let mut s = Snapshot {
        segments,
        device_traces: Some(vec![events]),
        ..Snapshot::default()
    };
    i.finish(&mut s);
    s
}

use BlockState::{ActiveAllocated as A, Inactive as I};

#[test]
fn sites_skip_torch_frames_and_count_live_and_pinned_bytes() {
    let s = snap(
        &[
            &[(100, A, "/home/u/proj/train.py"), (50, I, "")],
            &[(30, A, "/home/u/proj/model.py"), (20, A, "")],
        ],
        &[],
    );
    let (sites, bad) = call_sites(&s, None);
    assert_eq!(bad, 0);
    let by: BTreeMap<_, _> = sites.iter().map(|x| (x.site.as_str(), x)).collect();
    let t = by["train.py (forward)"];
    assert_eq!(
        (t.live_bytes, t.peak_bytes, t.pinned_free_bytes),
        (100, 100, 50)
    );
    let m = by["model.py (forward)"];
    assert_eq!((m.live_bytes, m.pinned_free_bytes), (30, 0));
    assert_eq!(by[CallSite::unknown().label().as_str()].live_bytes, 20);
}

#[test]
fn peaks_follow_the_trace_backwards_from_the_final_state() {
    let base = 1u64 << 32;
    // Final: train.py holds 100 at `base`. The trace allocates 400 from
    // model.py and frees it, then allocates the 100; a block from before
    // the trace (60) is freed too.
    let s = snap(
        &[&[(100, A, "/p/train.py"), (400, I, "")]],
        &[
            (Action::Alloc, base + 100, 400, "/p/model.py"),
            (Action::FreeRequested, base + 100, 400, "/p/other.py"),
            (Action::FreeCompleted, base + 100, 400, "/p/other.py"),
            (Action::FreeRequested, 7, 60, ""),
            (Action::FreeCompleted, 7, 60, ""),
            (Action::Alloc, base, 100, "/p/train.py"),
        ],
    );
    let (sites, bad) = call_sites(&s, Some(0));
    assert_eq!(bad, 0);
    let by: BTreeMap<_, _> = sites.iter().map(|x| (x.site.as_str(), x)).collect();
    assert_eq!(by["model.py (forward)"].peak_bytes, 400);
    assert_eq!(by["model.py (forward)"].live_bytes, 0);
    assert_eq!(by["train.py (forward)"].peak_bytes, 100);
    assert_eq!(by[BEFORE_TRACE].peak_bytes, 60);
    assert_eq!(by[BEFORE_TRACE].live_bytes, 0);
    // The free's own stack names no allocation site.
    assert!(!by.contains_key("other.py (forward)"));
}

#[test]
fn diff_of_a_known_regression() {
    let before = snap(&[&[(100, A, "/p/a.py"), (10, I, "")]], &[]);
    let after = snap(
        &[
            &[(100, A, "/p/a.py"), (60, I, "")],
            &[(50, A, "/p/b.py"), (40, I, "")],
        ],
        &[],
    );
    let mb = Metrics::of_snapshot(&before, None).unwrap();
    let ma = Metrics::of_snapshot(&after, None).unwrap();
    let (sb, _) = call_sites(&before, None);
    let (sa, _) = call_sites(&after, None);
    let r = diff(
        &DiffInput {
            file: "before.json",
            device: None,
            metrics: &mb,
            sites: Some(&sb),
        },
        &DiffInput {
            file: "after.json",
            device: None,
            metrics: &ma,
            sites: Some(&sa),
        },
        10,
    );
    let get = |m| r.metrics.iter().find(|d| d.metric == m).unwrap();
    let pr = get(MetricId::PeakReserved);
    assert_eq!(pr.before, Some(Quantity::Bytes(110)));
    assert_eq!(pr.after, Some(Quantity::Bytes(250)));
    assert_eq!(pr.change, Some(140.0));
    assert_eq!(pr.direction, Direction::Worse);
    assert_eq!(get(MetricId::LargestGap).direction, Direction::Better);
    assert_eq!(get(MetricId::OomEvents).direction, Direction::Same);
    assert_eq!(r.call_sites.len(), 1);
    assert_eq!(r.call_sites[0].site, "b.py (forward)");
    assert_eq!(r.call_sites[0].live_change(), 50);
    assert_eq!(r.new_culprits.len(), 1);
    assert_eq!(r.new_culprits[0].site, "b.py (forward)");
    assert_eq!(r.new_culprits[0].pinned_free_bytes, 40);
    assert!(r.gone_culprits.is_empty());
    assert_eq!(r.call_sites_changed, 1);
}

#[test]
fn segments_of_one_run_only_are_matched_by_address_and_size() {
    // Segment 1 is the same in both; segment 2 keeps its address but not
    // its size; AFTER has a third.
    let before = snap(
        &[
            &[(100, A, "/p/a.py"), (50, I, "")],
            &[(30, A, "/p/model.py"), (20, A, ""), (10, I, "")],
        ],
        &[],
    );
    let after = snap(
        &[
            &[(100, A, "/p/a.py"), (50, I, "")],
            &[(40, A, "/p/b.py"), (30, I, "")],
            &[(200, A, "/p/c.py"), (300, I, "")],
        ],
        &[],
    );
    assert_eq!(before.segments[1].address, after.segments[1].address);
    let d = segment_diff(&before, None, &after, None, 0);
    assert_eq!(d.in_both, 1);
    assert_eq!((d.only_before_count, d.only_before_bytes), (1, 60));
    assert_eq!((d.only_after_count, d.only_after_bytes), (2, 570));
    let b = &d.only_before[0];
    assert_eq!(
        (
            b.address,
            b.total_size,
            b.allocated_bytes,
            b.live_blocks,
            b.free_bytes
        ),
        (before.segments[1].address, 60, 50, 2, 10)
    );
    assert_eq!(
        (b.top_site.as_deref(), b.top_site_bytes),
        (Some("model.py:10 (forward)"), 30)
    );
    assert_eq!((b.segment_type.as_str(), b.pool_id), ("large", (0, 0)));
    // The largest first.
    let sizes: Vec<u64> = d.only_after.iter().map(|x| x.total_size).collect();
    assert_eq!(sizes, vec![500, 70]);
    assert_eq!(
        d.only_after[0].top_site.as_deref(),
        Some("c.py:10 (forward)")
    );
    // `top` bounds the lists, not the counts.
    let t = segment_diff(&before, None, &after, None, 1);
    assert_eq!(
        (t.only_after.len(), t.only_after_count, t.only_after_bytes),
        (1, 2, 570)
    );
    assert_eq!(t.only_after[0], d.only_after[0]);
    // A run against itself: everything in both.
    let same = segment_diff(&after, None, &after, None, 0);
    assert_eq!(
        (same.in_both, same.only_before_count, same.only_after_count),
        (3, 0, 0)
    );
    // A device with no segments: everything of the other side is its own.
    let none = segment_diff(&after, Some(0), &after, Some(4), 0);
    assert_eq!(
        (none.in_both, none.only_before_count, none.only_after_count),
        (0, 3, 0)
    );
}

#[test]
fn a_segment_without_live_blocks_has_no_top_site_and_ties_go_by_name() {
    let before = snap(&[&[(64, I, "")]], &[]);
    let after = snap(
        &[&[(10, A, "/p/z.py"), (10, A, "/p/y.py"), (5, I, "")]],
        &[],
    );
    let d = segment_diff(&before, None, &after, None, 0);
    assert_eq!(d.only_before[0].top_site, None);
    assert_eq!(d.only_before[0].top_site_bytes, 0);
    assert_eq!(
        (
            d.only_after[0].top_site.as_deref(),
            d.only_after[0].top_site_bytes
        ),
        (Some("y.py:10 (forward)"), 10)
    );
}

#[test]
fn sites_are_named_like_every_other_command() {
    let mut i = Interner::new();
    let mut fr = |name: &str, file: &str, line| {
        let (name, filename) = (i.string(name).unwrap(), i.string(file).unwrap());
        i.frame(Frame {
            filename,
            line,
            name,
        })
    };
    let cpp = vec![
        fr("torch::unwind::unwind()", "??", 0),
        fr(
            "at::_ops::sum_dim_IntList::call(at::Tensor const&)",
            "??",
            0,
        ),
        fr(
            "torch::autograd::Engine::thread_main(std::shared_ptr<x>)",
            "??",
            0,
        ),
    ];
    let py = vec![
        fr(
            "forward",
            "/x/site-packages/torch/nn/modules/linear.py",
            125,
        ),
        fr("forward", "/home/u/proj/model.py", 524),
    ];
    let (cpp, py) = (i.stack(cpp), i.stack(py));
    let mut s = Snapshot::default();
    i.finish(&mut s);
    assert_eq!(
        site_of(&FrameFacts::new(&s), cpp),
        "aten::sum_dim_IntList (no Python frame)"
    );
    assert_eq!(site_of(&FrameFacts::new(&s), py), "model.py (forward)");
    // The same frame `culprits` names, without its line.
    assert_eq!(
        crate::analysis::frames::call_site(&s, py).label(),
        "model.py:524 (forward)"
    );
    assert_eq!(
        site_of(&FrameFacts::new(&s), StackId::EMPTY),
        CallSite::unknown().label()
    );
}
