//! `fragscope check` and `fragscope diff` end to end: exit codes, config
//! errors, every output format validated by a parser, hand-made pairs with a
//! known regression, and pairs of real files from ../shared/real.
//!
//! Failures print the command with its stdout and stderr.

use crate::golden;
use fragscope::analysis::check::{CheckReport, Verdict};
use fragscope::analysis::diff::{DiffReport, Direction};
use fragscope::analysis::metrics::{MetricId, Metrics, Quantity};
use fragscope::analysis::stats::StateStats;
use fragscope::core::style::Style;
use fragscope::model::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: u64 = 1 << 20;

struct Run {
    cmd: String,
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\ncommand: {}\nexit: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.cmd, self.code, self.stdout, self.stderr
        )
    }
}

impl Run {
    fn expect(self, code: i32) -> Run {
        assert_eq!(self.code, code, "{self}");
        self
    }
}

fn fragscope_env(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fragscope"));
    c.args(args)
        .current_dir(dir)
        .env_remove("GITHUB_STEP_SUMMARY");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("the binary runs");
    Run {
        cmd: format!("fragscope {}", args.join(" ")),
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn fragscope(dir: &Path, args: &[&str]) -> Run {
    fragscope_env(dir, args, &[])
}

/// A one-device snapshot without a trace: one segment per entry, each a list
/// of (size, requested, state). Blocks of `site` carry a stack.
fn snapshot(segs: &[&[(u64, u64, BlockState)]], site: &str) -> Snapshot {
    let mut i = Interner::new();
    let file = i.string(site).unwrap();
    let name = i.string("forward").unwrap();
    let frame = i.frame(Frame {
        filename: file,
        line: 1,
        name,
    });
    let stack = i.stack(vec![frame]);
    let mut segments = Vec::new();
    let mut addr = 1u64 << 40;
    for blocks in segs {
        let start = addr;
        let mut bs = Vec::new();
        for &(size, req, state) in blocks.iter() {
            bs.push(Block {
                address: addr,
                size,
                requested_size: Some(req),
                state,
                frames: if state == BlockState::ActiveAllocated {
                    stack
                } else {
                    StackId::EMPTY
                },
            });
            addr += size;
        }
        segments.push(Segment {
            device: 0,
            address: start,
            total_size: addr - start,
            allocated_size: None,
            active_size: None,
            requested_size: None,
            stream: 0,
            segment_type: SegmentType::Large,
            pool_id: Some((0, 0)),
            is_expandable: Some(false),
            frames: StackId::EMPTY,
            blocks: bs,
        });
        addr += 1 << 30;
    }
    let mut s = Snapshot {
        segments,
        device_traces: Some(vec![vec![]]),
        ..Snapshot::default()
    };
    i.finish(&mut s);
    s
}

use BlockState::{ActiveAllocated as A, Inactive as I};

/// Before: 100 MiB reserved, 60 live, one 40 MiB gap.
fn before() -> Snapshot {
    snapshot(
        &[&[(60 * MIB, 60 * MIB, A), (40 * MIB, 0, I)]],
        "/w/train.py",
    )
}

/// After: a second 20 MiB segment with a 10 MiB gap. Peak reserved +20 %,
/// fragmentation 0 → 20 %, internal waste 1 MiB.
fn after() -> Snapshot {
    snapshot(
        &[
            &[(60 * MIB, 60 * MIB, A), (40 * MIB, 0, I)],
            &[(10 * MIB, 9 * MIB, A), (10 * MIB, 0, I)],
        ],
        "/w/train.py",
    )
}

fn write(dir: &Path, name: &str, s: &Snapshot) -> String {
    let p = dir.join(name);
    std::fs::write(&p, fragscope::render::encode::to_json_bytes(s)).unwrap();
    p.to_string_lossy().into_owned()
}

struct Fixture {
    dir: tempfile::TempDir,
    before: String,
    after: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let b = write(dir.path(), "before.json", &before());
    let a = write(dir.path(), "after.json", &after());
    Fixture {
        dir,
        before: b,
        after: a,
    }
}

/// JSON equality where floats may differ in the last bit (serde_json parses
/// long decimals to within one ULP unless `float_roundtrip` is on).
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_u64(), y.as_u64(), x.as_i64(), y.as_i64()) {
            (Some(p), Some(q), _, _) => p == q,
            (_, _, Some(p), Some(q)) => p == q,
            _ => {
                let (p, q) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                (p - q).abs() <= 1e-12 * p.abs().max(q.abs()).max(1.0)
            }
        },
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Parses the output into the report type and back: nothing lost or added.
fn round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(text: &str) -> T {
    let parsed: T = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let again = serde_json::to_value(&parsed).unwrap();
    let orig: serde_json::Value = serde_json::from_str(text).unwrap();
    assert!(
        json_eq(&orig, &again),
        "JSON does not round-trip:\n{text}\n{again:#}"
    );
    parsed
}

#[test]
fn exit_code_0_when_every_rule_holds() {
    let f = fixture();
    let r = fragscope(
        f.dir.path(),
        &[
            "check",
            &f.after,
            "--max-peak-reserved",
            "1GiB",
            "--max-fragmentation",
            "0.5",
        ],
    )
    .expect(0);
    assert!(r.stdout.contains("all 3 evaluated rules hold"), "{r}");
}

#[test]
fn exit_code_1_when_a_rule_fails() {
    let f = fixture();
    let r = fragscope(
        f.dir.path(),
        &["check", &f.after, "--max-peak-reserved", "100MiB"],
    )
    .expect(1);
    assert!(
        r.stdout
            .contains("FAIL max_peak_reserved: peak reserved 120.00 MiB"),
        "{r}"
    );
    assert!(r.stdout.contains("1 of 2 rules failed"), "{r}");
}

#[test]
fn exit_code_2_when_the_input_cannot_be_read() {
    let f = fixture();
    let missing = f.dir.path().join("nope.pickle");
    let missing = missing.to_string_lossy();
    let r = fragscope(f.dir.path(), &["check", &missing]).expect(2);
    assert!(
        r.stderr
            .starts_with(&format!("fragscope: error: {missing}: cannot read")),
        "{r}"
    );
    let garbage = f.dir.path().join("garbage.bin");
    std::fs::write(&garbage, b"\x00\x01 not a snapshot").unwrap();
    fragscope(f.dir.path(), &["check", &garbage.to_string_lossy()]).expect(2);
}

#[test]
fn exit_code_2_on_a_bad_config_names_the_key_or_path() {
    let f = fixture();
    let d = f.dir.path();
    let cfg = |text: &str| {
        let p = d.join("fragscope.toml");
        std::fs::write(&p, text).unwrap();
        p
    };
    cfg("[check]\nmax_fragmentaton = 0.5\n");
    let r = fragscope(d, &["check", &f.after]).expect(2);
    assert!(
        r.stderr
            .contains("fragscope.toml: check.max_fragmentaton: unknown rule"),
        "{r}"
    );
    cfg("[check]\nmax_peak_reserved = \"40 GiBs\"\n");
    let r = fragscope(d, &["check", &f.after]).expect(2);
    assert!(
        r.stderr
            .contains("check.max_peak_reserved: malformed size \"40 GiBs\""),
        "{r}"
    );
    cfg("[check]\nmax_oom_events = 0\n[check]\n");
    // A TOML error (the table defined twice) says where.
    let r = fragscope(d, &["check", &f.after]).expect(2);
    assert!(r.stderr.contains("fragscope.toml: invalid TOML"), "{r}");
    // A baseline named in the config that does not exist.
    cfg("[check]\nbaseline = \"ci/missing.pickle\"\n");
    let r = fragscope(d, &["check", &f.after]).expect(2);
    assert!(
        r.stderr.contains("fragscope.toml: check.baseline: ")
            && r.stderr.contains("ci/missing.pickle: cannot read"),
        "{r}"
    );
    // The same on the command line.
    let r = fragscope(
        d,
        &[
            "check",
            &f.after,
            "--no-config",
            "--baseline",
            "gone.pickle",
        ],
    )
    .expect(2);
    assert!(
        r.stderr.contains("--baseline: gone.pickle: cannot read"),
        "{r}"
    );
    // A config path that does not exist.
    let r = fragscope(d, &["check", &f.after, "--config", "other.toml"]).expect(2);
    assert!(
        r.stderr.contains("other.toml: cannot read the config file"),
        "{r}"
    );
    // Malformed flags are usage errors (exit 2) naming the flag.
    let r = fragscope(
        d,
        &[
            "check",
            &f.after,
            "--no-config",
            "--max-regression",
            "peak=5%",
        ],
    )
    .expect(2);
    assert!(
        r.stderr.contains("--max-regression") && r.stderr.contains("unknown metric"),
        "{r}"
    );
    let r = fragscope(
        d,
        &[
            "check",
            &f.after,
            "--no-config",
            "--max-peak-reserved",
            "lots",
        ],
    )
    .expect(2);
    assert!(r.stderr.contains("--max-peak-reserved"), "{r}");
}

#[test]
fn config_in_the_current_directory_applies_and_flags_win() {
    let f = fixture();
    let d = f.dir.path();
    std::fs::write(
        d.join("fragscope.toml"),
        "[check]\nbaseline = \"before.json\"\nmax_peak_reserved = \"100MiB\"\n[check.max_regression]\npeak_reserved = \"5%\"\n",
    )
    .unwrap();
    let r = fragscope(d, &["check", "after.json"]).expect(1);
    assert!(r.stdout.contains("(baseline before.json)"), "{r}");
    assert!(
        r.stdout.contains("FAIL max_regression.peak_reserved"),
        "{r}"
    );
    // Flags override both rules; the config's baseline stays.
    fragscope(
        d,
        &[
            "check",
            "after.json",
            "--max-peak-reserved",
            "1GiB",
            "--max-regression",
            "peak_reserved=25%",
        ],
    )
    .expect(0);
    // --no-config ignores the file: only the default OOM rule remains.
    let r = fragscope(d, &["check", "after.json", "--no-config"]).expect(0);
    assert!(
        r.stdout.contains("max_oom_events") && !r.stdout.contains("baseline"),
        "{r}"
    );
}

#[test]
fn known_regression_against_a_baseline() {
    let f = fixture();
    let r = fragscope(
        f.dir.path(),
        &[
            "check",
            &f.after,
            "--no-config",
            "--baseline",
            &f.before,
            "--format",
            "json",
            "--max-regression",
            "peak_reserved=5%",
            "--max-regression",
            "fragmentation=0.05",
            "--max-regression",
            "largest_gap=0",
            "--max-regression",
            "internal_waste=2MiB",
        ],
    )
    .expect(1);
    let rep: CheckReport = round_trip(&r.stdout);
    let get = |rule: &str| rep.findings.iter().find(|x| x.rule == rule).unwrap();
    let pr = get("max_regression.peak_reserved");
    assert_eq!(pr.verdict, Verdict::Fail);
    assert_eq!(pr.baseline_value, Some(Quantity::Bytes(100 * MIB)));
    assert_eq!(pr.current_value, Some(Quantity::Bytes(120 * MIB)));
    assert!(
        matches!(pr.measured, Some(fragscope::analysis::check::Value::Relative(x)) if (x - 0.2).abs() < 1e-12)
    );
    assert_eq!(get("max_regression.fragmentation").verdict, Verdict::Fail);
    // The largest gap stayed 40 MiB: no regression.
    assert_eq!(get("max_regression.largest_gap").verdict, Verdict::Pass);
    // 0 → 1 MiB of rounding waste, 2 MiB allowed.
    assert_eq!(get("max_regression.internal_waste").verdict, Verdict::Pass);
    assert_eq!(rep.failed, 2);
    // The same comparison the other way round is an improvement.
    fragscope(
        f.dir.path(),
        &[
            "check",
            &f.before,
            "--no-config",
            "--baseline",
            &f.after,
            "--max-regression",
            "peak_reserved=0%",
        ],
    )
    .expect(0);
}

#[test]
fn json_output_round_trips() {
    let f = fixture();
    let r = fragscope(
        f.dir.path(),
        &[
            "check",
            &f.after,
            "--no-config",
            "--format",
            "json",
            "--max-fragmentation",
            "10%",
            // 50 MiB free, the largest gap 40 MiB: fragmented for a 45 MiB
            // request (1 GiB would pass: never that much free).
            "--min-largest-gap",
            "45MiB",
        ],
    )
    .expect(1);
    let rep: CheckReport = round_trip(&r.stdout);
    assert_eq!(rep.schema, "fragscope.check/1");
    assert_eq!(rep.findings.len(), 3);
    assert_eq!((rep.passed, rep.failed, rep.skipped), (1, 2, 0));
    let pr = rep.metrics[&MetricId::PeakReserved];
    assert_eq!((pr.value, pr.device), (Quantity::Bytes(120 * MIB), Some(0)));
    assert_eq!(rep.metrics.len(), MetricId::ALLOCATOR.len());
    let frag = rep
        .findings
        .iter()
        .find(|x| x.rule == "max_fragmentation")
        .unwrap();
    assert!(
        matches!(frag.measured, Some(fragscope::analysis::check::Value::Ratio(x)) if (x - 0.2).abs() < 1e-12)
    );
    assert_eq!(
        frag.threshold,
        fragscope::analysis::check::Value::Ratio(0.1)
    );
    assert!(!frag.hint.is_empty());
    // Written to a file through -o, the same bytes.
    let out = f.dir.path().join("report.json");
    fragscope(
        f.dir.path(),
        &[
            "check",
            &f.after,
            "--no-config",
            "--format",
            "json",
            "--max-fragmentation",
            "10%",
            "--min-largest-gap",
            "45MiB",
            "-o",
            &out.to_string_lossy(),
        ],
    )
    .expect(1);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), r.stdout);
}

