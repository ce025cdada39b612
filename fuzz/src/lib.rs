//! The invariants fragscope's decoders keep on any input, as functions that
//! panic when one is broken. The fuzz targets (`fuzz_targets/`) are thin
//! wrappers around them, and `tests/it/fuzz_seeds.rs` replays them on the seed
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

use fragscope::analysis::check::{RegressionLimit, Rules};
use fragscope::analysis::metrics::Quantity;
use fragscope::core::style::Style;
use fragscope::input::profiler::{MemoryTimeline, ProfilerTrace};
use fragscope::input::{self, Content, LoadOptions, pickle, snapshot};
use fragscope::model::{Action, Setting, Snapshot, StackId};
use fragscope::render::encode;

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
/// round trips; profiler traces and memory timelines keep theirs.
pub fn check_json(data: &[u8]) {
    match input::json::load_json(data, NAME) {
        Ok(Content::Snapshot(snap)) => {
            check_model(&snap, data.len());
            check_round_trips(&snap);
        }
        Ok(Content::Profiler(tr)) => check_profiler_trace(&tr),
        Ok(Content::MemoryTimeline(tl)) => check_memory_timeline(&tl),
        Err(e) => check_error(&e),
    }
}

/// Profiler Chrome trace: one sample per event plus the start, every index
/// points into its table, allocation/free pairs point at each other, the
/// downsampled series keeps every peak, and the reports render (the JSON one
/// parses back).
pub fn check_profiler_trace(tr: &ProfilerTrace) {
    for d in &tr.devices {
        let samples = fragscope::timeline::trace::trace_series(d).to_vec();
        assert_eq!(samples.len(), d.events.len() + 1, "{}: samples", d.label);
        for (i, e) in d.events.iter().enumerate() {
            assert!((e.thread as usize) < tr.threads.len(), "thread id");
            for n in [e.op, e.top_op, e.python].into_iter().flatten() {
                assert!((n as usize) < tr.names.len(), "name id");
            }
            if let Some(j) = e.pair {
                let other = d.events.get(j as usize).expect("pair in range");
                assert_eq!(other.pair, Some(i as u32), "pairs are mutual");
                assert!(
                    (e.bytes > 0) != (other.bytes > 0),
                    "a pair is an allocation and a free"
                );
            }
        }
        let max = |v: &[fragscope::timeline::Sample]| v.iter().map(|s| s.allocated).max();
        let down = fragscope::timeline::downsample::downsample_in(
            &samples,
            64,
            fragscope::timeline::downsample::Order::LowThenHigh,
        );
        assert!(
            down.len() <= 64 + 2,
            "{} points from downsampling to 64",
            down.len()
        );
        assert_eq!(max(&down), max(&samples), "downsampling lowered the peak");
    }
    fragscope::render::stats::trace_text(&Style::default(), NAME, "fuzz", tr);
    let mut json = Vec::new();
    fragscope::render::stats::write_trace_json(&mut json, NAME, "fuzz", tr)
        .expect("written to memory");
    serde_json::from_slice::<serde_json::Value>(&json).expect("trace JSON report parses");
}

/// Memory-timeline export: the downsampled series keeps the peak total,
/// and the reports render.
pub fn check_memory_timeline(tl: &MemoryTimeline) {
    let max = |v: &[fragscope::input::profiler::memtimeline::CategorySample]| {
        v.iter().map(|s| s.total()).max()
    };
    let down = fragscope::timeline::downsample::downsample_categories(&tl.samples, 64);
    assert!(down.len() <= 64 + 2);
    let all = tl.samples.to_vec();
    assert_eq!(tl.samples.len(), all.len());
    assert_eq!(max(&down), max(&all), "downsampling lowered the peak");
    if let Some(p) = &tl.peak {
        assert_eq!(Some(p.total), max(&all), "peak is the highest total");
    }
    fragscope::render::stats::timeline_text(&Style::default(), NAME, "fuzz", tl);
    let mut json = Vec::new();
    fragscope::render::stats::write_timeline_json(&mut json, NAME, "fuzz", tl)
        .expect("written to memory");
    serde_json::from_slice::<serde_json::Value>(&json).expect("timeline JSON report parses");
}

