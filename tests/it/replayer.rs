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
