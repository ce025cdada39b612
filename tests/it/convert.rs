//! `fragscope convert`: reading the output back yields the identical model,
//! for every fixture and every real snapshot, through JSON and MessagePack.

use crate::util::*;
use fragscope::input::{LoadOptions, load_snapshot};

fn roundtrip(path: &str) {
    let opts = LoadOptions::default();
    let (orig, _) = load_snapshot(path, &opts).unwrap();
    let d = tempfile::tempdir().unwrap();
    for ext in ["json", "msgpack"] {
        let out = d
            .path()
            .join(format!("out.{ext}"))
            .to_string_lossy()
            .into_owned();
        run(["convert", path, "-o", &out]).expect_code(0);
        let (back, l) = load_snapshot(&out, &opts).unwrap();
        assert_eq!(back, orig, "{path} via {ext} ({})", l.format);
    }
}

#[test]
fn fixtures_round_trip() {
    for f in [
        "worked_example_proto2.pickle",
        "fragmented.json",
        "legacy_history_list_proto3.pickle",
        "pools_pending_proto4.pickle",
        "expandable_oom_proto5.pickle",
        "cpp_frames_2_0_proto0.pickle",
        "memory_viz_page.html",
        "pickle_named.json.gz",
    ] {
        roundtrip(&fixture(f));
    }
}

/// In memory through the library (the command itself is covered above).
#[test]
fn real_snapshots_round_trip() {
    use fragscope::input::{Content, load_bytes};
    use fragscope::render::encode::{to_json_bytes, to_msgpack_bytes};
    let opts = LoadOptions::default();
    for f in real_files(&[".pickle", ".pkl"]) {
        let path = f.to_string_lossy().into_owned();
        let (orig, _) = load_snapshot(&path, &opts).unwrap();
        for bytes in [to_json_bytes(&orig), to_msgpack_bytes(&orig)] {
            let Content::Snapshot(back) = load_bytes(&bytes, "round trip").unwrap().content else {
                panic!("{path}: not read back as a snapshot");
            };
            assert!(back == orig, "{path}: round trip changed the model");
        }
    }
}

#[test]
fn refuses_to_overwrite_its_input_and_unknown_extension() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snap.json");
    std::fs::copy(fixture("fragmented.json"), &p).unwrap();
    let before = std::fs::read(&p).unwrap();
    let ps = p.to_string_lossy().into_owned();
    let r = run(["convert", &ps, "-o", &ps]);
    r.expect_code(2);
    assert!(
        r.stderr().contains("refusing to write over an input"),
        "{}",
        r.stderr()
    );
    assert_eq!(std::fs::read(&p).unwrap(), before, "input untouched");
    let r = run([
        "convert",
        &ps,
        "-o",
        &d.path().join("x.bin").to_string_lossy(),
    ]);
    r.expect_code(2);
}

