//! The CI gate: rules with thresholds, read from command-line flags and a
//! `fragscope.toml`, evaluated against [`Metrics`] into one list of
//! [`Finding`]s that every output format renders.
//!
//! Owns: the rule names and their config syntax, config validation (every
//! error names the file and the key), the pass/fail arithmetic and the hints.
//! Must not compute metrics (that is [`crate::analysis::metrics`]), read snapshots, or
//! format output (that is `render::check`).
//!
//! Config file:
//!
//! ```toml
//! [check]
//! baseline = "ci/baseline.pickle"   # relative to this file
//! max_fragmentation = 0.5           # or "50%"
//! min_largest_gap = "1GiB"
//! max_peak_reserved = "40GiB"       # or a byte count
//! max_peak_allocated = "36GiB"
//! max_internal_waste = "512MiB"
//! max_oom_events = 0                # the default
//! max_peak_total = "3GiB"           # memory-timeline exports
//!
//! [check.max_peak_category]         # memory-timeline exports, per category
//! activation = "2GiB"
//! optimizer_state = "512MiB"
//!
//! [check.max_regression]            # against the baseline
//! peak_reserved = "5%"              # relative
//! fragmentation = 0.05              # absolute, in the metric's unit
//! largest_gap = "256MiB"
//! peak_activation = "10%"
//! ```

use crate::analysis::metrics::{Measured, MetricId, Metrics, Quantity, TraceFacts, Unit};
use crate::core::style::Style;
use crate::core::units::{fmt_pct, parse_size};
use crate::input::profiler::memtimeline::Category;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version of the JSON that `check --format json` prints.
pub const CHECK_SCHEMA: &str = "fragscope.check/1";
/// Read from the current directory when `--config` is not given.
pub const CONFIG_FILE: &str = "fragscope.toml";

/// An absolute rule: a bound on one metric of the checked file.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    MaxFragmentation,
    MinLargestGap,
    MaxPeakReserved,
    MaxPeakAllocated,
    MaxInternalWaste,
    MaxOomEvents,
    /// Memory-timeline exports: the peak of all categories together.
    MaxPeakTotal,
}

/// The table of per-category limits (`[check.max_peak_category]`,
/// `--max-peak-category CATEGORY=SIZE`), for memory-timeline exports.
pub const CATEGORY_RULES: &str = "max_peak_category";

impl RuleKind {
    pub const ALL: [RuleKind; 7] = [
        RuleKind::MaxFragmentation,
        RuleKind::MinLargestGap,
        RuleKind::MaxPeakReserved,
        RuleKind::MaxPeakAllocated,
        RuleKind::MaxInternalWaste,
        RuleKind::MaxOomEvents,
        RuleKind::MaxPeakTotal,
    ];
    pub fn key(self) -> &'static str {
        match self {
            RuleKind::MaxFragmentation => "max_fragmentation",
            RuleKind::MinLargestGap => "min_largest_gap",
            RuleKind::MaxPeakReserved => "max_peak_reserved",
            RuleKind::MaxPeakAllocated => "max_peak_allocated",
            RuleKind::MaxInternalWaste => "max_internal_waste",
            RuleKind::MaxOomEvents => "max_oom_events",
            RuleKind::MaxPeakTotal => "max_peak_total",
        }
    }
    pub fn parse(s: &str) -> Option<RuleKind> {
        RuleKind::ALL.into_iter().find(|r| r.key() == s)
    }
    pub fn metric(self) -> MetricId {
        match self {
            RuleKind::MaxFragmentation => MetricId::Fragmentation,
            RuleKind::MinLargestGap => MetricId::LargestGap,
            RuleKind::MaxPeakReserved => MetricId::PeakReserved,
            RuleKind::MaxPeakAllocated => MetricId::PeakAllocated,
            RuleKind::MaxInternalWaste => MetricId::InternalWaste,
            RuleKind::MaxOomEvents => MetricId::OomEvents,
            RuleKind::MaxPeakTotal => MetricId::PeakTotal,
        }
    }
    /// `min_*` rules fail below the threshold, `max_*` rules above it.
    pub fn is_min(self) -> bool {
        self == RuleKind::MinLargestGap
    }
}

/// How much worse than the baseline a metric may get.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum RegressionLimit {
    /// A fraction of the baseline's value: 0.05 for `"5%"`.
    Relative(f64),
    /// An amount in the metric's own unit.
    Absolute(Quantity),
}

impl RegressionLimit {
    pub fn fmt(self, st: &Style) -> String {
        match self {
            RegressionLimit::Relative(r) => format!("+{}", fmt_pct(r)),
            RegressionLimit::Absolute(q) => format!("+{}", q.fmt(st)),
        }
    }
}

/// Validated rules. Flags and config files each produce one; [`Rules::merge`]
/// lets flags win.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    pub limits: BTreeMap<RuleKind, Quantity>,
    /// Highest acceptable peak per memory-profiler category.
    pub category_limits: BTreeMap<Category, Quantity>,
    pub regressions: BTreeMap<MetricId, RegressionLimit>,
    /// Resolved against the config file's directory when read from one.
    pub baseline: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read the config file: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid TOML: {msg}")]
    Syntax { path: String, msg: String },
    #[error("{path}: {key}: {msg}")]
    Key {
        path: String,
        key: String,
        msg: String,
    },
}

