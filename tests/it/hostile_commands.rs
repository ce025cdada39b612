//! The hostile cases of tests/it/hostile.rs run by `stats` there, run through
//! every command that reads an input: damaged real files, a trace that
//! contradicts its segments, segments that contradict themselves, and
//! traces built to make per-event work quadratic. Each command answers with
//! output or one clean error line naming the file, under a watchdog and,
//! for the large cases, an address-space limit. See docs/robustness.md.

use crate::util::guarded::*;
use crate::util::{Rng, leftovers, path_str, real_inputs};
use serde_json::json;
use std::path::Path;

/// Real files cut and damaged for every command by default, one of each
/// kind (a snapshot with a trace, one without, a profiler trace), so the
/// suite takes seconds; `FRAGSCOPE_HOSTILE_FULL=1` takes every real file.
const DEFAULT_REAL: [&str; 3] = [
    "diffusion-course_tiny.pickle",
    "maphsge4_select-n_tiny_no-history.pickle",
    "tracelens_h100_bert-small_profile-memory.json.gz",
];

fn full() -> bool {
    std::env::var_os("FRAGSCOPE_HOSTILE_FULL").is_some_and(|v| v == "1")
}

fn small_real_files() -> Vec<std::path::PathBuf> {
    let all = full();
    real_inputs()
        .into_iter()
        .filter(|p| all || DEFAULT_REAL.iter().any(|n| p.ends_with(n)))
        .collect()
}

/// Runs each command (two at a time: they are independent processes) and
/// checks it answered for its file.
fn run_all(cases: Vec<(Vec<String>, String)>, limits: Limits) {
    let cases = std::sync::Mutex::new(cases);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let Some((c, f)) = cases.lock().unwrap().pop() else {
                        break;
                    };
                    let r = run_limited(&c, limits);
                    assert_answered(&r, &c, &f);
                }
            });
        }
    });
}