/// `check` configuration (fragscope.toml): errors are one line naming the
/// file; whatever parses holds only valid limits, and written back as TOML
/// it parses to the same rules.
pub fn check_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    const ORIGIN: &str = "fuzz.toml";
    let rules = match Rules::from_toml(text, ORIGIN) {
        Ok(r) => r,
        Err(e) => {
            let s = e.to_string();
            assert!(s.starts_with(ORIGIN), "{s:?}");
            one_line("config", &s);
            return;
        }
    };
    let valid = |q: Quantity| match q {
        Quantity::Ratio(r) => (0.0..=1.0).contains(&r),
        _ => true,
    };
    for (rule, q) in &rules.limits {
        assert_eq!(q.unit(), rule.metric().unit(), "{}: unit", rule.key());
        assert!(valid(*q), "{}: {q:?}", rule.key());
    }
    for (m, lim) in &rules.regressions {
        match lim {
            RegressionLimit::Relative(r) => assert!(r.is_finite() && *r >= 0.0, "{r}"),
            RegressionLimit::Absolute(q) => {
                assert_eq!(q.unit(), m.unit(), "{}: unit", m.key());
                assert!(valid(*q), "{}: {q:?}", m.key());
            }
        }
    }
    let written = config_toml(&rules);
    let back = Rules::from_toml(&written, ORIGIN)
        .unwrap_or_else(|e| panic!("rules written back do not parse: {e}\n{written}"));
    assert_eq!(back.limits, rules.limits, "limits changed:\n{written}");
    assert_eq!(back.baseline, rules.baseline);
    assert_eq!(back.regressions.len(), rules.regressions.len());
    for (m, lim) in &rules.regressions {
        let same = match (lim, &back.regressions[m]) {
            // Written as a percentage: x * 100 / 100 may move the last bit.
            (RegressionLimit::Relative(a), RegressionLimit::Relative(b)) => {
                (a - b).abs() <= 1e-12 * a.abs().max(1.0)
            }
            (a, b) => a == b,
        };
        assert!(
            same,
            "{}: {lim:?} became {:?}",
            m.key(),
            back.regressions[m]
        );
    }
}

/// Rules as a `[check]` table, in the forms `Rules::from_toml` documents.
fn config_toml(r: &Rules) -> String {
    let q = |q: &Quantity| match *q {
        Quantity::Bytes(b) | Quantity::Count(b) => match i64::try_from(b) {
            Ok(i) => toml::Value::Integer(i),
            Err(_) => toml::Value::String(b.to_string()),
        },
        Quantity::Ratio(f) => toml::Value::Float(f),
    };
    let mut check = toml::Table::new();
    for (rule, lim) in &r.limits {
        check.insert(rule.key().into(), q(lim));
    }
    let mut regs = toml::Table::new();
    for (m, lim) in &r.regressions {
        let v = match lim {
            RegressionLimit::Relative(p) => toml::Value::String(format!("{}%", p * 100.0)),
            RegressionLimit::Absolute(a) => q(a),
        };
        regs.insert(m.key().into(), v);
    }
    if !regs.is_empty() {
        check.insert("max_regression".into(), toml::Value::Table(regs));
    }
    if let Some(b) = &r.baseline {
        check.insert(
            "baseline".into(),
            toml::Value::String(b.to_string_lossy().into_owned()),
        );
    }
    let mut doc = toml::Table::new();
    doc.insert("check".into(), toml::Value::Table(check));
    toml::to_string(&doc).expect("a table serialises")
}

