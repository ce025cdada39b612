//! The synthetic snapshot generator: deterministic, byte-identical to what
//! CPython's pickler writes for the same objects, and a snapshot whose
//! segments, blocks and trace agree, in every shape (`--shape`), each with
//! the properties it is named for.

use crate::util;
use fragscope::input;
use fragscope::model::{Action, BlockState, Snapshot, StackId};
use fragscope::synth::{Shape, SynthOptions, generate, write_pickle};
use std::collections::{HashMap, HashSet};
use std::process::Command;
use std::sync::OnceLock;

fn shaped_opts(o: &SynthOptions) -> Vec<u8> {
    let s = generate(o);
    let mut out = Vec::new();
    let n = write_pickle(&s, &mut out).unwrap();
    assert_eq!(n as usize, out.len());
    out
}

fn bytes(events: u64, seed: u64) -> Vec<u8> {
    shaped_opts(&SynthOptions {
        events,
        seed,
        ..Default::default()
    })
}

const SHAPES: [Shape; 5] = [
    Shape::Narrow,
    Shape::ManySites,
    Shape::Fragmented,
    Shape::Expandable,
    Shape::MultiDevice,
];

/// A small file of each shape (one to five MB), made once per test binary.
/// The fragmented one keeps 20 000 events so that its window holds an
/// `empty_cache()` and the segments made after it.
fn small(shape: Shape) -> &'static [u8] {
    static FILES: OnceLock<std::sync::Mutex<HashMap<Shape, &'static [u8]>>> = OnceLock::new();
    let m = FILES.get_or_init(Default::default);
    if let Some(b) = m.lock().unwrap().get(&shape) {
        return b;
    }
    let events = match shape {
        Shape::Fragmented => 20_000,
        Shape::MultiDevice => 4_000,
        _ => 6_000,
    };
    let b = shaped_opts(&SynthOptions {
        events,
        seed: 3,
        shape,
        ..Default::default()
    });
    m.lock()
        .unwrap()
        .entry(shape)
        .or_insert_with(|| Vec::leak(b))
}

fn load(shape: Shape) -> Snapshot {
    let l = input::load_bytes(small(shape), "synth.pickle").unwrap();
    assert_eq!(l.format, input::Format::Pickle(4));
    match l.content {
        input::Content::Snapshot(s) => s,
        _ => panic!("{shape:?}: not a snapshot"),
    }
}

/// Distinct non-empty stacks of a snapshot's events and blocks.
fn stacks(snap: &Snapshot) -> HashSet<StackId> {
    let mut out: HashSet<StackId> = snap.traces().iter().flatten().map(|e| e.frames).collect();
    out.extend(
        snap.segments
            .iter()
            .flat_map(|s| s.blocks.iter().map(|b| b.frames)),
    );
    out.remove(&StackId::EMPTY);
    out
}

/// FNV-1a: a fixed, dependency-free digest of a file's bytes.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The default shape's bytes are those `fragscope synth` wrote before there
/// were shapes (seed 11, 3 000 events): benchmark figures and the golden
/// charts made from it stay comparable.
#[test]
fn the_narrow_shape_writes_the_same_bytes_as_before_shapes() {
    let b = bytes(3_000, 11);
    assert_eq!(b.len(), 533_005);
    assert_eq!(fnv1a(&b), 0x034b_3d37_501e_bdc1);
    let explicit = shaped_opts(&SynthOptions {
        events: 3_000,
        seed: 11,
        shape: Shape::Narrow,
        ..Default::default()
    });
    assert!(explicit == b, "--shape narrow is the default");
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = bytes(3_000, 11);
    let b = bytes(3_000, 11);
    assert!(a == b, "two runs with seed 11 differ");
    let c = bytes(3_000, 12);
    assert!(a != c, "seeds 11 and 12 gave the same file");
}

