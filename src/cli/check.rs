//! `fragscope check FILE [--baseline BEFORE]`: the CI gate. Exit 0 when every
//! rule holds, 1 when one fails, 2 when an input or the config is unusable.

use super::common::{Exit, Global, print};
use crate::analysis::check::{
    CONFIG_FILE, RegressionLimit, RuleKind, Rules, evaluate, parse_category_limit_flag,
    parse_limit, parse_regression_flag,
};
use crate::analysis::metrics::{MetricId, Metrics, Quantity};
use crate::input::{self, Content};
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
    /// The snapshot, profiler trace or memory-timeline export to check (any
    /// supported form, `-` for stdin). Rules on figures it lacks are skipped
    /// and say so.
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
    /// Memory-timeline exports: highest acceptable peak of all categories
    /// together (live tensor bytes).
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub max_peak_total: Option<Quantity>,
    /// Memory-timeline exports: highest acceptable peak of one category
    /// (parameter, optimizer_state, input, temporary, activation, gradient,
    /// autograd_detail, unknown), e.g. activation=2GiB. Repeatable.
    #[arg(long, value_name = "CATEGORY=SIZE", value_parser = parse_category_limit_flag)]
    pub max_peak_category: Vec<(crate::input::profiler::memtimeline::Category, Quantity)>,
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
    let (m, content) = load_measured(path, g, device)?;
    match content {
        Content::Snapshot(s) => Ok((m, Some(s))),
        _ => Ok((m, None)),
    }
}

/// The metrics of a snapshot, profiler trace or memory-timeline export and
/// the decoded input itself.
pub fn load_measured(
    path: &str,
    g: &Global,
    device: Option<i64>,
) -> anyhow::Result<(Metrics, Content)> {
    let l = input::load(path, &g.load)?;
    match l.content {
        Content::Snapshot(s) => {
            let m = Metrics::of_snapshot(&s, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, Content::Snapshot(s)))
        }
        Content::Profiler(t) => {
            let m = Metrics::of_trace(&t, device).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            Ok((m, Content::Profiler(t)))
        }
        Content::MemoryTimeline(t) => {
            if device.is_some() {
                anyhow::bail!(
                    "{path}: --device: a memory-timeline export holds one device's tensor bytes, with no device index to choose"
                );
            }
            Ok((Metrics::of_memory_timeline(&t), Content::MemoryTimeline(t)))
        }
    }
}

/// Two inputs compare only when both or neither are memory-timeline
/// exports: the category peaks of one have no counterpart in the
/// allocator figures of the other.
pub fn same_kind(a: (&str, &Metrics), b: (&str, &Metrics), what: &str) -> anyhow::Result<()> {
    use crate::analysis::metrics::Source::MemoryTimeline;
    let kind = |m: &Metrics| {
        if m.source == MemoryTimeline {
            "a memory-timeline export"
        } else {
            "a snapshot or profiler trace"
        }
    };
    if (a.1.source == MemoryTimeline) != (b.1.source == MemoryTimeline) {
        anyhow::bail!(
            "{}: {what}: {} is {} and {} is {}; the per-category peaks of a memory-timeline export compare only with another export (export_memory_timeline(\"x.raw.json.gz\")), the allocator figures only with a snapshot or profiler trace",
            b.0,
            a.0,
            kind(a.1),
            b.0,
            kind(b.1)
        );
    }
    Ok(())
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
        (RuleKind::MaxPeakTotal, a.max_peak_total),
    ] {
        if let Some(v) = v {
            r.limits.insert(rule, v);
        }
    }
    r.category_limits
        .extend(a.max_peak_category.iter().copied());
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
    let mut oom_rule_given = a.max_oom_events.is_some();
    if let Some(p) = &config {
        let from_file = Rules::load(p)?;
        oom_rule_given |= from_file.limits.contains_key(&RuleKind::MaxOomEvents);
        rules.merge(from_file);
    }
    let from_config = a.baseline.is_none() && rules.baseline.is_some();
    rules.merge(flag_rules(&a));

    let (current, _) = load_metrics(&a.file, g, a.device)?;
    // A memory-timeline export records no OOM: the default rule would only
    // ever be skipped. One the user asks for stays, and says why it skips.
    if current.source == crate::analysis::metrics::Source::MemoryTimeline && !oom_rule_given {
        rules.limits.remove(&RuleKind::MaxOomEvents);
    }
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
            let m = r?.0;
            same_kind((b, &m), (&a.file, &current), "baseline")?;
            Some(m)
        }
    };
    let report = evaluate(
        &g.style,
        &a.file,
        &current,
        baseline_name.as_deref().zip(baseline.as_ref()),
        &rules,
    );
    let body = match a.format {
        Format::Text => render::text(&g.style, &report),
        Format::Json => render::json(&report),
        Format::Junit => render::junit(&report),
        Format::Github => {
            if let Some(p) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
                append_summary(Path::new(&p), &render::github_summary(&g.style, &report))?;
            }
            render::github_annotations(&report) + &render::text(&g.style, &report)
        }
    };
    match &a.output {
        None => print(&body)?,
        Some(o) => {
            let mut inputs = vec![a.file.clone()];
            inputs.extend(baseline_name.clone());
            crate::cli::output::write_atomic(o, body.as_bytes(), &inputs)?;
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
