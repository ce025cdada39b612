use super::*;
use crate::analysis::metrics::{DeviceMetrics, Source, Timeline};

fn metrics(peak_reserved: u64, frag: f64, gap: u64, ooms: u64) -> Metrics {
    Metrics {
        source: Source::Snapshot,
        devices: vec![DeviceMetrics {
            device: 0,
            timeline: Timeline::FinalStateOnly,
            peak_allocated: Some(peak_reserved / 2),
            peak_reserved: Some(peak_reserved),
            end_allocated: Some(peak_reserved / 4),
            end_reserved: Some(peak_reserved),
            fragmentation: Some(frag),
            largest_gap: Some(gap),
            free_gaps: Some(3),
            internal_waste: Some(1 << 20),
            oom_events: Some(ooms),
            gap_moments: vec![],
        }],
        notes: vec![],
        categories: None,
        trace: None,
    }
}

fn verdict(r: &CheckReport, rule: &str) -> Verdict {
    r.findings.iter().find(|f| f.rule == rule).unwrap().verdict
}

#[test]
fn config_parses_every_rule() {
    let r = Rules::from_toml(
        r#"
[check]
baseline = "base.pickle"
max_fragmentation = "50%"
min_largest_gap = "1GiB"
max_peak_reserved = 1073741824
max_peak_allocated = "36 GiB"
max_internal_waste = "512MiB"
max_oom_events = 2
[check.max_regression]
peak_reserved = "5%"
fragmentation = 0.05
largest_gap = "256MiB"
oom_events = 0
"#,
        "fragscope.toml",
    )
    .unwrap();
    assert_eq!(r.limits[&RuleKind::MaxFragmentation], Quantity::Ratio(0.5));
    assert_eq!(r.limits[&RuleKind::MinLargestGap], Quantity::Bytes(1 << 30));
    assert_eq!(
        r.limits[&RuleKind::MaxPeakReserved],
        Quantity::Bytes(1 << 30)
    );
    assert_eq!(
        r.limits[&RuleKind::MaxPeakAllocated],
        Quantity::Bytes(36 << 30)
    );
    assert_eq!(
        r.limits[&RuleKind::MaxInternalWaste],
        Quantity::Bytes(512 << 20)
    );
    assert_eq!(r.limits[&RuleKind::MaxOomEvents], Quantity::Count(2));
    assert_eq!(
        r.regressions[&MetricId::PeakReserved],
        RegressionLimit::Relative(0.05)
    );
    assert_eq!(
        r.regressions[&MetricId::Fragmentation],
        RegressionLimit::Absolute(Quantity::Ratio(0.05))
    );
    assert_eq!(
        r.regressions[&MetricId::LargestGap],
        RegressionLimit::Absolute(Quantity::Bytes(256 << 20))
    );
    assert_eq!(
        r.regressions[&MetricId::OomEvents],
        RegressionLimit::Absolute(Quantity::Count(0))
    );
    assert_eq!(r.baseline, Some(PathBuf::from("base.pickle")));
}

fn config_err(text: &str) -> String {
    Rules::from_toml(text, "ci/fragscope.toml")
        .unwrap_err()
        .to_string()
}

#[test]
fn config_errors_name_the_key() {
    let e = config_err("[check]\nmax_fragmentaton = 0.5\n");
    assert!(
        e.starts_with("ci/fragscope.toml: check.max_fragmentaton: unknown rule"),
        "{e}"
    );
    let e = config_err("[check]\nmax_peak_reserved = \"40 parsecs\"\n");
    assert!(
        e.starts_with("ci/fragscope.toml: check.max_peak_reserved: malformed size"),
        "{e}"
    );
    let e = config_err("[check]\nmax_fragmentation = 5\n");
    assert!(
        e.contains("check.max_fragmentation: 5 is not a fraction"),
        "{e}"
    );
    let e = config_err("[check.max_regression]\npeak_reservd = \"5%\"\n");
    assert!(
        e.contains("check.max_regression.peak_reservd: unknown metric"),
        "{e}"
    );
    let e = config_err("[check.max_regression]\npeak_reserved = 0.05\n");
    assert!(
        e.contains("check.max_regression.peak_reserved: expected a percentage"),
        "{e}"
    );
    let e = config_err("max_oom_events = 0\n");
    assert!(
        e.contains(": max_oom_events: rules go in a [check] table"),
        "{e}"
    );
    let e = config_err("[chek]\n");
    assert!(e.contains(": chek: unknown section"), "{e}");
    let e = config_err("[check]\nmax_oom_events = -1\n");
    assert!(e.contains("check.max_oom_events: expected a count"), "{e}");
    let e = config_err("[check\n");
    assert!(e.starts_with("ci/fragscope.toml: invalid TOML"), "{e}");
}