impl Rules {
    /// What holds with no config and no flags: no OOM event.
    pub fn defaults() -> Rules {
        let mut r = Rules::default();
        r.limits.insert(RuleKind::MaxOomEvents, Quantity::Count(0));
        r
    }

    /// Entries of `over` replace those of `self`.
    pub fn merge(&mut self, over: Rules) {
        self.limits.extend(over.limits);
        self.category_limits.extend(over.category_limits);
        self.regressions.extend(over.regressions);
        if over.baseline.is_some() {
            self.baseline = over.baseline;
        }
    }

    /// Reads a config file; a relative `baseline` is taken from its directory.
    pub fn load(path: &Path) -> Result<Rules, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            path: shown.clone(),
            source: e,
        })?;
        let mut r = Rules::from_toml(&text, &shown)?;
        if let Some(b) = &r.baseline
            && b.is_relative()
        {
            let dir = path.parent().unwrap_or(Path::new(""));
            r.baseline = Some(dir.join(b));
        }
        Ok(r)
    }

    /// Parses config text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Rules, ConfigError> {
        // Keys and the parser's excerpt of the line come from the file:
        // escaped, so that an error stays one line.
        let key_err = |key: &str, msg: String| ConfigError::Key {
            path: origin.to_string(),
            key: crate::core::text::one_line(key),
            msg,
        };
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Syntax {
                path: origin.to_string(),
                msg: crate::core::text::one_line(&e.to_string().trim_end().replace('\n', " ")),
            })?;
        let mut r = Rules::default();
        for (k, v) in &doc {
            if k != "check" {
                let msg = if RuleKind::parse(k).is_some()
                    || k == "max_regression"
                    || k == CATEGORY_RULES
                    || k == "baseline"
                {
                    "rules go in a [check] table".to_string()
                } else {
                    "unknown section; this file holds a [check] table".to_string()
                };
                return Err(key_err(k, msg));
            }
            let toml::Value::Table(t) = v else {
                return Err(key_err(k, "expected a table ([check])".into()));
            };
            for (k, v) in t {
                let key = format!("check.{k}");
                if k == "baseline" {
                    let toml::Value::String(s) = v else {
                        return Err(key_err(&key, format!("expected a path, found {}", kind(v))));
                    };
                    r.baseline = Some(PathBuf::from(s));
                } else if k == "max_regression" {
                    let toml::Value::Table(regs) = v else {
                        return Err(key_err(
                            &key,
                            "expected a table of metric = limit ([check.max_regression])".into(),
                        ));
                    };
                    for (mk, mv) in regs {
                        let key = format!("check.max_regression.{mk}");
                        let metric = MetricId::parse(mk).ok_or_else(|| {
                            key_err(&key, format!("unknown metric; known: {}", metric_keys()))
                        })?;
                        let lim = regression_from_toml(metric, mv).map_err(|m| key_err(&key, m))?;
                        r.regressions.insert(metric, lim);
                    }
                } else if k == CATEGORY_RULES {
                    let toml::Value::Table(cats) = v else {
                        return Err(key_err(
                            &key,
                            format!(
                                "expected a table of category = size ([check.{CATEGORY_RULES}])"
                            ),
                        ));
                    };
                    for (ck, cv) in cats {
                        let key = format!("check.{CATEGORY_RULES}.{ck}");
                        let c = Category::parse(ck).ok_or_else(|| {
                            key_err(
                                &key,
                                format!("unknown category; known: {}", category_keys()),
                            )
                        })?;
                        let q = limit_from_toml(RuleKind::MaxPeakTotal, cv)
                            .map_err(|m| key_err(&key, m))?;
                        r.category_limits.insert(c, q);
                    }
                } else if let Some(rule) = RuleKind::parse(k) {
                    let q = limit_from_toml(rule, v).map_err(|m| key_err(&key, m))?;
                    r.limits.insert(rule, q);
                } else {
                    return Err(key_err(
                        &key,
                        format!(
                            "unknown rule; known: {}, {CATEGORY_RULES}, max_regression, baseline",
                            RuleKind::ALL.map(|r| r.key()).join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(r)
    }
}

fn metric_keys() -> String {
    MetricId::ALL.map(|m| m.key()).join(", ")
}

fn category_keys() -> String {
    Category::ALL.map(|c| c.key()).join(", ")
}

/// `--max-peak-category CATEGORY=SIZE`.
pub fn parse_category_limit_flag(s: &str) -> Result<(Category, Quantity), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected CATEGORY=SIZE (e.g. activation=2GiB), found {s:?}"))?;
    let c = Category::parse(k.trim())
        .ok_or_else(|| format!("unknown category {k:?}; known: {}", category_keys()))?;
    Ok((c, parse_limit(RuleKind::MaxPeakTotal, v)?))
}

fn kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

fn limit_from_toml(rule: RuleKind, v: &toml::Value) -> Result<Quantity, String> {
    match (rule.metric().unit(), v) {
        (_, toml::Value::String(s)) => parse_limit(rule, s),
        (Unit::Ratio, toml::Value::Float(f)) => ratio(*f),
        (Unit::Ratio, toml::Value::Integer(i)) => ratio(*i as f64),
        (Unit::Bytes, toml::Value::Integer(i)) if *i >= 0 => Ok(Quantity::Bytes(*i as u64)),
        (Unit::Count, toml::Value::Integer(i)) if *i >= 0 => Ok(Quantity::Count(*i as u64)),
        (u, v) => Err(format!("expected {}, found {}", expected(u), kind(v))),
    }
}

fn expected(u: Unit) -> &'static str {
    match u {
        Unit::Bytes => "a size such as \"40GiB\", \"512MiB\" or a byte count",
        Unit::Ratio => "a fraction between 0 and 1 (0.5) or a percentage (\"50%\")",
        Unit::Count => "a count (a non-negative integer)",
    }
}

fn ratio(f: f64) -> Result<Quantity, String> {
    if (0.0..=1.0).contains(&f) {
        Ok(Quantity::Ratio(f))
    } else {
        Err(format!(
            "{f} is not a fraction between 0 and 1 (write 0.5 or \"50%\")"
        ))
    }
}

fn percent(s: &str) -> Option<Result<f64, String>> {
    let n = s.trim().strip_suffix('%')?;
    Some(match n.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v / 100.0),
        _ => Err(format!("malformed percentage {s:?}")),
    })
}

