//! `fragscope events`: one line per trace event. The running figures are
//! the replay's (equal to `timeline --csv` at every event, on the fixtures
//! and every real snapshot with a trace), the `oom` line carries the free
//! device memory, ranges and `--grep` select what they say, profiler traces
//! list their memory events and `[OutOfMemory]` records, inputs without
//! events are refused in one line, and the output is written as it goes
//! (peak memory does not grow with the listing).

use crate::util::*;
use std::collections::BTreeMap;

const OOM_FIXTURE: &str = "fixtures/expandable_oom_proto5.pickle";
const SUN: &str = "constructor-sun_code-location_oom_expandable_3dev.pickle";

fn real(name: &str) -> Option<String> {
    Some(real_dir()?.join(name).to_string_lossy().into_owned())
}

/// CSV lines after the header, split on commas (the call site, last, may
/// hold commas: it is kept whole).
fn csv_rows(csv: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(header.trim_end()), "{csv}");
    let cols = header.split(',').count();
    lines
        .map(|l| l.splitn(cols, ',').map(String::from).collect())
        .collect()
}

const EVENTS_HEADER: &str =
    "device,event,time_us,action,address,size,stream,allocated,reserved,device_free,call_site";

/// (device, event) → (time_us, allocated, reserved) of `timeline --csv`.
fn timeline_figures(file: &str) -> BTreeMap<(String, String), (String, String, String)> {
    let out = run(["timeline", "--csv", file]).expect_code(0).stdout();
    let header = fragscope::render::timeline::CSV_HEADER;
    csv_rows(&out, header)
        .into_iter()
        .filter(|r| !r[1].is_empty())
        .map(|r| {
            (
                (r[0].clone(), r[1].clone()),
                (r[2].clone(), r[3].clone(), r[5].clone()),
            )
        })
        .collect()
}

/// Every listed event carries the figures `timeline --csv` has after it.
fn assert_matches_timeline(file: &str) -> usize {
    let tl = timeline_figures(file);
    let out = run(["events", "--csv", file]).expect_code(0).stdout();
    let rows = csv_rows(&out, EVENTS_HEADER);
    let mut n = 0;
    for r in rows.iter().filter(|r| !r[1].is_empty()) {
        let key = (r[0].clone(), r[1].clone());
        let want = tl
            .get(&key)
            .unwrap_or_else(|| panic!("{file}: event {key:?} is not in timeline --csv"));
        assert_eq!(
            (&r[2], &r[7], &r[8]),
            (&want.0, &want.1, &want.2),
            "{file}: device {} event {}: (time_us, allocated, reserved)",
            r[0],
            r[1]
        );
        n += 1;
    }
    assert_eq!(n, tl.len(), "{file}: every event of the timeline is listed");
    n
}

#[test]
fn running_figures_are_the_timelines() {
    assert_eq!(assert_matches_timeline(OOM_FIXTURE), 3);
    let mut files = 0;
    let present = each_real_snapshot(true, |name, _, _| {
        let p = real(name).unwrap();
        assert!(assert_matches_timeline(&p) > 0, "{name}");
        files += 1;
    });
    if present {
        assert!(files >= 10, "only {files} real snapshots with a trace");
    }
}

#[test]
fn the_oom_line_shows_the_free_device_memory() {
    // The fixture: a 2 GiB request with 100 MiB free on the device.
    let csv = run(["events", "--csv", OOM_FIXTURE])
        .expect_code(0)
        .stdout();
    let rows = csv_rows(&csv, EVENTS_HEADER);
    let oom = rows.iter().find(|r| r[3] == "oom").expect("an oom row");
    assert_eq!(
        (&oom[1][..], &oom[4][..], &oom[5][..], &oom[9][..]),
        ("2", "", "2147483648", "104857600")
    );
    assert!(
        rows.iter()
            .filter(|r| r[3] != "oom")
            .all(|r| r[9].is_empty())
    );

    let Some(p) = real(SUN) else { return };
    // README: dev 1: size 5308694528 (5063 MiB), device_free 95682560.
    let csv = run(["events", "--csv", "--device", "1", &p])
        .expect_code(0)
        .stdout();
    let rows = csv_rows(&csv, EVENTS_HEADER);
    assert_eq!(rows.len(), 596);
    let ooms: Vec<_> = rows.iter().filter(|r| r[3] == "oom").collect();
    assert_eq!(ooms.len(), 1);
    let o = ooms[0];
    assert_eq!(
        (&o[0][..], &o[1][..], &o[4][..], &o[5][..], &o[9][..]),
        ("1", "421", "", "5308694528", "95682560")
    );
    // The text line and the JSON object say the same.
    let text = run([
        "events", "--device", "1", "--from", "421", "--to", "422", &p,
    ])
    .expect_code(0)
    .stdout();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("421 "))
        .expect("event 421 listed");
    assert!(
        line.contains(" oom ") && line.ends_with("[out of memory; device free: 91.25 MiB]"),
        "{line}"
    );
    let bytes = run([
        "--bytes", "events", "--device", "1", "--from", "421", "--to", "422", &p,
    ])
    .expect_code(0)
    .stdout();
    assert!(
        bytes.contains("[out of memory; device free: 95682560]"),
        "{bytes}"
    );
    assert!(bytes.contains(" 5308694528 "), "{bytes}");
    let json = run([
        "events", "--json", "--device", "1", "--from", "421", "--to", "422", &p,
    ])
    .expect_code(0)
    .stdout();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let e = &v["devices"][0]["events"][0];
    assert_eq!(e["action"], "oom");
    assert_eq!(e["device_free"], 95682560u64);
    assert!(e["address"].is_null());
}

