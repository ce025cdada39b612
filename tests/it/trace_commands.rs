//! Profiler traces and memory-timeline exports through `timeline`,
//! `culprits`, `report`, `plot`, `check` and `diff`, on the real files of
//! ../shared/real (skipped with a note when absent), with their figures;
//! the same commands on a snapshot and on a trace speak the same units and
//! words; and the per-rank report, parallel equal to sequential.
//!
//! The figures are those of ../shared/real/README.md (max Total Allocated /
//! Total Reserved) and of tests/it/profiler_real.rs, which cross-checked them.

use crate::golden;
use crate::util::*;
use fragscope::analysis::report::trace::{self as trace_report, NO_LAYOUT};
use fragscope::analysis::report::{Report, VerdictLine};
use fragscope::core::style::Style;
use fragscope::input::profiler::{MemoryTimeline, ProfilerTrace};
use fragscope::input::{Content, LoadOptions, load};
use fragscope::render::svg::compose::escape;
use std::path::Path;

fn path(name: &str) -> Option<String> {
    let d = real_dir()?;
    Some(d.join(name).to_string_lossy().into_owned())
}

fn trace(name: &str) -> Option<(ProfilerTrace, String)> {
    let p = path(name)?;
    match load(&p, &LoadOptions::default()).unwrap().content {
        Content::Profiler(t) => Some((t, p)),
        _ => panic!("{name}: not read as a profiler trace"),
    }
}

/// Parses and rasterizes an SVG; fails when it does not parse or draws
/// almost nothing.
fn rasterize(name: &str, svg: &str) {
    let mut db = resvg::usvg::fontdb::Database::new();
    db.load_system_fonts();
    let opt = resvg::usvg::Options {
        fontdb: std::sync::Arc::new(db),
        ..Default::default()
    };
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .unwrap_or_else(|e| panic!("{name}: resvg cannot parse it: {e}"));
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width().div_ceil(2), size.height().div_ceil(2)).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(0.5, 0.5),
        &mut pixmap.as_mut(),
    );
    let px = pixmap.pixels();
    let inked = px
        .iter()
        .filter(|p| p.alpha() > 0 && (p.red() < 200 || p.green() < 200 || p.blue() < 200))
        .count();
    assert!(inked * 200 > px.len(), "{name}: almost nothing drawn");
}

/// Every inline chart of an HTML page renders.
fn rasterize_inline(name: &str, html: &str) -> usize {
    let mut n = 0;
    let mut rest = html;
    while let Some(i) = rest.find("<svg role=\"img\"") {
        let end = rest[i..].find("</svg></figure>").expect("closed svg") + i + 6;
        rasterize(&format!("{name}-{n}"), &rest[i..end]);
        n += 1;
        rest = &rest[end..];
    }
    n
}

fn self_contained(name: &str, s: &str) {
    assert!(!s.contains("/work/"), "{name}: absolute path");
    assert!(!s.contains("../shared"), "{name}: input path");
    assert!(
        !s.to_ascii_lowercase().contains("<script"),
        "{name}: script"
    );
}

/// (file, device label, peak allocated, peak reserved, peak reserved −
/// allocated).
type Expected = (&'static str, &'static str, u64, Option<u64>, Option<u64>);

const TRACES: &[Expected] = &[
    (
        "hta_v100_ddp-rank1_profile-memory_2022.json.gz",
        "cuda:1",
        6629508096,
        Some(12782141440),
        Some(8685527040),
    ),
    (
        "tracelens_h100_qwen1.5-0.5b_profile-memory.json.gz",
        "cuda:0",
        2088508416,
        Some(2629828608),
        Some(1645086208),
    ),
    (
        "tracelens_mi300x_vllm-decode-cudagraph-capture.pt.trace.json.gz",
        "hip:0",
        191628704768,
        Some(193621655552),
        Some(2010686464),
    ),
    (
        "tracelens_h100_bert-small_profile-memory.json.gz",
        "cuda:0",
        101305344,
        Some(121634816),
        Some(30274048),
    ),
    (
        "kineto-tbplugin_resnet50_v100_2021_old-memory-schema.pt.trace.json.gz",
        "cuda:0",
        2791636480,
        None,
        None,
    ),
];