/// The whole loader as `fragscope` runs it: decompression bounded by the
/// limit, sniffing, every decoder, and `stats` on whatever loads.
pub fn check_load_bytes(data: &[u8]) {
    let opts = LoadOptions {
        max_input_size: FUZZ_MAX_INPUT,
        ..LoadOptions::default()
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
            Content::Profiler(tr) => check_profiler_trace(tr),
            Content::MemoryTimeline(tl) => check_memory_timeline(tl),
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
            if let Some(x) = e.extras() {
                assert!((x.0 as usize) < snap.event_extras.len());
            }
            assert!(
                (e.stream.0 as usize) <= snap.streams.len(),
                "event stream id out of range"
            );
            let x = snap.extras(e);
            for s in [x.compile_context, x.user_metadata, x.category]
                .into_iter()
                .flatten()
            {
                assert!((s.0 as usize) < snap.strings.len());
            }
            if let Action::Other(n) = e.action {
                assert!(n.index() < snap.other_actions.len());
            }
            if let Some(p) = x.pool {
                assert!((p.0 as usize) < snap.pools.len());
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
    let fs = fragscope::analysis::stats::file_stats(snap, NAME, "fuzz".into());
    let map = fragscope::render::segmap::segment_map(&Style::default(), &snap.segments, 40);
    let text = fragscope::render::stats::render(&Style::default(), &fs, &map);
    assert!(text.starts_with(NAME));
    let tallies = fragscope::model::tally::TraceTally::of_snapshot(snap);
    fragscope::analysis::stats::device_stats(snap, &tallies);
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

/// Events a replay fuzz input may carry per device before the moment checks
/// are thinned out (each `state_at` replays the whole trace again).
const REPLAY_MOMENTS: usize = 4;

/// Replay stage (`fragscope::timeline`), from whatever the loader decodes: the
/// promises of its contract (`src/replay/mod.rs`) on any model.
///
/// * One sample per event plus the start, each naming its event and time.
/// * Bytes are conserved at every sample: live + pending + inactive bytes
///   are the reserved bytes (`active + external_free == reserved`), the
///   rounding waste is `active − allocated`, and the largest free block is
///   at most the inactive bytes.
/// * At the start, the end and moments between, `state_at` gives segments
///   sorted by address that do not overlap, each tiled by its blocks (so no
///   two live blocks overlap and every block lies inside its segment), an
///   origin for exactly the live blocks, and the same figures as the sample
///   of that moment.
/// * The report counts one anomaly at most per event, and says the final
///   state matches exactly when it has no difference to show; when it
///   matches, the last state is the snapshot's segments (address, size,
///   state of every block) and the last sample has their figures.
/// * Every moment resolves inside the trace, and the key moments carry the
///   samples they name.
pub fn check_replay(data: &[u8]) {
    let opts = LoadOptions {
        max_input_size: FUZZ_MAX_INPUT,
        ..LoadOptions::default()
    };
    let Ok((bytes, _)) = input::decompress(data.to_vec(), NAME, &opts) else {
        return;
    };
    let Ok(l) = input::load_bytes(&bytes, NAME) else {
        return;
    };
    let Content::Snapshot(snap) = &l.content else {
        return;
    };
    check_replay_model(snap);
}

/// [`check_replay`] on a decoded model.
pub fn check_replay_model(snap: &Snapshot) {
    use fragscope::timeline::{self, Moment};
    let all = timeline::replay(snap);
    assert_eq!(
        all.iter().map(|r| r.device).collect::<Vec<_>>(),
        snap.devices(),
        "replay covers every device, in order"
    );
    for dr in &all {
        let d = dr.device;
        let trace = snap.trace_of(d);
        let n = trace.len();
        assert_eq!(
            dr.samples.len(),
            n + 1,
            "device {d}: one sample per event plus the start"
        );
        for (i, s) in dr.samples.iter().enumerate() {
            let want = i.checked_sub(1);
            assert_eq!(
                s.event.map(|e| e as usize),
                want,
                "device {d}: sample {i} event"
            );
            assert_eq!(
                s.time_us,
                want.and_then(|e| trace[e].time_us()),
                "device {d}: sample {i} time"
            );
            check_sample_conserves(d, i, &s);
        }
        let r = &dr.report;
        assert_eq!(r.events, n, "device {d}: events in the report");
        assert!(r.clean_events <= n);
        // Events with an anomaly count once each; records of the recorded
        // state left out count per record, with no event.
        assert_eq!(
            r.anomalies
                .iter()
                .filter(|a| a.first_event.is_some())
                .map(|a| a.count)
                .sum::<u64>(),
            (n - r.clean_events) as u64,
            "device {d}: anomalies counted once per event"
        );
        for a in &r.anomalies {
            assert!(a.count > 0 && a.first_event.is_none_or(|e| e < n), "{a:?}");
            assert_eq!(
                a.first_event.is_none(),
                a.kind == timeline::AnomalyKind::InconsistentRecord,
                "{a:?}"
            );
            one_line("anomaly", &a.example);
        }
        assert_eq!(r.final_state_matches, r.final_state_diff.is_none());
        assert!(r.inferred_blocks <= r.older_blocks && r.widened_blocks <= r.inferred_blocks);

        let mut moments = vec![None, Some(n.saturating_sub(1))];
        if n > 2 {
            moments.push(Some(n / 2));
        }
        // Past the end: the last state, as the contract's `at` clamps.
        moments.push(Some(n + 3));
        moments.truncate(REPLAY_MOMENTS);
        for at in moments {
            let st = timeline::state_at(snap, d, at);
            check_moment(snap, dr, &st, at);
        }
        if r.final_state_matches {
            let end = timeline::state_at(snap, d, n.checked_sub(1));
            let mut rec: Vec<&fragscope::model::Segment> = snap.segments_of(d).collect();
            rec.sort_by_key(|s| s.address);
            assert_eq!(
                rec.len(),
                end.segments.len(),
                "device {d}: segments at the end"
            );
            for (a, b) in rec.iter().zip(&end.segments) {
                assert_eq!((a.address, a.total_size), (b.address, b.total_size));
                let key = |s: &fragscope::model::Segment| {
                    s.blocks
                        .iter()
                        .map(|b| (b.address, b.size, b.state))
                        .collect::<Vec<_>>()
                };
                assert_eq!(key(a), key(b), "device {d}: blocks of {:#x}", a.address);
            }
            // The match is of addresses, sizes and states: requested sizes
            // come from the trace's allocations, so `allocated` may differ.
            let mut want = figures(rec.iter().copied());
            let mut got = figures_of_sample(&dr.end());
            (want.1, got.1) = (0, 0);
            assert_eq!(got, want, "device {d}: end sample");
        }

        for m in [
            Moment::Start,
            Moment::End,
            Moment::Event(0),
            Moment::Event(n),
            Moment::TimeUs(0),
            Moment::TimeUs(i64::MAX),
            Moment::PeakAllocated,
            Moment::PeakReserved,
            Moment::MaxFragmentation,
            Moment::MinLargestGap,
            Moment::Oom(0),
        ] {
            if let Ok(Some(i)) = dr.resolve(snap, m) {
                assert!(i < n, "device {d}: {m:?} resolved to {i} of {n}");
            }
        }
        for k in dr.key_moments(snap) {
            assert_eq!(k.sample, dr.sample_at(k.at), "key moment {}", k.label);
        }
    }
}

fn check_sample_conserves(d: i64, i: usize, s: &fragscope::timeline::Sample) {
    let ctx = || format!("device {d}, sample {i}: {s:?}");
    let l = s
        .layout
        .unwrap_or_else(|| panic!("a replayed sample has a layout: {}", ctx()));
    let (reserved, external_free) = (s.reserved_bytes(), s.external_bytes());
    assert!(
        s.reserved.is_some() && s.external_free.is_some(),
        "{}",
        ctx()
    );
    assert!(s.allocated <= s.active, "allocated above active: {}", ctx());
    assert_eq!(l.internal_free, s.active - s.allocated, "{}", ctx());
    assert!(l.pending_free <= external_free, "{}", ctx());
    assert_eq!(
        s.active.checked_add(external_free),
        Some(reserved),
        "bytes not conserved: {}",
        ctx()
    );
    let inactive = external_free - l.pending_free;
    assert!(l.largest_free_gap <= inactive, "{}", ctx());
    assert_eq!(l.free_gaps == 0, l.largest_free_gap == 0, "{}", ctx());
    assert!(l.free_gaps <= inactive, "{}", ctx());
    assert!((0.0..=1.0).contains(&l.fragmentation), "{}", ctx());
}

/// (reserved, allocated, active, pending, inactive, free blocks, largest
/// free block) of a set of segments.
type Figures = (u64, u64, u64, u64, u64, u64, u64);

fn figures<'a>(segs: impl IntoIterator<Item = &'a fragscope::model::Segment>) -> Figures {
    use fragscope::model::BlockState;
    let mut f = (0, 0, 0, 0, 0, 0, 0);
    for s in segs {
        f.0 += s.total_size;
        for b in &s.blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    f.1 += b.requested_or_size().min(b.size);
                    f.2 += b.size;
                }
                BlockState::ActivePendingFree => f.3 += b.size,
                BlockState::Inactive => {
                    f.4 += b.size;
                    f.5 += 1;
                    f.6 = f.6.max(b.size);
                }
            }
        }
    }
    f
}

