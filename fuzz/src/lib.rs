//! The invariants fragscope's decoders keep on any input, as functions that
//! panic when one is broken. The fuzz targets (`fuzz_targets/`) are thin
//! wrappers around them, and `tests/fuzz_seeds.rs` replays them on the seed
//! corpus and on every input the fuzzers ever found, so they run under
//! `cargo test` on a stable toolchain too.
//!
//! Owns: the statement of each invariant. It must not reach into decoder
//! internals beyond their public API, and must not relax an invariant to
//! make an input pass: a failing input is a bug to fix in the decoder, or a
//! documented exception named here.
//!
//! The one documented exception: JSON has no spelling for NaN or ±infinity,
//! so a non-finite float in `allocator_settings`, an annotation or an unknown
//! key becomes `null` in the JSON form (MessagePack keeps it).

use fragscope::encode;
use fragscope::input::{self, Content, LoadOptions, pickle, snapshot};
use fragscope::model::{Action, Setting, Snapshot, StackId};

/// The name decoders are given; every error must start with it.
pub const NAME: &str = "fuzz-input";

/// Bound on decompressed bytes in the `load_bytes` target (small, so that a
/// bomb is cut short quickly).
pub const FUZZ_MAX_INPUT: u64 = 1 << 20;

/// Records (segments, blocks, trace entries, annotations) a decoded model may
/// hold per input byte. Memo references let a pickle name one record many
/// times; the schema layer bounds the expansion, and this checks it does.
pub const RECORDS_PER_BYTE: usize = 4;

fn one_line(what: &str, msg: &str) {
    assert!(
        !msg.contains(['\n', '\r']),
        "{what} error message spans several lines: {msg:?}"
    );
}

/// Pickle decoder: decoding is linear in the input (arena nodes and
/// container references never exceed the input bytes); whatever decodes to a
/// snapshot survives the JSON and MessagePack round trips.
pub fn check_pickle(data: &[u8]) {
    let d = match pickle::decode(data) {
        Ok(d) => d,
        Err(e) => {
            assert!(
                e.offset <= data.len() as u64,
                "error offset {} past the end ({} bytes)",
                e.offset,
                data.len()
            );
            one_line("pickle", &e.msg);
            return;
        }
    };
    let nodes = d.arena.nodes.len();
    assert!(
        nodes <= data.len(),
        "{nodes} arena nodes from {} bytes",
        data.len()
    );
    assert!((d.root as usize) < nodes, "root outside the arena");
    let mut refs = 0usize;
    let mut payload = 0usize;
    for n in &d.arena.nodes {
        use input::value::Node;
        match n {
            Node::List(v) => refs += v.len(),
            Node::Tuple(v) => refs += v.len(),
            Node::Dict(v) => refs += 2 * v.len(),
            // Invalid UTF-8 becomes U+FFFD (3 bytes) and latin-1 at most 2.
            Node::Str(s) => payload += s.len(),
            Node::Bytes(b) => payload += b.len(),
            _ => {}
        }
    }
    assert!(
        refs <= data.len(),
        "{refs} container references from {} bytes",
        data.len()
    );
    assert!(
        payload <= 3 * data.len(),
        "{payload} bytes of strings from {} bytes",
        data.len()
    );
    match snapshot::from_arena(&d.arena, d.root) {
        Ok(snap) => {
            check_model(&snap, data.len());
            check_round_trips(&snap);
        }
        Err(e) => {
            one_line("schema", &e.path);
            one_line("schema", &e.msg);
        }
    }
}

/// JSON decoder: errors are one line naming the input; snapshots survive the
/// round trips.
pub fn check_json(data: &[u8]) {
    match input::json::load_json(data, NAME) {
        Ok(Content::Snapshot(snap)) => {
            check_model(&snap, data.len());
            check_round_trips(&snap);
        }
        Ok(Content::Profiler(_)) | Ok(Content::MemoryTimeline(_)) => {}
        Err(e) => check_error(&e),
    }
}

/// The whole loader as `fragscope` runs it: decompression bounded by the
/// limit, sniffing, every decoder, and `stats` on whatever loads.
pub fn check_load_bytes(data: &[u8]) {
    let opts = LoadOptions {
        max_input_size: FUZZ_MAX_INPUT,
    };
    let bytes = match input::decompress(data.to_vec(), NAME, &opts) {
        Ok((b, _)) => b,
        Err(e) => return check_error(&e),
    };
    assert!(bytes.len() as u64 <= FUZZ_MAX_INPUT, "limit not enforced");
    match input::load_bytes(&bytes, NAME) {
        Ok(l) => match &l.content {
            Content::Snapshot(snap) => {
                check_model(snap, bytes.len());
                check_stats(snap);
                check_round_trips(snap);
            }
            Content::Profiler(_) | Content::MemoryTimeline(_) => {}
        },
        Err(e) => check_error(&e),
    }
}

fn check_error(e: &input::LoadError) {
    let s = e.to_string();
    assert!(
        s.starts_with(NAME),
        "error does not name the input first: {s:?}"
    );
    assert_eq!(e.file(), NAME);
    one_line("load", &s);
}