#[test]
fn every_real_trace_reports_its_figures() {
    for &(name, label, alloc, reserved, free) in TRACES {
        let Some((t, p)) = trace(name) else { return };
        let r = Report::of_trace(&Style::default(), &t, &p, "JSON", None, None).unwrap();
        assert_eq!(r.file, name, "base name only");
        let d = r.main_device().unwrap();
        let x = d.traced_detail().expect("a trace's device");
        assert_eq!(x.label, label, "{name}");
        assert_eq!(
            x.summary.peak_allocated.as_ref().map(|x| x.bytes),
            Some(alloc)
        );
        assert_eq!(x.summary.peak_reserved.as_ref().map(|x| x.bytes), reserved);
        assert_eq!(x.summary.peak_external_free.as_ref().map(|x| x.bytes), free);
        let peak = match reserved {
            Some(res) => format!(
                "Peak on {label}: {} reserved, {} allocated.",
                Style::default().bytes(res),
                Style::default().bytes(alloc)
            ),
            None => format!(
                "Peak on {label}: {} allocated (reserved memory is not recorded in this trace).",
                Style::default().bytes(alloc)
            ),
        };
        assert!(
            r.verdict.contains(&VerdictLine::Text(peak)),
            "{name}: {:?}",
            r.verdict
        );
        assert!(
            matches!(r.verdict.last(), Some(VerdictLine::Text(t)) if t.contains("not measurable"))
        );
        // The shown moment is the peak of allocated bytes; with addresses,
        // the live bytes by operator add up to it.
        assert_eq!(d.moment_label, "peak allocated");
        assert_eq!(x.moment_sample.allocated, alloc);
        match &x.live_by_op {
            Some(v) => assert_eq!(v.iter().map(|x| x.bytes).sum::<u64>(), alloc, "{name}"),
            None => assert!(
                t.bytes_only(),
                "{name}: only the 2021 schema lacks addresses"
            ),
        }
        // Key moments carry the same peaks.
        let km = |l: &str| d.key_moments.iter().find(|k| k.label == l).cloned();
        assert_eq!(km("peak allocated").unwrap().sample.allocated, alloc);
        assert_eq!(
            km("peak reserved").map(|k| k.sample.reserved.unwrap()),
            reserved
        );
        let h = fragscope::render::html::html(&Style::default(), &r).unwrap();
        self_contained(name, &h);
        assert!(h.contains("Not measurable for a profiler trace"));
        // An out-of-memory event gets the same verdict box as in a
        // snapshot's report: diagnosis, what to try, contradictions.
        for o in r.devices.iter().flat_map(|d| &d.ooms) {
            let g = &o.diagnosis;
            assert!(h.contains("<div class=\"verdict oom\">"), "{name}");
            for s in &g.suggestions {
                assert!(h.contains(&escape(&s.why)), "{name}: {}", s.what);
            }
            for i in &g.inconsistencies {
                assert!(h.contains(&escape(i)), "{name}: {i}");
            }
        }
        let charts = rasterize_inline(name, &h);
        assert_eq!(charts, r.devices.len(), "{name}: one timeline per device");
        eprintln!(
            "{name}: HTML {} bytes, {} out-of-memory events",
            h.len(),
            r.devices.iter().map(|d| d.ooms.len()).sum::<usize>()
        );
        assert!(h.len() < 400_000, "{name}: {} bytes", h.len());
        rasterize(
            &format!("{name}-summary"),
            &fragscope::render::charts::summary(&Style::default(), &r)
                .unwrap()
                .body,
        );
    }
}