/// One `<testcase>`: its name, the failure message (if any), and whether it
/// was skipped.
type JunitCase = (String, Option<String>, bool);

/// Test cases and failures as a CI server reads them.
fn parse_junit(xml: &str) -> (Vec<JunitCase>, u64, u64) {
    use quick_xml::events::Event;
    let mut rd = quick_xml::Reader::from_str(xml);
    let mut cases: Vec<JunitCase> = Vec::new();
    let (mut tests_attr, mut failures_attr) = (0, 0);
    let attr = |e: &quick_xml::events::BytesStart, k: &str| -> Option<String> {
        e.attributes()
            .map(|a| a.unwrap())
            .find(|a| a.key.as_ref() == k)
            .map(|a| {
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .unwrap()
                    .into_owned()
            })
    };
    loop {
        match rd
            .read_event()
            .unwrap_or_else(|e| panic!("invalid XML: {e}\n{xml}"))
        {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                "testsuite" => {
                    tests_attr = attr(&e, "tests").unwrap().parse().unwrap();
                    failures_attr = attr(&e, "failures").unwrap().parse().unwrap();
                }
                "testcase" => cases.push((attr(&e, "name").unwrap(), None, false)),
                "failure" => cases.last_mut().unwrap().1 = attr(&e, "message"),
                "skipped" => cases.last_mut().unwrap().2 = true,
                _ => {}
            },
            _ => {}
        }
    }
    (cases, tests_attr, failures_attr)
}

