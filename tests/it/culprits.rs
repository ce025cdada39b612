//! `culprits` and `flamegraph` on the hand-made fixture
//! `fixtures/culprits/pinned-segments.json`, whose answer is worked out by
//! hand in `fixtures/README.md`: ranking, stranded bytes, counterfactuals and
//! every side list are asserted exactly; the rendered text, JSON and SVG are
//! golden files (`FRAGSCOPE_BLESS=1` rewrites them).

use crate::golden;
use fragscope::analysis::culprits::{Analysis, GroupBy, Options, analyze, final_state};
use fragscope::analysis::frames::SiteKind;
use fragscope::core::style::Style;
use fragscope::input::{LoadOptions, load_snapshot};
use fragscope::model::{BlockState, Snapshot};
use fragscope::timeline::Origin;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;
const FIXTURE: &str = "fixtures/culprits/pinned-segments.json";
const S1: u64 = 0x7f00_0000_0000;
const S2: u64 = 0x7f00_1000_0000;
const S3: u64 = 0x7f00_2000_0000;
const S4: u64 = 0x7f00_3000_0000;
const A: u64 = S1 + 49 * MIB;
const B: u64 = S2 + 30 * MIB;
const C: u64 = S3;
const D: u64 = S3 + 16 * MIB;
const E: u64 = S4;
const F: u64 = S4 + 1536;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> Snapshot {
    let p = root().join(FIXTURE);
    load_snapshot(p.to_str().unwrap(), &LoadOptions::default())
        .unwrap()
        .0
}

fn run(snap: &Snapshot, request: Option<u64>, group_by: GroupBy, top: usize) -> Analysis {
    let st = final_state(snap, 0);
    analyze(
        snap,
        &st,
        &Options {
            request,
            group_by,
            top,
        },
    )
}

fn ranked(a: &Analysis) -> Vec<(u64, u64)> {
    a.ranked().map(|b| (b.address, b.stranded)).collect()
}

#[test]
fn final_state_origins_come_from_the_last_alloc() {
    let s = fixture();
    let st = final_state(&s, 0);
    assert_eq!(st.at, Some(6));
    assert_eq!(st.time_us, Some(1_000_050));
    assert_eq!(st.failed_request, None);
    assert_eq!(st.origins[&A], Origin::OlderThanTrace);
    assert_eq!(st.origins[&B], Origin::Event(2));
    assert_eq!(st.origins[&C], Origin::Event(1));
    assert_eq!(st.origins[&D], Origin::Event(6));
    assert_eq!(st.origins[&F], Origin::OlderThanTrace);
    // Inactive blocks have no origin; the freed 4 MiB at S3+12 MiB is one.
    assert!(!st.origins.contains_key(&(S3 + 12 * MIB)));
    assert_eq!(st.origins.len(), 6);
}

#[test]
fn ranking_and_counterfactual_are_exact() {
    let s = fixture();
    let a = run(&s, None, GroupBy::Site, 3);
    // A and B tie on stranded bytes and size: the lower segment address wins.
    assert_eq!(
        ranked(&a),
        vec![
            (A, 98 * MIB),
            (B, 98 * MIB),
            (D, 22 * MIB),
            (C, 2 * MIB),
            (E, 512)
        ]
    );
    assert_eq!(a.culprits, 5);
    assert_eq!(a.total_stranded, 220 * MIB + 512 + 2_095_616);
    assert_eq!(a.largest_gap, 68 * MIB);
    assert_eq!(a.free, 222 * MIB - 1024);
    assert_eq!(a.reserved, 242 * MIB);

    let g = &a.groups[0];
    assert_eq!(g.label, "model.py:10 (forward)");
    assert_eq!(g.stranded, 196 * MIB);
    assert_eq!(g.segments, 2);
    assert_eq!(g.blocks.len(), 2);
    let labels: Vec<&str> = a.groups.iter().map(|g| g.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "model.py:10 (forward)",
            "data.py:7 (load)",
            "train.py:50 (step)",
            "_tensor.py:99 (__torch_function__)"
        ]
    );

    let c = a.without_top_group.as_ref().unwrap();
    assert_eq!(
        (c.removed_blocks, c.largest_gap_before, c.largest_gap_after),
        (2, 68 * MIB, 100 * MIB)
    );
    assert_eq!(c.request_fits_before, None);
    let c = a.without_top_culprits.as_ref().unwrap();
    assert_eq!((c.removed_blocks, c.largest_gap_after), (3, 100 * MIB));

    assert_eq!(
        fragscope::render::culprits::summary(&Style::default(), &a),
        "2 blocks from model.py:10 (forward) strand 196.00 MiB across 2 segments; \
         without them the largest gap would be 100.00 MiB instead of 68.00 MiB."
    );
}

