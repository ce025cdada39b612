//! Peak memory of the commands that replay a whole trace, measured per
//! child by GNU time ([`peak_rss`]): bounds, never timings. `culprits` (at
//! the end, its default) holds the decoded model and nothing of its size
//! beside it, so it is the yardstick; a command that kept a figure per event in its expanded form
//! (a `Sample` is 112 bytes, the replay's compact series about 10) would
//! pass it by most of the file's size.

use crate::util::*;

/// `check` reads its figures off the compact series: it stays within a
/// quarter of the file's size above the model (it used to expand the series
/// of every event, 0.8 times the file above it). `diff` loads its two
/// inputs at once, one on each core, and drops each run's trace once its
/// call sites are read: it stays within the sum of the two inputs' sizes
/// (it used to hold both traces and both expanded series).
#[test]
fn check_and_diff_keep_no_expanded_series() {
    let d = tempfile::tempdir().unwrap();
    // 150 000 events: about 21 MB.
    let (input, size) = generated_snapshot(d.path(), 150_000);
    let f = input.as_os_str();
    let (code, model) = peak_rss(["culprits".as_ref(), f]);
    assert_eq!(code, 0);
    for (name, args, bound) in [
        (
            "check",
            vec!["check".as_ref(), f, "--no-config".as_ref()],
            model + size / 4,
        ),
        ("diff", vec!["diff".as_ref(), f, f], size + size),
    ] {
        let (code, rss) = peak_rss(args);
        assert!(code == 0 || code == 1, "{name} exited with {code}");
        assert!(
            rss <= bound,
            "{name}: peak RSS {rss} bytes over {bound} (the model {model}, a {size}-byte input)"
        );
    }
}

/// An uncompressed pickle is mapped and read in place; the pages behind
/// the reader are handed back as it goes. `culprits` on one of about 56 MB
/// stays within 0.6 times its size plus 16 MiB: the model (a 40-byte event
/// for about 140 bytes of pickle) and the process, with about a mebibyte
/// of the mapping. Were the pages kept, the whole file would count on top.
///
/// `stats` keeps no trace entry at all, only each trace's counts: the whole
/// process stays within a third of the file, less than its entries would
/// take in the model (0.29 of it, 40 bytes an event).
#[test]
fn a_mapped_pickle_is_released_as_it_is_read() {
    let d = tempfile::tempdir().unwrap();
    let (input, size) = generated_snapshot(d.path(), 400_000);
    assert!(size > 48 << 20, "{size} bytes");
    for (cmd, bound) in [
        ("culprits", size * 6 / 10 + (16 << 20)),
        ("stats", size / 3),
    ] {
        let (code, rss) = peak_rss([cmd.as_ref(), input.as_os_str()]);
        assert_eq!(code, 0);
        assert!(
            rss <= bound,
            "{cmd}: peak RSS {rss} bytes over {bound} (a {size}-byte pickle)"
        );
    }
}

/// A JSON snapshot (what `convert --to json` writes) is parsed as it is
/// read, its trace entries taken one by one and equal values (frames,
/// strings) kept once. A file is parsed where it lies, mapped, and the
/// pages behind the parser go back to the system as it goes: `stats` on one
/// of 30 MB stays within half its size (the process, the model, a little
/// of the mapping). Gzipped, it is read as a stream: within its size plus
/// 16 MiB (the process, its buffers and the model). Parsed whole into a
/// `serde_json::Value` it took fourteen times its size. Either way the
/// figures are those of the pickle it was converted from.
#[test]
fn a_json_snapshot_is_read_as_a_stream() {
    let d = tempfile::tempdir().unwrap();
    let (pickle, _) = generated_snapshot(d.path(), 6_000);
    let json = d.path().join("snapshot.json");
    run([
        "convert",
        pickle.to_str().unwrap(),
        "-o",
        json.to_str().unwrap(),
    ])
    .expect_code(0);
    let size = std::fs::metadata(&json).unwrap().len();
    assert!(size > 20 << 20, "{size} bytes of JSON");
    let gz = gzipped(&json);
    let from_pickle = stats_figures(&pickle);
    assert_eq!(from_pickle, stats_figures(&json));
    assert_eq!(from_pickle, stats_figures(&gz));
    for (input, bound) in [(&json, size / 2), (&gz, size + (16 << 20))] {
        let (code, rss) = peak_rss(["stats".as_ref(), input.as_os_str()]);
        assert_eq!(code, 0);
        assert!(
            rss <= bound,
            "stats {}: peak RSS {rss} bytes over {bound} (a {size}-byte JSON snapshot)",
            input.display()
        );
    }
}