#[test]
fn junit_output_parses_with_one_case_per_rule() {
    let f = fixture();
    let r = fragscope(
        f.dir.path(),
        &[
            "check",
            &f.after,
            "--no-config",
            "--format",
            "junit",
            "--max-peak-reserved",
            "100MiB",
            "--max-fragmentation",
            "0.5",
            "--max-regression",
            "peak_reserved=5%",
        ],
    )
    .expect(1);
    let (cases, tests, failures) = parse_junit(&r.stdout);
    assert_eq!(tests, 4, "{r}");
    assert_eq!(failures, 1, "{r}");
    let names: Vec<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "max_fragmentation",
            "max_peak_reserved",
            "max_oom_events",
            "max_regression.peak_reserved"
        ]
    );
    let failed: Vec<_> = cases.iter().filter(|c| c.1.is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "max_peak_reserved");
    assert!(
        failed[0]
            .1
            .as_ref()
            .unwrap()
            .contains("exceeds the limit of 100.00 MiB")
    );
    // No baseline: the regression rule is skipped, not passed.
    assert!(cases[3].2, "{r}");
}

/// GitHub's syntax: `::LEVEL file=F,title=T::MESSAGE`, with `%`, CR and LF
/// escaped everywhere and `:`/`,` escaped in properties.
fn assert_annotation(line: &str) -> (&str, &str, &str, &str) {
    let rest = line.strip_prefix("::").unwrap_or_else(|| panic!("{line}"));
    let (head, msg) = rest.split_once("::").unwrap_or_else(|| panic!("{line}"));
    let (level, props) = head.split_once(' ').unwrap_or_else(|| panic!("{line}"));
    assert!(matches!(level, "error" | "warning" | "notice"), "{line}");
    let (file, title) = props.split_once(',').unwrap_or_else(|| panic!("{line}"));
    let file = file
        .strip_prefix("file=")
        .unwrap_or_else(|| panic!("{line}"));
    let title = title
        .strip_prefix("title=")
        .unwrap_or_else(|| panic!("{line}"));
    for p in [file, title] {
        assert!(
            !p.contains(',') && !p.contains(':') && !p.contains('\n'),
            "{line}"
        );
    }
    assert!(
        !msg.is_empty() && !msg.contains('\n') && !msg.contains('\r'),
        "{line}"
    );
    // Every % is an escape sequence.
    for (i, _) in msg.match_indices('%') {
        assert!(
            ["%25", "%0D", "%0A"]
                .iter()
                .any(|e| msg[i..].starts_with(e)),
            "{line}"
        );
    }
    (level, file, title, msg)
}

