//! The reading path (trace entries taken while the pickle is decoded) gives
//! the same model as decoding to the arena first and converting after, on
//! every real file and on synthetic ones, and it does take the entries; and
//! reads of any length (entries across every refill of the window) change
//! nothing.

use crate::util::{
    alloc_item, fast, fast_path_agrees, general, one_trace_pickle, real_pickles, synthetic_pickle,
};
use fragscope::input::pickle::{self, NoSink};
use fragscope::input::snapshot::{TraceSink, from_arena, from_arena_with};
use fragscope::input::value::Node;
use fragscope::input::{self, LoadOptions};
use fragscope::model::Snapshot;
use fragscope::synth::SynthOptions;

fn slow(bytes: &[u8]) -> Result<Snapshot, String> {
    let d = pickle::decode_from(bytes, &mut NoSink).map_err(|e| e.to_string())?;
    from_arena(&d.arena, d.root).map_err(|e| e.to_string())
}

fn synthetic(events: u64, seed: u64) -> Vec<u8> {
    synthetic_pickle(&SynthOptions {
        events,
        seed,
        ..Default::default()
    })
}

#[test]
fn both_paths_agree_on_real_files() {
    let Some(files) = real_pickles() else { return };
    let mut compared = 0;
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        match (slow(&bytes), fast(&bytes)) {
            (Ok(a), Ok((b, taken))) => {
                assert!(a == b, "{name}: the two paths give different models");
                let events: usize = a.traces().iter().map(|t| t.len()).sum();
                eprintln!("{name}: {events} events, {taken} taken while reading");
                compared += 1;
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{name}: different errors"),
            (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
        }
    }
    assert!(compared > 10, "only {compared} files compared");
}

#[test]
fn the_reading_path_takes_every_entry_of_a_pytorch_shaped_file() {
    for (events, seed) in [(1, 3), (999, 4), (1000, 5), (4321, 6)] {
        let bytes = synthetic(events, seed);
        let a = slow(&bytes).unwrap();
        let (b, taken) = fast(&bytes).unwrap();
        assert!(a == b, "events={events}: the two paths differ");
        assert_eq!(taken as u64, events, "events={events}");
    }
}

#[test]
fn streaming_load_matches_loading_from_memory_and_counts_every_byte() {
    let mut bytes = synthetic(3000, 9);
    bytes.extend_from_slice(b"trailing bytes after STOP");
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("s.pickle");
    std::fs::write(&plain, &bytes).unwrap();
    let gz = dir.path().join("s.pickle.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, &bytes).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let mem = input::load_bytes(&bytes, "mem").unwrap();
    let input::Content::Snapshot(want) = mem.content else {
        panic!()
    };
    for p in [&plain, &gz] {
        let l = input::load(p.to_str().unwrap(), &LoadOptions::default()).unwrap();
        assert_eq!(l.bytes, bytes.len() as u64, "{p:?}");
        assert_eq!(l.format, input::Format::Pickle(4));
        let input::Content::Snapshot(got) = l.content else {
            panic!()
        };
        assert!(got == want, "{p:?}: a different model");
    }
    // The size bound holds while streaming, before and after decompression.
    let small = LoadOptions {
        max_input_size: 10_000,
        ..LoadOptions::default()
    };
    for p in [&plain, &gz] {
        let e = input::load(p.to_str().unwrap(), &small).unwrap_err();
        assert!(matches!(e, input::LoadError::TooLarge { .. }), "{p:?}: {e}");
    }
}

/// A file of many steps of the in-place window (a mebibyte each): read
/// mapped (`input::load` of a plain file), in place from memory
/// (`decode_slice`) and as a stream, it gives one model; the offsets the
/// in-place reader reports only grow and stay inside the file.
#[test]
fn a_pickle_read_in_place_reads_as_a_stream_does() {
    let bytes = synthetic(90_000, 4);
    assert!(
        bytes.len() > 12 << 20,
        "{} bytes: too few steps",
        bytes.len()
    );
    let (want, taken) = fast(&bytes).unwrap();
    let mut sink = TraceSink::new();
    let mut seen = Vec::new();
    let d = pickle::decode_slice(&bytes, &mut sink, &mut |at| seen.push(at)).unwrap();
    assert_eq!(d.read, bytes.len() as u64);
    assert_eq!(sink.entries(), taken, "entries taken in place");
    let got = from_arena_with(&d.arena, d.root, sink).unwrap();
    assert!(got == want, "read in place: a different model");
    assert!(seen.len() >= 3, "window moved {} times", seen.len());
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.iter().all(|&at| at < bytes.len() as u64), "{seen:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pickle");
    std::fs::write(&path, &bytes).unwrap();
    let l = input::load(path.to_str().unwrap(), &LoadOptions::default()).unwrap();
    assert_eq!(l.bytes, bytes.len() as u64);
    let input::Content::Snapshot(mapped) = l.content else {
        panic!("not a snapshot")
    };
    assert!(mapped == want, "read mapped: a different model");
    // A file cut short is the same error whichever way it is read.
    let cut = &bytes[..bytes.len() / 2];
    std::fs::write(&path, cut).unwrap();
    let e = input::load(path.to_str().unwrap(), &LoadOptions::default()).unwrap_err();
    let m = input::load_bytes(cut, path.to_str().unwrap()).unwrap_err();
    assert_eq!(e.to_string(), m.to_string());
}

#[test]
fn a_trace_entry_changed_after_it_was_read_is_refused() {
    // {"device_traces": [[{"action": "alloc"}]]}, then SETITEM into the
    // entry again through the memo: never written by PyTorch.
    let p = b"\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94(}\x94(\x8c\x06action\x94\x8c\x05alloc\x94uh\x04\x8c\x04size\x94K\x02s0eas.";
    let slow_says = slow(p);
    let fast_says = fast(p).map(|x| x.0);
    assert!(slow_says.is_ok(), "{slow_says:?}");
    let e = fast_says.unwrap_err();
    assert!(e.contains("after it was read"), "{e}");
}

/// Hands out at most a few bytes per `read`, a different number each time,
/// so that opcodes, their arguments and trace entries fall across every
/// refill of the decoder's window.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.step = (self.step * 7 + 3) % 4093;
        let n = (self.step + 1).min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn trickled(bytes: &[u8]) -> Result<(Snapshot, usize), String> {
    let mut sink = TraceSink::new();
    let r = Trickle {
        data: bytes,
        step: 1,
    };
    let d = pickle::decode_from(r, &mut sink).map_err(|e| e.to_string())?;
    let taken = sink.entries();
    let s = from_arena_with(&d.arena, d.root, sink).map_err(|e| e.to_string())?;
    Ok((s, taken))
}

#[test]
fn reads_of_any_length_give_the_same_model() {
    let mut inputs = vec![("synthetic".to_string(), synthetic(3000, 5))];
    for f in real_pickles().unwrap_or_default() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        inputs.push((name, std::fs::read(&f).unwrap()));
    }
    for (name, bytes) in &inputs {
        match (fast(bytes), trickled(bytes)) {
            (Ok((a, ta)), Ok((b, tb))) => {
                assert!(a == b, "{name}: reading in small pieces changes the model");
                assert_eq!(ta, tb, "{name}: entries taken while reading");
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{name}: different errors"),
            (a, b) => panic!("{name}: {:?} vs {:?}", a.err(), b.err()),
        }
    }
}

/// A PyTorch-shaped pickle (keys shared as CPython writes them) whose trace
/// entries carry every optional field, pool ids and actions this version
/// does not know.
fn optional_fields_pickle() -> Vec<u8> {
    use fragscope::synth::pickle_writer::{Ident, Pickler};
    type Field = (&'static str, Value);
    #[derive(Clone)]
    enum Value {
        Int(i64),
        Str(&'static str),
        Pair(i64, i64),
    }
    let base = |action: &'static str, addr: i64| -> Vec<Field> {
        vec![
            ("action", Value::Str(action)),
            ("addr", Value::Int(addr)),
            ("size", Value::Int(512)),
            ("stream", Value::Int(0)),
        ]
    };
    let with = |mut f: Vec<Field>, more: &[Field]| {
        f.extend_from_slice(more);
        f
    };
    // Unknown actions last: the sink leaves them to the arena, and with
    // them the rest of their batch.
    let entries: Vec<Vec<Field>> = vec![
        base("alloc", 1 << 40),
        with(
            base("alloc", 2 << 40),
            &[
                ("time_us", Value::Int(i64::MIN)),
                ("compile_context", Value::Str("N/A")),
                ("user_metadata", Value::Str("")),
                ("pool_id", Value::Pair(1, 5)),
            ],
        ),
        with(
            base("oom", 0),
            &[
                ("device_free", Value::Int(i64::MAX)),
                ("category", Value::Str("activation")),
                ("pool_id", Value::Pair(0, 0)),
            ],
        ),
        with(
            base("free_completed", 2 << 40),
            &[("pool_id", Value::Pair(2, 0))],
        ),
        with(base("mystery_action", 0), &[("pool_id", Value::Pair(1, 5))]),
        with(base("enigma", 0), &[("time_us", Value::Int(-1))]),
        with(base("mystery_action", 0), &[("pool_id", Value::Pair(2, 0))]),
    ];
    // Every key string and action name written once, then referenced.
    let names = [
        "action",
        "addr",
        "size",
        "stream",
        "time_us",
        "device_free",
        "compile_context",
        "user_metadata",
        "pool_id",
        "category",
        "alloc",
        "oom",
        "free_completed",
        "mystery_action",
        "enigma",
        "N/A",
        "activation",
    ];
    let id = |s: &str| Ident::Shared(names.iter().position(|n| *n == s).unwrap() as u64);
    let mut p = Pickler::new(Vec::new());
    let top: [&str; 2] = ["segments", "device_traces"];
    p.dict(Ident::Fresh, 2, |p, i| {
        p.str(Ident::Fresh, top[i])?;
        match i {
            0 => p.list(Ident::Fresh, 0, |_, _| Ok(())),
            _ => p.list(Ident::Fresh, 1, |p, _| {
                p.list(Ident::Fresh, entries.len(), |p, j| {
                    let e = &entries[j];
                    p.dict(Ident::Fresh, e.len(), |p, k| {
                        let (key, v) = &e[k];
                        p.str(id(key), key)?;
                        match v {
                            Value::Int(x) => p.int(*x),
                            Value::Str(s) if s.is_empty() => p.str(Ident::Fresh, s),
                            Value::Str(s) => p.str(id(s), s),
                            Value::Pair(a, b) => {
                                let (a, b) = (*a, *b);
                                p.tuple(Ident::Fresh, 2, move |p, n| p.int([a, b][n]))
                            }
                        }
                    })
                })
            }),
        }
    })
    .unwrap();
    p.finish().unwrap().0
}

/// How many of the arena's nodes `is` picks.
fn count_nodes(a: &fragscope::input::value::Arena, is: impl Fn(&Node) -> bool) -> usize {
    a.nodes.iter().filter(|n| is(n)).count()
}

/// A trace that runs into its limit at every other request, each `oom`
/// with the free memory of its own moment, as PyTorch writes them (no
/// address). Both reading paths give the same model; no `oom` makes a
/// combination of extras of its own (the memory of such a file would grow
/// with its OOMs, not its events); `stats` counts each one's figure.
#[test]
fn many_ooms_each_with_its_own_device_free_intern_nothing() {
    use fragscope::synth::pickle_writer::Ident;
    const N: usize = 500;
    let free = |k: usize| (k as i64 + 1) * 4096 + 7;
    let bytes = one_trace_pickle(N, 4, |p, k, f| {
        let oom = k % 2 == 1;
        match f {
            0 => {
                p.str(Ident::Shared(0), "action")?;
                match oom {
                    true => p.str(Ident::Shared(1), "oom"),
                    false => p.str(Ident::Shared(2), "alloc"),
                }
            }
            1 if oom => {
                p.str(Ident::Shared(3), "device_free")?;
                p.int(free(k))
            }
            1 => {
                p.str(Ident::Shared(4), "addr")?;
                p.int((k as i64 + 1) << 20)
            }
            2 => {
                p.str(Ident::Shared(5), "size")?;
                p.int(1 << 30)
            }
            _ => {
                p.str(Ident::Shared(6), "stream")?;
                p.int(0)
            }
        }
    });
    let a = slow(&bytes).unwrap();
    let (b, taken) = fast(&bytes).unwrap();
    assert!(a == b, "the two paths give different models");
    assert_eq!(taken, N);
    assert!(a.event_extras.is_empty(), "{} extras", a.event_extras.len());
    let t = a.trace_of(0);
    for (k, e) in t.iter().enumerate() {
        let want = (k % 2 == 1).then(|| free(k) as u64);
        assert_eq!(a.device_free(e), want, "event {k}");
        assert_eq!(e.addr(), if k % 2 == 1 { 0 } else { (k as u64 + 1) << 20 });
    }
    // `stats` tallies the trace without keeping it.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("ooms.pickle");
    std::fs::write(&f, &bytes).unwrap();
    let r = crate::util::run(["stats", "--json", f.to_str().unwrap()]);
    r.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let got: Vec<u64> = v["oom_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["device_free"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (1..N).step_by(2).map(|k| free(k) as u64).collect();
    assert_eq!(got, want);
}

#[test]
fn optional_trace_fields_read_the_same_both_ways_and_round_trip() {
    use fragscope::input::{Content, load_bytes};
    use fragscope::model::{Action, StrId};
    use fragscope::render::encode::{to_json_bytes, to_msgpack_bytes};
    let bytes = optional_fields_pickle();
    let a = slow(&bytes).unwrap();
    let (b, taken) = fast(&bytes).unwrap();
    assert!(a == b, "the two paths give different models");
    // The sink took every entry up to the first unknown action.
    assert_eq!(taken, 4);
    let t = a.trace_of(0);
    assert_eq!(t.len(), 7);
    let s = |id: Option<StrId>| id.map(|i| a.str(i));
    let names: Vec<&str> = t.iter().map(|e| e.action.name(&a)).collect();
    assert_eq!(
        names,
        [
            "alloc",
            "alloc",
            "oom",
            "free_completed",
            "mystery_action",
            "enigma",
            "mystery_action"
        ]
    );
    assert_eq!(t[4].action, t[6].action);
    assert_ne!(t[4].action, t[5].action);
    assert!(matches!(t[5].action, Action::Other(_)));
    let pools: Vec<Option<(i64, i64)>> = t.iter().map(|e| a.pool_of(e)).collect();
    assert_eq!(
        pools,
        [
            None,
            Some((1, 5)),
            Some((0, 0)),
            Some((2, 0)),
            Some((1, 5)),
            None,
            Some((2, 0))
        ]
    );
    assert_eq!(
        a.pools,
        [(1, 5), (0, 0), (2, 0)],
        "each pair once, in order"
    );
    assert_eq!(t[0].time_us(), None);
    assert_eq!(t[1].time_us(), Some(i64::MIN));
    assert_eq!(t[5].time_us(), Some(-1));
    let x = |i: usize| a.extras(&t[i]);
    // The oom, without an address, holds its device_free itself.
    assert_eq!(a.device_free(&t[2]), Some(i64::MAX as u64));
    assert_eq!(
        (t[2].held_device_free(), x(2).device_free),
        (Some(i64::MAX as u64), None)
    );
    assert_eq!(x(1).device_free, None);
    assert_eq!(s(x(1).compile_context), Some("N/A"));
    assert_eq!(s(x(1).user_metadata), Some(""));
    assert_eq!(s(x(2).category), Some("activation"));
    assert_eq!(x(0), fragscope::model::EventExtras::NONE);
    for (what, out) in [
        ("JSON", to_json_bytes(&a)),
        ("MessagePack", to_msgpack_bytes(&a)),
    ] {
        let Content::Snapshot(back) = load_bytes(&out, "round trip").unwrap().content else {
            panic!("{what}: not read back as a snapshot");
        };
        assert!(back == a, "{what} round trip changed the model");
    }
}

/// A trace whose every entry names a string not read before (a step
/// number in `user_metadata`, a new `compile_context` now and then): the
/// fast path reads those entries too, making each new string's node as the
/// general machine makes it, and every reading gives the same model.
#[test]
fn entries_with_new_strings_stay_on_the_fast_path() {
    use fragscope::synth::pickle_writer::Ident;
    const N: usize = 600;
    let meta = |k: usize| format!("step {k} of the run");
    let context = |k: usize| format!("Torch-Compiled Region: {}/0", k / 50);
    let bytes = one_trace_pickle(N, 6, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        3 => {
            p.str(Ident::Shared(4), "stream")?;
            p.int(0)
        }
        4 => {
            p.str(Ident::Shared(5), "compile_context")?;
            p.str(Ident::Shared(1000 + k as u64 / 50), &context(k))
        }
        _ => {
            p.str(Ident::Shared(6), "user_metadata")?;
            p.str(Ident::Fresh, &meta(k))
        }
    });
    let a = slow(&bytes).unwrap();
    let (b, taken) = general(&bytes).unwrap();
    let (c, taken_fast) = fast(&bytes).unwrap();
    assert!(a == b && b == c, "the readings give different models");
    assert_eq!((taken, taken_fast), (N, N));
    let t = c.trace_of(0);
    for k in [0, 1, 49, 50, 299, N - 1] {
        let x = c.extras(&t[k]);
        assert_eq!(x.user_metadata.map(|s| c.str(s)), Some(meta(k).as_str()));
        assert_eq!(
            x.compile_context.map(|s| c.str(s)),
            Some(context(k).as_str())
        );
    }
    // No entry was read by the general machine (which leaves a node each).
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(&bytes[..], &mut sink).unwrap();
    let records = count_nodes(&d.arena, |n| matches!(n, Node::Record(..)));
    assert_eq!(records, 0, "entries read by the general machine");
    let strings = count_nodes(&d.arena, |n| matches!(n, Node::Str(_)));
    assert_eq!(strings, 2 + 7 + N + N / 50, "one node a string");
}

#[test]
fn the_fast_path_gives_the_model_of_the_general_machine() {
    let mut inputs = Vec::new();
    for seed in 1..=6 {
        inputs.push((
            format!("synthetic seed {seed}"),
            synthetic(2000 + 500 * seed, seed),
        ));
    }
    for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "pickle") {
            inputs.push((f.display().to_string(), std::fs::read(&f).unwrap()));
        }
    }
    let real = real_pickles().unwrap_or_default();
    for f in &real {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        inputs.push((name, std::fs::read(f).unwrap()));
    }
    let mut decoded = 0;
    for (name, bytes) in &inputs {
        decoded += fast_path_agrees(name, bytes) as usize;
    }
    assert!(
        decoded >= 6 + 5 + real.len() / 2,
        "only {decoded} inputs decoded"
    );
}