#[test]
fn call_sites_ages_and_stacks() {
    let s = fixture();
    let a = run(&s, None, GroupBy::Site, 10);
    let by_addr = |x: u64| a.blocks.iter().find(|b| b.address == x).unwrap();
    let a_ = by_addr(A);
    assert_eq!(a_.call_site.kind, SiteKind::User);
    assert_eq!(a_.call_site.file, "/home/user/proj/model.py");
    assert_eq!((a_.age_events, a_.age_us), (None, None));
    let b = by_addr(B);
    assert_eq!((b.age_events, b.age_us), (Some(4), Some(30)));
    // C has no stack of its own: it comes from its trace alloc event.
    let c = by_addr(C);
    assert_eq!(c.call_site.label(), "train.py:50 (step)");
    assert_eq!((c.age_events, c.age_us), (Some(5), Some(40)));
    // Windows paths: the torch frame is skipped, the user file named.
    let d = by_addr(D);
    assert_eq!(d.call_site.file, r"C:\proj\data.py");
    assert_eq!((d.age_events, d.age_us), (Some(0), Some(0)));
    // Only PyTorch and the standard library on the stack.
    assert_eq!(by_addr(E).call_site.kind, SiteKind::Torch);
    let f = by_addr(F);
    assert_eq!(f.state, BlockState::ActivePendingFree);
    assert_eq!(f.rank, None);
    assert_eq!(f.stranded, 2_095_616);
}

#[test]
fn side_lists_are_exact() {
    let s = fixture();
    let a = run(&s, None, GroupBy::Site, 10);
    let addrs = |v: &[usize]| v.iter().map(|&i| a.blocks[i].address).collect::<Vec<_>>();
    assert_eq!(addrs(&a.long_lived_small), vec![A, B]);
    let empty: Vec<(u64, u64, u64)> = a
        .almost_empty
        .iter()
        .map(|s| (s.address, s.live, s.free))
        .collect();
    assert_eq!(
        empty,
        vec![
            (S1, 2 * MIB, 98 * MIB),
            (S2, 2 * MIB, 98 * MIB),
            (S4, 1024, 2 * MIB - 1024)
        ]
    );
    assert_eq!(addrs(&a.almost_empty[2].kept_by), vec![E, F]);
    let waste: Vec<(String, u64, u64)> = a
        .rounding_waste
        .iter()
        .map(|w| (w.call_site.label(), w.blocks, w.waste))
        .collect();
    assert_eq!(
        waste,
        vec![
            ("train.py:50 (step)".to_string(), 1, 12 * MIB - 12_000_000),
            ("model.py:10 (forward)".to_string(), 2, 2 * MIB - 2_000_000),
            ("_tensor.py:99 (__torch_function__)".to_string(), 1, 412),
        ]
    );
    assert_eq!(addrs(&a.pending_free), vec![F]);
}

#[test]
fn a_request_counts_only_gaps_too_small_for_it() {
    let s = fixture();
    // 50 MiB: S2's 68 MiB tail can serve it, so B strands only its 30 MiB head.
    let a = run(&s, Some(50 * MIB), GroupBy::Site, 3);
    assert_eq!(a.target, Some(50 * MIB));
    assert_eq!(
        ranked(&a),
        vec![
            (A, 98 * MIB),
            (B, 30 * MIB),
            (D, 22 * MIB),
            (C, 2 * MIB),
            (E, 512)
        ]
    );
    assert_eq!(a.total_stranded, 152 * MIB + 512 + 2_095_616);
    // 80 MiB fits nowhere now, and fits once model.py:10's blocks are gone.
    let a = run(&s, Some(80 * MIB), GroupBy::Site, 3);
    let c = a.without_top_group.as_ref().unwrap();
    assert_eq!(
        (c.request_fits_before, c.request_fits_after),
        (Some(false), Some(true))
    );
    assert!(
        fragscope::render::culprits::summary(&Style::default(), &a)
            .ends_with("instead of 68.00 MiB, so the 80.00 MiB request would fit."),
        "{}",
        fragscope::render::culprits::summary(&Style::default(), &a)
    );
}

#[test]
fn grouping_by_stack_and_segment() {
    let s = fixture();
    // A and B share a call site but not a stack (train.py:50 vs :51 above it).
    let a = run(&s, None, GroupBy::Stack, 3);
    let st: Vec<u64> = a.groups.iter().map(|g| g.stranded).collect();
    assert_eq!(st, vec![98 * MIB, 98 * MIB, 22 * MIB, 2 * MIB, 512]);
    let c = a.without_top_group.as_ref().unwrap();
    assert_eq!((c.removed_blocks, c.largest_gap_after), (1, 100 * MIB));

    let a = run(&s, None, GroupBy::Segment, 3);
    let segs: Vec<(String, u64, usize)> = a
        .groups
        .iter()
        .map(|g| (g.label.clone(), g.stranded, g.blocks.len()))
        .collect();
    assert_eq!(
        segs,
        vec![
            (format!("segment {S1:#x}"), 98 * MIB, 1),
            (format!("segment {S2:#x}"), 98 * MIB, 1),
            (format!("segment {S3:#x}"), 24 * MIB, 2),
            (format!("segment {S4:#x}"), 512, 1),
        ]
    );
}