#[test]
fn github_annotations_and_job_summary() {
    let f = fixture();
    let d = f.dir.path();
    let summary = d.join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let args = [
        "check",
        "after.json",
        "--no-config",
        "--format",
        "github",
        "--max-fragmentation",
        "10%",
        "--max-peak-reserved",
        "1GiB",
        "--max-regression",
        "peak_reserved=5%",
    ];
    let r = fragscope_env(d, &args, &[("GITHUB_STEP_SUMMARY", &summary)]).expect(1);
    let ann: Vec<_> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("::"))
        .map(assert_annotation)
        .collect();
    // Two rules, and the note that after.json has no trace (a notice).
    assert_eq!(ann.len(), 3, "{r}");
    assert_eq!(ann[0].0, "error");
    assert_eq!(ann[0].1, "after.json");
    assert_eq!(ann[0].2, "fragscope check max_fragmentation");
    assert!(
        ann[0]
            .3
            .contains("worst fragmentation under pressure 20.0%25"),
        "{r}"
    );
    assert_eq!(ann[1].0, "warning");
    assert_eq!(ann[1].2, "fragscope check max_regression.peak_reserved");
    assert_eq!(ann[2].0, "notice");
    assert!(
        ann[2]
            .3
            .starts_with("device 0: no trace was recorded, so only the recorded state is known"),
        "{r}"
    );
    // The table follows for the log.
    assert!(r.stdout.contains("│ rule"), "{r}");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("earlier step\n### fragscope check `after.json`: 1 of 4 rules failed"),
        "{md}"
    );
    assert!(
        md.contains("| `max_fragmentation` | 0 | 20.0% | ≤ 10.0% | **FAIL** |"),
        "{md}"
    );
    // A second run appends.
    fragscope_env(d, &args, &[("GITHUB_STEP_SUMMARY", &summary)]).expect(1);
    let md = std::fs::read_to_string(&summary).unwrap();
    assert_eq!(md.matches("### fragscope check").count(), 2, "{md}");
}

#[test]
fn diff_of_a_hand_made_pair() {
    let f = fixture();
    let r = fragscope(f.dir.path(), &["diff", &f.before, &f.after]).expect(0);
    assert!(r.stdout.contains("+20.00 MiB (+20.0%)"), "{r}");
    let r = fragscope(f.dir.path(), &["diff", "--json", &f.before, &f.after]).expect(0);
    let rep: DiffReport = round_trip(&r.stdout);
    assert_eq!(rep.schema, "fragscope.diff/1");
    let get = |m| rep.metrics.iter().find(|x| x.metric == m).unwrap();
    assert_eq!(get(MetricId::PeakReserved).direction, Direction::Worse);
    assert_eq!(get(MetricId::PeakReserved).change, Some((20 * MIB) as f64));
    assert!(
        matches!(get(MetricId::Fragmentation).after, Some(Quantity::Ratio(x)) if (x - 0.2).abs() < 1e-12)
    );
    assert_eq!(get(MetricId::LargestGap).direction, Direction::Same);
    assert_eq!(get(MetricId::InternalWaste).change, Some(MIB as f64));
    assert_eq!(rep.call_sites.len(), 1);
    assert_eq!(rep.call_sites[0].site, "train.py (forward)");
    assert_eq!(rep.call_sites[0].live_change(), (9 * MIB) as i128);
    // Asking for a device the file does not have is an input error.
    let r = fragscope(
        f.dir.path(),
        &["diff", "--device", "0,3", &f.before, &f.after],
    )
    .expect(2);
    assert!(
        r.stderr
            .contains("after.json: no device 3 in this file (devices: 0)"),
        "{r}"
    );
}

/// Before: 20 % fragmentation (a 40 MiB and a 10 MiB gap). After: the small
/// gap 2 KiB larger, so fragmentation moves by 0.003 points and reserved
/// memory by 2 KiB: both print as before at their usual precision.
fn below_precision_pair() -> (Snapshot, Snapshot) {
    let pair = |small: u64| {
        snapshot(
            &[
                &[(60 * MIB, 60 * MIB, A), (40 * MIB, 0, I)],
                &[(MIB, MIB, A), (small, 0, I)],
            ],
            "/w/train.py",
        )
    };
    (pair(10 * MIB), pair(10 * MIB + 2048))
}

#[test]
fn a_change_below_display_precision_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (b, a) = below_precision_pair();
    let (b, a) = (
        write(dir.path(), "b.json", &b),
        write(dir.path(), "a.json", &a),
    );
    let r = fragscope(dir.path(), &["diff", "--json", &b, &a]).expect(0);
    let rep: DiffReport = round_trip(&r.stdout);
    let get = |m| rep.metrics.iter().find(|x| x.metric == m).unwrap();
    let frag = get(MetricId::Fragmentation);
    // The exact change is kept, but it is no change.
    assert!(frag.change.is_some_and(|c| c > 0.0 && c < 0.0005), "{r}");
    assert_eq!(frag.direction, Direction::Same, "{r}");
    // 2 KiB more reserved is a real change, printed with it.
    assert_eq!(get(MetricId::PeakReserved).direction, Direction::Worse);
    let r = fragscope(dir.path(), &["diff", &b, &a]).expect(0);
    let line = |label: &str| {
        r.stdout
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no {label} row{r}"))
            .to_string()
    };
    let frag = line("fragmentation");
    assert!(
        frag.contains("±0") && frag.contains("unchanged"),
        "{frag}{r}"
    );
    assert!(!frag.contains("better") && !frag.contains("-0.0"), "{frag}");
    // 111.00 MiB both at two decimals: the cells get the digits that tell
    // them apart, and the change column says by how much.
    let reserved = line("peak reserved");
    assert!(
        reserved.contains("111.000 MiB") && reserved.contains("111.002 MiB"),
        "{reserved}{r}"
    );
    assert!(
        reserved.contains("+2.00 KiB") && reserved.contains("worse"),
        "{reserved}"
    );
    // check against the baseline: the fragmentation rule passes and its
    // message says "unchanged" in every format.
    let args = |format: &str| {
        vec![
            "check".to_string(),
            a.clone(),
            "--no-config".into(),
            "--baseline".into(),
            b.clone(),
            "--format".into(),
            format.into(),
            "--max-regression".into(),
            "fragmentation=0.01".into(),
        ]
    };
    for format in ["text", "json", "github", "junit"] {
        let argv = args(format);
        let argv: Vec<&str> = argv.iter().map(|x| x.as_str()).collect();
        let r = fragscope(dir.path(), &argv).expect(0);
        if matches!(format, "json" | "junit") {
            // The formats that carry each rule's message.
            assert!(
                r.stdout.contains("20.0% → 20.0% on device 0 (unchanged;"),
                "{format}{r}"
            );
        } else {
            // The table's measured change.
            assert!(r.stdout.contains("±0 pt"), "{format}{r}");
        }
        assert!(!r.stdout.contains("-0.0"), "{format}{r}");
    }
    // With no allowance, the same change fails, and the message prints the
    // digits that show it.
    let r = fragscope(
        dir.path(),
        &[
            "check",
            &a,
            "--no-config",
            "--baseline",
            &b,
            "--max-regression",
            "fragmentation=0",
        ],
    )
    .expect(1);
    assert!(r.stdout.contains("+0.0031 pt worse"), "{r}");
}