#[test]
fn trace_report_markdown_matches_golden() {
    let Some((t, p)) = trace("tracelens_h100_bert-small_profile-memory.json.gz") else {
        return;
    };
    let r = Report::of_trace(&Style::default(), &t, &p, "JSON, gzip", None, None).unwrap();
    let md = fragscope::render::markdown::markdown(&Style::default(), &r, Some("summary.svg"));
    self_contained("markdown", &md);
    // 87.13 MiB older than the trace, then aten::addmm's 8.21 MiB: the
    // operators live at the 96.61 MiB peak.
    assert!(md.contains("| 1 | `(allocated before the trace)` | 87.13 MiB | 90.2% |"));
    assert!(md.contains("| 2 | `aten::addmm` | 8.21 MiB | 8.5% |"));
    golden::check("report_trace_bert.md", &md);
}

#[test]
fn memory_timeline_report_stacks_categories() {
    let Some(p) = path("hta_memory_timeline.raw.json.gz") else {
        return;
    };
    let Content::MemoryTimeline(tl) = load(&p, &LoadOptions::default()).unwrap().content else {
        panic!("not a memory timeline")
    };
    let tl: MemoryTimeline = tl;
    let r = trace_report::build_categories(&Style::default(), &tl, &p, "JSON");
    // 3082832104 bytes at the peak, 2592465920 of them activations.
    assert_eq!(r.verdict[0], "Peak: 2.87 GiB of live tensors at t=0.098 s.");
    assert_eq!(
        r.verdict[1],
        "The largest category at the peak: activation with 2.41 GiB (84.1% of the peak)."
    );
    assert!(r.timeline.samples.len() <= trace_report::REPORT_POINTS + 1);
    let peak_kept = r.timeline.samples.iter().map(|s| s.total()).max();
    assert_eq!(peak_kept, Some(3082832104), "downsampling keeps the peak");
    let h = fragscope::render::categories::html(&Style::default(), &r).unwrap();
    self_contained("memory timeline", &h);
    assert_eq!(rasterize_inline("memory-timeline", &h), 1);
    assert!(h.contains("<td>activation</td><td class=\"n\">0 B</td><td class=\"n\">2.41 GiB</td>"));
    rasterize(
        "memory-timeline-summary",
        &fragscope::render::charts::categories_summary(&r)
            .unwrap()
            .body,
    );
}

/// One line on stderr, naming what is missing, and exit 2.
fn refused(r: &Run, missing: &str) {
    r.expect_code(2);
    let e = r.stderr();
    assert_eq!(e.trim_end().lines().count(), 1, "{}: {e}", r.cmd);
    assert!(e.contains(missing), "{}: {e}", r.cmd);
}

