//! The replayed series is stored compactly and read back exactly: every
//! replayed sample fits the compact form (so no series silently falls back
//! to plain samples), and reading it (by index, in either direction,
//! downsampled while read) gives what the plain samples give. Checked on
//! generated training runs and on every real snapshot with a trace in
//! ../shared/real.

use crate::util::{each_real_snapshot, synthetic_pickle};
use fragscope::input::load_bytes;
use fragscope::model::Snapshot;
use fragscope::synth::SynthOptions;
use fragscope::timeline::downsample::{downsample, downsample_series};
use fragscope::timeline::{Sample, Series, replay};

/// Most bytes a replayed sample may take on average in a series of many.
const BYTES_PER_SAMPLE: usize = 24;

/// Checks every device's series; returns its bytes and samples in all.
fn check(name: &str, snap: &Snapshot) -> (usize, usize) {
    let (mut bytes, mut samples) = (0, 0);
    for r in replay(snap) {
        let d = r.device;
        let s = &r.samples;
        let plain: Vec<Sample> = s.to_vec();
        assert_eq!(
            plain.len(),
            snap.trace_of(d).len() + 1,
            "{name}: device {d}"
        );
        assert!(s.is_compact(), "{name}: device {d} stored plain");
        bytes += s.heap_bytes();
        samples += s.len();
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
    eprintln!(
        "{name}: {bytes} bytes for {samples} samples, {:.2} per sample",
        bytes as f64 / samples.max(1) as f64
    );
    (bytes, samples)
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
        let bytes = synthetic_pickle(&o);
        let l = load_bytes(&bytes, "synth").unwrap();
        let fragscope::input::Content::Snapshot(snap) = &l.content else {
            panic!("not a snapshot")
        };
        let (bytes, samples) = check(&format!("synth seed {seed}"), snap);
        assert!(
            bytes <= BYTES_PER_SAMPLE * samples,
            "synth seed {seed}: {bytes} bytes for {samples} samples"
        );
    }
}

#[test]
fn real_snapshots() {
    let (mut checked, mut bytes, mut samples) = (0, 0, 0);
    let present = each_real_snapshot(false, |name, snap, _| {
        let (b, n) = check(name, snap);
        (bytes, samples) = (bytes + b, samples + n);
        checked += 1;
    });
    assert!(
        bytes <= BYTES_PER_SAMPLE * samples,
        "{bytes} bytes for {samples} samples of real snapshots"
    );
    assert!(
        !present || checked > 0,
        "no real snapshot in ../shared/real"
    );
}

/// The report hands each device's whole series on once it is done with it
/// (`view` draws it rather than a copy made while the report was built):
/// one series per device of the report, the one `replay` makes.
#[test]
fn the_report_hands_on_each_device_series() {
    let o = SynthOptions {
        events: 4_000,
        shape: fragscope::synth::Shape::MultiDevice,
        devices: 3,
        busy_devices: 2,
        seed: 4,
        ..Default::default()
    };
    let bytes = synthetic_pickle(&o);
    let l = load_bytes(&bytes, "synth").unwrap();
    let fragscope::input::Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    let st = fragscope::core::style::Style::default();
    let mut kept: Vec<(i64, Series)> = Vec::new();
    let report = fragscope::pipeline::build_report_with(
        &st,
        snap,
        &l,
        None,
        None,
        |_, _| {},
        |_| {},
        |d, s| kept.push((d, s)),
    )
    .unwrap();
    let devices: Vec<i64> = report.devices.iter().map(|d| d.device).collect();
    assert_eq!(devices.len(), 3);
    assert_eq!(kept.iter().map(|(d, _)| *d).collect::<Vec<_>>(), devices);
    for (r, (d, s)) in replay(snap).iter().zip(&kept) {
        assert_eq!(r.device, *d);
        assert_eq!(s.len(), snap.trace_of(*d).len() + 1, "device {d}");
        assert_eq!(s.to_vec(), r.samples.to_vec(), "device {d}");
    }
}