/// CPython's pickler, given the objects our file decodes to, writes our
/// file again: every memo reference, frame boundary and opcode choice is the
/// one `pickle.dump(snapshot, f, protocol=4)` makes. In every shape, and with
/// one dict object per distinct frame, shared by every stack list holding
/// it, as PyTorch's binding hands them to the pickler.
#[test]
fn python_rewrites_the_same_bytes() {
    let python = Command::new("python3").arg("--version").output();
    if python.is_err() || !python.unwrap().status.success() {
        eprintln!("python3 not found: skipping the byte-for-byte comparison with CPython");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (events, seed) in [(1_500, 1), (25_000, 2)] {
        files.push((
            format!("narrow events={events} seed={seed}"),
            bytes(events, seed),
        ));
    }
    for shape in &SHAPES[1..] {
        files.push((shape.name().to_string(), small(*shape).to_vec()));
    }
    let script = r#"
import pickle, sys
data = open(sys.argv[1], "rb").read()
snap = pickle.loads(data)
again = pickle.dumps(snap, protocol=4)
if again != data:
    i = next((i for i, (a, b) in enumerate(zip(data, again)) if a != b), min(len(data), len(again)))
    print("differ at byte", i, "of", len(data), "vs", len(again), data[max(0, i - 20):i + 20], again[max(0, i - 20):i + 20])
    sys.exit()
lists = [b["frames"] for s in snap["segments"] for b in s["blocks"]]
lists += [e["frames"] for t in snap["device_traces"] for e in t if "frames" in e]
refs = [f for l in lists for f in l]
ids = {id(f) for f in refs}
triples = {(f["name"], f["filename"], f["line"]) for f in refs}
lists_ids = {id(l) for l in lists}
print("identical", len(data), len(refs), len(ids), len(triples), len(lists), len(lists_ids))
"#;
    for (name, b) in files {
        let path = dir.path().join("s.pickle");
        std::fs::write(&path, &b).unwrap();
        let out = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.starts_with("identical"),
            "{name}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n: Vec<u64> = text
            .split_whitespace()
            .skip(2)
            .map(|x| x.parse().unwrap())
            .collect();
        let (refs, ids, triples, lists, list_ids) = (n[0], n[1], n[2], n[3], n[4]);
        assert_eq!(ids, triples, "{name}: one frame dict per distinct frame");
        assert!(
            refs > 20 * ids,
            "{name}: {refs} frame references to {ids} frame dicts"
        );
        // An allocation's list is shared by its event and its block, a
        // free's by both free events.
        assert!(
            list_ids < lists,
            "{name}: {lists} stack lists, {list_ids} objects"
        );
    }
}

#[test]
fn segments_blocks_and_trace_agree() {
    let data = bytes(20_000, 5);
    let loaded = input::load_bytes(&data, "synth.pickle").unwrap();
    assert_eq!(loaded.format, input::Format::Pickle(4));
    let input::Content::Snapshot(snap) = loaded.content else {
        panic!("not a snapshot")
    };
    let trace = snap.trace_of(0);
    assert_eq!(
        trace.len(),
        20_000,
        "the ring buffer keeps exactly N events"
    );
    assert!(
        trace.windows(2).all(|w| w[0].time_us() <= w[1].time_us()),
        "time_us never decreases"
    );
    for seg in &snap.segments {
        let sum: u64 = seg.blocks.iter().map(|b| b.size).sum();
        assert_eq!(
            sum, seg.total_size,
            "blocks tile segment {:#x}",
            seg.address
        );
        let mut next = seg.address;
        for b in &seg.blocks {
            assert_eq!(b.address, next);
            next += b.size;
            if b.state == BlockState::Inactive {
                assert_eq!(b.frames, StackId::EMPTY, "inactive blocks have no stack");
            }
        }
    }
    // Deep mixed stacks: the allocator's C++ frames innermost, then the
    // operator, then Python frames (forward, optimizer) or the autograd
    // engine's thread (backward).
    let has = |e: &fragscope::model::TraceEvent, what: &dyn Fn(&str, &str) -> bool| {
        snap.stack(e.frames).iter().any(|&f| {
            let fr = snap.frame(f);
            what(snap.str(fr.name), snap.str(fr.filename))
        })
    };
    let allocs: Vec<_> = trace.iter().filter(|e| e.action == Action::Alloc).collect();
    for e in &allocs {
        let stack = snap.stack(e.frames);
        assert!(stack.len() >= 20, "a stack of {} frames", stack.len());
        assert_eq!(
            snap.str(snap.frame(stack[0]).name),
            "torch::unwind::unwind()"
        );
    }
    let python = allocs
        .iter()
        .filter(|e| has(e, &|_, file| file.ends_with(".py")))
        .count();
    let engine = allocs
        .iter()
        .filter(|e| has(e, &|name, _| name.contains("Engine::thread_main")))
        .count();
    assert!(
        python > 0 && engine > 0,
        "{python} from Python, {engine} from autograd"
    );
    // Every free of a block allocated inside the trace names a live address.
    let mut live = std::collections::HashSet::new();
    for e in trace {
        match e.action {
            Action::Alloc => assert!(live.insert(e.addr()), "alloc of a live address"),
            Action::FreeCompleted => {
                live.remove(&e.addr());
            }
            _ => {}
        }
    }
    // The replay rebuilds the start from the end and replays forward to the
    // recorded final state: the three parts are one consistent history.
    let r = fragscope::timeline::replay_device(&snap, 0);
    assert!(
        r.report.final_state_matches,
        "{:?} {:?}",
        r.report.final_state_diff, r.report.anomalies
    );
    // Fragmentation emerges: cached blocks sit between live ones.
    let st = fragscope::analysis::stats::file_stats(&snap, "synth", String::new());
    assert!(st.totals.free_blocks > 1, "{:?}", st.totals);
    assert!(st.totals.fragmentation > 0.0, "{:?}", st.totals);
}

/// Every shape's segments, blocks and trace are one history: the replay
/// rebuilds the start from the end, replays forward and lands on the
/// recorded final state of every device, without an anomaly; `timeline`
/// says so for each device.
#[test]
fn every_shape_replays_to_its_recorded_state() {
    let dir = tempfile::tempdir().unwrap();
    for shape in SHAPES {
        let snap = load(shape);
        let devices = snap.devices();
        assert_eq!(
            devices.len(),
            if shape == Shape::MultiDevice { 8 } else { 1 },
            "{shape:?}"
        );
        for &d in &devices {
            let r = fragscope::timeline::replay_device(&snap, d);
            assert!(
                r.report.final_state_matches && r.report.anomalies.is_empty(),
                "{shape:?} device {d}: {:?} {:?}",
                r.report.final_state_diff,
                r.report.anomalies
            );
            assert_eq!(r.report.clean_events, snap.trace_of(d).len());
        }
        let path = dir.path().join(format!("{}.pickle", shape.name()));
        std::fs::write(&path, small(shape)).unwrap();
        let out = util::run(["timeline".as_ref(), path.as_os_str()]);
        out.expect_code(0);
        let text = out.stdout();
        let exact = text
            .lines()
            .filter(|l| {
                l.starts_with("device ")
                    && l.ends_with("the replay reproduces the recorded final state exactly")
            })
            .count();
        assert_eq!(exact, devices.len(), "{shape:?}:\n{text}");
        assert_eq!(
            text.lines().filter(|l| *l == "anomalies: none").count(),
            devices.len(),
            "{shape:?}:\n{text}"
        );
    }
}

/// many-sites: over 400 distinct stacks, 30 to 300 frames deep, each mixing
/// C++ frames (the unwinder's `??`, `.cpp` files) and Python frames, and
/// backward allocations from Python code on the autograd engine's thread.
#[test]
fn many_sites_has_hundreds_of_deep_mixed_stacks() {
    let snap = load(Shape::ManySites);
    let all = stacks(&snap);
    assert!(all.len() >= 400, "{} distinct stacks", all.len());
    let depths: Vec<usize> = all.iter().map(|&s| snap.stack(s).len()).collect();
    let (lo, hi) = (*depths.iter().min().unwrap(), *depths.iter().max().unwrap());
    assert!(lo >= 30 && (250..=300).contains(&hi), "depths {lo}..{hi}");
    let deep = depths.iter().filter(|&&d| d >= 150).count();
    assert!(deep >= 100, "{deep} stacks of 150 frames or more");
    for &s in &all {
        let files: Vec<&str> = snap
            .stack(s)
            .iter()
            .map(|&f| snap.str(snap.frame(f).filename))
            .collect();
        assert!(
            files.contains(&"??") && files.iter().any(|f| f.ends_with(".cpp")),
            "a stack without C++ frames: {files:?}"
        );
        assert!(
            files.iter().any(|f| f.ends_with(".py")),
            "a stack without Python frames"
        );
    }
    let engine_python = all
        .iter()
        .filter(|&&s| {
            let names: Vec<&str> = snap
                .stack(s)
                .iter()
                .map(|&f| snap.str(snap.frame(f).name))
                .collect();
            names.iter().any(|n| n.contains("Engine::thread_main"))
                && names.iter().any(|n| n.contains("PyNode::apply"))
        })
        .count();
    assert!(
        engine_python >= 10,
        "{engine_python} Python stacks on the engine's thread"
    );
    // The narrow shape, for contrast, has a few dozen.
    let narrow = stacks(&load(Shape::Narrow)).len();
    assert!(narrow < 60, "{narrow}");
}

/// fragmented: thousands of segments and of live blocks at once, hundreds
/// of block sizes, and segments given back (`empty_cache`) whose addresses
/// later segments reuse.
#[test]
fn fragmented_has_thousands_of_segments_and_live_blocks() {
    let snap = load(Shape::Fragmented);
    let segments = snap.segments.len();
    let blocks = || snap.segments.iter().flat_map(|s| &s.blocks);
    let live = blocks().filter(|b| b.state != BlockState::Inactive).count();
    let free = blocks().filter(|b| b.state == BlockState::Inactive).count();
    let sizes: HashSet<u64> = blocks().map(|b| b.size).collect();
    assert!(segments >= 2_000, "{segments} segments");
    assert!(live >= 2_000, "{live} live blocks");
    assert!(free >= 1_000, "{free} free blocks between them");
    assert!(sizes.len() >= 300, "{} block sizes", sizes.len());
    // Live blocks scattered over the segments: most segments hold some.
    let holding = snap
        .segments
        .iter()
        .filter(|s| s.blocks.iter().any(|b| b.state != BlockState::Inactive))
        .count();
    assert!(
        holding * 10 >= segments * 9,
        "{holding} of {segments} hold a live block"
    );
    let st = fragscope::analysis::stats::file_stats(&snap, "synth", String::new());
    assert!(st.totals.fragmentation > 0.5, "{:?}", st.totals);
    let trace = snap.trace_of(0);
    let mut released = HashSet::new();
    let mut reused = 0;
    for e in trace {
        match e.action {
            Action::SegmentFree => {
                released.insert(e.addr());
            }
            Action::SegmentAlloc if released.contains(&e.addr()) => reused += 1,
            _ => {}
        }
    }
    assert!(!released.is_empty(), "no segment given back");
    assert!(reused >= 1, "no segment made where one was given back");
}

/// expandable: the allocator settings say so, every segment is expandable,
/// and the trace maps and unmaps pages instead of allocating segments.
#[test]
fn expandable_maps_and_unmaps_pages() {
    let snap = load(Shape::Expandable);
    let settings = snap
        .allocator_settings
        .as_ref()
        .expect("allocator_settings");
    assert_eq!(settings.expandable_segments(), Some(true));
    assert!(!snap.segments.is_empty());
    assert!(snap.segments.iter().all(|s| s.expandable()));
    let count = |a: Action| snap.trace_of(0).iter().filter(|e| e.action == a).count();
    assert!(
        count(Action::SegmentMap) >= 10,
        "{} maps",
        count(Action::SegmentMap)
    );
    assert!(count(Action::SegmentUnmap) >= 1, "no unmap");
    assert_eq!(count(Action::SegmentAlloc) + count(Action::SegmentFree), 0);
}

/// multi-device: eight device traces; the first two train (each keeps the
/// ring buffer's N events), the other six record a few events a step; every
/// device has segments. `--devices` and `--busy-devices` change both.
#[test]
fn multi_device_has_two_busy_devices_of_eight() {
    let snap = load(Shape::MultiDevice);
    let lens: Vec<usize> = snap.traces().iter().map(|t| t.len()).collect();
    assert_eq!(lens.len(), 8);
    assert_eq!(&lens[..2], &[4_000, 4_000]);
    for (d, &n) in lens.iter().enumerate().skip(2) {
        assert!(n > 0 && n * 20 < 4_000, "device {d}: {n} events");
    }
    for d in 0..8 {
        assert!(snap.segments_of(d).count() > 0, "device {d} has no segment");
    }
    // Each busy device copies its batches on a side stream of its own.
    let side = |d: i64| -> HashSet<i64> {
        snap.trace_of(d)
            .iter()
            .map(|e| snap.stream(e))
            .filter(|&s| s != 0)
            .collect()
    };
    assert!(side(0).is_disjoint(&side(1)) && !side(0).is_empty());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("four.pickle");
    let out = util::run([
        "synth".as_ref(),
        "--shape".as_ref(),
        "multi-device".as_ref(),
        "--devices".as_ref(),
        "4".as_ref(),
        "--busy-devices".as_ref(),
        "1".as_ref(),
        "--events".as_ref(),
        "3000".as_ref(),
        "-o".as_ref(),
        path.as_os_str(),
    ]);
    out.expect_code(0);
    assert!(
        out.stdout().contains("on 4 devices (1 busy)"),
        "{}",
        out.stdout()
    );
    let l = input::load_bytes(&std::fs::read(&path).unwrap(), "four").unwrap();
    let input::Content::Snapshot(four) = l.content else {
        panic!("not a snapshot")
    };
    let lens: Vec<usize> = four.traces().iter().map(|t| t.len()).collect();
    assert_eq!(lens.len(), 4);
    assert_eq!(lens[0], 3_000);
    assert!(
        lens[1..].iter().all(|&n| n > 0 && n * 20 < 3_000),
        "{lens:?}"
    );
}

/// Options that do not apply are refused with one line and exit 2.
#[test]
fn device_options_apply_to_multi_device_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pickle");
    for args in [
        vec!["--shape", "narrow", "--devices", "4"],
        vec!["--busy-devices", "1"],
        vec![
            "--shape",
            "multi-device",
            "--devices",
            "2",
            "--busy-devices",
            "3",
        ],
    ] {
        let mut all: Vec<std::ffi::OsString> =
            vec!["synth".into(), "--events".into(), "100".into()];
        all.extend(args.iter().map(|a| a.into()));
        all.extend(["-o".into(), path.clone().into_os_string()]);
        let out = util::run(&all);
        out.expect_code(2);
        let err = out.stderr();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("--devices") || err.contains("--busy-devices"),
            "{err}"
        );
        assert!(!path.exists(), "{args:?} wrote a file");
    }
}
