//! The rules: their kinds, limits and regression allowances, parsed from the config file's text and from the command line.

use super::*;

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

    /// Parses the text of the config file at `path`; a relative
    /// `baseline` is taken from the file's directory. (The command line
    /// reads the file: [`ConfigError::Io`] is its error.)
    pub fn from_config(text: &str, path: &Path) -> Result<Rules, ConfigError> {
        let mut r = Rules::from_toml(text, &path.display().to_string())?;
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

pub(super) fn metric_keys() -> String {
    MetricId::ALL.map(|m| m.key()).join(", ")
}

pub(super) fn category_keys() -> String {
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

pub(super) fn kind(v: &toml::Value) -> &'static str {
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

pub(super) fn limit_from_toml(rule: RuleKind, v: &toml::Value) -> Result<Quantity, String> {
    match (rule.metric().unit(), v) {
        (_, toml::Value::String(s)) => parse_limit(rule, s),
        (Unit::Ratio, toml::Value::Float(f)) => ratio(*f),
        (Unit::Ratio, toml::Value::Integer(i)) => ratio(*i as f64),
        (Unit::Bytes, toml::Value::Integer(i)) if *i >= 0 => Ok(Quantity::Bytes(*i as u64)),
        (Unit::Count, toml::Value::Integer(i)) if *i >= 0 => Ok(Quantity::Count(*i as u64)),
        (u, v) => Err(format!("expected {}, found {}", expected(u), kind(v))),
    }
}

pub(super) fn expected(u: Unit) -> &'static str {
    match u {
        Unit::Bytes => "a size such as \"40GiB\", \"512MiB\" or a byte count",
        Unit::Ratio => "a fraction between 0 and 1 (0.5) or a percentage (\"50%\")",
        Unit::Count => "a count (a non-negative integer)",
    }
}

pub(super) fn ratio(f: f64) -> Result<Quantity, String> {
    if (0.0..=1.0).contains(&f) {
        Ok(Quantity::Ratio(f))
    } else {
        Err(format!(
            "{f} is not a fraction between 0 and 1 (write 0.5 or \"50%\")"
        ))
    }
}

pub(super) fn percent(s: &str) -> Option<Result<f64, String>> {
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

pub(super) fn regression_from_toml(
    metric: MetricId,
    v: &toml::Value,
) -> Result<RegressionLimit, String> {
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