#[test]
fn relative_baseline_is_taken_from_the_config_directory() {
    let p = Path::new("ci/fragscope.toml");
    let r = Rules::from_config("[check]\nbaseline = \"base.pickle\"\n", p).unwrap();
    assert_eq!(r.baseline, Some(PathBuf::from("ci/base.pickle")));
    let r = Rules::from_config("[check]\nbaseline = \"/runs/base.pickle\"\n", p).unwrap();
    assert_eq!(r.baseline, Some(PathBuf::from("/runs/base.pickle")));
}

#[test]
fn flags_win_over_the_config() {
    let mut r = Rules::defaults();
    r.merge(Rules::from_toml("[check]\nmax_oom_events = 3\nmax_fragmentation = 0.4", "x").unwrap());
    let mut flags = Rules::default();
    flags
        .limits
        .insert(RuleKind::MaxFragmentation, Quantity::Ratio(0.9));
    r.merge(flags);
    assert_eq!(r.limits[&RuleKind::MaxOomEvents], Quantity::Count(3));
    assert_eq!(r.limits[&RuleKind::MaxFragmentation], Quantity::Ratio(0.9));
}

#[test]
fn absolute_rules_pass_and_fail_at_the_boundary() {
    let m = metrics(40 << 30, 0.5, 1 << 30, 0);
    let mut rules = Rules::defaults();
    rules
        .limits
        .insert(RuleKind::MaxPeakReserved, Quantity::Bytes(40 << 30));
    rules
        .limits
        .insert(RuleKind::MaxFragmentation, Quantity::Ratio(0.49));
    rules
        .limits
        .insert(RuleKind::MinLargestGap, Quantity::Bytes(1 << 30));
    let r = evaluate(&Style::default(), "run.pickle", &m, None, &rules);
    assert_eq!(verdict(&r, "max_peak_reserved"), Verdict::Pass);
    assert_eq!(verdict(&r, "min_largest_gap"), Verdict::Pass);
    assert_eq!(verdict(&r, "max_oom_events"), Verdict::Pass);
    assert_eq!(verdict(&r, "max_fragmentation"), Verdict::Fail);
    assert_eq!((r.passed, r.failed, r.skipped), (3, 1, 0));
    assert!(!r.ok());
    let frag = r
        .findings
        .iter()
        .find(|f| f.rule == "max_fragmentation")
        .unwrap();
    assert_eq!(frag.measured, Some(Value::Ratio(0.5)));
    assert_eq!(frag.device, Some(0));
    assert!(frag.hint.contains("expandable_segments"), "{}", frag.hint);
    assert!(
        frag.message.contains("50.0%") && frag.message.contains("49.0%"),
        "{}",
        frag.message
    );
}