/// The threshold of a rule written as text (a flag, or a TOML string).
pub fn parse_limit(rule: RuleKind, s: &str) -> Result<Quantity, String> {
    match rule.metric().unit() {
        Unit::Ratio => match percent(s) {
            Some(p) => ratio(p?),
            None => ratio(
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("expected {}, found {s:?}", expected(Unit::Ratio)))?,
            ),
        },
        Unit::Bytes => parse_size(s).map(Quantity::Bytes),
        Unit::Count => s
            .trim()
            .parse::<u64>()
            .map(Quantity::Count)
            .map_err(|_| format!("expected {}, found {s:?}", expected(Unit::Count))),
    }
}

/// A regression limit written as text: `"5%"` (relative) or an amount in
/// the metric's unit (`"512MiB"`, `0.05`, `2`).
pub fn parse_regression(metric: MetricId, s: &str) -> Result<RegressionLimit, String> {
    if let Some(p) = percent(s) {
        return p.map(RegressionLimit::Relative);
    }
    let bad = || {
        format!(
            "expected a percentage (\"5%\") or {}, found {s:?}",
            expected(metric.unit())
        )
    };
    Ok(RegressionLimit::Absolute(match metric.unit() {
        Unit::Bytes => Quantity::Bytes(parse_size(s).map_err(|e| format!("{e}; {}", bad()))?),
        Unit::Ratio => match s.trim().parse::<f64>() {
            Ok(f) if (0.0..=1.0).contains(&f) => Quantity::Ratio(f),
            _ => return Err(bad()),
        },
        Unit::Count => Quantity::Count(s.trim().parse().map_err(|_| bad())?),
    }))
}

fn regression_from_toml(metric: MetricId, v: &toml::Value) -> Result<RegressionLimit, String> {
    match v {
        toml::Value::String(s) => parse_regression(metric, s),
        toml::Value::Integer(i) if *i >= 0 => parse_regression(metric, &i.to_string()),
        toml::Value::Float(f) if metric.unit() == Unit::Ratio => {
            parse_regression(metric, &f.to_string())
        }
        v => Err(format!(
            "expected a percentage (\"5%\") or {}, found {}",
            expected(metric.unit()),
            kind(v)
        )),
    }
}

/// `--max-regression METRIC=LIMIT`.
pub fn parse_regression_flag(s: &str) -> Result<(MetricId, RegressionLimit), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected METRIC=LIMIT (e.g. peak_reserved=5%), found {s:?}"))?;
    let metric = MetricId::parse(k.trim())
        .ok_or_else(|| format!("unknown metric {k:?}; known: {}", metric_keys()))?;
    Ok((metric, parse_regression(metric, v)?))
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// The metric is not measurable from this input, or there is no baseline.
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::Skipped => "skipped",
        }
    }
}

