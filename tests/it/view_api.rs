//! `fragscope view`'s answers beyond the snapshot's series and states: the
//! what-if table, served on request and carried by a written page, as
//! `fragscope simulate` prints it; the pages of a profiler trace, of a
//! memory-timeline export (their figures those of `report`; golden data
//! in view.rs) and of a directory of ranks.

use crate::util::{fixture, run};
use crate::view::{Server, data_of, get};
use std::path::Path;

const OOM_FIXTURE: &str = "view_oom_two_devices.pickle";

/// What `fragscope simulate FILE --device D` prints with FILE named by its
/// base name (as the page names it), `None` where it refuses (no
/// allocations in the device's trace).
fn simulate(file: &str, device: i64) -> Option<String> {
    let r = run(["simulate", file, "--device", &device.to_string()]);
    let name = Path::new(file).file_name().unwrap().to_str().unwrap();
    match r.code() {
        0 => Some(r.stdout().replacen(file, name, 1)),
        _ => {
            assert!(r.stderr().contains("no allocations"), "{}", r.stderr());
            None
        }
    }
}

#[test]
fn what_if_written_where_report_runs_it() {
    let mut tables = 0;
    for name in [
        OOM_FIXTURE,
        "gap_fragmented_moment.json",
        "pools_pending_proto4.pickle",
    ] {
        let file = fixture(name);
        let data = data_of(&file, &[]);
        for d in data["devices"].as_array().unwrap() {
            let dev = d["device"].as_i64().unwrap();
            let w = &d["what_if"];
            match simulate(&file, dev) {
                None => assert!(
                    w["how"]
                        .as_str()
                        .unwrap()
                        .contains("no allocations in its trace")
                ),
                Some(_) if d["ooms"].as_array().unwrap().is_empty() => {
                    let how = w["how"].as_str().unwrap();
                    assert_eq!(how, format!("fragscope simulate {name} --device {dev}"));
                }
                Some(table) => {
                    assert_eq!(w["table"].as_str().unwrap(), table, "{name}: device {dev}");
                    tables += 1;
                }
            }
        }
    }
    assert!(
        tables > 0,
        "{OOM_FIXTURE} has an OOM on a device with allocations"
    );
}

#[test]
fn what_if_served_on_request() {
    let file = fixture(OOM_FIXTURE);
    let srv = Server::start(&file, &[]);
    let (code, body) = get(&srv, "/api/data");
    assert_eq!(code, 200);
    let data: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut served = 0;
    for d in data["devices"].as_array().unwrap() {
        let dev = d["device"].as_i64().unwrap();
        let path = format!("/api/whatif?device={dev}");
        let (code, table) = get(&srv, &path);
        match simulate(&file, dev) {
            Some(want) => {
                assert_eq!(d["what_if"]["request"].as_str(), Some(path.as_str()));
                assert_eq!(code, 200, "{table}");
                assert_eq!(table, want, "device {dev}");
                served += 1;
            }
            None => {
                assert!(d["what_if"]["how"].is_string());
                assert_eq!(code, 400, "{table}");
            }
        }
    }
    assert!(served > 0);
    for bad in [
        "/api/whatif?device=7",
        "/api/whatif",
        "/api/whatif?device=x",
    ] {
        assert_eq!(get(&srv, bad).0, 400, "{bad}");
    }
}