#[test]
fn regressions_against_a_baseline() {
    let base = metrics(100 << 20, 0.30, 64 << 20, 0);
    let cur = metrics(105 << 20, 0.36, 32 << 20, 1);
    let mut rules = Rules::default();
    let mut reg = |m, l| rules.regressions.insert(m, l);
    reg(MetricId::PeakReserved, RegressionLimit::Relative(0.05));
    reg(
        MetricId::Fragmentation,
        RegressionLimit::Absolute(Quantity::Ratio(0.05)),
    );
    reg(MetricId::LargestGap, RegressionLimit::Relative(0.25));
    reg(
        MetricId::OomEvents,
        RegressionLimit::Absolute(Quantity::Count(0)),
    );
    reg(MetricId::FreeGaps, RegressionLimit::Relative(0.0));
    let r = evaluate(
        &Style::default(),
        "new.pickle",
        &cur,
        Some(("base.pickle", &base)),
        &rules,
    );
    // Exactly +5 %: holds.
    assert_eq!(verdict(&r, "max_regression.peak_reserved"), Verdict::Pass);
    let f = |rule: &str| r.findings.iter().find(|f| f.rule == rule).unwrap().clone();
    assert!(
        matches!(f("max_regression.peak_reserved").measured, Some(Value::Relative(x)) if (x - 0.05).abs() < 1e-9)
    );
    // +6 points of fragmentation > 5 allowed.
    assert_eq!(verdict(&r, "max_regression.fragmentation"), Verdict::Fail);
    // Largest gap halves: lower is worse, 50 % worse > 25 %.
    let gap = f("max_regression.largest_gap");
    assert_eq!(gap.verdict, Verdict::Fail);
    assert_eq!(gap.measured, Some(Value::Relative(0.5)));
    assert_eq!(gap.baseline_value, Some(Quantity::Bytes(64 << 20)));
    assert_eq!(gap.current_value, Some(Quantity::Bytes(32 << 20)));
    assert!(gap.hint.contains("new baseline"), "{}", gap.hint);
    // 0 → 1 OOM with an absolute limit of 0.
    assert_eq!(verdict(&r, "max_regression.oom_events"), Verdict::Fail);
    // Unchanged: holds with a 0 % limit.
    assert_eq!(verdict(&r, "max_regression.free_gaps"), Verdict::Pass);
    assert_eq!(r.failed, 3);
    // Relative change from a zero baseline: fails without a number.
    let mut rel = Rules::default();
    rel.regressions
        .insert(MetricId::OomEvents, RegressionLimit::Relative(0.5));
    let r = evaluate(
        &Style::default(),
        "new.pickle",
        &cur,
        Some(("base.pickle", &base)),
        &rel,
    );
    assert_eq!(r.findings[0].verdict, Verdict::Fail);
    assert_eq!(r.findings[0].measured, None);
    assert!(r.findings[0].message.contains("up from zero"));
}

#[test]
fn unmeasurable_rules_are_skipped_not_passed() {
    let prof = Metrics::from_totals([(0i64, vec![(10u64, 20u64), (15, 30)], None)]);
    let mut rules = Rules::defaults();
    rules
        .limits
        .insert(RuleKind::MaxFragmentation, Quantity::Ratio(0.5));
    rules
        .limits
        .insert(RuleKind::MaxPeakReserved, Quantity::Bytes(25));
    rules
        .regressions
        .insert(MetricId::PeakReserved, RegressionLimit::Relative(0.1));
    let r = evaluate(&Style::default(), "trace.json", &prof, None, &rules);
    assert_eq!(verdict(&r, "max_fragmentation"), Verdict::Skipped);
    assert_eq!(verdict(&r, "max_oom_events"), Verdict::Skipped);
    assert_eq!(verdict(&r, "max_peak_reserved"), Verdict::Fail);
    assert_eq!(
        verdict(&r, "max_regression.peak_reserved"),
        Verdict::Skipped
    );
    assert!(r.findings[0].hint.contains("profiler trace"));
}

#[test]
fn category_limits_from_the_config_and_flags() {
    let r = Rules::from_toml(
        "[check]\nmax_peak_total = \"3GiB\"\n[check.max_peak_category]\nactivation = \"2GiB\"\noptimizer_state = 1024\n",
        "x",
    )
    .unwrap();
    assert_eq!(r.limits[&RuleKind::MaxPeakTotal], Quantity::Bytes(3 << 30));
    assert_eq!(
        r.category_limits[&Category::Activation],
        Quantity::Bytes(2 << 30)
    );
    assert_eq!(
        r.category_limits[&Category::OptimizerState],
        Quantity::Bytes(1024)
    );
    let e = config_err("[check.max_peak_category]\nactivation = 0.5\n");
    assert!(
        e.contains("check.max_peak_category.activation: expected a size"),
        "{e}"
    );
    let e = config_err("[check]\nmax_peak_category = \"1GiB\"\n");
    assert!(
        e.contains("check.max_peak_category: expected a table"),
        "{e}"
    );
    let e = config_err("[max_peak_category]\n");
    assert!(e.contains("rules go in a [check] table"), "{e}");
    assert_eq!(
        parse_category_limit_flag("gradient=512MiB").unwrap(),
        (Category::Gradient, Quantity::Bytes(512 << 20))
    );
    assert!(
        parse_category_limit_flag("grads=1GiB")
            .unwrap_err()
            .contains("unknown category")
    );
}