#[test]
fn the_text_table_is_aligned_and_pinned() {
    let out = run(["events", OOM_FIXTURE]).expect_code(0).stdout();
    crate::golden::check("events_expandable_oom.txt", &out);
    let Some(p) = real(SUN) else { return };
    let out = run(["events", &p]).expect_code(0).stdout();
    // Each device's table: every row's call site starts where the header's does.
    let mut col = None;
    let mut rows = 0;
    for l in out.lines() {
        if l.starts_with("event ") {
            col = l.find("call site");
        } else if let Some(c) = col
            && l.starts_with(' ')
            && l.len() > c
        {
            assert!(l[..c].ends_with("  ") && !l[c..].starts_with(' '), "{l}");
            rows += 1;
        } else if l.contains("events listed") {
            col = None;
        }
    }
    assert_eq!(rows, 6445 + 596 + 882);
}

/// Event indices of a listing's CSV.
fn indices(args: &[&str]) -> Vec<usize> {
    let mut a = vec!["events", "--csv"];
    a.extend(args);
    let out = run(&a).expect_code(0).stdout();
    csv_rows(&out, EVENTS_HEADER)
        .iter()
        .map(|r| r[1].parse().unwrap())
        .collect()
}

#[test]
fn ranges_and_grep_select_events() {
    let Some(p) = real(SUN) else { return };
    let one = |extra: &[&str]| {
        let mut a = vec!["--device", "1", &p];
        a.extend(extra);
        indices(&a)
    };
    // --from inclusive, --to exclusive; --to past the end stops at the end.
    assert_eq!(
        one(&["--from", "415", "--to", "425"]),
        (415..425).collect::<Vec<_>>()
    );
    assert_eq!(
        one(&["--from", "590", "--to", "99999"]),
        (590..596).collect::<Vec<_>>()
    );
    assert_eq!(one(&["--to", "3"]), vec![0, 1, 2]);

    // A call-site label lists exactly the events named so.
    let csv = run(["events", "--csv", "--device", "1", &p])
        .expect_code(0)
        .stdout();
    let all = csv_rows(&csv, EVENTS_HEADER);
    let site = "models.py:181 (update_nodes)";
    let want: Vec<usize> = all
        .iter()
        .filter(|r| r[10] == site)
        .map(|r| r[1].parse().unwrap())
        .collect();
    assert!(!want.is_empty());
    assert_eq!(one(&["--grep", site]), want);
    // Case-sensitive.
    assert!(one(&["--grep", "MODELS.PY"]).is_empty());
    // A frame deeper than the call site matches too: PyTorch's module
    // dispatch is in most stacks, the call site of few.
    let by_site = all.iter().filter(|r| r[10].contains("_call_impl")).count();
    let by_frame = one(&["--grep", "_call_impl"]);
    assert!(by_frame.len() > by_site, "{} vs {by_site}", by_frame.len());
    // With a range, both apply.
    let both = one(&["--grep", "_call_impl", "--from", "400", "--to", "500"]);
    assert_eq!(
        both,
        by_frame
            .iter()
            .copied()
            .filter(|i| (400..500).contains(i))
            .collect::<Vec<_>>()
    );
    let text = run([
        "events",
        "--device",
        "1",
        "--grep",
        "_call_impl",
        "--from",
        "400",
        "--to",
        "500",
        &p,
    ])
    .expect_code(0)
    .stdout();
    assert!(
        text.contains(&format!(
            "{} of 596 events listed (events 400 to 499), call site or a frame holding \"_call_impl\"",
            both.len()
        )),
        "{text}"
    );
    // Every device of the file by default; one range for each.
    let csv = run(["events", "--csv", "--from", "800", &p])
        .expect_code(0)
        .stdout();
    let devs: Vec<String> = csv_rows(&csv, EVENTS_HEADER)
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(devs.iter().filter(|d| *d == "0").count(), 6445 - 800);
    assert_eq!(devs.iter().filter(|d| *d == "1").count(), 0);
    assert_eq!(devs.iter().filter(|d| *d == "2").count(), 882 - 800);
}

