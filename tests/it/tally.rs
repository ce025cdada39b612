//! `stats` counts each trace of an uncompressed pickle as it is decoded and
//! keeps none of its entries (`LoadOptions::tally_traces`). Its figures are
//! those of the kept traces, byte for byte, on every real file, fixture and
//! generated shape, errors included; a file whose traces must be read entry
//! by entry (entries named one by one somewhere else) is decoded again
//! keeping them.

use crate::decoder::{NAMED_A, NAMED_B, NAMED_C};
use crate::util::{real_pickles, synthetic_pickle};
use fragscope::analysis::stats::{file_stats, file_stats_with};
use fragscope::input::{self, Content, LoadOptions, Loaded};
use fragscope::synth::{Shape, SynthOptions};
use std::path::Path;

fn load(path: &Path, tally: bool) -> Result<Loaded, String> {
    let opts = LoadOptions {
        tally_traces: tally,
        ..LoadOptions::default()
    };
    input::load(path.to_str().unwrap(), &opts).map_err(|e| format!("{e:#}"))
}

/// `stats --json`'s figures of a loaded file.
fn figures(l: &Loaded) -> Option<String> {
    let Content::Snapshot(s) = &l.content else {
        return None;
    };
    let fs = match &l.tallies {
        Some(t) => file_stats_with(s, t, "f", "pickle".into()),
        None => file_stats(s, "f", "pickle".into()),
    };
    Some(serde_json::to_string(&fs).unwrap())
}

/// Whether the file was counted without its entries; panics where the two
/// loads disagree.
fn agrees(name: &str, path: &Path) -> Option<bool> {
    match (load(path, false), load(path, true)) {
        (Ok(kept), Ok(counted)) => {
            assert!(kept.tallies.is_none(), "{name}: tallied unasked");
            assert_eq!(figures(&kept), figures(&counted), "{name}: other figures");
            let Some(t) = &counted.tallies else {
                return Some(false);
            };
            let Content::Snapshot(s) = &counted.content else {
                panic!("{name}: tallies of something not a snapshot");
            };
            assert_eq!(t.len(), s.traces().len(), "{name}: a tally per trace");
            Some(true)
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{name}: other errors");
            None
        }
        (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
    }
}

#[test]
fn counted_traces_give_the_figures_of_kept_ones() {
    let d = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let shapes = [
        Shape::Narrow,
        Shape::ManySites,
        Shape::Fragmented,
        Shape::Expandable,
        Shape::MultiDevice,
    ];
    for (i, shape) in shapes.into_iter().enumerate() {
        for seed in [1, 7] {
            let p = d.path().join(format!("{shape:?}-{seed}.pickle"));
            let o = SynthOptions {
                events: 3_000 + 700 * i as u64,
                seed,
                shape,
                ..Default::default()
            };
            std::fs::write(&p, synthetic_pickle(&o)).unwrap();
            files.push(p);
        }
    }
    let generated = files.len();
    for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "pickle") {
            files.push(f);
        }
    }
    let fixtures = files.len();
    files.extend(real_pickles().unwrap_or_default());
    let mut counted = 0;
    for (i, f) in files.iter().enumerate() {
        let name = f.display().to_string();
        let tallied = agrees(&name, f);
        // What PyTorch writes is counted, never read twice.
        if i < generated {
            assert_eq!(tallied, Some(true), "{name}: not counted");
        } else if i >= fixtures {
            assert_ne!(tallied, Some(false), "{name}: read twice");
        }
        counted += (tallied == Some(true)) as usize;
    }
    assert!(counted > generated, "only {counted} files counted");
}

#[test]
fn trace_entries_named_elsewhere_are_kept_after_all() {
    let d = tempfile::tempdir().unwrap();
    // L with L[2] named outside the traces, as an unknown key's value, or
    // [L, L]: one list counted once (its tally given to both devices). L's
    // entries listed one by one in a list of their own: read again,
    // keeping them.
    for (name, bytes, tallied) in [
        ("extra", NAMED_A, true),
        ("twice", NAMED_B, true),
        ("entry twice", NAMED_C, false),
    ] {
        let p = d.path().join(format!("{name}.pickle"));
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(agrees(name, &p), Some(tallied), "{name}");
    }
    let p = d.path().join("twice.pickle");
    let l = load(&p, true).unwrap();
    let t = l.tallies.unwrap();
    assert_eq!(t.iter().map(|t| t.events).collect::<Vec<_>>(), [4, 4]);
    // An action this version does not know: its entries go to the general
    // reader, so the traces are read entry by entry, and counted after.
    let bytes = synthetic_pickle(&SynthOptions {
        events: 3_000,
        seed: 3,
        ..Default::default()
    });
    let (from, to) = (b"\x8c\x0efree_requested", b"\x8c\x0efree_postponed");
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    let mut renamed = bytes.clone();
    renamed[at..at + to.len()].copy_from_slice(to);
    let p = d.path().join("renamed.pickle");
    std::fs::write(&p, renamed).unwrap();
    assert_eq!(agrees("renamed", &p), Some(false));
    let figures = figures(&load(&p, true).unwrap()).unwrap();
    assert!(figures.contains("\"free_postponed\":"), "{figures}");
}