// ---- real files -------------------------------------------------------

fn real(name: &str) -> Option<PathBuf> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/real"));
    if !dir.is_dir() {
        eprintln!(
            "note: {} is absent; skipping the real-file test",
            dir.display()
        );
        return None;
    }
    Some(dir.join(name))
}

fn load(p: &Path) -> Snapshot {
    fragscope::input::load_snapshot(&p.to_string_lossy(), &Default::default())
        .unwrap()
        .0
}

/// Metrics through the replay, as the commands compute them.
fn metrics(s: &Snapshot, device: Option<i64>) -> Metrics {
    Metrics::of_snapshot(s, device).unwrap()
}

fn gib(q: Option<fragscope::analysis::metrics::Measured>) -> f64 {
    q.unwrap().value.as_f64() / (1u64 << 30) as f64
}

/// The README's reserved figure holds as the end-state metric, its allocated
/// figure (block bytes, as `memory_allocated` counts them) bounds ours
/// (requested bytes) from above, peaks are never below the end, and
/// call-site live bytes add up to allocated.
fn check_real(
    name: &str,
    device: Option<i64>,
    reserved_gib: f64,
    allocated_gib: f64,
) -> Option<(Snapshot, Metrics)> {
    let p = real(name)?;
    let s = load(&p);
    let m = metrics(&s, device);
    assert!(
        (gib(m.get(MetricId::EndReserved)) - reserved_gib).abs() < 0.006,
        "{name}"
    );
    let all = StateStats::of(
        s.segments
            .iter()
            .filter(|g| device.is_none_or(|d| g.device == d)),
    );
    assert!(
        (all.active_bytes as f64 / (1u64 << 30) as f64 - allocated_gib).abs() < 0.006,
        "{name}"
    );
    assert!(
        gib(m.get(MetricId::EndAllocated)) <= all.active_bytes as f64 / (1u64 << 30) as f64,
        "{name}"
    );
    for d in &m.devices {
        assert!(
            d.peak_reserved >= d.end_reserved,
            "{name} device {}",
            d.device
        );
        assert!(
            d.peak_allocated >= d.end_allocated,
            "{name} device {}",
            d.device
        );
        assert!(
            d.peak_allocated <= d.peak_reserved,
            "{name} device {}",
            d.device
        );
        let frag = d.fragmentation.unwrap();
        assert!((0.0..=1.0).contains(&frag), "{name}");
        let end = StateStats::of(s.segments_of(d.device));
        assert!(frag >= end.fragmentation || end.reserved_bytes * 2 < d.peak_reserved.unwrap());
    }
    let (sites, _) = fragscope::analysis::diff::call_sites(&s, device);
    let live: u64 = sites.iter().map(|x| x.live_bytes).sum();
    assert_eq!(
        live, all.allocated_bytes,
        "{name}: call sites cover every live byte"
    );
    for x in &sites {
        assert!(x.peak_bytes >= x.live_bytes, "{name}: {}", x.site);
    }
    Some((s, m))
}

fn real_diff(
    before: (&Snapshot, &Metrics, Option<i64>),
    after: (&Snapshot, &Metrics, Option<i64>),
) -> DiffReport {
    let (sb, _) = fragscope::analysis::diff::call_sites(before.0, before.2);
    let (sa, _) = fragscope::analysis::diff::call_sites(after.0, after.2);
    fragscope::analysis::diff::diff(
        &fragscope::analysis::diff::DiffInput {
            file: "before",
            device: before.2,
            metrics: before.1,
            sites: Some(&sb),
        },
        &fragscope::analysis::diff::DiffInput {
            file: "after",
            device: after.2,
            metrics: after.1,
            sites: Some(&sa),
        },
        10,
    )
}

fn direction(r: &DiffReport, m: MetricId) -> Direction {
    r.metrics.iter().find(|x| x.metric == m).unwrap().direction
}

#[test]
fn real_octreenca_single_step_vs_inference() {
    let Some((small, ms)) = check_real("octreenca_single-step_tiny.pickle", None, 0.02, 0.01)
    else {
        return;
    };
    let (big, mb) = check_real(
        "octreenca_inference_24GB_few-segments.pickle",
        None,
        22.69,
        4.92,
    )
    .unwrap();
    let r = real_diff((&small, &ms, None), (&big, &mb, None));
    assert_eq!(direction(&r, MetricId::EndReserved), Direction::Worse);
    assert_eq!(direction(&r, MetricId::PeakReserved), Direction::Worse);
    assert!(!r.call_sites.is_empty());
    // Movers are sorted by how far they moved.
    let moved = |s: &fragscope::analysis::diff::SiteDelta| {
        s.live_change()
            .unsigned_abs()
            .max(s.peak_change().unsigned_abs())
    };
    assert!(
        r.call_sites
            .windows(2)
            .all(|w| moved(&w[0]) >= moved(&w[1]))
    );
    let text = fragscope::render::diff::text(&Style::default(), &r);
    assert!(text.contains("Call sites that moved most"), "{text}");
}