/// PyTorch 2.12 writes a trace entry's `pool_id` at every entry, a new
/// 2-tuple each time: two integers, TUPLE2, MEMOIZE. The fast path reads
/// such entries (no node an entry), gives the general machine's model, and
/// makes one node for each distinct pool id, as the general machine does.
#[test]
fn the_fast_path_reads_a_pool_id_at_every_entry() {
    use fragscope::synth::pickle_writer::Ident;
    const N: usize = 3000;
    // Pools (0, 0) and, at every third entry, a private pool whose second
    // number needs four bytes, and one that needs a LONG1.
    let pool = |k: usize| match k % 3 {
        0 => (0i64, 0i64),
        1 => (1, 70_000),
        _ => (2, -(1 << 40)),
    };
    let bytes = one_trace_pickle(N, 4, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        _ => {
            p.str(Ident::Shared(9), "pool_id")?;
            let (a, b) = pool(k);
            p.tuple(Ident::Fresh, 2, |p, j| p.int(if j == 0 { a } else { b }))
        }
    });
    assert!(fast_path_agrees("pool ids", &bytes));
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(&bytes[..], &mut sink).unwrap();
    assert_eq!(sink.entries(), N);
    let records = count_nodes(&d.arena, |n| matches!(n, Node::Record(..)));
    assert!(
        records < 100,
        "{records} trace entries read by the general machine"
    );
    let tuples = count_nodes(&d.arena, |n| matches!(n, Node::Tuple(_)));
    assert_eq!(tuples, 3, "one node for each distinct pool id");
    let (snap, _) = fast(&bytes).unwrap();
    let pools: Vec<(i64, i64)> = (snap.traces()[0].iter())
        .take(3)
        .map(|e| snap.pool_of(e).unwrap())
        .collect();
    assert_eq!(pools, vec![pool(0), pool(1), pool(2)]);
}