#[test]
fn category_rules_on_an_export() {
    let t = crate::input::profiler::memtimeline::timeline_from_json(
        &serde_json::json!([[-1, 1, 100, 0], [1000, 2, 300, 4], [2000, 4, -300, 4]]),
        "x",
    )
    .unwrap();
    let m = Metrics::of_memory_timeline(&t);
    let mut rules = Rules::default();
    rules
        .limits
        .insert(RuleKind::MaxPeakTotal, Quantity::Bytes(400));
    rules
        .category_limits
        .insert(Category::Activation, Quantity::Bytes(299));
    rules
        .limits
        .insert(RuleKind::MaxPeakReserved, Quantity::Bytes(1));
    let r = evaluate(&Style::default(), "t.json", &m, None, &rules);
    assert_eq!(verdict(&r, "max_peak_total"), Verdict::Pass);
    assert_eq!(verdict(&r, "max_peak_category.activation"), Verdict::Fail);
    assert_eq!(verdict(&r, "max_peak_reserved"), Verdict::Skipped);
    assert_eq!(r.metrics.len(), MetricId::CATEGORIES.len());
    assert!(!r.metrics.contains_key(&MetricId::PeakReserved));
}

#[test]
fn skip_reasons_follow_the_trace_schema() {
    let modern = TraceFacts::default();
    let old = TraceFacts {
        bytes_only: true,
        ..TraceFacts::default()
    };
    for m in MetricId::ALL {
        assert!(!trace_lacks(m, modern).contains("2021"), "{m:?}");
    }
    assert!(trace_lacks(MetricId::OomEvents, old).contains("2021"));
    assert!(trace_lacks(MetricId::PeakReserved, old).contains("2021"));
    // Only CPU memory: one reason for every metric, the note says the rest.
    let mut cpu = Metrics::from_totals(std::iter::empty::<(i64, Vec<(u64, u64)>, Option<u64>)>());
    cpu.trace = Some(TraceFacts {
        cpu_only: true,
        bytes_only: false,
    });
    let r = evaluate(
        &Style::default(),
        "cpu.json",
        &cpu,
        None,
        &Rules::defaults(),
    );
    assert_eq!(r.findings[0].verdict, Verdict::Skipped);
    assert_eq!(
        r.findings[0].message,
        "OOM events is not measurable: the profiler trace holds no GPU memory events"
    );
    assert_eq!(r.findings[0].hint, "");
}

#[test]
fn flag_syntax() {
    assert_eq!(
        parse_regression_flag("peak_reserved=5%").unwrap(),
        (MetricId::PeakReserved, RegressionLimit::Relative(0.05))
    );
    assert_eq!(
        parse_regression_flag("end_reserved=1GiB").unwrap(),
        (
            MetricId::EndReserved,
            RegressionLimit::Absolute(Quantity::Bytes(1 << 30))
        )
    );
    assert!(
        parse_regression_flag("peak=5%")
            .unwrap_err()
            .contains("unknown metric")
    );
    assert!(parse_regression_flag("peak_reserved").is_err());
    assert_eq!(
        parse_limit(RuleKind::MaxFragmentation, "0.25").unwrap(),
        Quantity::Ratio(0.25)
    );
    assert!(parse_limit(RuleKind::MaxFragmentation, "150%").is_err());
    assert_eq!(
        parse_limit(RuleKind::MaxPeakReserved, "80GiB").unwrap(),
        Quantity::Bytes(80 << 30)
    );
}