/// `stats --json`'s figures, without what names the file and its form.
fn stats_figures(path: &std::path::Path) -> serde_json::Value {
    let r = run(["stats", path.to_str().unwrap(), "--json"]);
    r.expect_code(0);
    let mut v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    v.as_object_mut()
        .unwrap()
        .retain(|k, _| k != "file" && k != "format" && k != "bytes");
    v
}

/// `path` gzipped to `path.gz`.
fn gzipped(path: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let out = path.with_extension(format!(
        "{}.gz",
        path.extension().unwrap().to_string_lossy()
    ));
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&out).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(&std::fs::read(path).unwrap()).unwrap();
    gz.finish().unwrap();
    out
}

/// fragscope's MessagePack form is decoded as it is read, so `culprits` on
/// one holds the model and nothing of the file beside it. The model is
/// larger than its MessagePack form (40 bytes a trace entry, against about
/// 39), so the file's size cannot bound the peak: the yardstick is
/// `culprits` on the pickle it was converted from, which holds the same model and a
/// read window (a few MiB more than the MessagePack needs); the MessagePack
/// stays within it plus 8 MiB of slack. Read whole first, it took the
/// file's size (30 MB here) above the pickle's.
#[test]
fn a_msgpack_snapshot_is_read_as_a_stream() {
    let d = tempfile::tempdir().unwrap();
    let (pickle, _) = generated_snapshot(d.path(), 600_000);
    let mp = d.path().join("snapshot.msgpack");
    run([
        "convert",
        pickle.to_str().unwrap(),
        "-o",
        mp.to_str().unwrap(),
    ])
    .expect_code(0);
    let size = std::fs::metadata(&mp).unwrap().len();
    assert!(size > 20 << 20, "{size} bytes of MessagePack");
    // The same figures as from the pickle, gzipped too.
    let from_pickle = stats_figures(&pickle);
    assert_eq!(from_pickle, stats_figures(&mp));
    assert_eq!(from_pickle, stats_figures(&gzipped(&mp)));
    let (code, pickle_rss) = peak_rss(["culprits".as_ref(), pickle.as_os_str()]);
    assert_eq!(code, 0);
    let (code, rss) = peak_rss(["culprits".as_ref(), mp.as_os_str()]);
    assert_eq!(code, 0);
    let bound = pickle_rss + (8 << 20);
    assert!(
        rss <= bound,
        "culprits: peak RSS {rss} bytes over {bound} (a {size}-byte MessagePack snapshot; \
         {pickle_rss} bytes for its pickle)"
    );
}

/// A memory_viz page (the page `torch.cuda._memory_viz.trace_plot` writes:
/// the pickle as a base64 string in its script) is scanned as it is read
/// and its string decoded straight into the pickle machine: `stats` on one
/// of 38 MB stays within its size plus 16 MiB. Read whole, it took the page,
/// the decoded pickle and the model at once: twice the page's size.
#[test]
fn a_memory_viz_page_is_read_as_a_stream() {
    use base64::Engine;
    let d = tempfile::tempdir().unwrap();
    let (pickle, _) = generated_snapshot(d.path(), 200_000);
    let b64 = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&pickle).unwrap());
    let page = d.path().join("snapshot.html");
    let text = format!(
        "<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type=\"module\">\n\
         import {{add_local_files}} from \"https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js\"\n\
         const local_files = [{{\"name\": \"snapshot.pickle\", \"base64\": \"{b64}\"}}]\n\
         add_local_files(local_files, \"Active Memory Timeline\")\n</script>\n</body>\n</html>\n"
    );
    drop(b64);
    std::fs::write(&page, text).unwrap();
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size > 20 << 20, "{size} bytes of page");
    let from_pickle = stats_figures(&pickle);
    assert_eq!(from_pickle, stats_figures(&page));
    assert_eq!(from_pickle, stats_figures(&gzipped(&page)));
    let (code, rss) = peak_rss(["stats".as_ref(), page.as_os_str()]);
    assert_eq!(code, 0);
    let bound = size + (16 << 20);
    assert!(
        rss <= bound,
        "stats: peak RSS {rss} bytes over {bound} (a {size}-byte memory_viz page)"
    );
}