#[test]
fn the_fast_path_reads_the_entries_of_a_pytorch_shaped_file() {
    // Entries go by the fast path (those with strings not seen before
    // too) and end in the one trace list, which costs the decoder no node
    // per entry.
    let bytes = synthetic(3000, 2);
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(&bytes[..], &mut sink).unwrap();
    assert_eq!(sink.entries(), 3000);
    let records = count_nodes(&d.arena, |n| matches!(n, Node::Record(..)));
    assert!(
        records < 100,
        "{records} trace entries read by the general machine"
    );
    assert!(
        d.arena.nodes.len() < 30_000,
        "{} nodes for 3000 entries",
        d.arena.nodes.len()
    );
    assert!(
        d.arena
            .nodes
            .iter()
            .any(|n| matches!(n, Node::Trace(_, 3000))),
        "the trace list is not one node"
    );
}

/// Runs of the same small generator as the byte flips elsewhere (xorshift).
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn the_fast_path_fails_where_the_general_machine_fails() {
    let bytes = synthetic(1500, 3);
    // Most of the file is its trace: flip bytes there, one at a time, and
    // cut the file short at some of the same places.
    let from = bytes.len() / 4;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut errors = 0;
    for k in 0..300 {
        let at = from + (xorshift(&mut state) as usize) % (bytes.len() - from);
        let mut b = bytes.clone();
        if k % 10 == 0 {
            b.truncate(at);
        } else {
            b[at] ^= 1 << (xorshift(&mut state) % 8);
        }
        errors += !fast_path_agrees(&format!("change {k} at byte {at}"), &b) as usize;
    }
    assert!(
        errors > 30,
        "only {errors} of the changed files fail to decode"
    );
}