#[test]
fn json_is_one_object_with_an_event_a_line() {
    let out = run(["events", "--json", OOM_FIXTURE])
        .expect_code(0)
        .stdout();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "fragscope.events/1");
    assert_eq!(v["kind"], "snapshot");
    let d = &v["devices"][0];
    assert_eq!(
        (d["device"].as_i64(), d["listed"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(d["report"]["final_state_matches"], true);
    let ev = d["events"].as_array().unwrap();
    assert_eq!(ev.len(), 3);
    assert_eq!(ev[1]["action"], "alloc");
    assert_eq!(ev[1]["size"], 40u64 << 20);
    assert_eq!(ev[1]["allocated"], 40u64 << 20);
    assert_eq!(ev[1]["reserved"], 60u64 << 20);
    assert_eq!(ev[1]["call_site"], "train.py:42 (forward)");
    let lines = out.lines().filter(|l| l.contains("\"call_site\"")).count();
    assert_eq!(lines, 3, "{out}");
    // An empty selection is still one object.
    let out = run(["events", "--json", "--grep", "nowhere", OOM_FIXTURE])
        .expect_code(0)
        .stdout();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["devices"][0]["listed"], 0);
    assert_eq!(v["grep"], "nowhere");
}

#[test]
fn inputs_without_events_are_refused_in_one_line() {
    let refused = |args: &[&str], says: &str| {
        let r = run(args);
        r.expect_code(2);
        let err = r.stderr();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
        assert!(r.stdout().is_empty());
    };
    // A bare list of segments: no device_traces at all.
    refused(
        &["events", "fixtures/legacy_history_list_proto3.pickle"],
        "no trace events to list: the file has no device_traces",
    );
    refused(
        &["events", "--device", "3", OOM_FIXTURE],
        "device 3 has no trace events (devices with some: 0)",
    );
    refused(
        &["events", "--from", "3", OOM_FIXTURE],
        "--from 3: past the end of device 0's trace (3 events",
    );
    refused(
        &["events", "--from", "2", "--to", "2", OOM_FIXTURE],
        "--from must be below --to",
    );
    let Some(d) = real_dir() else { return };
    let p = |n: &str| d.join(n).to_string_lossy().into_owned();
    refused(
        &["events", &p("hitsbe_empty-snapshot.pickle")],
        "no trace events to list: its device_traces are empty",
    );
    refused(
        &[
            "events",
            &p("kkaitlyn_cs336_1457-segments_empty-trace.pickle"),
        ],
        "_record_memory_history()",
    );
    refused(
        &["events", &p("hta_memory_timeline.raw.json.gz")],
        "holds tensor bytes by category, not allocator events",
    );
}

#[test]
fn output_file_is_what_stdout_would_be() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("events.csv");
    let os = o.to_string_lossy().into_owned();
    let stdout = run(["events", "--csv", OOM_FIXTURE])
        .expect_code(0)
        .stdout();
    let r = run(["events", "--csv", "-o", &os, OOM_FIXTURE]);
    r.expect_code(0);
    assert!(r.stdout().is_empty());
    assert_eq!(std::fs::read_to_string(&o).unwrap(), stdout);
    // Never over an input.
    let copy = dir.path().join("in.pickle");
    std::fs::copy(OOM_FIXTURE, &copy).unwrap();
    let c = copy.to_string_lossy().into_owned();
    let r = run(["events", "-o", &c, &c]);
    r.expect_code(2);
    assert!(r.stderr().contains("refusing to write over an input file"));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(OOM_FIXTURE).unwrap()
    );
}