/// An `export_memory_timeline` raw export of `rows` rows after 200
/// pre-existing ones, about two to a microsecond (as in the HTA example's):
/// allocations, and frees of what is live. Its text, and its distinct
/// microseconds.
fn generated_memory_timeline(rows: u64) -> (String, u64) {
    use std::fmt::Write;
    let mut s = String::from("[");
    for i in 0..200u64 {
        let _ = write!(s, "[-1, 1, {}, 7], ", 512 << (i % 8));
    }
    let (mut t, mut x) = (1_696_966_048_083_000_000i64, 0x2545_f491_4f6c_dd1du64);
    let (mut live, mut last_us, mut distinct) = (Vec::new(), -1, 0);
    for i in 0..rows {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t += [0, 0, 300, 700, 1500, 4000][(x % 6) as usize];
        if t / 1000 != last_us {
            (last_us, distinct) = (t / 1000, distinct + 1);
        }
        let sep = if i + 1 < rows { ", " } else { "" };
        if !live.is_empty() && x % 100 < 48 {
            let (bytes, cat): (i64, u64) = live.swap_remove((x >> 8) as usize % live.len());
            let _ = write!(s, "[{t}, 4, {}, {cat}]{sep}", -bytes);
        } else {
            let (bytes, cat) = (512i64 << ((x >> 16) % 15), (x >> 24) % 8);
            live.push((bytes, cat));
            let _ = write!(s, "[{t}, 2, {bytes}, {cat}]{sep}");
        }
    }
    s.push(']');
    (s, distinct + 1)
}

/// A memory-timeline export is read row by row into the rows its timeline
/// keeps (16 bytes each while they are sorted), not into a
/// `serde_json::Value`, which took twelve times the file's size, and its
/// samples (PyTorch's coalescing: one a distinct microsecond, 80 bytes
/// expanded, more than the text of its two rows) are kept compact, as what
/// changed from the one before. Its series as JSON or CSV, several times
/// the file's size, is written as it is encoded. So every command stays
/// within the file's size plus 16 MiB; so does the coalesced form of the
/// same timeline, whose series is the same.
#[test]
fn a_memory_timeline_export_is_read_as_a_stream() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("timeline.raw.json");
    let rows = 1_000_000;
    let (text, samples) = generated_memory_timeline(rows);
    std::fs::write(&path, text).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 20 << 20, "{size} bytes of timeline");
    let r = run(["stats", path.to_str().unwrap()]);
    r.expect_code(0);
    assert!(
        r.stdout()
            .contains(&format!("{} rows, {samples} time steps", rows + 200)),
        "every row read:\n{}",
        r.stdout()
    );
    // The same series in the coalesced form (`[times, sizes]`), from the
    // raw one's CSV: its samples after profiling started.
    let csv = run(["timeline", "--csv", path.to_str().unwrap()]);
    csv.expect_code(0);
    let (mut times, mut sizes) = (Vec::new(), Vec::new());
    let mut timed = String::from(
        "time_us,total,parameter,optimizer_state,input,temporary,activation,gradient,autograd_detail,unknown\n",
    );
    for line in csv.stdout().lines().skip(1) {
        let cols: Vec<&str> = line.split(',').collect();
        if cols[0].is_empty() {
            continue;
        }
        timed.push_str(line);
        timed.push('\n');
        times.push(cols[0].to_string());
        sizes.push(format!("[0,{}]", cols[2..].join(",")));
    }
    let coalesced = d.path().join("timeline.json");
    std::fs::write(
        &coalesced,
        format!("[[{}], [{}]]", times.join(","), sizes.join(",")),
    )
    .unwrap();
    let back = run(["timeline", "--csv", coalesced.to_str().unwrap()]);
    back.expect_code(0);
    assert!(
        back.stdout() == timed,
        "the coalesced form gives another series"
    );
    for file in [&path, &coalesced] {
        let size = std::fs::metadata(file).unwrap().len();
        let bound = size + (16 << 20);
        for args in [
            &["stats"][..],
            &["timeline", "--json"],
            &["timeline", "--csv"],
            &["timeline"],
        ] {
            let mut argv: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
            argv.push(file.as_os_str());
            let (code, rss) = peak_rss(argv);
            assert_eq!(code, 0);
            assert!(
                rss <= bound,
                "{args:?} {}: peak RSS {rss} bytes over {bound} (a {size}-byte memory timeline, {samples} samples)",
                file.display()
            );
        }
    }
}

