//! Hand-made traces with known answers, one or more per action kind, and a
//! property test that drives the state machine with random streams.

use super::*;
use crate::model::BlockState::{ActiveAllocated as A, ActivePendingFree as P};

pub(super) const MIB: u64 = 1 << 20;
pub(super) const B: u64 = 0x7f00_0000_0000;

pub(super) fn ev(action: Action, addr: u64, size: u64) -> TraceEvent {
    TraceEvent::new(action, addr, size, StreamIdx::DEFAULT, StackId::EMPTY)
}

fn alloc(addr: u64, size: u64) -> TraceEvent {
    ev(Action::Alloc, addr, size)
}

/// `free_requested` + `free_completed`.
fn free(addr: u64, size: u64) -> [TraceEvent; 2] {
    [
        ev(Action::FreeRequested, addr, size),
        ev(Action::FreeCompleted, addr, size),
    ]
}

/// A recorded segment: the live blocks given as (offset, size, requested,
/// state); the runs between them become inactive blocks.
pub(super) fn seg(
    addr: u64,
    size: u64,
    kind: SegmentType,
    expandable: bool,
    live: &[(u64, u64, u64, BlockState)],
) -> Segment {
    let mut blocks = Vec::new();
    let mut cur = 0;
    let free = |o: u64, s: u64| Block {
        address: addr + o,
        size: s,
        requested_size: Some(0),
        state: BlockState::Inactive,
        frames: StackId::EMPTY,
    };
    for &(o, s, r, st) in live {
        if o > cur {
            blocks.push(free(cur, o - cur));
        }
        blocks.push(Block {
            address: addr + o,
            size: s,
            requested_size: Some(r),
            state: st,
            frames: StackId::EMPTY,
        });
        cur = o + s;
    }
    if size > cur {
        blocks.push(free(cur, size - cur));
    }
    Segment {
        device: 0,
        address: addr,
        total_size: size,
        allocated_size: None,
        active_size: None,
        requested_size: None,
        stream: 0,
        segment_type: kind,
        pool_id: Some((0, 0)),
        is_expandable: Some(expandable),
        frames: StackId::EMPTY,
        blocks,
    }
}

pub(super) fn snap(segments: Vec<Segment>, trace: Vec<TraceEvent>) -> Snapshot {
    Snapshot {
        segments,
        device_traces: Some(vec![trace]),
        strings: vec!["mystery".into()],
        other_actions: vec![StrId(0)],
        stacks: vec![vec![]],
        ..Default::default()
    }
}

fn run(s: &Snapshot) -> DeviceReplay {
    let r = replay_device(s, 0);
    assert_eq!(r.samples.len(), r.report.events + 1);
    for x in &r.samples {
        assert_eq!(
            x.allocated + x.lay().internal_free + x.external_bytes(),
            x.reserved_bytes(),
            "bytes conserved at {:?}",
            x.event
        );
    }
    r
}

fn assert_clean(r: &DeviceReplay) {
    assert!(
        r.report.final_state_matches,
        "{:?}",
        r.report.final_state_diff
    );
    assert_eq!(
        r.report.clean_events, r.report.events,
        "{:?}",
        r.report.anomalies
    );
}

#[test]
fn alloc_in_the_small_pool_rounds_to_512_and_splits() {
    use SegmentType::Small;
    let s = snap(
        vec![seg(
            B,
            2 * MIB,
            Small,
            false,
            &[(0, 512, 4, A), (512, 1024, 1000, A)],
        )],
        vec![
            ev(Action::SegmentAlloc, B, 2 * MIB),
            alloc(B, 4),
            alloc(B + 512, 1000),
        ],
    );
    let r = run(&s);
    assert_clean(&r);
    assert_eq!(r.samples.at(0).reserved_bytes(), 0);
    let s1 = r.samples.at(1);
    assert_eq!(
        (
            s1.reserved_bytes(),
            s1.lay().largest_free_gap,
            s1.lay().free_gaps
        ),
        (2 * MIB, 2 * MIB, 1)
    );
    assert_eq!(
        (
            s1.lay().largest_small_request,
            s1.lay().largest_large_request
        ),
        (MIB, 0)
    );
    let s2 = r.samples.at(2);
    assert_eq!(
        (s2.allocated, s2.active, s2.lay().internal_free),
        (4, 512, 508)
    );
    let e = r.end();
    assert_eq!(
        (e.allocated, e.active, e.lay().internal_free),
        (1004, 1536, 532)
    );
    assert_eq!(
        (e.external_bytes(), e.lay().largest_free_gap),
        (2 * MIB - 1536, 2 * MIB - 1536)
    );
    assert_eq!(e.lay().fragmentation, 0.0);
}

