//! `fragscope stats`: hand-made fixtures with their expected figures, and every
//! real snapshot against golden figures from an independent Python reference
//! (scripts/golden_stats.py).

use crate::util::*;
use serde_json::Value;

const KEYS: &[&str] = &[
    "segments",
    "blocks",
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "internal_free_bytes",
    "external_free_bytes",
    "inactive_bytes",
    "pending_free_bytes",
    "largest_free_block_bytes",
];

fn assert_figures(ctx: &str, got: &Value, exp: &Value) {
    for k in KEYS {
        assert_eq!(got[k], exp[k], "{ctx}: {k}");
    }
    let gf = got["fragmentation"].as_f64().unwrap();
    let ef = exp["fragmentation"].as_f64().unwrap();
    assert!((gf - ef).abs() < 1e-9, "{ctx}: fragmentation {gf} vs {ef}");
    if let Some(t) = exp.get("trace_events") {
        assert_eq!(&got["trace_events"], t, "{ctx}: trace_events");
    }
}

fn stats_json(path: &str) -> Value {
    let r = run(["stats", "--json", path]);
    r.expect_code(0);
    serde_json::from_str(&r.stdout()).expect("stats --json prints JSON")
}

#[test]
fn fixtures_match_their_expected_figures() {
    let exp: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap();
    let exp = exp.as_object().unwrap();
    assert!(exp.len() >= 8);
    for (name, e) in exp {
        let got = stats_json(&fixture(name));
        assert_figures(name, &got, e);
        if let Some(ooms) = e.get("oom_events") {
            let g = got["oom_events"].as_array().unwrap();
            let ooms = ooms.as_array().unwrap();
            assert_eq!(g.len(), ooms.len(), "{name}: oom events");
            for (a, b) in g.iter().zip(ooms) {
                assert_eq!(a["device"], b["device"]);
                assert_eq!(a["size"], b["size"]);
                assert_eq!(a["device_free"], b["device_free"]);
            }
        }
    }
}

#[test]
fn schema_and_per_device_keys() {
    let v = stats_json(&fixture("pools_pending_proto4.pickle"));
    assert_eq!(v["schema"], "fragscope.stats/1");
    let d = &v["devices"][0];
    for k in KEYS.iter().chain(&["fragmentation", "device", "pools"]) {
        assert!(d.get(k).is_some(), "devices[0].{k} missing");
    }
    // Two pools (private (1,7) on a side stream, and the default pool).
    assert_eq!(d["pools"].as_array().unwrap().len(), 2);
}

#[test]
fn real_snapshots_match_golden_figures() {
    let files = real_files(&[".pickle", ".pkl"]);
    if files.is_empty() {
        return;
    }
    let mut checked = 0;
    for f in files {
        let name = name_of(&f);
        let golden = root()
            .join("tests/golden/stats")
            .join(format!("{name}.json"));
        let exp: Value =
            serde_json::from_str(&std::fs::read_to_string(&golden).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (regenerate with python3 scripts/golden_stats.py)",
                    golden.display()
                )
            }))
            .unwrap();
        let got = stats_json(&f.to_string_lossy());
        assert_figures(&name, &got, &exp);
        let gd = got["devices"].as_array().unwrap();
        let ed = exp["devices"].as_array().unwrap();
        assert_eq!(gd.len(), ed.len(), "{name}: devices");
        for (g, e) in gd.iter().zip(ed) {
            assert_eq!(g["device"], e["device"]);
            assert_figures(&format!("{name} device {}", e["device"]), g, e);
        }
        let go = got["oom_events"].as_array().unwrap();
        let eo = exp["oom_events"].as_array().unwrap();
        assert_eq!(go.len(), eo.len(), "{name}: oom events");
        for (a, b) in go.iter().zip(eo) {
            assert_eq!(
                (&a["device"], &a["size"], &a["device_free"]),
                (&b["device"], &b["size"], &b["device_free"])
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 21, "every real snapshot is checked");
}

#[test]
fn snapviewer_example_gets_a_warning_not_a_crash() {
    let Some(d) = real_dir() else { return };
    let p = d.join("snapviewer_example_LIKELY-SYNTHETIC.pickle");
    let r = run(["stats".as_ref(), p.as_os_str()]);
    r.expect_code(0);
    assert!(r.stdout().contains("do not add up"), "{}", r.stdout());
}

#[test]
fn several_files_parallel_equals_sequential() {
    let files = real_files(&[".pickle"]);
    if files.is_empty() {
        return;
    }
    let mut args = vec!["stats".to_string(), "--json".to_string()];
    args.extend(files.iter().map(|f| f.to_string_lossy().into_owned()));
    let par = run(&args);
    par.expect_code(0);
    let v: Value = serde_json::from_str(&par.stdout()).unwrap();
    let rows = v["files"].as_array().unwrap();
    assert_eq!(rows.len(), files.len());
    for (row, f) in rows.iter().zip(&files) {
        let one = stats_json(&f.to_string_lossy());
        assert_eq!(
            row,
            &one,
            "{}: row of a parallel run equals the single-file run",
            name_of(f)
        );
    }
}

#[test]
fn directory_input_gives_one_row_per_file() {
    let d = tempfile::tempdir().unwrap();
    for n in [
        "worked_example_proto2.pickle",
        "fragmented.json",
        "pools_pending_proto4.pickle",
    ] {
        std::fs::copy(fixture(n), d.path().join(n)).unwrap();
    }
    let r = run(["stats".as_ref(), d.path().as_os_str()]);
    r.expect_code(0);
    let out = r.stdout();
    for n in [
        "worked_example_proto2.pickle",
        "fragmented.json",
        "pools_pending_proto4.pickle",
    ] {
        assert!(out.contains(n), "{out}");
    }
}

#[test]
fn text_output_names_figures_and_draws_the_map() {
    let r = run(["stats", &fixture("fragmented.json")]);
    r.expect_code(0);
    let out = r.stdout();
    assert!(out.contains("fragmentation"), "{out}");
    assert!(out.contains("total_reserved: 60.00 MiB"), "{out}");
    assert!(out.contains("largest free"), "{out}");
}

#[test]
fn stdin_is_read_with_dash() {
    let bytes = std::fs::read(fixture("worked_example_proto2.pickle")).unwrap();
    let r = run_stdin(&["stats", "--json", "-"], &bytes);
    r.expect_code(0);
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["reserved_bytes"], 20 << 20);
}

#[test]
fn zstd_compressed_input() {
    let raw = std::fs::read(fixture("fragmented.json")).unwrap();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snap.zst");
    std::fs::write(&p, zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    let v = stats_json(&p.to_string_lossy());
    assert_eq!(v["segments"], 3);
    assert!(
        v["format"].as_str().unwrap().contains("zstd"),
        "{}",
        v["format"]
    );
}