/// A profiler trace of `n` steps, each an operator with an allocation and a
/// free inside it and a kernel between steps, as `torch.profiler` writes
/// them (one line an event).
fn generated_trace(n: u64) -> String {
    use std::fmt::Write;
    let mut s = String::from(
        "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"GPU\", \
         \"totalGlobalMem\": 85899345920}],\n\"traceEvents\": [\n",
    );
    let (mut allocated, reserved) = (0u64, 1u64 << 33);
    for i in 0..n {
        let ts = 1000 + 10 * i;
        let (addr, bytes) = (0x7f00_0000_0000 + (i % 64) * (1 << 20), 512 * (1 + i % 7));
        let _ = writeln!(
            s,
            "{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op{}\", \"pid\": 1, \"tid\": 1, \
             \"ts\": {ts}, \"dur\": 8, \"args\": {{\"External id\": {i}, \"Input Dims\": [[16, 559], []]}}}},",
            i % 13
        );
        for (dt, sign) in [(1, 1i64), (5, -1)] {
            allocated = allocated.wrapping_add_signed(sign * bytes as i64);
            let _ = writeln!(
                s,
                "{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \
                 \"pid\": 1, \"tid\": 1, \"ts\": {}, \"args\": {{\"Total Reserved\": {reserved}, \
                 \"Total Allocated\": {allocated}, \"Bytes\": {}, \"Addr\": {addr}, \"Device Id\": 0, \
                 \"Device Type\": 1}}}},",
                ts + dt,
                sign * bytes as i64
            );
        }
        let _ = writeln!(
            s,
            "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void kernel_{}<float>(float*)\", \"pid\": 0, \
             \"tid\": 7, \"ts\": {}, \"dur\": 2, \"args\": {{\"correlation\": {i}, \"grid\": [1, 1, 1]}}}},",
            i % 5,
            ts + 9
        );
    }
    s.push_str("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"args\": {\"name\": \"python\"}}\n]}\n");
    s
}

/// A profiler trace's `traceEvents` are read one at a time, keeping only
/// the memory events and the operators' spans: `stats` on one of 40 MB
/// stays within its size plus 16 MiB, parsed where it lies (the pages
/// behind each entry handed back: kept, they would count on top of a model
/// of about 28 MB) and gzipped, read as a stream. Parsed whole into a
/// `serde_json::Value` it took several times its size.
#[test]
fn a_profiler_trace_is_read_as_a_stream() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("trace.json");
    std::fs::write(&trace, generated_trace(50_000)).unwrap();
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size > 20 << 20, "{size} bytes of trace");
    let gz = gzipped(&trace);
    for input in [&trace, &gz] {
        let bound = size + (16 << 20);
        let r = run(["stats", input.to_str().unwrap()]);
        r.expect_code(0);
        assert!(
            r.stdout().contains("100000 [memory] events"),
            "every memory event read:\n{}",
            r.stdout()
        );
        let (code, rss) = peak_rss(["stats".as_ref(), input.as_os_str()]);
        assert_eq!(code, 0);
        assert!(
            rss <= bound,
            "stats {}: peak RSS {rss} bytes over {bound} (a {size}-byte profiler trace)",
            input.display()
        );
    }
}

/// `explain` reads a file as a stream, a line at a time, and a line longer
/// than its window in overlapping windows: a long log is never held whole,
/// nor a table of its lines, nor the lines glued for the dumps split across
/// them. Its peak stays within a bound that does not grow with the paste
/// (it held the whole text, 1.04 times a 203 MB log, before).
#[test]
fn a_long_paste_is_explained_as_a_stream() {
    let d = tempfile::tempdir().unwrap();
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. \
         GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free. \
         Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB is \
         reserved by PyTorch but unallocated.";
    // A training log's short lines, and the same on one line (a log whose
    // records were glued by a progress bar): the message sits at the end.
    let mut lines = generated_trace(50_000);
    let mut glued = String::new();
    for step in 0..1_000_000 {
        let rec = format!("step {step:>7} loss 0.{:04}", step % 9973);
        lines.push_str(&rec);
        lines.push('\n');
        glued.push_str(&rec);
        glued.push_str(" | ");
    }
    lines.push_str(oom);
    lines.push('\n');
    glued.push_str(oom);
    for (name, text) in [("log.txt", lines), ("one-line.txt", glued)] {
        let paste = d.path().join(name);
        std::fs::write(&paste, text).unwrap();
        let size = std::fs::metadata(&paste).unwrap().len();
        assert!(size > 20 << 20, "{size} bytes of paste");
        let r = run(["explain", paste.to_str().unwrap()]);
        r.expect_code(0);
        assert!(r.stdout().contains("2.00 GiB"), "{name}: {}", r.stdout());
        let (code, rss) = peak_rss(["explain".as_ref(), paste.as_os_str()]);
        assert_eq!(code, 0);
        // The process (a test build's binary is larger than a release
        // one) and a window of the text: a fraction of the paste.
        let bound = 24 << 20;
        assert!(
            rss <= bound,
            "explain {name}: peak RSS {rss} bytes over {bound} (a {size}-byte paste)"
        );
    }
}

