//! The configurations `simulate` and `report` run share a run only where
//! it is provably the same run: on the real snapshots and on generated
//! ones of every shape, the sweep's answer equals one run per
//! configuration, figure for figure, and the sharing happens.

use crate::util::{each_real_snapshot, synthetic_pickle};
use fragscope::input::{Content, load_bytes};
use fragscope::model::Snapshot;
use fragscope::sim::{self, SimConfig, plan::Plan};
use fragscope::synth::{Shape, SynthOptions};

/// Beside the default sweep: configurations that round alike or differ
/// in the split settings alone.
const MORE: &[&str] = &[
    "max_split_size_mb:512,max_non_split_rounding_mb:64",
    "max_split_size_mb:4096",
    "roundup_power2_divisions:1",
    "roundup_power2_divisions:[256:1,>:4]",
    "expandable_segments:True,max_split_size_mb:128",
    "expandable_segments:True,max_split_size_mb:1024",
    "roundup_power2_divisions:4,max_split_size_mb:2048",
];

fn configs() -> Vec<SimConfig> {
    (sim::DEFAULT_SWEEP.iter().chain(MORE))
        .map(|s| SimConfig::parse(s).unwrap())
        .collect()
}

/// Checks one device; returns how many configurations shared a run.
fn check(name: &str, snap: &Snapshot, d: i64) -> usize {
    let start = sim::start_state(snap, d);
    let input = sim::run::prepare_from(snap, d, None, start);
    let cfgs = configs();
    let Ok(swept) = sim::run_configs(&input, &cfgs) else {
        // A start state the model refuses: each run refuses it alike.
        assert!(sim::run::run(&input, &cfgs[0]).is_err(), "{name}");
        return 0;
    };
    let mut all = vec![input.recorded_config.clone()];
    all.extend(cfgs);
    assert_eq!(swept.len(), all.len());
    for (i, (c, got)) in all.iter().zip(&swept).enumerate() {
        let mut want = sim::run::run(&input, c).unwrap();
        // Only the run under the recorded settings (and one it shares)
        // keeps its segment events, which its fidelity compares with the
        // recording's: another run's are left out.
        if i > 0 && got.segment_events.is_empty() {
            want.segment_events.clear();
            want.segment_event_at.clear();
        }
        // The run under the recorded settings comes with its segment
        // events compared with the recording's: the count a run alone
        // would be given.
        if got.matched_segment_events.is_some() {
            want.matched_segment_events = Some(sim::fidelity::matched(&input, &want));
        }
        assert_eq!(
            format!("{got:?}"),
            format!("{want:?}"),
            "{name}: device {d}: {}",
            c.label()
        );
    }
    let plan = sim::plan::plan(&input, &all);
    // A run of its own but the recorded settings' (or the one those take
    // as theirs) holds no segment events.
    for (i, p) in plan.iter().enumerate() {
        if i > 0 && *p == Plan::Run && plan[0] != Plan::AfterProbe(i) {
            assert!(
                swept[i].segment_events.is_empty(),
                "{name}: {}",
                all[i].label()
            );
        }
    }
    plan.iter()
        .enumerate()
        .filter(|&(i, p)| match *p {
            Plan::Run => false,
            Plan::SameAs(_) => true,
            Plan::AfterProbe(j) => sim::plan::shares_run(&swept[j], &all[i]),
        })
        .count()
}

#[test]
fn a_shared_run_equals_its_own_run_on_every_shape() {
    let mut shared = 0;
    for (shape, seed) in [
        (Shape::Narrow, 1),
        (Shape::ManySites, 2),
        (Shape::Fragmented, 3),
        (Shape::Expandable, 4),
        (Shape::MultiDevice, 5),
    ] {
        let bytes = synthetic_pickle(&SynthOptions {
            events: 4000,
            seed,
            shape,
            ..Default::default()
        });
        let l = load_bytes(&bytes, "synth").unwrap();
        let Content::Snapshot(snap) = &l.content else {
            panic!("not a snapshot")
        };
        for d in sim::trace::simulable_devices(snap) {
            shared += check(shape.name(), snap, d);
        }
    }
    assert!(shared > 0, "no configuration shared a run");
}

#[test]
fn a_shared_run_equals_its_own_run_on_the_real_snapshots() {
    let mut devices = 0;
    let present = each_real_snapshot(true, |name, snap, _| {
        for d in sim::trace::simulable_devices(snap) {
            check(name, snap, d);
            devices += 1;
        }
    });
    if present {
        assert!(devices > 0);
    }
}
