//! `fragscope check` and `fragscope diff` on memory-timeline exports
//! (`export_memory_timeline`'s raw JSON): they gate and compare the peak of
//! the total and of each memory-profiler category. On the hand-made pair
//! fixtures/memory_timeline_{before,after}.raw.json (figures in
//! fixtures/README.md) and on the real export in ../shared/real, against
//! itself and against a copy with its activations scaled, whose peaks the
//! test recounts from the raw rows.

use crate::util::{fixture, real_dir, run};
use fragscope::analysis::check::{CheckReport, Value, Verdict};
use fragscope::analysis::diff::{DiffReport, Direction};
use fragscope::analysis::metrics::{MetricId, Quantity, Source};
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;

fn before() -> String {
    fixture("memory_timeline_before.raw.json")
}

fn after() -> String {
    fixture("memory_timeline_after.raw.json")
}

fn check_json(args: &[&str], code: i32) -> CheckReport {
    let mut a = vec!["check", "--format", "json"];
    if !args.contains(&"--config") {
        a.push("--no-config");
    }
    a.extend_from_slice(args);
    let out = run(&a).expect_code(code).stdout();
    let r: CheckReport = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    // Nothing lost or added on the way back.
    let again: serde_json::Value = serde_json::to_value(&r).unwrap();
    let orig: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(orig["findings"], again["findings"]);
    r
}

fn finding<'a>(r: &'a CheckReport, rule: &str) -> &'a fragscope::analysis::check::Finding {
    r.findings
        .iter()
        .find(|f| f.rule == rule)
        .unwrap_or_else(|| panic!("no finding {rule} in {:?}", r.findings))
}

fn diff_json(a: &str, b: &str) -> DiffReport {
    let out = run(["diff", "--json", a, b]).expect_code(0).stdout();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"))
}

fn bytes(q: Option<Quantity>) -> u64 {
    match q {
        Some(Quantity::Bytes(b)) => b,
        other => panic!("expected bytes, found {other:?}"),
    }
}

#[test]
fn check_gates_the_total_and_each_category() {
    let r = check_json(
        &[
            &before(),
            "--max-peak-total",
            "600MiB",
            "--max-peak-category",
            "activation=256MiB",
            "--max-peak-category",
            "gradient=1GiB",
        ],
        1,
    );
    // fixtures/README.md: total 558 MiB, activation 300 MiB, gradient 100 MiB.
    let total = finding(&r, "max_peak_total");
    assert_eq!(total.verdict, Verdict::Pass);
    assert_eq!(total.measured, Some(Value::Bytes(558 * MIB)));
    let act = finding(&r, "max_peak_category.activation");
    assert_eq!(act.verdict, Verdict::Fail);
    assert_eq!(act.metric, MetricId::PeakActivation);
    assert_eq!(act.measured, Some(Value::Bytes(300 * MIB)));
    assert_eq!(act.threshold, Value::Bytes(256 * MIB));
    assert!(
        act.hint.contains("activation checkpointing"),
        "{}",
        act.hint
    );
    assert_eq!(
        finding(&r, "max_peak_category.gradient").verdict,
        Verdict::Pass
    );
    // The default OOM rule does not apply to an export (it records none).
    assert!(r.findings.iter().all(|f| f.rule != "max_oom_events"));
    assert_eq!((r.passed, r.failed, r.skipped), (2, 1, 0));
    // Every figure of the export, and no allocator figure.
    let want: BTreeMap<MetricId, u64> = [
        (MetricId::PeakTotal, 558),
        (MetricId::PeakParameter, 100),
        (MetricId::PeakOptimizerState, 50),
        (MetricId::PeakInput, 8),
        (MetricId::PeakTemporary, 20),
        (MetricId::PeakActivation, 300),
        (MetricId::PeakGradient, 100),
        (MetricId::PeakAutogradDetail, 0),
        (MetricId::PeakUnknown, 0),
    ]
    .into_iter()
    .map(|(m, b)| (m, b * MIB))
    .collect();
    let got: BTreeMap<MetricId, u64> = r
        .metrics
        .iter()
        .map(|(m, v)| (*m, bytes(Some(v.value))))
        .collect();
    assert_eq!(got, want);

    // The text output says the same.
    let t = run([
        "check",
        "--no-config",
        &before(),
        "--max-peak-category",
        "activation=256MiB",
    ])
    .expect_code(1)
    .stdout();
    assert!(
        t.contains("FAIL max_peak_category.activation: peak activation 300.00 MiB exceeds the limit of 256.00 MiB"),
        "{t}"
    );
    assert!(t.contains("  peak_optimizer_state  50.00 MiB"), "{t}");
}