/// `view -o` writes its page as the data is serialized and replays only to
/// the key moments (no state checkpoints): its peak stays within the
/// input's size plus 80 MiB (the process and the page's script, buffers,
/// and the key moments' segment maps). On the fragmented shape, whose
/// states hold thousands of segments, it was the data document built whole
/// as a `serde_json::Value` and the checkpoints of every 4096 events:
/// 2.3 times a 300 MB file, and 338 MiB for the 48 MB input of this test
/// (108 MiB now, release build).
#[test]
fn view_page_within_the_input_size() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("fragmented.pickle");
    let o = fragscope::synth::SynthOptions {
        events: 250_000,
        shape: fragscope::synth::Shape::Fragmented,
        ..Default::default()
    };
    std::fs::write(&input, synthetic_pickle(&o)).unwrap();
    let size = std::fs::metadata(&input).unwrap().len();
    let page = d.path().join("page.html");
    let (code, rss) = peak_rss([
        "view".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(code, 0);
    assert!(std::fs::metadata(&page).unwrap().len() > 0);
    let bound = size + (80 << 20);
    assert!(
        rss <= bound,
        "view -o: peak RSS {rss} bytes over {bound} (a {size}-byte input)"
    );
}

/// `view -o` makes each device's key-moment states, allocations and peak
/// call sites as it writes that device, and drops them before the next:
/// a page of eight busy devices stays within 6 MiB of the page of its
/// first device alone (the other devices' reports and series). It held
/// every device's states at once: 10.7 MiB over here, and 1.15 times the
/// file's size on a 104 MB trace of four devices.
#[test]
fn view_page_holds_one_device_at_a_time() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("devices.pickle");
    let o = fragscope::synth::SynthOptions {
        events: 40_000,
        shape: fragscope::synth::Shape::MultiDevice,
        devices: 8,
        busy_devices: 8,
        seed: 2,
        ..Default::default()
    };
    std::fs::write(&input, synthetic_pickle(&o)).unwrap();
    let page = d.path().join("page.html");
    let rss_of = |extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "view".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            page.as_os_str(),
        ];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let (code, rss) = peak_rss(args);
        assert_eq!(code, 0);
        rss
    };
    let one = rss_of(&["--device", "0"]);
    let all = rss_of(&[]);
    assert!(
        all <= one + (6 << 20),
        "view -o of eight devices: peak RSS {all} bytes, over {one} (its first device alone) plus 6 MiB"
    );
}

/// A snapshot whose trace is mostly `oom` entries, as a program that
/// catches its OOMs and goes on records: `ooms` of them, each with its own
/// `device_free` and time, and an allocation and its free before every
/// sixteenth.
fn trace_of_ooms(ooms: u64) -> String {
    let a = 1u64 << 40;
    let mut s = format!(
        r#"{{"segments":[{{"device":0,"address":{a},"total_size":2097152,"stream":0,"segment_type":"large","blocks":[{{"address":{a},"size":2097152,"state":"inactive"}}]}}],"device_traces":[["#
    );
    for i in 0..ooms {
        let t = 1_700_000_000_000_000 + 10 * i;
        if i > 0 {
            s.push(',');
        }
        if i % 16 == 0 {
            s.push_str(&format!(
                r#"{{"action":"alloc","addr":{a},"size":1048576,"stream":0,"time_us":{t}}},{{"action":"free_completed","addr":{a},"size":1048576,"stream":0,"time_us":{t}}},"#
            ));
        }
        s.push_str(&format!(
            r#"{{"action":"oom","addr":0,"size":{},"stream":0,"device_free":{},"time_us":{t}}}"#,
            (4 + i % 7) << 30,
            (i % 1000) << 20
        ));
    }
    s.push_str("]]}");
    s
}

/// `stats --json` lists every OOM of a snapshot and `simulate --json` every
/// recorded OOM with the program's demand there: documents longer than
/// the input. Each is written as it is serialized, so the JSON form's peak
/// stays within 4 MiB of the text form's on the same file (the model and
/// the figures both forms hold). Both used to build the document whole
/// first: 12 and 20 MiB over the text form on this 35 MB input (release
/// build); on a 205 MB trace of 1.3 M OOMs, `stats --json` took 309 MiB
/// where `stats` takes 163, `simulate --json` 279 where `simulate` takes
/// 207.
#[test]
fn stats_and_simulate_write_their_json_as_it_is_serialized() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("ooms.json");
    std::fs::write(&input, trace_of_ooms(300_000)).unwrap();
    let size = std::fs::metadata(&input).unwrap().len();
    let f = input.to_str().unwrap();
    // One setting beside the recorded ones: the document is the same shape
    // whatever the settings tried.
    let one_setting = ["simulate", f, "--conf", "expandable_segments:True"];
    for args in [&["stats", f][..], &one_setting] {
        let (code, text_rss) = peak_rss(args);
        assert_eq!(code, 0, "{args:?}");
        let json_args = [args, &["--json"]].concat();
        let (code, json_rss) = peak_rss(&json_args);
        assert_eq!(code, 0, "{json_args:?}");
        let out = run(&json_args).expect_code(0).stdout();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let listed = if args[0] == "stats" {
            v["oom_events"].as_array().map(Vec::len)
        } else {
            v["oom_demand"].as_array().map(Vec::len)
        };
        assert_eq!(listed, Some(300_000), "{json_args:?}");
        let written = out.len() as u64;
        assert!(
            written > size / 2 && written > 24 << 20,
            "{json_args:?}: {written} bytes of JSON from {size}"
        );
        let bound = text_rss + (4 << 20);
        assert!(
            json_rss <= bound,
            "{json_args:?}: peak RSS {json_rss} bytes over {bound} ({written}-byte output; the text form {text_rss})"
        );
    }
}