#[test]
fn the_large_pool_keeps_remainders_of_one_mib_or_less() {
    use SegmentType::Large;
    let c = B + (1 << 32);
    let trace = vec![
        ev(Action::SegmentAlloc, B, 20 * MIB),
        alloc(B, 1_500_000),
        ev(Action::SegmentAlloc, c, 100_663_296),
        alloc(c, 100_000_000),
    ];
    // The recording, with the second block of `second` bytes.
    let recorded = |second: u64| {
        snap(
            vec![
                seg(B, 20 * MIB, Large, false, &[(0, 1_500_160, 1_500_000, A)]),
                seg(c, 100_663_296, Large, false, &[(0, second, 100_000_000, A)]),
            ],
            trace.clone(),
        )
    };
    let good = recorded(100_663_296);
    let r = run(&good);
    assert_clean(&r);
    let e = r.end();
    assert_eq!(e.active, 1_500_160 + 100_663_296);
    assert_eq!(e.lay().internal_free, 160 + 663_296);
    assert_eq!(
        (e.lay().largest_large_request, e.lay().free_gaps),
        (19_471_360, 1)
    );

    // A recorded layout the rules cannot produce is reported, not absorbed.
    let bad = recorded(100_000_256);
    let r = replay_device(&bad, 0);
    assert!(!r.report.final_state_matches);
    let diff = r.report.final_state_diff.unwrap();
    assert!(
        diff.contains("100000256") && diff.contains("100663296"),
        "{diff}"
    );
}

#[test]
fn free_requested_leaves_the_block_pending_until_free_completed() {
    use SegmentType::Large;
    let mut trace = vec![
        alloc(B, 2 * MIB),
        alloc(B + 2 * MIB, 4 * MIB),
        ev(Action::FreeRequested, B, 2 * MIB),
        alloc(B + 6 * MIB, 2 * MIB),
        ev(Action::FreeCompleted, B, 2 * MIB),
    ];
    for (i, e) in trace.iter_mut().enumerate() {
        e.set_time_us(Some(100 * (i as i64 + 1)));
    }
    let s = snap(
        vec![seg(
            B,
            20 * MIB,
            Large,
            false,
            &[
                (2 * MIB, 4 * MIB, 4 * MIB, A),
                (6 * MIB, 2 * MIB, 2 * MIB, A),
            ],
        )],
        trace,
    );
    let r = run(&s);
    assert_clean(&r);
    let s0 = r.samples.at(0);
    assert_eq!(
        (s0.reserved_bytes(), s0.allocated, s0.lay().free_gaps),
        (20 * MIB, 0, 1)
    );
    let s3 = r.samples.at(3);
    assert_eq!((s3.lay().pending_free, s3.allocated), (2 * MIB, 4 * MIB));
    assert_eq!(
        (
            s3.external_bytes(),
            s3.lay().largest_free_gap,
            s3.lay().free_gaps
        ),
        (16 * MIB, 14 * MIB, 1)
    );
    let e = r.end();
    assert_eq!(
        (
            e.lay().pending_free,
            e.lay().free_gaps,
            e.lay().largest_free_gap
        ),
        (0, 2, 12 * MIB)
    );
    assert!((e.lay().fragmentation - (1.0 - 12.0 / 14.0)).abs() < 1e-12);

    // Moments.
    assert_eq!(r.resolve(&s, Moment::Start), Ok(None));
    assert_eq!(r.resolve(&s, Moment::End), Ok(Some(4)));
    assert!(r.resolve(&s, Moment::Event(5)).is_err());
    assert_eq!(r.resolve(&s, Moment::PeakAllocated), Ok(Some(1)));
    assert_eq!(r.resolve(&s, Moment::TimeUs(250)), Ok(Some(1)));
    assert_eq!(r.resolve(&s, Moment::TimeUs(50)), Ok(None));
    assert!(r.resolve(&s, Moment::Oom(0)).is_err());
    let labels: Vec<String> = r.key_moments(&s).into_iter().map(|k| k.label).collect();
    assert_eq!(labels.first().map(String::as_str), Some("start"));
    assert_eq!(labels.last().map(String::as_str), Some("end"));
    assert_eq!(state_at(&s, 0, Some(2)).segments[0].blocks[0].state, P);
}