/// Every command that reads an input, as argument lists with `{F}` for the
/// input and `{O}` for an output path in `dir`. `diff` compares a good seed
/// with the input, so the input is the file a failure must name.
fn commands(dir: &Path, seed: &str) -> Vec<Vec<String>> {
    let o = |ext: &str| path_str(&dir.join(format!("out.{ext}")));
    let cmds: Vec<Vec<&str>> = vec![
        vec!["stats", "{F}"],
        vec!["stats", "--json", "{F}"],
        vec!["timeline", "{F}"],
        vec!["timeline", "--json", "{F}"],
        vec!["events", "{F}"],
        vec!["events", "--json", "{F}"],
        vec!["culprits", "{F}"],
        vec!["flamegraph", "{F}", "-o", "{SVG}"],
        vec!["check", "{F}"],
        vec!["diff", seed, "{F}"],
        vec!["explain", "{F}"],
        vec!["simulate", "{F}"],
        vec!["plot", "timeline", "{F}", "-o", "{SVG}"],
        vec!["plot", "segments", "{F}", "-o", "{SVG}"],
        vec!["report", "{F}", "-o", "{HTML}"],
        vec!["oom", "{F}"],
        vec!["convert", "{F}", "-o", "{JSON}"],
    ];
    cmds.into_iter()
        .map(|c| {
            c.into_iter()
                .map(|a| match a {
                    "{SVG}" => o("svg"),
                    "{HTML}" => o("html"),
                    "{JSON}" => o("json"),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect()
}

fn with_file(cmd: &[String], f: &str) -> Vec<String> {
    cmd.iter()
        .map(|a| if a == "{F}" { f.to_string() } else { a.clone() })
        .collect()
}

/// Output (exit 0, warnings allowed), a failed `check` rule (exit 1, its
/// verdict on stdout), or one clean error line naming `file` (exit 2).
fn assert_answered(r: &Run, cmd: &[String], file: &str) {
    if cmd[0] == "check" && r.code == Some(1) {
        assert!(!r.stdout.is_empty(), "check failed without saying why{r}");
        for l in r.stderr_lines() {
            assert!(l.starts_with("fragscope: warning: "), "{r}");
        }
        return;
    }
    r.assert_ok_or_clean_error(file);
}

fn seed() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/snapshot_p4.pickle").to_string()
}

#[test]
fn every_command_answers_real_files_truncated_at_every_tenth() {
    let d = tempfile::tempdir().unwrap();
    let cmds = commands(d.path(), &seed());
    for src in small_real_files() {
        let bytes = std::fs::read(&src).unwrap();
        let base = src.file_name().unwrap().to_string_lossy().into_owned();
        let mut cases = Vec::new();
        for tenth in 1..10 {
            let f = path_str(&d.path().join(format!("{tenth}0pct-{base}")));
            std::fs::write(&f, &bytes[..bytes.len() * tenth / 10]).unwrap();
            cases.extend(cmds.iter().map(|c| (with_file(c, &f), f.clone())));
        }
        run_all(cases, Limits::default());
        for tenth in 1..10 {
            std::fs::remove_file(d.path().join(format!("{tenth}0pct-{base}"))).unwrap();
        }
    }
}

#[test]
fn every_command_answers_real_files_with_random_byte_flips() {
    let d = tempfile::tempdir().unwrap();
    let cmds = commands(d.path(), &seed());
    let mut rng = Rng::new(11);
    for src in small_real_files() {
        let bytes = std::fs::read(&src).unwrap();
        let base = src.file_name().unwrap().to_string_lossy().into_owned();
        for flips in [1usize, 16, 256] {
            let b = rng.flipped(&bytes, flips);
            let f = path_str(&d.path().join(format!("flip{flips}-{base}")));
            std::fs::write(&f, &b).unwrap();
            let cases = cmds.iter().map(|c| (with_file(c, &f), f.clone())).collect();
            run_all(
                cases,
                Limits {
                    address_space: Some(4 << 30),
                    ..Default::default()
                },
            );
            std::fs::remove_file(&f).unwrap();
        }
    }
}

/// One segment whose recorded blocks overlap, a trace that frees what was
/// never allocated, allocates outside every segment, releases a segment
/// that was never reserved and names memory past the end of the address
/// space, and an OOM.
fn contradictions() -> serde_json::Value {
    let a = 1u64 << 40;
    json!({
        "segments": [{
            "device": 0, "address": a, "total_size": 2097152, "stream": 0,
            "segment_type": "large",
            "blocks": [
                {"address": a, "size": 1048576, "requested_size": 1000000, "state": "active_allocated"},
                {"address": a + 1048000, "size": 4096, "requested_size": 4096, "state": "active_allocated"},
                {"address": a + 1048576, "size": 1048576, "state": "inactive"}
            ]
        }, {
            "device": 0, "address": a + 1024, "total_size": 2097152, "stream": 0,
            "segment_type": "large", "blocks": []
        }, {
            // Moved to u64::MAX - 100 in the MessagePack form (JSON and
            // pickle integers stop at 2^63).
            "device": 0, "address": 1u64 << 62, "total_size": 2097152, "stream": 0,
            "segment_type": "small", "blocks": []
        }],
        "device_traces": [[
            {"action": "free_requested", "addr": a, "size": 1000000, "stream": 0, "time_us": 30},
            {"action": "free_completed", "addr": a, "size": 1000000, "stream": 0, "time_us": 20},
            {"action": "free_completed", "addr": a, "size": 1000000, "stream": 0, "time_us": 10},
            {"action": "free_completed", "addr": 12345, "size": 512, "stream": 0},
            {"action": "alloc", "addr": 1u64 << 50, "size": 4096, "stream": 7},
            {"action": "alloc", "addr": 1u64 << 62, "size": 1u64 << 62, "stream": 0},
            {"action": "segment_map", "addr": 1u64 << 61, "size": 1u64 << 40, "stream": 0},
            {"action": "segment_free", "addr": 1u64 << 45, "size": 1u64 << 62, "stream": 0},
            {"action": "segment_unmap", "addr": a, "size": 1u64 << 62, "stream": 0},
            {"action": "oom", "addr": 0, "size": i64::MAX, "stream": 0, "device_free": i64::MAX}
        ]]
    })
}

/// The contradictions in fragscope's MessagePack, where addresses and sizes
/// are full u64: a segment and three events run past 2^64.
fn contradictions_msgpack() -> Vec<u8> {
    let text = contradictions().to_string();
    let mut snap = match fragscope::input::load_bytes(text.as_bytes(), "case")
        .unwrap()
        .content
    {
        fragscope::input::Content::Snapshot(s) => s,
        other => panic!("{other:?}"),
    };
    snap.segments[2].address = u64::MAX - 100;
    let t = &mut snap.device_traces.as_mut().unwrap()[0];
    t[5].set_addr(u64::MAX - 10);
    t[5].size = u64::MAX;
    t[6].set_addr(u64::MAX - 4096);
    t[9].size = u64::MAX;
    fragscope::render::encode::to_msgpack_bytes(&snap)
}

#[test]
fn every_command_answers_a_trace_and_segments_that_contradict_themselves() {
    let d = tempfile::tempdir().unwrap();
    let f = path_str(&d.path().join("contradictions.msgpack"));
    std::fs::write(&f, contradictions_msgpack()).unwrap();
    for c in commands(d.path(), &seed()) {
        let c = with_file(&c, &f);
        let r = run(&c);
        assert_answered(&r, &c, &f);
    }
    // The replay says what it left out, and keeps its own books straight.
    let r = run(&["timeline", "--json", &f]);
    r.assert_ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let dev = &v["devices"][0];
    let anomalies = dev["report"]["anomalies"].as_array().unwrap();
    let rec = anomalies
        .iter()
        .find(|a| a["kind"] == "inconsistent_record")
        .unwrap_or_else(|| panic!("no inconsistent_record anomaly: {anomalies:?}"));
    // The overlapping block, the overlapping segment, the wrapping segment.
    assert_eq!(rec["count"], json!(3), "{rec}");
    assert_eq!(rec["first_event"], json!(null));
    assert_eq!(dev["report"]["final_state_matches"], json!(false));
    for s in dev["samples"].as_array().unwrap() {
        let n = |k: &str| s[k].as_u64().unwrap();
        assert_eq!(n("active") + n("external_free"), n("reserved"), "{s}");
    }
}

/// A trace of `ooms` oom events after `live` allocations that stay live:
/// one replay per OOM, or a walk over every block per OOM, is quadratic
/// in it.
fn many_ooms(live: usize, ooms: usize) -> String {
    let a = 1u64 << 40;
    let mut s = String::new();
    s.push_str(&format!(
        r#"{{"segments":[{{"device":0,"address":{a},"total_size":{},"stream":0,"segment_type":"small","blocks":["#,
        (live.max(1) * 512)
    ));
    for i in 0..live {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"address":{},"size":512,"requested_size":500,"state":"active_allocated"}}"#,
            a + 512 * i as u64
        ));
    }
    s.push_str(r#"]}],"device_traces":[["#);
    for i in 0..live {
        s.push_str(&format!(
            r#"{{"action":"alloc","addr":{},"size":500,"stream":0}},"#,
            a + 512 * i as u64
        ));
        if i % 2 == 1 {
            // A pending free before each pair keeps the cache flush busy.
            s.push_str(&format!(
                r#"{{"action":"free_requested","addr":{},"size":500,"stream":0}},"#,
                a + 512 * (i - 1) as u64
            ));
        }
    }
    for i in 0..ooms {
        if i > 0 {
            s.push(',');
        }
        s.push_str(r#"{"action":"oom","addr":0,"size":1073741824,"stream":0,"device_free":0}"#);
    }
    s.push_str("]]}");
    s
}

/// Bounded resources: every command on traces built so that per-event work
/// proportional to the trace (or to the layout) is quadratic. Linear work
/// takes a second or two per command in a debug build; the quadratic work
/// before the fix took `oom` 29 s and `report` 45 s on the 40 000 OOMs, and
/// `simulate` 32 s on 20 000 live blocks and OOMs. Each run gets a 25 s
/// watchdog (a hang, not a timing: ten times the linear cost) and 1 GiB of
/// address space.
#[test]
fn every_command_stays_bounded_on_traces_full_of_ooms() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        ("ooms.json", many_ooms(0, 40_000)),
        ("live-and-ooms.json", many_ooms(20_000, 20_000)),
    ];
    for (name, text) in cases {
        let f = path_str(&d.path().join(name));
        std::fs::write(&f, text).unwrap();
        let runs = commands(d.path(), &seed())
            .iter()
            .map(|c| (with_file(c, &f), f.clone()))
            .collect();
        run_all(
            runs,
            Limits {
                address_space: Some(1 << 30),
                hang: Some(std::time::Duration::from_secs(25)),
                ..Default::default()
            },
        );
        let r = run(&["oom", "--json", &f]);
        r.assert_ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let shown = v["ooms"].as_array().unwrap().len();
        assert_eq!(shown, 100, "the first 100 OOMs are diagnosed");
        let total = if name == "ooms.json" { 40_000 } else { 20_000 };
        assert_eq!(v["undiagnosed_ooms"], json!(total - 100));
        // The text of `stats` lists the first 20 and counts the rest; the
        // report's key moments hold the OOMs it diagnoses.
        let r = run(&["stats", &f]);
        r.assert_ok();
        let listed = r.stdout.lines().filter(|l| l.contains(": tried ")).count();
        assert_eq!(listed, 20, "{}", r.stdout);
        assert!(
            r.stdout.contains(&format!("device 0: {} more", total - 20)),
            "{}",
            r.stdout
        );
        let md = path_str(&d.path().join("r.md"));
        run(&["report", &f, "-o", &md]).assert_ok();
        let md = std::fs::read_to_string(&md).unwrap();
        assert!(md.contains("oom #100"), "{md}");
        assert!(!md.contains("oom #101"));
        assert!(md.contains(&format!("{total} oom events; the first 100 are diagnosed")));
        // The verdict names five and counts the other diagnosed ones.
        assert!(
            md.contains("Device 0: the device's section diagnoses 95 more out-of-memory events."),
            "{md}"
        );
        // The text of `timeline` shows the first 20 in its table and counts
        // the rest; its JSON form holds every one.
        let r = run(&["timeline", &f]);
        r.assert_ok();
        assert!(r.stdout.contains("│ oom #20 "), "{}", r.stdout);
        assert!(!r.stdout.contains("oom #21"));
        assert!(
            r.stdout
                .contains(&format!("{} more out-of-memory events", total - 20)),
            "{}",
            r.stdout
        );
        let r = run(&["timeline", "--json", &f]);
        r.assert_ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let labels: Vec<&str> = (v["devices"][0]["key_moments"].as_array().unwrap().iter())
            .map(|k| k["label"].as_str().unwrap())
            .collect();
        let oom_labels: Vec<&&str> = labels.iter().filter(|l| l.starts_with("oom #")).collect();
        assert_eq!(oom_labels.len(), total);
        assert_eq!(*oom_labels[total - 1], format!("oom #{total}"));
        assert_eq!(labels.last(), Some(&"end"));
        // `simulate` names the first 100 recorded OOMs and counts the rest
        // (of a trace with allocations: the other holds none to replay).
        if name == "ooms.json" {
            continue;
        }
        let r = run(&["simulate", &f]);
        r.assert_ok();
        assert!(
            r.stdout.contains(&format!("… ({} more)", total - 100)),
            "{}",
            r.stdout
        );
        assert!(r.stdout.matches(" At event ").count() <= 100);
    }
}