#[test]
fn real_cs336_small_vs_medium() {
    let Some((small, ms)) = check_real("silmont_cs336_small_py312.pickle", None, 3.52, 0.03) else {
        return;
    };
    let (medium, mm) = check_real(
        "wedsonlin_cs336_medium_ctx512_train_torch2.11.pickle",
        None,
        11.79,
        6.37,
    )
    .unwrap();
    let r = real_diff((&small, &ms, None), (&medium, &mm, None));
    assert_eq!(direction(&r, MetricId::EndAllocated), Direction::Worse);
    assert_eq!(direction(&r, MetricId::PeakAllocated), Direction::Worse);
    // The medium model's run is a regression against the small one under a
    // 5 % peak-reserved rule, and passes its own figures as baseline.
    let mut rules = fragscope::analysis::check::Rules::defaults();
    rules.regressions.insert(
        MetricId::PeakReserved,
        fragscope::analysis::check::RegressionLimit::Relative(0.05),
    );
    let rep = fragscope::analysis::check::evaluate(
        &Style::default(),
        "medium",
        &mm,
        Some(("small", &ms)),
        &rules,
    );
    assert_eq!(rep.failed, 1);
    let rep = fragscope::analysis::check::evaluate(
        &Style::default(),
        "medium",
        &mm,
        Some(("medium", &mm)),
        &rules,
    );
    assert!(rep.ok());
}

#[test]
fn real_two_devices_of_one_file() {
    // sqattn's four device traces hold events for device 0 only, so the
    // three-device OOM file provides the pair.
    let name = "constructor-sun_code-location_oom_expandable_3dev.pickle";
    let Some(p) = real(name) else {
        return;
    };
    let s = load(&p);
    let m1 = metrics(&s, Some(1));
    let m2 = metrics(&s, Some(2));
    // Per-device figures from `stats`: device 1 reserves 84.2 GB, device 2 21.9 GB.
    assert_eq!(
        m1.get(MetricId::EndReserved).unwrap().value,
        Quantity::Bytes(84202749952)
    );
    assert_eq!(
        m2.get(MetricId::EndReserved).unwrap().value,
        Quantity::Bytes(21883781120)
    );
    // The README's OOM event is on device 1.
    assert_eq!(
        m1.get(MetricId::OomEvents).unwrap().value,
        Quantity::Count(1)
    );
    assert_eq!(
        m2.get(MetricId::OomEvents).unwrap().value,
        Quantity::Count(0)
    );
    let r = real_diff((&s, &m1, Some(1)), (&s, &m2, Some(2)));
    assert_eq!(direction(&r, MetricId::EndReserved), Direction::Better);
    assert_eq!(direction(&r, MetricId::OomEvents), Direction::Better);
    // The default OOM rule fails device 1 and holds on device 2.
    let rules = fragscope::analysis::check::Rules::defaults();
    assert!(!fragscope::analysis::check::evaluate(&Style::default(), name, &m1, None, &rules).ok());
    assert!(fragscope::analysis::check::evaluate(&Style::default(), name, &m2, None, &rules).ok());
    // All devices: the file-level figure is the worst device's.
    let all = metrics(&s, None);
    let w = all.get(MetricId::EndReserved).unwrap();
    assert_eq!((w.value, w.device), (Quantity::Bytes(84202749952), Some(1)));
}

#[test]
fn real_empty_snapshot_passes_the_default_gate() {
    let Some(p) = real("hitsbe_empty-snapshot.pickle") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let r = fragscope(
        dir.path(),
        &[
            "check",
            &p.to_string_lossy(),
            "--min-largest-gap",
            "1GiB",
            "--format",
            "json",
        ],
    )
    .expect(0);
    let rep: CheckReport = round_trip(&r.stdout);
    let v: Vec<_> = rep
        .findings
        .iter()
        .map(|f| (f.rule.as_str(), f.verdict))
        .collect();
    assert_eq!(
        v,
        [
            ("min_largest_gap", Verdict::Skipped),
            ("max_oom_events", Verdict::Pass)
        ]
    );
}

/// The command line over real pairs.
#[test]
fn real_files_through_the_command_line() {
    let (Some(a), Some(b)) = (
        real("octreenca_single-step_tiny.pickle"),
        real("octreenca_inference_24GB_few-segments.pickle"),
    ) else {
        return;
    };
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r = fragscope(d, &["diff", "--json", &a, &b]).expect(0);
    let rep: DiffReport = round_trip(&r.stdout);
    for m in &rep.metrics {
        assert_ne!(m.direction, Direction::Unknown, "{:?} {r}", m.metric);
    }
    let r = fragscope(
        d,
        &[
            "check",
            &b,
            "--baseline",
            &a,
            "--max-regression",
            "peak_reserved=5%",
            "--format",
            "junit",
        ],
    )
    .expect(1);
    let (cases, _, failures) = parse_junit(&r.stdout);
    assert_eq!(cases.len(), 2);
    assert_eq!(failures, 1);
    let r = fragscope(
        d,
        &["check", &b, "--format", "json", "--max-fragmentation", "1"],
    )
    .expect(0);
    let rep: CheckReport = round_trip(&r.stdout);
    assert!(
        rep.findings.iter().all(|f| f.verdict == Verdict::Pass),
        "{r}"
    );
    let s = "constructor-sun_code-location_oom_expandable_3dev.pickle";
    let s = real(s).unwrap();
    let s = s.to_string_lossy();
    let r = fragscope(d, &["diff", "--device", "1,2", &s, &s]).expect(0);
    assert!(
        r.stdout.contains("(device 1)") && r.stdout.contains("(device 2)"),
        "{r}"
    );
    fragscope(d, &["check", &s, "--device", "2"]).expect(0);
    fragscope(d, &["check", &s]).expect(1);
}

