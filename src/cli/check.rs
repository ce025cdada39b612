//! `fragscope check FILE [--baseline BEFORE]`: the CI gate. Exit 0 when every
//! rule holds, 1 when one fails, 2 when an input or the config is unusable.

use super::common::{Exit, Global, print};
use crate::check::{
    CONFIG_FILE, RegressionLimit, RuleKind, Rules, evaluate, parse_limit, parse_regression_flag,
};
use crate::input::{self, Content};
use crate::metrics::{MetricId, Metrics, Quantity};
use crate::render::check as render;
use anyhow::Context;
use std::path::{Path, PathBuf};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A table, then the failed rules with hints.
    Text,
    /// Schema fragscope.check/1.
    Json,
    /// Workflow annotations (::error …) on stdout, and a Markdown summary
    /// appended to $GITHUB_STEP_SUMMARY when it is set.
    Github,
    /// JUnit XML, one test case per rule.
    Junit,
}

fn frag_arg(s: &str) -> Result<Quantity, String> {
    parse_limit(RuleKind::MaxFragmentation, s)
}
fn size_arg(s: &str) -> Result<Quantity, String> {
    parse_limit(RuleKind::MaxPeakReserved, s)
}
fn count_arg(s: &str) -> Result<Quantity, String> {
    parse_limit(RuleKind::MaxOomEvents, s)
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The snapshot or profiler trace to check (any supported form, `-` for
    /// stdin). On a trace, rules on figures it lacks are skipped and say so.
    #[arg(value_name = "FILE")]
    pub file: String,
    /// An earlier run to compare with for the max_regression rules
    /// (overrides `baseline` in the config).
    #[arg(long, value_name = "BEFORE")]
    pub baseline: Option<String>,
    /// Config file with a [check] table (default: ./fragscope.toml when present).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Ignore ./fragscope.toml.
    #[arg(long, conflicts_with = "config")]
    pub no_config: bool,
    /// Worst fragmentation under pressure, as a fraction (0.5) or percentage (50%).
    #[arg(long, value_name = "FRACTION", value_parser = frag_arg)]
    pub max_fragmentation: Option<Quantity>,
    /// Smallest acceptable largest free gap under pressure (e.g. 1GiB).
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub min_largest_gap: Option<Quantity>,
    /// Highest acceptable peak reserved memory (e.g. 40GiB).
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub max_peak_reserved: Option<Quantity>,
    /// Highest acceptable peak allocated memory.
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub max_peak_allocated: Option<Quantity>,
    /// Most rounding waste at one moment.
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub max_internal_waste: Option<Quantity>,
    /// Most OOM events in the trace (default 0).
    #[arg(long, value_name = "N", value_parser = count_arg)]
    pub max_oom_events: Option<Quantity>,
    /// How much worse than the baseline a metric may get: METRIC=5% or an
    /// amount in its unit (peak_reserved=512MiB, fragmentation=0.05).
    /// Repeatable.
    #[arg(long, value_name = "METRIC=LIMIT", value_parser = parse_regression_flag)]
    pub max_regression: Vec<(MetricId, RegressionLimit)>,
    /// Check one device only (default: every device; each figure is the worst device's).
    #[arg(long, value_name = "N")]
    pub device: Option<i64>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report here instead of stdout.
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<String>,
}

/// Metrics of any input `check` and `diff` accept.
pub fn load_metrics(
    path: &str,
    g: &Global,
    device: Option<i64>,
) -> anyhow::Result<(Metrics, Option<crate::model::Snapshot>)> {
    let l = input::load(path, &g.load)?;
    match l.content {
        Content::Snapshot(s) => {
            let m = Metrics::of_snapshot(&s, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, Some(s)))
        }
        Content::Profiler(t) => {
            let m = Metrics::of_trace(&t, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, None))
        }
        Content::MemoryTimeline(_) => anyhow::bail!(
            "{path}: a memory-timeline export has no allocator figures (allocated and reserved bytes): check and diff need a snapshot or a profiler trace"
        ),
    }
}

fn flag_rules(a: &Args) -> Rules {
    let mut r = Rules::default();
    for (rule, v) in [
        (RuleKind::MaxFragmentation, a.max_fragmentation),
        (RuleKind::MinLargestGap, a.min_largest_gap),
        (RuleKind::MaxPeakReserved, a.max_peak_reserved),
        (RuleKind::MaxPeakAllocated, a.max_peak_allocated),
        (RuleKind::MaxInternalWaste, a.max_internal_waste),
        (RuleKind::MaxOomEvents, a.max_oom_events),
    ] {
        if let Some(v) = v {
            r.limits.insert(rule, v);
        }
    }
    r.regressions.extend(a.max_regression.iter().copied());
    r.baseline = a.baseline.as_ref().map(PathBuf::from);
    r
}

pub fn run(a: Args, g: &Global) -> anyhow::Result<Exit> {
    let mut rules = Rules::defaults();
    let config = match (&a.config, a.no_config) {
        (Some(p), _) => Some(p.clone()),
        (None, false) if Path::new(CONFIG_FILE).is_file() => Some(PathBuf::from(CONFIG_FILE)),
        _ => None,
    };
    if let Some(p) = &config {
        rules.merge(Rules::load(p)?);
    }
    let from_config = a.baseline.is_none() && rules.baseline.is_some();
    rules.merge(flag_rules(&a));

    let (current, _) = load_metrics(&a.file, g, a.device)?;
    let baseline_name = rules
        .baseline
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let baseline = match &baseline_name {
        None => None,
        Some(b) => {
            let r = load_metrics(b, g, a.device);
            let r = match (&config, from_config) {
                (Some(c), true) => r.with_context(|| format!("{}: check.baseline", c.display())),
                _ => r.context("--baseline"),
            };
            Some(r?.0)
        }
    };
    let report = evaluate(
        &a.file,
        &current,
        baseline_name.as_deref().zip(baseline.as_ref()),
        &rules,
    );
    let body = match a.format {
        Format::Text => render::text(&report),
        Format::Json => render::json(&report),
        Format::Junit => render::junit(&report),
        Format::Github => {
            if let Some(p) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
                append_summary(Path::new(&p), &render::github_summary(&report))?;
            }
            render::github_annotations(&report) + &render::text(&report)
        }
    };
    match &a.output {
        None => print(&body)?,
        Some(o) => {
            let mut inputs = vec![a.file.clone()];
            inputs.extend(baseline_name.clone());
            crate::output::write_atomic(o, body.as_bytes(), &inputs)?;
        }
    }
    Ok(if report.ok() {
        Exit::Ok
    } else {
        Exit::RuleFailed
    })
}

/// GitHub collects every step's summary by appending to one file, so this is
/// the one output that is appended to rather than replaced.
fn append_summary(path: &Path, md: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("{}: cannot open $GITHUB_STEP_SUMMARY", path.display()))?;
    f.write_all(md.as_bytes())
        .with_context(|| format!("{}: cannot write $GITHUB_STEP_SUMMARY", path.display()))?;
    Ok(())
}