/// Every command that writes a file, with `{O}` for the output.
fn writers(input: &str) -> Vec<Vec<String>> {
    let cmds: Vec<Vec<&str>> = vec![
        vec!["convert", input, "-o", "{O}.json"],
        vec!["report", input, "-o", "{O}.html"],
        vec!["report", input, "-o", "{O}.md"],
        vec!["plot", "timeline", input, "-o", "{O}.svg"],
        vec!["flamegraph", input, "-o", "{O}.svg"],
        vec!["simulate", input, "--svg", "{O}.svg"],
        vec!["check", input, "--format", "junit", "-o", "{O}.xml"],
    ];
    cmds.into_iter()
        .map(|c| c.into_iter().map(String::from).collect())
        .collect()
}

fn with_output(cmd: &[String], out: &str) -> (Vec<String>, String) {
    let mut path = String::new();
    let c = cmd
        .iter()
        .map(|a| match a.strip_prefix("{O}") {
            Some(ext) => {
                path = format!("{out}{ext}");
                path.clone()
            }
            None => a.clone(),
        })
        .collect();
    (c, path)
}

/// Nothing lost, for every command that writes: an output that is the
/// input is refused and the input stays as it was; a write that fails half
/// way (RLIMIT_FSIZE) leaves the previous output whole and no temporary
/// file; a run that works replaces the output completely.
#[test]
fn every_written_output_is_whole_or_untouched() {
    let d = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(seed()).unwrap();
    std::fs::create_dir_all(d.path().join("sub")).unwrap();
    for cmd in writers("{IN}") {
        let out = path_str(&d.path().join("out"));
        let (c, path) = with_output(&cmd, &out);
        let ext = path.rsplit('.').next().unwrap().to_string();
        // The input is named like the output, so that only its being the
        // input stands in the way (its content is sniffed, not its name).
        let input = path_str(&d.path().join(format!("in.{ext}")));
        std::fs::write(&input, &bytes).unwrap();
        let c: Vec<String> = c
            .into_iter()
            .map(|a| if a == "{IN}" { input.clone() } else { a })
            .collect();
        // Over its input, reached by another spelling.
        let same = path_str(&d.path().join(format!("sub/../in.{ext}")));
        let over: Vec<String> = c
            .iter()
            .map(|a| if *a == path { same.clone() } else { a.clone() })
            .collect();
        run(&over)
            .assert_clean_error(&same)
            .assert_stderr_has("refusing to write over an input file");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            bytes,
            "input changed: {c:?}"
        );
        // A write that fails half way.
        std::fs::write(&path, b"previous output").unwrap();
        let r = run_limited(
            &c,
            Limits {
                file_size: Some(200),
                ..Default::default()
            },
        );
        r.assert_clean_error(&path)
            .assert_stderr_has("cannot write");
        assert_eq!(std::fs::read(&path).unwrap(), b"previous output", "{r}");
        assert!(
            leftovers(d.path()).is_empty(),
            "{:?}{r}",
            leftovers(d.path())
        );
        // And when it works, the output is replaced whole.
        let r = run(&c);
        assert!(
            r.code == Some(0) || (c[0] == "check" && r.code == Some(1)),
            "{r}"
        );
        let written = std::fs::read(&path).unwrap();
        assert!(written.len() > 200 && written != b"previous output", "{r}");
        assert!(leftovers(d.path()).is_empty());
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&input).unwrap();
    }
}