/// A measured value or threshold.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Bytes(u64),
    Ratio(f64),
    Count(u64),
    /// How much worse than the baseline, as a fraction of it (0.05 = 5 %
    /// worse; negative = better).
    Relative(f64),
    /// How much worse than the baseline, in bytes (negative = better).
    BytesDelta(i64),
    RatioDelta(f64),
    CountDelta(i64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Bytes(b) | Value::Count(b) => b as f64,
            Value::Ratio(r) | Value::Relative(r) | Value::RatioDelta(r) => r,
            Value::BytesDelta(d) | Value::CountDelta(d) => d as f64,
        }
    }
    pub fn fmt(self, st: &Style) -> String {
        let signed = |d: f64, s: String| if d > 0.0 { format!("+{s}") } else { s };
        match self {
            Value::Bytes(b) => st.bytes(b),
            Value::Ratio(r) => fmt_pct(r),
            Value::Count(c) => c.to_string(),
            Value::Relative(r) if crate::core::units::pct_rounds_to_zero(r) => "±0%".into(),
            Value::Relative(r) => signed(r, fmt_pct(r)),
            Value::BytesDelta(d) => st.delta(d as i128),
            Value::RatioDelta(r) if crate::core::units::pct_rounds_to_zero(r) => "±0 pt".into(),
            Value::RatioDelta(r) => signed(r, format!("{:.1} pt", r * 100.0)),
            Value::CountDelta(d) => signed(d as f64, d.to_string()),
        }
    }
    /// Whether [`Value::fmt`] prints this change as zero (`0.0 pt`, `0.0%`).
    pub fn rounds_to_zero(self) -> bool {
        match self {
            Value::Relative(r) | Value::RatioDelta(r) => crate::core::units::pct_rounds_to_zero(r),
            Value::BytesDelta(d) | Value::CountDelta(d) => d == 0,
            Value::Bytes(_) | Value::Ratio(_) | Value::Count(_) => false,
        }
    }
    /// A change too small for [`Value::fmt`], with three more decimals.
    fn fmt_precise(self, st: &Style) -> String {
        let signed = |d: f64, s: String| if d > 0.0 { format!("+{s}") } else { s };
        match self {
            Value::Relative(r) => signed(r, format!("{:.4}%", r * 100.0)),
            Value::RatioDelta(r) => signed(r, format!("{:.4} pt", r * 100.0)),
            other => other.fmt(st),
        }
    }
    fn of(q: Quantity) -> Value {
        match q {
            Quantity::Bytes(b) => Value::Bytes(b),
            Quantity::Ratio(r) => Value::Ratio(r),
            Quantity::Count(c) => Value::Count(c),
        }
    }
    fn delta(unit: Unit, d: f64) -> Value {
        match unit {
            Unit::Bytes => Value::BytesDelta(d as i64),
            Unit::Ratio => Value::RatioDelta(d),
            Unit::Count => Value::CountDelta(d as i64),
        }
    }
}