/// Hand-made files that name trace entries, or a device's trace list,
/// again through the memo (PyTorch never does): the same model as the
/// general machine, which keeps every entry as a node.
// {"device_traces": [L], "segments": [], "extra": L[2], "again": L}
pub(crate) const NAMED_A: &[u8] =
    b"\x80\x04\x95\x83\x01\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x0d\x64\x65\x76\x69\x63\x65\
        \x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\
        \x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x04\x61\x64\x64\x72\x94\x4b\x00\x8c\x04\
        \x73\x69\x7a\x65\x94\x4d\x00\x02\x8c\x06\x73\x74\x72\x65\x61\x6d\x94\x4b\x00\x8c\x07\x74\
        \x69\x6d\x65\x5f\x75\x73\x94\x4d\xe8\x03\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x7d\
        \x94\x28\x8c\x08\x66\x69\x6c\x65\x6e\x61\x6d\x65\x94\x8c\x04\x61\x2e\x70\x79\x94\x8c\x04\
        \x6c\x69\x6e\x65\x94\x4b\x01\x8c\x04\x6e\x61\x6d\x65\x94\x8c\x01\x66\x94\x75\x61\x8c\x0f\
        \x63\x6f\x6d\x70\x69\x6c\x65\x5f\x63\x6f\x6e\x74\x65\x78\x74\x94\x8c\x03\x4e\x2f\x41\x94\
        \x8c\x0d\x75\x73\x65\x72\x5f\x6d\x65\x74\x61\x64\x61\x74\x61\x94\x8c\x00\x94\x75\x7d\x94\
        \x28\x68\x05\x8c\x0e\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x94\x68\x07\
        \x4d\x00\x10\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xe9\x03\x68\x0b\x5d\x94\x28\
        \x68\x0d\x7d\x94\x28\x68\x0e\x8c\x04\x62\x2e\x70\x79\x94\x68\x10\x4b\x02\x68\x11\x8c\x01\
        \x67\x94\x75\x65\x68\x13\x68\x14\x68\x15\x68\x16\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\
        \x4d\x00\x20\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xea\x03\x68\x0b\x5d\x94\x28\
        \x68\x0d\x68\x1a\x65\x68\x13\x68\x14\x68\x15\x68\x16\x75\x7d\x94\x28\x68\x05\x68\x18\x68\
        \x07\x4d\x00\x30\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xeb\x03\x68\x0b\x68\x19\
        \x68\x13\x68\x14\x68\x15\x68\x16\x75\x65\x61\x8c\x08\x73\x65\x67\x6d\x65\x6e\x74\x73\x94\
        \x5d\x94\x8c\x05\x65\x78\x74\x72\x61\x94\x68\x1d\x8c\x05\x61\x67\x61\x69\x6e\x94\x68\x03\
        \x75\x2e";
