//! State checkpoints answer every moment exactly as `state_at` does, with
//! the interval and the budget they were given or the thinner ones the
//! budget forced: checked at every event of synthetic runs of each kind of
//! layout and on the fixtures with traces.

use crate::util::{fixture, synthetic_pickle};
use fragscope::input::{Content, load_bytes};
use fragscope::model::Snapshot;
use fragscope::synth::{Shape, SynthOptions};
use fragscope::timeline::checkpoints::Checkpoints;
use fragscope::timeline::{for_each_state_at, state_at};

/// Every `stride`-th event (and the start and the last) against one
/// forward replay.
fn check(name: &str, snap: &Snapshot, cp: &Checkpoints, d: i64, stride: usize) {
    let n = snap.trace_of(d).len();
    let events: Vec<usize> = (0..n).step_by(stride).chain(n.checked_sub(1)).collect();
    let mut k = 0;
    for_each_state_at(snap, d, &events, |want| {
        let got = cp.state_at(want.at);
        assert_eq!(
            got.segments, want.segments,
            "{name}: device {d} at {:?}",
            want.at
        );
        assert_eq!(
            got.origins, want.origins,
            "{name}: device {d} at {:?}",
            want.at
        );
        assert_eq!(
            got.failed_request, want.failed_request,
            "{name}: device {d}"
        );
        assert_eq!(got.at, want.at, "{name}: device {d}");
        k += 1;
    });
    assert_eq!(k, events.len());
    let start = state_at(snap, d, None);
    assert_eq!(
        cp.state_at(None).segments,
        start.segments,
        "{name}: the start"
    );
}

fn snapshot(shape: Shape, events: u64) -> fragscope::input::Loaded {
    let bytes = synthetic_pickle(&SynthOptions {
        events,
        seed: 5,
        shape,
        ..Default::default()
    });
    load_bytes(&bytes, "synth").unwrap()
}

#[test]
fn every_event_of_each_shape() {
    for shape in [Shape::Narrow, Shape::Fragmented, Shape::Expandable] {
        let l = snapshot(shape, 3000);
        let Content::Snapshot(snap) = &l.content else {
            panic!("not a snapshot")
        };
        for d in snap.devices() {
            let n = snap.trace_of(d).len();
            let cp = Checkpoints::with_budget(snap, d, usize::MAX, 97);
            assert_eq!(cp.every(), 97, "{shape:?}: no budget to thin for");
            assert_eq!(
                cp.len(),
                n.div_ceil(97).max(1),
                "{shape:?}: one per 97 events"
            );
            check(&format!("{shape:?}"), snap, &cp, d, 1);
        }
    }
}

#[test]
fn a_small_budget_thins_them_out_and_bounds_them() {
    let l = snapshot(Shape::Fragmented, 4000);
    let Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    let d = snap.devices()[0];
    let roomy = Checkpoints::with_budget(snap, d, usize::MAX, 16);
    // Room for about a tenth of them.
    let budget = roomy.bytes() / 10;
    let cp = Checkpoints::with_budget(snap, d, budget, 16);
    assert!(cp.bytes() <= budget, "{} > {budget}", cp.bytes());
    assert!(cp.every() > 16, "interval {}", cp.every());
    assert!(cp.len() >= 2, "{} checkpoints", cp.len());
    check("thinned", snap, &cp, d, 7);
    // No room even for the start: every state is a replay from the start.
    let none = Checkpoints::with_budget(snap, d, 0, 16);
    check("no budget", snap, &none, d, 101);
}

/// A served page's budget: a quarter of the input shared by its devices,
/// within a floor and the default, so that its checkpoints and the model
/// together stay within the input's size.
#[test]
fn the_served_budget_follows_the_input() {
    use fragscope::timeline::checkpoints::{DEFAULT_BUDGET, budget_for};
    let mib = 1u64 << 20;
    assert_eq!(budget_for(400 * mib, 1), 25 << 20);
    assert_eq!(budget_for(400 * mib, 4), 25 << 18);
    assert_eq!(budget_for(64 * 1024 * mib, 1), DEFAULT_BUDGET);
    // A small input, or many devices: a few checkpoints still.
    assert_eq!(budget_for(mib, 1), budget_for(0, 8));
    assert!(budget_for(0, 0) > 0 && budget_for(0, 0) < 8 << 20);
}