#[test]
fn commands_on_a_trace() {
    let Some(bert) = path("tracelens_h100_bert-small_profile-memory.json.gz") else {
        return;
    };
    let qwen = path("tracelens_h100_qwen1.5-0.5b_profile-memory.json.gz").unwrap();
    let old =
        path("kineto-tbplugin_resnet50_v100_2021_old-memory-schema.pt.trace.json.gz").unwrap();
    let tl = path("hta_memory_timeline.raw.json.gz").unwrap();

    // timeline: the key moments with the snapshot columns.
    let out = run(["timeline", bert.as_str()]).expect_code(0).stdout();
    let row = out.lines().find(|l| l.contains("peak allocated")).unwrap();
    for cell in ["213", "96.61 MiB", "116.00 MiB", "19.39 MiB", "aten::empty"] {
        assert!(row.contains(cell), "{row}");
    }
    assert!(out.contains("n/a: a profiler trace records allocated and reserved totals"));
    let csv = run(["timeline", "--csv", bert.as_str()])
        .expect_code(0)
        .stdout();
    assert_eq!(
        csv.lines().next().unwrap(),
        fragscope::render::timeline::CSV_HEADER.trim_end()
    );
    // One row per memory event of both devices, plus their starts.
    assert_eq!(csv.lines().count(), 1 + 219 + 19);
    assert!(csv.contains("\ncuda:0,213,"));
    let j: serde_json::Value = serde_json::from_str(
        &run(["timeline", "--json", bert.as_str()])
            .expect_code(0)
            .stdout(),
    )
    .unwrap();
    assert_eq!(j["kind"], "profiler_trace");
    assert_eq!(j["devices"][0]["samples"].as_array().unwrap().len(), 219);
    refused(
        &run(["timeline", "--at", "peak", bert.as_str()]),
        "segment layout",
    );

    // culprits: live bytes by operator at the peak; stranded bytes named as
    // missing.
    let out = run(["culprits", bert.as_str()]).expect_code(0).stdout();
    assert!(out.starts_with("cuda:0 at peak (after event 213"), "{out}");
    assert!(out.contains("Live: 96.61 MiB allocated, 116.00 MiB reserved"));
    assert!(out.contains("Stranded bytes: not measurable for a profiler trace"));
    assert!(
        out.lines()
            .any(|l| l.contains("aten::addmm") && l.contains("8.21 MiB"))
    );
    let out = run(["culprits", "--at", "end", bert.as_str()])
        .expect_code(0)
        .stdout();
    assert!(out.contains("(allocated before the trace)"));
    let out = run(["culprits", old.as_str()]).expect_code(0).stdout();
    assert!(out.contains("Live bytes by operator: not measurable for this trace"));
    refused(
        &run(["culprits", "--at", "max-frag", bert.as_str()]),
        "segment layout",
    );
    refused(
        &run(["culprits", "--group-by", "segment", bert.as_str()]),
        "segment layout",
    );
    refused(&run(["culprits", tl.as_str()]), "no call sites");

    // check: the figures a trace has are gated; the others are skipped with
    // the reason, never passed.
    let r = run([
        "check",
        "--no-config",
        "--format",
        "json",
        "--max-fragmentation",
        "0.5",
        "--max-peak-reserved",
        "100MiB",
        bert.as_str(),
    ]);
    r.expect_code(1);
    let j: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let f = |rule: &str| {
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap()
            .clone()
    };
    assert_eq!(f("max_fragmentation")["verdict"], "skipped");
    assert_eq!(
        f("max_fragmentation")["message"],
        "worst fragmentation under pressure is not measurable for a profiler trace"
    );
    assert_eq!(f("max_peak_reserved")["verdict"], "fail");
    assert_eq!(f("max_oom_events")["verdict"], "pass");
    let old_check = run(["check", "--no-config", old.as_str()])
        .expect_code(0)
        .stdout();
    assert!(old_check.contains("OOM events is not measurable for a profiler trace"));

    // diff: two traces, peaks compared.
    let out = run(["diff", bert.as_str(), qwen.as_str()])
        .expect_code(0)
        .stdout();
    let row = out.lines().find(|l| l.contains("peak reserved")).unwrap();
    assert!(
        row.contains("116.00 MiB") && row.contains("2.45 GiB"),
        "{row}"
    );
    assert!(out.contains("not measurable for a profiler trace: fragmentation"));
    // Call sites are operators: over every site, the live bytes at the end
    // add up to the allocated bytes at the end, on each side, and each
    // site's peak is at least what it holds at the end.
    let j: serde_json::Value = serde_json::from_str(
        &run(["diff", "--json", "--top", "0", bert.as_str(), qwen.as_str()])
            .expect_code(0)
            .stdout(),
    )
    .unwrap();
    let end_alloc = j["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "end_allocated")
        .unwrap();
    let sites = j["call_sites"].as_array().unwrap();
    assert!(
        sites.iter().any(|s| s["site"] == "aten::addmm"),
        "operators named: {sites:?}"
    );
    for side in ["before", "after"] {
        let live: u64 = sites
            .iter()
            .map(|s| s[format!("live_{side}")].as_u64().unwrap())
            .sum();
        assert_eq!(live, end_alloc[side]["bytes"].as_u64().unwrap(), "{side}");
        for s in sites {
            assert!(s[format!("peak_{side}")].as_u64() >= s[format!("live_{side}")].as_u64());
        }
    }
    // The 2021 schema has no `Addr`: no operator can be charged with a free.
    let out = run(["diff", old.as_str(), bert.as_str()])
        .expect_code(0)
        .stdout();
    assert!(out.contains("call sites are compared only between two inputs of one kind"));
    // A memory-timeline export compares only with another export.
    refused(
        &run(["diff", tl.as_str(), bert.as_str()]),
        "the per-category peaks of a memory-timeline export compare only with another export",
    );

    // plot: the timeline exists, the layout charts do not.
    let dir = tempfile::tempdir().unwrap();
    let o = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    run(["plot", "timeline", bert.as_str(), "-o", &o("t.svg")]).expect_code(0);
    rasterize("plot-trace", &std::fs::read_to_string(o("t.svg")).unwrap());
    refused(
        &run(["plot", "segments", bert.as_str(), "-o", &o("s.svg")]),
        "segment layout",
    );
    assert!(!Path::new(&o("s.svg")).exists());
    run(["plot", "timeline", tl.as_str(), "-o", &o("c.svg")]).expect_code(0);
    rasterize(
        "plot-categories",
        &std::fs::read_to_string(o("c.svg")).unwrap(),
    );

    // report: every form.
    run([
        "report",
        bert.as_str(),
        "-o",
        &o("r.html"),
        "-o",
        &o("r.svg"),
        "-o",
        &o("r.md"),
    ])
    .expect_code(0);
    let h = std::fs::read_to_string(o("r.html")).unwrap();
    self_contained("cli trace report", &h);
    assert!(h.contains("Live at event 213, t=0.004 s (peak allocated), by operator"));
    rasterize(
        "cli-trace-summary",
        &std::fs::read_to_string(o("r.svg")).unwrap(),
    );
    assert!(
        std::fs::read_to_string(o("r.md")).unwrap().contains(
            "![memory summary of tracelens_h100_bert-small_profile-memory.json.gz](r.svg)"
        )
    );
    run(["report", tl.as_str(), "-o", &o("m.html")]).expect_code(0);
    refused(
        &run(["report", tl.as_str(), "--at", "peak", "-o", &o("n.html")]),
        "no allocator state",
    );
}

/// The same commands on a snapshot and on a trace: the same headings,
/// moment labels, sentence shapes and byte units.
#[test]
fn snapshot_and_trace_speak_alike() {
    let Some(snap) = path("silmont_cs336_small_py312.pickle") else {
        return;
    };
    let tr = path("tracelens_h100_bert-small_profile-memory.json.gz").unwrap();
    let units = |s: &str| -> Vec<String> {
        // Every figure with a unit: "96.61 MiB", "0 B", "116.00 MiB".
        let words: Vec<&str> = s.split_whitespace().collect();
        words
            .windows(2)
            .filter(|w| {
                ["B", "KiB", "MiB", "GiB", "TiB"]
                    .contains(&w[1].trim_end_matches([',', '.', ')', ';']))
            })
            .map(|w| w[1].trim_end_matches([',', '.', ')', ';']).to_string())
            .collect()
    };

    let a = run(["timeline", snap.as_str()]).expect_code(0).stdout();
    let b = run(["timeline", tr.as_str()]).expect_code(0).stdout();
    for h in [
        "moment",
        "event",
        "time",
        "allocated",
        "reserved",
        "free internal",
        "free external",
        "pending free",
        "largest gap",
        "gaps",
        "fragmentation",
    ] {
        assert!(a.contains(h) && b.contains(h), "timeline column {h:?}");
    }
    for m in [
        "│ start ",
        "│ peak allocated ",
        "│ peak reserved ",
        "│ end ",
    ] {
        assert!(a.contains(m) && b.contains(m), "timeline moment {m:?}");
    }
    assert!(!units(&a).is_empty() && !units(&b).is_empty());

    let a = run(["report", snap.as_str(), "--markdown", "--no-what-if"])
        .expect_code(0)
        .stdout();
    let b = run(["report", tr.as_str(), "--markdown"])
        .expect_code(0)
        .stdout();
    let header = "| device | events | peak reserved | peak allocated | peak allocated incl. pending frees | final reserved | final allocated | OOMs |";
    assert!(a.contains(header) && b.contains(header));
    let key = "| moment | when | reserved | allocated | free in reserved | largest free gap | fragmentation |";
    assert!(a.contains(key) && b.contains(key));
    for s in [&a, &b] {
        assert!(s.starts_with("## Memory report: `"));
        assert!(s.contains("> No out-of-memory event was recorded."));
        let peak = s
            .lines()
            .find(|l| l.starts_with("> Peak on "))
            .expect("a peak sentence");
        assert!(peak.ends_with(" allocated."), "{peak}");
        assert!(peak.contains(" reserved, "), "{peak}");
    }

    let a = run(["culprits", snap.as_str()]).expect_code(0).stdout();
    let b = run(["culprits", tr.as_str()]).expect_code(0).stdout();
    assert!(a.starts_with("device 0 at end (after event "), "{a}");
    assert!(b.starts_with("cuda:0 at peak (after event "), "{b}");
    assert!(a.contains("Stranded") && b.contains("Stranded"));

    let j = |f: &str| -> serde_json::Value {
        let r = run(["check", "--no-config", "--format", "json", f]);
        serde_json::from_str(&r.stdout()).unwrap()
    };
    let (a, b) = (j(&snap), j(&tr));
    for k in [
        "peak_reserved",
        "peak_allocated",
        "end_reserved",
        "oom_events",
    ] {
        let (x, y) = (&a["metrics"][k], &b["metrics"][k]);
        assert!(x.is_object() && y.is_object(), "{k}: {x} / {y}");
        let kx: Vec<&String> = x.as_object().unwrap().keys().collect();
        let ky: Vec<&String> = y.as_object().unwrap().keys().collect();
        assert_eq!(kx, ky, "{k}: the same JSON shape and unit");
    }
    assert!(a["metrics"]["fragmentation"].is_object());
    assert!(b["metrics"].get("fragmentation").is_none());
    assert!(NO_LAYOUT.contains("not measurable"));
}

const RANKS: &[&str] = &[
    "magma27_cs336_torch2.11_user_metadata.pickle",
    "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
    "bcrafton_cs336_user_metadata.pickle",
    "silmont_cs336_small_py312.pickle",
    "kkaitlyn_cs336_1457-segments_empty-trace.pickle",
    "tracelens_h100_bert-small_profile-memory.json.gz",
];

#[test]
fn ranks_report_is_the_same_on_one_thread_and_many() {
    let Some(files) = RANKS
        .iter()
        .map(|f| path(f))
        .collect::<Option<Vec<String>>>()
    else {
        return;
    };
    let with = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                fragscope::pipeline::ranks_report(
                    &Style::default(),
                    &files,
                    &LoadOptions::default(),
                )
            })
    };
    let (one, failed) = with(1);
    assert!(failed.is_empty(), "{failed:?}");
    let (many, _) = with(4);
    assert_eq!(one, many);
    let h1 = fragscope::render::ranks::html(&Style::default(), &one).unwrap();
    assert_eq!(
        h1,
        fragscope::render::ranks::html(&Style::default(), &many).unwrap()
    );
    self_contained("ranks", &h1);
    assert_eq!(rasterize_inline("ranks", &h1), 1);

    assert_eq!(one.rows.len(), 5);
    assert_eq!(one.left_out.len(), 1);
    assert!(
        one.left_out[0]
            .starts_with("tracelens_h100_bert-small_profile-memory.json.gz: a profiler trace")
    );
    let by = |f: &str| one.rows.iter().find(|r| r.file == f).unwrap();
    // kkaitlyn reserves 70.69 GiB at the end against a median of 11.79 GiB.
    let k = by("kkaitlyn_cs336_1457-segments_empty-trace.pickle");
    assert_eq!(k.end_reserved, 75_902_222_336);
    assert_eq!(k.outlier.as_deref(), Some("reserved 500% above median"));
    assert!(one.rows.iter().filter(|r| r.outlier.is_some()).count() == 1);
    let w = by("wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle");
    assert_eq!(w.events, 22332);
    assert!(w.peak_reserved.unwrap() >= w.end_reserved);

    // `stats` on the same files flags the same rank with the same words.
    let mut args = vec!["stats".to_string()];
    args.extend(files.iter().cloned());
    let st = run(&args).expect_code(0).stdout();
    let flagged: Vec<&str> = st.lines().filter(|l| l.contains("above median")).collect();
    assert_eq!(flagged.len(), 1);
    assert!(flagged[0].contains("kkaitlyn") && flagged[0].contains("reserved 500% above median"));

    // The command: every form, the outlier in the Markdown.
    let dir = tempfile::tempdir().unwrap();
    let o = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let mut args = vec!["report".to_string()];
    args.extend(files.iter().cloned());
    args.extend(["-o", &o("r.svg"), "-o", &o("r.md")].map(String::from));
    run(&args).expect_code(0);
    let md = std::fs::read_to_string(o("r.md")).unwrap();
    assert!(md.contains("> 1 of 5 ranks is an outlier: kkaitlyn_cs336_1457-segments_empty-trace.pickle (reserved 500% above median)."));
    rasterize(
        "ranks-summary",
        &std::fs::read_to_string(o("r.svg")).unwrap(),
    );
    let mut bad = args.clone();
    bad.extend(["--at", "peak"].map(String::from));
    refused(&run(&bad), "per-rank report");
}