// {"device_traces": [L, L], "segments": []}
pub(crate) const NAMED_B: &[u8] =
    b"\x80\x04\x95\x72\x01\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x0d\x64\x65\x76\x69\x63\x65\
        \x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x28\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\
        \x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x04\x61\x64\x64\x72\x94\x4b\x00\x8c\
        \x04\x73\x69\x7a\x65\x94\x4d\x00\x02\x8c\x06\x73\x74\x72\x65\x61\x6d\x94\x4b\x00\x8c\x07\
        \x74\x69\x6d\x65\x5f\x75\x73\x94\x4d\xe8\x03\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\
        \x7d\x94\x28\x8c\x08\x66\x69\x6c\x65\x6e\x61\x6d\x65\x94\x8c\x04\x61\x2e\x70\x79\x94\x8c\
        \x04\x6c\x69\x6e\x65\x94\x4b\x01\x8c\x04\x6e\x61\x6d\x65\x94\x8c\x01\x66\x94\x75\x61\x8c\
        \x0f\x63\x6f\x6d\x70\x69\x6c\x65\x5f\x63\x6f\x6e\x74\x65\x78\x74\x94\x8c\x03\x4e\x2f\x41\
        \x94\x8c\x0d\x75\x73\x65\x72\x5f\x6d\x65\x74\x61\x64\x61\x74\x61\x94\x8c\x00\x94\x75\x7d\
        \x94\x28\x68\x05\x8c\x0e\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x94\x68\
        \x07\x4d\x00\x10\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xe9\x03\x68\x0b\x5d\x94\
        \x28\x68\x0d\x7d\x94\x28\x68\x0e\x8c\x04\x62\x2e\x70\x79\x94\x68\x10\x4b\x02\x68\x11\x8c\
        \x01\x67\x94\x75\x65\x68\x13\x68\x14\x68\x15\x68\x16\x75\x7d\x94\x28\x68\x05\x68\x06\x68\
        \x07\x4d\x00\x20\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xea\x03\x68\x0b\x5d\x94\
        \x28\x68\x0d\x68\x1a\x65\x68\x13\x68\x14\x68\x15\x68\x16\x75\x7d\x94\x28\x68\x05\x68\x18\
        \x68\x07\x4d\x00\x30\x68\x08\x4d\x00\x02\x68\x09\x4b\x00\x68\x0a\x4d\xeb\x03\x68\x0b\x68\
        \x19\x68\x13\x68\x14\x68\x15\x68\x16\x75\x65\x68\x03\x65\x8c\x08\x73\x65\x67\x6d\x65\x6e\
        \x74\x73\x94\x5d\x94\x75\x2e";