#[test]
fn free_completed_merges_with_free_neighbours() {
    use SegmentType::Large;
    let mut trace = vec![
        alloc(B, 4 * MIB),
        alloc(B + 4 * MIB, 4 * MIB),
        alloc(B + 8 * MIB, 4 * MIB),
    ];
    trace.extend(free(B + 4 * MIB, 4 * MIB));
    trace.extend(free(B, 4 * MIB));
    trace.extend(free(B + 8 * MIB, 4 * MIB));
    let s = snap(vec![seg(B, 20 * MIB, Large, false, &[])], trace);
    let r = run(&s);
    assert_clean(&r);
    let gaps: Vec<u64> = r.samples.iter().map(|x| x.lay().free_gaps).collect();
    assert_eq!(gaps, [1, 1, 1, 1, 1, 2, 2, 2, 2, 1]);
    assert_eq!(r.samples.at(7).lay().largest_free_gap, 8 * MIB);
    assert_eq!(r.end().lay().largest_free_gap, 20 * MIB);
}

#[test]
fn segment_alloc_and_segment_free() {
    let mut trace = vec![ev(Action::SegmentAlloc, B, 2 * MIB), alloc(B, 512)];
    trace.extend(free(B, 512));
    trace.push(ev(Action::SegmentFree, B, 2 * MIB));
    let s = snap(vec![], trace.clone());
    let r = run(&s);
    assert_clean(&r);
    let reserved: Vec<u64> = r.samples.iter().map(|x| x.reserved_bytes()).collect();
    assert_eq!(reserved, [0, 2 * MIB, 2 * MIB, 2 * MIB, 2 * MIB, 0]);
    assert!(
        r.report
            .inferences
            .iter()
            .any(|i| i.contains("pool type inferred"))
    );

    // Freeing a segment that still holds a live block is an anomaly.
    let mut t2 = vec![ev(Action::SegmentAlloc, B, 2 * MIB), alloc(B, 512)];
    t2.push(ev(Action::SegmentFree, B, 2 * MIB));
    // (The undo also finds the alloc's block neither live at the end nor
    // freed, and says so.)
    let r = replay_device(&snap(vec![], t2), 0);
    let seg = r
        .report
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::SegmentMismatch);
    assert_eq!(seg.map(|a| (a.count, a.first_event)), Some((1, Some(2))));
    assert_eq!(r.report.clean_events, 1);
}

#[test]
fn blocks_older_than_the_trace_get_inferred_sizes() {
    use SegmentType::Large;
    // 15.5 MiB requested, 0.5 MiB left before the segment end: the large
    // pool would not have split that off, so the block held 16 MiB.
    let s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[(0, 4 * MIB, 4 * MIB, A)])],
        vec![ev(Action::FreeCompleted, B + 4 * MIB, 31 * MIB / 2)],
    );
    let r = run(&s);
    assert_clean(&r);
    let s0 = r.samples.at(0);
    assert_eq!(
        (s0.lay().pending_free, s0.allocated, s0.lay().free_gaps),
        (16 * MIB, 4 * MIB, 0)
    );
    assert!(
        r.report
            .inferences
            .iter()
            .any(|i| i.contains("1 took more"))
    );
    let st = state_at(&s, 0, None);
    assert_eq!(st.origins.len(), 2);
    assert!(st.origins.values().all(|o| *o == Origin::OlderThanTrace));

    // A block found later in the undo (earlier in time) 0.5 MiB past an
    // inferred block: the sliver belongs to the inferred block.
    let s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[])],
        vec![
            ev(Action::FreeCompleted, B + 7 * MIB / 2, 2 * MIB),
            ev(Action::FreeCompleted, B, 3 * MIB),
        ],
    );
    let r = run(&s);
    assert_clean(&r);
    let s0 = r.samples.at(0);
    assert_eq!(
        (
            s0.lay().pending_free,
            s0.lay().free_gaps,
            s0.lay().largest_free_gap
        ),
        (11 * MIB / 2, 1, 29 * MIB / 2)
    );
    let st = state_at(&s, 0, None);
    assert_eq!(st.segments[0].blocks[0].size, 7 * MIB / 2);
}

