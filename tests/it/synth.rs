//! The synthetic snapshot generator: deterministic, byte-identical to what
//! CPython's pickler writes for the same objects, and a snapshot whose
//! segments, blocks and trace agree.

use fragscope::input;
use fragscope::model::{Action, BlockState, StackId};
use fragscope::synth::{SynthOptions, generate, write_pickle};
use std::process::Command;

fn bytes(events: u64, seed: u64) -> Vec<u8> {
    let s = generate(&SynthOptions {
        events,
        seed,
        ..Default::default()
    });
    let mut out = Vec::new();
    let n = write_pickle(&s, &mut out).unwrap();
    assert_eq!(n as usize, out.len());
    out
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
/// one `pickle.dump(snapshot, f, protocol=4)` makes.
#[test]
fn python_rewrites_the_same_bytes() {
    let python = Command::new("python3").arg("--version").output();
    if python.is_err() || !python.unwrap().status.success() {
        eprintln!("python3 not found: skipping the byte-for-byte comparison with CPython");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (events, seed) in [(1_500, 1), (25_000, 2)] {
        let path = dir.path().join(format!("s{seed}.pickle"));
        std::fs::write(&path, bytes(events, seed)).unwrap();
        let script = r#"
import pickle, sys
data = open(sys.argv[1], "rb").read()
again = pickle.dumps(pickle.loads(data), protocol=4)
if again == data:
    print("identical", len(data))
else:
    i = next((i for i, (a, b) in enumerate(zip(data, again)) if a != b), min(len(data), len(again)))
    print("differ at byte", i, "of", len(data), "vs", len(again), data[max(0, i - 20):i + 20], again[max(0, i - 20):i + 20])
"#;
        let out = Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&path)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.starts_with("identical"),
            "events={events} seed={seed}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
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
            Action::Alloc => assert!(live.insert(e.addr), "alloc of a live address"),
            Action::FreeCompleted => {
                live.remove(&e.addr);
            }
            _ => {}
        }
    }
    // The replay rebuilds the start from the end and replays forward to the
    // recorded final state: the three parts are one consistent history.
    let r = fragscope::replay::replay_device(&snap, 0);
    assert!(
        r.report.final_state_matches,
        "{:?} {:?}",
        r.report.final_state_diff, r.report.anomalies
    );
    // Fragmentation emerges: cached blocks sit between live ones.
    let st = fragscope::stats::file_stats(&snap, "synth", String::new());
    assert!(st.totals.free_blocks > 1, "{:?}", st.totals);
    assert!(st.totals.fragmentation > 0.0, "{:?}", st.totals);
}