/// One rule applied to one file: the data every output renders.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Finding {
    /// The config key: `max_peak_reserved`, `max_regression.peak_reserved`.
    pub rule: String,
    pub metric: MetricId,
    /// The device the figure comes from (`None`: summed, or none).
    pub device: Option<i64>,
    /// `None` when not measurable (verdict `skipped`), or when a relative
    /// change from a zero baseline is undefined.
    pub measured: Option<Value>,
    pub threshold: Value,
    /// Regression rules: the metric in the baseline and in the checked file.
    pub baseline_value: Option<Quantity>,
    pub current_value: Option<Quantity>,
    pub verdict: Verdict,
    /// One line saying what was compared with what.
    pub message: String,
    /// What to try (empty when the rule holds).
    pub hint: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CheckReport {
    pub schema: String,
    pub file: String,
    pub baseline: Option<String>,
    pub findings: Vec<Finding>,
    /// Every metric measurable from the checked file, to calibrate limits.
    pub metrics: BTreeMap<MetricId, Measured>,
    /// What the figures rest on (replay anomalies, unused baseline, …).
    pub notes: Vec<String>,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

/// Applies every rule; absolute rules first (in [`RuleKind::ALL`] order),
/// then regressions (in [`MetricId::ALL`] order).
pub fn evaluate(
    st: &Style,
    file: &str,
    current: &Metrics,
    baseline: Option<(&str, &Metrics)>,
    rules: &Rules,
) -> CheckReport {
    let mut findings = Vec::new();
    for (&rule, &limit) in &rules.limits {
        findings.push(absolute(st, rule, limit, current));
    }
    for (&c, &limit) in &rules.category_limits {
        findings.push(absolute_on(
            st,
            format!("{CATEGORY_RULES}.{}", c.key()),
            MetricId::peak_of(c),
            false,
            limit,
            current,
        ));
    }
    for (&metric, &limit) in &rules.regressions {
        findings.push(regression(st, metric, limit, current, baseline));
    }
    let mut notes: Vec<String> = current.notes.clone();
    if findings.is_empty() {
        notes.push(if current.source == crate::analysis::metrics::Source::MemoryTimeline {
            format!(
                "no rule is set, so nothing is gated: a memory-timeline export is checked with {}, {CATEGORY_RULES}.CATEGORY or max_regression.peak_* (docs/ci.md)",
                RuleKind::MaxPeakTotal.key()
            )
        } else {
            "no rule is set, so nothing is gated".into()
        });
    }
    if let Some((name, b)) = baseline {
        notes.extend(b.notes.iter().map(|n| format!("baseline {name}: {n}")));
        if rules.regressions.is_empty() {
            notes.push(
                "a baseline was given but no max_regression rule is set, so it gates nothing"
                    .into(),
            );
        }
    }
    let count = |v| {
        findings
            .iter()
            .filter(|f: &&Finding| f.verdict == v)
            .count()
    };
    CheckReport {
        schema: CHECK_SCHEMA.into(),
        file: file.into(),
        baseline: baseline.map(|b| b.0.to_string()),
        passed: count(Verdict::Pass),
        failed: count(Verdict::Fail),
        skipped: count(Verdict::Skipped),
        findings,
        metrics: MetricId::ALL
            .into_iter()
            .filter_map(|m| current.get(m).map(|v| (m, v)))
            .collect(),
        notes,
    }
}

fn on_device(d: Option<i64>) -> String {
    d.map(|d| format!(" on device {d}")).unwrap_or_default()
}

fn absolute(st: &Style, rule: RuleKind, limit: Quantity, m: &Metrics) -> Finding {
    absolute_on(
        st,
        rule.key().into(),
        rule.metric(),
        rule.is_min(),
        limit,
        m,
    )
}

/// A bound on one metric, under the rule named `rule` (`min`: fails below
/// the limit, else above it).
fn absolute_on(
    st: &Style,
    rule: String,
    metric: MetricId,
    min: bool,
    limit: Quantity,
    m: &Metrics,
) -> Finding {
    let mut f = Finding {
        rule,
        metric,
        device: None,
        measured: None,
        threshold: Value::of(limit),
        baseline_value: None,
        current_value: None,
        verdict: Verdict::Skipped,
        message: String::new(),
        hint: String::new(),
    };
    let Some(got) = m.get(metric) else {
        f.message = not_measurable(metric, m);
        f.hint = unmeasurable_hint(metric, m);
        return f;
    };
    if f.rule == RuleKind::MinLargestGap.key() {
        return min_largest_gap(st, f, limit, m);
    }
    f.device = got.device;
    f.measured = Some(Value::of(got.value));
    let (v, t) = (got.value.as_f64(), limit.as_f64());
    let fails = if min { v < t } else { v > t };
    let relation = match (min, fails) {
        (false, true) => "exceeds the limit of",
        (false, false) => "is within the limit of",
        (true, true) => "is below the minimum of",
        (true, false) => "meets the minimum of",
    };
    f.message = format!(
        "{} {}{}{} {relation} {}",
        metric.label(),
        got.value.fmt(st),
        on_device(got.device),
        recorded_only(metric, m, got.device),
        limit.fmt(st)
    );
    if fails {
        f.verdict = Verdict::Fail;
        f.hint = fail_hint(st, metric, m, got.device);
    } else {
        f.verdict = Verdict::Pass;
    }
    f
}

/// `min_largest_gap` fails only on the fragmentation signature: a moment
/// under pressure with at least the minimum free in reserved memory but no
/// single free block that large. A moment with less free than that (a full
/// cache among them) could not serve the request from the cache however its
/// free bytes lay: that is a matter of capacity, which the peak rules gate.
/// The figure shown is the smallest largest gap among the moments that had
/// the minimum free, on the worst device.
fn min_largest_gap(st: &Style, mut f: Finding, limit: Quantity, m: &Metrics) -> Finding {
    let n = limit.as_f64() as u64;
    let measured = || m.devices.iter().filter(|d| d.largest_gap.is_some());
    // Devices ascend; the first of equal gaps wins.
    let tightest = measured()
        .filter_map(|d| d.tightest_with_free(n).map(|g| (d.device, g)))
        .min_by_key(|(_, g)| g.largest_gap);
    let Some((d, g)) = tightest else {
        // No moment had that much free: nothing was refused for want of one gap.
        let most = measured()
            .filter_map(|d| d.most_free_under_pressure().map(|b| (d.device, b)))
            .fold(None, |best: Option<(i64, u64)>, x| match best {
                Some(b) if b.1 >= x.1 => Some(b),
                _ => Some(x),
            });
        f.device = most.map(|x| x.0);
        f.verdict = Verdict::Pass;
        f.message = format!(
            "no moment under pressure had {} of reserved memory free (at most {}{}), so no gap of that size was missing: meets the minimum of {}",
            limit.fmt(st),
            st.bytes(most.map_or(0, |x| x.1)),
            on_device(f.device),
            limit.fmt(st)
        );
        return f;
    };
    f.device = Some(d);
    f.measured = Some(Value::Bytes(g.largest_gap));
    if g.largest_gap < n {
        f.verdict = Verdict::Fail;
        f.message = format!(
            "largest free gap {} on device {d} is below the minimum of {} {}, with {} of reserved memory free",
            st.bytes(g.largest_gap),
            limit.fmt(st),
            g.at.text(),
            st.bytes(g.free)
        );
        f.hint = format!(
            "{} of reserved memory sat free {} but in gaps of at most {}: a request of {} needs a new \
cudaMalloc (an OOM when the device is full) although the cache holds enough. That is \
fragmentation: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which grows a segment instead \
of leaving gaps between segments, and avoid keeping long-lived tensors allocated between \
short-lived ones.",
            st.bytes(g.free),
            g.at.text(),
            st.bytes(g.largest_gap),
            limit.fmt(st)
        );
    } else {
        f.verdict = Verdict::Pass;
        f.message = format!(
            "largest free gap at least {} on device {d} whenever {} or more of reserved memory were free under pressure: meets the minimum of {}",
            st.bytes(g.largest_gap),
            limit.fmt(st),
            limit.fmt(st)
        );
    }
    f
}

/// Relative comparisons tolerate float noise: `105 / 100 − 1` is a hair
/// above 0.05 and must not fail a 5 % rule.
const REL_EPS: f64 = 1e-9;

fn regression(
    st: &Style,
    metric: MetricId,
    limit: RegressionLimit,
    cur: &Metrics,
    baseline: Option<(&str, &Metrics)>,
) -> Finding {
    let mut f = Finding {
        rule: format!("max_regression.{}", metric.key()),
        metric,
        device: None,
        measured: None,
        threshold: match limit {
            RegressionLimit::Relative(r) => Value::Relative(r),
            RegressionLimit::Absolute(q) => Value::delta(metric.unit(), q.as_f64()),
        },
        baseline_value: None,
        current_value: None,
        verdict: Verdict::Skipped,
        message: String::new(),
        hint: String::new(),
    };
    let Some((bname, base)) = baseline else {
        f.message = format!(
            "{}: no baseline to compare with ({} allowed)",
            metric.label(),
            limit.fmt(st)
        );
        f.hint = "give one with --baseline FILE or `baseline = \"...\"` in [check]".into();
        return f;
    };
    let (b, c) = (base.get(metric), cur.get(metric));
    f.baseline_value = b.map(|x| x.value);
    f.current_value = c.map(|x| x.value);
    let (Some(b), Some(c)) = (b, c) else {
        f.message = match (b.is_none(), base.source) {
            (true, _) if no_gpu(base) => format!(
                "{} is not measurable for the baseline: {}",
                metric.label(),
                NO_GPU_EVENTS
            ),
            (true, crate::analysis::metrics::Source::ProfilerTrace) => format!(
                "{} is not measurable for the baseline, a profiler trace",
                metric.label()
            ),
            (true, _) => format!("{} is not measurable from the baseline", metric.label()),
            (false, _) => not_measurable(metric, cur),
        };
        f.hint = unmeasurable_hint(metric, if b.is_none() { base } else { cur });
        return f;
    };
    f.device = c.device;
    let (bv, cv) = (b.value.as_f64(), c.value.as_f64());
    let worse = if metric.lower_is_worse() {
        bv - cv
    } else {
        cv - bv
    };
    let fails = match limit {
        RegressionLimit::Relative(r) => {
            if bv == 0.0 {
                if worse > 0.0 {
                    true
                } else {
                    f.measured = Some(Value::Relative(0.0));
                    false
                }
            } else {
                let rel = worse / bv;
                f.measured = Some(Value::Relative(rel));
                rel > r + REL_EPS * r.max(1.0)
            }
        }
        RegressionLimit::Absolute(q) => {
            f.measured = Some(Value::delta(metric.unit(), worse));
            worse > q.as_f64() + REL_EPS * q.as_f64().max(1.0)
        }
    };
    let change = match f.measured {
        // A change that prints as zero is no change, unless it is what
        // fails the rule (a zero allowance): then it gets the digits.
        Some(m) if m.rounds_to_zero() && !fails => "unchanged".into(),
        Some(m) if m.rounds_to_zero() => format!("{} worse", m.fmt_precise(st)),
        Some(m) => format!("{} worse", m.fmt(st)),
        None => "up from zero".into(),
    };
    let oom = metric == MetricId::OomEvents;
    let qualifier = match (
        untraced_figure(metric, base, b.device),
        untraced_figure(metric, cur, c.device),
    ) {
        (false, false) => "",
        (true, true) if oom => "; neither has a trace, so no out-of-memory event could be recorded",
        (true, true) => "; both figures are of the recorded state (no trace)",
        (false, true) if oom => "; it has no trace, so none could be recorded",
        (false, true) => "; the figure is of its recorded state (no trace)",
        (true, false) if oom => "; the baseline has no trace, so none could be recorded in it",
        (true, false) => "; the baseline's figure is of its recorded state (no trace)",
    };
    let (bs, cs) = match (b.value, c.value) {
        (Quantity::Bytes(x), Quantity::Bytes(y)) => st.bytes_pair(x, y),
        (x, y) => (x.fmt(st), y.fmt(st)),
    };
    f.message = format!(
        "{} {bs} → {cs}{} ({change}; {} allowed) against {bname}{qualifier}",
        metric.label(),
        on_device(c.device),
        limit.fmt(st),
    );
    if fails {
        f.verdict = Verdict::Fail;
        f.hint = format!(
            "{} If the change is intended, record a new baseline (docs/ci.md).",
            fail_hint(st, metric, cur, c.device)
        );
    } else {
        f.verdict = Verdict::Pass;
    }
    f
}

/// Why a metric does not apply to this kind of input: the allocator's
/// figures to a memory-timeline export, the category peaks to the rest.
fn other_kind_hint(metric: MetricId, m: &Metrics) -> Option<String> {
    if metric.applies_to(m.source) {
        return None;
    }
    Some(
        if m.source == crate::analysis::metrics::Source::MemoryTimeline {
            format!(
                "a memory-timeline export records live tensor bytes by category, not the allocator's state; gate {} or {CATEGORY_RULES}.CATEGORY on it, or record a memory snapshot or profiler trace to measure {}",
                RuleKind::MaxPeakTotal.key(),
                metric.key()
            )
        } else {
            format!(
                "{} is a memory-profiler category figure, which only a memory-timeline export records: torch.profiler's export_memory_timeline(\"x.raw.json.gz\")",
                metric.key()
            )
        },
    )
}

/// Said after a figure of a device without trace events: only its recorded
/// state is known (the metrics' note says so once, with what to record).
/// End figures are that state by definition and need no word.
fn recorded_only(metric: MetricId, m: &Metrics, device: Option<i64>) -> &'static str {
    if !untraced_figure(metric, m, device) {
        return "";
    }
    match metric {
        MetricId::OomEvents => " (no trace, so none could be recorded)",
        _ => " (of the recorded state: no trace)",
    }
}