#[test]
fn fixtures_with_traces() {
    for name in [
        "pools_pending_proto4.pickle",
        "expandable_oom_proto5.pickle",
        "view_oom_two_devices.pickle",
        "pending_frees_trace.json",
    ] {
        let l = fragscope::input::load(&fixture(name), &Default::default()).unwrap();
        let Content::Snapshot(snap) = &l.content else {
            panic!("{name}: not a snapshot")
        };
        for d in snap.devices() {
            let cp = Checkpoints::with_budget(snap, d, usize::MAX, 3);
            check(name, snap, &cp, d, 1);
        }
    }
}

/// A series read from any sample on (`skip`, which jumps to a checkpoint of
/// the packed rows) gives the samples read from the start.
#[test]
fn series_skip_reads_the_same_samples() {
    let l = snapshot(Shape::Narrow, 3000);
    let Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    let d = snap.devices()[0];
    let s = fragscope::timeline::replay_device(snap, d).samples;
    let all = s.to_vec();
    for k in [
        0,
        1,
        63,
        64,
        65,
        127,
        128,
        1000,
        all.len() - 1,
        all.len(),
        all.len() + 5,
    ] {
        let got: Vec<_> = s.iter().skip(k).take(70).collect();
        let want: Vec<_> = all.iter().skip(k).take(70).copied().collect();
        assert_eq!(got, want, "from {k}");
    }
}

/// A scrub replayed in a kept layout (forward from the last one, or back
/// and across checkpoints) and the key moments of a written page from one
/// replay (`Replayer::states_at`, in any order; and from the replay that
/// hands on the lifetimes, `each_lifetime_and_states_at`) are the states
/// `state_at` gives.
#[test]
fn a_kept_layout_and_one_replay_give_the_same_states() {
    use fragscope::timeline::Replayer;
    use fragscope::timeline::checkpoints::Scratch;
    let l = snapshot(Shape::Fragmented, 3000);
    let Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    for d in snap.devices() {
        let n = snap.trace_of(d).len();
        if n < 10 {
            continue;
        }
        let cp = Checkpoints::with_budget(snap, d, usize::MAX, 97);
        let ats: Vec<Option<usize>> = [n / 2, n / 2 + 1, n / 2 + 40, n / 3, 5, n - 1, 0]
            .into_iter()
            .map(Some)
            .chain([None, Some(n / 2 + 1)])
            .collect();
        let mut scratch = Scratch::default();
        let replayer = Replayer::new(snap, d);
        let from_one_replay = replayer.states_at(&ats);
        assert_eq!(from_one_replay.len(), ats.len());
        let mut lives = Vec::new();
        let with_lives = replayer.each_lifetime_and_states_at(&ats, |i, l| lives.push((i, l)));
        assert_eq!(with_lives.len(), ats.len());
        lives.sort_by_key(|x| x.0);
        let all = replayer.lifetimes();
        assert_eq!(lives.len(), all.len(), "device {d}");
        assert!((lives.iter()).all(|(i, l)| all[*i] == *l), "device {d}");
        for ((at, once), beside) in ats.iter().zip(&from_one_replay).zip(&with_lives) {
            let want = state_at(snap, d, *at);
            let kept = cp.state_at_in(&mut scratch, *at);
            let views = [
                ("kept layout", &kept),
                ("one replay", once),
                ("beside the lifetimes", beside),
            ];
            for (name, got) in views {
                assert_eq!(got.segments, want.segments, "{name}: device {d} at {at:?}");
                assert_eq!(got.origins, want.origins, "{name}: device {d} at {at:?}");
                assert_eq!(got.at, want.at, "{name}: device {d}");
                assert_eq!(got.failed_request, want.failed_request, "{name}");
            }
        }
    }
}