#[test]
fn expandable_segments_grow_shrink_split_and_merge() {
    use SegmentType::Large;
    let mut trace = vec![
        ev(Action::SegmentMap, B, 40 * MIB),
        alloc(B, 25 * MIB),
        alloc(B + 25 * MIB, 5 * MIB),
    ];
    trace.extend(free(B, 25 * MIB)); // 3, 4
    trace.push(ev(Action::SegmentUnmap, B, 20 * MIB)); // 5
    trace.push(ev(Action::SegmentMap, B, 20 * MIB)); // 6
    trace.push(alloc(B, 10 * MIB)); // 7
    trace.extend(free(B + 25 * MIB, 5 * MIB)); // 8, 9
    trace.push(ev(Action::SegmentUnmap, B + 20 * MIB, 20 * MIB)); // 10
    trace.push(ev(Action::SegmentMap, B + 40 * MIB, 20 * MIB)); // 11
    trace.push(ev(Action::SegmentMap, B + 20 * MIB, 20 * MIB)); // 12
    trace.push(ev(Action::SegmentUnmap, B + 20 * MIB, 20 * MIB)); // 13
    let s = snap(
        vec![
            seg(B, 20 * MIB, Large, true, &[(0, 10 * MIB, 10 * MIB, A)]),
            seg(B + 40 * MIB, 20 * MIB, Large, true, &[]),
        ],
        trace,
    );
    let r = run(&s);
    assert_clean(&r);
    let reserved: Vec<u64> = r.samples.iter().map(|x| x.reserved_bytes() / MIB).collect();
    assert_eq!(
        reserved,
        [0, 40, 40, 40, 40, 40, 20, 40, 40, 40, 40, 20, 40, 60, 40]
    );
    let segs = |at: usize| -> Vec<(u64, u64)> {
        state_at(&s, 0, Some(at))
            .segments
            .iter()
            .map(|x| ((x.address - B) / MIB, x.total_size / MIB))
            .collect()
    };
    assert_eq!(segs(5), [(20, 20)]);
    assert_eq!(segs(6), [(0, 40)]);
    assert_eq!(segs(11), [(0, 20), (40, 20)]);
    assert_eq!(segs(12), [(0, 60)]);
    assert_eq!(segs(13), [(0, 20), (40, 20)]);
    // Expandable segments split any remainder: 25 MiB of 40 MiB leaves 15 MiB.
    assert_eq!(r.samples.at(2).lay().largest_free_gap, 15 * MIB);
    assert_eq!(r.samples.at(13).lay().free_gaps, 1);
    assert_eq!(r.samples.at(13).lay().largest_free_gap, 50 * MIB);
}

#[test]
fn oom_snapshot_and_annotate_leave_the_layout_alone() {
    use SegmentType::Large;
    let mut oom = ev(Action::Oom, 0, 16 * MIB);
    oom.set_extras(Some(ExtrasIdx(0)));
    let mut s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[(0, 8 * MIB, 8 * MIB, A)])],
        vec![
            alloc(B, 8 * MIB),
            ev(Action::Snapshot, 0, 8 * MIB),
            oom,
            ev(Action::Annotate, B, 0),
            ev(Action::Snapshot, 0, 1234),
        ],
    );
    s.event_extras.push(EventExtras {
        device_free: Some(MIB),
        ..EventExtras::NONE
    });
    let r = run(&s);
    assert!(r.report.final_state_matches);
    // samples[i + 1] holds after event i.
    assert_eq!(
        r.samples.at(2),
        Sample {
            event: Some(1),
            ..r.samples.at(3)
        }
    );
    assert_eq!(
        r.samples.at(3),
        Sample {
            event: Some(2),
            ..r.samples.at(4)
        }
    );
    assert_eq!(r.report.clean_events, 4);
    assert_eq!(r.report.anomalies[0].kind, AnomalyKind::Other);
    assert_eq!(r.report.anomalies[0].first_event, Some(4));
    assert_eq!(state_at(&s, 0, Some(2)).failed_request, Some(16 * MIB));
    assert_eq!(r.resolve(&s, Moment::Oom(0)), Ok(Some(2)));
    assert!(r.key_moments(&s).iter().any(|k| k.label == "oom #1"));
}