/// `report` counts each trace's actions for its coverage table without
/// listing the trace's OOMs (40 bytes each): on a trace of OOMs it stays
/// within 4 MiB of `culprits`, the yardstick. It listed them, for a count:
/// 12.5 MiB over on this 35 MB input (release build), 60 MB on a 205 MB
/// trace of 1.3 M OOMs. `view -o` too, and a written page makes no zoom
/// index (a served page's answer to zooming in: 29 MiB for a device of
/// more than 131 072 events): it stays within 32 MiB of `culprits` (the
/// key moments' states, every allocation's interval, the page's levels),
/// where it took 61 MiB more than `culprits`.
#[test]
fn report_and_view_of_a_trace_of_ooms_stay_near_culprits() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("ooms.json");
    std::fs::write(&input, trace_of_ooms(300_000)).unwrap();
    let (code, yardstick) = peak_rss(["culprits".as_ref(), input.as_os_str()]);
    assert_eq!(code, 0);
    for (args, slack) in [(&["report", "--no-what-if"][..], 4), (&["view"], 32)] {
        let page = d.path().join(format!("{}.html", args[0]));
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        all.extend([input.as_os_str(), "-o".as_ref(), page.as_os_str()]);
        let (code, rss) = peak_rss(&all);
        assert_eq!(code, 0, "{args:?}");
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(
            html.contains("300000 oom events"),
            "{args:?}: every OOM counted"
        );
        let bound = yardstick + (slack << 20);
        assert!(
            rss <= bound,
            "{args:?}: peak RSS {rss} bytes over {bound} (culprits {yardstick})"
        );
    }
}

/// `report` and `view -o` hold little a trace event beyond what `check`
/// holds (the model and the replay's compact series): the what-if runs
/// read their requests from the trace and keep a key number a request (4
/// bytes; they kept 28), and a written page keeps each window's largest
/// allocations as they come and its levels' points as the figures it
/// writes (it held every allocation, 64 bytes each, and 136 bytes a
/// point). On these 300 000 events the old code was 14 MB (`report`) and
/// 28 MB (`view -o`) above `check`, the new 3 and 9.
#[test]
fn report_and_view_hold_little_beside_the_model() {
    let d = tempfile::tempdir().unwrap();
    let (input, size) = generated_snapshot(d.path(), 300_000);
    let f = input.as_os_str();
    let page = d.path().join("page.html");
    let (code, base) = peak_rss(["check".as_ref(), f, "--no-config".as_ref()]);
    assert!(code == 0 || code == 1, "check exited with {code}");
    for (name, args, over) in [
        (
            "report",
            vec!["report".as_ref(), f, "-o".as_ref(), page.as_os_str()],
            6 << 20,
        ),
        (
            "view",
            vec!["view".as_ref(), f, "-o".as_ref(), page.as_os_str()],
            12 << 20,
        ),
    ] {
        let (code, rss) = peak_rss(args);
        assert_eq!(code, 0, "{name}");
        assert!(
            rss <= base + over,
            "{name}: peak RSS {rss} bytes, over {base} (check) plus {over} (a {size}-byte input)"
        );
    }
}

/// A trace of `n` allocations whose `user_metadata` is one string shared by
/// every entry, or (`fresh`) a new string at each, as a run that labels
/// every event with its step would write.
fn labelled_trace(path: &std::path::Path, n: usize, fresh: bool) -> u64 {
    use fragscope::synth::pickle_writer::Ident;
    let bytes = one_trace_pickle(n, 5, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        3 => {
            p.str(Ident::Shared(4), "time_us")?;
            p.int(k as i64)
        }
        _ => {
            p.str(Ident::Shared(5), "user_metadata")?;
            match fresh {
                true => p.str(Ident::Fresh, &format!("step {k} of the run")),
                false => p.str(Ident::Shared(6), "step"),
            }
        }
    });
    std::fs::write(path, &bytes).unwrap();
    bytes.len() as u64
}