/// A figure of a snapshot's device (or, summed, devices) without trace
/// events, other than an end figure.
fn untraced_figure(metric: MetricId, m: &Metrics, device: Option<i64>) -> bool {
    let untraced = |d: &crate::analysis::metrics::DeviceMetrics| {
        d.timeline == crate::analysis::metrics::Timeline::FinalStateOnly
    };
    let from_untraced = match device {
        Some(x) => m.devices.iter().any(|d| d.device == x && untraced(d)),
        None => !m.devices.is_empty() && m.devices.iter().all(untraced),
    };
    from_untraced
        && m.source == crate::analysis::metrics::Source::Snapshot
        && !matches!(metric, MetricId::EndAllocated | MetricId::EndReserved)
}

/// Why a skipped rule's metric is missing: a profiler trace without GPU
/// memory events gives none at all.
const NO_GPU_EVENTS: &str = "the profiler trace holds no GPU memory events";

/// A profiler trace whose `[memory]` events are all CPU memory (the note of
/// its [`Metrics`] says so, with what to record instead).
fn no_gpu(m: &Metrics) -> bool {
    m.trace.is_some_and(|t| t.cpu_only)
}

/// The message of a rule skipped because its metric is not measurable.
fn not_measurable(metric: MetricId, m: &Metrics) -> String {
    if no_gpu(m) {
        return format!("{} is not measurable: {NO_GPU_EVENTS}", metric.label());
    }
    match m.source {
        crate::analysis::metrics::Source::ProfilerTrace => {
            format!("{} is not measurable for a profiler trace", metric.label())
        }
        crate::analysis::metrics::Source::MemoryTimeline => {
            format!(
                "{} is not measurable for a memory-timeline export",
                metric.label()
            )
        }
        crate::analysis::metrics::Source::Snapshot => {
            format!("{} is not measurable from this input", metric.label())
        }
    }
}