/// The key moments' places keep no sample; listing the first few OOMs
/// gives those of the whole list, then the end.
#[test]
fn key_moments_at_lists_the_first_ooms_as_the_whole_list_does() {
    use SegmentType::Large;
    let mut trace = vec![alloc(B, 8 * MIB)];
    for _ in 0..5 {
        trace.push(ev(Action::Oom, 0, 16 * MIB));
    }
    let s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[(0, 8 * MIB, 8 * MIB, A)])],
        trace,
    );
    let r = run(&s);
    let all = r.key_moments(&s);
    let f = KeyMomentsFold::read(&r.samples);
    let at = r.key_moments_at(&s, &f, usize::MAX);
    assert_eq!((at.iter(&r.samples).len(), at.ooms()), (all.len(), 5));
    assert_eq!(at.iter(&r.samples).collect::<Vec<_>>(), all);
    let first: Vec<KeyMoment> = at.iter_first(&r.samples, 2).collect();
    let labels: Vec<&str> = first.iter().map(|k| k.label.as_str()).collect();
    assert_eq!(labels.iter().filter(|l| l.starts_with("oom #")).count(), 2);
    assert_eq!(labels.last(), Some(&"end"));
    let mut want = all.clone();
    want.retain(|k| !matches!(k.label.as_str(), "oom #3" | "oom #4" | "oom #5"));
    assert_eq!(first, want);
}

#[test]
fn unknown_actions_are_counted_and_skipped() {
    use SegmentType::Large;
    let s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[(0, 4 * MIB, 4 * MIB, A)])],
        vec![
            ev(Action::Other(ActionName::new(0)), 0, 0),
            alloc(B, 4 * MIB),
        ],
    );
    let r = run(&s);
    assert!(r.report.final_state_matches);
    assert_eq!(r.report.clean_events, 1);
    assert_eq!(r.report.anomalies[0].kind, AnomalyKind::UnknownAction);
    assert_eq!(r.end().allocated, 4 * MIB);
}

#[test]
fn much_free_memory_but_no_large_gap() {
    use SegmentType::Large;
    let segs: Vec<u64> = (0..4).map(|i| B + i * 32 * MIB).collect();
    let mut trace = Vec::new();
    let mut fin = Vec::new();
    for &sa in &segs {
        for k in 0..5 {
            trace.push(alloc(sa + k * 4 * MIB, 4 * MIB));
        }
        trace.extend(free(sa + 4 * MIB, 4 * MIB));
        trace.extend(free(sa + 12 * MIB, 4 * MIB));
        fin.push(seg(
            sa,
            20 * MIB,
            Large,
            false,
            &[
                (0, 4 * MIB, 4 * MIB, A),
                (8 * MIB, 4 * MIB, 4 * MIB, A),
                (16 * MIB, 4 * MIB, 4 * MIB, A),
            ],
        ));
    }
    let mut oom = ev(Action::Oom, 0, 8 * MIB);
    oom.set_extras(Some(ExtrasIdx(0)));
    trace.push(oom);
    let mut s = snap(fin, trace);
    s.event_extras.push(EventExtras {
        device_free: Some(2 * MIB),
        ..EventExtras::NONE
    });
    let r = run(&s);
    assert_clean(&r);
    let at = r.resolve(&s, Moment::Oom(0)).unwrap();
    let x = r.sample_at(at);
    assert_eq!(
        (
            x.external_bytes(),
            x.lay().largest_free_gap,
            x.lay().free_gaps
        ),
        (32 * MIB, 4 * MIB, 8)
    );
    assert_eq!(x.lay().largest_large_request, 4 * MIB);
    assert!((x.lay().fragmentation - 0.875).abs() < 1e-12);
}

#[test]
fn anomalies_are_counted_once_and_the_replay_goes_on() {
    use SegmentType::Large;
    let mut trace = vec![alloc(B, 4 * MIB)];
    trace.extend(free(B, 4 * MIB));
    trace.push(ev(Action::FreeCompleted, B, 4 * MIB)); // double free
    trace.push(ev(Action::FreeCompleted, 0x10, 64)); // outside every segment
    trace.push(alloc(0x20, 64)); // outside every segment
    trace.push(alloc(B, 2 * MIB));
    trace.push(alloc(B + MIB, 2 * MIB)); // inside the block just made
    let s = snap(
        vec![seg(B, 20 * MIB, Large, false, &[(0, 2 * MIB, 2 * MIB, A)])],
        trace,
    );
    let r = run(&s);
    let kinds: Vec<(AnomalyKind, u64)> = r
        .report
        .anomalies
        .iter()
        .map(|a| (a.kind, a.count))
        .collect();
    // Events 3 and 4 free nothing; undoing the double free puts a block at
    // B, so the undo of event 2 collides with it (reported as well).
    assert_eq!(
        kinds,
        [
            (AnomalyKind::FreeOfUnknownAddress, 3),
            (AnomalyKind::OverlappingAlloc, 2)
        ]
    );
    assert_eq!(r.report.clean_events, r.report.events - 5);
    assert_eq!(r.end().allocated, 2 * MIB);
}

mod prop;