#[test]
fn check_regressions_against_an_earlier_export() {
    let r = check_json(
        &[
            &after(),
            "--baseline",
            &before(),
            "--max-regression",
            "peak_activation=10%",
            "--max-regression",
            "peak_total=30%",
        ],
        1,
    );
    let act = finding(&r, "max_regression.peak_activation");
    assert_eq!(act.verdict, Verdict::Fail);
    assert_eq!(act.measured, Some(Value::Relative(0.5)));
    assert_eq!(act.baseline_value, Some(Quantity::Bytes(300 * MIB)));
    assert_eq!(act.current_value, Some(Quantity::Bytes(450 * MIB)));
    let total = finding(&r, "max_regression.peak_total");
    assert_eq!(total.verdict, Verdict::Pass);
    match total.measured {
        Some(Value::Relative(x)) => assert!((x - 150.0 / 558.0).abs() < 1e-12, "{x}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn config_file_rules_for_exports() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("fragscope.toml");
    std::fs::write(
        &cfg,
        format!(
            "[check]\nbaseline = {:?}\nmax_peak_total = \"1GiB\"\n\n[check.max_peak_category]\nactivation = \"400MiB\"\noptimizer_state = 52428800\n\n[check.max_regression]\npeak_activation = \"10%\"\n",
            before()
        ),
    )
    .unwrap();
    let cfg = cfg.to_string_lossy().into_owned();
    let r = check_json(&["--config", &cfg, &after()], 1);
    let rules: Vec<(&str, Verdict)> = r
        .findings
        .iter()
        .map(|f| (f.rule.as_str(), f.verdict))
        .collect();
    assert_eq!(
        rules,
        [
            ("max_peak_total", Verdict::Pass),
            ("max_peak_category.optimizer_state", Verdict::Pass),
            ("max_peak_category.activation", Verdict::Fail),
            ("max_regression.peak_activation", Verdict::Fail),
        ]
    );
    // A flag wins over the file.
    let r = check_json(
        &[
            "--config",
            &cfg,
            &after(),
            "--max-peak-category",
            "activation=1GiB",
            "--max-regression",
            "peak_activation=60%",
        ],
        0,
    );
    assert_eq!(r.failed, 0);

    // Errors name the key.
    std::fs::write(
        d.path().join("bad.toml"),
        "[check.max_peak_category]\nactivations = \"1GiB\"\n",
    )
    .unwrap();
    let bad = d.path().join("bad.toml").to_string_lossy().into_owned();
    let e = run(["check", "--config", &bad, &before()])
        .expect_code(2)
        .stderr();
    assert!(
        e.contains("bad.toml: check.max_peak_category.activations: unknown category; known: parameter, optimizer_state, input, temporary, activation, gradient, autograd_detail, unknown"),
        "{e}"
    );
    let e = run([
        "check",
        "--no-config",
        &before(),
        "--max-peak-category",
        "activation",
    ])
    .expect_code(2)
    .stderr();
    assert!(e.contains("expected CATEGORY=SIZE"), "{e}");
}

#[test]
fn rules_of_the_other_kind_are_skipped_and_say_why() {
    let r = check_json(
        &[
            &before(),
            "--max-peak-reserved",
            "1GiB",
            "--max-oom-events",
            "0",
        ],
        0,
    );
    for rule in ["max_peak_reserved", "max_oom_events"] {
        let f = finding(&r, rule);
        assert_eq!(f.verdict, Verdict::Skipped, "{rule}");
        assert!(
            f.message
                .ends_with("is not measurable for a memory-timeline export"),
            "{}",
            f.message
        );
        assert!(
            f.hint
                .contains("gate max_peak_total or max_peak_category.CATEGORY"),
            "{}",
            f.hint
        );
    }
    // And a category rule on a snapshot.
    let r = check_json(
        &[
            &fixture("fragmented.json"),
            "--max-peak-category",
            "activation=1GiB",
        ],
        0,
    );
    let f = finding(&r, "max_peak_category.activation");
    assert_eq!(f.verdict, Verdict::Skipped);
    assert!(f.hint.contains("export_memory_timeline"), "{}", f.hint);
    // No rule at all: nothing is gated, and the notes say what would be.
    let r = check_json(&[&before()], 0);
    assert!(r.findings.is_empty());
    assert!(
        r.notes.iter().any(|n| n.contains("no rule is set")),
        "{:?}",
        r.notes
    );
}

#[test]
fn diff_of_the_hand_made_pair() {
    let r = diff_json(&before(), &after());
    assert_eq!(
        (r.before.source, r.after.source),
        (Source::MemoryTimeline, Source::MemoryTimeline)
    );
    let order: Vec<MetricId> = r.metrics.iter().map(|m| m.metric).collect();
    assert_eq!(order, MetricId::CATEGORIES);
    for m in &r.metrics {
        let (b, a) = (bytes(m.before), bytes(m.after));
        match m.metric {
            MetricId::PeakActivation => {
                assert_eq!((b, a), (300 * MIB, 450 * MIB));
                assert_eq!(m.relative, Some(0.5));
                assert_eq!(m.direction, Direction::Worse);
            }
            MetricId::PeakTotal => {
                assert_eq!((b, a), (558 * MIB, 708 * MIB));
                assert_eq!(m.change, Some((150 * MIB) as f64));
                assert_eq!(m.direction, Direction::Worse);
            }
            _ => {
                assert_eq!(b, a, "{:?}", m.metric);
                assert_eq!(m.direction, Direction::Same, "{:?}", m.metric);
            }
        }
    }
    assert!(r.call_sites.is_empty());
    let t = run(["diff", &before(), &after()]).expect_code(0).stdout();
    let row = t
        .lines()
        .find(|l| l.contains("peak activation"))
        .expect("a row per category");
    assert!(
        row.contains("300.00 MiB")
            && row.contains("450.00 MiB")
            && row.contains("+150.00 MiB (+50.0%)")
            && row.contains("worse"),
        "{row}"
    );
    assert!(!t.contains("peak reserved"), "{t}");
}

#[test]
fn an_export_compares_only_with_an_export() {
    let snap = fixture("fragmented.json");
    let e = run(["diff", &before(), &snap]).expect_code(2).stderr();
    assert!(
        e.contains("is a memory-timeline export and")
            && e.contains("compare only with another export"),
        "{e}"
    );
    let e = run(["check", "--no-config", &snap, "--baseline", &before()])
        .expect_code(2)
        .stderr();
    assert!(e.contains("baseline:"), "{e}");
    let e = run(["check", "--no-config", &before(), "--device", "0"])
        .expect_code(2)
        .stderr();
    assert!(e.contains("--device"), "{e}");
}

/// Per-category peaks recounted from raw rows: live bytes per category
/// after each microsecond (rows from before profiling first, then by time;
/// PyTorch coalesces by microsecond too), the highest of each and of their
/// sum.
fn recount(rows: &[[i64; 4]]) -> ([u64; 8], u64) {
    let mut rows: Vec<(Option<i64>, i64, usize)> = rows
        .iter()
        .map(|r| ((r[0] >= 0).then_some(r[0] / 1000), r[2], r[3] as usize))
        .collect();
    rows.sort_by_key(|r| (r.0.is_some(), r.0.unwrap_or(0)));
    let (mut live, mut peak, mut total) = ([0i64; 8], [0u64; 8], 0u64);
    let mut i = 0;
    while i < rows.len() {
        let t = rows[i].0;
        while i < rows.len() && rows[i].0 == t {
            live[rows[i].2] += rows[i].1;
            i += 1;
        }
        for k in 0..8 {
            peak[k] = peak[k].max(live[k].max(0) as u64);
        }
        total = total.max(live.iter().map(|&x| x.max(0) as u64).sum());
    }
    (peak, total)
}

#[test]
fn real_export_against_itself_and_a_scaled_copy() {
    let Some(dir) = real_dir() else { return };
    let real = dir.join("hta_memory_timeline.raw.json.gz");
    let real = real.to_string_lossy().into_owned();
    let r = diff_json(&real, &real);
    assert_eq!(r.metrics.len(), MetricId::CATEGORIES.len());
    for m in &r.metrics {
        assert_eq!(m.direction, Direction::Same, "{:?}", m.metric);
        assert_eq!(m.change, Some(0.0));
    }

    // A copy whose activations take twice the bytes.
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&real).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let rows: Vec<[i64; 4]> = serde_json::from_str(&text).unwrap();
    let scaled: Vec<[i64; 4]> = rows
        .iter()
        .map(|r| {
            if r[3] == 4 {
                [r[0], r[1], 2 * r[2], r[3]]
            } else {
                *r
            }
        })
        .collect();
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("scaled.raw.json");
    std::fs::write(&copy, serde_json::to_string(&scaled).unwrap()).unwrap();
    let copy = copy.to_string_lossy().into_owned();

    let (peak_b, total_b) = recount(&rows);
    let (peak_a, total_a) = recount(&scaled);
    assert_eq!(peak_a[4], 2 * peak_b[4]);
    let r = diff_json(&real, &copy);
    for m in &r.metrics {
        let (b, a) = (bytes(m.before), bytes(m.after));
        let want = match m.metric.category() {
            Some(c) => (peak_b[c as usize], peak_a[c as usize]),
            None => (total_b, total_a),
        };
        assert_eq!((b, a), want, "{:?}", m.metric);
        let changed = matches!(m.metric, MetricId::PeakActivation | MetricId::PeakTotal);
        assert_eq!(
            m.direction,
            if changed {
                Direction::Worse
            } else {
                Direction::Same
            },
            "{:?}",
            m.metric
        );
    }

    // Gated on the real figures: a limit just below the activation peak
    // fails, one at it holds.
    let at = format!("activation={}", peak_b[4]);
    let below = format!("activation={}", peak_b[4] - 1);
    assert_eq!(
        check_json(&[&real, "--max-peak-category", &at], 0).failed,
        0
    );
    assert_eq!(
        check_json(&[&real, "--max-peak-category", &below], 1).failed,
        1
    );
    let reg = check_json(
        &[
            &copy,
            "--baseline",
            &real,
            "--max-regression",
            "peak_activation=99%",
        ],
        1,
    );
    assert_eq!(
        finding(&reg, "max_regression.peak_activation").measured,
        Some(Value::Relative(1.0))
    );
}

#[test]
fn github_and_junit_outputs_carry_the_category_rules() {
    let gh = run([
        "check",
        "--no-config",
        "--format",
        "github",
        &before(),
        "--max-peak-category",
        "activation=256MiB",
    ])
    .expect_code(1)
    .stdout();
    assert!(
        gh.lines()
            .any(|l| l.starts_with("::error ") && l.contains("max_peak_category.activation")),
        "{gh}"
    );
    let xml = run([
        "check",
        "--no-config",
        "--format",
        "junit",
        &before(),
        "--max-peak-category",
        "activation=256MiB",
        "--max-peak-total",
        "1GiB",
    ])
    .expect_code(1)
    .stdout();
    assert!(
        xml.contains("name=\"max_peak_category.activation\""),
        "{xml}"
    );
    assert!(xml.contains("name=\"max_peak_total\""), "{xml}");
    assert!(
        xml.contains("tests=\"2\"") && xml.contains("failures=\"1\""),
        "{xml}"
    );
}
