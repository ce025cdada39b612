//! The replayed series is stored compactly and read back exactly: every
//! replayed sample fits the compact form (so no series silently falls back
//! to plain samples), and reading it (by index, in either direction,
//! downsampled while read) gives what the plain samples give. Checked on
//! generated training runs and on every real snapshot with a trace in
//! ../shared/real.

mod util;
use fragscope::input::load_bytes;
use fragscope::model::Snapshot;
use fragscope::replay::downsample::{downsample, downsample_series};
use fragscope::replay::{Sample, Series, replay};
use fragscope::synth::{SynthOptions, generate, write_pickle};
use util::each_real_snapshot;

/// Bytes a replayed sample takes in a series.
const COMPACT: usize = 72;

fn check(name: &str, snap: &Snapshot) {
    for r in replay(snap) {
        let d = r.device;
        let s = &r.samples;
        let plain: Vec<Sample> = s.to_vec();
        assert_eq!(
            plain.len(),
            snap.trace_of(d).len() + 1,
            "{name}: device {d}"
        );
        assert_eq!(
            s.heap_bytes(),
            COMPACT * s.len(),
            "{name}: device {d} stored plain"
        );
        for (i, x) in plain.iter().enumerate() {
            assert_eq!(
                x.event,
                i.checked_sub(1).map(|e| e as u32),
                "{name}: device {d}"
            );
            assert_eq!(s.get(i), Some(*x), "{name}: device {d} sample {i}");
        }
        let back: Vec<Sample> = s.iter().rev().collect();
        assert!(
            back.iter().rev().eq(plain.iter()),
            "{name}: device {d} reversed"
        );
        assert_eq!(&Series::from(plain.clone()), s, "{name}: device {d}");
        for n in [2, 7, 600, plain.len()] {
            assert_eq!(
                downsample_series(s, n),
                downsample(&plain, n),
                "{name}: device {d} downsampled to {n}"
            );
        }
        let end = r.end();
        assert_eq!(Some(&end), plain.last(), "{name}: device {d} end");
    }
}

#[test]
fn generated_runs() {
    for (seed, capacity) in [(1, None), (5, Some(6u64 << 30)), (9, Some(20 << 30))] {
        let mut o = SynthOptions {
            events: 5_000,
            seed,
            ..Default::default()
        };
        if let Some(c) = capacity {
            o.capacity = c;
        }
        let mut bytes = Vec::new();
        write_pickle(&generate(&o), &mut bytes).unwrap();
        let l = load_bytes(&bytes, "synth").unwrap();
        let fragscope::input::Content::Snapshot(snap) = &l.content else {
            panic!("not a snapshot")
        };
        check(&format!("synth seed {seed}"), snap);
    }
}

#[test]
fn real_snapshots() {
    let mut checked = 0;
    let present = each_real_snapshot(false, |name, snap, _| {
        check(name, snap);
        checked += 1;
    });
    assert!(
        !present || checked > 0,
        "no real snapshot in ../shared/real"
    );
}
