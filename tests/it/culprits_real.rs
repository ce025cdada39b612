//! `culprits` on the real snapshots in ../shared/real (skipped with a note
//! when the folder is absent). Pins, for files recorded with stacks, that the
//! top culprit names the program's own Python (file and line), not an
//! allocator, dispatcher or CPython frame; and checks the scoring invariants
//! on every snapshot.

use fragscope::analysis::culprits::{Analysis, Options, analyze, final_state, recorded_origins};
use fragscope::analysis::frames::SiteKind;
use fragscope::input::{LoadOptions, load_snapshot};
use fragscope::model::{BlockState, Snapshot};
use fragscope::pipeline::states;
use fragscope::timeline::Moment;
use std::path::PathBuf;

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real");

fn real(name: &str) -> Option<Snapshot> {
    let p = PathBuf::from(REAL).join(name);
    if !p.exists() {
        eprintln!("note: {} is absent; skipping", p.display());
        return None;
    }
    Some(
        load_snapshot(p.to_str().unwrap(), &LoadOptions::default())
            .unwrap()
            .0,
    )
}

fn at_end(snap: &Snapshot, device: i64) -> Analysis {
    analyze(
        snap,
        &final_state(snap, device),
        &Options {
            top: 10,
            ..Options::default()
        },
    )
}

struct Pin {
    file: &'static str,
    device: i64,
    /// Base name, line and function of the top culprit's call site.
    site: (&'static str, i64, &'static str),
    stranded: u64,
    total_stranded: u64,
    largest_gap: u64,
    culprits: u64,
    /// Label of the top call-site group and the largest gap without it.
    top_group: &'static str,
    gap_without_top_group: u64,
}

const PINS: &[Pin] = &[
    Pin {
        // Windows paths, Python frames only.
        file: "decomfl_windows-paths_torch2.9.pickle",
        device: 0,
        site: ("adam_forward.py", 267, "update_K_param_paramwise"),
        stranded: 76_515_328,
        total_stranded: 233_375_232,
        largest_gap: 155_189_248,
        culprits: 59,
        top_group: "adam_forward.py:267 (update_K_param_paramwise)",
        gap_without_top_group: 155_189_248,
    },
    Pin {
        // C++ stacks (stacks="all"): allocator and dispatcher frames first.
        file: "bcrafton_cs336_user_metadata.pickle",
        device: 0,
        site: ("optimizer.py", 74, "step"),
        stranded: 11_534_336,
        total_stranded: 179_811_328,
        largest_gap: 155_189_248,
        culprits: 84,
        top_group: "(no stack recorded)",
        gap_without_top_group: 155_189_248,
    },
    Pin {
        file: "octreenca_inference_24GB_few-segments.pickle",
        device: 0,
        site: ("inference2_peso_oct.py", 209, "<module>"),
        stranded: 1_493_606_400,
        total_stranded: 2_532_906_496,
        largest_gap: 7_354_712_064,
        culprits: 4,
        top_group: "inference2_peso_oct.py:209 (<module>)",
        gap_without_top_group: 7_354_712_064,
    },
    Pin {
        // A Jupyter run through transformers: the model file is the site.
        file: "ftcourse_peft-lora_no-time_us.pickle",
        device: 0,
        site: ("modeling_llama.py", 216, "forward"),
        stranded: 53_788_672,
        total_stranded: 1_616_002_560,
        largest_gap: 130_023_424,
        culprits: 238,
        top_group: "modeling_llama.py:649 (forward)",
        gap_without_top_group: 130_023_424,
    },
    Pin {
        // Expandable segments, three devices; removing the top site's two
        // blocks merges a 472 MiB gap.
        file: "constructor-sun_code-location_oom_expandable_3dev.pickle",
        device: 0,
        site: ("models.py", 181, "update_nodes"),
        stranded: 251_563_520,
        total_stranded: 447_054_848,
        largest_gap: 170_372_608,
        culprits: 50,
        top_group: "models.py:181 (update_nodes)",
        gap_without_top_group: 495_136_256,
    },
    Pin {
        // The device that ran out of memory.
        file: "constructor-sun_code-location_oom_expandable_3dev.pickle",
        device: 1,
        site: ("models.py", 81, "init_instructions"),
        stranded: 21_260_731_904,
        total_stranded: 21_262_169_600,
        largest_gap: 27_493_662_720,
        culprits: 2,
        top_group: "models.py:81 (init_instructions)",
        gap_without_top_group: 27_493_662_720,
    },
    Pin {
        file: "sketchkv_llama-kvcache_torch2.1.2_17GB.pickle",
        device: 0,
        site: ("myquant.py", 128, "my_resduialquant"),
        stranded: 49_152_000,
        total_stranded: 249_614_336,
        largest_gap: 452_984_832,
        culprits: 39,
        top_group: "myquant.py:128 (my_resduialquant)",
        gap_without_top_group: 452_984_832,
    },
];