/// Values only MessagePack can carry (a `device_free` past `i64::MAX`) and
/// every optional field of a trace event, present and absent, come back
/// exactly.
#[test]
fn messagepack_keeps_every_optional_event_field() {
    use fragscope::input::{Content, Format, load_bytes};
    use fragscope::model::*;
    use fragscope::render::encode::to_msgpack_bytes;
    let mut i = Interner::new();
    let ctx = i.string("N/A").unwrap();
    let meta = i.string("{\"step\": 3}").unwrap();
    let cat = i.string("activation").unwrap();
    let private = i.pool((1, 5)).unwrap();
    let default = i.pool((0, 0)).unwrap();
    let odd = i.action("mystery").unwrap();
    let side = i.stream(i64::MIN).unwrap();
    let ev = |a| TraceEvent::new(a, 0x7f00_0000_0000, 512, side, StackId::EMPTY);
    // An `oom` as PyTorch writes it, without an address: it holds its own
    // device_free; the one above, with an address, keeps it in its extras.
    let mut held = TraceEvent::new(Action::Oom, 0, 1 << 30, StreamIdx::DEFAULT, StackId::EMPTY);
    let free = EventExtras {
        device_free: Some(u64::MAX - 1),
        pool: Some(private),
        ..EventExtras::NONE
    };
    i.event_extras(&mut held, free).unwrap();
    let mut x = |x: EventExtras| i.extras(x).unwrap();
    let in_private = x(EventExtras {
        pool: Some(private),
        ..EventExtras::NONE
    });
    let events = vec![
        ev(Action::Alloc),
        ev(Action::Alloc)
            .with_time_us(Some(i64::MIN))
            .with_extras(in_private),
        ev(Action::Oom)
            .with_time_us(Some(i64::MAX))
            .with_extras(x(EventExtras {
                device_free: Some(u64::MAX),
                pool: Some(default),
                ..EventExtras::NONE
            })),
        ev(odd).with_extras(x(EventExtras {
            device_free: Some(0),
            compile_context: Some(ctx),
            user_metadata: Some(meta),
            category: Some(cat),
            pool: None,
        })),
        ev(Action::FreeCompleted).with_extras(in_private),
        held,
    ];
    let mut snap = Snapshot {
        device_traces: Some(vec![events]),
        ..Snapshot::default()
    };
    i.finish(&mut snap);
    let l = load_bytes(&to_msgpack_bytes(&snap), "events.msgpack").unwrap();
    assert_eq!(l.format, Format::MsgPack);
    let Content::Snapshot(back) = l.content else {
        panic!("not read back as a snapshot");
    };
    assert!(back == snap, "MessagePack round trip changed the model");
    let t = back.trace_of(0);
    assert_eq!(t[1].time_us(), Some(i64::MIN));
    assert_eq!((back.stream(&t[1]), back.stream(&t[5])), (i64::MIN, 0));
    assert_eq!(back.device_free(&t[2]), Some(u64::MAX));
    assert_eq!(back.device_free(&t[3]), Some(0));
    assert_eq!(back.device_free(&t[5]), Some(u64::MAX - 1));
    assert_eq!((t[5].addr(), back.extras(&t[5]).device_free), (0, None));
    assert_eq!(back.pool_of(&t[5]), Some((1, 5)));
    assert_eq!(back.extras(&t[0]), EventExtras::NONE);
    let pools: Vec<_> = t.iter().map(|e| back.pool_of(e)).collect();
    assert_eq!(
        pools,
        [
            None,
            Some((1, 5)),
            Some((0, 0)),
            None,
            Some((1, 5)),
            Some((1, 5))
        ]
    );
    assert_eq!(t[3].action.name(&back), "mystery");
    let x = back.extras(&t[3]);
    let s = |v: Option<StrId>| v.map(|c| back.str(c));
    assert_eq!(
        (s(x.compile_context), s(x.user_metadata), s(x.category)),
        (Some("N/A"), Some("{\"step\": 3}"), Some("activation"))
    );
    assert_eq!(back.event_extras.len(), 3, "each combination once");
}

/// The JSON is written as it is encoded: converting a generated snapshot to
/// a JSON file over twenty times its size keeps the process's peak RSS
/// within the input's size plus 16 MiB (the process itself, its buffers and
/// the model).
/// A generated snapshot of 40 000 trace events (5.7 MB) in `d`.
fn generated(d: &std::path::Path) -> (std::path::PathBuf, u64) {
    generated_snapshot(d, 40_000)
}