/// Gzip bombs (4 MB that decompress to 1 GiB) against every command, in
/// 384 MB of address space. One starts as JSON would: each command stops at
/// `--max-input-size` and says so. The other is zeros from its first byte:
/// each command that reads a snapshot refuses it on those bytes, and
/// `explain` (which reads text) stops at the limit.
#[test]
fn every_command_stops_a_decompression_bomb_at_the_limit() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let member = |start: &[u8]| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(start).unwrap();
        gz.write_all(&vec![0u8; (16 << 20) - start.len()]).unwrap();
        gz.finish().unwrap()
    };
    let rest = member(b"").repeat(63);
    let json_start = [member(b"["), rest.clone()].concat();
    let zeros = [member(b""), rest].concat();
    let (fj, fz) = (
        path_str(&d.path().join("bomb.json.gz")),
        path_str(&d.path().join("bomb.pickle.gz")),
    );
    std::fs::write(&fj, &json_start).unwrap();
    std::fs::write(&fz, &zeros).unwrap();
    let limits = Limits {
        address_space: Some(384 << 20),
        ..Default::default()
    };
    for c in commands(d.path(), &seed()) {
        let with = |f: &str| {
            let mut c = with_file(&c, f);
            c.splice(0..0, ["--max-input-size".to_string(), "64MiB".to_string()]);
            c
        };
        run_limited(&with(&fj), limits)
            .assert_clean_error(&fj)
            .assert_stderr_has("--max-input-size");
        let r = run_limited(&with(&fz), limits);
        r.assert_clean_error(&fz);
        if c[0] == "explain" {
            r.assert_stderr_has("--max-input-size");
        } else {
            r.assert_stderr_has("(starts with bytes [00, 00, 00, 00]) after gzip decompression");
        }
    }
}

