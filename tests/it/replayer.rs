//! One `Replayer` serving several questions answers each exactly as a fresh
//! `replay_device` / `state_at` does: reusing the rebuilt start must not
//! carry anything from one forward pass to the next. Checked on a synthetic
//! training run and on every real snapshot with a trace in ../shared/real.

use crate::util::{each_real_snapshot, synthetic_pickle};
use fragscope::input::load_bytes;
use fragscope::model::Snapshot;
use fragscope::synth::SynthOptions;
use fragscope::timeline::{Replayer, replay_device, state_at};

fn check(name: &str, snap: &Snapshot) {
    for d in snap.devices() {
        let n = snap.trace_of(d).len();
        let fresh = replay_device(snap, d);
        let moments = [None, Some(0), Some(n / 2), n.checked_sub(1)];
        let r = Replayer::new(snap, d);
        // Moments first, then the series, then the report alone: any state
        // a pass left behind would show in the later answers.
        for &at in &moments {
            let (a, b) = (r.state_at(at), state_at(snap, d, at));
            assert_eq!(a.segments, b.segments, "{name}: device {d} at {at:?}");
            assert_eq!(a.origins, b.origins, "{name}: device {d} at {at:?}");
            assert_eq!(a.failed_request, b.failed_request, "{name}: device {d}");
        }
        let again = r.replay();
        assert_eq!(again.samples, fresh.samples, "{name}: device {d} samples");
        assert_eq!(again.report, fresh.report, "{name}: device {d} report");
        assert_eq!(r.report(), fresh.report, "{name}: device {d} report only");
        let last = moments[3];
        assert_eq!(
            r.state_at(last).segments,
            state_at(snap, d, last).segments,
            "{name}: device {d} at the end, after the series"
        );
    }
}

#[test]
fn synthetic_run() {
    let bytes = synthetic_pickle(&SynthOptions {
        events: 20_000,
        seed: 3,
        ..Default::default()
    });
    let l = load_bytes(&bytes, "synth").unwrap();
    let fragscope::input::Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    assert!(snap.traces().iter().map(|t| t.len()).sum::<usize>() >= 20_000);
    check("synth", snap);
}

#[test]
fn real_snapshots() {
    let mut checked = 0;
    let present = each_real_snapshot(true, |name, snap, _| {
        check(name, snap);
        checked += 1;
    });
    assert!(
        !present || checked > 0,
        "no real snapshot with a trace in ../shared/real"
    );
}

/// The replay's end sample and the figures of the final state (computed by
/// the analysis stage from the segments alone) agree, on a hand-made state
/// with an allocated, a pending-free and a free block in a large and a
/// small segment.
#[test]
fn end_sample_agrees_with_the_stats_of_the_final_state() {
    use fragscope::analysis::stats::StateStats;
    use fragscope::model::{Block, BlockState, Segment, SegmentType, StackId};
    const MIB: u64 = 1 << 20;
    const B: u64 = 0x7f00_0000_0000;
    let block = |address, size, requested, state| Block {
        address,
        size,
        requested_size: Some(requested),
        state,
        frames: StackId::EMPTY,
    };
    let segment = |address, total_size, segment_type, blocks| Segment {
        device: 0,
        address,
        total_size,
        allocated_size: None,
        active_size: None,
        requested_size: None,
        stream: 0,
        segment_type,
        pool_id: Some((0, 0)),
        is_expandable: Some(false),
        frames: StackId::EMPTY,
        blocks,
    };
    let s = Snapshot {
        segments: vec![
            segment(
                B,
                20 * MIB,
                SegmentType::Large,
                vec![
                    block(B, 4 * MIB, 3 * MIB, BlockState::ActiveAllocated),
                    block(B + 4 * MIB, 4 * MIB, 0, BlockState::Inactive),
                    block(B + 8 * MIB, 2 * MIB, 2 * MIB, BlockState::ActivePendingFree),
                    block(B + 10 * MIB, 10 * MIB, 0, BlockState::Inactive),
                ],
            ),
            segment(
                B + 64 * MIB,
                2 * MIB,
                SegmentType::Small,
                vec![
                    block(B + 64 * MIB, 512, 0, BlockState::Inactive),
                    block(B + 64 * MIB + 512, 512, 100, BlockState::ActiveAllocated),
                    block(B + 64 * MIB + 1024, 2 * MIB - 1024, 0, BlockState::Inactive),
                ],
            ),
        ],
        device_traces: Some(vec![vec![]]),
        ..Default::default()
    };
    let r = replay_device(&s, 0);
    assert!(
        r.report.final_state_matches,
        "{:?}",
        r.report.final_state_diff
    );
    let st = StateStats::of(&s.segments);
    let e = r.end();
    let l = e.layout.expect("a replayed sample has a layout");
    assert_eq!(
        (
            e.allocated,
            e.active,
            e.reserved_bytes(),
            l.internal_free,
            e.external_bytes(),
            l.pending_free
        ),
        (
            st.allocated_bytes,
            st.active_bytes,
            st.reserved_bytes,
            st.internal_free_bytes,
            st.external_free_bytes,
            st.pending_free_bytes
        )
    );
    assert_eq!(
        (l.largest_free_gap, l.free_gaps),
        (st.largest_free_block_bytes, st.free_blocks)
    );
    assert_eq!(l.fragmentation, st.fragmentation);
    assert_eq!(st.reserved_bytes, 22 * MIB);
    let k = r.key_moments(&s);
    assert_eq!(
        (k.len(), k[0].label.as_str(), k[0].at),
        (1, fragscope::timeline::RECORDED_STATE, None)
    );
}