/// Every id in the model points into its tables, and the record count is
/// bounded by the input size.
pub fn check_model(snap: &Snapshot, input_len: usize) {
    let stack_ok = |id: StackId| (id.0 as usize) < snap.stacks.len();
    assert!(!snap.stacks.is_empty() && snap.stacks[0].is_empty());
    for st in &snap.stacks {
        for f in st {
            assert!((f.0 as usize) < snap.frames.len(), "frame id out of range");
        }
    }
    for f in &snap.frames {
        assert!((f.filename.0 as usize) < snap.strings.len());
        assert!((f.name.0 as usize) < snap.strings.len());
    }
    let mut records = snap.segments.len();
    for s in &snap.segments {
        assert!(stack_ok(s.frames), "segment stack id out of range");
        records += s.blocks.len();
        for b in &s.blocks {
            assert!(stack_ok(b.frames), "block stack id out of range");
        }
    }
    for t in snap.traces() {
        records += t.len();
        for e in t {
            assert!(stack_ok(e.frames), "event stack id out of range");
            for s in [e.compile_context, e.user_metadata, e.category]
                .into_iter()
                .flatten()
            {
                assert!((s.0 as usize) < snap.strings.len());
            }
            if let Action::Other(s) = e.action {
                assert!((s.0 as usize) < snap.strings.len());
            }
        }
    }
    records += snap.external_annotations.as_ref().map_or(0, |a| a.len());
    assert!(
        records <= RECORDS_PER_BYTE * input_len + 4096,
        "{records} records from {input_len} bytes"
    );
}

/// `stats` over the model: no panic, no overflow, text and JSON render.
pub fn check_stats(snap: &Snapshot) {
    let fs = fragscope::stats::file_stats(snap, NAME, "fuzz".into());
    let map = fragscope::render::segmap::segment_map(&snap.segments, 40);
    let text = fragscope::render::stats::render(&fs, &map);
    assert!(text.starts_with(NAME));
    fragscope::stats::device_stats(snap);
    assert_eq!(
        fs.devices.iter().map(|d| d.stats.segments).sum::<u64>(),
        fs.totals.segments,
        "per-device segment counts do not add up"
    );
}

/// A decoded snapshot re-encodes to JSON and to MessagePack, and each
/// decodes back to the same model.
pub fn check_round_trips(snap: &Snapshot) {
    let json = encode::to_json_bytes(snap);
    let back = match input::load_bytes(&json, NAME) {
        Ok(l) => match l.content {
            Content::Snapshot(s) => s,
            other => panic!("re-encoded JSON read back as {other:?}"),
        },
        Err(e) => panic!(
            "re-encoded JSON does not load: {e}\n{}",
            String::from_utf8_lossy(&json)
        ),
    };
    let want = without_non_finite(snap);
    if back != want {
        panic!(
            "JSON round trip changed the model: {}",
            first_difference(&want, &back)
        );
    }

    let mp = encode::to_msgpack_bytes(snap);
    let back = match input::load_bytes(&mp, NAME) {
        Ok(l) => match l.content {
            Content::Snapshot(s) => s,
            other => panic!("re-encoded MessagePack read back as {other:?}"),
        },
        Err(e) => panic!("re-encoded MessagePack does not load: {e}"),
    };
    // Compared as bytes, so that a NaN kept by MessagePack compares equal.
    assert!(
        encode::to_msgpack_bytes(&back) == mp,
        "MessagePack round trip changed the model: {}",
        first_difference(snap, &back)
    );
}

fn finite(s: &mut Setting) {
    match s {
        Setting::Float(f) if !f.is_finite() => *s = Setting::None,
        Setting::List(l) => l.iter_mut().for_each(finite),
        Setting::Map(m) => m.iter_mut().for_each(|(_, v)| finite(v)),
        _ => {}
    }
}

/// The model as JSON can carry it (see the module doc).
pub fn without_non_finite(snap: &Snapshot) -> Snapshot {
    let mut s = snap.clone();
    if let Some(a) = &mut s.allocator_settings {
        a.entries.iter_mut().for_each(|(_, v)| finite(v));
    }
    if let Some(a) = &mut s.external_annotations {
        for x in a {
            x.fields.iter_mut().for_each(|(_, v)| finite(v));
        }
    }
    s.unknown_keys.iter_mut().for_each(|(_, v)| finite(v));
    s
}

/// Names the first part of two models that differs (for a readable failure).
pub fn first_difference(a: &Snapshot, b: &Snapshot) -> String {
    macro_rules! field {
        ($f:ident) => {
            if format!("{:?}", a.$f) != format!("{:?}", b.$f) {
                return format!(
                    "{}:\n  before: {:.2000}\n  after:  {:.2000}",
                    stringify!($f),
                    format!("{:?}", a.$f),
                    format!("{:?}", b.$f)
                );
            }
        };
    }
    field!(shape);
    field!(segments);
    field!(device_traces);
    field!(allocator_settings);
    field!(external_annotations);
    field!(unknown_keys);
    field!(strings);
    field!(frames);
    field!(stacks);
    "no difference in Debug form (a NaN?)".into()
}
