//! The what-if model sums each run up while it goes (no per-event memory),
//! and `report` hands it the start state of its own replay. Both must give
//! what the plain way gives: every step kept, then summed up (the
//! reference below), and a model that replays the trace itself. Checked on
//! a synthetic training run and on every real snapshot with a trace in
//! ../shared/real.

use crate::util::{each_real_snapshot, synthetic_pickle};
use fragscope::core::style::Style;
use fragscope::input::{Content, Loaded, load_bytes};
use fragscope::model::Snapshot;
use fragscope::pipeline::{WHAT_IF_CONFIGS, attach_what_if, build_report, build_report_what_if};
use fragscope::sim::{self, SimConfig, Step, run};
use fragscope::synth::SynthOptions;
use fragscope::timeline::{Sample, downsample::downsample};

/// Worst fragmentation and smallest largest gap over the moments with
/// reserved at least half the peak, from every step.
fn near_peak(all: &[Step]) -> (u64, u64, f64, u64) {
    let peak_reserved = all.iter().map(|s| s.reserved).max().unwrap_or(0);
    let peak_allocated = all.iter().map(|s| s.allocated).max().unwrap_or(0);
    let mut worst = 0.0f64;
    let mut gap = u64::MAX;
    for s in all
        .iter()
        .filter(|s| s.reserved > 0 && s.reserved.saturating_mul(2) >= peak_reserved)
    {
        worst = worst.max(fragscope::model::fragmentation(s.largest_free, s.inactive));
        gap = gap.min(s.largest_free);
    }
    let gap = if gap == u64::MAX { 0 } else { gap };
    (peak_reserved, peak_allocated, worst, gap)
}

fn check_runs(name: &str, snap: &Snapshot) -> usize {
    let mut checked = 0;
    for d in sim::trace::simulable_devices(snap) {
        let input = run::prepare(snap, d, None);
        check_recorded_reserved(name, snap, d, &input.recorded_reserved);
        let mut configs = vec![input.recorded_config.clone()];
        configs.extend(WHAT_IF_CONFIGS.iter().map(|s| SimConfig::parse(s).unwrap()));
        for cfg in &configs {
            let mut steps = Vec::new();
            let Ok(r) = run::run_observed(&input, cfg, |i, s| {
                assert_eq!(i, steps.len());
                steps.push(*s)
            }) else {
                continue;
            };
            let what = format!("{name}: device {d}, {}", cfg.label());
            assert_eq!(steps.len(), input.events, "{what}");
            let all: Vec<Step> = std::iter::once(r.start)
                .chain(steps.iter().copied())
                .collect();
            let (peak_r, peak_a, worst, gap) = near_peak(&all);
            assert_eq!(r.peak_reserved, peak_r, "{what}: peak reserved");
            assert_eq!(r.peak_allocated, peak_a, "{what}: peak allocated");
            assert_eq!(r.worst_fragmentation.to_bits(), worst.to_bits(), "{what}");
            assert_eq!(r.smallest_largest_gap, gap, "{what}: smallest gap");
            assert_eq!(r.end, *all.last().unwrap(), "{what}: end");

            // Reserved error at the start and after each event that
            // completes a request.
            let requests = sim::trace::requests(
                snap.trace_of(d),
                snap,
                input.capacity,
                &input.recorded_reserved,
            );
            assert_eq!(input.requests.len(), requests.len(), "{what}: requests");
            assert_eq!(
                input.requests.allocations(),
                requests
                    .iter()
                    .filter(|q| matches!(
                        q.request,
                        sim::trace::Request::Alloc { key: Some(_), .. }
                    ))
                    .count(),
                "{what}: allocations"
            );
            let mut points: Vec<usize> = requests.iter().map(|q| q.event).collect();
            points.dedup();
            let start_err = r.start.reserved.abs_diff(input.recorded_start_reserved);
            let (mut max, mut at, mut sum) = (start_err, None, start_err as f64);
            for &i in &points {
                let e = steps[i].reserved.abs_diff(input.recorded_reserved[i]);
                sum += e as f64;
                if e > max {
                    max = e;
                    at = Some(i);
                }
            }
            let e = &r.reserved_error;
            assert_eq!(e.points, points.len() + 1, "{what}: points");
            assert_eq!((e.max, e.max_event), (max, at), "{what}: largest error");
            assert_eq!(e.sum.to_bits(), sum.to_bits(), "{what}: error sum");

            let samples: Vec<Sample> = all
                .iter()
                .enumerate()
                .map(|(i, s)| Sample {
                    event: Some(i as u32),
                    reserved: Some(s.reserved),
                    ..Default::default()
                })
                .collect();
            let curve: Vec<(u32, u64)> = downsample(&samples, sim::SERIES_POINTS)
                .iter()
                .map(|s| (s.event.unwrap_or(0), s.reserved_bytes()))
                .collect();
            assert_eq!(r.reserved_points, curve, "{what}: curve");
            checked += 1;
        }
    }
    checked
}

/// The recorded reserved bytes, kept as the events where they change,
/// read back as one figure per event computed the plain way.
fn check_recorded_reserved(
    name: &str,
    snap: &Snapshot,
    d: i64,
    rec: &sim::trace::RecordedReserved,
) {
    let trace = snap.trace_of(d);
    let mut r: i128 = snap.segments_of(d).map(|s| s.total_size as i128).sum();
    let mut want = vec![0u64; trace.len()];
    for (i, e) in trace.iter().enumerate().rev() {
        want[i] = r.max(0) as u64;
        r -= sim::trace::segment_delta(e);
    }
    assert_eq!(rec.len(), want.len(), "{name}: device {d}");
    assert_eq!(rec.iter().len(), want.len(), "{name}: device {d}");
    assert_eq!(rec.iter().collect::<Vec<_>>(), want, "{name}: device {d}");
    for (i, w) in want.iter().enumerate() {
        assert_eq!((rec.get(i), rec[i]), (Some(*w), *w), "{name}: event {i}");
    }
    assert_eq!(rec.get(want.len()), None);
    assert_eq!(rec.last(), want.last().copied());
}

/// `report`'s what-if model from its own replay against the model
/// replaying the trace itself.
fn check_report(name: &str, snap: &Snapshot, loaded: &Loaded) {
    let Ok(mut plain) = build_report(&Style::default(), snap, loaded, None, None) else {
        return;
    };
    attach_what_if(&mut plain, snap);
    let shared = build_report_what_if(&Style::default(), snap, loaded, None, None, false).unwrap();
    assert_eq!(
        serde_json::to_string(&plain.what_if).unwrap(),
        serde_json::to_string(&shared.what_if).unwrap(),
        "{name}: what-if model"
    );
    assert_eq!(plain.verdict, shared.verdict, "{name}: verdict");
    assert_eq!(plain.quality, shared.quality, "{name}: data-quality notes");
}

#[test]
fn synthetic_run() {
    let bytes = synthetic_pickle(&SynthOptions {
        events: 5_000,
        seed: 5,
        ..Default::default()
    });
    let l = load_bytes(&bytes, "synth").unwrap();
    let Content::Snapshot(snap) = &l.content else {
        panic!("not a snapshot")
    };
    assert!(check_runs("synth", snap) >= 4);
    check_report("synth", snap, &l);
}

#[test]
fn real_snapshots() {
    let mut checked = 0;
    let present = each_real_snapshot(true, |name, snap, l| {
        checked += check_runs(name, snap);
        check_report(name, snap, l);
    });
    assert!(
        !present || checked > 0,
        "no real snapshot with a trace in ../shared/real"
    );
}