#[test]
fn convert_streams_its_output() {
    let d = tempfile::tempdir().unwrap();
    let (input, size) = generated(d.path());
    for ext in ["json", "msgpack"] {
        let out = d.path().join(format!("out.{ext}"));
        let (code, rss) = peak_rss([
            "convert".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(code, 0);
        let written = std::fs::metadata(&out).unwrap().len();
        if ext == "json" {
            assert!(written > 20 * size, "{written} bytes of JSON from {size}");
        }
        let bound = size + (16 << 20);
        assert!(
            rss <= bound,
            "convert to {ext}: peak RSS {rss} bytes over {bound} ({size}-byte input, {written}-byte output)"
        );
    }
}

/// `timeline --json` and `--csv` write the full series as they read it from
/// the replay's compact series: output of several times the input's size in
/// the input's size plus 16 MiB of peak RSS (the model, the series, the
/// process). They used to build the whole document first (the 20 MB of JSON
/// of this file took 112 MB).
#[test]
fn timeline_streams_the_full_series() {
    let d = tempfile::tempdir().unwrap();
    let (input, size) = generated(d.path());
    let out = d.path().join("series");
    // JSON is over three times the input; the CSV about as large as it.
    for (flag, times) in [("--json", 6), ("--csv", 1)] {
        // The output goes to stdout: through a shell, to a file.
        let (code, rss) = peak_rss([
            "timeline".as_ref(),
            flag.as_ref(),
            input.as_os_str(),
            "--color=never".as_ref(),
        ]);
        assert_eq!(code, 0);
        let r = run(["timeline", flag, input.to_str().unwrap()]);
        std::fs::write(&out, r.expect_code(0).stdout()).unwrap();
        let written = std::fs::metadata(&out).unwrap().len();
        assert!(
            2 * written > times * size,
            "{flag}: {written} bytes from {size}"
        );
        let bound = size + (16 << 20);
        assert!(
            rss <= bound,
            "timeline {flag}: peak RSS {rss} bytes over {bound} ({size}-byte input, {written}-byte output)"
        );
    }
}

/// A JSON snapshot names every frame of every stack again, while its reader
/// makes equal values one node: the bound on what shared references may
/// expand to (a pickle memo bomb's) counts the values the text holds, not
/// the nodes. 650 distinct stacks of 100 frames over 6 000 entries, made of
/// 50 distinct frames, were refused as a bomb, parsed in place and as a
/// stream alike.
#[test]
fn a_json_snapshot_of_distinct_deep_stacks_is_read_back() {
    use std::fmt::Write;
    let frames: Vec<String> = (0..50)
        .map(|i| format!(r#"{{"filename": "/src/mod{i}.py", "line": {i}, "name": "f{i}"}}"#))
        .collect();
    let mut trace = Vec::new();
    for e in 0..2000usize {
        let stack: Vec<&str> = (0..100)
            .map(|k| frames[(e * 7 + k * (1 + e % 13)) % 50].as_str())
            .collect();
        let stack = stack.join(", ");
        for action in ["alloc", "free_requested", "free_completed"] {
            let mut entry = String::new();
            let _ = write!(
                entry,
                r#"{{"action": "{action}", "addr": {}, "size": 512, "stream": 0, "frames": [{stack}]}}"#,
                4096 * (e + 1)
            );
            trace.push(entry);
        }
    }
    let doc = format!(
        r#"{{"segments": [], "device_traces": [[{}]]}}"#,
        trace.join(", ")
    );
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("distinct.json");
    std::fs::write(&json, &doc).unwrap();
    let gz = d.path().join("distinct.json.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut enc, doc.as_bytes()).unwrap();
    enc.finish().unwrap();
    let figures = |p: &std::path::Path| {
        let r = run(["stats", p.to_str().unwrap(), "--json"]);
        r.expect_code(0);
        let mut v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
        v.as_object_mut()
            .unwrap()
            .retain(|k, _| k != "file" && k != "format" && k != "bytes");
        v
    };
    let in_place = figures(&json);
    assert_eq!(in_place, figures(&gz));
    assert!(
        in_place.to_string().contains("\"events\":6000"),
        "every entry read: {in_place}"
    );
    // Each distinct stack once in the model.
    let distinct: std::collections::HashSet<Vec<usize>> = (0..2000usize)
        .map(|e| (0..100).map(|k| (e * 7 + k * (1 + e % 13)) % 50).collect())
        .collect();
    let (snap, _) = fragscope::input::load_snapshot(
        json.to_str().unwrap(),
        &fragscope::input::LoadOptions::default(),
    )
    .unwrap();
    let stacks = snap.stacks.iter().filter(|s| !s.is_empty()).count();
    assert_eq!(stacks, distinct.len());
}

/// An output path that names a FIFO (as `/dev/null` names a device) is
/// written into, as by any other tool, not replaced by a file: the reader
/// at its other end gets the same bytes as from standard output, and the
/// FIFO is still one afterwards.
#[cfg(unix)]
#[test]
fn an_output_that_is_no_regular_file_is_written_in_place() {
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let input = fixture("fragmented.json");
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("out.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        assert!(std::env::var("CI").is_err(), "mkfifo is missing under CI");
        eprintln!("skipped: no mkfifo here");
        return;
    }
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            std::fs::File::open(&fifo)
                .unwrap()
                .read_to_end(&mut got)
                .unwrap();
            got
        })
    };
    // A writer of the test's own, held while the command runs: the reader
    // sees the end only once both are done, and a command that replaced
    // the FIFO instead fails the test rather than leave the reader waiting.
    let hold = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let fifo_arg = fifo.to_string_lossy().into_owned();
    run(["convert", &input, "--to", "json", "-o", &fifo_arg]).expect_code(0);
    drop(hold);
    let got = reader.join().unwrap();
    let want = run(["convert", &input, "--to", "json", "-o", "-"]);
    want.expect_code(0);
    assert!(!got.is_empty());
    assert_eq!(
        got,
        want.stdout().as_bytes(),
        "the FIFO's reader got other bytes"
    );
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(kind.is_fifo(), "the FIFO was replaced: {kind:?}");
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        1,
        "files left behind"
    );
}

/// A reader of standard output that stops early (`| head`) ends the
/// command with exit code 0 and nothing on stderr, however long the
/// document it was writing.
#[test]
fn a_closed_stdout_ends_a_long_output_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let d = tempfile::tempdir().unwrap();
    let snap = d.path().join("s.pickle");
    let snap_arg = snap.to_string_lossy().into_owned();
    run(["synth", "--events", "20000", "--seed", "3", "-o", &snap_arg]).expect_code(0);
    // Its JSON (tens of MB) is far more than a pipe holds.
    assert!(std::fs::metadata(&snap).unwrap().len() > 1 << 20);
    let mut child = Command::new(bin())
        .args(["convert", &snap_arg, "--to", "json", "-o", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    assert_eq!(&head[..2], b"{\"");
    // The pipe's read end is closed here; the document is megabytes long.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