#[test]
fn profiler_trace_events_carry_the_trace_totals() {
    // Two allocations, an [OutOfMemory] record, then a free.
    let mem = |ts: u64, addr: i64, bytes: i64, alloc: u64, res: u64| {
        serde_json::json!({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": bytes,
                     "Total Allocated": alloc, "Total Reserved": res}})
    };
    let gib: i64 = 1 << 30;
    let events = vec![
        mem(10, 0x7000_0000, 6 * gib, 6 << 30, 8 << 30),
        mem(20, 0x7000_0000 + 6 * gib, gib, 7 << 30, 8 << 30),
        serde_json::json!({"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 1,
            "ts": 25, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 3 * gib,
                               "Total Allocated": 7u64 << 30, "Total Reserved": 8u64 << 30}}),
        mem(30, 0x7000_0000, -6 * gib, 1 << 30, 8 << 30),
    ];
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("oom.pt.trace.json");
    std::fs::write(&p, serde_json::json!({"traceEvents": events}).to_string()).unwrap();
    let ps = p.to_string_lossy().into_owned();
    let out = run(["events", "--csv", &ps]).expect_code(0).stdout();
    let rows = csv_rows(&out, EVENTS_HEADER);
    let brief: Vec<(&str, &str, &str, &str, &str, &str)> = rows
        .iter()
        .map(|r| {
            (
                &r[0][..],
                &r[1][..],
                &r[3][..],
                &r[5][..],
                &r[7][..],
                &r[8][..],
            )
        })
        .collect();
    assert_eq!(
        brief,
        vec![
            (
                "cuda:0",
                "0",
                "alloc",
                "6442450944",
                "6442450944",
                "8589934592"
            ),
            (
                "cuda:0",
                "1",
                "alloc",
                "1073741824",
                "7516192768",
                "8589934592"
            ),
            (
                "cuda:0",
                "",
                "oom",
                "3221225472",
                "7516192768",
                "8589934592"
            ),
            (
                "cuda:0",
                "2",
                "free",
                "6442450944",
                "1073741824",
                "8589934592"
            ),
        ]
    );
    // The range counts memory events; the record before event 2 goes with it.
    assert_eq!(
        csv_rows(
            &run(["events", "--csv", "--from", "2", &ps])
                .expect_code(0)
                .stdout(),
            EVENTS_HEADER
        )
        .iter()
        .map(|r| r[3].clone())
        .collect::<Vec<_>>(),
        vec!["oom", "free"]
    );
    let text = run(["events", &ps]).expect_code(0).stdout();
    assert!(
        text.contains("cuda:0: 3 memory events, 1 out-of-memory record(s)"),
        "{text}"
    );
    assert!(text.contains("[out of memory]"), "{text}");

    // A real trace: the figures of `timeline --csv` on it.
    let Some(bert) = real("tracelens_h100_bert-small_profile-memory.json.gz") else {
        return;
    };
    // README: 218 CUDA and 18 CPU memory events.
    assert_eq!(assert_matches_timeline(&bert), 218 + 18);
    let json = run(["events", "--json", "--device", "0", "--to", "1", &bert])
        .expect_code(0)
        .stdout();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "profiler_trace");
    assert_eq!(v["devices"][0]["device"], "cuda:0");
    assert_eq!(v["devices"][0]["trace_events"], 218);
    assert!(v["devices"][0]["events"][0]["stream"].is_null());
}

/// The listing is written as it goes: on 400 000 events, listing them (tens
/// of MiB of text, CSV or JSON) costs no more peak memory than `culprits`
/// of the same file (the loaded model) plus a quarter of what is written.
#[test]
fn the_listing_is_written_as_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("synth.pickle");
    let bytes = synthetic_pickle(&fragscope::synth::SynthOptions {
        events: 400_000,
        seed: 11,
        ..Default::default()
    });
    std::fs::write(&p, bytes).unwrap();
    let ps = p.to_string_lossy().into_owned();
    let (code, model_rss) = peak_rss(["culprits", &ps]);
    assert_eq!(code, 0);
    let out = dir.path().join("listing");
    let outs = out.to_string_lossy().into_owned();
    for format in ["--json", "--csv", "--color=never"] {
        let (code, rss) = peak_rss(["events", format, &ps, "-o", &outs]);
        assert_eq!(code, 0, "{format}");
        let written = std::fs::metadata(&out).unwrap().len();
        // The listing is tens of MiB; held as text it would add as much.
        assert!(written > 32 << 20, "{format}: only {written} bytes");
        assert!(
            rss < model_rss + written / 4,
            "{format}: peak RSS {rss} bytes against {model_rss} for the model, for {written} bytes written"
        );
    }
}