/// What a profiler trace lacks for a metric, true to the schema it was
/// recorded with (only the 2021 schema lacks totals and OOM events).
fn trace_lacks(metric: MetricId, t: TraceFacts) -> &'static str {
    match metric {
        MetricId::Fragmentation | MetricId::LargestGap | MetricId::FreeGaps => {
            "a profiler trace has no segment layout, so no free gaps to measure"
        }
        MetricId::InternalWaste => {
            "a profiler trace records rounded block sizes only, not the requested sizes rounding waste needs"
        }
        MetricId::PeakReserved | MetricId::EndReserved if t.bytes_only => {
            "this profiler trace does not record Total Reserved (2021 schema, only Bytes)"
        }
        MetricId::PeakReserved | MetricId::EndReserved => {
            "this profiler trace lacks Total Reserved on some memory events of the device, or holds none for it"
        }
        MetricId::OomEvents if t.bytes_only => {
            "this profiler trace's schema (2021, only Bytes) records no out-of-memory events"
        }
        MetricId::OomEvents => "this input does not count out-of-memory events",
        MetricId::PeakAllocated | MetricId::EndAllocated => {
            "the profiler trace holds no memory events for this device"
        }
        MetricId::PeakTotal
        | MetricId::PeakParameter
        | MetricId::PeakOptimizerState
        | MetricId::PeakInput
        | MetricId::PeakTemporary
        | MetricId::PeakActivation
        | MetricId::PeakGradient
        | MetricId::PeakAutogradDetail
        | MetricId::PeakUnknown => "a profiler trace records no memory-profiler categories",
    }
}

fn unmeasurable_hint(metric: MetricId, m: &Metrics) -> String {
    if let Some(h) = other_kind_hint(metric, m) {
        return h;
    }
    match m.source {
        crate::analysis::metrics::Source::MemoryTimeline => {
            "the export holds no time step to measure".into()
        }
        // The note says why, once, and what to record instead.
        crate::analysis::metrics::Source::ProfilerTrace if no_gpu(m) => String::new(),
        crate::analysis::metrics::Source::ProfilerTrace => format!(
            "{}; record a memory snapshot to measure {}",
            trace_lacks(metric, m.trace.unwrap_or_default()),
            metric.key()
        ),
        crate::analysis::metrics::Source::Snapshot if m.devices.is_empty() => {
            "the snapshot holds no segments: nothing was reserved".into()
        }
        crate::analysis::metrics::Source::Snapshot => {
            "nothing was reserved in this snapshot, so there is no free gap to measure".into()
        }
    }
}