// {"segments": [], "device_traces": [[L[0], L[1], L[1], L[3]]]}
pub(crate) const NAMED_C: &[u8] =
    b"\x80\x04\x95\x44\x01\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x73\x65\x67\x6d\x65\x6e\
        \x74\x73\x94\x5d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\
        \x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\
        \x63\x94\x8c\x04\x61\x64\x64\x72\x94\x4b\x00\x8c\x04\x73\x69\x7a\x65\x94\x4d\x00\x02\x8c\
        \x06\x73\x74\x72\x65\x61\x6d\x94\x4b\x00\x8c\x07\x74\x69\x6d\x65\x5f\x75\x73\x94\x4d\xe8\
        \x03\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x7d\x94\x28\x8c\x08\x66\x69\x6c\x65\x6e\
        \x61\x6d\x65\x94\x8c\x04\x61\x2e\x70\x79\x94\x8c\x04\x6c\x69\x6e\x65\x94\x4b\x01\x8c\x04\
        \x6e\x61\x6d\x65\x94\x8c\x01\x66\x94\x75\x61\x8c\x0f\x63\x6f\x6d\x70\x69\x6c\x65\x5f\x63\
        \x6f\x6e\x74\x65\x78\x74\x94\x8c\x03\x4e\x2f\x41\x94\x8c\x0d\x75\x73\x65\x72\x5f\x6d\x65\
        \x74\x61\x64\x61\x74\x61\x94\x8c\x00\x94\x75\x7d\x94\x28\x68\x07\x8c\x0e\x66\x72\x65\x65\
        \x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x94\x68\x09\x4d\x00\x10\x68\x0a\x4d\x00\x02\x68\
        \x0b\x4b\x00\x68\x0c\x4d\xe9\x03\x68\x0d\x5d\x94\x28\x68\x0f\x7d\x94\x28\x68\x10\x8c\x04\
        \x62\x2e\x70\x79\x94\x68\x12\x4b\x02\x68\x13\x8c\x01\x67\x94\x75\x65\x68\x15\x68\x16\x68\
        \x17\x68\x18\x75\x68\x19\x7d\x94\x28\x68\x07\x68\x1a\x68\x09\x4d\x00\x30\x68\x0a\x4d\x00\
        \x02\x68\x0b\x4b\x00\x68\x0c\x4d\xeb\x03\x68\x0d\x68\x1b\x68\x15\x68\x16\x68\x17\x68\x18\
        \x75\x65\x61\x75\x2e";

#[test]
fn trace_entries_named_twice_decode_as_the_general_machine_decodes_them() {
    let (a, b, c) = (NAMED_A, NAMED_B, NAMED_C);
    for (name, bytes) in [("extra", a), ("twice", b), ("entry twice", c)] {
        assert!(
            fast_path_agrees(name, bytes),
            "{name}: {:?}",
            fast(bytes).err()
        );
    }
    let (s, _) = fast(b).unwrap();
    assert_eq!(
        s.traces().iter().map(|t| t.len()).collect::<Vec<_>>(),
        [4, 4]
    );
    let (s, _) = fast(c).unwrap();
    assert_eq!(s.traces()[0][1], s.traces()[0][2]);
}

/// Builders of the hand-made pickles below, written as CPython writes
/// `_dump_snapshot`'s dict (protocol 4, every string memoized).
fn pickle_str(out: &mut Vec<u8>, s: &str) {
    out.push(0x8c);
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
    out.push(0x94);
}

fn binget(out: &mut Vec<u8>, idx: u8) {
    out.extend_from_slice(&[b'h', idx]);
}

/// The file up to the first entry's `stream` field: `device_traces` (memo
/// 1), its list and the device's (2, 3), the entry's dict (4), then
/// action=alloc (5, 6), addr (7) = 0, size (8) = 512, stream (9) = 0. The
/// entry's dict is left open for more keys.
fn first_entry() -> Vec<u8> {
    let mut p = b"\x80\x04}\x94(".to_vec();
    pickle_str(&mut p, "device_traces"); // 1
    p.extend_from_slice(b"]\x94]\x94("); // 2, 3: device_traces, its list
    p.extend_from_slice(b"}\x94("); // 4
    pickle_str(&mut p, "action"); // 5
    pickle_str(&mut p, "alloc"); // 6
    pickle_str(&mut p, "addr"); // 7
    p.extend_from_slice(b"K\x00");
    pickle_str(&mut p, "size"); // 8
    p.extend_from_slice(b"M\x00\x02");
    pickle_str(&mut p, "stream"); // 9
    p.extend_from_slice(b"K\x00");
    p
}

/// A later entry's dict up to its `size` field, every key and the action
/// named by memo reference: action=alloc, addr, size = 512.
fn entry_start(out: &mut Vec<u8>, addr: u8) {
    out.extend_from_slice(b"}\x94(");
    for k in [5, 6, 7] {
        binget(out, k);
    }
    out.extend_from_slice(&[b'K', addr]);
    binget(out, 8);
    out.extend_from_slice(b"M\x00\x02");
}

/// Closes the device's list and `device_traces`, adds empty `segments`,
/// and ends the pickle.
fn finish(p: &mut Vec<u8>) {
    p.extend_from_slice(b"ea");
    pickle_str(p, "segments");
    p.extend_from_slice(b"]u.");
}

/// [`first_entry`], then the frames key (10), its list (11) and frame A
/// (12: filename (13) a.py (14), line (15) 1, name (16) f (17)), closed;
/// the list is left open for more frames.
fn first_entry_with_frame_a() -> Vec<u8> {
    let mut p = first_entry();
    pickle_str(&mut p, "frames"); // 10
    p.extend_from_slice(b"]\x94(}\x94("); // 11, 12
    pickle_str(&mut p, "filename"); // 13
    pickle_str(&mut p, "a.py"); // 14
    pickle_str(&mut p, "line"); // 15
    p.extend_from_slice(b"K\x01");
    pickle_str(&mut p, "name"); // 16
    pickle_str(&mut p, "f"); // 17
    p.push(b'u');
    p
}

/// A later entry ([`entry_start`]) with stream 0 and a frames list of
/// these memo references, after [`first_entry_with_frame_a`].
fn entry_with_frames(out: &mut Vec<u8>, addr: u8, refs: impl IntoIterator<Item = u8>) {
    entry_start(out, addr);
    binget(out, 9);
    out.extend_from_slice(b"K\x00");
    binget(out, 10);
    out.extend_from_slice(b"]\x94(");
    for r in refs {
        binget(out, r);
    }
    out.extend_from_slice(b"eu");
}