fn fragscope(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fragscope {args:?} exited {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn text_report_golden() {
    golden::check(
        "culprits/pinned-segments.txt",
        &fragscope(&["culprits", FIXTURE, "--stack"]),
    );
    golden::check(
        "culprits/pinned-segments.by-segment.txt",
        &fragscope(&["culprits", FIXTURE, "--group-by", "segment", "--top", "2"]),
    );
}

#[test]
fn json_report_golden_and_reads_back() {
    let out = fragscope(&["culprits", FIXTURE, "--json", "--top", "3"]);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], "fragscope.culprits/1");
    let d = &v["devices"][0];
    assert_eq!(d["culprit_count"], 5);
    assert_eq!(d["culprits"].as_array().unwrap().len(), 3);
    assert_eq!(d["culprits"][0]["address"], A);
    assert_eq!(d["culprits"][0]["call_site"]["line"], 10);
    // The stack is filtered like the viewer's: no unwind/gather/ceval frames.
    let stack: Vec<&str> = d["culprits"][0]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(stack.len(), 6);
    assert!(stack[0].starts_with("CUDACachingAllocator.cpp:0:"));
    assert_eq!(d["without_top_group"]["largest_gap_after"], 100 * MIB);
    golden::check("culprits/pinned-segments.json", &out);
}

#[test]
fn flamegraph_svg_golden_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let svg_at = |name: &str, extra: &[&str]| {
        let p = dir.path().join(name);
        let ps = p.to_str().unwrap();
        let mut args = vec!["flamegraph", FIXTURE, "-o", ps];
        args.extend_from_slice(extra);
        fragscope(&args);
        std::fs::read(&p).unwrap()
    };
    let live = svg_at("a.svg", &[]);
    assert_eq!(live, svg_at("b.svg", &[]), "same input, same SVG");
    let text = String::from_utf8(live.clone()).unwrap();
    assert!(text.contains("model.py:10:forward"));
    assert!(text.contains("data.py:7:load"));
    // The viewer's filter drops these frames.
    assert!(!text.contains("unwind::unwind"));
    assert!(!text.contains("_PyEval_EvalFrameDefault"));
    // The whole-graph frame carries the total: 2+2+12+4 MiB + 512 B live.
    assert!(text.contains(&format!("{} bytes", thousands(20 * MIB + 512))));
    well_formed(&live);
    golden::check("culprits/pinned-segments.live.svg", &live);

    let stranded = svg_at("s.svg", &["--weight", "stranded"]);
    let text = String::from_utf8(stranded.clone()).unwrap();
    assert!(text.contains("[pending free]"));
    assert!(text.contains(&format!("{} bytes", thousands(220 * MIB + 512 + 2_095_616))));
    well_formed(&stranded);
    golden::check("culprits/pinned-segments.stranded.svg", &stranded);
}

/// inferno prints counts with thousands separators.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn well_formed(svg: &[u8]) {
    let mut r = quick_xml::Reader::from_reader(svg);
    let mut buf = Vec::new();
    loop {
        match r.read_event_into(&mut buf) {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("SVG is not well-formed XML: {e}"),
        }
        buf.clear();
    }
}

#[test]
fn refuses_to_overwrite_its_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_fragscope"))
        .current_dir(root())
        .args(["flamegraph", FIXTURE, "-o", FIXTURE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(Path::new(&root().join(FIXTURE)).exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to write over an input"));
}

/// `fixtures/culprits/close-gap.json`: without the 3.5 KiB block of
/// data.py:20 the 2 085 376-byte gap would grow to 2 088 960 bytes, and both
/// print as 1.99 MiB at two decimals.
#[test]
fn a_counterfactual_below_display_precision_says_so() {
    let fx = "fixtures/culprits/close-gap.json";
    let out = String::from_utf8(fragscope(&["culprits", fx])).unwrap();
    assert!(
        out.contains(
            "without it the largest gap would be 1.992 MiB instead of 1.989 MiB (a negligible +3.50 KiB)"
        ),
        "{out}"
    );
    assert!(!out.contains("1.99 MiB instead of 1.99 MiB"), "{out}");
    // Exact counts need no extra digits.
    let out = String::from_utf8(fragscope(&["culprits", fx, "--bytes"])).unwrap();
    assert!(
        out.contains("the largest gap would be 2088960 instead of 2085376."),
        "{out}"
    );
    // The figures behind the sentence.
    let s = load_snapshot(root().join(fx).to_str().unwrap(), &LoadOptions::default())
        .unwrap()
        .0;
    let a = run(&s, None, GroupBy::Site, 10);
    assert_eq!(a.ranked().next().unwrap().size, 3584);
    let c = a.without_top_group.as_ref().unwrap();
    assert_eq!(
        (c.removed_blocks, c.largest_gap_before, c.largest_gap_after),
        (1, 2_085_376, 2_088_960)
    );
}