#[test]
fn golden_outputs_of_the_hand_made_pair() {
    let f = fixture();
    let d = f.dir.path();
    let rules = [
        "--no-config",
        "--baseline",
        "before.json",
        "--max-fragmentation",
        "10%",
        "--max-peak-reserved",
        "1GiB",
        "--min-largest-gap",
        "16MiB",
        "--max-regression",
        "peak_reserved=5%",
        "--max-regression",
        "largest_gap=0",
    ];
    let check = |format: &str| {
        let mut args = vec!["check", "after.json", "--format", format];
        args.extend(rules);
        fragscope(d, &args).expect(1).stdout
    };
    golden::check("check.txt", &check("text"));
    golden::check("check.json", &check("json"));
    golden::check("check.xml", &check("junit"));
    let summary = d.join("summary.md");
    let mut args = vec!["check", "after.json", "--format", "github"];
    args.extend(rules);
    let r = fragscope_env(d, &args, &[("GITHUB_STEP_SUMMARY", &summary)]).expect(1);
    golden::check("check.github.txt", &r.stdout);
    golden::check(
        "check.summary.md",
        &std::fs::read_to_string(&summary).unwrap(),
    );
    let r = fragscope(d, &["diff", "before.json", "after.json"]).expect(0);
    golden::check("diff.txt", &r.stdout);
    let r = fragscope(d, &["diff", "--json", "before.json", "after.json"]).expect(0);
    golden::check("diff.json", &r.stdout);
}

// ---- segments of one run only (`_memory_viz compare`) -------------------

fn stats_json(d: &Path, file: &str) -> serde_json::Value {
    let r = fragscope(d, &["stats", "--json", file]).expect(0);
    serde_json::from_str(&r.stdout).unwrap()
}

/// Two real snapshots with no segment in common: each side's list is all of
/// its segments, their bytes its reserved bytes and what they hold its
/// allocated bytes (as `stats` counts them).
#[test]
fn diff_lists_the_segments_of_one_run_only_on_a_real_pair() {
    let (Some(a), Some(b)) = (
        real("octreenca_single-step_tiny.pickle"),
        real("octreenca_inference_24GB_few-segments.pickle"),
    ) else {
        return;
    };
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let r = fragscope(d, &["diff", "--json", &a, &b]).expect(0);
    let rep: DiffReport = round_trip(&r.stdout);
    let s = rep.segments.expect("two snapshots compare their segments");
    // README: 2 and 6 segments.
    assert_eq!(
        (s.in_both, s.only_before_count, s.only_after_count),
        (0, 2, 6)
    );
    for (file, list, bytes) in [
        (&a, &s.only_before, s.only_before_bytes),
        (&b, &s.only_after, s.only_after_bytes),
    ] {
        let st = stats_json(d, file);
        assert_eq!(Some(bytes), st["reserved_bytes"].as_u64(), "{file}");
        let held: u64 = list.iter().map(|x| x.allocated_bytes).sum();
        assert_eq!(Some(held), st["allocated_bytes"].as_u64(), "{file}");
        let free: u64 = list.iter().map(|x| x.free_bytes).sum();
        assert_eq!(Some(free), st["inactive_bytes"].as_u64(), "{file}");
        assert!(list.windows(2).all(|w| w[0].total_size >= w[1].total_size));
        for x in list {
            assert_eq!(x.top_site.is_some(), x.live_blocks > 0, "{x:?}");
            assert!(x.top_site_bytes <= x.allocated_bytes, "{x:?}");
        }
    }
    let text = fragscope(d, &["diff", &a, &b]).expect(0).stdout;
    assert!(
        text.contains(
            "Segments, matched by address and size: 0 in both runs, 2 (22.00 MiB) only before, 6 (22.69 GiB) only after"
        ),
        "{text}"
    );
    assert!(text.contains("Segments only before (2 of 2):"), "{text}");
    assert!(text.contains("Segments only after (6 of 6):"), "{text}");
    // --top bounds the lists; the line above them still counts all.
    let text = fragscope(d, &["diff", "--top", "2", &a, &b])
        .expect(0)
        .stdout;
    assert!(text.contains("Segments only after (2 of 6):"), "{text}");
    assert!(text.contains("6 (22.69 GiB) only after"), "{text}");
}

/// A real snapshot against a copy with one segment dropped and one moved to
/// a fresh address: exactly those two differ, with what they hold.
#[test]
fn diff_finds_a_dropped_and_a_moved_segment_in_a_modified_copy() {
    let Some(p) = real("kkaitlyn_cs336_1457-segments_empty-trace.pickle") else {
        return;
    };
    let orig = load(&p);
    let mut copy = orig.clone();
    // Drop the largest segment; move the next largest past the last one.
    let mut by_size: Vec<usize> = (0..copy.segments.len()).collect();
    by_size.sort_by_key(|&i| (std::cmp::Reverse(copy.segments[i].total_size), i));
    let (dropped, moved) = (by_size[0], by_size[1]);
    let end = copy.segments.iter().map(|s| s.end()).max().unwrap();
    let shift = (end - copy.segments[moved].address).next_multiple_of(2 << 20) + (2 << 20);
    let seg = &mut copy.segments[moved];
    let old_address = seg.address;
    seg.address += shift;
    for b in &mut seg.blocks {
        b.address += shift;
    }
    let dropped_seg = copy.segments.remove(dropped);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let b = write(d, "orig.json", &orig);
    let a = write(d, "copy.json", &copy);
    let r = fragscope(d, &["diff", "--json", &b, &a]).expect(0);
    let rep: DiffReport = round_trip(&r.stdout);
    let s = rep.segments.unwrap();
    assert_eq!(
        (s.in_both, s.only_before_count, s.only_after_count),
        (1457 - 2, 2, 1)
    );
    let requested = |seg: &Segment| -> u64 {
        seg.blocks
            .iter()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| b.requested_or_size().min(b.size))
            .sum()
    };
    let gone = s
        .only_before
        .iter()
        .find(|x| x.address == dropped_seg.address)
        .expect("the dropped segment is only before");
    assert_eq!(gone.total_size, dropped_seg.total_size);
    assert_eq!(gone.allocated_bytes, requested(&dropped_seg));
    assert!(s.only_before.iter().any(|x| x.address == old_address));
    let new = &s.only_after[0];
    let orig_moved = orig
        .segments
        .iter()
        .find(|x| x.address == old_address)
        .unwrap();
    assert_eq!(new.address, old_address + shift);
    assert_eq!(
        (new.total_size, new.allocated_bytes),
        (orig_moved.total_size, requested(orig_moved))
    );
    // The moved segment holds the same on both sides.
    let before_moved = s
        .only_before
        .iter()
        .find(|x| x.address == old_address)
        .unwrap();
    assert_eq!(
        (
            before_moved.live_blocks,
            before_moved.free_bytes,
            &before_moved.top_site
        ),
        (new.live_blocks, new.free_bytes, &new.top_site)
    );
    // A file against itself: every segment in both, no list.
    let text = fragscope(d, &["diff", &b, &b]).expect(0).stdout;
    assert!(
        text.contains(
            "Segments, matched by address and size: 1457 in both runs, 0 only before, 0 only after"
        ),
        "{text}"
    );
    assert!(!text.contains("Segments only"), "{text}");
}