/// A file may name a new string at every entry (a label per step, here
/// about 20 bytes of text and 30 of pickle each). Each distinct string is
/// held once by each table that numbers it, found again by hashing it
/// where it lies rather than through a map keyed by a copy, and so is each
/// combination of extras that names it: 200 000 such entries cost the
/// loaded model at most 340 bytes each above the same trace with one label
/// (about 280 here; above 400 when every table kept a key copy of its
/// values).
#[test]
fn a_new_string_at_every_entry_is_held_once_per_table() {
    let per_entry = per_entry_above_one("culprits", labelled_trace, |_, _| {});
    assert!(
        per_entry <= 340,
        "{per_entry} bytes an entry above one shared label"
    );
}

/// Peak RSS of `cmd` on a trace of 200 000 entries that `write(path, n,
/// fresh)` writes with a new value at every entry, less its peak on the
/// same trace with one value shared by all, per entry; `check` is handed
/// each file and whether it is the fresh one.
fn per_entry_above_one(
    cmd: &str,
    write: fn(&std::path::Path, usize, bool) -> u64,
    mut check: impl FnMut(&std::path::Path, bool),
) -> u64 {
    const N: usize = 200_000;
    let d = tempfile::tempdir().unwrap();
    let mut peaks = Vec::new();
    for fresh in [false, true] {
        let f = d.path().join(format!("{fresh}.pickle"));
        let size = write(&f, N, fresh);
        check(&f, fresh);
        let (code, rss) = peak_rss([cmd.as_ref(), f.as_os_str()]);
        assert_eq!(code, 0, "{cmd} {}", f.display());
        eprintln!("{cmd}: {rss} bytes peak on a {size}-byte file (fresh: {fresh})");
        peaks.push(rss);
    }
    peaks[1].saturating_sub(peaks[0]) / N as u64
}

/// A trace of `n` allocations whose stacks are `DEPTH` frames of a pool of
/// 64 shared ones (each frame dict written once, then named by reference,
/// as PyTorch pickles them): one stack at every entry, or (`fresh`) a new
/// combination at each, as a run whose call sites are all distinct writes.
fn stacked_trace(path: &std::path::Path, n: usize, fresh: bool) -> u64 {
    use fragscope::synth::pickle_writer::Ident;
    const DEPTH: usize = 24;
    let bytes = one_trace_pickle(n, 4, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        _ => {
            p.str(Ident::Shared(4), "frames")?;
            p.list(Ident::Fresh, DEPTH, |p, j| {
                // A different frame at every depth of every entry, or the
                // same at each entry.
                let seed = if fresh { k as u64 + 1 } else { 0 };
                let x = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (j % 32)) ^ j as u64;
                let frame = x % 64;
                p.dict(Ident::Shared(100 + frame), 3, |p, i| match i {
                    0 => {
                        p.str(Ident::Shared(5), "filename")?;
                        p.str(Ident::Shared(200 + frame), &format!("/src/m{frame}.py"))
                    }
                    1 => {
                        p.str(Ident::Shared(6), "line")?;
                        p.int(frame as i64)
                    }
                    _ => {
                        p.str(Ident::Shared(7), "name")?;
                        p.str(Ident::Shared(8), "forward")
                    }
                })
            })
        }
    });
    std::fs::write(path, &bytes).unwrap();
    bytes.len() as u64
}

/// A file may name a new stack at every entry (every call site distinct,
/// its frames shared). The decoder's list of each stack's frames is dropped
/// as the model takes the stack, so the two are not held at once: 200 000
/// such entries of 24 frames (76 bytes of file each) cost `stats` at most
/// 250 bytes each above the same trace with one stack (about 210 here;
/// 316 when both were held to the end of the decode).
#[test]
fn a_new_stack_at_every_entry_is_held_once() {
    // The stacks meant: one, and one an entry.
    let per_entry = per_entry_above_one("stats", stacked_trace, |f, fresh| {
        let (snap, _) = fast(&std::fs::read(f).unwrap()).unwrap();
        let want = if fresh { 200_001 } else { 2 };
        assert_eq!(snap.stacks.len(), want, "{}", f.display());
    });
    assert!(
        per_entry <= 250,
        "{per_entry} bytes an entry above one shared stack"
    );
}