#[test]
fn top_culprits_name_user_code() {
    for p in PINS {
        let Some(snap) = real(p.file) else { return };
        let a = at_end(&snap, p.device);
        let top = a.ranked().next().expect("at least one culprit");
        let ctx = format!("{} device {}", p.file, p.device);
        assert_eq!(top.call_site.kind, SiteKind::User, "{ctx}");
        let file = &top.call_site.file;
        assert_eq!(
            (
                fragscope::analysis::frames::basename(file),
                top.call_site.line,
                top.call_site.function.as_str()
            ),
            p.site,
            "{ctx}"
        );
        // Read the raw file name, not our classification: a Python file
        // outside PyTorch, and a frame that is really on the block's stack.
        assert!(file.ends_with(".py"), "{ctx}: {file}");
        let parts: Vec<&str> = file.split(['/', '\\']).collect();
        assert!(
            !parts
                .windows(2)
                .any(|w| w[0].ends_with("-packages") && w[1] == "torch"),
            "{ctx}: {file}"
        );
        let on_stack = snap.stack(top.stack).iter().any(|&f| {
            let fr = snap.frame(f);
            snap.str(fr.filename) == file && fr.line == top.call_site.line
        });
        assert!(on_stack, "{ctx}");
        assert_eq!(top.stranded, p.stranded, "{ctx}");
        assert_eq!(a.total_stranded, p.total_stranded, "{ctx}");
        assert_eq!(a.largest_gap, p.largest_gap, "{ctx}");
        assert_eq!(a.culprits, p.culprits, "{ctx}");
        assert_eq!(a.groups[0].label, p.top_group, "{ctx}");
        assert_eq!(
            a.without_top_group.as_ref().unwrap().largest_gap_after,
            p.gap_without_top_group,
            "{ctx}"
        );
    }
}

#[test]
fn stacks_with_native_frames_skip_to_the_user_frame() {
    // Recorded with C++ frames: the innermost frame is the allocator's.
    let Some(snap) = real("bcrafton_cs336_user_metadata.pickle") else {
        return;
    };
    let a = at_end(&snap, 0);
    let top = a.ranked().next().unwrap();
    let innermost = snap.frame(snap.stack(top.stack)[0]);
    assert_eq!(snap.str(innermost.name), "torch::unwind::unwind()");
    let kept = fragscope::analysis::frames::filtered(&snap, top.stack);
    assert!(kept.len() < snap.stack(top.stack).len());
    assert!(
        snap.str(snap.frame(kept[0]).name)
            .contains("CUDACachingAllocator")
    );
}

/// Without a request, every inactive byte of a segment that holds an active
/// block is stranded, and charged to exactly one block.
#[test]
fn scoring_invariants_on_every_snapshot() {
    let dir = PathBuf::from(REAL);
    if !dir.exists() {
        eprintln!("note: {REAL} is absent; skipping");
        return;
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "pkl"))
        .collect();
    names.sort();
    let mut checked = 0;
    for p in names {
        let Ok((snap, _)) = load_snapshot(p.to_str().unwrap(), &LoadOptions::default()) else {
            eprintln!("note: {} does not load; not checked here", p.display());
            continue;
        };
        for d in snap.devices() {
            let a = at_end(&snap, d);
            let ctx = format!("{} device {d}", p.display());
            let pinned_free: u64 = snap
                .segments_of(d)
                .filter(|s| s.blocks.iter().any(|b| b.state != BlockState::Inactive))
                .flat_map(|s| &s.blocks)
                .filter(|b| b.state == BlockState::Inactive)
                .map(|b| b.size)
                .sum();
            assert_eq!(a.total_stranded, pinned_free, "{ctx}");
            assert_eq!(
                a.blocks.iter().map(|b| b.stranded).sum::<u64>(),
                a.total_stranded,
                "{ctx}"
            );
            let ranks: Vec<usize> = a.ranked().map(|b| b.rank.unwrap()).collect();
            assert_eq!(
                ranks,
                (1..=a.culprits as usize).collect::<Vec<_>>(),
                "{ctx}"
            );
            assert!(
                a.ranked()
                    .zip(a.ranked().skip(1))
                    .all(|(x, y)| x.stranded >= y.stranded),
                "{ctx}"
            );
            if let Some(c) = &a.without_top_group {
                assert!(c.largest_gap_after >= c.largest_gap_before, "{ctx}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} devices checked");
}

/// `--at oom` on the real OOM snapshot: the replayed state at the failed
/// request, measured against it.
#[test]
fn works_at_the_oom_moment() {
    let Some(snap) = real("constructor-sun_code-location_oom_expandable_3dev.pickle") else {
        return;
    };
    let st = states(&snap, "oom", Moment::Oom(0), Some(1)).unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].at, Some(421));
    assert_eq!(st[0].failed_request, Some(5_308_694_528));
    let a = analyze(&snap, &st[0], &Options::default());
    assert_eq!(a.target, Some(5_308_694_528));
    assert_eq!(a.target_source, Some("failed_request"));
    let top = a.ranked().next().expect("a culprit at the OOM");
    assert_eq!(top.call_site.kind, SiteKind::User);
    assert!(top.call_site.file.ends_with(".py"));
    // Every gap smaller than the request counts, so the stranded bytes are
    // exactly the free bytes in segments with a live block and gaps under
    // 4.94 GiB; and none of those gaps could take the request.
    assert!(a.total_stranded > 0);
    assert!(a.largest_gap < 5_308_694_528);
    assert_eq!(
        a.blocks.iter().map(|b| b.stranded).sum::<u64>(),
        a.total_stranded
    );
    // Without `--device`, the devices without an OOM say so instead of
    // failing the command.
    let all = states(&snap, "oom", Moment::Oom(0), None).unwrap();
    assert_eq!(all.iter().map(|s| s.device).collect::<Vec<_>>(), vec![1]);
}