/// Errors are one line naming the file and where in it, for every command;
/// `--verbose` adds the chain of causes, one `  caused by:` line each.
#[test]
fn every_command_errors_in_one_line_naming_file_and_place() {
    let d = tempfile::tempdir().unwrap();
    let wrong = path_str(&d.path().join("wrong.json"));
    std::fs::write(
        &wrong,
        r#"{"segments": [{"device": 0, "address": "0x10", "total_size": 2097152, "blocks": []}]}"#,
    )
    .unwrap();
    let missing = path_str(&d.path().join("missing.pickle"));
    for c in commands(d.path(), &seed()) {
        if c[0] == "explain" {
            // Reads text, not a snapshot: a JSON file is not a message.
            continue;
        }
        let r = run(&with_file(&c, &wrong));
        r.assert_clean_error(&wrong)
            .assert_stderr_has("segments[0].address");
        let r = run(&with_file(&c, &missing));
        r.assert_clean_error(&missing);
        assert!(!r.stderr.contains("caused by"), "{r}");
        let mut v = vec!["--verbose".to_string()];
        v.extend(with_file(&c, &missing));
        let r = run(&v);
        assert_eq!(r.code, Some(2), "{r}");
        let lines = r.stderr_lines();
        assert!(
            lines[0].starts_with("fragscope: error: ") && lines[0].contains(&missing),
            "{r}"
        );
        assert!(
            lines[1..].iter().any(|l| l.starts_with("  caused by: ")),
            "--verbose shows no cause{r}"
        );
    }
}