/// A later entry ([`entry_start`]) with stream 0 and an empty frames list,
/// as a recording without stack traces writes every entry's: the list
/// made and memoized, with no items.
fn entry_with_empty_frames(out: &mut Vec<u8>, addr: u8) {
    entry_start(out, addr);
    binget(out, 9);
    out.extend_from_slice(b"K\x00");
    binget(out, 10);
    out.extend_from_slice(b"]\x94u");
}

/// Entries with empty frames lists among entries with frames: each names
/// the one empty stack or its own, as the general machine reads them,
/// whichever came first.
#[test]
fn empty_frames_lists_name_the_empty_stack() {
    let mut p = first_entry_with_frame_a();
    p.extend_from_slice(b"eu");
    entry_with_empty_frames(&mut p, 1);
    entry_with_frames(&mut p, 2, [12]);
    entry_with_empty_frames(&mut p, 3);
    entry_with_empty_frames(&mut p, 4);
    entry_with_frames(&mut p, 5, [12, 12]);
    entry_with_empty_frames(&mut p, 6);
    finish(&mut p);

    assert!(fast_path_agrees("empty frames", &p), "{:?}", fast(&p).err());
    let (s, taken) = fast(&p).unwrap();
    assert_eq!(taken, 7);
    let trace = &s.traces()[0];
    let lens: Vec<usize> = trace.iter().map(|e| s.stack(e.frames).len()).collect();
    assert_eq!(lens, [1, 0, 1, 0, 0, 2, 0]);
    let empty: std::collections::HashSet<_> = (trace.iter())
        .filter(|e| s.stack(e.frames).is_empty())
        .map(|e| e.frames)
        .collect();
    assert_eq!(empty.len(), 1, "one stack for every empty list");
}

/// A hand-made file that writes a memo entry over (PyTorch never does)
/// between two trace entries whose frames lists have the same bytes: the
/// second list names the new frame, though its bytes were read before.
#[test]
fn a_frames_list_read_again_after_its_memo_entry_changed_names_the_new_frames() {
    // Keys and values of one entry after its first: action, addr, size,
    // stream (memo 5..=9), then the frames key (10) and a list of sixteen
    // references to memo 12 (longer than the bytes the fast path's cache
    // is keyed by).
    fn entry(out: &mut Vec<u8>, addr: u8) {
        entry_with_frames(out, addr, [12; 16]);
    }
    // The first entry makes the strings and frame A (memo 12).
    let mut p = first_entry_with_frame_a();
    p.extend_from_slice(b"eu");
    entry(&mut p, 1);
    entry(&mut p, 2);
    // Frame B, stored over memo 12, then dropped from the stack.
    p.extend_from_slice(b"}(");
    binget(&mut p, 13);
    pickle_str(&mut p, "b.py");
    binget(&mut p, 15);
    p.extend_from_slice(b"K\x02");
    binget(&mut p, 16);
    pickle_str(&mut p, "g");
    p.extend_from_slice(b"uq\x0c0");
    entry(&mut p, 3);
    entry(&mut p, 4);
    finish(&mut p);

    assert!(
        fast_path_agrees("memo written over", &p),
        "{:?}",
        fast(&p).err()
    );
    let (s, taken) = fast(&p).unwrap();
    assert_eq!(taken, 5);
    let frames = |e: &fragscope::model::TraceEvent| {
        let st = s.stack(e.frames);
        (st.len(), s.str(s.frame(st[0]).filename).to_string())
    };
    let frames: Vec<(usize, String)> = s.traces()[0].iter().map(frames).collect();
    let a = |n| (n, "a.py".to_string());
    let b = |n| (n, "b.py".to_string());
    assert_eq!(frames, [a(1), a(16), a(16), b(16), b(16)]);
}

/// A hand-made file whose frames lists all start with the same sixteen
/// frames and differ after them, as the call sites of one program share
/// their innermost frames: more lists than the fast path's cache keeps for
/// one start, in cycles and out of order. Each entry still names its own
/// frames.
#[test]
fn frames_lists_that_share_their_start_each_name_their_own_frames() {
    // After the first entry: action, addr, size, stream (memo 5..=9), the
    // frames key (10), then sixteen references to frame A (memo 12) and six
    // to A or B (memo 18) by the bits of `k`.
    fn entry(out: &mut Vec<u8>, addr: u8, k: u32) {
        let tail = (0..6).map(|bit| if k >> bit & 1 == 1 { 18 } else { 12 });
        entry_with_frames(out, addr, std::iter::repeat_n(12, 16).chain(tail));
    }
    // The first entry makes the strings and frames A (12) and B (18).
    let mut p = first_entry_with_frame_a();
    p.extend_from_slice(b"}\x94("); // 18
    binget(&mut p, 13);
    pickle_str(&mut p, "b.py"); // 19
    binget(&mut p, 15);
    p.extend_from_slice(b"K\x02");
    binget(&mut p, 16);
    pickle_str(&mut p, "g"); // 20
    p.extend_from_slice(b"ueu");
    // 48 lists (more than one start's ways) three times over in order,
    // then in a scrambled order, each list more than once.
    let mut ks: Vec<u32> = (0..3).flat_map(|_| 0..48).collect();
    let mut x = 7u64;
    for _ in 0..200 {
        ks.push((xorshift(&mut x) % 64) as u32);
    }
    for (i, &k) in ks.iter().enumerate() {
        entry(&mut p, (i % 250) as u8, k);
    }
    finish(&mut p);

    assert!(
        fast_path_agrees("lists sharing their start", &p),
        "{:?}",
        fast(&p).err()
    );
    let (s, taken) = fast(&p).unwrap();
    assert_eq!(taken, 1 + ks.len());
    let named: Vec<u32> = s.traces()[0][1..]
        .iter()
        .map(|e| {
            let st = s.stack(e.frames);
            assert_eq!(st.len(), 22);
            let file = |i: usize| s.str(s.frame(st[i]).filename).to_string();
            assert!((0..16).all(|i| file(i) == "a.py"));
            (0..6)
                .map(|bit| ((file(16 + bit) == "b.py") as u32) << bit)
                .sum()
        })
        .collect();
    assert_eq!(named, ks);
}