/// The other moments on real files: each resolves to the event the replay
/// names, and the analysis holds its invariants there.
#[test]
fn works_at_peak_max_frag_and_an_event() {
    let files = [
        "constructor-sun_code-location_oom_expandable_3dev.pickle",
        "ftcourse_peft-lora_no-time_us.pickle",
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
    ];
    for name in files {
        let Some(snap) = real(name) else { return };
        for (m, label) in [
            (Moment::PeakAllocated, "peak"),
            (Moment::MaxFragmentation, "max-frag"),
            (Moment::Event(100), "100"),
        ] {
            let st = states(&snap, name, m, None).unwrap();
            assert!(!st.is_empty(), "{name} --at {label}");
            for s in &st {
                let ctx = format!("{name} --at {label} device {}", s.device);
                let r = fragscope::timeline::replay_device(&snap, s.device);
                assert_eq!(s.at, r.resolve(&snap, m).unwrap(), "{ctx}");
                let a = analyze(&snap, s, &Options::default());
                let pinned_free: u64 = s
                    .segments
                    .iter()
                    .filter(|g| g.blocks.iter().any(|b| b.state != BlockState::Inactive))
                    .flat_map(|g| &g.blocks)
                    .filter(|b| b.state == BlockState::Inactive)
                    .map(|b| b.size)
                    .sum();
                assert_eq!(a.total_stranded, pinned_free, "{ctx}");
                // Ages are measured back from the moment.
                for b in a.ranked() {
                    if let fragscope::timeline::Origin::Event(e) = b.origin {
                        assert!(Some(e as usize) <= s.at, "{ctx}");
                    }
                }
            }
        }
    }
}

/// `end` reads the recorded segments; its origins must be the replay's, and
/// the trace alone (last `alloc` at each address) must say the same.
#[test]
fn end_origins_agree_with_the_replay() {
    let dir = PathBuf::from(REAL);
    if !dir.exists() {
        eprintln!("note: {REAL} is absent; skipping");
        return;
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle" || e == "pkl"))
        .collect();
    names.sort();
    let mut compared = 0;
    for p in names {
        let Ok((snap, _)) = load_snapshot(p.to_str().unwrap(), &LoadOptions::default()) else {
            continue;
        };
        for d in snap.devices() {
            let ctx = format!("{} device {d}", p.display());
            let end = final_state(&snap, d);
            let last = snap.trace_of(d).len().checked_sub(1);
            let replayed = fragscope::timeline::state_at(&snap, d, last);
            let from_trace = recorded_origins(&snap, d, &end.segments);
            assert_eq!(end.origins.len(), from_trace.len(), "{ctx}");
            for (a, o) in &end.origins {
                assert_eq!(replayed.origins.get(a), Some(o), "{ctx}: block {a:#x}");
                assert_eq!(from_trace.get(a), Some(o), "{ctx}: block {a:#x}");
                compared += 1;
            }
        }
    }
    assert!(compared > 10_000, "only {compared} blocks compared");
}