/// A report over many files covers every readable one, names each
/// unreadable one (on stderr and in the report) and exits 2.
#[test]
fn a_report_over_many_files_keeps_the_readable_ones() {
    let d = tempfile::tempdir().unwrap();
    let good = std::fs::read(seed()).unwrap();
    let a = path_str(&d.path().join("rank0.pickle"));
    let b = path_str(&d.path().join("rank1.pickle"));
    let c = path_str(&d.path().join("rank2.pickle"));
    let missing = path_str(&d.path().join("rank3.pickle"));
    std::fs::write(&a, &good).unwrap();
    std::fs::write(&b, &good[..good.len() / 2]).unwrap();
    std::fs::write(&c, &good).unwrap();
    let out = path_str(&d.path().join("ranks.html"));
    let r = run(&["report", &a, &b, &c, &missing, "-o", &out]);
    assert_eq!(r.code, Some(2), "{r}");
    let lines = r.stderr_lines();
    assert_eq!(lines.len(), 2, "{r}");
    for (line, bad) in lines.iter().zip([&b, &missing]) {
        assert!(
            line.starts_with("fragscope: error: ") && line.contains(bad.as_str()),
            "{r}"
        );
    }
    let html = std::fs::read_to_string(&out).unwrap();
    for name in [
        "rank0.pickle",
        "rank1.pickle",
        "rank2.pickle",
        "rank3.pickle",
    ] {
        assert!(html.contains(name), "{name} missing from the report");
    }
}