/// Hand-made files whose entries change their keys: a key's memo entry
/// written over between entries of the same bytes (PyTorch never does), and
/// entries whose keys differ from the entry before (as an `oom` entry's
/// `device_free` does). The fast path matches the bytes of the last keys it
/// read; each entry must still be read as the general machine reads it.
#[test]
fn entries_whose_keys_change_read_as_the_general_machine_reads_them() {
    // action=alloc, addr, size = 512, stream (9) = 0, with `extra` the key
    // at memo `extra` = 7 between size and stream, and `last` the same
    // after stream.
    fn entry(out: &mut Vec<u8>, addr: u8, extra: Option<u8>) {
        entry_with(out, addr, extra, None);
    }
    fn entry_with(out: &mut Vec<u8>, addr: u8, extra: Option<u8>, last: Option<u8>) {
        entry_start(out, addr);
        if let Some(k) = extra {
            binget(out, k);
            out.extend_from_slice(b"K\x07");
        }
        binget(out, 9);
        out.extend_from_slice(b"K\x00");
        if let Some(k) = last {
            binget(out, k);
            out.extend_from_slice(b"K\x07");
        }
        out.push(b'u');
    }
    let mut p = first_entry();
    pickle_str(&mut p, "device_free"); // 10
    p.extend_from_slice(b"K\x07u");
    entry(&mut p, 1, None);
    entry(&mut p, 2, None);
    entry(&mut p, 3, Some(10));
    entry(&mut p, 4, None);
    entry_with(&mut p, 8, None, Some(10));
    entry(&mut p, 9, None);
    // "size" written over: the same bytes now name device_free.
    pickle_str(&mut p, "device_free");
    p.extend_from_slice(b"q\x080");
    entry(&mut p, 5, None);
    entry(&mut p, 6, None);
    finish(&mut p);

    assert!(
        fast_path_agrees("keys that change", &p),
        "{:?}",
        fast(&p).err()
    );
    let (s, taken) = fast(&p).unwrap();
    assert_eq!(taken, 9);
    // No entry needs the general machine (a node of its own): the fast
    // path reads each, the first (which makes its strings) too, whichever
    // of their keys match the entry before.
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(&p[..], &mut sink).unwrap();
    let records = d.arena.nodes.iter();
    assert_eq!(records.filter(|n| matches!(n, Node::Record(..))).count(), 0);
    let fields: Vec<(u64, u64, Option<u64>)> = s.traces()[0]
        .iter()
        .map(|e| (e.addr(), e.size, s.device_free(e)))
        .collect();
    assert_eq!(
        fields,
        [
            (0, 512, Some(7)),
            (1, 512, None),
            (2, 512, None),
            (3, 512, Some(7)),
            (4, 512, None),
            (8, 512, Some(7)),
            (9, 512, None),
            (5, 0, Some(512)),
            (6, 0, Some(512)),
        ]
    );
}

/// A FRAME opcode (CPython writes one every 64 KiB, wherever the stream
/// is) between any two opcodes of a trace entry whose keys the fast path
/// reads as the last entry's: the same model as without it, both ways.
#[test]
fn a_frame_opcode_anywhere_in_a_trace_entry_changes_nothing() {
    // The opcodes of an entry after the first (see `entry_with_frames`):
    // action, addr 3, size, stream, frames of sixteen references to memo 12.
    let mut ops: Vec<Vec<u8>> = [&b"}"[..], b"\x94", b"(", b"h\x05", b"h\x06", b"h\x07"]
        .iter()
        .map(|o| o.to_vec())
        .collect();
    for o in [&b"K\x03"[..], b"h\x08", b"M\x00\x02", b"h\x09", b"K\x00"] {
        ops.push(o.to_vec());
    }
    for o in [&b"h\x0a"[..], b"]", b"\x94", b"("] {
        ops.push(o.to_vec());
    }
    ops.extend(std::iter::repeat_n(b"h\x0c".to_vec(), 16));
    ops.push(b"e".to_vec());
    ops.push(b"u".to_vec());
    let file = |frame_at: Option<usize>| {
        let mut p = first_entry_with_frame_a();
        p.extend_from_slice(b"eu");
        entry_with_frames(&mut p, 1, [12; 16]);
        entry_with_frames(&mut p, 2, [12; 16]);
        for (k, op) in ops.iter().enumerate() {
            if frame_at == Some(k) {
                p.push(0x95);
                p.extend_from_slice(&64u64.to_le_bytes());
            }
            p.extend_from_slice(op);
        }
        entry_with_frames(&mut p, 4, [12; 16]);
        finish(&mut p);
        p
    };
    let (want, taken) = fast(&file(None)).unwrap();
    assert_eq!(taken, 5);
    assert_eq!(want.traces()[0].len(), 5);
    assert_eq!(want.traces()[0][3].addr(), 3);
    for k in 1..ops.len() {
        let p = file(Some(k));
        assert!(fast_path_agrees(&format!("FRAME before op {k}"), &p));
        let (s, _) = fast(&p).unwrap();
        assert!(s == want, "FRAME before op {k} changes the model");
    }
}