/// A profiler trace whose allocation failed: its report carries the same
/// verdict box as a snapshot's (headline, what to try, contradictions).
#[test]
fn trace_report_explains_an_out_of_memory_event() {
    let mem = |ts: u64, addr: i64, bytes: i64, alloc: u64, res: u64| {
        serde_json::json!({"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": 1, "Device Id": 0, "Addr": addr, "Bytes": bytes,
                     "Total Allocated": alloc, "Total Reserved": res}})
    };
    let gib: i64 = 1 << 30;
    let mut events = vec![
        mem(10, 0x7000_0000, 6 * gib, 6 << 30, 8 << 30),
        mem(20, 0x7000_0000 + 6 * gib, gib, 7 << 30, 8 << 30),
        mem(30, 0x7000_0000, -6 * gib, 1 << 30, 8 << 30),
    ];
    events.push(
        serde_json::json!({"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 1,
        "ts": 40, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 7 * gib,
                           "Total Allocated": 1u64 << 30, "Total Reserved": 8u64 << 30}}),
    );
    let doc = serde_json::json!({"traceEvents": events});
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("oom.pt.trace.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    let ps = p.to_str().unwrap();
    let Content::Profiler(t) = load(ps, &LoadOptions::default()).unwrap().content else {
        panic!("a profiler trace")
    };
    let r = Report::of_trace(&Style::default(), &t, ps, "JSON", None, None).unwrap();
    let d = r.main_device().unwrap();
    assert_eq!(d.ooms.len(), 1);
    let g = &d.ooms[0].diagnosis;
    assert!(!g.suggestions.is_empty(), "{g:?}");
    let h = fragscope::render::html::html(&Style::default(), &r).unwrap();
    assert!(h.contains("<div class=\"verdict oom\">"));
    assert!(h.contains(&escape(&g.headline)));
    assert!(h.contains("What to try:"));
    for s in &g.suggestions {
        assert!(h.contains(&escape(&s.why)), "{}", s.what);
    }
    for i in &g.inconsistencies {
        assert!(h.contains(&escape(i)), "{i}");
    }
}

