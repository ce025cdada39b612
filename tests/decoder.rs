//! The reading path (trace entries taken while the pickle is decoded) gives
//! the same model as decoding to the arena first and converting after, on
//! every real file and on synthetic ones, and it does take the entries; and
//! reads of any length (entries across every refill of the window) change
//! nothing.

mod util;
use fragscope::input::pickle::{self, NoSink};
use fragscope::input::snapshot::{TraceSink, from_arena, from_arena_with};
use fragscope::input::{self, LoadOptions};
use fragscope::model::Snapshot;
use fragscope::synth::{SynthOptions, generate, write_pickle};
use util::real_pickles;

fn slow(bytes: &[u8]) -> Result<Snapshot, String> {
    let d = pickle::decode_from(bytes, &mut NoSink).map_err(|e| e.to_string())?;
    from_arena(&d.arena, d.root).map_err(|e| e.to_string())
}

fn fast(bytes: &[u8]) -> Result<(Snapshot, usize), String> {
    let mut sink = TraceSink::new();
    let d = pickle::decode_from(bytes, &mut sink).map_err(|e| e.to_string())?;
    let taken = sink.entries();
    let s = from_arena_with(&d.arena, d.root, sink).map_err(|e| e.to_string())?;
    Ok((s, taken))
}

fn synthetic(events: u64, seed: u64) -> Vec<u8> {
    let s = generate(&SynthOptions {
        events,
        seed,
        ..Default::default()
    });
    let mut out = Vec::new();
    write_pickle(&s, &mut out).unwrap();
    out
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
    };
    for p in [&plain, &gz] {
        let e = input::load(p.to_str().unwrap(), &small).unwrap_err();
        assert!(matches!(e, input::LoadError::TooLarge { .. }), "{p:?}: {e}");
    }
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