/// A trace of `n` allocations whose frames are the same 8 of a pool of
/// shared frame dicts, written as a list at every entry, or (`tuples`) as a
/// tuple, as a writer that keeps `tuple(frames)` does (PyTorch writes
/// lists): either way each entry's container is new, its items references.
fn framed_trace(path: &std::path::Path, n: usize, tuples: bool) -> u64 {
    use fragscope::synth::pickle_writer::{Ident, Pickler};
    const DEPTH: usize = 8;
    let frame = |p: &mut Pickler<Vec<u8>>, j: usize| {
        p.dict(Ident::Shared(100 + j as u64), 3, |p, i| match i {
            0 => {
                p.str(Ident::Shared(5), "filename")?;
                p.str(Ident::Shared(200 + j as u64), &format!("/src/m{j}.py"))
            }
            1 => {
                p.str(Ident::Shared(6), "line")?;
                p.int(j as i64 + 1)
            }
            _ => {
                p.str(Ident::Shared(7), "name")?;
                p.str(Ident::Shared(8), "forward")
            }
        })
    };
    let bytes = one_trace_pickle(n, 4, |p, k, f| match f {
        0..=2 => alloc_item(p, k, f),
        _ => {
            p.str(Ident::Shared(4), "frames")?;
            match tuples {
                false => p.list(Ident::Fresh, DEPTH, frame),
                true => p.tuple(Ident::Fresh, DEPTH, frame),
            }
        }
    });
    std::fs::write(path, &bytes).unwrap();
    bytes.len() as u64
}

/// Frames written as a tuple at every entry give the model a list gives,
/// and the sink takes each entry as it reads it, as it takes an entry
/// whose frames are a list. The general machine reads such an entry (the
/// fast path reads lists only) and leaves two nodes of it, the record and
/// the stack: 200 000 entries cost `stats` at most 120 bytes each above
/// the same trace written with lists (about 80 here; about 270 when the
/// sink left each such entry to the arena, a dict of nodes).
#[test]
fn frames_written_as_tuples_are_taken_as_lists_are() {
    let mut models = Vec::new();
    let per_entry = per_entry_above_one("stats", framed_trace, |f, _| {
        let (snap, taken) = fast(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(taken, 200_000, "entries the sink took of {}", f.display());
        models.push(snap);
    });
    assert!(models[0] == models[1], "tuples change the model");
    assert_eq!(models[0].stacks.len(), 2);
    assert!(
        per_entry <= 120,
        "{per_entry} bytes an entry above the same frames as lists"
    );
}

/// A trace the allocator's rules do not fit (a generator's own placement:
/// every allocation inside a free block rather than at its front) makes an
/// anomaly of many events. The replay keeps each one's kind, not its
/// message: `timeline` grows by at most 100 bytes an event with a third of
/// them anomalies (55 here; 149 when each kept its message, twice).
#[test]
fn anomalies_at_many_events_cost_no_message_each() {
    const GEN: &str = r#"
import pickle, sys
n, out = int(sys.argv[1]), sys.argv[2]
base, size = 1 << 40, 1 << 30
blocks = [{"address": base, "size": size, "requested_size": 0, "state": "inactive", "frames": []}]
seg = {"device": 0, "address": base, "total_size": size, "stream": 0, "segment_type": "large",
       "is_expandable": False, "frames": [], "blocks": blocks}
t = []
for i in range(n):
    a = base + 4096 + (i % 100000) * 4096
    for act in ("alloc", "free_requested", "free_completed"):
        t.append({"action": act, "addr": a, "size": 2 << 20, "stream": 0, "time_us": len(t),
                  "frames": []})
pickle.dump({"segments": [seg], "device_traces": [t]}, open(out, "wb"), protocol=4)
"#;
    let d = tempfile::tempdir().unwrap();
    let mut rss = Vec::new();
    for n in [60_000u64, 120_000] {
        let f = d.path().join(format!("a{n}.pickle"));
        let n_arg = n.to_string();
        let args = ["-c".as_ref(), GEN.as_ref(), n_arg.as_ref(), f.as_os_str()];
        if python3(&args, "the anomalies' memory is").is_none() {
            return;
        }
        let out = run_args(&["timeline", f.to_str().unwrap()]);
        assert!(
            out.contains(&format!("OverlappingAlloc: {n} event(s)")),
            "not the anomalies meant: {out}"
        );
        let (code, peak) = peak_rss(["timeline".as_ref(), f.as_os_str()]);
        assert_eq!(code, 0);
        rss.push(peak);
    }
    let per_event = rss[1].saturating_sub(rss[0]) / (3 * 60_000);
    eprintln!("{per_event} bytes an event at the peak");
    assert!(per_event <= 100, "{per_event} bytes an event");
}

fn run_args(args: &[&str]) -> String {
    let o = std::process::Command::new(bin())
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}