/// The pages' verdicts are the report's, and the series its chart's.
#[test]
fn trace_and_memory_timeline_pages_are_the_report() {
    for (name, kind) in [
        ("cpu_only_trace.json.gz", "profiler_trace"),
        ("memory_timeline_after.raw.json", "memory_timeline"),
    ] {
        let file = fixture(name);
        let d = data_of(&file, &[]);
        assert_eq!(d["kind"], kind);
        let md = run(["report", "--markdown", &file]).expect_code(0).stdout();
        let verdict = d["verdict"].as_array().unwrap();
        assert!(!verdict.is_empty());
        for v in verdict {
            assert!(md.contains(v.as_str().unwrap()), "{name}: {v} not in\n{md}");
        }
        assert!(!d["no_segment_map"].as_str().unwrap().is_empty());
        // Served: the page and its data, and no state to ask for.
        let srv = Server::start(&file, &[]);
        let (code, body) = get(&srv, "/api/data");
        assert_eq!(code, 200);
        let served: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(served["verdict"], d["verdict"]);
        assert_eq!(served["served"], true);
        assert_eq!(get(&srv, "/").0, 200);
        assert_eq!(get(&srv, "/api/state?device=0&event=0").0, 404);
    }
    // The memory timeline's peak is the fixture's 708 MiB.
    let d = data_of(&fixture("memory_timeline_after.raw.json"), &[]);
    assert_eq!(d["peak_text"], "708.00 MiB");
    let activation = d["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "activation")
        .unwrap();
    let top = activation["bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .max();
    assert_eq!(top, Some(450 << 20));
}

/// A zoomed window answered from the buckets keeps the window's extremes
/// (no peak lowered, no dip raised) and stays inside it.
#[test]
fn zoomed_windows_keep_their_extremes() {
    use fragscope::timeline::{Sample, Series};
    let n = 600_000u32;
    let mut x = 12345u64;
    let samples: Vec<Sample> = (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let reserved = (x >> 40) % 1000 + u64::from(i % 5000 == 0) * 10_000;
            Sample {
                event: i.checked_sub(1),
                reserved: Some(reserved),
                allocated: reserved / 2,
                ..Default::default()
            }
        })
        .collect();
    let series = Series::from(samples.clone());
    let zoom = fragscope::render::view::Zoom::new(&series);
    // Windows answered from each level of buckets (16, 128 and 1 024
    // samples a bucket here) and from the samples themselves.
    for (from, to, points) in [
        (-1, n as i64 - 2, 2000),
        (1234, 400_000, 2000),
        (77, 77 + 300_000, 2000),
        (100, 100 + 60_000, 2000),
        (-1, n as i64 - 2, 200),
        (999, 500_000, 100),
        (5000, 9000, 2000),
    ] {
        let w = zoom.window(&series, from, to, points);
        let got: Vec<u64> = serde_json::from_value(w["reserved"].clone()).unwrap();
        let events: Vec<i64> = serde_json::from_value(w["event"].clone()).unwrap();
        let raw = &samples[(from + 1) as usize..=(to + 1) as usize];
        assert_eq!(
            got.iter().max(),
            raw.iter().map(|s| s.reserved_bytes()).max().as_ref(),
            "{from}..{to}"
        );
        assert_eq!(
            got.iter().min(),
            raw.iter().map(|s| s.reserved_bytes()).min().as_ref(),
            "{from}..{to}"
        );
        assert!(got.len() <= points + 2, "{} points", got.len());
        assert!(
            events.iter().all(|e| (from..=to).contains(e)),
            "{from}..{to}"
        );
    }
}

/// A directory of ranks opens on `stats DIR`'s table; served, a row opens
/// the rank's own page by its index, and nothing is read from a path in
/// the request.
#[test]
fn rank_directory_overview_and_drill_down() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = dir.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    for (i, f) in [
        OOM_FIXTURE,
        "pools_pending_proto4.pickle",
        "expandable_oom_proto5.pickle",
    ]
    .iter()
    .enumerate()
    {
        std::fs::copy(fixture(f), ranks.join(format!("rank{i}.pickle"))).unwrap();
    }
    let dir_arg = ranks.to_str().unwrap();
    let d = data_of(dir_arg, &[]);
    assert_eq!(d["kind"], "ranks");
    let rows = d["ranks"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let files: Vec<&str> = rows.iter().map(|r| r["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["rank0.pickle", "rank1.pickle", "rank2.pickle"]);
    // The figures are those `stats DIR` prints for each rank.
    let stats = run(["stats", dir_arg]).expect_code(0).stdout();
    for r in rows {
        assert!(stats.contains(r["file"].as_str().unwrap()), "{stats}");
        assert!(
            stats.contains(r["end_reserved_text"].as_str().unwrap()),
            "{r}\n{stats}"
        );
    }
    let srv = Server::start(dir_arg, &[]);
    let (code, page) = get(&srv, "/rank?index=1");
    assert_eq!(code, 200);
    assert!(page.contains("fragscope-data"));
    // The rank's page is the one `view FILE -o page.html` writes.
    let written = dir.path().join("rank1.html");
    run([
        "view",
        ranks.join("rank1.pickle").to_str().unwrap(),
        "-o",
        written.to_str().unwrap(),
    ])
    .expect_code(0);
    let want = std::fs::read_to_string(&written).unwrap();
    assert!(
        page == want,
        "the served rank page differs from the written one"
    );
    for bad in [
        "/rank?index=3",
        "/rank?index=-1",
        "/rank",
        "/rank?path=rank0.pickle",
    ] {
        assert_eq!(get(&srv, bad).0, 400, "{bad}");
    }
    for bad in [
        "/rank0.pickle",
        "/ranks/rank0.pickle",
        "/api/state?device=0&event=0",
    ] {
        assert_eq!(get(&srv, bad).0, 404, "{bad}");
    }
}