fn fail_hint(st: &Style, metric: MetricId, m: &Metrics, device: Option<i64>) -> String {
    match metric {
        MetricId::Fragmentation => {
            "Free memory is split into many gaps while memory is tight: try \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, and avoid keeping long-lived tensors allocated \
between short-lived ones."
                .into()
        }
        MetricId::LargestGap => "At the tightest moment no cached free block was this large, so a \
bigger request needs a new cudaMalloc (an OOM when the device is full): \
expandable_segments:True lets segments grow instead of leaving gaps."
            .into(),
        MetricId::PeakReserved | MetricId::EndReserved => {
            let dev = m
                .devices
                .iter()
                .find(|d| Some(d.device) == device)
                .or(m.devices.first());
            let untraced = dev
                .is_some_and(|d| d.timeline == crate::analysis::metrics::Timeline::FinalStateOnly);
            match dev.and_then(|d| Some((d.peak_allocated?, d.peak_reserved?))) {
                Some((a, r)) if untraced && r > 0 && (a as f64) < 0.8 * r as f64 => format!(
                    "In the recorded state {} is allocated ({} of reserved): the rest is cached \
free memory. Look at the fragmentation figures and try expandable_segments:True.",
                    st.bytes(a),
                    fmt_pct(a as f64 / r as f64)
                ),
                Some((a, _)) if untraced => format!(
                    "Live tensors hold {} in the recorded state, most of the reservation: reduce \
batch or sequence size, or use activation checkpointing.",
                    st.bytes(a)
                ),
                Some((a, r)) if r > 0 && (a as f64) < 0.8 * r as f64 => format!(
                    "Allocated memory peaks at {} ({} of peak reserved): the rest is cached free \
memory. Look at the fragmentation figures and try expandable_segments:True.",
                    st.bytes(a),
                    fmt_pct(a as f64 / r as f64)
                ),
                Some((a, _)) => format!(
                    "Live tensors peak at {}, most of the reservation: reduce batch or sequence \
size, or use activation checkpointing.",
                    st.bytes(a)
                ),
                None => "Reduce batch or sequence size, or use activation checkpointing.".into(),
            }
        }
        MetricId::PeakAllocated | MetricId::EndAllocated => "Live tensors exceed the budget: \
reduce batch or sequence size, use activation checkpointing, or keep optimizer state in lower \
precision."
            .into(),
        MetricId::InternalWaste => "Blocks are larger than the requests they serve: check \
roundup_power2_divisions and max_split_size_mb in PYTORCH_CUDA_ALLOC_CONF, and request sizes \
just above a rounding step."
            .into(),
        MetricId::FreeGaps => {
            "More free blocks are scattered between live ones: the same remedies \
as for fragmentation apply (expandable_segments:True)."
                .into()
        }
        MetricId::OomEvents => {
            "The recorded run hit an out-of-memory error; `fragscope oom` explains it.".into()
        }
        MetricId::PeakTotal
        | MetricId::PeakParameter
        | MetricId::PeakOptimizerState
        | MetricId::PeakInput
        | MetricId::PeakTemporary
        | MetricId::PeakActivation
        | MetricId::PeakGradient
        | MetricId::PeakAutogradDetail
        | MetricId::PeakUnknown => category_hint(metric),
    }
}

/// What to try when a memory-timeline figure is over its limit.
fn category_hint(metric: MetricId) -> String {
    let what = match metric.category() {
        None => {
            "Live tensors exceed the budget: `fragscope diff` against an earlier export shows which category grew."
        }
        Some(Category::Parameter) => {
            "Parameters exceed the budget: a smaller model, lower-precision weights, or sharding them across ranks (FSDP)."
        }
        Some(Category::OptimizerState) => {
            "Optimizer state exceeds the budget: a lighter optimizer or lower-precision (8-bit) states, or sharding them across ranks (ZeRO, FSDP)."
        }
        Some(Category::Input) => "Inputs exceed the budget: a smaller batch or sequence length.",
        Some(Category::Temporary) => {
            "Temporaries within an operator exceed the budget: a smaller batch or sequence length, or a fused or chunked kernel."
        }
        Some(Category::Activation) => {
            "Activations kept for backward exceed the budget: activation checkpointing, or a smaller batch or sequence length."
        }
        Some(Category::Gradient) => {
            "Gradients exceed the budget: lower-precision gradients, freeing them early (zero_grad(set_to_none=True)), or sharding them across ranks."
        }
        Some(Category::AutogradDetail) => {
            "Tensors autograd keeps for backward exceed the budget: activation checkpointing, or a smaller batch or sequence length."
        }
        Some(Category::Unknown) => {
            "Tensors the memory profiler could not categorize exceed the budget: `fragscope timeline` on the export shows when."
        }
    };
    what.into()
}

#[cfg(test)]
mod tests {
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
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fragscope.toml");
        std::fs::write(&p, "[check]\nbaseline = \"ci/base.pickle\"\n").unwrap();
        let r = Rules::load(&p).unwrap();
        assert_eq!(r.baseline, Some(d.path().join("ci/base.pickle")));
        let missing = d.path().join("nope.toml");
        let e = Rules::load(&missing).unwrap_err().to_string();
        assert!(e.contains("nope.toml: cannot read the config file"), "{e}");
    }

    #[test]
    fn flags_win_over_the_config() {
        let mut r = Rules::defaults();
        r.merge(
            Rules::from_toml("[check]\nmax_oom_events = 3\nmax_fragmentation = 0.4", "x").unwrap(),
        );
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
        let mut cpu =
            Metrics::from_totals(std::iter::empty::<(i64, Vec<(u64, u64)>, Option<u64>)>());
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
}