/// A trace whose `[memory]` events are all CPU memory
/// (fixtures/cpu_only_trace.json.gz: modern schema with `Total Allocated`
/// and `finished`, 301 events, Device Type 0): stats, check, report,
/// timeline and diff each say once that it holds no GPU memory events and
/// what to record instead, and none blames the trace's schema.
#[test]
fn a_trace_of_cpu_memory_only_says_so_once_everywhere() {
    let f = fixture("cpu_only_trace.json.gz");
    let sentence = "all 301 [memory] events of this profiler trace are CPU memory (Device Type 0)";
    let once = |what: &str, out: &str| {
        assert_eq!(out.matches(sentence).count(), 1, "{what}:\n{out}");
        assert!(
            out.contains("profile_memory=True") && out.contains("_record_memory_history()"),
            "{what} says what to record:\n{out}"
        );
        assert!(!out.contains("2021"), "{what} blames the schema:\n{out}");
    };
    let stats = run(["stats", f.as_str()]).expect_code(0).stdout();
    once("stats", &stats);
    // The CPU figures themselves are still shown (1 MiB + 2 × 64 KiB peak).
    assert!(stats.contains("1.12 MiB"), "{stats}");
    let j: serde_json::Value =
        serde_json::from_str(&run(["stats", "--json", f.as_str()]).expect_code(0).stdout())
            .unwrap();
    assert_eq!(j["trace"]["memory_events"], 301);
    assert_eq!(j["trace"]["gpu_memory_events"], 0);
    assert_eq!(j["notes"].as_array().unwrap().len(), 1);
    once(
        "stats --json",
        &j["notes"][0].to_string().replace("\\\"", "\""),
    );

    // check: nothing is measurable, so every rule is skipped (exit 0), each
    // with the one reason; the note says it once, with what to record.
    let out = run([
        "check",
        "--no-config",
        "--max-peak-allocated",
        "1GiB",
        f.as_str(),
    ])
    .expect_code(0)
    .stdout();
    once("check", &out);
    assert!(out.contains(
        "skipped max_oom_events: OOM events is not measurable: the profiler trace holds no GPU memory events\n"
    ));
    assert!(out.contains(
        "skipped max_peak_allocated: peak allocated is not measurable: the profiler trace holds no GPU memory events\n"
    ));
    assert!(!out.contains("CPU memory events are left out"), "{out}");
    let j: serde_json::Value = serde_json::from_str(
        &run(["check", "--no-config", "--format", "json", f.as_str()])
            .expect_code(0)
            .stdout(),
    )
    .unwrap();
    assert_eq!(j["skipped"], 1);
    assert_eq!(j["findings"][0]["verdict"], "skipped");
    assert_eq!(j["findings"][0]["hint"], "");
    assert_eq!(j["notes"].as_array().unwrap().len(), 1);
    // Asked for a device, the same answer rather than "no device 0".
    let out = run(["check", "--no-config", "--device", "0", f.as_str()])
        .expect_code(0)
        .stdout();
    once("check --device 0", &out);

    // report: the verdict leads with it, in place of "No out-of-memory
    // event was recorded", and the CPU peak is not said to lack a reserved
    // figure because of the trace.
    let md = run(["report", "--markdown", f.as_str()])
        .expect_code(0)
        .stdout();
    once("report --markdown", &md);
    assert!(md.starts_with(
        "## Memory report: `cpu_only_trace.json.gz`\n\n> No GPU memory events: all 301"
    ));
    assert!(!md.contains("No out-of-memory event was recorded"), "{md}");
    assert!(md.contains("Peak on cpu: 1.12 MiB allocated (CPU memory is not cached"));
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    run(["report", f.as_str(), "-o", &html.to_string_lossy()]).expect_code(0);
    once("report html", &std::fs::read_to_string(&html).unwrap());

    once(
        "timeline",
        &run(["timeline", f.as_str()]).expect_code(0).stdout(),
    );

    // diff against a trace with GPU events: said once, for that side only;
    // no call-site note about operators.
    if let Some(bert) = path("tracelens_h100_bert-small_profile-memory.json.gz") {
        let out = run(["diff", f.as_str(), bert.as_str()])
            .expect_code(0)
            .stdout();
        once("diff", &out);
        assert!(out.contains(&format!("note: before ({f}): no GPU memory events: ")));
        assert!(!out.contains("a call site is the operator"), "{out}");
    }
    let out = run(["diff", "--json", f.as_str(), f.as_str()])
        .expect_code(0)
        .stdout();
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let notes = j["notes"].as_array().unwrap();
    let no_gpu = notes
        .iter()
        .filter(|n| n.as_str().unwrap().contains("no GPU memory events"))
        .count();
    assert_eq!(no_gpu, 2, "one per side: {out}");
    // Besides those, only the segment comparison's own note.
    assert_eq!(notes.len(), 3, "{out}");
}