fn figures_of_sample(s: &fragscope::timeline::Sample) -> Figures {
    let l = s.lay();
    (
        s.reserved_bytes(),
        s.allocated,
        s.active,
        l.pending_free,
        s.external_bytes() - l.pending_free,
        l.free_gaps,
        l.largest_free_gap,
    )
}

fn check_moment(
    snap: &Snapshot,
    dr: &fragscope::timeline::DeviceReplay,
    st: &fragscope::timeline::MomentState,
    at: Option<usize>,
) {
    use fragscope::model::BlockState;
    let d = dr.device;
    let n = snap.trace_of(d).len();
    assert_eq!(st.device, d);
    let want_at = at.and_then(|a| n.checked_sub(1).map(|last| a.min(last)));
    assert_eq!(st.at, want_at, "device {d}: state_at({at:?}).at");
    let mut prev_end: Option<u64> = None;
    let mut live = 0usize;
    for s in &st.segments {
        assert_eq!(s.device, d);
        let end = s
            .address
            .checked_add(s.total_size)
            .unwrap_or_else(|| panic!("device {d}: segment {:#x} wraps", s.address));
        if let Some(p) = prev_end {
            assert!(
                s.address >= p,
                "device {d}, {at:?}: segment {:#x} overlaps or precedes the one ending at {p:#x}",
                s.address
            );
        }
        prev_end = Some(end);
        let mut cur = s.address;
        for b in &s.blocks {
            assert_eq!(
                b.address, cur,
                "device {d}, {at:?}: blocks do not tile the segment at {:#x}",
                s.address
            );
            assert!(b.size > 0, "device {d}, {at:?}: empty block at {cur:#x}");
            cur = b.address.checked_add(b.size).expect("block wraps");
            if b.state != BlockState::Inactive {
                live += 1;
                assert!(
                    st.origins.contains_key(&b.address),
                    "device {d}, {at:?}: live block {:#x} has no origin",
                    b.address
                );
            }
        }
        assert_eq!(
            cur, end,
            "device {d}, {at:?}: blocks do not fill the segment at {:#x}",
            s.address
        );
    }
    assert_eq!(
        st.origins.len(),
        live,
        "device {d}, {at:?}: origins of non-live blocks"
    );
    assert_eq!(
        figures(&st.segments),
        figures_of_sample(&dr.sample_at(st.at)),
        "device {d}, {at:?}: the state's figures differ from its sample"
    );
}