/// A profiler trace has no segments: the section is absent and a note says
/// why.
#[test]
fn diff_with_a_profiler_trace_has_no_segment_section() {
    let (Some(t), Some(s)) = (
        real("tracelens_h100_bert-small_profile-memory.json.gz"),
        real("octreenca_single-step_tiny.pickle"),
    ) else {
        return;
    };
    let (t, s) = (t.to_string_lossy(), s.to_string_lossy());
    let dir = tempfile::tempdir().unwrap();
    let r = fragscope(dir.path(), &["diff", "--json", &s, &t]).expect(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(v["segments"].is_null(), "{r}");
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("segments are compared only between two snapshots")),
        "{r}"
    );
    let text = fragscope(dir.path(), &["diff", &s, &t]).expect(0).stdout;
    assert!(!text.contains("Segments, matched"), "{text}");
}

fn edge_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `min_largest_gap` gates the fragmentation signature only: at least N
/// free in reserved memory but no single gap of N (figures of the fixtures
/// in fixtures/README.md). A moment with nothing free has no gap, but it is
/// full, not fragmented, and passes.
#[test]
fn min_largest_gap_fails_only_where_enough_is_free_but_split() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gate = |file: &str, n: &str, code: i32| {
        let r = fragscope(
            d,
            &[
                "check",
                "--no-config",
                "--format",
                "json",
                "--min-largest-gap",
                n,
                &edge_fixture(file),
            ],
        )
        .expect(code);
        let rep: CheckReport = round_trip(&r.stdout);
        let f = rep.findings.into_iter().next().unwrap();
        assert_eq!(f.rule, "min_largest_gap");
        (f, rep.metrics[&MetricId::LargestGap].value)
    };
    use fragscope::analysis::check::Value;

    // Reserved = allocated after events 2 and 3: the smallest largest gap
    // under pressure is 0 B, yet every moment with 16 MiB free had them in
    // one gap (20 MiB at the least).
    let (f, metric) = gate("gap_full_moment.json", "16MiB", 0);
    assert_eq!(metric, Quantity::Bytes(0));
    assert_eq!(f.verdict, Verdict::Pass);
    assert_eq!(f.measured, Some(Value::Bytes(20 * MIB)));
    assert_eq!(
        f.message,
        "largest free gap at least 20.00 MiB on device 0 whenever 16.00 MiB or more of reserved memory were free under pressure: meets the minimum of 16.00 MiB"
    );
    assert_eq!(f.hint, "");

    // 20 MiB free in gaps of at most 8 MiB after event 9: the signature.
    let (f, _) = gate("gap_fragmented_moment.json", "16MiB", 1);
    assert_eq!(f.verdict, Verdict::Fail);
    assert_eq!(
        (f.device, f.measured),
        (Some(0), Some(Value::Bytes(8 * MIB)))
    );
    assert_eq!(
        f.message,
        "largest free gap 8.00 MiB on device 0 is below the minimum of 16.00 MiB after event 9, with 20.00 MiB of reserved memory free"
    );
    assert!(
        f.hint.starts_with(
            "20.00 MiB of reserved memory sat free after event 9 but in gaps of at most 8.00 MiB: a request of 16.00 MiB needs a new cudaMalloc"
        ) && f.hint.contains("That is fragmentation: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
        "{}",
        f.hint
    );
    // No moment had 40 MiB free (36 MiB at most, after event 8): nothing was
    // refused for want of a 40 MiB gap.
    let (f, _) = gate("gap_fragmented_moment.json", "40MiB", 0);
    assert_eq!((f.verdict, f.measured), (Verdict::Pass, None));
    assert_eq!(
        f.message,
        "no moment under pressure had 40.00 MiB of reserved memory free (at most 36.00 MiB on device 0), so no gap of that size was missing: meets the minimum of 40.00 MiB"
    );
    let text = fragscope(
        d,
        &[
            "check",
            "--no-config",
            "--min-largest-gap",
            "40MiB",
            &edge_fixture("gap_fragmented_moment.json"),
        ],
    )
    .expect(0)
    .stdout;
    let row = text
        .lines()
        .find(|l| l.contains("min_largest_gap"))
        .unwrap();
    assert!(row.contains(" - ") && row.contains("pass"), "{row}");

    // Without a trace the recorded state is the one moment: 60 MiB free in
    // gaps of 12 MiB − 512 B.
    let (f, _) = gate("fragmented.json", "16MiB", 1);
    assert_eq!(f.measured, Some(Value::Bytes(12 * MIB - 512)));
    assert!(f.message.ends_with("below the minimum of 16.00 MiB in the recorded state, with 60.00 MiB of reserved memory free"), "{}", f.message);
}
